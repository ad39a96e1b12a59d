/* comm.h - the communication layer: the MPI world and its sub-groups, deterministic float
 * collectives, per-comm traffic counters and collective deadlines.
 *
 * The rule this layer exists for: MPI only moves bytes; zerotrain adds floats itself, in a fixed
 * order, so a run is bit-for-bit reproducible. The order is a pairwise tree over the rank index
 * (zt_tree_sum_f32 below); the engine uses the same tree over micro-batches, so for power-of-two
 * sizes 1 rank x 4 micro-batches, 2 x 2 and 4 x 1 give the same bits. No MPI_SUM on floats.
 *
 * One file per concern (Open MPI coll style: one function per algorithm, each with Accepts /
 * Returns / Limitations and a diagram):
 *   world.c           MPI init/finalize, zt_comm create/split/dup/free, names, ranks
 *   tree_sum.c        zt_tree_sum_f32 / _bf16, the fixed summation order
 *   reduce_scatter.c  pairwise exchange + tree sum, chunk-pipelined through a bounded scratch
 *   all_gather.c      pairwise exchange (also moves the bytes of the small collectives)
 *   all_reduce.c      the algorithm by placement and size (zt_ar_algo), and the reduce-scatter with
 *                     the all-gather fed per chunk: the bits of both
 *   all_reduce_exchange.c  2 ranks apart, small: whole vectors exchanged, each rank adds both
 *   all_reduce_shm.c  ranks on one machine: reduce-scatter + all-gather through the shared segment
 *   shm.c             the comm's node-local shared segment (POSIX shared memory, unlinked at once)
 *   shared_buffers.c  buffers the peers on the machine can map (memfds): the all-to-all copies a
 *                     block in one out of its sender's pages
 *   all_to_all.c      the all-to-all of variable blocks, sizes first (on one machine: all_to_all_shm.c)
 *   broadcast.c       pipelined binomial tree
 *   compressed_all_reduce.c  1-bit Adam's momentum average: signs and one scale per block, with
 *                     the worker's and the server's error feedback
 *   small.c           max of a double, AND of an int, all-gather of a few doubles, barrier
 *   counters.c        bytes / calls / seconds per collective kind, per comm
 *   deadline.c        the one polling wait loop: deadlines, peer-naming errors, cancellation
 *   board.c           the status board: each rank's step and recent collectives, read on a deadline
 *   fingerprint.c     the debug check that every rank calls the same collective
 *   comm_internal.h   the zt_comm struct and the op machinery shared by the files above
 *
 * Contracts common to every collective here:
 *   - Every rank of the comm calls the same collectives in the same order with the same sizes
 *     (counts, n, bytes, root); that is MPI's rule. A count mismatch that shows up as a message of
 *     the wrong length fails with ZT_ERR_MISMATCH naming the peer, never corrupts silently.
 *   - Every wait polls non-blocking requests (MPI_Testsome) under the comm's deadline
 *     (zt_comm_set_timeout, default 300 s, env ZT_COMM_TIMEOUT; zt_comm_set_job_timeout overrides
 *     it for every comm: the trainer's comm.timeout_s): when no message completes for
 *     that long the call returns ZT_ERR_PEER with a message naming the collective, its tag and
 *     size, this rank and the peer ranks whose data have not arrived, e.g.
 *       "reduce_scatter (bucket 'h.3', 2.4 MB) on rank 1: no data from rank 3 after 30 s".
 *     The clock restarts whenever a message completes, so a long collective that is moving never
 *     times out; a stuck one fails `timeout` seconds after its last progress.
 *   - An MPI error becomes ZT_ERR_PEER with MPI_Error_string (every comm has MPI_ERRORS_RETURN).
 *   - After any ZT_ERR_PEER / ZT_ERR_MISMATCH the comm is *broken*: later calls on it fail at
 *     once with ZT_ERR_PEER quoting the first failure. Pending receives are cancelled before
 *     the call returns; a send that no peer ever takes may stay queued in MPI and keeps reading
 *     its buffer, so after such a failure the caller should end the run (zt_comm_abort from
 *     main) rather than reuse the buffers for something else.
 *   - `tag` is a short label printed verbatim in messages (e.g. "bucket 'h.3'"); NULL is fine.
 *   - Library code here never exits, aborts or asserts; errors go through zt_error.
 *
 * Threads. MPI is initialized with MPI_THREAD_MULTIPLE when the library offers it
 * (zt_comm_thread_level says what was provided). A zt_comm is used by ONE thread at a time:
 * concurrent calls on the same comm would post their messages in different orders on different
 * ranks, which no lock can make correct. The engine gives its background communication thread
 * its own comm (zt_comm_dup). Calls on different comms may run concurrently. A second thread
 * entering a comm that is in use gets ZT_ERR_INTERNAL instead of undefined behaviour. Counters
 * (zt_comm_counters_get/reset) may be read from any thread at any time.
 *
 * Non-blocking use: zt_*_start posts the first window of messages and returns an op;
 * zt_comm_op_test makes progress (posts the next chunks, sums what arrived) and reports
 * completion without blocking; zt_comm_op_wait finishes it under the deadline. Nothing moves
 * between calls (MPI over shared memory and TCP progresses only inside MPI calls), so overlap
 * needs either test calls sprinkled through the compute or, better, a communication thread
 * that calls the blocking form on its own comm. At most one op is in flight per comm (another
 * call on that comm, blocking or not, returns ZT_ERR_INTERNAL until it finishes).
 *
 * Memory. Each comm owns a scratch buffer for the reduce-scatter, grown on demand and kept until
 * zt_comm_free; zt_comm_scratch_bytes_for tells the memory plan how much it will need and
 * zt_comm_reserve_scratch allocates it up front so the first step allocates nothing. Request
 * bookkeeping (a few dozen bytes per in-flight chunk) is grown the same way.
 *
 * Limits: counts are size_t elements; messages are cut into chunks of zt_comm_chunk_bytes
 * (default 256 KiB, env ZT_COMM_CHUNK_BYTES, which must be equal on all ranks), so there is no
 * 2 GiB MPI count limit; a collective keeps a bounded window of chunks in flight per peer
 * (at most 32(N-1) requests, whatever the size). The reductions' payload is float32 or bf16
 * (below, "Payload dtypes"); the all-gather moves float32, anything else moves as bytes.
 *
 * Payload dtypes (the gradient reductions, precision.reduce_dtype): zt_reduce_scatter and
 * zt_all_reduce take the element type of their buffers.
 *   ZT_DTYPE_FP32  float32 elements, summed by zt_tree_sum_f32.
 *   ZT_DTYPE_BF16  bf16 bit patterns (uint16_t): 2 bytes per element on the wire (half the fp32
 *                  traffic, and the counters say so), summed by zt_tree_sum_bf16: every + of the
 *                  tree adds in fp32 and rounds to bf16 (nearest-even), as NCCL's bf16 sum does
 *                  per step, so the result is a bf16 value; the all-reduce's all-gather half
 *                  moves those bf16 sums. The caller rounds its contribution to bf16 (the
 *                  engine does it while packing a bucket) and widens the result.
 *   ZT_DTYPE_FP16  fp16 bit patterns, the same way with fp16 rounding (zt_tree_sum_fp16): a sum
 *                  past 65504 is infinity, as in an fp16 NCCL sum; fp16 training's finite check
 *                  then skips the step.
 * Chunks stay zt_comm_chunk_bytes long in any dtype (a 2-byte chunk holds twice the elements);
 * the scratch follows the block's bytes. Any other dtype value fails with ZT_ERR_USAGE.
 */
