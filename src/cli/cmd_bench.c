/* cmd_bench.c - `zerotrain bench`: training throughput of a GPT-2 preset on random tokens (the
 * W1 benchmark: gpt2-124M, B=4, T=256, fp32, AdamW), with achieved GFLOP/s against both the
 * nominal fp32 peak and the GEMM rate measured here, and the time per unit. The last line is JSON
 * for bench/w1.sh. */
#include "cli/commands.h"
#include "metrics/peak.h"

#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Best-of-5 rate of the dominant GEMM shape of GPT-2 training (N=B*T rows, C -> 4C), GFLOP/s. */
static double measure_gemm_gflops(int N, int C) {
    int K = C, M = N, Nn = 4 * C;
    float *a = malloc((size_t)M * K * 4), *b = malloc((size_t)Nn * K * 4), *c = malloc((size_t)M * Nn * 4);
    if (!a || !b || !c) {
        free(a), free(b), free(c);
        return NAN;
    }
    for (size_t i = 0; i < (size_t)M * K; i++) a[i] = (float)(i % 7) * 0.01f;
    for (size_t i = 0; i < (size_t)Nn * K; i++) b[i] = (float)(i % 5) * 0.01f;
    double best = 1e30;
    for (int r = 0; r < 6; r++) {
        double t0 = omp_get_wtime();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, Nn, K, 1.0f, a, K, b, K, 0.0f, c, Nn);
        double t = omp_get_wtime() - t0;
        if (r > 0 && t < best) best = t;
    }
    free(a), free(b), free(c);
    return 2.0 * M * Nn * K / best / 1e9;
}

