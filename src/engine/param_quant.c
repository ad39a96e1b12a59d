/* param_quant.c - the parameter store's quantized placement: QLoRA's frozen base (param_store.h).
 *
 * A frozen Linear weight marked zt_param_desc.quant (zt_model_add_lora with base_quant: every
 * adaptable Linear of the blocks) has no fp32 or bf16 master at all: the shard plan gives it no
 * room in its layouts, and the store keeps its quantized form instead, NF4 or int8 as the
 * kernels lay them out (src/kernels/quant_nf4.c, quant_int8.c), every such parameter's bytes in
 * one allocation (class params). A frozen parameter is never reduced or updated; ddp, zero1 and
 * zero2 replicate the bytes, zero3 and hybrid shard them over the shard group on whole blocks
 * (memory/plan.h zt_memory_quant_split: each rank its blocks' codes and scales, NF4's tiny
 * second-level scales on every rank), as FSDP shards bitsandbytes' flat Params4bit. The values
 * are quantized once, from whole tensors: the counter-based init, a weights file, a Hugging Face
 * directory (zt_store_set), so every rank and every strategy holds the same bytes (a shard keeps
 * its part of them).
 *
 * A unit gets each of its quantized parameters dequantized into the compute dtype just before it
 * runs (zt_store_acquire: bf16 bits through params_lp under bf16 compute, fp32 holding fp16 values
 * under fp16, fp32 through params under fp32) and drops it after its forward and after its
 * backward (zt_store_after_forward / _after_backward), class gathered. Sharded, the whole form is
 * all-gathered first (two all-gathers on the shard group, on the main thread: the codes' pieces
 * and the scales' pieces, each rank's piece whole 4-byte words), dequantized, and dropped at once:
 * the memory plan counts this shard's bytes, one unit's dequantized matrices and one whole form
 * (memory/plan.c dequant).
 *
 * Element access (checkpoints' readers, the parameter hash, exports) dequantizes to fp32 (sharded:
 * through zt_quant_gather, a collective, as zero3's pieces are); a write must give the whole
 * tensor, which is quantized again. Checkpoints do not save these tensors: the manifest records
 * how each was quantized and the xxh64 of its whole bytes (zt_store_quant_hash, kept from the
 * quantization, so a sharded rank has it too), which a resume checks against the base it
 * quantized itself. */
#include "engine/param_store_internal.h"
#include "comm/comm.h"
#include "engine/init.h"
#include "kernels/kernels.h"
#include "memory/plan.h"
#include "obs/trace.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

bool zt_store_quantized(const zt_engine *e, int i) { return e->model->params[i].quant != ZT_QUANT_NONE; }

/* the shard group the bytes are split over: zero3/hybrid's, else one (replicated) */
static int quant_shards(const zt_engine *e) { return e->shard_params ? e->plan.nshards : 1; }
static int quant_shard(const zt_engine *e) { return e->shard_params ? e->plan.shard : 0; }
static bool sharded(const zt_engine *e) { return quant_shards(e) > 1; }

int zt_quant_alloc(zt_engine *e, zt_error *err) {
    const zt_model *m = e->model;
    zt_param_store *ps = e->ps;
    size_t floats = zt_memory_quant_local_floats(m, quant_shards(e), quant_shard(e)), at = 0;
    if (!floats) return ZT_OK;
    if (!(ps->quant_off = malloc((size_t)m->n_params * sizeof *ps->quant_off)) ||
        !(ps->quant_hash = calloc((size_t)m->n_params, sizeof *ps->quant_hash)) ||
        !(ps->deq = calloc((size_t)m->n_params, sizeof *ps->deq)))
        return zt_error_set(err, ZT_ERR_NOMEM, "engine: out of memory");
    for (int i = 0; i < m->n_params; i++) {
        size_t b = zt_memory_quant_local_bytes(&m->params[i], quant_shards(e), quant_shard(e));
        ps->quant_off[i] = b ? at : SIZE_MAX;
        at += b;
    }
    if (!(ps->quant = (uint8_t *)zt_engine_alloc(e, floats, &e->mem.params, "the quantized base")))
        return zt_engine_oom(e, err, "engine: the %s base of model %s (%zu bytes%s)",
                             zt_quant_name((zt_quant)m->lora->base_quant), m->name, at,
                             sharded(e) ? ", this rank's blocks" : "");
    memset(ps->quant, 0, at);
    return ZT_OK;
}

void zt_quant_free(zt_engine *e) {
    zt_param_store *ps = e->ps;
    if (ps->deq)
        for (int i = 0; i < e->model->n_params; i++) free(ps->deq[i]);
    free(ps->deq);
    free(ps->quant);
    free(ps->quant_off);
    free(ps->quant_hash);
    ps->deq = NULL;
    ps->quant = NULL;
    ps->quant_off = NULL;
    ps->quant_hash = NULL;
}

