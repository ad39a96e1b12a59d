/* peft.h - LoRA adapters out of zerotrain (peft.c): PEFT's adapter directory, and the adapters
 * merged into their weights for a plain Hugging Face directory (hf.c). */
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
/* W += (alpha / r)·B·A for every adapted weight, in e's parameters (*n_merged of them); the model
 * still lists its adapters, so e now computes the update twice: for exporting only. A collective
 * under zero3/hybrid. */
int zt_lora_merge(zt_engine *e, int *n_merged, zt_error *err);

#endif
