/* comm_internal.h - what the files of src/comm/ share: the zt_comm struct, the op in flight and
 * the request bookkeeping the deadline loop polls. Not for use outside src/comm/ (the engine
 * sees only comm.h, which does not include mpi.h).
 *
 * Invariants:
 *   - A comm has at most one op in flight (c->op, c->op_active); its requests are the first
 *     c->op.nreq entries of c->reqs / c->info, MPI_REQUEST_NULL until posted.
 *   - Public entry points bracket their work with zt_comm_enter_ / zt_comm_leave_ (the one-thread
 *     guard); internal helpers (suffix _) assume the caller entered.
 *   - Message tags are (seq << 3) | subkind, seq counting ops on this comm (1..tag_seq_mod-1),
 *     so messages of different collectives never match each other. seq 0 is reserved for setup
 *     fences, which use a fixed tag so ranks that disagree on seq can still meet and say so.
 */
#ifndef ZT_COMM_INTERNAL_H
#define ZT_COMM_INTERNAL_H

#include "comm/comm.h"

#include <mpi.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

/* subkind: the low 3 bits of a message tag */
enum {
    ZT_SUB_RS = 0,
    ZT_SUB_AG = 1,
    ZT_SUB_AR_RS = 2,
    ZT_SUB_AR_AG = 3,
    ZT_SUB_BCAST = 4,
    ZT_SUB_SMALL = 5,
    ZT_SUB_SETUP = 6,
    /* 7: an op whose messages between two ranks match in the order they were posted (the tag's seq
     * keeps different ops apart, so two such kinds may share the value) */
    ZT_SUB_CAR = 7, /* compressed_all_reduce.c: both phases */
    ZT_SUB_A2A = 7  /* all_to_all.c: the counts, then the blocks */
};

enum { ZT_REQ_UNPOSTED = 0, ZT_REQ_PENDING = 1, ZT_REQ_DONE = 2 };

/* Chunks in flight. Measured on 2 ranks (bench/RESULTS.md "Collectives"): windows of 2-4
 * chunks leave 4-16 MB all-reduces at 70-85% of Open MPI, 8 brings them to ~90%. */
#define ZT_RS_MAX_DEPTH 8  /* reduce-scatter rounds: 8/(N-1) clamped to [2, 8] (zt_rs_depth_), so
                              about 8 chunks of scratch per rank whatever N */
#define ZT_COMM_WINDOW 8   /* all-gather / broadcast chunks in flight per peer and direction */
#define ZT_COMM_DEFAULT_TIMEOUT 300.0     /* seconds */
#define ZT_COMM_DEFAULT_CHUNK (256u << 10) /* bytes: measured, bench/RESULTS.md "Collectives" */
#define ZT_COMM_DEFAULT_SPIN 1e-3         /* seconds a wait spins before it yields */
#define ZT_COMM_MIN_CHUNK 4096u
/* 2-rank all-reduces up to this many bytes exchange whole vectors (all_reduce_exchange.c):
 * measured, bench/RESULTS.md "Collectives" */
#define ZT_COMM_DEFAULT_AR_EXCHANGE (64u << 10)
/* The shared segment (shm.c, all_reduce_shm.c): slots of ZT_SHM_SLOT bytes, zt_shm_depth_(N) steps in
 * flight (8 on 2 ranks); a step moves a piece of each block of block/8 bytes clamped to
 * [ZT_SHM_MIN_PIECE, ZT_SHM_SLOT]. Measured on 2 ranks (bench/RESULTS.md "Collectives"): 64 KiB pieces
 * win up to ~1 MB, 256 KiB ones from ~8 MB. Every all-reduce up to ZT_COMM_AR_SHM_BYTES (default: any
 * size) goes through it. */
