/* env.h - every environment variable zerotrain reads, in one table (env.c): its name, what kind of
 * variable it is, what it does and which files read it. The user's training settings are keys of
 * the configuration (src/config/keys.c, docs/config.md); what is read from the environment is
 * what must be known before or below the configuration (the kernels' level before main, the comm
 * layer's waits), comparison switches and test hooks, what a launcher (ours, mpirun, srun) tells a
 * rank, and the system's own variables. docs/environment.md is the same table for a reader.
 *
 * A file reads a variable only through zt_env (tests/layers.sh fails on a getenv elsewhere), so
 * a new variable is a row here first. */
#ifndef ZT_ENV_H
#define ZT_ENV_H

typedef enum zt_env_var {
    /* settings read before or below the configuration */
    ZT_ENV_ISA,
    ZT_ENV_GEMM,
    ZT_ENV_COMM_TIMEOUT,
    ZT_ENV_PEAK_GFLOPS,
    ZT_ENV_CACHE_DIR,
    ZT_ENV_GNUPLOT,
    ZT_ENV_NO_TTY,
    ZT_ENV_BPE_DIR,
    ZT_ENV_MPIRUN,
    /* tuning of the comm layer */
    ZT_ENV_COMM_CHUNK_BYTES,
    ZT_ENV_COMM_SPIN_US,
    ZT_ENV_COMM_AR_EXCHANGE_BYTES,
    ZT_ENV_COMM_AR_SHM_BYTES,
    /* diagnostics and comparisons */
    ZT_ENV_COMM_CHECK,
    ZT_ENV_PEAK_CACHE,
    ZT_ENV_GRAD_ASSIGN,
    ZT_ENV_BLOCK_CACHE,
    ZT_ENV_OVERLAP_COMM,
    ZT_ENV_CP_HEAD_GROUPS,
    ZT_ENV_OFFLOAD_DIRECT,
    ZT_ENV_EXPERTS_WHOLE,
    /* test hooks */
    ZT_ENV_FAULT,
    ZT_ENV_CPU_FAKE,
    ZT_ENV_FAKE_BUILD_ID,
    ZT_ENV_SOURCE_DIR,
    /* set by `zerotrain train --nproc` (cli/launch.c) for its ranks */
    ZT_ENV_RUN_DIR,
    ZT_ENV_RESTART_ATTEMPT,
    ZT_ENV_STDOUT_TTY,
    ZT_ENV_LAUNCHED,
    /* set by mpirun, MPICH's Hydra or srun */
    ZT_ENV_OMPI_COMM_WORLD_SIZE,
    ZT_ENV_OMPI_COMM_WORLD_LOCAL_SIZE,
    ZT_ENV_OMPI_COMM_WORLD_LOCAL_RANK,
    ZT_ENV_PMI_SIZE,
    ZT_ENV_PMIX_RANK,
    ZT_ENV_MV2_COMM_WORLD_SIZE,
    ZT_ENV_MPI_LOCALNRANKS,
    ZT_ENV_MPI_LOCALRANKID,
    ZT_ENV_SLURM_PROCID,
    ZT_ENV_SLURM_NODEID,
    ZT_ENV_SLURM_LOCALID,
    ZT_ENV_SLURM_STEP_TASKS_PER_NODE,
    ZT_ENV_SLURM_TASKS_PER_NODE,
    ZT_ENV_SLURM_NTASKS_PER_NODE,
    /* the system's */
    ZT_ENV_OMP_NUM_THREADS,
    ZT_ENV_TMPDIR,
    ZT_ENV_HOME,
    ZT_ENV_XDG_CACHE_HOME,
    ZT_ENV_COUNT
} zt_env_var;

typedef struct zt_env_def {
    const char *name;    /* "ZT_ISA" */
    const char *kind;    /* setting, tuning, diagnostic, test hook, launcher, system */
    const char *what;    /* what it does, one line */
    const char *readers; /* the files that read it */
} zt_env_def;

/* The table, indexed by zt_env_var. */
extern const zt_env_def zt_env_defs[ZT_ENV_COUNT];

/* getenv of the variable's name: NULL when unset ("" when set empty). */
const char *zt_env(zt_env_var v);
/* Its value when set and not empty, else fallback. */
const char *zt_env_or(zt_env_var v, const char *fallback);
/* The variable's name (messages: "ZT_COMM_TIMEOUT='x': ..."). */
const char *zt_env_name(zt_env_var v);

#endif
