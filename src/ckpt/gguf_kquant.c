/* gguf_kquant.c - GGUF's k-quants Q4_K, Q5_K and Q6_K (gguf_quant.h), byte for byte as llama.cpp's
 * reference quantizers write them (ggml-quants.c quantize_row_q{4,5,6}_K_ref, the code
 * llama-quantize runs without an importance matrix), and their dequantization.
 *
 * A super-block holds 256 elements of one row.
 *   Q4_K / Q5_K (144 / 176 bytes): fp16 d and dmin, 12 bytes of eight 6-bit scales and eight 6-bit
 *     mins (get_scale_min below), Q5_K's 32 bytes of fifth bits, then 128 bytes of 4-bit codes
 *     (elements j and j + 32 of each 64 in the low and high nibble of byte j). Each sub-block of
 *     32 gets a scale s and a min m by fit_scale_min (ggml's make_qkx2_quants: a weighted
 *     least-squares search over nstep candidate scales, weights av_x + |x| with av_x the sub-block's
 *     rms); the eight s and m are quantized to 6 bits against max s / 63 and max m / 63, and the
 *     codes recomputed from the rounded scales: q = round((x + dmin·m6) / (d·s6)), x' = d·s6·q - dmin·m6.
 *   Q6_K (210 bytes): 128 bytes of low nibbles, 64 of high bit pairs, sixteen int8 scales, fp16 d.
 *     Each sub-block of 16 gets a signed scale by fit_signed_scale (make_qx_quants, rmse_type 1:
 *     weights x², 19 candidate scales around -32 / max); the scales are quantized to int8 against
 *     the one of largest magnitude over -128, codes round(x / (d·s8)) in [-32, 31], stored + 32.
 * Every rounding is ggml's nearest_int (the 1.5·2^23 trick: nearest, ties to even) and every sum
 * runs in ggml's order in fp32; this file is compiled without FMA contraction (CMakeLists.txt), as
 * ggml's reference code is, so the bytes are llama.cpp's (tests/gguf_kquant.py checks them against
 * libggml-base.so). */
#include "ckpt/gguf_quant.h"

#include "kernels/kernels.h"

#include <math.h>
#include <string.h>

#define QK_K 256
#define GROUP_MAX_EPS 1e-15f

static int nearest_int(float f) {
    float v = f + 12582912.f;
    int i;
    memcpy(&i, &v, sizeof i);
    return (i & 0x007fffff) - 0x00400000;
}

static int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

static uint16_t half(float x) {
    uint16_t h;
    zt_f32_to_fp16_serial(&h, &x, 1);
    return h;
}

static float unhalf(const uint8_t *p) {
    uint16_t h;
    float x;
    memcpy(&h, p, 2);
    zt_fp16_to_f32_serial(&x, &h, 1);
    return x;
}

/* n elements x with weights w: codes L in [0, nmax] and (scale, -min) with x ~ scale·L + min, min <= 0 */
static float fit_scale_min(int n, int nmax, const float *x, const float *w, uint8_t *L, float *neg_min, uint8_t *Laux,
                           float rmin, float rdelta, int nstep) {
    float lo = x[0], hi = x[0], sum_w = w[0], sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < lo) lo = x[i];
        if (x[i] > hi) hi = x[i];
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (lo > 0) lo = 0;
    if (hi == lo) {
        memset(L, 0, (size_t)n);
        *neg_min = -lo;
        return 0.f;
    }
    float iscale = nmax / (hi - lo), scale = 1 / iscale, best = 0;
    for (int i = 0; i < n; i++) {
        L[i] = (uint8_t)clampi(nearest_int(iscale * (x[i] - lo)), 0, nmax);
        float diff = scale * L[i] + lo - x[i];
        best += w[i] * (diff * diff);
    }
    for (int is = 0; is <= nstep; is++) {
        iscale = (rmin + rdelta * is + nmax) / (hi - lo);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            int l = clampi(nearest_int(iscale * (x[i] - lo)), 0, nmax);
            Laux[i] = (uint8_t)l;
            sum_l += w[i] * l;
            sum_l2 += w[i] * l * l;
            sum_xl += w[i] * l * x[i];
        }
        float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float s = (sum_w * sum_xl - sum_x * sum_l) / D, m = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (m > 0) {
                m = 0;
                s = sum_xl / sum_l2;
            }
            float err = 0;
            for (int i = 0; i < n; i++) {
                float diff = s * Laux[i] + m - x[i];
                err += w[i] * (diff * diff);
            }
            if (err < best) {
                memcpy(L, Laux, (size_t)n);
                best = err;
                scale = s;
                lo = m;
            }
        }
    }
    *neg_min = -lo;
    return scale;
}

