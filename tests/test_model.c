/* test_model.c - GPT-2 (and Llama, and either with LoRA adapters) on the engine as a whole: gradients
 * against central finite differences,
 * the loss at initialization, overfitting one batch, bit-identical reruns, gradient accumulation, the
 * loss in chunks,
 * and the model/unit API's error paths. (Each kernel is checked on its own in test_kernels.c.) */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "zerotrain/zerotrain.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const zt_gpt2_config SMALL = {.max_seq_len = 8, .vocab_size = 37, .n_layer = 2, .n_head = 2,
                                     .n_embd = 16};

static void make_tokens(int32_t *t, int n, int V, uint64_t seed) {
    for (int i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        t[i] = (int32_t)((seed >> 33) % (uint64_t)V);
    }
}

/* An initialized single-process engine on model m (either family), with optional options. */
static zt_engine *engine_for(zt_model *m, int B, int T, const zt_engine_options *opt) {
    zt_error err = {0};
    zt_engine_options o = {.B = B, .T = T, .seed = 1234};
    if (opt) o = *opt;
    else zt_optimizer_config_default(&o.optim);
    zt_engine *e = NULL;
    if (zt_engine_create(m, &o, &e, &err)) fail_msg("%s", err.msg);
    assert_int_equal(zt_engine_init_params(e, &err), ZT_OK);
    return e;
}

static zt_engine *make_engine(const zt_gpt2_config *cfg, int B, int T, zt_model **mout) {
    zt_error err = {0};
    zt_model *m = NULL;
    assert_int_equal(zt_gpt2_create(cfg, &m, &err), ZT_OK);
    *mout = m;
    return engine_for(m, B, T, NULL);
}

#include "test_engine_fd.h" /* loss_of, loss_along, richardson */

/* Gradients of the whole model against finite differences: along random directions over all
 * parameters, and for the first, middle and last element of every tensor. In fp32 the loss
 * (≈ ln 37 ≈ 3.6) carries ~4e-7 absolute rounding, so the extrapolated difference at h = 1e-2 has
 * ~1e-4 absolute noise; the bounds (1% relative + 1e-4 along directions, 2% + 2e-4 per element)
 * sit above that noise and far below what a real gradient bug does (a wrong term, sign or factor
 * moves a gradient by 10% or more). Every kernel is also checked in double in test_kernels.c. */
static void check_gradients(zt_model *m) {
    int B = 2, T = 5;
    zt_engine *e = engine_for(m, B, T, NULL);
    int32_t tok[B * T + 1];
    make_tokens(tok, B * T + 1, m->vocab_size, 99);
    zt_batch b = {.B = B, .T = T, .inputs = tok, .targets = tok + 1, .dloss = 1.0f / (B * T),
                  .logits_pos = -1};
    /* move away from the symmetric init so layernorm weights and biases matter */
    zt_error err = {0};
    float loss;
    for (int i = 0; i < 3; i++) {
        assert_int_equal(zt_engine_forward_backward(e, &b, &loss, &err), ZT_OK);
        zt_step_report r;
        assert_int_equal(zt_engine_step(e, 1e-2f, &r, &err), ZT_OK);
    }
    assert_int_equal(zt_engine_forward_backward(e, &b, &loss, &err), ZT_OK);
    int64_t total = zt_model_numel(m);
    float *dir = calloc((size_t)total, sizeof *dir);
    assert_non_null(dir);
    const float h = 1e-2f;
    for (int trial = 0; trial < 3; trial++) {
        uint64_t s = 1000 + (uint64_t)trial;
        double gd = 0;
        int64_t k = 0;
        for (int i = 0; i < m->n_params; i++) {
            const float *g = zt_engine_grad(e, i); /* NULL: frozen, not moved */
            for (int64_t j = 0; j < m->params[i].numel; j++, k++) {
                s = s * 6364136223846793005ULL + 1442695040888963407ULL;
                dir[k] = g ? ((float)((s >> 40) & 0xffff) / 65535.0f - 0.5f) : 0.0f;
                if (g) gd += (double)g[j] * dir[k];
            }
        }
        double fd = richardson(e, m, &b, dir, h);
        if (fabs(fd - gd) > 1e-2 * fabs(gd) + 1e-4)
            fail_msg("direction %d: finite difference %.6g vs analytic %.6g", trial, fd, gd);
    }
    memset(dir, 0, (size_t)total * sizeof *dir);
    int64_t base = 0;
    for (int i = 0; i < m->n_params; i++) {
        int64_t n = m->params[i].numel, idx[3] = {0, n / 2, n - 1};
        for (int q = 0; q < 3 && m->params[i].trainable; q++) {
            float g = zt_engine_grad(e, i)[idx[q]];
            dir[base + idx[q]] = 1.0f;
            double fd = richardson(e, m, &b, dir, h);
            dir[base + idx[q]] = 0.0f;
            if (fabs(fd - g) > 2e-2 * fabs(g) + 2e-4)
                fail_msg("%s[%lld]: finite difference %.6g vs analytic %.6g", m->params[i].name,
                         (long long)idx[q], fd, (double)g);
        }
        base += n;
    }
    free(dir);
    zt_engine_free(e);
}

