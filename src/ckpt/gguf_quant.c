/* gguf_quant.c - GGUF's tensor types, element for element as ggml's reference code writes and
 * reads them (ggml-quants.c):
 *   f32, f16 (IEEE half, nearest-even), bf16 (nearest-even);
 *   q8_0: blocks of 32: fp16 scale d = max|x| / 127, then 32 int8 round(x / d);
 *   q4_0: blocks of 32: fp16 scale d = m / -8, m the element of largest magnitude (its sign kept),
 *         then 16 bytes: element j in the low nibble and element j + 16 in the high nibble of byte j,
 *         each min(15, (int8)(x / d + 8.5)); decoded as (nibble - 8) * d.
 * The quantizers compute 1/d from the fp32 d (before its rounding to fp16) as ggml does, so a
 * block's bytes equal llama.cpp's own quantization of the same floats. */
#include "ckpt/gguf_quant.h"

#include "kernels/kernels.h"

#include <math.h>
#include <string.h>

static const struct {
    const char *name;
    zt_gguf_type type;
    int elems;
    size_t bytes;
    int ftype; /* llama_ftype: ALL_F32 0, MOSTLY_F16 1, MOSTLY_Q4_0 2, MOSTLY_Q8_0 7, MOSTLY_Q4_K_S 14,
                  MOSTLY_Q5_K_S 16, MOSTLY_Q6_K 18, MOSTLY_BF16 32 */
} TYPES[] = {
    {"f32", ZT_GGUF_F32, 1, 4, 0},          {"f16", ZT_GGUF_F16, 1, 2, 1},
    {"bf16", ZT_GGUF_BF16, 1, 2, 32},       {"q8_0", ZT_GGUF_Q8_0, ZT_GGUF_QK, 2 + ZT_GGUF_QK, 7},
    {"q4_0", ZT_GGUF_Q4_0, ZT_GGUF_QK, 2 + ZT_GGUF_QK / 2, 2},
    {"q4_k", ZT_GGUF_Q4_K, 256, 144, 14},     {"q5_k", ZT_GGUF_Q5_K, 256, 176, 16},
    {"q6_k", ZT_GGUF_Q6_K, 256, 210, 18},
};
#define N_TYPES ((int)(sizeof TYPES / sizeof *TYPES))

static int find(zt_gguf_type t) {
    for (int i = 0; i < N_TYPES; i++)
        if (TYPES[i].type == t) return i;
    return 0;
}

bool zt_gguf_type_parse(const char *name, zt_gguf_type *t) {
    for (int i = 0; i < N_TYPES; i++)
        if (!strcmp(TYPES[i].name, name)) {
            *t = TYPES[i].type;
            return true;
        }
    return false;
}

const char *zt_gguf_type_name(zt_gguf_type t) { return TYPES[find(t)].name; }
int zt_gguf_block_elems(zt_gguf_type t) { return TYPES[find(t)].elems; }
size_t zt_gguf_block_bytes(zt_gguf_type t) { return TYPES[find(t)].bytes; }
size_t zt_gguf_row_bytes(zt_gguf_type t, int64_t n) { return (size_t)(n / zt_gguf_block_elems(t)) * zt_gguf_block_bytes(t); }
int zt_gguf_file_type(zt_gguf_type t) { return TYPES[find(t)].ftype; }
bool zt_gguf_type_is_k(zt_gguf_type t) { return t == ZT_GGUF_Q4_K || t == ZT_GGUF_Q5_K || t == ZT_GGUF_Q6_K; }

static uint16_t half(float x) {
    uint16_t h;
    zt_f32_to_fp16_serial(&h, &x, 1);
    return h;
}

static float unhalf(uint16_t h) {
    float x;
    zt_fp16_to_f32_serial(&x, &h, 1);
    return x;
}

