/* weights.h - a single-file, checksummed snapshot of a GPT-2's parameters (what `zerotrain train`
 * leaves behind for `zerotrain sample`). The sharded checkpoint format with optimizer state and
 * resharding is a separate, later piece (src/ckpt/, issue "Checkpoints").
 *
 * Layout (little-endian): "ZTWEIGHT" | u32 version=1 | i32 maxT, V, L, NH, C | u32 n_params |
 * per parameter: u16 name_len, name bytes, u32 ndim, i64 shape[ndim] | then every tensor's fp32
 * data in the same order | u64 XXH64 of all preceding bytes. Written to a temporary file, fsynced
 * and renamed, so a reader sees the old file or the new one. */
#ifndef ZT_WEIGHTS_H
#define ZT_WEIGHTS_H

#include "zerotrain/zerotrain.h"

/* A collective under zero3/hybrid (tensors are gathered): every rank calls it; only the rank
 * with writer = true writes the file. */
int zt_weights_save(zt_engine *e, const char *path, bool writer, zt_error *err);
/* Reads just the model shape, to build the model before loading. ZT_ERR_CKPT on a bad file. */
int zt_weights_read_config(const char *path, zt_gpt2_config *cfg, zt_error *err);
/* Loads every tensor into e; names and shapes must match e's model (ZT_ERR_CKPT names the tensor). */
int zt_weights_load(zt_engine *e, const char *path, zt_error *err);

#endif
