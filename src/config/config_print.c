/* config_print.c - the resolved configuration for people and tools (`zerotrain config`): a table
 * of every key with its value and source, native YAML that reads back to the same configuration,
 * JSON; and docs/config.md, generated from the same tables the readers use (keys.c, support.c,
 * dialect_deepspeed.def, dialect_accelerate.def), so the docs cannot drift from the code
 * (tests/test_config_docs.c compares the checked-in file with this output).
 *
 * Writing goes to a caller's FILE; a failed write is ZT_ERR_IO. Nothing else is printed. */
#include "config/config_internal.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VAL_MAX (ZT_PATH_MAX + 16)

static const char *origin_name(zt_config_origin o) {
    switch (o) {
    case ZT_ORIGIN_DEFAULT: return "default";
    case ZT_ORIGIN_DERIVED: return "derived";
    case ZT_ORIGIN_FILE: return "file";
    case ZT_ORIGIN_DIALECT: return "dialect";
    case ZT_ORIGIN_AUTO: return "auto";
    case ZT_ORIGIN_SET: return "set";
    case ZT_ORIGIN_LAUNCH: return "launch";
    }
    return "?";
}

static const char *level_name(zt_config_level l) {
    return l == ZT_CONFIG_ERROR ? "error" : l == ZT_CONFIG_WARNING ? "warning" : "note";
}

static void source_text(const zt_train_config *c, int i, char *out, size_t cap) {
    const zt_config_source *s = &c->source[i];
    if (s->text[0])
        snprintf(out, cap, "%s", s->text);
    else
        snprintf(out, cap, "%s", origin_name(s->origin));
}

/* Collects notes (recorded and from the support table) for printing. */
typedef struct note_list {
    FILE *out;
    const char *prefix;
    int n;
} note_list;

/* Writes s as the rest of a YAML comment line: control bytes and bytes >= 0x80 (a dialect key or
 * value quoted in a note may hold invalid UTF-8, which YAML refuses even in comments) as '?'. */
static void comment_text(FILE *out, const char *s) {
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        fputc(*p < 0x20 || *p >= 0x7f ? '?' : *p, out);
}

static void print_note(void *ctx, zt_config_level level, const char *text) {
    note_list *l = ctx;
    fprintf(l->out, "%s%s: ", l->prefix, level_name(level));
    if (l->prefix[0] == '#')
        comment_text(l->out, text);
    else
        fputs(text, l->out);
    fputc('\n', l->out);
    l->n++;
}

static void collect_support_errors(void *ctx, zt_config_level level, const char *text) {
    if (level == ZT_CONFIG_ERROR) print_note(ctx, level, text);
}

static int write_table(const zt_train_config *c, FILE *out) {
    char v[VAL_MAX], s[ZT_CONFIG_SOURCE_MAX + 16];
    fprintf(out, "# resolved configuration (%s); every key, its value and where it came from\n",
            c->dialect[0] ? c->dialect : "native");
    for (int i = 0; i < zt_cfg_n_keys; i++) {
        zt_cfg_format(c, &zt_cfg_keys[i], v, sizeof v);
        source_text(c, i, s, sizeof s);
        fprintf(out, "%-38s %-14s %s\n", zt_cfg_keys[i].key, v[0] ? v : "\"\"", s);
    }
    note_list l = {out, "", 0};
    zt_train_config_notes(c, print_note, &l);
    zt_cfg_support_check(c, collect_support_errors, &l);
    fprintf(out, "hash %016llx\n", (unsigned long long)zt_train_config_hash(c));
    return 0;
}

/* A YAML double-quoted scalar. */
static void yaml_quote(FILE *out, const char *s) {
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(out, "\\%c", *p);
        else if (*p < 0x20 || *p == 0x7f)
            fprintf(out, "\\x%02x", *p);
        else
            fputc(*p, out);
    }
    fputc('"', out);
}

