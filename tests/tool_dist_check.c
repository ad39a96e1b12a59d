/* tool_dist_check.c - one rank of a distributed determinism run (tests/strategies.sh drives it
 * under mpirun). Trains a small GPT-2 on synthetic tokens that are a pure function of the global
 * sample index, so any world size and accumulation sees the same global batches, then prints
 * (rank 0) the losses as hex and the xxh64 of the final parameters. It also checks, on every
 * rank, the bytes each collective kind sent in each step against the formulas:
 *   ddp               all-reduce 2·P·(N−1)/N per rank on average
 *   zero1, zero2      reduce-scatter P·(N−1)/N + all-gather P·(N−1)/N
 *   zero3             all-gather 2·P·(N−1)/N (forward + backward) + reduce-scatter P·(N−1)/N
 *                     (all-gather P·(N−1)/N with keep_params_after_forward)
 * exactly, summed over the ranks (shards may be uneven, so one rank's share can differ from the
 * average by a few rows; the sum over ranks cannot). Accumulation multiplies the zero3 gathers
 * and, with reduce_every_micro_batch, the reduce-scatters by the micro-batch count. With
 * --reduce bf16 or fp16 the gradient collectives (reduce-scatter, all-reduce) move 2 bytes per element
 * instead of 4: their formulas halve, the parameter all-gathers stay fp32.
 *   tool_dist_check STRATEGY GA STEPS [--hybrid S] [--keep] [--reduce-every] [--bucket-mb X]
 *                   [--precision fp32|bf16|bf16-low|fp16] [--stochastic-rounding] [--scale-power K]
 *                   [--reduce fp32|bf16|fp16]   (precision.reduce_dtype; give it after --precision)
 *                   [--stall-rank R]   (rank R stops answering at step 2: the others must fail
 *                                       with ZT_ERR_PEER naming it, within ZT_COMM_TIMEOUT)
 *                   [--recompute none|full|selective] [--no-prefetch]
 *                   [--arch gpt2|llama|qwen2|llama-moe|llama-moe-shared|llama-moe-deepseek]   (llama-moe-shared:
 *                               Qwen2-MoE's gated shared expert; llama-moe-deepseek: DeepSeek-MoE's ungated
 *                               one, 2 x the expert width)
 *                   [--attention flash|naive]   (the model's attention kernel, default flash)
 *                   [--freeze REGEX]   (zt_model_freeze; rank 0 prints "frozen H0 -> H1", the
 *                                       frozen tensors' hash before and after: they must agree)
 *                   [--tp P]   (tensor parallelism: the mesh tp P x dp N/P, src/comm/mesh.h; the
 *                               model cut by zt_tp_apply; the data and the byte formulas are the
 *                               dp group's, over each tp part's own parameters, and rank 0 prints
 *                               "tp bytes B" (its units' collectives in the last step))
 *                   [--sp]   (with --tp: sequence parallelism, the model's sequence_parallel; the tp
 *                             bytes formula adds backward's re-gathers and the norms' weight-gradient
 *                             all-reduces)
 *                   [--cp P] [--cp-mode allgather|ring|ulysses]   (context parallelism: the mesh
 *                             tp x cp P x dp; each rank runs its two chunks of every sequence,
 *                             zt_cp_chunks; the byte formulas are the engine's dp x cp group's)
 *                   [--ep P]   (expert parallelism, --arch llama-moe: the experts spread over ep groups
 *                               of P consecutive dp ranks, src/model/llama_moe_ep.c; rank 0 prints
 *                               "ep bytes B", what its all-to-alls sent in the last step; the experts
 *                               stored E/ep a rank where the engine can, zt_engine_store_experts)
 *                   [--experts-whole]   (with --ep: every expert kept on every rank)
 *                   [--n-head H]   (GPT-2's heads, default 2: 4 lets tp 4 cut it)
 *                   [--n-embd C]   (the width, default 32; Llama's MLP 2C: 64 gives NF4 whole blocks)
 *                   [--packed]   (every row packs documents, zt_batch.positions: lengths cycling
 *                                 over 1 9 4 13 2 7 from a sample-dependent start)
 *                   [--dump FILE]   (rank 0 writes the final logical parameters, fp32, table order)
 *                   [--lr X]   (the AdamW learning rate, default 1e-2)
 *                   [--ulp]   (every initial parameter one ulp up, nextafterf: a perturbation at fp32's
 *                              rounding level, the yardstick tests/tp.sh measures tolerances with)
 *                   [--bf16-init]   (every initial parameter rounded to bf16, nearest-even: a perturbation
 *                              at bf16's rounding level, tests/moe.sh's yardstick for bf16 compute)
 *                   [--synthetic-grad]   (one data-parallel rank, ddp: after each step's backward every
 *                              gradient is replaced by a function of (step, parameter, logical index),
 *                              zt_tp_runs mapping a tp part's elements, and clipping is off, so the
 *                              step's update alone decides the hash: tp 2 against one process bit for
 *                              bit (tests/optim_strategies.sh); the losses print as 0)
 *                   [--lora R] [--lora-targets T] [--lora-dropout P] [--quant nf4|int8]   (zt_model_add_lora, alpha 2R,
 *                                       targets all-linear by default: the base weights are the
 *                                       frozen tensors above; zero3 rank 0 prints its pieces at
 *                                       rest, base and adapters, beside the engine's counters)
 * Rank 0 also prints "activations BYTES" (the engine's activation class), "shard groups of S" for
 * hybrid (--hybrid 0: S from the launcher's ranks per node), and, with --recompute,
 * the traffic formulas must hold unchanged (recomputation gathers nothing extra).
 * Exit 0 when every check passes, 1 with a message otherwise. */
