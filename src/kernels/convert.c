/* convert.c - fp32 <-> low-precision conversions for the precision modes (src/precision): fp32 to
 * bf16 bit patterns with round-to-nearest-even (AVX512_BF16's vcvtne2ps2bf16 where the build
 * has it, vecbf16.h's integer form of the same rule on 8 lanes in AVX2 builds, scalar code
 * otherwise), bf16 back to fp32 (exact), rounding fp32 values
 * in place to the nearest bf16 or fp16 value (fp16: F16C's vcvtps2ph, round-to-nearest-even,
 * overflow to infinity as fp16 storage would), and stochastic rounding to bf16.
 *
 * Stochastic rounding (as llm.c's adamw_kernel3 with stochastic_rounding): x rounds up to the next
 * bf16 with probability (x - down) / (up - down), so the expected stored value is x and updates
 * smaller than half a bf16 ulp are not all lost. The random bits come from a counter-based hash of
 * (seed, i) where i is the element's index in the full parameter, so the result does not depend
 * on how the parameter is sharded or threaded.
 *
 * bf16 conversion flushes subnormal inputs to (signed) zero: AVX512_BF16's vcvtne2ps2bf16 does,
 * and the scalar code (tails, builds without the instruction) does the same, so the bits never
 * depend on where a vector boundary falls. fp16 rounding keeps fp16's own subnormals.
 *
 * All are elementwise, so any thread count and any split give the same bits. NaN stays NaN
 * (quiet), infinities stay infinities.
 */
#include "kernels/kernels.h"
#include "kernels/vecbf16.h"

#include <string.h>
#ifdef __F16C__
#include <immintrin.h> /* _cvtss_sh / _cvtsh_ss (AVX2 builds have F16C without AVX-512) */
#endif

/* dst[i0, end) = bf16 of src: 32 lanes at a time with vcvtne2ps2bf16, the same rule in scalar code */
static void f32_to_bf16_range(uint16_t *dst, const float *src, size_t i, size_t end)
{
#if defined(__AVX512BF16__)
    for (; i + 32 <= end; i += 32) {
        __m512bh v = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(src + i + 16), _mm512_loadu_ps(src + i));
        _mm512_storeu_si512((void *)(dst + i), (__m512i)v);
    }
#elif defined(ZT_VEC_AVX2)
    for (; i + 16 <= end; i += 16)
        zt_vbf_store((uint32_t *)(dst + i), zt_vbf_adjacent(zt_vload(src + i), zt_vload(src + i + 8)));
#endif
    for (; i < end; i++) dst[i] = zt_bf16_rne(src[i]);
}

void zt_f32_to_bf16(uint16_t *dst, const float *src, size_t n)
{
    size_t nblk = (n + 4095) / 4096;
#pragma omp parallel for schedule(static) if (n >= 65536 && !omp_in_parallel())
    for (size_t b = 0; b < nblk; b++)
        f32_to_bf16_range(dst, src, b * 4096, b * 4096 + 4096 < n ? b * 4096 + 4096 : n);
}

void zt_bf16_to_f32(float *dst, const uint16_t *src, size_t n)
{
#pragma omp parallel for schedule(static) if (n >= 65536 && !omp_in_parallel())
    for (size_t i = 0; i < n; i++) dst[i] = zt_u2f((uint32_t)src[i] << 16);
}

void zt_f32_to_bf16_serial(uint16_t *dst, const float *src, size_t n) { f32_to_bf16_range(dst, src, 0, n); }

void zt_bf16_to_f32_serial(float *dst, const uint16_t *src, size_t n)
{
    for (size_t i = 0; i < n; i++) dst[i] = zt_u2f((uint32_t)src[i] << 16);
}

/* One node of a bf16 summation: the fp32 sum of two bf16 values (exact inputs, one IEEE add)
 * rounded to bf16 by the rule above, 16 lanes at a time with vcvtneps2bf16 */
void zt_add_round_bf16(float *d, const float *a, const float *b, size_t n)
{
    size_t i = 0;
#if defined(__AVX512BF16__)
    for (; i + 16 <= n; i += 16) {
        __m512 s = _mm512_add_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i));
        __m256i h = (__m256i)_mm512_cvtneps_pbh(s);
        _mm512_storeu_si512((void *)(d + i), _mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    }
