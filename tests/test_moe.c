/* test_moe.c - a Llama mixture of experts (src/model/llama_moe.c, src/kernels/moe_*.c,
 * grouped_gemm.c): the router's kernels against finite differences in double, the routing plan's
 * order (by expert, then token) and capacity drops, the whole model's gradients (router, experts,
 * the load-balancing and z losses, the shared expert with and without its gate) against finite
 * differences through the engine, the grouped products' bits at 1, 2 and 3 threads, the losses'
 * values at a uniform router, the counters, and the shape checks. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "zerotrain/zerotrain.h"
#include "kernels/kernels.h"
#include "ckpt/hf.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uint64_t lcg(uint64_t *s) {
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return *s >> 33;
}
static float uni(uint64_t *s) { return (float)(lcg(s) & 0xffffff) / 16777216.0f - 0.5f; } /* [-0.5, 0.5) */

/* ---- the router: L(logits) = sum_tj c_tj w_tj + a·aux + b·z with the counts held (top-k fixed) */
enum { RN = 6, RE = 5, RK = 2 };

static double router_loss(const float *logits, const float *c, const int32_t *counts_fixed, bool norm, double a,
                          double b, int32_t *idx_out) {
    float probs[RN * RE], lse[RN], w[RN * RK];
    int32_t idx[RN * RK];
    moe_router_forward(probs, lse, idx, w, logits, RN, RE, RK, norm);
    if (idx_out) memcpy(idx_out, idx, sizeof idx);
    double aux, z, l = 0;
    moe_router_losses(&aux, &z, probs, lse, counts_fixed, RN, RN, RE);
    for (int i = 0; i < RN * RK; i++) l += (double)c[i] * w[i];
    return l + a * aux + b * z;
}

static void test_router_backward_matches_finite_differences(void **state) {
    (void)state;
    uint64_t s = 7;
    float logits[RN * RE], c[RN * RK];
    /* well separated logits (gaps >= 0.3 within a token): the top-k never flips under the step */
    for (int t = 0; t < RN; t++) {
        int perm[RE] = {0, 1, 2, 3, 4};
        for (int e = RE - 1; e > 0; e--) {
            int j = (int)(lcg(&s) % (uint64_t)(e + 1)), x = perm[e];
            perm[e] = perm[j];
            perm[j] = x;
        }
        for (int e = 0; e < RE; e++) logits[t * RE + perm[e]] = 0.4f * e + 0.1f * uni(&s);
    }
    for (int i = 0; i < RN * RK; i++) c[i] = 2.0f * uni(&s);
    for (int norm = 0; norm < 2; norm++)
        for (int mode = 0; mode < 3; mode++) { /* routing only, + aux, + z */
            double a = mode == 1 ? 0.7 : 0.0, b = mode == 2 ? 0.3 : 0.0;
            float probs[RN * RE], lse[RN], w[RN * RK], dl[RN * RE];
            int32_t idx[RN * RK], counts[RE], offsets[RE + 1], order[RN * RK], row_of[RN * RK];
            moe_router_forward(probs, lse, idx, w, logits, RN, RE, RK, norm);
            assert_int_equal(moe_route_plan(counts, offsets, order, row_of, idx, RN, RE, RK, 0, 1), 0);
            moe_router_backward(dl, c, probs, lse, w, idx, counts, RN, RN, RE, RK, norm, (float)a, (float)b);
            double worst = 0;
            for (int i = 0; i < RN * RE; i++) {
                float x[RN * RE];
                int32_t ip[RN * RK], im[RN * RK];
                const float h = 1e-2f;
                memcpy(x, logits, sizeof x);
                x[i] += h;
                double lp = router_loss(x, c, counts, norm, a, b, ip);
                x[i] = logits[i] - h;
                double lm = router_loss(x, c, counts, norm, a, b, im);
                assert_memory_equal(ip, idx, sizeof ip); /* the choice held */
                assert_memory_equal(im, idx, sizeof im);
                double fd = (lp - lm) / (2.0 * h), err = fabs(fd - dl[i]);
                worst = err > worst ? err : worst;
                if (err > 2e-3 * fabs(fd) + 2e-4)
                    fail_msg("norm %d mode %d: d logits[%d] = %.7g, finite difference %.7g", norm, mode, i, dl[i], fd);
            }
            print_message("router norm_topk %d, %s: max |analytic - FD| %.2e\n", norm,
                          mode == 0 ? "top-k weights" : mode == 1 ? "+ aux loss" : "+ z loss", worst);
        }
}

