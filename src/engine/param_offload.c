/* param_offload.c - ZeRO-Infinity's parameter offload for zero3: this rank's parameter pieces
 * (the fp32 master, shard layout) live in the NVMe store's "param" kind instead of memory: the
 * parameter store's file placement.
 *
 *   forward/backward  each unit's pieces are read from the file into a window (one aligned
 *                     O_DIRECT read per piece, queued on the store's I/O threads) ahead of the
 *                     unit's gather. Which windows exist when (the gather's own, the read-ahead of
 *                     the next opt.offload.param_prefetch units of the pass within
 *                     opt.offload.param_max_live elements, their release once the gather is waited
 *                     for, a new pass dropping an abandoned one's) is decided by the residency rules
 *                     (src/memory/residency.c), which the memory plan follows too; this file makes
 *                     and frees the windows and reads into them. The gather (collect.c, on the
 *                     communication thread when it runs) waits for its window's reads, checks each
 *                     piece against the checksum the last step wrote, and all-gathers from there.
 *   step              the optimizer streams the pieces beside the optimizer state (step.c: one
 *                     chunk of each kind per staging buffer, read ahead, written behind) and
 *                     hashes each piece as it is updated: that XXH3 is what the next reads check.
 *   element access    checkpoints, initialization and one-tensor gathers read and write ranges
 *                     through the store's random access; a write marks the piece's checksum
 *                     unknown (0) until the next step rewrites it.
 *
 * Invariants: the store's pieces are NULL; piece_at[i] != NULL only between the creation of a
 * window holding i and its release; no window is held across a step. */
#include "engine/param_store_internal.h"
#include "comm/comm.h"
#include "memory/plan.h"
#include "offload/io.h"
#include "offload/nvme_store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

int zt_param_offload_setup(zt_engine *e, zt_error *err) {
    int n = e->model->n_params;
    int nu = e->model->n_units;
    e->piece_at = calloc((size_t)n, sizeof *e->piece_at);
    e->piece_unit = calloc((size_t)n, sizeof *e->piece_unit);
    e->unit_window = calloc((size_t)nu, sizeof *e->unit_window);
    e->piece_sum = calloc((size_t)n, sizeof *e->piece_sum);
    e->piece_written = calloc((size_t)n, sizeof *e->piece_written);
    XXH3_state_t **h = calloc(2 * (size_t)n, sizeof *h); /* [i]: as written, [n + i]: as read */
    e->piece_hash = h;
    if (!e->piece_at || !e->piece_unit || !e->unit_window || !e->piece_sum || !e->piece_written || !h)
        return zt_error_set(err, ZT_ERR_NOMEM, "parameter offload: out of memory");
    for (int u = 0; u < nu; u++)
        if (!(e->unit_window[u].ticket = calloc(1, sizeof(zt_io_ticket))))
            return zt_error_set(err, ZT_ERR_NOMEM, "parameter offload: out of memory");
    for (int i = 0; i < 2 * n; i++)
        if (!(h[i] = XXH3_createState())) return zt_error_set(err, ZT_ERR_NOMEM, "parameter offload: out of memory");
    return ZT_OK;
}

void zt_param_offload_free(zt_engine *e) {
    if (e->unit_window)
        for (int u = 0; u < e->model->n_units; u++) {
            if (e->unit_window[u].ticket) zt_param_offload_window_release(e, u);
            free(e->unit_window[u].ticket);
        }
    XXH3_state_t **h = e->piece_hash;
    for (int i = 0; h && i < 2 * e->model->n_params; i++) XXH3_freeState(h[i]);
    free(h);
    free(e->piece_at);
    free(e->piece_unit);
    free(e->unit_window);
    free(e->piece_sum);
    free(e->piece_written);
    e->piece_written = NULL;
    e->piece_hash = NULL, e->piece_at = NULL, e->unit_window = NULL, e->piece_sum = NULL, e->piece_unit = NULL;
}

/* Where each parameter's span starts in unit u's window: spans follow each other, 4 KiB-aligned. */
static void layout(zt_engine *e, float *buf, const int *params, int n, float **span) {
    const zt_plan *pl = &e->plan;
    uintptr_t a = ((uintptr_t)buf + 4095) & ~(uintptr_t)4095;
    for (int k = 0; k < n; k++) {
        int i = params[k];
        span[k] = (float *)a;
        a += zt_nvme_span_bytes(pl->p[i].shard_off, (size_t)zt_plan_shard_numel(pl, i, pl->p[i].shard));
    }
}

