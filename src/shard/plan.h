/* plan.h - who owns which rows of which parameter: the per-parameter dim-0 shard plan (FSDP2's
 * layout). Every parameter's rows are split into `nshards` contiguous ranges whose boundaries are
 * multiples of a granule of rows chosen so that each shard starts on a ZT_NORM_CHUNK-element
 * boundary of the parameter. Then the gradient norm, which is summed per fixed chunk of each
 * parameter and then over the chunks in order, has the same bits however the parameter is
 * sharded (see zt_plan_norm_* and src/optim/clip.c). Shards may be uneven or empty (a small
 * parameter can live on one rank); the plan never pads.
 *
 * Layouts: the "full" layout is the single-process one (each parameter whole, 64-byte aligned,
 * table order). The "shard" layout of rank r holds r's rows of every parameter, in table order,
 * each piece 64-byte aligned. The gradient layouts ("gfull", "gshard") are the same over the
 * trainable parameters only (zt_param_desc.trainable): gradients and optimizer state live there, so
 * a frozen parameter has neither. A parameter the store keeps quantized (zt_param_desc.quant) takes
 * no room in any of them (its offsets are where the next parameter starts): its bytes are the
 * store's quantized placement (src/engine/param_quant.c).
 *
 * Shard groups: a parameter names the ranks its pieces are spread over (zt_param_desc.shard_group):
 * the data-parallel group (every dense parameter) or the expert-data-parallel one (a mixture's
 * experts stored E/ep a rank: the ranks holding the same experts). Each group has its own size and
 * this rank's index in it (zt_plan_group); a parameter's row_begin has its group's nshards + 1
 * boundaries, and its piece in the shard layouts is its group's shard's rows. zt_plan.nshards and
 * zt_plan.shard are the data-parallel group's.
 *
 * Norm blocks: a parameter whose dim 0 is norm_blocks equal blocks (zt_param_desc.norm_blocks: a
 * mixture's experts stacked) has its chunks restart at each block: block b's chunks are
 * [b·cpb, (b+1)·cpb) of the parameter's (cpb = the chunks of one block, the last one short), so
 * a block's partial sums are the same whoever holds the block. Shard boundaries fall on chunk
 * boundaries of their block (zt_plan_rows). */
#ifndef ZT_PLAN_H
#define ZT_PLAN_H

#include "zerotrain/zerotrain.h"

#define ZT_NORM_CHUNK 1024 /* elements per gradient-norm partial sum */

typedef struct zt_param_plan {
    int64_t rows, row_len;   /* dim 0, and numel / dim 0 */
    int64_t gnumel;          /* the floats of its gradient as units write it: numel, or with the
                                experts stored E/ep a part (zt_param_desc.ep_parts) ep x
                                numel, the stored gradient then ep - 1 slots for the other source
                                parts' partials (model/llama_moe_ep.c, zt_unit_args.grad_slots) */
    size_t gslot;            /* ... those slots' offset in the gradient buffers' slot region (after
                                the gradient layout: zt_plan_gslot_off) */
    int blocks;              /* norm blocks along dim 0 (>= 1; zt_param_desc.norm_blocks) */
    int group;               /* its zt_shard_group (zt_param_desc.shard_group) */
    int nshards, shard;      /* its group's size and this rank's index in it */
    int64_t *row_begin;      /* (nshards + 1) boundaries: shard s owns rows [row_begin[s], row_begin[s+1]) */
    size_t full_off;         /* float offset in the full layout */
    size_t shard_off;        /* float offset of this rank's piece in its shard layout */
    size_t gfull_off, gshard_off; /* the same in the gradient layouts (trainable parameters only;
                                     a frozen parameter's is where the next one starts, 0 floats) */
    int owner_unit;          /* the first unit that lists this parameter */
    int last_fwd_unit;       /* the last unit (forward order) that lists it */
    bool no_room;            /* QLoRA's quantized base: no room in any fp32 layout (engine/param_quant.c) */
} zt_param_plan;

/* A shard group: its size and this rank's index in it. */
typedef struct zt_plan_group {
    int nshards, shard;
} zt_plan_group;

typedef struct zt_plan {
    int nshards, shard;      /* the data-parallel group's size and this rank's index in it */
    zt_plan_group groups[ZT_SHARD_GROUP_COUNT]; /* each zt_shard_group's */
    int n_params;
    zt_param_plan *p;
    size_t full_floats;      /* floats in the full layout */
    size_t shard_floats;     /* floats in this rank's shard layout */
    size_t gfull_floats, gshard_floats; /* floats in the gradient layouts (= full_floats and
                                           shard_floats when nothing is frozen) */
    size_t gslot_floats;     /* the experts stored E/ep a part: their source slots (0 without) */
    size_t gbuf_floats;      /* a full gradient buffer: the gradient layout, then the slot region */
    int64_t norm_chunks;     /* chunks over all parameters (a parameter's last chunk may be short) */
} zt_plan;

