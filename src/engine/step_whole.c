/* step_whole.c - the optimizer steps that need whole tensors while each rank holds only pieces:
 * Muon (its momentum updated on the pieces, each matrix gathered whole to one owning rank,
 * orthogonalized there once, the update sent back) with AdamW on the other parameters, and LAMB
 * (the Adam moments on the pieces, the whole-tensor norms of the parameter and the update from
 * fixed-chunk partials, as the gradient norm's, then the scaled update). Every strategy and world
 * size gives the bits of one process: the elementwise parts do not depend on the cut, the
 * orthogonalization runs on the whole matrix in one fixed way (src/optim/muon.c), and the norms
 * are in-order sums of the same chunks. Under tensor parallelism a cut matrix or tensor is first
 * made whole within the part (the dp gather), then gathered over the tp group in the logical
 * layout (tp_group.c): Muon orthogonalizes the logical matrix once and each part takes its own
 * elements of the update back; LAMB takes the logical tensor's chunk partials, so its norms are one
 * process's. The experts stored E/ep a rank (docs/parallelism.md) are cut the same way over the
 * ep group (zt_param_desc.ep_parts), their pieces over the expert-data-parallel ranks: Muon
 * orthogonalizes the logical stacked matrix as one process does (every rank of the group gathers
 * it, the round's owner sends the update to the group whole, each rank takes its part), LAMB
 * takes the logical tensor's chunks restarting at each expert, as one process numbers them. A
 * pipeline stage steps its own tensors alone. Under bf16-low each slice is widened to
 * fp32 for its update and narrowed back. With offload the elementwise parts run in the two
 * streams of step_streamed.c and only Muon's rounds here (reading U from, and writing the update
 * to, the state's second kind). docs/optimizer.md. */
#include "engine/engine_internal.h"
#include "comm/comm.h"
#include "kernels/kernels.h"
#include "memory/plan.h"
#include "optim/optim.h"
#include "shard/tp.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

/* Parameter i's slice this rank updates: its local fp32 elements, gradient and state (m, v).
 * Under bf16-low the parameter and the moments are bf16: the slice is widened into fp32 buffers
 * (e->low_f32, 3 x the largest slice, planned) and slice_store narrows it back after the update,
 * exactly, since every update rounds them to bf16 values (zt_engine_round_updated). */
typedef struct slice {
    float *w, *m, *v;
    const float *g;
    size_t n;
    int64_t begin; /* the slice's first element in the full tensor */
    size_t local0, off; /* its first element in the local layout, in the state layout */
    bool w_low;         /* w is the widened bf16 parameter */
    bool moments_low;   /* m and v are the widened bf16 moments */
} slice;

/* Parameter i's slice in the state layout: its offset there, its length, its first element in the
 * full tensor (what local_slice finds, without touching the parameter: the streamed step's). */
static void slice_range(const zt_engine *e, int i, size_t *off, size_t *n, int64_t *begin) {
    const zt_plan *pl = &e->plan;
    if (!e->shard_optim) {
        *off = pl->p[i].gfull_off;
        *n = (size_t)e->model->params[i].numel;
        *begin = 0;
    } else {
        *off = pl->p[i].gshard_off;
        *n = (size_t)zt_plan_shard_numel(pl, i, pl->p[i].shard);
        *begin = zt_plan_shard_begin(pl, i, pl->p[i].shard);
    }
}

