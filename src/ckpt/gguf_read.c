/* gguf_read.c - a GGUF file (gguf.c's layout) read back into a model as the start of a run
 * (`train --init FILE.gguf`): the header and metadata parsed with every length checked against the
 * file's size, general.architecture and the shape keys held to the model's, then each parameter's
 * tensor by its llama.cpp name (gguf.c's table), decoded from f32/f16/bf16/q8_0/q4_0/q4_k/q5_k/q6_k
 * (gguf_quant.c), Llama's q/k rows permuted back to zerotrain's rope layout, and set. Any GGUF
 * writer's file of those types and names reads (llama.cpp's convert_hf_to_gguf.py too); other
 * types (the k-quants, ...) and architectures are refused by name. Memory: the metadata's kept
 * values and two copies of the largest tensor. */
#define _FILE_OFFSET_BITS 64
#include "ckpt/gguf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#define MAX_DIMS 4

typedef struct rd {
    FILE *f;
    const char *path;
    uint64_t size;   /* the file's bytes */
    bool short_read;
} rd;

static bool get(rd *r, void *p, size_t n) {
    if (r->short_read || fread(p, 1, n, r->f) != n) r->short_read = true;
    return !r->short_read;
}
static uint32_t u32(rd *r) {
    uint32_t v = 0;
    get(r, &v, 4);
    return v;
}
static uint64_t u64(rd *r) {
    uint64_t v = 0;
    get(r, &v, 8);
    return v;
}
/* a string (malloc'd, NUL-terminated); NULL when it does not fit the file */
static char *str(rd *r) {
    uint64_t n = u64(r);
    if (r->short_read || n > r->size) {
        r->short_read = true;
        return NULL;
    }
    char *s = malloc(n + 1);
    if (!s || !get(r, s, n)) {
        free(s);
        r->short_read = true;
        return NULL;
    }
    s[n] = '\0';
    return s;
}

/* the metadata values the loader reads */
typedef struct kept {
    char arch[32];
    uint32_t alignment;
    struct {
        char key[64];
        double v;
    } num[16];
    int n_num;
} kept;

static int value_size(uint32_t t) {
    static const int SIZES[13] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    return t < 13 ? SIZES[t] : -1;
}

static double number(const unsigned char *b, uint32_t t) {
    union {
        uint8_t u8;
        int8_t i8;
        uint16_t u16;
        int16_t i16;
        uint32_t u32;
        int32_t i32;
        float f32;
        uint64_t u64;
        int64_t i64;
        double f64;
    } v;
    int sz = value_size(t);
    if (sz <= 0 || sz > 8) return 0;
    memcpy(&v, b, (size_t)sz);
    switch (t) {
    case 0: return v.u8;
    case 1: return v.i8;
    case 2: return v.u16;
    case 3: return v.i16;
    case 4: return v.u32;
    case 5: return v.i32;
    case 6: return v.f32;
    case 7: return v.u8;
    case 10: return (double)v.u64;
    case 11: return (double)v.i64;
    default: return v.f64;
    }
}

/* one value of type t: kept when key is one the loader reads, else skipped */
static int value(rd *r, const char *key, uint32_t t, kept *k, zt_error *err) {
    if (t == 8) { /* string */
        char *s = str(r);
        if (s && !strcmp(key, "general.architecture")) snprintf(k->arch, sizeof k->arch, "%s", s);
        free(s);
        return ZT_OK;
    }
    if (t == 9) { /* array: item type, count, items */
        uint32_t it = u32(r);
        uint64_t n = u64(r);
        if (r->short_read) return ZT_OK;
        if (it == 9 || (it != 8 && value_size(it) < 0))
            return zt_error_set(err, ZT_ERR_CKPT, "%s: metadata %s: array of value type %u, which GGUF does not have",
                                r->path, key, it);
        if (it != 8) { /* fixed size items: skip at once */
            int64_t bytes = (int64_t)n * value_size(it);
            if (n > r->size || fseeko(r->f, bytes, SEEK_CUR) != 0 || (uint64_t)ftello(r->f) > r->size)
                r->short_read = true;
            return ZT_OK;
        }
        for (uint64_t i = 0; i < n && !r->short_read; i++) free(str(r));
        return ZT_OK;
    }
    int sz = value_size(t);
    if (sz <= 0) return zt_error_set(err, ZT_ERR_CKPT, "%s: metadata %s has value type %u, which GGUF does not have",
                                     r->path, key, t);
    unsigned char b[8];
    if (!get(r, b, (size_t)sz)) return ZT_OK;
    if (!strcmp(key, "general.alignment")) k->alignment = (uint32_t)number(b, t);
    else if (k->n_num < 16 && strchr(key, '.') && strncmp(key, "general.", 8) && strncmp(key, "tokenizer.", 10)) {
        snprintf(k->num[k->n_num].key, sizeof k->num[0].key, "%s", key);
        k->num[k->n_num++].v = number(b, t);
    }
    return ZT_OK;
}

