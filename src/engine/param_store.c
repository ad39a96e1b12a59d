/* param_store.c - the parameter store (param_store.h): which placement holds the master, where
 * parameter i's local data starts, element access in any placement, whole tensors in and out
 * (the public zt_engine_param_* calls), and a unit's parameters acquired for compute (zero3's
 * gather with its prefetch, the compute copies) and released. The placements' own code lives in
 * param_bf16.c (bf16), master_shard.c (master pieces), param_offload.c (file), compute_copy.c and
 * param_quant.c (the quantized base, beside the master of the other parameters). */
#include "engine/param_store_internal.h"
#include "engine/init.h"
#include "kernels/kernels.h"
#include "memory/plan.h"
#include "offload/nvme_store.h"
#include "shard/tp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- life ---------------------------------------------------------------------------------- */

zt_param_store *zt_store_new(void) {
    zt_param_store *ps = calloc(1, sizeof *ps);
    if (ps) ps->file_kind = -1;
    return ps;
}

int zt_store_create(zt_engine *e, zt_error *err) {
    const zt_plan *pl = &e->plan;
    const zt_engine_options *opt = &e->opt;
    zt_param_store *ps = e->ps;
    size_t n = (size_t)e->model->n_params;
    ps->gathered = calloc(n, sizeof *ps->gathered);
    ps->gather_seq = calloc(n, sizeof *ps->gather_seq);
    if (!ps->gathered || !ps->gather_seq) return zt_error_set(err, ZT_ERR_NOMEM, "engine: out of memory");
    ps->bf16 = opt->precision.params == ZT_DTYPE_BF16;
    if (e->param_dir && (!e->shard_params || ps->bf16))
        return zt_error_set(err, ZT_ERR_USAGE, "engine: parameter offload (memory.offload_param nvme) keeps zero3's "
                            "fp32 parameter pieces in files: it needs strategy zero3 (or hybrid over zero3) and "
                            "fp32 parameters, not %s%s", zt_strategy_name(opt->strategy),
                            ps->bf16 ? " with bf16-low's bf16 parameters" : "");
    ps->master_pieces = zt_master_sharded(opt, e->shard_optim, e->shard_params);
    int rc = zt_quant_alloc(e, err); /* the quantized base, if any, beside the master */
    if (rc) return rc;
    if (ps->bf16) return zt_param_bf16_alloc(e, err);              /* bf16-low: 2-byte parameters */
    if (ps->master_pieces) return zt_master_alloc(e, err);       /* zero1/zero2 under bf16/fp16 compute */
    if (e->shard_params && e->param_dir) return ZT_OK;           /* the pieces live in a file */
    size_t floats = e->shard_params ? pl->shard_floats : pl->full_floats;
    float **dst = e->shard_params ? &ps->pieces : &ps->full;
    if (!(*dst = zt_engine_alloc(e, floats, &e->mem.params, e->shard_params ? "the parameter pieces" : "the parameters")))
        return zt_engine_oom(e, err, "engine: laying out model %s (%lld parameters, B=%d T=%d, %s)", e->model->name,
                             (long long)zt_model_numel(e->model), opt->B, opt->T, zt_strategy_name(opt->strategy));
    memset(*dst, 0, floats * sizeof(float));
    return ZT_OK;
}

int zt_store_units_setup(zt_engine *e, zt_error *err) {
    const zt_model *m = e->model;
    zt_param_store *ps = e->ps;
    /* what each unit reads as fp32 for good (a parameter it reads through params_lp gets NULL;
     * zero3 points at the gathered tensors, bf16-low at the views of param_bf16.c, as the unit runs) */
    for (int u = 0; u < m->n_units && !e->shard_params && !ps->bf16; u++) {
        const zt_unit *un = &m->units[u];
        for (int k = 0; k < un->n_params; k++)
            if (!zt_unit_reads_lp(m, e->lp_kind, u, k) && !zt_store_quantized(e, un->params[k]))
                e->units[u].params[k] = ps->full ? ps->full + e->plan.p[un->params[k]].full_off
                                                 : zt_master_fp32_view(e, un->params[k]);
    }
    return zt_copies_setup(e, err);
}

