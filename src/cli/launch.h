/* launch.h - starting local ranks through mpirun (see launch.c). */
#ifndef ZT_LAUNCH_H
#define ZT_LAUNCH_H

#include "zerotrain/zerotrain.h"

/* True when this process is one rank of a job started by mpirun, srun or another MPI launcher. */
bool zt_launched_by_mpi(void);
/* Re-executes this program as `mpirun -np nproc ... <self> argv...`; returns only on failure. */
int zt_launch_local(int nproc, int argc, char **argv, zt_error *err);

#endif