#define ZT_SHM_SLOT (256u << 10)
#define ZT_SHM_MIN_PIECE (64u << 10)
#define ZT_SHM_MAX_DEPTH 8 /* steps in flight on 2 ranks; ZT_SHM_MAX_DEPTH / (N-1) beyond, at least 2 */
#define ZT_SHM_MAX_RANKS 16 /* beyond, the segment (2 x N x 256 KiB per rank) grows too big: messages */
#define ZT_SHM_HEADER 4096u
/* Shared buffers (shared_buffers.c) a process has at once; beyond, zt_shared_alloc gives plain memory */
#define ZT_SHARED_MAX 128
/* Where a block lies in one of this process's shared buffers: what a peer needs to map it */
typedef struct zt_shared_ref {
    uint64_t id; /* the buffer's, never reused; 0: none */
    int fd;      /* its memfd in this process (a peer opens /proc/<pid>/fd/<fd>) */
    uint64_t off, bytes; /* the block's offset in it; the buffer's bytes */
} zt_shared_ref;
/* Whether [p, p + len) lies in one shared buffer (then *ref says which and where) */
bool zt_shared_find_(const void *p, size_t len, zt_shared_ref *ref);
/* The live shared buffers' ids into ids[ZT_SHARED_MAX]; returns how many */
int zt_shared_live_(uint64_t *ids);
/* A peer's shared buffer mapped here (read only) by the all-to-all, until its owner frees it */
typedef struct zt_peer_map {
    int rank;
    uint64_t id;
    const unsigned char *map;
    size_t bytes;
} zt_peer_map;
/* On 2 ranks every all-reduce through the segment takes the one-shot (each rank publishes its whole
 * vector in pieces through the segment's D x N slots, one piece a slot, and sums all of it: one
 * hand-over per piece instead of the rings' three): pieces of ZT_SHM_OS_PIECE_SMALL bytes up to
 * ZT_SHM_OS_SMALL_MAX bytes, of a whole slot above. A rank publishes with streaming stores (past its
 * caches, to memory) when the vector is larger than the ring (16 slots: 4 MiB), or when the peer's core is
 * far (c->shm_far: its counters took more than ZT_SHM_FAR_NS to arrive, as between the two
 * dies of the Zen 4 VMs, where a line still in the writer's cache crosses slowly); else with
 * ordinary stores (the peer then reads from the cache the two cores share), at most ZT_SHM_OS_LEAD
 * pieces ahead of its own sums. Measured on 2 ranks: zt_ar_shm_mode_ (all_reduce.c) and
 * bench/RESULTS.md "Collectives". */
#define ZT_SHM_OS_PIECE_SMALL (64u << 10)
#define ZT_SHM_OS_SMALL_MAX ((size_t)4 << 20)
#define ZT_SHM_FAR_NS 100.0
#define ZT_SHM_OS_LEAD 6 /* pieces a rank publishes ahead of its sums with ordinary stores */
/* How an all-reduce through the segment moves its bytes (zt_ar_shm_mode_ picks: by rank count). */
enum { ZT_SHM_RINGS = 0, ZT_SHM_ONESHOT = 1, ZT_SHM_A2A = 2 /* all_to_all_shm.c: not an all-reduce */ };
/* A region's counters (the first bytes of its header), written by its rank only, each on its own
 * cache line; they count the comm's global steps through the segment and only grow. The
 * all-reduces' hand-overs (all_reduce_shm.c) and the all-to-all's (all_to_all_shm.c, which keeps
 * all three equal to its steps so that any op after it finds them where it expects). */
typedef struct zt_shm_counters {
    _Atomic uint64_t pub_in;   /* steps whose input pieces this rank has put in its input slots */
    char pad0[56];
    _Atomic uint64_t pub_out;  /* steps whose block sum this rank has put in its output slot */
    char pad1[56];
    _Atomic uint64_t done_out; /* steps whose other blocks' sums this rank has copied out */
    char pad2[56];
} zt_shm_counters;
_Static_assert(sizeof(zt_shm_counters) <= 256, "counters fit the region's header before the all-to-all's sizes");
#define ZT_COMM_DEFAULT_AR_SHM ((size_t)1 << 40)

