/* config_internal.h - what the files of src/config share: the key table (key_table.c, keys.c), the error and
 * note collector every reader uses (so all problems are reported together), setting a key with its
 * provenance (contradictions between sources are found there), the support table (support.c), and
 * the dialect interpreter (dialect_common.c) that DeepSpeed JSON and Accelerate YAML are read
 * through: their documents become cfg_node trees (dialect_tree.c), matched against per-dialect
 * row tables (dialect_*.def) that also generate docs/config.md. Not installed; not an API. */
#ifndef ZT_CONFIG_INTERNAL_H
#define ZT_CONFIG_INTERNAL_H

#include "config/train_config.h"

#include <stdarg.h>

#define ZT_CFG_MAX_SEEN 256

/* ---------------------------------------------------------------------------------------------
 * The key table (rows: key_table.c; functions: keys.c). */

typedef enum key_type {
    KT_INT,    /* int, bounds imin..imax */
    KT_INT64,  /* int64_t, bounds imin..imax */
    KT_U64,    /* uint64_t, any value */
    KT_FLOAT,  /* float, bounds fmin..fmax (open ends per flags), finite */
    KT_BOOL,   /* bool: true/false/yes/no */
    KT_STR,    /* char[size], a path (or a text with F_LIST); length < size */
    KT_ENUM,   /* an int-sized enum, named by enums[] */
    KT_PRESET  /* char[size] naming a zt_gpt2_preset; also fills c->model */
} key_type;

/* F_LIST (KT_STR): a text, not a path; a YAML list of scalars is read as them joined by commas */
enum { F_OPEN_LO = 1u, F_OPEN_HI = 2u, F_REQUIRED = 4u, F_LIST = 8u };

typedef struct enum_value {
    const char *name;
    int value;
} enum_value;

typedef struct key_def {
    const char *key;         /* dotted: "training.steps" */
    key_type type;
    size_t offset, size;     /* the field in zt_train_config */
    int64_t imin, imax;      /* KT_INT, KT_INT64 */
    double fmin, fmax;       /* KT_FLOAT */
    unsigned flags;          /* F_* */
    const enum_value *enums; /* KT_ENUM: ends with {NULL, 0} */
    const char *def;         /* the default as YAML text; NULL: derived, see help */
    const char *help;        /* one line, for docs/config.md */
    const char *range;       /* extra range words for the docs ("<= model.max_seq_len"), or NULL */
} key_def;

extern const key_def zt_cfg_keys[];
extern const int zt_cfg_n_keys;
extern const char *const zt_cfg_sections[];
extern const int zt_cfg_n_sections;

int zt_cfg_key_index(const char *dotted);
int zt_cfg_find_section(const char *s, size_t len);
/* Index of the key named leaf in section sec, or -1. */
int zt_cfg_find_key(int sec, const char *leaf, size_t len);
const char *zt_cfg_leaf(const key_def *k);
/* "a positive integer", "one of: adamw, sgd" */
void zt_cfg_describe(const key_def *k, char *out, size_t cap);
/* "tiny, gpt2-124M, ..." ; "micro_batch_size, seq_len, ..." */
void zt_cfg_list_enum(char *out, size_t cap, const enum_value *e);
void zt_cfg_list_keys(char *out, size_t cap, int sec);
void zt_cfg_list_sections(char *out, size_t cap);
/* Levenshtein distance, or 99 for long strings. */
size_t zt_cfg_edit_distance(const char *a, size_t la, const char *b);
/* "; did you mean training.steps?" for a mistyped leaf in section sec (or any section when sec <
 * 0 and the leaf matches exactly); "" when nothing is close. */
void zt_cfg_suggest_key(char *out, size_t cap, int sec, const char *leaf, size_t len);
/* Copies at most 60 bytes of s into out, control bytes as '?', "..." when cut. */
void zt_cfg_show(char *out, size_t cap, const char *s, size_t len);
/* The canonical text of key k's value in c (what --set and YAML accept back). */
void zt_cfg_format(const zt_train_config *c, const key_def *k, char *out, size_t cap);
/* Parses s (NUL-terminated at len) as key k's value into c. quoted: written as a string (never a
 * number or boolean). On error returns -1 and writes the reason ("expected ..., got \"x\"") into
 * why; c may then be partly written. */
int zt_cfg_parse_value(zt_train_config *c, const key_def *k, const char *s, size_t len, bool quoted,
                       char *why, size_t cap);
