/* test_plan.c - the per-parameter dim-0 shard plan: pieces tile every parameter exactly, every
 * shard starts on a norm-chunk boundary, and on GPT-2 124M the fp32-Adam model states a rank
 * holds under zero3 (parameters + gradients + two moments = 16 bytes per element it owns) are
 * 16·Ψ/N within 1% for N = 2, 4, 8 (the granule of rows that keeps shards chunk-aligned costs a
 * little balance); norm blocks (a mixture's stacked experts) restart the chunks at each block and
 * give each block's partial sums the same bits however the parameter is sharded; and shard groups:
 * a parameter in the expert-data-parallel group is sharded over that group's ranks; the experts
 * stored E/ep a rank, alone and under tensor parallelism (a second cut). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "shard/plan.h"
#include "shard/tp.h"
#include "memory/plan.h"
#include "optim/optim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void test_pieces_tile_and_align(void **state) {
    zt_error err = {0};
    zt_gpt2_config c = {.max_seq_len = 40, .vocab_size = 101, .n_layer = 2, .n_head = 2, .n_embd = 24};
    zt_model *m;
    assert_int_equal(zt_gpt2_create(&c, &m, &err), ZT_OK);
    for (int N = 1; N <= 7; N++) {
        zt_plan pl;
        assert_int_equal(zt_plan_create(m, N, N - 1, &pl, &err), ZT_OK);
        int64_t chunks = 0;
        for (int i = 0; i < m->n_params; i++) {
            int64_t covered = 0, prev_end = 0;
            for (int s = 0; s < N; s++) {
                int64_t b = zt_plan_shard_begin(&pl, i, s), n = zt_plan_shard_numel(&pl, i, s);
                assert_int_equal(b, prev_end); /* contiguous, in order */
                if (n) assert_int_equal(b % ZT_NORM_CHUNK, 0);
                int64_t first, count;
                zt_plan_norm_chunks(&pl, i, s, &first, &count);
                if (n) assert_int_equal(first, chunks + b / ZT_NORM_CHUNK);
                covered += n;
                prev_end = b + n;
            }
            assert_int_equal(covered, m->params[i].numel);
            chunks += (m->params[i].numel + ZT_NORM_CHUNK - 1) / ZT_NORM_CHUNK;
        }
        assert_int_equal(chunks, pl.norm_chunks);
        zt_plan_free(&pl);
    }
    zt_model_free(m);
}

static void test_zero3_states_are_16_psi_over_n(void **state) {
    zt_error err = {0};
    zt_gpt2_config c;
    assert_int_equal(zt_gpt2_preset("gpt2-124M", &c, &err), ZT_OK);
    zt_model *m;
    assert_int_equal(zt_gpt2_create(&c, &m, &err), ZT_OK);
    double psi = (double)zt_model_numel(m);
    for (int N = 2; N <= 8; N *= 2) {
        for (int r = 0; r < N; r++) {
            zt_plan pl;
            assert_int_equal(zt_plan_create(m, N, r, &pl, &err), ZT_OK);
            double states = 16.0 * (double)pl.shard_floats; /* the engine's four shard-layout buffers */
            double want = 16.0 * psi / N;
            if (fabs(states - want) > 0.01 * want)
                fail_msg("N=%d rank %d: %.0f bytes of model states, 16*psi/N = %.0f", N, r, states, want);
            zt_plan_free(&pl);
        }
    }
    zt_model_free(m);
}

static void test_plan_errors(void **state) {
    zt_error err = {0};
    zt_gpt2_config c = {.max_seq_len = 8, .vocab_size = 10, .n_layer = 1, .n_head = 1, .n_embd = 4};
    zt_model *m;
    assert_int_equal(zt_gpt2_create(&c, &m, &err), ZT_OK);
    zt_plan pl;
    assert_int_equal(zt_plan_create(m, 2, 2, &pl, &err), ZT_ERR_USAGE);
    assert_int_equal(zt_plan_create(m, 0, 0, &pl, &err), ZT_ERR_USAGE);
    zt_model_free(m);
}

/* A model of three parameters: a dense (10, 48), stacked experts (4 blocks of rb rows of len:
 * 24 x 40, an expert's 960 elements less than a chunk, so chunks straddle experts without blocks;
 * 40 x 64, an expert 2.5 chunks, so shards split an expert on its chunk boundaries), and a dense
 * (3, 7). */