typedef struct zt_req_info {
    int peer;      /* comm rank at the other end */
    int aux;       /* op-specific: reduce-scatter round, broadcast chunk, all-reduce chunk */
    size_t bytes;  /* message length (a receive checks the arrived length against it) */
    bool recv;
    uint8_t state; /* ZT_REQ_* */
} zt_req_info;

struct zt_comm_op {
    zt_comm *c;
    int kind;               /* zt_coll_kind, for counters */
    int subkind;            /* ZT_SUB_*, for the message tag */
    const char *name;       /* "reduce_scatter", ... */
    char tag[64];           /* the caller's label */
    size_t payload;         /* bytes shown in messages */
    bool count;             /* add to the counters when finished */
    int mpi_tag;
    double t_start, t_wait; /* start time; seconds blocked in waits */
    uint64_t sent, recvd;   /* payload bytes of finished requests */
    int nreq, pending;      /* requests in use; posted and not finished */
    bool done;              /* set by advance when the collective's work is complete */
    int board_slot;         /* this op's entry on the status board (board.c), -1: none */
    /* Called once per finished request (may be NULL), then advance once per batch and once
     * right after the start; advance posts what can be posted, sums what can be summed and sets
     * done. Either returns a zt_status (non-zero fails the op). */
    int (*on_complete)(zt_comm_op *op, int idx, zt_error *err);
    int (*advance)(zt_comm_op *op, zt_error *err);
    /* Ops that move data without MPI requests (all_reduce_shm.c): poll does what it can,
     * *progressed when anything moved; lagging marks the peers it waits for (the deadline
     * message). NULL for message ops. */
    int (*poll)(zt_comm_op *op, bool *progressed, zt_error *err);
    void (*lagging)(const zt_comm_op *op, bool *mark);

