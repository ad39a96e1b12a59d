/* cmd_plan.c - `zerotrain plan`: the scale model (src/scale/, docs/scale.md). For a model on a
 * cluster (nodes x devices per node, a device from the table or this machine, the links between
 * them) it predicts, for ddp, zero1, zero2, zero3 and hybrid at several shard sizes, each with
 * tensor parallelism tp and pipeline stages pp (given, or searched over a small grid: tp in 1, 2,
 * 4, 8 up to the devices per node, pp dividing the blocks, up to 16): the step time, tokens/s per
 * device, MFU, memory per device (the engine's memory plan: estimate-memory's numbers, --tp
 * included), communication exposed and hidden, and the pipeline's bubble; context parallelism
 * (--cp) cuts every sequence over cp of the data-parallel devices. Searching, it prints
 * the best rows of each strategy (those that fit first, then the fastest). Bad input: exit 2
 * naming the option. */
#include "cli/args.h"
#include "cli/commands.h"
#include "memory/plan.h"
#include "memory/shapes.h"
#include "scale/ep_comm.h"
#include "scale/predict.h"
#include "scale/units.h"
#include "shard/tp.h"

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
            "                      [--tp T] [--pp P] [--micro-batches M] [--pp-schedule 1f1b|gpipe] [--top K]\n"
            "                      [--cp C] [--cp-mode allgather|ring|ulysses] [--ep E] [--cpu-share F] [--threads N] [--json]\n"
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
            "                   of the data-parallel ranks (devices / (tp x pp)) x micro-batch: the rest is\n"
            "                   gradient accumulation, the pipeline's micro-batches\n"
            "  --micro-batches  micro-batches per step instead (each data-parallel rank's; the pipeline's m)\n"
            "  --tp, --pp       tensor-parallel parts (in a node: Megatron's column/row-parallel Linears, the\n"
            "                   all-reduces on the intra-node link) and pipeline stages (consecutive blocks);\n"
            "                   without them a grid is searched: tp 1, 2, 4, 8 (at most the devices per node,\n"
            "                   dividing the heads) x pp dividing the blocks (at most 16), and the best --top K\n"
            "                   rows of each strategy are printed (default 3; fitting rows first, then fastest)\n"
            "  --pp-schedule    1f1b (default: the first stage keeps pp micro-batches in flight) or gpipe (all m)\n"
            "  --cp, --cp-mode  context parallelism: every sequence cut over C of the data-parallel devices (2C\n"
            "                   dividing --seq; the strategies shard over all of them, as the engine's dp x cp),\n"
            "                   exchanging keys and values by allgather (default), ring or ulysses (default 1: none)\n"
            "  --ep             expert parallelism over E data-parallel devices (a mixture of experts): 4\n"
            "                   all-to-alls per block and micro-batch on the critical path, their buffers in each\n"
            "                   device's memory; the experts stored E/ep a device and their gradients reduced over\n"
            "                   the data-parallel ranks / E where the engine does (not hybrid, tp) (default 1: none)\n"
            "  --precision      bf16 (default; cpu: fp32); --reduce-dtype: the gradient collectives (fp32)\n"
            "  --ac             activation checkpointing (none)\n"
            "  --hybrid         hybrid shard sizes to show, in data-parallel ranks (S x tp devices per shard group;\n"
            "                   default: a node, 2 nodes, 4, ... below all the data-parallel ranks)\n"
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
    int tp, pp, micro_batches, pp_schedule, top; /* tp, pp 0: search */
    int cp;                                      /* --cp (1: none) */
    int ep;                                      /* --ep (1: none) */
    zt_cp_mode cp_mode;
    double efficiency, cpu_share;
    bool json, no_reshard;
} args;

