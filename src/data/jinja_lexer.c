/* jinja_lexer.c - template source to tokens, as @huggingface/jinja's lexer does it: first its
 * preprocessing (the one trailing newline dropped; lstrip_blocks and trim_blocks, which
 * transformers and the package both turn on; `{% generation %}` / `{% endgeneration %}` removed
 * with the whitespace around them unless `-` keeps it... as the package's regular expressions do),
 * then text, `{{ }}`, `{% %}`, `{# #}` with `-` whitespace control, and the tokens inside tags.
 * Every token keeps the offset of its first byte in the original source (the preprocessing keeps
 * a map), so errors name the line and column the author sees. */
#include "data/jinja_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A text with, for each byte, its offset in the original source. */
typedef struct pptext {
    char *s;
    size_t *m;
    size_t n;
} pptext;

static bool pp_alloc(pptext *o, size_t n) {
    o->s = malloc(n + 1);
    o->m = malloc((n + 1) * sizeof *o->m);
    o->n = 0;
    return o->s && o->m;
}
static void pp_free(pptext *p) {
    free(p->s);
    free(p->m);
    p->s = NULL;
    p->m = NULL;
}
static void pp_put(pptext *o, const pptext *in, size_t i) {
    o->s[o->n] = in->s[i];
    o->m[o->n++] = in->m[i];
}

/* JavaScript's \s at s[i] (UTF-8): its byte length in *clen. */
bool jinja_is_space(const char *s, size_t n, size_t i, size_t *clen) {
    unsigned char c = (unsigned char)s[i];
    *clen = 1;
    if (c == ' ' || (c >= 9 && c <= 13)) return true;
    if (c < 0x80) return false;
    unsigned cp = 0;
    size_t l = 0;
    if (c == 0xC2 && i + 1 < n) cp = 0x80 | ((unsigned char)s[i + 1] & 0x3F), l = 2;
    else if (c == 0xE1 || c == 0xE2 || c == 0xE3) {
        if (i + 2 >= n) return false;
        cp = ((c & 0x0Fu) << 12) | (((unsigned char)s[i + 1] & 0x3Fu) << 6) | ((unsigned char)s[i + 2] & 0x3Fu);
        l = 3;
    } else if (c == 0xEF && i + 2 < n) {
        cp = ((c & 0x0Fu) << 12) | (((unsigned char)s[i + 1] & 0x3Fu) << 6) | ((unsigned char)s[i + 2] & 0x3Fu);
        l = 3;
    }
    if (cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
        cp == 0x202F || cp == 0x205F || cp == 0x3000 || cp == 0xFEFF) {
        *clen = l;
        return true;
    }
    return false;
}

/* JavaScript's line terminators (where the m flag's ^ matches after): \n \r U+2028 U+2029. */
static bool line_start(const pptext *p, size_t i) {
    if (i == 0) return true;
    char c = p->s[i - 1];
    if (c == '\n' || c == '\r') return true;
    return i >= 3 && (unsigned char)p->s[i - 3] == 0xE2 && (unsigned char)p->s[i - 2] == 0x80 &&
           ((unsigned char)p->s[i - 1] == 0xA8 || (unsigned char)p->s[i - 1] == 0xA9);
}

/* /^[ \t]*({[#%-])/gm -> "$1" */
static bool pp_lstrip(const pptext *in, pptext *o) {
    if (!pp_alloc(o, in->n)) return false;
    for (size_t i = 0; i < in->n;) {
        if (line_start(in, i)) {
            size_t j = i;
            while (j < in->n && (in->s[j] == ' ' || in->s[j] == '\t')) j++;
            if (j + 1 < in->n && in->s[j] == '{' && (in->s[j + 1] == '#' || in->s[j + 1] == '%' || in->s[j + 1] == '-')) {
                pp_put(o, in, j);
                pp_put(o, in, j + 1);
                i = j + 2;
                continue;
            }
        }
        pp_put(o, in, i++);
    }
    return true;
}

