/* tool_common.h - what the multi-rank test tools (tool_dist_check, tool_memory_check) share: the
 * error line, the start (MPI, STRATEGY GA STEPS, the engine options' defaults) and the engine
 * options every tool accepts:
 *   --hybrid S  --inner-zero2  --keep  --reduce-every  --no-prefetch  --bucket-mb X
 *   --recompute none|full|selective  --precision fp32|bf16|bf16-low|fp16  --reduce fp32|bf16|fp16
 *   --stochastic-rounding  --scale-power P
 * The precision options are collected first and applied once (tool_precision_apply), so their
 * order on the command line does not matter. Header-only: each tool is one file. */
#ifndef ZT_TOOL_COMMON_H
#define ZT_TOOL_COMMON_H

#include "comm/comm.h"
#include "comm/launcher.h"
#include "zerotrain/zerotrain.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int tool_fail(zt_comm *w, const char *what, const zt_error *err) {
    fprintf(stderr, "rank %d: %s: %s\n", w ? zt_comm_rank(w) : 0, what, err ? err->msg : "");
    return 1;
}

/* The precision the options ask for; scale_power < 0: the mode's default. */
typedef struct tool_precision {
    zt_precision_mode mode;
    zt_dtype reduce;
    bool stochastic_rounding;
    int scale_power;
} tool_precision;

/* MPI, then argv[1..3] = STRATEGY GA STEPS into o (defaults, comm, grad_accum, hybrid over the
 * world), *GA and *steps, and pr's defaults. Returns 0, or the exit code after a message. */
static int tool_start(int *argc, char ***argv, const char *usage, zt_comm **world, zt_engine_options *o,
                      tool_precision *pr, int *GA, int *steps) {
    if (*argc < 4) {
        fprintf(stderr, "usage: %s STRATEGY GA STEPS %s\n", (*argv)[0], usage);
        return 2;
    }
    zt_error err = {0};
    if (zt_comm_init(argc, argv, world, &err)) return tool_fail(NULL, "init", &err);
    int N = zt_comm_size(*world);
    zt_engine_options_default(o);
    if (zt_strategy_parse((*argv)[1], &o->strategy, &err)) return tool_fail(*world, "strategy", &err);
    *GA = atoi((*argv)[2]);
    *steps = atoi((*argv)[3]);
    o->seed = 7;
    o->comm = N > 1 ? *world : NULL;
    o->grad_accum = *GA;
    o->hybrid_shard_size = N;
    *pr = (tool_precision){.mode = ZT_PRECISION_FP32, .reduce = ZT_DTYPE_FP32, .scale_power = -1};
    return 0;
}

/* argv[*i] (and its value, *i advanced past it) when it is one of the common options: 1; not one
 * of them: 0; a bad value: -1 after a message. */
static int tool_engine_option(int argc, char **argv, int *i, zt_engine_options *o, tool_precision *pr) {
    const char *a = argv[*i];
    bool has_value = *i + 1 < argc;
    zt_error err = {0};
    if (!strcmp(a, "--keep")) o->keep_params_after_forward = true;
    else if (!strcmp(a, "--inner-zero2")) o->hybrid_inner = ZT_STRATEGY_ZERO2;
    else if (!strcmp(a, "--reduce-every")) o->reduce_every_micro_batch = true;
    else if (!strcmp(a, "--no-prefetch")) o->no_prefetch = true;
    else if (!strcmp(a, "--stochastic-rounding")) pr->stochastic_rounding = true;
    else if (!strcmp(a, "--ns-bf16")) o->optim.muon_ns_bf16 = 1; /* Muon's Newton-Schulz in bf16 */
    else if (!has_value) return 0;
    else if (!strcmp(a, "--optimizer")) { /* adamw | sgd | muon | lamb (docs/optimizer.md) */
        const char *d = argv[++*i];
        int k = !strcmp(d, "adamw") ? ZT_OPT_ADAMW : !strcmp(d, "sgd") ? ZT_OPT_SGD : !strcmp(d, "muon") ? ZT_OPT_MUON
              : !strcmp(d, "lamb") ? ZT_OPT_LAMB : -1;
        if (k < 0) {
            fprintf(stderr, "--optimizer %s: adamw, sgd, muon or lamb\n", d);
            return -1;
        }
        o->optim.kind = (zt_optimizer_kind)k;
    }
    else if (!strcmp(a, "--hybrid")) { /* 0: ranks per node from the launcher, as the trainer does */
        o->hybrid_shard_size = atoi(argv[++*i]);
        if (o->hybrid_shard_size == 0) o->hybrid_shard_size = zt_launcher_default_shard_size(o->comm ? zt_comm_size(o->comm) : 1, NULL);
    }
    else if (!strcmp(a, "--bucket-mb")) o->bucket_bytes = (size_t)(atof(argv[++*i]) * 1048576);
    else if (!strcmp(a, "--scale-power")) pr->scale_power = atoi(argv[++*i]);
    else if (!strcmp(a, "--recompute")) {
        if (zt_recompute_parse(argv[++*i], &o->activation_checkpointing, &err)) goto bad;
    } else if (!strcmp(a, "--precision")) {
        if (zt_precision_mode_parse(argv[++*i], &pr->mode, &err)) goto bad;
    } else if (!strcmp(a, "--reduce")) {
        const char *d = argv[++*i];
        if (strcmp(d, "fp32") && strcmp(d, "bf16") && strcmp(d, "fp16")) {
            fprintf(stderr, "--reduce %s: fp32, bf16 or fp16\n", d);
            return -1;
        }
        pr->reduce = !strcmp(d, "bf16") ? ZT_DTYPE_BF16 : !strcmp(d, "fp16") ? ZT_DTYPE_FP16 : ZT_DTYPE_FP32;
    } else return 0;
    return 1;
bad:
    fprintf(stderr, "%s: %s\n", a, err.msg);
    return -1;
}

/* The collected precision into o (the mode's policy, then the options that refine it). */
static void tool_precision_apply(zt_engine_options *o, const tool_precision *pr) {
    zt_precision_default(&o->precision, pr->mode);
    o->precision.reduce = pr->reduce;
    o->precision.stochastic_rounding = pr->stochastic_rounding;
    if (pr->scale_power >= 0) o->precision.initial_scale_power = pr->scale_power;
}

#endif
