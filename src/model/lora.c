/* lora.c - LoRA adapters on a built model (zt_model_add_lora; zerotrain.h says what they compute):
 * which Linears get one (PEFT's target_modules rules), the adapter parameters A (r, C) and
 * B (OC, r) put into the parameter table right after the weight they adapt and listed by its unit,
 * and the freezing of everything else. The forward and backward are the Linear's
 * (src/model/layers.c calls src/kernels/lora.c); the engine sees ordinary parameters.
 *
 * Module names: a parameter's name without its last component ("layers.0.self_attn.q_proj" for
 * "layers.0.self_attn.q_proj.weight"); transformers' name of the same module puts the family's
 * prefix before it ("model." for Llama, "transformer." for GPT-2, as PEFT sees them inside
 * LlamaForCausalLM / GPT2LMHeadModel). A module is adaptable when its unit's ops say its weight is
 * (zt_unit_ops.adaptable: the blocks' Linears). With base_quant every adaptable Linear, adapted or
 * not, is marked for the parameter store to keep quantized (zt_param_desc.quant: QLoRA's frozen
 * base; the embeddings, norms and the LM head stay as they are). Every check runs before the model
 * changes, so a refused configuration leaves the model as it was. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "zerotrain/zerotrain.h"
#include "kernels/kernels.h"

#include <math.h>
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* per family: transformers' module prefix and PEFT's default target_modules */
static const struct {
    const char *model, *hf_prefix, *targets;
} FAMILIES[] = {{"llama", "model.", "q_proj,v_proj"}, {"gpt2", "transformer.", "c_attn"}};

static int family_of(const zt_model *m) {
    for (int i = 0; i < (int)(sizeof FAMILIES / sizeof *FAMILIES); i++)
        if (!strcmp(FAMILIES[i].model, m->name)) return i;
    return -1;
}

/* the module of parameter name: the name without its last dotted component */
static void module_of(const char *name, char *out, size_t cap) {
    const char *dot = strrchr(name, '.');
    size_t n = dot ? (size_t)(dot - name) : strlen(name);
    snprintf(out, cap, "%.*s", (int)(n < cap ? n : cap - 1), name);
}

const char *zt_quant_name(zt_quant q) { return q == ZT_QUANT_NF4 ? "nf4" : q == ZT_QUANT_INT8 ? "int8" : "none"; }

static bool ends_with_part(const char *module, const char *entry) {
    size_t lm = strlen(module), le = strlen(entry);
    return lm > le && module[lm - le - 1] == '.' && !strcmp(module + lm - le, entry);
}

static bool plain_name(const char *s) {
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '_' ||
              *s == '.' || *s == '-'))
            return false;
    return true;
}

/* One target as matched: a list entry (literal) or a compiled regular expression. */
typedef struct target {
    char text[256];
    pcre2_code *re; /* NULL: a list entry */
} target;

typedef struct matcher {
    const zt_model *m;
    const char *prefix;
    int n;
    target t[32];
    bool all; /* all-linear */
    pcre2_match_data *md;
} matcher;

static bool target_matches(matcher *x, const target *t, const char *module) {
    char hf[2 * ZT_NAME_MAX];
    snprintf(hf, sizeof hf, "%s%s", x->prefix, module);
    if (!t->re) return !strcmp(module, t->text) || !strcmp(hf, t->text) || ends_with_part(module, t->text);
    return pcre2_match(t->re, (PCRE2_SPTR)module, strlen(module), 0, 0, x->md, NULL) >= 0 ||
           pcre2_match(t->re, (PCRE2_SPTR)hf, strlen(hf), 0, 0, x->md, NULL) >= 0;
}

static void matcher_free(matcher *x) {
    for (int i = 0; i < x->n; i++) pcre2_code_free(x->t[i].re);
    pcre2_match_data_free(x->md);
}

