/* dialect_tree.c - DeepSpeed JSON and Accelerate YAML documents as cfg_node trees with
 * line:column positions (JSON through cJSON, YAML through libyaml), for the row interpreter in
 * dialect_common.c.
 *
 * cJSON keeps no positions, so after it has accepted a text a small scanner lists every object
 * key's position in document order; a depth-first walk of cJSON's tree meets the keys in the same
 * order, which pairs them. If the two ever disagreed the positions would be left out (0), never
 * wrong.
 *
 * Invariants: trees are bounded (nesting <= 64 levels for YAML and cJSON's own 1000 for JSON,
 * at most 100000 YAML nodes, so aliases cannot blow up); every problem is recorded in the
 * cfg_ctx and the reading goes on. */
#include "config/config_internal.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

#define YAML_MAX_DEPTH 64
#define YAML_MAX_NODES 100000

/* ---------------------------------------------------------------------------------------------
 * Nodes. */

void zt_cfg_node_free(cfg_node *n) {
    while (n) {
        cfg_node *next = n->next;
        zt_cfg_node_free(n->child);
        free(n->key);
        free(n->text);
        free(n);
        n = next;
    }
}

static cfg_node *node_new(cfg_ctx *x, cn_kind kind, const char *key) {
    cfg_node *n = calloc(1, sizeof *n);
    if (!n) {
        x->nomem = true;
        return NULL;
    }
    n->kind = kind;
    if (key && !(n->key = strdup(key))) {
        free(n);
        x->nomem = true;
        return NULL;
    }
    return n;
}

static bool set_text(cfg_ctx *x, cfg_node *n, const char *s) {
    n->text = strdup(s ? s : "");
    if (!n->text) x->nomem = true;
    return n->text != NULL;
}

const cfg_node *zt_cfg_child(const cfg_node *n, const char *key) {
    if (!n || n->kind != CN_MAP) return NULL;
    for (const cfg_node *c = n->child; c; c = c->next)
        if (c->key && strcmp(c->key, key) == 0) return c;
    return NULL;
}

const char *zt_cfg_kind_name(const cfg_node *n) {
    switch (n->kind) {
    case CN_NULL: return "null";
    case CN_BOOL: return "a boolean";
    case CN_NUM: return "a number";
    case CN_STR: return "a string";
    case CN_MAP: return "a mapping";
    case CN_SEQ: return "a list";
    }
    return "?";
}

bool zt_cfg_is_auto(const cfg_node *n) {
    return n && n->kind == CN_STR && n->text && strcmp(n->text, "auto") == 0;
}

void zt_cfg_node_show(const cfg_node *n, char *out, size_t cap) {
    char s[96];
    switch (n->kind) {
    case CN_NULL: snprintf(out, cap, "null"); break;
    case CN_BOOL: snprintf(out, cap, "%s", n->b ? "true" : "false"); break;
    case CN_NUM: snprintf(out, cap, "%s", n->text ? n->text : "?"); break;
    case CN_STR:
        zt_cfg_show(s, sizeof s, n->text ? n->text : "", n->text ? strlen(n->text) : 0);
        snprintf(out, cap, "\"%s\"", s);
        break;
    case CN_MAP: snprintf(out, cap, "{...}"); break;
    case CN_SEQ: snprintf(out, cap, "[...]"); break;
    }
}

/* ---------------------------------------------------------------------------------------------
 * JSON. */

/* Blanks // and block comments (DeepSpeed reads its config with hjson, which allows them), keeping
 * every other byte and every newline where it was, so positions stay right. */