    /* reduce-scatter (and the first phase of all-reduce) */
    struct {
        zt_dtype dtype;      /* the elements' type (fp32, bf16, fp16), tree_sum.c's rule */
        size_t elem;         /* bytes per element */
        const unsigned char *send; /* the whole send buffer (blocks rank-major) */
        const unsigned char *own;  /* own contribution: send + off[me] elements */
        unsigned char *recv; /* counts[me] elements */
        size_t n;            /* counts[me] */
        size_t chunk;        /* elements per chunk (chunk_bytes / elem) */
        int nchunks;         /* chunks of the own block */
        int next_sum;        /* next chunk to sum */
        int send_base;       /* request index of the first send slot */
        int depth;           /* rounds of chunks in flight (zt_rs_depth_) */
        int arrived[ZT_RS_MAX_DEPTH];
        unsigned char *slots; /* scratch: depth x (N-1) x min(chunk, n) elements */
    } rs;
    /* all-gather (and the second phase of all-reduce) */
    struct {
        const unsigned char *send; /* own block */
        unsigned char *recv;       /* all blocks */
        size_t elem, chunk;        /* bytes per element, elements per chunk */
        int send_base;
    } ag;
    /* all-reduce: the reduce-scatter above plus an all-gather fed chunk by chunk */
    struct {
        unsigned char *buf;      /* n elements of op->rs.elem bytes */
        int tag_ag;              /* the all-gather messages' tag (the op's is the reduce-scatter's) */
        int ag_base;             /* first all-gather receive slot; sends follow W(N-1) later */
        int (*rs_on_complete)(zt_comm_op *op, int idx, zt_error *err);
        int (*rs_advance)(zt_comm_op *op, zt_error *err);
        int *sent_contig;        /* [N] leading chunks of block r whose reduce-scatter send is done */
        int *sent_mark;          /* [N][depth] last chunk finished through each send slot */
        int *next_ag_send;       /* [N] next summed chunk to send to each peer */
    } ar;
    /* all-reduce by exchanging whole vectors (all_reduce_exchange.c) */
    struct {
        zt_dtype dtype;
        unsigned char *buf;  /* n elements of elem bytes, in place */
        size_t n, elem;
        size_t chunk, cap;   /* elements per chunk; per scratch slot (min(n, chunk)) */
        int nchunks, depth, next_sum, send_base;
        int arrived[ZT_RS_MAX_DEPTH]; /* pieces of the round's chunk here */
        int *sent_contig;    /* [N] leading chunks whose send to rank r has finished */
        int *sent_mark;      /* [N][depth] last chunk finished through each send slot */
        unsigned char *slots; /* scratch: depth x (N-1) x cap elements */
    } xc;
    /* all-reduce through the shared segment (all_reduce_shm.c) */
    struct {
        zt_dtype dtype;
        unsigned char *buf; /* in place */
        size_t elem, chunk; /* bytes per element; elements per step and block (at most a slot) */
        uint64_t base;      /* the comm's global step of this op's step 0 */
        uint64_t fence;     /* nothing is written to the segment before every peer's done_out
                               reaches it (the previous op used the slots another way) */
        int mode;           /* ZT_SHM_RINGS / _ONESHOT */
        size_t n;           /* elements of buf */
        int nsteps;         /* chunks of the longest block */
        bool nt;            /* one-shot: this rank publishes with streaming stores */
        int far, near;      /* one-shot: arrivals of the peer's pub_in timed above / below ZT_SHM_FAR_NS */
        int k_pub, k_sum, k_copy; /* steps published / summed / copied out */
    } sh;
    /* all-to-all through the shared segment (all_to_all_shm.c) */
    struct {
        const void *const *send; /* [N] blocks for each rank */
        void *const *recv;       /* [N] rooms for each rank's block */
        const uint64_t *mine;    /* [2N] this rank's size for p and room for p's block */
        uint64_t *theirs;        /* [2N] p's size for this rank and its room for this rank's block */
        size_t *ssz, *rsz;       /* [N] bytes that move to / from p (0 where a block is over its room) */
        uint64_t base, fence;    /* the comm's global step of step 0; the fence as sh.fence */
        size_t piece;            /* bytes of a block per step */
        int lane_depth;          /* steps in flight per lane */
        int nsteps;              /* pieces of the longest block that moves (at least 1) */
        bool ready;              /* every rank's sizes read: nsteps, ssz, rsz known */
        bool cma;                /* the single copy: each rank reads its blocks from the senders' memory */
        int k_pub, k_get;        /* steps published / copied out */
    } a2;
    /* broadcast */
    struct {
        unsigned char *buf;
        size_t bytes, chunk;
        int nchunks, parent, nchildren, children[32];
        int have;                      /* chunks 0..have-1 are here */
        int next_recv;                 /* next chunk to post a receive for */
        int slot_chunk[ZT_COMM_WINDOW]; /* chunk received through each receive slot, -1 none */
        int next_send[32];             /* next chunk to send to each child */
        int send_base;
    } bc;
    /* compressed all-reduce (compressed_all_reduce.c): 1-bit signs and one scale per block */
    struct {
        float *buf, *worker_error, *server_error;
        size_t n;
        unsigned char *send1, *recv1, *send2, *recv2; /* staging in the comm's scratch */
        size_t *seg_off;  /* [N+1] byte offsets of the N blocks' segments (4 + ceil(count/8) each) */
        int phase;        /* 1: signs to their servers; 2: the servers' signs to everyone */
        int phase2_base;  /* the first request of phase 2 (phase 1's chunks come first) */
    } car;
};

