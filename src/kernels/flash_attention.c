/* flash_attention.c - causal self-attention whose memory grows as O(T): fused and tiled with an
 * online softmax (FlashAttention-2), forward and backward side by side, over the whole sequence or
 * a block of query rows against a block of keys (context parallelism) with the blocks' merge, for
 * grouped-query attention (NKV key/value heads, each read by G = NH/NKV query heads in place:
 * nothing is repeated in memory; NKV = NH is GPT-2's multi-head attention on its fused qkv).
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
 * Blocks (context parallelism, kernels.h): every function here runs query rows q0 .. q0+Tq against
 * keys k0 .. k0+Tk (whole-sequence indices: the masks and pos use them, the buffers are local);
 * the whole-sequence kernels are q0 = k0 = 0, Tq = Tk = T. The forward's key blocks start at k0 +
 * multiples of FA_BR (with pos: from the tile's first document start rounded down so), its query
 * tiles at q0 + multiples of FA_BR; a block may start after some rows (all masked for them), and a
 * row that sees no key gets out 0, lse -inf. The backward's key blocks start at k0 + multiples of
 * FA_BK, each visiting query chunks of FA_BQ rows from its diagonal (or q0, one row earlier where
 * that is odd: bf16 pairs rows) up to its last reader; it takes the merged out and lse (D and P
 * are the whole row's), adds into dq and assigns the block's dk, dv (0 where no row reads a key).
 * Each element's sequence of roundings depends only on where the tiles start: with q0, k0
 * multiples of FLASH_BLOCK_ALIGN (128 = FA_BK = FA_BQ, a multiple of FA_BR) and keys from 0, a
 * row's out, lse and dq are the whole sequence's bits (tests/test_flash_block.c). The merge of
 * blocks' results (flash_attention_merge) is the online softmax step across blocks.
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
 * In blocks the panels are the keys' (Tk) and D and the head's pairs the rows' (Tq): O(Tq + Tk).
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

#include "kernels/flash_micro.h" /* tile sizes, micro-kernels, the operand layouts (flash_pack.h) */


/* ---- sizes and threads ------------------------------------------------------------------------ */

static int fwd_threads(int B, int Tq, int NH)
{
    long items = (long)B * NH * ((Tq + FA_BR - 1) / FA_BR), nt = zt_max_threads();
    return (int)(nt < items ? nt : items);
}

static int bwd_threads(int B, int NKV)
{
    int nt = zt_max_threads();
    return nt < B * NKV ? nt : B * NKV;
}

/* keys (or query rows) padded to whole micro-tiles (and to 16 floats: every panel stays 64-byte
 * aligned) */
static int tpad(int T) { return round_up(T, 32); }
/* per-thread scratch, multiples of 16 floats (Tq query rows, Tk keys) */
static size_t fwd_thread_floats(void) { return (size_t)FA_BR * FA_BC + 2 * FA_BR; }
static size_t bwd_thread_floats(int Tq, int Tk, int hs)
{
    return 2 * (size_t)hs * (size_t)tpad(Tk) + (size_t)tpad(Tq) + 2 * (size_t)FA_BQ * FA_BK;
}
/* bf16 products: pairs (uint32_t) in the same float slots. hp = pairs per head row. Forward per
 * (b, KV head): Kᵀ (hp, Tp) and V (Tp/2, hs) pair panels; per thread the scores (P's pairs written
 * over them) and Q's tile as pairs (FA_BR, hp). Backward per thread: Kᵀ, Vᵀ (hp, Tp), K (Tp/2, hs)
 * of the keys, D (Tpq), the head's Q and dO as pairs along hs (Tpq, hp) and along rows (Tpq/2, hs),
 * dS as pairs along keys (FA_BQ, FA_BK/2), P and dS as pairs along rows (FA_BQ/2, FA_BK). */
static size_t bf_group_floats(int T, int hs) { return (size_t)hpairs(hs) * tpad(T) + (size_t)tpad(T) / 2 * hs; }
static size_t fwd_thread_floats_bf(int hs) { return fwd_thread_floats() + (size_t)round_up(FA_BR * hpairs(hs), 16); }
static size_t bwd_thread_floats_bf(int Tq, int Tk, int hs)
{
    return bf_group_floats(Tk, hs) + (size_t)hpairs(hs) * tpad(Tk) + tpad(Tq) + 2 * bf_group_floats(Tq, hs) +
           (size_t)FA_BQ * FA_BK / 2 + (size_t)FA_BQ * FA_BK;
}

