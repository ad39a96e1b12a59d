/* test_freeze.c - freezing parameters by name (src/model/freeze.c) and what the engine does with
 * a frozen parameter: its bits never change (AdamW with weight decay included), it has no part in
 * the gradient norm, and the trainable parameters take exactly the step they take without the
 * freeze (one SGD step, clipping off: the gradients do not depend on what is frozen). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "zerotrain/zerotrain.h"

#include <stdlib.h>
#include <string.h>

static const zt_llama_config LLAMA = {.max_seq_len = 16, .vocab_size = 64, .n_layer = 2, .n_head = 4,
                                      .n_embd = 32, .n_kv_head = 2, .intermediate_size = 48,
                                      .rope_theta = 10000.0f, .rms_norm_eps = 1e-5f};
enum { B = 2, T = 16 };
#define FROZEN "embed_tokens\\..*|layers\\.0\\..*"

static const zt_gpt2_config GPT2 = {.max_seq_len = 16, .vocab_size = 64, .n_layer = 2, .n_head = 2, .n_embd = 32};
#define GPT2_FROZEN "wte\\.weight|h\\.0\\..*" /* the tied embedding (the head's weight too) */

static zt_model *llama(const char *freeze, int *n_frozen) {
    zt_error err = {0};
    zt_model *m = NULL;
    assert_int_equal(zt_llama_create(&LLAMA, &m, &err), ZT_OK);
    if (zt_model_freeze(m, freeze, n_frozen, &err)) fail_msg("%s", err.msg);
    return m;
}

static zt_model *gpt2(const char *freeze) {
    zt_error err = {0};
    zt_model *m = NULL;
    assert_int_equal(zt_gpt2_create(&GPT2, &m, &err), ZT_OK);
    if (zt_model_freeze(m, freeze, NULL, &err)) fail_msg("%s", err.msg);
    return m;
}

static void test_pattern_matches_whole_names(void **state) {
    (void)state;
    int n = -1;
    zt_model *m = llama(FROZEN, &n);
    int want = 0;
    for (int i = 0; i < m->n_params; i++) {
        const char *s = m->params[i].name;
        bool f = !strcmp(s, "embed_tokens.weight") || !strncmp(s, "layers.0.", 9);
        assert_int_equal(m->params[i].trainable, !f);
        want += f;
    }
    assert_true(want > 1);
    assert_int_equal(n, want);
    zt_model_free(m);
    /* whole names only: "q_proj" alone matches nothing; ".*q_proj.*" matches one per layer */
    zt_error err = {0};
    assert_int_equal(zt_llama_create(&LLAMA, &m, &err), ZT_OK);
    assert_int_equal(zt_model_freeze(m, "q_proj", &n, &err), ZT_ERR_USAGE);
    assert_non_null(strstr(err.msg, "matches no parameter"));
    assert_int_equal(zt_model_freeze(m, "layers\\.(", &n, &err), ZT_ERR_USAGE);
    assert_non_null(strstr(err.msg, "layers\\.("));
    assert_int_equal(zt_model_freeze(m, ".*", &n, &err), ZT_ERR_USAGE);
    assert_non_null(strstr(err.msg, "nothing to train"));
    assert_int_equal(zt_model_freeze(m, NULL, &n, &err), ZT_OK);
    assert_int_equal(n, 0);
    assert_int_equal(zt_model_freeze(m, ".*q_proj.*", &n, &err), ZT_OK);
    assert_int_equal(n, LLAMA.n_layer);
    zt_model_free(m);
}

static void tokens(int32_t *t, int n, uint64_t seed) {
    for (int i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        t[i] = (int32_t)((seed >> 33) % (uint64_t)LLAMA.vocab_size);
    }
}

/* Trains `steps` steps on one batch; copies every parameter's full tensor (concatenated, table
 * order) into out (zt_model_numel floats) and returns the last step's report. */
