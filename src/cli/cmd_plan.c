/* cmd_plan.c - `zerotrain plan`: the scale model (src/scale/, docs/scale.md). For a model on a
 * cluster (nodes x devices per node, a device from the table or this machine, the links between
 * them) it predicts, for ddp, zero1, zero2, zero3 and hybrid at several shard sizes: the step
 * time, tokens/s per device, MFU, memory per device (the engine's memory plan: estimate-memory's
 * numbers) and communication exposed and hidden. Bad input: exit 2 naming the option. */
#include "cli/args.h"
#include "cli/commands.h"
#include "memory/plan.h"
#include "memory/shapes.h"
#include "scale/predict.h"
#include "scale/units.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *out) {
    fprintf(out,
            "usage: zerotrain plan --model NAME [--gpu h100] [--nodes 1] [--gpus-per-node 8]\n"
            "                      [--intra BW] [--inter BW] [--nics K] [--intra-latency T] [--inter-latency T]\n"
            "                      [--seq T] [--micro-batch B] [--global-batch G] [--precision bf16|fp32|bf16-low|fp16]\n"
            "                      [--reduce-dtype fp32|bf16|fp16] [--ac none|selective|full] [--hybrid S[,S...]]\n"
            "                      [--efficiency F] [--profile nccl|zerotrain] [--no-reshard-after-forward]\n"
            "                      [--cpu-share F] [--threads N] [--json]\n"
            "  --model          a preset of the engine's models (gpt2-124M ... llama-70b, llama3-8b, llama3-70b, ...)\n"
            "  --gpu            v100, a100, h100, h200, mi300x, b200 (vendor datasheet peaks), or cpu: this\n"
            "                   machine, measured now (FMA peak, the engine's GEMM at the model's shapes, memory\n"
            "                   bandwidth), every device of the cluster sharing its cores (the namespace hosts)\n"
            "  --intra, --inter bandwidth per device inside a node, and per NIC between nodes, each direction,\n"
            "                   with a unit: 450GB/s (bytes), 400Gb/s or 1gbit (bits). NVLink's advertised 900 GB/s\n"
            "                   counts both directions. --intra defaults to the device's link (cpu: required);\n"
            "                   --inter is required with more than one node\n"
            "  --nics           NICs per node (default: one per device for GPUs, 1 for cpu)\n"
            "  --*-latency      per collective step, with a unit: 2us (defaults: 2us inside, 5us between nodes;\n"
            "                   cpu 20us, 50us)\n"
            "  --seq, --micro-batch   tokens per sequence (default min(context, 4096)) and sequences per\n"
            "                   micro-batch (1)\n"
            "  --global-batch   sequences per step over all devices (default devices x micro-batch); a multiple\n"
            "                   of devices x micro-batch: the rest is gradient accumulation\n"
            "  --precision      bf16 (default; cpu: fp32); --reduce-dtype: the gradient collectives (fp32)\n"
            "  --ac             activation checkpointing (none)\n"
            "  --hybrid         hybrid shard sizes to show (default: a node, 2 nodes, 4, ... below all)\n"
            "  --efficiency     fraction of the dense peak the Linears' products reach (GPUs; default 0.75, measured\n"
            "                   on an H100 with cuBLAS; attention 0.45 and memory-bound 0.55 likewise: docs/scale.md)\n"
            "  --profile        who runs the collectives: nccl (GPUs: ring/tree, bf16 gathers, zero2/3 reduce\n"
            "                   every micro-batch) or zerotrain (this engine over MPI: pairwise, fp32 gathers,\n"
            "                   reductions in the last micro-batch); default nccl, cpu zerotrain\n"
            "  --no-reshard-after-forward  zero3/hybrid keep gathered parameters from forward to backward\n"
            "  --cpu-share      cpu: the fraction of a core each device thread gets (default: cores / (devices x\n"
            "                   threads), capped at 1; on a busy machine, measure it: bench/scale_calibrate.sh)\n"
            "  --threads        OpenMP threads per device (cpu: what the GEMMs are timed with; also sizes the\n"
            "                   memory plan's attention scratch as estimate-memory --threads does; default 1)\n"
            "  --json           the same numbers as one JSON object\n"
            "tp and pp are not modelled: zerotrain has no tensor or pipeline parallelism (docs/scale.md).\n"
            "Exit code 0, or 2 on bad input (unknown model or device, malformed bandwidth, sizes that do not divide).\n");
}

