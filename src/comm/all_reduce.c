/* all_reduce.c - deterministic all-reduce of float32: the reduce-scatter of reduce_scatter.c
 * over an even block split, then the all-gather of all_gather.c, as one op.
 *
 * Invariants: the result is bit-identical on every rank (each block is summed by exactly one
 * rank, then copied) and bit-identical to calling zt_reduce_scatter_f32 and zt_all_gather_f32
 * with zt_comm_even_counts; the traffic is exactly theirs. Counted once, as ZT_COLL_ALL_REDUCE.
 */
#include "comm/comm_internal.h"

#include <string.h>

void zt_comm_even_counts(size_t n, int nranks, size_t *counts) {
    if (nranks < 1) return;
    size_t q = n / (size_t)nranks, r = n % (size_t)nranks;
    for (int j = 0; j < nranks; j++) counts[j] = q + ((size_t)j < r ? 1 : 0);
}

/* Phase 0 runs the reduce-scatter's advance; when it is done, phase 1 posts the all-gather. */
static int ar_advance(zt_comm_op *op, zt_error *err) {
    zt_comm *c = op->c;
    if (op->ar.phase == 0) {
        int rc = op->ar.rs_advance(op, err);
        if (rc || !op->done) return rc;
        op->ar.phase = 1;
        op->done = false;
        int nreq = zt_ag_nreq_(c);
        if ((rc = zt_op_reserve_(op, nreq, err))) return rc;
        for (int i = 0; i < nreq; i++) {
            c->reqs[i] = MPI_REQUEST_NULL;
            memset(&c->info[i], 0, sizeof c->info[i]);
        }
        op->nreq = nreq;
        op->on_complete = NULL;
        op->mpi_tag = (op->mpi_tag & ~7) | ZT_SUB_AR_AG;
        if ((rc = zt_ag_post_(op, NULL, op->ar.buf, sizeof(float), err))) return rc;
    }
    if (op->pending == 0) op->done = true;
    return ZT_OK;
}

/* ----------------------------------------------------------------------------------------------
 * all_reduce_intra_rs_ag
 *
 * Accepts:     any N >= 1, any n (blocks of n/N or n/N+1 floats, zero when n < N), in place.
 * Returns:     buf = tree sum over ranks, identical bits on all ranks.
 * Limitations: the all-gather starts when this rank's reduce-scatter is complete (no overlap of
 *              the two phases); bandwidth-optimal: 2(N-1)/N * n floats each way per rank.
 *
 *   N = 4, n split in blocks b0..b3:
 *     reduce-scatter:  rank j ends with sum_r b_j(r), tree-ordered   (reduce_scatter.c)
 *     all-gather:      every rank receives the other three sums      (all_gather.c)
 *        rank 0: [S0 . . .] -> [S0 S1 S2 S3]
 *        rank 1: [. S1 . .] -> [S0 S1 S2 S3]   ...
 * ---------------------------------------------------------------------------------------------- */
static int ar_start(zt_comm *c, float *buf, size_t n, const char *tag, zt_comm_op **out,
                    zt_error *err) {
    if (!buf && n) return zt_error_set(err, ZT_ERR_USAGE, "all_reduce on comm '%s': NULL buffer",
                                       c->name);
    int rc = zt_comm_ready_(c, "all_reduce", err);
    if (rc) return rc;
    zt_comm_even_counts(n, c->size, c->ucounts);
    size_t total;
    rc = zt_counts_check_(c, "all_reduce", c->ucounts, &total, err);
    if (rc) return rc;
    int nrs = zt_rs_nreq_(c), nag = zt_ag_nreq_(c);
    zt_comm_op *op = NULL;
    rc = zt_op_begin_(c, ZT_COLL_ALL_REDUCE, ZT_SUB_AR_RS, "all_reduce", tag, n * sizeof(float),
                      nrs > nag ? nrs : nag, true, false, &op, err);
    if (rc) return rc;
    op->nreq = nrs;
    op->ar.buf = buf;
    op->ar.n = n;
    op->ar.phase = 0;
    if ((rc = zt_rs_post_(op, buf, buf + c->off[c->rank], err))) return rc;
    op->ar.rs_advance = op->advance;
    op->advance = ar_advance;
    if ((rc = zt_op_kick_(op, err))) return rc;
    *out = op;
    return ZT_OK;
}

int zt_all_reduce_f32_start(zt_comm *c, float *buf, size_t n, const char *tag, zt_comm_op **op,
                            zt_error *err) {
    zt_error local;
    if (!err) err = &local;
    *op = NULL;
    int rc = zt_comm_enter_(c, "all_reduce", err);
    if (rc) return rc;
    rc = ar_start(c, buf, n, tag, op, err);
    zt_comm_leave_(c);
    return rc;
}

int zt_all_reduce_f32(zt_comm *c, float *buf, size_t n, const char *tag, zt_error *err) {
    zt_error local;
    if (!err) err = &local;
    int rc = zt_comm_enter_(c, "all_reduce", err);
    if (rc) return rc;
    zt_comm_op *op = NULL;
    rc = ar_start(c, buf, n, tag, &op, err);
    if (!rc) rc = zt_op_wait_(op, err);
    zt_comm_leave_(c);
    return rc;
}
