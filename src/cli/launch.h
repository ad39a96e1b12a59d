/* launch.h - starting local ranks through mpirun (see launch.c). */
#ifndef ZT_LAUNCH_H
#define ZT_LAUNCH_H

#include "zerotrain/zerotrain.h"

/* True when this process is one rank of a job started by mpirun, srun or another MPI launcher. */
bool zt_launched_by_mpi(void);
/* What the launcher does about faults (docs/reliability.md). */
typedef struct zt_launch_policy {
    double grace_s;       /* fault.grace_s: from forwarding SIGTERM/SIGINT to killing the ranks */
    double teardown_s;    /* fault.teardown_s: from a rank's exit record to killing mpirun (0: 30 s) */
    int max_restarts;     /* --max-restarts: jobs that end with exit 5 are started again this often */
    const char *ckpt_dir; /* where a restart resumes from (its newest commit); NULL/"": from the start */
    int min_nproc;        /* --min-nproc: a rank lost twice in a row shrinks the world down to this
                             (0: never shrink) */
    int grad_accum;       /* the resolved gradient accumulation at the launch world size */
    const char *hostfile; /* --hostfile: mpirun places the ranks on the hosts it lists (NULL: this
                             machine); the threads per rank then follow its largest slots= */
    const char *mpirun_args; /* --mpirun-args: more mpirun options, split at white space (NULL: none) */
} zt_launch_policy;

/* Runs this program as `mpirun -np nproc ... <self> argv...` and supervises the job (launch.c):
 * forwards SIGTERM/SIGINT to the ranks, kills them grace_s seconds later if they have not ended,
 * turns a rank lost to a signal or a foreign exit code into ZT_ERR_PEER with a line naming it.
 * restarts it per policy. Returns the job's exit code (>= 0), or minus a zt_status with err set
 * when it cannot start. */
int zt_launch_local(int nproc, const zt_launch_policy *policy, int argc, char **argv, zt_error *err);
/* In a rank started by zt_launch_local: records this process's pid as rank `rank` in the job's run
 * directory ($ZT_RUN_DIR/rank-R.pid), so the launcher can signal it. No-op outside a launch. */
void zt_launch_register_rank(int rank);
/* In a rank that is about to fail the job with `code` (a zt_status): writes its exit record,
 * $ZT_RUN_DIR/exit-R = "CODE WALL-CLOCK-SECONDS MESSAGE", so that the launcher can end the job
 * with the ranks' own code whatever mpirun's status says (a host lost makes Open MPI exit 205);
 * the earliest record is the job's (torchrun's "first failure is the root cause"). No-op when
 * $ZT_RUN_DIR is unset or not writable here (another host without the launcher's filesystem: the
 * launcher then reads the rank's forwarded error line). */
void zt_launch_record_exit(int rank, int code, const char *message);

#endif
