/* test_gemm.c - unit tests of src/kernels/gemm.c (gemm.h), the fp32 GEMM dispatch: both backends
 * (OpenBLAS, oneDNN) against a double reference on every transpose combination, beta 0 and 1,
 * with and without a bias, odd sizes (M, N, K from 1, 7, 33, 130, 1024), padded leading
 * dimensions, alpha/beta other than 0/1, and the W1 Linear shapes (GPT-2 124M at 1024 tokens);
 * bit-identical reruns (also after the primitive was evicted and created again); the primitive
 * cache (created once per key, hits, eviction at the bound); a oneDNN creation failure answered by
 * OpenBLAS and counted; oneDNN's split of big products into parts; calls from inside a parallel
 * region; the backend rule.
 *
 * Tolerance, as in test_kernels.c: |got - ref| <= rtol (|ref| + scale) element-wise, with
 * rtol = 4 u (2 + sqrt(K')), u = 2^-24, K' = K plus one term each for beta C and the bias, and
 * scale the RMS of the reference outputs, or the RMS over outputs of sqrt(sum of the squared
 * terms) where that is larger (it is the same for large random outputs; it keeps a lone output
 * whose terms cancelled, e.g. 1 x 1, from being judged against its own small size). Each output
 * is one dot product of K terms of random sign in either library; its rounding error random-walks
 * to ~u sqrt(K) relative to that scale. The W1 shapes are checked on 4096
 * sampled outputs (each a K-term double dot product) instead of all of them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <limits.h>
#include <malloc.h>
#include <math.h>
#include <omp.h>

#include "kernels/gemm.h"

/* ---- helpers --------------------------------------------------------------------------------- */

#define TEST_RNG_SEED 0x243F6A8885A308D3ull
#include "test_rng.h"

static float *falloc(size_t n)
{
    if (n > ((size_t)1 << 40))
        abort(); /* a test bug */
    float *p = malloc((n ? n : 1) * sizeof(float));
    assert_non_null(p);
    return p;
}

static double *dalloc(size_t n)
{
    double *p = calloc(n ? n : 1, sizeof(double));
    assert_non_null(p);
    return p;
}

static void fill(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (float)rng_uniform();
}

static const char *bname(zt_gemm_backend b) { return b == ZT_GEMM_ONEDNN ? "onednn" : "openblas"; }

/* Element (i, j) of op(X) where X is stored row-major with leading dimension ld, op(X) (rows, .) */
static double at(const float *X, int ld, bool trans, int i, int j)
{
    return trans ? X[(size_t)j * ld + i] : X[(size_t)i * ld + j];
}

/* double reference of one output: alpha op(A)[i,:] . op(B)[:,j] + beta C0[i,j] + bias[j];
 * *sq gets the sum of the squares of the terms added */
static double ref_one(bool ta, bool tb, int K, double alpha, const float *A, int lda,
                      const float *B, int ldb, double beta, const float *C0, int ldc,
                      const float *bias, int i, int j, double *sq)
{
    double s = 0.0, q = 0.0;
    for (int k = 0; k < K; k++) {
        double t = at(A, lda, ta, i, k) * at(B, ldb, tb, k, j);
        s += t;
        q += t * t;
    }
    double r = alpha * s;
    q *= alpha * alpha;
    if (beta != 0.0) {
        double c = beta * (double)C0[(size_t)i * ldc + j];
        r += c;
        q += c * c;
    }
    if (bias != NULL) {
        r += bias[j];
        q += (double)bias[j] * bias[j];
    }
    *sq = q;
    return r;
}

/* Compare got (M,N, ld ldc) with the reference on all outputs (sample = 0) or on `sample` random
 * ones; also checks that the padding columns of C were left alone. */
