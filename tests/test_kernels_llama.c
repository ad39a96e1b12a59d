/* test_kernels_llama.c - unit tests of Llama's kernels (kernels.h): rmsnorm, rope (with Llama 3's
 * frequency scaling), swiglu and grouped-query attention. Each fp32 forward is compared with a
 * plain double-precision reference written here, and each fp32 backward with central finite
 * differences of that double reference (the loss L = Σ g·forward(...) with a random upstream g,
 * every element of every input perturbed; eps = 1e-6 in double, so the differences are exact to
 * ~1e-10 relative and the bound measures the fp32 kernel alone). Reruns on 1 and 2 threads must
 * give the same bits; the fused forms (rope on q and k at once, the residual with the norm, outputs
 * in bf16/fp16) the same bits as the kernels they fuse. Tolerances: |got - ref| <= rtol (|ref| + rms(ref)) (test_kernel_check.h);
 * each rtol is argued at its check.
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

#define TEST_RNG_SEED 0x4C4C414D41ull
#include "kernels/kernels.h"
#include "test_kernel_check.h"
#include "test_attention_ref.h"

/* got (fp32, minus the value it held before a += kernel) vs a double gradient */
static void check_grad(const char *what, const float *got, const float *before, const double *ref,
                       size_t n, double rtol)
{
    float *d = falloc(n);
    for (size_t i = 0; i < n; i++)
        d[i] = before ? got[i] - before[i] : got[i];
    check_close(what, d, ref, n, rtol);
    free(d);
}

/* ---- rmsnorm ---------------------------------------------------------------------------------- */

typedef struct {
    int N, C;
    double eps, *x, *w, *g;
} rms_ctx;

static void ref_rmsnorm(double *out, const double *x, const double *w, double eps, int N, int C)
{
    for (int r = 0; r < N; r++) {
        double ms = 0;
        for (int i = 0; i < C; i++)
            ms += x[(size_t)r * C + i] * x[(size_t)r * C + i];
        double s = 1.0 / sqrt(ms / C + eps);
        for (int i = 0; i < C; i++)
            out[(size_t)r * C + i] = x[(size_t)r * C + i] * s * w[i];
    }
}

static double rms_loss(void *p)
{
    rms_ctx *c = p;
    size_t n = (size_t)c->N * c->C;
    double *o = dalloc(n);
    ref_rmsnorm(o, c->x, c->w, c->eps, c->N, c->C);
    double l = dot_gd(c->g, o, n);
    free(o);
    return l;
}

static void run_rmsnorm(int N, int C)
{
    size_t n = (size_t)N * C;
    float *x = falloc(n), *w = falloc(C), *g = falloc(n), *out = falloc(n), *rstd = falloc(N);
    fill(x, n, 2.0f), fill(g, n, 1.0f);
    for (int i = 0; i < C; i++)
        w[i] = 1.0f + 0.5f * (float)rng_uniform();
    float eps = 1e-5f;
    rmsnorm_forward(out, rstd, x, w, eps, N, C);
    rms_ctx c = {N, C, eps, to_double(x, n), to_double(w, C), to_double(g, n)};
    double *ref = dalloc(n);
    ref_rmsnorm(ref, c.x, c.w, eps, N, C);
    /* mean of C squares (~sqrt(C/16) u in the lane sums), a sqrt and two products: ~10 u */
    check_close("rmsnorm_forward", out, ref, n, 2e-6);
    /* backward accumulates (+=): start from nonzero values and subtract them */
    float *dx = falloc(n), *dw = falloc(C), *dx0 = falloc(n), *dw0 = falloc(C);
    fill(dx0, n, 1.0f), fill(dw0, C, 1.0f);
    memcpy(dx, dx0, n * 4), memcpy(dw, dw0, (size_t)C * 4);
    rmsnorm_backward(dx, dw, g, x, w, rstd, N, C);
    double *gx = fd_grad(rms_loss, &c, c.x, n), *gw = fd_grad(rms_loss, &c, c.w, C);
    /* dx: a C-term dot product cancelling against w·dy (~sqrt(C) u), then the subtraction of the
     * nonzero start; dw: an N-term sum. 2e-6 ~ 30 u (measured up to 1.8e-7) */
    check_grad("rmsnorm_backward dinp (FD)", dx, dx0, gx, n, 2e-6);
    check_grad("rmsnorm_backward dweight (FD)", dw, dw0, gw, C, 2e-6);
    /* the same bits on 1 thread */
    int nt = omp_get_max_threads();
    float *out2 = falloc(n), *rstd2 = falloc(N), *dx2 = fdup(dx0, n), *dw2 = fdup(dw0, C);
    omp_set_num_threads(1);
    rmsnorm_forward(out2, rstd2, x, w, eps, N, C);
    rmsnorm_backward(dx2, dw2, g, x, w, rstd2, N, C);
    omp_set_num_threads(nt);
    assert_same_bits("rmsnorm out 1 thread", out, out2, n);
    assert_same_bits("rmsnorm dinp 1 thread", dx, dx2, n);
    assert_same_bits("rmsnorm dweight 1 thread", dw, dw2, C);
    free(x), free(w), free(g), free(out), free(rstd), free(dx), free(dw), free(dx0), free(dw0);
    free(out2), free(rstd2), free(dx2), free(dw2), free(c.x), free(c.w), free(c.g), free(ref), free(gx), free(gw);
}

