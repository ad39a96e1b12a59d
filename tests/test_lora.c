/* test_lora.c - LoRA (src/kernels/lora.c, src/model/lora.c):
 *   - the adapter kernel in fp32 against a double reference (forward) and central finite
 *     differences of it (dx, dA, dB; += semantics), without and with dropout (the mask is
 *     lora_dropout_keep's, so the reference applies the same one); key 0 is no dropout, bit for bit;
 *   - the bf16 and fp16 paths against the double reference of the rounded operands (the bounds
 *     are the intermediate roundings' of u, dout and du);
 *   - target_modules as PEFT reads it (a list entry by whole name or last components, a single
 *     plain name, a regular expression against zerotrain's or transformers' module names,
 *     all-linear, the family defaults) and every refusal naming its key;
 *   - the parameter table: A and B right after the weight, shapes, PEFT's initialization, all
 *     else frozen; B = 0 leaves the loss unchanged, bit for bit; the spec carries the settings;
 *   - fine-tuning a pretrained model: B = 0 changes no bit of the loss, the loss on new data falls,
 *     the base weights keep their bits, in fp32 and bf16 with dropout.
 * Whole-model gradients with adapters against finite differences are in test_model.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <math.h>

#define TEST_RNG_SEED 0x4C6F5241ull
#include "kernels/kernels.h"
#include "test_kernel_check.h"
#include "zerotrain/zerotrain.h"

/* ---- the kernel ---------------------------------------------------------------------------------- */

typedef struct {
    int N, C, OC, r;
    double s, inv;
    const bool *keep; /* (N,C) the dropout mask, or NULL */
    double *x, *A, *B, *g;
} lora_ctx;

/* out (N,OC) = s · drop(x)·Aᵀ·Bᵀ in double */
static void ref_lora(double *out, const lora_ctx *c) {
    double *u = dalloc((size_t)c->N * c->r);
    for (int n = 0; n < c->N; n++)
        for (int j = 0; j < c->r; j++) {
            double acc = 0;
            for (int k = 0; k < c->C; k++) {
                size_t i = (size_t)n * c->C + k;
                double xd = c->keep ? (c->keep[i] ? c->x[i] * c->inv : 0.0) : c->x[i];
                acc += xd * c->A[(size_t)j * c->C + k];
            }
            u[(size_t)n * c->r + j] = acc;
        }
    for (int n = 0; n < c->N; n++)
        for (int o = 0; o < c->OC; o++) {
            double acc = 0;
            for (int j = 0; j < c->r; j++) acc += u[(size_t)n * c->r + j] * c->B[(size_t)o * c->r + j];
            out[(size_t)n * c->OC + o] = c->s * acc;
        }
    free(u);
}

static double lora_loss(void *p) {
    lora_ctx *c = p;
    size_t n = (size_t)c->N * c->OC;
    double *o = dalloc(n);
    ref_lora(o, c);
    double l = dot_gd(c->g, o, n);
    free(o);
    return l;
}

/* got - before vs ref */
static void check_delta(const char *what, const float *got, const float *before, const double *ref, size_t n,
                        double rtol) {
    float *d = falloc(n);
    for (size_t i = 0; i < n; i++) d[i] = got[i] - before[i];
    check_close(what, d, ref, n, rtol);
    free(d);
}

