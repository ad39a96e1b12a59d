/* test_kernels.c - unit tests of src/kernels/ (kernels.h): every fp32 kernel against a plain
 * double-precision reference written here, every reference backward against central finite
 * differences of the reference forward, run-to-run (and 1-vs-2-thread) bit identity, and the edge
 * cases: huge logits in softmax_xent, causality of attention, the accuracy of vecmath.h's exp,
 * sigmoid and tanh.
 *
 * How the tolerances are set. An fp32 kernel's error is compared per element as
 *     |got - ref| <= rtol * (|ref| + scale)
 * where ref is the double reference and scale is the RMS of the reference tensor, so an element
 * that is small only through cancellation is judged against the size of the terms that cancelled.
 * rtol is derived per op from fp32 rounding (unit roundoff u = 2^-24 = 6e-8) in a comment at each
 * check; the measured worst case is printed, and sits 3-20x below each bound.
 *
 * The finite-difference checks run in double with eps = 1e-6: truncation error ~eps^2 f''' ~ 1e-12,
 * cancellation error ~1e-16 |L| / eps ~ 1e-10 |L|, both far below the 1e-6 relative tolerance. The
 * loss contracted is L = sum(g * forward(...)) with a random upstream gradient g, and every element
 * of every input and weight is perturbed (small shapes, sizes not multiples of 16).
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
#include <sys/mman.h>
#include <unistd.h>

#include "kernels/kernels.h"
#include "kernels/vecbf16.h"
#include "kernels/vecmath.h"

#include "test_kernel_check.h"

/* ---- double-precision references (llm.c's loops) --------------------------------------------- */

static void ref_encoder_forward(double *out, const int32_t *inp, const double *wte,
                                const double *wpe, int B, int T, int C)
{
    for (int bt = 0; bt < B * T; bt++)
        for (int c = 0; c < C; c++)
            out[(size_t)bt * C + c] = wte[(size_t)inp[bt] * C + c] + wpe[(size_t)(bt % T) * C + c];
}

static void ref_encoder_backward(double *dwte, double *dwpe, const double *dout, const int32_t *inp,
                                 int B, int T, int C)
{
    for (int bt = 0; bt < B * T; bt++)
        for (int c = 0; c < C; c++) {
            dwte[(size_t)inp[bt] * C + c] += dout[(size_t)bt * C + c];
            dwpe[(size_t)(bt % T) * C + c] += dout[(size_t)bt * C + c];
        }
}

static void ref_layernorm_forward(double *out, double *mean, double *rstd, const double *inp,
                                  const double *w, const double *b, int N, int C)
{
    for (int r = 0; r < N; r++) {
        const double *x = inp + (size_t)r * C;
        double m = 0.0, v = 0.0;
        for (int i = 0; i < C; i++)
            m += x[i];
        m /= C;
        for (int i = 0; i < C; i++)
            v += (x[i] - m) * (x[i] - m);
        v /= C;
        double s = 1.0 / sqrt(v + 1e-5);
        for (int i = 0; i < C; i++)
            out[(size_t)r * C + i] = (x[i] - m) * s * w[i] + b[i];
        mean[r] = m;
        rstd[r] = s;
    }
}

static void ref_layernorm_backward(double *dinp, double *dw, double *db, const double *dout,
                                   const double *inp, const double *w, const double *mean,
                                   const double *rstd, int N, int C)
{
    for (int r = 0; r < N; r++) {
        const double *dy = dout + (size_t)r * C, *x = inp + (size_t)r * C;
        double a = 0.0, bb = 0.0;
        for (int i = 0; i < C; i++) {
            double nrm = (x[i] - mean[r]) * rstd[r];
            a += w[i] * dy[i];
            bb += w[i] * dy[i] * nrm;
        }
        a /= C;
        bb /= C;
        for (int i = 0; i < C; i++) {
            double nrm = (x[i] - mean[r]) * rstd[r];
            db[i] += dy[i];
            dw[i] += nrm * dy[i];
            dinp[(size_t)r * C + i] += (w[i] * dy[i] - a - nrm * bb) * rstd[r];
        }
    }
}

static void ref_matmul_forward(double *out, const double *inp, const double *w, const double *bias,
                               int N, int C, int OC)
{
    for (int r = 0; r < N; r++)
        for (int o = 0; o < OC; o++) {
            double s = bias ? bias[o] : 0.0;
            for (int i = 0; i < C; i++)
                s += inp[(size_t)r * C + i] * w[(size_t)o * C + i];
            out[(size_t)r * OC + o] = s;
        }
}

/* dinp +=, dweight +=, dbias += */
static void ref_matmul_backward(double *dinp, double *dw, double *db, const double *dout,
                                const double *inp, const double *w, int N, int C, int OC)
{
    for (int r = 0; r < N; r++)
        for (int o = 0; o < OC; o++) {
            double d = dout[(size_t)r * OC + o];
            if (db)
                db[o] += d;
            for (int i = 0; i < C; i++) {
                if (dinp)
                    dinp[(size_t)r * C + i] += d * w[(size_t)o * C + i];
                if (dw)
                    dw[(size_t)o * C + i] += d * inp[(size_t)r * C + i];
            }
        }
}

static void ref_attention_forward(double *out, double *att, const double *qkv, int B, int T, int C,
                                  int NH)
{
    int C3 = 3 * C, hs = C / NH;
    double scale = 1.0 / sqrt((double)hs);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int h = 0; h < NH; h++) {
                const double *q = qkv + ((size_t)b * T + t) * C3 + h * hs;
                double *p = att + (((size_t)b * NH + h) * T + t) * T;
                double mx = -INFINITY, sum = 0.0;
                for (int u = 0; u <= t; u++) {
                    const double *k = qkv + ((size_t)b * T + u) * C3 + C + h * hs;
                    double s = 0.0;
                    for (int i = 0; i < hs; i++)
                        s += q[i] * k[i];
                    p[u] = s * scale;
                    mx = fmax(mx, p[u]);
                }
                for (int u = 0; u <= t; u++) {
                    p[u] = exp(p[u] - mx);
                    sum += p[u];
                }
                for (int u = 0; u < T; u++)
                    p[u] = u <= t ? p[u] / sum : 0.0;
                double *o = out + ((size_t)b * T + t) * C + h * hs;
                for (int i = 0; i < hs; i++) {
                    double s = 0.0;
                    for (int u = 0; u <= t; u++)
                        s += p[u] * qkv[((size_t)b * T + u) * C3 + 2 * C + h * hs + i];
                    o[i] = s;
                }
            }
}

/* dqkv = (assigned) */
static void ref_attention_backward(double *dqkv, const double *dout, const double *qkv,
                                   const double *att, int B, int T, int C, int NH)
{
    int C3 = 3 * C, hs = C / NH;
    double scale = 1.0 / sqrt((double)hs);
    double *dp = dalloc((size_t)T);
    memset(dqkv, 0, (size_t)B * T * C3 * sizeof(double));
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int h = 0; h < NH; h++) {
                size_t qo = ((size_t)b * T + t) * C3 + h * hs;
                const double *p = att + (((size_t)b * NH + h) * T + t) * T;
                const double *dO = dout + ((size_t)b * T + t) * C + h * hs;
                double dot = 0.0;
                for (int u = 0; u <= t; u++) {
                    size_t vo = ((size_t)b * T + u) * C3 + 2 * C + h * hs;
                    dp[u] = 0.0;
                    for (int i = 0; i < hs; i++) {
                        dp[u] += dO[i] * qkv[vo + i];
                        dqkv[vo + i] += p[u] * dO[i];
                    }
                    dot += dp[u] * p[u];
                }
                for (int u = 0; u <= t; u++) {
                    double ds = p[u] * (dp[u] - dot) * scale;
                    size_t ko = ((size_t)b * T + u) * C3 + C + h * hs;
                    for (int i = 0; i < hs; i++) {
                        dqkv[qo + i] += ds * qkv[ko + i];
                        dqkv[ko + i] += ds * qkv[qo + i];
                    }
                }
            }
    free(dp);
}

static double ref_gelu(double x)
{
    const double k = sqrt(2.0 / M_PI);
    return 0.5 * x * (1.0 + tanh(k * (x + 0.044715 * x * x * x)));
}

static double ref_gelu_grad(double x)
{
    const double k = sqrt(2.0 / M_PI);
    double th = tanh(k * (x + 0.044715 * x * x * x));
    return 0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * k * (1.0 + 3.0 * 0.044715 * x * x);
}

static void ref_xent_forward(double *losses, double *probs, const double *logits,
                             const int32_t *targets, int N, int V)
{
    for (int r = 0; r < N; r++) {
        const double *x = logits + (size_t)r * V;
        double mx = -INFINITY, s = 0.0;
        for (int i = 0; i < V; i++)
            mx = fmax(mx, x[i]);
        for (int i = 0; i < V; i++)
            s += exp(x[i] - mx);
        for (int i = 0; i < V; i++)
            probs[(size_t)r * V + i] = exp(x[i] - mx) / s;
        losses[r] = log(s) - (x[targets[r]] - mx);
    }
}

