/* engine_precision.c - the engine's side of the precision contract (zerotrain.h, "Precision"):
 *
 * Compute copies. Under bf16 and fp16 compute the engine keeps a low-precision copy of every
 * matrix parameter (ndim >= 2: the Linear weights and the tied LM head) for the units' matrix
 * products (zt_unit_args.params_lp): bf16 bits, or fp32 holding fp16 values (this CPU has no fp16
 * arithmetic, kernels.h). ddp/zero1/zero2 keep one full-layout copy: ddp refreshes it once after
 * every change of the parameters (a step, an init, a load: zt_engine_param_local marks it stale;
 * an AdamW step writes it in the update's pass instead and leaves it current, step.c lp_fused);
 * zero1/zero2, whose fp32 master is sharded under low-precision compute, all-gather it after each
 * step and write it at init and load (master_shard.c);
 * zero3 makes the copy of a parameter right after its all-gather and frees it with the gathered
 * tensor. The copy is round-to-nearest-even of the fp32 parameter, an elementwise function, so
 * every strategy computes with the same bits. bf16-low keeps no copy: its parameters are stored
 * as bf16 (params16.c) and are the compute operands themselves (params_lp points into them, or
 * at zero3's gathered bf16 tensor).
 *
 * Stepped state. fp16: the reduced gradient is rounded to fp16 (overflow -> inf, what fp16
 * gradient storage would hold) and carries the loss scale; step.c skips the update when it is not
 * finite and the scaler (src/precision/loss_scaler.c) adjusts. bf16-low: the reduced gradient is
 * rounded to bf16, and after the update the parameters (nearest-even or stochastic) and both
 * moments (nearest-even) are rounded to bf16, and stored as bf16 (parameters: params16.c;
 * moments: offload.c, step.c). The reduced gradient stays bf16 values in an fp32 array.
 */
#include "engine/engine_internal.h"
#include "kernels/kernels.h"
#include "memory/plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool zt_engine_has_lp(const zt_engine *e, int param)
{
    return e->lp_kind != 0 && e->model->params[param].ndim >= 2;
}

/* bytes per element of a compute copy: the memory plan's precision table (src/memory/plan.c);
 * bf16-low's (zero3's gathered bf16 parameters) are its bf16 parameters' */
size_t zt_engine_lp_bytes(const zt_engine *e, int64_t numel)
{
    const zt_precision_bytes *pb = zt_precision_bytes_of(e->opt.precision.mode);
    return (size_t)numel * (size_t)(e->params16 ? pb->master : pb->copy);
}

void *zt_engine_full_lp_at(const zt_engine *e, int i, size_t begin)
{
    return (char *)e->full_lp + zt_engine_lp_bytes(e, (int64_t)(e->plan.p[i].full_off + begin));
}

int zt_engine_lp_setup(zt_engine *e, zt_error *err)
{
    const zt_precision *p = &e->opt.precision;
    int rc = zt_precision_check(p, err);
    if (rc) return rc;
    zt_loss_scaler_init(&e->scaler, p);
    if (!e->lp_kind) return ZT_OK; /* set by zt_engine_create: the saved buffers are sized by it */
    const zt_model *m = e->model;
    const zt_plan *pl = &e->plan;
    if (!(e->gathered_lp = calloc((size_t)m->n_params, sizeof *e->gathered_lp))) goto nomem;
    if (!e->shard_params && !e->params16 &&
        !(e->full_lp = zt_engine_alloc(e, zt_memory_floats_for_bytes(zt_engine_lp_bytes(e, (int64_t)pl->full_floats)),
                                       &e->mem.compute_copy, "the compute copy of the matrices")))
        goto nomem;
    e->lp_stale = true;
    size_t staging = 0;
    for (int u = 0; u < m->n_units; u++) {
        const zt_unit *un = &m->units[u];
        unit_state *s = &e->units[u];
        if (!(s->params_lp = calloc((size_t)un->n_params, sizeof *s->params_lp))) goto nomem;
        if (un->ops->staging_bytes) {
            size_t b = un->ops->staging_bytes(un, e->opt.B, e->opt.T, e->lp_kind);
            if (b > staging) staging = b;
        }
        if (e->full_lp || e->full16) /* bf16-low: the parameters are the copy */
            for (int k = 0; k < un->n_params; k++) {
                int i = un->params[k];
                if (zt_engine_has_lp(e, i))
                    s->params_lp[k] = e->full16 ? (void *)(e->full16 + pl->p[i].full_off)
                                                : zt_engine_full_lp_at(e, i, 0);
            }
    }
    if (staging && !(e->staging = zt_engine_alloc(e, zt_memory_floats_for_bytes(staging), &e->mem.activations, "the low-precision operand staging")))
        goto nomem;
    return ZT_OK;
nomem:
    return zt_engine_oom(e, err, "engine: the %s compute copies", zt_dtype_name(p->compute));
}

