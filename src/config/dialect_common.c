/* dialect_common.c - the one interpreter of the dialect row tables (dialect_deepspeed.def,
 * dialect_accelerate.def): it walks a document tree against a dialect's rows and applies each
 * row's kind (config_internal.h, row_kind): unknown keys (a typo is an error with did-you-mean;
 * no close match is a warning, or an error at the root of a strict dialect), comment keys,
 * duplicates, value kinds, "auto", the transforms to native keys, notes, warnings and refusals.
 * Also the messages with positions and the typed reads the dialects' resolve code uses.
 *
 * Invariants: every problem is recorded in the cfg_ctx and the walk goes on; a row's path is
 * met at most once per document (duplicates are refused), so the seen list is bounded by the
 * rows. */
#include "config/config_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---------------------------------------------------------------------------------------------
 * Messages and typed reads. */

const char *zt_cfg_where(const dctx *d, const cfg_node *n, bool key_pos, char *out, size_t cap) {
    int line = key_pos ? n->line : n->vline, col = key_pos ? n->col : n->vcol;
    if (line > 0)
        snprintf(out, cap, "%s:%d:%d", d->file, line, col);
    else
        snprintf(out, cap, "%s", d->file);
    return out;
}

const char *zt_cfg_src(const dctx *d, const cfg_node *n, const char *path, char *out, size_t cap) {
    char v[100];
    zt_cfg_node_show(n, v, sizeof v);
    snprintf(out, cap, "%s %s=%s", d->dialect, path, v);
    return out;
}

void zt_cfg_derror(dctx *d, const cfg_node *n, const char *path, const char *fmt, ...) {
    char msg[700], w[ZT_PATH_MAX + 32];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    zt_cfg_error(d->x, "%s: %s: %s", zt_cfg_where(d, n, false, w, sizeof w), path, msg);
}

void zt_cfg_dnote(dctx *d, zt_config_level level, const cfg_node *n, const char *path,
                  const char *fmt, ...) {
    char msg[ZT_CONFIG_NOTE_MAX], w[ZT_PATH_MAX + 32];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    zt_cfg_note(d->x, level, "%s: %s: %s", zt_cfg_where(d, n, true, w, sizeof w), path, msg);
}

bool zt_cfg_get_int(dctx *d, const cfg_node *n, const char *path, int64_t lo, int64_t hi,
                    int64_t *out) {
    char v[100];
    if (n->kind == CN_NUM && n->num == floor(n->num) && n->num >= (double)lo && n->num <= (double)hi) {
        *out = (int64_t)n->num;
        return true;
    }
    zt_cfg_node_show(n, v, sizeof v);
    if (hi == INT64_MAX)
        zt_cfg_derror(d, n, path, "expected an integer >= %lld, got %s", (long long)lo, v);
    else
        zt_cfg_derror(d, n, path, "expected an integer in [%lld, %lld], got %s", (long long)lo,
                      (long long)hi, v);
    return false;
}

bool zt_cfg_get_num(dctx *d, const cfg_node *n, const char *path, double lo, double hi,
                    double *out) {
    char v[100];
    if (n->kind == CN_NUM && isfinite(n->num) && n->num >= lo && n->num <= hi) {
        *out = n->num;
        return true;
    }
    zt_cfg_node_show(n, v, sizeof v);
    if (isinf(hi))
        zt_cfg_derror(d, n, path, "expected a number >= %g, got %s", lo, v);
    else
        zt_cfg_derror(d, n, path, "expected a number in [%g, %g], got %s", lo, hi, v);
    return false;
}

/* A boolean node, or a string Accelerate's str_to_bool reads, into out; false when neither. */
static bool bool_of(const cfg_node *n, bool *out) {
    static const char *const T[] = {"true", "yes", "y", "t", "on", "1"};
    static const char *const F[] = {"false", "no", "n", "f", "off", "0"};
    if (n->kind == CN_BOOL) {
        *out = n->b;
        return true;
    }
    for (size_t i = 0; n->kind == CN_STR && n->text && i < sizeof T / sizeof T[0]; i++)
        if (!strcasecmp(n->text, T[i]) || !strcasecmp(n->text, F[i])) {
            *out = !strcasecmp(n->text, T[i]);
            return true;
        }
    return false;
}

