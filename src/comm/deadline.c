/* deadline.c - the one wait loop of the comm layer: every collective is a set of non-blocking
 * MPI requests polled here (MPI_Testsome) under a deadline, with errors that name the
 * collective, this rank and the peers whose messages have not arrived.
 *
 * Invariants:
 *   - The deadline is "no request completed for T seconds", T = the job's deadline when one is set
 *     (zt_comm_set_job_timeout: the trainer's comm.timeout_s) else c->timeout, and only runs
 *     inside a blocking wait (zt_op_wait_); zt_comm_op_test never times out. On expiry the
 *     message says what every rank of the comm was doing (the status board, board.c) and this
 *     rank's last collectives go to stderr.
 *   - A failed op leaves nothing posted that can still write into the caller's buffers: pending
 *     receives are cancelled (and waited for, briefly) before the call returns; sends that no
 *     peer takes are released to MPI (MPI_Request_free) and the comm is marked broken.
 *   - Every finished receive is checked against the length it was posted for: a different
 *     length means the ranks disagree on counts (ZT_ERR_MISMATCH), never silent corruption.
 *   - Polling backs off when nothing moves: it spins (MPI_Testsome in a loop) for c->spin
 *     seconds without progress (default 1 ms, ZT_COMM_SPIN_US), then sched_yields, and after
 *     10 x spin sleeps 50 us per poll, so a long wait leaves the cores to the compute threads.
 *     Spinning through the gaps of a transfer matters: a rank that yields mid-transfer on a
 *     busy machine loses its core for a time slice (measured: 1-4 MB all-reduces 14-18x slower).
 */
#include "comm/comm_internal.h"
#include "obs/commlog.h"
#include "obs/trace.h"

#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- formatting ------------------------------------------------------------------------- */

void zt_fmt_bytes_(size_t bytes, char *buf, size_t cap) {
    double b = (double)bytes;
    if (bytes < 1000) snprintf(buf, cap, "%zu B", bytes);
    else if (b < 1e6) snprintf(buf, cap, "%.1f kB", b / 1e3);
    else if (b < 1e9) snprintf(buf, cap, "%.1f MB", b / 1e6);
    else snprintf(buf, cap, "%.2f GB", b / 1e9);
}

void zt_op_where_(const zt_comm_op *op, char *buf, size_t cap) {
    const zt_comm *c = op->c;
    char size[32], comm[96] = "";
    zt_fmt_bytes_(op->payload, size, sizeof size);
    if (!c->is_world)
        snprintf(comm, sizeof comm, " of '%s' (world rank %d)", c->name, c->world_ranks[c->rank]);
    snprintf(buf, cap, "%s (%s%s%s) on rank %d%s", op->name, op->tag, op->tag[0] ? ", " : "", size,
             c->rank, comm);
}

int zt_op_mpi_fail_(zt_comm_op *op, int rc, const char *call, int peer, zt_error *err) {
    char where[256], mpimsg[MPI_MAX_ERROR_STRING] = "", who[64] = "";
    int len = 0;
    MPI_Error_string(rc, mpimsg, &len);
    zt_op_where_(op, where, sizeof where);
    if (peer >= 0) {
        who[0] = ' ';
        zt_comm_rank_label_(op->c, peer, who + 1, sizeof who - 1);
    }
    zt_error_set(err, ZT_ERR_PEER, "%s: %s%s failed: %s", where, call, who, mpimsg);
    return zt_op_fail_(op, ZT_ERR_PEER, err);
}

/* ---- the one-thread guard ------------------------------------------------------------------ */

int zt_comm_enter_(zt_comm *c, const char *what, zt_error *err) {
    if (!c) return zt_error_set(err, ZT_ERR_USAGE, "%s: comm is NULL", what);
    if (atomic_exchange(&c->busy, 1))
        return zt_error_set(err, ZT_ERR_INTERNAL,
                            "%s on comm '%s' while another thread is inside this comm (a comm "
                            "serves one thread at a time; give each thread its own zt_comm_dup)",
                            what, c->name);
    return ZT_OK;
}

void zt_comm_leave_(zt_comm *c) { atomic_store(&c->busy, 0); }

/* ---- begin, post ------------------------------------------------------------------------- */

