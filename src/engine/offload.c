/* offload.c - the engine's use of the NVMe tier (src/offload): which optimizer states go to files
 * (AdamW's exp_avg and exp_avg_sq, SGD's momentum: the "state kinds", over this rank's state
 * layout, i.e. the full layout for ddp and its shard layout otherwise) and, with parameter
 * offload, zero3's parameter pieces as one more kind (param_offload.c; the shard layout is the
 * state layout there), the run directory name all ranks share, and element-range access to the
 * states that works the same whether they are in memory or in files (checkpoints use it).
 *
 * bf16-low keeps its moments as bf16 in memory (e->state_bf16; e->m, e->v NULL): read and write
 * widen and round them, and the step updates them through fp32 chunks (step.c).
 *
 * Invariants: with a store, e->m and e->v are NULL and e->optim_store holds e->state_kinds kinds
 * of e->state_floats elements; without one, kind 0 is e->m and kind 1 is e->v. Every rank of the
 * world opens its store in zt_engine_create and all agree on the outcome, so a rank whose disk
 * fails does not leave the others waiting in the first collective. */
#include "engine/engine_internal.h"
#include "core/env.h"
#include "comm/comm.h"
#include "offload/nvme_store.h"
#include "kernels/kernels.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *const KIND_FILES[2][2] = {{"exp_avg", "exp_avg_sq"}, {"momentum", ""}};

int zt_engine_offload_open(zt_engine *e, zt_error *err) {
    const zt_offload_options *o = &e->opt.offload;
    int rc = ZT_OK;
    bool optim = e->offload_dir && e->state_kinds > 0; /* SGD without momentum: no state to offload */
    bool params = e->param_dir != NULL;
    if (!optim && !params) return ZT_OK;
    /* the run directory: named by rank 0 (time and pid), the same on every rank */
    char run[64] = {0};
    zt_comm *job = zt_engine_job_comm(e); /* every rank of the job: tensor-parallel parts have files too */
    int me = zt_engine_job_rank(e);
    if (me == 0) {
        time_t t = time(NULL);
        struct tm tm;
        localtime_r(&t, &tm);
        char stamp[32];
        strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
        snprintf(run, sizeof run, "zerotrain-%s-%ld", stamp, (long)getpid());
    }
    if (job && (rc = zt_broadcast_bytes(job, run, sizeof run, 0, "offload run name", err)))
        return rc;
    run[sizeof run - 1] = '\0';
    zt_nvme_store_options so = {.dir = optim ? e->offload_dir : e->param_dir, .run = run, .rank = me,
                                .nkinds = optim ? e->state_kinds : 0, .floats = e->state_floats,
                                .buffer_count = o->buffer_count, .buffer_bytes = o->buffer_bytes,
                                .io_threads = o->io_threads, .buffered = o->buffered};
    const char *direct = zt_env(ZT_ENV_OFFLOAD_DIRECT); /* ZT_OFFLOAD_DIRECT=0: page-cache I/O (comparisons) */
    if (direct && !strcmp(direct, "0")) so.buffered = true;
    bool adam = zt_optim_two_moments(e->opt.optim.kind);
    for (int k = 0; k < so.nkinds; k++) so.kinds[k] = KIND_FILES[adam ? 0 : 1][k];
    if (params) { /* the pieces: one more kind, in their own directory */
        zt_store_set_file_kind(e, so.nkinds);
        so.kinds[so.nkinds] = "param";
        so.kind_dirs[so.nkinds++] = e->param_dir;
    }
    if (e->grad_offload) { /* the reduced gradient pieces: the optimizer's input, beside its state */
        e->grad_kind = so.nkinds;
        so.read_only[so.nkinds] = true; /* the step reads them; backward writes them */
        so.kinds[so.nkinds++] = "grad";
    }
    zt_error mine = {0};
    rc = zt_nvme_store_create(&so, &e->nvme, &mine);
    if (e->nvme) /* the staging buffers are the optimizer class's bytes (docs/memory.md) */
        zt_engine_account(e, &e->mem.optimizer, zt_nvme_store_memory(e->nvme), true);
    if (optim) e->optim_store = e->nvme;
    if (job) { /* everyone learns whether every rank has its files */
        int ok = rc == ZT_OK, arc = zt_all_reduce_and_int(job, &ok, "offload files", err);
        if (arc) return arc;
        if (!ok && !rc)
            return zt_error_set(err, ZT_ERR_IO, "offload: another rank could not create its files under %s/%s "
                                "(its own message says why)", so.dir, run);
    }
    if (rc) {
        *err = mine;
        return zt_error_prefix(err, "rank %d: %s nvme", me, optim ? "memory.offload_optimizer" : "memory.offload_param");
    }
    rc = params ? zt_param_offload_setup(e, err) : ZT_OK;
    return !rc && e->grad_offload ? zt_grad_offload_setup(e, err) : rc;
}

void zt_engine_offload_close(zt_engine *e) {
    zt_param_offload_free(e);
    zt_grad_offload_free(e);
    if (e->nvme) zt_engine_account(e, &e->mem.optimizer, zt_nvme_store_memory(e->nvme), false);
    zt_nvme_store_free(e->nvme);
    e->nvme = e->optim_store = NULL;
}