#ifndef ZT_COMM_H
#define ZT_COMM_H

#include "zerotrain/zerotrain.h"
#include "obs/commlog.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct zt_comm zt_comm;       /* a communicator: an MPI comm plus zerotrain's state */
typedef struct zt_comm_op zt_comm_op; /* a collective in flight (non-blocking API) */

/* ---- world.c: MPI, the world and sub-groups ------------------------------------------------ */

/* Thread levels, the values of MPI_THREAD_SINGLE .. MPI_THREAD_MULTIPLE in order. */
typedef enum zt_comm_threads {
    ZT_COMM_THREAD_SINGLE = 0,
    ZT_COMM_THREAD_FUNNELED = 1,
    ZT_COMM_THREAD_SERIALIZED = 2,
    ZT_COMM_THREAD_MULTIPLE = 3
} zt_comm_threads;

/* Initializes MPI if nobody has (MPI_Init_thread asking for MPI_THREAD_MULTIPLE; started without
 * mpirun this is a 1-rank singleton) and returns the world: a dup of MPI_COMM_WORLD named
 * "world", MPI_ERRORS_RETURN, timeout from ZT_COMM_TIMEOUT (default 300 s). argc/argv may be
 * NULL. May be called again (each call returns a new world comm; MPI is initialized once).
 * Fails with ZT_ERR_USAGE for a malformed ZT_COMM_TIMEOUT / ZT_COMM_CHUNK_BYTES, ZT_ERR_PEER
 * when MPI cannot start or a rank does not arrive within the timeout. */
