/* test_optim.c - AdamW and SGD against double-precision references of PyTorch's formulas, the
 * learning-rate schedule at its corners, clipping and the deterministic sum of squares; AdamW fused
 * with the compute copy's rounding against the two passes; Muon's Newton-Schulz, its step and LAMB
 * (trust ratio, pieces) against references in double. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "kernels/kernels.h"
#include "optim/optim.h"
#include "zerotrain/zerotrain.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#define N 1000

static void fill(float *x, int n, uint64_t s, float scale) {
    for (int i = 0; i < n; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        x[i] = scale * ((float)((s >> 40) & 0xffff) / 32768.0f - 1.0f);
    }
}

/* 5 steps of AdamW vs torch.optim.AdamW's algorithm in double: fp32 rounding of ~10 operations per
 * step keeps the relative error near 1e-6; 1e-5 relative (+1e-7 absolute) bounds it. */
static void test_adamw_matches_reference(void **state) {
    static float p[N], g[N], m[N], v[N];
    static double pr[N], mr[N], vr[N];
    fill(p, N, 1, 1.0f);
    memset(m, 0, sizeof m);
    memset(v, 0, sizeof v);
    for (int i = 0; i < N; i++) pr[i] = p[i], mr[i] = vr[i] = 0;
    double lr = 1e-2, b1 = 0.9, b2 = 0.95, eps = 1e-8, wd = 0.1, scale = 0.5;
    for (int t = 1; t <= 5; t++) {
        fill(g, N, 100 + (uint64_t)t, 0.1f);
        zt_adamw_update(p, g, m, v, N, (float)lr, (float)b1, (float)b2, (float)eps, (float)wd, (float)scale, t);
        for (int i = 0; i < N; i++) {
            double gi = g[i] * scale;
            pr[i] *= 1 - lr * wd;
            mr[i] = b1 * mr[i] + (1 - b1) * gi;
            vr[i] = b2 * vr[i] + (1 - b2) * gi * gi;
            double mh = mr[i] / (1 - pow(b1, t)), denom = sqrt(vr[i]) / sqrt(1 - pow(b2, t)) + eps;
            pr[i] -= lr * mh / denom;
        }
    }
    for (int i = 0; i < N; i++)
        if (fabs(p[i] - pr[i]) > 1e-7 + 1e-5 * fabs(pr[i])) fail_msg("p[%d] %.9g vs %.9g", i, p[i], pr[i]);
}

/* zt_adamw_update_round: the bits of zt_adamw_update followed by zt_round_to_lp, bf16 and fp16, on
 * 2 threads and 1, for lengths of one element to several threads' shares plus a tail, with p, m, v
 * and the copy at different offsets from a 64-byte line (the streaming stores' heads and tails),
 * and nothing outside the slice written */
