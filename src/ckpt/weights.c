/* weights.c - save and load the single-file parameter snapshot described in weights.h. */
#include "ckpt/weights.h"
#include "core/atomic_file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#define MAGIC "ZTWEIGHT"
#define VERSION 1u       /* GPT-2 */
#define VERSION_LLAMA 2u /* with the Llama block after the shape */
#define LORA 2u          /* + the LoRA block: 3 GPT-2, 4 Llama */
#define LLAMA_BLOCK 40   /* bytes of that block */

/* the Llama block of weights.h's layout */
typedef struct llama_block {
    int32_t arch, n_kv_head, intermediate_size;
    float rope_theta, rms_norm_eps, factor, low_freq_factor, high_freq_factor;
    int32_t original_max_position_embeddings, tie_embeddings;
} llama_block;
_Static_assert(sizeof(llama_block) == LLAMA_BLOCK, "llama_block is packed");

typedef struct buf {
    unsigned char *p;
    size_t len, cap;
} buf;

static int put(buf *b, const void *src, size_t n) {
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n) cap *= 2;
        unsigned char *np = realloc(b->p, cap);
        if (!np) return -1;
        b->p = np;
        b->cap = cap;
    }
    memcpy(b->p + b->len, src, n);
    b->len += n;
    return 0;
}

/* The header: magic, version, model shape, and each tensor's name and shape. */
static int build_header(const zt_model *m, buf *b, zt_error *err) {
    zt_model_spec s;
    if (zt_model_spec_of(m, &s, err)) return -1;
    if (s.arch == ZT_ARCH_LLAMA && s.llama.n_experts > 0) {
        zt_error_set(err, ZT_ERR_USAGE, "weights file of a mixture of experts (%d experts): its header has no "
                     "place for them (not built); save a checkpoint or a Hugging Face directory instead",
                     s.llama.n_experts);
        return -1;
    }
    if (s.arch == ZT_ARCH_LLAMA && s.llama.qkv_bias) {
        zt_error_set(err, ZT_ERR_USAGE, "weights file of a model with q/k/v biases (model.attention_qkv_bias): its "
                     "header has no place for them (not built); save a checkpoint or a Hugging Face directory instead");
        return -1;
    }
    int32_t shape5[5];
    zt_model_spec_shape(&s, &shape5[2], &shape5[3], &shape5[4], &shape5[1], &shape5[0]);
    uint32_t version = (s.arch == ZT_ARCH_LLAMA ? VERSION_LLAMA : VERSION) + (s.lora.rank > 0 ? LORA : 0);
    uint32_t np = (uint32_t)m->n_params;
    int bad = put(b, MAGIC, 8) | put(b, &version, 4) | put(b, shape5, sizeof shape5);
    if (s.arch == ZT_ARCH_LLAMA) {
        const zt_llama_config *c = &s.llama;
        llama_block k = {ZT_ARCH_LLAMA, c->n_kv_head, c->intermediate_size, c->rope_theta, c->rms_norm_eps,
                         c->rope_scaling.factor, c->rope_scaling.low_freq_factor, c->rope_scaling.high_freq_factor,
                         c->rope_scaling.original_max_position_embeddings, c->tie_embeddings};
        bad |= put(b, &k, sizeof k);
    }
    if (s.lora.rank > 0) {
        int32_t r = s.lora.rank;
        uint16_t tl = (uint16_t)strlen(s.lora.target_modules);
        bad |= put(b, &r, 4) | put(b, &s.lora.alpha, 4) | put(b, &s.lora.dropout, 4) | put(b, &tl, 2) |
               put(b, s.lora.target_modules, tl);
    }
    bad |= put(b, &np, 4);
    for (int i = 0; i < m->n_params && !bad; i++) {
        const zt_param_desc *p = &m->params[i];
        uint16_t nl = (uint16_t)strlen(p->name);
        uint32_t nd = (uint32_t)p->ndim;
        bad |= put(b, &nl, 2) | put(b, p->name, nl) | put(b, &nd, 4) |
               put(b, p->logical_shape, sizeof(int64_t) * (size_t)p->ndim);
    }
    return bad;
}

/* Non-writers: take part in the gathers, write nothing. */
static int gather_only(const zt_model *m, zt_weights_gather_fn gather, void *ctx, zt_error *err) {
    int rc = ZT_OK;
    for (int i = 0; i < m->n_params && !rc; i++) {
        float *t = malloc((size_t)m->params[i].logical_numel * sizeof *t);
        if (!t) return zt_error_set(err, ZT_ERR_NOMEM, "saving weights: out of memory");
        rc = gather(ctx, i, t, err);
        free(t);
    }
    return rc;
}

static int engine_gather(void *ctx, int i, float *dst, zt_error *err) { return zt_engine_param_gather(ctx, i, dst, err); }

int zt_weights_save(zt_engine *e, const char *path, bool writer, zt_error *err) {
    return zt_weights_save_with(zt_engine_model(e), engine_gather, e, path, writer, err);
}