size_t flash_attention_block_scratch_floats(int B, int Tq, int Tk, int NH, int NKV, int hs)
{
    size_t f = (size_t)B * NKV * hs * (size_t)tpad(Tk) + (size_t)fwd_threads(B, Tq, NH) * fwd_thread_floats();
    size_t b = (size_t)bwd_threads(B, NKV) * bwd_thread_floats(Tq, Tk, hs);
    size_t fb = (size_t)B * NKV * bf_group_floats(Tk, hs) + (size_t)fwd_threads(B, Tq, NH) * fwd_thread_floats_bf(hs);
    size_t bb = (size_t)bwd_threads(B, NKV) * bwd_thread_floats_bf(Tq, Tk, hs);
    size_t m = f > b ? f : b, mb = fb > bb ? fb : bb;
    return m > mb ? m : mb;
}

size_t flash_attention_scratch_floats(int B, int T, int NH, int NKV, int hs)
{
    return flash_attention_block_scratch_floats(B, T, T, NH, NKV, hs);
}

/* ---- forward ---------------------------------------------------------------------------------- */

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

/* rows i0 .. i0+mr (whole-sequence indices) of one (b, h) against its keys k0 .. kend: o (row
 * stride so), lse and qh (row stride sq) start at row q0, KT the packed Kᵀ of its KV head (hs, ldt)
 * and vh its V (row stride skv) at key k0. Qb non-NULL: bf16 products, KT the (hp, ldt)
 * pair panel, vh the (Tp/2, hs) pairs of V across its rows, Qb (FA_BR, hp) for Q's pairs, and P
 * rounded to pairs over the scores it was computed in. pb: the positions of row b (packed
 * documents, whole-sequence indices), or NULL. The key blocks start at k0 + a multiple of FA_BR
 * (the whole sequence's blocks where k0 is a multiple of FA_BR): at k0, or with pb at the tile's
 * first document start rounded down so, the tiles before it not visited (a block may start after
 * a row: its keys are all masked for it);
 * in a block, a row's keys before its document's start are -inf scores (P = 0), a row that sees
 * none of the block's keys keeps its max and sum and gets a zero P row, and each row group's
 * products start at its first row's first key (rounded down to a micro-tile). A row that sees no
 * key at all gets o = 0 and lse = -INFINITY. */
static void forward_tile(float *o, int so, float *lse, float *S, float *mrow, float *lrow, const float *qh,
                         int sq, const void *KT, int ldt, const void *vh, int skv, int q0, int k0, int kend, int i0,
                         int mr, int hs, float scale, uint32_t *Qb, row_prefetch *pf, const int32_t *pb)
{
    const int end = imin(i0 + mr, kend), hp = hpairs(hs);
    const bool bf = Qb != NULL;
    const float *qi = qh + (size_t)(i0 - q0) * sq;
    float *oi = o + (size_t)(i0 - q0) * so;
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
                                               (const uint32_t *)KT + (j0 - k0) + c0, ldt, hp, scale, R, 1)           \
                              : score_micro_bf(S + (size_t)r * FA_BC + c0, FA_BC, Qb + (size_t)r * hp, hp,            \
                                               (const uint32_t *)KT + (j0 - k0) + c0, ldt, hp, scale, R, 2))          \
        : score_micro(S + (size_t)r * FA_BC + c0, FA_BC, qi + (size_t)r * sq, sq,                                   \
                      (const float *)KT + (j0 - k0) + c0, ldt, hs, scale, R))
    int jlo = k0; /* the first key block: k0, or where the tile's first document starts */
    if (pb) {
        int lo = i0;
        for (int r = 0; r < mr; r++)
            lo = imin(lo, row_start(pb, i0 + r));
        jlo = lo > k0 ? k0 + (lo - k0) / FA_BR * FA_BR : k0;
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
            int valid = imin(n, i0 + r + 1 - j0); /* <= 0: the block starts after the row */
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
            int R = mr - r >= 4 ? 4 : 1, kk = imin(n, i0 + r + R - j0), kf = group_first(pb, i0 + r, R, j0);
            if (bf)
                ay_rows(oi + (size_t)r * so, so, (const uint32_t *)S + (size_t)r * FA_BC + kf / 2, FA_BC, 1,
                        (const uint32_t *)vh + (size_t)(j0 - k0 + kf) / 2 * hs, hs, (kk - kf + 1) / 2, hs, j0 > jlo, R,
                        true);
            else
                ay_rows(oi + (size_t)r * so, so, S + (size_t)r * FA_BC + kf, FA_BC, 1,
                        (const float *)vh + (size_t)(j0 - k0 + kf) * skv, skv, kk - kf, hs, j0 > jlo, R, false);
            r += R;
        }
    }
