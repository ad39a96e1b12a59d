/* grouped_gemm.c - the experts' Linears as one grouped product over variable row counts (see
 * kernels.h): rows [offsets[e], offsets[e+1]) of the permuted input go through expert e's weight,
 * the e-th (OC,C) block of a stacked (E*OC, C) tensor (torchtitan's GroupedExperts, Megatron's
 * grouped GEMM). The groups run side by side on the OpenMP threads, whole experts a thread, taken
 * in turn (dynamic: a thread the machine slows takes fewer), each group's products on its thread
 * alone (gemm.h's zt_gemm_f32_serial) rather than each product threaded: an expert's ~N·k/E rows
 * are too few for two threads to share one product well (bench/RESULTS.md, "Mixture of experts:
 * the experts side by side"). The products are matmul.c's (forward NT; backward dinp NN, dweight
 * TN, += as the flags say); an expert with no rows is skipped (its weight gradient is left as it
 * is, or zeroed when the flags say the gradient is assigned: ZT_MM_DWEIGHT_SET). The bits of a group depend only on its rows, its weight and the backend: not on the
 * thread count, nor on which thread ran it.
 */
#include "kernels/gemm.h"
#include "kernels/kernels.h"

#include <omp.h>
#include <string.h>

void moe_grouped_forward(float *out, const float *in, const float *W, const int32_t *offsets, int E, int C, int OC)
{
#pragma omp parallel for schedule(dynamic, 1) if (!omp_in_parallel())
    for (int e = 0; e < E; e++) {
        int n = offsets[e + 1] - offsets[e];
        if (n > 0)
            zt_gemm_f32_serial(false, true, n, OC, C, 1.0f, in + (size_t)offsets[e] * C, C, W + (size_t)e * OC * C, C,
                               0.0f, out + (size_t)offsets[e] * OC, OC);
    }
}

void moe_grouped_backward(float *din, float *dW, const float *dout, const float *in, const float *W,
                          const int32_t *offsets, int E, int C, int OC, unsigned flags)
{
#pragma omp parallel for schedule(dynamic, 1) if (!omp_in_parallel())
    for (int e = 0; e < E; e++) {
        int n = offsets[e + 1] - offsets[e];
        const float *dy = dout + (size_t)offsets[e] * OC, *x = in + (size_t)offsets[e] * C;
        if (n > 0 && din)
            zt_gemm_f32_serial(false, false, n, C, OC, 1.0f, dy, OC, W + (size_t)e * OC * C, C,
                               flags & ZT_MM_DINP_ADD ? 1.0f : 0.0f, din + (size_t)offsets[e] * C, C);
        float *dWe = dW ? dW + (size_t)e * OC * C : NULL;
        if (n > 0 && dWe)
            zt_gemm_f32_serial(true, false, OC, C, n, 1.0f, dy, OC, x, C, flags & ZT_MM_DWEIGHT_SET ? 0.0f : 1.0f, dWe, C);
        else if (dWe && (flags & ZT_MM_DWEIGHT_SET)) /* assigned, no rows: its gradient is 0 */
            memset(dWe, 0, (size_t)OC * C * sizeof(float));
    }
}
