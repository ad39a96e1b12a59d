/* jinja_internal.h - what the Jinja interpreter's files share (data/jinja.h is the public face):
 * the arena every token, node and value lives in, the tokens (jinja_lexer.c), the syntax tree
 * (jinja_parser.c), the values and their conversions (jinja_value.c), the evaluator
 * (jinja_eval.c) and the filters, tests, methods and globals (jinja_filters.c).
 *
 * The semantics are @huggingface/jinja's (the npm package transformers.js renders chat templates
 * with), not Python Jinja's where the two differ: JavaScript's loose `==`, `%` keeping the
 * dividend's sign, integers and floats both IEEE doubles told apart by their type, strings
 * printed as JavaScript prints numbers. Strings are UTF-8 bytes here; length counts UTF-16 units
 * as JavaScript does, and upper/lower case map ASCII only (the one known difference). */
#ifndef ZT_JINJA_INTERNAL_H
#define ZT_JINJA_INTERNAL_H

#include "data/jinja.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- arena: bump allocation in chunks, freed all at once; capped so a template cannot take
 * the machine's memory (ZT_ERR_DATA past the cap). */
typedef struct jarena_chunk jarena_chunk;
typedef struct jarena {
    jarena_chunk *head;
    size_t used_total, cap_total;
    bool failed; /* an allocation failed (the cap or malloc) */
} jarena;
void *jarena_alloc(jarena *a, size_t n); /* zeroed; NULL on failure (a->failed set) */
char *jarena_strdup(jarena *a, const char *s, size_t n); /* NUL-terminated copy */
void jarena_free(jarena *a);

/* ---- growable byte buffer (malloc'd) */
typedef struct jbuf {
    char *p;
    size_t n, cap;
    bool failed;
} jbuf;
void jbuf_add(jbuf *b, const char *s, size_t n);
void jbuf_adds(jbuf *b, const char *s);
void jbuf_addc(jbuf *b, char c);

/* ---- tokens */
typedef enum {
    JT_TEXT, JT_NUMBER, JT_STRING, JT_IDENT, JT_EQUALS, JT_LPAREN, JT_RPAREN, JT_OPEN_STMT,
    JT_CLOSE_STMT, JT_OPEN_EXPR, JT_CLOSE_EXPR, JT_LBRACKET, JT_RBRACKET, JT_LBRACE, JT_RBRACE,
    JT_COMMA, JT_DOT, JT_COLON, JT_PIPE, JT_ADD, JT_MUL, JT_POW, JT_CMP, JT_UNARY, JT_COMMENT
} jtok_type;
typedef struct jtok {
    jtok_type type;
    const char *s; /* the value (escapes resolved for strings), NUL-terminated */
    size_t len;
    size_t pos; /* byte offset in the original source */
} jtok;

/* ---- syntax tree */
typedef enum {
    JN_PROGRAM, JN_TEXT, JN_STR, JN_INT, JN_FLOAT, JN_IDENT, JN_ARRAY, JN_TUPLE, JN_OBJECT,
    JN_BINARY, JN_UNARY, JN_MEMBER, JN_SLICE, JN_CALL, JN_KWARG, JN_SPREAD, JN_KWSPREAD,
    JN_FILTER, JN_TEST, JN_SELECT, JN_TERNARY, JN_IF, JN_FOR, JN_SET, JN_MACRO, JN_CALLSTMT,
    JN_FILTERSTMT, JN_BREAK, JN_CONTINUE, JN_COMMENT
} jnode_kind;
typedef struct jnode jnode;
struct jnode {
    jnode_kind kind;
    size_t pos;      /* source offset of the token that starts it (the operator for binaries) */
    const char *s;   /* identifier, string, text, operator or test/macro name */
    size_t slen;
    double num;      /* number literals */
    bool flag;       /* member: computed; test: negated; callstmt: has caller args */
    jnode *a, *b, *c;
    /* member: a object, b property; slice: a b c; binary: a b; unary: a; call: a callee;
     * kwarg/spread: a value; filter: a operand, b the filter (ident or call); test: a operand,
     * list its arguments (an extension); select: a value, b test; ternary: a cond, b yes, c no;
     * if: a test; for: a target, b iterable; set: a target, b value (NULL: body); callstmt: a
     * the call; filterstmt: b the filter */
    jnode **list;  /* body, arguments, items, object keys */
    int n;
    jnode **list2; /* if/for: the else body; object: values; macro/callstmt: parameters */
    int n2;
};

/* ---- the parsed template */
struct zt_jinja {
    jarena arena;
    char *name;        /* prefixes errors */
    char *src;         /* the original source (line/column of an offset) */
    size_t src_len;
    jnode *program;
    long long now;     /* strftime_now's time (unix seconds); 0: the clock */
};

/* "NAME:LINE:COL" of a source offset, into buf. */
void jinja_where(const zt_jinja *t, size_t pos, char *buf, size_t cap);

int jinja_tokenize(zt_jinja *t, jtok **toks, int *n_toks, zt_error *err);
int jinja_parse_tokens(zt_jinja *t, const jtok *toks, int n_toks, zt_error *err);

