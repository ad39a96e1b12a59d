/* train_config.c - the native YAML training configuration of `zerotrain train CONFIG`: one key
 * table (KEYS below) drives the defaults, the YAML parser, --set overrides, the per-key range
 * checks of zt_train_config_validate, and the key lists in error messages that
 * docs/config-train.md is checked against (tests/test_train_config.c).
 *
 * Invariants:
 *   - every configurable field has exactly one row in KEYS, named "section.key";
 *   - a row's type and bounds are enforced on every path that writes the field (YAML, --set,
 *     defaults) and re-checked by zt_train_config_validate for structs built by hand;
 *   - zt_train_config_parse / _load / _set change *c only when they succeed;
 *   - nothing here exits, aborts or asserts on input: every problem is a ZT_ERR_USAGE whose message
 *     names the file, line:column and dotted key (ZT_ERR_NOMEM / ZT_ERR_IO for the obvious).
 *
 * Derived values: training.min_lr defaults to training.lr / 10 and follows lr until it is set
 * explicitly (in a file: when the file sets min_lr; through --set: while min_lr still equals the
 * old lr / 10); lr.total_steps always equals training.steps; model.preset fills every model.*
 * field first, whatever the key order, and explicit model.* keys then override single fields. */
#include "config/train_config.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <yaml.h>

/* ---------------------------------------------------------------------------------------------
 * The key table. */

typedef enum key_type {
    KT_INT,    /* int, bounds imin..imax */
    KT_INT64,  /* int64_t, bounds imin..imax */
    KT_U64,    /* uint64_t, any value */
    KT_FLOAT,  /* float, bounds fmin..fmax (open ends per flags), finite */
    KT_BOOL,   /* bool: true/false/yes/no */
    KT_STR,    /* char[size], a path; length < size */
    KT_ENUM,   /* an int-sized enum, named by enums[] */
    KT_PRESET  /* char[size] naming a zt_gpt2_preset; also fills c->model */
} key_type;

enum { F_OPEN_LO = 1u, F_OPEN_HI = 2u, F_REQUIRED = 4u };

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
    const char *help;
} key_def;

static const enum_value OPTIMIZERS[] = {{"adamw", ZT_OPT_ADAMW}, {"sgd", ZT_OPT_SGD}, {NULL, 0}};
static const enum_value STRATEGIES[] = {{"ddp", ZT_STRATEGY_DDP},     {"zero1", ZT_STRATEGY_ZERO1},
                                         {"zero2", ZT_STRATEGY_ZERO2}, {"zero3", ZT_STRATEGY_ZERO3},
                                         {"hybrid", ZT_STRATEGY_HYBRID}, {NULL, 0}};
static const enum_value INNER_STRATEGIES[] = {
    {"zero2", ZT_STRATEGY_ZERO2}, {"zero3", ZT_STRATEGY_ZERO3}, {NULL, 0}};
static const enum_value DECAYS[] = {
    {"cosine", ZT_LR_COSINE}, {"linear", ZT_LR_LINEAR}, {"constant", ZT_LR_CONSTANT}, {NULL, 0}};

#define FIELD(f) offsetof(zt_train_config, f), sizeof(((zt_train_config *)0)->f)
#define K_INT(k, f, lo, hi, d, h) {k, KT_INT, FIELD(f), lo, hi, 0, 0, 0, NULL, d, h}
#define K_I64(k, f, lo, hi, d, h) {k, KT_INT64, FIELD(f), lo, hi, 0, 0, 0, NULL, d, h}
#define K_U64(k, f, d, h) {k, KT_U64, FIELD(f), 0, 0, 0, 0, 0, NULL, d, h}
#define K_FLT(k, f, lo, hi, fl, d, h) {k, KT_FLOAT, FIELD(f), 0, 0, lo, hi, fl, NULL, d, h}
#define K_BOOL(k, f, d, h) {k, KT_BOOL, FIELD(f), 0, 0, 0, 0, 0, NULL, d, h}
#define K_STR(k, f, fl, d, h) {k, KT_STR, FIELD(f), 0, 0, 0, 0, fl, NULL, d, h}
#define K_ENUM(k, f, e, d, h) {k, KT_ENUM, FIELD(f), 0, 0, 0, 0, 0, e, d, h}

