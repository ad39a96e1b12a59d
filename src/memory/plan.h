/* plan.h - the memory plan: every byte the engine will allocate, per class (zt_mem_class), for a
 * model, engine options and (world, rank), computed before the first step (docs/memory.md).
 *
 * How: zt_memory_plan_compute replays the engine's allocation sequence (engine.c at creation,
 * then one optimizer step: grads.c, overlap.c, collect.c, compute_copy.c, param_store.c) over sizes only,
 * keeping the bytes per class now, their high-water and the high-water of their sum. It uses the
 * engine's own shard plan (src/shard/plan.h) and bucket splitting, so it is rank-exact; the engine
 * computes its plan at creation and allocates its communication staging from it, and
 * tests/memory_plan.sh checks that the measured high-water per class equals the plan.
 *
 * What changes the plan but is not in zt_engine_options is a field of zt_memory_plan_options:
 * whether the communication thread runs, the comms' chunk size, and NVMe offload of the
 * optimizer state for estimates without a directory (zt_engine_options.offload turns it on too;
 * po's buffer count/size, when set, win over the options'). */
#ifndef ZT_MEMORY_PLAN_H
#define ZT_MEMORY_PLAN_H

#include "shard/plan.h"
#include "zerotrain/zerotrain.h"

/* bf16 optimizer state in memory (bf16-low) is updated through fp32 chunks of this many elements
 * per state kind (engine step.c; counted in the optimizer class) */
#define ZT_STATE_CHUNK 65536

/* ---------------------------------------------------------------------------------------------
 * Bytes per element the engine stores, per precision mode (the one table the plan, the engine's
 * compute copies and the estimator read). One row per mode:
 *   master   the parameters array (fp32 master weights; bf16-low: bf16 parameters, 2 bytes)
 *   copy     the compute copy of each matrix (0: none, compute reads the master: fp32, or
 *            bf16-low, whose bf16 parameters are their own compute copy)
 *   grads    every gradient buffer (fp32 in every mode; bf16/fp16 reduction packs 2-byte buckets, plan.c)
 *   moment   each optimizer state array (AdamW has two, SGD with momentum one)
 * fp16 holds fp16 values in fp32 arrays (its compute copy too: this CPU has no fp16 arithmetic).
 *
 * bf16-low (master 2) also holds, per the engine (src/engine/param_bf16.c): ZT_STATE_CHUNK fp32
 * elements to update, load and save the parameters through (optimizer class), and fp32 views of
 * the parameters a running unit reads as fp32 (the 1-D ones for GPT-2), made before the unit
 * runs and freed after it (gathered class). */
typedef struct zt_precision_bytes {
    int master, copy, grads, moment;
} zt_precision_bytes;

const zt_precision_bytes *zt_precision_bytes_of(zt_precision_mode mode);
/* The zt_lp_kind (src/kernels/kernels.h) units compute with under p: 1 bf16, 2 fp16, 0 fp32. It
 * sizes their saved buffers (zt_unit_ops.saved_floats) and staging, in the engine and the plan. */
int zt_precision_lp_kind(const zt_precision *p);

/* The compute-copy rule (zerotrain.h, zt_unit_ops.reads_lp): under low-precision compute (lp_kind
 * != 0) every matrix (ndim >= 2) has a compute copy, and a unit reads its k-th parameter through
 * that copy alone when its reads_lp says so; it then gets params[k] = NULL, in every strategy.
 * zt_unit_reads_lp says whether unit u reads its k-th parameter so; zt_param_reads_fp32 whether
 * some unit reads parameter i as fp32 (a vector, or a matrix whose unit does not declare it). */
bool zt_unit_reads_lp(const zt_model *m, int lp_kind, int u, int k);
bool zt_param_reads_fp32(const zt_model *m, int lp_kind, int i);
/* zero1/zero2 (and hybrid over zero2) under low-precision compute with fp32 master weights keep
 * the master as this rank's pieces (shard layout) and replicate only what the units read: the
 * compute copy of the matrices and an fp32 copy of the parameters read as fp32
 * (src/engine/master_shard.c). That fp32 copy is one array, each parameter starting on 16 floats
 * (64 bytes); this is its size in floats (0: no parameter is read as fp32). */
