/* moe_permute.c - moving tokens to their experts and back (see kernels.h), by the routing plan of
 * moe_route_plan: the rows of the experts' inputs are the chosen (token, expert) slots sorted by
 * expert, then token; row_of[t*k + j] is the row of token t's j-th choice (-1: dropped over the
 * capacity).
 *
 *   gather     xp[r] = x[order[r] / k], 0 for padding rows    (forward: tokens to experts; in the
 *              compute dtype's elements: the rounded operand's rows under bf16/fp16 compute)
 *   combine    out_t = sum_j w_tj y[row_of(t,j)]                (forward: weighted, back in token order)
 *   combine'   dy[row] = w_tj dout_t, dw_tj = <dout_t, y[row]>  (backward)
 *   scatter    dx_t = sum_j dxp[row_of(t,j)]                    (backward of gather)
 * A token's sums over its k choices run in j order (descending router probability), each from 0:
 * threads split the tokens (or rows), so the bits never depend on the thread count.
 */
#include "kernels/kernels.h"
#include "kernels/vecmath.h"

#include <string.h>

void moe_gather_rows(void *xp, const void *x, const int32_t *order, int rows, int k, int C, int kind)
{
    size_t row = (size_t)C * zt_lp_elem_bytes(kind); /* a row's bytes */
#pragma omp parallel
    {
        size_t r0, r1;
        zt_split_range((size_t)rows, 1, zt_thread_num(), zt_num_threads(), &r0, &r1);
        for (size_t r = r0; r < r1; r++) {
            if (order[r] < 0) memset((char *)xp + r * row, 0, row); /* padding (bf16's zero is 0 bits too) */
            else memcpy((char *)xp + r * row, (const char *)x + (size_t)(order[r] / k) * row, row);
        }
    }
}

void moe_combine_forward(float *out, const float *y, const float *w, const int32_t *row_of, int N, int k, int C)
{
#pragma omp parallel
    {
        size_t t0, t1;
        zt_split_range((size_t)N, 1, zt_thread_num(), zt_num_threads(), &t0, &t1);
        for (size_t t = t0; t < t1; t++) {
            float *o = out + t * (size_t)C;
            memset(o, 0, (size_t)C * sizeof *o);
            for (int j = 0; j < k; j++) {
                int32_t r = row_of[t * k + j];
                if (r < 0) continue;
                const float *yr = y + (size_t)r * C;
                float wj = w[t * k + j];
                for (int c = 0; c < C; c++) o[c] += wj * yr[c];
            }
        }
    }
}

void moe_combine_backward(float *dy, float *dw, const float *dout, const float *y, const float *w,
                          const int32_t *row_of, const int32_t *order, int rows, int N, int k, int C)
{
#pragma omp parallel
    {
        size_t r0, r1, t0, t1;
        zt_split_range((size_t)rows, 1, zt_thread_num(), zt_num_threads(), &r0, &r1);
        for (size_t r = r0; r < r1; r++)
            if (order[r] < 0) memset(dy + r * (size_t)C, 0, (size_t)C * sizeof *dy); /* padding */
        zt_split_range((size_t)N, 1, zt_thread_num(), zt_num_threads(), &t0, &t1);
        for (size_t t = t0; t < t1; t++) {
            const float *d = dout + t * (size_t)C;
            for (int j = 0; j < k; j++) {
                int32_t r = row_of[t * k + j];
                if (r < 0) {
                    dw[t * k + j] = 0.0f;
                    continue;
                }
                const float *yr = y + (size_t)r * C;
                float *dyr = dy + (size_t)r * C, wj = w[t * k + j];
                double dot = 0;
                for (int c = 0; c < C; c++) {
                    dyr[c] = wj * d[c];
                    dot += (double)d[c] * yr[c];
                }
                dw[t * k + j] = (float)dot;
            }
        }
    }
}

void moe_scatter_rows(float *dx, const float *dxp, const int32_t *row_of, int N, int k, int C)
{
#pragma omp parallel
    {
        size_t t0, t1;
        zt_split_range((size_t)N, 1, zt_thread_num(), zt_num_threads(), &t0, &t1);
        for (size_t t = t0; t < t1; t++) {
            float *o = dx + t * (size_t)C;
            memset(o, 0, (size_t)C * sizeof *o);
            for (int j = 0; j < k; j++) {
                int32_t r = row_of[t * k + j];
                if (r < 0) continue;
                const float *g = dxp + (size_t)r * C;
                for (int c = 0; c < C; c++) o[c] += g[c];
            }
        }
    }
}