static void ref_xent_backward(double *dlogits, const double *probs, const int32_t *targets,
                              const double *dlosses, int N, int V)
{
    for (int r = 0; r < N; r++)
        for (int i = 0; i < V; i++)
            dlogits[(size_t)r * V + i] =
                (probs[(size_t)r * V + i] - (i == targets[r] ? 1.0 : 0.0)) * dlosses[r];
}

/* ---- vecmath.h ------------------------------------------------------------------------------- */

typedef zt_vf (*vfun)(zt_vf);

static void apply_v(vfun f, float *y, const float *x, size_t n)
{
    size_t i = 0;
    for (; i + ZT_VL <= n; i += ZT_VL)
        zt_vstore(y + i, f(zt_vload(x + i)));
    if (i < n)
        zt_vstoren(y + i, f(zt_vloadn(x + i, (int)(n - i), 0.0f)), (int)(n - i));
}

static int64_t float_line(float x)
{
    uint32_t bits;
    float ax = fabsf(x);
    memcpy(&bits, &ax, 4);
    return x < 0 ? -(int64_t)bits : (int64_t)bits;
}

static double ulp_of(double y)
{
    double a = fabs(y);
    if (a < 0x1p-126)
        return 0x1p-149; /* subnormal spacing */
    return ldexp(1.0, ilogb(a) - 23);
}

/* worst error in ulp of f vs ref over every 61st float in [lo, hi] (both signs as the range has) */
static double sweep_ulp(vfun f, double (*ref)(double), float lo, float hi, float *worst_x)
{
    enum { CHUNK = 4096 };
    static float xs[CHUNK], ys[CHUNK];
    double worst = 0.0;
    /* walk the float line by bit pattern: a monotone integer line, negatives mirrored */
    int64_t a = float_line(lo), b = float_line(hi);
    for (int64_t k = a; k <= b;) {
        size_t n = 0;
        for (; n < CHUNK && k <= b; k += 61, n++) {
            uint32_t bits = (uint32_t)(k < 0 ? -k : k);
            float v;
            memcpy(&v, &bits, 4);
            xs[n] = k < 0 ? -v : v;
        }
        apply_v(f, ys, xs, n);
        for (size_t i = 0; i < n; i++) {
            double r = ref((double)xs[i]);
            double e = fabs((double)ys[i] - r) / ulp_of(r);
            if (!(e <= worst)) {
                worst = e;
                *worst_x = xs[i];
            }
        }
    }
    return worst;
}

static double sigmoid_d(double x) { return 1.0 / (1.0 + exp(-x)); }

static void test_vecmath(void **state)
{
    (void)state;
    float wx = 0.0f;
    /* normal results: exp(x) >= 2^-126 for x >= -87.33 */
    double e = sweep_ulp(zt_vexp, exp, -87.33f, 88.72f, &wx);
    print_message("  zt_vexp on [-87.33, 88.72]: worst %.2f ulp at x = %.9g\n", e, (double)wx);
    assert_true(e <= 2.0);
    /* subnormal results: absolute error within one subnormal spacing (2 of them at most) */
    e = sweep_ulp(zt_vexp, exp, -104.0f, -87.34f, &wx);
    print_message("  zt_vexp on [-104, -87.34]: worst %.2f subnormal ulp at x = %.9g\n", e,
                  (double)wx);
    assert_true(e <= 2.0);
    e = sweep_ulp(zt_vsigmoid, sigmoid_d, -80.0f, 80.0f, &wx);
    print_message("  zt_vsigmoid on [-80, 80]: worst %.2f ulp at x = %.9g\n", e, (double)wx);
    assert_true(e <= 4.0);
    e = sweep_ulp(zt_vtanh, tanh, -20.0f, 20.0f, &wx);
    print_message("  zt_vtanh on [-20, 20]: worst %.2f ulp at x = %.9g\n", e, (double)wx);
    assert_true(e <= 4.0);

    /* specials */
    float xs[8] = {INFINITY, -INFINITY, NAN, 88.8f, -200.0f, 0.0f, 1e-30f, -1e-30f}, ys[8];
    apply_v(zt_vexp, ys, xs, 8);
    assert_true(isinf(ys[0]) && ys[0] > 0);
    assert_true(ys[1] == 0.0f);
    assert_true(isnan(ys[2]));
    assert_true(isinf(ys[3]));
    assert_true(ys[4] == 0.0f);
    assert_true(ys[5] == 1.0f);
    apply_v(zt_vtanh, ys, xs, 8);
    assert_true(ys[0] == 1.0f && ys[1] == -1.0f && isnan(ys[2]) && ys[3] == 1.0f);
    assert_true(ys[4] == -1.0f && ys[5] == 0.0f && ys[6] == 1e-30f && ys[7] == -1e-30f);
    apply_v(zt_vsigmoid, ys, xs, 8);
    assert_true(ys[0] == 1.0f && ys[1] == 0.0f && isnan(ys[2]) && ys[5] == 0.5f);

    /* horizontal sum: fixed-order, exact for small integers */
    float v[ZT_VL];
    for (int i = 0; i < ZT_VL; i++)
        v[i] = (float)(i + 1);
    assert_true(zt_vhsum(zt_vload(v)) == (float)(ZT_VL * (ZT_VL + 1) / 2));
    assert_true(zt_vhmax(zt_vload(v)) == (float)ZT_VL);
}

/* the partial-vector helpers at a page's end (the next page unmapped: a read or write past p + n
 * faults), the NaN contracts of zt_vmax / zt_vmin / zt_vselect_neg, and the bf16 rounding of the
 * vector path on the special values, on whichever path the test is built for */