int zt_param_offload_window(zt_engine *e, int u, const int *params, int n, size_t floats, zt_error *err) {
    const zt_plan *pl = &e->plan;
    zt_param_window *w = &e->unit_window[u];
    char what[160];
    snprintf(what, sizeof what, "unit %s's window of parameter pieces", e->model->units[u].name);
    float *buf = zt_engine_alloc(e, floats, &e->mem.params, what);
    if (!buf) return zt_engine_oom(e, err, "parameter offload");
    w->buf = buf;
    w->floats = floats;
    w->n = n;
    memcpy(w->params, params, (size_t)n * sizeof *params);
    float *span[ZT_UNIT_MAX_PARAMS];
    layout(e, buf, params, n, span);
    for (int k = 0; k < n; k++) {
        int i = params[k];
        size_t begin = pl->p[i].shard_off, cnt = (size_t)zt_plan_shard_numel(pl, i, pl->p[i].shard);
        e->piece_unit[i] = u;
        int rc = zt_nvme_store_read_span_async(e->nvme, e->ps->file_kind, begin, cnt, span[k],
                                               zt_nvme_span_bytes(begin, cnt), w->ticket, &e->piece_at[i], err);
        w->reading = true;
        if (rc) return zt_error_prefix(err, "parameter %s", e->model->params[i].name);
    }
    return ZT_OK;
}

void zt_param_offload_window_release(zt_engine *e, int u) {
    if (!e->unit_window || !e->unit_window[u].buf) return;
    zt_param_window *w = &e->unit_window[u];
    if (w->reading) { /* abandoned before its gather waited: the threads may still write into it */
        zt_error ignore;
        zt_nvme_store_span_wait(e->nvme, w->ticket, false, &ignore);
        w->reading = false;
    }
    for (int k = 0; k < w->n; k++) e->piece_at[w->params[k]] = NULL;
    zt_engine_release(e, &w->buf, w->floats, &e->mem.params);
    w->floats = 0;
    w->n = 0;
}

int zt_param_offload_check_bound(zt_engine *e, zt_error *err) {
    size_t bound = e->opt.offload.param_max_live;
    if (!e->param_dir || !e->shard_params || e->opt.precision.params == ZT_DTYPE_BF16 || !bound) return ZT_OK;
    int unit, shard;
    size_t mine = zt_memory_largest_window(e->model, &e->plan, &unit, &shard);
    double most = (double)mine;
    zt_comm *job = zt_engine_job_comm(e);
    int rc = job ? zt_all_reduce_max_f64(job, &most, "offload window bound", err) : ZT_OK;
    if (rc || (size_t)most <= bound) return rc;
    if ((size_t)most > mine) /* another rank's (another pipeline stage's) unit is the largest */
        return zt_error_set(err, ZT_ERR_USAGE, "memory.offload_param_max_live (DeepSpeed's stage3_max_live_parameters): "
                            "%zu elements cannot hold the largest unit's window of parameter pieces, %.0f elements "
                            "on another rank (its message names the unit); give at least %.0f, or 0 for no bound",
                            bound, most, most);
    return zt_memory_window_bound_error(e->model, bound, mine, unit, shard, err);
}

int zt_param_offload_load(zt_engine *e, const int *params, int n, zt_error *err) {
    const zt_plan *pl = &e->plan;
    for (int k = 0; k < n; k++) {
        int i = params[k];
        zt_param_window *w = &e->unit_window[e->piece_unit[i]];
        float *data = e->piece_at[i];
        if (!data || !w->buf)
            return zt_error_set(err, ZT_ERR_INTERNAL, "parameter offload: %s has no window", e->model->params[i].name);
        if (w->reading) {
            w->reading = false;
            int rc = zt_nvme_store_span_wait(e->nvme, w->ticket, false, err);
            if (rc) return zt_error_prefix(err, "parameter %s", e->model->params[i].name);
        }
        size_t begin = pl->p[i].shard_off, cnt = (size_t)zt_plan_shard_numel(pl, i, pl->p[i].shard);
        uint64_t want = e->piece_sum[i], got = want ? XXH3_64bits(data, cnt * sizeof(float)) : 0;
        if (want && (got ? got : 1) != want)
            return zt_error_set(err, ZT_ERR_IO, "%s: parameter %s's piece (elements %zu..%zu of the file) does not "
                                "match the checksum the last step wrote: the file was changed under the run; not "
                                "training on it", zt_nvme_store_path(e->nvme, e->ps->file_kind), e->model->params[i].name,
                                begin, begin + cnt);
    }
    return ZT_OK;
}

