/* ns_product.c - Muon's Newton-Schulz products on this machine: the packed kernel of
 * src/kernels/ns_product.c (zt_ns_gram, zt_ns_mul) against the product muon.c used before it (a
 * dot-product formulation, 4 x 2 blocked: copied here) and against the engine's GEMM (zt_gemm_f32:
 * oneDNN or OpenBLAS, whose bits may change with the thread count), on the three products of one
 * iteration for an r x n matrix: X X^T (r x r over n), A·A (r x r over r), B X (r x n over r); then
 * one whole NS5 (zt_muon_orthogonalize, 5 steps) per shape.
 *
 * GFLOP/s = 2·M·N·K / seconds of the whole product, also for the symmetric ones the kernel computes
 * half of (so their rate says how fast the product is had, not how fast the FMAs run). Each cell is
 * the best call over PASSES interleaved passes of REPS calls; 1 and 2 threads (OpenMP). Prints the
 * CPU, the kernels' level, the GEMM path, the load average and what other processes took meanwhile.
 *
 *   OMP_WAIT_POLICY=passive build/bench/ns_product [passes]      (ZT_ISA=avx2 for the AVX2 kernel)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <omp.h>

#include "bench_util.h"
#include "kernels/gemm.h"
#include "kernels/kernels.h"
#include "optim/optim.h"

enum { REPS = 3 };

/* ---- the earlier product (src/optim/muon.c before ns_product.c) ------------------------------ */
typedef float v8 __attribute__((vector_size(32)));
static inline v8 load8(const float *p)
{
    v8 x;
    memcpy(&x, p, sizeof x);
    return x;
}
static inline float finish(v8 a, const float *x, const float *y, int64_t k0, int64_t K)
{
    float s = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
    for (int64_t k = k0; k < K; k++) s += x[k] * y[k];
    return s;
}
static float dot1(const float *x, const float *y, int64_t K)
{
    v8 a = {0};
    int64_t k = 0;
    for (; k + 8 <= K; k += 8) a += load8(x + k) * load8(y + k);
    return finish(a, x, y, k, K);
}
static void old_gemm_nt(float *restrict C, const float *restrict A, const float *restrict B, int64_t M, int64_t N,
                        int64_t K)
{
    int64_t mb = M / 4;
#pragma omp parallel for schedule(static) if (M * N * K > 262144)
    for (int64_t bi = 0; bi < mb + (M % 4 ? 1 : 0); bi++) {
        int64_t i0 = bi * 4;
        if (i0 + 4 > M) {
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

/* ---- other processes' CPU seconds (from /proc/stat and /proc/self/stat) ----------------------- */
static void cpu_seconds(double *all, double *self)
{
    *all = *self = 0;
    FILE *f = fopen("/proc/stat", "r");
    if (f) {
        unsigned long long v[8] = {0};
        if (fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6],
                   &v[7]) == 8)
            *all = (double)(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / 100.0;
        fclose(f);
    }
    *self = cpu_s();
}

static void print_loadavg(const char *when)
{
    char line[128] = "?";
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (!fgets(line, sizeof line, f)) line[0] = 0;
        fclose(f);
    }
    line[strcspn(line, "\n")] = 0;
    printf("load average %s: %s\n", when, line);
}

/* ---- the products ------------------------------------------------------------------------------ */
enum { PROD_GRAM_X, PROD_GRAM_A, PROD_MUL, NPROD };
enum { IMPL_NEW, IMPL_OLD, IMPL_BLAS, NIMPL };
static const char *PROD_NAME[NPROD] = {"X X^T", "A A", "B X"};
static const char *IMPL_NAME[NIMPL] = {"packed (new)", "dot (old)", "engine GEMM"};

typedef struct {
    int r, n;
    float *X, *Xt, *A, *B, *C, *pack;
} operands;

static void run(const operands *o, int prod, int impl)
{
    const int r = o->r, n = o->n;
    switch (prod) {
    case PROD_GRAM_X:
        if (impl == IMPL_NEW) zt_ns_gram(o->C, o->X, r, n, o->pack);
        else if (impl == IMPL_OLD) old_gemm_nt(o->C, o->X, o->X, r, r, n);
        else zt_gemm_f32(false, true, r, r, n, 1.0f, o->X, n, o->X, n, 0.0f, o->C, r);
        break;
    case PROD_GRAM_A:
        if (impl == IMPL_NEW) zt_ns_gram(o->C, o->A, r, r, o->pack);
        else if (impl == IMPL_OLD) old_gemm_nt(o->C, o->A, o->A, r, r, r);
        else zt_gemm_f32(false, false, r, r, r, 1.0f, o->A, r, o->A, r, 0.0f, o->C, r);
        break;
    default: /* the old one transposed X first (muon.c), timed with it */
        if (impl == IMPL_NEW) zt_ns_mul(o->C, o->B, o->X, r, n, o->pack);
        else if (impl == IMPL_OLD) {
            for (int i = 0; i < r; i++)
                for (int j = 0; j < n; j++) o->Xt[(size_t)j * r + i] = o->X[(size_t)i * n + j];
            old_gemm_nt(o->C, o->B, o->Xt, r, n, r);
        } else zt_gemm_f32(false, false, r, n, r, 1.0f, o->B, r, o->X, n, 0.0f, o->C, n);
    }
}

static double flops(const operands *o, int prod)
{
    double r = o->r, n = o->n;
    return prod == PROD_GRAM_X ? 2 * r * r * n : prod == PROD_GRAM_A ? 2 * r * r * r : 2 * r * r * n;
}

int main(int argc, char **argv)
{
    const int passes = argc > 1 ? atoi(argv[1]) : 3;
    static const int shapes[][2] = {{768, 768}, {768, 3072}, {256, 1024}};
    print_platform();
    printf("fp32 GEMM path: %s\n", zt_gemm_path(false));
    print_loadavg("at start");
    double all0, self0, wall0 = now_s();
    cpu_seconds(&all0, &self0);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        operands o = {.r = shapes[s][0], .n = shapes[s][1]};
        const int r = o.r, n = o.n;
        o.X = buf((size_t)r * n), o.Xt = buf((size_t)r * n), o.A = buf((size_t)r * r), o.B = buf((size_t)r * r);
        o.C = buf((size_t)r * n), o.pack = buf(zt_ns_pack_floats(r, n));
        for (int i = 0; i < r; i++) /* A and B symmetric, as in the iteration */
            for (int j = 0; j < i; j++) o.A[i * r + j] = o.A[j * r + i], o.B[i * r + j] = o.B[j * r + i];
        printf("\n%d x %d (r = %d, n = %d)\n", r, n, r, n);
        printf("  %-6s %-14s %14s %14s\n", "product", "", "1 thread", "2 threads");
        double best[NPROD][NIMPL][2];
        for (int p = 0; p < NPROD; p++)
            for (int i = 0; i < NIMPL; i++) best[p][i][0] = best[p][i][1] = 1e30;
        for (int pass = 0; pass < passes; pass++)
            for (int th = 0; th < 2; th++) {
                omp_set_num_threads(th + 1);
                for (int p = 0; p < NPROD; p++)
                    for (int i = 0; i < NIMPL; i++) {
                        run(&o, p, i); /* warm-up */
                        for (int k = 0; k < REPS; k++) {
                            double t0 = now_s();
                            run(&o, p, i);
                            double t = now_s() - t0;
                            if (t < best[p][i][th]) best[p][i][th] = t;
                        }
                    }
            }
        for (int p = 0; p < NPROD; p++)
            for (int i = 0; i < NIMPL; i++)
                printf("  %-7s %-14s %9.1f GFLOP/s %9.1f GFLOP/s\n", i == 0 ? PROD_NAME[p] : "", IMPL_NAME[i],
                       flops(&o, p) / best[p][i][0] * 1e-9, flops(&o, p) / best[p][i][1] * 1e-9);
        /* one NS5 of a matrix of this shape (the optimizer's call, 5 steps, fp32) */
        float *w = buf(zt_muon_workspace_floats(r, n)), *x = buf((size_t)r * n);
        for (int th = 0; th < 2; th++) {
            omp_set_num_threads(th + 1);
            double b = 1e30;
            for (int k = 0; k < passes; k++) {
                memcpy(x, o.X, sizeof(float) * r * n);
                double t0 = now_s();
                zt_muon_orthogonalize(x, r, n, 5, false, 1.0f, w);
                double t = now_s() - t0;
                if (t < b) b = t;
            }
            double old = 5 * (best[PROD_GRAM_X][IMPL_OLD][th] + best[PROD_GRAM_A][IMPL_OLD][th] +
                              best[PROD_MUL][IMPL_OLD][th]);
            printf("  NS5 (5 steps), %d thread%s: %.1f ms (the old products alone: %.1f ms)\n", th + 1, th ? "s" : "",
                   b * 1e3, old * 1e3);
        }
        free(w), free(x), free(o.X), free(o.Xt), free(o.A), free(o.B), free(o.C), free(o.pack);
    }
    double all1, self1;
    cpu_seconds(&all1, &self1);
    printf("\nother processes meanwhile: %.2f CPUs over %.0f s\n", ((all1 - all0) - (self1 - self0)) / (now_s() - wall0),
           now_s() - wall0);
    print_loadavg("at end");
    return 0;
}
