/* test_flash_attention.c - unit tests of src/kernels/flash_attention.c (kernels.h): the tiled,
 * online-softmax causal attention against
 *   - a plain double-precision reference written here (output, logsumexp, dq, dk, dv),
 *   - central finite differences of that reference's loss L = Σ g·out (every element of q, k, v
 *     perturbed; eps = 1e-6 in double, so the bound measures the fp32 kernel alone),
 *   - the materializing kernel of attention.c on the same inputs (close to fp32 rounding),
 * for multi-head (NKV = NH, also through GPT-2's fused-qkv wrappers) and grouped-query shapes, at
 * lengths that make the forward run several key blocks (online rescaling) and the backward several
 * key blocks and query chunks, with partial tiles. Also (test_flash_invariants.h): the same bits on
 * 1 and 2 threads and on a rerun, causality (forward and backward), the fused-qkv wrappers; no NaN from rows whose scores are huge, and scratch linear in T.
 * Packed documents (positions, kernels.h): the kernels with positions against the double reference
 * with the same per-document masks and its finite differences, attention.c with positions against
 * flash with positions, and (test_flash_packed.h) each document of a packed batch against its own
 * run: bit-identical for documents starting at a multiple of 128, within rtol elsewhere.
 * Tolerances: |got - ref| <= rtol (|ref| + rms(ref)) (test_kernel_check.h); rtol argued at each check.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <math.h>
#include <omp.h>

#define TEST_RNG_SEED 0xF1A5A77Eull
#include "kernels/kernels.h"
#include "test_kernel_check.h"
#include "test_attention_ref.h"
#include "test_flash_invariants.h"
#include "test_flash_packed.h"

/* float vs float (the naive kernel's result as the reference) */
static void check_close_f(const char *what, const float *got, const float *ref, size_t n, double rtol)
{
    double *d = to_double(ref, n);
    check_close(what, got, d, n, rtol);
    free(d);
}

/* check_close's measure, returned */
static double worst_err(const float *got, const double *ref, size_t n)
{
    double scale = rms(ref, n), worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - ref[i]) / (fabs(ref[i]) + scale);
        worst = e > worst ? e : worst;
    }
    return worst;
}

/* ---- one case ----------------------------------------------------------------------------------- */

