/* jinja_eval.c - the evaluator: statements render to text, expressions to values, in scopes
 * (jenv) chained as @huggingface/jinja chains them (a for loop has its own scope; if does not;
 * a macro's scope is a child of its caller's, so macros see the caller's variables). Also
 * zt_jinja_render. Break and continue unwind through c->ctrl and, as in the reference, drop what
 * the interrupted iteration had rendered. Every failure is ZT_ERR_DATA naming NAME:LINE:COL of the
 * expression; recursion deeper than JINJA_MAX_DEPTH, more than JINJA_MAX_STEPS evaluations or
 * more values than the render's arena holds end the render with an error, never a crash. */
#include "data/jinja_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

jenv *jenv_new(jctx *c, jenv *parent) {
    jenv *e = jarena_alloc(c->ar, sizeof *e);
    if (!e) {
        jfail(c, NULL, "no memory for a scope");
        return NULL;
    }
    e->parent = parent;
    return e;
}

bool jenv_set(jctx *c, jenv *e, const char *name, size_t len, jv *v) {
    if (!v || !e) return false;
    for (size_t i = 0; i < e->n; i++)
        if (e->nlens[i] == len && !memcmp(e->names[i], name, len)) {
            e->vals[i] = v;
            return true;
        }
    if (e->n == e->cap) {
        size_t nc = e->cap ? e->cap * 2 : 8;
        const char **nn = jarena_alloc(c->ar, nc * sizeof *nn);
        size_t *nl = jarena_alloc(c->ar, nc * sizeof *nl);
        jv **nv = jarena_alloc(c->ar, nc * sizeof *nv);
        if (!nn || !nl || !nv) return jfail(c, NULL, "no memory for a variable"), false;
        if (e->n) {
            memcpy(nn, e->names, e->n * sizeof *nn);
            memcpy(nl, e->nlens, e->n * sizeof *nl);
            memcpy(nv, e->vals, e->n * sizeof *nv);
        }
        e->names = nn, e->nlens = nl, e->vals = nv, e->cap = nc;
    }
    e->names[e->n] = name;
    e->nlens[e->n] = len;
    e->vals[e->n++] = v;
    return true;
}

jv *jenv_get(jenv *e, const char *name, size_t len) {
    for (; e; e = e->parent)
        for (size_t i = 0; i < e->n; i++)
            if (e->nlens[i] == len && !memcmp(e->names[i], name, len)) return e->vals[i];
    return NULL;
}

static jv *str_of(jctx *c, jbuf *b) {
    if (b->failed) {
        free(b->p);
        return jfail(c, NULL, "a rendered string passes 1 GiB (a runaway template?)");
    }
    jv *v = jv_str(c, b->p ? b->p : "", b->n);
    free(b->p);
    return v;
}

static jv *eval_block(jctx *c, jnode **list, int n, jenv *env) {
    jbuf b = {0};
    for (int i = 0; i < n; i++) {
        jv *v = jinja_eval(c, list[i], env);
        if (!v) {
            free(b.p);
            return NULL;
        }
        if (c->ctrl) break;
        c->at = list[i];
        if (v->t != JV_NULL && v->t != JV_UNDEF && !jv_to_string(c, v, &b)) {
            free(b.p);
            return NULL;
        }
    }
    return str_of(c, &b);
}

static const char *opname(const jnode *n) { return n->s; }

static bool is_num(const jv *v) { return v->t == JV_INT || v->t == JV_FLOAT; }

