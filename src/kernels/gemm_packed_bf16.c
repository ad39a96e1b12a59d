/* gemm_packed_bf16.c - the bf16 product on the levels without a bf16 dot product (avx2, avx512):
 * its own packed GEMM, the operands widened to fp32 while they are packed, never in a pass of their
 * own.
 *
 *   C (M x N, ldc) = alpha · op(A) op(B) + beta · C (+ bias[n]),  op(A) M x K, op(B) K x N, bf16
 *
 * Why: oneDNN 2.x has no bf16 matmul below AVX512_BF16, so the product used to run as the fp32 GEMM
 * of the operands widened into a scratch first: each operand read as 2 bytes, written as 4 and
 * read again as 4 by the GEMM, which then packed it once more. Here the packing itself widens (a
 * bf16 value is the top half of its fp32 value: a shift), so the 2-byte operands are read once, as
 * a packed fp32 GEMM reads its 4-byte ones. Alone, W1's products run as fast as oneDNN's fp32 ones
 * or faster; inside the W1 step about what fp32's cost (bench/RESULTS.md, "The bf16 products
 * packed from bf16").
 *
 * How (BLIS's loops, as ns_product.c and oneDNN's brgemm block): N in blocks of NC columns, K in
 * blocks of KC, M in blocks of MC rows; op(B)'s KC x NC block is packed into panels of NR columns
 * (a panel's k-th NR values contiguous), op(A)'s MC x KC block into panels of MR rows; an MR x NR
 * micro-kernel holds its tile of C in registers over the KC values of k (the A block in L2). The
 * tile is the level's: 6 x 16 in ymm on avx2, 14 x 32 in zmm on avx512. Both orientations of each
 * operand are packed by 8 x 8 transposes where the stored rows run along k. Rows and columns past
 * the edges are packed as zeros and the edge tiles go through a full-size tile in memory, with the
 * same epilogue.
 *
 * Determinism: every element of C is one chain of FMAs over k in order within each KC block, the
 * blocks added in order (the first block's epilogue alpha·acc + beta·C + bias, each later one
 * C + alpha·acc, each operation rounded on its own: the file is built without FMA contraction):
 * its bits depend on K and the inputs alone, never on the thread count, the split, the tile or the
 * position of the element in it (threads divide the output's panels, never k), so the avx2 and
 * avx512 levels give the same bits. tests/test_isa.c checks the product against a double reference
 * on every shape class and the same bits on 1, 2 and 3 threads and on both levels. The bits are not
 * those of vdpbf16ps (docs/precision.md). */
#include "kernels/kernels.h"
#include "kernels/vecmath.h"

#include <math.h>
#include <omp.h>
#include <string.h>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define ZT_PACKED_SIMD 1
#endif

/* tiles and blocks: KC = 512 (an A block of 192 KiB) measured best of KC 256-640 x MC 96-192 on
 * W1's shapes (bench/RESULTS.md); KC is part of the bits, the tile is not. The avx2 level's tile
 * is 6 x 16 (12 ymm accumulators, a B panel of 32 KiB in L1); the avx512 level's 14 x 32 (28 of
 * the 32 zmm registers, MC 98; its 64 KiB B panel streams from L2, ~15 bytes a cycle against L2's
 * 32-64), which ran W1's shapes 2% faster on two threads and 15% on one than 12 x 32, where 24 x 16
 * and 28 x 16 (the B panel in L1) ran 12% slower (bench/RESULTS.md) */
#ifdef __AVX512F__
enum { MR = 14, NR = 32, KC = 512, MC = 98, NC = 4096 };
#else
enum { MR = 6, NR = 16, KC = 512, MC = 96, NC = 4096 };
#endif

/* the blocks a thread packs for a shape: KC x NC of op(B), KC x MC of op(A), no larger than the
 * shape needs (K, N and M rounded up to the tiles) */
typedef struct blocks {
    int64_t kc, nc, mc;
} blocks;

