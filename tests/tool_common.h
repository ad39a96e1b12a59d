/* tool_common.h - what the multi-rank test tools (tool_dist_check, tool_memory_check) share: the
 * error line, the start (MPI, STRATEGY GA STEPS, the engine options' defaults) and the engine
 * options every tool accepts:
 *   --hybrid S  --inner-zero2  --keep  --reduce-every  --no-prefetch  --bucket-mb X
 *   --recompute none|full|selective  --precision fp32|bf16|bf16-low|fp16  --reduce fp32|bf16|fp16
 *   --stochastic-rounding  --scale-power P  --clip X (the gradient-norm clip, optimizer.grad_clip:
 *   small enough that every step clips, the norm's bits reach the parameters)
 *   --optimizer adamw|sgd|muon|lamb  --muon-params REGEX (optimizer.muon_params)
 * The precision options are collected first and applied once (tool_precision_apply), so their
 * order on the command line does not matter. Header-only: each tool is one file.
 * tool_main: one run (`TOOL STRATEGY GA STEPS ...`), or with `--serve DIR` many runs in one MPI
 * job (tests/tool_serve.bash): rank 0 waits for DIR/req (the arguments, each ended by a NUL), every rank
 * runs them with its stdout and stderr in DIR/out.RANK, rank 0 writes DIR/resp (the ranks' output
 * in rank order, then "@@status S": the largest exit code), and so on until "@@quit". Each run
 * makes its own world communicator, model and engine, as a process of its own would; only MPI's
 * start-up (most of a short run's CPU) is shared. A run that fails where the ranks may be inside
 * different collectives (tool_fail) aborts the job, as such a run's process exit did; the
 * script runs that invocation alone then. */
#ifndef ZT_TOOL_COMMON_H
#define ZT_TOOL_COMMON_H

#include "comm/comm.h"
#include "comm/launcher.h"
#include "zerotrain/zerotrain.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool tool_failed;   /* tool_fail was called: the ranks may be in different places */
static bool tool_finished; /* the run reached its end on this rank (its world freed) */

static int tool_fail(zt_comm *w, const char *what, const zt_error *err) {
    tool_failed = true;
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
    else if (!strcmp(a, "--muon-params")) /* optimizer.muon_params: the 2-D weights Muon updates */
        snprintf(o->optim.muon_params, sizeof o->optim.muon_params, "%s", argv[++*i]);
    else if (!strcmp(a, "--hybrid")) { /* 0: ranks per node from the launcher, as the trainer does */
        o->hybrid_shard_size = atoi(argv[++*i]);
        if (o->hybrid_shard_size == 0) o->hybrid_shard_size = zt_launcher_default_shard_size(o->comm ? zt_comm_size(o->comm) : 1, NULL);
    }
    else if (!strcmp(a, "--bucket-mb")) o->bucket_bytes = (size_t)(atof(argv[++*i]) * 1048576);
    else if (!strcmp(a, "--clip")) o->optim.grad_clip = (float)atof(argv[++*i]);
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

typedef int (*tool_run_fn)(int argc, char **argv);

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <mpi.h>
#include <time.h>
#include <unistd.h>

static void tool_nap(void) {
    struct timespec ts = {0, 2000000}; /* 2 ms: an idle server takes no core */
    nanosleep(&ts, NULL);
}

static int tool_serve(const char *prog, const char *dir, tool_run_fn run) {
    zt_error err = {0};
    zt_comm *w;
    int argc0 = 1;
    char *argv0[] = {(char *)prog, NULL}, **av = argv0;
    if (zt_comm_init(&argc0, &av, &w, &err)) return tool_fail(NULL, "init", &err);
    int rank = zt_comm_rank(w), W = zt_comm_size(w);
    zt_comm_free(w);
    enum { MAXREQ = 1 << 16, MAXARGS = 256 };
    static char req[MAXREQ], path[4096], tmp[4096];
    int out0 = dup(1), err0 = dup(2);
    for (;;) {
        int len = 0;
        if (rank == 0) { /* the next request: DIR/req, written whole (renamed into place) */
            snprintf(path, sizeof path, "%s/owner", dir);
            FILE *o = fopen(path, "r");
            long owner = 0; /* the script: when it is gone (no serve_stop), so is the server */
            if (!o || fscanf(o, "%ld", &owner) != 1) owner = 0;
            if (o) fclose(o);
            snprintf(path, sizeof path, "%s/req", dir);
            for (int polls = 1;; polls++) {
                if (owner > 0 && polls % 250 == 0 && kill((pid_t)owner, 0) && errno == ESRCH) break; /* len 0: quit */
                int fd = open(path, O_RDONLY);
                if (fd >= 0) {
                    ssize_t n = read(fd, req, MAXREQ - 1);
                    close(fd);
                    unlink(path);
                    len = n > 0 ? (int)n : 0;
                    break;
                }
                tool_nap();
            }
        }
        MPI_Request r; /* the other ranks wait without spinning */
        MPI_Ibcast(&len, 1, MPI_INT, 0, MPI_COMM_WORLD, &r);
        for (int done = 0; MPI_Test(&r, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && !done;) tool_nap();
        MPI_Bcast(req, len, MPI_CHAR, 0, MPI_COMM_WORLD);
        req[len] = '\0';
        if (len == 0 || !strncmp(req, "@@quit", 6)) break;
        char *args[MAXARGS];
        int n = 0;
        args[n++] = (char *)prog;
        for (int at = 0; at < len && n < MAXARGS - 1; at += (int)strlen(req + at) + 1) args[n++] = req + at;
        args[n] = NULL;
        fflush(stdout);
        fflush(stderr);
        snprintf(path, sizeof path, "%s/out.%d", dir, rank);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0) MPI_Abort(MPI_COMM_WORLD, 1);
        dup2(fd, 1);
        dup2(fd, 2);
        close(fd);
        tool_failed = tool_finished = false;
        int rc = run(n, args);
        fflush(stdout);
        fflush(stderr);
        if (tool_failed) MPI_Abort(MPI_COMM_WORLD, rc ? rc : 1);
        int worst = 0;
        MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD); /* every rank's output is written */
        dup2(out0, 1);
        dup2(err0, 2);
        if (rank == 0) {
            snprintf(tmp, sizeof tmp, "%s/resp.tmp", dir);
            FILE *f = fopen(tmp, "w");
            char last = '\n';
            for (int q = 0; f && q < W; q++) {
                snprintf(path, sizeof path, "%s/out.%d", dir, q);
                FILE *in = fopen(path, "r");
                char buf[65536];
                size_t got;
                while (in && (got = fread(buf, 1, sizeof buf, in)) > 0) {
                    fwrite(buf, 1, got, f);
                    last = buf[got - 1];
                }
                if (in) fclose(in);
            }
            if (!f) MPI_Abort(MPI_COMM_WORLD, 1);
            fprintf(f, "%s@@status %d\n", last == '\n' ? "" : "\n", worst);
            fclose(f);
            snprintf(path, sizeof path, "%s/resp", dir);
            rename(tmp, path);
        }
    }
    zt_comm_finalize(&err);
    return 0;
}

/* main of a tool: its run once (MPI finalized after a run that ended), or --serve DIR */
static int tool_main(int argc, char **argv, tool_run_fn run) {
    if (argc == 3 && !strcmp(argv[1], "--serve")) return tool_serve(argv[0], argv[2], run);
    int rc = run(argc, argv);
    zt_error err = {0};
    if (tool_finished) zt_comm_finalize(&err);
    return rc;
}

#endif