int zt_weights_save_with(const zt_model *m, zt_weights_gather_fn gather, void *ctx, const char *path, bool writer,
                         zt_error *err) {
    if (!writer) return gather_only(m, gather, ctx, err);
    buf hb = {0};
    zt_error herr = {0};
    if (build_header(m, &hb, &herr)) {
        free(hb.p);
        return herr.code ? zt_error_prefix(&herr, "saving %s", path), *err = herr, herr.code
                         : zt_error_set(err, ZT_ERR_NOMEM, "saving %s: out of memory", path);
    }
    zt_atomic_file af;
    int rc = zt_atomic_open(&af, path, err);
    if (rc) {
        free(hb.p);
        return rc;
    }
    FILE *fp = af.fp;
    XXH64_state_t *h = XXH64_createState();
    int ok = h != NULL && fwrite(hb.p, 1, hb.len, fp) == hb.len;
    if (ok) {
        XXH64_reset(h, 0);
        XXH64_update(h, hb.p, hb.len);
    }
    free(hb.p);
    for (int i = 0; i < m->n_params && ok; i++) {
        size_t bytes = (size_t)m->params[i].logical_numel * sizeof(float);
        float *d = malloc(bytes);
        if (!d || (rc = gather(ctx, i, d, err))) {
            free(d);
            zt_atomic_abandon(&af);
            XXH64_freeState(h);
            return rc ? rc : zt_error_set(err, ZT_ERR_NOMEM, "saving %s: out of memory", path);
        }
        ok = fwrite(d, 1, bytes, fp) == bytes;
        XXH64_update(h, d, bytes);
        free(d);
    }
    uint64_t digest = ok ? XXH64_digest(h) : 0;
    if (h) XXH64_freeState(h);
    ok = ok && fwrite(&digest, 8, 1, fp) == 1;
    return zt_atomic_commit(&af, ok, "weights", err);
}

/* The whole file in memory, checksum verified. */
static int read_all(const char *path, unsigned char **data, size_t *len, zt_error *err) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return zt_error_set(err, ZT_ERR_CKPT, "cannot open weights %s: %s", path, strerror(errno));
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    if (n < 8 + 4 + 20 + 4 + 8) {
        fclose(fp);
        return zt_error_set(err, ZT_ERR_CKPT, "weights %s: %ld bytes is too short to be a weights file",
                            path, n);
    }
    unsigned char *d = malloc((size_t)n);
    if (!d) {
        fclose(fp);
        return zt_error_set(err, ZT_ERR_NOMEM, "weights %s: out of memory for %ld bytes", path, n);
    }
    size_t got = fread(d, 1, (size_t)n, fp);
    fclose(fp);
    if (got != (size_t)n) {
        free(d);
        return zt_error_set(err, ZT_ERR_IO, "weights %s: short read (%zu of %ld bytes)", path, got, n);
    }
    if (memcmp(d, MAGIC, 8) != 0) {
        free(d);
        return zt_error_set(err, ZT_ERR_CKPT, "weights %s: not a zerotrain weights file (bad magic)", path);
    }
    uint64_t want, have = XXH64(d, (size_t)n - 8, 0);
    memcpy(&want, d + n - 8, 8);
    if (want != have) {
        free(d);
        return zt_error_set(err, ZT_ERR_CKPT,
                            "weights %s: checksum mismatch (stored %016llx, computed %016llx)", path,
                            (unsigned long long)want, (unsigned long long)have);
    }
    *data = d;
    *len = (size_t)n;
    return ZT_OK;
}

/* The LoRA block at *off into spec->lora; *off moves past it. */
static int parse_lora(const unsigned char *d, size_t len, const char *path, zt_model_spec *spec, size_t *off,
                      zt_error *err) {
    zt_lora_config *l = &spec->lora;
    uint16_t tl;
    if (len < *off + 14 + 4 + 8) return zt_error_set(err, ZT_ERR_CKPT, "weights %s: truncated LoRA block", path);
    memcpy(&l->rank, d + *off, 4);
    memcpy(&l->alpha, d + *off + 4, 4);
    memcpy(&l->dropout, d + *off + 8, 4);
    memcpy(&tl, d + *off + 12, 2);
    *off += 14;
    if (l->rank < 1 || tl >= sizeof l->target_modules || len < *off + tl + 4 + 8)
        return zt_error_set(err, ZT_ERR_CKPT, "weights %s: bad LoRA block (rank %d, target_modules of %u bytes)", path,
                            l->rank, (unsigned)tl);
    memcpy(l->target_modules, d + *off, tl);
    l->target_modules[tl] = '\0';
    *off += tl;
    return ZT_OK;
}