static void test_rmsnorm(void **state)
{
    (void)state;
    run_rmsnorm(5, 37);
    run_rmsnorm(3, 64);
    run_rmsnorm(17, 130);
}

/* ---- rope ------------------------------------------------------------------------------------- */

typedef struct {
    int B, T, nh, hs;
    const double *inv;
    double *x, *g;
} rope_ctx;

static void ref_rope(double *out, const double *x, const double *inv, int B, int T, int nh, int hs)
{
    int half = hs / 2;
    for (int bt = 0; bt < B * T; bt++)
        for (int h = 0; h < nh; h++) {
            const double *xi = x + ((size_t)bt * nh + h) * hs;
            double *o = out + ((size_t)bt * nh + h) * hs;
            for (int i = 0; i < half; i++) {
                double a = (double)(float)((float)(bt % T) * (float)inv[i]); /* fp32 angle, as the kernel */
                o[i] = xi[i] * cos(a) - xi[i + half] * sin(a);
                o[i + half] = xi[i + half] * cos(a) + xi[i] * sin(a);
            }
        }
}

static double rope_loss(void *p)
{
    rope_ctx *c = p;
    size_t n = (size_t)c->B * c->T * c->nh * c->hs;
    double *o = dalloc(n);
    ref_rope(o, c->x, c->inv, c->B, c->T, c->nh, c->hs);
    double l = dot_gd(c->g, o, n);
    free(o);
    return l;
}

/* transformers' _compute_llama3_parameters, written out again in double */
static double ref_llama3_inv(int i, int hs, double theta, double factor, double lo, double hi, double old)
{
    double inv = 1.0 / pow(theta, 2.0 * i / hs), wavelen = 2 * M_PI / inv;
    double scaled = wavelen > old / lo ? inv / factor : inv;
    double smooth = (old / wavelen - lo) / (hi - lo);
    bool medium = !(wavelen < old / hi) && !(wavelen > old / lo);
    return medium ? (1 - smooth) * scaled / factor + smooth * scaled : scaled;
}

