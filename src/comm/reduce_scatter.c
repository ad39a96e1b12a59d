/* reduce_scatter.c - deterministic reduce-scatter of float32, bf16 or fp16 blocks: MPI moves the
 * blocks, zt_tree_sum (f32, bf16, fp16) adds them in rank order. Also the block bookkeeping shared with all_gather.c
 * and all_reduce.c (counts check, chunking, the comm's scratch).
 *
 * Invariants:
 *   - Bytes on the wire are exactly the blocks that leave this rank, cut at chunk boundaries
 *     (no headers, no padding); empty blocks send no message.
 *   - recv's bits depend only on the inputs and N (never on timing, chunk size or arrival
 *     order): each chunk is summed once all N contributions to it are here, by the tree.
 */
#include "comm/comm_internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

size_t zt_nchunks_(size_t bytes, size_t chunk_bytes) {
    return bytes == 0 ? 0 : (bytes - 1) / chunk_bytes + 1;
}

int zt_comm_scratch_grow_(zt_comm *c, size_t bytes, zt_error *err) {
    if (bytes <= c->scratch_bytes) return ZT_OK;
    void *p = NULL;
    if (posix_memalign(&p, 64, bytes) != 0 || !p) {
        char s[32];
        zt_fmt_bytes_(bytes, s, sizeof s);
        return zt_error_set(err, ZT_ERR_NOMEM, "comm '%s' on rank %d: out of memory for %s of "
                            "reduce-scatter scratch", c->name, c->rank, s);
    }
    free(c->scratch);
    c->scratch = p;
    c->scratch_bytes = bytes;
    return ZT_OK;
}

int zt_counts_check_(zt_comm *c, const char *name, const size_t *counts, size_t *total,
                     zt_error *err) {
    if (!counts) return zt_error_set(err, ZT_ERR_USAGE, "%s on comm '%s': counts is NULL", name,
                                     c->name);
    size_t t = 0;
    c->off[0] = 0;
    for (int j = 0; j < c->size; j++) {
        if (counts[j] > (SIZE_MAX / 16) - t)
            return zt_error_set(err, ZT_ERR_USAGE, "%s on comm '%s': counts overflow at block %d",
                                name, c->name, j);
        t += counts[j];
        c->off[j + 1] = t;
    }
    *total = t;
    return ZT_OK;
}

static size_t chunk_len(size_t n, size_t chunk, int k) {
    size_t lo = (size_t)k * chunk;
    return n - lo < chunk ? n - lo : chunk;
}

int zt_rs_depth_(int nranks) {
    int d = nranks > 1 ? ZT_RS_MAX_DEPTH / (nranks - 1) : ZT_RS_MAX_DEPTH;
    return d < 2 ? 2 : d > ZT_RS_MAX_DEPTH ? ZT_RS_MAX_DEPTH : d;
}

int zt_rs_nreq_(const zt_comm *c) { return 2 * zt_rs_depth_(c->size) * (c->size - 1); }

/* A block of b bytes (any dtype: chunk_bytes is a multiple of 4, so a chunk is a whole number
 * of elements of either) is cut into ceil(b / chunk_bytes) chunks of at most chunk_bytes. */
size_t zt_comm_scratch_bytes_for_size(int nranks, size_t chunk_bytes, size_t max_block_bytes) {
    if (nranks < 2) return 0;
    size_t nch = zt_nchunks_(max_block_bytes, chunk_bytes);
    size_t cap = max_block_bytes < chunk_bytes ? max_block_bytes : chunk_bytes;
    size_t depth = (size_t)zt_rs_depth_(nranks), rounds = nch < depth ? nch : depth;
    return rounds * (size_t)(nranks - 1) * cap;
}

size_t zt_comm_scratch_bytes_for(const zt_comm *c, size_t max_block) {
    return zt_comm_scratch_bytes_for_size(c->size, c->chunk_bytes, max_block * sizeof(float));
}

