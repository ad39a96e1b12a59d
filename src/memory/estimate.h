/* estimate.h - `zerotrain estimate-memory`'s grid: the memory plan (plan.h) of one model for every
 * strategy side by side (ddp, zero1, zero2, zero3, hybrid), each for the rank that needs the
 * most, with variants for activation checkpointing and NVMe offload of the optimizer state.
 * Formatting is the command's (src/cli/cmd_estimate.c). */
#ifndef ZT_MEMORY_ESTIMATE_H
#define ZT_MEMORY_ESTIMATE_H

#include "memory/plan.h"

#define ZT_EST_STRATEGIES 5 /* ddp, zero1, zero2, zero3, hybrid: zt_strategy order */

/* The variants, each the plan's options with one change from the request's. */
typedef enum zt_est_variant {
    ZT_EST_AS_GIVEN = 0,      /* the request's checkpointing and offload */
    ZT_EST_CKPT_FULL = 1,     /* activation checkpointing full */
    ZT_EST_CKPT_SELECTIVE = 2,/* activation checkpointing selective */
    ZT_EST_NVME = 3,          /* optimizer state on NVMe */
    ZT_EST_FULL_NVME = 4,     /* both: the smallest footprint the engine plans */
    ZT_EST_VARIANTS = 5
} zt_est_variant;

const char *zt_est_variant_name(zt_est_variant v); /* "as_given", "ckpt_full", ... (JSON keys) */

typedef struct zt_estimate_request {
    zt_model *model;              /* a mixture's experts stored or whole per column, as the engine
                                     would run them (zt_memory_experts_for) */
    zt_engine_options opt;        /* B, T, grad_accum, precision, optimizer, buckets, activation
                                     checkpointing, ...; the strategy is set per column;
                                     hybrid_shard_size and hybrid_inner are the hybrid column's */
    zt_memory_plan_options plan;  /* the request's offload */
    int world;
} zt_estimate_request;

typedef struct zt_estimate_column {
    zt_strategy strategy;
    zt_memory_plan plan;          /* ZT_EST_AS_GIVEN, of the rank with the largest peak_total */
    size_t peak[ZT_EST_VARIANTS]; /* the largest peak_total over the ranks, per variant */
    size_t offload_file_bytes;    /* ZT_EST_NVME: bytes on disk of that rank */
    size_t min_peak;              /* ZT_EST_AS_GIVEN: the smallest rank's peak_total */
    int min_rank;
} zt_estimate_column;

typedef struct zt_estimate {
    zt_estimate_column col[ZT_EST_STRATEGIES];
    int ranks_evaluated;          /* every rank up to 64; beyond, the ranks holding the most */
} zt_estimate;

/* Plans every column and variant. ZT_ERR_USAGE from the plan (shape, hybrid size) names the
 * strategy. */
int zt_estimate_run(const zt_estimate_request *rq, zt_estimate *out, zt_error *err);

/* The plan of the rank needing the most under o (its strategy, hybrid size, ...): the ranks
 * zt_estimate_run plans for that strategy's column, so its peak_total equals the column's
 * high-water (`zerotrain plan` shows it beside the predicted step). ZT_ERR_USAGE from the plan
 * names the strategy. */
int zt_estimate_peak(const zt_model *m, const zt_engine_options *o, const zt_memory_plan_options *po, int world,
                     zt_memory_plan *out, zt_error *err);

/* The ranks whose plans the grid takes the maximum over: all of them when world <= 64, else rank
 * 0, the last rank and the 8 whose shard (of a group of `group` ranks) holds the most elements.
 * Writes at most `cap` ranks into out and returns the count. */
int zt_estimate_ranks(const zt_model *m, int world, int group, int *out, int cap);

#endif
