/* safetensors.c - one file in Hugging Face's safetensors format: write named parameters (fp32 or
 * bf16), read them back one tensor at a time (so a model larger than memory twice over loads).
 *
 * The format: u64 little-endian header length, a JSON header {name: {dtype, shape, data_offsets}}
 * (offsets relative to the end of the header), then the raw little-endian tensors. Which names
 * and layouts a model uses is the architecture table's business (hf_arch.c); this file only moves
 * tensors between the engine and one file. */
#define _FILE_OFFSET_BITS 64
#include "ckpt/safetensors.h"
#include "core/atomic_file.h"

#include "ckpt/hf_arch.h"
#include "kernels/kernels.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

static void transpose(float *dst, const float *src, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) dst[c * rows + r] = src[r * cols + c];
}

/* the on-disk shape of entry ent of parameter p: reversed when transposed (2-D only), dim 0 / parts */
static int64_t disk_dim(const zt_param_desc *p, const zt_st_entry *ent, int d) {
    int64_t v = p->logical_shape[ent->transpose ? p->ndim - 1 - d : d];
    return d == 0 && ent->parts > 1 ? v / ent->parts : v;
}

int64_t zt_st_entry_numel(const zt_model *m, const zt_st_entry *ent) {
    int64_t n = m->params[ent->param].logical_numel;
    return ent->parts > 1 ? n / ent->parts : n;
}

int zt_st_write(zt_engine *e, const char *path, const zt_st_entry *ents, int n, bool bf16, zt_error *err) {
    const zt_model *m = zt_engine_model(e);
    size_t elem = bf16 ? 2 : 4;
    cJSON *hdr = cJSON_CreateObject();
    cJSON *meta = cJSON_AddObjectToObject(hdr, "__metadata__");
    cJSON_AddStringToObject(meta, "format", "pt");
    cJSON_AddStringToObject(meta, "producer", "zerotrain " ZT_VERSION);
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        const zt_param_desc *p = &m->params[ents[i].param];
        cJSON *t = cJSON_AddObjectToObject(hdr, ents[i].name);
        cJSON_AddStringToObject(t, "dtype", bf16 ? "BF16" : "F32");
        cJSON *shape = cJSON_AddArrayToObject(t, "shape");
        for (int d = 0; d < p->ndim; d++)
            cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)disk_dim(p, &ents[i], d)));
        cJSON *offs = cJSON_AddArrayToObject(t, "data_offsets");
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)off));
        off += (size_t)zt_st_entry_numel(m, &ents[i]) * elem;
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)off));
    }
    char *json = cJSON_PrintUnformatted(hdr);
    cJSON_Delete(hdr);
    if (!json) return zt_error_set(err, ZT_ERR_NOMEM, "export: out of memory");
    size_t jlen = strlen(json), padded = (jlen + 7) & ~(size_t)7; /* the data starts 8-aligned */
    zt_atomic_file af;
    int rc = zt_atomic_open(&af, path, err);
    if (rc) {
        free(json);
        return rc;
    }
    FILE *f = af.fp;
    uint64_t hl = padded;
    int ok = fwrite(&hl, 8, 1, f) == 1 && fwrite(json, 1, jlen, f) == jlen;
    for (size_t k = jlen; k < padded && ok; k++) ok = fputc(' ', f) != EOF;
    free(json);
    for (int i = 0; i < n && ok && !rc; i++) {
        const zt_param_desc *p = &m->params[ents[i].param];
        size_t all = (size_t)p->logical_numel, cnt = (size_t)zt_st_entry_numel(m, &ents[i]);
        size_t at = ents[i].parts > 1 ? cnt * (size_t)ents[i].part : 0; /* an expert's rows */
        float *full = malloc(all * sizeof *full), *out = malloc(cnt * sizeof *out);
        if (!full || !out) rc = zt_error_set(err, ZT_ERR_NOMEM, "export: out of memory for %s", p->name);
        if (!rc) rc = zt_engine_param_gather(e, ents[i].param, full, err);
        if (!rc) {
            if (ents[i].transpose) transpose(out, full, p->logical_shape[0], p->logical_shape[1]);
            else memcpy(out, full + at, cnt * sizeof *out);
            if (bf16) {
                uint16_t *h = (uint16_t *)full; /* reuse: 2 bytes per element fit */
                zt_f32_to_bf16(h, out, cnt);
                ok = fwrite(h, 2, cnt, f) == cnt;
            } else {
                ok = fwrite(out, 4, cnt, f) == cnt;
            }
        }
        free(full);
        free(out);
    }
    if (rc) {
        zt_atomic_abandon(&af);
        return rc;
    }
    return zt_atomic_commit(&af, ok, "", err);
}