int zt_reduce_dtype_check_(const zt_comm *c, const char *name, zt_dtype dtype, zt_error *err) {
    if (dtype == ZT_DTYPE_FP32 || dtype == ZT_DTYPE_BF16 || dtype == ZT_DTYPE_FP16) return ZT_OK;
    return zt_error_set(err, ZT_ERR_USAGE, "%s on comm '%s': cannot sum elements of dtype %d (fp32, bf16 or fp16)",
                        name, c->name, (int)dtype);
}

size_t zt_comm_default_chunk_bytes(void) {
    zt_comm_settings set;
    zt_error ignore;
    return zt_comm_env_(&set, &ignore) == ZT_OK ? set.chunk : ZT_COMM_DEFAULT_CHUNK;
}

int zt_comm_reserve_scratch(zt_comm *c, size_t bytes, zt_error *err) {
    zt_error local;
    if (!err) err = &local;
    int rc = zt_comm_enter_(c, "zt_comm_reserve_scratch", err);
    if (rc) return rc;
    rc = zt_comm_scratch_grow_(c, bytes, err);
    zt_comm_leave_(c);
    return rc;
}

size_t zt_comm_scratch_bytes(const zt_comm *c) { return c->scratch_bytes; }

/* Request slots (D = op->rs.depth, s = 1..N-1 the exchange step):
 *   receive of chunk k from rank me-s:  (k % D) * (N-1) + s-1     (its scratch slot: the same)
 *   send of chunk k to rank me+s:       send_base + (k % D) * (N-1) + s-1
 * A slot takes chunk k+D once chunk k is done with it (summed / sent). Each peer's chunks are
 * posted strictly in order (rounds of receives in summing order, sends by next_send): MPI
 * matches two ranks' messages in posting order, and completions may come in any order. */

static int post_recv(zt_comm_op *op, int k, zt_error *err) {
    zt_comm *c = op->c;
    int N = c->size, me = c->rank;
    size_t cap = op->rs.n < op->rs.chunk ? op->rs.n : op->rs.chunk;
    size_t len = chunk_len(op->rs.n, op->rs.chunk, k);
    for (int s = 1; s < N; s++) {
        int idx = (k % op->rs.depth) * (N - 1) + s - 1;
        c->info[idx].aux = k;
        int rc = zt_op_post_(op, idx, true, op->rs.slots + (size_t)idx * cap * op->rs.elem,
                             len * op->rs.elem, (me - s + N) % N, err);
        if (rc) return rc;
    }
    return ZT_OK;
}

/* Posts block d's next chunks to rank d, in order, while their slots are free. */
static int pump_send(zt_comm_op *op, int d, zt_error *err) {
    zt_comm *c = op->c;
    int N = c->size, s = (d - c->rank + N) % N;
    size_t nd = c->off[d + 1] - c->off[d];
    while ((size_t)c->next_send[d] * op->rs.chunk < nd) {
        int k = c->next_send[d];
        int idx = op->rs.send_base + (k % op->rs.depth) * (N - 1) + s - 1;
        if (c->info[idx].state == ZT_REQ_PENDING) break;
        c->info[idx].aux = k;
        int rc = zt_op_post_(op, idx, false,
                             (void *)(op->rs.send + (c->off[d] + (size_t)k * op->rs.chunk) * op->rs.elem),
                             chunk_len(nd, op->rs.chunk, k) * op->rs.elem, d, err);
        if (rc) return rc;
        c->next_send[d]++;
    }
    return ZT_OK;
}

static int rs_on_complete(zt_comm_op *op, int idx, zt_error *err) {
    zt_req_info *in = &op->c->info[idx];
    if (idx < op->rs.send_base) {
        op->rs.arrived[in->aux % op->rs.depth]++;
        return ZT_OK;
    }
    return pump_send(op, in->peer, err);
}

