/* gelu.c - GELU, tanh approximation: gelu_forward / gelu_backward (see kernels.h).
 *
 *   gelu(x) = 0.5 x (1 + tanh(u)),  u = sqrt(2/pi) (x + 0.044715 x^3)
 *
 * computed in the equivalent sigmoid form 0.5 (1 + tanh(u)) = s = 1 / (1 + e), e = exp(-2u), which
 * has no cancellation anywhere (1 + tanh(u) near u << 0 would lose every digit):
 *
 *   gelu(x)  = x s
 *   gelu'(x) = s + x * 2 s (1 - s) * du/dx,  1 - s = e s,  du/dx = sqrt(2/pi) (1 + 3 * 0.044715 x^2)
 *
 * -2u is clamped at 80 so that e stays finite: there s < 2e-35 and gelu(x) = x s and its
 * derivative are below 1e-33 in magnitude, where the exact values are smaller still. Elementwise,
 * so the bits do not depend on the thread count. Error: a few ulp (exp <= 2 ulp, then 3-4 roundings).
 */
#include "kernels/kernels.h"
#include "kernels/vecmath.h"

#define GELU_K 0.7978845608028654f /* sqrt(2/pi) */
#define GELU_A 0.044715f
#define GELU_SERIAL_MAX 4096

/* e = exp(-2u) for a vector of x, clamped at e^80 */
static inline zt_vf gelu_e(zt_vf x)
{
    zt_vf x2 = zt_vmul(x, x);
    zt_vf u = zt_vmul(zt_vmul(zt_vset1(GELU_K), x), zt_vfmadd(zt_vset1(GELU_A), x2, zt_vset1(1.0f)));
    zt_vf m2u = zt_vmul(zt_vset1(-2.0f), u);
    return zt_vexp(zt_vmin(zt_vset1(80.0f), m2u));
}

static inline zt_vf gelu_fwd_v(zt_vf x)
{
    zt_vf s = zt_vdiv(zt_vset1(1.0f), zt_vadd(zt_vset1(1.0f), gelu_e(x)));
    return zt_vmul(x, s);
}

static inline zt_vf gelu_bwd_v(zt_vf x, zt_vf d)
{
    zt_vf e = gelu_e(x);
    zt_vf s = zt_vdiv(zt_vset1(1.0f), zt_vadd(zt_vset1(1.0f), e));
    zt_vf x2 = zt_vmul(x, x);
    zt_vf dudx = zt_vmul(zt_vset1(GELU_K), zt_vfmadd(zt_vset1(3.0f * GELU_A), x2, zt_vset1(1.0f)));
    zt_vf s1s = zt_vmul(zt_vmul(e, s), s); /* s (1 - s) */
    zt_vf g = zt_vfmadd(zt_vmul(zt_vadd(x, x), s1s), dudx, s);
    return zt_vmul(g, d);
}

void gelu_forward(float *out, const float *inp, size_t N)
{
#pragma omp parallel if (N > GELU_SERIAL_MAX)
    {
        size_t i0, i1;
        zt_split_range(N, 64, zt_thread_num(), zt_num_threads(), &i0, &i1);
        size_t i = i0;
        for (; i + ZT_VL <= i1; i += ZT_VL)
            zt_vstore(out + i, gelu_fwd_v(zt_vload(inp + i)));
        if (i < i1) {
            int n = (int)(i1 - i);
            zt_vstoren(out + i, gelu_fwd_v(zt_vloadn(inp + i, n, 0.0f)), n);
        }
    }
}

void gelu_backward(float *dinp, const float *inp, const float *dout, size_t N)
{
#pragma omp parallel if (N > GELU_SERIAL_MAX)
    {
        size_t i0, i1;
        zt_split_range(N, 64, zt_thread_num(), zt_num_threads(), &i0, &i1);
        size_t i = i0;
        for (; i + ZT_VL <= i1; i += ZT_VL)
            zt_vstore(dinp + i, gelu_bwd_v(zt_vload(inp + i), zt_vload(dout + i)));
        if (i < i1) {
            int n = (int)(i1 - i);
            zt_vstoren(dinp + i, gelu_bwd_v(zt_vloadn(inp + i, n, 0.0f), zt_vloadn(dout + i, n, 0.0f)),
                       n);
        }
    }
}
