/* optim_timing.c - the optimizer phase of a GPT-2 124M step (124,439,808 parameters) on this
 * machine: AdamW fused with the bf16 compute copy, and the gradient norm's chunk partials, each
 * in its earlier form (copied here: in-place stores through the cache, one norm chunk at a time)
 * and the library's (streaming stores, four norm chunks side by side), interleaved rep by rep so
 * that both see the same share of a machine other work may be using. Checks that both forms give
 * the same bits, then prints per form the median CPU time (process CPU seconds / threads) and wall
 * time, and the rate in GB/s of CPU time (AdamW: 30 bytes an element, p g m v read, p m v and the
 * bf16 copy written; the norm: 4 bytes an element read).
 *
 *   OMP_WAIT_POLICY=passive optim_timing [reps] [n]   (default 10 reps, n = 124439808)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <omp.h>

#include "kernels/kernels.h"
#include "kernels/vecmath.h"
#include "optim/optim.h"
#include "bench_util.h"

enum { MAXREP = 100 };

/* ---- the earlier forms (src/optim/adamw.c and clip.c before the streaming stores) ------------ */
#define OLD_BLOCK 8192

typedef struct old_consts {
    float b1, b2, a1, a2, eps, step, inv_sqrt_bc2, decay, grad_scale;
} old_consts;

static void old_adamw_block(float *restrict p, const float *restrict g, float *restrict m, float *restrict v,
                            size_t lo, size_t hi, const old_consts *k) {
    const float b1 = k->b1, b2 = k->b2, a1 = k->a1, a2 = k->a2, eps = k->eps, step = k->step;
    const float inv_sqrt_bc2 = k->inv_sqrt_bc2, decay = k->decay, grad_scale = k->grad_scale;
#pragma omp simd
    for (size_t i = lo; i < hi; i++) {
        float gi = g[i] * grad_scale;
        float mi = b1 * m[i] + a1 * gi;
        float vi = b2 * v[i] + a2 * gi * gi;
        m[i] = mi;
        v[i] = vi;
        p[i] = p[i] * decay - step * mi / (sqrtf(vi) * inv_sqrt_bc2 + eps);
    }
}

static void old_adamw_update_round(float *p, const float *g, float *m, float *v, size_t n, float lr, float b1,
                                   float b2, float eps, float wd, float grad_scale, int64_t t, uint16_t *lp) {
    const float bc1 = 1.0f - powf(b1, (float)t), bc2 = 1.0f - powf(b2, (float)t);
    const old_consts k = {.b1 = b1, .b2 = b2, .a1 = 1.0f - b1, .a2 = 1.0f - b2, .eps = eps, .step = lr / bc1,
                          .inv_sqrt_bc2 = 1.0f / sqrtf(bc2), .decay = 1.0f - lr * wd, .grad_scale = grad_scale};
#pragma omp parallel if (n >= OLD_BLOCK)
    {
        size_t i0, i1;
        zt_split_range(n, OLD_BLOCK, zt_thread_num(), zt_num_threads(), &i0, &i1);
        for (size_t lo = i0; lo < i1; lo += OLD_BLOCK) {
            size_t hi = lo + OLD_BLOCK < i1 ? lo + OLD_BLOCK : i1;
            old_adamw_block(p, g, m, v, lo, hi, &k);
            zt_round_to_lp_serial(ZT_LP_BF16, lp + lo, p + lo, hi - lo);
        }
    }
}

static void old_chunk_sum_squares(const float *x, int64_t n, int64_t chunk, double *partial) {
    int64_t nchunks = (n + chunk - 1) / chunk;
#pragma omp parallel for schedule(static) if (n > 65536)
    for (int64_t c = 0; c < nchunks; c++) {
        int64_t lo = c * chunk, hi = lo + chunk < n ? lo + chunk : n;
        double acc[8] = {0};
        int64_t i = lo;
        for (; i + 8 <= hi; i += 8)
            for (int k = 0; k < 8; k++) acc[k] += (double)x[i + k] * (double)x[i + k];
        for (; i < hi; i++) acc[i & 7] += (double)x[i] * (double)x[i];
        partial[c] = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    }
}

/* ---- timing ---------------------------------------------------------------------------------- */
static double wall[4][MAXREP], cpu[4][MAXREP];

