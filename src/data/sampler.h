/* sampler.h - deterministic sampling of training windows from a token file, driven by a global
 * sample index. Sample s is a window of T+1 tokens (inputs = first T, targets = last T) chosen as
 * a pure function of (file, T, seed, s): windows start at multiples of T (consecutive windows
 * share one token, as in llm.c), and each epoch visits every window once in an order shuffled by
 * (seed, epoch). So the global batches do not depend on how many ranks read them, and the cursor
 * to save is just the next global sample index. */
#ifndef ZT_SAMPLER_H
#define ZT_SAMPLER_H

#include "data/token_file.h"

#include <stdbool.h>

typedef struct zt_sampler {
    const zt_token_file *file;
    int T;
    uint64_t seed;
    bool shuffle;
    uint64_t n_windows;  /* windows per epoch: (n_tokens - 1) / T */
    uint32_t *perm;      /* (n_windows) order of the cached epoch, NULL when !shuffle */
    uint64_t perm_epoch; /* epoch perm belongs to */
} zt_sampler;

/* ZT_ERR_DATA when the file holds fewer than T+1 tokens. */
int zt_sampler_init(zt_sampler *s, const zt_token_file *file, int T, uint64_t seed, bool shuffle,
                    zt_error *err);
void zt_sampler_free(zt_sampler *s);
/* Fills inputs[0..T) and targets[0..T) with global sample `index`. ZT_ERR_DATA names the file
 * position when a token is outside [0, vocab_size). */
int zt_sampler_get(zt_sampler *s, uint64_t index, int32_t *inputs, int32_t *targets, int vocab_size,
                   zt_error *err);
/* Fills a micro-batch: B samples first_index, first_index + stride, ... (stride 1 on one rank). */
int zt_sampler_batch(zt_sampler *s, uint64_t first_index, uint64_t stride, int B, int32_t *inputs,
                     int32_t *targets, int vocab_size, zt_error *err);

#endif
