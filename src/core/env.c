/* env.c - the table of every environment variable zerotrain reads and the one place that reads
 * them (see env.h). */
#include "core/env.h"

#include <stdlib.h>

#define ROW(id, name, kind, what, readers) [id] = {name, kind, what, readers}

const zt_env_def zt_env_defs[ZT_ENV_COUNT] = {
    ROW(ZT_ENV_ISA, "ZT_ISA", "setting",
        "the kernels' instruction-set level: auto, avx2, avx512, avx512_bf16, amx (read before main; "
        "a level the CPU lacks is exit 2)", "kernels/dispatch.c"),
    ROW(ZT_ENV_GEMM, "ZT_GEMM", "setting",
        "the fp32 GEMM backend: openblas, onednn (dnnl) or auto (the rule in gemm.c)", "kernels/gemm.c"),
    ROW(ZT_ENV_COMM_TIMEOUT, "ZT_COMM_TIMEOUT", "setting",
        "collective deadline in seconds, the environment's comm.timeout_s (the comm layer reads it at "
        "MPI start, before the configuration reaches it); passed on to the ranks by the launcher",
        "comm/world.c, cli/launch.c, train/step_deadline.c"),
    ROW(ZT_ENV_PEAK_GFLOPS, "ZT_PEAK_GFLOPS", "setting",
        "GFLOP/s of one rank that MFU divides by, instead of the measured peak", "scale/peak.c"),
    ROW(ZT_ENV_CACHE_DIR, "ZT_CACHE_DIR", "setting",
        "the directory of the measured-peak cache (else $XDG_CACHE_HOME/zerotrain, ~/.cache/zerotrain)",
        "scale/peak.c"),
    ROW(ZT_ENV_GNUPLOT, "ZT_GNUPLOT", "setting", "the gnuplot executable `zerotrain plot` runs",
        "metrics/plot.c"),
    ROW(ZT_ENV_NO_TTY, "ZT_NO_TTY", "setting", "set: the progress display prints plain lines, never redraws",
        "metrics/progress.c"),
    ROW(ZT_ENV_BPE_DIR, "ZT_BPE_DIR", "setting", "a directory holding GPT-2's encoder.json and vocab.bpe",
        "data/bpe.c"),
    ROW(ZT_ENV_MPIRUN, "ZT_MPIRUN", "setting", "the mpirun that `train --nproc` runs", "cli/launch.c"),
    ROW(ZT_ENV_COMM_CHUNK_BYTES, "ZT_COMM_CHUNK_BYTES", "tuning",
        "bytes per pipelined chunk of the collectives (4096 to 1G, suffix k, M, G)", "comm/world.c"),
    ROW(ZT_ENV_COMM_SPIN_US, "ZT_COMM_SPIN_US", "tuning",
        "microseconds a wait spins without progress before yielding (default 1000; 0 with more ranks "
        "than cores)", "comm/world.c"),
    ROW(ZT_ENV_COMM_AR_EXCHANGE_BYTES, "ZT_COMM_AR_EXCHANGE_BYTES", "tuning",
        "the largest all-reduce done by whole-vector exchange (0: never)", "comm/world.c"),
    ROW(ZT_ENV_COMM_AR_SHM_BYTES, "ZT_COMM_AR_SHM_BYTES", "tuning",
        "the largest all-reduce through the node's shared segment (0: no shared segment, so the all-to-all goes by messages too)", "comm/world.c"),
    ROW(ZT_ENV_COMM_CHECK, "ZT_COMM_CHECK", "diagnostic",
        "1: the ranks compare every collective's fingerprint first (comm.check_collectives)",
        "comm/fingerprint.c"),
    ROW(ZT_ENV_PEAK_CACHE, "ZT_PEAK_CACHE", "diagnostic", "0: measure the peak every time, no cache",
        "scale/peak.c"),
    ROW(ZT_ENV_GRAD_ASSIGN, "ZT_GRAD_ASSIGN", "diagnostic",
        "0: zero every gradient before backward instead of letting the first product assign it",
        "engine/grads.c"),
    ROW(ZT_ENV_BLOCK_CACHE, "ZT_BLOCK_CACHE", "diagnostic", "0: the engine's allocator keeps no freed blocks for reuse (docs/memory.md)",
        "engine/engine.c"),
    ROW(ZT_ENV_OVERLAP_COMM, "ZT_OVERLAP_COMM", "diagnostic",
        "0: no communication thread, gradients reduced after backward", "engine/overlap.c"),
    ROW(ZT_ENV_CP_HEAD_GROUPS, "ZT_CP_HEAD_GROUPS", "diagnostic",
        "context parallelism's allgather and ulysses exchanges pipelined over this many head groups (1: "
        "one exchange before the attention; unset: the rule in context_parallel.c; the same bits either way)",
        "model/context_parallel.c"),
    ROW(ZT_ENV_OFFLOAD_DIRECT, "ZT_OFFLOAD_DIRECT", "diagnostic",
        "0: NVMe offload through the page cache instead of O_DIRECT (comparisons)", "engine/offload.c"),
    ROW(ZT_ENV_EXPERTS_WHOLE, "ZT_EXPERTS_WHOLE", "diagnostic",
        "1: expert parallelism keeps every expert on every rank instead of storing them E/ep a rank "
        "(comparisons: the same bits, more memory)", "train/setup.c"),
    ROW(ZT_ENV_FAULT, "ZT_FAULT", "test hook",
        "fault injection: what fails where and when (docs/reliability.md)", "core/fault.c"),
    ROW(ZT_ENV_CPU_FAKE, "ZT_CPU_FAKE", "test hook",
        "keep only the features of this instruction-set level and below (never adds one the CPU lacks)", "core/cpu_isa.c"),
    ROW(ZT_ENV_FAKE_BUILD_ID, "ZT_FAKE_BUILD_ID", "test hook",
        "FIELD=VALUE replaces one field of the build fingerprint (fault I06)", "comm/build_id.c"),
    ROW(ZT_ENV_SOURCE_DIR, "ZT_SOURCE_DIR", "test hook",
        "the source tree, where the tests find the BPE files (.deps/)", "data/bpe.c"),
    ROW(ZT_ENV_RUN_DIR, "ZT_RUN_DIR", "launcher",
        "the job's run directory: rank pid files, exit records, the status board",
        "comm/board.c, cli/launch.c"),
    ROW(ZT_ENV_RESTART_ATTEMPT, "ZT_RESTART_ATTEMPT", "launcher",
        "which attempt of --max-restarts this is (fault specs name one)", "core/fault.c, cli/launch.c"),
    ROW(ZT_ENV_STDOUT_TTY, "ZT_STDOUT_TTY", "launcher",
        "1 or 0: whether the launcher's stdout is a terminal (under mpirun a rank's always looks like one)",
        "metrics/progress.c"),
    ROW(ZT_ENV_LAUNCHED, "ZT_LAUNCHED", "launcher",
        "set: the launcher already printed the configuration's warnings",
        "cli/cmd_train.c"),
    ROW(ZT_ENV_OMPI_COMM_WORLD_SIZE, "OMPI_COMM_WORLD_SIZE", "launcher", "Open MPI: started by mpirun",
        "cli/launch.c"),
    ROW(ZT_ENV_OMPI_COMM_WORLD_LOCAL_SIZE, "OMPI_COMM_WORLD_LOCAL_SIZE", "launcher", "Open MPI: ranks on this node",
        "comm/launcher.c"),
    ROW(ZT_ENV_OMPI_COMM_WORLD_LOCAL_RANK, "OMPI_COMM_WORLD_LOCAL_RANK", "launcher",
        "Open MPI: this rank's index on its node", "comm/launcher.c"),
    ROW(ZT_ENV_PMI_SIZE, "PMI_SIZE", "launcher", "MPICH's PMI: started by a launcher", "cli/launch.c"),
    ROW(ZT_ENV_PMIX_RANK, "PMIX_RANK", "launcher", "PMIx: started by a launcher", "cli/launch.c"),
    ROW(ZT_ENV_MV2_COMM_WORLD_SIZE, "MV2_COMM_WORLD_SIZE", "launcher", "MVAPICH: started by a launcher",
        "cli/launch.c"),
    ROW(ZT_ENV_MPI_LOCALNRANKS, "MPI_LOCALNRANKS", "launcher", "MPICH Hydra: ranks on this node",
        "comm/launcher.c"),
    ROW(ZT_ENV_MPI_LOCALRANKID, "MPI_LOCALRANKID", "launcher", "MPICH Hydra: this rank's index on its node",
        "comm/launcher.c"),
    ROW(ZT_ENV_SLURM_PROCID, "SLURM_PROCID", "launcher", "Slurm: started by srun", "cli/launch.c"),
    ROW(ZT_ENV_SLURM_NODEID, "SLURM_NODEID", "launcher", "Slurm: this node's index in the step",
        "comm/launcher.c"),
    ROW(ZT_ENV_SLURM_LOCALID, "SLURM_LOCALID", "launcher", "Slurm: this task's index on its node",
        "comm/launcher.c"),
    ROW(ZT_ENV_SLURM_STEP_TASKS_PER_NODE, "SLURM_STEP_TASKS_PER_NODE", "launcher",
        "Slurm: the step's tasks per node (\"2(x3),1\")", "comm/launcher.c"),
    ROW(ZT_ENV_SLURM_TASKS_PER_NODE, "SLURM_TASKS_PER_NODE", "launcher",
        "Slurm: the job's tasks per node (the step's without srun -E)", "comm/launcher.c"),
    ROW(ZT_ENV_SLURM_NTASKS_PER_NODE, "SLURM_NTASKS_PER_NODE", "launcher", "Slurm: --ntasks-per-node",
        "comm/launcher.c"),
    ROW(ZT_ENV_OMP_NUM_THREADS, "OMP_NUM_THREADS", "system",
        "threads per rank; the launcher sets it to cores / ranks when unset",
        "cli/launch.c, cli/cmd_estimate.c"),
    ROW(ZT_ENV_TMPDIR, "TMPDIR", "system", "where temporary directories go (else /tmp)",
        "metrics/plot.c, cli/launch.c"),
    ROW(ZT_ENV_HOME, "HOME", "system", "~/.cache/zerotrain, the peak cache's last choice", "scale/peak.c"),
    ROW(ZT_ENV_XDG_CACHE_HOME, "XDG_CACHE_HOME", "system", "the peak cache's directory's parent", "scale/peak.c"),
};

const char *zt_env(zt_env_var v) {
    return v >= 0 && v < ZT_ENV_COUNT && zt_env_defs[v].name ? getenv(zt_env_defs[v].name) : NULL;
}

const char *zt_env_or(zt_env_var v, const char *fallback) {
    const char *s = zt_env(v);
    return s && *s ? s : fallback;
}

const char *zt_env_name(zt_env_var v) {
    return v >= 0 && v < ZT_ENV_COUNT && zt_env_defs[v].name ? zt_env_defs[v].name : "?";
}
