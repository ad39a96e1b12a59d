/* engine_internal.h - the engine's state, shared by its files: engine.c (layout, accessors,
 * forward/backward unit by unit, zero3 gather/release), recompute.c (activation checkpointing),
 * grads.c (gradient buffers and the fixed summation tree over micro-batches), step.c (reduction,
 * norm, clipping, optimizer, all-gather).
 *
 * Who holds what, per strategy (P = parameters, S = the shard group, "piece" = this rank's rows):
 *   strategy  params between steps   grads during backward          optimizer (m, v)
 *   ddp       full                   full, all-reduced at the step  full
 *   zero1     full (pieces+)         full, reduce-scattered         pieces
 *   zero2     full (pieces+)         per unit, freed once reduced*  pieces
 *   zero3     pieces (gathered per   per unit, freed once reduced*  pieces
 *             unit, freed after)
 *   * with gradient accumulation and reduce_every_micro_batch = false (no_sync), the full
 *     gradients are kept until the last micro-batch, as FSDP's no_sync does.
 *   + under bf16/fp16 compute with fp32 master weights (mode bf16, fp16) zero1/zero2 hold the
 *     fp32 master as pieces (like zero3) and replicate only the compute copies the units read:
 *     the matrices' copies and fp32 copies of the parameters read as fp32 (master_shard.c).
 * hybrid = zero3/zero2 inside groups of S consecutive ranks; after the reduce-scatter in the group
 * the pieces are all-reduced across the groups (replicas).
 *
 * Determinism: each micro-batch's gradient is computed into zeroed buffers and combined with the
 * others in a fixed pairwise tree over the global micro-batch index (ranks hold contiguous runs of
 * micro-batches, so the local tree is a subtree of the global one, and the collectives sum ranks
 * in the same pairwise tree). The gradient norm is the in-order sum of fixed-chunk partials.
 * Under precision.reduce bf16 (or fp16) the collectives' leaves (each rank's fp32 tree result) and
 * every partial sum over ranks are rounded to it (collect.c, src/comm/tree_sum.c): the strategies
 * still agree, but the micro-batch tree (fp32) and the rank tree (rounded) no longer nest. */
#ifndef ZT_ENGINE_INTERNAL_H
#define ZT_ENGINE_INTERNAL_H

#include "zerotrain/zerotrain.h"
#include "memory/plan.h"
#include "memory/sum_tree.h"
#include "shard/plan.h"
#include "engine/engine_state.h"
#include "engine/param_store.h"
#include "comm/p2p.h"

#include <pthread.h>


typedef struct zt_overlap zt_overlap; /* overlap.c */

/* Block cache (engine.c): a freed buffer of at least ZT_BLOCK_CACHE_MIN bytes is kept in one of
 * ZT_BLOCK_CACHE_SLOTS slots for the next allocation of exactly its size. */
#define ZT_BLOCK_CACHE_SLOTS 16
#define ZT_BLOCK_CACHE_MIN ((size_t)1 << 20)
typedef struct zt_nvme_store zt_nvme_store; /* src/offload/nvme_store.h */
struct zt_io_ticket;                        /* src/offload/io.h */

/* Parameter offload: one unit's window of parameter pieces read from the file (param_offload.c). */
typedef struct zt_param_window {
    float *buf;                      /* class params; NULL: no window */
    size_t floats;
    int params[ZT_UNIT_MAX_PARAMS];  /* the parameters whose pieces it holds */
    int n;
    bool reading;                    /* reads queued against ticket and not yet waited for */
    struct zt_io_ticket *ticket;
} zt_param_window;

typedef struct unit_state {
    float **params, **grads; /* (n_params) full tensors handed to the unit */
    const void **params_lp;  /* (n_params) compute copies (precision.compute != fp32), else NULL */
    float *out;              /* (B, T, out_width) */
    float *saved;            /* (kept) the part of saved_floats(B, T, lp_kind) the unit keeps between its
                                forward and its backward (all of it without checkpointing);
                                NULL when kept is 0 */
    size_t kept, rest;       /* saved floats kept / rebuilt in e->recompute_shared (recompute.c) */
    double fwd_s, bwd_s;     /* cumulative wall time of forward / backward (recomputation
                                included in backward) */
    float **outs, **saveds;  /* pipeline parallelism: (opt.pp_slots) one output and kept saved
                                buffer per micro-batch in flight; out/saved point at the current
                                slot's (zt_engine_use_slot); entry 0 is the one without a pipeline */
} unit_state;


struct zt_engine {
    zt_model *model;
    zt_engine_options opt;
    int64_t *moe_counts;        /* a mixture of experts (zt_model.moe_experts > 0): per unit, the tokens
                                   each expert got and the slots dropped (moe_experts + 1 counters),
                                   summed since zt_engine_moe_stats last took them; NULL otherwise */
    bool skip_next;             /* zt_engine_skip_next_step: the next step skips its update */
    int rank, world;            /* in opt.comm (0, 1 without) */
    zt_comm *shard_comm;        /* the shard group (the world, or the hybrid group) */
    zt_comm *replica_comm;      /* hybrid: ranks holding the same pieces; NULL otherwise */
    struct zt_mesh *own_mesh;   /* the mesh built from opt.comm when the caller gave none (opt.mesh
                                   points at it then); rank, world and the comms above are read from
                                   opt.mesh, never computed here */
    bool shard_params, shard_grads, shard_optim; /* what the strategy shards */
    zt_plan plan;               /* shards over shard_comm (nshards 1 for ddp) */

