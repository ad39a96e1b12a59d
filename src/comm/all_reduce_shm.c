/* all_reduce_shm.c - the all-reduce through the node-local shared segment (shm.c): the same
 * reduce-scatter + all-gather as all_reduce.c, with every piece moved by a memcpy into or out of
 * a slot of the segment and every hand-over signalled by a counter, not by MPI messages. What MPI
 * over shared memory pays per message (a rendezvous, a process_vm_readv system call that pins
 * the peer's pages, an acknowledgement) is gone; the data cross the cores once each way, as with
 * MPI's single copy.
 *
 * Invariants:
 *   - Element i of block j (the even split, zt_comm_even_counts) is zt_tree_sum over the ranks'
 *     values in rank order, computed once by rank j and copied by the others: the bits of
 *     all_reduce.c's reduce-scatter + all-gather, in fp32, bf16 and fp16, on every rank.
 *   - A slot is written only after every reader is done with its previous use: the counters count
 *     global steps (c->shm_step onwards, never reset), and rank r writes input slot g % D for
 *     step g once every peer has summed step g - D (pub_out), output slot g % D once every peer
 *     has copied step g - D (done_out). Counters are stored with release after the data and
 *     loaded with acquire before reading it.
 *   - Nothing blocks inside: all_reduce_shm's poll does what the counters allow and returns; the
 *     one wait loop (deadline.c) polls it under the deadline, with its spin / yield back-off, and
 *     names the ranks whose counters lag when the deadline passes.
 *   - Counted like the message version: (n - c_me) + (N-1) c_me elements each way per rank.
 *   - On 2 ranks, all-reduces of up to ZT_SHM_ONESHOT_MAX bytes take the one-shot (below: each rank
 *     sums the whole vector from its own values and the peer's published copy, rank 0's first: the
 *     tree of two, the same bits), larger ones with c->shm_cma the single copy (the same blocks,
 *     the same tree, the peer's buffer read with process_vm_readv); zt_ar_shm_mode_ picks.
 *   - The one-shot uses the region's slots as one ring, the rings and the single copy their own
 *     way: an op whose way differs from the previous op's writes nothing before every peer's
 *     done_out covers the previous op (op->sh.fence).
 */
#define _GNU_SOURCE /* process_vm_readv */
#include "comm/comm_internal.h"

#include <stdatomic.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

typedef struct shm_counters {
    _Atomic uint64_t pub_in;   /* steps whose input pieces this rank has put in its input slots */
    char pad0[56];
    _Atomic uint64_t pub_out;  /* steps whose block sum this rank has put in its output slot */
    char pad1[56];
    _Atomic uint64_t done_out; /* steps whose other blocks' sums this rank has copied out */
    char pad2[56];
    _Atomic uint64_t addr_op;  /* single copy: c->seq of the op whose buffer is at addr */
    uint64_t addr;             /* ... in this rank's address space */
    int64_t pid;
    char pad3[40];
} shm_counters;

_Static_assert(sizeof(shm_counters) <= ZT_SHM_HEADER, "counters fit the region's header");

static unsigned char *region(const zt_comm *c, int r) {
    return c->shm_map + (size_t)r * zt_shm_region_bytes_(c->size);
}

static shm_counters *ctr(const zt_comm *c, int r) { return (shm_counters *)region(c, r); }

/* Rank r's input slot of step g holding its piece of block j (j != r). */
static unsigned char *in_slot(const zt_comm *c, int r, uint64_t g, int j) {
    int N = c->size;
    uint64_t D = (uint64_t)zt_shm_depth_(N);
    size_t s = (size_t)(g % D) * (size_t)(N - 1) + (size_t)((j - r - 1 + N) % N);
    return region(c, r) + ZT_SHM_HEADER + s * ZT_SHM_SLOT;
}

/* Rank r's output slot of step g (its block's sum). */
static unsigned char *out_slot(const zt_comm *c, int r, uint64_t g) {
    uint64_t D = (uint64_t)zt_shm_depth_(c->size);
    size_t s = (size_t)D * (size_t)(c->size - 1) + (size_t)(g % D);
    return region(c, r) + ZT_SHM_HEADER + s * ZT_SHM_SLOT;
}

static uint64_t load(_Atomic uint64_t *p) { return atomic_load_explicit(p, memory_order_acquire); }
static void store(_Atomic uint64_t *p, uint64_t v) { atomic_store_explicit(p, v, memory_order_release); }

