/* test_checkpointing.c - activation checkpointing (src/engine/recompute.c, the GPT-2 block's
 * kept_floats/recompute): the GPT-2 block's selective recomputation and full re-run rebuild its
 * saved activations bit for bit and give the plain backward's gradients bit for bit, in fp32 and
 * under bf16/fp16 compute (where the Linears' saved inputs are the rounded operands); the engine's
 * gradients, losses and parameters after steps agree bit for bit under none, full and selective
 * in fp32, bf16 and fp16; the engine's activation bytes drop by the closed-form amounts (fp32 and
 * bf16 saved buffers); the engine recomputes exactly
 * the units it should (counted on a toy model); the unit API's error paths.
 * (Multi-rank ddp/zero3 runs: tests/activation_checkpointing.sh.) */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "kernels/kernels.h"
#include "zerotrain/zerotrain.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t lcg(uint64_t *s) {
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return *s >> 33;
}

/* uniform in [lo, hi) */
static void fill(float *x, size_t n, float lo, float hi, uint64_t seed) {
    for (size_t i = 0; i < n; i++) x[i] = lo + (hi - lo) * (float)(lcg(&seed) & 0xffffff) / 16777216.0f;
}

static void make_tokens(int32_t *t, int n, int V, uint64_t seed) {
    for (int i = 0; i < n; i++) t[i] = (int32_t)(lcg(&seed) % (uint64_t)V);
}

static void poison(float *x, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = NAN;
}

static void *xcalloc(size_t n) {
    void *p = calloc(n ? n : 1, sizeof(float));
    assert_non_null(p);
    return p;
}

/* ---------------------------------------------------------------------------------------------
 * The GPT-2 block on its own. */

typedef struct block_run {
    float *grads[ZT_UNIT_MAX_PARAMS];
    float *din;
} block_run;

/* The block's parameters filled from seed (layernorm weights near 1, the rest near 0) and, under
 * lp_kind, the engine's compute copy of each matrix in params_lp (NULL entries otherwise). */
static void block_params(const zt_model *m, const zt_unit *u, int lp_kind, int seed, float **params,
                         const void **params_lp) {
    for (int k = 0; k < u->n_params; k++) {
        const zt_param_desc *p = &m->params[u->params[k]];
        params[k] = xcalloc((size_t)p->numel);
        bool ln_weight = strstr(p->name, "ln_") && strstr(p->name, "weight");
        fill(params[k], (size_t)p->numel, ln_weight ? 0.8f : -0.1f, ln_weight ? 1.2f : 0.1f, seed + k);
        params_lp[k] = NULL;
        if (lp_kind && p->ndim >= 2) { /* the engine's compute copy */
            void *c = xcalloc((size_t)p->numel);
            zt_round_to_lp((zt_lp_kind)lp_kind, c, params[k], (size_t)p->numel);
            params_lp[k] = c;
        }
    }
}

/* lp_kind 0 (fp32), ZT_LP_BF16 or ZT_LP_FP16: the block with compute copies of its matrices; under
 * either attention kernel */
