/* shapes.c - the estimator's models: GPT-2 presets (the engine's model) and Llama-2 shapes
 * (shapes.h has the Llama block's parameter and activation table). */
#include "memory/shapes.h"
#include "kernels/kernels.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct llama_preset {
    const char *name;
    zt_llama_shape shape;
} llama_preset;

/* Llama 2 (Touvron et al. 2023, Table 1 and the released configs): 6.74B, 13.02B, 68.98B. */
static const llama_preset LLAMA[] = {
    {"llama-7b", {.n_layer = 32, .d_model = 4096, .n_head = 32, .n_kv_head = 32, .ffn = 11008,
                  .vocab_size = 32000, .max_seq_len = 4096}},
    {"llama-13b", {.n_layer = 40, .d_model = 5120, .n_head = 40, .n_kv_head = 40, .ffn = 13824,
                   .vocab_size = 32000, .max_seq_len = 4096}},
    {"llama-70b", {.n_layer = 80, .d_model = 8192, .n_head = 64, .n_kv_head = 8, .ffn = 28672,
                   .vocab_size = 32000, .max_seq_len = 4096}},
};

int zt_llama_shape_preset(const char *name, zt_llama_shape *out, zt_error *err) {
    for (size_t i = 0; i < sizeof LLAMA / sizeof *LLAMA; i++)
        if (!strcmp(LLAMA[i].name, name)) {
            *out = LLAMA[i].shape;
            return ZT_OK;
        }
    return zt_error_set(err, ZT_ERR_USAGE, "unknown Llama shape \"%s\" (known: llama-7b, llama-13b, llama-70b)", name);
}

/* ---- units: sizes only ---------------------------------------------------------------------- */
static int no_compute(const zt_unit *u, const zt_unit_args *a, zt_error *err) {
    return zt_error_set(err, ZT_ERR_USAGE, "unit %s belongs to a shape-only model (memory estimates): it "
                        "has no compute", u->name);
}

static size_t none(const zt_unit *u, int B, int T) { return 0; }
static size_t none_saved(const zt_unit *u, int B, int T, int lp_kind) { return 0; }

static size_t kv_width(const zt_llama_shape *c) { return (size_t)c->n_kv_head * (c->d_model / c->n_head); }

/* floats of n fp32 elements in a saved buffer (64-byte aligned buffers, as gpt2.c lays them) */
static size_t fp32_floats(size_t n) { return matmul_saved_input_floats(0, n); }

/* the block's saved buffers (shapes.h), those recomputed under selective (att, h) apart */
static size_t block_saved_parts(const zt_unit *u, int B, int T, int lp_kind, size_t *recomputed) {
    const zt_llama_shape *c = u->model_cfg;
    size_t N = (size_t)B * T, d = (size_t)c->d_model, f = (size_t)c->ffn, kv = kv_width(c);
    size_t in_d = matmul_saved_input_floats(lp_kind, N * d); /* rms1, atty, rms2: Linear inputs */
    size_t att = fp32_floats((size_t)B * c->n_head * T * T), h = matmul_saved_input_floats(lp_kind, N * f);
    *recomputed = att + h;
    return 3 * in_d + 2 * fp32_floats(N) + 2 * fp32_floats(N * d) + 2 * fp32_floats(N * kv) + att +
           2 * fp32_floats(N * f) + h;
}

static size_t block_saved(const zt_unit *u, int B, int T, int lp_kind) {
    size_t recomputed;
    return block_saved_parts(u, B, T, lp_kind, &recomputed);
}

static size_t block_scratch(const zt_unit *u, int B, int T) {
    const zt_llama_shape *c = u->model_cfg;
    size_t N = (size_t)B * T;
    return N * (size_t)c->d_model + 2 * N * (size_t)c->ffn +
           attention_scratch_floats(B, T, c->d_model, c->n_head);
}

/* rnd(dout) of the widest Linear output: w1/w3's (N,f) */
static size_t block_staging(const zt_unit *u, int B, int T, int lp_kind) {
    const zt_llama_shape *c = u->model_cfg;
    return matmul_lp_staging_bytes((zt_lp_kind)lp_kind, B * T, c->ffn);
}

static size_t head_saved(const zt_unit *u, int B, int T, int lp_kind) {
    const zt_llama_shape *c = u->model_cfg;
    size_t N = (size_t)B * T;
    return matmul_saved_input_floats(lp_kind, N * (size_t)c->d_model) + fp32_floats(N) +
           fp32_floats(N * (size_t)c->vocab_size);
}

static size_t head_scratch(const zt_unit *u, int B, int T) {
    const zt_llama_shape *c = u->model_cfg;
    return (size_t)B * T * c->d_model;
}

static size_t head_staging(const zt_unit *u, int B, int T, int lp_kind) {
    const zt_llama_shape *c = u->model_cfg;
    return matmul_lp_staging_bytes((zt_lp_kind)lp_kind, B * T, c->vocab_size);
}

/* as GPT-2's units (src/model/gpt2.c) the Linears, the embedding table and the output matrix are
 * read through their compute copy under low-precision compute; the RMSNorm weights as fp32 */
static bool matrices_read_lp(const zt_unit *u, int k) {
    (void)u, (void)k;
    return true; /* the engine asks only about matrices (ndim >= 2) */
}