#elif defined(ZT_VEC_AVX2)
    for (; i + 8 <= n; i += 8) {
        __m256 s = _mm256_add_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i));
        _mm256_storeu_si256((__m256i *)(d + i), _mm256_slli_epi32(zt_vbf_round_(s), 16));
    }
#endif
    for (; i < n; i++) d[i] = zt_u2f((uint32_t)zt_bf16_rne(a[i] + b[i]) << 16);
}

#if defined(ZT_VEC_AVX2)
/* AVX2: blocks of 4096 (elementwise: the split changes no bit), 8 lanes at a time */
void zt_round_bf16(float *x, size_t n)
{
    size_t nblk = (n + 4095) / 4096;
#pragma omp parallel for schedule(static) if (n >= 65536 && !omp_in_parallel())
    for (size_t b = 0; b < nblk; b++) {
        size_t i = b * 4096, end = i + 4096 < n ? i + 4096 : n;
        for (; i + 8 <= end; i += 8)
            _mm256_storeu_si256((__m256i *)(x + i), _mm256_slli_epi32(zt_vbf_round_(_mm256_loadu_ps(x + i)), 16));
        for (; i < end; i++) x[i] = zt_u2f((uint32_t)zt_bf16_rne(x[i]) << 16);
    }
}
#else
void zt_round_bf16(float *x, size_t n)
{
#pragma omp parallel for schedule(static) if (n >= 65536 && !omp_in_parallel())
    for (size_t i = 0; i < n; i++) x[i] = zt_u2f((uint32_t)zt_bf16_rne(x[i]) << 16);
}
#endif

/* fp16 round trip: nearest-even, |x| >= 65520 becomes infinity, small values go subnormal */
static inline float fp16_rne_scalar(float f)
{
    if (f != f) return f;
    float a = f < 0 ? -f : f;
    if (a >= 65520.0f) return f < 0 ? -INFINITY : INFINITY;
    if (a < 6.103515625e-05f) { /* subnormal fp16: a multiple of 2^-24 */
        float q = nearbyintf(a * 16777216.0f) / 16777216.0f;
        return f < 0 ? -q : q;
    }
    uint32_t u = zt_f2u(f);
    u += 0xfffu + ((u >> 13) & 1u); /* keep 10 mantissa bits */
    return zt_u2f(u & 0xffffe000u);
}

/* dst[i, end) = the fp16 values of src */
static void round_fp16_range(float *dst, const float *src, size_t i, size_t end)
{
#if defined(__AVX512F__)
    for (; i + 16 <= end; i += 16) {
        __m256i h = _mm512_cvtps_ph(_mm512_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
        _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(h));
    }
#elif defined(ZT_VEC_AVX2) && defined(__F16C__)
    for (; i + 8 <= end; i += 8) {
        __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
    }
#endif
    for (; i < end; i++) dst[i] = fp16_rne_scalar(src[i]);
}

void zt_round_fp16(float *dst, const float *src, size_t n)
{
    size_t nblk = (n + 4095) / 4096;
#pragma omp parallel for schedule(static) if (n >= 65536 && !omp_in_parallel())
    for (size_t b = 0; b < nblk; b++)
        round_fp16_range(dst, src, b * 4096, b * 4096 + 4096 < n ? b * 4096 + 4096 : n);
}

/* fp16 bit patterns (the fp16 gradient reduction): F16C's vcvtps2ph / vcvtph2ps, nearest-even,
 * overflow to infinity, fp16 subnormals kept; the scalar tails use the same instructions, so the
 * bits never depend on where a vector boundary falls (builds without F16C decode by hand). */
static inline uint16_t fp16_bits(float f)
{
#if defined(__F16C__)
    return (uint16_t)_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT);