static int write_yaml(const zt_train_config *c, FILE *out) {
    char v[VAL_MAX], s[ZT_CONFIG_SOURCE_MAX + 16];
    fprintf(out, "# resolved by zerotrain config (%s): every key, with its source as a comment.\n"
                 "# This file reads back to the same configuration (zerotrain config FILE --json).\n",
            c->dialect[0] ? c->dialect : "native");
    const char *section = NULL;
    size_t section_len = 0;
    for (int i = 0; i < zt_cfg_n_keys; i++) {
        const key_def *k = &zt_cfg_keys[i];
        size_t sl = (size_t)(strchr(k->key, '.') - k->key);
        if (!section || sl != section_len || strncmp(k->key, section, sl) != 0) {
            fprintf(out, "%.*s:\n", (int)sl, k->key);
            section = k->key;
            section_len = sl;
        }
        zt_cfg_format(c, k, v, sizeof v);
        source_text(c, i, s, sizeof s);
        if ((k->type == KT_STR) && !v[0] && (k->flags & F_REQUIRED)) {
            fprintf(out, "  # %s: not set (required to train: --set %s=PATH)\n", zt_cfg_leaf(k), k->key);
            continue;
        }
        fprintf(out, "  %s: ", zt_cfg_leaf(k));
        if (k->type == KT_STR)
            yaml_quote(out, v);
        else
            fputs(v, out);
        fputs("  # ", out);
        comment_text(out, s);
        fputc('\n', out);
    }
    note_list l = {out, "# ", 0};
    zt_train_config_notes(c, print_note, &l);
    zt_cfg_support_check(c, collect_support_errors, &l);
    fprintf(out, "# hash %016llx\n", (unsigned long long)zt_train_config_hash(c));
    return 0;
}

static cJSON *json_value(const zt_train_config *c, const key_def *k) {
    char v[VAL_MAX];
    zt_cfg_format(c, k, v, sizeof v);
    switch (k->type) {
    case KT_INT:
    case KT_INT64:
    case KT_U64:
    case KT_FLOAT: return cJSON_CreateRaw(v); /* the canonical text, exactly */
    case KT_BOOL: return cJSON_CreateBool(strcmp(v, "true") == 0);
    default: return cJSON_CreateString(v);
    }
}

typedef struct json_notes {
    cJSON *arr;
    bool nomem;
} json_notes;

static void json_note(void *ctx, zt_config_level level, const char *text) {
    json_notes *j = ctx;
    cJSON *o = cJSON_CreateObject();
    if (!o || !cJSON_AddStringToObject(o, "level", level_name(level)) ||
        !cJSON_AddStringToObject(o, "text", text)) {
        cJSON_Delete(o);
        j->nomem = true;
        return;
    }
    cJSON_AddItemToArray(j->arr, o);
}

static void json_support_error(void *ctx, zt_config_level level, const char *text) {
    if (level == ZT_CONFIG_ERROR) json_note(ctx, level, text);
}

static int write_json(const zt_train_config *c, FILE *out, zt_error *err) {
    cJSON *root = cJSON_CreateObject(), *values = cJSON_CreateObject(),
          *sources = cJSON_CreateObject(), *notes = cJSON_CreateArray();
    bool ok = root && values && sources && notes;
    if (ok) {
        cJSON_AddItemToObject(root, "dialect", cJSON_CreateString(c->dialect));
        cJSON_AddItemToObject(root, "values", values);
        cJSON_AddItemToObject(root, "sources", sources);
        cJSON_AddItemToObject(root, "notes", notes);
    } else {
        cJSON_Delete(values);
        cJSON_Delete(sources);
        cJSON_Delete(notes);
    }
    for (int i = 0; ok && i < zt_cfg_n_keys; i++) {
        cJSON *v = json_value(c, &zt_cfg_keys[i]), *s = cJSON_CreateObject();
        if (!v || !s) {
            cJSON_Delete(v);
            cJSON_Delete(s);
            ok = false;
            break;
        }
        cJSON_AddItemToObject(values, zt_cfg_keys[i].key, v);
        cJSON_AddStringToObject(s, "origin", origin_name(c->source[i].origin));
        cJSON_AddStringToObject(s, "text", c->source[i].text);
        cJSON_AddItemToObject(sources, zt_cfg_keys[i].key, s);
    }
    json_notes jn = {notes, false};
    if (ok) {
        zt_train_config_notes(c, json_note, &jn);
        zt_cfg_support_check(c, json_support_error, &jn);
        char h[32];
        snprintf(h, sizeof h, "%016llx", (unsigned long long)zt_train_config_hash(c));
        cJSON_AddStringToObject(root, "hash", h);
    }
    char *text = ok && !jn.nomem ? cJSON_Print(root) : NULL;
    cJSON_Delete(root);
    if (!text) return zt_error_set(err, ZT_ERR_NOMEM, "config: out of memory writing JSON");
    fprintf(out, "%s\n", text);
    cJSON_free(text);
    return 0;
}

