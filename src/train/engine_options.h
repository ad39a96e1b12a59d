/* engine_options.h - the configuration turned into what the engine is created with (engine_options.c):
 * the one place a zt_train_config becomes zt_engine_options, the mesh's sizes and the pipeline's
 * schedule, for zerotrain train, zerotrain estimate-memory and zerotrain bench alike (bench says its
 * flags as a configuration first). */
#ifndef ZT_TRAIN_ENGINE_OPTIONS_H
#define ZT_TRAIN_ENGINE_OPTIONS_H

#include "comm/mesh.h"
#include "config/train_config.h"
#include "engine/pipeline.h"

/* The engine options a configuration gives on `world` ranks (comm: the world, used when world > 1):
 * what zt_train creates its engine with, and what `zerotrain estimate-memory CONFIG` plans. */
void zt_train_engine_options(const zt_train_config *cfg, int world, zt_comm *comm, zt_engine_options *eo);

/* The mesh's sizes (parallel.tensor_parallel_size, pipeline_parallel_size, hybrid's shard group as
 * eo->hybrid_shard_size resolved it). */
zt_mesh_sizes zt_train_mesh_sizes(const zt_train_config *cfg, const zt_engine_options *eo);

/* parallel.pipeline_schedule as the pipeline's schedule. */
zt_pp_schedule zt_train_pp_schedule(const zt_train_config *cfg);

#endif
