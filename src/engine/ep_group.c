/* ep_group.c - the engine's side of expert parallelism (docs/parallelism.md): the call a
 * mixture-of-experts unit whose experts are spread over parts makes to move tokens to the experts'
 * parts and back (zt_unit_group's ep_all_to_all), over the mesh's ep group with comm/all_to_all.c
 * (sizes first, then the blocks; under the job's collective deadline, in the comm log, the trace
 * and the byte counters as every collective).
 *
 * Invariants: the units of every part call it in the same order (the same model code on the same
 * micro-batch schedule), from the main thread only; the ep comm is its own (split from the dp x cp
 * group by comm/mesh.c), so the communication thread's collectives never share its tags. Nothing
 * here allocates the blocks: they live in the unit's saved and scratch buffers, which the memory
 * plan counts (model/llama_moe_ep.c sizes them for the most rows a part can send). */
#include "engine/engine_internal.h"
#include "comm/comm.h"
#include "comm/mesh.h"
#include "memory/plan.h"
#include "optim/optim.h"

#include <omp.h>
#include <string.h>

static int all_to_all(const zt_unit_group *g, const void *const *send, const size_t *send_bytes, void *const *recv,
                      const size_t *recv_cap, size_t *recv_bytes, const char *what, zt_error *err) {
    zt_engine *e = g->ctx;
    return zt_all_to_allv(e->ep_comm, send, send_bytes, recv, recv_cap, recv_bytes, what, err);
}

int zt_engine_ep_setup(zt_engine *e, zt_error *err) {
    const zt_mesh *M = e->opt.mesh;
    int parts = zt_model_ep_parts(e->model), mesh_ep = M && M->ep > 1 ? M->ep : 1;
    if (mesh_ep != parts)
        return zt_error_set(err, ZT_ERR_USAGE, "engine: the mesh has %d expert-parallel ranks but model %s spreads its "
                            "experts over %d part%s (zt_model_set_expert_parallel with the mesh's ep size)", mesh_ep,
                            e->model->name, parts, parts == 1 ? "" : "s");
    if (parts == 1) return ZT_OK;
    if (!M->ep_comm)
        return zt_error_set(err, ZT_ERR_INTERNAL, "engine: expert parallelism over %d ranks without the mesh's ep "
                            "group", parts);
    e->ep_comm = M->ep_comm;
    if (e->group.parts < 1) e->group.parts = 1; /* no tensor parallelism: the tp calls are never made */
    if (e->group.cp_parts < 1) e->group.cp_parts = 1;
    e->group.ep_parts = parts;
    e->group.ep_part = M->ep_rank;
    e->group.ep_all_to_all = all_to_all;
    e->group.ctx = e;
    if (!e->edp_groups) return ZT_OK;
    /* the experts stored E/ep a rank: the edp comm's scratch and shared segment (class comm, the
     * memory plan's scratch_edp), the norm's buffers; under hybrid the experts' shard group is the
     * edp ranks of this rank's shard group and their pieces are all-reduced across the replicas
     * (comm/mesh.h: edp_shard, edp_replicate; the replica group's comm where ep divides the shard
     * group, its scratch planned with it, else the edp group's, scratch_edp_replica) */
    bool hybrid = e->opt.strategy == ZT_STRATEGY_HYBRID;
    e->edp_comm = hybrid ? M->edp_shard_comm : M->edp > 1 ? M->edp_comm : NULL;
    e->edp_replica_comm = hybrid ? M->edp_replicate_comm : NULL;
    e->ep_norm_floats = zt_memory_ep_norm_floats(e->model);
    if (!(e->ep_norm = zt_engine_alloc(e, e->ep_norm_floats, &e->mem.comm, "the experts' gradient-norm partials")))
        return zt_engine_oom(e, err, "engine: expert parallelism");
    int rc = zt_engine_reserve_scratch(e, e->edp_comm, e->mem_plan.scratch_edp, 4, err);
    if (rc || e->edp_replica_comm == e->replica_comm) return rc; /* (the replica group's: reserved once) */
    return zt_engine_reserve_scratch(e, e->edp_replica_comm, e->mem_plan.scratch_edp_replica, 6, err);
}

int zt_engine_ep_norm(zt_engine *e, const double *partials, const double **logical_out, size_t *n_out,
                      zt_error *err) {
    const zt_model *m = e->model;
    int P = e->group.ep_parts;
    int64_t logical, experts;
    zt_memory_ep_chunks(m, &logical, &experts);
    if (!e->ep_norm || 2 * ((size_t)logical + (size_t)(P + 1) * (size_t)experts) > e->ep_norm_floats)
        return zt_error_set(err, ZT_ERR_INTERNAL, "engine: the experts' norm partials (%lld chunks): no buffer",
                            (long long)logical);
    double *all = (double *)(void *)e->ep_norm, *mine = all + logical, *parts = mine + experts;
    int64_t at = 0, k = 0;
    for (int i = 0; i < m->n_params; i++) { /* this part's expert chunks, in plan order */
        int64_t c = zt_plan_desc_chunks(&m->params[i]);
        if (zt_param_experts_stored(&m->params[i])) memcpy(mine + k, partials + at, (size_t)c * sizeof *mine), k += c;
        at += c;
    }
    double t0 = omp_get_wtime();
    int rc = zt_all_gather_f64(e->ep_comm, mine, parts, (size_t)experts, "gradient norm over the expert parts", err);
    e->comm_s += omp_get_wtime() - t0;
    if (rc) return rc;
    int64_t to = 0;
    at = k = 0;
    for (int i = 0; i < m->n_params; i++) { /* one process's numbering: part q's experts after part q-1's */
        int64_t c = zt_plan_desc_chunks(&m->params[i]);
        if (zt_param_experts_stored(&m->params[i])) {
            for (int q = 0; q < P; q++) memcpy(all + to + q * c, parts + (size_t)q * experts + k, (size_t)c * sizeof *all);
            to += c * P, k += c;
        } else {
            memcpy(all + to, partials + at, (size_t)c * sizeof *all);
            to += c;
        }
        at += c;
    }
    *logical_out = all;
    *n_out = (size_t)logical;
    return ZT_OK;
}