int zt_train_config_write(const zt_train_config *c, zt_config_format format, FILE *out,
                          zt_error *err) {
    if (!c || !out) return zt_error_set(err, ZT_ERR_USAGE, "config: nothing to write");
    int rc = 0;
    switch (format) {
    case ZT_CONFIG_TABLE: rc = write_table(c, out); break;
    case ZT_CONFIG_YAML: rc = write_yaml(c, out); break;
    case ZT_CONFIG_JSON: rc = write_json(c, out, err); break;
    default: return zt_error_set(err, ZT_ERR_USAGE, "config: unknown output format %d", (int)format);
    }
    if (rc) return rc;
    if (fflush(out) != 0 || ferror(out))
        return zt_error_set(err, ZT_ERR_IO, "config: writing the output failed");
    return ZT_OK;
}

/* ---------------------------------------------------------------------------------------------
 * docs/config.md */

/* A markdown table cell: pipes escaped, newlines as spaces. */
static void cell(FILE *out, const char *s) {
    for (; s && *s; s++) {
        if (*s == '|')
            fputs("\\|", out);
        else if (*s == '\n')
            fputc(' ', out);
        else
            fputc(*s, out);
    }
}

static const char *type_name(const key_def *k) {
    switch (k->type) {
    case KT_INT: return "int";
    case KT_INT64: return "int64";
    case KT_U64: return "uint64";
    case KT_FLOAT: return "float";
    case KT_BOOL: return "bool";
    case KT_STR: return (k->flags & F_LIST) ? "string, list" : "path";
    case KT_ENUM: return "enum";
    case KT_PRESET: return "preset";
    }
    return "?";
}

static void accepts(unsigned a, char *out, size_t cap) {
    static const struct {
        unsigned bit;
        const char *name;
    } names[] = {{A_INT, "int"},  {A_NUM, "number"}, {A_BOOL, "bool"}, {A_STR, "string"},
                 {A_MAP, "object"}, {A_SEQ, "list"}, {A_NULL, "null"}, {A_AUTO, "\"auto\""}};
    size_t n = 0;
    out[0] = '\0';
    if ((a & A_INT) && (a & A_NUM)) a &= ~(unsigned)A_INT;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (!(a & names[i].bit)) continue;
        int w = snprintf(out + n, cap - n, "%s%s", n ? ", " : "", names[i].name);
        if (w < 0 || (size_t)w >= cap - n) break;
        n += (size_t)w;
    }
}

static void dialect_table(FILE *out, const dialect_row *rows, int n, const char *dialect) {
    char acc[96], kind[400];
    fprintf(out, "| %s key | accepts | native key or effect | how |\n| --- | --- | --- | --- |\n", dialect);
    for (int i = 0; i < n; i++) {
        const dialect_row *r = &rows[i];
        if (!r->doc) continue; /* a plain container */
        accepts(r->accept, acc, sizeof acc);
        zt_cfg_row_kind_words(r, kind, sizeof kind);
        fprintf(out, "| `%s` | %s | ", r->path, acc);
        cell(out, kind);
        fputs(" | ", out);
        cell(out, r->doc);
        fputs(" |\n", out);
    }
}

