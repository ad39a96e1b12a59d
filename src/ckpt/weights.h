/* weights.h - a single-file, checksummed snapshot of a model's parameters (what `zerotrain train`
 * leaves behind for `zerotrain sample`). The sharded checkpoint format with optimizer state and
 * resharding is a separate, later piece (src/ckpt/, issue "Checkpoints").
 *
 * Layout (little-endian): "ZTWEIGHT" | u32 version | i32 maxT, V, L, NH, C | [version 2 only:
 * the Llama block: i32 arch=1, NKV, I | f32 rope_theta, rms_norm_eps, rope scaling factor,
 * low_freq_factor, high_freq_factor | i32 original_max_position_embeddings, tie_embeddings] |
 * [versions 3 and 4 only: the LoRA block: i32 rank | f32 alpha, dropout | u16 len, target_modules
 * bytes] | u32 n_params | per parameter: u16 name_len, name bytes, u32 ndim, i64 shape[ndim] | then
 * every tensor's fp32 data in the same order (the adapters after the weights they adapt) | u64
 * XXH64 of all preceding bytes. GPT-2 is written as version 1 (the files of before Llama), Llama
 * as version 2, and either with LoRA adapters as 3 (GPT-2) or 4 (Llama, the Llama block first).
 * Written to a temporary file, fsynced
 * and renamed, so a reader sees the old file or the new one. */
#ifndef ZT_WEIGHTS_H
#define ZT_WEIGHTS_H

#include "zerotrain/zerotrain.h"

/* A collective under zero3/hybrid (tensors are gathered): every rank calls it; only the rank
 * with writer = true writes the file. */
int zt_weights_save(zt_engine *e, const char *path, bool writer, zt_error *err);
/* The same for model m's parameters as gather(ctx, i, dst) gives them (logical tensors; every rank
 * calls it for every i in order; the writer's dst gets the values): pipeline parallelism's whole
 * model, gathered from the stages (src/engine/pipeline.h). */
typedef int (*zt_weights_gather_fn)(void *ctx, int i, float *dst, zt_error *err);
int zt_weights_save_with(const zt_model *m, zt_weights_gather_fn gather, void *ctx, const char *path, bool writer,
                         zt_error *err);
/* Reads just the model, to build it before loading. ZT_ERR_CKPT on a bad file. */
int zt_weights_read_config(const char *path, zt_model_spec *spec, zt_error *err);
/* Loads every tensor into e; names and shapes must match e's model (ZT_ERR_CKPT names the tensor). */
int zt_weights_load(zt_engine *e, const char *path, zt_error *err);

#endif
