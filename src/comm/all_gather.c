/* all_gather.c - all-gather by pairwise exchange: every rank's block to every other rank, moved
 * as bytes. The float32 collective of the engine, and the byte mover under small.c's scalars
 * and the setup fences.
 *
 * Invariants: bytes on the wire are exactly the own block, once per peer, cut at chunk
 * boundaries (elements never split); empty blocks send nothing; the result is a copy.
 */
#include "comm/comm_internal.h"

#include <string.h>

int zt_ag_nreq_(const zt_comm *c, size_t elem) {
    size_t chunk = c->chunk_bytes / elem, n = 0;
    for (int j = 0; j < c->size; j++) {
        size_t nk = zt_nchunks_(c->off[j + 1] - c->off[j], chunk);
        n += j == c->rank ? (size_t)(c->size - 1) * nk : nk;
    }
    return n > INT32_MAX / 2 ? INT32_MAX / 2 : (int)n;
}

int zt_ag_post_(zt_comm_op *op, const void *send, void *recv, size_t elem, int base,
                zt_error *err) {
    zt_comm *c = op->c;
    int N = c->size, me = c->rank;
    size_t chunk = c->chunk_bytes / elem; /* elements */
    unsigned char *r8 = recv;
    unsigned char *own = r8 + c->off[me] * elem;
    size_t own_n = c->off[me + 1] - c->off[me];
    const unsigned char *src = send ? send : own;
    if (send && send != own && own_n) memcpy(own, send, own_n * elem);
    int idx = base, rc;
    for (int s = 1; s < N; s++) { /* receives first */
        int r = (me - s + N) % N;
        size_t nr = c->off[r + 1] - c->off[r];
        for (size_t lo = 0; lo < nr; lo += chunk) {
            size_t len = nr - lo < chunk ? nr - lo : chunk;
            if ((rc = zt_op_post_(op, idx++, true, r8 + (c->off[r] + lo) * elem, len * elem, r,
                                  err)))
                return rc;
        }
    }
    for (size_t lo = 0; lo < own_n; lo += chunk) /* sends chunk-major */
        for (int s = 1; s < N; s++) {
            size_t len = own_n - lo < chunk ? own_n - lo : chunk;
            if ((rc = zt_op_post_(op, idx++, false, (void *)(src + lo * elem), len * elem,
                                  (me + s) % N, err)))
                return rc;
        }
    if (!op->advance) op->advance = zt_advance_when_idle_;
    return ZT_OK;
}

/* ----------------------------------------------------------------------------------------------
 * all_gather_intra_pairwise
 *
 * Accepts:     any N >= 1, uneven and zero counts, send == own block of recv (in place).
 * Returns:     recv = block 0 | block 1 | ... | block N-1, block j from rank j, bit-exact.
 * Limitations: N-1 messages per rank per chunk; for many ranks and tiny blocks a ring or
 *              recursive doubling would save latency (same bytes, same result).
 *
 *   N = 4, rank 1's view (B_r = rank r's block):
 *     s=1:  send B_1 -> rank 2    recv B_0 <- rank 0
 *     s=2:  send B_1 -> rank 3    recv B_3 <- rank 3
 *     s=3:  send B_1 -> rank 0    recv B_2 <- rank 2
 *     recv: [ B_0 | B_1 | B_2 | B_3 ]       all posted at once, straight into recv
 * ---------------------------------------------------------------------------------------------- */
static int ag_start(zt_comm *c, const float *send, float *recv, const size_t *counts,
                    const char *tag, zt_comm_op **out, zt_error *err) {
    size_t total;
    int rc = zt_comm_ready_(c, "all_gather", err);
    if (rc) return rc;
    rc = zt_counts_check_(c, "all_gather", counts, &total, err);
    if (rc) return rc;
    size_t n = counts[c->rank];
    if ((!recv && total) || (!send && n))
        return zt_error_set(err, ZT_ERR_USAGE, "all_gather on comm '%s': NULL buffer", c->name);
    const float *own = recv ? recv + c->off[c->rank] : NULL;
    if (n && send != own && send < recv + total && recv < send + n)
        return zt_error_set(err, ZT_ERR_USAGE,
                            "all_gather on comm '%s': send overlaps recv other than as the own "
                            "block",
                            c->name);
    zt_comm_op *op = NULL;
    rc = zt_op_begin_(c, ZT_COLL_ALL_GATHER, ZT_SUB_AG, "all_gather", tag, total * sizeof(float),
                      zt_ag_nreq_(c, sizeof(float)), true, false, &op, err);
    if (rc) return rc;
    if ((rc = zt_ag_post_(op, send, recv, sizeof(float), 0, err))) return rc;
    if ((rc = zt_op_kick_(op, err))) return rc;
    *out = op;
    return ZT_OK;
}

int zt_all_gather_f32_start(zt_comm *c, const float *send, float *recv, const size_t *counts,
                            const char *tag, zt_comm_op **op, zt_error *err) {
    zt_error local;
    if (!err) err = &local;
    *op = NULL;
    int rc = zt_comm_enter_(c, "all_gather", err);
    if (rc) return rc;
    rc = ag_start(c, send, recv, counts, tag, op, err);
    zt_comm_leave_(c);
    return rc;
}

int zt_all_gather_f32(zt_comm *c, const float *send, float *recv, const size_t *counts,
                      const char *tag, zt_error *err) {
    zt_error local;
    if (!err) err = &local;
    int rc = zt_comm_enter_(c, "all_gather", err);
    if (rc) return rc;
    zt_comm_op *op = NULL;
    rc = ag_start(c, send, recv, counts, tag, &op, err);
    if (!rc) rc = zt_op_wait_(op, err);
    zt_comm_leave_(c);
    return rc;
}

int zt_all_gather_bytes_(zt_comm *c, int kind, int subkind, const char *name, const void *send,
                         void *recv, size_t bytes, const char *tag, bool seq0, zt_error *err) {
    int rc0 = zt_comm_ready_(c, name, err);
    if (rc0) return rc0;
    for (int j = 0; j < c->size; j++) c->ucounts[j] = bytes;
    size_t total;
    int rc = zt_counts_check_(c, name, c->ucounts, &total, err);
    if (rc) return rc;
    zt_comm_op *op = NULL;
    rc = zt_op_begin_(c, kind, subkind, name, tag, total, zt_ag_nreq_(c, 1), true, seq0, &op, err);
    if (rc) return rc;
    if ((rc = zt_ag_post_(op, send, recv, 1, 0, err))) return rc;
    if ((rc = zt_op_kick_(op, err))) return rc;
    return zt_op_wait_(op, err);
}
