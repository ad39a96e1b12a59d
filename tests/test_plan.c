/* test_plan.c - the per-parameter dim-0 shard plan: pieces tile every parameter exactly, every
 * shard starts on a norm-chunk boundary, and on GPT-2 124M the fp32-Adam model states a rank
 * holds under zero3 (parameters + gradients + two moments = 16 bytes per element it owns) are
 * 16·Ψ/N within 1% for N = 2, 4, 8 (the granule of rows that keeps shards chunk-aligned costs a
 * little balance). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "shard/plan.h"

#include <math.h>
#include <stdlib.h>

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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pieces_tile_and_align),
        cmocka_unit_test(test_zero3_states_are_16_psi_over_n),
        cmocka_unit_test(test_plan_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
