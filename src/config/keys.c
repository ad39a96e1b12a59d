/* keys.c - what works on a single row of the key table (the rows: key_table.c): parsing a value
 * with its type and range, formatting it canonically, describing it for messages and docs,
 * did-you-mean, the public lookups. Every reader (native YAML, --set, DeepSpeed JSON, Accelerate
 * YAML), the validation, the hash, `zerotrain config` and docs/config.md go through it.
 *
 * Invariants:
 *   - a row's type and bounds are enforced on every path that writes the field and re-checked by
 *     zt_cfg_check_field for structs built by hand;
 *   - zt_cfg_format's text parses back (zt_cfg_parse_value) to the same value, bit for bit.
 * Nothing here exits, aborts or asserts on input. */
#include "config/config_internal.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Presets zt_model_preset knows (for messages only: zt_model_preset decides). */
#define PRESET_NAMES "tiny, gpt2-124M, gpt2, gpt2-350M, gpt2-774M, gpt2-1558M, llama-tiny, llama-124M, llama-7b, " \
                     "llama-13b, llama-70b, llama3-8b, llama3-70b, mistral-7b, qwen2-0.5b, mixtral-8x7b, llama-124M-moe, llama-tiny-moe, qwen1.5-moe-a2.7b"

void zt_cfg_preset_model(const zt_model_spec *m, zt_llama_config *out) {
    if (m->arch == ZT_ARCH_LLAMA) {
        *out = m->llama;
        return;
    }
    /* GPT-2 in the llama fields: ungrouped heads, a 4C MLP, tied embeddings */
    const zt_gpt2_config *g = &m->gpt2;
    *out = (zt_llama_config){.max_seq_len = g->max_seq_len, .vocab_size = g->vocab_size, .n_layer = g->n_layer,
                             .n_head = g->n_head, .n_embd = g->n_embd, .n_kv_head = g->n_head,
                             .intermediate_size = 4 * g->n_embd, .rope_theta = 10000.0f, .rms_norm_eps = 1e-5f,
                             .tie_embeddings = true, .attention = g->attention};
}

/* ---------------------------------------------------------------------------------------------
 * Public lookups. */

int zt_config_key_count(void) { return zt_cfg_n_keys; }

const char *zt_config_key_name(int i) {
    return i >= 0 && i < zt_cfg_n_keys ? zt_cfg_keys[i].key : NULL;
}

const char *zt_config_key_value(const zt_train_config *c, int i, char *out, size_t cap) {
    if (!out || !cap) return out;
    out[0] = '\0';
    if (c && i >= 0 && i < zt_cfg_n_keys) zt_cfg_format(c, &zt_cfg_keys[i], out, cap);
    return out;
}

const zt_config_source *zt_config_key_source(const zt_train_config *c, int i) {
    return c && i >= 0 && i < zt_cfg_n_keys ? &c->source[i] : NULL;
}

/* ---------------------------------------------------------------------------------------------
 * Names. */

const char *zt_cfg_leaf(const key_def *k) { return strchr(k->key, '.') + 1; }

static size_t section_len(const key_def *k) { return (size_t)(strchr(k->key, '.') - k->key); }

int zt_cfg_find_section(const char *s, size_t len) {
    for (int i = 0; i < zt_cfg_n_sections; i++)
        if (strlen(zt_cfg_sections[i]) == len && memcmp(zt_cfg_sections[i], s, len) == 0) return i;
    return -1;
}

static bool in_section(const key_def *k, int sec) {
    size_t sl = strlen(zt_cfg_sections[sec]);
    return section_len(k) == sl && memcmp(k->key, zt_cfg_sections[sec], sl) == 0;
}

int zt_cfg_find_key(int sec, const char *leaf, size_t len) {
    for (int i = 0; i < zt_cfg_n_keys; i++) {
        const char *lf = zt_cfg_leaf(&zt_cfg_keys[i]);
        if (in_section(&zt_cfg_keys[i], sec) && strlen(lf) == len && memcmp(lf, leaf, len) == 0)
            return i;
    }
    return -1;
}

