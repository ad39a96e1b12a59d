/* collective.h - the scale model's cost of one collective (alpha-beta: a latency per step plus
 * bytes over a bandwidth), over a group of devices that may span nodes, for two algorithms:
 *
 *   ring      NCCL's: p-1 steps; every device sends (p-1)/p of the data (all-gather,
 *             reduce-scatter; twice for all-reduce). Across nodes NCCL runs one ring per NIC
 *             (rail-aligned), each crossing every node boundary once, so the bytes leaving a node
 *             are (p-1)/p of the data, spread over its NICs. An all-reduce may instead take NCCL's
 *             tree (a chain inside the node, a double binary tree across nodes): latency
 *             2·((l-1)·a_intra + ceil(log2 nodes)·a_inter), bytes 2·S over the slower link; the
 *             cheaper of ring and tree is taken, as NCCL's tuner does.
 *   pairwise  zerotrain's own collectives (src/comm/): every device sends its piece straight to
 *             every other (MPI point-to-point), so a node sends l·(p-l)/p of the data to other
 *             nodes (more than a ring's (p-1)/p when l > 1); an all-reduce is a reduce-scatter
 *             plus an all-gather.
 *
 * With l members per node on n nodes (p = l·n) and S the bytes of the whole tensor (what an
 * all-gather ends with on every device, what a reduce-scatter starts from):
 *   one node      t = (p-1)·a_intra + S·(p-1)/p / B_intra
 *   across nodes  t = (p-1)·a_inter + max(node_out / B_node, S·(p-1)/p / B_intra  [l > 1])
 *                 B_node = NICs per node x B_nic / (groups of this shape active at once on a node)
 * Hierarchical collectives (hybrid: reduce-scatter inside the shard group, all-reduce of the
 * piece across the replicas) are two of these, with their own group shapes (schedule.c). */
#ifndef ZT_SCALE_COLLECTIVE_H
#define ZT_SCALE_COLLECTIVE_H

#include <stdbool.h>

typedef enum zt_scale_algo { ZT_SCALE_RING = 0, ZT_SCALE_PAIRWISE = 1 } zt_scale_algo;
typedef enum zt_scale_op { ZT_SCALE_ALL_GATHER = 0, ZT_SCALE_REDUCE_SCATTER = 1, ZT_SCALE_ALL_REDUCE = 2 } zt_scale_op;

typedef struct zt_scale_net {
    int per_node;              /* devices per node */
    double intra_bw, intra_lat;/* per device, per direction; per step */
    double nic_bw, inter_lat;  /* per NIC, per direction; per step */
    int nics;                  /* NICs per node */
    zt_scale_algo algo;
} zt_scale_net;

typedef struct zt_scale_group {
    int local;                 /* members on each node it spans */
    int nodes;                 /* nodes it spans */
    int concurrent;            /* groups of this shape running at once on each node, sharing its NICs */
} zt_scale_group;

/* The group of `size` consecutive ranks (ranks fill nodes in order) and its concurrency: the
 * shard groups of hybrid, the world, or (stride > 1) the replica groups of ranks r, r+stride, ...
 * with `size` members. */
zt_scale_group zt_scale_group_of(const zt_scale_net *net, int size, int stride);

typedef struct zt_scale_cost {
    double seconds;
    double node_out_bytes;     /* bytes one node sends to other nodes for this collective (all its
                                  concurrent groups together) */
    bool tree;                 /* an all-reduce that took the tree */
} zt_scale_cost;

/* Cost of `op` on `bytes` (the whole tensor's size) over group g. 0 for a group of one. */
zt_scale_cost zt_scale_collective(const zt_scale_net *net, zt_scale_group g, zt_scale_op op, double bytes);

#endif
