/* lamb.c - LAMB as DeepSpeed's FusedLamb computes it (see optim.h for the definition): the Adam
 * moments on any slice, the fixed-chunk partial sums of squares of the parameter and of the update
 * (so the whole-tensor norms have the same bits however the tensor is sharded: the gradient norm's
 * rule), the clamped trust ratio, and the apply, which computes the update again from the same
 * values (the same bits as the update the norm was taken of, without storing it). */
#include "optim/optim.h"

#include <math.h>

void zt_lamb_moments(const float *restrict g, float *restrict m, float *restrict v, size_t n, float b1, float b2,
                     float grad_scale) {
    const float a1 = 1.0f - b1, a2 = 1.0f - b2;
#pragma omp parallel for simd schedule(static) if (n > 65536)
    for (size_t i = 0; i < n; i++) {
        float gi = g[i] * grad_scale;
        m[i] = b1 * m[i] + a1 * gi;
        v[i] = b2 * v[i] + a2 * gi * gi;
    }
}

static inline float lamb_u(float p, float m, float v, float eps, float wd) { return m / (sqrtf(v) + eps) + wd * p; }

void zt_lamb_update_values(const float *p, const float *m, const float *v, int64_t n, float eps, float wd, float *u) {
    for (int64_t i = 0; i < n; i++) u[i] = lamb_u(p[i], m[i], v[i], eps, wd);
}

void zt_lamb_partials(const float *p, const float *m, const float *v, int64_t n, float eps, float wd, double *wpart,
                      double *upart) {
    int64_t nchunks = (n + ZT_LAMB_CHUNK - 1) / ZT_LAMB_CHUNK;
#pragma omp parallel for schedule(static) if (n > 65536)
    for (int64_t c = 0; c < nchunks; c++) {
        int64_t lo = c * ZT_LAMB_CHUNK, len = n - lo < ZT_LAMB_CHUNK ? n - lo : ZT_LAMB_CHUNK;
        float u[ZT_LAMB_CHUNK];
        zt_lamb_update_values(p + lo, m + lo, v + lo, len, eps, wd, u);
        zt_chunk_sum_squares(p + lo, len, ZT_LAMB_CHUNK, wpart + c);
        zt_chunk_sum_squares(u, len, ZT_LAMB_CHUNK, upart + c);
    }
}

float zt_lamb_coeff(double wnorm, double unorm, float min_coeff, float max_coeff) {
    if (wnorm == 0 || unorm == 0) return 1.0f;
    float c = (float)(wnorm / unorm);
    if (c > max_coeff) c = max_coeff;
    if (c < min_coeff) c = min_coeff;
    return c;
}

float zt_lamb_step_size(float lr, float b1, float b2, bool bias_correction, int64_t t) {
    if (!bias_correction) return lr;
    const float bc1 = 1.0f - powf(b1, (float)t), bc2 = 1.0f - powf(b2, (float)t);
    return lr * sqrtf(bc2) / bc1;
}

void zt_lamb_apply(float *restrict p, const float *restrict m, const float *restrict v, size_t n, float eps, float wd,
                   float step) {
#pragma omp parallel for simd schedule(static) if (n > 65536)
    for (size_t i = 0; i < n; i++) p[i] = p[i] - step * lamb_u(p[i], m[i], v[i], eps, wd);
}
