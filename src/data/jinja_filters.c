/* jinja_filters.c - what a template calls by name: the filters (`x | name`, `x | name(args)`),
 * the tests (`x is name`), the methods of strings, lists and dicts (`s.strip()`, `d.items()`)
 * and the globals (raise_exception, range, namespace, strftime_now, true/false/none). Each does
 * what @huggingface/jinja's does, with its type rules and its messages (an unknown filter names
 * the filter and the operand's type). Beyond the reference, where it would fail: the filters
 * count, d, e/escape, round, wordcount, select/reject and list of a string or dict, and tests with
 * arguments (divisibleby(n), equalto(x)). */
#include "data/jinja_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static bool is_word(unsigned char ch) {
    return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_';
}

/* JavaScript's trim / trimStart / trimEnd: [*a, *b) of s */
static void js_trim(const char *s, size_t n, bool start, bool end, size_t *a, size_t *b) {
    size_t l;
    *a = 0, *b = n;
    if (start)
        while (*a < *b && jinja_is_space(s, n, *a, &l)) *a += l;
    if (end)
        while (*b > *a) {
            size_t k = *b - 1;
            while (k > *a && ((unsigned char)s[k] & 0xC0) == 0x80 && *b - k < 4) k--;
            if (jinja_is_space(s, n, k, &l) && k + l == *b) *b = k;
            else break;
        }
}

/* The simple one-to-one case pairs of Latin-1, Latin Extended-A, Greek and Cyrillic (JavaScript
 * maps all of Unicode; these cover the European scripts chat data holds). */
static unsigned case_cp(unsigned cp, bool upper) {
    if (upper) {
        if ((cp >= 0xE0 && cp <= 0xFE && cp != 0xF7) || (cp >= 0x3B1 && cp <= 0x3C9 && cp != 0x3C2) || (cp >= 0x430 && cp <= 0x44F))
            return cp - 0x20;
        if (cp >= 0x450 && cp <= 0x45F) return cp - 0x50;
        if (cp == 0xFF) return 0x178;
        if (cp >= 0x100 && cp <= 0x17F && cp != 0x131 && cp != 0x138 && cp != 0x149 && cp != 0x17F &&
            ((cp >= 0x139 && cp <= 0x148) || (cp >= 0x179 && cp <= 0x17E) ? (cp & 1) == 0 : (cp & 1) == 1))
            return cp - 1;
    } else {
        if ((cp >= 0xC0 && cp <= 0xDE && cp != 0xD7) || (cp >= 0x391 && cp <= 0x3A9 && cp != 0x3A2) || (cp >= 0x410 && cp <= 0x42F))
            return cp + 0x20;
        if (cp >= 0x400 && cp <= 0x40F) return cp + 0x50;
        if (cp == 0x178) return 0xFF;
        if (cp >= 0x100 && cp <= 0x17F && cp != 0x130 && cp != 0x138 && cp != 0x149 && cp != 0x17F &&
            ((cp >= 0x139 && cp <= 0x148) || (cp >= 0x179 && cp <= 0x17E) ? (cp & 1) == 1 : (cp & 1) == 0))
            return cp + 1;
    }
    return cp;
}

static jv *case_map(jctx *c, const jv *s, int mode) { /* 0 upper, 1 lower, 2 title, 3 capitalize */
    jbuf b = {0};
    for (size_t i = 0; i < s->len;) {
        unsigned char ch = (unsigned char)s->s[i];
        bool up = mode == 0 || (mode == 2 && is_word(ch) && (i == 0 || !is_word((unsigned char)s->s[i - 1]))) || (mode == 3 && i == 0);
        bool low = mode == 1;
        if (ch < 0x80) {
            jbuf_addc(&b, (char)(up && ch >= 'a' && ch <= 'z' ? ch - 32 : low && ch >= 'A' && ch <= 'Z' ? ch + 32 : ch));
            i++;
            continue;
        }
        size_t l = ch >= 0xF0 ? 4 : ch >= 0xE0 ? 3 : ch >= 0xC0 ? 2 : 1;
        if (i + l > s->len) l = s->len - i;
        if (l == 2 && (up || low) && mode != 2) {
            unsigned cp = ((ch & 31u) << 6) | ((unsigned char)s->s[i + 1] & 63u), m = case_cp(cp, up);
            char u[2] = {(char)(0xC0 | (m >> 6)), (char)(0x80 | (m & 63))};
            jbuf_add(&b, u, 2);
        } else jbuf_add(&b, s->s + i, l);
        i += l;
    }
    jv *r = b.failed ? NULL : jv_str(c, b.p ? b.p : "", b.n);
    free(b.p);
    return r;
}

static jv *bad(jctx *c, const jnode *at, const char *msg) { return jfail(c, at, "%s", msg); }

/* ---- string methods */

static jv *m_upper(jctx *c, jv *s, jv **a, int n, const jnode *at) { (void)a, (void)n, (void)at; return case_map(c, s, 0); }
static jv *m_lower(jctx *c, jv *s, jv **a, int n, const jnode *at) { (void)a, (void)n, (void)at; return case_map(c, s, 1); }
static jv *m_title(jctx *c, jv *s, jv **a, int n, const jnode *at) { (void)a, (void)n, (void)at; return case_map(c, s, 2); }
static jv *m_capitalize(jctx *c, jv *s, jv **a, int n, const jnode *at) { (void)a, (void)n, (void)at; return case_map(c, s, 3); }
static jv *trim3(jctx *c, jv *s, bool st, bool en) {
    size_t x, y;
    js_trim(s->s, s->len, st, en, &x, &y);
    return jv_str(c, s->s + x, y - x);
}
static jv *m_strip(jctx *c, jv *s, jv **a, int n, const jnode *at) { (void)a, (void)n, (void)at; return trim3(c, s, true, true); }
static jv *m_lstrip(jctx *c, jv *s, jv **a, int n, const jnode *at) { (void)a, (void)n, (void)at; return trim3(c, s, true, false); }
static jv *m_rstrip(jctx *c, jv *s, jv **a, int n, const jnode *at) { (void)a, (void)n, (void)at; return trim3(c, s, false, true); }

