/* flash_pack.h - flash attention's operand layouts (internal to flash_attention.c: flash_micro.h
 * includes it once, after its tile sizes and before its micro-kernels): the rows of the next work item fetched
 * into L2 while this one computes (row_prefetch), Kᵀ and Vᵀ packed with 16 x 16 (AVX-512) or 8 x 8
 * (AVX2) register transposes, and bf16 pairs (nearest-even, vecbf16.h) packed along rows, across
 * rows and transposed, the operand shape of vdpbf16ps. None of it changes a bit of the result:
 * each output element's sequence of roundings is the same whatever the layout. */
#ifndef ZT_KERNELS_FLASH_PACK_H
#define ZT_KERNELS_FLASH_PACK_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/vecbf16.h"

static int imin(int a, int b) { return a < b ? a : b; }
static int hpairs(int hs) { return (hs + 1) / 2; }
/* rows read with a large stride (q, k, v, dO of one head) are fetched PF_ROWS rows ahead: the
 * hardware prefetchers do not follow a stride that crosses a page every row */
#define PF_ROWS 8
#define PF_LOC 2 /* prefetcht1: into L2, leaving L1 to the tiles */
static inline void prefetch_row(const float *p, int n)
{
    for (int i = 0; i < n; i += 16)
        __builtin_prefetch(p + i);
}

/* The rows the next work item reads (and writes), fetched a few rows at a time while this one
 * computes: up to 6 streams of `rows` rows of n floats (stride ld; write: fetched for writing) */
typedef struct row_prefetch {
    const float *p[6];
    int ld[6];
    bool write[6];
    int streams, rows, n, done, step; /* step: rows per pf_advance */
} row_prefetch;

static void pf_add(row_prefetch *f, const float *p, int ld, bool write)
{
    f->p[f->streams] = p, f->ld[f->streams] = ld, f->write[f->streams] = write;
    f->streams++;
}

static void pf_advance(row_prefetch *f)
{
    if (!f)
        return;
    int end = imin(f->rows, f->done + f->step);
    for (; f->done < end; f->done++)
        for (int s = 0; s < f->streams; s++) {
            const float *r = f->p[s] + (size_t)f->done * f->ld[s];
            for (int i = 0; i < f->n; i += 16) {
                if (f->write[s])
                    __builtin_prefetch(r + i, 1, PF_LOC);
                else
                    __builtin_prefetch(r + i, 0, PF_LOC);
            }
        }
}
/* dst (hs, Tp) = srcᵀ, src (T, hs) with row stride ld; columns T..Tp zero (Tp a multiple of 16) */
#ifdef __AVX512F__
/* r[i] row i of a 16 x 16 block -> r[j] column j: unpack pairs of rows, then pairs of pairs (each
 * 128-bit lane L of u[G][c] holds rows 4G..4G+3 of column 4L + c), then a 4 x 4 transpose of
 * 128-bit lanes */
static inline void transpose16(__m512 r[16])
{
    __m512 t[16], u[16];
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int G = 0; G < 4; G++) { /* u[4c + G] = u[G][c] */
        __m512d lo0 = _mm512_castps_pd(t[4 * G]), lo1 = _mm512_castps_pd(t[4 * G + 2]);
        __m512d hi0 = _mm512_castps_pd(t[4 * G + 1]), hi1 = _mm512_castps_pd(t[4 * G + 3]);
        u[0 + G] = _mm512_castpd_ps(_mm512_unpacklo_pd(lo0, lo1));
        u[4 + G] = _mm512_castpd_ps(_mm512_unpackhi_pd(lo0, lo1));
        u[8 + G] = _mm512_castpd_ps(_mm512_unpacklo_pd(hi0, hi1));
        u[12 + G] = _mm512_castpd_ps(_mm512_unpackhi_pd(hi0, hi1));
    }
    for (int c = 0; c < 4; c++) {
        __m512 *v = u + 4 * c;
        __m512 x0 = _mm512_shuffle_f32x4(v[0], v[1], 0x44), x1 = _mm512_shuffle_f32x4(v[0], v[1], 0xEE);
        __m512 x2 = _mm512_shuffle_f32x4(v[2], v[3], 0x44), x3 = _mm512_shuffle_f32x4(v[2], v[3], 0xEE);
        r[0 + c] = _mm512_shuffle_f32x4(x0, x2, 0x88);
        r[4 + c] = _mm512_shuffle_f32x4(x0, x2, 0xDD);
        r[8 + c] = _mm512_shuffle_f32x4(x1, x3, 0x88);
        r[12 + c] = _mm512_shuffle_f32x4(x1, x3, 0xDD);
    }
}

