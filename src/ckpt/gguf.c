/* gguf.c - a model as one GGUF v3 file, llama.cpp's format (ggml's docs/gguf.md):
 *   "GGUF" | u32 version 3 | u64 tensor count | u64 metadata count | metadata key-value pairs |
 *   tensor infos (name, u32 n_dims, u64 ne[n_dims] innermost first, u32 ggml type, u64 offset in
 *   the data section) | zero padding to general.alignment (32) | the tensors, each 32-aligned.
 * Strings are u64 length + bytes; all little-endian.
 *
 * Names and keys are llama.cpp's (gguf-py/gguf/constants.py, convert_hf_to_gguf.py):
 *   GPT-2: token_embd, position_embd, blk.N.{attn_norm, attn_qkv, attn_output, ffn_norm, ffn_up,
 *          ffn_down}.{weight, bias}, output_norm.{weight, bias}; the tied LM head is not stored
 *          (llama.cpp reads token_embd for it); gpt2.{context_length, embedding_length,
 *          feed_forward_length, block_count, attention.head_count, attention.layer_norm_epsilon}.
 *   Llama: token_embd, blk.N.{attn_norm, attn_q, attn_k, attn_v, attn_output, ffn_norm, ffn_gate,
 *          ffn_up, ffn_down}.weight, output_norm, output (absent when tied), rope_freqs (Llama 3's
 *          scaling as per-frequency divisors); llama.{context_length, embedding_length,
 *          feed_forward_length, block_count, attention.head_count(_kv),
 *          attention.layer_norm_rms_epsilon, rope.freq_base, rope.dimension_count, vocab_size}.
 *   Qwen2 (a Llama with q/k/v biases, model.attention_qkv_bias): llama.cpp's qwen2 architecture,
 *          Llama's names plus blk.N.attn_{q,k,v}.bias and qwen2.* for llama.*; its rope is NeoX's
 *          (pairs (i, i + hs/2), Hugging Face's), so q and k are written as they are; no rope_freqs
 *          (refused with rope scaling).
 * zerotrain's matrices are (out, in) row-major, which is GGUF's ne = [in, out]: no transpose. Its
 * Llama rotates q and k in Hugging Face's rotate_half layout (kernels/rope.c: pairs (i, i + hs/2)),
 * llama.cpp in Meta's interleaved one (pairs (2i, 2i+1)), so attn_q and attn_k rows are permuted
 * within each head as convert_hf_to_gguf.py's LlamaModel.permute does: GGUF row h·hs + 2i + j is
 * zerotrain's row h·hs + j·hs/2 + i.
 * Matrices take the chosen type, 1-D tensors (norms, biases) and rope_freqs stay f32, as
 * convert_hf_to_gguf.py writes them. Tensors are gathered one at a time (memory: two copies of the
 * largest).
 * A LoRA adapter file (zt_gguf_export_options.adapter) is the same format with other keys
 * (general.type "adapter", adapter.type "lora", adapter.lora.alpha) and the adapters' tensors alone,
 * named after their weight + ".lora_a" / ".lora_b", as convert_lora_to_gguf.py writes them. */
#define _FILE_OFFSET_BITS 64
#include "ckpt/gguf.h"

#include "core/atomic_file.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ALIGN 32

/* ---------------------------------------------------------------------------------------------
 * The metadata buffer */

static void put(zt_gguf_kv *kv, const void *p, size_t n) {
    if (kv->oom) return;
    if (kv->len + n > kv->cap) {
        size_t cap = kv->cap ? kv->cap : 4096;
        while (cap < kv->len + n) cap *= 2;
        unsigned char *b = realloc(kv->buf, cap);
        if (!b) {
            kv->oom = true;
            return;
        }
        kv->buf = b;
        kv->cap = cap;
    }
    memcpy(kv->buf + kv->len, p, n);
    kv->len += n;
}

static void put_u32(zt_gguf_kv *kv, uint32_t v) { put(kv, &v, 4); }
static void put_u64(zt_gguf_kv *kv, uint64_t v) { put(kv, &v, 8); }
void zt_gguf_kv_str_item(zt_gguf_kv *kv, const char *s, size_t len) {
    put_u64(kv, len);
    put(kv, s, len);
}
void zt_gguf_kv_i32_item(zt_gguf_kv *kv, int32_t v) { put(kv, &v, 4); }
void zt_gguf_kv_f32_item(zt_gguf_kv *kv, float v) { put(kv, &v, 4); }

