/* cmd_bench.c - `zerotrain bench`: training throughput of a model preset (GPT-2 or Llama) on random tokens (the
 * W1 benchmark: gpt2-124M, B=4, T=256 per rank, fp32, AdamW), with achieved GFLOP/s against both
 * the measured peak in the run's precision (MFU, scale/peak.h) and the GEMM rate measured here,
 * and the time per unit. With --nproc N it
 * runs N local ranks under a strategy (--strategy ddp|zero1|zero2|zero3|hybrid), with --tp T of them
 * per tensor-parallel group and --cp C per context-parallel group (each holding 2 of 2C chunks of
 * every sequence; docs/parallelism.md; the strategy then runs over the N/T data-parallel
 * ranks). It prints the bytes each rank sent per step, data-parallel and tensor-parallel.
 * --attention picks the attention kernel (model.attention), --attention-dtype fp32 keeps flash
 * attention's products fp32 under bf16 compute (precision.attention_dtype), --loss-chunk the loss's
 * chunk (memory.loss_chunk_tokens), --max-seq-len lengthens the preset's
 * context (GPT-2: more wpe rows) for long sequences. It prints the memory the plan predicted and
 * what was measured (the engine's accounting, and the process's peak RSS), and each step's CPU
 * time beside its wall time. The last line is JSON for bench/w1.sh, bench/dist.sh, bench/tp.sh and
 * bench/long_seq.sh. */
#include "cli/commands.h"
#include "cli/launch.h"
#include "comm/comm.h"
#include "metrics/mfu.h"
#include "scale/peak.h"
#include "kernels/gemm.h"
#include "train/engine_options.h"
#include "train/setup.h"

#include <cblas.h>
#include <sys/resource.h>
#include <time.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* CPU seconds of every thread of this process: a step's own work, which other programs on a shared
 * machine do not inflate the way they inflate its wall time */