/* Shard s's rows [*begin, *end) of a parameter of `rows` rows of row_len elements in `blocks`
 * norm blocks (1: none) among nshards (end may be NULL): the plan's boundaries, a pure function of
 * the shape (checkpoints compute another tensor-parallel part's rows with it). A shard holds whole
 * granules: the fewest rows of a block whose elements are whole chunks (a block's last granule
 * may be short), granules dealt out evenly. ZT_ERR_USAGE-free: blocks must divide rows (the
 * plan checks it). */
void zt_plan_rows(int64_t rows, int64_t row_len, int blocks, int nshards, int s, int64_t *begin, int64_t *end);
/* Builds the plan of model m for shard index `shard` of `nshards`, every shard group that group
 * (callers that know no other group: the expert-data-parallel parameters sharded like the rest). */
int zt_plan_create(const zt_model *m, int nshards, int shard, zt_plan *plan, zt_error *err);
/* ... with each zt_shard_group's size and this rank's index (groups[ZT_SHARD_GROUP_COUNT]).
 * ZT_ERR_USAGE naming the group or parameter for a shard outside its group, or norm blocks that do
 * not divide a parameter's dim 0. */
int zt_plan_create_groups(const zt_model *m, const zt_plan_group *groups, zt_plan *plan, zt_error *err);
void zt_plan_free(zt_plan *plan);
/* Makes the gradient layouts the parameter layouts again (frozen parameters keep slots, which
 * stay zero): for parameter offload, whose stream walks the pieces and the optimizer state with
 * one offset. */
void zt_plan_keep_frozen_slots(zt_plan *plan);
/* Lays the pieces out again, each starting on a multiple of `align` floats (a power of two) in the
 * shard layout and in the gradient one (which keep_frozen_slots made the same): parameter offload,
 * whose files are read and written piece by piece with O_DIRECT (4 KiB: align 1024). */
void zt_plan_align_pieces(zt_plan *plan, size_t align);

/* Where parameter i's source slots start in a full gradient buffer (gnumel > numel only) */
static inline size_t zt_plan_gslot_off(const zt_plan *pl, int i) { return pl->gfull_floats + pl->p[i].gslot; }

/* Elements of parameter i held by shard s, and their offset inside the full tensor. */
static inline int64_t zt_plan_shard_numel(const zt_plan *pl, int i, int s) {
    const zt_param_plan *p = &pl->p[i];
    return (p->row_begin[s + 1] - p->row_begin[s]) * p->row_len;
}
static inline int64_t zt_plan_shard_begin(const zt_plan *pl, int i, int s) {
    return pl->p[i].row_begin[s] * pl->p[i].row_len;
}

/* Bucket splitting (Horovod's tensor fusion), shared by the engine's collectives (collect.c) and
 * the memory plan: the bucket that starts at params[first] holds whole parameters while their
 * elements fit in limit_floats (a parameter larger than that is a bucket of its own). Returns the
 * index one past its last parameter (> first when first < n). */
int zt_plan_bucket_end(const zt_model *m, const int *params, int n, int first, size_t limit_floats);
/* The parameters of params[0..n) whose shard group is g, in their order, into out (n room);
 * returns their count. A bucket holds one group's parameters: its collective runs on that
 * group's ranks (the engine's collectives and the memory plan walk the groups in order). */
int zt_plan_group_params(const zt_plan *pl, const int *params, int n, int g, int *out);

/* Gradient norm support: chunk partial sums of squares. For parameter i, shard s's piece covers
 * chunks [first, first + count) of the parameter's chunks (global chunk indices, all parameters
 * in table order). */
void zt_plan_norm_chunks(const zt_plan *pl, int i, int s, int64_t *first, int64_t *count);
/* Chunks of parameter i (its blocks' chunks together); of a parameter as the model declares it
 * (a plan of its model counts the same). */
int64_t zt_plan_param_chunks(const zt_plan *pl, int i);
int64_t zt_plan_desc_chunks(const zt_param_desc *d);
/* zt_plan_norm_chunks given parameter i's first chunk `base` (no scan over the parameters before it) */
void zt_plan_norm_chunks_at(const zt_plan *pl, int i, int s, int64_t base, int64_t *first, int64_t *count);
/* Run k (0, 1, ...) of shard s's piece of parameter i that lies in one norm block: elements
 * [*at, *at + *n) of the piece, whose chunks (ZT_NORM_CHUNK elements each, the run's last one
 * possibly short) are the norm partials from index *chunk on; the caller sums each run as one
 * chunked array (optim's zt_chunk_sum_squares). false past the last run (an empty piece has none;
 * a parameter of one block, one). */
bool zt_plan_piece_run(const zt_plan *pl, int i, int s, int k, int64_t *at, int64_t *n, int64_t *chunk);

#endif