static jv *eval_binary(jctx *c, const jnode *n, jenv *env) {
    jv *l = jinja_eval(c, n->a, env);
    if (!l) return NULL;
    const char *op = opname(n);
    if (!strcmp(op, "and")) return jv_truthy(l) ? jinja_eval(c, n->b, env) : l;
    if (!strcmp(op, "or")) return jv_truthy(l) ? l : jinja_eval(c, n->b, env);
    jv *r = jinja_eval(c, n->b, env);
    if (!r) return NULL;
    if (!strcmp(op, "==")) return jv_bool(c, jv_loose_eq(l, r));
    if (!strcmp(op, "!=")) return jv_bool(c, !jv_loose_eq(l, r));
    bool in = !strcmp(op, "in"), notin = !strcmp(op, "not in");
    if (l->t == JV_UNDEF || r->t == JV_UNDEF) {
        if (r->t == JV_UNDEF && (in || notin)) return jv_bool(c, notin);
        return jfail(c, n, "Cannot perform operation %s on undefined values", op);
    }
    if (l->t == JV_NULL || r->t == JV_NULL) return jfail(c, n, "Cannot perform operation on null values (%s)", op);
    if (!strcmp(op, "~")) {
        jbuf b = {0};
        if (!jv_raw_string(c, l, &b) || !jv_raw_string(c, r, &b)) {
            free(b.p);
            return NULL;
        }
        return str_of(c, &b);
    }
    bool lnum = is_num(l) || l->t == JV_BOOL, rnum = is_num(r) || r->t == JV_BOOL;
    if (!strcmp(op, "**") && lnum && rnum) {
        double a = l->t == JV_BOOL ? l->b : l->num, b = r->t == JV_BOOL ? r->b : r->num;
        if (a == 0 && b < 0) return jfail(c, n, "0.0 cannot be raised to a negative power");
        double x = pow(a, b);
        if (!isfinite(x)) return jfail(c, n, "Exponentiation result is not a finite real number");
        return jv_num(c, l->t == JV_FLOAT || r->t == JV_FLOAT || b < 0 ? JV_FLOAT : JV_INT, x);
    }
    if (is_num(l) && is_num(r)) {
        double a = l->num, b = r->num;
        jv_type t = l->t == JV_FLOAT || r->t == JV_FLOAT ? JV_FLOAT : JV_INT;
        switch (op[0]) {
        case '+': return jv_num(c, t, a + b);
        case '-': return jv_num(c, t, a - b);
        case '*': return jv_num(c, t, a * b);
        case '/': return op[1] == '/' ? jv_num(c, t, floor(a / b)) : jv_num(c, JV_FLOAT, a / b);
        case '%': return jv_num(c, t, fmod(a, b));
        case '<': return jv_bool(c, op[1] == '=' ? a <= b : a < b);
        case '>': return jv_bool(c, op[1] == '=' ? a >= b : a > b);
        default: break;
        }
    } else if (jv_is_array(l) && jv_is_array(r)) {
        if (!strcmp(op, "+")) {
            jv *out = jv_array(c, JV_ARRAY, l->n + r->n + 1);
            for (size_t i = 0; out && i < l->n; i++) jv_push(c, out, l->items[i]);
            for (size_t i = 0; out && i < r->n; i++) jv_push(c, out, r->items[i]);
            return c->failed ? NULL : out;
        }
    } else if (jv_is_array(r) && (in || notin)) {
        bool found = false;
        for (size_t i = 0; i < r->n && !found; i++) found = jv_strict_eq(r->items[i], l);
        return jv_bool(c, in ? found : !found);
    }
    if ((l->t == JV_STR || r->t == JV_STR) && !strcmp(op, "+")) {
        jbuf b = {0};
        if (!jv_raw_string(c, l, &b) || !jv_raw_string(c, r, &b)) {
            free(b.p);
            return NULL;
        }
        return str_of(c, &b);
    }
    if (l->t == JV_STR && r->t == JV_STR && (in || notin)) {
        bool found = l->len == 0;
        for (size_t i = 0; !found && l->len <= r->len && i + l->len <= r->len; i++)
            found = !memcmp(r->s + i, l->s, l->len);
        return jv_bool(c, in ? found : !found);
    }
    if (l->t == JV_STR && jv_is_object(r) && (in || notin)) {
        bool found = jv_obj_get(r, l->s, l->len) != NULL;
        return jv_bool(c, in ? found : !found);
    }
    return jfail(c, n, "Unknown operator \"%s\" between %s and %s", op, jv_type_name(l), jv_type_name(r));
}

/* JavaScript's Array#at / String#at index (code points for strings) */
static jv *at_index(jctx *c, jv *obj, double idx) {
    double i = trunc(idx);
    if (obj->t == JV_STR) {
        size_t npts = 0;
        for (size_t k = 0; k < obj->len; k++) npts += ((unsigned char)obj->s[k] & 0xC0) != 0x80;
        if (i < 0) i += (double)npts;
        if (i < 0 || i >= (double)npts) return jv_new(c, JV_UNDEF);
        size_t want = (size_t)i, k = 0, start = 0;
        for (size_t p = 0; p < obj->len; p++)
            if (((unsigned char)obj->s[p] & 0xC0) != 0x80) {
                if (k == want) {
                    start = p;
                    size_t e = p + 1;
                    while (e < obj->len && ((unsigned char)obj->s[e] & 0xC0) == 0x80) e++;
                    return jv_str(c, obj->s + start, e - start);
                }
                k++;
            }
        return jv_new(c, JV_UNDEF);
    }
    if (i < 0) i += (double)obj->n;
    if (i < 0 || i >= (double)obj->n) return jv_new(c, JV_UNDEF);
    return obj->items[(size_t)i];
}

