/* quant_nf4.c - 4-bit NormalFloat (NF4) with double quantization, as QLoRA (Dettmers et al. 2023)
 * and bitsandbytes lay it out (kernels.h, quant section): quantize a frozen weight once, dequantize
 * it into fp32 or bf16 for the products.
 *
 * A tensor of n elements (n a multiple of 64, taken flat in row-major order) is cut into blocks of
 * ZT_NF4_BLOCK = 64 elements. Block b's absmax a_b = max |w| over it; each element is the index of
 * the nearest of the 16 NF4 code values to w / a_b (zt_nf4_code), two indices a byte, element 2j
 * in the high nibble and element 2j+1 in the low one (bitsandbytes' packing). Double quantization:
 * the absmaxes less their mean m are quantized again, blockwise over ZT_NF4_BLOCK2 = 256 absmaxes,
 * each such block with its fp32 absmax s_g, to the index of the nearest value of bitsandbytes'
 * signed 8-bit dynamic map (zt_dynamic_code, create_dynamic_map(signed=True)). Dequantized:
 *
 *   a'_b = dyn[qa_b] · s_{b/256} + m        w' = nf4[code] · a'_b
 *
 * Bytes of the quantized form (zt_nf4_bytes): n/2 codes, then n/64 qa bytes, then (4-byte aligned)
 * ceil(n/64/256) fp32 s_g, then the fp32 m. Every loop is over blocks with a static OpenMP
 * partition and each output is a function of its own block: the bits do not depend on threads.
 * The bf16 form is the fp32 form rounded to nearest-even (the 16 products of a block rounded once).
 */
#include "kernels/kernels.h"

#include <math.h>
#include <string.h>
#ifdef __AVX2__
#include <immintrin.h>
#endif

/* the published table (bitsandbytes' get_4bit_type("nf4")); tests/test_quant.c recomputes it */
static const float NF4[16] = {-1.0f,
                              -0.6961928009986877f,
                              -0.5250730514526367f,
                              -0.39491748809814453f,
                              -0.28444138169288635f,
                              -0.18477343022823334f,
                              -0.09105003625154495f,
                              0.0f,
                              0.07958029955625534f,
                              0.16093020141124725f,
                              0.24611230194568634f,
                              0.33791524171829224f,
                              0.44070982933044434f,
                              0.5626170039176941f,
                              0.7229568362236023f,
                              1.0f};

void zt_nf4_code(float code[16]) { memcpy(code, NF4, sizeof NF4); }

/* bitsandbytes' create_dynamic_map(signed=True, max_exponent_bits=7, total_bits=8) in float32 as
 * torch computes it: for exponent i in 0..6, 2^i fraction values (the midpoints of linspace(0.1, 1,
 * 2^i + 1)) times 10^(i-6), both signs, then 0 and 1, sorted. */
void zt_dynamic_code(float code[256]) {
    int n = 0;
    for (int i = 0; i < 7; i++) {
        int items = (1 << i) + 1;
        float step = (1.0f - 0.1f) / (float)(items - 1), scale = (float)pow(10.0, i - 6);
        for (int k = 0; k + 1 < items; k++) {
            /* torch.linspace: start + step * k for the first half, end - step * (steps - 1 - k) after */
            float lo = k < items / 2 ? 0.1f + step * (float)k : 1.0f - step * (float)(items - 1 - k);
            float hi = k + 1 < items / 2 ? 0.1f + step * (float)(k + 1) : 1.0f - step * (float)(items - 2 - k);
            float mean = (lo + hi) / 2.0f;
            code[n++] = scale * mean;
            code[n++] = -(scale * mean);
        }
    }
    code[n++] = 0.0f;
    code[n++] = 1.0f;
    for (int i = 1; i < n; i++) /* insertion sort: 256 values */
        for (int j = i; j > 0 && code[j - 1] > code[j]; j--) {
            float t = code[j];
            code[j] = code[j - 1];
            code[j - 1] = t;
        }
}

size_t zt_nf4_bytes(int64_t n) {
    size_t nb = (size_t)n / ZT_NF4_BLOCK, ng = (nb + ZT_NF4_BLOCK2 - 1) / ZT_NF4_BLOCK2;
    size_t head = ((size_t)n / 2 + nb + 3) & ~(size_t)3;
    return head + (ng + 1) * sizeof(float);
}

