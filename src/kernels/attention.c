/* attention.c - causal multi-head self-attention through GEMMs, with grouped-query attention
 * (NKV key/value heads, each shared by G = NH/NKV query heads; NKV = NH is plain multi-head):
 * attention_gqa_forward / attention_gqa_backward on separate q, k, v with their own row strides
 * (Llama), and attention_forward / attention_backward on GPT-2's fused qkv, which call them with
 * NKV = NH and stride 3C (see kernels.h).
 *
 * Per (b, h) pair, with Q the (T, hs) slice of query head h and K, V those of KV head h / G,
 * scale = 1/sqrt(hs):
 *   forward   S = scale Q K^T,  P = causal_softmax(S) (saved in att, 0 above the diagonal),
 *             O = P V (written into out with row stride C)
 *   backward  dP = dO V^T,  dS = P * (dP - rowsum(dP * P)) * scale,
 *             dQ = dS K,  dK = dS^T Q,  dV = P^T dO (written into dqkv, row stride 3C)
 *
 * Causal blocking: rows are cut into blocks of ATT_TB. Row block i only needs the key columns
 * 0 .. end of block i, so each GEMM over rows runs on that lower block triangle, and each GEMM
 * over key columns (dK, dV) only on the rows from that column block down: with T = 256 this does
 * 10/16 of the full square's flops (the exact triangle would be 8/16).
 *
 * Threads: forward splits the B*NH pairs statically over the OpenMP threads, backward the B*NKV
 * (b, KV head) groups, each running its G query heads in order (the first assigns dK and dV, the
 * next add to them: a fixed order, and no two threads write one dK row); inside, cblas_sgemm runs
 * single-threaded (OpenBLAS's OpenMP build does that inside a parallel region). No pair's result
 * depends on which thread computed it, so the bits do not depend on the thread count.
 *
 * Packed documents (pos, kernels.h): row t's softmax runs over the keys t - pos[t] .. t, the rest
 * of its row of att is 0. The forward's products start at the row block's first document start
 * (the columns before it are all masked); the backward takes no positions: P is 0 wherever the
 * forward masked, so the masked dS = P (dP - dot) scale and their products are 0 too.
 *
 * Scratch: backward keeps dP/dS (T, T) per thread; attention_scratch_floats returns
 * min(omp_get_max_threads(), B*NKV) * T * T, and attention_backward recomputes that thread count
 * and runs with it: size the scratch under the OpenMP thread setting the backward runs with.
 */
#include <cblas.h>

#include "kernels/kernels.h"
#include "kernels/vecmath.h"

#ifndef ATT_TB
#define ATT_TB 64 /* rows per causal block; 32 is as fast, 128 and 256 slower at T = 256 */
#endif

/* row[lo..n) = softmax(row[lo..n)); row[0..lo) and row[n..T) = 0 */
static void causal_softmax_row(float *row, int lo, int n, int T)
{
    int i;
    for (i = 0; i < lo; i++)
        row[i] = 0.0f;
    row += lo, n -= lo, T -= lo;
    zt_vf inv = zt_vset1(1.0f / zt_row_exp_sum(row, n, zt_row_max(row, n)));
    for (i = 0; i + ZT_VL <= n; i += ZT_VL)
        zt_vstore(row + i, zt_vmul(zt_vload(row + i), inv));
    if (i < n)
        zt_vstoren(row + i, zt_vmul(zt_vloadn(row + i, n - i, 0.0f), inv), n - i);
    for (i = n; i < T; i++)
        row[i] = 0.0f;
}

/* the first key row t sees: t - pos[t] (clamped to 0 .. t: the kernels stay in bounds whatever
 * pos holds), 0 without positions */
static int first_key(const int32_t *pb, int t)
{
    int s = pb ? t - pb[t] : 0;
    return s < 0 ? 0 : s > t ? t : s;
}

void attention_gqa_forward(float *out, float *att, const float *q, const float *k, const float *v,
                           int B, int T, int NH, int NKV, int hs, int sq, int skv, const int32_t *pos)
{
    const int C = NH * hs, G = NH / NKV;
    const float scale = 1.0f / sqrtf((float)hs);
#pragma omp parallel for schedule(static)
    for (int bh = 0; bh < B * NH; bh++) {
        int b = bh / NH, h = bh % NH;
        const float *qh = q + (size_t)b * T * sq + (size_t)h * hs;
        size_t kvoff = (size_t)b * T * skv + (size_t)(h / G) * hs;
        const float *kh = k + kvoff, *vh = v + kvoff;
        float *P = att + (size_t)bh * T * T;
        float *o = out ? out + (size_t)b * T * C + (size_t)h * hs : NULL;
        const int32_t *pb = pos ? pos + (size_t)b * T : NULL;
        for (int i0 = 0; i0 < T; i0 += ATT_TB) {
            int m = T - i0 < ATT_TB ? T - i0 : ATT_TB, ncols = i0 + m, lo = 0;
            if (pb) { /* the block's first key any row sees: the columns before it are masked */
                lo = i0;
                for (int t = i0; t < i0 + m; t++)
                    lo = first_key(pb, t) < lo ? first_key(pb, t) : lo;
            }
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, ncols - lo, hs, scale,
                        qh + (size_t)i0 * sq, sq, kh + (size_t)lo * skv, skv, 0.0f, P + (size_t)i0 * T + lo, T);
            for (int t = i0; t < i0 + m; t++)
                causal_softmax_row(P + (size_t)t * T, first_key(pb, t), t + 1, T);
            if (o) /* NULL out: only the probabilities (selective recomputation) */
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, hs, ncols - lo, 1.0f,
                            P + (size_t)i0 * T + lo, T, vh + (size_t)lo * skv, skv, 0.0f, o + (size_t)i0 * C, C);
        }
    }
}

