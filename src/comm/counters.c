/* counters.c - per-comm traffic counters: calls, payload bytes each way, seconds (start to
 * completion) and seconds blocked in waits, per collective kind. The engine logs them per step.
 *
 * Invariants: updated once per successfully finished collective, by the thread that finished
 * it, under counters_lock; read and reset from any thread. Bytes are payload only (what the
 * collective's contract says it moves); MPI's own headers and handshakes are not counted.
 */
#include "comm/comm_internal.h"

#include <string.h>

static void add(zt_coll_counters *t, uint64_t sent, uint64_t recvd, double s, double w) {
    t->calls++;
    t->bytes_sent += sent;
    t->bytes_recv += recvd;
    t->seconds += s;
    t->wait_seconds += w;
}

void zt_counters_add_(zt_comm *c, int kind, uint64_t sent, uint64_t recvd, double seconds,
                      double wait_seconds) {
    if (kind < 0 || kind >= ZT_COLL_NKINDS) return;
    pthread_mutex_lock(&c->counters_lock);
    add(&c->counters.kind[kind], sent, recvd, seconds, wait_seconds);
    add(&c->counters.total, sent, recvd, seconds, wait_seconds);
    pthread_mutex_unlock(&c->counters_lock);
}

void zt_comm_counters_get(const zt_comm *c, zt_comm_counters *out) {
    zt_comm *m = (zt_comm *)c; /* the lock is the only thing touched */
    pthread_mutex_lock(&m->counters_lock);
    *out = c->counters;
    pthread_mutex_unlock(&m->counters_lock);
}

void zt_comm_counters_reset(zt_comm *c) {
    pthread_mutex_lock(&c->counters_lock);
    memset(&c->counters, 0, sizeof c->counters);
    pthread_mutex_unlock(&c->counters_lock);
}

const char *zt_coll_kind_name(int kind) {
    switch (kind) {
    case ZT_COLL_REDUCE_SCATTER: return "reduce_scatter";
    case ZT_COLL_ALL_GATHER: return "all_gather";
    case ZT_COLL_ALL_REDUCE: return "all_reduce";
    case ZT_COLL_BROADCAST: return "broadcast";
    case ZT_COLL_SMALL: return "small";
    case ZT_COLL_SETUP: return "setup";
    case ZT_COLL_P2P: return "p2p";
    case ZT_COLL_COMPRESSED_ALL_REDUCE: return "compressed_all_reduce";
    case ZT_COLL_ALL_TO_ALL: return "all_to_all";
    default: return "?";
    }
}
