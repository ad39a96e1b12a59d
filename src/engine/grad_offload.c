/* grad_offload.c - the reduced gradient pieces in files: with parameter and optimizer offload
 * (zero3, or hybrid over zero3) and one micro-batch per step, this rank's reduced gradient is the
 * NVMe store's "grad" kind instead of a resident shard-sized buffer, so what a rank holds of the
 * model states is bounded by the windows, not by the model (docs/offload.md).
 *
 *   backward   before unit u's reduction (grads.c), its own trainable parameters get a window
 *              (class grads: each piece at its 4 KiB-aligned place, the layout being aligned under
 *              parameter offload) and the reduce-scatter writes their pieces there (grad_at[]);
 *              once it is done, the pieces are all-reduced across replicas (hybrid), rounded to
 *              the gradient dtype, their gradient-norm partials taken (step.c then only sums
 *              them) and hashed, and the window is written to the file by the I/O threads
 *              (O_DIRECT) while the next units compute. One write is in flight at a time: the
 *              next unit's window waits for it and frees its window first, so at most two
 *              windows (one reducing, one writing) are resident; the memory plan replays this.
 *   step       the optimizer's stream reads the kind beside m, v and the parameter pieces and
 *              does not write it back; each piece is hashed as the update consumes it, and one
 *              that is not what backward wrote stops the step with exit 8 naming the file and the
 *              parameter (after that step's update: its result is never saved, the run stops).
 *
 * Per element the arithmetic is the in-memory run's: the same reduction, rounding, partials in
 * the same chunks, and the same update, so the parameters are the same bits.
 *
 * Invariants: grad_at[i] != NULL only while parameter i's piece is in a window; grad_writing is
 * the one window whose write is queued; no window outlives its micro-batch (grads.c's end of
 * micro-batch flushes, zt_grads_reset drops). */
#include "engine/engine_internal.h"
#include "kernels/kernels.h"
#include "memory/plan.h"
#include "offload/io.h"
#include "offload/nvme_store.h"
#include "optim/optim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

int zt_grad_offload_setup(zt_engine *e, zt_error *err) {
    int n = e->model->n_params, nu = e->model->n_units;
    e->grad_at = calloc((size_t)n, sizeof *e->grad_at);
    e->grad_window = calloc((size_t)nu, sizeof *e->grad_window);
    e->grad_sum = calloc((size_t)n, sizeof *e->grad_sum);
    XXH3_state_t **h = calloc((size_t)n, sizeof *h);
    e->grad_hash = h;
    e->grad_writing = -1;
    if (!e->grad_at || !e->grad_window || !e->grad_sum || !h)
        return zt_error_set(err, ZT_ERR_NOMEM, "gradient offload: out of memory");
    for (int u = 0; u < nu; u++)
        if (!(e->grad_window[u].ticket = calloc(1, sizeof(zt_io_ticket))))
            return zt_error_set(err, ZT_ERR_NOMEM, "gradient offload: out of memory");
    for (int i = 0; i < n; i++)
        if (!(h[i] = XXH3_createState())) return zt_error_set(err, ZT_ERR_NOMEM, "gradient offload: out of memory");
    return ZT_OK;
}

/* Waits for unit u's write (if any) and frees its window. */
static int release(zt_engine *e, int u, zt_error *err) {
    zt_param_window *w = &e->grad_window[u];
    int rc = ZT_OK;
    if (w->reading) { /* the write in flight ("reading": I/O queued against the ticket) */
        w->reading = false;
        rc = zt_nvme_store_span_wait(e->nvme, w->ticket, true, err);
    }
    if (e->grad_writing == u) e->grad_writing = -1;
    for (int k = 0; k < w->n; k++) e->grad_at[w->params[k]] = NULL;
    zt_engine_release(e, &w->buf, w->floats, &e->mem.grads);
    w->floats = 0;
    w->n = 0;
    return rc;
}

void zt_grad_offload_drop(zt_engine *e) {
    if (!e->grad_window) return;
    zt_error ignore;
    for (int u = 0; u < e->model->n_units; u++)
        if (e->grad_window[u].buf || e->grad_window[u].reading) release(e, u, &ignore);
}

void zt_grad_offload_free(zt_engine *e) {
    zt_grad_offload_drop(e);
    if (e->grad_window)
        for (int u = 0; u < e->model->n_units; u++) free(e->grad_window[u].ticket);
    XXH3_state_t **h = e->grad_hash;
    for (int i = 0; h && i < e->model->n_params; i++) XXH3_freeState(h[i]);
    free(h);
    free(e->grad_at);
    free(e->grad_window);
    free(e->grad_sum);
    e->grad_hash = NULL, e->grad_at = NULL, e->grad_window = NULL, e->grad_sum = NULL;
}

