/* test_scale.c - src/scale/: the scale model's formulas against hand-computed values. Bandwidth
 * and latency parsing (and every malformed form), the alpha-beta cost of ring, tree and pairwise
 * collectives on one node and across nodes, group shapes for hybrid's shard and replica groups,
 * the two-stream step schedule (a timeline worked by hand), the compute model's FLOPs against
 * the 6N + attention formula, and the bytes between hosts per step against docs/multihost.md's
 * formulas (which bench/RESULTS.md measured on the interface counters), with memory equal to the
 * estimator's column; tensor parallelism (the compute of a cut model, the tp bytes against the
 * engine's formula, memory equal to estimate-memory --tp's) and pipeline stages (the cut, the
 * bubble, the step's parts, a stage's memory under 1F1B and GPipe); context parallelism's
 * allgather and ulysses exchanges pipelined over head groups (the attention hides all but one
 * group's share, or (G-1)/G of itself); expert parallelism's all-to-all bytes per precision and
 * the experts' reduction over the expert-data-parallel ranks. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "memory/estimate.h"
#include "memory/shapes.h"
#include "scale/predict.h"
#include "scale/units.h"
#include "scale/tp_comm.h"
#include "scale/cp_comm.h"
#include "shard/tp.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define CLOSE(a, b) assert_true(fabs((a) - (b)) <= 1e-9 * fabs(b) + 1e-15)

static void test_bandwidth(void **state) {
    (void)state;
    static const struct { const char *text; double bytes; } ok[] = {
        {"900GB/s", 900e9}, {"400Gb/s", 50e9}, {"400Gbps", 50e9}, {"1gbit", 1.25e8}, {"100mbit", 12.5e6},
        {"12.5GiB/s", 12.5 * 1073741824.0}, {"2 GB/s", 2e9}, {"1.5e9B/s", 1.5e9}, {"25GB", 25e9},
        {"10kbit/s", 1250}, {"3TB/s", 3e12}, {"8Mib/s", 1048576.0}};
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
        double b = 0;
        zt_error err = {0};
        assert_int_equal(zt_scale_parse_bandwidth("--inter", ok[i].text, &b, &err), ZT_OK);
        CLOSE(b, ok[i].bytes);
    }
    static const char *bad[] = {"900", "900GB/x", "-5GB/s", "GB/s", "", "abc", "0GB/s", "1Gb/s/s", "5 GHz", "1e999GB/s"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        double b = 0;
        zt_error err = {0};
        assert_int_equal(zt_scale_parse_bandwidth("--inter", bad[i], &b, &err), ZT_ERR_USAGE);
        assert_non_null(strstr(err.msg, "--inter"));
    }
    double b;
    zt_error err = {0};
    assert_int_equal(zt_scale_parse_bandwidth("--intra", NULL, &b, &err), ZT_ERR_USAGE);
}

static void test_latency(void **state) {
    (void)state;
    double s = -1;
    zt_error err = {0};
    assert_int_equal(zt_scale_parse_latency("--inter-latency", "5us", &s, &err), ZT_OK);
    CLOSE(s, 5e-6);
    assert_int_equal(zt_scale_parse_latency("--inter-latency", "1.5ms", &s, &err), ZT_OK);
    CLOSE(s, 1.5e-3);
    assert_int_equal(zt_scale_parse_latency("--inter-latency", "0s", &s, &err), ZT_OK);
    assert_true(s == 0);
    assert_int_equal(zt_scale_parse_latency("--inter-latency", "20ns", &s, &err), ZT_OK);
    CLOSE(s, 20e-9);
    static const char *bad[] = {"5", "5 sec", "us", "-1us", "5mus"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        assert_int_equal(zt_scale_parse_latency("--intra-latency", bad[i], &s, &err), ZT_ERR_USAGE);
        assert_non_null(strstr(err.msg, "--intra-latency"));
    }
}

static zt_scale_net dgx(void) {
    return (zt_scale_net){.per_node = 8, .intra_bw = 450e9, .intra_lat = 2e-6, .nic_bw = 50e9, .inter_lat = 5e-6,
                          .nics = 8, .algo = ZT_SCALE_RING};
}

static void test_ring_one_node(void **state) {
    (void)state;
    zt_scale_net net = dgx();
    net.intra_bw = 100e9, net.intra_lat = 1e-6;
    zt_scale_group g = zt_scale_group_of(&net, 8, 1);
    assert_int_equal(g.local, 8);
    assert_int_equal(g.nodes, 1);
    double S = 8e9;
    zt_scale_cost ag = zt_scale_collective(&net, g, ZT_SCALE_ALL_GATHER, S);
    CLOSE(ag.seconds, 7 * 1e-6 + S * 7.0 / 8.0 / 100e9);
    assert_true(ag.node_out_bytes == 0);
    zt_scale_cost rs = zt_scale_collective(&net, g, ZT_SCALE_REDUCE_SCATTER, S);
    CLOSE(rs.seconds, ag.seconds);
    zt_scale_cost ar = zt_scale_collective(&net, g, ZT_SCALE_ALL_REDUCE, S);
    CLOSE(ar.seconds, 2 * ag.seconds); /* no tree inside a node */
    assert_false(ar.tree);
    /* a group of one costs nothing */
    zt_scale_cost one = zt_scale_collective(&net, zt_scale_group_of(&net, 1, 1), ZT_SCALE_ALL_REDUCE, S);
    assert_true(one.seconds == 0);
}

static void test_ring_across_nodes(void **state) {
    (void)state;
    zt_scale_net net = dgx();
    zt_scale_group g = zt_scale_group_of(&net, 16, 1); /* 2 nodes x 8 */
    assert_int_equal(g.local, 8);
    assert_int_equal(g.nodes, 2);
    assert_int_equal(g.concurrent, 1);
    double S = 16e9;
    zt_scale_cost ag = zt_scale_collective(&net, g, ZT_SCALE_ALL_GATHER, S);
    /* the node's 8 NICs (400 GB/s) are slower than NVLink (450 GB/s): they set the pace */
    CLOSE(ag.seconds, 15 * 5e-6 + S * 15.0 / 16.0 / 400e9);
    CLOSE(ag.node_out_bytes, S * 15.0 / 16.0);
    /* with one NIC per node the inter-node link dominates 8x more */
    net.nics = 1;
    zt_scale_cost ag1 = zt_scale_collective(&net, g, ZT_SCALE_ALL_GATHER, S);
    CLOSE(ag1.seconds, 15 * 5e-6 + S * 15.0 / 16.0 / 50e9);
}