static zt_model *shaped_model(int blocks, int expert_group, int64_t rb, int64_t len) {
    zt_error err = {0};
    zt_model *m;
    assert_int_equal(zt_model_create("blocked", &m, &err), ZT_OK);
    int idx[3];
    int64_t a[2] = {10, 48}, b[2] = {4 * rb, len}, c[2] = {3, 7};
    assert_int_equal(zt_model_add_param(m, "a", 2, a, ZT_INIT_NORMAL, 0.02f, true, &idx[0], &err), ZT_OK);
    assert_int_equal(zt_model_add_param(m, "experts", 2, b, ZT_INIT_NORMAL, 0.02f, true, &idx[1], &err), ZT_OK);
    assert_int_equal(zt_model_add_param(m, "c", 2, c, ZT_INIT_NORMAL, 0.02f, true, &idx[2], &err), ZT_OK);
    m->params[idx[1]].norm_blocks = blocks;
    m->params[idx[1]].shard_group = (uint8_t)expert_group;
    return m;
}
static zt_model *blocked_model(int blocks, int expert_group) { return shaped_model(blocks, expert_group, 24, 40); }

/* The chunk partials of every shard's piece (each run apart), the whole array as one process sums it */
static void piece_partials(const zt_plan *pl, int i, int s, const float *full, double *out) {
    int64_t at, n, chunk, begin = zt_plan_shard_begin(pl, i, s);
    for (int k = 0; zt_plan_piece_run(pl, i, s, k, &at, &n, &chunk); k++)
        zt_chunk_sum_squares(full + begin + at, n, ZT_NORM_CHUNK, out + chunk);
}

static void check_norm_blocks(int64_t rb, int64_t len) {
    zt_error err = {0};
    zt_model *m = shaped_model(4, ZT_SHARD_GROUP_DP, rb, len);
    const int E = 1; /* the experts' parameter */
    int64_t numel = m->params[E].numel, per_block = numel / 4;
    float *g = malloc((size_t)numel * sizeof *g);
    for (int64_t k = 0; k < numel; k++) g[k] = (float)((k * 7919) % 1000) / 997.0f - 0.4f;
    zt_plan one;
    assert_int_equal(zt_plan_create(m, 1, 0, &one, &err), ZT_OK);
    /* each block its own chunks, the last one short */
    int64_t cpb = (per_block + ZT_NORM_CHUNK - 1) / ZT_NORM_CHUNK;
    assert_int_equal(zt_plan_param_chunks(&one, E), 4 * cpb);
    assert_int_equal(zt_plan_desc_chunks(&m->params[E]), 4 * cpb);
    int64_t total = one.norm_chunks;
    double *want = calloc((size_t)total, sizeof *want), *got = calloc((size_t)total, sizeof *got);
    piece_partials(&one, E, 0, g, want);
    for (int b = 0; b < 4; b++) { /* block b's partial is its own elements' */
        int64_t first, count;
        zt_plan_norm_chunks(&one, E, 0, &first, &count);
        double s[4] = {0};
        zt_chunk_sum_squares(g + b * per_block, per_block, ZT_NORM_CHUNK, s);
        for (int64_t k = 0; k < cpb; k++) assert_true(want[first + b * cpb + k] == s[k]);
    }
    int split = 0; /* pieces that begin inside an expert */
    for (int N = 2; N <= 7; N++) {
        zt_plan pl;
        assert_int_equal(zt_plan_create(m, N, 0, &pl, &err), ZT_OK);
        assert_int_equal(pl.norm_chunks, total);
        memset(got, 0, (size_t)total * sizeof *got);
        int64_t prev = 0, next_chunk = -1;
        for (int s = 0; s < N; s++) {
            int64_t b = zt_plan_shard_begin(&pl, E, s), n = zt_plan_shard_numel(&pl, E, s), first, count;
            assert_int_equal(b, prev);
            if (n) assert_int_equal(b % per_block % ZT_NORM_CHUNK, 0); /* on a chunk boundary of its block */
            if (n && b % per_block) split++;
            zt_plan_norm_chunks(&pl, E, s, &first, &count);
            if (n && next_chunk >= 0) assert_int_equal(first, next_chunk); /* the shards' chunks follow on */
            if (n) next_chunk = first + count;
            int64_t covered = 0, at, run, chunk;
            for (int k = 0; zt_plan_piece_run(&pl, E, s, k, &at, &run, &chunk); k++) {
                assert_int_equal(at, covered);
                assert_true(chunk >= first && chunk < first + count);
                covered += run;
            }
            assert_int_equal(covered, n);
            piece_partials(&pl, E, s, g, got);
            prev = b + n;
        }
        assert_int_equal(prev, numel);
        for (int64_t c = 0; c < total; c++) assert_true(got[c] == want[c]); /* the same bits */
        zt_plan_free(&pl);
    }
    zt_plan_free(&one);
    free(want);
    free(got);
    free(g);
    zt_model_free(m);
    if (per_block > ZT_NORM_CHUNK) assert_true(split > 0); /* the case of a piece starting mid-expert was seen */
}

