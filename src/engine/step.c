/* step.c - the optimizer step: finish the gradient (fold the micro-batch tree, reduce), the global
 * norm from fixed-chunk partials (same bits for every strategy and world size), clipping and the
 * finite check (every rank sees the same norm, so every rank agrees; 1-bit Adam past its warm-up:
 * each rank's own, the finite check agreed), the optimizer on what this
 * rank owns, and the all-gather of updated parameters where the strategy keeps them replicated
 * (zero1/zero2 under bf16/fp16 compute: of the compute copies, master_shard.c). */
#include "engine/engine_internal.h"
#include "kernels/kernels.h"
#include "offload/nvme_store.h"
#include "optim/optim.h"

#include <math.h>
#include <string.h>

static int grad_norm(zt_engine *e, double *norm, zt_error *err) {
    const zt_model *m = e->model;
    const zt_plan *pl = &e->plan;
    /* gradient offload: backward took each piece's partials before writing it (grad_offload.c);
     * early norm: each unit's when its backward was done (grads.c) */
    bool taken = e->grad_kind >= 0 || e->norm_early;
    if (!taken) memset(e->norm_partials, 0, (size_t)pl->norm_chunks * sizeof(double));
    for (int i = 0; i < m->n_params && !taken; i++)
        if (m->params[i].trainable) zt_grads_norm_partials(e, i); /* frozen: no part in the norm (partials stay 0) */
    if (e->shard_optim && pl->nshards > 1) {
        int rc = zt_engine_sum_exclusive(e, e->norm_partials, pl->norm_chunks, err);
        if (rc) return rc;
    }
    const double *partials = e->norm_partials;
    size_t n = (size_t)pl->norm_chunks;
    if (e->pp) zt_pipeline_norm_untie(e, e->norm_partials);
    if (e->edp_groups) { /* the experts stored E/ep a rank: every part's expert chunks (ep_group.c) */
        int rc = zt_engine_ep_norm(e, e->norm_partials, &partials, &n, err);
        if (rc) return rc;
    }
    if (e->pp) { /* pipeline: every stage's chunks, in stage order (and over the tp parts) */
        double sumsq;
        int rc = zt_pipeline_norm(e, partials, n, &sumsq, err);
        *norm = sqrt(sumsq);
        return rc;
    }
    if (e->edp_groups && !e->tp_comm) {
        *norm = sqrt(zt_sum_in_order(partials, n));
        return ZT_OK;
    }
    if (e->tp_comm) { /* tensor parallelism: every part's cut parameters, the whole ones once */
        double sumsq;
        int rc = zt_engine_tp_norm(e, partials, &sumsq, err);
        *norm = sqrt(sumsq);
        return rc;
    }
    *norm = sqrt(zt_sum_in_order(e->norm_partials, pl->norm_chunks));
    return ZT_OK;
}

/* The optimizer on elements [lo, lo + n) of this rank's state layout (full for ddp, shard
 * otherwise): every trainable parameter on its overlap with the range. m and v (NULL when the
 * optimizer keeps none) point at element lo of the state, in memory or in an NVMe staging
 * buffer; element by element the arithmetic is the same however the range is cut. */
typedef struct update_ctx {
    zt_engine *e;
    float lr, gscale;
    bool round_lp; /* AdamW rounds the compute copies as it updates (lp_fused) */
} update_ctx;

/* Whether AdamW can write the compute copies in its pass (zt_adamw_update_round) and leave them
 * current: ddp's full-layout copies of full fp32 parameters updated in memory, copies current
 * before the step (frozen matrices keep theirs). Elsewhere the copies are made afterwards:
 * refreshed before the next forward (stale), all-gathered (zero1/zero2), or gathered (zero3). */
static bool lp_fused(const zt_engine *e) {
    return zt_store_copies_fusable(e) && !e->nvme && e->opt.optim.kind == ZT_OPT_ADAMW &&
           e->opt.precision.params != ZT_DTYPE_BF16;
}

/* The update of elements [0, n) of parameter i's slice w / g / m / v, whose first element is
 * element `first` of the full tensor, and its bf16-low rounding (elementwise, keyed by that
 * index). */