static void key(zt_gguf_kv *kv, const char *k, uint32_t type) {
    zt_gguf_kv_str_item(kv, k, strlen(k));
    put_u32(kv, type);
    kv->count++;
}

void zt_gguf_kv_str(zt_gguf_kv *kv, const char *k, const char *v) {
    key(kv, k, ZT_GGUF_KV_STRING);
    zt_gguf_kv_str_item(kv, v, strlen(v));
}
void zt_gguf_kv_u32(zt_gguf_kv *kv, const char *k, uint32_t v) {
    key(kv, k, ZT_GGUF_KV_U32);
    put_u32(kv, v);
}
void zt_gguf_kv_f32(zt_gguf_kv *kv, const char *k, float v) {
    key(kv, k, ZT_GGUF_KV_F32);
    put(kv, &v, 4);
}
void zt_gguf_kv_bool(zt_gguf_kv *kv, const char *k, bool v) {
    key(kv, k, ZT_GGUF_KV_BOOL);
    unsigned char b = v;
    put(kv, &b, 1);
}
void zt_gguf_kv_array(zt_gguf_kv *kv, const char *k, uint32_t item_type, uint64_t n) {
    key(kv, k, ZT_GGUF_KV_ARRAY);
    put_u32(kv, item_type);
    put_u64(kv, n);
}

/* ---------------------------------------------------------------------------------------------
 * Tensors: which parameter under which name, in which type */

typedef struct gguf_tensor {
    char name[ZT_NAME_MAX + 16];
    int param;      /* the model's parameter; -1: rope_freqs (computed) */
    int heads;      /* > 0: rows permuted within each of this many heads (Llama's q, k) */
    int ndim;
    int64_t ne[2];  /* ne[0]: the row length */
    zt_gguf_type type;
    uint64_t offset, bytes;
} gguf_tensor;

/* zerotrain name suffix -> llama.cpp name suffix, per family (after "h.N." / "layers.N.") */
static const char *const GPT2_NAMES[][2] = {
    {"ln_1.", "attn_norm."},  {"attn.c_attn.", "attn_qkv."}, {"attn.c_proj.", "attn_output."},
    {"ln_2.", "ffn_norm."},   {"mlp.c_fc.", "ffn_up."},      {"mlp.c_proj.", "ffn_down."},
};
static const char *const LLAMA_NAMES[][2] = {
    {"self_attn.q_proj.", "attn_q."},  {"self_attn.k_proj.", "attn_k."},  {"self_attn.v_proj.", "attn_v."},
    {"self_attn.o_proj.", "attn_output."}, {"mlp.gate_proj.", "ffn_gate."}, {"mlp.up_proj.", "ffn_up."},
    {"mlp.down_proj.", "ffn_down."},   {"input_layernorm.", "attn_norm."},
    {"post_attention_layernorm.", "ffn_norm."},
};
static const char *const TOP_NAMES[][2] = {
    {"wte.", "token_embd."}, {"wpe.", "position_embd."}, {"ln_f.", "output_norm."},
    {"embed_tokens.", "token_embd."}, {"norm.", "output_norm."}, {"lm_head.", "output."},
};

/* p's GGUF name into out; false when the family has no such parameter */
static bool gguf_name(const char *p, bool llama, char *out, size_t cap) {
    const char *block = llama ? "layers." : "h.";
    size_t bl = strlen(block);
    if (!strncmp(p, block, bl)) {
        char *end;
        long l = strtol(p + bl, &end, 10);
        if (end == p + bl || *end != '.') return false;
        const char *rest = end + 1;
        int n = llama ? (int)(sizeof LLAMA_NAMES / sizeof *LLAMA_NAMES) : (int)(sizeof GPT2_NAMES / sizeof *GPT2_NAMES);
        for (int i = 0; i < n; i++) {
            const char *const *row = llama ? LLAMA_NAMES[i] : GPT2_NAMES[i];
            size_t rl = strlen(row[0]);
            if (!strncmp(rest, row[0], rl)) {
                snprintf(out, cap, "blk.%ld.%s%s", l, row[1], rest + rl);
                return true;
            }
        }
        return false;
    }
    for (size_t i = 0; i < sizeof TOP_NAMES / sizeof *TOP_NAMES; i++) {
        size_t rl = strlen(TOP_NAMES[i][0]);
        if (!strncmp(p, TOP_NAMES[i][0], rl)) {
            snprintf(out, cap, "%s%s", TOP_NAMES[i][1], p + rl);
            return true;
        }
    }
    return false;
}

