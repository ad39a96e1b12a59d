/* cpu_device.c - this machine as the scale model's device (`zerotrain plan --gpu cpu`): one
 * core's measured FMA peak (scale/peak.h), the measured memory bandwidth, and the engine's own
 * GEMM, optimizer pass and elementwise kernels timed at the sizes the model asks for, each scaled
 * by the share of a core one device gets when several run here (the namespace hosts of
 * bench/multihost.sh share its cores, and so does whatever else runs on the machine).
 *
 * These timings are what the calibration rests on (docs/scale.md): the model's compute time on
 * this machine is the sum of these measured pieces plus the measured-bandwidth time of the rest
 * of the memory-bound work, nothing fitted to a training step. All are taken in one thread's CPU
 * time, so they are a core's rates; the share (--cpu-share) carries the contention. */
#include "scale/device.h"
#include "kernels/gemm.h"
#include "kernels/kernels.h"
#include "scale/peak.h"
#include "optim/optim.h"

#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CAP 2048 /* larger dimensions are timed at this size */

static double now(void) { return omp_get_wtime(); }

/* CPU seconds of the calling thread: a product timed on one thread measures the core's rate,
 * not the share of it other processes leave (that share is cpu_share's) */
static double thread_cpu(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Bytes/s of one thread's triad a[i] = b[i] + s * c[i] over 3 x 32 MiB (16 bytes moved per
 * element: two reads, the write and its write-allocate read), best of 5, in the thread's CPU
 * time. */
static double measure_triad(void) {
    size_t n = (size_t)8 << 20;
    float *a = malloc(n * 4), *b = malloc(n * 4), *c = malloc(n * 4);
    double best = 0;
    if (a && b && c) {
        for (size_t i = 0; i < n; i++) a[i] = 0, b[i] = (float)(i & 7), c[i] = 1.0f;
        for (int r = 0; r < 6; r++) {
            double t0 = thread_cpu();
            for (size_t i = 0; i < n; i++) a[i] = b[i] + 0.5f * c[i];
            double t = thread_cpu() - t0;
            volatile float sink = a[r * 7];
            (void)sink;
            if (r > 0 && t > 0 && 16.0 * (double)n / t > best) best = 16.0 * (double)n / t;
        }
    }
    free(a), free(b), free(c);
    return best;
}

/* CPU seconds per parameter of the engine's optimizer pass on one thread: the gradient norm's
 * sum of squares and AdamW over 8M elements (4 arrays of 32 MiB, beyond the caches, as the real
 * shards are), best of 3. */
static double measure_optimizer(void) {
    size_t n = (size_t)8 << 20;
    float *p = malloc(n * 4), *g = malloc(n * 4), *m = calloc(n, 4), *v = calloc(n, 4);
    double *part = malloc((n / 1024 + 1) * sizeof *part), best = 0;
    if (p && g && m && v && part) {
        for (size_t i = 0; i < n; i++) p[i] = 0.01f * (float)(i & 15), g[i] = 1e-3f * (float)(i & 7);
        for (int r = 0; r < 4; r++) {
            double t0 = thread_cpu();
            zt_chunk_sum_squares(g, (int64_t)n, 1024, part);
            zt_adamw_update(p, g, m, v, n, 1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f, r + 1);
            double t = thread_cpu() - t0;
            if (r > 0 && (best == 0 || t < best)) best = t;
        }
    }
    free(p), free(g), free(m), free(v), free(part);
    return best / (double)n;
}

static double mem_total(void) {
    FILE *fp = fopen("/proc/meminfo", "r");
    double kb = 0;
    if (fp) {
        char line[256];
        while (fgets(line, sizeof line, fp))
            if (sscanf(line, "MemTotal: %lf kB", &kb) == 1) break;
        fclose(fp);
    }
    return kb * 1024.0;
}

