/* all_to_all.c - the all-to-all of variable-sized blocks (MPI_Alltoallv's job): expert
 * parallelism's dispatch of tokens to the experts' owners and their combine back (DeepSpeed-MoE,
 * Megatron-LM, torchtitan), and the same two in reverse in backward.
 *
 * Where every rank of the comm is on this machine (the comm has a shared segment, shm.c), both
 * phases run as one op through the segment (all_to_all_shm.c: the sizes through the regions'
 * headers, each block read out of its sender's memory or passed through the slots; counted as
 * ZT_COLL_ALL_TO_ALL only); else by messages:
 *
 *   phase 1 (ZT_COLL_SMALL, "all_to_all counts"): every rank sends every other the size of the
 *     block it has for it and its room for that rank's block (two uint64_t per pair), so a receiver
 *     learns what arrives before it posts; a block over its room is ZT_ERR_MISMATCH naming both
 *     numbers, on both ends of that pair (both skip it; every other pair still moves, so no rank
 *     waits for a message that never comes)
 *   phase 2 (ZT_COLL_ALL_TO_ALL): every block moved in chunks of the comm's chunk size, all
 *     posted at once (receives first, then sends, each in rank order from this rank on, so the
 *     pairs of a round start together; a pair's chunks match in posting order); the own block is a
 *     memmove.
 *
 * Invariants: bytes are moved, never added, so the result does not depend on the order messages
 * arrive in; empty blocks send nothing; both phases wait in deadline.c's one loop (a silent peer is
 * ZT_ERR_PEER naming the collective), count in the comm's counters and comm log, and appear in the
 * trace as the other collectives do (deadline.c's op_finish). One thread per comm, as every
 * collective. Blocks are at most INT_MAX bytes.
 */
#include "comm/comm_internal.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* Requests the blocks take: each block cut into chunks of the comm's chunk size (the last one
 * shorter), so that a large block completes piece by piece and the wait loop sees progress (it
 * backs off to yields and sleeps after c->spin without any: one 3 MiB message would then move at
 * the pace of its polls, bench/RESULTS.md "Expert parallelism") */
static size_t chunks_of(size_t bytes, size_t chunk) { return bytes ? (bytes + chunk - 1) / chunk : 0; }

static int nreq_of(const zt_comm *c, const size_t *ssize, const size_t *rsize) {
    size_t n = 0, chunk = c->chunk_bytes ? c->chunk_bytes : ((size_t)1 << 18);
    for (int p = 0; p < c->size; p++)
        if (p != c->rank) n += chunks_of(ssize[p], chunk) + chunks_of(rsize[p], chunk);
    return (int)n;
}

/* Posts the receives of rsize[p] bytes into rbuf[p] and the sends of ssize[p] bytes from sbuf[p]
 * for every peer p != me, chunk by chunk in order (MPI matches a pair's messages in posting order),
 * then waits (the op begun by the caller with nreq_of requests). */
static int exchange(zt_comm_op *op, const void *const *sbuf, const size_t *ssize, void *const *rbuf,
                    const size_t *rsize, zt_error *err) {
    zt_comm *c = op->c;
    int N = c->size, me = c->rank, rc, idx = 0;
    size_t chunk = c->chunk_bytes ? c->chunk_bytes : ((size_t)1 << 18);
    op->advance = zt_advance_when_idle_;
    for (int s = 1; s < N; s++) {
        int p = (me + N - s) % N;
        for (size_t lo = 0; lo < rsize[p]; lo += chunk) {
            size_t len = rsize[p] - lo < chunk ? rsize[p] - lo : chunk;
            if ((rc = zt_op_post_(op, idx++, true, (unsigned char *)rbuf[p] + lo, len, p, err))) return rc;
        }
    }
    for (int s = 1; s < N; s++) {
        int p = (me + s) % N;
        for (size_t lo = 0; lo < ssize[p]; lo += chunk) {
            size_t len = ssize[p] - lo < chunk ? ssize[p] - lo : chunk;
            if ((rc = zt_op_post_(op, idx++, false, (unsigned char *)sbuf[p] + lo, len, p, err))) return rc;
        }
    }
    if ((rc = zt_op_kick_(op, err))) return rc;
    return zt_op_wait_(op, err);
}