static jv *affix(jctx *c, jv *s, jv **a, int n, const jnode *at, bool start) {
    const char *name = start ? "startswith" : "endswith";
    if (n == 0) return jfail(c, at, "%s() requires at least one argument", name);
    jv *list = a[0], one = {0};
    jv *single[1];
    if (a[0]->t == JV_STR) {
        single[0] = a[0];
        one.items = single, one.n = 1, one.t = JV_ARRAY;
        list = &one;
    } else if (!jv_is_array(a[0])) return jfail(c, at, "%s() argument must be a string or tuple of strings", name);
    for (size_t i = 0; i < list->n; i++) {
        jv *p = list->items[i];
        if (p->t != JV_STR) return jfail(c, at, "%s() tuple elements must be strings", name);
        if (p->len <= s->len && !memcmp(start ? s->s : s->s + s->len - p->len, p->s, p->len)) return jv_bool(c, true);
    }
    return jv_bool(c, false);
}
static jv *m_startswith(jctx *c, jv *s, jv **a, int n, const jnode *at) { return affix(c, s, a, n, at, true); }
static jv *m_endswith(jctx *c, jv *s, jv **a, int n, const jnode *at) { return affix(c, s, a, n, at, false); }

static jv *m_split(jctx *c, jv *s, jv **a, int n, const jnode *at) {
    jv *sep = n > 0 ? a[0] : NULL, *maxs = n > 1 ? a[1] : NULL;
    if (sep && sep->t != JV_STR && sep->t != JV_NULL) return bad(c, at, "sep argument must be a string or null");
    if (maxs && maxs->t != JV_INT) return bad(c, at, "maxsplit argument must be a number");
    double max = maxs ? maxs->num : -1;
    jv *out = jv_array(c, JV_ARRAY, 8);
    if (!out) return NULL;
    if (!sep || sep->t == JV_NULL) {
        size_t x, y, l;
        js_trim(s->s, s->len, true, false, &x, &y);
        size_t i = x;
        while (i < s->len) {
            while (i < s->len && jinja_is_space(s->s, s->len, i, &l)) i += l;
            if (i >= s->len) break;
            size_t w = i;
            while (i < s->len && !jinja_is_space(s->s, s->len, i, &l)) i++;
            if (max != -1 && (double)out->n >= max) {
                jv_push(c, out, jv_str(c, s->s + w, s->len - w));
                break;
            }
            jv_push(c, out, jv_str(c, s->s + w, i - w));
        }
    } else {
        if (sep->len == 0) return bad(c, at, "empty separator");
        size_t start = 0;
        for (size_t i = 0; i + sep->len <= s->len;) {
            if (!memcmp(s->s + i, sep->s, sep->len) && (max == -1 || (double)out->n < max)) {
                jv_push(c, out, jv_str(c, s->s + start, i - start));
                i += sep->len;
                start = i;
            } else i++;
        }
        jv_push(c, out, jv_str(c, s->s + start, s->len - start));
    }
    return c->failed ? NULL : out;
}

static jv *m_replace(jctx *c, jv *s, jv **a, int n, const jnode *at) {
    if (n < 2) return bad(c, at, "replace() requires at least two arguments");
    jv *o = a[0], *w = a[1], *cnt = NULL;
    if (o->t != JV_STR || w->t != JV_STR) return bad(c, at, "replace() arguments must be strings");
    if (n > 2) cnt = a[2]->t == JV_KWARGS ? jv_obj_get(a[2], "count", 5) : a[2];
    if (cnt && cnt->t != JV_INT && cnt->t != JV_NULL) return bad(c, at, "replace() count argument must be a number or null");
    double left = (!cnt || cnt->t == JV_NULL || cnt->num < 0) ? INFINITY : cnt->num;
    if (left == 0) return s;
    jbuf b = {0};
    size_t i = 0;
    if (o->len == 0) { /* every code point boundary, the ends included */
        for (;;) {
            if (left > 0) {
                jbuf_add(&b, w->s, w->len);
                left--;
            }
            if (i >= s->len) break;
            size_t e = i + 1;
            while (e < s->len && ((unsigned char)s->s[e] & 0xC0) == 0x80) e++;
            jbuf_add(&b, s->s + i, e - i);
            i = e;
        }
    } else {
        while (i < s->len) {
            if (left > 0 && i + o->len <= s->len && !memcmp(s->s + i, o->s, o->len)) {
                jbuf_add(&b, w->s, w->len);
                i += o->len;
                left--;
            } else jbuf_addc(&b, s->s[i++]);
        }
    }
    if (b.failed) {
        free(b.p);
        return bad(c, at, "replace(): the result passes 1 GiB");
    }
    jv *r = jv_str(c, b.p ? b.p : "", b.n);
    free(b.p);
    return r;
}

/* ---- dict methods */

static jv *pairs(jctx *c, jv *o) {
    jv *out = jv_array(c, JV_ARRAY, o->n + 1);
    for (size_t i = 0; out && i < o->n; i++) {
        jv *p = jv_array(c, JV_ARRAY, 2);
        if (!p || !jv_push(c, p, jv_str(c, o->keys[i], o->klens[i])) || !jv_push(c, p, o->items[i]) || !jv_push(c, out, p)) return NULL;
    }
    return out;
}
static jv *m_items(jctx *c, jv *o, jv **a, int n, const jnode *at) { (void)a, (void)n, (void)at; return pairs(c, o); }
static jv *m_keys(jctx *c, jv *o, jv **a, int n, const jnode *at) {
    (void)a, (void)n, (void)at;
    jv *out = jv_array(c, JV_ARRAY, o->n + 1);
    for (size_t i = 0; out && i < o->n; i++) jv_push(c, out, jv_str(c, o->keys[i], o->klens[i]));
    return c->failed ? NULL : out;
}
static jv *m_values(jctx *c, jv *o, jv **a, int n, const jnode *at) {
    (void)a, (void)n, (void)at;
    jv *out = jv_array(c, JV_ARRAY, o->n + 1);
    for (size_t i = 0; out && i < o->n; i++) jv_push(c, out, o->items[i]);
    return c->failed ? NULL : out;
}
static jv *m_get(jctx *c, jv *o, jv **a, int n, const jnode *at) {
    if (n < 1 || a[0]->t != JV_STR) return jfail(c, at, "Object key must be a string: got %s", n < 1 ? "nothing" : jv_type_name(a[0]));
    jv *v = jv_obj_get(o, a[0]->s, a[0]->len);
    return v ? v : n > 1 ? a[1] : jv_new(c, JV_NULL);
}

