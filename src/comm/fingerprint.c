/* fingerprint.c - the debug check of collective fingerprints (PyTorch's TORCH_DISTRIBUTED_DEBUG=
 * DETAIL, docs/reliability.md): with the check on (zt_comm_set_check, the trainer's
 * comm.check_collectives, or ZT_COMM_CHECK=1), every collective first all-gathers a fingerprint
 * from every rank of its comm (sequence number, operation and tag, bytes, training step) and
 * refuses to start when they differ, naming what each rank was about to do: a rank that skipped or
 * added a collective is caught at the next one instead of hanging or mixing up buffers.
 *
 * Invariants: off by default (one load per collective); the exchange is an MPI_Iallgather on the
 * comm (MPI matches collectives apart from zerotrain's point-to-point messages) polled under the
 * comm's deadline; after a mismatch or a timeout the comm is broken like after any failed op. */
#include "comm/comm_internal.h"
#include "core/env.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>

typedef struct fp_rec {
    uint64_t seq, bytes;
    int64_t step;
    char what[80]; /* "all_reduce 'head'" */
} fp_rec;

static atomic_int g_check = -1; /* -1: not decided yet (ZT_COMM_CHECK) */
static _Atomic int64_t g_step;

void zt_comm_set_check(bool on) { g_check = on; }

void zt_fingerprint_step_(int64_t step) { g_step = step; }

static bool checking(void) {
    int v = g_check;
    if (v < 0) {
        const char *env = zt_env(ZT_ENV_COMM_CHECK);
        v = env && *env && strcmp(env, "0") != 0;
        g_check = v;
    }
    return v;
}

static void describe(const fp_rec *f, char *buf, size_t cap) {
    snprintf(buf, cap, "#%llu %s, %llu B, step %lld", (unsigned long long)f->seq, f->what,
             (unsigned long long)f->bytes, (long long)f->step);
}

int zt_fingerprint_check_(zt_comm *c, const char *name, const char *tag, size_t payload, zt_error *err) {
    if (!checking() || c->size < 2) return ZT_OK;
    fp_rec mine = {.seq = c->seq, .bytes = payload, .step = g_step};
    snprintf(mine.what, sizeof mine.what, "%s%s%s%s", name, tag && tag[0] ? " '" : "", tag ? tag : "",
             tag && tag[0] ? "'" : "");
    fp_rec *all = calloc((size_t)c->size, sizeof *all);
    if (!all) return zt_error_set(err, ZT_ERR_NOMEM, "%s on comm '%s': out of memory for fingerprints", name, c->name);
    MPI_Request rq;
    int rc = MPI_Iallgather(&mine, (int)sizeof mine, MPI_BYTE, all, (int)sizeof mine, MPI_BYTE, c->mpi, &rq);
    double t0 = MPI_Wtime(), limit = zt_comm_timeout(c);
    int done = 0;
    while (rc == MPI_SUCCESS && !done) {
        rc = MPI_Test(&rq, &done, MPI_STATUS_IGNORE);
        if (!done && MPI_Wtime() - t0 > limit) break;
        if (!done) sched_yield();
    }
    int code = ZT_OK;
    if (rc != MPI_SUCCESS || !done) {
        code = zt_error_set(err, ZT_ERR_PEER, "%s (%s) on rank %d of comm '%s': the fingerprint exchange before it "
                            "(comm.check_collectives) got no answer from every rank after %g s", name, tag ? tag : "",
                            c->rank, c->name, limit);
    } else {
        char text[900] = "";
        size_t len = 0;
        int differ = 0;
        for (int r = 0; r < c->size; r++)
            if (all[r].seq != mine.seq || all[r].bytes != mine.bytes || strcmp(all[r].what, mine.what)) differ++;
        if (differ) {
            for (int r = 0; r < c->size && len + 120 < sizeof text; r++) {
                char d[160];
                describe(&all[r], d, sizeof d);
                len += (size_t)snprintf(text + len, sizeof text - len, "%srank %d: %s", r ? "; " : "", r, d);
            }
            code = zt_error_set(err, ZT_ERR_MISMATCH, "the ranks of comm '%s' are not calling the same collective "
                                "(comm.check_collectives): %s", c->name, text);
        }
    }
    free(all);
    if (code) {
        c->broken = true;
        snprintf(c->broken_msg, sizeof c->broken_msg, "%s", err ? err->msg : "fingerprint check failed");
    }
    return code;
}