/* where the parts of the quantized form start */
typedef struct nf4_parts {
    uint8_t *codes, *qa;
    float *s, *mean;
    size_t nb, ng;
} nf4_parts;

static nf4_parts parts_of(const uint8_t *q, int64_t n) {
    nf4_parts p;
    p.nb = (size_t)n / ZT_NF4_BLOCK;
    p.ng = (p.nb + ZT_NF4_BLOCK2 - 1) / ZT_NF4_BLOCK2;
    p.codes = (uint8_t *)q;
    p.qa = p.codes + n / 2;
    p.s = (float *)(void *)(p.codes + (((size_t)n / 2 + p.nb + 3) & ~(size_t)3));
    p.mean = p.s + p.ng;
    return p;
}

static float block_absmax(const float *w) {
    float a = 0.0f;
    for (int i = 0; i < ZT_NF4_BLOCK; i++) a = fmaxf(a, fabsf(w[i]));
    return a;
}

/* index of the value of code[0..n) (ascending) nearest x; ties to the lower */
static int nearest(const float *code, int n, float x) {
    int lo = 0, hi = n - 1;
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (code[mid] <= x) lo = mid;
        else hi = mid;
    }
    return fabsf(x - code[lo]) <= fabsf(code[hi] - x) ? lo : hi;
}

/* the NF4 index of x (in [-1, 1]): how many midpoints between neighbouring values lie below it, i.e.
 * the nearest value, a tie going to the lower one (branch-free: the compiler vectorizes the count) */
static int nf4_index(const float *mid, float x) {
    int k = 0;
    for (int j = 0; j < 15; j++) k += x > mid[j];
    return k;
}

void zt_nf4_quantize(uint8_t *q, const float *w, int64_t n) {
    nf4_parts p = parts_of(q, n);
    float dyn[256], mid[15];
    zt_dynamic_code(dyn);
    for (int j = 0; j < 15; j++) mid[j] = (NF4[j] + NF4[j + 1]) / 2.0f;
    double sum = 0.0; /* the mean of the absmaxes, in one fixed order */
    for (size_t b = 0; b < p.nb; b++) sum += block_absmax(w + b * ZT_NF4_BLOCK);
    float mean = p.nb ? (float)(sum / (double)p.nb) : 0.0f;
    *p.mean = mean;
#pragma omp parallel for schedule(static)
    for (size_t g = 0; g < p.ng; g++) {
        size_t b0 = g * ZT_NF4_BLOCK2, b1 = b0 + ZT_NF4_BLOCK2 < p.nb ? b0 + ZT_NF4_BLOCK2 : p.nb;
        float centered[ZT_NF4_BLOCK2], s = 0.0f;
        for (size_t b = b0; b < b1; b++) {
            const float *wb = w + b * ZT_NF4_BLOCK;
            float a = block_absmax(wb), inv = a > 0.0f ? 1.0f / a : 0.0f;
            uint8_t *cb = p.codes + b * ZT_NF4_BLOCK / 2;
            for (int j = 0; j < ZT_NF4_BLOCK / 2; j++)
                cb[j] = (uint8_t)(nf4_index(mid, wb[2 * j] * inv) << 4 | nf4_index(mid, wb[2 * j + 1] * inv));
            centered[b - b0] = a - mean;
            s = fmaxf(s, fabsf(a - mean));
        }
        p.s[g] = s;
        float inv = s > 0.0f ? 1.0f / s : 0.0f;
        for (size_t b = b0; b < b1; b++) p.qa[b] = (uint8_t)nearest(dyn, 256, centered[b - b0] * inv);
    }
}

/* a'_b = dyn[qa_b] * s_{b/256} + m */
static float dequantized_absmax(const nf4_parts *p, const float *dyn, size_t b) {
    return dyn[p->qa[b]] * p->s[b / ZT_NF4_BLOCK2] + *p->mean;
}

void zt_nf4_absmax(float *absmax, const uint8_t *q, int64_t n) {
    nf4_parts p = parts_of(q, n);
    float dyn[256];
    zt_dynamic_code(dyn);
    for (size_t b = 0; b < p.nb; b++) absmax[b] = dequantized_absmax(&p, dyn, b);
}

