/* jinja_value.c - the values a template computes with (jinja_internal.h's jv), their memory (an
 * arena per render, a growable buffer), and what the reference does with them: JSON input as
 * JavaScript's JSON.parse + Object.entries sees it (integer-like keys first), printing
 * (RuntimeValue.toString, JavaScript's String(x) of the raw value), the tojson serializer, `==`
 * as JavaScript's loose equality of the raw values, `===` for `in`, and the sort order.
 * Values are never freed one by one: the arena goes when the render ends. */
#include "data/jinja_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct jarena_chunk {
    jarena_chunk *next;
    size_t used, cap;
    max_align_t data[];
};

void *jarena_alloc(jarena *a, size_t n) {
    n = (n + 15) & ~(size_t)15;
    if (a->failed) return NULL;
    jarena_chunk *c = a->head;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > ((size_t)1 << 16) ? n : ((size_t)1 << 16);
        if (a->cap_total && a->used_total + cap > a->cap_total) {
            a->failed = true;
            return NULL;
        }
        c = malloc(sizeof *c + cap);
        if (!c) {
            a->failed = true;
            return NULL;
        }
        c->next = a->head;
        c->used = 0;
        c->cap = cap;
        a->head = c;
        a->used_total += cap;
    }
    void *p = (char *)c->data + c->used;
    c->used += n;
    memset(p, 0, n);
    return p;
}

char *jarena_strdup(jarena *a, const char *s, size_t n) {
    char *p = jarena_alloc(a, n + 1);
    if (p) {
        if (n) memcpy(p, s, n);
        p[n] = 0;
    }
    return p;
}

void jarena_free(jarena *a) {
    for (jarena_chunk *c = a->head, *nx; c; c = nx) {
        nx = c->next;
        free(c);
    }
    a->head = NULL;
    a->used_total = 0;
}

void jbuf_add(jbuf *b, const char *s, size_t n) {
    if (b->failed) return;
    if (b->n + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap : 256;
        while (nc < b->n + n + 1) nc *= 2;
        if (nc > ((size_t)1 << 30)) { /* one string over 1 GiB: a runaway template */
            b->failed = true;
            return;
        }
        char *np = realloc(b->p, nc);
        if (!np) {
            b->failed = true;
            return;
        }
        b->p = np;
        b->cap = nc;
    }
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}
void jbuf_adds(jbuf *b, const char *s) { jbuf_add(b, s, strlen(s)); }
void jbuf_addc(jbuf *b, char c) { jbuf_add(b, &c, 1); }

jv *jfail(jctx *c, const jnode *at, const char *fmt, ...) {
    if (c->failed) return NULL;
    c->failed = true;
    char where[512], msg[900];
    if (!at) at = c->at;
    jinja_where(c->t, at ? at->pos : 0, where, sizeof where);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    zt_error_set(c->err, ZT_ERR_DATA, "%s: %s", where, msg);
    return NULL;
}

static jv *oom(jctx *c) {
    return jfail(c, NULL, "the template's values take more than %zu MiB (a runaway loop?)", c->ar->cap_total >> 20);
}