static const zt_unit_ops EMB_OPS = {.saved_floats = none_saved, .scratch_floats = none, .forward = no_compute,
                                    .backward = no_compute, .reads_lp = matrices_read_lp};
/* selective checkpointing keeps all but the attention matrix and silu(gate)*up (shapes.h) */
static size_t block_kept(const zt_unit *u, int B, int T, int lp_kind) {
    size_t recomputed, saved = block_saved_parts(u, B, T, lp_kind, &recomputed);
    return saved - recomputed;
}

static const zt_unit_ops BLOCK_OPS = {.saved_floats = block_saved, .scratch_floats = block_scratch,
                                      .forward = no_compute, .backward = no_compute,
                                      .staging_bytes = block_staging, .kept_floats = block_kept,
                                      .recompute = no_compute, .reads_lp = matrices_read_lp};
static const zt_unit_ops HEAD_OPS = {.saved_floats = head_saved, .scratch_floats = head_scratch,
                                     .forward = no_compute, .backward = no_compute, .staging_bytes = head_staging,
                                     .reads_lp = matrices_read_lp};

static int add(zt_model *m, const char *name, int64_t d0, int64_t d1, int *idx, zt_error *err) {
    int64_t shape[2] = {d0, d1};
    return zt_model_add_param(m, name, d1 ? 2 : 1, shape, d1 ? ZT_INIT_NORMAL : ZT_INIT_ONES, 0.02f, d1 != 0, idx,
                              err);
}

int zt_llama_shape_create(const zt_llama_shape *c, zt_model **out, zt_error *err) {
    *out = NULL;
    if (c->n_layer < 1 || c->d_model < 1 || c->n_head < 1 || c->n_kv_head < 1 || c->ffn < 1 || c->vocab_size < 2 ||
        c->max_seq_len < 1 || c->d_model % c->n_head || c->n_head % c->n_kv_head)
        return zt_error_set(err, ZT_ERR_USAGE, "llama shape: invalid L=%d d=%d heads=%d kv_heads=%d ffn=%d V=%d",
                            c->n_layer, c->d_model, c->n_head, c->n_kv_head, c->ffn, c->vocab_size);
    zt_model *m;
    int rc = zt_model_create("llama", &m, err);
    if (rc) return rc;
    zt_llama_shape *own = malloc(sizeof *own);
    if (!own) {
        zt_model_free(m);
        return zt_error_set(err, ZT_ERR_NOMEM, "llama shape: out of memory");
    }
    *own = *c;
    m->cfg = own;
    m->vocab_size = c->vocab_size;
    m->max_seq_len = c->max_seq_len;
    int64_t d = c->d_model, kv = (int64_t)kv_width(c), f = c->ffn, V = c->vocab_size;
    int tok, norm, outp;
    if ((rc = add(m, "tok_embeddings.weight", V, d, &tok, err)) ||
        (rc = zt_model_add_unit(m, "embedding", &EMB_OPS, -1, &tok, 1, (int)d, err)))
        goto fail;
    for (int l = 0; l < c->n_layer; l++) {
        static const char *names[] = {"attention_norm.weight", "attention.wq.weight", "attention.wk.weight",
                                      "attention.wv.weight", "attention.wo.weight", "ffn_norm.weight",
                                      "feed_forward.w1.weight", "feed_forward.w2.weight", "feed_forward.w3.weight"};
        const int64_t shape[9][2] = {{d, 0}, {d, d}, {kv, d}, {kv, d}, {d, d}, {d, 0}, {f, d}, {d, f}, {f, d}};
        int idx[9];
        for (int k = 0; k < 9; k++) {
            char name[ZT_NAME_MAX];
            snprintf(name, sizeof name, "layers.%d.%s", l, names[k]);
            if ((rc = add(m, name, shape[k][0], shape[k][1], &idx[k], err))) goto fail;
        }
        char uname[32];
        snprintf(uname, sizeof uname, "layers.%d", l);
        if ((rc = zt_model_add_unit(m, uname, &BLOCK_OPS, l, idx, 9, (int)d, err))) goto fail;
    }
    if ((rc = add(m, "norm.weight", d, 0, &norm, err)) || (rc = add(m, "output.weight", V, d, &outp, err))) goto fail;
    int head[2] = {norm, outp};
    if ((rc = zt_model_add_unit(m, "head", &HEAD_OPS, -1, head, 2, 1, err))) goto fail;
    *out = m;
    return ZT_OK;
fail:
    zt_model_free(m);
    return rc;
}

int zt_estimator_model(const char *name, zt_model **out, bool *formula, zt_error *err) {
    *out = NULL;
    *formula = false;
    zt_llama_shape ls;
    zt_error ignore;
    if (!strncmp(name, "llama", 5) && !zt_llama_shape_preset(name, &ls, &ignore)) {
        *formula = true;
        return zt_llama_shape_create(&ls, out, err);
    }
    zt_gpt2_config gc;
    if (!strncmp(name, "gpt2", 4) || !strcmp(name, "tiny"))
        if (!zt_gpt2_preset(name, &gc, &ignore)) return zt_gpt2_create(&gc, out, err);
    return zt_error_set(err, ZT_ERR_USAGE, "unknown model \"%s\" (known: gpt2-124M, gpt2-350M, gpt2-774M, "
                        "gpt2-1558M, llama-7b, llama-13b, llama-70b; tiny for tests)", name);
}
