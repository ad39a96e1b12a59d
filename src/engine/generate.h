/* generate.h - text generation from a model on the engine: top-k / temperature sampling, one
 * token at a time, the forward pass rerun over the last T tokens (no KV cache: meant for the
 * small models trained here). Used by `zerotrain sample` and by `sample.tokens` after training. */
#ifndef ZT_GENERATE_H
#define ZT_GENERATE_H

#include "data/bpe.h"

#include <stdio.h>

typedef struct zt_generate_options {
    int tokens;        /* how many tokens to generate */
    int top_k;         /* <= 0: the whole vocabulary */
    float temperature; /* 0: greedy */
    uint64_t seed;
} zt_generate_options;

/* Writes prompt and then each generated token's text to out as it is produced. The engine's
 * micro-batch T bounds the context. Starts from <|endoftext|> + the prompt's tokens. */
int zt_generate(zt_engine *e, zt_bpe *bpe, const char *prompt, const zt_generate_options *o, FILE *out,
                zt_error *err);

/* Scores prompt instead: its tokens after the document frame (as zt_generate starts), at most the
 * engine's T, run through the model; row t of the logits (V floats, little-endian fp32 appended to
 * logits_out) is the next-token prediction after tokens [0, t]. Writes to out one line "ids: ..."
 * (the tokens) and one "nll: MEAN over N perplexity: P" (the mean negative log-likelihood of
 * tokens 1..n-1, from the logits in double precision). ZT_ERR_IO when logits_out cannot be written. */
int zt_generate_logits(zt_engine *e, zt_bpe *bpe, const char *prompt, FILE *logits_out, FILE *out,
                       zt_error *err);

#endif
