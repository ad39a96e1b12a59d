/* flash_micro.h - flash attention's tile sizes and register-blocked micro-kernels (internal to
 * flash_attention.c, which includes it once): the score products (Q Kᵀ; backward also dO Vᵀ with
 * the P and dS epilogue), the row products (P V, dS K, Pᵀ dO, dSᵀ Q) in fp32 and on bf16 pairs,
 * and the online softmax's row step. Each output element's sequence of roundings is fixed here,
 * whatever tile or block the caller runs it on: the kernels' bits follow from these functions and
 * from which keys a caller's blocks start at (flash_attention.c's top comment). */
#ifndef ZT_KERNELS_FLASH_MICRO_H
#define ZT_KERNELS_FLASH_MICRO_H

#include <math.h>
#include <string.h>

#include "kernels/vecbf16.h"

#define NC (2 * ZT_VL) /* keys per score micro-tile */

#ifndef FA_BR
#define FA_BR 64 /* forward: query rows per tile (a work item) */
#endif
#ifndef FA_BC
#define FA_BC 256 /* forward: keys per block */
#endif
#ifndef FA_BK
#define FA_BK 128 /* backward: keys per block */
#endif
#ifndef FA_BQ
#define FA_BQ 128 /* backward: query rows per chunk under a key block */
#endif

#if FA_BC % FA_BR != 0 || FA_BC % 32 != 0 || FA_BK % 32 != 0
#error "FA_BC: a multiple of FA_BR and 32 (each key block a query tile reads starts at or before it); FA_BK: of 32"
#endif
/* the whole sequence's tiles, in a block of rows from q0 against keys from 0 (kernels.h) */
#if FLASH_BLOCK_ALIGN % FA_BR != 0 || FLASH_BLOCK_ALIGN % FA_BK != 0 || FLASH_BLOCK_ALIGN % FA_BQ != 0
#error "FLASH_BLOCK_ALIGN: a multiple of FA_BR, FA_BK and FA_BQ"
#endif

#define ALWAYS_INLINE static inline __attribute__((always_inline))
/* keeps a loaded vector in a register: without it GCC folds the load into every FMA that reads
 * it, one load per FMA, and the micro-kernels run at the load ports' rate instead of the FMAs' */
#ifdef __AVX512F__
#define IN_REG(x) __asm__("" : "+v"(x))
#elif defined(ZT_VEC_AVX2)
#define IN_REG(x) __asm__("" : "+x"(x))
#else
#define IN_REG(x) (void)0
#endif


/* Register blocking of the micro-kernels. AVX-512 has 32 vector registers: 8 score rows x 2
 * vectors forward, 4 rows x (2 + 2) vectors of S and dP backward, 4 rows x 4 vectors in ay_micro.
 * AVX2 has 16 (and the bf16 emulation needs two per loaded operand): 4 rows forward, 2 backward,
 * 4 x 2 in ay_micro, so that the accumulators and operands stay in registers. The blocking
 * decides only which masked keys a row group computes along; every kept element goes through the
 * same sequence of roundings. */
#ifdef ZT_VEC_AVX2
#define FA_SROWS 4 /* forward score rows per micro-tile */
#define FA_GROWS 2 /* backward score rows per micro-tile (even: the bf16 path writes row pairs) */
#define FA_AYV 2   /* vectors per row in ay_micro */
#else
#define FA_SROWS 8
#define FA_GROWS 4
#define FA_AYV 4
#endif

#include "kernels/flash_pack.h" /* the operand layouts: prefetch streams, transposes, bf16 pairs */

static int round_up(int x, int m) { return (x + m - 1) / m * m; }
static int imax(int a, int b) { return a > b ? a : b; }

/* ---- micro-kernels ---------------------------------------------------------------------------- */

/* S[r][0..NC) = alpha Σ_k X[r][k] YT[k][0..NC) for the R (<= 8) rows of X (row stride ldx);
 * YT: a packed (hs, ldy) panel at the micro-tile's first key */
