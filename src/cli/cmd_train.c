/* cmd_train.c - `zerotrain train CONFIG [--nproc N] [--set key=value ...] [--save W.ztw]
 * [--init W.ztw]`: with N > 1 local ranks (or parallel.nproc in the config) it re-executes itself
 * under mpirun; started by mpirun or srun it joins the world and trains as one rank. */
#include "cli/commands.h"
#include "cli/launch.h"
#include "comm/comm.h"
#include "engine/trainer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int zt_cmd_train(int argc, char **argv) {
    zt_error err = {0};
    const char *config = NULL, *save = NULL, *init = NULL, *nproc_arg = NULL;
    static zt_train_config cfg; /* large (paths): keep it off the stack */
    zt_train_config_default(&cfg);
    /* the file first, then --set overrides in order */
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--set") || !strcmp(argv[i], "--save") || !strcmp(argv[i], "--init") ||
            !strcmp(argv[i], "--nproc")) {
            if (i + 1 >= argc) {
                zt_error_set(&err, ZT_ERR_USAGE, "train: %s needs a value", argv[i]);
                return zt_cli_fail(&err);
            }
            i++;
        } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: zerotrain train CONFIG [--nproc N] [--set key=value ...] [--save W.ztw] [--init W.ztw]\n"
                   "  CONFIG    native YAML (docs/config-train.md)\n"
                   "  --nproc   start N local ranks (through mpirun; parallel.nproc in the config)\n"
                   "  --set     override one key, e.g. --set training.steps=10\n"
                   "  --save    write the final parameters to a weights file (for `zerotrain sample`)\n"
                   "  --init    start from a weights file instead of the seeded initialization\n");
            return 0;
        } else if (argv[i][0] == '-') {
            zt_error_set(&err, ZT_ERR_USAGE, "train: unknown option %s", argv[i]);
            return zt_cli_fail(&err);
        } else if (config) {
            zt_error_set(&err, ZT_ERR_USAGE, "train: more than one CONFIG (%s, %s)", config, argv[i]);
            return zt_cli_fail(&err);
        } else {
            config = argv[i];
        }
    }
    if (!config) {
        zt_error_set(&err, ZT_ERR_USAGE, "train: missing CONFIG (usage: zerotrain train CONFIG)");
        return zt_cli_fail(&err);
    }
    if (zt_train_config_load(&cfg, config, &err)) return zt_cli_fail(&err);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--set")) {
            if (zt_train_config_set(&cfg, argv[++i], &err)) return zt_cli_fail(&err);
        } else if (!strcmp(argv[i], "--save")) {
            save = argv[++i];
        } else if (!strcmp(argv[i], "--init")) {
            init = argv[++i];
        } else if (!strcmp(argv[i], "--nproc")) {
            nproc_arg = argv[++i];
        }
    }
    if (nproc_arg) {
        char *end;
        long n = strtol(nproc_arg, &end, 10);
        if (*end || n < 1 || n > 4096) {
            zt_error_set(&err, ZT_ERR_USAGE, "train: --nproc wants a rank count in [1, 4096], got \"%s\"",
                         nproc_arg);
            return zt_cli_fail(&err);
        }
        cfg.nproc = (int)n;
    }
    zt_comm *world = NULL;
    if (zt_launched_by_mpi()) {
        if (zt_comm_init(NULL, NULL, &world, &err)) return zt_cli_fail(&err);
    } else if (cfg.nproc > 1) {
        /* argv here starts at "train"; mpirun runs `<self> train ...` with the same arguments */
        zt_launch_local(cfg.nproc, argc, argv, &err);
        return zt_cli_fail(&err);
    }
    zt_train_options opts = {.out = stdout, .world = world, .save_path = save, .init_weights = init};
    zt_train_result res;
    int rc = zt_train(&cfg, &opts, &res, &err);
    if (rc) {
        int code = zt_cli_fail(&err);
        /* the other ranks would wait for this one in their next collective (or in MPI_Finalize):
         * end the whole job with this exit code */
        if (world && zt_comm_size(world) > 1) zt_comm_abort(code);
        zt_comm_free(world);
        if (world) zt_comm_finalize(&err);
        return code;
    }
    zt_comm_free(world);
    if (world && zt_comm_finalize(&err)) return zt_cli_fail(&err);
    return 0;
}
