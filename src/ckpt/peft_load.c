/* peft_load.c - LoRA adapters into zerotrain (peft.h): PEFT's adapter directory read back, to
 * continue a fine-tune or to merge it (`train --init-peft DIR`, `export --init-peft DIR`).
 *
 * adapter_config.json gives the LoRA settings (r, lora_alpha, lora_dropout, target_modules; a
 * list of names or one regular expression, both PEFT's rules, which lora.target_modules keeps).
 * Every option that would change the math zerotrain does (DoRA, rsLoRA, per-module rank or alpha
 * patterns, trained biases, modules_to_save, layers_to_transform, ...) is refused by its name,
 * never ignored. adapter_model.safetensors holds each adapter under the name peft.c writes
 * ("base_model.model." + the module + ".lora_A.weight"; the adapter name "default" may sit before
 * ".weight", as PeftModel.state_dict() keeps it); every adapter of the model must be there and
 * every tensor of the file must be an adapter of the model (a file made for other targets is
 * named, not half-loaded). */
#include "ckpt/peft.h"

#include "ckpt/safetensors.h"
#include "core/file.h"

#include <cjson/cJSON.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* a field absent, null, false, an empty string/list/object, or equal to its default string */
static bool unset(const cJSON *v, const char *dflt) {
    return !v || cJSON_IsNull(v) || cJSON_IsFalse(v) || ((cJSON_IsArray(v) || cJSON_IsObject(v)) && !v->child) ||
           (cJSON_IsString(v) && (!v->valuestring[0] || (dflt && !strcmp(v->valuestring, dflt))));
}

/* PEFT options zerotrain does not implement: each must be absent or at its default */
static const struct {
    const char *field, *dflt, *what;
} UNSUPPORTED[] = {
    {"use_dora", NULL, "DoRA (weight-decomposed adapters)"},
    {"use_rslora", NULL, "rsLoRA (scale alpha / sqrt(r))"},
    {"rank_pattern", NULL, "a rank per module"},
    {"alpha_pattern", NULL, "an alpha per module"},
    {"bias", "none", "trained biases"},
    {"lora_bias", NULL, "a bias on lora_B"},
    {"modules_to_save", NULL, "modules trained in full beside the adapters"},
    {"layers_to_transform", NULL, "adapters on some layers only"},
    {"exclude_modules", NULL, "modules excluded from target_modules"},
    {"layer_replication", NULL, "replicated layers"},
    {"trainable_token_indices", NULL, "trained embedding rows"},
    {"target_parameters", NULL, "adapters on parameters rather than modules"},
    {"megatron_config", NULL, "Megatron-parallel adapter layers"},
    {"use_qalora", NULL, "QA-LoRA"},
};

/* target_modules as lora.target_modules reads it: a list joined by commas, or the expression */
static int targets_of(const cJSON *t, const char *path, char *out, size_t cap, zt_error *err) {
    out[0] = '\0';
    if (!t || cJSON_IsNull(t)) return ZT_OK; /* PEFT's default for the architecture: zerotrain's too */
    if (cJSON_IsString(t)) {
        if (strchr(t->valuestring, ','))
            return zt_error_set(err, ZT_ERR_CKPT, "%s: target_modules \"%s\": a regular expression with a comma is "
                                "not supported (lora.target_modules reads commas as a list)", path, t->valuestring);
        if ((size_t)snprintf(out, cap, "%s", t->valuestring) >= cap)
            return zt_error_set(err, ZT_ERR_CKPT, "%s: target_modules is longer than %zu bytes", path, cap - 1);
        return ZT_OK;
    }
    if (!cJSON_IsArray(t) || !t->child)
        return zt_error_set(err, ZT_ERR_CKPT, "%s: target_modules is not a string or a non-empty list of names", path);
    size_t used = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, t) {
        if (!cJSON_IsString(it) || !it->valuestring[0] || strchr(it->valuestring, ','))
            return zt_error_set(err, ZT_ERR_CKPT, "%s: target_modules has an entry that is not a module name", path);
        int n = snprintf(out + used, cap - used, "%s%s", used ? "," : "", it->valuestring);
        if (n < 0 || (size_t)n >= cap - used)
            return zt_error_set(err, ZT_ERR_CKPT, "%s: target_modules is longer than %zu bytes", path, cap - 1);
        used += (size_t)n;
    }
    return ZT_OK;
}

