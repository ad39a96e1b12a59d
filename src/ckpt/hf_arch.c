/* hf_arch.c - the Hugging Face architecture table (hf_arch.h): for each model family, the
 * config.json fields it reads and refuses, the config.json it writes, and its parameters'
 * transformers names and layouts.
 *
 * GPT-2 (model_type gpt2): zerotrain's parameter names are GPT2Model's ("wte.weight",
 * "h.0.attn.c_attn.weight", ...); transformers' Conv1D stores (in, out), the transpose of
 * zerotrain's (out, in), for every 2-D parameter of a block; the LM head is tied to wte and not
 * stored. Checkpoints saved from GPT2LMHeadModel prefix names with "transformer.".
 * Llama (model_type llama, mistral): config.json is parsed into zt_hf_llama_config and its
 * names are transformers' LlamaForCausalLM ones: "model." + the name, except lm_head.weight; Linear
 * weights are (out, in) in both.
 * Mixtral (model_type mixtral): a Llama with experts (zerotrain's llama_moe.c); the router is
 * "model.layers.L.block_sparse_moe.gate.weight" as zerotrain names it, and each of zerotrain's
 * expert weights stacked by expert ("layers.L.block_sparse_moe.experts.w1.weight", (E·I, C)) is E
 * tensors "model.layers.L.block_sparse_moe.experts.E.w1.weight" (I, C) on disk (zt_hf_entries).
 * Qwen2 (model_type qwen2): a Llama with q/k/v biases (always; Qwen2ForCausalLM), names as Llama's.
 * Qwen2-MoE (model_type qwen2_moe): a Llama with experts and a gated shared expert (llama_moe_shared.c),
 * q/k/v biases unless qkv_bias is false;
 * "block_sparse_moe." is "mlp." on disk, the experts' w1, w2, w3 are experts.E.gate_proj, down_proj,
 * up_proj, the shared expert mlp.shared_expert.{gate,up,down}_proj and mlp.shared_expert_gate. */
#include "ckpt/hf_arch.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------
 * config.json field readers: each names the file and the field in its error. */

/* An integer field in [lo, hi]; absent: def (def < 0: required). */
static int get_int(const cJSON *j, const char *key, int def, int lo, int hi, const char *path, int *out,
                   zt_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    if (!v || cJSON_IsNull(v)) {
        if (def < 0) return zt_error_set(err, ZT_ERR_USAGE, "%s: field %s is missing", path, key);
        *out = def;
        return ZT_OK;
    }
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < lo || v->valuedouble > hi)
        return zt_error_set(err, ZT_ERR_USAGE, "%s: field %s must be an integer in [%d, %d]", path, key, lo, hi);
    *out = (int)v->valuedouble;
    return ZT_OK;
}

static int get_num(const cJSON *j, const char *key, double def, const char *path, double *out, zt_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    if (!v || cJSON_IsNull(v)) {
        *out = def;
        return ZT_OK;
    }
    if (!cJSON_IsNumber(v) || !(v->valuedouble > 0))
        return zt_error_set(err, ZT_ERR_USAGE, "%s: field %s must be a positive number", path, key);
    *out = v->valuedouble;
    return ZT_OK;
}

/* A mixture's router_aux_loss_coef (Mixtral's and Qwen2-MoE's field; transformers' default 0.001 when
 * absent or not a number); a negative one is refused. */
static int get_aux_coef(const cJSON *j, const char *path, double *out, zt_error *err) {
    const cJSON *aux = cJSON_GetObjectItemCaseSensitive(j, "router_aux_loss_coef");
    *out = cJSON_IsNumber(aux) ? aux->valuedouble : 0.001;
    if (!(*out >= 0))
        return zt_error_set(err, ZT_ERR_USAGE, "%s: field router_aux_loss_coef %g must be >= 0", path, *out);
    return ZT_OK;
}

/* A boolean field that must be `need` when present (absent: its default, which is `need`). */
static int want_bool(const cJSON *j, const char *key, bool need, const char *why, const char *path, zt_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    if (!v || cJSON_IsNull(v)) return ZT_OK;
    if (!cJSON_IsBool(v) || cJSON_IsTrue(v) != need)
        return zt_error_set(err, ZT_ERR_USAGE, "%s: field %s must be %s: %s", path, key, need ? "true" : "false", why);
    return ZT_OK;
}

/* A string field that, when present, must be one of the NULL-terminated list. */
static int want_str(const cJSON *j, const char *key, const char *const *ok, const char *path, zt_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    if (!v || cJSON_IsNull(v)) return ZT_OK;
    for (int i = 0; cJSON_IsString(v) && ok[i]; i++)
        if (!strcmp(v->valuestring, ok[i])) return ZT_OK;
    return zt_error_set(err, ZT_ERR_USAGE, "%s: field %s is %s; zerotrain builds %s", path, key,
                        cJSON_IsString(v) ? v->valuestring : "not a string", ok[0]);
}