static void check_gemm(const char *what, bool ta, bool tb, int M, int N, int K, float alpha,
                       const float *A, int lda, const float *B, int ldb, float beta,
                       const float *C0, const float *got, int ldc, const float *bias, int sample)
{
    size_t n = sample > 0 ? (size_t)sample : (size_t)M * N;
    double *ref = dalloc(n), *val = dalloc(n), sq = 0.0, sqsum = 0.0;
    uint64_t saved = rng_state;
    for (size_t s = 0; s < n; s++) {
        int i = sample > 0 ? (int)(rng_next() % (uint64_t)M) : (int)(s / (size_t)N);
        int j = sample > 0 ? (int)(rng_next() % (uint64_t)N) : (int)(s % (size_t)N);
        ref[s] = ref_one(ta, tb, K, alpha, A, lda, B, ldb, beta, C0, ldc, bias, i, j, &sq);
        sqsum += sq;
        val[s] = got[(size_t)i * ldc + j];
    }
    rng_state = saved;
    double ss = 0.0;
    for (size_t s = 0; s < n; s++)
        ss += ref[s] * ref[s];
    /* the RMS of the outputs, or of the terms' root sum of squares where that is larger (a
     * single output whose terms cancelled is judged against the size of the terms) */
    double scale = fmax(sqrt(ss / (double)n), sqrt(sqsum / (double)n)), worst = 0.0;
    size_t worst_at = 0;
    for (size_t s = 0; s < n; s++) {
        double e = fabs(val[s] - ref[s]) / (fabs(ref[s]) + scale);
        if (!(e <= worst)) { /* also catches NaN */
            worst = e;
            worst_at = s;
            if (isnan(e))
                break;
        }
    }
    double kk = K + (beta != 0.0f) + (bias != NULL);
    double rtol = 4 * 0x1p-24 * (2 + sqrt(kk));
    if (sample > 0 || M * N >= 100000)
        print_message("  %-58s worst rel err %.2e (bound %.0e)\n", what, worst, rtol);
    if (!(worst <= rtol))
        fail_msg("%s: output %zu got %.9g ref %.9g (rel err %.3e > %.1e)", what, worst_at,
                 val[worst_at], ref[worst_at], worst, rtol);
    for (int i = 0; i < M; i++) /* padding of C untouched */
        for (int j = N; j < ldc; j++)
            if (memcmp(&got[(size_t)i * ldc + j], &C0[(size_t)i * ldc + j], sizeof(float)) != 0)
                fail_msg("%s: padding C[%d][%d] was written", what, i, j);
    free(ref), free(val);
}

static void assert_same_bits(const char *what, const float *a, const float *b, size_t n)
{
    if (memcmp(a, b, n * sizeof(float)) != 0) {
        size_t i = 0;
        while (i < n && memcmp(&a[i], &b[i], sizeof(float)) == 0)
            i++;
        fail_msg("%s: not bit-identical at %zu (%.9g vs %.9g)", what, i, (double)a[i],
                 (double)b[i]);
    }
}

/* One product with fresh random operands stored for (ta, tb) with leading-dimension padding pad,
 * C starting as NaN when beta == 0 (must not leak) and random otherwise; checked against the
 * reference on `sample` outputs (0: all), then rerun and compared bit for bit. */
static void run_case(zt_gemm_backend be, bool ta, bool tb, int M, int N, int K, float alpha,
                     float beta, bool with_bias, int pad, int sample)
{
    int lda = (ta ? M : K) + pad, ldb = (tb ? K : N) + pad, ldc = N + pad;
    size_t na = (size_t)(ta ? K : M) * lda, nb = (size_t)(tb ? N : K) * ldb, nc = (size_t)M * ldc;
    float *A = falloc(na), *B = falloc(nb), *C0 = falloc(nc), *C = falloc(nc), *C2 = falloc(nc);
    float *bias = with_bias ? falloc(N) : NULL;
    fill(A, na), fill(B, nb), fill(C0, nc);
    if (bias)
        fill(bias, N);
    if (beta == 0.0f) /* C is not read: NaNs there must not come out (the padding keeps them) */
        for (size_t i = 0; i < nc; i++)
            C0[i] = NAN;
    memcpy(C, C0, nc * sizeof(float));
    zt_gemm_backend_set(be);
    zt_gemm_f32_bias(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, bias);
    char what[160];
    snprintf(what, sizeof what, "%s %c%c %dx%dx%d a=%g b=%g%s%s", bname(be), ta ? 'T' : 'N',
             tb ? 'T' : 'N', M, N, K, (double)alpha, (double)beta, bias ? " +bias" : "",
             pad ? " padded" : "");
    check_gemm(what, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C0, C, ldc, bias, sample);
    memcpy(C2, C0, nc * sizeof(float));
    zt_gemm_f32_bias(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C2, ldc, bias);
    assert_same_bits(what, C, C2, nc);
    free(A), free(B), free(C0), free(C), free(C2), free(bias);
}