static int parse_args(int argc, char **argv, args *a, zt_error *err) {
    memset(a, 0, sizeof *a);
    a->nodes = 1, a->per_node = 8, a->mb = 1, a->threads = 1, a->precision = -1, a->profile = -1, a->top = 3, a->cp = 1, a->ep = 1;
    static const char *AC[] = {"none", "full", "selective"}, *REDUCE[] = {"fp32", "bf16", "fp16"}, /* zt_dtype order */
                      *PREC[] = {"fp32", "bf16", "bf16-low", "fp16"}, *PROF[] = {"nccl", "zerotrain"},
                      *SCHED[] = {"1f1b", "gpipe"}; /* zt_scale_pp_schedule order */
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
        else if (!strcmp(o, "--tp")) rc = zt_cli_parse_int("plan", o, v, 1, 1024, &a->tp, err);
        else if (!strcmp(o, "--pp")) rc = zt_cli_parse_int("plan", o, v, 1, 4096, &a->pp, err);
        else if (!strcmp(o, "--micro-batches")) rc = zt_cli_parse_int("plan", o, v, 1, 1 << 20, &a->micro_batches, err);
        else if (!strcmp(o, "--cp")) rc = zt_cli_parse_int("plan", o, v, 1, ZT_CP_MAX_PARTS, &a->cp, err);
        else if (!strcmp(o, "--cp-mode")) rc = zt_cp_mode_parse(v, &a->cp_mode, err);
        else if (!strcmp(o, "--ep")) rc = zt_cli_parse_int("plan", o, v, 1, 4096, &a->ep, err);
        else if (!strcmp(o, "--top")) rc = zt_cli_parse_int("plan", o, v, 1, 64, &a->top, err);
        else if (!strcmp(o, "--pp-schedule")) rc = zt_cli_parse_choice("plan", o, v, SCHED, 2, &a->pp_schedule, err);
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
    if (a->global && a->micro_batches)
        return zt_error_set(err, ZT_ERR_USAGE, "plan: --global-batch and --micro-batches say the same thing: give one");
    if (!a->gpu) a->gpu = "h100";
    return ZT_OK;
}

/* ---- output ------------------------------------------------------------------------------------ */
typedef struct shown {
    const args *a;
    const zt_model *m;
    const zt_scale_device *d;
    const zt_scale_cluster *cl;
    zt_scale_compute c;           /* of the first tp evaluated (the header's) */
    int c_tp;
    const zt_engine_options *o;
    zt_scale_row *rows;
    int n_rows, cap;
    bool search;
    char skipped[512];            /* the grid's points that could not be cut, and why */
} shown;

static const char *row_name(const zt_scale_row *r, char *buf, size_t size) {
    if (r->strategy == ZT_STRATEGY_HYBRID) snprintf(buf, size, "hybrid/%d", r->shard);
    else snprintf(buf, size, "%s", zt_strategy_name(r->strategy));
    return buf;
}

/* Fitting rows first, then the faster. */
static int better(const zt_scale_row *x, const zt_scale_row *y) {
    if (x->fits != y->fits) return x->fits ? -1 : 1;
    return x->step.step_s < y->step.step_s ? -1 : x->step.step_s > y->step.step_s ? 1 : 0;
}
static int cmp_rows(const void *x, const void *y) { return better(x, y); }

static void print_row(FILE *out, const zt_scale_row *r) {
    char name[32];
    fprintf(out, "%-11s %3d %3d %4d %9.4g %11.1f %7.1f%% %11.2f %5s %10.4g %10.4g %10.4g %9.4g %13.3g\n",
            row_name(r, name, sizeof name), r->tp, r->pp, r->micro_batches, r->step.step_s, r->tokens_per_s,
            100 * r->mfu, (double)r->memory / 1073741824.0, r->fits ? "yes" : "NO", r->step.comm_s, r->step.exposed_s,
            r->step.hidden_s, r->bubble_s, r->node_out_bytes / 1e9);
}