static void blank_comments(char *t, size_t len) {
    bool in_str = false;
    for (size_t i = 0; i < len; i++) {
        if (in_str) {
            if (t[i] == '\\' && i + 1 < len)
                i++;
            else if (t[i] == '"')
                in_str = false;
            continue;
        }
        if (t[i] == '"') {
            in_str = true;
        } else if (t[i] == '/' && i + 1 < len && t[i + 1] == '/') {
            while (i < len && t[i] != '\n') t[i++] = ' ';
        } else if (t[i] == '/' && i + 1 < len && t[i + 1] == '*') {
            t[i] = t[i + 1] = ' ';
            i += 2;
            while (i < len && !(t[i] == '*' && i + 1 < len && t[i + 1] == '/')) {
                if (t[i] != '\n') t[i] = ' ';
                i++;
            }
            if (i < len) t[i] = t[i + 1] = ' ', i++;
        } else if (t[i] == '#') { /* hjson's other comment form */
            while (i < len && t[i] != '\n') t[i++] = ' ';
        }
    }
}

typedef struct jpos {
    int kline, kcol, vline, vcol;
} jpos;

typedef struct scan {
    const char *t;
    size_t len, i;
    int line, col;
} scan;

static void adv(scan *s) {
    if (s->i >= s->len) return;
    if (s->t[s->i] == '\n') {
        s->line++;
        s->col = 1;
    } else {
        s->col++;
    }
    s->i++;
}

static void skip_ws(scan *s) {
    while (s->i < s->len && (s->t[s->i] == ' ' || s->t[s->i] == '\t' || s->t[s->i] == '\n' ||
                             s->t[s->i] == '\r'))
        adv(s);
}

/* Positions of every object key, in document order. Returns the count, -1 on no memory. */
static int scan_keys(const char *t, size_t len, jpos **out) {
    scan s = {t, len, 0, 1, 1};
    int n = 0, cap = 0;
    jpos *p = NULL;
    while (s.i < s.len) {
        if (t[s.i] != '"') {
            adv(&s);
            continue;
        }
        int line = s.line, col = s.col;
        adv(&s);
        while (s.i < s.len && t[s.i] != '"') {
            if (t[s.i] == '\\') adv(&s);
            adv(&s);
        }
        adv(&s); /* the closing quote */
        skip_ws(&s);
        if (s.i < s.len && t[s.i] == ':') {
            adv(&s);
            skip_ws(&s);
            if (n == cap) {
                cap = cap ? 2 * cap : 64;
                jpos *q = realloc(p, (size_t)cap * sizeof *q);
                if (!q) {
                    free(p);
                    return -1;
                }
                p = q;
            }
            p[n++] = (jpos){line, col, s.line, s.col};
        }
    }
    *out = p;
    return n;
}

typedef struct jbuild {
    cfg_ctx *x;
    jpos *pos;
    int n_pos, next;
    bool positions_ok;
} jbuild;

static cfg_node *from_cjson(jbuild *b, const cJSON *j, const char *key) {
    cn_kind kind;
    if (cJSON_IsNull(j))
        kind = CN_NULL;
    else if (cJSON_IsBool(j))
        kind = CN_BOOL;
    else if (cJSON_IsNumber(j))
        kind = CN_NUM;
    else if (cJSON_IsString(j))
        kind = CN_STR;
    else if (cJSON_IsArray(j))
        kind = CN_SEQ;
    else
        kind = CN_MAP;
    cfg_node *n = node_new(b->x, kind, key);
    if (!n) return NULL;
    if (key) {
        if (b->next < b->n_pos && b->positions_ok) {
            n->line = b->pos[b->next].kline;
            n->col = b->pos[b->next].kcol;
            n->vline = b->pos[b->next].vline;
            n->vcol = b->pos[b->next].vcol;
        }
        b->next++;
    }
    char num[64];
    switch (kind) {
    case CN_BOOL: n->b = cJSON_IsTrue(j); break;
    case CN_NUM:
        n->num = j->valuedouble;
        if (fabs(n->num) < 9e15 && n->num == floor(n->num)) {
            snprintf(num, sizeof num, "%.0f", n->num);
        } else {
            for (int prec = 15; prec <= 17; prec++) { /* the shortest text that reads back */
                snprintf(num, sizeof num, "%.*g", prec, n->num);
                if (strtod(num, NULL) == n->num) break;
            }
        }
        if (!set_text(b->x, n, num)) goto oom;
        break;
    case CN_STR:
        n->quoted = true;
        if (!set_text(b->x, n, j->valuestring)) goto oom;
        break;
    case CN_MAP:
    case CN_SEQ: {
        cfg_node **tail = &n->child;
        for (const cJSON *c = j->child; c; c = c->next) {
            cfg_node *m = from_cjson(b, c, kind == CN_MAP ? (c->string ? c->string : "") : NULL);
            if (!m) goto oom;
            if (!m->line) { /* sequence items: the enclosing key's position */
                m->line = n->line ? n->line : 0;
                m->col = n->col;
                m->vline = n->vline;
                m->vcol = n->vcol;
            }
            *tail = m;
            tail = &m->next;
        }
        break;
    }
    case CN_NULL: break;
    }
    return n;
oom:
    zt_cfg_node_free(n);
    return NULL;
}

