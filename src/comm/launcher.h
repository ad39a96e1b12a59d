/* launcher.h - what the launcher (mpirun, mpiexec.hydra, srun) says about where the ranks run:
 * ranks on this node and this rank's place among them, read from its environment; and the check
 * that hybrid's shard groups are the launcher's nodes. */
#ifndef ZT_COMM_LAUNCHER_H
#define ZT_COMM_LAUNCHER_H

#include "comm/comm.h"

typedef struct zt_launcher_node {
    int local_size;        /* ranks on this node; 0 when no launcher variable says */
    int local_rank;        /* this rank among them; -1 when unknown */
    const char *source;    /* the variable local_size came from ("OMPI_COMM_WORLD_LOCAL_SIZE",
                              "MPI_LOCALNRANKS", "SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE",
                              "SLURM_NTASKS_PER_NODE")
                              or "" (static storage) */
} zt_launcher_node;

/* Reads, first found wins: Open MPI's OMPI_COMM_WORLD_LOCAL_SIZE / _LOCAL_RANK, MPICH Hydra's
 * MPI_LOCALNRANKS / MPI_LOCALRANKID, Slurm's SLURM_STEP_TASKS_PER_NODE then SLURM_TASKS_PER_NODE
 * (the entry of this node, SLURM_NODEID, in their "2(x3),1" form) or SLURM_NTASKS_PER_NODE, with
 * SLURM_LOCALID. A value that
 * is not a positive number counts as unset. Never fails. */
void zt_launcher_node_get(zt_launcher_node *n);

/* hybrid's shard group size when parallel.hybrid_shard_size is 0: the ranks on this node when the
 * launcher says, else `world` (one node). *source (may be NULL) gets the variable, or "". */
int zt_launcher_default_shard_size(int world, const char **source);

/* Collective over `world` (every rank calls it with its own S): fails with ZT_ERR_MISMATCH when
 * the ranks disagree on S, or when S is the launcher's ranks per node but the ranks of a node are
 * not the contiguous block [k*S, (k+1)*S) of world ranks (e.g. mpirun --map-by node), which would
 * make every shard group span nodes. Names the first offending rank. */
int zt_launcher_check_shard_groups(zt_comm *world, int S, zt_error *err);

#endif
