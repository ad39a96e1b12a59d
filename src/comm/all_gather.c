/* all_gather.c - all-gather by pairwise exchange: every rank's block to every other rank, moved
 * as bytes. The float32 collective of the engine, its bf16 twin (bf16-low's 2-byte parameters),
 * and the byte mover under small.c's scalars and the setup fences.
 *
 * Invariants: bytes on the wire are exactly the own block, once per peer, cut at chunk
 * boundaries (elements never split); empty blocks send nothing; the result is a copy.
 */
#include "comm/comm_internal.h"

#include <string.h>

int zt_ag_nreq_(const zt_comm *c) { return 2 * ZT_COMM_WINDOW * (c->size - 1); }

/* Request slots (W = ZT_COMM_WINDOW, s = 1..N-1 the exchange step):
 *   receive of chunk k of block me-s:  (k % W) * (N-1) + s-1
 *   send of chunk k of the own block to rank me+s:  send_base + (k % W) * (N-1) + s-1
 * A slot takes chunk k+W once chunk k through it has finished; each peer's chunks are posted
 * strictly in order (next_recv / next_send), since MPI matches in posting order. */

/* Posts the next chunks of block r (from rank r), in order, while their slots are free. */
static int pump_recv(zt_comm_op *op, int r, zt_error *err) {
    zt_comm *c = op->c;
    int N = c->size, s = (c->rank - r + N) % N;
    size_t nr = c->off[r + 1] - c->off[r];
    while ((size_t)c->next_recv[r] * op->ag.chunk < nr) {
        int k = c->next_recv[r];
        size_t lo = (size_t)k * op->ag.chunk, len = nr - lo < op->ag.chunk ? nr - lo : op->ag.chunk;
        int idx = (k % ZT_COMM_WINDOW) * (N - 1) + s - 1;
        if (c->info[idx].state == ZT_REQ_PENDING) break;
        c->info[idx].aux = k;
        int rc = zt_op_post_(op, idx, true, op->ag.recv + (c->off[r] + lo) * op->ag.elem,
                             len * op->ag.elem, r, err);
        if (rc) return rc;
        c->next_recv[r]++;
    }
    return ZT_OK;
}

/* Posts the next chunks of the own block to rank d, in order, while their slots are free. */
static int pump_send(zt_comm_op *op, int d, zt_error *err) {
    zt_comm *c = op->c;
    int N = c->size, s = (d - c->rank + N) % N;
    size_t n = c->off[c->rank + 1] - c->off[c->rank];
    while ((size_t)c->next_send[d] * op->ag.chunk < n) {
        int k = c->next_send[d];
        size_t lo = (size_t)k * op->ag.chunk, len = n - lo < op->ag.chunk ? n - lo : op->ag.chunk;
        int idx = op->ag.send_base + (k % ZT_COMM_WINDOW) * (N - 1) + s - 1;
        if (c->info[idx].state == ZT_REQ_PENDING) break;
        c->info[idx].aux = k;
        int rc = zt_op_post_(op, idx, false, (void *)(op->ag.send + lo * op->ag.elem),
                             len * op->ag.elem, d, err);
        if (rc) return rc;
        c->next_send[d]++;
    }
    return ZT_OK;
}

static int ag_on_complete(zt_comm_op *op, int idx, zt_error *err) {
    zt_req_info *in = &op->c->info[idx];
    return idx < op->ag.send_base ? pump_recv(op, in->peer, err) : pump_send(op, in->peer, err);
}

