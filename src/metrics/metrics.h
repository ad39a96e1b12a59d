/* metrics.h - what a training step reports, and where it goes: a progress display (a bar on a
 * TTY, plain lines otherwise) and a JSONL log with one object per step. */
#ifndef ZT_METRICS_H
#define ZT_METRICS_H

#include "zerotrain/zerotrain.h"

#include <stdbool.h>
#include <stdio.h>

typedef struct zt_step_metrics {
    int64_t step;          /* 1-based */
    int64_t total_steps;
    double loss;           /* mean train loss of the global batch */
    double val_loss;       /* NaN when not evaluated this step */
    double lr, grad_norm, clip_coef;
    int64_t tokens;        /* tokens in this step's global batch */
    double step_s;         /* wall time of the step */
    double data_s, fwdbwd_s, optim_s; /* data loading; forward+backward wall; optimizer (below) */
    double tok_per_s;
    double mfu;            /* model FLOPs / (step_s * peak), NaN if the peak is unknown (mfu.h) */
    double hfu;            /* hardware FLOPs (recomputation counted) / (step_s * peak); written
                              as null when 0 or NaN (not computed) */
    double elapsed_s;      /* since training started */
    zt_comm_bytes bytes;   /* this rank's collective traffic in the step, by kind */

    /* The time breakdown (docs/observability.md), written when has_times. Disjoint parts of
     * step_s, so data_s + forward_s + backward_s + comm_s + optim_s + io_s + other_s = step_s:
     * forward_s/backward_s are the units' compute (zt_engine_unit_times), comm_s the training
     * thread's time in the engine's collectives (bucket packing, the collective, unpacking: the
     * exposed communication), optim_s the optimizer phase without its collectives (norm, clip,
     * update), io_s offload/NVMe waits inside the step, other_s the rest (allocating and zeroing
     * gradient buffers, the micro-batch tree, bookkeeping). comm_wait_s is the part of comm_s
     * spent blocked in waits (not in the sum). eval_s and ckpt_s are spent after the step,
     * outside step_s. */
    bool has_times;
    double forward_s, backward_s, comm_s, comm_wait_s, io_s, other_s, eval_s, ckpt_s;

    /* Memory high-water per buffer class (engine's zt_memory_report, bytes) and the process's
     * peak resident set (zt_rss_peak_bytes), written when has_memory. */
    bool has_memory;
    zt_memory_report mem;
    uint64_t rss_peak;

    /* fp16 dynamic loss scaling, written when has_loss_scale (null otherwise). */
    bool has_loss_scale;
    double loss_scale;
    int64_t skipped_steps; /* since training started */

    /* A mixture of experts' routing this step over the data-parallel ranks (zt_engine_moe_stats),
     * written when has_moe: tokens per expert summed over the MoE layers, slots dropped over the
     * capacity, and the balance (the busiest layer's busiest expert over its mean load, 1 = even). */
    bool has_moe;
    zt_moe_stats moe;
} zt_step_metrics;

/* Peak resident set size of this process in bytes (getrusage), 0 when unknown. */
uint64_t zt_rss_peak_bytes(void);
/* The engine's measured high-water of all its buffers together (m->peak_total). */
uint64_t zt_memory_peak_total(const zt_memory_report *m);

typedef struct zt_progress {
    FILE *out;
    bool tty;
    int width;
} zt_progress;

/* tty: draw a bar that rewrites one line; else print plain lines. */
void zt_progress_init(zt_progress *p, FILE *out);
void zt_progress_step(zt_progress *p, const zt_step_metrics *m);
/* A line that scrolls above the bar (e.g. validation results). */
void zt_progress_message(zt_progress *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void zt_progress_finish(zt_progress *p);

typedef struct zt_jsonl {
    FILE *fp;
    char path[1024];
} zt_jsonl;

int zt_jsonl_open(zt_jsonl *j, const char *path, zt_error *err);
/* One line: {"step":..,"loss":..,...}; non-finite numbers are written as null. */
int zt_jsonl_write_step(zt_jsonl *j, const zt_step_metrics *m, zt_error *err);
/* A free-form event line: {"event":"<name>", <fields_json>} where fields_json is "k":v,... */
int zt_jsonl_write_event(zt_jsonl *j, const char *name, const char *fields_json, zt_error *err);
void zt_jsonl_close(zt_jsonl *j);

/* Memory (memory.c). One rank's plan and measurement at the end of training. */
typedef struct zt_memory_rank {
    size_t planned[ZT_MEM_CLASSES], measured[ZT_MEM_CLASSES]; /* high-water per class */
    size_t planned_total, measured_total;                     /* high-water of the sum */
    uint64_t rss_peak;                                        /* the process's peak resident set */
} zt_memory_rank;
/* "123 B", "12.3 KiB", "45.6 MiB", "7.89 GiB", "1.23 TiB". */
void zt_format_bytes(char *buf, size_t cap, double bytes);
/* "params 12.0 MiB | grads 24.0 MiB | ... | high-water 80.0 MiB": the plan's classes that hold bytes. */
void zt_memory_plan_line(const zt_memory_plan *p, char *buf, size_t cap);
/* The end-of-training table: per rank, each class's planned / measured high-water, the totals and
 * the RSS peak; then whether everything was exact, or the largest deviation. */
void zt_memory_print_ranks(FILE *out, const zt_memory_rank *ranks, int n);
/* {"event":"memory_plan","rank":r,"world":N,"shards":S,"overlap":b,"peak":{class:bytes},
 *  "rest":{...},"peak_total":..,"offload_file_bytes":..} */
int zt_jsonl_write_memory_plan(zt_jsonl *j, const zt_memory_plan *p, zt_error *err);
/* {"event":"memory","ranks":[{"rank":r,"planned":{..},"measured":{..},"planned_total":..,
 *  "measured_total":..,"rss_peak":..}, ...]} */
int zt_jsonl_write_memory_ranks(zt_jsonl *j, const zt_memory_rank *ranks, int n, zt_error *err);

/* "1h02m", "3m05s", "12s". */
void zt_format_duration(char *buf, size_t cap, double seconds);

#endif