static bool kept_num(const kept *k, const char *key, double *v) {
    for (int i = 0; i < k->n_num; i++)
        if (!strcmp(k->num[i].key, key)) {
            *v = k->num[i].v;
            return true;
        }
    return false;
}

/* the model's shape against the file's keys: block_count, embedding_length, heads, MLP width */
static int check_shape(const zt_model *m, const kept *k, const char *path, zt_error *err) {
    bool llama = !strcmp(m->name, "llama");
    const zt_llama_config *l = llama ? m->cfg : NULL;
    const zt_gpt2_config *g = llama ? NULL : m->cfg;
    struct {
        const char *key;
        double want;
    } want[] = {
        {"block_count", llama ? l->n_layer : g->n_layer},
        {"embedding_length", llama ? l->n_embd : g->n_embd},
        {"attention.head_count", llama ? l->n_head : g->n_head},
        {"feed_forward_length", llama ? l->intermediate_size : 4.0 * g->n_embd},
        {"attention.head_count_kv", llama ? l->n_kv_head : -1},
    };
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        char key[96];
        double v;
        snprintf(key, sizeof key, "%s.%s", k->arch, want[i].key);
        if (want[i].want < 0 || !kept_num(k, key, &v)) continue;
        if (v != want[i].want)
            return zt_error_set(err, ZT_ERR_CKPT, "%s: field %s is %.0f, the model has %.0f", path, key, v,
                                want[i].want);
    }
    return ZT_OK;
}

typedef struct tinfo {
    char *name;
    uint32_t ndim, type;
    uint64_t ne[MAX_DIMS], offset;
} tinfo;

static int load_tensor(zt_engine *e, rd *r, const tinfo *t, uint64_t data, int param, int heads, zt_error *err) {
    const zt_param_desc *p = &zt_engine_model(e)->params[param];
    int64_t cols = p->logical_shape[p->ndim - 1], rows = p->ndim == 2 ? p->logical_shape[0] : 1;
    bool same = t->ndim == (uint32_t)p->ndim && t->ne[0] == (uint64_t)cols && (p->ndim == 1 || t->ne[1] == (uint64_t)rows);
    if (!same)
        return zt_error_set(err, ZT_ERR_CKPT, "%s: tensor %s has shape %llu x %llu (%u dims), the model's %s needs "
                            "%lld x %lld", r->path, t->name, (unsigned long long)(t->ndim > 1 ? t->ne[1] : 1),
                            (unsigned long long)t->ne[0], t->ndim, p->name, (long long)rows, (long long)cols);
    zt_gguf_type ty = (zt_gguf_type)t->type;
    if (cols % zt_gguf_block_elems(ty))
        return zt_error_set(err, ZT_ERR_CKPT, "%s: tensor %s: rows of %lld elements are not whole %s blocks", r->path,
                            t->name, (long long)cols, zt_gguf_type_name(ty));
    uint64_t bytes = (uint64_t)rows * zt_gguf_row_bytes(ty, cols), at = data + t->offset;
    if (at > r->size || bytes > r->size - at)
        return zt_error_set(err, ZT_ERR_CKPT, "%s: tensor %s: its data ends at byte %llu, the file holds %llu "
                            "(truncated?)", r->path, t->name, (unsigned long long)(at + bytes),
                            (unsigned long long)r->size);
    size_t n = (size_t)(rows * cols);
    void *raw = malloc(bytes);
    float *full = malloc(n * sizeof *full), *tmp = heads ? malloc(n * sizeof *tmp) : NULL;
    int rc = ZT_OK;
    if (!raw || !full || (heads && !tmp)) rc = zt_error_set(err, ZT_ERR_NOMEM, "%s: out of memory for tensor %s",
                                                             r->path, t->name);
    if (!rc && (fseeko(r->f, (off_t)at, SEEK_SET) != 0 || fread(raw, 1, bytes, r->f) != bytes))
        rc = zt_error_set(err, ZT_ERR_CKPT, "%s: cannot read tensor %s", r->path, t->name);
    if (!rc) {
        zt_gguf_decode(ty, heads ? tmp : full, raw, (int64_t)n);
        if (heads) zt_gguf_permute_rows(full, tmp, rows, cols, heads, true);
        rc = zt_engine_param_set(e, param, full, err);
    }
    free(raw);
    free(full);
    free(tmp);
    return rc;
}

