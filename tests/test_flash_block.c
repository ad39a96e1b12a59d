/* test_flash_block.c - unit tests of flash attention's block kernels (kernels.h, "flash attention
 * blocks": flash_attention_block_forward / _backward / _merge), what context parallelism computes
 * a sequence's attention with when each rank holds some query rows and sees the keys a block at a
 * time:
 *   - bit identity: rows q0 .. q0+Tq (q0 a multiple of FLASH_BLOCK_ALIGN) against keys 0 .. q0+Tq
 *     give the bits of the same rows of flash_attention_gqa_forward (out, lse) and _backward (dq)
 *     over the whole sequence: fp32 and bf16 products, with and without positions, MHA and GQA,
 *     odd T and hs;
 *   - the keys cut into 2-4 blocks, each block's forward merged by flash_attention_merge in any
 *     order: the whole forward within a stated tolerance, and one order against another;
 *   - backward over blocks of query rows x blocks of keys (dq accumulated over key blocks, dk, dv
 *     summed over query blocks): the whole backward within a stated tolerance;
 *   - every block's forward against a double-precision reference of that block alone, and the
 *     assembled gradients against finite differences of the double reference's loss;
 *   - rows that see none of a block's keys (keys after them, or a document starting after the
 *     block, or no keys at all): out 0, lse -INFINITY, dq unchanged, dk and dv 0 (also for no rows);
 *     Tq and Tk not multiples of the tiles.
 * Tolerances: |got - ref| <= rtol (|ref| + rms(ref)) (test_kernel_check.h), argued at each check.
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

#define TEST_RNG_SEED 0xB10CA77Eull
#include "kernels/kernels.h"
#include "test_kernel_check.h"
#include "test_attention_ref.h"
#include "test_flash_packed.h"

/* ---- inputs and row blocks -------------------------------------------------------------------- */

typedef struct problem {
    int B, T, NH, NKV, hs, C, KV;
    float *q, *k, *v, *g; /* (B,T,C), (B,T,KV), (B,T,KV), (B,T,C) */
    int32_t *pos;         /* (B,T) or NULL */
    bool bf;
} problem;

static problem make_problem(int B, int T, int NH, int NKV, int hs, const packed_row *rows, bool bf, float qk)
{
    problem p = {B, T, NH, NKV, hs, NH * hs, NKV * hs, NULL, NULL, NULL, NULL, NULL, bf};
    size_t nq = (size_t)B * T * p.C, nk = (size_t)B * T * p.KV;
    p.q = falloc(nq), p.k = falloc(nk), p.v = falloc(nk), p.g = falloc(nq);
    fill(p.q, nq, qk), fill(p.k, nk, qk), fill(p.v, nk, 1.0f), fill(p.g, nq, 1.0f);
    if (rows) {
        p.pos = malloc((size_t)B * T * sizeof *p.pos);
        assert_non_null(p.pos);
        packed_positions(p.pos, B, T, rows);
    }
    return p;
}

static int imin_t(int a, int b) { return a < b ? a : b; }

static void free_problem(problem *p) { free(p->q), free(p->k), free(p->v), free(p->g), free(p->pos); }

/* rows s .. s+n of every batch row of x (B,T,w) into y (B,n,w) */
static float *take_rows(const float *x, int B, int T, int s, int n, int w)
{
    float *y = falloc((size_t)B * n * w + 1);
    for (int b = 0; b < B; b++)
        memcpy(y + (size_t)b * n * w, x + ((size_t)b * T + s) * w, (size_t)n * w * sizeof *y);
    return y;
}

/* lse (B,NH,T) rows s .. s+n into (B,NH,n) */
static float *take_lse(const float *lse, int B, int NH, int T, int s, int n)
{
    float *y = falloc((size_t)B * NH * n + 1);
    for (int bh = 0; bh < B * NH; bh++)
        memcpy(y + (size_t)bh * n, lse + (size_t)bh * T + s, (size_t)n * sizeof *y);
    return y;
}

/* x (B,T,w) rows s .. s+n (+)= y (B,n,w) */
static void add_rows(float *x, const float *y, int B, int T, int s, int n, int w)
{
    for (int b = 0; b < B; b++)
        for (size_t i = 0; i < (size_t)n * w; i++)
            x[((size_t)b * T + s) * w + i] += y[(size_t)b * n * w + i];
}

