/* peft.c - LoRA adapters out of zerotrain (peft.h; read back by peft_load.c): the adapter directory PEFT's save_pretrained
 * writes, and the adapters merged into the weights they adapt.
 *
 *   DIR/adapter_model.safetensors  every lora_A (r, in) and lora_B (out, r), named as PEFT names them
 *                                  in a CAUSAL_LM PeftModel: "base_model.model." + transformers'
 *                                  module name + ".lora_A.weight" (the adapter name "default" left
 *                                  out, as get_peft_model_state_dict does), e.g.
 *                                  base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight,
 *                                  base_model.model.transformer.h.0.attn.c_attn.lora_B.weight
 *   DIR/adapter_config.json        LoraConfig's fields: peft_type LORA, task_type CAUSAL_LM, r,
 *                                  lora_alpha, lora_dropout, target_modules, base_model_name_or_path,
 *                                  bias none, fan_in_fan_out (true for GPT-2's Conv1D), ...
 *
 * target_modules is written so that PEFT adapts exactly the modules zerotrain did: the list of
 * their last name components when every Linear with such a name was adapted (["q_proj",
 * "v_proj"]), else one regular expression naming each adapted module (PEFT full-matches a string).
 * PEFT stores A and B in the same (r, in) and (out, r) layout for Linear and Conv1D alike, so
 * nothing is transposed. Merging computes W + (alpha / r)·B·A in zerotrain's (out, in) layout
 * (sums in double, one rounding to fp32); the directory writer transposes GPT-2's Conv1D after. */
#include "ckpt/peft.h"

