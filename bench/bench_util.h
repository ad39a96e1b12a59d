/* bench_util.h - what the kernel benchmarks (kernels_timing.c, attention_compare.c, gemm_compare.c)
 * time and fill with: wall and process-CPU clocks, 64-byte aligned buffers of fixed pseudo-random
 * floats in [-0.1, 0.1) (exit 7 when out of memory: a benchmark, not the library), the median, and
 * the line every benchmark starts with: the CPU, the kernels' instruction-set level and the GEMM
 * paths (ZT_ISA runs a lower level: docs/design.md, "Instruction sets").
 * Header only (static inline functions: an includer need not use them all). */
#ifndef ZT_BENCH_UTIL_H
#define ZT_BENCH_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "scale/peak.h"

static inline void print_platform(void)
{
    char line[800];
    zt_platform_describe(line, sizeof line);
    printf("%s\n", line);
}

static inline double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* CPU seconds of all threads of the process */
static inline double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline float *buf(size_t n)
{
    float *p = aligned_alloc(64, ((n * sizeof(float) + 63) / 64) * 64);
    if (p == NULL) {
        fprintf(stderr, "benchmark: out of memory (%zu floats)\n", n);
        exit(7);
    }
    uint32_t s = (uint32_t)n * 2654435761u + 1u;
    for (size_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        p[i] = ((float)(s >> 8) * (1.0f / 16777216.0f) - 0.5f) * 0.2f;
    }
    return p;
}

static inline int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* sorts v */
static inline double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(double), cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

#endif