jv *jv_new(jctx *c, jv_type t) {
    jv *v = jarena_alloc(c->ar, sizeof *v);
    if (!v) return oom(c);
    v->t = t;
    return v;
}
jv *jv_str(jctx *c, const char *s, size_t n) {
    jv *v = jv_new(c, JV_STR);
    if (!v) return NULL;
    if (!(v->s = jarena_strdup(c->ar, s ? s : "", s ? n : 0))) return oom(c);
    v->len = s ? n : 0;
    return v;
}
jv *jv_strz(jctx *c, const char *s) { return jv_str(c, s, strlen(s)); }
jv *jv_num(jctx *c, jv_type t, double x) {
    jv *v = jv_new(c, t);
    if (v) v->num = x;
    return v;
}
jv *jv_bool(jctx *c, bool b) {
    jv *v = jv_new(c, JV_BOOL);
    if (v) v->b = b;
    return v;
}
jv *jv_array(jctx *c, jv_type t, size_t cap) {
    jv *v = jv_new(c, t);
    if (!v) return NULL;
    v->cap = cap ? cap : 4;
    v->items = jarena_alloc(c->ar, v->cap * sizeof *v->items);
    if (t == JV_OBJECT || t == JV_KWARGS || t == JV_NAMESPACE) {
        v->keys = jarena_alloc(c->ar, v->cap * sizeof *v->keys);
        v->klens = jarena_alloc(c->ar, v->cap * sizeof *v->klens);
    }
    if (!v->items || ((t == JV_OBJECT || t == JV_KWARGS || t == JV_NAMESPACE) && (!v->keys || !v->klens))) return oom(c);
    return v;
}
static bool grow(jctx *c, jv *v) {
    if (v->n < v->cap) return true;
    size_t nc = v->cap * 2;
    jv **ni = jarena_alloc(c->ar, nc * sizeof *ni);
    if (!ni) return oom(c), false;
    memcpy(ni, v->items, v->n * sizeof *ni);
    v->items = ni;
    if (v->keys) {
        const char **nk = jarena_alloc(c->ar, nc * sizeof *nk);
        size_t *nl = jarena_alloc(c->ar, nc * sizeof *nl);
        if (!nk || !nl) return oom(c), false;
        memcpy(nk, v->keys, v->n * sizeof *nk);
        memcpy(nl, v->klens, v->n * sizeof *nl);
        v->keys = nk;
        v->klens = nl;
    }
    v->cap = nc;
    return true;
}
bool jv_push(jctx *c, jv *arr, jv *item) {
    if (!item || !grow(c, arr)) return false;
    arr->items[arr->n++] = item;
    return true;
}
jv *jv_obj_get(const jv *obj, const char *k, size_t klen) {
    for (size_t i = 0; i < obj->n; i++)
        if (obj->klens[i] == klen && !memcmp(obj->keys[i], k, klen)) return obj->items[i];
    return NULL;
}
bool jv_obj_set(jctx *c, jv *obj, const char *k, size_t klen, jv *v) {
    if (!v) return false;
    for (size_t i = 0; i < obj->n; i++)
        if (obj->klens[i] == klen && !memcmp(obj->keys[i], k, klen)) {
            obj->items[i] = v;
            return true;
        }
    if (!grow(c, obj)) return false;
    char *kc = jarena_strdup(c->ar, k, klen);
    if (!kc) return oom(c), false;
    obj->keys[obj->n] = kc;
    obj->klens[obj->n] = klen;
    obj->items[obj->n++] = v;
    return true;
}

bool jv_is_array(const jv *v) { return v->t == JV_ARRAY || v->t == JV_TUPLE; }
bool jv_is_object(const jv *v) { return v->t == JV_OBJECT || v->t == JV_KWARGS; }

/* An array index as JavaScript orders object keys: a canonical integer below 2^32 - 1. */
static bool index_key(const char *k, double *out) {
    size_t n = strlen(k);
    if (n == 0 || n > 10 || (n > 1 && k[0] == '0')) return false;
    double x = 0;
    for (size_t i = 0; i < n; i++) {
        if (k[i] < '0' || k[i] > '9') return false;
        x = x * 10 + (k[i] - '0');
    }
    *out = x;
    return x < 4294967295.0;
}

