/* all_reduce.c - deterministic all-reduce of float32, bf16 or fp16: the reduce-scatter of
 * reduce_scatter.c over an even block split, with an all-gather that sends each chunk as soon as
 * it is summed (in bf16/fp16 the all-gather moves the 2-byte sums: 2 bytes per element both ways).
 *
 * Invariants: the result is bit-identical on every rank (each block is summed by exactly one
 * rank, then copied) and bit-identical to calling zt_reduce_scatter_f32 and zt_all_gather_f32
 * with zt_comm_even_counts; the traffic is exactly theirs. Counted once, as ZT_COLL_ALL_REDUCE.
 */
#include "comm/comm_internal.h"

#include <string.h>

/* ---- the choice of algorithm (comm.h, zt_ar_algo) ---- */

const char *zt_ar_algo_name(int algo) {
    switch (algo) {
    case ZT_AR_ALGO_AUTO: return "auto";
    case ZT_AR_ALGO_RS_AG: return "rs_ag";
    case ZT_AR_ALGO_EXCHANGE: return "exchange";
    case ZT_AR_ALGO_SHM: return "shm";
    default: return "?";
    }
}

int zt_ar_algo_(const zt_comm *c, zt_dtype dtype, size_t n) {
    if (c->ar_algo != ZT_AR_ALGO_AUTO) return c->ar_algo;
    /* Open MPI 4.1's tuned decision for 2-3 ranks: recursive doubling / ring up to 256 KB,
     * Rabenseifner (reduce-scatter + all-gather by messages) above. Measured here on 2 ranks
     * (bench/RESULTS.md "Collectives"): through the shared segment every size beats both (how it
     * moves the bytes: zt_ar_shm_mode_ below); by messages (ranks on different nodes), one round
     * of whole vectors wins up to 64 KB. */
    size_t bytes = n * zt_dtype_bytes(dtype);
    if (c->shm_map && bytes <= c->ar_shm_max) return ZT_AR_ALGO_SHM;
    if (c->size == 2 && bytes <= c->ar_exchange_max) return ZT_AR_ALGO_EXCHANGE;
    return ZT_AR_ALGO_RS_AG;
}

/* Through the segment (next to the choice above, so the whole choice is in one place).
 * 2 ranks: the one-shot at every size (all_reduce_shm.c: its pieces and how it writes them there).
 * Measured on 2 ranks with `allreduce_bench --reps 7`, runs interleaved with the choice before it
 * (the one-shot up to 8 MiB with 256 KiB pieces and ordinary stores, the single copy above), each
 * run tagged by the round trip of a cache line between the two vCPUs (bench/RESULTS.md
 * "Collectives", streaming stores and the dies): the single copy ran 16-64 MB at 88-132% of Open
 * MPI, the one-shot with streaming stores at 143-456%; across the dies the old one-shot fell to
 * 69-107% at 8 MB, the new one held 247% and more. 3-16 ranks: the rings. */
int zt_ar_shm_mode_(const zt_comm *c) {
    return c->size == 2 ? ZT_SHM_ONESHOT : ZT_SHM_RINGS;
}

int zt_comm_set_all_reduce_stores(zt_comm *c, zt_ar_stores stores) {
    if (!c || (stores != ZT_AR_STORES_AUTO && stores != ZT_AR_STORES_CACHED && stores != ZT_AR_STORES_STREAMING))
        return ZT_ERR_USAGE;
    c->shm_stores = stores;
    return ZT_OK;
}

bool zt_comm_shm_peer_far(const zt_comm *c) { return c && c->shm_far; }

int zt_comm_set_all_reduce_algo(zt_comm *c, zt_ar_algo algo) {
    if (!c || (algo != ZT_AR_ALGO_AUTO && algo != ZT_AR_ALGO_RS_AG && algo != ZT_AR_ALGO_EXCHANGE &&
               algo != ZT_AR_ALGO_SHM) || (algo == ZT_AR_ALGO_SHM && !c->shm_map))
        return ZT_ERR_USAGE;
    c->ar_algo = algo;
    return ZT_OK;
}