int zt_comm_init(int *argc, char ***argv, zt_comm **world, zt_error *err);
/* Finalizes MPI if zt_comm_init initialized it (no-op otherwise, or when already finalized).
 * Free every comm first. After a ZT_ERR_PEER, call zt_comm_abort instead: MPI_Finalize waits
 * for all ranks and would hang on a lost one. */
int zt_comm_finalize(zt_error *err);
/* MPI_Abort(MPI_COMM_WORLD, code): ends every rank of the job. For main() only (the CLI maps
 * ZT_ERR_PEER to exit code 5 this way); library code never calls it. */
void zt_comm_abort(int code);
/* The thread level MPI provided (a zt_comm_threads value); -1 before zt_comm_init. */
int zt_comm_thread_level(void);

int zt_comm_rank(const zt_comm *c);
int zt_comm_size(const zt_comm *c);
/* The MPI_COMM_WORLD rank of this comm's rank r (0 <= r < size), for messages and logs. */
int zt_comm_world_rank(const zt_comm *c, int r);
/* Name used in messages ("world", "shard", ...); set_name copies up to 31 characters. */
const char *zt_comm_name(const zt_comm *c);
void zt_comm_set_name(zt_comm *c, const char *name);

/* MPI_Comm_split, preceded by a deadline-guarded exchange so a missing rank is named instead of
 * hanging. Collective over parent. Ranks with equal color form one new comm, ordered by (key,
 * parent rank). color < 0: this rank joins no comm and *out is NULL. The new comm inherits the
 * parent's timeout and chunk size; its name is "<parent>.<color>" (set a better one). Counted
 * under ZT_COLL_SETUP. */
int zt_comm_split(zt_comm *parent, int color, int key, zt_comm **out, zt_error *err);
/* MPI_Comm_dup, deadline-guarded the same way: same ranks, separate message space, own scratch
 * and counters, inherits timeout, chunk size and name. For a second thread. */
int zt_comm_dup(zt_comm *c, zt_comm **out, zt_error *err);
/* The hybrid mesh (FSDP HYBRID_SHARD / MiCS): world ranks r = g*shard_size + i form shard group
 * g (members i = 0..shard_size-1, "shard") and replicate group i (members g = 0.., "replicate").
 * shard_size must divide the world size (ZT_ERR_USAGE otherwise). */
int zt_comm_mesh_2d(zt_comm *world, int shard_size, zt_comm **shard, zt_comm **replicate,
                    zt_error *err);
/* Frees the comm (MPI_Comm_free when MPI is still up), its scratch and counters. NULL is fine.
 * Not collective in effect, but call it on all ranks. */
void zt_comm_free(zt_comm *c);

/* Chunk size in bytes for cutting large messages (rounded down to a multiple of 4, at least
 * 4 KiB). Must be the same on all ranks of the comm: it decides message boundaries (a mismatch
 * fails with ZT_ERR_MISMATCH). ZT_ERR_USAGE for a value below 4 KiB. */
int zt_comm_set_chunk_bytes(zt_comm *c, size_t bytes);
size_t zt_comm_chunk_bytes(const zt_comm *c);

/* ---- deadline.c: timeouts and the non-blocking op interface ------------------------------- */

/* Seconds without progress after which a wait fails with ZT_ERR_PEER. seconds must be > 0 and
 * finite (ZT_ERR_USAGE otherwise). Local: ranks may differ. */
int zt_comm_set_timeout(zt_comm *c, double seconds);
/* The job's deadline, for every comm of this process (existing and future) in place of their own
 * (seconds > 0; 0 or less: each comm's own again). The trainer sets it from comm.timeout_s. */
void zt_comm_set_job_timeout(double seconds);
/* The training step this rank is computing (1-based), for the status board: a deadline's message
 * says which step and collective each rank was in (board.c). */
void zt_comm_note_step(int64_t step);
/* The debug check of collective fingerprints (fingerprint.c) on or off for this process; default
 * from ZT_COMM_CHECK (unset: off). Costs one small all-gather before every collective. */