static float *scratch_for(const problem *p, int Tq, int Tk)
{
    return falloc(flash_attention_block_scratch_floats(p->B, Tq, Tk, p->NH, p->NKV, p->hs));
}

/* the whole sequence's forward and backward */
typedef struct whole {
    float *out, *lse, *dq, *dk, *dv;
} whole;

static whole run_whole(const problem *p)
{
    size_t nq = (size_t)p->B * p->T * p->C, nk = (size_t)p->B * p->T * p->KV;
    whole w = {falloc(nq), falloc((size_t)p->B * p->NH * p->T), falloc(nq), falloc(nk), falloc(nk)};
    float *s = falloc(flash_attention_scratch_floats(p->B, p->T, p->NH, p->NKV, p->hs));
    flash_attention_gqa_forward(w.out, w.lse, s, p->q, p->k, p->v, p->B, p->T, p->NH, p->NKV, p->hs, p->C, p->KV,
                                p->bf, p->pos);
    flash_attention_gqa_backward(w.dq, w.dk, w.dv, s, p->g, p->q, p->k, p->v, w.out, w.lse, p->B, p->T, p->NH,
                                 p->NKV, p->hs, p->C, p->KV, p->bf, p->pos);
    free(s);
    return w;
}

static void free_whole(whole *w) { free(w->out), free(w->lse), free(w->dq), free(w->dk), free(w->dv); }

/* block forward of rows q0 .. q0+Tq against keys k0 .. k0+Tk: out (B,Tq,C), lse (B,NH,Tq) */
static void block_fwd(const problem *p, int q0, int Tq, int k0, int Tk, float **out, float **lse)
{
    float *q = take_rows(p->q, p->B, p->T, q0, Tq, p->C), *k = take_rows(p->k, p->B, p->T, k0, Tk, p->KV);
    float *v = take_rows(p->v, p->B, p->T, k0, Tk, p->KV), *s = scratch_for(p, Tq, Tk);
    *out = falloc((size_t)p->B * Tq * p->C + 1), *lse = falloc((size_t)p->B * p->NH * Tq + 1);
    fill(*out, (size_t)p->B * Tq * p->C, 100.0f); /* garbage: assigned */
    flash_attention_block_forward(*out, *lse, s, q, k, v, p->B, q0, Tq, k0, Tk, p->NH, p->NKV, p->hs, p->C, p->KV,
                                  p->bf, p->pos, p->T);
    free(q), free(k), free(v), free(s);
}

/* block backward from the final out, lse (B,T,C)/(B,NH,T): dq rows q0.. (B,T,C) +=, dk, dv (B,Tk,KV)
 * of the block returned (assigned) */
static void block_bwd(const problem *p, const float *out, const float *lse, int q0, int Tq, int k0, int Tk,
                      float *dq_all, float **dk, float **dv)
{
    float *q = take_rows(p->q, p->B, p->T, q0, Tq, p->C), *k = take_rows(p->k, p->B, p->T, k0, Tk, p->KV);
    float *v = take_rows(p->v, p->B, p->T, k0, Tk, p->KV), *s = scratch_for(p, Tq, Tk);
    float *g = take_rows(p->g, p->B, p->T, q0, Tq, p->C), *o = take_rows(out, p->B, p->T, q0, Tq, p->C);
    float *l = take_lse(lse, p->B, p->NH, p->T, q0, Tq), *dq = take_rows(dq_all, p->B, p->T, q0, Tq, p->C);
    *dk = falloc((size_t)p->B * Tk * p->KV + 1), *dv = falloc((size_t)p->B * Tk * p->KV + 1);
    fill(*dk, (size_t)p->B * Tk * p->KV, 100.0f), fill(*dv, (size_t)p->B * Tk * p->KV, 100.0f); /* assigned */
    flash_attention_block_backward(dq, *dk, *dv, s, g, q, k, v, o, l, p->B, q0, Tq, k0, Tk, p->NH, p->NKV, p->hs,
                                   p->C, p->KV, p->bf, p->pos, p->T);
    for (int b = 0; b < p->B; b++) /* the rows back */
        memcpy(dq_all + ((size_t)b * p->T + q0) * p->C, dq + (size_t)b * Tq * p->C, (size_t)Tq * p->C * sizeof *dq);
    free(q), free(k), free(v), free(s), free(g), free(o), free(l), free(dq);
}

