/* ns_product.c - the matrix products of Muon's Newton-Schulz iteration (src/optim/muon.c), packed
 * and register-blocked, with every element's bits fixed by its inputs alone:
 *   zt_ns_gram:  C (r x r) = X X^T for X (r x n) row-major (also A·A for a symmetric A = A A^T);
 *                symmetric, so only the tiles touching the upper triangle are computed, then mirrored
 *   zt_ns_mul:   C (r x n) = B X for B (r x r), X (r x n), both row-major
 *
 * How (BLIS's layout, as oneDNN and OpenBLAS block): the right operand is packed once into panels
 * of NR columns, k-major (a panel's k-th NR values contiguous), the last one padded with zeros; the
 * left one is read in place, MR rows at a time (each row contiguous along k: X's rows, B's rows;
 * a partial last panel of rows is copied into a zero-padded one). An MR x NR micro-kernel holds
 * its tile of C in registers and runs k in blocks of KC (the right panel's block stays in L1),
 * storing the tile between blocks and loading it back. Packing the left operand too cost more
 * than it saved on these shapes (r = 256-768: up to a third of X X^T's time).
 *
 * Determinism: every element C[i][j] is one chain c = fma(a_ik, b_kj, c) for k = 0, 1, ..., K-1
 * in that order, starting from c = 0 (the tile goes to memory between k blocks as an fp32, which
 * is what the register held). Threads split the output tiles only, never k; padding touches only
 * padded rows and columns. So an element's bits do not depend on the thread count, the tile
 * sizes, the rank or even the level: AVX-512 (12 x 32 tiles) and AVX2 (6 x 16) run the same chain
 * of FMAs per element (tests/test_ns_product.c checks all three). The mirror is exact: fma's
 * product commutes, so C[j][i]'s chain is C[i][j]'s. */
#include "kernels/kernels.h"
#include "kernels/vecmath.h"

#include <math.h>
#include <string.h>

#if defined(__AVX512F__)
enum { MR = 12, NR = 32 };
#elif defined(__AVX2__) && defined(__FMA__)
enum { MR = 6, NR = 16 };
#else
enum { MR = 4, NR = 4 };
#endif
enum { KC = 256, MC_PANELS = 96 / MR, NC_PANELS = 1 }; /* threads take blocks of MC rows x NR columns */

_Static_assert(NR <= ZT_NS_NR_MAX, "kernels.h's packing bound covers the tiles");

/* dst[p][k][t] = src[(p·P + t)·s_i + k·s_k] for the panels p of P lines (rows or columns) of an
 * operand of `lines` lines and K values along k; lines past the end are zeros. */
static void pack_panels(float *restrict dst, const float *restrict src, int64_t s_i, int64_t s_k, int64_t lines,
                        int64_t K, int P)
{
    int64_t np = (lines + P - 1) / P;
#pragma omp parallel for schedule(static) if (lines * K > 65536)
    for (int64_t p = 0; p < np; p++) {
        float *d = dst + p * P * K;
        if (s_i == 1 && lines - p * P >= P) { /* P adjacent lines: a row of P values per k */
            for (int64_t k = 0; k < K; k++) memcpy(d + k * P, src + p * P + k * s_k, (size_t)P * sizeof *d);
            continue;
        }
        for (int64_t k0 = 0; k0 < K; k0 += 64) { /* 64 values of k at a time: the writes stay in L1 */
            const int64_t k1 = k0 + 64 < K ? k0 + 64 : K;
            for (int t = 0; t < P; t++) {
                int64_t i = p * P + t;
                const float *s = src + i * s_i;
                if (i >= lines)
                    for (int64_t k = k0; k < k1; k++) d[k * P + t] = 0.0f;
                else
                    for (int64_t k = k0; k < k1; k++) d[k * P + t] = s[k * s_k];
            }
        }
    }
}

/* the MR x NR tile c (row stride ldc) = (load ? c : 0) + a b over kc values of k, one FMA chain
 * per element in k's order; a's element (i, k) at a[i·a_row + k·a_k] (the left operand read in place,
 * a_k = 1, or from a packed edge panel, a_row = 1), b a packed panel */
static inline __attribute__((always_inline)) void micro_tile(int64_t kc, const float *restrict a, int64_t a_row,
                                                             int64_t a_k, const float *restrict b, float *restrict c,
                                                             int64_t ldc, bool load)
{
#if defined(__AVX512F__)
    __m512 acc[MR][2];
    for (int i = 0; i < MR; i++) {
        acc[i][0] = load ? _mm512_loadu_ps(c + i * ldc) : _mm512_setzero_ps();
        acc[i][1] = load ? _mm512_loadu_ps(c + i * ldc + 16) : _mm512_setzero_ps();
    }
    for (int64_t k = 0; k < kc; k++) {
        __m512 b0 = _mm512_loadu_ps(b + k * NR), b1 = _mm512_loadu_ps(b + k * NR + 16);
#pragma GCC unroll 12
        for (int i = 0; i < MR; i++) {
            __m512 ai = _mm512_set1_ps(a[i * a_row + k * a_k]);
            acc[i][0] = _mm512_fmadd_ps(ai, b0, acc[i][0]);
            acc[i][1] = _mm512_fmadd_ps(ai, b1, acc[i][1]);
        }
    }
    for (int i = 0; i < MR; i++) {
        _mm512_storeu_ps(c + i * ldc, acc[i][0]);
        _mm512_storeu_ps(c + i * ldc + 16, acc[i][1]);
    }
#elif defined(__AVX2__) && defined(__FMA__)
    __m256 acc[MR][2];
    for (int i = 0; i < MR; i++) {
        acc[i][0] = load ? _mm256_loadu_ps(c + i * ldc) : _mm256_setzero_ps();
        acc[i][1] = load ? _mm256_loadu_ps(c + i * ldc + 8) : _mm256_setzero_ps();
    }
    for (int64_t k = 0; k < kc; k++) {
        __m256 b0 = _mm256_loadu_ps(b + k * NR), b1 = _mm256_loadu_ps(b + k * NR + 8);
#pragma GCC unroll 6
        for (int i = 0; i < MR; i++) {
            __m256 ai = _mm256_broadcast_ss(a + i * a_row + k * a_k);
            acc[i][0] = _mm256_fmadd_ps(ai, b0, acc[i][0]);
            acc[i][1] = _mm256_fmadd_ps(ai, b1, acc[i][1]);
        }
    }
    for (int i = 0; i < MR; i++) {
        _mm256_storeu_ps(c + i * ldc, acc[i][0]);
        _mm256_storeu_ps(c + i * ldc + 8, acc[i][1]);
    }
#else
    float acc[MR][NR];
    for (int i = 0; i < MR; i++)
        for (int j = 0; j < NR; j++) acc[i][j] = load ? c[i * ldc + j] : 0.0f;
    for (int64_t k = 0; k < kc; k++)
        for (int i = 0; i < MR; i++)
            for (int j = 0; j < NR; j++) acc[i][j] = fmaf(a[i * a_row + k * a_k], b[k * NR + j], acc[i][j]);
    for (int i = 0; i < MR; i++)
        for (int j = 0; j < NR; j++) c[i * ldc + j] = acc[i][j];
#endif
}

