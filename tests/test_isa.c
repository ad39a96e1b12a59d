/* test_isa.c - the instruction-set levels (core/cpu_isa.c) and the kernels' dispatch
 * (kernels/dispatch.c): every level this CPU has is selected in turn, in this one process, and
 * its kernels are checked against references written here in double precision, within the
 * precision's tolerance; levels the CPU lacks are refused by name; ZT_ISA's parser and the
 * feature check's messages on bad input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>
#include <math.h>

#include "core/cpu_isa.h"
#include "kernels/gemm.h"
#include "kernels/kernels.h"
#include "kernels/vecbf16.h"

#define TEST_RNG_SEED 0x15A15A15A15A15Aull
#include "test_rng.h"

static float *rnd(size_t n, float scale)
{
    float *x = malloc(n * sizeof *x);
    assert_non_null(x);
    for (size_t i = 0; i < n; i++) x[i] = (float)(scale * rng_uniform());
    return x;
}

/* max |a - b| / (|b| + floor) over n */
static double max_rel(const float *a, const double *b, size_t n, double floor)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]) / (fabs(b[i]) + floor);
        if (!(d <= m)) m = d; /* NaN counts as the worst */
    }
    return m;
}

static double bf16d(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* ---- one level's kernels against the double references --------------------------------------- */

static void check_layernorm(void)
{
    const int N = 37, C = 203; /* not multiples of any lane count */
    float *x = rnd((size_t)N * C, 2), *w = rnd(C, 1), *b = rnd(C, 1), *out = malloc(sizeof(float) * N * C);
    float mean[37], rstd[37];
    double *ref = malloc(sizeof(double) * N * C);
    layernorm_forward(out, mean, rstd, x, w, b, N, C);
    for (int n = 0; n < N; n++) {
        double m = 0, v = 0;
        for (int c = 0; c < C; c++) m += x[n * C + c];
        m /= C;
        for (int c = 0; c < C; c++) v += (x[n * C + c] - m) * (x[n * C + c] - m);
        double s = 1.0 / sqrt(v / C + 1e-5);
        for (int c = 0; c < C; c++) ref[n * C + c] = (x[n * C + c] - m) * s * w[c] + b[c];
    }
    double e = max_rel(out, ref, (size_t)N * C, 1.0); /* outputs of order 1 */
    if (!(e < 1e-5)) print_message("  layernorm: max relative error %g\n", e);
    assert_true(e < 1e-5);
    free(x), free(w), free(b), free(out), free(ref);
}

static void check_gelu_exp(void)
{
    const size_t n = 1001;
    float *x = rnd(n, 8), *out = malloc(sizeof(float) * n);
    double *ref = malloc(sizeof(double) * n);
    gelu_forward(out, x, n);
    for (size_t i = 0; i < n; i++) {
        double u = x[i];
        ref[i] = 0.5 * u * (1 + tanh(sqrt(2 / M_PI) * (u + 0.044715 * u * u * u)));
    }
    assert_true(max_rel(out, ref, n, 1e-3) < 2e-6);
    free(x), free(out), free(ref);
}

static void check_softmax_xent(void)
{
    const int N = 5, V = 1031;
    float *logits = rnd((size_t)N * V, 10), losses[5];
    int32_t targets[5] = {0, 17, 1030, 512, 3};
    double ref[5];
    for (int n = 0; n < N; n++) {
        double mx = -1e30, s = 0;
        for (int v = 0; v < V; v++) mx = fmax(mx, logits[n * V + v]);
        for (int v = 0; v < V; v++) s += exp(logits[n * V + v] - mx);
        ref[n] = log(s) + mx - logits[n * V + targets[n]];
    }
    softmax_xent_forward(losses, logits, targets, N, V);
    assert_true(max_rel(losses, ref, N, 1e-3) < 1e-5);
    free(logits);
}

/* fp32 and bf16 Linear: the bf16 product against the exact products of the rounded operands */
static void check_matmul(void)
{
    const int N = 67, C = 129, OC = 95;
    float *x = rnd((size_t)N * C, 1), *w = rnd((size_t)OC * C, 1), *b = rnd(OC, 1);
    float *out = malloc(sizeof(float) * N * OC);
    double *ref = malloc(sizeof(double) * N * OC);
    matmul_forward(out, x, w, b, N, C, OC);
    for (int n = 0; n < N; n++)
        for (int o = 0; o < OC; o++) {
            double s = b[o];
            for (int c = 0; c < C; c++) s += (double)x[n * C + c] * w[o * C + c];
            ref[n * OC + o] = s;
        }
    assert_true(max_rel(out, ref, (size_t)N * OC, 1.0) < 1e-5);

    uint16_t *x16 = malloc(2 * (size_t)N * C), *w16 = malloc(2 * (size_t)OC * C);
    zt_f32_to_bf16(w16, w, (size_t)OC * C);
    matmul_forward_lp(out, x16, x, w16, b, N, C, OC, ZT_LP_BF16);
    for (size_t i = 0; i < (size_t)N * C; i++) assert_int_equal(x16[i], zt_bf16_rne(x[i])); /* rounding exact */
    for (int n = 0; n < N; n++)
        for (int o = 0; o < OC; o++) {
            double s = b[o];
            for (int c = 0; c < C; c++) s += bf16d(x16[n * C + c]) * bf16d(w16[o * C + c]);
            ref[n * OC + o] = s;
        }
    /* exact products, fp32 sums over C = 129 terms of |x| <= 1: well inside 1e-5 of the row scale */
    assert_true(max_rel(out, ref, (size_t)N * OC, 1.0) < 1e-5);
    free(x), free(w), free(b), free(out), free(ref), free(x16), free(w16);
}

/* causal attention, fp32 and bf16 products, against softmax(q k^T / sqrt(hs)) v in double */
static void check_flash(bool bf16)
{
    const int B = 1, T = 45, NH = 2, hs = 24, C = NH * hs;
    float *qkv = rnd((size_t)B * T * 3 * C, 1), *out = malloc(sizeof(float) * B * T * C), lse[2 * 45];
    float *scratch = malloc(sizeof(float) * flash_attention_scratch_floats(B, T, NH, NH, hs));
    double *ref = malloc(sizeof(double) * B * T * C);
    flash_attention_forward(out, lse, scratch, qkv, B, T, C, NH, bf16, NULL);
    for (int h = 0; h < NH; h++)
        for (int t = 0; t < T; t++) {
            double s[45], mx = -1e30, z = 0;
            for (int u = 0; u <= t; u++) {
                double d = 0;
                for (int i = 0; i < hs; i++) {
                    double q = qkv[t * 3 * C + h * hs + i], k = qkv[u * 3 * C + C + h * hs + i];
                    if (bf16) q = bf16d(zt_bf16_rne((float)q)), k = bf16d(zt_bf16_rne((float)k));
                    d += q * k;
                }
                s[u] = d / sqrt(hs);
                mx = fmax(mx, s[u]);
            }
            for (int u = 0; u <= t; u++) z += s[u] = exp(s[u] - mx);
            for (int i = 0; i < hs; i++) {
                double o = 0;
                for (int u = 0; u <= t; u++) o += s[u] / z * qkv[u * 3 * C + 2 * C + h * hs + i];
                ref[t * C + h * hs + i] = o;
            }
        }
    /* bf16 rounds P and v too (2^-8 relative each): the tolerance of two roundings */
    assert_true(max_rel(out, ref, (size_t)T * C, 1.0) < (bf16 ? 1.2e-2 : 2e-6));
    free(qkv), free(out), free(scratch), free(ref);
}

static void check_conversions(void)
{
    const size_t n = 4099;
    float *x = rnd(n, 1e3), *back = malloc(sizeof(float) * n);
    x[0] = NAN, x[1] = INFINITY, x[2] = -0.0f, x[3] = 1e-40f; /* NaN, inf, signed zero, subnormal */
    uint16_t *h = malloc(2 * n);
    zt_f32_to_bf16(h, x, n);
    for (size_t i = 0; i < n; i++) assert_int_equal(h[i], zt_bf16_rne(x[i]));
    zt_bf16_to_f32(back, h, n);
    for (size_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)h[i] << 16, v;
        memcpy(&v, back + i, 4);
        assert_int_equal(u, v);
    }
    free(x), free(back), free(h);
}