/* Elements of chunk k of block j. */
static size_t clen(const zt_comm_op *op, int j, int k) {
    size_t n = op->c->off[j + 1] - op->c->off[j], lo = (size_t)k * op->sh.chunk;
    return lo >= n ? 0 : n - lo < op->sh.chunk ? n - lo : op->sh.chunk;
}

static unsigned char *chunk_at(const zt_comm_op *op, int j, int k) {
    return op->sh.buf + (op->c->off[j] + (size_t)k * op->sh.chunk) * op->sh.elem;
}

/* Whether every peer's counter (at byte offset `which` of its counters) has reached v. */
static bool peers_reached(const zt_comm *c, size_t which, uint64_t v) {
    for (int r = 0; r < c->size; r++)
        if (r != c->rank && load((_Atomic uint64_t *)((unsigned char *)ctr(c, r) + which)) < v) return false;
    return true;
}

/* Step g's slot may be rewritten once the peers are through step g - D with it. */
static bool slot_free(const zt_comm *c, size_t which, uint64_t g) {
    uint64_t D = (uint64_t)zt_shm_depth_(c->size);
    return g < D || peers_reached(c, which, g - D + 1);
}

/* Whether the previous op, which used the slots another way, is through with them on every peer. */
static bool fenced(zt_comm_op *op) {
    if (op->sh.fence && !peers_reached(op->c, offsetof(shm_counters, done_out), op->sh.fence)) return false;
    op->sh.fence = 0;
    return true;
}

static int sh_poll(zt_comm_op *op, bool *progressed, zt_error *err) {
    zt_comm *c = op->c;
    int N = c->size, me = c->rank;
    size_t elem = op->sh.elem;
    shm_counters *mine = ctr(c, me);
    if (!fenced(op)) return ZT_OK;
    for (bool moved = true; moved;) {
        moved = false;
        /* this rank's pieces of the other blocks, into its input slots */
        while (op->sh.k_pub < op->sh.nsteps) {
            int k = op->sh.k_pub;
            uint64_t g = op->sh.base + (uint64_t)k;
            if (!slot_free(c, offsetof(shm_counters, pub_out), g)) break;
            for (int j = 0; j < N; j++) {
                size_t len = j == me ? 0 : clen(op, j, k);
                if (len) memcpy(in_slot(c, me, g, j), chunk_at(op, j, k), len * elem);
                op->sent += len * elem;
            }
            store(&mine->pub_in, g + 1);
            op->sh.k_pub++;
            moved = true;
        }
        /* the own block: every rank's piece here, the tree sum, into buf and the output slot */
        while (op->sh.k_sum < op->sh.nsteps) {
            int k = op->sh.k_sum;
            uint64_t g = op->sh.base + (uint64_t)k;
            if (!peers_reached(c, offsetof(shm_counters, pub_in), g + 1) ||
                !slot_free(c, offsetof(shm_counters, done_out), g))
                break;
            size_t len = clen(op, me, k);
            if (len) {
                unsigned char *own = chunk_at(op, me, k);
                for (int r = 0; r < N; r++) c->parts[r] = r == me ? own : in_slot(c, r, g, me);
                zt_tree_sum(op->sh.dtype, own, c->parts, N, len);
                memcpy(out_slot(c, me, g), own, len * elem);
            }
            op->recvd += (size_t)(N - 1) * len * elem;
            op->sent += (size_t)(N - 1) * len * elem;
            store(&mine->pub_out, g + 1);
            op->sh.k_sum++;
            moved = true;
        }
        /* the other blocks' sums, out of their owners' output slots */
        while (op->sh.k_copy < op->sh.nsteps) {
            int k = op->sh.k_copy;
            uint64_t g = op->sh.base + (uint64_t)k;
            if (!peers_reached(c, offsetof(shm_counters, pub_out), g + 1)) break;
            for (int j = 0; j < N; j++) {
                size_t len = j == me ? 0 : clen(op, j, k);
                if (len) memcpy(chunk_at(op, j, k), out_slot(c, j, g), len * elem);
                op->recvd += len * elem;
            }
            store(&mine->done_out, g + 1);
            op->sh.k_copy++;
            moved = true;
        }
        *progressed = *progressed || moved;
    }
    if (op->sh.k_copy == op->sh.nsteps && op->sh.k_sum == op->sh.nsteps) op->done = true;
    (void)err;
    return ZT_OK;
}

