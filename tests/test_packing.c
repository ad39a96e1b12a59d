/* test_packing.c - packed documents through the models on the engine (zt_batch.positions): GPT-2 and
 * Llama tiny models, flash and naive attention, fp32 and bf16 compute. A (B,T) batch whose rows
 * pack documents of varied lengths (a 1-token document, documents crossing rows' middles, one
 * filling its row) against each document run alone (B = 1, T = its length, no positions, the same
 * inputs and targets):
 *   - each document's loss, the sum of its tokens' losses (read from the head unit's output, the
 *     per-token losses the engine averages);
 *   - every parameter gradient: the packed batch's against the sum of the documents' own (dloss 1
 *     per token in both, so both are d Σ losses);
 *   - activation checkpointing (full, selective) on the packed batch: the same bits as none;
 *   - the engine refuses malformed positions (ZT_ERR_DATA naming the token).
 * Tolerances are argued where they are checked. (The kernels with positions are checked on their
 * own in test_flash_attention*.c, test_kernels.c and test_kernels_llama.c.) */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "zerotrain/zerotrain.h"
#include "engine/engine_internal.h" /* the head unit's per-token losses */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { B = 2, T = 16, MAXDOC = 8 };

/* the documents of each row: lengths, 0-terminated, summing to T */
static const int DOCS[B][MAXDOC] = {{1, 5, 10}, {16}};
static const int DOCS2[B][MAXDOC] = {{7, 1, 8}, {3, 13}};

static void make_tokens(int32_t *t, int n, int V, uint64_t seed) {
    for (int i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        t[i] = (int32_t)((seed >> 33) % (uint64_t)V);
    }
}

static void make_positions(int32_t *pos, const int docs[B][MAXDOC]) {
    for (int b = 0; b < B; b++)
        for (int d = 0, t = 0; docs[b][d]; d++)
            for (int i = 0; i < docs[b][d]; i++) pos[b * T + t++] = i;
}

static zt_engine *engine_for(zt_model *m, zt_precision_mode mode, zt_recompute rc) {
    zt_error err = {0};
    zt_engine_options o = {.B = B, .T = T, .seed = 1234, .activation_checkpointing = rc};
    zt_optimizer_config_default(&o.optim);
    zt_precision_default(&o.precision, mode);
    zt_engine *e = NULL;
    if (zt_engine_create(m, &o, &e, &err)) fail_msg("%s", err.msg);
    assert_int_equal(zt_engine_init_params(e, &err), ZT_OK);
    return e;
}

/* the per-token losses of b's forward (b->B x b->T) into losses */
static void token_losses(zt_engine *e, const zt_batch *b, double *losses) {
    zt_error err = {0};
    float mean;
    if (zt_engine_forward(e, b, &mean, NULL, &err)) fail_msg("%s", err.msg);
    const float *l = e->units[e->model->n_units - 1].out;
    for (int i = 0; i < b->B * b->T; i++) losses[i] = l[i];
}

/* every gradient, in table order, into g (zt_model_numel floats) */
static void grads_of(zt_engine *e, float *g) {
    const zt_model *m = zt_engine_model(e);
    for (int i = 0; i < m->n_params; i++) {
        const float *x = zt_engine_grad(e, i);
        memcpy(g, x, (size_t)m->params[i].numel * sizeof *g);
        g += m->params[i].numel;
    }
}

/* Packed against alone on model m. Losses: every kernel of a document's tokens sees the same
 * values packed and alone except for the summation order of attention's tiles (test_flash_attention.c:
 * ~1e-6 relative) and of the products' rows; a document's loss sum is within 1e-5 relative
 * (measured ~1e-7 fp32). Gradients: the packed batch sums B·T rows' terms in one product where the
 * documents sum theirs apart and the engine adds them: fp32 reorderings of sums of <= 32 terms,
 * (<= 32 u ~ 2e-6 of the terms' magnitudes) on activations that differ by ~1e-6; judged per tensor
 * as |Δ| <= rtol (|g| + rms(g)) with rtol 1e-4 fp32 (measured ~1e-6). Under bf16 compute the
 * operands are rounded to bf16 from activations that differ in the last fp32 bits, so a rounding
 * can flip by one bf16 ulp (2^-8 relative) in a term: 1e-3 for the losses' sums, 1e-2 for the
 * gradients (measured ~2e-7: no flip in these batches). */