int zt_cfg_key_index(const char *dotted) {
    if (!dotted) return -1;
    for (int i = 0; i < zt_cfg_n_keys; i++)
        if (strcmp(zt_cfg_keys[i].key, dotted) == 0) return i;
    return -1;
}

size_t zt_cfg_edit_distance(const char *a, size_t la, const char *b) {
    size_t lb = strlen(b), row[64];
    if (la >= 64 || lb >= 64) return 99;
    for (size_t j = 0; j <= lb; j++) row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t prev = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t cur = row[j], best = prev + (a[i - 1] != b[j - 1]);
            if (row[j] + 1 < best) best = row[j] + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            prev = cur;
        }
    }
    return row[lb];
}

void zt_cfg_suggest_key(char *out, size_t cap, int sec, const char *leaf, size_t len) {
    int best = -1;
    size_t best_d = 3;
    for (int i = 0; i < zt_cfg_n_keys; i++) {
        bool same = sec >= 0 && in_section(&zt_cfg_keys[i], sec);
        size_t d = zt_cfg_edit_distance(leaf, len, zt_cfg_leaf(&zt_cfg_keys[i]));
        if (!same && d != 0) continue; /* other sections: exact leaf only */
        if (d < best_d) {
            best_d = d;
            best = i;
        }
    }
    if (best >= 0)
        snprintf(out, cap, "; did you mean %s?", zt_cfg_keys[best].key);
    else if (cap)
        out[0] = '\0';
}

static void append(char *out, size_t cap, size_t *n, const char *s) {
    if (*n >= cap) return;
    int w = snprintf(out + *n, cap - *n, "%s", s);
    if (w < 0) return;
    *n = (size_t)w >= cap - *n ? cap - 1 : *n + (size_t)w;
}

void zt_cfg_list_keys(char *out, size_t cap, int sec) {
    size_t n = 0;
    out[0] = '\0';
    for (int i = 0; i < zt_cfg_n_keys; i++) {
        if (!in_section(&zt_cfg_keys[i], sec)) continue;
        if (n) append(out, cap, &n, ", ");
        append(out, cap, &n, zt_cfg_leaf(&zt_cfg_keys[i]));
    }
}

void zt_cfg_list_sections(char *out, size_t cap) {
    size_t n = 0;
    out[0] = '\0';
    for (int i = 0; i < zt_cfg_n_sections; i++) {
        if (i) append(out, cap, &n, ", ");
        append(out, cap, &n, zt_cfg_sections[i]);
    }
}

void zt_cfg_list_enum(char *out, size_t cap, const enum_value *e) {
    size_t n = 0;
    out[0] = '\0';
    for (int i = 0; e[i].name; i++) {
        if (i) append(out, cap, &n, ", ");
        append(out, cap, &n, e[i].name);
    }
}

void zt_cfg_show(char *out, size_t cap, const char *s, size_t len) {
    size_t n = 0, lim = len < 60 ? len : 60;
    if (!cap) return;
    for (size_t i = 0; i < lim && n + 4 < cap; i++) {
        unsigned char ch = (unsigned char)s[i];
        out[n++] = (ch < 0x20 || ch == 0x7f) ? '?' : (char)ch;
    }
    if (lim < len && n + 4 <= cap) {
        memcpy(out + n, "...", 3);
        n += 3;
    }
    out[n < cap ? n : cap - 1] = '\0';
}