static void check_block_recompute(int lp_kind, zt_attention attention) {
    zt_error err = {0};
    const zt_gpt2_config cfg = {.max_seq_len = 16, .vocab_size = 50, .n_layer = 1, .n_head = 4, .n_embd = 32,
                                .attention = attention};
    zt_model *m;
    assert_int_equal(zt_gpt2_create(&cfg, &m, &err), ZT_OK);
    const zt_unit *u = &m->units[1]; /* h.0 */
    assert_string_equal(u->name, "h.0");
    assert_non_null(u->ops->kept_floats);
    assert_non_null(u->ops->recompute);
    const int B = 2, T = 16, C = cfg.n_embd, NH = cfg.n_head;
    const size_t N = (size_t)B * T, NC = N * C;
    size_t S = u->ops->saved_floats(u, B, T, lp_kind), K = u->ops->kept_floats(u, B, T, lp_kind);
    /* closed forms (gpt2.c's layout comment): kept N(11C+4), rest 4NC, and naive attention's
     * probabilities B·NH·T² in the rest, or flash's lse B·NH·T kept (and under lp compute its fp32
     * output NC); under bf16 the Linears' inputs ln1, atty, ln2 (kept) and gelu(fch) (rest) take
     * half: 1.5NC and 2NC less */
    size_t saved_bf16 = lp_kind == ZT_LP_BF16 ? 1 : 0, fl = attention == ZT_ATTENTION_FLASH;
    assert_int_equal(K, N * (11 * C + 4) - saved_bf16 * 3 * NC / 2 + fl * ((size_t)B * NH * T + (lp_kind ? NC : 0)));
    assert_int_equal(S - K, (1 - fl) * (size_t)B * NH * T * T + 4 * NC - saved_bf16 * 2 * NC);

    float *params[ZT_UNIT_MAX_PARAMS];
    const void *params_lp[ZT_UNIT_MAX_PARAMS] = {0};
    block_params(m, u, lp_kind, 100, params, params_lp);
    void *staging = lp_kind ? xcalloc(u->ops->staging_bytes(u, B, T, lp_kind) / sizeof(float) + 1) : NULL;
    float *in = xcalloc(NC), *dout = xcalloc(NC), *out = xcalloc(NC), *out2 = xcalloc(NC);
    fill(in, NC, -1, 1, 1);
    fill(dout, NC, -1e-2f, 1e-2f, 2);
    float *scratch = xcalloc(u->ops->scratch_floats(u, B, T));
    zt_batch batch = {.B = B, .T = T, .logits_pos = -1};
    block_run run[3];
    for (int r = 0; r < 3; r++) {
        for (int k = 0; k < u->n_params; k++) run[r].grads[k] = xcalloc((size_t)m->params[u->params[k]].numel);
        run[r].din = xcalloc(NC);
    }

    /* 0: plain, one contiguous saved buffer */
    float *saved = xcalloc(S);
    zt_unit_args a = {.batch = &batch, .params = params, .grads = run[0].grads, .in = in, .out = out,
                      .saved = saved, .scratch = scratch, .dout = dout, .din = run[0].din,
                      .lp_kind = lp_kind, .params_lp = lp_kind ? params_lp : NULL, .staging = staging};
    assert_int_equal(u->ops->forward(u, &a, &err), ZT_OK);
    assert_int_equal(u->ops->backward(u, &a, &err), ZT_OK);

    /* 1: selective, the kept part and the rest apart; the rest poisoned, then recomputed */
    float *kept = xcalloc(K), *rest = xcalloc(S - K), *kept_copy = xcalloc(K);
    zt_unit_args s = a;
    s.grads = run[1].grads;
    s.out = out2;
    s.saved = kept;
    s.saved_rest = rest;
    s.din = run[1].din;
    assert_int_equal(u->ops->forward(u, &s, &err), ZT_OK);
    assert_memory_equal(out2, out, NC * sizeof(float));
    assert_memory_equal(kept, saved, K * sizeof(float)); /* the same layout, split */
    assert_memory_equal(rest, saved + K, (S - K) * sizeof(float));
    /* the plain backward may overwrite its saved buffer: recompute the reference from a fresh forward */
    memcpy(kept_copy, kept, K * sizeof(float));
    poison(rest, S - K);
    zt_unit_args r = s;
    r.out = NULL;
    r.grads = NULL;
    r.dout = NULL;
    r.din = NULL;
    assert_int_equal(u->ops->recompute(u, &r, &err), ZT_OK);
    assert_memory_equal(kept, kept_copy, K * sizeof(float)); /* the kept part is read, not written */
    float *ref = xcalloc(S);
    zt_unit_args f = {.batch = &batch, .params = params, .in = in, .out = out2, .saved = ref, .scratch = scratch,
                      .lp_kind = lp_kind, .params_lp = a.params_lp, .staging = staging};
    assert_int_equal(u->ops->forward(u, &f, &err), ZT_OK);
    assert_memory_equal(rest, ref + K, (S - K) * sizeof(float)); /* (att and) gelu(fch), bit for bit */
    assert_int_equal(u->ops->backward(u, &s, &err), ZT_OK);

    /* 2: full, the whole saved buffer poisoned, then the forward re-run into a throwaway output */
    poison(saved, S);
    fill(out2, NC, 5, 6, 3);
    zt_unit_args g = f;
    g.saved = saved;
    assert_int_equal(u->ops->forward(u, &g, &err), ZT_OK);
    assert_memory_equal(out2, out, NC * sizeof(float));
    zt_unit_args b2 = a;
    b2.grads = run[2].grads;
    b2.din = run[2].din;
    assert_int_equal(u->ops->backward(u, &b2, &err), ZT_OK);

    for (int v = 1; v < 3; v++) {
        for (int k = 0; k < u->n_params; k++) {
            const zt_param_desc *p = &m->params[u->params[k]];
            if (memcmp(run[v].grads[k], run[0].grads[k], (size_t)p->numel * sizeof(float)))
                fail_msg("%s: gradient of %s differs from the plain backward", v == 1 ? "selective" : "full",
                         p->name);
        }
        assert_memory_equal(run[v].din, run[0].din, NC * sizeof(float));
    }
    /* and the gradients are not trivially equal (all zero) */
    double gsum = 0;
    for (size_t i = 0; i < (size_t)m->params[u->params[2]].numel; i++) gsum += fabs(run[0].grads[2][i]);
    assert_true(gsum > 0);

    for (int k = 0; k < u->n_params; k++) free(params[k]), free((void *)params_lp[k]);
    free(staging);
    for (int v = 0; v < 3; v++) {
        for (int k = 0; k < u->n_params; k++) free(run[v].grads[k]);
        free(run[v].din);
    }
    free(in), free(dout), free(out), free(out2), free(scratch), free(saved), free(kept), free(rest);
    free(kept_copy), free(ref);
    zt_model_free(m);
}

