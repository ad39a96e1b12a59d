/* param_bf16.c - the parameter store's bf16 placement (bf16-low's 2-byte parameters): their
 * storage, their init, and the fp32 views a running unit gets of them.
 *
 * Under bf16-low (precision.params bf16) the parameters are stored as bf16 bits: e->ps->full_bf16 (ddp,
 * zero1, zero2: the full layout) or e->ps->pieces_bf16 (zero3: this rank's pieces), 2 bytes an element,
 * and e->ps->full / e->ps->pieces stay NULL. Those bits are also the matrices' compute copy, so no
 * separate copy exists (zt_unit_args.params_lp points into full_bf16, or at zero3's gathered bf16
 * tensor, e->ps->gathered_lp). Everything that computes on parameters in fp32 goes through exact
 * widenings:
 *   - the optimizer (step.c) widens a chunk of e->ps->chunk elements into e->ps->chunk_buf, updates
 *     and rounds it there (nearest or stochastic, keyed by the element's index in the full
 *     tensor), and narrows it back, which is exact for a rounded value;
 *   - checkpoints and the public accessors read and write through zt_store_read/_write;
 *   - a unit reads the parameters it does not take through params_lp (zt_unit_ops.reads_lp;
 *     for GPT-2 the layernorm weights and the biases) as fp32 views: full tensors made just
 *     before it runs (forward, recomputation, backward) and freed right after (class gathered).
 * The numbers are the same bits as fp32 arrays holding bf16 values: every stored value is a bf16
 * value, and widening is exact.
 */
#include "engine/param_store_internal.h"
#include "engine/init.h"
#include "kernels/kernels.h"
#include "memory/plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int zt_param_bf16_alloc(zt_engine *e, zt_error *err)
{
    const zt_plan *pl = &e->plan;
    size_t n = e->shard_params ? pl->shard_floats : pl->full_floats;
    uint16_t **dst = e->shard_params ? &e->ps->pieces_bf16 : &e->ps->full_bf16;
    if (!(*dst = zt_engine_alloc(e, zt_memory_floats_for_bytes(n * sizeof(uint16_t)), &e->mem.params, "the bf16 parameters")))
        goto nomem;
    memset(*dst, 0, n * sizeof(uint16_t));
    e->ps->chunk = n < ZT_STATE_CHUNK ? (n ? n : 1) : ZT_STATE_CHUNK;
    if (!(e->ps->chunk_buf = zt_engine_alloc(e, e->ps->chunk, &e->mem.optimizer, "the fp32 update chunk"))) goto nomem;
    return ZT_OK;
nomem:
    return zt_engine_oom(e, err, "engine: the bf16 parameters of model %s (%zu elements)", e->model->name, n);
}

void zt_param_bf16_free(zt_engine *e)
{
    free(e->ps->full_bf16);
    free(e->ps->pieces_bf16);
    free(e->ps->chunk_buf);
    e->ps->full_bf16 = e->ps->pieces_bf16 = NULL;
    e->ps->chunk_buf = NULL;
}

uint16_t *zt_param_bf16_local(zt_engine *e, int i)
{
    const zt_param_plan *p = &e->plan.p[i];
    return e->shard_params ? e->ps->pieces_bf16 + p->shard_off : e->ps->full_bf16 + p->full_off;
}

void zt_param_bf16_init(zt_engine *e, int i, uint64_t key)
{
    const zt_plan *pl = &e->plan;
    const zt_param_desc *p = &e->model->params[i];
    int64_t begin = e->shard_params ? zt_plan_shard_begin(pl, i, pl->p[i].shard) : 0;
    size_t n = e->shard_params ? (size_t)zt_plan_shard_numel(pl, i, pl->p[i].shard) : (size_t)p->numel;
    uint16_t *dst = zt_param_bf16_local(e, i);
    for (size_t done = 0; done < n; done += e->ps->chunk) { /* element j's value: (seed, name, j) */
        size_t len = n - done < e->ps->chunk ? n - done : e->ps->chunk;
        zt_init_fill(e->ps->chunk_buf, p, begin + (int64_t)done, (int64_t)len, key);
        zt_f32_to_bf16(dst + done, e->ps->chunk_buf, len);
    }
}

/* Whether unit u's k-th parameter reaches it as an fp32 view (a parameter it does not read
 * through params_lp). */
static bool needs_view(const zt_engine *e, int u, int k)
{
    if (!e->ps->bf16 || zt_store_quantized(e, e->model->units[u].params[k])) return false; /* dequantized */
    const zt_unit *un = &e->model->units[u];
    return !(zt_store_has_lp(e, un->params[k]) && un->ops->reads_lp && un->ops->reads_lp(un, k));
}

/* Where unit u's k-th parameter is as bf16 now: the full layout, or zero3's gathered tensor. */
static const uint16_t *bf16_full(zt_engine *e, int u, int k)
{
    int i = e->model->units[u].params[k];
    return e->shard_params ? (const uint16_t *)e->ps->gathered_lp[i] : e->ps->full_bf16 + e->plan.p[i].full_off;
}

int zt_store_views_make(zt_engine *e, int u, zt_error *err)
{
    if (!e->ps->bf16) return ZT_OK;
    const zt_unit *un = &e->model->units[u];
    unit_state *s = &e->units[u];
    for (int k = 0; k < un->n_params; k++) {
        s->params[k] = NULL;
        if (!needs_view(e, u, k)) continue;
        const zt_param_desc *p = &e->model->params[un->params[k]];
        char what[160];
        snprintf(what, sizeof what, "the fp32 view of %s", p->name);
        if (!(s->params[k] = zt_engine_alloc(e, (size_t)p->numel, &e->mem.gathered, what)))
            return zt_engine_oom(e, err, "unit %s", un->name);
        zt_bf16_to_f32(s->params[k], bf16_full(e, u, k), (size_t)p->numel);
    }
    return ZT_OK;
}

void zt_store_views_free(zt_engine *e, int u)
{
    if (!e->ps->bf16) return;
    const zt_unit *un = &e->model->units[u];
    unit_state *s = &e->units[u];
    for (int k = 0; k < un->n_params; k++)
        zt_engine_release(e, &s->params[k], (size_t)e->model->params[un->params[k]].numel, &e->mem.gathered);
}