/* Order: model.preset first (defaults apply it before anything else), then by section. */
static const key_def KEYS[] = {
    {"model.preset", KT_PRESET, FIELD(model_preset), 0, 0, 0, 0, F_REQUIRED, NULL, "tiny",
     "GPT-2 preset: tiny, gpt2-124M (alias gpt2), gpt2-350M, gpt2-774M, gpt2-1558M"},
    K_INT("model.n_layer", model.n_layer, 1, 1024, NULL, "transformer blocks (L)"),
    K_INT("model.n_head", model.n_head, 1, 1024, NULL, "attention heads (NH); divides n_embd"),
    K_INT("model.n_embd", model.n_embd, 1, 65536, NULL, "channels (C)"),
    K_INT("model.vocab_size", model.vocab_size, 1, 16777216, NULL, "vocabulary (V)"),
    K_INT("model.max_seq_len", model.max_seq_len, 1, 1048576, NULL, "positions (wpe rows)"),
    K_STR("data.train", train_path, F_REQUIRED, NULL, "training token file (llm.c .bin); required"),
    K_STR("data.val", val_path, 0, "", "validation token file; empty: none"),
    K_INT("training.micro_batch_size", micro_batch, 1, 65536, "4", "sequences per micro-batch (B)"),
    K_INT("training.seq_len", seq_len, 1, 1048576, "64", "tokens per sequence (T)"),
    K_INT("training.gradient_accumulation_steps", grad_accum, 1, 1048576, "1",
          "micro-batches per optimizer step"),
    K_I64("training.steps", steps, 1, INT64_MAX, "100", "optimizer steps"),
    K_U64("training.seed", seed, "1337", "parameter initialization and sampling seed"),
    K_FLT("training.lr", lr.max_lr, 0.0, HUGE_VAL, F_OPEN_LO, "3e-4", "peak learning rate"),
    K_FLT("training.min_lr", lr.min_lr, 0.0, HUGE_VAL, 0, NULL,
          "final learning rate; default lr/10"),
    K_I64("training.warmup_steps", lr.warmup_steps, 0, INT64_MAX, "0", "linear warmup steps"),
    K_ENUM("training.decay", lr.decay, DECAYS, "cosine", "learning-rate decay after warmup"),
    K_FLT("training.grad_clip", optim.grad_clip, 0.0, HUGE_VAL, 0, "1.0",
          "global-norm clipping threshold; 0: off"),
    K_ENUM("optimizer.type", optim.kind, OPTIMIZERS, "adamw", "optimizer"),
    K_FLT("optimizer.beta1", optim.beta1, 0.0, 1.0, F_OPEN_HI, "0.9", "AdamW beta1"),
    K_FLT("optimizer.beta2", optim.beta2, 0.0, 1.0, F_OPEN_HI, "0.95", "AdamW beta2"),
    K_FLT("optimizer.eps", optim.eps, 0.0, HUGE_VAL, F_OPEN_LO, "1e-8", "AdamW epsilon"),
    K_FLT("optimizer.weight_decay", optim.weight_decay, 0.0, HUGE_VAL, 0, "0.1",
          "weight decay (decoupled in AdamW), on 2-D weights only"),
    K_FLT("optimizer.momentum", optim.momentum, 0.0, 1.0, F_OPEN_HI, "0", "SGD momentum"),
    K_BOOL("optimizer.nesterov", optim.nesterov, "false", "SGD Nesterov momentum"),
    K_INT("eval.every", eval_every, 0, INT_MAX, "0", "evaluate every N steps; 0: never"),
    K_INT("eval.batches", eval_batches, 1, 1048576, "8", "validation micro-batches per evaluation"),
    K_STR("logging.jsonl", log_path, 0, "", "JSONL metrics log; empty: none"),
    K_INT("logging.print_every", print_every, 1, INT_MAX, "1",
          "print a progress line every N steps"),
    K_INT("sample.tokens", sample_tokens, 0, 1048576, "0", "tokens to sample after training"),
    K_INT("parallel.nproc", nproc, 1, 4096, "1",
          "local ranks `zerotrain train` starts (through mpirun); --nproc overrides"),
    K_ENUM("parallel.strategy", strategy, STRATEGIES, "ddp",
           "sharding strategy (docs/strategies.md)"),
    K_INT("parallel.hybrid_shard_size", hybrid_shard_size, 0, 1048576, "0",
          "hybrid: ranks per shard group (divides the world); 0: the whole world"),
    K_ENUM("parallel.hybrid_inner", hybrid_inner, INNER_STRATEGIES, "zero3",
           "hybrid: the strategy inside a shard group"),
    K_BOOL("parallel.reshard_after_forward", reshard_after_forward, "true",
           "zero3: free gathered parameters after forward (FSDP2's reshard_after_forward)"),
    K_BOOL("parallel.reduce_every_micro_batch", reduce_every_micro_batch, "false",
           "zero2/zero3 with accumulation: reduce-scatter each micro-batch (memory-lean) instead of "
           "deferring to the last (no_sync)"),
    K_FLT("parallel.bucket_mb", bucket_mb, 0.0, HUGE_VAL, F_OPEN_LO, "25",
          "gradient fusion bucket size in MiB"),
};
#define N_KEYS ((int)(sizeof KEYS / sizeof KEYS[0]))

static const char *const SECTIONS[] = {"model", "data", "training", "optimizer", "eval", "logging",
                                       "sample", "parallel"};
#define N_SECTIONS ((int)(sizeof SECTIONS / sizeof SECTIONS[0]))

/* Presets zt_gpt2_preset knows (for messages only: zt_gpt2_preset decides). */
#define PRESET_NAMES "tiny, gpt2-124M, gpt2, gpt2-350M, gpt2-774M, gpt2-1558M"

/* ---------------------------------------------------------------------------------------------
 * Small helpers. */

/* A scalar as written: s is NUL-terminated at len (an earlier NUL is an error). */
typedef struct scalar {
    const char *s;
    size_t len;
    bool quoted; /* written in quotes or as a block scalar: always a string */
} scalar;

/* Where a value came from, for messages: "tiny.yaml:4:9", "--set", "default". */
typedef struct where {
    char text[ZT_PATH_MAX + 48];
} where;

/* Copies at most 60 bytes of s into out, control bytes as '?', "..." when cut. */
static void show(char *out, size_t cap, const char *s, size_t len) {
    size_t n = 0, lim = len < 60 ? len : 60;
    for (size_t i = 0; i < lim && n + 4 < cap; i++) {
        unsigned char ch = (unsigned char)s[i];
        out[n++] = (ch < 0x20 || ch == 0x7f) ? '?' : (char)ch;
    }
    if (lim < len && n + 4 <= cap) {
        memcpy(out + n, "...", 3);
        n += 3;
    }
    out[n < cap ? n : cap - 1] = '\0';
}

