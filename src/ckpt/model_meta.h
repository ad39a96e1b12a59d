/* model_meta.h - the model a checkpoint or weights file was saved from, as JSON (the checkpoint
 * manifest's "model" object; model_meta.c). Internal to src/ckpt/. */
#ifndef ZT_CKPT_MODEL_META_H
#define ZT_CKPT_MODEL_META_H

#include "zerotrain/zerotrain.h"

#include <cjson/cJSON.h>

/* {"arch": "gpt2"|"llama", "max_seq_len", "vocab_size", "n_layer", "n_head", "n_embd", and for
 * llama "n_kv_head", "intermediate_size", "rope_theta", "rms_norm_eps", "rope_scaling": {"factor",
 * "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"}, "tie_embeddings"},
 * and with LoRA adapters "lora": {"rank", "alpha", "dropout", "target_modules"}.
 * NULL when out of memory or the model is not a GPT-2 or Llama built by this library. */
cJSON *zt_model_meta_json(const zt_model *m);
/* The spec from such an object. No "arch" (checkpoints before Llama existed): gpt2. ZT_ERR_CKPT
 * naming where (what) and the missing or bad field. */
int zt_model_meta_parse(const cJSON *o, const char *where, zt_model_spec *out, zt_error *err);
/* The manifest's "tensors" array against the model's parameters, by name: ONE error (ZT_ERR_CKPT,
 * exit 4, naming commit) counting and listing the model's tensors the checkpoint lacks, the
 * checkpoint's the model lacks, and each shape pair (checkpoint vs model), within the 1 KiB message;
 * ZT_OK when every name and shape agrees in the model's order. */
int zt_model_meta_compare(const char *commit, const cJSON *tensors, const zt_model *m, zt_error *err);

#endif
