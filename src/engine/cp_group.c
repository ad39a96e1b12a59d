/* cp_group.c - the engine's side of context parallelism (docs/parallelism.md): the calls a unit
 * holding one part of every sequence makes to reach the other parts (zt_unit_group's cp_*: an
 * exchange of blocks with every part, a sum of blocks in a fixed tree, a shift around the ring),
 * over the mesh's cp group with point-to-point transfers (comm/p2p.h: each under the job's
 * collective deadline, so a lost peer is ZT_ERR_PEER naming the transfer).
 *
 * Invariants: nothing here allocates but the posted exchanges' slots at set-up (~100 KiB of
 * request records; the blocks and the received sums live in the unit's scratch, which the memory
 * plan counts); every sum over the parts is comm/tree_sum.c's tree over
 * the part index, so every part gets the same bits whichever adds; one shift is in flight at a
 * time; posted exchanges (allgather's and ulysses' pipelined head groups) sit in numbered slots,
 * any number in flight, each with its own tag. The transfers of one call carry one tag, and a part
 * posts its calls in the same order as every other (the units run the same code), so MPI's ordered
 * matching pairs them. */
#include "engine/engine_internal.h"
#include "comm/comm.h"
#include "comm/mesh.h"
#include "comm/p2p.h"
#include "obs/trace.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { TAG_EXCHANGE = 7100, TAG_SHIFT = 7200, TAG_POSTED = 7300 /* + the slot */ };

static zt_engine *engine_of(const zt_unit_group *g) { return g->ctx; }

static void span_end(const char *op, size_t bytes) {
    zt_trace_end_args(2, (zt_trace_arg[]){ZT_TARG_STR("op", op), ZT_TARG_NUM("bytes", (double)bytes)});
}

/* One exchange's transfers: receives first, then sends, each in part order from this part on (so
 * the pairs of a ring start at once); *moved += the bytes sent. After a failure the posted ones are
 * drained by the caller's wait (inactive ones are no-ops). */
static int post_all(zt_engine *e, int P, int me, const void *const *send, const size_t *send_bytes,
                    void *const *recv, const size_t *recv_bytes, int tag, const char *what, zt_p2p *reqs,
                    size_t *moved, zt_error *err) {
    int rc = ZT_OK;
    for (int k = 1; k < P && !rc; k++) {
        int p = (me + P - k) % P;
        if (recv_bytes[p]) rc = zt_p2p_irecv(e->cp_comm, recv[p], recv_bytes[p], p, tag, what, &reqs[p], err);
    }
    for (int k = 1; k < P && !rc; k++) {
        int p = (me + k) % P;
        if (send_bytes[p]) {
            rc = zt_p2p_isend(e->cp_comm, send[p], send_bytes[p], p, tag, what, &reqs[P + p], err);
            *moved += send_bytes[p];
        }
    }
    return rc;
}

/* Waits for every transfer of reqs (2P of them); after a failure drains the rest, keeping the first
 * error (rc: the post's status). */
static int wait_all(zt_engine *e, int P, zt_p2p *reqs, int rc, zt_error *err) {
    for (int k = 0; k < 2 * P; k++) {
        zt_error e2 = {0};
        int r2 = zt_p2p_wait(e->cp_comm, &reqs[k], rc ? &e2 : err);
        if (!rc) rc = r2;
    }
    return rc;
}

static int exchange(const zt_unit_group *g, const void *const *send, const size_t *send_bytes, void *const *recv,
                    const size_t *recv_bytes, const char *what, zt_error *err) {
    zt_engine *e = engine_of(g);
    int P = g->cp_parts, me = g->cp_chunk_of;
    zt_p2p reqs[2 * ZT_CP_MAX_PARTS];
    memset(reqs, 0, sizeof reqs);
    size_t moved = 0;
    zt_trace_begin("cp", what);
    int rc = post_all(e, P, me, send, send_bytes, recv, recv_bytes, TAG_EXCHANGE, what, reqs, &moved, err);
    rc = wait_all(e, P, reqs, rc, err);
    span_end("exchange", moved);
    return rc;
}

