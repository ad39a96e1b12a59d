/* flash_attention.c - causal self-attention whose memory grows as O(T): fused and tiled with an
 * online softmax (FlashAttention-2), forward and backward side by side, for grouped-query
 * attention (NKV key/value heads, each read by G = NH/NKV query heads in place: nothing is
 * repeated in memory; NKV = NH is GPT-2's multi-head attention on its fused qkv).
 *
 * Per (b, h), Q the (T, hs) slice of query head h, K, V those of KV head h / G, scale = 1/sqrt(hs):
 *   forward   for each query tile Qi (FA_BR rows), over key blocks Kj, Vj (FA_BC keys, up to the
 *             diagonal): S = scale Qi Kjᵀ (causal mask on the last block),
 *             m' = max(m, rowmax S), P = exp(S - m'), l = l e^(m - m') + rowsum P,
 *             O = O e^(m - m') + P Vj;  at the end O /= l and lse = m + log l.
 *             Saved: O itself (the block's attention output) and lse (B,NH,T), nothing T x T.
 *   backward  D = rowsum(dO * O) per query row; per key block j (FA_BK keys), over the query
 *             rows from the block down in chunks of FA_BQ rows: S = scale Q Kjᵀ and dP = dO Vjᵀ
 *             in one pass, P = exp(S - lse), dS = P (dP - D) scale (in that pass's epilogue),
 *             dVj (+)= Pᵀ dO, dKj (+)= dSᵀ Q, dQ (+)= dS Kj.
 *
 * Products. The tiles are multiplied by register-blocked micro-kernels written on vecmath.h's
 * vectors (AVX-512: 16 lanes; they compile to scalar code without it), not by a BLAS: a call per
 * 64 x 64 tile would pack both operands every time. The score products (Q Kᵀ, dO Vᵀ) read Kᵀ and
 * Vᵀ packed once per (b, KV head) as (hs, Tpad) panels, so a micro-tile is 8 (or 4) rows x 32 keys
 * of broadcast-FMAs; the other products (P V, dS K, Pᵀ dO, dSᵀ Q) read their right operand's rows
 * as they lie (hs contiguous floats) and accumulate 4 rows x hs in registers. The causal triangle
 * is cut at micro-tile granularity (8 or 4 rows x 32 keys, 4 rows x each row's keys), not at
 * whole tiles: at T = 256 the score products run 56% of the T x T square and the others 51%, where
 * attention.c's 64-row blocks run 62.5%.
 * Everything is fp32: under bf16/fp16 compute attention runs on fp32 q, k, v and reads the fp32 O
 * (docs/precision.md), as attention.c does. The one float lse is held in costs P a relative error
 * of ~u |lse| in backward (attention.c subtracts the row max instead): ~1e-6 at scores of ~10.
 *
 * The same algorithm on CPUs elsewhere: PyTorch's ATen FlashAttentionKernel (blocked GEMMs + online
 * softmax, parallel over (batch, head, query block) forward and (batch, head) backward), ggml's
 * flash_attn_ext (one query row at a time, for inference), oneDNN's SDPA (brgemm micro-kernels).
 *
 * Threads. Forward: Kᵀ of every (b, KV head) packed (split over the threads), then the (b, h,
 * query tile) items split statically, each writing only its own rows of out and lse. Backward: the
 * B*NKV (b, KV head) groups split statically, each packing its Kᵀ, Vᵀ and running its G query
 * heads in order (the first assigns dK and dV, the next add: one fixed order, and no two threads
 * write one row), as attention.c does. No result depends on the thread count, bit for bit.
 *
 * Memory (flash_attention_scratch_floats, sized under the OpenMP thread setting the kernels run
 * with; they never use more threads): forward B*NKV*hs*Tpad (Kᵀ) plus FA_BR x FA_BC scores per
 * thread; backward per thread 2*hs*Tpad (Kᵀ, Vᵀ) + Tpad (D) + two FA_BQ x FA_BK tiles. O(T).
 */
#include "kernels/kernels.h"
#include "kernels/vecmath.h"

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

