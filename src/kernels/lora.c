/* lora.c - a LoRA adapter beside a Linear (kernels.h, lora section): forward and backward of
 *
 *   out (N,OC) += s · drop(x)·Aᵀ·Bᵀ          A (r,C), B (OC,r), s = alpha / r
 *
 * in fp32 (kind 0) and in the low-precision compute of the Linear it adapts (kind ZT_LP_BF16 or
 * ZT_LP_FP16), where x is the Linear's saved operand (rnd(x), matmul_forward_lp's inp_lp), A and
 * B their compute copies, and every product rounds its operands as matmul_lp.c does:
 *
 *   forward   xd = drop(x) (rounded again under lp: 1/(1-p) is not a bf16 factor)
 *             u  = xd·Aᵀ (N,r), fp32;  ul = rnd(u)
 *             out += s · ul·Bᵀ                                  gemm, alpha s, beta 1
 *   backward  xd, u, ul recomputed (r columns: a product of r/OC of the Linear's own)
 *             dl = rnd(dout) (staging)
 *             dB += s · dlᵀ·ul;  du = s · dl·B (N,r);  dul = rnd(du)
 *             dA += dulᵀ·xd
 *             dx += drop'(dul·A)                                (the same mask, times 1/(1-p))
 *
 * Nothing is saved between forward and backward: u is recomputed and the dropout mask is a pure
 * function of (key, element index) (splitmix64 of the two; kept when its upper 32 bits are >= p
 * times 2^32), so a recomputation, another strategy or another world split draws the same mask.
 * key 0 or p 0: no dropout. Scratch (lora_scratch_floats): xd or drop'(...) (N,C) when p > 0,
 * then u, ul, du, dul (N,r) each, every region 64-byte aligned. The elementwise loops use a
 * static OpenMP partition (the same bits for any thread count); the products follow gemm.h.
 */
#include "kernels/gemm.h"
#include "kernels/kernels.h"

#include <string.h>

static size_t pad16(size_t n) { return (n + 15) & ~(size_t)15; }

size_t lora_scratch_floats(int N, int C, int r, float p) {
    return (p > 0.0f ? pad16((size_t)N * C) : 0) + 4 * pad16((size_t)N * r);
}

static uint64_t splitmix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

bool lora_dropout_keep(uint64_t key, size_t i, float p) {
    uint32_t threshold = (uint32_t)((double)p * 4294967296.0);
    return (uint32_t)(splitmix64(key ^ splitmix64((uint64_t)i)) >> 32) >= threshold;
}

/* C = alpha op(A) op(B) + beta C on operands of kind: fp32, bf16 bits, or fp32 holding fp16 values */
static void product(int kind, bool ta, bool tb, int M, int N, int K, float alpha, const void *A, int lda,
                    const void *B, int ldb, float beta, float *C, int ldc) {
    if (kind == ZT_LP_BF16) zt_gemm_bf16(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, NULL);
    else zt_gemm_f32(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

/* dst = src in kind's format (a copy under fp32) */
static void round_to(int kind, void *dst, const float *src, size_t n) {
    if (kind) zt_round_to_lp((zt_lp_kind)kind, dst, src, n);
    else memcpy(dst, src, n * sizeof(float));
}

/* element i of an operand of kind, as fp32 */
static float widen(int kind, const void *x, size_t i) {
    if (kind != ZT_LP_BF16) return ((const float *)x)[i];
    uint32_t bits = (uint32_t)((const uint16_t *)x)[i] << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* xd (N,C) = drop(x), in kind's format, rounded like every operand */
static void dropout_input(int kind, void *xd, const void *x, float p, uint64_t key, size_t n) {
    float inv = 1.0f / (1.0f - p);
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        float v = lora_dropout_keep(key, i, p) ? widen(kind, x, i) * inv : 0.0f;
        if (kind == ZT_LP_BF16) zt_f32_to_bf16_serial((uint16_t *)xd + i, &v, 1);
        else if (kind == ZT_LP_FP16) zt_round_fp16((float *)xd + i, &v, 1);
        else ((float *)xd)[i] = v;
    }
}

typedef struct regions {
    void *xd;           /* drop(x) in kind's format, or x itself without dropout */
    float *wide;        /* the (N,C) region (dropout only) */
    float *u, *du;      /* (N,r) fp32 */
    void *ul, *dul;     /* (N,r) rounded (u, du themselves under fp32) */
} regions;

static regions layout(float *scratch, int kind, const void *x, float p, uint64_t key, int N, int C, int r) {
    bool drop = p > 0.0f && key != 0;
    regions g = {0};
    float *at = scratch;
    if (p > 0.0f) {
        g.wide = at;
        at += pad16((size_t)N * C);
    }
    size_t nr = pad16((size_t)N * r);
    g.u = at, g.ul = kind ? (void *)(at + nr) : at, g.du = at + 2 * nr, g.dul = kind ? (void *)(at + 3 * nr) : at + 2 * nr;
    g.xd = drop ? (void *)g.wide : (void *)x;
    if (drop) dropout_input(kind, g.xd, x, p, key, (size_t)N * C);
    return g;
}

/* u = xd·Aᵀ, ul = rnd(u) */
static void down(const regions *g, int kind, const void *A, int N, int C, int r) {
    product(kind, false, true, N, r, C, 1.0f, g->xd, C, A, C, 0.0f, g->u, r);
    if (kind) round_to(kind, g->ul, g->u, (size_t)N * r);
}

void lora_forward(float *out, float *scratch, const void *x, const void *A, const void *B, float scale, float p,
                  uint64_t key, int N, int C, int OC, int r, int kind) {
    regions g = layout(scratch, kind, x, p, key, N, C, r);
    down(&g, kind, A, N, C, r);
    product(kind, false, true, N, OC, r, scale, g.ul, r, B, r, 1.0f, out, OC);
}

void lora_backward(float *dx, float *dA, float *dB, float *scratch, void *staging, const float *dout, const void *x,
                   const void *A, const void *B, float scale, float p, uint64_t key, int N, int C, int OC, int r,
                   int kind) {
    regions g = layout(scratch, kind, x, p, key, N, C, r);
    down(&g, kind, A, N, C, r);
    const void *dl = dout;
    if (kind) {
        round_to(kind, staging, dout, (size_t)N * OC);
        dl = staging;
    }
    if (dB) product(kind, true, false, OC, r, N, scale, dl, OC, g.ul, r, 1.0f, dB, r);
    product(kind, false, false, N, r, OC, scale, dl, OC, B, r, 0.0f, g.du, r);
    if (kind) round_to(kind, g.dul, g.du, (size_t)N * r);
    if (dA) product(kind, true, false, r, C, N, 1.0f, g.dul, r, g.xd, C, 1.0f, dA, C);
    if (!dx) return;
    if (g.xd == x) { /* no dropout: straight into dx */
        product(kind, false, false, N, C, r, 1.0f, g.dul, r, A, C, 1.0f, dx, C);
        return;
    }
    float *t = g.wide, inv = 1.0f / (1.0f - p); /* xd is no longer needed */
    product(kind, false, false, N, C, r, 1.0f, g.dul, r, A, C, 0.0f, t, C);
    size_t n = (size_t)N * C;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++)
        if (lora_dropout_keep(key, i, p)) dx[i] += t[i] * inv;
}
