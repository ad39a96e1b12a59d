/* cmd_sample.c - `zerotrain sample W.ztw [--prompt TEXT] [--tokens N] [--top-k K]
 * [--temperature X] [--seed S] [--context T]`: generate text from trained parameters, so a user
 * sees what the model learned. No KV cache: each new token reruns the forward pass over the last
 * `context` tokens (fine for the small models this is meant for). */
#include "cli/commands.h"
#include "ckpt/weights.h"
#include "data/bpe.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EOT 50256

static uint64_t rng_next(uint64_t *s) {
    uint64_t x = (*s += 0x9e3779b97f4a7c15ULL);
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* Picks a token from logits (V) with temperature and top-k (k <= 0: all). */
static int pick(const float *logits, int V, int k, float temperature, uint64_t *rng, int *idx,
                float *prob) {
    if (k <= 0 || k > V) k = V;
    for (int i = 0; i < V; i++) idx[i] = i;
    /* partial selection of the k largest */
    for (int i = 0; i < k; i++) {
        int best = i;
        for (int j = i + 1; j < V; j++)
            if (logits[idx[j]] > logits[idx[best]]) best = j;
        int t = idx[i];
        idx[i] = idx[best];
        idx[best] = t;
        if (k == V && i > 64) break; /* full softmax: order beyond the head does not matter */
    }
    if (temperature <= 0) return idx[0];
    double maxv = logits[idx[0]], sum = 0;
    for (int i = 0; i < k; i++) sum += prob[i] = (float)exp((logits[idx[i]] - maxv) / temperature);
    double u = (double)(rng_next(rng) >> 11) / 9007199254740992.0 * sum, c = 0;
    for (int i = 0; i < k; i++)
        if ((c += prob[i]) >= u) return idx[i];
    return idx[k - 1];
}

int zt_cmd_sample(int argc, char **argv) {
    zt_error err = {0};
    const char *path = NULL, *prompt = "";
    int ntok = 200, topk = 40, context = 0;
    float temperature = 0.8f;
    uint64_t seed = 42;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            printf("usage: zerotrain sample W.ztw [--prompt TEXT] [--tokens N] [--top-k K] "
                   "[--temperature X] [--seed S] [--context T]\n");
            return 0;
        }
        if (a[0] == '-' && !v) {
            zt_error_set(&err, ZT_ERR_USAGE, "sample: %s needs a value", a);
            return zt_cli_fail(&err);
        }
        char *end = NULL;
        if (!strcmp(a, "--prompt")) prompt = v;
        else if (!strcmp(a, "--tokens")) ntok = (int)strtol(v, &end, 10);
        else if (!strcmp(a, "--top-k")) topk = (int)strtol(v, &end, 10);
        else if (!strcmp(a, "--context")) context = (int)strtol(v, &end, 10);
        else if (!strcmp(a, "--temperature")) temperature = strtof(v, &end);
        else if (!strcmp(a, "--seed")) seed = strtoull(v, &end, 10);
        else if (a[0] == '-') {
            zt_error_set(&err, ZT_ERR_USAGE, "sample: unknown option %s", a);
            return zt_cli_fail(&err);
        } else if (path) {
            zt_error_set(&err, ZT_ERR_USAGE, "sample: more than one weights file (%s, %s)", path, a);
            return zt_cli_fail(&err);
        } else {
            path = a;
            continue;
        }
        if (end && *end) {
            zt_error_set(&err, ZT_ERR_USAGE, "sample: %s: \"%s\" is not a number", a, v);
            return zt_cli_fail(&err);
        }
        i++;
    }
    if (!path) {
        zt_error_set(&err, ZT_ERR_USAGE, "sample: missing weights file (train with --save W.ztw)");
        return zt_cli_fail(&err);
    }
    if (ntok < 1 || temperature < 0) {
        zt_error_set(&err, ZT_ERR_USAGE, "sample: --tokens must be >= 1 and --temperature >= 0");
        return zt_cli_fail(&err);
    }
    zt_gpt2_config cfg;
    zt_model *model = NULL;
    zt_engine *e = NULL;
    zt_bpe *bpe = NULL;
    uint16_t *ptok = NULL;
    int32_t *ctx = NULL;
    float *logits = NULL, *prob = NULL;
    int *idx = NULL;
    char *text = NULL;
    int rc;
    if ((rc = zt_weights_read_config(path, &cfg, &err))) goto out;
    if (context <= 0 || context > cfg.max_seq_len) context = cfg.max_seq_len < 256 ? cfg.max_seq_len : 256;
    if ((rc = zt_gpt2_create(&cfg, &model, &err))) goto out;
    zt_engine_options eo = {.B = 1, .T = context, .seed = 0};
    zt_optimizer_config_default(&eo.optim);
    eo.optim.kind = ZT_OPT_SGD;
    eo.optim.momentum = 0;
    if ((rc = zt_engine_create(model, &eo, &e, &err))) goto out;
    if ((rc = zt_weights_load(e, path, &err))) goto out;
    char enc[1024], voc[1024];
    if ((rc = zt_bpe_default_paths(enc, voc, sizeof enc, &err))) goto out;
    if ((rc = zt_bpe_load(&bpe, enc, voc, &err))) goto out;
    size_t np = 0;
    if ((rc = zt_bpe_encode(bpe, prompt, strlen(prompt), &ptok, &np, &err))) goto out;
    int V = cfg.vocab_size, total = (int)np + 1 + ntok;
    ctx = malloc((size_t)total * sizeof *ctx);
    logits = malloc((size_t)V * sizeof *logits);
    prob = malloc((size_t)V * sizeof *prob);
    idx = malloc((size_t)V * sizeof *idx);
    if (!ctx || !logits || !prob || !idx) {
        rc = zt_error_set(&err, ZT_ERR_NOMEM, "sample: out of memory");
        goto out;
    }
    int n = 0;
    ctx[n++] = EOT; /* documents start with <|endoftext|> in our token files */
    for (size_t i = 0; i < np; i++) ctx[n++] = ptok[i];
    int first_new = n;
    uint64_t rng = seed;
    fputs(prompt, stdout);
    for (int g = 0; g < ntok; g++) {
        int start = n > context ? n - context : 0;
        zt_batch b = {.B = 1, .T = n - start, .inputs = ctx + start, .logits_pos = -1};
        if ((rc = zt_engine_forward(e, &b, NULL, logits, &err))) goto out;
        int t = pick(logits, V, topk, temperature, &rng, idx, prob);
        ctx[n++] = t;
        uint16_t t16 = (uint16_t)t;
        char *piece = NULL;
        size_t plen = 0;
        if (t == EOT) {
            fputs("\n<|endoftext|>\n", stdout);
        } else if (zt_bpe_decode(bpe, &t16, 1, &piece, &plen, &err) == ZT_OK) {
            fwrite(piece, 1, plen, stdout);
            free(piece);
        }
        fflush(stdout);
    }
    fputc('\n', stdout);
    (void)first_new;
    rc = ZT_OK;
out:
    free(text);
    free(ptok);
    free(ctx);
    free(logits);
    free(prob);
    free(idx);
    zt_bpe_free(bpe);
    zt_engine_free(e);
    zt_model_free(model);
    return rc ? zt_cli_fail(&err) : 0;
}
