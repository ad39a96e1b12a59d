/* optim.h - optimizer kernels on flat fp32 shards (AdamW, SGD with momentum), the gradient-norm
 * pieces that clipping is built from, and the learning-rate schedule. They work on any slice of
 * a parameter, so the sharded engine calls them on its local shard unchanged. */
#ifndef ZT_OPTIM_H
#define ZT_OPTIM_H

#include <stddef.h>
#include <stdint.h>

/* AdamW (Loshchilov & Hutter; PyTorch's torch.optim.AdamW semantics), one slice of n elements:
 *   g' = g * grad_scale                 (clipping coefficient, 1 when not clipped)
 *   m = b1·m + (1-b1)·g';  v = b2·v + (1-b2)·g'^2
 *   p -= lr · ( (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps) + wd · p )
 * t is the 1-based step number. wd = 0 for parameters without decay. */
void zt_adamw_update(float *p, const float *g, float *m, float *v, size_t n, float lr, float b1,
                     float b2, float eps, float wd, float grad_scale, int64_t t);
/* The same update, and the updated p rounded into lp[0..n), its compute copy of kind lp_kind
 * (zt_lp_kind: bf16 bits, or fp32 holding fp16 values), in the same pass: the bits of
 * zt_adamw_update followed by zt_round_to_lp. */
void zt_adamw_update_round(float *p, const float *g, float *m, float *v, size_t n, float lr, float b1, float b2,
                           float eps, float wd, float grad_scale, int64_t t, int lp_kind, void *lp);

/* SGD with momentum (PyTorch semantics, dampening 0): g' = g·grad_scale + wd·p;
 * buf = momentum·buf + g' (buf = g' at t == 1); step = nesterov ? g' + momentum·buf : buf;
 * p -= lr · step. buf may be NULL when momentum == 0. */
void zt_sgd_update(float *p, const float *g, float *buf, size_t n, float lr, float momentum,
                   int nesterov, float wd, float grad_scale, int64_t t);

/* partial[c] = sum of x[i]^2 over chunk c = [c*chunk, min((c+1)*chunk, n)), in double, in index
 * order (8 interleaved accumulators combined pairwise). Threads split the chunks, never a chunk,
 * so the bits do not depend on the thread count, and a shard that starts on a chunk boundary gets
 * the same partials as the whole tensor: the gradient norm is then the in-order sum of all chunk
 * partials (zt_sum_in_order), identical for every strategy and world size. */
void zt_chunk_sum_squares(const float *x, int64_t n, int64_t chunk, double *partial);
/* Left-to-right sum of x[0..n). */
double zt_sum_in_order(const double *x, int64_t n);

/* Clipping coefficient for a global norm: min(1, max_norm / (norm + 1e-6)), 1 if max_norm <= 0
 * (torch.nn.utils.clip_grad_norm_'s formula). */
double zt_clip_coef(double norm, double max_norm);

#endif