static void run_level_checks(void)
{
    check_conversions();
    check_layernorm();
    check_gelu_exp();
    check_softmax_xent();
    check_matmul();
    check_flash(false);
    check_flash(true);
}

static void each_level_against_references(void **state)
{
    (void)state;
    const zt_cpu_features *f = zt_cpu_features_get();
    zt_isa best = zt_isa_best(f), start = (zt_isa)zt_kernels_isa();
    assert_true(best >= ZT_ISA_AVX2);
    for (int isa = ZT_ISA_AVX2; isa < ZT_ISA_LEVELS; isa++) {
        zt_error err = {0};
        int rc = zt_kernels_select(isa, &err);
        if (isa > best) { /* refused, naming the level and a missing feature */
            assert_int_equal(rc, ZT_ERR_USAGE);
            assert_non_null(strstr(err.msg, zt_isa_name((zt_isa)isa)));
            assert_non_null(strstr(err.msg, "lacks"));
            assert_int_equal(zt_kernels_isa(), best); /* unchanged: the last level selected */
            continue;
        }
        assert_int_equal(rc, ZT_OK);
        assert_int_equal(zt_kernels_isa(), isa);
        assert_int_equal(zt_gemm_bf16_native(), isa >= ZT_ISA_AVX512_BF16);
        print_message("  level %-11s: %s; bf16 products %s\n", zt_isa_name((zt_isa)isa), zt_kernels_path(),
                      zt_gemm_path(true));
        run_level_checks();
        assert_true(zt_measure_core_fp32_flops() > 0);
        assert_true((zt_measure_core_bf16_flops() > 0) == (isa >= ZT_ISA_AVX512_BF16));
    }
    zt_error err = {0};
    assert_int_equal(zt_kernels_select(start, &err), ZT_OK);
}

