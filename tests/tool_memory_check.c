/* tool_memory_check.c - one rank of a memory-plan run (tests/memory_plan.sh drives it under
 * mpirun): trains a GPT-2 for a few steps and compares, on every rank, the engine's measured
 * high-water per memory class (zt_engine_memory) with the plan it computed at creation
 * (zt_engine_memory_plan) and with the plan computed independently from the options alone
 * (zt_memory_plan_compute, as `zerotrain estimate-memory` does). Rank 0 prints one line per rank:
 *   rank R: class plan/measured ... | peak total plan/measured | worst deviation
 * and, for zero3 with fp32 AdamW, checks the model states at rest (parameters, gradients, m, v):
 * 16 bytes per element this rank owns, and, with --balanced, within 1% of 16·Ψ/N.
 *   tool_memory_check STRATEGY GA STEPS [--preset tiny] [--B b] [--T t] [--hybrid S] [--keep]
 *                     [--reduce-every] [--bucket-mb X] [--precision fp32|bf16|bf16-low|fp16]
 *                     [--no-prefetch] [--inner-zero2] [--recompute none|full|selective]
 *                     [--balanced] [--tolerance PCT] [--reduce fp32|bf16|fp16]
 *                     [--attention flash|naive]  (the model's attention kernel, default flash)
 *                     [--freeze REGEX]  (zt_model_freeze: the closed forms below are replaced by,
 *                     for zero3 fp32 AdamW, 4 bytes per owned element + 12 per owned trainable one)
 *                     [--tp P]  (tensor parallelism: the mesh tp P x dp N/P, the model cut by zt_tp_apply;
 *                     every world rank's classes are compared, the closed forms are skipped)
 *                     [--sp]  (with --tp: sequence parallelism, the norms' and residuals' activations
 *                     cut along T; rank 0 prints "activations planned BYTES")
 *                     [--lora R] [--lora-targets T] [--lora-dropout P] [--quant nf4|int8]  (zt_model_add_lora, default
 *                     targets all-linear: the base weights frozen, the same closed form as --freeze
 *                     with the adapters as the trainable elements)
 * Exit 0 when every class of every rank is within the tolerance (3% unless given), 1 otherwise. */
#include "comm/comm.h"
#include "comm/mesh.h"
#include "memory/plan.h"
#include "shard/tp.h"
#include "tool_common.h"
#include "zerotrain/zerotrain.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const zt_gpt2_config SMALL = {.max_seq_len = 16, .vocab_size = 96, .n_layer = 2, .n_head = 2, .n_embd = 32};

static uint64_t mix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* what each rank sends to rank 0: plan peak, measured peak per class, totals, states, elements */
enum { NV = 2 * ZT_MEM_CLASSES + 6 };