void zt_comm_set_check(bool on);
double zt_comm_timeout(const zt_comm *c);
/* Seconds a wait keeps polling MPI in a tight loop after the last progress before it starts to
 * yield the core (and to sleep after 10x that). Default 1 ms (0 when the node runs more ranks
 * than cores), env ZT_COMM_SPIN_US; split/dup inherit it. Larger: less
 * latency on a busy machine; smaller: idle waits cost the compute threads less. >= 0, else
 * ZT_ERR_USAGE. Local: ranks may differ. */
int zt_comm_set_spin(zt_comm *c, double seconds);
/* True after a ZT_ERR_PEER / ZT_ERR_MISMATCH on this comm (see the contract above). */
bool zt_comm_broken(const zt_comm *c);

/* Makes progress on op without blocking; *done = true once it finished (then op is gone, as
 * after zt_comm_op_wait). Never times out: the deadline only runs inside zt_comm_op_wait.
 * On error the op is gone too and the comm is broken. */
int zt_comm_op_test(zt_comm_op *op, bool *done, zt_error *err);
/* Blocks until op finishes or fails (deadline as above). op is gone after it returns. */
int zt_comm_op_wait(zt_comm_op *op, zt_error *err);

/* ---- tree_sum.c: the fixed summation order -------------------------------------------------- */

/* out[i] = sum over k of parts[k][i], i < n, added as the pairwise tree over k:
 *   sum(lo,hi) = hi-lo == 1 ? parts[lo] : sum(lo,mid) + sum(mid,hi),  mid = lo + (hi-lo)/2
 * so 4 parts give ((p0+p1)+(p2+p3)), 3 give (p0+(p1+p2)). The bits depend only on the values and
 * nparts (not on n, alignment, blocking or the CPU's vector width). out may be the same pointer
 * as any parts[k] (exact alias; no other overlap). nparts >= 1 (nparts < 1 leaves out alone).
 * Works in L1-sized blocks with vectorized inner loops; no allocation, cannot fail. */
void zt_tree_sum_f32(float *out, const float *const *parts, int nparts, size_t n);
/* The same tree over bf16 bit patterns: each + is the fp32 sum of two bf16 values rounded to the
 * nearest bf16 (nearest-even; a subnormal sum becomes a signed zero, src/kernels/convert.c), and
 * out receives the root's bf16 bits. Hence a subtree's sum is itself a bf16 value: summing the
 * sums of aligned subtrees gives the bits of the whole tree. Same aliasing, blocking and
 * threading rules as zt_tree_sum_f32. */
void zt_tree_sum_bf16(uint16_t *out, const uint16_t *const *parts, int nparts, size_t n);
/* The same over fp16 bit patterns: each + rounded to the nearest fp16 (F16C, nearest-even; past
 * 65504 it is infinity, and infinity stays), fp16 subnormals kept. */
void zt_tree_sum_fp16(uint16_t *out, const uint16_t *const *parts, int nparts, size_t n);
/* Bytes per element of a payload dtype (4 for fp32, 2 for bf16 and fp16). */
size_t zt_dtype_bytes(zt_dtype dtype);
/* zt_tree_sum_f32, _bf16 or _fp16 by dtype. */
void zt_tree_sum(zt_dtype dtype, void *out, const void *const *parts, int nparts, size_t n);

/* ---- reduce_scatter.c --------------------------------------------------------------------- */

/* send: rank-major, block j (counts[j] floats, blocks back to back) is this rank's contribution
 * to rank j; counts has size() entries, equal on all ranks, zero allowed.
 * recv (counts[rank]) = zt_tree_sum_f32 over source ranks r = 0..N-1 of block `rank` of r.
 * recv may be exactly send's own block (send + sum of counts[j<rank]); no other overlap.
 * Traffic per rank: exactly sum_{j != rank} counts[j]*4 bytes sent and (N-1)*counts[rank]*4
 * received, no headers, no padding; zero-size blocks send no message. Uses the comm's scratch
 * (zt_comm_scratch_bytes_for). */
int zt_reduce_scatter_f32(zt_comm *c, const float *send, float *recv, const size_t *counts,
                          const char *tag, zt_error *err);
/* Non-blocking: posts everything and returns; send and recv must stay untouched until the op
 * finishes; counts is read during the call only. */
int zt_reduce_scatter_f32_start(zt_comm *c, const float *send, float *recv, const size_t *counts,
                                const char *tag, zt_comm_op **op, zt_error *err);