#else
    uint32_t u = zt_f2u(f), sign = (u >> 16) & 0x8000u;
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((u >> 13) & 0x3ffu));
    float q = fp16_rne_scalar(f), a = q < 0 ? -q : q;
    if (a == INFINITY) return (uint16_t)(sign | 0x7c00u);
    if (a < 6.103515625e-05f) return (uint16_t)(sign | (uint32_t)(a * 16777216.0f));
    uint32_t v = zt_f2u(a);
    return (uint16_t)(sign | ((((v >> 23) & 0xffu) - 112u) << 10) | ((v >> 13) & 0x3ffu));
#endif
}

static inline float fp16_value(uint16_t h)
{
#if defined(__F16C__)
    return _cvtsh_ss(h);
#else
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 31) return zt_u2f(sign | 0x7f800000u | (m << 13));
    if (e == 0) return zt_u2f(sign) + (sign ? -1.0f : 1.0f) * (float)m / 16777216.0f;
    return zt_u2f(sign | ((e + 112u) << 23) | (m << 13));
#endif
}

void zt_f32_to_fp16_serial(uint16_t *dst, const float *src, size_t n)
{
    size_t i = 0;
#if defined(__AVX512F__)
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256((__m256i *)(dst + i), _mm512_cvtps_ph(_mm512_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
#elif defined(ZT_VEC_AVX2) && defined(__F16C__)
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(dst + i), _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
#endif
    for (; i < n; i++) dst[i] = fp16_bits(src[i]);
}

void zt_fp16_to_f32_serial(float *dst, const uint16_t *src, size_t n)
{
    size_t i = 0;
#if defined(__AVX512F__)
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(src + i))));
#elif defined(ZT_VEC_AVX2) && defined(__F16C__)
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
#endif
    for (; i < n; i++) dst[i] = fp16_value(src[i]);
}

void zt_add_round_fp16(float *d, const float *a, const float *b, size_t n)
{
    size_t i = 0;
#if defined(__AVX512F__)
    for (; i + 16 <= n; i += 16) {
        __m512 s = _mm512_add_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i));
        _mm512_storeu_ps(d + i, _mm512_cvtph_ps(_mm512_cvtps_ph(s, _MM_FROUND_TO_NEAREST_INT)));
    }
#elif defined(ZT_VEC_AVX2) && defined(__F16C__)
    for (; i + 8 <= n; i += 8) {
        __m256 s = _mm256_add_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i));
        _mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm256_cvtps_ph(s, _MM_FROUND_TO_NEAREST_INT)));
    }
#endif
    for (; i < n; i++) d[i] = fp16_value(fp16_bits(a[i] + b[i]));
}

void zt_round_to_lp_serial(zt_lp_kind kind, void *dst, const float *src, size_t n)
{
    if (kind == ZT_LP_BF16)
        f32_to_bf16_range(dst, src, 0, n);
    else
        round_fp16_range(dst, src, 0, n);
}

void zt_round_to_lp(zt_lp_kind kind, void *dst, const float *src, size_t n)
{
    if (kind == ZT_LP_BF16)
        zt_f32_to_bf16(dst, src, n);
    else
        zt_round_fp16(dst, src, n);
}

static inline uint32_t sr_bits(uint64_t seed, uint64_t i)
{
    uint64_t z = seed ^ (i * 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return (uint32_t)(z ^ (z >> 31));
}

void zt_round_bf16_stochastic(float *x, size_t n, uint64_t seed, uint64_t first_index)
{
#pragma omp parallel for schedule(static) if (n >= 65536 && !omp_in_parallel())
    for (size_t i = 0; i < n; i++) {
        uint32_t u = zt_f2u(x[i]);
        if ((u & 0x7f800000u) == 0x7f800000u) { /* inf, NaN: nearest */
            x[i] = zt_u2f((uint32_t)zt_bf16_rne(x[i]) << 16);
            continue;
        }
        /* adding 16 random bits below the kept half then truncating rounds up with probability
         * equal to the dropped fraction (magnitude-wise, so the sign is symmetric) */
        uint32_t r = sr_bits(seed, first_index + i) & 0xffffu;
        uint32_t t = (u + r) & 0xffff0000u;
        if ((t & 0x7f800000u) == 0x7f800000u) t = u & 0xffff0000u; /* never round up to inf */
        x[i] = zt_u2f(t);
    }
}