static void test_norm_blocks(void **state) {
    zt_error err = {0};
    check_norm_blocks(24, 40); /* an expert smaller than a chunk: pieces of whole experts */
    check_norm_blocks(40, 64); /* 2.5 chunks an expert: pieces split experts */
    zt_model *m = blocked_model(5, ZT_SHARD_GROUP_DP); /* blocks that do not divide dim 0 */
    zt_plan pl;
    assert_int_equal(zt_plan_create(m, 2, 0, &pl, &err), ZT_ERR_USAGE);
    assert_non_null(strstr(err.msg, "experts: 5 norm blocks do not divide its 96 rows"));
    zt_model_free(m);
}

static void test_shard_groups(void **state) {
    zt_error err = {0};
    zt_model *m = blocked_model(4, ZT_SHARD_GROUP_EDP);
    /* 4 data-parallel ranks, ep 2: the experts over 2 expert-data-parallel ranks */
    for (int dp_rank = 0; dp_rank < 4; dp_rank++) {
        zt_plan_group groups[ZT_SHARD_GROUP_COUNT] = {{4, dp_rank}, {2, dp_rank / 2}};
        zt_plan pl;
        assert_int_equal(zt_plan_create_groups(m, groups, &pl, &err), ZT_OK);
        assert_int_equal(pl.nshards, 4);
        assert_int_equal(pl.shard, dp_rank);
        assert_int_equal(pl.p[0].nshards, 4);
        assert_int_equal(pl.p[1].nshards, 2);
        assert_int_equal(pl.p[1].shard, dp_rank / 2);
        assert_int_equal(pl.p[1].group, ZT_SHARD_GROUP_EDP);
        /* the experts' two pieces: whole experts (a block's one chunk is not split) */
        assert_int_equal(zt_plan_shard_numel(&pl, 1, 0), 2 * 960);
        assert_int_equal(zt_plan_shard_numel(&pl, 1, 1), 2 * 960);
        size_t want = 0;
        for (int i = 0; i < 3; i++) {
            size_t n = (size_t)zt_plan_shard_numel(&pl, i, pl.p[i].shard);
            want += (n + 15) / 16 * 16;
        }
        assert_int_equal(pl.shard_floats, want);
        assert_int_equal(pl.gshard_floats, want);
        zt_plan_free(&pl);
    }
    zt_plan_group bad[ZT_SHARD_GROUP_COUNT] = {{4, 3}, {2, 2}};
    zt_plan pl;
    assert_int_equal(zt_plan_create_groups(m, bad, &pl, &err), ZT_ERR_USAGE);
    assert_non_null(strstr(err.msg, "shard 2 of 2 in the expert-data-parallel group"));
    m->params[1].shard_group = 7;
    assert_int_equal(zt_plan_create(m, 2, 0, &pl, &err), ZT_ERR_USAGE);
    assert_non_null(strstr(err.msg, "parameter experts names shard group 7"));
    zt_model_free(m);
}

/* llama-tiny-moe (vocabulary 256) twice: m to store the experts of, ref to hold it against */
static void tiny_moe_pair(zt_llama_config *c, zt_model **m, zt_model **ref) {
    zt_error err = {0};
    assert_int_equal(zt_llama_preset("llama-tiny-moe", c, &err), ZT_OK);
    c->vocab_size = 256;
    assert_int_equal(zt_llama_create(c, m, &err), ZT_OK);
    assert_int_equal(zt_llama_create(c, ref, &err), ZT_OK);
}

/* m with its experts stored (ep 2): a second store is refused, and zt_model_whole_experts gives
 * ref's parameter table back; frees both */