bool zt_cfg_get_bool(dctx *d, const cfg_node *n, const char *path, bool *out) {
    char v[100];
    if (bool_of(n, out)) return true;
    zt_cfg_node_show(n, v, sizeof v);
    zt_cfg_derror(d, n, path, "expected true or false, got %s", v);
    return false;
}

int zt_cfg_map(dctx *d, const cfg_node *n, const char *path, const char *native, const char *val) {
    char w[ZT_PATH_MAX + 32], desc[ZT_CONFIG_SOURCE_MAX];
    zt_cfg_where(d, n, false, w, sizeof w);
    zt_cfg_src(d, n, path, desc, sizeof desc);
    return zt_cfg_apply_str(d->x, native, val, ZT_ORIGIN_DIALECT, w, desc, path);
}

void zt_cfg_fit_default(dctx *d, const char *key, int64_t need, const cfg_node *n, const char *path) {
    int ki = zt_cfg_key_index(key);
    zt_train_config *c = d->x->c;
    if (ki < 0 || d->x->native_set[ki] || c->source[ki].origin != ZT_ORIGIN_DEFAULT) return;
    char have[64], v[32], w[ZT_PATH_MAX + 32], desc[ZT_CONFIG_SOURCE_MAX];
    zt_cfg_format(c, &zt_cfg_keys[ki], have, sizeof have);
    if (strtoll(have, NULL, 10) >= need) return;
    snprintf(v, sizeof v, "%lld", (long long)need);
    snprintf(desc, sizeof desc, "raised from the default %s to fit %s %s=%lld: set %s", have,
             d->dialect, path, (long long)need, key);
    zt_cfg_apply_str(d->x, key, v, ZT_ORIGIN_DERIVED, zt_cfg_where(d, n, false, w, sizeof w), desc, key);
    zt_cfg_dnote(d, ZT_CONFIG_WARNING, n, path, "%lld exceeds %s's default %s, which no file set: "
                 "%s raised to %lld (set %s to choose)", (long long)need, key, have, key,
                 (long long)need, key);
}

void zt_cfg_map_checkpointing(dctx *d, const cfg_node *n, const char *path, bool on, const char *what) {
    int ki = zt_cfg_key_index("memory.activation_checkpointing");
    if (on && ki >= 0 && d->x->native_set[ki] && d->x->c->activation_checkpointing == ZT_CFG_RECOMPUTE_SELECTIVE)
        zt_cfg_dnote(d, ZT_CONFIG_NOTE, n, path, "keeps the native memory.activation_checkpointing "
                     "selective (%s alone means full)", what);
    else
        zt_cfg_map(d, n, path, "memory.activation_checkpointing", on ? "full" : "none");
}

/* The text a table or a neutral list matches: true/false, null, a number or string as written. */
static const char *scalar_text(const cfg_node *n) {
    switch (n->kind) {
    case CN_BOOL: return n->b ? "true" : "false";
    case CN_NULL: return "null";
    case CN_MAP: return "{...}";
    case CN_SEQ: return n->child ? "[...]" : "[]";
    default: return n->text ? n->text : "";
    }
}

/* The i-th entry of a list "a|b" (sep '|') or a table "a=x,b=y" (sep ','), into out; false past
 * the end. */
static bool entry(const char *list, char sep, int i, char *out, size_t cap) {
    for (const char *p = list; p; i--) {
        const char *e = strchr(p, sep);
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (i == 0) {
            snprintf(out, cap, "%.*s", (int)len, p);
            return true;
        }
        p = e ? e + 1 : NULL;
    }
    return false;
}

/* Whether the value is one of the neutral values "a|b" (any case). */
static bool neutral(const char *list, const cfg_node *n) {
    char e[64];
    const char *v = scalar_text(n);
    for (int i = 0; list && entry(list, '|', i, e, sizeof e); i++)
        if (!strcasecmp(e, v)) return true;
    return false;
}