struct zt_comm {
    MPI_Comm mpi;
    bool owned;             /* MPI_Comm_free on zt_comm_free */
    int rank, size;
    int *world_ranks;       /* [size] */
    bool is_world;          /* same ranks in the same order as MPI_COMM_WORLD: messages say
                               "rank 3" instead of "rank 3 (world 7)" */
    char name[32];
    double timeout;         /* seconds without progress */
    double spin;            /* seconds of no progress a wait spins before yielding */
    size_t chunk_bytes;
    size_t ar_exchange_max; /* 2-rank all-reduces of at most this many bytes exchange whole vectors */
    size_t ar_shm_max;      /* all-reduces of at most this many bytes use the shared segment */
    unsigned char *shm_map; /* the shared segment (shm.c), NULL when there is none */
    size_t shm_bytes;
    uint64_t shm_step;      /* global steps begun through the segment */
    int shm_last;           /* ZT_SHM_* of the last all-reduce through the segment */
    bool shm_far;           /* 2 ranks: the peer's core was far in the last one-shot that timed it */
    bool shm_cma;           /* every rank can read every other's memory (process_vm_readv, probed and
                               agreed at the segment's creation): the all-to-all's single copy */
    bool a2a_cma;           /* the all-to-all takes the single copy (shm_cma; zt_comm_set_a2a_single_copy) */
    bool a2a_map;           /* the single copy maps a sender's shared buffer (shared_buffers.c) and reads a
                               block in it with loads; off after a mapping failed (zt_comm_set_a2a_map) */
    zt_peer_map *peer_maps; /* the peers' shared buffers mapped here (all_to_all_shm.c) */
    int n_peer_maps, cap_peer_maps;
    int shm_stores;         /* zt_ar_stores: how the one-shot publishes */
    uint64_t shm_seen;      /* 2 ranks: the peer's pub_in when this rank last read it */
    int ar_algo;            /* zt_ar_algo: ZT_AR_ALGO_AUTO picks by size (zt_ar_algo_) */
    int tag_seq_mod;        /* seq values available in a tag */
    uint64_t seq;           /* ops begun on this comm */
    bool broken;
    char broken_msg[1024];
    atomic_int busy;        /* the one-thread guard */
    _Atomic uint64_t p2p_sent, p2p_recvd; /* point-to-point payload bytes completed (p2p.c) */

    zt_comm_op op;
    bool op_active;

    /* grown on demand, kept until free */
    MPI_Request *reqs;
    zt_req_info *info;
    MPI_Status *st;
    int *idx;
    int req_cap;
    size_t *off;            /* [size+1] block offsets of the op being started */
    size_t *ucounts;        /* [size] uniform counts for small ops / all-reduce */
    const void **parts;     /* [size] tree-sum inputs */
    int *next_send, *next_recv; /* [size] next chunk to post per peer: messages between two
                                   ranks match in posting order, so each peer's chunks are
                                   posted strictly in order */
    int *iwork;             /* [size * (2 + ZT_RS_MAX_DEPTH)] per-peer state of all_reduce.c */
    float *scratch;
    size_t scratch_bytes;
    void *small;            /* small-op staging */
    size_t small_bytes;

    pthread_mutex_t counters_lock;
    zt_comm_counters counters;
};

/* ---- world.c ---- */
/* "rank 3" on the world, "rank 3 (world 7)" on a sub-comm. */
void zt_comm_rank_label_(const zt_comm *c, int r, char *buf, size_t cap);
/* What a new comm starts with: ZT_COMM_TIMEOUT / ZT_COMM_CHUNK_BYTES / ZT_COMM_SPIN_US /
 * ZT_COMM_AR_EXCHANGE_BYTES, the defaults where unset; a split or dup inherits its parent's. */
typedef struct zt_comm_settings {
    double timeout;         /* seconds */
    size_t chunk;           /* bytes */
    double spin;            /* seconds */
    size_t ar_exchange_max; /* bytes: zt_ar_algo_ */
    size_t ar_shm_max;      /* bytes: zt_ar_algo_; 0: no shared segment */
} zt_comm_settings;
int zt_comm_env_(zt_comm_settings *out, zt_error *err);

/* ---- board.c: the status board (flight recorder) of this rank, in $ZT_RUN_DIR ---- */
void zt_board_open_(int world_rank);  /* at init; no-op without $ZT_RUN_DIR */
void zt_board_close_(void);           /* at finalize: unmaps and removes this rank's file */
/* Records an op's begin; returns the ring slot for zt_board_end_ (-1: no board). */
int zt_board_begin_(const zt_comm *c, const char *op, const char *tag, uint64_t seq);
void zt_board_end_(int slot, bool ok);
/* "rank 0 (this rank): step 5, in all_gather 'loss' #41 on world for 5.0 s; rank 1: ..." for every
 * rank of c, into out (cap bytes). */
