/* fit.h - "what is the largest model that fits this machine": for one family shape (a preset's
 * width, heads, vocabulary), the most layers whose memory plan fits a RAM budget per rank and
 * whose NVMe files fit a disk budget per rank, for a given strategy, offload and checkpointing.
 * The plans are the engine's own (plan.h), so the answer is what `zerotrain train` would allocate;
 * the budgets are the caller's (cmd_estimate.c reads MemAvailable and the disk's free space). */
#ifndef ZT_MEMORY_FIT_H
#define ZT_MEMORY_FIT_H

#include "memory/plan.h"

typedef struct zt_fit_result {
    int n_layer;          /* the most layers that fit; 0: not even one */
    int64_t params;       /* that model's parameters */
    size_t peak;          /* its high-water per rank (the largest over the ranks checked) */
    size_t file_bytes;    /* its NVMe files per rank */
    bool capped;          /* n_layer reached max_layers: more may fit */
} zt_fit_result;

/* Binary search over n_layer in [1, max_layers] of base's shape (monotone: more layers need more
 * of every class). o->strategy, po's offload and o->activation_checkpointing are the caller's.
 * The plan's high-water + overhead_per_rank must be <= ram_per_rank, file bytes <= disk_per_rank.
 * ZT_ERR_USAGE from a plan (a shape the strategy refuses) is returned as is. */
int zt_fit_layers(const zt_model_spec *base, const zt_engine_options *o, const zt_memory_plan_options *po, int world,
                  size_t ram_per_rank, size_t overhead_per_rank, size_t disk_per_rank, int max_layers,
                  zt_fit_result *out, zt_error *err);

#endif
