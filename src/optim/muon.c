/* muon.c - Muon's arithmetic on flat fp32 data (see optim.h for the definitions): the momentum
 * and Nesterov blend on any slice (elementwise, so a piece of a matrix gives the same bits as the
 * whole), the Newton-Schulz orthogonalization of one whole matrix, and the decoupled-decay apply.
 * The orthogonalization's products are this file's own: every element of a product is one dot
 * product summed in a fixed order (8 lanes over k, then a fixed pairwise combination, then the
 * tail), whatever the thread count or the rank that runs it, so the bits depend only on the
 * matrix (the engine's GEMM library may change its blocking with the thread count). */
#include "optim/optim.h"
#include "kernels/kernels.h"

#include <math.h>
#include <string.h>

typedef float v8 __attribute__((vector_size(32)));

static inline v8 load8(const float *p) {
    v8 x;
    memcpy(&x, p, sizeof x);
    return x;
}

/* the fixed combination of one element's 8 lanes and its tail */
static inline float finish(v8 a, const float *x, const float *y, int64_t k0, int64_t K) {
    float s = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
    for (int64_t k = k0; k < K; k++) s += x[k] * y[k];
    return s;
}

static float dot1(const float *x, const float *y, int64_t K) {
    v8 a = {0};
    int64_t k = 0;
    for (; k + 8 <= K; k += 8) a += load8(x + k) * load8(y + k);
    return finish(a, x, y, k, K);
}

/* C (M x N, row stride N) = A (M x K) B^T, B (N x K), both row-major: element (i, j) is
 * dot1(A_i, B_j) exactly, computed 4 rows x 2 columns at a time where the shape allows (the same
 * operations per element). Rows of C are split among threads. */
static void gemm_nt(float *restrict C, const float *restrict A, const float *restrict B, int64_t M, int64_t N,
                    int64_t K) {
    int64_t mb = M / 4;
#pragma omp parallel for schedule(static) if (M * N * K > 262144)
    for (int64_t bi = 0; bi < mb + (M % 4 ? 1 : 0); bi++) {
        int64_t i0 = bi * 4;
        if (i0 + 4 > M) { /* the last rows */
            for (int64_t i = i0; i < M; i++)
                for (int64_t j = 0; j < N; j++) C[i * N + j] = dot1(A + i * K, B + j * K, K);
            continue;
        }
        const float *a0 = A + i0 * K, *a1 = a0 + K, *a2 = a1 + K, *a3 = a2 + K;
        int64_t j = 0;
        for (; j + 2 <= N; j += 2) {
            const float *b0 = B + j * K, *b1 = b0 + K;
            v8 c00 = {0}, c01 = {0}, c10 = {0}, c11 = {0}, c20 = {0}, c21 = {0}, c30 = {0}, c31 = {0};
            int64_t k = 0;
            for (; k + 8 <= K; k += 8) {
                v8 y0 = load8(b0 + k), y1 = load8(b1 + k), x;
                x = load8(a0 + k);
                c00 += x * y0, c01 += x * y1;
                x = load8(a1 + k);
                c10 += x * y0, c11 += x * y1;
                x = load8(a2 + k);
                c20 += x * y0, c21 += x * y1;
                x = load8(a3 + k);
                c30 += x * y0, c31 += x * y1;
            }
            float *c = C + i0 * N + j;
            c[0] = finish(c00, a0, b0, k, K), c[1] = finish(c01, a0, b1, k, K);
            c[N] = finish(c10, a1, b0, k, K), c[N + 1] = finish(c11, a1, b1, k, K);
            c[2 * N] = finish(c20, a2, b0, k, K), c[2 * N + 1] = finish(c21, a2, b1, k, K);
            c[3 * N] = finish(c30, a3, b0, k, K), c[3 * N + 1] = finish(c31, a3, b1, k, K);
        }
        for (; j < N; j++)
            for (int64_t i = i0; i < i0 + 4; i++) C[i * N + j] = dot1(A + i * K, B + j * K, K);
    }
}