static void update_elems(const update_ctx *c, int i, float *w, const float *g, float *m, float *v, size_t n,
                         int64_t first) {
    zt_engine *e = c->e;
    const zt_optimizer_config *o = &e->opt.optim;
    float wd = e->model->params[i].decay ? o->weight_decay : 0.0f;
    if (c->round_lp && zt_store_has_lp(e, i)) /* ddp: the copy's element `first` of parameter i */
        zt_adamw_update_round(w, g, m, v, n, c->lr, o->beta1, o->beta2, o->eps, wd, c->gscale, (int64_t)e->step,
                              e->lp_kind, zt_store_full_lp_at(e, i, (size_t)first));
    else if (o->kind == ZT_OPT_ADAMW || (o->kind == ZT_OPT_ONEBIT_ADAM && o->onebit_bias_correction))
        zt_adamw_update(w, g, m, v, n, c->lr, o->beta1, o->beta2, o->eps, wd, c->gscale, (int64_t)e->step);
    else if (o->kind == ZT_OPT_ONEBIT_ADAM) /* its warm-up with DeepSpeed's uncorrected kernel */
        zt_onebit_warmup_update(w, g, m, v, n, c->lr, o->beta1, o->beta2, o->eps, wd, c->gscale);
    else
        zt_sgd_update(w, g, m, n, c->lr, o->momentum, o->nesterov, wd, c->gscale, (int64_t)e->step);
    zt_engine_round_updated(e, i, w, m, v, n, first);
}

/* Elements [lo, lo + n) of the state layout: fn on every trainable parameter's overlap with them.
 * m, v (NULL where the optimizer keeps none), wchunk (the parameter pieces streamed from their
 * file, or NULL: in memory) and gchunk (the reduced gradient pieces streamed from theirs, or NULL:
 * grad_pieces) point at element lo. `hashes` says which checksums the pass keeps
 * (ZT_STEP_HASH_GRAD: of the gradient pieces it consumes; ZT_STEP_CHECK_PARAM: of the pieces as
 * read; ZT_STEP_HASH_PARAM: as written back): the one-pass step all three, the two passes of
 * Muon's and LAMB's streamed step (step_streamed.c) the first two in pass 1, the last in pass 2. */
void zt_step_range(zt_engine *e, size_t lo, size_t n, float *m, float *v, float *wchunk, const float *gchunk,
                   unsigned hashes, zt_step_elems_fn fn, void *ctx) {
    const zt_model *md = e->model;
    const zt_plan *pl = &e->plan;
    for (int i = 0; i < md->n_params; i++) {
        const zt_param_desc *p = &md->params[i];
        if (!p->trainable) continue;
        const float *g;
        size_t off, cnt, local0 = 0; /* local0: the slice's first element in the local layout */
        int64_t begin = 0; /* the piece's first element in the full tensor */
        if (!e->shard_optim) {
            off = pl->p[i].gfull_off; /* the state and the gradient: trainable parameters only */
            cnt = (size_t)p->numel;
            g = e->micro_grads + off;
        } else {
            off = pl->p[i].gshard_off;
            cnt = (size_t)zt_plan_shard_numel(pl, i, pl->p[i].shard);
            begin = zt_plan_shard_begin(pl, i, pl->p[i].shard);
            local0 = zt_store_local_is_piece(e) ? 0 : (size_t)begin;
            g = e->grad_pieces + off;
        }
        size_t a = off > lo ? off : lo, b = off + cnt < lo + n ? off + cnt : lo + n;
        if (a >= b) continue;
        float *mm = m ? m + (a - lo) : NULL, *vv = v ? v + (a - lo) : NULL;
        if (gchunk) { /* gradient offload: the piece's elements in the staging buffer, checked */
            g = gchunk + (a - lo);
            if (hashes & ZT_STEP_HASH_GRAD) zt_grad_offload_hash_add(e, i, g, b - a);
        } else {
            g += a - off;
        }
        size_t w0 = local0 + (a - off); /* the first updated element in the local layout */
        int64_t first = begin + (int64_t)(a - off);
        if (wchunk) { /* parameter offload: the piece's elements in the staging buffer */
            float *w = wchunk + (a - lo);
            if (hashes & ZT_STEP_CHECK_PARAM) zt_param_offload_check_add(e, i, w, b - a); /* what the file held */
            fn(ctx, i, w, g, mm, vv, b - a, first, a - off);
            if (hashes & ZT_STEP_HASH_PARAM) zt_param_offload_hash_add(e, i, w, b - a);
            continue;
        }
        float *w = zt_store_local_fp32(e, i);
        if (w) {
            fn(ctx, i, w + w0, g, mm, vv, b - a, first, a - off);
            continue;
        }
        /* bf16-low: widen a chunk, update and round it in fp32, narrow it back (exact) */
        size_t chunk;
        float *tmp = zt_store_bounce(e, &chunk);
        for (size_t d = 0; d < b - a; d += chunk) {
            size_t len = b - a - d < chunk ? b - a - d : chunk;
            zt_store_read(e, i, w0 + d, len, tmp, NULL); /* in memory: cannot fail */
            fn(ctx, i, tmp, g + d, mm ? mm + d : NULL, vv ? vv + d : NULL, len, first + (int64_t)d, a - off + d);
            zt_store_write(e, i, w0 + d, len, tmp, NULL);
        }
    }
}