#include "comm/comm.h"
#include "comm/mesh.h"
#include "kernels/kernels.h"
#include "memory/plan.h"
#include "shard/plan.h"
#include "shard/tp.h"
#include "tool_common.h"
#include "zerotrain/zerotrain.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const zt_gpt2_config CFG = {.max_seq_len = 16, .vocab_size = 96, .n_layer = 2, .n_head = 2,
                                   .n_embd = 32};
/* --arch llama: the same size as a Llama (4 query heads over 2 KV heads, untied, rope scaling) */
static const zt_llama_config LLAMA = {.max_seq_len = 16, .vocab_size = 96, .n_layer = 2, .n_head = 4,
                                      .n_embd = 32, .n_kv_head = 2, .intermediate_size = 48,
                                      .rope_theta = 10000.0f, .rms_norm_eps = 1e-5f,
                                      .rope_scaling = {8.0f, 1.0f, 4.0f, 8}};
enum { B = 2, T = 16 };

static uint64_t mix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* --freeze: a hash of the frozen parameters' full tensors (bits), gathered on every rank (a
 * collective under sharding); 0 when none is frozen or on a failure. */
static uint64_t frozen_hash(zt_engine *e, const zt_model *m) {
    uint64_t h = 0;
    for (int i = 0; i < m->n_params; i++) {
        if (m->params[i].trainable) continue;
        float *buf = malloc((size_t)m->params[i].logical_numel * sizeof *buf);
        zt_error err = {0};
        if (!buf || zt_engine_param_gather(e, i, buf, &err)) {
            free(buf);
            return 0;
        }
        for (int64_t k = 0; k < m->params[i].logical_numel; k++) {
            uint32_t bits;
            memcpy(&bits, &buf[k], sizeof bits);
            h = mix(h ^ bits ^ ((uint64_t)i << 40));
        }
        free(buf);
    }
    return h;
}

/* --synthetic-grad: element `logical` of parameter i's gradient at step s, in [-2^-7, 2^-7) */
typedef struct synth_ctx {
    float *g;
    uint64_t key;
} synth_ctx;
static int synth_run(void *ctx, int64_t local, int64_t logical, int64_t len) {
    synth_ctx *c = ctx;
    for (int64_t k = 0; k < len; k++)
        c->g[local + k] = (float)((double)(mix(c->key ^ (uint64_t)(logical + k)) >> 40) / 16777216.0 - 0.5) / 64.0f;
    return 0;
}
static int synthetic_grads(zt_engine *e, const zt_model *m, int s, zt_error *err) {
    for (int i = 0; i < m->n_params; i++) {
        if (!m->params[i].trainable) continue;
        float *g = zt_engine_grad(e, i);
        if (!g) return zt_error_set(err, ZT_ERR_USAGE, "--synthetic-grad: no gradient of %s to write (ddp on one "
                                    "data-parallel rank only)", m->params[i].name);
        synth_ctx c = {.g = g, .key = mix(((uint64_t)s << 48) ^ ((uint64_t)i << 32))};
        zt_tp_runs(&m->params[i], m->params[i].tp_part, 0, m->params[i].numel, synth_run, &c);
    }
    return ZT_OK;
}

