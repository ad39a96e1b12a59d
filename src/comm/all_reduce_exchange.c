/* all_reduce_exchange.c - the all-reduce that sends every rank's whole vector to every other rank
 * and lets each rank add all N vectors itself (all_reduce.c picks it for small and medium vectors
 * on 2 ranks, zt_ar_algo_). One round of messages instead of the reduce-scatter's and the
 * all-gather's two; on 2 ranks the same bytes on the wire (n each way), twice the additions.
 *
 * Invariants:
 *   - Element i of the result is zt_tree_sum over parts[0..N-1][i] in rank order, parts[r] being
 *     rank r's buffer: the same expression reduce-scatter + all-gather evaluates for element i
 *     (tree_sum.c: each element's tree depends only on its N inputs), so the bits equal the other
 *     algorithm's on every rank, in fp32, bf16 and fp16.
 *   - A chunk of buf is overwritten by its sum only after every send that reads it has finished
 *     (the peers read our input from buf while we sum).
 *   - Scratch: D rounds x (N-1) x one chunk, within zt_comm_scratch_bytes_for_size's figure;
 *     requests 2D(N-1), whatever n.
 */
#include "comm/comm_internal.h"

#include <string.h>

/* Request slots (D = op->xc.depth, s = 1..N-1 the exchange step):
 *   receive of chunk k from rank me-s:  (k % D) * (N-1) + s-1     (its scratch slot: the same)
 *   send of chunk k to rank me+s:       send_base + (k % D) * (N-1) + s-1
 * Each peer's chunks are posted strictly in order (MPI matches in posting order). */

static size_t xlen(const zt_comm_op *op, int k) {
    size_t lo = (size_t)k * op->xc.chunk;
    return op->xc.n - lo < op->xc.chunk ? op->xc.n - lo : op->xc.chunk;
}

static unsigned char *slot(const zt_comm_op *op, int idx) {
    return op->xc.slots + (size_t)idx * op->xc.cap * op->xc.elem;
}

/* Receives of chunk k from every peer into round k % D. */
static int post_recv(zt_comm_op *op, int k, zt_error *err) {
    zt_comm *c = op->c;
    int N = c->size, me = c->rank;
    for (int s = 1; s < N; s++) {
        int idx = (k % op->xc.depth) * (N - 1) + s - 1;
        c->info[idx].aux = k;
        int rc = zt_op_post_(op, idx, true, slot(op, idx), xlen(op, k) * op->xc.elem, (me - s + N) % N, err);
        if (rc) return rc;
    }
    return ZT_OK;
}

/* Sends of the next chunks of buf to rank d, in order, while their slots are free. */
static int pump_send(zt_comm_op *op, int d, zt_error *err) {
    zt_comm *c = op->c;
    int N = c->size, s = (d - c->rank + N) % N;
    while (c->next_send[d] < op->xc.nchunks) {
        int k = c->next_send[d];
        int idx = op->xc.send_base + (k % op->xc.depth) * (N - 1) + s - 1;
        if (c->info[idx].state == ZT_REQ_PENDING) break;
        c->info[idx].aux = k;
        int rc = zt_op_post_(op, idx, false, op->xc.buf + (size_t)k * op->xc.chunk * op->xc.elem,
                             xlen(op, k) * op->xc.elem, d, err);
        if (rc) return rc;
        c->next_send[d]++;
    }
    return ZT_OK;
}

static int xc_on_complete(zt_comm_op *op, int idx, zt_error *err) {
    zt_comm *c = op->c;
    zt_req_info *in = &c->info[idx];
    int D = op->xc.depth, d = in->peer;
    if (idx < op->xc.send_base) {
        op->xc.arrived[in->aux % D]++;
        return ZT_OK;
    }
    /* sends to d may finish out of order: sent_contig[d] counts the leading finished ones */
    int *mark = op->xc.sent_mark + (size_t)d * (size_t)D;
    mark[in->aux % D] = in->aux;
    while (op->xc.sent_contig[d] < op->xc.nchunks && mark[op->xc.sent_contig[d] % D] == op->xc.sent_contig[d])
        op->xc.sent_contig[d]++;
    return pump_send(op, d, err);
}

/* Sums every chunk whose N-1 pieces are here and whose sends have all finished, in order, and
 * re-posts its receive round for the chunk D later. */
