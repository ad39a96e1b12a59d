/* launcher.c - ranks per node and local rank from the launcher's environment (Open MPI, MPICH
 * Hydra, Slurm), hybrid's default shard group (one per node), and the collective check that every
 * rank agrees on it and that nodes hold contiguous blocks of ranks.
 *
 * Invariants:
 *   - Only environment variables are read; nothing here asks MPI where ranks are, so the same
 *     answer is available before zt_comm_init (the memory planner, the CPU share of a rank).
 *   - A shard group is ranks [k*S, (k+1)*S) (engine.c's split); it is one node's ranks exactly
 *     when the launcher places ranks by slot (mpirun's default, srun's block distribution).
 */
#include "comm/launcher.h"
#include "core/env.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A positive decimal integer prefix of name's value ("2(x3)" reads as 2); 0 when unset/not one. */
static int env_pos(zt_env_var name) {
    const char *v = zt_env(name);
    if (!v || *v < '0' || *v > '9') return 0;
    long x = strtol(v, NULL, 10);
    return x > 0 && x < 1 << 30 ? (int)x : 0;
}

static int env_nonneg(zt_env_var name) {
    const char *v = zt_env(name);
    if (!v || *v < '0' || *v > '9') return -1;
    long x = strtol(v, NULL, 10);
    return x >= 0 && x < 1 << 30 ? (int)x : -1;
}

/* Slurm's SLURM_TASKS_PER_NODE ("2(x3),1": nodes 0-2 run 2 tasks, node 3 runs 1) at node `id`. */
static int slurm_tasks_on_node(const char *spec, int id) {
    const char *p = spec;
    while (p && *p) {
        char *end;
        long n = strtol(p, &end, 10), reps = 1;
        if (end == p || n < 1) return 0;
        if (*end == '(') {
            if (end[1] != 'x') return 0;
            reps = strtol(end + 2, &end, 10);
            if (reps < 1 || *end != ')') return 0;
            end++;
        }
        if (id < reps) return (int)n;
        id -= (int)reps;
        p = *end == ',' ? end + 1 : NULL;
    }
    return 0;
}

void zt_launcher_node_get(zt_launcher_node *n) {
    static const struct { zt_env_var size, rank; } vars[] = {
        {ZT_ENV_OMPI_COMM_WORLD_LOCAL_SIZE, ZT_ENV_OMPI_COMM_WORLD_LOCAL_RANK},
        {ZT_ENV_MPI_LOCALNRANKS, ZT_ENV_MPI_LOCALRANKID},
    };
    n->local_size = 0;
    n->local_rank = -1;
    n->source = "";
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        if ((n->local_size = env_pos(vars[i].size)) > 0) {
            n->local_rank = env_nonneg(vars[i].rank);
            n->source = zt_env_name(vars[i].size);
            return;
        }
    }
    /* srun writes the step's layout to SLURM_STEP_TASKS_PER_NODE always, and to
     * SLURM_TASKS_PER_NODE only without --preserve-env (-E), which keeps the job's allocation
     * there (sbatch --ntasks-per-node=8, then srun -E -n 4 -N 2: the step runs 2 per node) */
    static const zt_env_var specs[] = {ZT_ENV_SLURM_STEP_TASKS_PER_NODE, ZT_ENV_SLURM_TASKS_PER_NODE};
    int id = env_nonneg(ZT_ENV_SLURM_NODEID);
    for (size_t i = 0; i < 2 && id >= 0; i++) {
        const char *spec = zt_env(specs[i]);
        if (spec && (n->local_size = slurm_tasks_on_node(spec, id)) > 0) {
            n->source = zt_env_name(specs[i]);
            n->local_rank = env_nonneg(ZT_ENV_SLURM_LOCALID);
            return;
        }
    }
    if ((n->local_size = env_pos(ZT_ENV_SLURM_NTASKS_PER_NODE)) > 0) {
        n->source = zt_env_name(ZT_ENV_SLURM_NTASKS_PER_NODE);
    } else {
        n->local_size = 0;
        return;
    }
    n->local_rank = env_nonneg(ZT_ENV_SLURM_LOCALID);
}

int zt_launcher_default_shard_size(int world, const char **source) {
    zt_launcher_node n;
    zt_launcher_node_get(&n);
    if (source) *source = n.local_size > 0 ? n.source : "";
    return n.local_size > 0 ? n.local_size : world;
}

int zt_launcher_check_shard_groups(zt_comm *world, int S, zt_error *err) {
    int N = zt_comm_size(world), r = zt_comm_rank(world);
    zt_launcher_node n;
    zt_launcher_node_get(&n);
    /* mine: S, and whether this rank sits where a node-contiguous placement puts it (1 = yes,
     * 0 = no, 2 = S is not the launcher's node size or the local rank is unknown: no claim) */
    double mine[2] = {(double)S, 2};
    if (n.local_size == S && n.local_rank >= 0) mine[1] = n.local_rank == r % S ? 1 : 0;
    double *all = malloc(2 * (size_t)N * sizeof *all);
    if (!all) return zt_error_set(err, ZT_ERR_NOMEM, "hybrid shard check: %d doubles", 2 * N);
    int rc = zt_all_gather_f64(world, mine, all, 2, "hybrid shard check", err);
    for (int j = 0; rc == ZT_OK && j < N; j++) {
        if (all[2 * j] != all[0])
            rc = zt_error_set(err, ZT_ERR_MISMATCH, "hybrid: rank %d uses shard groups of %g, rank 0 of %g "
                              "(ranks per node differ: set parallel.hybrid_shard_size)", j, all[2 * j], all[0]);
        else if (all[2 * j + 1] == 0)
            rc = zt_error_set(err, ZT_ERR_MISMATCH, "hybrid: rank %d is not local rank %d of its node: the "
                              "launcher did not place ranks %d..%d on one node (map by slot/core, e.g. "
                              "mpirun --map-by slot or srun --distribution=block), so a shard group of %d "
                              "would span nodes", j, j % S, j / S * S, j / S * S + S - 1, S);
    }
    free(all);
    return rc;
}
