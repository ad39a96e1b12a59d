/* all_reduce_shm.c - the all-reduce through the node-local shared segment (shm.c): the same
 * reduce-scatter + all-gather as all_reduce.c, with every piece moved by a memcpy into or out of
 * a slot of the segment and every hand-over signalled by a counter, not by MPI messages. What MPI
 * over shared memory pays per message (a rendezvous, a process_vm_readv system call that pins
 * the peer's pages, an acknowledgement) is gone; the data cross the cores once each way.
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
 *   - On 2 ranks every all-reduce takes the one-shot (below: each rank sums the whole vector from
 *     its own values and the peer's published copy, rank 0's first: the tree of two, the same
 *     bits); zt_ar_shm_mode_ picks.
 *   - The one-shot uses the region's slots as one ring, the rings their own way (and the
 *     all-to-all, all_to_all_shm.c, a third): an op whose way differs from the previous op's
 *     writes nothing before every peer's done_out covers the previous op (op->sh.fence).
 */
#include "comm/comm_internal.h"
#include "kernels/kernels.h"

#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

typedef zt_shm_counters shm_counters; /* comm_internal.h: all_to_all_shm.c keeps them too */

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
 * all_reduce_intra_shm_one_shot (2 ranks: zt_ar_shm_mode_)
 *
 *   rank me, step k (piece k of the WHOLE vector: 64 KiB up to ZT_SHM_OS_SMALL_MAX bytes, 256 KiB
 *   above), the region's D x N slots a ring, one piece a slot:
 *     buf_k (own values) -> my slot g % (D N)                                 pub_in = g+1
 *     once every peer's pub_in > g:  buf_k = tree(rank 0's piece, rank 1's piece) (own from buf,
 *       the peer's from its slot)                                             pub_out = done_out = g+1
 *   slot g is rewritten once every peer's done_out > g - D N. One kind of hand-over instead of the
 *   rings' three, no copy out of a peer's output slot; each rank adds the whole vector (n adds
 *   instead of n/2), the same tree over the same values: the bits of the rings on every rank.
 *
 *   How a rank writes its slots (op->sh.nt, its own choice: the reader reads the same bytes either
 *   way): with streaming stores when the vector is larger than the ring of 256 KiB pieces or the
 *   peer's core is far (c->shm_far); else with ordinary stores, which leave the piece in the cache
 *   the two cores share, publishing at most ZT_SHM_OS_LEAD pieces ahead of its sums so that its
 *   own piece is still in its cache when it adds the peer's (streamed pieces go ahead freely).
 *   Far is timed, not configured: a load that finds the peer's pub_in changed since this rank last
 *   read it fetched the line from wherever the peer's store left it; taking more than
 *   ZT_SHM_FAR_NS (clock read included), as between the two dies of the Zen 4 VMs (120-400 ns
 *   against 20-80 on one die, where the hypervisor moves the two vCPUs every few seconds), it
 *   counts as far. The op's majority sets c->shm_far for the next op; an op with no such load
 *   leaves it. Measured (bench/RESULTS.md "Collectives", streaming stores and the dies): on one die
 *   64 KiB pieces with ordinary stores ran 256 KB-4 MB at 98-290% of Open MPI, streamed ones at
 *   71-153%; across the dies the reverse, 301-356% against 51-81%. The lead took 2-4 MB on one die
 *   from a median 168% / 140% (lowest 103% / 99%) to 174% / 199% (143% / 172%).
 * ---------------------------------------------------------------------------------------------- */
/* The one-shot's ring: all D x N slots of a region. */
static uint64_t os_ring(const zt_comm *c) { return (uint64_t)zt_shm_depth_(c->size) * (uint64_t)c->size; }

/* A piece's slot: one piece a slot whatever its size, the next piece 256 KiB on (so that the
 * reader's prefetches run ahead into unused bytes, not into a piece being written) */
static unsigned char *os_slot(const zt_comm *c, int r, uint64_t g) {
    return region(c, r) + ZT_SHM_HEADER + (size_t)(g % os_ring(c)) * ZT_SHM_SLOT;
}

/* Elements of the one-shot's piece k. */
static size_t os_len(const zt_comm_op *op, int k) {
    size_t lo = (size_t)k * op->sh.chunk;
    return op->sh.n - lo < op->sh.chunk ? op->sh.n - lo : op->sh.chunk;
}

