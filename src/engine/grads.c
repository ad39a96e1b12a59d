/* grads.c - gradient storage during backward and the fixed summation tree over micro-batches.
 *
 * Each micro-batch's gradient is computed into zeroed storage and then pushed into a binary
 * counter of partial sums (src/memory/sum_tree.c): pushing item k merges it with the equal-sized partial sums
 * before it, so after 2^j items the tree holds ((g0+g1)+(g2+g3))... exactly the pairwise tree over
 * the micro-batch index. Ranks hold contiguous runs of the global micro-batch index, and the
 * collectives sum ranks in the same pairwise tree, so 1 rank x 4 micro-batches, 2 x 2 and 4 x 1
 * give the same bits (for power-of-two counts; other counts are deterministic too, but then the
 * local and global trees need not nest).
 *
 * Storage per mode:
 *   deferred (ddp, zero1, zero2/zero3 with accumulation and no reduce_every_micro_batch): one
 *     full-layout buffer per micro-batch, folded and reduced at the step.
 *   reduce_early (ddp/zero1 with one micro-batch per step and the communication thread): the
 *     full-layout buffer of deferred mode, each unit's own parameters reduced by the thread as soon
 *     as the unit's backward is done (all-reduced in place, or reduce-scattered into the pieces).
 *   reduce_now (zero2/zero3): each parameter's full gradient lives from its first use in backward
 *     until its owning unit's backward is done, then is reduce-scattered into the micro-batch's
 *     pieces and freed; the pieces go through the tree. With one micro-batch per step (no
 *     accumulation) the tree would hold that one item: the reduce-scatters write the reduced
 *     gradient's pieces (grad_pieces) directly, micro_direct. With the communication thread the
 *     reduction runs while the next unit computes, and the gradients are freed when the unit
 *     after that is queued: two units' gradients are in flight, whatever the thread's timing
 *     (the memory plan counts exactly that).
 * With gradient offload (grad_offload.c: parameter and optimizer offload, one micro-batch) the
 * micro_direct reductions write each unit's pieces into a window that goes to the files instead
 * of into grad_pieces (which does not exist then).
 * All of it over the trainable parameters only (the plan's gradient layouts, gfull/gshard): a
 * frozen parameter gets no gradient storage (its unit sees NULL) and is never reduced.
 * Early norm (norm_early): where nothing changes the gradient after backward (one process, ddp,
 * one micro-batch, no pipeline or tensor parallelism, fp32 gradients and reduction, no gradient
 * offload), a parameter's gradient is final when the unit that owns it (its first user, the last
 * one backward reaches) is done; its norm partials are taken then, from a gradient the backward
 * just wrote, instead of in a pass over the whole gradient at the step (step.c's grad_norm). The
 * same function on the same values in the same chunks: the same bits. A second micro-batch, or a
 * gradient handed out for writing (zt_engine_grad), turns it off for the step.
 *
 * Gradients assigned, not zeroed: a micro-batch's gradient storage is zeroed before backward
 * (begin_micro; zero2/zero3: zt_grads_for), except the gradients whose first writer in backward
 * (the highest unit that uses the parameter) declares it assigns them (zt_unit_ops.assigns_grad:
 * the Linear weights, whose weight product then runs with beta 0 instead of adding into zeros:
 * the same values, bit for bit, and neither the pass that zeroed them nor the product's read of
 * them). Before a unit's backward such gradients become bits of zt_unit_args.grads_unset;
 * whatever the unit leaves unset, and whatever no unit reached by end_micro, is zeroed then, so
 * no path ever sees a gradient that holds what the buffer held before. */
#include "engine/engine_internal.h"
#include "core/env.h"
#include "kernels/kernels.h"
#include "kernels/vecmath.h"
#include "memory/sum_tree.h"
#include "optim/optim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void add_into(float *restrict left, const float *restrict right, size_t n) {
#pragma omp parallel for simd schedule(static) if (n > 65536)
    for (size_t i = 0; i < n; i++) left[i] += right[i];
}

/* The tree's merge (src/memory/sum_tree.c, the order the memory plan follows too): left += right,
 * right's buffer released. */
typedef struct merge_ctx {
    zt_engine *e;
    size_t n;
} merge_ctx;

static void merge_grads(void *ctx, void *left, void *right) {
    merge_ctx *c = ctx;
    float *r = right;
    add_into(left, r, c->n);
    zt_engine_release(c->e, &r, c->n, &c->e->mem.grads);
}