static void pack_transposed(float *dst, const float *src, int T, int Tp, int hs, int ld)
{
    for (int t0 = 0; t0 < Tp; t0 += 16)
        for (int d0 = 0; d0 < hs; d0 += 16) {
            int nd = imin(16, hs - d0);
            __mmask16 m = nd == 16 ? 0xFFFF : (__mmask16)((1u << nd) - 1u);
            __m512 r[16];
            for (int i = 0; i < 16; i++)
                r[i] = t0 + i < T ? _mm512_maskz_loadu_ps(m, src + (size_t)(t0 + i) * ld + d0) : _mm512_setzero_ps();
            transpose16(r);
            for (int j = 0; j < nd; j++)
                _mm512_storeu_ps(dst + (size_t)(d0 + j) * Tp + t0, r[j]);
        }
}
#elif defined(ZT_VEC_AVX2)
/* r[i] row i of an 8 x 8 block -> r[j] column j: unpack pairs of rows, shuffle pairs of pairs
 * (each 128-bit lane of u[c] / u[4 + c] holds rows 0-3 / 4-7 of columns c and 4 + c), then swap
 * 128-bit lanes */
static inline void transpose8(__m256 r[8])
{
    __m256 t[8], u[8];
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int G = 0; G < 2; G++) { /* rows 4G..4G+3 */
        u[4 * G + 0] = _mm256_shuffle_ps(t[4 * G], t[4 * G + 2], 0x44);
        u[4 * G + 1] = _mm256_shuffle_ps(t[4 * G], t[4 * G + 2], 0xEE);
        u[4 * G + 2] = _mm256_shuffle_ps(t[4 * G + 1], t[4 * G + 3], 0x44);
        u[4 * G + 3] = _mm256_shuffle_ps(t[4 * G + 1], t[4 * G + 3], 0xEE);
    }
    for (int c = 0; c < 4; c++) {
        r[c] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x20);
        r[4 + c] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x31);
    }
}

static void pack_transposed(float *dst, const float *src, int T, int Tp, int hs, int ld)
{
    for (int t0 = 0; t0 < Tp; t0 += 8)
        for (int d0 = 0; d0 < hs; d0 += 8) {
            int nd = imin(8, hs - d0);
            __m256 r[8];
            for (int i = 0; i < 8; i++) {
                const float *x = src + (size_t)(t0 + i) * ld + d0;
                r[i] = t0 + i >= T ? _mm256_setzero_ps() : nd == 8 ? _mm256_loadu_ps(x) : zt_vloadn(x, nd, 0.0f);
            }
            transpose8(r);
            for (int j = 0; j < nd; j++)
                _mm256_storeu_ps(dst + (size_t)(d0 + j) * Tp + t0, r[j]);
        }
}
#else
static void pack_transposed(float *dst, const float *src, int T, int Tp, int hs, int ld)
{
    for (int d = 0; d < hs; d++)
        for (int t = 0; t < Tp; t++)
            dst[(size_t)d * Tp + t] = t < T ? src[(size_t)t * ld + d] : 0.0f;
}
#endif

/* ---- bf16 pair packing (round-to-nearest-even, vecbf16.h) ------------------------------------- */

/* the first k (any) floats at p as a vector, the other lanes 0 */
static inline zt_vf loadk(const float *p, int k)
{
    return k >= ZT_VL ? zt_vload(p) : k <= 0 ? zt_vzero() : zt_vloadn(p, k, 0.0f);
}

/* dst[0 .. (n+1)/2) = the pairs (src[2i], src[2i+1]) of one row, src[n] read as 0 when n is odd.
 * dst may be src itself (each step loads before it stores, and stores behind what it loads). */
static void pairs_along_row(uint32_t *dst, const float *src, int n)
{
    for (int i = 0; i < n; i += 2 * ZT_VL) {
        zt_vf a = loadk(src + i, n - i), b = loadk(src + i + ZT_VL, n - i - ZT_VL);
        int np = imin(ZT_VL, (n - i + 1) / 2);
        if (np == ZT_VL)
            zt_vbf_store(dst + i / 2, zt_vbf_adjacent(a, b));
        else
            zt_vbf_storen(dst + i / 2, zt_vbf_adjacent(a, b), np);
    }
}