static jv *eval_slice(jctx *c, jv *obj, const jnode *s, jenv *env) {
    if (!jv_is_array(obj) && obj->t != JV_STR) return jfail(c, s, "Slice object must be an array or string");
    jv *v[3] = {0};
    const jnode *parts[3] = {s->a, s->b, s->c};
    for (int i = 0; i < 3; i++) {
        v[i] = parts[i] ? jinja_eval(c, parts[i], env) : jv_new(c, JV_UNDEF);
        if (!v[i]) return NULL;
        if (v[i]->t != JV_INT && v[i]->t != JV_UNDEF)
            return jfail(c, s, "Slice %s must be numeric or undefined", i == 0 ? "start" : i == 1 ? "stop" : "step");
    }
    /* the elements: array items, or the string's code points */
    size_t len = obj->n;
    size_t *cp = NULL;
    if (obj->t == JV_STR) {
        cp = malloc((obj->len + 1) * sizeof *cp);
        if (!cp) return jfail(c, s, "no memory for a slice");
        len = 0;
        for (size_t k = 0; k < obj->len; k++)
            if (((unsigned char)obj->s[k] & 0xC0) != 0x80) cp[len++] = k;
        cp[len] = obj->len;
    }
    double step = v[2]->t == JV_INT ? v[2]->num : 1, L = (double)len, start, stop;
    if (step >= 0) { /* a zero step takes nothing, as the reference's loop does */
        start = v[0]->t == JV_INT ? v[0]->num : 0;
        start = start < 0 ? fmax(L + start, 0) : fmin(start, L);
        stop = v[1]->t == JV_INT ? v[1]->num : L;
        stop = stop < 0 ? fmax(L + stop, 0) : fmin(stop, L);
    } else {
        start = v[0]->t == JV_INT ? v[0]->num : L - 1;
        start = start < 0 ? fmax(L + start, -1) : fmin(start, L - 1);
        stop = v[1]->t == JV_INT ? v[1]->num : -1;
        stop = stop < -1 ? fmax(L + stop, -1) : fmin(stop, L - 1);
    }
    double dir = step > 0 ? 1 : step < 0 ? -1 : 0;
    jv *out = NULL;
    jbuf b = {0};
    if (obj->t != JV_STR) out = jv_array(c, JV_ARRAY, 8);
    for (double i = start; dir * i < dir * stop && !c->failed; i += step) {
        size_t k = (size_t)i;
        if (obj->t == JV_STR) jbuf_add(&b, obj->s + cp[k], cp[k + 1] - cp[k]);
        else jv_push(c, out, obj->items[k]);
    }
    free(cp);
    if (obj->t == JV_STR) return str_of(c, &b);
    return c->failed ? NULL : out;
}

static jv *eval_member(jctx *c, const jnode *n, jenv *env) {
    jv *obj = jinja_eval(c, n->a, env);
    if (!obj) return NULL;
    jv *prop;
    if (n->flag) {
        if (n->b->kind == JN_SLICE) return eval_slice(c, obj, n->b, env);
        prop = jinja_eval(c, n->b, env);
    } else if (n->b->kind == JN_INT) prop = jv_num(c, JV_INT, n->b->num);
    else prop = jv_str(c, n->b->s, n->b->slen);
    if (!prop) return NULL;
    jv *val = NULL;
    if (jv_is_object(obj) || obj->t == JV_NAMESPACE) {
        if (prop->t != JV_STR) return jfail(c, n, "Cannot access property with non-string: got %s", jv_type_name(prop));
        val = jv_obj_get(obj, prop->s, prop->len);
        if (!val && obj->t != JV_NAMESPACE) val = jinja_builtin_member(c, obj, prop->s, prop->len);
    } else if (jv_is_array(obj) || obj->t == JV_STR) {
        if (prop->t == JV_INT) val = at_index(c, obj, prop->num);
        else if (prop->t == JV_STR) val = jinja_builtin_member(c, obj, prop->s, prop->len);
        else return jfail(c, n, "Cannot access property with non-string/non-number: got %s", jv_type_name(prop));
    } else if (prop->t != JV_STR) return jfail(c, n, "Cannot access property with non-string: got %s", jv_type_name(prop));
    if (c->failed) return NULL;
    return val ? val : jv_new(c, JV_UNDEF);
}

