/* kernels.h - the compute kernels of zerotrain, each op's forward and backward side by side in
 * src/kernels/<op>.c (llm.c's layout). Kernels are pure functions of their arguments: no
 * allocation, no globals, no errors (shapes are checked by the caller). They are threaded with
 * OpenMP over a static partition, so that a given thread count always gives the same bits. All
 * but matmul give the same bits for any thread count too (every reduction is owned by one thread
 * and runs in a fixed order); matmul's may change with the thread count (OpenBLAS 0.3.21 with its
 * Haswell kernels blocks single- and multi-threaded products differently; its Cooperlake ones
 * did not on the shapes tested). Call them outside any OpenMP parallel
 * region (inside one they run on one thread). Vector helpers: vecmath.h (internal).
 *
 * Shapes: B batch, T sequence length, C channels, OC output channels, NH heads, V vocabulary,
 * N = B*T rows. Argument order: outputs first, then saved values, inputs, weights, sizes; in a
 * backward the gradients come first. Parameter gradients accumulate (+=); activation gradients
 * are assigned (=) unless the comment says +=.
 *
 * Every file here but gemm.c and dispatch.c is compiled once per instruction-set level (avx2,
 * avx512, avx512_bf16: core/cpu_isa.h) and dispatch.c sends each call to the copy of the level
 * chosen at start (ZT_ISA, else the CPU's best): one build runs on every x86-64-v3 CPU.
 */
#ifndef ZT_KERNELS_H
#define ZT_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- encoder.c: token + position embedding ------------------------------------------------- */
/* Positions. pos (B,T) is each token's position in its document (zt_batch.positions: packed
 * sequences restart at 0 where a document starts), or NULL: token (b,t) is at position t. The
 * position row of token (b,t) is wpe[pos[b,t]] (wpe[t] without pos); the caller checks that every
 * pos < maxT. */
/* out (B,T,C) = wte[inp[b,t]] + wpe[position].  inp (B,T), wte (V,C), wpe (maxT,C), or NULL: no
 * position table (Llama's token embedding; dwpe NULL in backward then). */
void encoder_forward(float *out, const int32_t *inp, const float *wte, const float *wpe, int B,
                     int T, int C, const int32_t *pos);
/* dwte += scatter of dout by token id, dwpe += scatter of dout by position (the sum over b of
 * dout without pos). dout (B,T,C); either may be NULL (a frozen parameter: skipped). Deterministic:
 * threads split the channel dimension, each row's additions happen in (b,t) order. */
/* The same from bf16 tables (bf16-low's parameters, uint16_t bits): each row is widened (exact)
 * and added in fp32, so the bits equal encoder_forward's on fp32 tables holding those values. */
void encoder_forward_bf16(float *out, const int32_t *inp, const uint16_t *wte, const uint16_t *wpe, int B,
                          int T, int C, const int32_t *pos);
void encoder_backward(float *dwte, float *dwpe, const float *dout, const int32_t *inp, int B, int T,
                      int C, const int32_t *pos);
/* Vocabulary-parallel (one part of a table cut by rows, docs/parallelism.md): the table holds rows
 * [v0, v0 + vn) of the vocabulary. Lookup: out (B,T,C) = the token's row when this part holds it,
 * else zeros (the parts' outputs sum to encoder_forward's without positions); from fp32 rows, or
 * bf16 rows widened (exactly one of wte, wte16 given). Positions: out += wpe[t] (fp32, or bf16
 * widened; the add encoder_forward does, so lookup + sum + positions has its bits); with pos, out
 * holds positions t0 .. t0+T of each sequence (sequence parallelism: the caller passes pos + t0
 * and ldp, the full sequence length, and wpe at row 0) and row (b,t) adds wpe[pos[b*ldp + t]];
 * without pos, wpe[t] of the table as passed (the caller offsets it by t0). Backward:
 * encoder_backward restricted to the tokens this part holds (dwte indexed from v0); encoder_backward
 * is this with v0 = 0 and every token held. */
void encoder_lookup_rows(float *out, const int32_t *inp, const float *wte, const uint16_t *wte16, int B, int T,
                         int C, int64_t v0, int64_t vn);
void encoder_add_positions(float *out, const float *wpe, const uint16_t *wpe16, int B, int T, int C,
                           const int32_t *pos, int ldp);
void encoder_backward_rows(float *dwte, float *dwpe, const float *dout, const int32_t *inp, int B, int T, int C,
                           int64_t v0, int64_t vn, const int32_t *pos);

/* ---- layernorm.c ------------------------------------------------------------------------------ */
/* out (N,C) = (inp - mean) * rstd * weight + bias; saves mean (N), rstd (N). eps = 1e-5. */
void layernorm_forward(float *out, float *mean, float *rstd, const float *inp, const float *weight,
                       const float *bias, int N, int C);
/* The same into out in the dtype kind (0: fp32, else a zt_lp_kind: the rounded rows, the bits of
 * layernorm_forward followed by zt_round_to_lp). */
void layernorm_forward_to(void *out, int kind, float *mean, float *rstd, const float *inp, const float *weight,
                          const float *bias, int N, int C);
/* res (N,C) = a + b (residual_forward), then layernorm_forward_to(out, kind, mean, rstd, res, ...). */
void residual_layernorm_forward(float *res, void *out, int kind, float *mean, float *rstd, const float *a,
                                const float *b, const float *weight, const float *bias, int N, int C);