bool zt_master_sharded(const zt_engine_options *o, bool shard_optim, bool shard_params);
size_t zt_fp32_copy_floats(const zt_model *m, int lp_kind);
/* The quantized base (src/engine/param_quant.c): bytes of parameter p's quantized form, 64-byte
 * aligned (0: not quantized, zt_param_desc.quant); floats of every quantized parameter's bytes
 * together (one allocation, class params); floats of p's dequantized compute operand (bf16
 * compute: 2 bytes an element, else 4), held while its unit runs (class gathered). */
size_t zt_memory_quant_bytes(const zt_param_desc *p);
size_t zt_memory_quant_floats(const zt_model *m);
size_t zt_memory_dequant_floats(const zt_param_desc *p, int lp_kind);
/* The quantized base sharded (zero3, hybrid: nshards > 1), as FSDP shards bitsandbytes' flat
 * Params4bit, on whole blocks: a quantized form is two per-block regions (NF4: 32 code bytes and
 * one double-quantized absmax byte per block of 64 values; int8: a row's codes and its fp32
 * scale) and a replicated tail (NF4's fp32 second-level scales and mean: 4 bytes per 16,384
 * values, and 4). The blocks are dealt in runs of 4 (so every piece is whole 4-byte words): shard
 * s owns blocks [4·floor(G·s/N), 4·floor(G·(s+1)/N)) of G = blocks/4 runs, the last shard also the
 * remaining blocks and the regions' padding. A shard keeps its bytes of both regions and the tail
 * (zt_memory_quant_local_bytes, 64-byte aligned; the whole form when nshards is 1); a unit's
 * forward or backward all-gathers the whole form (class gathered, zt_memory_quant_whole_floats)
 * before the dequantization and drops it right after. */
typedef struct zt_quant_split {
    size_t whole;            /* bytes of the whole form (zt_nf4_bytes / zt_int8_bytes) */
    size_t off[2], end[2];   /* region r (0 codes, 1 scales) spans whole-form bytes [off, end) */
    size_t begin_s[2], end_s[2]; /* shard s's bytes of region r: [begin_s, end_s) of the whole form */
    size_t tail_off, tail;   /* the replicated tail: whole-form bytes [tail_off, tail_off + tail) */
    size_t local;            /* shard s's bytes: its two ranges, then the tail (unaligned) */
} zt_quant_split;
void zt_memory_quant_split(const zt_param_desc *p, int nshards, int s, zt_quant_split *q);
size_t zt_memory_quant_local_bytes(const zt_param_desc *p, int nshards, int s);
size_t zt_memory_quant_local_floats(const zt_model *m, int nshards, int s);
size_t zt_memory_quant_whole_floats(const zt_param_desc *p);

/* Activation checkpointing comes from zt_engine_options.activation_checkpointing, and what a unit
 * keeps under selective from its zt_unit_ops.kept_floats, as the engine (recompute.c) lays them
 * out: none keeps every saved buffer; full keeps none and recomputes each into one buffer shared by
 * all units (of the largest saved_floats); selective keeps kept_floats and recomputes the rest into
 * the shared buffer (of the largest rest); units without kept_floats keep everything. */

typedef struct zt_memory_plan_options {
    int overlap;               /* the communication thread: -1 = as the engine decides it (shard
                                  group > 1, zero2/zero3 inner strategy, not opt.no_overlap_comm,
                                  MPI thread support assumed); 0 no; 1 yes */
    /* NVMe offload of the optimizer state (ZeRO-Infinity): the moments live in files, memory
     * holds buffer_count staging buffers, each one chunk of every state array (nvme_store.c's
     * rule: chunk = buffer_bytes / kinds rounded down to 4 KiB, at most the state's size). */
    size_t comm_chunk_bytes;   /* the comms' chunk size (reduce-scatter scratch); 0: new comms' */
    bool offload_optimizer;
    bool offload_param;        /* zero3's parameter pieces in files too (one more streamed kind;
                                  each gather reads its unit's pieces into a window) */
    int offload_buffer_count;  /* 0: 4 */
    size_t offload_buffer_bytes; /* 0: 64 MiB */
    bool no_window_check;      /* do not refuse an offload.param_max_live below the largest window
                                  (the engine checks it over every rank of the job itself) */
    int shm;                   /* the comms' shared segments (src/comm/shm.c): -1 = every comm of
                                  2..16 ranks has one (all its ranks on one node, as mpirun on one
                                  machine; estimates assume it); 0 = none (the ranks on different
                                  nodes, or ZT_COMM_AR_SHM_BYTES=0); 1 = the same as -1. The engine
                                  says what its comms have. */
} zt_memory_plan_options;

