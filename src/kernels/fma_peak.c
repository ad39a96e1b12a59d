/* fma_peak.c - the measured peak of one core: the rate at which it retires independent fp32 FMAs
 * (and bf16 dot products, VDPBF16PS, where the CPU has AVX512_BF16), the ceiling every matrix
 * product here runs under. MFU divides by this instead of a table x a clock read from
 * /proc/cpuinfo: the table's clock is the base clock on these VMs (2.6 GHz on a Zen 4 that boosts
 * to ~3.5), which put MFU above 100%.
 *
 * How: independent accumulator chains (more than FMA latency x FMA units on any x86 core: 16 of
 * 512-bit FMAs, or 12 of 256-bit under AVX2, whose 16 registers hold 12 chains and the two
 * operands; 16 chains there spilled to the stack and measured 67 GFLOP/s a core where the avx2
 * level's own GEMM ran at 100, so its MFU read 130%), timed with the thread's CPU clock
 * (CLOCK_THREAD_CPUTIME_ID), so a rank that shares its core with another process still measures
 * the core's rate, not its share. A 30 ms warm-up lets the clock ramp; then the best of 5 rounds of
 * ~20 ms. One thread: a single core's boost is at least the all-core clock, so the peak is an upper
 * bound of what every core can do together and MFU stays conservative.
 * Compiled once per instruction-set level like every kernel (dispatch.c): the rate measured is the
 * one of the path the kernels run (AVX2: 256-bit FMAs; AVX-512: 512-bit; bf16 only where the path
 * has AVX512_BF16).
 * Cost ~0.25 s; zt_cpu_peak_measure (scale/peak.c) caches the result per CPU model and path. */
#include "kernels/kernels.h"

#include <immintrin.h>
#include <time.h>

static double thread_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#if defined(__AVX512F__)
#define CHAINS 16
typedef __m512 vec;
#define LANES 16
#define VSET1(x) _mm512_set1_ps(x)
#define VFMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define VADD(a, b) _mm512_add_ps(a, b)
#define VSUM(a) _mm512_reduce_add_ps(a)
#elif defined(__AVX2__) && defined(__FMA__)
#define CHAINS 12
typedef __m256 vec;
#define LANES 8
#define VSET1(x) _mm256_set1_ps(x)
#define VFMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define VADD(a, b) _mm256_add_ps(a, b)
static float VSUM(__m256 a) {
    float t[8];
    _mm256_storeu_ps(t, a);
    return t[0] + t[1] + t[2] + t[3] + t[4] + t[5] + t[6] + t[7];
}
#endif

#ifdef LANES
/* `iters` x CHAINS FMAs of LANES lanes; returns a value that depends on all of them. */
static float fma_loop(long iters, float seed) {
    vec acc[CHAINS];
    for (int c = 0; c < CHAINS; c++) acc[c] = VSET1(seed * (float)(c + 1));
    const vec a = VSET1(0.999999f), b = VSET1(1e-7f);
    for (long i = 0; i < iters; i++)
        for (int c = 0; c < CHAINS; c++) acc[c] = VFMA(acc[c], a, b);
    vec s = acc[0];
    for (int c = 1; c < CHAINS; c++) s = VADD(s, acc[c]);
    return VSUM(s);
}
#endif

#if defined(__AVX512BF16__)
static float bf16_loop(long iters, float seed) {
    __m512 acc[CHAINS];
    for (int c = 0; c < CHAINS; c++) acc[c] = _mm512_set1_ps(seed * (float)(c + 1));
    const __m512bh a = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-3f), _mm512_set1_ps(1e-3f));
    const __m512bh b = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-4f), _mm512_set1_ps(1e-4f));
    for (long i = 0; i < iters; i++)
        for (int c = 0; c < CHAINS; c++) acc[c] = _mm512_dpbf16_ps(acc[c], a, b);
    __m512 s = acc[0];
    for (int c = 1; c < CHAINS; c++) s = _mm512_add_ps(s, acc[c]);
    return _mm512_reduce_add_ps(s);
}
#endif

static volatile float sink;

/* FLOP/s of `loop` (flops_per_iter per iteration): a warm-up, then the best of 5 timed rounds. */
static double best_rate(float (*loop)(long, float), double flops_per_iter) {
    long iters = 1 << 14;
    double t0 = thread_seconds();
    while (thread_seconds() - t0 < 0.03) sink = loop(iters, 1.0f); /* ramp the clock */
    for (;;) { /* size a round to ~20 ms */
        double a = thread_seconds();
        sink = loop(iters, 1.0f);
        double t = thread_seconds() - a;
        if (t > 0.02 || iters > (1L << 34)) break;
        iters *= 2;
    }
    double best = 0;
    for (int r = 0; r < 5; r++) {
        double a = thread_seconds();
        sink = loop(iters, 1.0f + (float)r);
        double t = thread_seconds() - a;
        if (t > 0 && flops_per_iter * (double)iters / t > best) best = flops_per_iter * (double)iters / t;
    }
    return best;
}

double zt_measure_core_fp32_flops(void) {
#ifdef LANES
    return best_rate(fma_loop, 2.0 * LANES * CHAINS);
#else
    return 0;
#endif
}

double zt_measure_core_bf16_flops(void) {
#if defined(__AVX512BF16__)
    return best_rate(bf16_loop, 2.0 * 32 * CHAINS); /* 32 bf16 products (multiply + add) each */
#else
    return 0;
#endif
}