    zt_param_store *ps;         /* where the parameters live (param_store.h): the master in its
                                   placement, zero3's gathered tensors, the compute copies */
    float *m, *v;               /* optimizer state: full layout (ddp) or shard layout; NULL
                                   when it lives in files (optim_store) */
    uint16_t *state_bf16[2];       /* bf16-low in memory: the state kinds as bf16 (e->m, e->v NULL) */
    float *state_tmp;           /* ... and ZT_STATE_CHUNK fp32 elements per kind to update them in */
    int state_kinds;            /* optimizer state arrays: 2 AdamW, Muon, LAMB (m, v), 1 SGD with momentum */
    /* Muon and LAMB (step_whole.c): muon[i], parameter i is one of Muon's matrices (its momentum
     * in m, its v unused); the gathered matrices of a round (muon_nslots of muon_slot_floats) and
     * the Newton-Schulz work; LAMB's partial sums of squares of p and of the update (2 x
     * plan.norm_chunks doubles, then under tp 2 x the chunks of the largest cut tensor) and under
     * tp the cut tensors' staging (2 x lamb_cut_floats: p or u by part, then logical) */
    bool *muon;
    float *muon_slots, *muon_work;
    size_t muon_slot_floats;
    int muon_nslots;
    double *lamb_partials;
    float *lamb_stage;
    size_t lamb_cut_floats;
    float *low_f32;          /* bf16-low: a slice's parameter, m and v widened (3 x low_slice_floats) */
    size_t low_slice_floats;
    /* 1-bit Adam (onebit.c) on 2 ranks or more: the worker's error feedback (state_floats) and the
     * server's (onebit_server_floats: this rank's block of the compressed all-reduce) */
    float *onebit_worker_error, *onebit_server_error;
    size_t onebit_server_floats;
    size_t state_floats;        /* elements per state array (full or shard layout) */
    zt_nvme_store *nvme;        /* the NVMe files of this rank (offload.c), or NULL: its kinds are
                                   the optimizer state kinds (when offloaded), then the parameter
                                   pieces (when offloaded) */
    zt_nvme_store *optim_store; /* = nvme when the optimizer state is offloaded, else NULL */
    char *offload_dir;          /* the engine's copy of opt.offload.optimizer_dir */
    char *param_dir;            /* ... and of opt.offload.param_dir */
    /* parameter offload (param_offload.c): piece_at[i] is parameter i's piece inside the window
     * of unit piece_unit[i] while one holds it (being read, or read and not yet gathered), else
     * NULL; unit_window[u] the window of unit u's pieces (which windows exist when: the store's
     * residency, src/memory/residency.c); piece_sum[i] the XXH3 of the piece as the last step
     * wrote it (0: written since by random access, not checked) */
    float **piece_at;
    int *piece_unit;
    zt_param_window *unit_window;
    uint64_t *piece_sum;
    size_t *piece_written;      /* (n_params) elements written in order from 0 and hashed into
                                   piece_hash[i] since the last write at 0; SIZE_MAX: out of order */
    void *piece_hash;           /* (2 n_params) XXH3 states per piece during the step: as written, as read */
    /* gradient offload (grad_offload.c; parameter and optimizer offload, one micro-batch per
     * step): grad_kind is the reduced gradient pieces' kind in nvme (-1: they are grad_pieces);
     * grad_at[i] parameter i's reduced piece inside its owning unit's gradient window
     * (grad_window[u]) from the unit's reduction until the window is written and released;
     * grad_writing the unit whose window is being written (-1: none); grad_sum[i] the XXH3 of the
     * piece as written, checked as the step streams it back (grad_hash: the states) */
    bool grad_offload;          /* decided at create: the store gets the grad kind */
    int grad_kind;
    float **grad_at;
    zt_param_window *grad_window;
    int grad_writing;
    uint64_t *grad_sum;
    void *grad_hash;
    float **pgrad;              /* (n_params) the current micro-batch's full gradient, or NULL */
    float **pslots;             /* (n_params) the experts stored E/ep a rank with one micro-batch a
                                   step, outside zero2/zero3: a unit's gradient source slots, held
                                   while its backward runs (grads.c zt_grads_slots_for) */
    /* Gradients assigned, not zeroed (grads.c): grad_assigned[i], parameter i's first writer in
     * backward assigns its gradient (zt_unit_ops.assigns_grad); grad_unset[i], this micro-batch's
     * gradient of i is not zeroed and not written yet. grads_assign false (ZT_GRAD_ASSIGN=0):
     * every gradient is zeroed before backward, as before. */
    bool grads_assign;
    bool *grad_assigned, *grad_unset;
    zt_sum_tree full_tree;        /* ddp/zero1/deferred: full-layout partial sums over micro-batches */
    zt_sum_tree piece_tree;       /* reduce-every-micro-batch: shard-layout partial sums */
    float *micro_grads;         /* full layout, the current micro-batch (ddp/zero1/deferred) */
    float *micro_pieces;        /* shard layout, the current micro-batch's reduced pieces */
    float *grad_pieces;         /* shard layout: the reduced gradient of this rank's pieces */
    bool grad_pieces_transient; /* bf16-low: grad_pieces is held only from the step's first
                                   reduction into it to the end of the update, not between steps
                                   (grads.c: adopted from the summation tree under reduce_now,
                                   allocated at the reduction otherwise) */
    int micro_in_step;          /* micro-batches since the last step */
    bool reduce_early;          /* ddp/zero1, one micro-batch per step, communication thread:
                                   each unit's final gradient is reduced while backward goes on */
    bool reduce_now;            /* zero2/zero3: reduce each unit's gradients as soon as its
                                   backward is done (GA = 1, or reduce_every_micro_batch) */
    bool grads_final;           /* the step's gradient is reduced (or, one process, folded) */
    bool norm_early;            /* one process, ddp, one micro-batch, fp32 gradients: each unit's
                                   own parameters' norm partials taken when its backward is done,
                                   their gradient final and partly still in cache (grads.c) */
    bool micro_direct;          /* reduce_now with one micro-batch per step: the reduce-scatters
                                   write grad_pieces itself (micro_pieces aliases it; no tree, no
                                   second shard-sized buffer, no copy) */
    float *pack;                /* staging for bucketed collectives */
    size_t pack_floats;
    double *norm_partials;      /* (plan.norm_chunks) */
    double *norm_gather;        /* (plan.norm_chunks) every shard's own partials, gathered (collect.c) */
    zt_memory_plan mem_plan;    /* computed at creation (src/memory/plan.c); the allocations follow it */
    size_t scratch_reserved[7]; /* reduce-scatter scratch reserved on shard_comm, the thread's comm,
                                   replica_comm, tp_comm, edp_comm, the thread's edp comm,
                                   edp_replica_comm (counted in mem.comm; growth beyond shows too) */
    /* tensor parallelism (tp_group.c): the cut units' collectives over the mesh's tp group */
    zt_unit_group group;        /* handed to every unit (zt_unit_args.group) when the model is cut */
    zt_comm *tp_comm;           /* the mesh's tp group; NULL when the model is whole */
    float *tp_work;             /* (tp_work_floats) the group's gathers land here (class comm) */
    size_t tp_work_floats;
    /* context parallelism (cp_group.c): the group's cp calls over the mesh's cp group */
    zt_comm *cp_comm;           /* NULL when every sequence is whole on this rank */
    zt_p2p cp_shift[2];         /* the ring shift in flight: its receive and its send */
    size_t cp_shift_bytes;
    struct cp_posted *cp_posted; /* (ZT_CP_MAX_POSTED) the posted exchanges' transfers, by slot */
    /* expert parallelism (ep_group.c): the mixture's all-to-alls over the mesh's ep group */
    zt_comm *ep_comm;           /* NULL when every expert runs here */
    /* the experts stored E/ep a rank (zt_model_store_experts): their gradients reduced and pieces
     * sharded over the expert-data-parallel ranks (the plan's ZT_SHARD_GROUP_EDP; collect.c splits
     * every bucketed collective by group), their norm chunks completed over the ep group */
    bool edp_groups;
    zt_comm *edp_comm;          /* the mesh's edp group (hybrid: its edp_shard group, the experts'
                                   shard group); NULL when it is one rank */
    zt_comm *edp_replica_comm;  /* hybrid: the mesh's edp_replicate group (the ranks holding the same
                                   expert pieces); NULL otherwise or when it is one rank */
    double *ep_norm;            /* (ep_norm_floats) the logical chunk partials and a part's gathered
                                   expert chunks (ep_group.c zt_engine_ep_norm; class comm) */
    size_t ep_norm_floats;
    int inflight[ZT_UNIT_MAX_PARAMS]; /* reduce_now with the communication thread: the parameters */
    int n_inflight;             /* whose reduction was queued last (their full gradients live until */
    uint64_t inflight_seq;      /* the next unit's is queued: grads.c) and its job */

