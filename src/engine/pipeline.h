/* pipeline.h - pipeline parallelism (Megatron-LM's and DeepSpeed's pipeline engines): this rank is
 * one stage of consecutive units (src/shard/stages.h) and its engine runs only them; the step's
 * micro-batches (gradient accumulation's) go through the stages on a schedule, activations going
 * forward and their gradients back point to point over the mesh's pipeline group.
 *
 * Schedules (docs/parallelism.md), for p stages and m micro-batches, stage s:
 *   gpipe  F0 .. F(m-1), then B0 .. B(m-1): every micro-batch in flight (m slots)
 *   1f1b   PipeDream-flush: min(p-s-1, m) warm-up forwards, then one forward and one backward
 *          alternately, then the remaining backwards: at most p-s micro-batches in flight
 * Backwards run in micro-batch order on every stage, so each stage's gradient accumulation adds
 * the micro-batches in the fixed pairwise tree of engine/grads.c, and the norm sums every stage's
 * fixed chunks in the whole model's order: with untied weights a pipeline run has the one-process
 * run's bits. Each transfer's receive is posted before the compute that precedes its use, so it
 * overlaps that compute; sends are non-blocking and waited for only before their buffer is reused.
 *
 * The bubble: a stage's time in the step that is not forward or backward compute, over the step;
 * zt_pipeline_bubble reports it beside the schedule's (p-1)/(m+p-1). */
#ifndef ZT_ENGINE_PIPELINE_H
#define ZT_ENGINE_PIPELINE_H

#include "zerotrain/zerotrain.h"
#include "comm/mesh.h"
#include "shard/stages.h"

typedef enum zt_pp_schedule { ZT_PP_1F1B = 0, ZT_PP_GPIPE = 1 } zt_pp_schedule;

typedef struct zt_pipeline zt_pipeline;

/* The cut of `full` into mesh->pp stages: parallel.pipeline_stages' list when `given` is not
 * empty, else balanced by the per-unit bytes with the schedule's in-flight micro-batches. */
int zt_pipeline_cut(const zt_model *full, int stages, const char *given, int B, int T, int lp_kind, int micro,
                    zt_pp_schedule sched, zt_pp_cut *cut, zt_error *err);
/* Micro-batches stage s keeps in flight (the slots its engine needs). */
int zt_pipeline_slots(zt_pp_schedule sched, int stages, int s, int micro);
/* The engine options a stage's engine needs (pp_slots, pp_in_width, pp_send_out). */
void zt_pipeline_engine_options(const zt_model *full, const zt_pp_cut *cut, int s, zt_pp_schedule sched, int micro,
                                zt_engine_options *eo);
/* Attaches the pipeline to e, the engine of stage mesh->pp_rank built on the stage model whose
 * parameters map[] indexes (zt_pp_stage_model). full must outlive it. Collective over the world. */
int zt_pipeline_create(zt_engine *e, const zt_model *full, const zt_pp_cut *cut, const int *map,
                       const zt_mesh *mesh, zt_pp_schedule sched, zt_pipeline **out, zt_error *err);
void zt_pipeline_free(zt_pipeline *p);

/* Forward and backward of the step's m micro-batches mb[0..m) (each with its dloss; the engine
 * sets the dropout keys) on the schedule. losses[j] (m) = micro-batch j's mean loss on the last
 * stage, 0 elsewhere. Then zt_engine_step as without a pipeline. */
int zt_pipeline_train(zt_pipeline *p, const zt_batch *mb, int m, float *losses, zt_error *err);
/* Evaluation forward of one micro-batch through every stage: *loss on every stage. */
int zt_pipeline_forward(zt_pipeline *p, const zt_batch *b, float *loss, zt_error *err);
/* The whole model's parameter k (full's index) as a logical tensor into dst, on stage 0 (the
 * other stages send theirs there); every rank calls it for the same k. */
int zt_pipeline_param_gather(zt_pipeline *p, int k, float *dst, zt_error *err);
/* xxHash64 of the whole model's parameters in full's order (zt_engine_param_hash's bits for the
 * same values), on every rank. */
int zt_pipeline_param_hash(zt_pipeline *p, uint64_t *hash, zt_error *err);
/* Measured bubble fraction of this stage over the steps so far (the first excluded when there
 * were more), and the schedule's (p-1)/(m+p-1). */
void zt_pipeline_bubble(const zt_pipeline *p, double *measured, double *theory);
/* The comm the stage's transfers go over (their byte counters: zt_p2p_bytes). */
zt_comm *zt_pipeline_link(const zt_pipeline *p);
/* Checkpoints (src/ckpt/checkpoint.c) see the whole model: its descriptor, the stage's parameter
 * i's index in it, whether this stage writes parameter i (its owner; a copy is written by the
 * owner). */
const zt_model *zt_pipeline_full_model(const zt_pipeline *p);
int zt_pipeline_full_index(const zt_pipeline *p, int i);
bool zt_pipeline_writes(const zt_pipeline *p, int i);
/* The stage that owns (writes) the whole model's parameter k. */
int zt_pipeline_owner(const zt_pipeline *p, int k);
const char *zt_pp_schedule_name(zt_pp_schedule s);

#endif