static void offset_to_line_col(const char *t, size_t off, int *line, int *col) {
    *line = 1;
    *col = 1;
    for (size_t i = 0; i < off; i++) {
        if (t[i] == '\n') {
            (*line)++;
            *col = 1;
        } else {
            (*col)++;
        }
    }
}

cfg_node *zt_cfg_json_tree(cfg_ctx *x, const char *text, size_t len, const char *name) {
    char *t = malloc(len + 1);
    if (!t) {
        x->nomem = true;
        return NULL;
    }
    memcpy(t, text, len);
    t[len] = '\0';
    blank_comments(t, len);
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(t, len, &end, false);
    int line, col;
    if (!root) {
        size_t off = end && end >= t && end <= t + len ? (size_t)(end - t) : 0;
        offset_to_line_col(t, off, &line, &col);
        char near[40];
        zt_cfg_show(near, sizeof near, t + off, len - off < 20 ? len - off : 20);
        if (off >= len)
            zt_cfg_error(x, "%s:%d:%d: JSON syntax error: unexpected end of the text", name, line, col);
        else
            zt_cfg_error(x, "%s:%d:%d: JSON syntax error near \"%s\"", name, line, col, near);
        free(t);
        return NULL;
    }
    size_t off = end ? (size_t)(end - t) : len;
    while (off < len && (t[off] == ' ' || t[off] == '\t' || t[off] == '\n' || t[off] == '\r')) off++;
    if (off < len) {
        offset_to_line_col(t, off, &line, &col);
        zt_cfg_error(x, "%s:%d:%d: JSON syntax error: text after the end of the object", name, line,
                     col);
        cJSON_Delete(root);
        free(t);
        return NULL;
    }
    if (!cJSON_IsObject(root)) {
        zt_cfg_error(x, "%s:1:1: expected a JSON object ({...}) at the top", name);
        cJSON_Delete(root);
        free(t);
        return NULL;
    }
    jbuild b = {x, NULL, 0, 0, true};
    b.n_pos = scan_keys(t, len, &b.pos);
    if (b.n_pos < 0) {
        x->nomem = true;
        b.n_pos = 0;
        b.positions_ok = false;
    }
    cfg_node *n = from_cjson(&b, root, NULL);
    if (n && b.next != b.n_pos) { /* the scanner and cJSON disagree: drop the positions */
        zt_cfg_node_free(n);
        b.positions_ok = false;
        b.next = 0;
        n = from_cjson(&b, root, NULL);
    }
    if (n) {
        const char *brace = memchr(t, '{', len);
        offset_to_line_col(t, brace ? (size_t)(brace - t) : 0, &n->line, &n->col);
        n->vline = n->line;
        n->vcol = n->col;
    }
    free(b.pos);
    cJSON_Delete(root);
    free(t);
    return n;
}

/* ---------------------------------------------------------------------------------------------
 * YAML, read as PyYAML reads it (YAML 1.1 scalars). */

typedef struct ybuild {
    cfg_ctx *x;
    yaml_document_t *doc;
    const char *name;
    int nodes;
    bool failed;
} ybuild;

