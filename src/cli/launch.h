/* launch.h - starting local ranks through mpirun (see launch.c). */
#ifndef ZT_LAUNCH_H
#define ZT_LAUNCH_H

#include "zerotrain/zerotrain.h"

/* True when this process is one rank of a job started by mpirun, srun or another MPI launcher. */
bool zt_launched_by_mpi(void);
/* Runs this program as `mpirun -np nproc ... <self> argv...` and supervises the job (launch.c):
 * forwards SIGTERM/SIGINT to the ranks, kills them grace_s seconds later if they have not ended,
 * turns a rank lost to a signal or a foreign exit code into ZT_ERR_PEER with a line naming it.
 * Returns the job's exit code (>= 0), or minus a zt_status with err set when it cannot start. */
int zt_launch_local(int nproc, double grace_s, int argc, char **argv, zt_error *err);
/* In a rank started by zt_launch_local: records this process's pid as rank `rank` in the job's run
 * directory ($ZT_RUN_DIR/rank-R.pid), so the launcher can signal it. No-op outside a launch. */
void zt_launch_register_rank(int rank);

#endif