/* spec (already resolved from the default) into targets; ZT_ERR_USAGE naming lora.target_modules */
static int matcher_init(matcher *x, const zt_model *m, const char *spec, zt_error *err) {
    memset(x, 0, sizeof *x);
    x->m = m;
    int fam = family_of(m);
    x->prefix = fam >= 0 ? FAMILIES[fam].hf_prefix : "";
    if (!strcmp(spec, "all-linear")) {
        x->all = true;
        return ZT_OK;
    }
    if (strchr(spec, ',') || plain_name(spec)) { /* a list: entries between commas, spaces trimmed */
        for (const char *p = spec;;) {
            const char *end = strchr(p, ',');
            size_t len = end ? (size_t)(end - p) : strlen(p);
            while (len && (*p == ' ' || *p == '\t')) p++, len--;
            while (len && (p[len - 1] == ' ' || p[len - 1] == '\t')) len--;
            if (!len || len >= sizeof x->t[0].text)
                return zt_error_set(err, ZT_ERR_USAGE, "lora.target_modules '%s': %s list entry", spec,
                                    len ? "a too long" : "an empty");
            if (x->n == (int)(sizeof x->t / sizeof *x->t))
                return zt_error_set(err, ZT_ERR_USAGE, "lora.target_modules '%s': more than %d entries", spec, x->n);
            snprintf(x->t[x->n++].text, sizeof x->t[0].text, "%.*s", (int)len, p);
            if (!end) break;
            p = end + 1;
        }
        return ZT_OK;
    }
    int ecode;
    PCRE2_SIZE eoff;
    target *t = &x->t[x->n];
    snprintf(t->text, sizeof t->text, "%s", spec);
    t->re = pcre2_compile((PCRE2_SPTR)spec, PCRE2_ZERO_TERMINATED, PCRE2_ANCHORED | PCRE2_ENDANCHORED, &ecode, &eoff,
                          NULL);
    if (!t->re) {
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(ecode, msg, sizeof msg);
        return zt_error_set(err, ZT_ERR_USAGE, "lora.target_modules '%s': not a regular expression: %s at offset %zu",
                            spec, (const char *)msg, (size_t)eoff);
    }
    x->n++;
    if (!(x->md = pcre2_match_data_create_from_pattern(t->re, NULL)))
        return zt_error_set(err, ZT_ERR_NOMEM, "lora.target_modules: out of memory");
    return ZT_OK;
}

/* parameter i's adaptable (unit, position), or false */
static bool adaptable_at(const zt_model *m, int i, int *unit, int *pos) {
    for (int u = 0; u < m->n_units; u++) {
        const zt_unit *un = &m->units[u];
        for (int k = 0; k < un->n_params; k++)
            if (un->params[k] == i && un->ops->adaptable && un->ops->adaptable(un, k) && m->params[i].ndim == 2) {
                *unit = u, *pos = k;
                return true;
            }
    }
    return false;
}

/* "q_proj, k_proj, ..." (the adaptable modules' last components, each once) and one example */
static void adaptable_names(const zt_model *m, char *out, size_t cap, char *example, size_t ecap) {
    out[0] = example[0] = '\0';
    for (int i = 0; i < m->n_params; i++) {
        int u, k;
        if (!adaptable_at(m, i, &u, &k)) continue;
        char mod[ZT_NAME_MAX], part[ZT_NAME_MAX + 2];
        module_of(m->params[i].name, mod, sizeof mod);
        if (!example[0]) snprintf(example, ecap, "%s", mod);
        const char *last = strrchr(mod, '.');
        snprintf(part, sizeof part, "%s", last ? last + 1 : mod);
        bool seen = false;
        for (const char *p = out; (p = strstr(p, part)) && !seen; p += strlen(part))
            seen = (p == out || p[-1] == ' ') && (p[strlen(part)] == ',' || !p[strlen(part)]);
        if (!seen && strlen(out) + strlen(part) + 3 < cap)
            snprintf(out + strlen(out), cap - strlen(out), "%s%s", out[0] ? ", " : "", part);
    }
}

static int check_values(const zt_model *m, const zt_lora_config *c, zt_error *err) {
    if (m->lora) return zt_error_set(err, ZT_ERR_USAGE, "model %s already has LoRA adapters", m->name);
    if (c->rank < 1 || c->rank > 65536)
        return zt_error_set(err, ZT_ERR_USAGE, "lora.rank %d: the adapters' rank must be in [1, 65536]", c->rank);
    if (!(c->alpha > 0.0f) || !isfinite(c->alpha))
        return zt_error_set(err, ZT_ERR_USAGE, "lora.alpha %g: must be a finite number > 0 (the update is scaled by "
                            "alpha / rank)", (double)c->alpha);
    if (!(c->dropout >= 0.0f && c->dropout < 1.0f))
        return zt_error_set(err, ZT_ERR_USAGE, "lora.dropout %g: must be in [0, 1)", (double)c->dropout);
    if (c->base_quant < ZT_QUANT_NONE || c->base_quant > ZT_QUANT_INT8)
        return zt_error_set(err, ZT_ERR_USAGE, "lora.base_quant %d: not none, nf4 or int8", c->base_quant);
    if (c->base_quant != ZT_QUANT_NF4) return ZT_OK;
    for (int i = 0; i < m->n_params; i++) { /* NF4's blocks of 64 never straddle two rows */
        int u, k;
        const zt_param_desc *p = &m->params[i];
        if (adaptable_at(m, i, &u, &k) && p->shape[1] % ZT_NF4_BLOCK)
            return zt_error_set(err, ZT_ERR_USAGE, "lora.base_quant nf4: %s (%lld x %lld) has rows of %lld elements, "
                                "not a multiple of NF4's block of %d (use lora.base_quant int8, or none)", p->name,
                                (long long)p->shape[0], (long long)p->shape[1], (long long)p->shape[1], ZT_NF4_BLOCK);
    }
    return ZT_OK;
}

