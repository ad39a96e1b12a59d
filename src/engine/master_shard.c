/* master_shard.c - zero1/zero2's fp32 master weights as pieces, with replicated compute copies.
 *
 * Under bf16 or fp16 compute with fp32 master weights (precision modes bf16 and fp16), zero1 and
 * zero2 (and hybrid over zero2) keep the master the way zero3 does, as this rank's dim-0 pieces of
 * every parameter (e->ps->pieces, shard layout, class params), next to the optimizer state it is
 * updated with. What is replicated is only what the units read (DeepSpeed's bf16 ZeRO-1/2: 16-bit
 * weights replicated, fp32 master partitioned):
 *   - e->ps->full_lp: the compute copy of every matrix (full layout, class compute_copy; bf16 bits, or
 *     fp32 holding fp16 values), which the units read through params_lp (compute_copy.c);
 *   - e->ps->fp32_copy: an fp32 copy of each parameter some unit reads as fp32 (zt_param_reads_fp32: for
 *     GPT-2 the layernorm weights and the biases), at e->ps->fp32_copy_off[i] (class compute_copy).
 * A parameter a unit reads through params_lp (zt_unit_ops.reads_lp) reaches it with params[k] =
 * NULL, as in every strategy under low-precision compute.
 *
 * After the optimizer has updated the pieces, zt_master_refresh all-gathers the new copies over
 * the shard group: the fp32-read parameters as fp32, the other matrices as their compute copy,
 * which each rank rounds from its own rows while packing (bf16: 2-byte elements, half the bytes of
 * the fp32 all-gather zero1/zero2 ran before). Rounding is elementwise, so the copies are the same
 * bits as rounding the full fp32 tensor: every strategy hands the units the same values. Init,
 * zt_engine_param_set and checkpoint loads write the copies locally from full tensors
 * (zt_store_copies_write), with no collective.
 */
#include "engine/param_store_internal.h"
#include "engine/init.h"
#include "kernels/kernels.h"
#include "memory/plan.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int zt_master_alloc(zt_engine *e, zt_error *err)
{
    const zt_model *m = e->model;
    size_t piece = e->plan.shard_floats, n32 = zt_fp32_copy_floats(m, e->lp_kind), at = 0;
    if (!(e->ps->fp32_copy_off = malloc((size_t)m->n_params * sizeof *e->ps->fp32_copy_off))) goto nomem;
    for (int i = 0; i < m->n_params; i++) { /* zt_fp32_copy_floats's layout */
        e->ps->fp32_copy_off[i] = SIZE_MAX;
        if (!zt_param_reads_fp32(m, e->lp_kind, i)) continue;
        e->ps->fp32_copy_off[i] = at;
        at += ((size_t)m->params[i].numel + 15) / 16 * 16;
    }
    if (!(e->ps->pieces = zt_engine_alloc(e, piece, &e->mem.params, "the fp32 master pieces"))) goto nomem;
    memset(e->ps->pieces, 0, piece * sizeof(float));
    if (n32) {
        if (!(e->ps->fp32_copy = zt_engine_alloc(e, n32, &e->mem.compute_copy, "the fp32 copy of the parameters read as fp32"))) goto nomem;
        memset(e->ps->fp32_copy, 0, n32 * sizeof(float));
    }
    return ZT_OK;
nomem:
    return zt_engine_oom(e, err, "engine: the fp32 master pieces of model %s (%zu elements) and its fp32 copies (%zu)",
                         m->name, piece, n32);
}

void zt_master_free(zt_engine *e)
{
    free(e->ps->fp32_copy);
    free(e->ps->fp32_copy_off);
    e->ps->fp32_copy = NULL;
    e->ps->fp32_copy_off = NULL;
}

float *zt_master_fp32_view(zt_engine *e, int i)
{
    return e->ps->fp32_copy && e->ps->fp32_copy_off[i] != SIZE_MAX ? e->ps->fp32_copy + e->ps->fp32_copy_off[i] : NULL;
}

void zt_store_copies_write(zt_engine *e, int i, size_t begin, size_t n, const float *src)
{
    float *f = zt_master_fp32_view(e, i);
    if (f) memcpy(f + begin, src, n * sizeof(float));
    if (e->ps->full_lp && zt_store_has_lp(e, i))
        zt_round_to_lp((zt_lp_kind)e->lp_kind, zt_store_full_lp_at(e, i, begin), src, n);
}

/* Without other shards the pieces are the whole tensors: the copies are made here. */
static void refresh_local(zt_engine *e)
{
    const zt_plan *pl = &e->plan;
    for (int i = 0; i < e->model->n_params; i++) /* (a quantized parameter has no piece nor copy) */
        if (!zt_store_quantized(e, i))
            zt_store_copies_write(e, i, 0, (size_t)e->model->params[i].numel, e->ps->pieces + pl->p[i].shard_off);
}

int zt_master_refresh(zt_engine *e, zt_error *err)
{
    const zt_model *m = e->model;
    e->ps->lp_stale = false; /* the copies follow the pieces from here on */
    if (e->plan.nshards < 2) {
        refresh_local(e);
        return ZT_OK;
    }
    int *list = malloc((size_t)m->n_params * sizeof *list);
    void **dst = calloc((size_t)m->n_params, sizeof *dst);
    int rc = ZT_OK, n = 0;
    if (!list || !dst) {
        rc = zt_error_set(err, ZT_ERR_NOMEM, "engine: out of memory");
        goto out;
    }
    /* the parameters read as fp32 move as fp32 (a matrix among them then gets its copy here) */
    /* (a frozen parameter did not change: its copies stay as init or the load wrote them) */
    for (int i = 0; i < m->n_params; i++)
        if (m->params[i].trainable && (dst[i] = zt_master_fp32_view(e, i))) list[n++] = i;
    if (n && (rc = zt_engine_all_gather_rounded(e, list, n, dst, sizeof(float), 0, "parameters (fp32)", err)))
        goto out;
    for (int k = 0; k < n; k++)
        if (zt_store_has_lp(e, list[k]))
            zt_round_to_lp((zt_lp_kind)e->lp_kind, zt_store_full_lp_at(e, list[k], 0), dst[list[k]],
                           (size_t)m->params[list[k]].numel);
    /* the other matrices move as their compute copy, rounded from each rank's own rows */
    n = 0;
    for (int i = 0; i < m->n_params; i++)
        if (m->params[i].trainable && !zt_master_fp32_view(e, i) && zt_store_has_lp(e, i)) {
            dst[i] = zt_store_full_lp_at(e, i, 0);
            list[n++] = i;
        }
    if (n)
        rc = zt_engine_all_gather_rounded(e, list, n, dst, zt_store_lp_bytes(e, 1), e->lp_kind,
                                          "parameters (compute copy)", err);
out:
    free(list);
    free(dst);
    return rc;
}

void zt_master_init(zt_engine *e, int i, uint64_t key)
{
    const zt_plan *pl = &e->plan;
    const zt_param_desc *p = &e->model->params[i];
    zt_init_fill(e->ps->pieces + pl->p[i].shard_off, p, zt_plan_shard_begin(pl, i, pl->p[i].shard),
                 zt_plan_shard_numel(pl, i, pl->p[i].shard), key);
    /* every rank computes the whole tensor's values (counter-based: the same bits) for its copies */
    float chunk[4096];
    for (int64_t done = 0; done < p->numel; done += 4096) {
        int64_t len = p->numel - done < 4096 ? p->numel - done : 4096;
        zt_init_fill(chunk, p, done, len, key);
        zt_store_copies_write(e, i, (size_t)done, (size_t)len, chunk);
    }
}
