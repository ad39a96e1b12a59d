/* sgd.c - SGD with momentum and optional Nesterov, PyTorch's torch.optim.SGD semantics
 * (dampening 0, L2 weight decay added to the gradient). See optim.h. */
#include "optim/optim.h"

void zt_sgd_update(float *restrict p, const float *restrict g, float *restrict buf, size_t n,
                   float lr, float momentum, int nesterov, float wd, float grad_scale, int64_t t) {
    if (momentum == 0.0f || !buf) {
#pragma omp parallel for simd schedule(static)
        for (size_t i = 0; i < n; i++) p[i] -= lr * (g[i] * grad_scale + wd * p[i]);
        return;
    }
    const int first = t <= 1;
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) {
        float gi = g[i] * grad_scale + wd * p[i];
        float b = first ? gi : momentum * buf[i] + gi;
        buf[i] = b;
        p[i] -= lr * (nesterov ? gi + momentum * b : b);
    }
}
