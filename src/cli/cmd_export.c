/* cmd_export.c - `zerotrain export CKPT|W.ztw -o model.safetensors [--dtype fp32|bf16]`:
 * consolidates a sharded checkpoint (any world size and strategy), or reads the single-file weights
 * `train --save` writes, into one safetensors file with Hugging Face's names and layouts. */
#include "ckpt/checkpoint.h"
#include "ckpt/safetensors.h"
#include "ckpt/weights.h"
#include "cli/commands.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

int zt_cmd_export(int argc, char **argv) {
    zt_error err = {0};
    const char *ckpt = NULL, *out = NULL, *dtype = "fp32";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: zerotrain export CKPT|W.ztw -o model.safetensors [--dtype fp32|bf16]\n"
                   "  CKPT   a checkpoint directory (its newest commit) or one step-N commit\n"
                   "  W.ztw  the weights file `zerotrain train --save W.ztw` wrote\n");
            return 0;
        } else if ((!strcmp(argv[i], "-o") || !strcmp(argv[i], "--dtype")) && i + 1 < argc) {
            if (argv[i][1] == 'o') out = argv[++i];
            else dtype = argv[++i];
        } else if (argv[i][0] == '-' || ckpt) {
            zt_error_set(&err, ZT_ERR_USAGE, "export: unexpected argument %s", argv[i]);
            return zt_cli_fail(&err);
        } else {
            ckpt = argv[i];
        }
    }
    if (!ckpt || !out || (strcmp(dtype, "fp32") && strcmp(dtype, "bf16"))) {
        zt_error_set(&err, ZT_ERR_USAGE, "export: usage: zerotrain export CKPT|W.ztw -o model.safetensors [--dtype fp32|bf16]");
        return zt_cli_fail(&err);
    }
    char commit[4096];
    zt_model_spec spec;
    zt_model *m = NULL;
    zt_engine *e = NULL;
    zt_ckpt_meta meta;
    zt_engine_options o;
    zt_engine_options_default(&o);
    o.optim.kind = ZT_OPT_SGD; /* parameters only: no optimizer state to load */
    o.optim.momentum = 0;
    int rc;
    struct stat sb;
    if (stat(ckpt, &sb) == 0 && S_ISREG(sb.st_mode)) { /* a .ztw weights file (train --save) */
        if ((rc = zt_weights_read_config(ckpt, &spec, &err)) || (rc = zt_model_spec_create(&spec, &m, &err)) ||
            (rc = zt_engine_create(m, &o, &e, &err)) || (rc = zt_weights_load(e, ckpt, &err)) ||
            (rc = zt_safetensors_export(e, out, !strcmp(dtype, "bf16"), &err)))
            goto done;
        printf("exported %s (%lld parameters, %s) to %s\n", ckpt, (long long)zt_model_numel(m), dtype, out);
        goto done;
    }
    if ((rc = zt_ckpt_resolve(ckpt, commit, sizeof commit, &err)) || (rc = zt_ckpt_read_model(commit, &spec, &err)) ||
        (rc = zt_model_spec_create(&spec, &m, &err)) || (rc = zt_engine_create(m, &o, &e, &err)) ||
        (rc = zt_ckpt_load(e, commit, &meta, &err)) ||
        (rc = zt_safetensors_export(e, out, !strcmp(dtype, "bf16"), &err)))
        goto done;
    printf("exported %s (step %lld, %lld parameters, %s) to %s\n", commit, (long long)meta.step,
           (long long)zt_model_numel(m), dtype, out);
done:
    zt_engine_free(e);
    zt_model_free(m);
    return rc ? zt_cli_fail(&err) : 0;
}
