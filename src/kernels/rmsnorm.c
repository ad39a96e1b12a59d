/* rmsnorm.c - root-mean-square normalization over the last dimension (Llama's LlamaRMSNorm):
 * rmsnorm_forward / rmsnorm_backward (see kernels.h).
 *
 * Forward, per row (rows split statically over threads): ms = mean(x²) in fp32 with 16 lane-wise
 * partial sums, rstd = 1/sqrt(ms + eps), out = (x·rstd)·w (the order of transformers' fp32 path:
 * normalize, then scale by the weight). rmsnorm_forward_to writes the rows in a Linear's operand
 * dtype (bf16 bits or fp16 values, rounded row by row from the fp32 row: the bits of
 * rmsnorm_forward then zt_round_to_lp, without the fp32 tensor); residual_rmsnorm_forward first
 * forms the row res = a + b (residual_forward's one rounding) and normalizes it while in cache.
 *
 * Backward, with n = x·rstd: dx = rstd·(w·dy - n·mean(w·dy·n)), accumulated (+=) into dinp (the
 * residual stream's gradient, as layernorm_backward); dw += Σ_rows dy·n. As in layernorm.c the
 * rows are split over threads for dinp and the channels for dweight, each channel summing its rows
 * in order, so the bits never depend on the thread count.
 */
#include "kernels/kernels.h"
#include "kernels/vecmath.h"

/* out[0..C) = (x·rstd)·w for one row; returns rstd */
static inline float rmsnorm_row(float *o, const float *x, const float *weight, float eps, int C)
{
    int i;
    zt_vf acc = zt_vzero();
    for (i = 0; i + ZT_VL <= C; i += ZT_VL) {
        zt_vf v = zt_vload(x + i);
        acc = zt_vfmadd(v, v, acc);
    }
    if (i < C) {
        zt_vf v = zt_vloadn(x + i, C - i, 0.0f);
        acc = zt_vfmadd(v, v, acc);
    }
    float s = 1.0f / sqrtf(zt_vhsum(acc) / (float)C + eps);
    zt_vf vs = zt_vset1(s);
    for (i = 0; i + ZT_VL <= C; i += ZT_VL)
        zt_vstore(o + i, zt_vmul(zt_vmul(zt_vload(x + i), vs), zt_vload(weight + i)));
    if (i < C)
        zt_vstoren(o + i, zt_vmul(zt_vmul(zt_vloadn(x + i, C - i, 0.0f), vs),
                                  zt_vloadn(weight + i, C - i, 0.0f)), C - i);
    return s;
}

void rmsnorm_forward(float *out, float *rstd, const float *inp, const float *weight, float eps,
                     int N, int C)
{
    rmsnorm_forward_to(out, 0, rstd, inp, weight, eps, N, C);
}

/* one row into out (row r of N) in its kind: fp32 in place, or through row (C floats) rounded */
static inline void norm_row_to(void *out, int kind, float *row, const float *x, const float *weight,
                               float eps, float *rstd, int r, int C)
{
    if (!kind) {
        rstd[r] = rmsnorm_row((float *)out + (size_t)r * C, x, weight, eps, C);
        return;
    }
    rstd[r] = rmsnorm_row(row, x, weight, eps, C);
    zt_round_to_lp_serial((zt_lp_kind)kind, (char *)out + (size_t)r * C * zt_lp_elem_bytes(kind), row,
                   (size_t)C);
}

void rmsnorm_forward_to(void *out, int kind, float *rstd, const float *inp, const float *weight, float eps,
                        int N, int C)
{
#pragma omp parallel
    {
        float row[kind ? C : 1];
#pragma omp for schedule(static)
        for (int r = 0; r < N; r++)
            norm_row_to(out, kind, row, inp + (size_t)r * C, weight, eps, rstd, r, C);
    }
}

