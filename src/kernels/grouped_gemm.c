/* grouped_gemm.c - the experts' Linears as one grouped product over variable row counts (see
 * kernels.h): rows [offsets[e], offsets[e+1]) of the permuted input go through expert e's weight,
 * the e-th (OC,C) block of a stacked (E*OC, C) tensor (torchtitan's GroupedExperts, Megatron's
 * grouped GEMM). Under fp32 compute the groups run side by side on the OpenMP threads, whole
 * experts a thread, taken in turn (dynamic: a thread the machine slows takes fewer), each group's
 * products on its thread alone (gemm.h's zt_gemm_f32_serial_rows) rather than each product threaded: an
 * expert's ~N·k/E rows are too few for two threads to share one product well (bench/RESULTS.md,
 * "Mixture of experts: the experts side by side"). The products are matmul.c's (forward NT;
 * backward dinp NN, dweight TN, += as the flags say); their row counts, which change every call, are
 * given at run time (one primitive for every count: no padding rows, llama_moe.h's row tile 1 in
 * fp32), the weight gradient's whole tiles of 64 rows through a fixed-shape product (dweight_rows).
 * Under bf16/fp16 compute (kind) each group is a matmul_forward_lp / matmul_backward_lp on the
 * rounded input and the weight's compute copy (matmul_lp.c: oneDNN's bf16 products, or the operands
 * widened to fp32 where the CPU has no bf16 dot product; fp32 accumulation), in expert order, each threaded by the library; the output
 * gradient is rounded once for all groups (elementwise: the bits of rounding each group's rows).
 * An expert with no rows is skipped (its weight gradient is left as it is, or zeroed when the
 * flags say the gradient is assigned: ZT_MM_DWEIGHT_SET). The bits of a group depend only on its
 * rows, its weight, the kind and the backend: not on the thread count, nor on which thread ran it.
 */
#include "kernels/gemm.h"
#include "kernels/kernels.h"

#include <omp.h>
#include <string.h>

/* dW (OC,C) = dyᵀ x over n rows (+ beta dW): the whole tiles of rows through a fixed-shape product
 * (oneDNN's brgemm: ~15% faster than the runtime-K kernel at (1024, 768)), the rest (< FIXED_ROWS)
 * through the runtime-K one added to it; no zero rows computed. The split depends on n only. */
enum { FIXED_ROWS = 64 };
static void dweight_rows(float *dW, const float *dy, const float *x, int n, int C, int OC, float beta)
{
    int whole = n / FIXED_ROWS * FIXED_ROWS, rest = n - whole;
    if (whole)
        zt_gemm_f32_serial(true, false, OC, C, whole, 1.0f, dy, OC, x, C, beta, dW, C);
    if (rest)
        zt_gemm_f32_serial_rows(ZT_GEMM_RUNTIME_K, true, false, OC, C, rest, 1.0f, dy + (size_t)whole * OC, OC,
                                x + (size_t)whole * C, C, whole ? 1.0f : beta, dW, C);
}

void moe_grouped_forward(float *out, const void *in, const void *W, const int32_t *offsets, int E, int C, int OC,
                         int kind)
{
    if (!kind) {
        const float *x = in, *w = W;
#pragma omp parallel for schedule(dynamic, 1) if (!omp_in_parallel())
        for (int e = 0; e < E; e++) {
            int n = offsets[e + 1] - offsets[e];
            if (n > 0)
                zt_gemm_f32_serial_rows(ZT_GEMM_RUNTIME_M, false, true, n, OC, C, 1.0f, x + (size_t)offsets[e] * C, C,
                                        w + (size_t)e * OC * C, C, 0.0f, out + (size_t)offsets[e] * OC, OC);
        }
        return;
    }
    size_t es = zt_lp_elem_bytes(kind);
    for (int e = 0; e < E; e++) {
        int n = offsets[e + 1] - offsets[e];
        if (n <= 0) continue;
        const char *x = (const char *)in + (size_t)offsets[e] * C * es, *w = (const char *)W + (size_t)e * OC * C * es;
        /* the input is the rounded operand already (inp NULL) */
        matmul_forward_lp(out + (size_t)offsets[e] * OC, (void *)x, NULL, w, NULL, n, C, OC, (zt_lp_kind)kind);
    }
}

void moe_grouped_backward(float *din, float *dW, const float *dout, const void *in, const void *W,
                          const int32_t *offsets, int E, int C, int OC, unsigned flags, int kind, void *staging)
{
    if (!kind) {
        const float *xs = in, *ws = W;
#pragma omp parallel for schedule(dynamic, 1) if (!omp_in_parallel())
        for (int e = 0; e < E; e++) {
            int n = offsets[e + 1] - offsets[e];
            const float *dy = dout + (size_t)offsets[e] * OC, *x = xs + (size_t)offsets[e] * C;
            if (n > 0 && din)
                zt_gemm_f32_serial_rows(ZT_GEMM_RUNTIME_M, false, false, n, C, OC, 1.0f, dy, OC, ws + (size_t)e * OC * C,
                                        C, flags & ZT_MM_DINP_ADD ? 1.0f : 0.0f, din + (size_t)offsets[e] * C, C);
            float *dWe = dW ? dW + (size_t)e * OC * C : NULL;
            if (n > 0 && dWe)
                dweight_rows(dWe, dy, x, n, C, OC, flags & ZT_MM_DWEIGHT_SET ? 0.0f : 1.0f);
            else if (dWe && (flags & ZT_MM_DWEIGHT_SET)) /* assigned, no rows: its gradient is 0 */
                memset(dWe, 0, (size_t)OC * C * sizeof(float));
        }
        return;
    }
    size_t es = zt_lp_elem_bytes(kind);
    if (dout) /* rnd(dout) of every group's rows, once (dout NULL: staging holds it already) */
        zt_round_to_lp((zt_lp_kind)kind, (char *)staging + (size_t)offsets[0] * OC * es,
                       dout + (size_t)offsets[0] * OC, (size_t)(offsets[E] - offsets[0]) * OC);
    for (int e = 0; e < E; e++) {
        int n = offsets[e + 1] - offsets[e];
        float *di = din ? din + (size_t)offsets[e] * C : NULL, *dw = dW ? dW + (size_t)e * OC * C : NULL;
        if (dw && (flags & ZT_MM_DWEIGHT_SET)) /* assigned: the low-precision product adds into 0 */
            memset(dw, 0, (size_t)OC * C * sizeof(float));
        if (n <= 0) continue;
        const char *x = (const char *)in + (size_t)offsets[e] * C * es, *w = (const char *)W + (size_t)e * OC * C * es;
        matmul_backward_lp(di, dw, NULL, NULL, x, w, n, C, OC, flags & ZT_MM_DINP_ADD, (zt_lp_kind)kind,
                           (char *)staging + (size_t)offsets[e] * OC * es);
    }
}