static int64_t cols_of(const zt_param_desc *p) { return p->numel / p->shape[0]; }

/* parameter i's whole tensor w (numel fp32) quantized: the whole form hashed, this shard's bytes
 * kept (its two ranges, then the tail) */
static int quantize(zt_engine *e, int i, const float *w, zt_error *err) {
    const zt_param_desc *p = &e->model->params[i];
    zt_quant_split sp;
    zt_memory_quant_split(p, quant_shards(e), quant_shard(e), &sp);
    uint8_t *local = e->ps->quant + e->ps->quant_off[i];
    uint8_t *q = sharded(e) ? malloc(sp.whole) : local; /* (the whole form once, at start) */
    if (!q) return zt_error_set(err, ZT_ERR_NOMEM, "quantizing %s: out of memory", p->name);
    if (p->quant == ZT_QUANT_NF4) zt_nf4_quantize(q, w, p->numel);
    else zt_int8_quantize(q, w, p->shape[0], cols_of(p));
    e->ps->quant_hash[i] = XXH64(q, sp.whole, 0);
    if (q != local) {
        uint8_t *at = local;
        for (int r = 0; r < 2; r++) {
            memcpy(at, q + sp.begin_s[r], sp.end_s[r] - sp.begin_s[r]);
            at += sp.end_s[r] - sp.begin_s[r];
        }
        memcpy(at, q + sp.tail_off, sp.tail);
        free(q);
    }
    return ZT_OK;
}

/* Sharded: parameter i's whole form into whole (sp.whole bytes, 4-byte aligned) from every shard's
 * bytes: each region's pieces all-gathered in shard order (they lie back to back in the whole
 * form), the tail copied from this rank's. A collective over the shard group. */
static int gather_whole(zt_engine *e, int i, uint8_t *whole, zt_error *err) {
    const zt_param_desc *p = &e->model->params[i];
    int N = quant_shards(e), me = quant_shard(e);
    zt_quant_split mine;
    zt_memory_quant_split(p, N, me, &mine);
    const uint8_t *at = e->ps->quant + e->ps->quant_off[i];
    size_t counts[N];
    double t0 = omp_get_wtime();
    for (int r = 0; r < 2; r++) {
        for (int s = 0; s < N; s++) {
            zt_quant_split o;
            zt_memory_quant_split(p, N, s, &o);
            counts[s] = (o.end_s[r] - o.begin_s[r]) / sizeof(float);
        }
        int rc = zt_all_gather_f32(e->shard_comm, (const float *)(const void *)at,
                                   (float *)(void *)(whole + mine.off[r]), counts, p->name, err);
        if (rc) return rc;
        at += mine.end_s[r] - mine.begin_s[r];
    }
    memcpy(whole + mine.tail_off, at, mine.tail);
    e->comm_s += omp_get_wtime() - t0;
    return ZT_OK;
}

/* the whole form q of parameter i dequantized to fp32 */
static void dequantize_f32(const zt_engine *e, int i, const uint8_t *q, float *out) {
    const zt_param_desc *p = &e->model->params[i];
    if (p->quant == ZT_QUANT_NF4) zt_nf4_dequantize(out, q, p->numel);
    else zt_int8_dequantize(out, q, p->shape[0], cols_of(p));
}

int zt_quant_write(zt_engine *e, int i, size_t begin, size_t n, const float *src, zt_error *err) {
    const zt_param_desc *p = &e->model->params[i];
    if (begin != 0 || n != (size_t)p->numel)
        return zt_error_set(err, ZT_ERR_INTERNAL, "%s: the %s base is quantized from whole tensors, not elements "
                            "[%zu, %zu) of %lld", p->name, zt_quant_name((zt_quant)p->quant), begin, begin + n,
                            (long long)p->numel);
    return quantize(e, i, src, err);
}

int zt_quant_read(zt_engine *e, int i, size_t begin, size_t n, float *dst, zt_error *err) {
    const zt_param_desc *p = &e->model->params[i];
    if (sharded(e))
        return zt_error_set(err, ZT_ERR_INTERNAL, "%s: the %s base is sharded over %d ranks: read it through "
                            "zt_store_gather (a collective)", p->name, zt_quant_name((zt_quant)p->quant), quant_shards(e));
    const uint8_t *q = e->ps->quant + e->ps->quant_off[i];
    if (begin == 0 && n == (size_t)p->numel) {
        dequantize_f32(e, i, q, dst);
        return ZT_OK;
    }
    float *all = malloc((size_t)p->numel * sizeof *all); /* a part: the whole tensor, then the range */
    if (!all) return zt_error_set(err, ZT_ERR_NOMEM, "reading %s: out of memory", p->name);
    dequantize_f32(e, i, q, all);
    memcpy(dst, all + begin, n * sizeof *dst);
    free(all);
    return ZT_OK;
}