/* ---------------------------------------------------------------------------------------------
 * GPT-2 */

/* config.json field -> zt_gpt2_config field (all required: transformers' defaults are GPT-2
 * small's, and a file without them is not one to guess at). */
static const struct {
    const char *key;
    size_t off;
} GPT2_FIELDS[] = {
    {"vocab_size", offsetof(zt_gpt2_config, vocab_size)}, {"n_positions", offsetof(zt_gpt2_config, max_seq_len)},
    {"n_embd", offsetof(zt_gpt2_config, n_embd)},         {"n_layer", offsetof(zt_gpt2_config, n_layer)},
    {"n_head", offsetof(zt_gpt2_config, n_head)},
};

static int gpt2_parse(const cJSON *j, const char *path, zt_hf_model_config *c, zt_error *err) {
    static const char *const act[] = {"gelu_new", "gelu_pytorch_tanh", NULL};
    zt_gpt2_config *g = &c->gpt2;
    int rc = ZT_OK;
    for (size_t i = 0; i < sizeof GPT2_FIELDS / sizeof *GPT2_FIELDS && !rc; i++)
        rc = get_int(j, GPT2_FIELDS[i].key, -1, 1, 1 << 24, path, (int *)((char *)g + GPT2_FIELDS[i].off), err);
    if (rc) return rc;
    if (g->n_embd % g->n_head)
        return zt_error_set(err, ZT_ERR_USAGE, "%s: field n_head %d does not divide n_embd %d", path, g->n_head,
                            g->n_embd);
    int inner = 0;
    double eps = 0;
    if ((rc = get_int(j, "n_inner", 4 * g->n_embd, 1, 1 << 26, path, &inner, err))) return rc;
    if (inner != 4 * g->n_embd)
        return zt_error_set(err, ZT_ERR_USAGE, "%s: field n_inner %d: zerotrain's GPT-2 MLP is 4 x n_embd = %d", path,
                            inner, 4 * g->n_embd);
    if ((rc = get_num(j, "layer_norm_epsilon", 1e-5, path, &eps, err))) return rc;
    if (fabs(eps - 1e-5) > 1e-12)
        return zt_error_set(err, ZT_ERR_USAGE, "%s: field layer_norm_epsilon %g: zerotrain's layernorm uses 1e-5",
                            path, eps);
    if ((rc = want_str(j, "activation_function", act, path, err)) ||
        (rc = want_bool(j, "tie_word_embeddings", true, "the LM head is wte", path, err)) ||
        (rc = want_bool(j, "scale_attn_weights", true, "attention scales by 1/sqrt(head size)", path, err)) ||
        (rc = want_bool(j, "scale_attn_by_inverse_layer_idx", false, "not implemented", path, err)) ||
        (rc = want_bool(j, "add_cross_attention", false, "a decoder-only model", path, err)))
        return rc;
    return ZT_OK;
}

static int gpt2_create(const zt_hf_model_config *c, zt_model **out, zt_error *err) {
    return zt_gpt2_create(&c->gpt2, out, err);
}

static void gpt2_write(const zt_model *m, cJSON *j) {
    const zt_gpt2_config *g = m->cfg;
    for (size_t i = 0; i < sizeof GPT2_FIELDS / sizeof *GPT2_FIELDS; i++)
        cJSON_AddNumberToObject(j, GPT2_FIELDS[i].key, *(const int *)((const char *)g + GPT2_FIELDS[i].off));
    cJSON_AddNumberToObject(j, "n_ctx", g->max_seq_len);
    cJSON_AddNullToObject(j, "n_inner");
    cJSON_AddStringToObject(j, "activation_function", "gelu_new");
    cJSON_AddNumberToObject(j, "layer_norm_epsilon", 1e-5);
    cJSON_AddNumberToObject(j, "initializer_range", 0.02);
    cJSON_AddBoolToObject(j, "scale_attn_weights", true);
    cJSON_AddBoolToObject(j, "tie_word_embeddings", true);
    cJSON_AddNumberToObject(j, "resid_pdrop", 0);
    cJSON_AddNumberToObject(j, "embd_pdrop", 0);
    cJSON_AddNumberToObject(j, "attn_pdrop", 0);
    if (g->vocab_size > 50256) { /* GPT-2's <|endoftext|> */
        cJSON_AddNumberToObject(j, "bos_token_id", 50256);
        cJSON_AddNumberToObject(j, "eos_token_id", 50256);
    }
}

static bool gpt2_name(const zt_param_desc *p, char *out, size_t cap, bool *transpose) {
    *transpose = p->ndim == 2 && strncmp(p->name, "h.", 2) == 0; /* the blocks' Conv1D weights */
    snprintf(out, cap, "%s", p->name);
    return true;
}

/* ---------------------------------------------------------------------------------------------
 * Llama / Mistral: config.json parsed into zt_hf_llama_config (transformers' LlamaConfig and
 * MistralConfig defaults where a field is absent). */

