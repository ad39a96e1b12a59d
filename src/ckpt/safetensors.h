/* safetensors.h - one safetensors file: write a list of the model's parameters under given names,
 * read them back tensor by tensor (see safetensors.c). Names and layouts per architecture come
 * from src/ckpt/hf_arch.c; whole Hugging Face directories (shards + index) from src/ckpt/hf.c. */
#ifndef ZT_SAFETENSORS_H
#define ZT_SAFETENSORS_H

#include "zerotrain/zerotrain.h"

/* One stored tensor: parameter `param` of the engine's model, under the file name `name`,
 * transposed ((out, in) in zerotrain, (in, out) on disk) when `transpose`. */
typedef struct zt_st_entry {
    char name[ZT_NAME_MAX + 16];
    int param;
    bool transpose;
    /* parts > 1: the tensor is rows [part·R/parts, (part+1)·R/parts) of the parameter's R rows (a
     * mixture of experts' expert `part` of a weight stacked by expert); 0 or 1: all of it */
    int parts, part;
} zt_st_entry;
/* the elements of the entry's tensor */
int64_t zt_st_entry_numel(const zt_model *m, const zt_st_entry *ent);

/* Writes ents[0..n) into path (tmp + rename), fp32 or bf16 (nearest even), with __metadata__
 * {"format": "pt"}. A collective under zero3/hybrid (tensors are gathered): every rank calls it;
 * pass a single-process engine for a file on disk. Memory: two copies of the largest tensor. */
int zt_st_write(zt_engine *e, const char *path, const zt_st_entry *ents, int n, bool bf16, zt_error *err);

/* An open safetensors file: its parsed header; tensors are read one at a time. */
typedef struct zt_st_file zt_st_file;
/* ZT_ERR_CKPT naming path when it cannot be opened, is shorter than its header says, or the
 * header is not JSON with valid byte ranges. */
int zt_st_open(const char *path, zt_st_file **out, zt_error *err);
void zt_st_close(zt_st_file *f);
/* The tensors the header lists (its __metadata__ not counted), and the k-th one's name. */
int zt_st_count(const zt_st_file *f);
const char *zt_st_name(const zt_st_file *f, int k);
/* Whether the header lists a tensor of that name. */
bool zt_st_has(const zt_st_file *f, const char *name);
/* Reads tensor `name` (F32, BF16 or F16) into parameter ent->param of e (this rank's part, in the
 * parameters' dtype), transposing when ent->transpose. ZT_ERR_CKPT names the file and the tensor
 * when it is missing, of another dtype, shape or byte count, or cut short. Memory: two copies of
 * the tensor, transiently. */
int zt_st_read(zt_st_file *f, zt_engine *e, const zt_st_entry *ent, zt_error *err);

/* A GPT-2 model as one file with Hugging Face's GPT2Model names (hf_arch.c's map). */
int zt_safetensors_export(zt_engine *e, const char *path, bool bf16, zt_error *err);
/* Loads every parameter from one file with those names (optionally prefixed "transformer."). */
int zt_safetensors_load(zt_engine *e, const char *path, zt_error *err);

#endif