/* Marks in adapt[] (n_params) the weights the targets select; ZT_ERR_USAGE for a target that
 * selects nothing or a module no block adapts. */
static int select_weights(const zt_model *m, const char *spec, bool *adapt, int *n_adapt, zt_error *err) {
    matcher x;
    int rc = matcher_init(&x, m, spec, err);
    char names[256], example[ZT_NAME_MAX];
    adaptable_names(m, names, sizeof names, example, sizeof example);
    *n_adapt = 0;
    for (int t = 0; t < (x.all ? 1 : x.n) && !rc; t++) {
        int hits = 0;
        for (int i = 0; i < m->n_params && !rc; i++) {
            char mod[ZT_NAME_MAX];
            module_of(m->params[i].name, mod, sizeof mod);
            int u, k;
            bool ok = adaptable_at(m, i, &u, &k);
            if (!x.all && !target_matches(&x, &x.t[t], mod)) continue;
            if (x.all && !ok) continue;
            if (!ok) {
                /* a bias of an adaptable module comes with its weight */
                bool of_adaptable = false;
                for (int j = 0; j < m->n_params && !of_adaptable; j++) {
                    char mj[ZT_NAME_MAX];
                    module_of(m->params[j].name, mj, sizeof mj);
                    of_adaptable = !strcmp(mj, mod) && adaptable_at(m, j, &u, &k);
                }
                if (of_adaptable) continue;
                rc = zt_error_set(err, ZT_ERR_USAGE, "lora.target_modules '%s' selects %s, which is not a Linear "
                                  "zerotrain adapts (it adapts the blocks' Linears: %s)", x.t[t].text, mod, names);
                break;
            }
            hits++;
            if (!adapt[i]) (*n_adapt)++;
            adapt[i] = true;
        }
        if (!rc && !hits)
            rc = zt_error_set(err, ZT_ERR_USAGE, "lora.target_modules '%s' matches no module of model %s (its Linears: "
                              "%s; module names look like %s or %s%s)", x.all ? spec : x.t[t].text, m->name, names,
                              example, x.prefix, example);
    }
    matcher_free(&x);
    return rc;
}

static void adapter_desc(zt_param_desc *d, const zt_param_desc *w, char kind, int base, int r) {
    memset(d, 0, sizeof *d);
    char mod[ZT_NAME_MAX];
    module_of(w->name, mod, sizeof mod);
    char name[ZT_NAME_MAX + 16]; /* fits ZT_NAME_MAX: checked by zt_model_add_lora */
    snprintf(name, sizeof name, "%s.lora_%c.weight", mod, kind);
    memcpy(d->name, name, sizeof d->name - 1);
    d->ndim = 2;
    d->shape[0] = kind == 'A' ? r : w->shape[0];
    d->shape[1] = kind == 'A' ? w->shape[1] : r;
    d->numel = d->shape[0] * d->shape[1];
    memcpy(d->logical_shape, d->shape, sizeof d->shape); /* whole (tensor parallelism refuses adapters) */
    d->logical_numel = d->numel;
    d->tp_parts = d->tp_blocks = 1;
    /* PEFT: kaiming_uniform_(A, a=sqrt(5)) = U(-1/sqrt(in), 1/sqrt(in)); B zeros */
    d->init = kind == 'A' ? ZT_INIT_UNIFORM : ZT_INIT_ZEROS;
    d->init_std = kind == 'A' ? (float)(1.0 / sqrt((double)w->shape[1])) : 0.0f;
    d->decay = true;
    d->trainable = true;
    d->lora = kind;
    d->lora_base = base;
}

