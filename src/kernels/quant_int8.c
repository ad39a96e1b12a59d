/* quant_int8.c - int8 with one absmax per row (kernels.h, quant section), the simpler option
 * beside NF4 (quant_nf4.c) for a frozen weight stored quantized.
 *
 * A (rows, cols) matrix: row r's scale s_r = max_c |w[r,c]| / 127, each element the int8
 * round-to-nearest (ties away from zero) of w / s_r, in [-127, 127]; dequantized w' = q · s_r.
 * Bytes (zt_int8_bytes): rows·cols int8 codes, then (4-byte aligned) rows fp32 scales. Rows are
 * split over threads statically; each output is a function of its own row (the same bits for any
 * thread count). The bf16 form is the fp32 form rounded to nearest-even. */
#include "kernels/kernels.h"

#include <math.h>

size_t zt_int8_bytes(int64_t rows, int64_t cols) {
    return (((size_t)rows * (size_t)cols + 3) & ~(size_t)3) + (size_t)rows * sizeof(float);
}

static float *scales_of(const uint8_t *q, int64_t rows, int64_t cols) {
    return (float *)(void *)(q + (((size_t)rows * (size_t)cols + 3) & ~(size_t)3));
}

void zt_int8_quantize(uint8_t *q, const float *w, int64_t rows, int64_t cols) {
    float *scale = scales_of(q, rows, cols);
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        const float *wr = w + r * cols;
        float a = 0.0f;
        for (int64_t c = 0; c < cols; c++) a = fmaxf(a, fabsf(wr[c]));
        float s = a / 127.0f, inv = a > 0.0f ? 127.0f / a : 0.0f;
        scale[r] = s;
        int8_t *qr = (int8_t *)q + r * cols;
        for (int64_t c = 0; c < cols; c++) {
            float v = roundf(wr[c] * inv);
            qr[c] = (int8_t)(v > 127.0f ? 127.0f : v < -127.0f ? -127.0f : v);
        }
    }
}

void zt_int8_dequantize(float *out, const uint8_t *q, int64_t rows, int64_t cols) {
    const float *scale = scales_of(q, rows, cols);
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        const int8_t *qr = (const int8_t *)q + r * cols;
        float s = scale[r], *o = out + r * cols;
        for (int64_t c = 0; c < cols; c++) o[c] = (float)qr[c] * s;
    }
}

void zt_int8_dequantize_bf16(uint16_t *out, const uint8_t *q, int64_t rows, int64_t cols) {
    const float *scale = scales_of(q, rows, cols);
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        const int8_t *qr = (const int8_t *)q + r * cols;
        float s = scale[r], t[256];
        for (int k = 0; k < 256; k++) t[k] = (float)(int8_t)(uint8_t)k * s; /* the row's 256 values */
        uint16_t h[256];
        zt_f32_to_bf16_serial(h, t, 256);
        uint16_t *o = out + r * cols;
        for (int64_t c = 0; c < cols; c++) o[c] = h[(uint8_t)qr[c]];
    }
}
