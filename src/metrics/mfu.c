/* mfu.c - model and hardware FLOPs utilization (the formula is in mfu.h) against the measured peak
 * of scale/peak.c, and the measured GEMM rate that `zerotrain bench --peak` prints beside it. */
#include "metrics/mfu.h"
#include "scale/peak.h"
#include "zerotrain/zerotrain.h"

#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

double zt_flops_per_token(double n, int n_layer, int n_embd, int seq_len) {
    return 6.0 * n + 12.0 * (double)n_layer * (double)n_embd * (double)seq_len;
}

double zt_hfu_flops_per_token(double model_flops, double recompute_fraction) {
    return model_flops * (1.0 + recompute_fraction / 3.0);
}

double zt_utilization(double flops_per_token, double tokens, double seconds, double peak) {
    if (!(peak > 0) || !(seconds > 0) || !(flops_per_token > 0)) return NAN;
    return flops_per_token * tokens / (seconds * peak);
}

double zt_job_peak_flops(int threads_per_rank, int world, bool bf16) {
    zt_cpu_peak p;
    zt_cpu_peak_detect(&p);
    if (p.override_gflops <= 0) zt_cpu_peak_measure(&p);
    if (world < 1) world = 1;
    return zt_cpu_peak_flops(&p, (double)world * zt_cores_per_rank(threads_per_rank), world, bf16);
}

double zt_measure_sgemm_gflops(int M, int N, int K) {
    if (M < 1 || N < 1 || K < 1) return NAN;
    size_t na = (size_t)M * K, nb = (size_t)K * N, nc = (size_t)M * N;
    float *a = aligned_alloc(64, (na * 4 + 63) & ~(size_t)63), *b = aligned_alloc(64, (nb * 4 + 63) & ~(size_t)63),
          *c = aligned_alloc(64, (nc * 4 + 63) & ~(size_t)63);
    double best = NAN;
    if (a && b && c) {
        for (size_t i = 0; i < na; i++) a[i] = (float)(i % 7) * 0.01f;
        for (size_t i = 0; i < nb; i++) b[i] = (float)(i % 5) * 0.01f;
        memset(c, 0, nc * 4);
        double begin = omp_get_wtime();
        for (int r = 0; r < 16; r++) {
            double t0 = omp_get_wtime();
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, a, K, b, N, 0.0f, c, N);
            double t = omp_get_wtime() - t0;
            if (r > 0 && (isnan(best) || t < best)) best = t; /* r = 0 warms up caches and threads */
            if (r >= 5 && omp_get_wtime() - begin > 0.5) break;
            if (r >= 3 && omp_get_wtime() - begin > 5.0) break;
        }
    }
    free(a);
    free(b);
    free(c);
    return best > 0 ? 2.0 * M * N * K / best / 1e9 : NAN;
}

int zt_peak_report(FILE *out, int threads) {
    zt_cpu_peak p;
    zt_cpu_peak_detect(&p);
    double cores = zt_cores_per_rank(threads);
    fprintf(out, "cpu: %s (%s family 0x%x model 0x%x), %d logical CPUs, %d thread%s per core\n",
            p.model_name[0] ? p.model_name : "unknown", p.vendor[0] ? p.vendor : "?", p.family, p.model,
            p.online_cores, p.threads_per_core, p.threads_per_core == 1 ? "" : "s");
    fprintf(out, "clock %.3f GHz (max of cpuinfo_max_freq and cpu MHz)\n", p.clock_ghz);
    fprintf(out, "fp32: %.0f FLOP/cycle/core (%s)\n", p.fp32_per_cycle, p.fp32_isa);
    fprintf(out, "bf16: %.0f FLOP/cycle/core (%s)\n", p.bf16_per_cycle, p.bf16_isa);
    double nominal32 = zt_cpu_peak_flops(&p, cores, 1, false), nominal16 = zt_cpu_peak_flops(&p, cores, 1, true);
    fprintf(out, "nominal peak of %g core%s (%d thread%s): fp32 %.1f GFLOP/s, bf16 %.1f GFLOP/s%s\n", cores,
            cores == 1 ? "" : "s", threads, threads == 1 ? "" : "s", nominal32 / 1e9, nominal16 / 1e9,
            p.override_gflops > 0 ? " (ZT_PEAK_GFLOPS)" : "");
    zt_cpu_peak_measure(&p);
    double fp32 = zt_cpu_peak_flops(&p, cores, 1, false), bf16 = zt_cpu_peak_flops(&p, cores, 1, true);
    fprintf(out, "measured peak (what MFU divides by; %s): one core fp32 %.1f GFLOP/s = %.2f GHz effective, "
                 "bf16 %.1f GFLOP/s; %g core%s: fp32 %.1f, bf16 %.1f GFLOP/s\n",
            p.measured_from, p.measured_fp32 / 1e9, p.fp32_per_cycle > 0 ? p.measured_fp32 / p.fp32_per_cycle / 1e9 : 0,
            p.measured_bf16 / 1e9, cores, cores == 1 ? "" : "s", fp32 / 1e9, bf16 / 1e9);
    static const int shapes[][3] = {{1024, 3072, 768}, {1024, 768, 3072}, {1024, 1024, 1024}, {2048, 2048, 2048}};
    const char *what[] = {"GPT-2 124M MLP up (B*T=1024, C->4C)", "GPT-2 124M MLP down", "square 1024",
                          "square 2048"};
    fprintf(out, "measured cblas_sgemm (OpenBLAS, %d thread%s, best of >= 5):\n", omp_get_max_threads(),
            omp_get_max_threads() == 1 ? "" : "s");
    double best = 0;
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        double g = zt_measure_sgemm_gflops(shapes[i][0], shapes[i][1], shapes[i][2]);
        if (g > best) best = g;
        fprintf(out, "  M=%-5d N=%-5d K=%-5d %8.1f GFLOP/s = %5.1f%% of measured fp32  (%s)\n", shapes[i][0],
                shapes[i][1], shapes[i][2], g, fp32 > 0 ? 100 * g * 1e9 / fp32 : NAN, what[i]);
    }
    fprintf(out, "{\"clock_ghz\":%.4f,\"cores\":%g,\"fp32_per_cycle\":%.0f,\"bf16_per_cycle\":%.0f,"
            "\"nominal_fp32_gflops\":%.1f,\"nominal_bf16_gflops\":%.1f,\"peak_fp32_gflops\":%.1f,"
            "\"peak_bf16_gflops\":%.1f,\"best_sgemm_gflops\":%.1f}\n",
            p.clock_ghz, cores, p.fp32_per_cycle, p.bf16_per_cycle, nominal32 / 1e9, nominal16 / 1e9, fp32 / 1e9,
            bf16 / 1e9, best);
    return ZT_OK;
}