/* "a, b or c" from a list or a table's inputs (without "null" and "*"). */
static void inputs(const char *list, char sep, char *out, size_t cap) {
    char e[64], *eq;
    const char *pick[32];
    char buf[32][64];
    int k = 0;
    for (int i = 0; k < 32 && entry(list, sep, i, e, sizeof e); i++) {
        if ((eq = strchr(e, '='))) *eq = '\0';
        if (!strcmp(e, "*") || !strcmp(e, "null")) continue;
        snprintf(buf[k], sizeof buf[k], "%s", e);
        pick[k] = buf[k];
        k++;
    }
    size_t n = 0;
    out[0] = '\0';
    for (int i = 0; i < k; i++) {
        int w = snprintf(out + n, cap - n, "%s%s", i == 0 ? "" : i == k - 1 ? " or " : ", ", pick[i]);
        if (w < 0 || (size_t)w >= cap - n) break;
        n += (size_t)w;
    }
}

/* XF_TABLE: the output for value v into out; false when v has no entry. */
static bool table_lookup(const char *table, const char *v, char *out, size_t cap) {
    char e[128];
    for (int i = 0; entry(table, ',', i, e, sizeof e); i++) {
        char *eq = strchr(e, '=');
        if (!eq && !strcmp(e, "*")) {
            snprintf(out, cap, "%s", v);
            return true;
        }
        if (!eq) continue;
        *eq = '\0';
        if (!strcasecmp(e, v)) {
            snprintf(out, cap, "%s", eq + 1);
            return true;
        }
    }
    return false;
}

int zt_cfg_map_node(dctx *d, const cfg_node *n, const char *path, const char *native) {
    char w[ZT_PATH_MAX + 32], desc[ZT_CONFIG_SOURCE_MAX];
    if (zt_cfg_is_auto(n)) {
        zt_cfg_auto(d->x, native, zt_cfg_where(d, n, false, w, sizeof w),
                    zt_cfg_src(d, n, path, desc, sizeof desc));
        return 0;
    }
    return zt_cfg_map(d, n, path, native, n->kind == CN_NULL ? "" : scalar_text(n));
}

/* RK_MAP: the value through the row's transform to its native key. */
static int map_value(dctx *d, const dialect_row *r, const cfg_node *n, const char *path) {
    char v[ZT_PATH_MAX + 8], s[100], want[400];
    double e;
    bool b;
    if (zt_cfg_is_auto(n) || r->xf == XF_SAME) return zt_cfg_map_node(d, n, path, r->native);
    switch (r->xf) {
    case XF_TABLE: {
        const char *t = scalar_text(n);
        if (n->kind == CN_STR && (r->accept & A_BOOL) && bool_of(n, &b))
            t = b ? "true" : "false";
        if (!table_lookup(r->arg, t, v, sizeof v)) {
            inputs(r->arg, ',', want, sizeof want);
            zt_cfg_node_show(n, s, sizeof s);
            zt_cfg_derror(d, n, path, "expected %s, got %s", want, s);
            return -1;
        }
        if (!v[0]) return 0; /* maps nothing ("none" paths, false flags) */
        break;
    }
    case XF_MIB4:
        if (!zt_cfg_get_num(d, n, path, 1, 1e15, &e)) return -1;
        snprintf(v, sizeof v, "%.9g", e * 4.0 / 1048576.0);
        break;
    case XF_ON:
        if (!zt_cfg_get_num(d, n, path, 0, 1e15, &e)) return -1;
        snprintf(v, sizeof v, "%s", e > 0 ? "true" : "false");
        break;
    case XF_MINUS1:
        if (!zt_cfg_get_num(d, n, path, 1, 1e6, &e)) return -1;
        snprintf(v, sizeof v, "%.0f", floor(e) - 1);
        break;
    default: return -1;
    }
    return zt_cfg_map(d, n, path, r->native, v);
}

/* RK_BLOCK_*: on, and whether the block has its switch child (for " (not enabled)"). */
static bool block_on(const dialect_row *r, const cfg_node *n, bool *has_switch) {
    char sw[64] = "enabled", off[64] = "false";
    if (r->arg && sscanf(r->arg, "%63[^=]=%63s", sw, off) < 1) sw[0] = '\0';
    const cfg_node *c = zt_cfg_child(n, sw);
    *has_switch = c != NULL;
    if (c) return !neutral(off, c) && c->kind != CN_NULL;
    return !r->arg && n->kind == CN_MAP && n->child; /* a named switch that is absent is off */
}