static int fail_usage(zt_error *err, const char *fmt, const char *a, const char *b) {
    zt_error_set(err, ZT_ERR_USAGE, fmt, a, b);
    return zt_cli_fail(err);
}

/* "8,16,32" into sizes[]; each >= 1. */
static int parse_sizes(const char *text, int *sizes, int cap, int *n, zt_error *err) {
    *n = 0;
    const char *p = text;
    while (*p) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 1 || v > 1 << 24 || (*end && *end != ',') || *n >= cap)
            return zt_error_set(err, ZT_ERR_USAGE, "plan: --hybrid \"%s\": expected shard sizes like 8,16,32 (at most %d)",
                                text, cap);
        sizes[(*n)++] = (int)v;
        p = *end ? end + 1 : end;
    }
    return *n ? ZT_OK : zt_error_set(err, ZT_ERR_USAGE, "plan: --hybrid needs at least one shard size");
}

typedef struct args {
    const char *model, *gpu, *intra, *inter, *intra_lat, *inter_lat;
    int nodes, per_node, nics, seq, mb, global, threads, ac, precision, reduce, profile, n_hybrid;
    int hybrid[16];
    double efficiency, cpu_share;
    bool json, no_reshard;
} args;

static int parse_args(int argc, char **argv, args *a, zt_error *err) {
    memset(a, 0, sizeof *a);
    a->nodes = 1, a->per_node = 8, a->mb = 1, a->threads = 1, a->precision = -1, a->profile = -1;
    static const char *AC[] = {"none", "full", "selective"}, *REDUCE[] = {"fp32", "bf16", "fp16"}, /* zt_dtype order */
                      *PREC[] = {"fp32", "bf16", "bf16-low", "fp16"}, *PROF[] = {"nccl", "zerotrain"};
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        if (!strcmp(o, "--json")) { a->json = true; continue; }
        if (!strcmp(o, "--no-reshard-after-forward")) { a->no_reshard = true; continue; }
        if (o[0] != '-') return zt_error_set(err, ZT_ERR_USAGE, "plan: unexpected argument \"%s\" (see --help)", o);
        if (i + 1 >= argc) return zt_error_set(err, ZT_ERR_USAGE, "plan: %s needs a value (see --help)", o);
        const char *v = argv[++i];
        int rc = ZT_OK;
        if (!strcmp(o, "--model")) a->model = v;
        else if (!strcmp(o, "--gpu")) a->gpu = v;
        else if (!strcmp(o, "--intra")) a->intra = v;
        else if (!strcmp(o, "--inter")) a->inter = v;
        else if (!strcmp(o, "--intra-latency")) a->intra_lat = v;
        else if (!strcmp(o, "--inter-latency")) a->inter_lat = v;
        else if (!strcmp(o, "--nodes")) rc = zt_cli_parse_int("plan", o, v, 1, 1 << 20, &a->nodes, err);
        else if (!strcmp(o, "--gpus-per-node")) rc = zt_cli_parse_int("plan", o, v, 1, 1024, &a->per_node, err);
        else if (!strcmp(o, "--nics")) rc = zt_cli_parse_int("plan", o, v, 1, 1024, &a->nics, err);
        else if (!strcmp(o, "--seq")) rc = zt_cli_parse_int("plan", o, v, 1, 1 << 24, &a->seq, err);
        else if (!strcmp(o, "--micro-batch")) rc = zt_cli_parse_int("plan", o, v, 1, 1 << 20, &a->mb, err);
        else if (!strcmp(o, "--global-batch")) rc = zt_cli_parse_int("plan", o, v, 1, 1 << 30, &a->global, err);
        else if (!strcmp(o, "--threads")) rc = zt_cli_parse_int("plan", o, v, 1, 4096, &a->threads, err);
        else if (!strcmp(o, "--ac")) rc = zt_cli_parse_choice("plan", o, v, AC, 3, &a->ac, err);
        else if (!strcmp(o, "--precision")) rc = zt_cli_parse_choice("plan", o, v, PREC, 4, &a->precision, err);
        else if (!strcmp(o, "--reduce-dtype")) rc = zt_cli_parse_choice("plan", o, v, REDUCE, 3, &a->reduce, err);
        else if (!strcmp(o, "--profile")) rc = zt_cli_parse_choice("plan", o, v, PROF, 2, &a->profile, err);
        else if (!strcmp(o, "--hybrid")) rc = parse_sizes(v, a->hybrid, 16, &a->n_hybrid, err);
        else if (!strcmp(o, "--cpu-share")) {
            char *end;
            a->cpu_share = strtod(v, &end);
            if (*end || !(a->cpu_share > 0 && a->cpu_share <= 1))
                rc = zt_error_set(err, ZT_ERR_USAGE, "plan: --cpu-share \"%s\": expected a fraction of a core in (0, 1]", v);
        } else if (!strcmp(o, "--efficiency")) {
            char *end;
            a->efficiency = strtod(v, &end);
            if (*end || !(a->efficiency > 0 && a->efficiency <= 1))
                rc = zt_error_set(err, ZT_ERR_USAGE, "plan: --efficiency \"%s\": expected a fraction in (0, 1]", v);
        } else rc = zt_error_set(err, ZT_ERR_USAGE, "plan: unknown option %s (see zerotrain plan --help)", o);
        if (rc) return rc;
    }
    if (!a->model) return zt_error_set(err, ZT_ERR_USAGE, "plan: --model NAME is required (see --help)");
    if (!a->gpu) a->gpu = "h100";
    return ZT_OK;
}