int zt_op_reserve_(zt_comm_op *op, int n, zt_error *err) {
    zt_comm *c = op->c;
    if (n <= c->req_cap) return ZT_OK;
    int cap = c->req_cap ? c->req_cap : 64;
    while (cap < n) cap *= 2;
    MPI_Request *r = realloc(c->reqs, (size_t)cap * sizeof *r);
    if (r) c->reqs = r;
    zt_req_info *in = realloc(c->info, (size_t)cap * sizeof *in);
    if (in) c->info = in;
    MPI_Status *st = realloc(c->st, (size_t)cap * sizeof *st);
    if (st) c->st = st;
    int *ix = realloc(c->idx, (size_t)cap * sizeof *ix);
    if (ix) c->idx = ix;
    if (!r || !in || !st || !ix)
        return zt_error_set(err, ZT_ERR_NOMEM, "%s on comm '%s': out of memory for %d requests",
                            op->name, c->name, n);
    for (int i = c->req_cap; i < cap; i++) c->reqs[i] = MPI_REQUEST_NULL;
    c->req_cap = cap;
    return ZT_OK;
}

int zt_comm_ready_(zt_comm *c, const char *name, zt_error *err) {
    if (c->broken)
        return zt_error_set(err, ZT_ERR_PEER,
                            "%s on comm '%s': the comm is unusable after an earlier failure: %s",
                            name, c->name, c->broken_msg);
    if (c->op_active)
        return zt_error_set(err, ZT_ERR_INTERNAL,
                            "%s on comm '%s': a non-blocking %s is still in flight (one op per "
                            "comm; finish it with zt_comm_op_wait first)",
                            name, c->name, c->op.name);
    return ZT_OK;
}

int zt_op_begin_(zt_comm *c, int kind, int subkind, const char *name, const char *tag,
                 size_t payload, int nreq, bool count, bool seq0, zt_comm_op **out,
                 zt_error *err) {
    int rc = zt_comm_ready_(c, name, err);
    if (rc) return rc;
    zt_comm_op *op = &c->op;
    memset(op, 0, sizeof *op);
    op->c = c;
    op->kind = kind;
    op->subkind = subkind;
    op->name = name;
    snprintf(op->tag, sizeof op->tag, "%s", tag ? tag : "");
    op->payload = payload;
    op->count = count;
    int seq = 0;
    if (!seq0) {
        c->seq++;
        seq = 1 + (int)((c->seq - 1) % (uint64_t)(c->tag_seq_mod - 1));
    }
    if (!seq0 && (rc = zt_fingerprint_check_(c, name, tag, payload, err))) return rc; /* debug mode only */
    op->mpi_tag = (seq << 3) | subkind;
    rc = zt_op_reserve_(op, nreq, err);
    if (rc) {
        c->broken = true; /* the peers have started this collective; we cannot follow */
        snprintf(c->broken_msg, sizeof c->broken_msg, "%s", err ? err->msg : "out of memory");
        return rc;
    }
    for (int i = 0; i < nreq; i++) {
        c->reqs[i] = MPI_REQUEST_NULL;
        memset(&c->info[i], 0, sizeof c->info[i]);
    }
    op->nreq = nreq;
    op->t_start = MPI_Wtime();
    op->board_slot = zt_board_begin_(c, name, op->tag, c->seq);
    c->op_active = true;
    *out = op;
    return ZT_OK;
}

int zt_op_post_(zt_comm_op *op, int idx, bool recv, void *buf, size_t bytes, int peer,
                zt_error *err) {
    return zt_op_post_tag_(op, idx, recv, buf, bytes, peer, op->mpi_tag, err);
}

int zt_op_post_tag_(zt_comm_op *op, int idx, bool recv, void *buf, size_t bytes, int peer,
                    int tag, zt_error *err) {
    zt_comm *c = op->c;
    zt_req_info *in = &c->info[idx];
    in->peer = peer;
    in->bytes = bytes;
    in->recv = recv;
    in->state = ZT_REQ_PENDING;
    int rc = recv ? MPI_Irecv(buf, (int)bytes, MPI_BYTE, peer, tag, c->mpi, &c->reqs[idx])
                  : MPI_Isend(buf, (int)bytes, MPI_BYTE, peer, tag, c->mpi, &c->reqs[idx]);
    if (rc != MPI_SUCCESS) {
        in->state = ZT_REQ_UNPOSTED;
        return zt_op_mpi_fail_(op, rc, recv ? "MPI_Irecv from" : "MPI_Isend to", peer, err);
    }
    op->pending++;
    return ZT_OK;
}