/* Fills err with "<where>: <key>: <message>" (either prefix may be NULL). Returns ZT_ERR_USAGE. */
static int fail(zt_error *err, const char *wh, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(zt_error *err, const char *wh, const char *key, const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return zt_error_set(err, ZT_ERR_USAGE, "%s%s%s%s%s", wh ? wh : "", wh ? ": " : "",
                        key ? key : "", key ? ": " : "", msg);
}

static const char *section_of(const key_def *k, size_t *len) {
    *len = (size_t)(strchr(k->key, '.') - k->key);
    return k->key;
}
static const char *leaf_of(const key_def *k) { return strchr(k->key, '.') + 1; }

static int find_section(const char *s, size_t len) {
    for (int i = 0; i < N_SECTIONS; i++)
        if (strlen(SECTIONS[i]) == len && memcmp(SECTIONS[i], s, len) == 0) return i;
    return -1;
}

/* Index of the key named leaf in section sec, or -1. */
static int find_key(int sec, const char *leaf, size_t len) {
    size_t sl = strlen(SECTIONS[sec]);
    for (int i = 0; i < N_KEYS; i++) {
        size_t ksl;
        section_of(&KEYS[i], &ksl);
        const char *lf = leaf_of(&KEYS[i]);
        if (ksl == sl && memcmp(KEYS[i].key, SECTIONS[sec], sl) == 0 && strlen(lf) == len &&
            memcmp(lf, leaf, len) == 0)
            return i;
    }
    return -1;
}

static int key_index(const char *dotted) {
    for (int i = 0; i < N_KEYS; i++)
        if (strcmp(KEYS[i].key, dotted) == 0) return i;
    return -1;
}

/* Levenshtein distance, or 99 for long strings. */
static size_t edit_distance(const char *a, size_t la, const char *b) {
    size_t lb = strlen(b), row[64];
    if (la >= 64 || lb >= 64) return 99;
    for (size_t j = 0; j <= lb; j++) row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t prev = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t cur = row[j], best = prev + (a[i - 1] != b[j - 1]);
            if (row[j] + 1 < best) best = row[j] + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            prev = cur;
        }
    }
    return row[lb];
}

/* "did you mean training.steps? " for a mistyped leaf: the closest key of the section (distance
 * <= 2), else a key of that name in another section; "" when nothing is close. */
static void suggest_key(char *out, size_t cap, int sec, const char *leaf, size_t len) {
    int best = -1;
    size_t best_d = 3;
    for (int i = 0; i < N_KEYS; i++) {
        size_t ksl;
        section_of(&KEYS[i], &ksl);
        bool same = sec >= 0 && ksl == strlen(SECTIONS[sec]) &&
                    memcmp(KEYS[i].key, SECTIONS[sec], ksl) == 0;
        size_t d = edit_distance(leaf, len, leaf_of(&KEYS[i]));
        if (!same && d != 0) continue; /* other sections: exact leaf only */
        if (d < best_d) {
            best_d = d;
            best = i;
        }
    }
    if (best >= 0)
        snprintf(out, cap, "; did you mean %s?", KEYS[best].key);
    else if (cap)
        out[0] = '\0';
}

/* "micro_batch_size, seq_len, ..." */
static void list_keys(char *out, size_t cap, int sec) {
    size_t n = 0, sl = strlen(SECTIONS[sec]);
    out[0] = '\0';
    for (int i = 0; i < N_KEYS; i++) {
        size_t ksl;
        section_of(&KEYS[i], &ksl);
        if (ksl != sl || memcmp(KEYS[i].key, SECTIONS[sec], sl) != 0) continue;
        int w = snprintf(out + n, cap - n, "%s%s", n ? ", " : "", leaf_of(&KEYS[i]));
        if (w < 0 || (size_t)w >= cap - n) break;
        n += (size_t)w;
    }
}

static void list_sections(char *out, size_t cap) {
    size_t n = 0;
    out[0] = '\0';
    for (int i = 0; i < N_SECTIONS; i++) {
        int w = snprintf(out + n, cap - n, "%s%s", i ? ", " : "", SECTIONS[i]);
        if (w < 0 || (size_t)w >= cap - n) break;
        n += (size_t)w;
    }
}

static void list_enum(char *out, size_t cap, const enum_value *e) {
    size_t n = 0;
    out[0] = '\0';
    for (int i = 0; e[i].name; i++) {
        int w = snprintf(out + n, cap - n, "%s%s", i ? ", " : "", e[i].name);
        if (w < 0 || (size_t)w >= cap - n) break;
        n += (size_t)w;
    }
}

/* What a key expects, for messages: "a positive integer", "a number in [0, 1)". */
static void describe(const key_def *k, char *out, size_t cap) {
    switch (k->type) {
    case KT_INT:
    case KT_INT64: {
        int64_t tmax = k->type == KT_INT ? INT_MAX : INT64_MAX;
        if (k->imax == tmax && k->imin == 1)
            snprintf(out, cap, "a positive integer");
        else if (k->imax == tmax && k->imin == 0)
            snprintf(out, cap, "a non-negative integer");
        else
            snprintf(out, cap, "an integer in [%lld, %lld]", (long long)k->imin,
                     (long long)k->imax);
        break;
    }
    case KT_U64: snprintf(out, cap, "a non-negative integer below 2^64"); break;
    case KT_FLOAT:
        if (isinf(k->fmax) && k->fmin == 0.0)
            snprintf(out, cap, "a %s number", (k->flags & F_OPEN_LO) ? "positive" : "non-negative");
        else
            snprintf(out, cap, "a number in %c%g, %g%c", (k->flags & F_OPEN_LO) ? '(' : '[',
                     k->fmin, k->fmax, (k->flags & F_OPEN_HI) ? ')' : ']');
        break;
    case KT_BOOL: snprintf(out, cap, "true or false (or yes/no)"); break;
    case KT_STR:
        snprintf(out, cap, "a %spath shorter than %zu bytes",
                 (k->flags & F_REQUIRED) ? "non-empty " : "", k->size);
        break;
    case KT_ENUM: {
        char names[128];
        list_enum(names, sizeof names, k->enums);
        snprintf(out, cap, "one of: %s", names);
        break;
    }
    case KT_PRESET: snprintf(out, cap, "a preset name (%s)", PRESET_NAMES); break;
    }
}