/* the router's input gradient: dx += dy W against a double reference, and a part's rows (any split,
 * any thread count) get the bits of the whole's: what sequence parallelism's parts rely on */
static void test_router_dinp_rows_independent(void **state) {
    (void)state;
    enum { N = 70, C = 37, E = 9, LD = 11 };
    uint64_t sd = 7;
    float *dy = malloc(sizeof(float) * N * LD), *W = malloc(sizeof(float) * E * C), *x0 = malloc(sizeof(float) * N * C);
    float *whole = malloc(sizeof(float) * N * C), *parts = malloc(sizeof(float) * N * C);
    for (int i = 0; i < N * LD; i++) dy[i] = uni(&sd);
    for (int i = 0; i < E * C; i++) W[i] = uni(&sd);
    for (int i = 0; i < N * C; i++) x0[i] = uni(&sd);
    memcpy(whole, x0, sizeof(float) * N * C);
    memcpy(parts, x0, sizeof(float) * N * C);
    moe_router_dinp(whole, dy, LD, W, N, C, E);
    int nthr = omp_get_max_threads();
    omp_set_num_threads(1);
    const int cuts[] = {0, 1, 17, 18, 69, N};
    for (int i = 0; i + 1 < (int)(sizeof cuts / sizeof cuts[0]); i++)
        moe_router_dinp(parts + (size_t)cuts[i] * C, dy + (size_t)cuts[i] * LD, LD, W, cuts[i + 1] - cuts[i], C, E);
    omp_set_num_threads(nthr);
    assert_memory_equal(whole, parts, sizeof(float) * N * C);
    for (int r = 0; r < N; r++)
        for (int c = 0; c < C; c++) {
            double ref = x0[r * C + c];
            for (int e = 0; e < E; e++) ref += (double)dy[r * LD + e] * W[e * C + c];
            assert_true(fabs(ref - whole[r * C + c]) <= 1e-6);
        }
    free(dy), free(W), free(x0), free(whole), free(parts);
}

/* Context parallelism: a part's tokens with the whole's counts and token count give its share of the
 * whole's router losses (the parts' shares add up to them) and exactly the whole's gradient rows. */
static void test_router_losses_split_into_parts(void **state) {
    (void)state;
    uint64_t s = 11;
    float logits[RN * RE], probs[RN * RE], lse[RN], w[RN * RK], c[RN * RK], dl[RN * RE], dlp[RN * RE];
    int32_t idx[RN * RK], counts[RE], offsets[RE + 1], order[RN * RK + RE], row_of[RN * RK];
    for (int i = 0; i < RN * RE; i++) logits[i] = 2.0f * uni(&s);
    for (int i = 0; i < RN * RK; i++) c[i] = uni(&s);
    moe_router_forward(probs, lse, idx, w, logits, RN, RE, RK, true);
    moe_route_plan(counts, offsets, order, row_of, idx, RN, RE, RK, 0, 1);
    double aux, z, sa = 0, sz = 0;
    moe_router_losses(&aux, &z, probs, lse, counts, RN, RN, RE);
    moe_router_backward(dl, c, probs, lse, w, idx, counts, RN, RN, RE, RK, true, 0.7f, 0.3f);
    const int cut[] = {0, 2, RN}; /* parts of 2 and 4 tokens */
    for (int p = 0; p < 2; p++) {
        int t0 = cut[p], n = cut[p + 1] - t0;
        double a, zz;
        moe_router_losses(&a, &zz, probs + t0 * RE, lse + t0, counts, n, RN, RE);
        sa += a, sz += zz;
        moe_router_backward(dlp + t0 * RE, c + t0 * RK, probs + t0 * RE, lse + t0, w + t0 * RK, idx + t0 * RK, counts,
                            n, RN, RE, RK, true, 0.7f, 0.3f);
    }
    assert_true(fabs(sa - aux) <= 1e-12 * fabs(aux) && fabs(sz - z) <= 1e-12 * fabs(z));
    assert_memory_equal(dlp, dl, sizeof dl);
}

/* The plan: rows grouped by expert, each expert's tokens in order; row_of inverts order; a capacity
 * keeps each expert's first tokens and counts the rest. */