/* Defaults: the communication thread as the engine decides, no offload, new comms' chunks. */
void zt_memory_plan_options_default(zt_memory_plan_options *po);
/* src/memory/experts.c. The shard plan's groups for rank `rank` of the engine's data-parallel
 * `world` (the engine builds its plan with them too): every group the shard group (nshards, shard),
 * except, with the experts stored E/ep a rank (zt_model_store_experts) under a ZeRO stage, the
 * expert-data-parallel one (world / ep ranks, this rank's index rank / ep; one shard under ddp;
 * under hybrid, nshards its shard group, the edp ranks inside it: zt_mesh_edp_shard_size(nshards,
 * ep) ranks, index rank / ep % that, comm/mesh.h). */
void zt_memory_plan_groups(const zt_model *m, const zt_engine_options *o, int world, int rank, int nshards, int shard,
                           zt_plan_group *groups);
/* The sizes of the comms the experts stored E/ep a rank are reduced over, for plan pl: *reduce
 * (their all-reduce, reduce-scatters and all-gathers: the edp group, hybrid's edp_shard group) and
 * *replica (hybrid, replicas true: the edp_replicate group across which their pieces are
 * all-reduced, where it is a comm apart from the replica group's; else 1); 1 and 1 with the experts
 * whole. zt_memory_edp_replica_shared: their pieces are all-reduced on the replica group's own comm
 * (hybrid, ep dividing the shard group: comm/mesh.h), its scratch sized for both. */
void zt_memory_edp_comms(const zt_model *m, const zt_plan *pl, bool replicas, int world, int *reduce, int *replica);
bool zt_memory_edp_replica_shared(const zt_model *m, const zt_plan *pl, bool replicas);
/* Why the engine keeps m's experts whole on every rank under options o, or NULL where it stores them
 * E/ep a rank (zt_engine_store_experts): hybrid with a shard group that neither holds whole ep
 * groups nor lies inside one (zt_mesh_edp_shard_size 0; torchtitan refuses such a mesh, the text
 * says so), 1-bit Adam (any compute precision, either offload, AdamW, SGD, Muon and LAMB, tensor
 * parallelism store them). The text is what the run's banner and the engine's refusal say. */
const char *zt_memory_experts_whole_reason(const zt_model *m, const zt_engine_options *o);
/* Whether m's experts (spread over ep > 1 parts) can be stored E/ep a rank under o: no reason above
 * (a model tensor parallelism cut stores them too: each tp part of an ep part holds its tp slice of
 * the part's experts, zt_param_desc.ep_parts) */
bool zt_memory_experts_storable(const zt_model *m, const zt_engine_options *o);
/* Estimates: m's experts stored E/ep a rank (part 0's shapes: every part's are equal) or whole, as
 * the engine would run them under o */
void zt_memory_experts_for(zt_model *m, const zt_engine_options *o);
/* The experts stored E/ep a rank: the logical model's gradient-norm chunks and one part's expert
 * chunks (engine/ep_group.c's norm), and the floats of that norm's buffers (class comm) */
void zt_memory_ep_chunks(const zt_model *m, int64_t *logical, int64_t *experts);
size_t zt_memory_ep_norm_floats(const zt_model *m);

/* The plan of rank `rank` of `world` ranks (world 1: one process). o gives the strategy, B, T,
 * grad_accum, reduce_every_micro_batch, bucket_bytes, keep_params_after_forward, no_prefetch,
 * hybrid_shard_size / hybrid_inner, activation_checkpointing, the optimizer kind and the
 * precision; o->comm only says that there is a comm (the world size is what counts). Fails with ZT_ERR_USAGE naming the bad value (shape, hybrid size, rank). */