static bool is_null(const scalar *v) {
    return !v->quoted && (v->len == 0 || strcmp(v->s, "~") == 0 || strcmp(v->s, "null") == 0 ||
                          strcmp(v->s, "Null") == 0 || strcmp(v->s, "NULL") == 0);
}

/* Decimal integer, optional sign, digits only, whole string, no overflow. */
static bool parse_i64(const char *s, int64_t *out) {
    const char *p = s + (*s == '+' || *s == '-');
    if (*p < '0' || *p > '9') return false;
    for (const char *q = p; *q; q++)
        if (*q < '0' || *q > '9') return false;
    errno = 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (errno == ERANGE || *end) return false;
    *out = (int64_t)v;
    return true;
}

static bool parse_u64(const char *s, uint64_t *out) {
    const char *p = s + (*s == '+');
    if (*p < '0' || *p > '9') return false;
    for (const char *q = p; *q; q++)
        if (*q < '0' || *q > '9') return false;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(p, &end, 10);
    if (errno == ERANGE || *end) return false;
    *out = (uint64_t)v;
    return true;
}

/* Decimal number ("3e-4", "0.9", "10"): no hex, inf, nan, spaces or YAML's ".inf". */
static bool parse_double(const char *s, double *out) {
    const char *p = s + (*s == '+' || *s == '-');
    if (!((*p >= '0' && *p <= '9') || (*p == '.' && p[1] >= '0' && p[1] <= '9'))) return false;
    if (strpbrk(s, "xXpP")) return false;
    errno = 0;
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end || !isfinite(v)) return false;
    *out = v;
    return true;
}

/* ---------------------------------------------------------------------------------------------
 * Setting one key. */

/* A row whose type does not match its field's size: a bug in KEYS. */
static int bad_row(const key_def *k, zt_error *err) {
    return zt_error_set(err, ZT_ERR_INTERNAL, "%s: the key table's row does not fit its field",
                        k->key);
}

static void store(zt_train_config *c, const key_def *k, const void *v, size_t n) {
    memcpy((char *)c + k->offset, v, n);
}

/* Parses v as key k and writes it into c. wh names the place for messages. follow_min_lr: a new
 * training.lr also sets training.min_lr = lr / 10. On error c may be partly written (callers
 * work on a copy). */
static int apply(zt_train_config *c, const key_def *k, const scalar *v, const char *wh,
                 bool follow_min_lr, zt_error *err) {
    char got[96], want[192];
    show(got, sizeof got, v->s, v->len);
    describe(k, want, sizeof want);
    if (strlen(v->s) != v->len) return fail(err, wh, k->key, "the value contains a NUL byte");
    const char *kind = v->quoted ? " (a quoted string)" : "";

    switch (k->type) {
    case KT_INT:
    case KT_INT64: {
        int64_t x;
        if (v->quoted || is_null(v) || !parse_i64(v->s, &x) || x < k->imin || x > k->imax)
            return fail(err, wh, k->key, "expected %s, got \"%s\"%s", want, got, kind);
        if (k->type == KT_INT) {
            int i = (int)x;
            if (k->size != sizeof i) return bad_row(k, err);
            store(c, k, &i, sizeof i);
        } else {
            if (k->size != sizeof x) return bad_row(k, err);
            store(c, k, &x, sizeof x);
        }
        break;
    }
    case KT_U64: {
        uint64_t x;
        if (v->quoted || is_null(v) || !parse_u64(v->s, &x))
            return fail(err, wh, k->key, "expected %s, got \"%s\"%s", want, got, kind);
        if (k->size != sizeof x) return bad_row(k, err);
        store(c, k, &x, sizeof x);
        break;
    }
    case KT_FLOAT: {
        double d;
        if (v->quoted || is_null(v) || !parse_double(v->s, &d))
            return fail(err, wh, k->key, "expected %s, got \"%s\"%s", want, got, kind);
        float f = (float)d; /* the range applies to the value actually stored */
        bool lo_ok = (k->flags & F_OPEN_LO) ? f > k->fmin : f >= k->fmin;
        bool hi_ok = (k->flags & F_OPEN_HI) ? f < k->fmax : f <= k->fmax;
        if (!isfinite(f) || !lo_ok || !hi_ok)
            return fail(err, wh, k->key, "expected %s, got \"%s\"", want, got);
        if (k->size != sizeof f) return bad_row(k, err);
        store(c, k, &f, sizeof f);
        if (follow_min_lr && k->offset == offsetof(zt_train_config, lr.max_lr))
            c->lr.min_lr = c->lr.max_lr / 10.0f;
        break;
    }
    case KT_BOOL: {
        bool b;
        if (!v->quoted && (strcasecmp(v->s, "true") == 0 || strcasecmp(v->s, "yes") == 0))
            b = true;
        else if (!v->quoted && (strcasecmp(v->s, "false") == 0 || strcasecmp(v->s, "no") == 0))
            b = false;
        else
            return fail(err, wh, k->key, "expected %s, got \"%s\"%s", want, got, kind);
        if (k->size != sizeof b) return bad_row(k, err);
        store(c, k, &b, sizeof b);
        break;
    }
    case KT_STR: {
        size_t n = is_null(v) ? 0 : v->len;
        if (n == 0 && (k->flags & F_REQUIRED))
            return fail(err, wh, k->key, "expected %s, got an empty value", want);
        if (n >= k->size)
            return fail(err, wh, k->key, "the path is %zu bytes long; the limit is %zu", n,
                        k->size - 1);
        char *dst = (char *)c + k->offset;
        memset(dst, 0, k->size);
        memcpy(dst, v->s, n);
        break;
    }
    case KT_ENUM: {
        int i;
        for (i = 0; k->enums[i].name; i++)
            if (strcasecmp(k->enums[i].name, v->s) == 0) break;
        if (!k->enums[i].name || is_null(v)) {
            char names[128];
            list_enum(names, sizeof names, k->enums);
            return fail(err, wh, k->key, "unknown value \"%s\" (allowed: %s)", got, names);
        }
        if (k->size != sizeof(int)) return bad_row(k, err);
        store(c, k, &k->enums[i].value, sizeof(int));
        break;
    }
    case KT_PRESET: {
        zt_gpt2_config m;
        zt_error perr = {0};
        if (is_null(v) || v->len >= k->size || zt_gpt2_preset(v->s, &m, &perr) != ZT_OK)
            return fail(err, wh, k->key, "unknown preset \"%s\" (allowed: %s)", got, PRESET_NAMES);
        char *dst = (char *)c + k->offset;
        memset(dst, 0, k->size);
        memcpy(dst, v->s, v->len);
        c->model = m;
        break;
    }
    }
    if (k->offset == offsetof(zt_train_config, steps)) c->lr.total_steps = c->steps;
    return ZT_OK;
}