/* A stable merge sort whose comparison can fail (c->failed). keyf: the value to compare. */
typedef struct sortspec {
    bool reverse, cs;
    int by; /* dictsort: 0 key, 1 value; -1 the item itself */
    const char *attr;
    const jnode *at;
} sortspec;
static jv *attr_path(jctx *c, jv *item, const char *path);
static jv *sort_key(jctx *c, jv *x, const sortspec *sp) {
    if (sp->by >= 0) return x->items[sp->by];
    if (sp->attr) return attr_path(c, x, sp->attr);
    return x;
}
static bool msort(jctx *c, jv **v, jv **tmp, size_t n, const sortspec *sp) {
    if (n < 2) return true;
    size_t h = n / 2;
    if (!msort(c, v, tmp, h, sp) || !msort(c, v + h, tmp, n - h, sp)) return false;
    size_t i = 0, j = h, k = 0;
    while (i < h && j < n) {
        int r;
        if (!jv_compare(c, sort_key(c, v[i], sp), sort_key(c, v[j], sp), sp->cs, &r, sp->at)) return false;
        if (sp->reverse) r = -r;
        tmp[k++] = r <= 0 ? v[i++] : v[j++];
    }
    while (i < h) tmp[k++] = v[i++];
    while (j < n) tmp[k++] = v[j++];
    memcpy(v, tmp, n * sizeof *v);
    return true;
}
static jv *sorted(jctx *c, jv *arr, const sortspec *sp) {
    jv *out = jv_array(c, JV_ARRAY, arr->n + 1);
    if (!out) return NULL;
    memcpy(out->items, arr->items, arr->n * sizeof *out->items);
    out->n = arr->n;
    jv **tmp = malloc((arr->n + 1) * sizeof *tmp);
    if (!tmp) return jfail(c, sp->at, "no memory to sort %zu items", arr->n);
    bool ok = msort(c, out->items, tmp, out->n, sp);
    free(tmp);
    return ok ? out : NULL;
}

static jv *kwarg(jv **a, int *n, const char *name) { /* the kwargs' value, or NULL */
    if (*n > 0 && a[*n - 1]->t == JV_KWARGS) return jv_obj_get(a[*n - 1], name, strlen(name));
    return NULL;
}
static int positional(jv **a, int n) { return n > 0 && a[n - 1]->t == JV_KWARGS ? n - 1 : n; }

static jv *m_dictsort(jctx *c, jv *o, jv **a, int n, const jnode *at) {
    int np = positional(a, n);
    jv *cs = np > 0 ? a[0] : kwarg(a, &n, "case_sensitive"), *by = np > 1 ? a[1] : kwarg(a, &n, "by"),
       *rev = np > 2 ? a[2] : kwarg(a, &n, "reverse");
    if (cs && cs->t != JV_BOOL) return bad(c, at, "case_sensitive must be a boolean");
    if (by && by->t != JV_STR) return bad(c, at, "by must be a string");
    if (by && strcmp(by->s, "key") && strcmp(by->s, "value")) return bad(c, at, "by must be either 'key' or 'value'");
    if (rev && rev->t != JV_BOOL) return bad(c, at, "reverse must be a boolean");
    jv *p = pairs(c, o);
    if (!p) return NULL;
    sortspec sp = {rev && rev->b, cs && cs->b, by && !strcmp(by->s, "value") ? 1 : 0, NULL, at};
    return sorted(c, p, &sp);
}

static jv *bound(jctx *c, jv *self, jv_builtin f) {
    jv *v = jv_new(c, JV_FUNC);
    if (v) v->fn = f, v->self = self;
    return v;
}

jv *jinja_builtin_member(jctx *c, jv *obj, const char *name, size_t len) {
    static const struct { const char *name; jv_builtin f; } STR[] = {
        {"upper", m_upper}, {"lower", m_lower}, {"strip", m_strip}, {"title", m_title},
        {"capitalize", m_capitalize}, {"rstrip", m_rstrip}, {"lstrip", m_lstrip},
        {"startswith", m_startswith}, {"endswith", m_endswith}, {"split", m_split}, {"replace", m_replace},
    }, OBJ[] = {
        {"get", m_get}, {"items", m_items}, {"keys", m_keys}, {"values", m_values}, {"dictsort", m_dictsort},
    };
    if (strlen(name) != len) return NULL;
    if (obj->t == JV_STR) {
        if (!strcmp(name, "length")) return jv_num(c, JV_INT, (double)jinja_utf16_len(obj->s, obj->len));
        for (size_t i = 0; i < sizeof STR / sizeof *STR; i++)
            if (!strcmp(name, STR[i].name)) return bound(c, obj, STR[i].f);
    } else if (jv_is_array(obj)) {
        if (!strcmp(name, "length")) return jv_num(c, JV_INT, (double)obj->n);
    } else if (jv_is_object(obj)) {
        for (size_t i = 0; i < sizeof OBJ / sizeof *OBJ; i++)
            if (!strcmp(name, OBJ[i].name)) return bound(c, obj, OBJ[i].f);
    }
    return NULL;
}

/* ---- tests */

