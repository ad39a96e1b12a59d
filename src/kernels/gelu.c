/* gelu.c - GELU, tanh approximation: gelu_forward / gelu_backward (see kernels.h).
 *
 *   gelu(x) = 0.5 x (1 + tanh(u)),  u = sqrt(2/pi) (x + 0.044715 x^3)
 *
 * computed in the equivalent sigmoid form s = 0.5 (1 + tanh(u)) = 1 / (1 + exp(-2u)), which has
 * no cancellation (1 + tanh(u) for u << 0 would lose every digit), and with a = exp(-2|u|) <= 1
 * so that nothing overflows:
 *
 *   s = 1 / (1 + a) for u >= 0,  a / (1 + a) for u < 0;   s (1 - s) = a / (1 + a)^2
 *   gelu(x)  = x s
 *   gelu'(x) = s + 2 x s (1 - s) du/dx,   du/dx = sqrt(2/pi) (1 + 3 * 0.044715 x^2)
 *
 * s and gelu' are computed from x clamped to [-20, 20], where a = e^-602 = 0 in float: s and
 * gelu' are then exactly 1 or 0 as the true values are in float, gelu(x) = x or -0, and x^3 can
 * not overflow. NaN propagates. Elementwise, so the bits do not depend on the thread count.
 * Error: a few ulp (exp <= 2 ulp, then 3-4 roundings). gelu_forward_to writes the result in a
 * Linear's operand dtype, rounded chunk by chunk from the stack (gelu_forward's bits then
 * zt_round_to_lp's); gelu_backward_to likewise writes d(input) as the next Linear's (rounded)
 * output gradient and sums that Linear's bias gradient in the same pass (matmul_dbias_rows: its
 * column blocks, the bits of matmul_dbias).
 */
#include "kernels/kernels.h"
#include "kernels/vecmath.h"

#define GELU_K 0.7978845608028654f /* sqrt(2/pi) */
#define GELU_A 0.044715f
#define GELU_SERIAL_MAX 4096

/* x clamped to [-20, 20] (NaN stays NaN), s, and s (1 - s) when wanted */
static inline zt_vf gelu_s(zt_vf x, zt_vf *xc_out, zt_vf *s1s_out)
{
    zt_vf xc = zt_vmax(zt_vset1(-20.0f), zt_vmin(zt_vset1(20.0f), x));
    zt_vf u = zt_vmul(zt_vmul(zt_vset1(GELU_K), xc),
                      zt_vfmadd(zt_vset1(GELU_A), zt_vmul(xc, xc), zt_vset1(1.0f)));
    zt_vf a = zt_vexp(zt_vmul(zt_vset1(-2.0f), zt_vabs(u)));
    zt_vf r = zt_vdiv(zt_vset1(1.0f), zt_vadd(zt_vset1(1.0f), a));
    zt_vf ar = zt_vmul(a, r);
    if (xc_out != NULL) {
        *xc_out = xc;
        *s1s_out = zt_vmul(ar, r);
    }
    return zt_vselect_neg(u, ar, r);
}

static inline zt_vf gelu_fwd_v(zt_vf x) { return zt_vmul(x, gelu_s(x, NULL, NULL)); }

static inline zt_vf gelu_bwd_v(zt_vf x, zt_vf d)
{
    zt_vf xc, s1s;
    zt_vf s = gelu_s(x, &xc, &s1s);
    zt_vf dudx = zt_vmul(zt_vset1(GELU_K),
                         zt_vfmadd(zt_vset1(3.0f * GELU_A), zt_vmul(xc, xc), zt_vset1(1.0f)));
    zt_vf g = zt_vfmadd(zt_vmul(zt_vadd(xc, xc), s1s), dudx, s);
    return zt_vmul(g, d);
}