static int sh_advance(zt_comm_op *op, zt_error *err) {
    bool progressed = false;
    return op->poll(op, &progressed, err);
}

/* ----------------------------------------------------------------------------------------------
 * all_reduce_intra_shm_single_copy (2 ranks, c->shm_cma, above ZT_SHM_ONESHOT_MAX bytes)
 *
 *   rank me publishes (pid, &buf) for op c->seq, then, chunk k of 256 KiB of its block:
 *     peer's block-me chunk k --process_vm_readv--> my landing slot;  own_k = tree(rank 0, rank 1)
 *     pub_out = base + k + 1
 *   and, once the peer's pub_out > base + k: peer's summed block chunk k --process_vm_readv--> buf
 *     done_out = base + k + 1
 *   done once the peer's done_out covers every step: it has read all it needs of buf.
 * The peer overwrites its block-me chunk k only after our pub_out says we have read it; the bits are
 * those of the rings (the same tree, the same even split).
 * ---------------------------------------------------------------------------------------------- */
static int cma_read(zt_comm_op *op, void *dst, uint64_t src, size_t bytes, zt_error *err) {
    struct iovec l = {dst, bytes}, r = {(void *)(uintptr_t)src, bytes};
    ssize_t got = process_vm_readv((pid_t)op->sh.peer_pid, &l, 1, &r, 1, 0);
    if (got != (ssize_t)bytes)
        return zt_error_set(err, ZT_ERR_PEER, "all_reduce on comm '%s': reading %zu bytes of rank %d's buffer "
                            "(process_vm_readv) got %zd: %s", op->c->name, bytes, 1 - op->c->rank, got,
                            got < 0 ? strerror(errno) : "short read");
    return ZT_OK;
}

static int cma_poll(zt_comm_op *op, bool *progressed, zt_error *err) {
    zt_comm *c = op->c;
    int me = c->rank, peer = 1 - me;
    size_t elem = op->sh.elem;
    shm_counters *mine = ctr(c, me), *his = ctr(c, peer);
    bool moved = false;
    if (!fenced(op)) return ZT_OK; /* the landing slot may still be read */
    if (!op->sh.peer_addr) {
        if (load(&his->addr_op) < c->seq) return ZT_OK; /* the op's sequence number, the same on every rank */
        op->sh.peer_addr = his->addr;
        op->sh.peer_pid = his->pid;
        moved = true;
    }
    while (op->sh.k_sum < op->sh.nsteps) {
        int k = op->sh.k_sum;
        size_t len = clen(op, me, k);
        unsigned char *own = chunk_at(op, me, k), *tmp = region(c, me) + ZT_SHM_HEADER;
        if (len) {
            int rc = cma_read(op, tmp, op->sh.peer_addr + (c->off[me] + (size_t)k * op->sh.chunk) * elem, len * elem, err);
            if (rc) return rc;
            c->parts[me] = own;
            c->parts[peer] = tmp;
            zt_tree_sum(op->sh.dtype, own, c->parts, 2, len);
        }
        op->recvd += len * elem;
        op->sent += len * elem;
        store(&mine->pub_out, op->sh.base + (uint64_t)k + 1);
        op->sh.k_sum++;
        moved = true;
    }
    while (op->sh.k_copy < op->sh.nsteps) {
        int k = op->sh.k_copy;
        if (load(&his->pub_out) < op->sh.base + (uint64_t)k + 1) break;
        size_t len = clen(op, peer, k);
        if (len) {
            int rc = cma_read(op, chunk_at(op, peer, k),
                              op->sh.peer_addr + (c->off[peer] + (size_t)k * op->sh.chunk) * elem, len * elem, err);
            if (rc) return rc;
        }
        op->recvd += len * elem;
        op->sent += len * elem;
        store(&mine->done_out, op->sh.base + (uint64_t)k + 1);
        op->sh.k_copy++;
        moved = true;
    }
    if (op->sh.k_copy == op->sh.nsteps && op->sh.k_sum == op->sh.nsteps &&
        load(&his->done_out) >= op->sh.base + (uint64_t)op->sh.nsteps) {
        op->done = true;
        moved = true;
    }
    *progressed = *progressed || moved;
    return ZT_OK;
}