bool jinja_test(jctx *c, const char *name, jv *x, jv **args, int n, const jnode *at, bool *ok) {
    *ok = true;
    if (!strcmp(name, "boolean")) return x->t == JV_BOOL;
    if (!strcmp(name, "callable")) return x->t == JV_FUNC;
    if (!strcmp(name, "odd") || !strcmp(name, "even")) {
        if (x->t != JV_INT) {
            *ok = false;
            jfail(c, at, "cannot %s on %s", name, jv_type_name(x));
            return false;
        }
        bool odd = fmod(x->num, 2) != 0;
        return name[0] == 'o' ? odd : !odd;
    }
    if (!strcmp(name, "false")) return x->t == JV_BOOL && !x->b;
    if (!strcmp(name, "true")) return x->t == JV_BOOL && x->b;
    if (!strcmp(name, "none")) return x->t == JV_NULL;
    if (!strcmp(name, "string")) return x->t == JV_STR;
    if (!strcmp(name, "number")) return x->t == JV_INT || x->t == JV_FLOAT;
    if (!strcmp(name, "integer")) return x->t == JV_INT;
    if (!strcmp(name, "iterable")) return x->t == JV_ARRAY || x->t == JV_STR;
    if (!strcmp(name, "mapping")) return jv_is_object(x);
    if (!strcmp(name, "sequence")) return jv_is_array(x) || jv_is_object(x) || x->t == JV_STR;
    if (!strcmp(name, "lower") || !strcmp(name, "upper")) {
        if (x->t != JV_STR) return false;
        for (size_t i = 0; i < x->len; i++) {
            char ch = x->s[i];
            if (name[0] == 'l' ? (ch >= 'A' && ch <= 'Z') : (ch >= 'a' && ch <= 'z')) return false;
        }
        return true;
    }
    if (!strcmp(name, "defined")) return x->t != JV_UNDEF;
    if (!strcmp(name, "undefined")) return x->t == JV_UNDEF;
    if (!strcmp(name, "equalto") || !strcmp(name, "eq") || !strcmp(name, "sameas")) {
        jv undef = {.t = JV_UNDEF};
        return jv_strict_eq(x, n > 0 ? args[0] : &undef);
    }
    if (!strcmp(name, "divisibleby")) {
        if (n < 1 || (args[0]->t != JV_INT && args[0]->t != JV_FLOAT) || (x->t != JV_INT && x->t != JV_FLOAT)) {
            *ok = false;
            jfail(c, at, "divisibleby needs a number and a number argument");
            return false;
        }
        return args[0]->num != 0 && fmod(x->num, args[0]->num) == 0;
    }
    *ok = false;
    jfail(c, at, "Unknown test: %s", name);
    return false;
}

/* ---- filters */

/* item's value at a dotted path ("a.b", "items.0"), or undefined */
static jv *attr_path(jctx *c, jv *item, const char *path) {
    jv *v = item;
    const char *p = path;
    for (;;) {
        const char *dot = strchr(p, '.');
        size_t l = dot ? (size_t)(dot - p) : strlen(p);
        if (jv_is_object(v) || v->t == JV_NAMESPACE) {
            v = jv_obj_get(v, p, l);
            if (!v) return jv_new(c, JV_UNDEF);
        } else if (jv_is_array(v)) {
            char *end;
            long k = strtol(p, &end, 10);
            if (end == p || k < 0 || (size_t)k >= v->n) return jv_new(c, JV_UNDEF);
            v = v->items[k];
        } else return jv_new(c, JV_UNDEF);
        if (!dot) return v;
        p = dot + 1;
    }
}

static jv *js_parse_int(jctx *c, const jv *s, jv *dflt, bool as_float) {
    size_t a, b, i;
    js_trim(s->s, s->len, true, false, &a, &b);
    i = a;
    char tmp[128];
    size_t k = 0;
    if (i < b && (s->s[i] == '+' || s->s[i] == '-')) tmp[k++] = s->s[i++];
    if (as_float && b - i >= 8 && !memcmp(s->s + i, "Infinity", 8))
        return jv_num(c, JV_FLOAT, k && tmp[0] == '-' ? -INFINITY : INFINITY);
    size_t digits = 0;
    while (i < b && s->s[i] >= '0' && s->s[i] <= '9' && k < 100) tmp[k++] = s->s[i++], digits++;
    if (as_float) {
        if (i < b && s->s[i] == '.') {
            tmp[k++] = s->s[i++];
            while (i < b && s->s[i] >= '0' && s->s[i] <= '9' && k < 110) tmp[k++] = s->s[i++], digits++;
        }
        if (digits && i < b && (s->s[i] == 'e' || s->s[i] == 'E')) {
            size_t save = k, j = i + 1;
            tmp[k++] = 'e';
            if (j < b && (s->s[j] == '+' || s->s[j] == '-')) tmp[k++] = s->s[j++];
            size_t ed = 0;
            while (j < b && s->s[j] >= '0' && s->s[j] <= '9' && k < 126) tmp[k++] = s->s[j++], ed++;
            if (!ed) k = save;
        }
    }
    tmp[k] = 0;
    if (!digits) return dflt;
    return jv_num(c, as_float ? JV_FLOAT : JV_INT, as_float ? strtod(tmp, NULL) : trunc(strtod(tmp, NULL)));
}

static jv *html_escape(jctx *c, const jv *s) {
    jbuf b = {0};
    for (size_t i = 0; i < s->len; i++) {
        char ch = s->s[i];
        if (ch == '&') jbuf_adds(&b, "&amp;");
        else if (ch == '<') jbuf_adds(&b, "&lt;");
        else if (ch == '>') jbuf_adds(&b, "&gt;");
        else if (ch == '"') jbuf_adds(&b, "&#34;");
        else if (ch == '\'') jbuf_adds(&b, "&#39;");
        else jbuf_addc(&b, ch);
    }
    jv *r = b.failed ? NULL : jv_str(c, b.p ? b.p : "", b.n);
    free(b.p);
    return r;
}

static jv *join(jctx *c, jv *x, jv *sep, const jnode *at) {
    jbuf b = {0};
    if (x->t == JV_STR) {
        for (size_t i = 0; i < x->len;) {
            if (i && sep) jbuf_add(&b, sep->s, sep->len);
            size_t e = i + 1;
            while (e < x->len && ((unsigned char)x->s[e] & 0xC0) == 0x80) e++;
            jbuf_add(&b, x->s + i, e - i);
            i = e;
        }
    } else
        for (size_t i = 0; i < x->n; i++) {
            if (i && sep) jbuf_add(&b, sep->s, sep->len);
            if (!jv_raw_string(c, x->items[i], &b)) {
                free(b.p);
                return NULL;
            }
        }
    jv *r = b.failed ? bad(c, at, "join: the result passes 1 GiB") : jv_str(c, b.p ? b.p : "", b.n);
    free(b.p);
    return r;
}