int zt_grad_offload_flush(zt_engine *e, zt_error *err) {
    return e->grad_writing >= 0 ? release(e, e->grad_writing, err) : ZT_OK;
}

int zt_grad_offload_window(zt_engine *e, int u, const int *own, int n, zt_error *err) {
    const zt_plan *pl = &e->plan;
    int rc = zt_grad_offload_flush(e, err);
    if (rc) return rc;
    zt_param_window *w = &e->grad_window[u];
    if (w->buf && (rc = release(e, u, err))) return rc; /* not left by an earlier micro-batch: defensive */
    size_t floats = zt_memory_window_floats(pl, own, n);
    char what[160];
    snprintf(what, sizeof what, "unit %s's window of reduced gradient pieces", e->model->units[u].name);
    if (!(w->buf = zt_engine_alloc(e, floats, &e->mem.grads, what))) return zt_engine_oom(e, err, "gradient offload");
    w->floats = floats;
    w->n = n;
    memcpy(w->params, own, (size_t)n * sizeof *own);
    float *at = (float *)(((uintptr_t)w->buf + 4095) & ~(uintptr_t)4095);
    for (int k = 0; k < n; k++) { /* the pieces start 4 KiB blocks in the file and in the window */
        e->grad_at[own[k]] = at;
        at += zt_nvme_span_bytes(pl->p[own[k]].gshard_off, (size_t)zt_plan_shard_numel(pl, own[k], pl->p[own[k]].shard)) /
              sizeof(float);
    }
    return ZT_OK;
}

int zt_grad_offload_finish(zt_engine *e, int u, zt_error *err) {
    const zt_plan *pl = &e->plan;
    zt_param_window *w = &e->grad_window[u];
    if (!w->buf) return ZT_OK;
    int rc = zt_grad_offload_flush(e, err);
    if (!rc && e->replica_comm) rc = zt_engine_all_reduce_pieces_at(e, w->params, w->n, e->model->units[u].name, err);
    if (rc) return rc;
    zt_dtype gd = e->opt.precision.grads;
    for (int k = 0; k < w->n; k++) {
        int i = w->params[k];
        float *g = e->grad_at[i];
        size_t cnt = (size_t)zt_plan_shard_numel(pl, i, pl->p[i].shard);
        if (gd == ZT_DTYPE_FP16) zt_round_fp16(g, g, cnt); /* step.c's zt_engine_round_grads, per piece */
        else if (gd == ZT_DTYPE_BF16) zt_round_bf16(g, cnt);
        zt_grads_piece_partials(pl, i, pl->p[i].shard, g, e->norm_partials); /* step.c's grad_norm, per piece */
        uint64_t h = XXH3_64bits(g, cnt * sizeof(float));
        e->grad_sum[i] = h ? h : 1;
        if ((rc = zt_nvme_store_write_span_async(e->nvme, e->grad_kind, pl->p[i].gshard_off, cnt, g, w->ticket, err)))
            break;
        w->reading = true;
    }
    e->grad_writing = u;
    return rc;
}

void zt_grad_offload_hash_begin(zt_engine *e) {
    XXH3_state_t **h = e->grad_hash;
    for (int i = 0; i < e->model->n_params; i++) XXH3_64bits_reset(h[i]);
}

void zt_grad_offload_hash_add(zt_engine *e, int i, const float *g, size_t n) {
    XXH3_64bits_update(((XXH3_state_t **)e->grad_hash)[i], g, n * sizeof(float));
}

int zt_grad_offload_hash_check(zt_engine *e, zt_error *err) {
    XXH3_state_t **h = e->grad_hash;
    for (int i = 0; i < e->model->n_params; i++) {
        if (!e->model->params[i].trainable) continue;
        uint64_t d = XXH3_64bits_digest(h[i]);
        if ((d ? d : 1) != e->grad_sum[i])
            return zt_error_set(err, ZT_ERR_IO, "%s: parameter %s's reduced gradient piece does not match what "
                                "backward wrote: the file was changed under the run; stopping before this step's "
                                "result is saved", zt_nvme_store_path(e->nvme, e->grad_kind), e->model->params[i].name);
    }
    return ZT_OK;
}