static void run_case(int B, int T, int NH, int NKV, int hs, float qk_scale, bool fd)
{
    int C = NH * hs, KV = NKV * hs;
    size_t nq = (size_t)B * T * C, nk = (size_t)B * T * KV, nl = (size_t)B * NH * T;
    float *q = falloc(nq), *k = falloc(nk), *v = falloc(nk), *g = falloc(nq);
    fill(q, nq, qk_scale), fill(k, nk, qk_scale), fill(v, nk, 1.0f), fill(g, nq, 1.0f);
    float *out = falloc(nq), *lse = falloc(nl), *dq = falloc(nq), *dk = falloc(nk), *dv = falloc(nk);
    float *scratch = falloc(flash_attention_scratch_floats(B, T, NH, NKV, hs));
    fill(dq, nq, 100.0f), fill(dk, nk, 100.0f), fill(dv, nk, 100.0f); /* garbage: assigned */
    char what[128];

    flash_attention_gqa_forward(out, lse, scratch, q, k, v, B, T, NH, NKV, hs, C, KV, false, NULL);
    flash_attention_gqa_backward(dq, dk, dv, scratch, g, q, k, v, out, lse, B, T, NH, NKV, hs, C, KV, false, NULL);

    gqa_ctx c = {B, T, NH, NKV, hs, to_double(q, nq), to_double(k, nk), to_double(v, nk), to_double(g, nq), NULL};
    double *ro = dalloc(nq), *rl = dalloc(nl), *rq = dalloc(nq), *rk = dalloc(nk), *rv = dalloc(nk);
    ref_gqa_forward(ro, rl, NULL, &c);
    ref_gqa_backward(rq, rk, rv, &c);
    /* test_kernels.c's argument for attention.c holds here: a score carries ~u sqrt(hs)|q||k| scale
     * of error, exp turns it into a relative error of P (~50 u at |s| ~ 10), and the sums add
     * ~u sqrt(T); the online rescaling adds one rounding of e^(m - m') per key block. 1e-5 */
    snprintf(what, sizeof what, "flash fwd out B%d T%d NH%d NKV%d hs%d", B, T, NH, NKV, hs);
    check_close(what, out, ro, nq, 1e-5);
    /* lse = m + log l: l's relative error (~u sqrt(T)) becomes an absolute one in lse; judged
     * against rms(lse) ~ log T */
    check_close("flash fwd lse", lse, rl, nl, 1e-6);
    /* the forward's error, then dP (hs terms), D (hs terms) and T-term products: 2-3x it */
    check_close("flash bwd dq (ref)", dq, rq, nq, 3e-5);
    check_close("flash bwd dk (ref)", dk, rk, nk, 3e-5);
    check_close("flash bwd dv (ref)", dv, rv, nk, 3e-5);
    if (fd) {
        double *gq = fd_grad(ref_gqa_loss, &c, c.q, nq), *gk = fd_grad(ref_gqa_loss, &c, c.k, nk);
        double *gv = fd_grad(ref_gqa_loss, &c, c.v, nk);
        /* the finite differences are exact to ~1e-10: the bound is the fp32 kernel's, as above */
        check_close("flash bwd dq (FD)", dq, gq, nq, 3e-5);
        check_close("flash bwd dk (FD)", dk, gk, nk, 3e-5);
        check_close("flash bwd dv (FD)", dv, gv, nk, 3e-5);
        free(gq), free(gk), free(gv);
    }

    /* the materializing kernel on the same inputs: two fp32 computations of one quantity, each
     * within the bounds above of the exact one; measured their distance is ~1e-7 */
    size_t na = (size_t)B * NH * T * T;
    float *nout = falloc(nq), *att = falloc(na), *ndq = falloc(nq), *ndk = falloc(nk), *ndv = falloc(nk);
    float *nscratch = falloc(attention_gqa_scratch_floats(B, T, NKV));
    attention_gqa_forward(nout, att, q, k, v, B, T, NH, NKV, hs, C, KV, NULL);
    attention_gqa_backward(ndq, ndk, ndv, nscratch, g, q, k, v, att, B, T, NH, NKV, hs, C, KV);
    check_close_f("flash vs attention.c out", out, nout, nq, 1e-5);
    check_close_f("flash vs attention.c dq", dq, ndq, nq, 3e-5);
    check_close_f("flash vs attention.c dk", dk, ndk, nk, 3e-5);
    check_close_f("flash vs attention.c dv", dv, ndv, nk, 3e-5);

    /* a rerun, 1 thread, causality, the fused-qkv wrappers (test_flash_invariants.h) */
    flash_case fc = {B, T, NH, NKV, hs, q, k, v, g, out, lse, dq, dk, dv, scratch, false};
    flash_invariants(&fc);

    free(q), free(k), free(v), free(g), free(out), free(lse), free(dq), free(dk), free(dv), free(scratch);
    free(c.q), free(c.k), free(c.v), free(c.g), free(ro), free(rl), free(rq), free(rk), free(rv);
    free(nout), free(att), free(ndq), free(ndk), free(ndv), free(nscratch);
}

static void test_flash_small_fd(void **state)
{
    (void)state;
    run_case(2, 7, 2, 2, 10, 1.0f, true); /* GPT-2-like multi-head, one partial tile */
    run_case(1, 5, 3, 3, 4, 2.0f, true);
    run_case(2, 6, 4, 2, 4, 1.5f, true); /* grouped-query */
    run_case(1, 9, 6, 2, 6, 1.5f, true);
    run_case(1, 7, 4, 1, 4, 1.5f, true); /* one KV head (multi-query) */
}

static void test_flash_tiles(void **state)
{
    (void)state;
    run_case(2, 130, 3, 3, 32, 1.0f, false); /* 3 query tiles, 3 key blocks backward, partial */
    run_case(1, 256, 12, 12, 64, 0.5f, false); /* W1's head shape: one forward key block */
    run_case(1, 600, 2, 1, 64, 1.0f, false);   /* 3 forward key blocks (online rescaling), GQA,
                                                  3 backward query chunks */
    run_case(1, 520, 4, 2, 16, 3.0f, false);   /* sharp attention across key blocks */
}