static void test_route_plan_order_and_capacity(void **state) {
    (void)state;
    const int N = 5, E = 3, k = 2;
    const int32_t idx[] = {2, 0, 0, 1, 2, 1, 0, 2, 1, 0}; /* token t's choices at 2t, 2t+1 */
    int32_t counts[3], offsets[4], order[10], row_of[10];
    assert_int_equal(moe_route_plan(counts, offsets, order, row_of, idx, N, E, k, 0, 1), 0);
    const int32_t want_counts[] = {4, 3, 3}, want_order[] = {1, 2, 6, 9, 3, 5, 8, 0, 4, 7};
    assert_memory_equal(counts, want_counts, sizeof want_counts);
    assert_memory_equal(order, want_order, sizeof want_order);
    for (int r = 0; r < 10; r++) assert_int_equal(row_of[order[r]], r);
    assert_int_equal(moe_route_plan(counts, offsets, order, row_of, idx, N, E, k, 2, 1), 4); /* 4 - 2 + 3 - 2 + 3 - 2 */
    assert_int_equal(offsets[3], 6);
    assert_int_equal(row_of[6], -1); /* token 3's expert 0: its third token */
    assert_int_equal(row_of[9], -1);
    /* each expert's rows padded to whole tiles (4 here): padding rows have no slot */
    int32_t porder[10 + 3 * 3];
    assert_int_equal(moe_route_plan(counts, offsets, porder, row_of, idx, N, E, k, 0, 4), 0);
    const int32_t want_offsets[] = {0, 4, 8, 12}, want_porder[] = {1, 2, 6, 9, 3, 5, 8, -1, 0, 4, 7, -1};
    assert_memory_equal(offsets, want_offsets, sizeof want_offsets);
    assert_memory_equal(porder, want_porder, sizeof want_porder);
    assert_int_equal(moe_route_plan(counts, offsets, order, row_of, idx, N, E, k, 2, 1), 4);
    /* combine: a dropped slot adds nothing; the others weighted in top-k order */
    float y[6 * 1] = {1, 2, 3, 4, 5, 6}, w[10], out[5];
    for (int i = 0; i < 10; i++) w[i] = 0.5f;
    moe_combine_forward(out, y, w, row_of, N, k, 1);
    for (int t = 0; t < N; t++) {
        float want = 0;
        for (int j = 0; j < k; j++)
            if (row_of[t * k + j] >= 0) want += 0.5f * y[row_of[t * k + j]];
        assert_float_equal(out[t], want, 0.0f);
    }
}

/* The grouped products (grouped_gemm.c): the experts side by side on the threads, each product on
 * one, so the bits are the same at 1, 2 and 3 threads; the values those of plain loops; an expert
 * with no rows writes nothing, or zeros into its weight gradient when it is assigned
 * (ZT_MM_DWEIGHT_SET), whose bits are those of += into zeros. */
enum { GE = 4, GC = 48, GO = 40, GR = 200 };
typedef struct grouped_out {
    float out[GR * GO], din[GR * GC], dW[GE * GO * GC], dWset[GE * GO * GC];
} grouped_out;

static void grouped_run(grouped_out *o, int threads, const float *in, const float *W, const float *dout,
                        const int32_t *off) {
    int was = omp_get_max_threads();
    omp_set_num_threads(threads);
    moe_grouped_forward(o->out, in, W, off, GE, GC, GO, 0);
    memset(o->dW, 0, sizeof o->dW);
    for (size_t i = 0; i < GE * GO * GC; i++) o->dWset[i] = NAN; /* assigned: never read */
    moe_grouped_backward(o->din, o->dW, dout, in, W, off, GE, GC, GO, 0, 0, NULL);
    moe_grouped_backward(o->din, o->dWset, dout, in, W, off, GE, GC, GO, ZT_MM_DINP_ADD | ZT_MM_DWEIGHT_SET, 0, NULL);
    omp_set_num_threads(was);
}