static const dialect_row *find_row(const dctx *d, const char *path);
static void record(dctx *d, const char *path, const cfg_node *n);

/* One row's kind applied to its node (the interpreter: every kind is one case). */
static void row_apply(dctx *d, const dialect_row *r, const cfg_node *n, const char *path) {
    char s[100], want[300];
    bool sw, on;
    if (zt_cfg_is_auto(n) && r->kind != RK_MAP && r->kind != RK_MAP_NOTE && r->kind != RK_LATER) {
        zt_cfg_dnote(d, ZT_CONFIG_NOTE, n, path, "\"auto\": %s", r->doc ? r->doc : "no effect");
        return;
    }
    switch (r->kind) {
    case RK_MAP_NOTE: zt_cfg_dnote(d, ZT_CONFIG_NOTE, n, path, "%s", r->doc); /* fall through */
    case RK_MAP: map_value(d, r, n, path); return;
    case RK_WALK:
    case RK_LATER: zt_cfg_walk(d, n, path); return;
    case RK_TYPED: {
        const cfg_node *t = zt_cfg_child(n, "type");
        char tp[520];
        snprintf(tp, sizeof tp, "%s.type", path);
        if (!t) {
            zt_cfg_derror(d, n, path, "no \"type\"");
        } else if (t->kind != CN_STR) {
            zt_cfg_node_show(t, s, sizeof s);
            zt_cfg_derror(d, t, tp, "expected a string, got %s", s);
        } else if (!neutral(r->arg, t)) {
            zt_cfg_node_show(t, s, sizeof s);
            zt_cfg_derror(d, t, tp, "%s is not supported (%s)", s, r->doc);
        } else {
            zt_cfg_walk(d, n, path);
        }
        return;
    }
    case RK_ALIAS: {
        const dialect_row *to = find_row(d, r->native);
        if (r->doc) zt_cfg_dnote(d, ZT_CONFIG_NOTE, n, path, "%s", r->doc);
        if (!to) return;
        record(d, to->path, n);
        row_apply(d, to, n, to->path);
        return;
    }
    case RK_NOTE:
        if (r->arg && (neutral(r->arg, n) || n->kind == CN_NULL || (n->kind == CN_SEQ && !n->child))) return;
        zt_cfg_dnote(d, ZT_CONFIG_NOTE, n, path, "%s", r->doc ? r->doc : "recognized; no effect");
        return;
    case RK_WARN:
        if (!neutral(r->arg, n)) zt_cfg_dnote(d, ZT_CONFIG_WARNING, n, path, "%s", r->doc);
        return;
    case RK_REFUSE:
        if (neutral(r->arg, n)) return;
        zt_cfg_node_show(n, s, sizeof s);
        if (r->arg) inputs(r->arg, '|', want, sizeof want);
        zt_cfg_derror(d, n, path, "%s is not supported (%s%s%s)", s, r->arg ? want : "", r->arg ? ": " : "",
                      r->doc);
        return;
    case RK_BLOCK_NOTE:
    case RK_BLOCK_WARN:
    case RK_BLOCK_REFUSE:
        on = block_on(r, n, &sw);
        if (on && r->kind == RK_BLOCK_REFUSE)
            zt_cfg_derror(d, n, path, "%s", r->doc);
        else
            zt_cfg_dnote(d, on && r->kind == RK_BLOCK_WARN ? ZT_CONFIG_WARNING : ZT_CONFIG_NOTE, n, path,
                         "%s%s", r->doc, sw && !on ? " (not enabled)" : "");
        return;
    }
}

/* ---------------------------------------------------------------------------------------------
 * The walker. */

