/* all_to_all_shm.c - the all-to-all of variable blocks (all_to_all.c's contract) through the
 * node-local shared segment (shm.c) when every rank of the comm is on this machine: the sizes and
 * rooms go through each region's header, every hand-over is a counter, no MPI message. Open MPI's
 * counts + MPI_Alltoallv pay a round of counts messages, then per block a rendezvous message and an
 * acknowledgement around its process_vm_readv (bench/RESULTS.md "Issue 34's speed goals").
 *
 *   post:   this rank's [size for p, room for p's block] and where its block for p is, for every p,
 *           into its header, then the op's marker (base + 1, a release store): the sizes round,
 *           fused into the op
 *   ready:  once every peer's marker is there, each rank reads every rank's sizes and rooms (the
 *           same numbers on every rank): a block over its receiver's room moves nothing on either
 *           end (all_to_all.c names it); nsteps = pieces of the longest block that moves (1 for the
 *           single copy), at least 1, the same on every rank, so the comm's global steps stay in step
 *   single copy (c->a2a_cma: every rank may read the others' memory, probed at the segment's
 *           creation): the own block copied first (Open MPI's order: measured faster), then every
 *           block for this rank copied out of its sender's shared buffer mapped here, where the
 *           sender's header names one it lies in (shared_buffers.c; c->a2a_map), else read
 *           straight out of its sender's memory (process_vm_readv), then
 *           pub_in = pub_out = done_out = base + 1; the op ends once every peer's done_out is there
 *           (it has read this rank's blocks, which may then change)
 *   else, step g through the slots: rank r copies piece k of its block for p into its lane for p
 *           (slot (g mod A) of the lane; A = lane_depth slots a lane), then pub_in = g + 1; once
 *           every peer's pub_in > g it copies piece k of every peer's block for it out of the
 *           peer's lane, then pub_out = done_out = g + 1. A lane's slot is rewritten once every
 *           peer's done_out > g - A.
 *
 * Invariants:
 *   - The header's sizes of op s are rewritten only by op s + 1, which starts after this rank has
 *     copied out every step of op s from every peer (single copy: after every peer has said it
 *     read), so after every peer has read them (a peer publishes nothing of an op before it has
 *     read every header).
 *   - Bytes are moved, never added: the result is all_to_all.c's message path's, bit for bit.
 *   - Every counter of a region ends an op at base + nsteps (pub_out too, which an all-reduce's
 *     rings wait on): an all-reduce after it fences on done_out (op->sh.fence: its way differs),
 *     an all-to-all after an all-reduce likewise (op->a2.fence).
 *   - Nothing blocks here: the poll does what the counters allow; deadline.c's one loop waits under
 *     the deadline and names the peers whose marker or counters lag.
 *   - Counted as the message path counts the blocks: op->sent / recvd the bytes that moved to and
 *     from the other ranks (the sizes are not counted: they are no message).
 */
#define _GNU_SOURCE /* process_vm_readv */
#include "comm/comm_internal.h"

#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

/* Bytes of a block per step: small enough that a step's copies stay in the caches and the two
 * ranks' copies overlap, large enough that a step's hand-over is a small part of it */
#ifndef ZT_A2A_SHM_PIECE
#define ZT_A2A_SHM_PIECE ((size_t)64 << 10)
#endif

/* The all-to-all's part of a region's header, after the counters (zt_shm_counters, <= 256 bytes) */
typedef struct a2a_header {
    _Atomic uint64_t marker; /* base + 1 of the op whose sizes follow */
    char pad[56];
    uint64_t sizes[2 * ZT_SHM_MAX_RANKS]; /* [2p]: bytes for p, [2p+1]: room for p's block */
    uint64_t addr[ZT_SHM_MAX_RANKS];      /* the single copy: where the block for p is, in this rank's memory */
    uint64_t pid, self;                   /* this rank's process, and where `self` is in its memory (the probe) */
    zt_shared_ref in[ZT_SHM_MAX_RANKS];   /* the shared buffer the block for p lies in (id 0: none) */
    uint32_t n_live;                      /* this rank's live shared buffers when it posted: */
    uint64_t live[ZT_SHARED_MAX];         /* their ids (a peer unmaps any other it holds) */
} a2a_header;

