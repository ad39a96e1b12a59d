/* native_yaml.c - the native YAML reader (docs/config-train.md): sections of keys from the key
 * table, plus one optional include of a DeepSpeed JSON or Accelerate YAML file
 * (`deepspeed_config: ds.json` or `accelerate_config: acc.yaml`, relative to this file) whose
 * mapped keys must agree with the ones this file sets itself.
 *
 * Invariants: every problem is recorded (cfg_ctx) and reading goes on, so one run reports them
 * all; positions are the value's line:column for value errors and the key's for key errors;
 * model.preset is applied before the other keys whatever their order. */
#include "config/config_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

typedef struct where {
    char text[ZT_PATH_MAX + 48];
} where;

static void at(where *w, const char *name, const yaml_node_t *n) {
    snprintf(w->text, sizeof w->text, "%s:%zu:%zu", name, n->start_mark.line + 1,
             n->start_mark.column + 1);
}

static const char *node_kind(const yaml_node_t *n) {
    switch (n->type) {
    case YAML_SCALAR_NODE: return "a scalar";
    case YAML_SEQUENCE_NODE: return "a sequence";
    case YAML_MAPPING_NODE: return "a mapping";
    default: return "nothing";
    }
}

static bool is_null_scalar(const yaml_node_t *n) {
    if (n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE) return false;
    const char *s = (const char *)n->data.scalar.value;
    return n->data.scalar.length == 0 || !strcmp(s, "~") || !strcmp(s, "null") ||
           !strcmp(s, "Null") || !strcmp(s, "NULL");
}

static bool scalar_is(const yaml_node_t *n, const char *s) {
    return n->type == YAML_SCALAR_NODE && strlen((const char *)n->data.scalar.value) ==
                                              n->data.scalar.length &&
           strcmp((const char *)n->data.scalar.value, s) == 0;
}

/* The include keys a native file may have at the top level. */
static const char *const INCLUDES[] = {"deepspeed_config", "accelerate_config"};

typedef struct native_state {
    const char *name;
    bool seen[ZT_CONFIG_MAX_KEYS];
    size_t line[ZT_CONFIG_MAX_KEYS];
    bool seen_section[32];
    size_t section_line[32];
    const yaml_node_t *include_key, *include_val; /* the first include */
    int include_kind;                              /* 0 deepspeed, 1 accelerate */
} native_state;

static void unknown_top(cfg_ctx *x, const char *wh, const char *s, size_t sl) {
    char shown[96], hint[128], names[640];
    zt_cfg_show(shown, sizeof shown, s, sl);
    hint[0] = '\0';
    for (int i = 0; i < zt_cfg_n_sections; i++)
        if (zt_cfg_edit_distance(s, sl, zt_cfg_sections[i]) <= 2) {
            snprintf(hint, sizeof hint, "; did you mean %s?", zt_cfg_sections[i]);
            break;
        }
    for (size_t i = 0; !hint[0] && i < sizeof INCLUDES / sizeof INCLUDES[0]; i++)
        if (zt_cfg_edit_distance(s, sl, INCLUDES[i]) <= 3)
            snprintf(hint, sizeof hint, "; did you mean %s?", INCLUDES[i]);
    if (!hint[0]) zt_cfg_suggest_key(hint, sizeof hint, -1, s, sl); /* "steps: 10" */
    zt_cfg_list_sections(names, sizeof names);
    zt_cfg_error(x, "%s: %s: unknown section%s (sections: %s; includes: deepspeed_config, "
                    "accelerate_config)",
                 wh, shown, hint, names);
}

static void unknown_key(cfg_ctx *x, const char *wh, int s, const char *leaf, size_t ll) {
    char shown[160], hint[128], names[640], full[200];
    snprintf(full, sizeof full, "%s.%.*s", zt_cfg_sections[s], (int)(ll < 80 ? ll : 80), leaf);
    zt_cfg_show(shown, sizeof shown, full, strlen(full));
    zt_cfg_suggest_key(hint, sizeof hint, s, leaf, ll);
    zt_cfg_list_keys(names, sizeof names, s);
    zt_cfg_error(x, "%s: %s: unknown key%s (%s keys: %s)", wh, shown, hint, zt_cfg_sections[s],
                 names);
}

/* A list key's sequence of scalars (F_LIST: [q_proj, v_proj]) as its items joined by commas into
 * out; false (with out naming what is wrong) for anything else in it or a result that is too long. */