static unsigned kind_flags(const cfg_node *n) {
    switch (n->kind) {
    case CN_NULL: return A_NULL;
    case CN_BOOL: return A_BOOL;
    case CN_NUM: return n->num == floor(n->num) ? (A_INT | A_NUM) : A_NUM;
    case CN_STR: return zt_cfg_is_auto(n) ? (A_AUTO | A_STR) : A_STR;
    case CN_MAP: return A_MAP;
    case CN_SEQ: return A_SEQ;
    }
    return 0;
}

static void describe_accept(unsigned a, char *out, size_t cap) {
    static const struct {
        unsigned bit;
        const char *name;
    } names[] = {{A_INT, "an integer"}, {A_NUM, "a number"}, {A_BOOL, "true/false"},
                 {A_STR, "a string"},   {A_MAP, "a mapping"}, {A_SEQ, "a list"},
                 {A_NULL, "null"},      {A_AUTO, "\"auto\""}};
    const char *pick[8];
    int k = 0;
    if ((a & A_INT) && (a & A_NUM)) a &= ~(unsigned)A_INT;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (a & names[i].bit) pick[k++] = names[i].name;
    size_t n = 0;
    out[0] = '\0';
    if (k == 1 && a == A_BOOL) pick[0] = "true or false";
    for (int i = 0; i < k; i++) {
        int w = snprintf(out + n, cap - n, "%s%s", i == 0 ? "" : i == k - 1 ? " or " : ", ", pick[i]);
        if (w < 0 || (size_t)w >= cap - n) break;
        n += (size_t)w;
    }
}

/* The parent part of a row's path. */
static size_t parent_len(const char *path) {
    const char *dot = strrchr(path, '.');
    return dot ? (size_t)(dot - path) : 0;
}

/* The row of path, or its parent's "x.*" row, or NULL. */
static const dialect_row *find_row(const dctx *d, const char *path) {
    size_t pl = parent_len(path);
    for (int i = 0; i < d->n_rows; i++)
        if (strcmp(d->rows[i].path, path) == 0) return &d->rows[i];
    for (int i = 0; pl && i < d->n_rows; i++) {
        const char *rp = d->rows[i].path;
        if (parent_len(rp) == pl && !strncmp(rp, path, pl) && !strcmp(rp + pl, ".*")) return &d->rows[i];
    }
    return NULL;
}

static void record(dctx *d, const char *path, const cfg_node *n) {
    if (d->n_seen >= ZT_CFG_MAX_SEEN) {
        zt_cfg_error(d->x, "%s: more than %d keys", d->file, ZT_CFG_MAX_SEEN);
        return;
    }
    d->seen_path[d->n_seen] = path;
    d->seen_node[d->n_seen++] = n;
}

const cfg_node *zt_cfg_seen(const dctx *d, const char *path) {
    for (int i = 0; i < d->n_seen; i++)
        if (strcmp(d->seen_path[i], path) == 0) return d->seen_node[i];
    return NULL;
}

static void unknown(dctx *d, const cfg_node *n, const char *prefix, const char *path) {
    char w[ZT_PATH_MAX + 32], shown[96];
    size_t pl = strlen(prefix), best_d = 4, kl = strlen(n->key);
    const char *best = NULL;
    for (int i = 0; i < d->n_rows; i++) {
        const char *rp = d->rows[i].path;
        if (parent_len(rp) != pl || strncmp(rp, prefix, pl) != 0) continue;
        const char *leaf = rp + pl + (pl ? 1 : 0);
        size_t dist = zt_cfg_edit_distance(n->key, kl, leaf), lim = kl < 6 ? 2 : 3;
        if (dist <= lim && dist < best_d) {
            best_d = dist;
            best = rp;
        }
    }
    for (int i = 0; i < d->n_rows && !best; i++) { /* the right name under another parent */
        const char *rp = d->rows[i].path, *dot = strrchr(rp, '.');
        if (strcmp(dot ? dot + 1 : rp, n->key) == 0) best = rp;
    }
    zt_cfg_show(shown, sizeof shown, path, strlen(path));
    zt_cfg_where(d, n, true, w, sizeof w);
    if (best)
        zt_cfg_error(d->x, "%s: %s: unknown %s key; did you mean %s?", w, shown, d->dialect, best);
    else if (!pl && d->strict_root)
        zt_cfg_error(d->x, "%s: %s: unknown %s key (%s)", w, shown, d->dialect, d->strict_root);
    else
        zt_cfg_note(d->x, ZT_CONFIG_WARNING, "%s: %s: unknown %s key, close to none known: ignored (%s "
                    "ignores keys it does not read)", w, shown, d->dialect,
                    !strcmp(d->dialect, "deepspeed") ? "DeepSpeed" : "Accelerate");
}