void zt_engine_lp_free(zt_engine *e)
{
    if (e->units)
        for (int u = 0; u < e->model->n_units; u++) free((void *)e->units[u].params_lp);
    if (e->gathered_lp)
        for (int i = 0; i < e->model->n_params; i++) free(e->gathered_lp[i]);
    free(e->gathered_lp);
    free(e->full_lp);
    free(e->staging);
}

int zt_engine_lp_refresh_unit(zt_engine *e, int u, zt_error *err)
{
    if (!e->lp_kind) return ZT_OK;
    const zt_model *m = e->model;
    const zt_plan *pl = &e->plan;
    if (e->full_lp) {
        if (!e->lp_stale || e->shard_master) return ZT_OK; /* shard_master: kept current (master_shard.c) */
        for (int i = 0; i < m->n_params; i++)
            if (zt_engine_has_lp(e, i))
                zt_round_to_lp((zt_lp_kind)e->lp_kind, zt_engine_full_lp_at(e, i, 0), e->full_params + pl->p[i].full_off,
                               (size_t)m->params[i].numel);
        e->lp_stale = false;
        return ZT_OK;
    }
    if (e->full16) return ZT_OK; /* bf16-low, full layout: params_lp point into it for good */
    const zt_unit *un = &m->units[u];
    unit_state *s = &e->units[u];
    for (int k = 0; k < un->n_params; k++) {
        int i = un->params[k];
        if (!zt_engine_has_lp(e, i)) continue;
        if (!e->gathered_lp[i]) { /* (bf16-low: gathered as bf16 already, issue_gather) */
            size_t n = (size_t)m->params[i].numel;
            char what[160];
            snprintf(what, sizeof what, "the %s copy of gathered %s", zt_dtype_name(e->opt.precision.compute),
                     m->params[i].name);
            if (!(e->gathered_lp[i] = zt_engine_alloc(e, zt_memory_floats_for_bytes(zt_engine_lp_bytes(e, (int64_t)n)),
                                                      &e->mem.gathered, what)))
                return zt_engine_oom(e, err, "engine: unit %s", un->name);
            zt_round_to_lp((zt_lp_kind)e->lp_kind, e->gathered_lp[i], e->gathered[i], n);
        }
        s->params_lp[k] = e->gathered_lp[i];
    }
    return ZT_OK;
}

void zt_engine_lp_release(zt_engine *e, int i)
{
    if (!e->gathered_lp || !e->gathered_lp[i]) return;
    size_t n = zt_memory_floats_for_bytes(zt_engine_lp_bytes(e, e->model->params[i].numel));
    zt_engine_release(e, (float **)&e->gathered_lp[i], n, &e->mem.gathered);
}

float zt_engine_loss_scale(const zt_engine *e)
{
    return e->opt.precision.mode == ZT_PRECISION_FP16 ? (float)e->scaler.scale : 1.0f;
}

void zt_engine_round_grads(zt_engine *e)
{
    const zt_precision *p = &e->opt.precision;
    if (p->grads == ZT_DTYPE_FP32) return;
    float *g = e->shard_optim ? e->grad_pieces : e->micro_grads;
    size_t n = e->shard_optim ? e->plan.gshard_floats : e->plan.gfull_floats; /* gradient layouts */
    if (!g) return;
    if (p->grads == ZT_DTYPE_FP16)
        zt_round_fp16(g, g, n);
    else
        zt_round_bf16(g, n);
}

void zt_engine_round_updated(zt_engine *e, int i, float *w, float *m, float *v, size_t n,
                             int64_t begin)
{
    const zt_precision *p = &e->opt.precision;
    if (p->params == ZT_DTYPE_BF16) {
        if (p->stochastic_rounding) /* the draw depends on (seed, step, parameter, element) only */
            zt_round_bf16_stochastic(w, n, e->opt.seed ^ (e->step * 0xD1B54A32D192ED03ull) ^
                                               ((uint64_t)(i + 1) * 0x8CB92BA72F3D8DD7ull),
                                     (uint64_t)begin);
        else
            zt_round_bf16(w, n);
    }
    if (p->moments == ZT_DTYPE_BF16) {
        if (m) zt_round_bf16(m, n);
        if (v) zt_round_bf16(v, n);
    }
}

void zt_engine_get_loss_scaler(const zt_engine *e, zt_loss_scaler *out) { *out = e->scaler; }
void zt_engine_set_loss_scaler(zt_engine *e, const zt_loss_scaler *in) { e->scaler = *in; }
