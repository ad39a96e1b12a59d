/* compute_copy.c - the parameter store's low-precision compute copies (param_store.h).
 *
 * Under bf16 and fp16 compute the store keeps a low-precision copy of every matrix parameter
 * (ndim >= 2: the Linear weights and the tied LM head) for the units' matrix products
 * (zt_unit_args.params_lp): bf16 bits, or fp32 holding fp16 values (this CPU has no fp16
 * arithmetic, kernels.h). ddp/zero1/zero2 keep one full-layout copy: ddp refreshes it once after
 * every change of the parameters (a step, an init, a load: zt_store_changed marks it stale; an
 * AdamW step writes it in the update's pass instead and leaves it current, step.c); zero1/zero2,
 * whose fp32 master is sharded under low-precision compute, all-gather it after each step and
 * write it at init and load (master_shard.c); zero3 makes the copy of a parameter right after its
 * all-gather and frees it with the gathered tensor. The copy is round-to-nearest-even of the fp32
 * parameter, an elementwise function, so every strategy computes with the same bits. bf16-low
 * keeps no copy: its parameters are stored as bf16 (param_bf16.c) and are the compute operands
 * themselves (params_lp points into them, or at zero3's gathered bf16 tensor). */
#include "engine/param_store_internal.h"
#include "kernels/kernels.h"
#include "memory/plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool zt_store_has_lp(const zt_engine *e, int param)
{
    return e->lp_kind != 0 && e->model->params[param].ndim >= 2 && !e->model->params[param].quant; /* quantized:
        dequantized per unit instead (param_quant.c) */
}

/* bytes per element of a compute copy: the memory plan's precision table (src/memory/plan.c);
 * bf16-low's (zero3's gathered bf16 parameters) are its bf16 parameters' */
size_t zt_store_lp_bytes(const zt_engine *e, int64_t numel)
{
    const zt_precision_bytes *pb = zt_precision_bytes_of(e->opt.precision.mode);
    return (size_t)numel * (size_t)(e->ps->bf16 ? pb->master : pb->copy);
}

void *zt_store_full_lp_at(const zt_engine *e, int i, size_t begin)
{
    if (!e->ps->full_lp) return NULL;
    return (char *)e->ps->full_lp + zt_store_lp_bytes(e, (int64_t)(e->plan.p[i].full_off + begin));
}

int zt_copies_setup(zt_engine *e, zt_error *err)
{
    if (!e->lp_kind) return ZT_OK; /* set by zt_engine_create: the saved buffers are sized by it */
    const zt_model *m = e->model;
    const zt_plan *pl = &e->plan;
    zt_param_store *ps = e->ps;
    if (!(ps->gathered_lp = calloc((size_t)m->n_params, sizeof *ps->gathered_lp))) goto nomem;
    if (!e->shard_params && !ps->bf16 &&
        !(ps->full_lp = zt_engine_alloc(e, zt_memory_floats_for_bytes(zt_store_lp_bytes(e, (int64_t)pl->full_floats)),
                                        &e->mem.compute_copy, "the compute copy of the matrices")))
        goto nomem;
    ps->lp_stale = true;
    for (int u = 0; u < m->n_units; u++) {
        const zt_unit *un = &m->units[u];
        unit_state *s = &e->units[u];
        if (!(s->params_lp = calloc((size_t)un->n_params, sizeof *s->params_lp))) goto nomem;
        if (ps->full_lp || ps->full_bf16) /* bf16-low: the parameters are the copy */
            for (int k = 0; k < un->n_params; k++) {
                int i = un->params[k];
                if (zt_store_has_lp(e, i))
                    s->params_lp[k] = ps->full_bf16 ? (void *)(ps->full_bf16 + pl->p[i].full_off)
                                                    : zt_store_full_lp_at(e, i, 0);
            }
    }
    return ZT_OK;
nomem:
    return zt_engine_oom(e, err, "engine: the %s compute copies", zt_dtype_name(e->opt.precision.compute));
}

void zt_copies_free(zt_engine *e)
{
    zt_param_store *ps = e->ps;
    if (e->units)
        for (int u = 0; u < e->model->n_units; u++) {
            free((void *)e->units[u].params_lp);
            e->units[u].params_lp = NULL;
        }
    if (ps->gathered_lp)
        for (int i = 0; i < e->model->n_params; i++) free(ps->gathered_lp[i]);
    free(ps->gathered_lp);
    free(ps->full_lp);
    ps->gathered_lp = NULL;
    ps->full_lp = NULL;
}

void zt_copies_refresh_unit(zt_engine *e, int u)
{
    if (!e->lp_kind) return;
    const zt_model *m = e->model;
    const zt_plan *pl = &e->plan;
    zt_param_store *ps = e->ps;
    if (ps->full_lp) {
        if (!ps->lp_stale || ps->master_pieces) return; /* master pieces: kept current (master_shard.c) */
        for (int i = 0; i < m->n_params; i++)
            if (zt_store_has_lp(e, i))
                zt_round_to_lp((zt_lp_kind)e->lp_kind, zt_store_full_lp_at(e, i, 0), ps->full + pl->p[i].full_off,
                               (size_t)m->params[i].numel);
        ps->lp_stale = false;
        return;
    }
    if (ps->full_bf16) return; /* bf16-low, full layout: params_lp point into it for good */
    const zt_unit *un = &m->units[u]; /* zero3: the copies the residency made as it gathered */
    unit_state *s = &e->units[u];
    for (int k = 0; k < un->n_params; k++)
        if (zt_store_has_lp(e, un->params[k])) s->params_lp[k] = ps->gathered_lp[un->params[k]];
}

int zt_copies_make(zt_engine *e, int u, int i, zt_error *err)
{
    const zt_model *m = e->model;
    zt_param_store *ps = e->ps;
    size_t n = (size_t)m->params[i].numel;
    char what[160];
    snprintf(what, sizeof what, "the %s copy of gathered %s", zt_dtype_name(e->opt.precision.compute), m->params[i].name);
    if (!(ps->gathered_lp[i] = zt_engine_alloc(e, zt_memory_floats_for_bytes(zt_store_lp_bytes(e, (int64_t)n)),
                                               &e->mem.gathered, what)))
        return zt_engine_oom(e, err, "engine: unit %s", m->units[u].name);
    zt_round_to_lp((zt_lp_kind)e->lp_kind, ps->gathered_lp[i], ps->gathered[i], n);
    return ZT_OK;
}

void zt_copies_release(zt_engine *e, int i)
{
    zt_param_store *ps = e->ps;
    if (!ps->gathered_lp || !ps->gathered_lp[i]) return;
    size_t n = zt_memory_floats_for_bytes(zt_store_lp_bytes(e, e->model->params[i].numel));
    zt_engine_release(e, (float **)&ps->gathered_lp[i], n, &e->mem.gathered);
}
