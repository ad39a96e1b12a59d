/* generate.c - top-k / temperature sampling on the engine (see generate.h). */
#include "engine/generate.h"

#include "data/tokenizer_json.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng_next(uint64_t *s) {
    uint64_t x = (*s += 0x9e3779b97f4a7c15ULL);
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* Picks a token from logits (V): the k largest (k <= 0: all), softmax at temperature, one draw. */
static int pick(const float *logits, int V, int k, float temperature, uint64_t *rng, int *idx,
                double *prob) {
    if (k <= 0 || k > V) k = V;
    for (int i = 0; i < V; i++) idx[i] = i;
    int sorted = k < V ? k : 1; /* with the full vocabulary only the maximum needs to be first */
    for (int i = 0; i < sorted; i++) {
        int best = i;
        for (int j = i + 1; j < V; j++)
            if (logits[idx[j]] > logits[idx[best]]) best = j;
        int t = idx[i];
        idx[i] = idx[best];
        idx[best] = t;
    }
    if (temperature <= 0) return idx[0];
    double maxv = logits[idx[0]], sum = 0;
    for (int i = 0; i < k; i++) sum += prob[i] = exp((logits[idx[i]] - maxv) / temperature);
    double u = (double)(rng_next(rng) >> 11) / 9007199254740992.0 * sum, c = 0;
    for (int i = 0; i < k; i++)
        if ((c += prob[i]) >= u) return idx[i];
    return idx[k - 1];
}

int zt_generate(zt_engine *e, zt_bpe *bpe, const char *prompt, const zt_generate_options *o, FILE *out,
                zt_error *err) {
    const zt_model *m = zt_engine_model(e);
    int V = m->vocab_size, context = zt_engine_options_of(e)->T;
    uint32_t *ptok = NULL;
    size_t np = 0;
    uint32_t eot; /* the tokenizer's document separator (50256 for GPT-2) */
    int rc = zt_tokenizer_eot(bpe, &eot, err);
    if (!rc) rc = zt_bpe_encode(bpe, prompt, strlen(prompt), &ptok, &np, err);
    if (rc) return rc;
    size_t total = np + ZT_TOKENIZER_FRAME_MAX + (size_t)o->tokens;
    int32_t *ctx = malloc(total * sizeof *ctx);
    float *logits = malloc((size_t)V * sizeof *logits);
    double *prob = malloc((size_t)V * sizeof *prob);
    int *idx = malloc((size_t)V * sizeof *idx);
    if (!ctx || !logits || !prob || !idx) {
        rc = zt_error_set(err, ZT_ERR_NOMEM, "generate: out of memory");
        goto out;
    }
    uint32_t pre[ZT_TOKENIZER_FRAME_MAX], post[ZT_TOKENIZER_FRAME_MAX];
    size_t npre, npost;
    zt_tokenizer_doc_frame(bpe, eot, pre, &npre, post, &npost);
    int n = 0;
    for (size_t i = 0; i < npre; i++) ctx[n++] = (int32_t)pre[i]; /* as `tokenize` starts a document */
    for (size_t i = 0; i < np; i++) ctx[n++] = (int32_t)ptok[i];
    uint64_t rng = o->seed;
    fputs(prompt, out);
    for (int g = 0; g < o->tokens; g++) {
        int start = n > context ? n - context : 0;
        zt_batch b = {.B = 1, .T = n - start, .inputs = ctx + start, .logits_pos = -1};
        if ((rc = zt_engine_forward(e, &b, NULL, logits, err))) goto out;
        int t = pick(logits, V, o->top_k, o->temperature, &rng, idx, prob);
        ctx[n++] = t;
        uint32_t t32 = (uint32_t)t;
        char *piece = NULL;
        size_t plen = 0;
        if ((rc = zt_tokenizer_decode_next(bpe, &t32, 1, &piece, &plen, err))) goto out;
        if (t32 == eot) fputc('\n', out); /* "\n<|endoftext|>\n" */
        fwrite(piece, 1, plen, out);
        if (t32 == eot) fputc('\n', out);
        free(piece);
        fflush(out);
    }
    fputc('\n', out);
out:
    free(ptok);
    free(ctx);
    free(logits);
    free(prob);
    free(idx);
    return rc;
}

int zt_generate_logits(zt_engine *e, zt_bpe *bpe, const char *prompt, FILE *logits_out, FILE *out,
                       zt_error *err) {
    int V = zt_engine_model(e)->vocab_size, context = zt_engine_options_of(e)->T;
    uint32_t *ptok = NULL, eot, pre[ZT_TOKENIZER_FRAME_MAX], post[ZT_TOKENIZER_FRAME_MAX];
    size_t np = 0, npre, npost;
    int rc = zt_tokenizer_eot(bpe, &eot, err);
    if (!rc) rc = zt_bpe_encode(bpe, prompt, strlen(prompt), &ptok, &np, err);
    if (rc) return rc;
    int32_t *ctx = malloc((np + ZT_TOKENIZER_FRAME_MAX) * sizeof *ctx);
    float *logits = malloc((size_t)V * sizeof *logits);
    int n = 0;
    if (!ctx || !logits) rc = zt_error_set(err, ZT_ERR_NOMEM, "sample --logits: out of memory");
    zt_tokenizer_doc_frame(bpe, eot, pre, &npre, post, &npost);
    for (size_t i = 0; i < npre && !rc && n < context; i++) ctx[n++] = (int32_t)pre[i];
    for (size_t i = 0; i < np && !rc && n < context; i++) ctx[n++] = (int32_t)ptok[i];
    double nll = 0;
    for (int t = 0; t < n && !rc; t++) {
        zt_batch b = {.B = 1, .T = t + 1, .inputs = ctx, .logits_pos = -1};
        if ((rc = zt_engine_forward(e, &b, NULL, logits, err))) break;
        if (fwrite(logits, sizeof *logits, (size_t)V, logits_out) != (size_t)V)
            rc = zt_error_set(err, ZT_ERR_IO, "sample --logits: cannot write the logits of position %d", t);
        if (t + 1 < n) { /* -log softmax(logits)[next] */
            double mx = logits[0], sum = 0;
            for (int v = 1; v < V; v++) mx = logits[v] > mx ? logits[v] : mx;
            for (int v = 0; v < V; v++) sum += exp((double)logits[v] - mx);
            nll += mx + log(sum) - logits[ctx[t + 1]];
        }
    }
    if (!rc) {
        fputs("ids:", out);
        for (int t = 0; t < n; t++) fprintf(out, " %d", ctx[t]);
        fprintf(out, "\nnll: %.9g over %d perplexity: %.9g\n", n > 1 ? nll / (n - 1) : 0.0, n - 1,
                n > 1 ? exp(nll / (n - 1)) : 1.0);
    }
    free(ptok);
    free(ctx);
    free(logits);
    return rc;
}
