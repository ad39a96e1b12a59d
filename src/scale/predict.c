/* predict.c - one strategy's predicted step on one cluster (predict.h): the bytes each unit
 * gathers and reduces, their collectives' costs, the step's timeline, and the engine's memory
 * plan for the same options. */
#include "scale/predict.h"
#include "memory/estimate.h"

#include <stdlib.h>
#include <string.h>

static double dtype_bytes(zt_dtype t) { return t == ZT_DTYPE_FP32 ? 4.0 : 2.0; }

int zt_scale_predict(const zt_scale_request *rq, zt_strategy strategy, int S, zt_scale_row *out, zt_error *err) {
    memset(out, 0, sizeof *out);
    const zt_model *m = rq->model;
    const zt_scale_cluster *cl = &rq->cluster;
    const zt_scale_compute *c = rq->compute;
    int N = cl->nodes * cl->per_node, U = m->n_units;
    int GA = rq->opt.grad_accum > 0 ? rq->opt.grad_accum : 1;
    if (strategy == ZT_STRATEGY_HYBRID && (S < 1 || N % S))
        return zt_error_set(err, ZT_ERR_USAGE, "hybrid shard size %d does not divide the %d devices", S, N);
    if (strategy != ZT_STRATEGY_HYBRID) S = strategy == ZT_STRATEGY_DDP ? 1 : N;
    out->strategy = strategy;
    out->shard = S;

    /* memory: the engine's plan of the device needing the most */
    zt_engine_options o = rq->opt;
    o.strategy = strategy;
    if (strategy == ZT_STRATEGY_HYBRID) o.hybrid_shard_size = S;
    zt_memory_plan plan;
    int rc = zt_estimate_peak(m, &o, &rq->plan, N, &plan, err);
    if (rc) return rc;
    out->memory = plan.peak_total;
    out->fits = (double)plan.peak_total <= rq->device->memory;

    /* bytes per element on the wire */
    bool lp = rq->opt.precision.mode != ZT_PRECISION_FP32;
    double g = cl->profile == ZT_SCALE_ZEROTRAIN ? (rq->opt.precision.mode == ZT_PRECISION_BF16_LOW ? 2.0 : 4.0)
                                                 : (lp ? 2.0 : 4.0);
    double r = dtype_bytes(rq->opt.precision.reduce);
    out->gather_bytes_per_elem = g, out->reduce_bytes_per_elem = r;

    /* elements each unit gathers (all its parameters) and reduces (the gradients it completes: a
     * parameter's gradient is complete after the backward of the first unit that uses it) */
    int n = U > 0 ? U : 1, np = m->n_params > 0 ? m->n_params : 1;
    double *gather = calloc(6 * (size_t)n, sizeof *gather), *gather_b = gather + n, *reduce = gather_b + n,
           *P_f = reduce + n, *P_b = P_f + n, *R_u = P_b + n, P = 0;
    int *first = malloc(2 * (size_t)np * sizeof *first), *last = first ? first + np : NULL;
    if (!gather || !first) {
        free(gather), free(first);
        return zt_error_set(err, ZT_ERR_NOMEM, "scale model: %d units", U);
    }
    for (int i = 0; i < m->n_params; i++) first[i] = last[i] = -1;
    for (int u = 0; u < U; u++)
        for (int k = 0; k < m->units[u].n_params; k++) {
            int i = m->units[u].params[k];
            if (first[i] < 0) first[i] = u;
            last[i] = u;
        }
    for (int i = 0; i < m->n_params; i++) {
        double e = (double)m->params[i].numel;
        P += e;
        if (first[i] < 0) continue;
        P_f[first[i]] += e; /* forward gathers it at its first use, backward at its last */
        P_b[last[i]] += e;
        if (m->params[i].trainable) R_u[first[i]] += e;
    }
    free(first);

    const zt_scale_net *net = &cl->net;
    zt_scale_group world = zt_scale_group_of(net, N, 1), shard = zt_scale_group_of(net, S, 1),
                   replicas = zt_scale_group_of(net, N / S, S);
    bool sharded_params = strategy == ZT_STRATEGY_ZERO3 || strategy == ZT_STRATEGY_HYBRID;
    bool every_mb = cl->profile == ZT_SCALE_NCCL && strategy != ZT_STRATEGY_DDP && strategy != ZT_STRATEGY_ZERO1;
    bool regather = !rq->opt.keep_params_after_forward;
    double node_out = 0;
    for (int u = 0; u < U; u++) {
        zt_scale_cost a = {0}, b = {0};
        if (sharded_params) {
            zt_scale_group grp = strategy == ZT_STRATEGY_HYBRID ? shard : world;
            a = zt_scale_collective(net, grp, ZT_SCALE_ALL_GATHER, P_f[u] * g);
            gather[u] = a.seconds;
            node_out += a.node_out_bytes * GA;
            if (regather) {
                zt_scale_cost ab = zt_scale_collective(net, grp, ZT_SCALE_ALL_GATHER, P_b[u] * g);
                gather_b[u] = ab.seconds;
                node_out += ab.node_out_bytes * GA;
            }
        }
        if (strategy == ZT_STRATEGY_DDP) b = zt_scale_collective(net, world, ZT_SCALE_ALL_REDUCE, R_u[u] * r);
        else if (strategy == ZT_STRATEGY_HYBRID) {
            b = zt_scale_collective(net, shard, ZT_SCALE_REDUCE_SCATTER, R_u[u] * r);
            if (cl->profile == ZT_SCALE_NCCL) { /* FSDP's HSDP: right after the unit's reduce-scatter */
                zt_scale_cost ar = zt_scale_collective(net, replicas, ZT_SCALE_ALL_REDUCE, R_u[u] / S * r);
                b.seconds += ar.seconds, b.node_out_bytes += ar.node_out_bytes;
            }
        } else b = zt_scale_collective(net, world, ZT_SCALE_REDUCE_SCATTER, R_u[u] * r);
        reduce[u] = b.seconds;
        node_out += b.node_out_bytes * (every_mb ? GA : 1);
    }
    double pre = 0, post = 0;
    if (strategy == ZT_STRATEGY_HYBRID && cl->profile == ZT_SCALE_ZEROTRAIN) {
        /* the engine all-reduces every piece across the replicas at the step (grads.c), inline */
        double R = 0;
        for (int u = 0; u < U; u++) R += R_u[u];
        zt_scale_cost ar = zt_scale_collective(net, replicas, ZT_SCALE_ALL_REDUCE, R / S * r);
        pre = ar.seconds;
        node_out += ar.node_out_bytes;
    }
    if (strategy == ZT_STRATEGY_ZERO1 || strategy == ZT_STRATEGY_ZERO2) {
        zt_scale_cost a = zt_scale_collective(net, world, ZT_SCALE_ALL_GATHER, P * g);
        post = a.seconds;
        node_out += a.node_out_bytes;
    }
    double local = strategy == ZT_STRATEGY_DDP ? P : P / S;
    zt_scale_timeline t = {.n_units = U, .micro_batches = GA, .fwd = c->fwd, .bwd = c->bwd,
                           .gather = sharded_params ? gather : NULL,
                           .gather_bwd = sharded_params ? gather_b : NULL, .reduce = reduce,
                           .regather_backward = regather, .reduce_every_micro_batch = every_mb,
                           .pre_optimizer_s = pre, .optimizer_s = local * c->opt_s_per_param,
                           .post_gather_s = post};
    out->step = zt_scale_schedule(&t);
    free(gather);
    out->node_out_bytes = cl->nodes > 1 ? node_out : 0;
    double tokens = (double)rq->opt.B * rq->opt.T * GA;
    out->tokens_per_s = out->step.step_s > 0 ? tokens / out->step.step_s : 0;
    out->mfu = c->peak > 0 ? c->model_flops_per_token * out->tokens_per_s / c->peak : 0;
    return ZT_OK;
}