/* the same inputs give results on every level within the precision's tolerance of each other
 * (here: the fp32 Linear with a bias, the widened and the native bf16 products) */
static void levels_agree(void **state)
{
    (void)state;
    zt_isa best = zt_isa_best(zt_cpu_features_get()), start = (zt_isa)zt_kernels_isa();
    const int M = 64, N = 80, K = 300;
    float *a = rnd((size_t)M * K, 1), *b = rnd((size_t)N * K, 1);
    uint16_t *a16 = malloc(2 * (size_t)M * K), *b16 = malloc(2 * (size_t)N * K);
    zt_f32_to_bf16(a16, a, (size_t)M * K);
    zt_f32_to_bf16(b16, b, (size_t)N * K);
    float *c[ZT_ISA_LEVELS] = {0};
    for (int isa = ZT_ISA_AVX2; isa <= best && isa < ZT_ISA_LEVELS; isa++) {
        zt_error err = {0};
        assert_int_equal(zt_kernels_select(isa, &err), ZT_OK);
        c[isa] = malloc(sizeof(float) * M * N);
        zt_gemm_bf16(false, true, M, N, K, 1.0f, a16, K, b16, K, 0.0f, c[isa], N, NULL);
    }
    for (int isa = ZT_ISA_AVX2 + 1; isa <= best && isa < ZT_ISA_LEVELS; isa++)
        for (int i = 0; i < M * N; i++) /* exact products, fp32 sums of 300 terms in another order */
            assert_true(fabsf(c[isa][i] - c[ZT_ISA_AVX2][i]) <= 1e-5f * (1.0f + fabsf(c[ZT_ISA_AVX2][i])) * 4);
    for (int isa = 0; isa < ZT_ISA_LEVELS; isa++) free(c[isa]);
    zt_error err = {0};
    assert_int_equal(zt_kernels_select(start, &err), ZT_OK);
    free(a), free(b), free(a16), free(b16);
}

/* ---- the bf16 product of the levels without AVX512_BF16 (gemm_packed_bf16.c) --------------- */

/* C = alpha op(A) op(B) + beta C0 + bias on one shape and orientation, on the avx2 level (6 x 16
 * tiles) and, where the CPU has it, the avx512 level (14 x 32): against the double sum of the
 * exact products within fp32's error bound for K terms; the same bits on 1, 2 and 3 threads
 * (threads divide the output, never k), through zt_gemm_bf16, and on both levels (an element's
 * bits depend on K and its inputs only, not on the tile) */