jv *jinja_eval_args(jctx *c, jnode **args, int n, jenv *env, jv ***out, int *nout, jv **kwargs) {
    jv *pos = jv_array(c, JV_ARRAY, (size_t)n + 1), *kw = jv_array(c, JV_KWARGS, 4);
    if (!pos || !kw) return NULL;
    for (int i = 0; i < n; i++) {
        if (args[i]->kind == JN_KWARG || args[i]->kind == JN_KWSPREAD) continue;
        jv *v = jinja_eval(c, args[i]->kind == JN_SPREAD ? args[i]->a : args[i], env);
        if (!v) return NULL;
        if (args[i]->kind == JN_SPREAD) {
            if (!jv_is_array(v)) return jfail(c, args[i], "Cannot unpack non-iterable type: %s", jv_type_name(v));
            for (size_t k = 0; k < v->n; k++) jv_push(c, pos, v->items[k]);
        } else jv_push(c, pos, v);
    }
    for (int i = 0; i < n; i++) {
        if (args[i]->kind != JN_KWARG && args[i]->kind != JN_KWSPREAD) continue;
        jv *v = jinja_eval(c, args[i]->a, env);
        if (!v) return NULL;
        if (args[i]->kind == JN_KWARG) {
            if (jv_obj_get(kw, args[i]->s, args[i]->slen))
                return jfail(c, args[i], "Got multiple values for keyword argument '%s'", args[i]->s);
            jv_obj_set(c, kw, args[i]->s, args[i]->slen, v);
        } else {
            if (!jv_is_object(v)) return jfail(c, args[i], "Argument after ** must be a mapping, not %s", jv_type_name(v));
            for (size_t k = 0; k < v->n; k++) {
                if (jv_obj_get(kw, v->keys[k], v->klens[k]))
                    return jfail(c, args[i], "Got multiple values for keyword argument '%s'", v->keys[k]);
                jv_obj_set(c, kw, v->keys[k], v->klens[k], v->items[k]);
            }
        }
    }
    if (c->failed) return NULL;
    *out = pos->items;
    *nout = (int)pos->n;
    *kwargs = kw;
    return pos;
}

/* Does the tree under n read the name (kwargs / varargs)? The reference's scan, simplified. */
static bool reads_name(const jnode *n, const char *name, int depth) {
    if (!n || depth > JINJA_MAX_DEPTH) return false;
    if (n->kind == JN_IDENT && !strcmp(n->s, name)) return true;
    if (n->kind == JN_MACRO) return false; /* a nested macro has its own */
    if (reads_name(n->a, name, depth + 1) || reads_name(n->b, name, depth + 1) || reads_name(n->c, name, depth + 1)) return true;
    for (int i = 0; i < n->n; i++)
        if (reads_name(n->list[i], name, depth + 1)) return true;
    if (n->kind != JN_CALLSTMT)
        for (int i = 0; i < n->n2; i++)
            if (reads_name(n->list2[i], name, depth + 1)) return true;
    return false;
}
static bool body_reads(const jnode *m, const char *name) {
    for (int i = 0; i < m->n2; i++) {
        const jnode *p = m->list2[i];
        if (!strcmp(p->s, name)) return false;
    }
    for (int i = 0; i < m->n; i++)
        if (reads_name(m->list[i], name, 0)) return true;
    return false;
}

