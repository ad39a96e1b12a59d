/* zerotrain.h - the public API of libzerotrain: status codes and errors, the model/unit API that
 * models are written on, and the engine that owns every byte of parameter, gradient, optimizer and
 * activation memory.
 *
 * A tour in five lines:
 *   zt_gpt2_config cfg; zt_gpt2_preset("tiny", &cfg, &err);
 *   zt_model *m; zt_gpt2_create(&cfg, &m, &err);          // the model declares units and parameters
 *   zt_engine *e; zt_engine_create(m, &opts, &e, &err);    // the engine lays out and owns the memory
 *   zt_engine_forward_backward(e, &batch, &loss, &err);    // unit by unit, gradients accumulate (+=)
 *   zt_engine_step(e, lr, &report, &err);                  // clip, AdamW/SGD, zero the gradients
 * A Llama is built the same way (zt_llama_preset("llama-tiny", ...), zt_llama_create), or either
 * family from a preset name or a config through zt_model_spec (zt_model_preset, _spec_create).
 *
 * Conventions: every fallible function returns ZT_OK (0) or a zt_status and fills a zt_error whose
 * message names what is wrong and where (file, key, tensor). Objects come back through out-
 * parameters and are released with the matching _free. Nothing here calls exit() or abort().
 * Shapes are written (B, T, C): B batch, T sequence length, C channels, V vocabulary, L layers,
 * NH heads, OC output channels. Tensors are row-major float32 unless a comment says otherwise.
 */
#ifndef ZEROTRAIN_H
#define ZEROTRAIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ZT_VERSION "0.1.0"

/* ---------------------------------------------------------------------------------------------
 * Status codes. The values are the CLI's exit codes (docs/design.md), so main() returns them as is. */
typedef enum zt_status {
    ZT_OK = 0,
    ZT_ERR_USAGE = 2,     /* bad configuration, option or argument */
    ZT_ERR_DATA = 3,      /* token file or tokenizer data unusable */
    ZT_ERR_CKPT = 4,      /* checkpoint missing, corrupt or incompatible */
    ZT_ERR_PEER = 5,      /* peer lost or collective timeout */
    ZT_ERR_NUMERICS = 6,  /* non-finite loss or gradients */
    ZT_ERR_NOMEM = 7,     /* out of memory */
    ZT_ERR_IO = 8,        /* read/write failure */
    ZT_ERR_MISMATCH = 9,  /* ranks disagree */
    ZT_ERR_INTERNAL = 70  /* a bug in zerotrain: please report */
} zt_status;

typedef struct zt_error {
    int code;       /* a zt_status */
    char msg[1024]; /* what is wrong and where, one line, no trailing newline */
} zt_error;