static void tree_push(zt_engine *e, zt_sum_tree *t, float *buf, size_t n) {
    merge_ctx c = {e, n};
    zt_sum_tree_push(t, buf, merge_grads, &c);
}

/* Folds the partial sums right to left into one buffer (NULL when empty). */
static float *tree_fold(zt_engine *e, zt_sum_tree *t, size_t n) {
    merge_ctx c = {e, n};
    return zt_sum_tree_fold(t, merge_grads, &c);
}

static void tree_clear(zt_engine *e, zt_sum_tree *t, size_t n) {
    for (int i = 0; i < t->depth; i++) {
        float *b = t->buf[i];
        zt_engine_release(e, &b, n, &e->mem.grads);
        t->buf[i] = NULL;
    }
    t->depth = 0;
}

static void slots_done(zt_engine *e, int u);

void zt_grads_reset(zt_engine *e) {
    const zt_plan *pl = &e->plan;
    zt_error ignore;
    zt_overlap_drain(e, &ignore); /* the thread may still hold gradients of an abandoned step */
    tree_clear(e, &e->full_tree, pl->gbuf_floats);
    tree_clear(e, &e->piece_tree, pl->gshard_floats);
    zt_engine_release(e, &e->micro_grads, pl->gbuf_floats, &e->mem.grads);
    if (e->micro_direct) e->micro_pieces = NULL; /* it was grad_pieces */
    else zt_engine_release(e, &e->micro_pieces, pl->gshard_floats, &e->mem.grads);
    e->micro_direct = false;
    if (e->grad_pieces_transient) zt_engine_release(e, &e->grad_pieces, pl->gshard_floats, &e->mem.grads);
    zt_grad_offload_drop(e);
    if (e->pgrad)
        for (int i = 0; i < e->model->n_params; i++)
            zt_engine_release(e, &e->pgrad[i], (size_t)e->plan.p[i].gnumel, &e->mem.grads);
    if (e->pslots)
        for (int u = 0; u < e->model->n_units; u++) slots_done(e, u);
    if (e->grad_unset) memset(e->grad_unset, 0, (size_t)e->model->n_params * sizeof *e->grad_unset);
    e->n_inflight = 0;
    e->micro_in_step = 0;
    e->grads_final = false;
    e->norm_early = false;
}

/* bf16-low: the transient reduced pieces (zt_engine.grad_pieces_transient) before a reduction
 * writes them. Returns 0, or the floats it could not allocate. */
static size_t reduced_pieces(zt_engine *e) {
    size_t n = e->plan.gshard_floats;
    if (!e->grad_pieces_transient || e->grad_pieces) return 0;
    return (e->grad_pieces = zt_engine_alloc(e, n, &e->mem.grads, "the reduced gradient pieces")) ? 0 : n;
}

/* x[0, n) = 0, split over the threads when large (the full-layout gradient: one thread's memset
 * of it left the other core idle for tens of milliseconds a step) */
static void zero_floats(float *x, size_t n) {
#pragma omp parallel if (n >= ((size_t)1 << 20))
    {
        size_t i0, i1;
        zt_split_range(n, 16, zt_thread_num(), zt_num_threads(), &i0, &i1);
        memset(x + i0, 0, (i1 - i0) * sizeof(float));
    }
}

/* ---- gradients assigned, not zeroed (see the top) ---- */

void zt_grads_assign_setup(zt_engine *e) {
    const zt_model *m = e->model;
    const char *env = zt_env(ZT_ENV_GRAD_ASSIGN);
    e->grads_assign = !(env && !strcmp(env, "0"));
    for (int u = 0; u < m->n_units && e->grads_assign; u++) {
        const zt_unit *un = &m->units[u];
        for (int k = 0; k < un->n_params; k++) {
            int i = un->params[k]; /* its first writer in backward: the last unit that lists it */
            if (e->plan.p[i].last_fwd_unit == u)
                e->grad_assigned[i] = m->params[i].trainable && un->ops->assigns_grad && un->ops->assigns_grad(un, k);
        }
    }
}

/* the micro-batch's full-layout gradient zeroed but for the assigned parameters' tensors, which
 * become unset (the gaps between tensors and the other tensors: zeroed; the offsets grow with the
 * parameter index, shard/plan.c) */