static void test_gradients_match_finite_differences(void **state) {
    zt_error err = {0};
    zt_model *m;
    assert_int_equal(zt_gpt2_create(&SMALL, &m, &err), ZT_OK);
    check_gradients(m);
    zt_model_free(m);
}

/* A small Llama: GQA (4 query heads over 2 KV heads), Llama 3's rope scaling with all three
 * frequency regimes at hs = 8 (wavelengths 6.3, 19.9, 62.8, 199 against 8/4 and 8/1), an odd
 * intermediate size; then the same with tied embeddings, and with Qwen2's q/k/v biases (moved off
 * their zero init by the three steps first). Same bounds as GPT-2's. */
static const zt_llama_config LLAMA_SMALL = {.max_seq_len = 8, .vocab_size = 37, .n_layer = 2, .n_head = 4,
                                            .n_embd = 32, .n_kv_head = 2, .intermediate_size = 40,
                                            .rope_theta = 10000.0f, .rms_norm_eps = 1e-5f,
                                            .rope_scaling = {8.0f, 1.0f, 4.0f, 8}};

static void test_llama_gradients_match_finite_differences(void **state) {
    zt_error err = {0};
    for (int v = 0; v < 3; v++) { /* untied, tied, tied with Qwen2's q/k/v biases */
        zt_llama_config c = LLAMA_SMALL;
        bool tied = v > 0;
        c.tie_embeddings = tied, c.qkv_bias = v == 2;
        zt_model *m;
        assert_int_equal(zt_llama_create(&c, &m, &err), ZT_OK);
        assert_int_equal(zt_model_find_param(m, "lm_head.weight") >= 0, !tied);
        assert_int_equal(zt_model_find_param(m, "layers.1.self_attn.v_proj.bias") >= 0, v == 2);
        check_gradients(m);
        zt_model_free(m);
    }
}

/* LoRA adapters on every block Linear of both families (rank 3, alpha 6, no dropout: the finite
 * differences run the evaluation forward): the adapters' gradients, through the frozen weights,
 * against finite differences; three steps first, so that B is no longer zero. Same bounds. */
static void test_lora_gradients_match_finite_differences(void **state) {
    zt_error err = {0};
    zt_lora_config c = {.rank = 3, .alpha = 6.0f, .target_modules = "all-linear"};
    for (int llama = 0; llama < 2; llama++) {
        zt_model *m;
        assert_int_equal(llama ? zt_llama_create(&LLAMA_SMALL, &m, &err) : zt_gpt2_create(&SMALL, &m, &err), ZT_OK);
        assert_int_equal(zt_model_add_lora(m, &c, NULL, &err), ZT_OK);
        check_gradients(m);
        zt_model_free(m);
    }
}

/* The loss in chunks (memory.loss_chunk_tokens): for chunks of 3 and 4 of the batch's 10 tokens
 * (the last chunk short), both families, fp32: the gradients against finite differences (same
 * bounds as above: the chunked backward computes the logits again); the loss and every gradient
 * element within rounding of the whole-batch run (the chunked products sum other blocks of rows:
 * 1e-6 relative + 1e-7 absolute covers fp32's reassociation on these sizes and is far below a
 * missed chunk, which moves the loss or a gradient by 10% or more); a chunk of the whole batch or
 * more (one chunk, computed again in backward) gives the whole-batch run's bits, and
 * zt_loss_chunk_for turns it into 0; the activations planned and measured shrink by the saved
 * (N, V) logits less the chunk's scratch, and the measured peak equals the plan. */
static void run_batch(zt_model *m, int chunk, float *loss, float **grads, size_t *act_peak, size_t *plan_act) {
    zt_error err = {0};
    assert_int_equal(zt_model_set_loss_chunk(m, chunk, &err), ZT_OK);
    int B = 2, T = 5;
    zt_engine *e = engine_for(m, B, T, NULL);
    int32_t tok[B * T + 1];
    make_tokens(tok, B * T + 1, m->vocab_size, 7);
    zt_batch b = {.B = B, .T = T, .inputs = tok, .targets = tok + 1, .dloss = 1.0f / (B * T), .logits_pos = -1};
    assert_int_equal(zt_engine_forward_backward(e, &b, loss, &err), ZT_OK);
    for (int i = 0; i < m->n_params; i++) {
        grads[i] = malloc((size_t)m->params[i].numel * sizeof(float));
        assert_non_null(grads[i]);
        memcpy(grads[i], zt_engine_grad(e, i), (size_t)m->params[i].numel * sizeof(float));
    }
    zt_memory_report r;
    zt_memory_plan pl;
    zt_engine_memory(e, &r);
    zt_engine_memory_plan(e, &pl);
    *act_peak = r.peak_activations, *plan_act = pl.peak[ZT_MEM_ACTIVATIONS];
    assert_int_equal(*act_peak, *plan_act);
    zt_engine_free(e);
}