static int reduce_exchange(const zt_unit_group *g, const float *const *send, float *out, size_t n, float *stage,
                           const char *what, zt_error *err) {
    int P = g->cp_parts, me = g->cp_chunk_of;
    const void *sp[ZT_CP_MAX_PARTS];
    void *rp[ZT_CP_MAX_PARTS];
    size_t bytes[ZT_CP_MAX_PARTS];
    const float *parts[ZT_CP_MAX_PARTS];
    for (int p = 0; p < P; p++) {
        sp[p] = send[p], rp[p] = stage + (size_t)p * n, bytes[p] = n * sizeof(float);
        parts[p] = p == me ? send[me] : stage + (size_t)p * n;
    }
    int rc = exchange(g, sp, bytes, rp, bytes, what, err);
    if (rc) return rc;
    zt_tree_sum_f32(out, parts, P, n);
    return ZT_OK;
}

/* ---- posted exchanges: the same transfers, waited for later, several slots in flight ---------- */

typedef struct cp_posted {
    zt_p2p reqs[2 * ZT_CP_MAX_PARTS];
    bool active;
    size_t moved;
    double posted_at;                    /* omp_get_wtime() at the post */
    char what[64];
    const float *parts[ZT_CP_MAX_PARTS]; /* a reduce's blocks, summed at the wait (n floats each) */
    size_t n;
} cp_posted;

static int slot_of(zt_engine *e, int slot, bool want_active, const char *what, cp_posted **out, zt_error *err) {
    if (!e->cp_posted || slot < 0 || slot >= ZT_CP_MAX_POSTED || e->cp_posted[slot].active != want_active)
        return zt_error_set(err, ZT_ERR_INTERNAL, "%s: context-parallel exchange slot %d of %d %s", what, slot,
                            ZT_CP_MAX_POSTED, want_active ? "was not posted" : "is already in flight");
    *out = &e->cp_posted[slot];
    return ZT_OK;
}

static int exchange_post(const zt_unit_group *g, int slot, const void *const *send, const size_t *send_bytes,
                         void *const *recv, const size_t *recv_bytes, const char *what, zt_error *err) {
    zt_engine *e = engine_of(g);
    cp_posted *x = NULL;
    int rc = slot_of(e, slot, false, what, &x, err);
    if (rc) return rc;
    memset(x->reqs, 0, sizeof x->reqs);
    x->moved = 0, x->n = 0;
    snprintf(x->what, sizeof x->what, "%s", what);
    zt_trace_begin("cp", what);
    rc = post_all(e, g->cp_parts, g->cp_chunk_of, send, send_bytes, recv, recv_bytes, TAG_POSTED + slot, what,
                  x->reqs, &x->moved, err);
    span_end("post", 0);
    x->posted_at = omp_get_wtime();
    if (rc) return wait_all(e, g->cp_parts, x->reqs, rc, err); /* drained; the slot stays free */
    x->active = true;
    return ZT_OK;
}

static int exchange_wait(const zt_unit_group *g, int slot, zt_error *err) {
    zt_engine *e = engine_of(g);
    cp_posted *x = NULL;
    int rc = slot_of(e, slot, true, "context-parallel exchange wait", &x, err);
    if (rc) return rc;
    zt_trace_begin("cp", x->what);
    rc = wait_all(e, g->cp_parts, x->reqs, ZT_OK, err);
    /* in_flight_ms: from the post to the end of this wait (the computation between them included) */
    zt_trace_end_args(3, (zt_trace_arg[]){ZT_TARG_STR("op", "wait"), ZT_TARG_NUM("bytes", (double)x->moved),
                                          ZT_TARG_NUM("in_flight_ms", 1e3 * (omp_get_wtime() - x->posted_at))});
    x->active = false;
    return rc;
}

static int reduce_post(const zt_unit_group *g, int slot, const float *const *send, size_t n, float *stage,
                       const char *what, zt_error *err) {
    zt_engine *e = engine_of(g);
    int P = g->cp_parts, me = g->cp_chunk_of;
    const void *sp[ZT_CP_MAX_PARTS] = {0};
    void *rp[ZT_CP_MAX_PARTS] = {0};
    size_t bytes[ZT_CP_MAX_PARTS] = {0};
    for (int p = 0; p < P && p < ZT_CP_MAX_PARTS; p++)
        sp[p] = send[p], rp[p] = stage + (size_t)p * n, bytes[p] = n * sizeof(float);
    int rc = exchange_post(g, slot, sp, bytes, rp, bytes, what, err);
    if (rc) return rc;
    cp_posted *x = &e->cp_posted[slot];
    for (int p = 0; p < P; p++) x->parts[p] = p == me ? send[me] : stage + (size_t)p * n;
    x->n = n;
    return ZT_OK;
}