void zt_store_free(zt_engine *e) {
    zt_param_store *ps = e->ps;
    if (!ps) return;
    if (e->units && e->model)
        for (int u = 0; u < e->model->n_units; u++)
            if (ps->bf16 && e->units[u].params) zt_store_views_free(e, u);
    zt_copies_free(e);
    zt_residency_free(&ps->res);
    if (ps->gathered)
        for (int i = 0; i < e->model->n_params; i++) free(ps->gathered[i]);
    free(ps->gathered);
    free(ps->gather_seq);
    free(ps->full);
    free(ps->pieces);
    zt_master_free(e);
    zt_param_bf16_free(e);
    zt_quant_free(e);
    free(ps);
    e->ps = NULL;
}

int zt_store_init(zt_engine *e, int i, uint64_t key, zt_error *err) {
    const zt_plan *pl = &e->plan;
    const zt_param_desc *p = &e->model->params[i];
    zt_param_store *ps = e->ps;
    if (zt_store_quantized(e, i)) return zt_quant_init(e, i, key, err); /* the whole tensor, quantized */
    if (ps->bf16) { /* bf16-low: the same values rounded to bf16 (nearest-even) */
        zt_param_bf16_init(e, i, key);
    } else if (ps->master_pieces) { /* the pieces, and every rank's compute copies */
        zt_master_init(e, i, key);
    } else if (ps->file_kind >= 0) { /* the pieces in their file, through the idle staging memory */
        size_t cap, n = (size_t)zt_plan_shard_numel(pl, i, pl->p[i].shard);
        float *buf = zt_nvme_store_scratch(e->nvme, &cap);
        int64_t begin = zt_plan_shard_begin(pl, i, pl->p[i].shard);
        for (size_t done = 0; done < n; done += cap) {
            size_t len = n - done < cap ? n - done : cap;
            zt_init_fill(buf, p, begin + (int64_t)done, (int64_t)len, key);
            int rc = zt_param_offload_write(e, i, done, len, buf, err);
            if (rc) return zt_error_prefix(err, "initializing %s", p->name);
        }
        int rc = zt_param_offload_seal(e, i, err); /* the first gathers check what init wrote */
        if (rc) return zt_error_prefix(err, "initializing %s", p->name);
    } else { /* only this rank's rows: the values do not depend on the sharding */
        zt_init_fill(zt_store_local_fp32(e, i), p, zt_store_local_begin(e, i), (int64_t)zt_store_local_numel(e, i), key);
    }
    ps->lp_stale = true;
    return ZT_OK;
}

/* ---- where the master lives ------------------------------------------------------------------ */

bool zt_store_bf16(const zt_engine *e) { return e->ps->bf16; }
bool zt_store_local_is_piece(const zt_engine *e) { return e->shard_params || e->ps->master_pieces; }
bool zt_store_master_pieces(const zt_engine *e) { return e->ps->master_pieces; }
int zt_store_file_kind(const zt_engine *e) { return e->ps->file_kind; }
void zt_store_set_file_kind(zt_engine *e, int kind) { e->ps->file_kind = kind; }

float *zt_store_local_fp32(zt_engine *e, int i) {
    const zt_param_plan *p = &e->plan.p[i];
    zt_param_store *ps = e->ps;
    if (zt_store_quantized(e, i)) return NULL;
    return ps->pieces ? ps->pieces + p->shard_off : ps->full ? ps->full + p->full_off : NULL;
}

int64_t zt_store_local_begin(const zt_engine *e, int i) {
    return zt_store_local_is_piece(e) && !zt_store_quantized(e, i) ? zt_plan_shard_begin(&e->plan, i, e->plan.p[i].shard) : 0;
}

size_t zt_store_local_numel(const zt_engine *e, int i) {
    return zt_store_local_is_piece(e) && !zt_store_quantized(e, i) ? (size_t)zt_plan_shard_numel(&e->plan, i, e->plan.p[i].shard)
                                      : (size_t)e->model->params[i].numel;
}

/* ---- element access ------------------------------------------------------------------------ */