static void test_tree_or_ring(void **state) {
    (void)state;
    zt_scale_net net = dgx();
    zt_scale_group g = zt_scale_group_of(&net, 8 * 64, 1);
    /* small: 511 ring steps of 5 us lose to the tree's 2(7 x 2 us + 6 x 5 us) */
    zt_scale_cost small = zt_scale_collective(&net, g, ZT_SCALE_ALL_REDUCE, 1e6);
    assert_true(small.tree);
    CLOSE(small.seconds, 2.0 * (7 * 2e-6 + 6 * 5e-6) + 2.0 * 1e6 / 400e9);
    /* large: both move about twice the data over the node's NICs; the cheaper formula is taken */
    double S = 1e10, p = 512;
    double ring = 2 * (511 * 5e-6 + S * (p - 1) / p / 400e9), tree = 2.0 * (7 * 2e-6 + 6 * 5e-6) + 2.0 * S / 400e9;
    zt_scale_cost big = zt_scale_collective(&net, g, ZT_SCALE_ALL_REDUCE, S);
    CLOSE(big.seconds, ring < tree ? ring : tree);
    assert_true(big.tree == (tree < ring));
    /* pairwise (zerotrain) never takes a tree */
    net.algo = ZT_SCALE_PAIRWISE;
    assert_false(zt_scale_collective(&net, g, ZT_SCALE_ALL_REDUCE, 1e6).tree);
}

static void test_pairwise(void **state) {
    (void)state;
    /* the namespace hosts: 2 hosts x 2 ranks, one link per host */
    zt_scale_net net = {.per_node = 2, .intra_bw = 1e9, .intra_lat = 0, .nic_bw = 1e8, .inter_lat = 0, .nics = 1,
                        .algo = ZT_SCALE_PAIRWISE};
    zt_scale_group w = zt_scale_group_of(&net, 4, 1);
    double S = 4e8;
    zt_scale_cost ag = zt_scale_collective(&net, w, ZT_SCALE_ALL_GATHER, S);
    /* each of the host's 2 ranks sends its S/4 piece to the 2 ranks of the other host: S */
    CLOSE(ag.node_out_bytes, S);
    CLOSE(ag.seconds, S / 1e8);
    /* a ring would send (p-1)/p S = 3/4 S */
    net.algo = ZT_SCALE_RING;
    CLOSE(zt_scale_collective(&net, w, ZT_SCALE_ALL_GATHER, S).node_out_bytes, 0.75 * S);
    net.algo = ZT_SCALE_PAIRWISE;
    /* hybrid's replicas: ranks 2 apart, one per host, both pairs of a host at once */
    zt_scale_group r = zt_scale_group_of(&net, 2, 2);
    assert_int_equal(r.local, 1);
    assert_int_equal(r.nodes, 2);
    assert_int_equal(r.concurrent, 2);
    double piece = S / 2;
    zt_scale_cost ar = zt_scale_collective(&net, r, ZT_SCALE_ALL_REDUCE, piece);
    CLOSE(ar.node_out_bytes, 2.0 * piece);         /* 2 passes x 1/2 piece x 2 pairs */
    CLOSE(ar.seconds, 2.0 * (piece / 2) / (1e8 / 2)); /* each pair gets half the link */
}

static void test_group_shapes(void **state) {
    (void)state;
    zt_scale_net net = dgx();
    zt_scale_group s8 = zt_scale_group_of(&net, 8, 1), r8 = zt_scale_group_of(&net, 64, 8);
    assert_int_equal(s8.local, 8), assert_int_equal(s8.nodes, 1), assert_int_equal(s8.concurrent, 1);
    assert_int_equal(r8.local, 1), assert_int_equal(r8.nodes, 64), assert_int_equal(r8.concurrent, 8);
    zt_scale_group s4 = zt_scale_group_of(&net, 4, 1), r4 = zt_scale_group_of(&net, 128, 4);
    assert_int_equal(s4.local, 4), assert_int_equal(s4.nodes, 1), assert_int_equal(s4.concurrent, 2);
    assert_int_equal(r4.local, 2), assert_int_equal(r4.nodes, 64), assert_int_equal(r4.concurrent, 4);
    zt_scale_group s32 = zt_scale_group_of(&net, 32, 1), r32 = zt_scale_group_of(&net, 16, 32);
    assert_int_equal(s32.local, 8), assert_int_equal(s32.nodes, 4), assert_int_equal(s32.concurrent, 1);
    assert_int_equal(r32.local, 1), assert_int_equal(r32.nodes, 16), assert_int_equal(r32.concurrent, 8);
}