jv *jv_from_json(jctx *c, const cJSON *j) {
    if (++c->depth > JINJA_MAX_DEPTH) {
        c->depth--;
        return jfail(c, NULL, "the variables nest deeper than %d levels", JINJA_MAX_DEPTH);
    }
    jv *v = NULL;
    if (cJSON_IsNull(j)) v = jv_new(c, JV_NULL);
    else if (cJSON_IsBool(j)) v = jv_bool(c, cJSON_IsTrue(j));
    else if (cJSON_IsNumber(j)) {
        double x = j->valuedouble;
        v = jv_num(c, isfinite(x) && floor(x) == x ? JV_INT : JV_FLOAT, x);
    } else if (cJSON_IsString(j)) v = jv_strz(c, j->valuestring ? j->valuestring : "");
    else if (cJSON_IsArray(j)) {
        v = jv_array(c, JV_ARRAY, (size_t)cJSON_GetArraySize(j));
        for (const cJSON *e = j->child; v && e; e = e->next)
            if (!jv_push(c, v, jv_from_json(c, e))) v = NULL;
    } else if (cJSON_IsObject(j)) {
        v = jv_array(c, JV_OBJECT, (size_t)cJSON_GetArraySize(j));
        /* integer-like keys first, ascending, then the others in order (Object.entries) */
        double last = -1;
        for (;;) {
            const cJSON *best = NULL;
            double bx = 0, x;
            for (const cJSON *e = j->child; e; e = e->next)
                if (e->string && index_key(e->string, &x) && x > last && (!best || x < bx)) best = e, bx = x;
            if (!best) break;
            const cJSON *lastdup = best; /* JSON.parse keeps the last of duplicate keys */
            for (const cJSON *e = best->next; e; e = e->next)
                if (e->string && !strcmp(e->string, best->string)) lastdup = e;
            if (!v || !jv_obj_set(c, v, best->string, strlen(best->string), jv_from_json(c, lastdup))) v = NULL;
            last = bx;
            if (!v) break;
        }
        for (const cJSON *e = j->child; v && e; e = e->next) {
            double x;
            if (!e->string || index_key(e->string, &x)) continue;
            if (!jv_obj_set(c, v, e->string, strlen(e->string), jv_from_json(c, e))) v = NULL;
        }
    } else v = jfail(c, NULL, "a variable has a JSON type the template cannot use");
    c->depth--;
    return v;
}

bool jv_truthy(const jv *v) {
    switch (v->t) {
    case JV_UNDEF: case JV_NULL: return false;
    case JV_BOOL: return v->b;
    case JV_INT: case JV_FLOAT: return v->num != 0 && !isnan(v->num);
    case JV_STR: return v->len > 0;
    case JV_ARRAY: case JV_TUPLE: case JV_OBJECT: case JV_KWARGS: return v->n > 0;
    default: return true; /* namespaces and functions */
    }
}

const char *jv_type_name(const jv *v) {
    static const char *N[] = {"UndefinedValue", "NullValue", "BooleanValue", "IntegerValue", "FloatValue",
                              "StringValue", "ArrayValue", "TupleValue", "ObjectValue", "KeywordArgumentsValue",
                              "NamespaceValue", "FunctionValue"};
    return N[v->t];
}

void jinja_js_number(double x, char *buf, size_t cap) {
    if (isnan(x)) {
        snprintf(buf, cap, "NaN");
        return;
    }
    if (isinf(x)) {
        snprintf(buf, cap, x < 0 ? "-Infinity" : "Infinity");
        return;
    }
    if (x == 0) {
        snprintf(buf, cap, "0");
        return;
    }
    char tmp[40], digits[24];
    double ax = fabs(x);
    int p;
    for (p = 1; p <= 17; p++) {
        snprintf(tmp, sizeof tmp, "%.*e", p - 1, ax);
        if (strtod(tmp, NULL) == ax) break;
    }
    /* tmp: d[.ddd]e[+-]xx */
    int k = 0, e;
    char *q = tmp;
    for (; *q && *q != 'e'; q++)
        if (*q != '.') digits[k++] = *q;
    e = atoi(q + 1);
    while (k > 1 && digits[k - 1] == '0') k--;
    digits[k] = 0;
    int n = e + 1;
    char out[64];
    int o = 0;
    if (x < 0) out[o++] = '-';
    if (k <= n && n <= 21) {
        o += snprintf(out + o, sizeof out - (size_t)o, "%s", digits);
        for (int i = 0; i < n - k; i++) out[o++] = '0';
    } else if (0 < n && n <= 21) {
        o += snprintf(out + o, sizeof out - (size_t)o, "%.*s.%s", n, digits, digits + n);
    } else if (-6 < n && n <= 0) {
        out[o++] = '0', out[o++] = '.';
        for (int i = 0; i < -n; i++) out[o++] = '0';
        o += snprintf(out + o, sizeof out - (size_t)o, "%s", digits);
    } else {
        out[o++] = digits[0];
        if (k > 1) o += snprintf(out + o, sizeof out - (size_t)o, ".%s", digits + 1);
        o += snprintf(out + o, sizeof out - (size_t)o, "e%c%d", n - 1 >= 0 ? '+' : '-', abs(n - 1));
    }
    out[o] = 0;
    snprintf(buf, cap, "%s", out);
}