static void q8_0_block(uint8_t *b, const float *x) {
    float amax = 0;
    for (int j = 0; j < ZT_GGUF_QK; j++) amax = fmaxf(amax, fabsf(x[j]));
    float d = amax / 127.0f, id = d ? 1.0f / d : 0.0f;
    uint16_t h = half(d);
    memcpy(b, &h, 2);
    for (int j = 0; j < ZT_GGUF_QK; j++) b[2 + j] = (uint8_t)(int8_t)roundf(x[j] * id);
}

static void q4_0_block(uint8_t *b, const float *x) {
    float amax = 0, max = 0;
    for (int j = 0; j < ZT_GGUF_QK; j++)
        if (amax < fabsf(x[j])) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    float d = max / -8.0f, id = d ? 1.0f / d : 0.0f;
    uint16_t h = half(d);
    memcpy(b, &h, 2);
    for (int j = 0; j < ZT_GGUF_QK / 2; j++) {
        int8_t x0 = (int8_t)(x[j] * id + 8.5f), x1 = (int8_t)(x[ZT_GGUF_QK / 2 + j] * id + 8.5f);
        uint8_t q0 = (uint8_t)(x0 < 15 ? x0 : 15), q1 = (uint8_t)(x1 < 15 ? x1 : 15);
        b[2 + j] = (uint8_t)(q0 | (q1 << 4));
    }
}

void zt_gguf_encode(zt_gguf_type t, void *dst, const float *src, int64_t n) {
    uint8_t *b = dst;
    switch (t) {
    case ZT_GGUF_F32: memcpy(dst, src, (size_t)n * 4); break;
    case ZT_GGUF_F16: zt_f32_to_fp16_serial(dst, src, (size_t)n); break;
    case ZT_GGUF_BF16: zt_f32_to_bf16_serial(dst, src, (size_t)n); break;
    case ZT_GGUF_Q8_0:
        for (int64_t i = 0; i < n; i += ZT_GGUF_QK, b += 2 + ZT_GGUF_QK) q8_0_block(b, src + i);
        break;
    case ZT_GGUF_Q4_0:
        for (int64_t i = 0; i < n; i += ZT_GGUF_QK, b += 2 + ZT_GGUF_QK / 2) q4_0_block(b, src + i);
        break;
    case ZT_GGUF_Q4_K:
    case ZT_GGUF_Q5_K:
    case ZT_GGUF_Q6_K: zt_gguf_kquant_encode(t, b, src, n); break;
    }
}

void zt_gguf_decode(zt_gguf_type t, float *dst, const void *src, int64_t n) {
    const uint8_t *b = src;
    switch (t) {
    case ZT_GGUF_F32: memcpy(dst, src, (size_t)n * 4); break;
    case ZT_GGUF_F16: zt_fp16_to_f32_serial(dst, src, (size_t)n); break;
    case ZT_GGUF_BF16: zt_bf16_to_f32_serial(dst, src, (size_t)n); break;
    case ZT_GGUF_Q8_0:
        for (int64_t i = 0; i < n; i += ZT_GGUF_QK, b += 2 + ZT_GGUF_QK) {
            uint16_t h;
            memcpy(&h, b, 2);
            float d = unhalf(h);
            for (int j = 0; j < ZT_GGUF_QK; j++) dst[i + j] = (float)(int8_t)b[2 + j] * d;
        }
        break;
    case ZT_GGUF_Q4_0:
        for (int64_t i = 0; i < n; i += ZT_GGUF_QK, b += 2 + ZT_GGUF_QK / 2) {
            uint16_t h;
            memcpy(&h, b, 2);
            float d = unhalf(h);
            for (int j = 0; j < ZT_GGUF_QK / 2; j++) {
                dst[i + j] = (float)((b[2 + j] & 0x0f) - 8) * d;
                dst[i + ZT_GGUF_QK / 2 + j] = (float)((b[2 + j] >> 4) - 8) * d;
            }
        }
        break;
    case ZT_GGUF_Q4_K:
    case ZT_GGUF_Q5_K:
    case ZT_GGUF_Q6_K: zt_gguf_kquant_decode(t, dst, b, n); break;
    }
}
