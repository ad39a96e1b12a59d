/* p2p.h - point-to-point transfers between pipeline stages: a non-blocking send or receive of
 * bytes to or from one rank of a comm, and its wait under the job's collective deadline (a peer
 * that stops answering is ZT_ERR_PEER naming the transfer, not a hang).
 *
 * Unlike the collectives (one op in flight per comm), any number of transfers may be in flight on
 * one comm: each is its own MPI request, matched by (peer, tag). The pipeline gives each transfer
 * a tag from the micro-batch index and the direction, so the messages of different micro-batches
 * never match each other. Call from one thread per comm (the pipeline's: the main thread). */
#ifndef ZT_COMM_P2P_H
#define ZT_COMM_P2P_H

#include "comm/comm.h"

typedef struct zt_p2p {
    void *req;          /* the MPI request (opaque here) */
    bool active;
    bool recv;
    size_t bytes;
    int peer, tag;
    char what[48];      /* names the transfer in errors: "activation of micro-batch 3" */
    double waited_s;    /* seconds the last zt_p2p_wait blocked */
    double posted_at;   /* omp_get_wtime() at the post: the comm log's transfer time runs from it */
} zt_p2p;

/* Posts the send of buf (bytes) to comm rank `peer` with `tag` (>= 0); buf must stay untouched
 * until zt_p2p_wait. */
int zt_p2p_isend(zt_comm *c, const void *buf, size_t bytes, int peer, int tag, const char *what, zt_p2p *p,
                 zt_error *err);
/* Posts the receive of exactly `bytes` bytes from `peer` with `tag` into buf. */
int zt_p2p_irecv(zt_comm *c, void *buf, size_t bytes, int peer, int tag, const char *what, zt_p2p *p,
                 zt_error *err);
/* Waits for p (a no-op when none is posted); a receive of another length is ZT_ERR_MISMATCH. */
int zt_p2p_wait(zt_comm *c, zt_p2p *p, zt_error *err);
/* Bytes sent and received by this process's transfers on c since the last reset (the pipeline's
 * link and context parallelism's comm count apart). */
void zt_p2p_bytes(zt_comm *c, uint64_t *sent, uint64_t *recvd, bool reset);

#endif
