/* compute.h - the scale model's compute time: forward and backward seconds of every unit of a
 * model (embedding, blocks, head, as the engine runs them) for one micro-batch on one device, and
 * the optimizer's seconds per parameter it updates.
 *
 * Per unit, for n = B·T tokens (docs/scale.md, "Compute"):
 *   matrix products  every Linear (OC, IC) of the unit: forward 2·n·OC·IC FLOPs, backward twice
 *                    that (dinp and dW); GPUs: FLOPs / (peak · efficiency); cpu: the engine's
 *                    GEMM timed at exactly those shapes and layouts (device.h)
 *   attention        scores and weighted sum, 4·n·T·C FLOPs forward (the full square, as MFU
 *                    counts it) times the fraction really computed: 1/2 where the kernel skips
 *                    the masked half (flash attention), the engine's causal row blocks on cpu;
 *                    backward 2.5x forward under flash attention (it recomputes the scores), 2x
 *                    in the engine's; GPUs at attn_efficiency of the peak, cpu timed
 *   memory-bound     norms, residual adds, activation function, RoPE, softmax and cross-entropy:
 *                    the bytes they read and write per token (compute.c lists them) / (the
 *                    device's memory bandwidth · mem_efficiency); backward moves twice the
 *                    forward's bytes
 *   recomputation    full: a block's backward also re-runs its forward; selective: its attention
 *                    forward (Megatron's selective recomputation)
 *   optimizer        AdamW reads parameter, gradient and two moments and writes three of them
 *                    (+ the bf16 compute copy, + the gradient-norm pass): 32 bytes per parameter
 *                    in fp32, 34 in bf16, over the memory bandwidth
 * Context parallelism (the model's units' cp_parts): a part's B·T/cp tokens, its T/cp queries
 * against the whole sequence's T keys (compute.c).
 * The model's FLOPs per token (what MFU divides by) are the model's own formula
 * (zt_model.train_flops_per_token, metrics/mfu.h), the same number the trainer reports. */
#ifndef ZT_SCALE_COMPUTE_H
#define ZT_SCALE_COMPUTE_H

#include "scale/device.h"

typedef struct zt_scale_compute {
    int n_units;
    double *fwd, *bwd;        /* seconds per unit for one micro-batch; bwd includes recomputation */
    double fwd_total, bwd_total;
    double matmul_s, attention_s, memory_s, recompute_s; /* the parts of fwd_total + bwd_total */
    double attention_fwd_s;   /* the forward's share of attention_s */
    double opt_s_per_param;   /* optimizer seconds per parameter this device updates */
    double model_flops_per_token; /* MFU's numerator per token (forward + backward, no recompute) */
    double peak;              /* the peak MFU divides by: bf16 or fp32, per device */
} zt_scale_compute;

/* Fills c for model m (a preset built by zt_model_spec_create) with micro-batch B x T on device
 * d, bf16 compute (else fp32), under activation checkpointing `ac`. Allocates c->fwd/bwd (free
 * with zt_scale_compute_free). ZT_ERR_USAGE when the device has no peak or T exceeds the model's
 * context; ZT_ERR_NOMEM. */
int zt_scale_compute_model(const zt_model *m, const zt_scale_device *d, int B, int T, bool bf16, zt_recompute ac,
                           zt_scale_compute *c, zt_error *err);
void zt_scale_compute_free(zt_scale_compute *c);

#endif