static void test_schedule_by_hand(void **state) {
    (void)state;
    /* zero3, 3 units, forward 1 s and backward 2 s each, every collective 0.5 s, optimizer 0.25 s:
     *   forward   g0 0-0.5 | u0 0.5-1.5 (g1 0.5-1.0) | u1 1.5-2.5 (g2 1.5-2.0) | u2 2.5-3.5
     *   backward  g2' 3.5-4.0 | u2 4.0-6.0 (g1' 4.0-4.5, r2 6.0-6.5) | u1 6.0-8.0 (g0' 6.5-7.0,
     *             r1 8.0-8.5) | u0 8.0-10.0 (r0 10.0-10.5) | optimizer 10.5-10.75
     * exposed: g0, g2', r0 = 1.5 s; comm 9 x 0.5 = 4.5 s, hidden 3 s */
    double fwd[3] = {1, 1, 1}, bwd[3] = {2, 2, 2}, g[3] = {0.5, 0.5, 0.5}, r[3] = {0.5, 0.5, 0.5};
    zt_scale_timeline t = {.n_units = 3, .micro_batches = 1, .fwd = fwd, .bwd = bwd, .gather = g, .reduce = r,
                           .regather_backward = true, .reduce_every_micro_batch = true, .optimizer_s = 0.25};
    zt_scale_step s = zt_scale_schedule(&t);
    CLOSE(s.step_s, 10.75);
    CLOSE(s.compute_s, 9.25);
    CLOSE(s.comm_s, 4.5);
    CLOSE(s.exposed_s, 1.5);
    CLOSE(s.hidden_s, 3.0);
    /* parameters kept from forward to backward: no backward gathers, g2' no longer exposed */
    t.regather_backward = false;
    s = zt_scale_schedule(&t);
    CLOSE(s.step_s, 10.25);
    CLOSE(s.comm_s, 3.0);
    /* communication-bound: 5 s gathers; the step is at least every collective back to back */
    double big[3] = {5, 5, 5};
    t.gather = big, t.regather_backward = true;
    s = zt_scale_schedule(&t);
    assert_true(s.step_s >= s.comm_s);
    CLOSE(s.exposed_s, s.step_s - s.compute_s);
    /* ddp, 2 micro-batches: all-reduces only in the last, and a post-step gather adds in full */
    double ar[3] = {1, 1, 1};
    zt_scale_timeline d = {.n_units = 3, .micro_batches = 2, .fwd = fwd, .bwd = bwd, .reduce = ar,
                           .reduce_every_micro_batch = false, .post_gather_s = 0.5};
    s = zt_scale_schedule(&d);
    CLOSE(s.comm_s, 3.5);
    /* first micro-batch 0-9 with no reduction; second: forward 9-12, u2 12-14 (r2 14-15), u1 14-16
     * (r1 16-17), u0 16-18 (r0 18-19); then the 0.5 s gather */
    CLOSE(s.step_s, 19.5);
    CLOSE(s.exposed_s, 1.5);
    d.reduce_every_micro_batch = true;
    CLOSE(zt_scale_schedule(&d).comm_s, 6.5);
}

static zt_scale_device test_device(void) {
    zt_scale_device d;
    zt_error err = {0};
    assert_int_equal(zt_scale_device_lookup("h100", &d, &err), ZT_OK);
    return d;
}

static void test_compute_flops(void **state) {
    (void)state;
    zt_model *m = NULL;
    zt_error err = {0};
    assert_int_equal(zt_estimator_model("gpt2-124M", ZT_ATTENTION_FLASH, &m, &err), ZT_OK);
    zt_scale_device d = test_device();
    zt_scale_compute c;
    int B = 2, T = 1024;
    assert_int_equal(zt_scale_compute_model(m, &d, B, T, true, ZT_RECOMPUTE_NONE, &c, &err), ZT_OK);
    double C = 768, V = 50257, L = 12, n = (double)B * T, rate = 989e12 * 0.75;
    double linears = L * (3 * C * C + C * C + 4 * C * C + 4 * C * C) + V * C; /* the head reads the tied wte */
    CLOSE(c.matmul_s, 6.0 * linears * n / rate);
    /* flash attention: the causal half, backward 2.5x forward */
    CLOSE(c.attention_s, L * 3.5 * 0.5 * 4.0 * T * C * n / (989e12 * 0.45));
    CLOSE(c.model_flops_per_token, m->train_flops_per_token(m, T));
    CLOSE(c.peak, 989e12);
    assert_true(c.memory_s > 0 && c.recompute_s == 0);
    CLOSE(c.fwd_total + c.bwd_total, c.matmul_s + c.attention_s + c.memory_s);
    zt_scale_compute full, sel;
    assert_int_equal(zt_scale_compute_model(m, &d, B, T, true, ZT_RECOMPUTE_FULL, &full, &err), ZT_OK);
    assert_int_equal(zt_scale_compute_model(m, &d, B, T, true, ZT_RECOMPUTE_SELECTIVE, &sel, &err), ZT_OK);
    double blocks_fwd = 0;
    for (int u = 1; u < m->n_units - 1; u++) blocks_fwd += c.fwd[u];
    CLOSE(full.recompute_s, blocks_fwd);
    CLOSE(sel.recompute_s, c.attention_s / 3.5);
    CLOSE(full.bwd_total, c.bwd_total + blocks_fwd);
    /* fp32 divides by the fp32 peak */
    zt_scale_compute f32;
    assert_int_equal(zt_scale_compute_model(m, &d, B, T, false, ZT_RECOMPUTE_NONE, &f32, &err), ZT_OK);
    CLOSE(f32.peak, 66.9e12);
    /* a sequence beyond the context is refused, naming it */
    zt_scale_compute x;
    assert_int_equal(zt_scale_compute_model(m, &d, 1, 4096, true, ZT_RECOMPUTE_NONE, &x, &err), ZT_ERR_USAGE);
    assert_non_null(strstr(err.msg, "4096"));
    zt_scale_compute_free(&c), zt_scale_compute_free(&full), zt_scale_compute_free(&sel), zt_scale_compute_free(&f32);
    zt_model_free(m);
}

/* A mixture of experts: the stacked experts run each token through its top-k experts only, so the
 * products' time is the active parameters' FLOPs (the model's count, less attention's 12·L·C·T). */
static void test_compute_flops_moe(void **state) {
    (void)state;
    zt_model *m = NULL;
    zt_error err = {0};
    assert_int_equal(zt_estimator_model("mixtral-8x7b", ZT_ATTENTION_FLASH, &m, &err), ZT_OK);
    zt_scale_device d = test_device();
    zt_scale_compute c;
    int B = 1, T = 1024;
    assert_int_equal(zt_scale_compute_model(m, &d, B, T, true, ZT_RECOMPUTE_NONE, &c, &err), ZT_OK);
    double L = 32, C = 4096, n = (double)B * T, rate = 989e12 * 0.75;
    double active = c.model_flops_per_token - 12.0 * L * C * T; /* 6 x the active matmul parameters */
    CLOSE(c.matmul_s, active * n / rate);
    assert_true(active / 6.0 > 12.5e9 && active / 6.0 < 13.5e9); /* Mixtral's ~12.9B active */
    zt_scale_compute_free(&c);
    zt_model_free(m);
}

/* docs/multihost.md: between 2 hosts of 2 ranks, zero3 sends 12·P·(N-L) bytes per step over all
 * hosts and hybrid 8·P·(H-1), each host half of that; ddp's pairwise all-reduce 8·P per host. */