void zt_step_chunk_kinds(zt_engine *e, size_t begin, float *const *state, float **m, float **v, float **w,
                         const float **g) {
    if (e->optim_store) {
        *m = state[0];
        *v = e->state_kinds > 1 ? state[1] : NULL;
    } else {
        *m = e->m ? e->m + begin : NULL;
        *v = e->v ? e->v + begin : NULL;
    }
    *w = zt_store_file_kind(e) >= 0 ? state[zt_store_file_kind(e)] : NULL;
    *g = e->grad_kind >= 0 ? state[e->grad_kind] : NULL;
}

static void update_fn(void *ctx, int i, float *w, const float *g, float *m, float *v, size_t n, int64_t first,
                      size_t at) {
    (void)at;
    update_elems(ctx, i, w, g, m, v, n, first);
}

static void update_range(const update_ctx *c, size_t lo, size_t n, float *m, float *v, float *wchunk,
                         const float *gchunk) {
    zt_step_range(c->e, lo, n, m, v, wchunk, gchunk, ZT_STEP_HASH_GRAD | ZT_STEP_CHECK_PARAM | ZT_STEP_HASH_PARAM,
                  update_fn, (void *)c);
}

/* NVMe offload: one chunk of the streamed kinds (state[0] = m, state[1] = v when the optimizer
 * state is offloaded; state[param_kind] = the parameter pieces when they are). */
static int update_chunk(void *ctx, size_t begin, size_t n, float *const *state, zt_error *err) {
    (void)err;
    const update_ctx *c = ctx;
    float *m, *v, *w;
    const float *g;
    zt_step_chunk_kinds(c->e, begin, state, &m, &v, &w, &g);
    update_range(c, begin, n, m, v, w, g);
    return ZT_OK;
}

/* bf16-low in memory: the bf16 moments widen into fp32 chunks, update_range updates (and rounds
 * them to bf16 values), and they narrow back exactly: the same bits as fp32 arrays of bf16 values */
static void update_bf16_state(const update_ctx *c) {
    zt_engine *e = c->e;
    size_t chunk = e->state_floats < ZT_STATE_CHUNK ? e->state_floats : ZT_STATE_CHUNK;
    float *m = e->state_tmp, *v = e->state_kinds > 1 ? e->state_tmp + chunk : NULL;
    for (size_t lo = 0; lo < e->state_floats; lo += chunk) {
        size_t n = e->state_floats - lo < chunk ? e->state_floats - lo : chunk;
        zt_bf16_to_f32(m, e->state_bf16[0] + lo, n);
        if (v) zt_bf16_to_f32(v, e->state_bf16[1] + lo, n);
        update_range(c, lo, n, m, v, NULL, NULL);
        zt_f32_to_bf16(e->state_bf16[0] + lo, m, n);
        if (v) zt_f32_to_bf16(e->state_bf16[1] + lo, v, n);
    }
}

