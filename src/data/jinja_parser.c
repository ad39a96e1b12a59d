/* jinja_parser.c - tokens to the syntax tree (jinja_internal.h's jnode), by @huggingface/jinja's
 * grammar and precedence: ternary / `x if c` select < or < and < not < comparisons and `in` <
 * + - ~ < * / // % < ** (left-associative) < `is` tests < `|` filters < unary +/- < calls,
 * members, subscripts and slices < literals, names, parentheses (tuples), lists, dicts.
 * Statements: set (and its block form), if/elif/else, for (tuple targets, `if` filter, else),
 * macro, call (with caller arguments), filter blocks, break, continue, comments.
 * Also zt_jinja_parse / zt_jinja_free and the line/column of an offset. A syntax error is
 * ZT_ERR_DATA naming NAME:LINE:COL and what was expected; nesting deeper than JINJA_MAX_DEPTH is
 * refused (no stack overflow on hostile input). */
#include "data/jinja_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void jinja_where(const zt_jinja *t, size_t pos, char *buf, size_t cap) {
    int line = 1, col = 1;
    for (size_t i = 0; i < pos && i < t->src_len; i++) {
        if (t->src[i] == '\n') line++, col = 1;
        else if (((unsigned char)t->src[i] & 0xC0) != 0x80) col++;
    }
    snprintf(buf, cap, "%s:%d:%d", t->name, line, col);
}

typedef struct parser {
    zt_jinja *t;
    const jtok *tk;
    int n, cur, depth;
    zt_error *err;
    bool failed;
} parser;

