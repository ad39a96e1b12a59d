/* vecbf16.h - bf16 pairs on vecmath.h's vectors (internal to src/kernels/): the scalar fp32 -> bf16
 * rounding every kernel uses (round-to-nearest-even, subnormal inputs to signed zero, NaN stays a
 * quiet NaN), and a vector of ZT_VL 32-bit lanes each holding two bf16 values (the low half the
 * even element, the high half the odd one), the operand of AVX512_BF16's vdpbf16ps.
 *
 *   zt_vbf_adjacent(a, b)  the 2 ZT_VL floats a then b, rounded, as ZT_VL pairs of neighbours
 *                          (what a contiguous fp32 -> bf16 conversion stores)
 *   zt_vbf_pairs(lo, hi)   lane i = (bf16(lo[i]), bf16(hi[i])): two rows interleaved
 *   zt_vdot_bf16(acc, a, b) lane i: acc + a.odd b.odd, rounded, + a.even b.even, rounded (fp32)
 *
 * Where the build has AVX512_BF16 these are vcvtne2ps2bf16, vcvtne2ps2bf16 + vpermw and vdpbf16ps; with
 * AVX-512F alone, integer vector code with the same rounding and two fused multiply-adds in the
 * order Intel's pseudo-code gives (a product of two bf16 values is exact in fp32, so each step is
 * one rounding); with AVX2 + FMA the same on 8 lanes (vpackusdw + vpermq for the adjacent pairs);
 * without either the same in scalar code (ZT_VL 1). All give the same bits as zt_dot_bf16_scalar. tests/test_flash_attention.c
 * checks the fused-multiply-add form against the instruction where the CPU has it. One difference
 * the emulation keeps: vdpbf16ps flushes subnormal products and sums to zero (its inputs are never
 * subnormal: the rounding flushes them), the fused multiply-adds keep them.
 */
#ifndef ZT_VECBF16_H
#define ZT_VECBF16_H

#include "kernels/vecmath.h"

#include <stdint.h>
#include <string.h>

static inline uint32_t zt_f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float zt_u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* f rounded to the nearest bf16 (ties to even); subnormals to signed zero, NaN quiet */
static inline uint16_t zt_bf16_rne(float f)
{
    uint32_t u = zt_f2u(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u); /* quiet NaN */
    if ((u & 0x7f800000u) == 0) return (uint16_t)((u >> 16) & 0x8000u); /* subnormal: signed 0 */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* lane-wise: acc + (odd halves' product) then + (even halves' product), each one rounding */
static inline float zt_dot_bf16_scalar(float acc, uint32_t a, uint32_t b)
{
    acc = fmaf(zt_u2f(a & 0xffff0000u), zt_u2f(b & 0xffff0000u), acc);
    return fmaf(zt_u2f(a << 16), zt_u2f(b << 16), acc);
}

#ifdef __AVX512F__
typedef __m512i zt_vbf;

static inline zt_vbf zt_vbf_load(const uint32_t *p) { return _mm512_loadu_si512((const void *)p); }
/* the first n (1..15) lanes at p, the others 0; reads nothing past p + n */
static inline zt_vbf zt_vbf_loadn(const uint32_t *p, int n) { return _mm512_maskz_loadu_epi32(zt_vmask_(n), p); }
static inline void zt_vbf_store(uint32_t *p, zt_vbf v) { _mm512_storeu_si512((void *)p, v); }
static inline void zt_vbf_storen(uint32_t *p, zt_vbf v, int n) { _mm512_mask_storeu_epi32(p, zt_vmask_(n), v); }
static inline zt_vbf zt_vbf_set1(uint32_t a) { return _mm512_set1_epi32((int)a); }

/* the fused-multiply-add form of vdpbf16ps (kept for the test where the instruction exists) */
static inline zt_vf zt_vdot_bf16_fma(zt_vf acc, zt_vbf a, zt_vbf b)
{
    const __m512i hi = _mm512_set1_epi32((int)0xffff0000u);
    acc = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_and_si512(a, hi)), _mm512_castsi512_ps(_mm512_and_si512(b, hi)),
                          acc);
    return _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_slli_epi32(a, 16)), _mm512_castsi512_ps(_mm512_slli_epi32(b, 16)),
                           acc);
}

