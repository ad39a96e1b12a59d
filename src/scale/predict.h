/* predict.h - the scale model's answer for one strategy on one cluster: step time, tokens/s per
 * device, MFU, memory per device (the engine's memory plan, memory/estimate.h, so the numbers are
 * estimate-memory's), and communication exposed and hidden. It joins compute.h (seconds per unit),
 * collective.h (seconds per collective) and schedule.h (the overlap of the two).
 *
 * What each strategy communicates, per unit u with P_u parameters gathered (a parameter two units
 * share: by the first to run it in each pass) and R_u parameters whose gradients complete in u's
 * backward (a tied embedding's, in the first unit), gather bytes g per element, reduce bytes r
 * per element, N devices:
 *   ddp     all-reduce R_u·r over N after u's backward (last micro-batch)
 *   zero1   reduce-scatter R_u·r over N (last micro-batch); after the optimizer, all-gather of
 *           every parameter P·g over N
 *   zero2   as zero1, the reduce-scatter every micro-batch under the GPU frameworks' rules
 *   zero3   all-gather P_u·g over N before u's forward and again before its backward;
 *           reduce-scatter R_u·r over N after u's backward
 *   hybrid  zero3 inside shard groups of S consecutive devices; after the reduce-scatter, the
 *           all-reduce of the R_u/S piece across the N/S replicas (ranks S apart): per unit under
 *           FSDP (nccl), all pieces at once after the last reduce-scatter in zerotrain's engine
 * The optimizer updates P (ddp), P/N (zero1-3) or P/S (hybrid) parameters per device.
 * A mixture's experts spread over ep devices and stored E/ep a device (where the engine stores
 * them: zt_memory_experts_storable; not hybrid) are El = E/ep experts a device, and every
 * collective above runs for them over the expert-data-parallel group (D/ep ranks, ep·tp devices
 * apart) instead, after the dense parameters' over the D ranks: ddp's all-reduce of El experts'
 * gradients over D/ep, zero1-3's reduce-scatter and gathers likewise. The all-to-alls: ep_comm.h.
 *
 * Tensor, context and pipeline parallelism (docs/scale.md): the N devices are pp stages x D
 * data-parallel ranks x tp parts (the engine's mesh, tp innermost), D including the cp parts of
 * each sequence (the engine shards and reduces over dp x cp). With cp parts every device runs a
 * part's T/cp positions (compute.h), the cp exchanges (cp_comm.h) are added to the blocks, the
 * memory plan is a part's, and a device's tokens per step are B·T·m/(tp·pp·cp). The model is the tp-cut part (zt_tp_apply:
 * the caller cuts it and computes `compute` on the cut model), so P above is a part's and each
 * strategy's groups are the D ranks of a stage at stride tp (hybrid: S of them, S dividing D).
 * The tp all-reduces (tp_comm.h) are added to the units' compute, on the critical path; with pp
 * stages (pipeline.h) the slowest stage's step is played out (its units, its parameters, m
 * micro-batches) and the pipeline's bubble and point-to-point transfers are added to it. Memory:
 * the plan of the cut model over the D ranks (estimate-memory --tp), and with pp the stage
 * needing the most (zt_scale_stage_memory).
 *
 * Two profiles of who runs the collectives: `nccl` (GPUs under FSDP / DeepSpeed: ring and tree
 * collectives, parameters gathered in the compute dtype, zero2/zero3/hybrid reduce every
 * micro-batch) and `zerotrain` (this engine over MPI, `--gpu cpu`: pairwise collectives,
 * parameters gathered in fp32 as the engine does, reductions in the last micro-batch, hybrid's
 * replica all-reduce at the step). */
#ifndef ZT_SCALE_PREDICT_H
#define ZT_SCALE_PREDICT_H

#include "memory/plan.h"
#include "scale/collective.h"
#include "scale/compute.h"
#include "scale/pipeline.h"
#include "scale/schedule.h"

typedef enum zt_scale_profile { ZT_SCALE_NCCL = 0, ZT_SCALE_ZEROTRAIN = 1 } zt_scale_profile;

typedef struct zt_scale_cluster {
    int nodes, per_node;
    zt_scale_net net;             /* links; net.algo follows the profile */
    zt_scale_profile profile;
} zt_scale_cluster;

typedef struct zt_scale_request {
    const zt_model *model;
    const zt_scale_compute *compute; /* of model on the device, B x T, precision, checkpointing */
    const zt_scale_device *device;
    zt_scale_cluster cluster;
    zt_engine_options opt;        /* B, T, grad_accum, precision (reduce dtype), checkpointing,
                                     keep_params_after_forward: what the memory plan gets too */
    zt_memory_plan_options plan;
    int tp, pp;                   /* tensor-parallel parts (the model is cut so), pipeline stages;
                                     0 means 1; opt.grad_accum is the pipeline's micro-batches;
                                     context parallelism is the model's (zt_model_cp_parts), opt.T
                                     the whole sequence */
    zt_scale_pp_schedule pp_schedule;
} zt_scale_request;

typedef struct zt_scale_row {
    zt_strategy strategy;
    int shard;                    /* hybrid: S; zero1-3: the data-parallel ranks D; ddp: 1 */
    int tp, pp, cp, dp, micro_batches; /* dp: the data-parallel ranks a stage's strategy shards
                                     over (dp x cp, as the engine's dp_cp group) */
    zt_scale_step step;           /* step_s = compute + exposed + bubble; exposed includes the tp
                                     all-reduces and the pipeline's transfers */
    double bubble_s;              /* the slowest stage idle in the pipeline's fill and drain */
    double tp_s, p2p_s;           /* tp all-reduces and pipeline transfers on the critical path */
    double tp_bytes;              /* bytes a device sends in its tp group per step */
    double cp_s, cp_bytes;        /* cp exchanges on the critical path; bytes a device sends in its
                                     cp group per step */
    int ep;                       /* expert parallelism's ep (1: none) */
    double ep_s, ep_bytes;        /* ep all-to-alls on the critical path; bytes a device sends in its
                                     ep group per step (ep_comm.h) */
    int edp;                      /* the experts stored E/ep a device: the expert-data-parallel ranks
                                     (dp / ep) their gradients are reduced over; 1: none or whole */
    double edp_reduce_bytes;      /* bytes a device sends in that reduction per step */
    double tokens_per_s;          /* per device */
    double mfu;
    size_t memory;                /* the plan's high-water of the device needing the most */
    bool fits;                    /* memory <= the device's */
    double node_out_bytes;        /* bytes each node sends to other nodes per step */
    double gather_bytes_per_elem, reduce_bytes_per_elem;
} zt_scale_row;

/* Predicts one row: strategy (and for hybrid the shard size S, dividing N). ZT_ERR_USAGE from the
 * memory plan names the strategy; ZT_ERR_NOMEM. */
int zt_scale_predict(const zt_scale_request *rq, zt_strategy strategy, int S, zt_scale_row *out, zt_error *err);

#endif