void residual_rmsnorm_forward(float *res, void *out, int kind, float *rstd, const float *a, const float *b,
                              const float *weight, float eps, int N, int C)
{
#pragma omp parallel
    {
        float row[kind ? C : 1];
#pragma omp for schedule(static)
        for (int r = 0; r < N; r++) {
            size_t off = (size_t)r * C;
            float *x = res + off;
            zt_row_add(x, a + off, b + off, C);
            norm_row_to(out, kind, row, x, weight, eps, rstd, r, C);
        }
    }
}

/* dx += rstd (w dy - n mean(w dy n)) for one row, n = x rstd */
static void rmsnorm_backward_row(float *dx, const float *dy, const float *x, const float *w, float s,
                                 int C)
{
    zt_vf vs = zt_vset1(s), acc = zt_vzero();
    int i;
    for (i = 0; i + ZT_VL <= C; i += ZT_VL)
        acc = zt_vfmadd(zt_vmul(zt_vload(w + i), zt_vload(dy + i)), zt_vmul(zt_vload(x + i), vs), acc);
    if (i < C) {
        int n = C - i;
        acc = zt_vfmadd(zt_vmul(zt_vloadn(w + i, n, 0.0f), zt_vloadn(dy + i, n, 0.0f)),
                        zt_vmul(zt_vloadn(x + i, n, 0.0f), vs), acc);
    }
    zt_vf dnmean = zt_vset1(zt_vhsum(acc) / (float)C);
    for (i = 0; i + ZT_VL <= C; i += ZT_VL) {
        zt_vf nrm = zt_vmul(zt_vload(x + i), vs);
        zt_vf v = zt_vfnmadd(nrm, dnmean, zt_vmul(zt_vload(w + i), zt_vload(dy + i)));
        zt_vstore(dx + i, zt_vfmadd(v, vs, zt_vload(dx + i)));
    }
    if (i < C) {
        int n = C - i;
        zt_vf nrm = zt_vmul(zt_vloadn(x + i, n, 0.0f), vs);
        zt_vf v = zt_vfnmadd(nrm, dnmean, zt_vmul(zt_vloadn(w + i, n, 0.0f), zt_vloadn(dy + i, n, 0.0f)));
        zt_vstoren(dx + i, zt_vfmadd(v, vs, zt_vloadn(dx + i, n, 0.0f)), n);
    }
}

/* dweight[c0..c0+n) += Σ_r x rstd dout over the rows in order; n <= ZT_VL */
static void rmsnorm_backward_weight(float *dw, const float *dout, const float *inp, const float *rstd,
                                    int N, int C, int c0, int n)
{
    zt_vf aw = zt_vzero();
    for (int r = 0; r < N; r++) {
        const float *x = inp + (size_t)r * C + c0, *dy = dout + (size_t)r * C + c0;
        zt_vf xv = n == ZT_VL ? zt_vload(x) : zt_vloadn(x, n, 0.0f);
        zt_vf d = n == ZT_VL ? zt_vload(dy) : zt_vloadn(dy, n, 0.0f);
        aw = zt_vfmadd(zt_vmul(xv, zt_vset1(rstd[r])), d, aw);
    }
    if (n == ZT_VL)
        zt_vstore(dw + c0, zt_vadd(zt_vload(dw + c0), aw));
    else
        zt_vstoren(dw + c0, zt_vadd(zt_vloadn(dw + c0, n, 0.0f), aw), n);
}

void rmsnorm_backward(float *dinp, float *dweight, const float *dout, const float *inp,
                      const float *weight, const float *rstd, int N, int C)
{
#pragma omp parallel
    {
#pragma omp for schedule(static) nowait
        for (int r = 0; r < N; r++)
            rmsnorm_backward_row(dinp + (size_t)r * C, dout + (size_t)r * C, inp + (size_t)r * C,
                                 weight, rstd[r], C);
        int nblocks = dweight ? (C + ZT_VL - 1) / ZT_VL : 0; /* dweight NULL (frozen): none */
#pragma omp for schedule(static)
        for (int blk = 0; blk < nblocks; blk++) {
            int c0 = blk * ZT_VL, n = C - c0 < ZT_VL ? C - c0 : ZT_VL;
            rmsnorm_backward_weight(dweight, dout, inp, rstd, N, C, c0, n);
        }
    }
}