static void test_grouped_products_bits_and_values(void **state) {
    (void)state;
    static float in[GR * GC], W[GE * GO * GC], dout[GR * GO];
    static grouped_out one, two, three;
    const int32_t off[GE + 1] = {0, 70, 70, 135, GR}; /* expert 1: no rows */
    uint64_t seed = 7;
    for (size_t i = 0; i < GR * GC; i++) in[i] = uni(&seed);
    for (size_t i = 0; i < GE * GO * GC; i++) W[i] = uni(&seed);
    for (size_t i = 0; i < GR * GO; i++) dout[i] = uni(&seed);
    grouped_run(&one, 1, in, W, dout, off);
    grouped_run(&two, 2, in, W, dout, off);
    grouped_run(&three, 3, in, W, dout, off);
    assert_memory_equal(&one, &two, sizeof one);
    assert_memory_equal(&one, &three, sizeof one);
    assert_memory_equal(one.dW, one.dWset, sizeof one.dW);
    for (int e = 0; e < GE; e++)
        for (int r = off[e]; r < off[e + 1]; r++)
            for (int o = 0; o < GO; o++) { /* out = in W_e^T; din = 2 dout W_e (assigned, then added) */
                double acc = 0;
                for (int c = 0; c < GC; c++) acc += (double)in[r * GC + c] * W[((size_t)e * GO + o) * GC + c];
                assert_float_equal(one.out[r * GO + o], acc, 1e-4);
            }
    for (int e = 0; e < GE; e++)
        for (int o = 0; o < GO; o++)
            for (int c = 0; c < GC; c++) {
                double acc = 0;
                for (int r = off[e]; r < off[e + 1]; r++) acc += (double)dout[r * GO + o] * in[r * GC + c];
                assert_float_equal(one.dW[((size_t)e * GO + o) * GC + c], acc, 1e-4);
            }
    for (int r = 0; r < GR; r++) {
        int e = r < off[1] ? 0 : r < off[3] ? 2 : 3;
        for (int c = 0; c < GC; c++) {
            double acc = 0;
            for (int o = 0; o < GO; o++) acc += (double)dout[r * GO + o] * W[((size_t)e * GO + o) * GC + c];
            assert_float_equal(one.din[r * GC + c], 2 * acc, 2e-4);
        }
    }
}

/* ---- the whole model through the engine ----------------------------------------------------- */
static const zt_llama_config MOE_SMALL = {.max_seq_len = 8, .vocab_size = 37, .n_layer = 2, .n_head = 4,
                                          .n_embd = 16, .n_kv_head = 2, .intermediate_size = 24,
                                          .rope_theta = 10000.0f, .rms_norm_eps = 1e-5f, .n_experts = 4,
                                          .n_experts_per_token = 2, .moe_intermediate_size = 12,
                                          .norm_topk_prob = true};

static zt_engine *engine_for(zt_model *m, int B, int T) {
    zt_error err = {0};
    zt_engine_options o = {.B = B, .T = T, .seed = 1234};
    zt_optimizer_config_default(&o.optim);
    zt_engine *e = NULL;
    if (zt_engine_create(m, &o, &e, &err)) fail_msg("%s", err.msg);
    assert_int_equal(zt_engine_init_params(e, &err), ZT_OK);
    return e;
}

#include "test_engine_fd.h" /* loss_of, loss_along, richardson */

/* The model's gradients against finite differences (test_model.c's bounds: 1% + 1e-4 along random
 * directions, 2% + 2e-4 per element) with the router losses weighted heavily, so that their
 * gradients are a large part of the router's. A top-k choice that flips under the step makes the
 * loss jump (the counts in the load-balancing loss, an expert's output in or out), so the step
 * must move no router logit across a gap: one MoE block (nothing after it routes), its router's
 * weights scaled up x25 (gaps ~1 between the logits) and the parameters moved those the block's
 * routing depends on least: the router itself (1e-2 of weights ~0.5), the experts (which do not
 * route) and the post-attention norm (1e-2 of weights ~1), whose gradient is the MoE's input
 * gradient (through the experts and the router) times the normalized input. The dense parameters
 * before it are test_model.c's (the same code). Passing shows no choice flipped. */
static bool moved(const char *name) {
    return strstr(name, "block_sparse_moe") || strstr(name, "post_attention_layernorm");
}