static blocks blocks_of(int64_t M, int64_t N, int64_t K)
{
    blocks b = {.kc = K < KC ? K : KC, .nc = (N + NR - 1) / NR * NR, .mc = (M + MR - 1) / MR * MR};
    if (b.nc > NC) b.nc = NC;
    if (b.mc > MC) b.mc = MC;
    if (b.kc < 1) b.kc = 1;
    return b;
}

/* per thread: the B block and the A block, each with 16 floats of slack for the packs' overlapping
 * stores, rounded to 16 floats (every thread's share starts 64-byte aligned, and so does every B
 * panel: NR·kc floats apart) */
static size_t thread_floats(blocks b)
{
    size_t n = (size_t)(b.kc * b.nc + 16) + (size_t)(b.kc * b.mc + 16);
    return (n + 15) / 16 * 16;
}

size_t zt_gemm_bf16_packed_work_floats(int M, int N, int K, int threads)
{
    return (size_t)(threads > 0 ? threads : 1) * thread_floats(blocks_of(M, N, K));
}

static inline float bf16_value(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

#ifdef ZT_PACKED_SIMD
static inline __m256 widen8(const uint16_t *p)
{
    __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}

/* r[0..8) (8 rows of 8) transposed in place */
static inline void transpose8(__m256 r[8])
{
    __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
    __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
    __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
    __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
    __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    __m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    __m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    r[0] = _mm256_permute2f128_ps(s0, s4, 0x20);
    r[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
    r[2] = _mm256_permute2f128_ps(s2, s6, 0x20);
    r[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
    r[4] = _mm256_permute2f128_ps(s0, s4, 0x31);
    r[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
    r[6] = _mm256_permute2f128_ps(s2, s6, 0x31);
    r[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}
#endif

/* One panel of P lines (rows of op(A), P = MR; columns of op(B), P = NR) and kc values of k:
 * dst[k·P + t] = X(line l0 + t, k0 + k) widened, lines >= lines_end zero. The operand X is stored
 * either along the lines (line stride 1, k stride ld: `k_major`) or along k (line stride ld, k
 * stride 1). dst has 8 floats of slack past its P·kc. */
static void pack_panel(float *restrict dst, const uint16_t *X, int64_t ld, bool k_major, int64_t l0, int P,
                       int64_t lines_end, int64_t k0, int kc)
{
    int valid = lines_end - l0 < P ? (int)(lines_end - l0) : P;
    if (valid < 0) valid = 0;
#ifdef ZT_PACKED_SIMD
    if (k_major && valid == P) { /* each k: P adjacent values, the last P % 8 through a zeroed copy (nothing
                                    read past the panel's last line; the zeros stored past P are
                                    rewritten by k + 1, or land in the slack) */
        for (int k = 0; k < kc; k++) {
            const uint16_t *s = X + (k0 + k) * ld + l0;
            float *d = dst + (size_t)k * P;
            int j = 0;
            for (; j + 8 <= P; j += 8) _mm256_storeu_ps(d + j, widen8(s + j));
            if (j < P) {
                uint16_t tail[8] = {0};
                memcpy(tail, s + j, (size_t)(P - j) * sizeof *s);
                _mm256_storeu_ps(d + j, widen8(tail));
            }
        }
        return;
    }
    if (!k_major) { /* each line runs along k: 8 x 8 blocks transposed, all of a panel's before any
                       store (a block's lanes past P spill into k + 1's first values, which the
                       next j rewrites) */
        enum { BLOCKS = ((MR > NR ? MR : NR) + 7) / 8 };
        int k = 0;
        for (; k + 8 <= kc; k += 8) {
            __m256 r[BLOCKS][8];
            int nb = (P + 7) / 8;
            for (int b = 0; b < nb; b++) {
                for (int t = 0; t < 8; t++)
                    r[b][t] = 8 * b + t < valid ? widen8(X + (l0 + 8 * b + t) * ld + k0 + k) : _mm256_setzero_ps();
                transpose8(r[b]);
            }
            for (int j = 0; j < 8; j++)
                for (int b = 0; b < nb; b++) _mm256_storeu_ps(dst + (size_t)(k + j) * P + 8 * b, r[b][j]);
        }
        for (; k < kc; k++)
            for (int t = 0; t < P; t++)
                dst[(size_t)k * P + t] = t < valid ? bf16_value(X[(l0 + t) * ld + k0 + k]) : 0.0f;
        return;
    }
#endif
    for (int k = 0; k < kc; k++)
        for (int t = 0; t < P; t++) {
            int64_t at = k_major ? (k0 + k) * ld + l0 + t : (l0 + t) * ld + k0 + k;
            dst[(size_t)k * P + t] = t < valid ? bf16_value(X[at]) : 0.0f;
        }
}

/* The epilogue of one MR x NR tile of C (c, ldc) from the accumulated tile acc (MR x NR, row-major):
 * the first K block c = alpha·acc + beta·c + bias (beta == 0: c not read), a later one c = c +
 * alpha·acc. One code path for every tile, full or not (the edge tiles go through a copy). */
static void epilogue(float *c, int64_t ldc, const float *acc, float alpha, float beta, const float *bias,
                     bool first)
{
    const zt_vf va = zt_vset1(alpha), vb = zt_vset1(beta);
    for (int r = 0; r < MR; r++) {
        float *cr = c + r * ldc;
        const float *ar = acc + r * NR;
        for (int j = 0; j < NR; j += ZT_VL) {
            zt_vf x = zt_vmul(zt_vload(ar + j), va);
            if (first) {
                if (beta != 0.0f) x = zt_vadd(x, zt_vmul(vb, zt_vload(cr + j)));
                if (bias) x = zt_vadd(x, zt_vload(bias + j));
            } else {
                x = zt_vadd(zt_vload(cr + j), x);
            }
            zt_vstore(cr + j, x);
        }
    }
}

/* acc (MR x NR) = sum over k < kc of a[k][0..MR) b[k][0..NR), one FMA chain per element, on
 * vecmath.h's vectors of the level (the tile's MR x NR / ZT_VL accumulators stay in registers; one
 * lane without SIMD) */
static void micro_kernel(int kc, const float *restrict a, const float *restrict b, float *restrict acc)
{
    enum { NV = NR / ZT_VL };
    zt_vf c[MR][NV];
#pragma GCC unroll 14
    for (int r = 0; r < MR; r++)
#pragma GCC unroll 16
        for (int v = 0; v < NV; v++) c[r][v] = zt_vzero();
    for (int k = 0; k < kc; k++) {
        zt_vf bv[NV];
#pragma GCC unroll 16
        for (int v = 0; v < NV; v++) bv[v] = zt_vload(b + ZT_VL * v);
#pragma GCC unroll 14
        for (int r = 0; r < MR; r++) {
            zt_vf x = zt_vset1(a[r]);
#pragma GCC unroll 16
            for (int v = 0; v < NV; v++) c[r][v] = zt_vfmadd(x, bv[v], c[r][v]);
        }
        a += MR;
        b += NR;
    }
#pragma GCC unroll 14
    for (int r = 0; r < MR; r++)
#pragma GCC unroll 16
        for (int v = 0; v < NV; v++) zt_vstore(acc + r * NR + ZT_VL * v, c[r][v]);
}

typedef struct product {
    bool ta, tb;
    blocks blk;
    int64_t M, N, K, lda, ldb, ldc;
    float alpha, beta;
    const uint16_t *A, *B;
    float *C;
    const float *bias;
} product;

/* the rows [m0, m1) and columns [n0, n1) of C on one thread, with its workspace w */
static void product_block(const product *p, int64_t m0, int64_t m1, int64_t n0, int64_t n1, float *w)
{
    float *bp = w, *ap = w + (size_t)(p->blk.kc * p->blk.nc + 16);
    _Alignas(64) float acc[MR * NR], edge[MR * NR];
    for (int64_t jc = n0; jc < n1; jc += NC) {
        int64_t nc = n1 - jc < NC ? n1 - jc : NC;
        for (int64_t pc = 0; pc < p->K; pc += KC) {
            int kc = p->K - pc < KC ? (int)(p->K - pc) : KC;
            bool first = pc == 0;
            /* op(B)(k, n) = tb ? B[n·ldb + k] : B[k·ldb + n] */
            for (int64_t j = 0; j < nc; j += NR)
                pack_panel(bp + (size_t)j * kc, p->B, p->ldb, !p->tb, jc + j, NR, n1, pc, kc);
            for (int64_t ic = m0; ic < m1; ic += MC) {
                int64_t mc = m1 - ic < MC ? m1 - ic : MC;
                /* op(A)(m, k) = ta ? A[k·lda + m] : A[m·lda + k] */
                for (int64_t i = 0; i < mc; i += MR)
                    pack_panel(ap + (size_t)i * kc, p->A, p->lda, p->ta, ic + i, MR, m1, pc, kc);
                for (int64_t j = 0; j < nc; j += NR) {
                    int64_t n = jc + j, nn = n1 - n < NR ? n1 - n : NR;
                    const float *bias = p->bias && first ? p->bias + n : NULL;
                    for (int64_t i = 0; i < mc; i += MR) {
                        int64_t m = ic + i, mm = m1 - m < MR ? m1 - m : MR;
                        float *c = p->C + m * p->ldc + n;
                        micro_kernel(kc, ap + (size_t)i * kc, bp + (size_t)j * kc, acc);
                        if (mm == MR && nn == NR) {
                            epilogue(c, p->ldc, acc, p->alpha, p->beta, bias, first);
                            continue;
                        }
                        _Alignas(32) float bias_edge[NR] = {0};
                        memset(edge, 0, sizeof edge);
                        for (int64_t r = 0; r < mm; r++) memcpy(edge + r * NR, c + r * p->ldc, (size_t)nn * sizeof *c);
                        if (bias) memcpy(bias_edge, bias, (size_t)nn * sizeof *bias);
                        epilogue(edge, NR, acc, p->alpha, p->beta, bias ? bias_edge : NULL, first);
                        for (int64_t r = 0; r < mm; r++) memcpy(c + r * p->ldc, edge + r * NR, (size_t)nn * sizeof *c);
                    }
                }
            }
        }
    }
}

void zt_gemm_bf16_packed(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const uint16_t *A, int lda,
                         const uint16_t *B, int ldb, float beta, float *C, int ldc, const float *bias, float *work,
                         int threads)
{
    if (M <= 0 || N <= 0) return;
    product p = {.ta = trans_a, .tb = trans_b, .blk = blocks_of(M, N, K), .M = M, .N = N, .K = K,
                 .lda = lda, .ldb = ldb, .ldc = ldc, .alpha = alpha, .beta = beta, .A = A, .B = B, .C = C,
                 .bias = bias};
    if (K <= 0) { /* no k: the epilogue of an empty sum */
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = 0; n < N; n++) {
                float *c = C + m * ldc + n, x = 0.0f * alpha;
                if (beta != 0.0f) x = x + beta * *c;
                if (bias) x = x + bias[n];
                *c = x;
            }
        return;
    }
    if (threads < 1 || omp_in_parallel()) threads = 1;
    /* threads divide the output's panels: along N where each gets a few NR panels, else along M */
    int64_t n_panels = (N + NR - 1) / NR, m_panels = (M + MR - 1) / MR;
    bool by_n = n_panels >= 4 * (int64_t)threads || n_panels >= m_panels;
#pragma omp parallel num_threads(threads) if (threads > 1)
    {
        int t = omp_get_thread_num(), nt = omp_get_num_threads();
        int64_t panels = by_n ? n_panels : m_panels, size = by_n ? NR : MR;
        int64_t lo = panels * t / nt * size, hi = panels * (t + 1) / nt * size;
        int64_t end = by_n ? N : M;
        if (hi > end) hi = end;
        float *w = work + (size_t)t * thread_floats(p.blk);
        if (lo < hi) {
            if (by_n)
                product_block(&p, 0, M, lo, hi, w);
            else
                product_block(&p, lo, hi, 0, N, w);
        }
    }
}