static jv *indent(jctx *c, jv *s, double width, bool first, bool blank) {
    jbuf b = {0};
    size_t line = 0, start = 0;
    for (size_t i = 0; i <= s->len; i++) {
        if (i < s->len && s->s[i] != '\n') continue;
        if (line) jbuf_addc(&b, '\n');
        bool empty = i == start;
        if (!((!first && line == 0) || (!blank && empty)))
            for (double k = 0; k < width; k++) jbuf_addc(&b, ' ');
        jbuf_add(&b, s->s + start, i - start);
        start = i + 1;
        line++;
    }
    jv *r = b.failed ? NULL : jv_str(c, b.p ? b.p : "", b.n);
    free(b.p);
    return r;
}

static jv *tojson(jctx *c, jv *x, jv *kw, const jnode *at) {
    jjson_opts o = {.indent = -1, .undefined_null = true};
    jv *ind = kw ? jv_obj_get(kw, "indent", 6) : NULL, *asc = kw ? jv_obj_get(kw, "ensure_ascii", 12) : NULL,
       *sk = kw ? jv_obj_get(kw, "sort_keys", 9) : NULL, *sep = kw ? jv_obj_get(kw, "separators", 10) : NULL;
    if (ind && ind->t != JV_INT && ind->t != JV_NULL) return bad(c, at, "If set, indent must be a number");
    if (asc && asc->t != JV_BOOL) return bad(c, at, "If set, ensure_ascii must be a boolean");
    if (sk && sk->t != JV_BOOL) return bad(c, at, "If set, sort_keys must be a boolean");
    if (ind && ind->t == JV_INT) {
        if (ind->num > 1000) return bad(c, at, "tojson: indent above 1000");
        o.indent = (int)ind->num;
    }
    o.ensure_ascii = asc && asc->b;
    o.sort_keys = sk && sk->b;
    if (sep && sep->t != JV_NULL) {
        if (!jv_is_array(sep)) return bad(c, at, "If set, separators must be a tuple of two strings");
        if (sep->n != 2 || sep->items[0]->t != JV_STR || sep->items[1]->t != JV_STR)
            return bad(c, at, "separators must be a tuple of two strings");
        o.item_sep = sep->items[0]->s;
        o.key_sep = sep->items[1]->s;
    }
    jbuf b = {0};
    c->at = at;
    if (!jv_to_json(c, x, &o, 0, &b)) {
        free(b.p);
        return NULL;
    }
    jv *r = b.failed ? bad(c, at, "tojson: the result passes 1 GiB") : jv_str(c, b.p ? b.p : "", b.n);
    free(b.p);
    return r;
}

static jv *length_of(jctx *c, jv *x) {
    if (x->t == JV_STR) return jv_num(c, JV_INT, (double)jinja_utf16_len(x->s, x->len));
    return jv_num(c, JV_INT, (double)x->n);
}

static jv *cannot(jctx *c, const jnode *at, const char *name, jv *x) {
    return jfail(c, at, "Cannot apply filter \"%s\" to type: %s", name, jv_type_name(x));
}