static void test_loss_chunks_match_whole(void **state) {
    zt_error err = {0};
    for (int llama = 0; llama < 2; llama++) {
        zt_model *m;
        assert_int_equal(llama ? zt_llama_create(&LLAMA_SMALL, &m, &err) : zt_gpt2_create(&SMALL, &m, &err), ZT_OK);
        float loss0, *g0[64], *g[64];
        size_t act0, plan0, act, plan;
        assert_true(m->n_params <= 64);
        run_batch(m, 0, &loss0, g0, &act0, &plan0);
        const int chunks[] = {3, 4, 10, 64};
        for (int c = 0; c < 4; c++) {
            float loss;
            run_batch(m, chunks[c], &loss, g, &act, &plan);
            bool whole = chunks[c] >= 10;
            assert_int_equal(zt_loss_chunk_for(chunks[c], 2, 5), whole ? 0 : chunks[c]);
            if (whole) { /* one chunk of all 10 rows: the logits in the scratch, computed twice, the same bits */
                assert_memory_equal(&loss, &loss0, sizeof loss);
            } else {
                /* the (10, 37) logits saved go; the chunk's (R, 37) logits and R losses come in the
                 * scratch, which the other units' larger scratch may already cover: never more */
                assert_true(act < act0);
                assert_true(fabs(loss - loss0) <= 1e-6 * fabs(loss0));
            }
            for (int i = 0; i < m->n_params; i++) {
                if (whole) {
                    assert_memory_equal(g[i], g0[i], (size_t)m->params[i].numel * sizeof(float));
                } else {
                    for (int64_t j = 0; j < m->params[i].numel; j++)
                        if (fabsf(g[i][j] - g0[i][j]) > 1e-6f * fabsf(g0[i][j]) + 1e-7f)
                            fail_msg("%s chunk %d: %s[%lld] = %.9g, whole batch %.9g", llama ? "llama" : "gpt2",
                                     chunks[c], m->params[i].name, (long long)j, (double)g[i][j], (double)g0[i][j]);
                }
                free(g[i]);
            }
        }
        for (int i = 0; i < m->n_params; i++) free(g0[i]);
        assert_int_equal(zt_model_set_loss_chunk(m, 3, &err), ZT_OK);
        check_gradients(m);
        assert_int_equal(zt_model_set_loss_chunk(m, -1, &err), ZT_ERR_USAGE);
        assert_non_null(strstr(err.msg, "-1"));
        zt_model_free(m);
    }
}

/* At init the logits are ~N(0, small), so the prediction is close to uniform: loss ≈ ln V. */
static void test_initial_loss_is_ln_vocab(void **state) {
    zt_error err = {0};
    zt_gpt2_config cfg;
    assert_int_equal(zt_gpt2_preset("tiny", &cfg, &err), ZT_OK);
    zt_model *m;
    int B = 2, T = 32;
    zt_engine *e = make_engine(&cfg, B, T, &m);
    int32_t tok[B * T + 1];
    make_tokens(tok, B * T + 1, cfg.vocab_size, 5);
    zt_batch b = {.B = B, .T = T, .inputs = tok, .targets = tok + 1, .logits_pos = -1};
    double l = loss_of(e, &b), lnv = log((double)cfg.vocab_size);
    if (fabs(l - lnv) > 0.05) fail_msg("initial loss %.4f, ln V = %.4f", l, lnv);
    zt_engine_free(e);
    zt_model_free(m);
}

static void train_steps(zt_engine *e, const zt_batch *b, int steps, float lr, float *losses) {
    zt_error err = {0};
    for (int s = 0; s < steps; s++) {
        float loss;
        assert_int_equal(zt_engine_forward_backward(e, b, &loss, &err), ZT_OK);
        zt_step_report r;
        assert_int_equal(zt_engine_step(e, lr, &r, &err), ZT_OK);
        if (losses) losses[s] = loss;
    }
}

static void test_overfits_one_batch(void **state) {
    zt_gpt2_config cfg = {.max_seq_len = 16, .vocab_size = 64, .n_layer = 2, .n_head = 2, .n_embd = 32};
    zt_model *m;
    int B = 2, T = 16;
    zt_engine *e = make_engine(&cfg, B, T, &m);
    int32_t tok[B * T + 1];
    make_tokens(tok, B * T + 1, cfg.vocab_size, 77);
    zt_batch b = {.B = B, .T = T, .inputs = tok, .targets = tok + 1, .dloss = 1.0f / (B * T),
                  .logits_pos = -1};
    train_steps(e, &b, 300, 3e-3f, NULL);
    double l = loss_of(e, &b);
    if (!(l < 0.05)) fail_msg("loss after 300 steps on one batch: %.4f (want < 0.05)", l);
    zt_engine_free(e);
    zt_model_free(m);
}