ALWAYS_INLINE void score_micro(float *S, int lds, const float *X, int ldx, const float *YT, int ldy,
                               int hs, float alpha, const int R)
{
    zt_vf a0[8], a1[8];
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
        a0[r] = a1[r] = zt_vzero();
    for (int k = 0; k < hs; k++) {
        zt_vf y0 = zt_vload(YT + (size_t)k * ldy), y1 = zt_vload(YT + (size_t)k * ldy + ZT_VL);
        IN_REG(y0);
        IN_REG(y1);
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            zt_vf x = zt_vset1(X[(size_t)r * ldx + k]);
            a0[r] = zt_vfmadd(x, y0, a0[r]);
            a1[r] = zt_vfmadd(x, y1, a1[r]);
        }
    }
    zt_vf va = zt_vset1(alpha);
#pragma GCC unroll 8
    for (int r = 0; r < R; r++) {
        zt_vstore(S + (size_t)r * lds, zt_vmul(a0[r], va));
        zt_vstore(S + (size_t)r * lds + ZT_VL, zt_vmul(a1[r], va));
    }
}

/* the same on bf16 pairs: X (R, hp) pairs along hs, YT a (hp, ldy) pair panel, one vdpbf16ps per
 * pair of hs; NV = 1: the first ZT_VL keys only (a diagonal tile whose rows see no further) */
ALWAYS_INLINE void score_micro_bf(float *S, int lds, const uint32_t *X, int ldx, const uint32_t *YT, int ldy,
                                  int hp, float alpha, const int R, const int NV)
{
    zt_vf a0[8], a1[8];
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
        a0[r] = a1[r] = zt_vzero();
    for (int k = 0; k < hp; k++) {
        zt_vbf y0 = zt_vbf_load(YT + (size_t)k * ldy), y1 = NV == 2 ? zt_vbf_load(YT + (size_t)k * ldy + ZT_VL) : y0;
        IN_REG(y0);
        IN_REG(y1);
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            zt_vbf x = zt_vbf_set1(X[(size_t)r * ldx + k]);
            a0[r] = zt_vdot_bf16(a0[r], x, y0);
            if (NV == 2)
                a1[r] = zt_vdot_bf16(a1[r], x, y1);
        }
    }
    zt_vf va = zt_vset1(alpha);
#pragma GCC unroll 8
    for (int r = 0; r < R; r++) {
        zt_vstore(S + (size_t)r * lds, zt_vmul(a0[r], va));
        if (NV == 2)
            zt_vstore(S + (size_t)r * lds + ZT_VL, zt_vmul(a1[r], va));
    }
}

/* C rows (+)= the R x NV accumulators, the last vector `last` lanes wide */
ALWAYS_INLINE void ay_store(float *C, int ldc, zt_vf acc[4][4], int last, bool add, const int R, const int NV)
{
#pragma GCC unroll 4
    for (int i = 0; i < R; i++)
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) {
            float *c = C + (size_t)i * ldc + v * ZT_VL;
            if (v < NV - 1) {
                zt_vstore(c, add ? zt_vadd(zt_vload(c), acc[i][v]) : acc[i][v]);
            } else {
                zt_vf x = add ? zt_vadd(zt_vloadn(c, last, 0.0f), acc[i][v]) : acc[i][v];
                zt_vstoren(c, x, last);
            }
        }
}

/* C[i][0..w) (+)= Σ_{k<kk} A(i,k) Y[k][0..w) for R (<= 4) rows, w = (NV-1)·VL + last (<= 4·VL),
 * A(i,k) = A[i*sai + k*sak], Y rows with stride ldy; add: accumulate into C, else assign */
ALWAYS_INLINE void ay_micro(float *C, int ldc, const float *A, int sai, int sak, const float *Y, int ldy,
                            int kk, int last, bool add, const int R, const int NV)
{
    zt_vf acc[4][4];
#pragma GCC unroll 4
    for (int i = 0; i < R; i++)
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++)
            acc[i][v] = zt_vzero();
    for (int k = 0; k < kk; k++) {
        const float *y = Y + (size_t)k * ldy;
        zt_vf yv[4];
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++)
        {
            yv[v] = v < NV - 1 ? zt_vload(y + v * ZT_VL) : zt_vloadn(y + v * ZT_VL, last, 0.0f);
            IN_REG(yv[v]);
        }
#pragma GCC unroll 4
        for (int i = 0; i < R; i++) {
            zt_vf a = zt_vset1(A[(size_t)i * sai + (size_t)k * sak]);
#pragma GCC unroll 4
            for (int v = 0; v < NV; v++)
                acc[i][v] = zt_vfmadd(a, yv[v], acc[i][v]);
        }
    }
    ay_store(C, ldc, acc, last, add, R, NV);
}