static int llama_parse(const cJSON *j, const char *path, zt_hf_model_config *c, zt_error *err) {
    static const char *const act[] = {"silu", NULL};
    zt_hf_llama_config *l = &c->llama;
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(j, "model_type");
    bool mistral = cJSON_IsString(mt) && !strcmp(mt->valuestring, "mistral");
    int rc;
    if ((rc = get_int(j, "vocab_size", 32000, 2, 1 << 24, path, &l->vocab_size, err)) ||
        (rc = get_int(j, "hidden_size", 4096, 1, 1 << 20, path, &l->hidden_size, err)) ||
        (rc = get_int(j, "intermediate_size", mistral ? 14336 : 11008, 1, 1 << 22, path, &l->intermediate_size,
                      err)) ||
        (rc = get_int(j, "num_hidden_layers", 32, 1, 4096, path, &l->num_hidden_layers, err)) ||
        (rc = get_int(j, "num_attention_heads", 32, 1, 4096, path, &l->num_attention_heads, err)) ||
        (rc = get_int(j, "num_key_value_heads", mistral ? 8 : l->num_attention_heads, 1, 4096, path,
                      &l->num_key_value_heads, err)) ||
        (rc = get_int(j, "max_position_embeddings", mistral ? 4096 * 32 : 2048, 1, 1 << 24, path,
                      &l->max_position_embeddings, err)) ||
        (rc = get_num(j, "rms_norm_eps", mistral ? 1e-5 : 1e-6, path, &l->rms_norm_eps, err)) ||
        (rc = get_num(j, "rope_theta", 10000.0, path, &l->rope_theta, err)) ||
        (rc = want_str(j, "hidden_act", act, path, err)) ||
        (rc = want_bool(j, "attention_bias", false, "zerotrain's Llama attention has q/k/v biases only (Qwen2's: "
                        "model_type qwen2), not o_proj's", path, err)) ||
        (rc = want_bool(j, "mlp_bias", false, "zerotrain's Llama has no biases", path, err)))
        return rc;
    if (l->hidden_size % l->num_attention_heads)
        return zt_error_set(err, ZT_ERR_USAGE, "%s: field num_attention_heads %d does not divide hidden_size %d", path,
                            l->num_attention_heads, l->hidden_size);
    if (l->num_attention_heads % l->num_key_value_heads)
        return zt_error_set(err, ZT_ERR_USAGE, "%s: field num_key_value_heads %d does not divide "
                            "num_attention_heads %d", path, l->num_key_value_heads, l->num_attention_heads);
    int head_dim = 0;
    if ((rc = get_int(j, "head_dim", l->hidden_size / l->num_attention_heads, 1, 1 << 16, path, &head_dim, err)))
        return rc;
    if (head_dim != l->hidden_size / l->num_attention_heads)
        return zt_error_set(err, ZT_ERR_USAGE, "%s: field head_dim %d: zerotrain needs hidden_size / "
                            "num_attention_heads = %d", path, head_dim, l->hidden_size / l->num_attention_heads);
    const cJSON *tie = cJSON_GetObjectItemCaseSensitive(j, "tie_word_embeddings");
    l->tie_word_embeddings = cJSON_IsTrue(tie);
    l->rope_scaling_type[0] = '\0';
    const cJSON *rs = cJSON_GetObjectItemCaseSensitive(j, "rope_scaling");
    if (rs && !cJSON_IsNull(rs)) {
        const cJSON *ty = cJSON_GetObjectItemCaseSensitive(rs, "rope_type");
        if (!ty) ty = cJSON_GetObjectItemCaseSensitive(rs, "type");
        if (!cJSON_IsObject(rs) || !cJSON_IsString(ty) || strcmp(ty->valuestring, "llama3") != 0)
            return zt_error_set(err, ZT_ERR_USAGE, "%s: field rope_scaling: zerotrain builds rope_type llama3 only "
                                "(got %s)", path, cJSON_IsString(ty) ? ty->valuestring : "no rope_type");
        snprintf(l->rope_scaling_type, sizeof l->rope_scaling_type, "%s", ty->valuestring);
        double omax = 0;
        if ((rc = get_num(rs, "factor", 8.0, path, &l->rope_factor, err)) ||
            (rc = get_num(rs, "low_freq_factor", 1.0, path, &l->rope_low_freq_factor, err)) ||
            (rc = get_num(rs, "high_freq_factor", 4.0, path, &l->rope_high_freq_factor, err)) ||
            (rc = get_num(rs, "original_max_position_embeddings", 8192, path, &omax, err)))
            return rc;
        l->rope_original_max_position_embeddings = (int)omax;
    }
    return ZT_OK;
}

/* Mixtral: Llama's fields (MixtralConfig's defaults are Mistral's) and the experts'. Routing noise
 * is not built; sliding_window is not read (as Mistral's). */
