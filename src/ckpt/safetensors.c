/* safetensors.c - GPT-2 and Llama weights in Hugging Face's safetensors format: export
 * (consolidated, fp32 or bf16) and import (to start fine-tuning from a Hugging Face checkpoint or
 * an export). Llama's parameters are written with their names and (out, in) layouts as they are
 * (LlamaForCausalLM's without "model."), and read with or without that prefix.
 *
 * The format: u64 little-endian header length, a JSON header {name: {dtype, shape, data_offsets}},
 * then the raw tensors. Names and layouts are transformers' GPT2Model ones: "wte.weight",
 * "h.0.attn.c_attn.weight", ... with the Conv1D weights (attn.c_attn, attn.c_proj, mlp.c_fc,
 * mlp.c_proj) stored (in, out), the transpose of zerotrain's (out, in). The LM head is tied to wte
 * and not stored (transformers ties it on load). */
#include "ckpt/safetensors.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* zerotrain stores Linear weights (out, in); Hugging Face's GPT-2 Conv1D stores (in, out). Every
 * 2-D parameter of a block is a Conv1D weight; wte and wpe are not. */
static bool is_conv1d(const zt_param_desc *p) { return p->ndim == 2 && strncmp(p->name, "h.", 2) == 0; }

static void transpose(float *dst, const float *src, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) dst[c * rows + r] = src[r * cols + c];
}

static uint16_t to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u);                                        /* round to nearest even */
    return (uint16_t)(u >> 16);
}

static float from_bf16(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

int zt_safetensors_export(zt_engine *e, const char *path, bool bf16, zt_error *err) {
    const zt_model *m = zt_engine_model(e);
    size_t elem = bf16 ? 2 : 4;
    cJSON *hdr = cJSON_CreateObject();
    cJSON *meta = cJSON_AddObjectToObject(hdr, "__metadata__");
    cJSON_AddStringToObject(meta, "format", "pt");
    cJSON_AddStringToObject(meta, "producer", "zerotrain " ZT_VERSION);
    size_t off = 0;
    for (int i = 0; i < m->n_params; i++) {
        const zt_param_desc *p = &m->params[i];
        cJSON *t = cJSON_AddObjectToObject(hdr, p->name);
        cJSON_AddStringToObject(t, "dtype", bf16 ? "BF16" : "F32");
        cJSON *shape = cJSON_AddArrayToObject(t, "shape");
        bool tr = is_conv1d(p);
        for (int d = 0; d < p->ndim; d++)
            cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)p->shape[tr ? p->ndim - 1 - d : d]));
        cJSON *offs = cJSON_AddArrayToObject(t, "data_offsets");
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)off));
        off += (size_t)p->numel * elem;
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)off));
    }
    char *json = cJSON_PrintUnformatted(hdr);
    cJSON_Delete(hdr);
    if (!json) return zt_error_set(err, ZT_ERR_NOMEM, "export: out of memory");
    size_t jlen = strlen(json), padded = (jlen + 7) & ~(size_t)7; /* the data starts 8-aligned */
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        free(json);
        return zt_error_set(err, ZT_ERR_IO, "cannot create %s: %s", tmp, strerror(errno));
    }
    uint64_t hl = padded;
    int ok = fwrite(&hl, 8, 1, f) == 1 && fwrite(json, 1, jlen, f) == jlen;
    for (size_t k = jlen; k < padded && ok; k++) ok = fputc(' ', f) != EOF;
    free(json);
    int rc = ZT_OK;
    for (int i = 0; i < m->n_params && ok && !rc; i++) {
        const zt_param_desc *p = &m->params[i];
        size_t n = (size_t)p->numel;
        float *full = malloc(n * sizeof *full), *out = malloc(n * sizeof *out);
        if (!full || !out) rc = zt_error_set(err, ZT_ERR_NOMEM, "export: out of memory for %s", p->name);
        if (!rc) rc = zt_engine_param_gather(e, i, full, err);
        if (!rc) {
            if (is_conv1d(p)) transpose(out, full, p->shape[0], p->shape[1]);
            else memcpy(out, full, n * sizeof *out);
            if (bf16) {
                uint16_t *h = (uint16_t *)full; /* reuse: 2 bytes per element fit */
                for (size_t k = 0; k < n; k++) h[k] = to_bf16(out[k]);
                ok = fwrite(h, 2, n, f) == n;
            } else {
                ok = fwrite(out, 4, n, f) == n;
            }
        }
        free(full);
        free(out);
    }
    ok = (fclose(f) == 0) && ok;
    if (rc || !ok || rename(tmp, path) != 0) {
        int en = errno;
        unlink(tmp);
        return rc ? rc : zt_error_set(err, ZT_ERR_IO, "cannot write %s: %s", path, strerror(en));
    }
    return ZT_OK;
}