/* dinp (N,C) += (accumulates into the residual stream's gradient); dweight, dbias (C) +=; either
 * may be NULL (a frozen parameter: skipped). */
void layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                        const float *inp, const float *weight, const float *mean, const float *rstd,
                        int N, int C);

/* ---- matmul.c: the Linear layer through BLAS ------------------------------------------------- */
/* out (N,OC) = inp (N,C) @ weight (OC,C)^T + bias (OC); bias may be NULL. */
void matmul_forward(float *out, const float *inp, const float *weight, const float *bias, int N,
                    int C, int OC);
/* The backward products' flags: ZT_MM_DINP_ADD adds the input gradient into dinp (else dinp =);
 * ZT_MM_DWEIGHT_SET assigns the weight gradient (dweight = the product: its storage may hold
 * anything, a gradient not yet written this micro-batch) instead of adding into it. */
enum { ZT_MM_DINP_ADD = 1u, ZT_MM_DWEIGHT_SET = 2u };
/* dinp (N,C) = dout @ weight (+= with ZT_MM_DINP_ADD); dweight (OC,C) += dout^T @ inp (= with
 * ZT_MM_DWEIGHT_SET); dbias (OC) += column sums of dout. Any of dinp, dweight, dbias may be NULL
 * (skipped). */
void matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                     const float *inp, const float *weight, int N, int C, int OC, unsigned flags);

/* ---- matmul_lp.c: the Linear layer in low precision (precision modes, src/precision) ----------
 * ZT_LP_BF16: weight is bf16 (uint16_t); the products run on oneDNN's bf16 kernels with fp32
 * accumulation and fp32 results. ZT_LP_FP16: weight is fp32 holding fp16 values (this CPU has no
 * fp16 arithmetic); the products run in fp32, like fp16 tensor cores with fp32 accumulation.
 * Rounding is to nearest-even (fp16: overflow becomes infinity, as in fp16 storage).
 * The input is rounded once, in forward, into inp_lp: the caller keeps it (a unit's saved
 * activation) and hands it to backward, which multiplies by it as it is. Backward rounds dout
 * into staging (matmul_lp_staging_bytes); dbias sums the fp32 dout, as matmul_backward does. */
typedef enum { ZT_LP_BF16 = 1, ZT_LP_FP16 = 2 } zt_lp_kind;
/* bytes of an element of an operand in compute kind (0: fp32): bf16 2; fp16's values (held in fp32)
 * and fp32 4 */
static inline size_t zt_lp_elem_bytes(int kind) { return kind == ZT_LP_BF16 ? 2 : 4; }
/* Bytes of staging matmul_backward_lp needs: rnd(dout) (N,OC). */
size_t matmul_lp_staging_bytes(zt_lp_kind kind, int N, int OC);
/* Floats that n elements of a Linear's saved input take in a unit's saved buffer (float array):
 * kind 0 (fp32 compute) n floats, else the rounded operand (bf16: 2 bytes, fp16 values: 4 bytes
 * each); padded to 64 bytes so that the next buffer stays 64-byte aligned. */
size_t matmul_saved_input_floats(int kind, size_t n);
/* inp_lp (N,C) = rnd(inp); out (N,OC) = inp_lp @ weight^T + bias (bias may be NULL). inp_lp holds
 * matmul_saved_input_floats(kind, N*C) floats. inp NULL: inp_lp already holds rnd(inp). */
void matmul_forward_lp(float *out, void *inp_lp, const float *inp, const void *weight,
                       const float *bias, int N, int C, int OC, zt_lp_kind kind);
/* dinp (N,C) = rnd(dout) @ weight (+= with ZT_MM_DINP_ADD); dweight (OC,C) += rnd(dout)^T @
 * inp_lp (= with ZT_MM_DWEIGHT_SET), inp_lp the forward's rounded input; dbias (OC) += column
 * sums of dout. Any of dinp, dweight, dbias may be NULL (skipped). dout NULL (then dbias NULL):
 * staging holds rnd(dout) already (written by the kernel that made it). */
void matmul_backward_lp(float *dinp, float *dweight, float *dbias, const float *dout,
                        const void *inp_lp, const void *weight, int N, int C, int OC,
                        unsigned flags, zt_lp_kind kind, void *staging);
/* dbias (OC) += column sums of dout (N,OC): matmul_backward's, shared. */
void matmul_dbias(float *dbias, const float *dout, int N, int OC);
/* The n fp32 values at flat indices [off, off+n) of an (N,OC) array an elementwise kernel makes:
 * written into buf (n <= 128 floats; it may be the fp32 output itself, so the kernel must allow
 * writing where it reads) and returned, or pointed at; one row's at most. */
typedef const float *(*matmul_rows_fn)(float *buf, const void *ctx, size_t off, int n);
/* dbias (OC) += column sums of the (N,OC) values row() gives (row NULL: ctx is that fp32 array),
 * matmul_dbias's bits, and out (N,OC) (NULL: not written) = those values in the dtype kind (0:
 * fp32, else a zt_lp_kind: zt_round_to_lp's bits); in one pass, in matmul_dbias's partition (column
 * blocks over threads, each block's rows in order). An fp32 out may be ctx's own array. reads0,
 * reads1: the (N,OC) fp32 arrays row() reads at the same offsets (NULL: none; ignored when row is
 * NULL), fetched a few rows ahead of the walk. */