static void packed_case(bool ta, bool tb, int M, int N, int K, float alpha, float beta, bool with_bias)
{
    int lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 5, ldc = N + 2;
    size_t na = (size_t)lda * (ta ? K : M), nb = (size_t)ldb * (tb ? N : K), nc = (size_t)ldc * M;
    float *af = rnd(na, 1), *bf = rnd(nb, 1), *c0 = rnd(nc, 1), *bias = with_bias ? rnd((size_t)N, 1) : NULL;
    uint16_t *a = malloc(2 * na), *b = malloc(2 * nb);
    zt_f32_to_bf16(a, af, na);
    zt_f32_to_bf16(b, bf, nb);
    const zt_isa levels[] = {ZT_ISA_AVX2, ZT_ISA_AVX512};
    const int nlev = zt_isa_check(ZT_ISA_AVX512, zt_cpu_features_get(), &(zt_error){0}) == ZT_OK ? 2 : 1;
    float *c[2][4];
    for (int l = 0; l < nlev; l++) {
        zt_error err = {0};
        assert_int_equal(zt_kernels_select(levels[l], &err), ZT_OK);
        size_t wf = zt_gemm_bf16_packed_work_floats(M, N, K, 3);
        float *work = aligned_alloc(64, (wf * sizeof(float) + 63) / 64 * 64);
        assert_non_null(work);
        for (int t = 0; t <= 3; t++) {
            c[l][t] = malloc(nc * sizeof(float));
            memcpy(c[l][t], c0, nc * sizeof(float));
            if (t == 0)
                zt_gemm_bf16(ta, tb, M, N, K, alpha, a, lda, b, ldb, beta, c[l][0], ldc, bias);
            else
                zt_gemm_bf16_packed(ta, tb, M, N, K, alpha, a, lda, b, ldb, beta, c[l][t], ldc, bias, work, t);
        }
        free(work);
    }
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            double s = 0, mag = 0;
            for (int k = 0; k < K; k++) {
                double x = bf16d(ta ? a[(size_t)k * lda + m] : a[(size_t)m * lda + k]);
                double y = bf16d(tb ? b[(size_t)n * ldb + k] : b[(size_t)k * ldb + n]);
                s += x * y, mag += fabs(x * y);
            }
            double ref = alpha * s + (beta != 0.0f ? beta * (double)c0[(size_t)m * ldc + n] : 0.0) +
                         (bias ? bias[n] : 0.0);
            mag = fabs(alpha) * mag + fabs(beta * (double)c0[(size_t)m * ldc + n]) + (bias ? fabs(bias[n]) : 0.0);
            const float got = c[0][1][(size_t)m * ldc + n];
            if (!(fabs(got - ref) <= (K + 4) * 0x1p-24 * mag + 1e-30))
                fail_msg("ta %d tb %d M %d N %d K %d: C[%d][%d] = %.9g, want %.9g", ta, tb, M, N, K, m, n, got, ref);
            for (int l = 0; l < nlev; l++)
                for (int t = 0; t <= 3; t++)
                    if (memcmp(&c[l][t][(size_t)m * ldc + n], &got, sizeof(float)) != 0)
                        fail_msg("ta %d tb %d M %d N %d K %d: C[%d][%d] = %.9g on level %s, %d threads (0: "
                                 "zt_gemm_bf16); %.9g on avx2, 1 thread", ta, tb, M, N, K, m, n,
                                 c[l][t][(size_t)m * ldc + n], zt_isa_name(levels[l]), t, got);
        }
    for (int l = 0; l < nlev; l++) /* the padding columns of C untouched */
        for (int m = 0; m < M; m++)
            for (int n = N; n < ldc; n++) assert_memory_equal(&c[l][1][(size_t)m * ldc + n], &c0[(size_t)m * ldc + n], 4);
    for (int l = 0; l < nlev; l++)
        for (int t = 0; t <= 3; t++) free(c[l][t]);
    free(af), free(bf), free(c0), free(bias), free(a), free(b);
}