#define ALWAYS_INLINE static inline __attribute__((always_inline))
/* keeps a loaded vector in a register: without it GCC folds the load into every FMA that reads
 * it, one load per FMA, and the micro-kernels run at the load ports' rate instead of the FMAs' */
#ifdef __AVX512F__
#define IN_REG(x) __asm__("" : "+v"(x))
#else
#define IN_REG(x) (void)0
#endif

static int imin(int a, int b) { return a < b ? a : b; }
static int round_up(int x, int m) { return (x + m - 1) / m * m; }

/* ---- sizes and threads ------------------------------------------------------------------------ */

static int fwd_threads(int B, int T, int NH)
{
    long items = (long)B * NH * ((T + FA_BR - 1) / FA_BR), nt = zt_max_threads();
    return (int)(nt < items ? nt : items);
}

static int bwd_threads(int B, int NKV)
{
    int nt = zt_max_threads();
    return nt < B * NKV ? nt : B * NKV;
}

/* keys padded to whole micro-tiles (and to 16 floats: every panel stays 64-byte aligned) */
static int tpad(int T) { return round_up(T, 32); }
/* per-thread scratch, multiples of 16 floats */
static size_t fwd_thread_floats(void) { return (size_t)FA_BR * FA_BC + 2 * FA_BR; }
static size_t bwd_thread_floats(int T, int hs)
{
    return (2 * (size_t)hs + 1) * (size_t)tpad(T) + 2 * (size_t)FA_BQ * FA_BK;
}

size_t flash_attention_scratch_floats(int B, int T, int NH, int NKV, int hs)
{
    size_t f = (size_t)B * NKV * hs * (size_t)tpad(T) + (size_t)fwd_threads(B, T, NH) * fwd_thread_floats();
    size_t b = (size_t)bwd_threads(B, NKV) * bwd_thread_floats(T, hs);
    return f > b ? f : b;
}

/* dst (hs, Tp) = srcᵀ, src (T, hs) with row stride ld; columns T..Tp zero (Tp a multiple of 16) */
#ifdef __AVX512F__
/* r[i] row i of a 16 x 16 block -> r[j] column j: unpack pairs of rows, then pairs of pairs (each
 * 128-bit lane L of u[G][c] holds rows 4G..4G+3 of column 4L + c), then a 4 x 4 transpose of
 * 128-bit lanes */
static inline void transpose16(__m512 r[16])
{
    __m512 t[16], u[16];
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int G = 0; G < 4; G++) { /* u[4c + G] = u[G][c] */
        __m512d lo0 = _mm512_castps_pd(t[4 * G]), lo1 = _mm512_castps_pd(t[4 * G + 2]);
        __m512d hi0 = _mm512_castps_pd(t[4 * G + 1]), hi1 = _mm512_castps_pd(t[4 * G + 3]);
        u[0 + G] = _mm512_castpd_ps(_mm512_unpacklo_pd(lo0, lo1));
        u[4 + G] = _mm512_castpd_ps(_mm512_unpackhi_pd(lo0, lo1));
        u[8 + G] = _mm512_castpd_ps(_mm512_unpacklo_pd(hi0, hi1));
        u[12 + G] = _mm512_castpd_ps(_mm512_unpackhi_pd(hi0, hi1));
    }
    for (int c = 0; c < 4; c++) {
        __m512 *v = u + 4 * c;
        __m512 x0 = _mm512_shuffle_f32x4(v[0], v[1], 0x44), x1 = _mm512_shuffle_f32x4(v[0], v[1], 0xEE);
        __m512 x2 = _mm512_shuffle_f32x4(v[2], v[3], 0x44), x3 = _mm512_shuffle_f32x4(v[2], v[3], 0xEE);
        r[0 + c] = _mm512_shuffle_f32x4(x0, x2, 0x88);
        r[4 + c] = _mm512_shuffle_f32x4(x0, x2, 0xDD);
        r[8 + c] = _mm512_shuffle_f32x4(x1, x3, 0x88);
        r[12 + c] = _mm512_shuffle_f32x4(x1, x3, 0xDD);
    }
}