/* moments false: s->m and s->v left NULL under bf16-low (an update that reads neither: Muon's apply) */
static void local_slice(zt_engine *e, int i, slice *s, bool moments) {
    const zt_plan *pl = &e->plan;
    size_t off, local0 = 0;
    if (!e->shard_optim) {
        off = pl->p[i].gfull_off;
        s->n = (size_t)e->model->params[i].numel;
        s->begin = 0;
        s->g = e->micro_grads + off;
    } else {
        off = pl->p[i].gshard_off;
        s->n = (size_t)zt_plan_shard_numel(pl, i, pl->p[i].shard);
        s->begin = zt_plan_shard_begin(pl, i, pl->p[i].shard);
        local0 = zt_store_local_is_piece(e) ? 0 : (size_t)s->begin;
        s->g = e->grad_pieces + off;
    }
    s->local0 = local0;
    s->off = off;
    float *w = zt_store_local_fp32(e, i);
    s->w_low = !w;
    if (w) {
        s->w = w + local0;
    } else { /* bf16-low: in memory, so the read cannot fail */
        s->w = e->low_f32;
        zt_store_read(e, i, local0, s->n, s->w, NULL);
    }
    s->moments_low = e->state_bf16[0] && moments;
    if (e->state_bf16[0] && !moments) {
        s->m = s->v = NULL;
    } else if (e->state_bf16[0]) {
        s->m = e->low_f32 + e->low_slice_floats;
        s->v = s->m + e->low_slice_floats;
        zt_bf16_to_f32(s->m, e->state_bf16[0] + off, s->n);
        if (e->state_bf16[1]) zt_bf16_to_f32(s->v, e->state_bf16[1] + off, s->n);
    } else {
        s->m = e->m + off;
        s->v = e->v + off;
    }
}

/* bf16-low: the slice's parameter (with_w) and moments back to their bf16 arrays */
static void slice_store(zt_engine *e, int i, const slice *s, bool with_w) {
    if (with_w && s->w_low) zt_store_write(e, i, s->local0, s->n, s->w, NULL);
    if (!s->moments_low) return;
    zt_f32_to_bf16(e->state_bf16[0] + s->off, s->m, s->n);
    if (e->state_bf16[1]) zt_f32_to_bf16(e->state_bf16[1] + s->off, s->v, s->n);
}

/* bf16-low: the widened slice (memory/plan.c counts the same) */
static int low_setup(zt_engine *e, zt_error *err) {
    if (!zt_store_bf16(e) && !e->state_bf16[0]) return ZT_OK;
    e->low_slice_floats = zt_memory_max_slice_floats(e->model, &e->plan, e->shard_optim);
    if (!(e->low_f32 = zt_engine_alloc(e, 3 * e->low_slice_floats, &e->mem.optimizer,
                                       "the bf16-low slice widened to fp32")))
        return zt_engine_oom(e, err, "engine");
    return ZT_OK;
}

int zt_step_muon_setup(zt_engine *e, zt_error *err) {
    const zt_model *m = e->model;
    const zt_optimizer_config *o = &e->opt.optim;
    if (!(e->muon = calloc((size_t)m->n_params + 1, sizeof *e->muon)))
        return zt_error_set(err, ZT_ERR_NOMEM, "engine: out of memory");
    /* a pipeline stage may hold none of Muon's matrices (the whole model was checked: train/setup.c) */
    bool stage = e->opt.pp_in_width > 0 || e->opt.pp_send_out;
    int rc = (stage ? zt_model_muon_split_stage : zt_model_muon_split)(m, o->muon_params, o->adamw_params, e->muon,
                                                                      err);
    if (rc) return rc;
    int N = e->shard_comm ? zt_comm_size(e->shard_comm) : 1, n_muon = 0;
    int R = N * (e->tp_comm ? zt_comm_size(e->tp_comm) : 1); /* the owners of a round */
    size_t slot = 0, work = 0;
    for (int i = 0; i < m->n_params; i++) {
        if (!e->muon[i]) continue;
        const zt_param_desc *p = &m->params[i];
        size_t w = zt_muon_workspace_floats(p->logical_shape[0], p->logical_shape[1]);
        if ((size_t)p->logical_numel > slot) slot = (size_t)p->logical_numel;
        if (w > work) work = w;
        n_muon++;
    }
    /* one slot per matrix of a round (one per rank of the group, times the tp parts), the logical
     * matrix, 64-byte multiples; the work of the one this rank orthogonalizes, which under tp also
     * stages the parts' concatenation and this part's update (memory/plan.c counts the same) */
    e->muon_slot_floats = (slot + 15) / 16 * 16;
    e->muon_nslots = n_muon < R ? n_muon : R;
    if (!n_muon) return low_setup(e, err); /* a stage without matrices: AdamW alone */
    if (!(e->muon_slots = zt_engine_alloc(e, e->muon_slot_floats * (size_t)e->muon_nslots, &e->mem.optimizer,
                                          "Muon's gathered matrices")) ||
        !(e->muon_work = zt_engine_alloc(e, work, &e->mem.optimizer, "Muon's Newton-Schulz work")))
        return zt_engine_oom(e, err, "engine");
    return low_setup(e, err);
}