zt_ar_algo zt_comm_all_reduce_algo(const zt_comm *c, zt_dtype dtype, size_t n) {
    return (zt_ar_algo)zt_ar_algo_(c, dtype, n);
}

int zt_comm_set_all_reduce_exchange_bytes(zt_comm *c, size_t bytes) {
    if (!c) return ZT_ERR_USAGE;
    c->ar_exchange_max = bytes;
    return ZT_OK;
}

size_t zt_comm_all_reduce_exchange_bytes(const zt_comm *c) { return c ? c->ar_exchange_max : 0; }

int zt_comm_set_all_reduce_shm_bytes(zt_comm *c, size_t bytes) {
    if (!c) return ZT_ERR_USAGE;
    c->ar_shm_max = bytes;
    return ZT_OK;
}

size_t zt_comm_all_reduce_shm_bytes(const zt_comm *c) { return c ? c->ar_shm_max : 0; }

void zt_comm_even_counts(size_t n, int nranks, size_t *counts) {
    if (nranks < 1) return;
    size_t q = n / (size_t)nranks, r = n % (size_t)nranks;
    for (int j = 0; j < nranks; j++) counts[j] = q + ((size_t)j < r ? 1 : 0);
}

/* Request slots: [0, ag_base) the reduce-scatter's (reduce_scatter.c), then, W = ZT_COMM_WINDOW
 * and s = 1..N-1 the exchange step:
 *   all-gather receive of chunk k of block me-s:   ag_base + (k % W) * (N-1) + s-1
 *   all-gather send of summed chunk k to me+s:     ag_base + W(N-1) + (k % W) * (N-1) + s-1 */

static size_t block(const zt_comm *c, int r) { return c->off[r + 1] - c->off[r]; }

static size_t clen(size_t n, size_t chunk, int k) {
    size_t lo = (size_t)k * chunk;
    return n - lo < chunk ? n - lo : chunk;
}

/* Receives of block r's sums, in order, each only once this rank's reduce-scatter send of the
 * same chunk has finished: the sum lands where that send read from. */
static int pump_ag_recv(zt_comm_op *op, int r, zt_error *err) {
    zt_comm *c = op->c;
    int N = c->size, s = (c->rank - r + N) % N;
    size_t nr = block(c, r), chunk = op->rs.chunk;
    while (c->next_recv[r] < op->ar.sent_contig[r] && (size_t)c->next_recv[r] * chunk < nr) {
        int k = c->next_recv[r];
        int idx = op->ar.ag_base + (k % ZT_COMM_WINDOW) * (N - 1) + s - 1;
        if (c->info[idx].state == ZT_REQ_PENDING) break;
        c->info[idx].aux = k;
        int rc = zt_op_post_tag_(op, idx, true, op->ar.buf + (c->off[r] + (size_t)k * chunk) * op->rs.elem,
                                 clen(nr, chunk, k) * op->rs.elem, r, op->ar.tag_ag, err);
        if (rc) return rc;
        c->next_recv[r]++;
    }
    return ZT_OK;
}

/* Sends of the own block's summed chunks to rank d, in order, as soon as they are summed. */
static int pump_ag_send(zt_comm_op *op, int d, zt_error *err) {
    zt_comm *c = op->c;
    int N = c->size, s = (d - c->rank + N) % N;
    size_t chunk = op->rs.chunk;
    while (op->ar.next_ag_send[d] < op->rs.next_sum) {
        int k = op->ar.next_ag_send[d];
        int idx = op->ar.ag_base + ZT_COMM_WINDOW * (N - 1) + (k % ZT_COMM_WINDOW) * (N - 1) + s - 1;
        if (c->info[idx].state == ZT_REQ_PENDING) break;
        c->info[idx].aux = k;
        int rc = zt_op_post_tag_(op, idx, false, op->rs.recv + (size_t)k * chunk * op->rs.elem,
                                 clen(op->rs.n, chunk, k) * op->rs.elem, d, op->ar.tag_ag, err);
        if (rc) return rc;
        op->ar.next_ag_send[d]++;
    }
    return ZT_OK;
}