/* ----------------------------------------------------------------------------------------------
 * all_reduce_intra_shm_one_shot (2 ranks, up to ZT_SHM_ONESHOT_MAX bytes: zt_ar_shm_mode_)
 *
 *   rank me, step k (piece k of the WHOLE vector, 256 KiB), the region's D x N slots a ring:
 *     buf_k (own values) -> my slot g % (D N)                                 pub_in = g+1
 *     once every peer's pub_in > g:  buf_k = tree(rank 0's piece, rank 1's piece) (own from buf,
 *       the peer's from its slot)                                             pub_out = done_out = g+1
 *   slot g is rewritten once every peer's done_out > g - D N. One kind of hand-over instead of the
 *   rings' three, no copy out of a peer's output slot; each rank adds the whole vector (n adds
 *   instead of n/2), the same tree over the same values: the bits of the rings on every rank.
 * ---------------------------------------------------------------------------------------------- */
/* The one-shot's ring: all D x N slots of a region. */
static uint64_t os_ring(const zt_comm *c) { return (uint64_t)zt_shm_depth_(c->size) * (uint64_t)c->size; }

static unsigned char *os_slot(const zt_comm *c, int r, uint64_t g) {
    return region(c, r) + ZT_SHM_HEADER + (size_t)(g % os_ring(c)) * ZT_SHM_SLOT;
}

/* Elements of the one-shot's piece k. */
static size_t os_len(const zt_comm_op *op, int k) {
    size_t lo = (size_t)k * op->sh.chunk;
    return op->sh.n - lo < op->sh.chunk ? op->sh.n - lo : op->sh.chunk;
}

static int os_poll(zt_comm_op *op, bool *progressed, zt_error *err) {
    zt_comm *c = op->c;
    int N = c->size, me = c->rank;
    size_t elem = op->sh.elem, chunk = op->sh.chunk;
    uint64_t R = os_ring(c);
    shm_counters *mine = ctr(c, me);
    if (!fenced(op)) return ZT_OK;
    for (bool moved = true; moved;) {
        moved = false;
        for (; op->sh.k_pub < op->sh.nsteps; op->sh.k_pub++, moved = true) {
            uint64_t g = op->sh.base + (uint64_t)op->sh.k_pub;
            if (g >= R && !peers_reached(c, offsetof(shm_counters, done_out), g - R + 1)) break;
            memcpy(os_slot(c, me, g), op->sh.buf + (size_t)op->sh.k_pub * chunk * elem, os_len(op, op->sh.k_pub) * elem);
            store(&mine->pub_in, g + 1);
        }
        while (op->sh.k_sum < op->sh.k_pub) { /* a piece is summed in place only once it is published */
            int k = op->sh.k_sum;
            uint64_t g = op->sh.base + (uint64_t)k;
            if (!peers_reached(c, offsetof(shm_counters, pub_in), g + 1)) break;
            size_t len = os_len(op, k);
            unsigned char *own = op->sh.buf + (size_t)k * chunk * elem;
            for (int r = 0; r < N; r++) c->parts[r] = r == me ? own : os_slot(c, r, g);
            zt_tree_sum(op->sh.dtype, own, c->parts, N, len);
            op->sent += (size_t)(N - 1) * len * elem; /* on 2 ranks n each way: the rings' formula */
            op->recvd += (size_t)(N - 1) * len * elem;
            store(&mine->pub_out, g + 1);
            store(&mine->done_out, g + 1);
            op->sh.k_sum++;
            moved = true;
        }
        *progressed = *progressed || moved;
    }
    if (op->sh.k_sum == op->sh.nsteps) op->done = true;
    (void)err;
    return ZT_OK;
}

/* The peers this rank waits for: those behind it on any counter. */
static void sh_lagging(const zt_comm_op *op, bool *mark) {
    const zt_comm *c = op->c;
    shm_counters *mine = ctr(c, c->rank);
    for (int r = 0; r < c->size; r++) {
        shm_counters *p = ctr(c, r);
        mark[r] = r != c->rank && (load(&p->pub_in) < load(&mine->pub_in) || load(&p->pub_out) < load(&mine->pub_out) ||
                                   load(&p->done_out) < load(&mine->done_out) ||
                                   load(&p->pub_in) < op->sh.base + (uint64_t)op->sh.nsteps);
    }
}