/* rows with huge scores: s(t, u) = 2u (exact in fp32), so the running max of a row jumps by ~512
 * from one key block to the next, e^(m - m') underflows to 0, and the softmax is nearly one-hot:
 * no NaN, nothing of the new block lost. */
static void test_flash_extreme(void **state)
{
    (void)state;
    int B = 1, T = 600, NH = 1, hs = 16;
    size_t n = (size_t)T * hs;
    float *q = falloc(n), *k = falloc(n), *v = falloc(n), *g = falloc(n), *out = falloc(n), *lse = falloc(T);
    float *dq = falloc(n), *dk = falloc(n), *dv = falloc(n);
    float *scratch = falloc(flash_attention_scratch_floats(B, T, NH, NH, hs));
    fill(v, n, 1.0f), fill(g, n, 1.0f);
    for (int t = 0; t < T; t++)
        for (int i = 0; i < hs; i++) {
            q[(size_t)t * hs + i] = 1.0f;
            k[(size_t)t * hs + i] = (float)t * 0.5f; /* scale 1/4: s = 16 * 0.5 u / 4 = 2u */
        }
    flash_attention_gqa_forward(out, lse, scratch, q, k, v, B, T, NH, NH, hs, hs, hs, false, NULL);
    flash_attention_gqa_backward(dq, dk, dv, scratch, g, q, k, v, out, lse, B, T, NH, NH, hs, hs, hs, false, NULL);
    gqa_ctx c = {B, T, NH, NH, hs, to_double(q, n), to_double(k, n), to_double(v, n), to_double(g, n), NULL};
    double *ro = dalloc(n), *rl = dalloc(T), *rq = dalloc(n), *rk = dalloc(n), *rv = dalloc(n);
    ref_gqa_forward(ro, rl, NULL, &c);
    ref_gqa_backward(rq, rk, rv, &c);
    for (size_t i = 0; i < n; i++)
        assert_true(isfinite(out[i]) && isfinite(dq[i]) && isfinite(dk[i]) && isfinite(dv[i]));
    check_close("flash extreme out", out, ro, n, 1e-5);
    check_close("flash extreme lse", lse, rl, (size_t)T, 1e-6);
    /* backward: P = exp(S - lse) with lse ~ 600 held in one float, whose rounding (u 600 ~ 4e-5)
     * is P's relative error (attention.c subtracts the row max, exact here, instead): 1e-4 */
    check_close("flash extreme dv", dv, rv, n, 1e-4);
    /* dq: dS = P (dP - D) with P nearly one-hot cancels, and dq = scale sum_j dS (k_j - k_i) weighs
     * P's relative error (lse ~ 2i up to 1200 held in a float: half an ulp 6.1e-5) by |k_j| ~ 300
     * against differences of 0.5. At most 2x attention.c's own error, but never below 1e-3:
     * attention.c's error depends on how its softmax was compiled (3.9e-4 built for AVX-512,
     * 1.9e-4 for AVX2), flash's does not (6.5e-4 with the AVX-512 and with the portable tiles). */
    float *att = falloc((size_t)T * T), *ndq = falloc(n), *ndk = falloc(n), *ndv = falloc(n);
    float *nscratch = falloc(attention_gqa_scratch_floats(B, T, NH));
    attention_gqa_forward(NULL, att, q, k, v, B, T, NH, NH, hs, hs, hs, NULL);
    attention_gqa_backward(ndq, ndk, ndv, nscratch, g, q, k, v, att, B, T, NH, NH, hs, hs, hs);
    double eq = worst_err(ndq, rq, n), ek = worst_err(ndk, rk, n);
    print_message("  attention.c on the same: dq %.2e dk %.2e\n", eq, ek);
    check_close("flash extreme dq", dq, rq, n, 2 * eq > 1e-3 ? 2 * eq : 1e-3);
    check_close("flash extreme dk", dk, rk, n, 2 * ek > 1e-4 ? 2 * ek : 1e-4);
    free(att), free(ndq), free(ndk), free(ndv), free(nscratch);
    free(q), free(k), free(v), free(g), free(out), free(lse), free(dq), free(dk), free(dv), free(scratch);
    free(c.q), free(c.k), free(c.v), free(c.g), free(ro), free(rl), free(rq), free(rk), free(rv);
}