static void test_two_runs_are_bit_identical(void **state) {
    float l1[6], l2[6];
    uint64_t h[2];
    for (int r = 0; r < 2; r++) {
        zt_model *m;
        int B = 2, T = 8;
        zt_engine *e = make_engine(&SMALL, B, T, &m);
        int32_t tok[B * T + 1];
        make_tokens(tok, B * T + 1, SMALL.vocab_size, 3);
        zt_batch b = {.B = B, .T = T, .inputs = tok, .targets = tok + 1, .dloss = 1.0f / (B * T),
                      .logits_pos = -1};
        train_steps(e, &b, 6, 1e-2f, r == 0 ? l1 : l2);
        h[r] = zt_engine_param_hash(e);
        zt_engine_free(e);
        zt_model_free(m);
    }
    assert_memory_equal(l1, l2, sizeof l1);
    assert_true(h[0] == h[1]);
}

/* Parameter counts of the presets against the released models' totals (transformers'
 * num_parameters() of the Hugging Face checkpoints), the names of a block, and the spec round trip. */
static void test_llama_presets(void **state) {
    static const struct { const char *name; int64_t params; } known[] = {
        {"llama-7b", 6738415616LL},  {"llama-13b", 13015864320LL}, {"llama-70b", 68976648192LL},
        {"llama3-8b", 8030261248LL}, {"llama3-70b", 70553706496LL}, {"mistral-7b", 7241732096LL},
        {"qwen2-0.5b", 494032768LL}, /* q/k/v biases, tied */
        /* not a released model: bench/'s GPT-2-124M-sized Llama, 2 x 32000 x 768 + 12 x (2 x 768^2 +
         * 2 x 256 x 768 + 3 x 2048 x 768 + 2 x 768) + 768 */
        {"llama-124M", 124668672LL},
    };
    zt_error err = {0};
    for (size_t i = 0; i < sizeof known / sizeof *known; i++) {
        zt_model_spec spec;
        assert_int_equal(zt_model_preset(known[i].name, &spec, &err), ZT_OK);
        assert_int_equal(spec.arch, ZT_ARCH_LLAMA);
        zt_model *m;
        assert_int_equal(zt_model_spec_create(&spec, &m, &err), ZT_OK);
        if (zt_model_numel(m) != known[i].params)
            fail_msg("%s: %lld parameters, the released model has %lld", known[i].name,
                     (long long)zt_model_numel(m), (long long)known[i].params);
        zt_model_spec back;
        assert_int_equal(zt_model_spec_of(m, &back, &err), ZT_OK);
        assert_memory_equal(&back.llama, &spec.llama, sizeof spec.llama);
        zt_model_free(m);
    }
    zt_llama_config c;
    assert_int_equal(zt_llama_preset("llama-tiny", &c, &err), ZT_OK);
    zt_model *m;
    assert_int_equal(zt_llama_create(&c, &m, &err), ZT_OK);
    const char *names[] = {"embed_tokens.weight", "layers.1.self_attn.q_proj.weight",
                           "layers.1.self_attn.k_proj.weight", "layers.0.mlp.gate_proj.weight",
                           "layers.0.mlp.down_proj.weight", "layers.1.input_layernorm.weight",
                           "layers.1.post_attention_layernorm.weight", "norm.weight", "lm_head.weight"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (zt_model_find_param(m, names[i]) < 0) fail_msg("llama-tiny has no parameter %s", names[i]);
    const zt_param_desc *k = &m->params[zt_model_find_param(m, "layers.1.self_attn.k_proj.weight")];
    assert_true(k->shape[0] == 32 && k->shape[1] == 64); /* (NKV·hs, C) like torch.nn.Linear */
    const zt_param_desc *d = &m->params[zt_model_find_param(m, "layers.0.mlp.down_proj.weight")];
    assert_true(d->shape[0] == 64 && d->shape[1] == 192);
    zt_model_free(m);
    c.n_kv_head = 3;
    assert_int_equal(zt_llama_create(&c, &m, &err), ZT_ERR_USAGE);
    assert_non_null(strstr(err.msg, "n_kv_head"));
    assert_int_equal(zt_model_preset("llama-9b", &(zt_model_spec){0}, &err), ZT_ERR_USAGE);
}

/* llama-tiny at init predicts near-uniformly (loss ≈ ln V), overfits one batch, and activation
 * checkpointing full and selective give bit-identical parameters to none, in fp32 and bf16. */
static void test_llama_trains_and_checkpointing_is_exact(void **state) {
    zt_error err = {0};
    zt_llama_config c;
    assert_int_equal(zt_llama_preset("llama-tiny", &c, &err), ZT_OK);
    zt_model *m;
    assert_int_equal(zt_llama_create(&c, &m, &err), ZT_OK);
    int B = 2, T = 16;
    int32_t tok[B * T + 1];
    make_tokens(tok, B * T + 1, 64, 21); /* 64 distinct tokens: learnable in a few steps */
    zt_batch b = {.B = B, .T = T, .inputs = tok, .targets = tok + 1, .dloss = 1.0f / (B * T), .logits_pos = -1};
    for (int mode = 0; mode < 2; mode++) {
        uint64_t h[3];
        for (int r = 0; r < 3; r++) {
            zt_engine_options o = {.B = B, .T = T, .seed = 7, .activation_checkpointing = (zt_recompute)r};
            zt_optimizer_config_default(&o.optim);
            zt_precision_default(&o.precision, mode ? ZT_PRECISION_BF16 : ZT_PRECISION_FP32);
            zt_engine *e = engine_for(m, B, T, &o);
            float losses[40];
            if (r == 0 && mode == 0) {
                double l = loss_of(e, &b), lnv = log((double)c.vocab_size);
                if (fabs(l - lnv) > 0.05) fail_msg("llama-tiny initial loss %.4f, ln V = %.4f", l, lnv);
            }
            train_steps(e, &b, 40, 3e-3f, losses);
            if (r == 0 && !(losses[39] < 0.5f * losses[0]))
                fail_msg("llama-tiny (%s) on one batch: loss %.4f -> %.4f", mode ? "bf16" : "fp32", losses[0],
                         losses[39]);
            h[r] = zt_engine_param_hash(e);
            zt_engine_free(e);
        }
        if (h[0] != h[1] || h[0] != h[2])
            fail_msg("llama-tiny %s: parameter hashes none %016llx full %016llx selective %016llx",
                     mode ? "bf16" : "fp32", (unsigned long long)h[0], (unsigned long long)h[1],
                     (unsigned long long)h[2]);
    }
    zt_model_free(m);
}

/* One micro-batch of 4 sequences and two of 2 (dloss = 1/(4T) each) give the same gradients up
 * to float summation order. */
static void test_gradient_accumulation_matches_full_batch(void **state) {
    zt_error err = {0};
    int T = 6;
    int32_t tok[4 * T + 4];
    make_tokens(tok, 4 * T + 4, SMALL.vocab_size, 11);
    int32_t in[4 * T], tg[4 * T];
    for (int b = 0; b < 4; b++)
        for (int t = 0; t < T; t++) {
            in[b * T + t] = tok[b * (T + 1) + t];
            tg[b * T + t] = tok[b * (T + 1) + t + 1];
        }
    zt_model *m1, *m2;
    zt_engine *full = make_engine(&SMALL, 4, T, &m1), *acc = make_engine(&SMALL, 2, T, &m2);
    float loss;
    zt_batch b = {.B = 4, .T = T, .inputs = in, .targets = tg, .dloss = 1.0f / (4 * T), .logits_pos = -1};
    assert_int_equal(zt_engine_forward_backward(full, &b, &loss, &err), ZT_OK);
    for (int h = 0; h < 2; h++) {
        zt_batch hb = {.B = 2, .T = T, .inputs = in + h * 2 * T, .targets = tg + h * 2 * T,
                       .dloss = 1.0f / (4 * T), .logits_pos = -1};
        assert_int_equal(zt_engine_forward_backward(acc, &hb, &loss, &err), ZT_OK);
    }
    for (int i = 0; i < m1->n_params; i++) {
        const float *g1 = zt_engine_grad(full, i), *g2 = zt_engine_grad(acc, i);
        for (int64_t j = 0; j < m1->params[i].numel; j++)
            if (fabsf(g1[j] - g2[j]) > 1e-6f + 1e-4f * fabsf(g1[j]))
                fail_msg("%s[%lld]: %.8g vs %.8g", m1->params[i].name, (long long)j, g1[j], g2[j]);
    }
    zt_engine_free(full);
    zt_engine_free(acc);
    zt_model_free(m1);
    zt_model_free(m2);
}

static void test_model_api_errors(void **state) {
    zt_error err = {0};
    zt_model *m;
    assert_int_equal(zt_model_create("x", &m, &err), ZT_OK);
    int64_t shape[2] = {3, 4};
    int idx;
    assert_int_equal(zt_model_add_param(m, "w", 2, shape, ZT_INIT_NORMAL, 0.02f, true, &idx, &err), ZT_OK);
    assert_int_equal(zt_model_add_param(m, "w", 2, shape, ZT_INIT_NORMAL, 0.02f, true, &idx, &err),
                     ZT_ERR_USAGE);
    assert_non_null(strstr(err.msg, "declared twice"));
    int64_t bad[1] = {0};
    assert_int_equal(zt_model_add_param(m, "z", 1, bad, ZT_INIT_ZEROS, 0, false, &idx, &err), ZT_ERR_USAGE);
    assert_non_null(strstr(err.msg, "z"));
    int params[1] = {5};
    static const zt_unit_ops none = {0};
    assert_int_equal(zt_model_add_unit(m, "u", &none, 0, params, 1, 4, &err), ZT_ERR_USAGE);
    assert_non_null(strstr(err.msg, "undeclared parameter 5"));
    assert_int_equal(zt_model_find_param(m, "w"), 0);
    assert_int_equal(zt_model_find_param(m, "nope"), -1);
    zt_model_free(m);

    zt_gpt2_config c = SMALL;
    c.n_head = 3;
    assert_int_equal(zt_gpt2_create(&c, &m, &err), ZT_ERR_USAGE);
    assert_non_null(strstr(err.msg, "multiple of n_head"));
    zt_gpt2_config p;
    assert_int_equal(zt_gpt2_preset("gpt5", &p, &err), ZT_ERR_USAGE);
    assert_non_null(strstr(err.msg, "gpt5"));
    assert_int_equal(zt_gpt2_preset("gpt2-1558M", &p, &err), ZT_OK);
    assert_int_equal(p.n_layer, 48);
}

static void test_engine_rejects_bad_batches(void **state) {
    zt_error err = {0};
    zt_model *m;
    zt_engine *e = make_engine(&SMALL, 2, 4, &m);
    int32_t tok[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    zt_batch b = {.B = 2, .T = 8, .inputs = tok, .targets = tok + 1, .logits_pos = -1};
    float loss;
    assert_int_equal(zt_engine_forward_backward(e, &b, &loss, &err), ZT_ERR_USAGE);
    assert_non_null(strstr(err.msg, "does not fit"));
    tok[3] = 999;
    b.T = 4;
    assert_int_equal(zt_engine_forward_backward(e, &b, &loss, &err), ZT_ERR_DATA);
    assert_non_null(strstr(err.msg, "999"));
    zt_engine_options o = {.B = 1, .T = 9, .seed = 1};
    zt_optimizer_config_default(&o.optim);
    zt_engine *e2;
    assert_int_equal(zt_engine_create(m, &o, &e2, &err), ZT_ERR_USAGE);
    assert_non_null(strstr(err.msg, "exceeds"));
    zt_engine_free(e);
    zt_model_free(m);
}

/* The early norm (one process, one micro-batch: each unit's partials taken as its backward ends,
 * engine/grads.c) against the step's own pass over the gradient (turned on by zt_engine_grad,
 * which hands the gradient out for writing): the same norm bits and parameters, step after step;
 * and with two micro-batches before a step, the norm of their sum (the early partials dropped). */
static void test_early_norm_matches_the_step_pass(void **state) {
    zt_error err = {0};
    int B = 2, T = 8;
    int32_t tok[B * T + 1];
    make_tokens(tok, B * T + 1, SMALL.vocab_size, 5);
    zt_batch b = {.B = B, .T = T, .inputs = tok, .targets = tok + 1, .dloss = 1.0f / (B * T), .logits_pos = -1};
    zt_model *m[2];
    zt_engine *e[2] = {make_engine(&SMALL, B, T, &m[0]), make_engine(&SMALL, B, T, &m[1])};
    for (int s = 0; s < 4; s++) {
        double norm[2];
        for (int k = 0; k < 2; k++) {
            float loss;
            zt_step_report r;
            assert_int_equal(zt_engine_forward_backward(e[k], &b, &loss, &err), ZT_OK);
            if (k == 1) assert_non_null(zt_engine_grad(e[k], 0));
            assert_int_equal(zt_engine_step(e[k], 1e-2f, &r, &err), ZT_OK);
            norm[k] = r.grad_norm;
        }
        if (memcmp(&norm[0], &norm[1], sizeof norm[0]))
            fail_msg("step %d: early norm %.17g, the step's pass %.17g", s + 1, norm[0], norm[1]);
        assert_true(zt_engine_param_hash(e[0]) == zt_engine_param_hash(e[1]));
    }
    /* two micro-batches: e[0] steps, e[1] gives the summed gradient to add up here */
    double want = 0;
    zt_step_report r;
    for (int k = 0; k < 2; k++) {
        float loss;
        for (int mb = 0; mb < 2; mb++) assert_int_equal(zt_engine_forward_backward(e[k], &b, &loss, &err), ZT_OK);
    }
    for (int i = 0; i < m[1]->n_params; i++) {
        const float *g = zt_engine_grad(e[1], i);
        for (int64_t j = 0; g && j < m[1]->params[i].numel; j++) want += (double)g[j] * g[j];
    }
    assert_int_equal(zt_engine_step(e[0], 1e-2f, &r, &err), ZT_OK);
    assert_float_equal(r.grad_norm, sqrt(want), 1e-9 * sqrt(want));
    for (int k = 0; k < 2; k++) zt_engine_free(e[k]), zt_model_free(m[k]);
}

/* Gradients assigned, not zeroed (grads.c, zt_unit_ops.assigns_grad): the Linear weights' first
 * product in backward assigns their gradient instead of adding into a zeroed one. Against engines
 * made with ZT_GRAD_ASSIGN=0 (everything zeroed first, every product adds), the same bits: both
 * families, GPT-2's tied wte (the head assigns, the embedding adds after), Llama untied, the loss in
 * chunks (the first chunk assigns, the rest add), fp32 and bf16 compute, two micro-batches, and
 * the parameters after a step. */
static void test_assigned_gradients_match_zeroed(void **state) {
    zt_error err = {0};
    int B = 2, T = 6;
    int32_t tok[B * T + 1];
    make_tokens(tok, B * T + 1, SMALL.vocab_size, 21);
    zt_batch b = {.B = B, .T = T, .inputs = tok, .targets = tok + 1, .dloss = 1.0f / (B * T), .logits_pos = -1};
    for (int c = 0; c < 16; c++) {
        int llama = c & 1, chunk = c & 2 ? 3 : 0, bf16 = c & 4 ? 1 : 0, micro = c & 8 ? 2 : 1;
        zt_model *m[2];
        zt_engine *e[2];
        for (int k = 0; k < 2; k++) {
            assert_int_equal(llama ? zt_llama_create(&LLAMA_SMALL, &m[k], &err) : zt_gpt2_create(&SMALL, &m[k], &err),
                             ZT_OK);
            if (chunk) assert_int_equal(zt_model_set_loss_chunk(m[k], chunk, &err), ZT_OK);
            zt_engine_options o = {.B = B, .T = T, .seed = 77, .grad_accum = micro};
            zt_optimizer_config_default(&o.optim);
            zt_precision_default(&o.precision, bf16 ? ZT_PRECISION_BF16 : ZT_PRECISION_FP32);
            if (k == 0) setenv("ZT_GRAD_ASSIGN", "0", 1);
            e[k] = engine_for(m[k], B, T, &o);
            unsetenv("ZT_GRAD_ASSIGN");
        }
        for (int step = 0; step < 2; step++) {
            for (int k = 0; k < 2; k++)
                for (int mb = 0; mb < micro; mb++) {
                    float loss;
                    assert_int_equal(zt_engine_forward_backward(e[k], &b, &loss, &err), ZT_OK);
                }
            for (int i = 0; i < m[0]->n_params; i++) {
                const float *g0 = zt_engine_grad(e[0], i), *g1 = zt_engine_grad(e[1], i);
                if (memcmp(g0, g1, (size_t)m[0]->params[i].numel * sizeof *g0))
                    fail_msg("case %d (%s, chunk %d, %s, %d micro-batches), step %d: %s differs", c, llama ? "llama" : "gpt2",
                             chunk, bf16 ? "bf16" : "fp32", micro, step, m[0]->params[i].name);
            }
            for (int k = 0; k < 2; k++) {
                zt_step_report r;
                assert_int_equal(zt_engine_step(e[k], 1e-2f, &r, &err), ZT_OK);
            }
            assert_true(zt_engine_param_hash(e[0]) == zt_engine_param_hash(e[1]));
        }
        for (int k = 0; k < 2; k++) zt_engine_free(e[k]), zt_model_free(m[k]);
    }
}

/* The engine's side of assigns_grad, on two toy units sharing one parameter (w, 300,000 floats: its
 * gradient buffer comes back from the engine's block cache between steps, holding the last step's
 * values). Unit 1, the loss (first in backward), declares it assigns w's gradient: it gets bit 0 of
 * grads_unset, unit 0 (which declares it too, but comes second) does not. When unit 1 assigns, the
 * gradient is its value plus unit 0's; when it leaves the bit set (a path that skips the weight),
 * the engine zeroes the gradient after it, so that only unit 0's share is there, whatever the
 * buffer held before; with ZT_GRAD_ASSIGN=0 no unit ever sees a bit. */
enum { TOY_W = 300000 };
static uint32_t toy_bits[2];
static bool toy_skip;
static size_t toy_saved(const zt_unit *u, int B, int T, int lp_kind) { return 0; }
static size_t toy_scratch(const zt_unit *u, int B, int T) { return 0; }
static bool toy_assigns(const zt_unit *u, int k) { return k == 0; }
static int toy_forward(const zt_unit *u, const zt_unit_args *a, zt_error *err) {
    int N = a->batch->B * a->batch->T;
    for (int i = 0; i < N * u->out_width; i++) a->out[i] = a->params[0][0];
    return ZT_OK;
}
static int toy_backward(const zt_unit *u, const zt_unit_args *a, zt_error *err) {
    int N = a->batch->B * a->batch->T;
    toy_bits[u->layer] = *a->grads_unset;
    float *g = a->grads[0], v = u->layer == 1 ? 5.0f : 2.0f;
    if (u->layer == 1 && (*a->grads_unset & 1u)) { /* first write: assign, unless told to skip */
        if (!toy_skip)
            for (int j = 0; j < TOY_W; j++) g[j] = v;
        if (!toy_skip) *a->grads_unset &= ~1u;
    } else {
        for (int j = 0; j < TOY_W; j++) g[j] += v;
    }
    if (a->din)
        for (int i = 0; i < N * u->out_width; i++) a->din[i] = 0.0f;
    return ZT_OK;
}
static const zt_unit_ops TOY_ASSIGNS = {.saved_floats = toy_saved, .scratch_floats = toy_scratch,
                                        .forward = toy_forward, .backward = toy_backward,
                                        .assigns_grad = toy_assigns};

static void test_engine_zeroes_what_a_unit_leaves_unset(void **state) {
    zt_error err = {0};
    for (int off = 0; off < 2; off++) {
        zt_model *m;
        assert_int_equal(zt_model_create("toy", &m, &err), ZT_OK);
        m->vocab_size = 10;
        m->max_seq_len = 4;
        int64_t shape[1] = {TOY_W};
        int w;
        assert_int_equal(zt_model_add_param(m, "w", 1, shape, ZT_INIT_NORMAL, 0.5f, false, &w, &err), ZT_OK);
        int idx[1] = {w};
        assert_int_equal(zt_model_add_unit(m, "u0", &TOY_ASSIGNS, 0, idx, 1, 2, &err), ZT_OK);
        assert_int_equal(zt_model_add_unit(m, "u1", &TOY_ASSIGNS, 1, idx, 1, 1, &err), ZT_OK);
        zt_engine_options o = {.B = 1, .T = 4, .seed = 1};
        zt_optimizer_config_default(&o.optim);
        if (off) setenv("ZT_GRAD_ASSIGN", "0", 1);
        zt_engine *e = engine_for(m, 1, 4, &o);
        unsetenv("ZT_GRAD_ASSIGN");
        int32_t tok[5] = {1, 2, 3, 4, 5};
        zt_batch b = {.B = 1, .T = 4, .inputs = tok, .targets = tok + 1, .dloss = 0.25f, .logits_pos = -1};
        for (int step = 0; step < 3; step++) {
            toy_skip = step == 1;
            float loss;
            assert_int_equal(zt_engine_forward_backward(e, &b, &loss, &err), ZT_OK);
            assert_int_equal(toy_bits[1], off ? 0u : 1u);
            assert_int_equal(toy_bits[0], 0u);
            const float *g = zt_engine_grad(e, w);
            float want = off || !toy_skip ? 7.0f : 2.0f; /* zeroed, then (5 or nothing) + 2 */
            for (int j = 0; j < TOY_W; j += 997)
                if (g[j] != want) fail_msg("ZT_GRAD_ASSIGN %s, step %d: grad[%d] = %g, want %g", off ? "0" : "on", step,
                                           j, (double)g[j], (double)want);
            zt_step_report r;
            assert_int_equal(zt_engine_step(e, 1e-3f, &r, &err), ZT_OK);
        }
        toy_skip = false;
        zt_engine_free(e);
        zt_model_free(m);
    }
}

/* Non-finite gradients are reported as ZT_ERR_NUMERICS and the parameters stay untouched. */
static void test_nonfinite_gradients_skip_the_update(void **state) {
    zt_error err = {0};
    zt_model *m;
    zt_engine *e = make_engine(&SMALL, 1, 4, &m);
    int32_t tok[5] = {1, 2, 3, 4, 5};
    zt_batch b = {.B = 1, .T = 4, .inputs = tok, .targets = tok + 1, .dloss = 0.25f, .logits_pos = -1};
    float loss;
    assert_int_equal(zt_engine_forward_backward(e, &b, &loss, &err), ZT_OK);
    uint64_t before = zt_engine_param_hash(e);
    zt_engine_grad(e, 0)[3] = NAN;
    zt_step_report r;
    assert_int_equal(zt_engine_step(e, 1e-2f, &r, &err), ZT_ERR_NUMERICS);
    assert_false(r.finite);
    assert_true(zt_engine_param_hash(e) == before);
    zt_engine_free(e);
    zt_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gradients_match_finite_differences),
        cmocka_unit_test(test_llama_gradients_match_finite_differences),
        cmocka_unit_test(test_lora_gradients_match_finite_differences),
        cmocka_unit_test(test_llama_presets),
        cmocka_unit_test(test_llama_trains_and_checkpointing_is_exact),
        cmocka_unit_test(test_initial_loss_is_ln_vocab),
        cmocka_unit_test(test_overfits_one_batch),
        cmocka_unit_test(test_two_runs_are_bit_identical),
        cmocka_unit_test(test_gradient_accumulation_matches_full_batch),
        cmocka_unit_test(test_loss_chunks_match_whole),
        cmocka_unit_test(test_model_api_errors),
        cmocka_unit_test(test_engine_rejects_bad_batches),
        cmocka_unit_test(test_nonfinite_gradients_skip_the_update),
        cmocka_unit_test(test_early_norm_matches_the_step_pass),
        cmocka_unit_test(test_assigned_gradients_match_zeroed),
        cmocka_unit_test(test_engine_zeroes_what_a_unit_leaves_unset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