#include "ckpt/hf.h"
#include "ckpt/safetensors.h"
#include "core/file.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* transformers' module name of weight i ("model.layers.0.self_attn.q_proj"), as PEFT sees it
 * inside the CAUSAL_LM model (the row's alt_prefix, e.g. "transformer.", put back) */
static bool hf_module(const zt_hf_arch *a, const zt_model *m, int i, char *out, size_t cap) {
    char name[ZT_NAME_MAX + 16];
    bool tr;
    if (!a->name(&m->params[i], name, sizeof name, &tr)) return false;
    char *dot = strrchr(name, '.');
    if (dot) *dot = '\0';
    return (size_t)snprintf(out, cap, "%s%s", a->alt_prefix ? a->alt_prefix : "", name) < cap;
}

int zt_peft_tensor_name(const zt_hf_arch *a, const zt_model *m, int i, bool adapter_name, char *out, size_t cap,
                        zt_error *err) {
    const zt_param_desc *p = &m->params[i];
    char mod[2 * ZT_NAME_MAX];
    if (!hf_module(a, m, p->lora_base, mod, sizeof mod) ||
        (size_t)snprintf(out, cap, "base_model.model.%s.lora_%c%s.weight", mod, p->lora,
                         adapter_name ? ".default" : "") >= cap)
        return zt_error_set(err, ZT_ERR_USAGE, "no PEFT name for %s (too long, or not stored)", p->name);
    return ZT_OK;
}

/* whether weight i is a Linear some unit could adapt (its ops say so) */
static bool adaptable(const zt_model *m, int i) {
    for (int u = 0; u < m->n_units; u++)
        for (int k = 0; k < m->units[u].n_params; k++)
            if (m->units[u].params[k] == i && m->units[u].ops->adaptable && m->units[u].ops->adaptable(&m->units[u], k))
                return true;
    return false;
}

static const char *last_part(const char *s) {
    const char *d = strrchr(s, '.');
    return d ? d + 1 : s;
}

/* target_modules: the last components when they select exactly the adapted modules, else one
 * regular expression of the adapted modules' names, escaped */
static cJSON *target_modules(const zt_hf_arch *a, const zt_model *m) {
    cJSON *list = cJSON_CreateArray();
    bool exact = true;
    char mod[2 * ZT_NAME_MAX];
    for (int i = 0; i < m->n_params; i++) { /* the adapted modules' last components, each once */
        if (m->params[i].lora != 'A' || !hf_module(a, m, m->params[i].lora_base, mod, sizeof mod)) continue;
        bool seen = false;
        const cJSON *it;
        cJSON_ArrayForEach(it, list) seen |= !strcmp(it->valuestring, last_part(mod));
        if (!seen) cJSON_AddItemToArray(list, cJSON_CreateString(last_part(mod)));
    }
    for (int i = 0; i < m->n_params && exact; i++) { /* does the list select any Linear not adapted? */
        if (m->params[i].lora || !adaptable(m, i) || !hf_module(a, m, i, mod, sizeof mod)) continue;
        bool adapted = i + 1 < m->n_params && m->params[i + 1].lora == 'A' && m->params[i + 1].lora_base == i;
        const cJSON *it;
        cJSON_ArrayForEach(it, list) exact &= adapted || strcmp(it->valuestring, last_part(mod)) != 0;
    }
    if (exact) return list;
    cJSON_Delete(list);
    size_t cap = 64, len = 0;
    for (int i = 0; i < m->n_params; i++) cap += m->params[i].lora == 'A' ? 4 * ZT_NAME_MAX : 0;
    char *re = calloc(cap, 1);
    if (!re) return NULL;
    for (int i = 0; i < m->n_params; i++) {
        if (m->params[i].lora != 'A' || !hf_module(a, m, m->params[i].lora_base, mod, sizeof mod)) continue;
        if (len) re[len++] = '|';
        for (const char *c = mod; *c && len + 3 < cap; c++) {
            if (*c == '.') re[len++] = '\\';
            re[len++] = *c;
        }
    }
    cJSON *s = cJSON_CreateString(re);
    free(re);
    return s;
}

/* f as the shortest decimal that reads back to it (0.1f as 0.1, not 0.10000000149011612) */
static double shortest(float f) {
    char b[32];
    for (int prec = 1; prec <= 9; prec++) {
        snprintf(b, sizeof b, "%.*g", prec, (double)f);
        if ((float)strtod(b, NULL) == f) break;
    }
    return strtod(b, NULL);
}

static int write_config(const zt_hf_arch *a, const zt_model *m, const char *dir, const char *base, zt_error *err) {
    const zt_lora_config *l = m->lora;
    cJSON *j = cJSON_CreateObject(), *tm = target_modules(a, m);
    if (!j || !tm) {
        cJSON_Delete(j), cJSON_Delete(tm);
        return zt_error_set(err, ZT_ERR_NOMEM, "export --peft: out of memory");
    }
    cJSON_AddItemToObject(j, "alpha_pattern", cJSON_CreateObject());
    cJSON_AddNullToObject(j, "auto_mapping");
    if (base && base[0]) cJSON_AddStringToObject(j, "base_model_name_or_path", base);
    else cJSON_AddNullToObject(j, "base_model_name_or_path");
    cJSON_AddStringToObject(j, "bias", "none");
    cJSON_AddBoolToObject(j, "fan_in_fan_out", !strcmp(a->model_type, "gpt2")); /* Conv1D stores (in, out) */
    cJSON_AddBoolToObject(j, "inference_mode", true);
    cJSON_AddBoolToObject(j, "init_lora_weights", true);
    cJSON_AddNullToObject(j, "layers_pattern");
    cJSON_AddNullToObject(j, "layers_to_transform");
    cJSON_AddNumberToObject(j, "lora_alpha", shortest(l->alpha));
    cJSON_AddNumberToObject(j, "lora_dropout", shortest(l->dropout));
    cJSON_AddNullToObject(j, "modules_to_save");
    cJSON_AddStringToObject(j, "peft_type", "LORA");
    cJSON_AddNumberToObject(j, "r", l->rank);
    cJSON_AddItemToObject(j, "rank_pattern", cJSON_CreateObject());
    cJSON_AddNullToObject(j, "revision");
    cJSON_AddItemToObject(j, "target_modules", tm);
    cJSON_AddStringToObject(j, "task_type", "CAUSAL_LM");
    cJSON_AddBoolToObject(j, "use_dora", false);
    cJSON_AddBoolToObject(j, "use_rslora", false);
    cJSON_AddStringToObject(j, "producer", "zerotrain " ZT_VERSION);
    return zt_hf_write_json(dir, "adapter_config.json", j, err);
}

int zt_peft_export_dir(zt_engine *e, const char *dir, const char *base_model, bool bf16, int *n_adapters,
                       zt_error *err) {
    const zt_model *m = zt_engine_model(e);
    const zt_hf_arch *a;
    *n_adapters = 0;
    if (!m->lora) return zt_error_set(err, ZT_ERR_USAGE, "export --peft: the model has no LoRA adapters (lora.rank 0)");
    int rc = zt_hf_arch_for_model(m, &a, err);
    if (rc) return rc;
    zt_st_entry *ents = calloc((size_t)m->n_params, sizeof *ents);
    if (!ents) return zt_error_set(err, ZT_ERR_NOMEM, "export --peft: out of memory");
    int n = 0;
    for (int i = 0; i < m->n_params && !rc; i++) {
        if (!m->params[i].lora) continue;
        rc = zt_peft_tensor_name(a, m, i, false, ents[n].name, sizeof ents[n].name, err);
        ents[n++].param = i;
    }
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/adapter_model.safetensors", dir);
    zt_make_parent_dirs(path);
    if (!rc) rc = zt_st_write(e, path, ents, n, bf16, err);
    if (!rc) rc = write_config(a, m, dir, base_model, err);
    free(ents);
    if (!rc) *n_adapters = n / 2;
    return rc;
}

int zt_lora_merge(zt_engine *e, int *n_merged, zt_error *err) {
    const zt_model *m = zt_engine_model(e);
    *n_merged = 0;
    if (!m->lora) return ZT_OK;
    double s = (double)m->lora->alpha / m->lora->rank;
    int rc = ZT_OK;
    for (int ia = 0; ia < m->n_params && !rc; ia++) {
        const zt_param_desc *pa = &m->params[ia];
        if (pa->lora != 'A') continue;
        int iw = pa->lora_base, ib = ia + 1; /* B follows A (zt_model_add_lora) */
        const zt_param_desc *pw = &m->params[iw];
        int64_t out = pw->shape[0], in = pw->shape[1], r = pa->shape[0];
        float *W = malloc((size_t)pw->numel * sizeof *W), *A = malloc((size_t)pa->numel * sizeof *A),
              *B = malloc((size_t)(out * r) * sizeof *B);
        if (!W || !A || !B || m->params[ib].lora != 'B' || m->params[ib].lora_base != iw)
            rc = zt_error_set(err, !W || !A || !B ? ZT_ERR_NOMEM : ZT_ERR_INTERNAL, "merging %s's adapters: %s",
                              pw->name, !W || !A || !B ? "out of memory" : "lora_B does not follow lora_A");
        if (!rc) rc = zt_engine_param_gather(e, iw, W, err);
        if (!rc) rc = zt_engine_param_gather(e, ia, A, err);
        if (!rc) rc = zt_engine_param_gather(e, ib, B, err);
        for (int64_t o = 0; o < out && !rc; o++)
            for (int64_t i = 0; i < in; i++) {
                double acc = 0;
                for (int64_t j = 0; j < r; j++) acc += (double)B[o * r + j] * (double)A[j * in + i];
                W[o * in + i] = (float)((double)W[o * in + i] + s * acc);
            }
        if (!rc) rc = zt_engine_param_set(e, iw, W, err);
        free(W), free(A), free(B);
        if (!rc) (*n_merged)++;
    }
    return rc;
}