    unit_state *units;
    /* pipeline parallelism (pipeline.c): the stage's transfer buffers (class activations) and the
     * schedule; all NULL / 0 without a pipeline */
    int pp_slots;               /* opt.pp_slots, at least 1 */
    int pp_micro;               /* >= 0: the micro-batch of this step the units run now (the dropout
                                   key's index); -1: micro_in_step */
    float **pp_in;              /* (pp_slots) received activations, when opt.pp_in_width > 0 */
    float *pp_din[2];           /* input gradients being sent back (opt.pp_in_width > 0) */
    float *pp_dout[2];          /* output gradients received (opt.pp_send_out) */
    struct zt_pipeline *pp;     /* the pipeline this engine is a stage of (pipeline.c), or NULL */
    double comm_s;              /* wall time in the engine's collectives (bucket packing included)
                                   since creation or zt_engine_reset_times */
    float *scratch;
    float *recompute_shared;    /* activation checkpointing: (max rest) the recomputed part of the
                                   saved buffers, shared by all units; NULL without */
    int recompute_owner;        /* the unit whose rest recompute_shared holds as its forward wrote
                                   it, or -1 (then the next backward that needs it recomputes) */
    float *dact[2];             /* activation-gradient ping-pong */
    /* precision (engine_precision.c) */
    int lp_kind;                /* zt_lp_kind of the compute copies; 0: fp32 compute. Set first at
                                   creation: it sizes the units' saved buffers (recompute.c) */
    void *staging;              /* the units' low-precision operand staging */
    zt_loss_scaler scaler;      /* fp16 */
    float *dloss;               /* (B, T) */
    uint64_t step;
    zt_memory_report mem;
    pthread_mutex_t mem_lock;   /* alloc/release may run on the communication thread too */
    /* freed blocks kept for the next allocation of the same size (engine.c, block cache) */
    struct { void *p; size_t bytes; } cache[ZT_BLOCK_CACHE_SLOTS];
    int n_cached;
    size_t cached_bytes;
    bool use_cache;             /* ZT_BLOCK_CACHE=0 turns the cache off */
    zt_overlap *overlap;        /* the communication thread, or NULL */
    char oom[192];              /* the last allocation that failed: "what (class C, N bytes)" */
};

