/* param_offload.c - ZeRO-Infinity's parameter offload for zero3: this rank's parameter pieces
 * (the fp32 master, shard layout) live in the NVMe store's "param" kind instead of e->pieces.
 *
 *   forward/backward  issue_gather(u) (engine.c) allocates unit u's window and points
 *                     piece_at[i] into it; the gather (collect.c, on the communication thread
 *                     when it runs, one unit ahead of the compute) reads each piece with one
 *                     aligned O_DIRECT pread (zt_nvme_store_read_span), checks it against the
 *                     checksum the last step wrote, and all-gathers from there; the main thread
 *                     frees the window as soon as it has waited for that gather. So at most two
 *                     windows (the unit computing and the one prefetched) are resident.
 *   step              the optimizer streams the pieces beside the optimizer state (step.c: one
 *                     chunk of each kind per staging buffer, read ahead, written behind) and
 *                     hashes each piece as it is updated: that XXH3 is what the next reads check.
 *   element access    checkpoints, initialization and one-tensor gathers read and write ranges
 *                     through the store's random access; a write marks the piece's checksum
 *                     unknown (0) until the next step rewrites it.
 *
 * Invariants: e->pieces is NULL; piece_at[i] != NULL only between the issue of a gather that
 * covers i and the release of that window; no window is held across a step. */
#include "engine/engine_internal.h"
#include "memory/plan.h"
#include "offload/nvme_store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

int zt_param_offload_setup(zt_engine *e, zt_error *err) {
    int n = e->model->n_params;
    e->piece_at = calloc((size_t)n, sizeof *e->piece_at);
    e->unit_window = calloc((size_t)e->model->n_units, sizeof *e->unit_window);
    e->piece_sum = calloc((size_t)n, sizeof *e->piece_sum);
    XXH3_state_t **h = calloc((size_t)n, sizeof *h);
    e->piece_hash = h;
    if (!e->piece_at || !e->unit_window || !e->piece_sum || !h)
        return zt_error_set(err, ZT_ERR_NOMEM, "parameter offload: out of memory");
    for (int i = 0; i < n; i++)
        if (!(h[i] = XXH3_createState())) return zt_error_set(err, ZT_ERR_NOMEM, "parameter offload: out of memory");
    return ZT_OK;
}

void zt_param_offload_free(zt_engine *e) {
    if (e->unit_window)
        for (int u = 0; u < e->model->n_units; u++) zt_param_offload_window_release(e, u);
    XXH3_state_t **h = e->piece_hash;
    for (int i = 0; h && i < e->model->n_params; i++) XXH3_freeState(h[i]);
    free(h);
    free(e->piece_at);
    free(e->unit_window);
    free(e->piece_sum);
    e->piece_hash = NULL, e->piece_at = NULL, e->unit_window = NULL, e->piece_sum = NULL;
}

/* Where each parameter's span starts in unit u's window: spans follow each other, 4 KiB-aligned. */
static void layout(zt_engine *e, float *buf, const int *params, int n, float **span) {
    const zt_plan *pl = &e->plan;
    uintptr_t a = ((uintptr_t)buf + 4095) & ~(uintptr_t)4095;
    for (int k = 0; k < n; k++) {
        int i = params[k];
        span[k] = (float *)a;
        a += zt_nvme_span_bytes(pl->p[i].shard_off, (size_t)zt_plan_shard_numel(pl, i, pl->shard));
    }
}

int zt_param_offload_window(zt_engine *e, int u, const int *params, int n, zt_error *err) {
    size_t floats = zt_memory_window_floats(&e->plan, params, n);
    zt_param_offload_window_release(e, u);
    char what[160];
    snprintf(what, sizeof what, "unit %s's window of parameter pieces", e->model->units[u].name);
    float *buf = zt_engine_alloc(e, floats, &e->mem.params, what);
    if (!buf) return zt_engine_oom(e, err, "parameter offload");
    e->unit_window[u].buf = buf;
    e->unit_window[u].floats = floats;
    float *span[ZT_UNIT_MAX_PARAMS];
    layout(e, buf, params, n, span);
    for (int k = 0; k < n; k++) e->piece_at[params[k]] = span[k]; /* the span; the piece is inside */
    return ZT_OK;
}

void zt_param_offload_window_release(zt_engine *e, int u) {
    if (!e->unit_window || !e->unit_window[u].buf) return;
    const zt_unit *un = &e->model->units[u];
    float *lo = e->unit_window[u].buf, *hi = lo + e->unit_window[u].floats;
    for (int k = 0; k < un->n_params; k++) { /* only the pointers into this window */
        int i = un->params[k];
        if (e->piece_at[i] >= lo && e->piece_at[i] < hi) e->piece_at[i] = NULL;
    }
    zt_engine_release(e, &e->unit_window[u].buf, e->unit_window[u].floats, &e->mem.params);
    e->unit_window[u].floats = 0;
}

int zt_param_offload_load(zt_engine *e, const int *params, int n, zt_error *err) {
    const zt_plan *pl = &e->plan;
    for (int k = 0; k < n; k++) {
        int i = params[k];
        size_t begin = pl->p[i].shard_off, cnt = (size_t)zt_plan_shard_numel(pl, i, pl->shard);
        float *span = e->piece_at[i], *data;
        if (!span)
            return zt_error_set(err, ZT_ERR_INTERNAL, "parameter offload: %s has no window", e->model->params[i].name);
        int rc = zt_nvme_store_read_span(e->nvme, e->param_kind, begin, cnt, span, zt_nvme_span_bytes(begin, cnt),
                                         &data, err);
        if (rc) return zt_error_prefix(err, "parameter %s", e->model->params[i].name);
        uint64_t want = e->piece_sum[i], got = want ? XXH3_64bits(data, cnt * sizeof(float)) : 0;
        if (want && (got ? got : 1) != want)
            return zt_error_set(err, ZT_ERR_IO, "%s: parameter %s's piece (elements %zu..%zu of the file) does not "
                                "match the checksum the last step wrote: the file was changed under the run; not "
                                "training on it", zt_nvme_store_path(e->nvme, e->param_kind), e->model->params[i].name,
                                begin, begin + cnt);
        e->piece_at[i] = data; /* now the piece itself */
    }
    return ZT_OK;
}

int zt_param_offload_read(zt_engine *e, int i, size_t begin, size_t n, float *dst, zt_error *err) {
    return zt_nvme_store_read(e->nvme, e->param_kind, e->plan.p[i].shard_off + begin, n, dst, err);
}

int zt_param_offload_write(zt_engine *e, int i, size_t begin, size_t n, const float *src, zt_error *err) {
    e->piece_sum[i] = 0;
    return zt_nvme_store_write(e->nvme, e->param_kind, e->plan.p[i].shard_off + begin, n, src, err);
}

void zt_param_offload_hash_begin(zt_engine *e) {
    XXH3_state_t **h = e->piece_hash;
    for (int i = 0; i < e->model->n_params; i++) XXH3_64bits_reset(h[i]);
}

void zt_param_offload_hash_add(zt_engine *e, int i, const float *w, size_t n) {
    XXH3_64bits_update(((XXH3_state_t **)e->piece_hash)[i], w, n * sizeof(float));
}

/* Frozen parameters are not updated, so not hashed: their checksum stays what it was. */
void zt_param_offload_hash_end(zt_engine *e) {
    XXH3_state_t **h = e->piece_hash;
    for (int i = 0; i < e->model->n_params; i++)
        if (e->model->params[i].trainable) {
            uint64_t d = XXH3_64bits_digest(h[i]);
            e->piece_sum[i] = d ? d : 1; /* 0 means unknown */
        }
}
