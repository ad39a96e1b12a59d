/* grouped_gemm.c - the experts' Linears as one grouped product over variable row counts (see
 * kernels.h): rows [offsets[e], offsets[e+1]) of the permuted input go through expert e's weight,
 * the e-th (OC,C) block of a stacked (E*OC, C) tensor (torchtitan's GroupedExperts, Megatron's
 * grouped GEMM). Each group is a matmul_forward / matmul_backward (gemm.h's fp32 products, threaded
 * by the library), or under bf16/fp16 compute (kind) matmul_forward_lp / matmul_backward_lp on the
 * rounded input and the weight's compute copy (matmul_lp.c: oneDNN's bf16 products, or the operands
 * widened to fp32 where the CPU has no bf16 dot product; fp32 accumulation), in expert order; an
 * expert with no rows is skipped (its weight gradient is left as it is). Under a kind the output
 * gradient is rounded once for all groups (elementwise: the bits of rounding each group's rows).
 * The bits of a group depend only on its rows, its weight, the kind and the backend.
 */
#include "kernels/kernels.h"

/* bytes of an element of an operand in the compute dtype kind: bf16 2, fp16's values and fp32 4 */
static size_t elem_bytes(int kind) { return kind == ZT_LP_BF16 ? 2 : 4; }

void moe_grouped_forward(float *out, const void *in, const void *W, const int32_t *offsets, int E, int C, int OC,
                         int kind)
{
    size_t es = elem_bytes(kind);
    for (int e = 0; e < E; e++) {
        int n = offsets[e + 1] - offsets[e];
        if (n <= 0) continue;
        float *o = out + (size_t)offsets[e] * OC;
        const char *x = (const char *)in + (size_t)offsets[e] * C * es, *w = (const char *)W + (size_t)e * OC * C * es;
        if (kind) /* the input is the rounded operand already (inp NULL) */
            matmul_forward_lp(o, (void *)x, NULL, w, NULL, n, C, OC, (zt_lp_kind)kind);
        else
            matmul_forward(o, (const float *)x, (const float *)w, NULL, n, C, OC);
    }
}

void moe_grouped_backward(float *din, float *dW, const float *dout, const void *in, const void *W,
                          const int32_t *offsets, int E, int C, int OC, unsigned flags, int kind, void *staging)
{
    size_t es = elem_bytes(kind);
    if (kind && dout) /* rnd(dout) of every group's rows, once (dout NULL: staging holds it already) */
        zt_round_to_lp((zt_lp_kind)kind, (char *)staging + (size_t)offsets[0] * OC * es,
                       dout + (size_t)offsets[0] * OC, (size_t)(offsets[E] - offsets[0]) * OC);
    for (int e = 0; e < E; e++) {
        int n = offsets[e + 1] - offsets[e];
        if (n <= 0) continue;
        const char *x = (const char *)in + (size_t)offsets[e] * C * es, *w = (const char *)W + (size_t)e * OC * C * es;
        float *di = din ? din + (size_t)offsets[e] * C : NULL, *dw = dW ? dW + (size_t)e * OC * C : NULL;
        if (kind)
            matmul_backward_lp(di, dw, NULL, NULL, x, w, n, C, OC, flags & ZT_MM_DINP_ADD, (zt_lp_kind)kind,
                               (char *)staging + (size_t)offsets[e] * OC * es);
        else
            matmul_backward(di, dw, NULL, dout + (size_t)offsets[e] * OC, (const float *)x, (const float *)w, n, C, OC,
                            flags & ZT_MM_DINP_ADD);
    }
}
