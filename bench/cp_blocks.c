/* cp_blocks.c - context parallelism's ring attention as the blocks it runs, against the whole-sequence
 * kernel, on one thread (issue 32: is the ring's block decomposition what makes a cp rank's attention
 * slower than half of one process's?). llama-124M's attention (12 query heads, 4 KV heads of 64), B=1,
 * whole length Tw, cp 2: each part holds chunks p and 3-p of 4 (c = Tw/4 positions each) and visits
 * the key chunks of part p, then of the other, as src/model/context_parallel.c's ring does:
 * flash_attention_block_forward + flash_attention_merge over every visible (query chunk, key chunk)
 * pair, then flash_attention_block_backward over the same pairs; against flash_attention_gqa_forward /
 * _backward over the whole sequence. Thread CPU time (what a shared machine disturbs least); the two
 * parts' blocks summed against the whole kernel (equal work: the causal half of Tw x Tw).
 *
 *   OMP_NUM_THREADS=1 build/bench/cp_blocks [Tw (4096)]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "kernels/kernels.h"
static double cpu(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static float *floats(size_t n) {
    float *p = malloc(n * sizeof(float) + 64);
    if (!p) {
        fprintf(stderr, "cp_blocks: out of memory\n");
        exit(1);
    }
    return p;
}

static float rnd(float scale) { return ((float)rand() / (float)RAND_MAX - 0.5f) * scale; }

int main(int argc, char **argv) {
    int Tw = argc > 1 ? atoi(argv[1]) : 4096, NH = 12, NKV = 4, hs = 64, QW = NH * hs, KW = NKV * hs, P = 2;
    if (Tw < 256 || Tw % 512) {
        fprintf(stderr, "usage: cp_blocks [Tw: a multiple of 512, default 4096]\n");
        return 2;
    }
    int c = Tw / (2 * P);
    size_t n = (size_t)Tw;
    print_platform();
    float *q = floats(n * QW), *k = floats(n * KW), *v = floats(n * KW), *o = floats(n * QW), *lse = floats(n * NH);
    float *dout = floats(n * QW), *dq = floats(n * QW), *dk = floats(n * KW), *dv = floats(n * KW);
    srand(1);
    for (size_t i = 0; i < n * QW; i++) q[i] = rnd(1.0f), dout[i] = rnd(1e-2f);
    for (size_t i = 0; i < n * KW; i++) k[i] = rnd(1.0f), v[i] = rnd(1.0f);
    float *scr = floats(flash_attention_block_scratch_floats(1, Tw, Tw, NH, NKV, hs));
    double t0 = cpu();
    flash_attention_gqa_forward(o, lse, scr, q, k, v, 1, Tw, NH, NKV, hs, QW, KW, false, NULL);
    double tf = cpu() - t0;
    t0 = cpu();
    flash_attention_gqa_backward(dq, dk, dv, scr, dout, q, k, v, o, lse, 1, Tw, NH, NKV, hs, QW, KW, false, NULL);
    double tb = cpu() - t0;
    printf("Tw=%d, cp %d (chunks of %d), one thread: the whole kernel forward %.3f s, backward %.3f s\n", Tw, P, c, tf,
           tb);
    float *ob = floats((size_t)c * QW), *lb = floats((size_t)c * NH), *po = floats(2 * (size_t)c * QW);
    float *pl = floats(2 * (size_t)c * NH), *tdk = floats((size_t)c * KW), *tdv = floats((size_t)c * KW);
    float *pdq = floats(2 * (size_t)c * QW), *bscr = floats(flash_attention_block_scratch_floats(1, c, c, NH, NKV, hs));
    double F = 0, Bk = 0, M = 0;
    for (int me = 0; me < P; me++) {
        int mb[2] = {me * c, (2 * P - 1 - me) * c};
        double f = 0, b = 0, m = 0;
        for (size_t i = 0; i < 2 * (size_t)c * QW; i++) po[i] = 0;
        for (size_t i = 0; i < 2 * (size_t)c * NH; i++) pl[i] = -INFINITY;
        for (int pass = 0; pass < 2; pass++) { /* forward, then backward over the same pairs */
            if (pass) memset(pdq, 0, 2 * (size_t)c * QW * sizeof(float));
            for (int step = 0; step < P; step++) {
                int src = (me - step + P) % P, sb[2] = {src * c, (2 * P - 1 - src) * c};
                for (int j = 0; j < 2; j++)
                    for (int i = 0; i < 2; i++) {
                        if (sb[i] > mb[j]) continue; /* no visible key (the ring's visible()) */
                        const float *qj = q + (size_t)mb[j] * QW, *ki = k + (size_t)sb[i] * KW, *vi = v + (size_t)sb[i] * KW;
                        float *oj = po + (size_t)j * c * QW, *lj = pl + (size_t)j * NH * c;
                        t0 = cpu();
                        if (!pass) {
                            flash_attention_block_forward(ob, lb, bscr, qj, ki, vi, 1, mb[j], c, sb[i], c, NH, NKV, hs,
                                                          QW, KW, false, NULL, Tw);
                            f += cpu() - t0;
                            t0 = cpu();
                            flash_attention_merge(oj, lj, ob, lb, 1, c, NH, hs);
                            m += cpu() - t0;
                        } else {
                            flash_attention_block_backward(pdq + (size_t)j * c * QW, tdk, tdv, bscr,
                                                           dout + (size_t)mb[j] * QW, qj, ki, vi, oj, lj, 1, mb[j], c,
                                                           sb[i], c, NH, NKV, hs, QW, KW, false, NULL, Tw);
                            b += cpu() - t0;
                        }
                    }
            }
        }
        printf("  part %d: forward blocks %.3f s + merges %.3f s, backward blocks %.3f s\n", me, f, m, b);
        F += f, Bk += b, M += m;
    }
    printf("the parts' blocks summed / the whole kernel: forward %.3f (%.3f with the merges), backward %.3f\n", F / tf,
           (F + M) / tf, Bk / tb);
    return 0;
}
