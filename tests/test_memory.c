/* test_memory.c - the memory plan (src/memory): the precision table, the model states per strategy
 * in closed form (ddp 4+8 bytes per parameter at rest, zero1/zero2 4 + (4+8)/N, zero3 16/N of the
 * shard layout), the activation classes against sums written out from gpt2.c's buffer layout
 * (none, full and selective checkpointing), the NVMe staging rule, the Llama-2 shape models'
 * parameter counts (the published 6.74B, 13.02B, 68.98B), the estimator grid, every bad input
 * the plan refuses, and the quantized base's split over shards (zt_memory_quant_split: the shards'
 * ranges tile each region in shard order, whole 4-byte words, whole runs of 4 blocks but the last
 * shard's). The plan against a running engine is tests/memory_plan.sh. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "memory/estimate.h"
#include "memory/plan.h"
#include "memory/shapes.h"
#include "shard/plan.h"

#include <stdlib.h>
#include <string.h>

static const zt_gpt2_config SMALL = {.max_seq_len = 32, .vocab_size = 96, .n_layer = 3, .n_head = 2, .n_embd = 32};

static zt_model *small_model(void) {
    zt_model *m;
    zt_error err = {0};
    assert_int_equal(zt_gpt2_create(&SMALL, &m, &err), ZT_OK);
    return m;
}

static void options(zt_engine_options *o, zt_strategy s) {
    zt_engine_options_default(o);
    o->B = 2;
    o->T = 16;
    o->strategy = s;
}

static zt_memory_plan plan_of(const zt_model *m, const zt_engine_options *o, const zt_memory_plan_options *po,
                              int world, int rank) {
    zt_memory_plan p;
    zt_error err = {0};
    int rc = zt_memory_plan_compute(m, o, po, world, rank, &p, &err);
    if (rc) fail_msg("plan: %s", err.msg);
    return p;
}

static void test_precision_table(void **state) {
    /* the bytes the engine stores per element: an fp32 master (bf16-low: 2-byte parameters that
     * are their own compute copy, and 2-byte moments), a 2-byte bf16 copy, a 4-byte fp16 copy (fp16
     * values in fp32: no fp16 arithmetic on this CPU), fp32 grads */
    const zt_precision_bytes *f = zt_precision_bytes_of(ZT_PRECISION_FP32), *b = zt_precision_bytes_of(ZT_PRECISION_BF16),
                             *l = zt_precision_bytes_of(ZT_PRECISION_BF16_LOW), *h = zt_precision_bytes_of(ZT_PRECISION_FP16);
    assert_int_equal(f->master + f->copy + f->grads + 2 * f->moment, 16);
    assert_int_equal(b->master + b->copy + b->grads + 2 * b->moment, 18);
    assert_int_equal(l->master + l->copy + l->grads + 2 * l->moment, 10);
    assert_int_equal(l->master, 2);
    assert_int_equal(l->copy, 0);
    assert_int_equal(h->copy, 4);
    assert_ptr_equal(zt_precision_bytes_of((zt_precision_mode)99), f);
}

/* model states at rest, closed form, summed over the ranks */
static void test_model_states_per_strategy(void **state) {
    zt_model *m = small_model();
    zt_plan full;
    zt_error err = {0};
    assert_int_equal(zt_plan_create(m, 1, 0, &full, &err), ZT_OK);
    double F = (double)full.full_floats * 4; /* bytes of one full fp32 copy (aligned) */
    for (int N = 1; N <= 4; N++) {
        for (int s = ZT_STRATEGY_DDP; s <= ZT_STRATEGY_ZERO3; s++) {
            zt_engine_options o;
            options(&o, (zt_strategy)s);
            for (int r = 0; r < N; r++) {
                zt_memory_plan p = plan_of(m, &o, NULL, N, r);
                double states = (double)zt_memory_plan_model_states(&p);
                zt_plan pl;
                assert_int_equal(zt_plan_create(m, s == ZT_STRATEGY_DDP ? 1 : N, s == ZT_STRATEGY_DDP ? 0 : r, &pl, &err),
                                 ZT_OK);
                double piece = (double)pl.shard_floats * 4;
                double want = s == ZT_STRATEGY_DDP ? 3 * F : s == ZT_STRATEGY_ZERO3 ? 4 * piece : F + 3 * piece;
                if (states != want) fail_msg("%s N=%d rank %d: model states %.0f, want %.0f", zt_strategy_name(o.strategy), N, r, states, want);
                assert_int_equal(p.rest[ZT_MEM_GATHERED], 0);
                zt_plan_free(&pl);
            }
        }
    }
    zt_plan_free(&full);
    zt_model_free(m);
}

