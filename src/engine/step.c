/* step.c - the optimizer step: finish the gradient (fold the micro-batch tree, reduce), the global
 * norm from fixed-chunk partials (same bits for every strategy and world size), clipping and the
 * finite check (every rank sees the same norm, so every rank agrees), the optimizer on what this
 * rank owns, and the all-gather of updated parameters where the strategy keeps them replicated. */
#include "engine/engine_internal.h"
#include "optim/optim.h"

#include <math.h>
#include <string.h>

static int grad_norm(zt_engine *e, double *norm, zt_error *err) {
    const zt_model *m = e->model;
    const zt_plan *pl = &e->plan;
    memset(e->norm_partials, 0, (size_t)pl->norm_chunks * sizeof(double));
    for (int i = 0; i < m->n_params; i++) {
        int64_t first, count;
        if (!e->shard_optim) {
            zt_plan_norm_chunks(pl, i, 0, &first, &count);
            zt_chunk_sum_squares(e->micro_grads + pl->p[i].full_off, m->params[i].numel, ZT_NORM_CHUNK,
                                 e->norm_partials + first);
        } else {
            zt_plan_norm_chunks(pl, i, pl->shard, &first, &count);
            zt_chunk_sum_squares(e->grad_pieces + pl->p[i].shard_off, zt_plan_shard_numel(pl, i, pl->shard),
                                 ZT_NORM_CHUNK, e->norm_partials + first);
        }
    }
    if (e->shard_optim && pl->nshards > 1) {
        int rc = zt_engine_sum_exclusive(e, e->norm_partials, pl->norm_chunks, err);
        if (rc) return rc;
    }
    *norm = sqrt(zt_sum_in_order(e->norm_partials, pl->norm_chunks));
    return ZT_OK;
}

int zt_engine_step(zt_engine *e, float lr, zt_step_report *report, zt_error *err) {
    const zt_model *m = e->model;
    const zt_plan *pl = &e->plan;
    const zt_optimizer_config *o = &e->opt.optim;
    const zt_precision *prec = &e->opt.precision;
    double norm, scale = zt_engine_loss_scale(e);
    int rc = zt_grads_finish(e, err);
    if (!rc) {
        zt_engine_round_grads(e);
        rc = grad_norm(e, &norm, err);
    }
    if (rc) {
        zt_grads_reset(e);
        return rc;
    }
    norm /= scale; /* the gradient carries the loss scale (1 outside fp16) */
    zt_step_report r = {.grad_norm = norm, .clip_coef = zt_clip_coef(norm, o->grad_clip),
                        .finite = isfinite(norm), .loss_scale = scale};
    if (prec->mode == ZT_PRECISION_FP16) {
        /* every rank saw the same norm, so every rank skips (or not) and scales alike */
        zt_loss_scaler_update(&e->scaler, prec, !r.finite);
        if (!r.finite) {
            r.skipped = true;
            if (report) *report = r;
            zt_grads_reset(e);
            return ZT_OK;
        }
    }
    if (report) *report = r;
    if (!r.finite) {
        zt_grads_reset(e);
        return zt_error_set(err, ZT_ERR_NUMERICS,
                            "step %llu: gradient norm is not finite; the update was not applied",
                            (unsigned long long)e->step + 1);
    }
    e->step++;
    for (int i = 0; i < m->n_params; i++) {
        const zt_param_desc *p = &m->params[i];
        if (!p->trainable) continue;
        float *w, *g, *mm, *vv;
        size_t n;
        int64_t begin = 0;
        if (!e->shard_optim) {
            size_t off = pl->p[i].full_off;
            n = (size_t)p->numel;
            w = e->full_params + off;
            g = e->micro_grads + off;
            mm = e->m ? e->m + off : NULL;
            vv = e->v ? e->v + off : NULL;
        } else {
            size_t off = pl->p[i].shard_off;
            n = (size_t)zt_plan_shard_numel(pl, i, pl->shard);
            begin = zt_plan_shard_begin(pl, i, pl->shard);
            w = e->shard_params ? e->pieces + off
                                : e->full_params + pl->p[i].full_off + zt_plan_shard_begin(pl, i, pl->shard);
            g = e->grad_pieces + off;
            mm = e->m ? e->m + off : NULL;
            vv = e->v ? e->v + off : NULL;
        }
        if (n == 0) continue;
        float wd = p->decay ? o->weight_decay : 0.0f;
        float gscale = (float)(r.clip_coef / scale); /* clipping and unscaling in one factor */
        if (o->kind == ZT_OPT_ADAMW)
            zt_adamw_update(w, g, mm, vv, n, lr, o->beta1, o->beta2, o->eps, wd, gscale,
                            (int64_t)e->step);
        else
            zt_sgd_update(w, g, mm, n, lr, o->momentum, o->nesterov, wd, gscale, (int64_t)e->step);
        zt_engine_round_updated(e, i, w, mm, vv, n, begin);
    }
    e->lp_stale = true;
    zt_grads_reset(e);
    if (e->shard_optim && !e->shard_params && pl->nshards > 1) return zt_engine_all_gather_full(e, err);
    return ZT_OK;
}

void zt_engine_zero_grad(zt_engine *e) { zt_grads_reset(e); }