static void whole_again(zt_model *m, zt_model *ref) {
    zt_error err = {0};
    assert_int_equal(zt_model_store_experts(m, 2, 0, &err), ZT_ERR_USAGE);
    assert_non_null(strstr(err.msg, "stored already"));
    zt_model_whole_experts(m);
    assert_false(zt_model_experts_local(m));
    for (int i = 0; i < m->n_params; i++) assert_memory_equal(&m->params[i], &ref->params[i], sizeof m->params[i]);
    zt_model_free(m);
    zt_model_free(ref);
}

/* a part's logical index of each local element (zt_tp_runs) */
static int index_run(void *ctx, int64_t local, int64_t logical, int64_t len) {
    int64_t *at = ctx;
    for (int64_t k = 0; k < len; k++) at[local + k] = logical + k;
    return 0;
}

/* llama-tiny-moe in *m and *ref, cut by tp (parts tp, part tp - 1; 1: not cut), and *m's experts
 * stored as ep part 1 of 2 (refused before zt_model_set_expert_parallel): each expert tensor keeps
 * its tp cut and holds the second half of its tp part's elements (the part's experts 2 and 3,
 * contiguous there), the same logical elements in the same order (zt_tp_runs); the dense
 * parameters as they were */
static void store_part_1(int tp, zt_llama_config *c, zt_model **mp, zt_model **refp) {
    zt_error err = {0};
    tiny_moe_pair(c, mp, refp);
    zt_model *m = *mp, *ref = *refp;
    assert_int_equal(zt_tp_apply(m, tp, tp - 1, &err), ZT_OK);
    assert_int_equal(zt_tp_apply(ref, tp, tp - 1, &err), ZT_OK);
    assert_int_equal(zt_model_store_experts(m, 2, 1, &err), ZT_ERR_USAGE); /* ep not set first */
    assert_non_null(strstr(err.msg, "experts stored as part 1 of 2, but its experts are spread over 1 part"));
    assert_int_equal(zt_model_set_expert_parallel(m, 2, &err), ZT_OK);
    assert_int_equal(zt_model_store_experts(m, 2, 1, &err), ZT_OK);
    assert_true(zt_model_experts_local(m));
    int cut = 0;
    for (int i = 0; i < m->n_params; i++) {
        const zt_param_desc *p = &m->params[i], *q = &ref->params[i];
        if (q->norm_blocks != c->n_experts) {
            assert_int_equal(p->numel, q->numel);
            assert_int_equal(p->shard_group, ZT_SHARD_GROUP_DP);
            assert_false(zt_param_experts_stored(p));
            continue;
        }
        cut++;
        assert_true(zt_param_experts_stored(p));
        assert_int_equal(zt_param_expert_parts(p), 2);
        assert_int_equal(p->shape[0], q->shape[0] / 2);
        assert_int_equal(p->numel, q->numel / 2);
        assert_int_equal(p->logical_numel, q->logical_numel);
        assert_int_equal(p->ep_parts, 2);
        assert_int_equal(p->ep_part, 1);
        assert_int_equal(p->tp_parts, q->tp_parts);
        assert_int_equal(p->tp_part, q->tp_part);
        assert_int_equal(p->tp_dim, q->tp_dim);
        assert_int_equal(p->shard_group, ZT_SHARD_GROUP_EDP);
        assert_int_equal(p->norm_blocks, c->n_experts / 2);
        assert_int_equal(zt_tp_part_numel(p, 0), p->numel);
        int64_t *whole = malloc((size_t)q->numel * sizeof *whole), *mine = malloc((size_t)p->numel * sizeof *mine);
        assert_non_null(whole);
        assert_non_null(mine);
        assert_int_equal(zt_tp_runs(q, q->tp_part, 0, q->numel, index_run, whole), 0);
        assert_int_equal(zt_tp_runs(p, p->tp_part, 0, p->numel, index_run, mine), 0);
        assert_memory_equal(mine, whole + p->numel, (size_t)p->numel * sizeof *mine);
        free(whole);
        free(mine);
    }
    assert_int_equal(cut, 3 * c->n_layer); /* w1, w2, w3 of every block */
}

/* The experts stored E/ep a rank (zt_model_store_experts, store_part_1): part 1 of 2 of
 * llama-tiny-moe keeps 2 of its 4 experts, the plan gives each expert tensor ep slots of gradient
 * after the gradient layout, and zt_model_whole_experts gives the model back as it was */