/* The model of the header in d (len bytes, checksum verified); *data_off: where n_params is. */
static int parse_model(const unsigned char *d, size_t len, const char *path, zt_model_spec *spec,
                       size_t *n_params_off, zt_error *err) {
    uint32_t version;
    int32_t s[5];
    memset(spec, 0, sizeof *spec);
    if (len < 8 + 4 + 20 + 4 + 8) return zt_error_set(err, ZT_ERR_CKPT, "weights %s: truncated header", path);
    memcpy(&version, d + 8, 4);
    memcpy(s, d + 12, sizeof s);
    if (version < VERSION || version > VERSION_LLAMA + LORA)
        return zt_error_set(err, ZT_ERR_CKPT, "weights %s: version %u, this build reads %u to %u", path, version,
                            VERSION, VERSION_LLAMA + LORA);
    bool lora = version > VERSION_LLAMA;
    if (lora) version -= LORA;
    spec->gpt2 = (zt_gpt2_config){s[0], s[1], s[2], s[3], s[4], ZT_ATTENTION_FLASH};
    *n_params_off = 8 + 4 + 20;
    if (version == VERSION) return lora ? parse_lora(d, len, path, spec, n_params_off, err) : ZT_OK;
    llama_block k;
    if (len < *n_params_off + LLAMA_BLOCK + 4 + 8)
        return zt_error_set(err, ZT_ERR_CKPT, "weights %s: truncated header", path);
    memcpy(&k, d + *n_params_off, sizeof k);
    *n_params_off += LLAMA_BLOCK;
    if (k.arch != ZT_ARCH_LLAMA)
        return zt_error_set(err, ZT_ERR_CKPT, "weights %s: version 2 with architecture %d (1 is llama)", path, k.arch);
    spec->arch = ZT_ARCH_LLAMA;
    spec->llama = (zt_llama_config){s[0], s[1], s[2], s[3], s[4], k.n_kv_head, k.intermediate_size, k.rope_theta,
                                    k.rms_norm_eps,
                                    {k.factor, k.low_freq_factor, k.high_freq_factor,
                                     k.original_max_position_embeddings},
                                    k.tie_embeddings != 0, ZT_ATTENTION_FLASH, 0, 0, 0, 0, false, 0.0f, 0.0f, 0.0f, 0, false,
                                    false};
    return lora ? parse_lora(d, len, path, spec, n_params_off, err) : ZT_OK;
}

int zt_weights_read_config(const char *path, zt_model_spec *spec, zt_error *err) {
    unsigned char *d;
    size_t len, off;
    int rc = read_all(path, &d, &len, err);
    if (rc) return rc;
    rc = parse_model(d, len, path, spec, &off, err);
    free(d);
    return rc;
}

int zt_weights_load(zt_engine *e, const char *path, zt_error *err) {
    const zt_model *m = zt_engine_model(e);
    unsigned char *d;
    size_t len;
    int rc = read_all(path, &d, &len, err);
    if (rc) return rc;
    size_t off = 0, end = len - 8;
    zt_model_spec spec;
    if ((rc = parse_model(d, len, path, &spec, &off, err))) goto out;
    uint32_t np;
    memcpy(&np, d + off, 4);
    off += 4;
    if (np != (uint32_t)m->n_params) {
        rc = zt_error_set(err, ZT_ERR_CKPT, "weights %s: %u tensors, the model has %d", path, np,
                          m->n_params);
        goto out;
    }
    for (int i = 0; i < m->n_params; i++) {
        const zt_param_desc *p = &m->params[i];
        uint16_t nl;
        uint32_t nd;
        if (off + 2 > end) goto truncated;
        memcpy(&nl, d + off, 2);
        off += 2;
        if (off + nl + 4 > end) goto truncated;
        if (nl != strlen(p->name) || memcmp(d + off, p->name, nl) != 0) {
            rc = zt_error_set(err, ZT_ERR_CKPT, "weights %s: tensor %d is \"%.*s\", the model expects %s",
                              path, i, (int)nl, (const char *)d + off, p->name);
            goto out;
        }
        off += nl;
        memcpy(&nd, d + off, 4);
        off += 4;
        if (nd != (uint32_t)p->ndim || off + 8 * nd > end ||
            memcmp(d + off, p->logical_shape, 8 * (size_t)nd) != 0) {
            rc = zt_error_set(err, ZT_ERR_CKPT, "weights %s: tensor %s has a different shape than the "
                              "model's", path, p->name);
            goto out;
        }
        off += 8 * (size_t)nd;
    }
    for (int i = 0; i < m->n_params; i++) {
        size_t bytes = (size_t)m->params[i].logical_numel * sizeof(float);
        if (off + bytes > end) goto truncated;
        /* this rank's part (the whole tensor, or its dim-0 shard), in the parameters' dtype */
        if ((rc = zt_engine_param_set(e, i, (const float *)(const void *)(d + off), err))) goto out;
        off += bytes;
    }
    if (off != end) {
        rc = zt_error_set(err, ZT_ERR_CKPT, "weights %s: %zu unexpected trailing bytes", path, end - off);
        goto out;
    }
    goto out;
truncated:
    rc = zt_error_set(err, ZT_ERR_CKPT, "weights %s: truncated at byte %zu", path, off);
out:
    free(d);
    return rc;
}