bool zt_gguf_param_name(const zt_model *m, int param, char *out, size_t cap, int *heads) {
    bool llama = !strcmp(m->name, "llama");
    const zt_param_desc *p = &m->params[param];
    const zt_llama_config *lc = llama ? m->cfg : NULL;
    *heads = !llama || lc->qkv_bias ? 0 /* GPT-2; Qwen2's NeoX rope: as they are */
           : strstr(p->name, "self_attn.q_proj.") ? lc->n_head : strstr(p->name, "self_attn.k_proj.") ? lc->n_kv_head : 0;
    return !p->lora && gguf_name(p->name, llama, out, cap);
}

void zt_gguf_permute_rows(float *dst, const float *src, int64_t rows, int64_t cols, int heads, bool inverse) {
    int64_t hs = rows / heads;
    for (int64_t h = 0; h < heads; h++)
        for (int64_t i = 0; i < hs / 2; i++)
            for (int j = 0; j < 2; j++) {
                int64_t g = h * hs + 2 * i + j, z = h * hs + j * hs / 2 + i; /* GGUF row, zerotrain row */
                memcpy(dst + (inverse ? z : g) * cols, src + (inverse ? g : z) * cols, (size_t)cols * sizeof *dst);
            }
}

/* Llama 3's rope scaling as llama.cpp reads it: per frequency, the divisor of the base frequency
 * (convert_hf_to_gguf.py's LlamaModel.generate_extra_tensors) */
static void rope_factors(const zt_llama_config *c, float *f) {
    int hs = c->n_embd / c->n_head;
    const zt_rope_scaling *s = &c->rope_scaling;
    double lo = s->original_max_position_embeddings / s->low_freq_factor;
    double hi = s->original_max_position_embeddings / s->high_freq_factor;
    for (int i = 0; i < hs / 2; i++) {
        double freq = 1.0 / pow(c->rope_theta, (double)(2 * i) / hs), wavelen = 2 * M_PI / freq;
        if (wavelen < hi) f[i] = 1.0f;
        else if (wavelen > lo) f[i] = s->factor;
        else {
            double smooth = (s->original_max_position_embeddings / wavelen - s->low_freq_factor) /
                            (s->high_freq_factor - s->low_freq_factor);
            f[i] = (float)(1.0 / ((1 - smooth) / s->factor + smooth));
        }
    }
}

/* the model's keys: general.*, then the family's */
/* llama.cpp's architecture of m: gpt2, llama, or qwen2 (a Llama with q/k/v biases) */
const char *zt_gguf_arch_of(const zt_model *m) {
    if (strcmp(m->name, "llama")) return "gpt2";
    return ((const zt_llama_config *)m->cfg)->qkv_bias ? "qwen2" : "llama";
}