static void print_text(FILE *out, shown *w) {
    const args *a = w->a;
    const zt_scale_device *d = w->d;
    const zt_scale_cluster *cl = w->cl;
    const zt_scale_compute *c = &w->c;
    int N = cl->nodes * cl->per_node;
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
    if (a->micro_batches)
        fprintf(out, "batch: %d x %d tokens per micro-batch, %d micro-batches per step and data-parallel rank", w->o->B,
                w->o->T, a->micro_batches);
    else
        fprintf(out, "batch: %d x %d tokens per micro-batch, %d sequences (%.3gM tokens) per step: micro-batches per "
                "step = that / (data-parallel ranks x %d)", w->o->B, w->o->T, a->global ? a->global : N / a->cp * w->o->B,
                (double)(a->global ? a->global : N / a->cp * w->o->B) * w->o->T / 1e6, w->o->B);
    if (a->cp > 1)
        fprintf(out, "; context parallel %d (%s): %d positions of each sequence per device", a->cp,
                zt_cp_mode_name(a->cp_mode), w->o->T / a->cp);
    if (a->ep > 1) { /* the memory plan holds the all-to-all's buffers and the experts as stored */
        double to, back;
        zt_scale_ep_elem_bytes(&w->o->precision, cl->profile == ZT_SCALE_ZEROTRAIN, &to, &back);
        fprintf(out, "; expert parallel %d: its all-to-alls on the critical path (%.0f+%.0f+%.0f+%.0f bytes an element), "
                "their buffers in the memory, the experts stored E/%d a device and reduced over the data-parallel "
                "ranks / %d (tp: whole; hybrid: stored, their reduction priced as whole experts')", a->ep, to, back, to, back, a->ep, a->ep);
    }
    fprintf(out, "; precision %s, reductions in %s; activation checkpointing %s; pipeline schedule %s\n",
            zt_precision_mode_name(w->o->precision.mode), zt_dtype_name(w->o->precision.reduce),
            zt_recompute_name(w->o->activation_checkpointing), zt_scale_pp_schedule_name((zt_scale_pp_schedule)a->pp_schedule));
    fprintf(out, "compute per micro-batch and device (tp %d): forward %.4g s, backward %.4g s = matmul %.4g + attention "
            "%.4g + memory-bound %.4g + recompute %.4g s; optimizer %.4g s per 1e9 parameters updated\n", w->c_tp,
            c->fwd_total, c->bwd_total, c->matmul_s, c->attention_s, c->memory_s, c->recompute_s, c->opt_s_per_param * 1e9);
    if (w->skipped[0]) fprintf(out, "not searched: %s\n", w->skipped);
    fprintf(out, "\n%-11s %3s %3s %4s %9s %11s %8s %11s %5s %10s %10s %10s %9s %13s\n", "strategy", "tp", "pp", "mb",
            "step (s)", "tok/s/dev", "MFU", "mem/dev GiB", "fits", "comm (s)", "exposed", "hidden", "bubble",
            "inter GB/node");
    if (!w->search) {
        for (int i = 0; i < w->n_rows; i++) print_row(out, &w->rows[i]);
    } else { /* the best --top rows of each strategy */
        qsort(w->rows, (size_t)w->n_rows, sizeof *w->rows, cmp_rows);
        for (int st = ZT_STRATEGY_DDP; st <= ZT_STRATEGY_HYBRID; st++)
            for (int i = 0, k = 0; i < w->n_rows && k < a->top; i++)
                if ((int)w->rows[i].strategy == st) print_row(out, &w->rows[i]), k++;
        if (w->n_rows) {
            const zt_scale_row *b = &w->rows[0];
            char name[32];
            fprintf(out, "\nbest: %s with tp %d, pp %d (%d data-parallel rank%s, %d micro-batch%s): %.4g s per step, "
                    "%.1f%% MFU, %.2f GiB per device%s (of %d points searched)\n", row_name(b, name, sizeof name), b->tp,
                    b->pp, b->dp, b->dp == 1 ? "" : "s", b->micro_batches, b->micro_batches == 1 ? "" : "es", b->step.step_s, 100 * b->mfu, (double)b->memory / 1073741824.0,
                    b->fits ? "" : ": NOTHING FITS", w->n_rows);
        }
    }
    fprintf(out, "\nstep: one optimizer step = compute + exposed + bubble; tp, pp: tensor-parallel parts, pipeline stages\n"
            "(devices / (tp x pp) data-parallel ranks, hybrid/S: S of them per shard group); mb: micro-batches per step;\n"
            "comm: every collective's duration, tp all-reduces, cp exchanges (ring: the part its attention does not hide)\n"
            "and pipeline transfers included (on the critical path); exposed: the time compute waits for it; hidden: the rest; bubble: the slowest stage idle while the\n"
            "pipeline fills and drains; inter GB/node: bytes each node sends to the others per step. mem/dev: the\n"
            "engine's memory plan (zerotrain estimate-memory [--tp]; with pp the stage needing the most), fits: against\n"
            "%.0f GiB. Model: docs/scale.md.\n", d->memory / 1073741824.0);
}