static void run_fp32(int N, int C, int OC, int r, float p) {
    size_t nx = (size_t)N * C, na = (size_t)r * C, nb = (size_t)OC * r, no = (size_t)N * OC;
    float *x = falloc(nx), *A = falloc(na), *B = falloc(nb), *g = falloc(no), *out0 = falloc(no);
    fill(x, nx, 2.0f), fill(A, na, 1.0f), fill(B, nb, 1.0f), fill(g, no, 1.0f), fill(out0, no, 1.0f);
    const float s = 2.5f;
    const uint64_t key = 0x1234567890abcdefULL;
    bool *keep = NULL;
    size_t kept = 0;
    if (p > 0) {
        keep = malloc(nx);
        assert_non_null(keep);
        for (size_t i = 0; i < nx; i++) kept += keep[i] = lora_dropout_keep(key, i, p);
        double frac = (double)kept / (double)nx;
        print_message("  dropout p=%.2f: kept %.3f of %zu\n", (double)p, frac, nx);
        assert_true(fabs(frac - (1.0 - p)) < 4.0 * sqrt(p * (1.0 - p) / (double)nx) + 1e-9);
    }
    lora_ctx c = {N, C, OC, r, s, 1.0f / (1.0f - p), keep, to_double(x, nx), to_double(A, na), to_double(B, nb),
                  to_double(g, no)};
    float *scratch = falloc(lora_scratch_floats(N, C, r, p));
    /* forward: out += ... (starts from out0) */
    float *out = fdup(out0, no);
    lora_forward(out, scratch, x, A, B, s, p, key, N, C, OC, r, 0);
    double *ref = dalloc(no);
    ref_lora(ref, &c);
    /* two products of C and r terms: ~sqrt(C) u; 2e-6 ~ 17 u */
    check_delta(p > 0 ? "lora_forward dropout" : "lora_forward", out, out0, ref, no, 2e-6);
    /* backward vs finite differences; += into nonzero starts */
    float *dx0 = falloc(nx), *dA0 = falloc(na), *dB0 = falloc(nb);
    fill(dx0, nx, 1.0f), fill(dA0, na, 1.0f), fill(dB0, nb, 1.0f);
    float *dx = fdup(dx0, nx), *dA = fdup(dA0, na), *dB = fdup(dB0, nb);
    lora_backward(dx, dA, dB, scratch, NULL, g, x, A, B, s, p, key, N, C, OC, r, 0);
    double *gx = fd_grad(lora_loss, &c, c.x, nx), *gA = fd_grad(lora_loss, &c, c.A, na),
           *gB = fd_grad(lora_loss, &c, c.B, nb);
    check_delta("lora_backward dx (FD)", dx, dx0, gx, nx, 5e-6);
    check_delta("lora_backward dA (FD)", dA, dA0, gA, na, 5e-6);
    check_delta("lora_backward dB (FD)", dB, dB0, gB, nb, 5e-6);
    /* frozen adapters (NULL gradients): dx alone, the same bits */
    float *dx2 = fdup(dx0, nx);
    lora_backward(dx2, NULL, NULL, scratch, NULL, g, x, A, B, s, p, key, N, C, OC, r, 0);
    assert_same_bits("dx with frozen adapters", dx, dx2, nx);
    if (p > 0) { /* key 0 (evaluation): exactly the no-dropout forward */
        float *o1 = fdup(out0, no), *o2 = fdup(out0, no);
        lora_forward(o1, scratch, x, A, B, s, p, 0, N, C, OC, r, 0);
        lora_forward(o2, scratch, x, A, B, s, 0.0f, key, N, C, OC, r, 0);
        assert_same_bits("key 0 = no dropout", o1, o2, no);
        free(o1), free(o2);
    }
    free(x), free(A), free(B), free(g), free(out0), free(out), free(scratch), free(ref), free(dx0), free(dA0);
    free(dB0), free(dx), free(dA), free(dB), free(dx2), free(gx), free(gA), free(gB), free(keep);
    free(c.x), free(c.A), free(c.B), free(c.g);
}

static void test_kernel_fp32(void **state) {
    (void)state;
    run_fp32(13, 24, 19, 4, 0.0f);
    run_fp32(7, 33, 48, 1, 0.0f);
    run_fp32(13, 24, 19, 4, 0.3f);
}

/* The low-precision paths against the double reference on the rounded operands: u, dout and du are
 * rounded once more inside (bf16: 2^-9 relative each, fp16: 2^-12), so the bounds are ~3 of those. */