/* the same on bf16 pairs: A(i,k) the pair of k = 2p, 2p+1 (kk counts pairs), Y (kk, ldy) pairs
 * across two of its rows */
ALWAYS_INLINE void ay_micro_bf(float *C, int ldc, const uint32_t *A, int sai, int sak, const uint32_t *Y, int ldy,
                               int kk, int last, bool add, const int R, const int NV)
{
    zt_vf acc[4][4];
#pragma GCC unroll 4
    for (int i = 0; i < R; i++)
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++)
            acc[i][v] = zt_vzero();
    for (int k = 0; k < kk; k++) {
        const uint32_t *y = Y + (size_t)k * ldy;
        zt_vbf yv[4];
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++)
        {
            yv[v] = v < NV - 1 ? zt_vbf_load(y + v * ZT_VL) : zt_vbf_loadn(y + v * ZT_VL, last);
            IN_REG(yv[v]);
        }
#pragma GCC unroll 4
        for (int i = 0; i < R; i++) {
            zt_vbf a = zt_vbf_set1(A[(size_t)i * sai + (size_t)k * sak]);
#pragma GCC unroll 4
            for (int v = 0; v < NV; v++)
                acc[i][v] = zt_vdot_bf16(acc[i][v], a, yv[v]);
        }
    }
    ay_store(C, ldc, acc, last, add, R, NV);
}

/* ay_micro (bf: ay_micro_bf, A and Y pairs, kk pairs) over the whole width w (any hs), R = 4 or 1 */
static void ay_rows(float *C, int ldc, const void *A, int sai, int sak, const void *Y, int ldy, int kk, int w,
                    bool add, int R, bool bf)
{
#define AY(r, v)                                                                                                    \
    (bf ? ay_micro_bf(c, ldc, (const uint32_t *)A, sai, sak, (const uint32_t *)Y + e0, ldy, kk, last, add, r, v)    \
        : ay_micro(c, ldc, (const float *)A, sai, sak, (const float *)Y + e0, ldy, kk, last, add, r, v))
    for (int e0 = 0; e0 < w; e0 += FA_AYV * ZT_VL) {
        int rem = w - e0, nv = imin(FA_AYV, (rem + ZT_VL - 1) / ZT_VL), last = rem - (nv - 1) * ZT_VL;
        float *c = C + e0;
        if (R == 4) {
            switch (nv) {
            case 4: AY(4, 4); break;
            case 3: AY(4, 3); break;
            case 2: AY(4, 2); break;
            default: AY(4, 1); break;
            }
        } else {
            switch (nv) {
            case 4: AY(1, 4); break;
            case 3: AY(1, 3); break;
            case 2: AY(1, 2); break;
            default: AY(1, 1); break;
            }
        }
    }
#undef AY
}

/* the backward scores' epilogue for one row: P = exp(s scale - lse) on keys lo <= key < valid (0
 * before and past: lo > 0 only where a packed document starts inside the micro-tile), and
 * dS = P (dP - D) scale */
ALWAYS_INLINE void grad_row(zt_vf *p0, zt_vf *p1, zt_vf *d0, zt_vf *d1, zt_vf s0, zt_vf s1, zt_vf g0, zt_vf g1,
                            zt_vf vs, float lse, float D, int valid, int lo)
{
    zt_vf nl = zt_vset1(-lse), d = zt_vset1(D);
    *p0 = zt_vkeepn(zt_vexp(zt_vfmadd(s0, vs, nl)), valid);
    *p1 = zt_vkeepn(zt_vexp(zt_vfmadd(s1, vs, nl)), valid - ZT_VL);
    if (lo > 0) { /* another document's keys: dropped, not multiplied (their exp may overflow) */
        *p0 = zt_vkeep_from(*p0, lo);
        *p1 = zt_vkeep_from(*p1, lo - ZT_VL);
    }
    *d0 = zt_vmul(zt_vmul(*p0, zt_vsub(g0, d)), vs);
    *d1 = zt_vmul(zt_vmul(*p1, zt_vsub(g1, d)), vs);
}

