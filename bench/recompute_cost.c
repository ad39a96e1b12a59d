/* recompute_cost.c - what activation checkpointing costs in step time, on W1 shapes by default
 * (GPT-2 124M, B=4, T=256, fp32, AdamW, one process): three engines on the same model, one per
 * mode (none, full, selective), stepped in turn (none, full, selective, none, ...) so that a
 * machine shared with other work slows all three alike, and timed both in wall time and in
 * process CPU time divided by the thread count (the process's own work, which other jobs on the
 * cores do not inflate; see kernels_timing.c). Prints per mode the median step, the median
 * backward of one block (h.0, recomputation included) and the activation bytes, and the ratios
 * to none; checks that the three losses agree bit for bit every step (exit 1 if not).
 *
 *   OMP_WAIT_POLICY=passive recompute_cost [--steps 5] [--layers 12] [-B 4] [-T 256]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <omp.h>

#include "zerotrain/zerotrain.h"
#include "scale/peak.h"

static double clock_s(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *x, int n) {
    qsort(x, (size_t)n, sizeof *x, cmp);
    return x[n / 2];
}

int main(int argc, char **argv) {
    int steps = 5, layers = 12, B = 4, T = 256;
    char platform[800]; /* the CPU, the kernels' level and the GEMM paths (bench_util.h prints the same) */
    zt_platform_describe(platform, sizeof platform);
    printf("%s\n", platform);
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--steps")) steps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--layers")) layers = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-B")) B = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-T")) T = atoi(argv[i + 1]);
        else {
            fprintf(stderr, "usage: %s [--steps 5] [--layers 12] [-B 4] [-T 256]\n", argv[0]);
            return 2;
        }
    }
    if (steps < 1 || steps > 1000 || layers < 1 || B < 1 || T < 1) return 2;
    zt_error err = {0};
    zt_gpt2_config cfg;
    zt_model *m = NULL;
    if (zt_gpt2_preset("gpt2-124M", &cfg, &err)) return 1;
    cfg.n_layer = layers;
    if (zt_gpt2_create(&cfg, &m, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    zt_engine *e[3] = {NULL, NULL, NULL};
    for (int k = 0; k < 3; k++) {
        zt_engine_options o;
        zt_engine_options_default(&o);
        o.B = B;
        o.T = T;
        o.seed = 1;
        o.activation_checkpointing = (zt_recompute)k;
        if (zt_engine_create(m, &o, &e[k], &err) || zt_engine_init_params(e[k], &err)) {
            fprintf(stderr, "%s: %s\n", zt_recompute_name((zt_recompute)k), err.msg);
            return 1;
        }
    }
    int32_t *tok = malloc(((size_t)B * T + 1) * sizeof *tok);
    double *wall = calloc(3 * (size_t)steps, sizeof *wall), *cpu = calloc(3 * (size_t)steps, sizeof *cpu);
    double *blk = calloc(3 * (size_t)steps, sizeof *blk);
    if (!tok || !wall || !cpu || !blk) return 1;
    int threads = omp_get_max_threads(), status = 0;
    uint64_t s = 12345;
    printf("recompute_cost: gpt2-124M shapes, L=%d, B=%d T=%d, %d threads, %d timed steps per mode (+1 warm-up), "
           "modes interleaved\n", layers, B, T, threads, steps);
    for (int it = 0; it <= steps; it++) {
        for (int i = 0; i <= B * T; i++) {
            s = s * 6364136223846793005ULL + 1442695040888963407ULL;
            tok[i] = (int32_t)((s >> 33) % (uint64_t)cfg.vocab_size);
        }
        zt_batch b = {.B = B, .T = T, .inputs = tok, .targets = tok + 1, .dloss = 1.0f / (float)(B * T),
                      .logits_pos = -1};
        float loss[3];
        for (int k = 0; k < 3; k++) {
            double f0, b0, f1, b1;
            zt_engine_unit_times(e[k], 1, &f0, &b0);
            double w0 = clock_s(CLOCK_MONOTONIC), c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
            zt_step_report rep;
            if (zt_engine_forward_backward(e[k], &b, &loss[k], &err) || zt_engine_step(e[k], 3e-4f, &rep, &err)) {
                fprintf(stderr, "%s: %s\n", zt_recompute_name((zt_recompute)k), err.msg);
                return 1;
            }
            double w = clock_s(CLOCK_MONOTONIC) - w0, c = (clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0) / threads;
            zt_engine_unit_times(e[k], 1, &f1, &b1);
            if (it > 0) {
                wall[k * steps + it - 1] = w;
                cpu[k * steps + it - 1] = c;
                blk[k * steps + it - 1] = b1 - b0;
            }
        }
        if (memcmp(&loss[0], &loss[1], sizeof(float)) || memcmp(&loss[0], &loss[2], sizeof(float))) {
            fprintf(stderr, "step %d: losses differ: %a %a %a\n", it, loss[0], loss[1], loss[2]);
            status = 1;
        }
    }
    double mw[3], mc[3], mb[3];
    for (int k = 0; k < 3; k++) {
        mw[k] = median(wall + k * steps, steps);
        mc[k] = median(cpu + k * steps, steps);
        mb[k] = median(blk + k * steps, steps);
    }
    for (int k = 0; k < 3; k++) {
        zt_memory_report r;
        zt_engine_memory(e[k], &r);
        printf("  %-9s step %7.0f ms wall (x%.3f)  %7.0f ms cpu/thread (x%.3f) | h.0 backward %6.1f ms (x%.3f) | "
               "activations %.1f MiB\n", zt_recompute_name((zt_recompute)k), 1e3 * mw[k], mw[k] / mw[0], 1e3 * mc[k],
               mc[k] / mc[0], 1e3 * mb[k], mb[k] / mb[0], r.activations / 1048576.0);
    }
    printf("{\"bench\":\"recompute_cost\",\"layers\":%d,\"B\":%d,\"T\":%d,\"threads\":%d,\"steps\":%d,"
           "\"wall_ratio_full\":%.4f,\"wall_ratio_selective\":%.4f,\"cpu_ratio_full\":%.4f,"
           "\"cpu_ratio_selective\":%.4f,\"losses_identical\":%s}\n", layers, B, T, threads, steps, mw[1] / mw[0],
           mw[2] / mw[0], mc[1] / mc[0], mc[2] / mc[0], status ? "false" : "true");
    for (int k = 0; k < 3; k++) zt_engine_free(e[k]);
    zt_model_free(m);
    free(tok), free(wall), free(cpu), free(blk);
    return status;
}