void matmul_dbias_rows(float *dbias, void *out, int kind, matmul_rows_fn row, const void *ctx,
                       const float *reads0, const float *reads1, int N, int OC);

/* ---- lora.c: a LoRA adapter beside a Linear -------------------------------------------------
 * out (N,OC) += scale · drop(x)·Aᵀ·Bᵀ, A (r,C), B (OC,r). kind 0: x, A, B fp32; kind ZT_LP_BF16 /
 * ZT_LP_FP16: x is the Linear's rounded input (matmul_forward_lp's inp_lp), A and B compute copies,
 * the products round their operands as matmul_lp.c's. drop keeps element i with probability 1-p
 * (lora_dropout_keep(key, i, p)) and scales it by 1/(1-p); p = 0 or key = 0: no dropout. Nothing
 * is saved: backward recomputes drop(x)·Aᵀ and the mask. scratch: lora_scratch_floats(N, C, r, p)
 * floats, 64-byte aligned, undefined on entry and exit. */
size_t lora_scratch_floats(int N, int C, int r, float p);
bool lora_dropout_keep(uint64_t key, size_t i, float p);
void lora_forward(float *out, float *scratch, const void *x, const void *A, const void *B, float scale, float p,
                  uint64_t key, int N, int C, int OC, int r, int kind);
/* dx (N,C) += the adapter's input gradient; dA (r,C) +=, dB (OC,r) += (either may be NULL: frozen).
 * staging: matmul_lp_staging_bytes(kind, N, OC) bytes under lp (rnd(dout)); unused under fp32. */
void lora_backward(float *dx, float *dA, float *dB, float *scratch, void *staging, const float *dout, const void *x,
                   const void *A, const void *B, float scale, float p, uint64_t key, int N, int C, int OC, int r,
                   int kind);

/* ---- quant_nf4.c, quant_int8.c: a frozen weight stored quantized (QLoRA) ----------------------
 * NF4 (QLoRA's 4-bit NormalFloat, bitsandbytes' layout): n elements (a multiple of ZT_NF4_BLOCK)
 * in blocks of 64 with an absmax each, two 4-bit codes a byte (element 2j high nibble), the
 * absmaxes double-quantized (their mean subtracted, 8-bit dynamic codes in blocks of 256 with an
 * fp32 absmax each); q holds zt_nf4_bytes(n) bytes, 4-byte aligned. int8: one absmax per row,
 * codes round(w / (absmax / 127)); q holds zt_int8_bytes(rows, cols). Dequantizing into bf16 gives
 * the fp32 values rounded to nearest-even. quant_nf4.c's header says the layout byte by byte. */
#define ZT_NF4_BLOCK 64
#define ZT_NF4_BLOCK2 256
void zt_nf4_code(float code[16]);     /* the 16 NF4 values, ascending, -1 .. 1 */
void zt_dynamic_code(float code[256]); /* bitsandbytes' signed 8-bit dynamic map, ascending */
size_t zt_nf4_bytes(int64_t n);
void zt_nf4_quantize(uint8_t *q, const float *w, int64_t n);
void zt_nf4_dequantize(float *out, const uint8_t *q, int64_t n);
void zt_nf4_dequantize_bf16(uint16_t *out, const uint8_t *q, int64_t n);
void zt_nf4_absmax(float *absmax, const uint8_t *q, int64_t n); /* the n/64 dequantized absmaxes */
size_t zt_int8_bytes(int64_t rows, int64_t cols);
void zt_int8_quantize(uint8_t *q, const float *w, int64_t rows, int64_t cols);
void zt_int8_dequantize(float *out, const uint8_t *q, int64_t rows, int64_t cols);
void zt_int8_dequantize_bf16(uint16_t *out, const uint8_t *q, int64_t rows, int64_t cols);

/* ---- convert.c: fp32 <-> bf16 / fp16 ---------------------------------------------------------- */
void zt_f32_to_bf16(uint16_t *dst, const float *src, size_t n);   /* nearest-even */
void zt_bf16_to_f32(float *dst, const uint16_t *src, size_t n);   /* exact */
void zt_round_bf16(float *x, size_t n);                           /* in place, nearest-even */
/* The same conversions on the calling thread only (never an OpenMP team): the gradient
 * collectives' packing and summation, which run on the communication thread beside the compute */
void zt_f32_to_bf16_serial(uint16_t *dst, const float *src, size_t n);
void zt_bf16_to_f32_serial(float *dst, const uint16_t *src, size_t n);
/* d[i] = a[i] + b[i] in fp32, rounded to the nearest bf16 (zt_f32_to_bf16's rule) and kept as an
 * fp32 value: one node of the bf16 summation tree (src/comm/tree_sum.c). d may be a or b. Serial. */
void zt_add_round_bf16(float *d, const float *a, const float *b, size_t n);
/* The same for fp16 bit patterns (F16C: nearest-even, overflow to infinity, fp16 subnormals kept):
 * the fp16 gradient reduction. Serial. */
void zt_f32_to_fp16_serial(uint16_t *dst, const float *src, size_t n);
void zt_fp16_to_f32_serial(float *dst, const uint16_t *src, size_t n);
void zt_add_round_fp16(float *d, const float *a, const float *b, size_t n);
void zt_round_fp16(float *dst, const float *src, size_t n);       /* nearest-even, inf past 65504 */
/* dst = src in the compute format of kind: bf16 bits (uint16_t), or fp32 holding fp16 values */
void zt_round_to_lp(zt_lp_kind kind, void *dst, const float *src, size_t n);
/* The same on the calling thread alone (no OpenMP region: for a kernel's rows or chunks inside
 * its own parallel region). */