static void zero_but_assigned(zt_engine *e, float *buf, size_t n) {
    const zt_model *m = e->model;
    size_t at = 0; /* zeroed up to here */
    for (int i = 0; i < m->n_params; i++)
        if (e->grad_assigned[i]) {
            size_t off = e->plan.p[i].gfull_off;
            zero_floats(buf + at, off - at);
            e->grad_unset[i] = true;
            at = off + (size_t)m->params[i].numel;
        }
    zero_floats(buf + at, n - at);
}

/* parameter i's gradient storage this micro-batch zeroed (none yet: nothing to do); its source
 * slots (the experts stored E/ep a rank) are never assigned: zeroed with the buffer */
static void zero_grad(zt_engine *e, int i) {
    float *g = !e->reduce_now ? (e->micro_grads ? e->micro_grads + e->plan.p[i].gfull_off : NULL) : e->pgrad[i];
    if (g) zero_floats(g, (size_t)e->model->params[i].numel);
}

/* The source slots of an expert tensor stored E/ep a rank (shard/plan.h): after its gradient in
 * zero2/zero3's per-unit gradient; in the gradient buffers' slot region when the step has several
 * micro-batches (their tree adds each source's partials apart until the step); else one unit's
 * transient slots, zeroed here and freed when its backward is done (one micro-batch: the unit adds
 * the sources at once, the same tree) */
int zt_grads_slots_for(zt_engine *e, int i, float **out, zt_error *err) {
    const zt_plan *pl = &e->plan;
    size_t n = (size_t)e->model->params[i].numel, extra = (size_t)pl->p[i].gnumel - n;
    *out = NULL;
    if (!extra || !e->model->params[i].trainable) return ZT_OK;
    if (e->reduce_now) {
        *out = e->pgrad[i] ? e->pgrad[i] + n : NULL;
        return ZT_OK;
    }
    if (pl->gbuf_floats > pl->gfull_floats) {
        *out = e->micro_grads ? e->micro_grads + zt_plan_gslot_off(pl, i) : NULL;
        return ZT_OK;
    }
    if (!e->pslots[i]) {
        char what[160];
        snprintf(what, sizeof what, "the gradient source slots of %s", e->model->params[i].name);
        if (!(e->pslots[i] = zt_engine_alloc(e, extra, &e->mem.grads, what))) return zt_engine_oom(e, err, "engine: backward");
        zero_floats(e->pslots[i], extra);
    }
    *out = e->pslots[i];
    return ZT_OK;
}

/* unit u's transient source slots, once its backward is done */
static void slots_done(zt_engine *e, int u) {
    const zt_unit *un = &e->model->units[u];
    for (int k = 0; k < un->n_params; k++) {
        int i = un->params[k];
        if (e->pslots[i]) zt_engine_release(e, &e->pslots[i], (size_t)(e->plan.p[i].gnumel - e->model->params[i].numel), &e->mem.grads);
    }
}

uint32_t zt_grads_unset_of(zt_engine *e, int u) {
    const zt_unit *un = &e->model->units[u];
    uint32_t unset = 0;
    for (int k = 0; k < un->n_params; k++)
        if (e->grad_unset[un->params[k]]) {
            e->grad_unset[un->params[k]] = false;
            unset |= 1u << k;
        }
    return unset;
}

void zt_grads_unit_written(zt_engine *e, int u, uint32_t unset) {
    const zt_unit *un = &e->model->units[u];
    for (int k = 0; k < un->n_params && unset; k++)
        if (unset >> k & 1u) zero_grad(e, un->params[k]);
}

/* Whether this step's norm partials can be taken unit by unit during backward (see the top) */
static bool norm_early_ok(const zt_engine *e) {
    const zt_precision *p = &e->opt.precision;
    int ga = e->opt.grad_accum > 0 ? e->opt.grad_accum : 1;
    return e->world == 1 && !e->shard_optim && !e->shard_grads && ga == 1 && !e->pp && !e->tp_comm &&
           e->grad_kind < 0 && p->grads == ZT_DTYPE_FP32 && p->reduce == ZT_DTYPE_FP32;
}

void zt_grads_piece_partials(const zt_plan *pl, int i, int s, const float *piece, double *partials) {
    int64_t at, n, chunk;
    for (int k = 0; zt_plan_piece_run(pl, i, s, k, &at, &n, &chunk); k++)
        zt_chunk_sum_squares(piece + at, n, ZT_NORM_CHUNK, partials + chunk);
}