static bool is_int_text(const char *s) {
    const char *p = s + (*s == '+' || *s == '-');
    if (!*p) return false;
    for (; *p; p++)
        if (!((*p >= '0' && *p <= '9') || *p == '_')) return false;
    return true;
}

static bool is_float_text(const char *s, double *v) {
    const char *p = s + (*s == '+' || *s == '-');
    if (!((*p >= '0' && *p <= '9') || (*p == '.' && p[1] >= '0' && p[1] <= '9'))) return false;
    if (strpbrk(s, "xXpP")) return false;
    char *end;
    double d = strtod(s, &end);
    if (*end || !isfinite(d)) return false;
    *v = d;
    return true;
}

static void classify_scalar(cfg_node *n, const yaml_node_t *y) {
    const char *s = n->text;
    if (y->data.scalar.style != YAML_PLAIN_SCALAR_STYLE) {
        n->kind = CN_STR;
        n->quoted = true;
        return;
    }
    static const char *const T[] = {"yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"};
    static const char *const F[] = {"no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"};
    if (!*s || !strcmp(s, "~") || !strcmp(s, "null") || !strcmp(s, "Null") || !strcmp(s, "NULL")) {
        n->kind = CN_NULL;
        return;
    }
    for (size_t i = 0; i < sizeof T / sizeof T[0]; i++) {
        if (!strcmp(s, T[i])) {
            n->kind = CN_BOOL;
            n->b = true;
            return;
        }
        if (!strcmp(s, F[i])) {
            n->kind = CN_BOOL;
            n->b = false;
            return;
        }
    }
    double v;
    if (is_int_text(s)) {
        char digits[64];
        size_t k = 0;
        for (const char *p = s; *p && k + 1 < sizeof digits; p++)
            if (*p != '_') digits[k++] = *p;
        digits[k] = '\0';
        char *end;
        double d = strtod(digits, &end);
        if (!*end && isfinite(d)) {
            n->kind = CN_NUM;
            n->num = d;
            return;
        }
    }
    if (is_float_text(s, &v)) {
        n->kind = CN_NUM;
        n->num = v;
        return;
    }
    n->kind = CN_STR;
}

static cfg_node *from_yaml(ybuild *b, yaml_node_t *y, const char *key, const yaml_node_t *ykey,
                           int depth) {
    if (++b->nodes > YAML_MAX_NODES) {
        if (!b->failed)
            zt_cfg_error(b->x, "%s: more than %d YAML nodes (aliases?): not a config file", b->name,
                         YAML_MAX_NODES);
        b->failed = true;
        return NULL;
    }
    if (depth > YAML_MAX_DEPTH) {
        if (!b->failed)
            zt_cfg_error(b->x, "%s:%zu:%zu: nested deeper than %d levels", b->name,
                         y->start_mark.line + 1, y->start_mark.column + 1, YAML_MAX_DEPTH);
        b->failed = true;
        return NULL;
    }
    cfg_node *n = node_new(b->x, CN_NULL, key);
    if (!n) return NULL;
    const yaml_node_t *at = ykey ? ykey : y;
    n->line = (int)at->start_mark.line + 1;
    n->col = (int)at->start_mark.column + 1;
    n->vline = (int)y->start_mark.line + 1;
    n->vcol = (int)y->start_mark.column + 1;
    switch (y->type) {
    case YAML_SCALAR_NODE: {
        const char *s = (const char *)y->data.scalar.value;
        if (strlen(s) != y->data.scalar.length) {
            zt_cfg_error(b->x, "%s:%d:%d: the value contains a NUL byte", b->name, n->vline, n->vcol);
            b->failed = true;
            zt_cfg_node_free(n);
            return NULL;
        }
        if (!set_text(b->x, n, s)) goto fail;
        classify_scalar(n, y);
        break;
    }
    case YAML_SEQUENCE_NODE: {
        n->kind = CN_SEQ;
        cfg_node **tail = &n->child;
        for (yaml_node_item_t *it = y->data.sequence.items.start; it < y->data.sequence.items.top;
             it++) {
            yaml_node_t *c = yaml_document_get_node(b->doc, *it);
            if (!c) goto fail;
            cfg_node *m = from_yaml(b, c, NULL, NULL, depth + 1);
            if (!m) goto fail;
            *tail = m;
            tail = &m->next;
        }
        break;
    }
    case YAML_MAPPING_NODE: {
        n->kind = CN_MAP;
        cfg_node **tail = &n->child;
        for (yaml_node_pair_t *p = y->data.mapping.pairs.start; p < y->data.mapping.pairs.top;
             p++) {
            yaml_node_t *k = yaml_document_get_node(b->doc, p->key);
            yaml_node_t *v = yaml_document_get_node(b->doc, p->value);
            if (!k || !v) goto fail;
            if (k->type != YAML_SCALAR_NODE ||
                strlen((const char *)k->data.scalar.value) != k->data.scalar.length) {
                zt_cfg_error(b->x, "%s:%zu:%zu: expected a key name, got %s", b->name,
                             k->start_mark.line + 1, k->start_mark.column + 1,
                             k->type == YAML_SCALAR_NODE ? "a name with a NUL byte"
                             : k->type == YAML_MAPPING_NODE ? "a mapping" : "a sequence");
                continue;
            }
            cfg_node *m = from_yaml(b, v, (const char *)k->data.scalar.value, k, depth + 1);
            if (!m) goto fail;
            *tail = m;
            tail = &m->next;
        }
        break;
    }
    default: break;
    }
    return n;
fail:
    zt_cfg_node_free(n);
    return NULL;
}

