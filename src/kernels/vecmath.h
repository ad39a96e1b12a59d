/* vecmath.h - SIMD helpers shared by the kernels (internal to src/kernels/): a float vector of
 * ZT_VL lanes (16 with AVX-512, 8 with AVX2 + FMA, 1 without either), loads and stores with a partial tail, a vectorized exp,
 * sigmoid and tanh built on it, fixed-order horizontal reductions, and the static partition the
 * kernels thread with.
 *
 * Kernels are written once against these helpers. The loop
 *     for (i = 0; i + ZT_VL <= n; i += ZT_VL) ... zt_vload(p + i) ...
 *     if (i < n) ... zt_vloadn(p + i, n - i, fill) ...
 * runs 16 lanes under AVX-512 and 8 under AVX2 (the tail is one masked vector) and plain scalar
 * code under the fallback, where ZT_VL == 1 and the tail never runs.
 *
 * Accuracy, AVX-512 path (tests/test_kernels.c sweeps every 61st float of the range against libm
 * in double and enforces these bounds; measured worst: exp 0.99 ulp, sigmoid 2.25, tanh 1.30):
 *   zt_vexp(x)     rel error <= 2 ulp (2.4e-7) for x in [-87.3, 88.7] (normal results); below
 *                  that the result goes subnormal (abs error <= 2^-149) and is 0 below -103.9;
 *                  +inf above 88.73; NaN in, NaN out. Cody-Waite reduction x = n ln2 + r with an
 *                  FMA, Cephes' degree-7 polynomial for e^r on |r| <= ln2/2, then scalef(p, n).
 *                  (AVX2 has no scalef: p 2^n1 2^n2 with n1 + n2 = n, the same one rounding.)
 *   zt_vsigmoid(x) = 1 / (1 + exp(-x)), rel error <= 4 ulp; no cancellation for any x.
 *   zt_vtanh(x)    rel error <= 4 ulp: an odd polynomial (Cephes tanhf) for |x| < 0.625, where
 *                  1 - 2/(e^2x + 1) would cancel, and that formula above it; +-1 for |x| > 10.
 * The AVX2 + FMA path computes the same formulas on 8 lanes and is held to the same bounds (the
 * sweep runs on whichever path the test is built for; x86-64-v3 builds run it on AVX2).
 * The scalar fallback uses libm (expf, tanhf) and is as accurate as the C library.
 *
 * Reductions (zt_vhsum, zt_vhmax) combine the lanes in a fixed tree, so a kernel's result never
 * depends on which thread computed it. Nothing here allocates or keeps state.
 */
#ifndef ZT_VECMATH_H
#define ZT_VECMATH_H

#include <math.h>
#include <stddef.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>
#endif

/* ---- static partition ------------------------------------------------------------------------ */
/* The half-open range [*begin, *end) of n items that part `part` of `nparts` owns: contiguous,
 * in order, each boundary a multiple of `align` (except n itself). Fixed by (n, nparts), so a
 * thread count always gives the same split. */
static inline void zt_split_range(size_t n, size_t align, int part, int nparts, size_t *begin,
                                  size_t *end)
{
    size_t units = (n + align - 1) / align;
    size_t lo = units * (size_t)part / (size_t)nparts;
    size_t hi = units * (size_t)(part + 1) / (size_t)nparts;
    *begin = lo * align < n ? lo * align : n;
    *end = hi * align < n ? hi * align : n;
}

