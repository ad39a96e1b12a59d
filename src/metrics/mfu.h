/* mfu.h - model FLOPs utilization: one formula for every model and report (progress, JSONL,
 * bench), as llm.c, torchtitan and the PaLM paper (appendix B) count it.
 *
 *   training FLOPs per token  F = 6·N + 12·L·C·T
 *     N  parameters that take part in a matrix multiply per token: all parameters except
 *        position embeddings (a lookup); a tied input/output embedding counts once (it is the
 *        LM head's matmul). GPT-2 124M: N = 124,439,808 - 1024·768 = 123,653,376.
 *     6  2 FLOPs per multiply-add, x3 for forward + backward (input and weight gradients)
 *     12·L·C·T  attention scores Q·Kᵀ and the weighted sum A·V: 2 matmuls x 2 FLOPs x T keys x C
 *        per token and layer in forward (4·C·T), x3 for backward; the full T x T square, not the
 *        causal half, as PaLM/llm.c count it.
 *   MFU = F · tokens / (seconds · peak)      peak: scale/peak.h, the cores in use at their measured rate
 *                                            in the run's precision (fp32 FMA or bf16 dot product)
 *   HFU = F_hw · tokens / (seconds · peak),  F_hw = F + r·(2·N + 4·L·C·T) = F·(1 + r/3), with r the
 *        fraction of the forward pass recomputed in backward (activation checkpointing: r = 1 for
 *        every block; 0 without it, then HFU = MFU). */
#ifndef ZT_MFU_H
#define ZT_MFU_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* 6·n_matmul_params + 12·n_layer·n_embd·seq_len (see above). */
double zt_flops_per_token(double n_matmul_params, int n_layer, int n_embd, int seq_len);
/* Hardware FLOPs per token: model_flops · (1 + recompute_fraction / 3). */
double zt_hfu_flops_per_token(double model_flops_per_token, double recompute_fraction);
/* flops_per_token · tokens / (seconds · peak_flops); NaN when peak, seconds or flops are <= 0. */
double zt_utilization(double flops_per_token, double tokens, double seconds, double peak_flops);
/* The peak the trainer divides by: world x zt_cores_per_rank(threads_per_rank) cores of this
 * machine at the measured fp32 (or bf16) rate (zt_cpu_peak_measure: cached, else ~0.25 s);
 * ZT_PEAK_GFLOPS per rank x world when set. 0 when unknown. */
double zt_job_peak_flops(int threads_per_rank, int world, bool bf16);

/* Achieved GFLOP/s of cblas_sgemm C(M,N) = A(M,K)·B(K,N) on the calling thread's OpenMP
 * threads (OpenBLAS's own pool): one warm-up call, then the best of 5 (at least 3 and until
 * 0.5 s have passed). NaN when the buffers cannot be allocated or a size is < 1. */
double zt_measure_sgemm_gflops(int M, int N, int K);
/* `zerotrain bench --peak`: prints the detected peak table (flags, clock, per-cycle rates, cores)
 * and the measured sgemm rate for a few shapes next to the nominal fp32 peak of `threads`
 * threads. Returns ZT_OK. */
int zt_peak_report(FILE *out, int threads);

#endif