static void pack_transposed(float *dst, const float *src, int T, int Tp, int hs, int ld)
{
    for (int t0 = 0; t0 < Tp; t0 += 16)
        for (int d0 = 0; d0 < hs; d0 += 16) {
            int nd = imin(16, hs - d0);
            __mmask16 m = nd == 16 ? 0xFFFF : (__mmask16)((1u << nd) - 1u);
            __m512 r[16];
            for (int i = 0; i < 16; i++)
                r[i] = t0 + i < T ? _mm512_maskz_loadu_ps(m, src + (size_t)(t0 + i) * ld + d0) : _mm512_setzero_ps();
            transpose16(r);
            for (int j = 0; j < nd; j++)
                _mm512_storeu_ps(dst + (size_t)(d0 + j) * Tp + t0, r[j]);
        }
}
#else
static void pack_transposed(float *dst, const float *src, int T, int Tp, int hs, int ld)
{
    for (int d = 0; d < hs; d++)
        for (int t = 0; t < Tp; t++)
            dst[(size_t)d * Tp + t] = t < T ? src[(size_t)t * ld + d] : 0.0f;
}
#endif

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

/* ay_micro over the whole width w (any hs), R = 4 or 1 rows */
static void ay_rows(float *C, int ldc, const float *A, int sai, int sak, const float *Y, int ldy, int kk,
                    int w, bool add, int R)
{
    for (int e0 = 0; e0 < w; e0 += 4 * ZT_VL) {
        int rem = w - e0, nv = imin(4, (rem + ZT_VL - 1) / ZT_VL), last = rem - (nv - 1) * ZT_VL;
        float *c = C + e0;
        const float *y = Y + e0;
        if (R == 4) {
            switch (nv) {
            case 4: ay_micro(c, ldc, A, sai, sak, y, ldy, kk, last, add, 4, 4); break;
            case 3: ay_micro(c, ldc, A, sai, sak, y, ldy, kk, last, add, 4, 3); break;
            case 2: ay_micro(c, ldc, A, sai, sak, y, ldy, kk, last, add, 4, 2); break;
            default: ay_micro(c, ldc, A, sai, sak, y, ldy, kk, last, add, 4, 1); break;
            }
        } else {
            switch (nv) {
            case 4: ay_micro(c, ldc, A, sai, sak, y, ldy, kk, last, add, 1, 4); break;
            case 3: ay_micro(c, ldc, A, sai, sak, y, ldy, kk, last, add, 1, 3); break;
            case 2: ay_micro(c, ldc, A, sai, sak, y, ldy, kk, last, add, 1, 2); break;
            default: ay_micro(c, ldc, A, sai, sak, y, ldy, kk, last, add, 1, 1); break;
            }
        }
    }
}

/* Backward scores of R (<= 4) query rows t0.. x NC keys c_abs..: S = scale Q Kᵀ and dP = dO Vᵀ
 * accumulated together, then P = exp(S - lse) and dS = P (dP - D) scale, 0 where key > row. */
ALWAYS_INLINE void grad_micro(float *P, float *dS, int ld, const float *Q, int sq, const float *dO, int so,
                              const float *KT, const float *VT, int ldt, int hs, const float *lse,
                              const float *D, int t0, int c_abs, float scale, const int R)
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
        int valid = t0 + r - c_abs + 1; /* keys c_abs .. t0 + r */
        zt_vf nl = zt_vset1(-lse[r]), d = zt_vset1(D[r]);
        zt_vf p0 = zt_vkeepn(zt_vexp(zt_vfmadd(s0[r], vs, nl)), valid);
        zt_vf p1 = zt_vkeepn(zt_vexp(zt_vfmadd(s1[r], vs, nl)), valid - ZT_VL);
        float *pr = P + (size_t)r * ld, *dr = dS + (size_t)r * ld;
        zt_vstore(pr, p0);
        zt_vstore(pr + ZT_VL, p1);
        zt_vstore(dr, zt_vmul(zt_vmul(p0, zt_vsub(g0[r], d)), vs));
        zt_vstore(dr + ZT_VL, zt_vmul(zt_vmul(p1, zt_vsub(g1[r], d)), vs));
    }
}