static int mixtral_parse(const cJSON *j, const char *path, zt_hf_model_config *c, zt_error *err) {
    zt_hf_llama_config *l = &c->llama;
    int rc = llama_parse(j, path, c, err);
    if (rc) return rc;
    double jitter = 0;
    const cJSON *jn = cJSON_GetObjectItemCaseSensitive(j, "router_jitter_noise");
    if (cJSON_IsNumber(jn)) jitter = jn->valuedouble;
    if (jitter != 0)
        return zt_error_set(err, ZT_ERR_USAGE, "%s: field router_jitter_noise %g: zerotrain's router adds no noise "
                            "(0)", path, jitter);
    if ((rc = get_aux_coef(j, path, &l->router_aux_loss_coef, err))) return rc;
    if ((rc = get_int(j, "num_local_experts", 8, 2, 4096, path, &l->num_local_experts, err)) ||
        (rc = get_int(j, "num_experts_per_tok", 2, 1, l->num_local_experts, path, &l->num_experts_per_tok, err)))
        return rc;
    l->norm_topk_prob = true;
    return ZT_OK;
}

/* Qwen2's and Qwen2-MoE's config.json fields zerotrain knows: read (the shape, the experts'), or
 * known and without effect on training here (ids, dtypes, dropout 0, sliding-window sizes with
 * use_sliding_window false, layer_types all full_attention). Any other field is refused by name: it
 * may change the network. */
static const char *const QWEN2_KNOWN[] = {
    "architectures", "model_type", "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
    "num_attention_heads", "num_key_value_heads", "max_position_embeddings", "rms_norm_eps", "rope_theta",
    "rope_scaling", "hidden_act", "head_dim", "tie_word_embeddings", "attention_bias", "mlp_bias",
    "use_sliding_window", "sliding_window", "max_window_layers", "layer_types", "attention_dropout",
    "initializer_range", "use_cache", "bos_token_id", "eos_token_id", "pad_token_id", "torch_dtype", "dtype",
    "transformers_version", "_name_or_path", "producer", NULL};
static const char *const QWEN2_MOE_KNOWN[] = {
    "qkv_bias", "num_experts", "num_experts_per_tok", "moe_intermediate_size", "shared_expert_intermediate_size",
    "norm_topk_prob", "router_aux_loss_coef", "output_router_logits", "decoder_sparse_step", "mlp_only_layers",
    NULL};

/* The shape fields a Qwen2 config.json must state (transformers' defaults are one model's, not to
 * guess at), and a Qwen2-MoE's too. */
static const char *const QWEN2_REQUIRED[] = {
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "max_position_embeddings", "rms_norm_eps", "rope_theta", NULL};
static const char *const QWEN2_MOE_REQUIRED[] = {"num_experts", "num_experts_per_tok", "moe_intermediate_size",
                                                 "shared_expert_intermediate_size", NULL};

static bool listed(const char *key, const char *const *list) {
    for (int i = 0; list && list[i]; i++)
        if (!strcmp(key, list[i])) return true;
    return false;
}

/* Qwen2's fields (and, moe, Qwen2-MoE's): every field known, the shape stated, then Llama's reader;
 * no sliding window, every layer full attention. */
static int qwen2_fields_parse(const cJSON *j, const char *path, bool moe, zt_hf_model_config *c, zt_error *err) {
    const char *family = moe ? "Qwen2-MoE" : "Qwen2";
    for (const cJSON *f = j->child; f; f = f->next)
        if (!listed(f->string, QWEN2_KNOWN) && !(moe && listed(f->string, QWEN2_MOE_KNOWN)))
            return zt_error_set(err, ZT_ERR_USAGE, "%s: field %s: not a %s field zerotrain knows (it may change the "
                                "network; src/ckpt/hf_arch.c lists the known ones)", path, f->string, family);
    for (int k = 0; k < (moe ? 2 : 1); k++) {
        const char *const *req = k ? QWEN2_MOE_REQUIRED : QWEN2_REQUIRED;
        for (int i = 0; req[i]; i++)
            if (!cJSON_GetObjectItemCaseSensitive(j, req[i]))
                return zt_error_set(err, ZT_ERR_USAGE, "%s: field %s is missing (zerotrain reads a %s's shape from "
                                    "config.json, not transformers' defaults)", path, req[i], family);
    }
    int rc = llama_parse(j, path, c, err);
    if (rc || (rc = want_bool(j, "use_sliding_window", false, "sliding-window attention is not built", path, err)))
        return rc;
    const cJSON *lt = cJSON_GetObjectItemCaseSensitive(j, "layer_types"), *t;
    if (lt && !cJSON_IsNull(lt)) {
        if (!cJSON_IsArray(lt))
            return zt_error_set(err, ZT_ERR_USAGE, "%s: field layer_types must be a list", path);
        cJSON_ArrayForEach(t, lt) if (!cJSON_IsString(t) || strcmp(t->valuestring, "full_attention"))
            return zt_error_set(err, ZT_ERR_USAGE, "%s: field layer_types lists %s: only full_attention layers are "
                                "built (no sliding window)", path, cJSON_IsString(t) ? t->valuestring : "a non-string");
    }
    return ZT_OK;
}

