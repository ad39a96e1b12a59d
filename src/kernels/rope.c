/* rope.c - rotary position embedding (Su et al., RoFormer), as Llama applies it to the query and
 * key heads: rope_inv_freq (with Llama 3's frequency scaling), rope_forward / rope_backward (see
 * kernels.h).
 *
 * Layout: transformers' rotate_half convention. A head vector x (hs, hs even) is cut into halves
 * x1 = x[0, hs/2), x2 = x[hs/2, hs); at position t, for i < hs/2 with angle a = t·inv_freq[i]:
 *   forward   y1 = x1·cos a - x2·sin a,  y2 = x2·cos a + x1·sin a
 *   backward  the transposed rotation: dx1 = dy1·cos a + dy2·sin a,  dx2 = dy2·cos a - dy1·sin a
 * Both run in place. The angle is formed as transformers does in fp32 (float(t)·inv_freq[i]
 * rounded to fp32), its cosine and sine in double rounded to fp32 (torch's fp32 cos/sin are within
 * an ulp of that). Per position t the hs/2 cosines and sines are computed once and applied to every
 * head of its B rows (of q and k together in the _qk forms); positions are split statically over
 * threads, and each element's arithmetic is the same whichever thread runs it (bits independent
 * of the thread count).
 * Packed documents (pos, zt_batch.positions): token (b,t) is rotated by the angle of its own
 * position pos[b,t]; the rows are then split over threads, each row's angles computed from its
 * position as above (so a position's angles, and each rotated element, have the same bits as in
 * an unpacked row).
 *
 * inv_freq[i] = theta^(-2i/hs), in double rounded to fp32. Llama 3's scaling (transformers'
 * _compute_llama3_parameters), with wavelen = 2π/inv_freq, lo = old_ctx/low_freq_factor, hi =
 * old_ctx/high_freq_factor: wavelen < hi keeps inv_freq; wavelen > lo divides it by factor; in
 * between it blends, s = (old_ctx/wavelen - low_freq_factor)/(high_freq_factor - low_freq_factor),
 * inv = (1-s)·inv/factor + s·inv.
 */
#include "kernels/kernels.h"

#include <math.h>

void rope_inv_freq(float *inv_freq, int hs, double theta, double factor, double low_freq_factor,
                   double high_freq_factor, int original_max_pos)
{
    for (int i = 0; i < hs / 2; i++) {
        double inv = (double)(float)(1.0 / pow(theta, (double)(2 * i) / (double)hs));
        if (factor > 0) {
            double old_ctx = original_max_pos, wavelen = 2.0 * M_PI / inv;
            double lo_wavelen = old_ctx / low_freq_factor, hi_wavelen = old_ctx / high_freq_factor;
            if (wavelen > lo_wavelen) {
                inv = inv / factor;
            } else if (!(wavelen < hi_wavelen)) {
                double s = (old_ctx / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor);
                inv = (1.0 - s) * inv / factor + s * inv;
            }
        }
        inv_freq[i] = (float)inv;
    }
}

/* the hs/2 cosines and sign·sines of position t */
static void rope_angles(float *c, float *s, const float *inv_freq, int t, int half, float sign)
{
    for (int i = 0; i < half; i++) {
        float a = (float)t * inv_freq[i];
        c[i] = (float)cos((double)a);
        s[i] = sign * (float)sin((double)a);
    }
}

/* rotates the nh heads (stride hs) of one row by the angles c, s */
static void rope_row(float *x, const float *c, const float *s, int nh, int hs)
{
    int half = hs / 2;
    for (int h = 0; h < nh; h++) {
        float *x1 = x + (size_t)h * hs, *x2 = x1 + half;
        for (int i = 0; i < half; i++) {
            float a = x1[i], b = x2[i];
            x1[i] = a * c[i] - b * s[i];
            x2[i] = b * c[i] + a * s[i];
        }
    }
}

/* x (B,T,nx,hs) and y (B,T,ny,hs) (or NULL) rotated in place by sign·angle: positions split
 * statically over threads, each position's angles computed once for its B rows of both; with pos,
 * the B·T rows split, each rotated by its position's angles */
static void rope_apply(float *x, int nx, float *y, int ny, const float *inv_freq, int B, int T, int hs,
                       float sign, const int32_t *pos)
{
    int half = hs / 2;
    if (pos) {
#pragma omp parallel for schedule(static)
        for (int bt = 0; bt < B * T; bt++) {
            float c[half], s[half];
            rope_angles(c, s, inv_freq, pos[bt], half, sign);
            rope_row(x + (size_t)bt * nx * hs, c, s, nx, hs);
            if (y) rope_row(y + (size_t)bt * ny * hs, c, s, ny, hs);
        }
        return;
    }
#pragma omp parallel for schedule(static)
    for (int t = 0; t < T; t++) {
        float c[half], s[half];
        rope_angles(c, s, inv_freq, t, half, sign);
        for (int b = 0; b < B; b++) {
            size_t row = (size_t)b * T + t;
            rope_row(x + row * nx * hs, c, s, nx, hs);
            if (y) rope_row(y + row * ny * hs, c, s, ny, hs);
        }
    }
}

void rope_forward(float *x, const float *inv_freq, int B, int T, int nh, int hs, const int32_t *pos)
{
    rope_apply(x, nh, NULL, 0, inv_freq, B, T, hs, 1.0f, pos);
}

void rope_backward(float *dx, const float *inv_freq, int B, int T, int nh, int hs, const int32_t *pos)
{
    rope_apply(dx, nh, NULL, 0, inv_freq, B, T, hs, -1.0f, pos);
}

void rope_forward_qk(float *q, float *k, const float *inv_freq, int B, int T, int NH, int NKV, int hs,
                     const int32_t *pos)
{
    rope_apply(q, NH, k, NKV, inv_freq, B, T, hs, 1.0f, pos);
}

void rope_backward_qk(float *dq, float *dk, const float *inv_freq, int B, int T, int NH, int NKV, int hs,
                      const int32_t *pos)
{
    rope_apply(dq, NH, dk, NKV, inv_freq, B, T, hs, -1.0f, pos);
}
