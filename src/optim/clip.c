/* clip.c - the pieces of global-norm gradient clipping: a deterministic sum of squares and the
 * clipping coefficient. The engine sums per-parameter results in table order (and, sharded,
 * across ranks in rank order), so the norm has the same bits on every run. */
#include "optim/optim.h"

#include <omp.h>

#define ZT_MAX_THREADS 256

double zt_sum_squares(const float *x, size_t n) {
    double part[ZT_MAX_THREADS] = {0};
    int nt = omp_get_max_threads();
    if (nt > ZT_MAX_THREADS) nt = ZT_MAX_THREADS;
    if (n < 65536) nt = 1;
#pragma omp parallel num_threads(nt)
    {
        int tid = omp_get_thread_num(), T = omp_get_num_threads();
        size_t lo = n * (size_t)tid / (size_t)T, hi = n * (size_t)(tid + 1) / (size_t)T;
        /* 8 independent double accumulators in a fixed pattern keep this vectorizable */
        double acc[8] = {0};
        size_t i = lo;
        for (; i + 8 <= hi; i += 8)
            for (int k = 0; k < 8; k++) acc[k] += (double)x[i + k] * (double)x[i + k];
        for (; i < hi; i++) acc[0] += (double)x[i] * (double)x[i];
        part[tid] = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    }
    double s = 0;
    for (int t = 0; t < nt; t++) s += part[t];
    return s;
}

double zt_clip_coef(double norm, double max_norm) {
    if (max_norm <= 0) return 1.0;
    double c = max_norm / (norm + 1e-6);
    return c < 1.0 ? c : 1.0;
}