/* activations from gpt2.c's layout, written out: per unit out + saved, the shared scratch, two
 * activation-gradient buffers, d loss; under either attention kernel */
static void check_activations_closed_form(zt_attention attention) {
    zt_gpt2_config cfg = SMALL;
    cfg.attention = attention;
    zt_model *m;
    zt_error err = {0};
    assert_int_equal(zt_gpt2_create(&cfg, &m, &err), ZT_OK);
    zt_engine_options o;
    options(&o, ZT_STRATEGY_DDP);
    size_t B = 2, T = 16, N = B * T, C = 32, NH = 2, V = 96, L = 3;
    bool naive = attention == ZT_ATTENTION_NAIVE;
    size_t att = naive ? B * NH * T * T : 0, lse = naive ? 0 : B * NH * T; /* probabilities, or logsumexps */
    size_t block = N * C + 2 * N + 3 * N * C + N * C + lse + att + N * C + N * C + 2 * N + 8 * N * C;
    size_t head = N * C + 2 * N + N * V;
    size_t rest = att + 4 * N * C; /* (att and) gelu(fch): selective recomputes them */
    size_t scratch = 0;
    for (int u = 0; u < m->n_units; u++) {
        size_t sc = m->units[u].ops->scratch_floats(&m->units[u], (int)B, (int)T);
        if (sc > scratch) scratch = sc;
    }
    size_t common = zt_memory_alloc_bytes(N * C) /* embedding out */ + L * zt_memory_alloc_bytes(N * C) +
                    zt_memory_alloc_bytes(N) /* head out */ + zt_memory_alloc_bytes(scratch) +
                    2 * zt_memory_alloc_bytes(N * C) + zt_memory_alloc_bytes(N);
    zt_memory_plan none = plan_of(m, &o, NULL, 1, 0);
    assert_int_equal(none.peak[ZT_MEM_ACTIVATIONS], common + L * zt_memory_alloc_bytes(block) + zt_memory_alloc_bytes(head));
    o.activation_checkpointing = ZT_RECOMPUTE_FULL; /* nothing kept; one buffer of the largest saved */
    zt_memory_plan full = plan_of(m, &o, NULL, 1, 0);
    assert_int_equal(full.peak[ZT_MEM_ACTIVATIONS], common + zt_memory_alloc_bytes(block > head ? block : head));
    o.activation_checkpointing = ZT_RECOMPUTE_SELECTIVE; /* blocks keep all but (att and) gelu(fch); the head all */
    zt_memory_plan sel = plan_of(m, &o, NULL, 1, 0);
    assert_int_equal(sel.peak[ZT_MEM_ACTIVATIONS],
                     common + L * zt_memory_alloc_bytes(block - rest) + zt_memory_alloc_bytes(head) + zt_memory_alloc_bytes(rest));
    assert_true(full.peak_total < sel.peak_total && sel.peak_total < none.peak_total);
    /* checkpointing changes nothing else */
    for (int c = 0; c < ZT_MEM_CLASSES; c++)
        if (c != ZT_MEM_ACTIVATIONS) assert_int_equal(full.peak[c], none.peak[c]);
    zt_model_free(m);
}

static void test_activations_closed_form(void **state) {
    check_activations_closed_form(ZT_ATTENTION_FLASH);
    check_activations_closed_form(ZT_ATTENTION_NAIVE);
}