/* The identifier form: x | name */
static jv *filter_plain(jctx *c, jv *x, const char *name, const jnode *at) {
    if (!strcmp(name, "safe")) return x;
    if (!strcmp(name, "tojson")) return tojson(c, x, NULL, at);
    if (!strcmp(name, "count") && (jv_is_array(x) || jv_is_object(x) || x->t == JV_STR)) return length_of(c, x);
    if ((!strcmp(name, "e") || !strcmp(name, "escape")) && x->t == JV_STR) return html_escape(c, x);
    if (jv_is_array(x)) {
        if (!strcmp(name, "list")) return x;
        if (!strcmp(name, "first")) return x->n ? x->items[0] : jv_new(c, JV_UNDEF);
        if (!strcmp(name, "last")) return x->n ? x->items[x->n - 1] : jv_new(c, JV_UNDEF);
        if (!strcmp(name, "length")) return length_of(c, x);
        if (!strcmp(name, "reverse")) {
            jv *r = jv_array(c, JV_ARRAY, x->n + 1);
            for (size_t i = x->n; r && i > 0; i--) jv_push(c, r, x->items[i - 1]);
            return c->failed ? NULL : r;
        }
        if (!strcmp(name, "sort")) {
            sortspec sp = {false, false, -1, NULL, at};
            return sorted(c, x, &sp);
        }
        if (!strcmp(name, "join")) return join(c, x, NULL, at);
        if (!strcmp(name, "string")) {
            jbuf b = {0};
            jjson_opts o = {.indent = -1};
            c->at = at;
            jv *r = jv_to_json(c, x, &o, 0, &b) ? jv_str(c, b.p ? b.p : "", b.n) : NULL;
            free(b.p);
            return r;
        }
        if (!strcmp(name, "unique")) {
            jv *r = jv_array(c, JV_ARRAY, x->n + 1);
            for (size_t i = 0; r && i < x->n; i++) {
                bool seen = false;
                for (size_t k = 0; k < r->n && !seen; k++)
                    seen = jv_strict_eq(r->items[k], x->items[i]) ||
                           ((r->items[k]->t == JV_INT || r->items[k]->t == JV_FLOAT) && isnan(r->items[k]->num) &&
                            (x->items[i]->t == JV_INT || x->items[i]->t == JV_FLOAT) && isnan(x->items[i]->num));
                if (!seen) jv_push(c, r, x->items[i]);
            }
            return c->failed ? NULL : r;
        }
        return jfail(c, at, "Unknown ArrayValue filter: %s", name);
    }
    if (x->t == JV_STR) {
        if (!strcmp(name, "length")) return length_of(c, x);
        if (!strcmp(name, "upper")) return case_map(c, x, 0);
        if (!strcmp(name, "lower")) return case_map(c, x, 1);
        if (!strcmp(name, "title")) return case_map(c, x, 2);
        if (!strcmp(name, "capitalize")) return case_map(c, x, 3);
        if (!strcmp(name, "trim")) return trim3(c, x, true, true);
        if (!strcmp(name, "indent")) return indent(c, x, 4, false, false);
        if (!strcmp(name, "join") || !strcmp(name, "string")) return x;
        if (!strcmp(name, "int")) return js_parse_int(c, x, jv_num(c, JV_INT, 0), false);
        if (!strcmp(name, "float")) return js_parse_int(c, x, jv_num(c, JV_FLOAT, 0), true);
        if (!strcmp(name, "list")) {
            jv *r = jv_array(c, JV_ARRAY, 8);
            for (size_t i = 0; r && i < x->len;) {
                size_t e = i + 1;
                while (e < x->len && ((unsigned char)x->s[e] & 0xC0) == 0x80) e++;
                jv_push(c, r, jv_str(c, x->s + i, e - i));
                i = e;
            }
            return c->failed ? NULL : r;
        }
        if (!strcmp(name, "wordcount")) {
            double words = 0;
            for (size_t i = 0; i < x->len; i++)
                if (is_word((unsigned char)x->s[i]) && (i == 0 || !is_word((unsigned char)x->s[i - 1]))) words++;
            return jv_num(c, JV_INT, words);
        }
        return jfail(c, at, "Unknown StringValue filter: %s", name);
    }
    if (x->t == JV_INT || x->t == JV_FLOAT) {
        if (!strcmp(name, "abs")) return jv_num(c, x->t, fabs(x->num));
        if (!strcmp(name, "int")) return jv_num(c, JV_INT, floor(x->num));
        if (!strcmp(name, "float")) return jv_num(c, JV_FLOAT, x->num);
        if (!strcmp(name, "round")) return jv_num(c, JV_FLOAT, round(x->num));
        if (!strcmp(name, "string")) {
            jbuf b = {0};
            jv *r = jv_to_string(c, x, &b) ? jv_str(c, b.p ? b.p : "", b.n) : NULL;
            free(b.p);
            return r;
        }
        return jfail(c, at, "Unknown NumericValue filter: %s", name);
    }
    if (jv_is_object(x)) {
        if (!strcmp(name, "items")) return pairs(c, x);
        if (!strcmp(name, "length")) return length_of(c, x);
        if (!strcmp(name, "list")) return m_keys(c, x, NULL, 0, at);
        jv *f = jinja_builtin_member(c, x, name, strlen(name));
        if (f) return f->fn(c, x, NULL, 0, at);
        return c->failed ? NULL : jfail(c, at, "Unknown ObjectValue filter: %s", name);
    }
    if (x->t == JV_BOOL) {
        if (!strcmp(name, "bool")) return jv_bool(c, x->b);
        if (!strcmp(name, "int")) return jv_num(c, JV_INT, x->b);
        if (!strcmp(name, "float")) return jv_num(c, JV_FLOAT, x->b);
        if (!strcmp(name, "string")) return jv_strz(c, x->b ? "true" : "false");
        return jfail(c, at, "Unknown BooleanValue filter: %s", name);
    }
    return cannot(c, at, name, x);
}

static jv *select_attr(jctx *c, jv *x, const jnode *f, bool select, jenv *env) {
    const char *name = select ? "selectattr" : "rejectattr";
    for (size_t i = 0; i < x->n; i++)
        if (!jv_is_object(x->items[i]) && x->items[i]->t != JV_NAMESPACE)
            return jfail(c, f, "`%s` can only be applied to array of objects", name);
    for (int i = 0; i < f->n; i++)
        if (f->list[i]->kind != JN_STR) return jfail(c, f, "arguments of `%s` must be strings", name);
    if (f->n < 1) return jfail(c, f, "`%s` needs the attribute's name", name);
    jv *attr = jinja_eval(c, f->list[0], env), *test = f->n > 1 ? jinja_eval(c, f->list[1], env) : NULL,
       *val = f->n > 2 ? jinja_eval(c, f->list[2], env) : NULL;
    if (!attr || c->failed) return NULL;
    jv *r = jv_array(c, JV_ARRAY, x->n + 1);
    for (size_t i = 0; r && i < x->n; i++) {
        jv *a = jv_obj_get(x->items[i], attr->s, attr->len);
        bool res = false;
        if (a) {
            if (test) {
                bool ok;
                jv *args[1] = {val};
                res = jinja_test(c, test->s, a, args, val ? 1 : 0, f, &ok);
                if (!ok) return NULL;
            } else res = jv_truthy(a);
        }
        if (res == select) jv_push(c, r, x->items[i]);
    }
    return c->failed ? NULL : r;
}

