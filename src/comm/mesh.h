/* mesh.h - the parallel mesh: one validated record of the parallel sizes, this rank's place on
 * each axis, and the MPI sub-communicators of the axes, built once from the configuration and read
 * by every layer (torchtitan's ParallelDims, Megatron-LM's parallel_state). Nothing else computes
 * rank arithmetic: the engine takes its shard and replicate groups from here, the tensor-parallel
 * units their group, the trainer its data-parallel rank.
 *
 * The axes and the rank order (Megatron-LM's and torchtitan's: tensor-parallel innermost, context-
 * parallel next, pipeline outermost):
 *
 *   world rank = ((pp_rank * dp + dp_rank) * cp + cp_rank) * tp + tp_rank
 *   dp_rank    = replicate_rank * shard + shard_rank        (hybrid: dp = replicate x shard)
 *
 * Context parallelism (cp) splits every sequence over the cp ranks of a dp rank: they read the same
 * samples and hold different positions, so for the parameters' state they are data-parallel ranks
 * too. The engine's data-parallel group is dp x cp ("dp_cp", torchtitan's dp_shard_cp): ZeRO/FSDP
 * shard over it and gradients are summed over it, its ranks ordered
 *
 *   dp_cp_rank = (replicate_rank * cp + cp_rank) * shard + shard_rank
 *
 * (without hybrid: cp_rank * dp + dp_rank), so that the gradients' fixed tree over the ranks'
 * micro-batches (src/engine/grads.c: rank-major runs) adds a micro-batch's cp parts in the same
 * places whether the samples came from dp ranks or from accumulation: cp 2 x dp 2 = cp 2 x 2
 * micro-batches, bit for bit. Hybrid's shard groups are shard x cp ranks, its replicate groups
 * replicate ranks. With cp = 1 the dp_cp group is the dp group.
 *
 *   world 8, tp 2, dp 4 (hybrid: replicate 2 x shard 2), pp 1:
 *     world rank   0  1 | 2  3 | 4  5 | 6  7
 *     tp_rank      0  1 | 0  1 | 0  1 | 0  1      tp groups {0,1} {2,3} {4,5} {6,7}
 *     dp_rank      0    | 1    | 2    | 3         dp groups {0,2,4,6} {1,3,5,7}
 *     shard_rank   0    | 1    | 0    | 1         shard groups {0,2} {4,6} {1,3} {5,7}
 *     replicate    0    | 0    | 1    | 1         replicate groups {0,4} {2,6} {1,5} {3,7}
 *
 * A tp group is tp consecutive world ranks, so with the launcher's placement by slot it stays on
 * one host (its all-reduces run on every layer, in forward and backward); a hybrid shard group is
 * shard x tp consecutive ranks, also one host when the node holds that many.
 *
 * Expert parallelism (ep; DeepSpeed-MoE's, Megatron-LM's, torchtitan's) divides the dp x cp group:
 * its ep groups are ep consecutive dp_cp ranks, each holding the work of every expert, E/ep experts
 * a rank (docs/parallelism.md); the expert-data-parallel groups ("edp", DeepSpeed's expert data
 * parallel) are the dp_cp/ep ranks with the same ep_rank, those that run the same experts:
 *
 *   ep_rank = dp_cp_rank % ep,   edp_rank = dp_cp_rank / ep
 *
 * An ep group is then a contiguous run of the gradients' tree over the ranks (grads.c), so the
 * experts' gradients its owner adds over the group's ranks form a subtree of the same tree.
 *
 * Under hybrid the experts stored E/ep a rank are sharded as the dense parameters are, inside a
 * shard group (S = shard x cp consecutive dp_cp ranks) and replicated across: the edp ranks of one
 * shard group are an "edp_shard" group of es = S / ep ranks where ep divides S (each shard group
 * holds whole ep groups), of 1 where S divides ep (each ep group spans whole shard groups); the
 * "edp_replicate" groups are the edp ranks with the same index in their edp_shard group:
 *
 *   edp_shard_rank = edp_rank % es,   edp_replicate_rank = edp_rank / es
 *
 *   dp 8, hybrid shard 4, ep 2:   dp_cp rank  0 1 2 3 | 4 5 6 7
 *                                 edp_rank    0 0 1 1 | 2 2 3 3
 *     edp groups {0,2,4,6} {1,3,5,7}; edp_shard {0,2} {4,6} {1,3} {5,7}; edp_replicate {0,4} {2,6} {1,5} {3,7}
 *
 * (edp_replicate is then the dense replicate group; where S divides ep, the whole edp group: no
 * comm of its own either way). An S neither dividing nor divided by ep has no such groups
 * (edp_shard 0): the engine keeps the experts whole there.
 *
 * Invariants: world = pp x dp x cp x tp; under hybrid dp = replicate x shard, else shard = dp and
 * replicate = 1 (the strategy shards, or not, over the whole dp axis). Every comm an axis of size 1
 * would have is NULL, except dp_comm, which is the world itself (not owned) when tp = cp = pp = 1
 * and NULL only on one process, and dp_cp_comm, which is dp_comm when cp = 1. Built collectively over the world, freed collectively. */
#ifndef ZT_COMM_MESH_H
#define ZT_COMM_MESH_H

#include "comm/comm.h"

#include <stdbool.h>