static zt_step_report train(zt_model *m, const zt_optimizer_config *oc, int steps, float *out) {
    zt_error err = {0};
    zt_engine_options o = {.B = B, .T = T, .seed = 5, .optim = *oc};
    zt_engine *e = NULL;
    if (zt_engine_create(m, &o, &e, &err) || zt_engine_init_params(e, &err)) fail_msg("%s", err.msg);
    int32_t tok[B * T + 1];
    tokens(tok, B * T + 1, 11);
    zt_batch b = {.B = B, .T = T, .inputs = tok, .targets = tok + 1, .dloss = 1.0f / (B * T), .logits_pos = -1};
    zt_step_report r = {0};
    for (int s = 0; s < steps; s++) {
        float loss;
        if (zt_engine_forward_backward(e, &b, &loss, &err) || zt_engine_step(e, 1e-2f, &r, &err))
            fail_msg("%s", err.msg);
    }
    for (int i = 0, off = 0; i < m->n_params; off += (int)m->params[i].numel, i++)
        if (zt_engine_param_gather(e, i, out + off, &err)) fail_msg("%s", err.msg);
    zt_engine_free(e);
    return r;
}

/* Llama (embedding, rmsnorm, matmul backward with NULL weight gradients) and GPT-2 (layernorm with
 * NULL weight and bias gradients, the tied head) */
static void check_frozen_step(bool is_gpt2) {
    zt_model *free_m = is_gpt2 ? gpt2(NULL) : llama(NULL, NULL),
             *frozen_m = is_gpt2 ? gpt2(GPT2_FROZEN) : llama(FROZEN, NULL);
    int64_t P = zt_model_numel(free_m);
    float *init = malloc((size_t)P * sizeof *init), *a = malloc((size_t)P * sizeof *a),
          *b = malloc((size_t)P * sizeof *b);
    assert_non_null(init);
    assert_non_null(a);
    assert_non_null(b);
    zt_optimizer_config sgd = {.kind = ZT_OPT_SGD, .grad_clip = 0};
    train(free_m, &sgd, 0, init);
    zt_step_report ra = train(free_m, &sgd, 1, a), rb = train(frozen_m, &sgd, 1, b);
    int off = 0;
    for (int i = 0; i < free_m->n_params; i++) {
        size_t n = (size_t)free_m->params[i].numel;
        const float *want = frozen_m->params[i].trainable ? a + off : init + off;
        if (memcmp(b + off, want, n * sizeof(float)))
            fail_msg("%s (%s) differs after one step", free_m->params[i].name,
                     frozen_m->params[i].trainable ? "trainable: vs the run without freeze" : "frozen: vs init");
        if (!frozen_m->params[i].trainable) assert_true(memcmp(a + off, init + off, n * sizeof(float)) != 0);
        off += (int)n;
    }
    /* the norm covers the trainable parameters only */
    assert_true(rb.grad_norm > 0 && rb.grad_norm < ra.grad_norm);
    /* AdamW with weight decay and clipping, 5 steps: the frozen tensors still keep their bits */
    zt_optimizer_config adam;
    zt_optimizer_config_default(&adam);
    train(frozen_m, &adam, 5, b);
    off = 0;
    for (int i = 0; i < frozen_m->n_params; i++) {
        size_t n = (size_t)frozen_m->params[i].numel;
        bool same = !memcmp(b + off, init + off, n * sizeof(float));
        if (same == frozen_m->params[i].trainable)
            fail_msg("%s: %s after 5 AdamW steps", frozen_m->params[i].name, same ? "unchanged" : "changed");
        off += (int)n;
    }
    free(init);
    free(a);
    free(b);
    zt_model_free(free_m);
    zt_model_free(frozen_m);
}

static void test_frozen_keep_bits_trainable_take_the_same_step(void **state) {
    (void)state;
    check_frozen_step(false);
}

static void test_gpt2_frozen_keep_bits_trainable_take_the_same_step(void **state) {
    (void)state;
    check_frozen_step(true);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pattern_matches_whole_names),
        cmocka_unit_test(test_frozen_keep_bits_trainable_take_the_same_step),
        cmocka_unit_test(test_gpt2_frozen_keep_bits_trainable_take_the_same_step),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
