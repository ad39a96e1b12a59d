/* train_config.c - the training configuration's API: defaults, loading a file of any dialect
 * (detected), --set, provenance, notes, the hash across ranks. The checks are config_checks.c,
 * the key table keys.c; the readers are native_yaml.c, dialect_deepspeed.c and
 * dialect_accelerate.c; output is config_print.c.
 *
 * Invariants:
 *   - every reader works on a copy and collects all its errors (cfg_ctx); the caller's
 *     configuration changes only when there were none;
 *   - every key's source says where its value came from; a value that follows another key
 *     (model.* from model.preset, training.min_lr = lr / 10, lr.total_steps = steps) is re-derived
 *     whenever that key changes, unless it was set itself;
 *   - a dialect may not silently override the native file that includes it, nor one dialect key
 *     another: equal values are fine, different ones are errors naming both places;
 *   - nothing here prints, exits, aborts or asserts on input. */
#include "config/config_internal.h"
#include "comm/launcher.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <xxhash.h>

#define CONFIG_MAX_BYTES (1u << 20)
#define VAL_MAX (ZT_PATH_MAX + 16)

/* ---------------------------------------------------------------------------------------------
 * Collecting errors and notes. */

void zt_cfg_ctx_init(cfg_ctx *x, zt_train_config *c) {
    memset(x, 0, sizeof *x);
    x->c = c;
}

void zt_cfg_ctx_free(cfg_ctx *x) {
    for (int i = 0; i < x->n_errors; i++) free(x->errors[i]);
    free(x->errors);
    x->errors = NULL;
    x->n_errors = x->cap_errors = 0;
}

void zt_cfg_error(cfg_ctx *x, const char *fmt, ...) {
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    for (int i = 0; i < x->n_errors; i++)
        if (strcmp(x->errors[i], line) == 0) return; /* the same problem twice: once */
    if (x->n_errors == x->cap_errors) {
        int cap = x->cap_errors ? 2 * x->cap_errors : 8;
        char **e = realloc(x->errors, (size_t)cap * sizeof *e);
        if (!e) {
            x->nomem = true;
            return;
        }
        x->errors = e;
        x->cap_errors = cap;
    }
    x->errors[x->n_errors] = strdup(line);
    if (!x->errors[x->n_errors]) {
        x->nomem = true;
        return;
    }
    x->n_errors++;
}

void zt_cfg_note_in(zt_train_config *c, zt_config_level level, const char *text) {
    for (int i = 0; i < c->n_notes; i++)
        if (strcmp(c->notes[i].text, text) == 0) return;
    if (c->n_notes >= ZT_CONFIG_MAX_NOTES) {
        c->n_notes_dropped++;
        return;
    }
    c->notes[c->n_notes].level = level;
    snprintf(c->notes[c->n_notes].text, sizeof c->notes[c->n_notes].text, "%s", text);
    c->n_notes++;
}