static int read_settings(const cJSON *j, const char *path, zt_lora_config *l, zt_error *err) {
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(j, "peft_type");
    if (!cJSON_IsString(type) || strcmp(type->valuestring, "LORA"))
        return zt_error_set(err, ZT_ERR_CKPT, "%s: peft_type %s%s%s: zerotrain reads LORA adapters only", path,
                            cJSON_IsString(type) ? "\"" : "", cJSON_IsString(type) ? type->valuestring : "missing",
                            cJSON_IsString(type) ? "\"" : "");
    const cJSON *task = cJSON_GetObjectItemCaseSensitive(j, "task_type");
    if (!unset(task, "CAUSAL_LM"))
        return zt_error_set(err, ZT_ERR_CKPT, "%s: task_type \"%s\": zerotrain trains causal language models "
                            "(CAUSAL_LM)", path, cJSON_IsString(task) ? task->valuestring : "?");
    for (size_t k = 0; k < sizeof UNSUPPORTED / sizeof *UNSUPPORTED; k++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, UNSUPPORTED[k].field);
        if (!unset(v, UNSUPPORTED[k].dflt))
            return zt_error_set(err, ZT_ERR_CKPT, "%s: %s is set (%s): zerotrain does not implement it", path,
                                UNSUPPORTED[k].field, UNSUPPORTED[k].what);
    }
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(j, "r");
    const cJSON *alpha = cJSON_GetObjectItemCaseSensitive(j, "lora_alpha");
    const cJSON *drop = cJSON_GetObjectItemCaseSensitive(j, "lora_dropout");
    if (!cJSON_IsNumber(r) || r->valuedouble < 1 || r->valuedouble > 65536 || r->valuedouble != floor(r->valuedouble))
        return zt_error_set(err, ZT_ERR_CKPT, "%s: r is not a rank in [1, 65536]", path);
    if (alpha && !(cJSON_IsNumber(alpha) && alpha->valuedouble > 0 && isfinite(alpha->valuedouble)))
        return zt_error_set(err, ZT_ERR_CKPT, "%s: lora_alpha is not a positive number", path);
    if (drop && !cJSON_IsNull(drop) && !(cJSON_IsNumber(drop) && drop->valuedouble >= 0 && drop->valuedouble < 1))
        return zt_error_set(err, ZT_ERR_CKPT, "%s: lora_dropout is not in [0, 1)", path);
    l->rank = (int)r->valuedouble;
    l->alpha = alpha ? (float)alpha->valuedouble : 8.0f; /* LoraConfig's default */
    l->dropout = cJSON_IsNumber(drop) ? (float)drop->valuedouble : 0.0f;
    return targets_of(cJSON_GetObjectItemCaseSensitive(j, "target_modules"), path, l->target_modules,
                      sizeof l->target_modules, err);
}

int zt_peft_read_config(const char *dir, zt_lora_config *l, zt_error *err) {
    char path[PATH_MAX];
    if ((size_t)snprintf(path, sizeof path, "%s/adapter_config.json", dir) >= sizeof path)
        return zt_error_set(err, ZT_ERR_USAGE, "PEFT directory path too long: %s", dir);
    char *text = NULL;
    size_t len = 0;
    int rc = zt_read_file(path, "PEFT adapter config", &text, &len, err);
    if (rc) return rc == ZT_ERR_IO ? (err->code = ZT_ERR_CKPT) : rc;
    cJSON *j = cJSON_ParseWithLength(text, len);
    free(text);
    memset(l, 0, sizeof *l);
    rc = !cJSON_IsObject(j) ? zt_error_set(err, ZT_ERR_CKPT, "%s: not a JSON object", path)
                            : read_settings(j, path, l, err);
    cJSON_Delete(j);
    return rc;
}

int zt_peft_load_dir(zt_engine *e, const char *dir, zt_error *err) {
    const zt_model *m = zt_engine_model(e);
    if (!m->lora)
        return zt_error_set(err, ZT_ERR_USAGE, "--init-peft %s: the model has no LoRA adapters (lora.rank 0)", dir);
    const zt_hf_arch *a;
    int rc = zt_hf_arch_for_model(m, &a, err);
    if (rc) return rc;
    char path[PATH_MAX];
    if ((size_t)snprintf(path, sizeof path, "%s/adapter_model.safetensors", dir) >= sizeof path)
        return zt_error_set(err, ZT_ERR_USAGE, "PEFT directory path too long: %s", dir);
    zt_st_file *f = NULL;
    if ((rc = zt_st_open(path, &f, err))) return rc;
    int found = 0;
    for (int i = 0; i < m->n_params && !rc; i++) {
        const zt_param_desc *p = &m->params[i];
        if (!p->lora) continue;
        zt_st_entry ent = {.param = i};
        if ((rc = zt_peft_tensor_name(a, m, i, false, ent.name, sizeof ent.name, err))) break;
        if (!zt_st_has(f, ent.name)) { /* PeftModel.state_dict() keeps the adapter's name */
            char alt[sizeof ent.name];
            if (!(rc = zt_peft_tensor_name(a, m, i, true, alt, sizeof alt, err)) && zt_st_has(f, alt))
                memcpy(ent.name, alt, sizeof alt);
        }
        if (!rc) rc = zt_st_read(f, e, &ent, err); /* names a missing tensor, its shape, dtype */
        found++;
    }
    int n = rc ? 0 : zt_st_count(f);
    if (!rc && n != found) { /* a tensor that adapts nothing here: other targets, or not LoRA */
        const char *extra = NULL;
        for (int k = 0; k < n && !extra; k++) {
            const char *name = zt_st_name(f, k);
            bool ours = false;
            for (int i = 0; i < m->n_params && !ours; i++) {
                char mine[ZT_NAME_MAX + 48];
                for (int dflt = 0; dflt < 2 && !ours; dflt++)
                    ours = m->params[i].lora && !zt_peft_tensor_name(a, m, i, dflt, mine, sizeof mine, err) &&
                           !strcmp(mine, name);
            }
            if (!ours) extra = name;
        }
        rc = zt_error_set(err, ZT_ERR_CKPT, "%s: tensor %s is not one of this model's %d adapter tensors (they were "
                          "made for other target_modules or another model)", path, extra ? extra : "?", found);
    }
    zt_st_close(f);
    return rc;
}