/* ---- the double reference of one block -------------------------------------------------------- */

/* out (B,Tq,C), lse (B,NH,Tq) of rows q0.. over the visible keys of k0 .. k0+Tk alone (none: 0, -inf) */
static void ref_block(double *out, double *lse, const gqa_ctx *c, int q0, int Tq, int k0, int Tk)
{
    int C = c->NH * c->hs, KV = c->NKV * c->hs, G = c->NH / c->NKV, T = c->T, hs = c->hs;
    double *p = dalloc((size_t)T + 1);
    for (int b = 0; b < c->B; b++)
        for (int h = 0; h < c->NH; h++)
            for (int t = q0; t < q0 + Tq; t++) {
                const double *qi = c->q + ((size_t)b * T + t) * C + h * hs;
                int u0 = ref_first_key(c, b, t), lo = u0 > k0 ? u0 : k0, hi = t < k0 + Tk - 1 ? t : k0 + Tk - 1;
                double mx = -INFINITY, sum = 0;
                for (int u = lo; u <= hi; u++) {
                    const double *ku = c->k + ((size_t)b * T + u) * KV + (h / G) * hs;
                    double s = 0;
                    for (int i = 0; i < hs; i++)
                        s += qi[i] * ku[i];
                    p[u] = s / sqrt((double)hs);
                    mx = p[u] > mx ? p[u] : mx;
                }
                for (int u = lo; u <= hi; u++)
                    sum += (p[u] = exp(p[u] - mx));
                lse[((size_t)b * c->NH + h) * Tq + (t - q0)] = lo <= hi ? mx + log(sum) : -INFINITY;
                double *o = out + ((size_t)b * Tq + (t - q0)) * C + h * hs;
                for (int i = 0; i < hs; i++) {
                    double s = 0;
                    for (int u = lo; u <= hi; u++)
                        s += p[u] / sum * c->v[((size_t)b * T + u) * KV + (h / G) * hs + i];
                    o[i] = lo <= hi ? s : 0.0;
                }
            }
    free(p);
}

static gqa_ctx ctx_of(const problem *p)
{
    size_t nq = (size_t)p->B * p->T * p->C, nk = (size_t)p->B * p->T * p->KV;
    gqa_ctx c = {p->B, p->T, p->NH, p->NKV, p->hs, to_double(p->q, nq), to_double(p->k, nk), to_double(p->v, nk),
                 to_double(p->g, nq), p->pos};
    return c;
}

static void free_ctx(gqa_ctx *c) { free(c->q), free(c->k), free(c->v), free(c->g); }

/* the rows of a block with lse -inf must have out exactly 0; the others (finite lse) are compared
 * with the reference at rtol (out) and lse_tol (lse), over the finite rows only */
static void check_block(const char *what, const problem *p, const float *out, const float *lse, const double *ro,
                        const double *rl, int Tq, double rtol, double lse_tol)
{
    int NH = p->NH, hs = p->hs, C = p->C;
    size_t nrow = (size_t)p->B * NH * Tq, seen = 0;
    double *go = dalloc(nrow * hs + 1), *gl = dalloc(nrow + 1);
    float *fo = falloc(nrow * hs + 1), *fl = falloc(nrow + 1);
    for (size_t i = 0; i < nrow; i++) {
        int b = (int)(i / ((size_t)NH * Tq)), h = (int)(i / Tq % NH), t = (int)(i % Tq);
        size_t oo = ((size_t)b * Tq + t) * C + (size_t)h * hs;
        assert_true((rl[i] == -INFINITY) == (lse[i] == -INFINITY));
        if (rl[i] == -INFINITY) {
            for (int e = 0; e < hs; e++)
                assert_true(out[oo + e] == 0.0f);
            continue;
        }
        memcpy(fo + seen * hs, out + oo, (size_t)hs * sizeof *fo);
        memcpy(go + seen * hs, ro + oo, (size_t)hs * sizeof *go);
        fl[seen] = lse[i], gl[seen] = rl[i], seen++;
    }
    char w[160];
    print_message("  %s: %zu of %zu rows see keys\n", what, seen, nrow);
    if (seen) {
        snprintf(w, sizeof w, "%s out", what);
        check_close(w, fo, go, seen * hs, rtol);
        snprintf(w, sizeof w, "%s lse", what);
        check_close(w, fl, gl, seen, lse_tol);
    }
    free(go), free(gl), free(fo), free(fl);
}