static bool bind_args(jctx *c, const jnode *m, const char *display, jv **args, int n, jenv *scope, const jnode *at) {
    jv *kw = NULL;
    if (n > 0 && args[n - 1]->t == JV_KWARGS) {
        jv *src = args[--n];
        kw = jv_array(c, JV_KWARGS, src->n + 1);
        for (size_t i = 0; kw && i < src->n; i++) jv_obj_set(c, kw, src->keys[i], src->klens[i], src->items[i]);
    } else kw = jv_array(c, JV_KWARGS, 4);
    if (!kw) return false;
    int np = m->n2;
    bool *pending = calloc((size_t)np + 1, sizeof *pending);
    if (!pending) return jfail(c, at, "no memory for a macro call"), false;
    for (int i = 0; i < np; i++) {
        const jnode *p = m->list2[i];
        jv *v = i < n ? args[i] : NULL;
        if (!v) {
            for (size_t k = 0; k < kw->n; k++)
                if (kw->klens[k] == p->slen && !memcmp(kw->keys[k], p->s, p->slen)) {
                    v = kw->items[k];
                    memmove(kw->keys + k, kw->keys + k + 1, (kw->n - k - 1) * sizeof *kw->keys);
                    memmove(kw->klens + k, kw->klens + k + 1, (kw->n - k - 1) * sizeof *kw->klens);
                    memmove(kw->items + k, kw->items + k + 1, (kw->n - k - 1) * sizeof *kw->items);
                    kw->n--;
                    break;
                }
        }
        pending[i] = !v && p->kind == JN_KWARG;
        if (!jenv_set(c, scope, p->s, p->slen, v ? v : jv_new(c, JV_UNDEF))) {
            free(pending);
            return false;
        }
    }
    bool ok = true;
    if (body_reads(m, "kwargs")) {
        kw->t = JV_OBJECT;
        ok = jenv_set(c, scope, "kwargs", 6, kw);
    } else if (kw->n > 0) ok = jfail(c, at, "macro %s takes no keyword argument '%s'", display, kw->keys[0]) != NULL;
    if (ok && body_reads(m, "varargs")) {
        jv *va = jv_array(c, JV_ARRAY, 4);
        for (int i = np; va && i < n; i++) jv_push(c, va, args[i]);
        ok = va && jenv_set(c, scope, "varargs", 7, va);
    } else if (ok && n > np) ok = jfail(c, at, "macro %s takes not more than %d argument(s)", display, np) != NULL;
    for (int i = 0; ok && i < np; i++) { /* defaults, in the macro's scope, once every name is bound */
        if (!pending[i]) continue;
        const jnode *p = m->list2[i];
        jv *d = jinja_eval(c, p->a, scope);
        ok = d && jenv_set(c, scope, p->s, p->slen, d);
    }
    free(pending);
    return !c->failed;
}

jv *jinja_call(jctx *c, jv *fn, jv **args, int n, jenv *env, const jnode *at) {
    if (fn->fn) return fn->fn(c, fn->self, args, n, at);
    const jnode *m = fn->macro;
    if (++c->depth > JINJA_MAX_DEPTH) {
        c->depth--;
        return jfail(c, at, "macro calls nested deeper than %d (unbounded recursion?)", JINJA_MAX_DEPTH);
    }
    jv *r = NULL;
    char display[300];
    if (m->kind == JN_MACRO) snprintf(display, sizeof display, "'%s'", m->s);
    else snprintf(display, sizeof display, "None");
    jenv *scope = jenv_new(c, m->kind == JN_MACRO ? env : fn->closure);
    if (scope && bind_args(c, m, display, args, n, scope, at)) r = eval_block(c, m->list, m->n, scope);
    c->depth--;
    return r;
}

static jv *eval_call(jctx *c, const jnode *n, jenv *env) {
    jv **args, *kw;
    int na;
    jv *pos = jinja_eval_args(c, n->list, n->n, env, &args, &na, &kw);
    if (!pos) return NULL;
    if (kw->n > 0) {
        jv_push(c, pos, kw);
        args = pos->items;
        na = (int)pos->n;
    }
    jv *fn = jinja_eval(c, n->a, env);
    if (!fn) return NULL;
    if (fn->t != JV_FUNC) {
        if (n->a->kind == JN_IDENT)
            return jfail(c, n, "'%s' is not a function (Cannot call something that is not a function: got %s)", n->a->s, jv_type_name(fn));
        return jfail(c, n, "Cannot call something that is not a function: got %s", jv_type_name(fn));
    }
    return jinja_call(c, fn, args, na, env, n);
}

static bool assign(jctx *c, jenv *env, const jnode *target, jv *v, const jnode *at, bool in_set) {
    if (target->kind == JN_IDENT) return jenv_set(c, env, target->s, target->slen, v);
    if (target->kind == JN_TUPLE) {
        if (in_set ? !jv_is_array(v) : v->t != JV_ARRAY)
            return jfail(c, at, "Cannot unpack non-iterable type%s: %s", in_set ? " in set" : "", jv_type_name(v)), false;
        if ((size_t)target->n != v->n)
            return jfail(c, at, "Too %s items to unpack%s", (size_t)target->n > v->n ? "few" : "many", in_set ? " in set" : ""), false;
        for (int i = 0; i < target->n; i++) {
            if (target->list[i]->kind != JN_IDENT)
                return jfail(c, at, "Cannot unpack to non-identifier%s", in_set ? " in set" : ""), false;
            if (!jenv_set(c, env, target->list[i]->s, target->list[i]->slen, v->items[i])) return false;
        }
        return true;
    }
    return jfail(c, at, "Invalid loop variable(s)"), false;
}