static int xc_advance(zt_comm_op *op, zt_error *err) {
    zt_comm *c = op->c;
    int N = c->size, me = c->rank, D = op->xc.depth;
    size_t elem = op->xc.elem;
    while (op->xc.next_sum < op->xc.nchunks && op->xc.arrived[op->xc.next_sum % D] == N - 1) {
        int k = op->xc.next_sum, round = k % D;
        bool sent = true;
        for (int r = 0; r < N && sent; r++) sent = r == me || op->xc.sent_contig[r] > k;
        if (!sent) break;
        unsigned char *own = op->xc.buf + (size_t)k * op->xc.chunk * elem;
        for (int r = 0; r < N; r++) /* source r arrived at step s = me - r */
            c->parts[r] = r == me ? own : slot(op, round * (N - 1) + (me - r + N) % N - 1);
        zt_tree_sum(op->xc.dtype, own, c->parts, N, xlen(op, k));
        op->xc.arrived[round] = 0;
        op->xc.next_sum++;
        if (k + D < op->xc.nchunks) {
            int rc = post_recv(op, k + D, err);
            if (rc) return rc;
        }
    }
    if (op->xc.next_sum == op->xc.nchunks && op->pending == 0) op->done = true;
    return ZT_OK;
}

/* ----------------------------------------------------------------------------------------------
 * all_reduce_intra_exchange
 *
 * Accepts:     any N >= 1, any n, in place; fp32, bf16 or fp16 elements; chunk_bytes (a multiple
 *              of 4) cuts the vector, at most depth chunks in flight per peer and direction.
 * Returns:     buf = tree sum over ranks, the bits of all_reduce_intra_rs_ag_pipelined on every
 *              rank.
 * Limitations: (N-1) x n elements sent per rank, against the reduce-scatter + all-gather's
 *              2(N-1)/N x n: equal on 2 ranks, more beyond; N x n additions per rank instead of n.
 *              For latency-bound sizes (one round instead of two).
 *
 *   N = 2, rank 0 (a = its vector, b = rank 1's), chunks a0 a1 .. / b0 b1 ..:
 *     a_k -> rank 1          b_k <- rank 1 (into a scratch slot)
 *     once b_k is here and rank 1 has taken a_k:   a_k = a_k + b_k   (tree order: rank 0 first)
 *   rank 1 computes a_k + b_k from the same two operands: the same bits.
 * ---------------------------------------------------------------------------------------------- */
int zt_ar_exchange_post_(zt_comm_op *op, zt_dtype dtype, void *buf, size_t n, size_t chunk_bytes, int depth,
                         zt_error *err) {
    zt_comm *c = op->c;
    int N = c->size, me = c->rank;
    op->xc.dtype = dtype;
    op->xc.elem = zt_dtype_bytes(dtype);
    op->xc.buf = buf;
    op->xc.n = N > 1 ? n : 0; /* one rank: the sum is buf itself */
    op->xc.chunk = chunk_bytes / op->xc.elem;
    op->xc.nchunks = (int)zt_nchunks_(op->xc.n * op->xc.elem, chunk_bytes);
    op->xc.depth = depth;
    op->xc.cap = op->xc.n < op->xc.chunk ? op->xc.n : op->xc.chunk;
    op->xc.send_base = depth * (N - 1);
    op->xc.next_sum = 0;
    memset(op->xc.arrived, 0, sizeof op->xc.arrived);
    op->xc.sent_contig = c->iwork;
    op->xc.sent_mark = c->iwork + N;
    for (int r = 0; r < N; r++) {
        op->xc.sent_contig[r] = 0;
        c->next_send[r] = 0;
        for (int j = 0; j < depth; j++) op->xc.sent_mark[r * depth + j] = -1;
    }
    int rounds = op->xc.nchunks < depth ? op->xc.nchunks : depth;
    int rc = zt_comm_scratch_grow_(c, (size_t)rounds * (size_t)(N - 1) * op->xc.cap * op->xc.elem, err);
    if (rc) return zt_op_fail_(op, rc, err);
    op->xc.slots = (unsigned char *)c->scratch;
    op->on_complete = xc_on_complete;
    op->advance = xc_advance;
    for (int k = 0; k < rounds; k++) /* receives first, then the first sends */
        if ((rc = post_recv(op, k, err))) return rc;
    for (int s = 1; s < N; s++)
        if ((rc = pump_send(op, (me + s) % N, err))) return rc;
    return ZT_OK;
}
