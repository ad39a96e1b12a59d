/* residency.h - which parameters are resident while the units run: the one copy of the rules
 * the engine's parameter store (src/engine/param_store.c, param_offload.c, compute_copy.c) and the
 * memory plan (plan.c) both follow, so the plan's high-water is the engine's by construction.
 *
 * zero3 (FSDP's FULL_SHARD): before unit u runs, the parameters it reads that are not gathered
 * yet are gathered (their full tensors allocated, the all-gather run now or queued on the
 * communication thread, which then also prefetches unit `next`'s); under low-precision compute a
 * matrix gets its compute copy right after; a gathered parameter is released after its last
 * forward user (unless kept for backward) and after its first user in backward (its owner).
 * Parameter offload (ZeRO-Infinity): the pieces a gather reads live in files and are read into one
 * window per unit: the gather's own window, or one the read-ahead made for the next units of the
 * pass (at most `depth` units ahead, all windows within max_live elements); a window is released
 * once its gather has been waited for, and a new pass drops the windows an abandoned one left.
 * bf16-low: a running unit gets fp32 views of the parameters it does not read as bf16.
 *
 * The caller does the work through zt_residency_ops (real memory and collectives in the engine,
 * byte counts in the plan); this file decides what and when. */
#ifndef ZT_MEMORY_RESIDENCY_H
#define ZT_MEMORY_RESIDENCY_H

#include "zerotrain/zerotrain.h"
#include "shard/plan.h"

#include <stdbool.h>
#include <stddef.h>

typedef struct zt_residency_ops {
    /* parameter i's full tensor allocated for unit u (class gathered; nonzero: out of memory) */
    int (*alloc_gathered)(void *ctx, int u, int i, zt_error *err);
    /* params[0..n) of unit u gathered into their tensors: now, or queued (async) */
    int (*gather)(void *ctx, int u, const int *params, int n, bool async, zt_error *err);
    /* unit u's parameters' queued gathers waited for */
    int (*wait)(void *ctx, int u, zt_error *err);
    /* parameter i's compute copy made from its gathered tensor for unit u (class gathered) */
    int (*make_copy)(void *ctx, int u, int i, zt_error *err);
    /* parameter i's compute copy, then its gathered tensor, freed */
    void (*release)(void *ctx, int i, bool copy, bool gathered);
    /* parameter offload: unit u's window (`floats` elements, class params) for the pieces of
     * params[0..n), their reads queued; and its release (reads still queued are waited for) */
    int (*window_make)(void *ctx, int u, const int *params, int n, size_t floats, zt_error *err);
    void (*window_release)(void *ctx, int u);
} zt_residency_ops;

typedef struct zt_residency {
    const zt_model *m;
    const zt_plan *pl;
    const zt_residency_ops *ops;
    void *ctx;
    bool gathers;      /* zero3: parameters are gathered per unit */
    bool async;        /* gathers queued on the communication thread (and the next unit prefetched) */
    bool prefetch;     /* ... unless no_prefetch */
    bool copies;       /* a compute copy per gathered matrix (low-precision compute, fp32 master) */
    bool keep_after_forward; /* training keeps every gathered parameter until backward */
    bool windows;      /* parameter offload */
    int depth;         /* read-ahead: units ahead (param_prefetch; 0 means 1, negative none) */
    size_t max_live;   /* read-ahead: elements of all windows together (0: no bound) */
    bool *gathered, *copy, *pending; /* (n_params) gathered, copy made, piece in a window */
    size_t *window;    /* (n_units) elements of unit u's window, 0: none */
    int *window_params;/* (n_units x ZT_UNIT_MAX_PARAMS) the parameters each window holds */
    int *window_n;     /* (n_units) */
    size_t window_floats; /* all windows */
    int ra_dir, ra_last, ra_next; /* the read-ahead's pass: direction (0 none), last unit, next to read */
} zt_residency;

typedef struct zt_residency_options {
    bool gathers, async, prefetch, copies, keep_after_forward, windows;
    int param_prefetch;   /* opt.offload.param_prefetch */
    size_t max_live;      /* opt.offload.param_max_live */
} zt_residency_options;

/* ZT_ERR_NOMEM when the tables cannot be allocated. */
int zt_residency_init(zt_residency *r, const zt_model *m, const zt_plan *pl, const zt_residency_options *o,
                      const zt_residency_ops *ops, void *ctx, zt_error *err);
void zt_residency_free(zt_residency *r);

/* Before unit u runs (next: the unit after it in this pass, -1 at the end): its parameters
 * gathered (waited for when queued), their copies made, the read-ahead and the prefetch queued. */
int zt_residency_acquire(zt_residency *r, int u, int next, zt_error *err);
/* After unit u's forward (training: whether backward follows) / backward: what no later unit of
 * the pass reads is released. */
void zt_residency_after_forward(zt_residency *r, int u, bool training);
void zt_residency_after_backward(zt_residency *r, int u);
/* Parameter i released now (its copy, its tensor), whatever the pass. */
void zt_residency_release(zt_residency *r, int i);
/* Every window released (an abandoned step, the end). */
void zt_residency_drop_windows(zt_residency *r);

/* bf16-low (bf16: parameters stored as bf16): whether unit u's k-th parameter reaches it as an
 * fp32 view, i.e. it is not a matrix the unit reads through params_lp under lp_kind. */
bool zt_residency_needs_view(const zt_model *m, bool bf16, int lp_kind, int u, int k);

#endif
