/* matmul.c - the Linear layer: matmul_forward / matmul_backward (see kernels.h), its products
 * through zt_gemm (gemm.h: OpenBLAS sgemm or a cached oneDNN matmul primitive, one backend per
 * process, chosen in gemm.c).
 *
 *   forward   out (N,OC)     = inp (N,C) @ weight (OC,C)^T + bias   NoTrans x Trans, bias fused
 *   backward  dinp (N,C)    (+)= dout (N,OC) @ weight (OC,C)        NoTrans x NoTrans, beta 0 or 1
 *             dweight (OC,C) += dout^T @ inp                         Trans x NoTrans, beta 1
 *             dbias (OC)     += column sums of dout                  here, vectorized
 *
 * The bias is fused: oneDNN takes it as the matmul's bias operand; on OpenBLAS out is first
 * filled with bias rows and the product runs with beta = 1 (OpenBLAS applies beta in a separate
 * sweep over out, which beta = 1 skips). += on oneDNN is a sum post-op. Products are called
 * outside any parallel region, so the library threads them itself (OMP_NUM_THREADS) over a
 * partition fixed by the shape and the thread count: the bits are the same run to run for one
 * backend. They may differ between thread counts (they do with OPENBLAS_CORETYPE=Haswell, whose
 * single-threaded path blocks differently) and they differ between backends.
 *
 * dbias splits the OC columns over threads in blocks of 8 vectors; each column is summed over the
 * rows in order in a register: independent of the thread count and of the backend. The same walk
 * (matmul_dbias_rows) can take each row's values from an elementwise kernel (gelu_backward_to)
 * and store them, fp32 or rounded (matmul_backward_lp's staging), while they are in cache: one
 * pass instead of two or three, the same bits.
 */
#include "kernels/gemm.h"
#include "kernels/kernels.h"
#include "kernels/vecmath.h"

#include <string.h>

void matmul_forward(float *out, const float *inp, const float *weight, const float *bias, int N,
                    int C, int OC)
{
    zt_gemm_f32_bias(false, true, N, OC, C, 1.0f, inp, C, weight, C, 0.0f, out, OC, bias);
}

#define DBIAS_NV 8                   /* vectors per column block */
#define DBIAS_W (DBIAS_NV * ZT_VL) /* columns per block */

/* row r's values at columns [c0, c0+n) of the (N,OC) array: row() into buf, or ctx's own (row NULL) */
static inline const float *block_row(float *buf, matmul_rows_fn row, const void *ctx, size_t off, int n)
{
    return row ? row(buf, ctx, off, n) : (const float *)ctx + off;
}

/* out's elements [off, off+n) = d in the dtype kind (fp32: copied unless d is there already) */
static inline void block_store(void *out, int kind, size_t off, const float *d, int n)
{
    if (kind)
        zt_round_to_lp_serial((zt_lp_kind)kind, (char *)out + off * (kind == ZT_LP_BF16 ? 2 : 4), d, (size_t)n);
    else if ((float *)out + off != d)
        memcpy((float *)out + off, d, (size_t)n * sizeof(float));
}

/* dbias[c0..c0+n) += sum over rows of the values at columns [c0, c0+n) (n <= DBIAS_W), each
 * column summed over the rows in order in a register; out (not NULL) gets each row's values */
static void dbias_block(float *dbias, void *out, int kind, matmul_rows_fn row, const void *ctx, int N, int OC,
                        int c0, int n)
{
    zt_vf acc[DBIAS_NV];
    float buf[DBIAS_W];
    int nv = (n + ZT_VL - 1) / ZT_VL;
    for (int k = 0; k < DBIAS_NV; k++)
        acc[k] = zt_vzero();
    if (n == DBIAS_W) {
        for (int r = 0; r < N; r++) {
            size_t off = (size_t)r * OC + c0;
            const float *d = block_row(buf, row, ctx, off, n);
            for (int k = 0; k < DBIAS_NV; k++)
                acc[k] = zt_vadd(acc[k], zt_vload(d + k * ZT_VL));
            if (out)
                block_store(out, kind, off, d, n);
        }
    } else {
        for (int r = 0; r < N; r++) {
            size_t off = (size_t)r * OC + c0;
            const float *d = block_row(buf, row, ctx, off, n);
            for (int k = 0; k < nv; k++) {
                int left = n - k * ZT_VL;
                acc[k] = zt_vadd(acc[k], left >= ZT_VL ? zt_vload(d + k * ZT_VL)
                                                       : zt_vloadn(d + k * ZT_VL, left, 0.0f));
            }
            if (out)
                block_store(out, kind, off, d, n);
        }
    }
    for (int k = 0; k < nv; k++) {
        int left = n - k * ZT_VL;
        float *p = dbias + c0 + k * ZT_VL;
        if (left >= ZT_VL)
            zt_vstore(p, zt_vadd(zt_vload(p), acc[k]));
        else
            zt_vstoren(p, zt_vadd(zt_vloadn(p, left, 0.0f), acc[k]), left);
    }
}

void matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                     const float *weight, int N, int C, int OC, bool accumulate_dinp)
{
    if (dinp != NULL)
        zt_gemm_f32(false, false, N, C, OC, 1.0f, dout, OC, weight, C,
                    accumulate_dinp ? 1.0f : 0.0f, dinp, C);
    if (dweight != NULL)
        zt_gemm_f32(true, false, OC, C, N, 1.0f, dout, OC, inp, C, 1.0f, dweight, C);
    if (dbias != NULL)
        matmul_dbias(dbias, dout, N, OC);
}

void matmul_dbias(float *dbias, const float *dout, int N, int OC)
{
    matmul_dbias_rows(dbias, NULL, 0, NULL, dout, N, OC);
}

void matmul_dbias_rows(float *dbias, void *out, int kind, matmul_rows_fn row, const void *ctx, int N, int OC)
{
    int nblocks = (OC + DBIAS_W - 1) / DBIAS_W;
#pragma omp parallel for schedule(static)
    for (int blk = 0; blk < nblocks; blk++) {
        int c0 = blk * DBIAS_W;
        dbias_block(dbias, out, kind, row, ctx, N, OC, c0, OC - c0 < DBIAS_W ? OC - c0 : DBIAS_W);
    }
}