static inline int zt_thread_num(void)
{
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

static inline int zt_num_threads(void)
{
#ifdef _OPENMP
    return omp_get_num_threads();
#else
    return 1;
#endif
}

static inline int zt_max_threads(void)
{
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

#ifdef __AVX512F__
/* ---- AVX-512: 16 lanes ----------------------------------------------------------------------- */
#define ZT_VL 16
typedef __m512 zt_vf;

static inline __mmask16 zt_vmask_(int n) { return (__mmask16)((1u << n) - 1u); }
static inline zt_vf zt_vset1(float a) { return _mm512_set1_ps(a); }
static inline zt_vf zt_vzero(void) { return _mm512_setzero_ps(); }
static inline zt_vf zt_vload(const float *p) { return _mm512_loadu_ps(p); }
/* the first n (1..15) floats at p, the other lanes = fill; reads nothing past p + n */
static inline zt_vf zt_vloadn(const float *p, int n, float fill)
{
    return _mm512_mask_loadu_ps(_mm512_set1_ps(fill), zt_vmask_(n), p);
}
static inline void zt_vstore(float *p, zt_vf v) { _mm512_storeu_ps(p, v); }
/* stores the first n (1..15) lanes; writes nothing past p + n */
static inline void zt_vstoren(float *p, zt_vf v, int n)
{
    _mm512_mask_storeu_ps(p, zt_vmask_(n), v);
}
/* lanes [0, n) of v, 0 in the others; any n (<= 0: all 0, >= 16: v) */
static inline zt_vf zt_vkeepn(zt_vf v, int n)
{
    return _mm512_maskz_mov_ps(n <= 0 ? 0 : n >= 16 ? 0xFFFF : zt_vmask_(n), v);
}
/* lanes [n, 16) of v, 0 in the others (no arithmetic: an inf lane dropped is 0); any n */
static inline zt_vf zt_vkeep_from(zt_vf v, int n)
{
    return _mm512_maskz_mov_ps(n <= 0 ? 0xFFFF : n >= 16 ? 0 : (__mmask16)~zt_vmask_(n), v);
}
static inline zt_vf zt_vadd(zt_vf a, zt_vf b) { return _mm512_add_ps(a, b); }
static inline zt_vf zt_vsub(zt_vf a, zt_vf b) { return _mm512_sub_ps(a, b); }
static inline zt_vf zt_vmul(zt_vf a, zt_vf b) { return _mm512_mul_ps(a, b); }
static inline zt_vf zt_vdiv(zt_vf a, zt_vf b) { return _mm512_div_ps(a, b); }
/* a * b + c and c - a * b, one rounding */
static inline zt_vf zt_vfmadd(zt_vf a, zt_vf b, zt_vf c) { return _mm512_fmadd_ps(a, b, c); }
static inline zt_vf zt_vfnmadd(zt_vf a, zt_vf b, zt_vf c) { return _mm512_fnmadd_ps(a, b, c); }
/* max/min that return a NaN lane of b (the data operand) rather than hiding it */
static inline zt_vf zt_vmax(zt_vf a, zt_vf b) { return _mm512_max_ps(a, b); }
static inline zt_vf zt_vmin(zt_vf a, zt_vf b) { return _mm512_min_ps(a, b); }
static inline zt_vf zt_vabs(zt_vf a) { return _mm512_abs_ps(a); }
/* lanes where x < 0 take neg, the others (NaN included) pos */
static inline zt_vf zt_vselect_neg(zt_vf x, zt_vf neg, zt_vf pos)
{
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ), pos, neg);
}

/* sum of the 16 lanes: a fixed tree (8+8, 4+4, 2+2, 1+1) */
static inline float zt_vhsum(zt_vf v)
{
    __m256 h = _mm256_add_ps(_mm512_castps512_ps256(v),
                             _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
    __m128 q = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    q = _mm_add_ps(q, _mm_movehl_ps(q, q));
    q = _mm_add_ss(q, _mm_movehdup_ps(q));
    return _mm_cvtss_f32(q);
}
static inline float zt_vhmax(zt_vf v) { return _mm512_reduce_max_ps(v); }

/* e^x; see the accuracy note at the top */
static inline zt_vf zt_vexp(zt_vf x)
{
    /* clamp so that n stays in range; max(c, x) and min(c, x) return x when x is NaN */
    x = _mm512_max_ps(_mm512_set1_ps(-104.0f), x);
    x = _mm512_min_ps(_mm512_set1_ps(89.0f), x);
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r);
    p = _mm512_add_ps(p, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}

/* 1 / (1 + e^-x) */
static inline zt_vf zt_vsigmoid(zt_vf x)
{
    __m512 one = _mm512_set1_ps(1.0f);
    return _mm512_div_ps(one, _mm512_add_ps(one, zt_vexp(_mm512_sub_ps(_mm512_setzero_ps(), x))));
}

/* tanh(x); see the accuracy note at the top */
static inline zt_vf zt_vtanh(zt_vf x)
{
    __m512 ax = _mm512_abs_ps(x);
    /* large |x|: 1 - 2 / (e^2|x| + 1), clamped where it is 1 in float anyway */
    __m512 cx = _mm512_min_ps(_mm512_set1_ps(10.0f), ax); /* NaN stays NaN */
    __m512 e = zt_vexp(_mm512_add_ps(cx, cx));
    __m512 big =
        _mm512_sub_ps(_mm512_set1_ps(1.0f),
                      _mm512_div_ps(_mm512_set1_ps(2.0f), _mm512_add_ps(e, _mm512_set1_ps(1.0f))));
    /* small |x|: x + x^3 P(x^2) */
    __m512 z = _mm512_mul_ps(x, x);
    __m512 p = _mm512_set1_ps(-5.70498872745e-3f);
    p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(2.06390887954e-2f));
    p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(-5.37397155531e-2f));
    p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(1.33314422036e-1f));
    p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(-3.33332819422e-1f));
    __m512 small = _mm512_fmadd_ps(_mm512_mul_ps(p, z), x, x);
    /* restore the sign of x on the large branch (ax >= 0.625 there) */
    big = _mm512_castsi512_ps(_mm512_or_si512(
        _mm512_castps_si512(big),
        _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32((int)0x80000000u))));
    __mmask16 is_small = _mm512_cmp_ps_mask(ax, _mm512_set1_ps(0.625f), _CMP_LT_OQ);
    /* NaN compares false: takes the large branch, whose exp propagates NaN */
    return _mm512_mask_blend_ps(is_small, big, small);
}