/* ---- (1) bit identity with the whole sequence ------------------------------------------------- */

/* rows q0 .. q0+Tq against keys 0 .. q0+Tq: out, lse, and dq (from 0) the whole kernels' bits */
static void identity_case(int B, int T, int NH, int NKV, int hs, const packed_row *rows, bool bf)
{
    problem p = make_problem(B, T, NH, NKV, hs, rows, bf, 1.5f);
    whole w = run_whole(&p);
    int cases = 0;
    for (int q0 = 0; q0 < T; q0 += FLASH_BLOCK_ALIGN)
        for (int pass = 0; pass < 2; pass++) {
            int Tq = pass == 0 ? T - q0 : (T - q0) / 2 + 1; /* to the end, and stopping short (odd) */
            if (pass == 1 && Tq >= T - q0)
                continue;
            float *out, *lse, *dk, *dv, *dq = falloc((size_t)B * T * p.C);
            block_fwd(&p, q0, Tq, 0, q0 + Tq, &out, &lse);
            float *wo = take_rows(w.out, B, T, q0, Tq, p.C), *wl = take_lse(w.lse, B, NH, T, q0, Tq);
            char what[160];
            snprintf(what, sizeof what, "%s%s B%d T%d NH%d/%d hs%d rows %d..%d out", bf ? "bf16 " : "",
                     rows ? "packed " : "", B, T, NH, NKV, hs, q0, q0 + Tq);
            assert_same_bits(what, out, wo, (size_t)B * Tq * p.C);
            assert_same_bits("block lse", lse, wl, (size_t)B * NH * Tq);
            memset(dq, 0, (size_t)B * T * p.C * sizeof *dq);
            block_bwd(&p, w.out, w.lse, q0, Tq, 0, q0 + Tq, dq, &dk, &dv);
            float *wq = take_rows(w.dq, B, T, q0, Tq, p.C), *gq = take_rows(dq, B, T, q0, Tq, p.C);
            assert_same_bits("block dq", gq, wq, (size_t)B * Tq * p.C);
            if (q0 == 0 && pass == 0) { /* the whole sequence itself: dk, dv too */
                assert_same_bits("block dk (whole)", dk, w.dk, (size_t)B * T * p.KV);
                assert_same_bits("block dv (whole)", dv, w.dv, (size_t)B * T * p.KV);
            }
            free(out), free(lse), free(dk), free(dv), free(dq), free(wo), free(wl), free(wq), free(gq);
            cases++;
        }
    print_message("  bit-identical: %d row blocks of %s%s T%d NH%d/%d hs%d\n", cases, bf ? "bf16 " : "",
                  rows ? "packed " : "", T, NH, NKV, hs);
    free_whole(&w), free_problem(&p);
}

static void test_block_bit_identity(void **state)
{
    (void)state;
    const packed_row docs[2] = {{{1, 127, 128, 100, 164}}, {{300, 220}}}; /* starts 0 1 128 256 356 / 0 300 */
    for (int bf = 0; bf < 2; bf++) {
        identity_case(2, 300, 3, 3, 32, NULL, bf);  /* MHA, partial tiles */
        identity_case(1, 520, 4, 2, 16, NULL, bf);  /* GQA, 3 forward key blocks */
        identity_case(2, 520, 4, 2, 32, docs, bf);  /* GQA, packed documents */
        identity_case(1, 261, 2, 1, 10, NULL, bf);  /* odd T and hs (bf16 pairs padded), MQA */
        const packed_row d2[1] = {{{5, 250, 6}}};
        identity_case(1, 261, 3, 3, 6, d2, bf);
    }
}

/* ---- (2) keys in blocks, merged ----------------------------------------------------------------- */

/* rows q0 .. q0+Tq, keys cut at cuts[0] = 0 < ... < cuts[nb] = q0 + Tq; each block's forward checked
 * against the reference of that block alone, then merged in `order`; returns the merged out, lse */