int zt_memory_plan_compute(const zt_model *m, const zt_engine_options *o, const zt_memory_plan_options *po,
                           int world, int rank, zt_memory_plan *out, zt_error *err);

/* The engine allocates in floats: a buffer of `bytes` bytes of another type takes this many. */
static inline size_t zt_memory_floats_for_bytes(size_t bytes) { return (bytes + sizeof(float) - 1) / sizeof(float); }
/* Bytes of one engine allocation of n floats (zt_engine_alloc: 64-byte granules, at least one). */
static inline size_t zt_memory_alloc_bytes(size_t floats) {
    return ((floats ? floats : 1) * sizeof(float) + 63) & ~(size_t)63;
}

/* Parameter offload: the largest window any unit of m needs on any shard of pl's group (floats:
 * 4 KiB of alignment and each piece's 4 KiB blocks, the layout being aligned); *unit and *shard
 * say whose. */
size_t zt_memory_largest_window(const zt_model *m, const zt_plan *pl, int *unit, int *shard);
/* ZT_ERR_USAGE naming the key, the unit, the shard and the numbers when max_live (> 0) is below
 * need, the largest window (zt_memory_largest_window). */
int zt_memory_window_bound_error(const zt_model *m, size_t max_live, size_t need, int unit, int shard, zt_error *err);
/* Gradient offload (engine/grad_offload.c) leaves pipeline stages alone: their tied gradients are
 * summed across the stages after the reduction, from the resident pieces (engine/pipeline.c). */
static inline bool zt_memory_grad_offload_stage_ok(const zt_engine_options *o) {
    return !(o->pp_in_width > 0 || o->pp_send_out);
}
/* Parameter offload: floats of the window one gather reads params[0..n)'s pieces into (each
 * piece's enclosing 4 KiB blocks, plus 4 KiB to align the start; engine/param_offload.c). */
size_t zt_memory_window_floats(const zt_plan *pl, const int *params, int n);
/* Tensor parallelism (engine/tp_group.c): floats of the group's staging for a model cut into
 * parts (0 when whole): every part's row sums of the loss (2·B·T doubles each), the generated
 * position's logits (B x V), or sequence parallelism's (B, T, C), whichever is largest. */
size_t zt_memory_tp_work_floats(const zt_model *m, int B, int T);
/* LAMB under tensor parallelism and with the experts stored E/ep a rank (engine/step_whole.c): the
 * largest logical tensor of a cut trainable parameter, in floats rounded up to 16 (0 when none is
 * cut). The step stages 2 of it (p, then u, concatenated by part, then placed as the logical
 * tensor) and takes the logical tensor's chunk partials (zt_memory_logical_chunks) in 4 floats
 * each more: zt_memory_lamb_cut_chunks, the most of any cut tensor. */
size_t zt_memory_lamb_cut_floats(const zt_model *m);
size_t zt_memory_lamb_cut_chunks(const zt_model *m);
/* The norm chunks of cut parameter p's logical tensor as one process numbers them: a stacked
 * experts' tensor stored E/ep a rank (zt_param_desc.ep_parts) restarts them at each expert, as the
 * plan's norm blocks (shard/plan.h); a tensor tp cuts has them in one run */
int64_t zt_memory_logical_chunks(const zt_param_desc *p, int64_t *blocks, int64_t *block_numel);
/* Muon and LAMB under bf16-low (engine/step_whole.c): the largest slice of a trainable parameter
 * this rank updates (its shard under zero1/2/3 and hybrid, the whole local tensor under ddp), in
 * floats rounded up to 16; the step widens a slice's parameter and moments into 3 of it. */
size_t zt_memory_max_slice_floats(const zt_model *m, const zt_plan *pl, bool shard_optim);
/* Sequence parallelism: the widest activation a unit's output holds a T range of, in floats per
 * token of the whole sequence (out_width x seq_parts: GPT-2's and Llama's C); 0 without it. With it
 * the staging above also holds a whole (B, T, C) activation, part-major. */
size_t zt_memory_seq_width(const zt_model *m);

/* Sum of the classes params, compute_copy, grads, optimizer at rest: the model states. */
size_t zt_memory_plan_model_states(const zt_memory_plan *p);

#endif