int zt_model_add_lora(zt_model *m, const zt_lora_config *cfg, int *n_adapted, zt_error *err) {
    if (n_adapted) *n_adapted = 0;
    int rc = check_values(m, cfg, err);
    if (rc) return rc;
    zt_lora_config own = *cfg;
    int fam = family_of(m);
    if (!own.target_modules[0]) {
        if (fam < 0)
            return zt_error_set(err, ZT_ERR_USAGE, "lora.target_modules: model %s has no default; name its modules",
                                m->name);
        snprintf(own.target_modules, sizeof own.target_modules, "%s", FAMILIES[fam].targets);
    }
    bool *adapt = calloc((size_t)m->n_params, sizeof *adapt);
    int *map = calloc((size_t)m->n_params, sizeof *map), *extra = calloc((size_t)m->n_units + 1, sizeof *extra);
    int *owner = calloc((size_t)m->n_params, sizeof *owner), n_adapt = 0; /* unit * 256 + position, -1 */
    zt_lora_config *keep = malloc(sizeof *keep);
    zt_param_desc *np = NULL;
    if (!adapt || !map || !extra || !owner || !keep) {
        rc = zt_error_set(err, ZT_ERR_NOMEM, "lora: out of memory");
        goto done;
    }
    if ((rc = select_weights(m, own.target_modules, adapt, &n_adapt, err))) goto done;
    /* room: two more parameters per adapted weight in its unit, names that fit */
    for (int i = 0; i < m->n_params && !rc; i++) {
        int u, k;
        owner[i] = adapt[i] && adaptable_at(m, i, &u, &k) ? u * 256 + k : -1;
        if (owner[i] < 0) continue;
        if (m->units[u].n_params + (extra[u] += 2) > ZT_UNIT_MAX_PARAMS)
            rc = zt_error_set(err, ZT_ERR_USAGE, "lora: unit %s would list more than %d parameters", m->units[u].name,
                              ZT_UNIT_MAX_PARAMS);
        else if (strlen(m->params[i].name) + 8 >= ZT_NAME_MAX)
            rc = zt_error_set(err, ZT_ERR_USAGE, "lora: adapter names of %s would exceed %d characters",
                              m->params[i].name, ZT_NAME_MAX - 1);
    }
    int n_new = m->n_params + 2 * n_adapt;
    if (!rc && !(np = calloc((size_t)n_new, sizeof *np)))
        rc = zt_error_set(err, ZT_ERR_NOMEM, "lora: out of memory for %d parameters", n_new);
    if (rc) goto done;
    /* the new table: each adapted weight followed by its A and B; everything else frozen */
    int j = 0;
    for (int i = 0; i < m->n_params; i++) {
        int u, k;
        np[j] = m->params[i];
        np[j].trainable = false;
        np[j].quant = (uint8_t)(adaptable_at(m, i, &u, &k) ? own.base_quant : ZT_QUANT_NONE);
        map[i] = j++;
        if (!adapt[i]) continue;
        adapter_desc(&np[j++], &m->params[i], 'A', map[i], own.rank);
        adapter_desc(&np[j++], &m->params[i], 'B', map[i], own.rank);
    }
    *keep = own;
    for (int u = 0; u < m->n_units; u++) { /* remap; each adapted weight's owner lists A and B after its own */
        zt_unit *un = &m->units[u];
        int n_own = un->n_params;
        for (int k = 0; k < n_own; k++) {
            int old = un->params[k];
            un->params[k] = map[old];
            if (owner[old] != u * 256 + k) continue;
            un->lora_a[k] = (uint8_t)un->n_params;
            un->params[un->n_params++] = map[old] + 1;
            un->lora_b[k] = (uint8_t)un->n_params;
            un->params[un->n_params++] = map[old] + 2;
            un->lora = keep;
            if (m->params[old].shape[1] > un->lora_width) un->lora_width = (int)m->params[old].shape[1];
        }
    }
    free(m->params);
    m->params = np;
    m->n_params = m->cap_params = n_new;
    m->lora = keep;
    np = NULL;
    keep = NULL;
    if (n_adapted) *n_adapted = n_adapt;
done:
    free(np);
    free(keep);
    free(adapt);
    free(map);
    free(extra);
    free(owner);
    return rc;
}

bool zt_unit_is_adapter(const zt_unit *u, int k) {
    if (!u->lora || k <= 0) return false;
    for (int j = 0; j < u->n_params; j++)
        if (u->lora_a[j] == k || u->lora_b[j] == k) return true;
    return false;
}

size_t zt_lora_scratch_floats(const zt_unit *u, int B, int T) {
    if (!u->lora) return 0;
    return lora_scratch_floats(B * T, u->lora_width, u->lora->rank, u->lora->dropout);
}
