/* test_mesh.c - the parallel mesh's record (src/comm/mesh.c, zt_mesh_layout): the rank order
 * (tp innermost, then cp, then dp, then pp; hybrid's replicate x shard inside dp; the engine's dp x cp
 * group's order) checked against a plain
 * model of it over every rank of several meshes, the groups each axis forms, and every bad size
 * refused with the keys and the numbers. Pure arithmetic: no MPI. */
#include "comm/mesh.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

/* Enumerates (pp, dp, cp, tp) in the documented order and checks that rank r lands on those
 * coordinates, that coords/world_rank invert each other, the hybrid sub-axes, and that the dp x cp
 * ranks are numbered cp-major inside a replicate group (every rank of a (pp, tp) point once). */
static void check_order_cp(int world, int tp, int cp, int pp, bool hybrid, int shard) {
    zt_mesh_sizes s = {.tp = tp, .cp = cp, .pp = pp, .hybrid = hybrid, .shard = shard};
    int dp = world / (tp * cp * pp), r = 0;
    for (int p = 0; p < pp; p++)
        for (int d = 0; d < dp; d++)
            for (int c = 0; c < cp; c++)
                for (int t = 0; t < tp; t++, r++) {
                    zt_mesh m;
                    zt_error err = {0};
                    assert_int_equal(zt_mesh_layout(world, r, &s, &m, &err), ZT_OK);
                    assert_int_equal(m.tp, tp);
                    assert_int_equal(m.cp, cp);
                    assert_int_equal(m.pp, pp);
                    assert_int_equal(m.dp, dp);
                    assert_int_equal(m.tp_rank, t);
                    assert_int_equal(m.cp_rank, c);
                    assert_int_equal(m.dp_rank, d);
                    assert_int_equal(m.pp_rank, p);
                    assert_int_equal(zt_mesh_world_rank(&m, t, c, d, p), r);
                    int sh = hybrid ? shard : dp;
                    assert_int_equal(m.shard, sh);
                    assert_int_equal(m.replicate, dp / sh);
                    assert_int_equal(m.shard_rank, d % sh);
                    assert_int_equal(m.replicate_rank, d / sh);
                    assert_int_equal(m.dp_cp, dp * cp);
                    assert_int_equal(m.dp_cp_rank, (d / sh * cp + c) * sh + d % sh);
                    if (!hybrid) assert_int_equal(m.dp_cp_rank, c * dp + d);
                    assert_int_equal(zt_mesh_holds_loss(&m, r), t == 0); /* every stage: auxiliary losses */
                }
}

static void check_order(int world, int tp, int pp, bool hybrid, int shard) {
    check_order_cp(world, tp, 1, pp, hybrid, shard);
}

static void test_context_parallel_order(void **state) {
    (void)state;
    check_order_cp(2, 1, 2, 1, false, 0);
    check_order_cp(4, 1, 2, 1, false, 0);
    check_order_cp(4, 1, 4, 1, false, 0);
    check_order_cp(8, 2, 2, 1, false, 0);
    check_order_cp(8, 1, 2, 2, false, 0);
    check_order_cp(16, 2, 2, 1, true, 2);
    check_order_cp(24, 1, 3, 2, true, 2);
    /* every dp_cp rank of a (pp, tp) point taken once */
    zt_mesh_sizes s = {.tp = 2, .cp = 2, .pp = 1, .hybrid = true, .shard = 2};
    int seen[8] = {0};
    for (int r = 0; r < 16; r++) {
        zt_mesh m;
        zt_error err = {0};
        assert_int_equal(zt_mesh_layout(16, r, &s, &m, &err), ZT_OK);
        if (m.tp_rank == 1) seen[m.dp_cp_rank]++;
    }
    for (int i = 0; i < 8; i++) assert_int_equal(seen[i], 1);
    /* a world the cut does not divide, and a negative size, are named */
    zt_mesh m;
    zt_error err = {0};
    zt_mesh_sizes bad = {.tp = 1, .cp = 3, .pp = 1};
    assert_int_equal(zt_mesh_layout(4, 0, &bad, &m, &err), ZT_ERR_USAGE);
    assert_non_null(strstr(err.msg, "parallel.tensor_parallel_size: 1 x parallel.context_parallel_size 3 x parallel.pipeline_parallel_size 1 = 3 does not divide the world size 4"));
    zt_mesh_sizes neg = {.tp = 1, .cp = -1, .pp = 1};
    assert_int_equal(zt_mesh_layout(4, 0, &neg, &m, &err), ZT_ERR_USAGE);
    assert_non_null(strstr(err.msg, "parallel.context_parallel_size"));
}