static void test_block_recompute_is_bit_identical(void **state) {
    (void)state;
    for (int k = 0; k < 2; k++) {
        zt_attention att = k ? ZT_ATTENTION_NAIVE : ZT_ATTENTION_FLASH;
        check_block_recompute(0, att);
        check_block_recompute(ZT_LP_BF16, att);
        check_block_recompute(ZT_LP_FP16, att);
    }
}

/* Under bf16 compute the Linears' saved inputs are the bf16 operands: ln1 is rnd(LN(x)), the
 * input c_attn multiplied by, and gelu(fch) rnd(gelu(fch)), rebuilt rounded by the recompute. */
static void test_block_saves_rounded_operands(void **state) {
    (void)state;
    zt_error err = {0};
    const zt_gpt2_config cfg = {.max_seq_len = 16, .vocab_size = 50, .n_layer = 1, .n_head = 4, .n_embd = 32};
    zt_model *m;
    assert_int_equal(zt_gpt2_create(&cfg, &m, &err), ZT_OK);
    const zt_unit *u = &m->units[1];
    const int B = 2, T = 16, C = cfg.n_embd;
    const size_t N = (size_t)B * T, NC = N * C;
    float *params[ZT_UNIT_MAX_PARAMS];
    const void *params_lp[ZT_UNIT_MAX_PARAMS] = {0};
    block_params(m, u, ZT_LP_BF16, 200, params, params_lp);
    size_t S = u->ops->saved_floats(u, B, T, ZT_LP_BF16);
    float *in = xcalloc(NC), *out = xcalloc(NC), *saved = xcalloc(S), *scratch = xcalloc(u->ops->scratch_floats(u, B, T));
    void *staging = xcalloc(u->ops->staging_bytes(u, B, T, ZT_LP_BF16) / sizeof(float) + 1);
    fill(in, NC, -1, 1, 7);
    zt_batch batch = {.B = B, .T = T, .logits_pos = -1};
    zt_unit_args a = {.batch = &batch, .params = params, .in = in, .out = out, .saved = saved, .scratch = scratch,
                      .lp_kind = ZT_LP_BF16, .params_lp = params_lp, .staging = staging};
    assert_int_equal(u->ops->forward(u, &a, &err), ZT_OK);
    /* ln1 = rnd(LN(in)) at the start of the saved buffer, its mean and rstd right after (64-byte aligned) */
    float *ln = xcalloc(NC), *mean = xcalloc(N), *rstd = xcalloc(N);
    uint16_t *want = xcalloc(NC);
    layernorm_forward(ln, mean, rstd, in, params[0], params[1], (int)N, C);
    zt_f32_to_bf16(want, ln, NC);
    assert_memory_equal(saved, want, NC * sizeof(uint16_t));
    assert_memory_equal(saved + NC / 2, mean, N * sizeof(float));
    assert_memory_equal(saved + NC / 2 + N, rstd, N * sizeof(float));
    /* the missing compute copy of a Linear weight is an internal error, not a silent fp32 product */
    const void *none[ZT_UNIT_MAX_PARAMS] = {0};
    a.params_lp = none;
    assert_int_equal(u->ops->forward(u, &a, &err), ZT_ERR_INTERNAL);
    assert_non_null(strstr(err.msg, "h.0: compute (lp_kind 1) without a compute copy of parameter 2"));
    for (int k = 0; k < u->n_params; k++) free(params[k]), free((void *)params_lp[k]);
    free(in), free(out), free(saved), free(scratch), free(staging), free(ln), free(mean), free(rstd), free(want);
    zt_model_free(m);
}