int zt_quant_gather(zt_engine *e, int i, float *dst, zt_error *err) {
    const zt_param_desc *p = &e->model->params[i];
    if (!sharded(e)) return zt_quant_read(e, i, 0, (size_t)p->numel, dst, err);
    uint8_t *whole = malloc(zt_memory_quant_whole_floats(p) * sizeof(float)); /* outside the steps */
    if (!whole) return zt_error_set(err, ZT_ERR_NOMEM, "gathering %s: out of memory", p->name);
    int rc = gather_whole(e, i, whole, err);
    if (!rc) dequantize_f32(e, i, whole, dst);
    free(whole);
    return rc;
}

int zt_quant_init(zt_engine *e, int i, uint64_t key, zt_error *err) {
    const zt_param_desc *p = &e->model->params[i];
    float *w = malloc((size_t)p->numel * sizeof *w); /* the whole tensor once, at start */
    if (!w) return zt_error_set(err, ZT_ERR_NOMEM, "initializing %s: out of memory", p->name);
    zt_init_fill(w, p, 0, p->numel, key);
    int rc = quantize(e, i, w, err);
    free(w);
    return rc;
}

uint64_t zt_store_quant_hash(const zt_engine *e, int i) {
    return e->model->params[i].quant && e->ps->quant_hash ? e->ps->quant_hash[i] : 0;
}

int zt_quant_acquire(zt_engine *e, int u, zt_error *err) {
    zt_param_store *ps = e->ps;
    if (!ps->quant) return ZT_OK;
    const zt_unit *un = &e->model->units[u];
    unit_state *s = &e->units[u];
    for (int k = 0; k < un->n_params; k++) {
        int i = un->params[k];
        const zt_param_desc *p = &e->model->params[i];
        if (!p->quant) continue;
        if (!ps->deq[i]) { /* (a unit that failed keeps its operands: they hold the same values) */
            char what[160];
            const uint8_t *q = ps->quant + ps->quant_off[i];
            float *whole = NULL; /* sharded: the whole form, gathered for the dequantization only */
            size_t whole_floats = zt_memory_quant_whole_floats(p);
            if (sharded(e)) {
                snprintf(what, sizeof what, "the gathered %s %s", zt_quant_name((zt_quant)p->quant), p->name);
                if (!(whole = zt_engine_alloc(e, whole_floats, &e->mem.gathered, what)))
                    return zt_engine_oom(e, err, "unit %s", un->name);
                zt_trace_begin("gather", p->name);
                int rc = gather_whole(e, i, (uint8_t *)whole, err);
                zt_trace_end();
                if (rc) {
                    zt_engine_release(e, &whole, whole_floats, &e->mem.gathered);
                    return rc;
                }
                q = (const uint8_t *)whole;
            }
            snprintf(what, sizeof what, "the dequantized %s", p->name);
            if (!(ps->deq[i] = zt_engine_alloc(e, zt_memory_dequant_floats(p, e->lp_kind), &e->mem.gathered, what))) {
                if (whole) zt_engine_release(e, &whole, whole_floats, &e->mem.gathered);
                return zt_engine_oom(e, err, "unit %s", un->name);
            }
            zt_trace_begin("dequantize", p->name); /* (bench/qlora.sh: the dequantization's share of a step) */
            if (e->lp_kind == ZT_LP_BF16) {
                if (p->quant == ZT_QUANT_NF4) zt_nf4_dequantize_bf16(ps->deq[i], q, p->numel);
                else zt_int8_dequantize_bf16(ps->deq[i], q, p->shape[0], cols_of(p));
            } else {
                dequantize_f32(e, i, q, ps->deq[i]);
                if (e->lp_kind == ZT_LP_FP16) zt_round_fp16(ps->deq[i], ps->deq[i], (size_t)p->numel);
            }
            zt_trace_end();
            if (whole) zt_engine_release(e, &whole, whole_floats, &e->mem.gathered);
        }
        if (e->lp_kind) s->params_lp[k] = ps->deq[i];
        else s->params[k] = ps->deq[i];
    }
    return ZT_OK;
}

void zt_quant_release(zt_engine *e, int u) {
    zt_param_store *ps = e->ps;
    if (!ps->quant) return;
    const zt_unit *un = &e->model->units[u];
    for (int k = 0; k < un->n_params; k++) {
        int i = un->params[k];
        if (!e->model->params[i].quant || !ps->deq[i]) continue;
        zt_engine_release(e, (float **)&ps->deq[i], zt_memory_dequant_floats(&e->model->params[i], e->lp_kind),
                          &e->mem.gathered);
        if (e->lp_kind) e->units[u].params_lp[k] = NULL;
        else e->units[u].params[k] = NULL;
    }
}