static jnode *pfail(parser *P, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static jnode *pfail(parser *P, const char *fmt, ...) {
    if (P->failed) return NULL;
    P->failed = true;
    char where[512], msg[600];
    size_t pos = P->cur < P->n ? P->tk[P->cur].pos : P->t->src_len;
    jinja_where(P->t, pos, where, sizeof where);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (P->cur >= P->n) zt_error_set(P->err, ZT_ERR_DATA, "%s: unexpected end of template: %s", where, msg);
    else zt_error_set(P->err, ZT_ERR_DATA, "%s: %s", where, msg);
    return NULL;
}

static const char *TOKNAME[] = {"text", "number", "string", "name", "'='", "'('", "')'", "'{%'", "'%}'", "'{{'",
                                "'}}'", "'['", "']'", "'{'", "'}'", "','", "'.'", "':'", "'|'", "operator",
                                "operator", "'**'", "comparison", "unary operator", "comment"};

static jnode *node(parser *P, jnode_kind k, size_t pos) {
    jnode *n = jarena_alloc(&P->t->arena, sizeof *n);
    if (!n) {
        if (!P->failed) zt_error_set(P->err, ZT_ERR_NOMEM, "no memory for the template's syntax tree");
        P->failed = true;
        return NULL;
    }
    n->kind = k;
    n->pos = pos;
    return n;
}

static size_t here(parser *P) { return P->cur < P->n ? P->tk[P->cur].pos : P->t->src_len; }
static bool is(parser *P, jtok_type t) { return P->cur < P->n && P->tk[P->cur].type == t; }
static bool is_ident(parser *P, int off, const char *name) {
    int i = P->cur + off;
    return i < P->n && P->tk[i].type == JT_IDENT && !strcmp(P->tk[i].s, name);
}
static bool is_stmt(parser *P, const char *a, const char *b, const char *c) {
    if (!is(P, JT_OPEN_STMT) || P->cur + 1 >= P->n || P->tk[P->cur + 1].type != JT_IDENT) return false;
    const char *s = P->tk[P->cur + 1].s;
    return (a && !strcmp(s, a)) || (b && !strcmp(s, b)) || (c && !strcmp(s, c));
}
static bool expect(parser *P, jtok_type t, const char *what) {
    if (P->failed) return false;
    if (!is(P, t)) {
        pfail(P, "expected %s, found %s", what, P->cur < P->n ? TOKNAME[P->tk[P->cur].type] : "nothing");
        return false;
    }
    P->cur++;
    return true;
}
static bool expect_ident(parser *P, const char *name) {
    if (P->failed) return false;
    if (!is_ident(P, 0, name)) {
        pfail(P, "expected '%s'", name);
        return false;
    }
    P->cur++;
    return true;
}

/* A list of nodes grown in a malloc'd array, then moved into the arena. */
typedef struct nlist {
    jnode **v;
    int n, cap;
} nlist;
static bool nl_push(parser *P, nlist *l, jnode *x) {
    if (!x) return false;
    if (l->n == l->cap) {
        int nc = l->cap ? l->cap * 2 : 8;
        jnode **nv = realloc(l->v, (size_t)nc * sizeof *nv);
        if (!nv) {
            pfail(P, "no memory for the syntax tree");
            P->err->code = ZT_ERR_NOMEM;
            return false;
        }
        l->v = nv;
        l->cap = nc;
    }
    l->v[l->n++] = x;
    return true;
}
static jnode **nl_done(parser *P, nlist *l, int *n) {
    *n = l->n;
    jnode **out = NULL;
    if (l->n) {
        out = jarena_alloc(&P->t->arena, (size_t)l->n * sizeof *out);
        if (out) memcpy(out, l->v, (size_t)l->n * sizeof *out);
        else if (!P->failed) {
            pfail(P, "no memory for the syntax tree");
            P->err->code = ZT_ERR_NOMEM;
        }
    }
    free(l->v);
    l->v = NULL;
    return out;
}

static jnode *parse_any(parser *P);
static jnode *parse_expr(parser *P);
static jnode *parse_primary(parser *P);

/* body statements until one of the named statements opens */
static bool parse_body(parser *P, nlist *l, const char *a, const char *b, const char *c, const char *opener) {
    while (!P->failed && !is_stmt(P, a, b, c)) {
        if (P->cur >= P->n) {
            pfail(P, "'{%% %s %%}' is never closed (expected {%% %s %%})", opener, a);
            return false;
        }
        if (!nl_push(P, l, parse_any(P))) return false;
    }
    return !P->failed;
}

static jnode *parse_args_list(parser *P, bool params, nlist *out) {
    bool saw_kw = false, saw_spread = false;
    while (!P->failed && !is(P, JT_RPAREN)) {
        if (P->cur >= P->n) return pfail(P, "unclosed '(' of an argument list");
        bool kwspread = is(P, JT_POW), spread = is(P, JT_MUL) && !strcmp(P->tk[P->cur].s, "*");
        if (params && (kwspread || spread)) return pfail(P, "argument unpacking is not allowed in parameter declarations");
        size_t pos = here(P);
        if (kwspread) {
            P->cur++;
            jnode *k = node(P, JN_KWSPREAD, pos);
            if (!k || !(k->a = parse_expr(P)) || !nl_push(P, out, k)) return NULL;
            if (is(P, JT_COMMA)) P->cur++;
            if (!is(P, JT_RPAREN)) return pfail(P, "expected ')': `**` must be applied to the final argument");
            break;
        }
        jnode *arg;
        if (spread) {
            if (saw_spread) return pfail(P, "only one `*` argument unpacking is allowed");
            saw_spread = true;
            P->cur++;
            arg = node(P, JN_SPREAD, pos);
            if (!arg || !(arg->a = parse_expr(P))) return NULL;
        } else {
            arg = parse_expr(P);
            if (!arg) return NULL;
            if (is(P, JT_EQUALS)) {
                P->cur++;
                if (arg->kind != JN_IDENT)
                    return pfail(P, params ? "expected a name for a parameter declaration" : "expected a name for a keyword argument");
                jnode *kw = node(P, JN_KWARG, arg->pos);
                if (!kw) return NULL;
                kw->s = arg->s, kw->slen = arg->slen;
                if (!(kw->a = parse_expr(P))) return NULL;
                arg = kw;
            }
            if (params) {
                if (arg->kind != JN_IDENT && arg->kind != JN_KWARG) return pfail(P, "expected a name for a parameter declaration");
                for (int i = 0; i < out->n; i++)
                    if (!strcmp(out->v[i]->s, arg->s)) return pfail(P, "duplicate parameter name: %s", arg->s);
            }
            if (arg->kind == JN_KWARG) saw_kw = true;
            else if (saw_kw)
                return pfail(P, params ? "non-default argument follows default argument"
                                       : "positional arguments must come before keyword arguments");
            else if (saw_spread) return pfail(P, "positional arguments must not follow `*` argument unpacking");
        }
        if (!nl_push(P, out, arg)) return NULL;
        if (is(P, JT_COMMA)) P->cur++;
    }
    return P->failed ? NULL : (jnode *)1;
}

static jnode **parse_args(parser *P, bool params, int *n) {
    nlist l = {0};
    *n = 0;
    if (!expect(P, JT_LPAREN, "'(' opening an argument list") || !parse_args_list(P, params, &l) ||
        !expect(P, JT_RPAREN, "')' closing an argument list")) {
        free(l.v);
        return NULL;
    }
    return nl_done(P, &l, n);
}

static jnode *parse_call(parser *P, jnode *callee);

static jnode *parse_member(parser *P, jnode *obj) {
    while (obj && !P->failed && (is(P, JT_DOT) || is(P, JT_LBRACKET))) {
        bool computed = is(P, JT_LBRACKET);
        size_t pos = here(P);
        P->cur++;
        jnode *m = node(P, JN_MEMBER, pos);
        if (!m) return NULL;
        m->a = obj;
        m->flag = computed;
        if (computed) {
            jnode *sl[3] = {0};
            int ns = 0;
            bool slice = false;
            while (!P->failed && !is(P, JT_RBRACKET)) {
                if (P->cur >= P->n) return pfail(P, "unclosed '['");
                if (ns == 3) return pfail(P, "expected 0-3 arguments for a slice");
                if (is(P, JT_COLON)) {
                    sl[ns++] = NULL;
                    P->cur++;
                    slice = true;
                } else {
                    if (!(sl[ns++] = parse_expr(P))) return NULL;
                    if (is(P, JT_COLON)) {
                        P->cur++;
                        slice = true;
                    }
                }
            }
            if (ns == 0) return pfail(P, "expected an index or a slice inside '[]'");
            if (slice) {
                jnode *s = node(P, JN_SLICE, pos);
                if (!s) return NULL;
                s->a = sl[0], s->b = ns > 1 ? sl[1] : NULL, s->c = ns > 2 ? sl[2] : NULL;
                m->b = s;
            } else m->b = sl[0];
            if (!expect(P, JT_RBRACKET, "']'")) return NULL;
        } else {
            jnode *prop = parse_primary(P);
            if (!prop) return NULL;
            if (prop->kind != JN_IDENT && prop->kind != JN_INT) return pfail(P, "expected a name or an integer after '.'");
            m->b = prop;
        }
        obj = m;
    }
    return obj;
}

static jnode *parse_call(parser *P, jnode *callee) {
    size_t pos = here(P);
    jnode *c = node(P, JN_CALL, pos);
    if (!c) return NULL;
    c->a = callee;
    c->list = parse_args(P, false, &c->n);
    if (P->failed) return NULL;
    jnode *e = parse_member(P, c);
    if (e && is(P, JT_LPAREN)) e = parse_call(P, e);
    return e;
}

static jnode *parse_seq(parser *P, bool primary) {
    size_t pos = here(P);
    jnode *first = primary ? parse_primary(P) : parse_expr(P);
    if (!first || !is(P, JT_COMMA)) return first;
    nlist l = {0};
    nl_push(P, &l, first);
    while (!P->failed && is(P, JT_COMMA)) {
        P->cur++;
        if (!nl_push(P, &l, primary ? parse_primary(P) : parse_expr(P))) break;
        if (!is(P, JT_COMMA)) break;
    }
    jnode *t = P->failed ? NULL : node(P, JN_TUPLE, pos);
    if (!t) {
        free(l.v);
        return NULL;
    }
    t->list = nl_done(P, &l, &t->n);
    return P->failed ? NULL : t;
}

static jnode *parse_primary(parser *P) {
    if (P->failed) return NULL;
    if (P->cur >= P->n) return pfail(P, "expected an expression");
    if (++P->depth > JINJA_MAX_DEPTH) return pfail(P, "expressions nested deeper than %d", JINJA_MAX_DEPTH);
    const jtok *t = &P->tk[P->cur++];
    jnode *r = NULL;
    switch (t->type) {
    case JT_NUMBER:
        if ((r = node(P, memchr(t->s, '.', t->len) ? JN_FLOAT : JN_INT, t->pos))) r->num = strtod(t->s, NULL);
        break;
    case JT_STRING: {
        jbuf b = {0};
        jbuf_add(&b, t->s, t->len);
        while (is(P, JT_STRING)) {
            jbuf_add(&b, P->tk[P->cur].s, P->tk[P->cur].len);
            P->cur++;
        }
        if ((r = node(P, JN_STR, t->pos))) {
            r->s = jarena_strdup(&P->t->arena, b.p ? b.p : "", b.n);
            r->slen = b.n;
            if (!r->s || b.failed) r = pfail(P, "no memory for a string literal");
        }
        free(b.p);
        break;
    }
    case JT_IDENT:
        if ((r = node(P, JN_IDENT, t->pos))) r->s = t->s, r->slen = t->len;
        break;
    case JT_LPAREN:
        r = parse_seq(P, false);
        if (r && !expect(P, JT_RPAREN, "')'")) r = NULL;
        break;
    case JT_LBRACKET: {
        nlist l = {0};
        while (!P->failed && !is(P, JT_RBRACKET)) {
            if (P->cur >= P->n) {
                pfail(P, "unclosed '['");
                break;
            }
            if (!nl_push(P, &l, parse_expr(P))) break;
            if (is(P, JT_COMMA)) P->cur++;
        }
        P->cur++;
        if (!P->failed && (r = node(P, JN_ARRAY, t->pos))) r->list = nl_done(P, &l, &r->n);
        else free(l.v);
        break;
    }
    case JT_LBRACE: {
        nlist k = {0}, v = {0};
        while (!P->failed && !is(P, JT_RBRACE)) {
            if (P->cur >= P->n) {
                pfail(P, "unclosed '{'");
                break;
            }
            if (!nl_push(P, &k, parse_expr(P))) break;
            if (!expect(P, JT_COLON, "':' between a key and its value")) break;
            if (!nl_push(P, &v, parse_expr(P))) break;
            if (is(P, JT_COMMA)) P->cur++;
        }
        P->cur++;
        if (!P->failed && (r = node(P, JN_OBJECT, t->pos))) {
            r->list = nl_done(P, &k, &r->n);
            r->list2 = nl_done(P, &v, &r->n2);
        } else {
            free(k.v);
            free(v.v);
        }
        break;
    }
    default:
        P->cur--;
        r = pfail(P, "unexpected %s '%s'", TOKNAME[t->type], t->s);
    }
    P->depth--;
    return P->failed ? NULL : r;
}

static jnode *parse_unary_sign(parser *P) {
    if (P->cur < P->n && (P->tk[P->cur].type == JT_UNARY || P->tk[P->cur].type == JT_ADD) &&
        (!strcmp(P->tk[P->cur].s, "-") || !strcmp(P->tk[P->cur].s, "+"))) {
        if (++P->depth > JINJA_MAX_DEPTH) return pfail(P, "expressions nested deeper than %d", JINJA_MAX_DEPTH);
        jnode *u = node(P, JN_UNARY, here(P));
        if (!u) return NULL;
        u->s = P->tk[P->cur].s, u->slen = 1;
        P->cur++;
        u->a = parse_unary_sign(P);
        P->depth--;
        return u->a ? u : NULL;
    }
    jnode *m = parse_member(P, parse_primary(P));
    if (m && is(P, JT_LPAREN)) m = parse_call(P, m);
    return m;
}

static jnode *parse_filter_expr(parser *P) {
    jnode *operand = parse_unary_sign(P);
    while (operand && is(P, JT_PIPE)) {
        size_t pos = here(P);
        P->cur++;
        jnode *f = parse_primary(P);
        if (!f) return NULL;
        if (f->kind != JN_IDENT) return pfail(P, "expected a filter name after '|'");
        if (is(P, JT_LPAREN)) f = parse_call(P, f);
        if (!f) return NULL;
        jnode *fe = node(P, JN_FILTER, pos);
        if (!fe) return NULL;
        fe->a = operand, fe->b = f;
        operand = fe;
    }
    return operand;
}

static jnode *parse_test_expr(parser *P) {
    jnode *operand = parse_filter_expr(P);
    while (operand && is_ident(P, 0, "is")) {
        size_t pos = here(P);
        P->cur++;
        bool neg = is_ident(P, 0, "not");
        if (neg) P->cur++;
        jnode *name = parse_primary(P);
        if (!name) return NULL;
        if (name->kind != JN_IDENT) return pfail(P, "expected a test name after 'is'");
        jnode *t = node(P, JN_TEST, pos);
        if (!t) return NULL;
        t->a = operand, t->flag = neg, t->s = name->s, t->slen = name->slen;
        if (is(P, JT_LPAREN)) { /* divisibleby(3), equalto(x): beyond the reference */
            t->list = parse_args(P, false, &t->n);
            if (P->failed) return NULL;
        }
        operand = t;
    }
    return operand;
}

static jnode *binary(parser *P, const jtok *op, size_t pos, jnode *l, jnode *r) {
    if (!l || !r) return NULL;
    jnode *b = node(P, JN_BINARY, pos);
    if (!b) return NULL;
    b->s = op ? op->s : "not in", b->slen = strlen(b->s), b->a = l, b->b = r;
    return b;
}

/* One left-associative level: next (op next)*, op a token type or, with ident, a keyword. */
static jnode *binary_level(parser *P, jnode *(*next)(parser *), jtok_type type, const char *ident) {
    jnode *l = next(P);
    while (l && (ident ? is_ident(P, 0, ident) : is(P, type))) {
        const jtok *op = &P->tk[P->cur++];
        l = binary(P, op, op->pos, l, next(P));
    }
    return l;
}
static jnode *parse_power(parser *P) { return binary_level(P, parse_test_expr, JT_POW, NULL); }
static jnode *parse_mul(parser *P) { return binary_level(P, parse_power, JT_MUL, NULL); }
static jnode *parse_add(parser *P) { return binary_level(P, parse_mul, JT_ADD, NULL); }
static jnode *parse_cmp(parser *P) {
    jnode *l = parse_add(P);
    while (l) {
        const jtok *op;
        size_t pos = here(P);
        if (is_ident(P, 0, "not") && is_ident(P, 1, "in")) {
            op = NULL;
            P->cur += 2;
        } else if (is_ident(P, 0, "in") || is(P, JT_CMP)) op = &P->tk[P->cur++];
        else break;
        l = binary(P, op, pos, l, parse_add(P));
    }
    return l;
}
static jnode *parse_not(parser *P) {
    if (is_ident(P, 0, "not")) {
        if (++P->depth > JINJA_MAX_DEPTH) return pfail(P, "expressions nested deeper than %d", JINJA_MAX_DEPTH);
        jnode *u = node(P, JN_UNARY, here(P));
        if (!u) return NULL;
        u->s = "not", u->slen = 3;
        P->cur++;
        u->a = parse_not(P);
        P->depth--;
        return u->a ? u : NULL;
    }
    return parse_cmp(P);
}
static jnode *parse_and(parser *P) { return binary_level(P, parse_not, JT_IDENT, "and"); }
static jnode *parse_or(parser *P) { return binary_level(P, parse_and, JT_IDENT, "or"); }
static jnode *parse_expr(parser *P) {
    if (++P->depth > JINJA_MAX_DEPTH) return pfail(P, "expressions nested deeper than %d", JINJA_MAX_DEPTH);
    jnode *a = parse_or(P);
    if (a && is_ident(P, 0, "if")) {
        size_t pos = here(P);
        P->cur++;
        jnode *test = parse_or(P);
        if (!test) return NULL;
        if (is_ident(P, 0, "else")) {
            P->cur++;
            jnode *t = node(P, JN_TERNARY, pos);
            if (!t) return NULL;
            t->a = test, t->b = a;
            if (!(t->c = parse_expr(P))) return NULL;
            a = t;
        } else {
            jnode *s = node(P, JN_SELECT, pos);
            if (!s) return NULL;
            s->a = a, s->b = test;
            a = s;
        }
    }
    P->depth--;
    return P->failed ? NULL : a;
}

static jnode *parse_if(parser *P, size_t pos) {
    jnode *n = node(P, JN_IF, pos);
    if (!n || !(n->a = parse_expr(P)) || !expect(P, JT_CLOSE_STMT, "'%}' closing the if")) return NULL;
    nlist body = {0}, alt = {0};
    if (parse_body(P, &body, "endif", "elif", "else", "if")) {
        if (is_stmt(P, "elif", NULL, NULL)) {
            size_t p2 = P->tk[P->cur].pos;
            P->cur += 2;
            if (++P->depth > JINJA_MAX_DEPTH) pfail(P, "blocks nested deeper than %d", JINJA_MAX_DEPTH);
            else nl_push(P, &alt, parse_if(P, p2));
            P->depth--;
        } else if (is_stmt(P, "else", NULL, NULL)) {
            P->cur += 2;
            if (expect(P, JT_CLOSE_STMT, "'%}' after else")) parse_body(P, &alt, "endif", NULL, NULL, "if");
        }
    }
    n->list = nl_done(P, &body, &n->n);
    n->list2 = nl_done(P, &alt, &n->n2);
    return P->failed ? NULL : n;
}

/* After a block's body: the body into r, then the end tag ({% end %}). */
static void block_end(parser *P, nlist *body, jnode *r, const char *end) {
    r->list = nl_done(P, body, &r->n);
    if (P->failed) return;
    P->cur++; /* the end tag's {% */
    if (expect_ident(P, end)) expect(P, JT_CLOSE_STMT, "'%}' closing the end tag");
}

static jnode *parse_stmt(parser *P) {
    size_t pos = here(P);
    expect(P, JT_OPEN_STMT, "'{%'");
    if (P->failed) return NULL;
    if (!is(P, JT_IDENT)) return pfail(P, "expected a statement name after '{%%'");
    const char *name = P->tk[P->cur].s;
    P->cur++;
    jnode *r = NULL;
    nlist body = {0}, alt = {0};
    if (!strcmp(name, "set")) {
        r = node(P, JN_SET, pos);
        if (!r || !(r->a = parse_seq(P, false))) return NULL;
        if (is(P, JT_EQUALS)) {
            P->cur++;
            if (!(r->b = parse_seq(P, false))) return NULL;
        } else {
            if (!expect(P, JT_CLOSE_STMT, "'=' or '%}' after the set target")) return NULL;
            parse_body(P, &body, "endset", NULL, NULL, "set");
            block_end(P, &body, r, "endset");
            return P->failed ? NULL : r;
        }
        expect(P, JT_CLOSE_STMT, "'%}' closing the set");
    } else if (!strcmp(name, "if")) {
        r = parse_if(P, pos);
        if (r && expect(P, JT_OPEN_STMT, "{% endif %}")) expect_ident(P, "endif");
        expect(P, JT_CLOSE_STMT, "'%}' closing endif");
    } else if (!strcmp(name, "macro")) {
        jnode *id = parse_primary(P);
        if (!id) return NULL;
        if (id->kind != JN_IDENT) return pfail(P, "expected a name after 'macro'");
        r = node(P, JN_MACRO, pos);
        if (!r) return NULL;
        r->s = id->s, r->slen = id->slen;
        r->list2 = parse_args(P, true, &r->n2);
        if (P->failed || !expect(P, JT_CLOSE_STMT, "'%}' closing the macro's signature")) return NULL;
        parse_body(P, &body, "endmacro", NULL, NULL, "macro");
        block_end(P, &body, r, "endmacro");
    } else if (!strcmp(name, "for")) {
        r = node(P, JN_FOR, pos);
        if (!r || !(r->a = parse_seq(P, true))) return NULL;
        if (r->a->kind != JN_IDENT && r->a->kind != JN_TUPLE) return pfail(P, "expected a name or a tuple of names as the loop variable");
        if (!is_ident(P, 0, "in")) return pfail(P, "expected 'in' after the loop variable");
        P->cur++;
        if (!(r->b = parse_expr(P)) || !expect(P, JT_CLOSE_STMT, "'%}' closing the for")) return NULL;
        if (parse_body(P, &body, "endfor", "else", NULL, "for") && is_stmt(P, "else", NULL, NULL)) {
            P->cur += 2;
            if (expect(P, JT_CLOSE_STMT, "'%}' after else")) parse_body(P, &alt, "endfor", NULL, NULL, "for");
        }
        r->list2 = nl_done(P, &alt, &r->n2);
        block_end(P, &body, r, "endfor");
    } else if (!strcmp(name, "call")) {
        r = node(P, JN_CALLSTMT, pos);
        if (!r) return NULL;
        if (is(P, JT_LPAREN)) {
            r->flag = true;
            r->list2 = parse_args(P, true, &r->n2);
            if (P->failed) return NULL;
        }
        jnode *callee = parse_primary(P);
        if (!callee) return NULL;
        if (callee->kind != JN_IDENT) return pfail(P, "expected a macro name after 'call'");
        jnode *call = node(P, JN_CALL, callee->pos);
        if (!call) return NULL;
        call->a = callee;
        call->list = parse_args(P, false, &call->n);
        r->a = call;
        if (P->failed || !expect(P, JT_CLOSE_STMT, "'%}' closing the call")) return NULL;
        parse_body(P, &body, "endcall", NULL, NULL, "call");
        block_end(P, &body, r, "endcall");
    } else if (!strcmp(name, "filter")) {
        r = node(P, JN_FILTERSTMT, pos);
        if (!r || !(r->b = parse_primary(P))) return NULL;
        if (r->b->kind == JN_IDENT && is(P, JT_LPAREN)) r->b = parse_call(P, r->b);
        if (!r->b || !expect(P, JT_CLOSE_STMT, "'%}' closing the filter")) return NULL;
        parse_body(P, &body, "endfilter", NULL, NULL, "filter");
        block_end(P, &body, r, "endfilter");
    } else if (!strcmp(name, "break") || !strcmp(name, "continue")) {
        r = node(P, name[0] == 'b' ? JN_BREAK : JN_CONTINUE, pos);
        expect(P, JT_CLOSE_STMT, "'%}'");
    } else {
        P->cur--;
        return pfail(P, "unknown statement '%s' (known: set if elif else for macro call filter break continue "
                        "generation and their end tags)", name);
    }
    return P->failed ? NULL : r;
}

static jnode *parse_any(parser *P) {
    if (P->failed) return NULL;
    if (++P->depth > JINJA_MAX_DEPTH) return pfail(P, "blocks nested deeper than %d", JINJA_MAX_DEPTH);
    const jtok *t = &P->tk[P->cur];
    jnode *r = NULL;
    switch (t->type) {
    case JT_COMMENT:
        P->cur++;
        r = node(P, JN_COMMENT, t->pos);
        break;
    case JT_TEXT:
        P->cur++;
        if ((r = node(P, JN_TEXT, t->pos))) r->s = t->s, r->slen = t->len;
        break;
    case JT_OPEN_STMT:
        r = parse_stmt(P);
        break;
    case JT_OPEN_EXPR:
        P->cur++;
        r = parse_expr(P);
        if (r && !expect(P, JT_CLOSE_EXPR, "'}}' closing the expression")) r = NULL;
        break;
    default:
        r = pfail(P, "unexpected %s '%s' outside a tag", TOKNAME[t->type], t->s);
    }
    P->depth--;
    return P->failed ? NULL : r;
}

int jinja_parse_tokens(zt_jinja *t, const jtok *toks, int n_toks, zt_error *err) {
    parser P = {.t = t, .tk = toks, .n = n_toks, .err = err};
    nlist body = {0};
    jnode *prog = node(&P, JN_PROGRAM, 0);
    while (!P.failed && P.cur < P.n) nl_push(&P, &body, parse_any(&P));
    if (prog) prog->list = nl_done(&P, &body, &prog->n);
    else free(body.v);
    if (P.failed) return err->code ? err->code : ZT_ERR_DATA;
    t->program = prog;
    return ZT_OK;
}

int zt_jinja_parse(zt_jinja **out, const char *src, size_t len, const char *name, zt_error *err) {
    *out = NULL;
    zt_jinja *t = calloc(1, sizeof *t);
    if (!t) return zt_error_set(err, ZT_ERR_NOMEM, "no memory for a template");
    t->arena.cap_total = (size_t)64 << 20; /* tokens and nodes of a template */
    if (!name) name = "template";
    t->name = strdup(name);
    t->src = malloc(len + 1);
    if (!t->name || !t->src) {
        zt_jinja_free(t);
        return zt_error_set(err, ZT_ERR_NOMEM, "no memory for a template of %zu bytes", len);
    }
    if (len) memcpy(t->src, src, len);
    t->src[len] = 0;
    t->src_len = len;
    jtok *toks;
    int n;
    int rc = jinja_tokenize(t, &toks, &n, err);
    if (!rc) {
        rc = jinja_parse_tokens(t, toks, n, err);
        free(toks);
    }
    if (rc) {
        zt_jinja_free(t);
        return rc;
    }
    *out = t;
    return ZT_OK;
}

void zt_jinja_set_now(zt_jinja *t, long long unix_seconds) { t->now = unix_seconds > 0 ? unix_seconds : 0; }

void zt_jinja_free(zt_jinja *t) {
    if (!t) return;
    jarena_free(&t->arena);
    free(t->name);
    free(t->src);
    free(t);
}
