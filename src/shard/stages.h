/* stages.h - pipeline parallelism applied to a model from outside it (Megatron-LM's and
 * DeepSpeed's pipeline stages): the model's units (embedding, blocks, head) cut into pp stages of
 * consecutive units, and the stage model one rank runs: only its units and the parameters they
 * list, in the whole model's table order, with the same names (so the counter-based init, the
 * checkpoints' logical tensors and the weights files see the same tensors). The model code never
 * learns its stage: the engine hands the first unit of a later stage the activation received from
 * the stage before (zt_unit_args.in), exactly as it would hand it the previous unit's output.
 *
 * Balance: each unit costs the bytes it makes its stage hold per micro-batch in flight and per
 * parameter (zt_pp_unit_costs: parameters, gradients and AdamW state of the parameters it owns,
 * 16 bytes each, plus its output and saved activations, 4 bytes a float, times the in-flight
 * micro-batches its stage keeps); zt_pp_balance cuts the sequence into stages minimizing the
 * largest stage's cost (the linear-partition problem, solved exactly). parallel.pipeline_stages
 * ("2,3,1": units per stage) gives the cut instead.
 *
 * A parameter listed by units of two stages (GPT-2's wte: the embedding on the first stage, the
 * tied LM head on the last) is held by both (Megatron-LM's embedding group): it belongs to the
 * first stage that lists it (its owner: the gradient norm counts it there) and the others hold a
 * copy whose gradient is summed with the owner's before the update (src/engine/pipeline.c). */
#ifndef ZT_SHARD_STAGES_H
#define ZT_SHARD_STAGES_H

#include "zerotrain/zerotrain.h"

#define ZT_PP_MAX_STAGES 64

typedef struct zt_pp_cut {
    int stages;
    int first[ZT_PP_MAX_STAGES + 1]; /* stage s runs units [first[s], first[s + 1]) */
} zt_pp_cut;

/* cost[u] for every unit of m at micro-batch B x T under compute lp_kind (bytes). */
void zt_pp_unit_costs(const zt_model *m, int B, int T, int lp_kind, int in_flight, double *cost);
/* The cut of n units into `stages` consecutive non-empty runs minimizing the largest run's sum of
 * cost (ties: the earliest such cut). ZT_ERR_USAGE when stages > n or stages > ZT_PP_MAX_STAGES. */
int zt_pp_balance(const double *cost, int n, int stages, zt_pp_cut *cut, zt_error *err);
/* The cut a "2,3,1" list gives (parallel.pipeline_stages): ZT_ERR_USAGE naming the key and the
 * numbers unless it has `stages` positive counts that sum to n. */
int zt_pp_parse_cut(const char *list, int n, int stages, zt_pp_cut *cut, zt_error *err);

/* The stage model of stage s: its units (ops, configuration and widths as in m) and the parameters
 * they list, in m's table order. map[k] (caller's array of m->n_params ints) = the stage's index of
 * m's parameter k, or -1. m must outlive the stage model (its units read m's configuration). */
int zt_pp_stage_model(const zt_model *m, const zt_pp_cut *cut, int s, zt_model **out, int *map, zt_error *err);
/* Whether stage s holds m's parameter k: one of its units lists it, or it is a LoRA adapter of a
 * weight the stage holds (the stage model's parameters, zt_pp_stage_model). */
bool zt_pp_stage_holds(const zt_model *m, const zt_pp_cut *cut, int s, int k);
/* The stage whose units first list m's parameter k (its owner). */
int zt_pp_param_owner(const zt_model *m, const zt_pp_cut *cut, int k);
/* "2 stages: units 0-2 (embedding .. h.1), 3-4 (h.2 .. head)" */
void zt_pp_describe(const zt_model *m, const zt_pp_cut *cut, char *buf, size_t cap);

#endif