static double process_cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

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
    int B = 4, T = 256, steps = 10, warmup = 2, nproc = 1, tp = 1, cp = 1, ep = 1;
    zt_cp_mode cp_mode = ZT_CP_ALLGATHER;
    zt_strategy strategy = ZT_STRATEGY_DDP;
    zt_precision_mode precision = ZT_PRECISION_FP32;
    zt_recompute recompute = ZT_RECOMPUTE_NONE;
    zt_attention attention = ZT_ATTENTION_FLASH;
    bool attn_fp32 = false; /* --attention-dtype fp32 (auto: bf16 products under bf16 compute) */
    int max_seq_len = 0; /* 0: the preset's */
    int loss_chunk = 0;  /* --loss-chunk: memory.loss_chunk_tokens */
    zt_offload_options off = {0};
    double off_mb = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--peak")) /* the peak table and the measured GEMM rate, nothing else */
            return zt_peak_report(stdout, omp_get_max_threads());
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            printf("usage: zerotrain bench [--preset gpt2-124M] [-B 4] [-T 256] [--steps 10] [--warmup 2]\n"
                   "                       [--nproc N] [--strategy ddp|zero1|zero2|zero3|hybrid] [--tp T]\n"
                   "                       [--cp N] [--cp-mode allgather|ring|ulysses] (context parallelism)\n"
                   "                       [--ep N] (expert parallelism of a mixture-of-experts preset)\n"
                   "                       [--precision fp32|bf16|bf16-low|fp16]\n"
                   "                       [--recompute none|full|selective] [--attention flash|naive]\n"
                   "                       [--attention-dtype auto|fp32]   flash attention's products (auto: bf16\n"
                   "                        under bf16 compute; precision.attention_dtype)\n"
                   "                       [--max-seq-len N]   the preset's context lengthened (GPT-2: wpe rows)\n"
                   "                       [--loss-chunk N]   the loss's logits N tokens at a time, again in backward\n"
                   "                        (memory.loss_chunk_tokens; 0: all B*T kept)\n"
                   "                       [--offload-nvme DIR [--offload-buffers 4] [--offload-buffer-mb 64]\n"
                   "                        [--offload-io-threads 2]]   optimizer state in files (docs/offload.md)\n"
                   "                       [--offload-param-nvme DIR [--offload-param-prefetch 1]\n"
                   "                        [--offload-param-max-live ELEMENTS]]   zero3's parameter pieces in files\n"
                   "                        too, read that many units ahead within that many elements\n");
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
        else if (!strcmp(a, "--nproc")) nproc = (int)strtol(v, &end, 10);
        else if (!strcmp(a, "--tp")) tp = (int)strtol(v, &end, 10);
        else if (!strcmp(a, "--cp")) cp = (int)strtol(v, &end, 10);
        else if (!strcmp(a, "--ep")) ep = (int)strtol(v, &end, 10);
        else if (!strcmp(a, "--cp-mode")) {
            if (zt_cp_mode_parse(v, &cp_mode, &err)) {
                zt_error_prefix(&err, "bench: --cp-mode");
                return zt_cli_fail(&err);
            }
        }
        else if (!strcmp(a, "--max-seq-len")) max_seq_len = (int)strtol(v, &end, 10);
        else if (!strcmp(a, "--loss-chunk")) loss_chunk = (int)strtol(v, &end, 10);
        else if (!strcmp(a, "--offload-nvme")) off.optimizer_dir = v;
        else if (!strcmp(a, "--offload-param-nvme")) off.param_dir = v;
        else if (!strcmp(a, "--offload-buffers")) off.buffer_count = (int)strtol(v, &end, 10);
        else if (!strcmp(a, "--offload-buffer-mb")) off_mb = strtod(v, &end);
        else if (!strcmp(a, "--offload-io-threads")) off.io_threads = (int)strtol(v, &end, 10);
        else if (!strcmp(a, "--offload-param-prefetch")) { /* 0: none ahead (the API's -1) */
            off.param_prefetch = (int)strtol(v, &end, 10);
            if (!off.param_prefetch) off.param_prefetch = -1;
        }
        else if (!strcmp(a, "--offload-param-max-live")) off.param_max_live = (size_t)strtod(v, &end);
        else if (!strcmp(a, "--precision")) {
            if (zt_precision_mode_parse(v, &precision, &err)) {
                zt_error_prefix(&err, "bench: --precision");
                return zt_cli_fail(&err);
            }
        } else if (!strcmp(a, "--strategy")) {
            if (zt_strategy_parse(v, &strategy, &err)) return zt_cli_fail(&err);
        } else if (!strcmp(a, "--recompute")) { /* activation checkpointing */
            if (zt_recompute_parse(v, &recompute, &err)) return zt_cli_fail(&err);
        } else if (!strcmp(a, "--attention")) {
            if (zt_attention_parse(v, &attention, &err)) {
                zt_error_prefix(&err, "bench: --attention");
                return zt_cli_fail(&err);
            }
        } else if (!strcmp(a, "--attention-dtype")) {
            if (strcmp(v, "auto") && strcmp(v, "fp32")) {
                zt_error_set(&err, ZT_ERR_USAGE, "bench: --attention-dtype: unknown value \"%s\" (known: auto, fp32)", v);
                return zt_cli_fail(&err);
            }
            attn_fp32 = !strcmp(v, "fp32");
        } else {
            zt_error_set(&err, ZT_ERR_USAGE, "bench: unknown option %s", a);
            return zt_cli_fail(&err);
        }
        if ((end && *end) || B < 1 || T < 1 || steps < 1 || warmup < 0 || nproc < 1 || tp < 1 || cp < 1 || ep < 1 || cp > ZT_CP_MAX_PARTS ||
            max_seq_len < 0 ||
            loss_chunk < 0 || off.param_prefetch < -1) {
            zt_error_set(&err, ZT_ERR_USAGE, "bench: bad value %s for %s", v, a);
            return zt_cli_fail(&err);
        }
        i++;
    }
    zt_comm *world = NULL;
    if (zt_launched_by_mpi()) {
        if (zt_comm_init(NULL, NULL, &world, &err)) return zt_cli_fail(&err);
    } else if (nproc > 1) {
        zt_launch_policy pol = {.grace_s = 10.0}; /* a benchmark saves nothing */
        int code = zt_launch_local(nproc, &pol, argc, argv, &err);
        return code < 0 ? zt_cli_fail(&err) : code;
    }
    int rank = world ? zt_comm_rank(world) : 0, W = world ? zt_comm_size(world) : 1;
    FILE *out = rank == 0 ? stdout : fopen("/dev/null", "w");
    zt_model_spec spec;
    zt_gpt2_config cfg; /* the common shape of either family */
    zt_model *m = NULL;
    zt_train_setup su = {0}; /* the mesh, the engine (src/train/setup.h) */
    zt_train_config *tc = NULL; /* the run, said as a configuration */
    int32_t *tok = NULL, *cp_tok = NULL, *cp_pos = NULL; /* cp_*: a context-parallel rank's chunks */
    double *times = NULL;
    int rc;
    /* the mesh: tp consecutive ranks per tensor-parallel group, the strategy over the dp ranks */
    zt_train_setup_options so = {.world = world, .sizes = {.tp = tp, .cp = cp, .pp = 1,
                                                          .hybrid = strategy == ZT_STRATEGY_HYBRID, .ep = ep},
                                 .cp_mode = cp_mode};
    int nranks = W / (W % (tp * cp) ? 1 : tp * cp); /* the data-parallel ranks (the mesh refuses bad sizes) */
    if (cp > 1 && T % (2 * cp)) {
        rc = zt_error_set(&err, ZT_ERR_USAGE, "bench: --cp %d: 2 x %d does not divide -T %d", cp, cp, T);
        goto out;
    }
    so.sizes.shard = nranks >= 2 && nranks % 2 == 0 ? nranks / 2 : nranks;
    if ((rc = zt_model_preset(preset, &spec, &err))) goto out;
    spec.gpt2.attention = spec.llama.attention = attention;
    if (max_seq_len) spec.gpt2.max_seq_len = spec.llama.max_seq_len = max_seq_len;
    spec.loss_chunk_tokens = zt_loss_chunk_for(loss_chunk, B, T);
    if ((rc = zt_model_spec_create(&spec, &m, &err))) goto out;
    /* the run as a configuration, turned into engine options the way zerotrain train does
     * (src/train/engine_options.c); what differs from the configuration's defaults is said here */
    if (!(tc = malloc(sizeof *tc))) {
        rc = zt_error_set(&err, ZT_ERR_NOMEM, "bench: out of memory");
        goto out;
    }
    zt_train_config_default(tc);
    tc->micro_batch = B;
    tc->seq_len = T;
    tc->context_parallel_size = cp;
    tc->expert_parallel_size = ep;
    tc->seed = 1337;
    tc->strategy = strategy;
    tc->hybrid_shard_size = so.sizes.shard;
    tc->precision = (int)precision;
    tc->attention_dtype = attn_fp32 ? ZT_CFG_ATTN_FP32 : ZT_CFG_ATTN_AUTO;
    tc->activation_checkpointing = (int)recompute;
    zt_optimizer_config_default(&tc->optim); /* the engine's AdamW (SGD's momentum 0.9, unused) */
    tc->fault_nonfinite_skips = 0; /* a non-finite step is an error, not a skipped update */
    if (off.optimizer_dir || off.param_dir) { /* --offload-*: the engine's defaults where a flag is absent (0) */
        if ((off.optimizer_dir && strlen(off.optimizer_dir) >= sizeof tc->offload_optimizer_nvme_path) ||
            (off.param_dir && strlen(off.param_dir) >= sizeof tc->offload_param_nvme_path)) {
            rc = zt_error_set(&err, ZT_ERR_USAGE, "bench: --offload-nvme/--offload-param-nvme: a path of %d "
                              "characters or more", ZT_PATH_MAX);
            goto out;
        }
        if (off.optimizer_dir) {
            tc->offload_optimizer = ZT_CFG_OFFLOAD_NVME;
            snprintf(tc->offload_optimizer_nvme_path, sizeof tc->offload_optimizer_nvme_path, "%s", off.optimizer_dir);
        }
        if (off.param_dir) {
            tc->offload_param = ZT_CFG_OFFLOAD_NVME;
            snprintf(tc->offload_param_nvme_path, sizeof tc->offload_param_nvme_path, "%s", off.param_dir);
        }
        tc->offload_buffer_count = off.buffer_count;
        tc->offload_buffer_mb = (float)off_mb;
        tc->offload_io_threads = off.io_threads;
        tc->offload_param_prefetch = off.param_prefetch >= 0 ? (off.param_prefetch ? off.param_prefetch : 1) : 0;
        tc->offload_param_max_live = (int64_t)off.param_max_live;
    }
    zt_engine_options eo;
    zt_train_engine_options(tc, W, world, &eo);
    const char *pname = zt_precision_mode_name(precision);
    /* mesh -> tensor parallelism -> engine -> the seeded parameters, as zerotrain train sets up */
    if ((rc = zt_train_setup_create(m, &so, &eo, &su, &err))) goto out;
    zt_engine *e = su.e;
    int drank = su.mesh->dp_rank;
    zt_model_spec_shape(&spec, &cfg.n_layer, &cfg.n_head, &cfg.n_embd, &cfg.vocab_size, &cfg.max_seq_len);
    zt_offload_stats io_sum = {0}, io;
    if (zt_engine_offload_describe(e)[0]) fprintf(out, "offload: %s\n", zt_engine_offload_describe(e));
    tok = malloc(((size_t)B * T + 1) * sizeof *tok);
    if (cp > 1) {
        cp_tok = malloc(2 * (size_t)B * (T / cp) * sizeof *cp_tok); /* inputs, then targets */
        cp_pos = malloc((size_t)B * (T / cp) * sizeof *cp_pos);
    }
    if (cp > 1 && (!cp_tok || !cp_pos)) {
        rc = zt_error_set(&err, ZT_ERR_NOMEM, "bench: out of memory");
        goto out;
    }
    times = malloc(2 * (size_t)steps * sizeof *times); /* wall, then CPU per thread */
    if (!tok || !times) {
        rc = zt_error_set(&err, ZT_ERR_NOMEM, "bench: out of memory");
        goto out;
    }
    uint64_t s = 12345 + (uint64_t)drank * 7919; /* a tp group reads the same tokens */
    int threads = omp_get_max_threads();
    double fpt = m->train_flops_per_token(m, T);
    fprintf(out, "bench: %s L=%d C=%d NH=%d V=%d, %.1fM params, B=%d T=%d per rank, %s, AdamW, %d rank%s x "
            "%d threads, strategy %s, %.3f GFLOP/token\n", preset, cfg.n_layer, cfg.n_embd, cfg.n_head,
            cfg.vocab_size, zt_model_numel(m) / 1e6, B, T, pname, W, W > 1 ? "s" : "", threads,
            zt_strategy_name(strategy), fpt / 1e9);
    if (ep > 1)
        fprintf(out, "experts over ep %d: %d experts a rank, all-to-all dispatch\n", ep, m->moe_experts / ep);
    if (tp > 1 || cp > 1)
        fprintf(out, "mesh tp %d x cp %d x dp %d: B=%d T=%d per data-parallel rank%s%s\n", tp, cp, nranks, B, T,
                cp > 1 ? ", each cp rank holding 2 chunks: attention " : "", cp > 1 ? zt_cp_mode_name(cp_mode) : "");
    zt_memory_report mem;
    zt_engine_memory(e, &mem);
    fprintf(out, "activation checkpointing %s, %s attention (%s products), loss %s: activations %.1f MiB per rank\n",
            zt_recompute_name(recompute), zt_attention_name(attention),
            attention == ZT_ATTENTION_FLASH ? zt_dtype_name(eo.precision.attention) : "fp32",
            spec.loss_chunk_tokens ? "in chunks" : "whole", mem.activations / 1048576.0);
    zt_comm_bytes bytes = {0}, step_bytes;
    for (int it = 0; it < warmup + steps; it++) {
        for (int i = 0; i <= B * T; i++) {
            s = s * 6364136223846793005ULL + 1442695040888963407ULL;
            tok[i] = (int32_t)((s >> 33) % (uint64_t)cfg.vocab_size);
        }
        if (it == warmup) zt_engine_reset_times(e), zt_gemm_stats_reset();
        zt_engine_comm_bytes(e, &step_bytes, true);
        zt_engine_offload_stats(e, &io, true);
        double t0 = omp_get_wtime(), c0 = process_cpu_s();
        zt_batch b = {.B = B, .T = T, .inputs = tok, .targets = tok + 1,
                      .dloss = 1.0f / (float)(B * T * nranks), .logits_pos = -1};
        if (cp > 1) /* context parallelism: this rank's two chunks of the sequences */
            zt_cp_cut_batch(&b, cp, su.mesh->cp_rank, cp_tok, cp_tok + (size_t)B * (T / cp), cp_pos, &b);
        float loss;
        zt_step_report rep;
        if ((rc = zt_engine_forward_backward(e, &b, &loss, &err)) ||
            (rc = zt_engine_step(e, 3e-4f, &rep, &err)))
            goto out;
        double t = omp_get_wtime() - t0;
        if (W > 1 && (rc = zt_all_reduce_max_f64(world, &t, "step time", &err))) goto out;
        zt_engine_comm_bytes(e, &step_bytes, true);
        if (it >= warmup) { /* this rank's bytes sent per step: data-parallel kinds, tensor-parallel */
            bytes.sent_rs += step_bytes.sent_rs;
            bytes.sent_ag += step_bytes.sent_ag;
            bytes.sent_ar += step_bytes.sent_ar;
            bytes.sent_tp += step_bytes.sent_tp;
            bytes.sent_ep += step_bytes.sent_ep;
        }
        fprintf(out, "%s %3d: loss %.4f  %.0f ms  %.1f tok/s\n", it < warmup ? "warmup" : "step  ",
                it < warmup ? it + 1 : it - warmup + 1, loss, 1e3 * t, (double)B * T * nranks / t);
        fflush(out);
        if (it >= warmup) times[it - warmup] = t, times[steps + it - warmup] = (process_cpu_s() - c0) / threads;
        zt_engine_offload_stats(e, &io, true);
        if (it >= warmup) {
            io_sum.read_bytes += io.read_bytes;
            io_sum.write_bytes += io.write_bytes;
            io_sum.stream_s += io.stream_s;
            io_sum.wait_s += io.wait_s;
            io_sum.update_s += io.update_s;
            io_sum.gather_read_bytes += io.gather_read_bytes;
            io_sum.gather_wait_s += io.gather_wait_s;
            io_sum.grad_write_wait_s += io.grad_write_wait_s;
        }
    }
    /* where the time goes, per unit, averaged over the timed steps */
    zt_gemm_stats gs; /* the steps' matrix products (zt_gemm), before anything else calls one */
    zt_gemm_stats_get(&gs);
    double fwd_total = 0, bwd_total = 0;
    for (int u = 0; u < m->n_units; u++) {
        double f, bw;
        zt_engine_unit_times(e, u, &f, &bw);
        fwd_total += f;
        bwd_total += bw;
        if (u < 2 || u == m->n_units - 1)
            fprintf(out, "  unit %-10s forward %7.1f ms  backward %7.1f ms\n", m->units[u].name,
                    1e3 * f / steps, 1e3 * bw / steps);
    }
    double sum = 0;
    for (int i = 0; i < steps; i++) sum += times[i];
    qsort(times, (size_t)steps, sizeof *times, cmp_double);
    qsort(times + steps, (size_t)steps, sizeof *times, cmp_double);
    double cpu_med = times[steps + steps / 2]; /* the process's CPU seconds per step / threads: on a
                                                  shared machine, what the step cost its own threads */
    double med = times[steps / 2], mean = sum / steps;
    fprintf(out, "  cpu: %.1f ms per step of this process's CPU time / %d threads (wall %.1f ms): %.1f tok/s "
            "of its own CPU time\n", 1e3 * cpu_med, threads, 1e3 * med, (double)B * T * nranks / cpu_med);
    fprintf(out, "  all units: forward %.1f ms, backward %.1f ms; optimizer + rest %.1f ms (mean step %.1f ms)\n",
           1e3 * fwd_total / steps, 1e3 * bwd_total / steps, 1e3 * (mean - (fwd_total + bwd_total) / steps),
           1e3 * mean);
    /* the step's time in its matrix products (the Linears, the LM head; flash attention's own tiles
     * are not zt_gemm calls) against everything else: what bench/gemm_compare's limit leaves out */
    double gemm_ms = gs.ns / 1e6 / steps, gemm_rate = gs.ns > 0 ? (double)gs.flops / gs.ns : 0;
    fprintf(out, "  matrix products (zt_gemm, %lld calls a step): %.1f ms a step at %.0f GFLOP/s; everything else "
            "%.1f ms (attention, elementwise kernels, optimizer)\n", gs.products / steps, gemm_ms, gemm_rate,
            1e3 * mean - gemm_ms);
    /* NVMe offload: what one optimizer pass moved, and how fast (rank 0's files) */
    double io_gbps = io_sum.stream_s > 0 ? (double)(io_sum.read_bytes + io_sum.write_bytes) / io_sum.stream_s / 1e9 : 0;
    int ahead = off.param_prefetch > 0 ? off.param_prefetch : off.param_prefetch == 0; /* -1: none, 0: 1 */
    if (io_sum.gather_read_bytes)
        fprintf(out, "  parameter offload per step: the gathers read %.1f MB of pieces and waited %.1f ms for their "
                "reads (%d unit%s read ahead); backward waited %.1f ms for the gradient pieces' writes\n",
                io_sum.gather_read_bytes / 1e6 / steps, 1e3 * io_sum.gather_wait_s / steps,
                ahead, ahead == 1 ? "" : "s",
                1e3 * io_sum.grad_write_wait_s / steps);
    if (io_sum.stream_s > 0)
        fprintf(out, "  offload per step: read %.1f MB, wrote %.1f MB; optimizer pass %.1f ms (updating %.1f ms, waiting "
                "on the disk %.1f ms); I/O rate over the pass %.2f GB/s (read %.2f + write %.2f)\n",
                io_sum.read_bytes / 1e6 / steps, io_sum.write_bytes / 1e6 / steps, 1e3 * io_sum.stream_s / steps,
                1e3 * io_sum.update_s / steps, 1e3 * io_sum.wait_s / steps, io_gbps,
                (double)io_sum.read_bytes / io_sum.stream_s / 1e9, (double)io_sum.write_bytes / io_sum.stream_s / 1e9);
    double dp_mb = (double)(bytes.sent_rs + bytes.sent_ag + bytes.sent_ar) / 1e6 / steps;
    fprintf(out, "  bytes sent per step by rank 0: data-parallel %.2f MB (reduce-scatter %.2f, all-gather %.2f, "
            "all-reduce %.2f), tensor-parallel %.2f MB\n", dp_mb, bytes.sent_rs / 1e6 / steps, bytes.sent_ag / 1e6 / steps,
            bytes.sent_ar / 1e6 / steps, bytes.sent_tp / 1e6 / steps);
    /* memory: the plan made before the first step against the engine's accounting after the steps
     * (rank 0's), and the whole process's peak resident set (libraries, stacks, heap included) */
    zt_memory_plan plan;
    zt_engine_memory_plan(e, &plan);
    zt_engine_memory(e, &mem);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    size_t rss = (size_t)ru.ru_maxrss * 1024;
    fprintf(out, "  memory: planned peak %.1f MiB (activations %.1f), measured peak %.1f MiB (activations %.1f); "
            "process peak RSS %.1f MiB\n", plan.peak_total / 1048576.0, plan.peak[ZT_MEM_ACTIVATIONS] / 1048576.0,
            mem.peak_total / 1048576.0, mem.peak_activations / 1048576.0, rss / 1048576.0);
    fprintf(out, "  per step (medians): wall %.1f ms, CPU %.1f ms per thread (what the step cost its own threads "
            "on a shared machine)\n", 1e3 * med, 1e3 * cpu_med);
    double tps = (double)B * T * nranks / med, gflops = fpt * tps / 1e9;
    /* MFU against the peak of every core the job uses in the precision its products run in (the
     * measured FMA or bf16 dot-product rate, peak.h); the GEMM rate measured on this rank's threads */
    bool lp = precision == ZT_PRECISION_BF16 || precision == ZT_PRECISION_BF16_LOW;
    zt_cpu_peak cpk;
    zt_cpu_peak_detect(&cpk);
    if (cpk.override_gflops <= 0) zt_cpu_peak_measure(&cpk);
    double peak = zt_cpu_peak_flops(&cpk, zt_cores_per_rank(threads) * W, W, lp) / 1e9;
    double peak_bf16 = zt_cpu_peak_flops(&cpk, zt_cores_per_rank(threads) * W, W, true) / 1e9;
    double gemm = rank == 0 ? measure_gemm_gflops(B * T, cfg.n_embd) * W : 0;
    char platform[800], platform_json[900];
    zt_platform_describe(platform, sizeof platform);
    fprintf(out, "%s\n", platform);
    zt_platform_json(platform_json, sizeof platform_json);
    fprintf(out, "zerotrain: %.1f tok/s (median of %d), %.1f GFLOP/s = MFU %.1f%% of the %s %.0f GFLOP/s", tps,
            steps, gflops, 100 * gflops / peak, zt_cpu_peak_source(&cpk, lp), peak);
    if (lp) /* an fp32 GEMM rate is no bound for bf16 products: bench/gemm_compare measures the bf16 one */
        fprintf(out, " (GEMM backend %s; the bf16 GEMM limit: build/bench/gemm_compare)\n", zt_gemm_backend_name());
    else
        fprintf(out, "; %.1f%% of measured sgemm %.0f GFLOP/s (OpenBLAS core %s, GEMM backend %s)\n", 100 * gflops / gemm,
                gemm, openblas_get_corename(), zt_gemm_backend_name());
    fprintf(out, "{\"impl\":\"zerotrain\",\"version\":\"%s\",\"preset\":\"%s\",\"dtype\":\"%s\",\"threads\":%d,"
            "\"ranks\":%d,\"strategy\":\"%s\",\"B\":%d,\"T\":%d,\"steps\":%d,\"tok_per_s_median\":%.2f,"
            "\"step_ms_median\":%.1f,\"step_ms_min\":%.1f,\"gflops\":%.1f,\"peak_gflops\":%.1f,\"peak_source\":\"%s\","
            "\"gemm_gflops\":%.1f,\"peak_fraction\":%.4f,\"openblas_core\":\"%s\",\"bf16_peak_gflops\":%.1f,"
            "\"gemm_backend\":\"%s\",\"recompute\":\"%s\",\"activations_bytes\":%zu,\"offload\":%s,"
            "\"offload_read_mb\":%.1f,\"offload_write_mb\":%.1f,\"offload_pass_ms\":%.1f,\"offload_wait_ms\":%.1f,"
            "\"offload_update_ms\":%.1f,\"offload_io_gbps\":%.3f,\"offload_gather_read_mb\":%.1f,"
            "\"offload_gather_wait_ms\":%.1f,\"offload_grad_write_wait_ms\":%.1f,\"offload_param_prefetch\":%d,"
            "\"fwd_ms\":%.1f,\"bwd_ms\":%.1f,\"comm_wait_ms\":%.1f,\"tp\":%d,\"cp\":%d,\"cp_mode\":\"%s\",\"dp_sent_mb\":%.3f,\"tp_sent_mb\":%.3f,"
            "\"ep\":%d,\"ep_sent_mb\":%.3f,"
            "\"attention\":\"%s\",\"attention_dtype\":\"%s\",\"loss_chunk\":%d,\"max_seq_len\":%d,\"planned_peak_bytes\":%zu,\"measured_peak_bytes\":%zu,"
            "\"planned_activations_bytes\":%zu,\"measured_activations_bytes\":%zu,\"max_rss_bytes\":%zu,"
            "\"cpu_step_ms_median\":%.1f,\"tok_per_cpu_s\":%.2f,\"gemm_ms\":%.1f,\"gemm_step_gflops\":%.1f,"
            "%s}\n",
            ZT_VERSION, preset, pname, threads, W, zt_strategy_name(strategy), B, T, steps, tps, 1e3 * med,
            1e3 * times[0], gflops, peak, zt_cpu_peak_source(&cpk, lp), gemm, gflops / gemm, openblas_get_corename(), peak_bf16,
            zt_gemm_backend_name(), zt_recompute_name(recompute), mem.activations,
            zt_engine_offload_describe(e)[0] ? "true" : "false", io_sum.read_bytes / 1e6 / steps,
            io_sum.write_bytes / 1e6 / steps, 1e3 * io_sum.stream_s / steps, 1e3 * io_sum.wait_s / steps,
            1e3 * io_sum.update_s / steps, io_gbps, io_sum.gather_read_bytes / 1e6 / steps,
            1e3 * io_sum.gather_wait_s / steps, 1e3 * io_sum.grad_write_wait_s / steps, ahead, 1e3 * fwd_total / steps,
            1e3 * bwd_total / steps, 1e3 * zt_engine_comm_seconds(e) / steps, tp, cp, zt_cp_mode_name(cp_mode), dp_mb, bytes.sent_tp / 1e6 / steps,
            ep, bytes.sent_ep / 1e6 / steps,
            zt_attention_name(attention),
            attention == ZT_ATTENTION_FLASH ? zt_dtype_name(eo.precision.attention) : "fp32", loss_chunk,
            cfg.max_seq_len, plan.peak_total, mem.peak_total, plan.peak[ZT_MEM_ACTIVATIONS],
            mem.peak_activations, rss, 1e3 * cpu_med, (double)B * T * nranks / cpu_med, gemm_ms, gemm_rate,
            platform_json);
    rc = ZT_OK;
out:
    free(tok);
    free(cp_tok);
    free(cp_pos);
    free(times);
    zt_train_setup_free(&su, m);
    zt_model_free(m);
    free(tc);
    if (out && out != stdout) fclose(out);
    if (rc) {
        int code = zt_cli_fail(&err);
        if (world && nranks > 1) zt_comm_abort(code);
        return code;
    }
    zt_comm_free(world);
    if (world) zt_comm_finalize(&err);
    return 0;
}