int zt_cmd_bench(int argc, char **argv) {
    zt_error err = {0};
    const char *preset = "gpt2-124M";
    int B = 4, T = 256, steps = 10, warmup = 2;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            printf("usage: zerotrain bench [--preset gpt2-124M] [-B 4] [-T 256] [--steps 10] [--warmup 2]\n");
            return 0;
        }
        if (!v) {
            zt_error_set(&err, ZT_ERR_USAGE, "bench: %s needs a value", a);
            return zt_cli_fail(&err);
        }
        char *end = NULL;
        if (!strcmp(a, "--preset")) preset = v;
        else if (!strcmp(a, "-B")) B = (int)strtol(v, &end, 10);
        else if (!strcmp(a, "-T")) T = (int)strtol(v, &end, 10);
        else if (!strcmp(a, "--steps")) steps = (int)strtol(v, &end, 10);
        else if (!strcmp(a, "--warmup")) warmup = (int)strtol(v, &end, 10);
        else {
            zt_error_set(&err, ZT_ERR_USAGE, "bench: unknown option %s", a);
            return zt_cli_fail(&err);
        }
        if ((end && *end) || B < 1 || T < 1 || steps < 1 || warmup < 0) {
            zt_error_set(&err, ZT_ERR_USAGE, "bench: bad value %s for %s", v, a);
            return zt_cli_fail(&err);
        }
        i++;
    }
    zt_gpt2_config cfg;
    zt_model *m = NULL;
    zt_engine *e = NULL;
    int32_t *tok = NULL;
    double *times = NULL;
    int rc;
    if ((rc = zt_gpt2_preset(preset, &cfg, &err)) || (rc = zt_gpt2_create(&cfg, &m, &err))) goto out;
    zt_engine_options eo = {.B = B, .T = T, .seed = 1337};
    zt_optimizer_config_default(&eo.optim);
    if ((rc = zt_engine_create(m, &eo, &e, &err)) || (rc = zt_engine_init_params(e, &err))) goto out;
    tok = malloc(((size_t)B * T + 1) * sizeof *tok);
    times = malloc((size_t)steps * sizeof *times);
    if (!tok || !times) {
        rc = zt_error_set(&err, ZT_ERR_NOMEM, "bench: out of memory");
        goto out;
    }
    uint64_t s = 12345;
    int threads = omp_get_max_threads();
    double fpt = m->train_flops_per_token(m, T);
    printf("bench: %s L=%d C=%d NH=%d V=%d, %.1fM params, B=%d T=%d, fp32, AdamW, %d threads, "
           "%.3f GFLOP/token\n", preset, cfg.n_layer, cfg.n_embd, cfg.n_head, cfg.vocab_size,
           zt_model_numel(m) / 1e6, B, T, threads, fpt / 1e9);
    for (int it = 0; it < warmup + steps; it++) {
        for (int i = 0; i <= B * T; i++) {
            s = s * 6364136223846793005ULL + 1442695040888963407ULL;
            tok[i] = (int32_t)((s >> 33) % (uint64_t)cfg.vocab_size);
        }
        if (it == warmup) zt_engine_reset_times(e);
        double t0 = omp_get_wtime();
        zt_batch b = {.B = B, .T = T, .inputs = tok, .targets = tok + 1,
                      .dloss = 1.0f / (float)(B * T), .logits_pos = -1};
        float loss;
        zt_step_report rep;
        if ((rc = zt_engine_forward_backward(e, &b, &loss, &err)) ||
            (rc = zt_engine_step(e, 3e-4f, &rep, &err)))
            goto out;
        double t = omp_get_wtime() - t0;
        printf("%s %3d: loss %.4f  %.0f ms  %.1f tok/s\n", it < warmup ? "warmup" : "step  ",
               it < warmup ? it + 1 : it - warmup + 1, loss, 1e3 * t, B * T / t);
        fflush(stdout);
        if (it >= warmup) times[it - warmup] = t;
    }
    /* where the time goes, per unit, averaged over the timed steps */
    double fwd_total = 0, bwd_total = 0;
    for (int u = 0; u < m->n_units; u++) {
        double f, bw;
        zt_engine_unit_times(e, u, &f, &bw);
        fwd_total += f;
        bwd_total += bw;
        if (u < 2 || u == m->n_units - 1)
            printf("  unit %-10s forward %7.1f ms  backward %7.1f ms\n", m->units[u].name, 1e3 * f / steps,
                   1e3 * bw / steps);
    }
    double sum = 0;
    for (int i = 0; i < steps; i++) sum += times[i];
    qsort(times, (size_t)steps, sizeof *times, cmp_double);
    double med = times[steps / 2], mean = sum / steps;
    printf("  all units: forward %.1f ms, backward %.1f ms; optimizer + rest %.1f ms (mean step %.1f ms)\n",
           1e3 * fwd_total / steps, 1e3 * bwd_total / steps, 1e3 * (mean - (fwd_total + bwd_total) / steps),
           1e3 * mean);
    double tps = B * T / med, gflops = fpt * tps / 1e9;
    double peak = zt_cpu_fp32_peak_flops(threads) / 1e9, gemm = measure_gemm_gflops(B * T, cfg.n_embd);
    printf("zerotrain: %.1f tok/s (median of %d), %.1f GFLOP/s = %.1f%% of nominal fp32 peak %.0f "
           "GFLOP/s, %.1f%% of measured sgemm %.0f GFLOP/s\n", tps, steps, gflops, 100 * gflops / peak,
           peak, 100 * gflops / gemm, gemm);
    printf("{\"impl\":\"zerotrain\",\"version\":\"%s\",\"preset\":\"%s\",\"dtype\":\"fp32\",\"threads\":%d,"
           "\"B\":%d,\"T\":%d,\"steps\":%d,\"tok_per_s_median\":%.2f,\"step_ms_median\":%.1f,"
           "\"step_ms_min\":%.1f,\"gflops\":%.1f,\"nominal_peak_gflops\":%.1f,\"gemm_gflops\":%.1f,"
           "\"peak_fraction\":%.4f}\n",
           ZT_VERSION, preset, threads, B, T, steps, tps, 1e3 * med, 1e3 * times[0], gflops, peak, gemm,
           gflops / gemm);
    rc = ZT_OK;
out:
    free(tok);
    free(times);
    zt_engine_free(e);
    zt_model_free(m);
    return rc ? zt_cli_fail(&err) : 0;
}