#ifdef __AVX512BF16__
/* 16 bf16 in the low halves of the lanes */
static inline __m512i zt_vbf_round_(zt_vf x) { return _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(x)); }
static inline zt_vbf zt_vbf_adjacent(zt_vf a, zt_vf b) { return (__m512i)_mm512_cvtne2ps_pbh(b, a); }
static inline zt_vf zt_vdot_bf16(zt_vf acc, zt_vbf a, zt_vbf b)
{
    return _mm512_dpbf16_ps(acc, (__m512bh)a, (__m512bh)b);
}
#else
static inline __m512i zt_vbf_round_(zt_vf x)
{
    __m512i u = _mm512_castps_si512(x), abs = _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff));
    __m512i r = _mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff),
                                                     _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1))));
    r = _mm512_srli_epi32(r, 16);
    __mmask16 nan = _mm512_cmpgt_epu32_mask(abs, _mm512_set1_epi32(0x7f800000));
    __mmask16 sub = _mm512_testn_epi32_mask(u, _mm512_set1_epi32(0x7f800000));
    r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40)));
    return _mm512_mask_mov_epi32(r, sub, _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x8000)));
}
static inline zt_vbf zt_vbf_adjacent(zt_vf a, zt_vf b)
{
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtepi32_epi16(zt_vbf_round_(a))),
                              _mm512_cvtepi32_epi16(zt_vbf_round_(b)), 1);
}
static inline zt_vf zt_vdot_bf16(zt_vf acc, zt_vbf a, zt_vbf b) { return zt_vdot_bf16_fma(acc, a, b); }
#endif
#if defined(__AVX512BF16__) && defined(__AVX512BW__)
/* both rounded by one vcvtne2ps2bf16 (lo the low 16 words, hi the high 16), then interleaved */
static inline zt_vbf zt_vbf_pairs(zt_vf lo, zt_vf hi)
{
    const __m512i idx = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6,
                                         21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    return _mm512_permutexvar_epi16(idx, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
}
#else
static inline zt_vbf zt_vbf_pairs(zt_vf lo, zt_vf hi)
{
    return _mm512_or_si512(zt_vbf_round_(lo), _mm512_slli_epi32(zt_vbf_round_(hi), 16));
}
#endif

#elif defined(ZT_VEC_AVX2)
/* ---- AVX2 + FMA: 8 pairs, the emulation of the AVX-512F path on 256-bit vectors ------------- */
typedef __m256i zt_vbf;

static inline zt_vbf zt_vbf_load(const uint32_t *p) { return _mm256_loadu_si256((const __m256i *)p); }
/* the first n (1..7) lanes at p, the others 0; reads nothing past p + n */
static inline zt_vbf zt_vbf_loadn(const uint32_t *p, int n) { return _mm256_maskload_epi32((const int *)p, zt_vmaski_(n)); }
static inline void zt_vbf_store(uint32_t *p, zt_vbf v) { _mm256_storeu_si256((__m256i *)p, v); }
static inline void zt_vbf_storen(uint32_t *p, zt_vbf v, int n) { _mm256_maskstore_epi32((int *)p, zt_vmaski_(n), v); }
static inline zt_vbf zt_vbf_set1(uint32_t a) { return _mm256_set1_epi32((int)a); }

/* acc + a.odd b.odd, then + a.even b.even: two fused multiply-adds, each product exact */
static inline zt_vf zt_vdot_bf16_fma(zt_vf acc, zt_vbf a, zt_vbf b)
{
    const __m256i hi = _mm256_set1_epi32((int)0xffff0000u);
    acc = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_and_si256(a, hi)), _mm256_castsi256_ps(_mm256_and_si256(b, hi)),
                          acc);
    return _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_slli_epi32(a, 16)), _mm256_castsi256_ps(_mm256_slli_epi32(b, 16)),
                           acc);
}
static inline zt_vf zt_vdot_bf16(zt_vf acc, zt_vbf a, zt_vbf b) { return zt_vdot_bf16_fma(acc, a, b); }

/* zt_bf16_rne on 8 lanes, the bf16 in the low half of each lane */
static inline __m256i zt_vbf_round_(zt_vf x)
{
    __m256i u = _mm256_castps_si256(x), abs = _mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff));
    __m256i h = _mm256_srli_epi32(u, 16);
    __m256i r = _mm256_add_epi32(u, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), _mm256_and_si256(h, _mm256_set1_epi32(1))));
    r = _mm256_srli_epi32(r, 16);
    /* abs has its sign bit clear: a signed compare is the unsigned one */
    __m256i nan = _mm256_cmpgt_epi32(abs, _mm256_set1_epi32(0x7f800000));
    __m256i sub = _mm256_cmpeq_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7f800000)), _mm256_setzero_si256());
    r = _mm256_blendv_epi8(r, _mm256_or_si256(h, _mm256_set1_epi32(0x40)), nan);
    return _mm256_blendv_epi8(r, _mm256_and_si256(h, _mm256_set1_epi32(0x8000)), sub);
}
/* a's 8 then b's 8 as 8 adjacent pairs: vpackusdw packs within 128-bit lanes (a0-3 b0-3 | a4-7
 * b4-7; no value exceeds 0xffff), vpermq puts the quarters in order */
static inline zt_vbf zt_vbf_adjacent(zt_vf a, zt_vf b)
{
    return _mm256_permute4x64_epi64(_mm256_packus_epi32(zt_vbf_round_(a), zt_vbf_round_(b)), 0xD8);
}
static inline zt_vbf zt_vbf_pairs(zt_vf lo, zt_vf hi)
{
    return _mm256_or_si256(zt_vbf_round_(lo), _mm256_slli_epi32(zt_vbf_round_(hi), 16));
}

#else
/* ---- scalar fallback: 1 lane (memcpy: the pairs may live in a float buffer) ----------------- */
typedef uint32_t zt_vbf;

static inline zt_vbf zt_vbf_load(const uint32_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static inline zt_vbf zt_vbf_loadn(const uint32_t *p, int n) { return n > 0 ? zt_vbf_load(p) : 0u; }
static inline void zt_vbf_store(uint32_t *p, zt_vbf v) { memcpy(p, &v, 4); }
static inline void zt_vbf_storen(uint32_t *p, zt_vbf v, int n) { if (n > 0) memcpy(p, &v, 4); }
static inline zt_vbf zt_vbf_set1(uint32_t a) { return a; }
static inline zt_vbf zt_vbf_adjacent(zt_vf a, zt_vf b)
{
    return (uint32_t)zt_bf16_rne(a) | (uint32_t)zt_bf16_rne(b) << 16;
}
static inline zt_vbf zt_vbf_pairs(zt_vf lo, zt_vf hi) { return zt_vbf_adjacent(lo, hi); }
static inline zt_vf zt_vdot_bf16(zt_vf acc, zt_vbf a, zt_vbf b) { return zt_dot_bf16_scalar(acc, a, b); }
#endif /* __AVX512F__, AVX2, scalar */

#endif /* ZT_VECBF16_H */