static const zt_gemm_backend backends[2] = {ZT_GEMM_OPENBLAS, ZT_GEMM_ONEDNN};

/* ---- tests ----------------------------------------------------------------------------------- */

/* every transpose combination x beta 0/1 x bias, M, N, K over {1, 7, 33, 130, 1024} (1024 at most
 * once per triple, and never all three: 1024^3 is the W1 test's business) */
static void test_products(void **state)
{
    (void)state;
    static const int sz[] = {1, 7, 33, 130, 1024};
    const int ns = (int)(sizeof sz / sizeof *sz);
    int cases = 0;
    for (int bi = 0; bi < 2; bi++)
        for (int mi = 0; mi < ns; mi++)
            for (int ni = 0; ni < ns; ni++)
                for (int ki = 0; ki < ns; ki++) {
                    int big = (sz[mi] == 1024) + (sz[ni] == 1024) + (sz[ki] == 1024);
                    if (big > 1)
                        continue;
                    for (int t = 0; t < 4; t++)
                        for (int v = 0; v < 4; v++) {
                            run_case(backends[bi], t & 1, t >> 1, sz[mi], sz[ni], sz[ki], 1.0f,
                                     (v & 1) ? 1.0f : 0.0f, v >> 1, 0, big ? 2048 : 0);
                            cases++;
                        }
                }
    print_message("  %d products checked\n", cases);
}

/* padded leading dimensions (strided operands, described with strides, no copies), alpha and
 * beta other than 0/1 (output scale, sum post-op scale), alpha != 1 with a bias (on oneDNN
 * rerouted to OpenBLAS by design) */
static void test_strides_and_scales(void **state)
{
    (void)state;
    for (int bi = 0; bi < 2; bi++)
        for (int t = 0; t < 4; t++) {
            run_case(backends[bi], t & 1, t >> 1, 33, 130, 7, 1.0f, 0.0f, true, 5, 0);
            run_case(backends[bi], t & 1, t >> 1, 130, 33, 257, 1.0f, 1.0f, false, 3, 0);
            run_case(backends[bi], t & 1, t >> 1, 7, 33, 130, 0.5f, 0.25f, false, 0, 0);
            run_case(backends[bi], t & 1, t >> 1, 33, 7, 130, -2.0f, 0.0f, false, 1, 0);
            run_case(backends[bi], t & 1, t >> 1, 33, 7, 130, 0.5f, 1.0f, true, 0, 0);
        }
    zt_gemm_stats st0, st1;
    zt_gemm_backend_set(ZT_GEMM_ONEDNN);
    zt_gemm_stats_get(&st0);
    run_case(ZT_GEMM_ONEDNN, false, true, 9, 10, 11, 0.5f, 0.0f, true, 0, 0);
    zt_gemm_stats_get(&st1);
    if (zt_gemm_backend_get() == ZT_GEMM_ONEDNN)
        assert_int_equal(st1.rerouted - st0.rerouted, 2);
}

/* The W1 Linear shapes in the layouts matmul.c calls (N = B*T = 1024 rows, weight (OC, C)):
 * forward inp (N,C) . W^T + bias, dinp = dout (N,OC) . W, dweight += dout^T . inp; sampled
 * against the reference, rerun bit for bit; on oneDNN also after the cache was cleared (the
 * primitive is created again and must give the same bits). */