/* engine.c */
/* Runs every unit forward on b; the first unit reads in0 (NULL: the tokens; a later pipeline
 * stage: the received activation). *loss (may be NULL) = the mean of the last unit's per-token
 * output, or 0 when the stage sends its output on (opt.pp_send_out). */
int zt_engine_run_forward(zt_engine *e, const zt_batch *b, bool training, const float *in0, float *loss,
                          zt_error *err);
/* Runs every unit backward after zt_engine_run_forward (or in the slot it used): the last unit's
 * output gradient is dout_last (NULL: b->dloss per token, times the loss scale), the first unit
 * reads in0 and writes its input gradient to din0 (both NULL on the first stage). Gradients
 * accumulate into the micro-batch begun by zt_grads_begin_micro. */
int zt_engine_run_backward(zt_engine *e, const zt_batch *b, const float *dout_last, const float *in0, float *din0,
                           zt_error *err);
/* Points every unit's out and saved at micro-batch slot k (< pp_slots); the shared checkpointing
 * buffer then holds nobody's rest. */
void zt_engine_use_slot(zt_engine *e, int k);
/* The micro-batch's shape fits the plan and its tokens the vocabulary (ZT_ERR_USAGE, ZT_ERR_DATA). */
int zt_engine_check_batch(const zt_engine *e, const zt_batch *b, zt_error *err);
/* The dropout key of the training micro-batch pp_micro (>= 0) or micro_in_step of this step. */
uint64_t zt_engine_dropout_key(const zt_engine *e);
/* Reserves bytes of reduce-scatter scratch on comm c (slot 0 shard_comm, 1 the communication
 * thread's, 2 replica_comm) and counts them in mem.comm. */
int zt_engine_reserve_scratch(zt_engine *e, zt_comm *c, size_t bytes, int slot, zt_error *err);
/* Counts bytes allocated (add) or freed elsewhere in a class of e->mem (counter: &e->mem.<class>),
 * keeping the class's and the total's high-water: for memory the engine does not get from
 * zt_engine_alloc (an offload store's staging, say). */
void zt_engine_account(zt_engine *e, size_t *counter, size_t bytes, bool add);
/* floats (64-byte aligned) counted in the class `counter` points at (&e->mem.<class>; NULL: none);
 * `what` names the buffer. NULL when memory is out (or ZT_FAULT oom says so), with e->oom saying
 * what failed: zt_engine_oom turns it into the error. */
void *zt_engine_alloc(zt_engine *e, size_t floats, size_t *counter, const char *what);
/* As zt_engine_alloc, for a buffer expert parallelism's all-to-all sends from (the units' scratch,
 * the staging, a spread unit's saved activations): where the ep comm's all-to-all maps its senders'
 * buffers, one the ep peers can map (comm's zt_shared_alloc: a block is then copied out of it with
 * loads, not process_vm_readv); the same bytes counted. Free it with zt_shared_free (either kind). */
void *zt_engine_alloc_exchange(zt_engine *e, size_t floats, size_t *counter, const char *what);
/* Unit u's saved activations (class activations): exchange memory where its experts are spread over
 * ep parts (the all-to-all sends from them), else zt_engine_alloc's */
void *zt_engine_alloc_saved(zt_engine *e, const zt_unit *u, size_t floats, const char *what);
/* ZT_ERR_NOMEM (exit 7): "<context>: out of memory for <what> (memory-plan class C, N bytes) on
 * rank R", the buffer from the last failed zt_engine_alloc (else a host allocation). */