int zt_step_lamb_setup(zt_engine *e, zt_error *err) {
    size_t cut = zt_memory_lamb_cut_floats(e->model), cut_chunks = zt_memory_lamb_cut_chunks(e->model);
    if (!(e->lamb_partials = zt_engine_alloc(e, 4 * (size_t)e->plan.norm_chunks + 2 + 4 * cut_chunks,
                                             &e->mem.optimizer, "LAMB's norm partials")))
        return zt_engine_oom(e, err, "engine");
    e->lamb_cut_floats = cut;
    if (cut && !(e->lamb_stage = zt_engine_alloc(e, 2 * cut, &e->mem.optimizer, "LAMB's cut tensors, gathered")))
        return zt_engine_oom(e, err, "engine");
    return low_setup(e, err);
}

/* Parameter i's pieces (this rank's at its rows of `part`) made its whole local tensor in `part`,
 * over its shard group: the data-parallel ranks', or for the experts stored E/ep a rank the
 * expert-data-parallel ranks' (hybrid: those of the shard group). Nothing to do where the
 * optimizer holds the whole local tensor. */
static int gather_pieces(zt_engine *e, int i, float *part, const char *what, zt_error *err) {
    const zt_plan *pl = &e->plan;
    int N = pl->p[i].nshards;
    if (!e->shard_optim || N <= 1) return ZT_OK;
    zt_comm *c = pl->p[i].group == ZT_SHARD_GROUP_EDP ? e->edp_comm : e->shard_comm;
    size_t counts[N];
    for (int q = 0; q < N; q++) counts[q] = (size_t)zt_plan_shard_numel(pl, i, q);
    return zt_all_gather_f32(c, part + zt_plan_shard_begin(pl, i, pl->p[i].shard), part, counts, what, err);
}

static int muon_step(zt_engine *e, float lr, float gscale, zt_error *err) {
    const zt_model *md = e->model;
    const zt_optimizer_config *o = &e->opt.optim;
    int64_t t = (int64_t)e->step;
    for (int i = 0; i < md->n_params; i++) { /* AdamW on the rest */
        const zt_param_desc *p = &md->params[i];
        if (!p->trainable || e->muon[i]) continue;
        slice s;
        local_slice(e, i, &s, true);
        zt_adamw_update(s.w, s.g, s.m, s.v, s.n, lr, o->beta1, o->beta2, o->eps, p->decay ? o->weight_decay : 0.0f,
                        gscale, t);
        zt_engine_round_updated(e, i, s.w, s.m, s.v, s.n, s.begin);
        slice_store(e, i, &s, true);
    }
    int io_rc = ZT_OK;
    zt_error io_err;
    return zt_step_muon_rounds(e, lr, gscale, false, &io_rc, &io_err, err);
}