/* Sums every chunk whose N-1 pieces are here and re-posts its slots for the chunk D later. */
static int rs_advance(zt_comm_op *op, zt_error *err) {
    zt_comm *c = op->c;
    int N = c->size, me = c->rank;
    size_t cap = op->rs.n < op->rs.chunk ? op->rs.n : op->rs.chunk, elem = op->rs.elem;
    while (op->rs.next_sum < op->rs.nchunks &&
           op->rs.arrived[op->rs.next_sum % op->rs.depth] == N - 1) {
        int k = op->rs.next_sum, round = k % op->rs.depth;
        size_t lo = (size_t)k * op->rs.chunk, len = chunk_len(op->rs.n, op->rs.chunk, k);
        for (int r = 0; r < N; r++) /* source r arrived at step s = me - r */
            c->parts[r] = r == me ? op->rs.own + lo * elem
                                  : op->rs.slots + ((size_t)round * (size_t)(N - 1) +
                                                    (size_t)((me - r + N) % N - 1)) * cap * elem;
        zt_tree_sum(op->rs.dtype, op->rs.recv + lo * elem, c->parts, N, len);
        op->rs.arrived[round] = 0;
        op->rs.next_sum++;
        if (k + op->rs.depth < op->rs.nchunks) {
            int rc = post_recv(op, k + op->rs.depth, err);
            if (rc) return rc;
        }
    }
    if (op->rs.next_sum == op->rs.nchunks && op->pending == 0) op->done = true;
    return ZT_OK;
}

int zt_rs_post_(zt_comm_op *op, zt_dtype dtype, const void *send, void *recv, zt_error *err) {
    zt_comm *c = op->c;
    int N = c->size, me = c->rank;
    op->rs.dtype = dtype;
    op->rs.elem = zt_dtype_bytes(dtype);
    op->rs.send = send;
    op->rs.own = op->rs.send ? op->rs.send + c->off[me] * op->rs.elem : NULL;
    op->rs.recv = recv;
    op->rs.n = c->off[me + 1] - c->off[me];
    op->rs.chunk = c->chunk_bytes / op->rs.elem;
    op->rs.nchunks = (int)zt_nchunks_(op->rs.n, op->rs.chunk);
    op->rs.next_sum = 0;
    op->rs.depth = zt_rs_depth_(N);
    op->rs.send_base = op->rs.depth * (N - 1);
    memset(op->rs.arrived, 0, sizeof op->rs.arrived);
    int rc = zt_comm_scratch_grow_(c, zt_comm_scratch_bytes_for_size(N, c->chunk_bytes, op->rs.n * op->rs.elem),
                                   err);
    if (rc) return zt_op_fail_(op, rc, err);
    op->rs.slots = (unsigned char *)c->scratch;
    op->on_complete = rs_on_complete;
    op->advance = rs_advance;
    /* receives first, so the first chunks find a posted buffer; then the first sends */
    for (int k = 0; k < op->rs.nchunks && k < op->rs.depth; k++)
        if ((rc = post_recv(op, k, err))) return rc;
    for (int d = 0; d < N; d++) c->next_send[d] = 0;
    for (int s = 1; s < N; s++)
        if ((rc = pump_send(op, (me + s) % N, err))) return rc;
    return ZT_OK;
}

/* ----------------------------------------------------------------------------------------------
 * reduce_scatter_intra_pairwise
 *
 * Accepts:     any N >= 1, any counts (uneven, zero), recv == own block of send (in place);
 *              fp32, bf16 or fp16 elements (2-byte ones: a chunk of chunk_bytes holds twice as many).
 * Returns:     recv = tree sum over r of block `me` of rank r (bf16, fp16: every partial sum
 *              rounded, zt_tree_sum); the same bits for any timing.
 * Limitations: N-1 messages (per chunk) in and out of every rank at once: latency-bound for
 *              tiny blocks on large N (a recursive-halving variant would be the choice there,
 *              but it adds partial sums in an order that depends on N's factorization).
 *
 *   N = 4, rank 1's view; r.j = block j of rank r's send; posted together:
 *     s=1:  send 1.2 -> rank 2    recv 0.1 <- rank 0   (slot 0)
 *     s=2:  send 1.3 -> rank 3    recv 3.1 <- rank 3   (slot 1)
 *     s=3:  send 1.0 -> rank 0    recv 2.1 <- rank 2   (slot 2)
 *     recv = (0.1 + 1.1) + (2.1 + 3.1)         tree over source rank; 1.1 read in place
 *
 *   Blocks longer than a chunk go chunk by chunk through D rounds of slots (D = 8/(N-1) in
 *     [2, 8], zt_rs_depth_): chunk k's N-1 pieces land in round k%D; when all are in, chunk k
 *     is summed into recv and round k%D is re-posted for chunk k+D. Sends are windowed the
 *     same way (chunk k+D to rank d leaves when chunk k to d has been taken). So scratch stays
 *     D x (N-1) x chunk_bytes (~8 chunks) and requests 2D(N-1) however large the bucket,
 *     summing chunk k (from cache) overlaps receiving the next ones, and no receiver is
 *     flooded with early messages.
 * ---------------------------------------------------------------------------------------------- */
