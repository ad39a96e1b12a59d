/* hf_arch.h - the Hugging Face architecture table: per model family, how config.json maps to a
 * zerotrain model and how parameter names and layouts map to transformers' (see hf_arch.c). */
#ifndef ZT_HF_ARCH_H
#define ZT_HF_ARCH_H

#include "ckpt/safetensors.h"
#include "zerotrain/zerotrain.h"

#include <cjson/cJSON.h>

/* config.json of model_type llama / mistral, parsed (hf_arch.c's llama row). rope_scaling_type is
 * "" when config.json has none, else its "rope_type" ("llama3", "linear", ...). */
typedef struct zt_hf_llama_config {
    int vocab_size, hidden_size, intermediate_size, num_hidden_layers, num_attention_heads;
    int num_key_value_heads;  /* defaults to num_attention_heads */
    int max_position_embeddings;
    double rms_norm_eps, rope_theta;
    bool tie_word_embeddings; /* default false */
    char rope_scaling_type[32];
    double rope_factor, rope_low_freq_factor, rope_high_freq_factor; /* llama3 rope scaling */
    int rope_original_max_position_embeddings;
    /* model_type mixtral, qwen2_moe: the sparse MLP (0 experts otherwise) */
    int num_local_experts, num_experts_per_tok;
    double router_aux_loss_coef;
    bool norm_topk_prob;                      /* mixtral: true */
    int moe_intermediate_size;                /* qwen2_moe: each expert's width (mixtral: 0, intermediate_size) */
    int shared_expert_intermediate_size;      /* qwen2_moe: the gated shared expert's width */
    bool qkv_bias;                            /* qwen2: true; qwen2_moe: qkv_bias (default true) */
} zt_hf_llama_config;

/* What a config.json describes, parsed by its architecture's row. */
typedef struct zt_hf_model_config {
    const struct zt_hf_arch *arch;
    zt_gpt2_config gpt2;       /* model_type gpt2 */
    zt_hf_llama_config llama;  /* model_type llama, mistral */
} zt_hf_model_config;

/* One row per family. To add a family (the Llama model's branch): write its parse / create /
 * write / name functions in hf_arch.c and add the row to ARCHS there; nothing else changes (the
 * directory reader and writer in hf.c, export, train --init-hf and sample --hf go through rows). */
typedef struct zt_hf_arch {
    const char *model_type;   /* config.json "model_type" this row reads */
    const char *architecture; /* config.json "architectures"[0] it writes ("GPT2LMHeadModel") */
    const char *model_name;   /* zt_model.name of the models it exports ("gpt2") */
    /* config.json (j, read from path) -> c; ZT_ERR_USAGE naming the field when the shape or an
     * option is one zerotrain cannot build */
    int (*parse)(const cJSON *j, const char *path, zt_hf_model_config *c, zt_error *err);
    /* builds the model c describes; NULL: the family's model is not in this build */
    int (*create)(const zt_hf_model_config *c, zt_model **out, zt_error *err);
    /* adds m's config.json fields to j (model_type and architectures are added by the caller) */
    void (*write)(const zt_model *m, cJSON *j);
    /* parameter p's transformers name into out (cap bytes) and whether it is stored transposed;
     * false: not stored (e.g. a tied LM head) */
    bool (*name)(const zt_param_desc *p, char *out, size_t cap, bool *transpose);
    const char *alt_prefix; /* a prefix some checkpoints put before every name, or NULL */
    /* the stacked experts' w1, w2, w3 as the row names each expert's tensors ("gate_proj", ...), or
     * NULL: as they are (Mixtral's experts.E.w1) */
    const char *const *expert_weights;
} zt_hf_arch;

/* The row for config.json's model_type, or NULL. */
const zt_hf_arch *zt_hf_arch_by_type(const char *model_type);
/* The row exporting model m (by m->name); ZT_ERR_USAGE when none does. */
int zt_hf_arch_for_model(const zt_model *m, const zt_hf_arch **out, zt_error *err);
/* Parses config.json text (from path) with its row. ZT_ERR_USAGE names path and the field:
 * missing model_type, a model_type no row reads, a shape or option the row refuses. */
int zt_hf_config_parse(const char *json, size_t len, const char *path, zt_hf_model_config *c, zt_error *err);
/* The stored tensors of m, in m's parameter order (LoRA adapters are not among them): *ents
 * (malloc'd, caller frees), *n. */
int zt_hf_entries(const zt_model *m, zt_st_entry **ents, int *n, zt_error *err);
/* Whether a file or index holds a tensor of that name. */
typedef bool (*zt_hf_has_fn)(const void *ctx, const char *name);
/* When has(ctx, ent->name) is false, renames ent to the first alternative that is there: the
 * architecture's alt_prefix + name ("transformer.wte.weight"), then zerotrain's own parameter name
 * (files written without transformers' prefix, e.g. "tok_embeddings..." vs "model...."). */
void zt_hf_alt_name(const zt_model *m, zt_hf_has_fn has, const void *ctx, zt_st_entry *ent);
bool zt_hf_has_in_file(const void *st_file, const char *name);
/* Tensors Hugging Face files carry that are buffers, not parameters, which a load skips: the
 * rotary embedding's "*.rotary_emb.inv_freq" (Llama-family files of older transformers), GPT-2's
 * causal mask "*.attn.bias" and "*.attn.masked_bias". */
bool zt_hf_buffer_name(const char *name);
/* A tensor `name` of file (a path, for the message) that a load of m finds: ZT_OK when it is one of
 * ents (zt_hf_entries, renamed by zt_hf_alt_name) or a buffer above; else ZT_ERR_CKPT naming the
 * file and the tensor (the file is another model's: loading the rest would drop it silently; exit 4
 * as a tensor missing from it, docs/design.md's "checkpoint ... incompatible"). */
int zt_hf_check_extra(const zt_model *m, const zt_st_entry *ents, int n, const char *name, const char *file,
                      zt_error *err);

#endif