/* The call form: x | name(args) */
static jv *filter_call(jctx *c, jv *x, const jnode *f, jenv *env) {
    const char *name = f->a->s;
    if (!strcmp(name, "selectattr") || !strcmp(name, "rejectattr")) {
        if (!jv_is_array(x)) return cannot(c, f, name, x);
        return select_attr(c, x, f, name[0] == 's', env);
    }
    jv **a, *kw;
    int n;
    if (!jinja_eval_args(c, f->list, f->n, env, &a, &n, &kw)) return NULL;
    if (!strcmp(name, "tojson")) return tojson(c, x, kw, f);
    if (!strcmp(name, "join")) {
        if (x->t != JV_STR && !jv_is_array(x)) return cannot(c, f, name, x);
        jv *sep = n > 0 ? a[0] : jv_obj_get(kw, "separator", 9);
        if (sep && sep->t != JV_STR) return bad(c, f, "separator must be a string");
        return join(c, x, sep, f);
    }
    if (!strcmp(name, "int") || !strcmp(name, "float")) {
        bool fl = name[0] == 'f';
        jv *d = n > 0 ? a[0] : jv_obj_get(kw, "default", 7);
        if (!d) d = jv_num(c, fl ? JV_FLOAT : JV_INT, 0);
        if (x->t == JV_STR) return js_parse_int(c, x, d, fl);
        if (x->t == JV_INT || x->t == JV_FLOAT) return x;
        if (x->t == JV_BOOL) return jv_num(c, fl ? JV_FLOAT : JV_INT, x->b);
        return cannot(c, f, name, x);
    }
    if (!strcmp(name, "default") || !strcmp(name, "d")) {
        jv *d = n > 0 ? a[0] : jv_strz(c, ""), *flag = n > 1 ? a[1] : jv_obj_get(kw, "boolean", 7);
        if (flag && flag->t != JV_BOOL) return bad(c, f, "`default` filter flag must be a boolean");
        if (x->t == JV_UNDEF || (flag && flag->b && !jv_truthy(x))) return d;
        return x;
    }
    if (!strcmp(name, "round") && (x->t == JV_INT || x->t == JV_FLOAT)) {
        double p = n > 0 && a[0]->t == JV_INT ? a[0]->num : 0, m = pow(10, p);
        jv *method = n > 1 ? a[1] : jv_obj_get(kw, "method", 6);
        double y = x->num * m;
        y = method && method->t == JV_STR && !strcmp(method->s, "floor") ? floor(y)
            : method && method->t == JV_STR && !strcmp(method->s, "ceil") ? ceil(y) : round(y);
        return jv_num(c, JV_FLOAT, y / m);
    }
    if (jv_is_array(x)) {
        if (!strcmp(name, "sort")) {
            jv *rev = n > 0 ? a[0] : jv_obj_get(kw, "reverse", 7), *cs = n > 1 ? a[1] : jv_obj_get(kw, "case_sensitive", 14),
               *attr = n > 2 ? a[2] : jv_obj_get(kw, "attribute", 9);
            if (rev && rev->t != JV_BOOL) return bad(c, f, "reverse must be a boolean");
            if (cs && cs->t != JV_BOOL) return bad(c, f, "case_sensitive must be a boolean");
            if (attr && attr->t != JV_STR && attr->t != JV_INT && attr->t != JV_NULL)
                return bad(c, f, "attribute must be a string, integer, or null");
            char num[64];
            const char *path = NULL;
            if (attr && attr->t == JV_STR) path = attr->s;
            else if (attr && attr->t == JV_INT) jinja_js_number(attr->num, num, sizeof num), path = num;
            sortspec sp = {rev && rev->b, cs && cs->b, -1, path, f};
            return sorted(c, x, &sp);
        }
        if (!strcmp(name, "map")) {
            jv *attr = jv_obj_get(kw, "attribute", 9), *d = jv_obj_get(kw, "default", 7);
            if (!attr) return bad(c, f, "`map` expressions without `attribute` set are not currently supported.");
            if (attr->t != JV_STR) return bad(c, f, "attribute must be a string");
            jv *r = jv_array(c, JV_ARRAY, x->n + 1);
            for (size_t i = 0; r && i < x->n; i++) {
                if (!jv_is_object(x->items[i]) && x->items[i]->t != JV_NAMESPACE) return bad(c, f, "items in map must be an object");
                jv *v = attr_path(c, x->items[i], attr->s);
                jv_push(c, r, v && v->t == JV_UNDEF ? (d ? d : v) : v);
            }
            return c->failed ? NULL : r;
        }
        if (!strcmp(name, "select") || !strcmp(name, "reject")) {
            if (n < 1 || a[0]->t != JV_STR) return bad(c, f, "select/reject need a test name");
            jv *r = jv_array(c, JV_ARRAY, x->n + 1);
            for (size_t i = 0; r && i < x->n; i++) {
                bool ok, res = jinja_test(c, a[0]->s, x->items[i], a + 1, n - 1, f, &ok);
                if (!ok) return NULL;
                if (res == (name[0] == 's')) jv_push(c, r, x->items[i]);
            }
            return c->failed ? NULL : r;
        }
        return jfail(c, f, "Unknown ArrayValue filter: %s", name);
    }
    if (x->t == JV_STR) {
        if (!strcmp(name, "indent")) {
            jv *w = n > 0 ? a[0] : jv_obj_get(kw, "width", 5), *first = n > 1 ? a[1] : jv_obj_get(kw, "first", 5),
               *blank = n > 2 ? a[2] : jv_obj_get(kw, "blank", 5);
            if (w && w->t != JV_INT) return bad(c, f, "width must be a number");
            if (w && w->num > 1000) return bad(c, f, "indent: width above 1000");
            return indent(c, x, w ? w->num : 4, first && jv_truthy(first), blank && jv_truthy(blank));
        }
        if (!strcmp(name, "replace")) {
            jv *all = jv_array(c, JV_ARRAY, (size_t)n + 2);
            for (int i = 0; all && i < n; i++) jv_push(c, all, a[i]);
            if (!all || !jv_push(c, all, kw)) return NULL;
            return m_replace(c, x, all->items, (int)all->n, f);
        }
        return jfail(c, f, "Unknown StringValue filter: %s", name);
    }
    if (jv_is_object(x)) {
        jv *fn = jinja_builtin_member(c, x, name, strlen(name));
        if (fn) {
            jv *all = jv_array(c, JV_ARRAY, (size_t)n + 2);
            for (int i = 0; all && i < n; i++) jv_push(c, all, a[i]);
            if (all && kw->n) jv_push(c, all, kw);
            return all ? fn->fn(c, x, all->items, (int)all->n, f) : NULL;
        }
        return c->failed ? NULL : jfail(c, f, "Unknown ObjectValue filter: %s", name);
    }
    return cannot(c, f, name, x);
}

jv *jinja_filter(jctx *c, jv *operand, const jnode *f, jenv *env) {
    if (f->kind == JN_IDENT) {
        if (!strcmp(f->s, "d") && operand->t == JV_UNDEF) return jv_strz(c, "");
        if (!strcmp(f->s, "d")) return operand;
        return filter_plain(c, operand, f->s, f);
    }
    if (f->kind == JN_CALL && f->a->kind == JN_IDENT) return filter_call(c, operand, f, env);
    return jfail(c, f, "a filter must be a name or a call of a name");
}

/* ---- globals */

