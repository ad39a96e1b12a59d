/* encoder.c - token + position embedding: encoder_forward / encoder_backward (see kernels.h).
 *
 * wpe may be NULL (Llama: token embedding only; dwpe NULL then too).
 * Forward is a row-parallel vector add (from fp32 tables, or bf16 ones widened exactly). Backward is a scatter-add by token id, so two rows with
 * the same token write the same dwte row: threads split the channels instead of the rows, and each
 * thread walks the rows in (b, t) order over its channel slice. Every dwte/dwpe element is thus a
 * sum in (b, t) order whatever the thread count: the bits never depend on it.
 * Vocabulary-parallel (encoder_lookup_rows, encoder_add_positions, encoder_backward_rows): a part
 * holding rows [v0, v0 + vn) of the table looks up only those tokens (zeros for the rest), the
 * caller sums the parts and then adds the positions, the same add as the fused forward.
 * Positions (kernels.h): token (b,t) reads and writes wpe row pos[b,t] when pos is given (packed
 * documents), else row t. The backward's (b,t) order makes dwpe[p] the sum, in (b,t) order, of
 * the rows at position p, whichever rows those are.
 */
#include "kernels/kernels.h"
#include "kernels/vecmath.h"

#include <stdint.h>
#include <string.h>

/* the wpe row of token bt of a (B,T) batch: its document position, or t */
static inline size_t pos_row(const int32_t *pos, int bt, int T) { return pos ? (size_t)pos[bt] : (size_t)(bt % T); }

/* dst[0..n) = a + b */
static void add_row(float *dst, const float *a, const float *b, int n)
{
    int i = 0;
    for (; i + ZT_VL <= n; i += ZT_VL)
        zt_vstore(dst + i, zt_vadd(zt_vload(a + i), zt_vload(b + i)));
    if (i < n)
        zt_vstoren(dst + i, zt_vadd(zt_vloadn(a + i, n - i, 0.0f), zt_vloadn(b + i, n - i, 0.0f)),
                   n - i);
}

void encoder_forward(float *out, const int32_t *inp, const float *wte, const float *wpe, int B,
                     int T, int C, const int32_t *pos)
{
#pragma omp parallel for schedule(static)
    for (int bt = 0; bt < B * T; bt++) {
        if (wpe)
            add_row(out + (size_t)bt * C, wte + (size_t)inp[bt] * C, wpe + pos_row(pos, bt, T) * C, C);
        else
            memcpy(out + (size_t)bt * C, wte + (size_t)inp[bt] * C, (size_t)C * sizeof(float));
    }
}

void encoder_forward_bf16(float *out, const int32_t *inp, const uint16_t *wte, const uint16_t *wpe, int B,
                          int T, int C, const int32_t *pos)
{
#pragma omp parallel for schedule(static)
    for (int bt = 0; bt < B * T; bt++) {
        const uint16_t *a = wte + (size_t)inp[bt] * C, *b = wpe ? wpe + pos_row(pos, bt, T) * C : NULL;
        float *dst = out + (size_t)bt * C;
        for (int c = 0; c < C; c++) {
            uint32_t ua = (uint32_t)a[c] << 16, ub = b ? (uint32_t)b[c] << 16 : 0; /* +0: exact */
            float fa, fb;
            memcpy(&fa, &ua, sizeof fa);
            memcpy(&fb, &ub, sizeof fb);
            dst[c] = fa + fb;
        }
    }
}

void encoder_backward(float *dwte, float *dwpe, const float *dout, const int32_t *inp, int B, int T,
                      int C, const int32_t *pos)
{
    encoder_backward_rows(dwte, dwpe, dout, inp, B, T, C, 0, INT64_MAX, pos);
}

void encoder_backward_rows(float *dwte, float *dwpe, const float *dout, const int32_t *inp, int B, int T, int C,
                           int64_t v0, int64_t vn, const int32_t *pos)
{
    if (!dwte && !dwpe) return; /* both frozen */
#pragma omp parallel
    {
        size_t c0, c1;
        zt_split_range((size_t)C, ZT_VL, zt_thread_num(), zt_num_threads(), &c0, &c1);
        int n = (int)(c1 - c0);
        if (n > 0) {
            for (int bt = 0; bt < B * T; bt++) {
                const float *d = dout + (size_t)bt * C + c0;
                int64_t row = (int64_t)inp[bt] - v0;
                float *we = dwte && row >= 0 && row < vn ? dwte + (size_t)row * C + c0 : NULL;
                float *pe = dwpe ? dwpe + pos_row(pos, bt, T) * C + c0 : NULL;
                if (we) add_row(we, we, d, n);
                if (dwpe) add_row(pe, pe, d, n);
            }
        }
    }
}

void encoder_lookup_rows(float *out, const int32_t *inp, const float *wte, const uint16_t *wte16, int B, int T,
                         int C, int64_t v0, int64_t vn)
{
#pragma omp parallel for schedule(static)
    for (int bt = 0; bt < B * T; bt++) {
        float *dst = out + (size_t)bt * C;
        int64_t row = (int64_t)inp[bt] - v0;
        if (row < 0 || row >= vn) {
            memset(dst, 0, (size_t)C * sizeof *dst);
        } else if (wte) {
            memcpy(dst, wte + (size_t)row * C, (size_t)C * sizeof *dst);
        } else {
            const uint16_t *a = wte16 + (size_t)row * C;
            for (int c = 0; c < C; c++) {
                uint32_t u = (uint32_t)a[c] << 16;
                memcpy(&dst[c], &u, sizeof u);
            }
        }
    }
}

void encoder_add_positions(float *out, const float *wpe, const uint16_t *wpe16, int B, int T, int C,
                           const int32_t *pos, int ldp)
{
#pragma omp parallel for schedule(static)
    for (int bt = 0; bt < B * T; bt++) {
        float *dst = out + (size_t)bt * C;
        size_t row = pos ? (size_t)pos[(size_t)(bt / T) * ldp + bt % T] : (size_t)(bt % T);
        if (wpe) {
            add_row(dst, dst, wpe + row * C, C);
        } else {
            const uint16_t *b = wpe16 + row * C;
            for (int c = 0; c < C; c++) {
                uint32_t u = (uint32_t)b[c] << 16;
                float f;
                memcpy(&f, &u, sizeof f);
                dst[c] = dst[c] + f;
            }
        }
    }
}