void zt_cfg_describe(const key_def *k, char *out, size_t cap) {
    switch (k->type) {
    case KT_INT:
    case KT_INT64: {
        int64_t tmax = k->type == KT_INT ? INT_MAX : INT64_MAX;
        if (k->imax == tmax && k->imin == 1)
            snprintf(out, cap, "a positive integer");
        else if (k->imax == tmax && k->imin == 0)
            snprintf(out, cap, "a non-negative integer");
        else
            snprintf(out, cap, "an integer in [%lld, %lld]", (long long)k->imin,
                     (long long)k->imax);
        break;
    }
    case KT_U64: snprintf(out, cap, "a non-negative integer below 2^64"); break;
    case KT_FLOAT:
        if (isinf(k->fmax) && k->fmin == 0.0)
            snprintf(out, cap, "a %s number", (k->flags & F_OPEN_LO) ? "positive" : "non-negative");
        else
            snprintf(out, cap, "a number in %c%g, %g%c", (k->flags & F_OPEN_LO) ? '(' : '[',
                     k->fmin, k->fmax, (k->flags & F_OPEN_HI) ? ')' : ']');
        break;
    case KT_BOOL: snprintf(out, cap, "true or false (or yes/no)"); break;
    case KT_STR:
        if (k->flags & F_LIST)
            snprintf(out, cap, "a string or a list of strings, shorter than %zu bytes joined by commas", k->size);
        else
            snprintf(out, cap, "a %spath shorter than %zu bytes",
                     (k->flags & F_REQUIRED) ? "non-empty " : "", k->size);
        break;
    case KT_ENUM: {
        char names[160];
        zt_cfg_list_enum(names, sizeof names, k->enums);
        snprintf(out, cap, "one of: %s", names);
        break;
    }
    case KT_PRESET: snprintf(out, cap, "a preset name (%s)", PRESET_NAMES); break;
    }
}

/* ---------------------------------------------------------------------------------------------
 * Values. */

static bool text_is_null(const char *s, size_t len, bool quoted) {
    return !quoted && (len == 0 || strcmp(s, "~") == 0 || strcmp(s, "null") == 0 ||
                       strcmp(s, "Null") == 0 || strcmp(s, "NULL") == 0);
}

/* Decimal integer, optional sign, digits only, whole string, no overflow. */
static bool parse_i64(const char *s, int64_t *out) {
    const char *p = s + (*s == '+' || *s == '-');
    if (*p < '0' || *p > '9') return false;
    for (const char *q = p; *q; q++)
        if (*q < '0' || *q > '9') return false;
    errno = 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (errno == ERANGE || *end) return false;
    *out = (int64_t)v;
    return true;
}

static bool parse_u64(const char *s, uint64_t *out) {
    const char *p = s + (*s == '+');
    if (*p < '0' || *p > '9') return false;
    for (const char *q = p; *q; q++)
        if (*q < '0' || *q > '9') return false;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(p, &end, 10);
    if (errno == ERANGE || *end) return false;
    *out = (uint64_t)v;
    return true;
}

/* Decimal number ("3e-4", "0.9", "10"): no hex, inf, nan, spaces or YAML's ".inf". */
static bool parse_double(const char *s, double *out) {
    const char *p = s + (*s == '+' || *s == '-');
    if (!((*p >= '0' && *p <= '9') || (*p == '.' && p[1] >= '0' && p[1] <= '9'))) return false;
    if (strpbrk(s, "xXpP")) return false;
    errno = 0;
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end || !isfinite(v)) return false;
    *out = v;
    return true;
}

/* Paths must be UTF-8: --print writes them into YAML, which is UTF-8 only. */
static bool valid_utf8(const char *s, size_t n) {
    const unsigned char *p = (const unsigned char *)s, *end = p + n;
    while (p < end) {
        unsigned c = *p++;
        int more = c < 0x80 ? 0 : (c & 0xe0) == 0xc0 ? 1 : (c & 0xf0) == 0xe0 ? 2 : (c & 0xf8) == 0xf0 ? 3 : -1;
        if (more < 0 || (c & 0xfe) == 0xc0 || c > 0xf4) return false; /* overlong or out of range */
        for (int i = 0; i < more; i++)
            if (p >= end || (*p++ & 0xc0) != 0x80) return false;
    }
    return true;
}

static bool float_in_range(const key_def *k, float f) {
    bool lo_ok = (k->flags & F_OPEN_LO) ? f > k->fmin : f >= k->fmin;
    bool hi_ok = (k->flags & F_OPEN_HI) ? f < k->fmax : f <= k->fmax;
    return isfinite(f) && lo_ok && hi_ok;
}

