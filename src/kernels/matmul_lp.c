/* matmul_lp.c - the Linear layer in low precision (kernels.h, matmul_lp section): the same three
 * products as matmul.c with the operands rounded to bf16 or fp16 and fp32 accumulation.
 *
 *   forward   inp_lp = rnd(inp) (the caller's buffer: the unit saves it for backward; inp NULL:
 *             inp_lp is already rnd(inp), written by the kernel that made it or an earlier call)
 *             out = inp_lp @ W^T + bias
 *   backward  dinp (+)= rnd(dout) @ W                      staging: rnd(dout) (N,OC) (dout NULL:
 *                                                          the caller's kernel wrote it there)
 *             dW += rnd(dout)^T @ inp_lp   (fp32 accumulation into the fp32 gradient; = when
 *                                          the gradient is not written yet, ZT_MM_DWEIGHT_SET)
 *             dbias += column sums of dout (fp32, matmul_dbias; with the rounding in one pass,
 *             matmul_dbias_rows, when both are wanted)
 * The input is rounded once, in forward, and backward multiplies by what forward multiplied by:
 * the product only ever reads rnd(inp), so saving it instead of inp changes no bit, halves the
 * saved bytes under bf16 and spares backward a second rounding.
 * bf16: W is the bf16 compute copy of the parameter, the products oneDNN's bf16 matmul
 * (zt_gemm_bf16). fp16: W is an fp32 array of fp16 values (the compute copy), the products fp32
 * GEMMs (zt_gemm_f32) on fp16-rounded operands: the numbers of fp16 storage with fp32
 * accumulation, the speed of fp32. Rounding is elementwise, so the bits follow the GEMM's rule.
 */
#include "kernels/gemm.h"
#include "kernels/kernels.h"

/* bytes per element of a rounded operand */
size_t matmul_lp_staging_bytes(zt_lp_kind kind, int N, int OC)
{
    return zt_lp_elem_bytes(kind) * (size_t)N * (size_t)OC;
}

size_t matmul_saved_input_floats(int kind, size_t n)
{
    size_t bytes = kind ? zt_lp_elem_bytes(kind) * n : sizeof(float) * n;
    return ((bytes + 63) & ~(size_t)63) / sizeof(float);
}

static void product(zt_lp_kind kind, bool ta, bool tb, int M, int N, int K, const void *A, int lda,
                    const void *B, int ldb, float beta, float *C, int ldc, const float *bias)
{
    if (kind == ZT_LP_BF16)
        zt_gemm_bf16(ta, tb, M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc, bias);
    else
        zt_gemm_f32_bias(ta, tb, M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc, bias);
}

void matmul_forward_lp(float *out, void *inp_lp, const float *inp, const void *weight,
                       const float *bias, int N, int C, int OC, zt_lp_kind kind)
{
    if (inp) /* NULL: inp_lp holds the rounded input already (a kernel wrote it, or an earlier call) */
        zt_round_to_lp(kind, inp_lp, inp, (size_t)N * C);
    product(kind, false, true, N, OC, C, inp_lp, C, weight, C, 0.0f, out, OC, bias);
}

void matmul_backward_lp(float *dinp, float *dweight, float *dbias, const float *dout,
                        const void *inp_lp, const void *weight, int N, int C, int OC,
                        unsigned flags, zt_lp_kind kind, void *staging)
{
    if ((dinp != NULL || dweight != NULL) && dout != NULL) {
        if (dbias != NULL) { /* rounding and the bias gradient in one pass over dout */
            matmul_dbias_rows(dbias, staging, kind, NULL, dout, NULL, NULL, N, OC);
            dbias = NULL;
        } else {
            zt_round_to_lp(kind, staging, dout, (size_t)N * OC);
        }
    }
    if (dinp != NULL)
        product(kind, false, false, N, C, OC, staging, OC, weight, C, flags & ZT_MM_DINP_ADD ? 1.0f : 0.0f,
                dinp, C, NULL);
    if (dweight != NULL)
        product(kind, true, false, OC, C, N, staging, OC, inp_lp, C, flags & ZT_MM_DWEIGHT_SET ? 0.0f : 1.0f,
                dweight, C, NULL);
    if (dbias != NULL)
        matmul_dbias(dbias, dout, N, OC);
}