/* sub-block j's 6-bit scale and min from the 12 packed bytes q */
static void get_scale_min(int j, const uint8_t *q, uint8_t *s, uint8_t *m) {
    if (j < 4) {
        *s = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *s = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

/* Q4_K (bits 4) and Q5_K (bits 5): one super-block of x into b */
static void qk_block(int bits, uint8_t *b, const float *x) {
    const int nmax = (1 << bits) - 1;
    uint8_t L[QK_K], Laux[32], *scales = b + 4;
    float w[32], mins[8], sc[8], max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; j++) {
        float sum_x2 = 0;
        for (int l = 0; l < 32; l++) sum_x2 += x[32 * j + l] * x[32 * j + l];
        float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; l++) w[l] = av_x + fabsf(x[32 * j + l]);
        sc[j] = bits == 4 ? fit_scale_min(32, nmax, x + 32 * j, w, L + 32 * j, &mins[j], Laux, -1.f, 0.1f, 20)
                          : fit_scale_min(32, nmax, x + 32 * j, w, L + 32 * j, &mins[j], Laux, -0.5f, 0.1f, 15);
        if (sc[j] > max_scale) max_scale = sc[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f, inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    memset(scales, 0, 12);
    for (int j = 0; j < 8; j++) {
        uint8_t ls = (uint8_t)nearest_int(inv_scale * sc[j]), lm = (uint8_t)nearest_int(inv_min * mins[j]);
        ls = ls < 63 ? ls : 63;
        lm = lm < 63 ? lm : 63;
        if (j < 4) {
            scales[j] = ls;
            scales[j + 4] = lm;
        } else {
            scales[j + 4] = (uint8_t)((ls & 0xF) | ((lm & 0xF) << 4));
            scales[j - 4] |= (uint8_t)((ls >> 4) << 6);
            scales[j] |= (uint8_t)((lm >> 4) << 6);
        }
    }
    uint16_t d = half(max_scale / 63.f), dmin = half(max_min / 63.f);
    memcpy(b, &d, 2);
    memcpy(b + 2, &dmin, 2);
    for (int j = 0; j < 8; j++) {
        uint8_t s, m;
        get_scale_min(j, scales, &s, &m);
        float dd = unhalf(b) * s;
        if (!dd) continue;
        float dm = unhalf(b + 2) * m;
        for (int i = 0; i < 32; i++) L[32 * j + i] = (uint8_t)clampi(nearest_int((x[32 * j + i] + dm) / dd), 0, nmax);
    }
    uint8_t *qh = b + 16, *ql = b + (bits == 5 ? 48 : 16);
    if (bits == 5) memset(qh, 0, 32);
    for (int n = 0, k = 0; n < QK_K; n += 64, k++) {
        for (int j = 0; j < 32; j++) {
            int l1 = L[n + j], l2 = L[n + j + 32];
            if (l1 > 15) l1 -= 16, qh[j] |= (uint8_t)(1 << (2 * k));
            if (l2 > 15) l2 -= 16, qh[j] |= (uint8_t)(2 << (2 * k));
            ql[j] = (uint8_t)(l1 | (l2 << 4));
        }
        ql += 32;
    }
}

static void qk_decode(int bits, float *y, const uint8_t *b) {
    float d = unhalf(b), dmin = unhalf(b + 2);
    const uint8_t *scales = b + 4, *qh = b + 16, *ql = b + (bits == 5 ? 48 : 16);
    for (int n = 0, is = 0, k = 0; n < QK_K; n += 64, is += 2, k++) {
        uint8_t s, m;
        get_scale_min(is, scales, &s, &m);
        float d1 = d * s, m1 = dmin * m;
        get_scale_min(is + 1, scales, &s, &m);
        float d2 = d * s, m2 = dmin * m;
        for (int l = 0; l < 32; l++)
            *y++ = d1 * ((ql[l] & 0xF) + (bits == 5 && (qh[l] & (1 << (2 * k))) ? 16 : 0)) - m1;
        for (int l = 0; l < 32; l++)
            *y++ = d2 * ((ql[l] >> 4) + (bits == 5 && (qh[l] & (2 << (2 * k))) ? 16 : 0)) - m2;
        ql += 32;
    }
}

/* n elements x: signed codes L + nmax in [0, 2·nmax) and the scale, x ~ scale·(L - nmax) */
static float fit_signed_scale(int n, int nmax, const float *x, int8_t *L) {
    float max = 0, amax = 0;
    for (int i = 0; i < n; i++) {
        float ax = fabsf(x[i]);
        if (ax > amax) amax = ax, max = x[i];
    }
    if (amax < GROUP_MAX_EPS) {
        memset(L, 0, (size_t)n);
        return 0.f;
    }
    float iscale = -nmax / max, sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = clampi(nearest_int(iscale * x[i]), -nmax, nmax - 1);
        L[i] = (int8_t)(l + nmax);
        float w = x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    float scale = suml2 ? sumlx / suml2 : 0.0f, best = scale * sumlx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0) continue;
        iscale = -(nmax + 0.1f * is) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; i++) {
            int l = clampi(nearest_int(iscale * x[i]), -nmax, nmax - 1);
            float w = x[i] * x[i];
            sumlx += w * x[i] * l;
            suml2 += w * l * l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; i++) L[i] = (int8_t)(nmax + clampi(nearest_int(iscale * x[i]), -nmax, nmax - 1));
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

static void q6_k_block(uint8_t *b, const float *x) {
    int8_t L[QK_K], *scales = (int8_t *)(b + 192);
    float sc[16], max_scale = 0, max_abs = 0;
    for (int ib = 0; ib < 16; ib++) {
        sc[ib] = fit_signed_scale(16, 32, x + 16 * ib, L + 16 * ib);
        if (fabsf(sc[ib]) > max_abs) max_abs = fabsf(sc[ib]), max_scale = sc[ib];
    }
    if (max_abs < GROUP_MAX_EPS) {
        memset(b, 0, 210);
        return;
    }
    float iscale = -128.f / max_scale;
    uint16_t d = half(1 / iscale);
    memcpy(b + 208, &d, 2);
    for (int ib = 0; ib < 16; ib++) {
        int v = nearest_int(iscale * sc[ib]);
        scales[ib] = (int8_t)(v < 127 ? v : 127);
    }
    for (int j = 0; j < 16; j++) {
        float dd = unhalf(b + 208) * scales[j];
        if (!dd) continue;
        for (int i = 0; i < 16; i++) L[16 * j + i] = (int8_t)(clampi(nearest_int(x[16 * j + i] / dd), -32, 31) + 32);
    }
    uint8_t *ql = b, *qh = b + 128;
    for (int j = 0; j < QK_K; j += 128, ql += 64, qh += 32)
        for (int l = 0; l < 32; l++) {
            const uint8_t *u = (const uint8_t *)L + j + l;
            ql[l] = (uint8_t)((u[0] & 0xF) | ((u[64] & 0xF) << 4));
            ql[l + 32] = (uint8_t)((u[32] & 0xF) | ((u[96] & 0xF) << 4));
            qh[l] = (uint8_t)((u[0] >> 4) | ((u[32] >> 4) << 2) | ((u[64] >> 4) << 4) | ((u[96] >> 4) << 6));
        }
}

static void q6_k_decode(float *y, const uint8_t *b) {
    float d = unhalf(b + 208);
    const uint8_t *ql = b, *qh = b + 128;
    const int8_t *sc = (const int8_t *)(b + 192);
    for (int n = 0; n < QK_K; n += 128, y += 128, ql += 64, qh += 32, sc += 8)
        for (int l = 0; l < 32; l++) {
            int is = l / 16;
            int q1 = (int8_t)((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
            int q2 = (int8_t)((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
            int q3 = (int8_t)((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
            int q4 = (int8_t)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
            y[l] = d * sc[is] * q1;
            y[l + 32] = d * sc[is + 2] * q2;
            y[l + 64] = d * sc[is + 4] * q3;
            y[l + 96] = d * sc[is + 6] * q4;
        }
}

void zt_gguf_kquant_encode(zt_gguf_type t, uint8_t *dst, const float *src, int64_t n) {
    size_t bytes = zt_gguf_block_bytes(t);
    for (int64_t i = 0; i < n; i += QK_K, dst += bytes) {
        if (t == ZT_GGUF_Q6_K) q6_k_block(dst, src + i);
        else qk_block(t == ZT_GGUF_Q5_K ? 5 : 4, dst, src + i);
    }
}

void zt_gguf_kquant_decode(zt_gguf_type t, float *dst, const uint8_t *src, int64_t n) {
    size_t bytes = zt_gguf_block_bytes(t);
    for (int64_t i = 0; i < n; i += QK_K, src += bytes) {
        if (t == ZT_GGUF_Q6_K) q6_k_decode(dst + i, src);
        else qk_decode(t == ZT_GGUF_Q5_K ? 5 : 4, dst + i, src);
    }
}
