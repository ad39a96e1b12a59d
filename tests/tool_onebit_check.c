/* tool_onebit_check.c - one rank of a 1-bit Adam run that tests/onebit_ref.py replays (tests/onebit.sh,
 * tests/onebit_hybrid.sh drive it under mpirun). The small GPT-2 of tool_dist_check on synthetic
 * tokens, ddp or hybrid, fp32, optimizer onebit_adam with the given freeze step, no clipping (so the
 * step's gradient scale is exactly the replica count), a constant learning rate. It writes into DIR:
 *   meta.txt          N F STEPS lr beta1 beta2 eps weight_decay bias_correction, then one line per
 *                     trainable parameter: numel decay
 *   state0.bin        (rank 0) before step F+1, the first compressed one: the trainable parameters,
 *                     exp_avg and exp_avg_sq, each in table order (fp32)
 *   grad-S-R.bin      rank R's own gradient of step S+1 (S >= F), as the engine's step reads it
 *   final-R.bin       after the last step: parameters, exp_avg, rank R's worker error, its server error
 * Under hybrid (a sharded optimizer) every array is this rank's pieces in the state layout (its dim-0
 * rows of each trainable parameter, table order), the gradient the shard group's reduced pieces,
 * and every rank writes its own meta-R.txt (N S REPLICAS replica_rank F STEPS lr beta1 beta2 eps
 * weight_decay bias_correction, then per trainable parameter: the piece's numel, decay, its first
 * element in the full tensor) and state0-R.bin.
 *   tool_onebit_check ddp|hybrid 1 STEPS --freeze-step F --dump DIR [--hybrid S] [--inner-zero2] [--ds]
 *                     [--wd X] [--lr X]   (--ds: optimizer.onebit_bias_correction false, DeepSpeed's kernel)
 * and prints "params xxh64 H" on rank 0. Exit 0, or 1 with a message. */
#include "comm/comm.h"
#include "engine/engine_state.h"
#include "tool_common.h"
#include "zerotrain/zerotrain.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const zt_gpt2_config CFG = {.max_seq_len = 16, .vocab_size = 96, .n_layer = 2, .n_head = 2, .n_embd = 32};
enum { B = 2, T = 16 };

static uint64_t mix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

static void sample(uint64_t s, int32_t *in, int32_t *tg) {
    int32_t tok[T + 1];
    for (int t = 0; t <= T; t++) tok[t] = (int32_t)((mix(s * 131 + (uint64_t)t / 2) % CFG.vocab_size));
    memcpy(in, tok, T * sizeof *in);
    memcpy(tg, tok + 1, T * sizeof *tg);
}

static FILE *open_out(const char *dir, const char *name, int a, int b) {
    char path[4200], leaf[128];
    snprintf(leaf, sizeof leaf, name, a, b);
    snprintf(path, sizeof path, "%s/%s", dir, leaf);
    return fopen(path, "wb");
}

/* kind 0: parameters, 1: exp_avg, 2: exp_avg_sq, 3: the gradient; every trainable one in table order
 * (a sharded optimizer: this rank's pieces, the state layout) */
static void write_kind(FILE *f, zt_engine *e, const zt_model *m, int kind) {
    const zt_plan *pl = zt_engine_plan(e);
    for (int i = 0; i < m->n_params && zt_engine_shards_optim(e); i++) {
        if (!m->params[i].trainable) continue;
        size_t cnt = (size_t)zt_plan_shard_numel(pl, i, pl->shard), off = pl->p[i].gshard_off;
        size_t local0 = zt_store_local_is_piece(e) ? 0 : (size_t)zt_plan_shard_begin(pl, i, pl->shard);
        const float *src = kind == 0   ? zt_store_local_fp32(e, i) + local0
                           : kind == 3 ? zt_engine_grad_pieces(e) + off
                                       : zt_engine_state_ptr(e, kind - 1) + off;
        fwrite(src, sizeof(float), cnt, f);
    }
    for (int i = 0; i < m->n_params && !zt_engine_shards_optim(e); i++) {
        if (!m->params[i].trainable) continue;
        size_t n = (size_t)m->params[i].numel;
        const float *src = kind == 0   ? zt_engine_param(e, i)
                           : kind == 3 ? zt_engine_grad(e, i)
                                       : zt_engine_state_ptr(e, kind - 1) + zt_engine_plan(e)->p[i].gfull_off;
        fwrite(src, sizeof(float), n, f);
    }
}