static jv *eval_set(jctx *c, const jnode *n, jenv *env) {
    jv *rhs = n->b ? jinja_eval(c, n->b, env) : eval_block(c, n->list, n->n, env);
    if (!rhs) return NULL;
    const jnode *t = n->a;
    if (t->kind == JN_IDENT || t->kind == JN_TUPLE) {
        if (!assign(c, env, t, rhs, n, true)) return NULL;
    } else if (t->kind == JN_MEMBER) {
        jv *obj = jinja_eval(c, t->a, env);
        if (!obj) return NULL;
        if (obj->t != JV_NAMESPACE) return jfail(c, n, "cannot assign attribute on non-namespace object (%s)", jv_type_name(obj));
        if (t->flag || t->b->kind != JN_IDENT) return jfail(c, n, "Cannot assign to member with non-identifier property");
        if (!jv_obj_set(c, obj, t->b->s, t->b->slen, rhs)) return NULL;
    } else return jfail(c, n, "Invalid LHS inside assignment expression");
    return jv_new(c, JV_NULL);
}

static jv *eval_for(jctx *c, const jnode *n, jenv *env) {
    jenv *scope = jenv_new(c, env);
    if (!scope) return NULL;
    const jnode *test = NULL, *src = n->b;
    if (src->kind == JN_SELECT) {
        test = src->b;
        src = src->a;
    }
    jv *it = jinja_eval(c, src, scope);
    if (!it) return NULL;
    if (!jv_is_array(it) && !jv_is_object(it))
        return jfail(c, n, "Expected iterable or object type in for loop: got %s", jv_type_name(it));
    if (jv_is_object(it)) {
        jv *keys = jv_array(c, JV_ARRAY, it->n + 1);
        for (size_t i = 0; keys && i < it->n; i++) jv_push(c, keys, jv_str(c, it->keys[i], it->klens[i]));
        if (c->failed) return NULL;
        it = keys;
    }
    jv *items = jv_array(c, JV_ARRAY, it->n + 1);
    for (size_t i = 0; items && i < it->n; i++) {
        jv *cur = it->items[i];
        if (n->a->kind == JN_TUPLE && cur->t != JV_ARRAY)
            return jfail(c, n, "Cannot unpack non-iterable type: %s", jv_type_name(cur));
        if (n->a->kind == JN_TUPLE && cur->n != (size_t)n->a->n)
            return jfail(c, n, "Too %s items to unpack", (size_t)n->a->n > cur->n ? "few" : "many");
        if (test) {
            jenv *ls = jenv_new(c, scope);
            if (!ls || !assign(c, ls, n->a, cur, n, false)) return NULL;
            jv *ok = jinja_eval(c, test, ls);
            if (!ok) return NULL;
            if (!jv_truthy(ok)) continue;
        }
        jv_push(c, items, cur);
    }
    if (c->failed) return NULL;
    jbuf out = {0};
    bool none = true;
    size_t N = items->n;
    for (size_t i = 0; i < N; i++) {
        jv *loop = jv_array(c, JV_OBJECT, 10);
        if (!loop) break;
        jv_obj_set(c, loop, "index", 5, jv_num(c, JV_INT, (double)i + 1));
        jv_obj_set(c, loop, "index0", 6, jv_num(c, JV_INT, (double)i));
        jv_obj_set(c, loop, "revindex", 8, jv_num(c, JV_INT, (double)(N - i)));
        jv_obj_set(c, loop, "revindex0", 9, jv_num(c, JV_INT, (double)(N - i - 1)));
        jv_obj_set(c, loop, "first", 5, jv_bool(c, i == 0));
        jv_obj_set(c, loop, "last", 4, jv_bool(c, i == N - 1));
        jv_obj_set(c, loop, "length", 6, jv_num(c, JV_INT, (double)N));
        jv_obj_set(c, loop, "previtem", 8, i > 0 ? items->items[i - 1] : jv_new(c, JV_UNDEF));
        jv_obj_set(c, loop, "nextitem", 8, i + 1 < N ? items->items[i + 1] : jv_new(c, JV_UNDEF));
        if (c->failed || !jenv_set(c, scope, "loop", 4, loop) || !assign(c, scope, n->a, items->items[i], n, false)) break;
        jv *body = eval_block(c, n->list, n->n, scope);
        if (!body) break;
        if (c->ctrl == 2) {
            c->ctrl = 0;
            continue;
        }
        if (c->ctrl == 1) {
            c->ctrl = 0;
            break;
        }
        jbuf_add(&out, body->s, body->len);
        none = false;
    }
    if (c->failed) {
        free(out.p);
        return NULL;
    }
    if (none) {
        jv *e = eval_block(c, n->list2, n->n2, scope);
        if (!e) {
            free(out.p);
            return NULL;
        }
        jbuf_add(&out, e->s, e->len);
    }
    return str_of(c, &out);
}