/* Keys that are comments by convention ("_comment", "_note", "//"): never configuration. */
static bool comment_key(const char *k) { return k[0] == '_' || !strncmp(k, "//", 2); }

void zt_cfg_walk(dctx *d, const cfg_node *n, const char *prefix) {
    if (!n || n->kind != CN_MAP) return;
    char path[512], where[ZT_PATH_MAX + 32];
    for (const cfg_node *c = n->child; c; c = c->next) {
        if (!c->key) continue;
        const cfg_node *first = NULL; /* duplicates: the first one counts */
        for (const cfg_node *e = n->child; e != c && !first; e = e->next)
            if (e->key && strcmp(e->key, c->key) == 0) first = e;
        int w = snprintf(path, sizeof path, "%s%s%s", prefix, prefix[0] ? "." : "", c->key);
        if (w < 0 || (size_t)w >= sizeof path) {
            zt_cfg_error(d->x, "%s: key path too long", zt_cfg_where(d, c, true, where, sizeof where));
            continue;
        }
        if (first) {
            zt_cfg_error(d->x, "%s: %s: duplicate key (first at line %d)",
                         zt_cfg_where(d, c, true, where, sizeof where), path, first->line);
            continue;
        }
        if (comment_key(c->key)) {
            zt_cfg_dnote(d, ZT_CONFIG_NOTE, c, path, "a comment by convention: ignored");
            continue;
        }
        const dialect_row *r = find_row(d, path);
        if (!r) {
            unknown(d, c, prefix, path);
            continue;
        }
        if (!(kind_flags(c) & r->accept)) {
            char want[160], got[100];
            describe_accept(r->accept, want, sizeof want);
            zt_cfg_node_show(c, got, sizeof got);
            if (c->kind == CN_MAP || c->kind == CN_SEQ)
                zt_cfg_derror(d, c, path, "expected %s, got %s", want, zt_cfg_kind_name(c));
            else
                zt_cfg_derror(d, c, path, "expected %s, got %s %s", want, zt_cfg_kind_name(c), got);
            continue;
        }
        if (!strstr(r->path, ".*")) record(d, r->path, c);
        row_apply(d, r, c, path);
    }
}

/* The words of a row's kind for docs/config.md's "native key" column. */
void zt_cfg_row_kind_words(const dialect_row *r, char *out, size_t cap) {
    char l[300];
    switch (r->kind) {
    case RK_MAP:
    case RK_MAP_NOTE:
    case RK_LATER:
        if (r->native) {
            snprintf(out, cap, "`%s`", r->native);
            return;
        }
        snprintf(out, cap, "(resolved with other keys)");
        return;
    case RK_WALK: snprintf(out, cap, "(block)"); return;
    case RK_TYPED: inputs(r->arg, '|', l, sizeof l); snprintf(out, cap, "(type %s)", l); return;
    case RK_ALIAS: snprintf(out, cap, "as `%s`", r->native); return;
    case RK_NOTE:
    case RK_BLOCK_NOTE: snprintf(out, cap, "(note)"); return;
    case RK_WARN:
        if (r->arg) inputs(r->arg, '|', l, sizeof l);
        snprintf(out, cap, r->arg ? "(warning unless %s)" : "(warning)", l);
        return;
    case RK_REFUSE:
        if (r->arg) inputs(r->arg, '|', l, sizeof l);
        snprintf(out, cap, r->arg ? "(refused unless %s)" : "(refused)", l);
        return;
    case RK_BLOCK_WARN: snprintf(out, cap, "(warning when enabled)"); return;
    case RK_BLOCK_REFUSE: snprintf(out, cap, "(refused when enabled)"); return;
    }
    out[0] = '\0';
}
