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

static int bc_post_sends(zt_comm_op *op, int k, zt_error *err) {
    size_t lo = (size_t)k * op->bc.chunk;
    size_t len = op->bc.bytes - lo < op->bc.chunk ? op->bc.bytes - lo : op->bc.chunk;
    for (int i = 0; i < op->bc.nchildren; i++) {
        int rc = zt_op_post_(op, op->bc.send_base + k * op->bc.nchildren + i, false,
                             op->bc.buf + lo, len, op->bc.children[i], err);
        if (rc) return rc;
    }
    return ZT_OK;
}

static int bc_on_complete(zt_comm_op *op, int idx, zt_error *err) {
    if (idx < op->bc.send_base) return bc_post_sends(op, op->c->info[idx].aux, err);
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
 *   N = 8, root 0 (relative ranks), chunk k flows as soon as it lands:
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
    int nrecv = parent >= 0 ? nch : 0;
    zt_comm_op *op = NULL;
    rc = zt_op_begin_(c, ZT_COLL_BROADCAST, ZT_SUB_BCAST, "broadcast", tag, bytes,
                      nrecv + nch * nchildren, true, false, &op, err);
    if (rc) goto done;
    op->bc.buf = buf;
    op->bc.bytes = bytes;
    op->bc.chunk = chunk;
    op->bc.nchunks = nch;
    op->bc.parent = parent;
    op->bc.nchildren = nchildren;
    memcpy(op->bc.children, children, sizeof children);
    op->bc.send_base = nrecv;
    op->on_complete = bc_on_complete;
    op->advance = zt_advance_when_idle_;
    for (int k = 0; k < nrecv; k++) {
        size_t lo = (size_t)k * chunk, len = bytes - lo < chunk ? bytes - lo : chunk;
        c->info[k].aux = k;
        if ((rc = zt_op_post_(op, k, true, (unsigned char *)buf + lo, len, parent, err))) goto done;
    }
    if (parent < 0)
        for (int k = 0; k < nch; k++)
            if ((rc = bc_post_sends(op, k, err))) goto done;
    if ((rc = zt_op_kick_(op, err))) goto done;
    rc = zt_op_wait_(op, err);
done:
    zt_comm_leave_(c);
    return rc;
}
