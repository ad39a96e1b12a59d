/* mixture.h - several packed sources read as one stream of sequences, deterministic and resumable:
 * blended by weights as Megatron-LM's BlendedDataset does (sample i goes to the source whose share
 * so far is furthest below its weight: argmax over d of w_d * max(i, 1) - taken_d, ties to the
 * first; helpers.cpp build_blending_indices), each source read in its own epochs, its sequences
 * shuffled per epoch by (seed, source, epoch); or, for validation, the sources one after another in
 * order (validation: past the end, sequences of padding that count nothing). Sample i is a pure function of (sources, weights, seed, i): what a checkpoint records is the
 * global sample index, and each source's cursor (zt_mixture_cursors) follows from it. */
#ifndef ZT_MIXTURE_H
#define ZT_MIXTURE_H

#include "data/packing.h"

typedef struct zt_mixture {
    int n;
    const zt_packed *const *src;
    double *w;            /* normalized weights; NULL: one after another (concatenated) */
    uint64_t seed;
    bool shuffle;
    uint64_t total;       /* sequences of all sources */
    uint64_t at, *taken;  /* the blend replayed up to sample `at`: how many each source gave */
    uint32_t **perm;      /* each source's order in epoch perm_epoch[d] */
    uint64_t *perm_epoch;
    bool end_pads;        /* samples past the last sequence are padding (validation reads each sequence
                             once, its last micro-batch filled up with them); else they go round */
} zt_mixture;

/* weights: n non-negative numbers, not all 0, or NULL for concatenation. ZT_ERR_USAGE / NOMEM. */
int zt_mixture_init(zt_mixture *m, const zt_packed *const *src, int n, const double *weights, uint64_t seed,
                    bool shuffle, zt_error *err);
void zt_mixture_free(zt_mixture *m);
/* Sample i: its source and that source's sequence. */
void zt_mixture_locate(zt_mixture *m, uint64_t i, int *source, uint64_t *seq);
/* Fills sample i (zt_packed_fill); *counted = its counted targets. */
void zt_mixture_fill(zt_mixture *m, uint64_t i, int32_t *inputs, int32_t *targets, int32_t *positions,
                     uint32_t *counted);
/* Counted targets of sample i, without filling. */
uint32_t zt_mixture_counted(zt_mixture *m, uint64_t i);
/* cursors[d] = samples source d has given before sample i (n entries). */
void zt_mixture_cursors(zt_mixture *m, uint64_t i, uint64_t *cursors);

#endif
