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
 *             rows from the block down in chunks of FA_BQ rows: S = scale Q Kjᵀ recomputed,
 *             P = exp(S - lse), dP = dO Vjᵀ, dS = P (dP - D) scale,
 *             dVj (+)= Pᵀ dO, dKj (+)= dSᵀ Q, dQ (+)= dS Kj.
 * Every product is a cblas_sgemm on a tile (single-threaded: OpenBLAS's OpenMP build runs so inside
 * a parallel region), the row passes (max, exp, sums, dS) are vecmath.h's AVX-512 loops. Nothing
 * is rounded below fp32: under bf16/fp16 compute attention runs on fp32 q, k, v and reads the fp32
 * O (docs/precision.md), as attention.c does.
 *
 * The same algorithm on CPUs elsewhere: PyTorch's ATen FlashAttentionKernel (blocked GEMMs + online
 * softmax, parallel over (batch, head, query block) forward and (batch, head) backward), ggml's
 * flash_attn_ext (one query row at a time, for inference), oneDNN's SDPA (brgemm micro-kernels).
 *
 * Threads. Forward: the (b, h, query tile) items, longest first, dynamically scheduled: each item
 * writes only its own rows of out and lse, so the bits do not depend on the thread count.
 * Backward: the B*NKV (b, KV head) groups split statically, each running its G query heads in
 * order (the first assigns dK and dV, the next add: one fixed order, and no two threads write one
 * row), as attention.c does.
 *
 * Memory: scratch per thread is the larger of forward's FA_BR x FA_BC scores and backward's T row
 * terms D plus two FA_BQ x FA_BK tiles: O(T). flash_attention_scratch_floats sizes it under the
 * OpenMP thread setting the kernels will run with (they never use more threads than that).
 */
#include <cblas.h>

#include "kernels/kernels.h"
#include "kernels/vecmath.h"

#ifndef FA_BR
#define FA_BR 64 /* forward: query rows per tile (a work item) */
#endif
#ifndef FA_BC
#define FA_BC 256 /* forward: keys per block, a multiple of FA_BR */
#endif
#ifndef FA_BK
#define FA_BK 64 /* backward: keys per block */
#endif
#ifndef FA_BQ
#define FA_BQ 256 /* backward: query rows per chunk under a key block */
#endif

#if FA_BC % FA_BR != 0
#error "FA_BC must be a multiple of FA_BR: every key block a query tile reads starts at or before the tile"
#endif

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

/* per-thread scratch, rounded to 16 floats (64 bytes) so every thread's part stays aligned */
static size_t fwd_floats(void) { return (size_t)FA_BR * FA_BC + 2 * FA_BR; }
static size_t bwd_floats(int T) { return ((size_t)T + 15) / 16 * 16 + 2 * (size_t)FA_BQ * FA_BK; }

size_t flash_attention_scratch_floats(int B, int T, int NH, int NKV)
{
    size_t f = (size_t)fwd_threads(B, T, NH) * fwd_floats();
    size_t b = (size_t)bwd_threads(B, NKV) * bwd_floats(T);
    return f > b ? f : b;
}

/* ---- forward ---------------------------------------------------------------------------------- */

/* One row of a key block: row[0..n) holds scores, the first `valid` unmasked. Updates the running
 * max *m and sum *l, writes P = exp(row - m') over [0, valid) and 0 over [valid, n), and returns
 * e^(m - m'), the factor the row's output so far must be scaled by (0 on the first block). */