static void print_json(FILE *out, const shown *w) {
    const zt_scale_cluster *cl = w->cl;
    const zt_scale_compute *c = &w->c;
    fprintf(out, "{\"model\":\"%s\",\"parameters\":%lld,\"device\":\"%s\",\"nodes\":%d,\"per_node\":%d,\"devices\":%d,"
            "\"peak_flops\":%.6g,\"efficiency\":%.4g,\"attn_efficiency\":%.4g,\"mem_efficiency\":%.4g,"
            "\"mem_bw\":%.6g,\"intra_bw\":%.6g,\"nic_bw\":%.6g,\"nics\":%d,"
            "\"intra_lat\":%.6g,\"inter_lat\":%.6g,\"profile\":\"%s\",\"B\":%d,\"T\":%d,\"grad_accum\":%d,"
            "\"precision\":\"%s\",\"reduce_dtype\":\"%s\",\"ac\":\"%s\",\"pp_schedule\":\"%s\",\"search\":%s,"
            "\"cp\":%d,\"cp_mode\":\"%s\",\"compute_tp\":%d,\"forward_s\":%.6g,\"backward_s\":%.6g,"
            "\"matmul_s\":%.6g,\"attention_s\":%.6g,\"memory_bound_s\":%.6g,\"recompute_s\":%.6g,"
            "\"optimizer_s_per_param\":%.6g,\"model_flops_per_token\":%.6g,\"device_memory\":%.6g,\"cpu_share\":%.6g,"
            "\"rows\":[",
            w->a->model, (long long)zt_model_numel(w->m), w->d->name, cl->nodes, cl->per_node, cl->nodes * cl->per_node,
            c->peak, w->d->efficiency, w->d->attn_efficiency, w->d->mem_efficiency, w->d->mem_bw, cl->net.intra_bw,
            cl->net.nic_bw, cl->net.nics, cl->net.intra_lat,
            cl->net.inter_lat, cl->profile == ZT_SCALE_NCCL ? "nccl" : "zerotrain", w->o->B, w->o->T,
            w->n_rows ? w->rows[0].micro_batches : 1,
            zt_precision_mode_name(w->o->precision.mode), zt_dtype_name(w->o->precision.reduce),
            zt_recompute_name(w->o->activation_checkpointing),
            zt_scale_pp_schedule_name((zt_scale_pp_schedule)w->a->pp_schedule), w->search ? "true" : "false", w->a->cp,
            zt_cp_mode_name(w->a->cp_mode), w->c_tp,
            c->fwd_total, c->bwd_total, c->matmul_s, c->attention_s,
            c->memory_s, c->recompute_s, c->opt_s_per_param, c->model_flops_per_token, w->d->memory, w->d->cpu_share);
    for (int i = 0; i < w->n_rows; i++) {
        const zt_scale_row *r = &w->rows[i];
        char name[32];
        fprintf(out, "%s{\"name\":\"%s\",\"strategy\":\"%s\",\"shard\":%d,\"tp\":%d,\"pp\":%d,\"cp\":%d,\"dp\":%d,"
                "\"micro_batches\":%d,\"step_s\":%.6g,\"compute_s\":%.6g,"
                "\"comm_s\":%.6g,\"exposed_s\":%.6g,\"hidden_s\":%.6g,\"bubble_s\":%.6g,\"tp_s\":%.6g,\"p2p_s\":%.6g,"
                "\"tp_bytes\":%.6g,\"cp_s\":%.6g,\"cp_bytes\":%.6g,\"ep\":%d,\"ep_s\":%.6g,\"ep_bytes\":%.6g,"
                "\"edp\":%d,\"edp_reduce_bytes\":%.6g,"
                "\"tokens_per_s\":%.6g,\"mfu\":%.6g,"
                "\"memory\":%zu,\"fits\":%s,\"node_out_bytes\":%.6g}", i ? "," : "", row_name(r, name, sizeof name),
                zt_strategy_name(r->strategy), r->shard, r->tp, r->pp, r->cp, r->dp, r->micro_batches, r->step.step_s,
                r->step.compute_s, r->step.comm_s, r->step.exposed_s, r->step.hidden_s, r->bubble_s, r->tp_s, r->p2p_s,
                r->tp_bytes, r->cp_s, r->cp_bytes, r->ep, r->ep_s, r->ep_bytes, r->edp, r->edp_reduce_bytes, r->tokens_per_s, r->mfu, r->memory, r->fits ? "true" : "false", r->node_out_bytes);
    }
    fprintf(out, "]}\n");
}