void zt_round_to_lp_serial(zt_lp_kind kind, void *dst, const float *src, size_t n);
/* in place, stochastic; element i draws its bits from (seed, first_index + i) */
void zt_round_bf16_stochastic(float *x, size_t n, uint64_t seed, uint64_t first_index);

/* ---- gemm_packed_bf16.c: the bf16 product below avx512_bf16, widened while packed ------------ */
/* C (M x N, ldc) = alpha op(A) op(B) + beta C (+ bias[n]) for bf16 A, B (op = transpose when
 * trans_*), fp32 sums, on `threads` threads (one inside a parallel region); work: the shape's
 * zt_gemm_bf16_packed_work_floats(M, N, K, threads) floats, 64-byte aligned. An element's bits
 * depend on K and the inputs only, the same on every level (gemm.h's zt_gemm_bf16 calls it on the
 * avx2 and avx512 levels). */
void zt_gemm_bf16_packed(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const uint16_t *A, int lda,
                         const uint16_t *B, int ldb, float beta, float *C, int ldc, const float *bias, float *work,
                         int threads);
size_t zt_gemm_bf16_packed_work_floats(int M, int N, int K, int threads);

/* ---- dispatch.c: which instruction-set level the kernels run ---------------------------------- */
struct zt_error;
/* The level in use (core/cpu_isa.h's zt_isa): chosen before main from ZT_ISA, else the CPU's best
 * (a ZT_ISA the CPU cannot run, or an unknown name, leaves the best and is reported by
 * zt_kernels_init). */
int zt_kernels_isa(void);
/* ZT_OK when ZT_ISA (if set) named a level this CPU runs and it is in use; else ZT_ERR_USAGE naming
 * the missing features (the CLI calls it first and exits 2). */
int zt_kernels_init(struct zt_error *err);
/* Switches every kernel to `isa` (tests: each path on one CPU). Not while a kernel runs; the bf16
 * products follow (gemm.h). ZT_ERR_USAGE when the CPU lacks it. */
int zt_kernels_select(int isa, struct zt_error *err);
/* "avx512_bf16 (kernels x86-64-v4+avx512bf16)"-style one-line description of the kernels' path */
const char *zt_kernels_path(void);

/* ---- fma_peak.c: one core's peak on the kernels' path ------------------------------------------ */
/* FLOP/s of independent FMAs (fp32) / vdpbf16ps (bf16) on the calling thread; bf16 0 where the
 * path has no AVX512_BF16 */
double zt_measure_core_fp32_flops(void);
double zt_measure_core_bf16_flops(void);

/* ---- stream_copy.c: copies past the caches ---------------------------------------------------- */
/* dst[0, bytes) = src[0, bytes), dst's whole 64-byte lines with streaming stores (any alignment);
 * call zt_streaming_fence before a store that publishes the bytes to another core */
void zt_copy_streaming(void *dst, const void *src, size_t bytes);
void zt_streaming_fence(void);

/* ---- attention.c: causal multi-head self-attention -------------------------------------------- */
/* Packed documents (both attention files). pos (B,T) or NULL is zt_batch.positions: query t of
 * row b sees the keys t - pos[b,t] .. t (its document's, causally) instead of 0 .. t; each
 * 0 <= pos[b,t] <= t (the engine checks the batch). NULL: plain causal attention, the same bits
 * as before positions existed. A packed row computes what each of its documents computes alone,
 * up to the summation order of the tiles (tests/test_flash_attention.c states the bounds). */
/* qkv (B,T,3C) holds [q | k | v] per token, head h at channels h*hs..(h+1)*hs, hs = C/NH.
 * out (B,T,C); att (B,NH,T,T) saves the softmax probabilities (entries above the diagonal, and
 * before the document's start with pos, are 0). out may be NULL: then only att is computed, with
 * the same bits (activation recomputation). */
void attention_forward(float *out, float *att, const float *qkv, int B, int T, int C, int NH,
                       const int32_t *pos);
/* Floats of scratch attention_backward needs: min(omp_get_max_threads(), B*NH) * T * T, a (T,T)
 * dP buffer per thread. It depends on the OpenMP thread setting: ask under the setting that the
 * backward will run with (attention_backward never uses more threads than it sized for then). */
size_t attention_scratch_floats(int B, int T, int C, int NH);
/* dqkv (B,T,3C) = d loss / d qkv (assigned). scratch: attention_scratch_floats(B,T,C,NH). It takes
 * no positions: att holds 0 wherever the forward masked, and the masked entries contribute 0. */
void attention_backward(float *dqkv, float *scratch, const float *dout, const float *qkv,
                        const float *att, int B, int T, int C, int NH);

/* Grouped-query attention on separate q (B,T,NH*hs) with row stride sq and k, v (B,T,NKV*hs) with
 * row stride skv; NKV divides NH, query head h reads KV head h / (NH/NKV). out (B,T,NH*hs) (or
 * NULL: att only), att (B,NH,T,T) as attention_forward. attention_forward is this with NKV = NH,
 * q/k/v = qkv + 0/C/2C, sq = skv = 3C. */