/* ---- forward ---------------------------------------------------------------------------------- */

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

static void scale_row(float *x, int n, float a)
{
    int i;
    zt_vf va = zt_vset1(a);
    for (i = 0; i + ZT_VL <= n; i += ZT_VL)
        zt_vstore(x + i, zt_vmul(zt_vload(x + i), va));
    if (i < n)
        zt_vstoren(x + i, zt_vmul(zt_vloadn(x + i, n - i, 0.0f), va), n - i);
}

/* rows i0 .. i0+mr of one (b, h): o (row stride so) and lse (T) of those rows; KT the packed Kᵀ
 * of its KV head (hs, ldt) */
static void forward_tile(float *o, int so, float *lse, float *S, float *mrow, float *lrow, const float *qh,
                         int sq, const float *KT, int ldt, const float *vh, int skv, int i0, int mr, int hs,
                         float scale)
{
    const int end = i0 + mr;
    const float *qi = qh + (size_t)i0 * sq;
    float *oi = o + (size_t)i0 * so;
    for (int r = 0; r < mr; r++)
        mrow[r] = -INFINITY, lrow[r] = 0.0f;
    for (int j0 = 0; j0 < end; j0 += FA_BC) {
        int n = imin(FA_BC, end - j0);
        /* S = scale Qi Kjᵀ, each 8-row group only up to its last row's diagonal */
        int r = 0;
        for (; r + 8 <= mr; r += 8) {
            int cols = imin(n, i0 + r + 8 - j0);
            for (int c0 = 0; c0 < cols; c0 += NC)
                score_micro(S + (size_t)r * FA_BC + c0, FA_BC, qi + (size_t)r * sq, sq, KT + j0 + c0, ldt, hs,
                            scale, 8);
        }
        for (; r < mr; r++) {
            int cols = imin(n, i0 + r + 1 - j0);
            for (int c0 = 0; c0 < cols; c0 += NC)
                score_micro(S + (size_t)r * FA_BC + c0, FA_BC, qi + (size_t)r * sq, sq, KT + j0 + c0, ldt, hs,
                            scale, 1);
        }
        for (r = 0; r < mr; r++) {
            int valid = imin(n, i0 + r + 1 - j0); /* >= 1: j0 <= i0 (FA_BC is a multiple of FA_BR) */
            float alpha = online_softmax_row(S + (size_t)r * FA_BC, valid, n, mrow + r, lrow + r);
            if (j0 > 0 && alpha != 1.0f)
                scale_row(oi + (size_t)r * so, hs, alpha);
        }
        /* O (+)= P Vj, each 4-row group only over the keys its last row sees */
        const float *vj = vh + (size_t)j0 * skv;
        for (r = 0; r < mr;) {
            int R = mr - r >= 4 ? 4 : 1, kk = imin(n, i0 + r + R - j0);
            ay_rows(oi + (size_t)r * so, so, S + (size_t)r * FA_BC, FA_BC, 1, vj, skv, kk, hs, j0 > 0, R);
            r += R;
        }
    }
    for (int r = 0; r < mr; r++) {
        scale_row(oi + (size_t)r * so, hs, 1.0f / lrow[r]);
        lse[i0 + r] = mrow[r] + logf(lrow[r]);
    }
}

