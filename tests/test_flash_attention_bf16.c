/* test_flash_attention_bf16.c - unit tests of flash_attention.c's bf16 products (kernels.h, bf16 =
 * true) and of the bf16 pair helpers they run on (src/kernels/vecbf16.h):
 *   - the pair helpers: zt_vbf_adjacent / zt_vbf_pairs round as zt_bf16_rne, and zt_vdot_bf16
 *     (vdpbf16ps where the build has AVX512_BF16) equals its fused-multiply-add form and the scalar
 *     form, bit for bit, on normal values;
 *   - the bf16 kernel against the fp32 kernel on inputs already rounded to bf16 (q, k, v and dO),
 *     where every product of two inputs is exact in both and what differs is the rounding of P
 *     (forward P V, backward Pᵀ dO) and of dS (dSᵀ Q, dS K) to bf16, plus the fp32 accumulation
 *     order. The bound is derived element by element from the products' terms (see bf16_bounds);
 *   - against the double reference on unrounded inputs, a sanity bound;
 *   - GPT-2 and grouped-query shapes, T not a multiple of the tiles, odd T and odd hs (pairs padded),
 *     and (test_flash_invariants.h, as for the fp32 path) the same bits on 1 and 2 threads and on a
 *     rerun, causality of forward and backward, and the fused-qkv wrappers.
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

#define TEST_RNG_SEED 0xBF16A77Eull
#include "kernels/kernels.h"
#include "kernels/vecbf16.h"
#include "test_kernel_check.h"
#include "test_attention_ref.h"
#include "test_flash_invariants.h"
#include "test_flash_packed.h"

#define U_BF16 (1.0 / 256.0) /* bf16 keeps 8 significant bits: nearest-even rounding's relative error <= 2^-8 */

/* ---- the pair helpers ------------------------------------------------------------------------ */

static void test_bf16_pair_helpers(void **state)
{
    (void)state;
    enum { N = 4096 };
    float *x = falloc(2 * N);
    for (int i = 0; i < 2 * N; i++) /* magnitudes over 2^-20 .. 2^20, both signs */
        x[i] = (float)(rng_uniform() * ldexp(1.0, (int)(rng_uniform() * 20)));
    uint32_t *pa = malloc(N * 4), *pp = malloc(N * 4);
    assert_non_null(pa), assert_non_null(pp);
    for (int i = 0; i < 2 * N; i += 2 * ZT_VL) {
        zt_vbf_store(pa + i / 2, zt_vbf_adjacent(zt_vload(x + i), zt_vload(x + i + ZT_VL)));
        zt_vbf_store(pp + i / 2, zt_vbf_pairs(zt_vload(x + i), zt_vload(x + i + ZT_VL)));
    }
    for (int i = 0; i < 2 * N; i += 2 * ZT_VL)
        for (int j = 0; j < ZT_VL; j++) {
            uint32_t a = pa[i / 2 + j], p = pp[i / 2 + j];
            assert_int_equal(a & 0xffffu, zt_bf16_rne(x[i + 2 * j]));
            assert_int_equal(a >> 16, zt_bf16_rne(x[i + 2 * j + 1]));
            assert_int_equal(p & 0xffffu, zt_bf16_rne(x[i + j]));
            assert_int_equal(p >> 16, zt_bf16_rne(x[i + ZT_VL + j]));
        }
    /* dot products: acc + a.odd b.odd + a.even b.even, over accumulators of all sizes */
    float acc[ZT_VL], got[ZT_VL];
    int differ = 0;
    for (int i = 0; i + ZT_VL <= N / 2; i += ZT_VL) {
        for (int j = 0; j < ZT_VL; j++)
            acc[j] = x[(i + j) * 3 % (2 * N)];
        zt_vstore(got, zt_vdot_bf16(zt_vload(acc), zt_vbf_load(pa + i), zt_vbf_load(pp + i)));
#ifdef __AVX512F__
        float fma_form[ZT_VL];
        zt_vstore(fma_form, zt_vdot_bf16_fma(zt_vload(acc), zt_vbf_load(pa + i), zt_vbf_load(pp + i)));
        differ += memcmp(got, fma_form, sizeof got) != 0;
#endif
        for (int j = 0; j < ZT_VL; j++) {
            float s = zt_dot_bf16_scalar(acc[j], pa[i + j], pp[i + j]);
            differ += memcmp(&s, got + j, 4) != 0;
        }
    }
    print_message("  vdot_bf16 (%s) vs its fused-multiply-add and scalar forms: %d differing\n",
#ifdef __AVX512BF16__
                  "vdpbf16ps",
#else
                  "emulated",
#endif
                  differ);
    assert_int_equal(differ, 0);
    free(x), free(pa), free(pp);
}

