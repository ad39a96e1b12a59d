/* launch.c - the embedded launcher: `zerotrain train CONFIG --nproc N` on one machine re-executes
 * itself as N local ranks through Open MPI's mpirun (the user never types mpirun), passing the
 * arguments through unchanged. Under mpirun -hostfile or srun the ranks start directly and this
 * file only detects that. */
#include "cli/launch.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

bool zt_launched_by_mpi(void) {
    static const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "SLURM_PROCID",
                                 "MV2_COMM_WORLD_SIZE"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++)
        if (getenv(vars[i])) return true;
    return false;
}

int zt_launch_local(int nproc, int argc, char **argv, zt_error *err) {
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (cores < 1) cores = 1;
    char np[32], threads[32];
    snprintf(np, sizeof np, "%d", nproc);
    /* split the cores among the ranks unless the user chose */
    if (!getenv("OMP_NUM_THREADS")) {
        snprintf(threads, sizeof threads, "%ld", cores / nproc > 0 ? cores / nproc : 1);
        setenv("OMP_NUM_THREADS", threads, 1);
    }
    /* mpirun hands rank 0 a pseudo-terminal whatever the real stdout is: tell the ranks */
    setenv("ZT_STDOUT_TTY", isatty(STDOUT_FILENO) ? "1" : "0", 1);
    setenv("ZT_LAUNCHED", "1", 1); /* the ranks know the launcher already printed the warnings */
    if (geteuid() == 0) { /* Open MPI refuses root unless told twice */
        setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
        setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    }
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) return zt_error_set(err, ZT_ERR_USAGE, "launch: cannot find my own executable: %s", strerror(errno));
    self[n] = '\0';
    const char *mpirun = getenv("ZT_MPIRUN") ? getenv("ZT_MPIRUN") : "mpirun";
    char **args = calloc((size_t)argc + 16, sizeof *args);
    if (!args) return zt_error_set(err, ZT_ERR_NOMEM, "launch: out of memory");
    int k = 0;
    args[k++] = (char *)mpirun;
    args[k++] = "-np";
    args[k++] = np;
    if (nproc > cores) args[k++] = "--oversubscribe";
    args[k++] = "--bind-to";
    args[k++] = "none";
    args[k++] = "-x";
    args[k++] = "OMP_NUM_THREADS";
    args[k++] = "-x";
    args[k++] = "ZT_STDOUT_TTY";
    args[k++] = "-x";
    args[k++] = "ZT_LAUNCHED";
    args[k++] = self;
    for (int i = 0; i < argc; i++) args[k++] = argv[i];
    args[k] = NULL;
    fflush(NULL);
    execvp(mpirun, args);
    int e = errno;
    free(args);
    return zt_error_set(err, ZT_ERR_USAGE,
                        "launch: cannot run %s for %d local ranks: %s (install openmpi-bin: "
                        "scripts/setup.sh)", mpirun, nproc, strerror(e));
}
