/* cmd_sample.c - `zerotrain sample (W.ztw | --hf DIR) [--prompt TEXT] [--tokens N] [--top-k K]
 * [--temperature X] [--seed S] [--context T] [--logits FILE]`: generate text from trained
 * parameters, so a user sees what the model learned (src/engine/generate.c does the work); with
 * --logits, score the prompt instead: its logits at every position to a file and its perplexity
 * (what the GGUF test compares llama.cpp with). */
#include "cli/commands.h"
#include "core/atomic_file.h"
#include "ckpt/hf.h"
#include "ckpt/weights.h"
#include "data/tokenizer_json.h"
#include "engine/generate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int zt_cmd_sample(int argc, char **argv) {
    zt_error err = {0};
    const char *path = NULL, *hf = NULL, *tokenizer = NULL, *prompt = "", *logits_path = NULL;
    int context = 0;
    zt_generate_options go = {.tokens = 200, .top_k = 40, .temperature = 0.8f, .seed = 42};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            printf("usage: zerotrain sample (W.ztw | --hf DIR) [--prompt TEXT] [--tokens N] [--top-k K] "
                   "[--temperature X] [--seed S] [--context T] [--logits FILE]\n"
                   "  W.ztw     weights written by train --save\n"
                   "  --hf DIR  a Hugging Face model directory (config.json + safetensors, export --hf);\n"
                   "            its tokenizer.json when it has one\n"
                   "  --tokenizer FILE  a Hugging Face tokenizer.json (default: GPT-2's encoder)\n"
                   "  --logits FILE     score the prompt instead: every position's logits after the document\n"
                   "                    frame + prompt tokens (at most --context), fp32 rows of V, to FILE;\n"
                   "                    prints the ids and the mean negative log-likelihood / perplexity\n");
            return 0;
        }
        if (a[0] != '-') {
            if (path) {
                zt_error_set(&err, ZT_ERR_USAGE, "sample: more than one weights file (%s, %s)", path, a);
                return zt_cli_fail(&err);
            }
            path = a;
            continue;
        }
        if (!v) {
            zt_error_set(&err, ZT_ERR_USAGE, "sample: %s needs a value", a);
            return zt_cli_fail(&err);
        }
        char *end = NULL;
        if (!strcmp(a, "--prompt")) prompt = v;
        else if (!strcmp(a, "--hf")) hf = v;
        else if (!strcmp(a, "--tokenizer")) tokenizer = v;
        else if (!strcmp(a, "--logits")) logits_path = v;
        else if (!strcmp(a, "--tokens")) go.tokens = (int)strtol(v, &end, 10);
        else if (!strcmp(a, "--top-k")) go.top_k = (int)strtol(v, &end, 10);
        else if (!strcmp(a, "--context")) context = (int)strtol(v, &end, 10);
        else if (!strcmp(a, "--temperature")) go.temperature = strtof(v, &end);
        else if (!strcmp(a, "--seed")) go.seed = strtoull(v, &end, 10);
        else {
            zt_error_set(&err, ZT_ERR_USAGE, "sample: unknown option %s", a);
            return zt_cli_fail(&err);
        }
        if (end && (*end || end == v)) {
            zt_error_set(&err, ZT_ERR_USAGE, "sample: %s: \"%s\" is not a number", a, v);
            return zt_cli_fail(&err);
        }
        i++;
    }
    if (!path == !hf) {
        zt_error_set(&err, ZT_ERR_USAGE, "sample: give a weights file (train with --save W.ztw) or --hf DIR, not both");
        return zt_cli_fail(&err);
    }
    if (go.tokens < 1 || go.temperature < 0) {
        zt_error_set(&err, ZT_ERR_USAGE, "sample: --tokens must be >= 1 and --temperature >= 0");
        return zt_cli_fail(&err);
    }
    zt_model_spec spec;
    zt_model *model = NULL;
    zt_engine *e = NULL;
    zt_bpe *bpe = NULL;
    char tok_path[4200];
    int rc;
    if (hf && !tokenizer) { /* the model's own tokenizer, when the directory has one */
        snprintf(tok_path, sizeof tok_path, "%s/tokenizer.json", hf);
        FILE *probe = fopen(tok_path, "rb");
        if (probe) fclose(probe), tokenizer = tok_path;
    }
    if (hf) rc = zt_hf_create_model(hf, &model, &err);
    else if (!(rc = zt_weights_read_config(path, &spec, &err))) rc = zt_model_spec_create(&spec, &model, &err);
    if (rc) goto out;
    if (context <= 0 || context > model->max_seq_len) context = model->max_seq_len < 256 ? model->max_seq_len : 256;
    /* inference only: SGD without momentum allocates no optimizer state */
    zt_engine_options eo = {.B = 1, .T = context};
    zt_optimizer_config_default(&eo.optim);
    eo.optim.kind = ZT_OPT_SGD;
    eo.optim.momentum = 0;
    if ((rc = zt_engine_create(model, &eo, &e, &err)) || (rc = hf ? zt_hf_load_dir(e, hf, &err) : zt_weights_load(e, path, &err)) ||
        (rc = zt_tokenizer_open(&bpe, tokenizer, &err)))
        goto out;
    if (logits_path) {
        zt_atomic_file af;
        if (!(rc = zt_atomic_open(&af, logits_path, &err))) {
            rc = zt_generate_logits(e, bpe, prompt, af.fp, stdout, &err);
            if (rc) zt_atomic_abandon(&af);
            else rc = zt_atomic_commit(&af, true, "logits", &err);
        }
    } else {
        rc = zt_generate(e, bpe, prompt, &go, stdout, &err);
    }
out:
    zt_bpe_free(bpe);
    zt_engine_free(e);
    zt_model_free(model);
    return rc ? zt_cli_fail(&err) : 0;
}