/* ---------------------------------------------------------------------------------------------
 * Validation: every key's range (for hand-built structs) and the cross-field invariants. */

typedef struct parse_state {
    const char *name;         /* the file name, NULL for --set / validate */
    bool seen[N_KEYS];        /* set by this file */
    size_t line[N_KEYS];      /* 1-based position of the key, when seen */
    size_t col[N_KEYS];
    bool seen_section[N_SECTIONS];
    size_t section_line[N_SECTIONS];
} parse_state;

/* The message prefix for an invariant involving key ki: "tiny.yaml:7:3" when the file set the
 * key, "tiny.yaml" when it did not, NULL outside a file. */
static const char *where_key(const parse_state *st, int ki, where *w) {
    if (!st || !st->name) return NULL;
    if (ki >= 0 && st->seen[ki])
        snprintf(w->text, sizeof w->text, "%s:%zu:%zu", st->name, st->line[ki], st->col[ki]);
    else
        snprintf(w->text, sizeof w->text, "%s", st->name);
    return w->text;
}

/* Re-checks one field against its row. */
static int check_field(const zt_train_config *c, const key_def *k, const parse_state *st,
                       zt_error *err) {
    const char *p = (const char *)c + k->offset;
    char want[192];
    where w;
    const char *wh = where_key(st, (int)(k - KEYS), &w);
    describe(k, want, sizeof want);
    switch (k->type) {
    case KT_INT:
    case KT_INT64: {
        int64_t x;
        if (k->type == KT_INT) {
            int i;
            memcpy(&i, p, sizeof i);
            x = i;
        } else {
            memcpy(&x, p, sizeof x);
        }
        if (x < k->imin || x > k->imax)
            return fail(err, wh, k->key, "expected %s, got %lld", want, (long long)x);
        break;
    }
    case KT_FLOAT: {
        float f;
        memcpy(&f, p, sizeof f);
        bool lo_ok = (k->flags & F_OPEN_LO) ? f > k->fmin : f >= k->fmin;
        bool hi_ok = (k->flags & F_OPEN_HI) ? f < k->fmax : f <= k->fmax;
        if (!isfinite(f) || !lo_ok || !hi_ok)
            return fail(err, wh, k->key, "expected %s, got %g", want, (double)f);
        break;
    }
    case KT_STR:
    case KT_PRESET:
        if (!memchr(p, '\0', k->size))
            return fail(err, wh, k->key, "not NUL-terminated within %zu bytes", k->size);
        if ((k->flags & F_REQUIRED) && p[0] == '\0') {
            if (k->offset == offsetof(zt_train_config, train_path))
                return fail(err, wh, k->key, "missing: set the training token file "
                                             "(data: train: PATH, or --set data.train=PATH)");
            return fail(err, wh, k->key, "missing: expected %s", want);
        }
        break;
    case KT_ENUM: {
        int x;
        memcpy(&x, p, sizeof x);
        int i;
        for (i = 0; k->enums[i].name; i++)
            if (k->enums[i].value == x) break;
        if (!k->enums[i].name)
            return fail(err, wh, k->key, "invalid value %d: expected %s", x, want);
        break;
    }
    case KT_U64:
    case KT_BOOL: break;
    }
    return ZT_OK;
}

