/* test_optim.c - AdamW and SGD against double-precision references of PyTorch's formulas, the
 * learning-rate schedule at its corners, clipping and the deterministic sum of squares; AdamW fused
 * with the compute copy's rounding against the two passes. */
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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_adamw_matches_reference),
        cmocka_unit_test(test_adamw_round_same_bits),
        cmocka_unit_test(test_sgd_matches_reference),
        cmocka_unit_test(test_lr_schedule),
        cmocka_unit_test(test_clip_and_sum_squares),
        cmocka_unit_test(test_sum_squares_chunk_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