_Static_assert(256 + sizeof(a2a_header) <= ZT_SHM_HEADER, "the sizes fit the region's header");

static unsigned char *region(const zt_comm *c, int r) { return c->shm_map + (size_t)r * zt_shm_region_bytes_(c->size); }
static zt_shm_counters *ctr(const zt_comm *c, int r) { return (zt_shm_counters *)region(c, r); }
static a2a_header *hdr(const zt_comm *c, int r) { return (a2a_header *)(region(c, r) + 256); }

static uint64_t load(_Atomic uint64_t *p) { return atomic_load_explicit(p, memory_order_acquire); }
static void store(_Atomic uint64_t *p, uint64_t v) { atomic_store_explicit(p, v, memory_order_release); }

/* Slots a lane: the region's D x N slots shared out among its N - 1 lanes */
static int lane_depth(int N) { return zt_shm_depth_(N) * N / (N - 1); }

/* Rank r's slot of step g in its lane for rank p (the slot's first ZT_A2A_SHM_PIECE bytes) */
static unsigned char *lane_slot(const zt_comm_op *op, int r, uint64_t g, int p) {
    int N = op->c->size;
    size_t s = (size_t)(g % (uint64_t)op->a2.lane_depth) * (size_t)(N - 1) + (size_t)((p - r - 1 + N) % N);
    return region(op->c, r) + ZT_SHM_HEADER + s * ZT_SHM_SLOT;
}

/* Whether every peer's counter (at byte offset `which` of its counters) has reached v */
static bool peers_reached(const zt_comm *c, size_t which, uint64_t v) {
    for (int r = 0; r < c->size; r++)
        if (r != c->rank && load((_Atomic uint64_t *)((unsigned char *)ctr(c, r) + which)) < v) return false;
    return true;
}

/* Bytes of piece k of a block of `bytes` */
static size_t piece_len(const zt_comm_op *op, size_t bytes, int k) {
    size_t lo = (size_t)k * op->a2.piece;
    return lo >= bytes ? 0 : bytes - lo < op->a2.piece ? bytes - lo : op->a2.piece;
}

/* Every rank's sizes and rooms are here: what moves, and the steps it takes */
static bool read_sizes(zt_comm_op *op) {
    zt_comm *c = op->c;
    int N = c->size, me = c->rank;
    for (int r = 0; r < N; r++)
        if (r != me && load(&hdr(c, r)->marker) != op->a2.base + 1) return false;
    size_t longest = 0;
    for (int r = 0; r < N; r++)
        for (int p = 0; p < N; p++) {
            uint64_t bytes = (r == me ? op->a2.mine : hdr(c, r)->sizes)[2 * p];
            uint64_t room = (p == me ? op->a2.mine : hdr(c, p)->sizes)[2 * r + 1];
            size_t moves = bytes <= room ? (size_t)bytes : 0;
            if (r == me) op->a2.ssz[p] = moves;
            if (p == me) op->a2.rsz[r] = moves;
            if (r != p && moves > longest) longest = moves;
        }
    /* p's size for this rank and its room for this rank's block: what all_to_all.c names */
    for (int p = 0; p < N; p++)
        if (p != me) op->a2.theirs[2 * p] = hdr(c, p)->sizes[2 * me], op->a2.theirs[2 * p + 1] = hdr(c, p)->sizes[2 * me + 1];
    op->a2.nsteps = longest && !op->a2.cma ? (int)((longest + op->a2.piece - 1) / op->a2.piece) : 1;
    c->shm_step = op->a2.base + (uint64_t)op->a2.nsteps;
    op->a2.ready = true;
    return true;
}

/* A block's copy in pieces of 128 KiB, as Open MPI's datatype engine copies (its memop block
 * size): glibc takes a copy over 1 MiB with its vector loop, a piece with `rep movsb`; at the
 * model's 3 MiB a block the pieces were ~5% faster here (bench/RESULTS.md) */