static float online_softmax_row(float *row, int valid, int n, float *m, float *l)
{
    int i;
    zt_vf vmax = zt_vset1(-INFINITY);
    for (i = 0; i + ZT_VL <= valid; i += ZT_VL)
        vmax = zt_vmax(vmax, zt_vload(row + i));
    if (i < valid)
        vmax = zt_vmax(vmax, zt_vloadn(row + i, valid - i, -INFINITY));
    float mx = zt_vhmax(vmax), mnew = mx > *m ? mx : *m;
    zt_vf vm = zt_vset1(mnew), acc = zt_vzero();
    for (i = 0; i + ZT_VL <= valid; i += ZT_VL) {
        zt_vf e = zt_vexp(zt_vsub(zt_vload(row + i), vm));
        acc = zt_vadd(acc, e);
        zt_vstore(row + i, e);
    }
    if (i < valid) {
        zt_vf e = zt_vexp(zt_vsub(zt_vloadn(row + i, valid - i, -INFINITY), vm)); /* spare lanes: 0 */
        acc = zt_vadd(acc, e);
        zt_vstoren(row + i, e, valid - i);
    }
    for (i = valid; i < n; i++)
        row[i] = 0.0f;
    float alpha = expf(*m - mnew); /* *m = -inf on the first block: 0 */
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

/* rows i0 .. i0+mr of one (b, h): o (row stride so) and lse (T) of those rows */
static void forward_tile(float *o, int so, float *lse, float *S, float *mrow, float *lrow,
                         const float *qh, int sq, const float *kh, const float *vh, int skv, int i0,
                         int mr, int hs, float scale)
{
    int end = i0 + mr;
    for (int r = 0; r < mr; r++)
        mrow[r] = -INFINITY, lrow[r] = 0.0f;
    for (int j0 = 0; j0 < end; j0 += FA_BC) {
        int n = end - j0 < FA_BC ? end - j0 : FA_BC;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, mr, n, hs, scale, qh + (size_t)i0 * sq,
                    sq, kh + (size_t)j0 * skv, skv, 0.0f, S, n);
        for (int r = 0; r < mr; r++) {
            int valid = i0 + r - j0 + 1; /* >= 1: j0 <= i0 (FA_BC is a multiple of FA_BR) */
            float alpha = online_softmax_row(S + (size_t)r * n, valid < n ? valid : n, n, mrow + r,
                                             lrow + r);
            if (j0 > 0 && alpha != 1.0f)
                scale_row(o + (size_t)(i0 + r) * so, hs, alpha);
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, mr, hs, n, 1.0f, S, n,
                    vh + (size_t)j0 * skv, skv, j0 > 0 ? 1.0f : 0.0f, o + (size_t)i0 * so, so);
    }
    for (int r = 0; r < mr; r++) {
        scale_row(o + (size_t)(i0 + r) * so, hs, 1.0f / lrow[r]);
        lse[i0 + r] = mrow[r] + logf(lrow[r]);
    }
}

void flash_attention_gqa_forward(float *out, float *lse, float *scratch, const float *q,
                                 const float *k, const float *v, int B, int T, int NH, int NKV,
                                 int hs, int sq, int skv)
{
    const int C = NH * hs, G = NH / NKV, ntiles = (T + FA_BR - 1) / FA_BR;
    const float scale = 1.0f / sqrtf((float)hs);
    const long items = (long)B * NH * ntiles;
#pragma omp parallel num_threads(fwd_threads(B, T, NH))
    {
        float *S = scratch + (size_t)zt_thread_num() * fwd_floats();
        float *mrow = S + (size_t)FA_BR * FA_BC, *lrow = mrow + FA_BR;
#pragma omp for schedule(dynamic, 1)
        for (long it = 0; it < items; it++) {
            /* the last tiles (the longest rows) first, for balance */
            int tile = ntiles - 1 - (int)(it / ((long)B * NH));
            int bh = (int)(it % ((long)B * NH)), b = bh / NH, h = bh % NH;
            int i0 = tile * FA_BR, mr = T - i0 < FA_BR ? T - i0 : FA_BR;
            size_t kvoff = (size_t)b * T * skv + (size_t)(h / G) * hs;
            forward_tile(out + (size_t)b * T * C + (size_t)h * hs, C, lse + (size_t)bh * T, S, mrow,
                         lrow, q + (size_t)b * T * sq + (size_t)h * hs, sq, k + kvoff, v + kvoff, skv,
                         i0, mr, hs, scale);
        }
    }
}

void flash_attention_forward(float *out, float *lse, float *scratch, const float *qkv, int B, int T,
                             int C, int NH)
{
    flash_attention_gqa_forward(out, lse, scratch, qkv, qkv + C, qkv + 2 * C, B, T, NH, NH, C / NH,
                                3 * C, 3 * C);
}

/* ---- backward --------------------------------------------------------------------------------- */

/* D[t] = dO_t . O_t over the T rows of one head (row stride C) */
static void rowdot(float *D, const float *dO, const float *O, int T, int C, int hs)
{
    for (int t = 0; t < T; t++) {
        const float *a = dO + (size_t)t * C, *b = O + (size_t)t * C;
        int i;
        zt_vf acc = zt_vzero();
        for (i = 0; i + ZT_VL <= hs; i += ZT_VL)
            acc = zt_vfmadd(zt_vload(a + i), zt_vload(b + i), acc);
        if (i < hs)
            acc = zt_vfmadd(zt_vloadn(a + i, hs - i, 0.0f), zt_vloadn(b + i, hs - i, 0.0f), acc);
        D[t] = zt_vhsum(acc);
    }
}

/* One row of a (query chunk, key block) tile: s[0..n) scores, dp[0..n) dO Vᵀ, the first `valid`
 * keys unmasked. In place: s = P = exp(s - lse), dp = dS = P (dp - D) scale; 0 where masked. */