static void test_stored_experts(void **state) {
    zt_error err = {0};
    zt_llama_config c;
    zt_model *m, *ref;
    store_part_1(1, &c, &m, &ref);
    zt_plan pl;
    assert_int_equal(zt_plan_create(m, 1, 0, &pl, &err), ZT_OK);
    size_t slots = 0;
    for (int i = 0; i < m->n_params; i++) {
        bool expert = zt_param_experts_stored(&m->params[i]);
        assert_int_equal(pl.p[i].gnumel, expert ? 2 * m->params[i].numel : m->params[i].numel);
        if (!expert) continue;
        assert_int_equal(pl.p[i].gslot, slots); /* in table order, after the gradient layout */
        assert_true(zt_plan_gslot_off(&pl, i) >= pl.gfull_floats);
        slots += ((size_t)m->params[i].numel + 15) / 16 * 16;
    }
    assert_int_equal(pl.gslot_floats, slots);
    assert_int_equal(pl.gbuf_floats, pl.gfull_floats + slots);
    zt_plan_free(&pl);
    /* hybrid (memory/experts.c): the experts shard over the edp ranks of a shard group: 8 ranks, ep
     * 2, shard groups of 4 hold 2 of them (rank r's index r / 2 % 2), of 2 one (each a whole part);
     * a shard group of 3 is neither a multiple nor a divisor of ep: kept whole, named */
    zt_engine_options o;
    zt_engine_options_default(&o);
    o.strategy = ZT_STRATEGY_HYBRID;
    zt_plan_group g[ZT_SHARD_GROUP_COUNT];
    for (int r = 0; r < 8; r++) {
        zt_memory_plan_groups(m, &o, 8, r, 4, r % 4, g);
        assert_int_equal(g[ZT_SHARD_GROUP_DP].nshards, 4);
        assert_int_equal(g[ZT_SHARD_GROUP_EDP].nshards, 2);
        assert_int_equal(g[ZT_SHARD_GROUP_EDP].shard, r / 2 % 2);
        zt_memory_plan_groups(m, &o, 8, r, 2, r % 2, g);
        assert_int_equal(g[ZT_SHARD_GROUP_EDP].nshards, 1);
    }
    o.hybrid_shard_size = 4;
    assert_null(zt_memory_experts_whole_reason(m, &o));
    o.hybrid_shard_size = 3;
    const char *why = zt_memory_experts_whole_reason(m, &o);
    assert_true(why && strstr(why, "neither a multiple nor a divisor"));
    /* every optimizer but 1-bit Adam stores them (Muon and LAMB: step_whole.c over the ep parts) */
    o.strategy = ZT_STRATEGY_ZERO3;
    o.offload.param_dir = "/nonexistent";
    for (int k = ZT_OPT_ADAMW; k <= ZT_OPT_ONEBIT_ADAM; k++) {
        o.optim.kind = (zt_optimizer_kind)k;
        why = zt_memory_experts_whole_reason(m, &o);
        if (k == ZT_OPT_ONEBIT_ADAM) assert_true(why && strstr(why, "1-bit Adam"));
        else assert_null(why);
    }
    whole_again(m, ref);
}

/* The experts stored E/ep a rank under tensor parallelism (store_part_1 of tp 2's part 1): the ep
 * cut outside tp's; the plan's gradient is the tp part's E experts (ep slots); zt_model_whole_experts
 * gives the tp-cut model back as it was */
static void test_stored_experts_tp(void **state) {
    zt_error err = {0};
    zt_llama_config c;
    zt_model *m, *ref;
    store_part_1(2, &c, &m, &ref);
    zt_plan pl;
    assert_int_equal(zt_plan_create(m, 1, 0, &pl, &err), ZT_OK);
    for (int i = 0; i < m->n_params; i++)
        assert_int_equal(pl.p[i].gnumel, ref->params[i].numel); /* the tp part's E experts: ep slots */
    zt_plan_free(&pl);
    whole_again(m, ref);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pieces_tile_and_align),
        cmocka_unit_test(test_zero3_states_are_16_psi_over_n),
        cmocka_unit_test(test_plan_errors),
        cmocka_unit_test(test_norm_blocks),
        cmocka_unit_test(test_shard_groups),
        cmocka_unit_test(test_stored_experts),
        cmocka_unit_test(test_stored_experts_tp),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