/* a 16-lane double accumulator for long float sums (softmax denominators) */
typedef struct zt_vacc {
    __m512d lo, hi;
} zt_vacc;
static inline zt_vacc zt_vacc_zero(void)
{
    zt_vacc a = {_mm512_setzero_pd(), _mm512_setzero_pd()};
    return a;
}
static inline void zt_vacc_add(zt_vacc *a, zt_vf v)
{
    a->lo = _mm512_add_pd(a->lo, _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
    a->hi = _mm512_add_pd(
        a->hi, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))));
}
/* fixed order: lo + hi lane-wise, then a tree over the 8 lanes */
static inline double zt_vacc_sum(zt_vacc a)
{
    __m512d s = _mm512_add_pd(a.lo, a.hi);
    __m256d h = _mm256_add_pd(_mm512_castpd512_pd256(s), _mm512_extractf64x4_pd(s, 1));
    __m128d q = _mm_add_pd(_mm256_castpd256_pd128(h), _mm256_extractf128_pd(h, 1));
    q = _mm_add_sd(q, _mm_unpackhi_pd(q, q));
    return _mm_cvtsd_f64(q);
}

#elif defined(__AVX2__) && defined(__FMA__)
/* ---- AVX2 + FMA: 8 lanes (AMD Zen 2/3, Intel before Skylake-X) -------------------------------- */
#define ZT_VL 8
#define ZT_VEC_AVX2 1 /* this branch (convert.c, flash_attention.c and stream_copy.c test it) */
typedef __m256 zt_vf;