/* ---- output ------------------------------------------------------------------------------------ */
typedef struct shown {
    const args *a;
    const zt_model *m;
    const zt_scale_device *d;
    const zt_scale_cluster *cl;
    const zt_scale_compute *c;
    const zt_engine_options *o;
    zt_scale_row rows[24];
    int n_rows;
} shown;

static const char *row_name(const zt_scale_row *r, char *buf, size_t size) {
    if (r->strategy == ZT_STRATEGY_HYBRID) snprintf(buf, size, "hybrid/%d", r->shard);
    else snprintf(buf, size, "%s", zt_strategy_name(r->strategy));
    return buf;
}

static void print_text(FILE *out, const shown *w) {
    const args *a = w->a;
    const zt_scale_device *d = w->d;
    const zt_scale_cluster *cl = w->cl;
    const zt_scale_compute *c = w->c;
    int N = cl->nodes * cl->per_node, GA = w->o->grad_accum;
    char b1[32], b2[32], l1[32], l2[32];
    bool bf16 = w->o->precision.mode != ZT_PRECISION_FP32;
    fprintf(out, "zerotrain plan: %s (%.2fB parameters) on %d node%s x %d %s = %d devices\n", a->model,
            (double)zt_model_numel(w->m) / 1e9, cl->nodes, cl->nodes == 1 ? "" : "s", cl->per_node, d->name, N);
    if (d->measured)
        fprintf(out, "device: %s, %.2f of a core per thread (%s); peak %.1f GFLOP/s %s (measured FMA), memory "
                "bandwidth %.1f GB/s (measured triad), matrix products timed through the engine's GEMM at the model's "
                "shapes\n", d->desc, d->cpu_share, a->cpu_share > 0 ? "--cpu-share" : "cores / threads", c->peak / 1e9,
                bf16 ? "bf16" : "fp32", d->mem_bw / 1e9);
    else
        fprintf(out, "device: %s; %.0f TFLOP/s %s dense, %.0f GiB at %.2f TB/s; Linears at %.0f%% of peak (%s), "
                "attention at %.0f%%, memory-bound ops at %.0f%% of the bandwidth (measured on an H100: docs/scale.md)\n",
                d->desc, c->peak / 1e12, bf16 ? "bf16" : "fp32", d->memory / 1073741824.0, d->mem_bw / 1e12,
                100 * d->efficiency, a->efficiency > 0 ? "--efficiency" : "--efficiency sets it",
                100 * d->attn_efficiency, 100 * d->mem_efficiency);
    zt_scale_format_bandwidth(cl->net.intra_bw, b1, sizeof b1);
    zt_scale_format_seconds(cl->net.intra_lat, l1, sizeof l1);
    if (cl->per_node > 1) fprintf(out, "links (each direction): intra-node %s per device, %s per step", b1, l1);
    else fprintf(out, "links (each direction): one device per node");
    if (cl->nodes > 1) {
        zt_scale_format_bandwidth(cl->net.nic_bw, b2, sizeof b2);
        zt_scale_format_seconds(cl->net.inter_lat, l2, sizeof l2);
        fprintf(out, "; inter-node %d NIC%s x %s per node, %s per step", cl->net.nics, cl->net.nics == 1 ? "" : "s", b2, l2);
    }
    fprintf(out, "; collectives %s (profile %s)\n", cl->net.algo == ZT_SCALE_RING ? "ring/tree" : "pairwise",
            cl->profile == ZT_SCALE_NCCL ? "nccl" : "zerotrain");
    fprintf(out, "batch: %d x %d tokens per micro-batch, %d micro-batch%s per step = %d sequences (%.3gM tokens) per "
            "step; precision %s, reductions in %s; activation checkpointing %s\n", w->o->B, w->o->T, GA,
            GA == 1 ? "" : "es", N * w->o->B * GA, (double)N * w->o->B * GA * w->o->T / 1e6,
            zt_precision_mode_name(w->o->precision.mode), zt_dtype_name(w->o->precision.reduce),
            zt_recompute_name(w->o->activation_checkpointing));
    fprintf(out, "compute per micro-batch and device: forward %.4g s, backward %.4g s = matmul %.4g + attention %.4g + "
            "memory-bound %.4g + recompute %.4g s; optimizer %.4g s per 1e9 parameters updated\n",
            c->fwd_total, c->bwd_total, c->matmul_s, c->attention_s, c->memory_s, c->recompute_s, c->opt_s_per_param * 1e9);
    fprintf(out, "\n%-11s %9s %11s %8s %11s %5s %11s %10s %10s %13s\n", "strategy", "step (s)", "tok/s/dev", "MFU",
            "mem/dev GiB", "fits", "comm (s)", "exposed", "hidden", "inter GB/node");
    for (int i = 0; i < w->n_rows; i++) {
        const zt_scale_row *r = &w->rows[i];
        char name[32];
        fprintf(out, "%-11s %9.4g %11.1f %7.1f%% %11.2f %5s %11.4g %10.4g %10.4g %13.3g\n", row_name(r, name, sizeof name),
                r->step.step_s, r->tokens_per_s, 100 * r->mfu, (double)r->memory / 1073741824.0, r->fits ? "yes" : "NO",
                r->step.comm_s, r->step.exposed_s, r->step.hidden_s, r->node_out_bytes / 1e9);
    }
    fprintf(out, "\nstep: one optimizer step (%d micro-batch%s per device); comm: every collective's duration; exposed:\n"
            "the time compute waits for it (step - compute); hidden: the rest; inter GB/node: bytes each node sends\n"
            "to the others per step. mem/dev: the engine's memory plan (zerotrain estimate-memory), fits: against\n"
            "%.0f GiB. tp, pp: not modelled (zerotrain has no tensor or pipeline parallelism). Model: docs/scale.md.\n",
            GA, GA == 1 ? "" : "es", d->memory / 1073741824.0);
}