static void merged(const problem *p, const gqa_ctx *c, int q0, int Tq, const int *cuts, int nb, const int *order,
                   float **out, float **lse)
{
    size_t no = (size_t)p->B * Tq * p->C, nl = (size_t)p->B * p->NH * Tq;
    *out = falloc(no), *lse = falloc(nl);
    for (size_t i = 0; i < nl; i++)
        (*lse)[i] = -INFINITY; /* nothing seen yet: the first merge takes the block */
    memset(*out, 0, no * sizeof **out);
    for (int i = 0; i < nb; i++) {
        int j = order[i], k0 = cuts[j], Tk = cuts[j + 1] - cuts[j];
        float *ob, *lb;
        block_fwd(p, q0, Tq, k0, Tk, &ob, &lb);
        if (c) { /* the block alone against the double reference: run_case's bounds (1e-5 out, 1e-6
                    lse) hold per block, each a smaller attention of the same kind */
            double *ro = dalloc(no), *rl = dalloc(nl);
            ref_block(ro, rl, c, q0, Tq, k0, Tk);
            char what[96];
            snprintf(what, sizeof what, "keys %d..%d", k0, k0 + Tk);
            check_block(what, p, ob, lb, ro, rl, Tq, p->bf ? 1e-1 : 1e-5, p->bf ? 1e-1 : 1e-6);
            free(ro), free(rl);
        }
        flash_attention_merge(*out, *lse, ob, lb, p->B, Tq, p->NH, p->hs);
        free(ob), free(lb);
    }
}

/* Tolerances. Whole vs merged (fp32): each is within run_case's bounds of the exact attention
 * (1e-5 out, 1e-6 lse, test_flash_attention.c), the merge adding ~3 roundings (the weights
 * e^(lse_b - lse') computed in double and rounded once, one product and one sum per element) and the
 * weights' error from the blocks' lse (1e-6 absolute, so 1e-6 relative): 2 x 1e-5 + 1e-6 for out,
 * 2 x 1e-6 for lse; measured ~1e-7. bf16: P is rounded to bf16 relative to a running max that the
 * cut changes (8 bits, 2^-8 per term, averaged over the keys), the bound test_flash_attention_bf16
 * uses for unaligned documents: 1e-2 out; lse is fp32's (the scores are the same bits). One order
 * against another: the same blocks' outputs, only the merges' roundings differ: each element goes
 * through nb - 1 merges of 3 roundings each (the weight, the product, the sum), so two orders
 * differ by up to 2 x 3 (nb - 1) u (u = 2^-24; 1.1e-6 for 4 blocks; measured 10 u). */
static void merge_case(int B, int T, int NH, int NKV, int hs, const packed_row *rows, bool bf, int q0, int Tq,
                       const int *cuts, int nb, const int *order2)
{
    problem p = make_problem(B, T, NH, NKV, hs, rows, bf, 1.5f);
    gqa_ctx c = ctx_of(&p);
    whole w = run_whole(&p);
    int order1[4] = {0, 1, 2, 3};
    float *o1, *l1, *o2, *l2;
    merged(&p, &c, q0, Tq, cuts, nb, order1, &o1, &l1);
    merged(&p, NULL, q0, Tq, cuts, nb, order2, &o2, &l2);
    float *wo = take_rows(w.out, B, T, q0, Tq, p.C), *wl = take_lse(w.lse, B, NH, T, q0, Tq);
    size_t no = (size_t)B * Tq * p.C, nl = (size_t)B * NH * Tq;
    double *dwo = to_double(wo, no), *dwl = to_double(wl, nl), *d1 = to_double(o1, no), *dl1 = to_double(l1, nl);
    char what[160];
    snprintf(what, sizeof what, "%s%s T%d rows %d..%d, %d key blocks: merged vs whole out", bf ? "bf16 " : "",
             rows ? "packed " : "", T, q0, q0 + Tq, nb);
    check_close(what, o1, dwo, no, bf ? 1e-2 : 2.1e-5);
    check_close("merged vs whole lse", l1, dwl, nl, 2e-6);
    const double u = 1.0 / (1 << 24);
    check_close("other order vs first out", o2, d1, no, 6 * (nb - 1) * u);
    check_close("other order vs first lse", l2, dl1, nl, 6 * (nb - 1) * u);
    free(o1), free(l1), free(o2), free(l2), free(wo), free(wl), free(dwo), free(dwl), free(d1), free(dl1);
    free_whole(&w), free_ctx(&c), free_problem(&p);
}