static void model_keys(zt_gguf_kv *kv, const zt_model *m, bool llama, zt_gguf_type type, bool adapter) {
    const char *arch = zt_gguf_arch_of(m);
    char k[96];
    if (adapter) { /* llama.cpp's llama_adapter_lora_init: the architecture must be the base's */
        zt_gguf_kv_str(kv, "general.architecture", arch);
        zt_gguf_kv_str(kv, "general.type", "adapter");
        snprintf(k, sizeof k, "zerotrain %s LoRA", arch);
        zt_gguf_kv_str(kv, "general.name", k);
        zt_gguf_kv_u32(kv, "general.file_type", (uint32_t)zt_gguf_file_type(type));
        zt_gguf_kv_u32(kv, "general.alignment", ALIGN);
        zt_gguf_kv_str(kv, "adapter.type", "lora");
        zt_gguf_kv_f32(kv, "adapter.lora.alpha", m->lora->alpha);
        return;
    }
#define ARCH_U32(name, v) (snprintf(k, sizeof k, "%s." name, arch), zt_gguf_kv_u32(kv, k, (uint32_t)(v)))
#define ARCH_F32(name, v) (snprintf(k, sizeof k, "%s." name, arch), zt_gguf_kv_f32(kv, k, (float)(v)))
    zt_gguf_kv_str(kv, "general.architecture", arch);
    snprintf(k, sizeof k, "zerotrain %s", arch);
    zt_gguf_kv_str(kv, "general.name", k);
    zt_gguf_kv_u32(kv, "general.file_type", (uint32_t)zt_gguf_file_type(type));
    zt_gguf_kv_u32(kv, "general.alignment", ALIGN);
    if (type == ZT_GGUF_Q8_0 || type == ZT_GGUF_Q4_0 || zt_gguf_type_is_k(type))
        zt_gguf_kv_u32(kv, "general.quantization_version", 2);
    if (llama) {
        const zt_llama_config *c = m->cfg;
        ARCH_U32("context_length", c->max_seq_len);
        ARCH_U32("embedding_length", c->n_embd);
        ARCH_U32("feed_forward_length", c->intermediate_size);
        ARCH_U32("block_count", c->n_layer);
        ARCH_U32("attention.head_count", c->n_head);
        ARCH_U32("attention.head_count_kv", c->n_kv_head);
        ARCH_F32("attention.layer_norm_rms_epsilon", c->rms_norm_eps);
        ARCH_F32("rope.freq_base", c->rope_theta);
        ARCH_U32("rope.dimension_count", c->n_embd / c->n_head);
        ARCH_U32("vocab_size", c->vocab_size);
    } else {
        const zt_gpt2_config *c = m->cfg;
        ARCH_U32("context_length", c->max_seq_len);
        ARCH_U32("embedding_length", c->n_embd);
        ARCH_U32("feed_forward_length", 4 * c->n_embd);
        ARCH_U32("block_count", c->n_layer);
        ARCH_U32("attention.head_count", c->n_head);
        ARCH_F32("attention.layer_norm_epsilon", 1e-5);
    }
#undef ARCH_U32
#undef ARCH_F32
}

/* the tensor list with types, offsets and sizes; ZT_ERR_USAGE when a row does not fit the blocks */
/* each tensor's bytes and offset in the data section, 32-aligned */
static void lay_out(gguf_tensor *t, int n) {
    uint64_t off = 0;
    for (int i = 0; i < n; i++) {
        t[i].offset = off;
        t[i].bytes = (uint64_t)t[i].ne[1] * zt_gguf_row_bytes(t[i].type, t[i].ne[0]);
        off = (off + t[i].bytes + ALIGN - 1) / ALIGN * ALIGN;
    }
}

/* a LoRA adapter file's tensors: each adapter matrix under its weight's name + .lora_a / .lora_b */
static int plan_adapters(const zt_model *m, const char *path, zt_gguf_type type, gguf_tensor *t, int *n_out,
                         zt_error *err) {
    int n = 0;
    for (int i = 0; i < m->n_params; i++) {
        const zt_param_desc *p = &m->params[i];
        if (!p->lora) continue;
        gguf_tensor *g = &t[n];
        char base[sizeof g->name - 8];
        int heads;
        if (!zt_gguf_param_name(m, p->lora_base, base, sizeof base, &heads))
            return zt_error_set(err, ZT_ERR_INTERNAL, "export --gguf-lora %s: the weight %s adapts has no llama.cpp "
                                "name", path, p->name);
        snprintf(g->name, sizeof g->name, "%s.lora_%c", base, p->lora == 'A' ? 'a' : 'b');
        g->param = i;
        g->heads = p->lora == 'B' ? heads : 0; /* lora_B's rows are the weight's output rows */
        g->ndim = 2;
        g->ne[0] = p->logical_shape[1];
        g->ne[1] = p->logical_shape[0];
        g->type = type;
        if (g->ne[0] % zt_gguf_block_elems(type))
            return zt_error_set(err, ZT_ERR_USAGE, "export --gguf-lora %s --type %s: tensor %s (%s, shape %lld x %lld) "
                                "has rows of %lld elements, not a multiple of %s's block of %d; use f32, f16 or bf16",
                                path, zt_gguf_type_name(type), g->name, p->name, (long long)g->ne[1],
                                (long long)g->ne[0], (long long)g->ne[0], zt_gguf_type_name(type),
                                zt_gguf_block_elems(type));
        n++;
    }
    if (!n) return zt_error_set(err, ZT_ERR_USAGE, "export --gguf-lora %s: model %s has no LoRA adapters", path, m->name);
    *n_out = n;
    return ZT_OK;
}