void zt_scale_cpu_device(int threads, int devices_here, double share, zt_scale_device *d) {
    memset(d, 0, sizeof *d);
    if (threads < 1) threads = 1;
    if (devices_here < 1) devices_here = 1;
    zt_cpu_peak p;
    zt_cpu_peak_detect(&p);
    zt_cpu_peak_measure(&p);
    double cores = (double)p.online_cores / (p.threads_per_core > 0 ? p.threads_per_core : 1);
    if (!(share > 0)) share = cores / ((double)devices_here * threads);
    d->cpu_share = share < 1.0 ? share : 1.0;
    d->threads = threads;
    snprintf(d->name, sizeof d->name, "cpu");
    snprintf(d->desc, sizeof d->desc, "this machine: %.60s, %g cores, %d device%s x %d thread%s on it",
             p.model_name[0] ? p.model_name : "unknown CPU", cores, devices_here, devices_here == 1 ? "" : "s", threads,
             threads == 1 ? "" : "s");
    double eff_threads = threads * d->cpu_share;
    d->peak_fp32 = zt_cpu_peak_flops(&p, eff_threads, 1, false);
    d->peak_bf16 = zt_cpu_peak_flops(&p, eff_threads, 1, true);
    d->memory = mem_total() / devices_here;
    d->mem_bw = measure_triad() * d->cpu_share; /* one thread's stream, shared like the cores */
    d->opt_s_per_param = measure_optimizer() / d->cpu_share;
    d->intra_bw = 0;                              /* the caller measures its links (bench/) */
    d->intra_lat = 20e-6, d->inter_lat = 50e-6;   /* MPI over shared memory / TCP: refined by bench */
    d->efficiency = d->attn_efficiency = d->mem_efficiency = 1.0; /* timed, not derated */
    d->causal_skip = false;
    d->measured = true;
}

/* ---- GEMM timings, cached per shape ------------------------------------------------------------ */
typedef struct timed {
    int M, N, K;
    bool ta, tb, bf16;
    int threads;
    double seconds;
} timed;

static timed cache[256];
static int n_cache;

static int cap(int x) { return x > CAP ? CAP : x; }

/* Seconds of one product at the (capped) shape on the calling thread's OpenMP threads: a warm-up
 * call, then the best of at least 3 calls and until 0.2 s have passed. One thread: its CPU time;
 * several: wall time (their CPU times would add up). */
static double time_gemm(int M, int N, int K, bool ta, bool tb, bool bf16) {
    size_t na = (size_t)M * K, nb = (size_t)K * N, nc = (size_t)M * N;
    size_t elem = bf16 ? 2 : 4;
    void *a = malloc(na * elem), *b = malloc(nb * elem);
    float *c = malloc(nc * 4);
    double best = NAN;
    if (a && b && c) {
        if (bf16) {
            for (size_t i = 0; i < na; i++) ((uint16_t *)a)[i] = 0x3c00 + (uint16_t)(i % 7); /* ~0.0078.. */
            for (size_t i = 0; i < nb; i++) ((uint16_t *)b)[i] = 0x3c00 + (uint16_t)(i % 5);
        } else {
            for (size_t i = 0; i < na; i++) ((float *)a)[i] = (float)(i % 7) * 0.01f;
            for (size_t i = 0; i < nb; i++) ((float *)b)[i] = (float)(i % 5) * 0.01f;
        }
        int lda = ta ? M : K, ldb = tb ? K : N;
        double begin = now();
        double (*clock)(void) = omp_get_max_threads() == 1 ? thread_cpu : now;
        for (int r = 0; r < 64; r++) {
            double t0 = clock();
            if (bf16) zt_gemm_bf16(ta, tb, M, N, K, 1.0f, a, lda, b, ldb, 0.0f, c, N, NULL);
            else zt_gemm_f32(ta, tb, M, N, K, 1.0f, a, lda, b, ldb, 0.0f, c, N);
            double t = clock() - t0;
            if (r > 0 && (isnan(best) || t < best)) best = t;
            if (r >= 3 && now() - begin > 0.2) break;
        }
    }
    free(a), free(b), free(c);
    return best;
}

