/* residual.c - the residual connection: residual_forward (see kernels.h). Its backward is the
 * identity (the caller adds the upstream gradient to both branches), so there is none here.
 *
 * A streaming vector add over a static split of the N floats: each element is one rounding, so
 * the result is the same whatever the thread count.
 */
#include "kernels/kernels.h"
#include "kernels/vecmath.h"

/* below this many floats a single thread is faster than waking the team */
#define RESIDUAL_SERIAL_MAX 16384

void residual_forward(float *out, const float *a, const float *b, size_t N)
{
#pragma omp parallel if (N > RESIDUAL_SERIAL_MAX)
    {
        size_t i0, i1;
        zt_split_range(N, 64, zt_thread_num(), zt_num_threads(), &i0, &i1);
        size_t i = i0;
        for (; i + ZT_VL <= i1; i += ZT_VL)
            zt_vstore(out + i, zt_vadd(zt_vload(a + i), zt_vload(b + i)));
        if (i < i1) {
            int n = (int)(i1 - i);
            zt_vstoren(out + i, zt_vadd(zt_vloadn(a + i, n, 0.0f), zt_vloadn(b + i, n, 0.0f)), n);
        }
    }
}