void zt_board_peers_(const zt_comm *c, char *out, size_t cap);
/* This rank's ring, oldest first, to f. */
void zt_board_dump_(FILE *f);

/* ---- fingerprint.c: the debug check that every rank calls the same collective ---- */
/* With the check on: all-gathers (c->seq, name + tag, payload, step) and fails with ZT_ERR_MISMATCH
 * naming each rank's collective when they differ (ZT_ERR_PEER when the exchange times out). */
int zt_fingerprint_check_(zt_comm *c, const char *name, const char *tag, size_t payload, zt_error *err);
void zt_fingerprint_step_(int64_t step);

/* ---- deadline.c: the op machinery ---- */
int zt_comm_enter_(zt_comm *c, const char *what, zt_error *err);
void zt_comm_leave_(zt_comm *c);
/* ZT_ERR_PEER when the comm is broken, ZT_ERR_INTERNAL when an op is in flight: checked by
 * every collective before it touches the comm's shared state. */
int zt_comm_ready_(zt_comm *c, const char *name, zt_error *err);
/* Starts c->op: checks the comm is usable, reserves nreq request slots (all unposted), picks
 * the tag. seq0 = true uses the fixed setup tag. */
int zt_op_begin_(zt_comm *c, int kind, int subkind, const char *name, const char *tag,
                 size_t payload, int nreq, bool count, bool seq0, zt_comm_op **out,
                 zt_error *err);
/* Grows the request arrays to hold n (keeps the first op->nreq); called by phases that need more. */
int zt_op_reserve_(zt_comm_op *op, int n, zt_error *err);
/* Posts request idx: Irecv (recv) or Isend of bytes to/from comm rank peer, with the op's tag
 * (zt_op_post_) or another one (zt_op_post_tag_). */
int zt_op_post_(zt_comm_op *op, int idx, bool recv, void *buf, size_t bytes, int peer,
                zt_error *err);
int zt_op_post_tag_(zt_comm_op *op, int idx, bool recv, void *buf, size_t bytes, int peer,
                    int tag, zt_error *err);
/* Runs op->advance once (after posting the first requests); finishes the op if it is done. */
int zt_op_kick_(zt_comm_op *op, zt_error *err);
/* Blocks until the op is done, under the deadline; finishes (counters) or fails it. */
int zt_op_wait_(zt_comm_op *op, zt_error *err);
/* Fails the op: cancels pending requests, breaks the comm, releases the op; returns code. */
int zt_op_fail_(zt_comm_op *op, int code, zt_error *err);
/* "reduce_scatter (bucket 'h.3', 2.4 MB) on rank 1" */
void zt_op_where_(const zt_comm_op *op, char *buf, size_t cap);
/* An MPI error code as ZT_ERR_PEER: "<where>: <call> <peer>: <MPI_Error_string>". */
int zt_op_mpi_fail_(zt_comm_op *op, int rc, const char *call, int peer, zt_error *err);
/* "2.4 MB" */
void zt_fmt_bytes_(size_t bytes, char *buf, size_t cap);

/* ---- counters.c ---- */
void zt_counters_add_(zt_comm *c, int kind, uint64_t sent, uint64_t recvd, double seconds,
                      double wait_seconds);

/* ---- reduce_scatter.c / all_gather.c: phases reused by all_reduce.c and small.c ---- */
/* Number of chunks of a block of `bytes` bytes (0 for an empty block). */
size_t zt_nchunks_(size_t bytes, size_t chunk_bytes);
/* Grows the comm's scratch to bytes. */
int zt_comm_scratch_grow_(zt_comm *c, size_t bytes, zt_error *err);
/* Validates counts, fills c->off; total elements through *total. */
int zt_counts_check_(zt_comm *c, const char *name, const size_t *counts, size_t *total,
                     zt_error *err);
/* Posts the first window of the reduce-scatter of op over blocks c->off (elements of dtype) and
 * sets on_complete / advance; the rest is posted as slots free up. Uses requests 0 ..
 * zt_rs_nreq_ - 1. */