static void run_rope(int B, int T, int nh, int hs, double theta, bool scaled)
{
    size_t n = (size_t)B * T * nh * hs;
    float *x = falloc(n), *g = falloc(n), inv[hs / 2];
    fill(x, n, 1.0f), fill(g, n, 1.0f);
    rope_inv_freq(inv, hs, theta, scaled ? 8.0 : 0.0, 1.0, 4.0, 8192);
    double invd[hs / 2];
    for (int i = 0; i < hs / 2; i++) {
        double r = scaled ? ref_llama3_inv(i, hs, theta, 8.0, 1.0, 4.0, 8192) : pow(theta, -2.0 * i / hs);
        /* fp32 rounding of inv, and of theta^(-2i/hs) before the blend: a few ulp */
        assert_true(fabs(inv[i] - r) <= 4e-7 * r);
        invd[i] = inv[i];
    }
    if (scaled) { /* the three regimes all occur at hs = 128, theta = 500000 */
        assert_true(fabs(inv[1] - pow(theta, -2.0 / hs)) <= 4e-7 * inv[1]);              /* high freq kept */
        assert_true(fabs(inv[hs / 2 - 1] - pow(theta, -(hs - 2.0) / hs) / 8) <= 4e-7 * inv[hs / 2 - 1]); /* /8 */
    }
    float *y = fdup(x, n);
    rope_forward(y, inv, B, T, nh, hs, NULL);
    rope_ctx c = {B, T, nh, hs, invd, to_double(x, n), to_double(g, n)};
    double *ref = dalloc(n);
    ref_rope(ref, c.x, invd, B, T, nh, hs);
    /* cos and sin in double rounded to fp32, two products and a sum: ~3 u */
    check_close("rope_forward", y, ref, n, 1e-6);
    float *dx = fdup(g, n);
    rope_backward(dx, inv, B, T, nh, hs, NULL);
    double *gx = fd_grad(rope_loss, &c, c.x, n);
    check_grad("rope_backward (FD)", dx, NULL, gx, n, 1e-6);
    float *y2 = fdup(x, n);
    int nt = omp_get_max_threads();
    omp_set_num_threads(1);
    rope_forward(y2, inv, B, T, nh, hs, NULL);
    omp_set_num_threads(nt);
    assert_same_bits("rope 1 thread", y, y2, n);
    /* q and k in one call: the bits of a call on each (x as q, g as a k of nh - 1 heads) */
    size_t nk = (size_t)B * T * (nh - 1) * hs;
    float *q2 = fdup(x, n), *k1 = fdup(g, nk), *k2 = fdup(g, nk), *dq = fdup(g, n), *dk1 = fdup(x, nk), *dk2 = fdup(x, nk);
    rope_forward_qk(q2, k2, inv, B, T, nh, nh - 1, hs, NULL);
    rope_forward(k1, inv, B, T, nh - 1, hs, NULL);
    assert_same_bits("rope_forward_qk q", y, q2, n);
    assert_same_bits("rope_forward_qk k", k1, k2, nk);
    rope_backward_qk(dq, dk2, inv, B, T, nh, nh - 1, hs, NULL);
    rope_backward(dk1, inv, B, T, nh - 1, hs, NULL);
    assert_same_bits("rope_backward_qk dq", dx, dq, n);
    assert_same_bits("rope_backward_qk dk", dk1, dk2, nk);
    free(q2), free(k1), free(k2), free(dq), free(dk1), free(dk2);
    free(x), free(g), free(y), free(y2), free(dx), free(c.x), free(c.g), free(ref), free(gx);
}

static void test_rope(void **state)
{
    (void)state;
    run_rope(2, 7, 3, 8, 10000.0, false);
    run_rope(1, 33, 2, 16, 10000.0, false);
    run_rope(1, 9, 2, 128, 500000.0, true);
}

/* Packed documents (positions): each token is rotated, forward and backward, exactly as the token
 * at its own position of an unpacked row (the same angles, the same bits), q and k in one call as
 * on each, on 1 thread as on 2. */
static void test_rope_positions(void **state)
{
    (void)state;
    enum { B = 2, T = 13, nh = 3, nk = 2, hs = 16 };
    static const int docs[B][4] = {{1, 5, 7, 0}, {13, 0, 0, 0}};
    int32_t pos[B * T];
    for (int b = 0; b < B; b++)
        for (int d = 0, t = 0; docs[b][d]; d++)
            for (int i = 0; i < docs[b][d]; i++)
                pos[b * T + t++] = i;
    size_t n = (size_t)B * T * nh * hs, row = (size_t)nh * hs;
    float inv[hs / 2];
    rope_inv_freq(inv, hs, 10000.0, 0.0, 1.0, 4.0, 8192);
    float *x = falloc(n), *y = falloc(n), *dy = falloc(n), *alone = falloc((size_t)T * row);
    fill(x, n, 1.0f);
    memcpy(y, x, n * sizeof *y), memcpy(dy, x, n * sizeof *dy);
    rope_forward(y, inv, B, T, nh, hs, pos);
    rope_backward(dy, inv, B, T, nh, hs, pos);
    for (int bt = 0; bt < B * T; bt++) {
        int p = pos[bt];
        for (int dir = 0; dir < 2; dir++) { /* the token at row p of an unpacked sequence of p + 1 */
            memset(alone, 0, (size_t)T * row * sizeof *alone);
            memcpy(alone + (size_t)p * row, x + (size_t)bt * row, row * sizeof *alone);
            if (dir == 0)
                rope_forward(alone, inv, 1, p + 1, nh, hs, NULL);
            else
                rope_backward(alone, inv, 1, p + 1, nh, hs, NULL);
            assert_same_bits(dir ? "rope_backward packed token" : "rope_forward packed token",
                             (dir ? dy : y) + (size_t)bt * row, alone + (size_t)p * row, row);
        }
    }
    /* q and k together, and 1 thread */
    size_t nkv = (size_t)B * T * nk * hs;
    float *q = fdup(x, n), *k = falloc(nkv), *k1 = falloc(nkv);
    fill(k, nkv, 1.0f);
    memcpy(k1, k, nkv * sizeof *k1);
    int nt = omp_get_max_threads();
    omp_set_num_threads(1);
    rope_forward_qk(q, k, inv, B, T, nh, nk, hs, pos);
    omp_set_num_threads(nt);
    rope_forward(k1, inv, B, T, nk, hs, pos);
    assert_same_bits("rope_forward_qk packed q", y, q, n);
    assert_same_bits("rope_forward_qk packed k", k1, k, nkv);
    rope_backward_qk(q, k, inv, B, T, nh, nk, hs, pos); /* the inverse rotation: back to x within rounding */
    double *xd = to_double(x, n);
    check_close("rope backward(forward) packed", q, xd, n, 1e-6);
    free(x), free(y), free(dy), free(alone), free(q), free(k), free(k1), free(xd);
}

