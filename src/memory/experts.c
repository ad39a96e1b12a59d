/* experts.c - a mixture's experts in the memory plan (plan.h): whether the engine stores them E/ep a
 * rank (zt_model_store_experts) or keeps them whole under given options, the shard groups the plan
 * (and the engine's shard plan) gives their pieces, and the buffers of their gradient norm.
 *
 * Invariants: the engine (engine.c zt_engine_store_experts, ep_group.c), the plan, the estimator and
 * the tests ask these functions, so they decide alike; the expert-data-parallel groups are the
 * mesh's (comm/mesh.h: edp, and under hybrid edp_shard x edp_replicate, zt_mesh_edp_shard_size). */
#include "memory/plan.h"
#include "comm/mesh.h"

/* hybrid's shard group in data-parallel ranks (dp x cp): the mesh's, or the options' (estimates) */
static int hybrid_group(const zt_engine_options *o) {
    return o->mesh ? o->mesh->shard * o->mesh->cp : o->hybrid_shard_size;
}

const char *zt_memory_experts_whole_reason(const zt_model *m, const zt_engine_options *o) {
    int S = hybrid_group(o), ep = zt_model_ep_parts(m);
    bool hybrid_apart = o->strategy == ZT_STRATEGY_HYBRID && (S < 1 || !zt_mesh_edp_shard_size(S, ep));
    /* hybrid: a shard group of S dp x cp ranks neither a multiple nor a divisor of ep leaves ep groups
     * (ep consecutive ranks) straddling two shard groups, so an expert's owners would shard it
     * unevenly inside the shard groups and their pieces would not line up across the replicas */
    return hybrid_apart ? "the hybrid strategy with a shard group neither a multiple nor a divisor of the "
                          "expert-parallel size (an ep group would straddle two shard groups; torchtitan refuses "
                          "such a mesh: its experts' efsdp x ep must equal dp_shard x cp x tp)"
           : o->optim.kind == ZT_OPT_ONEBIT_ADAM ? "1-bit Adam (its momentum compressed over the data-parallel ranks)"
                                                  : NULL;
}

bool zt_memory_experts_storable(const zt_model *m, const zt_engine_options *o) {
    return zt_model_ep_parts(m) > 1 && !zt_memory_experts_whole_reason(m, o);
}

void zt_memory_experts_for(zt_model *m, const zt_engine_options *o) {
    bool want = zt_memory_experts_storable(m, o);
    if (want && !zt_model_experts_local(m)) {
        zt_error ignore;
        zt_model_store_experts(m, zt_model_ep_parts(m), 0, &ignore); /* every part's tensors are the same size */
    } else if (!want) {
        zt_model_whole_experts(m);
    }
}

void zt_memory_plan_groups(const zt_model *m, const zt_engine_options *o, int world, int rank, int nshards, int shard,
                           zt_plan_group *groups) {
    for (int g = 0; g < ZT_SHARD_GROUP_COUNT; g++) groups[g] = (zt_plan_group){nshards, shard};
    if (!zt_model_experts_local(m)) return;
    int ep = zt_model_ep_parts(m), edp = world / ep;
    if (o->strategy == ZT_STRATEGY_HYBRID) { /* the edp ranks of this rank's shard group (nshards) */
        int es = zt_mesh_edp_shard_size(nshards, ep);
        groups[ZT_SHARD_GROUP_EDP] = es > 1 ? (zt_plan_group){es, rank / ep % es} : (zt_plan_group){1, 0};
        return;
    }
    bool sharded = o->strategy != ZT_STRATEGY_DDP && edp > 1;
    groups[ZT_SHARD_GROUP_EDP] = sharded ? (zt_plan_group){edp, rank / ep} : (zt_plan_group){1, 0};
}

bool zt_memory_edp_replica_shared(const zt_model *m, const zt_plan *pl, bool replicas) {
    return replicas && zt_model_experts_local(m) && pl->groups[ZT_SHARD_GROUP_DP].nshards % zt_model_ep_parts(m) == 0;
}

void zt_memory_edp_comms(const zt_model *m, const zt_plan *pl, bool replicas, int world, int *reduce, int *replica) {
    *reduce = *replica = 1;
    if (!zt_model_experts_local(m)) return;
    int edp = world / zt_model_ep_parts(m);
    *reduce = replicas ? pl->groups[ZT_SHARD_GROUP_EDP].nshards : edp;
    *replica = replicas && !zt_memory_edp_replica_shared(m, pl, replicas) ? edp / *reduce : 1;
}

void zt_memory_ep_chunks(const zt_model *m, int64_t *logical, int64_t *experts) {
    *logical = *experts = 0;
    for (int i = 0; i < m->n_params; i++) {
        int64_t c = zt_plan_desc_chunks(&m->params[i]);
        *logical += c * zt_param_expert_parts(&m->params[i]);
        if (zt_param_experts_stored(&m->params[i])) *experts += c;
    }
}

size_t zt_memory_ep_norm_floats(const zt_model *m) {
    int64_t logical, experts;
    zt_memory_ep_chunks(m, &logical, &experts);
    return 2 * ((size_t)logical + (size_t)(zt_model_ep_parts(m) + 1) * (size_t)experts) + 2;
}