static void check_model(const zt_llama_config *c0, const char *what) {
    zt_error err = {0};
    zt_model *m;
    zt_llama_config c1 = *c0;
    c1.n_layer = 1;
    const zt_llama_config *c = &c1;
    assert_int_equal(zt_llama_create(c, &m, &err), ZT_OK);
    int B = 2, T = 5;
    zt_engine *e = engine_for(m, B, T);
    for (int i = 0; i < m->n_params; i++)
        if (strstr(m->params[i].name, "block_sparse_moe.gate")) {
            float *p = zt_engine_param(e, i);
            for (int64_t j = 0; j < m->params[i].numel; j++) p[j] *= 25.0f;
        } else if (strstr(m->params[i].name, "shared_expert")) { /* x20: its output and gate not negligible */
            float *p = zt_engine_param(e, i);
            for (int64_t j = 0; j < m->params[i].numel; j++) p[j] *= 20.0f;
        }
    int32_t tok[B * T + 1];
    uint64_t s = 99;
    for (int i = 0; i < B * T + 1; i++) tok[i] = (int32_t)(lcg(&s) % (uint64_t)m->vocab_size);
    zt_batch b = {.B = B, .T = T, .inputs = tok, .targets = tok + 1, .dloss = 1.0f / (B * T), .logits_pos = -1};
    float loss;
    zt_moe_stats st;
    assert_int_equal(zt_engine_forward_backward(e, &b, &loss, &err), ZT_OK);
    assert_int_equal(zt_engine_moe_stats(e, &st), 1);
    assert_true(c->capacity_factor > 0 ? st.dropped > 0 : st.dropped == 0); /* some dropped: their gradients too */
    int64_t total = zt_model_numel(m);
    float *dir = calloc((size_t)total, sizeof *dir);
    assert_non_null(dir);
    const float h = 1e-2f;
    double worst = 0;
    for (int trial = 0; trial < 3; trial++) {
        uint64_t r = 1000 + (uint64_t)trial;
        double gd = 0;
        int64_t k = 0;
        for (int i = 0; i < m->n_params; i++) {
            const float *g = zt_engine_grad(e, i);
            bool mv = moved(m->params[i].name);
            for (int64_t j = 0; j < m->params[i].numel; j++, k++) {
                dir[k] = mv ? uni(&r) : 0.0f;
                gd += (double)g[j] * dir[k];
            }
        }
        double fd = richardson(e, m, &b, dir, h);
        worst = fabs(fd - gd) > worst ? fabs(fd - gd) : worst;
        if (fabs(fd - gd) > 1e-2 * fabs(gd) + 1e-4)
            fail_msg("%s: direction %d: finite difference %.6g vs analytic %.6g", what, trial, fd, gd);
    }
    memset(dir, 0, (size_t)total * sizeof *dir);
    int64_t base = 0, checked = 0;
    for (int i = 0; i < m->n_params; i++) {
        int64_t n = m->params[i].numel, idx[4] = {0, n / 3, n / 2, n - 1};
        for (int q = 0; q < 4 && moved(m->params[i].name); q++) {
            float g = zt_engine_grad(e, i)[idx[q]];
            dir[base + idx[q]] = 1.0f;
            double fd = richardson(e, m, &b, dir, h);
            dir[base + idx[q]] = 0.0f;
            worst = fabs(fd - g) > worst ? fabs(fd - g) : worst;
            checked++;
            if (fabs(fd - g) > 2e-2 * fabs(g) + 2e-4)
                fail_msg("%s: %s[%lld]: finite difference %.6g vs analytic %.6g", what, m->params[i].name,
                         (long long)idx[q], fd, (double)g);
        }
        base += n;
    }
    int n_moved = 0;
    for (int i = 0; i < m->n_params; i++) n_moved += moved(m->params[i].name);
    assert_int_equal(n_moved, 5 + (c->n_shared_experts > 0 || c->shared_expert_intermediate_size > 0 ? 3 : 0) +
                                  (c->shared_expert_gate ? 1 : 0)); /* the shared expert's too */
    assert_int_equal(checked, n_moved * 4);
    print_message("%s: loss %.5f, max |analytic - FD| %.2e\n", what, (double)loss, worst);
    free(dir);
    zt_engine_free(e);
    zt_model_free(m);
}

static void test_model_gradients_match_finite_differences(void **state) {
    (void)state;
    zt_llama_config c = MOE_SMALL;
    check_model(&c, "cross-entropy only");
    c.router_aux_loss_coef = 0.5f;
    check_model(&c, "+ load-balancing loss 0.5");
    c.router_z_loss_coef = 0.05f;
    check_model(&c, "+ z-loss 0.05");
    c.norm_topk_prob = false;
    check_model(&c, "top-k weights not renormalized");
    c.capacity_factor = 0.6f; /* ceil(10·2/4·0.6) = 3 tokens per expert: some dropped */
    check_model(&c, "capacity factor 0.6");
    /* shared experts (llama_moe_shared.c): DeepSeek-MoE's (2 x the expert width, no gate), and
     * Qwen2-MoE's (its own width, the sigmoid gate, the top-k not renormalized) */
    c = MOE_SMALL;
    c.router_aux_loss_coef = 0.5f;
    c.n_shared_experts = 2;
    check_model(&c, "shared expert 2 x 12, no gate");
    c.n_shared_experts = 0;
    c.shared_expert_intermediate_size = 20;
    c.shared_expert_gate = true;
    c.norm_topk_prob = false;
    check_model(&c, "shared expert of width 20 with its sigmoid gate");
    c.capacity_factor = 0.6f;
    check_model(&c, "gated shared expert, capacity factor 0.6");
}

