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
    return ZT_OK;
}