/* Qwen2 (transformers' Qwen2ForCausalLM): Llama's fields, q/k/v biases always (Qwen2Config has no
 * field for them). */
static int qwen2_parse(const cJSON *j, const char *path, zt_hf_model_config *c, zt_error *err) {
    int rc = qwen2_fields_parse(j, path, false, c, err);
    c->llama.qkv_bias = true;
    return rc;
}

/* Qwen2-MoE (transformers' Qwen2MoeForCausalLM): Qwen2's fields, every layer sparse (decoder_sparse_step
 * 1, no mlp_only_layers), a shared expert with its sigmoid gate, the top-k kept as probabilities
 * unless norm_topk_prob, and q/k/v biases unless qkv_bias is false (transformers' default: true). */
static int qwen2_moe_parse(const cJSON *j, const char *path, zt_hf_model_config *c, zt_error *err) {
    zt_hf_llama_config *l = &c->llama;
    int rc = qwen2_fields_parse(j, path, true, c, err);
    if (rc) return rc;
    const cJSON *qb = cJSON_GetObjectItemCaseSensitive(j, "qkv_bias");
    if (qb && !cJSON_IsNull(qb) && !cJSON_IsBool(qb))
        return zt_error_set(err, ZT_ERR_USAGE, "%s: field qkv_bias must be a boolean", path);
    l->qkv_bias = !cJSON_IsFalse(qb);
    int step = 1;
    if ((rc = get_int(j, "decoder_sparse_step", 1, 1, 4096, path, &step, err))) return rc;
    if (step != 1)
        return zt_error_set(err, ZT_ERR_USAGE, "%s: field decoder_sparse_step %d: dense layers between the sparse "
                            "ones are not built (1: every layer has experts)", path, step);
    const cJSON *only = cJSON_GetObjectItemCaseSensitive(j, "mlp_only_layers");
    if (only && !cJSON_IsNull(only) && (!cJSON_IsArray(only) || cJSON_GetArraySize(only) != 0))
        return zt_error_set(err, ZT_ERR_USAGE, "%s: field mlp_only_layers lists %d layers: dense layers in a mixture "
                            "are not built (an empty list)", path, cJSON_IsArray(only) ? cJSON_GetArraySize(only) : -1);
    const cJSON *ntp = cJSON_GetObjectItemCaseSensitive(j, "norm_topk_prob");
    if (ntp && !cJSON_IsNull(ntp) && !cJSON_IsBool(ntp))
        return zt_error_set(err, ZT_ERR_USAGE, "%s: field norm_topk_prob must be a boolean", path);
    l->norm_topk_prob = cJSON_IsTrue(ntp); /* Qwen2MoeConfig's default: false */
    if ((rc = get_aux_coef(j, path, &l->router_aux_loss_coef, err))) return rc;
    if ((rc = get_int(j, "num_experts", 60, 2, 4096, path, &l->num_local_experts, err)) ||
        (rc = get_int(j, "num_experts_per_tok", 4, 1, l->num_local_experts, path, &l->num_experts_per_tok, err)) ||
        (rc = get_int(j, "moe_intermediate_size", 1408, 1, 1 << 22, path, &l->moe_intermediate_size, err)) ||
        (rc = get_int(j, "shared_expert_intermediate_size", 5632, 1, 1 << 22, path,
                      &l->shared_expert_intermediate_size, err)))
        return rc;
    return ZT_OK;
}

/* The Llama model config.json describes (zerotrain's llama.c; Mistral v0.1 is the same network
 * with full attention within its context: sliding_window is not read). */
static int llama_create(const zt_hf_model_config *c, zt_model **out, zt_error *err) {
    const zt_hf_llama_config *l = &c->llama;
    zt_model_spec spec = {.arch = ZT_ARCH_LLAMA};
    spec.llama = (zt_llama_config){.max_seq_len = l->max_position_embeddings, .vocab_size = l->vocab_size,
                                   .n_layer = l->num_hidden_layers, .n_head = l->num_attention_heads,
                                   .n_embd = l->hidden_size, .n_kv_head = l->num_key_value_heads,
                                   .intermediate_size = l->intermediate_size, .rope_theta = (float)l->rope_theta,
                                   .rms_norm_eps = (float)l->rms_norm_eps, .tie_embeddings = l->tie_word_embeddings,
                                   .n_experts = l->num_local_experts, .n_experts_per_token = l->num_experts_per_tok,
                                   .norm_topk_prob = l->norm_topk_prob,
                                   .router_aux_loss_coef = (float)l->router_aux_loss_coef,
                                   .moe_intermediate_size = l->moe_intermediate_size,
                                   .shared_expert_intermediate_size = l->shared_expert_intermediate_size,
                                   .shared_expert_gate = l->shared_expert_intermediate_size > 0,
                                   .qkv_bias = l->qkv_bias};
    if (l->rope_scaling_type[0])
        spec.llama.rope_scaling = (zt_rope_scaling){(float)l->rope_factor, (float)l->rope_low_freq_factor,
                                                    (float)l->rope_high_freq_factor,
                                                    l->rope_original_max_position_embeddings};
    return zt_model_spec_create(&spec, out, err);
}