static void test_w1_shapes(void **state)
{
    (void)state;
    static const int lin[][2] = {{768, 2304}, {768, 768}, {768, 3072}, {3072, 768}, {768, 50257}};
    const int N = 1024;
    for (int bi = 0; bi < 2; bi++)
        for (size_t s = 0; s < sizeof lin / sizeof *lin; s++) {
            int C = lin[s][0], OC = lin[s][1];
            bool lm = OC == 50257; /* no bias on the lm_head, like gpt2.c */
            run_case(backends[bi], false, true, N, OC, C, 1.0f, 0.0f, !lm, 0, 4096); /* fwd */
            run_case(backends[bi], false, false, N, C, OC, 1.0f, 0.0f, false, 0, 4096); /* dinp */
            run_case(backends[bi], true, false, OC, C, N, 1.0f, 1.0f, false, 0, 4096); /* dW */
        }
    /* a primitive created again gives the same bits */
    const int M = 1024, Nn = 2304, K = 768;
    float *A = falloc((size_t)M * K), *B = falloc((size_t)Nn * K), *bias = falloc(Nn);
    float *C1 = falloc((size_t)M * Nn), *C2 = falloc((size_t)M * Nn);
    fill(A, (size_t)M * K), fill(B, (size_t)Nn * K), fill(bias, Nn);
    zt_gemm_backend_set(ZT_GEMM_ONEDNN);
    zt_gemm_f32_bias(false, true, M, Nn, K, 1.0f, A, K, B, K, 0.0f, C1, Nn, bias);
    zt_gemm_cache_clear();
    zt_gemm_f32_bias(false, true, M, Nn, K, 1.0f, A, K, B, K, 0.0f, C2, Nn, bias);
    assert_same_bits("onednn qkv fwd after cache clear", C1, C2, (size_t)M * Nn);
    /* for the record: do the bits depend on the thread count? (allowed; printed, not checked) */
    int nt = omp_get_max_threads();
    for (int bi = 0; bi < 2 && nt > 1; bi++) {
        zt_gemm_backend_set(backends[bi]);
        zt_gemm_f32_bias(false, true, M, Nn, K, 1.0f, A, K, B, K, 0.0f, C1, Nn, bias);
        omp_set_num_threads(1);
        zt_gemm_f32_bias(false, true, M, Nn, K, 1.0f, A, K, B, K, 0.0f, C2, Nn, bias);
        omp_set_num_threads(nt);
        print_message("  %s qkv fwd, 1 vs %d threads: %s\n", bname(backends[bi]), nt,
                      memcmp(C1, C2, (size_t)M * Nn * 4) ? "bits differ" : "same bits");
    }
    free(A), free(B), free(bias), free(C1), free(C2);
}

/* oneDNN primitives: one creation per key, reuse afterwards, eviction at the bound */
static void test_cache(void **state)
{
    (void)state;
    if (zt_gemm_backend_set(ZT_GEMM_ONEDNN), zt_gemm_backend_get() != ZT_GEMM_ONEDNN)
        skip(); /* oneDNN has no engine here */
    enum { M = 33, N = 40, K = 17, MMAX = 100 };
    float *A = falloc(MMAX * K), *B = falloc(K * N), *bias = falloc(N);
    float *C = falloc(MMAX * N), *C1 = falloc(M * N);
    fill(A, MMAX * K), fill(B, K * N), fill(bias, N);
    zt_gemm_cache_clear();
    zt_gemm_stats_reset();
    zt_gemm_stats st;
    for (int r = 0; r < 5; r++)
        zt_gemm_f32(false, false, M, N, K, 1.0f, A, K, B, N, 0.0f, C, N);
    memcpy(C1, C, sizeof(float) * M * N);
    zt_gemm_stats_get(&st);
    assert_int_equal(st.created, 1);
    assert_int_equal(st.cache_hits, 4);
    assert_int_equal(st.calls_onednn, 5);
    assert_int_equal(st.calls_openblas, 0);
    /* the products' count, 2·M·N·K each, and their time (bench prints them per step) */
    assert_int_equal(st.products, 5);
    assert_int_equal(st.flops, 5LL * 2 * M * N * K);
    assert_true(st.ns > 0);
    /* each of beta, bias, transposes, shape, leading dimension makes a new key */
    zt_gemm_f32(false, false, M, N, K, 1.0f, A, K, B, N, 1.0f, C, N);
    zt_gemm_f32_bias(false, false, M, N, K, 1.0f, A, K, B, N, 0.0f, C, N, bias);
    zt_gemm_f32(false, true, M, K, N, 1.0f, C1, N, B, N, 0.0f, C, K);
    zt_gemm_f32(false, false, M - 1, N, K, 1.0f, A, K, B, N, 0.0f, C, N);
    zt_gemm_f32(false, false, M, N - 1, K, 1.0f, A, K, B, N, 0.0f, C, N);
    zt_gemm_stats_get(&st);
    assert_int_equal(st.created, 6);
    assert_int_equal(st.cache_hits, 4);
    /* 100 more keys (K - 1): the cache keeps a bounded number, evicting the least recently used */
    for (int m = 1; m <= MMAX; m++)
        zt_gemm_f32(false, false, m, N, K - 1, 1.0f, A, K, B, N, 0.0f, C, N);
    zt_gemm_stats_get(&st);
    assert_int_equal(st.created, 106);
    assert_true(st.evictions > 0);
    assert_true(st.evictions <= st.created);
    print_message("  106 keys: %lld created, %lld evicted (cache bound %lld)\n", st.created,
                  st.evictions, st.created - st.evictions);
    /* the first key was evicted: created again, same bits */
    zt_gemm_f32(false, false, M, N, K, 1.0f, A, K, B, N, 0.0f, C, N);
    zt_gemm_stats_get(&st);
    assert_int_equal(st.created, 107);
    assert_same_bits("recreated primitive", C1, C, M * N);
    assert_int_equal(st.fallbacks, 0);
    free(A), free(B), free(bias), free(C), free(C1);
}