/* At a zero router every probability is 1/E: aux = E·sum_e f_e/E = k, z = ln(E)²; the loss is the
 * cross-entropy plus the coefficients times those, per MoE block. The counters add up to N·k per
 * block and the capacity's drops are counted. */
static void test_losses_and_counters(void **state) {
    (void)state;
    zt_error err = {0};
    for (int cap = 0; cap < 2; cap++) {
        zt_llama_config c = MOE_SMALL;
        c.capacity_factor = cap ? 0.5f : 0.0f;
        zt_model *m;
        assert_int_equal(zt_llama_create(&c, &m, &err), ZT_OK);
        int B = 2, T = 5;
        zt_engine *e = engine_for(m, B, T);
        int32_t tok[B * T + 1];
        uint64_t s = 5;
        for (int i = 0; i < B * T + 1; i++) tok[i] = (int32_t)(lcg(&s) % 37u);
        zt_batch b = {.B = B, .T = T, .inputs = tok, .targets = tok + 1, .dloss = 1.0f / (B * T), .logits_pos = -1};
        double base, with;
        for (int i = 0; i < m->n_params; i++)
            if (strstr(m->params[i].name, "block_sparse_moe.gate"))
                memset(zt_engine_param(e, i), 0, (size_t)m->params[i].numel * sizeof(float));
        base = loss_of(e, &b);
        float trained;
        zt_moe_stats st;
        assert_int_equal(zt_engine_moe_stats(e, &st), 0); /* evaluation does not count */
        assert_int_equal(zt_engine_forward_backward(e, &b, &trained, &err), ZT_OK);
        assert_float_equal(trained, base, 0.0f);
        assert_int_equal(zt_engine_moe_stats(e, &st), 2);
        int64_t sum = 0;
        for (int x = 0; x < 4; x++) sum += st.tokens[x];
        assert_int_equal(sum, 2 * B * T * 2); /* 2 blocks x N x k, dropped or not */
        /* the ties of a zero router go to the lower experts: 0 and 1 get every token, 7 of their 10
         * over the capacity ceil(20/4·0.5) = 3 */
        if (cap) assert_int_equal(st.dropped, 2 * 2 * (B * T - 3));
        else assert_int_equal(st.dropped, 0);
        assert_true(st.max_over_mean >= 1.0);
        zt_engine_free(e);
        c.router_aux_loss_coef = 0.1f;
        c.router_z_loss_coef = 0.01f;
        zt_model_free(m);
        assert_int_equal(zt_llama_create(&c, &m, &err), ZT_OK);
        e = engine_for(m, B, T);
        for (int i = 0; i < m->n_params; i++)
            if (strstr(m->params[i].name, "block_sparse_moe.gate"))
                memset(zt_engine_param(e, i), 0, (size_t)m->params[i].numel * sizeof(float));
        with = loss_of(e, &b);
        double want = 2 * (0.1 * 2 + 0.01 * log(4.0) * log(4.0));
        assert_float_equal(with - base, want, 2e-5);
        zt_engine_free(e);
        zt_model_free(m);
    }
}