/* flash attention's activations grow linearly in T, naive's quadratically: GPT-2 124M, B=1,
 * fp32, no checkpointing, 1 thread, the planned activation class at T = 1024, 2048, 4096 (wpe
 * lengthened to 4096 rows) */
static void test_activations_linear_in_T(void **state) {
    zt_error err = {0};
    zt_gpt2_config cfg;
    assert_int_equal(zt_gpt2_preset("gpt2-124M", &cfg, &err), ZT_OK);
    cfg.max_seq_len = 4096;
    double act[2][3];
    for (int k = 0; k < 2; k++) {
        cfg.attention = k ? ZT_ATTENTION_NAIVE : ZT_ATTENTION_FLASH;
        zt_model *m;
        assert_int_equal(zt_gpt2_create(&cfg, &m, &err), ZT_OK);
        for (int i = 0; i < 3; i++) {
            zt_engine_options o;
            options(&o, ZT_STRATEGY_DDP);
            o.B = 1;
            o.T = 1024 << i;
            act[k][i] = (double)plan_of(m, &o, NULL, 1, 0).peak[ZT_MEM_ACTIVATIONS];
        }
        zt_model_free(m);
    }
    print_message("  activations MiB at T=1024/2048/4096: flash %.0f %.0f %.0f, naive %.0f %.0f %.0f\n",
                  act[0][0] / 1048576, act[0][1] / 1048576, act[0][2] / 1048576, act[1][0] / 1048576,
                  act[1][1] / 1048576, act[1][2] / 1048576);
    /* linear: doubling T at most doubles them (the logits (N,V) and every (N,C) buffer double; the
     * lse and scratch too); quadratic: the (B,NH,T,T) probabilities dominate at 4096 */
    assert_true(act[0][1] <= 2.0 * act[0][0] && act[0][2] <= 2.0 * act[0][1]);
    assert_true(act[1][2] > 3.0 * act[1][1]);
    assert_true(act[1][2] > 3.5 * act[0][2]); /* measured 815/1630/3260 vs 1392/3943/12526 MiB */
}

static void test_nvme_staging(void **state) {
    zt_model *m = small_model();
    zt_engine_options o;
    options(&o, ZT_STRATEGY_DDP);
    zt_memory_plan_options po;
    zt_memory_plan_options_default(&po);
    zt_memory_plan mem = plan_of(m, &o, &po, 1, 0);
    po.offload_optimizer = true;
    po.offload_buffer_count = 3;
    po.offload_buffer_bytes = 16384; /* 16 KiB / 2 kinds = 2 x 8 KiB chunks = 2048 floats each */
    zt_memory_plan nv = plan_of(m, &o, &po, 1, 0);
    assert_int_equal(nv.peak[ZT_MEM_OPTIMIZER], 3 * 16384);
    zt_plan pl;
    zt_error err = {0};
    assert_int_equal(zt_plan_create(m, 1, 0, &pl, &err), ZT_OK);
    assert_int_equal(nv.offload_file_bytes, 2 * ((pl.full_floats * 4 + 4095) / 4096 * 4096));
    assert_true(mem.peak[ZT_MEM_OPTIMIZER] == 2 * zt_memory_alloc_bytes(pl.full_floats));
    po.offload_buffer_bytes = 64 << 20; /* a chunk never exceeds the state (rounded to 4 KiB) */
    nv = plan_of(m, &o, &po, 1, 0);
    assert_int_equal(nv.peak[ZT_MEM_OPTIMIZER], 3 * 2 * ((pl.full_floats + 1023) / 1024 * 1024) * 4);
    zt_plan_free(&pl);
    zt_model_free(m);
}