static void test_adamw_round_same_bits(void **state) {
    enum { M = 2 * 8192 + 3 * 1024 + 77, PAD = 64 };
    static const size_t lens[] = {1, 5, 15, 16, 17, 33, 1023, 1024, 1025, 3 * 4096 + 77, M};
    static const size_t offs[][4] = {{0, 0, 0, 0}, {3, 5, 7, 1}, {15, 1, 0, 9}, {16, 33, 47, 31}};
    static _Alignas(64) float p[M + PAD], g[M + PAD], m[M + PAD], v[M + PAD], p2[M + PAD], m2[M + PAD], v2[M + PAD],
        lp[M + PAD], lpref[M + PAD];
    for (int kind = ZT_LP_BF16; kind <= ZT_LP_FP16; kind++)
        for (int nt = 2; nt >= 1; nt--)
            for (size_t li = 0; li < sizeof lens / sizeof *lens; li++)
                for (size_t oi = 0; oi < sizeof offs / sizeof *offs; oi++) {
                    const size_t n = lens[li], op = offs[oi][0], om = offs[oi][1], ov = offs[oi][2];
                    const size_t esize = kind == ZT_LP_BF16 ? 2 : 4, ol = offs[oi][3] * esize; /* bytes */
                    int keep = omp_get_max_threads();
                    omp_set_num_threads(nt);
                    fill(p, M + PAD, 3, 1.0f), fill(m, M + PAD, 4, 0.01f), fill(v, M + PAD, 5, 0.001f);
                    fill(g, M + PAD, 6, 0.1f);
                    for (int i = 0; i < M + PAD; i++) v[i] = fabsf(v[i]);
                    memcpy(p2, p, sizeof p), memcpy(m2, m, sizeof m), memcpy(v2, v, sizeof v);
                    memset(lp, 0x5a, sizeof lp), memset(lpref, 0x5a, sizeof lpref);
                    zt_adamw_update(p + op, g, m + om, v + ov, n, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.5f, 3);
                    zt_round_to_lp((zt_lp_kind)kind, (char *)lpref + ol, p + op, n);
                    zt_adamw_update_round(p2 + op, g, m2 + om, v2 + ov, n, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.5f, 3,
                                          kind, (char *)lp + ol);
                    omp_set_num_threads(keep);
                    if (memcmp(p, p2, sizeof p) || memcmp(m, m2, sizeof m) || memcmp(v, v2, sizeof v) ||
                        memcmp(lp, lpref, sizeof lp))
                        fail_msg("kind %d, %d threads, n %zu, offsets p %zu m %zu v %zu copy %zu bytes: not the bits "
                                 "of the two passes", kind, nt, n, op, om, ov, ol);
                }
}

static void test_sgd_matches_reference(void **state) {
    for (int nesterov = 0; nesterov <= 1; nesterov++) {
        static float p[N], g[N], buf[N];
        static double pr[N], br[N];
        fill(p, N, 2, 1.0f);
        for (int i = 0; i < N; i++) pr[i] = p[i];
        double lr = 0.05, mom = 0.9, wd = 0.01;
        for (int t = 1; t <= 4; t++) {
            fill(g, N, 200 + (uint64_t)t, 0.1f);
            zt_sgd_update(p, g, buf, N, (float)lr, (float)mom, nesterov, (float)wd, 1.0f, t);
            for (int i = 0; i < N; i++) {
                double gi = g[i] + wd * pr[i];
                br[i] = t == 1 ? gi : mom * br[i] + gi;
                pr[i] -= lr * (nesterov ? gi + mom * br[i] : br[i]);
            }
        }
        for (int i = 0; i < N; i++)
            if (fabs(p[i] - pr[i]) > 1e-6 + 1e-5 * fabs(pr[i]))
                fail_msg("nesterov=%d p[%d] %.9g vs %.9g", nesterov, i, p[i], pr[i]);
    }
}

static void test_lr_schedule(void **state) {
    zt_lr_schedule s = {.max_lr = 1.0f, .min_lr = 0.1f, .warmup_steps = 10, .total_steps = 110,
                        .decay = ZT_LR_COSINE};
    assert_float_equal(zt_lr_at(&s, 0), 0.1f, 1e-7);
    assert_float_equal(zt_lr_at(&s, 9), 1.0f, 1e-7);
    assert_float_equal(zt_lr_at(&s, 10), 1.0f, 1e-6);
    assert_float_equal(zt_lr_at(&s, 60), 0.55f, 1e-6); /* cosine midpoint */
    assert_float_equal(zt_lr_at(&s, 110), 0.1f, 1e-7);
    assert_float_equal(zt_lr_at(&s, 500), 0.1f, 1e-7);
    s.decay = ZT_LR_LINEAR;
    assert_float_equal(zt_lr_at(&s, 35), 1.0f - 0.9f * 0.25f, 1e-6);
    s.decay = ZT_LR_CONSTANT;
    assert_float_equal(zt_lr_at(&s, 80), 1.0f, 1e-7);
    s.warmup_steps = 0;
    assert_float_equal(zt_lr_at(&s, 0), 1.0f, 1e-7);
}

