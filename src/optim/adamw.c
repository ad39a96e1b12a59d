/* adamw.c - AdamW with decoupled weight decay on a flat fp32 slice (see optim.h for the math).
 * One pass over p, g, m, v: the update is memory-bound, so it is written for the compiler to
 * vectorize (no aliasing, no branches) and split across threads by a static schedule. */
#include "optim/optim.h"

#include <math.h>

void zt_adamw_update(float *restrict p, const float *restrict g, float *restrict m,
                     float *restrict v, size_t n, float lr, float b1, float b2, float eps, float wd,
                     float grad_scale, int64_t t) {
    const float bc1 = 1.0f - powf(b1, (float)t), bc2 = 1.0f - powf(b2, (float)t);
    const float step = lr / bc1, inv_sqrt_bc2 = 1.0f / sqrtf(bc2), decay = 1.0f - lr * wd;
    const float a1 = 1.0f - b1, a2 = 1.0f - b2;
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) {
        float gi = g[i] * grad_scale;
        float mi = b1 * m[i] + a1 * gi;
        float vi = b2 * v[i] + a2 * gi * gi;
        m[i] = mi;
        v[i] = vi;
        /* PyTorch order: decay first (p *= 1 - lr·wd), then the Adam step */
        p[i] = p[i] * decay - step * mi / (sqrtf(vi) * inv_sqrt_bc2 + eps);
    }
}