/* ---------------------------------------------------------------------------------------------
 * The engine, one process. */

static zt_engine *engine(const zt_gpt2_config *cfg, int B, int T, zt_recompute mode, zt_precision_mode precision,
                         zt_model **mout) {
    zt_error err = {0};
    zt_model *m = NULL;
    assert_int_equal(zt_gpt2_create(cfg, &m, &err), ZT_OK);
    zt_engine_options o;
    zt_engine_options_default(&o);
    o.B = B;
    o.T = T;
    o.seed = 99;
    o.activation_checkpointing = mode;
    zt_precision_default(&o.precision, precision);
    zt_engine *e = NULL;
    if (zt_engine_create(m, &o, &e, &err)) fail_msg("%s", err.msg);
    assert_int_equal(zt_engine_init_params(e, &err), ZT_OK);
    *mout = m;
    return e;
}

/* Gradients of two micro-batches (the second one shorter than planned), then losses and the
 * parameter hash over 4 steps, under none, full and selective: all bit-identical. */
static void check_engine_modes(zt_precision_mode precision) {
    const zt_gpt2_config cfg = {.max_seq_len = 16, .vocab_size = 61, .n_layer = 3, .n_head = 2, .n_embd = 16};
    const int B = 2, T = 12;
    int32_t tok[2][B * T + 1];
    make_tokens(tok[0], B * T + 1, cfg.vocab_size, 11);
    make_tokens(tok[1], B * T + 1, cfg.vocab_size, 12);
    float *grads[3] = {NULL, NULL, NULL}, losses[3][6];
    uint64_t hash[3];
    size_t total = 0;
    for (int mode = 0; mode < 3; mode++) {
        zt_error err = {0};
        zt_model *m;
        zt_engine *e = engine(&cfg, B, T, (zt_recompute)mode, precision, &m);
        total = (size_t)zt_model_numel(m);
        zt_batch b0 = {.B = B, .T = T, .inputs = tok[0], .targets = tok[0] + 1, .dloss = 1.0f / (2 * B * T),
                       .logits_pos = -1};
        zt_batch b1 = {.B = B, .T = T - 3, .inputs = tok[1], .targets = tok[1] + 1, .dloss = 1.0f / (2 * B * T),
                       .logits_pos = -1};
        assert_int_equal(zt_engine_forward_backward(e, &b0, &losses[mode][0], &err), ZT_OK);
        assert_int_equal(zt_engine_forward_backward(e, &b1, &losses[mode][1], &err), ZT_OK);
        grads[mode] = xcalloc(total);
        size_t off = 0;
        for (int i = 0; i < m->n_params; i++) {
            float *g = zt_engine_grad(e, i);
            assert_non_null(g);
            memcpy(grads[mode] + off, g, (size_t)m->params[i].numel * sizeof(float));
            off += (size_t)m->params[i].numel;
        }
        zt_step_report rep;
        assert_int_equal(zt_engine_step(e, 1e-2f, &rep, &err), ZT_OK);
        for (int s = 2; s < 5; s++) {
            assert_int_equal(zt_engine_forward_backward(e, &b0, &losses[mode][s], &err), ZT_OK);
            assert_int_equal(zt_engine_step(e, 1e-2f, &rep, &err), ZT_OK);
        }
        assert_int_equal(zt_engine_forward(e, &b1, &losses[mode][5], NULL, &err), ZT_OK); /* inference */
        hash[mode] = zt_engine_param_hash(e);
        zt_engine_free(e);
        zt_model_free(m);
    }
    for (int mode = 1; mode < 3; mode++) {
        if (memcmp(grads[mode], grads[0], total * sizeof(float)))
            fail_msg("%s: gradients differ from none", zt_recompute_name((zt_recompute)mode));
        assert_memory_equal(losses[mode], losses[0], sizeof losses[0]);
        assert_true(hash[mode] == hash[0]);
    }
    assert_true(losses[0][4] < losses[0][0]); /* it trains */
    for (int mode = 0; mode < 3; mode++) free(grads[mode]);
}

