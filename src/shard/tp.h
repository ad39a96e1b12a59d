/* tp.h - tensor parallelism applied to a model from outside it (torchtitan's parallelize_module,
 * Megatron-LM's column/row-parallel layers): which parameters are cut, along which dimension, and
 * the map between a part's elements and the logical tensor's.
 *
 * zt_tp_apply rewrites a model in place for part `part` of `parts`: each split parameter's shape
 * becomes its part (zt_param_desc.logical_shape keeps the whole), and each unit learns how many
 * parts its heads, MLP width and vocabulary are cut into (zt_unit.tp_parts, vocab_begin/rows).
 * The units' code is the same code; it sizes its buffers from those fields and asks the engine's
 * group (zt_unit_args.group) for the sums (docs/parallelism.md). The styles, per family
 * (tp_plans.c):
 *
 *   column   dim 0 (output features) cut: QKV, the MLP's up/gate projections, with their biases;
 *            GPT-2's fused c_attn is 3 blocks (q, k, v), each cut alike, so a part holds whole heads
 *   row      dim 1 (input features) cut: the attention output and the MLP's down projection; their
 *            products are partial sums (the group's sum); a bias stays whole and is added once
 *   vocab    dim 0 of an embedding / LM head cut into near-equal row ranges (the vocabulary need
 *            not divide: 50257 over 2 is 25129 + 25128 rows)
 *   whole    everything else (norms, position embedding, row-parallel biases): replicated, the
 *            same bits on every part
 *
 * Ranges: a dimension of extent E cut into P parts gives part p the range [begin, begin + count)
 * with count = E/P + (p < E%P) (zt_tp_range), so parts differ by at most one row. */
#ifndef ZT_SHARD_TP_H
#define ZT_SHARD_TP_H

#include "zerotrain/zerotrain.h"

/* Part p of P of an extent: [*begin, *begin + *count). */
void zt_tp_range(int64_t extent, int parts, int part, int64_t *begin, int64_t *count);

/* Rewrites m for part `part` of `parts` (parts 1: nothing changes). With m->sequence_parallel
 * (Megatron-LM's sequence parallelism) each unit also gets seq_parts = parts, and every unit's
 * output but the last (the per-token losses) out_width / parts: it holds its part's range of the T
 * positions (zt_unit_group.seq_range). Call once, after the model is
 * built and before zt_engine_create. ZT_ERR_USAGE when the model cannot be split that way (its
 * tp_check: heads, key/value heads, MLP width), its family has no plan, or it has LoRA adapters
 * (not cut yet); the message names the numbers. */
int zt_tp_apply(zt_model *m, int parts, int part, zt_error *err);

/* The experts stored E/ep a rank (zt_param_desc.ep_parts > 1): ep part q's range of whole experts
 * as a tensor of its own, tensor parallelism's cut (if any) kept, its blocks the range's; *row0 its
 * first row in p's logical tensor. For any other parameter *p and 0. The functions below see p
 * through it with q = p->ep_part: a part is tp part `part` of this process's ep part (the whole
 * ep part without tp), placed at that part's rows of the logical tensor. */
zt_param_desc zt_tp_ep_view(const zt_param_desc *p, int q, int64_t *row0);

/* Elements of parameter p's part `part` (p->tp_part's is p->numel). */
int64_t zt_tp_part_numel(const zt_param_desc *p, int part);

/* Calls fn(ctx, local, logical, len) for the runs of part `part` of p that cover its elements
 * [begin, begin + n) in order: elements local..local+len of the part are elements
 * logical..logical+len of the logical tensor. A whole parameter is one run. Stops at and
 * returns fn's first non-zero result. */
typedef int (*zt_tp_run_fn)(void *ctx, int64_t local, int64_t logical, int64_t len);
int zt_tp_runs(const zt_param_desc *p, int part, int64_t begin, int64_t n, zt_tp_run_fn fn, void *ctx);

/* logical (p->logical_numel floats) <- part `part`'s elements `local` (zt_tp_part_numel), placed
 * by zt_tp_runs; and the other way round. */
void zt_tp_place(const zt_param_desc *p, int part, const float *local, float *logical);
void zt_tp_take(const zt_param_desc *p, int part, const float *logical, float *local);

/* The plan rows of a family (tp_plans.c): how a parameter whose name ends with `suffix` is cut. */
typedef enum zt_tp_style { ZT_TP_WHOLE = 0, ZT_TP_COLUMN, ZT_TP_ROW, ZT_TP_VOCAB } zt_tp_style;
typedef struct zt_tp_rule {
    const char *suffix;
    zt_tp_style style;
    int blocks; /* column: dim 0 is this many equal blocks, each cut alike (fused QKV: 3; 0: the
                   parameter's norm blocks, a mixture's stacked experts); else 1 */
} zt_tp_rule;
/* The rules of model family `name` ("gpt2", "llama"), or NULL; *n gets their count. */
const zt_tp_rule *zt_tp_plan_of(const char *name, int *n);

#endif