static void check_packed(zt_model *m, zt_precision_mode mode, const int docs[B][MAXDOC], const char *what) {
    zt_error err = {0};
    const bool bf = mode != ZT_PRECISION_FP32;
    const double rtol_loss = bf ? 1e-3 : 1e-5, rtol_grad = bf ? 1e-2 : 1e-4;
    zt_engine *e = engine_for(m, mode, ZT_RECOMPUTE_NONE);
    int32_t tok[B * T + 1], pos[B * T];
    make_tokens(tok, B * T + 1, m->vocab_size, 77);
    make_positions(pos, docs);
    zt_batch pb = {.B = B, .T = T, .inputs = tok, .targets = tok + 1, .positions = pos, .dloss = 1.0f,
                   .logits_pos = -1};
    double packed[B * T], alone[T];
    token_losses(e, &pb, packed);
    int64_t n = zt_model_numel(m);
    float *gp = calloc((size_t)n, sizeof *gp), *ga = calloc((size_t)n, sizeof *ga);
    assert_non_null(gp), assert_non_null(ga);
    float loss;
    zt_engine_zero_grad(e);
    if (zt_engine_forward_backward(e, &pb, &loss, &err)) fail_msg("%s", err.msg);
    grads_of(e, gp);

    zt_engine_zero_grad(e);
    double worst_loss = 0;
    for (int b = 0; b < B; b++)
        for (int d = 0, s = 0; docs[b][d]; s += docs[b][d++]) {
            int len = docs[b][d];
            zt_batch ab = {.B = 1, .T = len, .inputs = tok + b * T + s, .targets = tok + 1 + b * T + s,
                           .dloss = 1.0f, .logits_pos = -1};
            token_losses(e, &ab, alone);
            double sp = 0, sa = 0;
            for (int i = 0; i < len; i++) sp += packed[b * T + s + i], sa += alone[i];
            double rel = fabs(sp - sa) / fabs(sa);
            worst_loss = rel > worst_loss ? rel : worst_loss;
            if (!(rel <= rtol_loss))
                fail_msg("%s: row %d document at %d (len %d): packed loss %.9g alone %.9g", what, b, s, len, sp, sa);
            if (zt_engine_forward_backward(e, &ab, &loss, &err)) fail_msg("%s", err.msg); /* grads += */
        }
    grads_of(e, ga);
    double worst_grad = 0;
    const float *x = gp, *y = ga;
    for (int i = 0; i < m->n_params; i++) {
        int64_t k = m->params[i].numel;
        double ss = 0;
        for (int64_t j = 0; j < k; j++) ss += (double)y[j] * y[j];
        double r = sqrt(ss / (double)k);
        for (int64_t j = 0; j < k; j++) {
            double e1 = fabs((double)x[j] - y[j]) / (fabs((double)y[j]) + r + 1e-30);
            worst_grad = e1 > worst_grad ? e1 : worst_grad;
            if (!(e1 <= rtol_grad))
                fail_msg("%s: gradient of %s[%lld]: packed %.9g, documents alone summed %.9g (rms %.3g)", what,
                         m->params[i].name, (long long)j, (double)x[j], (double)y[j], r);
        }
        x += k, y += k;
    }
    print_message("  %-34s loss sums: worst rel %.2e (bound %.0e); gradients: worst %.2e (bound %.0e)\n", what,
                  worst_loss, rtol_loss, worst_grad, rtol_grad);
    free(gp), free(ga);
    zt_engine_free(e);
}

/* full and selective recomputation on the packed batch: the gradients' bits of none */
static void check_recompute(zt_model *m, const char *what) {
    zt_error err = {0};
    int32_t tok[B * T + 1], pos[B * T];
    make_tokens(tok, B * T + 1, m->vocab_size, 78);
    make_positions(pos, DOCS);
    zt_batch pb = {.B = B, .T = T, .inputs = tok, .targets = tok + 1, .positions = pos, .dloss = 1.0f / (B * T),
                   .logits_pos = -1};
    int64_t n = zt_model_numel(m);
    float *g[3];
    for (int r = 0; r < 3; r++) {
        zt_engine *e = engine_for(m, ZT_PRECISION_FP32, (zt_recompute)r);
        float loss;
        g[r] = calloc((size_t)n, sizeof *g[r]);
        assert_non_null(g[r]);
        if (zt_engine_forward_backward(e, &pb, &loss, &err)) fail_msg("%s", err.msg);
        grads_of(e, g[r]);
        zt_engine_free(e);
    }
    for (int r = 1; r < 3; r++)
        if (memcmp(g[0], g[r], (size_t)n * sizeof(float)))
            fail_msg("%s: packed gradients under %s recomputation differ from none", what,
                     zt_recompute_name((zt_recompute)r));
    for (int r = 0; r < 3; r++) free(g[r]);
}

