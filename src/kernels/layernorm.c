/* layernorm.c - layer normalization over the last dimension: layernorm_forward /
 * layernorm_backward (see kernels.h).
 *
 * Forward, per row (rows split statically over threads): two passes in fp32 with 16 lane-wise
 * partial sums (mean, then the biased variance of x - mean, as PyTorch), eps = 1e-5. Each lane
 * adds C/16 terms, so the sums carry ~sqrt(C/16) ulp of error. layernorm_forward_to writes the rows
 * in a Linear's operand dtype (rounded row by row from the fp32 row: layernorm_forward's bits then
 * zt_round_to_lp's, without the fp32 tensor); residual_layernorm_forward first forms the row
 * res = a + b (residual_forward's one rounding) and normalizes it while in cache.
 *
 * Backward: dinp is per row (rows split over threads). dweight and dbias are sums over all N rows:
 * a second sweep splits the *channels* over threads, and each channel's sum runs over the rows in
 * order in a register, then is added once to dweight/dbias. Every element's arithmetic is thus
 * the same whatever the thread count, so the bits never depend on it.
 */
#include "kernels/kernels.h"
#include "kernels/vecmath.h"

#define LN_EPS 1e-5f

/* out[0..C) = (x - mean)·rstd·w + b for one row; *mean, *rstd of the row */
static inline void layernorm_row(float *o, float *mean, float *rstd, const float *x, const float *weight,
                                 const float *bias, int C)
{
    int i;
    zt_vf acc = zt_vzero();
    for (i = 0; i + ZT_VL <= C; i += ZT_VL)
        acc = zt_vadd(acc, zt_vload(x + i));
    if (i < C)
        acc = zt_vadd(acc, zt_vloadn(x + i, C - i, 0.0f));
    float m = zt_vhsum(acc) / (float)C;
    zt_vf vm = zt_vset1(m);
    acc = zt_vzero();
    for (i = 0; i + ZT_VL <= C; i += ZT_VL) {
        zt_vf d = zt_vsub(zt_vload(x + i), vm);
        acc = zt_vfmadd(d, d, acc);
    }
    if (i < C) {
        zt_vf d = zt_vsub(zt_vloadn(x + i, C - i, m), vm); /* fill m: d = 0 in spare lanes */
        acc = zt_vfmadd(d, d, acc);
    }
    float s = 1.0f / sqrtf(zt_vhsum(acc) / (float)C + LN_EPS);
    zt_vf vs = zt_vset1(s);
    for (i = 0; i + ZT_VL <= C; i += ZT_VL) {
        zt_vf nrm = zt_vmul(zt_vsub(zt_vload(x + i), vm), vs);
        zt_vstore(o + i, zt_vfmadd(nrm, zt_vload(weight + i), zt_vload(bias + i)));
    }
    if (i < C) {
        int n = C - i;
        zt_vf nrm = zt_vmul(zt_vsub(zt_vloadn(x + i, n, 0.0f), vm), vs);
        zt_vstoren(o + i,
                   zt_vfmadd(nrm, zt_vloadn(weight + i, n, 0.0f), zt_vloadn(bias + i, n, 0.0f)),
                   n);
    }
    *mean = m;
    *rstd = s;
}

void layernorm_forward(float *out, float *mean, float *rstd, const float *inp, const float *weight,
                       const float *bias, int N, int C)
{
    layernorm_forward_to(out, 0, mean, rstd, inp, weight, bias, N, C);
}

/* row r into out in its kind: fp32 in place, or through row (C floats) rounded */
static inline void ln_row_to(void *out, int kind, float *row, float *mean, float *rstd, const float *x,
                             const float *weight, const float *bias, int r, int C)
{
    if (!kind) {
        layernorm_row((float *)out + (size_t)r * C, mean + r, rstd + r, x, weight, bias, C);
        return;
    }
    layernorm_row(row, mean + r, rstd + r, x, weight, bias, C);
    zt_round_to_lp_serial((zt_lp_kind)kind, (char *)out + (size_t)r * C * zt_lp_elem_bytes(kind), row,
                   (size_t)C);
}

void layernorm_forward_to(void *out, int kind, float *mean, float *rstd, const float *inp, const float *weight,
                          const float *bias, int N, int C)
{
#pragma omp parallel
    {
        float row[kind ? C : 1];
#pragma omp for schedule(static)
        for (int r = 0; r < N; r++)
            ln_row_to(out, kind, row, mean, rstd, inp + (size_t)r * C, weight, bias, r, C);
    }
}

void residual_layernorm_forward(float *res, void *out, int kind, float *mean, float *rstd, const float *a,
                                const float *b, const float *weight, const float *bias, int N, int C)
{
#pragma omp parallel
    {
        float row[kind ? C : 1];
#pragma omp for schedule(static)
        for (int r = 0; r < N; r++) {
            size_t off = (size_t)r * C;
            float *x = res + off;
            zt_row_add(x, a + off, b + off, C);
            ln_row_to(out, kind, row, mean, rstd, x, weight, bias, r, C);
        }
    }
}