/* Bad shapes name the numbers; tensor parallelism cuts a shared expert whose width it divides. */
static void test_bad_shapes(void **state) {
    (void)state;
    zt_error err = {0};
    zt_model *m = NULL;
    zt_llama_config c = MOE_SMALL;
    c.n_experts_per_token = 5;
    assert_int_equal(zt_llama_create(&c, &m, &err), ZT_ERR_USAGE);
    assert_non_null(strstr(err.msg, "n_experts 4 and n_experts_per_token 5"));
    c = MOE_SMALL;
    c.n_experts = 1;
    c.n_experts_per_token = 1;
    assert_int_equal(zt_llama_create(&c, &m, &err), ZT_ERR_USAGE);
    c = MOE_SMALL;
    c.router_aux_loss_coef = -1.0f;
    assert_int_equal(zt_llama_create(&c, &m, &err), ZT_ERR_USAGE);
    assert_non_null(strstr(err.msg, "router_aux_loss_coef -1"));
    /* shared experts: a gate without one, a negative width, two widths that disagree */
    c = MOE_SMALL;
    c.shared_expert_gate = true;
    assert_int_equal(zt_llama_create(&c, &m, &err), ZT_ERR_USAGE);
    assert_non_null(strstr(err.msg, "shared_expert_intermediate_size 0, shared_expert_gate true"));
    c = MOE_SMALL;
    c.shared_expert_intermediate_size = -4;
    assert_int_equal(zt_llama_create(&c, &m, &err), ZT_ERR_USAGE);
    assert_non_null(strstr(err.msg, "shared_expert_intermediate_size -4"));
    c = MOE_SMALL;
    c.n_shared_experts = 2;
    c.shared_expert_intermediate_size = 20;
    assert_int_equal(zt_llama_create(&c, &m, &err), ZT_ERR_USAGE);
    assert_non_null(strstr(err.msg, "n_shared_experts 2, shared_expert_intermediate_size 20"));
    c.shared_expert_intermediate_size = 24; /* 2 x 12: the same width said twice */
    assert_int_equal(zt_llama_create(&c, &m, &err), ZT_OK);
    zt_model_free(m);
    /* tensor parallelism cuts the experts and the shared expert (tests/moe_tp.sh), when it divides
     * the shared expert's width */
    c = MOE_SMALL;
    assert_int_equal(zt_llama_create(&c, &m, &err), ZT_OK);
    assert_int_equal(m->tp_check(m, 2, &err), ZT_OK);
    zt_model_free(m);
    c.shared_expert_intermediate_size = 20;
    assert_int_equal(zt_llama_create(&c, &m, &err), ZT_OK);
    assert_int_equal(m->tp_check(m, 2, &err), ZT_OK);
    zt_model_free(m);
    c.shared_expert_intermediate_size = 21;
    assert_int_equal(zt_llama_create(&c, &m, &err), ZT_OK);
    assert_int_equal(m->tp_check(m, 2, &err), ZT_ERR_USAGE);
    assert_non_null(strstr(err.msg, "2 does not divide the shared expert's width (shared_expert_intermediate_size) 21"));
    zt_model_free(m);
}

/* Mixtral 8x7B's preset has the released model's parameter counts: 46.7B in all, 12.9B active
 * (two of eight experts per token). */
static void test_mixtral_preset_counts(void **state) {
    (void)state;
    zt_error err = {0};
    zt_llama_config c;
    assert_int_equal(zt_llama_preset("mixtral-8x7b", &c, &err), ZT_OK);
    zt_model *m;
    assert_int_equal(zt_llama_create(&c, &m, &err), ZT_OK);
    int64_t total = zt_model_numel(m);
    assert_int_equal(total, 46702792704LL);
    int64_t experts = 0;
    for (int i = 0; i < m->n_params; i++)
        if (strstr(m->params[i].name, ".experts.")) experts += m->params[i].numel;
    int64_t active = total - experts + experts / c.n_experts * c.n_experts_per_token;
    assert_int_equal(active, 12879925248LL);
    print_message("mixtral-8x7b: %lld parameters, %lld active\n", (long long)total, (long long)active);
    zt_model_free(m);
}

/* Qwen1.5-MoE-A2.7B's preset: the released model's 14,315,784,192 parameters (2,689,173,504 active:
 * four of the 60 experts and the shared expert with its gate), its q/k/v biases (3 x 2048 per
 * layer) among them (docs/models.md). */
static void test_qwen_moe_preset_counts(void **state) {
    (void)state;
    zt_error err = {0};
    zt_llama_config c;
    assert_int_equal(zt_llama_preset("qwen1.5-moe-a2.7b", &c, &err), ZT_OK);
    assert_true(c.qkv_bias);
    zt_model *m;
    assert_int_equal(zt_llama_create(&c, &m, &err), ZT_OK);
    int64_t total = zt_model_numel(m), biases = 0, experts = 0;
    assert_int_equal(total, 14315784192LL);
    for (int i = 0; i < m->n_params; i++) {
        if (strstr(m->params[i].name, ".experts.")) experts += m->params[i].numel;
        if (strstr(m->params[i].name, "_proj.bias")) biases += m->params[i].numel;
    }
    assert_int_equal(biases, 3LL * 2048 * 24);
    int64_t active = total - experts + experts / c.n_experts * c.n_experts_per_token;
    assert_int_equal(active, 2689173504LL);
    print_message("qwen1.5-moe-a2.7b: %lld parameters, %lld active (%lld of them q/k/v biases)\n",
                  (long long)total, (long long)active, (long long)biases);
    zt_model_free(m);
}