int zt_advance_when_idle_(zt_comm_op *op, zt_error *err) {
    if (op->pending == 0) op->done = true;
    return ZT_OK;
}

/* ---- finish, fail -------------------------------------------------------------------------- */

static void op_finish(zt_comm_op *op) {
    zt_comm *c = op->c;
    if (op->count) {
        double s = MPI_Wtime() - op->t_start;
        zt_counters_add_(c, op->kind, op->sent, op->recvd, s, op->t_wait);
        zt_commlog_record(op->kind, op->payload, s, op->t_wait, c->size, c->name);
        zt_trace_complete("comm", op->name, s, 6,
                          (zt_trace_arg[]){ZT_TARG_STR("tag", op->tag), ZT_TARG_STR("comm", c->name),
                                           ZT_TARG_NUM("bytes", op->payload), ZT_TARG_NUM("sent", op->sent),
                                           ZT_TARG_NUM("recv", op->recvd), ZT_TARG_NUM("wait_ms", 1e3 * op->t_wait)});
    }
    zt_board_end_(op->board_slot, true);
    c->op_active = false;
}

int zt_op_fail_(zt_comm_op *op, int code, zt_error *err) {
    zt_comm *c = op->c;
    if (!c->op_active) return code; /* already failed */
    /* cancel what is pending; cancelled receives complete at once, give them a moment */
    int left = 0;
    for (int i = 0; i < op->nreq; i++)
        if (c->info[i].state == ZT_REQ_PENDING && c->reqs[i] != MPI_REQUEST_NULL) {
            MPI_Cancel(&c->reqs[i]);
            left++;
        }
    double t0 = MPI_Wtime();
    while (left > 0 && MPI_Wtime() - t0 < 0.25) {
        left = 0;
        for (int i = 0; i < op->nreq; i++) {
            if (c->reqs[i] == MPI_REQUEST_NULL) continue;
            int flag = 0;
            MPI_Status st;
            if (MPI_Test(&c->reqs[i], &flag, &st) != MPI_SUCCESS || !flag) left++;
        }
        if (left) sched_yield();
    }
    for (int i = 0; i < op->nreq; i++)
        if (c->reqs[i] != MPI_REQUEST_NULL) MPI_Request_free(&c->reqs[i]);
    c->broken = true;
    snprintf(c->broken_msg, sizeof c->broken_msg, "%s", err ? err->msg : zt_status_name(code));
    zt_board_end_(op->board_slot, false);
    c->op_active = false;
    return code;
}

/* ---- progress ---------------------------------------------------------------------------- */