static void float_string(double x, char *buf, size_t cap) {
    if (x == 0 && signbit(x)) snprintf(buf, cap, "-0.0");
    else if (isfinite(x) && fmod(x, 1) == 0 && fabs(x) < 1e21) snprintf(buf, cap, "%.1f", x);
    else jinja_js_number(x, buf, cap);
}

bool jv_to_string(jctx *c, const jv *v, jbuf *out) {
    char num[64];
    switch (v->t) {
    case JV_UNDEF: jbuf_adds(out, "undefined"); break;
    case JV_NULL: jbuf_adds(out, "null"); break;
    case JV_BOOL: jbuf_adds(out, v->b ? "true" : "false"); break;
    case JV_INT: jinja_js_number(v->num, num, sizeof num), jbuf_adds(out, num); break;
    case JV_FLOAT: float_string(v->num, num, sizeof num), jbuf_adds(out, num); break;
    case JV_STR: jbuf_add(out, v->s, v->len); break;
    case JV_FUNC: jfail(c, NULL, "a function cannot be printed"); return false;
    default: {
        jjson_opts o = {.indent = -1, .undefined_null = false};
        return jv_to_json(c, v, &o, 0, out);
    }
    }
    return true;
}

bool jv_raw_string(jctx *c, const jv *v, jbuf *out) {
    char num[64];
    switch (v->t) {
    case JV_INT: case JV_FLOAT: jinja_js_number(v->num, num, sizeof num), jbuf_adds(out, num); return true;
    case JV_ARRAY: case JV_TUPLE:
        for (size_t i = 0; i < v->n; i++) {
            if (i) jbuf_addc(out, ',');
            if (!jv_to_string(c, v->items[i], out)) return false;
        }
        return true;
    case JV_OBJECT: case JV_KWARGS: case JV_NAMESPACE: jbuf_adds(out, "[object Map]"); return true;
    case JV_UNDEF: case JV_NULL: return true; /* Array#join's empty string */
    default: return jv_to_string(c, v, out);
    }
}

static void json_string(const char *s, size_t n, bool ascii, jbuf *out) {
    jbuf_addc(out, '"');
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        char esc[16];
        if (ch == '"') jbuf_adds(out, "\\\"");
        else if (ch == '\\') jbuf_adds(out, "\\\\");
        else if (ch == '\b') jbuf_adds(out, "\\b");
        else if (ch == '\f') jbuf_adds(out, "\\f");
        else if (ch == '\n') jbuf_adds(out, "\\n");
        else if (ch == '\r') jbuf_adds(out, "\\r");
        else if (ch == '\t') jbuf_adds(out, "\\t");
        else if (ch < 0x20) snprintf(esc, sizeof esc, "\\u%04x", ch), jbuf_adds(out, esc);
        else if (ascii && ch >= 0x7f) {
            unsigned cp = ch;
            size_t l = 1;
            if (ch >= 0xF0 && i + 3 < n) cp = ((ch & 7u) << 18) | (((unsigned char)s[i + 1] & 63u) << 12) | (((unsigned char)s[i + 2] & 63u) << 6) | ((unsigned char)s[i + 3] & 63u), l = 4;
            else if (ch >= 0xE0 && i + 2 < n) cp = ((ch & 15u) << 12) | (((unsigned char)s[i + 1] & 63u) << 6) | ((unsigned char)s[i + 2] & 63u), l = 3;
            else if (ch >= 0xC0 && i + 1 < n) cp = ((ch & 31u) << 6) | ((unsigned char)s[i + 1] & 63u), l = 2;
            if (cp > 0xFFFF) {
                cp -= 0x10000;
                snprintf(esc, sizeof esc, "\\u%04x\\u%04x", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
            } else snprintf(esc, sizeof esc, "\\u%04x", cp);
            jbuf_adds(out, esc);
            i += l - 1;
        } else jbuf_addc(out, (char)ch);
    }
    jbuf_addc(out, '"');
}

/* localeCompare's order on the keys, approximated: case-insensitive, then lower before upper */
static int locale_cmp(const char *a, const char *b) {
    for (size_t i = 0;; i++) {
        int x = (unsigned char)a[i], y = (unsigned char)b[i];
        int lx = (x >= 'A' && x <= 'Z') ? x + 32 : x, ly = (y >= 'A' && y <= 'Z') ? y + 32 : y;
        if (lx != ly) return lx - ly;
        if (!x) break;
    }
    for (size_t i = 0;; i++) {
        int x = (unsigned char)a[i], y = (unsigned char)b[i];
        if (x != y) return (x >= 'a' && x <= 'z') ? -1 : (y >= 'a' && y <= 'z') ? 1 : x - y;
        if (!x) return 0;
    }
}