static int rs_start(zt_comm *c, zt_dtype dtype, const void *send, void *recv, const size_t *counts,
                    const char *tag, zt_comm_op **out, zt_error *err) {
    size_t total = 0; /* set by zt_counts_check_ on success */
    int rc = zt_comm_ready_(c, "reduce_scatter", err);
    if (rc) return rc;
    if ((rc = zt_reduce_dtype_check_(c, "reduce_scatter", dtype, err))) return rc;
    rc = zt_counts_check_(c, "reduce_scatter", counts, &total, err);
    if (rc) return rc;
    size_t n = counts[c->rank], elem = zt_dtype_bytes(dtype);
    if ((!send && total) || (!recv && n))
        return zt_error_set(err, ZT_ERR_USAGE, "reduce_scatter on comm '%s': NULL buffer",
                            c->name);
    const unsigned char *s0 = send, *r0 = recv;
    const unsigned char *own = s0 ? s0 + c->off[c->rank] * elem : NULL;
    if (n && r0 != own && r0 < s0 + total * elem && s0 < r0 + n * elem)
        return zt_error_set(err, ZT_ERR_USAGE,
                            "reduce_scatter on comm '%s': recv overlaps send other than as the "
                            "own block",
                            c->name);
    zt_comm_op *op = NULL;
    rc = zt_op_begin_(c, ZT_COLL_REDUCE_SCATTER, ZT_SUB_RS, "reduce_scatter", tag,
                      total * elem, zt_rs_nreq_(c), true, false, &op, err);
    if (rc) return rc;
    if ((rc = zt_rs_post_(op, dtype, send, recv, err))) return rc;
    if ((rc = zt_op_kick_(op, err))) return rc;
    *out = op;
    return ZT_OK;
}

int zt_reduce_scatter_start(zt_comm *c, zt_dtype dtype, const void *send, void *recv, const size_t *counts,
                            const char *tag, zt_comm_op **op, zt_error *err) {
    zt_error local;
    if (!err) err = &local;
    *op = NULL;
    int rc = zt_comm_enter_(c, "reduce_scatter", err);
    if (rc) return rc;
    rc = rs_start(c, dtype, send, recv, counts, tag, op, err);
    zt_comm_leave_(c);
    return rc;
}

int zt_reduce_scatter(zt_comm *c, zt_dtype dtype, const void *send, void *recv, const size_t *counts,
                      const char *tag, zt_error *err) {
    zt_error local;
    if (!err) err = &local;
    int rc = zt_comm_enter_(c, "reduce_scatter", err);
    if (rc) return rc;
    zt_comm_op *op = NULL;
    rc = rs_start(c, dtype, send, recv, counts, tag, &op, err);
    if (!rc) rc = zt_op_wait_(op, err);
    zt_comm_leave_(c);
    return rc;
}

int zt_reduce_scatter_f32_start(zt_comm *c, const float *send, float *recv, const size_t *counts,
                                const char *tag, zt_comm_op **op, zt_error *err) {
    return zt_reduce_scatter_start(c, ZT_DTYPE_FP32, send, recv, counts, tag, op, err);
}

int zt_reduce_scatter_f32(zt_comm *c, const float *send, float *recv, const size_t *counts,
                          const char *tag, zt_error *err) {
    return zt_reduce_scatter(c, ZT_DTYPE_FP32, send, recv, counts, tag, err);
}