/* Backward scores of R (<= 4) query rows t0.. x NC keys c_abs..: S = scale Q Kᵀ and dP = dO Vᵀ
 * accumulated together, then P = exp(S - lse) and dS = P (dP - D) scale, 0 where key > row (and,
 * pos (the rows' positions, or NULL) given, where key < row - pos[row]). */
ALWAYS_INLINE void grad_micro(float *P, float *dS, int ld, const float *Q, int sq, const float *dO, int so,
                              const float *KT, const float *VT, int ldt, int hs, const float *lse,
                              const float *D, const int32_t *pos, int t0, int c_abs, float scale, const int R)
{
    zt_vf s0[4], s1[4], g0[4], g1[4];
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
        s0[r] = s1[r] = g0[r] = g1[r] = zt_vzero();
    for (int k = 0; k < hs; k++) {
        const float *kt = KT + (size_t)k * ldt, *vt = VT + (size_t)k * ldt;
        zt_vf k0 = zt_vload(kt), k1 = zt_vload(kt + ZT_VL), v0 = zt_vload(vt), v1 = zt_vload(vt + ZT_VL);
        IN_REG(k0);
        IN_REG(k1);
        IN_REG(v0);
        IN_REG(v1);
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            zt_vf q = zt_vset1(Q[(size_t)r * sq + k]), g = zt_vset1(dO[(size_t)r * so + k]);
            s0[r] = zt_vfmadd(q, k0, s0[r]);
            s1[r] = zt_vfmadd(q, k1, s1[r]);
            g0[r] = zt_vfmadd(g, v0, g0[r]);
            g1[r] = zt_vfmadd(g, v1, g1[r]);
        }
    }
    zt_vf vs = zt_vset1(scale);
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
        zt_vf p0, p1, d0, d1;
        grad_row(&p0, &p1, &d0, &d1, s0[r], s1[r], g0[r], g1[r], vs, lse[r], D[r], t0 + r - c_abs + 1,
                 pos ? t0 + r - pos[r] - c_abs : 0);
        float *pr = P + (size_t)r * ld, *dr = dS + (size_t)r * ld;
        zt_vstore(pr, p0);
        zt_vstore(pr + ZT_VL, p1);
        zt_vstore(dr, d0);
        zt_vstore(dr + ZT_VL, d1);
    }
}

/* The same on bf16 pairs (Q, dO (R, hp) pairs along hs; KT, VT (hp, ldt) pair panels), R = 4, 2
 * or 1 rows from an even row: writes dS as pairs along keys (dSk, row stride ldk, at the tile's
 * first key / 2) and P and dS as pairs across the rows (PT, dST: row pair stride ldt2, at the row
 * pair's first key; an odd last row pairs with 0). */
ALWAYS_INLINE void grad_micro_bf(uint32_t *dSk, int ldk, uint32_t *PT, uint32_t *dST, int ldt2, const uint32_t *Q,
                                 const uint32_t *dO, int ldq, const uint32_t *KT, const uint32_t *VT, int ldt,
                                 int hp, const float *lse, const float *D, const int32_t *pos, int t0, int c_abs,
                                 float scale, const int R, const int NV)
{
    zt_vf s0[4], s1[4], g0[4], g1[4];
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
        s0[r] = s1[r] = g0[r] = g1[r] = zt_vzero();
    for (int k = 0; k < hp; k++) {
        const uint32_t *kt = KT + (size_t)k * ldt, *vt = VT + (size_t)k * ldt;
        zt_vbf k0 = zt_vbf_load(kt), v0 = zt_vbf_load(vt);
        zt_vbf k1 = NV == 2 ? zt_vbf_load(kt + ZT_VL) : k0, v1 = NV == 2 ? zt_vbf_load(vt + ZT_VL) : v0;
        IN_REG(k0);
        IN_REG(k1);
        IN_REG(v0);
        IN_REG(v1);
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            zt_vbf q = zt_vbf_set1(Q[(size_t)r * ldq + k]), g = zt_vbf_set1(dO[(size_t)r * ldq + k]);
            s0[r] = zt_vdot_bf16(s0[r], q, k0);
            g0[r] = zt_vdot_bf16(g0[r], g, v0);
            if (NV == 2) {
                s1[r] = zt_vdot_bf16(s1[r], q, k1);
                g1[r] = zt_vdot_bf16(g1[r], g, v1);
            }
        }
    }
    zt_vf vs = zt_vset1(scale), p0[4], p1[4], d0[4], d1[4];
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
        grad_row(&p0[r], &p1[r], &d0[r], &d1[r], s0[r], s1[r], g0[r], g1[r], vs, lse[r], D[r], t0 + r - c_abs + 1,
                 pos ? t0 + r - pos[r] - c_abs : 0);
        if (NV == 1) /* the keys past ZT_VL: masked for every row here (their exp is not needed) */
            p1[r] = d1[r] = zt_vzero();
        zt_vbf_store(dSk + (size_t)r * ldk, zt_vbf_adjacent(d0[r], d1[r]));
    }