/* the scratch grows linearly in T (attention.c's grows as T²) */
static void test_flash_scratch_linear(void **state)
{
    (void)state;
    int nt = omp_get_max_threads();
    omp_set_num_threads(2);
    size_t s1 = flash_attention_scratch_floats(1, 1024, 12, 12, 64), s4 = flash_attention_scratch_floats(1, 4096, 12, 12, 64);
    size_t s8 = flash_attention_scratch_floats(1, 8192, 12, 12, 64);
    print_message("  flash scratch floats T=1024 %zu, 4096 %zu, 8192 %zu; attention.c at 4096 %zu\n", s1, s4, s8,
                  attention_gqa_scratch_floats(1, 4096, 12));
    assert_true(3 * (s8 - s4) == 4 * (s4 - s1)); /* affine in T: equal steps per token */
    assert_true(s4 < attention_gqa_scratch_floats(1, 4096, 12) / 10); /* and attention.c also saves (B,NH,T,T) */
    omp_set_num_threads(nt);
}

/* ---- packed documents ------------------------------------------------------------------------ */

/* flash and attention.c with positions against the double reference with the same masks (and its
 * finite differences when fd): the bounds of run_case, whose arguments hold per document. */
static void run_packed_ref(int B, int T, int NH, int NKV, int hs, const packed_row *rows, bool fd)
{
    int C = NH * hs, KV = NKV * hs;
    size_t nq = (size_t)B * T * C, nk = (size_t)B * T * KV, nl = (size_t)B * NH * T, na = (size_t)B * NH * T * T;
    float *q = falloc(nq), *k = falloc(nk), *v = falloc(nk), *g = falloc(nq);
    fill(q, nq, 1.5f), fill(k, nk, 1.5f), fill(v, nk, 1.0f), fill(g, nq, 1.0f);
    int32_t *pos = malloc((size_t)B * T * sizeof *pos);
    assert_non_null(pos);
    packed_positions(pos, B, T, rows);
    float *out = falloc(nq), *lse = falloc(nl), *dq = falloc(nq), *dk = falloc(nk), *dv = falloc(nk);
    float *scratch = falloc(flash_attention_scratch_floats(B, T, NH, NKV, hs));
    fill(dq, nq, 100.0f), fill(dk, nk, 100.0f), fill(dv, nk, 100.0f);
    flash_attention_gqa_forward(out, lse, scratch, q, k, v, B, T, NH, NKV, hs, C, KV, false, pos);
    flash_attention_gqa_backward(dq, dk, dv, scratch, g, q, k, v, out, lse, B, T, NH, NKV, hs, C, KV, false, pos);
    gqa_ctx c = {B, T, NH, NKV, hs, to_double(q, nq), to_double(k, nk), to_double(v, nk), to_double(g, nq), pos};
    double *ro = dalloc(nq), *rl = dalloc(nl), *rq = dalloc(nq), *rk = dalloc(nk), *rv = dalloc(nk);
    ref_gqa_forward(ro, rl, NULL, &c);
    ref_gqa_backward(rq, rk, rv, &c);
    char what[128];
    snprintf(what, sizeof what, "packed flash out B%d T%d NH%d NKV%d hs%d", B, T, NH, NKV, hs);
    check_close(what, out, ro, nq, 1e-5);
    check_close("packed flash lse", lse, rl, nl, 1e-6);
    check_close("packed flash dq (ref)", dq, rq, nq, 3e-5);
    check_close("packed flash dk (ref)", dk, rk, nk, 3e-5);
    check_close("packed flash dv (ref)", dv, rv, nk, 3e-5);
    if (fd) {
        double *gq = fd_grad(ref_gqa_loss, &c, c.q, nq), *gk = fd_grad(ref_gqa_loss, &c, c.k, nk);
        double *gv = fd_grad(ref_gqa_loss, &c, c.v, nk);
        check_close("packed flash dq (FD)", dq, gq, nq, 3e-5);
        check_close("packed flash dk (FD)", dk, gk, nk, 3e-5);
        check_close("packed flash dv (FD)", dv, gv, nk, 3e-5);
        free(gq), free(gk), free(gv);
    }
    /* attention.c with positions: against the reference (its probabilities too) and flash */
    float *nout = falloc(nq), *att = falloc(na), *ndq = falloc(nq), *ndk = falloc(nk), *ndv = falloc(nk);
    float *nscratch = falloc(attention_gqa_scratch_floats(B, T, NKV));
    double *rP = dalloc(na);
    fill(att, na, 100.0f); /* every entry assigned, the masked ones 0 */
    attention_gqa_forward(nout, att, q, k, v, B, T, NH, NKV, hs, C, KV, pos);
    attention_gqa_backward(ndq, ndk, ndv, nscratch, g, q, k, v, att, B, T, NH, NKV, hs, C, KV);
    ref_gqa_forward(ro, NULL, rP, &c);
    check_close("packed attention.c att", att, rP, na, 1e-5);
    for (size_t i = 0; i < na; i++)
        if (rP[i] == 0.0)
            assert_true(att[i] == 0.0f);
    check_close("packed attention.c out", nout, ro, nq, 1e-5);
    check_close("packed attention.c dq", ndq, rq, nq, 3e-5);
    check_close("packed attention.c dk", ndk, rk, nk, 3e-5);
    check_close("packed attention.c dv", ndv, rv, nk, 3e-5);
    check_close_f("packed flash vs attention.c out", out, nout, nq, 1e-5);
    check_close_f("packed flash vs attention.c dq", dq, ndq, nq, 3e-5);
    check_close_f("packed flash vs attention.c dk", dk, ndk, nk, 3e-5);
    check_close_f("packed flash vs attention.c dv", dv, ndv, nk, 3e-5);
    /* the fused-qkv wrappers with positions: the bits of the strided call (multi-head only) */
    if (NKV == NH) {
        float *qkv = falloc(3 * nq), *dqkv = falloc(3 * nq), *o2 = falloc(nq), *l2 = falloc(nl);
        for (size_t r = 0; r < (size_t)B * T; r++) {
            memcpy(qkv + r * 3 * C, q + r * C, C * sizeof(float));
            memcpy(qkv + r * 3 * C + C, k + r * C, C * sizeof(float));
            memcpy(qkv + r * 3 * C + 2 * C, v + r * C, C * sizeof(float));
        }
        flash_attention_forward(o2, l2, scratch, qkv, B, T, C, NH, false, pos);
        flash_attention_backward(dqkv, scratch, g, qkv, o2, l2, B, T, C, NH, false, pos);
        assert_same_bits("packed fused-qkv out", out, o2, nq);
        for (size_t r = 0; r < (size_t)B * T; r++) {
            assert_same_bits("packed fused-qkv dq", dq + r * C, dqkv + r * 3 * C, (size_t)C);
            assert_same_bits("packed fused-qkv dk", dk + r * C, dqkv + r * 3 * C + C, (size_t)C);
            assert_same_bits("packed fused-qkv dv", dv + r * C, dqkv + r * 3 * C + 2 * C, (size_t)C);
        }
        float *a2 = falloc(na);
        attention_forward(o2, a2, qkv, B, T, C, NH, pos);
        assert_same_bits("packed attention_forward (fused) att", att, a2, na);
        free(qkv), free(dqkv), free(o2), free(l2), free(a2);
    }
    free(q), free(k), free(v), free(g), free(pos), free(out), free(lse), free(dq), free(dk), free(dv), free(scratch);
    free(c.q), free(c.k), free(c.v), free(c.g), free(ro), free(rl), free(rq), free(rk), free(rv), free(rP);
    free(nout), free(att), free(ndq), free(ndk), free(ndv), free(nscratch);
}