static void run_lp(zt_lp_kind kind, float p) {
    int N = 16, C = 32, OC = 24, r = 4;
    size_t nx = (size_t)N * C, na = (size_t)r * C, nb = (size_t)OC * r, no = (size_t)N * OC;
    float *x = falloc(nx), *A = falloc(na), *B = falloc(nb), *g = falloc(no), *out0 = falloc(no);
    fill(x, nx, 2.0f), fill(A, na, 1.0f), fill(B, nb, 1.0f), fill(g, no, 1.0f), fill(out0, no, 1.0f);
    /* the operands as the engine holds them (bf16 bits or fp16 values) and their fp32 widening */
    size_t esz = kind == ZT_LP_BF16 ? 2 : 4;
    void *xl = malloc(nx * esz), *Al = malloc(na * esz), *Bl = malloc(nb * esz), *stg = malloc(no * esz);
    assert_true(xl && Al && Bl && stg);
    zt_round_to_lp(kind, xl, x, nx), zt_round_to_lp(kind, Al, A, na), zt_round_to_lp(kind, Bl, B, nb);
    float *xr = falloc(nx), *Ar = falloc(na), *Br = falloc(nb);
    if (kind == ZT_LP_BF16)
        zt_bf16_to_f32(xr, xl, nx), zt_bf16_to_f32(Ar, Al, na), zt_bf16_to_f32(Br, Bl, nb);
    else
        memcpy(xr, xl, nx * 4), memcpy(Ar, Al, na * 4), memcpy(Br, Bl, nb * 4);
    const float s = 0.5f;
    const uint64_t key = 99;
    bool *keep = malloc(nx);
    assert_non_null(keep);
    for (size_t i = 0; i < nx; i++) keep[i] = lora_dropout_keep(key, i, p);
    lora_ctx c = {N, C, OC, r, s, 1.0f / (1.0f - p), p > 0 ? keep : NULL, to_double(xr, nx), to_double(Ar, na),
                  to_double(Br, nb), to_double(g, no)};
    float *scratch = falloc(lora_scratch_floats(N, C, r, p)), *out = fdup(out0, no);
    lora_forward(out, scratch, xl, Al, Bl, s, p, key, N, C, OC, r, kind);
    double *ref = dalloc(no);
    ref_lora(ref, &c);
    double bound = kind == ZT_LP_BF16 ? 1.5e-2 : 2e-3; /* dropout re-rounds x·1/(1-p) too */
    char what[64];
    snprintf(what, sizeof what, "lora_forward %s p=%.1f", kind == ZT_LP_BF16 ? "bf16" : "fp16", (double)p);
    check_delta(what, out, out0, ref, no, bound);
    float *dx0 = falloc(nx), *dA0 = falloc(na), *dB0 = falloc(nb);
    fill(dx0, nx, 1.0f), fill(dA0, na, 1.0f), fill(dB0, nb, 1.0f);
    float *dx = fdup(dx0, nx), *dA = fdup(dA0, na), *dB = fdup(dB0, nb);
    lora_backward(dx, dA, dB, scratch, stg, g, xl, Al, Bl, s, p, key, N, C, OC, r, kind);
    double *gx = fd_grad(lora_loss, &c, c.x, nx), *gA = fd_grad(lora_loss, &c, c.A, na),
           *gB = fd_grad(lora_loss, &c, c.B, nb);
    check_delta("  dx", dx, dx0, gx, nx, 2 * bound);
    check_delta("  dA", dA, dA0, gA, na, 2 * bound);
    check_delta("  dB", dB, dB0, gB, nb, 2 * bound);
    free(x), free(A), free(B), free(g), free(out0), free(xl), free(Al), free(Bl), free(stg), free(xr), free(Ar);
    free(Br), free(keep), free(scratch), free(out), free(ref), free(dx0), free(dA0), free(dB0), free(dx), free(dA);
    free(dB), free(gx), free(gA), free(gB), free(c.x), free(c.A), free(c.B), free(c.g);
}

static void test_kernel_lp(void **state) {
    (void)state;
    run_lp(ZT_LP_BF16, 0.0f);
    run_lp(ZT_LP_BF16, 0.2f);
    run_lp(ZT_LP_FP16, 0.0f);
    run_lp(ZT_LP_FP16, 0.2f);
}

