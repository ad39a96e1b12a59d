/* muon.c - Muon's arithmetic on flat fp32 data (see optim.h for the definitions): the momentum
 * and Nesterov blend on any slice (elementwise, so a piece of a matrix gives the same bits as the
 * whole), the Newton-Schulz orthogonalization of one whole matrix, and the decoupled-decay apply.
 * The orthogonalization's products are kernels/ns_product.c's, not the GEMM library's: every
 * element of a product is one chain of FMAs over k in a fixed order, whatever the thread count,
 * the rank or the level that runs it, so the bits depend only on the matrix (the engine's GEMM
 * library may change its blocking with the thread count). X X^T and A·A are symmetric: half is
 * computed and mirrored. */
#include "optim/optim.h"
#include "kernels/kernels.h"

#include <math.h>
#include <string.h>

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
    return (size_t)(2 * r * c + 2 * r * r) + zt_ns_pack_floats(r, c);
}

float zt_muon_scale(int64_t rows, int64_t cols, int mode) {
    if (mode == ZT_MUON_SCALE_RMS) return 0.2f * sqrtf((float)(rows > cols ? rows : cols));
    return sqrtf(fmaxf(1.0f, (float)rows / (float)cols));
}

void zt_muon_orthogonalize(float *x, int64_t rows, int64_t cols, int steps, bool bf16, float scale, float *work) {
    const float a = 3.4445f, b = -4.7750f, c = 2.0315f;
    const bool tr = rows > cols;
    const int64_t r = tr ? cols : rows, n = tr ? rows : cols, rn = r * n;
    float *X = work, *BX = X + rn, *A = BX + rn, *B = A + r * r, *pack = B + r * r;
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
        zt_ns_gram(A, X, r, n, pack); /* A = X X^T */
        round_if(A, (size_t)(r * r), bf16);
        zt_ns_gram(B, A, r, r, pack); /* A A (A symmetric: A A^T) */
        round_if(B, (size_t)(r * r), bf16);
#pragma omp parallel for simd schedule(static) if (r * r > 65536)
        for (int64_t i = 0; i < r * r; i++) B[i] = b * A[i] + c * B[i];
        round_if(B, (size_t)(r * r), bf16);
        zt_ns_mul(BX, B, X, r, n, pack); /* B X */
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
