/* sampler.c - the deterministic window sampler (see sampler.h for the contract). */
#include "data/sampler.h"

#include "data/mixture.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

uint64_t zt_mix64(uint64_t x) {
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

int zt_sampler_init_mixture(zt_sampler *s, struct zt_mixture *m, int T, zt_error *err) {
    memset(s, 0, sizeof *s);
    if (T < 1) return zt_error_set(err, ZT_ERR_USAGE, "sampler: sequence length %d", T);
    s->mix = m;
    s->T = T;
    s->seed = m->seed;
    s->n_windows = m->total;
    return ZT_OK;
}

/* Fisher-Yates with a generator keyed by (seed, epoch). */
void zt_shuffle_epoch(uint32_t *perm, uint64_t n, uint64_t seed, uint64_t epoch) {
    uint64_t state = zt_mix64(seed ^ zt_mix64(epoch + 1));
    for (uint64_t i = 0; i < n; i++) perm[i] = (uint32_t)i;
    for (uint64_t i = n - 1; n > 0 && i > 0; i--) {
        state = zt_mix64(state);
        uint64_t j = state % (i + 1); /* bias < 2^-32 for n < 2^32: irrelevant here */
        uint32_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
}

static void build_epoch(zt_sampler *s, uint64_t epoch) {
    zt_shuffle_epoch(s->perm, s->n_windows, s->seed, epoch);
    s->perm_epoch = epoch;
}

uint64_t zt_sampler_physical(const zt_sampler *s, uint64_t index) {
    uint64_t p = index;
    for (int k = 0; k < s->n_skips && s->skips[k].start <= p; k++) p += s->skips[k].count;
    return p;
}

static int cmp_range(const void *a, const void *b) {
    uint64_t x = ((const zt_sample_range *)a)->start, y = ((const zt_sample_range *)b)->start;
    return (x > y) - (x < y);
}

int zt_sampler_skip(zt_sampler *s, uint64_t start, uint64_t count, zt_error *err) {
    if (count == 0 || start + count < start)
        return zt_error_set(err, ZT_ERR_USAGE, "sampler: cannot skip %llu samples from %llu", (unsigned long long)count,
                            (unsigned long long)start);
    zt_sample_range r[ZT_SAMPLER_MAX_SKIPS + 1];
    memcpy(r, s->skips, (size_t)s->n_skips * sizeof *r);
    r[s->n_skips] = (zt_sample_range){start, count};
    qsort(r, (size_t)s->n_skips + 1, sizeof *r, cmp_range);
    int n = 0; /* merge what overlaps or touches */
    for (int k = 0; k <= s->n_skips; k++) {
        if (n && r[n - 1].start + r[n - 1].count >= r[k].start) {
            uint64_t end = r[k].start + r[k].count;
            if (end > r[n - 1].start + r[n - 1].count) r[n - 1].count = end - r[n - 1].start;
        } else {
            r[n++] = r[k];
        }
    }
    if (n > ZT_SAMPLER_MAX_SKIPS)
        return zt_error_set(err, ZT_ERR_USAGE, "sampler: more than %d separate ranges of skipped samples",
                            ZT_SAMPLER_MAX_SKIPS);
    memcpy(s->skips, r, (size_t)n * sizeof *r);
    s->n_skips = n;
    return ZT_OK;
}

int zt_sampler_skip_logical(zt_sampler *s, uint64_t first, uint64_t n, zt_error *err) {
    uint64_t *phys = malloc((n ? n : 1) * sizeof *phys); /* mapped before any of them is skipped */
    if (!phys) return zt_error_set(err, ZT_ERR_NOMEM, "sampler: out of memory");
    for (uint64_t i = 0; i < n; i++) phys[i] = zt_sampler_physical(s, first + i);
    int rc = ZT_OK;
    for (uint64_t i = 0, j; i < n && !rc; i = j) {
        for (j = i + 1; j < n && phys[j] == phys[j - 1] + 1; j++) {}
        rc = zt_sampler_skip(s, phys[i], j - i, err);
    }
    free(phys);
    return rc;
}

int zt_sampler_parse_skips(const char *spec, zt_sample_range *out, int cap, int *n, zt_error *err) {
    *n = 0;
    for (const char *p = spec; *p;) {
        char *end = NULL;
        unsigned long long a = 0, c = 0;
        errno = 0;
        bool ok = *p >= '0' && *p <= '9';
        if (ok) a = strtoull(p, &end, 10);
        ok = ok && *end == ':' && errno == 0;
        if (ok) {
            const char *q = end + 1;
            ok = *q >= '0' && *q <= '9';
            if (ok) c = strtoull(q, &end, 10);
            ok = ok && errno == 0 && c > 0 && a + c > a && (*end == ',' || !*end);
        }
        if (!ok || *n == cap)
            return zt_error_set(err, ZT_ERR_USAGE, "data.skip_samples '%s': %s at '%s' (want START:COUNT[,START:COUNT...] "
                                "of global sample indices, COUNT > 0)", spec, ok ? "too many ranges" : "bad range", p);
        out[(*n)++] = (zt_sample_range){a, c};
        p = *end == ',' ? end + 1 : end;
    }
    return ZT_OK;
}

int zt_sampler_get(zt_sampler *s, uint64_t index, int32_t *inputs, int32_t *targets, int32_t *positions,
                   uint64_t *counted, int vocab_size, zt_error *err) {
    index = zt_sampler_physical(s, index);
    if (s->mix) {
        uint32_t c;
        zt_mixture_fill(s->mix, index, inputs, targets, positions, &c);
        if (counted) *counted += c;
        for (int t = 0; t < s->T; t++)
            if (inputs[t] >= vocab_size || targets[t] >= vocab_size || inputs[t] < 0)
                return zt_error_set(err, ZT_ERR_DATA, "sample %llu: token %d at position %d is outside the "
                                    "vocabulary (V=%d)", (unsigned long long)index,
                                    inputs[t] >= vocab_size || inputs[t] < 0 ? inputs[t] : targets[t], t, vocab_size);
        return ZT_OK;
    }
    if (counted) *counted += (uint64_t)s->T;
    if (positions)
        for (int t = 0; t < s->T; t++) positions[t] = t;
    uint64_t epoch = index / s->n_windows, w = index % s->n_windows;
    if (s->shuffle) {
        if (s->perm_epoch != epoch) build_epoch(s, epoch);
        w = s->perm[w];
    }
    size_t start = (size_t)w * (size_t)s->T;
    const zt_token_file *f = s->file;
    for (int t = 0; t <= s->T; t++) {
        uint32_t tok = zt_token_file_at(f, start + (size_t)t);
        if (tok >= (uint32_t)vocab_size)
            return zt_error_set(err, ZT_ERR_DATA, "token %u at position %zu is outside the vocabulary "
                                "(V=%d)", tok, start + (size_t)t, vocab_size);
        if (t < s->T) inputs[t] = (int32_t)tok;
        if (t > 0) targets[t - 1] = (int32_t)tok;
    }
    return ZT_OK;
}

int zt_sampler_batch(zt_sampler *s, uint64_t first_index, uint64_t stride, int B, int32_t *inputs,
                     int32_t *targets, int32_t *positions, uint64_t *counted, int vocab_size, zt_error *err) {
    if (counted) *counted = 0;
    for (int b = 0; b < B; b++) {
        size_t at = (size_t)b * s->T;
        int rc = zt_sampler_get(s, first_index + (uint64_t)b * stride, inputs + at, targets + at,
                                positions ? positions + at : NULL, counted, vocab_size, err);
        if (rc) return rc;
    }
    return ZT_OK;
}

uint64_t zt_sampler_counted(zt_sampler *s, uint64_t first, uint64_t n) {
    if (!s->mix) return n * (uint64_t)s->T;
    uint64_t c = 0;
    for (uint64_t i = 0; i < n; i++) c += zt_mixture_counted(s->mix, zt_sampler_physical(s, first + i));
    return c;
}