void zt_grads_norm_partials(zt_engine *e, int i) {
    const zt_plan *pl = &e->plan;
    if (!e->shard_optim) /* the plan has one shard: shard 0's piece is the whole gradient */
        zt_grads_piece_partials(pl, i, 0, e->micro_grads + pl->p[i].gfull_off, e->norm_partials);
    else
        zt_grads_piece_partials(pl, i, pl->p[i].shard, e->grad_pieces + pl->p[i].gshard_off, e->norm_partials);
}

/* norm_early: the partials of unit u's own trainable parameters, their gradient final */
static void norm_unit(zt_engine *e, int u) {
    const zt_unit *un = &e->model->units[u];
    for (int k = 0; k < un->n_params; k++) {
        int i = un->params[k];
        if (e->plan.p[i].owner_unit == u && e->model->params[i].trainable) zt_grads_norm_partials(e, i);
    }
}

int zt_grads_begin_micro(zt_engine *e, zt_error *err) {
    const zt_plan *pl = &e->plan;
    int ga = e->opt.grad_accum > 0 ? e->opt.grad_accum : 1;
    if (e->grads_final)
        return zt_error_set(err, ZT_ERR_USAGE, "engine: forward_backward after the step's gradient "
                            "was finalized (call zt_engine_step first)");
    if (e->micro_in_step > 0 && e->reduce_early)
        return zt_error_set(err, ZT_ERR_USAGE, "engine: a second micro-batch before the step, but the engine "
                            "was created with grad_accum 1 and has already reduced the first one's gradient "
                            "(create it with grad_accum = the micro-batches per step)");
    if (e->micro_in_step == 0) {
        e->reduce_now = e->shard_grads && (ga == 1 || e->opt.reduce_every_micro_batch);
        /* 1-bit Adam past its warm-up: nothing to reduce */
        e->reduce_early = !e->shard_grads && ga == 1 && e->overlap != NULL && !zt_onebit_frozen(e);
        e->micro_direct = e->reduce_now && ga == 1 && !e->grad_pieces_transient && (e->grad_pieces || e->grad_kind >= 0);
        if (e->micro_direct) e->micro_pieces = e->grad_pieces;
        /* the norm partials taken unit by unit during backward: gradient offload as the pieces are
         * written, the early norm as each unit's gradient is final (a frozen parameter's stay 0) */
        e->norm_early = norm_early_ok(e);
        if (e->grad_kind >= 0 || e->norm_early) memset(e->norm_partials, 0, (size_t)pl->norm_chunks * sizeof(double));
    } else {
        e->norm_early = false; /* a second micro-batch adds to the gradients taken */
    }
    memset(e->grad_unset, 0, (size_t)e->model->n_params * sizeof *e->grad_unset); /* set anew below */
    if (e->micro_direct && e->grad_kind >= 0) return ZT_OK; /* into per-unit windows (grad_offload.c) */
    size_t n = e->reduce_now ? pl->gshard_floats : pl->gbuf_floats;
    float **buf = e->reduce_now ? &e->micro_pieces : &e->micro_grads;
    if (!*buf && !(*buf = zt_engine_alloc(e, n, &e->mem.grads, e->reduce_now ? "the micro-batch gradient pieces"
                                                                               : "the micro-batch gradients")))
        return zt_engine_oom(e, err, "engine: gradients (%zu floats)", n);
    /* zero1's early reduction writes the reduced pieces during backward */
    size_t miss = e->reduce_early && e->shard_optim ? reduced_pieces(e) : 0;
    if (miss) return zt_engine_oom(e, err, "engine: the reduced gradient (%zu floats)", miss);
    if (e->reduce_now) zero_floats(*buf, n); /* the pieces: written by reductions, which add */
    else zero_but_assigned(e, *buf, n);
    return ZT_OK;
}

float *zt_grads_for(zt_engine *e, int i, zt_error *err) {
    if (!e->reduce_now) return e->micro_grads + e->plan.p[i].gfull_off;
    if (!e->pgrad[i]) {
        size_t n = (size_t)e->plan.p[i].gnumel;
        char what[160];
        snprintf(what, sizeof what, "the gradient of %s", e->model->params[i].name);
        if (!(e->pgrad[i] = zt_engine_alloc(e, n, &e->mem.grads, what))) {
            zt_engine_oom(e, err, "engine: backward");
            return NULL;
        }
        if (e->grad_assigned[i]) e->grad_unset[i] = true; /* its first user, about to run, assigns it */
        else zero_floats(e->pgrad[i], n);
    }
    return e->pgrad[i];
}

/* Waits for the reduction queued last (if any) and frees the full gradients it read; with
 * gradient offload its pieces then go to the files. */