/* Sample s: T+1 tokens from a hash of (s, t), with some structure so the loss can fall. */
static void sample(uint64_t s, int32_t *in, int32_t *tg) {
    int32_t tok[T + 1];
    for (int t = 0; t <= T; t++) tok[t] = (int32_t)((mix(s * 131 + (uint64_t)t / 2) % CFG.vocab_size));
    memcpy(in, tok, T * sizeof *in);
    memcpy(tg, tok + 1, T * sizeof *tg);
}

/* --packed: sample s's row as documents of lengths 1 9 4 13 2 7 .. (from s % 6): positions (T) */
static void packed_positions(uint64_t s, int32_t *pos) {
    static const int lens[6] = {1, 9, 4, 13, 2, 7};
    for (int t = 0, k = (int)(s % 6); t < T; k++)
        for (int i = 0; i < lens[k % 6] && t < T; i++) pos[t++] = i;
}

/* this rank's shard plan as the engine builds it (its groups: the experts stored E/ep a rank shard
 * over the expert-data-parallel ranks) */
static int plan_of(const zt_model *m, const zt_engine_options *o, const zt_mesh *mesh, zt_plan *pl, zt_error *err) {
    zt_plan_group groups[ZT_SHARD_GROUP_COUNT];
    zt_memory_plan_groups(m, o, mesh->dp_cp, mesh->dp_cp_rank, mesh->dp_cp, mesh->dp_cp_rank, groups);
    return zt_plan_create_groups(m, groups, pl, err);
}