void zt_cfg_note(cfg_ctx *x, zt_config_level level, const char *fmt, ...) {
    char line[ZT_CONFIG_NOTE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    zt_cfg_note_in(x->c, level, line);
}

int zt_cfg_finish(cfg_ctx *x, zt_error *err) {
    if (x->nomem && x->n_errors == 0)
        return zt_error_set(err, ZT_ERR_NOMEM, "configuration: out of memory");
    if (x->n_errors == 0) return ZT_OK;
    int code = x->nomem ? ZT_ERR_NOMEM : ZT_ERR_USAGE;
    if (x->n_errors == 1) return zt_error_set(err, code, "%s", x->errors[0]);
    /* "N problems:" then one per line, as many as the message holds */
    char msg[sizeof(((zt_error *)0)->msg)];
    size_t n = (size_t)snprintf(msg, sizeof msg, "%d problems in the configuration:", x->n_errors);
    int shown = 0;
    for (int i = 0; i < x->n_errors; i++) {
        size_t need = strlen(x->errors[i]) + 3;
        size_t reserve = i + 1 < x->n_errors ? 48 : 0;
        if (n + need + reserve >= sizeof msg) break;
        n += (size_t)snprintf(msg + n, sizeof msg - n, "\n  %s", x->errors[i]);
        shown++;
    }
    if (shown < x->n_errors)
        snprintf(msg + n, sizeof msg - n, "\n  ... and %d more", x->n_errors - shown);
    return zt_error_set(err, code, "%s", msg);
}

/* ---------------------------------------------------------------------------------------------
 * Setting a key with its source. */

void zt_cfg_set_source(zt_train_config *c, int ki, zt_config_origin origin, const char *loc,
                       const char *desc) {
    zt_config_source *s = &c->source[ki];
    s->origin = origin;
    s->base = origin;
    s->loc_len = 0;
    s->text[0] = '\0';
    if (loc && loc[0]) {
        snprintf(s->text, sizeof s->text, "%s", loc);
        s->loc_len = (int)strlen(s->text);
    }
    if (desc && desc[0]) {
        size_t n = strlen(s->text);
        snprintf(s->text + n, sizeof s->text - n, "%s%s", n ? " " : "", desc);
    }
}

static bool follows(const zt_config_source *s) {
    zt_config_origin o = s->origin == ZT_ORIGIN_AUTO ? s->base : s->origin;
    return o == ZT_ORIGIN_DEFAULT || o == ZT_ORIGIN_DERIVED;
}

void zt_cfg_rederive(zt_train_config *c) {
    int ki_min = zt_cfg_key_index("training.min_lr");
    c->lr.total_steps = c->steps;
    if (ki_min >= 0 && follows(&c->source[ki_min])) {
        c->lr.min_lr = c->lr.max_lr / 10.0f;
        if (c->source[ki_min].origin != ZT_ORIGIN_AUTO)
            zt_cfg_set_source(c, ki_min, ZT_ORIGIN_DERIVED, NULL, "training.lr / 10");
    }
}

int zt_cfg_apply(cfg_ctx *x, int ki, const char *val, size_t len, bool quoted,
                 zt_config_origin origin, const char *loc, const char *desc, const char *label) {
    zt_train_config *c = x->c;
    const key_def *k = &zt_cfg_keys[ki];
    char why[512], before[VAL_MAX], after[VAL_MAX];
    unsigned char saved[ZT_PATH_MAX];
    zt_llama_config saved_model = c->model;
    zt_arch saved_arch = c->model_arch;
    size_t sz = k->size < sizeof saved ? k->size : sizeof saved;
    memcpy(saved, (char *)c + k->offset, sz);
    zt_cfg_format(c, k, before, sizeof before);
    const char *lp = loc && loc[0] ? loc : NULL;
    if (zt_cfg_parse_value(c, k, val, len, quoted, why, sizeof why) != 0) {
        memcpy((char *)c + k->offset, saved, sz);
        c->model = saved_model, c->model_arch = saved_arch;
        x->bad[ki] = true;
        if (label && strcmp(label, k->key) != 0)
            zt_cfg_error(x, "%s%s%s (-> %s): %s", lp ? lp : "", lp ? ": " : "", label, k->key, why);
        else
            zt_cfg_error(x, "%s%s%s: %s", lp ? lp : "", lp ? ": " : "", k->key, why);
        return -1;
    }
    zt_config_source *s = &c->source[ki];
    if (origin == ZT_ORIGIN_DIALECT && (x->native_set[ki] || s->origin == ZT_ORIGIN_DIALECT)) {
        zt_cfg_format(c, k, after, sizeof after);
        if (strcmp(before, after) != 0) {
            memcpy((char *)c + k->offset, saved, sz);
            c->model = saved_model, c->model_arch = saved_arch;
            x->bad[ki] = true;
            zt_cfg_error(x, "%s%s%s: %s %s contradicts %s from %s", lp ? lp : "", lp ? ": " : "",
                         label ? label : k->key, k->key, after, before, s->text);
            return -1;
        }
        return 0; /* the same value from two places: the first one stays the source */
    }
    zt_cfg_set_source(c, ki, origin, loc, desc);
    if (k->type == KT_PRESET) zt_cfg_apply_preset_sources(c);
    zt_cfg_rederive(c);
    return 0;
}

int zt_cfg_apply_str(cfg_ctx *x, const char *key, const char *val, zt_config_origin origin,
                     const char *loc, const char *desc, const char *label) {
    int ki = zt_cfg_key_index(key);
    if (ki < 0) {
        zt_cfg_error(x, "internal: no key %s in the table", key);
        return -1;
    }
    return zt_cfg_apply(x, ki, val, strlen(val), false, origin, loc, desc, label);
}

void zt_cfg_auto(cfg_ctx *x, const char *key, const char *loc, const char *desc) {
    int ki = zt_cfg_key_index(key);
    if (ki < 0) return;
    zt_config_source *s = &x->c->source[ki];
    if (s->origin == ZT_ORIGIN_AUTO) return; /* two "auto"s for one key: the first says it */
    char prior[ZT_CONFIG_SOURCE_MAX], d[ZT_CONFIG_SOURCE_MAX + 64];
    const char *names[] = {"default", "derived", "file", "dialect", "auto", "--set", "launch"};
    if (s->text[0])
        snprintf(prior, sizeof prior, "%s", s->text);
    else
        snprintf(prior, sizeof prior, "%s", names[s->origin]);
    zt_config_origin base = s->origin;
    snprintf(d, sizeof d, "%s: auto, keeps %s", desc ? desc : "", prior);
    zt_cfg_set_source(x->c, ki, ZT_ORIGIN_AUTO, loc, d);
    s->base = base;
}

/* ---------------------------------------------------------------------------------------------
 * Defaults. */

void zt_train_config_default(zt_train_config *c) {
    if (!c) return;
    memset(c, 0, sizeof *c);
    char why[256];
    for (int i = 0; i < zt_cfg_n_keys; i++) {
        if (!zt_cfg_keys[i].def) continue;
        /* tested: the table's defaults parse */
        (void)zt_cfg_parse_value(c, &zt_cfg_keys[i], zt_cfg_keys[i].def, strlen(zt_cfg_keys[i].def),
                                 false, why, sizeof why);
    }
    for (int i = 0; i < zt_cfg_n_keys; i++) zt_cfg_set_source(c, i, ZT_ORIGIN_DEFAULT, NULL, NULL);
    zt_cfg_apply_preset_sources(c);
    c->lr.min_lr = c->lr.max_lr / 10.0f;
    c->lr.total_steps = c->steps;
    int ki = zt_cfg_key_index("training.min_lr");
    if (ki >= 0) zt_cfg_set_source(c, ki, ZT_ORIGIN_DERIVED, NULL, "training.lr / 10");
    snprintf(c->dialect, sizeof c->dialect, "native");
}

void zt_train_config_model(const zt_train_config *c, zt_model_spec *out) {
    memset(out, 0, sizeof *out);
    out->arch = c->model_arch;
    out->llama = c->model;
    out->gpt2 = (zt_gpt2_config){.max_seq_len = c->model.max_seq_len, .vocab_size = c->model.vocab_size,
                                 .n_layer = c->model.n_layer, .n_head = c->model.n_head,
                                 .n_embd = c->model.n_embd, .attention = c->model.attention};
    out->lora = c->lora; /* rank 0: none */
    out->sequence_parallel = c->sequence_parallel;
    out->loss_chunk_tokens = zt_loss_chunk_for(c->loss_chunk_tokens, c->micro_batch, c->seq_len);
}

/* ---------------------------------------------------------------------------------------------
 * --set */

/* The error for an unknown section or key named on --set. */
static void unknown_set_key(cfg_ctx *x, const char *ks, size_t kl) {
    char shown[96], hint[128], names[640];
    const char *dot = memchr(ks, '.', kl);
    size_t sl = dot ? (size_t)(dot - ks) : kl;
    int s = zt_cfg_find_section(ks, sl);
    if (s < 0) {
        zt_cfg_show(shown, sizeof shown, ks, sl);
        hint[0] = '\0';
        for (int i = 0; i < zt_cfg_n_sections; i++)
            if (zt_cfg_edit_distance(ks, sl, zt_cfg_sections[i]) <= 2) {
                snprintf(hint, sizeof hint, "; did you mean %s?", zt_cfg_sections[i]);
                break;
            }
        if (!hint[0] && !dot) zt_cfg_suggest_key(hint, sizeof hint, -1, ks, sl);
        zt_cfg_list_sections(names, sizeof names);
        if (!dot)
            zt_cfg_error(x, "--set: %s: unknown key%s (keys are section.key; sections: %s)", shown,
                         hint, names);
        else
            zt_cfg_error(x, "--set: %s: unknown section%s (sections: %s)", shown, hint, names);
        return;
    }
    zt_cfg_list_keys(names, sizeof names, s);
    if (!dot) {
        zt_cfg_error(x, "--set: %s: a section, not a key (%s keys: %s)", zt_cfg_sections[s],
                     zt_cfg_sections[s], names);
        return;
    }
    const char *leaf = dot + 1;
    size_t ll = kl - sl - 1;
    char full[200];
    snprintf(full, sizeof full, "%.*s.%.*s", (int)sl, ks, (int)(ll < 80 ? ll : 80), leaf);
    zt_cfg_show(shown, sizeof shown, full, strlen(full));
    zt_cfg_suggest_key(hint, sizeof hint, s, leaf, ll);
    zt_cfg_error(x, "--set: %s: unknown key%s (%s keys: %s)", shown, hint, zt_cfg_sections[s], names);
}

int zt_train_config_set(zt_train_config *c, const char *assignment, zt_error *err) {
    if (!c || !assignment) return zt_error_set(err, ZT_ERR_USAGE, "--set: no assignment given");
    char shown[96];
    const char *eq = strchr(assignment, '=');
    if (!eq) {
        zt_cfg_show(shown, sizeof shown, assignment, strlen(assignment));
        return zt_error_set(err, ZT_ERR_USAGE,
                            "--set: \"%s\": expected key=value (e.g. training.steps=10)", shown);
    }
    const char *ks = assignment, *ke = eq;
    while (ks < ke && (*ks == ' ' || *ks == '\t')) ks++;
    while (ke > ks && (ke[-1] == ' ' || ke[-1] == '\t')) ke--;
    const char *vs = eq + 1;
    while (*vs == ' ' || *vs == '\t') vs++;
    size_t vl = strlen(vs);
    while (vl && (vs[vl - 1] == ' ' || vs[vl - 1] == '\t')) vl--;
    if (ks == ke) {
        zt_cfg_show(shown, sizeof shown, assignment, strlen(assignment));
        return zt_error_set(err, ZT_ERR_USAGE, "--set: \"%s\": empty key; expected key=value", shown);
    }
    zt_train_config *tmp = malloc(sizeof *tmp);
    char *val = malloc(vl + 1);
    char *desc = malloc(vl + (size_t)(ke - ks) + 16);
    if (!tmp || !val || !desc) {
        free(tmp);
        free(val);
        free(desc);
        return zt_error_set(err, ZT_ERR_NOMEM, "--set: out of memory");
    }
    memcpy(val, vs, vl);
    val[vl] = '\0';
    *tmp = *c;
    cfg_ctx x;
    zt_cfg_ctx_init(&x, tmp);
    const char *dot = memchr(ks, '.', (size_t)(ke - ks));
    int ki = -1;
    if (dot) {
        int s = zt_cfg_find_section(ks, (size_t)(dot - ks));
        if (s >= 0) ki = zt_cfg_find_key(s, dot + 1, (size_t)(ke - dot - 1));
    }
    if (ki < 0) {
        unknown_set_key(&x, ks, (size_t)(ke - ks));
    } else {
        char sv[80];
        zt_cfg_show(sv, sizeof sv, val, vl);
        snprintf(desc, vl + (size_t)(ke - ks) + 16, "%s=%s", zt_cfg_keys[ki].key, sv);
        zt_cfg_apply(&x, ki, val, vl, false, ZT_ORIGIN_SET, "--set", desc, NULL);
    }
    int rc = zt_cfg_finish(&x, err);
    zt_cfg_ctx_free(&x);
    if (rc == ZT_OK) *c = *tmp;
    free(tmp);
    free(val);
    free(desc);
    return rc;
}

/* ---------------------------------------------------------------------------------------------
 * Files. */

char *zt_cfg_read_file(cfg_ctx *x, const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        zt_cfg_error(x, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    struct stat sb;
    if (fstat(fileno(f), &sb) == 0 && S_ISDIR(sb.st_mode)) {
        fclose(f);
        zt_cfg_error(x, "%s: is a directory, not a config file", path);
        return NULL;
    }
    char *buf = malloc(CONFIG_MAX_BYTES + 2);
    if (!buf) {
        fclose(f);
        x->nomem = true;
        return NULL;
    }
    size_t n = fread(buf, 1, CONFIG_MAX_BYTES + 1, f);
    bool failed = ferror(f) != 0;
    int e = errno;
    fclose(f);
    if (failed) {
        free(buf);
        zt_cfg_error(x, "%s: read error: %s", path, strerror(e));
        return NULL;
    }
    if (n > CONFIG_MAX_BYTES) {
        free(buf);
        zt_cfg_error(x, "%s: larger than %u bytes; is this a config file?", path, CONFIG_MAX_BYTES);
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

void zt_cfg_relative_to(const char *base, const char *path, char *out, size_t cap) {
    const char *slash = base ? strrchr(base, '/') : NULL;
    if (path[0] == '/' || !slash)
        snprintf(out, cap, "%s", path);
    else
        snprintf(out, cap, "%.*s/%s", (int)(slash - base), base, path);
}

/* Which reader a file needs. */
typedef enum dialect { D_NATIVE, D_DEEPSPEED, D_ACCELERATE } dialect;

static bool has_ext(const char *path, const char *ext) {
    size_t n = strlen(path), e = strlen(ext);
    return n >= e && strcasecmp(path + n - e, ext) == 0;
}

/* A top-level key "name" at the start of a line (YAML) or as a JSON member of the outer object
 * (a cheap look: the reader then checks everything). */
static bool mentions_top_key(const char *text, size_t len, const char *name) {
    size_t nl = strlen(name);
    for (size_t i = 0; i + nl < len; i++) {
        bool line_start = i == 0 || text[i - 1] == '\n';
        if (line_start && strncmp(text + i, name, nl) == 0 && (text[i + nl] == ':' || text[i + nl] == ' '))
            return true;
        if (text[i] == '"' && i + nl + 1 < len && strncmp(text + i + 1, name, nl) == 0 &&
            text[i + nl + 1] == '"')
            return true;
    }
    return false;
}

static dialect detect(const char *path, const char *text, size_t len) {
    size_t i = 0;
    while (i < len && (text[i] == ' ' || text[i] == '\t' || text[i] == '\n' || text[i] == '\r')) i++;
    bool json = has_ext(path, ".json") || (i < len && text[i] == '{');
    bool acc = mentions_top_key(text, len, "distributed_type") ||
               mentions_top_key(text, len, "compute_environment");
    if (acc) return D_ACCELERATE; /* Accelerate writes YAML or JSON; YAML reads both */
    return json ? D_DEEPSPEED : D_NATIVE;
}

static int finish_load(cfg_ctx *x, zt_train_config *c, zt_train_config *tmp, zt_error *err) {
    if (x->n_errors == 0 && !x->nomem) zt_cfg_check_invariants(x);
    int rc = zt_cfg_finish(x, err);
    zt_cfg_ctx_free(x);
    if (rc == ZT_OK) *c = *tmp;
    free(tmp);
    return rc;
}

static int load_text(zt_train_config *c, const char *text, size_t len, const char *name,
                     dialect d, zt_error *err) {
    if (!name) name = "<config>";
    if (!c || (!text && len))
        return zt_error_set(err, ZT_ERR_USAGE, "%s: NULL configuration or text", name);
    zt_train_config *tmp = malloc(sizeof *tmp);
    if (!tmp) return zt_error_set(err, ZT_ERR_NOMEM, "%s: out of memory", name);
    zt_train_config_default(tmp);
    cfg_ctx x;
    zt_cfg_ctx_init(&x, tmp);
    x.main_name = name;
    const char *t = text ? text : "";
    switch (d) {
    case D_NATIVE: zt_cfg_read_native(&x, t, len, name); break;
    case D_DEEPSPEED:
        snprintf(tmp->dialect, sizeof tmp->dialect, "deepspeed");
        zt_cfg_read_deepspeed(&x, t, len, name);
        break;
    case D_ACCELERATE:
        snprintf(tmp->dialect, sizeof tmp->dialect, "accelerate");
        zt_cfg_read_accelerate(&x, t, len, name);
        break;
    }
    return finish_load(&x, c, tmp, err);
}

int zt_train_config_parse(zt_train_config *c, const char *yaml, size_t len, const char *name,
                          zt_error *err) {
    return load_text(c, yaml, len, name, D_NATIVE, err);
}

int zt_train_config_parse_deepspeed(zt_train_config *c, const char *json, size_t len,
                                    const char *name, zt_error *err) {
    return load_text(c, json, len, name, D_DEEPSPEED, err);
}

int zt_train_config_parse_accelerate(zt_train_config *c, const char *yaml, size_t len,
                                     const char *name, zt_error *err) {
    return load_text(c, yaml, len, name, D_ACCELERATE, err);
}

int zt_train_config_load(zt_train_config *c, const char *path, zt_error *err) {
    if (!path) return zt_error_set(err, ZT_ERR_USAGE, "train config: no file name");
    if (!c) return zt_error_set(err, ZT_ERR_USAGE, "%s: NULL configuration", path);
    cfg_ctx x;
    zt_cfg_ctx_init(&x, NULL);
    size_t len = 0;
    char *text = zt_cfg_read_file(&x, path, &len);
    if (!text) {
        int rc = zt_cfg_finish(&x, err);
        zt_cfg_ctx_free(&x);
        return rc;
    }
    zt_cfg_ctx_free(&x);
    int rc = load_text(c, text, len, path, detect(path, text, len), err);
    free(text);
    return rc;
}

/* ---------------------------------------------------------------------------------------------
 * Notes, hash, equality. */

typedef struct note_filter {
    zt_config_note_fn fn;
    void *ctx;
} note_filter;

static void drop_errors(void *p, zt_config_level level, const char *text) {
    note_filter *f = p;
    if (level != ZT_CONFIG_ERROR) f->fn(f->ctx, level, text);
}

void zt_train_config_notes(const zt_train_config *c, zt_config_note_fn fn, void *ctx) {
    if (!c || !fn) return;
    int n = c->n_notes < ZT_CONFIG_MAX_NOTES ? c->n_notes : ZT_CONFIG_MAX_NOTES;
    for (int i = 0; i < n; i++) fn(ctx, c->notes[i].level, c->notes[i].text);
    if (c->n_notes_dropped > 0) {
        char t[96];
        snprintf(t, sizeof t, "... and %d more notes", c->n_notes_dropped);
        fn(ctx, ZT_CONFIG_NOTE, t);
    }
    /* the support table's warnings and notes; its errors are zt_train_config_validate's */
    note_filter f = {fn, ctx};
    zt_cfg_support_check(c, drop_errors, &f);
}

uint64_t zt_train_config_hash(const zt_train_config *c) {
    if (!c) return 0;
    XXH64_state_t *st = XXH64_createState();
    if (!st) return 0;
    XXH64_reset(st, 0x7a65726f636667ULL); /* "zerocfg" */
    char v[VAL_MAX];
    for (int i = 0; i < zt_cfg_n_keys; i++) {
        zt_cfg_format(c, &zt_cfg_keys[i], v, sizeof v);
        XXH64_update(st, zt_cfg_keys[i].key, strlen(zt_cfg_keys[i].key));
        XXH64_update(st, "=", 1);
        XXH64_update(st, v, strlen(v));
        XXH64_update(st, "\n", 1);
    }
    uint64_t h = XXH64_digest(st);
    XXH64_freeState(st);
    return h;
}

bool zt_train_config_is_set(const zt_train_config *c, const char *key) {
    int ki = zt_cfg_key_index(key);
    return ki >= 0 && c->source[ki].origin != ZT_ORIGIN_DEFAULT && c->source[ki].origin != ZT_ORIGIN_DERIVED;
}

bool zt_train_config_equal(const zt_train_config *a, const zt_train_config *b) {
    if (!a || !b) return a == b;
    char va[VAL_MAX], vb[VAL_MAX];
    for (int i = 0; i < zt_cfg_n_keys; i++) {
        zt_cfg_format(a, &zt_cfg_keys[i], va, sizeof va);
        zt_cfg_format(b, &zt_cfg_keys[i], vb, sizeof vb);
        if (strcmp(va, vb) != 0) return false;
    }
    return true;
}
