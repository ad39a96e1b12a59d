/* flash_timing.c - flash attention's forward + backward alone (flash_attention_gqa_*), for A/B runs
 * of a change to src/kernels/flash_attention.c: GPT-2's W1 heads (B=4, T=256, 12 heads of 64),
 * llama-124M's GQA 12/4 at the same shape, and GQA 12/4 at B=1, T=2048; fp32 and bf16 products.
 * Per case: the median forward and backward and the best and median forward + backward over N
 * calls after one warm-up, in process CPU time / threads (ms: on a shared machine the kernel's own
 * time, where the wall time is not), and a hash of out, lse, dq, dk, dv (two builds with the same
 * hashes computed the same bits). Run the old and the new binary interleaved, several rounds:
 *
 *   OMP_WAIT_POLICY=passive OMP_NUM_THREADS=2 build/bench/flash_timing [N]   (default 10)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <omp.h>

#include "kernels/kernels.h"

static double cpu_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static float *buf(size_t n)
{
    float *p = aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < n; i++)
        p[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
    return p;
}

static uint64_t fnv(uint64_t h, const float *p, size_t n)
{
    const unsigned char *c = (const unsigned char *)p;
    for (size_t i = 0; i < n * sizeof(float); i++)
        h = (h ^ c[i]) * 1099511628211ull;
    return h;
}

enum { MAXN = 200 };

int main(int argc, char **argv)
{
    int N = argc > 1 ? atoi(argv[1]) : 10;
    N = N < 1 ? 1 : N > MAXN ? MAXN : N;
    double nt = omp_get_max_threads();
    const struct { int B, T, NH, NKV, hs; const char *name; } cs[] = {
        {4, 256, 12, 12, 64, "W1 mha"}, {4, 256, 12, 4, 64, "gqa 12/4"}, {1, 2048, 12, 4, 64, "gqa T2048"}};
    for (int c = 0; c < 3; c++)
        for (int bf = 0; bf < 2; bf++) {
            int B = cs[c].B, T = cs[c].T, NH = cs[c].NH, NKV = cs[c].NKV, hs = cs[c].hs, C = NH * hs, KV = NKV * hs;
            size_t nq = (size_t)B * T * C, nk = (size_t)B * T * KV, nl = (size_t)B * NH * T;
            float *q = buf(nq), *k = buf(nk), *v = buf(nk), *g = buf(nq), *o = buf(nq), *l = buf(nl);
            float *dq = buf(nq), *dk = buf(nk), *dv = buf(nk), *s = buf(flash_attention_scratch_floats(B, T, NH, NKV, hs));
            static double tf[MAXN], tb[MAXN], sum[MAXN];
            for (int r = -1; r < N; r++) {
                double t0 = cpu_s();
                flash_attention_gqa_forward(o, l, s, q, k, v, B, T, NH, NKV, hs, C, KV, bf, NULL);
                double t1 = cpu_s();
                flash_attention_gqa_backward(dq, dk, dv, s, g, q, k, v, o, l, B, T, NH, NKV, hs, C, KV, bf, NULL);
                double t2 = cpu_s();
                if (r >= 0)
                    tf[r] = (t1 - t0) / nt, tb[r] = (t2 - t1) / nt, sum[r] = tf[r] + tb[r];
            }
            uint64_t h = 1469598103934665603ull;
            h = fnv(fnv(fnv(fnv(fnv(h, o, nq), l, nl), dq, nq), dk, nk), dv, nk);
            qsort(tf, (size_t)N, sizeof *tf, cmp), qsort(tb, (size_t)N, sizeof *tb, cmp);
            qsort(sum, (size_t)N, sizeof *sum, cmp);
            printf("%-10s %s fwd %6.2f bwd %6.2f | sum min %6.2f med %6.2f ms  hash %016llx\n", cs[c].name,
                   bf ? "bf16" : "fp32", 1e3 * tf[N / 2], 1e3 * tb[N / 2], 1e3 * sum[0], 1e3 * sum[N / 2],
                   (unsigned long long)h);
            free(q), free(k), free(v), free(g), free(o), free(l), free(dq), free(dk), free(dv), free(s);
        }
    return 0;
}