static void test_zero3_gathered_and_prefetch(void **state) {
    zt_model *m = small_model();
    zt_engine_options o;
    options(&o, ZT_STRATEGY_ZERO3);
    zt_memory_plan_options po;
    zt_memory_plan_options_default(&po);
    po.overlap = 1;
    zt_memory_plan pre = plan_of(m, &o, &po, 4, 0);
    o.no_prefetch = true;
    zt_memory_plan one = plan_of(m, &o, &po, 4, 0);
    o.no_prefetch = false;
    o.keep_params_after_forward = true;
    zt_memory_plan keep = plan_of(m, &o, &po, 4, 0);
    /* keep: the whole model gathered at the forward/backward boundary */
    size_t all = 0, block = 0, wte = zt_memory_alloc_bytes((size_t)m->params[0].numel);
    for (int i = 0; i < m->n_params; i++) all += zt_memory_alloc_bytes((size_t)m->params[i].numel);
    for (int k = 0; k < m->units[1].n_params; k++)
        block += zt_memory_alloc_bytes((size_t)m->params[m->units[1].params[k]].numel);
    assert_int_equal(keep.peak[ZT_MEM_GATHERED], all);
    /* without prefetch: one block plus the tied wte, gathered from the embedding to the head (wpe
     * goes after the embedding) */
    assert_int_equal(one.peak[ZT_MEM_GATHERED], block + wte);
    assert_true(pre.peak[ZT_MEM_GATHERED] >= 2 * block + wte);
    zt_model_free(m);
}

/* The estimator's Llama models are the engine's (src/model/llama.c): the parameter counts of the
 * released models, and the saved-activation formula of docs/memory.md / llama.c's top comment. */
static void test_llama_shapes(void **state) {
    zt_error err = {0};
    const struct {
        const char *name;
        int64_t params;
    } want[] = {{"llama-7b", 6738415616LL}, {"llama-13b", 13015864320LL}, {"llama-70b", 68976648192LL}};
    for (size_t k = 0; k < 6; k++) {
        zt_model *m;
        bool naive = k >= 3;
        assert_int_equal(zt_estimator_model(want[k % 3].name, naive ? ZT_ATTENTION_NAIVE : ZT_ATTENTION_FLASH, &m, &err),
                         ZT_OK);
        assert_int_equal(zt_model_numel(m), want[k % 3].params);
        /* a block's saved floats: N(5d + 2kv + 3f + 2) + A, A = B·NH·T² (naive: the probabilities, in
         * the rest) or B·NH·T (flash: lse, kept); under bf16 compute the Linears' inputs rms1, atty,
         * rms2 (N,d) and h (N,f) are bf16: N(3.5d + 2kv + 2.5f + 2) + A, and flash keeps its fp32
         * output beside atty: + N·d */
        const zt_llama_config *c = m->cfg;
        size_t B = 2, T = 64, N = B * T, d = (size_t)c->n_embd, f = (size_t)c->intermediate_size;
        size_t kv = (size_t)c->n_kv_head * d / (size_t)c->n_head;
        size_t att = naive ? B * (size_t)c->n_head * T * T : 0, lse = naive ? 0 : B * (size_t)c->n_head * T;
        size_t o = naive ? 0 : N * d; /* flash's fp32 output under lp compute */
        const zt_unit *u = &m->units[1];
        assert_int_equal(u->ops->saved_floats(u, (int)B, (int)T, 0), N * (5 * d + 2 * kv + 3 * f + 2) + att + lse);
        assert_int_equal(u->ops->kept_floats(u, (int)B, (int)T, 0), N * (5 * d + 2 * kv + 2 * f + 2) + lse);
        assert_int_equal(2 * u->ops->saved_floats(u, (int)B, (int)T, 1),
                         N * (7 * d + 4 * kv + 5 * f + 4) + 2 * (att + lse + o));
        assert_int_equal(2 * u->ops->kept_floats(u, (int)B, (int)T, 1), N * (7 * d + 4 * kv + 4 * f + 4) + 2 * (lse + o));
        /* fp16 values are kept in fp32 arrays: the fp32 sizes (and flash's fp32 output) */
        assert_int_equal(u->ops->saved_floats(u, (int)B, (int)T, 2), u->ops->saved_floats(u, (int)B, (int)T, 0) + o);
        /* the head's rms (N,d) is the output Linear's input */
        const zt_unit *h = &m->units[m->n_units - 1];
        size_t V = (size_t)c->vocab_size;
        assert_int_equal(h->ops->saved_floats(h, (int)B, (int)T, 0), N * (d + 1 + V));
        assert_int_equal(2 * h->ops->saved_floats(h, (int)B, (int)T, 1), N * (d + 2 + 2 * V));
        zt_model_free(m);
    }
    zt_model *m;
    assert_int_equal(zt_estimator_model("gpt2-124M", ZT_ATTENTION_FLASH, &m, &err), ZT_OK);
    assert_int_equal(zt_model_numel(m), 124439808);
    zt_model_free(m);
    assert_int_equal(zt_estimator_model("llama-8b", ZT_ATTENTION_FLASH, &m, &err), ZT_ERR_USAGE);
    assert_non_null(strstr(err.msg, "llama-70b"));
    assert_int_equal(zt_estimator_model("gpt3", ZT_ATTENTION_FLASH, &m, &err), ZT_ERR_USAGE);
}