static void test_engine_modes_are_bit_identical(void **state) {
    (void)state;
    check_engine_modes(ZT_PRECISION_FP32);
    check_engine_modes(ZT_PRECISION_BF16);
    check_engine_modes(ZT_PRECISION_FP16);
}

static size_t rounded(size_t floats) { return (floats * sizeof(float) + 63) & ~(size_t)63; }

/* The activation class drops by exactly what recompute.c's table says, in closed form for GPT-2:
 * full frees every block's and the head's saved buffer for one buffer of the largest; selective
 * frees every block's rest (gelu(fch), and naive attention's att) for one buffer of a rest. In fp32
 * and in bf16, where the Linears' inputs (ln1, atty, ln2, gelu(fch); the head's lnf) are saved as
 * bf16 (and flash attention keeps its fp32 output beside atty). */
static void check_activation_bytes(zt_precision_mode precision, zt_attention attention) {
    const int B = 2, T = 16;
    const zt_gpt2_config cfgs[2] = {
        {.max_seq_len = 16, .vocab_size = 64, .n_layer = 3, .n_head = 2, .n_embd = 32, .attention = attention},
        {.max_seq_len = 16, .vocab_size = 2000, .n_layer = 2, .n_head = 2, .n_embd = 16, .attention = attention}
    }; /* the block largest, the head largest */
    for (int c = 0; c < 2; c++) {
        const zt_gpt2_config *g = &cfgs[c];
        size_t N = (size_t)B * T, C = (size_t)g->n_embd, L = (size_t)g->n_layer;
        size_t bf16 = precision == ZT_PRECISION_BF16, NC = N * C;
        /* naive: att (B,NH,T,T) in the rest; flash: lse (B,NH,T) and, under bf16, its fp32 O kept */
        size_t att = attention == ZT_ATTENTION_NAIVE ? (size_t)B * g->n_head * T * T : 0;
        size_t fl = attention == ZT_ATTENTION_FLASH ? (size_t)B * g->n_head * T + bf16 * NC : 0;
        size_t S_block = N * (15 * C + 4) + att + fl - bf16 * 7 * NC / 2;
        size_t K_block = N * (11 * C + 4) + fl - bf16 * 3 * NC / 2;
        size_t R_block = S_block - K_block;
        size_t S_head = N * (C + 2 + (size_t)g->vocab_size) - bf16 * NC / 2;
        size_t act[3];
        for (int mode = 0; mode < 3; mode++) {
            zt_model *m;
            zt_engine *e = engine(g, B, T, (zt_recompute)mode, precision, &m);
            assert_int_equal(m->units[1].ops->saved_floats(&m->units[1], B, T, bf16), S_block);
            assert_int_equal(m->units[1].ops->kept_floats(&m->units[1], B, T, bf16), K_block);
            assert_int_equal(m->units[L + 1].ops->saved_floats(&m->units[L + 1], B, T, bf16), S_head);
            zt_memory_report r;
            zt_engine_memory(e, &r);
            act[mode] = r.activations;
            zt_engine_free(e);
            zt_model_free(m);
        }
        size_t largest = S_block > S_head ? S_block : S_head;
        size_t drop_full = L * rounded(S_block) + rounded(S_head) - rounded(largest);
        size_t drop_sel = L * (rounded(S_block) - rounded(K_block)) - rounded(R_block);
        if (act[0] - act[1] != drop_full || act[0] - act[2] != drop_sel)
            fail_msg("%s config %d: activations none %zu, full %zu (drop %zu, expected %zu), selective %zu (drop "
                     "%zu, expected %zu)", zt_precision_mode_name(precision), c, act[0], act[1], act[0] - act[1],
                     drop_full, act[2], act[0] - act[2], drop_sel);
    }
}

