/* optim_timing.c - the optimizer phase of a GPT-2 124M step (124,439,808 parameters) on this
 * machine: AdamW fused with the bf16 compute copy in three forms, interleaved rep by rep so that
 * they see the same share of a machine other work may be using: the library's (src/optim/adamw.c:
 * the copy written with streaming stores), the earlier one (copied here: every store through the
 * cache) and one that also streams p, m and v out of a buffer (copied here; slower, so not used);
 * and the gradient norm's chunk partials (zt_chunk_sum_squares). Checks that the AdamW forms give
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

/* every result streamed: the block's p, m, v into buffers (the same loop body), rounded from there,
 * all four copied out with streaming stores (whole lines; partial ones with ordinary stores) */
#define ALL_BLOCK 1024

static void all_block_to(float *restrict po, float *restrict mo, float *restrict vo, const float *restrict p,
                         const float *restrict g, const float *restrict m, const float *restrict v, size_t n,
                         const old_consts *k) {
    const float b1 = k->b1, b2 = k->b2, a1 = k->a1, a2 = k->a2, eps = k->eps, step = k->step;
    const float inv_sqrt_bc2 = k->inv_sqrt_bc2, decay = k->decay, grad_scale = k->grad_scale;
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
        float gi = g[i] * grad_scale;
        float mi = b1 * m[i] + a1 * gi;
        float vi = b2 * v[i] + a2 * gi * gi;
        mo[i] = mi;
        vo[i] = vi;
        po[i] = p[i] * decay - step * mi / (sqrtf(vi) * inv_sqrt_bc2 + eps);
    }
}

static void all_adamw_update_round(float *p, const float *g, float *m, float *v, size_t n, float lr, float b1,
                                   float b2, float eps, float wd, float grad_scale, int64_t t, uint16_t *lp) {
    const float bc1 = 1.0f - powf(b1, (float)t), bc2 = 1.0f - powf(b2, (float)t);
    const old_consts k = {.b1 = b1, .b2 = b2, .a1 = 1.0f - b1, .a2 = 1.0f - b2, .eps = eps, .step = lr / bc1,
                          .inv_sqrt_bc2 = 1.0f / sqrtf(bc2), .decay = 1.0f - lr * wd, .grad_scale = grad_scale};
#pragma omp parallel
    {
        _Alignas(64) float po[ALL_BLOCK], mo[ALL_BLOCK], vo[ALL_BLOCK];
        _Alignas(64) uint16_t lo_buf[ALL_BLOCK];
        size_t i0, i1;
        zt_split_range(n, OLD_BLOCK, zt_thread_num(), zt_num_threads(), &i0, &i1);
        for (size_t lo = i0; lo < i1; lo += ALL_BLOCK) {
            size_t len = lo + ALL_BLOCK < i1 ? ALL_BLOCK : i1 - lo;
            all_block_to(po, mo, vo, p + lo, g + lo, m + lo, v + lo, len, &k);
            zt_round_to_lp_serial(ZT_LP_BF16, lo_buf, po, len);
            zt_copy_streaming(m + lo, mo, len * 4), zt_copy_streaming(v + lo, vo, len * 4);
            zt_copy_streaming(p + lo, po, len * 4), zt_copy_streaming(lp + lo, lo_buf, len * 2);
        }
        zt_streaming_fence();
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
    print_platform();
    /* a copy of the state per AdamW form, so that each rep starts from where that form left it */
    float *g = buf(n), *p[3], *m[3], *v[3];
    uint16_t *lp[3];
    for (int f = 0; f < 3; f++) {
        p[f] = buf(n), m[f] = buf(n), v[f] = buf(n), lp[f] = malloc(n * 2);
        if (!lp[f]) {
            fprintf(stderr, "optim_timing: out of memory\n");
            return 7;
        }
        for (size_t i = 0; i < n; i++) v[f][i] = fabsf(v[f][i]);
        memset(lp[f], 0, n * 2);
    }
    size_t nch = (n + 1023) / 1024;
    double *part = malloc(nch * sizeof *part);
    if (!part) return 7;
    printf("optim_timing: n %zu, %d threads, %d reps interleaved\n", n, omp_get_max_threads(), reps);
    for (int r = -1; r < reps; r++) { /* r = -1: warm-up, not kept */
        int k = r < 0 ? 0 : r;
        TIME(0, k, old_adamw_update_round(p[0], g, m[0], v[0], n, 1e-6f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.7f, 1000 + r, lp[0]));
        TIME(1, k, zt_adamw_update_round(p[1], g, m[1], v[1], n, 1e-6f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.7f, 1000 + r,
                                         ZT_LP_BF16, lp[1]));
        TIME(2, k, all_adamw_update_round(p[2], g, m[2], v[2], n, 1e-6f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.7f, 1000 + r, lp[2]));
        TIME(3, k, zt_chunk_sum_squares(g, (int64_t)n, 1024, part));
    }
    for (int f = 1; f < 3; f++)
        if (memcmp(p[0], p[f], n * 4) || memcmp(m[0], m[f], n * 4) || memcmp(v[0], v[f], n * 4) ||
            memcmp(lp[0], lp[f], n * 2)) {
            fprintf(stderr, "optim_timing: AdamW form %d's bits differ from the earlier form's\n", f);
            return 1;
        }
    printf("the three AdamW forms: the same bits (p, m, v, the bf16 copy)\n");
    row("AdamW + bf16 copy, cached stores (before)", 0, reps, 30.0 * n);
    row("AdamW + bf16 copy, copy streamed (library)", 1, reps, 30.0 * n);
    row("AdamW + bf16 copy, all four streamed", 2, reps, 30.0 * n);
    row("norm partials (zt_chunk_sum_squares)", 3, reps, 4.0 * n);
    free(g), free(part);
    for (int f = 0; f < 3; f++) free(p[f]), free(m[f]), free(v[f]), free(lp[f]);
    return 0;
}