/* ---- target_modules ------------------------------------------------------------------------------ */

static const zt_llama_config LLAMA = {.max_seq_len = 16, .vocab_size = 64, .n_layer = 2, .n_head = 4, .n_embd = 32,
                                      .n_kv_head = 2, .intermediate_size = 48, .rope_theta = 10000.0f,
                                      .rms_norm_eps = 1e-5f};
static const zt_gpt2_config GPT2 = {.max_seq_len = 16, .vocab_size = 64, .n_layer = 2, .n_head = 2, .n_embd = 32};

static zt_model *model(bool llama) {
    zt_error err = {0};
    zt_model *m = NULL;
    assert_int_equal(llama ? zt_llama_create(&LLAMA, &m, &err) : zt_gpt2_create(&GPT2, &m, &err), ZT_OK);
    return m;
}

static zt_lora_config lcfg(int r, float alpha, float p, const char *targets) {
    zt_lora_config c = {.rank = r, .alpha = alpha, .dropout = p};
    snprintf(c.target_modules, sizeof c.target_modules, "%s", targets);
    return c;
}

/* the adapted weights' names joined by spaces (each adapter pair checked on the way) */
static void adapted(const zt_model *m, char *out, size_t cap) {
    out[0] = '\0';
    for (int i = 0; i < m->n_params; i++) {
        const zt_param_desc *p = &m->params[i];
        if (p->lora) continue;
        assert_false(p->trainable);
        if (i + 1 < m->n_params && m->params[i + 1].lora == 'A') {
            const zt_param_desc *a = &m->params[i + 1], *b = &m->params[i + 2];
            assert_int_equal(a->lora_base, i);
            assert_int_equal(b->lora, 'B');
            assert_int_equal(b->lora_base, i);
            assert_true(a->trainable && b->trainable);
            snprintf(out + strlen(out), cap - strlen(out), "%s%s", out[0] ? " " : "", p->name);
        }
    }
}

static void expect(bool llama, const char *targets, int n, const char *first, const char *absent) {
    zt_error err = {0};
    zt_model *m = model(llama);
    zt_lora_config c = lcfg(4, 8.0f, 0.0f, targets);
    int got = -1;
    if (zt_model_add_lora(m, &c, &got, &err)) fail_msg("'%s': %s", targets, err.msg);
    char names[4096];
    adapted(m, names, sizeof names);
    print_message("  %-44s -> %d: %.90s\n", targets[0] ? targets : "(default)", got, names);
    assert_int_equal(got, n);
    assert_non_null(strstr(names, first));
    if (absent) assert_null(strstr(names, absent));
    zt_model_free(m);
}

static void expect_error(bool llama, zt_lora_config c, const char *key, const char *also) {
    zt_error err = {0};
    zt_model *m = model(llama);
    int n0 = m->n_params;
    assert_int_equal(zt_model_add_lora(m, &c, NULL, &err), ZT_ERR_USAGE);
    print_message("  refused: %s\n", err.msg);
    assert_non_null(strstr(err.msg, key));
    if (also) assert_non_null(strstr(err.msg, also));
    assert_int_equal(m->n_params, n0); /* unchanged */
    assert_null(m->lora);
    for (int i = 0; i < m->n_params; i++) assert_true(m->params[i].trainable);
    zt_model_free(m);
}