static void pad(jbuf *out, int indent, int depth) {
    jbuf_addc(out, '\n');
    for (int i = 0; i < indent * depth; i++) jbuf_addc(out, ' ');
}

bool jv_to_json(jctx *c, const jv *v, const jjson_opts *o, int depth, jbuf *out) {
    if (depth > JINJA_MAX_DEPTH) return jfail(c, NULL, "tojson: values nest deeper than %d", JINJA_MAX_DEPTH), false;
    const char *isep = o->item_sep ? o->item_sep : o->indent > 0 ? "," : ", ";
    const char *ksep = o->key_sep ? o->key_sep : ": ";
    char num[64];
    switch (v->t) {
    case JV_NULL: jbuf_adds(out, "null"); return true;
    case JV_UNDEF: jbuf_adds(out, o->undefined_null ? "null" : "undefined"); return true;
    case JV_BOOL: jbuf_adds(out, v->b ? "true" : "false"); return true;
    case JV_INT: case JV_FLOAT:
        if (!isfinite(v->num)) jbuf_adds(out, "null");
        else jinja_js_number(v->num, num, sizeof num), jbuf_adds(out, num);
        return true;
    case JV_STR: json_string(v->s, v->len, o->ensure_ascii, out); return true;
    case JV_ARRAY:
        jbuf_addc(out, '[');
        for (size_t i = 0; i < v->n; i++) {
            if (i) jbuf_adds(out, isep);
            if (o->indent > 0) pad(out, o->indent, depth + 1);
            if (!jv_to_json(c, v->items[i], o, depth + 1, out)) return false;
        }
        if (o->indent > 0 && v->n) pad(out, o->indent, depth);
        jbuf_addc(out, ']');
        return true;
    case JV_OBJECT: case JV_NAMESPACE: {
        size_t *ord = malloc((v->n ? v->n : 1) * sizeof *ord);
        if (!ord) return jfail(c, NULL, "tojson: no memory"), false;
        for (size_t i = 0; i < v->n; i++) ord[i] = i;
        if (o->sort_keys) /* insertion sort: stable, as Array#sort */
            for (size_t i = 1; i < v->n; i++) {
                size_t x = ord[i], j = i;
                while (j > 0 && locale_cmp(v->keys[ord[j - 1]], v->keys[x]) > 0) ord[j] = ord[j - 1], j--;
                ord[j] = x;
            }
        jbuf_addc(out, '{');
        bool ok = true;
        for (size_t k = 0; k < v->n && ok; k++) {
            size_t i = ord[k];
            if (k) jbuf_adds(out, isep);
            if (o->indent > 0) pad(out, o->indent, depth + 1);
            json_string(v->keys[i], v->klens[i], o->ensure_ascii, out);
            jbuf_adds(out, ksep);
            ok = jv_to_json(c, v->items[i], o, depth + 1, out);
        }
        free(ord);
        if (!ok) return false;
        if (o->indent > 0 && v->n) pad(out, o->indent, depth);
        jbuf_addc(out, '}');
        return true;
    }
    default: return jfail(c, NULL, "Cannot convert to JSON: %s", jv_type_name(v)), false;
    }
}

