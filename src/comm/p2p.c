/* p2p.c - point-to-point transfers between pipeline stages (p2p.h): MPI_Isend / MPI_Irecv of
 * bytes, and their wait polled under the job's deadline (zt_comm_timeout).
 *
 * Invariants: a zt_p2p owns one MPI request from its post until its wait returns; a failed or
 * timed-out receive is cancelled before the wait returns, so nothing writes into the caller's
 * buffer afterwards. The wait spins briefly, then yields, then sleeps 50 us per poll, as the
 * collectives' loop does (deadline.c), so a stage waiting for its neighbour leaves the cores to
 * the compute threads. */
#include "comm/p2p.h"
#include "comm/comm_internal.h"
#include "obs/commlog.h"

#include <omp.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void zt_p2p_bytes(zt_comm *c, uint64_t *sent, uint64_t *recvd, bool reset) {
    *sent = reset ? atomic_exchange(&c->p2p_sent, 0) : atomic_load(&c->p2p_sent);
    *recvd = reset ? atomic_exchange(&c->p2p_recvd, 0) : atomic_load(&c->p2p_recvd);
}

static int post(zt_comm *c, void *buf, size_t bytes, int peer, int tag, bool recv, const char *what, zt_p2p *p,
                zt_error *err) {
    memset(p, 0, sizeof *p);
    snprintf(p->what, sizeof p->what, "%s", what);
    if (!c || peer < 0 || peer >= c->size || tag < 0 || bytes > (size_t)1 << 31)
        return zt_error_set(err, ZT_ERR_INTERNAL, "pipeline transfer %s: peer %d of %d, tag %d, %zu bytes", what, peer,
                            c ? c->size : 0, tag, bytes);
    MPI_Request *r = malloc(sizeof *r);
    if (!r) return zt_error_set(err, ZT_ERR_NOMEM, "pipeline transfer %s: out of memory", what);
    int rc = recv ? MPI_Irecv(buf, (int)bytes, MPI_BYTE, peer, tag, c->mpi, r)
                  : MPI_Isend(buf, (int)bytes, MPI_BYTE, peer, tag, c->mpi, r);
    if (rc != MPI_SUCCESS) {
        free(r);
        return zt_error_set(err, ZT_ERR_PEER, "pipeline transfer %s: MPI_%s to rank %d of '%s' failed", what,
                            recv ? "Irecv" : "Isend", peer, c->name);
    }
    p->req = r;
    p->active = true;
    p->recv = recv;
    p->bytes = bytes;
    p->peer = peer;
    p->tag = tag;
    p->posted_at = omp_get_wtime();
    return ZT_OK;
}

int zt_p2p_isend(zt_comm *c, const void *buf, size_t bytes, int peer, int tag, const char *what, zt_p2p *p,
                 zt_error *err) {
    return post(c, (void *)buf, bytes, peer, tag, false, what, p, err);
}

int zt_p2p_irecv(zt_comm *c, void *buf, size_t bytes, int peer, int tag, const char *what, zt_p2p *p,
                 zt_error *err) {
    return post(c, buf, bytes, peer, tag, true, what, p, err);
}

int zt_p2p_wait(zt_comm *c, zt_p2p *p, zt_error *err) {
    p->waited_s = 0;
    if (!p->active) return ZT_OK;
    MPI_Request *r = p->req;
    MPI_Status st;
    double t0 = omp_get_wtime(), limit = zt_comm_timeout(c);
    int done = 0, rc = ZT_OK;
    for (long polls = 0;; polls++) {
        if (MPI_Test(r, &done, &st) != MPI_SUCCESS) {
            rc = zt_error_set(err, ZT_ERR_PEER, "pipeline transfer %s with rank %d of '%s': MPI_Test failed", p->what,
                              p->peer, c->name);
            break;
        }
        if (done) break;
        double waited = omp_get_wtime() - t0;
        if (limit > 0 && waited > limit) {
            rc = zt_error_set(err, ZT_ERR_PEER, "pipeline transfer %s (%zu bytes, %s rank %d of '%s', world rank %d): "
                              "nothing arrived for %.0f s (the collective deadline, comm.timeout_s)", p->what,
                              p->bytes, p->recv ? "from" : "to", p->peer, c->name,
                              zt_comm_world_rank(c, p->peer), waited);
            if (p->recv) {
                MPI_Cancel(r);
                MPI_Wait(r, MPI_STATUS_IGNORE);
            } else {
                MPI_Request_free(r);
            }
            break;
        }
        if (waited > 1e-3) {
            if (polls % 16 == 0 && waited > 1e-2) {
                struct timespec ts = {0, 50000};
                nanosleep(&ts, NULL);
            } else {
                sched_yield();
            }
        }
    }
    p->waited_s = omp_get_wtime() - t0;
    if (!rc && p->recv) {
        int got = 0;
        MPI_Get_count(&st, MPI_BYTE, &got);
        if ((size_t)got != p->bytes)
            rc = zt_error_set(err, ZT_ERR_MISMATCH, "pipeline transfer %s from rank %d of '%s': %d bytes arrived, %zu "
                              "expected (the stages disagree on the micro-batch shape)", p->what, p->peer, c->name, got,
                              p->bytes);
    }
    if (!rc) {
        atomic_fetch_add(p->recv ? &c->p2p_recvd : &c->p2p_sent, (uint64_t)p->bytes);
        /* one comm-log row per direction's size: posted to done, and the part this wait blocked */
        zt_commlog_record(ZT_COLL_P2P, p->bytes, omp_get_wtime() - p->posted_at, p->waited_s, c->size, c->name);
    }
    free(r);
    p->req = NULL;
    p->active = false;
    return rc;
}