static int plan_tensors(const zt_model *m, bool llama, const char *path, zt_gguf_type type, gguf_tensor **out,
                        int *n_out, zt_error *err) {
    gguf_tensor *t = calloc((size_t)m->n_params + 1, sizeof *t);
    if (!t) return zt_error_set(err, ZT_ERR_NOMEM, "export --gguf %s: out of memory", path);
    int n = 0;
    const zt_llama_config *lc = llama ? m->cfg : NULL;
    /* q4_k and q5_k: the LM head (output.weight, or token_embd.weight when tied) in Q6_K, as every
     * llama.cpp k-quant mix writes it (llama_tensor_get_type) */
    bool head_q6 = type == ZT_GGUF_Q4_K || type == ZT_GGUF_Q5_K, has_output = false;
    for (int i = 0; i < m->n_params && head_q6; i++) {
        char name[sizeof t->name];
        int heads;
        has_output |= !m->params[i].lora && zt_gguf_param_name(m, i, name, sizeof name, &heads) &&
                      !strcmp(name, "output.weight");
    }
    if (m->moe_experts > 0) { /* llama.cpp's stacked experts (ffn_*_exps) and router are not written yet */
        free(t);
        return zt_error_set(err, ZT_ERR_USAGE, "export --gguf %s: model %s is a mixture of experts (%d experts): not "
                            "built (export --hf writes its Mixtral or Qwen2-MoE directory)", path, m->name,
                            m->moe_experts);
    }
    if (lc && lc->qkv_bias && lc->rope_scaling.factor > 0) { /* llama.cpp's qwen2 reads no rope_freqs */
        free(t);
        return zt_error_set(err, ZT_ERR_USAGE, "export --gguf %s: model %s has q/k/v biases (llama.cpp's qwen2 "
                            "architecture) and rope scaling (model.rope_scaling.factor %g): llama.cpp's qwen2 takes "
                            "no rope_freqs, so the file would be another network", path, m->name,
                            (double)lc->rope_scaling.factor);
    }
    for (int i = 0; i < m->n_params; i++) {
        const zt_param_desc *p = &m->params[i];
        if (p->lora) continue; /* merged into their weights beforehand */
        gguf_tensor *g = &t[n];
        if (!zt_gguf_param_name(m, i, g->name, sizeof g->name, &g->heads)) {
            free(t);
            return zt_error_set(err, ZT_ERR_INTERNAL, "export --gguf %s: parameter %s of model %s has no llama.cpp "
                                "name (src/ckpt/gguf.c)", path, p->name, m->name);
        }
        g->param = i;
        g->ndim = p->ndim;
        g->ne[0] = p->logical_shape[p->ndim - 1];
        g->ne[1] = p->ndim == 2 ? p->logical_shape[0] : 1;
        g->type = p->ndim == 2 ? type : ZT_GGUF_F32;
        if (head_q6 && (!strcmp(g->name, "output.weight") || (!has_output && !strcmp(g->name, "token_embd.weight"))))
            g->type = ZT_GGUF_Q6_K;
        int blk = zt_gguf_block_elems(g->type);
        if (g->ne[0] % blk) {
            zt_error_set(err, ZT_ERR_USAGE, "export --gguf %s --type %s: tensor %s (%s, shape %lld x %lld) has rows of "
                         "%lld elements, not a multiple of %s's block of %d; use f32, f16, bf16%s", path,
                         zt_gguf_type_name(type), g->name, p->name, (long long)g->ne[1], (long long)g->ne[0],
                         (long long)g->ne[0], zt_gguf_type_name(g->type), blk,
                         blk == 256 && g->ne[0] % 32 == 0 ? ", q8_0 or q4_0" : "");
            free(t);
            return ZT_ERR_USAGE;
        }
        n++;
    }
    if (llama && lc->rope_scaling.factor > 0)
        t[n++] = (gguf_tensor){.name = "rope_freqs.weight", .param = -1, .ndim = 1,
                               .ne = {lc->n_embd / lc->n_head / 2, 1}, .type = ZT_GGUF_F32};
    lay_out(t, n);
    *out = t;
    *n_out = n;
    return ZT_OK;
}

static bool pad(FILE *f, uint64_t n) {
    static const char zeros[ALIGN];
    return n == 0 || fwrite(zeros, 1, (size_t)n, f) == n;
}

