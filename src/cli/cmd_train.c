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

/* Options that take a value; --set may repeat and is applied in order after the file. */
typedef struct value_opt {
    const char *name, *help;
    const char *value;
    bool is_count; /* a positive integer */
} value_opt;

enum { O_SET, O_SAVE, O_INIT, O_NPROC, O_CKPT_DIR, O_CKPT_EVERY, O_KEEP_LAST, O_CKPT_ASYNC, O_RESUME, O_STOP_AFTER,
       O_TRACE, O_COMM_LOG, O_COUNT };

static int count_value(const value_opt *o, int64_t *out, zt_error *err) {
    char *end;
    long long n = strtoll(o->value, &end, 10);
    if (*end || end == o->value || n < 0)
        return zt_error_set(err, ZT_ERR_USAGE, "train: %s wants a non-negative integer, got \"%s\"", o->name, o->value);
    *out = n;
    return ZT_OK;
}

int zt_cmd_train(int argc, char **argv) {
    zt_error err = {0};
    value_opt opt[O_COUNT] = {
        [O_SET] = {"--set", "override one config key, e.g. --set training.steps=10 (repeatable)"},
        [O_SAVE] = {"--save", "write the final parameters to a weights file (for `zerotrain sample`)"},
        [O_INIT] = {"--init", "start from weights (.ztw, or Hugging Face GPT-2 .safetensors)"},
        [O_NPROC] = {"--nproc", "start N local ranks through mpirun (parallel.nproc)", NULL, true},
        [O_CKPT_DIR] = {"--ckpt-dir", "write sharded checkpoints to DIR/step-N (docs/checkpoints.md)"},
        [O_CKPT_EVERY] = {"--ckpt-every", "checkpoint every N steps (and always at the end)", NULL, true},
        [O_KEEP_LAST] = {"--keep-last", "keep only the newest K checkpoints", NULL, true},
        [O_CKPT_ASYNC] = {"--ckpt-async", "1: snapshot, write in the background, commit at the next step",
                          NULL, true},
        [O_RESUME] = {"--resume", "resume from a checkpoint (DIR: its newest valid commit)"},
        [O_STOP_AFTER] = {"--stop-after", "stop after step N (as if preempted; the schedule still "
                                          "spans training.steps)", NULL, true},
        [O_TRACE] = {"--trace", "write a Chrome/Perfetto timeline: OUT.rankN.json per rank, merged into OUT"},
        [O_COMM_LOG] = {"--comm-log", "1: print the collectives by size class at the end (comms_logger)",
                        NULL, true},
    };
    const char *config = NULL;
    static zt_train_config cfg; /* large (paths): keep it off the stack */
    zt_train_config_default(&cfg);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            printf("usage: zerotrain train CONFIG [options]\n  CONFIG          native YAML (docs/config-train.md)\n");
            for (int k = 0; k < O_COUNT; k++) printf("  %-14s  %s\n", opt[k].name, opt[k].help);
            return 0;
        }
        int k = 0;
        while (k < O_COUNT && strcmp(a, opt[k].name) != 0) k++;
        if (k < O_COUNT) {
            if (i + 1 >= argc) {
                zt_error_set(&err, ZT_ERR_USAGE, "train: %s needs a value", a);
                return zt_cli_fail(&err);
            }
            opt[k].value = argv[++i]; /* --set: validated in order below */
        } else if (a[0] == '-') {
            zt_error_set(&err, ZT_ERR_USAGE, "train: unknown option %s (see zerotrain train --help)", a);
            return zt_cli_fail(&err);
        } else if (config) {
            zt_error_set(&err, ZT_ERR_USAGE, "train: more than one CONFIG (%s, %s)", config, a);
            return zt_cli_fail(&err);
        } else {
            config = a;
        }
    }
    if (!config) {
        zt_error_set(&err, ZT_ERR_USAGE, "train: missing CONFIG (usage: zerotrain train CONFIG)");
        return zt_cli_fail(&err);
    }
    if (zt_train_config_load(&cfg, config, &err)) return zt_cli_fail(&err);
    for (int i = 1; i < argc; i++) /* the file first, then every --set in order */
        if (!strcmp(argv[i], "--set") && i + 1 < argc && zt_train_config_set(&cfg, argv[++i], &err))
            return zt_cli_fail(&err);
    int64_t counts[O_COUNT] = {0};
    for (int k = 0; k < O_COUNT; k++)
        if (opt[k].is_count && opt[k].value && count_value(&opt[k], &counts[k], &err)) return zt_cli_fail(&err);
    if (opt[O_NPROC].value) {
        if (counts[O_NPROC] < 1 || counts[O_NPROC] > 4096) {
            zt_error_set(&err, ZT_ERR_USAGE, "train: --nproc wants a rank count in [1, 4096], got %s", opt[O_NPROC].value);
            return zt_cli_fail(&err);
        }
        cfg.nproc = (int)counts[O_NPROC];
    }
    zt_comm *world = NULL;
    if (zt_launched_by_mpi()) {
        if (zt_comm_init(NULL, NULL, &world, &err)) return zt_cli_fail(&err);
    } else if (cfg.nproc > 1) {
        /* argv here starts at "train"; mpirun runs `<self> train ...` with the same arguments */
        zt_launch_local(cfg.nproc, argc, argv, &err);
        return zt_cli_fail(&err);
    }
    zt_train_options opts = {.out = stdout, .world = world, .save_path = opt[O_SAVE].value,
                             .init_weights = opt[O_INIT].value, .ckpt_dir = opt[O_CKPT_DIR].value,
                             .ckpt_every = counts[O_CKPT_EVERY], .keep_last = (int)counts[O_KEEP_LAST],
                             .ckpt_async = counts[O_CKPT_ASYNC] != 0,
                             .resume = opt[O_RESUME].value, .stop_after = counts[O_STOP_AFTER],
                             .trace_path = opt[O_TRACE].value, .comm_log = counts[O_COMM_LOG] != 0};
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
