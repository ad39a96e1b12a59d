/* clip.c - the pieces of global-norm gradient clipping: a deterministic sum of squares and the
 * clipping coefficient. The norm is the in-order sum of fixed-chunk partials (see optim.h), so it
 * has the same bits on every run, thread count, strategy and world size. */
#include "optim/optim.h"

void zt_chunk_sum_squares(const float *x, int64_t n, int64_t chunk, double *partial) {
    int64_t nchunks = (n + chunk - 1) / chunk;
#pragma omp parallel for schedule(static) if (n > 65536)
    for (int64_t c = 0; c < nchunks; c++) {
        int64_t lo = c * chunk, hi = lo + chunk < n ? lo + chunk : n;
        double acc[8] = {0};
        int64_t i = lo;
        for (; i + 8 <= hi; i += 8)
            for (int k = 0; k < 8; k++) acc[k] += (double)x[i + k] * (double)x[i + k];
        for (; i < hi; i++) acc[i & 7] += (double)x[i] * (double)x[i];
        partial[c] = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    }
}

double zt_sum_in_order(const double *x, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += x[i];
    return s;
}

double zt_clip_coef(double norm, double max_norm) {
    if (max_norm <= 0) return 1.0;
    double c = max_norm / (norm + 1e-6);
    return c < 1.0 ? c : 1.0;
}