/* a oneDNN creation failure: the product runs on OpenBLAS (same bits as the OpenBLAS backend),
 * is counted, and the key stays on OpenBLAS until the cache is cleared */
static void test_fallback(void **state)
{
    (void)state;
    if (zt_gemm_backend_set(ZT_GEMM_ONEDNN), zt_gemm_backend_get() != ZT_GEMM_ONEDNN)
        skip();
    enum { M = 70, N = 90, K = 50 };
    float *A = falloc(M * K), *B = falloc(N * K), *bias = falloc(N);
    float *Cb = falloc(M * N), *Cd = falloc(M * N), *Cf = falloc(M * N);
    fill(A, M * K), fill(B, N * K), fill(bias, N);
    zt_gemm_backend_set(ZT_GEMM_OPENBLAS);
    zt_gemm_f32_bias(false, true, M, N, K, 1.0f, A, K, B, K, 0.0f, Cb, N, bias);
    zt_gemm_backend_set(ZT_GEMM_ONEDNN);
    zt_gemm_cache_clear();
    zt_gemm_stats_reset();
    zt_gemm_inject_create_failures(1);
    zt_gemm_f32_bias(false, true, M, N, K, 1.0f, A, K, B, K, 0.0f, Cf, N, bias);
    zt_gemm_stats st;
    zt_gemm_stats_get(&st);
    assert_int_equal(st.fallbacks, 1);
    assert_int_equal(st.created, 0);
    assert_int_equal(st.calls_openblas, 1);
    assert_same_bits("fallback = OpenBLAS", Cb, Cf, M * N);
    zt_gemm_f32_bias(false, true, M, N, K, 1.0f, A, K, B, K, 0.0f, Cf, N, bias);
    zt_gemm_stats_get(&st);
    assert_int_equal(st.fallbacks, 1); /* counted once: the key is cached as OpenBLAS */
    assert_int_equal(st.calls_openblas, 2);
    assert_same_bits("fallback key stays on OpenBLAS", Cb, Cf, M * N);
    zt_gemm_cache_clear();
    zt_gemm_f32_bias(false, true, M, N, K, 1.0f, A, K, B, K, 0.0f, Cd, N, bias);
    zt_gemm_stats_get(&st);
    assert_int_equal(st.created, 1);
    assert_int_equal(st.calls_onednn, 1);
    free(A), free(B), free(bias), free(Cb), free(Cd), free(Cf);
}

/* oneDNN's shape policy: big products run as parts (K-slices for NN with a large B, row blocks
 * for TN with many rows, column blocks for TN with a large B); each case right against the
 * reference (beta and bias included), the number of parts as designed, and still right when
 * oneDNN refuses one of the parts (that part runs on OpenBLAS). */