static void test_activation_bytes_drop_as_planned(void **state) {
    (void)state;
    for (int k = 0; k < 2; k++) {
        check_activation_bytes(ZT_PRECISION_FP32, k ? ZT_ATTENTION_NAIVE : ZT_ATTENTION_FLASH);
        check_activation_bytes(ZT_PRECISION_BF16, k ? ZT_ATTENTION_NAIVE : ZT_ATTENTION_FLASH);
    }
}

/* ---------------------------------------------------------------------------------------------
 * A toy model that counts what the engine calls: units of width W, saved = [x | y = x²], kept x,
 * out = y ⊙ w (the last unit: the per-token sum of y ⊙ w). */
enum { W = 4 };
static int n_forward, n_recompute;

static size_t toy_saved(const zt_unit *u, int B, int T, int lp_kind) { return (size_t)2 * B * T * W; }
static size_t toy_kept(const zt_unit *u, int B, int T, int lp_kind) { return (size_t)B * T * W; }
static size_t toy_kept_too_many(const zt_unit *u, int B, int T, int lp_kind) { return (size_t)3 * B * T * W; }
static size_t toy_scratch(const zt_unit *u, int B, int T) { return 0; }

static int toy_forward(const zt_unit *u, const zt_unit_args *a, zt_error *err) {
    size_t N = (size_t)a->batch->B * a->batch->T;
    float *x = a->saved, *y = zt_unit_saved_rest(a, N * W);
    const float *w = a->params[0];
    n_forward++;
    for (size_t i = 0; i < N; i++) {
        float acc = 0;
        for (int j = 0; j < W; j++) {
            x[i * W + j] = a->in ? a->in[i * W + j] : (float)(a->batch->inputs[i] % 7) * 0.1f + 0.01f * j;
            y[i * W + j] = x[i * W + j] * x[i * W + j];
            if (u->out_width == W) a->out[i * W + j] = y[i * W + j] * w[j];
            acc += y[i * W + j] * w[j];
        }
        if (u->out_width == 1) a->out[i] = acc;
    }
    return ZT_OK;
}

static int toy_recompute(const zt_unit *u, const zt_unit_args *a, zt_error *err) {
    size_t N = (size_t)a->batch->B * a->batch->T;
    const float *x = a->saved;
    float *y = zt_unit_saved_rest(a, N * W);
    n_recompute++;
    for (size_t i = 0; i < N * W; i++) y[i] = x[i] * x[i];
    return ZT_OK;
}

static int toy_backward(const zt_unit *u, const zt_unit_args *a, zt_error *err) {
    size_t N = (size_t)a->batch->B * a->batch->T;
    const float *x = a->saved, *y = zt_unit_saved_rest(a, N * W), *w = a->params[0];
    for (size_t i = 0; i < N; i++)
        for (int j = 0; j < W; j++) {
            float d = u->out_width == 1 ? a->dout[i] : a->dout[i * W + j];
            a->grads[0][j] += d * y[i * W + j];
            if (a->din) a->din[i * W + j] = d * w[j] * 2.0f * x[i * W + j];
        }
    return ZT_OK;
}

static const zt_unit_ops TOY = {.saved_floats = toy_saved, .scratch_floats = toy_scratch, .forward = toy_forward,
                                .backward = toy_backward, .kept_floats = toy_kept, .recompute = toy_recompute};
static const zt_unit_ops TOY_PLAIN = {.saved_floats = toy_saved, .scratch_floats = toy_scratch,
                                      .forward = toy_forward, .backward = toy_backward};

static zt_model *toy_model(int units, const zt_unit_ops *ops) {
    zt_error err = {0};
    zt_model *m;
    assert_int_equal(zt_model_create("toy", &m, &err), ZT_OK);
    m->vocab_size = 10;
    m->max_seq_len = 8;
    for (int k = 0; k < units; k++) {
        char name[32];
        int64_t shape[1] = {W};
        int idx;
        snprintf(name, sizeof name, "w%d", k);
        assert_int_equal(zt_model_add_param(m, name, 1, shape, ZT_INIT_NORMAL, 0.5f, false, &idx, &err), ZT_OK);
        snprintf(name, sizeof name, "u%d", k);
        if (zt_model_add_unit(m, name, ops, k, &idx, 1, k == units - 1 ? 1 : W, &err)) fail_msg("%s", err.msg);
    }
    return m;
}