#undef SCORES
    for (int r = 0; r < mr; r++) {
        if (lrow[r] == 0.0f) { /* no key seen (l >= 1 otherwise: the max's own term) */
            memset(oi + (size_t)r * so, 0, (size_t)hs * sizeof *oi);
            lse[i0 - q0 + r] = -INFINITY;
            continue;
        }
        scale_row(oi + (size_t)r * so, hs, 1.0f / lrow[r]);
        lse[i0 - q0 + r] = mrow[r] + logf(lrow[r]);
    }
}

void flash_attention_block_forward(float *out, float *lse, float *scratch, const float *q, const float *k,
                                   const float *v, int B, int q0, int Tq, int k0, int Tk, int NH, int NKV, int hs,
                                   int sq, int skv, bool bf16, const int32_t *pos, int pos_ld)
{
    const int C = NH * hs, G = NH / NKV, ntiles = (Tq + FA_BR - 1) / FA_BR, Tp = tpad(Tk), hp = hpairs(hs);
    const float scale = 1.0f / sqrtf((float)hs);
    const long items = (long)B * NH * ntiles;
    if (items <= 0) /* no rows (num_threads(0) is not allowed) */
        return;
    /* per (b, KV head) panels, then the threads' */
    const size_t group = bf16 ? bf_group_floats(Tk, hs) : (size_t)hs * Tp;
    const size_t per_thread = bf16 ? fwd_thread_floats_bf(hs) : fwd_thread_floats();
    float *thread0 = scratch + (size_t)B * NKV * group;
#pragma omp parallel num_threads(fwd_threads(B, Tq, NH))
    {
#pragma omp for schedule(static)
        for (int bg = 0; bg < B * NKV; bg++) {
            const float *kg = k + (size_t)(bg / NKV) * Tk * skv + (size_t)(bg % NKV) * hs;
            float *panel = scratch + (size_t)bg * group;
            if (bf16) {
                /* the next group's k and v rows, 16 of each per block of this one's Kᵀ */
                row_prefetch pf = {.n = hs, .rows = Tk, .step = 16}, *pfp = NULL;
                if (bg + 1 < B * NKV) {
                    const float *k1 = k + (size_t)((bg + 1) / NKV) * Tk * skv + (size_t)((bg + 1) % NKV) * hs;
                    pf_add(&pf, k1, skv, false);
                    pf_add(&pf, v + (k1 - k), skv, false);
                    pfp = &pf;
                }
                pack_transposed_bf16((uint32_t *)panel, kg, Tk, Tp, hs, skv, pfp);
                pairs_across_rows((uint32_t *)panel + (size_t)hp * Tp, hs, v + (kg - k), skv, Tk, Tp, hs);
            } else {
                pack_transposed(panel, kg, Tk, Tp, hs, skv);
            }
        }
        float *S = thread0 + (size_t)zt_thread_num() * per_thread;
        float *mrow = S + (size_t)FA_BR * FA_BC, *lrow = mrow + FA_BR;
        uint32_t *Qb = bf16 ? (uint32_t *)(lrow + FA_BR) : NULL;
#pragma omp for schedule(static)
        for (long it = 0; it < items; it++) {
            int tile = (int)(it % ntiles), bh = (int)(it / ntiles), b = bh / NH, h = bh % NH;
            int i0 = tile * FA_BR, mr = imin(FA_BR, Tq - i0); /* local rows */
            const float *panel = scratch + ((size_t)b * NKV + h / G) * group;
            const void *vh = bf16 ? (const void *)((const uint32_t *)panel + (size_t)hp * Tp)
                                  : (const void *)(v + (size_t)b * Tk * skv + (size_t)(h / G) * hs);
            /* the next item's q and out rows (o (Tq, C) and q (Tq, sq) rows of head h at tile i0) */
            row_prefetch pf = {.n = hs, .step = 8}, *pfp = NULL;
            if (it + 1 < items) {
                int t1 = (int)((it + 1) % ntiles), bh1 = (int)((it + 1) / ntiles), b1 = bh1 / NH, h1 = bh1 % NH;
                pf.rows = imin(FA_BR, Tq - t1 * FA_BR);
                pf_add(&pf, q + ((size_t)b1 * Tq + (size_t)t1 * FA_BR) * sq + (size_t)h1 * hs, sq, false);
                pf_add(&pf, out + ((size_t)b1 * Tq + (size_t)t1 * FA_BR) * C + (size_t)h1 * hs, C, true);
                pfp = &pf;
            }
            forward_tile(out + (size_t)b * Tq * C + (size_t)h * hs, C, lse + (size_t)bh * Tq, S, mrow, lrow,
                         q + (size_t)b * Tq * sq + (size_t)h * hs, sq, panel, Tp, vh, skv, q0, k0, k0 + Tk, q0 + i0,
                         mr, hs, scale, Qb, pfp, pos ? pos + (size_t)b * pos_ld : NULL);
        }
    }
}