void attention_gqa_forward(float *out, float *att, const float *q, const float *k, const float *v,
                           int B, int T, int NH, int NKV, int hs, int sq, int skv, const int32_t *pos);
/* Scratch of attention_gqa_backward: min(omp_get_max_threads(), B*NKV) * T * T floats. */
size_t attention_gqa_scratch_floats(int B, int T, int NKV);
/* dq (stride sq), dk, dv (stride skv) = d loss / d q, k, v (assigned; dk and dv are sums over
 * the NH/NKV query heads that share them). */
void attention_gqa_backward(float *dq, float *dk, float *dv, float *scratch, const float *dout,
                            const float *q, const float *k, const float *v, const float *att, int B,
                            int T, int NH, int NKV, int hs, int sq, int skv);

/* ---- flash_attention.c: causal attention in O(T) memory (online softmax, FlashAttention-2) ----- */
/* The same attention as attention.c's without any (T,T) matrix: forward saves its output and the
 * per-row logsumexp lse (B,NH,T) of the scaled scores; backward recomputes the probabilities tile
 * by tile from q, k, lse and reads the output (D = rowsum(dO * O)). scratch: per thread, sized by
 * flash_attention_scratch_floats under the OpenMP thread setting both kernels run with (O(T)).
 * Bits do not depend on the thread count. pos: packed documents as attention.c's (the same
 * masks), and the key tiles wholly before a query tile's first document start are not visited
 * (forward), nor the query rows after a key block's last reader (backward). bf16: the products (Q Kᵀ, P V; backward also dO Vᵀ,
 * Pᵀ dO, dSᵀ Q, dS K) take their operands rounded to bf16 (nearest-even) and accumulate in fp32
 * (AVX512_BF16's vdpbf16ps, or its emulation); the softmax stays fp32. false: all fp32. The
 * scratch size serves both. */
size_t flash_attention_scratch_floats(int B, int T, int NH, int NKV, int hs);
/* q (B,T,NH*hs) row stride sq, k, v (B,T,NKV*hs) row stride skv (query head h reads KV head
 * h / (NH/NKV)); out (B,T,NH*hs) (row stride NH*hs) and lse (B,NH,T) assigned. */
void flash_attention_gqa_forward(float *out, float *lse, float *scratch, const float *q,
                                 const float *k, const float *v, int B, int T, int NH, int NKV,
                                 int hs, int sq, int skv, bool bf16, const int32_t *pos);
/* dq (stride sq), dk, dv (stride skv) = d loss / d q, k, v (assigned; dk and dv sum the NH/NKV
 * query heads sharing them) from dout (B,T,NH*hs), out and lse as the forward wrote them. */
void flash_attention_gqa_backward(float *dq, float *dk, float *dv, float *scratch,
                                  const float *dout, const float *q, const float *k, const float *v,
                                  const float *out, const float *lse, int B, int T, int NH, int NKV,
                                  int hs, int sq, int skv, bool bf16, const int32_t *pos);
/* GPT-2's fused qkv (B,T,3C) as attention_forward: the GQA kernels with NKV = NH, strides 3C */
void flash_attention_forward(float *out, float *lse, float *scratch, const float *qkv, int B, int T,
                             int C, int NH, bool bf16, const int32_t *pos);
/* dqkv (B,T,3C) assigned */
void flash_attention_backward(float *dqkv, float *scratch, const float *dout, const float *qkv,
                              const float *out, const float *lse, int B, int T, int C, int NH,
                              bool bf16, const int32_t *pos);

/* ---- flash_attention.c, in blocks: a block of query rows against a block of keys (context
 * parallelism: docs/parallelism.md; the whole-sequence kernels above are the case q0 = k0 = 0,
 * Tq = Tk = T, one code path) ---------------------------------------------------------------------
 * A rank of a context-parallel group holds some query rows of each sequence and sees the keys a
 * block at a time (all of them gathered: allgather mode; one peer's at a time: ring mode). Rows
 * and keys carry their indices in the whole sequence: query rows q0 .. q0+Tq-1, keys k0 .. k0+Tk-1.
 * Key j is visible to query i when j <= i and, with pos, j >= i - pos[b, i] (packed documents);
 * pos (B, pos_ld) is indexed by the whole sequence's index (pos_ld >= the largest index + 1), or
 * NULL: plain causal. q (B,Tq,NH*hs) row stride sq; k, v (B,Tk,NKV*hs) row stride skv; query head h
 * reads KV head h / (NH/NKV). bf16 as flash_attention_gqa_forward's. Bits do not depend on the
 * thread count. q0, k0 >= 0 any, Tq, Tk >= 0 (no keys: every row sees none). The key tiles start at k0 + multiples of
 * the forward's 64 (FA_BR) and the backward's 128 (FA_BK), the query tiles at q0 + multiples of
 * 64 / 128 (FA_BQ): with q0 and k0 multiples of FLASH_BLOCK_ALIGN they are the whole sequence's.
 * Scratch (floats, under the OpenMP thread setting the kernels run with) O(Tq + Tk). */