static void test_vecmath_tails(void **state)
{
    (void)state;
    long pg = sysconf(_SC_PAGESIZE);
    char *map = mmap(NULL, (size_t)pg * 2, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(map != MAP_FAILED);
    assert_int_equal(mprotect(map + pg, (size_t)pg, PROT_NONE), 0);
    float *end = (float *)(map + pg);
    uint32_t *uend = (uint32_t *)(map + pg);
    for (int n = 1; n < ZT_VL; n++) {
        float *p = end - n, got[ZT_VL];
        for (int i = 0; i < n; i++)
            p[i] = (float)(i + 1);
        zt_vstore(got, zt_vloadn(p, n, -7.0f));
        for (int i = 0; i < ZT_VL; i++)
            assert_true(got[i] == (i < n ? (float)(i + 1) : -7.0f));
        zt_vstoren(p, zt_vset1(3.0f), n);
        for (int i = 0; i < n; i++)
            assert_true(p[i] == 3.0f);
        float *q = end - ZT_VL; /* stores only the first n: the rest keep their values */
        for (int i = 0; i < ZT_VL; i++)
            q[i] = -1.0f;
        zt_vstoren(q, zt_vset1(5.0f), n);
        for (int i = 0; i < ZT_VL; i++)
            assert_true(q[i] == (i < n ? 5.0f : -1.0f));
        uint32_t *u = uend - n, ug[ZT_VL];
        for (int i = 0; i < n; i++)
            u[i] = 0x10001u * (uint32_t)(i + 1);
        zt_vbf_store(ug, zt_vbf_loadn(u, n));
        for (int i = 0; i < ZT_VL; i++)
            assert_true(ug[i] == (i < n ? 0x10001u * (uint32_t)(i + 1) : 0u));
        zt_vbf_storen(u, zt_vbf_set1(9u), n);
        for (int i = 0; i < n; i++)
            assert_true(u[i] == 9u);
    }
    munmap(map, (size_t)pg * 2);

    float ones[ZT_VL], got[ZT_VL];
    for (int i = 0; i < ZT_VL; i++)
        ones[i] = 1.0f;
    for (int n = -1; n <= ZT_VL + 1; n++) {
        zt_vstore(got, zt_vkeepn(zt_vload(ones), n));
        for (int i = 0; i < ZT_VL; i++)
            assert_true(got[i] == (i < n ? 1.0f : 0.0f));
    }
    /* NaN in b (the data operand) comes through; NaN in a gives b */
    zt_vstore(got, zt_vmax(zt_vset1(1.0f), zt_vset1(NAN)));
    assert_true(isnan(got[0]) && isnan(got[ZT_VL - 1]));
    zt_vstore(got, zt_vmin(zt_vset1(1.0f), zt_vset1(NAN)));
    assert_true(isnan(got[0]) && isnan(got[ZT_VL - 1]));
    zt_vstore(got, zt_vmax(zt_vset1(NAN), zt_vset1(2.0f)));
    assert_true(got[0] == 2.0f && got[ZT_VL - 1] == 2.0f);
    zt_vstore(got, zt_vselect_neg(zt_vset1(NAN), zt_vset1(-1.0f), zt_vset1(1.0f)));
    assert_true(got[0] == 1.0f);
    zt_vstore(got, zt_vselect_neg(zt_vset1(-0.5f), zt_vset1(-1.0f), zt_vset1(1.0f)));
    assert_true(got[0] == -1.0f);
    zt_vacc acc = zt_vacc_zero();
    for (int i = 0; i < 1000; i++)
        zt_vacc_add(&acc, zt_vset1(0.1f));
    assert_true(zt_vacc_sum(acc) == 1000.0 * ZT_VL * (double)0.1f);

    /* bf16 rounding of the vector path: ties both ways, subnormals, infinities, NaN, overflow */
    enum { NS = 16 };
    float sp[2 * ZT_VL * ((NS + 2 * ZT_VL - 1) / (2 * ZT_VL))];
    const float spec[NS] = {1.0f + 0x1p-8f, 1.0f + 0x3p-8f, -(1.0f + 0x1p-8f), 0x1p-130f, -0x1p-140f, 0.0f, -0.0f,
                            INFINITY, -INFINITY, NAN, -NAN, 3.4028235e38f, 0x1.fffffep-127f, 1.17549435e-38f,
                            -2.5f, 1.0f + 0x1p-9f};
    size_t ns = sizeof sp / sizeof sp[0];
    for (size_t i = 0; i < ns; i++)
        sp[i] = spec[i % NS];
    for (size_t i = 0; i < ns; i += 2 * ZT_VL) {
        uint32_t adj[ZT_VL], prs[ZT_VL];
        zt_vbf_store(adj, zt_vbf_adjacent(zt_vload(sp + i), zt_vload(sp + i + ZT_VL)));
        zt_vbf_store(prs, zt_vbf_pairs(zt_vload(sp + i), zt_vload(sp + i + ZT_VL)));
        for (int j = 0; j < ZT_VL; j++) {
            assert_int_equal(adj[j] & 0xffffu, zt_bf16_rne(sp[i + 2 * j]));
            assert_int_equal(adj[j] >> 16, zt_bf16_rne(sp[i + 2 * j + 1]));
            assert_int_equal(prs[j] & 0xffffu, zt_bf16_rne(sp[i + j]));
            assert_int_equal(prs[j] >> 16, zt_bf16_rne(sp[i + ZT_VL + j]));
        }
    }
}

/* ---- encoder --------------------------------------------------------------------------------- */

typedef struct {
    int B, T, C;
    const int32_t *inp;
    double *wte, *wpe, *g, *out;
} enc_ctx;

static double enc_loss(void *p)
{
    enc_ctx *c = p;
    ref_encoder_forward(c->out, c->inp, c->wte, c->wpe, c->B, c->T, c->C);
    return dot_gd(c->g, c->out, (size_t)c->B * c->T * c->C);
}

static void run_encoder(int B, int T, int C, int V, bool fd)
{
    size_t n = (size_t)B * T * C;
    int32_t *inp = malloc(sizeof(int32_t) * B * T);
    for (int i = 0; i < B * T; i++)
        inp[i] = (int32_t)(rng_next() % (uint64_t)(V / 2 + 1)); /* repeats on purpose */
    float *wte = falloc((size_t)V * C), *wpe = falloc((size_t)T * C), *out = falloc(n);
    float *dout = falloc(n), *dwte = falloc((size_t)V * C), *dwpe = falloc((size_t)T * C);
    fill(wte, (size_t)V * C, 1.0f);
    fill(wpe, (size_t)T * C, 1.0f);
    fill(dout, n, 1.0f);
    fill(dwte, (size_t)V * C, 1.0f);
    fill(dwpe, (size_t)T * C, 1.0f);
    double *wte_d = to_double(wte, (size_t)V * C), *wpe_d = to_double(wpe, (size_t)T * C);
    double *dout_d = to_double(dout, n), *out_d = dalloc(n);
    double *dwte_d = to_double(dwte, (size_t)V * C), *dwpe_d = to_double(dwpe, (size_t)T * C);
    float *dwte0 = fdup(dwte, (size_t)V * C), *dwpe0 = fdup(dwpe, (size_t)T * C);

    encoder_forward(out, inp, wte, wpe, B, T, C, NULL);
    ref_encoder_forward(out_d, inp, wte_d, wpe_d, B, T, C);
    /* one fp32 add: correctly rounded, so exactly the double sum rounded to float */
    for (size_t i = 0; i < n; i++)
        assert_true(out[i] == (float)out_d[i]);
    encoder_backward(dwte, dwpe, dout, inp, B, T, C, NULL);
    ref_encoder_backward(dwte_d, dwpe_d, dout_d, inp, B, T, C);
    /* sums of up to B*T + 1 terms of size 1 in fp32, in order: error <= (B*T) u * sum|terms|,
     * and the RMS term of the bound is ~sqrt(B*T): 1e-5 covers B*T <= 100 with margin */
    check_close("encoder_backward dwte", dwte, dwte_d, (size_t)V * C, 1e-5);
    check_close("encoder_backward dwpe", dwpe, dwpe_d, (size_t)T * C, 1e-5);

    /* run to run, and 1 vs 2 threads: identical bits */
    float *out2 = falloc(n), *dwte2 = fdup(dwte0, (size_t)V * C),
          *dwpe2 = fdup(dwpe0, (size_t)T * C);
    int nt = omp_get_max_threads();
    for (int rep = 0; rep < 2; rep++) {
        omp_set_num_threads(rep == 0 ? nt : 1);
        memcpy(dwte2, dwte0, sizeof(float) * V * C);
        memcpy(dwpe2, dwpe0, sizeof(float) * T * C);
        encoder_forward(out2, inp, wte, wpe, B, T, C, NULL);
        encoder_backward(dwte2, dwpe2, dout, inp, B, T, C, NULL);
        assert_same_bits("encoder_forward rerun", out, out2, n);
        assert_same_bits("encoder_backward dwte rerun", dwte, dwte2, (size_t)V * C);
        assert_same_bits("encoder_backward dwpe rerun", dwpe, dwpe2, (size_t)T * C);
    }
    omp_set_num_threads(nt);

    if (fd) {
        double *g = dout_d;
        double *gw = dalloc((size_t)V * C), *gp = dalloc((size_t)T * C);
        ref_encoder_backward(gw, gp, g, inp, B, T, C);
        enc_ctx c = {B, T, C, inp, wte_d, wpe_d, g, out_d};
        fd_check("encoder FD dwte", enc_loss, &c, wte_d, (size_t)V * C, gw);
        fd_check("encoder FD dwpe", enc_loss, &c, wpe_d, (size_t)T * C, gp);
        free(gw);
        free(gp);
    }
    free(inp), free(wte), free(wpe), free(out), free(dout), free(dwte), free(dwpe);
    free(wte_d), free(wpe_d), free(dout_d), free(out_d), free(dwte_d), free(dwpe_d);
    free(dwte0), free(dwpe0), free(out2), free(dwte2), free(dwpe2);
}

static void test_encoder(void **state)
{
    (void)state;
    run_encoder(2, 7, 20, 11, true);
    run_encoder(3, 17, 768, 50, false);
}

/* Packed documents (positions): token (b,t) adds wpe[pos[b,t]] (one fp32 add: exact against
 * double), the backward scatters dout into those rows (double reference, the bound of
 * run_encoder); the bf16 tables give the bits of the fp32 ones holding their values; the
 * vocabulary-parallel lookup + positions of a range t0 .. t0+n (pos + t0, ldp = T) the bits of
 * those rows of the fused forward; 1 thread the bits of 2. */
static void test_encoder_positions(void **state)
{
    (void)state;
    enum { B = 2, T = 11, C = 40, V = 13, MAXT = 16 };
    static const int docs[B][4] = {{1, 4, 6, 0}, {7, 4, 0, 0}};
    int32_t pos[B * T], inp[B * T];
    for (int b = 0; b < B; b++)
        for (int d = 0, t = 0; docs[b][d]; d++)
            for (int i = 0; i < docs[b][d]; i++)
                pos[b * T + t++] = i;
    for (int i = 0; i < B * T; i++)
        inp[i] = (int32_t)(rng_next() % V);
    size_t n = (size_t)B * T * C;
    float *wte = falloc((size_t)V * C), *wpe = falloc((size_t)MAXT * C), *out = falloc(n), *dout = falloc(n);
    float *dwte = falloc((size_t)V * C), *dwpe = falloc((size_t)MAXT * C);
    fill(wte, (size_t)V * C, 1.0f), fill(wpe, (size_t)MAXT * C, 1.0f), fill(dout, n, 1.0f);
    memset(dwte, 0, (size_t)V * C * sizeof *dwte), memset(dwpe, 0, (size_t)MAXT * C * sizeof *dwpe);
    zt_round_bf16(wte, (size_t)V * C), zt_round_bf16(wpe, (size_t)MAXT * C); /* bf16 values: the bf16 tables below */
    encoder_forward(out, inp, wte, wpe, B, T, C, pos);
    for (int bt = 0; bt < B * T; bt++)
        for (int c = 0; c < C; c++)
            assert_true(out[(size_t)bt * C + c] ==
                        (float)((double)wte[(size_t)inp[bt] * C + c] + (double)wpe[(size_t)pos[bt] * C + c]));
    encoder_backward(dwte, dwpe, dout, inp, B, T, C, pos);
    double *rw = dalloc((size_t)V * C), *rp = dalloc((size_t)MAXT * C);
    for (int bt = 0; bt < B * T; bt++)
        for (int c = 0; c < C; c++) {
            rw[(size_t)inp[bt] * C + c] += dout[(size_t)bt * C + c];
            rp[(size_t)pos[bt] * C + c] += dout[(size_t)bt * C + c];
        }
    check_close("encoder_backward packed dwte", dwte, rw, (size_t)V * C, 1e-5);
    check_close("encoder_backward packed dwpe", dwpe, rp, (size_t)MAXT * C, 1e-5);
    for (size_t i = (size_t)7 * C; i < (size_t)MAXT * C; i++) /* rows past the longest document: untouched */
        assert_true(dwpe[i] == 0.0f);
    /* bf16 tables */
    uint16_t *wte16 = malloc((size_t)V * C * 2), *wpe16 = malloc((size_t)MAXT * C * 2);
    assert_non_null(wte16), assert_non_null(wpe16);
    for (size_t i = 0; i < (size_t)V * C; i++) wte16[i] = zt_bf16_rne(wte[i]);
    for (size_t i = 0; i < (size_t)MAXT * C; i++) wpe16[i] = zt_bf16_rne(wpe[i]);
    float *out2 = falloc(n);
    encoder_forward_bf16(out2, inp, wte16, wpe16, B, T, C, pos);
    assert_same_bits("encoder_forward_bf16 packed", out, out2, n);
    /* lookup + positions of positions t0 .. t0+m of every row (sequence parallelism's range) */
    int t0 = 3, m = 5;
    float *part = falloc((size_t)B * m * C);
    int32_t sub[B * m];
    for (int b = 0; b < B; b++)
        memcpy(sub + b * m, inp + b * T + t0, m * sizeof *sub);
    for (int bf = 0; bf < 2; bf++) {
        encoder_lookup_rows(part, sub, bf ? NULL : wte, bf ? wte16 : NULL, B, m, C, 0, V);
        encoder_add_positions(part, bf ? NULL : wpe, bf ? wpe16 : NULL, B, m, C, pos + t0, T);
        for (int b = 0; b < B; b++)
            assert_same_bits("encoder_add_positions packed range", part + (size_t)b * m * C,
                             out + ((size_t)b * T + t0) * C, (size_t)m * C);
    }
    /* 1 thread, and the rows form: the same bits */
    float *dwte2 = falloc((size_t)V * C), *dwpe2 = falloc((size_t)MAXT * C);
    memset(dwte2, 0, (size_t)V * C * sizeof *dwte2), memset(dwpe2, 0, (size_t)MAXT * C * sizeof *dwpe2);
    int nt = omp_get_max_threads();
    omp_set_num_threads(1);
    encoder_forward(out2, inp, wte, wpe, B, T, C, pos);
    encoder_backward_rows(dwte2, dwpe2, dout, inp, B, T, C, 0, V, pos);
    omp_set_num_threads(nt);
    assert_same_bits("encoder_forward packed 1 thread", out, out2, n);
    assert_same_bits("encoder_backward packed dwte 1 thread", dwte, dwte2, (size_t)V * C);
    assert_same_bits("encoder_backward packed dwpe 1 thread", dwpe, dwpe2, (size_t)MAXT * C);
    free(wte), free(wpe), free(out), free(dout), free(dwte), free(dwpe), free(rw), free(rp), free(wte16);
    free(wpe16), free(out2), free(part), free(dwte2), free(dwpe2);
}

/* ---- layernorm ------------------------------------------------------------------------------- */

typedef struct {
    int N, C;
    double *inp, *w, *b, *g, *out, *mean, *rstd;
} ln_ctx;

static double ln_loss(void *p)
{
    ln_ctx *c = p;
    ref_layernorm_forward(c->out, c->mean, c->rstd, c->inp, c->w, c->b, c->N, c->C);
    return dot_gd(c->g, c->out, (size_t)c->N * c->C);
}

static void run_layernorm(int N, int C, bool fd)
{
    size_t n = (size_t)N * C;
    float *inp = falloc(n), *w = falloc(C), *b = falloc(C), *out = falloc(n), *dout = falloc(n);
    float *mean = falloc(N), *rstd = falloc(N), *dinp = falloc(n), *dw = falloc(C), *db = falloc(C);
    fill(inp, n, 2.0f);
    for (int r = 0; r < N; r++) /* rows with an offset: the mean must not swamp the variance */
        for (int i = 0; i < C; i++)
            inp[(size_t)r * C + i] += (float)(r % 5);
    fill(w, C, 1.0f);
    fill(b, C, 1.0f);
    fill(dout, n, 1.0f);
    fill(dinp, n, 1.0f);
    fill(dw, C, 1.0f);
    fill(db, C, 1.0f);
    float *dinp0 = fdup(dinp, n), *dw0 = fdup(dw, C), *db0 = fdup(db, C);
    double *inp_d = to_double(inp, n), *w_d = to_double(w, C), *b_d = to_double(b, C);
    double *dout_d = to_double(dout, n), *out_d = dalloc(n), *mean_d = dalloc(N),
           *rstd_d = dalloc(N);
    double *dinp_d = to_double(dinp, n), *dw_d = to_double(dw, C), *db_d = to_double(db, C);

    layernorm_forward(out, mean, rstd, inp, w, b, N, C);
    ref_layernorm_forward(out_d, mean_d, rstd_d, inp_d, w_d, b_d, N, C);
    /* mean and variance: 16 lanes of C/16 terms each then a 4-level tree, relative error
     * ~(C/16 + 4) u in the worst case (C = 768: 3e-6) and ~sqrt of that in practice; the outputs
     * add 3 roundings; the error of the mean is amplified by |mean| / std (up to ~4 here).
     * 2e-6 bounds what we see (4.7e-7) with 4x margin; AVX2's 8 lanes (C/8 terms) stay within it
     * (1.3e-7 measured at this test's sizes). The scalar fallback (ZT_VL == 1) adds all
     * C terms in one chain, ~sqrt(16) times the error: 1e-5 there. */
    const double ln_rtol = ZT_VL >= 8 ? 2e-6 : 1e-5;
    check_close("layernorm_forward out", out, out_d, n, ln_rtol);
    check_close("layernorm_forward mean", mean, mean_d, N, ln_rtol);
    check_close("layernorm_forward rstd", rstd, rstd_d, N, ln_rtol);

    layernorm_backward(dinp, dw, db, dout, inp, w, mean, rstd, N, C);
    ref_layernorm_backward(dinp_d, dw_d, db_d, dout_d, inp_d, w_d, mean_d, rstd_d, N, C);
    /* dinp: the two row sums (C terms) cancel heavily; dweight/dbias: N-term sequential sums of
     * O(1) terms, error <= N u sum|terms| worst, ~sqrt(N) u typical. */
    check_close("layernorm_backward dinp", dinp, dinp_d, n, 1e-5);
    check_close("layernorm_backward dweight", dw, dw_d, C, 1e-5);
    check_close("layernorm_backward dbias", db, db_d, C, 1e-5);

    float *out2 = falloc(n), *mean2 = falloc(N), *rstd2 = falloc(N);
    float *dinp2 = falloc(n), *dw2 = falloc(C), *db2 = falloc(C);
    int nt = omp_get_max_threads();
    for (int rep = 0; rep < 2; rep++) {
        omp_set_num_threads(rep == 0 ? nt : 1);
        memcpy(dinp2, dinp0, n * 4), memcpy(dw2, dw0, C * 4), memcpy(db2, db0, C * 4);
        layernorm_forward(out2, mean2, rstd2, inp, w, b, N, C);
        layernorm_backward(dinp2, dw2, db2, dout, inp, w, mean2, rstd2, N, C);
        assert_same_bits("layernorm_forward out rerun", out, out2, n);
        assert_same_bits("layernorm_forward rstd rerun", rstd, rstd2, N);
        assert_same_bits("layernorm_backward dinp rerun", dinp, dinp2, n);
        assert_same_bits("layernorm_backward dweight rerun", dw, dw2, C);
        assert_same_bits("layernorm_backward dbias rerun", db, db2, C);
    }
    omp_set_num_threads(nt);

    if (fd) {
        double *gi = dalloc(n), *gw = dalloc(C), *gb = dalloc(C);
        ref_layernorm_forward(out_d, mean_d, rstd_d, inp_d, w_d, b_d, N, C);
        ref_layernorm_backward(gi, gw, gb, dout_d, inp_d, w_d, mean_d, rstd_d, N, C);
        double *m2 = dalloc(N), *r2 = dalloc(N);
        ln_ctx c = {N, C, inp_d, w_d, b_d, dout_d, out_d, m2, r2};
        fd_check("layernorm FD dinp", ln_loss, &c, inp_d, n, gi);
        fd_check("layernorm FD dweight", ln_loss, &c, w_d, C, gw);
        fd_check("layernorm FD dbias", ln_loss, &c, b_d, C, gb);
        free(gi), free(gw), free(gb), free(m2), free(r2);
    }
    free(inp), free(w), free(b), free(out), free(dout), free(mean), free(rstd), free(dinp);
    free(dw), free(db), free(dinp0), free(dw0), free(db0), free(inp_d), free(w_d), free(b_d);
    free(dout_d), free(out_d), free(mean_d), free(rstd_d), free(dinp_d), free(dw_d), free(db_d);
    free(out2), free(mean2), free(rstd2), free(dinp2), free(dw2), free(db2);
}

static void test_layernorm(void **state)
{
    (void)state;
    run_layernorm(3, 20, true);
    run_layernorm(5, 7, true);
    run_layernorm(37, 768, false);
    run_layernorm(64, 100, false);
}

/* ---- matmul ---------------------------------------------------------------------------------- */

typedef struct {
    int N, C, OC;
    double *inp, *w, *bias, *g, *out;
} mm_ctx;

static double mm_loss(void *p)
{
    mm_ctx *c = p;
    ref_matmul_forward(c->out, c->inp, c->w, c->bias, c->N, c->C, c->OC);
    return dot_gd(c->g, c->out, (size_t)c->N * c->OC);
}

static void run_matmul(int N, int C, int OC, bool with_bias, bool accumulate, bool fd)
{
    size_t ni = (size_t)N * C, no = (size_t)N * OC, nw = (size_t)OC * C;
    float *inp = falloc(ni), *w = falloc(nw), *bias = with_bias ? falloc(OC) : NULL;
    float *out = falloc(no), *dout = falloc(no), *dinp = falloc(ni), *dw = falloc(nw);
    float *db = falloc(OC);
    fill(inp, ni, 1.0f), fill(w, nw, 1.0f), fill(dout, no, 1.0f);
    if (bias)
        fill(bias, OC, 1.0f);
    fill(dinp, ni, 1.0f), fill(dw, nw, 1.0f), fill(db, OC, 1.0f);
    float *dinp0 = fdup(dinp, ni), *dw0 = fdup(dw, nw), *db0 = fdup(db, OC);
    double *inp_d = to_double(inp, ni), *w_d = to_double(w, nw);
    double *bias_d = bias ? to_double(bias, OC) : NULL, *out_d = dalloc(no);
    double *dout_d = to_double(dout, no), *dw_d = to_double(dw, nw), *db_d = to_double(db, OC);
    double *dinp_d = accumulate ? to_double(dinp, ni) : dalloc(ni);

    matmul_forward(out, inp, w, bias, N, C, OC);
    ref_matmul_forward(out_d, inp_d, w_d, bias_d, N, C, OC);
    /* OpenBLAS accumulates each output in one FMA chain over K terms of random sign: the
     * rounding errors random-walk to ~u |t| sqrt(sum_k k) = u |t| K / sqrt 2, against an output
     * of RMS ~|t| sqrt(K), i.e. relative ~u sqrt(K/2) (measured: 0.65 u sqrt(K)).
     * Bound: 4 u (2 + sqrt(K)), K = C for out, OC for dinp, N for dweight and dbias. */
    const double u = 0x1p-24;
    char what[96];
    snprintf(what, sizeof what, "matmul_forward %dx%dx%d%s", N, OC, C, bias ? " +bias" : "");
    check_close(what, out, out_d, no, 4 * u * (2 + sqrt(C)));

    matmul_backward(dinp, dw, db, dout, inp, w, N, C, OC, accumulate ? ZT_MM_DINP_ADD : 0);
    ref_matmul_backward(dinp_d, dw_d, db_d, dout_d, inp_d, w_d, N, C, OC);
    check_close("matmul_backward dinp", dinp, dinp_d, ni, 4 * u * (2 + sqrt(OC + accumulate)));
    check_close("matmul_backward dweight (+=)", dw, dw_d, nw, 4 * u * (2 + sqrt(N + 1)));
    check_close("matmul_backward dbias (+=)", db, db_d, OC, 4 * u * (2 + sqrt(N + 1)));

    /* NULL outputs are skipped; the others still come out identical */
    float *dinp2 = fdup(dinp0, ni), *dw2 = fdup(dw0, nw), *db2 = fdup(db0, OC), *out2 = falloc(no);
    matmul_backward(NULL, dw2, NULL, dout, inp, w, N, C, OC, accumulate ? ZT_MM_DINP_ADD : 0);
    matmul_backward(dinp2, NULL, NULL, dout, inp, w, N, C, OC, accumulate ? ZT_MM_DINP_ADD : 0);
    matmul_backward(NULL, NULL, db2, dout, inp, w, N, C, OC, accumulate ? ZT_MM_DINP_ADD : 0);
    assert_same_bits("matmul_backward dinp alone", dinp, dinp2, ni);
    assert_same_bits("matmul_backward dweight alone", dw, dw2, nw);
    assert_same_bits("matmul_backward dbias alone", db, db2, OC);
    /* ZT_MM_DWEIGHT_SET assigns dweight whatever it held: the bits of adding into zeros */
    {
        float *dwz = falloc(nw), *dws = falloc(nw);
        memset(dwz, 0, nw * sizeof *dwz);
        fill(dws, nw, 3.0f);
        matmul_backward(NULL, dwz, NULL, dout, inp, w, N, C, OC, 0);
        matmul_backward(NULL, dws, NULL, dout, inp, w, N, C, OC, ZT_MM_DWEIGHT_SET);
        assert_same_bits("matmul_backward dweight assigned", dwz, dws, nw);
        free(dwz), free(dws);
    }
    /* run to run under the same thread count (OpenBLAS's bits may change with the thread count:
     * with OPENBLAS_CORETYPE=Haswell its single-threaded and threaded paths block differently) */
    for (int rep = 0; rep < 2; rep++) {
        memcpy(dinp2, dinp0, ni * 4), memcpy(dw2, dw0, nw * 4), memcpy(db2, db0, OC * 4);
        matmul_forward(out2, inp, w, bias, N, C, OC);
        matmul_backward(dinp2, dw2, db2, dout, inp, w, N, C, OC, accumulate ? ZT_MM_DINP_ADD : 0);
        assert_same_bits("matmul_forward rerun", out, out2, no);
        assert_same_bits("matmul_backward dinp rerun", dinp, dinp2, ni);
        assert_same_bits("matmul_backward dweight rerun", dw, dw2, nw);
        assert_same_bits("matmul_backward dbias rerun", db, db2, OC);
    }

    if (fd) {
        double *gi = dalloc(ni), *gw = dalloc(nw), *gb = dalloc(OC);
        ref_matmul_backward(gi, gw, gb, dout_d, inp_d, w_d, N, C, OC);
        mm_ctx c = {N, C, OC, inp_d, w_d, bias_d, dout_d, out_d};
        fd_check("matmul FD dinp", mm_loss, &c, inp_d, ni, gi);
        fd_check("matmul FD dweight", mm_loss, &c, w_d, nw, gw);
        if (bias_d)
            fd_check("matmul FD dbias", mm_loss, &c, bias_d, OC, gb);
        free(gi), free(gw), free(gb);
    }
    free(inp), free(w), free(bias), free(out), free(dout), free(dinp), free(dw), free(db);
    free(dinp0), free(dw0), free(db0), free(inp_d), free(w_d), free(bias_d), free(out_d);
    free(dout_d), free(dw_d), free(db_d), free(dinp_d), free(dinp2), free(dw2), free(db2);
    free(out2);
}

static void test_matmul(void **state)
{
    (void)state;
    run_matmul(7, 20, 13, true, false, true);
    run_matmul(5, 9, 3, false, true, true);
    run_matmul(33, 768, 200, true, true, false);   /* dbias blocks with a partial tail */
    run_matmul(64, 3072, 96, true, false, false);  /* K = 3072 like the MLP projection */
    run_matmul(130, 96, 2304, true, false, false); /* OC like the QKV projection */
}

/* ---- attention ------------------------------------------------------------------------------- */

typedef struct {
    int B, T, C, NH;
    double *qkv, *g, *out, *att;
} att_ctx;

static double att_loss(void *p)
{
    att_ctx *c = p;
    ref_attention_forward(c->out, c->att, c->qkv, c->B, c->T, c->C, c->NH);
    return dot_gd(c->g, c->out, (size_t)c->B * c->T * c->C);
}

static void run_attention(int B, int T, int C, int NH, float qk_scale, bool fd)
{
    size_t nq = (size_t)B * T * 3 * C, no = (size_t)B * T * C, na = (size_t)B * NH * T * T;
    float *qkv = falloc(nq), *out = falloc(no), *att = falloc(na), *dout = falloc(no);
    float *dqkv = falloc(nq), *scratch = falloc(attention_scratch_floats(B, T, C, NH));
    fill(qkv, nq, 1.0f);
    for (int bt = 0; bt < B * T; bt++) /* sharper attention: scale q and k */
        for (int i = 0; i < 2 * C; i++)
            qkv[(size_t)bt * 3 * C + i] *= qk_scale;
    fill(dout, no, 1.0f);
    fill(dqkv, nq, 100.0f); /* garbage: the backward assigns */
    double *qkv_d = to_double(qkv, nq), *out_d = dalloc(no), *att_d = dalloc(na);
    double *dout_d = to_double(dout, no), *dqkv_d = dalloc(nq);

    attention_forward(out, att, qkv, B, T, C, NH, NULL);
    ref_attention_forward(out_d, att_d, qkv_d, B, T, C, NH);
    /* a score s = scale q.k carries an absolute error ~u sqrt(hs) |q||k| scale, which exp turns
     * into a relative error of P: with |s| up to ~10 (qk_scale 3) that is ~50 u; the T-term sum
     * and the T-term P V add ~u sqrt(T). 1e-5 ~ 170 u (measured up to 2.1e-6) */
    char what[96];
    snprintf(what, sizeof what, "attention_forward out B%d T%d C%d NH%d", B, T, C, NH);
    check_close(what, out, out_d, no, 1e-5);
    check_close("attention_forward att", att, att_d, na, 1e-5);
    for (int bh = 0; bh < B * NH; bh++)
        for (int t = 0; t < T; t++)
            for (int u = t + 1; u < T; u++)
                assert_true(att[((size_t)bh * T + t) * T + u] == 0.0f);

    attention_backward(dqkv, scratch, dout, qkv, att, B, T, C, NH);
    ref_attention_backward(dqkv_d, dout_d, qkv_d, att_d, B, T, C, NH);
    /* the forward's error in P, then dP (hs terms), rowsum(dP P) (T terms, cancelling), then
     * T-term GEMMs: ~2-3x the forward's (measured up to 4.4e-6 at T = 256) */
    check_close("attention_backward dqkv", dqkv, dqkv_d, nq, 3e-5);

    float *out2 = falloc(no), *att2 = falloc(na), *dqkv2 = falloc(nq);
    int nt = omp_get_max_threads();
    for (int rep = 0; rep < 2; rep++) {
        omp_set_num_threads(rep == 0 ? nt : 1);
        attention_forward(out2, att2, qkv, B, T, C, NH, NULL);
        attention_backward(dqkv2, scratch, dout, qkv, att2, B, T, C, NH);
        assert_same_bits("attention_forward out rerun", out, out2, no);
        assert_same_bits("attention_forward att rerun", att, att2, na);
        assert_same_bits("attention_backward dqkv rerun", dqkv, dqkv2, nq);
    }
    omp_set_num_threads(nt);

    /* causality: changing token u's q, k and v leaves every output row t < u bit-identical */
    int u = T / 2 + 1 < T ? T / 2 + 1 : T - 1;
    memcpy(dqkv2, qkv, nq * 4);
    for (int b = 0; b < B; b++)
        for (int i = 0; i < 3 * C; i++)
            dqkv2[((size_t)b * T + u) * 3 * C + i] += 1000.0f * (float)rng_uniform();
    attention_forward(out2, att2, dqkv2, B, T, C, NH, NULL);
    for (int b = 0; b < B; b++) {
        assert_same_bits("attention causal: rows before the change", out + (size_t)b * T * C,
                         out2 + (size_t)b * T * C, (size_t)u * C);
        assert_true(memcmp(out + ((size_t)b * T + u) * C, out2 + ((size_t)b * T + u) * C,
                           (size_t)C * 4) != 0);
    }

    if (fd) {
        att_ctx c = {B, T, C, NH, qkv_d, dout_d, out_d, att_d};
        ref_attention_forward(out_d, att_d, qkv_d, B, T, C, NH);
        ref_attention_backward(dqkv_d, dout_d, qkv_d, att_d, B, T, C, NH);
        fd_check("attention FD dqkv", att_loss, &c, qkv_d, nq, dqkv_d);
    }
    free(qkv), free(out), free(att), free(dout), free(dqkv), free(scratch), free(qkv_d);
    free(out_d), free(att_d), free(dout_d), free(dqkv_d), free(out2), free(att2), free(dqkv2);
}

static void test_attention(void **state)
{
    (void)state;
    run_attention(2, 7, 20, 2, 1.0f, true);
    run_attention(1, 5, 12, 3, 2.0f, true);
    run_attention(2, 130, 96, 3, 1.0f, false);   /* 3 causal blocks, the last partial */
    run_attention(1, 256, 768, 12, 0.5f, false); /* W1's head shape */
    run_attention(3, 64, 64, 1, 3.0f, false);
}

/* ---- gelu ------------------------------------------------------------------------------------ */

typedef struct {
    size_t n;
    double *x, *g;
} gelu_ctx;

static double gelu_loss(void *p)
{
    gelu_ctx *c = p;
    double s = 0.0;
    for (size_t i = 0; i < c->n; i++)
        s += c->g[i] * ref_gelu(c->x[i]);
    return s;
}

static void test_gelu(void **state)
{
    (void)state;
    size_t n = 100003;
    float *x = falloc(n), *y = falloc(n), *d = falloc(n), *dx = falloc(n);
    fill(x, n, 6.0f);
    fill(d, n, 1.0f);
    float special[] = {0.0f, -0.0f, 1e-20f, -1e-20f, 10.0f, -10.0f, 30.0f, -30.0f, 1e4f, -1e4f,
                       3e38f, -3e38f, 19.9f, -19.9f, 20.1f, -20.1f};
    memcpy(x, special, sizeof special);
    double *y_d = dalloc(n), *dx_d = dalloc(n);
    for (size_t i = 0; i < n; i++) {
        y_d[i] = ref_gelu(x[i]);
        dx_d[i] = ref_gelu_grad(x[i]) * d[i];
    }
    gelu_forward(y, x, n);
    gelu_backward(dx, x, d, n);
    /* elementwise, a handful of roundings after a 2-ulp exp: ~1e-6 relative; near the zero of
     * gelu' (x ~ -0.75) the derivative cancels, which the RMS term of the bound absorbs */
    const size_t ns = sizeof special / sizeof special[0]; /* huge specials would swamp the RMS */
    check_close("gelu_forward", y + ns, y_d + ns, n - ns, 2e-6);
    check_close("gelu_backward", dx + ns, dx_d + ns, n - ns, 2e-6);
    /* the specials one by one; 1e-30 absolute: the double reference's 1 + tanh(u) loses all its
     * digits for u < -18 (x < -7.2), where the true values are below 1e-15 in magnitude */
    for (size_t i = 0; i < ns; i++) {
        assert_true(fabs(y[i] - y_d[i]) <= 4e-7 * fabs(y_d[i]) + 1e-30);
        assert_true(fabs(dx[i] - dx_d[i]) <= 1e-6 * fabs(d[i]) + 1e-30);
    }
    for (size_t i = 0; i < n; i++)
        assert_true(isfinite(y[i]) && isfinite(dx[i]));
    assert_true(y[9] == 0.0f && y[11] == 0.0f); /* gelu(-1e4), gelu(-3e38): -0 */
    assert_true(y[8] == 1e4f && y[10] == 3e38f);
    assert_true(dx[8] == d[8] && dx[9] == 0.0f && dx[10] == d[10] && dx[11] == 0.0f);
    float nan_in = NAN, nan_out, nan_d = 1.0f;
    gelu_forward(&nan_out, &nan_in, 1);
    assert_true(isnan(nan_out));
    gelu_backward(&nan_out, &nan_in, &nan_d, 1);
    assert_true(isnan(nan_out));

    float *y2 = falloc(n), *dx2 = falloc(n);
    int nt = omp_get_max_threads();
    for (int rep = 0; rep < 2; rep++) {
        omp_set_num_threads(rep == 0 ? nt : 1);
        gelu_forward(y2, x, n);
        gelu_backward(dx2, x, d, n);
        assert_same_bits("gelu_forward rerun", y, y2, n);
        assert_same_bits("gelu_backward rerun", dx, dx2, n);
    }
    omp_set_num_threads(nt);
    /* in place: dinp = dout and dinp = inp give the same bits */
    memcpy(dx2, d, n * 4);
    gelu_backward(dx2, x, dx2, n);
    assert_same_bits("gelu_backward in place (dout)", dx, dx2, n);
    memcpy(dx2, x, n * 4);
    gelu_backward(dx2, dx2, d, n);
    assert_same_bits("gelu_backward in place (inp)", dx, dx2, n);

    /* FD of the reference over 37 points in [-6, 6] */
    size_t m = 37;
    double *xs = dalloc(m), *gs = dalloc(m), *an = dalloc(m);
    for (size_t i = 0; i < m; i++) {
        xs[i] = -6.0 + 12.0 * (double)i / (double)(m - 1) + 0.01;
        gs[i] = rng_uniform();
        an[i] = ref_gelu_grad(xs[i]) * gs[i];
    }
    gelu_ctx c = {m, xs, gs};
    fd_check("gelu FD dinp", gelu_loss, &c, xs, m, an);
    free(x), free(y), free(d), free(dx), free(y_d), free(dx_d), free(y2), free(dx2);
    free(xs), free(gs), free(an);
}

/* ---- residual -------------------------------------------------------------------------------- */

static void test_residual(void **state)
{
    (void)state;
    const int sizes[] = {1, 15, 17, 1000, 786433};
    for (int s = 0; s < 5; s++) {
        size_t n = (size_t)sizes[s];
        float *a = falloc(n), *b = falloc(n), *o = falloc(n + 1), *o2 = falloc(n);
        fill(a, n, 1.0f), fill(b, n, 1.0f);
        o[n] = 12345.0f; /* must not be written */
        residual_forward(o, a, b, n);
        for (size_t i = 0; i < n; i++) /* one correctly rounded add */
            assert_true(o[i] == (float)((double)a[i] + (double)b[i]));
        assert_true(o[n] == 12345.0f);
        residual_forward(o2, a, b, n);
        assert_same_bits("residual_forward rerun", o, o2, n);
        memcpy(o2, a, n * 4); /* in place: out = a */
        residual_forward(o2, o2, b, n);
        assert_same_bits("residual_forward in place", o, o2, n);
        free(a), free(b), free(o), free(o2);
    }
}

/* ---- softmax + cross-entropy ----------------------------------------------------------------- */

typedef struct {
    int N, V;
    const int32_t *targets;
    double *logits, *g, *losses, *probs;
} xent_ctx;

static double xent_loss(void *p)
{
    xent_ctx *c = p;
    ref_xent_forward(c->losses, c->probs, c->logits, c->targets, c->N, c->V);
    return dot_gd(c->g, c->losses, (size_t)c->N);
}

static void run_xent(int N, int V, float logit_scale, bool fd)
{
    size_t n = (size_t)N * V;
    float *logits = falloc(n), *losses = falloc(N), *dl = falloc(N);
    int32_t *tg = malloc(sizeof(int32_t) * N);
    fill(logits, n, logit_scale);
    fill(dl, N, 1.0f);
    for (int r = 0; r < N; r++)
        tg[r] = (int32_t)(rng_next() % (uint64_t)V);
    double *logits_d = to_double(logits, n), *probs_d = dalloc(n), *losses_d = dalloc(N);
    double *dl_d = to_double(dl, N), *dlog_d = dalloc(n);
    float *probs = fdup(logits, n);

    softmax_xent_forward(losses, probs, tg, N, V);
    ref_xent_forward(losses_d, probs_d, logits_d, tg, N, V);
    /* p = exp (<= 2 ulp) times 1/S (S exact in double, 2 roundings): <= 4 u ~ 2.4e-7 per element
     * relative; the loss is log(S) - (x_t - m) in double then rounded: ~u relative to the terms */
    char what[96];
    snprintf(what, sizeof what, "softmax_xent_forward probs N%d V%d x%g", N, V, logit_scale);
    check_close(what, probs, probs_d, n, 1e-6);
    check_close("softmax_xent_forward losses", losses, losses_d, N, 1e-6);
    for (int r = 0; r < N; r++)
        assert_true(isfinite(losses[r]));
    for (size_t i = 0; i < n; i++)
        assert_true(isfinite(probs[i]));

    float *grad = fdup(probs, n);
    softmax_xent_backward(grad, tg, dl, N, V);
    ref_xent_backward(dlog_d, probs_d, tg, dl_d, N, V);
    check_close("softmax_xent_backward dlogits", grad, dlog_d, n, 1e-6);

    float *probs2 = falloc(n), *losses2 = falloc(N);
    int nt = omp_get_max_threads();
    for (int rep = 0; rep < 2; rep++) {
        omp_set_num_threads(rep == 0 ? nt : 1);
        memcpy(probs2, logits, n * 4);
        softmax_xent_forward(losses2, probs2, tg, N, V);
        assert_same_bits("softmax_xent_forward probs rerun", probs, probs2, n);
        assert_same_bits("softmax_xent_forward losses rerun", losses, losses2, N);
        softmax_xent_backward(probs2, tg, dl, N, V);
        assert_same_bits("softmax_xent_backward rerun", grad, probs2, n);
    }
    omp_set_num_threads(nt);

    if (fd) {
        double *an = dalloc(n), *l2 = dalloc(N), *p2 = dalloc(n);
        ref_xent_forward(losses_d, probs_d, logits_d, tg, N, V);
        ref_xent_backward(an, probs_d, tg, dl_d, N, V);
        xent_ctx c = {N, V, tg, logits_d, dl_d, l2, p2};
        fd_check("softmax_xent FD dlogits", xent_loss, &c, logits_d, n, an);
        free(an), free(l2), free(p2);
    }
    free(logits), free(losses), free(dl), free(tg), free(logits_d), free(probs_d), free(losses_d);
    free(dl_d), free(dlog_d), free(probs), free(grad), free(probs2), free(losses2);
}

static void test_softmax_xent(void **state)
{
    (void)state;
    run_xent(5, 37, 3.0f, true);
    run_xent(3, 16, 1.0f, true);
    run_xent(8, 50257, 4.0f, false);
    run_xent(4, 50257, 80.0f, false); /* logits in +-80: exp(x - m) spans e^-160 .. 1 */
}

/* huge, spread logits: losses stay finite even where p[target] underflows to 0 */
static void test_softmax_xent_extremes(void **state)
{
    (void)state;
    int N = 3, V = 1000;
    float *x = falloc((size_t)N * V), loss[3];
    int32_t tg[3] = {0, 1, 2};
    for (int i = 0; i < N * V; i++)
        x[i] = (i % 2) ? 80.0f : -80.0f;
    x[0] = -80.0f;    /* row 0: target at -80, others up to +80: p = e^-160 underflows */
    x[V + 1] = 80.0f; /* row 1: target at the max */
    for (int i = 0; i < V; i++)
        x[2 * V + i] = 1e30f; /* row 2: all equal and huge */
    softmax_xent_forward(loss, x, tg, N, V);
    for (int i = 0; i < N * V; i++)
        assert_true(isfinite(x[i]) && x[i] >= 0.0f && x[i] <= 1.0f);
    assert_true(isfinite(loss[0]) && fabs(loss[0] - (160.0 + log(500.0))) < 1e-4);
    assert_true(isfinite(loss[1]) && fabs(loss[1] - log(500.0)) < 1e-5);
    assert_true(isfinite(loss[2]) && fabs(loss[2] - log(1000.0)) < 1e-5);
    float dl[3] = {1.0f, 1.0f, 1.0f};
    softmax_xent_backward(x, tg, dl, N, V);
    for (int i = 0; i < N * V; i++)
        assert_true(isfinite(x[i]));
    assert_true(x[0] == -1.0f);
    free(x);
}

/* softmax_xent_backward_to against softmax_xent_backward_cols followed by zt_round_to_lp (bf16,
 * fp16; the probabilities left as they are), and in fp32 into another buffer: the same bits; rows of
 * several rounding chunks, the target in various chunks and (cut vocabulary, v0) in none */
static void test_xent_backward_to(void **state)
{
    (void)state;
    const int N = 5, V = 2500;
    const size_t n = (size_t)N * V;
    float *x = falloc(n), *probs = falloc(n), *ref = falloc(n), *out = falloc(n), *rnd = falloc(n), losses[5];
    int32_t tg[5] = {0, 1023, 1024, 2499, 3000};
    float dl[5] = {0.2f, -1.5f, 1.0f, 0.0f, 3.0f};
    fill(x, n, 4.0f);
    softmax_xent_forward(losses, x, tg, N, V); /* x now probabilities */
    memcpy(probs, x, n * 4);
    memcpy(ref, x, n * 4);
    softmax_xent_backward_cols(ref, tg, dl, N, V, 100); /* targets - 100: row 4's (2900) beyond the part */
    for (int kind = 0; kind <= ZT_LP_FP16; kind++) {
        const float *want = ref;
        size_t words = kind == ZT_LP_BF16 ? (n + 1) / 2 : n;
        if (kind) {
            memset(rnd, 0, n * 4);
            zt_round_to_lp((zt_lp_kind)kind, rnd, ref, n);
            want = rnd;
        }
        memset(out, 0, n * 4);
        softmax_xent_backward_to(out, kind, x, tg, dl, N, V, 100);
        assert_same_bits("softmax_xent_backward_to", want, out, words);
        assert_same_bits("softmax_xent_backward_to leaves probs", probs, x, n);
    }
    free(x), free(probs), free(ref), free(out), free(rnd);
}

/* layernorm_forward_to, residual_layernorm_forward and gelu_forward_to against layernorm_forward,
 * residual_forward and gelu_forward followed by zt_round_to_lp (bf16, fp16), and in fp32: the
 * same bits, on 2 threads and 1 */
static void test_fused_forward_forms(void **state)
{
    (void)state;
    const int N = 9, C = 200; /* C not a multiple of 16 or of 32 */
    const size_t n = (size_t)N * C, nh = 5003;
    float *a = falloc(n), *b = falloc(n), *w = falloc(C), *bias = falloc(C), *res = falloc(n), *ref = falloc(n);
    float *mean = falloc(N), *rstd = falloc(N), *mean2 = falloc(N), *rstd2 = falloc(N), *res2 = falloc(n);
    float *lp = falloc(n), *lp1 = falloc(n), *lpref = falloc(n);
    float *x = falloc(nh), *h = falloc(nh), *hl = falloc(nh), *hl1 = falloc(nh), *hlref = falloc(nh);
    fill(a, n, 3.0f), fill(b, n, 1.0f), fill(w, C, 2.0f), fill(bias, C, 1.0f), fill(x, nh, 8.0f);
    residual_forward(res, a, b, n);
    layernorm_forward(ref, mean, rstd, res, w, bias, N, C);
    gelu_forward(h, x, nh);
    for (int kind = 0; kind <= ZT_LP_FP16; kind++) {
        const float *want = ref, *wanth = h;
        if (kind) {
            memset(lpref, 0, n * 4), memset(hlref, 0, nh * 4); /* the odd tail's spare bytes compare equal */
            zt_round_to_lp((zt_lp_kind)kind, lpref, ref, n);
            zt_round_to_lp((zt_lp_kind)kind, hlref, h, nh);
            want = lpref, wanth = hlref;
        }
        size_t words = kind == ZT_LP_BF16 ? (n + 1) / 2 : n, wordsh = kind == ZT_LP_BF16 ? (nh + 1) / 2 : nh;
        memset(lp, 0, n * 4);
        layernorm_forward_to(lp, kind, mean2, rstd2, res, w, bias, N, C);
        assert_same_bits("layernorm_forward_to", want, lp, words);
        assert_same_bits("layernorm_forward_to mean", mean, mean2, N);
        assert_same_bits("layernorm_forward_to rstd", rstd, rstd2, N);
        memset(lp, 0, n * 4), memset(res2, 0, n * 4);
        residual_layernorm_forward(res2, lp, kind, mean2, rstd2, a, b, w, bias, N, C);
        assert_same_bits("residual_layernorm_forward res", res, res2, n);
        assert_same_bits("residual_layernorm_forward out", want, lp, words);
        assert_same_bits("residual_layernorm_forward rstd", rstd, rstd2, N);
        memset(hl, 0, nh * 4);
        gelu_forward_to(hl, kind, x, nh);
        assert_same_bits("gelu_forward_to", wanth, hl, wordsh);
        int nt = omp_get_max_threads();
        omp_set_num_threads(1);
        memset(lp1, 0, n * 4), memset(hl1, 0, nh * 4);
        residual_layernorm_forward(res2, lp1, kind, mean2, rstd2, a, b, w, bias, N, C);
        gelu_forward_to(hl1, kind, x, nh);
        omp_set_num_threads(nt);
        assert_same_bits("residual_layernorm_forward 1 thread", lp, lp1, words);
        assert_same_bits("gelu_forward_to 1 thread", hl, hl1, wordsh);
    }
    free(a), free(b), free(w), free(bias), free(res), free(ref), free(mean), free(rstd), free(mean2), free(rstd2);
    free(res2), free(lp), free(lp1), free(lpref), free(x), free(h), free(hl), free(hl1), free(hlref);
}

/* dbias + column sums of v (N,OC), each column over the rows in order in one float: matmul_dbias's order */
static void ref_col_sums(float *db, const float *db0, const float *v, int N, int OC)
{
    for (int c = 0; c < OC; c++) {
        float acc = 0.0f;
        for (int r = 0; r < N; r++)
            acc += v[(size_t)r * OC + c];
        db[c] = db0[c] + acc;
    }
}

/* the fused backward passes against the separate ones: gelu_backward_to (d input in fp32, bf16,
 * fp16, with and without the bias gradient, fp32 in place) against gelu_backward, zt_round_to_lp
 * and a scalar column sum in matmul_dbias's order; matmul_dbias_rows (rounding + dbias) and
 * matmul_dbias alike; widths below, at and across one column block (128 columns under AVX-512),
 * odd ones, on 1 thread and 2: the same bits */
static void test_fused_backward_forms(void **state)
{
    (void)state;
    const int N = 37, widths[] = {7, 128, 200, 333, 390};
    for (int wi = 0; wi < 5; wi++) {
        const int OC = widths[wi];
        const size_t n = (size_t)N * OC;
        float *x = falloc(n), *d = falloc(n), *ref = falloc(n), *rnd = falloc(n), *out = falloc(n), *t = falloc(n);
        float *db0 = falloc(OC), *dbg = falloc(OC), *dbd = falloc(OC), *db = falloc(OC);
        fill(x, n, 8.0f), fill(d, n, 2.0f), fill(db0, OC, 1.0f);
        gelu_backward(ref, x, d, n);
        ref_col_sums(dbg, db0, ref, N, OC);
        ref_col_sums(dbd, db0, d, N, OC);
        int nt = omp_get_max_threads();
        for (int threads = 1; threads <= 2; threads++) {
            omp_set_num_threads(threads);
            for (int kind = 0; kind <= ZT_LP_FP16; kind++) {
                size_t words = kind == ZT_LP_BF16 ? (n + 1) / 2 : n;
                const float *want = ref;
                if (kind) {
                    memset(rnd, 0, n * 4); /* the odd tail's spare bytes compare equal */
                    zt_round_to_lp((zt_lp_kind)kind, rnd, ref, n);
                    want = rnd;
                }
                memset(out, 0, n * 4), memcpy(db, db0, OC * 4);
                gelu_backward_to(out, kind, db, x, d, N, OC);
                assert_same_bits("gelu_backward_to d input", want, out, words);
                assert_same_bits("gelu_backward_to dbias", dbg, db, OC);
                memset(out, 0, n * 4);
                gelu_backward_to(out, kind, NULL, x, d, N, OC);
                assert_same_bits("gelu_backward_to without dbias", want, out, words);
                if (kind) {
                    memset(rnd, 0, n * 4);
                    zt_round_to_lp((zt_lp_kind)kind, rnd, d, n);
                }
                memset(out, 0, n * 4), memcpy(db, db0, OC * 4);
                matmul_dbias_rows(db, out, kind, NULL, d, NULL, NULL, N, OC);
                assert_same_bits("matmul_dbias_rows out", kind ? rnd : d, out, words);
                assert_same_bits("matmul_dbias_rows dbias", dbd, db, OC);
            }
            memcpy(t, d, n * 4), memcpy(db, db0, OC * 4);
            gelu_backward_to(t, 0, db, x, t, N, OC);
            assert_same_bits("gelu_backward_to in place (dout)", ref, t, n);
            assert_same_bits("gelu_backward_to in place dbias", dbg, db, OC);
            memcpy(db, db0, OC * 4);
            matmul_dbias(db, d, N, OC);
            assert_same_bits("matmul_dbias", dbd, db, OC);
            omp_set_num_threads(nt);
        }
        free(x), free(d), free(ref), free(rnd), free(out), free(t), free(db0), free(dbg), free(dbd), free(db);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vecmath),
        cmocka_unit_test(test_vecmath_tails),
        cmocka_unit_test(test_encoder),
        cmocka_unit_test(test_encoder_positions),
        cmocka_unit_test(test_layernorm),
        cmocka_unit_test(test_matmul),
        cmocka_unit_test(test_attention),
        cmocka_unit_test(test_gelu),
        cmocka_unit_test(test_residual),
        cmocka_unit_test(test_fused_forward_forms),
        cmocka_unit_test(test_fused_backward_forms),
        cmocka_unit_test(test_xent_backward_to),
        cmocka_unit_test(test_softmax_xent),
        cmocka_unit_test(test_softmax_xent_extremes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