static void test_estimate_grid(void **state) {
    zt_model *m = small_model();
    zt_estimate_request rq = {.model = m, .world = 4};
    options(&rq.opt, ZT_STRATEGY_DDP);
    rq.opt.hybrid_shard_size = 2;
    zt_memory_plan_options_default(&rq.plan);
    zt_estimate est;
    zt_error err = {0};
    assert_int_equal(zt_estimate_run(&rq, &est, &err), ZT_OK);
    assert_int_equal(est.ranks_evaluated, 4);
    for (int s = 0; s < ZT_EST_STRATEGIES; s++) {
        const zt_estimate_column *c = &est.col[s];
        /* the column's plan is its largest rank's, and no rank exceeds it */
        assert_int_equal(c->plan.peak_total, c->peak[ZT_EST_AS_GIVEN]);
        for (int r = 0; r < 4; r++) {
            zt_engine_options o = rq.opt;
            o.strategy = (zt_strategy)s;
            zt_memory_plan p = plan_of(m, &o, &rq.plan, 4, r);
            assert_true(p.peak_total <= c->peak[ZT_EST_AS_GIVEN] && p.peak_total >= c->min_peak);
        }
        assert_true(c->peak[ZT_EST_CKPT_FULL] <= c->peak[ZT_EST_CKPT_SELECTIVE]);
        assert_true(c->peak[ZT_EST_CKPT_SELECTIVE] <= c->peak[ZT_EST_AS_GIVEN]);
    }
    assert_true(est.col[ZT_STRATEGY_ZERO3].peak[0] < est.col[ZT_STRATEGY_DDP].peak[0]);
    /* beyond 64 ranks: rank 0, the last and the fullest shards */
    int ranks[64];
    int n = zt_estimate_ranks(m, 1000, 1000, ranks, 64);
    assert_true(n >= 2 && n <= 10);
    assert_int_equal(ranks[0], 0);
    assert_int_equal(ranks[1], 999);
    assert_int_equal(zt_estimate_ranks(m, 8, 8, ranks, 64), 8);
    zt_model_free(m);
}

