/* optim.h - optimizer kernels on flat fp32 shards (AdamW, SGD with momentum), the gradient-norm
 * pieces that clipping is built from, and the learning-rate schedule. They work on any slice of
 * a parameter, so the sharded engine calls them on its local shard unchanged. */
#ifndef ZT_OPTIM_H
#define ZT_OPTIM_H

#include <stdbool.h>
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

/* ---- Muon (muon.c; docs/optimizer.md) ------------------------------------------------------- */
/* Keller Jordan's Muon for 2-D matrices, per matrix W (rows x cols) with momentum buffer M:
 *   g' = g * grad_scale;  M = beta·M + (1-beta)·g'  (the reference's lerp)
 *   U = nesterov ? beta·M + (1-beta)·g' : M        (elementwise: any slice, same bits)
 *   O = NS5(U) · scale;  W = W·(1 - lr·wd) - lr·O
 * NS5: X = U / (||U||_F + 1e-7) (transposed when rows > cols), then `steps` times
 *   A = X X^T;  B = b·A + c·A A;  X = a·X + B X   with (a, b, c) = (3.4445, -4.7750, 2.0315).
 * scale: ZT_MUON_SCALE_REFERENCE sqrt(max(1, rows/cols)) (the reference's), ZT_MUON_SCALE_RMS
 * 0.2·sqrt(max(rows, cols)) (Moonshot's, matching AdamW's update RMS). */
enum { ZT_MUON_SCALE_REFERENCE = 0, ZT_MUON_SCALE_RMS = 1 };
void zt_muon_momentum(const float *g, float *m, float *u, size_t n, float beta, bool nesterov, float grad_scale);
/* Floats of work zt_muon_orthogonalize needs for a rows x cols matrix: 2·r·c + 2·r^2 and the
 * products' packing, zt_ns_pack_floats(r, c) = (r + 64)·c (r = min, c = max). */
size_t zt_muon_workspace_floats(int64_t rows, int64_t cols);
float zt_muon_scale(int64_t rows, int64_t cols, int mode);
/* x (rows x cols, row-major, in place) = NS5(x) · scale. bf16: every operand and result of the
 * iteration is rounded to bf16 (nearest-even) as the reference's bf16 tensors are; products sum
 * in fp32 either way (kernels/ns_product.c, on the rounded values). The bits depend only on x,
 * steps, bf16 and scale (not the thread count, the rank or the instruction-set level). */
void zt_muon_orthogonalize(float *x, int64_t rows, int64_t cols, int steps, bool bf16, float scale, float *work);
void zt_muon_apply(float *p, const float *o, size_t n, float lr, float wd);

/* ---- LAMB (lamb.c): DeepSpeed's FusedLamb (Lamb), eps outside the square root -------------- */
/* Per tensor: g' = g·grad_scale;  m = b1·m + (1-b1)·g';  v = b2·v + (1-b2)·g'^2
 *   u = m / (sqrt(v) + eps) + wd·p
 *   ratio = ||p|| / ||u|| clamped to [min_coeff, max_coeff] (1 when either norm is 0), the norms
 *           over the whole tensor, p before the update
 *   step = bias_correction ? lr·sqrt(1-b2^t)/(1-b1^t) : lr;   p -= (step·ratio)·u */
#define ZT_LAMB_CHUNK 1024 /* = ZT_NORM_CHUNK: the norms' partials per fixed chunk */
void zt_lamb_moments(const float *g, float *m, float *v, size_t n, float b1, float b2, float grad_scale);
/* wpart[c], upart[c]: sums of squares of p and of u over chunk c of the n elements (n starts on a
 * chunk boundary of the tensor), each chunk as zt_chunk_sum_squares sums it. */
void zt_lamb_partials(const float *p, const float *m, const float *v, int64_t n, float eps, float wd, double *wpart,
                      double *upart);
/* u[0..n) = m / (sqrt(v) + eps) + wd·p, the update zt_lamb_partials takes the norm of (the same
 * bits), for the norms of a tensor gathered from parts (tensor parallelism: step_whole.c) */
void zt_lamb_update_values(const float *p, const float *m, const float *v, int64_t n, float eps, float wd, float *u);
float zt_lamb_coeff(double wnorm, double unorm, float min_coeff, float max_coeff);
float zt_lamb_step_size(float lr, float b1, float b2, bool bias_correction, int64_t t);
/* p -= step·u, u computed as zt_lamb_partials computes it */
void zt_lamb_apply(float *p, const float *m, const float *v, size_t n, float eps, float wd, float step);

/* ---- 1-bit Adam (onebit_adam.c): DeepSpeed's OnebitAdam around the compressed all-reduce ---- */
/* bias_correction true: AdamW's update (zt_adamw_update's expression); false: DeepSpeed's kernel.
 * Warm-up (t <= freeze_step), the gradient all-reduced, bias_correction false (true is
 * zt_adamw_update itself):  g' = g·grad_scale;  m = b1·m + (1-b1)·g';  v = b2·v + (1-b2)·g'^2;
 *   p = p + (-lr)·(m/(sqrt(v) + eps) + wd·p) */
void zt_onebit_warmup_update(float *p, const float *g, float *m, float *v, size_t n, float lr, float b1, float b2,
                             float eps, float wd, float grad_scale);
/* After the freeze, before the compressed all-reduce: m = b1·m + (1-b1)·(g·grad_scale), this
 * rank's own gradient (AdamW's expression for m) */
void zt_onebit_momentum(const float *g, float *m, size_t n, float b1, float grad_scale);
/* After it, m the average and v frozen at step freeze_step:
 *   true:  p = p·(1 - lr·wd) - lr/(1-b1^t) · m / (sqrt(v)/sqrt(1-b2^freeze_step) + eps)
 *   false: p = p + (-lr)·(m/(sqrt(v) + eps) + wd·p) */
void zt_onebit_apply(float *p, const float *m, const float *v, size_t n, float lr, float b1, float b2, float eps,
                     float wd, int64_t t, int64_t freeze_step, bool bias_correction);

#endif
