/* engine_state.h - the engine as the layers that keep its state see it (checkpoints: src/ckpt/):
 * its layout (plan, pipeline stage, what is sharded, which rank writes), the optimizer state's
 * element access in any placement (memory, bf16, NVMe files), and the few values a load sets.
 * The parameters' own access is the parameter store's (param_store.h). Nothing here exposes the
 * engine's fields: ckpt/ includes this header, never engine_internal.h. */
#ifndef ZT_ENGINE_STATE_H
#define ZT_ENGINE_STATE_H

#include "zerotrain/zerotrain.h"
#include "engine/param_store.h"
#include "shard/plan.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct zt_pipeline;

/* ---- layout ----------------------------------------------------------------------------------- */
const zt_plan *zt_engine_plan(const zt_engine *e);          /* the shard plan over the shard group */
struct zt_pipeline *zt_engine_pipeline(const zt_engine *e); /* the pipeline it is a stage of, or NULL */
int zt_engine_rank(const zt_engine *e);                     /* in opt.comm (0 without) */
bool zt_engine_shards_optim(const zt_engine *e);            /* the optimizer state is pieces */
zt_comm *zt_engine_replica_comm(const zt_engine *e);        /* hybrid: ranks holding the same pieces */
int zt_engine_state_kinds(const zt_engine *e);              /* 2 AdamW (m, v), 1 SGD momentum, 0 */
bool zt_engine_in_files(const zt_engine *e);                /* some state lives in NVMe files */

/* ---- the optimizer state (offload.c). Kind 0 is exp_avg (AdamW) or the momentum (SGD), kind 1
 * exp_avg_sq; elements index the state layout. ---------------------------------------------------- */
/* The in-memory fp32 array of kind k, or NULL when it is in files, bf16, or does not exist. */
float *zt_engine_state_ptr(zt_engine *e, int k);
int zt_engine_state_read(zt_engine *e, int k, size_t begin, size_t n, float *dst, zt_error *err);
int zt_engine_state_write(zt_engine *e, int k, size_t begin, size_t n, const float *src, zt_error *err);
/* Offloaded or bf16: memory (*floats of it) to bounce checkpoint I/O through; else NULL. */
float *zt_engine_state_bounce(zt_engine *e, size_t *floats);
/* A sharded optimizer's reduced gradient pieces in the state layout, the gradient finished first
 * (NULL unsharded or on failure): what the step reads (engine.c) */
float *zt_engine_grad_pieces(zt_engine *e);

/* ---- 1-bit Adam's error feedback (onebit.c): per rank, saved per rank ------------------------- */
/* This rank's worker error (*worker_floats) and server error (*server, *server_floats), or NULL
 * (and zeros) when there are none (one rank, another optimizer). */
float *zt_engine_onebit_errors(zt_engine *e, size_t *worker_floats, float **server, size_t *server_floats);
int zt_engine_dp_size(const zt_engine *e); /* ranks of the data-parallel group (1 without) */
/* hybrid: the shard group's size (the errors are per piece, the pieces per shard group); 0 ddp */
int zt_engine_onebit_shard_group(const zt_engine *e);

/* ---- set by a load ------------------------------------------------------------------------------ */
void zt_engine_set_step(zt_engine *e, uint64_t step);       /* the optimizer's step count */

#endif