static void test_rank_order(void **state) {
    (void)state;
    check_order(1, 1, 1, false, 0);
    check_order(4, 2, 1, false, 0);
    check_order(4, 1, 1, true, 2);
    check_order(8, 2, 1, true, 2);
    check_order(8, 2, 2, false, 0);
    check_order(12, 3, 2, true, 1);
    check_order(16, 2, 2, true, 2);
    /* mesh.h's diagram: world 8, tp 2, hybrid replicate 2 x shard 2; the tp group of rank 5 is
     * {4, 5}, its dp group {1, 3, 5, 7}, its shard group {5, 7}, its replicate group {1, 5} */
    zt_mesh_sizes s = {.tp = 2, .pp = 1, .hybrid = true, .shard = 2};
    zt_mesh m;
    zt_error err = {0};
    assert_int_equal(zt_mesh_layout(8, 5, &s, &m, &err), ZT_OK);
    int tp_group[2], dp_group[4], shard_group[2], rep_group[2], nt = 0, nd = 0, ns = 0, nr = 0;
    for (int r = 0; r < 8; r++) {
        zt_mesh o;
        assert_int_equal(zt_mesh_layout(8, r, &s, &o, &err), ZT_OK);
        if (o.dp_rank == m.dp_rank && o.pp_rank == m.pp_rank) tp_group[nt++] = r;
        if (o.tp_rank == m.tp_rank && o.pp_rank == m.pp_rank) dp_group[nd++] = r;
        if (o.tp_rank == m.tp_rank && o.replicate_rank == m.replicate_rank) shard_group[ns++] = r;
        if (o.tp_rank == m.tp_rank && o.shard_rank == m.shard_rank) rep_group[nr++] = r;
    }
    assert_int_equal(nt, 2);
    assert_int_equal(tp_group[0], 4);
    assert_int_equal(tp_group[1], 5);
    assert_int_equal(nd, 4);
    assert_int_equal(dp_group[0], 1);
    assert_int_equal(dp_group[3], 7);
    assert_int_equal(ns, 2);
    assert_int_equal(shard_group[0], 5);
    assert_int_equal(shard_group[1], 7);
    assert_int_equal(nr, 2);
    assert_int_equal(rep_group[0], 1);
    assert_int_equal(rep_group[1], 5);
    char d[160];
    zt_mesh_describe(&m, d, sizeof d);
    assert_string_equal(d, "tp 2 x dp 4 (replicate 2 x shard 2) x pp 1 on 8 ranks; this rank: tp 1, dp 2, pp 0");
}

static void bad(int world, int tp, int pp, bool hybrid, int shard, const char *want) {
    zt_mesh_sizes s = {.tp = tp, .pp = pp, .hybrid = hybrid, .shard = shard};
    zt_mesh m;
    zt_error err = {0};
    assert_int_equal(zt_mesh_layout(world, 0, &s, &m, &err), ZT_ERR_USAGE);
    if (!strstr(err.msg, want)) fail_msg("got: %s\nwant: %s", err.msg, want);
}

static void test_bad_sizes(void **state) {
    (void)state;
    bad(6, 4, 1, false, 0, "parallel.tensor_parallel_size: 4 x parallel.pipeline_parallel_size 1 = 4 does not "
                           "divide the world size 6");
    bad(8, 2, 3, false, 0, "parallel.tensor_parallel_size: 2 x parallel.pipeline_parallel_size 3 = 6 does not "
                           "divide the world size 8");
    bad(8, 2, 1, true, 3, "parallel.hybrid_shard_size 3 does not divide the data-parallel size 4 (world 8 / "
                          "(parallel.tensor_parallel_size 2 x parallel.pipeline_parallel_size 1))");
    bad(4, 0, 1, false, 0, "parallel.tensor_parallel_size: 0, expected at least 1");
    bad(4, 1, 0, false, 0, "parallel.pipeline_parallel_size: 0, expected at least 1");
    /* one process: the mesh has no comms, and asks for none */
    zt_mesh *m = NULL;
    zt_error err = {0};
    zt_mesh_sizes one = {.tp = 1, .pp = 1};
    assert_int_equal(zt_mesh_create(NULL, &one, &m, &err), ZT_OK);
    assert_null(m->tp_comm);
    assert_null(m->dp_comm);
    assert_int_equal(m->world, 1);
    zt_mesh_free(m);
    zt_mesh_sizes two = {.tp = 2, .pp = 1};
    assert_int_equal(zt_mesh_create(NULL, &two, &m, &err), ZT_ERR_USAGE);
    assert_null(m);
}

/* Expert parallelism: ep groups of ep consecutive dp_cp ranks, expert-data-parallel groups across
 * them; the layout's coordinates against the formulas (ep_rank = dp_cp_rank % ep, edp_rank =
 * dp_cp_rank / ep), with context parallelism in the dp_cp order too; ep not dividing dp x cp */