/* ----------------------------------------------------------------------------------------------
 * all_reduce_intra_shm
 *
 * Accepts:     a comm with a shared segment (all ranks on one node, N >= 2), any n (the even
 *              split; blocks of zero elements take part in the steps with nothing to move), in
 *              place; fp32, bf16 or fp16 elements.
 * Returns:     buf = tree sum over ranks, the bits of all_reduce_intra_rs_ag_pipelined.
 * Limitations: one node only (across nodes all_reduce.c's messages); memcpy bandwidth-bound;
 *              the wait spins then yields (deadline.c), so more ranks than cores is slow. On 2
 *              ranks it runs only above ZT_SHM_ONESHOT_MAX without process_vm_readv (the
 *              one-shot and the single copy above take the rest: zt_ar_shm_mode_).
 *
 *   N = 2, step k (chunk k of each block: block/8 bytes in [64 KiB, 256 KiB]), rank 0's view; A = block 0 (its
 *   own), B = block 1:
 *     B_k(own values) -> my input slot              pub_in = g+1
 *     once rank 1's pub_in > g:  A_k = A_k + (rank 1's input slot)   (rank 0's value first)
 *       A_k -> my output slot                        pub_out = g+1
 *     once rank 1's pub_out > g: B_k <- rank 1's output slot          done_out = g+1
 *   steps run ahead of each other by up to D = zt_shm_depth_(N) slots.
 * ---------------------------------------------------------------------------------------------- */
int zt_ar_shm_post_(zt_comm_op *op, zt_dtype dtype, void *buf, size_t n, zt_error *err) {
    zt_comm *c = op->c;
    op->sh.dtype = dtype;
    op->sh.elem = zt_dtype_bytes(dtype);
    op->sh.buf = buf;
    op->sh.n = n;
    op->sh.mode = zt_ar_shm_mode_(c, dtype, n);
    op->sh.base = c->shm_step;
    /* the one-shot's slots overlap the rings' and the landing slot: a change to or from it waits
     * for the peers to be through the previous op */
    op->sh.fence = (c->shm_last == ZT_SHM_ONESHOT) != (op->sh.mode == ZT_SHM_ONESHOT) ? op->sh.base : 0;
    c->shm_last = op->sh.mode;
    op->sh.k_pub = op->sh.k_sum = op->sh.k_copy = 0;
    op->advance = sh_advance;
    op->lagging = sh_lagging;
    size_t first = c->off[1] - c->off[0]; /* the even split: block 0 is the longest */
    if (op->sh.mode == ZT_SHM_ONESHOT) {
        op->sh.chunk = ZT_SHM_SLOT / op->sh.elem;
        op->sh.nsteps = (int)((n + op->sh.chunk - 1) / op->sh.chunk);
        c->shm_step += (uint64_t)op->sh.nsteps;
        op->poll = os_poll;
        return ZT_OK;
    }
    if (op->sh.mode == ZT_SHM_CMA) {
        op->sh.chunk = ZT_SHM_SLOT / op->sh.elem;
        op->sh.nsteps = (int)((first + op->sh.chunk - 1) / op->sh.chunk);
        c->shm_step += (uint64_t)op->sh.nsteps;
        op->sh.peer_addr = 0;
        shm_counters *mine = ctr(c, c->rank);
        mine->addr = (uint64_t)(uintptr_t)buf;
        mine->pid = (int64_t)getpid();
        store(&mine->pub_in, op->sh.base + (uint64_t)op->sh.nsteps); /* the whole buffer, at once */
        store(&mine->addr_op, c->seq);
        op->poll = cma_poll;
        return ZT_OK;
    }
    size_t piece = first * op->sh.elem / 8 / ZT_SHM_MIN_PIECE * ZT_SHM_MIN_PIECE; /* the same on every rank */
    piece = piece < ZT_SHM_MIN_PIECE ? ZT_SHM_MIN_PIECE : piece > ZT_SHM_SLOT ? ZT_SHM_SLOT : piece;
    op->sh.chunk = piece / op->sh.elem;
    op->sh.nsteps = (int)((first + op->sh.chunk - 1) / op->sh.chunk);
    c->shm_step += (uint64_t)op->sh.nsteps;
    op->poll = sh_poll;
    (void)err;
    return ZT_OK;
}
