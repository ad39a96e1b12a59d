/* matmul.c - the Linear layer through OpenBLAS: matmul_forward / matmul_backward (see kernels.h).
 *
 *   forward   out (N,OC)     = inp (N,C) @ weight (OC,C)^T + bias   sgemm NoTrans x Trans
 *   backward  dinp (N,C)    (+)= dout (N,OC) @ weight (OC,C)        sgemm NoTrans x NoTrans
 *             dweight (OC,C) += dout^T @ inp                         sgemm Trans x NoTrans, beta 1
 *             dbias (OC)     += column sums of dout
 *
 * The bias is fused for free: OpenBLAS applies beta in a separate sweep over out before the
 * product (beta = 0 zeroes out), so out is first filled with bias rows and the product runs with
 * beta = 1, which skips that sweep. sgemm is called outside any parallel region, so OpenBLAS
 * threads it itself (OMP_NUM_THREADS) over a partition fixed by the shape and the thread count:
 * the bits are the same run to run. They may differ between thread counts (they do with
 * OPENBLAS_CORETYPE=Haswell, whose single-threaded path blocks differently).
 *
 * dbias splits the OC columns over threads in blocks of 8 vectors; each column is summed over the
 * rows in order in a register: independent of the thread count.
 */
#include <cblas.h>

#include "kernels/kernels.h"
#include "kernels/vecmath.h"

void matmul_forward(float *out, const float *inp, const float *weight, const float *bias, int N,
                    int C, int OC)
{
    float beta = 0.0f;
    if (bias != NULL) {
#pragma omp parallel for schedule(static)
        for (int r = 0; r < N; r++) {
            float *o = out + (size_t)r * OC;
            int i = 0;
            for (; i + ZT_VL <= OC; i += ZT_VL)
                zt_vstore(o + i, zt_vload(bias + i));
            if (i < OC)
                zt_vstoren(o + i, zt_vloadn(bias + i, OC - i, 0.0f), OC - i);
        }
        beta = 1.0f;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, OC, C, 1.0f, inp, C, weight, C, beta,
                out, OC);
}

#define DBIAS_NV 8 /* vectors per column block */

/* dbias[c0..c0+n) += sum over rows of dout[:, c0..c0+n); n <= DBIAS_NV * ZT_VL */
static void dbias_block(float *dbias, const float *dout, int N, int OC, int c0, int n)
{
    zt_vf acc[DBIAS_NV];
    int nv = (n + ZT_VL - 1) / ZT_VL;
    for (int k = 0; k < DBIAS_NV; k++)
        acc[k] = zt_vzero();
    if (nv == DBIAS_NV && n == DBIAS_NV * ZT_VL) {
        for (int r = 0; r < N; r++) {
            const float *d = dout + (size_t)r * OC + c0;
            for (int k = 0; k < DBIAS_NV; k++)
                acc[k] = zt_vadd(acc[k], zt_vload(d + k * ZT_VL));
        }
    } else {
        for (int r = 0; r < N; r++) {
            const float *d = dout + (size_t)r * OC + c0;
            for (int k = 0; k < nv; k++) {
                int left = n - k * ZT_VL;
                acc[k] = zt_vadd(acc[k], left >= ZT_VL ? zt_vload(d + k * ZT_VL)
                                                       : zt_vloadn(d + k * ZT_VL, left, 0.0f));
            }
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
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, C, OC, 1.0f, dout, OC, weight, C,
                    accumulate_dinp ? 1.0f : 0.0f, dinp, C);
    if (dweight != NULL)
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OC, C, N, 1.0f, dout, OC, inp, C, 1.0f,
                    dweight, C);
    if (dbias != NULL) {
        const int bw = DBIAS_NV * ZT_VL;
        int nblocks = (OC + bw - 1) / bw;
#pragma omp parallel for schedule(static)
        for (int blk = 0; blk < nblocks; blk++) {
            int c0 = blk * bw;
            dbias_block(dbias, dout, N, OC, c0, OC - c0 < bw ? OC - c0 : bw);
        }
    }
}