/* Recomputes per micro-batch: full re-runs every unit's forward but the last (its saved buffer
 * is still in the shared one); selective calls recompute for every unit but the last; units
 * without kept_floats/recompute under selective keep everything (nothing recomputed, the same
 * bytes as none). Gradients agree bit for bit in every case. */
static void test_engine_recomputes_what_it_should(void **state) {
    (void)state;
    const int U = 4, B = 2, T = 8;
    int32_t tok[B * T + 1];
    make_tokens(tok, B * T + 1, 10, 5);
    zt_batch b = {.B = B, .T = T, .inputs = tok, .targets = tok + 1, .dloss = 0.25f, .logits_pos = -1};
    struct {
        const zt_unit_ops *ops;
        zt_recompute mode;
        int fwd, rec;
    } C[] = {{&TOY, ZT_RECOMPUTE_NONE, U, 0},          {&TOY, ZT_RECOMPUTE_FULL, 2 * U - 1, 0},
             {&TOY, ZT_RECOMPUTE_SELECTIVE, U, U - 1}, {&TOY_PLAIN, ZT_RECOMPUTE_SELECTIVE, U, 0},
             {&TOY_PLAIN, ZT_RECOMPUTE_FULL, 2 * U - 1, 0}};
    float ref[U * W];
    size_t act_none = 0;
    for (size_t c = 0; c < sizeof C / sizeof C[0]; c++) {
        zt_error err = {0};
        zt_model *m = toy_model(U, C[c].ops);
        zt_engine_options o;
        zt_engine_options_default(&o);
        o.B = B;
        o.T = T;
        o.activation_checkpointing = C[c].mode;
        zt_engine *e;
        if (zt_engine_create(m, &o, &e, &err)) fail_msg("%s", err.msg);
        assert_int_equal(zt_engine_init_params(e, &err), ZT_OK);
        n_forward = n_recompute = 0;
        float loss;
        assert_int_equal(zt_engine_forward_backward(e, &b, &loss, &err), ZT_OK);
        if (n_forward != C[c].fwd || n_recompute != C[c].rec)
            fail_msg("case %zu (%s): %d forwards, %d recomputes; expected %d, %d", c, zt_recompute_name(C[c].mode),
                     n_forward, n_recompute, C[c].fwd, C[c].rec);
        float g[U * W];
        for (int k = 0; k < U; k++) memcpy(g + k * W, zt_engine_grad(e, k), W * sizeof(float));
        if (c == 0) memcpy(ref, g, sizeof g);
        else assert_memory_equal(g, ref, sizeof g);
        zt_memory_report r;
        zt_engine_memory(e, &r);
        if (c == 0) act_none = r.activations;
        if (c == 3) assert_int_equal(r.activations, act_none); /* no kept_floats: keeps everything */
        zt_engine_free(e);
        zt_model_free(m);
    }
}

/* HFU's recomputed FLOPs (docs/observability.md): GPT-2 124M at T = 1024 with naive attention
 * recomputes 73% of its forward under full (every block, not the head) and 6.6% under selective
 * (the scores Q·Kᵀ); with flash attention its backward recomputes the scores in every mode: 6.6%
 * more under none and full, the same under selective (which then rebuilds no probabilities). */