/* The released config.json files (their fields as Hugging Face serves them, written here) build the
 * released models through the Hugging Face rows: Qwen1.5-MoE-A2.7B (qwen2_moe, no qkv_bias field:
 * q/k/v biases) 14,315,784,192 parameters, Qwen2-0.5B (qwen2, tied) 494,032,768. */
static void test_released_qwen_configs(void **state) {
    (void)state;
    static const struct { const char *json; int64_t params; } cases[] = {
        {"{\"architectures\": [\"Qwen2MoeForCausalLM\"], \"attention_dropout\": 0.0, \"bos_token_id\": 151643, "
         "\"eos_token_id\": 151643, \"hidden_act\": \"silu\", \"hidden_size\": 2048, \"initializer_range\": 0.02, "
         "\"intermediate_size\": 5632, \"max_position_embeddings\": 8192, \"max_window_layers\": 21, "
         "\"model_type\": \"qwen2_moe\", \"num_attention_heads\": 16, \"num_hidden_layers\": 24, "
         "\"num_key_value_heads\": 16, \"rms_norm_eps\": 1e-06, \"rope_theta\": 1000000.0, \"sliding_window\": 32768, "
         "\"tie_word_embeddings\": false, \"torch_dtype\": \"bfloat16\", \"transformers_version\": \"4.39.0.dev0\", "
         "\"use_cache\": true, \"use_sliding_window\": false, \"vocab_size\": 151936, \"decoder_sparse_step\": 1, "
         "\"moe_intermediate_size\": 1408, \"shared_expert_intermediate_size\": 5632, \"num_experts_per_tok\": 4, "
         "\"num_experts\": 60, \"norm_topk_prob\": false, \"output_router_logits\": false, "
         "\"router_aux_loss_coef\": 0.001}", 14315784192LL},
        {"{\"architectures\": [\"Qwen2ForCausalLM\"], \"attention_dropout\": 0.0, \"bos_token_id\": 151643, "
         "\"eos_token_id\": 151643, \"hidden_act\": \"silu\", \"hidden_size\": 896, \"initializer_range\": 0.02, "
         "\"intermediate_size\": 4864, \"max_position_embeddings\": 131072, \"max_window_layers\": 24, "
         "\"model_type\": \"qwen2\", \"num_attention_heads\": 14, \"num_hidden_layers\": 24, "
         "\"num_key_value_heads\": 2, \"rms_norm_eps\": 1e-06, \"rope_theta\": 1000000.0, \"sliding_window\": 131072, "
         "\"tie_word_embeddings\": true, \"torch_dtype\": \"bfloat16\", \"transformers_version\": \"4.40.1\", "
         "\"use_cache\": true, \"use_sliding_window\": false, \"vocab_size\": 151936}", 494032768LL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char dir[] = "/tmp/zt_qwen_cfg_XXXXXX", path[64];
        assert_non_null(mkdtemp(dir));
        snprintf(path, sizeof path, "%s/config.json", dir);
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fputs(cases[i].json, f);
        fclose(f);
        zt_error err = {0};
        zt_model *m = NULL;
        int rc = zt_hf_create_model(dir, &m, &err);
        remove(path);
        rmdir(dir);
        if (rc) fail_msg("released config %zu: %s", i, err.msg);
        assert_true(((const zt_llama_config *)m->cfg)->qkv_bias);
        if (zt_model_numel(m) != cases[i].params)
            fail_msg("released config %zu: %lld parameters, the released model has %lld", i,
                     (long long)zt_model_numel(m), (long long)cases[i].params);
        zt_model_free(m);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_router_backward_matches_finite_differences),
        cmocka_unit_test(test_released_qwen_configs),
        cmocka_unit_test(test_router_losses_split_into_parts),
        cmocka_unit_test(test_router_dinp_rows_independent),
        cmocka_unit_test(test_route_plan_order_and_capacity),
        cmocka_unit_test(test_grouped_products_bits_and_values),
        cmocka_unit_test(test_model_gradients_match_finite_differences),
        cmocka_unit_test(test_losses_and_counters),
        cmocka_unit_test(test_bad_shapes),
        cmocka_unit_test(test_mixtral_preset_counts),
        cmocka_unit_test(test_qwen_moe_preset_counts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
