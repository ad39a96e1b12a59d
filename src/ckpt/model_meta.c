/* model_meta.c - the model record of checkpoints (model_meta.h): what `resume`, `export`, `sample`
 * and the score tool rebuild the model from. GPT-2's fields are the ones written before Llama
 * existed, so old manifests read as they did. */
#include "ckpt/model_meta.h"

#include <string.h>

cJSON *zt_model_meta_json(const zt_model *m) {
    zt_model_spec s;
    zt_error ignore;
    if (zt_model_spec_of(m, &s, &ignore)) return NULL;
    int L, NH, C, V, maxT;
    zt_model_spec_shape(&s, &L, &NH, &C, &V, &maxT);
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddStringToObject(o, "arch", zt_arch_name(s.arch));
    cJSON_AddNumberToObject(o, "max_seq_len", maxT);
    cJSON_AddNumberToObject(o, "vocab_size", V);
    cJSON_AddNumberToObject(o, "n_layer", L);
    cJSON_AddNumberToObject(o, "n_head", NH);
    cJSON_AddNumberToObject(o, "n_embd", C);
    if (s.arch == ZT_ARCH_LLAMA) {
        const zt_llama_config *c = &s.llama;
        cJSON_AddNumberToObject(o, "n_kv_head", c->n_kv_head);
        cJSON_AddNumberToObject(o, "intermediate_size", c->intermediate_size);
        cJSON_AddNumberToObject(o, "rope_theta", c->rope_theta);
        cJSON_AddNumberToObject(o, "rms_norm_eps", c->rms_norm_eps);
        cJSON *r = cJSON_AddObjectToObject(o, "rope_scaling");
        if (r) {
            cJSON_AddNumberToObject(r, "factor", c->rope_scaling.factor);
            cJSON_AddNumberToObject(r, "low_freq_factor", c->rope_scaling.low_freq_factor);
            cJSON_AddNumberToObject(r, "high_freq_factor", c->rope_scaling.high_freq_factor);
            cJSON_AddNumberToObject(r, "original_max_position_embeddings",
                                    c->rope_scaling.original_max_position_embeddings);
        }
        cJSON_AddBoolToObject(o, "tie_embeddings", c->tie_embeddings);
    }
    return o;
}

/* the number o[key], or *bad = key */
static double field(const cJSON *o, const char *key, const char **bad) {
    const cJSON *v = cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, key) : NULL;
    if (!cJSON_IsNumber(v)) {
        if (!*bad) *bad = key;
        return 0;
    }
    return v->valuedouble;
}

int zt_model_meta_parse(const cJSON *o, const char *where, zt_model_spec *out, zt_error *err) {
    memset(out, 0, sizeof *out);
    if (!cJSON_IsObject(o)) return zt_error_set(err, ZT_ERR_CKPT, "%s: no model object", where);
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, "arch");
    if (a && (!cJSON_IsString(a) || zt_arch_parse(a->valuestring, &out->arch, err)))
        return zt_error_set(err, ZT_ERR_CKPT, "%s: model.arch is not gpt2 or llama", where);
    const char *bad = NULL;
    zt_gpt2_config g = {.max_seq_len = (int)field(o, "max_seq_len", &bad),
                        .vocab_size = (int)field(o, "vocab_size", &bad),
                        .n_layer = (int)field(o, "n_layer", &bad),
                        .n_head = (int)field(o, "n_head", &bad),
                        .n_embd = (int)field(o, "n_embd", &bad)};
    out->gpt2 = g;
    if (out->arch == ZT_ARCH_LLAMA) {
        zt_llama_config *c = &out->llama;
        const cJSON *r = cJSON_GetObjectItemCaseSensitive(o, "rope_scaling");
        const cJSON *tie = cJSON_GetObjectItemCaseSensitive(o, "tie_embeddings");
        *c = (zt_llama_config){.max_seq_len = g.max_seq_len, .vocab_size = g.vocab_size, .n_layer = g.n_layer,
                               .n_head = g.n_head, .n_embd = g.n_embd,
                               .n_kv_head = (int)field(o, "n_kv_head", &bad),
                               .intermediate_size = (int)field(o, "intermediate_size", &bad),
                               .rope_theta = (float)field(o, "rope_theta", &bad),
                               .rms_norm_eps = (float)field(o, "rms_norm_eps", &bad),
                               .rope_scaling = {(float)field(r, "factor", &bad),
                                                (float)field(r, "low_freq_factor", &bad),
                                                (float)field(r, "high_freq_factor", &bad),
                                                (int)field(r, "original_max_position_embeddings", &bad)},
                               .tie_embeddings = cJSON_IsTrue(tie)};
        if (!cJSON_IsBool(tie) && !bad) bad = "tie_embeddings";
    }
    if (bad) return zt_error_set(err, ZT_ERR_CKPT, "%s: model.%s missing or not a number", where, bad);
    return ZT_OK;
}