#pragma GCC unroll 2
    for (int r = 0; r < R; r += 2) {
        zt_vf zp0 = r + 1 < R ? p0[r + 1] : zt_vzero(), zp1 = r + 1 < R ? p1[r + 1] : zt_vzero();
        zt_vf zd0 = r + 1 < R ? d0[r + 1] : zt_vzero(), zd1 = r + 1 < R ? d1[r + 1] : zt_vzero();
        uint32_t *pt = PT + (size_t)(r / 2) * ldt2, *dt = dST + (size_t)(r / 2) * ldt2;
        zt_vbf_store(pt, zt_vbf_pairs(p0[r], zp0));
        zt_vbf_store(pt + ZT_VL, zt_vbf_pairs(p1[r], zp1));
        zt_vbf_store(dt, zt_vbf_pairs(d0[r], zd0));
        zt_vbf_store(dt + ZT_VL, zt_vbf_pairs(d1[r], zd1));
    }
}

/* ---- the online softmax ----------------------------------------------------------------------- */

/* One row of a key block: row[0..valid) holds scores. Updates the running max *m and sum *l,
 * writes P = exp(row - m') over [0, valid) and 0 over [valid, n), and returns e^(m - m'), the
 * factor the row's output so far must be scaled by (0 on the first block). */
static float online_softmax_row(float *row, int valid, int n, float *m, float *l)
{
    float mx = zt_row_max(row, valid), mnew = mx > *m ? mx : *m;
    float sum = zt_row_exp_sum(row, valid, mnew);
    for (int i = valid; i < n; i++)
        row[i] = 0.0f;
    float alpha = expf(*m - mnew); /* *m = -inf on the first block: 0 */
    *l = *l * alpha + sum;
    *m = mnew;
    return alpha;
}

/* online_softmax_row for bf16 products: P rounded to pairs as it is computed, written over the
 * row's first (n+1)/2 floats (keys valid..n and an odd n's pad key hold 0); the sum is
 * zt_row_exp_sum's, added in the same order */
static float online_softmax_row_bf(float *row, int valid, int n, float *m, float *l)
{
    float mx = zt_row_max(row, valid), mnew = mx > *m ? mx : *m;
    zt_vf vm = zt_vset1(mnew), acc = zt_vzero();
    for (int i = 0; i < n; i += 2 * ZT_VL) {
        zt_vf e[2];
        for (int h = 0; h < 2; h++) {
            int k = valid - i - h * ZT_VL;
            const float *x = row + i + h * ZT_VL;
            if (k > 0) {
                e[h] = zt_vexp(zt_vsub(k >= ZT_VL ? zt_vload(x) : zt_vloadn(x, k, -INFINITY), vm));
                acc = zt_vadd(acc, e[h]);
            } else {
                e[h] = zt_vzero();
            }
        }
        int np = imin(ZT_VL, (n - i + 1) / 2);
        if (np == ZT_VL)
            zt_vbf_store((uint32_t *)row + i / 2, zt_vbf_adjacent(e[0], e[1]));
        else
            zt_vbf_storen((uint32_t *)row + i / 2, zt_vbf_adjacent(e[0], e[1]), np);
    }
    float alpha = expf(*m - mnew);
    *l = *l * alpha + zt_vhsum(acc);
    *m = mnew;
    return alpha;
}

static void scale_row(float *x, int n, float a)
{
    int i;
    zt_vf va = zt_vset1(a);
    for (i = 0; i + ZT_VL <= n; i += ZT_VL)
        zt_vstore(x + i, zt_vmul(zt_vload(x + i), va));
    if (i < n)
        zt_vstoren(x + i, zt_vmul(zt_vloadn(x + i, n - i, 0.0f), va), n - i);
}

#endif