static int a2a(zt_comm *c, const void *const *send, const size_t *send_bytes, void *const *recv,
               const size_t *recv_cap, size_t *recv_bytes, const char *tag, zt_error *err) {
    int N = c->size, me = c->rank, rc = zt_comm_ready_(c, "all_to_all", err);
    if (rc) return rc;
    /* per peer: [the size of my block for it, my room for its block], and what it says back */
    uint64_t *mine = malloc(4 * (size_t)N * sizeof *mine), *theirs = mine ? mine + 2 * N : NULL;
    const void **sp = malloc((size_t)N * sizeof *sp);
    void **rp = malloc((size_t)N * sizeof *rp);
    size_t *ssz = malloc(3 * (size_t)N * sizeof *ssz), *rsz = ssz ? ssz + N : NULL, *pair = ssz ? ssz + 2 * N : NULL;
    if (!mine || !sp || !rp || !ssz) {
        rc = zt_error_set(err, ZT_ERR_NOMEM, "all_to_all '%s' on comm '%s': out of memory", tag ? tag : "", c->name);
        goto out;
    }
    for (int p = 0; p < N; p++) {
        if (send_bytes[p] > (size_t)INT_MAX) { /* every rank checks its own before anything moves */
            rc = zt_error_set(err, ZT_ERR_USAGE, "all_to_all '%s' on comm '%s': a block of %zu bytes for rank %d (at "
                              "most %d in one message)", tag ? tag : "", c->name, send_bytes[p], p, INT_MAX);
            goto out;
        }
        mine[2 * p] = send_bytes[p];
        mine[2 * p + 1] = recv_cap[p];
        sp[p] = &mine[2 * p];
        rp[p] = &theirs[2 * p];
        pair[p] = 2 * sizeof(uint64_t);
    }
    zt_comm_op *op = NULL;
    size_t offered = 0;
    for (int p = 0; p < N; p++) offered += p == me ? 0 : send_bytes[p];
    if (N > 1 && c->shm_map) { /* sizes and blocks through the shared segment (all_to_all_shm.c); the op is
                                  fingerprinted by the sizes round's bytes, the same on every rank */
        if ((rc = zt_op_begin_(c, ZT_COLL_ALL_TO_ALL, ZT_SUB_A2A, "all_to_all", tag, (size_t)N * 2 * sizeof(uint64_t), 0,
                               true, false, &op, err)) ||
            (op->payload = offered, rc = zt_a2a_shm_post_(op, send, recv, mine, theirs, ssz, rsz, err)) ||
            (rc = zt_op_kick_(op, err)) || (rc = zt_op_wait_(op, err)))
            goto out;
    } else if ((rc = zt_op_begin_(c, ZT_COLL_SMALL, ZT_SUB_A2A, "all_to_all counts", tag, (size_t)N * 2 * sizeof(uint64_t),
                                  nreq_of(c, pair, pair), true, false, &op, err)) ||
               (rc = exchange(op, sp, pair, rp, pair, err)))
        goto out;
    theirs[2 * me] = mine[2 * me], theirs[2 * me + 1] = mine[2 * me + 1];
    /* both ends of a pair see the same two numbers: a block over its room moves nothing, on either
     * end, and every other pair goes on, so no rank waits for a message that never comes */
    size_t sent = 0;
    int bad = -1;
    for (int p = 0; p < N; p++) {
        bool send_ok = mine[2 * p] <= theirs[2 * p + 1], recv_ok = theirs[2 * p] <= recv_cap[p];
        ssz[p] = send_ok ? send_bytes[p] : 0;
        rsz[p] = recv_ok ? (size_t)theirs[2 * p] : 0;
        recv_bytes[p] = rsz[p];
        if (p != me) sent += ssz[p];
        if (!recv_ok && bad < 0) bad = p;
    }
    if (bad < 0 && ssz[me] && !(op && op->kind == ZT_COLL_ALL_TO_ALL && op->a2.cma)) /* the single copy made it */
        memmove(recv[me], send[me], ssz[me]);
    /* fingerprinted (comm.check_collectives) by the sizes round's bytes, the same on every rank: the
     * blocks' totals differ by rank wherever the routing is uneven */
    if (N > 1 && !c->shm_map &&
        (rc = zt_op_begin_(c, ZT_COLL_ALL_TO_ALL, ZT_SUB_A2A, "all_to_all", tag, (size_t)N * 2 * sizeof(uint64_t),
                           nreq_of(c, ssz, rsz), true, false, &op, err)) == ZT_OK) {
        op->payload = sent;
        rc = exchange(op, send, ssz, recv, rsz, err);
    }
    if (!rc && bad >= 0)
        rc = zt_error_set(err, ZT_ERR_MISMATCH, "all_to_all '%s' on comm '%s': rank %d sends %llu bytes, this rank (%d) "
                          "has room for %zu", tag ? tag : "", c->name, bad, (unsigned long long)theirs[2 * bad], me,
                          recv_cap[bad]);
    for (int p = 0; p < N && !rc; p++)
        if (mine[2 * p] > theirs[2 * p + 1])
            rc = zt_error_set(err, ZT_ERR_MISMATCH, "all_to_all '%s' on comm '%s': this rank (%d) sends %zu bytes to "
                              "rank %d, which has room for %llu", tag ? tag : "", c->name, me, send_bytes[p], p,
                              (unsigned long long)theirs[2 * p + 1]);
out:
    free(mine);
    free(sp);
    free(rp);
    free(ssz);
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