size_t flash_attention_block_scratch_floats(int B, int Tq, int Tk, int NH, int NKV, int hs);
/* out (B,Tq,NH*hs) (row stride NH*hs) and lse (B,NH,Tq) assigned: the attention of each row over
 * the visible keys of this block alone; a row that sees none of them gets out 0 and lse -INFINITY.
 * With k0 = 0, Tk = q0 + Tq and q0 a multiple of FLASH_BLOCK_ALIGN, every row is bit-identical to
 * the same row of flash_attention_gqa_forward over the whole sequence (same tiles, same order). */
#define FLASH_BLOCK_ALIGN 128
void flash_attention_block_forward(float *out, float *lse, float *scratch, const float *q, const float *k,
                                   const float *v, int B, int q0, int Tq, int k0, int Tk, int NH, int NKV,
                                   int hs, int sq, int skv, bool bf16, const int32_t *pos, int pos_ld);
/* out, lse (the result so far) merged with a block's out_b, lse_b (B,Tq,NH*hs)/(B,NH,Tq): the
 * online softmax across blocks, lse' = log(e^lse + e^lse_b), out' = out e^(lse - lse') +
 * out_b e^(lse_b - lse'); -INFINITY on either side takes the other unchanged (start from lse all
 * -INFINITY to take the first block as it is). lse' and the weights in double, each rounded once;
 * merging in another order differs by a few roundings (tests/test_flash_block.c states the bound). */
void flash_attention_merge(float *out, float *lse, const float *out_b, const float *lse_b, int B, int Tq,
                           int NH, int hs);
/* The backward of one block given out and lse of the whole row (merged over every block: D =
 * rowsum(dO * O) from them): dq (B,Tq, stride sq) accumulated (+=: the caller zeroes it once for
 * all blocks), dk, dv (B,Tk, stride skv) assigned: this block's keys' gradients from these query
 * rows (summed over the NH/NKV query heads sharing them). dout (B,Tq,NH*hs). With k0 = 0,
 * Tk = q0 + Tq and q0 a multiple of FLASH_BLOCK_ALIGN, dq (from a zeroed dq) is bit-identical to the
 * rows of flash_attention_gqa_backward's dq over the whole sequence. */
void flash_attention_block_backward(float *dq, float *dk, float *dv, float *scratch, const float *dout,
                                    const float *q, const float *k, const float *v, const float *out,
                                    const float *lse, int B, int q0, int Tq, int k0, int Tk, int NH, int NKV,
                                    int hs, int sq, int skv, bool bf16, const int32_t *pos, int pos_ld);

/* ---- rmsnorm.c: root-mean-square norm (Llama) ------------------------------------------------ */
/* out (N,C) = inp * rstd * weight, rstd (N) = 1/sqrt(mean(inp²) + eps), saved. */
void rmsnorm_forward(float *out, float *rstd, const float *inp, const float *weight, float eps,
                     int N, int C);
/* The same into out in the dtype kind (0: fp32, else a zt_lp_kind: the rounded rows, the bits of
 * rmsnorm_forward followed by zt_round_to_lp). */
void rmsnorm_forward_to(void *out, int kind, float *rstd, const float *inp, const float *weight, float eps,
                        int N, int C);
/* res (N,C) = a + b (residual_forward), then rmsnorm_forward_to(out, kind, rstd, res, ...). */
void residual_rmsnorm_forward(float *res, void *out, int kind, float *rstd, const float *a, const float *b,
                              const float *weight, float eps, int N, int C);
/* dinp (N,C) += (accumulates into the residual stream's gradient); dweight (C) +=, or NULL (frozen). */
void rmsnorm_backward(float *dinp, float *dweight, const float *dout, const float *inp,
                      const float *weight, const float *rstd, int N, int C);

/* ---- rope.c: rotary position embedding (Llama, rotate_half layout) --------------------------- */
/* inv_freq (hs/2) = theta^(-2i/hs); factor > 0 applies Llama 3's scaling (low/high_freq_factor,
 * original_max_pos; transformers' _compute_llama3_parameters); factor <= 0: none. */
void rope_inv_freq(float *inv_freq, int hs, double theta, double factor, double low_freq_factor,
                   double high_freq_factor, int original_max_pos);
/* x (B,T,nh,hs) rotated in place by the position of token (b,t): pos[b,t] (zt_batch.positions, a
 * packed document's own position), or t when pos is NULL; hs even. A position's angles are the same
 * bits whichever row holds it. */
void rope_forward(float *x, const float *inv_freq, int B, int T, int nh, int hs, const int32_t *pos);
/* dx (B,T,nh,hs): the gradient through rope_forward, in place (the inverse rotation). */
void rope_backward(float *dx, const float *inv_freq, int B, int T, int nh, int hs, const int32_t *pos);
/* q (B,T,NH,hs) and k (B,T,NKV,hs) in one call, each position's angles computed once for both:
 * the same bits as rope_forward on each (and rope_backward_qk as rope_backward). */
void rope_forward_qk(float *q, float *k, const float *inv_freq, int B, int T, int NH, int NKV, int hs,
                     const int32_t *pos);
void rope_backward_qk(float *dq, float *dk, const float *inv_freq, int B, int T, int NH, int NKV, int hs,
                      const int32_t *pos);

/* ---- swiglu.c: Llama's gated MLP activation ------------------------------------------------- */
/* out (n) = silu(gate) * up. out may alias neither input. */
void swiglu_forward(float *out, const float *gate, const float *up, size_t n);
/* The same into out in the dtype kind (0: fp32, else a zt_lp_kind: the bits of swiglu_forward
 * followed by zt_round_to_lp). */
