/* schedule.h - one training step as two streams, compute and communication, with the overlap
 * rules of DeepSpeed and FSDP (and zerotrain's communication thread, which follows them):
 *
 *   forward    unit u waits for its all-gather (zero3, hybrid); when u starts, u+1's all-gather
 *              is issued (prefetch of the next unit: FSDP's forward prefetch, DeepSpeed's
 *              prefetch bucket, zerotrain's overlap.c)
 *   backward   unit u waits for its all-gather again (unless parameters stay after forward);
 *              when u starts, u-1's is issued (backward prefetch); when u's backward ends, the
 *              gradients completed by it are reduced (all-reduce: ddp; reduce-scatter: zero1-3;
 *              + the all-reduce of the piece across replicas: hybrid), overlapping the backward
 *              of the units before it
 *   reduction  every micro-batch (DeepSpeed zero2/zero3, FSDP without no_sync), or only in the
 *              last (DDP's no_sync, DeepSpeed's stage 1 at the accumulation boundary, zerotrain's
 *              default)
 *   step       after the last reduction: (zerotrain's hybrid) the replicas' all-reduce of every
 *              gradient piece at once, then the optimizer on this device's piece, then (zero1,
 *              zero2) the all-gather of the updated parameters; nothing overlaps these
 * Communication runs one collective at a time, in the order issued (one stream / one thread).
 * The step time is when the last of it ends; communication is exposed for as long as compute
 * waits for it (step - compute), hidden for the rest of its duration. */
#ifndef ZT_SCALE_SCHEDULE_H
#define ZT_SCALE_SCHEDULE_H

#include <stdbool.h>

typedef struct zt_scale_timeline {
    int n_units, micro_batches;
    const double *fwd, *bwd;     /* compute seconds per unit, one micro-batch */
    const double *gather;        /* forward all-gather seconds per unit, or NULL (no sharded
                                    parameters) */
    const double *gather_bwd;    /* backward all-gather seconds per unit (NULL: gather's). A
                                    parameter two units share is gathered by the first to run it
                                    in each pass and kept until its last use there */
    const double *reduce;        /* gradient reduction seconds issued after each unit's backward */
    bool regather_backward;      /* gather again before backward (zero3's default) */
    bool reduce_every_micro_batch;
    double pre_optimizer_s;      /* collectives between the last reduction and the optimizer
                                    (zerotrain's hybrid: the replicas' all-reduce of every piece) */
    double optimizer_s;          /* the optimizer pass */
    double post_gather_s;        /* zero1/zero2: all-gather of the updated parameters */
} zt_scale_timeline;

typedef struct zt_scale_step {
    double step_s;               /* the whole step */
    double compute_s;            /* compute busy: forward + backward + optimizer */
    double comm_s;               /* the durations of every collective */
    double exposed_s;            /* step_s - compute_s: compute waiting for communication */
    double hidden_s;             /* comm_s - exposed_s */
} zt_scale_step;

/* Plays the step out. Never fails. */
zt_scale_step zt_scale_schedule(const zt_scale_timeline *t);

#endif