/* block b's 16 values: the NF4 values times its dequantized absmax */
static void block_values(const nf4_parts *p, const float *dyn, size_t b, float t[16]) {
    float a = dequantized_absmax(p, dyn, b);
    for (int k = 0; k < 16; k++) t[k] = NF4[k] * a;
}

/* block b's 64 fp32 values */
static void block_f32(const nf4_parts *p, const float *dyn, size_t b, float *ob) {
    float t[16];
    block_values(p, dyn, b, t);
    const uint8_t *cb = p->codes + b * ZT_NF4_BLOCK / 2;
    for (int j = 0; j < ZT_NF4_BLOCK / 2; j++) {
        ob[2 * j] = t[cb[j] >> 4];
        ob[2 * j + 1] = t[cb[j] & 15];
    }
}

void zt_nf4_dequantize(float *out, const uint8_t *q, int64_t n) {
    nf4_parts p = parts_of(q, n);
    float dyn[256];
    zt_dynamic_code(dyn);
#pragma omp parallel for schedule(static)
    for (size_t b = 0; b < p.nb; b++) block_f32(&p, dyn, b, out + b * ZT_NF4_BLOCK);
}

#ifdef __AVX2__
/* One block's 64 bf16 values from its 32 code bytes and its 16 values h: the 4-bit indices pick
 * the low and the high byte of h[index] with two byte shuffles (a 16-entry table is what pshufb
 * looks up), interleaved back into 16-bit values; the same bits as the scalar loop. */
static void block_bf16_avx2(uint16_t *ob, const uint8_t *cb, const uint16_t h[16]) {
    /* the 16 values' low bytes, then their high bytes: even bytes first in each lane, then the
     * lanes' halves regrouped (qwords 0, 2, 1, 3) */
    const __m256i split = _mm256_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15, 0, 2, 4, 6, 8, 10,
                                           12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
    __m256i bytes = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(_mm256_loadu_si256((const __m256i *)h), split), 0xD8);
    __m256i tlo = _mm256_permute2x128_si256(bytes, bytes, 0x00), thi = _mm256_permute2x128_si256(bytes, bytes, 0x11);
    __m256i c = _mm256_loadu_si256((const __m256i *)cb), nib = _mm256_set1_epi8(0x0F);
    __m256i first = _mm256_and_si256(_mm256_srli_epi16(c, 4), nib), second = _mm256_and_si256(c, nib);
    /* element order: i0 holds elements 0-15 (lane 0) and 32-47 (lane 1), i1 16-31 and 48-63 */
    __m256i idx[2] = {_mm256_unpacklo_epi8(first, second), _mm256_unpackhi_epi8(first, second)};
    for (int k = 0; k < 2; k++) {
        __m256i bl = _mm256_shuffle_epi8(tlo, idx[k]), bh = _mm256_shuffle_epi8(thi, idx[k]);
        __m256i w0 = _mm256_unpacklo_epi8(bl, bh), w1 = _mm256_unpackhi_epi8(bl, bh);
        _mm256_storeu_si256((__m256i *)(ob + 16 * k), _mm256_permute2x128_si256(w0, w1, 0x20));
        _mm256_storeu_si256((__m256i *)(ob + 32 + 16 * k), _mm256_permute2x128_si256(w0, w1, 0x31));
    }
}
#endif

void zt_nf4_dequantize_bf16(uint16_t *out, const uint8_t *q, int64_t n) {
    nf4_parts p = parts_of(q, n);
    float dyn[256];
    zt_dynamic_code(dyn);
#pragma omp parallel for schedule(static)
    for (size_t b = 0; b < p.nb; b++) {
#ifdef __AVX2__
        float t[16];
        uint16_t h[16];
        block_values(&p, dyn, b, t);
        zt_f32_to_bf16_serial(h, t, 16);
        block_bf16_avx2(out + b * ZT_NF4_BLOCK, p.codes + b * ZT_NF4_BLOCK / 2, h);
#else
        float f[ZT_NF4_BLOCK]; /* the fp32 values, rounded */
        block_f32(&p, dyn, b, f);
        zt_f32_to_bf16_serial(out + b * ZT_NF4_BLOCK, f, ZT_NF4_BLOCK);
#endif
    }
}