static void test_bytes_between_hosts(void **state) {
    (void)state;
    zt_model *m = NULL;
    zt_error err = {0};
    assert_int_equal(zt_estimator_model("gpt2-124M", ZT_ATTENTION_FLASH, &m, &err), ZT_OK);
    zt_scale_device d = test_device();
    zt_scale_compute c;
    assert_int_equal(zt_scale_compute_model(m, &d, 1, 64, false, ZT_RECOMPUTE_NONE, &c, &err), ZT_OK);
    zt_scale_request rq = {.model = m, .compute = &c, .device = &d};
    rq.cluster = (zt_scale_cluster){.nodes = 2, .per_node = 2, .profile = ZT_SCALE_ZEROTRAIN,
                                    .net = {.per_node = 2, .intra_bw = 1e9, .nic_bw = 1e8, .nics = 1,
                                            .algo = ZT_SCALE_PAIRWISE}};
    zt_engine_options_default(&rq.opt);
    rq.opt.B = 1, rq.opt.T = 64, rq.opt.grad_accum = 1;
    zt_precision_default(&rq.opt.precision, ZT_PRECISION_FP32);
    zt_memory_plan_options_default(&rq.plan);
    double P = (double)zt_model_numel(m);
    zt_scale_row z3, hy, dp;
    assert_int_equal(zt_scale_predict(&rq, ZT_STRATEGY_ZERO3, 0, &z3, &err), ZT_OK);
    assert_int_equal(zt_scale_predict(&rq, ZT_STRATEGY_HYBRID, 2, &hy, &err), ZT_OK);
    assert_int_equal(zt_scale_predict(&rq, ZT_STRATEGY_DDP, 0, &dp, &err), ZT_OK);
    CLOSE(z3.node_out_bytes, 12.0 * P * (4 - 2) / 2);
    CLOSE(hy.node_out_bytes, 8.0 * P * (2 - 1) / 2);
    CLOSE(dp.node_out_bytes, 8.0 * P); /* all-reduce = reduce-scatter + all-gather, 4P per host each */
    assert_int_equal(z3.shard, 4);
    assert_int_equal(hy.shard, 2);
    assert_true(z3.gather_bytes_per_elem == 4); /* zerotrain gathers fp32 */
    /* the memory is the estimator's column for the same options */
    zt_estimate_request erq = {.model = m, .opt = rq.opt, .plan = rq.plan, .world = 4};
    erq.opt.hybrid_shard_size = 2;
    zt_estimate est;
    assert_int_equal(zt_estimate_run(&erq, &est, &err), ZT_OK);
    assert_true(z3.memory == est.col[ZT_STRATEGY_ZERO3].peak[ZT_EST_AS_GIVEN]);
    assert_true(hy.memory == est.col[ZT_STRATEGY_HYBRID].peak[ZT_EST_AS_GIVEN]);
    assert_true(dp.memory == est.col[ZT_STRATEGY_DDP].peak[ZT_EST_AS_GIVEN]);
    /* zerotrain's engine all-reduces the pieces across the replicas at the step, after backward:
     * that all-reduce is exposed in full (FSDP's HSDP hides it per unit, below) */
    zt_scale_net *net = &rq.cluster.net;
    zt_scale_cost ar = zt_scale_collective(net, zt_scale_group_of(net, 2, 2), ZT_SCALE_ALL_REDUCE, P / 2 * 4);
    assert_true(hy.step.exposed_s >= ar.seconds);
    assert_true(hy.step.step_s >= hy.step.compute_s + ar.seconds);
    /* a shard size that does not divide is refused */
    zt_scale_row bad;
    assert_int_equal(zt_scale_predict(&rq, ZT_STRATEGY_HYBRID, 3, &bad, &err), ZT_ERR_USAGE);
    /* under the nccl profile bf16 gathers halve zero3's gather bytes (reductions stay fp32) */
    rq.cluster.profile = ZT_SCALE_NCCL, rq.cluster.net.algo = ZT_SCALE_RING;
    zt_precision_default(&rq.opt.precision, ZT_PRECISION_BF16);
    zt_scale_row z3b;
    assert_int_equal(zt_scale_predict(&rq, ZT_STRATEGY_ZERO3, 0, &z3b, &err), ZT_OK);
    CLOSE(z3b.node_out_bytes, (2 * 2.0 + 4.0) * P * 0.75); /* ring: (p-1)/p of each tensor leaves a node */
    zt_scale_row hyb;
    assert_int_equal(zt_scale_predict(&rq, ZT_STRATEGY_HYBRID, 2, &hyb, &err), ZT_OK);
    assert_true(hyb.step.exposed_s < hyb.step.comm_s); /* per unit: mostly behind the backward */
    zt_scale_compute_free(&c);
    zt_model_free(m);
}

static void test_devices(void **state) {
    (void)state;
    zt_scale_device d;
    zt_error err = {0};
    static const char *names[] = {"v100", "a100", "h100", "h200", "mi300x", "b200"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        assert_int_equal(zt_scale_device_lookup(names[i], &d, &err), ZT_OK);
        assert_true(d.peak_bf16 > d.peak_fp32 && d.memory > 0 && d.mem_bw > 0 && d.intra_bw > 0);
    }
    assert_int_equal(zt_scale_device_lookup("h1000", &d, &err), ZT_ERR_USAGE);
    assert_non_null(strstr(err.msg, "h1000"));
    assert_non_null(strstr(err.msg, "mi300x"));
}

/* a cut model: gpt2-124M as tp part 0 of `tp` */
static zt_model *gpt2_part(int tp) {
    zt_model *m = NULL;
    zt_error err = {0};
    assert_int_equal(zt_estimator_model("gpt2-124M", ZT_ATTENTION_FLASH, &m, &err), ZT_OK);
    if (tp > 1) assert_int_equal(zt_tp_apply(m, tp, 0, &err), ZT_OK);
    return m;
}