void attention_forward(float *out, float *att, const float *qkv, int B, int T, int C, int NH, const int32_t *pos)
{
    attention_gqa_forward(out, att, qkv, qkv + C, qkv + 2 * C, B, T, NH, NH, C / NH, 3 * C, 3 * C, pos);
}

static int attention_threads(int B, int NH)
{
    int nt = zt_max_threads();
    return nt < B * NH ? nt : B * NH;
}

size_t attention_scratch_floats(int B, int T, int C, int NH)
{
    (void)C;
    return (size_t)attention_threads(B, NH) * (size_t)T * (size_t)T;
}

size_t attention_gqa_scratch_floats(int B, int T, int NKV)
{
    return attention_scratch_floats(B, T, 0, NKV);
}

/* in place over row[0..ncols): dS = P * (dP - sum_{j<n} dP P) * scale for j < n, 0 for j >= n */
static void softmax_backward_row(float *row, const float *p, int n, int ncols, float scale)
{
    int i;
    zt_vf dot = zt_vset1(zt_row_dot(row, p, n)), vs = zt_vset1(scale);
    for (i = 0; i + ZT_VL <= n; i += ZT_VL)
        zt_vstore(row + i, zt_vmul(zt_vmul(zt_vload(p + i), zt_vsub(zt_vload(row + i), dot)), vs));
    if (i < n)
        zt_vstoren(row + i,
                   zt_vmul(zt_vmul(zt_vloadn(p + i, n - i, 0.0f),
                                   zt_vsub(zt_vloadn(row + i, n - i, 0.0f), dot)),
                           vs),
                   n - i);
    for (i = n; i < ncols; i++)
        row[i] = 0.0f;
}

void attention_gqa_backward(float *dq, float *dk, float *dv, float *scratch, const float *dout,
                            const float *q, const float *k, const float *v, const float *att, int B,
                            int T, int NH, int NKV, int hs, int sq, int skv)
{
    const int C = NH * hs, G = NH / NKV;
    const float scale = 1.0f / sqrtf((float)hs);
#pragma omp parallel num_threads(attention_threads(B, NKV))
    {
        float *dS = scratch + (size_t)zt_thread_num() * T * T;
#pragma omp for schedule(static)
        for (int bg = 0; bg < B * NKV; bg++) {
            int b = bg / NKV, g = bg % NKV;
            size_t kvoff = (size_t)b * T * skv + (size_t)g * hs;
            const float *kh = k + kvoff, *vh = v + kvoff;
            float *dkh = dk + kvoff, *dvh = dv + kvoff;
            /* the G query heads of this KV head in order: the first assigns dK/dV, the rest add */
            for (int h = g * G; h < (g + 1) * G; h++) {
                float beta = h == g * G ? 0.0f : 1.0f;
                size_t qoff = (size_t)b * T * sq + (size_t)h * hs;
                const float *qh = q + qoff;
                float *dqh = dq + qoff;
                const float *P = att + ((size_t)b * NH + h) * T * T;
                const float *dO = dout + (size_t)b * T * C + (size_t)h * hs;
                /* row blocks: dP = dO V^T, dS in place, dQ = dS K */
                for (int i0 = 0; i0 < T; i0 += ATT_TB) {
                    int m = T - i0 < ATT_TB ? T - i0 : ATT_TB, ncols = i0 + m;
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, ncols, hs, 1.0f,
                                dO + (size_t)i0 * C, C, vh, skv, 0.0f, dS + (size_t)i0 * T, T);
                    for (int t = i0; t < i0 + m; t++)
                        softmax_backward_row(dS + (size_t)t * T, P + (size_t)t * T, t + 1, ncols,
                                             scale);
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, hs, ncols, 1.0f,
                                dS + (size_t)i0 * T, T, kh, skv, 0.0f, dqh + (size_t)i0 * sq, sq);
                }
                /* column blocks: dV (+)= P^T dO, dK (+)= dS^T Q over the rows from the block down */
                for (int j0 = 0; j0 < T; j0 += ATT_TB) {
                    int m = T - j0 < ATT_TB ? T - j0 : ATT_TB, nrows = T - j0;
                    size_t corner = (size_t)j0 * T + j0;
                    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, m, hs, nrows, 1.0f,
                                P + corner, T, dO + (size_t)j0 * C, C, beta,
                                dvh + (size_t)j0 * skv, skv);
                    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, m, hs, nrows, 1.0f,
                                dS + corner, T, qh + (size_t)j0 * sq, sq, beta,
                                dkh + (size_t)j0 * skv, skv);
                }
            }
        }
    }
}

void attention_backward(float *dqkv, float *scratch, const float *dout, const float *qkv,
                        const float *att, int B, int T, int C, int NH)
{
    attention_gqa_backward(dqkv, dqkv + C, dqkv + 2 * C, scratch, dout, qkv, qkv + C, qkv + 2 * C,
                           att, B, T, NH, NH, C / NH, 3 * C, 3 * C);
}
