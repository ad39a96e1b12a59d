/* grouped_gemm.c - the experts' Linears as one grouped product over variable row counts (see
 * kernels.h): rows [offsets[e], offsets[e+1]) of the permuted input go through expert e's weight,
 * the e-th (OC,C) block of a stacked (E*OC, C) tensor (torchtitan's GroupedExperts, Megatron's
 * grouped GEMM). Each group is a matmul_forward / matmul_backward (gemm.h's fp32 products, threaded
 * by the library) in expert order; an expert with no rows is skipped (its weight gradient is left
 * as it is). The bits of a group depend only on its rows, its weight and the backend.
 */
#include "kernels/kernels.h"

void moe_grouped_forward(float *out, const float *in, const float *W, const int32_t *offsets, int E, int C, int OC)
{
    for (int e = 0; e < E; e++) {
        int n = offsets[e + 1] - offsets[e];
        if (n > 0)
            matmul_forward(out + (size_t)offsets[e] * OC, in + (size_t)offsets[e] * C, W + (size_t)e * OC * C, NULL,
                           n, C, OC);
    }
}

void moe_grouped_backward(float *din, float *dW, const float *dout, const float *in, const float *W,
                          const int32_t *offsets, int E, int C, int OC, unsigned flags)
{
    for (int e = 0; e < E; e++) {
        int n = offsets[e + 1] - offsets[e];
        if (n > 0)
            matmul_backward(din ? din + (size_t)offsets[e] * C : NULL, dW ? dW + (size_t)e * OC * C : NULL, NULL,
                            dout + (size_t)offsets[e] * OC, in + (size_t)offsets[e] * C, W + (size_t)e * OC * C, n,
                            C, OC, flags & ZT_MM_DINP_ADD);
    }
}