int zt_step_muon_rounds(zt_engine *e, float lr, float gscale, bool streamed, int *io_rc, zt_error *io_err,
                        zt_error *err) {
    const zt_model *md = e->model;
    const zt_optimizer_config *o = &e->opt.optim;
    const float lr_m = o->lr_peak > 0 ? lr * (o->muon_lr / o->lr_peak) : o->muon_lr;
    int n_muon = 0, *list = malloc(((size_t)md->n_params + 1) * sizeof *list);
    if (!list) return zt_error_set(err, ZT_ERR_NOMEM, "optimizer step: out of memory");
    for (int i = 0; i < md->n_params; i++)
        if (md->params[i].trainable && e->muon[i]) list[n_muon++] = i;
    zt_comm *c = e->shard_comm, *tc = e->tp_comm;
    int N = c ? zt_comm_size(c) : 1, me = c ? zt_comm_rank(c) : 0, rc = ZT_OK;
    int P = tc ? zt_comm_size(tc) : 1, part = tc ? zt_comm_rank(tc) : 0, R = N * P;
    /* rounds of R = N x P matrices: matrix k + j belongs to rank j / P of the group, tp part j % P */
    for (int k = 0; k < n_muon && !rc; k += R) {
        int cnt = n_muon - k < R ? n_muon - k : R;
        for (int j = 0; j < cnt && !rc; j++) {
            int i = list[k + j];
            bool cut = zt_param_cut(&md->params[i]); /* by tp, or the experts stored E/ep a rank */
            float *slot = e->muon_slots + (size_t)j * e->muon_slot_floats;
            /* the whole part goes to its place among the parts (tp), or is the slot */
            float *whole = cut ? e->muon_work + zt_engine_tp_part_offset(e, i) : slot;
            if (streamed) { /* pass 1 left this rank's rows of U in state kind 1 (step_streamed.c) */
                size_t off, n;
                int64_t begin;
                slice_range(e, i, &off, &n, &begin);
                int r = *io_rc ? ZT_OK : zt_engine_state_read(e, 1, off, n, whole + begin, io_err);
                if (r) *io_rc = r;
            } else {
                slice s;
                local_slice(e, i, &s, true);
                float *u = whole + s.begin; /* this rank's rows of the whole part */
                zt_muon_momentum(s.g, s.m, u, s.n, o->muon_momentum, o->muon_nesterov, gscale);
                if (e->state_bf16[0]) { /* bf16-low: the momentum kept as bf16 (U from its fp32 value) */
                    zt_round_bf16(s.m, s.n);
                    slice_store(e, i, &s, false);
                }
            }
            double t0 = omp_get_wtime();
            rc = gather_pieces(e, i, whole, "muon momentum", err);
            if (!rc && cut) /* the parts over the tp group, or the ep group's (experts stored E/ep a rank) */
                rc = zt_engine_tp_gather_logical(e, i, e->muon_work, slot, "muon momentum over the parts", err);
            e->comm_s += omp_get_wtime() - t0;
        }
        if (rc) break;
        if (me * P + part < cnt) { /* this rank's matrix of the round, whole (logical) */
            const zt_param_desc *p = &md->params[list[k + me * P + part]];
            zt_muon_orthogonalize(e->muon_slots + (size_t)(me * P + part) * e->muon_slot_floats, p->logical_shape[0],
                                  p->logical_shape[1], o->muon_ns_steps, o->muon_ns_bf16 != 0,
                                  zt_muon_scale(p->logical_shape[0], p->logical_shape[1], o->muon_scale),
                                  e->muon_work);
        }
        for (int j = 0; j < cnt && !rc; j++) {
            int i = list[k + j], owner = j / P;
            const zt_param_desc *p = &md->params[i];
            float *slot = e->muon_slots + (size_t)j * e->muon_slot_floats, *mine = slot;
            double t0 = omp_get_wtime();
            if (zt_param_experts_stored(p)) {
                /* experts stored E/ep a rank: every rank gathered the logical matrix (the tp parts, then
                 * the ep parts), so the owner's update goes to its tp parts and then to each part's
                 * group whole, each rank taking its (tp part, ep part) */
                if (P > 1 && me == owner)
                    rc = zt_broadcast_bytes(tc, slot, (size_t)p->logical_numel * sizeof(float), j % P,
                                            "muon update over the parts", err);
                if (!rc && N > 1)
                    rc = zt_broadcast_bytes(c, slot, (size_t)p->logical_numel * sizeof(float), owner, "muon update",
                                            err);
                if (!rc) zt_tp_take(p, p->tp_parts > 1 ? part : 0, slot, e->muon_work);
                mine = e->muon_work;
            } else {
                if (P > 1 && me == owner) { /* the owner's parts get the logical update; a cut one takes its own */
                    rc = zt_broadcast_bytes(tc, slot, (size_t)p->logical_numel * sizeof(float), j % P,
                                            "muon update over the parts", err);
                    if (!rc && p->tp_parts > 1) zt_tp_take(p, part, slot, e->muon_work);
                }
                if (p->tp_parts > 1) mine = e->muon_work;
                if (!rc && N > 1) /* the group's ranks get their part's update from the owner's row */
                    rc = zt_broadcast_bytes(c, mine, (size_t)p->numel * sizeof(float), owner, "muon update", err);
            }
            e->comm_s += omp_get_wtime() - t0;
            if (rc) break;
            if (streamed) { /* this rank's rows of the update, for pass 2 to apply */
                size_t off, n;
                int64_t begin;
                slice_range(e, i, &off, &n, &begin);
                int r = *io_rc ? ZT_OK : zt_engine_state_write(e, 1, off, n, mine + begin, io_err);
                if (r) *io_rc = r;
                continue;
            }
            slice s;
            local_slice(e, i, &s, false); /* the moments untouched: not widened again */
            zt_muon_apply(s.w, mine + s.begin, s.n, lr_m, o->muon_weight_decay);
            zt_engine_round_updated(e, i, s.w, s.m, NULL, s.n, s.begin);
            slice_store(e, i, &s, true);
        }
    }
    free(list);
    return rc;
}