static jv *eval_callstmt(jctx *c, const jnode *n, jenv *env) {
    jv *caller = jv_new(c, JV_FUNC);
    if (!caller) return NULL;
    caller->macro = n;
    caller->closure = env;
    jv **args, *kw;
    int na;
    jv *pos = jinja_eval_args(c, n->a->list, n->a->n, env, &args, &na, &kw);
    if (!pos || !jv_push(c, pos, kw)) return NULL;
    jv *fn = jinja_eval(c, n->a->a, env);
    if (!fn) return NULL;
    if (fn->t != JV_FUNC) return jfail(c, n, "Cannot call something that is not a function: got %s", jv_type_name(fn));
    jenv *ne = jenv_new(c, env);
    if (!ne || !jenv_set(c, ne, "caller", 6, caller)) return NULL;
    return jinja_call(c, fn, pos->items, (int)pos->n, ne, n);
}

jv *jinja_eval(jctx *c, const jnode *n, jenv *env) {
    if (c->failed) return NULL;
    if (++c->steps > JINJA_MAX_STEPS) return jfail(c, n, "the template takes more than %lld evaluation steps (a runaway loop?)", JINJA_MAX_STEPS);
    if (++c->depth > JINJA_MAX_DEPTH) {
        c->depth--;
        return jfail(c, n, "evaluation nested deeper than %d (unbounded recursion?)", JINJA_MAX_DEPTH);
    }
    jv *r = NULL;
    c->at = n;
    switch (n->kind) {
    case JN_PROGRAM: r = eval_block(c, n->list, n->n, env); break;
    case JN_TEXT: case JN_STR: r = jv_str(c, n->s, n->slen); break;
    case JN_INT: r = jv_num(c, JV_INT, n->num); break;
    case JN_FLOAT: r = jv_num(c, JV_FLOAT, n->num); break;
    case JN_IDENT:
        r = jenv_get(env, n->s, n->slen);
        if (!r) r = jv_new(c, JV_UNDEF);
        break;
    case JN_ARRAY: case JN_TUPLE:
        r = jv_array(c, n->kind == JN_ARRAY ? JV_ARRAY : JV_TUPLE, (size_t)n->n + 1);
        for (int i = 0; r && i < n->n; i++)
            if (!jv_push(c, r, jinja_eval(c, n->list[i], env))) r = NULL;
        break;
    case JN_OBJECT:
        r = jv_array(c, JV_OBJECT, (size_t)n->n + 1);
        for (int i = 0; r && i < n->n; i++) {
            jv *k = jinja_eval(c, n->list[i], env);
            if (!k) r = NULL;
            else if (k->t != JV_STR) r = jfail(c, n->list[i], "Object keys must be strings: got %s", jv_type_name(k));
            else if (!jv_obj_set(c, r, k->s, k->len, jinja_eval(c, n->list2[i], env))) r = NULL;
        }
        break;
    case JN_BINARY: r = eval_binary(c, n, env); break;
    case JN_UNARY: {
        jv *a = jinja_eval(c, n->a, env);
        if (!a) break;
        if (n->s[0] == 'n') r = jv_bool(c, !jv_truthy(a));
        else if (is_num(a) || a->t == JV_BOOL) {
            double x = (n->s[0] == '-' ? -1 : 1) * (a->t == JV_BOOL ? (double)a->b : a->num);
            r = jv_num(c, a->t == JV_FLOAT ? JV_FLOAT : JV_INT, x);
        } else r = jfail(c, n, "Unknown operator \"%s\" for %s", n->s, jv_type_name(a));
        break;
    }
    case JN_MEMBER: r = eval_member(c, n, env); break;
    case JN_CALL: r = eval_call(c, n, env); break;
    case JN_FILTER: {
        jv *a = jinja_eval(c, n->a, env);
        if (a) r = jinja_filter(c, a, n->b, env);
        break;
    }
    case JN_TEST: {
        jv *a = jinja_eval(c, n->a, env);
        if (!a) break;
        jv **args = NULL, *kw;
        int na = 0;
        if (n->n && !jinja_eval_args(c, n->list, n->n, env, &args, &na, &kw)) break;
        bool ok;
        bool res = jinja_test(c, n->s, a, args, na, n, &ok);
        if (ok) r = jv_bool(c, n->flag ? !res : res);
        break;
    }
    case JN_SELECT: {
        jv *t = jinja_eval(c, n->b, env);
        if (t) r = jv_truthy(t) ? jinja_eval(c, n->a, env) : jv_new(c, JV_UNDEF);
        break;
    }
    case JN_TERNARY: {
        jv *t = jinja_eval(c, n->a, env);
        if (t) r = jinja_eval(c, jv_truthy(t) ? n->b : n->c, env);
        break;
    }
    case JN_IF: {
        jv *t = jinja_eval(c, n->a, env);
        if (t) r = jv_truthy(t) ? eval_block(c, n->list, n->n, env) : eval_block(c, n->list2, n->n2, env);
        break;
    }
    case JN_FOR: r = eval_for(c, n, env); break;
    case JN_SET: r = eval_set(c, n, env); break;
    case JN_MACRO: {
        jv *f = jv_new(c, JV_FUNC);
        if (f) {
            f->macro = n;
            if (jenv_set(c, env, n->s, n->slen, f)) r = jv_new(c, JV_NULL);
        }
        break;
    }
    case JN_CALLSTMT: r = eval_callstmt(c, n, env); break;
    case JN_FILTERSTMT: {
        jv *body = eval_block(c, n->list, n->n, env);
        if (body) r = jinja_filter(c, body, n->b, env);
        break;
    }
    case JN_BREAK: case JN_CONTINUE:
        c->ctrl = n->kind == JN_BREAK ? 1 : 2;
        r = jv_new(c, JV_NULL);
        break;
    case JN_COMMENT: r = jv_new(c, JV_NULL); break;
    default: r = jfail(c, n, "this expression cannot be evaluated here");
    }
    c->depth--;
    if (!r && !c->failed) jfail(c, n, "evaluation failed");
    return c->failed ? NULL : r;
}