/* The same over elements of dtype (fp32, bf16 or fp16, "Payload dtypes" above): counts are elements,
 * send and recv hold elements of that type, recv = zt_tree_sum(dtype, ...) of the blocks, and the
 * traffic is the formulas above with zt_dtype_bytes(dtype) bytes per element. ZT_ERR_USAGE for
 * an unknown dtype. The _f32 entry points are these with ZT_DTYPE_FP32. */
int zt_reduce_scatter(zt_comm *c, zt_dtype dtype, const void *send, void *recv, const size_t *counts,
                      const char *tag, zt_error *err);
int zt_reduce_scatter_start(zt_comm *c, zt_dtype dtype, const void *send, void *recv, const size_t *counts,
                            const char *tag, zt_comm_op **op, zt_error *err);
/* Bytes of scratch a reduce-scatter on c with blocks of at most max_block floats uses:
 * D rounds x (N-1) sources x min(max_block x 4, chunk_bytes) bytes, D = 8/(N-1) clamped to
 * [2, 8] (2 MiB on 2..5 ranks with the default chunk, 512 KiB x (N-1) beyond; never more than
 * D x (N-1) x max_block x 4, whatever the bucket size). For the memory plan. */
size_t zt_comm_scratch_bytes_for(const zt_comm *c, size_t max_block);
/* The same for a comm of nranks ranks and chunk_bytes chunks that does not exist yet (the memory
 * plan, the estimator), for blocks of at most max_block_bytes bytes (elements x
 * zt_dtype_bytes: a bf16 block needs the scratch of an fp32 block of half its elements); 0 for
 * one rank. */
size_t zt_comm_scratch_bytes_for_size(int nranks, size_t chunk_bytes, size_t max_block_bytes);
/* The chunk size new comms get: ZT_COMM_CHUNK_BYTES, or the default (256 KiB) when unset or bad. */
size_t zt_comm_default_chunk_bytes(void);
/* Grows the comm's scratch to at least bytes now (ZT_ERR_NOMEM on failure). */
int zt_comm_reserve_scratch(zt_comm *c, size_t bytes, zt_error *err);
/* Bytes of scratch the comm holds now. */
size_t zt_comm_scratch_bytes(const zt_comm *c);

/* ---- all_gather.c ------------------------------------------------------------------------- */

/* recv = the N blocks rank-major (block j: counts[j] floats from rank j). send holds
 * counts[rank] floats and may be exactly recv's own block. Traffic per rank: (N-1)*counts[rank]*4
 * bytes sent, sum_{j != rank} counts[j]*4 received. Bit-exact copy. */
int zt_all_gather_f32(zt_comm *c, const float *send, float *recv, const size_t *counts,
                      const char *tag, zt_error *err);
int zt_all_gather_f32_start(zt_comm *c, const float *send, float *recv, const size_t *counts,
                            const char *tag, zt_comm_op **op, zt_error *err);
/* The same for bf16 elements (counts in elements, 2 bytes each): bf16-low's parameters. */
int zt_all_gather_bf16(zt_comm *c, const uint16_t *send, uint16_t *recv, const size_t *counts,
                       const char *tag, zt_error *err);

/* ---- all_to_all.c ------------------------------------------------------------------------- */

/* Every rank sends send[p] (send_bytes[p] bytes) to every rank p and receives into recv[p] the
 * block rank p has for it, of at most recv_cap[p] bytes; the sizes travel first (one uint64_t per
 * pair and the rooms, counted as ZT_COLL_SMALL "all_to_all counts"; through the shared segment,
 * where the comm has one, in the same op and not counted), so recv_bytes[p] tells what
 * arrived. The own block is copied (memmove). Expert parallelism's dispatch and combine
 * (MPI_Alltoallv's job; the payload counted as ZT_COLL_ALL_TO_ALL: the bytes this rank sends to the
 * others). A block over its receiver's room is ZT_ERR_MISMATCH naming both sizes on both ranks of
 * that pair (the other pairs complete); one over INT_MAX bytes ZT_ERR_USAGE. Traffic per rank: the
 * sizes' 16 (N-1) bytes, then the blocks, each once. Between ranks of one machine a block that lies
 * in one of its sender's zt_shared_alloc buffers (below) is copied out of it by its receiver with
 * loads (about half the time of process_vm_readv, which reads any other). */
int zt_all_to_allv(zt_comm *c, const void *const *send, const size_t *send_bytes, void *const *recv,
                   const size_t *recv_cap, size_t *recv_bytes, const char *tag, zt_error *err);