/* The logical tensor of cut parameter i (tensor parallelism, or the experts stored E/ep a rank) in
 * `logical`, from this rank's elements of it at their place in the part (in `cat`, the parts
 * concatenated): the gather over its shard group makes the part whole, the gather over the tp (or
 * ep) group and the placement the logical tensor (tp_group.c). */
static int lamb_gather_logical(zt_engine *e, int i, float *cat, float *logical, const char *what, zt_error *err) {
    double t0 = omp_get_wtime();
    int rc = gather_pieces(e, i, cat + zt_engine_tp_part_offset(e, i), what, err);
    if (!rc) rc = zt_engine_tp_gather_logical(e, i, cat, logical, what, err);
    e->comm_s += omp_get_wtime() - t0;
    return rc;
}

/* The chunk partials of cut parameter p's logical tensor, numbered as one process numbers them
 * (zt_memory_logical_chunks: a stacked experts' tensor's restart at each expert) */
static void logical_sum_squares(const zt_param_desc *p, const float *logical, double *partials) {
    int64_t blocks, bn, chunks = zt_memory_logical_chunks(p, &blocks, &bn), per = chunks / blocks;
    for (int64_t b = 0; b < blocks; b++) zt_chunk_sum_squares(logical + b * bn, bn, ZT_LAMB_CHUNK, partials + b * per);
}

/* LAMB's trust ratio of cut parameter i (tensor parallelism, or the experts stored E/ep a rank) from
 * its logical tensor: the logical p, then the logical u (computed on this rank's elements as
 * zt_lamb_partials computes it), each gathered and its 1,024-element chunk partials taken in order:
 * one process's norms, every rank computing them alike. The staging is 2 x the largest cut tensor
 * (e->lamb_stage). */