static void test_targets(void **state) {
    (void)state;
    expect(true, "", 4, "layers.0.self_attn.q_proj.weight", "k_proj");           /* PEFT's llama default */
    expect(true, "q_proj,v_proj", 4, "layers.1.self_attn.v_proj.weight", "o_proj");
    expect(true, " q_proj , down_proj ", 4, "layers.1.mlp.down_proj.weight", "v_proj");
    expect(true, "self_attn.o_proj", 2, "layers.0.self_attn.o_proj.weight", "q_proj");
    expect(true, "model.layers.1.mlp.up_proj", 1, "layers.1.mlp.up_proj.weight", "layers.0");
    expect(true, "all-linear", 14, "layers.1.mlp.gate_proj.weight", NULL);
    expect(true, "layers\\.0\\.self_attn\\.(q|k)_proj", 2, "layers.0.self_attn.k_proj.weight", "layers.1");
    expect(true, ".*\\.layers\\.1\\..*_proj", 7, "layers.1.mlp.down_proj.weight", "layers.0"); /* transformers' names */
    expect(false, "", 2, "h.0.attn.c_attn.weight", "c_proj");                     /* PEFT's gpt2 default */
    expect(false, "c_proj", 4, "h.1.mlp.c_proj.weight", "c_attn");                /* attn.c_proj and mlp.c_proj */
    expect(false, "c_attn,c_fc", 4, "h.0.mlp.c_fc.weight", "c_proj");
    expect(false, "all-linear", 8, "h.1.attn.c_proj.weight", NULL);
    expect(false, "transformer\\.h\\.1\\.attn\\..*", 2, "h.1.attn.c_attn.weight", "h.0");
    /* refusals, each naming its key, the model left as it was */
    expect_error(true, lcfg(4, 8, 0, "q_proj,qproj"), "lora.target_modules 'qproj' matches no module", "q_proj");
    expect_error(true, lcfg(4, 8, 0, "c_attn"), "lora.target_modules", "matches no module");
    expect_error(true, lcfg(4, 8, 0, "q_proj|v_proj"), "lora.target_modules", "model.layers.0.self_attn.q_proj");
    expect_error(true, lcfg(4, 8, 0, "lm_head"), "lora.target_modules 'lm_head' selects lm_head", "not a Linear");
    expect_error(true, lcfg(4, 8, 0, "layers\\.0\\..*"), "lora.target_modules", "input_layernorm");
    expect_error(true, lcfg(4, 8, 0, "embed_tokens"), "lora.target_modules", "not a Linear");
    expect_error(true, lcfg(4, 8, 0, "layers\\.("), "lora.target_modules", "not a regular expression");
    expect_error(true, lcfg(4, 8, 0, "q_proj,,v_proj"), "lora.target_modules", "empty");
    expect_error(false, lcfg(4, 8, 0, "wte"), "lora.target_modules", "not a Linear");
    expect_error(true, lcfg(0, 8, 0, ""), "lora.rank 0", NULL);
    expect_error(true, lcfg(-2, 8, 0, ""), "lora.rank -2", NULL);
    expect_error(true, lcfg(4, -1, 0, ""), "lora.alpha -1", NULL);
    expect_error(true, lcfg(4, 0, 0, ""), "lora.alpha 0", NULL);
    expect_error(true, lcfg(4, 8, 1.0f, ""), "lora.dropout 1", NULL);
    expect_error(true, lcfg(4, 8, -0.1f, ""), "lora.dropout", NULL);
    /* twice */
    zt_error err = {0};
    zt_model *m = model(true);
    zt_lora_config c = lcfg(2, 4, 0, "");
    assert_int_equal(zt_model_add_lora(m, &c, NULL, &err), ZT_OK);
    assert_int_equal(zt_model_add_lora(m, &c, NULL, &err), ZT_ERR_USAGE);
    assert_non_null(strstr(err.msg, "already has LoRA"));
    zt_model_free(m);
}

/* ---- the table, the units, initialization ---------------------------------------------------------- */