/* ---- swiglu ----------------------------------------------------------------------------------- */

typedef struct {
    size_t n;
    double *gate, *up, *g;
} swiglu_ctx;

static double ref_silu(double x) { return x / (1.0 + exp(-x)); }

static double swiglu_loss(void *p)
{
    swiglu_ctx *c = p;
    double s = 0;
    for (size_t i = 0; i < c->n; i++)
        s += c->g[i] * ref_silu(c->gate[i]) * c->up[i];
    return s;
}

static void test_swiglu(void **state)
{
    (void)state;
    size_t n = 1003;
    float *gate = falloc(n), *up = falloc(n), *g = falloc(n), *out = falloc(n), *dg = falloc(n), *du = falloc(n);
    fill(gate, n, 6.0f), fill(up, n, 2.0f), fill(g, n, 1.0f);
    swiglu_forward(out, gate, up, n);
    swiglu_ctx c = {n, to_double(gate, n), to_double(up, n), to_double(g, n)};
    double *ref = dalloc(n);
    for (size_t i = 0; i < n; i++)
        ref[i] = ref_silu(c.gate[i]) * c.up[i];
    /* vecmath's sigmoid (exp within a few ulp, a division) and two products: ~8 u */
    check_close("swiglu_forward", out, ref, n, 2e-6);
    memcpy(dg, g, n * 4); /* in place: dgate over dout */
    swiglu_backward(dg, du, dg, gate, up, n);
    double *gg = fd_grad(swiglu_loss, &c, c.gate, n), *gu = fd_grad(swiglu_loss, &c, c.up, n);
    check_grad("swiglu_backward dgate (FD)", dg, NULL, gg, n, 4e-6);
    check_grad("swiglu_backward dup (FD)", du, NULL, gu, n, 2e-6);
    free(gate), free(up), free(g), free(out), free(dg), free(du), free(c.gate), free(c.up), free(c.g);
    free(ref), free(gg), free(gu);
}

/* ---- the fused forward forms: the bits of the kernels they fuse -------------------------------- */

/* rmsnorm_forward_to, residual_rmsnorm_forward and swiglu_forward_to against rmsnorm_forward,
 * residual_forward and swiglu_forward followed by zt_round_to_lp (bf16 and fp16), and in fp32 */