static const char DOCS_HEAD[] =
    "# Configuration reference\n"
    "\n"
    "<!-- Generated by `zerotrain config --docs` from the tables in src/config/ (keys.c, support.c,\n"
    "     dialect_deepspeed.def, dialect_accelerate.def). Do not edit: change the tables and run\n"
    "     `build/zerotrain config --docs > docs/config.md`; tests/test_config_docs.c fails when this\n"
    "     file differs from what the build generates. -->\n"
    "\n"
    "`zerotrain train CONFIG` and `zerotrain config CONFIG` read one of three dialects and resolve\n"
    "it to the native keys below. The dialect is detected: a `.json` file (or one that starts with\n"
    "`{`) is a DeepSpeed config; a file with `distributed_type` or `compute_environment` at the top\n"
    "is an Accelerate config (YAML or JSON); anything else is native YAML (docs/config-train.md).\n"
    "\n"
    "- **Order:** defaults, then the file, then each `--set key=value` (native dotted names), then\n"
    "  the world size at launch (`training.global_batch_size` checks, and derives a `0` micro batch\n"
    "  or accumulation count, DeepSpeed's rule), then the checks of what this build can run.\n"
    "- **Includes:** DeepSpeed and Accelerate files do not name a model or data. A native file may\n"
    "  include one of them (`deepspeed_config: ds.json` or `accelerate_config: acc.yaml`, relative\n"
    "  to the native file) and set the rest itself; a value set in both places must be equal. Or\n"
    "  give the dialect file directly and add `--set data.train=PATH`.\n"
    "- **\"auto\"** (DeepSpeed, Accelerate) keeps zerotrain's value for the key: the native file's,\n"
    "  a `--set`, or the default. The key's source says so.\n"
    "- **Absent DeepSpeed keys** take DeepSpeed's default where it differs from zerotrain's (stage\n"
    "  0, Adam betas 0.9/0.999, weight decay 0, lr 1e-3 with an optimizer block), unless the\n"
    "  including native file sets them.\n"
    "- **Provenance:** `zerotrain config CONFIG` prints every key, its value and where it came\n"
    "  from (default, derived, file:line:column, the dialect key it was mapped from, auto, --set,\n"
    "  launch); `--print` writes native YAML that reads back to the same values; `--json` for tools.\n"
    "- **Strict:** a mistyped key (did-you-mean), duplicates, wrong types, out-of-range values\n"
    "  and contradictions (`micro x accumulation x world != global batch`, a dialect value that\n"
    "  differs from the native one, two dialect keys that disagree) are errors naming\n"
    "  file:line:column and key, all reported together, exit code 2. Keys zerotrain recognizes but\n"
    "  cannot honor on this build are warnings or errors (table below), never silently dropped;\n"
    "  keys with no effect are notes that `zerotrain config` lists. A dialect key close to no known\n"
    "  key is a warning and ignored (DeepSpeed ignores keys it does not read; Accelerate refuses\n"
    "  unknown top-level keys, and so does zerotrain); keys that are comments by convention (`_x`,\n"
    "  `//`) are ignored with a note. A native default that no file set and a dialect value\n"
    "  outgrows (`training.steps` under a scheduler's `warmup_num_steps`) is raised, with a\n"
    "  warning naming the key to set.\n"
    "- **Across ranks:** every rank hashes its resolved values (`zt_train_config_hash`); ranks that\n"
    "  disagree stop with exit code 9.\n"
    "\n";