/* JavaScript's Number(string) */
static double js_to_number(const char *s, size_t n) {
    size_t a = 0, b = n, l;
    while (a < b && jinja_is_space(s, n, a, &l)) a += l;
    while (b > a) {
        size_t k = b - 1;
        while (k > a && ((unsigned char)s[k] & 0xC0) == 0x80) k--;
        if (jinja_is_space(s, n, k, &l) && k + l == b) b = k;
        else break;
    }
    if (a == b) return 0;
    char tmp[128];
    if (b - a >= sizeof tmp) return NAN;
    memcpy(tmp, s + a, b - a);
    tmp[b - a] = 0;
    if (!strcmp(tmp, "Infinity") || !strcmp(tmp, "+Infinity")) return INFINITY;
    if (!strcmp(tmp, "-Infinity")) return -INFINITY;
    char *end;
    if (tmp[0] == '0' && (tmp[1] == 'x' || tmp[1] == 'X')) { /* hexadecimal, unsigned only */
        if (!tmp[2]) return NAN;
        double h = 0;
        for (char *p = tmp + 2; *p; p++) {
            int d = (*p >= '0' && *p <= '9') ? *p - '0' : (*p >= 'a' && *p <= 'f') ? *p - 'a' + 10 : (*p >= 'A' && *p <= 'F') ? *p - 'A' + 10 : -1;
            if (d < 0) return NAN;
            h = h * 16 + d;
        }
        return h;
    }
    for (char *p = tmp; *p; p++)
        if (!strchr("0123456789.eE+-", *p)) return NAN;
    double x = strtod(tmp, &end);
    return *end ? NAN : x;
}

static bool is_prim(const jv *v) { return v->t <= JV_STR; }

bool jv_loose_eq(const jv *a, const jv *b) {
    if (!is_prim(a) || !is_prim(b)) return a == b;
    bool an = a->t == JV_UNDEF || a->t == JV_NULL, bn = b->t == JV_UNDEF || b->t == JV_NULL;
    if (an || bn) return an && bn;
    double x, y;
    if (a->t == JV_STR && b->t == JV_STR) return a->len == b->len && !memcmp(a->s, b->s, a->len);
    x = a->t == JV_STR ? js_to_number(a->s, a->len) : a->t == JV_BOOL ? (double)a->b : a->num;
    y = b->t == JV_STR ? js_to_number(b->s, b->len) : b->t == JV_BOOL ? (double)b->b : b->num;
    return x == y;
}

bool jv_strict_eq(const jv *a, const jv *b) {
    if (!is_prim(a) || !is_prim(b)) return a == b;
    bool anum = a->t == JV_INT || a->t == JV_FLOAT, bnum = b->t == JV_INT || b->t == JV_FLOAT;
    if (anum || bnum) return anum && bnum && a->num == b->num;
    if (a->t != b->t) return false;
    if (a->t == JV_BOOL) return a->b == b->b;
    if (a->t == JV_STR) return a->len == b->len && !memcmp(a->s, b->s, a->len);
    return true;
}

static int ci_cmp(const char *a, size_t an, const char *b, size_t bn, bool cs) {
    size_t n = an < bn ? an : bn;
    for (size_t i = 0; i < n; i++) {
        int x = (unsigned char)a[i], y = (unsigned char)b[i];
        if (!cs) {
            if (x >= 'A' && x <= 'Z') x += 32;
            if (y >= 'A' && y <= 'Z') y += 32;
        }
        if (x != y) return x < y ? -1 : 1;
    }
    return an < bn ? -1 : an > bn ? 1 : 0;
}

bool jv_compare(jctx *c, const jv *a, const jv *b, bool cs, int *out, const jnode *at) {
    if (a->t == JV_NULL || b->t == JV_NULL || a->t == JV_UNDEF || b->t == JV_UNDEF) {
        if (a->t == b->t) {
            *out = 0;
            return true;
        }
        return jfail(c, at, "Cannot compare %s with %s", jv_type_name(a), jv_type_name(b)), false;
    }
    bool an = a->t == JV_INT || a->t == JV_FLOAT || a->t == JV_BOOL, bn = b->t == JV_INT || b->t == JV_FLOAT || b->t == JV_BOOL;
    if (an && bn) {
        double x = a->t == JV_BOOL ? a->b : a->num, y = b->t == JV_BOOL ? b->b : b->num;
        *out = x < y ? -1 : x > y ? 1 : 0;
        return true;
    }
    if (a->t != b->t) return jfail(c, at, "Cannot compare different types: %s and %s", jv_type_name(a), jv_type_name(b)), false;
    if (a->t != JV_STR) return jfail(c, at, "Cannot compare type: %s", jv_type_name(a)), false;
    *out = ci_cmp(a->s, a->len, b->s, b->len, cs);
    return true;
}

size_t jinja_utf16_len(const char *s, size_t n) {
    size_t u = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if ((ch & 0xC0) == 0x80) continue;
        u += ch >= 0xF0 ? 2 : 1;
    }
    return u;
}