/* the chunk partials against one chunk at a time in the scalar order (8 accumulators, element i
 * into acc[i & 7], combined pairwise), bit for bit, on random values, for lengths with and without
 * whole groups of four chunks and a short last chunk, at unaligned starts, on 2 threads and 1 */
static void test_sum_squares_chunk_order(void **state) {
    enum { MAXN = 13 * 1024 + 517 };
    static const int64_t lens[] = {1, 7, 1024, 3 * 1024 + 9, 4 * 1024, 9 * 1024 + 1, MAXN};
    static float x[MAXN + 16];
    static double got[16], want[16];
    fill(x, MAXN + 16, 77, 3.0f);
    for (int nt = 2; nt >= 1; nt--)
        for (size_t li = 0; li < sizeof lens / sizeof *lens; li++)
            for (int off = 0; off < 16; off += 5)
                for (int64_t chunk = 1024; chunk >= 1000; chunk -= 24) { /* 1000: not a multiple of 8 */
                    const float *xs = x + off;
                    int64_t n = lens[li], nch = (n + chunk - 1) / chunk;
                    for (int64_t c = 0; c < nch; c++) {
                        double acc[8] = {0};
                        int64_t hi = (c + 1) * chunk < n ? (c + 1) * chunk : n;
                        for (int64_t i = c * chunk; i < hi; i++) acc[i & 7] += (double)xs[i] * (double)xs[i];
                        want[c] = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
                    }
                    int keep = omp_get_max_threads();
                    omp_set_num_threads(nt);
                    zt_chunk_sum_squares(xs, n, chunk, got);
                    omp_set_num_threads(keep);
                    if (memcmp(got, want, (size_t)nch * sizeof *got))
                        fail_msg("n %lld, chunk %lld, offset %d, %d threads: partials differ from the scalar order",
                                 (long long)n, (long long)chunk, off, nt);
                }
}

static void test_clip_and_sum_squares(void **state) {
    assert_float_equal(zt_clip_coef(2.0, 1.0), 1.0 / (2.0 + 1e-6), 1e-12);
    assert_float_equal(zt_clip_coef(0.5, 1.0), 1.0, 0);
    assert_float_equal(zt_clip_coef(100.0, 0.0), 1.0, 0);
    int64_t n = (1 << 20) + 100, chunk = 1024, nch = (n + chunk - 1) / chunk;
    float *x = malloc((size_t)n * sizeof *x);
    double *p1 = malloc((size_t)nch * sizeof *p1), *p2 = malloc((size_t)nch * sizeof *p2);
    assert_non_null(x);
    double ref = 0;
    for (int64_t i = 0; i < n; i++) {
        x[i] = (float)((i % 17) - 8) * 0.25f;
        ref += (double)x[i] * x[i];
    }
    zt_chunk_sum_squares(x, n, chunk, p1);
    /* a shard starting on a chunk boundary gets the same partials as the whole tensor */
    zt_chunk_sum_squares(x, 5 * chunk, chunk, p2);
    zt_chunk_sum_squares(x + 5 * chunk, n - 5 * chunk, chunk, p2 + 5);
    assert_memory_equal(p1, p2, (size_t)nch * sizeof *p1);
    double a = zt_sum_in_order(p1, nch);
    assert_float_equal(a, ref, 1e-9 * ref);
    /* one thread or many: the same bits */
    omp_set_num_threads(1);
    zt_chunk_sum_squares(x, n, chunk, p2);
    omp_set_num_threads(2);
    assert_memory_equal(p1, p2, (size_t)nch * sizeof *p1);
    free(x);
    free(p1);
    free(p2);
}

/* ---- Muon and LAMB against double-precision references ------------------------------------ */

