/* gemm.h - zerotrain's fp32 matrix product, C = alpha op(A) op(B) + beta C (+ bias), routed to
 * OpenBLAS sgemm or to a cached oneDNN matmul primitive. gemm.c says how the backend is chosen
 * (ZT_GEMM=openblas|onednn, else a fixed rule per machine) and why.
 *
 * Row-major, cblas semantics: op(A) is (M,K), op(B) is (K,N), C is (M,N); A is stored (M,K) with
 * leading dimension lda, or (K,M) when trans_a; B is stored (K,N) with ldb, or (N,K) when trans_b;
 * C (M,N) with ldc. beta = 0 overwrites C without reading it (NaNs in C do not leak).
 *
 * Contract: no allocation visible to the caller, no errors, never exit/abort. A oneDNN failure
 * (primitive creation, execution) makes that product run on OpenBLAS instead and is counted in
 * zt_gemm_stats.fallbacks, which the engine can report. Bits: for a given backend, shape,
 * transposes, alpha/beta, bias presence and OpenMP thread count the result is the same run to
 * run; the two backends give different bits (different blockings), so the backend is chosen once
 * per process and never by timing. Calls from inside an OpenMP parallel region run on OpenBLAS
 * (single-threaded there, like attention.c's per-head products), except zt_gemm_f32_serial's.
 */
#ifndef ZT_KERNELS_GEMM_H
#define ZT_KERNELS_GEMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
    ZT_GEMM_OPENBLAS = 0,
    ZT_GEMM_ONEDNN = 1,
} zt_gemm_backend;

/* C (M,N) = alpha op(A) op(B) + beta C. */
void zt_gemm_f32(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float *A,
                 int lda, const float *B, int ldb, float beta, float *C, int ldc);

/* C (M,N) = alpha op(A) op(B) + beta C + bias, bias (N) added to every row (NULL: none). */
void zt_gemm_f32_bias(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                      const float *A, int lda, const float *B, int ldb, float beta, float *C,
                      int ldc, const float *bias);

/* The fp32 product C (M,N) = alpha op(A) op(B) + beta C on the calling thread alone, for products
 * run side by side from an OpenMP parallel region (grouped_gemm.c: the experts, one a thread at a
 * time): on the oneDNN backend a single-threaded primitive from the thread's own cache (gemm.c,
 * "products on one thread each"), else single-threaded OpenBLAS. Its bits depend on the shape
 * (and the backend) only: the same from any thread, at any thread count, in a region or not. */
void zt_gemm_f32_serial(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float *A, int lda,
                        const float *B, int ldb, float beta, float *C, int ldc);
/* The same with M and/or K (runtime: ZT_GEMM_RUNTIME_M | ZT_GEMM_RUNTIME_K) left to each call: one
 * primitive for every value of them (oneDNN's gemm-based matmul, as fast as the fixed shape's at the
 * experts' shapes: bench/RESULTS.md), for products whose row counts change from call to call (the
 * experts' rows, which would otherwise make a primitive per count or be padded to a few). Bits: a
 * function of the shape given (M, N, K), as zt_gemm_f32_serial's; not those of zt_gemm_f32_serial
 * at the same shape (another kernel). runtime 0 is zt_gemm_f32_serial. */
enum { ZT_GEMM_RUNTIME_M = 1, ZT_GEMM_RUNTIME_K = 2 };
void zt_gemm_f32_serial_rows(unsigned runtime, bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                             const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc);

/* bf16 operands, fp32 result: C (M,N) = alpha op(A) op(B) + beta C + bias (NULL: none), A and B
 * bf16 bit patterns (uint16_t, the upper half of an fp32), the products exact and summed in fp32
 * (oneDNN's avx512_core_bf16 / AMX kernels) where the kernels' level has AVX512_BF16: always
 * oneDNN there, whichever the fp32 backend; where oneDNN refuses, reference loops (counted in
 * fallbacks). On the avx2 and avx512 levels: zerotrain's own packed GEMM, the operands widened to
 * fp32 as they are packed (gemm_packed_bf16.c; an element's bits depend on K and the inputs alone,
 * the same on both levels). Same bit rule as the fp32 products, per level. */