void flash_attention_gqa_forward(float *out, float *lse, float *scratch, const float *q, const float *k,
                                 const float *v, int B, int T, int NH, int NKV, int hs, int sq, int skv)
{
    const int C = NH * hs, G = NH / NKV, ntiles = (T + FA_BR - 1) / FA_BR, Tp = tpad(T);
    const float scale = 1.0f / sqrtf((float)hs);
    const long items = (long)B * NH * ntiles;
    float *KT = scratch, *thread0 = scratch + (size_t)B * NKV * hs * Tp;
#pragma omp parallel num_threads(fwd_threads(B, T, NH))
    {
#pragma omp for schedule(static)
        for (int bg = 0; bg < B * NKV; bg++)
            pack_transposed(KT + (size_t)bg * hs * Tp, k + (size_t)(bg / NKV) * T * skv + (size_t)(bg % NKV) * hs, T,
                            Tp, hs, skv);
        float *S = thread0 + (size_t)zt_thread_num() * fwd_thread_floats();
        float *mrow = S + (size_t)FA_BR * FA_BC, *lrow = mrow + FA_BR;
#pragma omp for schedule(static)
        for (long it = 0; it < items; it++) {
            int tile = (int)(it % ntiles), bh = (int)(it / ntiles), b = bh / NH, h = bh % NH;
            int i0 = tile * FA_BR, mr = imin(FA_BR, T - i0);
            forward_tile(out + (size_t)b * T * C + (size_t)h * hs, C, lse + (size_t)bh * T, S, mrow, lrow,
                         q + (size_t)b * T * sq + (size_t)h * hs, sq, KT + ((size_t)b * NKV + h / G) * hs * Tp, Tp,
                         v + (size_t)b * T * skv + (size_t)(h / G) * hs, skv, i0, mr, hs, scale);
        }
    }
}

void flash_attention_forward(float *out, float *lse, float *scratch, const float *qkv, int B, int T, int C, int NH)
{
    flash_attention_gqa_forward(out, lse, scratch, qkv, qkv + C, qkv + 2 * C, B, T, NH, NH, C / NH, 3 * C, 3 * C);
}

/* ---- backward --------------------------------------------------------------------------------- */

/* D[t] = dO_t . O_t over the T rows of one head (row stride C) */
static void rowdot(float *D, const float *dO, const float *O, int T, int C, int hs)
{
    for (int t = 0; t < T; t++) D[t] = zt_row_dot(dO + (size_t)t * C, O + (size_t)t * C, hs);
}

/* the pointers of one query head of a KV group */
typedef struct head_args {
    float *dq, *dk, *dv;        /* (T, hs) slices: dq row stride sq, dk and dv skv */
    const float *dO, *O, *lse;  /* dO, O row stride C; lse (T) */
    const float *q, *k, *KT, *VT; /* q stride sq, k stride skv; KT, VT packed (hs, Tp) */
    int T, C, hs, sq, skv, Tp;
    bool first; /* the group's first head: assigns dK and dV */
} head_args;

/* key block j0 (n keys), query rows r0 .. r0+nr: P and dS tiles, then the products */
static void backward_tile(const head_args *a, float *P, float *dS, const float *D, int j0, int n, int r0,
                          int nr, float scale)
{
    const int hs = a->hs;
    const float *qr = a->q + (size_t)r0 * a->sq, *dOr = a->dO + (size_t)r0 * a->C;
    /* P, dS for each 4-row group up to its last row's diagonal */
    for (int rr = 0; rr < nr;) {
        int R = nr - rr >= 4 ? 4 : 1, t0 = r0 + rr, cols = imin(n, t0 + R - j0);
        for (int c0 = 0; c0 < cols; c0 += NC) {
            float *p = P + (size_t)rr * FA_BK + c0, *ds = dS + (size_t)rr * FA_BK + c0;
            const float *q = qr + (size_t)rr * a->sq, *dO = dOr + (size_t)rr * a->C;
            const float *kt = a->KT + j0 + c0, *vt = a->VT + j0 + c0;
            if (R == 4)
                grad_micro(p, ds, FA_BK, q, a->sq, dO, a->C, kt, vt, a->Tp, hs, a->lse + t0, D + t0, t0, j0 + c0,
                           scale, 4);
            else
                grad_micro(p, ds, FA_BK, q, a->sq, dO, a->C, kt, vt, a->Tp, hs, a->lse + t0, D + t0, t0, j0 + c0,
                           scale, 1);
        }
        rr += R;
    }
    /* dVj (+)= Pᵀ dO and dKj (+)= dSᵀ Q, each 4-key group from the first row that sees it */
    bool add = !(a->first && r0 == j0);
    for (int c = 0; c < n;) {
        int R = n - c >= 4 ? 4 : 1, k0 = j0 + c > r0 ? j0 + c - r0 : 0;
        ay_rows(a->dv + (size_t)(j0 + c) * a->skv, a->skv, P + (size_t)k0 * FA_BK + c, 1, FA_BK,
                dOr + (size_t)k0 * a->C, a->C, nr - k0, hs, add, R);
        ay_rows(a->dk + (size_t)(j0 + c) * a->skv, a->skv, dS + (size_t)k0 * FA_BK + c, 1, FA_BK,
                qr + (size_t)k0 * a->sq, a->sq, nr - k0, hs, add, R);
        c += R;
    }
    /* dQ (+)= dS Kj, each 4-row group over the keys its last row sees; key block 0 reaches every
     * row: it assigns, the later blocks add */
    const float *kj = a->k + (size_t)j0 * a->skv;
    for (int rr = 0; rr < nr;) {
        int R = nr - rr >= 4 ? 4 : 1, kk = imin(n, r0 + rr + R - j0);
        ay_rows(a->dq + (size_t)(r0 + rr) * a->sq, a->sq, dS + (size_t)rr * FA_BK, FA_BK, 1, kj, a->skv, kk, hs,
                j0 > 0, R);
        rr += R;
    }
}