int zt_param_offload_read(zt_engine *e, int i, size_t begin, size_t n, float *dst, zt_error *err) {
    return zt_nvme_store_read(e->nvme, e->ps->file_kind, e->plan.p[i].shard_off + begin, n, dst, err);
}

/* Writes that come in order from element 0 (init, a set, a load) are hashed as they go: the last
 * one completes the piece's checksum, with no read-back. Any other write leaves it unknown. */
int zt_param_offload_write(zt_engine *e, int i, size_t begin, size_t n, const float *src, zt_error *err) {
    XXH3_state_t *h = ((XXH3_state_t **)e->piece_hash)[i];
    e->piece_sum[i] = 0;
    if (begin == 0) {
        XXH3_64bits_reset(h);
        e->piece_written[i] = 0;
    }
    if (begin == e->piece_written[i]) {
        XXH3_64bits_update(h, src, n * sizeof(float));
        e->piece_written[i] += n;
    } else {
        e->piece_written[i] = SIZE_MAX; /* out of order: unknown until a seal or the next step */
    }
    int rc = zt_nvme_store_write(e->nvme, e->ps->file_kind, e->plan.p[i].shard_off + begin, n, src, err);
    if (rc) e->piece_written[i] = SIZE_MAX;
    else if (e->piece_written[i] == (size_t)zt_plan_shard_numel(&e->plan, i, e->plan.p[i].shard)) {
        uint64_t d = XXH3_64bits_digest(h);
        e->piece_sum[i] = d ? d : 1;
    }
    return rc;
}

void zt_param_offload_hash_begin(zt_engine *e) {
    XXH3_state_t **h = e->piece_hash;
    for (int i = 0; i < 2 * e->model->n_params; i++) XXH3_64bits_reset(h[i]);
    for (int i = 0; i < e->model->n_params; i++) e->piece_written[i] = SIZE_MAX; /* the states are the step's now */
}

void zt_param_offload_check_add(zt_engine *e, int i, const float *w, size_t n) {
    XXH3_64bits_update(((XXH3_state_t **)e->piece_hash)[e->model->n_params + i], w, n * sizeof(float));
}

int zt_param_offload_check(zt_engine *e, zt_error *err) {
    XXH3_state_t **h = e->piece_hash;
    int n = e->model->n_params;
    for (int i = 0; i < n; i++) {
        if (!e->model->params[i].trainable || !e->piece_sum[i]) continue;
        uint64_t d = XXH3_64bits_digest(h[n + i]);
        if ((d ? d : 1) != e->piece_sum[i])
            return zt_error_set(err, ZT_ERR_IO, "%s: parameter %s's piece, as the step read it, does not match the "
                                "checksum of what was last written there: the file was changed under the run; not training on it",
                                zt_nvme_store_path(e->nvme, e->ps->file_kind), e->model->params[i].name);
    }
    return ZT_OK;
}

int zt_param_offload_seal(zt_engine *e, int i, zt_error *err) {
    if (e->piece_sum[i]) return ZT_OK; /* its writes came in order and were hashed as they went */
    size_t cap, n = (size_t)zt_plan_shard_numel(&e->plan, i, e->plan.p[i].shard);
    float *buf = zt_nvme_store_scratch(e->nvme, &cap);
    XXH3_state_t *st = ((XXH3_state_t **)e->piece_hash)[i];
    XXH3_64bits_reset(st);
    for (size_t done = 0; done < n; done += cap) {
        size_t len = n - done < cap ? n - done : cap;
        int rc = zt_param_offload_read(e, i, done, len, buf, err);
        if (rc) return rc;
        XXH3_64bits_update(st, buf, len * sizeof(float));
    }
    uint64_t d = XXH3_64bits_digest(st);
    e->piece_sum[i] = d ? d : 1;
    return ZT_OK;
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
