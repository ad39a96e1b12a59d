/* recompute.c - activation checkpointing: what each unit keeps of its saved activations between
 * its forward and its backward, the one buffer shared by all units for the rest, and rebuilding
 * that rest just before the unit's backward (docs/activation-checkpointing.md).
 *
 * Per unit u, with S = saved_floats(B, T, lp_kind) and K = kept_floats(B, T, lp_kind) (lp_kind:
 * the compute precision's, e->lp_kind):
 *   mode       kept (own buffer)   rest (in the shared buffer)   rebuilt before backward by
 *   none       S                   0                             -
 *   full       0                   S                             ops->forward (output thrown away)
 *   selective  K (S without ops)   S - K (0 without ops)         ops->recompute
 * The shared buffer holds max over units of rest floats. Every unit keeps its output (the next
 * unit's input) in every mode. Forward writes a unit's rest into the shared buffer, so after the
 * forward pass it still holds the last such unit's rest: that unit (GPT-2's head under full,
 * the last block under selective) is not recomputed, because nothing ran in between
 * (recompute_owner tracks this). The memory is the same either way.
 *
 * Bit-identical gradients: the recomputation runs the same deterministic kernels on the same
 * inputs (the kept input, the same gathered parameters, the same thread count), so it writes the
 * bits forward wrote, and backward reads exactly what it would have read without checkpointing.
 * zero3: the engine gathers a unit's parameters before its backward anyway (and prefetches the
 * next one while this one recomputes and runs backward); with keep_params_after_forward they
 * are still there. */
#include "engine/engine_internal.h"
#include "obs/trace.h"

#include <omp.h>
#include <stdio.h>
#include <string.h>

const char *zt_recompute_name(zt_recompute r) {
    static const char *names[] = {"none", "full", "selective"};
    return (unsigned)r < 3 ? names[r] : "unknown";
}

int zt_recompute_parse(const char *name, zt_recompute *out, zt_error *err) {
    for (int r = 0; r < 3; r++)
        if (strcmp(name, zt_recompute_name((zt_recompute)r)) == 0) {
            *out = (zt_recompute)r;
            return ZT_OK;
        }
    return zt_error_set(err, ZT_ERR_USAGE,
                        "unknown activation checkpointing mode \"%s\" (known: none, full, selective)", name);
}

int zt_recompute_layout(zt_engine *e, zt_error *err) {
    const zt_model *m = e->model;
    zt_recompute mode = e->opt.activation_checkpointing;
    int B = e->opt.B, T = e->opt.T;
    if ((unsigned)mode > ZT_RECOMPUTE_SELECTIVE)
        return zt_error_set(err, ZT_ERR_USAGE, "engine: unknown activation checkpointing mode %d", (int)mode);
    size_t shared = 0;
    for (int u = 0; u < m->n_units; u++) {
        const zt_unit *un = &m->units[u];
        unit_state *s = &e->units[u];
        size_t S = un->ops->saved_floats(un, B, T, e->lp_kind), K = S;
        if (mode == ZT_RECOMPUTE_FULL) {
            K = 0;
        } else if (mode == ZT_RECOMPUTE_SELECTIVE && un->ops->kept_floats && un->ops->recompute) {
            K = un->ops->kept_floats(un, B, T, e->lp_kind);
            if (K > S)
                return zt_error_set(err, ZT_ERR_USAGE, "engine: unit %s keeps %zu floats of a saved "
                                    "buffer of %zu (kept_floats > saved_floats, B=%d T=%d)", un->name, K, S, B, T);
        }
        s->kept = K;
        s->rest = S - K;
        if (s->rest > shared) shared = s->rest;
        char what[160];
        snprintf(what, sizeof what, "the saved activations of unit %s", un->name);
        if (K && !(s->saved = zt_engine_alloc_saved(e, un, K, what)))
            return zt_engine_oom(e, err, "engine: laying out activation checkpointing");
    }
    e->recompute_owner = -1;
    if (shared && !(e->recompute_shared = zt_engine_alloc_exchange(e, shared, &e->mem.activations,
                                                      "the shared activation checkpointing buffer")))
        return zt_engine_oom(e, err, "engine: activation checkpointing (%s)", zt_recompute_name(mode));
    return ZT_OK;
}

void zt_recompute_args(const zt_engine *e, int u, zt_unit_args *a) {
    const unit_state *s = &e->units[u];
    if (s->rest == 0) { /* all kept (or nothing saved) */
        a->saved = s->saved;
        a->saved_rest = NULL;
    } else if (s->kept == 0) { /* all in the shared buffer, contiguous */
        a->saved = e->recompute_shared;
        a->saved_rest = NULL;
    } else {
        a->saved = s->saved;
        a->saved_rest = e->recompute_shared;
    }
}

void zt_recompute_forward_done(zt_engine *e, int u) {
    if (e->units[u].rest) e->recompute_owner = u;
}

void zt_recompute_backward_done(zt_engine *e, int u) {
    if (e->units[u].rest) e->recompute_owner = -1;
}

int zt_recompute_before_backward(zt_engine *e, int u, const zt_unit_args *a, float *throwaway, zt_error *err) {
    const zt_unit *un = &e->model->units[u];
    unit_state *s = &e->units[u];
    if (s->rest == 0 || e->recompute_owner == u) return ZT_OK;
    zt_unit_args r = *a; /* the backward's inputs (parameters, compute copies, staging, in) ... */
    r.out = NULL;        /* ... without its outputs */
    r.dout = NULL;
    r.din = NULL;
    zt_recompute_args(e, u, &r);
    zt_trace_begin("recompute", un->name);
    double t0 = omp_get_wtime();
    int rc;
    if (e->opt.activation_checkpointing == ZT_RECOMPUTE_FULL) { /* the whole forward, output thrown away */
        r.out = throwaway;
        rc = un->ops->forward(un, &r, err);
    } else {
        rc = un->ops->recompute(un, &r, err);
    }
    s->bwd_s += omp_get_wtime() - t0;
    zt_trace_end();
    if (rc) return zt_error_prefix(err, "recomputing the activations of unit %s (%s checkpointing)", un->name,
                                   zt_recompute_name(e->opt.activation_checkpointing));
    e->recompute_owner = u;
    return ZT_OK;
}
