/* sampler.h - deterministic sampling of training windows from a token file, driven by a global
 * sample index. Sample s is a window of T+1 tokens (inputs = first T, targets = last T) chosen as
 * a pure function of (file, T, seed, s): windows start at multiples of T (consecutive windows
 * share one token, as in llm.c), and each epoch visits every window once in an order shuffled by
 * (seed, epoch). So the global batches do not depend on how many ranks read them, and the cursor
 * to save is just the next global sample index.
 *
 * Skipped samples (data.skip_samples, the loss-spike rollback: docs/reliability.md): ranges of
 * physical sample indices the run never trains on. The index the trainer counts is logical: logical
 * index i reads the i-th physical sample outside every skipped range, so adding a range at or past
 * the physical sample the cursor has reached moves only what comes next.
 *
 * A sampler reads either a token file (windows, as above) or a mixture of packed datasets
 * (data/mixture.h: records with their loss masks and positions), through the same indices. */
#ifndef ZT_SAMPLER_H
#define ZT_SAMPLER_H

#include "data/token_file.h"

#include <stdbool.h>

#define ZT_SAMPLER_MAX_SKIPS 64

typedef struct zt_sample_range {
    uint64_t start, count; /* physical samples [start, start + count) */
} zt_sample_range;

struct zt_mixture;

typedef struct zt_sampler {
    const zt_token_file *file;   /* NULL when reading mix */
    struct zt_mixture *mix;
    int T;
    uint64_t seed;
    bool shuffle;
    uint64_t n_windows;  /* windows per epoch: (n_tokens - 1) / T; a mixture's sequences */
    uint32_t *perm;      /* (n_windows) order of the cached epoch, NULL when !shuffle */
    uint64_t perm_epoch; /* epoch perm belongs to */
    zt_sample_range skips[ZT_SAMPLER_MAX_SKIPS]; /* ascending, disjoint, not adjacent */
    int n_skips;
} zt_sampler;

/* ZT_ERR_DATA when the file holds fewer than T+1 tokens. */
int zt_sampler_init(zt_sampler *s, const zt_token_file *file, int T, uint64_t seed, bool shuffle,
                    zt_error *err);
/* A sampler over a mixture (not owned; it shuffles its sources itself). */
int zt_sampler_init_mixture(zt_sampler *s, struct zt_mixture *mix, int T, zt_error *err);
void zt_sampler_free(zt_sampler *s);
/* SplitMix64's finalizer: the generator of the epochs' shuffles and of the records' validation split */
uint64_t zt_mix64(uint64_t x);
/* perm[0..n) = a permutation of 0..n-1 drawn from (seed, epoch): Fisher-Yates */
void zt_shuffle_epoch(uint32_t *perm, uint64_t n, uint64_t seed, uint64_t epoch);
/* Fills inputs[0..T), targets[0..T) (-1: not counted) and positions[0..T) (NULL: not wanted)
 * with global sample `index`; *counted (may be NULL) = its counted targets. ZT_ERR_DATA names the
 * file position when a token is outside [0, vocab_size). */
int zt_sampler_get(zt_sampler *s, uint64_t index, int32_t *inputs, int32_t *targets, int32_t *positions,
                   uint64_t *counted, int vocab_size, zt_error *err);
/* The counted targets of samples first, first + 1, ..., first + n - 1 (logical indices). */
uint64_t zt_sampler_counted(zt_sampler *s, uint64_t first, uint64_t n);
/* The physical sample logical index `index` reads (itself when nothing is skipped). */
uint64_t zt_sampler_physical(const zt_sampler *s, uint64_t index);
/* Skips physical samples [start, start + count), merged with the ranges already skipped.
 * ZT_ERR_USAGE when count is 0 or ZT_SAMPLER_MAX_SKIPS disjoint ranges would not hold them. */
int zt_sampler_skip(zt_sampler *s, uint64_t start, uint64_t count, zt_error *err);
/* Skips the physical samples logical [first, first + n) read now (a step's global batch); they
 * need not be contiguous. Same errors. */
int zt_sampler_skip_logical(zt_sampler *s, uint64_t first, uint64_t n, zt_error *err);
/* Parses "START:COUNT[,START:COUNT...]" (data.skip_samples) into out[0..*n). ZT_ERR_USAGE naming
 * the bad part. An empty spec is no range. */
int zt_sampler_parse_skips(const char *spec, zt_sample_range *out, int cap, int *n, zt_error *err);
/* Fills a micro-batch: B samples first_index, first_index + stride, ... (stride 1 on one rank);
 * positions may be NULL; *counted (may be NULL) = the batch's counted targets. */
int zt_sampler_batch(zt_sampler *s, uint64_t first_index, uint64_t stride, int B, int32_t *inputs,
                     int32_t *targets, int32_t *positions, uint64_t *counted, int vocab_size, zt_error *err);

#endif