static int run(int argc, char **argv) {
    zt_error err = {0};
    zt_comm *world = NULL;
    zt_engine_options o;
    tool_precision pr;
    int GA = 0, steps = 0;
    int rc = tool_start(&argc, &argv, "[options]", &world, &o, &pr, &GA, &steps);
    if (rc) return rc;
    int W = zt_comm_size(world), tp = 1;
    bool sp = false; /* --sp: sequence parallelism over the tp group */
    zt_gpt2_config cfg = SMALL;
    o.B = 2;
    o.T = 16;
    bool balanced = false;
    const char *freeze = NULL;
    zt_attention attention = ZT_ATTENTION_FLASH;
    zt_lora_config lora = {.alpha = 8.0f, .target_modules = "all-linear"};
    double tol = 3.0;
    for (int i = 4; i < argc; i++) {
        int got = tool_engine_option(argc, argv, &i, &o, &pr);
        if (got < 0) return 2;
        if (got) continue;
        const char *a = argv[i];
        if (!strcmp(a, "--preset") && i + 1 < argc) {
            if (zt_gpt2_preset(argv[++i], &cfg, &err)) return tool_fail(world, "preset", &err);
        } else if (!strcmp(a, "--B") && i + 1 < argc) o.B = atoi(argv[++i]);
        else if (!strcmp(a, "--T") && i + 1 < argc) o.T = atoi(argv[++i]);
        else if (!strcmp(a, "--balanced")) balanced = true;
        else if (!strcmp(a, "--freeze") && i + 1 < argc) freeze = argv[++i];
        else if (!strcmp(a, "--attention") && i + 1 < argc) {
            if (zt_attention_parse(argv[++i], &attention, &err)) return tool_fail(world, "--attention", &err);
        }
        else if (!strcmp(a, "--lora") && i + 1 < argc) lora.rank = atoi(argv[++i]);
        else if (!strcmp(a, "--quant") && i + 1 < argc) /* QLoRA's base: nf4 or int8 */
            lora.base_quant = !strcmp(argv[++i], "nf4") ? ZT_QUANT_NF4 : ZT_QUANT_INT8;
        else if (!strcmp(a, "--lora-dropout") && i + 1 < argc) lora.dropout = (float)atof(argv[++i]);
        else if (!strcmp(a, "--lora-targets") && i + 1 < argc)
            snprintf(lora.target_modules, sizeof lora.target_modules, "%s", argv[++i]);
        else if (!strcmp(a, "--tolerance") && i + 1 < argc) tol = atof(argv[++i]);
        else if (!strcmp(a, "--tp") && i + 1 < argc) tp = atoi(argv[++i]);
        else if (!strcmp(a, "--sp")) sp = true;
        else {
            fprintf(stderr, "unknown option %s\n", a);
            return 2;
        }
    }
    tool_precision_apply(&o, &pr);
    cfg.attention = attention; /* after --preset, which sets the whole config */
    zt_model *m;
    zt_engine *e;
    zt_mesh *mesh = NULL;
    zt_mesh_sizes ms = {.tp = tp, .pp = 1, .hybrid = o.strategy == ZT_STRATEGY_HYBRID, .shard = o.hybrid_shard_size};
    if (ms.hybrid && tp > 1 && ms.shard == W) ms.shard = W / tp; /* --hybrid S: dp ranks (default: all) */
    if (zt_mesh_create(W > 1 ? world : NULL, &ms, &mesh, &err)) return tool_fail(world, "mesh", &err);
    o.mesh = mesh;
    if (ms.hybrid) o.hybrid_shard_size = mesh->shard;
    int rank = mesh->dp_rank, N = mesh->dp; /* the data and the plan are the dp group's */
    if (zt_gpt2_create(&cfg, &m, &err)) return tool_fail(world, "setup", &err);
    m->sequence_parallel = sp;
    if ((lora.rank && zt_model_add_lora(m, &lora, NULL, &err)) || zt_tp_apply(m, mesh->tp, mesh->tp_rank, &err) ||
        zt_model_freeze(m, freeze, NULL, &err) || zt_engine_create(m, &o, &e, &err) || zt_engine_init_params(e, &err))
        return tool_fail(world, "setup", &err);
    /* the plan from the options alone (the estimator's way) must be the engine's own */
    zt_memory_plan plan, indep;
    zt_engine_memory_plan(e, &plan);
    zt_memory_plan_options po;
    zt_memory_plan_options_default(&po);
    po.overlap = plan.overlap; /* the engine knows whether MPI gave it thread support */
    if (zt_memory_plan_compute(m, &o, &po, N, rank, &indep, &err)) return tool_fail(world, "plan", &err);
    int status = 0;
    if (memcmp(indep.peak, plan.peak, sizeof plan.peak) || indep.peak_total != plan.peak_total) {
        fprintf(stderr, "rank %d: the plan from the options differs from the engine's (shared segments %zu, %zu)\n", rank, indep.shm, plan.shm);
        status = 1;
    }
    /* the shared segments are planned: data parallelism over the world holds the world's region
     * (ranks on this machine; none with ZT_COMM_AR_SHM_BYTES=0), and the communication thread's
     * duplicate's */
    if (W > 1 && tp == 1 && o.strategy != ZT_STRATEGY_HYBRID) {
        size_t want = zt_comm_shm_bytes(world) * (plan.overlap ? 2 : 1);
        if (plan.shm != want) {
            fprintf(stderr, "rank %d: planned shared segments %zu bytes, the comms hold %zu (world has one: %d)\n", rank,
                    plan.shm, want, zt_comm_has_shm(world));
            status = 1;
        }
    }
    size_t BT = (size_t)o.B * o.T;
    int32_t *in = malloc(BT * sizeof *in), *tg = malloc(BT * sizeof *tg);
    if (!in || !tg) return tool_fail(world, "alloc", NULL);
    for (int s = 0; s < steps; s++) {
        for (int k = 0; k < GA; k++) {
            uint64_t first = ((uint64_t)s * N * GA + (uint64_t)rank * GA + k) * (uint64_t)o.B;
            for (size_t t = 0; t < BT; t++) {
                in[t] = (int32_t)(mix((first + t / o.T) * 131 + t % o.T / 2) % (uint64_t)cfg.vocab_size);
                tg[t] = (int32_t)(mix((first + t / o.T) * 131 + (t % o.T + 1) / 2) % (uint64_t)cfg.vocab_size);
            }
            zt_batch bt = {.B = o.B, .T = o.T, .inputs = in, .targets = tg,
                           .dloss = 1.0f / (float)(BT * GA * N), .logits_pos = -1};
            float loss;
            if (zt_engine_forward_backward(e, &bt, &loss, &err)) return tool_fail(world, "forward_backward", &err);
        }
        zt_step_report r;
        if (zt_engine_step(e, 1e-3f, &r, &err)) return tool_fail(world, "step", &err);
    }
    zt_memory_report mem;
    zt_engine_memory(e, &mem);
    /* model states at rest: parameters + gradients + optimizer (bytes) */
    double states = (double)mem.params + mem.compute_copy + mem.grads + mem.optimizer;
    int64_t owned = 0, owned_t = 0; /* elements this rank's pieces hold (zero3); of them trainable */
    for (int i = 0; i < m->n_params; i++) {
        int64_t n;
        if (m->params[i].quant) continue; /* the quantized base: replicated, not owned (param_quant.c) */
        zt_engine_param_local(e, i, NULL, &n);
        owned += n;
        if (m->params[i].trainable) owned_t += n;
    }
    bool frozen = freeze || lora.rank; /* LoRA freezes the base weights */
    if (frozen && !lora.base_quant && o.strategy == ZT_STRATEGY_ZERO3 && pr.mode == ZT_PRECISION_FP32 && o.optim.kind == ZT_OPT_ADAMW) {
        /* frozen: a piece, no gradient, no m and v */
        double want = 4.0 * (double)owned + 12.0 * (double)owned_t;
        if (zt_comm_rank(world) == 0)
            printf("zero3 %s model states at rest: %.0f bytes = 4 x %lld owned + 12 x %lld trainable + %.0f "
                   "alignment (grads %zu, optimizer %zu; unfrozen it would be 16 x %lld)\n", lora.rank ? "LoRA" : "frozen",
                   states, (long long)owned, (long long)owned_t, states - want, mem.grads, mem.optimizer,
                   (long long)owned);
        if (states < want || states - want > 4.0 * 64.0 * m->n_params || states != zt_memory_plan_model_states(&plan)) {
            fprintf(stderr, "rank %d: zero3 frozen model states %.0f bytes, expected %.0f (+ alignment) = plan %zu\n",
                    rank, states, want, (size_t)zt_memory_plan_model_states(&plan));
            status = 1;
        }
    }
    double mine[NV], *all = calloc((size_t)W * NV, sizeof *all);
    for (int c = 0; c < ZT_MEM_CLASSES; c++) {
        mine[c] = (double)plan.peak[c];
        mine[ZT_MEM_CLASSES + c] = (double)mem.peak[c];
    }
    double *tail = mine + 2 * ZT_MEM_CLASSES;
    tail[0] = (double)plan.peak_total;
    tail[1] = (double)mem.peak_total;
    tail[2] = states;
    tail[3] = (double)owned;
    tail[4] = (double)zt_memory_plan_model_states(&plan);
    tail[5] = 0;
    for (int c = 0; c < ZT_MEM_CLASSES; c++) /* at rest the engine holds the plan's rest */
        if (mem.now[c] != plan.rest[c]) tail[5] = 1;
    if (!all || zt_all_gather_f64(world, mine, all, NV, "memory check", &err)) return tool_fail(world, "gather", &err);
    int64_t P = zt_model_numel(m); /* the elements the ranks' pieces hold: not the quantized base */
    for (int i = 0; i < m->n_params; i++) P -= m->params[i].quant ? m->params[i].numel : 0;
    if (zt_comm_rank(world) == 0) {
        int exact = 0, checked = 0;
        double total_owned = 0;
        for (int r = 0; r < W; r++) { /* every world rank */
            const double *v = all + (size_t)r * NV, *t = v + 2 * ZT_MEM_CLASSES;
            double worst = 0;
            printf("rank %d:", r);
            for (int c = 0; c <= ZT_MEM_CLASSES; c++) {
                double p = c < ZT_MEM_CLASSES ? v[c] : t[0], q = c < ZT_MEM_CLASSES ? v[ZT_MEM_CLASSES + c] : t[1];
                double dev = p > 0 ? 100.0 * fabs(q - p) / p : (q > 0 ? 100.0 : 0.0);
                if (dev > worst) worst = dev;
                checked++;
                exact += p == q;
                if (p > 0 || q > 0)
                    printf(" %s %.0f/%.0f", c < ZT_MEM_CLASSES ? zt_mem_class_name((zt_mem_class)c) : "| total", p, q);
                if (dev > tol) {
                    fprintf(stderr, "rank %d: %s planned %.0f bytes, measured %.0f (%.2f%% > %.1f%%)\n", r,
                            c < ZT_MEM_CLASSES ? zt_mem_class_name((zt_mem_class)c) : "peak total", p, q, dev, tol);
                    status = 1;
                }
            }
            printf(" | worst %.3f%%\n", worst);
            if (t[5] != 0) {
                fprintf(stderr, "rank %d: the bytes held at rest differ from the plan's rest\n", r);
                status = 1;
            }
            total_owned += t[3];
            /* the closed forms below: a whole model, nothing frozen, AdamW/SGD (Muon and LAMB hold more:
             * their buffers, which the plan comparison above checks) */
            if (frozen || tp > 1 || o.optim.kind == ZT_OPT_MUON || o.optim.kind == ZT_OPT_LAMB) continue;
            if (o.strategy == ZT_STRATEGY_ZERO3 && pr.mode == ZT_PRECISION_FP32) {
                /* fp32 AdamW: 4 (param) + 4 (grad) + 8 (m, v) bytes per owned element, each piece
                 * 64-byte aligned: 16 x the shard layout exactly */
                double want = 16.0 * t[3], ideal = 16.0 * (double)P / N;
                printf("  zero3 model states at rest: %.0f bytes = 16 x %.0f owned elements + %.0f alignment; "
                       "16·Ψ/N = %.0f (%+.3f%%)\n", t[2], t[3], t[2] - want, ideal, 100.0 * (t[2] - ideal) / ideal);
                if (t[2] < want || t[2] - want > 4.0 * 64.0 * m->n_params || t[2] != t[4]) {
                    fprintf(stderr, "rank %d: zero3 model states %.0f bytes, expected 16 x %.0f (+ alignment) = plan %.0f\n",
                            r, t[2], t[3], t[4]);
                    status = 1;
                }
                if (balanced && fabs(t[2] - ideal) > 0.01 * ideal) {
                    fprintf(stderr, "rank %d: zero3 model states %.0f bytes, more than 1%% from 16·Ψ/N = %.0f\n", r,
                            t[2], ideal);
                    status = 1;
                }
            }
            if (o.strategy == ZT_STRATEGY_ZERO3 && pr.mode == ZT_PRECISION_BF16_LOW && o.optim.kind == ZT_OPT_ADAMW) {
                /* bf16-low AdamW: 2 (bf16 param) + 2 + 2 (bf16 m, v) bytes per owned element, no
                 * gradient between steps (the reduced pieces live during the step only), and the
                 * three fp32 update chunks (parameters, m, v) of min(65536, owned) elements */
                double chunk = t[3] < 65536 ? (t[3] > 0 ? t[3] : 1) : 65536;
                double want = 6.0 * t[3] + 3.0 * 4.0 * chunk;
                printf("  zero3 bf16-low model states at rest: %.0f bytes = 6 x %.0f owned elements + 3 fp32 chunks "
                       "of %.0f + %.0f alignment\n", t[2], t[3], chunk, t[2] - want);
                if (t[2] < want || t[2] - want > 3.0 * 64.0 * m->n_params + 3.0 * 64.0 || t[2] != t[4]) {
                    fprintf(stderr, "rank %d: zero3 bf16-low model states %.0f bytes, expected 6 x %.0f + chunks "
                            "(+ alignment) = plan %.0f\n", r, t[2], t[3], t[4]);
                    status = 1;
                }
            }
            if ((o.strategy == ZT_STRATEGY_ZERO1 || o.strategy == ZT_STRATEGY_ZERO2) && o.optim.kind == ZT_OPT_ADAMW &&
                (pr.mode == ZT_PRECISION_BF16 || pr.mode == ZT_PRECISION_FP16)) {
                /* the fp32 master is sharded (master_shard.c): 4 (master) + 4 (reduced gradient) +
                 * 8 (m, v) bytes per owned element, plus the replicated compute copy of every
                 * parameter (2 bytes bf16, 4 fp16: full layout) and an fp32 copy of those read as
                 * fp32 (4 bytes: the layernorm weights and biases) */
                int lp = zt_precision_lp_kind(&o.precision);
                double copy = pr.mode == ZT_PRECISION_BF16 ? 2.0 : 4.0, P32 = 0;
                for (int i = 0; i < m->n_params; i++)
                    if (zt_param_reads_fp32(m, lp, i)) P32 += (double)m->params[i].numel;
                double want = 16.0 * t[3] + copy * (double)P + 4.0 * P32;
                double closed = copy + 16.0 / N + 4.0 * P32 / (double)P;
                printf("  %s %s model states at rest: %.0f bytes = %.0f + 16 x %.0f owned + 4 x %.0f fp32-read + %.0f "
                       "alignment; %.4f bytes per parameter, closed form %.0f + 16/%d + 4·%.0f/Ψ = %.4f\n",
                       zt_strategy_name(o.strategy), zt_precision_mode_name(pr.mode), t[2], copy * (double)P, t[3], P32,
                       t[2] - want, t[2] / (double)P, copy, N, P32, closed);
                if (t[2] < want || t[2] - want > 6.0 * 64.0 * m->n_params || t[2] != t[4]) {
                    fprintf(stderr, "rank %d: %s model states %.0f bytes, expected %.0f (+ alignment) = plan %.0f\n", r,
                            zt_strategy_name(o.strategy), t[2], want, t[4]);
                    status = 1;
                }
                if (balanced && fabs(t[2] / (double)P - closed) > 0.01 * closed) {
                    fprintf(stderr, "rank %d: %.4f bytes per parameter, more than 1%% from the closed form %.4f\n", r,
                            t[2] / (double)P, closed);
                    status = 1;
                }
            }
        }
        if (o.strategy == ZT_STRATEGY_ZERO3 && N > 1 && tp == 1 && total_owned != (double)P) {
            fprintf(stderr, "zero3: the ranks own %.0f elements together, the model has %lld\n", total_owned,
                    (long long)P);
            status = 1;
        }
        printf("%d of %d (class, rank) high-waters exact; plan overlap %s, staging main %zu thread %zu\n", exact,
               checked, plan.overlap ? "on" : "off", plan.pack_main, plan.pack_thread);
    }
    free(all);
    free(in);
    free(tg);
    zt_engine_free(e);
    zt_model_free(m);
    zt_mesh_free(mesh);
    zt_comm_free(world);
    tool_finished = true; /* tool_main finalizes MPI */
    return status;
}

int main(int argc, char **argv) { return tool_main(argc, argv, run); }
