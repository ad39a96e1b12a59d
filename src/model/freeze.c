/* freeze.c - freezing parameters by name: a PCRE2 regular expression matched against the whole
 * of each parameter's name (Hugging Face style, "layers.0.attn.q_proj.weight") marks the
 * parameters it matches non-trainable (zt_param_desc.trainable = false). What the engine does with
 * a frozen parameter: no optimizer update and no part in the gradient norm (src/engine/step.c);
 * docs/models.md says what it still costs. The same matching splits the parameters between Muon
 * and AdamW (zt_model_muon_split, optimizer.muon_params / adamw_params). */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "zerotrain/zerotrain.h"

#include <pcre2.h>
#include <stdlib.h>
#include <string.h>

/* hit[i] = whether parameter i's whole name matches pattern (key names it in messages) */
static int match_all(const zt_model *m, const char *pattern, const char *key, bool *hit, zt_error *err) {
    int ecode;
    PCRE2_SIZE eoff;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, PCRE2_ANCHORED | PCRE2_ENDANCHORED,
                                   &ecode, &eoff, NULL);
    if (!re) {
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(ecode, msg, sizeof msg);
        return zt_error_set(err, ZT_ERR_USAGE, "%s '%s': %s at offset %zu", key, pattern, (const char *)msg,
                            (size_t)eoff);
    }
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
    if (!md) {
        pcre2_code_free(re);
        return zt_error_set(err, ZT_ERR_NOMEM, "%s '%s': out of memory", key, pattern);
    }
    for (int i = 0; i < m->n_params; i++)
        hit[i] = pcre2_match(re, (PCRE2_SPTR)m->params[i].name, strlen(m->params[i].name), 0, 0, md, NULL) >= 0;
    pcre2_match_data_free(md);
    pcre2_code_free(re);
    return ZT_OK;
}

int zt_model_freeze(zt_model *m, const char *pattern, int *n_frozen, zt_error *err) {
    if (n_frozen) *n_frozen = 0;
    if (!pattern || !pattern[0]) return ZT_OK;
    bool *hit = malloc((size_t)(m->n_params > 0 ? m->n_params : 1) * sizeof *hit);
    if (!hit) return zt_error_set(err, ZT_ERR_NOMEM, "freeze pattern '%s': out of memory", pattern);
    int rc = match_all(m, pattern, "freeze pattern", hit, err);
    int n = 0;
    for (int i = 0; !rc && i < m->n_params; i++)
        if (hit[i]) {
            m->params[i].trainable = false;
            n++;
        }
    free(hit);
    if (rc) return rc;
    if (n == 0)
        return zt_error_set(err, ZT_ERR_USAGE,
                            "freeze pattern '%s' matches no parameter of model %s (names look like '%s')", pattern,
                            m->name, m->n_params ? m->params[m->n_params > 1 ? 1 : 0].name : "");
    if (n == m->n_params)
        return zt_error_set(err, ZT_ERR_USAGE, "freeze pattern '%s' freezes all %d parameters of model %s: nothing to train",
                            pattern, n, m->name);
    if (n_frozen) *n_frozen = n;
    return ZT_OK;
}


/* muon NULL: the patterns checked only (the flags kept in the second half of the one allocation) */
static int muon_split(const zt_model *m, const char *muon_pattern, const char *adamw_pattern, bool *muon,
                      bool none_ok, zt_error *err) {
    bool explicit_adamw = adamw_pattern && adamw_pattern[0];
    size_t n = (size_t)m->n_params + 1;
    bool *ah = calloc(muon ? n : 2 * n, sizeof *ah);
    if (!ah) return zt_error_set(err, ZT_ERR_NOMEM, "optimizer.muon_params: out of memory");
    if (!muon) muon = ah + n;
    int rc = match_all(m, muon_pattern ? muon_pattern : "", "optimizer.muon_params", muon, err);
    if (!rc && explicit_adamw) rc = match_all(m, adamw_pattern, "optimizer.adamw_params", ah, err);
    int n_muon = 0;
    for (int i = 0; i < m->n_params && !rc; i++) {
        const zt_param_desc *p = &m->params[i];
        if (!p->trainable) {
            muon[i] = false;
            continue;
        }
        if (muon[i] && p->ndim != 2)
            rc = zt_error_set(err, ZT_ERR_USAGE,
                              "optimizer.muon_params '%s' matches parameter '%s' of %d dimension%s: Muon "
                              "orthogonalizes 2-D matrices only (leave it to optimizer.adamw_params)",
                              muon_pattern, p->name, p->ndim, p->ndim == 1 ? "" : "s");
        else if (explicit_adamw && muon[i] && ah[i])
            rc = zt_error_set(err, ZT_ERR_USAGE,
                              "optimizer.adamw_params '%s' and optimizer.muon_params '%s' both match parameter "
                              "'%s': each parameter needs exactly one optimizer",
                              adamw_pattern, muon_pattern, p->name);
        else if (explicit_adamw && !muon[i] && !ah[i])
            rc = zt_error_set(err, ZT_ERR_USAGE,
                              "optimizer.adamw_params '%s' and optimizer.muon_params '%s' leave parameter '%s' "
                              "(%s) to no optimizer: every trainable parameter needs exactly one",
                              adamw_pattern, muon_pattern, p->name, p->ndim == 2 ? "a 2-D weight" : "not a matrix");
        n_muon += muon[i];
    }
    free(ah);
    if (!rc && n_muon == 0 && !none_ok)
        rc = zt_error_set(err, ZT_ERR_USAGE,
                          "optimizer.muon_params '%s' matches no trainable parameter of model %s (names look like "
                          "'%s')",
                          muon_pattern ? muon_pattern : "", m->name, m->n_params > 1 ? m->params[1].name : "");
    return rc;
}

int zt_model_muon_split(const zt_model *m, const char *muon_pattern, const char *adamw_pattern, bool *muon,
                        zt_error *err) {
    return muon_split(m, muon_pattern, adamw_pattern, muon, false, err);
}

int zt_model_muon_split_stage(const zt_model *m, const char *muon_pattern, const char *adamw_pattern, bool *muon,
                              zt_error *err) {
    return muon_split(m, muon_pattern, adamw_pattern, muon, true, err);
}