/* the fields every Llama row writes */
static void llama_fields(const zt_model *m, cJSON *j) {
    const zt_llama_config *l = m->cfg;
    cJSON_AddNumberToObject(j, "vocab_size", l->vocab_size);
    cJSON_AddNumberToObject(j, "hidden_size", l->n_embd);
    cJSON_AddNumberToObject(j, "intermediate_size", l->intermediate_size);
    cJSON_AddNumberToObject(j, "num_hidden_layers", l->n_layer);
    cJSON_AddNumberToObject(j, "num_attention_heads", l->n_head);
    cJSON_AddNumberToObject(j, "num_key_value_heads", l->n_kv_head);
    cJSON_AddNumberToObject(j, "max_position_embeddings", l->max_seq_len);
    cJSON_AddNumberToObject(j, "rms_norm_eps", l->rms_norm_eps);
    cJSON_AddNumberToObject(j, "rope_theta", l->rope_theta);
    cJSON_AddStringToObject(j, "hidden_act", "silu");
    cJSON_AddBoolToObject(j, "attention_bias", false);
    cJSON_AddBoolToObject(j, "mlp_bias", false);
    cJSON_AddBoolToObject(j, "tie_word_embeddings", l->tie_embeddings);
    if (l->rope_scaling.factor > 0) {
        cJSON *rs = cJSON_AddObjectToObject(j, "rope_scaling");
        cJSON_AddStringToObject(rs, "rope_type", "llama3");
        cJSON_AddNumberToObject(rs, "factor", l->rope_scaling.factor);
        cJSON_AddNumberToObject(rs, "low_freq_factor", l->rope_scaling.low_freq_factor);
        cJSON_AddNumberToObject(rs, "high_freq_factor", l->rope_scaling.high_freq_factor);
        cJSON_AddNumberToObject(rs, "original_max_position_embeddings", l->rope_scaling.original_max_position_embeddings);
    } else {
        cJSON_AddNullToObject(j, "rope_scaling");
    }
}

static void llama_write(const zt_model *m, cJSON *j) {
    const zt_llama_config *l = m->cfg;
    llama_fields(m, j);
    if (l->n_experts > 0) { /* Mixtral's (its experts' width is intermediate_size) */
        cJSON_ReplaceItemInObject(j, "intermediate_size", cJSON_CreateNumber(l->moe_intermediate_size > 0 ? l->moe_intermediate_size : l->intermediate_size));
        cJSON_AddNumberToObject(j, "num_local_experts", l->n_experts);
        cJSON_AddNumberToObject(j, "num_experts_per_tok", l->n_experts_per_token);
        cJSON_AddNumberToObject(j, "router_aux_loss_coef", l->router_aux_loss_coef);
        cJSON_AddNumberToObject(j, "router_jitter_noise", 0);
        cJSON_AddBoolToObject(j, "output_router_logits", l->router_aux_loss_coef > 0);
    }
}

static bool llama_name(const zt_param_desc *p, char *out, size_t cap, bool *transpose) {
    *transpose = false; /* torch.nn.Linear stores (out, in), as zerotrain does */
    snprintf(out, cap, "%s%s", strncmp(p->name, "lm_head.", 8) ? "model." : "", p->name);
    return true;
}

/* the shared expert's width as llama_moe_shared.c takes it */
static int shared_width(const zt_llama_config *l) {
    if (l->n_experts < 1) return 0;
    if (l->shared_expert_intermediate_size > 0) return l->shared_expert_intermediate_size;
    return l->n_shared_experts * (l->moe_intermediate_size > 0 ? l->moe_intermediate_size : l->intermediate_size);
}

/* Qwen2: Llama's fields (its q/k/v biases have no field), no sliding window */
static void qwen2_write(const zt_model *m, cJSON *j) {
    llama_fields(m, j);
    cJSON_AddBoolToObject(j, "use_sliding_window", false);
}

static void qwen2_moe_write(const zt_model *m, cJSON *j) {
    const zt_llama_config *l = m->cfg;
    llama_fields(m, j);
    cJSON_AddBoolToObject(j, "qkv_bias", l->qkv_bias);
    cJSON_AddNumberToObject(j, "num_experts", l->n_experts);
    cJSON_AddNumberToObject(j, "num_experts_per_tok", l->n_experts_per_token);
    cJSON_AddNumberToObject(j, "moe_intermediate_size", l->moe_intermediate_size > 0 ? l->moe_intermediate_size
                                                                                    : l->intermediate_size);
    cJSON_AddNumberToObject(j, "shared_expert_intermediate_size", shared_width(l));
    cJSON_AddBoolToObject(j, "norm_topk_prob", l->norm_topk_prob);
    cJSON_AddNumberToObject(j, "router_aux_loss_coef", l->router_aux_loss_coef);
    cJSON_AddBoolToObject(j, "output_router_logits", l->router_aux_loss_coef > 0);
    cJSON_AddNumberToObject(j, "decoder_sparse_step", 1);
    cJSON_AddArrayToObject(j, "mlp_only_layers");
    cJSON_AddBoolToObject(j, "use_sliding_window", false);
}