/* ---- values */
typedef enum {
    JV_UNDEF, JV_NULL, JV_BOOL, JV_INT, JV_FLOAT, JV_STR, JV_ARRAY, JV_TUPLE, JV_OBJECT,
    JV_KWARGS, JV_NAMESPACE, JV_FUNC
} jv_type;
typedef struct jv jv;
typedef struct jenv jenv;
typedef struct jctx jctx;
typedef jv *(*jv_builtin)(jctx *c, jv *self, jv **args, int n, const jnode *at);
struct jv {
    jv_type t;
    bool b;
    double num;
    const char *s; /* strings: bytes, NUL-terminated */
    size_t len;
    jv **items;    /* arrays, tuples; object values */
    const char **keys; /* objects: keys (NUL-terminated) */
    size_t *klens;
    size_t n, cap;
    /* functions: a builtin with its bound self, or a macro / call-block caller */
    jv_builtin fn;
    jv *self;
    const jnode *macro;  /* JN_MACRO or JN_CALLSTMT */
    jenv *closure;       /* the call block's environment */
};

struct jenv {
    jenv *parent;
    const char **names;
    size_t *nlens;
    jv **vals;
    size_t n, cap;
};

/* The evaluation: the arena of this render, the error, the limits. */
struct jctx {
    const zt_jinja *t;
    jarena *ar;
    zt_error *err;
    bool failed;        /* err is set: unwind */
    int ctrl;           /* 1 break, 2 continue: unwinding to the loop */
    int depth;          /* nesting of evaluation (recursion bound) */
    long long steps;    /* evaluation steps (a bound on huge loops) */
    const jnode *at;    /* the node being evaluated: where errors without a node point */
};

#define JINJA_MAX_DEPTH 400
#define JINJA_MAX_STEPS 20000000LL
#define JINJA_MAX_ITEMS 10000000.0 /* range() and string repetition bounds */

jv *jv_new(jctx *c, jv_type t);
jv *jv_str(jctx *c, const char *s, size_t n);
jv *jv_strz(jctx *c, const char *s);
jv *jv_num(jctx *c, jv_type t, double x);
jv *jv_bool(jctx *c, bool b);
jv *jv_array(jctx *c, jv_type t, size_t cap);
bool jv_push(jctx *c, jv *arr, jv *item);
bool jv_obj_set(jctx *c, jv *obj, const char *k, size_t klen, jv *v);
jv *jv_obj_get(const jv *obj, const char *k, size_t klen); /* NULL when absent */
jv *jv_from_json(jctx *c, const cJSON *j);
bool jv_is_array(const jv *v);  /* array or tuple */
bool jv_is_object(const jv *v); /* object or kwargs */
bool jv_truthy(const jv *v);
const char *jv_type_name(const jv *v); /* as the reference names them: "StringValue", ... */
/* The value as a block prints it (RuntimeValue.toString). false on failure (c->err set). */
bool jv_to_string(jctx *c, const jv *v, jbuf *out);
/* JavaScript's String(x.value): what `~` and `+` concatenate. */
bool jv_raw_string(jctx *c, const jv *v, jbuf *out);
/* JSON as the reference's toJSON: indent < 0 none; undefined_null: undefined as null. */
typedef struct jjson_opts {
    int indent;
    bool ensure_ascii, sort_keys, undefined_null;
    const char *item_sep, *key_sep; /* NULL: the defaults */
} jjson_opts;
bool jv_to_json(jctx *c, const jv *v, const jjson_opts *o, int depth, jbuf *out);
void jinja_js_number(double x, char *buf, size_t cap); /* JavaScript's Number#toString */
bool jv_loose_eq(const jv *a, const jv *b);  /* a.value == b.value */
bool jv_strict_eq(const jv *a, const jv *b); /* a.value === b.value */
/* -1/0/1; false on incomparable types (c->err set, naming `at`). */
bool jv_compare(jctx *c, const jv *a, const jv *b, bool case_sensitive, int *out, const jnode *at);
size_t jinja_utf16_len(const char *s, size_t n);
bool jinja_is_space(const char *s, size_t n, size_t i, size_t *clen); /* JavaScript's \s at i */

/* Fails the render with a message prefixed by the node's place; returns NULL. */
jv *jfail(jctx *c, const jnode *at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* ---- evaluator (jinja_eval.c) */
jv *jinja_eval(jctx *c, const jnode *n, jenv *env);
jv *jinja_call(jctx *c, jv *fn, jv **args, int n, jenv *env, const jnode *at);
jv *jinja_eval_args(jctx *c, jnode **args, int n, jenv *env, jv ***out, int *nout, jv **kwargs);
jenv *jenv_new(jctx *c, jenv *parent);
bool jenv_set(jctx *c, jenv *e, const char *name, size_t len, jv *v);
jv *jenv_get(jenv *e, const char *name, size_t len); /* NULL when nowhere */

/* ---- filters, tests, methods, globals (jinja_filters.c) */
jv *jinja_filter(jctx *c, jv *operand, const jnode *filter, jenv *env);
/* *ok false: an unknown test (c->err set). */
bool jinja_test(jctx *c, const char *name, jv *operand, jv **args, int n, const jnode *at, bool *ok);
jv *jinja_builtin_member(jctx *c, jv *obj, const char *name, size_t len); /* NULL: none */
bool jinja_set_globals(jctx *c, jenv *env);

#endif
