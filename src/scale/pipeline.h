/* pipeline.h - the scale model's pipeline parallelism: the model's units cut into pp stages of
 * consecutive units (the embedding with the first L/pp blocks, L/pp blocks each in between, the
 * last L/pp with the head: Megatron-LM's default cut, pp dividing the L blocks), the schedules'
 * bubble, the activations sent between stages, and a stage's memory.
 *
 * Time (1F1B and GPipe alike; docs/scale.md): with m micro-batches and c_s the seconds stage s
 * spends on one micro-batch's forward and backward (tp all-reduces included), the pipeline's
 * compute takes  sum_s c_s + (m - 1)·max_s c_s,  which with equal stages is (m + p - 1)·c: the
 * slowest stage is busy m·c and idle (p - 1)·c, the bubble, a fraction (p - 1)/(m + p - 1) of
 * the pipeline. Between stages each micro-batch sends its (B, T, C) activation forward and its
 * gradient back: 2·(m + p - 1) transfers on the critical path (Megatron's blocking
 * send-and-receive in 1F1B's steady state), over the intra-node link when a stage's devices
 * share a node with the next stage's, else over the node's NICs shared by its devices.
 *
 * Memory: the engine's plan of the stage's own units and parameters with its micro-batches in
 * flight: stage s keeps the activations of min(p - s, m) micro-batches under 1F1B (the first
 * stage: p) and of all m under GPipe (see zt_scale_stage_memory). */
#ifndef ZT_SCALE_PIPELINE_H
#define ZT_SCALE_PIPELINE_H

#include "memory/plan.h"

typedef enum zt_scale_pp_schedule { ZT_SCALE_1F1B = 0, ZT_SCALE_GPIPE = 1 } zt_scale_pp_schedule;
const char *zt_scale_pp_schedule_name(zt_scale_pp_schedule s); /* "1f1b", "gpipe" */

/* The blocks of m (units with layer >= 0). */
int zt_scale_blocks(const zt_model *m);
/* Stage s of pp runs units [*first, *end). ZT_ERR_USAGE when pp does not divide the blocks (the
 * message names --pp and the block count) or pp < 1. */
int zt_scale_stage_units(const zt_model *m, int pp, int s, int *first, int *end, zt_error *err);
/* (p - 1) / (m + p - 1) */
double zt_scale_bubble_fraction(int pp, int micro_batches);
/* Micro-batches stage s keeps in flight: 1F1B min(pp - s, m), GPipe m. */
int zt_scale_in_flight(zt_scale_pp_schedule sch, int pp, int s, int micro_batches);
/* sum_s per_stage[s] + (m - 1)·max_s per_stage[s]; *slowest gets the argmax. */
double zt_scale_pipeline_seconds(const double *per_stage, int pp, int micro_batches, int *slowest);

/* Units [first, end) of m as a model of their own (*view: its own parameter and unit arrays, the
 * rest m's; free with zt_scale_view_free), a stage's, its experts stored E/ep a device where the
 * engine stores them under o (zt_memory_experts_for: their parameters El experts, their
 * shard group the expert-data-parallel ranks; pipeline stages too, each over its own ep group).
 * ZT_ERR_NOMEM naming the stage. */
int zt_scale_stage_view(const zt_model *m, int first, int end, const zt_engine_options *o, zt_model *view,
                        zt_error *err);
void zt_scale_view_free(zt_model *view);

/* Bytes stage s = units [first, end) of pp needs at its high-water on the data-parallel rank
 * needing the most: the engine's memory plan (memory/estimate.h, zt_estimate_peak over `dp` ranks
 * under o) of the stage as a model of its own (its units and the parameters they list: a
 * parameter two stages list, GPT-2's tied wte, is held by both), plus the activations of its
 * other micro-batches in flight, (k - 1)·acts (acts: each unit's output and the saved floats it
 * keeps under o's checkpointing, memory/plan.c's rule), plus the buffers between stages: a stage
 * after the first holds k received activations and 2 gradient buffers, one before the last 2 for
 * what it sends, each (B, T, C) fp32 (the pipeline engine's). pp 1: the whole model's plan. The
 * experts as zt_scale_stage_view stores them. */
int zt_scale_stage_memory(const zt_model *m, const zt_engine_options *o, const zt_memory_plan_options *po, int dp,
                          int pp, int stage, int first, int end, int in_flight, size_t *bytes, zt_error *err);

#endif