int zt_engine_step(zt_engine *e, float lr, zt_step_report *report, zt_error *err) {
    const zt_optimizer_config *o = &e->opt.optim;
    const zt_precision *prec = &e->opt.precision;
    double norm, scale = zt_engine_loss_scale(e);
    int rc = zt_grads_finish(e, err);
    if (!rc && e->pp) rc = zt_pipeline_tied_grads(e, err); /* GPT-2's wte: both stages' sum */
    if (!rc) {
        zt_engine_round_grads(e);
        rc = grad_norm(e, &norm, err);
    }
    if (rc) {
        zt_grads_reset(e);
        return rc;
    }
    /* 1-bit Adam past its warm-up over N replicas (ddp: the ranks; hybrid: the shard groups): the
     * gradient is this rank's (hybrid: its shard group's) share of the sum, N times it the
     * replica's own mean; its norm and clipping are the replica's (DeepSpeed's), the finite check
     * agreed across the replicas (a shard group's ranks share one norm) */
    bool onebit = zt_onebit_frozen(e);
    double own = onebit ? (double)zt_onebit_replicas(e) : 1.0;
    norm = norm * own / scale; /* the gradient carries the loss scale (1 outside fp16) */
    zt_step_report r = {.grad_norm = norm, .clip_coef = zt_clip_coef(norm, o->grad_clip),
                        .finite = isfinite(norm), .loss_scale = scale};
    if (own > 1.0) {
        int ok = r.finite;
        if ((rc = zt_all_reduce_and_int(zt_onebit_comm(e), &ok, "1-bit Adam finite check", err))) {
            zt_grads_reset(e);
            return rc;
        }
        r.finite = ok;
    }
    /* every rank saw the same norm (and was asked alike), so every rank skips (or not) alike */
    if (prec->mode == ZT_PRECISION_FP16) zt_loss_scaler_update(&e->scaler, prec, !r.finite);
    if (!r.finite && prec->mode == ZT_PRECISION_FP16) r.skip_reason = ZT_SKIP_OVERFLOW;
    else if (!r.finite && e->opt.skip_nonfinite) r.skip_reason = ZT_SKIP_NONFINITE;
    else if (e->skip_next) r.skip_reason = ZT_SKIP_REQUESTED;
    e->skip_next = false;
    r.skipped = r.skip_reason != ZT_SKIP_NONE;
    if (report) *report = r;
    if (r.skipped) {
        zt_grads_reset(e);
        return ZT_OK;
    }
    if (!r.finite) {
        zt_grads_reset(e);
        return zt_error_set(err, ZT_ERR_NUMERICS,
                            "step %llu: gradient norm is not finite; the update was not applied",
                            (unsigned long long)e->step + 1);
    }
    e->step++;
    /* clipping and unscaling in one factor */
    update_ctx uc = {.e = e, .lr = lr, .gscale = (float)(r.clip_coef * own / scale), .round_lp = lp_fused(e)};
    if (e->nvme && (o->kind == ZT_OPT_MUON || o->kind == ZT_OPT_LAMB)) { /* two passes: step_streamed.c */
        rc = zt_step_streamed(e, lr, uc.gscale, err);
    } else if (e->nvme) { /* the state (and the pieces) stream through the staging buffers, chunk by chunk */
        if (zt_store_file_kind(e) >= 0) zt_param_offload_hash_begin(e);
        if (e->grad_kind >= 0) zt_grad_offload_hash_begin(e);
        int src = zt_nvme_store_stream(e->nvme, update_chunk, &uc, err);
        if (!src && e->grad_kind >= 0) src = zt_grad_offload_hash_check(e, err);
        if (!src && zt_store_file_kind(e) >= 0) src = zt_param_offload_check(e, err);
        rc = zt_engine_offload_agree(e, src, err);
        if (zt_store_file_kind(e) >= 0) zt_param_offload_hash_end(e);
    } else if (onebit) { /* 1-bit Adam past its warm-up: onebit.c */
        rc = zt_onebit_step(e, lr, uc.gscale, err);
    } else if (o->kind == ZT_OPT_MUON || o->kind == ZT_OPT_LAMB) { /* whole tensors: step_whole.c */
        rc = zt_step_whole(e, lr, uc.gscale, err);
    } else if (e->state_bf16[0]) {
        update_bf16_state(&uc);
    } else {
        update_range(&uc, 0, e->state_floats, e->m, e->v, NULL, NULL);
    }
    zt_grads_reset(e);
    if (rc) { /* an offloaded (or whole-tensor) update failed (its copies were never fused) */
        zt_store_changed(e);
        return rc;
    }
    return zt_store_after_update(e, uc.round_lp, err); /* the copies, what is replicated all-gathered */
}

void zt_engine_zero_grad(zt_engine *e) { zt_grads_reset(e); }

void zt_engine_skip_next_step(zt_engine *e) { e->skip_next = true; }