static void print_json(FILE *out, const shown *w) {
    const zt_scale_cluster *cl = w->cl;
    const zt_scale_compute *c = w->c;
    fprintf(out, "{\"model\":\"%s\",\"parameters\":%lld,\"device\":\"%s\",\"nodes\":%d,\"per_node\":%d,\"devices\":%d,"
            "\"peak_flops\":%.6g,\"efficiency\":%.4g,\"attn_efficiency\":%.4g,\"mem_efficiency\":%.4g,"
            "\"mem_bw\":%.6g,\"intra_bw\":%.6g,\"nic_bw\":%.6g,\"nics\":%d,"
            "\"intra_lat\":%.6g,\"inter_lat\":%.6g,\"profile\":\"%s\",\"B\":%d,\"T\":%d,\"grad_accum\":%d,"
            "\"precision\":\"%s\",\"reduce_dtype\":\"%s\",\"ac\":\"%s\",\"forward_s\":%.6g,\"backward_s\":%.6g,"
            "\"matmul_s\":%.6g,\"attention_s\":%.6g,\"memory_bound_s\":%.6g,\"recompute_s\":%.6g,"
            "\"optimizer_s_per_param\":%.6g,\"model_flops_per_token\":%.6g,\"device_memory\":%.6g,\"cpu_share\":%.6g,"
            "\"rows\":[",
            w->a->model, (long long)zt_model_numel(w->m), w->d->name, cl->nodes, cl->per_node, cl->nodes * cl->per_node,
            c->peak, w->d->efficiency, w->d->attn_efficiency, w->d->mem_efficiency, w->d->mem_bw, cl->net.intra_bw,
            cl->net.nic_bw, cl->net.nics, cl->net.intra_lat,
            cl->net.inter_lat, cl->profile == ZT_SCALE_NCCL ? "nccl" : "zerotrain", w->o->B, w->o->T, w->o->grad_accum,
            zt_precision_mode_name(w->o->precision.mode), zt_dtype_name(w->o->precision.reduce),
            zt_recompute_name(w->o->activation_checkpointing), c->fwd_total, c->bwd_total, c->matmul_s, c->attention_s,
            c->memory_s, c->recompute_s, c->opt_s_per_param, c->model_flops_per_token, w->d->memory, w->d->cpu_share);
    for (int i = 0; i < w->n_rows; i++) {
        const zt_scale_row *r = &w->rows[i];
        char name[32];
        fprintf(out, "%s{\"name\":\"%s\",\"strategy\":\"%s\",\"shard\":%d,\"step_s\":%.6g,\"compute_s\":%.6g,"
                "\"comm_s\":%.6g,\"exposed_s\":%.6g,\"hidden_s\":%.6g,\"tokens_per_s\":%.6g,\"mfu\":%.6g,"
                "\"memory\":%zu,\"fits\":%s,\"node_out_bytes\":%.6g}", i ? "," : "", row_name(r, name, sizeof name),
                zt_strategy_name(r->strategy), r->shard, r->step.step_s, r->step.compute_s, r->step.comm_s,
                r->step.exposed_s, r->step.hidden_s, r->tokens_per_s, r->mfu, r->memory, r->fits ? "true" : "false",
                r->node_out_bytes);
    }
    fprintf(out, "]}\n");
}