static int run(int argc, char **argv) {
    zt_error err = {0};
    zt_comm *world = NULL;
    zt_engine_options o;
    tool_precision pr;
    int GA = 0, steps = 0;
    int rc = tool_start(&argc, &argv, "--freeze-step F --dump DIR [--ds] [--wd X] [--lr X]", &world, &o, &pr, &GA, &steps);
    if (rc) return rc;
    int rank = zt_comm_rank(world), N = zt_comm_size(world);
    const char *dir = NULL;
    float lr = 1e-2f;
    o.B = B;
    o.T = T;
    o.optim.kind = ZT_OPT_ONEBIT_ADAM;
    o.optim.grad_clip = 0.0f; /* the step's gradient scale is N exactly */
    o.optim.onebit_freeze_step = 2;
    for (int i = 4; i < argc; i++) {
        int got = tool_engine_option(argc, argv, &i, &o, &pr);
        if (got < 0) return 2;
        if (got) continue;
        if (!strcmp(argv[i], "--freeze-step") && i + 1 < argc) o.optim.onebit_freeze_step = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--dump") && i + 1 < argc) dir = argv[++i];
        else if (!strcmp(argv[i], "--ds")) o.optim.onebit_bias_correction = false;
        else if (!strcmp(argv[i], "--wd") && i + 1 < argc) o.optim.weight_decay = (float)atof(argv[++i]);
        else if (!strcmp(argv[i], "--lr") && i + 1 < argc) lr = (float)atof(argv[++i]);
        else {
            fprintf(stderr, "unknown argument %s\n", argv[i]);
            return 2;
        }
    }
    if (!dir) {
        fprintf(stderr, "--dump DIR is required\n");
        return 2;
    }
    tool_precision_apply(&o, &pr);
    zt_model *m;
    zt_engine *e;
    if (zt_gpt2_create(&CFG, &m, &err) || zt_engine_create(m, &o, &e, &err) || zt_engine_init_params(e, &err))
        return tool_fail(world, "setup", &err);
    int64_t F = o.optim.onebit_freeze_step;
    bool pieces = zt_engine_shards_optim(e);
    if (pieces) { /* hybrid: every rank's layout */
        const zt_plan *pl = zt_engine_plan(e);
        zt_comm *rc_ = zt_engine_replica_comm(e);
        FILE *f = open_out(dir, "meta-%d.txt", rank, 0);
        fprintf(f, "%d %d %d %d %lld %d %.9g %.9g %.9g %.9g %.9g %d\n", N, pl->nshards, rc_ ? zt_comm_size(rc_) : 1,
                rc_ ? zt_comm_rank(rc_) : 0, (long long)F, steps, (double)lr, (double)o.optim.beta1, (double)o.optim.beta2,
                (double)o.optim.eps, (double)o.optim.weight_decay, (int)o.optim.onebit_bias_correction);
        for (int i = 0; i < m->n_params; i++)
            if (m->params[i].trainable)
                fprintf(f, "%lld %d %lld\n", (long long)zt_plan_shard_numel(pl, i, pl->shard), (int)m->params[i].decay,
                        (long long)zt_plan_shard_begin(pl, i, pl->shard));
        fclose(f);
    } else if (rank == 0) {
        FILE *f = open_out(dir, "meta.txt", 0, 0);
        fprintf(f, "%d %lld %d %.9g %.9g %.9g %.9g %.9g %d\n", N, (long long)F, steps, (double)lr, (double)o.optim.beta1,
                (double)o.optim.beta2, (double)o.optim.eps, (double)o.optim.weight_decay, (int)o.optim.onebit_bias_correction);
        for (int i = 0; i < m->n_params; i++)
            if (m->params[i].trainable) fprintf(f, "%lld %d\n", (long long)m->params[i].numel, (int)m->params[i].decay);
        fclose(f);
    }
    int32_t in[B * T], tg[B * T];
    for (int s = 0; s < steps; s++) {
        uint64_t first = ((uint64_t)s * N + (uint64_t)rank) * B;
        for (int b = 0; b < B; b++) sample(first + b, in + b * T, tg + b * T);
        zt_batch bt = {.B = B, .T = T, .inputs = in, .targets = tg, .dloss = 1.0f / (float)(B * T * N), .logits_pos = -1};
        float loss;
        if (zt_engine_forward_backward(e, &bt, &loss, &err)) return tool_fail(world, "forward_backward", &err);
        if (s == F && (rank == 0 || pieces)) { /* the state the first compressed step starts from */
            FILE *f = pieces ? open_out(dir, "state0-%d.bin", rank, 0) : open_out(dir, "state0.bin", 0, 0);
            for (int k = 0; k < 3; k++) write_kind(f, e, m, k);
            fclose(f);
        }
        if (s >= F) {
            FILE *f = open_out(dir, "grad-%d-%d.bin", s, rank);
            write_kind(f, e, m, 3);
            fclose(f);
        }
        zt_step_report r;
        if (zt_engine_step(e, lr, &r, &err)) return tool_fail(world, "step", &err);
    }
    FILE *f = open_out(dir, "final-%d.bin", rank, 0);
    write_kind(f, e, m, 0);
    write_kind(f, e, m, 1);
    size_t wn, sn;
    float *server, *worker = zt_engine_onebit_errors(e, &wn, &server, &sn);
    if (worker) fwrite(worker, sizeof(float), wn, f);
    if (server) fwrite(server, sizeof(float), sn, f);
    fclose(f);
    uint64_t h = zt_engine_param_hash(e);
    if (rank == 0) printf("params xxh64 %016llx\n", (unsigned long long)h);
    zt_engine_free(e);
    zt_model_free(m);
    zt_comm_free(world);
    tool_finished = true;
    return 0;
}

int main(int argc, char **argv) { return tool_main(argc, argv, run); }