static void packed_bf16_product(void **state)
{
    (void)state;
    zt_isa start = (zt_isa)zt_kernels_isa();
    zt_error err = {0};
    /* shapes: K over several blocks of 512 with a tail (and a tail of k not a multiple of 8); M
     * past a 96- and a 98-row block with a partial tile (of 6 and of 14 rows); N past a 4096-column block
     * (split between threads or not) and partial panels of 16 and 32; few columns, many rows (a
     * split along M); single rows, columns and k */
    const int shapes[][3] = {{13, 37, 1100}, {125, 50, 9}, {7, 16, 1}, {1, 1, 513}, {3, 4100, 20},
                             {200, 20, 64}, {12, 32, 256}, {6, 17, 8}, {5, 9000, 70}, {25, 70, 17},
                             {28, 33, 40}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int o = 0; o < 4; o++) {
            bool ta = o & 1, tb = o & 2;
            packed_case(ta, tb, shapes[s][0], shapes[s][1], shapes[s][2], 1.0f, 0.0f, s % 2 == 0);
            packed_case(ta, tb, shapes[s][0], shapes[s][1], shapes[s][2], 0.5f, 0.75f, s % 2 == 1);
        }
    assert_int_equal(zt_kernels_select(ZT_ISA_AVX2, &err), ZT_OK);
    assert_non_null(strstr(zt_gemm_path(true), "packed, zerotrain avx2 6x16"));
    if (zt_isa_check(ZT_ISA_AVX512, zt_cpu_features_get(), &err) == ZT_OK) {
        assert_int_equal(zt_kernels_select(ZT_ISA_AVX512, &err), ZT_OK);
        assert_non_null(strstr(zt_gemm_path(true), "packed, zerotrain avx512 14x32"));
    }
    assert_int_equal(zt_kernels_select(start, &err), ZT_OK);
}

/* ---- the measured FMA peak bounds the products ------------------------------------------------ */

static double thread_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* On every level the CPU has, the one-core fp32 FMA rate MFU divides by (fma_peak.c) is at least
 * the rate of that level's own packed product on one thread (a GEMM cannot beat the FMAs it is
 * made of; 25% for the clocks' noise). A peak loop that spills its accumulators (the avx2 level's
 * 16 chains in 16 ymm registers measured 67 GFLOP/s a core where this product ran at 100) fails it. */
static void fma_peak_bounds_products(void **state)
{
    (void)state;
    zt_isa start = (zt_isa)zt_kernels_isa();
    const int M = 96, N = 256, K = 512, reps = 20;
    uint16_t *a = malloc(2 * (size_t)M * K), *b = malloc(2 * (size_t)K * N);
    float *c = malloc(sizeof(float) * (size_t)M * N);
    for (size_t i = 0; i < (size_t)M * K; i++) a[i] = (uint16_t)(0x3f80 + i % 7);
    for (size_t i = 0; i < (size_t)K * N; i++) b[i] = (uint16_t)(0x3f00 + i % 5);
    for (zt_isa l = ZT_ISA_AVX2; l <= ZT_ISA_AMX; l++) {
        zt_error err = {0};
        if (zt_isa_check(l, zt_cpu_features_get(), &err) != ZT_OK) continue;
        assert_int_equal(zt_kernels_select(l, &err), ZT_OK);
        double peak = zt_measure_core_fp32_flops();
        float *work = aligned_alloc(64, (zt_gemm_bf16_packed_work_floats(M, N, K, 1) * sizeof(float) + 63) / 64 * 64);
        assert_non_null(work);
        double best = 0;
        for (int round = 0; round < 5; round++) {
            double t0 = thread_seconds();
            for (int r = 0; r < reps; r++)
                zt_gemm_bf16_packed(false, false, M, N, K, 1.0f, a, K, b, N, 0.0f, c, N, NULL, work, 1);
            double t = thread_seconds() - t0, rate = 2.0 * M * N * K * reps / t;
            if (t > 0 && rate > best) best = rate;
        }
        free(work);
        printf("  level %-11s: one core's FMA peak %.1f GFLOP/s, its packed product on one thread %.1f (%.0f%%)\n",
               zt_isa_name(l), peak / 1e9, best / 1e9, 100 * best / peak);
        if (!(best <= 1.25 * peak))
            fail_msg("level %s: the packed product ran at %.1f GFLOP/s on one thread, above the measured peak %.1f",
                     zt_isa_name(l), best / 1e9, peak / 1e9);
    }
    free(a), free(b), free(c);
    zt_error err = {0};
    assert_int_equal(zt_kernels_select(start, &err), ZT_OK);
}

/* ---- bad input -------------------------------------------------------------------------------- */