static int validate(const zt_train_config *c, const parse_state *st, zt_error *err) {
    if (!c) return zt_error_set(err, ZT_ERR_USAGE, "train config: NULL configuration");
    for (int i = 0; i < N_KEYS; i++) {
        int rc = check_field(c, &KEYS[i], st, err);
        if (rc) return rc;
    }
    where w;
    /* located at the first key the file set, else the second: "t.yaml:7:3" */
#define WK(name) where_key(st, key_index(name), &w)
#define WK2(a, b) where_key(st, st && st->seen[key_index(a)] ? key_index(a) : key_index(b), &w)
    if (c->model.n_embd % c->model.n_head != 0)
        return fail(err, WK2("model.n_head", "model.n_embd"), "model.n_head",
                    "%d does not divide model.n_embd (%d)", c->model.n_head, c->model.n_embd);
    if (c->seq_len > c->model.max_seq_len)
        return fail(err, WK2("training.seq_len", "model.max_seq_len"), "training.seq_len",
                    "%d exceeds model.max_seq_len (%d)", c->seq_len, c->model.max_seq_len);
    if ((int64_t)c->micro_batch * c->seq_len > INT_MAX)
        return fail(err, WK2("training.micro_batch_size", "training.seq_len"),
                    "training.micro_batch_size",
                    "%d sequences of %d tokens is more than %d tokens per micro-batch",
                    c->micro_batch, c->seq_len, INT_MAX);
    if (c->lr.warmup_steps > c->steps)
        return fail(err, WK2("training.warmup_steps", "training.steps"), "training.warmup_steps",
                    "%lld exceeds training.steps (%lld)", (long long)c->lr.warmup_steps,
                    (long long)c->steps);
    if (c->lr.min_lr > c->lr.max_lr)
        return fail(err, WK2("training.min_lr", "training.lr"), "training.min_lr",
                    "%g exceeds training.lr (%g)", (double)c->lr.min_lr, (double)c->lr.max_lr);
    if (c->lr.total_steps != c->steps)
        return fail(err, NULL, "training.steps", "lr.total_steps (%lld) differs from steps (%lld)",
                    (long long)c->lr.total_steps, (long long)c->steps);
    if (c->optim.nesterov && c->optim.momentum <= 0.0f)
        return fail(err, WK2("optimizer.nesterov", "optimizer.momentum"), "optimizer.nesterov",
                    "needs optimizer.momentum > 0 (it is %g)", (double)c->optim.momentum);
    if (c->eval_every > 0 && c->val_path[0] == '\0')
        return fail(err, WK2("eval.every", "data.val"), "eval.every",
                    "%d needs a validation file: set data.val (or eval.every: 0)", c->eval_every);
    if (c->sample_tokens > c->model.max_seq_len)
        return fail(err, WK2("sample.tokens", "model.max_seq_len"), "sample.tokens",
                    "%d exceeds model.max_seq_len (%d)", c->sample_tokens, c->model.max_seq_len);
#undef WK
#undef WK2
    return ZT_OK;
}

int zt_train_config_validate(const zt_train_config *c, zt_error *err) {
    return validate(c, NULL, err);
}

/* ---------------------------------------------------------------------------------------------
 * Defaults and --set. */

void zt_train_config_default(zt_train_config *c) {
    if (!c) return;
    memset(c, 0, sizeof *c);
    for (int i = 0; i < N_KEYS; i++) {
        if (!KEYS[i].def) continue;
        scalar v = {KEYS[i].def, strlen(KEYS[i].def), false};
        apply(c, &KEYS[i], &v, "default", false, NULL); /* tested: cannot fail */
    }
    c->lr.min_lr = c->lr.max_lr / 10.0f;
    c->lr.total_steps = c->steps;
}

/* The error for an unknown section (leaf NULL) or key: what is close, and what exists. A --set
 * key without a dot (is_set) is reported as a key. */
static int unknown_key(zt_error *err, const char *wh, bool is_set, const char *sec, size_t sl,
                       const char *leaf, size_t ll) {
    char shown[96], hint[128], names[512];
    int s = find_section(sec, sl);
    if (s < 0) {
        show(shown, sizeof shown, sec, sl);
        hint[0] = '\0';
        for (int i = 0; i < N_SECTIONS; i++)
            if (edit_distance(sec, sl, SECTIONS[i]) <= 2) {
                snprintf(hint, sizeof hint, "; did you mean %s?", SECTIONS[i]);
                break;
            }
        if (!hint[0] && !leaf) suggest_key(hint, sizeof hint, -1, sec, sl); /* "steps: 10" */
        list_sections(names, sizeof names);
        if (is_set && !leaf)
            return fail(err, wh, NULL, "%s: unknown key%s (keys are section.key; sections: %s)",
                        shown, hint, names);
        return fail(err, wh, NULL, "%s: unknown section%s (sections: %s)", shown, hint, names);
    }
    list_keys(names, sizeof names, s);
    if (!leaf) /* --set training=1 */
        return fail(err, wh, NULL, "%s: a section, not a key (%s keys: %s)", SECTIONS[s],
                    SECTIONS[s], names);
    char full[200];
    snprintf(full, sizeof full, "%.*s.%.*s", (int)sl, sec, (int)(ll < 80 ? ll : 80), leaf);
    show(shown, sizeof shown, full, strlen(full));
    suggest_key(hint, sizeof hint, s, leaf, ll);
    return fail(err, wh, NULL, "%s: unknown key%s (%s keys: %s)", shown, hint, SECTIONS[s], names);
}

int zt_train_config_set(zt_train_config *c, const char *assignment, zt_error *err) {
    if (!c || !assignment) return zt_error_set(err, ZT_ERR_USAGE, "--set: no assignment given");
    char shown[96];
    const char *eq = strchr(assignment, '=');
    if (!eq) {
        show(shown, sizeof shown, assignment, strlen(assignment));
        return fail(err, "--set", NULL, "\"%s\": expected key=value (e.g. training.steps=10)",
                    shown);
    }
    const char *ks = assignment, *ke = eq;
    while (ks < ke && (*ks == ' ' || *ks == '\t')) ks++;
    while (ke > ks && (ke[-1] == ' ' || ke[-1] == '\t')) ke--;
    const char *vs = eq + 1;
    while (*vs == ' ' || *vs == '\t') vs++;
    size_t vl = strlen(vs);
    while (vl && (vs[vl - 1] == ' ' || vs[vl - 1] == '\t')) vl--;

    if (ks == ke) {
        show(shown, sizeof shown, assignment, strlen(assignment));
        return fail(err, "--set", NULL, "\"%s\": empty key; expected key=value", shown);
    }
    const char *dot = memchr(ks, '.', (size_t)(ke - ks));
    int ki = -1;
    if (dot) {
        int s = find_section(ks, (size_t)(dot - ks));
        if (s >= 0) ki = find_key(s, dot + 1, (size_t)(ke - dot - 1));
    }
    if (ki < 0) {
        if (!dot) return unknown_key(err, "--set", true, ks, (size_t)(ke - ks), NULL, 0);
        return unknown_key(err, "--set", true, ks, (size_t)(dot - ks), dot + 1,
                           (size_t)(ke - dot - 1));
    }
    char *val = malloc(vl + 1);
    if (!val) return zt_error_set(err, ZT_ERR_NOMEM, "--set %s: out of memory", KEYS[ki].key);
    memcpy(val, vs, vl);
    val[vl] = '\0';
    scalar v = {val, vl, false};
    zt_train_config tmp = *c;
    bool follow = tmp.lr.min_lr == tmp.lr.max_lr / 10.0f;
    int rc = apply(&tmp, &KEYS[ki], &v, "--set", follow, err);
    free(val);
    if (rc == ZT_OK) *c = tmp;
    return rc;
}