/* dinp[r] += rstd (w dout - mean(w dout) - norm * mean(w dout * norm)) for one row */
static void layernorm_backward_row(float *dx, const float *dy, const float *x, const float *w,
                                   float m, float s, int C)
{
    zt_vf vm = zt_vset1(m), vs = zt_vset1(s);
    zt_vf a1 = zt_vzero(), a2 = zt_vzero();
    int i;
    for (i = 0; i + ZT_VL <= C; i += ZT_VL) {
        zt_vf nrm = zt_vmul(zt_vsub(zt_vload(x + i), vm), vs);
        zt_vf dn = zt_vmul(zt_vload(w + i), zt_vload(dy + i));
        a1 = zt_vadd(a1, dn);
        a2 = zt_vfmadd(dn, nrm, a2);
    }
    if (i < C) {
        int n = C - i;
        zt_vf nrm = zt_vmul(zt_vsub(zt_vloadn(x + i, n, 0.0f), vm), vs);
        zt_vf dn = zt_vmul(zt_vloadn(w + i, n, 0.0f), zt_vloadn(dy + i, n, 0.0f));
        a1 = zt_vadd(a1, dn);
        a2 = zt_vfmadd(dn, nrm, a2);
    }
    zt_vf dmean = zt_vset1(zt_vhsum(a1) / (float)C);
    zt_vf dnmean = zt_vset1(zt_vhsum(a2) / (float)C);
    for (i = 0; i + ZT_VL <= C; i += ZT_VL) {
        zt_vf nrm = zt_vmul(zt_vsub(zt_vload(x + i), vm), vs);
        zt_vf dn = zt_vmul(zt_vload(w + i), zt_vload(dy + i));
        zt_vf v = zt_vfnmadd(nrm, dnmean, zt_vsub(dn, dmean));
        zt_vstore(dx + i, zt_vfmadd(v, vs, zt_vload(dx + i)));
    }
    if (i < C) {
        int n = C - i;
        zt_vf nrm = zt_vmul(zt_vsub(zt_vloadn(x + i, n, 0.0f), vm), vs);
        zt_vf dn = zt_vmul(zt_vloadn(w + i, n, 0.0f), zt_vloadn(dy + i, n, 0.0f));
        zt_vf v = zt_vfnmadd(nrm, dnmean, zt_vsub(dn, dmean));
        zt_vstoren(dx + i, zt_vfmadd(v, vs, zt_vloadn(dx + i, n, 0.0f)), n);
    }
}

/* channels per register block of the dweight/dbias sweep: 4 vectors each for dw and db */
#define LN_CBLOCK (4 * ZT_VL)

/* dweight[c0..c0+n) += sum_r norm * dout, dbias[..] += sum_r dout; n <= LN_CBLOCK, rows in order */
static void layernorm_backward_params(float *dw, float *db, const float *dout, const float *inp,
                                      const float *mean, const float *rstd, int N, int C, int c0,
                                      int n)
{
    zt_vf aw[4], ab[4];
    int nv = (n + ZT_VL - 1) / ZT_VL;
    for (int k = 0; k < 4; k++)
        aw[k] = ab[k] = zt_vzero();
    for (int r = 0; r < N; r++) {
        const float *x = inp + (size_t)r * C + c0;
        const float *dy = dout + (size_t)r * C + c0;
        zt_vf vm = zt_vset1(mean[r]), vs = zt_vset1(rstd[r]);
        for (int k = 0; k < nv; k++) {
            int left = n - k * ZT_VL;
            zt_vf d, xv;
            if (left >= ZT_VL) {
                d = zt_vload(dy + k * ZT_VL);
                xv = zt_vload(x + k * ZT_VL);
            } else {
                d = zt_vloadn(dy + k * ZT_VL, left, 0.0f);
                xv = zt_vloadn(x + k * ZT_VL, left, 0.0f);
            }
            ab[k] = zt_vadd(ab[k], d);
            aw[k] = zt_vfmadd(zt_vmul(zt_vsub(xv, vm), vs), d, aw[k]);
        }
    }
    for (int k = 0; k < nv; k++) {
        int left = n - k * ZT_VL;
        if (left >= ZT_VL) {
            if (dw) zt_vstore(dw + c0 + k * ZT_VL, zt_vadd(zt_vload(dw + c0 + k * ZT_VL), aw[k]));
            if (db) zt_vstore(db + c0 + k * ZT_VL, zt_vadd(zt_vload(db + c0 + k * ZT_VL), ab[k]));
        } else {
            if (dw)
                zt_vstoren(dw + c0 + k * ZT_VL,
                           zt_vadd(zt_vloadn(dw + c0 + k * ZT_VL, left, 0.0f), aw[k]), left);
            if (db)
                zt_vstoren(db + c0 + k * ZT_VL,
                           zt_vadd(zt_vloadn(db + c0 + k * ZT_VL, left, 0.0f), ab[k]), left);
        }
    }
}

void layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                        const float *inp, const float *weight, const float *mean, const float *rstd,
                        int N, int C)
{
#pragma omp parallel
    {
#pragma omp for schedule(static) nowait
        for (int r = 0; r < N; r++)
            layernorm_backward_row(dinp + (size_t)r * C, dout + (size_t)r * C, inp + (size_t)r * C,
                                   weight, mean[r], rstd[r], C);
        /* dweight/dbias only read dout, inp, mean, rstd: no barrier needed before */
        int nblocks = dweight || dbias ? (C + LN_CBLOCK - 1) / LN_CBLOCK : 0; /* frozen: none */
#pragma omp for schedule(static)
        for (int blk = 0; blk < nblocks; blk++) {
            int c0 = blk * LN_CBLOCK;
            int n = C - c0 < LN_CBLOCK ? C - c0 : LN_CBLOCK;
            layernorm_backward_params(dweight, dbias, dout, inp, mean, rstd, N, C, c0, n);
        }
    }
}