void swiglu_forward_to(void *out, int kind, const float *gate, const float *up, size_t n);
/* dgate = dout * up * silu'(gate), dup = dout * silu(gate) (assigned). dgate may be dout. */
void swiglu_backward(float *dgate, float *dup, const float *dout, const float *gate, const float *up,
                     size_t n);
/* The same with dgate and dup written in the dtype kind (0: fp32, as swiglu_backward; else a
 * zt_lp_kind: swiglu_backward's bits followed by zt_round_to_lp's). Under a kind they alias
 * nothing. */
void swiglu_backward_to(void *dgate, void *dup, int kind, const float *dout, const float *gate, const float *up,
                        size_t n);

/* ---- moe_router.c, moe_permute.c, grouped_gemm.c: a mixture of experts' feed-forward ----------
 * N tokens, E experts, k chosen per token (slot t*k + j: token t's j-th choice), R <= N*k rows of
 * the permuted experts' input (the slots sorted by expert, then token). */
/* probs (N,E) = softmax(logits (N,E)), lse (N) = logsumexp; idx, w (N,k): the top-k experts in
 * descending probability (ties: the lower index) and their weights, renormalized to sum 1 with
 * norm_topk (Mixtral's), else the probabilities themselves. */
void moe_router_forward(float *probs, float *lse, int32_t *idx, float *w, const float *logits, int N, int E, int k,
                        bool norm_topk);
/* The routing plan of idx (N,k): counts (E) the slots choosing each expert; offsets (E+1) the
 * first row of each expert's block, each block its kept slots padded to a multiple of align rows
 * (R = offsets[E] <= N*k + E*(align-1)); order (R) the slot of each row, -1 for padding; row_of
 * (N*k) each slot's row, -1 where it is dropped: capacity > 0 keeps an expert's first `capacity`
 * tokens (0: dropless). Returns the slots dropped. Serial, O(R + N*k + E). */
int moe_route_plan(int32_t *counts, int32_t *offsets, int32_t *order, int32_t *row_of, const int32_t *idx, int N,
                   int E, int k, int capacity, int align);
/* aux = E * sum_e (counts_e / Nall) * (sum_t probs_te / Nall) (load balancing); z = sum_t lse_t^2 / Nall,
 * over these N tokens: with Nall = N and counts these tokens' the losses of these N; with the N tokens one
 * part of Nall (context parallelism) and counts the whole's, this part's share of the whole's losses
 * (the shares of the parts add up to them) */
void moe_router_losses(double *aux, double *z, const float *probs, const float *lse, const int32_t *counts, int N,
                       int Nall, int E);
/* dlogits (N,E) (assigned) from dw (N,k), the gradient of the top-k weights w (NULL: none), plus
 * aux_scale times the gradient of the load-balancing loss and z_scale times the z loss's (counts
 * and Nall as moe_router_losses'). */
void moe_router_backward(float *dlogits, const float *dw, const float *probs, const float *lse, const float *w,
                         const int32_t *idx, const int32_t *counts, int N, int Nall, int E, int k, bool norm_topk,
                         float aux_scale, float z_scale);
/* dx (rows,C) += dy (rows,E; row stride ldy) @ W (E,C): the router's (or a shared expert gate's)
 * input gradient, each element one chain of FMAs over the E experts in order onto dx's value: its
 * bits depend on the row alone, not on how many rows a call takes (sequence parallelism hands a
 * part its rows only, and a GEMM's order may change with M); threads split the rows. */
void moe_router_dinp(float *dx, const float *dy, int ldy, const float *W, int rows, int C, int E);
/* xp (rows,C): xp[r] = x[order[r] / k], zeros where order[r] < 0 (padding); elements of the compute
 * dtype kind (0: fp32; ZT_LP_BF16: 2-byte bf16 rows; ZT_LP_FP16: fp16 values in fp32): copied as bytes */
void moe_gather_rows(void *xp, const void *x, const int32_t *order, int rows, int k, int C, int kind);
/* out (N,C) = sum_j w_tj y[row_of(t,j)] (assigned; dropped slots add nothing) */
void moe_combine_forward(float *out, const float *y, const float *w, const int32_t *row_of, int N, int k, int C);
/* dy (rows,C) = w_tj dout_t at row_of(t,j) (assigned), dw (N,k) = <dout_t, y[row_of(t,j)]> (0: dropped);
 * dy's padding rows (order[r] < 0) zeroed */
void moe_combine_backward(float *dy, float *dw, const float *dout, const float *y, const float *w,
                          const int32_t *row_of, const int32_t *order, int rows, int N, int k, int C);
/* dx (N,C) = sum_j dxp[row_of(t,j)] (assigned) */
void moe_scatter_rows(float *dx, const float *dxp, const int32_t *row_of, int N, int k, int C);
/* out (rows,OC): rows [offsets[e], offsets[e+1]) = in's rows @ W_e^T, W (E*OC, C) stacked, W_e its
 * e-th (OC,C) block. kind 0: fp32 in and W; else a zt_lp_kind: in is the rounded operand
 * (matmul_saved_input_floats's layout) and W the compute copy, as matmul_forward_lp takes them. */
void moe_grouped_forward(float *out, const void *in, const void *W, const int32_t *offsets, int E, int C, int OC,
                         int kind);
