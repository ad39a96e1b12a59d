/* hf.h - Hugging Face model directories, both ways (see hf.c): config.json + model.safetensors,
 * or model-0000K-of-0000N.safetensors shards with model.safetensors.index.json. */
#ifndef ZT_HF_H
#define ZT_HF_H

#include "ckpt/hf_arch.h"
#include "zerotrain/zerotrain.h"

#include <cjson/cJSON.h>

typedef struct zt_hf_export_options {
    bool bf16;                 /* tensors as BF16 (nearest even) instead of F32 */
    uint64_t shard_bytes;      /* split into shards of at most this many tensor bytes (a larger
                                * tensor gets a shard of its own); 0: one model.safetensors */
    const char *const *copy;   /* files copied into the directory under their base names
                                * (tokenizer.json, tokenizer_config.json, ...) */
    int n_copy;
} zt_hf_export_options;

/* Writes dir (created if missing): config.json (the model's architecture row), the weights
 * (model.safetensors when they fit one shard, else the shards and model.safetensors.index.json
 * with metadata.total_size and weight_map), generation_config.json when the row has token ids,
 * and the copied files. A collective under zero3/hybrid (tensors are gathered), like
 * zt_st_write: pass a single-process engine to write from one process. Streams: memory is two
 * copies of the largest tensor. *n_shards gets the number of weight files written. */
int zt_hf_export_dir(zt_engine *e, const char *dir, const zt_hf_export_options *o, int *n_shards, zt_error *err);

/* Reads and parses dir/config.json (ZT_ERR_USAGE naming the field it cannot build; ZT_ERR_IO
 * when unreadable). */
int zt_hf_read_config(const char *dir, zt_hf_model_config *c, zt_error *err);
/* zt_hf_read_config, then builds the model (ZT_ERR_USAGE when its family has no model here). */
int zt_hf_create_model(const char *dir, zt_model **out, zt_error *err);

/* Loads every stored parameter of e's model from dir, tensor by tensor: through the index's
 * weight_map when dir has model.safetensors.index.json, else from dir/model.safetensors. Every
 * rank may call it (each sets its own part). ZT_ERR_CKPT names the file and tensor that is
 * missing from the index or its shard, or of the wrong shape, dtype or length. */
int zt_hf_load_dir(zt_engine *e, const char *dir, zt_error *err);

/* Writes j (consumed) as dir/name, pretty-printed, through a temporary file and a rename. */
int zt_hf_write_json(const char *dir, const char *name, cJSON *j, zt_error *err);

/* "5GB" (10^9), "500MiB" (2^20), "4096" (bytes) -> *bytes > 0; ZT_ERR_USAGE otherwise. */
int zt_hf_parse_size(const char *s, uint64_t *bytes, zt_error *err);

#endif
