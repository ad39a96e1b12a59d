/* matmul.c - the Linear layer: matmul_forward / matmul_backward (see kernels.h), its products
 * through zt_gemm (gemm.h: OpenBLAS sgemm or a cached oneDNN matmul primitive, one backend per
 * process, chosen in gemm.c).
 *
 *   forward   out (N,OC)     = inp (N,C) @ weight (OC,C)^T + bias   NoTrans x Trans, bias fused
 *   backward  dinp (N,C)    (+)= dout (N,OC) @ weight (OC,C)        NoTrans x NoTrans, beta 0 or 1
 *             dweight (OC,C) (+)= dout^T @ inp                       Trans x NoTrans, beta 1 or 0
 *                                  (0: the gradient's first write this micro-batch, ZT_MM_DWEIGHT_SET)
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
 * dbias splits the OC columns over threads in blocks, one per thread where it fits; each column is
 * summed over the rows in order in its own lane, from 0, then added to dbias: the bits are
 * independent of the block width, the thread count and the backend. matmul_dbias_rows makes the
 * same sums while it takes each row's values from an elementwise kernel (gelu_backward_to) or
 * dout and stores them, rounded (matmul_backward_lp's staging) or fp32, while they are in cache:
 * one pass instead of two or three, the same bits; matmul_dbias is that walk without a store. A
 * block's rows are walked in order, the sums in an L1 array (long contiguous runs), the inputs'
 * rows prefetched a few ahead (the row stride defeats the hardware prefetchers): on cold (N,OC)
 * arrays at W1's widths 12-13.5 ms a step against 16-18 ms for the former blocks of 8 vectors
 * summed in registers (bench/RESULTS.md, "Gradients assigned, not zeroed; bias rows fetched ahead").
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

#define DBIAS_SEG 128   /* columns per row() call (its buffer) */
#define DBIAS_MAXW 4096 /* columns per block at most (the block's sums, 16 KiB, stay in L1) */
/* Rows fetched ahead: a block's rows lie a row (OC floats, 3-12 KiB at GPT-2's widths) apart, and
 * the hardware prefetchers, which stay within a 4 KiB page, lose the stream at every row; the
 * inputs' lines DBIAS_AHEAD rows on are prefetched into L2 as each row is walked */
#define DBIAS_AHEAD 3

/* row r's values at columns [c0, c0+n) of the (N,OC) array: row() into buf, or ctx's own (row NULL) */
static inline const float *block_row(float *buf, matmul_rows_fn row, const void *ctx, size_t off, int n)
{
    return row ? row(buf, ctx, off, n) : (const float *)ctx + off;
}

/* out's elements [off, off+n) = d in the dtype kind (fp32: copied unless d is there already) */
static inline void block_store(void *out, int kind, size_t off, const float *d, int n)
{
    if (kind)
        zt_round_to_lp_serial((zt_lp_kind)kind, (char *)out + off * zt_lp_elem_bytes(kind), d, (size_t)n);
    else if ((float *)out + off != d)
        memcpy((float *)out + off, d, (size_t)n * sizeof(float));
}

/* The same sums with the values made row by row (matmul_dbias_rows): the sums in an L1 array, so
 * that a block can be wide and its rows long contiguous runs, which the fused walk needs to keep
 * pace with the separate streaming passes (in registers, as above, it is faster for dout alone).
 * dbias[c0..c0+n) += sum over rows of the values at columns [c0, c0+n) (n <= DBIAS_MAXW): each
 * column's sum starts at 0 and adds the rows in order (a lane of acc), then goes into dbias; the
 * rows are walked in order, each row's n columns contiguous (the longer the run, the faster the
 * walk: one block per thread); out (not NULL) gets each row's values (fp32: made there) */
static void dbias_block(float *dbias, void *out, int kind, matmul_rows_fn row, const void *ctx,
                        const float *const *reads, int N, int OC, int c0, int n)
{
    float acc[DBIAS_MAXW + ZT_VL] __attribute__((aligned(64)));
    float buf[DBIAS_SEG] __attribute__((aligned(64)));
    memset(acc, 0, sizeof(float) * (size_t)(n + ZT_VL));
    for (int r = 0; r < N; r++) {
        for (int s = 0; s < n; s += DBIAS_SEG) {
            int m = n - s < DBIAS_SEG ? n - s : DBIAS_SEG, j = 0;
            size_t off = (size_t)r * OC + c0 + s;
            if (r + DBIAS_AHEAD < N) /* the same columns DBIAS_AHEAD rows on (see above) */
                for (int q = 0; q < 2 && reads[q]; q++)
                    for (int l = 0; l < m; l += 16)
                        __builtin_prefetch(reads[q] + off + (size_t)DBIAS_AHEAD * OC + l, 0, 2);
            float *dst = out && !kind ? (float *)out + off : buf; /* fp32 out: made in place */
            const float *d = block_row(dst, row, ctx, off, m);
            float *a = acc + s;
            for (; j + ZT_VL <= m; j += ZT_VL)
                zt_vstore(a + j, zt_vadd(zt_vload(a + j), zt_vload(d + j)));
            if (j < m) /* the lanes past m add 0 to sums never used */
                zt_vstore(a + j, zt_vadd(zt_vload(a + j), zt_vloadn(d + j, m - j, 0.0f)));
            if (out)
                block_store(out, kind, off, d, m);
        }
    }
    int j = 0;
    for (; j + ZT_VL <= n; j += ZT_VL)
        zt_vstore(dbias + c0 + j, zt_vadd(zt_vload(dbias + c0 + j), zt_vload(acc + j)));
    if (j < n)
        zt_vstoren(dbias + c0 + j, zt_vadd(zt_vloadn(dbias + c0 + j, n - j, 0.0f), zt_vload(acc + j)), n - j);
}

void matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                     const float *weight, int N, int C, int OC, unsigned flags)
{
    if (dinp != NULL)
        zt_gemm_f32(false, false, N, C, OC, 1.0f, dout, OC, weight, C,
                    flags & ZT_MM_DINP_ADD ? 1.0f : 0.0f, dinp, C);
    if (dweight != NULL)
        zt_gemm_f32(true, false, OC, C, N, 1.0f, dout, OC, inp, C,
                    flags & ZT_MM_DWEIGHT_SET ? 0.0f : 1.0f, dweight, C);
    if (dbias != NULL)
        matmul_dbias(dbias, dout, N, OC);
}

void matmul_dbias(float *dbias, const float *dout, int N, int OC)
{
    matmul_dbias_rows(dbias, NULL, 0, NULL, dout, NULL, NULL, N, OC);
}

void matmul_dbias_rows(float *dbias, void *out, int kind, matmul_rows_fn row, const void *ctx,
                       const float *reads0, const float *reads1, int N, int OC)
{
    const float *reads[2] = {row ? reads0 : ctx, row ? reads1 : NULL};
    if (!reads[0]) reads[0] = reads[1], reads[1] = NULL;
    /* one block per thread where it fits: any width gives the same sums (each column its own lane) */
    int nvec = (OC + ZT_VL - 1) / ZT_VL, nt = zt_max_threads();
    int per = (nvec + nt - 1) / nt, most = DBIAS_MAXW / ZT_VL;
    int bw = (per < most ? per : most) * ZT_VL;
    int nblocks = (OC + bw - 1) / bw;
#pragma omp parallel for schedule(static)
    for (int blk = 0; blk < nblocks; blk++) {
        int c0 = blk * bw;
        dbias_block(dbias, out, kind, row, ctx, reads, N, OC, c0, OC - c0 < bw ? OC - c0 : bw);
    }
}
