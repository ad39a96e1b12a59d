/* sampler.c - the deterministic window sampler (see sampler.h for the contract). */
#include "data/sampler.h"

#include <stdlib.h>
#include <string.h>

static uint64_t mix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

int zt_sampler_init(zt_sampler *s, const zt_token_file *file, int T, uint64_t seed, bool shuffle,
                    zt_error *err) {
    memset(s, 0, sizeof *s);
    if (T < 1) return zt_error_set(err, ZT_ERR_USAGE, "sampler: sequence length %d", T);
    if (file->n < (size_t)T + 1)
        return zt_error_set(err, ZT_ERR_DATA,
                            "token file holds %zu tokens, fewer than one window of T+1 = %d", file->n,
                            T + 1);
    s->file = file;
    s->T = T;
    s->seed = seed;
    s->shuffle = shuffle;
    s->n_windows = (file->n - 1) / (size_t)T;
    if (s->n_windows > UINT32_MAX)
        return zt_error_set(err, ZT_ERR_DATA, "token file: %llu windows exceed the sampler's 2^32",
                            (unsigned long long)s->n_windows);
    if (shuffle) {
        s->perm = malloc(s->n_windows * sizeof *s->perm);
        if (!s->perm) return zt_error_set(err, ZT_ERR_NOMEM, "sampler: out of memory");
        s->perm_epoch = UINT64_MAX;
    }
    return ZT_OK;
}

void zt_sampler_free(zt_sampler *s) {
    free(s->perm);
    memset(s, 0, sizeof *s);
}

/* Fisher-Yates over the windows with a generator keyed by (seed, epoch). */
static void build_epoch(zt_sampler *s, uint64_t epoch) {
    uint64_t n = s->n_windows, state = mix(s->seed ^ mix(epoch + 1));
    for (uint64_t i = 0; i < n; i++) s->perm[i] = (uint32_t)i;
    for (uint64_t i = n - 1; i > 0; i--) {
        state = mix(state);
        uint64_t j = state % (i + 1); /* bias < 2^-32 for n < 2^32: irrelevant here */
        uint32_t t = s->perm[i];
        s->perm[i] = s->perm[j];
        s->perm[j] = t;
    }
    s->perm_epoch = epoch;
}

int zt_sampler_get(zt_sampler *s, uint64_t index, int32_t *inputs, int32_t *targets, int vocab_size,
                   zt_error *err) {
    uint64_t epoch = index / s->n_windows, w = index % s->n_windows;
    if (s->shuffle) {
        if (s->perm_epoch != epoch) build_epoch(s, epoch);
        w = s->perm[w];
    }
    size_t start = (size_t)w * (size_t)s->T;
    const uint16_t *tok = s->file->tokens + start;
    for (int t = 0; t <= s->T; t++)
        if (tok[t] >= vocab_size)
            return zt_error_set(err, ZT_ERR_DATA, "token %u at position %zu is outside the vocabulary "
                                "(V=%d)", tok[t], start + (size_t)t, vocab_size);
    for (int t = 0; t < s->T; t++) {
        inputs[t] = tok[t];
        targets[t] = tok[t + 1];
    }
    return ZT_OK;
}

int zt_sampler_batch(zt_sampler *s, uint64_t first_index, uint64_t stride, int B, int32_t *inputs,
                     int32_t *targets, int vocab_size, zt_error *err) {
    for (int b = 0; b < B; b++) {
        int rc = zt_sampler_get(s, first_index + (uint64_t)b * stride, inputs + (size_t)b * s->T,
                                targets + (size_t)b * s->T, vocab_size, err);
        if (rc) return rc;
    }
    return ZT_OK;
}
