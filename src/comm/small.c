/* small.c - the few-byte collectives: max of a double (grad norm, loss scale agreement), logical
 * AND of an int (the finite check), all-gather of a few doubles, the variable-count all-gather of
 * doubles (each rank's gradient-norm partials), the barrier and the setup fence that comm creation
 * runs.
 *
 * Invariants:
 *   - Each is the pairwise all-gather of all_gather.c followed by a local reduction over the
 *     values in rank order. Max and AND are exact and order-independent, so MPI_MAX / MPI_LAND
 *     would give the same numbers; the all-gather is chosen so that a missing rank is named in
 *     the deadline message, and so that a NaN reaches every rank (MPI_MAX leaves NaN undefined).
 *     Cost: N-1 tiny messages each way per rank, fine for the hundreds of ranks a job has per
 *     group; a recursive-doubling variant can replace it behind the same signatures.
 *   - The setup fence uses the fixed tag (seq 0) and carries each rank's op count, so ranks that
 *     ran different numbers of collectives on a comm meet anyway and fail with ZT_ERR_MISMATCH.
 */
#include "comm/comm_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int staging(zt_comm *c, size_t bytes, zt_error *err) {
    if (bytes <= c->small_bytes) return ZT_OK;
    void *p = realloc(c->small, bytes);
    if (!p) return zt_error_set(err, ZT_ERR_NOMEM, "comm '%s': out of memory", c->name);
    c->small = p;
    c->small_bytes = bytes;
    return ZT_OK;
}

typedef struct setup_msg {
    uint64_t seq;
    int32_t color, key;
} setup_msg;

int zt_setup_exchange_(zt_comm *c, const char *name, int color, int key, int32_t *out,
                       zt_error *err) {
    int rc = staging(c, (size_t)c->size * sizeof(setup_msg), err);
    if (rc) return rc;
    setup_msg mine = {c->seq, color, key};
    rc = zt_all_gather_bytes_(c, ZT_COLL_SETUP, ZT_SUB_SETUP, name, &mine, c->small,
                              sizeof mine, NULL, true, err);
    if (rc) return rc;
    const setup_msg *all = c->small;
    for (int r = 0; r < c->size; r++) {
        if (all[r].seq != c->seq) {
            char who[64];
            zt_comm_rank_label_(c, r, who, sizeof who);
            zt_error_set(err, ZT_ERR_MISMATCH,
                         "%s on comm '%s', rank %d: %s has run %llu collectives on this comm, "
                         "this rank %llu: the ranks' sequences of collectives diverged",
                         name, c->name, c->rank, who, (unsigned long long)all[r].seq,
                         (unsigned long long)c->seq);
            c->broken = true;
            snprintf(c->broken_msg, sizeof c->broken_msg, "%s", err->msg);
            return ZT_ERR_MISMATCH;
        }
        if (out) {
            out[2 * r] = all[r].color;
            out[2 * r + 1] = all[r].key;
        }
    }
    return ZT_OK;
}

int zt_comm_barrier(zt_comm *c, const char *tag, zt_error *err) {
    zt_error local;
    if (!err) err = &local;
    int rc = zt_comm_enter_(c, "barrier", err);
    if (rc) return rc;
    rc = zt_setup_exchange_(c, "barrier", 0, 0, NULL, err);
    zt_comm_leave_(c);
    return rc;
}

/* The all-gather of n doubles per rank into the staging area (or into recv when given). */
static int gather_f64(zt_comm *c, const char *name, const double *send, double *recv, size_t n,
                      const char *tag, zt_error *err) {
    if (!recv) {
        int rc = staging(c, (size_t)c->size * n * sizeof(double), err);
        if (rc) return rc;
        recv = c->small;
    }
    return zt_all_gather_bytes_(c, ZT_COLL_SMALL, ZT_SUB_SMALL, name, send, recv,
                                n * sizeof(double), tag, false, err);
}

int zt_all_reduce_max_f64(zt_comm *c, double *value, const char *tag, zt_error *err) {
    zt_error local;
    if (!err) err = &local;
    int rc = zt_comm_enter_(c, "all_reduce_max", err);
    if (rc) return rc;
    double v = *value;
    rc = gather_f64(c, "all_reduce_max", &v, NULL, 1, tag, err);
    if (!rc) {
        const double *all = c->small;
        double m = all[0];
        for (int r = 1; r < c->size && !isnan(m); r++)
            if (isnan(all[r]) || all[r] > m) m = all[r];
        *value = m;
    }
    zt_comm_leave_(c);
    return rc;
}

int zt_all_reduce_and_int(zt_comm *c, int *flag, const char *tag, zt_error *err) {
    zt_error local;
    if (!err) err = &local;
    int rc = zt_comm_enter_(c, "all_reduce_and", err);
    if (rc) return rc;
    double v = *flag != 0; /* moves as a double: one staging path for all small ops */
    rc = gather_f64(c, "all_reduce_and", &v, NULL, 1, tag, err);
    if (!rc) {
        const double *all = c->small;
        int a = 1;
        for (int r = 0; r < c->size; r++) a &= all[r] != 0;
        *flag = a;
    }
    zt_comm_leave_(c);
    return rc;
}

int zt_all_gather_f64(zt_comm *c, const double *send, double *recv, size_t n, const char *tag,
                      zt_error *err) {
    zt_error local;
    if (!err) err = &local;
    int rc = zt_comm_enter_(c, "all_gather_f64", err);
    if (rc) return rc;
    if (n && (!send || !recv))
        rc = zt_error_set(err, ZT_ERR_USAGE, "all_gather_f64 on comm '%s': NULL buffer", c->name);
    else
        rc = gather_f64(c, "all_gather_f64", send, recv, n, tag, err);
    zt_comm_leave_(c);
    return rc;
}

int zt_all_gather_f64v(zt_comm *c, const double *send, double *recv, const size_t *counts, const char *tag,
                       zt_error *err) {
    zt_error local;
    if (!err) err = &local;
    int rc = zt_comm_enter_(c, "all_gather_f64v", err);
    if (rc) return rc;
    size_t total = 0;
    if (!(rc = zt_comm_ready_(c, "all_gather_f64v", err)))
        rc = zt_counts_check_(c, "all_gather_f64v", counts, &total, err);
    if (!rc && ((total && !recv) || (counts[c->rank] && !send)))
        rc = zt_error_set(err, ZT_ERR_USAGE, "all_gather_f64v on comm '%s': NULL buffer", c->name);
    zt_comm_op *op = NULL;
    if (!rc)
        rc = zt_op_begin_(c, ZT_COLL_SMALL, ZT_SUB_SMALL, "all_gather_f64v", tag, total * sizeof(double),
                          zt_ag_nreq_(c), true, false, &op, err);
    if (!rc) rc = zt_ag_post_(op, send, recv, sizeof(double), err);
    if (!rc) rc = zt_op_kick_(op, err);
    if (!rc) rc = zt_op_wait_(op, err);
    zt_comm_leave_(c);
    return rc;
}