int zt_cfg_parse_value(zt_train_config *c, const key_def *k, const char *s, size_t len, bool quoted,
                       char *why, size_t cap) {
    char got[96], want[192];
    zt_cfg_show(got, sizeof got, s, len);
    zt_cfg_describe(k, want, sizeof want);
    if (strlen(s) != len) {
        snprintf(why, cap, "the value contains a NUL byte");
        return -1;
    }
    const char *kind = quoted ? " (a quoted string)" : "";
    char *dst = (char *)c + k->offset;
    switch (k->type) {
    case KT_INT:
    case KT_INT64: {
        int64_t x;
        if (quoted || text_is_null(s, len, quoted) || !parse_i64(s, &x) || x < k->imin ||
            x > k->imax) {
            snprintf(why, cap, "expected %s, got \"%s\"%s", want, got, kind);
            return -1;
        }
        if (k->type == KT_INT) {
            int i = (int)x;
            memcpy(dst, &i, sizeof i);
        } else {
            memcpy(dst, &x, sizeof x);
        }
        break;
    }
    case KT_U64: {
        uint64_t x;
        if (quoted || text_is_null(s, len, quoted) || !parse_u64(s, &x)) {
            snprintf(why, cap, "expected %s, got \"%s\"%s", want, got, kind);
            return -1;
        }
        memcpy(dst, &x, sizeof x);
        break;
    }
    case KT_FLOAT: {
        double d;
        if (quoted || text_is_null(s, len, quoted) || !parse_double(s, &d)) {
            snprintf(why, cap, "expected %s, got \"%s\"%s", want, got, kind);
            return -1;
        }
        float f = (float)d; /* the range applies to the value actually stored */
        if (!float_in_range(k, f)) {
            snprintf(why, cap, "expected %s, got \"%s\"", want, got);
            return -1;
        }
        memcpy(dst, &f, sizeof f);
        break;
    }
    case KT_BOOL: {
        bool b;
        if (!quoted && (strcasecmp(s, "true") == 0 || strcasecmp(s, "yes") == 0))
            b = true;
        else if (!quoted && (strcasecmp(s, "false") == 0 || strcasecmp(s, "no") == 0))
            b = false;
        else {
            snprintf(why, cap, "expected %s, got \"%s\"%s", want, got, kind);
            return -1;
        }
        memcpy(dst, &b, sizeof b);
        break;
    }
    case KT_STR: {
        size_t n = text_is_null(s, len, quoted) ? 0 : len;
        const char *what = (k->flags & F_LIST) ? "value" : "path";
        if (!valid_utf8(s, n)) {
            snprintf(why, cap, "the %s is not valid UTF-8", what);
            return -1;
        }
        if (n == 0 && (k->flags & F_REQUIRED)) {
            snprintf(why, cap, "expected %s, got an empty value", want);
            return -1;
        }
        if (n >= k->size) {
            snprintf(why, cap, "the %s is %zu bytes long; the limit is %zu", what, n, k->size - 1);
            return -1;
        }
        memset(dst, 0, k->size);
        memcpy(dst, s, n);
        break;
    }
    case KT_ENUM: {
        int i;
        for (i = 0; k->enums[i].name; i++)
            if (strcasecmp(k->enums[i].name, s) == 0) break;
        if (!k->enums[i].name || text_is_null(s, len, quoted)) {
            char names[160];
            zt_cfg_list_enum(names, sizeof names, k->enums);
            snprintf(why, cap, "unknown value \"%s\" (allowed: %s)", got, names);
            return -1;
        }
        memcpy(dst, &k->enums[i].value, sizeof(int));
        break;
    }
    case KT_PRESET: {
        zt_model_spec m;
        zt_error perr = {0};
        if (text_is_null(s, len, quoted) || len >= k->size ||
            zt_model_preset(s, &m, &perr) != ZT_OK) {
            snprintf(why, cap, "unknown preset \"%s\" (allowed: %s)", got, PRESET_NAMES);
            return -1;
        }
        memset(dst, 0, k->size);
        memcpy(dst, s, len);
        c->model_arch = m.arch;
        zt_cfg_preset_model(&m, &c->model);
        break;
    }
    }
    return 0;
}

