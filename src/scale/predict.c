/* predict.c - one strategy's predicted step on one cluster (predict.h): the bytes each unit
 * gathers and reduces, their collectives' costs, the tp all-reduces, the step's timeline of the
 * slowest pipeline stage with the bubble and the transfers between stages, and the engine's memory
 * plan for the same options. */
#include "scale/predict.h"
#include "memory/estimate.h"
#include "scale/cp_comm.h"
#include "scale/ep_comm.h"
#include "scale/tp_comm.h"

#include <stdlib.h>
#include <string.h>

static double dtype_bytes(zt_dtype t) { return t == ZT_DTYPE_FP32 ? 4.0 : 2.0; }

/* Elements each unit of [first, end) gathers before forward (at its first use in the stage),
 * before backward (at its last) and reduces (the gradients it completes: at the first use), and
 * the stage's parameters P (all of them) and trainable ones R: over the data-parallel ranks (dp)
 * and, experts stored E/ep a device (their shard group the expert-data-parallel ranks), over
 * those (edp; m's numel: El experts). */
typedef struct unit_elems {
    double *P_f, *P_b, *R_u; /* per unit of the stage */
    double P, R;
} unit_elems;

static int stage_params(const zt_model *m, int first, int end, unit_elems *dp, unit_elems *edp) {
    int np = m->n_params > 0 ? m->n_params : 1;
    int *fu = malloc(2 * (size_t)np * sizeof *fu), *lu = fu ? fu + np : NULL;
    if (!fu) return ZT_ERR_NOMEM;
    for (int i = 0; i < m->n_params; i++) fu[i] = lu[i] = -1;
    for (int u = first; u < end; u++)
        for (int k = 0; k < m->units[u].n_params; k++) {
            int i = m->units[u].params[k];
            if (fu[i] < 0) fu[i] = u;
            lu[i] = u;
        }
    dp->P = dp->R = edp->P = edp->R = 0;
    for (int i = 0; i < m->n_params; i++) {
        if (fu[i] < 0) continue;
        unit_elems *x = m->params[i].shard_group == ZT_SHARD_GROUP_EDP ? edp : dp;
        double e = (double)m->params[i].numel;
        x->P += e;
        x->P_f[fu[i] - first] += e; /* forward gathers it at its first use, backward at its last */
        x->P_b[lu[i] - first] += e;
        if (m->params[i].trainable) x->R_u[fu[i] - first] += e, x->R += e;
    }
    free(fu);
    return ZT_OK;
}

/* op on the dense parameters' bytes over the dp group and on the experts' over the edp group (a
 * group of one: nothing), one after the other; *edp_sent += the bytes a device sends in the latter */
static zt_scale_cost two_groups(const zt_scale_net *net, zt_scale_op op, zt_scale_group dp, double dp_bytes,
                                zt_scale_group edp, int edp_size, double edp_bytes, double *edp_sent) {
    zt_scale_cost a = zt_scale_collective(net, dp, op, dp_bytes), b = zt_scale_collective(net, edp, op, edp_bytes);
    if (edp_sent && edp_size > 1)
        *edp_sent += edp_bytes * (edp_size - 1) / edp_size * (op == ZT_SCALE_ALL_REDUCE ? 2 : 1);
    a.seconds += b.seconds, a.node_out_bytes += b.node_out_bytes;
    return a;
}