static void copy_pieces(void *dst, const void *src, size_t bytes) {
    const size_t piece = (size_t)128 << 10;
    if (dst == src) return;
    if ((const unsigned char *)dst < (const unsigned char *)src + bytes && (const unsigned char *)src < (unsigned char *)dst + bytes) {
        memmove(dst, src, bytes); /* overlapping: one move */
        return;
    }
    for (size_t lo = 0; lo < bytes; lo += piece)
        memcpy((unsigned char *)dst + lo, (const unsigned char *)src + lo, bytes - lo < piece ? bytes - lo : piece);
}

/* Unmaps the peers' buffers their owners no longer list (freed since they were mapped). Every
 * peer has posted this op (its header is this op's until this rank says it has read). */
static void prune_maps(zt_comm *c) {
    for (int i = 0; i < c->n_peer_maps;) {
        const a2a_header *h = hdr(c, c->peer_maps[i].rank);
        bool live = false;
        for (uint32_t k = 0; k < h->n_live && k < ZT_SHARED_MAX && !live; k++) live = h->live[k] == c->peer_maps[i].id;
        if (live) {
            i++;
            continue;
        }
        munmap((void *)c->peer_maps[i].map, c->peer_maps[i].bytes);
        c->peer_maps[i] = c->peer_maps[--c->n_peer_maps];
    }
}

/* Rank r's block for this rank where it lies in one of r's shared buffers: that buffer mapped here
 * (the first time: /proc/<pid>/fd/<fd>, which the single copy's permission allows), else NULL (then
 * process_vm_readv reads it). A failed mapping turns the maps off on this comm for this rank. */
