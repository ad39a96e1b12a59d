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

#endif