static int run(int argc, char **argv) {
    zt_error err = {0};
    zt_comm *world = NULL;
    zt_engine_options o;
    tool_precision pr;
    int GA = 0, steps = 0;
    int rc = tool_start(&argc, &argv, "[common options: tool_common.h] [--stall-rank R]", &world, &o, &pr, &GA, &steps);
    if (rc) return rc;
    int wrank = zt_comm_rank(world), W = zt_comm_size(world);
    o.B = B;
    o.T = T;
    int stall = -1, tp = 1;
    bool sp = false; /* --sp: sequence parallelism over the tp group */
    bool experts_whole = false; /* --experts-whole: ep keeps every expert on every rank (zt_engine_store_experts not called) */
    bool packed = false; /* --packed: packed documents (zt_batch.positions) */
    bool llama = false;
    zt_gpt2_config cfg = CFG;
    zt_llama_config lcfg = LLAMA;
    const char *freeze = NULL; /* --freeze REGEX: zt_model_freeze before the engine */
    const char *dump = NULL;
    float lr = 1e-2f;
    bool ulp = false, synth = false, bf16_init = false;
    int cp = 1, ep = 1;
    zt_cp_mode cp_mode = ZT_CP_ALLGATHER;
    zt_lora_config lora = {.target_modules = "all-linear"}; /* --lora R: rank R > 0 */
    for (int i = 4; i < argc; i++) {
        int got = tool_engine_option(argc, argv, &i, &o, &pr);
        if (got < 0) return 2;
        if (got) continue;
        if (!strcmp(argv[i], "--stall-rank") && i + 1 < argc) stall = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--arch") && i + 1 < argc) {
            i++;
            bool shared = !strcmp(argv[i], "llama-moe-shared"), qwen2 = !strcmp(argv[i], "qwen2");
            bool deepseek = !strcmp(argv[i], "llama-moe-deepseek");
            llama = !strcmp(argv[i], "llama") || !strcmp(argv[i], "llama-moe") || shared || deepseek || qwen2;
            lcfg.qkv_bias = qwen2; /* Qwen2's attention: the Llama with q/k/v biases */
            if (!strcmp(argv[i], "llama-moe") || shared || deepseek) { /* its MLPs sparse: 4 experts of width 24, top-2, both losses */
                lcfg.n_experts = 4, lcfg.n_experts_per_token = 2, lcfg.moe_intermediate_size = 24;
                lcfg.norm_topk_prob = true, lcfg.router_aux_loss_coef = 0.02f, lcfg.router_z_loss_coef = 0.001f;
            }
            if (shared) /* ... and Qwen2-MoE's gated shared expert of width 32 (a dense parameter) */
                lcfg.shared_expert_intermediate_size = 32, lcfg.shared_expert_gate = true, lcfg.norm_topk_prob = false;
            if (deepseek) lcfg.n_shared_experts = 2; /* ... or DeepSeek-MoE's, ungated, of width 2 x 24 */
        }
        else if (!strcmp(argv[i], "--attention") && i + 1 < argc) {
            if (zt_attention_parse(argv[++i], &cfg.attention, &err)) return tool_fail(world, "--attention", &err);
            lcfg.attention = cfg.attention;
        }
        else if (!strcmp(argv[i], "--freeze") && i + 1 < argc) freeze = argv[++i];
        else if (!strcmp(argv[i], "--tp") && i + 1 < argc) tp = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--sp")) sp = true;
        else if (!strcmp(argv[i], "--cp") && i + 1 < argc) cp = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--ep") && i + 1 < argc) ep = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--experts-whole")) experts_whole = true;
        else if (!strcmp(argv[i], "--cp-mode") && i + 1 < argc) {
            if (zt_cp_mode_parse(argv[++i], &cp_mode, &err)) return tool_fail(world, "--cp-mode", &err);
        }
        else if (!strcmp(argv[i], "--packed")) packed = true;
        else if (!strcmp(argv[i], "--n-head") && i + 1 < argc) cfg.n_head = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--n-embd") && i + 1 < argc) { /* (Llama's MLP twice as wide) */
            cfg.n_embd = lcfg.n_embd = atoi(argv[++i]);
            lcfg.intermediate_size = 2 * lcfg.n_embd;
        }
        else if (!strcmp(argv[i], "--dump") && i + 1 < argc) dump = argv[++i];
        else if (!strcmp(argv[i], "--lr") && i + 1 < argc) lr = (float)atof(argv[++i]);
        else if (!strcmp(argv[i], "--ulp")) ulp = true;
        else if (!strcmp(argv[i], "--bf16-init")) bf16_init = true;
        else if (!strcmp(argv[i], "--synthetic-grad")) synth = true;
        else if (!strcmp(argv[i], "--lora") && i + 1 < argc) lora.rank = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--quant") && i + 1 < argc) /* QLoRA's base: nf4 or int8 */
            lora.base_quant = !strcmp(argv[++i], "nf4") ? ZT_QUANT_NF4 : ZT_QUANT_INT8;
        else if (!strcmp(argv[i], "--lora-dropout") && i + 1 < argc) lora.dropout = (float)atof(argv[++i]);
        else if (!strcmp(argv[i], "--lora-targets") && i + 1 < argc)
            snprintf(lora.target_modules, sizeof lora.target_modules, "%s", argv[++i]);
        else {
            fprintf(stderr, "unknown argument %s\n", argv[i]);
            return 2;
        }
    }
    tool_precision_apply(&o, &pr);
    if (synth) o.optim.grad_clip = 0.0f; /* the norm's order differs under tp; the coefficient must not */
    zt_model *m;
    zt_engine *e;
    zt_mesh *mesh = NULL;
    zt_mesh_sizes ms = {.tp = tp, .cp = cp, .pp = 1, .hybrid = o.strategy == ZT_STRATEGY_HYBRID,
                        .shard = o.hybrid_shard_size, .ep = ep};
    if (ms.hybrid && tp * cp > 1 && ms.shard == W) ms.shard = W / (tp * cp); /* --hybrid S: dp ranks (default: all) */
    o.T = T / cp; /* each rank's part of every sequence */
    if (zt_mesh_create(W > 1 ? world : NULL, &ms, &mesh, &err)) return tool_fail(world, "mesh", &err);
    o.mesh = mesh;
    /* the data-parallel group: the batch is split over it, the byte formulas are its */
    int rank = mesh->dp_rank, N = mesh->dp;
    lora.alpha = 2.0f * (float)lora.rank;
    if (llama ? zt_llama_create(&lcfg, &m, &err) : zt_gpt2_create(&cfg, &m, &err)) return tool_fail(world, "setup", &err);
    m->sequence_parallel = sp;
    if ((lora.rank && zt_model_add_lora(m, &lora, NULL, &err)) || zt_tp_apply(m, mesh->tp, mesh->tp_rank, &err) ||
        zt_model_set_context_parallel(m, cp, cp_mode, &err) || zt_model_set_expert_parallel(m, mesh->ep, &err) ||
        (!experts_whole && zt_engine_store_experts(m, &o, NULL, &err)) ||
        zt_model_freeze(m, freeze, NULL, &err) || zt_engine_create(m, &o, &e, &err) || zt_engine_init_params(e, &err))
        return tool_fail(world, "setup", &err);
    for (int i = 0; i < m->n_params && (ulp || bf16_init); i++) { /* --ulp: one ulp up, the logical tensors */
        size_t n = (size_t)m->params[i].logical_numel;
        float *buf = malloc(n * sizeof *buf);
        if (!buf || zt_engine_param_gather(e, i, buf, &err)) return tool_fail(world, "ulp", &err);
        if (bf16_init) zt_round_bf16(buf, n); /* --bf16-init: rounded to bf16 */
        else for (size_t k = 0; k < n; k++) buf[k] = nextafterf(buf[k], INFINITY);
        if (zt_engine_param_set(e, i, buf, &err)) return tool_fail(world, "ulp", &err);
        free(buf);
    }
    int64_t P = 0, Pt = 0; /* this part's elements; Pt: the trainable ones, the gradients' */
    int64_t Pe = 0, Pet = 0; /* ... of them the experts stored E/ep a rank (reduced over the edp ranks) */
    double Q = 0; /* the quantized base's sharded bytes (codes and scales, not NF4's replicated tail) */
    for (int i = 0; i < m->n_params; i++) {
        P += m->params[i].quant ? 0 : m->params[i].numel; /* the quantized base moves as its bytes */
        if (m->params[i].trainable) Pt += m->params[i].numel;
        if (m->params[i].shard_group == ZT_SHARD_GROUP_EDP) {
            Pe += m->params[i].numel;
            if (m->params[i].trainable) Pet += m->params[i].numel;
        }
        zt_quant_split qs;
        zt_memory_quant_split(&m->params[i], 1, 0, &qs);
        Q += (double)(qs.end[1] - qs.off[0]);
    }
    bool frozen = freeze || lora.rank; /* LoRA freezes the base weights */
    uint64_t frozen0 = frozen ? frozen_hash(e, m) : 0; /* the frozen parameters as initialized */
    int32_t in[B * T], tg[B * T], pos[B * T], in_l[B * T], tg_l[B * T], pos_l[B * T];
    int status = 0;
    uint64_t tp_bytes = 0, ep_bytes = 0;
    if (wrank == 0) printf("losses");
    for (int s = 0; s < steps; s++) {
        zt_comm_bytes bytes;
        zt_engine_comm_bytes(e, &bytes, true); /* start the step at zero */
        double loss_sum = 0;
        if (s == 1 && wrank == stall) sleep(600);
        for (int k = 0; k < GA; k++) {
            uint64_t micro = (uint64_t)rank * GA + k, first = ((uint64_t)s * N * GA + micro) * B;
            for (int b = 0; b < B; b++) sample(first + b, in + b * T, tg + b * T);
            for (int b = 0; b < B && packed; b++) packed_positions(first + b, pos + b * T);
            zt_batch bt = {.B = B, .T = T, .inputs = in, .targets = tg, .positions = packed ? pos : NULL,
                           .dloss = 1.0f / (float)(B * T * GA * N), .logits_pos = -1};
            if (cp > 1) /* this rank's two chunks, their whole-sequence positions */
                zt_cp_cut_batch(&bt, cp, mesh->cp_rank, in_l, tg_l, pos_l, &bt);
            float loss;
            if (zt_engine_forward_backward(e, &bt, &loss, &err)) {
                tool_fail(world, "forward_backward", &err);
                if (err.code == ZT_ERR_PEER) zt_comm_abort(ZT_ERR_PEER);
                return 1;
            }
            loss_sum += loss;
        }
        if (synth && synthetic_grads(e, m, s, &err)) return tool_fail(world, "--synthetic-grad", &err);
        zt_step_report r;
        if (zt_engine_step(e, lr, &r, &err)) {
            tool_fail(world, "step", &err);
            if (err.code == ZT_ERR_PEER) zt_comm_abort(ZT_ERR_PEER);
            return 1;
        }
        zt_engine_comm_bytes(e, &bytes, true);
        if (zt_engine_sum_ranks(e, &loss_sum, &err)) return tool_fail(world, "loss", &err);
        double mean = loss_sum / ((double)N * GA * cp); /* the cp ranks' means of 1/cp of the positions */
        if (wrank == 0) printf(" %a%s", synth ? 0.0 : mean, r.skipped ? "(skipped)" : "");
        if (wrank == 0 && tp > 1 && s + 1 == steps) tp_bytes = bytes.sent_tp;
        if (wrank == 0 && s + 1 == steps) ep_bytes = bytes.sent_ep;
        /* the byte formulas, summed over the dp group's ranks: (N-1)·P·(kinds) floats of 4 bytes */
        double sent[3] = {(double)bytes.sent_rs, (double)bytes.sent_ag, (double)bytes.sent_ar}, all[3 * 64];
        if (W > 64 || o.optim.kind == ZT_OPT_MUON) continue; /* Muon gathers and broadcasts its matrices too */
        if (zt_all_gather_f64(world, sent, all, 3, "byte check", &err)) return tool_fail(world, "gather bytes", &err);
        double tot[3] = {0, 0, 0};
        for (int q = 0; q < W; q++) /* the ranks of this rank's dp group */
            if (q % tp == mesh->tp_rank)
                for (int k = 0; k < 3; k++) tot[k] += all[3 * q + k];
        /* one pass of P elements over N ranks: gradients in the reduce dtype (of the Pt trainable
         * elements: a frozen parameter is never reduced), parameters in fp32 */
        double gbytes = o.precision.reduce == ZT_DTYPE_FP32 ? 4.0 : 2.0;
        int Nd = N; /* the engine's data-parallel group: dp x cp */
        N = mesh->dp_cp;
        /* the experts stored E/ep a rank move over their ep edp groups of N/ep ranks: summed over
         * the dp group, ep (N/ep - 1) passes of their elements where the dense ones make N - 1 */
        int ep_parts = zt_model_ep_parts(m);
        double f = N > 1 ? (double)ep_parts * (double)(N / ep_parts - 1) / (double)(N - 1) : 0.0;
        double Pw = (double)(P - Pe) + f * (double)Pe, Ptw = (double)(Pt - Pet) + f * (double)Pet;
        double unit = 4.0 * (double)(N - 1) * Pw, gunit = gbytes * (double)(N - 1) * Ptw;
        double want[3] = {0, 0, 0};
        int S = o.strategy == ZT_STRATEGY_HYBRID ? mesh->shard * mesh->cp : N, R = N / S;
        /* hybrid: the experts stored E/ep a rank in-group over the edp ranks of a shard group (Se of
         * them, ep x Re such groups), all-reduced across their Re replicas (comm/mesh.h) */
        int Se = mesh->edp_shard > 0 ? mesh->edp_shard : 1, Re = mesh->edp_replicate > 0 ? mesh->edp_replicate : 1;
        double in_d = (double)(S - 1) * R, in_e = (double)(Se - 1) * ep_parts * Re; /* in-group passes, all groups */
        double shard_unit = 4.0 * (in_d * (double)(P - Pe) + in_e * (double)Pe);
        double gshard_unit = gbytes * (in_d * (double)(Pt - Pet) + in_e * (double)Pet);
        switch (o.strategy) {
        case ZT_STRATEGY_DDP: want[2] = 2 * gunit; break;
        /* zero1/zero2 all-gather the updated parameters: the trainable ones */
        case ZT_STRATEGY_ZERO1: want[0] = gunit; want[1] = 4.0 * (double)(N - 1) * Ptw; break;
        case ZT_STRATEGY_ZERO2:
            want[0] = gunit * (o.reduce_every_micro_batch ? GA : 1);
            want[1] = 4.0 * (double)(N - 1) * Ptw;
            break;
        case ZT_STRATEGY_ZERO3: /* the quantized base's bytes gathered for forward and for backward */
            want[0] = gunit * (o.reduce_every_micro_batch || GA == 1 ? GA : 1);
            want[1] = unit * GA * (o.keep_params_after_forward ? 1 : 2) + (double)(N - 1) * Q * GA * 2;
            break;
        case ZT_STRATEGY_HYBRID: /* zero3 (or zero2) in the group, all-reduce of the pieces across groups */
            want[0] = gshard_unit * (o.reduce_every_micro_batch || GA == 1 ? GA : 1);
            want[1] = shard_unit * GA * (o.keep_params_after_forward ? 1 : 2) + (double)(S - 1) * Q * R * GA * 2;
            if (o.hybrid_inner == ZT_STRATEGY_ZERO2) /* the updated (trainable) parameters gathered once */
                want[1] = 4.0 * (in_d * (double)(Pt - Pet) + in_e * (double)Pet);
            /* each piece all-reduced over its replicas: R (Re for the experts stored) */
            want[2] = 2.0 * gbytes * ((double)(Pt - Pet) * (R - 1) + (double)Pet * ep_parts * (Re - 1));
            break;
        }
        if (N == 1) want[0] = want[1] = want[2] = 0;
        N = Nd;
        for (int k = 0; k < 3; k++)
            if (tot[k] != want[k]) {
                if (rank == 0)
                    fprintf(stderr, "step %d: %s bytes sent over the dp group: %.0f, formula %.0f (P=%lld, N=%d)\n",
                            s + 1, k == 0 ? "reduce-scatter" : k == 1 ? "all-gather" : "all-reduce", tot[k],
                            want[k], (long long)P, N);
                status = 1;
            }
    }
    uint64_t h = zt_engine_param_hash(e);
    if (dump) { /* the logical tensors (a collective under sharding and tp: every rank gathers) */
        FILE *f = wrank == 0 ? fopen(dump, "wb") : NULL;
        for (int i = 0; i < m->n_params; i++) {
            float *buf = malloc((size_t)m->params[i].logical_numel * sizeof *buf);
            if (!buf || zt_engine_param_gather(e, i, buf, &err)) return tool_fail(world, "dump", &err);
            if (f) fwrite(buf, sizeof *buf, (size_t)m->params[i].logical_numel, f);
            free(buf);
        }
        if (f) fclose(f);
    }

    if (frozen) { /* the frozen parameters keep their initial bits, on every strategy */
        uint64_t frozen1 = frozen_hash(e, m);
        if (wrank == 0) printf("\nfrozen %016llx -> %016llx", (unsigned long long)frozen0, (unsigned long long)frozen1);
        if (!frozen0 || frozen1 != frozen0) status = 1;
    }
    zt_memory_report mem;
    zt_engine_memory(e, &mem);
    if (wrank == 0) {
        printf("\nhash %016llx\n", (unsigned long long)h);
        if (tp > 1) { /* docs/parallelism.md: per micro-batch, 2 + 4L all-reduces of (B,T,C) (the embedding,
                       * each block's two in forward and two in backward, the LM head's input gradient;
                       * full recomputation re-runs the blocks' two forward ones), the loss's row maxima
                       * (B·T floats) and sums (2·B·T doubles) all-gathered; per step the norm's double */
            int L = llama ? LLAMA.n_layer : CFG.n_layer, C = llama ? LLAMA.n_embd : CFG.n_embd, Nt = B * T / cp;
            double ar = (2.0 + 4.0 * L + (o.activation_checkpointing == ZT_RECOMPUTE_FULL ? 2.0 * L : 0.0)) *
                        Nt * C * 4.0 * 2.0 * (tp - 1) / tp;
            /* --sp: each all-reduce becomes a reduce-scatter and an all-gather of the same (B,T,C),
             * which together move its bytes (the embedding's and the LM head's too: their halves sit
             * in forward and backward); added per micro-batch: the all-gathers that re-build the
             * column-parallel Linears' whole input in backward (2 per block, 1 for the LM head) in
             * the operand's dtype (bf16: 2 bytes), and one all-reduce of the norms' weight gradients
             * per block and one in the head (GPT-2: 4C and 2C floats, Llama: 2C and C) */
            double op = o.precision.compute == ZT_DTYPE_BF16 ? 2.0 : 4.0;
            double again = sp ? (2.0 * L + 1.0) * Nt * C * op * (tp - 1) / tp : 0.0;
            double norms = sp ? (llama ? 2.0 * C * L + C : 4.0 * C * L + 2.0 * C) * 4.0 * 2.0 * (tp - 1) / tp : 0.0;
            /* a mixture (llama-moe): each block's backward also sums the top-k weights' gradient
             * (B·T·k floats; src/model/llama_moe.c), with a gated shared expert its dout·ys beside it
             * (B·T more) */
            int kg = lcfg.n_experts_per_token + (lcfg.shared_expert_gate ? 1 : 0);
            double topk = lcfg.n_experts ? (double)L * Nt * kg * 4.0 * 2.0 * (tp - 1) / tp : 0.0;
            double want = GA * (ar + again + norms + topk + (tp - 1) * (4.0 * Nt + 16.0 * Nt)) + (tp - 1) * 8.0;
            printf("tp bytes %llu (formula %.0f)\n", (unsigned long long)tp_bytes, want);
            /* Muon and LAMB gather their cut tensors over the tp group too (step_whole.c): not in it */
            if ((double)tp_bytes != want && o.optim.kind != ZT_OPT_MUON && o.optim.kind != ZT_OPT_LAMB) status = 1;
        }
        if (mesh->ep > 1) printf("ep bytes %llu\n", (unsigned long long)ep_bytes);
        printf("memory at rest: params %zu grads %zu optimizer %zu; peaks: params %zu grads %zu\n", mem.params,
               mem.grads, mem.optimizer, mem.peak_params, mem.peak_grads);
        printf("activations %zu\n", mem.activations);
        zt_memory_plan mp;
        zt_engine_memory_plan(e, &mp);
        printf("planned at rest %zu, high-water %zu (gathered %zu)\n", mp.rest[ZT_MEM_PARAMS] +
               mp.rest[ZT_MEM_GRADS] + mp.rest[ZT_MEM_OPTIMIZER], mp.peak_total, mp.peak[ZT_MEM_GATHERED]);
        if (o.strategy == ZT_STRATEGY_HYBRID) printf("shard groups of %d\n", mesh->shard);
    }
    /* zero3 at rest holds exactly its pieces four times: parameters, gradients, m and v, i.e.
     * 16 bytes per owned element (test_plan.c checks the pieces are 1/N of GPT-2 124M); with
     * --freeze the gradients and m, v cover the trainable parameters' pieces only */
    zt_plan pl;
    if (o.strategy == ZT_STRATEGY_ZERO3 && (o.optim.kind == ZT_OPT_ADAMW || o.optim.kind == ZT_OPT_SGD) &&
        !plan_of(m, &o, mesh, &pl, &err)) {
        /* each array as allocated (zt_memory_alloc_bytes: 64 bytes even when a rank owns no
         * trainable element, as LoRA's few small adapters can leave it) */
        size_t want_p = zt_memory_alloc_bytes(pl.shard_floats), want_g = zt_memory_alloc_bytes(pl.gshard_floats);
        size_t quant = zt_memory_quant_local_floats(m, pl.nshards, pl.shard); /* this rank's quantized blocks */
        if (quant) want_p += zt_memory_alloc_bytes(quant);
        if (mem.params != want_p || mem.grads != want_g || mem.optimizer != 2 * want_g) {
            fprintf(stderr, "rank %d: zero3 model states at rest: params %zu grads %zu optimizer %zu, expected "
                    "%zu, %zu (the trainable pieces) and 2 x that\n", rank, mem.params, mem.grads, mem.optimizer,
                    want_p, want_g);
            status = 1;
        }
        if (frozen && wrank == 0)
            printf("zero3 rank 0 at rest: params %zu grads %zu optimizer %zu bytes\n", mem.params, mem.grads,
                   mem.optimizer);
        if (lora.rank) { /* every rank: its pieces, base weights and adapters, against the counters */
            int64_t base = 0, adapters = 0;
            for (int i = 0; i < m->n_params; i++) /* (the quantized base has no pieces) */
                *(m->params[i].lora ? &adapters : &base) += m->params[i].quant ? 0 : zt_plan_shard_numel(&pl, i, rank);
            zt_memory_plan mp;
            zt_engine_memory_plan(e, &mp);
            printf("zero3 rank %d at rest: base pieces %lld + adapter pieces %lld elements; engine counters: params "
                   "%zu grads %zu optimizer %zu bytes; memory plan %zu %zu %zu\n", rank, (long long)base,
                   (long long)adapters, mem.params, mem.grads, mem.optimizer, mp.rest[ZT_MEM_PARAMS],
                   mp.rest[ZT_MEM_GRADS], mp.rest[ZT_MEM_OPTIMIZER]);
            fflush(stdout);
            if (mem.params != mp.rest[ZT_MEM_PARAMS] || mem.grads != mp.rest[ZT_MEM_GRADS] ||
                mem.optimizer != mp.rest[ZT_MEM_OPTIMIZER] || mem.params < 4 * (size_t)(base + adapters) ||
                mem.grads < 4 * (size_t)adapters || mem.grads >= 4 * (size_t)adapters + 64 * (size_t)m->n_params) {
                fprintf(stderr, "rank %d: LoRA zero3 model states differ from the plan or from 4 x (base + adapters), "
                        "4 x adapters\n", rank);
                status = 1;
            }
        }
        zt_plan_free(&pl);
    }
    zt_engine_free(e);
    zt_model_free(m);
    zt_mesh_free(mesh);
    zt_comm_free(world);
    tool_finished = true; /* tool_main finalizes MPI */
    return status;
}

int main(int argc, char **argv) { return tool_main(argc, argv, run); }