int zt_store_read(zt_engine *e, int i, size_t begin, size_t n, float *dst, zt_error *err) {
    zt_param_store *ps = e->ps;
    if (zt_store_quantized(e, i)) return zt_quant_read(e, i, begin, n, dst, err); /* dequantized */
    if (ps->file_kind >= 0) return zt_param_offload_read(e, i, begin, n, dst, err); /* in a file */
    if (ps->bf16)
        zt_bf16_to_f32(dst, zt_param_bf16_local(e, i) + begin, n);
    else
        memcpy(dst, zt_store_local_fp32(e, i) + begin, n * sizeof(float));
    return ZT_OK;
}

int zt_store_write(zt_engine *e, int i, size_t begin, size_t n, const float *src, zt_error *err) {
    zt_param_store *ps = e->ps;
    if (zt_store_quantized(e, i)) return zt_quant_write(e, i, begin, n, src, err); /* quantized again */
    ps->lp_stale = true;
    if (ps->file_kind >= 0) return zt_param_offload_write(e, i, begin, n, src, err);
    if (ps->bf16)
        zt_f32_to_bf16(zt_param_bf16_local(e, i) + begin, src, n);
    else
        memcpy(zt_store_local_fp32(e, i) + begin, src, n * sizeof(float));
    return ZT_OK;
}

float *zt_store_bounce(zt_engine *e, size_t *floats) {
    zt_param_store *ps = e->ps;
    if (ps->file_kind >= 0) return zt_nvme_store_scratch(e->nvme, floats); /* pieces in a file */
    *floats = ps->chunk_buf ? ps->chunk : 0;
    return ps->chunk_buf;
}

int zt_store_set(zt_engine *e, int i, const float *local, zt_error *err) {
    zt_param_store *ps = e->ps;
    size_t n = zt_store_local_numel(e, i);
    const char *src = (const char *)(local + zt_store_local_begin(e, i)); /* read with memcpy: any alignment */
    if (zt_store_quantized(e, i)) return zt_quant_write(e, i, 0, n, local, err); /* the whole tensor */
    if (ps->master_pieces) { /* the piece, and the compute copies from the whole tensor */
        float chunk[4096];
        size_t numel = (size_t)e->model->params[i].numel;
        memcpy(zt_store_local_fp32(e, i), src, n * sizeof(float));
        for (size_t done = 0; done < numel; done += 4096) {
            size_t len = numel - done < 4096 ? numel - done : 4096;
            memcpy(chunk, (const char *)local + done * sizeof(float), len * sizeof(float));
            zt_store_copies_write(e, i, done, len, chunk);
        }
        return ZT_OK;
    }
    ps->lp_stale = true;
    float *dst = zt_store_local_fp32(e, i);
    if (dst) {
        memcpy(dst, src, n * sizeof(float));
        return ZT_OK;
    }
    size_t cap; /* bf16 or a file: through the update chunk or the idle staging memory */
    float *buf = zt_store_bounce(e, &cap);
    for (size_t done = 0; done < n; done += cap) {
        size_t len = n - done < cap ? n - done : cap;
        memcpy(buf, src + done * sizeof(float), len * sizeof(float));
        int rc = zt_store_write(e, i, done, len, buf, err);
        if (rc) return rc;
    }
    return ps->file_kind >= 0 ? zt_param_offload_seal(e, i, err) : ZT_OK;
}

int zt_store_gather(zt_engine *e, int i, float *dst, zt_error *err) {
    if (zt_store_quantized(e, i)) return zt_quant_gather(e, i, dst, err); /* sharded: the blocks gathered */
    if (zt_store_local_is_piece(e)) return zt_engine_gather_param(e, i, dst, err); /* from the pieces */
    return zt_store_read(e, i, 0, (size_t)e->model->params[i].numel, dst, err);
}

/* ---- the units ---------------------------------------------------------------------------- */

/* The residency's actions (src/memory/residency.c decides what and when; the memory plan follows
 * the same rules over sizes). */