/* Qwen2-MoE: "block_sparse_moe." is "mlp." (the experts' w1, w2, w3: QWEN2_MOE_EXPERTS) */
static bool qwen2_moe_name(const zt_param_desc *p, char *out, size_t cap, bool *transpose) {
    llama_name(p, out, cap, transpose);
    char *b = strstr(out, "block_sparse_moe.");
    if (b) memmove(b + 4, b + 17, strlen(b + 17) + 1), memcpy(b, "mlp.", 4);
    return true;
}

static const char *const QWEN2_MOE_EXPERTS[] = {"gate_proj", "down_proj", "up_proj"}; /* w1, w2, w3 */

/* ---------------------------------------------------------------------------------------------
 * The table. */

static const zt_hf_arch ARCHS[] = {
    {"gpt2", "GPT2LMHeadModel", "gpt2", gpt2_parse, gpt2_create, gpt2_write, gpt2_name, "transformer.", NULL},
    {"llama", "LlamaForCausalLM", "llama", llama_parse, llama_create, llama_write, llama_name, NULL, NULL},
    {"mistral", "MistralForCausalLM", "mistral", llama_parse, llama_create, llama_write, llama_name, NULL, NULL},
    {"qwen2", "Qwen2ForCausalLM", "qwen2", qwen2_parse, llama_create, qwen2_write, llama_name, NULL, NULL},
    {"mixtral", "MixtralForCausalLM", "llama-moe", mixtral_parse, llama_create, llama_write, llama_name, NULL, NULL},
    {"qwen2_moe", "Qwen2MoeForCausalLM", "llama-moe-shared", qwen2_moe_parse, llama_create, qwen2_moe_write,
     qwen2_moe_name, NULL, QWEN2_MOE_EXPERTS},
};
#define N_ARCHS ((int)(sizeof ARCHS / sizeof *ARCHS))

const zt_hf_arch *zt_hf_arch_by_type(const char *model_type) {
    for (int i = 0; i < N_ARCHS; i++)
        if (!strcmp(ARCHS[i].model_type, model_type)) return &ARCHS[i];
    return NULL;
}

int zt_hf_arch_for_model(const zt_model *m, const zt_hf_arch **out, zt_error *err) {
    const char *name = m->name;
    const zt_llama_config *lc = !strcmp(m->name, "llama") ? m->cfg : NULL;
    if (lc && lc->qkv_bias && m->moe_experts == 0) name = "qwen2"; /* a dense Llama with q/k/v biases */
    if (lc && lc->qkv_bias && m->moe_experts > 0 && shared_width(lc) == 0)
        return zt_error_set(err, ZT_ERR_USAGE, "model llama with experts, q/k/v biases and no shared expert: Mixtral's "
                            "layout has no biases, so no Hugging Face architecture row exports it (Qwen2-MoE's has a "
                            "shared expert)");
    if (m->moe_experts > 0 && !strcmp(m->name, "llama")) { /* Mixtral's layout, or Qwen2-MoE's with a shared expert */
        const zt_llama_config *l = m->cfg;
        name = shared_width(l) > 0 ? "llama-moe-shared" : "llama-moe";
        if (shared_width(l) > 0 && !l->shared_expert_gate)
            return zt_error_set(err, ZT_ERR_USAGE, "model llama with a shared expert of width %d and no "
                                "shared_expert_gate: no Hugging Face architecture row exports it (Qwen2-MoE's "
                                "shared expert is gated; DeepSeek-MoE's layout is not built)", shared_width(l));
        if (shared_width(l) == 0 && !l->norm_topk_prob) /* Mixtral always renormalizes the top-k weights */
            return zt_error_set(err, ZT_ERR_USAGE, "model llama with experts and norm_topk_prob false: Mixtral's "
                                "layout renormalizes the top-k weights, so its directory would be another network "
                                "(export a checkpoint with model.norm_topk_prob true, or keep the checkpoint)");
    }
    for (int i = 0; i < N_ARCHS; i++)
        if (!strcmp(ARCHS[i].model_name, name)) {
            *out = &ARCHS[i];
            return ZT_OK;
        }
    return zt_error_set(err, ZT_ERR_USAGE, "model %s: no Hugging Face architecture row exports it (src/ckpt/hf_arch.c)",
                        m->name);
}