static void test_expert_parallel_order(void **state) {
    (void)state;
    const struct { int world, tp, cp, ep; } cases[] = {{2, 1, 1, 2}, {4, 1, 1, 2}, {4, 1, 1, 4}, {8, 2, 1, 2},
                                                        {8, 1, 2, 4}, {12, 1, 1, 3}};
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        zt_mesh_sizes s = {.tp = cases[k].tp, .cp = cases[k].cp, .pp = 1, .ep = cases[k].ep};
        for (int r = 0; r < cases[k].world; r++) {
            zt_mesh m;
            zt_error err = {0};
            assert_int_equal(zt_mesh_layout(cases[k].world, r, &s, &m, &err), ZT_OK);
            assert_int_equal(m.ep, cases[k].ep);
            assert_int_equal(m.edp, m.dp_cp / cases[k].ep);
            assert_int_equal(m.ep_rank, m.dp_cp_rank % cases[k].ep);
            assert_int_equal(m.edp_rank, m.dp_cp_rank / cases[k].ep);
        }
    }
    zt_mesh m;
    zt_error err = {0};
    zt_mesh_sizes s = {.tp = 2, .pp = 1, .ep = 3};
    assert_int_equal(zt_mesh_layout(8, 0, &s, &m, &err), ZT_ERR_USAGE);
    assert_non_null(strstr(err.msg, "parallel.expert_parallel_size 3 does not divide the data-parallel ranks 4"));
    zt_mesh_sizes one = {.tp = 1, .pp = 1};
    assert_int_equal(zt_mesh_layout(4, 1, &one, &m, &err), ZT_OK);
    assert_int_equal(m.ep, 1);
    assert_int_equal(m.edp, 4);
}

/* Hybrid with expert parallelism (comm/mesh.h): the edp ranks of one shard group (edp_shard) and
 * those of the same index in the other shard groups (edp_replicate), against a plain model of them:
 * every rank's group members found by scanning the world (same ep_rank, same shard group; same
 * ep_rank, same index in the edp_shard group), their count and this rank's place among them in
 * dp_cp order; a shard group neither a multiple nor a divisor of ep has none (edp_shard 0). */
static void test_hybrid_expert_groups(void **state) {
    (void)state;
    const struct { int world, cp, shard, ep, es; } cases[] = {{8, 1, 4, 2, 2}, {8, 1, 2, 4, 1}, {4, 1, 2, 2, 1},
                                                              {8, 1, 2, 2, 1}, {8, 2, 2, 2, 2}, {16, 1, 8, 2, 4},
                                                              {4, 1, 4, 2, 2}};
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        zt_mesh_sizes s = {.tp = 1, .cp = cases[k].cp, .pp = 1, .hybrid = true, .shard = cases[k].shard,
                           .ep = cases[k].ep};
        int W = cases[k].world, S = cases[k].shard * cases[k].cp;
        zt_mesh all[16];
        zt_error err = {0};
        for (int r = 0; r < W; r++) assert_int_equal(zt_mesh_layout(W, r, &s, &all[r], &err), ZT_OK);
        for (int r = 0; r < W; r++) {
            const zt_mesh *m = &all[r];
            assert_int_equal(m->edp_shard, cases[k].es);
            int n_shard = 0, at_shard = -1;
            for (int q = 0; q < W; q++) /* in dp_cp order: scan by dp_cp rank */
                for (int x = 0; x < W; x++)
                    if (all[x].dp_cp_rank == q && all[x].ep_rank == m->ep_rank && q / S == m->dp_cp_rank / S) {
                        if (x == r) at_shard = n_shard;
                        n_shard++;
                    }
            assert_int_equal(n_shard, m->edp_shard);
            assert_int_equal(at_shard, m->edp_shard_rank);
            int n_rep = 0, at_rep = -1;
            for (int q = 0; q < W; q++)
                for (int x = 0; x < W; x++)
                    if (all[x].dp_cp_rank == q && all[x].ep_rank == m->ep_rank &&
                        all[x].edp_shard_rank == m->edp_shard_rank) {
                        if (x == r) at_rep = n_rep;
                        n_rep++;
                    }
            assert_int_equal(n_rep, m->edp_replicate);
            assert_int_equal(at_rep, m->edp_replicate_rank);
            assert_int_equal(m->edp_shard * m->edp_replicate, m->edp);
        }
    }
    zt_mesh m;
    zt_error err = {0};
    zt_mesh_sizes apart = {.tp = 1, .pp = 1, .hybrid = true, .shard = 6, .ep = 4};
    assert_int_equal(zt_mesh_layout(12, 5, &apart, &m, &err), ZT_OK);
    assert_int_equal(m.edp_shard, 0);
    assert_int_equal(zt_mesh_edp_shard_size(6, 4), 0);
    zt_mesh_sizes flat = {.tp = 1, .pp = 1, .ep = 2};
    assert_int_equal(zt_mesh_layout(8, 5, &flat, &m, &err), ZT_OK);
    assert_int_equal(m.edp_shard, m.edp);
    assert_int_equal(m.edp_shard_rank, m.edp_rank);
    assert_int_equal(m.edp_replicate, 1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rank_order),
        cmocka_unit_test(test_context_parallel_order),
        cmocka_unit_test(test_bad_sizes),
        cmocka_unit_test(test_expert_parallel_order),
        cmocka_unit_test(test_hybrid_expert_groups),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