/* ---- all_reduce.c ------------------------------------------------------------------------- */

/* counts[j] = n/N, plus one for j < n%N: the block split zt_all_reduce_f32 uses. */
void zt_comm_even_counts(size_t n, int nranks, size_t *counts);
/* buf (n floats, in place) = tree sum over ranks, identical bits on all ranks and equal to
 * zt_reduce_scatter_f32 + zt_all_gather_f32 over zt_comm_even_counts(n, N). Traffic per rank:
 * (n - c_me)*4 + (N-1)*c_me*4 bytes each way, i.e. 2n(N-1)/N floats when N divides n. */
int zt_all_reduce_f32(zt_comm *c, float *buf, size_t n, const char *tag, zt_error *err);
int zt_all_reduce_f32_start(zt_comm *c, float *buf, size_t n, const char *tag, zt_comm_op **op,
                            zt_error *err);
/* The same over n elements of dtype (fp32, bf16, fp16): buf = zt_tree_sum(dtype) over ranks, equal to
 * zt_reduce_scatter + an all-gather of the summed blocks; traffic as above with
 * zt_dtype_bytes(dtype) bytes per element (bf16, fp16: half of fp32's, both phases). */
int zt_all_reduce(zt_comm *c, zt_dtype dtype, void *buf, size_t n, const char *tag, zt_error *err);
int zt_all_reduce_start(zt_comm *c, zt_dtype dtype, void *buf, size_t n, const char *tag, zt_comm_op **op,
                        zt_error *err);

/* The all-reduce's algorithms. Every one gives the same bits (each element is zt_tree_sum over
 * the ranks' values in rank order, block j summed by rank j or by every rank from the same
 * operands); they differ in how the data move:
 *   RS_AG     MPI messages: reduce-scatter + all-gather, pipelined per chunk: 2(N-1)/N x n
 *             elements each way, two rounds; bandwidth-optimal for any N, any placement.
 *   EXCHANGE  MPI messages: every rank sends its whole vector to every other and adds all N
 *             itself: (N-1) x n elements each way (the same as RS_AG on 2 ranks), one round,
 *             N x n additions: for latency-bound sizes.
 *   SHM       the reduce-scatter + all-gather through the comm's shared segment (shm.c) with
 *             memcpy and counters instead of messages; only when every rank is on this node
 *             (and at most 16 ranks).
 * AUTO (the default) picks by placement and size, as Open MPI's tuned component picks by size:
 * SHM when the comm has a segment and the payload is at most ZT_COMM_AR_SHM_BYTES (default:
 * any; 0: no segment is made); else EXCHANGE on 2 ranks up to ZT_COMM_AR_EXCHANGE_BYTES
 * (default 64 KiB; 0: never); else RS_AG. The counters report the bytes of the RS_AG formula
 * for SHM too (what each rank's peers read of its data); EXCHANGE counts what it sends. */
typedef enum zt_ar_algo {
    ZT_AR_ALGO_AUTO = 0,
    ZT_AR_ALGO_RS_AG = 1,
    ZT_AR_ALGO_EXCHANGE = 2,
    ZT_AR_ALGO_SHM = 3
} zt_ar_algo;
/* Whether c has a shared segment (every rank on this node, 2-16 ranks, ZT_COMM_AR_SHM_BYTES not 0). */
bool zt_comm_has_shm(const zt_comm *c);
/* The bytes of c's segment that are this rank's: its region, 4 KiB + D x N x 256 KiB (4 MiB on 2
 * ranks, 3 MiB on 3, 2 MiB on 4; every rank maps the N regions, the node holds each once); 0
 * without a segment. Memory the engine counts in its comm class (src/memory/plan.c). */
size_t zt_comm_shm_bytes(const zt_comm *c);
/* What zt_comm_shm_bytes says for a comm of nranks ranks, all on one node, created now (0 for 1
 * or more than 16 ranks, or ZT_COMM_AR_SHM_BYTES=0). */
size_t zt_comm_shm_bytes_for_size(int nranks);
/* Forces one algorithm on c (AUTO: by size again); the same on every rank. ZT_ERR_USAGE for
 * another value, or SHM on a comm without a segment. For tests and benchmarks: the result's
 * bits do not change. */
int zt_comm_set_all_reduce_algo(zt_comm *c, zt_ar_algo algo);
/* How a rank writes the pieces it publishes through the segment on 2 ranks (all_reduce_shm.c, the
 * one-shot): AUTO streams them past the caches when the vector is large or the peer's core is far
 * (timed on the fly), CACHED always writes through the caches, STREAMING always streams. Each rank
 * chooses for itself; the result's bits do not change. For tests and benchmarks. */