static void test_recompute_flops(void **state) {
    (void)state;
    zt_error err = {0};
    zt_gpt2_config cfg;
    assert_int_equal(zt_gpt2_preset("gpt2-124M", &cfg, &err), ZT_OK);
    const double scores = 12.0 * 2.0 * 768 * 1024;
    for (int k = 0; k < 2; k++) {
        zt_model *m;
        cfg.attention = k ? ZT_ATTENTION_NAIVE : ZT_ATTENTION_FLASH;
        assert_int_equal(zt_gpt2_create(&cfg, &m, &err), ZT_OK);
        double fwd = m->train_flops_per_token(m, 1024) / 3.0, fl = k ? 0.0 : scores;
        double none = m->recompute_flops_per_token(m, 1024, ZT_RECOMPUTE_NONE);
        double full = m->recompute_flops_per_token(m, 1024, ZT_RECOMPUTE_FULL);
        double sel = m->recompute_flops_per_token(m, 1024, ZT_RECOMPUTE_SELECTIVE);
        assert_true(none == fl);
        assert_true(full == 12.0 * (24.0 * 768 * 768 + 4.0 * 768 * 1024) + fl);
        assert_true(sel == scores);
        if (fabs((full - fl) / fwd - 0.7283) > 1e-3 || fabs(sel / fwd - 0.0662) > 1e-3)
            fail_msg("recomputed fraction of the forward: full %.4f, selective %.4f", full / fwd, sel / fwd);
        zt_model_free(m);
    }
}

static void test_api_errors(void **state) {
    (void)state;
    zt_error err = {0};
    /* kept_floats and recompute come together */
    zt_model *m;
    assert_int_equal(zt_model_create("bad", &m, &err), ZT_OK);
    int64_t shape[1] = {W};
    int idx;
    assert_int_equal(zt_model_add_param(m, "w", 1, shape, ZT_INIT_ONES, 0, false, &idx, &err), ZT_OK);
    zt_unit_ops half = TOY_PLAIN;
    half.kept_floats = toy_kept;
    assert_int_equal(zt_model_add_unit(m, "half", &half, 0, &idx, 1, 1, &err), ZT_ERR_USAGE);
    assert_non_null(strstr(err.msg, "unit half declares kept_floats without recompute"));
    half.kept_floats = NULL;
    half.recompute = toy_recompute;
    assert_int_equal(zt_model_add_unit(m, "half", &half, 0, &idx, 1, 1, &err), ZT_ERR_USAGE);
    assert_non_null(strstr(err.msg, "declares recompute without kept_floats"));
    /* a kept part larger than the saved buffer: refused under selective only */
    zt_unit_ops big = TOY;
    big.kept_floats = toy_kept_too_many;
    assert_int_equal(zt_model_add_unit(m, "big", &big, 0, &idx, 1, 1, &err), ZT_OK);
    m->vocab_size = 10;
    m->max_seq_len = 8;
    zt_engine_options o;
    zt_engine_options_default(&o);
    o.B = 2;
    o.T = 4;
    zt_engine *e = NULL;
    for (int mode = 0; mode < 3; mode++) {
        o.activation_checkpointing = (zt_recompute)mode;
        int rc = zt_engine_create(m, &o, &e, &err);
        if (mode == ZT_RECOMPUTE_SELECTIVE) {
            assert_int_equal(rc, ZT_ERR_USAGE);
            assert_null(e);
            assert_non_null(strstr(err.msg, "unit big keeps 96 floats of a saved buffer of 64"));
        } else {
            assert_int_equal(rc, ZT_OK);
            zt_engine_free(e);
        }
    }
    o.activation_checkpointing = (zt_recompute)7;
    assert_int_equal(zt_engine_create(m, &o, &e, &err), ZT_ERR_USAGE);
    assert_non_null(strstr(err.msg, "activation checkpointing mode 7"));
    zt_model_free(m);
    /* names */
    zt_recompute r;
    assert_int_equal(zt_recompute_parse("selective", &r, &err), ZT_OK);
    assert_int_equal(r, ZT_RECOMPUTE_SELECTIVE);
    assert_int_equal(zt_recompute_parse("partial", &r, &err), ZT_ERR_USAGE);
    assert_non_null(strstr(err.msg, "\"partial\" (known: none, full, selective)"));
    assert_string_equal(zt_recompute_name(ZT_RECOMPUTE_FULL), "full");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_block_recompute_is_bit_identical),
        cmocka_unit_test(test_block_saves_rounded_operands),
        cmocka_unit_test(test_engine_modes_are_bit_identical),
        cmocka_unit_test(test_activation_bytes_drop_as_planned),
        cmocka_unit_test(test_engine_recomputes_what_it_should),
        cmocka_unit_test(test_recompute_flops),
        cmocka_unit_test(test_api_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