void zt_gemm_bf16(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const uint16_t *A,
                  int lda, const uint16_t *B, int ldb, float beta, float *C, int ldc,
                  const float *bias);

/* true where bf16 products run on oneDNN's bf16 kernels (the kernels' level has AVX512_BF16),
 * false where they are widened to fp32 */
bool zt_gemm_bf16_native(void);
/* One line naming the library and ISA the fp32 (bf16 false) or bf16 products run on, e.g.
 * "oneDNN avx512_core_bf16", "OpenBLAS Haswell", "widened to fp32 while packed, zerotrain avx2 6x16",
 * "widened to fp32, oneDNN avx512_core". Static storage. */
const char *zt_gemm_path(bool bf16);
/* The backend the products of this process go to, decided on the first call of any zt_gemm_
 * function (ZT_GEMM, then the per-machine rule) and fixed afterwards. */
zt_gemm_backend zt_gemm_backend_get(void);
/* "openblas" or "onednn": for `zerotrain bench` and logs. */
const char *zt_gemm_backend_name(void);
/* One line saying why, e.g. "auto: OpenBLAS core Haswell has no AVX-512 kernels, oneDNN ISA
 * avx512_core_bf16" or "ZT_GEMM=openblas"; it names an unrecognised ZT_GEMM value (then the
 * automatic rule applies). Static storage, valid for the process. */
const char *zt_gemm_backend_reason(void);

/* Counters since the process started (or since zt_gemm_stats_reset). */
typedef struct {
    long long calls_onednn;    /* oneDNN primitive executions (a product run in parts, see
                                  gemm.c, counts each part) */
    long long calls_openblas;  /* sgemm calls (backend, fallback or reroute; parts likewise) */
    long long created;         /* oneDNN matmul primitives created */
    long long cache_hits;      /* products that reused a cached primitive */
    long long evictions;       /* primitives dropped because the cache was full */
    long long fallbacks;       /* oneDNN failures (create or execute) answered by OpenBLAS */
    long long rerouted;        /* shapes sent to OpenBLAS by design on the oneDNN backend:
                                  oneDNN offered only its reference implementation, alpha != 1
                                  with a bias, K = 0, or a call inside a parallel region */
    long long products;        /* calls of the entry points (zt_gemm_f32/_bias, zt_gemm_bf16) */
    long long ns;              /* their wall time, nanoseconds, from entry to return (summed
                                  over threads for calls made inside parallel regions) */
    long long flops;           /* their 2·M·N·K */
} zt_gemm_stats;
void zt_gemm_stats_get(zt_gemm_stats *out);
void zt_gemm_stats_reset(void);

/* ---- for tests and benchmarks ---------------------------------------------------------------- */
/* Switch the backend of the process (before or between products, from the thread that makes
 * them); returns the previous one. The choice is otherwise fixed for the process. */
zt_gemm_backend zt_gemm_backend_set(zt_gemm_backend b);
/* Destroy every cached primitive (the next products create them again). */
void zt_gemm_cache_clear(void);
/* The rule alone, for tests: the backend for a ZT_GEMM value (NULL: unset), an OpenBLAS core
 * name, oneDNN's ISA name and whether that ISA is AVX2 or better (its x86 JIT kernels); why
 * gets the reason line. */
zt_gemm_backend zt_gemm_choose(const char *env, const char *core, const char *onednn_isa,
                               bool onednn_jit, char *why, size_t why_size);
/* Fault injection: the next n oneDNN primitive creations fail as if oneDNN had refused them. */
void zt_gemm_inject_create_failures(int n);

#endif /* ZT_KERNELS_GEMM_H */
