/* precision_meta.c - a checkpoint's dtypes against the loading run's precision (precision_meta.h).
 * The shards hold fp32 arrays in every mode (the manifest's precision.stored_as), but the values
 * are what the saving run's policy kept: fp32 master weights and moments (modes fp32, bf16, fp16)
 * or bf16 ones (bf16-low). Loading into bf16-low rounds fp32 values to bf16: that loses the low
 * bits of every weight and moment, which DCP refuses by default too ("Silent casting is not
 * allowed", DefaultLoadPlanner(allow_unsafe_types=False)); the other way is exact.
 *
 * Invariant: only the dtypes decide (the compute dtype and the reduction are not state); a manifest
 * without "precision" (written before it existed) holds fp32 values. */
#include "ckpt/precision_meta.h"
#include "engine/engine_state.h"

#include <string.h>

static zt_dtype dtype_at(const cJSON *prec, const char *key) {
    const cJSON *v = prec ? cJSON_GetObjectItemCaseSensitive(prec, key) : NULL;
    if (!cJSON_IsString(v)) return ZT_DTYPE_FP32;
    if (!strcmp(v->valuestring, "bf16")) return ZT_DTYPE_BF16;
    if (!strcmp(v->valuestring, "fp16")) return ZT_DTYPE_FP16;
    return ZT_DTYPE_FP32;
}

static int bits(zt_dtype d) { return d == ZT_DTYPE_FP32 ? 32 : 16; }

/* -1 narrowing (bits lost, or another 16-bit format), 0 the same, 1 widening (exact) */
static int direction(zt_dtype from, zt_dtype to) {
    if (from == to) return 0;
    return bits(to) > bits(from) ? 1 : -1;
}

/* The first tensors' names (trainable ones only when moments), at most cap bytes, and their count. */
static int tensor_names(const cJSON *tensors, const zt_model *m, bool trainable_only, char *out, size_t cap) {
    const cJSON *t;
    int n = 0, listed = 0;
    size_t used = 0;
    out[0] = '\0';
    cJSON_ArrayForEach(t, tensors) {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(t, "name");
        if (!cJSON_IsString(name)) continue;
        if (trainable_only) { /* a frozen parameter has no optimizer state */
            bool frozen = false;
            for (int i = 0; i < m->n_params; i++)
                if (!strcmp(m->params[i].name, name->valuestring)) frozen = !m->params[i].trainable;
            if (frozen) continue;
        }
        n++;
        size_t len = strlen(name->valuestring);
        if (listed == n - 1 && used + len + 24 < cap) { /* room left for "... N more" */
            used += (size_t)snprintf(out + used, cap - used, "%s%s", listed ? ", " : "", name->valuestring);
            listed++;
        }
    }
    if (listed < n) snprintf(out + used, cap - used, "%s... %d more", listed ? ", " : "", n - listed);
    return n;
}

int zt_ckpt_check_cast(const char *commit, const zt_engine *e, bool allow_cast, FILE *notes, bool *refused,
                       zt_error *err) {
    *refused = false;
    zt_error ignore;
    cJSON *root = zt_ckpt_manifest_read(commit, &ignore);
    if (!root) return ZT_OK; /* damaged: zt_ckpt_load says how (and resume may fall back) */
    const cJSON *prec = cJSON_GetObjectItemCaseSensitive(root, "precision");
    const cJSON *mj = prec ? cJSON_GetObjectItemCaseSensitive(prec, "mode") : NULL;
    char mode[32];
    snprintf(mode, sizeof mode, "%s", cJSON_IsString(mj) ? mj->valuestring : "fp32, not recorded");
    const zt_precision *run = &zt_engine_options_of(e)->precision;
    zt_dtype cp = dtype_at(prec, "params"), cm = dtype_at(prec, "moments");
    int dp = direction(cp, run->params), dm = zt_engine_state_kinds(e) ? direction(cm, run->moments) : 0;
    const cJSON *tensors = cJSON_GetObjectItemCaseSensitive(root, "tensors");
    int rc = ZT_OK;
    if (dp < 0 || dm < 0) {
        char pnames[300], what[200], unused[8];
        int np = tensor_names(tensors, zt_engine_model(e), false, pnames, sizeof pnames);
        int nm = dm < 0 ? tensor_names(tensors, zt_engine_model(e), true, unused, sizeof unused) : 0;
        size_t len = 0;
        if (dp < 0)
            len += (size_t)snprintf(what, sizeof what, "parameters %s -> %s", zt_dtype_name(cp), zt_dtype_name(run->params));
        if (dm < 0)
            snprintf(what + len, sizeof what - len, "%soptimizer moments exp_avg, exp_avg_sq %s -> %s%s", len ? ", " : "",
                     zt_dtype_name(cm), zt_dtype_name(run->moments), nm < np ? " (trainable tensors)" : "");
        if (allow_cast) {
            if (notes)
                fprintf(notes, "checkpoint: narrowing cast allowed (checkpoint.allow_cast / --allow-cast): %s holds "
                        "precision %s values, this run keeps %s ones: %d tensors rounded to nearest (%s) [%s]\n",
                        commit, mode, zt_precision_mode_name(run->mode), np, what, pnames);
        } else {
            *refused = true;
            rc = zt_error_set(err, ZT_ERR_CKPT, "checkpoint %s holds precision %s values and this run's precision %s "
                              "keeps narrower ones: loading would round %d tensors (%s) [%s]; refused: pass "
                              "--allow-cast or set checkpoint.allow_cast: true to round them, or resume with "
                              "precision.mode %s", commit, mode, zt_precision_mode_name(run->mode), np, what, pnames,
                              cJSON_IsString(mj) ? mj->valuestring : "fp32");
        }
    } else if ((dp > 0 || dm > 0) && notes) {
        fprintf(notes, "checkpoint: widening: %s holds precision %s values (parameters %s, moments %s), loaded exactly "
                "into this run's %s (parameters %s, moments %s)\n", commit, mode, zt_dtype_name(cp), zt_dtype_name(cm),
                zt_precision_mode_name(run->mode), zt_dtype_name(run->params), zt_dtype_name(run->moments));
    }
    cJSON_Delete(root);
    return rc;
}