typedef enum zt_ar_stores { ZT_AR_STORES_AUTO = 0, ZT_AR_STORES_CACHED = 1, ZT_AR_STORES_STREAMING = 2 } zt_ar_stores;
int zt_comm_set_all_reduce_stores(zt_comm *c, zt_ar_stores stores);
/* Whether c's last one-shot that waited for its peer found the peer's core far (see above). */
bool zt_comm_shm_peer_far(const zt_comm *c);
/* The algorithm zt_all_reduce of n elements of dtype would run on c now (never AUTO). */
zt_ar_algo zt_comm_all_reduce_algo(const zt_comm *c, zt_dtype dtype, size_t n);
/* The 2-rank EXCHANGE threshold in payload bytes (ZT_COMM_AR_EXCHANGE_BYTES at creation). */
int zt_comm_set_all_reduce_exchange_bytes(zt_comm *c, size_t bytes);
size_t zt_comm_all_reduce_exchange_bytes(const zt_comm *c);
/* The SHM threshold in payload bytes (ZT_COMM_AR_SHM_BYTES at creation; the segment, if any,
 * stays: 0 here sends every all-reduce by messages). */
int zt_comm_set_all_reduce_shm_bytes(zt_comm *c, size_t bytes);
/* Whether the all-to-all through the shared segment reads each block straight from its sender's
 * memory (process_vm_readv: one copy; the default where every rank could, probed at the comm's
 * creation) or passes it through the segment's slots (two copies). Every rank of c must set the
 * same; on = true where the probe failed is ZT_ERR_USAGE. For tests and benchmarks. */
int zt_comm_set_a2a_single_copy(zt_comm *c, bool on);
bool zt_comm_a2a_single_copy(const zt_comm *c);
/* Whether the single copy, for a block that lies in one of its sender's shared buffers (below),
 * maps that buffer here and copies the block with loads (the default where the single copy is on)
 * or reads it with process_vm_readv like any other. Each rank decides for itself; on = true without
 * the single copy's permission is ZT_ERR_USAGE. For tests and benchmarks. */
int zt_comm_set_a2a_map(zt_comm *c, bool on);
bool zt_comm_a2a_map(const zt_comm *c);
/* The peers' shared buffers mapped on c now (each unmapped once its owner has freed it). */
int zt_comm_a2a_mapped(const zt_comm *c);

/* ---- shared_buffers.c --------------------------------------------------------------------- */
/* A buffer of `bytes` (64-byte aligned, not zeroed) that this rank's peers on the machine can map:
 * the all-to-all reads a block that lies in one out of its sender's memory with plain loads
 * instead of process_vm_readv (half the time at 3 MiB, bench/RESULTS.md). A memfd of its own; where
 * none can be made, or 128 are live, plain memory (aligned_alloc). NULL only when out of memory. */
void *zt_shared_alloc(size_t bytes);
/* Frees a buffer from zt_shared_alloc, of either kind (plain memory is free()d). */
void zt_shared_free(void *p);
size_t zt_comm_all_reduce_shm_bytes(const zt_comm *c);
/* The name of an algorithm: "rs_ag", "exchange", "shm", "auto"; "?" otherwise. */
const char *zt_ar_algo_name(int algo);

/* ---- broadcast.c -------------------------------------------------------------------------- */

/* buf (bytes) on every rank = buf on root. Pipelined binomial tree: a rank with k children in
 * the tree sends k*bytes, every non-root receives bytes once (sum over ranks: (N-1)*bytes). */
int zt_broadcast_bytes(zt_comm *c, void *buf, size_t bytes, int root, const char *tag,
                       zt_error *err);

/* ---- small.c: a few scalars, exact ops -------------------------------------------------- */
/* These move a few bytes with the pairwise all-gather (so a missing rank is named) and reduce
 * locally: max and logical AND are exact and order-independent, so the result is the same on
 * every rank whatever the order. Counted under ZT_COLL_SMALL (barrier under ZT_COLL_SETUP). */

/* *value = max over ranks; NaN on any rank gives NaN everywhere (MPI_MAX leaves that undefined). */
int zt_all_reduce_max_f64(zt_comm *c, double *value, const char *tag, zt_error *err);
/* *flag = 1 if every rank's *flag != 0, else 0 (the finite check all ranks agree on). */
int zt_all_reduce_and_int(zt_comm *c, int *flag, const char *tag, zt_error *err);
/* recv (N*n doubles, rank-major) = every rank's send (n doubles): norm partials. Meant for small
 * n (it is the pairwise all-gather: N-1 messages each way per rank). */