/* /([#%-]})\n/g -> "$1" */
static bool pp_trim(const pptext *in, pptext *o) {
    if (!pp_alloc(o, in->n)) return false;
    for (size_t i = 0; i < in->n;) {
        char c = in->s[i];
        if ((c == '#' || c == '%' || c == '-') && i + 2 < in->n && in->s[i + 1] == '}' && in->s[i + 2] == '\n') {
            pp_put(o, in, i);
            pp_put(o, in, i + 1);
            i += 3;
            continue;
        }
        pp_put(o, in, i++);
    }
    return true;
}

static size_t skip_spaces(const pptext *p, size_t i) {
    size_t l;
    while (i < p->n && jinja_is_space(p->s, p->n, i, &l)) i += l;
    return i;
}

/* Does a generation tag start at i ("{%" "-"? \s* "end"? "generation" \s* "-"? "%}")? Its end
 * in *end, the two '-' in *lstrip / *rstrip. */
static bool generation_tag(const pptext *p, size_t i, size_t *end, bool *lstrip, bool *rstrip) {
    if (i + 1 >= p->n || p->s[i] != '{' || p->s[i + 1] != '%') return false;
    size_t j = i + 2;
    *lstrip = j < p->n && p->s[j] == '-';
    if (*lstrip) j++;
    j = skip_spaces(p, j);
    if (j + 3 <= p->n && !memcmp(p->s + j, "end", 3) && j + 13 <= p->n && !memcmp(p->s + j + 3, "generation", 10)) j += 3;
    if (j + 10 > p->n || memcmp(p->s + j, "generation", 10)) return false;
    j = skip_spaces(p, j + 10);
    *rstrip = j < p->n && p->s[j] == '-';
    if (*rstrip) j++;
    if (j + 1 >= p->n || p->s[j] != '%' || p->s[j + 1] != '}') return false;
    *end = j + 2;
    return true;
}

/* /(\s*){%(-?)\s*(?:end)?generation\s*(-?)%}(\s*)/gs -> (lstrip ? "" : $1) + (rstrip ? "" : $4) */
static bool pp_generation(const pptext *in, pptext *o) {
    if (!pp_alloc(o, in->n)) return false;
    for (size_t i = 0; i < in->n;) {
        size_t ws_end = skip_spaces(in, i), end;
        bool ls, rs;
        if (generation_tag(in, ws_end, &end, &ls, &rs)) {
            if (!ls)
                for (size_t k = i; k < ws_end; k++) pp_put(o, in, k);
            size_t after = skip_spaces(in, end);
            if (!rs)
                for (size_t k = end; k < after; k++) pp_put(o, in, k);
            i = after;
            continue;
        }
        if (ws_end > i) { /* whitespace not before a tag: a later start in it ends at the same place */
            for (size_t k = i; k < ws_end; k++) pp_put(o, in, k);
            i = ws_end;
            continue;
        }
        pp_put(o, in, i++);
    }
    return true;
}

/* ---- the tokenizer proper */

typedef struct lexer {
    zt_jinja *t;
    pptext p;
    size_t i;
    jtok *toks;
    int n, cap;
    zt_error *err;
} lexer;

static int lex_fail(lexer *L, size_t i, const char *what) {
    char where[512];
    size_t pos = i < L->p.n ? L->p.m[i] : L->t->src_len;
    jinja_where(L->t, pos, where, sizeof where);
    return zt_error_set(L->err, ZT_ERR_DATA, "%s: %s", where, what);
}

static int push(lexer *L, jtok_type type, const char *s, size_t len, size_t at) {
    if (L->n == L->cap) {
        int nc = L->cap ? L->cap * 2 : 256;
        jtok *nt = realloc(L->toks, (size_t)nc * sizeof *nt);
        if (!nt) return zt_error_set(L->err, ZT_ERR_NOMEM, "no memory for %d template tokens", nc);
        L->toks = nt;
        L->cap = nc;
    }
    char *copy = jarena_strdup(&L->t->arena, s, len);
    if (!copy) return zt_error_set(L->err, ZT_ERR_NOMEM, "no memory for the template's tokens");
    L->toks[L->n++] = (jtok){type, copy, len, at < L->p.n ? L->p.m[at] : L->t->src_len};
    return ZT_OK;
}