/* C (M x N, row stride N) = A Bp over K: A (M x K) row-major read in place (a partial last panel of
 * rows copied into a zero-padded one), Bp packed panels; `upper`: only the tiles with an element on
 * or above the diagonal (the caller mirrors) */
static void product(float *restrict C, const float *restrict A, const float *restrict Bp, int64_t M, int64_t N,
                    int64_t K, bool upper)
{
    if (K == 0) { /* empty sums */
        memset(C, 0, (size_t)(M * N) * sizeof *C);
        return;
    }
    const int64_t mp = (M + MR - 1) / MR, np = (N + NR - 1) / NR;
    const int64_t mblocks = (mp + MC_PANELS - 1) / MC_PANELS, nblocks = (np + NC_PANELS - 1) / NC_PANELS;
#pragma omp parallel for collapse(2) schedule(dynamic, 1) if (M * N * K > 262144)
    for (int64_t bi = 0; bi < mblocks; bi++)
        for (int64_t bj = 0; bj < nblocks; bj++) {
            const int64_t p0 = bi * MC_PANELS, p1 = p0 + MC_PANELS < mp ? p0 + MC_PANELS : mp;
            const int64_t q0 = bj * NC_PANELS, q1 = q0 + NC_PANELS < np ? q0 + NC_PANELS : np;
            if (upper && q1 * NR <= p0 * MR) continue; /* the block lies below the diagonal */
            float edge[MR * NR] = {0}, apanel[MR * KC];
            for (int64_t k0 = 0; k0 < K; k0 += KC) {
                const int64_t kc = K - k0 < KC ? K - k0 : KC;
                if (p1 == mp && M % MR) { /* the last rows, packed k-major with zero rows below */
                    const int64_t i0 = (mp - 1) * MR, ni = M - i0;
                    for (int64_t k = 0; k < kc; k++)
                        for (int64_t i = 0; i < MR; i++) apanel[k * MR + i] = i < ni ? A[(i0 + i) * K + k0 + k] : 0.0f;
                }
                for (int64_t q = q0; q < q1; q++) {
                    const float *b = Bp + q * NR * K + k0 * NR;
                    const int64_t j0 = q * NR, nj = N - j0 < NR ? N - j0 : NR;
                    for (int64_t p = p0; p < p1; p++) {
                        const int64_t i0 = p * MR, ni = M - i0 < MR ? M - i0 : MR;
                        if (upper && j0 + nj <= i0) continue; /* every element below the diagonal */
                        const float *a = A + i0 * K + k0;
                        float *c = C + i0 * N + j0;
                        if (ni == MR && nj == NR) {
                            micro_tile(kc, a, K, 1, b, c, N, k0 > 0);
                            continue;
                        }
                        for (int64_t i = 0; i < ni && k0 > 0; i++)
                            memcpy(edge + i * NR, c + i * N, (size_t)nj * sizeof *c);
                        if (ni == MR) micro_tile(kc, a, K, 1, b, edge, NR, k0 > 0);
                        else micro_tile(kc, apanel, 1, MR, b, edge, NR, k0 > 0);
                        for (int64_t i = 0; i < ni; i++) memcpy(c + i * N, edge + i * NR, (size_t)nj * sizeof *c);
                    }
                }
            }
        }
}

/* C's lower triangle from its upper one (C r x r) */
static void mirror_upper(float *C, int64_t r)
{
#pragma omp parallel for schedule(dynamic, 1) if (r * r > 65536)
    for (int64_t j0 = 0; j0 < r; j0 += 32)
        for (int64_t i = j0; i < r; i++) {
            int64_t j1 = j0 + 32 < i ? j0 + 32 : i;
            for (int64_t j = j0; j < j1; j++) C[i * r + j] = C[j * r + i];
        }
}

void zt_ns_gram(float *C, const float *X, int64_t r, int64_t n, float *pack)
{
    pack_panels(pack, X, n, 1, r, n, NR); /* X^T's columns: X's rows */
    product(C, X, pack, r, r, n, true);
    mirror_upper(C, r);
}

void zt_ns_mul(float *C, const float *B, const float *X, int64_t r, int64_t n, float *pack)
{
    pack_panels(pack, X, 1, n, n, r, NR); /* columns of X */
    product(C, B, pack, r, n, r, false);
}
