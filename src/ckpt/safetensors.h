/* safetensors.h - GPT-2 and Llama weights as Hugging Face safetensors (see safetensors.c). */
#ifndef ZT_SAFETENSORS_H
#define ZT_SAFETENSORS_H

#include "zerotrain/zerotrain.h"

/* Writes every parameter, consolidated (a collective under zero3: all ranks call it; pass a
 * single-process engine for a file on disk), fp32 or bf16 (round to nearest even). */
int zt_safetensors_export(zt_engine *e, const char *path, bool bf16, zt_error *err);
/* Loads every parameter from a safetensors file with the model's names (optionally prefixed with
 * "transformer." for GPT-2, "model." for Llama), F32 or BF16; ZT_ERR_CKPT names the tensor that is missing or does not fit. */
int zt_safetensors_load(zt_engine *e, const char *path, zt_error *err);

#endif