int zt_ag_post_(zt_comm_op *op, const void *send, void *recv, size_t elem, zt_error *err) {
    zt_comm *c = op->c;
    int N = c->size, me = c->rank;
    unsigned char *own = (unsigned char *)recv + c->off[me] * elem;
    size_t own_n = c->off[me + 1] - c->off[me];
    if (send && send != own && own_n) memcpy(own, send, own_n * elem);
    op->ag.send = send ? send : own;
    op->ag.recv = recv;
    op->ag.elem = elem;
    op->ag.chunk = c->chunk_bytes / elem;
    op->ag.send_base = ZT_COMM_WINDOW * (N - 1);
    op->on_complete = ag_on_complete;
    if (!op->advance) op->advance = zt_advance_when_idle_;
    int rc;
    for (int j = 0; j < N; j++) c->next_send[j] = c->next_recv[j] = 0;
    for (int s = 1; s < N; s++) /* receives first */
        if ((rc = pump_recv(op, (me - s + N) % N, err))) return rc;
    for (int s = 1; s < N; s++)
        if ((rc = pump_send(op, (me + s) % N, err))) return rc;
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
 *     recv: [ B_0 | B_1 | B_2 | B_3 ]       all at once, straight into recv
 *   Blocks longer than a chunk flow ZT_COMM_WINDOW chunks at a time per peer and direction
 *   (chunk k+W is posted when chunk k has finished): 2W(N-1) requests whatever the size.
 * ---------------------------------------------------------------------------------------------- */
static int ag_start(zt_comm *c, const void *send, void *recv, size_t elem, const size_t *counts,
                    const char *tag, zt_comm_op **out, zt_error *err) {
    size_t total;
    int rc = zt_comm_ready_(c, "all_gather", err);
    if (rc) return rc;
    rc = zt_counts_check_(c, "all_gather", counts, &total, err);
    if (rc) return rc;
    size_t n = counts[c->rank];
    if ((!recv && total) || (!send && n))
        return zt_error_set(err, ZT_ERR_USAGE, "all_gather on comm '%s': NULL buffer", c->name);
    const char *s = send, *r = recv, *own = r ? r + c->off[c->rank] * elem : NULL;
    if (n && s != own && s < r + total * elem && r < s + n * elem)
        return zt_error_set(err, ZT_ERR_USAGE,
                            "all_gather on comm '%s': send overlaps recv other than as the own "
                            "block",
                            c->name);
    zt_comm_op *op = NULL;
    rc = zt_op_begin_(c, ZT_COLL_ALL_GATHER, ZT_SUB_AG, "all_gather", tag, total * elem,
                      zt_ag_nreq_(c), true, false, &op, err);
    if (rc) return rc;
    if ((rc = zt_ag_post_(op, send, recv, elem, err))) return rc;
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
    rc = ag_start(c, send, recv, sizeof(float), counts, tag, op, err);
    zt_comm_leave_(c);
    return rc;
}

/* The blocking all-gather of elements of elem bytes (fp32, or bf16's 2-byte elements). */
static int ag_blocking(zt_comm *c, const void *send, void *recv, size_t elem, const size_t *counts,
                       const char *tag, zt_error *err) {
    zt_error local;
    if (!err) err = &local;
    int rc = zt_comm_enter_(c, "all_gather", err);
    if (rc) return rc;
    zt_comm_op *op = NULL;
    rc = ag_start(c, send, recv, elem, counts, tag, &op, err);
    if (!rc) rc = zt_op_wait_(op, err);
    zt_comm_leave_(c);
    return rc;
}

int zt_all_gather_f32(zt_comm *c, const float *send, float *recv, const size_t *counts,
                      const char *tag, zt_error *err) {
    return ag_blocking(c, send, recv, sizeof(float), counts, tag, err);
}

int zt_all_gather_bf16(zt_comm *c, const uint16_t *send, uint16_t *recv, const size_t *counts,
                       const char *tag, zt_error *err) {
    return ag_blocking(c, send, recv, sizeof(uint16_t), counts, tag, err);
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
    rc = zt_op_begin_(c, kind, subkind, name, tag, total, zt_ag_nreq_(c), true, seq0, &op, err);
    if (rc) return rc;
    if ((rc = zt_ag_post_(op, send, recv, 1, err))) return rc;
    if ((rc = zt_op_kick_(op, err))) return rc;
    return zt_op_wait_(op, err);
}