static const unsigned char *mapped_block(zt_comm *c, int r) {
    const a2a_header *h = hdr(c, r);
    const zt_shared_ref *ref = &h->in[c->rank];
    if (!c->a2a_map || !ref->id) return NULL;
    for (int i = 0; i < c->n_peer_maps; i++)
        if (c->peer_maps[i].rank == r && c->peer_maps[i].id == ref->id) return c->peer_maps[i].map + ref->off;
    if (c->n_peer_maps == c->cap_peer_maps) {
        int cap = c->cap_peer_maps ? 2 * c->cap_peer_maps : 16;
        zt_peer_map *m = realloc(c->peer_maps, (size_t)cap * sizeof *m);
        if (!m) return NULL;
        c->peer_maps = m, c->cap_peer_maps = cap;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/%llu/fd/%d", (unsigned long long)h->pid, ref->fd);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    void *m = MAP_FAILED;
    if (fd >= 0 && fstat(fd, &st) == 0 && (uint64_t)st.st_size >= ref->bytes)
        m = mmap(NULL, ref->bytes, PROT_READ, MAP_SHARED, fd, 0);
    if (fd >= 0) close(fd);
    if (m == MAP_FAILED) {
        c->a2a_map = false;
        return NULL;
    }
    c->peer_maps[c->n_peer_maps++] = (zt_peer_map){r, ref->id, m, ref->bytes};
    return (const unsigned char *)m + ref->off;
}

void zt_a2a_maps_free_(zt_comm *c) {
    for (int i = 0; i < c->n_peer_maps; i++) munmap((void *)c->peer_maps[i].map, c->peer_maps[i].bytes);
    free(c->peer_maps);
    c->peer_maps = NULL;
    c->n_peer_maps = c->cap_peer_maps = 0;
}

/* The single copy: this rank reads every block for it straight out of its sender's memory, then
 * says so (done_out); the op ends when every peer has read its blocks out of this rank's. */
static int cma_poll(zt_comm_op *op, bool *progressed, zt_error *err) {
    zt_comm *c = op->c;
    int N = c->size, me = c->rank;
    zt_shm_counters *mine = ctr(c, me);
    uint64_t g = op->a2.base;
    if (op->a2.k_get == 0) {
        /* the own block first, as Open MPI's alltoallv does, unless a peer's block is over its room
         * (all_to_all.c's rule: then the own block is not copied either) */
        bool over = false;
        for (int r = 0; r < N; r++) over |= r != me && op->a2.theirs[2 * r] > op->a2.mine[2 * r + 1];
        if (!over && op->a2.ssz[me]) copy_pieces(op->a2.recv[me], op->a2.send[me], op->a2.ssz[me]);
        prune_maps(c);
        for (int r = 0; r < N; r++) {
            a2a_header *h = hdr(c, r);
            const unsigned char *m = r != me && op->a2.rsz[r] ? mapped_block(c, r) : NULL;
            if (m) copy_pieces(op->a2.recv[r], m, op->a2.rsz[r]);
            for (size_t got = 0; r != me && !m && got < op->a2.rsz[r];) {
                struct iovec local = {(unsigned char *)op->a2.recv[r] + got, op->a2.rsz[r] - got};
                struct iovec remote = {(void *)(uintptr_t)(h->addr[me] + got), op->a2.rsz[r] - got};
                ssize_t n = process_vm_readv((pid_t)h->pid, &local, 1, &remote, 1, 0);
                if (n <= 0) {
                    char where[256], who[64];
                    zt_op_where_(op, where, sizeof where);
                    zt_comm_rank_label_(c, r, who, sizeof who);
                    return zt_error_set(err, ZT_ERR_PEER, "%s: reading the %zu bytes of %s's block (process_vm_readv of "
                                        "pid %llu) failed after %zu: %s", where, op->a2.rsz[r], who,
                                        (unsigned long long)h->pid, got, n < 0 ? strerror(errno) : "nothing read");
                }
                got += (size_t)n;
            }
            op->recvd += r == me ? 0 : op->a2.rsz[r];
            op->sent += r == me ? 0 : op->a2.ssz[r]; /* read by r before the op ends */
        }
        store(&mine->pub_in, g + 1);
        store(&mine->pub_out, g + 1);
        store(&mine->done_out, g + 1);
        op->a2.k_pub = op->a2.k_get = 1;
        *progressed = true;
    }
    if (peers_reached(c, offsetof(zt_shm_counters, done_out), g + 1)) op->done = true;
    return ZT_OK;
}

static int a2a_poll(zt_comm_op *op, bool *progressed, zt_error *err) {
    zt_comm *c = op->c;
    int N = c->size, me = c->rank;
    zt_shm_counters *mine = ctr(c, me);
    (void)err;
    if (!op->a2.ready) {
        if (!read_sizes(op)) return ZT_OK;
        *progressed = true;
    }
    if (op->a2.cma) return cma_poll(op, progressed, err);
    if (op->a2.fence) {
        if (!peers_reached(c, offsetof(zt_shm_counters, done_out), op->a2.fence)) return ZT_OK;
        op->a2.fence = 0;
    }
    uint64_t A = (uint64_t)op->a2.lane_depth;
    for (bool moved = true; moved;) {
        moved = false;
        if (op->a2.k_pub < op->a2.nsteps) { /* my pieces of step g into my lanes */
            int k = op->a2.k_pub;
            uint64_t g = op->a2.base + (uint64_t)k;
            if (g < A || peers_reached(c, offsetof(zt_shm_counters, done_out), g - A + 1)) {
                for (int p = 0; p < N; p++) {
                    size_t len = p == me ? 0 : piece_len(op, op->a2.ssz[p], k);
                    if (len) memcpy(lane_slot(op, me, g, p), (const unsigned char *)op->a2.send[p] + (size_t)k * op->a2.piece, len);
                    op->sent += len;
                }
                store(&mine->pub_in, g + 1);
                op->a2.k_pub++;
                moved = true;
            }
        }
        if (op->a2.k_get < op->a2.k_pub) { /* every peer's piece of step g for me, out of its lane */
            int k = op->a2.k_get;
            uint64_t g = op->a2.base + (uint64_t)k;
            if (peers_reached(c, offsetof(zt_shm_counters, pub_in), g + 1)) {
                for (int r = 0; r < N; r++) {
                    size_t len = r == me ? 0 : piece_len(op, op->a2.rsz[r], k);
                    if (len) memcpy((unsigned char *)op->a2.recv[r] + (size_t)k * op->a2.piece, lane_slot(op, r, g, me), len);
                    op->recvd += len;
                }
                store(&mine->pub_out, g + 1);
                store(&mine->done_out, g + 1);
                op->a2.k_get++;
                moved = true;
            }
        }
        *progressed = *progressed || moved;
    }
    if (op->a2.k_get == op->a2.nsteps) op->done = true;
    return ZT_OK;
}

static int a2a_advance(zt_comm_op *op, zt_error *err) {
    bool progressed = false;
    return op->poll(op, &progressed, err);
}

/* The peers this rank waits for: those whose sizes are not there yet, or behind on a counter */
static void a2a_lagging(const zt_comm_op *op, bool *mark) {
    const zt_comm *c = op->c;
    zt_shm_counters *mine = ctr(c, c->rank);
    for (int r = 0; r < c->size; r++) {
        zt_shm_counters *p = ctr(c, r);
        mark[r] = r != c->rank &&
                  (load(&hdr(c, r)->marker) < op->a2.base + 1 || load(&p->pub_in) < load(&mine->pub_in) ||
                   load(&p->done_out) < load(&mine->done_out) ||
                   (op->a2.ready && load(&p->pub_in) < op->a2.base + (uint64_t)op->a2.nsteps));
    }
}

int zt_a2a_shm_post_(zt_comm_op *op, const void *const *send, void *const *recv, const uint64_t *mine, uint64_t *theirs,
                     size_t *ssz, size_t *rsz, zt_error *err) {
    zt_comm *c = op->c;
    int N = c->size;
    op->a2.send = send, op->a2.recv = recv, op->a2.mine = mine, op->a2.theirs = theirs;
    op->a2.ssz = ssz, op->a2.rsz = rsz;
    op->a2.base = c->shm_step;
    op->a2.fence = c->shm_last != ZT_SHM_A2A ? op->a2.base : 0;
    c->shm_last = ZT_SHM_A2A;
    op->a2.piece = ZT_A2A_SHM_PIECE;
    op->a2.lane_depth = lane_depth(N);
    op->a2.ready = false;
    op->a2.nsteps = 0;
    op->a2.k_pub = op->a2.k_get = 0;
    op->a2.cma = c->a2a_cma;
    a2a_header *h = hdr(c, c->rank);
    memcpy(h->sizes, mine, 2 * (size_t)N * sizeof *mine);
    for (int p = 0; p < N; p++) {
        h->addr[p] = (uint64_t)(uintptr_t)send[p];
        if (!op->a2.cma || p == c->rank || !zt_shared_find_(send[p], (size_t)mine[2 * p], &h->in[p])) h->in[p].id = 0;
    }
    h->n_live = op->a2.cma ? (uint32_t)zt_shared_live_(h->live) : 0;
    store(&h->marker, op->a2.base + 1);
    op->poll = a2a_poll;
    op->advance = a2a_advance;
    op->lagging = a2a_lagging;
    (void)err;
    return ZT_OK;
}

bool zt_a2a_shm_probe_(zt_comm *c) {
    a2a_header *h = hdr(c, c->rank);
    h->pid = (uint64_t)getpid();
    h->self = (uint64_t)(uintptr_t)&h->self;
    int ok = MPI_Barrier(c->mpi) == MPI_SUCCESS;
    for (int r = 0; r < c->size && ok; r++) { /* read the peer's `self` out of its memory: it holds its own address */
        const a2a_header *p = hdr(c, r);
        uint64_t v = 0;
        struct iovec local = {&v, sizeof v}, remote = {(void *)(uintptr_t)p->self, sizeof v};
        ok = r == c->rank || (process_vm_readv((pid_t)p->pid, &local, 1, &remote, 1, 0) == (ssize_t)sizeof v && v == p->self);
    }
    int all = 0;
    if (MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_LAND, c->mpi) != MPI_SUCCESS) all = 0;
    return all;
}

int zt_comm_set_a2a_single_copy(zt_comm *c, bool on) {
    if (!c || (on && !c->shm_cma)) return ZT_ERR_USAGE;
    c->a2a_cma = on;
    return ZT_OK;
}

bool zt_comm_a2a_single_copy(const zt_comm *c) { return c && c->a2a_cma; }

int zt_comm_set_a2a_map(zt_comm *c, bool on) {
    if (!c || (on && !c->shm_cma)) return ZT_ERR_USAGE;
    c->a2a_map = on;
    return ZT_OK;
}

bool zt_comm_a2a_map(const zt_comm *c) { return c && c->a2a_map; }

int zt_comm_a2a_mapped(const zt_comm *c) { return c ? c->n_peer_maps : 0; }