static void run_parts(bool ta, int M, int N, int K, int parts, bool refuse_first)
{
    zt_gemm_backend_set(ZT_GEMM_ONEDNN);
    int lda = ta ? M : K;
    size_t na = (size_t)M * K, nb = (size_t)K * N, nc = (size_t)M * N;
    float *A = falloc(na), *B = falloc(nb), *C0 = falloc(nc), *C = falloc(nc), *bias = falloc(N);
    fill(A, na), fill(B, nb), fill(C0, nc), fill(bias, N);
    memcpy(C, C0, nc * sizeof(float));
    zt_gemm_cache_clear();
    zt_gemm_stats_reset();
    zt_gemm_stats st;
    zt_gemm_inject_create_failures(refuse_first ? 1 : 0);
    zt_gemm_f32_bias(ta, false, M, N, K, 1.0f, A, lda, B, N, 0.5f, C, N, bias);
    zt_gemm_inject_create_failures(0);
    zt_gemm_stats_get(&st);
    char what[96];
    snprintf(what, sizeof what, "onednn parts %cN %dx%dx%d%s", ta ? 'T' : 'N', M, N, K,
             refuse_first ? " (first part refused)" : "");
    check_gemm(what, ta, false, M, N, K, 1.0f, A, lda, B, N, 0.5f, C0, C, N, bias, 2048);
    assert_int_equal(st.calls_onednn + st.calls_openblas, parts);
    assert_int_equal(st.fallbacks, refuse_first ? 1 : 0);
    free(A), free(B), free(C0), free(C), free(bias);
}

static void test_parts(void **state)
{
    (void)state;
    if (zt_gemm_backend_set(ZT_GEMM_ONEDNN), zt_gemm_backend_get() != ZT_GEMM_ONEDNN)
        skip();
    run_parts(false, 64, 1024, 2000, 3, false); /* NN, B 8 MiB: K-slices of 672 */
    run_parts(false, 64, 1024, 2000, 3, true); /* the first slice (beta, bias) refused */
    run_parts(true, 9000, 100, 50, 3, false);   /* TN, 9000 rows: blocks of 3008 */
    run_parts(true, 64, 2000, 1024, 3, false);  /* TN, B 8 MiB: column blocks of 672 */
    run_parts(true, 9000, 2000, 1024, 9, false); /* both */
    run_parts(false, 64, 768, 768, 1, false);   /* B 2.25 MiB: one call */
}

/* products called from inside a parallel region (like attention.c's) go to OpenBLAS on one
 * thread each, and are right */
static void test_in_parallel(void **state)
{
    (void)state;
    enum { M = 31, N = 29, K = 64, P = 4 };
    float *A = falloc(P * M * K), *B = falloc(K * N), *C = falloc(P * M * N);
    fill(A, P * M * K), fill(B, K * N);
    float *C0 = falloc(M * N);
    for (int bi = 0; bi < 2; bi++) {
        zt_gemm_backend_set(backends[bi]);
        zt_gemm_stats st0, st1;
        zt_gemm_stats_get(&st0);
#pragma omp parallel for schedule(static)
        for (int p = 0; p < P; p++)
            zt_gemm_f32(false, false, M, N, K, 1.0f, A + (size_t)p * M * K, K, B, N, 0.0f,
                        C + (size_t)p * M * N, N);
        zt_gemm_stats_get(&st1);
        assert_int_equal(st1.calls_openblas - st0.calls_openblas, P);
        for (int p = 0; p < P; p++)
            check_gemm("in parallel", false, false, M, N, K, 1.0f, A + (size_t)p * M * K, K, B, N,
                       0.0f, C0, C + (size_t)p * M * N, N, NULL, 0);
    }
    free(A), free(B), free(C), free(C0);
}

/* the rule: ZT_GEMM first, then oneDNN's ISA (AVX2 or better: oneDNN, whatever OpenBLAS's core),
 * else OpenBLAS */