/* din (rows,C) = dout @ W_e per group (+= with ZT_MM_DINP_ADD; NULL: skipped); dW_e += dout^T @ in
 * (NULL: frozen; = with ZT_MM_DWEIGHT_SET, every dW_e then written: 0 for an expert with no rows);
 * in, W and kind as moe_grouped_forward's. Under a kind, staging holds
 * matmul_lp_staging_bytes(kind, offsets[E], OC) bytes (rnd(dout); dout NULL: staging holds rnd(dout)
 * already); unused under fp32. */
void moe_grouped_backward(float *din, float *dW, const float *dout, const void *in, const void *W,
                          const int32_t *offsets, int E, int C, int OC, unsigned flags, int kind, void *staging);

/* ---- ns_product.c: Muon's Newton-Schulz products, packed, each element's bits fixed -----------
 * Every element is one chain of FMAs over k in order from 0, whatever the threads, tiles or level
 * (ns_product.c says how). `pack` holds zt_ns_pack_floats(r, n) floats (n >= r, r x n the matrix
 * being orthogonalized; enough for both products on it and on its r x r squares). */
#define ZT_NS_NR_MAX 64 /* the widest tile's columns of any level: the packing bound */
static inline size_t zt_ns_pack_floats(int64_t r, int64_t n)
{
    return (size_t)(r + ZT_NS_NR_MAX) * (size_t)n;
}
/* C (r x r) = X X^T, X (r x n) row-major; symmetric: the upper triangle's tiles computed, then
 * mirrored (exact). With X symmetric (r x r), X X^T is X·X. */
void zt_ns_gram(float *C, const float *X, int64_t r, int64_t n, float *pack);
/* C (r x n) = B X, B (r x r) and X (r x n) row-major */
void zt_ns_mul(float *C, const float *B, const float *X, int64_t r, int64_t n, float *pack);

/* ---- gelu.c: GELU, tanh approximation ------------------------------------------------------- */
void gelu_forward(float *out, const float *inp, size_t N);
/* The same into out in the dtype kind (0: fp32, else a zt_lp_kind: gelu_forward's bits followed
 * by zt_round_to_lp's). */
void gelu_forward_to(void *out, int kind, const float *inp, size_t N);
/* dinp = gelu'(inp) * dout (assigned). dinp may be dout or inp (in place). */
void gelu_backward(float *dinp, const float *inp, const float *dout, size_t N);
/* The same over (N,OC) with dinp written in the dtype kind (0: fp32, as gelu_backward; else a
 * zt_lp_kind: gelu_backward's bits followed by zt_round_to_lp's: the next Linear's rounded output
 * gradient) and, dbias not NULL, dbias (OC) += the column sums of the fp32 dinp (matmul_dbias's
 * bits): one pass. Under a kind dinp aliases nothing; fp32 dinp may be dout or inp. */
void gelu_backward_to(void *dinp, int kind, float *dbias, const float *inp, const float *dout, int N, int OC);

/* ---- residual.c ------------------------------------------------------------------------------ */
/* out = a + b, N floats. out may be a or b (in place). */
void residual_forward(float *out, const float *a, const float *b, size_t N);

/* ---- crossentropy.c: softmax + cross-entropy, fused ----------------------------------------- */
/* logits (N,V) are turned into probabilities in place; losses (N) = -log p[target]. */
void softmax_xent_forward(float *losses, float *logits_to_probs, const int32_t *targets, int N,
                          int V);
/* probs (N,V) are turned into d loss / d logits in place: (p - onehot(target)) * dlosses[n]. */
void softmax_xent_backward(float *probs_to_dlogits, const int32_t *targets, const float *dlosses,
                           int N, int V);
/* The same three sweeps one at a time, for logits cut by vocabulary columns (each part holds
 * columns [v0, v0 + V) of every row; the caller combines the parts between the sweeps, Megatron's
 * vocab-parallel cross-entropy; one part and these in a row are softmax_xent_forward's bits):
 *   rowmax   mx[n] = max of row n
 *   exp      row n = exp(x - mx[n]) in place (mx: the max over every part); sums[n] = its sum
 *            (double, as the fused kernel); xt[n] = x[target - v0] - mx[n] when this part holds
 *            the target, else 0 (double)
 *   finish   row n *= 1/S[n] (S: the sum over every part); losses[n] = log(S[n]) - XT[n] (XT the
 *            target term summed over the parts: only its holder's is non-zero)
 * softmax_xent_backward_cols is the backward on the part: the target's -1 only where held. */
void softmax_xent_rowmax(float *mx, const float *logits, int N, int V);
void softmax_xent_exp(double *sums, double *xt, float *logits_to_e, const float *mx, const int32_t *targets,
                      int N, int V, int64_t v0);
void softmax_xent_finish(float *losses, float *e_to_probs, const double *S, const double *XT, int N, int V);
void softmax_xent_backward_cols(float *probs_to_dlogits, const int32_t *targets, const float *dlosses, int N,
                                int V, int64_t v0);
/* softmax_xent_backward_cols with d loss / d logits written into out in the dtype kind (0: fp32, out
 * may be probs; else a zt_lp_kind: the rounded values, the bits of softmax_xent_backward_cols
 * followed by zt_round_to_lp, and probs is left as it is). */
void softmax_xent_backward_to(void *out, int kind, const float *probs, const int32_t *targets, const float *dlosses,
                              int N, int V, int64_t v0);

#endif /* ZT_KERNELS_H */