static int lamb_cut_coeff(zt_engine *e, int i, const slice *s, float wd, float *coeff, zt_error *err) {
    const zt_plan *pl = &e->plan;
    const zt_param_desc *p = &e->model->params[i];
    const zt_optimizer_config *o = &e->opt.optim;
    float *cat = e->lamb_stage, *logical = cat + e->lamb_cut_floats;
    float *mine = cat + zt_engine_tp_part_offset(e, i) + s->begin; /* this rank's elements in the part */
    int64_t chunks = zt_memory_logical_chunks(p, NULL, NULL);
    double *wp = e->lamb_partials + 2 * (size_t)pl->norm_chunks, *up = wp + chunks;
    memcpy(mine, s->w, s->n * sizeof(float));
    int rc = lamb_gather_logical(e, i, cat, logical, "lamb parameter over the parts", err);
    if (rc) return rc;
    logical_sum_squares(p, logical, wp);
    zt_lamb_update_values(s->w, s->m, s->v, (int64_t)s->n, o->eps, wd, mine);
    if ((rc = lamb_gather_logical(e, i, cat, logical, "lamb update over the parts", err))) return rc;
    logical_sum_squares(p, logical, up);
    *coeff = zt_lamb_coeff(sqrt(zt_sum_in_order(wp, chunks)), sqrt(zt_sum_in_order(up, chunks)), o->lamb_min_coeff,
                           o->lamb_max_coeff);
    return ZT_OK;
}

/* lamb_cut_coeff for the streamed step (step_streamed.c), between its passes: this rank's p, m
 * and v (the moments pass 1 left) read from wherever they live, p into its place in the part, m
 * and v into the logical buffer while it is free (a cut tensor has two parts or more, so it holds
 * twice this rank's elements), u computed over p in place: the same values, the same norms. A
 * failed read sets *io_rc and the gathers go on (every rank reaches the agreement after). */
int zt_step_lamb_cut_streamed(zt_engine *e, int i, float *coeff, int *io_rc, zt_error *io_err, zt_error *err) {
    const zt_plan *pl = &e->plan;
    const zt_param_desc *p = &e->model->params[i];
    const zt_optimizer_config *o = &e->opt.optim;
    float wd = p->decay ? o->weight_decay : 0.0f;
    size_t off, n;
    int64_t begin;
    slice_range(e, i, &off, &n, &begin);
    size_t local0 = e->shard_optim && !zt_store_local_is_piece(e) ? (size_t)begin : 0;
    float *cat = e->lamb_stage, *logical = cat + e->lamb_cut_floats;
    float *mine = cat + zt_engine_tp_part_offset(e, i) + begin, *m = logical, *v = logical + n;
    int64_t chunks = zt_memory_logical_chunks(p, NULL, NULL);
    double *wp = e->lamb_partials + 2 * (size_t)pl->norm_chunks, *up = wp + chunks;
    int r = *io_rc ? ZT_OK : zt_store_read(e, i, local0, n, mine, io_err);
    if (r) *io_rc = r;
    int rc = lamb_gather_logical(e, i, cat, logical, "lamb parameter over the parts", err);
    if (rc) return rc;
    logical_sum_squares(p, logical, wp);
    for (int k = 0; k < 2 && !*io_rc; k++)
        if ((r = zt_engine_state_read(e, k, off, n, k ? v : m, io_err))) *io_rc = r;
    zt_lamb_update_values(mine, m, v, (int64_t)n, o->eps, wd, mine);
    if ((rc = lamb_gather_logical(e, i, cat, logical, "lamb update over the parts", err))) return rc;
    logical_sum_squares(p, logical, up);
    *coeff = zt_lamb_coeff(sqrt(zt_sum_in_order(wp, chunks)), sqrt(zt_sum_in_order(up, chunks)), o->lamb_min_coeff,
                           o->lamb_max_coeff);
    return ZT_OK;
}

int zt_step_lamb_sum_partials(zt_engine *e, zt_error *err) {
    const zt_plan *pl = &e->plan;
    if (!e->shard_optim || pl->nshards <= 1) return ZT_OK;
    double *wp = e->lamb_partials, *up = wp + pl->norm_chunks; /* each chunk's from the rank that owns it */
    int rc = zt_engine_sum_exclusive(e, wp, pl->norm_chunks, err);
    return rc ? rc : zt_engine_sum_exclusive(e, up, pl->norm_chunks, err);
}