static void test_flash_packed_small_fd(void **state)
{
    (void)state;
    const packed_row a[2] = {{{1, 3, 5}}, {{9}}};
    run_packed_ref(2, 9, 2, 1, 4, a, true); /* a 1-token document, one filling its row; GQA */
    const packed_row b[2] = {{{5, 7}}, {{1, 1, 10}}};
    run_packed_ref(2, 12, 3, 3, 6, b, true);
}

/* positions all 0 .. T-1 (one document per row) give the bits of no positions */
static void test_flash_packed_one_document(void **state)
{
    (void)state;
    int B = 2, T = 300, NH = 4, NKV = 2, hs = 32, C = NH * hs, KV = NKV * hs;
    size_t nq = (size_t)B * T * C, nk = (size_t)B * T * KV, nl = (size_t)B * NH * T;
    float *q = falloc(nq), *k = falloc(nk), *v = falloc(nk), *g = falloc(nq);
    fill(q, nq, 1.5f), fill(k, nk, 1.5f), fill(v, nk, 1.0f), fill(g, nq, 1.0f);
    int32_t *pos = malloc((size_t)B * T * sizeof *pos);
    assert_non_null(pos);
    for (int i = 0; i < B * T; i++)
        pos[i] = i % T;
    float *scratch = falloc(flash_attention_scratch_floats(B, T, NH, NKV, hs));
    for (int bf = 0; bf < 2; bf++) {
        float *o[2], *l[2], *dq[2], *dk[2], *dv[2];
        for (int r = 0; r < 2; r++) {
            o[r] = falloc(nq), l[r] = falloc(nl), dq[r] = falloc(nq), dk[r] = falloc(nk), dv[r] = falloc(nk);
            const int32_t *p = r ? pos : NULL;
            flash_attention_gqa_forward(o[r], l[r], scratch, q, k, v, B, T, NH, NKV, hs, C, KV, bf, p);
            flash_attention_gqa_backward(dq[r], dk[r], dv[r], scratch, g, q, k, v, o[r], l[r], B, T, NH, NKV, hs, C,
                                         KV, bf, p);
        }
        assert_same_bits("one document out", o[0], o[1], nq);
        assert_same_bits("one document lse", l[0], l[1], nl);
        assert_same_bits("one document dq", dq[0], dq[1], nq);
        assert_same_bits("one document dk", dk[0], dk[1], nk);
        assert_same_bits("one document dv", dv[0], dv[1], nk);
        for (int r = 0; r < 2; r++)
            free(o[r]), free(l[r]), free(dq[r]), free(dk[r]), free(dv[r]);
    }
    free(q), free(k), free(v), free(g), free(pos), free(scratch);
}