/* dst (ceil(rows/2), w) pairs, row stride ldd: dst[i][e] = (src[2i][e], src[2i+1][e]); rows at or
 * past `rows` read as 0 up to pad_rows (even) */
static void pairs_across_rows(uint32_t *dst, int ldd, const float *src, int lds, int rows, int pad_rows, int w)
{
    for (int i = 0; i < pad_rows / 2; i++) {
        const float *r0 = src + (size_t)2 * i * lds, *r1 = r0 + lds;
        if (2 * i + PF_ROWS + 1 < rows)
            prefetch_row(r0 + (size_t)PF_ROWS * lds, w), prefetch_row(r1 + (size_t)PF_ROWS * lds, w);
        bool h0 = 2 * i < rows, h1 = 2 * i + 1 < rows;
        for (int e = 0; e < w; e += ZT_VL) {
            int k = w - e;
            zt_vf lo = h0 ? loadk(r0 + e, k) : zt_vzero(), hi = h1 ? loadk(r1 + e, k) : zt_vzero();
            if (k >= ZT_VL)
                zt_vbf_store(dst + (size_t)i * ldd + e, zt_vbf_pairs(lo, hi));
            else
                zt_vbf_storen(dst + (size_t)i * ldd + e, zt_vbf_pairs(lo, hi), k);
        }
    }
}

/* dst (hp, Tp) pairs = the pairs along hs of src (T, hs) row stride ld, transposed: dst[p][t] =
 * (src[t][2p], src[t][2p+1]); keys T..Tp zero */
static void pack_transposed_bf16(uint32_t *dst, const float *src, int T, int Tp, int hs, int ld, row_prefetch *pf)
{
    const int hp = hpairs(hs);
#ifdef __AVX512F__
    for (int t0 = 0; t0 < Tp; t0 += 16) {
        pf_advance(pf);
        for (int p0 = 0; p0 < hp; p0 += 16) {
            int d0 = 2 * p0, nd = hs - d0, np = imin(16, hp - p0);
            __m512 r[16];
            if (p0 == 0) /* the next block's rows */
                for (int i = 16; i < 32 && t0 + i < T; i++)
                    prefetch_row(src + (size_t)(t0 + i) * ld, hs);
            for (int i = 0; i < 16; i++) {
                const float *x = src + (size_t)(t0 + i) * ld + d0;
                r[i] = t0 + i < T ? _mm512_castsi512_ps(zt_vbf_adjacent(loadk(x, nd), loadk(x + 16, nd - 16)))
                                  : _mm512_setzero_ps();
            }
            transpose16(r);
            for (int j = 0; j < np; j++)
                _mm512_storeu_ps((float *)(dst + (size_t)(p0 + j) * Tp + t0), r[j]);
        }
    }
#elif defined(ZT_VEC_AVX2)
    for (int t0 = 0; t0 < Tp; t0 += 8) {
        if ((t0 & 15) == 0) /* pf's step counts 16-key blocks */
            pf_advance(pf);
        for (int p0 = 0; p0 < hp; p0 += 8) {
            int d0 = 2 * p0, nd = hs - d0, np = imin(8, hp - p0);
            __m256 r[8];
            if (p0 == 0) /* the next block's rows */
                for (int i = 8; i < 16 && t0 + i < T; i++)
                    prefetch_row(src + (size_t)(t0 + i) * ld, hs);
            for (int i = 0; i < 8; i++) {
                const float *x = src + (size_t)(t0 + i) * ld + d0;
                r[i] = t0 + i < T ? _mm256_castsi256_ps(zt_vbf_adjacent(loadk(x, nd), loadk(x + 8, nd - 8)))
                                  : _mm256_setzero_ps();
            }
            transpose8(r);
            for (int j = 0; j < np; j++)
                _mm256_storeu_ps((float *)(dst + (size_t)(p0 + j) * Tp + t0), r[j]);
        }
    }
#else
    for (int t0 = 0; t0 < Tp; t0 += 16)
        pf_advance(pf);
    for (int p = 0; p < hp; p++)
        for (int t = 0; t < Tp; t++) {
            const float *x = src + (size_t)t * ld + 2 * p;
            dst[(size_t)p * Tp + t] = t < T ? zt_vbf_adjacent(x[0], 2 * p + 1 < hs ? x[1] : 0.0f) : 0u;
        }
#endif
}

#endif