static zt_scale_request gpt2_request(const zt_model *m, const zt_scale_compute *c, const zt_scale_device *d, int nodes,
                                     int per_node, int B, int T) {
    zt_scale_request rq = {.model = m, .compute = c, .device = d};
    rq.cluster = (zt_scale_cluster){.nodes = nodes, .per_node = per_node, .profile = ZT_SCALE_NCCL,
                                    .net = {.per_node = per_node, .intra_bw = 450e9, .intra_lat = 2e-6,
                                            .nic_bw = 50e9, .inter_lat = 5e-6, .nics = per_node,
                                            .algo = ZT_SCALE_RING}};
    zt_engine_options_default(&rq.opt);
    rq.opt.B = B, rq.opt.T = T, rq.opt.grad_accum = 1;
    zt_precision_default(&rq.opt.precision, ZT_PRECISION_BF16);
    zt_memory_plan_options_default(&rq.plan);
    return rq;
}

/* tp: the cut model's compute (the Linears' part shapes, the vocabulary-parallel head), the bytes
 * a device sends in its tp group against the engine's formula (docs/parallelism.md, checked on
 * the engine by tool_dist_check; a mixture's blocks with their top-k weights' gradient sum), the
 * all-reduces on the critical path, memory = estimate-memory --tp's (the cut model over the
 * data-parallel ranks) */
static void test_tensor_parallel(void **state) {
    (void)state;
    zt_error err = {0};
    zt_scale_device d = test_device();
    zt_model *m1 = gpt2_part(1), *m2 = gpt2_part(2);
    int B = 2, T = 1024, L = 12;
    double C = 768, n = (double)B * T, rate = 989e12 * 0.75;
    zt_scale_compute c1, c2;
    assert_int_equal(zt_scale_compute_model(m1, &d, B, T, true, ZT_RECOMPUTE_NONE, &c1, &err), ZT_OK);
    assert_int_equal(zt_scale_compute_model(m2, &d, B, T, true, ZT_RECOMPUTE_NONE, &c2, &err), ZT_OK);
    /* half of every block's Linears; the head's 25129 of the 50257 vocabulary rows */
    CLOSE(c2.matmul_s, 6.0 * (L * 12 * C * C / 2 + 25129 * C) * n / rate);
    CLOSE(c2.attention_s, c1.attention_s / 2);
    CLOSE(c2.model_flops_per_token, c1.model_flops_per_token); /* MFU counts the whole model */
    assert_true(c2.memory_s > c1.memory_s / 2 && c2.memory_s < c1.memory_s); /* norms and adds stay whole */

    /* bytes: per micro-batch (2 + 4L [+ 2L full]) all-reduces of (B, T, C) fp32, the loss's 20·B·T
     * per peer, the norm's 8 per step: what tool_dist_check holds the engine to */
    zt_scale_net pw = {.per_node = 2, .intra_bw = 1e9, .intra_lat = 1e-5, .nic_bw = 1e8, .nics = 1,
                       .algo = ZT_SCALE_PAIRWISE};
    double *f = calloc((size_t)m2->n_units, sizeof *f), *b = calloc((size_t)m2->n_units, sizeof *b), sent;
    for (int full = 0; full < 2; full++) {
        int GA = 3, tp = 2, Bs = 2, Ts = 64;
        zt_scale_tp_comm(m2, &pw, tp, Bs, Ts, 4.0, full ? ZT_RECOMPUTE_FULL : ZT_RECOMPUTE_NONE, GA, f, b, &sent);
        double Nt = Bs * Ts, ar = (2.0 + 4.0 * L + (full ? 2.0 * L : 0)) * Nt * C * 4.0 * 2.0 * (tp - 1) / tp;
        CLOSE(sent, GA * (ar + (tp - 1) * (4.0 * Nt + 16.0 * Nt)) + (tp - 1) * 8.0);
        double one = zt_scale_collective(&pw, zt_scale_group_of(&pw, 2, 1), ZT_SCALE_ALL_REDUCE, Nt * C * 4).seconds;
        CLOSE(f[0], one);              /* the embedding's sum */
        CLOSE(f[1], 2 * one);          /* a block: attention and MLP outputs */
        CLOSE(b[1], (full ? 4 : 2) * one);
        CLOSE(b[m2->n_units - 1], one); /* the head's input gradient */
        assert_true(b[0] == 0);
    }
    zt_scale_tp_comm(m1, &pw, 1, 2, 64, 4.0, ZT_RECOMPUTE_NONE, 1, f, b, &sent);
    assert_true(sent == 0 && f[1] == 0 && b[1] == 0);
    free(f), free(b);

    /* a mixture of experts (llama_moe.c): each block's backward also all-reduces the top-k weights'
     * gradient, n·k floats, and with Qwen2-MoE's gated shared expert its dout·ys beside it (n more),
     * fp32 whatever the activations: Mixtral-like llama-124M-moe (L 12, C 768, top-2) and
     * qwen1.5-moe-a2.7b (L 24, C 2048, top-4, gated), each cut in 2 */
    const struct { const char *name; double L, C, floats; } moe[] = {{"llama-124M-moe", 12, 768, 2},
                                                                     {"qwen1.5-moe-a2.7b", 24, 2048, 4 + 1}};
    for (int i = 0; i < 2; i++) {
        zt_model *mm = NULL;
        assert_int_equal(zt_estimator_model(moe[i].name, ZT_ATTENTION_FLASH, &mm, &err), ZT_OK);
        assert_int_equal(zt_tp_apply(mm, 2, 0, &err), ZT_OK);
        double *mf = calloc((size_t)mm->n_units, sizeof *mf), *mb = calloc((size_t)mm->n_units, sizeof *mb);
        int GA = 2, Bs = 2, Ts = 64;
        double Nt = Bs * Ts, act = 2.0; /* bf16 activations: the top-k sum stays 4 bytes a float */
        zt_scale_tp_comm(mm, &pw, 2, Bs, Ts, act, ZT_RECOMPUTE_NONE, GA, mf, mb, &sent);
        double dense = (2.0 + 4.0 * moe[i].L) * Nt * moe[i].C * act, topk = moe[i].L * Nt * moe[i].floats * 4.0;
        CLOSE(sent, GA * ((dense + topk) * 2.0 / 2 + 20.0 * Nt) + 8.0); /* tp 2: (tp-1)/tp = 1/2 */
        zt_scale_group g2 = zt_scale_group_of(&pw, 2, 1);
        double one = zt_scale_collective(&pw, g2, ZT_SCALE_ALL_REDUCE, Nt * moe[i].C * act).seconds;
        double w = zt_scale_collective(&pw, g2, ZT_SCALE_ALL_REDUCE, Nt * moe[i].floats * 4.0).seconds;
        CLOSE(mf[1], 2 * one);
        CLOSE(mb[1], 2 * one + w);
        free(mf), free(mb);
        zt_model_free(mm);
    }

    /* one node of 4: tp 2 x dp 2; the all-reduces are exposed, memory is estimate-memory --tp 2's */
    zt_scale_request rq = gpt2_request(m2, &c2, &d, 1, 4, B, T);
    rq.tp = 2;
    zt_scale_row z3, z3_1;
    assert_int_equal(zt_scale_predict(&rq, ZT_STRATEGY_ZERO3, 0, &z3, &err), ZT_OK);
    assert_int_equal(z3.dp, 2);
    assert_int_equal(z3.shard, 2);
    double tp_s = 0, tf[64], tb[64], tsent;
    zt_scale_tp_comm(m2, &rq.cluster.net, 2, B, T, 2.0, ZT_RECOMPUTE_NONE, 1, tf, tb, &tsent);
    for (int u = 0; u < m2->n_units; u++) tp_s += tf[u] + tb[u];
    CLOSE(z3.tp_s, tp_s);
    assert_true(z3.step.exposed_s >= tp_s);
    CLOSE(z3.step.step_s, z3.step.compute_s + z3.step.exposed_s + z3.bubble_s);
    CLOSE(z3.tokens_per_s, n / 2 / z3.step.step_s); /* two devices share each sequence */
    zt_estimate_request erq = {.model = m2, .opt = rq.opt, .plan = rq.plan, .world = 2};
    erq.opt.hybrid_shard_size = 1;
    zt_estimate est;
    int erc = zt_estimate_run(&erq, &est, &err);
    if (erc) print_message("%s\n", err.msg);
    assert_int_equal(erc, ZT_OK);
    assert_true(z3.memory == est.col[ZT_STRATEGY_ZERO3].peak[ZT_EST_AS_GIVEN]);
    /* the same devices without tp: 4 data-parallel ranks of the whole model */
    zt_scale_request rq1 = gpt2_request(m1, &c1, &d, 1, 4, B, T);
    assert_int_equal(zt_scale_predict(&rq1, ZT_STRATEGY_ZERO3, 0, &z3_1, &err), ZT_OK);
    assert_int_equal(z3_1.dp, 4);
    assert_true(z3_1.tp_s == 0 && z3.step.compute_s < z3_1.step.compute_s);
    /* tp that does not divide the devices is refused, naming both */
    rq.tp = 3;
    assert_int_equal(zt_scale_predict(&rq, ZT_STRATEGY_ZERO3, 0, &z3, &err), ZT_ERR_USAGE);
    assert_non_null(strstr(err.msg, "--tp 3"));
    zt_scale_compute_free(&c1), zt_scale_compute_free(&c2);
    zt_model_free(m1), zt_model_free(m2);
}