static void test_table_and_init(void **state) {
    (void)state;
    zt_error err = {0};
    zt_model *m = model(true);
    int n0 = m->n_params;
    zt_lora_config c = lcfg(3, 6.0f, 0.1f, "all-linear");
    assert_int_equal(zt_model_add_lora(m, &c, NULL, &err), ZT_OK);
    assert_int_equal(m->n_params, n0 + 2 * 14);
    int q = zt_model_find_param(m, "layers.0.self_attn.q_proj.weight");
    int a = zt_model_find_param(m, "layers.0.self_attn.q_proj.lora_A.weight");
    int b = zt_model_find_param(m, "layers.0.self_attn.q_proj.lora_B.weight");
    int d = zt_model_find_param(m, "layers.1.mlp.down_proj.lora_A.weight");
    assert_int_equal(a, q + 1);
    assert_int_equal(b, q + 2);
    assert_int_equal(m->params[a].shape[0], 3), assert_int_equal(m->params[a].shape[1], 32);
    assert_int_equal(m->params[b].shape[0], 32), assert_int_equal(m->params[b].shape[1], 3);
    assert_int_equal(m->params[d].shape[1], 48); /* down_proj's input: the intermediate size */
    assert_int_equal(m->params[a].init, ZT_INIT_UNIFORM);
    assert_int_equal(m->params[b].init, ZT_INIT_ZEROS);
    /* the unit lists A and B after its own nine; its scratch grows by the adapters' */
    const zt_unit *u = &m->units[1];
    assert_int_equal(u->n_params, 9 + 14);
    assert_int_equal(u->params[u->lora_a[0]], a);
    assert_int_equal(u->params[u->lora_b[0]], b);
    assert_true(zt_unit_is_adapter(u, u->lora_a[6]));
    assert_false(zt_unit_is_adapter(u, 0));
    assert_int_equal(u->lora_width, 48);
    assert_int_equal(zt_lora_scratch_floats(u, 2, 16), lora_scratch_floats(32, 48, 3, 0.1f));
    assert_true(u->ops->reads_lp(u, u->lora_b[3]));
    /* the spec carries the settings, and builds the same table */
    zt_model_spec spec;
    assert_int_equal(zt_model_spec_of(m, &spec, &err), ZT_OK);
    assert_int_equal(spec.lora.rank, 3);
    assert_string_equal(spec.lora.target_modules, "all-linear");
    zt_model *m2 = NULL;
    assert_int_equal(zt_model_spec_create(&spec, &m2, &err), ZT_OK);
    assert_int_equal(m2->n_params, m->n_params);
    for (int i = 0; i < m->n_params; i++) assert_string_equal(m2->params[i].name, m->params[i].name);
    zt_model_free(m2);
    /* initialization: A within PEFT's kaiming bound 1/sqrt(C) and spread over it, B zeros */
    zt_engine_options o;
    zt_engine_options_default(&o);
    o.B = 2, o.T = 8;
    zt_engine *e = NULL;
    assert_int_equal(zt_engine_create(m, &o, &e, &err), ZT_OK);
    assert_int_equal(zt_engine_init_params(e, &err), ZT_OK);
    const float *A = zt_engine_param(e, a), *Bm = zt_engine_param(e, b);
    double bound = 1.0 / sqrt(32.0), lo = 0, hi = 0;
    for (int i = 0; i < 96; i++) {
        assert_true(fabs(A[i]) <= bound);
        lo = fmin(lo, A[i]), hi = fmax(hi, A[i]);
        assert_true(Bm[i] == 0.0f);
    }
    assert_true(hi > 0.7 * bound && lo < -0.7 * bound);
    zt_engine_free(e);
    zt_model_free(m);
}

/* ---- fine-tuning ------------------------------------------------------------------------------------ */

enum { TB = 2, TT = 16 };

/* a cycle through 16 of the tokens with a stride: the next token is a function of the current one */
static void tokens(int32_t *t, int n, int stride) {
    for (int i = 0; i < n; i++) t[i] = (int32_t)((uint64_t)stride * (uint64_t)i % 16 * 3);
}

static zt_engine *engine(zt_model *m, zt_precision_mode mode) {
    zt_error err = {0};
    zt_engine_options o;
    zt_engine_options_default(&o);
    o.B = TB, o.T = TT, o.seed = 7;
    zt_precision_default(&o.precision, mode);
    zt_engine *e = NULL;
    assert_int_equal(zt_engine_create(m, &o, &e, &err), ZT_OK);
    assert_int_equal(zt_engine_init_params(e, &err), ZT_OK);
    return e;
}

