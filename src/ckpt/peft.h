/* peft.h - LoRA adapters out of zerotrain (peft.c): PEFT's adapter directory, and the adapters
 * merged into their weights for a plain Hugging Face directory (hf.c); and back in (peft_load.c). */
#ifndef ZT_PEFT_H
#define ZT_PEFT_H

#include "ckpt/hf_arch.h"
#include "zerotrain/zerotrain.h"

/* Writes dir (created if missing): adapter_model.safetensors (every adapter under PEFT's name, fp32
 * or bf16) and adapter_config.json (base_model_name_or_path = base_model, or null when NULL or "").
 * *n_adapters = the adapted Linears. ZT_ERR_USAGE when the model has no adapters. A collective
 * under zero3/hybrid (tensors are gathered), like zt_st_write. */
int zt_peft_export_dir(zt_engine *e, const char *dir, const char *base_model, bool bf16, int *n_adapters,
                       zt_error *err);
/* PEFT's name of adapter parameter i (lora 'A' or 'B'): "base_model.model." + transformers' module
 * + ".lora_A.weight", or with the adapter's name (".lora_A.default.weight", as PeftModel.state_dict
 * keeps it) when adapter_name. ZT_ERR_USAGE when its weight has no transformers name. */
int zt_peft_tensor_name(const zt_hf_arch *a, const zt_model *m, int i, bool adapter_name, char *out, size_t cap,
                        zt_error *err);
/* Reads dir/adapter_config.json (PEFT's LoraConfig) into *l: r, lora_alpha (default 8),
 * lora_dropout, target_modules (a list joined by commas, or the regular expression; null: "", the
 * family's default, as PEFT's). ZT_ERR_CKPT naming the file and the field for a peft_type other
 * than LORA, a task other than CAUSAL_LM, every option zerotrain does not implement (use_dora,
 * use_rslora, rank_pattern, alpha_pattern, bias, modules_to_save, layers_to_transform, ...) and a
 * missing or bad r, alpha or dropout. */
int zt_peft_read_config(const char *dir, zt_lora_config *l, zt_error *err);
/* Sets every adapter of e's model from dir/adapter_model.safetensors (F32, BF16 or F16; every rank
 * sets its own part). ZT_ERR_CKPT naming the file and the tensor that is missing, of another shape
 * or dtype, cut short, or in the file without being one of the model's adapters; ZT_ERR_USAGE
 * when the model has no adapters. */
int zt_peft_load_dir(zt_engine *e, const char *dir, zt_error *err);
/* W += (alpha / r)·B·A for every adapted weight, in e's parameters (*n_merged of them); the model
 * still lists its adapters, so e now computes the update twice: for exporting only. A collective
 * under zero3/hybrid. */
int zt_lora_merge(zt_engine *e, int *n_merged, zt_error *err);

#endif