struct zt_st_file {
    char path[4096];
    FILE *f;
    uint64_t hl, data_len; /* header bytes, data bytes after it */
    cJSON *hdr;
};

void zt_st_close(zt_st_file *f) {
    if (!f) return;
    if (f->f) fclose(f->f);
    cJSON_Delete(f->hdr);
    free(f);
}

int zt_st_open(const char *path, zt_st_file **out, zt_error *err) {
    *out = NULL;
    zt_st_file *s = calloc(1, sizeof *s);
    if (!s) return zt_error_set(err, ZT_ERR_NOMEM, "%s: out of memory", path);
    snprintf(s->path, sizeof s->path, "%s", path);
    s->f = fopen(path, "rb");
    if (!s->f) {
        int en = errno;
        zt_st_close(s);
        return zt_error_set(err, ZT_ERR_CKPT, "cannot open %s: %s", path, strerror(en));
    }
    fseeko(s->f, 0, SEEK_END);
    off_t fsize = ftello(s->f);
    fseeko(s->f, 0, SEEK_SET);
    uint64_t hl = 0;
    if (fsize < 8 || fread(&hl, 8, 1, s->f) != 1 || hl > (uint64_t)fsize - 8 || hl > (100u << 20)) {
        zt_st_close(s);
        return zt_error_set(err, ZT_ERR_CKPT, "%s: not a safetensors file (header length %llu, file %lld bytes)",
                            path, (unsigned long long)hl, (long long)fsize);
    }
    char *json = malloc(hl + 1);
    if (!json || fread(json, 1, hl, s->f) != hl) {
        free(json);
        zt_st_close(s);
        return zt_error_set(err, ZT_ERR_CKPT, "%s: truncated header", path);
    }
    s->hdr = cJSON_ParseWithLength(json, hl);
    free(json);
    s->hl = hl;
    s->data_len = (uint64_t)fsize - 8 - hl;
    if (!cJSON_IsObject(s->hdr)) {
        zt_st_close(s);
        return zt_error_set(err, ZT_ERR_CKPT, "%s: the header is not a JSON object", path);
    }
    *out = s;
    return ZT_OK;
}

int zt_st_count(const zt_st_file *f) {
    int n = 0;
    for (const cJSON *t = f->hdr->child; t; t = t->next) n += strcmp(t->string, "__metadata__") != 0;
    return n;
}

const char *zt_st_name(const zt_st_file *f, int k) {
    for (const cJSON *t = f->hdr->child; t; t = t->next)
        if (strcmp(t->string, "__metadata__") && k-- == 0) return t->string;
    return NULL;
}

bool zt_st_has(const zt_st_file *f, const char *name) { return cJSON_GetObjectItemCaseSensitive(f->hdr, name); }

