/* cpu_device.c - this machine as the scale model's device (`zerotrain plan --gpu cpu`): one
 * core's measured FMA peak (metrics/peak.h), the measured memory bandwidth, and the engine's own
 * GEMM timed at the shapes the model asks for, each scaled by the share of the machine one device
 * gets when several run on it (the namespace hosts of bench/multihost.sh share its cores).
 *
 * The GEMM timings are what the calibration rests on (docs/scale.md): the model's compute time
 * on this machine is the sum of these measured products plus the measured-bandwidth time of the
 * memory-bound work, nothing fitted to a training step. */
#include "scale/device.h"
#include "kernels/gemm.h"
#include "metrics/peak.h"

#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CAP 2048 /* larger dimensions are timed at this size */

static double now(void) { return omp_get_wtime(); }

/* Bytes/s of one thread's triad a[i] = b[i] + s * c[i] over 3 x 32 MiB (24 bytes moved per
 * element counting the write-allocate read: 3 streams + 1), best of 5. */
static double measure_triad(void) {
    size_t n = (size_t)8 << 20;
    float *a = malloc(n * 4), *b = malloc(n * 4), *c = malloc(n * 4);
    double best = 0;
    if (a && b && c) {
        for (size_t i = 0; i < n; i++) a[i] = 0, b[i] = (float)(i & 7), c[i] = 1.0f;
        for (int r = 0; r < 6; r++) {
            double t0 = now();
            for (size_t i = 0; i < n; i++) a[i] = b[i] + 0.5f * c[i];
            double t = now() - t0;
            volatile float sink = a[r * 7];
            (void)sink;
            if (r > 0 && t > 0 && 16.0 * (double)n / t > best) best = 16.0 * (double)n / t;
        }
    }
    free(a), free(b), free(c);
    return best;
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

void zt_scale_cpu_device(int threads, int devices_here, zt_scale_device *d) {
    memset(d, 0, sizeof *d);
    if (threads < 1) threads = 1;
    if (devices_here < 1) devices_here = 1;
    zt_cpu_peak p;
    zt_cpu_peak_detect(&p);
    zt_cpu_peak_measure(&p);
    double cores = (double)p.online_cores / (p.threads_per_core > 0 ? p.threads_per_core : 1);
    double share = cores / ((double)devices_here * threads);
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
    d->intra_bw = 0;                              /* the caller measures its links (bench/) */
    d->intra_lat = 20e-6, d->inter_lat = 50e-6;   /* MPI over shared memory / TCP: refined by bench */
    d->efficiency = 1.0;                          /* the products are timed, not derated */
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
 * call, then the best of at least 3 calls and until 0.2 s have passed. */
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
        for (int r = 0; r < 64; r++) {
            double t0 = now();
            if (bf16) zt_gemm_bf16(ta, tb, M, N, K, 1.0f, a, lda, b, ldb, 0.0f, c, N, NULL);
            else zt_gemm_f32(ta, tb, M, N, K, 1.0f, a, lda, b, ldb, 0.0f, c, N);
            double t = now() - t0;
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