int zt_rs_post_(zt_comm_op *op, zt_dtype dtype, const void *send, void *recv, zt_error *err);
/* ZT_ERR_USAGE unless dtype is one the reductions sum (fp32, bf16, fp16). */
int zt_reduce_dtype_check_(const zt_comm *c, const char *name, zt_dtype dtype, zt_error *err);
/* The same for the pairwise all-gather of blocks c->off (elem bytes per element). send may be
 * NULL when the own block already sits in recv. Uses requests 0 .. zt_ag_nreq_ - 1. */
int zt_ag_post_(zt_comm_op *op, const void *send, void *recv, size_t elem, zt_error *err);
/* all_reduce_exchange.c: posts the first window of the whole-vector exchange of buf (n elements
 * of dtype, in place) cut into chunk_bytes chunks, depth chunks in flight per peer and direction
 * (depth <= ZT_RS_MAX_DEPTH), and sets on_complete / advance. Uses requests 0 .. 2 depth (N-1) - 1. */
int zt_ar_exchange_post_(zt_comm_op *op, zt_dtype dtype, void *buf, size_t n, size_t chunk_bytes, int depth,
                         zt_error *err);
/* all_reduce_shm.c: sets up op (no requests) for the all-reduce of buf through c's shared
 * segment over the blocks c->off; the wait loop then polls it. */
int zt_ar_shm_post_(zt_comm_op *op, zt_dtype dtype, void *buf, size_t n, zt_error *err);
/* all_to_all_shm.c: sets up op (begun with no requests) for the all-to-all of send[p] (ssz filled
 * from both ends' sizes and rooms: mine[2p], mine[2p+1] this rank's; theirs filled from the peers'
 * as they arrive) through c's shared segment; rsz[p]: the bytes that arrive from p. */
int zt_a2a_shm_post_(zt_comm_op *op, const void *const *send, void *const *recv, const uint64_t *mine, uint64_t *theirs,
                     size_t *ssz, size_t *rsz, zt_error *err);
/* all_to_all_shm.c: whether every rank of c can read the others' memory (collective over c: shm.c
 * calls it once the segment is mapped) */
bool zt_a2a_shm_probe_(zt_comm *c);
/* Unmaps the peers' shared buffers the all-to-all mapped on c (zt_shm_close_) */
void zt_a2a_maps_free_(zt_comm *c);
/* shm.c: maps the shared segment when every rank of c is on this node (collective: every rank of
 * c calls it, at creation); zt_shm_close_ unmaps (local). */
void zt_shm_open_(zt_comm *c);
void zt_shm_close_(zt_comm *c);
size_t zt_shm_region_bytes_(int nranks);
int zt_shm_depth_(int nranks);
/* all_reduce.c: the algorithm an all-reduce of n elements of dtype runs on c (never AUTO), and,
 * through the segment, how (ZT_SHM_*). */
int zt_ar_algo_(const zt_comm *c, zt_dtype dtype, size_t n);
int zt_ar_shm_mode_(const zt_comm *c);
/* Request slots the two use: bounded by the window, whatever the sizes. */
int zt_rs_depth_(int nranks);
int zt_rs_nreq_(const zt_comm *c);
int zt_ag_nreq_(const zt_comm *c);
/* A generic advance: done when nothing is pending. */
int zt_advance_when_idle_(zt_comm_op *op, zt_error *err);
/* small.c: the setup fence. Every rank sends (its op count, color, key) to every other rank
 * under the deadline, with a fixed tag; out (optional) receives [N][2] (color, key) pairs.
 * ZT_ERR_MISMATCH when the ranks have run different numbers of collectives on c. */
int zt_setup_exchange_(zt_comm *c, const char *name, int color, int key, int32_t *out,
                       zt_error *err);
/* The all-gather of a uniform byte block per rank under kind/subkind/name (small.c, world.c). */
int zt_all_gather_bytes_(zt_comm *c, int kind, int subkind, const char *name, const void *send,
                         void *recv, size_t bytes, const char *tag, bool seq0, zt_error *err);

#endif /* ZT_COMM_INTERNAL_H */
