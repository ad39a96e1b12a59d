/* freeze.c - freezing parameters by name: a PCRE2 regular expression matched against the whole
 * of each parameter's name (Hugging Face style, "layers.0.attn.q_proj.weight") marks the
 * parameters it matches non-trainable (zt_param_desc.trainable = false). What the engine does with
 * a frozen parameter: no optimizer update and no part in the gradient norm (src/engine/step.c);
 * docs/models.md says what it still costs. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "zerotrain/zerotrain.h"

#include <pcre2.h>
#include <string.h>

int zt_model_freeze(zt_model *m, const char *pattern, int *n_frozen, zt_error *err) {
    if (n_frozen) *n_frozen = 0;
    if (!pattern || !pattern[0]) return ZT_OK;
    int ecode;
    PCRE2_SIZE eoff;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, PCRE2_ANCHORED | PCRE2_ENDANCHORED,
                                   &ecode, &eoff, NULL);
    if (!re) {
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(ecode, msg, sizeof msg);
        return zt_error_set(err, ZT_ERR_USAGE, "freeze pattern '%s': %s at offset %zu", pattern, (const char *)msg,
                            (size_t)eoff);
    }
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
    if (!md) {
        pcre2_code_free(re);
        return zt_error_set(err, ZT_ERR_NOMEM, "freeze pattern '%s': out of memory", pattern);
    }
    int n = 0;
    for (int i = 0; i < m->n_params; i++) {
        zt_param_desc *p = &m->params[i];
        if (pcre2_match(re, (PCRE2_SPTR)p->name, strlen(p->name), 0, 0, md, NULL) >= 0) {
            p->trainable = false;
            n++;
        }
    }
    pcre2_match_data_free(md);
    pcre2_code_free(re);
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