static int retire_inflight(zt_engine *e, zt_error *err) {
    if (!e->n_inflight) return ZT_OK;
    int rc = zt_overlap_wait(e, e->inflight_seq, err);
    for (int k = 0; k < e->n_inflight; k++) {
        int i = e->inflight[k];
        zt_engine_release(e, &e->pgrad[i], (size_t)e->plan.p[i].gnumel, &e->mem.grads);
    }
    if (!rc && e->grad_kind >= 0) rc = zt_grad_offload_finish(e, e->plan.p[e->inflight[0]].owner_unit, err);
    e->n_inflight = 0;
    return rc;
}

/* ddp/zero1, one micro-batch: a unit's own parameters have their final gradient once its backward
 * is done (a parameter belongs to its first user, the last one backward reaches) */
static int reduce_early(zt_engine *e, int u, zt_error *err) {
    const zt_unit *un = &e->model->units[u];
    int own[ZT_UNIT_MAX_PARAMS], n = 0;
    for (int k = 0; k < un->n_params; k++)
        if (e->plan.p[un->params[k]].owner_unit == u && e->model->params[un->params[k]].trainable)
            own[n++] = un->params[k];
    return n ? zt_overlap_submit_full(e, own, n, un->name, err) : ZT_OK;
}

int zt_grads_unit_done(zt_engine *e, int u, zt_error *err) {
    slots_done(e, u);
    if (e->norm_early) norm_unit(e, u);
    if (e->reduce_early) return reduce_early(e, u, err);
    if (!e->reduce_now) return ZT_OK;
    const zt_unit *un = &e->model->units[u];
    int own[ZT_UNIT_MAX_PARAMS], n = 0;
    float *src[ZT_UNIT_MAX_PARAMS];
    for (int k = 0; k < un->n_params; k++) {
        int i = un->params[k];
        if (e->plan.p[i].owner_unit == u && e->model->params[i].trainable) { /* frozen: no gradient */
            own[n] = i;
            src[n++] = e->pgrad[i];
        }
    }
    int rc = n && e->grad_kind >= 0 ? zt_grad_offload_window(e, u, own, n, err) : ZT_OK;
    if (rc) return rc;
    if (n && e->overlap) { /* reduced in the background while the next unit computes */
        uint64_t seq;
        rc = zt_overlap_submit(e, own, n, un->name, &seq, err);
        if (!rc) rc = retire_inflight(e, err); /* the previous unit's: done while this one computed */
        if (rc) return rc;
        memcpy(e->inflight, own, (size_t)n * sizeof *own);
        e->n_inflight = n;
        e->inflight_seq = seq;
        return ZT_OK;
    }
    rc = n ? zt_engine_reduce_scatter(e, own, n, src, e->micro_pieces, un->name, err) : ZT_OK;
    for (int k = 0; k < n; k++)
        zt_engine_release(e, &e->pgrad[own[k]], (size_t)e->plan.p[own[k]].gnumel, &e->mem.grads);
    return !rc && n && e->grad_kind >= 0 ? zt_grad_offload_finish(e, u, err) : rc;
}

int zt_grads_end_micro(zt_engine *e, zt_error *err) {
    const zt_plan *pl = &e->plan;
    for (int i = 0; i < e->model->n_params; i++) /* assigned gradients no unit reached */
        if (e->grad_unset[i]) {
            zero_grad(e, i);
            e->grad_unset[i] = false;
        }
    int rc = zt_overlap_drain(e, err);
    if (!rc) rc = retire_inflight(e, err);
    if (!rc && e->grad_kind >= 0) rc = zt_grad_offload_flush(e, err); /* the last unit's write */
    if (rc) return rc;
    if (e->reduce_now) {
        if (!e->micro_direct) tree_push(e, &e->piece_tree, e->micro_pieces, pl->gshard_floats);
        e->micro_pieces = NULL;
    } else {
        tree_push(e, &e->full_tree, e->micro_grads, pl->gbuf_floats);
        e->micro_grads = NULL;
    }
    e->micro_in_step++;
    return ZT_OK;
}

/* Expert parallelism under the deferred tree (zt_unit_args.ep_defer_fold): each unit's
 * per-source gradient slots, summed over this rank's micro-batches, added into the experts this
 * rank owns before the reduction (zt_unit_ops.fold_grads) */