double zt_scale_cpu_gemm_seconds(const zt_scale_device *d, int M, int N, int K, bool ta, bool tb, bool bf16) {
    int threads = omp_get_max_threads();
    for (int i = 0; i < n_cache; i++) {
        timed *c = &cache[i];
        if (c->M == M && c->N == N && c->K == K && c->ta == ta && c->tb == tb && c->bf16 == bf16 && c->threads == threads)
            return c->seconds / (d->cpu_share > 0 ? d->cpu_share : 1.0);
    }
    int m = cap(M), n = cap(N), k = cap(K);
    double t = time_gemm(m, n, k, ta, tb, bf16);
    t *= ((double)M / m) * ((double)N / n) * ((double)K / k); /* the full shape's flops at that rate */
    if (n_cache < (int)(sizeof cache / sizeof *cache))
        cache[n_cache++] = (timed){M, N, K, ta, tb, bf16, threads, t};
    return t / (d->cpu_share > 0 ? d->cpu_share : 1.0);
}

/* ---- elementwise kernels, cached per (kind, size) ---------------------------------------------- */
typedef struct timed_kernel {
    zt_scale_kernel k;
    size_t n;
    int width;
    double seconds;
} timed_kernel;

static timed_kernel kcache[32];
static int n_kcache;

static double time_kernel(zt_scale_kernel k, size_t n, int width) {
    float *a = malloc(n * 4), *b = malloc(n * 4), *c = malloc(n * 4), *dd = malloc(n * 4);
    int rows = k == ZT_SCALE_XENT ? (int)(n / (size_t)width) : 0;
    int32_t *tg = rows ? malloc((size_t)rows * sizeof *tg) : NULL;
    float *loss = rows ? malloc((size_t)rows * 4) : NULL, *dl = rows ? malloc((size_t)rows * 4) : NULL;
    double best = NAN;
    if (a && b && c && dd && (!rows || (tg && loss && dl))) {
        for (int i = 0; i < rows; i++) tg[i] = (int32_t)((i * 7919) % width), dl[i] = 1.0f / rows;
        for (int r = 0; r < 4; r++) {
            for (size_t i = 0; i < n; i++) a[i] = 0.001f * (float)(i % 1000) - 0.5f, b[i] = 0.5f, dd[i] = 1e-3f;
            double t0 = thread_cpu();
            if (k == ZT_SCALE_GELU) {
                gelu_forward(c, a, n);
                gelu_backward(b, a, dd, n);
            } else if (k == ZT_SCALE_SWIGLU) {
                swiglu_forward(c, a, b, n);
                swiglu_backward(dd, c, dd, a, b, n);
            } else {
                softmax_xent_forward(loss, a, tg, rows, width);
                softmax_xent_backward(a, tg, dl, rows, width);
            }
            double t = thread_cpu() - t0;
            if (r > 0 && (isnan(best) || t < best)) best = t;
        }
    }
    free(a), free(b), free(c), free(dd), free(tg), free(loss), free(dl);
    return best;
}

double zt_scale_cpu_kernel_seconds(const zt_scale_device *d, zt_scale_kernel k, size_t n, int width) {
    for (int i = 0; i < n_kcache; i++)
        if (kcache[i].k == k && kcache[i].n == n && kcache[i].width == width)
            return kcache[i].seconds / (d->cpu_share > 0 ? d->cpu_share : 1.0);
    size_t cap_n = (size_t)16 << 20, m = n;
    if (m > cap_n) m = k == ZT_SCALE_XENT ? cap_n / (size_t)width * (size_t)width : cap_n; /* rate has settled */
    if (m == 0) m = (size_t)width;
    double t = time_kernel(k, m, width) * ((double)n / (double)m);
    if (n_kcache < (int)(sizeof kcache / sizeof *kcache)) kcache[n_kcache++] = (timed_kernel){k, n, width, t};
    return t / (d->cpu_share > 0 ? d->cpu_share : 1.0);
}