/* ---------------------------------------------------------------------------------------------
 * YAML. */

static const char *node_kind(const yaml_node_t *n) {
    switch (n->type) {
    case YAML_SCALAR_NODE: return "a scalar";
    case YAML_SEQUENCE_NODE: return "a sequence";
    case YAML_MAPPING_NODE: return "a mapping";
    default: return "nothing";
    }
}

static void at(where *w, const char *name, const yaml_node_t *n) {
    snprintf(w->text, sizeof w->text, "%s:%zu:%zu", name, n->start_mark.line + 1,
             n->start_mark.column + 1);
}

static scalar scalar_of(const yaml_node_t *n) {
    scalar v = {(const char *)n->data.scalar.value, n->data.scalar.length,
                n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE};
    return v;
}

/* A section whose value is empty / ~ / null counts as empty. */
static bool is_null_node(const yaml_node_t *n) {
    if (n->type != YAML_SCALAR_NODE) return false;
    scalar v = scalar_of(n);
    return is_null(&v);
}

/* Applies model.preset before anything else, whatever the key order. */
static int apply_preset_first(zt_train_config *c, yaml_document_t *doc, yaml_node_t *root,
                              parse_state *st, zt_error *err) {
    for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top;
         p++) {
        yaml_node_t *k = yaml_document_get_node(doc, p->key);
        yaml_node_t *v = yaml_document_get_node(doc, p->value);
        if (!k || !v || k->type != YAML_SCALAR_NODE || v->type != YAML_MAPPING_NODE) continue;
        if (strcmp((const char *)k->data.scalar.value, "model") != 0) continue;
        for (yaml_node_pair_t *q = v->data.mapping.pairs.start; q < v->data.mapping.pairs.top;
             q++) {
            yaml_node_t *kk = yaml_document_get_node(doc, q->key);
            yaml_node_t *vv = yaml_document_get_node(doc, q->value);
            if (!kk || !vv || kk->type != YAML_SCALAR_NODE || vv->type != YAML_SCALAR_NODE)
                continue;
            if (strcmp((const char *)kk->data.scalar.value, "preset") != 0) continue;
            where w;
            at(&w, st->name, vv);
            scalar sv = scalar_of(vv);
            return apply(c, &KEYS[key_index("model.preset")], &sv, w.text, false, err);
        }
        return ZT_OK; /* only the first model: section; a second one is reported later */
    }
    return ZT_OK;
}

static int walk(zt_train_config *c, yaml_document_t *doc, parse_state *st, zt_error *err) {
    yaml_node_t *root = yaml_document_get_root_node(doc);
    where w;
    char names[256];
    if (!root || is_null_node(root)) return ZT_OK; /* an empty file sets nothing */
    if (root->type != YAML_MAPPING_NODE) {
        at(&w, st->name, root);
        list_sections(names, sizeof names);
        return fail(err, w.text, NULL, "expected a mapping of sections (%s), got %s", names,
                    node_kind(root));
    }
    int rc = apply_preset_first(c, doc, root, st, err);
    if (rc) return rc;
    int preset_ki = key_index("model.preset");

    for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top;
         p++) {
        yaml_node_t *k = yaml_document_get_node(doc, p->key);
        yaml_node_t *v = yaml_document_get_node(doc, p->value);
        if (!k || !v)
            return zt_error_set(err, ZT_ERR_INTERNAL, "%s: broken YAML document", st->name);
        at(&w, st->name, k);
        if (k->type != YAML_SCALAR_NODE)
            return fail(err, w.text, NULL, "expected a section name, got %s", node_kind(k));
        scalar ks = scalar_of(k);
        int s = strlen(ks.s) == ks.len ? find_section(ks.s, ks.len) : -1;
        if (s < 0) {
            const char *dot = memchr(ks.s, '.', ks.len);
            if (dot && key_index(ks.s) >= 0) {
                int sec = find_section(ks.s, (size_t)(dot - ks.s));
                return fail(err, w.text, ks.s,
                            "dotted keys are for --set; in YAML write it nested: %s: then %s:",
                            SECTIONS[sec], dot + 1);
            }
            return unknown_key(err, w.text, false, ks.s, ks.len, NULL, 0);
        }
        if (st->seen_section[s])
            return fail(err, w.text, SECTIONS[s], "duplicate section (first at line %zu)",
                        st->section_line[s]);
        st->seen_section[s] = true;
        st->section_line[s] = k->start_mark.line + 1;
        if (is_null_node(v)) continue; /* "eval:" with nothing under it */
        if (v->type != YAML_MAPPING_NODE) {
            at(&w, st->name, v);
            list_keys(names, sizeof names, s);
            return fail(err, w.text, SECTIONS[s], "expected a mapping of %s keys (%s), got %s",
                        SECTIONS[s], names, node_kind(v));
        }
        for (yaml_node_pair_t *q = v->data.mapping.pairs.start; q < v->data.mapping.pairs.top;
             q++) {
            yaml_node_t *kk = yaml_document_get_node(doc, q->key);
            yaml_node_t *vv = yaml_document_get_node(doc, q->value);
            if (!kk || !vv)
                return zt_error_set(err, ZT_ERR_INTERNAL, "%s: broken YAML document", st->name);
            at(&w, st->name, kk);
            if (kk->type != YAML_SCALAR_NODE)
                return fail(err, w.text, SECTIONS[s], "expected a key name, got %s", node_kind(kk));
            scalar kks = scalar_of(kk);
            int ki = strlen(kks.s) == kks.len ? find_key(s, kks.s, kks.len) : -1;
            if (ki < 0)
                return unknown_key(err, w.text, false, SECTIONS[s], strlen(SECTIONS[s]), kks.s,
                                   kks.len);
            if (st->seen[ki])
                return fail(err, w.text, KEYS[ki].key, "duplicate key (first at line %zu)",
                            st->line[ki]);
            st->seen[ki] = true;
            st->line[ki] = kk->start_mark.line + 1;
            st->col[ki] = kk->start_mark.column + 1;
            at(&w, st->name, vv);
            if (vv->type != YAML_SCALAR_NODE) {
                char want[192];
                describe(&KEYS[ki], want, sizeof want);
                return fail(err, w.text, KEYS[ki].key, "expected %s, got %s", want, node_kind(vv));
            }
            if (ki == preset_ki) continue; /* applied first */
            scalar sv = scalar_of(vv);
            rc = apply(c, &KEYS[ki], &sv, w.text, !st->seen[key_index("training.min_lr")], err);
            if (rc) return rc;
        }
    }
    return ZT_OK;
}