static bool join_sequence(yaml_document_t *doc, const yaml_node_t *seq, char *out, size_t cap) {
    size_t len = 0;
    out[0] = '\0';
    for (yaml_node_item_t *it = seq->data.sequence.items.start; it < seq->data.sequence.items.top; it++) {
        const yaml_node_t *n = yaml_document_get_node(doc, *it);
        if (!n || n->type != YAML_SCALAR_NODE || strlen((const char *)n->data.scalar.value) != n->data.scalar.length) {
            snprintf(out, cap, "a list item that is %s", n ? node_kind(n) : "nothing");
            return false;
        }
        if (len + n->data.scalar.length + 2 >= cap) {
            snprintf(out, cap, "a list longer than %zu bytes joined", cap - 1);
            return false;
        }
        len += (size_t)snprintf(out + len, cap - len, "%s%s", len ? "," : "", (const char *)n->data.scalar.value);
    }
    return true;
}

/* One key's value. */
static void apply_node(cfg_ctx *x, native_state *st, yaml_document_t *doc, int ki, const yaml_node_t *vv) {
    where w;
    at(&w, st->name, vv);
    if (vv->type == YAML_SEQUENCE_NODE && (zt_cfg_keys[ki].flags & F_LIST)) {
        char joined[1024];
        if (!join_sequence(doc, vv, joined, sizeof joined)) {
            zt_cfg_error(x, "%s: %s: expected a list of names, got %s", w.text, zt_cfg_keys[ki].key, joined);
            x->bad[ki] = true;
        } else if (zt_cfg_apply(x, ki, joined, strlen(joined), true, ZT_ORIGIN_FILE, w.text, NULL, NULL) == 0) {
            x->native_set[ki] = true;
        }
        return;
    }
    if (vv->type != YAML_SCALAR_NODE) {
        char want[192];
        zt_cfg_describe(&zt_cfg_keys[ki], want, sizeof want);
        zt_cfg_error(x, "%s: %s: expected %s, got %s", w.text, zt_cfg_keys[ki].key, want,
                     node_kind(vv));
        x->bad[ki] = true;
        return;
    }
    bool quoted = vv->data.scalar.style != YAML_PLAIN_SCALAR_STYLE;
    if (zt_cfg_apply(x, ki, (const char *)vv->data.scalar.value, vv->data.scalar.length, quoted,
                     ZT_ORIGIN_FILE, w.text, NULL, NULL) == 0)
        x->native_set[ki] = true;
}

/* Applies model.preset before anything else, whatever the key order. */
static void apply_preset_first(cfg_ctx *x, native_state *st, yaml_document_t *doc,
                               yaml_node_t *root) {
    int preset_ki = zt_cfg_key_index("model.preset");
    for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top;
         p++) {
        yaml_node_t *k = yaml_document_get_node(doc, p->key);
        yaml_node_t *v = yaml_document_get_node(doc, p->value);
        if (!k || !v || !scalar_is(k, "model") || v->type != YAML_MAPPING_NODE) continue;
        for (yaml_node_pair_t *q = v->data.mapping.pairs.start; q < v->data.mapping.pairs.top;
             q++) {
            yaml_node_t *kk = yaml_document_get_node(doc, q->key);
            yaml_node_t *vv = yaml_document_get_node(doc, q->value);
            if (!kk || !vv || !scalar_is(kk, "preset") || vv->type != YAML_SCALAR_NODE) continue;
            apply_node(x, st, doc, preset_ki, vv);
            return; /* a duplicate is reported by the walk */
        }
        return; /* only the first model: section; a second one is reported later */
    }
}

/* The keys of one mapping under section s; prefix ("" or "rope_scaling.") is put before each leaf,
 * so that a nested mapping (model: {rope_scaling: {factor: 8}}) reads as the dotted leaves
 * (model.rope_scaling.factor) the key table has. One level of nesting. */
