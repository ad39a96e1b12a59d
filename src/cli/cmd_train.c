/* cmd_train.c - `zerotrain train CONFIG [--set key=value ...] [--save W.ztw] [--init W.ztw]`. */
#include "cli/commands.h"
#include "engine/trainer.h"

#include <stdio.h>
#include <string.h>

int zt_cmd_train(int argc, char **argv) {
    zt_error err = {0};
    const char *config = NULL, *save = NULL, *init = NULL;
    static zt_train_config cfg; /* large (paths): keep it off the stack */
    zt_train_config_default(&cfg);
    /* the file first, then --set overrides in order */
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--set") || !strcmp(argv[i], "--save") || !strcmp(argv[i], "--init")) {
            if (i + 1 >= argc) {
                zt_error_set(&err, ZT_ERR_USAGE, "train: %s needs a value", argv[i]);
                return zt_cli_fail(&err);
            }
            i++;
        } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: zerotrain train CONFIG [--set key=value ...] [--save W.ztw] [--init W.ztw]\n"
                   "  CONFIG    native YAML (docs/config-train.md)\n"
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
        }
    }
    zt_train_options opts = {.out = stdout, .save_path = save, .init_weights = init};
    zt_train_result res;
    if (zt_train(&cfg, &opts, &res, &err)) return zt_cli_fail(&err);
    return 0;
}