static void softmax_grad_row(float *s, float *dp, int valid, int n, float lse, float D, float scale)
{
    int i;
    zt_vf vl = zt_vset1(lse), vd = zt_vset1(D), vs = zt_vset1(scale);
    for (i = 0; i + ZT_VL <= valid; i += ZT_VL) {
        zt_vf p = zt_vexp(zt_vsub(zt_vload(s + i), vl));
        zt_vstore(s + i, p);
        zt_vstore(dp + i, zt_vmul(zt_vmul(p, zt_vsub(zt_vload(dp + i), vd)), vs));
    }
    if (i < valid) {
        int r = valid - i;
        zt_vf p = zt_vexp(zt_vsub(zt_vloadn(s + i, r, -INFINITY), vl));
        zt_vstoren(s + i, p, r);
        zt_vstoren(dp + i, zt_vmul(zt_vmul(p, zt_vsub(zt_vloadn(dp + i, r, 0.0f), vd)), vs), r);
    }
    for (i = valid; i < n; i++)
        s[i] = dp[i] = 0.0f;
}

/* one query head h of KV head group (b, g): first = the group's first head (assigns dK, dV) */
static void backward_head(float *dqh, float *dkh, float *dvh, float *D, float *S, float *dP,
                          const float *dO, const float *O, const float *lse, const float *qh,
                          const float *kh, const float *vh, int T, int C, int hs, int sq, int skv,
                          bool first, float scale)
{
    rowdot(D, dO, O, T, C, hs);
    for (int j0 = 0; j0 < T; j0 += FA_BK) {
        int n = T - j0 < FA_BK ? T - j0 : FA_BK;
        const float *kj = kh + (size_t)j0 * skv, *vj = vh + (size_t)j0 * skv;
        float *dkj = dkh + (size_t)j0 * skv, *dvj = dvh + (size_t)j0 * skv;
        for (int r0 = j0; r0 < T; r0 += FA_BQ) {
            int nr = T - r0 < FA_BQ ? T - r0 : FA_BQ;
            float beta_kv = first && r0 == j0 ? 0.0f : 1.0f, beta_q = j0 > 0 ? 1.0f : 0.0f;
            const float *qr = qh + (size_t)r0 * sq, *dOr = dO + (size_t)r0 * C;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nr, n, hs, scale, qr, sq, kj, skv,
                        0.0f, S, n);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nr, n, hs, 1.0f, dOr, C, vj, skv,
                        0.0f, dP, n);
            for (int r = 0; r < nr; r++) {
                int t = r0 + r, valid = t - j0 + 1; /* >= 1: r0 >= j0 */
                softmax_grad_row(S + (size_t)r * n, dP + (size_t)r * n, valid < n ? valid : n, n,
                                 lse[t], D[t], scale);
            }
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n, hs, nr, 1.0f, S, n, dOr, C,
                        beta_kv, dvj, skv);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n, hs, nr, 1.0f, dP, n, qr, sq,
                        beta_kv, dkj, skv);
            /* key block 0 reaches every row: it assigns dQ, the later blocks add */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nr, hs, n, 1.0f, dP, n, kj, skv,
                        beta_q, dqh + (size_t)r0 * sq, sq);
        }
    }
}

void flash_attention_gqa_backward(float *dq, float *dk, float *dv, float *scratch,
                                  const float *dout, const float *q, const float *k, const float *v,
                                  const float *out, const float *lse, int B, int T, int NH, int NKV,
                                  int hs, int sq, int skv)
{
    const int C = NH * hs, G = NH / NKV;
    const float scale = 1.0f / sqrtf((float)hs);
#pragma omp parallel num_threads(bwd_threads(B, NKV))
    {
        float *D = scratch + (size_t)zt_thread_num() * bwd_floats(T);
        float *S = D + ((size_t)T + 15) / 16 * 16, *dP = S + (size_t)FA_BQ * FA_BK;
#pragma omp for schedule(static)
        for (int bg = 0; bg < B * NKV; bg++) {
            int b = bg / NKV, g = bg % NKV;
            size_t kvoff = (size_t)b * T * skv + (size_t)g * hs;
            for (int h = g * G; h < (g + 1) * G; h++) {
                size_t qoff = (size_t)b * T * sq + (size_t)h * hs, ooff = (size_t)b * T * C + (size_t)h * hs;
                backward_head(dq + qoff, dk + kvoff, dv + kvoff, D, S, dP, dout + ooff, out + ooff,
                              lse + ((size_t)b * NH + h) * T, q + qoff, k + kvoff, v + kvoff, T, C,
                              hs, sq, skv, h == g * G, scale);
            }
        }
    }
}

void flash_attention_backward(float *dqkv, float *scratch, const float *dout, const float *qkv,
                              const float *out, const float *lse, int B, int T, int C, int NH)
{
    flash_attention_gqa_backward(dqkv, dqkv + C, dqkv + 2 * C, scratch, dout, qkv, qkv + C,
                                 qkv + 2 * C, out, lse, B, T, NH, NH, C / NH, 3 * C, 3 * C);
}