int zt_config_write_docs(FILE *out, zt_error *err) {
    if (!out) return zt_error_set(err, ZT_ERR_USAGE, "config --docs: no output");
    zt_train_config *d = malloc(sizeof *d);
    if (!d) return zt_error_set(err, ZT_ERR_NOMEM, "config --docs: out of memory");
    zt_train_config_default(d);
    fputs(DOCS_HEAD, out);
    fputs("## Native keys\n\n"
          "Types: `int` (32-bit), `int64`, `uint64`, `float` (32-bit), `bool`, `path`, `enum`, "
          "`preset`.\n\n"
          "| key | type | default | range | meaning |\n| --- | --- | --- | --- | --- |\n",
          out);
    char want[256], v[VAL_MAX];
    for (int i = 0; i < zt_cfg_n_keys; i++) {
        const key_def *k = &zt_cfg_keys[i];
        fprintf(out, "| `%s` | %s | ", k->key, type_name(k));
        if (!k->def)
            fputs(!strncmp(k->key, "model.", 6) ? "from the preset"
                  : k->type == KT_STR         ? "none"
                                              : "derived",
                  out);
        else if (k->type == KT_STR && !k->def[0])
            fputs("empty", out);
        else {
            zt_cfg_format(d, k, v, sizeof v);
            fprintf(out, "`%s`", v);
        }
        fputs(" | ", out);
        if (k->type == KT_STR && (k->flags & F_REQUIRED) && !k->def)
            fputs("required to train", out);
        else if (k->type != KT_STR && k->type != KT_BOOL) {
            zt_cfg_describe(k, want, sizeof want);
            cell(out, want);
        }
        if (k->range) {
            fputs(k->type != KT_STR && k->type != KT_BOOL ? "; " : "", out);
            cell(out, k->range);
        }
        fputs(" | ", out);
        cell(out, k->help);
        fputs(" |\n", out);
    }
    free(d);
    fputs("\n## Recognized but not honored on this build\n\n"
          "An error row refuses the run (exit code 2, before any rank allocates); a warning row runs\n"
          "and says so. The issue that implements a feature deletes its rows (src/config/support.c).\n\n"
          "| key | value | level | why |\n| --- | --- | --- | --- |\n",
          out);
    for (int i = 0; i < zt_cfg_n_support; i++) {
        const support_row *r = &zt_cfg_support[i];
        fprintf(out, "| `%s` | %s | %s | ", r->key, r->value ? r->value : "any but the default",
                level_name(r->level));
        cell(out, r->why);
        fputs(" |\n", out);
    }
    int n;
    const dialect_row *rows = zt_cfg_deepspeed_rows(&n);
    fputs("\n## DeepSpeed JSON to native\n\n"
          "One row per DeepSpeed key (src/config/dialect_deepspeed.def): what it maps to, or its "
          "effect: a note (no effect here), a warning (runs, differently), refused (an error, with "
          "the reason). A key close to one of these is an error with a did-you-mean; any other is "
          "a warning and ignored. `//` and `/* */` comments are allowed (DeepSpeed reads its config "
          "with hjson).\n\n",
          out);
    dialect_table(out, rows, n, "DeepSpeed");
    rows = zt_cfg_accelerate_rows(&n);
    fputs("\n## Accelerate YAML to native\n\n"
          "What `accelerate config` writes (`ClusterConfig`, `SageMakerConfig`), read as `accelerate "
          "launch` reads it; one row per key (src/config/dialect_accelerate.def). "
          "Only the block `distributed_type` selects is read; the other is a note. Switching a file "
          "between DeepSpeed ZeRO-3 and FSDP FULL_SHARD is two lines (`distributed_type` and "
          "`zero_stage: 3` / `fsdp_sharding_strategy: FULL_SHARD`): both resolve to `strategy: "
          "zero3` (examples/accelerate_deepspeed.yaml, examples/accelerate_fsdp.yaml).\n\n",
          out);
    dialect_table(out, rows, n, "Accelerate");
    if (fflush(out) != 0 || ferror(out))
        return zt_error_set(err, ZT_ERR_IO, "config --docs: writing failed");
    return ZT_OK;
}