/* NS5 in double, the definition of optim.h: x (rows x cols) in place, times scale */
static void ns_ref(double *x, int rows, int cols, int steps, double scale) {
    const double a = 3.4445, b = -4.7750, c = 2.0315;
    int tr = rows > cols, r = tr ? cols : rows, n = tr ? rows : cols;
    double *X = malloc(sizeof(double) * r * n), *A = malloc(sizeof(double) * r * r),
           *B = malloc(sizeof(double) * r * r), *Y = malloc(sizeof(double) * r * n);
    for (int i = 0; i < r; i++)
        for (int j = 0; j < n; j++) X[i * n + j] = tr ? x[j * cols + i] : x[i * cols + j];
    double ss = 0;
    for (int i = 0; i < r * n; i++) ss += X[i] * X[i];
    for (int i = 0; i < r * n; i++) X[i] /= sqrt(ss) + 1e-7;
    for (int s = 0; s < steps; s++) {
        for (int i = 0; i < r; i++)
            for (int j = 0; j < r; j++) {
                double d = 0;
                for (int k = 0; k < n; k++) d += X[i * n + k] * X[j * n + k];
                A[i * r + j] = d;
            }
        for (int i = 0; i < r; i++)
            for (int j = 0; j < r; j++) {
                double d = 0;
                for (int k = 0; k < r; k++) d += A[i * r + k] * A[k * r + j];
                B[i * r + j] = b * A[i * r + j] + c * d;
            }
        for (int i = 0; i < r; i++)
            for (int j = 0; j < n; j++) {
                double d = 0;
                for (int k = 0; k < r; k++) d += B[i * r + k] * X[k * n + j];
                Y[i * n + j] = a * X[i * n + j] + d;
            }
        memcpy(X, Y, sizeof(double) * r * n);
    }
    for (int i = 0; i < r; i++)
        for (int j = 0; j < n; j++) *(tr ? &x[j * cols + i] : &x[i * cols + j]) = X[i * n + j] * scale;
    free(X), free(A), free(B), free(Y);
}

/* zt_muon_orthogonalize against ns_ref, wide and tall (transposed) and odd shapes (the products'
 * edges); the same bits on 1 and 2 threads; the bf16 option near the fp32 result; and NS5 makes
 * the singular values near 1 (X^T X's diagonal of a square matrix in [0.6, 1.3]) */
static void test_muon_newton_schulz(void **state) {
    static const int shapes[][2] = {{96, 160}, {160, 96}, {37, 53}, {53, 37}, {5, 9}, {64, 64}};
    for (size_t t = 0; t < sizeof shapes / sizeof shapes[0]; t++) {
        int R = shapes[t][0], C = shapes[t][1], n = R * C;
        float *x = malloc(sizeof(float) * n), *y = malloc(sizeof(float) * n), *z = malloc(sizeof(float) * n);
        float *work = malloc(sizeof(float) * zt_muon_workspace_floats(R, C));
        double *xr = malloc(sizeof(double) * n);
        fill(x, n, 7 + t, 1.0f);
        for (int i = 0; i < n; i++) xr[i] = x[i];
        memcpy(y, x, sizeof(float) * n);
        memcpy(z, x, sizeof(float) * n);
        float scale = zt_muon_scale(R, C, ZT_MUON_SCALE_REFERENCE);
        assert_true(fabsf(scale - (float)sqrt(R > C ? (double)R / C : 1.0)) < 1e-6f);
        omp_set_num_threads(1);
        zt_muon_orthogonalize(x, R, C, 5, false, scale, work);
        omp_set_num_threads(2);
        zt_muon_orthogonalize(y, R, C, 5, false, scale, work);
        assert_memory_equal(x, y, sizeof(float) * n);
        ns_ref(xr, R, C, 5, scale);
        double maxerr = 0;
        for (int i = 0; i < n; i++) maxerr = fmax(maxerr, fabs(x[i] - xr[i]));
        if (maxerr > 2e-6) fail_msg("%dx%d: NS5 fp32 vs double: max error %g", R, C, maxerr);
        zt_muon_orthogonalize(z, R, C, 5, true, scale, work); /* bf16: near, not equal */
        double bf = 0;
        for (int i = 0; i < n; i++) bf = fmax(bf, fabs(z[i] - xr[i]));
        if (bf > 0.05 * scale || bf == 0) fail_msg("%dx%d: NS5 bf16 vs double: max error %g", R, C, bf);
        print_message("NS5 %dx%d: max |fp32 - double| %.3g, |bf16 - double| %.3g\n", R, C, maxerr, bf);
        if (R == C) {
            for (int j = 0; j < C; j++) {
                double d = 0;
                for (int i = 0; i < R; i++) d += (double)x[i * C + j] * x[i * C + j];
                if (d < 0.3 || d > 1.7) fail_msg("column %d of NS5(X): squared norm %g", j, d);
            }
        }
        free(x), free(y), free(z), free(work), free(xr);
    }
    omp_set_num_threads(1);
    assert_true(fabsf(zt_muon_scale(64, 256, ZT_MUON_SCALE_RMS) - 0.2f * 16.0f) < 1e-6f);
}

