/* onebit_adam.c - 1-bit Adam's elementwise parts (DeepSpeed's OnebitAdam, optim.h has the math):
 * DeepSpeed's uncorrected warm-up update, the local momentum before the compressed all-reduce
 * (comm/compressed_all_reduce.c, called by the engine between the two) and the update with the
 * frozen variance. Each is one pass over flat fp32 slices split across threads; the arithmetic of
 * an element does not depend on the split. */
#include "optim/optim.h"
#include "kernels/kernels.h"

#include <math.h>

void zt_onebit_warmup_update(float *p, const float *g, float *m, float *v, size_t n, float lr, float b1, float b2,
                             float eps, float wd, float grad_scale) {
    const float a1 = 1.0f - b1, a2 = 1.0f - b2, neg_lr = -lr;
#pragma omp parallel for simd schedule(static) if (n > 65536)
    for (size_t i = 0; i < n; i++) {
        float gi = g[i] * grad_scale;
        float mi = b1 * m[i] + a1 * gi;
        float vi = b2 * v[i] + a2 * gi * gi;
        m[i] = mi;
        v[i] = vi;
        p[i] = p[i] + neg_lr * (mi / (sqrtf(vi) + eps) + wd * p[i]);
    }
}

void zt_onebit_momentum(const float *g, float *m, size_t n, float b1, float grad_scale) {
    const float a1 = 1.0f - b1;
#pragma omp parallel for simd schedule(static) if (n > 65536)
    for (size_t i = 0; i < n; i++) {
        float gi = g[i] * grad_scale;
        m[i] = b1 * m[i] + a1 * gi;
    }
}

void zt_onebit_apply(float *p, const float *m, const float *v, size_t n, float lr, float b1, float b2, float eps,
                     float wd, int64_t t, int64_t freeze_step, bool bias_correction) {
    if (!bias_correction) {
        const float neg_lr = -lr;
#pragma omp parallel for simd schedule(static) if (n > 65536)
        for (size_t i = 0; i < n; i++) p[i] = p[i] + neg_lr * (m[i] / (sqrtf(v[i]) + eps) + wd * p[i]);
        return;
    }
    /* zt_adamw_update's constants and expression, v's correction that of its last update */
    const float bc1 = 1.0f - powf(b1, (float)t), bc2 = freeze_step > 0 ? 1.0f - powf(b2, (float)freeze_step) : 1.0f;
    const float step = lr / bc1, inv_sqrt_bc2 = 1.0f / sqrtf(bc2), decay = 1.0f - lr * wd;
#pragma omp parallel for simd schedule(static) if (n > 65536)
    for (size_t i = 0; i < n; i++) p[i] = p[i] * decay - step * m[i] / (sqrtf(v[i]) * inv_sqrt_bc2 + eps);
}