/* One MPI_Testsome over the op's requests; handles what finished. *progressed: any finished. */
static int op_progress(zt_comm_op *op, bool *progressed, zt_error *err) {
    zt_comm *c = op->c;
    *progressed = false;
    if (op->poll) { /* data moved by loads and stores (all_reduce_shm.c) */
        int r2 = op->poll(op, progressed, err);
        if (r2) return zt_op_fail_(op, r2, err);
        if (op->nreq == 0) return ZT_OK;
    }
    int outcount = 0;
    int rc = MPI_Testsome(op->nreq, c->reqs, &outcount, c->idx, c->st);
    if (rc != MPI_SUCCESS && rc != MPI_ERR_IN_STATUS)
        return zt_op_mpi_fail_(op, rc, "MPI_Testsome", -1, err);
    if (outcount == MPI_UNDEFINED) outcount = 0;
    for (int k = 0; k < outcount; k++) {
        int i = c->idx[k];
        zt_req_info *in = &c->info[i];
        in->state = ZT_REQ_DONE;
        op->pending--;
        if (rc == MPI_ERR_IN_STATUS && c->st[k].MPI_ERROR != MPI_SUCCESS) {
            int cls = 0;
            MPI_Error_class(c->st[k].MPI_ERROR, &cls);
            if (cls == MPI_ERR_TRUNCATE) {
                char where[256], who[64];
                zt_op_where_(op, where, sizeof where);
                zt_comm_rank_label_(c, in->peer, who, sizeof who);
                zt_error_set(err, ZT_ERR_MISMATCH,
                             "%s: %s sent more than the %zu bytes expected: the ranks disagree on "
                             "the collective's sizes (or on ZT_COMM_CHUNK_BYTES)",
                             where, who, in->bytes);
                return zt_op_fail_(op, ZT_ERR_MISMATCH, err);
            }
            return zt_op_mpi_fail_(op, c->st[k].MPI_ERROR, in->recv ? "receive from" : "send to",
                                   in->peer, err);
        }
        if (in->recv) {
            int got = 0;
            MPI_Get_count(&c->st[k], MPI_BYTE, &got);
            if ((size_t)got != in->bytes) {
                char where[256], who[64];
                zt_op_where_(op, where, sizeof where);
                zt_comm_rank_label_(c, in->peer, who, sizeof who);
                zt_error_set(err, ZT_ERR_MISMATCH,
                             "%s: %s sent %d bytes where %zu were expected: the ranks disagree on "
                             "the collective's sizes (or on ZT_COMM_CHUNK_BYTES)",
                             where, who, got, in->bytes);
                return zt_op_fail_(op, ZT_ERR_MISMATCH, err);
            }
            op->recvd += in->bytes;
        } else {
            op->sent += in->bytes;
        }
        if (op->on_complete) {
            int r2 = op->on_complete(op, i, err);
            if (r2) return zt_op_fail_(op, r2, err);
        }
    }
    if (outcount > 0) {
        *progressed = true;
        int r2 = op->advance(op, err);
        if (r2) return zt_op_fail_(op, r2, err);
    }
    return ZT_OK;
}

int zt_op_kick_(zt_comm_op *op, zt_error *err) {
    int rc = op->advance(op, err);
    if (rc) return zt_op_fail_(op, rc, err);
    return ZT_OK;
}

static _Atomic double g_job_timeout; /* > 0: every comm's deadline (zt_comm_set_job_timeout) */

static double deadline_of(const zt_comm *c) {
    double t = g_job_timeout;
    return t > 0 ? t : c->timeout;
}

/* The deadline message: the peers of pending receives, else of pending sends; then what every
 * rank was doing (board.c). This rank's ring goes to stderr. */
static int op_timeout(zt_comm_op *op, zt_error *err) {
    zt_comm *c = op->c;
    char where[256], list[400] = "";
    zt_op_where_(op, where, sizeof where);
    bool want_recv = false;
    for (int i = 0; i < op->nreq; i++)
        if (c->info[i].state == ZT_REQ_PENDING && c->info[i].recv) want_recv = true;
    bool *lag = NULL;
    if (op->lagging && (lag = calloc((size_t)c->size, sizeof *lag))) {
        op->lagging(op, lag); /* no requests: the peers whose counters are behind */
        want_recv = true;
    }
    int listed = 0, more = 0;
    size_t len = 0;
    for (int p = 0; p < c->size; p++) {
        bool hit = lag && lag[p];
        for (int i = 0; i < op->nreq && !hit; i++)
            hit = c->info[i].state == ZT_REQ_PENDING && c->info[i].recv == want_recv &&
                  c->info[i].peer == p;
        if (!hit) continue;
        if (listed == 12) {
            more++;
            continue;
        }
        char lab[64];
        zt_comm_rank_label_(c, p, lab, sizeof lab);
        /* "rank 3" the first time, then just "5 (world 9)" */
        const char *s = listed ? lab + 5 : lab;
        int w = snprintf(list + len, sizeof list - len, "%s%s", listed ? ", " : "", s);
        if (w > 0 && (size_t)w < sizeof list - len) len += (size_t)w;
        listed++;
    }
    if (listed > 1) { /* "rank 2, 3" -> "ranks 2, 3" */
        memmove(list + 5, list + 4, strlen(list + 4) + 1);
        list[4] = 's';
    }
    if (more) snprintf(list + strlen(list), sizeof list - strlen(list), " and %d more", more);
    free(lag);
    char peers[640];
    zt_board_peers_(c, peers, sizeof peers);
    if (want_recv)
        zt_error_set(err, ZT_ERR_PEER, "%s: no data from %s after %g s (comm.timeout_s or ZT_COMM_TIMEOUT). What the ranks were "
                     "doing: %s", where, list, deadline_of(c), peers);
    else
        zt_error_set(err, ZT_ERR_PEER, "%s: %s did not take our data after %g s (comm.timeout_s or ZT_COMM_TIMEOUT). What the ranks "
                     "were doing: %s", where, list, deadline_of(c), peers);
    zt_board_dump_(stderr);
    return zt_op_fail_(op, ZT_ERR_PEER, err);
}