#define TIME(slot, r, call)                                                                        \
    do {                                                                                           \
        double c0_ = cpu_s(), t0_ = now_s();                                                       \
        call;                                                                                      \
        wall[slot][r] = now_s() - t0_;                                                             \
        cpu[slot][r] = (cpu_s() - c0_) / omp_get_max_threads();                                    \
    } while (0)

static void row(const char *name, int slot, int reps, double bytes) {
    double w = median(wall[slot], reps), c = median(cpu[slot], reps);
    printf("%-44s cpu %7.2f ms  wall %7.2f ms (best %7.2f)  %6.1f GB/s of cpu time\n", name, 1e3 * c, 1e3 * w,
           1e3 * wall[slot][0], bytes / c / 1e9);
}

int main(int argc, char **argv) {
    int reps = argc > 1 ? atoi(argv[1]) : 10;
    size_t n = argc > 2 ? (size_t)atoll(argv[2]) : 124439808;
    if (reps < 1 || reps > MAXREP || n < 1) {
        fprintf(stderr, "usage: optim_timing [reps 1..%d] [n >= 1]\n", MAXREP);
        return 2;
    }
    /* two copies of the state, one per form, so that each rep starts from where that form left it */
    float *p = buf(n), *g = buf(n), *m = buf(n), *v = buf(n);
    for (size_t i = 0; i < n; i++) v[i] = fabsf(v[i]);
    float *p2 = buf(n), *m2 = buf(n), *v2 = buf(n);
    memcpy(p2, p, n * 4), memcpy(m2, m, n * 4), memcpy(v2, v, n * 4);
    uint16_t *lp = malloc(n * 2), *lp2 = malloc(n * 2);
    size_t nch = (n + 1023) / 1024;
    double *part = malloc(nch * sizeof *part), *part2 = malloc(nch * sizeof *part2);
    if (!lp || !lp2 || !part || !part2) {
        fprintf(stderr, "optim_timing: out of memory\n");
        return 7;
    }
    memset(lp, 0, n * 2), memset(lp2, 0, n * 2);
    printf("optim_timing: n %zu, %d threads, %d reps interleaved\n", n, omp_get_max_threads(), reps);
    for (int r = -1; r < reps; r++) { /* r = -1: warm-up, not kept */
        int k = r < 0 ? 0 : r;
        TIME(0, k, old_adamw_update_round(p, g, m, v, n, 1e-6f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.7f, 1000 + r, lp));
        TIME(1, k, zt_adamw_update_round(p2, g, m2, v2, n, 1e-6f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.7f, 1000 + r,
                                         ZT_LP_BF16, lp2));
        TIME(2, k, old_chunk_sum_squares(g, (int64_t)n, 1024, part));
        TIME(3, k, zt_chunk_sum_squares(g, (int64_t)n, 1024, part2));
        if (r < 0 || r == reps - 1) {
            int same = !memcmp(p, p2, n * 4) && !memcmp(m, m2, n * 4) && !memcmp(v, v2, n * 4) &&
                       !memcmp(lp, lp2, n * 2) && !memcmp(part, part2, nch * sizeof *part);
            if (!same) {
                fprintf(stderr, "optim_timing: the two forms' bits differ\n");
                return 1;
            }
        }
    }
    printf("both forms: the same bits (p, m, v, the bf16 copy, the norm partials)\n");
    row("AdamW + bf16 copy, in place (before)", 0, reps, 30.0 * n);
    row("AdamW + bf16 copy, streaming stores (now)", 1, reps, 30.0 * n);
    row("norm partials, one chunk at a time (before)", 2, reps, 4.0 * n);
    row("norm partials, four chunks at a time (now)", 3, reps, 4.0 * n);
    double before = median(cpu[0], reps) + median(cpu[2], reps), now = median(cpu[1], reps) + median(cpu[3], reps);
    printf("optimizer + norm: %.2f -> %.2f ms of cpu time (%.0f%% less)\n", 1e3 * before, 1e3 * now,
           100 * (1 - now / before));
    free(p), free(g), free(m), free(v), free(p2), free(m2), free(v2), free(lp), free(lp2), free(part), free(part2);
    return 0;
}
