/* onebit.c - 1-bit Adam in the engine (DeepSpeed's OnebitAdam, docs/optimizer.md): after
 * optimizer.onebit_freeze_step steps of Adam (step.c's ordinary path, the gradient all-reduced),
 * each rank keeps its own gradient (grads.c skips the reduction while zt_onebit_frozen), moves its
 * momentum with it, averages the momentum by the 1-bit compressed all-reduce
 * (comm/compressed_all_reduce.c) with this rank's worker and server error feedback, and updates
 * the parameters with the variance frozen at the warm-up's last value. Under ddp the state is the
 * full layout on every rank. Under hybrid (inner zero2 or zero3) the gradient is still
 * reduce-scattered in full precision inside the shard group (one host's ranks), each rank moves the
 * momentum of the piece it owns with that piece, the pieces' momenta are averaged compressed across
 * the replica group (the ranks holding the same piece: the expensive inter-host hop), and the shard
 * group gathers the updated parameters as hybrid does (step.c). memory/plan.c counts the error
 * buffers; ckpt/ saves them per rank. */
#include "engine/engine_internal.h"
#include "optim/optim.h"

#include <omp.h>
#include <string.h>

zt_comm *zt_onebit_comm(const zt_engine *e) {
    zt_comm *c = e->opt.strategy == ZT_STRATEGY_HYBRID ? e->replica_comm : e->world > 1 ? e->shard_comm : NULL;
    return c && zt_comm_size(c) > 1 ? c : NULL;
}

int zt_onebit_replicas(const zt_engine *e) {
    zt_comm *c = zt_onebit_comm(e);
    return c ? zt_comm_size(c) : 1;
}

int zt_onebit_setup(zt_engine *e, zt_error *err) {
    const zt_engine_options *o = &e->opt;
    const char *no = NULL;
    bool hybrid = o->strategy == ZT_STRATEGY_HYBRID;
    if (!hybrid && (e->shard_optim || o->strategy != ZT_STRATEGY_DDP))
        no = "parallel.strategy other than ddp or hybrid (DeepSpeed refuses ZeRO too)";
    else if (hybrid && o->hybrid_inner != ZT_STRATEGY_ZERO2 && o->hybrid_inner != ZT_STRATEGY_ZERO3)
        no = "parallel.hybrid_inner other than zero2 or zero3";
    else if (hybrid && e->ep_comm) no = "hybrid and expert parallelism (the experts' pieces have other replica groups)";
    else if (e->tp_comm) no = "tensor parallelism";
    else if (e->pp) no = "pipeline parallelism";
    else if (e->offload_dir) no = "optimizer offload";
    else if (o->precision.moments == ZT_DTYPE_BF16 || o->precision.params == ZT_DTYPE_BF16) no = "bf16-low";
    if (no) return zt_error_set(err, ZT_ERR_USAGE, "optimizer.type: onebit_adam with %s is not implemented", no);
    /* one rank (or one replica): nothing is compressed (DeepSpeed's too) */
    zt_comm *c = zt_onebit_comm(e);
    if (!c) return ZT_OK;
    size_t n = e->state_floats; /* ddp: the full layout; hybrid: this rank's pieces */
    e->onebit_server_floats = zt_compressed_server_floats(n, zt_comm_size(c), zt_comm_rank(c));
    if (!(e->onebit_worker_error = zt_engine_alloc(e, n, &e->mem.optimizer, "1-bit Adam's worker error")) ||
        !(e->onebit_server_error = zt_engine_alloc(e, e->onebit_server_floats, &e->mem.optimizer,
                                                   "1-bit Adam's server error")))
        return zt_engine_oom(e, err, "engine: 1-bit Adam's error feedback (%zu + %zu floats)", n,
                             e->onebit_server_floats);
    memset(e->onebit_worker_error, 0, n * sizeof(float));
    memset(e->onebit_server_error, 0, e->onebit_server_floats * sizeof(float));
    return ZT_OK;
}

/* The step being computed (e->step + 1) comes after the warm-up's freeze_step steps */
bool zt_onebit_frozen(const zt_engine *e) {
    return e->opt.optim.kind == ZT_OPT_ONEBIT_ADAM && (int64_t)e->step >= e->opt.optim.onebit_freeze_step;
}

/* e->step already counts this step; gscale carries this rank's clipping, the loss scale and the
 * replica count (the gradient here is this rank's, or its shard group's, share of the sum: step.c).
 * ddp: the whole layout, its momentum averaged compressed over the world. hybrid: the momentum of
 * this rank's pieces moved with the shard group's reduced gradient pieces, averaged compressed
 * across the replica group, each piece updated where the store keeps it (zero3 and hybrid's master
 * pieces: the piece itself; zero2 over fp32: the piece's rows of the full tensor, all-gathered
 * afterwards by zt_store_after_update, step.c) */
int zt_onebit_step(zt_engine *e, float lr, float gscale, zt_error *err) {
    const zt_optimizer_config *o = &e->opt.optim;
    const zt_model *md = e->model;
    const zt_plan *pl = &e->plan;
    bool pieces = e->shard_optim;
    size_t n = e->state_floats;
    zt_onebit_momentum(pieces ? e->grad_pieces : e->micro_grads, e->m, n, o->beta1, gscale);
    if (e->onebit_worker_error) { /* (allocated only where zt_onebit_comm has a group: setup) */
        double t0 = omp_get_wtime();
        int rc = zt_compressed_all_reduce(zt_onebit_comm(e), e->m, n, e->onebit_worker_error, e->onebit_server_error,
                                          pieces ? "1-bit Adam momentum pieces across replicas" : "1-bit Adam momentum",
                                          err);
        e->comm_s += omp_get_wtime() - t0;
        if (rc) return rc;
    }
    for (int i = 0; i < md->n_params; i++) {
        const zt_param_desc *p = &md->params[i];
        if (!p->trainable) continue;
        size_t off = pieces ? pl->p[i].gshard_off : pl->p[i].gfull_off,
               cnt = pieces ? (size_t)zt_plan_shard_numel(pl, i, pl->p[i].shard) : (size_t)p->numel,
               local0 = pieces && !zt_store_local_is_piece(e) ? (size_t)zt_plan_shard_begin(pl, i, pl->p[i].shard) : 0;
        if (!cnt) continue;
        float *w = zt_store_local_fp32(e, i);
        if (!w) return zt_error_set(err, ZT_ERR_INTERNAL, "1-bit Adam: %s has no fp32 master", p->name);
        zt_onebit_apply(w + local0, e->m + off, e->v + off, cnt, lr, o->beta1, o->beta2, o->eps,
                        p->decay ? o->weight_decay : 0.0f, (int64_t)e->step, o->onebit_freeze_step,
                        o->onebit_bias_correction);
    }
    return ZT_OK;
}

/* ckpt/: this rank's error buffers (NULL when there are none: one rank, another optimizer) */
float *zt_engine_onebit_errors(zt_engine *e, size_t *worker_floats, float **server, size_t *server_floats) {
    *worker_floats = e->onebit_worker_error ? e->state_floats : 0;
    *server = e->onebit_server_error;
    *server_floats = e->onebit_server_error ? e->onebit_server_floats : 0;
    return e->onebit_worker_error;
}

int zt_engine_dp_size(const zt_engine *e) { return e->world; }

int zt_engine_onebit_shard_group(const zt_engine *e) {
    return e->opt.strategy == ZT_STRATEGY_HYBRID && e->shard_comm ? zt_comm_size(e->shard_comm) : 0;
}
