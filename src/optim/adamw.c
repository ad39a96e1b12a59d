/* adamw.c - AdamW with decoupled weight decay on a flat fp32 slice (see optim.h for the math).
 * One pass over p, g, m, v: the update is memory-bound, so it is written for the compiler to
 * vectorize (no aliasing, no branches) and split across threads by a static schedule.
 * zt_adamw_update_round also rounds the updated parameters into their low-precision compute copy
 * block by block while the block is still in cache (one pass over the parameters instead of the
 * update's and the copy's). The copy, which this pass never reads, is rounded into a small buffer
 * and goes to memory with streaming (non-temporal) stores, its whole 64-byte lines (the partial
 * ones at a block's ends with ordinary stores; an sfence ends each thread's share): no read for
 * ownership of its lines, and it does not push p, g, m, v out of the cache. p, m and v keep
 * ordinary stores: their lines were just read, and streaming stores into cached lines measured
 * 1.5x slower here (bench/optim_timing.c, docs/optimizer.md). Each element's arithmetic is the
 * same loop's in both, so the two give the same bits as zt_adamw_update followed by
 * zt_round_to_lp on the whole slice. */
#include "optim/optim.h"
#include "kernels/kernels.h"
#include "kernels/vecmath.h"

#include <math.h>

/* elements per block of the fused update and rounding: p, g, m, v of a block (128 KiB) stay in L2 */
#define ROUND_BLOCK 8192

typedef struct adamw_consts {
    float b1, b2, a1, a2, eps, step, inv_sqrt_bc2, decay, grad_scale;
} adamw_consts;

static adamw_consts consts_of(float lr, float b1, float b2, float eps, float wd, float grad_scale, int64_t t) {
    const float bc1 = 1.0f - powf(b1, (float)t), bc2 = 1.0f - powf(b2, (float)t);
    return (adamw_consts){.b1 = b1, .b2 = b2, .a1 = 1.0f - b1, .a2 = 1.0f - b2, .eps = eps, .step = lr / bc1,
                          .inv_sqrt_bc2 = 1.0f / sqrtf(bc2), .decay = 1.0f - lr * wd, .grad_scale = grad_scale};
}

/* elements [lo, hi) on one thread: PyTorch's order, decay first (p *= 1 - lr·wd), then the Adam step */
static void adamw_block(float *restrict p, const float *restrict g, float *restrict m, float *restrict v,
                        size_t lo, size_t hi, const adamw_consts *k) {
    const float b1 = k->b1, b2 = k->b2, a1 = k->a1, a2 = k->a2, eps = k->eps, step = k->step;
    const float inv_sqrt_bc2 = k->inv_sqrt_bc2, decay = k->decay, grad_scale = k->grad_scale;
#pragma omp simd
    for (size_t i = lo; i < hi; i++) {
        float gi = g[i] * grad_scale;
        float mi = b1 * m[i] + a1 * gi;
        float vi = b2 * v[i] + a2 * gi * gi;
        m[i] = mi;
        v[i] = vi;
        p[i] = p[i] * decay - step * mi / (sqrtf(vi) * inv_sqrt_bc2 + eps);
    }
}

void zt_adamw_update(float *p, const float *g, float *m, float *v, size_t n, float lr, float b1, float b2, float eps,
                     float wd, float grad_scale, int64_t t) {
    const adamw_consts k = consts_of(lr, b1, b2, eps, wd, grad_scale, t);
#pragma omp parallel
    {
        size_t i0, i1;
        zt_split_range(n, ZT_VL, zt_thread_num(), zt_num_threads(), &i0, &i1);
        adamw_block(p, g, m, v, i0, i1, &k);
    }
}

void zt_adamw_update_round(float *p, const float *g, float *m, float *v, size_t n, float lr, float b1, float b2,
                           float eps, float wd, float grad_scale, int64_t t, int lp_kind, void *lp) {
    const adamw_consts k = consts_of(lr, b1, b2, eps, wd, grad_scale, t);
    /* bytes per element of the copy: bf16 bits, or fp32 holding fp16 values */
    const size_t lp_bytes = zt_lp_elem_bytes(lp_kind);
#pragma omp parallel if (n >= ROUND_BLOCK)
    {
        _Alignas(64) float copy[ROUND_BLOCK]; /* the block's copy (bf16: its first half) */
        size_t i0, i1;
        zt_split_range(n, ROUND_BLOCK, zt_thread_num(), zt_num_threads(), &i0, &i1);
        for (size_t lo = i0; lo < i1; lo += ROUND_BLOCK) {
            size_t hi = lo + ROUND_BLOCK < i1 ? lo + ROUND_BLOCK : i1;
            adamw_block(p, g, m, v, lo, hi, &k);
            zt_round_to_lp_serial((zt_lp_kind)lp_kind, copy, p + lo, hi - lo);
            zt_copy_streaming((char *)lp + lo * lp_bytes, copy, (hi - lo) * lp_bytes);
        }
        zt_streaming_fence(); /* the streaming stores visible before the threads' barrier */
    }
}