/* lanes [0, n) all ones, the others 0 (any n): a compare of n against the lane indices */
static inline __m256i zt_vmaski_(int n)
{
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
static inline zt_vf zt_vset1(float a) { return _mm256_set1_ps(a); }
static inline zt_vf zt_vzero(void) { return _mm256_setzero_ps(); }
static inline zt_vf zt_vload(const float *p) { return _mm256_loadu_ps(p); }
/* the first n (1..7) floats at p, the other lanes = fill; reads nothing past p + n (vmaskmovps
 * does not touch, nor fault on, the masked-off lanes) */
static inline zt_vf zt_vloadn(const float *p, int n, float fill)
{
    __m256i m = zt_vmaski_(n);
    return _mm256_blendv_ps(_mm256_set1_ps(fill), _mm256_maskload_ps(p, m), _mm256_castsi256_ps(m));
}
static inline void zt_vstore(float *p, zt_vf v) { _mm256_storeu_ps(p, v); }
/* stores the first n (1..7) lanes; writes nothing past p + n */
static inline void zt_vstoren(float *p, zt_vf v, int n) { _mm256_maskstore_ps(p, zt_vmaski_(n), v); }
/* lanes [0, n) of v, 0 in the others; any n (<= 0: all 0, >= 8: v) */
static inline zt_vf zt_vkeepn(zt_vf v, int n) { return _mm256_and_ps(_mm256_castsi256_ps(zt_vmaski_(n)), v); }
/* lanes [n, 8) of v, 0 in the others (no arithmetic: an inf lane dropped is 0); any n */
static inline zt_vf zt_vkeep_from(zt_vf v, int n) { return _mm256_andnot_ps(_mm256_castsi256_ps(zt_vmaski_(n)), v); }
static inline zt_vf zt_vadd(zt_vf a, zt_vf b) { return _mm256_add_ps(a, b); }
static inline zt_vf zt_vsub(zt_vf a, zt_vf b) { return _mm256_sub_ps(a, b); }
static inline zt_vf zt_vmul(zt_vf a, zt_vf b) { return _mm256_mul_ps(a, b); }
static inline zt_vf zt_vdiv(zt_vf a, zt_vf b) { return _mm256_div_ps(a, b); }
/* a * b + c and c - a * b, one rounding */
static inline zt_vf zt_vfmadd(zt_vf a, zt_vf b, zt_vf c) { return _mm256_fmadd_ps(a, b, c); }
static inline zt_vf zt_vfnmadd(zt_vf a, zt_vf b, zt_vf c) { return _mm256_fnmadd_ps(a, b, c); }
/* max/min that return a NaN lane of b (the data operand) rather than hiding it: vmaxps / vminps
 * return the second operand when either is NaN, as the AVX-512 forms do */
static inline zt_vf zt_vmax(zt_vf a, zt_vf b) { return _mm256_max_ps(a, b); }
static inline zt_vf zt_vmin(zt_vf a, zt_vf b) { return _mm256_min_ps(a, b); }
static inline zt_vf zt_vabs(zt_vf a)
{
    return _mm256_and_ps(a, _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff)));
}
/* lanes where x < 0 take neg, the others (NaN included) pos */
static inline zt_vf zt_vselect_neg(zt_vf x, zt_vf neg, zt_vf pos)
{
    return _mm256_blendv_ps(pos, neg, _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ));
}

/* sum of the 8 lanes: a fixed tree (4+4, 2+2, 1+1) */
static inline float zt_vhsum(zt_vf v)
{
    __m128 q = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    q = _mm_add_ps(q, _mm_movehl_ps(q, q));
    q = _mm_add_ss(q, _mm_movehdup_ps(q));
    return _mm_cvtss_f32(q);
}
/* max of the 8 lanes: the same tree, with the operand order of GCC's _mm512_reduce_max_ps below
 * its first step (max(high, low), then max(q, q's upper half), max(q, q's lane 1)) */
static inline float zt_vhmax(zt_vf v)
{
    __m128 q = _mm_max_ps(_mm256_extractf128_ps(v, 1), _mm256_castps256_ps128(v));
    q = _mm_max_ps(q, _mm_movehl_ps(q, q));
    q = _mm_max_ss(q, _mm_movehdup_ps(q));
    return _mm_cvtss_f32(q);
}

/* e^x; see the accuracy note at the top. The same reduction and polynomial as the AVX-512 path;
 * without vscalefps, p 2^n is p 2^n1 2^n2 with n1 = floor(n/2), n2 = n - n1: over the clamped
 * range n is in [-150, 128], so both factors are normal floats (2^-75 .. 2^64), p 2^n1 is exact
 * and the second product is the one rounding (subnormal results, overflow to +inf), as scalef's */
static inline zt_vf zt_vexp(zt_vf x)
{
    /* clamp so that n stays in range; max(c, x) and min(c, x) return x when x is NaN */
    x = _mm256_max_ps(_mm256_set1_ps(-104.0f), x);
    x = _mm256_min_ps(_mm256_set1_ps(89.0f), x);
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r);
    p = _mm256_add_ps(p, _mm256_set1_ps(1.0f));
    /* NaN: n converts to INT_MIN and the factors are garbage, but p is NaN already */
    __m256i ni = _mm256_cvtps_epi32(n);
    __m256i n1 = _mm256_srai_epi32(ni, 1), n2 = _mm256_sub_epi32(ni, n1);
    __m256i bias = _mm256_set1_epi32(127);
    __m256 f1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
    __m256 f2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
    return _mm256_mul_ps(_mm256_mul_ps(p, f1), f2);
}