/* cp: allgather's and ulysses' exchanges pipelined over G head groups: a pass's exposed seconds are
 * max(X/G, X - (G-1)/G x its attention), X the pass's exchange seconds (GPT-2: 12 heads, G = 4;
 * ulysses' 6 a part after the split, G = 3) */
static void test_context_parallel_pipelined(void **state) {
    (void)state;
    zt_error err = {0};
    zt_model *m = gpt2_part(1);
    zt_scale_net pw = {.per_node = 2, .intra_bw = 1e9, .intra_lat = 1e-5, .nic_bw = 1e8, .nics = 1,
                       .algo = ZT_SCALE_RING};
    int B = 1, T = 4096, U = m->n_units;
    double *f = calloc((size_t)U, sizeof *f), *b = calloc((size_t)U, sizeof *b), sent;
    double S = (double)B * T * 2 * 768 * 4.0; /* the whole sequences' k and v, fp32 */
    zt_scale_group g = zt_scale_group_of(&pw, 2, 1);
    double ag = zt_scale_collective(&pw, g, ZT_SCALE_ALL_GATHER, S).seconds;
    double rs = zt_scale_collective(&pw, g, ZT_SCALE_REDUCE_SCATTER, S).seconds;
    assert_int_equal(zt_model_set_context_parallel(m, 2, ZT_CP_ALLGATHER, &err), ZT_OK);
    zt_scale_cp_comm(m, &pw, 1, B, T, 4.0, 100.0, 250.0, 1, f, b, &sent); /* attention far longer */
    CLOSE(f[1], ag / 4);
    CLOSE(b[1], (ag + rs) / 4);
    zt_scale_cp_comm(m, &pw, 1, B, T, 4.0, 0.0, 0.0, 1, f, b, &sent); /* no attention to hide behind */
    CLOSE(f[1], ag);
    CLOSE(b[1], ag + rs);
    zt_scale_cp_comm(m, &pw, 1, B, T, 4.0, ag / 3, 0.0, 1, f, b, &sent); /* between: X - 3/4 of it */
    CLOSE(f[1], ag - 0.75 * ag / 3);
    assert_true(f[0] == 0 && b[0] == 0); /* the embedding exchanges nothing */
    zt_scale_net pair = pw;
    pair.algo = ZT_SCALE_PAIRWISE;
    double part = (double)B * T / 2 * 4.0, qkv = part * 3 * 768, o = part * 768;
    double x = zt_scale_collective(&pair, g, ZT_SCALE_ALL_GATHER, qkv).seconds +
               zt_scale_collective(&pair, g, ZT_SCALE_ALL_GATHER, o).seconds;
    assert_int_equal(zt_model_set_context_parallel(m, 2, ZT_CP_ULYSSES, &err), ZT_OK);
    zt_scale_cp_comm(m, &pw, 1, B, T, 4.0, 100.0, 250.0, 1, f, b, &sent);
    CLOSE(f[1], x / 3);
    zt_scale_cp_comm(m, &pw, 1, B, T, 4.0, 0.0, 0.0, 1, f, b, &sent);
    CLOSE(f[1], x);
    free(f), free(b);
    zt_model_free(m);
}