static int reduce_wait(const zt_unit_group *g, int slot, float *out, zt_error *err) {
    zt_engine *e = engine_of(g);
    int rc = exchange_wait(g, slot, err);
    if (rc) return rc;
    cp_posted *x = &e->cp_posted[slot];
    zt_tree_sum_f32(out, x->parts, g->cp_parts, x->n);
    return ZT_OK;
}

static int shift_post(const zt_unit_group *g, const void *send, void *recv, size_t bytes, const char *what,
                      zt_error *err) {
    zt_engine *e = engine_of(g);
    int P = g->cp_parts, me = g->cp_chunk_of;
    if (e->cp_shift[0].active || e->cp_shift[1].active)
        return zt_error_set(err, ZT_ERR_INTERNAL, "%s: a context-parallel shift is already in flight", what);
    zt_trace_begin("cp", what);
    int rc = zt_p2p_irecv(e->cp_comm, recv, bytes, (me + P - 1) % P, TAG_SHIFT, what, &e->cp_shift[0], err);
    if (!rc) rc = zt_p2p_isend(e->cp_comm, send, bytes, (me + 1) % P, TAG_SHIFT, what, &e->cp_shift[1], err);
    e->cp_shift_bytes = bytes;
    zt_trace_end();
    return rc;
}

static int shift_wait(const zt_unit_group *g, zt_error *err) {
    zt_engine *e = engine_of(g);
    zt_trace_begin("cp", "ring shift wait");
    int rc = zt_p2p_wait(e->cp_comm, &e->cp_shift[0], err);
    zt_error e2 = {0};
    int r2 = zt_p2p_wait(e->cp_comm, &e->cp_shift[1], rc ? &e2 : err);
    span_end("shift", e->cp_shift_bytes);
    return rc ? rc : r2;
}

int zt_engine_cp_setup(zt_engine *e, zt_error *err) {
    const zt_mesh *M = e->opt.mesh;
    const zt_model *m = e->model;
    int parts = m->n_units ? m->units[0].cp_parts : 1;
    if (parts < 1) parts = 1;
    if (M->cp != parts)
        return zt_error_set(err, ZT_ERR_USAGE, "engine: the mesh has %d context-parallel ranks but model %s runs on %d "
                            "part%s of each sequence (zt_model_set_context_parallel with the mesh's cp size)", M->cp,
                            m->name, parts, parts == 1 ? "" : "s");
    if (parts == 1) return ZT_OK;
    if (e->opt.T % 2 != 0)
        return zt_error_set(err, ZT_ERR_USAGE, "engine: context parallelism over %d ranks: each holds two equal chunks "
                            "of every sequence, so its positions (T=%d) must be even", parts, e->opt.T);
    e->cp_comm = M->cp_comm;
    if (e->group.parts < 1) e->group.parts = 1; /* no tensor parallelism: the tp calls are never made */
    e->group.cp_parts = parts;
    e->group.cp_chunk_of = M->cp_rank;
    e->group.cp_exchange = exchange;
    e->group.cp_reduce_exchange = reduce_exchange;
    e->group.cp_shift_post = shift_post;
    e->group.cp_shift_wait = shift_wait;
    e->group.cp_exchange_post = exchange_post;
    e->group.cp_exchange_wait = exchange_wait;
    e->group.cp_reduce_post = reduce_post;
    e->group.cp_reduce_wait = reduce_wait;
    if (!e->cp_posted && !(e->cp_posted = calloc(ZT_CP_MAX_POSTED, sizeof *e->cp_posted)))
        return zt_error_set(err, ZT_ERR_NOMEM, "engine: context parallelism's %d exchange slots (%zu bytes)",
                            ZT_CP_MAX_POSTED, ZT_CP_MAX_POSTED * sizeof *e->cp_posted);
    e->group.ctx = e;
    return ZT_OK;
}