static bool is_digit(char c) { return c >= '0' && c <= '9'; }
static bool is_word(char c) { return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }

static void put_utf8(jbuf *b, unsigned cp) {
    char u[4];
    if (cp < 0x80) jbuf_addc(b, (char)cp);
    else if (cp < 0x800) {
        u[0] = (char)(0xC0 | (cp >> 6)), u[1] = (char)(0x80 | (cp & 0x3F));
        jbuf_add(b, u, 2);
    } else {
        u[0] = (char)(0xE0 | (cp >> 12)), u[1] = (char)(0x80 | ((cp >> 6) & 0x3F)), u[2] = (char)(0x80 | (cp & 0x3F));
        jbuf_add(b, u, 3);
    }
}

/* A quoted string from L->i (the opening quote): escapes resolved into b. */
static int lex_string(lexer *L, jbuf *b) {
    char q = L->p.s[L->i];
    size_t start = L->i++;
    for (;;) {
        if (L->i >= L->p.n) return lex_fail(L, start, "unterminated string literal (no closing quote)");
        char c = L->p.s[L->i];
        if (c == q) break;
        if (c != '\\') {
            jbuf_addc(b, c);
            L->i++;
            continue;
        }
        if (++L->i >= L->p.n) return lex_fail(L, start, "unterminated string literal (ends in a backslash)");
        char e = L->p.s[L->i++];
        if (e == 'x' || e == 'u') {
            size_t len = e == 'x' ? 2 : 4;
            unsigned cp = 0;
            for (size_t k = 0; k < len; k++) {
                char h = L->i + k < L->p.n ? L->p.s[L->i + k] : 0;
                int d = is_digit(h) ? h - '0' : (h >= 'a' && h <= 'f') ? h - 'a' + 10 : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1;
                if (d < 0) return lex_fail(L, L->i - 2, "invalid hexadecimal escape sequence in a string");
                cp = cp * 16 + (unsigned)d;
            }
            L->i += len;
            put_utf8(b, cp);
            continue;
        }
        const char *from = "ntrbfv'\"\\", *to = "\n\t\r\b\f\v'\"\\";
        const char *k = e ? strchr(from, e) : NULL;
        if (!k) return lex_fail(L, L->i - 2, "unknown escape sequence in a string (\\n \\t \\r \\b \\f \\v \\' \\\" \\\\ \\x \\u)");
        jbuf_addc(b, to[k - from]);
    }
    L->i++; /* the closing quote */
    if (b->failed) return zt_error_set(L->err, ZT_ERR_NOMEM, "no memory for a string literal");
    return ZT_OK;
}

static void strip_trailing_ws(lexer *L) {
    if (L->n == 0 || L->toks[L->n - 1].type != JT_TEXT) return;
    jtok *t = &L->toks[L->n - 1];
    size_t n = t->len;
    /* JavaScript's trimEnd: back over whitespace characters */
    for (;;) {
        size_t k = n, l = 0;
        if (k == 0) break;
        size_t back = k - 1;
        while (back > 0 && ((unsigned char)t->s[back] & 0xC0) == 0x80 && k - back < 4) back--;
        if (jinja_is_space(t->s, n, back, &l) && back + l == n) n = back;
        else break;
    }
    ((char *)t->s)[n] = 0;
    t->len = n;
    if (n == 0) L->n--;
}

static void skip_leading_ws(lexer *L) { L->i = skip_spaces(&L->p, L->i); }