/* out[i0, i1) = gelu(inp) */
static inline void gelu_range(float *out, const float *inp, size_t i0, size_t i1)
{
    size_t i = i0;
    for (; i + ZT_VL <= i1; i += ZT_VL)
        zt_vstore(out + i, gelu_fwd_v(zt_vload(inp + i)));
    if (i < i1) {
        int n = (int)(i1 - i);
        zt_vstoren(out + i, gelu_fwd_v(zt_vloadn(inp + i, n, 0.0f)), n);
    }
}

void gelu_forward(float *out, const float *inp, size_t N)
{
    gelu_forward_to(out, 0, inp, N);
}

#define LP_CHUNK 1024 /* floats per chunk rounded from the stack */

void gelu_forward_to(void *out, int kind, const float *inp, size_t N)
{
#pragma omp parallel if (N > GELU_SERIAL_MAX)
    {
        size_t i0, i1;
        zt_split_range(N, 64, zt_thread_num(), zt_num_threads(), &i0, &i1);
        if (!kind) {
            gelu_range(out, inp, i0, i1);
        } else {
            float buf[LP_CHUNK];
            size_t esize = zt_lp_elem_bytes(kind);
            for (size_t c = i0; c < i1; c += LP_CHUNK) {
                size_t e = c + LP_CHUNK < i1 ? c + LP_CHUNK : i1;
                gelu_range(buf, inp + c, 0, e - c);
                zt_round_to_lp_serial((zt_lp_kind)kind, (char *)out + c * esize, buf, e - c);
            }
        }
    }
}

/* dinp[0, n) = gelu'(inp) * dout */
static inline void gelu_back_range(float *dinp, const float *inp, const float *dout, size_t n)
{
    size_t i = 0;
    for (; i + ZT_VL <= n; i += ZT_VL)
        zt_vstore(dinp + i, gelu_bwd_v(zt_vload(inp + i), zt_vload(dout + i)));
    if (i < n) {
        int k = (int)(n - i);
        zt_vstoren(dinp + i, gelu_bwd_v(zt_vloadn(inp + i, k, 0.0f), zt_vloadn(dout + i, k, 0.0f)), k);
    }
}

/* dinp (n) in the dtype kind, split statically over threads (elementwise: any split, the same bits) */
static void gelu_backward_flat(void *dinp, int kind, const float *inp, const float *dout, size_t n)
{
#pragma omp parallel if (n > GELU_SERIAL_MAX)
    {
        size_t i0, i1;
        zt_split_range(n, 64, zt_thread_num(), zt_num_threads(), &i0, &i1);
        if (!kind) {
            gelu_back_range((float *)dinp + i0, inp + i0, dout + i0, i1 - i0);
        } else {
            float buf[LP_CHUNK];
            size_t esize = zt_lp_elem_bytes(kind);
            for (size_t c = i0; c < i1; c += LP_CHUNK) {
                size_t e = c + LP_CHUNK < i1 ? c + LP_CHUNK : i1;
                gelu_back_range(buf, inp + c, dout + c, e - c);
                zt_round_to_lp_serial((zt_lp_kind)kind, (char *)dinp + c * esize, buf, e - c);
            }
        }
    }
}

void gelu_backward(float *dinp, const float *inp, const float *dout, size_t N)
{
    gelu_backward_flat(dinp, 0, inp, dout, N);
}

typedef struct {
    const float *inp, *dout;
} gelu_bwd_args;

/* matmul_dbias_rows' producer: gelu_backward's values at [off, off+n) into buf */
static const float *gelu_bwd_row(float *buf, const void *ctx, size_t off, int n)
{
    const gelu_bwd_args *g = ctx;
    gelu_back_range(buf, g->inp + off, g->dout + off, (size_t)n);
    return buf;
}

void gelu_backward_to(void *dinp, int kind, float *dbias, const float *inp, const float *dout, int N, int OC)
{
    if (dbias == NULL) {
        gelu_backward_flat(dinp, kind, inp, dout, (size_t)N * OC);
        return;
    }
    gelu_bwd_args g = {inp, dout};
    matmul_dbias_rows(dbias, dinp, kind, gelu_bwd_row, &g, inp, dout, N, OC);
}
