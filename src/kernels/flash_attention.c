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
 * vectors (AVX-512: 16 lanes, AVX2 + FMA: 8; they compile to scalar code without either), not by a BLAS: a call per
 * 64 x 64 tile would pack both operands every time. The score products (Q Kᵀ, dO Vᵀ) read Kᵀ and
 * Vᵀ packed once per (b, KV head) as (hs, Tpad) panels, so a micro-tile is 8 (or 4) rows x 32 keys
 * of broadcast-FMAs; the other products (P V, dS K, Pᵀ dO, dSᵀ Q) read their right operand's rows
 * as they lie (hs contiguous floats) and accumulate 4 rows x hs in registers. The causal triangle
 * is cut at micro-tile granularity (8 or 4 rows x 32 keys, 4 rows x each row's keys), not at
 * whole tiles: at T = 256 the score products run 56% of the T x T square and the others 51%, where
 * attention.c's 64-row blocks run 62.5%.
 * Packed documents (pos, zt_batch.positions; docs/models.md): query t sees keys t - pos[t] .. t.
 * Forward starts a query tile's key blocks at its first document start (rounded down to FA_BR, so
 * every block still starts at or before the tile), skips micro-tiles before a row group's first
 * start, and masks a straddling block per row (-inf scores before the row's start; a row with no
 * key in a block keeps m and l and gets P = 0). Backward visits, per key block, the query rows up
 * to the last one whose document starts before the block ends, drops the lanes before a row's
 * start from P (a select, never a product: another document's scores may overflow exp), and
 * zeroes dq first (key block 0 no longer reaches every row). Without pos every call is the one
 * before positions existed, bit for bit.
 * Precision (docs/precision.md). The kernels read fp32 q, k, v (and the fp32 O) in every mode and
 * keep the online softmax, lse, D and dS = P (dP - D) in fp32. With bf16 = false every product is
 * fp32 (the fp32 and fp16 modes, and precision.attention_dtype fp32). With bf16 = true (bf16
 * compute's default) the six products take bf16 operands and accumulate in fp32 with AVX512_BF16's
 * vdpbf16ps (vecbf16.h; emulated with the same bits where the build lacks it): Q, K, V, dO rounded
 * to nearest-even when packed as pairs, Kᵀ and Vᵀ as (hs/2, Tpad) panels of pairs along hs, V and K
 * (and a head's Q, dO) as (Tpad/2, hs) pairs across two rows, Q and dO as pairs along hs for the
 * score broadcasts; P and dS rounded as the micro-kernels write them (forward: P's pairs over the
 * scores they came from; backward: dS pairs along keys for dQ, P and dS pairs across row pairs for
 * dV and dK, straight from the score epilogue). The row sum l is that of the fp32 P. The pair loops
 * start at even rows and keys and round the end up to a pair; the extra row or key is a causally
 * masked 0 or zero padding. tests/test_flash_attention_bf16.c bounds the difference to the fp32
 * kernel element by element. The one float lse is held in costs P a relative error of ~u |lse| in
 * backward (attention.c subtracts the row max instead): ~1e-6 at scores of ~10.
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
 * with; they never use more threads; the larger of the two paths' needs): forward B*NKV*hs*Tpad
 * (Kᵀ; bf16: Kᵀ and V as pairs, the same) plus FA_BR x FA_BC scores per thread (bf16: and Q's tile
 * as pairs); backward per thread 2*hs*Tpad (Kᵀ, Vᵀ) + Tpad (D) + two FA_BQ x FA_BK tiles (bf16:
 * 3.5*hs*Tpad of pairs for Kᵀ, Vᵀ, K and the head's Q and dO twice, three half-size tiles). O(T).
 *
 * Cost (bf16 products; bench/RESULTS.md, "Flash attention bf16, restructured"). Rounding to pairs
 * is done once per row: the backward converts a head's Q and dO (both layouts) and computes D in
 * one pass over its rows, not per query chunk; the forward rounds P into pairs inside its exp pass.
 * dV then dK run as two passes (one right operand stays in L1). The q, k, v, dO, O and out rows lie
 * a row stride of 3C (or C) apart, a page or more: the hardware prefetchers do not follow them, so
 * the kernels fetch the next work item's rows into L2 a few rows at a time under the current score
 * loops (row_prefetch: the next tile's q and out; the next head's q, dO, O and dq; the next KV
 * group's k and v), and the packs their next 16 rows into L1. A diagonal micro-tile whose rows see
 * none of its second 16 keys computes one vector. None of this changes a bit (each output
 * element's sequence of roundings is the same). Measured (kernels_timing, 2 threads, cpu time,
 * medians of 6 rounds interleaved with the build before, Zen 4 shared): W1 bf16 6.89 -> 5.69 ms
 * forward + backward (1.21x), llama-124M's GQA 5.78 -> 5.19 ms (1.11x); fp32 within the noise.
 * What is left: the products (~60% of the backward's time, each at 85-95% of the 3.6 vdpbf16ps
 * per ns one core gives here, measured by leaving them out one at a time), the exp, the packs, and
 * the rows' first reads from memory (~1 ms of the ~10 ms one thread spends at W1). */
#include <string.h>

#include "kernels/kernels.h"
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
/* bf16 products: pairs (uint32_t) in the same float slots. hp = pairs per head row. Forward per
 * (b, KV head): Kᵀ (hp, Tp) and V (Tp/2, hs) pair panels; per thread the scores (P's pairs written
 * over them) and Q's tile as pairs (FA_BR, hp). Backward per thread: Kᵀ, Vᵀ (hp, Tp), K (Tp/2, hs),
 * D (Tp), the head's Q and dO as pairs along hs (Tp, hp) and along rows (Tp/2, hs), dS as
 * pairs along keys (FA_BQ, FA_BK/2), P and dS as pairs along rows (FA_BQ/2, FA_BK). */
static size_t bf_group_floats(int T, int hs) { return (size_t)hpairs(hs) * tpad(T) + (size_t)tpad(T) / 2 * hs; }
static size_t fwd_thread_floats_bf(int hs) { return fwd_thread_floats() + (size_t)round_up(FA_BR * hpairs(hs), 16); }
static size_t bwd_thread_floats_bf(int T, int hs)
{
    return bf_group_floats(T, hs) + (size_t)hpairs(hs) * tpad(T) + tpad(T) + 2 * bf_group_floats(T, hs) +
           (size_t)FA_BQ * FA_BK / 2 + (size_t)FA_BQ * FA_BK;
}

size_t flash_attention_scratch_floats(int B, int T, int NH, int NKV, int hs)
{
    size_t f = (size_t)B * NKV * hs * (size_t)tpad(T) + (size_t)fwd_threads(B, T, NH) * fwd_thread_floats();
    size_t b = (size_t)bwd_threads(B, NKV) * bwd_thread_floats(T, hs);
    size_t fb = (size_t)B * NKV * bf_group_floats(T, hs) + (size_t)fwd_threads(B, T, NH) * fwd_thread_floats_bf(hs);
    size_t bb = (size_t)bwd_threads(B, NKV) * bwd_thread_floats_bf(T, hs);
    size_t m = f > b ? f : b, mb = fb > bb ? fb : bb;
    return m > mb ? m : mb;
}

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

/* Packed documents (pos, kernels.h). The first key row t sees: t - pos[t] (clamped to 0 .. t: the
 * kernels stay in bounds whatever pos holds), or 0 without pos. */
static inline int row_start(const int32_t *pb, int t)
{
    int s = pb ? t - pb[t] : 0;
    return s < 0 ? 0 : s > t ? t : s;
}

/* the first key (from block start j0, rounded down to a micro-tile) any of rows t .. t+R sees:
 * the columns before it are masked for all of them */
static inline int group_first(const int32_t *pb, int t, int R, int j0)
{
    if (!pb)
        return 0;
    int lo = row_start(pb, t);
    for (int r = 1; r < R; r++)
        lo = imin(lo, row_start(pb, t + r));
    return lo > j0 ? (lo - j0) / NC * NC : 0;
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
 * of its KV head (hs, ldt), vh its V (row stride skv). Qb non-NULL: bf16 products, KT the (hp, ldt)
 * pair panel, vh the (Tp/2, hs) pairs of V across its rows, Qb (FA_BR, hp) for Q's pairs, and P
 * rounded to pairs over the scores it was computed in. pb: the positions of row b (packed
 * documents), or NULL. With pb the key blocks start at the tile's first document start rounded
 * down to FA_BR (so every block still starts at or before i0), the tiles before it not visited;
 * in a block, a row's keys before its document's start are -inf scores (P = 0), a row that sees
 * none of the block's keys keeps its max and sum and gets a zero P row, and each row group's
 * products start at its first row's first key (rounded down to a micro-tile). */
static void forward_tile(float *o, int so, float *lse, float *S, float *mrow, float *lrow, const float *qh,
                         int sq, const void *KT, int ldt, const void *vh, int skv, int i0, int mr, int hs,
                         float scale, uint32_t *Qb, row_prefetch *pf, const int32_t *pb)
{
    const int end = i0 + mr, hp = hpairs(hs);
    const bool bf = Qb != NULL;
    const float *qi = qh + (size_t)i0 * sq;
    float *oi = o + (size_t)i0 * so;
    for (int r = 0; r < mr; r++)
        mrow[r] = -INFINITY, lrow[r] = 0.0f;
    if (bf)
        for (int r = 0; r < mr; r++) {
            if (r + PF_ROWS < mr)
                prefetch_row(qi + (size_t)(r + PF_ROWS) * sq, hs);
            pairs_along_row(Qb + (size_t)r * hp, qi + (size_t)r * sq, hs);
        }
#define SCORES(R)                                                                                                   \
    (bf ? (cols - c0 <= ZT_VL ? score_micro_bf(S + (size_t)r * FA_BC + c0, FA_BC, Qb + (size_t)r * hp, hp,            \
                                               (const uint32_t *)KT + j0 + c0, ldt, hp, scale, R, 1)                 \
                              : score_micro_bf(S + (size_t)r * FA_BC + c0, FA_BC, Qb + (size_t)r * hp, hp,            \
                                               (const uint32_t *)KT + j0 + c0, ldt, hp, scale, R, 2))                \
        : score_micro(S + (size_t)r * FA_BC + c0, FA_BC, qi + (size_t)r * sq, sq, (const float *)KT + j0 + c0, ldt, \
                      hs, scale, R))
    int jlo = 0; /* the first key block: 0, or where the tile's first document starts */
    if (pb) {
        int lo = i0;
        for (int r = 0; r < mr; r++)
            lo = imin(lo, row_start(pb, i0 + r));
        jlo = lo / FA_BR * FA_BR;
    }
    for (int j0 = jlo; j0 < end; j0 += FA_BC) {
        int n = imin(FA_BC, end - j0);
        /* S = scale Qi Kjᵀ, each FA_SROWS-row group only up to its last row's diagonal (and from
         * its first row's document start) */
        int r = 0;
        for (; r + FA_SROWS <= mr; r += FA_SROWS) {
            pf_advance(pf);
            int cols = imin(n, i0 + r + FA_SROWS - j0);
            for (int c0 = group_first(pb, i0 + r, FA_SROWS, j0); c0 < cols; c0 += NC)
                SCORES(FA_SROWS);
        }
        for (; r < mr; r++) {
            int cols = imin(n, i0 + r + 1 - j0);
            for (int c0 = group_first(pb, i0 + r, 1, j0); c0 < cols; c0 += NC)
                SCORES(1);
        }
        for (r = 0; r < mr; r++) {
            int valid = imin(n, i0 + r + 1 - j0); /* >= 1: j0 <= i0 (FA_BC is a multiple of FA_BR) */
            int lo = imax(0, row_start(pb, i0 + r) - j0); /* the row's first key in the block */
            float *row = S + (size_t)r * FA_BC;
            if (lo >= valid) { /* a packed row that sees no key of this block: P = 0, m and l stay */
                memset(row, 0, (size_t)(bf ? (n + 1) / 2 : n) * sizeof *row);
                continue;
            }
            for (int i = 0; i < lo; i++)
                row[i] = -INFINITY;
            float alpha = bf ? online_softmax_row_bf(row, valid, n, mrow + r, lrow + r)
                             : online_softmax_row(row, valid, n, mrow + r, lrow + r);
            if (j0 > jlo && alpha != 1.0f)
                scale_row(oi + (size_t)r * so, hs, alpha);
        }
        /* O (+)= P Vj, each 4-row group only over the keys its last row sees, from its first
         * row's first (the first block assigns) */
        for (r = 0; r < mr;) {
            int R = mr - r >= 4 ? 4 : 1, kk = imin(n, i0 + r + R - j0), k0 = group_first(pb, i0 + r, R, j0);
            if (bf)
                ay_rows(oi + (size_t)r * so, so, (const uint32_t *)S + (size_t)r * FA_BC + k0 / 2, FA_BC, 1,
                        (const uint32_t *)vh + (size_t)(j0 + k0) / 2 * hs, hs, (kk - k0 + 1) / 2, hs, j0 > jlo, R,
                        true);
            else
                ay_rows(oi + (size_t)r * so, so, S + (size_t)r * FA_BC + k0, FA_BC, 1,
                        (const float *)vh + (size_t)(j0 + k0) * skv, skv, kk - k0, hs, j0 > jlo, R, false);
            r += R;
        }
    }
#undef SCORES
    for (int r = 0; r < mr; r++) {
        scale_row(oi + (size_t)r * so, hs, 1.0f / lrow[r]);
        lse[i0 + r] = mrow[r] + logf(lrow[r]);
    }
}

void flash_attention_gqa_forward(float *out, float *lse, float *scratch, const float *q, const float *k,
                                 const float *v, int B, int T, int NH, int NKV, int hs, int sq, int skv, bool bf16,
                                 const int32_t *pos)
{
    const int C = NH * hs, G = NH / NKV, ntiles = (T + FA_BR - 1) / FA_BR, Tp = tpad(T), hp = hpairs(hs);
    const float scale = 1.0f / sqrtf((float)hs);
    const long items = (long)B * NH * ntiles;
    /* per (b, KV head) panels, then the threads' */
    const size_t group = bf16 ? bf_group_floats(T, hs) : (size_t)hs * Tp;
    const size_t per_thread = bf16 ? fwd_thread_floats_bf(hs) : fwd_thread_floats();
    float *thread0 = scratch + (size_t)B * NKV * group;
#pragma omp parallel num_threads(fwd_threads(B, T, NH))
    {
#pragma omp for schedule(static)
        for (int bg = 0; bg < B * NKV; bg++) {
            const float *kg = k + (size_t)(bg / NKV) * T * skv + (size_t)(bg % NKV) * hs;
            float *panel = scratch + (size_t)bg * group;
            if (bf16) {
                /* the next group's k and v rows, 16 of each per block of this one's Kᵀ */
                row_prefetch pf = {.n = hs, .rows = T, .step = 16}, *pfp = NULL;
                if (bg + 1 < B * NKV) {
                    const float *k1 = k + (size_t)((bg + 1) / NKV) * T * skv + (size_t)((bg + 1) % NKV) * hs;
                    pf_add(&pf, k1, skv, false);
                    pf_add(&pf, v + (k1 - k), skv, false);
                    pfp = &pf;
                }
                pack_transposed_bf16((uint32_t *)panel, kg, T, Tp, hs, skv, pfp);
                pairs_across_rows((uint32_t *)panel + (size_t)hp * Tp, hs, v + (kg - k), skv, T, Tp, hs);
            } else {
                pack_transposed(panel, kg, T, Tp, hs, skv);
            }
        }
        float *S = thread0 + (size_t)zt_thread_num() * per_thread;
        float *mrow = S + (size_t)FA_BR * FA_BC, *lrow = mrow + FA_BR;
        uint32_t *Qb = bf16 ? (uint32_t *)(lrow + FA_BR) : NULL;
#pragma omp for schedule(static)
        for (long it = 0; it < items; it++) {
            int tile = (int)(it % ntiles), bh = (int)(it / ntiles), b = bh / NH, h = bh % NH;
            int i0 = tile * FA_BR, mr = imin(FA_BR, T - i0);
            const float *panel = scratch + ((size_t)b * NKV + h / G) * group;
            const void *vh = bf16 ? (const void *)((const uint32_t *)panel + (size_t)hp * Tp)
                                  : (const void *)(v + (size_t)b * T * skv + (size_t)(h / G) * hs);
            /* the next item's q and out rows (o (T, C) and q (T, sq) rows of head h at tile i0) */
            row_prefetch pf = {.n = hs, .step = 8}, *pfp = NULL;
            if (it + 1 < items) {
                int t1 = (int)((it + 1) % ntiles), bh1 = (int)((it + 1) / ntiles), b1 = bh1 / NH, h1 = bh1 % NH;
                pf.rows = imin(FA_BR, T - t1 * FA_BR);
                pf_add(&pf, q + ((size_t)b1 * T + (size_t)t1 * FA_BR) * sq + (size_t)h1 * hs, sq, false);
                pf_add(&pf, out + ((size_t)b1 * T + (size_t)t1 * FA_BR) * C + (size_t)h1 * hs, C, true);
                pfp = &pf;
            }
            forward_tile(out + (size_t)b * T * C + (size_t)h * hs, C, lse + (size_t)bh * T, S, mrow, lrow,
                         q + (size_t)b * T * sq + (size_t)h * hs, sq, panel, Tp, vh, skv, i0, mr, hs, scale, Qb, pfp,
                         pos ? pos + (size_t)b * T : NULL);
        }
    }
}

void flash_attention_forward(float *out, float *lse, float *scratch, const float *qkv, int B, int T, int C, int NH,
                             bool bf16, const int32_t *pos)
{
    flash_attention_gqa_forward(out, lse, scratch, qkv, qkv + C, qkv + 2 * C, B, T, NH, NH, C / NH, 3 * C, 3 * C,
                                bf16, pos);
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
    const int32_t *pos;           /* the positions of row b (packed documents), or NULL */
    int T, C, hs, sq, skv, Tp;
    bool first; /* the group's first head: assigns dK and dV */
} head_args;

/* key block j0 (n keys), query rows r0 .. r0+nr: P and dS tiles, then the products */
static void backward_tile(const head_args *a, float *P, float *dS, const float *D, int j0, int n, int r0,
                          int nr, float scale, row_prefetch *pf)
{
    const int hs = a->hs;
    const float *qr = a->q + (size_t)r0 * a->sq, *dOr = a->dO + (size_t)r0 * a->C;
    /* P, dS for each 4-row group up to its last row's diagonal */
    for (int rr = 0; rr < nr;) {
        int R = nr - rr >= FA_GROWS ? FA_GROWS : 1, t0 = r0 + rr, cols = imin(n, t0 + R - j0);
        pf_advance(pf);
        for (int c0 = 0; c0 < cols; c0 += NC) {
            float *p = P + (size_t)rr * FA_BK + c0, *ds = dS + (size_t)rr * FA_BK + c0;
            const float *q = qr + (size_t)rr * a->sq, *dO = dOr + (size_t)rr * a->C;
            const float *kt = a->KT + j0 + c0, *vt = a->VT + j0 + c0;
            const int32_t *pr = a->pos ? a->pos + t0 : NULL;
            if (R == FA_GROWS)
                grad_micro(p, ds, FA_BK, q, a->sq, dO, a->C, kt, vt, a->Tp, hs, a->lse + t0, D + t0, pr, t0, j0 + c0,
                           scale, FA_GROWS);
            else
                grad_micro(p, ds, FA_BK, q, a->sq, dO, a->C, kt, vt, a->Tp, hs, a->lse + t0, D + t0, pr, t0, j0 + c0,
                           scale, 1);
        }
        rr += R;
    }
    /* dVj (+)= Pᵀ dO and dKj (+)= dSᵀ Q, each 4-key group from the first row that sees it */
    bool add = !(a->first && r0 == j0);
    for (int c = 0; c < n;) {
        int R = n - c >= 4 ? 4 : 1, k0 = j0 + c > r0 ? j0 + c - r0 : 0;
        ay_rows(a->dv + (size_t)(j0 + c) * a->skv, a->skv, P + (size_t)k0 * FA_BK + c, 1, FA_BK,
                dOr + (size_t)k0 * a->C, a->C, nr - k0, hs, add, R, false);
        ay_rows(a->dk + (size_t)(j0 + c) * a->skv, a->skv, dS + (size_t)k0 * FA_BK + c, 1, FA_BK,
                qr + (size_t)k0 * a->sq, a->sq, nr - k0, hs, add, R, false);
        c += R;
    }
    /* dQ (+)= dS Kj, each 4-row group over the keys its last row sees; key block 0 reaches every
     * row: it assigns, the later blocks add (with positions it may not: dq was zeroed, all add) */
    const float *kj = a->k + (size_t)j0 * a->skv;
    for (int rr = 0; rr < nr;) {
        int R = nr - rr >= 4 ? 4 : 1, kk = imin(n, r0 + rr + R - j0);
        ay_rows(a->dq + (size_t)(r0 + rr) * a->sq, a->sq, dS + (size_t)rr * FA_BK, FA_BK, 1, kj, a->skv, kk, hs,
                j0 > 0 || a->pos, R, false);
        rr += R;
    }
}

/* the bf16 path's per-thread buffers (all pairs): the KV group's Kᵀ, Vᵀ (hp, Tp) and K (Tp/2, hs),
 * the head's Q, dO along hs (Tp, hp) and across rows (Tp/2, hs), dS along keys (FA_BQ,
 * FA_BK/2), P and dS across rows (FA_BQ/2, FA_BK) */
typedef struct bf_bufs {
    uint32_t *KT, *VT, *K, *Qb, *dOb, *Q2, *dO2, *dSk, *PT, *dST;
} bf_bufs;

/* backward_tile with bf16 products: the head's Q and dO pairs (head_pairs_bf), the scores in groups of
 * 4, 2 or 1 rows from even rows (so that every row pair is written by one micro-kernel), the pair
 * loops starting at an even row and rounding the keys up to a pair (the extra row or key holds a
 * masked 0, or lies in the zero padding) */
static void backward_tile_bf(const head_args *a, const bf_bufs *w, const float *D, int j0, int n, int r0, int nr,
                             float scale, row_prefetch *pf)
{
    const int hs = a->hs, hp = hpairs(hs), Tp = a->Tp;
    /* the head's pairs from the chunk's first row (r0 is even) */
    const uint32_t *Qb = w->Qb + (size_t)r0 * hp, *dOb = w->dOb + (size_t)r0 * hp;
    const uint32_t *Q2 = w->Q2 + (size_t)(r0 / 2) * hs, *dO2 = w->dO2 + (size_t)(r0 / 2) * hs;
    for (int rr = 0; rr < nr;) {
        int R = nr - rr >= FA_GROWS ? FA_GROWS : nr - rr >= 2 ? 2 : 1, t0 = r0 + rr, cols = imin(n, t0 + R - j0);
        pf_advance(pf);
        for (int c0 = 0; c0 < cols; c0 += NC) {
            uint32_t *dsk = w->dSk + (size_t)rr * (FA_BK / 2) + c0 / 2;
            uint32_t *pt = w->PT + (size_t)(rr / 2) * FA_BK + c0, *dst = w->dST + (size_t)(rr / 2) * FA_BK + c0;
            const uint32_t *q = Qb + (size_t)rr * hp, *g = dOb + (size_t)rr * hp;
            const uint32_t *kt = w->KT + j0 + c0, *vt = w->VT + j0 + c0;
            const float *l = a->lse + t0, *d = D + t0;
            const int32_t *pr = a->pos ? a->pos + t0 : NULL;
#define GRAD(R, NV)                                                                                                 \
    grad_micro_bf(dsk, FA_BK / 2, pt, dst, FA_BK, q, g, hp, kt, vt, Tp, hp, l, d, pr, t0, j0 + c0, scale, R, NV)
            bool half = cols - c0 <= ZT_VL; /* the group's last row sees none of the second vector's keys */
            if (R == 4)
                half ? GRAD(4, 1) : GRAD(4, 2);
            else if (R == 2)
                half ? GRAD(2, 1) : GRAD(2, 2);
            else
                half ? GRAD(1, 1) : GRAD(1, 2);
#undef GRAD
        }
        rr += R;
    }
    /* dVj (+)= Pᵀ dO, then dKj (+)= dSᵀ Q (one right operand at a time stays in L1), over row
     * pairs from the pair of the first row that sees the key group */
    bool add = !(a->first && r0 == j0);
    for (int pass = 0; pass < 2; pass++) {
        float *dst = pass == 0 ? a->dv : a->dk;
        const uint32_t *A = pass == 0 ? w->PT : w->dST, *Y = pass == 0 ? dO2 : Q2;
        for (int c = 0; c < n;) {
            int R = n - c >= 4 ? 4 : 1, k0 = (j0 + c > r0 ? j0 + c - r0 : 0) & ~1, kp = (nr - k0 + 1) / 2;
            ay_rows(dst + (size_t)(j0 + c) * a->skv, a->skv, A + (size_t)(k0 / 2) * FA_BK + c, 1, FA_BK,
                    Y + (size_t)(k0 / 2) * hs, hs, kp, hs, add, R, true);
            c += R;
        }
    }
    /* dQ (+)= dS Kj over key pairs */
    for (int rr = 0; rr < nr;) {
        int R = nr - rr >= 4 ? 4 : 1, kk = imin(n, r0 + rr + R - j0);
        ay_rows(a->dq + (size_t)(r0 + rr) * a->sq, a->sq, w->dSk + (size_t)rr * (FA_BK / 2), FA_BK / 2, 1,
                w->K + (size_t)(j0 / 2) * hs, hs, (kk + 1) / 2, hs, j0 > 0 || a->pos, R, true);
        rr += R;
    }
}

/* the bf16 path's per-head pass: D, and Q and dO of all T rows as pairs along hs (Qb, dOb) and
 * across row pairs (Q2, dO2; an odd T's last row pairs with 0), each row read once */
static void head_pairs_bf(const head_args *a, const bf_bufs *w, float *D)
{
    const int T = a->T, hs = a->hs, hp = hpairs(hs);
    for (int t = 0; t < T; t += 2) {
        int rows = imin(2, T - t);
        const float *q = a->q + (size_t)t * a->sq, *g = a->dO + (size_t)t * a->C;
        if (t + PF_ROWS + 1 < T) {
            prefetch_row(q + (size_t)PF_ROWS * a->sq, hs), prefetch_row(q + (size_t)(PF_ROWS + 1) * a->sq, hs);
            prefetch_row(g + (size_t)PF_ROWS * a->C, hs), prefetch_row(g + (size_t)(PF_ROWS + 1) * a->C, hs);
            const float *o = a->O + (size_t)(t + PF_ROWS) * a->C;
            prefetch_row(o, hs), prefetch_row(o + a->C, hs);
        }
        for (int r = 0; r < rows; r++) {
            D[t + r] = zt_row_dot(g + (size_t)r * a->C, a->O + (size_t)(t + r) * a->C, hs);
            pairs_along_row(w->Qb + (size_t)(t + r) * hp, q + (size_t)r * a->sq, hs);
            pairs_along_row(w->dOb + (size_t)(t + r) * hp, g + (size_t)r * a->C, hs);
        }
        pairs_across_rows(w->Q2 + (size_t)(t / 2) * hs, hs, q, a->sq, rows, 2, hs);
        pairs_across_rows(w->dO2 + (size_t)(t / 2) * hs, hs, g, a->C, rows, 2, hs);
    }
}

/* The rows after the last one that reads a key before kend: T, or with positions 1 + the last row
 * whose document starts before kend (>= kend: row kend - 1 reads itself); the rows after it, in
 * other documents, are not visited by the key block ending at kend. */
static int readers_end(const head_args *a, int kend)
{
    int t = a->T - 1;
    if (a->pos)
        while (t >= kend && t - a->pos[t] >= kend)
            t--;
    return t + 1;
}

/* pf (may be NULL): the next head's rows, fetched a few at a time under the score products */
static void backward_head(const head_args *a, const bf_bufs *w, float *D, float *P, float *dS, float scale,
                          row_prefetch *pf)
{
    if (w)
        head_pairs_bf(a, w, D);
    else
        rowdot(D, a->dO, a->O, a->T, a->C, a->hs);
    if (pf) { /* spread over the score loops' row groups (about nr / 4 per tile) */
        long groups = 0;
        for (int j0 = 0; j0 < a->T; j0 += FA_BK)
            for (int r0 = j0; r0 < a->T; r0 += FA_BQ)
                groups += imin(FA_BQ, a->T - r0) / 4;
        pf->step = (int)((pf->rows + groups) / (groups + 1)) + 1;
    }
    if (a->pos) /* packed: key block 0 need not reach every row, so every block adds into dq */
        for (int t = 0; t < a->T; t++)
            memset(a->dq + (size_t)t * a->sq, 0, (size_t)a->hs * sizeof *a->dq);
    for (int j0 = 0; j0 < a->T; j0 += FA_BK) {
        int n = imin(FA_BK, a->T - j0), rend = readers_end(a, j0 + n);
        for (int r0 = j0; r0 < rend; r0 += FA_BQ) {
            if (w)
                backward_tile_bf(a, w, D, j0, n, r0, imin(FA_BQ, rend - r0), scale, pf);
            else
                backward_tile(a, P, dS, D, j0, n, r0, imin(FA_BQ, rend - r0), scale, pf);
        }
    }
}

void flash_attention_gqa_backward(float *dq, float *dk, float *dv, float *scratch, const float *dout,
                                  const float *q, const float *k, const float *v, const float *out,
                                  const float *lse, int B, int T, int NH, int NKV, int hs, int sq, int skv, bool bf16,
                                  const int32_t *pos)
{
    const int C = NH * hs, G = NH / NKV, Tp = tpad(T), hp = hpairs(hs);
    const float scale = 1.0f / sqrtf((float)hs);
#pragma omp parallel num_threads(bwd_threads(B, NKV))
    {
        float *KT, *VT, *D, *P = NULL, *dS = NULL;
        bf_bufs w;
        if (bf16) {
            w.KT = (uint32_t *)(scratch + (size_t)zt_thread_num() * bwd_thread_floats_bf(T, hs));
            w.VT = w.KT + (size_t)hp * Tp;
            w.K = w.VT + (size_t)hp * Tp;
            D = (float *)(w.K + (size_t)Tp / 2 * hs);
            w.Qb = (uint32_t *)(D + Tp);
            w.dOb = w.Qb + (size_t)Tp * hp;
            w.Q2 = w.dOb + (size_t)Tp * hp;
            w.dO2 = w.Q2 + (size_t)Tp / 2 * hs;
            w.dSk = w.dO2 + (size_t)Tp / 2 * hs;
            w.PT = w.dSk + (size_t)FA_BQ * FA_BK / 2;
            w.dST = w.PT + (size_t)FA_BQ / 2 * FA_BK;
            KT = VT = NULL;
        } else {
            KT = scratch + (size_t)zt_thread_num() * bwd_thread_floats(T, hs);
            VT = KT + (size_t)hs * Tp, D = VT + (size_t)hs * Tp, P = D + Tp, dS = P + (size_t)FA_BQ * FA_BK;
        }
#pragma omp for schedule(static)
        for (int bg = 0; bg < B * NKV; bg++) {
            int b = bg / NKV, g = bg % NKV;
            size_t kvoff = (size_t)b * T * skv + (size_t)g * hs;
            if (bf16) {
                pack_transposed_bf16(w.KT, k + kvoff, T, Tp, hs, skv, NULL);
                pack_transposed_bf16(w.VT, v + kvoff, T, Tp, hs, skv, NULL);
                pairs_across_rows(w.K, hs, k + kvoff, skv, T, Tp, hs);
            } else {
                pack_transposed(KT, k + kvoff, T, Tp, hs, skv);
                pack_transposed(VT, v + kvoff, T, Tp, hs, skv);
            }
            for (int h = g * G; h < (g + 1) * G; h++) {
                size_t qoff = (size_t)b * T * sq + (size_t)h * hs, ooff = (size_t)b * T * C + (size_t)h * hs;
                head_args a = {.dq = dq + qoff, .dk = dk + kvoff, .dv = dv + kvoff, .dO = dout + ooff,
                               .O = out + ooff, .lse = lse + ((size_t)b * NH + h) * T, .q = q + qoff,
                               .k = k + kvoff, .KT = KT, .VT = VT, .pos = pos ? pos + (size_t)b * T : NULL, .T = T, .C = C, .hs = hs, .sq = sq,
                               .skv = skv, .Tp = Tp, .first = h == g * G};
                /* the next head's q, dO, O rows and dq (to be written); where it opens the next KV group, its k, v */
                row_prefetch pf = {.n = hs, .rows = T}, *pfp = NULL;
                int h1 = h + 1 < (g + 1) * G ? h + 1 : h + 1 < NH ? h + 1 : 0, b1 = h + 1 < NH ? b : b + 1;
                if (b1 < B) {
                    size_t q1 = (size_t)b1 * T * sq + (size_t)h1 * hs, o1 = (size_t)b1 * T * C + (size_t)h1 * hs;
                    pf_add(&pf, q + q1, sq, false);
                    pf_add(&pf, dout + o1, C, false);
                    pf_add(&pf, out + o1, C, false);
                    pf_add(&pf, dq + q1, sq, true);
                    if (h1 % G == 0) {
                        size_t kv1 = (size_t)b1 * T * skv + (size_t)(h1 / G) * hs;
                        pf_add(&pf, k + kv1, skv, false);
                        pf_add(&pf, v + kv1, skv, false);
                    }
                    pfp = &pf;
                }
                backward_head(&a, bf16 ? &w : NULL, D, P, dS, scale, pfp);
            }
        }
    }
}

void flash_attention_backward(float *dqkv, float *scratch, const float *dout, const float *qkv, const float *out,
                              const float *lse, int B, int T, int C, int NH, bool bf16, const int32_t *pos)
{
    flash_attention_gqa_backward(dqkv, dqkv + C, dqkv + 2 * C, scratch, dout, qkv, qkv + C, qkv + 2 * C, out, lse,
                                 B, T, NH, NH, C / NH, 3 * C, 3 * C, bf16, pos);
}
