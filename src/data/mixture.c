/* mixture.c - blending packed sources by weight, deterministically (see mixture.h). */
#include "data/mixture.h"

#include "data/sampler.h"

#include <stdlib.h>
#include <string.h>

void zt_mixture_free(zt_mixture *m) {
    if (m->perm)
        for (int d = 0; d < m->n; d++) free(m->perm[d]);
    free(m->perm);
    free(m->perm_epoch);
    free(m->w);
    free(m->taken);
    memset(m, 0, sizeof *m);
}

int zt_mixture_init(zt_mixture *m, const zt_packed *const *src, int n, const double *weights, uint64_t seed,
                    bool shuffle, zt_error *err) {
    memset(m, 0, sizeof *m);
    if (n < 1) return zt_error_set(err, ZT_ERR_USAGE, "mixture: no source");
    m->n = n;
    m->src = src;
    m->seed = seed;
    m->shuffle = shuffle;
    m->taken = calloc((size_t)n, sizeof *m->taken);
    m->perm = calloc((size_t)n, sizeof *m->perm);
    m->perm_epoch = malloc((size_t)n * sizeof *m->perm_epoch);
    if (!m->taken || !m->perm || !m->perm_epoch) goto nomem;
    double sum = 0;
    for (int d = 0; d < n; d++) {
        m->total += src[d]->n_seq;
        m->perm_epoch[d] = UINT64_MAX;
        if (shuffle && !(m->perm[d] = malloc(src[d]->n_seq * sizeof *m->perm[d]))) goto nomem;
        if (weights) {
            if (!(weights[d] >= 0) || weights[d] > 1e300) {
                zt_mixture_free(m);
                return zt_error_set(err, ZT_ERR_USAGE, "mixture: weight %d is %g (want a finite number >= 0)", d + 1,
                                    weights[d]);
            }
            sum += weights[d];
        }
    }
    if (weights) {
        if (!(sum > 0)) {
            zt_mixture_free(m);
            return zt_error_set(err, ZT_ERR_USAGE, "mixture: the weights add up to 0");
        }
        if (!(m->w = malloc((size_t)n * sizeof *m->w))) goto nomem;
        for (int d = 0; d < n; d++) m->w[d] = weights[d] / sum;
    }
    return ZT_OK;
nomem:
    zt_mixture_free(m);
    return zt_error_set(err, ZT_ERR_NOMEM, "mixture: out of memory");
}

/* the source sample `at` of the blend goes to (Megatron's rule) */
static int choose(const zt_mixture *m, uint64_t at) {
    double best = 0;
    int pick = 0;
    double t = (double)(at > 1 ? at : 1);
    for (int d = 0; d < m->n; d++) {
        double e = m->w[d] * t - (double)m->taken[d];
        if (d == 0 || e > best) best = e, pick = d;
    }
    return pick;
}

/* the blend replayed to sample i (from the start when i is behind) */
static void replay(zt_mixture *m, uint64_t i) {
    if (i < m->at) {
        m->at = 0;
        memset(m->taken, 0, (size_t)m->n * sizeof *m->taken);
    }
    while (m->at < i) m->taken[choose(m, m->at++)]++;
}

void zt_mixture_locate(zt_mixture *m, uint64_t i, int *source, uint64_t *seq) {
    int d = 0;
    uint64_t j = i;
    if (m->w) {
        if (m->n > 1) {
            replay(m, i);
            d = choose(m, i);
            j = m->taken[d];
        }
    } else { /* one after another, round and round: lap k is each source's epoch k */
        uint64_t lap = i / m->total, r = i % m->total;
        while (r >= m->src[d]->n_seq) r -= m->src[d]->n_seq, d++;
        j = lap * m->src[d]->n_seq + r;
    }
    uint64_t ns = m->src[d]->n_seq, epoch = j / ns;
    j %= ns;
    if (m->shuffle) {
        if (m->perm_epoch[d] != epoch) {
            zt_shuffle_epoch(m->perm[d], ns, m->seed ^ (0x632be59bd9b4e019ULL * (uint64_t)(d + 1)), epoch);
            m->perm_epoch[d] = epoch;
        }
        j = m->perm[d][j];
    }
    *source = d;
    *seq = j;
}

void zt_mixture_fill(zt_mixture *m, uint64_t i, int32_t *inputs, int32_t *targets, int32_t *positions,
                     uint32_t *counted) {
    if (m->end_pads && i >= m->total) { /* past the end: a sequence of padding, nothing counted */
        const zt_packed *p = m->src[0];
        for (int t = 0; t < p->T; t++) {
            inputs[t] = p->pad_id;
            targets[t] = -1;
            if (positions) positions[t] = t;
        }
        if (counted) *counted = 0;
        return;
    }
    int d;
    uint64_t s;
    zt_mixture_locate(m, i, &d, &s);
    zt_packed_fill(m->src[d], s, inputs, targets, positions);
    if (counted) *counted = m->src[d]->seq_counted[s];
}

uint32_t zt_mixture_counted(zt_mixture *m, uint64_t i) {
    if (m->end_pads && i >= m->total) return 0;
    int d;
    uint64_t s;
    zt_mixture_locate(m, i, &d, &s);
    return m->src[d]->seq_counted[s];
}

void zt_mixture_cursors(zt_mixture *m, uint64_t i, uint64_t *cursors) {
    if (m->w && m->n > 1) {
        replay(m, i);
        memcpy(cursors, m->taken, (size_t)m->n * sizeof *cursors);
        return;
    }
    for (int d = 0; d < m->n; d++) cursors[d] = 0;
    if (m->w) {
        cursors[0] = i;
        return;
    }
    uint64_t laps = i / m->total, r = i % m->total;
    for (int d = 0; d < m->n; d++) {
        uint64_t ns = m->src[d]->n_seq, here = r < ns ? r : ns;
        cursors[d] = laps * ns + here;
        r -= here;
    }
}