static int ar_on_complete(zt_comm_op *op, int idx, zt_error *err) {
    zt_comm *c = op->c;
    zt_req_info *in = &c->info[idx];
    int N = c->size, D = op->rs.depth, r = in->peer;
    if (idx < op->rs.send_base) return op->ar.rs_on_complete(op, idx, err); /* a piece to sum */
    if (idx < op->ar.ag_base) { /* a reduce-scatter send to r finished */
        int *mark = op->ar.sent_mark + (size_t)r * (size_t)D;
        mark[in->aux % D] = in->aux;
        while (mark[op->ar.sent_contig[r] % D] == op->ar.sent_contig[r]) op->ar.sent_contig[r]++;
        int rc = op->ar.rs_on_complete(op, idx, err);
        return rc ? rc : pump_ag_recv(op, r, err);
    }
    if (idx < op->ar.ag_base + ZT_COMM_WINDOW * (N - 1)) return pump_ag_recv(op, r, err);
    return pump_ag_send(op, r, err);
}

static int ar_advance(zt_comm_op *op, zt_error *err) {
    zt_comm *c = op->c;
    int N = c->size, me = c->rank;
    int rc = op->ar.rs_advance(op, err); /* sums what arrived, re-posts its slots */
    if (rc) return rc;
    op->done = false;
    bool all = op->rs.next_sum == op->rs.nchunks;
    for (int s = 1; s < N; s++) {
        int d = (me + s) % N;
        if ((rc = pump_ag_send(op, d, err))) return rc;
        all = all && op->ar.next_ag_send[d] == op->rs.nchunks &&
              (size_t)c->next_recv[d] * op->rs.chunk >= block(c, d);
    }
    if (all && op->pending == 0) op->done = true;
    return ZT_OK;
}

/* ----------------------------------------------------------------------------------------------
 * all_reduce_intra_rs_ag_pipelined
 *
 * Accepts:     any N >= 1, any n (blocks of n/N or n/N+1 elements, zero when n < N), in place;
 *              fp32, bf16 or fp16 elements.
 * Returns:     buf = tree sum over ranks, identical bits on all ranks, equal to
 *              zt_reduce_scatter then an all-gather of the sums (the same sums, the same bytes).
 * Limitations: bandwidth-optimal (2(N-1)/N x n elements each way per rank) but N-1 messages per
 *              chunk: for tiny n on many ranks recursive doubling would have less latency.
 *
 *   N = 2, rank 0 (block A = its own, B = rank 1's), chunks a0 a1 .. / b0 b1 ..:
 *     reduce-scatter:  b_k -> rank 1             a_k(rank 1) -> slot, a_k = a_k + slot
 *     all-gather:      each a_k as soon as summed -> rank 1 (read from cache there)
 *                      b_k(sum) <- rank 1 into B, once our send of b_k has finished
 *   so the all-gather of chunk k overlaps the reduce-scatter of chunk k+1.. instead of
 *   waiting for the whole block (measured: bench/RESULTS.md "Collectives").
 * ---------------------------------------------------------------------------------------------- */