/* pp: the cut into stages, the bubble (p-1)/(m+p-1), the pipeline's time from its stages, the
 * step's parts, and a stage's memory: its own plan plus the micro-batches it keeps in flight */
static void test_pipeline(void **state) {
    (void)state;
    zt_error err = {0};
    assert_true(zt_scale_bubble_fraction(1, 8) == 0);
    CLOSE(zt_scale_bubble_fraction(4, 8), 3.0 / 11.0);
    CLOSE(zt_scale_bubble_fraction(8, 64), 7.0 / 71.0);
    double eq[4] = {2, 2, 2, 2}, uneq[3] = {1, 3, 2};
    int slow = -1;
    CLOSE(zt_scale_pipeline_seconds(eq, 4, 8, &slow), (8 + 4 - 1) * 2.0); /* (m + p - 1)·c */
    CLOSE(zt_scale_pipeline_seconds(uneq, 3, 5, &slow), 6 + 4 * 3.0);
    assert_int_equal(slow, 1);
    /* in flight: 1F1B min(p - s, m), GPipe m */
    assert_int_equal(zt_scale_in_flight(ZT_SCALE_1F1B, 4, 0, 8), 4);
    assert_int_equal(zt_scale_in_flight(ZT_SCALE_1F1B, 4, 3, 8), 1);
    assert_int_equal(zt_scale_in_flight(ZT_SCALE_1F1B, 4, 0, 2), 2);
    assert_int_equal(zt_scale_in_flight(ZT_SCALE_GPIPE, 4, 3, 8), 8);

    zt_model *m = gpt2_part(1);
    int first, end;
    assert_int_equal(zt_scale_stage_units(m, 4, 0, &first, &end, &err), ZT_OK);
    assert_int_equal(first, 0), assert_int_equal(end, 4);       /* embedding + 3 blocks */
    assert_int_equal(zt_scale_stage_units(m, 4, 3, &first, &end, &err), ZT_OK);
    assert_int_equal(first, 10), assert_int_equal(end, 14);     /* 3 blocks + head */
    assert_int_equal(zt_scale_stage_units(m, 5, 0, &first, &end, &err), ZT_ERR_USAGE);
    assert_non_null(strstr(err.msg, "--pp 5"));
    assert_non_null(strstr(err.msg, "12 blocks"));

    /* 2 stages x 2 data-parallel ranks on one node of 4, 8 micro-batches */
    zt_scale_device d = test_device();
    zt_scale_compute c;
    int B = 2, T = 1024, M = 8;
    assert_int_equal(zt_scale_compute_model(m, &d, B, T, true, ZT_RECOMPUTE_FULL, &c, &err), ZT_OK);
    zt_scale_request rq = gpt2_request(m, &c, &d, 1, 4, B, T);
    rq.pp = 2, rq.opt.grad_accum = M, rq.opt.activation_checkpointing = ZT_RECOMPUTE_FULL;
    zt_scale_row r;
    assert_int_equal(zt_scale_predict(&rq, ZT_STRATEGY_ZERO1, 0, &r, &err), ZT_OK);
    assert_int_equal(r.dp, 2), assert_int_equal(r.pp, 2), assert_int_equal(r.micro_batches, M);
    double s0 = 0, s1 = 0;
    for (int u = 0; u < 7; u++) s0 += c.fwd[u] + c.bwd[u];
    for (int u = 7; u < m->n_units; u++) s1 += c.fwd[u] + c.bwd[u];
    double mx = s0 > s1 ? s0 : s1;
    CLOSE(r.bubble_s, s0 + s1 + (M - 1) * mx - M * mx); /* = the other stage's c: (p - 1)·c when equal */
    double act = (double)B * T * 768 * 2.0, p2p_one = 2e-6 + act / 450e9;
    CLOSE(r.p2p_s, 2.0 * (M + 2 - 1) * p2p_one);
    CLOSE(r.step.step_s, r.step.compute_s + r.step.exposed_s + r.bubble_s);
    CLOSE(r.tokens_per_s, (double)B * T * M / 2 / r.step.step_s);
    /* memory: GPipe keeps all 8 micro-batches, 1F1B 2 on the first stage; under full
     * recomputation a unit keeps only its output, so the difference is 6 x 7 unit outputs; the
     * stage's plan is the engine's for its own units and parameters */
    zt_engine_options o = rq.opt;
    o.strategy = ZT_STRATEGY_ZERO1;
    size_t one_f, gp, one;
    assert_int_equal(zt_scale_stage_memory(m, &o, &rq.plan, 2, 2, 0, 0, 7, 2, &one_f, &err), ZT_OK);
    assert_int_equal(zt_scale_stage_memory(m, &o, &rq.plan, 2, 2, 0, 0, 7, 8, &gp, &err), ZT_OK);
    assert_int_equal(zt_scale_stage_memory(m, &o, &rq.plan, 2, 2, 0, 0, 7, 1, &one, &err), ZT_OK);
    size_t out = zt_memory_alloc_bytes((size_t)B * T * 768);
    assert_true(gp - one_f == 6 * 7 * out);
    assert_true(one_f - one == 7 * out);
    zt_scale_row g;
    rq.pp_schedule = ZT_SCALE_GPIPE;
    assert_int_equal(zt_scale_predict(&rq, ZT_STRATEGY_ZERO1, 0, &g, &err), ZT_OK);
    assert_true(g.memory >= gp && r.memory >= one_f && g.memory > r.memory);
    /* a stage holds about half the parameters: zero1's replicated compute copies halve */
    rq.pp = 1, rq.opt.grad_accum = M;
    zt_scale_row whole;
    assert_int_equal(zt_scale_predict(&rq, ZT_STRATEGY_ZERO1, 0, &whole, &err), ZT_OK);
    assert_true(r.memory < whole.memory);
    assert_true(whole.bubble_s == 0 && whole.p2p_s == 0);
    zt_scale_compute_free(&c);
    zt_model_free(m);
}