static jv *g_raise(jctx *c, jv *self, jv **a, int n, const jnode *at) {
    (void)self;
    jbuf b = {0};
    if (n > 0 && a[0]->t != JV_UNDEF) jv_raw_string(c, a[0], &b);
    if (c->failed) {
        free(b.p);
        return NULL;
    }
    jfail(c, at, "the template raised an exception: %s", b.p ? b.p : "");
    free(b.p);
    return NULL;
}

static jv *g_range(jctx *c, jv *self, jv **a, int n, const jnode *at) {
    (void)self;
    n = positional(a, n);
    for (int i = 0; i < n; i++) {
        if (a[i]->t == JV_UNDEF || a[i]->t == JV_NULL) return jv_array(c, JV_ARRAY, 1); /* JavaScript: no i < undefined */
        if (a[i]->t != JV_INT && a[i]->t != JV_FLOAT) return jfail(c, at, "range() takes numbers, got %s", jv_type_name(a[i]));
    }
    if (n < 1 || n > 3) return jfail(c, at, "range() takes 1 to 3 numbers, got %d", n);
    double start = n == 1 ? 0 : a[0]->num, stop = n == 1 ? a[0]->num : a[1]->num, step = n == 3 ? a[2]->num : 1;
    if (step == 0) return bad(c, at, "range() step must not be zero");
    double count = step > 0 ? ceil((stop - start) / step) : ceil((start - stop) / -step);
    if (count > JINJA_MAX_ITEMS) return jfail(c, at, "range() of %.0f numbers is more than the %.0f allowed", count, JINJA_MAX_ITEMS);
    jv *r = jv_array(c, JV_ARRAY, count > 0 ? (size_t)count + 1 : 1);
    for (double x = start; r && (step > 0 ? x < stop : x > stop); x += step)
        jv_push(c, r, jv_num(c, floor(x) == x ? JV_INT : JV_FLOAT, x));
    return c->failed ? NULL : r;
}

static jv *g_strftime(jctx *c, jv *self, jv **a, int n, const jnode *at) {
    (void)self;
    if (n < 1 || a[0]->t != JV_STR) return bad(c, at, "strftime_now() takes a format string");
    static const char *MON[] = {"January", "February", "March", "April", "May", "June", "July",
                                "August", "September", "October", "November", "December"};
    time_t now = c->t->now ? (time_t)c->t->now : time(NULL);
    struct tm tm;
    if (c->t->now) gmtime_r(&now, &tm);
    else localtime_r(&now, &tm);
    jbuf b = {0};
    const char *f = a[0]->s;
    char tmp[32];
    for (size_t i = 0; i < a[0]->len; i++) {
        if (f[i] == '%' && i + 1 < a[0]->len && strchr("YmdbBHM%", f[i + 1])) {
            switch (f[++i]) {
            case 'Y': snprintf(tmp, sizeof tmp, "%d", tm.tm_year + 1900); break;
            case 'm': snprintf(tmp, sizeof tmp, "%02d", tm.tm_mon + 1); break;
            case 'd': snprintf(tmp, sizeof tmp, "%02d", tm.tm_mday); break;
            case 'b': snprintf(tmp, sizeof tmp, "%.3s", MON[tm.tm_mon]); break;
            case 'B': snprintf(tmp, sizeof tmp, "%s", MON[tm.tm_mon]); break;
            case 'H': snprintf(tmp, sizeof tmp, "%02d", tm.tm_hour); break;
            case 'M': snprintf(tmp, sizeof tmp, "%02d", tm.tm_min); break;
            default: snprintf(tmp, sizeof tmp, "%%");
            }
            jbuf_adds(&b, tmp);
        } else jbuf_addc(&b, f[i]);
    }
    jv *r = b.failed ? NULL : jv_str(c, b.p ? b.p : "", b.n);
    free(b.p);
    return r;
}

static jv *g_namespace(jctx *c, jv *self, jv **a, int n, const jnode *at) {
    (void)self;
    jv *kw = n > 0 && a[n - 1]->t == JV_KWARGS ? a[--n] : NULL;
    if (n > 1) return jfail(c, at, "namespace expected at most 1 argument, got %d", n);
    jv *ns = jv_array(c, JV_NAMESPACE, 8);
    if (!ns) return NULL;
    if (n == 1) {
        jv *src = a[0];
        if (jv_is_object(src))
            for (size_t i = 0; i < src->n; i++) jv_obj_set(c, ns, src->keys[i], src->klens[i], src->items[i]);
        else if (jv_is_array(src))
            for (size_t i = 0; i < src->n; i++) {
                jv *p = src->items[i];
                if (!jv_is_array(p) || p->n != 2) return bad(c, at, "namespace expected an object or an iterable of [key, value] pairs");
                if (p->items[0]->t != JV_STR) return bad(c, at, "namespace keys must be strings");
                jv_obj_set(c, ns, p->items[0]->s, p->items[0]->len, p->items[1]);
            }
        else return jfail(c, at, "'%s' object is not iterable", jv_type_name(src));
    }
    for (size_t i = 0; kw && i < kw->n; i++) jv_obj_set(c, ns, kw->keys[i], kw->klens[i], kw->items[i]);
    return c->failed ? NULL : ns;
}

bool jinja_set_globals(jctx *c, jenv *env) {
    static const struct { const char *name; jv_builtin f; } FN[] = {
        {"namespace", g_namespace}, {"raise_exception", g_raise}, {"range", g_range}, {"strftime_now", g_strftime},
    };
    for (size_t i = 0; i < sizeof FN / sizeof *FN; i++)
        if (!jenv_set(c, env, FN[i].name, strlen(FN[i].name), bound(c, NULL, FN[i].f))) return false;
    static const char *B[] = {"false", "true", "False", "True"};
    for (int i = 0; i < 4; i++)
        if (!jenv_set(c, env, B[i], strlen(B[i]), jv_bool(c, i & 1))) return false;
    return jenv_set(c, env, "none", 4, jv_new(c, JV_NULL)) && jenv_set(c, env, "None", 4, jv_new(c, JV_NULL));
}