static const zt_gpt2_config GPT2 = {.max_seq_len = T, .vocab_size = 37, .n_layer = 2, .n_head = 2, .n_embd = 16};
static const zt_llama_config LLAMA = {.max_seq_len = T, .vocab_size = 37, .n_layer = 2, .n_head = 4, .n_embd = 32,
                                      .n_kv_head = 2, .intermediate_size = 40, .rope_theta = 10000.0f,
                                      .rms_norm_eps = 1e-5f};

static void test_gpt2_packed(void **state) {
    (void)state;
    zt_error err = {0};
    for (int att = 0; att < 2; att++) {
        zt_gpt2_config c = GPT2;
        c.attention = (zt_attention)att;
        zt_model *m = NULL;
        assert_int_equal(zt_gpt2_create(&c, &m, &err), ZT_OK);
        char what[64];
        snprintf(what, sizeof what, "gpt2 %s fp32", zt_attention_name(c.attention));
        check_packed(m, ZT_PRECISION_FP32, DOCS, what);
        check_packed(m, ZT_PRECISION_FP32, DOCS2, what);
        snprintf(what, sizeof what, "gpt2 %s bf16", zt_attention_name(c.attention));
        check_packed(m, ZT_PRECISION_BF16, DOCS, what);
        check_recompute(m, what);
        zt_model_free(m);
    }
}

static void test_llama_packed(void **state) {
    (void)state;
    zt_error err = {0};
    for (int att = 0; att < 2; att++) {
        zt_llama_config c = LLAMA;
        c.attention = (zt_attention)att;
        zt_model *m = NULL;
        assert_int_equal(zt_llama_create(&c, &m, &err), ZT_OK);
        char what[64];
        snprintf(what, sizeof what, "llama %s fp32", zt_attention_name(c.attention));
        check_packed(m, ZT_PRECISION_FP32, DOCS, what);
        check_packed(m, ZT_PRECISION_FP32, DOCS2, what);
        snprintf(what, sizeof what, "llama %s bf16", zt_attention_name(c.attention));
        check_packed(m, ZT_PRECISION_BF16, DOCS, what);
        check_recompute(m, what);
        zt_model_free(m);
    }
}

/* positions must start each row at 0 and count up by one, restarting at 0 */
static void test_bad_positions(void **state) {
    (void)state;
    zt_error err = {0};
    zt_model *m = NULL;
    assert_int_equal(zt_gpt2_create(&GPT2, &m, &err), ZT_OK);
    zt_engine *e = engine_for(m, ZT_PRECISION_FP32, ZT_RECOMPUTE_NONE);
    int32_t tok[B * T + 1], pos[B * T];
    make_tokens(tok, B * T + 1, m->vocab_size, 79);
    zt_batch pb = {.B = B, .T = T, .inputs = tok, .targets = tok + 1, .positions = pos, .dloss = 1.0f,
                   .logits_pos = -1};
    float loss;
    /* a row not starting at 0, a jump, a negative position; restarting at 0 anywhere is allowed */
    struct { int at; int32_t value; bool fine; } cases[] = {
        {0, 1, false}, {T, 3, false}, {5, 7, false}, {9, -1, false}, {T + 4, 0, true}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        make_positions(pos, DOCS2);
        pos[cases[c].at] = cases[c].value;
        for (int i = cases[c].at + 1; cases[c].fine && i % T && pos[i]; i++) pos[i] = pos[i - 1] + 1; /* a new document */
        int rc = zt_engine_forward_backward(e, &pb, &loss, &err);
        if (cases[c].fine) {
            if (rc) fail_msg("a valid restart refused: %s", err.msg);
        } else {
            assert_int_equal(rc, ZT_ERR_DATA);
            assert_non_null(strstr(err.msg, "position"));
            print_message("  %s\n", err.msg);
        }
    }
    zt_engine_free(e);
    zt_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpt2_packed),
        cmocka_unit_test(test_llama_packed),
        cmocka_unit_test(test_bad_positions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