/* three Muon steps (momentum, Nesterov, NS5, decoupled decay) against the definition in double;
 * the momentum on two pieces of rows gives the bits of the whole */
static void test_muon_step_matches_reference(void **state) {
    enum { R = 24, C = 40, NE = R * C };
    static float p[NE], g[NE], m[NE], u[NE], m2[NE], u2[NE];
    float *work = malloc(sizeof(float) * zt_muon_workspace_floats(R, C));
    static double pr[NE], mr[NE], ur[NE];
    const double lr = 0.02, beta = 0.95, wd = 0.1, gs = 0.5;
    fill(p, NE, 3, 0.2f);
    for (int i = 0; i < NE; i++) pr[i] = p[i], mr[i] = 0, m[i] = 0, m2[i] = 0;
    for (int t = 1; t <= 3; t++) {
        fill(g, NE, 50 + (uint64_t)t, 0.1f);
        zt_muon_momentum(g, m, u, NE, (float)beta, true, (float)gs);
        zt_muon_momentum(g, m2, u2, 10 * C, (float)beta, true, (float)gs); /* rows [0, 10) */
        zt_muon_momentum(g + 10 * C, m2 + 10 * C, u2 + 10 * C, NE - 10 * C, (float)beta, true, (float)gs);
        assert_memory_equal(u, u2, sizeof u);
        assert_memory_equal(m, m2, sizeof m);
        zt_muon_orthogonalize(u, R, C, 5, false, zt_muon_scale(R, C, ZT_MUON_SCALE_REFERENCE), work);
        zt_muon_apply(p, u, NE, (float)lr, (float)wd);
        for (int i = 0; i < NE; i++) {
            double gi = g[i] * gs;
            mr[i] = beta * mr[i] + (1 - beta) * gi;
            ur[i] = beta * mr[i] + (1 - beta) * gi;
        }
        ns_ref(ur, R, C, 5, 1.0);
        for (int i = 0; i < NE; i++) pr[i] = pr[i] * (1 - lr * wd) - lr * ur[i];
    }
    for (int i = 0; i < NE; i++)
        if (fabs(p[i] - pr[i]) > 2e-6) fail_msg("p[%d] %.9g vs %.9g", i, p[i], pr[i]);
    free(work);
}

/* LAMB: two tensors, three steps, against DeepSpeed's FusedLamb formulas in double (whole-tensor
 * norms, the clamp, the bias-corrected step size); the partials of a piece starting on a chunk
 * boundary are the whole tensor's; the trust ratio's corners */