static void backward_head(const head_args *a, float *D, float *P, float *dS, float scale)
{
    rowdot(D, a->dO, a->O, a->T, a->C, a->hs);
    for (int j0 = 0; j0 < a->T; j0 += FA_BK) {
        int n = imin(FA_BK, a->T - j0);
        for (int r0 = j0; r0 < a->T; r0 += FA_BQ)
            backward_tile(a, P, dS, D, j0, n, r0, imin(FA_BQ, a->T - r0), scale);
    }
}

void flash_attention_gqa_backward(float *dq, float *dk, float *dv, float *scratch, const float *dout,
                                  const float *q, const float *k, const float *v, const float *out,
                                  const float *lse, int B, int T, int NH, int NKV, int hs, int sq, int skv)
{
    const int C = NH * hs, G = NH / NKV, Tp = tpad(T);
    const float scale = 1.0f / sqrtf((float)hs);
#pragma omp parallel num_threads(bwd_threads(B, NKV))
    {
        float *KT = scratch + (size_t)zt_thread_num() * bwd_thread_floats(T, hs);
        float *VT = KT + (size_t)hs * Tp, *D = VT + (size_t)hs * Tp, *P = D + Tp, *dS = P + (size_t)FA_BQ * FA_BK;
#pragma omp for schedule(static)
        for (int bg = 0; bg < B * NKV; bg++) {
            int b = bg / NKV, g = bg % NKV;
            size_t kvoff = (size_t)b * T * skv + (size_t)g * hs;
            pack_transposed(KT, k + kvoff, T, Tp, hs, skv);
            pack_transposed(VT, v + kvoff, T, Tp, hs, skv);
            for (int h = g * G; h < (g + 1) * G; h++) {
                size_t qoff = (size_t)b * T * sq + (size_t)h * hs, ooff = (size_t)b * T * C + (size_t)h * hs;
                head_args a = {.dq = dq + qoff, .dk = dk + kvoff, .dv = dv + kvoff, .dO = dout + ooff,
                               .O = out + ooff, .lse = lse + ((size_t)b * NH + h) * T, .q = q + qoff,
                               .k = k + kvoff, .KT = KT, .VT = VT, .T = T, .C = C, .hs = hs, .sq = sq,
                               .skv = skv, .Tp = Tp, .first = h == g * G};
                backward_head(&a, D, P, dS, scale);
            }
        }
    }
}

void flash_attention_backward(float *dqkv, float *scratch, const float *dout, const float *qkv, const float *out,
                              const float *lse, int B, int T, int C, int NH)
{
    flash_attention_gqa_backward(dqkv, dqkv + C, dqkv + 2 * C, scratch, dout, qkv, qkv + C, qkv + 2 * C, out, lse,
                                 B, T, NH, NH, C / NH, 3 * C, 3 * C);
}