static int res_alloc_gathered(void *ctx, int u, int i, zt_error *err) {
    zt_engine *e = ctx;
    zt_param_store *ps = e->ps;
    size_t n = (size_t)e->model->params[i].numel;
    char what[160];
    snprintf(what, sizeof what, "gathered %s", e->model->params[i].name);
    void *p = ps->bf16 ? (ps->gathered_lp[i] = zt_engine_alloc(e, zt_memory_floats_for_bytes(n * sizeof(uint16_t)),
                                                               &e->mem.gathered, what))
                       : (ps->gathered[i] = zt_engine_alloc(e, n, &e->mem.gathered, what));
    return p ? ZT_OK : zt_engine_oom(e, err, "zero3: gathering unit %s", e->model->units[u].name);
}

/* In the communication thread when there is one (the gather then overlaps the compute until
 * res_wait), else here and now. */
static int res_gather(void *ctx, int u, const int *params, int n, bool async, zt_error *err) {
    zt_engine *e = ctx;
    const char *tag = e->model->units[u].name;
    if (!async) return zt_engine_gather_params(e, params, n, tag, err);
    uint64_t seq;
    int rc = zt_overlap_submit_gather(e, params, n, tag, &seq, err);
    for (int j = 0; j < n && !rc; j++) e->ps->gather_seq[params[j]] = seq;
    return rc;
}

static int res_wait(void *ctx, int u, zt_error *err) {
    zt_engine *e = ctx;
    const zt_unit *un = &e->model->units[u];
    uint64_t need = 0;
    for (int k = 0; k < un->n_params; k++)
        if (e->ps->gather_seq[un->params[k]] > need) need = e->ps->gather_seq[un->params[k]];
    return need ? zt_overlap_wait(e, need, err) : ZT_OK;
}

static int res_make_copy(void *ctx, int u, int i, zt_error *err) { return zt_copies_make(ctx, u, i, err); }

static void res_release(void *ctx, int i, bool copy, bool gathered) {
    zt_engine *e = ctx;
    (void)copy, (void)gathered; /* bf16-low's gathered tensor is its copy: both free what is there */
    zt_copies_release(e, i);
    zt_engine_release(e, &e->ps->gathered[i], (size_t)e->model->params[i].numel, &e->mem.gathered);
}

static int res_window_make(void *ctx, int u, const int *params, int n, size_t floats, zt_error *err) {
    return zt_param_offload_window(ctx, u, params, n, floats, err);
}

static void res_window_release(void *ctx, int u) { zt_param_offload_window_release(ctx, u); }

static const zt_residency_ops RESIDENCY_OPS = {
    .alloc_gathered = res_alloc_gathered, .gather = res_gather, .wait = res_wait, .make_copy = res_make_copy,
    .release = res_release, .window_make = res_window_make, .window_release = res_window_release,
};

int zt_store_start(zt_engine *e, zt_error *err) {
    zt_param_store *ps = e->ps;
    const zt_engine_options *o = &e->opt;
    zt_residency_options ro = {.gathers = e->shard_params, .async = e->overlap != NULL, .prefetch = !o->no_prefetch,
                               .copies = e->shard_params && e->lp_kind && !ps->bf16,
                               .keep_after_forward = o->keep_params_after_forward, .windows = ps->file_kind >= 0,
                               .param_prefetch = o->offload.param_prefetch, .max_live = o->offload.param_max_live};
    return zt_residency_init(&ps->res, e->model, &e->plan, &ro, &RESIDENCY_OPS, e, err);
}

int zt_store_acquire(zt_engine *e, int u, int next, zt_error *err) {
    int rc = zt_residency_acquire(&e->ps->res, u, next, err);
    if (rc) return rc;
    const zt_unit *un = &e->model->units[u];
    unit_state *s = &e->units[u];
    for (int k = 0; k < un->n_params && e->shard_params; k++) /* NULL: read through params_lp */
        s->params[k] = zt_unit_reads_lp(e->model, e->lp_kind, u, k) ? NULL : e->ps->gathered[un->params[k]];
    zt_copies_refresh_unit(e, u);
    return zt_quant_acquire(e, u, err); /* the quantized base's matrices, dequantized */
}

void zt_store_after_forward(zt_engine *e, int u, bool training) {
    zt_quant_release(e, u);
    zt_residency_after_forward(&e->ps->res, u, training);
}

void zt_store_after_backward(zt_engine *e, int u) {
    zt_quant_release(e, u);
    zt_residency_after_backward(&e->ps->res, u);
}

/* ---- after an update ------------------------------------------------------------------------ */