static void walk_pairs(cfg_ctx *x, native_state *st, yaml_document_t *doc, int s, yaml_node_t *v,
                       const char *prefix) {
    where w;
    int preset_ki = zt_cfg_key_index("model.preset");
    for (yaml_node_pair_t *q = v->data.mapping.pairs.start; q < v->data.mapping.pairs.top; q++) {
        yaml_node_t *kk = yaml_document_get_node(doc, q->key);
        yaml_node_t *vv = yaml_document_get_node(doc, q->value);
        if (!kk || !vv) {
            zt_cfg_error(x, "%s: broken YAML document", st->name);
            return;
        }
        at(&w, st->name, kk);
        if (kk->type != YAML_SCALAR_NODE) {
            zt_cfg_error(x, "%s: %s: expected a key name, got %s", w.text, zt_cfg_sections[s],
                         node_kind(kk));
            continue;
        }
        char leaf[160];
        const char *raw = (const char *)kk->data.scalar.value;
        size_t rl = kk->data.scalar.length;
        int n = strlen(raw) == rl ? snprintf(leaf, sizeof leaf, "%s%s", prefix, raw) : -1;
        const char *ks = n > 0 && (size_t)n < sizeof leaf ? leaf : raw;
        size_t kl = ks == leaf ? (size_t)n : rl;
        int ki = ks == leaf ? zt_cfg_find_key(s, ks, kl) : -1;
        if (ki < 0 && !prefix[0] && ks == leaf && vv->type == YAML_MAPPING_NODE && kl + 2 < sizeof leaf) {
            char sub[162], full[200];
            snprintf(sub, sizeof sub, "%s.", leaf);
            snprintf(full, sizeof full, "%s.%s", zt_cfg_sections[s], sub);
            for (int k = 0; k < zt_cfg_n_keys; k++) /* a prefix of some key: read its mapping */
                if (!strncmp(zt_cfg_keys[k].key, full, strlen(full))) {
                    walk_pairs(x, st, doc, s, vv, sub);
                    ki = -2;
                    break;
                }
            if (ki == -2) continue;
        }
        if (ki < 0) {
            unknown_key(x, w.text, s, ks, kl);
            continue;
        }
        if (st->seen[ki]) {
            zt_cfg_error(x, "%s: %s: duplicate key (first at line %zu)", w.text,
                         zt_cfg_keys[ki].key, st->line[ki]);
            x->bad[ki] = true;
            continue;
        }
        st->seen[ki] = true;
        st->line[ki] = kk->start_mark.line + 1;
        if (ki == preset_ki && vv->type == YAML_SCALAR_NODE) continue; /* applied first */
        apply_node(x, st, doc, ki, vv);
    }
}

static void walk_section(cfg_ctx *x, native_state *st, yaml_document_t *doc, int s,
                         yaml_node_t *v) {
    where w;
    char names[640];
    if (is_null_scalar(v)) return; /* "eval:" with nothing under it */
    if (v->type != YAML_MAPPING_NODE) {
        at(&w, st->name, v);
        zt_cfg_list_keys(names, sizeof names, s);
        zt_cfg_error(x, "%s: %s: expected a mapping of %s keys (%s), got %s", w.text,
                     zt_cfg_sections[s], zt_cfg_sections[s], names, node_kind(v));
        return;
    }
    walk_pairs(x, st, doc, s, v, "");
}

static void walk(cfg_ctx *x, native_state *st, yaml_document_t *doc) {
    yaml_node_t *root = yaml_document_get_root_node(doc);
    where w;
    char names[640];
    if (!root || is_null_scalar(root)) return; /* an empty file sets nothing */
    if (root->type != YAML_MAPPING_NODE) {
        at(&w, st->name, root);
        zt_cfg_list_sections(names, sizeof names);
        zt_cfg_error(x, "%s: expected a mapping of sections (%s), got %s", w.text, names,
                     node_kind(root));
        return;
    }
    apply_preset_first(x, st, doc, root);
    for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top;
         p++) {
        yaml_node_t *k = yaml_document_get_node(doc, p->key);
        yaml_node_t *v = yaml_document_get_node(doc, p->value);
        if (!k || !v) {
            zt_cfg_error(x, "%s: broken YAML document", st->name);
            return;
        }
        at(&w, st->name, k);
        if (k->type != YAML_SCALAR_NODE) {
            zt_cfg_error(x, "%s: expected a section name, got %s", w.text, node_kind(k));
            continue;
        }
        const char *ks = (const char *)k->data.scalar.value;
        size_t kl = k->data.scalar.length;
        bool clean = strlen(ks) == kl;
        int inc = -1;
        for (int i = 0; clean && i < 2; i++)
            if (strcmp(ks, INCLUDES[i]) == 0) inc = i;
        if (inc >= 0) {
            if (st->include_key) {
                zt_cfg_error(x, "%s: %s: a native file includes one DeepSpeed or Accelerate file "
                                "(first: %s at line %zu)",
                             w.text, ks, INCLUDES[st->include_kind],
                             st->include_key->start_mark.line + 1);
                continue;
            }
            at(&w, st->name, v);
            if (v->type != YAML_SCALAR_NODE || is_null_scalar(v) || v->data.scalar.length == 0 ||
                strlen((const char *)v->data.scalar.value) != v->data.scalar.length ||
                v->data.scalar.length >= ZT_PATH_MAX) {
                zt_cfg_error(x, "%s: %s: expected the path of a %s file, got %s", w.text, ks,
                             inc == 0 ? "DeepSpeed JSON" : "Accelerate YAML",
                             v->type == YAML_SCALAR_NODE ? "an empty or unusable value" : node_kind(v));
                continue;
            }
            st->include_key = k;
            st->include_val = v;
            st->include_kind = inc;
            continue;
        }
        int s = clean ? zt_cfg_find_section(ks, kl) : -1;
        if (s < 0) {
            const char *dot = clean ? memchr(ks, '.', kl) : NULL;
            if (dot && zt_cfg_key_index(ks) >= 0) {
                int sec = zt_cfg_find_section(ks, (size_t)(dot - ks));
                zt_cfg_error(x, "%s: %s: dotted keys are for --set; in YAML write it nested: %s: "
                                "then %s:",
                             w.text, ks, zt_cfg_sections[sec], dot + 1);
                continue;
            }
            unknown_top(x, w.text, ks, kl);
            continue;
        }
        if (st->seen_section[s]) {
            zt_cfg_error(x, "%s: %s: duplicate section (first at line %zu)", w.text,
                         zt_cfg_sections[s], st->section_line[s]);
            continue;
        }
        st->seen_section[s] = true;
        st->section_line[s] = k->start_mark.line + 1;
        walk_section(x, st, doc, s, v);
    }
}