static int lex(lexer *L) {
    const pptext *p = &L->p;
    int rc = ZT_OK, curly = 0;
#define AT(k) (L->i + (k) < p->n ? p->s[L->i + (k)] : 0)
#define STARTS(lit) (L->i + sizeof(lit) - 1 <= p->n && !memcmp(p->s + L->i, lit, sizeof(lit) - 1))
    while (L->i < p->n && !rc) {
        jtok_type last = L->n ? L->toks[L->n - 1].type : JT_CLOSE_STMT;
        if (last == JT_CLOSE_STMT || last == JT_CLOSE_EXPR || last == JT_COMMENT) {
            size_t s = L->i;
            while (L->i < p->n && !(AT(0) == '{' && (AT(1) == '%' || AT(1) == '{' || AT(1) == '#'))) L->i++;
            if (L->i > s) {
                rc = push(L, JT_TEXT, p->s + s, L->i - s, s);
                continue;
            }
        }
        if (AT(0) == '{' && AT(1) == '#') {
            size_t s = L->i;
            L->i += 2;
            bool strip_before = AT(0) == '-';
            if (strip_before) L->i++;
            size_t cs = L->i;
            while (AT(0) != '#' || AT(1) != '}') {
                if (L->i + 2 >= p->n) return lex_fail(L, s, "unclosed comment: {# without #}");
                L->i++;
            }
            size_t ce = L->i;
            bool strip_after = ce > cs && p->s[ce - 1] == '-';
            if (strip_after) ce--;
            if (strip_before) strip_trailing_ws(L);
            rc = push(L, JT_COMMENT, p->s + cs, ce - cs, s);
            L->i += 2;
            if (strip_after) skip_leading_ws(L);
            continue;
        }
        if (STARTS("{%-")) {
            strip_trailing_ws(L);
            rc = push(L, JT_OPEN_STMT, "{%", 2, L->i);
            L->i += 3;
            continue;
        }
        if (STARTS("{{-")) {
            strip_trailing_ws(L);
            rc = push(L, JT_OPEN_EXPR, "{{", 2, L->i);
            curly = 0;
            L->i += 3;
            continue;
        }
        skip_leading_ws(L);
        if (L->i >= p->n) return lex_fail(L, L->i, "the template ends inside a tag (no closing %} or }})");
        if (STARTS("-%}")) {
            rc = push(L, JT_CLOSE_STMT, "%}", 2, L->i);
            L->i += 3;
            skip_leading_ws(L);
            continue;
        }
        if (STARTS("-}}")) {
            rc = push(L, JT_CLOSE_EXPR, "}}", 2, L->i);
            L->i += 3;
            skip_leading_ws(L);
            continue;
        }
        char ch = AT(0);
        if (ch == '-' || ch == '+') {
            if (L->n == 0 || L->toks[L->n - 1].type == JT_TEXT)
                return lex_fail(L, L->i, ch == '-' ? "unexpected character '-'" : "unexpected character '+'");
            jtok_type lt = L->toks[L->n - 1].type;
            if (lt != JT_IDENT && lt != JT_NUMBER && lt != JT_STRING && lt != JT_RPAREN && lt != JT_RBRACKET) {
                size_t s = L->i++;
                while (L->i < p->n && is_digit(AT(0))) L->i++;
                bool num = L->i > s + 1;
                if (num && AT(0) == '.' && is_digit(AT(1))) {
                    L->i++;
                    while (L->i < p->n && is_digit(AT(0))) L->i++;
                }
                if (num && L->i >= p->n) return lex_fail(L, s, "the template ends inside a number");
                rc = push(L, num ? JT_NUMBER : JT_UNARY, p->s + s, L->i - s, s);
                continue;
            }
        }
        static const struct { const char *seq; jtok_type type; } TABLE[] = {
            {"{%", JT_OPEN_STMT}, {"%}", JT_CLOSE_STMT}, {"{{", JT_OPEN_EXPR}, {"}}", JT_CLOSE_EXPR},
            {"(", JT_LPAREN}, {")", JT_RPAREN}, {"{", JT_LBRACE}, {"}", JT_RBRACE}, {"[", JT_LBRACKET},
            {"]", JT_RBRACKET}, {",", JT_COMMA}, {".", JT_DOT}, {":", JT_COLON}, {"|", JT_PIPE},
            {"<=", JT_CMP}, {">=", JT_CMP}, {"==", JT_CMP}, {"!=", JT_CMP}, {"<", JT_CMP}, {">", JT_CMP},
            {"+", JT_ADD}, {"-", JT_ADD}, {"~", JT_ADD}, {"**", JT_POW}, {"*", JT_MUL}, {"//", JT_MUL},
            {"/", JT_MUL}, {"%", JT_MUL}, {"=", JT_EQUALS},
        };
        bool matched = false;
        for (size_t k = 0; k < sizeof TABLE / sizeof *TABLE; k++) {
            size_t l = strlen(TABLE[k].seq);
            if (TABLE[k].type == JT_CLOSE_EXPR && curly > 0) continue;
            if (L->i + l <= p->n && !memcmp(p->s + L->i, TABLE[k].seq, l)) {
                rc = push(L, TABLE[k].type, TABLE[k].seq, l, L->i);
                if (TABLE[k].type == JT_OPEN_EXPR) curly = 0;
                else if (TABLE[k].type == JT_LBRACE) curly++;
                else if (TABLE[k].type == JT_RBRACE) curly--;
                L->i += l;
                matched = true;
                break;
            }
        }
        if (matched) continue;
        if (ch == '\'' || ch == '"') {
            jbuf b = {0};
            size_t s = L->i;
            rc = lex_string(L, &b);
            if (!rc) rc = push(L, JT_STRING, b.p ? b.p : "", b.n, s);
            free(b.p);
            continue;
        }
        if (is_digit(ch)) {
            size_t s = L->i;
            while (L->i < p->n && is_digit(AT(0))) L->i++;
            if ((L->n == 0 || L->toks[L->n - 1].type != JT_DOT) && AT(0) == '.' && is_digit(AT(1))) {
                L->i++;
                while (L->i < p->n && is_digit(AT(0))) L->i++;
            }
            if (L->i >= p->n) return lex_fail(L, s, "the template ends inside a number");
            rc = push(L, JT_NUMBER, p->s + s, L->i - s, s);
            continue;
        }
        if (is_word(ch)) {
            size_t s = L->i;
            while (L->i < p->n && is_word(AT(0))) L->i++;
            if (L->i >= p->n) return lex_fail(L, s, "the template ends inside a name (no closing %} or }})");
            rc = push(L, JT_IDENT, p->s + s, L->i - s, s);
            continue;
        }
        char what[64];
        if ((unsigned char)ch >= 0x20 && (unsigned char)ch < 0x7f) snprintf(what, sizeof what, "unexpected character '%c'", ch);
        else snprintf(what, sizeof what, "unexpected byte 0x%02x", (unsigned char)ch);
        return lex_fail(L, L->i, what);
    }
#undef AT
#undef STARTS
    return rc;
}