int zt_jinja_render(const zt_jinja *t, const cJSON *vars, char **out, size_t *len, zt_error *err) {
    *out = NULL;
    if (len) *len = 0;
    if (vars && !cJSON_IsObject(vars)) return zt_error_set(err, ZT_ERR_DATA, "%s: the variables must be a JSON object", t->name);
    jarena ar = {.cap_total = (size_t)256 << 20}; /* the values of one render */
    zt_error local = {0};
    if (!err) err = &local;
    jctx c = {.t = t, .ar = &ar, .err = err};
    jenv *g = jenv_new(&c, NULL);
    int rc = ZT_OK;
    if (!g || !jinja_set_globals(&c, g)) goto fail;
    for (const cJSON *e = vars ? vars->child : NULL; e; e = e->next) {
        if (!e->string) continue;
        size_t kl = strlen(e->string);
        if (jenv_get(g, e->string, kl)) {
            jfail(&c, NULL, "Variable already declared: %s (a template global)", e->string);
            goto fail;
        }
        if (!jenv_set(&c, g, e->string, kl, jv_from_json(&c, e))) goto fail;
    }
    jv *r = jinja_eval(&c, t->program, g);
    if (!r) goto fail;
    if (c.ctrl) {
        jfail(&c, t->program, "{%% break %%} or {%% continue %%} outside a loop");
        goto fail;
    }
    *out = malloc(r->len + 1);
    if (!*out) {
        rc = zt_error_set(err, ZT_ERR_NOMEM, "%s: no memory for %zu rendered bytes", t->name, r->len);
        goto done;
    }
    memcpy(*out, r->s, r->len + 1);
    if (len) *len = r->len;
    goto done;
fail:
    rc = err->code ? err->code : zt_error_set(err, ZT_ERR_DATA, "%s: the render failed", t->name);
done:
    jarena_free(&ar);
    return rc;
}