/* The one-shot's piece in bytes for a vector of `bytes` (either size holds whole elements of every dtype) */
static size_t os_piece_bytes(size_t bytes) { return bytes <= ZT_SHM_OS_SMALL_MAX ? ZT_SHM_OS_PIECE_SMALL : ZT_SHM_SLOT; }

/* dst (a slot) = src, past the caches when nt (src/kernels/stream_copy.c); ordered before the
 * release store that publishes it */
static void publish(unsigned char *dst, const unsigned char *src, size_t bytes, bool nt) {
    if (!nt) {
        memcpy(dst, src, bytes);
        return;
    }
    zt_copy_streaming(dst, src, bytes);
    zt_streaming_fence();
}

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

/* Whether the peer (2 ranks) has published step g. A load that finds pub_in changed since this
 * rank last looked fetched the line from wherever the peer's store left it: timed (a far or a near
 * arrival, see above). */
static bool os_peer_published(zt_comm_op *op, const shm_counters *his, uint64_t g) {
    zt_comm *c = op->c;
    double t0 = now_ns();
    uint64_t v = load((_Atomic uint64_t *)&his->pub_in);
    double dt = now_ns() - t0;
    if (v != c->shm_seen) {
        op->sh.far += dt > ZT_SHM_FAR_NS;
        op->sh.near += dt <= ZT_SHM_FAR_NS;
        c->shm_seen = v;
    }
    return v > g;
}

static int os_poll(zt_comm_op *op, bool *progressed, zt_error *err) {
    zt_comm *c = op->c;
    int N = c->size, me = c->rank;
    size_t elem = op->sh.elem, chunk = op->sh.chunk;
    uint64_t R = os_ring(c);
    shm_counters *mine = ctr(c, me), *his = ctr(c, 1 - me);
    if (!fenced(op)) return ZT_OK;
    for (bool moved = true; moved;) {
        moved = false;
        for (; op->sh.k_pub < op->sh.nsteps && (op->sh.nt || op->sh.k_pub < op->sh.k_sum + ZT_SHM_OS_LEAD);
             op->sh.k_pub++, moved = true) {
            uint64_t g = op->sh.base + (uint64_t)op->sh.k_pub;
            if (g >= R && !peers_reached(c, offsetof(shm_counters, done_out), g - R + 1)) break;
            publish(os_slot(c, me, g), op->sh.buf + (size_t)op->sh.k_pub * chunk * elem, os_len(op, op->sh.k_pub) * elem,
                    op->sh.nt);
            store(&mine->pub_in, g + 1);
        }
        while (op->sh.k_sum < op->sh.k_pub) { /* a piece is summed in place only once it is published */
            int k = op->sh.k_sum;
            uint64_t g = op->sh.base + (uint64_t)k;
            if (!os_peer_published(op, his, g)) break;
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
    if (op->sh.k_sum == op->sh.nsteps) {
        op->done = true;
        if (op->sh.far + op->sh.near > 0) c->shm_far = op->sh.far > op->sh.near;
    }
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
 *              ranks the one-shot runs instead (zt_ar_shm_mode_).
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
    op->sh.mode = zt_ar_shm_mode_(c);
    op->sh.base = c->shm_step;
    /* the one-shot's slots overlap the rings': a change to or from it waits for the peers to be
     * through the previous op */
    op->sh.fence = c->shm_last != op->sh.mode ? op->sh.base : 0; /* also after an all-to-all's (ZT_SHM_A2A) */
    c->shm_last = op->sh.mode;
    op->sh.k_pub = op->sh.k_sum = op->sh.k_copy = 0;
    op->advance = sh_advance;
    op->lagging = sh_lagging;
    size_t first = c->off[1] - c->off[0]; /* the even split: block 0 is the longest */
    if (op->sh.mode == ZT_SHM_ONESHOT) {
        size_t bytes = n * op->sh.elem;
        op->sh.chunk = os_piece_bytes(bytes) / op->sh.elem;
        op->sh.nsteps = (int)((n + op->sh.chunk - 1) / op->sh.chunk);
        c->shm_step += (uint64_t)op->sh.nsteps;
        bool wraps = bytes > (size_t)os_ring(c) * ZT_SHM_SLOT;
        op->sh.nt = c->shm_stores == ZT_AR_STORES_AUTO ? wraps || c->shm_far : c->shm_stores == ZT_AR_STORES_STREAMING;
        op->sh.far = op->sh.near = 0;
        op->poll = os_poll;
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