/* ---- bounds ---------------------------------------------------------------------------------- */

/* The bf16 kernel against the fp32 kernel, both on q, k, v, g already bf16 values. Products of two
 * inputs are exact in fp32 in both, so the scores, dP, lse and P agree up to fp32 accumulation
 * order (~1e-6 relative). What the bf16 kernel rounds on top (relative error <= u = 2^-8 each):
 *   out = Σ_u P v              P rounded:  |Δout[t][d]| <= u Σ_u P |v[u][d]|
 *   dv  = Σ_t P g              P rounded:  |Δdv[u][d]|  <= u Σ_t P |g[t][d]|  (over the group's heads)
 *   dS  = P (dP - D) scale     D = g·out reads each kernel's own out: ΔD_t = g_t·Δout_t (measured
 *                              here from the two outputs), so ΔdS = P scale ΔD; then dS rounded:
 *                              |ΔdS| <= u |dS| + (1 + u) P scale |ΔD_t|
 *   dk  = Σ_t dS q, dq = Σ_u dS k:  |Δ| <= Σ (u |dS| + (1 + u) P scale |ΔD|) |q or k|.
 * Each element's bound is that sum (in double, from the fp32 kernel's lse and out) times 1.05 (the
 * second-order terms) plus the fp32 kernels' own accumulation-order slack, 3e-5 (|x| + rms x) as
 * test_flash_attention.c bounds the fp32 kernel. A rounding applied where it should not be, a term
 * dropped at a tile or pair boundary, or a pair shifted by one breaks it: such errors are of the
 * size of the term (up to 256 times the bound's share of it). */
typedef struct bounds {
    double *o, *dq, *dk, *dv;
} bounds;

static void bf16_bounds(bounds *bd, const float *q, const float *k, const float *v, const float *g, const float *of,
                        const float *ob, const float *lse, int B, int T, int NH, int NKV, int hs, const int32_t *pos)
{
    int C = NH * hs, KV = NKV * hs, G = NH / NKV;
    double scale = 1.0 / sqrt((double)hs), u = U_BF16;
    double *P = dalloc(T), *dS = dalloc(T);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                const float *qt = q + ((size_t)b * T + t) * C + h * hs, *gt = g + ((size_t)b * T + t) * C + h * hs;
                size_t ot = ((size_t)b * T + t) * C + h * hs;
                double D = 0, dD = 0, l = lse[((size_t)b * NH + h) * T + t];
                for (int d = 0; d < hs; d++)
                    D += (double)gt[d] * of[ot + d], dD += (double)gt[d] * ((double)ob[ot + d] - of[ot + d]);
                for (int s = pos ? t - pos[(size_t)b * T + t] : 0; s <= t; s++) { /* the keys row t sees */
                    const float *ks = k + ((size_t)b * T + s) * KV + (h / G) * hs, *vs = v + ((size_t)b * T + s) * KV + (h / G) * hs;
                    double sc = 0, dp = 0;
                    for (int d = 0; d < hs; d++)
                        sc += (double)qt[d] * ks[d], dp += (double)gt[d] * vs[d];
                    P[s] = exp(sc * scale - l);
                    dS[s] = P[s] * (dp - D) * scale;
                    double eds = u * fabs(dS[s]) + (1 + u) * P[s] * scale * fabs(dD);
                    size_t kv = ((size_t)b * T + s) * KV + (h / G) * hs;
                    for (int d = 0; d < hs; d++) {
                        bd->o[ot + d] += u * P[s] * fabs(vs[d]);
                        bd->dv[kv + d] += u * P[s] * fabs(gt[d]);
                        bd->dk[kv + d] += eds * fabs(qt[d]);
                        bd->dq[ot + d] += eds * fabs(ks[d]);
                    }
                }
            }
    free(P), free(dS);
}