static void test_rule(void **state)
{
    (void)state;
    char why[256];
    assert_int_equal(zt_gemm_choose("openblas", "Haswell", "avx512_core", true, why, sizeof why),
                     ZT_GEMM_OPENBLAS);
    assert_int_equal(zt_gemm_choose("onednn", "SkylakeX", "avx2", false, why, sizeof why),
                     ZT_GEMM_ONEDNN);
    assert_int_equal(zt_gemm_choose("DNNL", "SkylakeX", "avx2", false, why, sizeof why),
                     ZT_GEMM_ONEDNN);
    /* auto */
    assert_int_equal(zt_gemm_choose(NULL, "SkylakeX", "avx512_core_bf16", true, why, sizeof why),
                     ZT_GEMM_ONEDNN);
    assert_int_equal(zt_gemm_choose("auto", "Cooperlake", "avx512_core", true, why, sizeof why),
                     ZT_GEMM_ONEDNN);
    assert_non_null(strstr(why, "avx512_core"));
    assert_int_equal(zt_gemm_choose("", "SapphireRapids", "avx512_core_amx", true, why, sizeof why),
                     ZT_GEMM_ONEDNN);
    assert_int_equal(zt_gemm_choose(NULL, "Cooperlake", "avx2", false, why, sizeof why),
                     ZT_GEMM_OPENBLAS);
    assert_int_equal(zt_gemm_choose(NULL, "Haswell", "avx512_core_bf16", true, why, sizeof why),
                     ZT_GEMM_ONEDNN);
    assert_non_null(strstr(why, "Haswell"));
    assert_int_equal(zt_gemm_choose(NULL, "Zen", "avx512_core_bf16", true, why, sizeof why),
                     ZT_GEMM_ONEDNN);
    assert_int_equal(zt_gemm_choose(NULL, NULL, "avx512_core", true, why, sizeof why),
                     ZT_GEMM_ONEDNN);
    assert_int_equal(zt_gemm_choose(NULL, "Haswell", "avx2", true, why, sizeof why),
                     ZT_GEMM_ONEDNN);
    assert_int_equal(zt_gemm_choose(NULL, "Prescott", "sse41", false, why, sizeof why),
                     ZT_GEMM_OPENBLAS);
    assert_int_equal(zt_gemm_choose(NULL, "ARMV8", "all", false, why, sizeof why),
                     ZT_GEMM_OPENBLAS);
    /* an unknown value: the automatic rule, and the reason names the value */
    assert_int_equal(zt_gemm_choose("mkl", "Haswell", "avx512_core", true, why, sizeof why),
                     ZT_GEMM_ONEDNN);
    assert_non_null(strstr(why, "'mkl'"));
    /* this process: a name and a reason */
    zt_gemm_backend b = zt_gemm_backend_get();
    const char *name = zt_gemm_backend_name();
    assert_true(strcmp(name, "openblas") == 0 || strcmp(name, "onednn") == 0);
    assert_string_equal(name, bname(b));
    assert_true(strlen(zt_gemm_backend_reason()) > 0);
    print_message("  this process: %s (%s)\n", name, zt_gemm_backend_reason());
}

/* the backend of the environment first (the tests switch it later) */
static int check_env_choice(void **state)
{
    (void)state;
    const char *env = getenv("ZT_GEMM");
    zt_gemm_backend b = zt_gemm_backend_get();
    if (env != NULL && strcmp(env, "openblas") == 0 && b != ZT_GEMM_OPENBLAS)
        return -1;
    if (env != NULL && strcmp(env, "onednn") == 0 && b != ZT_GEMM_ONEDNN &&
        strstr(zt_gemm_backend_reason(), "engine creation failed") == NULL)
        return -1;
    return 0;
}

int main(void)
{
    /* the operands (up to 206 MB each for the lm_head shapes) from the heap and kept there when
     * freed: each case reuses the pages the one before faulted in instead of mapping fresh ones
     * (page faults were a third of this test's CPU time on the 2-core VM: 46 -> 32 s). Only
     * where the buffers live changes; every product and check is the same. */
    mallopt(M_MMAP_MAX, 0);
    mallopt(M_TRIM_THRESHOLD, INT_MAX);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rule),
        cmocka_unit_test(test_cache),
        cmocka_unit_test(test_fallback),
        cmocka_unit_test(test_in_parallel),
        cmocka_unit_test(test_parts),
        cmocka_unit_test(test_strides_and_scales),
        cmocka_unit_test(test_products),
        cmocka_unit_test(test_w1_shapes),
    };
    int rc = cmocka_run_group_tests(tests, check_env_choice, NULL);
    zt_gemm_cache_clear();
    return rc;
}