/* What the configuration asks for. */
typedef struct zt_mesh_sizes {
    int tp;          /* parallel.tensor_parallel_size, >= 1 */
    int cp;          /* parallel.context_parallel_size, >= 1 (0 is read as 1) */
    int pp;          /* parallel.pipeline_parallel_size, >= 1 */
    bool hybrid;     /* parallel.strategy hybrid: the dp axis is replicate x shard */
    int shard;       /* hybrid: dp ranks per shard group (divides dp) */
    int ep;          /* parallel.expert_parallel_size (divides dp x cp; 0 is read as 1) */
} zt_mesh_sizes;

typedef struct zt_mesh {
    int world, rank;                   /* the whole job */
    int tp, cp, dp, pp;                /* world = pp x dp x cp x tp */
    int tp_rank, cp_rank, dp_rank, pp_rank;
    int shard, replicate;              /* dp = replicate x shard */
    int shard_rank, replicate_rank;
    int dp_cp, dp_cp_rank;             /* the engine's data-parallel group: dp x cp ranks (above) */
    int ep, ep_rank;                   /* expert parallelism: ep consecutive dp_cp ranks (above) */
    int edp, edp_rank;                 /* expert data parallelism: dp_cp / ep ranks, same ep_rank */
    int edp_shard, edp_shard_rank;     /* hybrid: the edp ranks of this rank's shard group (es above; 0:
                                          none); otherwise edp and edp_rank */
    int edp_replicate, edp_replicate_rank; /* hybrid: edp / es, the edp_shard groups; otherwise 1, 0 */
    zt_comm *world_comm;               /* the caller's (not owned); NULL on one process */
    zt_comm *tp_comm;                  /* "tp": the tp ranks of this (pp, dp) point; NULL if tp = 1 */
    zt_comm *cp_comm;                  /* "cp": the cp ranks of this (pp, dp, tp) point; NULL if cp = 1 */
    zt_comm *dp_comm;                  /* "dp": the dp ranks of this (pp, cp, tp) point */
    zt_comm *dp_cp_comm;               /* "dp_cp": the dp x cp ranks of this (pp, tp) point, in dp_cp_rank
                                          order; the dp comm itself when cp = 1 */
    zt_comm *pp_comm;                  /* "pp": the stages of this (dp, tp) point; NULL if pp = 1 */
    zt_comm *ep_comm;                  /* "ep": this rank's ep group in ep_rank order; NULL if ep = 1 */
    zt_comm *edp_comm;                 /* "edp": the ranks of the other ep groups with this ep_rank, in
                                          edp_rank order; NULL if ep = 1 or edp = 1 */
    zt_comm *shard_comm, *replicate_comm; /* hybrid only (whatever their sizes): "shard" (shard x cp
                                             ranks of dp_cp), "replicate" */
    zt_comm *edp_shard_comm;           /* hybrid with ep > 1: "edp_shard" (above; NULL where one rank
                                          or no edp_shard) */
    zt_comm *edp_replicate_comm;       /* ... the edp_replicate group's ranks in their order: the
                                          replicate comm where ep divides S, the edp comm where S
                                          divides ep (not owned; NULL where one rank or none) */
    bool owns_dp;                      /* dp_comm was split from the world */
    bool owns_dp_cp;                   /* dp_cp_comm is not dp_comm */
} zt_mesh;

/* The record for rank `rank` of `world` ranks without any communicator (pure arithmetic: the
 * configuration's checks, the memory plan, tests). ZT_ERR_USAGE naming the keys and the numbers:
 * a size < 1, a world not divisible by tp x pp, a hybrid shard that does not divide the dp size, an
 * expert-parallel size that does not divide dp x cp. */
int zt_mesh_layout(int world, int rank, const zt_mesh_sizes *s, zt_mesh *out, zt_error *err);
/* zt_mesh_layout for world's size and rank, then the axes' comms (collective over world; world
 * NULL: one process, every size must be 1). Hybrid checks (zt_launcher_check_shard_groups) that
 * a shard group's shard x tp ranks sit on one node when the launcher says how many a node holds.
 * *out is freed with zt_mesh_free. */
int zt_mesh_create(zt_comm *world, const zt_mesh_sizes *s, zt_mesh **out, zt_error *err);
void zt_mesh_free(zt_mesh *m);
/* Hybrid's expert-data-parallel ranks inside a shard group of S dp_cp ranks under ep: S / ep where
 * ep divides S, 1 where S divides ep, 0 otherwise (no such group: the experts stay whole). */
int zt_mesh_edp_shard_size(int S, int ep);
/* The coordinates of world rank r (any rank of m's world; the mesh's own rank order). */
void zt_mesh_coords(const zt_mesh *m, int r, int *tp_rank, int *cp_rank, int *dp_rank, int *pp_rank);
/* The world rank at (tp_rank, cp_rank, dp_rank, pp_rank). */
int zt_mesh_world_rank(const zt_mesh *m, int tp_rank, int cp_rank, int dp_rank, int pp_rank);
/* Whether world rank r is one of the ranks whose losses make the step's loss: tp rank 0 (the tp
 * ranks of a group compute the same loss) of every pipeline stage (the last holds the model's loss,
 * the others their units' auxiliary losses: a mixture of experts' router losses, else 0), every cp
 * rank (each holds the losses of its positions). */
bool zt_mesh_holds_loss(const zt_mesh *m, int r);
/* "tp 2 x dp 2 (replicate 2 x shard 1) x pp 1 on 4 ranks; this rank: tp 1, dp 0, pp 0" (cp named
 * when > 1) */
void zt_mesh_describe(const zt_mesh *m, char *buf, size_t cap);

#endif