/* the tensor's data: gathered, permuted, encoded, written */
static int write_tensor(zt_engine *e, FILE *f, const gguf_tensor *g, const char *path, bool *ok, zt_error *err) {
    const zt_model *m = zt_engine_model(e);
    size_t cnt = (size_t)(g->ne[0] * g->ne[1]);
    float *full = malloc(cnt * sizeof *full), *tmp = malloc(cnt * sizeof *tmp);
    void *enc = malloc(g->bytes);
    int rc = ZT_OK;
    if (!full || !tmp || !enc) rc = zt_error_set(err, ZT_ERR_NOMEM, "export --gguf %s: out of memory for tensor %s",
                                                 path, g->name);
    if (!rc && g->param < 0) rope_factors(m->cfg, full);
    else if (!rc) rc = zt_engine_param_gather(e, g->param, full, err);
    if (!rc && g->heads) {
        zt_gguf_permute_rows(tmp, full, g->ne[1], g->ne[0], g->heads, false);
        float *s = full;
        full = tmp;
        tmp = s;
    }
    if (!rc) {
        zt_gguf_encode(g->type, enc, full, (int64_t)cnt);
        *ok = *ok && fwrite(enc, 1, g->bytes, f) == g->bytes;
        *ok = *ok && pad(f, (ALIGN - g->bytes % ALIGN) % ALIGN);
    }
    free(full);
    free(tmp);
    free(enc);
    return rc;
}

int zt_gguf_export(zt_engine *e, const char *path, const zt_gguf_export_options *o, int *n_tensors, zt_error *err) {
    const zt_model *m = zt_engine_model(e);
    bool llama = !strcmp(m->name, "llama");
    *n_tensors = 0;
    if (!llama && strcmp(m->name, "gpt2"))
        return zt_error_set(err, ZT_ERR_USAGE, "export --gguf %s: model %s has no GGUF architecture (gpt2, llama)",
                            path, m->name);
    gguf_tensor *t = NULL;
    int n = 0, rc;
    if (o->adapter) {
        if (!(t = calloc((size_t)m->n_params + 1, sizeof *t)))
            return zt_error_set(err, ZT_ERR_NOMEM, "export --gguf-lora %s: out of memory", path);
        if ((rc = plan_adapters(m, path, o->type, t, &n, err))) {
            free(t);
            return rc;
        }
        lay_out(t, n);
    } else if ((rc = plan_tensors(m, llama, path, o->type, &t, &n, err))) {
        return rc;
    }
    zt_gguf_kv kv = {0}, info = {0};
    model_keys(&kv, m, llama, o->type, o->adapter);
    if (!o->adapter && (rc = zt_gguf_vocab(&kv, o->tokenizer, o->n_tokenizer, m->vocab_size, err))) {
        zt_error_prefix(err, "export --gguf %s", path);
        goto out;
    }
    for (int i = 0; i < n; i++) {
        zt_gguf_kv_str_item(&info, t[i].name, strlen(t[i].name));
        put_u32(&info, (uint32_t)t[i].ndim);
        for (int d = 0; d < t[i].ndim; d++) put_u64(&info, (uint64_t)t[i].ne[d]);
        put_u32(&info, (uint32_t)t[i].type);
        put_u64(&info, t[i].offset);
    }
    if (kv.oom || info.oom) {
        rc = zt_error_set(err, ZT_ERR_NOMEM, "export --gguf %s: out of memory for the metadata", path);
        goto out;
    }
    zt_atomic_file af;
    if ((rc = zt_atomic_open(&af, path, err))) {
        zt_error_prefix(err, "export --gguf %s", path);
        goto out;
    }
    FILE *f = af.fp;
    uint32_t head[2] = {0x46554747u /* "GGUF" */, 3};
    uint64_t counts[2] = {(uint64_t)n, kv.count};
    uint64_t hdr = sizeof head + sizeof counts + kv.len + info.len;
    bool ok = fwrite(head, sizeof head, 1, f) == 1 && fwrite(counts, sizeof counts, 1, f) == 1 &&
              fwrite(kv.buf, 1, kv.len, f) == kv.len && fwrite(info.buf, 1, info.len, f) == info.len &&
              pad(f, (ALIGN - hdr % ALIGN) % ALIGN);
    for (int i = 0; i < n && ok && !rc; i++) rc = write_tensor(e, f, &t[i], path, &ok, err);
    if (rc) zt_atomic_abandon(&af);
    else if ((rc = zt_atomic_commit(&af, ok, "GGUF file", err))) zt_error_prefix(err, "export --gguf %s", path);
    if (!rc) *n_tensors = n;
out:
    free(kv.buf);
    free(info.buf);
    free(t);
    return rc;
}