int zt_gguf_load(zt_engine *e, const char *path, zt_error *err) {
    const zt_model *m = zt_engine_model(e);
    rd r = {.path = path};
    if (!(r.f = fopen(path, "rb"))) return zt_error_set(err, ZT_ERR_CKPT, "cannot open %s: %s", path, strerror(errno));
    fseeko(r.f, 0, SEEK_END);
    r.size = (uint64_t)ftello(r.f);
    fseeko(r.f, 0, SEEK_SET);
    kept k = {.alignment = 32};
    tinfo *ti = NULL;
    uint64_t n_t = 0, n_kv = 0, i = 0;
    int rc = ZT_OK;
    uint32_t magic = u32(&r), version = u32(&r);
    if (r.short_read || magic != 0x46554747u) {
        rc = zt_error_set(err, ZT_ERR_CKPT, "%s: not a GGUF file (no \"GGUF\" magic)", path);
        goto out;
    }
    if (version != 2 && version != 3) {
        rc = zt_error_set(err, ZT_ERR_CKPT, "%s: field version is %u; zerotrain reads GGUF 2 and 3", path, version);
        goto out;
    }
    n_t = u64(&r);
    n_kv = u64(&r);
    if (!r.short_read && (n_t > r.size / 24 || n_kv > r.size / 12)) {
        rc = zt_error_set(err, ZT_ERR_CKPT, "%s: %llu tensors and %llu metadata keys do not fit a file of %llu bytes "
                          "(corrupt header)", path, (unsigned long long)n_t, (unsigned long long)n_kv,
                          (unsigned long long)r.size);
        goto out;
    }
    for (i = 0; i < n_kv && !rc && !r.short_read; i++) {
        char *key = str(&r);
        uint32_t t = u32(&r);
        if (key && !r.short_read) rc = value(&r, key, t, &k, err);
        free(key);
    }
    if (rc) goto out;
    if (r.short_read) {
        rc = zt_error_set(err, ZT_ERR_CKPT, "%s: truncated in the metadata (key %llu of %llu; the file has %llu bytes)",
                          path, (unsigned long long)i, (unsigned long long)n_kv, (unsigned long long)r.size);
        goto out;
    }
    if (strcmp(k.arch, "gpt2") && strcmp(k.arch, "llama") && strcmp(k.arch, "qwen2")) {
        rc = zt_error_set(err, ZT_ERR_CKPT, "%s: field general.architecture is \"%s\"; zerotrain reads gpt2, llama and "
                          "qwen2", path, k.arch[0] ? k.arch : "(missing)");
        goto out;
    }
    if (strcmp(k.arch, zt_gguf_arch_of(m))) { /* qwen2: the Llama with q/k/v biases */
        rc = zt_error_set(err, ZT_ERR_CKPT, "%s: field general.architecture is %s, the model is %s", path, k.arch,
                          zt_gguf_arch_of(m));
        goto out;
    }
    if ((rc = check_shape(m, &k, path, err))) goto out;
    if (!(ti = calloc(n_t + 1, sizeof *ti))) {
        rc = zt_error_set(err, ZT_ERR_NOMEM, "%s: out of memory", path);
        goto out;
    }
    for (i = 0; i < n_t && !rc && !r.short_read; i++) {
        ti[i].name = str(&r);
        ti[i].ndim = u32(&r);
        if (!r.short_read && (ti[i].ndim < 1 || ti[i].ndim > MAX_DIMS)) {
            rc = zt_error_set(err, ZT_ERR_CKPT, "%s: tensor %s: field n_dims is %u (1 to %d)", path,
                              ti[i].name ? ti[i].name : "?", ti[i].ndim, MAX_DIMS);
            break;
        }
        for (uint32_t d = 0; d < ti[i].ndim; d++) ti[i].ne[d] = u64(&r);
        ti[i].type = u32(&r);
        ti[i].offset = u64(&r);
        zt_gguf_type ty;
        if (!r.short_read && (!zt_gguf_type_parse(zt_gguf_type_name((zt_gguf_type)ti[i].type), &ty) || ty != ti[i].type))
            rc = zt_error_set(err, ZT_ERR_CKPT, "%s: tensor %s: field type is ggml type %u; zerotrain reads f32 (0), "
                              "f16 (1), q4_0 (2), q8_0 (8), q4_k (12), q5_k (13), q6_k (14), bf16 (30)", path, ti[i].name, ti[i].type);
    }
    if (!rc && r.short_read)
        rc = zt_error_set(err, ZT_ERR_CKPT, "%s: truncated in the tensor infos (tensor %llu of %llu; the file has %llu "
                          "bytes)", path, (unsigned long long)i, (unsigned long long)n_t, (unsigned long long)r.size);
    if (!rc && (k.alignment == 0 || (k.alignment & (k.alignment - 1))))
        rc = zt_error_set(err, ZT_ERR_CKPT, "%s: field general.alignment is %u, not a power of two", path, k.alignment);
    uint64_t data = (uint64_t)ftello(r.f);
    if (!rc) data = (data + k.alignment - 1) / k.alignment * k.alignment;
    for (int p = 0; p < m->n_params && !rc; p++) {
        char name[ZT_NAME_MAX + 16];
        int heads = 0;
        if (!zt_gguf_param_name(m, p, name, sizeof name, &heads)) continue;
        uint64_t j = 0;
        while (j < n_t && strcmp(ti[j].name, name)) j++;
        if (j == n_t) rc = zt_error_set(err, ZT_ERR_CKPT, "%s: tensor %s (the model's %s) is missing", path, name,
                                        m->params[p].name);
        else rc = load_tensor(e, &r, &ti[j], data, p, heads, err);
    }
out:
    for (uint64_t j = 0; ti && j < n_t; j++) free(ti[j].name);
    free(ti);
    fclose(r.f);
    return rc;
}