int jinja_tokenize(zt_jinja *t, jtok **toks, int *n_toks, zt_error *err) {
    *toks = NULL;
    *n_toks = 0;
    pptext in = {0}, a = {0}, b = {0}, c = {0};
    int rc = ZT_OK;
    if (!pp_alloc(&in, t->src_len)) {
        rc = zt_error_set(err, ZT_ERR_NOMEM, "no memory for a template of %zu bytes", t->src_len);
        goto done;
    }
    memcpy(in.s, t->src, t->src_len);
    for (size_t i = 0; i < t->src_len; i++) in.m[i] = i;
    in.n = t->src_len;
    if (in.n && in.s[in.n - 1] == '\n') in.n--;
    if (!pp_lstrip(&in, &a) || !pp_trim(&a, &b) || !pp_generation(&b, &c)) {
        rc = zt_error_set(err, ZT_ERR_NOMEM, "no memory for a template of %zu bytes", t->src_len);
        goto done;
    }
    lexer L = {.t = t, .p = c, .err = err};
    rc = lex(&L);
    if (rc) free(L.toks);
    else {
        *toks = L.toks;
        *n_toks = L.n;
    }
done:
    pp_free(&in);
    pp_free(&a);
    pp_free(&b);
    pp_free(&c);
    return rc;
}