cfg_node *zt_cfg_yaml_tree(cfg_ctx *x, const char *text, size_t len, const char *name) {
    yaml_parser_t parser;
    yaml_document_t doc;
    if (!yaml_parser_initialize(&parser)) {
        x->nomem = true;
        return NULL;
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    cfg_node *root = NULL;
    if (!yaml_parser_load(&parser, &doc)) {
        if (parser.error == YAML_MEMORY_ERROR) {
            x->nomem = true;
        } else {
            const char *problem = parser.problem ? parser.problem : "unknown error";
            if (parser.error == YAML_READER_ERROR)
                zt_cfg_error(x, "%s: byte %zu: YAML syntax error: %s", name, parser.problem_offset,
                             problem);
            else
                zt_cfg_error(x, "%s:%zu:%zu: YAML syntax error: %s", name,
                             parser.problem_mark.line + 1, parser.problem_mark.column + 1, problem);
        }
        yaml_parser_delete(&parser);
        return NULL;
    }
    yaml_node_t *y = yaml_document_get_root_node(&doc);
    if (!y) {
        zt_cfg_error(x, "%s: empty: expected a mapping of keys", name);
    } else if (y->type != YAML_MAPPING_NODE) {
        zt_cfg_error(x, "%s:%zu:%zu: expected a mapping of keys at the top", name,
                     y->start_mark.line + 1, y->start_mark.column + 1);
    } else {
        ybuild b = {x, &doc, name, 0, false};
        root = from_yaml(&b, y, NULL, NULL, 0);
        if (b.failed) {
            zt_cfg_node_free(root);
            root = NULL;
        }
    }
    yaml_document_delete(&doc);
    if (root) { /* one document per file */
        yaml_document_t second;
        if (yaml_parser_load(&parser, &second)) {
            yaml_node_t *r2 = yaml_document_get_root_node(&second);
            if (r2)
                zt_cfg_error(x, "%s:%zu:%zu: a second YAML document: a config is one document",
                             name, r2->start_mark.line + 1, r2->start_mark.column + 1);
            yaml_document_delete(&second);
        } else {
            zt_cfg_error(x, "%s:%zu:%zu: YAML syntax error: %s", name, parser.problem_mark.line + 1,
                         parser.problem_mark.column + 1,
                         parser.problem ? parser.problem : "unknown error");
        }
    }
    yaml_parser_delete(&parser);
    return root;
}