static void test_quant_split(void **state) {
    (void)state;
    /* NF4 tensors of 1..4097 blocks of 64 (one, a partial run of 4, several second-level groups)
     * and int8 matrices of 1..67 rows of 24, over 1..9 shards */
    const int64_t nf4_blocks[] = {1, 3, 4, 5, 257, 1000, 4097};
    const int64_t int8_rows[] = {1, 2, 7, 8, 67};
    for (int kind = 0; kind < 2; kind++)
        for (int c = 0; c < (kind ? 5 : 7); c++) {
            int64_t shape[2] = {kind ? int8_rows[c] : nf4_blocks[c], kind ? 24 : 64};
            zt_param_desc p = {.ndim = 2, .numel = shape[0] * shape[1], .quant = kind ? ZT_QUANT_INT8 : ZT_QUANT_NF4};
            p.shape[0] = shape[0], p.shape[1] = shape[1];
            zt_quant_split whole;
            zt_memory_quant_split(&p, 1, 0, &whole);
            assert_int_equal(whole.local, whole.whole);
            assert_int_equal(whole.tail_off + whole.tail, whole.whole);
            for (int N = 1; N <= 9; N++) {
                size_t at[2] = {whole.off[0], whole.off[1]}, local = 0;
                for (int s = 0; s < N; s++) {
                    zt_quant_split q;
                    zt_memory_quant_split(&p, N, s, &q);
                    for (int r = 0; r < 2; r++) {
                        assert_int_equal(q.begin_s[r], at[r]);     /* back to back, in shard order */
                        assert_true(q.end_s[r] >= q.begin_s[r]);
                        assert_int_equal((q.end_s[r] - q.begin_s[r]) % 4, 0); /* whole words */
                        at[r] = q.end_s[r];
                    }
                    size_t blocks = (q.end_s[0] - q.begin_s[0]) / (kind ? 24 : 32);
                    if (s + 1 < N) assert_int_equal(blocks % 4, 0); /* runs of 4 blocks */
                    assert_int_equal(q.tail, whole.tail);             /* replicated */
                    assert_int_equal(zt_memory_quant_local_bytes(&p, N, s) % 64, 0);
                    local += q.local;
                }
                assert_int_equal(at[0], whole.end[0]);
                assert_int_equal(at[1], whole.end[1]);
                assert_int_equal(local, whole.whole + (size_t)(N - 1) * whole.tail);
            }
        }
}

static void test_bad_inputs(void **state) {
    zt_model *m = small_model();
    zt_engine_options o;
    zt_memory_plan p;
    zt_error err = {0};
    options(&o, ZT_STRATEGY_ZERO3);
    assert_int_equal(zt_memory_plan_compute(m, &o, NULL, 2, 2, &p, &err), ZT_ERR_USAGE);
    assert_non_null(strstr(err.msg, "rank 2 of a world of 2"));
    assert_int_equal(zt_memory_plan_compute(m, &o, NULL, 0, 0, &p, &err), ZT_ERR_USAGE);
    o.T = 33;
    assert_int_equal(zt_memory_plan_compute(m, &o, NULL, 1, 0, &p, &err), ZT_ERR_USAGE);
    assert_non_null(strstr(err.msg, "T=33"));
    options(&o, ZT_STRATEGY_HYBRID);
    o.hybrid_shard_size = 3;
    assert_int_equal(zt_memory_plan_compute(m, &o, NULL, 4, 0, &p, &err), ZT_ERR_USAGE);
    assert_non_null(strstr(err.msg, "does not divide"));
    o.hybrid_shard_size = 2;
    o.hybrid_inner = ZT_STRATEGY_ZERO1;
    assert_int_equal(zt_memory_plan_compute(m, &o, NULL, 4, 0, &p, &err), ZT_ERR_USAGE);
    options(&o, (zt_strategy)9);
    assert_int_equal(zt_memory_plan_compute(m, &o, NULL, 1, 0, &p, &err), ZT_ERR_USAGE);
    options(&o, ZT_STRATEGY_DDP);
    o.bucket_bytes = 0;
    assert_int_equal(zt_memory_plan_compute(m, &o, NULL, 1, 0, &p, &err), ZT_ERR_USAGE);
    options(&o, ZT_STRATEGY_DDP);
    o.activation_checkpointing = (zt_recompute)7;
    assert_int_equal(zt_memory_plan_compute(m, &o, NULL, 1, 0, &p, &err), ZT_ERR_USAGE);
    assert_string_equal(zt_mem_class_name(ZT_MEM_GATHERED), "gathered");
    assert_string_equal(zt_mem_class_name((zt_mem_class)42), "unknown");
    zt_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_precision_table),
        cmocka_unit_test(test_model_states_per_strategy),
        cmocka_unit_test(test_activations_closed_form),
        cmocka_unit_test(test_activations_linear_in_T),
        cmocka_unit_test(test_nvme_staging),
        cmocka_unit_test(test_zero3_gathered_and_prefetch),
        cmocka_unit_test(test_llama_shapes),
        cmocka_unit_test(test_estimate_grid),
        cmocka_unit_test(test_bad_inputs),
        cmocka_unit_test(test_quant_split),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