static void test_block_merge(void **state)
{
    (void)state;
    const int c3[4] = {0, 77, 200, 300}, o3[3] = {2, 0, 1};
    merge_case(2, 300, 3, 3, 32, NULL, false, 0, 300, c3, 3, o3);
    const int c4[5] = {0, 50, 128, 129, 250}, o4[4] = {3, 1, 0, 2};
    merge_case(1, 300, 4, 2, 16, NULL, false, 100, 150, c4, 4, o4); /* a block of rows 100..250 */
    const packed_row docs[2] = {{{40, 100, 160}}, {{1, 299}}};
    const int c2[3] = {0, 130, 300}, o2[2] = {1, 0};
    merge_case(2, 300, 4, 2, 16, docs, false, 0, 300, c2, 2, o2); /* a document inside one block */
    merge_case(1, 300, 4, 2, 16, NULL, true, 100, 150, c4, 4, o4);
    merge_case(2, 300, 4, 2, 16, docs, true, 0, 300, c3, 3, o3);
}

/* ---- (3) backward over blocks of rows x blocks of keys ----------------------------------------- */

/* dq over key blocks (+=), dk, dv summed over query blocks, with the whole forward's out and lse;
 * qc: query cuts (nqb blocks), kc: key cuts (nkb blocks), both covering 0 .. T. Returns dq, dk, dv */
static void blocked_backward(const problem *p, const float *out, const float *lse, const int *qc, int nqb,
                             const int *kc, int nkb, float **dq, float **dk, float **dv)
{
    size_t nq = (size_t)p->B * p->T * p->C, nk = (size_t)p->B * p->T * p->KV;
    *dq = falloc(nq), *dk = falloc(nk), *dv = falloc(nk);
    memset(*dq, 0, nq * sizeof **dq), memset(*dk, 0, nk * sizeof **dk), memset(*dv, 0, nk * sizeof **dv);
    for (int j = nkb - 1; j >= 0; j--) /* the ring's order: any */
        for (int i = 0; i < nqb; i++) {
            int q0 = qc[i], Tq = qc[i + 1] - qc[i], k0 = kc[j], Tk = kc[j + 1] - kc[j];
            float *bk, *bv;
            block_bwd(p, out, lse, q0, Tq, k0, Tk, *dq, &bk, &bv);
            add_rows(*dk, bk, p->B, p->T, k0, Tk, p->KV);
            add_rows(*dv, bv, p->B, p->T, k0, Tk, p->KV);
            free(bk), free(bv);
        }
}

/* Tolerance: the whole backward and the blocked one are each within run_case's 3e-5 of the exact
 * gradients (the same products, added in another order across blocks: dq's key blocks in another
 * order, dk and dv summed per query block then across), so within 6e-5 of each other; the blocked
 * one (fp32) is also checked against the double reference at 3e-5. bf16: the same, since P and dS
 * come from the same final lse and D, are rounded to the same bf16 values, and only the fp32
 * accumulation's order (and which key pairs a vdpbf16ps adds together) changes with the cut. */
static void backward_case(int B, int T, int NH, int NKV, int hs, const packed_row *rows, bool bf, const int *qc,
                          int nqb, const int *kc, int nkb)
{
    problem p = make_problem(B, T, NH, NKV, hs, rows, bf, 1.5f);
    whole w = run_whole(&p);
    float *dq, *dk, *dv;
    blocked_backward(&p, w.out, w.lse, qc, nqb, kc, nkb, &dq, &dk, &dv);
    size_t nq = (size_t)B * T * p.C, nk = (size_t)B * T * p.KV;
    double *wq = to_double(w.dq, nq), *wk = to_double(w.dk, nk), *wv = to_double(w.dv, nk);
    char what[160];
    snprintf(what, sizeof what, "%s%s T%d %dx%d blocks: dq vs whole", bf ? "bf16 " : "", rows ? "packed " : "", T,
             nqb, nkb);
    double tol = 6e-5;
    check_close(what, dq, wq, nq, tol);
    check_close("blocked dk vs whole", dk, wk, nk, tol);
    check_close("blocked dv vs whole", dv, wv, nk, tol);
    if (!bf) {
        gqa_ctx c = ctx_of(&p);
        double *rq = dalloc(nq), *rk = dalloc(nk), *rv = dalloc(nk);
        ref_gqa_backward(rq, rk, rv, &c);
        check_close("blocked dq vs reference", dq, rq, nq, 3e-5);
        check_close("blocked dk vs reference", dk, rk, nk, 3e-5);
        check_close("blocked dv vs reference", dv, rv, nk, 3e-5);
        free(rq), free(rk), free(rv), free_ctx(&c);
    }
    free(dq), free(dk), free(dv), free(wq), free(wk), free(wv), free_whole(&w), free_problem(&p);
}