/* The shortest %g form that reads back as the same float. */
static void format_float(float f, char *out, size_t cap) {
    for (int prec = 6; prec <= 9; prec++) {
        snprintf(out, cap, "%.*g", prec, (double)f);
        if ((float)strtod(out, NULL) == f) break;
    }
    /* "1e-08" and "25" both parse back; keep a number YAML reads as a number */
}

void zt_cfg_format(const zt_train_config *c, const key_def *k, char *out, size_t cap) {
    const char *p = (const char *)c + k->offset;
    if (!cap) return;
    out[0] = '\0';
    switch (k->type) {
    case KT_INT: {
        int i;
        memcpy(&i, p, sizeof i);
        snprintf(out, cap, "%d", i);
        break;
    }
    case KT_INT64: {
        int64_t x;
        memcpy(&x, p, sizeof x);
        snprintf(out, cap, "%lld", (long long)x);
        break;
    }
    case KT_U64: {
        uint64_t x;
        memcpy(&x, p, sizeof x);
        snprintf(out, cap, "%llu", (unsigned long long)x);
        break;
    }
    case KT_FLOAT: {
        float f;
        memcpy(&f, p, sizeof f);
        format_float(f, out, cap);
        break;
    }
    case KT_BOOL: {
        bool b;
        memcpy(&b, p, sizeof b);
        snprintf(out, cap, "%s", b ? "true" : "false");
        break;
    }
    case KT_STR:
    case KT_PRESET: {
        size_t n = strnlen(p, k->size);
        if (n >= k->size) n = k->size - 1;
        if (n >= cap) n = cap - 1;
        memcpy(out, p, n);
        out[n] = '\0';
        break;
    }
    case KT_ENUM: {
        int x;
        memcpy(&x, p, sizeof x);
        for (int i = 0; k->enums[i].name; i++)
            if (k->enums[i].value == x) {
                snprintf(out, cap, "%s", k->enums[i].name);
                return;
            }
        snprintf(out, cap, "%d", x);
        break;
    }
    }
}

int zt_cfg_check_field(const zt_train_config *c, const key_def *k, char *why, size_t cap) {
    const char *p = (const char *)c + k->offset;
    char want[192];
    zt_cfg_describe(k, want, sizeof want);
    switch (k->type) {
    case KT_INT:
    case KT_INT64: {
        int64_t x;
        if (k->type == KT_INT) {
            int i;
            memcpy(&i, p, sizeof i);
            x = i;
        } else {
            memcpy(&x, p, sizeof x);
        }
        if (x < k->imin || x > k->imax) {
            snprintf(why, cap, "expected %s, got %lld", want, (long long)x);
            return -1;
        }
        break;
    }
    case KT_FLOAT: {
        float f;
        memcpy(&f, p, sizeof f);
        if (!float_in_range(k, f)) {
            snprintf(why, cap, "expected %s, got %g", want, (double)f);
            return -1;
        }
        break;
    }
    case KT_STR:
    case KT_PRESET:
        if (!memchr(p, '\0', k->size)) {
            snprintf(why, cap, "not NUL-terminated within %zu bytes", k->size);
            return -1;
        }
        if (k->type == KT_PRESET && p[0] == '\0') {
            snprintf(why, cap, "missing: expected %s", want);
            return -1;
        }
        break;
    case KT_ENUM: {
        int x;
        memcpy(&x, p, sizeof x);
        int i;
        for (i = 0; k->enums[i].name; i++)
            if (k->enums[i].value == x) break;
        if (!k->enums[i].name) {
            snprintf(why, cap, "invalid value %d: expected %s", x, want);
            return -1;
        }
        break;
    }
    case KT_U64:
    case KT_BOOL: break;
    }
    return 0;
}

void zt_cfg_apply_preset_sources(zt_train_config *c) {
    for (int i = 0; i < zt_cfg_n_keys; i++) {
        if (strncmp(zt_cfg_keys[i].key, "model.", 6) != 0 || strcmp(zt_cfg_keys[i].key, "model.preset") == 0)
            continue;
        c->source[i].origin = ZT_ORIGIN_DERIVED;
        c->source[i].base = ZT_ORIGIN_DERIVED;
        snprintf(c->source[i].text, sizeof c->source[i].text, "model.preset %s", c->model_preset);
    }
}