static void test_fused_forward_forms(void **state)
{
    (void)state;
    const int N = 7, C = 200; /* C not a multiple of 16 or of 32 */
    const size_t n = (size_t)N * C, nh = 5003; /* nh: not a multiple of the chunk or the vector */
    float *a = falloc(n), *b = falloc(n), *w = falloc(C), *res = falloc(n), *ref = falloc(n), *rstd = falloc(N);
    float *out = falloc(n), *rstd2 = falloc(N), *res2 = falloc(n), *lp = falloc(n), *lpref = falloc(n);
    float *gate = falloc(nh), *up = falloc(nh), *h = falloc(nh), *h2 = falloc(nh), *hl = falloc(nh), *hlref = falloc(nh);
    fill(a, n, 3.0f), fill(b, n, 1.0f), fill(w, C, 2.0f), fill(gate, nh, 8.0f), fill(up, nh, 2.0f);
    a[3] = 1e-40f; /* a subnormal: the bf16 rule flushes it wherever it falls */
    residual_forward(res, a, b, n);
    rmsnorm_forward(ref, rstd, res, w, 1e-5f, N, C);
    swiglu_forward(h, gate, up, nh);
    for (int kind = 0; kind <= ZT_LP_FP16; kind++) {
        memset(out, 0, n * 4), memset(res2, 0, n * 4), memset(lp, 0, n * 4), memset(lpref, 0, n * 4);
        const float *want = ref, *wanth = h;
        if (kind) {
            memset(lpref, 0, n * 4), memset(hlref, 0, nh * 4); /* the odd tail's spare bytes compare equal */
            zt_round_to_lp((zt_lp_kind)kind, lpref, ref, n);
            zt_round_to_lp((zt_lp_kind)kind, hlref, h, nh);
            want = lpref, wanth = hlref;
        }
        size_t words = kind == ZT_LP_BF16 ? (n + 1) / 2 : n, wordsh = kind == ZT_LP_BF16 ? (nh + 1) / 2 : nh;
        rmsnorm_forward_to(lp, kind, rstd2, res, w, 1e-5f, N, C);
        assert_same_bits("rmsnorm_forward_to", want, lp, words);
        assert_same_bits("rmsnorm_forward_to rstd", rstd, rstd2, N);
        memset(lp, 0, n * 4);
        residual_rmsnorm_forward(res2, lp, kind, rstd2, a, b, w, 1e-5f, N, C);
        assert_same_bits("residual_rmsnorm_forward res", res, res2, n);
        assert_same_bits("residual_rmsnorm_forward out", want, lp, words);
        assert_same_bits("residual_rmsnorm_forward rstd", rstd, rstd2, N);
        memset(hl, 0, nh * 4);
        swiglu_forward_to(hl, kind, gate, up, nh);
        assert_same_bits("swiglu_forward_to", wanth, hl, wordsh);
        int nt = omp_get_max_threads(); /* and on 1 thread */
        omp_set_num_threads(1);
        memset(h2, 0, nh * 4), memset(out, 0, n * 4);
        swiglu_forward_to(h2, kind, gate, up, nh);
        residual_rmsnorm_forward(res2, out, kind, rstd2, a, b, w, 1e-5f, N, C);
        omp_set_num_threads(nt);
        assert_same_bits("swiglu_forward_to 1 thread", hl, h2, wordsh);
        /* backward: dgate, dup rounded as made (dout: h, any values) */
        float *dg = falloc(nh), *du = falloc(nh), *dgl = falloc(nh), *dul = falloc(nh);
        memset(dgl, 0, nh * 4), memset(dul, 0, nh * 4);
        swiglu_backward(dg, du, h, gate, up, nh);
        if (kind) {
            float *dgr = falloc(nh), *dur = falloc(nh);
            memset(dgr, 0, nh * 4), memset(dur, 0, nh * 4);
            zt_round_to_lp((zt_lp_kind)kind, dgr, dg, nh), zt_round_to_lp((zt_lp_kind)kind, dur, du, nh);
            memcpy(dg, dgr, nh * 4), memcpy(du, dur, nh * 4);
            free(dgr), free(dur);
        }
        swiglu_backward_to(dgl, dul, kind, h, gate, up, nh);
        assert_same_bits("swiglu_backward_to dgate", dg, dgl, wordsh);
        assert_same_bits("swiglu_backward_to dup", du, dul, wordsh);
        free(dg), free(du), free(dgl), free(dul);
        assert_same_bits("residual_rmsnorm_forward 1 thread", lp, out, words);
    }
    free(a), free(b), free(w), free(res), free(ref), free(rstd), free(out), free(rstd2), free(res2), free(lp);
    free(lpref), free(gate), free(up), free(h), free(h2), free(hl), free(hlref);
}

/* ---- grouped-query attention ----------------------------------------------------------------- */