static void test_block_backward(void **state)
{
    (void)state;
    const int qc[4] = {0, 100, 128, 300}, kc[3] = {0, 150, 300}, kc4[5] = {0, 37, 128, 256, 300};
    for (int bf = 0; bf < 2; bf++) {
        backward_case(2, 300, 3, 3, 32, NULL, bf, qc, 3, kc, 2);
        backward_case(1, 300, 4, 2, 16, NULL, bf, kc, 2, kc4, 4);
        const packed_row docs[2] = {{{40, 100, 160}}, {{1, 299}}};
        backward_case(2, 300, 4, 2, 16, docs, bf, qc, 3, kc4, 4);
    }
}

/* ---- (4) finite differences --------------------------------------------------------------------- */

/* The forward by blocks (keys cut, merged), the backward by blocks of rows x keys, against central
 * finite differences of the double reference's loss L = Σ g·out (exact to ~1e-10): run_case's
 * bounds, the fp32 kernel's own error (1e-5 out, 3e-5 gradients). */
static void fd_case(int B, int T, int NH, int NKV, int hs, const packed_row *rows, const int *qc, int nqb,
                    const int *kc, int nkb)
{
    problem p = make_problem(B, T, NH, NKV, hs, rows, false, 1.5f);
    gqa_ctx c = ctx_of(&p);
    size_t nq = (size_t)B * T * p.C, nk = (size_t)B * T * p.KV, nl = (size_t)B * NH * T;
    float *out = falloc(nq), *lse = falloc(nl);
    for (int i = 0; i < nqb; i++) { /* each row block's forward: its key blocks up to its end, merged */
        int q0 = qc[i], Tq = qc[i + 1] - q0, cuts[8], nb = 0, order[8];
        for (int j = 0; j < nkb && kc[j] < q0 + Tq; j++)
            cuts[nb] = kc[j], order[nb] = nb, nb++;
        cuts[nb] = imin_t(kc[nb], q0 + Tq);
        float *o, *l;
        merged(&p, &c, q0, Tq, cuts, nb, order, &o, &l);
        for (int b = 0; b < B; b++) {
            memcpy(out + ((size_t)b * T + q0) * p.C, o + (size_t)b * Tq * p.C, (size_t)Tq * p.C * sizeof *o);
            for (int h = 0; h < NH; h++)
                memcpy(lse + ((size_t)b * NH + h) * T + q0, l + ((size_t)b * NH + h) * Tq, (size_t)Tq * sizeof *l);
        }
        free(o), free(l);
    }
    double *ro = dalloc(nq), *rl = dalloc(nl);
    ref_gqa_forward(ro, rl, NULL, &c);
    check_close("fd case: merged out vs reference", out, ro, nq, 1e-5);
    check_close("fd case: merged lse vs reference", lse, rl, nl, 1e-6);
    float *dq, *dk, *dv;
    blocked_backward(&p, out, lse, qc, nqb, kc, nkb, &dq, &dk, &dv);
    double *gq = fd_grad(ref_gqa_loss, &c, c.q, nq), *gk = fd_grad(ref_gqa_loss, &c, c.k, nk);
    double *gv = fd_grad(ref_gqa_loss, &c, c.v, nk);
    check_close("blocked dq (FD)", dq, gq, nq, 3e-5);
    check_close("blocked dk (FD)", dk, gk, nk, 3e-5);
    check_close("blocked dv (FD)", dv, gv, nk, 3e-5);
    free(gq), free(gk), free(gv), free(dq), free(dk), free(dv), free(ro), free(rl), free(out), free(lse);
    free_ctx(&c), free_problem(&p);
}

static void test_block_fd(void **state)
{
    (void)state;
    const int qc[3] = {0, 4, 9}, kc[3] = {0, 3, 9};
    fd_case(2, 9, 2, 1, 4, NULL, qc, 2, kc, 2); /* GQA, a key block after some rows */
    const int qc3[4] = {0, 5, 6, 12}, kc3[4] = {0, 2, 7, 12};
    const packed_row docs[2] = {{{5, 7}}, {{1, 1, 10}}};
    fd_case(2, 12, 3, 3, 6, docs, qc3, 3, kc3, 3); /* packed, MHA */
}