int zt_engine_oom(zt_engine *e, zt_error *err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void zt_engine_release(zt_engine *e, float **p, size_t floats, size_t *counter);

/* The job: every rank of the mesh (data-parallel and tensor-parallel), for what the whole job
 * agrees on or names per process (offload files, their status); NULL / 0 / 1 on one process. */
zt_comm *zt_engine_job_comm(const zt_engine *e);
int zt_engine_job_rank(const zt_engine *e);
int zt_engine_job_size(const zt_engine *e);

/* pipeline.c: the stage's part of the step */
/* After the gradient is final: a parameter held by two stages (GPT-2's tied wte) gets the sum of
 * both stages' gradients, first stage's + last's, the same bits on both. */
int zt_pipeline_tied_grads(zt_engine *e, zt_error *err);
/* Zeroes the chunks of this stage's copies of a tied parameter in partials (plan order): the
 * owner's count for both. */
void zt_pipeline_norm_untie(zt_engine *e, double *partials);
/* *sumsq = the squared gradient norm of the whole model from this stage's n complete chunk partials
 * (plan order, untied; with the experts stored E/ep a rank the logical order zt_engine_ep_norm
 * gives): every stage's partials in stage order, summed in order: the one-process sum's bits;
 * under tensor parallelism in zt_engine_tp_norm's order over the whole model (the cut parameters'
 * chunks per part, summed in part order, then the whole ones), the tp-only run's bits. A
 * collective over the pipeline group (and the tp group). */
int zt_pipeline_norm(zt_engine *e, const double *partials, size_t n, double *sumsq, zt_error *err);

/* tp_group.c: tensor parallelism */
/* At create, after the plan: checks the model is cut as the mesh says (ZT_ERR_USAGE), and when it
 * is cut, the group, its staging (class comm) and the tp comm's scratch. */
int zt_engine_tp_setup(zt_engine *e, zt_error *err);
/* cp_group.c: context parallelism. At create, after zt_engine_tp_setup: checks the model runs on
 * the mesh's cp parts (ZT_ERR_USAGE) and, when it does, adds the cp calls to the group. */
int zt_engine_cp_setup(zt_engine *e, zt_error *err);
/* ep_group.c: expert parallelism. At create, after zt_engine_cp_setup: checks the model spreads its
 * experts over the mesh's ep parts (ZT_ERR_USAGE) and, when it does, adds the ep call to the group. */
int zt_engine_ep_setup(zt_engine *e, zt_error *err);
/* engine.c: the experts stored E/ep a rank (zt_model_store_experts) run where
 * zt_memory_experts_whole_reason finds no reason against: ZT_ERR_USAGE naming what is not built. */
int zt_engine_experts_local_check(const zt_model *m, const zt_engine_options *o, zt_error *err);
/* The experts stored E/ep a rank (e->edp_groups): *logical (*n chunks, in e->ep_norm) = the chunk
 * partials of the logical model (of this pipeline stage) from this part's complete ones (plan
 * order: its experts' chunks, each summed over the edp group already): every part's expert chunks
 * gathered over the ep group and placed where one process numbers them; summed in order they give
 * one process's bits. A collective over the ep group. */
int zt_engine_ep_norm(zt_engine *e, const double *partials, const double **logical, size_t *n, zt_error *err);
/* The group the units get, or NULL (whole model, whole sequences, every expert here). */
const zt_unit_group *zt_engine_group(const zt_engine *e);
/* *sumsq = the squared gradient norm of the logical model from this part's complete chunk
 * partials (plan order; with the experts stored E/ep a rank the logical order zt_engine_ep_norm
 * gives): the cut parameters' sums of every part, in part order, plus the whole parameters' once.
 * A collective over the tp group. */
int zt_engine_tp_norm(zt_engine *e, const double *partials, double *sumsq, zt_error *err);
/* logical (logical_numel floats) <- parameter i's local tensors of every part (local: this part's,
 * numel floats); collectives over the tp group and (the experts stored E/ep a rank) the ep group
 * when i is cut, a copy otherwise. */
int zt_engine_tp_to_logical(zt_engine *e, int i, const float *local, float *logical, zt_error *err);
/* Where parameter i's part sits among the parts concatenated in part order (floats before it; 0
 * when i is whole). */
size_t zt_engine_tp_part_offset(const zt_engine *e, int i);
/* logical (logical_numel floats) <- the parts of cut parameter i: stage (logical_numel floats)
 * holds this part's elements at zt_engine_tp_part_offset and receives every part's there (an
 * all-gather over the tp group, in place), then each is placed (zt_tp_place); the experts stored
 * E/ep a rank then gather the ep parts' rows of logical over the ep group. No allocation: the
 * optimizer step's gathers (step_whole.c) use it on their planned buffers. */
int zt_engine_tp_gather_logical(zt_engine *e, int i, float *stage, float *logical, const char *what, zt_error *err);

/* engine_precision.c: the policy, the operand staging, loss scaling, the rounding of the stepped state */
/* At create, after the units: the policy checked, the loss scaler, the operand staging. */
int zt_engine_precision_setup(zt_engine *e, zt_error *err);
void zt_engine_precision_free(zt_engine *e);
float zt_engine_loss_scale(const zt_engine *e);                /* dloss multiplier */
/* unit u's expert counters (zt_engine.moe_counts), NULL without experts */
int64_t *zt_engine_moe_counts(zt_engine *e, int u);
/* Before the norm: round the reduced gradient to the policy's gradient dtype (fp16, bf16). */
void zt_engine_round_grads(zt_engine *e);
/* After the update of parameter i's slice [w, w+n) starting at element `begin` of the tensor. */
void zt_engine_round_updated(zt_engine *e, int i, float *w, float *m, float *v, size_t n,
                             int64_t begin);
/* param_offload.c: zero3's parameter pieces in NVMe files (zt_store_file_kind(e) >= 0). */
int zt_param_offload_setup(zt_engine *e, zt_error *err);      /* at create, after the store opens */
void zt_param_offload_free(zt_engine *e);
/* Unit u's window (floats elements, class params) for the pieces of params[0..n), their reads
 * queued against its ticket; piece_at[] points into it. The gather (collect.c) waits for the reads. */
int zt_param_offload_window(zt_engine *e, int u, const int *params, int n, size_t floats, zt_error *err);
/* Frees unit u's window, if any (a read still queued is waited for first). */
void zt_param_offload_window_release(zt_engine *e, int u);
/* At create, on every rank of the job (a collective when param_max_live is set): ZT_ERR_USAGE on
 * every rank when the largest window of any rank (any pipeline stage) exceeds the bound. */
int zt_param_offload_check_bound(zt_engine *e, zt_error *err);
/* Waits for params[0..n)'s pieces (read into their windows) and checks each against its
 * checksum; any thread, no stream running. ZT_ERR_IO names the file and the parameter. */
int zt_param_offload_load(zt_engine *e, const int *params, int n, zt_error *err);
/* Element access to parameter i's piece [begin, begin + n) in the file (checkpoints, init,
 * gathers of one tensor); writing marks its checksum unknown until the piece's writes, in order
 * from element 0, reach its end (then they have hashed it) or a seal reads it back. */
int zt_param_offload_read(zt_engine *e, int i, size_t begin, size_t n, float *dst, zt_error *err);
int zt_param_offload_write(zt_engine *e, int i, size_t begin, size_t n, const float *src, zt_error *err);
/* The step's stream: before it, after updating [w, w + n) of parameter i's piece (in order), and
 * after it (the checksums of what was written back). */
void zt_param_offload_hash_begin(zt_engine *e);
void zt_param_offload_hash_add(zt_engine *e, int i, const float *w, size_t n);
void zt_param_offload_hash_end(zt_engine *e);
/* ... and, before each range is updated, what the step read (check_add); after the stream, check:
 * ZT_ERR_IO naming the file and the parameter when a piece the last step (or a seal) summed is not
 * what the stream read. */
void zt_param_offload_check_add(zt_engine *e, int i, const float *w, size_t n);
int zt_param_offload_check(zt_engine *e, zt_error *err);
/* After random-access writes of parameter i's piece (init, a load, a set): its checksum, so the
 * next gather checks it: the writes' own when they came in order from element 0 (write hashes
 * them as they go), else read back from the file through the idle staging memory. */
int zt_param_offload_seal(zt_engine *e, int i, zt_error *err);

/* grad_offload.c: the reduced gradient pieces in the store's "grad" kind (e->grad_kind >= 0). */
int zt_grad_offload_setup(zt_engine *e, zt_error *err);       /* at create, after the store opens */
void zt_grad_offload_free(zt_engine *e);
/* Before unit u's reduction: the window (class grads) its own parameters' pieces own[0..n) are
 * reduced into (grad_at[]); the write still in flight is finished first. */
int zt_grad_offload_window(zt_engine *e, int u, const int *own, int n, zt_error *err);
/* After unit u's reduction: the pieces all-reduced across replicas (hybrid), rounded to the
 * gradient dtype, their norm partials and checksums taken, and their write to the file queued. */
int zt_grad_offload_finish(zt_engine *e, int u, zt_error *err);
/* Waits for the write in flight and releases its window (end of a micro-batch). */
int zt_grad_offload_flush(zt_engine *e, zt_error *err);
/* Drops every window (waiting for their I/O): an abandoned step. */
void zt_grad_offload_drop(zt_engine *e);
/* The step's stream: before it, for each consumed range of parameter i's piece (in order), and
 * after it: ZT_ERR_IO naming the file and the parameter when a piece is not what was written. */
void zt_grad_offload_hash_begin(zt_engine *e);
void zt_grad_offload_hash_add(zt_engine *e, int i, const float *g, size_t n);
int zt_grad_offload_hash_check(zt_engine *e, zt_error *err);

/* recompute.c: activation checkpointing (zt_engine_options.activation_checkpointing). */
/* Decides what each unit keeps and rebuilds (units[u].kept/rest) and allocates the kept saved
 * buffers and the shared one (class activations). ZT_ERR_USAGE when a unit's kept_floats
 * exceeds its saved_floats; ZT_ERR_NOMEM. */
int zt_recompute_layout(zt_engine *e, zt_error *err);
/* Points a->saved / a->saved_rest at unit u's saved buffer for forward, recompute or backward. */
void zt_recompute_args(const zt_engine *e, int u, zt_unit_args *a);
/* After unit u's forward: the shared buffer now holds u's rest (when it has one). */
void zt_recompute_forward_done(zt_engine *e, int u);
/* Before unit u's backward: rebuilds its saved buffer unless it is still there. a holds the
 * backward's arguments (params gathered, in, scratch); throwaway is a (B, T, out_width) buffer
 * whose contents do not matter (full recomputation writes the unit's output there). */
int zt_recompute_before_backward(zt_engine *e, int u, const zt_unit_args *a, float *throwaway, zt_error *err);
/* After unit u's backward (which may overwrite its saved buffer): nothing is held any more. */
void zt_recompute_backward_done(zt_engine *e, int u);

/* grads.c: per micro-batch gradient storage and the fixed tree over micro-batches. */
int zt_grads_begin_micro(zt_engine *e, zt_error *err);
float *zt_grads_for(zt_engine *e, int param, zt_error *err);  /* full grad of param (zeroed on first use) */
/* *out = the source slots of param's gradient (the experts stored E/ep a rank:
 * zt_unit_args.grad_slots), or NULL; after zt_grads_for */
int zt_grads_slots_for(zt_engine *e, int param, float **out, zt_error *err);
int zt_grads_unit_done(zt_engine *e, int unit, zt_error *err); /* after unit's backward */
void zt_grads_assign_setup(zt_engine *e);           /* at create: grad_assigned, grads_assign */
uint32_t zt_grads_unset_of(zt_engine *e, int unit);  /* zt_unit_args.grads_unset for unit's backward */
void zt_grads_unit_written(zt_engine *e, int unit, uint32_t unset); /* zeroes what it left unset */
/* param i's gradient-norm chunk partials (its full gradient, or this rank's reduced piece under a
 * sharded optimizer) into e->norm_partials: the step's pass and the early norm's, one computation */
void zt_grads_norm_partials(zt_engine *e, int param);
/* The chunk partials of shard s's piece of parameter i (piece: its floats) added into the norm's
 * partials array at their global chunks, each norm block's run summed apart (shard/plan.h). */
void zt_grads_piece_partials(const zt_plan *pl, int i, int s, const float *piece, double *partials);
int zt_grads_end_micro(zt_engine *e, zt_error *err);
int zt_grads_finish(zt_engine *e, zt_error *err);               /* fold trees, reduce what is deferred */
void zt_grads_reset(zt_engine *e);

/* collect.c: the engine's collectives over its plan (bucketed, packed rank-major, bytes counted) */
/* zero3: all-gather the listed parameters' pieces into the store's gathered slots (allocated by the caller). */
int zt_engine_gather_params(zt_engine *e, const int *params, int n, const char *tag, zt_error *err);
int zt_engine_gather_params_on(zt_engine *e, zt_comm *comm, float **pack, size_t *pack_cap, double *timer,
                               const int *params, int n, const char *tag, zt_error *err);
/* Full tensor of parameter i into dst (any strategy). */
int zt_engine_gather_param(zt_engine *e, int i, float *dst, zt_error *err);
/* Reduce-scatter the listed parameters' full gradients src[k] (full tensors) into this rank's
 * pieces of dst (shard layout; NULL: each piece at e->grad_at[i]), over the shard group, in
 * buckets of opt.bucket_bytes. */
int zt_engine_reduce_scatter(zt_engine *e, const int *params, int n, float *const *src, float *dst,
                             const char *tag, zt_error *err);
/* The same on another comm with the caller's own staging buffer (the communication thread). */
int zt_engine_reduce_scatter_on(zt_engine *e, zt_comm *comm, float **pack, size_t *pack_cap, double *timer,
                                const int *params, int n, float *const *src, float *dst, const char *tag,
                                zt_error *err);

/* overlap.c: the background communication thread (DeepSpeed's overlap_comm). While backward goes
 * on, it reduce-scatters each finished unit's gradients on its own duplicate of the shard comm,
 * in submission order (the same order on every rank), and frees them. */
/* Starts the thread when it can help: more than one shard, MPI_THREAD_MULTIPLE, and not switched
 * off (ZT_OVERLAP_COMM=0). Leaves e->overlap NULL otherwise (then reductions run inline). */
int zt_overlap_start(zt_engine *e, zt_error *err);
/* Whether zt_overlap_start will start the thread (the memory plan needs to know first). */
bool zt_overlap_wanted(const zt_engine *e);
/* Queues the reduce-scatter of these parameters' gradients (e->pgrad) into e->micro_pieces; *seq
 * identifies the job. The caller frees the gradients after zt_overlap_wait(seq) (grads.c does it
 * one unit later, so that the memory in flight is the same whatever the thread's timing). */
int zt_overlap_submit(zt_engine *e, const int *params, int n, const char *tag, uint64_t *seq, zt_error *err);
/* zero3 prefetch: queues the all-gather of these parameters' pieces into the store's gathered slots (already
 * allocated); *seq identifies the job for zt_overlap_wait. */
int zt_overlap_submit_gather(zt_engine *e, const int *params, int n, const char *tag, uint64_t *seq,
                             zt_error *err);
/* Waits until job seq (and every job before it) is done; the first error the thread met. */
int zt_overlap_wait(zt_engine *e, uint64_t seq, zt_error *err);
/* Waits until the queue is empty; returns the first error the thread met (ZT_ERR_PEER, ...). */
int zt_overlap_drain(zt_engine *e, zt_error *err);
void zt_overlap_stop(zt_engine *e);
/* The thread's comm (for the byte counters), or NULL. */
zt_comm *zt_overlap_comm(const zt_engine *e);
/* ... and its duplicate of the edp comm (the experts stored E/ep a rank), or NULL */
zt_comm *zt_overlap_edp_comm(const zt_engine *e);
/* The listed parameters' full gradients in G (full layout), all-reduced in place on comm with the
 * caller's staging (ddp's early reduction on the communication thread). */
int zt_engine_all_reduce_full_on(zt_engine *e, zt_comm *comm, float **pack, size_t *pack_cap, double *timer,
                                 const int *params, int n, float *G, const char *tag, zt_error *err);
/* ddp/zero1 with one micro-batch per step: queue the reduction of these parameters' final
 * gradients in e->micro_grads (all-reduce in place, or reduce-scatter into e->grad_pieces). */
int zt_overlap_submit_full(zt_engine *e, const int *params, int n, const char *tag, zt_error *err);
/* All-reduce every parameter's full gradient in G (full layout) over the world (ddp). */
int zt_engine_all_reduce_full(zt_engine *e, float *G, zt_error *err);
/* hybrid: all-reduce this rank's pieces (shard layout) across the replica groups. */
int zt_engine_all_reduce_pieces(zt_engine *e, float *pieces, zt_error *err);
/* The same for params[0..n) only, each piece at e->grad_at[i] (gradient offload). */
int zt_engine_all_reduce_pieces_at(zt_engine *e, const int *params, int n, const char *tag, zt_error *err);
/* zero1/zero2: all-gather the updated pieces of full_params. */
int zt_engine_all_gather_full(zt_engine *e, zt_error *err);
/* All-gather the listed parameters from the store's fp32 pieces into dst[i] (full tensors of
 * elem-byte elements): each rank packs its own rows rounded to lp kind round_kind (0: as fp32). */
int zt_engine_all_gather_rounded(zt_engine *e, const int *params, int n, void *const *dst, size_t elem,
                                 int round_kind, const char *tag, zt_error *err);
/* x (n = plan.norm_chunks norm partials, this rank's chunks filled in) gets every other shard's
 * chunks: each chunk belongs to the one shard holding its rows, so this is exact (collect.c). */
int zt_engine_sum_exclusive(zt_engine *e, double *x, int64_t n, zt_error *err);
/* step_whole.c: Muon and LAMB. The setups split the parameters (Muon) and allocate the buffers memory/plan.c counts; the step runs
 * the optimizer on what this rank holds, with the collectives the whole tensors need. */
int zt_step_muon_setup(zt_engine *e, zt_error *err);
int zt_step_lamb_setup(zt_engine *e, zt_error *err);
int zt_step_whole(zt_engine *e, float lr, float gscale, zt_error *err);
/* step.c: the optimizer's walk over elements [lo, lo + n) of the state layout, fn on each
 * trainable parameter's overlap (w its local fp32 elements, a staging buffer's or a widened
 * bf16-low chunk; g, m, v at the same elements; first: the element's index in the full tensor;
 * at: in this rank's slice of the parameter), keeping the checksums `hashes` names; and a stream
 * chunk's kinds (m, v: state or memory; w, g: the pieces' and gradients' kinds or NULL). */
typedef void (*zt_step_elems_fn)(void *ctx, int i, float *w, const float *g, float *m, float *v, size_t n,
                                 int64_t first, size_t at);
enum { ZT_STEP_HASH_GRAD = 1, ZT_STEP_CHECK_PARAM = 2, ZT_STEP_HASH_PARAM = 4 };
void zt_step_range(zt_engine *e, size_t lo, size_t n, float *m, float *v, float *wchunk, const float *gchunk,
                   unsigned hashes, zt_step_elems_fn fn, void *ctx);
void zt_step_chunk_kinds(zt_engine *e, size_t begin, float *const *state, float **m, float **v, float **w,
                         const float **g);
/* step_streamed.c: Muon and LAMB with offload (the state or the pieces in files): two streams, the
 * whole-tensor work between them (zt_step_muon_rounds, below). */
int zt_step_streamed(zt_engine *e, float lr, float gscale, zt_error *err);
/* step_whole.c: Muon's rounds of gathered matrices. streamed: each piece's U is read from state
 * kind 1 (where pass 1 left it) and its rows of the update written back there, instead of the
 * momentum computed and the update applied in memory; *io_rc gets the first failed read or
 * write's status (the collectives go on, so that every rank reaches the agreement after). */
int zt_step_muon_rounds(zt_engine *e, float lr, float gscale, bool streamed, int *io_rc, zt_error *io_err,
                        zt_error *err);
/* step_whole.c: LAMB's trust ratio of a tensor tensor parallelism cuts, for the streamed step
 * between its passes (its p, m, v read back; the logical tensor's norms as in memory). */
int zt_step_lamb_cut_streamed(zt_engine *e, int i, float *coeff, int *io_rc, zt_error *io_err, zt_error *err);
/* step_whole.c: LAMB's norm-chunk partials (e->lamb_partials: p's, then u's) summed over the shard
 * group, and a tensor's trust ratio from them (one tensor parallelism does not cut); the in-memory
 * and the streamed step both */
int zt_step_lamb_sum_partials(zt_engine *e, zt_error *err);
float zt_step_lamb_ratio(const zt_engine *e, int i);
/* onebit.c: 1-bit Adam. The setup allocates the error buffers (memory/plan.c counts them); frozen
 * says whether the step being computed is past the warm-up (its gradient then stays on this rank
 * under ddp, in the shard group under hybrid: grads.c does not reduce it further); the step after
 * the freeze: the local momentum, its compressed all-reduce, the update with the frozen variance.
 * The comm the momentum is averaged over: ddp's world, hybrid's replica group (NULL: one rank or
 * one replica, nothing compressed); replicas its size (1 without). */
int zt_onebit_setup(zt_engine *e, zt_error *err);
bool zt_onebit_frozen(const zt_engine *e);
zt_comm *zt_onebit_comm(const zt_engine *e);
int zt_onebit_replicas(const zt_engine *e);
int zt_onebit_step(zt_engine *e, float lr, float gscale, zt_error *err);

/* offload.c: the optimizer state in memory or in files, seen the same way. Kind 0 is exp_avg
 * (AdamW) or the momentum (SGD), kind 1 exp_avg_sq; elements index the state layout. */
int zt_engine_offload_open(zt_engine *e, zt_error *err);  /* collective when offloading */
void zt_engine_offload_close(zt_engine *e);
int zt_engine_state_zero(zt_engine *e, zt_error *err);
/* (the state's element access: engine_state.h) */
/* After an offloaded update: every rank learns whether all ranks' I/O succeeded (rc is this
 * rank's outcome); a failure elsewhere names the rank. Returns the outcome to report here. */
int zt_engine_offload_agree(zt_engine *e, int rc, zt_error *err);

#endif