int zt_hf_config_parse(const char *json, size_t len, const char *path, zt_hf_model_config *c, zt_error *err) {
    memset(c, 0, sizeof *c);
    cJSON *j = cJSON_ParseWithLength(json, len);
    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        return zt_error_set(err, ZT_ERR_USAGE, "%s: not a JSON object", path);
    }
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(j, "model_type");
    int rc;
    if (!cJSON_IsString(mt)) {
        rc = zt_error_set(err, ZT_ERR_USAGE, "%s: field model_type is missing or not a string", path);
    } else if (!(c->arch = zt_hf_arch_by_type(mt->valuestring))) {
        char known[256] = "";
        for (int i = 0; i < N_ARCHS; i++)
            snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", i ? ", " : "", ARCHS[i].model_type);
        rc = zt_error_set(err, ZT_ERR_USAGE, "%s: field model_type \"%s\" is not an architecture zerotrain builds "
                          "(known: %s)", path, mt->valuestring, known);
    } else {
        rc = c->arch->parse(j, path, c, err);
    }
    cJSON_Delete(j);
    return rc;
}

int zt_hf_entries(const zt_model *m, zt_st_entry **ents, int *n, zt_error *err) {
    const zt_hf_arch *a = NULL; /* set by zt_hf_arch_for_model on success */
    *ents = NULL;
    *n = 0;
    int rc = zt_hf_arch_for_model(m, &a, err);
    if (rc) return rc;
    int E = m->moe_experts > 0 ? m->moe_experts : 1;
    zt_st_entry *v = calloc((size_t)m->n_params * E + 1, sizeof *v);
    if (!v) return zt_error_set(err, ZT_ERR_NOMEM, "out of memory for %d tensor names", m->n_params);
    int k = 0;
    for (int i = 0; i < m->n_params; i++) { /* LoRA adapters are not in a model directory (peft.c writes them) */
        if (m->params[i].lora || !a->name(&m->params[i], v[k].name, sizeof v[k].name, &v[k].transpose)) continue;
        const char *x = strstr(v[k].name, ".experts.w");
        if (!x || E < 2) {
            v[k++].param = i;
            continue;
        }
        char head[sizeof v[k].name], tail[sizeof v[k].name]; /* experts.w1 -> experts.0.w1, experts.1.w1, ... */
        snprintf(head, sizeof head, "%.*s", (int)(x - v[k].name + 9), v[k].name);
        snprintf(tail, sizeof tail, "%s", x + 9);
        if (a->expert_weights && tail[1] >= '1' && tail[1] <= '3') /* w1 -> gate_proj, ... (Qwen2-MoE) */
            snprintf(tail, sizeof tail, "%s%s", a->expert_weights[tail[1] - '1'], x + 11);
        for (int ex = 0; ex < E; ex++, k++) {
            if (snprintf(v[k].name, sizeof v[k].name, "%s%d.%s", head, ex, tail) >= (int)sizeof v[k].name) {
                free(v);
                return zt_error_set(err, ZT_ERR_USAGE, "tensor name %s%d.%s is too long", head, ex, tail);
            }
            v[k].param = i, v[k].transpose = false, v[k].parts = E, v[k].part = ex;
        }
    }
    *ents = v;
    *n = k;
    return ZT_OK;
}

bool zt_hf_has_in_file(const void *st_file, const char *name) { return zt_st_has(st_file, name); }

void zt_hf_alt_name(const zt_model *m, zt_hf_has_fn has, const void *ctx, zt_st_entry *ent) {
    const zt_hf_arch *a = NULL; /* set by zt_hf_arch_for_model on success */
    zt_error ignore;
    if (has(ctx, ent->name) || zt_hf_arch_for_model(m, &a, &ignore)) return;
    char alt[sizeof ent->name];
    if (a->alt_prefix) {
        snprintf(alt, sizeof alt, "%s%s", a->alt_prefix, ent->name);
        if (has(ctx, alt)) {
            memcpy(ent->name, alt, sizeof alt);
            return;
        }
    }
    snprintf(alt, sizeof alt, "%s", m->params[ent->param].name);
    if (has(ctx, alt)) memcpy(ent->name, alt, sizeof alt);
}

bool zt_hf_buffer_name(const char *name) {
    static const char *const BUFFERS[] = {".rotary_emb.inv_freq", ".attn.bias", ".attn.masked_bias"};
    size_t n = strlen(name);
    for (size_t i = 0; i < sizeof BUFFERS / sizeof *BUFFERS; i++) {
        size_t b = strlen(BUFFERS[i]);
        if (n > b && !strcmp(name + n - b, BUFFERS[i])) return true;
    }
    return false;
}

int zt_hf_check_extra(const zt_model *m, const zt_st_entry *ents, int n, const char *name, const char *file,
                      zt_error *err) {
    for (int i = 0; i < n; i++)
        if (!strcmp(ents[i].name, name)) return ZT_OK;
    if (zt_hf_buffer_name(name)) return ZT_OK;
    return zt_error_set(err, ZT_ERR_CKPT, "%s: tensor %s is not one of model %s's %d tensors: a checkpoint of another "
                        "architecture or shape (config.json, model.* keys)?", file, name, m->name, n);
}
