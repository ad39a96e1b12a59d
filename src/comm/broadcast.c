/* broadcast.c - broadcast of bytes down a binomial tree, pipelined by chunks: a rank forwards
 * chunk k to its children as soon as chunk k has arrived from its parent.
 *
 * Invariants: every non-root receives the buffer exactly once; a rank with k children sends it
 * k times (sum over ranks: (N-1) x bytes); the result is a copy of root's bytes.
 */
#include "comm/comm_internal.h"

#include <string.h>

/* Tree over relative ranks v = (rank - root) mod N: parent = v with its lowest set bit
 * cleared; children = v + m for powers of two m below v's lowest set bit (below N for v = 0),
 * largest first (largest subtree first). */
static void tree(int N, int me, int root, int *parent, int *children, int *nchildren) {
    int v = (me - root + N) % N;
    *parent = v == 0 ? -1 : ((v & (v - 1)) + root) % N;
    int low = 1;
    if (v == 0) while (low < N) low <<= 1;
    else low = v & -v;
    *nchildren = 0;
    for (int m = low >> 1; m >= 1; m >>= 1)
        if (v + m < N) children[(*nchildren)++] = (v + m + root) % N;
}

/* Request slots (W = ZT_COMM_WINDOW): receive of chunk k: k % W; send of chunk k to child i:
 * send_base + (k % W) * nchildren + i. A slot takes chunk k+W once chunk k through it is done. */

static size_t bc_len(const zt_comm_op *op, int k) {
    size_t lo = (size_t)k * op->bc.chunk;
    return op->bc.bytes - lo < op->bc.chunk ? op->bc.bytes - lo : op->bc.chunk;
}

static int bc_on_complete(zt_comm_op *op, int idx, zt_error *err) {
    if (idx >= op->bc.send_base) return ZT_OK;
    int k = op->c->info[idx].aux;
    op->bc.slot_chunk[idx] = k;
    while (op->bc.have < op->bc.nchunks && /* chunks arrived in order so far */
           op->bc.slot_chunk[op->bc.have % ZT_COMM_WINDOW] == op->bc.have)
        op->bc.have++;
    return ZT_OK;
}

/* Forwards every chunk that is here to every child whose slot for it is free. */
static int bc_advance(zt_comm_op *op, zt_error *err) {
    zt_comm *c = op->c;
    int rc;
    for (int i = 0; i < op->bc.nchildren; i++)
        while (op->bc.next_send[i] < op->bc.have) {
            int k = op->bc.next_send[i];
            int idx = op->bc.send_base + (k % ZT_COMM_WINDOW) * op->bc.nchildren + i;
            if (c->info[idx].state == ZT_REQ_PENDING) break;
            c->info[idx].aux = k;
            if ((rc = zt_op_post_(op, idx, false, op->bc.buf + (size_t)k * op->bc.chunk,
                                  bc_len(op, k), op->bc.children[i], err)))
                return rc;
            op->bc.next_send[i]++;
        }
    /* receives in chunk order, into slots whose previous chunk is here and counted */
    while (op->bc.parent >= 0 && op->bc.next_recv < op->bc.nchunks) {
        int j = op->bc.next_recv % ZT_COMM_WINDOW;
        if (c->info[j].state == ZT_REQ_PENDING || op->bc.slot_chunk[j] >= op->bc.have) break;
        op->bc.slot_chunk[j] = -1;
        c->info[j].aux = op->bc.next_recv;
        if ((rc = zt_op_post_(op, j, true, op->bc.buf + (size_t)op->bc.next_recv * op->bc.chunk,
                              bc_len(op, op->bc.next_recv), op->bc.parent, err)))
            return rc;
        op->bc.next_recv++;
    }
    bool sent = true;
    for (int i = 0; i < op->bc.nchildren; i++) sent = sent && op->bc.next_send[i] == op->bc.nchunks;
    if (sent && op->bc.have == op->bc.nchunks && op->pending == 0) op->done = true;
    return ZT_OK;
}

/* ----------------------------------------------------------------------------------------------
 * broadcast_intra_binomial_pipelined
 *
 * Accepts:     any N >= 1, any root, any size (0 included).
 * Returns:     buf on every rank = buf on root.
 * Limitations: ceil(log2 N) hops; the root sends ceil(log2 N) copies, so for very large
 *              buffers on many ranks a scatter + all-gather would use the links better.
 *
 *   N = 8, root 0 (relative ranks), chunk k flows on as soon as it lands (W chunks in
 *   flight per link):
 *        0 --> 4 --> 6 --> 7
 *        |     '---> 5
 *        |--> 2 --> 3
 *        '--> 1
 * ---------------------------------------------------------------------------------------------- */
int zt_broadcast_bytes(zt_comm *c, void *buf, size_t bytes, int root, const char *tag,
                       zt_error *err) {
    zt_error local;
    if (!err) err = &local;
    int rc = zt_comm_enter_(c, "broadcast", err);
    if (rc) return rc;
    if (root < 0 || root >= c->size || (!buf && bytes)) {
        zt_comm_leave_(c);
        return zt_error_set(err, ZT_ERR_USAGE, "broadcast on comm '%s': %s", c->name,
                            buf || !bytes ? "root out of range" : "NULL buffer");
    }
    int parent, children[32], nchildren;
    tree(c->size, c->rank, root, &parent, children, &nchildren);
    size_t chunk = c->chunk_bytes;
    int nch = (int)zt_nchunks_(bytes, chunk);
    zt_comm_op *op = NULL;
    rc = zt_op_begin_(c, ZT_COLL_BROADCAST, ZT_SUB_BCAST, "broadcast", tag, bytes,
                      ZT_COMM_WINDOW * (1 + nchildren), true, false, &op, err);
    if (rc) goto done;
    op->bc.buf = buf;
    op->bc.bytes = bytes;
    op->bc.chunk = chunk;
    op->bc.nchunks = nch;
    op->bc.parent = parent;
    op->bc.nchildren = nchildren;
    memcpy(op->bc.children, children, sizeof children);
    op->bc.have = parent < 0 ? nch : 0; /* the root has everything */
    for (int j = 0; j < ZT_COMM_WINDOW; j++) op->bc.slot_chunk[j] = -1;
    memset(op->bc.next_send, 0, sizeof op->bc.next_send);
    op->bc.next_recv = 0;
    op->bc.send_base = ZT_COMM_WINDOW;
    op->on_complete = bc_on_complete;
    op->advance = bc_advance; /* the kick posts the first receives (and the root's sends) */
    if ((rc = zt_op_kick_(op, err))) goto done;
    rc = zt_op_wait_(op, err);
done:
    zt_comm_leave_(c);
    return rc;
}
