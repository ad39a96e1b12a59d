/* arch.c - the model families behind one record (zt_model_spec): names, presets of either family,
 * building the model a spec describes and reading the spec back from a built model (what the
 * trainer, checkpoints, `sample`, `export`, `bench` and `estimate-memory` go through). */
#include "zerotrain/zerotrain.h"

#include <string.h>

const char *zt_arch_name(zt_arch a) { return a == ZT_ARCH_LLAMA ? "llama" : "gpt2"; }

int zt_arch_parse(const char *name, zt_arch *out, zt_error *err) {
    if (!strcmp(name, "gpt2")) *out = ZT_ARCH_GPT2;
    else if (!strcmp(name, "llama")) *out = ZT_ARCH_LLAMA;
    else return zt_error_set(err, ZT_ERR_USAGE, "unknown model architecture \"%s\" (known: gpt2, llama)", name);
    return ZT_OK;
}

const char *zt_attention_name(zt_attention a) { return a == ZT_ATTENTION_NAIVE ? "naive" : "flash"; }

int zt_attention_parse(const char *name, zt_attention *out, zt_error *err) {
    if (!strcmp(name, "flash")) *out = ZT_ATTENTION_FLASH;
    else if (!strcmp(name, "naive")) *out = ZT_ATTENTION_NAIVE;
    else return zt_error_set(err, ZT_ERR_USAGE, "unknown attention kernel \"%s\" (known: flash, naive)", name);
    return ZT_OK;
}

int zt_model_preset(const char *name, zt_model_spec *spec, zt_error *err) {
    zt_error e1, e2;
    memset(spec, 0, sizeof *spec);
    if (zt_gpt2_preset(name, &spec->gpt2, &e1) == ZT_OK) {
        spec->arch = ZT_ARCH_GPT2;
        return ZT_OK;
    }
    if (zt_llama_preset(name, &spec->llama, &e2) == ZT_OK) {
        spec->arch = ZT_ARCH_LLAMA;
        return ZT_OK;
    }
    return zt_error_set(err, ZT_ERR_USAGE, "unknown model \"%s\" (GPT-2 presets: tiny, gpt2-124M, gpt2-350M, "
                        "gpt2-774M, gpt2-1558M; Llama presets: llama-tiny, llama-124M, llama-7b, llama-13b, llama-70b, llama3-8b, "
                        "llama3-70b, mistral-7b, qwen2-0.5b, mixtral-8x7b, llama-124M-moe, llama-tiny-moe, qwen1.5-moe-a2.7b)", name);
}

int zt_model_spec_create(const zt_model_spec *spec, zt_model **out, zt_error *err) {
    int rc = spec->arch == ZT_ARCH_LLAMA ? zt_llama_create(&spec->llama, out, err) : zt_gpt2_create(&spec->gpt2, out, err);
    if (!rc) (*out)->sequence_parallel = spec->sequence_parallel;
    if (!rc && spec->loss_chunk_tokens && (rc = zt_model_set_loss_chunk(*out, spec->loss_chunk_tokens, err))) {
        zt_model_free(*out);
        *out = NULL;
    }
    if (rc || spec->lora.rank == 0) return rc;
    if ((rc = zt_model_add_lora(*out, &spec->lora, NULL, err))) {
        zt_model_free(*out);
        *out = NULL;
    }
    return rc;
}

int zt_model_spec_of(const zt_model *m, zt_model_spec *out, zt_error *err) {
    memset(out, 0, sizeof *out);
    if (!strcmp(m->name, "gpt2")) {
        out->arch = ZT_ARCH_GPT2;
        out->gpt2 = *(const zt_gpt2_config *)m->cfg;
    } else if (!strcmp(m->name, "llama")) {
        out->arch = ZT_ARCH_LLAMA;
        out->llama = *(const zt_llama_config *)m->cfg;
    } else {
        return zt_error_set(err, ZT_ERR_USAGE, "model %s was not built by zt_gpt2_create or zt_llama_create", m->name);
    }
    if (m->lora) out->lora = *m->lora;
    out->sequence_parallel = m->sequence_parallel;
    out->loss_chunk_tokens = m->loss_chunk_tokens;
    return ZT_OK;
}

void zt_model_spec_shape(const zt_model_spec *s, int *n_layer, int *n_head, int *n_embd, int *vocab_size,
                         int *max_seq_len) {
    if (s->arch == ZT_ARCH_LLAMA) {
        *n_layer = s->llama.n_layer, *n_head = s->llama.n_head, *n_embd = s->llama.n_embd;
        *vocab_size = s->llama.vocab_size, *max_seq_len = s->llama.max_seq_len;
    } else {
        *n_layer = s->gpt2.n_layer, *n_head = s->gpt2.n_head, *n_embd = s->gpt2.n_embd;
        *vocab_size = s->gpt2.vocab_size, *max_seq_len = s->gpt2.max_seq_len;
    }
}
