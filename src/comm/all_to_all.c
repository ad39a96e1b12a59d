/* all_to_all.c - the all-to-all of variable-sized blocks (MPI_Alltoallv's job): expert
 * parallelism's dispatch of tokens to the experts' owners and their combine back (DeepSpeed-MoE,
 * Megatron-LM, torchtitan), and the same two in reverse in backward.
 *
 *   phase 1 (ZT_COLL_SMALL, "all_to_all counts"): every rank sends every other the size of the
 *     block it has for it (one uint64_t per pair), so a receiver learns what arrives before it
 *     posts; a size over the receiver's capacity is ZT_ERR_MISMATCH naming both numbers
 *   phase 2 (ZT_COLL_ALL_TO_ALL): every block moved as one message per pair (receives posted
 *     first, then sends, each in rank order from this rank on, so the pairs of a round start
 *     together); the own block is a memmove.
 *
 * Invariants: bytes are moved, never added, so the result does not depend on the order messages
 * arrive in; empty blocks send nothing; both phases wait in deadline.c's one loop (a silent peer is
 * ZT_ERR_PEER naming the collective), count in the comm's counters and comm log, and appear in the
 * trace as the other collectives do (deadline.c's op_finish). One thread per comm, as every
 * collective. Blocks are at most INT_MAX bytes (one MPI message each).
 */
#include "comm/comm_internal.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* Posts receives of rsize[p] bytes into rbuf[p] and sends of ssize[p] bytes from sbuf[p] for every
 * peer p != me, then waits (the op begun by the caller). */
static int exchange(zt_comm_op *op, const void *const *sbuf, const size_t *ssize, void *const *rbuf,
                    const size_t *rsize, zt_error *err) {
    zt_comm *c = op->c;
    int N = c->size, me = c->rank, rc;
    op->advance = zt_advance_when_idle_;
    for (int s = 1; s < N; s++) {
        int p = (me + N - s) % N;
        if (rsize[p] && (rc = zt_op_post_(op, s - 1, true, rbuf[p], rsize[p], p, err))) return rc;
    }
    for (int s = 1; s < N; s++) {
        int p = (me + s) % N;
        if (ssize[p] && (rc = zt_op_post_(op, N - 1 + s - 1, false, (void *)sbuf[p], ssize[p], p, err))) return rc;
    }
    if ((rc = zt_op_kick_(op, err))) return rc;
    return zt_op_wait_(op, err);
}

static int a2a(zt_comm *c, const void *const *send, const size_t *send_bytes, void *const *recv,
               const size_t *recv_cap, size_t *recv_bytes, const char *tag, zt_error *err) {
    int N = c->size, me = c->rank, rc = zt_comm_ready_(c, "all_to_all", err);
    if (rc) return rc;
    uint64_t *mine = malloc(2 * (size_t)N * sizeof *mine), *theirs = mine ? mine + N : NULL;
    const void **sp = malloc((size_t)N * sizeof *sp);
    void **rp = malloc((size_t)N * sizeof *rp);
    size_t *ones = malloc(2 * (size_t)N * sizeof *ones), *eights = ones ? ones + N : NULL;
    if (!mine || !sp || !rp || !ones) {
        rc = zt_error_set(err, ZT_ERR_NOMEM, "all_to_all '%s' on comm '%s': out of memory", tag ? tag : "", c->name);
        goto out;
    }
    size_t sent = 0;
    for (int p = 0; p < N; p++) {
        if (send_bytes[p] > (size_t)INT_MAX) {
            rc = zt_error_set(err, ZT_ERR_USAGE, "all_to_all '%s' on comm '%s': a block of %zu bytes for rank %d (at "
                              "most %d in one message)", tag ? tag : "", c->name, send_bytes[p], p, INT_MAX);
            goto out;
        }
        mine[p] = send_bytes[p];
        sp[p] = &mine[p];
        rp[p] = &theirs[p];
        eights[p] = sizeof(uint64_t);
        if (p != me) sent += send_bytes[p];
    }
    zt_comm_op *op = NULL;
    if ((rc = zt_op_begin_(c, ZT_COLL_SMALL, ZT_SUB_A2A, "all_to_all counts", tag, (size_t)N * sizeof(uint64_t),
                           2 * (N - 1), true, false, &op, err)) ||
        (rc = exchange(op, sp, eights, rp, eights, err)))
        goto out;
    theirs[me] = mine[me];
    for (int p = 0; p < N; p++) {
        if (theirs[p] > recv_cap[p]) {
            rc = zt_error_set(err, ZT_ERR_MISMATCH, "all_to_all '%s' on comm '%s': rank %d sends %llu bytes, this rank "
                              "(%d) has room for %zu", tag ? tag : "", c->name, p, (unsigned long long)theirs[p], me,
                              recv_cap[p]);
            goto out;
        }
        recv_bytes[p] = ones[p] = (size_t)theirs[p];
    }
    if (send_bytes[me]) memmove(recv[me], send[me], send_bytes[me]);
    if (N > 1 && (rc = zt_op_begin_(c, ZT_COLL_ALL_TO_ALL, ZT_SUB_A2A, "all_to_all", tag, sent, 2 * (N - 1), true,
                                    false, &op, err)) == ZT_OK)
        rc = exchange(op, send, send_bytes, recv, ones, err);
out:
    free(mine);
    free(sp);
    free(rp);
    free(ones);
    return rc;
}

int zt_all_to_allv(zt_comm *c, const void *const *send, const size_t *send_bytes, void *const *recv,
                   const size_t *recv_cap, size_t *recv_bytes, const char *tag, zt_error *err) {
    zt_error local;
    if (!err) err = &local;
    int rc = zt_comm_enter_(c, "all_to_all", err);
    if (rc) return rc;
    rc = a2a(c, send, send_bytes, recv, recv_cap, recv_bytes, tag, err);
    zt_comm_leave_(c);
    return rc;
}