static void test_lamb_matches_reference(void **state) {
    enum { N1 = 3000, N2 = 700 };
    static float p[N1 + N2], g[N1 + N2], m[N1 + N2], v[N1 + N2];
    static double pr[N1 + N2], mr[N1 + N2], vr[N1 + N2];
    const int off[3] = {0, N1, N1 + N2};
    const double lr = 1e-2, b1 = 0.9, b2 = 0.999, eps = 1e-6, wd[2] = {0.01, 0.0}, gs = 0.5;
    fill(p, N1 + N2, 11, 0.5f);
    for (int i = 0; i < N1 + N2; i++) pr[i] = p[i], mr[i] = vr[i] = 0, m[i] = v[i] = 0;
    for (int t = 1; t <= 3; t++) {
        fill(g, N1 + N2, 70 + (uint64_t)t, t == 2 ? 10.0f : 0.1f);
        for (int k = 0; k < 2; k++) {
            int n = off[k + 1] - off[k];
            float *pk = p + off[k];
            zt_lamb_moments(g + off[k], m + off[k], v + off[k], (size_t)n, (float)b1, (float)b2, (float)gs);
            double wpart[4] = {0}, upart[4] = {0}, wp2[4] = {0}, up2[4] = {0};
            zt_lamb_partials(pk, m + off[k], v + off[k], n, (float)eps, (float)wd[k], wpart, upart);
            if (n > 1024) { /* two pieces: [0, 1024) and the rest */
                zt_lamb_partials(pk, m + off[k], v + off[k], 1024, (float)eps, (float)wd[k], wp2, up2);
                zt_lamb_partials(pk + 1024, m + off[k] + 1024, v + off[k] + 1024, n - 1024, (float)eps,
                                 (float)wd[k], wp2 + 1, up2 + 1);
                assert_memory_equal(wpart, wp2, sizeof wpart);
                assert_memory_equal(upart, up2, sizeof upart);
            }
            int nc = (n + 1023) / 1024;
            float coeff = zt_lamb_coeff(sqrt(zt_sum_in_order(wpart, nc)), sqrt(zt_sum_in_order(upart, nc)), 0.01f,
                                        10.0f);
            zt_lamb_apply(pk, m + off[k], v + off[k], (size_t)n,
                          (float)eps, (float)wd[k], zt_lamb_step_size((float)lr, (float)b1, (float)b2, true, t) * coeff);
            double wn = 0, un = 0;
            for (int i = off[k]; i < off[k + 1]; i++) {
                double gi = g[i] * gs;
                mr[i] = b1 * mr[i] + (1 - b1) * gi;
                vr[i] = b2 * vr[i] + (1 - b2) * gi * gi;
                double ui = mr[i] / (sqrt(vr[i]) + eps) + wd[k] * pr[i];
                wn += pr[i] * pr[i];
                un += ui * ui;
            }
            double c = sqrt(wn) / sqrt(un);
            c = c > 10 ? 10 : c < 0.01 ? 0.01 : c;
            if (fabs(c - coeff) > 1e-5 * c) fail_msg("step %d tensor %d: trust ratio %.9g vs %.9g", t, k, coeff, c);
            double step = lr * sqrt(1 - pow(b2, t)) / (1 - pow(b1, t));
            for (int i = off[k]; i < off[k + 1]; i++)
                pr[i] -= step * c * (mr[i] / (sqrt(vr[i]) + eps) + wd[k] * pr[i]);
        }
    }
    for (int i = 0; i < N1 + N2; i++)
        if (fabs(p[i] - pr[i]) > 1e-6 + 1e-5 * fabs(pr[i])) fail_msg("p[%d] %.9g vs %.9g", i, p[i], pr[i]);
    assert_true(zt_lamb_coeff(0.0, 2.0, 0.01f, 10.0f) == 1.0f);
    assert_true(zt_lamb_coeff(2.0, 0.0, 0.01f, 10.0f) == 1.0f);
    assert_true(zt_lamb_coeff(1000.0, 1.0, 0.01f, 10.0f) == 10.0f);
    assert_true(zt_lamb_coeff(1.0, 1000.0, 0.01f, 10.0f) == 0.01f);
    assert_true(zt_lamb_step_size(0.5f, 0.9f, 0.999f, false, 3) == 0.5f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_adamw_matches_reference),
        cmocka_unit_test(test_adamw_round_same_bits),
        cmocka_unit_test(test_sgd_matches_reference),
        cmocka_unit_test(test_lr_schedule),
        cmocka_unit_test(test_clip_and_sum_squares),
        cmocka_unit_test(test_sum_squares_chunk_order),
        cmocka_unit_test(test_muon_newton_schulz),
        cmocka_unit_test(test_muon_step_matches_reference),
        cmocka_unit_test(test_lamb_matches_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