float zt_step_lamb_ratio(const zt_engine *e, int i) {
    const zt_plan *pl = &e->plan;
    const zt_optimizer_config *o = &e->opt.optim;
    const double *wp = e->lamb_partials, *up = wp + pl->norm_chunks;
    int64_t first, count, all = zt_plan_param_chunks(pl, i);
    zt_plan_norm_chunks(pl, i, 0, &first, &count); /* shard 0 starts at the tensor's first chunk */
    return zt_lamb_coeff(sqrt(zt_sum_in_order(wp + first, all)), sqrt(zt_sum_in_order(up + first, all)),
                         o->lamb_min_coeff, o->lamb_max_coeff);
}

static int lamb_step(zt_engine *e, float lr, float gscale, zt_error *err) {
    const zt_model *md = e->model;
    const zt_plan *pl = &e->plan;
    const zt_optimizer_config *o = &e->opt.optim;
    double *wp = e->lamb_partials, *up = wp + pl->norm_chunks;
    memset(wp, 0, 2 * (size_t)pl->norm_chunks * sizeof *wp);
    const float step = zt_lamb_step_size(lr, o->beta1, o->beta2, o->lamb_bias_correction, (int64_t)e->step);
    int rc = ZT_OK;
    for (int i = 0; i < md->n_params && !rc; i++) {
        const zt_param_desc *p = &md->params[i];
        if (!p->trainable) continue;
        float wd = p->decay ? o->weight_decay : 0.0f, coeff;
        slice s;
        local_slice(e, i, &s, true);
        zt_lamb_moments(s.g, s.m, s.v, s.n, o->beta1, o->beta2, gscale);
        if (e->state_bf16[0]) { /* bf16-low: the moments as stored, before u is taken of them */
            zt_round_bf16(s.m, s.n);
            zt_round_bf16(s.v, s.n);
        }
        if (zt_param_cut(p)) { /* cut by tp or stored E/ep a rank: its norms from the logical tensor, now */
            if (!(rc = lamb_cut_coeff(e, i, &s, wd, &coeff, err))) {
                zt_lamb_apply(s.w, s.m, s.v, s.n, o->eps, wd, step * coeff);
                zt_engine_round_updated(e, i, s.w, s.m, s.v, s.n, s.begin);
                slice_store(e, i, &s, true);
            }
            continue;
        }
        int64_t at, n, chunk; /* per norm block's run of the piece (plan.h) */
        for (int k = 0; zt_plan_piece_run(pl, i, e->shard_optim ? pl->p[i].shard : 0, k, &at, &n, &chunk); k++)
            zt_lamb_partials(s.w + at, s.m + at, s.v + at, n, o->eps, wd, wp + chunk, up + chunk);
        slice_store(e, i, &s, false);
    }
    if (rc || (rc = zt_step_lamb_sum_partials(e, err))) return rc;
    for (int i = 0; i < md->n_params; i++) {
        const zt_param_desc *p = &md->params[i];
        if (!p->trainable || zt_param_cut(p)) continue;
        float coeff = zt_step_lamb_ratio(e, i);
        slice s;
        local_slice(e, i, &s, true);
        zt_lamb_apply(s.w, s.m, s.v, s.n, o->eps, p->decay ? o->weight_decay : 0.0f, step * coeff);
        zt_engine_round_updated(e, i, s.w, s.m, s.v, s.n, s.begin);
        slice_store(e, i, &s, true);
    }
    return ZT_OK;
}

int zt_step_whole(zt_engine *e, float lr, float gscale, zt_error *err) {
    return e->opt.optim.kind == ZT_OPT_MUON ? muon_step(e, lr, gscale, err) : lamb_step(e, lr, gscale, err);
}