void flash_attention_gqa_forward(float *out, float *lse, float *scratch, const float *q, const float *k,
                                 const float *v, int B, int T, int NH, int NKV, int hs, int sq, int skv, bool bf16,
                                 const int32_t *pos)
{
    flash_attention_block_forward(out, lse, scratch, q, k, v, B, 0, T, 0, T, NH, NKV, hs, sq, skv, bf16, pos, T);
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

/* the pointers of one query head of a KV group: its Tq query rows q0 .. (whole-sequence indices)
 * and the group's Tk keys k0 .. */
typedef struct head_args {
    float *dq, *dk, *dv;        /* dq (Tq, hs) row stride sq; dk, dv (Tk, hs) stride skv */
    const float *dO, *O, *lse;  /* dO, O (Tq rows) row stride C; lse (Tq) */
    const float *q, *k, *KT, *VT; /* q stride sq, k stride skv; KT, VT packed (hs, Tp) */
    const int32_t *pos;           /* the positions of row b (whole-sequence indices), or NULL */
    int q0, Tq, k0, Tk, C, hs, sq, skv, Tp;
    bool first;   /* the group's first head: assigns dK and dV */
    int dq_assign; /* the key block whose pass assigns dq (the whole sequence's key block 0 without
                      positions: it reaches every row), or -1: every block adds */
} head_args;

/* the end of the 4-row group of dQ's product (over a chunk of nr rows) that row rr lies in */
static inline int dq_group_end(int rr, int nr)
{
    int g = rr & ~3;
    return g + 4 <= nr ? g + 4 : rr + 1;
}

/* key block j0 (n keys), query rows r0 .. r0+nr (whole-sequence indices): P and dS tiles, then the
 * products; kv_assign: the products assign dK and dV of the block (the first head's first chunk) */
static void backward_tile(const head_args *a, float *P, float *dS, const float *D, int j0, int n, int r0,
                          int nr, float scale, row_prefetch *pf, bool kv_assign)
{
    const int hs = a->hs, lq = r0 - a->q0, lk = j0 - a->k0; /* local row and key */
    const float *qr = a->q + (size_t)lq * a->sq, *dOr = a->dO + (size_t)lq * a->C;
    /* P, dS for each row group up to the diagonal of the last row of the 4-row group of dQ's
     * product it lies in (which reads that far; the same as the group's own last row's diagonal
     * rounded up to NC where r0 - j0 is a multiple of 16, as in the whole sequence) */
    for (int rr = 0; rr < nr;) {
        int R = nr - rr >= FA_GROWS ? FA_GROWS : 1, t0 = r0 + rr;
        int cols = imin(n, r0 + dq_group_end(rr + R - 1, nr) - j0);
        pf_advance(pf);
        for (int c0 = 0; c0 < cols; c0 += NC) {
            float *p = P + (size_t)rr * FA_BK + c0, *ds = dS + (size_t)rr * FA_BK + c0;
            const float *q = qr + (size_t)rr * a->sq, *dO = dOr + (size_t)rr * a->C;
            const float *kt = a->KT + lk + c0, *vt = a->VT + lk + c0;
            const int32_t *pr = a->pos ? a->pos + t0 : NULL;
            const float *l = a->lse + (t0 - a->q0), *d = D + (t0 - a->q0);
            if (R == FA_GROWS)
                grad_micro(p, ds, FA_BK, q, a->sq, dO, a->C, kt, vt, a->Tp, hs, l, d, pr, t0, j0 + c0, scale, FA_GROWS);
            else
                grad_micro(p, ds, FA_BK, q, a->sq, dO, a->C, kt, vt, a->Tp, hs, l, d, pr, t0, j0 + c0, scale, 1);
        }
        rr += R;
    }
    /* dVj (+)= Pᵀ dO and dKj (+)= dSᵀ Q, each 4-key group from the first row that sees it */
    bool add = !kv_assign;
    for (int c = 0; c < n;) {
        int R = n - c >= 4 ? 4 : 1, f = j0 + c > r0 ? j0 + c - r0 : 0;
        ay_rows(a->dv + (size_t)(lk + c) * a->skv, a->skv, P + (size_t)f * FA_BK + c, 1, FA_BK,
                dOr + (size_t)f * a->C, a->C, nr - f, hs, add, R, false);
        ay_rows(a->dk + (size_t)(lk + c) * a->skv, a->skv, dS + (size_t)f * FA_BK + c, 1, FA_BK,
                qr + (size_t)f * a->sq, a->sq, nr - f, hs, add, R, false);
        c += R;
    }
    /* dQ (+)= dS Kj, each 4-row group over the keys its last row sees; the whole sequence's key
     * block 0 reaches every row: it assigns, the later blocks add (dq_assign) */
    const float *kj = a->k + (size_t)lk * a->skv;
    for (int rr = 0; rr < nr;) {
        int R = nr - rr >= 4 ? 4 : 1, kk = imin(n, r0 + rr + R - j0);
        ay_rows(a->dq + (size_t)(lq + rr) * a->sq, a->sq, dS + (size_t)rr * FA_BK, FA_BK, 1, kj, a->skv, kk, hs,
                j0 != a->dq_assign, R, false);
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
                             float scale, row_prefetch *pf, bool kv_assign)
{
    const int hs = a->hs, hp = hpairs(hs), Tp = a->Tp, lq = r0 - a->q0, lk = j0 - a->k0;
    /* the head's pairs from the chunk's first row (lq is even) */
    const uint32_t *Qb = w->Qb + (size_t)lq * hp, *dOb = w->dOb + (size_t)lq * hp;
    const uint32_t *Q2 = w->Q2 + (size_t)(lq / 2) * hs, *dO2 = w->dO2 + (size_t)(lq / 2) * hs;
    for (int rr = 0; rr < nr;) {
        int R = nr - rr >= FA_GROWS ? FA_GROWS : nr - rr >= 2 ? 2 : 1, t0 = r0 + rr;
        int cols = imin(n, r0 + dq_group_end(rr + R - 1, nr) - j0); /* as in backward_tile */
        pf_advance(pf);
        for (int c0 = 0; c0 < cols; c0 += NC) {
            uint32_t *dsk = w->dSk + (size_t)rr * (FA_BK / 2) + c0 / 2;
            uint32_t *pt = w->PT + (size_t)(rr / 2) * FA_BK + c0, *dst = w->dST + (size_t)(rr / 2) * FA_BK + c0;
            const uint32_t *q = Qb + (size_t)rr * hp, *g = dOb + (size_t)rr * hp;
            const uint32_t *kt = w->KT + lk + c0, *vt = w->VT + lk + c0;
            const float *l = a->lse + (t0 - a->q0), *d = D + (t0 - a->q0);
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
    bool add = !kv_assign;
    for (int pass = 0; pass < 2; pass++) {
        float *dst = pass == 0 ? a->dv : a->dk;
        const uint32_t *A = pass == 0 ? w->PT : w->dST, *Y = pass == 0 ? dO2 : Q2;
        for (int c = 0; c < n;) {
            int R = n - c >= 4 ? 4 : 1, f = (j0 + c > r0 ? j0 + c - r0 : 0) & ~1, kp = (nr - f + 1) / 2;
            ay_rows(dst + (size_t)(lk + c) * a->skv, a->skv, A + (size_t)(f / 2) * FA_BK + c, 1, FA_BK,
                    Y + (size_t)(f / 2) * hs, hs, kp, hs, add, R, true);
            c += R;
        }
    }
    /* dQ (+)= dS Kj over key pairs */
    for (int rr = 0; rr < nr;) {
        int R = nr - rr >= 4 ? 4 : 1, kk = imin(n, r0 + rr + R - j0);
        ay_rows(a->dq + (size_t)(lq + rr) * a->sq, a->sq, w->dSk + (size_t)rr * (FA_BK / 2), FA_BK / 2, 1,
                w->K + (size_t)(lk / 2) * hs, hs, (kk + 1) / 2, hs, j0 != a->dq_assign, R, true);
        rr += R;
    }
}

/* the bf16 path's per-head pass: D, and Q and dO of all Tq rows as pairs along hs (Qb, dOb) and
 * across row pairs (Q2, dO2; an odd Tq's last row pairs with 0), each row read once */
static void head_pairs_bf(const head_args *a, const bf_bufs *w, float *D)
{
    const int T = a->Tq, hs = a->hs, hp = hpairs(hs);
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

/* The rows after the last one that reads a key before kend: q0 + Tq, or with positions 1 + the
 * last row whose document starts before kend (the whole sequence: >= kend, row kend - 1 reads
 * itself; a block of rows: may be q0, no reader); the rows after it, in other documents, are not
 * visited by the key block ending at kend. */
static int readers_end(const head_args *a, int kend)
{
    int t = a->q0 + a->Tq - 1;
    if (a->pos)
        while (t >= kend && t >= a->q0 && t - a->pos[t] >= kend)
            t--;
    return t + 1;
}

/* The first query row of key block j0's chunks: the block's first key (the diagonal), or q0 when
 * the rows start after it; one row earlier where that is an odd row of the block of rows (the bf16
 * pairs across rows start at its even rows; the extra row sees none of the block's keys). With
 * q0 and j0 multiples of FA_BQ the chunks are the whole sequence's. */
static int chunk_start(const head_args *a, int j0)
{
    int r0 = imax(a->q0, j0);
    return r0 - ((r0 - a->q0) & 1);
}

/* pf (may be NULL): the next head's rows, fetched a few at a time under the score products */
static void backward_head(const head_args *a, const bf_bufs *w, float *D, float *P, float *dS, float scale,
                          row_prefetch *pf)
{
    const int qend = a->q0 + a->Tq, kend = a->k0 + a->Tk;
    if (w)
        head_pairs_bf(a, w, D);
    else
        rowdot(D, a->dO, a->O, a->Tq, a->C, a->hs);
    if (pf) { /* spread over the score loops' row groups (about nr / 4 per tile) */
        long groups = 0;
        for (int j0 = a->k0; j0 < kend; j0 += FA_BK)
            for (int r0 = chunk_start(a, j0); r0 < qend; r0 += FA_BQ)
                groups += imin(FA_BQ, qend - r0) / 4;
        pf->step = (int)((pf->rows + groups) / (groups + 1)) + 1;
    }
    if (a->dq_assign == -2) /* the whole sequence, packed: key block 0 need not reach every row, so
                               every block adds into dq */
        for (int t = 0; t < a->Tq; t++)
            memset(a->dq + (size_t)t * a->sq, 0, (size_t)a->hs * sizeof *a->dq);
    for (int j0 = a->k0; j0 < kend; j0 += FA_BK) {
        int n = imin(FA_BK, kend - j0), rend = readers_end(a, j0 + n), r0 = chunk_start(a, j0);
        if (r0 >= rend && a->first) /* no row here reads the block: its dK, dV are 0 */
            for (int c = 0; c < n; c++) {
                memset(a->dk + (size_t)(j0 - a->k0 + c) * a->skv, 0, (size_t)a->hs * sizeof *a->dk);
                memset(a->dv + (size_t)(j0 - a->k0 + c) * a->skv, 0, (size_t)a->hs * sizeof *a->dv);
            }
        for (int r = r0; r < rend; r += FA_BQ) {
            bool kv_assign = a->first && r == r0;
            if (w)
                backward_tile_bf(a, w, D, j0, n, r, imin(FA_BQ, rend - r), scale, pf, kv_assign);
            else
                backward_tile(a, P, dS, D, j0, n, r, imin(FA_BQ, rend - r), scale, pf, kv_assign);
        }
    }
}

/* whole: the whole sequence's dq (assigned: key block 0 assigns, or with positions dq zeroed
 * first); else dq += */
static void backward(float *dq, float *dk, float *dv, float *scratch, const float *dout, const float *q,
                     const float *k, const float *v, const float *out, const float *lse, int B, int q0, int Tq,
                     int k0, int Tk, int NH, int NKV, int hs, int sq, int skv, bool bf16, const int32_t *pos,
                     int pos_ld, bool whole)
{
    const int C = NH * hs, G = NH / NKV, Tp = tpad(Tk), Tpq = tpad(Tq), hp = hpairs(hs);
    const float scale = 1.0f / sqrtf((float)hs);
    if (B * NKV <= 0)
        return;
#pragma omp parallel num_threads(bwd_threads(B, NKV))
    {
        float *KT, *VT, *D, *P = NULL, *dS = NULL;
        bf_bufs w;
        if (bf16) {
            w.KT = (uint32_t *)(scratch + (size_t)zt_thread_num() * bwd_thread_floats_bf(Tq, Tk, hs));
            w.VT = w.KT + (size_t)hp * Tp;
            w.K = w.VT + (size_t)hp * Tp;
            D = (float *)(w.K + (size_t)Tp / 2 * hs);
            w.Qb = (uint32_t *)(D + Tpq);
            w.dOb = w.Qb + (size_t)Tpq * hp;
            w.Q2 = w.dOb + (size_t)Tpq * hp;
            w.dO2 = w.Q2 + (size_t)Tpq / 2 * hs;
            w.dSk = w.dO2 + (size_t)Tpq / 2 * hs;
            w.PT = w.dSk + (size_t)FA_BQ * FA_BK / 2;
            w.dST = w.PT + (size_t)FA_BQ / 2 * FA_BK;
            KT = VT = NULL;
        } else {
            KT = scratch + (size_t)zt_thread_num() * bwd_thread_floats(Tq, Tk, hs);
            VT = KT + (size_t)hs * Tp, D = VT + (size_t)hs * Tp, P = D + Tpq, dS = P + (size_t)FA_BQ * FA_BK;
        }
#pragma omp for schedule(static)
        for (int bg = 0; bg < B * NKV; bg++) {
            int b = bg / NKV, g = bg % NKV;
            size_t kvoff = (size_t)b * Tk * skv + (size_t)g * hs;
            if (bf16) {
                pack_transposed_bf16(w.KT, k + kvoff, Tk, Tp, hs, skv, NULL);
                pack_transposed_bf16(w.VT, v + kvoff, Tk, Tp, hs, skv, NULL);
                pairs_across_rows(w.K, hs, k + kvoff, skv, Tk, Tp, hs);
            } else {
                pack_transposed(KT, k + kvoff, Tk, Tp, hs, skv);
                pack_transposed(VT, v + kvoff, Tk, Tp, hs, skv);
            }
            for (int h = g * G; h < (g + 1) * G; h++) {
                size_t qoff = (size_t)b * Tq * sq + (size_t)h * hs, ooff = (size_t)b * Tq * C + (size_t)h * hs;
                head_args a = {.dq = dq + qoff, .dk = dk + kvoff, .dv = dv + kvoff, .dO = dout + ooff,
                               .O = out + ooff, .lse = lse + ((size_t)b * NH + h) * Tq, .q = q + qoff,
                               .k = k + kvoff, .KT = KT, .VT = VT, .pos = pos ? pos + (size_t)b * pos_ld : NULL,
                               .q0 = q0, .Tq = Tq, .k0 = k0, .Tk = Tk, .C = C, .hs = hs, .sq = sq, .skv = skv,
                               .Tp = Tp, .first = h == g * G, .dq_assign = !whole ? -1 : pos ? -2 : k0};
                /* the next head's q, dO, O rows and dq (to be written); where it opens the next KV group, its k, v */
                row_prefetch pf = {.n = hs, .rows = Tq}, *pfp = NULL;
                int h1 = h + 1 < (g + 1) * G ? h + 1 : h + 1 < NH ? h + 1 : 0, b1 = h + 1 < NH ? b : b + 1;
                if (b1 < B) {
                    size_t q1 = (size_t)b1 * Tq * sq + (size_t)h1 * hs, o1 = (size_t)b1 * Tq * C + (size_t)h1 * hs;
                    pf_add(&pf, q + q1, sq, false);
                    pf_add(&pf, dout + o1, C, false);
                    pf_add(&pf, out + o1, C, false);
                    pf_add(&pf, dq + q1, sq, true);
                    if (h1 % G == 0 && Tk >= Tq) {
                        size_t kv1 = (size_t)b1 * Tk * skv + (size_t)(h1 / G) * hs;
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

void flash_attention_block_backward(float *dq, float *dk, float *dv, float *scratch, const float *dout,
                                    const float *q, const float *k, const float *v, const float *out,
                                    const float *lse, int B, int q0, int Tq, int k0, int Tk, int NH, int NKV,
                                    int hs, int sq, int skv, bool bf16, const int32_t *pos, int pos_ld)
{
    backward(dq, dk, dv, scratch, dout, q, k, v, out, lse, B, q0, Tq, k0, Tk, NH, NKV, hs, sq, skv, bf16, pos,
             pos_ld, false);
}

void flash_attention_gqa_backward(float *dq, float *dk, float *dv, float *scratch, const float *dout,
                                  const float *q, const float *k, const float *v, const float *out,
                                  const float *lse, int B, int T, int NH, int NKV, int hs, int sq, int skv, bool bf16,
                                  const int32_t *pos)
{
    backward(dq, dk, dv, scratch, dout, q, k, v, out, lse, B, 0, T, 0, T, NH, NKV, hs, sq, skv, bf16, pos, T, true);
}

void flash_attention_backward(float *dqkv, float *scratch, const float *dout, const float *qkv, const float *out,
                              const float *lse, int B, int T, int C, int NH, bool bf16, const int32_t *pos)
{
    flash_attention_gqa_backward(dqkv, dqkv + C, dqkv + 2 * C, scratch, dout, qkv, qkv + C, qkv + 2 * C, out, lse,
                                 B, T, NH, NH, C / NH, 3 * C, 3 * C, bf16, pos);
}

/* ---- merging blocks --------------------------------------------------------------------------- */

/* Per row: lse' = max + log(e^(lse - max) + e^(lse_b - max)) and the two weights e^(lse - lse'),
 * e^(lse_b - lse') in double (each rounded once to float), out' = out w + out_b w_b in fp32. One
 * row's result depends only on its own values: not on the thread count. */
void flash_attention_merge(float *out, float *lse, const float *out_b, const float *lse_b, int B, int Tq, int NH,
                           int hs)
{
    const long rows = (long)B * NH * Tq;
    const int C = NH * hs;
    if (rows <= 0)
        return;
#pragma omp parallel for schedule(static) num_threads(zt_max_threads() < rows ? zt_max_threads() : (int)rows)
    for (long i = 0; i < rows; i++) {
        int b = (int)(i / ((long)NH * Tq)), h = (int)(i / Tq % NH), t = (int)(i % Tq);
        float *o = out + ((size_t)b * Tq + t) * C + (size_t)h * hs;
        const float *ob = out_b + ((size_t)b * Tq + t) * C + (size_t)h * hs;
        float la = lse[i], lb = lse_b[i];
        if (lb == -INFINITY)
            continue;
        if (la == -INFINITY) {
            memcpy(o, ob, (size_t)hs * sizeof *o);
            lse[i] = lb;
            continue;
        }
        double m = la > lb ? la : lb, l = m + log(exp((double)la - m) + exp((double)lb - m));
        float wa = (float)exp((double)la - l), wb = (float)exp((double)lb - l);
        for (int e = 0; e < hs; e++)
            o[e] = o[e] * wa + ob[e] * wb;
        lse[i] = (float)l;
    }
}