static void yaml_error(cfg_ctx *x, const yaml_parser_t *p, const char *name) {
    if (p->error == YAML_MEMORY_ERROR) {
        x->nomem = true;
        zt_cfg_error(x, "%s: out of memory parsing YAML", name);
        return;
    }
    const char *problem = p->problem ? p->problem : "unknown error";
    if (p->error == YAML_READER_ERROR) {
        zt_cfg_error(x, "%s: byte %zu: YAML syntax error: %s", name, p->problem_offset, problem);
        return;
    }
    char ctx[160] = "";
    if (p->context)
        snprintf(ctx, sizeof ctx, " (%s at line %zu)", p->context, p->context_mark.line + 1);
    zt_cfg_error(x, "%s:%zu:%zu: YAML syntax error: %s%s", name, p->problem_mark.line + 1,
                 p->problem_mark.column + 1, problem, ctx);
}

static void read_include(cfg_ctx *x, native_state *st) {
    const yaml_node_t *v = st->include_val;
    const char *rel = (const char *)v->data.scalar.value;
    char path[ZT_PATH_MAX + 64];
    where w;
    at(&w, st->name, v);
    zt_cfg_relative_to(st->name, rel, path, sizeof path);
    size_t len = 0;
    cfg_ctx sub;
    zt_cfg_ctx_init(&sub, NULL);
    char *text = zt_cfg_read_file(&sub, path, &len);
    if (!text) {
        for (int i = 0; i < sub.n_errors; i++)
            zt_cfg_error(x, "%s: %s: %s", w.text, INCLUDES[st->include_kind], sub.errors[i]);
        if (sub.nomem) x->nomem = true;
        zt_cfg_ctx_free(&sub);
        return;
    }
    zt_cfg_ctx_free(&sub);
    const char *saved = x->native_name;
    x->native_name = st->name;
    x->depth++;
    zt_cfg_note(x, ZT_CONFIG_NOTE, "%s: %s: %s read after this file; its keys must agree with the "
                                   "ones set here",
                w.text, INCLUDES[st->include_kind], path);
    if (st->include_kind == 0)
        zt_cfg_read_deepspeed(x, text, len, path);
    else
        zt_cfg_read_accelerate(x, text, len, path);
    x->depth--;
    x->native_name = saved;
    free(text);
}

void zt_cfg_read_native(cfg_ctx *x, const char *text, size_t len, const char *name) {
    native_state *st = calloc(1, sizeof *st);
    if (!st) {
        x->nomem = true;
        return;
    }
    st->name = name;
    yaml_parser_t parser;
    yaml_document_t doc;
    if (!yaml_parser_initialize(&parser)) {
        free(st);
        x->nomem = true;
        return;
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, &doc)) {
        yaml_error(x, &parser, name);
        goto done;
    }
    walk(x, st, &doc);
    /* one document per file */
    yaml_document_t second;
    if (!yaml_parser_load(&parser, &second)) {
        yaml_error(x, &parser, name);
        yaml_document_delete(&doc);
        goto done;
    }
    yaml_node_t *root2 = yaml_document_get_root_node(&second);
    if (root2)
        zt_cfg_error(x, "%s:%zu:%zu: a second YAML document: a config is one document", name,
                     root2->start_mark.line + 1, root2->start_mark.column + 1);
    yaml_document_delete(&second);
    if (st->include_key) {
        if (x->depth > 0)
            zt_cfg_error(x, "%s: %s: only the top-level file may include another", name,
                         INCLUDES[st->include_kind]);
        else
            read_include(x, st);
    }
    yaml_document_delete(&doc);
done:
    yaml_parser_delete(&parser);
    free(st);
}