/* |got - ref| <= 1.05 bound + slack (|ref| + rms(ref)) element-wise; prints the worst share of it */
static void check_bound(const char *what, const float *got, const float *ref, const double *bound, size_t n,
                        double slack)
{
    double *r = to_double(ref, n), scale = rms(r, n), worst = 0.0;
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        double lim = 1.05 * bound[i] + slack * (fabs(r[i]) + scale), e = fabs((double)got[i] - r[i]) / lim;
        if (!(e <= worst)) {
            worst = e, at = i;
            if (isnan(e)) break;
        }
    }
    print_message("  %-34s n=%-8zu worst |diff| / bound %.3f (element %zu: |diff| %.2e, terms %.2e, slack %.2e)\n",
                  what, n, worst, at, fabs((double)got[at] - r[at]), 1.05 * bound[at], slack * (fabs(r[at]) + scale));
    if (!(worst <= 1.0))
        fail_msg("%s: element %zu got %.9g fp32 kernel %.9g bound %.3g", what, at, (double)got[at], r[at],
                 1.05 * bound[at] + slack * (fabs(r[at]) + scale));
    free(r);
}

/* FNV-1a of the bits: printed, so that builds with and without AVX512_BF16 can be compared */
static uint64_t bits_hash(uint64_t h, const float *x, size_t n)
{
    const unsigned char *p = (const unsigned char *)x;
    for (size_t i = 0; i < 4 * n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

/* ---- one case -------------------------------------------------------------------------------- */

static void run_case(int B, int T, int NH, int NKV, int hs, float qk_scale)
{
    int C = NH * hs, KV = NKV * hs;
    size_t nq = (size_t)B * T * C, nk = (size_t)B * T * KV, nl = (size_t)B * NH * T;
    float *q = falloc(nq), *k = falloc(nk), *v = falloc(nk), *g = falloc(nq);
    fill(q, nq, qk_scale), fill(k, nk, qk_scale), fill(v, nk, 1.0f), fill(g, nq, 1.0f);
    float *scratch = falloc(flash_attention_scratch_floats(B, T, NH, NKV, hs));
    float *of = falloc(nq), *lf = falloc(nl), *dqf = falloc(nq), *dkf = falloc(nk), *dvf = falloc(nk);
    float *ob = falloc(nq), *lb = falloc(nl), *dqb = falloc(nq), *dkb = falloc(nk), *dvb = falloc(nk);
    char what[128];

    /* unrounded inputs against the double reference, a sanity check that the path computes
     * attention: rounding q and k (u each) moves a score s by up to 2u|s| (|s| reaches ~5-10 here)
     * and P by as much relatively, up to ~5%; the backward's sums cancel (dS sums to 0 over a row),
     * which doubles that against the rms. 1e-1; a dropped tile, pair or row is O(1). The sharp
     * check is the next one. */
    flash_attention_gqa_forward(ob, lb, scratch, q, k, v, B, T, NH, NKV, hs, C, KV, true, NULL);
    flash_attention_gqa_backward(dqb, dkb, dvb, scratch, g, q, k, v, ob, lb, B, T, NH, NKV, hs, C, KV, true, NULL);
    gqa_ctx c = {B, T, NH, NKV, hs, to_double(q, nq), to_double(k, nk), to_double(v, nk), to_double(g, nq), NULL};
    double *ro = dalloc(nq), *rl = dalloc(nl), *rq = dalloc(nq), *rk = dalloc(nk), *rv = dalloc(nk);
    ref_gqa_forward(ro, rl, NULL, &c);
    ref_gqa_backward(rq, rk, rv, &c);
    snprintf(what, sizeof what, "bf16 vs exact out B%d T%d NH%d NKV%d hs%d", B, T, NH, NKV, hs);
    check_close(what, ob, ro, nq, 1e-1);
    check_close("bf16 vs exact lse", lb, rl, nl, 1e-1);
    check_close("bf16 vs exact dq", dqb, rq, nq, 1e-1);
    check_close("bf16 vs exact dk", dkb, rk, nk, 1e-1);
    check_close("bf16 vs exact dv", dvb, rv, nk, 1e-1);

    /* inputs rounded to bf16: the derived bounds against the fp32 kernel */
    zt_round_bf16(q, nq), zt_round_bf16(k, nk), zt_round_bf16(v, nk), zt_round_bf16(g, nq);
    flash_attention_gqa_forward(of, lf, scratch, q, k, v, B, T, NH, NKV, hs, C, KV, false, NULL);
    flash_attention_gqa_backward(dqf, dkf, dvf, scratch, g, q, k, v, of, lf, B, T, NH, NKV, hs, C, KV, false, NULL);
    fill(dqb, nq, 100.0f), fill(dkb, nk, 100.0f), fill(dvb, nk, 100.0f); /* garbage: assigned */
    flash_attention_gqa_forward(ob, lb, scratch, q, k, v, B, T, NH, NKV, hs, C, KV, true, NULL);
    flash_attention_gqa_backward(dqb, dkb, dvb, scratch, g, q, k, v, ob, lb, B, T, NH, NKV, hs, C, KV, true, NULL);
    bounds bd = {dalloc(nq), dalloc(nq), dalloc(nk), dalloc(nk)};
    bf16_bounds(&bd, q, k, v, g, of, ob, lf, B, T, NH, NKV, hs, NULL);
    double *zero = dalloc(nl);
    check_bound("bf16 vs fp32 out (bf16 inputs)", ob, of, bd.o, nq, 1e-5);
    /* lse: the same exact products summed in another order (pairs): fp32 rounding only */
    check_bound("bf16 vs fp32 lse (bf16 inputs)", lb, lf, zero, nl, 2e-6);
    check_bound("bf16 vs fp32 dq (bf16 inputs)", dqb, dqf, bd.dq, nq, 3e-5);
    check_bound("bf16 vs fp32 dk (bf16 inputs)", dkb, dkf, bd.dk, nk, 3e-5);
    check_bound("bf16 vs fp32 dv (bf16 inputs)", dvb, dvf, bd.dv, nk, 3e-5);

    uint64_t h = 0xcbf29ce484222325ull;
    h = bits_hash(bits_hash(bits_hash(bits_hash(bits_hash(h, ob, nq), lb, nl), dqb, nq), dkb, nk), dvb, nk);
    print_message("  bf16 kernel's bits (bf16 inputs): %016llx\n", (unsigned long long)h);

    /* a rerun, 1 thread, causality, the fused-qkv wrappers (test_flash_invariants.h) */
    flash_case fc = {B, T, NH, NKV, hs, q, k, v, g, ob, lb, dqb, dkb, dvb, scratch, true};
    flash_invariants(&fc);

    free(q), free(k), free(v), free(g), free(scratch), free(of), free(lf), free(dqf), free(dkf), free(dvf);
    free(ob), free(lb), free(dqb), free(dkb), free(dvb);
    free(c.q), free(c.k), free(c.v), free(c.g), free(ro), free(rl), free(rq), free(rk), free(rv);
    free(bd.o), free(bd.dq), free(bd.dk), free(bd.dv), free(zero);
}

static void test_flash_bf16_small(void **state)
{
    (void)state;
    run_case(2, 7, 2, 2, 10, 1.0f); /* one partial tile, odd T */
    run_case(1, 9, 6, 2, 5, 1.5f);  /* grouped-query, odd hs: the last pair padded */
    run_case(1, 7, 4, 1, 4, 1.5f);  /* one KV head */
}

static void test_flash_bf16_tiles(void **state)
{
    (void)state;
    run_case(1, 256, 12, 12, 64, 0.5f); /* GPT-2 124M's head shape (W1 at T = 256) */
    run_case(2, 131, 3, 3, 32, 1.0f);   /* 3 query tiles, 2 backward key blocks, odd and partial */
    run_case(1, 600, 4, 1, 64, 1.0f);   /* GQA: 3 forward key blocks (online rescaling), 5 chunks */
    run_case(1, 301, 4, 2, 48, 3.0f);   /* sharp attention, hs not a multiple of 32 */
}

/* Packed documents with bf16 products: the packed bf16 kernel against the packed fp32 kernel on
 * bf16 inputs within bf16_bounds over each row's own keys (the argument above holds per document),
 * and each document against its own bf16 run (test_flash_packed.h): bit-identical where it starts
 * at a multiple of 128; elsewhere the key blocks cut the document elsewhere, so the running max
 * each P is rounded to bf16 under differs (within one key block P is the same float, so documents
 * kept in as many blocks come out bit-identical or within fp32 order): two bf16 computations, each
 * within the bound above of the fp32 kernel's; measured up to 2.8e-3 (out) and 2.5e-3 (dq) of
 * check_close's measure: 1e-2. */
static void test_flash_bf16_packed(void **state)
{
    (void)state;
    const packed_row a[2] = {{{1, 127, 128, 100, 164}}, {{30, 400, 90}}};
    flash_packed_case(2, 520, 4, 2, 32, a, true, (packed_tol){1e-2, 2e-6, 1e-2});
    const packed_row b[3] = {{{131}}, {{7, 1, 1, 122}}, {{64, 67}}}; /* odd lengths: pairs across documents */
    flash_packed_case(3, 131, 3, 3, 16, b, true, (packed_tol){1e-2, 2e-6, 1e-2});

    int B = 2, T = 520, NH = 4, NKV = 2, hs = 32, C = NH * hs, KV = NKV * hs;
    size_t nq = (size_t)B * T * C, nk = (size_t)B * T * KV, nl = (size_t)B * NH * T;
    float *q = falloc(nq), *k = falloc(nk), *v = falloc(nk), *g = falloc(nq);
    fill(q, nq, 1.5f), fill(k, nk, 1.5f), fill(v, nk, 1.0f), fill(g, nq, 1.0f);
    zt_round_bf16(q, nq), zt_round_bf16(k, nk), zt_round_bf16(v, nk), zt_round_bf16(g, nq);
    int32_t *pos = malloc((size_t)B * T * sizeof *pos);
    assert_non_null(pos);
    packed_positions(pos, B, T, a);
    float *scratch = falloc(flash_attention_scratch_floats(B, T, NH, NKV, hs));
    float *of = falloc(nq), *lf = falloc(nl), *dqf = falloc(nq), *dkf = falloc(nk), *dvf = falloc(nk);
    float *ob = falloc(nq), *lb = falloc(nl), *dqb = falloc(nq), *dkb = falloc(nk), *dvb = falloc(nk);
    flash_attention_gqa_forward(of, lf, scratch, q, k, v, B, T, NH, NKV, hs, C, KV, false, pos);
    flash_attention_gqa_backward(dqf, dkf, dvf, scratch, g, q, k, v, of, lf, B, T, NH, NKV, hs, C, KV, false, pos);
    flash_attention_gqa_forward(ob, lb, scratch, q, k, v, B, T, NH, NKV, hs, C, KV, true, pos);
    flash_attention_gqa_backward(dqb, dkb, dvb, scratch, g, q, k, v, ob, lb, B, T, NH, NKV, hs, C, KV, true, pos);
    bounds bd = {dalloc(nq), dalloc(nq), dalloc(nk), dalloc(nk)};
    bf16_bounds(&bd, q, k, v, g, of, ob, lf, B, T, NH, NKV, hs, pos);
    double *zero = dalloc(nl);
    check_bound("packed bf16 vs fp32 out", ob, of, bd.o, nq, 1e-5);
    check_bound("packed bf16 vs fp32 lse", lb, lf, zero, nl, 2e-6);
    check_bound("packed bf16 vs fp32 dq", dqb, dqf, bd.dq, nq, 3e-5);
    check_bound("packed bf16 vs fp32 dk", dkb, dkf, bd.dk, nk, 3e-5);
    check_bound("packed bf16 vs fp32 dv", dvb, dvf, bd.dv, nk, 3e-5);
    free(q), free(k), free(v), free(g), free(pos), free(scratch), free(of), free(lf), free(dqf), free(dkf), free(dvf);
    free(ob), free(lb), free(dqb), free(dkb), free(dvb), free(bd.o), free(bd.dq), free(bd.dk), free(bd.dv), free(zero);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bf16_pair_helpers),
        cmocka_unit_test(test_flash_bf16_small),
        cmocka_unit_test(test_flash_bf16_tiles),
        cmocka_unit_test(test_flash_bf16_packed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