int zt_all_gather_f64(zt_comm *c, const double *send, double *recv, size_t n, const char *tag,
                      zt_error *err);
/* recv = the N blocks rank-major (block j: counts[j] doubles from rank j); send holds
 * counts[rank] doubles and may be exactly recv's own block. Counted under ZT_COLL_SMALL (the
 * gradient-norm partials each rank owns: their sizes differ by rank). Bit-exact copy. */
int zt_all_gather_f64v(zt_comm *c, const double *send, double *recv, const size_t *counts, const char *tag,
                       zt_error *err);
/* Returns once every rank has entered it (or fails naming who did not). */
int zt_comm_barrier(zt_comm *c, const char *tag, zt_error *err);

/* ---- compressed_all_reduce.c: 1-bit Adam's momentum (DeepSpeed's compressed_allreduce) ------ */
/* buf (n floats, in place) = the mean over the N ranks of buf, sent as signs: blocks j =
 * zt_comm_even_counts(n, N) (block j is rank j's, its "server" chunk).
 *   worker:  x = buf + worker_error;  s = ||x||_2 / sqrt(n) (one scale per rank, the sum of
 *            squares in double, rounded once);  c = s·sign(x) (sign(x) = +1 for x >= 0, -0 and
 *            NaN, else -1);  worker_error = x - c;  block j of sign(x) (1 bit an element) and s go
 *            to rank j.
 *   server:  y = sum over r = 0..N-1, in that order, of sign_r · (s_r · (1/N)) (fp32), plus
 *            server_error (counts[rank] floats);  t = ||y||_2 / sqrt(counts[rank]);
 *            server_error = y - t·sign(y);  t and the signs of y to every rank.
 *   result:  block j of buf = t_j·sign_j(y).
 * Every rank ends with the same bits. Wire per rank: phase 1 sends 4 + ceil(counts[j]/8) bytes to
 * each other rank j, phase 2 4 + ceil(counts[rank]/8) bytes to each: about 2(N-1)/N x n/8 bytes
 * each way, 1/32 of zt_all_reduce_f32's. Counted as one ZT_COLL_COMPRESSED_ALL_REDUCE (its
 * payload in the comm log: the bytes this rank sends). Staging in the comm's scratch:
 * zt_compressed_scratch_bytes. One rank: buf unchanged (nothing is compressed: DeepSpeed's
 * OnebitAdam on one process). The segments move in chunks of the comm's chunk size, all posted at
 * once. ZT_ERR_USAGE for NULL buffers. */
int zt_compressed_all_reduce(zt_comm *c, float *buf, size_t n, float *worker_error, float *server_error,
                             const char *tag, zt_error *err);
/* counts[rank] of zt_comm_even_counts: the server error's floats on this rank */
size_t zt_compressed_server_floats(size_t n, int nranks, int rank);
/* The staging bytes zt_compressed_all_reduce takes from the comm's scratch (0 for one rank). */
size_t zt_compressed_scratch_bytes(size_t n, int nranks);

/* ---- counters.c --------------------------------------------------------------------------- */

/* zt_coll_kind, the kinds counted here and in the comm log: obs/commlog.h */

typedef struct zt_coll_counters {
    uint64_t calls;      /* collectives finished successfully (failed ones are not counted) */
    uint64_t bytes_sent; /* payload bytes this rank sent (MPI headers excluded) */
    uint64_t bytes_recv; /* payload bytes this rank received */
    double seconds;      /* wall time from start to completion (overlapped time included) */
    double wait_seconds; /* time spent blocked in waits: the exposed, not-overlapped part */
} zt_coll_counters;

typedef struct zt_comm_counters {
    zt_coll_counters kind[ZT_COLL_NKINDS];
    zt_coll_counters total; /* sum over kinds */
} zt_comm_counters;

/* Thread-safe snapshot / reset of the comm's counters. */
void zt_comm_counters_get(const zt_comm *c, zt_comm_counters *out);
void zt_comm_counters_reset(zt_comm *c);
/* "reduce_scatter", "all_gather", ... ; "?" for an unknown kind. */
const char *zt_coll_kind_name(int kind);

#endif /* ZT_COMM_H */
