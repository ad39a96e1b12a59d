/* hf.c - Hugging Face model directories: export a model to, and load one from, the layout
 * transformers' save_pretrained writes:
 *   DIR/config.json                           the architecture and shape (hf_arch.c's row)
 *   DIR/model.safetensors                     all tensors, when they fit one shard, or
 *   DIR/model-00001-of-00003.safetensors ...  shards of at most shard_bytes tensor bytes, and
 *   DIR/model.safetensors.index.json          {"metadata": {"total_size": bytes},
 *                                              "weight_map": {tensor name: shard file}}
 *   DIR/generation_config.json                bos/eos token ids, when the row knows them
 * Tensors move one at a time in both directions (safetensors.c), so a model that fits memory
 * once is written and read without a second copy of it. */
#include "ckpt/hf.h"

#include "core/atomic_file.h"
#include "core/file.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define INDEX_NAME "model.safetensors.index.json"

int zt_hf_parse_size(const char *s, uint64_t *bytes, zt_error *err) {
    static const struct {
        const char *suffix;
        uint64_t mul;
    } UNITS[] = {{"", 1},         {"B", 1},          {"KB", 1000},       {"MB", 1000000}, {"GB", 1000000000},
                 {"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1u << 30}};
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    for (size_t i = 0; end != s && !errno && isdigit((unsigned char)s[0]) && i < sizeof UNITS / sizeof *UNITS; i++)
        if (!strcmp(end, UNITS[i].suffix) && v > 0 && v <= UINT64_MAX / UNITS[i].mul) {
            *bytes = v * UNITS[i].mul;
            return ZT_OK;
        }
    return zt_error_set(err, ZT_ERR_USAGE, "shard size \"%s\": want a positive size like 5GB, 500MB, 64MiB or 4096",
                        s);
}

int zt_hf_write_json(const char *dir, const char *name, cJSON *j, zt_error *err) {
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    char *text = cJSON_Print(j);
    cJSON_Delete(j);
    if (!text) return zt_error_set(err, ZT_ERR_NOMEM, "%s: out of memory", path);
    int rc = zt_write_file_atomic(path, text, strlen(text), err);
    free(text);
    return rc;
}

static int write_configs(const zt_model *m, const zt_hf_arch *a, const char *dir, bool bf16, zt_error *err) {
    cJSON *j = cJSON_CreateObject();
    cJSON *archs = cJSON_AddArrayToObject(j, "architectures");
    cJSON_AddItemToArray(archs, cJSON_CreateString(a->architecture));
    cJSON_AddStringToObject(j, "model_type", a->model_type);
    a->write(m, j);
    cJSON_AddStringToObject(j, "torch_dtype", bf16 ? "bfloat16" : "float32");
    cJSON_AddStringToObject(j, "producer", "zerotrain " ZT_VERSION);
    const cJSON *bos = cJSON_GetObjectItemCaseSensitive(j, "bos_token_id");
    const cJSON *eos = cJSON_GetObjectItemCaseSensitive(j, "eos_token_id");
    cJSON *g = NULL;
    if (bos && eos) {
        g = cJSON_CreateObject();
        cJSON_AddItemToObject(g, "bos_token_id", cJSON_Duplicate(bos, true));
        cJSON_AddItemToObject(g, "eos_token_id", cJSON_Duplicate(eos, true));
    }
    int rc = zt_hf_write_json(dir, "config.json", j, err);
    if (g) rc = rc ? (cJSON_Delete(g), rc) : zt_hf_write_json(dir, "generation_config.json", g, err);
    return rc;
}

static int copy_file(const char *src, const char *dir, zt_error *err) {
    char *buf;
    size_t len;
    int rc = zt_read_file(src, "file to copy", &buf, &len, err);
    if (rc) return rc;
    const char *base = strrchr(src, '/');
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, base ? base + 1 : src);
    rc = zt_write_file_atomic(path, buf, len, err);
    free(buf);
    return rc;
}

int zt_hf_export_dir(zt_engine *e, const char *dir, const zt_hf_export_options *o, int *n_shards, zt_error *err) {
    const zt_model *m = zt_engine_model(e);
    const zt_hf_arch *a;
    zt_st_entry *ents = NULL;
    int n = 0, rc;
    *n_shards = 0;
    if ((rc = zt_hf_arch_for_model(m, &a, err)) || (rc = zt_hf_entries(m, &ents, &n, err))) return rc;
    if (!a->write) {
        free(ents);
        return zt_error_set(err, ZT_ERR_USAGE, "export --hf: no config.json writer for model %s yet (src/ckpt/hf_arch.c)",
                            m->name);
    }
    char probe[PATH_MAX];
    snprintf(probe, sizeof probe, "%s/config.json", dir);
    zt_make_parent_dirs(probe);
    /* shard boundaries as transformers draws them: a shard closes when the next tensor would
     * take it past shard_bytes; first[s] is shard s's first entry */
    size_t elem = o->bf16 ? 2 : 4;
    int *first = calloc((size_t)n + 2, sizeof *first), ns = 0;
    uint64_t total = 0, cur = 0;
    if (!first) rc = zt_error_set(err, ZT_ERR_NOMEM, "export: out of memory");
    for (int i = 0; i < n && !rc; i++) {
        uint64_t b = (uint64_t)zt_st_entry_numel(m, &ents[i]) * elem;
        if (i == 0 || (o->shard_bytes && cur > 0 && cur + b > o->shard_bytes)) {
            first[ns++] = i;
            cur = 0;
        }
        cur += b;
        total += b;
    }
    if (!rc) first[ns] = n;
    cJSON *index = NULL, *wmap = NULL;
    if (!rc && ns > 1) {
        index = cJSON_CreateObject();
        cJSON *meta = cJSON_AddObjectToObject(index, "metadata");
        cJSON_AddNumberToObject(meta, "total_size", (double)total);
        wmap = cJSON_AddObjectToObject(index, "weight_map");
    }
    for (int s = 0; s < ns && !rc; s++) {
        char fname[64], path[PATH_MAX];
        if (ns == 1) snprintf(fname, sizeof fname, "model.safetensors");
        else snprintf(fname, sizeof fname, "model-%05d-of-%05d.safetensors", s + 1, ns);
        snprintf(path, sizeof path, "%s/%s", dir, fname);
        rc = zt_st_write(e, path, ents + first[s], first[s + 1] - first[s], o->bf16, err);
        for (int i = first[s]; i < first[s + 1] && wmap; i++) cJSON_AddStringToObject(wmap, ents[i].name, fname);
    }
    free(first);
    free(ents);
    if (index) rc = rc ? (cJSON_Delete(index), rc) : zt_hf_write_json(dir, INDEX_NAME, index, err);
    if (!rc) rc = write_configs(m, a, dir, o->bf16, err);
    for (int i = 0; i < o->n_copy && !rc; i++) rc = copy_file(o->copy[i], dir, err);
    if (!rc) *n_shards = ns;
    return rc;
}

int zt_hf_read_config(const char *dir, zt_hf_model_config *c, zt_error *err) {
    char path[PATH_MAX], *text;
    size_t len;
    snprintf(path, sizeof path, "%s/config.json", dir);
    int rc = zt_read_file(path, "Hugging Face config", &text, &len, err);
    if (rc) return rc;
    rc = zt_hf_config_parse(text, len, path, c, err);
    free(text);
    return rc;
}

int zt_hf_create_model(const char *dir, zt_model **out, zt_error *err) {
    zt_hf_model_config c;
    *out = NULL;
    int rc = zt_hf_read_config(dir, &c, err);
    if (rc) return rc;
    if (!c.arch->create)
        return zt_error_set(err, ZT_ERR_USAGE, "%s/config.json: field model_type \"%s\" parses, but this build has no "
                            "%s model to load it into", dir, c.arch->model_type, c.arch->model_type);
    return c.arch->create(&c, out, err);
}

/* The shards a weight_map names, opened on first use. */
typedef struct shard_cache {
    int n;
    char **names;
    zt_st_file **files;
} shard_cache;

static int shard_get(shard_cache *sc, const char *dir, const char *fname, zt_st_file **out, zt_error *err) {
    for (int i = 0; i < sc->n; i++)
        if (!strcmp(sc->names[i], fname)) {
            *out = sc->files[i];
            return ZT_OK;
        }
    if (strchr(fname, '/') || !strcmp(fname, "..") || !fname[0])
        return zt_error_set(err, ZT_ERR_CKPT, "%s/" INDEX_NAME ": weight_map names the file \"%s\" outside the "
                            "directory", dir, fname);
    char **nn = realloc(sc->names, (size_t)(sc->n + 1) * sizeof *nn);
    if (nn) sc->names = nn;
    zt_st_file **nf = realloc(sc->files, (size_t)(sc->n + 1) * sizeof *nf);
    if (nf) sc->files = nf;
    char *copy = nn && nf ? strdup(fname) : NULL;
    if (!copy) return zt_error_set(err, ZT_ERR_NOMEM, "out of memory opening %s", fname);
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, fname);
    int rc = zt_st_open(path, out, err);
    if (rc) {
        free(copy);
        return rc;
    }
    sc->names[sc->n] = copy;
    sc->files[sc->n++] = *out;
    return ZT_OK;
}