int zt_engine_state_zero(zt_engine *e, zt_error *err) {
    if (e->optim_store) { /* the moments' kinds only: the pieces' kind holds the parameters */
        for (int k = 0; k < e->state_kinds; k++) {
            int rc = zt_nvme_store_zero_kind(e->optim_store, k, err);
            if (rc) return rc;
        }
        return ZT_OK;
    }
    for (int k = 0; k < 2; k++)
        if (e->state_bf16[k]) memset(e->state_bf16[k], 0, e->state_floats * sizeof(uint16_t));
    if (e->m) memset(e->m, 0, e->state_floats * sizeof(float));
    if (e->v) memset(e->v, 0, e->state_floats * sizeof(float));
    return ZT_OK;
}

float *zt_engine_state_ptr(zt_engine *e, int k) {
    if (e->optim_store || k < 0 || k >= e->state_kinds) return NULL;
    return k == 0 ? e->m : e->v;
}

int zt_engine_state_read(zt_engine *e, int k, size_t begin, size_t n, float *dst, zt_error *err) {
    if (e->optim_store) return zt_nvme_store_read(e->optim_store, k, begin, n, dst, err);
    if (e->state_bf16[0] && k >= 0 && k < e->state_kinds) { /* exact: bf16 widens to fp32 */
        zt_bf16_to_f32(dst, e->state_bf16[k] + begin, n);
        return ZT_OK;
    }
    float *p = zt_engine_state_ptr(e, k);
    if (!p) return zt_error_set(err, ZT_ERR_INTERNAL, "engine: no optimizer state kind %d", k);
    memcpy(dst, p + begin, n * sizeof(float));
    return ZT_OK;
}

int zt_engine_state_write(zt_engine *e, int k, size_t begin, size_t n, const float *src, zt_error *err) {
    if (e->optim_store) return zt_nvme_store_write(e->optim_store, k, begin, n, src, err);
    if (e->state_bf16[0] && k >= 0 && k < e->state_kinds) { /* nearest-even: exact for bf16 values */
        zt_f32_to_bf16(e->state_bf16[k] + begin, src, n);
        return ZT_OK;
    }
    float *p = zt_engine_state_ptr(e, k);
    if (!p) return zt_error_set(err, ZT_ERR_INTERNAL, "engine: no optimizer state kind %d", k);
    memcpy(p + begin, src, n * sizeof(float));
    return ZT_OK;
}

int zt_engine_offload_agree(zt_engine *e, int rc, zt_error *err) {
    zt_comm *job = zt_engine_job_comm(e); /* the tensor-parallel parts stop together too */
    int W = zt_engine_job_size(e);
    if (!job) return rc;
    double mine = rc, small[256];
    double *st = W <= 256 ? small : malloc((size_t)W * sizeof *st);
    zt_error gerr;
    int grc = st ? zt_all_gather_f64(job, &mine, st, 1, "offload status", &gerr)
                 : zt_error_set(&gerr, ZT_ERR_NOMEM, "offload: out of memory");
    int bad = -1, bad_code = ZT_OK;
    for (int r = 0; !grc && r < W && bad < 0; r++)
        if (st[r] != 0) bad = r, bad_code = (int)st[r];
    if (st != small) free(st);
    if (rc) return rc; /* this rank's own error says more */
    if (grc) {
        *err = gerr;
        return grc;
    }
    if (bad >= 0)
        return zt_error_set(err, bad_code, "step %llu: rank %d's offloaded optimizer update failed (its message "
                            "says why); this rank stops too", (unsigned long long)e->step, bad);
    return ZT_OK;
}

float *zt_engine_state_bounce(zt_engine *e, size_t *floats) {
    if (e->state_bf16[0]) { /* idle outside the step: every kind's chunk */
        size_t chunk = e->state_floats < ZT_STATE_CHUNK ? (e->state_floats ? e->state_floats : 1) : ZT_STATE_CHUNK;
        *floats = chunk * (size_t)e->state_kinds;
        return e->state_tmp;
    }
    if (!e->optim_store) {
        *floats = 0;
        return NULL;
    }
    return zt_nvme_store_scratch(e->optim_store, floats);
}

const char *zt_engine_offload_describe(const zt_engine *e) {
    return e->nvme ? zt_nvme_store_describe(e->nvme) : "";
}

void zt_engine_offload_stats(zt_engine *e, zt_offload_stats *out, bool reset) {
    memset(out, 0, sizeof *out);
    if (!e->nvme) return;
    zt_nvme_stats st;
    zt_nvme_store_stats(e->nvme, &st, reset);
    *out = (zt_offload_stats){.read_bytes = st.read_bytes, .write_bytes = st.write_bytes, .stream_s = st.stream_s,
                              .wait_s = st.wait_s, .update_s = st.update_s, .streams = st.streams,
                              .gather_read_bytes = st.span_read_bytes, .gather_wait_s = st.span_wait_s,
                              .grad_write_wait_s = st.span_write_wait_s};
}