/* `steps` AdamW steps on the stride's batch (0 steps: the evaluation loss); first and last loss */
static void steps(zt_engine *e, int stride, int n, float lr, float *first, float *last) {
    zt_error err = {0};
    int32_t tok[TB * TT + 1];
    tokens(tok, TB * TT + 1, stride);
    zt_batch b = {.B = TB, .T = TT, .inputs = tok, .targets = tok + 1, .dloss = 1.0f / (TB * TT), .logits_pos = -1};
    if (!n) assert_int_equal(zt_engine_forward(e, &b, first, NULL, &err), ZT_OK);
    for (int s = 0; s < n; s++) {
        float loss;
        zt_step_report r;
        assert_int_equal(zt_engine_forward_backward(e, &b, &loss, &err), ZT_OK);
        assert_int_equal(zt_engine_step(e, lr, &r, &err), ZT_OK);
        if (s == 0) *first = loss;
        *last = loss;
    }
}

/* every parameter of e by name into / out of a flat buffer laid out by `names`' table */
static void copy_params(zt_engine *e, const zt_model *names, float *buf, bool to_engine) {
    zt_error err = {0};
    const zt_model *m = zt_engine_model(e);
    int64_t off = 0;
    for (int i = 0; i < names->n_params; off += names->params[i++].numel) {
        int k = zt_model_find_param(m, names->params[i].name);
        if (k < 0) continue;
        assert_int_equal(to_engine ? zt_engine_param_set(e, k, buf + off, &err)
                                   : zt_engine_param_gather(e, k, buf + off, &err), ZT_OK);
    }
}

/* A model pretrained (all parameters) on stride 5, then LoRA-tuned on stride 7: with B = 0 the
 * tuned model's loss is the pretrained one's to the bit; the loss on the new data falls; the base
 * weights keep their bits; bf16 compute with dropout learns alike. */
static void test_finetune(void **state) {
    (void)state;
    zt_error err = {0};
    for (int llama = 0; llama < 2; llama++) {
        zt_model *plain = model(llama);
        zt_engine *e0 = engine(plain, ZT_PRECISION_FP32);
        float f = 0, l = 0, eval0 = 0;
        steps(e0, 5, 60, 1e-2f, &f, &l);
        steps(e0, 7, 0, 0, &eval0, NULL);
        print_message("  %s pretrained on stride 5: %.4f -> %.4f; loss on stride 7: %.4f\n", llama ? "llama" : "gpt2",
                      (double)f, (double)l, (double)eval0);
        int64_t n = zt_model_numel(plain);
        float *base = falloc((size_t)n), *after = falloc((size_t)n);
        copy_params(e0, plain, base, false);
        for (int mode = 0; mode < 2; mode++) {
            zt_model *m = model(llama);
            zt_lora_config c = lcfg(4, 8.0f, mode ? 0.1f : 0.0f, "all-linear");
            assert_int_equal(zt_model_add_lora(m, &c, NULL, &err), ZT_OK);
            zt_engine *e = engine(m, mode ? ZT_PRECISION_BF16 : ZT_PRECISION_FP32);
            copy_params(e, plain, base, true);
            float eval = 0, first = 0, last = 0;
            steps(e, 7, 0, 0, &eval, NULL);
            steps(e, 7, 60, 1e-2f, &first, &last);
            copy_params(e, plain, after, false);
            bool kept = !memcmp(base, after, (size_t)n * sizeof(float));
            print_message("  %s LoRA %s on stride 7: %.4f -> %.4f, base weights kept: %d\n", llama ? "llama" : "gpt2",
                          mode ? "bf16 dropout 0.1" : "fp32", (double)first, (double)last, kept);
            if (!mode) assert_true(eval == eval0);
            else assert_true(fabsf(eval - eval0) < 0.02f * eval0);
            assert_true(kept);
            assert_true(last < 0.5f * first);
            zt_engine_free(e);
            zt_model_free(m);
        }
        free(base), free(after);
        zt_engine_free(e0);
        zt_model_free(plain);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kernel_fp32),
        cmocka_unit_test(test_kernel_lp),
        cmocka_unit_test(test_targets),
        cmocka_unit_test(test_table_and_init),
        cmocka_unit_test(test_finetune),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