int zt_st_read(zt_st_file *s, zt_engine *e, const zt_st_entry *ent, zt_error *err) {
    const zt_param_desc *p = &zt_engine_model(e)->params[ent->param];
    const char *path = s->path, *name = ent->name;
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(s->hdr, name);
    const cJSON *dt = t ? cJSON_GetObjectItemCaseSensitive(t, "dtype") : NULL;
    const cJSON *sh = t ? cJSON_GetObjectItemCaseSensitive(t, "shape") : NULL;
    const cJSON *of = t ? cJSON_GetObjectItemCaseSensitive(t, "data_offsets") : NULL;
    if (!t) return zt_error_set(err, ZT_ERR_CKPT, "%s: tensor %s is missing", path, name);
    if (!cJSON_IsString(dt) || !cJSON_IsArray(sh) || cJSON_GetArraySize(of) != 2)
        return zt_error_set(err, ZT_ERR_CKPT, "%s: tensor %s has no dtype, shape or data_offsets", path, name);
    bool bf = !strcmp(dt->valuestring, "BF16"), f16 = !strcmp(dt->valuestring, "F16");
    if (!bf && !f16 && strcmp(dt->valuestring, "F32"))
        return zt_error_set(err, ZT_ERR_CKPT, "%s: tensor %s has dtype %s (F32, BF16 or F16 load)", path, name,
                            dt->valuestring);
    char want[160] = "", got[160] = "";
    size_t wl = 0, gl = 0;
    for (int d = 0; d < p->ndim; d++)
        wl += (size_t)snprintf(want + wl, sizeof want - wl, "%s%lld", d ? ", " : "",
                               (long long)disk_dim(p, ent, d));
    bool same = cJSON_GetArraySize(sh) == p->ndim;
    for (int d = 0; d < cJSON_GetArraySize(sh) && gl < sizeof got; d++) {
        double v = cJSON_GetArrayItem(sh, d)->valuedouble;
        gl += (size_t)snprintf(got + gl, sizeof got - gl, "%s%.0f", d ? ", " : "", v);
        if (d < p->ndim && v != (double)disk_dim(p, ent, d)) same = false;
    }
    if (!same)
        return zt_error_set(err, ZT_ERR_CKPT, "%s: tensor %s has shape (%s), the model needs (%s)", path, name, got,
                            want);
    uint64_t a = (uint64_t)cJSON_GetArrayItem(of, 0)->valuedouble, b = (uint64_t)cJSON_GetArrayItem(of, 1)->valuedouble;
    size_t n = (size_t)zt_st_entry_numel(zt_engine_model(e), ent), elem = bf || f16 ? 2 : 4;
    size_t all = (size_t)p->logical_numel, at = ent->parts > 1 ? n * (size_t)ent->part : 0;
    if (b < a || b - a != n * elem)
        return zt_error_set(err, ZT_ERR_CKPT, "%s: tensor %s: data_offsets [%llu, %llu) hold %llu bytes, its dtype "
                            "and shape need %zu", path, name, (unsigned long long)a, (unsigned long long)b,
                            (unsigned long long)(b - a), n * elem);
    if (b > s->data_len)
        return zt_error_set(err, ZT_ERR_CKPT, "%s: tensor %s ends at byte %llu of the data, the file holds %llu "
                            "(truncated?)", path, name, (unsigned long long)b, (unsigned long long)s->data_len);
    float *full = malloc(all * sizeof *full), *tmp = malloc(n * sizeof *tmp);
    int rc = ZT_OK;
    if (!full || !tmp) rc = zt_error_set(err, ZT_ERR_NOMEM, "%s: out of memory for tensor %s", path, name);
    if (!rc && (fseeko(s->f, (off_t)(8 + s->hl + a), SEEK_SET) != 0 || fread(tmp, elem, n, s->f) != n))
        rc = zt_error_set(err, ZT_ERR_CKPT, "%s: cannot read tensor %s", path, name);
    if (!rc) {
        if (elem == 2) { /* widen into full, then move back: the 2-byte values sit in tmp */
            if (bf) zt_bf16_to_f32(full, (const uint16_t *)tmp, n);
            else zt_fp16_to_f32_serial(full, (const uint16_t *)tmp, n);
            memcpy(tmp, full, n * sizeof *tmp);
        }
        /* an expert's rows: into the parameter as it stands (one gather and one set per expert) */
        if (ent->parts > 1) rc = zt_engine_param_gather(e, ent->param, full, err);
        if (!rc && ent->transpose) transpose(full, tmp, p->logical_shape[1], p->logical_shape[0]);
        else if (!rc) memcpy(full + at, tmp, n * sizeof *full);
        if (!rc) rc = zt_engine_param_set(e, ent->param, full, err); /* this rank's part, in the parameters' dtype */
    }
    free(full);
    free(tmp);
    return rc;
}

int zt_safetensors_export(zt_engine *e, const char *path, bool bf16, zt_error *err) {
    zt_st_entry *ents = NULL;
    int n = 0, rc = zt_hf_entries(zt_engine_model(e), &ents, &n, err);
    if (!rc) rc = zt_st_write(e, path, ents, n, bf16, err);
    free(ents);
    return rc;
}

int zt_safetensors_load(zt_engine *e, const char *path, zt_error *err) {
    const zt_model *m = zt_engine_model(e);
    zt_st_entry *ents = NULL;
    zt_st_file *f = NULL;
    int n = 0, rc = zt_hf_entries(m, &ents, &n, err);
    if (!rc) rc = zt_st_open(path, &f, err);
    for (int i = 0; i < n && !rc; i++) {
        zt_hf_alt_name(m, zt_hf_has_in_file, f, &ents[i]); /* e.g. "transformer." + name */
        if (!zt_st_has(f, ents[i].name))
            rc = zt_error_set(err, ZT_ERR_CKPT, "%s: tensor %s is missing", path, ents[i].name);
    }
    for (int k = 0; !rc && k < zt_st_count(f); k++) rc = zt_hf_check_extra(m, ents, n, zt_st_name(f, k), path, err);
    for (int i = 0; i < n && !rc; i++) rc = zt_st_read(f, e, &ents[i], err);
    zt_st_close(f);
    free(ents);
    return rc;
}