static int yaml_error(const yaml_parser_t *p, const char *name, zt_error *err) {
    if (p->error == YAML_MEMORY_ERROR)
        return zt_error_set(err, ZT_ERR_NOMEM, "%s: out of memory parsing YAML", name);
    const char *problem = p->problem ? p->problem : "unknown error";
    if (p->error == YAML_READER_ERROR)
        return zt_error_set(err, ZT_ERR_USAGE, "%s: byte %zu: YAML syntax error: %s", name,
                            p->problem_offset, problem);
    char ctx[160] = "";
    if (p->context)
        snprintf(ctx, sizeof ctx, " (%s at line %zu)", p->context, p->context_mark.line + 1);
    return zt_error_set(err, ZT_ERR_USAGE, "%s:%zu:%zu: YAML syntax error: %s%s", name,
                        p->problem_mark.line + 1, p->problem_mark.column + 1, problem, ctx);
}

int zt_train_config_parse(zt_train_config *c, const char *yaml, size_t len, const char *name,
                          zt_error *err) {
    if (!name) name = "<config>";
    if (!c || (!yaml && len))
        return zt_error_set(err, ZT_ERR_USAGE, "%s: NULL configuration or text", name);
    parse_state *st = calloc(1, sizeof *st);
    zt_train_config *tmp = malloc(sizeof *tmp);
    yaml_parser_t parser;
    yaml_document_t doc;
    bool have_parser = false;
    int rc = ZT_OK;
    if (!st || !tmp) {
        rc = zt_error_set(err, ZT_ERR_NOMEM, "%s: out of memory", name);
        goto done;
    }
    st->name = name;
    zt_train_config_default(tmp);
    if (!yaml_parser_initialize(&parser)) {
        rc = zt_error_set(err, ZT_ERR_NOMEM, "%s: out of memory starting the YAML parser", name);
        goto done;
    }
    have_parser = true;
    yaml_parser_set_input_string(&parser, (const unsigned char *)(yaml ? yaml : ""), len);
    if (!yaml_parser_load(&parser, &doc)) {
        rc = yaml_error(&parser, name, err);
        goto done;
    }
    rc = walk(tmp, &doc, st, err);
    yaml_document_delete(&doc);
    if (rc) goto done;
    /* one document per file */
    if (!yaml_parser_load(&parser, &doc)) {
        rc = yaml_error(&parser, name, err);
        goto done;
    }
    yaml_node_t *second = yaml_document_get_root_node(&doc);
    if (second)
        rc = zt_error_set(err, ZT_ERR_USAGE,
                          "%s:%zu:%zu: a second YAML document: a config is one document",
                          name, second->start_mark.line + 1, second->start_mark.column + 1);
    yaml_document_delete(&doc);
    if (rc) goto done;
    rc = validate(tmp, st, err);
    if (rc == ZT_OK) *c = *tmp;
done:
    if (have_parser) yaml_parser_delete(&parser);
    free(tmp);
    free(st);
    return rc;
}

#define CONFIG_MAX_BYTES (1u << 20)

int zt_train_config_load(zt_train_config *c, const char *path, zt_error *err) {
    if (!path) return zt_error_set(err, ZT_ERR_USAGE, "train config: no file name");
    FILE *f = fopen(path, "rb");
    if (!f) return zt_error_set(err, ZT_ERR_USAGE, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) == 0 && S_ISDIR(sb.st_mode)) {
        fclose(f);
        return zt_error_set(err, ZT_ERR_USAGE, "%s: is a directory, not a config file", path);
    }
    char *buf = malloc(CONFIG_MAX_BYTES + 1);
    if (!buf) {
        fclose(f);
        return zt_error_set(err, ZT_ERR_NOMEM, "%s: out of memory", path);
    }
    size_t n = fread(buf, 1, CONFIG_MAX_BYTES + 1, f);
    int rc;
    if (ferror(f))
        rc = zt_error_set(err, ZT_ERR_IO, "%s: read error: %s", path, strerror(errno));
    else if (n > CONFIG_MAX_BYTES)
        rc = zt_error_set(err, ZT_ERR_USAGE, "%s: larger than %u bytes; is this a config file?",
                          path, CONFIG_MAX_BYTES);
    else
        rc = zt_train_config_parse(c, buf, n, path, err);
    free(buf);
    fclose(f);
    return rc;
}
