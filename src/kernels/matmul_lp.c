/* matmul_lp.c - the Linear layer in low precision (kernels.h, matmul_lp section): the same three
 * products as matmul.c with the operands rounded to bf16 or fp16 and fp32 accumulation.
 *
 *   forward   out = rnd(inp) @ W^T + bias                  staging: rnd(inp) (N,C)
 *   backward  dinp (+)= rnd(dout) @ W                      staging: rnd(dout) (N,OC) | rnd(inp) (N,C)
 *             dW += rnd(dout)^T @ rnd(inp)   (fp32 accumulation into the fp32 gradient)
 *             dbias += column sums of dout (fp32, matmul_dbias)
 * bf16: W is the bf16 compute copy of the parameter, the products oneDNN's bf16 matmul
 * (zt_gemm_bf16). fp16: W is an fp32 array of fp16 values (the compute copy), the products fp32
 * GEMMs (zt_gemm_f32) on fp16-rounded operands: the numbers of fp16 storage with fp32
 * accumulation, the speed of fp32. Rounding is elementwise, so the bits follow the GEMM's rule.
 */
#include "kernels/gemm.h"
#include "kernels/kernels.h"

/* bytes per element of a rounded operand */
static size_t lp_size(zt_lp_kind kind) { return kind == ZT_LP_BF16 ? 2 : 4; }

size_t matmul_lp_staging_bytes(zt_lp_kind kind, int N, int C, int OC)
{
    return lp_size(kind) * (size_t)N * ((size_t)C + (size_t)OC) + 128;
}

/* rnd(src) (n) into dst */
static void *round_into(zt_lp_kind kind, void *dst, const float *src, size_t n)
{
    zt_round_to_lp(kind, dst, src, n);
    return dst;
}

/* the staging right after n rounded elements at p, 64-byte aligned */
static void *after(void *p, size_t n, zt_lp_kind kind)
{
    return (char *)p + ((n * lp_size(kind) + 63) & ~(size_t)63);
}

static void product(zt_lp_kind kind, bool ta, bool tb, int M, int N, int K, const void *A, int lda,
                    const void *B, int ldb, float beta, float *C, int ldc, const float *bias)
{
    if (kind == ZT_LP_BF16)
        zt_gemm_bf16(ta, tb, M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc, bias);
    else
        zt_gemm_f32_bias(ta, tb, M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc, bias);
}

void matmul_forward_lp(float *out, const float *inp, const void *weight, const float *bias, int N,
                       int C, int OC, zt_lp_kind kind, void *staging)
{
    void *a = round_into(kind, staging, inp, (size_t)N * C);
    product(kind, false, true, N, OC, C, a, C, weight, C, 0.0f, out, OC, bias);
}

void matmul_backward_lp(float *dinp, float *dweight, float *dbias, const float *dout,
                        const float *inp, const void *weight, int N, int C, int OC,
                        bool accumulate_dinp, zt_lp_kind kind, void *staging)
{
    void *d = round_into(kind, staging, dout, (size_t)N * OC);
    if (dinp != NULL)
        product(kind, false, false, N, C, OC, d, OC, weight, C, accumulate_dinp ? 1.0f : 0.0f,
                dinp, C, NULL);
    if (dweight != NULL) {
        void *a = round_into(kind, after(d, (size_t)N * OC, kind), inp, (size_t)N * C);
        product(kind, true, false, OC, C, N, d, OC, a, C, 1.0f, dweight, C, NULL);
    }
    if (dbias != NULL)
        matmul_dbias(dbias, dout, N, OC);
}
