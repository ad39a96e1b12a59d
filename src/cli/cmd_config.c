/* cmd_config.c - `zerotrain config CONFIG [--set key=value ...] [--nproc N] [--print | --json]`
 * and `zerotrain config --docs`: resolves a configuration of any dialect (native YAML, DeepSpeed
 * JSON, Accelerate YAML) exactly as `zerotrain train` would, and shows every key's value and where
 * it came from, the notes and warnings, and the problems that would stop training (exit code 2).
 * The resolved configuration is printed even then, so the command explains a refusal. */
#include "cli/commands.h"
#include "config/train_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *out) {
    fprintf(out,
            "usage: zerotrain config CONFIG [--set key=value ...] [--nproc N] [--print | --json]\n"
            "       zerotrain config --docs\n"
            "  CONFIG    native YAML, DeepSpeed JSON or Accelerate YAML (detected; --from CONFIG "
            "too)\n"
            "  --set     override one native key, e.g. --set data.train=data/kjv_train.bin\n"
            "  --nproc   resolve for N ranks (default: parallel.nproc), as `train --nproc N` would\n"
            "  (none)    every key, its value and its source; then notes, warnings and the hash\n"
            "  --print   native YAML with every key (reads back to the same configuration)\n"
            "  --json    values, sources, notes and hash as JSON\n"
            "  --docs    write docs/config.md (the key and mapping tables) to stdout\n"
            "exit code 0, or 2 when the configuration has errors or `zerotrain train` would refuse "
            "it\n");
}

int zt_cmd_config(int argc, char **argv) {
    zt_error err = {0};
    const char *path = NULL, *nproc_arg = NULL;
    zt_config_format format = ZT_CONFIG_TABLE;
    bool docs = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--set") || !strcmp(a, "--nproc") || !strcmp(a, "--from")) {
            if (i + 1 >= argc) {
                zt_error_set(&err, ZT_ERR_USAGE, "config: %s needs a value", a);
                return zt_cli_fail(&err);
            }
            if (!strcmp(a, "--nproc")) nproc_arg = argv[i + 1];
            if (!strcmp(a, "--from")) {
                if (path) {
                    zt_error_set(&err, ZT_ERR_USAGE, "config: more than one CONFIG (%s, %s)", path,
                                 argv[i + 1]);
                    return zt_cli_fail(&err);
                }
                path = argv[i + 1];
            }
            i++;
        } else if (!strcmp(a, "--print")) {
            format = ZT_CONFIG_YAML;
        } else if (!strcmp(a, "--json")) {
            format = ZT_CONFIG_JSON;
        } else if (!strcmp(a, "--docs")) {
            docs = true;
        } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (a[0] == '-') {
            zt_error_set(&err, ZT_ERR_USAGE, "config: unknown option %s", a);
            return zt_cli_fail(&err);
        } else if (path) {
            zt_error_set(&err, ZT_ERR_USAGE, "config: more than one CONFIG (%s, %s)", path, a);
            return zt_cli_fail(&err);
        } else {
            path = a;
        }
    }
    if (docs) {
        if (path) {
            zt_error_set(&err, ZT_ERR_USAGE, "config: --docs takes no CONFIG");
            return zt_cli_fail(&err);
        }
        if (zt_config_write_docs(stdout, &err)) return zt_cli_fail(&err);
        return 0;
    }
    if (!path) {
        usage(stderr);
        return ZT_ERR_USAGE;
    }
    static zt_train_config cfg; /* large: off the stack */
    zt_train_config_default(&cfg);
    if (zt_train_config_load(&cfg, path, &err)) return zt_cli_fail(&err);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--set")) {
            if (zt_train_config_set(&cfg, argv[++i], &err)) return zt_cli_fail(&err);
        } else if (!strcmp(argv[i], "--nproc") || !strcmp(argv[i], "--from")) {
            i++;
        }
    }
    if (nproc_arg) {
        char *end;
        long n = strtol(nproc_arg, &end, 10);
        char set[64];
        snprintf(set, sizeof set, "parallel.nproc=%ld", n);
        if (*end || n < 1 || n > 4096) {
            zt_error_set(&err, ZT_ERR_USAGE, "config: --nproc wants a rank count in [1, 4096], got \"%s\"",
                         nproc_arg);
            return zt_cli_fail(&err);
        }
        if (zt_train_config_set(&cfg, set, &err)) return zt_cli_fail(&err);
    }
    /* what depends on the world size, then what this build runs: reported after the output. A
     * missing data.train alone does not fail `config` (DeepSpeed and Accelerate files cannot
     * name data): it is checked as if set, and said in a note */
    zt_error werr = {0}, verr = {0};
    int wrc = zt_train_config_validate_world(&cfg, cfg.nproc, &werr);
    static zt_train_config chk; /* cfg with a stand-in data.train, for the checks only */
    chk = cfg;
    bool no_data = !chk.train_path[0];
    if (no_data) snprintf(chk.train_path, sizeof chk.train_path, "DATA");
    int vrc = wrc ? 0 : zt_train_config_validate(&chk, &verr);
    if (zt_train_config_write(&cfg, format, stdout, &err)) return zt_cli_fail(&err);
    if (wrc) {
        zt_error_prefix(&werr, "with %d rank%s", cfg.nproc, cfg.nproc == 1 ? "" : "s");
        return zt_cli_fail(&werr);
    }
    if (vrc) {
        zt_error_prefix(&verr, "zerotrain train would refuse this configuration");
        return zt_cli_fail(&verr);
    }
    if (no_data)
        fprintf(stderr, "note: data.train is not set: `zerotrain train` needs it (data: train: PATH in "
                        "a native file, or --set data.train=PATH)\n");
    return 0;
}