/* 1 / (1 + e^-x) */
static inline zt_vf zt_vsigmoid(zt_vf x)
{
    __m256 one = _mm256_set1_ps(1.0f);
    return _mm256_div_ps(one, _mm256_add_ps(one, zt_vexp(_mm256_sub_ps(_mm256_setzero_ps(), x))));
}

/* tanh(x); see the accuracy note at the top */
static inline zt_vf zt_vtanh(zt_vf x)
{
    __m256 ax = zt_vabs(x);
    /* large |x|: 1 - 2 / (e^2|x| + 1), clamped where it is 1 in float anyway */
    __m256 cx = _mm256_min_ps(_mm256_set1_ps(10.0f), ax); /* NaN stays NaN */
    __m256 e = zt_vexp(_mm256_add_ps(cx, cx));
    __m256 big =
        _mm256_sub_ps(_mm256_set1_ps(1.0f),
                      _mm256_div_ps(_mm256_set1_ps(2.0f), _mm256_add_ps(e, _mm256_set1_ps(1.0f))));
    /* small |x|: x + x^3 P(x^2) */
    __m256 z = _mm256_mul_ps(x, x);
    __m256 p = _mm256_set1_ps(-5.70498872745e-3f);
    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(2.06390887954e-2f));
    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(-5.37397155531e-2f));
    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(1.33314422036e-1f));
    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(-3.33332819422e-1f));
    __m256 small = _mm256_fmadd_ps(_mm256_mul_ps(p, z), x, x);
    /* restore the sign of x on the large branch (ax >= 0.625 there) */
    big = _mm256_or_ps(big, _mm256_and_ps(x, _mm256_castsi256_ps(_mm256_set1_epi32((int)0x80000000u))));
    __m256 is_small = _mm256_cmp_ps(ax, _mm256_set1_ps(0.625f), _CMP_LT_OQ);
    /* NaN compares false: takes the large branch, whose exp propagates NaN */
    return _mm256_blendv_ps(big, small, is_small);
}