/* ---- the command ------------------------------------------------------------------------------- */
int zt_cmd_plan(int argc, char **argv) {
    zt_error err = {0};
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        }
    args a;
    if (parse_args(argc, argv, &a, &err)) return zt_cli_fail(&err);
    bool cpu = !strcmp(a.gpu, "cpu");
    zt_scale_device d;
    if (!cpu && zt_scale_device_lookup(a.gpu, &d, &err)) return zt_cli_fail(&err);
    int N = a.nodes * a.per_node;
    if ((long)a.nodes * a.per_node > 1 << 24)
        return fail_usage(&err, "plan: %s x %s devices is too many", "--nodes", "--gpus-per-node");
    zt_scale_cluster cl = {.nodes = a.nodes, .per_node = a.per_node};
    cl.profile = a.profile >= 0 ? (zt_scale_profile)a.profile : cpu ? ZT_SCALE_ZEROTRAIN : ZT_SCALE_NCCL;
    cl.net.algo = cl.profile == ZT_SCALE_NCCL ? ZT_SCALE_RING : ZT_SCALE_PAIRWISE;
    cl.net.per_node = a.per_node;
    cl.net.nics = a.nics ? a.nics : cpu ? 1 : a.per_node;
    if (cpu && !a.intra && a.per_node > 1)
        return fail_usage(&err, "plan: --gpu cpu needs %s (measure it: %s)", "--intra", "bench/link_bw.c");
    if (a.nodes > 1 && !a.inter)
        return fail_usage(&err, "plan: %s is required with more than one node (%s)", "--inter", "e.g. 400Gb/s");
    if (a.intra && zt_scale_parse_bandwidth("plan: --intra", a.intra, &cl.net.intra_bw, &err)) return zt_cli_fail(&err);
    if (a.inter && zt_scale_parse_bandwidth("plan: --inter", a.inter, &cl.net.nic_bw, &err)) return zt_cli_fail(&err);
    double lat_in = -1, lat_out = -1;
    if (a.intra_lat && zt_scale_parse_latency("plan: --intra-latency", a.intra_lat, &lat_in, &err)) return zt_cli_fail(&err);
    if (a.inter_lat && zt_scale_parse_latency("plan: --inter-latency", a.inter_lat, &lat_out, &err)) return zt_cli_fail(&err);

    zt_model *m = NULL;
    if (zt_estimator_model(a.model, ZT_ATTENTION_FLASH, &m, &err)) return zt_cli_fail(&err); /* the default kernel */
    int rc = ZT_OK;
    zt_engine_options o;
    zt_engine_options_default(&o);
    o.B = a.mb;
    o.T = a.seq ? a.seq : (m->max_seq_len < 4096 ? m->max_seq_len : 4096);
    if (a.global && a.global % (N * a.mb)) {
        rc = zt_error_set(&err, ZT_ERR_USAGE, "plan: --global-batch %d is not a multiple of %d devices x --micro-batch %d",
                          a.global, N, a.mb);
        goto done;
    }
    o.grad_accum = a.global ? a.global / (N * a.mb) : 1;
    zt_precision_default(&o.precision, a.precision >= 0 ? (zt_precision_mode)a.precision
                                                      : cpu ? ZT_PRECISION_FP32 : ZT_PRECISION_BF16);
    o.precision.reduce = (zt_dtype)a.reduce;
    if ((rc = zt_precision_check(&o.precision, &err))) goto done;
    o.activation_checkpointing = (zt_recompute)a.ac;
    o.keep_params_after_forward = a.no_reshard;
    omp_set_num_threads(a.threads); /* the GEMM timings (cpu) and the plan's attention scratch */
    if (cpu) {
        zt_scale_cpu_device(a.threads, N, a.cpu_share, &d);
        if (a.efficiency > 0) {
            rc = zt_error_set(&err, ZT_ERR_USAGE, "plan: --efficiency is for table devices; cpu times its products");
            goto done;
        }
    } else if (a.cpu_share > 0) {
        rc = zt_error_set(&err, ZT_ERR_USAGE, "plan: --cpu-share goes with --gpu cpu");
        goto done;
    } else if (a.efficiency > 0) d.efficiency = a.efficiency;
    if (!a.intra) cl.net.intra_bw = d.intra_bw > 0 ? d.intra_bw : 1e30; /* one device per node: unused */
    cl.net.intra_lat = lat_in >= 0 ? lat_in : d.intra_lat;
    cl.net.inter_lat = lat_out >= 0 ? lat_out : d.inter_lat;
    if (a.nodes == 1) cl.net.nic_bw = 1e30; /* unused */
    zt_memory_plan_options po;
    zt_memory_plan_options_default(&po);
    zt_scale_compute c;
    if ((rc = zt_scale_compute_model(m, &d, o.B, o.T, o.precision.mode != ZT_PRECISION_FP32, o.activation_checkpointing,
                                     &c, &err)))
        goto done;
    zt_scale_request rq = {.model = m, .compute = &c, .device = &d, .cluster = cl, .opt = o, .plan = po};
    shown w = {.a = &a, .m = m, .d = &d, .cl = &cl, .c = &c, .o = &o};
    static const zt_strategy flat[] = {ZT_STRATEGY_DDP, ZT_STRATEGY_ZERO1, ZT_STRATEGY_ZERO2, ZT_STRATEGY_ZERO3};
    for (size_t k = 0; k < 4 && !rc; k++) rc = zt_scale_predict(&rq, flat[k], 0, &w.rows[w.n_rows++], &err);
    int sizes[16], n = 0;
    if (a.n_hybrid) {
        for (int k = 0; k < a.n_hybrid; k++) {
            if (N % a.hybrid[k] || a.hybrid[k] >= N) {
                rc = zt_error_set(&err, ZT_ERR_USAGE, "plan: --hybrid %d must divide the %d devices and be smaller",
                                  a.hybrid[k], N);
                break;
            }
            sizes[n++] = a.hybrid[k];
        }
    } else
        for (int S = a.per_node > 1 ? a.per_node : 2; S < N && n < 16; S *= 2)
            if (N % S == 0) sizes[n++] = S;
    for (int k = 0; k < n && !rc; k++) rc = zt_scale_predict(&rq, ZT_STRATEGY_HYBRID, sizes[k], &w.rows[w.n_rows++], &err);
    if (!rc) {
        if (a.json) print_json(stdout, &w);
        else print_text(stdout, &w);
    }
    zt_scale_compute_free(&c);
done:
    zt_model_free(m);
    return rc ? zt_cli_fail(&err) : 0;
}