void zt_store_changed(zt_engine *e) { e->ps->lp_stale = true; }

int zt_store_loaded(zt_engine *e, zt_error *err) {
    e->ps->lp_stale = true;
    for (int i = 0; i < e->model->n_params && e->ps->file_kind >= 0; i++) {
        if (zt_store_quantized(e, i)) continue; /* in memory, not in the file */
        int rc = zt_param_offload_seal(e, i, err);
        if (rc) return rc;
    }
    return ZT_OK;
}

bool zt_store_copies_fusable(const zt_engine *e) {
    const zt_param_store *ps = e->ps;
    return ps->full_lp && !ps->lp_stale && ps->full && !e->shard_optim;
}

int zt_store_after_update(zt_engine *e, bool copies_written, zt_error *err) {
    zt_param_store *ps = e->ps;
    ps->lp_stale = !copies_written; /* fused: every updated matrix's copy written, the frozen ones unchanged */
    if (ps->master_pieces) return zt_master_refresh(e, err); /* the compute copies from the pieces */
    if (e->shard_optim && !e->shard_params && e->plan.nshards > 1) return zt_engine_all_gather_full(e, err);
    return ZT_OK;
}

/* ---- what the collectives move ----------------------------------------------------------------- */

const void *zt_store_pieces(const zt_engine *e, size_t *elem) {
    const zt_param_store *ps = e->ps;
    *elem = ps->bf16 ? sizeof(uint16_t) : sizeof(float);
    return ps->bf16 ? (const void *)ps->pieces_bf16 : (const void *)ps->pieces;
}

void **zt_store_gathered_slots(zt_engine *e) {
    return e->ps->bf16 ? e->ps->gathered_lp : (void **)e->ps->gathered;
}

void *zt_store_full_at(zt_engine *e, int i) {
    zt_param_store *ps = e->ps;
    size_t off = e->plan.p[i].full_off;
    return ps->bf16 ? (void *)(ps->full_bf16 + off) : (void *)(ps->full + off);
}

/* ---- the public accessors (zerotrain.h) --------------------------------------------------------- */

float *zt_engine_param_local(zt_engine *e, int idx, int64_t *begin, int64_t *numel) {
    e->ps->lp_stale = true; /* the caller may write through the pointer */
    if (begin) *begin = zt_store_local_begin(e, idx);
    if (numel) *numel = (int64_t)zt_store_local_numel(e, idx);
    return zt_store_bf16(e) ? NULL : zt_store_local_fp32(e, idx);
}

int zt_engine_param_set(zt_engine *e, int idx, const float *full, zt_error *err) {
    if (idx < 0 || idx >= e->model->n_params)
        return zt_error_set(err, ZT_ERR_USAGE, "engine: no parameter %d (model %s has %d)", idx, e->model->name,
                            e->model->n_params);
    const zt_param_desc *p = &e->model->params[idx];
    if (!zt_param_cut(p)) return zt_store_set(e, idx, full, err);
    float *local = malloc((size_t)p->numel * sizeof *local); /* this part of the logical tensor */
    if (!local) return zt_error_set(err, ZT_ERR_NOMEM, "setting %s: out of memory", p->name);
    zt_tp_take(p, p->tp_part, full, local);
    int rc = zt_store_set(e, idx, local, err);
    free(local);
    return rc;
}

float *zt_engine_param(zt_engine *e, int idx) {
    e->ps->lp_stale = true;
    return e->ps->full && !zt_store_quantized(e, idx) ? e->ps->full + e->plan.p[idx].full_off : NULL;
}

int zt_engine_param_gather(zt_engine *e, int idx, float *dst, zt_error *err) {
    const zt_param_desc *p = &e->model->params[idx];
    if (!zt_param_cut(p)) return zt_store_gather(e, idx, dst, err);
    float *local = malloc((size_t)p->numel * sizeof *local);
    if (!local) return zt_error_set(err, ZT_ERR_NOMEM, "gathering %s: out of memory", p->name);
    int rc = zt_store_gather(e, idx, local, err);
    if (!rc) rc = zt_engine_tp_to_logical(e, idx, local, dst, err);
    free(local);
    return rc;
}