/* Range check of the value in c (structs built by hand); reason into why. */
int zt_cfg_check_field(const zt_train_config *c, const key_def *k, char *why, size_t cap);
/* The model.* fields a preset sets (a GPT-2 preset: what GPT-2 is in the llama-only fields). */
void zt_cfg_preset_model(const zt_model_spec *m, zt_llama_config *out);
/* Sets every model.* key from the preset in c->model_preset, with source "model.preset X". */
void zt_cfg_apply_preset_sources(zt_train_config *c);

/* ---------------------------------------------------------------------------------------------
 * Collecting problems. A reader works on a copy of the configuration and keeps going after an
 * error, so that one run reports everything; the caller commits the copy only when there were no
 * errors. */

typedef struct cfg_ctx {
    zt_train_config *c;          /* the working copy */
    int n_errors;
    char **errors;               /* n_errors lines, heap */
    int cap_errors;
    bool nomem;                  /* an allocation failed: report ZT_ERR_NOMEM */
    bool bad[ZT_CONFIG_MAX_KEYS];/* keys whose value was refused: invariants skip them */
    bool native_set[ZT_CONFIG_MAX_KEYS]; /* keys the native file itself set (includes must agree) */
    const char *native_name;     /* the native file, when reading its include */
    const char *main_name;       /* the file given to load (messages for keys it did not set) */
    int depth;                   /* include depth (a native file includes one dialect file, an
                                    Accelerate file one DeepSpeed file) */
} cfg_ctx;

