/* swiglu.c - the SwiGLU gate of Llama's MLP: swiglu_forward / swiglu_backward (see kernels.h).
 *
 *   forward   h = silu(g)·u,  silu(g) = g·σ(g)
 *   backward  dg = dh·u·σ(g)·(1 + g·(1 - σ(g))),  du = dh·silu(g)
 * Elementwise, split statically over threads: the bits never depend on the thread count. σ is
 * vecmath.h's zt_vsigmoid (a few ulp). swiglu_forward_to writes h in a Linear's operand dtype,
 * rounded chunk by chunk from the stack (the bits of swiglu_forward then zt_round_to_lp), and
 * swiglu_backward_to dgate and dup likewise (the gate and up Linears' rounded output gradients).
 */
#include "kernels/kernels.h"
#include "kernels/vecmath.h"

/* out[i0, i1) = silu(gate)·up */
static inline void swiglu_range(float *out, const float *gate, const float *up, size_t i0, size_t i1)
{
    size_t i = i0;
    for (; i + ZT_VL <= i1; i += ZT_VL) {
        zt_vf g = zt_vload(gate + i);
        zt_vstore(out + i, zt_vmul(zt_vmul(g, zt_vsigmoid(g)), zt_vload(up + i)));
    }
    if (i < i1) {
        int k = (int)(i1 - i);
        zt_vf g = zt_vloadn(gate + i, k, 0.0f);
        zt_vstoren(out + i, zt_vmul(zt_vmul(g, zt_vsigmoid(g)), zt_vloadn(up + i, k, 0.0f)), k);
    }
}

void swiglu_forward(float *out, const float *gate, const float *up, size_t n)
{
    swiglu_forward_to(out, 0, gate, up, n);
}

#define LP_CHUNK 1024 /* floats per chunk rounded from the stack (a multiple of ZT_VL) */

void swiglu_forward_to(void *out, int kind, const float *gate, const float *up, size_t n)
{
#pragma omp parallel
    {
        size_t i0, i1;
        zt_split_range(n, ZT_VL, zt_thread_num(), zt_num_threads(), &i0, &i1);
        if (!kind) {
            swiglu_range(out, gate, up, i0, i1);
        } else {
            float buf[LP_CHUNK];
            size_t esize = zt_lp_elem_bytes(kind);
            for (size_t c = i0; c < i1; c += LP_CHUNK) {
                size_t e = c + LP_CHUNK < i1 ? c + LP_CHUNK : i1;
                swiglu_range(buf, gate + c, up + c, 0, e - c);
                zt_round_to_lp_serial((zt_lp_kind)kind, (char *)out + c * esize, buf, e - c);
            }
        }
    }
}

/* dgate, dup [i0, i1) = (assigned) from dout, gate, up at the same indices */
static inline void swiglu_back_range(float *dgate, float *dup, const float *dout, const float *gate, const float *up,
                                     size_t i0, size_t i1)
{
    zt_vf one = zt_vset1(1.0f);
    for (size_t i = i0; i < i1; i += ZT_VL) {
        int k = i1 - i < ZT_VL ? (int)(i1 - i) : ZT_VL;
        zt_vf g = zt_vloadn(gate + i, k, 0.0f), u = zt_vloadn(up + i, k, 0.0f);
        zt_vf d = zt_vloadn(dout + i, k, 0.0f), s = zt_vsigmoid(g);
        zt_vf silu = zt_vmul(g, s);
        /* silu'(g) = s (1 + g (1 - s)) */
        zt_vf dsilu = zt_vmul(s, zt_vfmadd(g, zt_vsub(one, s), one));
        zt_vstoren(dup + i, zt_vmul(d, silu), k);
        zt_vstoren(dgate + i, zt_vmul(zt_vmul(d, u), dsilu), k);
    }
}

/* dgate, dup (n) = (assigned); dgate may be dout (in place); dup must not alias gate or up */
void swiglu_backward(float *dgate, float *dup, const float *dout, const float *gate, const float *up,
                     size_t n)
{
    swiglu_backward_to(dgate, dup, 0, dout, gate, up, n);
}

void swiglu_backward_to(void *dgate, void *dup, int kind, const float *dout, const float *gate, const float *up,
                        size_t n)
{
#pragma omp parallel
    {
        size_t i0, i1;
        zt_split_range(n, ZT_VL, zt_thread_num(), zt_num_threads(), &i0, &i1);
        if (!kind) {
            swiglu_back_range(dgate, dup, dout, gate, up, i0, i1);
        } else {
            float bg[LP_CHUNK], bu[LP_CHUNK];
            size_t esize = zt_lp_elem_bytes(kind);
            for (size_t c = i0; c < i1; c += LP_CHUNK) {
                size_t e = c + LP_CHUNK < i1 ? c + LP_CHUNK : i1;
                swiglu_back_range(bg, bu, dout + c, gate + c, up + c, 0, e - c);
                zt_round_to_lp_serial((zt_lp_kind)kind, (char *)dgate + c * esize, bg, e - c);
                zt_round_to_lp_serial((zt_lp_kind)kind, (char *)dup + c * esize, bu, e - c);
            }
        }
    }
}