static void parse_names_and_errors(void **state)
{
    (void)state;
    zt_isa isa;
    zt_error err = {0};
    assert_int_equal(zt_isa_parse("avx2", "ZT_ISA", &isa, &err), ZT_OK);
    assert_int_equal(isa, ZT_ISA_AVX2);
    assert_int_equal(zt_isa_parse("avx512_bf16", "ZT_ISA", &isa, &err), ZT_OK);
    assert_int_equal(isa, ZT_ISA_AVX512_BF16);
    assert_int_equal(zt_isa_parse("amx", "ZT_ISA", &isa, &err), ZT_OK);
    assert_int_equal(isa, ZT_ISA_AMX);
    assert_int_equal(zt_isa_parse("auto", "ZT_ISA", &isa, &err), ZT_OK);
    assert_int_equal(isa, zt_isa_best(zt_cpu_features_get()));
    assert_int_equal(zt_isa_parse(NULL, "ZT_ISA", &isa, &err), ZT_OK);
    const char *bad[] = {"AVX2", "avx512bf16", "sse4", "avx2 ", "x86-64-v3", "avx-512"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(&err, 0, sizeof err);
        assert_int_equal(zt_isa_parse(bad[i], "ZT_ISA", &isa, &err), ZT_ERR_USAGE);
        assert_non_null(strstr(err.msg, "ZT_ISA"));
        assert_non_null(strstr(err.msg, bad[i]));
        assert_non_null(strstr(err.msg, "avx512_bf16")); /* lists the names */
    }
    memset(&err, 0, sizeof err);
    assert_int_equal(zt_kernels_select(17, &err), ZT_ERR_USAGE);
    assert_int_equal(zt_kernels_select(-1, &err), ZT_ERR_USAGE);
}

/* a made-up CPU of each kind: the check names exactly what is missing */
static void check_names_missing_features(void **state)
{
    (void)state;
    zt_cpu_features zen3 = {.vendor = "AuthenticAMD", .brand = "Zen 3 like", .family = 25, .model = 1,
                            .avx = true, .avx2 = true, .fma = true, .f16c = true, .bmi1 = true, .bmi2 = true,
                            .lzcnt = true, .movbe = true, .os_ymm = true};
    zt_error err = {0};
    assert_int_equal(zt_isa_best(&zen3), ZT_ISA_AVX2);
    assert_int_equal(zt_isa_check(ZT_ISA_AVX2, &zen3, &err), ZT_OK);
    assert_int_equal(zt_isa_check(ZT_ISA_AVX512, &zen3, &err), ZT_ERR_USAGE);
    assert_non_null(strstr(err.msg, "avx512f avx512bw avx512dq avx512vl avx512cd"));
    assert_non_null(strstr(err.msg, "Zen 3 like"));
    assert_non_null(strstr(err.msg, "family 25 model 1"));
    assert_non_null(strstr(err.msg, "best level is avx2"));

    zt_cpu_features skx = zen3;
    skx.avx512f = skx.avx512bw = skx.avx512dq = skx.avx512vl = skx.avx512cd = skx.os_zmm = true;
    assert_int_equal(zt_isa_best(&skx), ZT_ISA_AVX512);
    assert_int_equal(zt_isa_check(ZT_ISA_AVX512_BF16, &skx, &err), ZT_ERR_USAGE);
    assert_non_null(strstr(err.msg, "needs avx512_bf16,"));
    skx.avx512_bf16 = true;
    assert_int_equal(zt_isa_check(ZT_ISA_AMX, &skx, &err), ZT_ERR_USAGE);
    assert_non_null(strstr(err.msg, "amx_tile amx_bf16"));

    zt_cpu_features old = {.vendor = "GenuineIntel", .brand = "Sandy Bridge like", .family = 6, .model = 42,
                           .avx = true, .os_ymm = true};
    memset(&err, 0, sizeof err);
    assert_int_equal(zt_isa_best(&old), ZT_ISA_NONE);
    assert_int_equal(zt_isa_check(ZT_ISA_NONE, &old, &err), ZT_ERR_USAGE);
    assert_non_null(strstr(err.msg, "avx2 fma f16c"));
    assert_non_null(strstr(err.msg, "needs at least avx2"));

    char line[512];
    zt_cpu_describe(&skx, line, sizeof line);
    assert_non_null(strstr(line, "avx512_bf16"));
    zt_cpu_describe(&skx, line, 8); /* truncated, still a string */
    assert_int_equal(strlen(line), 7);
}

int main(void)
{
    zt_gemm_backend_get(); /* oneDNN's cap from the level chosen at start (gemm.c), not from a test's */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(parse_names_and_errors),
        cmocka_unit_test(check_names_missing_features),
        cmocka_unit_test(each_level_against_references),
        cmocka_unit_test(levels_agree),
        cmocka_unit_test(packed_bf16_product),
        cmocka_unit_test(fma_peak_bounds_products),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
