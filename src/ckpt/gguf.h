/* gguf.h - GGUF files for llama.cpp (see gguf.c): a model's tensors under llama.cpp's names with
 * its metadata keys, the tokenizer and the chat template (gguf_vocab.c), in f32/f16/bf16/q8_0/q4_0
 * and the k-quants (gguf_quant.c, gguf_kquant.c); or its LoRA adapters alone as an adapter file. */
#ifndef ZT_GGUF_H
#define ZT_GGUF_H

#include "ckpt/gguf_quant.h"
#include "zerotrain/zerotrain.h"

/* GGUF metadata value types (gguf.h's gguf_type) */
enum {
    ZT_GGUF_KV_U32 = 4,
    ZT_GGUF_KV_I32 = 5,
    ZT_GGUF_KV_F32 = 6,
    ZT_GGUF_KV_BOOL = 7,
    ZT_GGUF_KV_STRING = 8,
    ZT_GGUF_KV_ARRAY = 9,
};

/* The metadata section being built: key-value pairs serialized into buf as GGUF stores them. */
typedef struct zt_gguf_kv {
    unsigned char *buf;
    size_t len, cap;
    uint64_t count;
    bool oom;
} zt_gguf_kv;

void zt_gguf_kv_str(zt_gguf_kv *kv, const char *key, const char *value);
void zt_gguf_kv_u32(zt_gguf_kv *kv, const char *key, uint32_t value);
void zt_gguf_kv_f32(zt_gguf_kv *kv, const char *key, float value);
void zt_gguf_kv_bool(zt_gguf_kv *kv, const char *key, bool value);
/* An array of n items of type item_type follows: append them with the *_item functions. */
void zt_gguf_kv_array(zt_gguf_kv *kv, const char *key, uint32_t item_type, uint64_t n);
void zt_gguf_kv_str_item(zt_gguf_kv *kv, const char *s, size_t len);
void zt_gguf_kv_i32_item(zt_gguf_kv *kv, int32_t v);
void zt_gguf_kv_f32_item(zt_gguf_kv *kv, float v);

/* The tokenizer's keys (tokenizer.ggml.*) from the files given: a Hugging Face tokenizer.json (BPE:
 * byte-level -> model "gpt2", SentencePiece-style -> "llama"), optionally a tokenizer_config.json
 * (bos/eos tokens, add_bos_token, chat_template) or a .jinja file (the chat template). vocab_size:
 * the model's, which the tokenizer must not exceed (padded with unused tokens up to it). ZT_ERR_DATA
 * names the file and the field it cannot use; ZT_ERR_USAGE when no file is a tokenizer.json. */
int zt_gguf_vocab(zt_gguf_kv *kv, const char *const *files, int n_files, int vocab_size, zt_error *err);

typedef struct zt_gguf_export_options {
    zt_gguf_type type;             /* the matrices' type; 1-D tensors stay f32 */
    const char *const *tokenizer;  /* tokenizer.json, tokenizer_config.json, .jinja (zt_gguf_vocab) */
    int n_tokenizer;
    bool adapter;                  /* the LoRA adapters alone, as llama.cpp's LoRA adapter file (below) */
} zt_gguf_export_options;

/* Writes e's model (GPT-2 or Llama; LoRA adapters merged beforehand: zt_lora_merge) to path as
 * one GGUF v3 file, atomically. A collective under zero3/hybrid (tensors are gathered), like
 * zt_st_write. ZT_ERR_USAGE names the tensor and its row length when the type's blocks do not
 * divide it; ZT_ERR_IO the path. *n_tensors gets the number of tensors written. */
int zt_gguf_export(zt_engine *e, const char *path, const zt_gguf_export_options *o, int *n_tensors, zt_error *err);
/* With o->adapter: the model's LoRA adapters alone (not merged), as convert_lora_to_gguf.py writes
 * them for llama.cpp's --lora: general.type "adapter", adapter.type "lora", adapter.lora.alpha, the
 * architecture's name, no tokenizer; per adapted weight NAME (its GGUF name) NAME.lora_a, ne =
 * [in, r] (zerotrain's lora_A, (r, in) row-major) and NAME.lora_b, ne = [r, out] (lora_B, (out, r);
 * Llama's q/k rows permuted as their weight's). llama.cpp adds scale·alpha/r·B(Ax) to W x, which is
 * what the merge computes. ZT_ERR_USAGE when the model has no adapters. */

/* Parameter param's GGUF name (false: a LoRA adapter, or no name) and, for Llama's q and k, the
 * heads its rows are permuted within (else 0). */
bool zt_gguf_param_name(const zt_model *m, int param, char *out, size_t cap, int *heads);
/* llama.cpp's general.architecture of model m: "gpt2", "llama", or "qwen2" (a Llama with q/k/v biases) */
const char *zt_gguf_arch_of(const zt_model *m);
/* Llama's q/k rows between zerotrain's rotate_half layout and llama.cpp's interleaved one (gguf.c):
 * GGUF row h·hs + 2i + j is zerotrain's row h·hs + j·hs/2 + i; inverse: GGUF -> zerotrain. */
void zt_gguf_permute_rows(float *dst, const float *src, int64_t rows, int64_t cols, int heads, bool inverse);

/* Loads every parameter of e's model (LoRA adapters excepted) from a GGUF file of the types above
 * (gguf_read.c), as the start of a run: general.architecture must be the model's and the shape
 * keys its shape. ZT_ERR_CKPT names the file, the tensor and the field: not GGUF, a version other
 * than 2 or 3, truncated, an architecture or type zerotrain does not read, a shape that differs, a
 * tensor missing. Every rank may call it (each sets its own part). */
int zt_gguf_load(zt_engine *e, const char *path, zt_error *err);

#endif