static void fold_units(zt_engine *e, float *G) {
    const zt_model *m = e->model;
    for (int u = 0; u < m->n_units; u++) {
        const zt_unit *un = &m->units[u];
        if (un->ep_parts < 2 || !un->ops->fold_grads) continue;
        float *g[ZT_UNIT_MAX_PARAMS], *slots[ZT_UNIT_MAX_PARAMS];
        for (int k = 0; k < un->n_params; k++) {
            int i = un->params[k];
            g[k] = m->params[i].trainable ? G + e->plan.p[i].gfull_off : NULL;
            slots[k] = g[k] && e->plan.p[i].gnumel > m->params[i].numel ? G + zt_plan_gslot_off(&e->plan, i) : NULL;
        }
        un->ops->fold_grads(un, zt_engine_group(e), g, slots);
    }
}

/* After the last micro-batch: fold the trees and reduce what is still local. The result is in
 * e->micro_grads (full layout: ddp, or one process) and/or e->grad_pieces (sharded optimizer). */
int zt_grads_finish(zt_engine *e, zt_error *err) {
    if (e->grads_final) return ZT_OK;
    if (e->micro_in_step == 0) return zt_error_set(err, ZT_ERR_USAGE, "engine: step without a micro-batch");
    const zt_plan *pl = &e->plan;
    int rc = ZT_OK;
    if (e->reduce_now && e->micro_direct) {
        /* the reduce-scatters wrote grad_pieces: nothing to fold */
    } else if (e->reduce_now) {
        float *p = tree_fold(e, &e->piece_tree, pl->gshard_floats);
        if (e->grad_pieces_transient) { /* the folded sum is the reduced gradient: no copy */
            e->grad_pieces = p;
        } else {
            memcpy(e->grad_pieces, p, pl->gshard_floats * sizeof(float));
            zt_engine_release(e, &p, pl->gshard_floats, &e->mem.grads);
        }
    } else {
        float *G = tree_fold(e, &e->full_tree, pl->gbuf_floats);
        e->micro_grads = G;
        /* several micro-batches: the sources' slots were left apart (one: the units added them) */
        if (!e->reduce_early && G && e->opt.grad_accum > 1) fold_units(e, G);
        if (e->reduce_early) { /* reduced during backward (one micro-batch: the tree is that one) */
            if (e->shard_optim) zt_engine_release(e, &e->micro_grads, pl->gbuf_floats, &e->mem.grads);
        } else if (!e->shard_optim) {
            if (zt_onebit_frozen(e)) {
                /* 1-bit Adam past its warm-up: this rank's own gradient moves its momentum (onebit.c) */
            } else if (e->world > 1) rc = zt_engine_all_reduce_full(e, G, err);
            /* one rank: its contribution is the sum, in the reduce dtype all the same (collect.c) */
            else if (e->opt.precision.reduce == ZT_DTYPE_BF16) zt_round_bf16(G, pl->gfull_floats);
            else if (e->opt.precision.reduce == ZT_DTYPE_FP16) zt_round_fp16(G, G, pl->gfull_floats);
        } else {
            int n = e->model->n_params;
            int *all = malloc((size_t)n * sizeof *all);
            float **src = malloc((size_t)n * sizeof *src);
            if (!all || !src) rc = zt_error_set(err, ZT_ERR_NOMEM, "engine: out of memory");
            size_t miss = rc ? 0 : reduced_pieces(e);
            if (miss) rc = zt_engine_oom(e, err, "engine: the reduced gradient (%zu floats)", miss);
            int nt = 0; /* the trainable parameters: a frozen one has no gradient */
            for (int i = 0; i < n && !rc; i++)
                if (e->model->params[i].trainable) {
                    all[nt] = i;
                    src[nt++] = G + pl->p[i].gfull_off;
                }
            if (!rc && nt) rc = zt_engine_reduce_scatter(e, all, nt, src, e->grad_pieces, "gradients", err);
            free(all);
            free(src);
            /* the full gradient is not needed any more under a sharded optimizer */
            zt_engine_release(e, &e->micro_grads, pl->gbuf_floats, &e->mem.grads);
        }
    }
    /* (gradient offload: per unit, grad_offload.c; 1-bit Adam past its warm-up: the pieces stay the
     * shard group's, their momenta are averaged across the replicas instead: onebit.c) */
    if (!rc && e->replica_comm && e->grad_kind < 0 && !zt_onebit_frozen(e))
        rc = zt_engine_all_reduce_pieces(e, e->grad_pieces, err);
    if (!rc) e->grads_final = true;
    return rc;
}