static int ar_start(zt_comm *c, zt_dtype dtype, void *buf, size_t n, const char *tag, zt_comm_op **out,
                    zt_error *err) {
    if (!buf && n) return zt_error_set(err, ZT_ERR_USAGE, "all_reduce on comm '%s': NULL buffer",
                                       c->name);
    int rc = zt_comm_ready_(c, "all_reduce", err);
    if (rc) return rc;
    if ((rc = zt_reduce_dtype_check_(c, "all_reduce", dtype, err))) return rc;
    int N = c->size;
    size_t elem = zt_dtype_bytes(dtype);
    zt_comm_even_counts(n, N, c->ucounts);
    size_t total;
    if ((rc = zt_counts_check_(c, "all_reduce", c->ucounts, &total, err))) return rc;
    zt_comm_op *op;
    int algo = zt_ar_algo_(c, dtype, n);
    if (algo == ZT_AR_ALGO_SHM) {
        rc = zt_op_begin_(c, ZT_COLL_ALL_REDUCE, ZT_SUB_AR_RS, "all_reduce", tag, n * elem, 0, true, false, &op, err);
        if (!rc) rc = zt_ar_shm_post_(op, dtype, buf, n, err);
        if (!rc) rc = zt_op_kick_(op, err);
        if (!rc) *out = op;
        return rc;
    }
    if (algo == ZT_AR_ALGO_EXCHANGE) {
        int D = zt_rs_depth_(N);
        rc = zt_op_begin_(c, ZT_COLL_ALL_REDUCE, ZT_SUB_AR_RS, "all_reduce", tag, n * elem, 2 * D * (N - 1), true,
                          false, &op, err);
        if (!rc) rc = zt_ar_exchange_post_(op, dtype, buf, n, c->chunk_bytes, D, err);
        if (!rc) rc = zt_op_kick_(op, err);
        if (!rc) *out = op;
        return rc;
    }
    rc = zt_op_begin_(c, ZT_COLL_ALL_REDUCE, ZT_SUB_AR_RS, "all_reduce", tag, n * elem,
                      zt_rs_nreq_(c) + 2 * ZT_COMM_WINDOW * (N - 1), true, false, &op, err);
    if (rc) return rc;
    op->ar.buf = buf;
    op->ar.tag_ag = (op->mpi_tag & ~7) | ZT_SUB_AR_AG;
    op->ar.ag_base = zt_rs_nreq_(c);
    int D = zt_rs_depth_(N);
    op->ar.sent_contig = c->iwork;
    op->ar.next_ag_send = c->iwork + N;
    op->ar.sent_mark = c->iwork + 2 * N;
    for (int r = 0; r < N; r++) {
        op->ar.sent_contig[r] = op->ar.next_ag_send[r] = c->next_recv[r] = 0;
        for (int j = 0; j < D; j++) op->ar.sent_mark[r * D + j] = -1;
    }
    if ((rc = zt_rs_post_(op, dtype, buf, op->ar.buf + c->off[c->rank] * elem, err))) return rc;
    op->ar.rs_on_complete = op->on_complete;
    op->ar.rs_advance = op->advance;
    op->on_complete = ar_on_complete;
    op->advance = ar_advance;
    if ((rc = zt_op_kick_(op, err))) return rc;
    *out = op;
    return ZT_OK;
}

int zt_all_reduce_start(zt_comm *c, zt_dtype dtype, void *buf, size_t n, const char *tag, zt_comm_op **op,
                        zt_error *err) {
    zt_error local;
    if (!err) err = &local;
    *op = NULL;
    int rc = zt_comm_enter_(c, "all_reduce", err);
    if (rc) return rc;
    rc = ar_start(c, dtype, buf, n, tag, op, err);
    zt_comm_leave_(c);
    return rc;
}

int zt_all_reduce(zt_comm *c, zt_dtype dtype, void *buf, size_t n, const char *tag, zt_error *err) {
    zt_error local;
    if (!err) err = &local;
    int rc = zt_comm_enter_(c, "all_reduce", err);
    if (rc) return rc;
    zt_comm_op *op = NULL;
    rc = ar_start(c, dtype, buf, n, tag, &op, err);
    if (!rc) rc = zt_op_wait_(op, err);
    zt_comm_leave_(c);
    return rc;
}

int zt_all_reduce_f32_start(zt_comm *c, float *buf, size_t n, const char *tag, zt_comm_op **op,
                            zt_error *err) {
    return zt_all_reduce_start(c, ZT_DTYPE_FP32, buf, n, tag, op, err);
}

int zt_all_reduce_f32(zt_comm *c, float *buf, size_t n, const char *tag, zt_error *err) {
    return zt_all_reduce(c, ZT_DTYPE_FP32, buf, n, tag, err);
}