/* ---- (5) rows that see no key ------------------------------------------------------------------- */

/* keys after every row, after some rows, and (packed) a document starting after the key block:
 * out 0 and lse -INFINITY where nothing is seen (checked exactly), dq unchanged there (bits), dk
 * and dv 0 for keys nobody reads; the rest against the block reference. */
static void unseen_case(const packed_row *rows, bool bf, int q0, int Tq, int k0, int Tk)
{
    int B = 2, T = 300, NH = 4, NKV = 2, hs = 16;
    problem p = make_problem(B, T, NH, NKV, hs, rows, bf, 1.5f);
    gqa_ctx c = ctx_of(&p);
    whole w = run_whole(&p);
    float *out, *lse;
    size_t no = (size_t)B * Tq * p.C, nl = (size_t)B * NH * Tq;
    block_fwd(&p, q0, Tq, k0, Tk, &out, &lse);
    double *ro = dalloc(no), *rl = dalloc(nl);
    ref_block(ro, rl, &c, q0, Tq, k0, Tk);
    char what[96];
    snprintf(what, sizeof what, "%s%s rows %d..%d keys %d..%d", bf ? "bf16 " : "", rows ? "packed " : "", q0,
             q0 + Tq, k0, k0 + Tk);
    check_block(what, &p, out, lse, ro, rl, Tq, bf ? 1e-1 : 1e-5, bf ? 1e-1 : 1e-6);
    /* backward: dq rows that read nothing of the block keep their bits; keys nobody reads get 0 */
    size_t nq = (size_t)B * T * p.C;
    float *dq = falloc(nq), *dq0, *dk, *dv;
    fill(dq, nq, 1.0f);
    dq0 = fdup(dq, nq);
    block_bwd(&p, w.out, w.lse, q0, Tq, k0, Tk, dq, &dk, &dv);
    for (int b = 0; b < B; b++)
        for (int t = q0; t < q0 + Tq; t++) {
            bool any = false;
            for (int u = k0; u < k0 + Tk && u <= t; u++)
                any |= u >= ref_first_key(&c, b, t);
            if (!any)
                assert_same_bits("unseen row's dq", dq + ((size_t)b * T + t) * p.C, dq0 + ((size_t)b * T + t) * p.C,
                                 (size_t)p.C);
        }
    for (int b = 0; b < B; b++)
        for (int u = k0; u < k0 + Tk; u++) {
            bool read = false;
            for (int t = q0; t < q0 + Tq; t++)
                read |= u <= t && u >= ref_first_key(&c, b, t);
            if (!read)
                for (int e = 0; e < p.KV; e++) {
                    size_t i = ((size_t)b * Tk + (u - k0)) * p.KV + e;
                    assert_true(dk[i] == 0.0f && dv[i] == 0.0f);
                }
        }
    free(out), free(lse), free(ro), free(rl), free(dq), free(dq0), free(dk), free(dv);
    free_whole(&w), free_ctx(&c), free_problem(&p);
}

static void test_block_unseen(void **state)
{
    (void)state;
    const packed_row docs[2] = {{{40, 100, 160}}, {{1, 299}}};
    for (int bf = 0; bf < 2; bf++) {
        unseen_case(NULL, bf, 0, 64, 100, 50);    /* every row before every key */
        unseen_case(NULL, bf, 90, 41, 101, 77);   /* rows 90..100 before the keys, odd offsets */
        unseen_case(NULL, bf, 130, 170, 0, 129);  /* keys before every row, one row short of a tile */
        unseen_case(docs, bf, 150, 150, 0, 139);  /* row 0's documents from 140 on start after the keys */
        unseen_case(docs, bf, 33, 200, 41, 60);   /* a document (40..140) straddling the key block */
        unseen_case(NULL, bf, 10, 20, 5, 0);      /* no keys */
        unseen_case(docs, bf, 10, 0, 5, 20);      /* no rows: dk, dv 0 */
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_block_bit_identity),
        cmocka_unit_test(test_block_merge),
        cmocka_unit_test(test_block_backward),
        cmocka_unit_test(test_block_fd),
        cmocka_unit_test(test_block_unseen),
    };
    (void)flash_packed_case; /* test_flash_packed.h's: only its positions are used here */
    return cmocka_run_group_tests(tests, NULL, NULL);
}
