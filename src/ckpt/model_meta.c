/* model_meta.c - the model record of checkpoints (model_meta.h): what `resume`, `export`, `sample`
 * and the score tool rebuild the model from. GPT-2's fields are the ones written before Llama
 * existed, so old manifests read as they did; and the manifest's tensor list against a model. */
#include "ckpt/model_meta.h"

#include <stdio.h>
#include <string.h>

/* appends to a bounded list; once full, counts what did not fit in *dropped */
static void list_add(char *buf, size_t cap, const char *item, int *dropped) {
    size_t len = strlen(buf);
    if (len + strlen(item) + 3 >= cap) {
        (*dropped)++;
        return;
    }
    snprintf(buf + len, cap - len, "%s%s", len ? ", " : "", item);
}

static void shape_text(char *out, size_t cap, const int64_t *dims, int nd) {
    size_t len = (size_t)snprintf(out, cap, "[");
    for (int d = 0; d < nd && len < cap; d++)
        len += (size_t)snprintf(out + len, cap - len, "%s%lld", d ? "," : "", (long long)dims[d]);
    if (len < cap) snprintf(out + len, cap - len, "]");
}

/* model_meta.h: the manifest's tensors against the model, one error listing every difference */
int zt_model_meta_compare(const char *commit, const cJSON *tensors, const zt_model *m, zt_error *err) {
    int nt = cJSON_GetArraySize(tensors), nmiss = 0, nextra = 0, nshape = 0, nmoved = 0, dropped = 0;
    char miss[400] = "", extra[400] = "", shapes[600] = "", item[300], a[96], b[96];
    for (int i = 0; i < m->n_params; i++) { /* the model's tensors: present? same shape? */
        const zt_param_desc *p = &m->params[i];
        const cJSON *tj = NULL, *t;
        int at = 0, found = -1;
        cJSON_ArrayForEach(t, tensors) {
            const cJSON *name = cJSON_GetObjectItemCaseSensitive(t, "name");
            if (cJSON_IsString(name) && !strcmp(name->valuestring, p->name)) {
                tj = t;
                found = at;
                break;
            }
            at++;
        }
        if (!tj) {
            nmiss++;
            list_add(miss, sizeof miss, p->name, &dropped);
            continue;
        }
        if (found != i) nmoved++;
        const cJSON *shape = cJSON_GetObjectItemCaseSensitive(tj, "shape");
        int nd = cJSON_GetArraySize(shape);
        int64_t dims[8];
        bool same = cJSON_IsArray(shape) && nd == p->ndim && nd <= 8;
        for (int d = 0; d < nd && d < 8; d++) {
            const cJSON *v = cJSON_GetArrayItem(shape, d);
            dims[d] = cJSON_IsNumber(v) ? (int64_t)v->valuedouble : -1;
            if (d < p->ndim && dims[d] != p->logical_shape[d]) same = false; /* the logical tensor */
        }
        if (same) continue;
        nshape++;
        shape_text(a, sizeof a, dims, nd < 8 ? nd : 8);
        shape_text(b, sizeof b, p->logical_shape, p->ndim);
        snprintf(item, sizeof item, "%s %s vs %s", p->name, a, b);
        list_add(shapes, sizeof shapes, item, &dropped);
    }
    const cJSON *t;
    cJSON_ArrayForEach(t, tensors) { /* the checkpoint's tensors the model lacks */
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(t, "name");
        bool known = false;
        for (int i = 0; cJSON_IsString(name) && i < m->n_params && !known; i++)
            known = !strcmp(name->valuestring, m->params[i].name);
        if (known) continue;
        nextra++;
        list_add(extra, sizeof extra, cJSON_IsString(name) ? name->valuestring : "(unnamed)", &dropped);
    }
    if (!nmiss && !nextra && !nshape && !nmoved && nt == m->n_params) return ZT_OK;
    char more[48] = "";
    if (dropped) snprintf(more, sizeof more, "; %d more not listed", dropped);
    return zt_error_set(err, ZT_ERR_CKPT, "%s: the model (%d tensors) does not match the checkpoint (%d): "
                        "%d missing [%s]; %d unexpected [%s]; %d shapes differ, checkpoint vs model [%s]%s%s",
                        commit, m->n_params, nt, nmiss, miss, nextra, extra, nshape, shapes,
                        nmoved && !nmiss && !nextra ? "; tensors in another order" : "", more);
}

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
        if (c->qkv_bias) cJSON_AddBoolToObject(o, "qkv_bias", true); /* absent: none (the records before it) */
        if (c->n_experts > 0) { /* a mixture of experts: absent for a dense model */
            cJSON *x = cJSON_AddObjectToObject(o, "moe");
            if (x) {
                cJSON_AddNumberToObject(x, "n_experts", c->n_experts);
                cJSON_AddNumberToObject(x, "n_experts_per_token", c->n_experts_per_token);
                cJSON_AddNumberToObject(x, "moe_intermediate_size", c->moe_intermediate_size);
                cJSON_AddNumberToObject(x, "n_shared_experts", c->n_shared_experts);
                cJSON_AddBoolToObject(x, "norm_topk_prob", c->norm_topk_prob);
                cJSON_AddNumberToObject(x, "router_aux_loss_coef", c->router_aux_loss_coef);
                cJSON_AddNumberToObject(x, "router_z_loss_coef", c->router_z_loss_coef);
                cJSON_AddNumberToObject(x, "capacity_factor", c->capacity_factor);
                cJSON_AddNumberToObject(x, "shared_expert_intermediate_size", c->shared_expert_intermediate_size);
                cJSON_AddBoolToObject(x, "shared_expert_gate", c->shared_expert_gate);
            }
        }
    }
    if (s.lora.rank > 0) {
        cJSON *l = cJSON_AddObjectToObject(o, "lora");
        if (l) {
            cJSON_AddNumberToObject(l, "rank", s.lora.rank);
            cJSON_AddNumberToObject(l, "alpha", s.lora.alpha);
            cJSON_AddNumberToObject(l, "dropout", s.lora.dropout);
            cJSON_AddStringToObject(l, "target_modules", s.lora.target_modules);
            if (s.lora.base_quant) cJSON_AddStringToObject(l, "base_quant", zt_quant_name((zt_quant)s.lora.base_quant));
        }
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

/* the number o[key] as an int; out of int's range (or not a number): *bad = key */
static int ifield(const cJSON *o, const char *key, const char **bad) {
    double v = field(o, key, bad);
    if (!(v >= -2147483648.0 && v <= 2147483647.0)) {
        if (!*bad) *bad = key;
        return 0;
    }
    return (int)v;
}

int zt_model_meta_parse(const cJSON *o, const char *where, zt_model_spec *out, zt_error *err) {
    memset(out, 0, sizeof *out);
    if (!cJSON_IsObject(o)) return zt_error_set(err, ZT_ERR_CKPT, "%s: no model object", where);
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, "arch");
    if (a && (!cJSON_IsString(a) || zt_arch_parse(a->valuestring, &out->arch, err)))
        return zt_error_set(err, ZT_ERR_CKPT, "%s: model.arch is not gpt2 or llama", where);
    const char *bad = NULL;
    zt_gpt2_config g = {.max_seq_len = ifield(o, "max_seq_len", &bad),
                        .vocab_size = ifield(o, "vocab_size", &bad),
                        .n_layer = ifield(o, "n_layer", &bad),
                        .n_head = ifield(o, "n_head", &bad),
                        .n_embd = ifield(o, "n_embd", &bad)};
    out->gpt2 = g;
    if (out->arch == ZT_ARCH_LLAMA) {
        zt_llama_config *c = &out->llama;
        const cJSON *r = cJSON_GetObjectItemCaseSensitive(o, "rope_scaling");
        const cJSON *tie = cJSON_GetObjectItemCaseSensitive(o, "tie_embeddings");
        *c = (zt_llama_config){.max_seq_len = g.max_seq_len, .vocab_size = g.vocab_size, .n_layer = g.n_layer,
                               .n_head = g.n_head, .n_embd = g.n_embd,
                               .n_kv_head = ifield(o, "n_kv_head", &bad),
                               .intermediate_size = ifield(o, "intermediate_size", &bad),
                               .rope_theta = (float)field(o, "rope_theta", &bad),
                               .rms_norm_eps = (float)field(o, "rms_norm_eps", &bad),
                               .rope_scaling = {(float)field(r, "factor", &bad),
                                                (float)field(r, "low_freq_factor", &bad),
                                                (float)field(r, "high_freq_factor", &bad),
                                                ifield(r, "original_max_position_embeddings", &bad)},
                               .tie_embeddings = cJSON_IsTrue(tie)};
        if (!cJSON_IsBool(tie) && !bad) bad = "tie_embeddings";
        c->qkv_bias = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "qkv_bias"));
        const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, "moe");
        if (x) {
            c->n_experts = ifield(x, "n_experts", &bad);
            c->n_experts_per_token = ifield(x, "n_experts_per_token", &bad);
            c->moe_intermediate_size = ifield(x, "moe_intermediate_size", &bad);
            c->n_shared_experts = ifield(x, "n_shared_experts", &bad);
            c->norm_topk_prob = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(x, "norm_topk_prob"));
            c->router_aux_loss_coef = (float)field(x, "router_aux_loss_coef", &bad);
            c->router_z_loss_coef = (float)field(x, "router_z_loss_coef", &bad);
            c->capacity_factor = (float)field(x, "capacity_factor", &bad);
            /* shared experts (absent from the records written before them: none) */
            if (cJSON_GetObjectItemCaseSensitive(x, "shared_expert_intermediate_size"))
                c->shared_expert_intermediate_size = ifield(x, "shared_expert_intermediate_size", &bad);
            c->shared_expert_gate = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(x, "shared_expert_gate"));
        }
    }
    const cJSON *l = cJSON_GetObjectItemCaseSensitive(o, "lora"), *tm = cJSON_GetObjectItemCaseSensitive(l, "target_modules");
    if (l && !bad) { /* LoRA adapters: their settings rebuild the same table */
        out->lora.rank = ifield(l, "rank", &bad);
        out->lora.alpha = (float)field(l, "alpha", &bad);
        out->lora.dropout = (float)field(l, "dropout", &bad);
        if (!cJSON_IsString(tm) || strlen(tm->valuestring) >= sizeof out->lora.target_modules) {
            if (!bad) bad = "lora.target_modules";
        } else {
            snprintf(out->lora.target_modules, sizeof out->lora.target_modules, "%s", tm->valuestring);
        }
        if (!bad && out->lora.rank < 1) bad = "lora.rank";
        const cJSON *bq = cJSON_GetObjectItemCaseSensitive(l, "base_quant"); /* absent: none */
        for (int q = ZT_QUANT_NF4; cJSON_IsString(bq) && q <= ZT_QUANT_INT8; q++)
            if (!strcmp(bq->valuestring, zt_quant_name((zt_quant)q))) out->lora.base_quant = q;
        if (!bad && cJSON_IsString(bq) && !out->lora.base_quant) bad = "lora.base_quant";
    }
    if (bad) return zt_error_set(err, ZT_ERR_CKPT, "%s: model.%s missing or not a number", where, bad);
    return ZT_OK;
}