/* Fills err (when not NULL) with code and a printf-style message; returns code. */
int zt_error_set(zt_error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Prefixes err->msg with a printf-style context ("loading x.bin: ..."); returns err->code. */
int zt_error_prefix(zt_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* "ok", "usage", "data", ... for a status code. Never NULL. */
const char *zt_status_name(int code);

/* ---------------------------------------------------------------------------------------------
 * The model/unit API.
 *
 * A model is a table of named parameters and a sequence of units in execution order (for GPT-2:
 * the embedding, each transformer block, the final norm + LM head). A unit lists the parameters it
 * reads by index; a parameter belongs to the first unit that lists it, and a later unit may list it
 * again (weight tying: GPT-2's head reads wte). The model never allocates parameter, gradient or
 * optimizer memory and never sees a rank: the engine hands a unit's forward and backward plain
 * pointers to full (gathered) tensors. That is the seam the sharded engine uses to shard each
 * parameter along dim 0 and gather a unit just before it runs. */

#define ZT_MAX_DIMS 4
#define ZT_UNIT_MAX_PARAMS 32
#define ZT_NAME_MAX 96

typedef enum zt_init_kind {
    ZT_INIT_ZEROS = 0,
    ZT_INIT_ONES = 1,
    ZT_INIT_NORMAL = 2, /* N(0, std^2), counter-based: element i's value depends only on (seed, name, i) */
    ZT_INIT_UNIFORM = 3 /* U(-std, std) (init_std is the bound), counter-based like ZT_INIT_NORMAL */
} zt_init_kind;

typedef struct zt_param_desc {
    char name[ZT_NAME_MAX]; /* Hugging Face style: "h.3.attn.c_attn.weight" */
    int ndim;
    int64_t shape[ZT_MAX_DIMS]; /* what this process computes with: the logical tensor, or under
                                   tensor parallelism its part (below) */
    int64_t numel;
    zt_init_kind init;
    float init_std;   /* for ZT_INIT_NORMAL; the bound for ZT_INIT_UNIFORM */
    bool decay;       /* AdamW weight decay applies (2-D matrices; see docs/optimizer.md) */
    bool trainable;
    /* Tensor parallelism (zt_tp_apply, src/shard/tp.h; docs/parallelism.md): the logical (whole)
     * tensor, which checkpoints, weights files and zt_engine_param_gather/_set deal in, and where
     * shape sits in it: dimension tp_dim is tp_blocks equal blocks (GPT-2's fused QKV: 3), each
     * cut into tp_parts near-equal ranges, and this process holds range tp_part of every block.
     * tp_parts 1 (zt_model_add_param's default): not cut by tp. */
    int64_t logical_shape[ZT_MAX_DIMS];
    int64_t logical_numel;
    int tp_parts, tp_part, tp_dim, tp_blocks;
    /* The experts stored E/ep a rank (zt_model_store_experts; docs/parallelism.md): a mixture's
     * stacked experts' tensor cut over the expert-parallel group, outside the tp cut. Dim 0 of the
     * logical tensor is ep_parts equal ranges of whole experts and this process holds range
     * ep_part: all of it, or under tensor parallelism its tp part, cut by the tp_* fields as that
     * range's own tensor would be (zt_tp_ep_view, src/shard/tp.h; tp_blocks counts the whole
     * tensor's blocks). 0 or 1: not cut by ep. Neither cut: logical_shape = shape. */
    int ep_parts, ep_part;
    char lora;        /* 'A' or 'B': a LoRA adapter matrix of parameter lora_base (zt_model_add_lora);
                         0: any other parameter */
    int lora_base;    /* the weight an adapter adapts; -1 for every other parameter */
    uint8_t quant;    /* a zt_quant: a frozen Linear weight the parameter store keeps quantized
                         (QLoRA's base, zt_lora_config.base_quant); ZT_QUANT_NONE: as its placement */
    /* The ranks the parameter's gradient is reduced over and its pieces are sharded over (a
     * zt_shard_group; src/shard/plan.h, docs/parallelism.md): ZT_SHARD_GROUP_DP (0, the default)
     * the data-parallel ranks; ZT_SHARD_GROUP_EDP the expert-data-parallel ones. */
    uint8_t shard_group;
    /* dim 0 is norm_blocks equal blocks (a mixture's experts stacked: E) and the gradient norm's
     * fixed chunks restart at each block, so a block's partial sums do not depend on the blocks
     * beside it or on which rank holds it (src/shard/plan.h); 0 or 1: the whole parameter */
    int norm_blocks;
} zt_param_desc;

/* p is a stacked experts' tensor stored E/ep a rank (zt_model_store_experts): cut over the ep parts */
static inline bool zt_param_experts_stored(const zt_param_desc *p) { return p->ep_parts > 1; }
/* The ep parts such a tensor is stored over (its logical experts are this many times its own); 1
 * for every other parameter */
static inline int zt_param_expert_parts(const zt_param_desc *p) { return p->ep_parts > 1 ? p->ep_parts : 1; }
/* p holds a part of its logical tensor (cut by tensor parallelism, or its experts stored E/ep a rank) */
static inline bool zt_param_cut(const zt_param_desc *p) { return p->tp_parts > 1 || p->ep_parts > 1; }

/* zt_param_desc.shard_group: the group a parameter's gradient is reduced and its pieces sharded over */
typedef enum zt_shard_group {
    ZT_SHARD_GROUP_DP = 0,  /* the data-parallel ranks (dp x cp), every dense parameter */
    ZT_SHARD_GROUP_EDP = 1, /* the expert-data-parallel ranks: those holding the same experts */
    ZT_SHARD_GROUP_COUNT = 2
} zt_shard_group;

/* One micro-batch as a unit sees it. */
typedef struct zt_batch {
    int B, T;
    const int32_t *inputs;  /* (B, T) token ids */
    const int32_t *targets; /* (B, T) next-token ids, or NULL in generation; a negative id is not
                               counted (PyTorch's ignore_index): no loss, no gradient */
    const int32_t *positions; /* (B, T) each token's position in its document, or NULL: 0..T-1.
                                 Packed sequences: positions restart at 0 where a document starts,
                                 and attention does not cross documents (token t sees t - positions[t]
                                 .. t); positions[b][0] is 0 */
    const int32_t *cp_positions; /* context parallelism (zt_unit.cp_parts > 1): the whole sequences'
                                    positions (B, T x cp_parts) in whole-sequence order, the rule of
                                    `positions` above (packed documents), or NULL: plain causal over
                                    the whole sequence. `positions` then holds the local tokens'
                                    (never NULL: the whole-sequence indices of the part's chunks,
                                    zt_cp_chunks), T is the part's token count. Unused without cp. */
    uint64_t cp_counted;    /* context parallelism: the counted targets of the whole micro-batch (every
                               part's; zt_cp_cut_batch sets it), which a unit's losses over the whole
                               sequence (a mixture's router losses) weigh by; 0 without cp */
    float dloss;            /* d(step loss)/d(per-token loss): 1 / tokens in the global batch */
    int logits_pos;         /* >= 0: the loss unit copies the logits at this position ... */
    float *logits_out;      /* ... of every sequence b into logits_out (B, V); NULL: none */
    uint64_t dropout_key;   /* set by the engine: in zt_engine_forward_backward a pure function of
                               (seed, step, global micro-batch index), so every strategy and world
                               split draws the same dropout masks; 0 (zt_engine_forward): no dropout */
} zt_batch;

/* Tensor parallelism (docs/parallelism.md): the collectives a unit whose parameters are split
 * (zt_unit.tp_parts > 1) calls where a partial result must become whole (Megatron's f and g), run
 * by the engine over the tensor-parallel group. They tell the unit no rank. Each is collective:
 * every part calls the same ones in the same order with the same sizes; `what` names the call in
 * errors (a lost peer is ZT_ERR_PEER). */
typedef struct zt_unit_group {
    int parts;
    /* buf (n floats, n <= B·T·the widest unit output; under sequence parallelism B·T·C or 4·C) = the
     * sum over the parts of each part's buf, added in one fixed order, the same bits on every part */
    int (*sum)(const struct zt_unit_group *g, float *buf, size_t n, const char *what, zt_error *err);
    /* buf (n doubles, n <= B·T) = the sum over the parts, in part order */
    int (*sum_f64)(const struct zt_unit_group *g, double *buf, size_t n, const char *what, zt_error *err);
    /* buf (n floats, n <= B·T) = the elementwise maximum over the parts (exact) */
    int (*max)(const struct zt_unit_group *g, float *buf, size_t n, const char *what, zt_error *err);
    /* all (rows x total) = every part's (rows x its share of the total columns, zt_tp_range) side
     * by side in part order; this part's row r is at mine + r * stride (rows <= B, total <= the
     * vocabulary) */
    int (*concat_cols)(const struct zt_unit_group *g, const float *mine, int rows, size_t stride, int64_t total,
                       float *all, const char *what, zt_error *err);
    /* Sequence parallelism (zt_unit.seq_parts > 1; Megatron-LM's, docs/parallelism.md): each part
     * holds a range of every sequence's T positions, [*begin, *begin + *count) of T (near-equal
     * ranges, zt_tp_range's: a range, not a rank) */
    void (*seq_range)(const struct zt_unit_group *g, int T, int *begin, int *count);
    /* all (B, T, C) = every part's (B, count, C) slice `mine` in position order (Megatron's
     * all-gather before a column-parallel product; the backward of a reduce-scatter), elements of
     * elem_bytes (4: fp32, or fp16 values in fp32; 2: bf16 bits); mine may be the start of all */
    int (*seq_gather)(const struct zt_unit_group *g, const void *mine, void *all, int B, int T, int C,
                      int elem_bytes, const char *what, zt_error *err);
    /* mine (B, count, C) = this part's slice of the sum over the parts of full (B, T, C), added in
     * the all-reduce's fixed order (the same bits as `sum` then slicing); mine may be the start of
     * full */
    int (*seq_reduce_scatter)(const struct zt_unit_group *g, const float *full, float *mine, int B, int T, int C,
                              const char *what, zt_error *err);
    /* Context parallelism (zt_unit.cp_parts > 1; docs/parallelism.md): every sequence's T·cp_parts
     * positions are cut into 2·cp_parts equal chunks and a part holds two of them (zt_cp_chunks:
     * load-balanced for causal attention); the units run on those T positions, and attention
     * (src/model/context_parallel.c) moves keys, values and gradients between the parts with these
     * two. cp_chunk_of: which pair of chunks this part holds (a layout, not a rank). */
    int cp_parts;
    int cp_chunk_of;
    /* every part sends send[p] (send_bytes[p] bytes) to part p and receives recv[p] (recv_bytes[p]
     * bytes, as that part sends) from it; this part's own entries are ignored (the caller copies);
     * zero-byte entries move nothing */
    int (*cp_exchange)(const struct zt_unit_group *g, const void *const *send, const size_t *send_bytes,
                       void *const *recv, const size_t *recv_bytes, const char *what, zt_error *err);
    /* out (n floats) = the sum over the parts p of the block part p sends this part (p's send[this
     * part]; this part's own send[its index] included), added in comm/tree_sum.c's fixed tree over
     * the part index: the same bits whichever part adds. stage: cp_parts x n floats of the caller's
     * scratch (the received blocks) */
    int (*cp_reduce_exchange)(const struct zt_unit_group *g, const float *const *send, float *out, size_t n,
                              float *stage, const char *what, zt_error *err);
    /* ring: posts the send of send (bytes) to the next part (+1 mod cp_parts) and the receive of
     * as many bytes from the previous one into recv, returning at once (compute while it moves);
     * cp_shift_wait finishes it. One shift in flight at a time; buffers untouched until the wait. */
    int (*cp_shift_post)(const struct zt_unit_group *g, const void *send, void *recv, size_t bytes,
                         const char *what, zt_error *err);
    int (*cp_shift_wait)(const struct zt_unit_group *g, zt_error *err);
    /* cp_exchange and cp_reduce_exchange posted: they return at once (compute while the blocks
     * move) and the wait of the same slot (0 .. ZT_CP_MAX_POSTED - 1; any number of slots in
     * flight, each posted again only after its wait) finishes them; the buffers stay untouched
     * until then. cp_reduce_wait sums into out (n floats) as cp_reduce_exchange does, in the
     * same tree. Every part posts its slots in the same order (the units run the same code). */
    int (*cp_exchange_post)(const struct zt_unit_group *g, int slot, const void *const *send,
                            const size_t *send_bytes, void *const *recv, const size_t *recv_bytes, const char *what,
                            zt_error *err);
    int (*cp_exchange_wait)(const struct zt_unit_group *g, int slot, zt_error *err);
    int (*cp_reduce_post)(const struct zt_unit_group *g, int slot, const float *const *send, size_t n, float *stage,
                          const char *what, zt_error *err);
    int (*cp_reduce_wait)(const struct zt_unit_group *g, int slot, float *out, zt_error *err);
    /* Expert parallelism (zt_unit.ep_parts > 1; docs/parallelism.md): the experts of a mixture are
     * spread over ep_parts parts, part p running experts [p·E/ep_parts, (p+1)·E/ep_parts) for the
     * tokens of every part; ep_part: which experts this part runs (a layout, not a rank). */
    int ep_parts;
    int ep_part;
    /* every part sends send[p] (send_bytes[p] bytes) to part p, its own entry included (copied),
     * and receives into recv[p] the block part p has for it, at most recv_cap[p] bytes, its size
     * into recv_bytes[p] (the sizes travel first: comm/all_to_all.c). ZT_ERR_MISMATCH when a block
     * exceeds its room. */
    int (*ep_all_to_all)(const struct zt_unit_group *g, const void *const *send, const size_t *send_bytes,
                         void *const *recv, const size_t *recv_cap, size_t *recv_bytes, const char *what,
                         zt_error *err);
    void *ctx;
} zt_unit_group;

/* Everything a unit's forward or backward touches, owned by the engine. */
typedef struct zt_unit_args {
    const zt_batch *batch;
    float *const *params; /* the unit's parameters, full fp32 tensors, in the unit's listed order;
                             NULL where the unit reads the parameter through params_lp (under
                             bf16/fp16 compute, a matrix its zt_unit_ops.reads_lp declares), in
                             every strategy */
    float *const *grads;  /* same order; backward accumulates (+=) into them, except where
                             grads_unset says a gradient holds nothing yet */
    const float *in;      /* (B, T, in_width) the previous unit's output; NULL for the first unit */
    float *out;           /* (B, T, out_width); the last unit writes per-token losses (B, T) */
    float *saved;         /* saved_floats(B, T, lp_kind) floats, 64-byte aligned: written by
                             forward, read by backward */
    float *scratch;       /* scratch_floats(B, T) floats: undefined on entry, free after return */
    const float *dout;    /* backward: d loss / d out, (B, T, out_width) */
    float *din;           /* backward: d loss / d in, assigned (=); NULL for the first unit */
    /* Low-precision compute (zt_precision.compute bf16 or fp16; lp_kind 0 under fp32): */
    int lp_kind;          /* a zt_lp_kind of src/kernels/kernels.h: 1 bf16, 2 fp16; 0 none. The
                             saved buffer was sized for it (zt_unit_ops.saved_floats) */
    const void *const *params_lp; /* the compute copy of each parameter the engine keeps one of
                                     (the matrices, ndim >= 2): bf16 bits (uint16_t), or fp32
                                     holding fp16 values; NULL entries (the vectors; all of
                                     them when lp_kind is 0): no copy, use params */
    void *staging;        /* staging_bytes(B, T, lp_kind) bytes for rounded operands (64-byte aligned) */
    bool attn_bf16;       /* attention's products on bf16 operands (zt_precision.attention bf16;
                             only under bf16 compute): the flash kernels' bf16 path */
    float *saved_rest;    /* selective activation checkpointing (zt_unit_ops.kept_floats): where
                             floats [kept, saved) of the saved buffer live, apart from the kept
                             part; NULL: right after it (saved + kept). zt_unit_saved_rest() reads
                             it. Units without kept_floats always get NULL. */
    const zt_unit_group *group; /* the tensor-, context- and expert-parallel groups' collectives when
                                   the unit is split (zt_unit.tp_parts, cp_parts or ep_parts > 1),
                                   else NULL */
    uint32_t *grads_unset; /* backward: bit k set, the gradient of parameter k holds no values yet
                              this micro-batch (the engine did not zero it, only where
                              zt_unit_ops.assigns_grad said so): the unit's first write assigns it
                              and clears the bit (zt_linear_backward does both). The engine zeroes
                              what is left set after the unit returns. NULL: none, all += */
    /* Auxiliary losses (a mixture of experts' router losses, src/model/llama_moe.c): forward adds
     * a unit's coefficient-weighted terms for this micro-batch into *aux_loss, which the engine
     * adds to the micro-batch's loss (NULL: not counted, as in a recomputation's forward); backward
     * multiplies their gradients by aux_dloss, d(step loss)/d(the micro-batch's auxiliary term):
     * the micro-batch's counted targets x zt_batch.dloss x the fp16 loss scale (0 in forward). */
    double *aux_loss;
    float aux_dloss;
    /* A training forward (not evaluation), when non-NULL: a mixture-of-experts unit adds the tokens
     * each of its experts got this micro-batch into moe_counts[0 .. E) and the slots dropped over
     * the capacity into moe_counts[E] (the engine's per-unit counters, zt_engine_moe_stats) */
    int64_t *moe_counts;
    /* Expert parallelism: true when the engine adds this micro-batch's gradient to the others'
     * on this rank before reducing it (gradient accumulation's deferred tree), so the unit leaves
     * its per-source partials in their slots and zt_unit_ops.fold_grads adds them at the step;
     * false: the unit adds them itself in backward (the reduction follows at once) */
    bool ep_defer_fold;
    /* The experts stored E/ep a rank (zt_unit.ep_local): per listed parameter, ep - 1 slots of its
     * gradient's size for the other source parts' partials (the gradient itself is slot 0), or
     * NULL (every other parameter; whole experts use their own gradient's slices) */
    float *const *grad_slots;
} zt_unit_args;

typedef struct zt_unit zt_unit;

/* Activation checkpointing (docs/activation-checkpointing.md): what a unit keeps
 * between its forward and its backward. The gradients are bit-identical in every mode.
 *   none       every unit keeps its whole saved buffer
 *   full       every unit keeps only its output (the next unit's input); its saved buffer is
 *              rebuilt by re-running its forward just before its backward, in one buffer shared
 *              by all units
 *   selective  every unit keeps what its ops declare cheap (zt_unit_ops.kept_floats) and
 *              rebuilds the rest (zt_unit_ops.recompute) in the shared buffer; units that declare
 *              nothing keep everything (for GPT-2: the blocks recompute the attention matrix and
 *              gelu(fch), Megatron's selective recomputation; the head keeps its logits) */
typedef enum zt_recompute {
    ZT_RECOMPUTE_NONE = 0,
    ZT_RECOMPUTE_FULL = 1,
    ZT_RECOMPUTE_SELECTIVE = 2
} zt_recompute;

const char *zt_recompute_name(zt_recompute r);
/* "none", "full", "selective"; ZT_ERR_USAGE lists the names on a miss. */
int zt_recompute_parse(const char *name, zt_recompute *out, zt_error *err);

/* A unit's operations. forward and backward must be deterministic (the same inputs give the same
 * bits): activation checkpointing re-runs them and relies on it.
 *
 * Activation checkpointing (zt_engine_options.activation_checkpointing):
 *   full       forward runs into one saved buffer shared by all units; before a unit's backward
 *              the engine re-runs its forward (from its kept input, into a throwaway output).
 *              Needs nothing from the unit.
 *   selective  the unit keeps the first kept_floats(B, T, lp_kind) floats of its saved buffer between
 *              forward and backward; the rest lives in the shared buffer (at a->saved_rest) and
 *              is rebuilt by recompute() before backward. Units that leave kept_floats and
 *              recompute NULL keep their whole saved buffer under selective (nothing recomputed).
 * kept_floats and recompute are optional and come together (zt_model_add_unit checks it).
 *
 * Sizes depend on the compute precision: lp_kind is what zt_unit_args.lp_kind will be (0 under
 * fp32 compute, 1 bf16, 2 fp16). A unit may store an activation that only feeds a matrix product
 * as the rounded operand (GPT-2 stores its Linears' inputs as bf16 under bf16 compute: 2 bytes an
 * element, packed in the float buffer); a unit that ignores lp_kind saves fp32 and stays correct. */
typedef struct zt_unit_ops {
    size_t (*saved_floats)(const zt_unit *u, int B, int T, int lp_kind);
    size_t (*scratch_floats)(const zt_unit *u, int B, int T);
    int (*forward)(const zt_unit *u, const zt_unit_args *a, zt_error *err);
    int (*backward)(const zt_unit *u, const zt_unit_args *a, zt_error *err);
    /* Optional: bytes of staging the unit's low-precision products need (matmul_lp_staging_bytes:
     * the rounded output gradient of its widest Linear; inputs are rounded into the saved buffer);
     * NULL: the unit needs none. */
    size_t (*staging_bytes)(const zt_unit *u, int B, int T, int lp_kind);
    /* Optional: true when the unit reads its k-th parameter through params_lp alone under any
     * low-precision compute (bf16, bf16-low, fp16; the parameter must be a matrix, ndim >= 2,
     * which is what has a compute copy): the Linear weights, embedding tables read as bf16 rows.
     * The engine then passes params[k] = NULL in every strategy, so every strategy hands the unit
     * the same values, and it need not hold the fp32 tensor: zero1/zero2 replicate only the
     * compute copy of such a parameter (their fp32 master is sharded), bf16-low's bf16
     * parameters are the copy. NULL: the unit gets fp32 params for every parameter in every mode
     * (zero1/zero2 then replicate an fp32 copy of each beside its compute copy). */
    bool (*reads_lp)(const zt_unit *u, int k);
    /* Optional: true when the unit's k-th parameter is a Linear weight (OC, C) that forward and
     * backward pass through zt_linear_forward / _backward (src/model/layers.h) with the unit, so
     * that it can carry a LoRA adapter (zt_model_add_lora). A unit that declares it sizes its
     * scratch with zt_lora_scratch_floats at the end and reads its adapters through params_lp
     * under low precision (reads_lp true for them, zt_unit_is_adapter). NULL: none. */
    bool (*adaptable)(const zt_unit *u, int k);
    /* Optional: floats at the start of saved that selective checkpointing keeps (<= saved_floats;
     * a multiple of 16 keeps the rest 64-byte aligned when it follows the kept part). */
    size_t (*kept_floats)(const zt_unit *u, int B, int T, int lp_kind);
    /* Optional: rewrites saved floats [kept, saved) (at zt_unit_saved_rest) exactly as forward
     * wrote them, from the kept part, a->in and a->params; may use a->scratch; must not write
     * a->out (NULL here) or the kept part. */
    int (*recompute)(const zt_unit *u, const zt_unit_args *a, zt_error *err);
    /* Optional: true when the unit's backward writes its k-th parameter's gradient first through
     * zt_linear_backward / _rounded (src/model/layers.h) as a Linear weight, which assigns the
     * product (=) where zt_unit_args.grads_unset has bit k: the engine then leaves that gradient
     * unzeroed when this unit is its first writer in backward, sparing a pass over it and the
     * product's read of it (bench/RESULTS.md, "Gradients assigned, not zeroed"). NULL: none; every
     * gradient the unit sees holds zeros or earlier sums. */
    bool (*assigns_grad)(const zt_unit *u, int k);
    /* Expert parallelism (zt_unit.ep_parts > 1): the unit's backward left each source part's partial
     * weight gradient in its own slot (zt_unit_args.ep_defer_fold); this adds the slots in the
     * fixed tree over the parts into the ones this part owns, once the step's micro-batches are
     * added on this rank and before the data-parallel reduction (grads: the unit's gradients in
     * its listed order, NULL where frozen; slots: zt_unit_args.grad_slots'). NULL: the unit has
     * nothing to fold. */
    void (*fold_grads)(const zt_unit *u, const struct zt_unit_group *g, float *const *grads, float *const *slots);
} zt_unit_ops;

/* Where the saved floats after the first `kept` live (see zt_unit_args.saved_rest). */
static inline float *zt_unit_saved_rest(const zt_unit_args *a, size_t kept) {
    return a->saved_rest ? a->saved_rest : a->saved + kept;
}

struct zt_unit {
    char name[ZT_NAME_MAX];
    const zt_unit_ops *ops;
    const void *model_cfg;           /* the model's own configuration, for the ops */
    int layer;                       /* model-defined index (block number), -1 if none */
    int n_params;
    int params[ZT_UNIT_MAX_PARAMS];  /* indices into the model's parameter table */
    int out_width;                   /* floats per token of out (1 for the loss unit) */
    /* Tensor parallelism (zt_tp_apply): the unit computes on 1/tp_parts of its heads, MLP width and
     * vocabulary; its tables hold vocabulary rows [vocab_begin, vocab_begin + vocab_rows) (0 rows:
     * the whole vocabulary). 1, 0, 0: the whole model (zt_model_add_unit's default). */
    int tp_parts;
    int64_t vocab_begin, vocab_rows;
    /* Sequence parallelism (zt_tp_apply of a model with sequence_parallel): > 1 when the unit's
     * input and output activations (B, T, C) hold only this part's range of the T positions
     * (zt_unit_group.seq_range), so out_width is C / seq_parts floats per token of the whole
     * sequence (the loss unit's (B, T) losses stay whole); 1 otherwise */
    int seq_parts;
    /* Context parallelism (zt_model_set_context_parallel; docs/parallelism.md): > 1 when every
     * sequence is split over cp_parts ranks and the unit runs on one part's positions; attention
     * reaches the others' through zt_unit_group's cp calls, by cp_mode (a zt_cp_mode). 1: whole */
    int cp_parts;
    int cp_mode;
    /* Expert parallelism (zt_model_set_expert_parallel): > 1 when the unit's experts are spread
     * over ep_parts parts that exchange tokens (zt_unit_group's ep calls); 1: every expert here.
     * ep_local (zt_model_store_experts): its stacked experts' tensors hold only this part's E/ep
     * experts (else all E, this part running its own) */
    int ep_parts;
    bool ep_local;
    /* LoRA (zt_model_add_lora): the unit positions of the adapters lora_A and lora_B of its k-th
     * parameter (a Linear weight), 0 where it has none (adapters come after the weights they
     * adapt, never at position 0); lora: the model's LoRA settings, NULL without adapters */
    uint8_t lora_a[ZT_UNIT_MAX_PARAMS], lora_b[ZT_UNIT_MAX_PARAMS];
    const struct zt_lora_config *lora;
    int lora_width;                  /* the widest input (C) of its adapted Linears (scratch) */
    /* The loss unit (the last; zt_model_set_loss_chunk): tokens whose logits it holds at once.
     * 0: all of them, the (B*T, V) logits kept from forward to backward; R > 0: forward computes
     * logits and losses min(R, B*T) rows at a time and backward computes them again, so no (B*T, V)
     * buffer exists (memory.loss_chunk_tokens; the trainer, bench and estimate-memory give 0 for
     * R >= B*T, where chunks would only repeat the product) */
    int loss_chunk;
};

typedef struct zt_model {
    char name[64];
    int n_params, cap_params;
    zt_param_desc *params;
    int n_units, cap_units;
    zt_unit *units;
    int vocab_size;
    int max_seq_len;
    /* Model FLOPs per token of a training step (forward + backward) for sequence length T,
     * the 6N + attention formula of the PaLM paper / llm.c; NULL if unknown. */
    double (*train_flops_per_token)(const struct zt_model *m, int T);
    /* FLOPs per token a training step recomputes for sequence length T and a checkpointing mode:
     * activation checkpointing's re-runs in backward, and the flash attention's scores Q·Kᵀ
     * recomputed by its backward (in every mode), and the LM head's product again when the loss is
     * chunked (loss_chunk_tokens > 0); NULL if unknown (HFU then equals MFU). */
    double (*recompute_flops_per_token)(const struct zt_model *m, int T, zt_recompute mode);
    void *cfg;                       /* model-specific configuration, freed with the model */
    /* Whether tensor parallelism over `parts` ranks fits the model's shape (whole heads, key/value
     * heads and MLP widths per part): ZT_ERR_USAGE naming the numbers otherwise; NULL: the model
     * cannot be split (zt_tp_apply refuses it). */
    int (*tp_check)(const struct zt_model *m, int parts, zt_error *err);
    struct zt_lora_config *lora;     /* the LoRA settings (zt_model_add_lora), freed with the model;
                                        NULL: no adapters */
    /* Megatron-LM's sequence parallelism wanted (parallel.sequence_parallel): zt_tp_apply over
     * more than one part also cuts the norms' and residuals' activations along T (zt_unit.seq_parts) */
    bool sequence_parallel;
    int loss_chunk_tokens; /* memory.loss_chunk_tokens, given to the loss unit (zt_unit.loss_chunk) */
    int moe_experts;       /* experts of its mixture-of-experts units (0: none; zt_unit_args.moe_counts) */
} zt_model;

int zt_model_create(const char *name, zt_model **out, zt_error *err);
void zt_model_free(zt_model *m);
/* Declares a parameter; returns its index through idx. Names must be unique. */
int zt_model_add_param(zt_model *m, const char *name, int ndim, const int64_t *shape,
                       zt_init_kind init, float init_std, bool decay, int *idx, zt_error *err);
/* Declares the next unit in execution order; params are indices from zt_model_add_param. */
int zt_model_add_unit(zt_model *m, const char *name, const zt_unit_ops *ops, int layer,
                      const int *params, int n_params, int out_width, zt_error *err);
/* The loss unit computes its logits at most `tokens` rows at a time, again in backward, instead of
 * keeping all (B*T, V) of them (0: keep them; zt_unit.loss_chunk). ZT_ERR_USAGE for tokens < 0.
 * zt_loss_chunk_for(tokens, B, T) is what to give for micro-batches of B x T: 0 when one chunk would
 * hold them all (chunks would only repeat the product). */
int zt_loss_chunk_for(int tokens, int B, int T);
int zt_model_set_loss_chunk(zt_model *m, int tokens, zt_error *err);
/* Context parallelism (docs/parallelism.md): how attention reaches the other parts' positions.
 * allgather: every part gathers all keys and values once per layer (Llama 3's); ring: keys and
 * values pass around the parts while each block computes, merged by the online softmax (ring
 * attention); ulysses: all-to-all from the sequence split to a head split and back (DeepSpeed-
 * Ulysses: the heads, and key/value heads, divided by the parts). */
typedef enum zt_cp_mode { ZT_CP_ALLGATHER = 0, ZT_CP_RING = 1, ZT_CP_ULYSSES = 2 } zt_cp_mode;
#define ZT_CP_MAX_PARTS 64 /* the most context-parallel parts (parallel.context_parallel_size) */
#define ZT_CP_MAX_POSTED 8 /* zt_unit_group's posted cp exchanges in flight at once */
const char *zt_cp_mode_name(zt_cp_mode mode); /* "allgather", "ring", "ulysses" */
/* ZT_ERR_USAGE listing the names on a miss. */
int zt_cp_mode_parse(const char *name, zt_cp_mode *out, zt_error *err);
/* The two chunks of a whole sequence of T positions (a multiple of 2·parts) that part `part` of
 * `parts` holds: T is cut into 2·parts chunks of *count = T / (2·parts) positions and the part
 * takes chunks `part` and 2·parts - 1 - part (Megatron-LM's and torchtitan's load balance for causal
 * attention: every part gets as many query-key pairs), at begin[0] < begin[1]. */
void zt_cp_chunks(int T, int parts, int part, int begin[2], int *count);
/* The head groups allgather's and ulysses' exchanges are pipelined over (src/model/context_parallel.c)
 * for nkv key/value heads of a rank and `threads` threads: the largest of 4, 3, 2 dividing nkv that
 * leaves each group at least `threads` key/value heads, else 1 (ZT_CP_HEAD_GROUPS overrides it) */
int zt_cp_head_groups(int nkv, int threads);
/* *out = part `part`'s batch of the whole batch *whole (B sequences of T positions, T a multiple
 * of 2·parts): the inputs and targets of its two chunks copied into inputs and targets
 * (B·T/parts each), their positions into positions (whole->positions' values, packed documents,
 * or the whole-sequence indices), T/parts positions, cp_positions = whole->positions, cp_counted =
 * whole's counted targets (0 when it has none); every other field as *whole's. out may be whole. */
void zt_cp_cut_batch(const zt_batch *whole, int parts, int part, int32_t *inputs, int32_t *targets,
                     int32_t *positions, zt_batch *out);
/* Every unit of m runs on one part of `parts` of each sequence (zt_unit.cp_parts, cp_mode); parts 1:
 * whole again. ZT_ERR_USAGE for parts < 1 or a mode out of range. The attention of the models'
 * blocks follows it (src/model/context_parallel.c). Call before zt_engine_create. */
int zt_model_set_context_parallel(zt_model *m, int parts, zt_cp_mode mode, zt_error *err);
/* The parts zt_model_set_context_parallel cut m into (1: whole) and, when mode is not NULL, their mode. */
int zt_model_cp_parts(const zt_model *m, zt_cp_mode *mode);

/* Expert parallelism (docs/parallelism.md): the mixture-of-experts units of m spread their experts
 * over `parts` parts (zt_unit.ep_parts) that send each expert's tokens to the part running it and
 * the results back (zt_unit_group.ep_all_to_all); 1: every expert on every part. ZT_ERR_USAGE naming
 * the numbers for parts < 1, a model without experts, or experts not divisible by parts. Call
 * before zt_engine_create. */
int zt_model_set_expert_parallel(zt_model *m, int parts, zt_error *err);
/* The parts zt_model_set_expert_parallel spread m's experts over (1: none). */
int zt_model_ep_parts(const zt_model *m);
/* Stores m's stacked experts E/ep a part (docs/parallelism.md, "Expert parallelism"): each
 * parameter of `parts` norm blocks (= zt_model.moe_experts, the experts stacked along dim 0) keeps
 * part `part`'s rows, its logical tensor the whole (zt_param_desc.ep_parts, ep_part), its
 * gradient reduced and its pieces sharded over the expert-data-parallel ranks
 * (ZT_SHARD_GROUP_EDP); the units run their experts from it (zt_unit.ep_local). Call after
 * zt_model_set_expert_parallel(m, parts) and before zt_engine_create; a model zt_tp_apply cut keeps
 * its tp cut inside the ep cut (each tp part of ep part `part` holds its tp slice of the part's
 * experts). ZT_ERR_USAGE naming the numbers for parts not the model's ep parts, a part out of
 * range, or experts stored already. */
int zt_model_store_experts(zt_model *m, int parts, int part, zt_error *err);
/* Whether zt_model_store_experts cut m's experts; and the experts whole again (estimates of
 * strategies that keep them whole: src/memory/estimate.c) */
bool zt_model_experts_local(const zt_model *m);
void zt_model_whole_experts(zt_model *m);

/* Index of the parameter called name, or -1. */
int zt_model_find_param(const zt_model *m, const char *name);
/* Freezing (src/model/freeze.c): marks non-trainable every parameter whose whole name matches the
 * PCRE2 regular expression pattern (e.g. "embed_tokens\\..*|layers\\.0\\..*"); NULL or "": nothing.
 * *n_frozen (may be NULL) = how many. ZT_ERR_USAGE for a bad pattern, one that matches nothing, or
 * one that matches every parameter. Call before zt_engine_create. */
int zt_model_freeze(zt_model *m, const char *pattern, int *n_frozen, zt_error *err);
/* Muon's split (src/model/freeze.c, the same matching): muon[i] = true for the trainable
 * parameters whose whole name matches muon_pattern, false for the rest, which AdamW updates
 * (adamw_pattern "" or NULL: all the rest; otherwise every trainable parameter must match exactly
 * one of the two). ZT_ERR_USAGE naming optimizer.muon_params / optimizer.adamw_params and the
 * parameter for a bad pattern, a Muon parameter that is not a 2-D matrix, a parameter matched by
 * both or by neither, or a muon_pattern that matches no trainable parameter. muon NULL: the
 * patterns are only checked (a pipeline's whole model before its stages take their parts). */
int zt_model_muon_split(const zt_model *m, const char *muon_pattern, const char *adamw_pattern, bool *muon,
                        zt_error *err);
/* The same for a part of a model (a pipeline stage's): a muon_pattern that matches none of its
 * parameters is not an error there (the whole model is checked with zt_model_muon_split). */
int zt_model_muon_split_stage(const zt_model *m, const char *muon_pattern, const char *adamw_pattern, bool *muon,
                              zt_error *err);
/* Total number of parameter elements (tied parameters counted once; the logical tensors: under
 * tensor parallelism the whole model, not this part). */
int64_t zt_model_numel(const zt_model *m);

/* The causal attention kernel of either model (config key model.attention; docs/models.md):
 * flash (src/kernels/flash_attention.c) saves the output and one logsumexp per row and recomputes
 * the probabilities tile by tile in backward, memory O(T); naive (src/kernels/attention.c) saves the
 * (B,NH,T,T) probabilities, memory O(T²). Same gradients to fp32 rounding, not the same bits. */
typedef enum zt_attention { ZT_ATTENTION_FLASH = 0, ZT_ATTENTION_NAIVE = 1 } zt_attention;
const char *zt_attention_name(zt_attention a); /* "flash", "naive" */
/* "flash" | "naive"; ZT_ERR_USAGE names both on a miss. */
int zt_attention_parse(const char *name, zt_attention *out, zt_error *err);
/* LoRA (src/model/lora.c; docs/models.md): low-rank adapters beside chosen Linear weights W
 * (OC, C) of the blocks, y = x·Wᵀ (+ b) + (alpha / r) · dropout(x)·Aᵀ·Bᵀ with A (r, C) and
 * B (OC, r) new parameters named like PEFT's ("layers.0.self_attn.q_proj.lora_A.weight"), placed
 * in the parameter table right after W and listed by W's unit, so that every strategy shards,
 * gathers and reduces them like any parameter. A starts as PEFT's kaiming_uniform(a = sqrt(5)),
 * U(-1/sqrt(C), 1/sqrt(C)), B as zeros (the model is unchanged until B moves). Every other
 * parameter is frozen. target_modules, as PEFT's LoraConfig reads it, against module names
 * (a weight's name without ".weight", zerotrain's "layers.0.self_attn.q_proj" or transformers'
 * "model.layers.0.self_attn.q_proj" / "transformer.h.0.attn.c_attn"):
 *   "q_proj,v_proj" (a list; a YAML list joins to it): each entry names the modules whose whole
 *                   name is it or ends with "." + it; a single plain name is a list of one
 *   "all-linear"    every adaptable Linear (all the blocks' Linears; not the LM head)
 *   anything else   a PCRE2 regular expression matched against the whole module name
 *   ""              the family's default, PEFT's: q_proj,v_proj (Llama), c_attn (GPT-2) */
/* The frozen base stored quantized (QLoRA; src/engine/param_quant.c, docs/models.md): none, NF4
 * (QLoRA's 4-bit NormalFloat, blocks of 64 with double-quantized absmaxes, bitsandbytes' layout),
 * int8 (one absmax per row). */
typedef enum zt_quant { ZT_QUANT_NONE = 0, ZT_QUANT_NF4 = 1, ZT_QUANT_INT8 = 2 } zt_quant;
const char *zt_quant_name(zt_quant q); /* "none", "nf4", "int8" */
typedef struct zt_lora_config {
    int rank;                  /* r >= 1 (0 in a zt_model_spec: no LoRA) */
    float alpha;               /* > 0: the update is scaled by alpha / r */
    float dropout;             /* [0, 1): dropout on the adapters' input in training forward */
    char target_modules[512];  /* which Linears (above); "": the family's default */
    int base_quant;            /* a zt_quant: every frozen Linear of the blocks (the adaptable ones,
                                  adapted or not) stored quantized, dequantized unit by unit into
                                  the compute dtype (param.quant); nf4 needs rows of a multiple of 64 */
} zt_lora_config;
/* Adds the adapters and freezes every other parameter; *n_adapted (may be NULL) = how many Linears
 * got one; base_quant marks the frozen Linears quantized. ZT_ERR_USAGE naming the key (lora.rank,
 * lora.alpha, lora.dropout, lora.target_modules, lora.base_quant: a Linear whose rows are not whole
 * NF4 blocks)
 * for a bad value, a list entry or a regular expression that matches no module, one that matches a
 * parameter no block adapts (an embedding, the LM head), or a model that already has adapters.
 * Call before zt_engine_create. */
int zt_model_add_lora(zt_model *m, const zt_lora_config *cfg, int *n_adapted, zt_error *err);
/* Whether unit u's k-th parameter is a LoRA adapter matrix. */
bool zt_unit_is_adapter(const zt_unit *u, int k);
/* Floats of scratch u's adapters need at the end of its scratch (0 without adapters): the largest
 * of its adapted Linears' lora_scratch_floats for B*T rows. */
size_t zt_lora_scratch_floats(const zt_unit *u, int B, int T);

/* ---------------------------------------------------------------------------------------------
 * GPT-2 (src/model/gpt2.c). */
typedef struct zt_gpt2_config {
    int max_seq_len; /* maximum sequence length (wpe rows) */
    int vocab_size;  /* V */
    int n_layer;     /* L */
    int n_head;      /* NH */
    int n_embd;      /* C */
    zt_attention attention; /* the attention kernel (default 0: flash); not part of the weights */
} zt_gpt2_config;

/* Presets: "tiny" (tests), "gpt2-124M"/"gpt2", "gpt2-350M", "gpt2-774M", "gpt2-1558M". */
int zt_gpt2_preset(const char *name, zt_gpt2_config *cfg, zt_error *err);
int zt_gpt2_create(const zt_gpt2_config *cfg, zt_model **out, zt_error *err);

/* ---------------------------------------------------------------------------------------------
 * Llama (src/model/llama.c; docs/models.md): pre-RMSNorm blocks, grouped-query attention with
 * rotary position embedding, SwiGLU MLP, no biases, untied (or tied) embeddings. Parameter names
 * are Hugging Face LlamaForCausalLM's without the "model." prefix, Linear weights (OC, C) as
 * torch.nn.Linear stores them. Also Mistral-7B (the same architecture). */
typedef struct zt_rope_scaling {
    float factor;           /* Llama 3's rope_type "llama3": factor > 0 (8 for Llama 3.1); 0: none */
    float low_freq_factor;  /* 1 for Llama 3.1 */
    float high_freq_factor; /* 4 for Llama 3.1 */
    int original_max_position_embeddings; /* 8192 for Llama 3.1 */
} zt_rope_scaling;

typedef struct zt_llama_config {
    int max_seq_len;        /* longest sequence it runs (HF max_position_embeddings) */
    int vocab_size;         /* V */
    int n_layer;            /* L */
    int n_head;             /* NH; head size hs = n_embd / n_head (even) */
    int n_embd;             /* C (HF hidden_size) */
    int n_kv_head;          /* NKV, divides NH (HF num_key_value_heads; = NH: no grouping) */
    int intermediate_size;  /* the MLP's width (gate, up: (I,C); down: (C,I)) */
    float rope_theta;       /* RoPE base (10000 Llama 2, 500000 Llama 3) */
    float rms_norm_eps;     /* 1e-5 (Llama 2, 3, Mistral) */
    zt_rope_scaling rope_scaling;
    bool tie_embeddings;    /* the LM head reads embed_tokens (HF tie_word_embeddings; no lm_head) */
    zt_attention attention; /* the attention kernel (default 0: flash); not part of the weights */
    /* Mixture of experts (src/model/llama_moe.c, docs/models.md): n_experts > 0 makes every block's
     * MLP a sparse one, Mixtral's: a router Linear (E,C), softmax, the top-k experts, each a SwiGLU
     * MLP of width moe_intermediate_size; 0 experts: dense blocks, and the rest is ignored. */
    int n_experts;             /* E (HF num_local_experts) */
    int n_experts_per_token;   /* k (HF num_experts_per_tok) */
    int moe_intermediate_size; /* each expert's width (0: intermediate_size, Mixtral's) */
    int n_shared_experts;      /* DeepSeek-MoE's always-on experts: a shared SwiGLU MLP of width n x the
                                  expert width (unless shared_expert_intermediate_size says it) */
    bool norm_topk_prob;       /* the top-k weights renormalized to sum 1 (Mixtral: true) */
    float router_aux_loss_coef; /* load-balancing loss coefficient (HF router_aux_loss_coef) */
    float router_z_loss_coef;  /* router z-loss coefficient (ST-MoE) */
    float capacity_factor;     /* > 0: an expert takes at most ceil(N*k/E * factor) of a micro-batch's
                                  N tokens, the rest dropped and counted; 0: dropless */
    /* Shared experts (src/model/llama_moe_shared.c): a dense SwiGLU MLP every token goes through,
     * added to the routed experts' output; its width is shared_expert_intermediate_size (Qwen2-MoE's
     * key), or n_shared_experts x the expert width (DeepSeek-MoE's); 0 and 0: none. With
     * shared_expert_gate (Qwen2-MoE's) its output is scaled per token by sigmoid(x·g), g a Linear
     * (1,C). */
    int shared_expert_intermediate_size;
    bool shared_expert_gate;
    /* Qwen2's attention: q, k and v Linears with biases (o without), layers.L.self_attn.{q,k,v}_proj.bias
     * (HF Qwen2 always; Qwen2-MoE's qkv_bias) */
    bool qkv_bias;
} zt_llama_config;

/* Presets: "llama-tiny" (tests: L=2, C=64, NH=4, NKV=2, I=192, V=50257, maxT=128), "llama-7b",
 * "llama-13b", "llama-70b" (Llama 2), "llama3-8b", "llama3-70b" (Llama 3.1: theta 500000, rope
 * scaling 8/1/4/8192, V=128256), "mistral-7b" (v0.1), "qwen2-0.5b" (q/k/v biases, tied). ZT_ERR_USAGE lists them on a miss. */
int zt_llama_preset(const char *name, zt_llama_config *cfg, zt_error *err);
int zt_llama_create(const zt_llama_config *cfg, zt_model **out, zt_error *err);
/* Floats per token a mixture-of-experts block of cfg sums over its tensor-parallel parts in backward
 * beyond the dense block's sums (src/model/llama_moe.c, docs/parallelism.md): the top-k weights'
 * gradient (k) and, with a gated shared expert, its dout·ys (1), in one fp32 sum; 0 for dense blocks. */
int zt_llama_moe_tp_sum_floats(const zt_llama_config *cfg);

/* ---------------------------------------------------------------------------------------------
 * Model families (src/model/arch.c): one record that builds either model, what the trainer,
 * checkpoints and the commands carry. */
typedef enum zt_arch { ZT_ARCH_GPT2 = 0, ZT_ARCH_LLAMA = 1 } zt_arch;
typedef struct zt_model_spec {
    zt_arch arch;
    zt_gpt2_config gpt2;   /* arch gpt2 */
    zt_llama_config llama; /* arch llama */
    zt_lora_config lora;   /* rank > 0: zt_model_spec_create adds LoRA adapters (zt_model_add_lora) */
    bool sequence_parallel; /* zt_model.sequence_parallel of the model built */
    int loss_chunk_tokens;  /* zt_model.loss_chunk_tokens of the model built (zt_model_set_loss_chunk) */
} zt_model_spec;
const char *zt_arch_name(zt_arch a); /* "gpt2", "llama" */
/* "gpt2" | "llama"; ZT_ERR_USAGE names both on a miss. */
int zt_arch_parse(const char *name, zt_arch *out, zt_error *err);
/* A preset of either family (GPT-2's names, then Llama's); ZT_ERR_USAGE lists all on a miss. */
int zt_model_preset(const char *name, zt_model_spec *spec, zt_error *err);
/* Builds the model spec describes, with LoRA adapters when spec->lora.rank > 0 (zt_model_add_lora's
 * errors). */
int zt_model_spec_create(const zt_model_spec *spec, zt_model **out, zt_error *err);
/* The spec a model built by zt_gpt2_create / zt_llama_create was made from (read from m->name
 * and m->cfg, and m->lora); ZT_ERR_USAGE for a model of another name. */
int zt_model_spec_of(const zt_model *m, zt_model_spec *out, zt_error *err);
/* The common shape of either family: layers, heads, channels, vocabulary, longest sequence. */
void zt_model_spec_shape(const zt_model_spec *spec, int *n_layer, int *n_head, int *n_embd,
                         int *vocab_size, int *max_seq_len);

/* ---------------------------------------------------------------------------------------------
 * The engine: owns parameter, gradient, optimizer and activation memory for one model. This is
 * the single-process engine; the distributed engine shards the same layout. */
/* Muon: Muon on the 2-D weights optimizer.muon_params names, AdamW on the rest; LAMB: DeepSpeed's
 * Lamb; ONEBIT_ADAM: DeepSpeed's OnebitAdam, Adam until onebit_freeze_step, then the momentum
 * averaged by a 1-bit compressed all-reduce with error feedback and v frozen (docs/optimizer.md) */
typedef enum zt_optimizer_kind {
    ZT_OPT_ADAMW = 0,
    ZT_OPT_SGD = 1,
    ZT_OPT_MUON = 2,
    ZT_OPT_LAMB = 3,
    ZT_OPT_ONEBIT_ADAM = 4
} zt_optimizer_kind;
#define ZT_OPT_PATTERN_MAX 512
/* Whether the optimizer keeps two state arrays (m, v): AdamW, Muon (AdamW's, and the momentum of
 * its matrices in m) and LAMB; SGD keeps at most one */
static inline bool zt_optim_two_moments(zt_optimizer_kind k) { return k != ZT_OPT_SGD; }

typedef struct zt_optimizer_config {
    zt_optimizer_kind kind;
    float beta1, beta2, eps;   /* AdamW */
    float weight_decay;        /* decoupled; only on parameters with decay = true */
    float momentum;            /* SGD */
    bool nesterov;             /* SGD */
    float grad_clip;           /* global-norm clipping threshold; <= 0 disables */
    /* Muon (ZT_OPT_MUON): its lr at the schedule's peak (lr_peak); the Muon step's lr is
     * lr(t) · muon_lr / lr_peak (muon_lr itself when lr_peak is 0) */
    float muon_lr, muon_momentum, muon_weight_decay;
    bool muon_nesterov;
    int muon_ns_steps;
    int muon_ns_bf16;          /* 1: Newton-Schulz in bf16 (optimizer.muon_ns_dtype) */
    int muon_scale;            /* ZT_MUON_SCALE_* of src/optim/optim.h */
    float lr_peak;             /* training.lr (the engine options set it) */
    /* PCRE2 patterns over whole parameter names: Muon's matrices, AdamW's (empty: the rest) */
    char muon_params[ZT_OPT_PATTERN_MAX], adamw_params[ZT_OPT_PATTERN_MAX];
    /* LAMB (ZT_OPT_LAMB): the trust ratio's clamp and the bias correction (DeepSpeed's defaults) */
    float lamb_min_coeff, lamb_max_coeff;
    bool lamb_bias_correction;
    /* 1-bit Adam (ZT_OPT_ONEBIT_ADAM): steps 1..onebit_freeze_step are Adam with the gradient
     * all-reduced; from the next one v is frozen and the momentum is all-reduced compressed.
     * onebit_bias_correction true: AdamW's update (the warm-up is AdamW's bits); false:
     * DeepSpeed's OnebitAdam kernel, p -= lr·(m/(sqrt(v)+eps) + wd·p), no bias correction */
    int64_t onebit_freeze_step;
    bool onebit_bias_correction;
} zt_optimizer_config;

void zt_optimizer_config_default(zt_optimizer_config *c); /* AdamW(0.9, 0.95, 1e-8), wd 0.1, clip 1.0 */
const char *zt_optimizer_name(zt_optimizer_kind k); /* "adamw", "sgd", "muon", "lamb", "onebit_adam" */

/* Sharding strategies (docs/strategies.md): what each rank holds between steps.
 *   ddp    parameters, gradients, optimizer state replicated; gradients all-reduced (ZeRO-0, NO_SHARD)
 *   zero1  optimizer state (and the fp32 master) sharded; gradients reduce-scattered, updated
 *          parameters all-gathered
 *   zero2  zero1 + gradients sharded: a unit's full gradients are freed once reduced (SHARD_GRAD_OP)
 *   zero3  zero2 + parameters sharded per parameter along dim 0, gathered unit by unit (FULL_SHARD)
 *   hybrid zero3 (or zero2) inside shard groups of S consecutive ranks, replicated across groups
 * All of them give bit-identical parameters for the same world size and global batch. */
typedef enum zt_strategy {
    ZT_STRATEGY_DDP = 0,
    ZT_STRATEGY_ZERO1 = 1,
    ZT_STRATEGY_ZERO2 = 2,
    ZT_STRATEGY_ZERO3 = 3,
    ZT_STRATEGY_HYBRID = 4
} zt_strategy;

const char *zt_strategy_name(zt_strategy s);
/* "ddp", "zero1", ...; ZT_ERR_USAGE lists the names on a miss. */
int zt_strategy_parse(const char *name, zt_strategy *out, zt_error *err);

typedef struct zt_comm zt_comm; /* a communicator (src/comm/comm.h) */

/* ---------------------------------------------------------------------------------------------
 * Precision: one contract, whatever the strategy (src/precision/policy.c, docs/precision.md).
 *   mode      params (master)  compute (matmul operands)  grads reduced / accumulated / stepped  moments
 *   fp32      fp32             fp32                       fp32* / fp32 / fp32                     fp32
 *   bf16      fp32             bf16                       fp32* / fp32 / fp32                     fp32
 *   bf16-low  bf16             bf16                       fp32* / fp32 / bf16                     bf16
 *   fp16      fp32             fp16                       fp32+ / fp32 / fp16 (loss-scaled)       fp32
 * * reduce may be set to bf16 (FSDP's reduce_dtype, DeepSpeed's communication_data_type): each
 *   rank's gradient and every partial sum over ranks rounded to bf16, half the bytes on the wire.
 * + reduce may be set to fp16 the same way (an overflow is an infinity the loss scaler skips).
 * Elementwise ops, layernorm statistics, softmax and the loss run in fp32 in every mode. Under
 * bf16/fp16 compute the matrices a unit declares in zt_unit_ops.reads_lp (GPT-2: Linear weights,
 * LM head, embedding tables) are read through their compute copy in every strategy; zero1/zero2
 * then keep the fp32 master sharded and replicate only the compute copies. */
typedef enum zt_precision_mode {
    ZT_PRECISION_FP32 = 0,
    ZT_PRECISION_BF16 = 1,     /* mixed: bf16 compute, fp32 master weights, gradients and moments */
    ZT_PRECISION_BF16_LOW = 2, /* bf16 parameters, gradients and moments (no fp32 master) */
    ZT_PRECISION_FP16 = 3      /* fp16 compute and gradients, fp32 master, dynamic loss scaling */
} zt_precision_mode;
typedef enum zt_dtype { ZT_DTYPE_FP32 = 0, ZT_DTYPE_BF16 = 1, ZT_DTYPE_FP16 = 2 } zt_dtype;

typedef struct zt_precision {
    zt_precision_mode mode;
    zt_dtype params;      /* what the optimizer updates and checkpoints hold (master) */
    zt_dtype compute;     /* matrix-product operands (weights and activations) */
    zt_dtype reduce;      /* gradient collectives on the wire and in the summation tree: fp32, bf16
                             in modes fp32, bf16 and bf16-low, fp16 in mode fp16 (src/comm/tree_sum.c) */
    zt_dtype accumulate;  /* gradient accumulation over micro-batches */
    zt_dtype grads;       /* the reduced gradient the optimizer reads */
    zt_dtype moments;     /* optimizer moments */
    bool stochastic_rounding; /* bf16-low: round updated parameters stochastically */
    zt_dtype attention;   /* the operands of flash attention's products (fp32 accumulation, fp32
                             softmax either way): bf16 by default under bf16 compute (bf16,
                             bf16-low), fp32 otherwise; fp32 may be asked for in every mode */
    /* fp16 loss scaling, DeepSpeed's semantics (fp16 config block) */
    float loss_scale;          /* > 0: static scale; 0: dynamic */
    int initial_scale_power;   /* dynamic: starts at 2^this (16) */
    int loss_scale_window;     /* steps without overflow before the scale doubles (1000) */
    int hysteresis;            /* overflows tolerated before the scale halves (2) */
    bool consecutive_hysteresis; /* refill the hysteresis after every good step (false) */
    float min_loss_scale;      /* the scale never goes below (1) */
} zt_precision;

/* The policy of a mode with DeepSpeed's loss-scaling defaults. */
void zt_precision_default(zt_precision *p, zt_precision_mode mode);
const char *zt_precision_mode_name(zt_precision_mode m); /* "fp32", "bf16", "bf16-low", "fp16" */
const char *zt_dtype_name(zt_dtype d);                    /* "fp32", "bf16", "fp16" */
/* "fp32", "bf16", ...; ZT_ERR_USAGE lists the names on a miss. */
int zt_precision_mode_parse(const char *name, zt_precision_mode *out, zt_error *err);
/* ZT_ERR_USAGE with the supported combinations when the policy is not one this build runs. */
int zt_precision_check(const zt_precision *p, zt_error *err);
/* One line naming each dtype: "bf16 mixed: params fp32 | compute bf16 | reduce fp32 | ..." */
void zt_precision_describe(const zt_precision *p, char *buf, size_t size);
/* NVMe offload (ZeRO-Infinity; docs/offload.md). With optimizer_dir set, the optimizer state of
 * the elements this rank updates (AdamW's m and v, SGD's momentum) lives in files
 * optimizer_dir/<run>/rank-NNNNN.<kind> instead of memory, and each step streams it through
 * buffer_count staging buffers of buffer_bytes (reading ahead, updating, writing back, all
 * overlapped). With param_dir set (zero3, and hybrid over zero3; fp32 parameters, i.e. every mode
 * but bf16-low), this rank's parameter pieces (the fp32 master) live in
 * param_dir/<run>/rank-NNNNN.param too: each unit's pieces are read (O_DIRECT, by the I/O
 * threads, param_prefetch units ahead of the unit being gathered, within param_max_live
 * elements) into a window and dropped after its all-gather, and the step streams them beside
 * the optimizer state, writing the updated pieces back as it goes. Results are bit-identical to the in-memory run in every supported mode. The
 * strings are copied by zt_engine_create. */
typedef struct zt_offload_options {
    const char *optimizer_dir;  /* an existing directory on a local disk; NULL or "": in memory */
    const char *param_dir;      /* the same for zero3's parameter pieces; NULL or "": in memory */
    int buffer_count;           /* staging buffers, >= 2; 0: 4 */
    size_t buffer_bytes;        /* bytes per staging buffer; 0: 64 MiB */
    int io_threads;             /* I/O threads; 0: 2 */
    bool buffered;              /* never O_DIRECT (default: O_DIRECT where the file system allows) */
    int param_prefetch;         /* parameter offload: units whose pieces are read ahead of the unit
                                   being gathered, in forward and in backward; 0: 1 (the default);
                                   negative: none (each gather reads its own pieces) */
    size_t param_max_live;      /* parameter offload: the read windows (pieces read or being read
                                   and not yet gathered) hold at most this many elements (floats,
                                   4 KiB alignment included); 0: no bound but the prefetch depth.
                                   Less than the largest unit's window: ZT_ERR_USAGE */
} zt_offload_options;

/* What the offload tier did since the last reset (zt_engine_offload_stats). */
typedef struct zt_offload_stats {
    uint64_t read_bytes, write_bytes; /* moved between the files and the staging buffers (writes:
                                   and, with gradient offload, backward's gradient pieces) */
    double stream_s;            /* wall time of the offloaded optimizer updates */
    double wait_s;              /* of which blocked on I/O (the part not hidden behind updates) */
    double update_s;            /* of which updating */
    int64_t streams;            /* optimizer passes over the files */
    uint64_t gather_read_bytes; /* parameter offload: pieces read for the all-gathers (not in
                                   read_bytes) */
    double gather_wait_s;       /* of the gathers, time blocked waiting for their pieces' reads
                                   (the read-ahead not hidden behind compute) */
    double grad_write_wait_s;   /* gradient offload: backward's time blocked waiting for the
                                   reduced gradient pieces' writes */
} zt_offload_stats;

typedef struct zt_engine_options {
    int B, T;                 /* micro-batch shape the activation buffers are sized for */
    uint64_t seed;            /* parameter initialization seed */
    zt_optimizer_config optim;
    /* distribution (all zero = one process) */
    zt_strategy strategy;
    zt_comm *comm;            /* the data-parallel world; NULL: single process (with mesh: set from it) */
    const struct zt_mesh *mesh; /* the parallel mesh (src/comm/mesh.h: tensor-, data-, pipeline-parallel
                                 groups); NULL: the engine builds the data-parallel one from comm and
                                 hybrid_shard_size */
    int hybrid_shard_size;    /* hybrid: S ranks per shard group (divides the world size) */
    zt_strategy hybrid_inner; /* hybrid: ZT_STRATEGY_ZERO3 (default) or ZT_STRATEGY_ZERO2 in a group */
    bool keep_params_after_forward; /* zero3: FSDP2's reshard_after_forward = false */
    int grad_accum;           /* micro-batches per rank per step (>= 1; 0 means 1) */
    bool reduce_every_micro_batch;  /* zero2/zero3 with grad_accum > 1: reduce-scatter each
                                       micro-batch into fp32 shard accumulators (memory-lean,
                                       DeepSpeed's way) instead of keeping full gradients until
                                       the last one (FSDP's no_sync). Deterministic either way,
                                       but only the deferred order is bit-identical to ddp/zero1
                                       (docs/strategies.md says why). */
    size_t bucket_bytes;      /* gradient fusion bucket size; 0 = 25 MiB */
    bool no_overlap_comm;     /* reduce inline instead of in the communication thread (DeepSpeed's
                                 overlap_comm: false; ZT_OVERLAP_COMM=0 does the same) */
    bool no_prefetch;         /* zero3: gather each unit only when it runs */
    zt_precision precision;   /* all zero = fp32 */
    zt_recompute activation_checkpointing; /* none (default), full or selective */
    zt_offload_options offload; /* NVMe tier for the optimizer state and the parameter pieces
                                   (all zero: none) */
    bool skip_nonfinite;      /* a step whose gradients are not finite is skipped (report.skipped,
                                 ZT_SKIP_NONFINITE) instead of failing with ZT_ERR_NUMERICS; fp16
                                 always skips (ZT_SKIP_OVERFLOW, its loss scaler's rule) */
    /* Pipeline parallelism (src/engine/pipeline.c; docs/parallelism.md): the model is one stage's
     * (src/shard/stages.h). All zero: no pipeline. */
    int pp_slots;             /* micro-batches this stage keeps in flight, each with its own unit
                                 outputs and saved activations (1F1B: at most the stages from this
                                 one to the last; GPipe: all of them); 0 means 1 */
    int pp_in_width;          /* > 0: the stage's first unit reads a (B, T, pp_in_width) activation
                                 received from the previous stage (one buffer per slot) and sends
                                 its gradient back (two buffers) */
    bool pp_send_out;         /* the stage's last unit's output goes to the next stage and its
                                 gradient comes back (two buffers); the stage computes no loss */
} zt_engine_options;

/* Fills the defaults: single process, ddp, AdamW defaults, 25 MiB buckets. */
void zt_engine_options_default(zt_engine_options *o);

/* Why zt_engine_step skipped an update. Every rank decides alike: the norm is global (the same
 * bits everywhere) and a requested skip comes from the caller's all-reduced decision. */
typedef enum zt_skip {
    ZT_SKIP_NONE = 0,
    ZT_SKIP_OVERFLOW,  /* fp16: the gradients overflowed at this loss scale; the scale adjusted */
    ZT_SKIP_NONFINITE, /* skip_nonfinite: NaN/Inf in the gradients */
    ZT_SKIP_REQUESTED, /* zt_engine_skip_next_step (e.g. a loss spike) */
} zt_skip;

typedef struct zt_step_report {
    double grad_norm;      /* global L2 norm before clipping */
    double clip_coef;      /* factor applied to the gradients (1 when not clipped) */
    bool finite;           /* false: non-finite gradients, the step was not applied */
    bool skipped;          /* the update was skipped on every rank (not an error), for skip_reason */
    int skip_reason;       /* a zt_skip: why skipped */
    double loss_scale;     /* fp16: the scale this step's gradients carried (1 otherwise) */
} zt_step_report;

typedef struct zt_engine zt_engine;

int zt_engine_create(zt_model *m, const zt_engine_options *opt, zt_engine **out, zt_error *err);
/* Expert parallelism's memory (docs/parallelism.md): stores m's stacked experts E/ep a rank
 * (zt_model_store_experts, part opt->mesh->ep_rank) when the engine runs them so: ep > 1, no
 * tensor parallelism, ddp, zero1..3 or hybrid (a shard group that ep divides or that divides ep)
 * with AdamW or SGD in any precision, with pipeline stages and the optimizer on NVMe, without
 * parameter offload (zt_memory_experts_whole_reason). Otherwise leaves them whole on every rank
 * (each rank still runs only its own). *stored (may be NULL) says which. Call before
 * zt_engine_create with the same options. */
int zt_engine_store_experts(zt_model *m, const zt_engine_options *opt, bool *stored, zt_error *err);
void zt_engine_free(zt_engine *e);
/* (Re)initializes every parameter from opt->seed and resets optimizer state and gradients. */
int zt_engine_init_params(zt_engine *e, zt_error *err);
/* Forward and backward of one micro-batch (batch->B <= opt.B, batch->T <= opt.T). Gradients
 * accumulate (+=) across calls until zt_engine_step. *loss is the mean per-token loss of this
 * micro-batch over its counted targets (not negative; 0 when none is), reported; the gradient is
 * scaled by batch->dloss, which for a loss over counted tokens is 1 / counted targets of the global
 * batch (zt_batch_counted of each micro-batch, summed). */
int zt_engine_forward_backward(zt_engine *e, const zt_batch *batch, float *loss, zt_error *err);
/* The targets of batch that count (not negative). */
size_t zt_batch_counted(const zt_batch *batch);
/* Forward only. With targets, *loss is the mean per-token loss over the counted targets. logits_out (optional, (V) floats)
 * receives the logits of position (b=0, t=T-1) for generation. */
int zt_engine_forward(zt_engine *e, const zt_batch *batch, float *loss, float *logits_out,
                      zt_error *err);
/* Global-norm clipping, finite check, optimizer update with learning rate lr, zero gradients.
 * A skipped update (report->skipped) leaves parameters, optimizer state and the step count as
 * they were and zeroes the gradients. */
int zt_engine_step(zt_engine *e, float lr, zt_step_report *report, zt_error *err);
/* The next zt_engine_step finishes the gradients and skips the update (ZT_SKIP_REQUESTED). Every
 * rank must ask alike (take the decision from an all-reduced value). */
void zt_engine_skip_next_step(zt_engine *e);
/* fp16's dynamic loss scaler (DeepSpeed's DynamicLossScaler, src/precision/loss_scaler.c): the
 * state a checkpoint carries so that a resumed run scales exactly as the uninterrupted one. */
typedef struct zt_loss_scaler {
    double scale;
    int cur_hysteresis;
    int64_t cur_iter, last_overflow_iter;
} zt_loss_scaler;
void zt_loss_scaler_init(zt_loss_scaler *s, const zt_precision *p);
/* After a step: overflow halves the scale (once the hysteresis is used up) and is remembered;
 * loss_scale_window good steps since the last overflow double it. */
void zt_loss_scaler_update(zt_loss_scaler *s, const zt_precision *p, bool overflow);
void zt_engine_get_loss_scaler(const zt_engine *e, zt_loss_scaler *out);
void zt_engine_set_loss_scaler(zt_engine *e, const zt_loss_scaler *in);
void zt_engine_zero_grad(zt_engine *e);

const zt_model *zt_engine_model(const zt_engine *e);
const zt_engine_options *zt_engine_options_of(const zt_engine *e);
/* Parameter idx as this rank holds it: the full tensor (ddp, zero1/zero2 under fp32 compute) or
 * this rank's dim-0 shard (zero3/hybrid, and zero1/zero2 under bf16/fp16 compute, whose fp32
 * master is sharded); *numel and *begin (optional) say which elements of the full tensor the
 * pointer covers. NULL (with *begin and *numel filled) when the parameters are not stored as
 * fp32 (bf16-low: use zt_engine_param_set / _gather). Writing through a shard of zero1/zero2
 * changes the master only; the compute copies follow at the next step (zt_engine_param_set
 * updates both). */
float *zt_engine_param_local(zt_engine *e, int idx, int64_t *begin, int64_t *numel);
/* Sets parameter idx from its full tensor (fp32, numel elements, any alignment): this rank keeps
 * its part (the whole tensor, or its dim-0 shard), in the parameters' dtype (bf16-low rounds to
 * the nearest bf16). Not a collective. ZT_ERR_USAGE for a bad index. */
int zt_engine_param_set(zt_engine *e, int idx, const float *full, zt_error *err);
/* Copies the full tensor of parameter idx into dst (gathering shards: a collective, every rank
 * of the shard group must call it in the same order). */
int zt_engine_param_gather(zt_engine *e, int idx, float *dst, zt_error *err);
/* Single-process conveniences (strategy ddp without a comm): the full tensors, in place (NULL
 * for parameters when they are not stored as fp32: bf16-low; NULL for the gradient of a frozen
 * parameter). */
float *zt_engine_param(zt_engine *e, int idx);
/* zt_engine_grad also under ddp on N ranks with 1-bit Adam past its warm-up: this rank's own
 * gradient, which the step does not reduce (its share of the sum: 1/N of its mean) */
float *zt_engine_grad(zt_engine *e, int idx);
uint64_t zt_engine_step_count(const zt_engine *e);
/* A mixture of experts' routing since the last call (which resets the counters): the tokens each
 * expert got (summed over the MoE layers, the first ZT_MOE_STATS_MAX experts), the slots dropped
 * over the capacity, and the balance: the largest over the layers of (the busiest expert's tokens /
 * the mean per expert), 1 when perfectly even. This rank's micro-batches only. Returns the MoE
 * layers that ran (0: none, or no experts; *out zeroed). */
#define ZT_MOE_STATS_MAX 64
typedef struct zt_moe_stats {
    int n_experts;
    int64_t tokens[ZT_MOE_STATS_MAX];
    int64_t dropped;
    double max_over_mean;
    /* the first unit (model order) whose router logits were not all finite (NaN or Inf) for some
     * tokens, and how many tokens there (0: none; later layers usually follow from it) */
    int64_t router_nonfinite;
    char router_nonfinite_unit[ZT_NAME_MAX];
} zt_moe_stats;
int zt_engine_moe_stats(zt_engine *e, zt_moe_stats *out);
/* Per unit: the tokens each expert took, the tokens dropped (capacity), the tokens whose router
 * logits were not finite. */
#define ZT_MOE_COUNTERS(n_experts) ((size_t)(n_experts) + 2)
/* The counters zt_engine_moe_stats reads (per unit, ZT_MOE_COUNTERS(E) each), to sum over ranks before it: NULL
 * without experts; *n their count. */
int64_t *zt_engine_moe_counters(zt_engine *e, size_t *n);
/* xxHash64 of all parameters (full tensors) in table order: two runs, or two strategies, agree
 * iff this agrees. A collective under zero3/hybrid (it gathers); same value on every rank. */
uint64_t zt_engine_param_hash(zt_engine *e);
/* The same over the frozen parameters only (training.freeze, LoRA's base weights): 0 when none is
 * frozen. A collective under sharding, like zt_engine_param_hash. */
uint64_t zt_engine_frozen_hash(zt_engine *e);
/* Bytes this rank sent and received in collectives since the last call, by kind (reduce-scatter,
 * all-gather, all-reduce, small control messages). */
typedef struct zt_comm_bytes {
    uint64_t sent_rs, sent_ag, sent_ar, sent_small;
    uint64_t recv_rs, recv_ag, recv_ar, recv_small;
    uint64_t sent_car, recv_car; /* 1-bit Adam's compressed all-reduce of the momentum (signs, scales) */
    uint64_t sent_tp, recv_tp; /* tensor parallelism: the units' collectives over the tp group (all
                                  kinds; not in the fields above) */
    uint64_t sent_pp, recv_pp; /* pipeline parallelism: this rank's point-to-point transfers to and
                                  from its neighbouring stages (activations, their gradients, a
                                  tied parameter's gradient; not in the fields above) */
    uint64_t sent_cp, recv_cp; /* context parallelism: the attention's exchanges with the other parts
                                  of the sequences (not in the fields above) */
    uint64_t sent_ep, recv_ep; /* expert parallelism: the all-to-alls of tokens to the experts' owners
                                  and back (payload and counts; not in the fields above) */
    double wait_s; /* seconds blocked in waits on collectives (all kinds) */
} zt_comm_bytes;
void zt_engine_comm_bytes(zt_engine *e, zt_comm_bytes *out, bool reset);
/* *x = the sum of every rank's *x over the data-parallel world, added in rank order (the same
 * bits on every rank). A collective; a no-op on one process. */
int zt_engine_sum_ranks(zt_engine *e, double *x, zt_error *err);
/* The same for x[0..n), 1 <= n <= 16, each element summed in rank order; `what` names the
 * collective in errors. The trainer's per-step agreement (loss, stop request) is one call. */
int zt_engine_sum_ranks_n(zt_engine *e, double *x, int n, const char *what, zt_error *err);
/* all[r * n + i] = rank r's x[i] over the data-parallel world (all: world * n doubles; on one
 * process a copy). A collective. */
int zt_engine_gather_ranks(zt_engine *e, const double *x, int n, double *all, const char *what, zt_error *err);
/* Memory classes (docs/memory.md): every buffer the engine allocates belongs to exactly one. */
typedef enum zt_mem_class {
    ZT_MEM_PARAMS = 0,       /* parameters between steps: the full tensors (ddp, zero1, zero2) or this
                                rank's pieces (zero3, hybrid); the fp32 master, or bf16-low's bf16 */
    ZT_MEM_COMPUTE_COPY = 1, /* the bf16/fp16 compute copy of the matrices (ddp, zero1, zero2; none
                                in bf16-low, whose parameters are bf16) */
    ZT_MEM_GATHERED = 2,     /* zero3: units' full parameters while gathered (+ their compute copies);
                                bf16-low: the running unit's fp32 views of its parameters */
    ZT_MEM_GRADS = 3,        /* micro-batch gradients, the summation tree, per-unit full gradients
                                in flight, the reduced pieces */
    ZT_MEM_OPTIMIZER = 4,    /* optimizer state (AdamW m and v, SGD momentum) or its I/O staging */
    ZT_MEM_ACTIVATIONS = 5,  /* units' outputs and saved buffers, scratch, the activation-gradient
                                ping-pong, d loss, low-precision operand staging */
    ZT_MEM_COMM = 6,         /* collective staging (bucket pack buffers), gradient-norm partials */
    ZT_MEM_CLASSES = 7
} zt_mem_class;

/* "params", "compute_copy", "gathered", "grads", "optimizer", "activations", "comm". */
const char *zt_mem_class_name(zt_mem_class c);

/* Bytes the engine holds per class: now, and the high-water since creation; total is the sum of
 * the classes now and peak_total the high-water of that sum (not the sum of the class peaks).
 * The named fields and the arrays are the same storage. */
typedef struct zt_memory_report {
    union {
        struct { size_t params, compute_copy, gathered, grads, optimizer, activations, comm; };
        size_t now[ZT_MEM_CLASSES];
    };
    union {
        struct {
            size_t peak_params, peak_compute_copy, peak_gathered, peak_grads, peak_optimizer,
                peak_activations, peak_comm;
        };
        size_t peak[ZT_MEM_CLASSES];
    };
    size_t total, peak_total;
} zt_memory_report;
void zt_engine_memory(const zt_engine *e, zt_memory_report *r);

/* The memory plan (src/memory/plan.c): what the engine will hold per class, computed before the
 * first step from the model, the options and (world, rank). Exact for the engine's allocations:
 * a training run's measured zt_memory_report peaks equal plan.peak (tests/memory_plan.sh). */
typedef struct zt_memory_plan {
    size_t peak[ZT_MEM_CLASSES]; /* high-water per class over training steps */
    size_t rest[ZT_MEM_CLASSES]; /* held between steps (after zt_engine_step) */
    size_t peak_total;           /* high-water of the sum of the classes */
    int world, rank;             /* what it was computed for */
    int nshards, shard;          /* the shard group's size and this rank's index in it */
    bool overlap;                /* the communication thread reduces (and gathers) */
    size_t pack_main, pack_thread;  /* bytes of the bucket staging of the two threads (in comm) */
    size_t scratch_main, scratch_thread, scratch_replica; /* reduce-scatter scratch the comms hold
                                    (src/comm): the shard group's (the world's for ddp), the
                                    communication thread's, hybrid's replica group's (in comm) */
    size_t scratch_tp;           /* ... and the tensor-parallel group's (its all-reduces; in comm) */
    size_t scratch_edp, scratch_edp_thread; /* ... and the expert-data-parallel group's and the
                                    communication thread's duplicate of it (the experts stored E/ep a
                                    rank: zt_model_store_experts; hybrid: the edp ranks of the shard
                                    group; in comm) */
    size_t scratch_edp_replica;  /* ... and hybrid's replica group of the experts' pieces (in comm) */
    size_t shm;                  /* this rank's regions of those comms' shared segments (ranks on
                                    one node: src/comm/shm.c, zt_comm_shm_bytes; in comm) */
    size_t offload_file_bytes;   /* NVMe offload: bytes this rank keeps in files (not in memory) */
    size_t offload_read_bytes;   /* ... and reads from them per training step: the optimizer
                                    pass's stream, and (parameter offload) every gather's pieces */
    size_t offload_write_bytes;  /* ... and writes per step (the stream's write-back) */
} zt_memory_plan;
/* The plan the engine computed at creation and allocates by. */
void zt_engine_memory_plan(const zt_engine *e, zt_memory_plan *out);
/* Cumulative wall time spent in a unit's forward and backward since creation or the last reset. */
void zt_engine_unit_times(const zt_engine *e, int unit, double *fwd_s, double *bwd_s);
void zt_engine_reset_times(zt_engine *e);
/* Cumulative wall time of the engine's collectives on the calling thread: bucket packing, the
 * collective, unpacking; the small exact sums (norm partials, loss). Reset with the unit times. */
double zt_engine_comm_seconds(const zt_engine *e);
/* The NVMe offload tier: one line saying where the files are and how they are read and written
 * ("" when nothing is offloaded), and the I/O done since the last reset (zeros when none). */
const char *zt_engine_offload_describe(const zt_engine *e);
void zt_engine_offload_stats(zt_engine *e, zt_offload_stats *out, bool reset);

/* ---------------------------------------------------------------------------------------------
 * Learning-rate schedule: linear warmup, then cosine or linear decay to min_lr at total_steps. */
typedef enum zt_lr_decay { ZT_LR_COSINE = 0, ZT_LR_LINEAR = 1, ZT_LR_CONSTANT = 2 } zt_lr_decay;
typedef struct zt_lr_schedule {
    float max_lr, min_lr;
    int64_t warmup_steps, total_steps;
    zt_lr_decay decay;
} zt_lr_schedule;
/* Learning rate for 0-based step. */
float zt_lr_at(const zt_lr_schedule *s, int64_t step);

#ifdef __cplusplus
}
#endif
#endif /* ZEROTRAIN_H */