/* Each document of a packed batch against its own run (test_flash_packed.h). Unaligned documents:
 * two fp32 computations of one quantity, each within run_case's bounds (1e-5 out, 1e-6 lse, 3e-5
 * gradients) of the exact one; their distance is bounded by the same (measured ~1e-7). */
static void test_flash_packed_documents(void **state)
{
    (void)state;
    const packed_row a[2] = {{{1, 127, 128, 100, 164}}, {{520}}}; /* starts 0 1 128 256 356 */
    flash_packed_case(2, 520, 4, 2, 32, a, false, (packed_tol){1e-5, 1e-6, 3e-5});
    const packed_row b[3] = {{{300}}, {{70, 1, 1, 228}}, {{150, 150}}};
    flash_packed_case(3, 300, 3, 3, 16, b, false, (packed_tol){1e-5, 1e-6, 3e-5});
    const packed_row c[1] = {{{30, 600, 70}}}; /* 3 forward key blocks cut elsewhere than alone */
    flash_packed_case(1, 700, 2, 1, 64, c, false, (packed_tol){1e-5, 1e-6, 3e-5});
    run_packed_ref(3, 300, 3, 3, 16, b, false);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flash_small_fd),
        cmocka_unit_test(test_flash_tiles),
        cmocka_unit_test(test_flash_packed_small_fd),
        cmocka_unit_test(test_flash_packed_one_document),
        cmocka_unit_test(test_flash_packed_documents),
        cmocka_unit_test(test_flash_extreme),
        cmocka_unit_test(test_flash_scratch_linear),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