/* Expert parallelism (ep_comm.h, predict.h): the all-to-alls' bytes a device sends per step, n·k·C
 * elements a block and micro-batch each way, (ep-1)/ep of them leaving it: the engine's 4+4+4+4
 * bytes an element under fp32 and 2+4+2+4 under bf16 (the rounded rows out, the fp32 results and
 * input gradients back: llama_moe_ep.c), the GPU frameworks' 2+2+2+2; the experts stored E/ep a
 * device reduced over the expert-data-parallel ranks (D/ep), El experts' gradients: ddp's
 * all-reduce 2·(edp-1)/edp of them, zero1's reduce-scatter (edp-1)/edp; hybrid keeps them whole;
 * the memory the estimator's with them stored (pipeline stages too). */
static void test_expert_parallel(void **state) {
    (void)state;
    zt_model *m = NULL;
    zt_error err = {0};
    assert_int_equal(zt_estimator_model("llama-124M-moe", ZT_ATTENTION_FLASH, &m, &err), ZT_OK);
    int ep = 4, D = 8, B = 1, T = 256, GA = 2;
    assert_int_equal(zt_model_set_expert_parallel(m, ep, &err), ZT_OK);
    zt_scale_device d = test_device();
    zt_scale_compute c;
    assert_int_equal(zt_scale_compute_model(m, &d, B, T, false, ZT_RECOMPUTE_NONE, &c, &err), ZT_OK);
    zt_scale_request rq = gpt2_request(m, &c, &d, 1, D, B, T);
    rq.cluster.profile = ZT_SCALE_ZEROTRAIN, rq.cluster.net.algo = ZT_SCALE_PAIRWISE;
    rq.opt.grad_accum = GA;
    zt_precision_default(&rq.opt.precision, ZT_PRECISION_FP32);
    double L = 12, C = 768, k = 2, E = 8, I = 1024, X = GA * L * B * T * k * C * (ep - 1) / ep;
    double El = 3 * E * I * C * L / ep; /* a device's stored experts: w1, w2, w3 of E/ep experts a block */
    zt_scale_row dp, z1, hy, z3;
    assert_int_equal(zt_scale_predict(&rq, ZT_STRATEGY_DDP, 0, &dp, &err), ZT_OK);
    assert_int_equal(zt_scale_predict(&rq, ZT_STRATEGY_ZERO1, 0, &z1, &err), ZT_OK);
    assert_int_equal(zt_scale_predict(&rq, ZT_STRATEGY_HYBRID, 4, &hy, &err), ZT_OK);
    assert_int_equal(dp.ep, ep), assert_int_equal(dp.edp, D / ep), assert_int_equal(z1.edp, D / ep);
    CLOSE(dp.ep_bytes, 16 * X);
    int edp = D / ep;
    CLOSE(dp.edp_reduce_bytes, El * 4 * 2 * (edp - 1) / edp);
    CLOSE(z1.edp_reduce_bytes, El * 4 * (edp - 1) / edp);
    assert_int_equal(hy.edp, 1); /* hybrid: the experts' reduction priced as whole (predict.c) */
    assert_true(hy.edp_reduce_bytes == 0);
    /* bf16: the engine's 2+4+2+4, 3/4 of fp32's; the GPU frameworks' 2+2+2+2 */
    zt_precision_default(&rq.opt.precision, ZT_PRECISION_BF16);
    zt_scale_row b16;
    assert_int_equal(zt_scale_predict(&rq, ZT_STRATEGY_DDP, 0, &b16, &err), ZT_OK);
    CLOSE(b16.ep_bytes, 12 * X);
    assert_true(b16.ep_s < dp.ep_s);
    rq.cluster.profile = ZT_SCALE_NCCL, rq.cluster.net.algo = ZT_SCALE_RING;
    assert_int_equal(zt_scale_predict(&rq, ZT_STRATEGY_DDP, 0, &b16, &err), ZT_OK);
    CLOSE(b16.ep_bytes, 8 * X);
    /* the memory: the estimator's with the experts stored; with pp 2 (D 4 = ep: each stage's
     * experts E/4 a device) less than the same stages with every expert on every device */
    zt_precision_default(&rq.opt.precision, ZT_PRECISION_FP32);
    assert_int_equal(zt_scale_predict(&rq, ZT_STRATEGY_ZERO3, 0, &z3, &err), ZT_OK);
    zt_estimate_request erq = {.model = m, .opt = rq.opt, .plan = rq.plan, .world = D};
    erq.opt.hybrid_shard_size = 4;
    zt_estimate est;
    assert_int_equal(zt_estimate_run(&erq, &est, &err), ZT_OK);
    assert_true(z3.memory == est.col[ZT_STRATEGY_ZERO3].peak[ZT_EST_AS_GIVEN]);
    rq.pp = 2;
    zt_scale_row p_ep, p_whole;
    assert_int_equal(zt_scale_predict(&rq, ZT_STRATEGY_DDP, 0, &p_ep, &err), ZT_OK);
    assert_int_equal(p_ep.edp, 1); /* 4 data-parallel ranks a stage, all one ep group */
    assert_int_equal(zt_model_set_expert_parallel(m, 1, &err), ZT_OK);
    assert_int_equal(zt_scale_predict(&rq, ZT_STRATEGY_DDP, 0, &p_whole, &err), ZT_OK);
    /* a stage's 6 blocks of experts: weights and moments (12 bytes) a quarter, the gradient whole
     * with its source slots under accumulation (6.04 of 16 bytes an element saved at the high-water) */
    assert_true((double)p_whole.memory - (double)p_ep.memory > 5.0 * 3 * E * I * C * (L / 2));
    zt_scale_compute_free(&c);
    zt_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bandwidth),        cmocka_unit_test(test_latency),
        cmocka_unit_test(test_ring_one_node),    cmocka_unit_test(test_ring_across_nodes),
        cmocka_unit_test(test_tree_or_ring),     cmocka_unit_test(test_pairwise),
        cmocka_unit_test(test_group_shapes),     cmocka_unit_test(test_schedule_by_hand),
        cmocka_unit_test(test_compute_flops), cmocka_unit_test(test_compute_flops_moe),    cmocka_unit_test(test_bytes_between_hosts),
        cmocka_unit_test(test_devices),          cmocka_unit_test(test_tensor_parallel),
        cmocka_unit_test(test_pipeline),         cmocka_unit_test(test_context_parallel_pipelined),
        cmocka_unit_test(test_expert_parallel),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