int zt_op_wait_(zt_comm_op *op, zt_error *err) {
    zt_comm *c = op->c;
    double t0 = MPI_Wtime(), last = t0;
    while (!op->done) {
        bool progressed;
        int rc = op_progress(op, &progressed, err);
        if (rc) return rc;
        if (op->done) break;
        double now = MPI_Wtime();
        if (progressed) {
            last = now;
            continue;
        }
        if (op->pending == 0 && !op->poll) {
            zt_error_set(err, ZT_ERR_INTERNAL, "%s on comm '%s': nothing pending but not done",
                         op->name, c->name);
            return zt_op_fail_(op, ZT_ERR_INTERNAL, err);
        }
        double idle = now - last;
        if (idle > deadline_of(c)) return op_timeout(op, err);
        if (idle > 10 * c->spin) {
            struct timespec ts = {0, 50000};
            nanosleep(&ts, NULL);
        } else if (idle > c->spin) {
            sched_yield();
        }
    }
    op->t_wait += MPI_Wtime() - t0;
    op_finish(op);
    return ZT_OK;
}

/* ---- public: timeouts and the non-blocking interface ---------------------------------------- */

int zt_comm_set_timeout(zt_comm *c, double seconds) {
    if (!c || !(seconds > 0) || !isfinite(seconds)) return ZT_ERR_USAGE;
    c->timeout = seconds;
    return ZT_OK;
}

double zt_comm_timeout(const zt_comm *c) { return c ? deadline_of(c) : 0; }

void zt_comm_set_job_timeout(double seconds) { g_job_timeout = seconds > 0 && isfinite(seconds) ? seconds : 0; }

int zt_comm_set_spin(zt_comm *c, double seconds) {
    if (!c || !(seconds >= 0) || !isfinite(seconds)) return ZT_ERR_USAGE;
    c->spin = seconds;
    return ZT_OK;
}

bool zt_comm_broken(const zt_comm *c) { return c && c->broken; }

static int op_check(zt_comm_op *op, const char *what, zt_error *err) {
    if (!op) return zt_error_set(err, ZT_ERR_USAGE, "%s: op is NULL", what);
    zt_comm *c = op->c;
    if (!c->op_active || op != &c->op)
        return zt_error_set(err, ZT_ERR_INTERNAL, "%s on comm '%s': the op already finished", what,
                            c->name);
    return ZT_OK;
}

int zt_comm_op_test(zt_comm_op *op, bool *done, zt_error *err) {
    zt_error local;
    if (!err) err = &local;
    *done = false;
    if (!op) return zt_error_set(err, ZT_ERR_USAGE, "zt_comm_op_test: op is NULL");
    zt_comm *c = op->c;
    int rc = zt_comm_enter_(c, "zt_comm_op_test", err);
    if (rc) return rc;
    rc = op_check(op, "zt_comm_op_test", err);
    if (!rc) {
        bool progressed;
        rc = op->done ? ZT_OK : op_progress(op, &progressed, err);
        if (!rc && op->done) {
            op_finish(op);
            *done = true;
        } else if (rc) {
            *done = true; /* failed: the op is gone */
        }
    }
    zt_comm_leave_(c);
    return rc;
}

int zt_comm_op_wait(zt_comm_op *op, zt_error *err) {
    zt_error local;
    if (!err) err = &local;
    if (!op) return zt_error_set(err, ZT_ERR_USAGE, "zt_comm_op_wait: op is NULL");
    zt_comm *c = op->c;
    int rc = zt_comm_enter_(c, "zt_comm_op_wait", err);
    if (rc) return rc;
    rc = op_check(op, "zt_comm_op_wait", err);
    zt_trace_begin("wait", op->name);
    if (!rc) rc = zt_op_wait_(op, err);
    zt_trace_end();
    zt_comm_leave_(c);
    return rc;
}