static int add_row(shown *w, const zt_scale_request *rq, zt_strategy st, int S, zt_error *err) {
    if (w->n_rows == w->cap) {
        int cap = w->cap ? 2 * w->cap : 64;
        zt_scale_row *r = realloc(w->rows, (size_t)cap * sizeof *r);
        if (!r) return zt_error_set(err, ZT_ERR_NOMEM, "plan: out of memory");
        w->rows = r, w->cap = cap;
    }
    int rc = zt_scale_predict(rq, st, S, &w->rows[w->n_rows], err);
    if (!rc) w->n_rows++;
    return rc;
}

/* Appends "tp 8 (why)" to the points not searched (as much as fits). */
static void note_skip(shown *w, const char *what, int v, const char *why) {
    size_t len = strlen(w->skipped);
    if (len + 80 < sizeof w->skipped)
        snprintf(w->skipped + len, sizeof w->skipped - len, "%s%s %d (%.200s)", len ? "; " : "", what, v, why);
}

/* Every strategy and hybrid size at one (tp, pp): rows into w. A point that does not divide the
 * batch is skipped when searching (an error when both were given). */
static int plan_point(shown *w, const args *a, const zt_model *mt, const zt_scale_compute *ct, zt_scale_request rq,
                      int tp, int pp, zt_error *err) {
    int N = a->nodes * a->per_node, D = N / (tp * pp), R = D / a->cp; /* R: ranks with their own samples */
    if (D % a->cp) {
        if (w->search) return ZT_OK;
        return zt_error_set(err, ZT_ERR_USAGE, "plan: --cp %d does not divide the %d data-parallel ranks", a->cp, D);
    }
    if (a->ep > 1 && D % a->ep) { /* expert parallelism within the data-parallel ranks (comm/mesh.h) */
        if (w->search) return ZT_OK;
        return zt_error_set(err, ZT_ERR_USAGE, "plan: --ep %d does not divide the %d data-parallel ranks", a->ep, D);
    }
    int global = a->global ? a->global : N / a->cp * a->mb;
    if (a->micro_batches) rq.opt.grad_accum = a->micro_batches;
    else if (global % (R * a->mb)) {
        if (w->search) return ZT_OK;
        return zt_error_set(err, ZT_ERR_USAGE, "plan: --global-batch %d is not a multiple of %d data-parallel ranks x "
                            "--micro-batch %d", global, R, a->mb);
    } else rq.opt.grad_accum = global / (R * a->mb);
    rq.model = mt, rq.compute = ct, rq.tp = tp, rq.pp = pp;
    int rc = ZT_OK;
    static const zt_strategy flat[] = {ZT_STRATEGY_DDP, ZT_STRATEGY_ZERO1, ZT_STRATEGY_ZERO2, ZT_STRATEGY_ZERO3};
    for (size_t k = 0; k < 4 && !rc; k++) rc = add_row(w, &rq, flat[k], 0, err);
    if (a->n_hybrid) {
        for (int k = 0; k < a->n_hybrid && !rc; k++) {
            if (D % a->hybrid[k] || a->hybrid[k] >= D) {
                if (w->search) continue;
                return zt_error_set(err, ZT_ERR_USAGE, "plan: --hybrid %d must divide the %d data-parallel ranks and be "
                                    "smaller", a->hybrid[k], D);
            }
            rc = add_row(w, &rq, ZT_STRATEGY_HYBRID, a->hybrid[k], err);
        }
    } else {
        int S0 = a->per_node / tp > 1 ? a->per_node / tp : 2;
        for (int S = S0, n = 0; S < D && n < 16 && !rc; S *= 2, n++)
            if (D % S == 0) rc = add_row(w, &rq, ZT_STRATEGY_HYBRID, S, err);
    }
    return rc;
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
    shown w = {.a = &a, .m = m, .d = &d, .cl = &cl, .search = !a.tp || !a.pp};
    zt_engine_options o;
    zt_engine_options_default(&o);
    o.B = a.mb;
    o.T = a.seq ? a.seq : (m->max_seq_len < 4096 ? m->max_seq_len : 4096);
    w.o = &o;
    if (a.tp && a.pp && N % (a.tp * a.pp)) {
        rc = zt_error_set(&err, ZT_ERR_USAGE, "plan: --tp %d x --pp %d does not divide the %d devices", a.tp, a.pp, N);
        goto done;
    }
    if (a.tp && a.pp && !a.micro_batches && a.global && N % (a.tp * a.pp * a.cp) == 0 &&
        a.global % (N / (a.tp * a.pp * a.cp) * a.mb)) {
        rc = zt_error_set(&err, ZT_ERR_USAGE, "plan: --global-batch %d is not a multiple of %d data-parallel ranks x "
                          "--micro-batch %d", a.global, N / (a.tp * a.pp * a.cp), a.mb);
        goto done;
    }
    if (a.cp > 1 && o.T % (2 * a.cp)) {
        rc = zt_error_set(&err, ZT_ERR_USAGE, "plan: --cp %d: 2 x %d does not divide --seq %d (each sequence is cut "
                          "into 2 x cp chunks)", a.cp, a.cp, o.T);
        goto done;
    }
    if (a.global && a.global % a.mb) {
        rc = zt_error_set(&err, ZT_ERR_USAGE, "plan: --global-batch %d is not a multiple of --micro-batch %d", a.global, a.mb);
        goto done;
    }
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
    int L = zt_scale_blocks(m);
    if (a.pp && L % a.pp) {
        rc = zt_error_set(&err, ZT_ERR_USAGE, "plan: --pp %d does not divide %s's %d blocks", a.pp, a.model, L);
        goto done;
    }
    static const int TPS[] = {1, 2, 4, 8};
    int tps[4], n_tp = 0;
    if (a.tp) tps[n_tp++] = a.tp;
    else
        for (int k = 0; k < 4; k++)
            if (TPS[k] <= a.per_node && a.per_node % TPS[k] == 0 && N % TPS[k] == 0) tps[n_tp++] = TPS[k];
    zt_scale_request rq = {.device = &d, .cluster = cl, .opt = o, .plan = po,
                           .pp_schedule = (zt_scale_pp_schedule)a.pp_schedule};
    bool have_header = false;
    for (int k = 0; k < n_tp && !rc; k++) {
        int tp = tps[k];
        zt_model *mt = m;
        if (tp > 1) { /* a part of the model, as the engine's tp rank 0 holds it */
            zt_error why = {0};
            if ((rc = zt_estimator_model(a.model, ZT_ATTENTION_FLASH, &mt, &err))) break;
            if (zt_tp_apply(mt, tp, 0, &why)) {
                zt_model_free(mt);
                if (a.tp) {
                    rc = zt_error_set(&err, ZT_ERR_USAGE, "plan: --tp %d: %s", tp, why.msg);
                    break;
                }
                note_skip(&w, "tp", tp, why.msg);
                continue;
            }
        }
        zt_error why = {0};
        if (a.ep > 1 && zt_model_set_expert_parallel(mt, a.ep, &why)) { /* a dense model, or E % ep */
            if (mt != m) zt_model_free(mt);
            rc = zt_error_set(&err, ZT_ERR_USAGE, "plan: --ep %d: %s", a.ep, why.msg);
            break;
        }
        if (a.cp > 1 && zt_model_set_context_parallel(mt, a.cp, a.cp_mode, &why)) { /* ulysses: heads per part */
            if (mt != m) zt_model_free(mt);
            if (a.tp) {
                rc = zt_error_set(&err, ZT_ERR_USAGE, "plan: --cp %d: %s", a.cp, why.msg);
                break;
            }
            note_skip(&w, "tp", tp, why.msg);
            continue;
        }
        zt_scale_compute ct;
        if ((rc = zt_scale_compute_model(mt, &d, o.B, o.T, o.precision.mode != ZT_PRECISION_FP32,
                                         o.activation_checkpointing, &ct, &err)) == ZT_OK) {
            for (int pp = a.pp ? a.pp : 1; pp <= (a.pp ? a.pp : 16) && !rc; pp++) {
                if (L % pp || N % (tp * pp)) continue;
                rc = plan_point(&w, &a, mt, &ct, rq, tp, pp, &err);
            }
            if (!have_header) {
                w.c = ct, w.c_tp = tp, have_header = true;
            } else zt_scale_compute_free(&ct);
        }
        if (mt != m) zt_model_free(mt);
    }
    if (!rc && !w.n_rows)
        rc = zt_error_set(&err, ZT_ERR_USAGE, "plan: no tp x pp point divides the %d devices and the batch (%s)", N,
                          w.skipped[0] ? w.skipped : "--global-batch, --micro-batch");
    if (!rc) {
        if (a.json) print_json(stdout, &w);
        else print_text(stdout, &w);
    }
    if (have_header) zt_scale_compute_free(&w.c);
done:
    free(w.rows);
    zt_model_free(m);
    return rc ? zt_cli_fail(&err) : 0;
}