static void run_gqa(int B, int T, int NH, int NKV, int hs)
{
    int C = NH * hs, KV = NKV * hs;
    size_t nq = (size_t)B * T * C, nk = (size_t)B * T * KV, na = (size_t)B * NH * T * T;
    float *q = falloc(nq), *k = falloc(nk), *v = falloc(nk), *g = falloc(nq), *out = falloc(nq), *att = falloc(na);
    fill(q, nq, 1.5f), fill(k, nk, 1.5f), fill(v, nk, 1.0f), fill(g, nq, 1.0f);
    attention_gqa_forward(out, att, q, k, v, B, T, NH, NKV, hs, C, KV, NULL);
    gqa_ctx c = {B, T, NH, NKV, hs, to_double(q, nq), to_double(k, nk), to_double(v, nk), to_double(g, nq), NULL};
    double *ref = dalloc(nq);
    ref_gqa_forward(ref, NULL, NULL, &c);
    char what[96];
    snprintf(what, sizeof what, "attention_gqa_forward B%d T%d NH%d NKV%d hs%d", B, T, NH, NKV, hs);
    /* test_kernels.c's attention argument (scores of ~|q||k| scale, softmax, T-term sums) at
     * these short T: 3e-6 ~ 50 u (measured up to 1.6e-7) */
    check_close(what, out, ref, nq, 3e-6);
    float *dq = falloc(nq), *dk = falloc(nk), *dv = falloc(nk);
    float *scratch = falloc(attention_gqa_scratch_floats(B, T, NKV));
    fill(dk, nk, 100.0f), fill(dv, nk, 100.0f); /* garbage: the backward assigns */
    attention_gqa_backward(dq, dk, dv, scratch, g, q, k, v, att, B, T, NH, NKV, hs, C, KV);
    double *gq = fd_grad(ref_gqa_loss, &c, c.q, nq), *gk = fd_grad(ref_gqa_loss, &c, c.k, nk);
    double *gv = fd_grad(ref_gqa_loss, &c, c.v, nk);
    /* 2-3x the forward's, as test_kernels.c argues; dk and dv add G heads' terms (measured up to
     * 4.5e-7) */
    check_grad("attention_gqa_backward dq (FD)", dq, NULL, gq, nq, 6e-6);
    check_grad("attention_gqa_backward dk (FD)", dk, NULL, gk, nk, 6e-6);
    check_grad("attention_gqa_backward dv (FD)", dv, NULL, gv, nk, 6e-6);
    /* with every KV head repeated G times, plain multi-head attention gives the same bits */
    float *qkv = falloc(3 * nq), *out2 = falloc(nq), *att2 = falloc(na);
    for (int bt = 0; bt < B * T; bt++)
        for (int h = 0; h < NH; h++)
            for (int i = 0; i < hs; i++) {
                size_t kvi = (size_t)bt * KV + (size_t)(h / (NH / NKV)) * hs + i;
                qkv[(size_t)bt * 3 * C + h * hs + i] = q[(size_t)bt * C + h * hs + i];
                qkv[(size_t)bt * 3 * C + C + h * hs + i] = k[kvi];
                qkv[(size_t)bt * 3 * C + 2 * C + h * hs + i] = v[kvi];
            }
    attention_forward(out2, att2, qkv, B, T, C, NH, NULL);
    assert_same_bits("gqa = mha with repeated KV heads: out", out, out2, nq);
    /* 1 thread: the same bits */
    float *dq2 = falloc(nq), *dk2 = falloc(nk), *dv2 = falloc(nk);
    int nt = omp_get_max_threads();
    omp_set_num_threads(1);
    attention_gqa_backward(dq2, dk2, dv2, scratch, g, q, k, v, att, B, T, NH, NKV, hs, C, KV);
    omp_set_num_threads(nt);
    assert_same_bits("gqa dq 1 thread", dq, dq2, nq);
    assert_same_bits("gqa dk 1 thread", dk, dk2, nk);
    assert_same_bits("gqa dv 1 thread", dv, dv2, nk);
    free(q), free(k), free(v), free(g), free(out), free(att), free(c.q), free(c.k), free(c.v), free(c.g);
    free(ref), free(dq), free(dk), free(dv), free(scratch), free(gq), free(gk), free(gv), free(qkv);
    free(out2), free(att2), free(dq2), free(dk2), free(dv2);
}

static void test_gqa_attention(void **state)
{
    (void)state;
    run_gqa(2, 6, 4, 2, 4);
    run_gqa(1, 9, 6, 2, 6);
    run_gqa(2, 5, 3, 3, 8); /* NKV = NH: multi-head */
    run_gqa(1, 7, 4, 1, 4); /* one KV head (multi-query) */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rmsnorm),
        cmocka_unit_test(test_rope),
        cmocka_unit_test(test_rope_positions),
        cmocka_unit_test(test_swiglu),
        cmocka_unit_test(test_fused_forward_forms),
        cmocka_unit_test(test_gqa_attention),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