int zt_scale_predict(const zt_scale_request *rq, zt_strategy strategy, int S, zt_scale_row *out, zt_error *err) {
    memset(out, 0, sizeof *out);
    const zt_model *m = rq->model;
    const zt_scale_cluster *cl = &rq->cluster;
    const zt_scale_compute *c = rq->compute;
    int tp = rq->tp > 0 ? rq->tp : 1, pp = rq->pp > 0 ? rq->pp : 1;
    int N = cl->nodes * cl->per_node, U = m->n_units;
    int GA = rq->opt.grad_accum > 0 ? rq->opt.grad_accum : 1;
    if (N % (tp * pp))
        return zt_error_set(err, ZT_ERR_USAGE, "--tp %d x --pp %d does not divide the %d devices", tp, pp, N);
    int D = N / (tp * pp); /* data-parallel ranks per stage */
    if (strategy == ZT_STRATEGY_HYBRID && (S < 1 || D % S))
        return zt_error_set(err, ZT_ERR_USAGE, "hybrid shard size %d does not divide the %d data-parallel ranks", S, D);
    if (strategy != ZT_STRATEGY_HYBRID) S = strategy == ZT_STRATEGY_DDP ? 1 : D;
    out->strategy = strategy;
    out->shard = S;
    int cp = zt_model_cp_parts(m, NULL);
    if (D % cp || rq->opt.T % (2 * cp))
        return zt_error_set(err, ZT_ERR_USAGE, "context parallelism %d: it must divide the %d data-parallel ranks and "
                            "half of the sequence of %d", cp, D, rq->opt.T);
    out->tp = tp, out->pp = pp, out->cp = cp, out->dp = D, out->micro_batches = GA;

    /* memory: the engine's plan of the device needing the most, the stage needing the most */
    zt_engine_options o = rq->opt;
    o.strategy = strategy;
    o.T = rq->opt.T / cp; /* a part's positions */
    if (strategy == ZT_STRATEGY_HYBRID) o.hybrid_shard_size = S;
    int rc = ZT_OK;
    for (int s = 0; s < pp; s++) { /* the first stage keeps the most in flight, the last has the head */
        if (s > 0 && s < pp - 1) continue;
        int first, end;
        size_t b = 0;
        if ((rc = zt_scale_stage_units(m, pp, s, &first, &end, err)) ||
            (rc = zt_scale_stage_memory(m, &o, &rq->plan, D, pp, s, first, end,
                                        zt_scale_in_flight(rq->pp_schedule, pp, s, GA), &b, err)))
            return rc;
        if (b > out->memory) out->memory = b;
    }
    out->fits = (double)out->memory <= rq->device->memory;

    /* bytes per element on the wire */
    bool lp = rq->opt.precision.mode != ZT_PRECISION_FP32;
    bool zt = cl->profile == ZT_SCALE_ZEROTRAIN;
    double g = zt ? (rq->opt.precision.mode == ZT_PRECISION_BF16_LOW ? 2.0 : 4.0) : (lp ? 2.0 : 4.0);
    double r = dtype_bytes(rq->opt.precision.reduce);
    double act = zt || !lp ? 4.0 : 2.0; /* activations between devices (tp sums, stages) */
    double ep_out, ep_back; /* the all-to-alls' rows (ep_comm.h) */
    zt_scale_ep_elem_bytes(&rq->opt.precision, zt, &ep_out, &ep_back);
    out->gather_bytes_per_elem = g, out->reduce_bytes_per_elem = r;

    int n = U > 0 ? U : 1;
    double *buf = calloc(17 * (size_t)n + (size_t)pp, sizeof *buf);
    if (!buf) return zt_error_set(err, ZT_ERR_NOMEM, "scale model: %d units", U);
    double *gather = buf, *gather_b = gather + n, *reduce = gather_b + n, *tpf = reduce + n, *tpb = tpf + n,
           *cpf = tpb + n, *cpb = cpf + n, *epf = cpb + n, *epb = epf + n, *fw = epb + n, *bw = fw + n,
           *per_stage = bw + n + 6 * (size_t)n;
    unit_elems dpe = {.P_f = bw + n, .P_b = bw + 2 * n, .R_u = bw + 3 * n},
               edpe = {.P_f = bw + 4 * n, .P_b = bw + 5 * n, .R_u = bw + 6 * n};
    const zt_scale_net *net = &cl->net;
    zt_scale_tp_comm(m, net, tp, rq->opt.B, rq->opt.T / cp, act, rq->opt.activation_checkpointing, GA, tpf, tpb,
                     &out->tp_bytes);
    int L = zt_scale_blocks(m);
    zt_scale_cp_comm(m, net, tp, rq->opt.B, rq->opt.T, act, L ? c->attention_fwd_s / L : 0,
                     L ? (c->attention_s - c->attention_fwd_s) / L : 0, GA, cpf, cpb, &out->cp_bytes);
    zt_scale_ep_comm(m, net, tp, cp, rq->opt.B, rq->opt.T / cp, ep_out, ep_back, GA, epf, epb, &out->ep_bytes);
    for (int u = 0; u < U; u++)
        fw[u] = c->fwd[u] + tpf[u] + cpf[u] + epf[u], bw[u] = c->bwd[u] + tpb[u] + cpb[u] + epb[u];

    /* the pipeline: every stage's seconds per micro-batch; the slowest stage is played out */
    for (int s = 0; s < pp; s++) {
        int first, end;
        zt_scale_stage_units(m, pp, s, &first, &end, err);
        for (int u = first; u < end; u++) per_stage[s] += fw[u] + bw[u];
    }
    int slow = 0;
    double pipe = zt_scale_pipeline_seconds(per_stage, pp, GA, &slow);
    int first = 0, end = U;
    zt_scale_stage_units(m, pp, slow, &first, &end, err);
    int SU = end - first;
    /* the experts stored E/ep a device where the engine stores them (zt_memory_experts_storable):
     * their gradients reduced and their pieces sharded and gathered over the expert-data-parallel
     * ranks, D/ep of them ep apart in the dp x cp group (comm/mesh.h), each holding El experts.
     * Hybrid stores them too (sharded over a shard group's edp ranks, replicated across: memory/
     * experts.c); its reduction over those two groups is not modeled: priced as whole experts' (the
     * shard group's reduce-scatter and the replicas' all-reduce of every gradient: an upper bound) */
    zt_model stored;
    bool edp_groups = strategy != ZT_STRATEGY_HYBRID && zt_memory_experts_storable(m, &o);
    if (edp_groups && (rc = zt_scale_stage_view(m, 0, U, &o, &stored, err))) {
        free(buf);
        return rc;
    }
    int ep = zt_model_ep_parts(m), E = edp_groups ? D / ep : 1;
    rc = stage_params(edp_groups ? &stored : m, first, end, &dpe, &edpe);
    if (edp_groups) zt_scale_view_free(&stored);
    if (rc) {
        free(buf);
        return zt_error_set(err, ZT_ERR_NOMEM, "scale model: %d parameters", m->n_params);
    }
    double P = dpe.P + edpe.P, R = dpe.R + edpe.R;
    const double *P_f = dpe.P_f, *P_b = dpe.P_b, *R_u = dpe.R_u;

    /* the stage's data-parallel groups: D ranks at stride tp; hybrid's S of them, its replicas S·tp
     * apart; the experts' edp groups (E of the D ranks at stride ep·tp) */
    zt_scale_group world = zt_scale_group_of(net, D, tp), shard = zt_scale_group_of(net, S, tp),
                   replicas = zt_scale_group_of(net, D / S, S * tp), edp = zt_scale_group_of(net, E, ep * tp);
    double *edp_sent = &out->edp_reduce_bytes;
    bool sharded_params = strategy == ZT_STRATEGY_ZERO3 || strategy == ZT_STRATEGY_HYBRID;
    /* under pp the GPU frameworks reduce in the last micro-batch and keep the gathered parameters
     * to backward (torch.distributed.pipelining's gradient sync, torchtitan's reshard_after_forward
     * False for pp) */
    bool every_mb = !zt && pp == 1 && strategy != ZT_STRATEGY_DDP && strategy != ZT_STRATEGY_ZERO1;
    bool regather = !rq->opt.keep_params_after_forward && (zt || pp == 1);
    double node_out = 0;
    for (int u = 0; u < SU; u++) {
        zt_scale_cost a = {0}, b = {0};
        if (sharded_params) {
            zt_scale_group grp = strategy == ZT_STRATEGY_HYBRID ? shard : world;
            a = two_groups(net, ZT_SCALE_ALL_GATHER, grp, P_f[u] * g, edp, E, edpe.P_f[u] * g, NULL);
            gather[u] = a.seconds;
            node_out += a.node_out_bytes * GA;
            if (regather) {
                zt_scale_cost ab = two_groups(net, ZT_SCALE_ALL_GATHER, grp, P_b[u] * g, edp, E, edpe.P_b[u] * g, NULL);
                gather_b[u] = ab.seconds;
                node_out += ab.node_out_bytes * GA;
            }
        }
        double edp_mb = 0; /* the experts' reduction's bytes a device sends, once */
        if (strategy == ZT_STRATEGY_DDP)
            b = two_groups(net, ZT_SCALE_ALL_REDUCE, world, R_u[u] * r, edp, E, edpe.R_u[u] * r, &edp_mb);
        else if (strategy == ZT_STRATEGY_HYBRID) { /* the experts priced as whole (above) */
            b = zt_scale_collective(net, shard, ZT_SCALE_REDUCE_SCATTER, R_u[u] * r);
            if (!zt) { /* FSDP's HSDP: right after the unit's reduce-scatter */
                zt_scale_cost ar = zt_scale_collective(net, replicas, ZT_SCALE_ALL_REDUCE, R_u[u] / S * r);
                b.seconds += ar.seconds, b.node_out_bytes += ar.node_out_bytes;
            }
        } else b = two_groups(net, ZT_SCALE_REDUCE_SCATTER, world, R_u[u] * r, edp, E, edpe.R_u[u] * r, &edp_mb);
        reduce[u] = b.seconds;
        node_out += b.node_out_bytes * (every_mb ? GA : 1);
        *edp_sent += edp_mb * (every_mb ? GA : 1);
    }
    double pre = 0, post = 0;
    if (strategy == ZT_STRATEGY_HYBRID && zt) {
        /* the engine all-reduces every piece across the replicas at the step (grads.c), inline */
        zt_scale_cost ar = zt_scale_collective(net, replicas, ZT_SCALE_ALL_REDUCE, R / S * r);
        pre = ar.seconds;
        node_out += ar.node_out_bytes;
    }
    if (strategy == ZT_STRATEGY_ZERO1 || strategy == ZT_STRATEGY_ZERO2) {
        zt_scale_cost a = two_groups(net, ZT_SCALE_ALL_GATHER, world, dpe.P * g, edp, E, edpe.P * g, NULL);
        post = a.seconds;
        node_out += a.node_out_bytes;
    }
    /* updated here: ddp every parameter (El experts), else a 1/S piece (the experts' 1/E of El) */
    double local = strategy == ZT_STRATEGY_DDP ? P : dpe.P / S + edpe.P / E;
    zt_scale_timeline t = {.n_units = SU, .micro_batches = GA, .fwd = fw + first, .bwd = bw + first,
                           .gather = sharded_params ? gather : NULL,
                           .gather_bwd = sharded_params ? gather_b : NULL, .reduce = reduce,
                           .regather_backward = regather, .reduce_every_micro_batch = every_mb,
                           .pre_optimizer_s = pre, .optimizer_s = local * c->opt_s_per_param,
                           .post_gather_s = post};
    zt_scale_step st = zt_scale_schedule(&t);

    /* tp all-reduces and cp exchanges of the slowest stage: on the critical path, moved from compute to exposed
     * (cp's bytes are not in node_out: its groups sit inside a node up to per_node / tp parts) */
    double tp_s = 0, cp_s = 0, ep_s = 0; /* (ep's all-to-alls likewise: ep_comm.h) */
    for (int u = first; u < end; u++)
        tp_s += (tpf[u] + tpb[u]) * GA, cp_s += (cpf[u] + cpb[u]) * GA, ep_s += (epf[u] + epb[u]) * GA;
    /* the pipeline: the bubble and 2·(m + p - 1) transfers of a (B, T, C) activation */
    double bubble = pipe - GA * per_stage[slow], p2p = 0;
    if (pp > 1) {
        int C = 0;
        for (int u = 0; u < U && !C; u++)
            if (m->units[u].layer >= 0) C = m->units[u].out_width;
        double bytes = (double)rq->opt.B * (rq->opt.T / cp) * C * act, one;
        int stage_devs = D * tp, senders = stage_devs < cl->per_node ? stage_devs : cl->per_node;
        if (cl->nodes > 1) { /* stages are blocks of consecutive devices: some boundary crosses nodes */
            one = net->inter_lat + bytes / (net->nics * net->nic_bw / senders);
            node_out += senders * 2.0 * GA * bytes;
        } else one = net->intra_lat + bytes / net->intra_bw;
        p2p = 2.0 * (GA + pp - 1) * one;
    }
    out->step.compute_s = st.compute_s - tp_s - cp_s - ep_s;
    out->step.step_s = st.step_s + bubble + p2p;
    out->step.comm_s = st.comm_s + tp_s + cp_s + ep_s + p2p;
    out->step.exposed_s = st.exposed_s + tp_s + cp_s + ep_s + p2p;
    out->step.hidden_s = out->step.comm_s - out->step.exposed_s > 0 ? out->step.comm_s - out->step.exposed_s : 0;
    out->bubble_s = bubble > 0 ? bubble : 0;
    out->tp_s = tp_s, out->cp_s = cp_s, out->ep_s = ep_s, out->p2p_s = p2p;
    out->ep = ep;
    out->edp = E;
    free(buf);
    out->node_out_bytes = cl->nodes > 1 ? node_out : 0;
    double tokens = (double)rq->opt.B * rq->opt.T * GA / ((double)tp * pp * cp); /* per device */
    out->tokens_per_s = out->step.step_s > 0 ? tokens / out->step.step_s : 0;
    out->mfu = c->peak > 0 ? c->model_flops_per_token * out->tokens_per_s / c->peak : 0;
    return ZT_OK;
}