static void shard_cache_free(shard_cache *sc) {
    for (int i = 0; i < sc->n; i++) {
        free(sc->names[i]);
        zt_st_close(sc->files[i]);
    }
    free(sc->names);
    free(sc->files);
}

static bool has_in_index(const void *wmap, const char *name) { return cJSON_GetObjectItemCaseSensitive(wmap, name); }

int zt_hf_load_dir(zt_engine *e, const char *dir, zt_error *err) {
    const zt_model *m = zt_engine_model(e);
    zt_st_entry *ents = NULL;
    int n = 0, rc = zt_hf_entries(m, &ents, &n, err);
    if (rc) return rc;
    char ipath[PATH_MAX];
    snprintf(ipath, sizeof ipath, "%s/" INDEX_NAME, dir);
    struct stat st;
    if (stat(ipath, &st) != 0) { /* one file */
        free(ents);
        snprintf(ipath, sizeof ipath, "%s/model.safetensors", dir);
        return zt_safetensors_load(e, ipath, err);
    }
    char *text = NULL;
    size_t len;
    cJSON *index = NULL;
    const cJSON *wmap = NULL;
    if (!(rc = zt_read_file(ipath, "safetensors index", &text, &len, err))) {
        index = cJSON_ParseWithLength(text, len);
        wmap = cJSON_GetObjectItemCaseSensitive(index, "weight_map");
        if (!cJSON_IsObject(wmap))
            rc = zt_error_set(err, ZT_ERR_CKPT, "%s: no weight_map object (not a safetensors index)", ipath);
    }
    free(text);
    for (int i = 0; i < n && !rc; i++) { /* every tensor of the model listed, then nothing else */
        zt_hf_alt_name(m, has_in_index, wmap, &ents[i]);
        if (!cJSON_IsString(cJSON_GetObjectItemCaseSensitive(wmap, ents[i].name)))
            rc = zt_error_set(err, ZT_ERR_CKPT, "%s: weight_map has no file for tensor %s", ipath, ents[i].name);
    }
    for (const cJSON *t = rc ? NULL : wmap->child; t && !rc; t = t->next) {
        char where[PATH_MAX];
        snprintf(where, sizeof where, "%s/%s", dir, cJSON_IsString(t) ? t->valuestring : INDEX_NAME);
        rc = zt_hf_check_extra(m, ents, n, t->string, where, err);
    }
    shard_cache sc = {0};
    for (int i = 0; i < n && !rc; i++) {
        zt_st_file *f = NULL;
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(wmap, ents[i].name);
        if (!(rc = shard_get(&sc, dir, fn->valuestring, &f, err))) rc = zt_st_read(f, e, &ents[i], err);
    }
    shard_cache_free(&sc);
    cJSON_Delete(index);
    free(ents);
    return rc;
}