void zt_cfg_ctx_init(cfg_ctx *x, zt_train_config *c);
void zt_cfg_ctx_free(cfg_ctx *x);
/* Adds one error line ("file:line:col: key: problem"). */
void zt_cfg_error(cfg_ctx *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Records a note or warning in x->c (kept with the configuration). */
void zt_cfg_note(cfg_ctx *x, zt_config_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void zt_cfg_note_in(zt_train_config *c, zt_config_level level, const char *text);
/* ZT_OK, or the collected errors in err: the one message, or "N problems:" and one per line. */
int zt_cfg_finish(cfg_ctx *x, zt_error *err);

/* Sets key ki from text, recording origin and the source "<loc> <desc>". loc prefixes an error
 * ("ds.json:9:14", "--set"; may be NULL), label names the key in it (the dialect's key; the
 * native key when NULL). Contradictions: a dialect value for a key the native file set, or for a
 * key the same load already set from another dialect key, must be equal (else an error naming
 * both places); --set always wins. Returns 0, or -1 with the error recorded. */
int zt_cfg_apply(cfg_ctx *x, int ki, const char *val, size_t len, bool quoted,
                 zt_config_origin origin, const char *loc, const char *desc, const char *label);
/* The same for a NUL-terminated value (a dialect mapping's text). */
int zt_cfg_apply_str(cfg_ctx *x, const char *key, const char *val, zt_config_origin origin,
                     const char *loc, const char *desc, const char *label);
/* A dialect's "auto" for key: the value stays; the source says so ("<loc> <desc>: auto, keeps
 * <the value's source>"). */
void zt_cfg_auto(cfg_ctx *x, const char *key, const char *loc, const char *desc);
/* Sets c->source[ki]. */
void zt_cfg_set_source(zt_train_config *c, int ki, zt_config_origin origin, const char *loc,
                       const char *desc);
/* The native YAML reader (native_yaml.c); a deepspeed_config:/accelerate_config: include is read
 * after the file's own keys. */
void zt_cfg_read_native(cfg_ctx *x, const char *text, size_t len, const char *name);
/* Re-derives keys that follow others (training.min_lr = lr / 10 unless set, lr.total_steps). */
void zt_cfg_rederive(zt_train_config *c);

/* The cross-key invariants that hold for any world size (load and validate). Adds errors. */
void zt_cfg_check_invariants(cfg_ctx *x);

/* ---------------------------------------------------------------------------------------------
 * Support table (support.c): values this build recognizes but does not honor. */

typedef struct support_row {
    const char *key;       /* native key */
    const char *value;     /* canonical value text that triggers it; NULL: any non-default value */
    zt_config_level level; /* ZT_CONFIG_WARNING: runs anyway; ZT_CONFIG_ERROR: refused */
    const char *why;       /* "is not implemented in this build yet (issue 6)" */
} support_row;

extern const support_row zt_cfg_support[];
extern const int zt_cfg_n_support;
/* Calls fn(ctx, level, text) for every row and contextual rule that applies to c. */
void zt_cfg_support_check(const zt_train_config *c, zt_config_note_fn fn, void *ctx);

/* ---------------------------------------------------------------------------------------------
 * Dialect documents as trees (dialect_tree.c). */

typedef enum cn_kind { CN_NULL, CN_BOOL, CN_NUM, CN_STR, CN_MAP, CN_SEQ } cn_kind;

typedef struct cfg_node {
    cn_kind kind;
    char *key;                 /* the member name in the parent map; NULL in sequences, root */
    char *text;                /* scalars: the text (JSON strings unescaped, numbers %.17g) */
    double num;                /* CN_NUM */
    bool b;                    /* CN_BOOL */
    bool quoted;               /* written as a string */
    int line, col;             /* 1-based position of the key (of the value when no key); 0: unknown */
    int vline, vcol;           /* the value's position */
    struct cfg_node *child;    /* first member / item */
    struct cfg_node *next;     /* next sibling */
} cfg_node;

void zt_cfg_node_free(cfg_node *n);
/* DeepSpeed JSON (cJSON; // and block comments allowed, as DeepSpeed's hjson reader does) into a
 * tree with positions. Errors (syntax with line:col, duplicate keys) go to x. NULL on failure. */
cfg_node *zt_cfg_json_tree(cfg_ctx *x, const char *text, size_t len, const char *name);
/* Accelerate YAML (libyaml; YAML 1.1 scalars as PyYAML reads them). NULL on failure. */
cfg_node *zt_cfg_yaml_tree(cfg_ctx *x, const char *text, size_t len, const char *name);
/* The child named key of map n, or NULL. */
const cfg_node *zt_cfg_child(const cfg_node *n, const char *key);
const char *zt_cfg_kind_name(const cfg_node *n);

/* What a dialect row accepts. */
enum {
    A_INT = 1u, A_NUM = 2u, A_BOOL = 4u, A_STR = 8u, A_MAP = 16u, A_SEQ = 32u, A_NULL = 64u,
    A_AUTO = 128u, A_ANY = 127u
};

/* What the interpreter (dialect_common.c, row_apply) does with a row's value. Every kind is one
 * branch there; a dialect adds keys by adding rows, never code. "On" for the BLOCK_* kinds: the
 * switch child named by arg ("child=neutral") is present and not neutral; with arg NULL, an
 * "enabled" child that is not false, or else any content. */
typedef enum row_kind {
    RK_MAP,          /* value -> native through the transform; "auto" keeps the native value */
    RK_MAP_NOTE,     /* the same, and doc as a note (a deprecated name, a detail) */
    RK_WALK,         /* a mapping whose keys are rows of their own */
    RK_LATER,        /* recorded for the dialect's resolve code (keys that interact); a mapping
                        is walked too */
    RK_TYPED,        /* a mapping with a "type" that must be one of arg ("a|b|c", any case); its
                        other keys are walked only then; else an error: doc is the reason */
    RK_ALIAS,        /* another name of the row at native (a dialect path): read as that row,
                        with doc as a note when doc is set */
    RK_NOTE,         /* no effect here: doc as a note (with arg: nothing at its neutral values,
                        null or an empty list) */
    RK_WARN,         /* changes what runs: doc as a warning (nothing at arg's neutral values:
                        a neutral value asks for what zerotrain does anyway) */
    RK_REFUSE,       /* known but cannot run: an error with doc as the reason, unless the value
                        is one of arg's neutral values */
    RK_BLOCK_NOTE,   /* a block zerotrain does not read: a note (" (not enabled)" when off) */
    RK_BLOCK_WARN,   /* the same, a warning when on */
    RK_BLOCK_REFUSE  /* the same, an error when on: doc is the reason */
} row_kind;

/* How a value becomes the native key's text (RK_MAP, RK_MAP_NOTE). */
typedef enum row_xf {
    XF_SAME,   /* as written (booleans true/false) */
    XF_TABLE,  /* by arg: "in=out,in=out" (any case; "in=" maps nothing; "null=x" for null; "*"
                  passes any other value as is; else an error listing the inputs) */
    XF_MIB4,   /* elements of 4 bytes -> MiB: DeepSpeed's bucket sizes */
    XF_ON,     /* a number > 0 -> true, 0 -> false */
    XF_MINUS1  /* a count n >= 1 -> n - 1 (DeepSpeed's buffer counts: one buffer is in use) */
} row_xf;

typedef struct dialect_row {
    const char *path;   /* their key, dotted from the root; "x.*": any key below x */
    unsigned accept;    /* A_* */
    const char *native; /* our key (RK_MAP*, and what RK_LATER resolves to); RK_ALIAS: the row */
    row_kind kind;
    row_xf xf;
    const char *arg;    /* XF_TABLE's table; RK_TYPED's types; neutral values "a|b" of RK_NOTE,
                           RK_WARN, RK_REFUSE; the switch "child=neutral" of RK_BLOCK_*; or NULL */
    const char *doc;    /* how it maps, in words (docs/config.md), and the note or the reason */
} dialect_row;

typedef struct dctx {
    cfg_ctx *x;
    const char *file;          /* the file being read, for positions */
    const char *dialect;       /* "deepspeed" or "accelerate" */
    const dialect_row *rows;
    int n_rows;
    const char *strict_root;   /* non-NULL: an unknown top-level key is an error, for this reason
                                  (Accelerate refuses them); else unknown keys with no close match
                                  are warnings (DeepSpeed ignores them) */
    int n_seen;                /* every node the walk met, by row path, for the resolve code */
    const char *seen_path[ZT_CFG_MAX_SEEN];
    const cfg_node *seen_node[ZT_CFG_MAX_SEEN];
} dctx;

/* The node the walk met under a row's path (an alias under its row's), or NULL. */
const cfg_node *zt_cfg_seen(const dctx *d, const char *path);

/* Walks map n (at path prefix, "" for the root) against d->rows: unknown keys (with
 * did-you-mean), kinds, "auto"; calls each row's handler or default mapping. */
void zt_cfg_walk(dctx *d, const cfg_node *n, const char *prefix);
/* "file:line:col" of a node's value (or key when key_pos) into out. */
const char *zt_cfg_where(const dctx *d, const cfg_node *n, bool key_pos, char *out, size_t cap);
/* "file:line:col deepspeed path=value" into out. */
const char *zt_cfg_src(const dctx *d, const cfg_node *n, const char *path, char *out, size_t cap);
/* The scalar's text as shown in messages (strings in quotes). */
void zt_cfg_node_show(const cfg_node *n, char *out, size_t cap);
bool zt_cfg_is_auto(const cfg_node *n);
/* Typed reads with errors recorded (return false on a wrong kind or range). */
bool zt_cfg_get_int(dctx *d, const cfg_node *n, const char *path, int64_t lo, int64_t hi,
                    int64_t *out);
bool zt_cfg_get_num(dctx *d, const cfg_node *n, const char *path, double lo, double hi,
                    double *out);
/* Booleans: true/false; strings "true"/"false"/"yes"/"no" too (Accelerate's str_to_bool). */
bool zt_cfg_get_bool(dctx *d, const cfg_node *n, const char *path, bool *out);
/* Maps a node's value as written (true/false, numbers, strings; null: empty) to a native key;
 * "auto" keeps the native value and says so in its source. */
int zt_cfg_map_node(dctx *d, const cfg_node *n, const char *path, const char *native);
/* Activation checkpointing asked for by a dialect key (DeepSpeed's block, FSDP's flag): on is
 * full, unless the including native file chose selective (a refinement, noted; what names the
 * dialect's way of asking); off is none. */
void zt_cfg_map_checkpointing(dctx *d, const cfg_node *n, const char *path, bool on, const char *what);
/* docs/config.md's words for a row's kind ("`training.lr`", "(note)", "(refused when enabled)"). */
void zt_cfg_row_kind_words(const dialect_row *r, char *out, size_t cap);
/* Maps a dialect value to a native key: the source is "<file:l:c> <dialect> <path>=<value>". */
int zt_cfg_map(dctx *d, const cfg_node *n, const char *path, const char *native, const char *val);
/* A native default nobody set (no file, no --set) that a dialect value outgrows (training.steps
 * below a scheduler's warmup_num_steps): key is raised to need, with a warning naming the key to
 * set, instead of the conflict refusing the file. Does nothing when key was set or is large
 * enough. */
void zt_cfg_fit_default(dctx *d, const char *key, int64_t need, const cfg_node *n, const char *path);
/* Records a note/warning located at n: "<file:l:c>: <path>: <text>". */
void zt_cfg_dnote(dctx *d, zt_config_level level, const cfg_node *n, const char *path,
                  const char *fmt, ...) __attribute__((format(printf, 5, 6)));
void zt_cfg_derror(dctx *d, const cfg_node *n, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* The dialect readers (they apply to x->c; errors collect in x). */
void zt_cfg_read_deepspeed(cfg_ctx *x, const char *text, size_t len, const char *name);
void zt_cfg_read_accelerate(cfg_ctx *x, const char *text, size_t len, const char *name);
/* Reads a whole file (<= 1 MiB) into a NUL-terminated heap buffer; errors into x. */
char *zt_cfg_read_file(cfg_ctx *x, const char *path, size_t *len);
/* path relative to the directory of base (absolute paths unchanged) into out. */
void zt_cfg_relative_to(const char *base, const char *path, char *out, size_t cap);

/* The row tables, for docs/config.md. */
const dialect_row *zt_cfg_deepspeed_rows(int *n);
const dialect_row *zt_cfg_accelerate_rows(int *n);

#endif