static void transpose(float *restrict dst, const float *restrict src, int64_t rows, int64_t cols) {
#pragma omp parallel for schedule(static) if (rows * cols > 65536)
    for (int64_t i0 = 0; i0 < rows; i0 += 32)
        for (int64_t j0 = 0; j0 < cols; j0 += 32)
            for (int64_t i = i0; i < i0 + 32 && i < rows; i++)
                for (int64_t j = j0; j < j0 + 32 && j < cols; j++) dst[j * rows + i] = src[i * cols + j];
}

static void round_if(float *x, size_t n, bool bf16) {
    if (bf16) zt_round_bf16(x, n);
}

size_t zt_muon_workspace_floats(int64_t rows, int64_t cols) {
    int64_t r = rows < cols ? rows : cols, c = rows < cols ? cols : rows;
    return (size_t)(3 * r * c + 2 * r * r);
}

float zt_muon_scale(int64_t rows, int64_t cols, int mode) {
    if (mode == ZT_MUON_SCALE_RMS) return 0.2f * sqrtf((float)(rows > cols ? rows : cols));
    return sqrtf(fmaxf(1.0f, (float)rows / (float)cols));
}

void zt_muon_orthogonalize(float *x, int64_t rows, int64_t cols, int steps, bool bf16, float scale, float *work) {
    const float a = 3.4445f, b = -4.7750f, c = 2.0315f;
    const bool tr = rows > cols;
    const int64_t r = tr ? cols : rows, n = tr ? rows : cols, rn = r * n;
    float *X = work, *Xt = X + rn, *BX = Xt + rn, *A = BX + rn, *B = A + r * r;
    if (tr) transpose(X, x, rows, cols);
    else memcpy(X, x, (size_t)rn * sizeof *X);
    /* the Frobenius norm: fixed chunks summed in order, in double */
    int64_t nchunks = (rn + 1023) / 1024;
    double sumsq = 0;
    for (int64_t ch = 0; ch < nchunks; ch++) {
        double part;
        int64_t lo = ch * 1024, len = rn - lo < 1024 ? rn - lo : 1024;
        zt_chunk_sum_squares(X + lo, len, 1024, &part);
        sumsq += part;
    }
    const float denom = (float)(sqrt(sumsq) + 1e-7);
#pragma omp parallel for simd schedule(static) if (rn > 65536)
    for (int64_t i = 0; i < rn; i++) X[i] = X[i] / denom;
    round_if(X, (size_t)rn, bf16);
    for (int s = 0; s < steps; s++) {
        gemm_nt(A, X, X, r, r, n); /* A = X X^T */
        round_if(A, (size_t)(r * r), bf16);
        gemm_nt(B, A, A, r, r, r); /* A A (A symmetric: A A^T) */
        round_if(B, (size_t)(r * r), bf16);
#pragma omp parallel for simd schedule(static) if (r * r > 65536)
        for (int64_t i = 0; i < r * r; i++) B[i] = b * A[i] + c * B[i];
        round_if(B, (size_t)(r * r), bf16);
        transpose(Xt, X, r, n);
        gemm_nt(BX, B, Xt, r, n, r); /* B X */
        round_if(BX, (size_t)rn, bf16);
#pragma omp parallel for simd schedule(static) if (rn > 65536)
        for (int64_t i = 0; i < rn; i++) X[i] = a * X[i] + BX[i];
        round_if(X, (size_t)rn, bf16);
    }
    if (tr) transpose(x, X, r, n);
    else memcpy(x, X, (size_t)rn * sizeof *x);
#pragma omp parallel for simd schedule(static) if (rn > 65536)
    for (int64_t i = 0; i < rn; i++) x[i] *= scale;
}

void zt_muon_momentum(const float *restrict g, float *restrict m, float *restrict u, size_t n, float beta,
                      bool nesterov, float grad_scale) {
    const float a = 1.0f - beta;
#pragma omp parallel for simd schedule(static) if (n > 65536)
    for (size_t i = 0; i < n; i++) {
        float gi = g[i] * grad_scale;
        float mi = beta * m[i] + a * gi;
        m[i] = mi;
        u[i] = nesterov ? beta * mi + a * gi : mi;
    }
}

void zt_muon_apply(float *restrict p, const float *restrict o, size_t n, float lr, float wd) {
    const float decay = 1.0f - lr * wd;
#pragma omp parallel for simd schedule(static) if (n > 65536)
    for (size_t i = 0; i < n; i++) p[i] = p[i] * decay - lr * o[i];
}