/* an 8-lane double accumulator for long float sums (softmax denominators) */
typedef struct zt_vacc {
    __m256d lo, hi;
} zt_vacc;
static inline zt_vacc zt_vacc_zero(void)
{
    zt_vacc a = {_mm256_setzero_pd(), _mm256_setzero_pd()};
    return a;
}
static inline void zt_vacc_add(zt_vacc *a, zt_vf v)
{
    a->lo = _mm256_add_pd(a->lo, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
    a->hi = _mm256_add_pd(a->hi, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
}
/* fixed order: lo + hi lane-wise, then a tree over the 4 lanes */
static inline double zt_vacc_sum(zt_vacc a)
{
    __m256d s = _mm256_add_pd(a.lo, a.hi);
    __m128d q = _mm_add_pd(_mm256_castpd256_pd128(s), _mm256_extractf128_pd(s, 1));
    q = _mm_add_sd(q, _mm_unpackhi_pd(q, q));
    return _mm_cvtsd_f64(q);
}

#else
/* ---- scalar fallback: 1 lane ----------------------------------------------------------------- */
#define ZT_VL 1
typedef float zt_vf;

static inline zt_vf zt_vset1(float a) { return a; }
static inline zt_vf zt_vzero(void) { return 0.0f; }
static inline zt_vf zt_vload(const float *p) { return *p; }
static inline zt_vf zt_vloadn(const float *p, int n, float fill)
{
    (void)n;
    (void)fill;
    return *p;
}
static inline void zt_vstore(float *p, zt_vf v) { *p = v; }
static inline void zt_vstoren(float *p, zt_vf v, int n)
{
    (void)n;
    *p = v;
}
static inline zt_vf zt_vkeepn(zt_vf v, int n) { return n > 0 ? v : 0.0f; }
static inline zt_vf zt_vkeep_from(zt_vf v, int n) { return n > 0 ? 0.0f : v; }
static inline zt_vf zt_vadd(zt_vf a, zt_vf b) { return a + b; }
static inline zt_vf zt_vsub(zt_vf a, zt_vf b) { return a - b; }
static inline zt_vf zt_vmul(zt_vf a, zt_vf b) { return a * b; }
static inline zt_vf zt_vdiv(zt_vf a, zt_vf b) { return a / b; }
static inline zt_vf zt_vfmadd(zt_vf a, zt_vf b, zt_vf c) { return fmaf(a, b, c); }
static inline zt_vf zt_vfnmadd(zt_vf a, zt_vf b, zt_vf c) { return fmaf(-a, b, c); }
static inline zt_vf zt_vmax(zt_vf a, zt_vf b) { return a > b ? a : b; }
static inline zt_vf zt_vmin(zt_vf a, zt_vf b) { return a < b ? a : b; }
static inline zt_vf zt_vabs(zt_vf a) { return fabsf(a); }
static inline zt_vf zt_vselect_neg(zt_vf x, zt_vf neg, zt_vf pos) { return x < 0.0f ? neg : pos; }
static inline float zt_vhsum(zt_vf v) { return v; }
static inline float zt_vhmax(zt_vf v) { return v; }
static inline zt_vf zt_vexp(zt_vf x) { return expf(x); }
static inline zt_vf zt_vsigmoid(zt_vf x) { return 1.0f / (1.0f + expf(-x)); }
static inline zt_vf zt_vtanh(zt_vf x) { return tanhf(x); }

typedef struct zt_vacc {
    double s;
} zt_vacc;
static inline zt_vacc zt_vacc_zero(void)
{
    zt_vacc a = {0.0};
    return a;
}
static inline void zt_vacc_add(zt_vacc *a, zt_vf v) { a->s += (double)v; }
static inline double zt_vacc_sum(zt_vacc a) { return a.s; }
#endif /* __AVX512F__, AVX2 + FMA, scalar */

/* ---- row helpers shared by the kernels (the softmax rows of attention.c, flash_attention.c and
 * crossentropy.c; the residual add of the fused norms) */

/* max of row[0..n) (-inf when n == 0) */
static inline float zt_row_max(const float *row, int n)
{
    int i;
    zt_vf vmax = zt_vset1(-INFINITY);
    for (i = 0; i + ZT_VL <= n; i += ZT_VL)
        vmax = zt_vmax(vmax, zt_vload(row + i));
    if (i < n)
        vmax = zt_vmax(vmax, zt_vloadn(row + i, n - i, -INFINITY));
    return zt_vhmax(vmax);
}

/* sum of a[i] * b[i] over [0, n): 16 lanes of fused multiply-adds, then their horizontal sum */
static inline float zt_row_dot(const float *a, const float *b, int n)
{
    int i;
    zt_vf acc = zt_vzero();
    for (i = 0; i + ZT_VL <= n; i += ZT_VL)
        acc = zt_vfmadd(zt_vload(a + i), zt_vload(b + i), acc);
    if (i < n)
        acc = zt_vfmadd(zt_vloadn(a + i, n - i, 0.0f), zt_vloadn(b + i, n - i, 0.0f), acc);
    return zt_vhsum(acc);
}

/* out[0..n) = a + b, one rounding each (residual.c's add, for the kernels that fuse it) */
static inline void zt_row_add(float *out, const float *a, const float *b, int n)
{
    int i;
    for (i = 0; i + ZT_VL <= n; i += ZT_VL)
        zt_vstore(out + i, zt_vadd(zt_vload(a + i), zt_vload(b + i)));
    if (i < n)
        zt_vstoren(out + i, zt_vadd(zt_vloadn(a + i, n - i, 0.0f), zt_vloadn(b + i, n - i, 0.0f)), n - i);
}

/* row[0..n) = exp(row - m) in place; returns their sum, added per lane in float, then across the
 * lanes (crossentropy.c keeps a double accumulator of its own) */
static inline float zt_row_exp_sum(float *row, int n, float m)
{
    int i;
    zt_vf vm = zt_vset1(m), acc = zt_vzero();
    for (i = 0; i + ZT_VL <= n; i += ZT_VL) {
        zt_vf e = zt_vexp(zt_vsub(zt_vload(row + i), vm));
        acc = zt_vadd(acc, e);
        zt_vstore(row + i, e);
    }
    if (i < n) {
        zt_vf e = zt_vexp(zt_vsub(zt_vloadn(row + i, n - i, -INFINITY), vm)); /* spare lanes: 0 */
        acc = zt_vadd(acc, e);
        zt_vstoren(row + i, e, n - i);
    }
    return zt_vhsum(acc);
}

#endif /* ZT_VECMATH_H */