int zt_safetensors_load(zt_engine *e, const char *path, zt_error *err) {
    const zt_model *m = zt_engine_model(e);
    FILE *f = fopen(path, "rb");
    if (!f) return zt_error_set(err, ZT_ERR_CKPT, "cannot open %s: %s", path, strerror(errno));
    fseek(f, 0, SEEK_END);
    long fsize = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint64_t hl = 0;
    if (fsize < 8 || fread(&hl, 8, 1, f) != 1 || hl > (uint64_t)fsize - 8 || hl > (100u << 20)) {
        fclose(f);
        return zt_error_set(err, ZT_ERR_CKPT, "%s: not a safetensors file (header length %llu, file %ld bytes)",
                            path, (unsigned long long)hl, fsize);
    }
    char *json = malloc(hl + 1);
    if (!json || fread(json, 1, hl, f) != hl) {
        free(json);
        fclose(f);
        return zt_error_set(err, ZT_ERR_CKPT, "%s: truncated header", path);
    }
    json[hl] = '\0';
    cJSON *hdr = cJSON_ParseWithLength(json, hl);
    free(json);
    uint64_t data_len = (uint64_t)fsize - 8 - hl;
    int rc = hdr ? ZT_OK : zt_error_set(err, ZT_ERR_CKPT, "%s: the header is not valid JSON", path);
    for (int i = 0; i < m->n_params && !rc; i++) {
        const zt_param_desc *p = &m->params[i];
        /* Hugging Face checkpoints may prefix names with "transformer." (GPT-2) or "model." (Llama) */
        char alt[ZT_NAME_MAX + 16];
        snprintf(alt, sizeof alt, "%s.%s", strcmp(m->name, "llama") ? "transformer" : "model", p->name);
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(hdr, p->name);
        if (!t) t = cJSON_GetObjectItemCaseSensitive(hdr, alt);
        const cJSON *dt = t ? cJSON_GetObjectItemCaseSensitive(t, "dtype") : NULL;
        const cJSON *sh = t ? cJSON_GetObjectItemCaseSensitive(t, "shape") : NULL;
        const cJSON *of = t ? cJSON_GetObjectItemCaseSensitive(t, "data_offsets") : NULL;
        if (!t || !cJSON_IsString(dt) || !cJSON_IsArray(sh) || cJSON_GetArraySize(of) != 2) {
            rc = zt_error_set(err, ZT_ERR_CKPT, "%s: tensor %s is missing or malformed", path, p->name);
            break;
        }
        bool bf = !strcmp(dt->valuestring, "BF16"), f32 = !strcmp(dt->valuestring, "F32");
        bool tr = is_conv1d(p), same = (bf || f32) && cJSON_GetArraySize(sh) == p->ndim;
        for (int d = 0; same && d < p->ndim; d++)
            same = cJSON_GetArrayItem(sh, d)->valuedouble == (double)p->shape[tr ? p->ndim - 1 - d : d];
        uint64_t a = (uint64_t)cJSON_GetArrayItem(of, 0)->valuedouble, b = (uint64_t)cJSON_GetArrayItem(of, 1)->valuedouble;
        size_t n = (size_t)p->numel, elem = bf ? 2 : 4;
        if (!same || b < a || b - a != n * elem || b > data_len) {
            rc = zt_error_set(err, ZT_ERR_CKPT, "%s: tensor %s has dtype %s / shape / byte range that do not "
                              "match the model", path, p->name, dt->valuestring);
            break;
        }
        float *full = malloc(n * sizeof *full), *tmp = malloc(n * sizeof *tmp);
        if (!full || !tmp) rc = zt_error_set(err, ZT_ERR_NOMEM, "loading %s: out of memory", path);
        if (!rc && (fseek(f, (long)(8 + hl + a), SEEK_SET) != 0 || fread(tmp, elem, n, f) != n))
            rc = zt_error_set(err, ZT_ERR_CKPT, "%s: cannot read tensor %s", path, p->name);
        if (!rc) {
            if (bf) /* widen in place from the back: element k's 2 bytes sit below its 4 */
                for (size_t k = n; k-- > 0;) tmp[k] = from_bf16(((uint16_t *)tmp)[k]);
            if (tr) transpose(full, tmp, p->shape[1], p->shape[0]);
            else memcpy(full, tmp, n * sizeof *full);
            rc = zt_engine_param_set(e, i, full, err); /* this rank's part, in the parameters' dtype */
        }
        free(full);
        free(tmp);
    }
    cJSON_Delete(hdr);
    fclose(f);
    return rc;
}
