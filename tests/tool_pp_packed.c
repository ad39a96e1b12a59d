/* tool_pp_packed.c - for packing.sh: pipeline parallelism with packed documents (zt_batch.positions
 * in every micro-batch, each row packing documents of lengths cycling over 1 9 4 13 2 7 from a
 * micro-batch-dependent start). An untied Llama of 4 layers runs STEPS steps of GA micro-batches,
 * under `mpirun -np P` as P pipeline stages (1f1b, the balanced cut; src/engine/pipeline.h: with
 * untied weights the one-process run's bits), or on one process (the micro-batches accumulated).
 * Prints "losses" (each micro-batch's mean loss, %a) from the last stage and "hash" (the whole
 * model's parameters) from rank 0, for the shell to compare.
 *   tool_pp_packed GA STEPS [--naive] [--unpacked] */
#include "comm/comm.h"
#include "train/setup.h"
#include "zerotrain/zerotrain.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { B = 2, T = 16, MAXGA = 16 };

static int fail(zt_comm *w, const char *what, const zt_error *err) {
    fprintf(stderr, "rank %d: %s: %s\n", w ? zt_comm_rank(w) : 0, what, err->msg);
    return 1;
}

int main(int argc, char **argv) {
    zt_error err = {0};
    zt_comm *world = NULL;
    if (argc < 3) {
        fprintf(stderr, "usage: %s GA STEPS [--naive] [--unpacked]\n", argv[0]);
        return 2;
    }
    if (zt_comm_init(&argc, &argv, &world, &err)) return fail(NULL, "init", &err);
    int GA = atoi(argv[1]), steps = atoi(argv[2]), N = zt_comm_size(world), rank = zt_comm_rank(world);
    bool naive = false, packed = true;
    for (int i = 3; i < argc; i++) {
        if (!strcmp(argv[i], "--naive")) naive = true;
        else if (!strcmp(argv[i], "--unpacked")) packed = false;
        else {
            fprintf(stderr, "unknown argument %s\n", argv[i]);
            return 2;
        }
    }
    if (GA < 1 || GA > MAXGA || steps < 1) {
        fprintf(stderr, "GA in 1..%d, STEPS >= 1\n", MAXGA);
        return 2;
    }
    zt_llama_config c = {.max_seq_len = T, .vocab_size = 64, .n_layer = 4, .n_head = 4, .n_embd = 32,
                         .n_kv_head = 2, .intermediate_size = 40, .rope_theta = 10000.0f, .rms_norm_eps = 1e-5f,
                         .attention = naive ? ZT_ATTENTION_NAIVE : ZT_ATTENTION_FLASH};
    zt_model *m = NULL;
    if (zt_llama_create(&c, &m, &err)) return fail(world, "model", &err);
    zt_engine_options eo;
    zt_engine_options_default(&eo);
    eo.B = B, eo.T = T, eo.seed = 7, eo.grad_accum = GA, eo.comm = N > 1 ? world : NULL;
    zt_train_setup_options so = {.world = N > 1 ? world : NULL, .sizes = {.tp = 1, .pp = N},
                                 .schedule = ZT_PP_1F1B};
    zt_train_setup s = {0};
    if (zt_train_setup_create(m, &so, &eo, &s, &err)) return fail(world, "setup", &err);
    static int32_t in[MAXGA][B * T], tg[MAXGA][B * T], pos[MAXGA][B * T];
    static const int lens[6] = {1, 9, 4, 13, 2, 7};
    zt_batch mb[MAXGA];
    float losses[MAXGA];
    bool last = !s.pipe || s.mesh->pp_rank == s.mesh->pp - 1;
    if (last) printf("losses");
    for (int step = 0; step < steps; step++) {
        for (int j = 0; j < GA; j++) {
            uint64_t x = 1234567u + (uint64_t)(step * GA + j) * 7919u;
            for (int i = 0; i < B * T; i++) {
                x = x * 6364136223846793005ULL + 1442695040888963407ULL;
                in[j][i] = (int32_t)((x >> 33) % (uint64_t)c.vocab_size);
                tg[j][i] = (int32_t)((x >> 17) % (uint64_t)c.vocab_size);
            }
            for (int b = 0; b < B; b++)
                for (int t = 0, k = (step * GA + j + b) % 6; t < T; k++)
                    for (int i = 0; i < lens[k % 6] && t < T; i++) pos[j][b * T + t++] = i;
            mb[j] = (zt_batch){.B = B, .T = T, .inputs = in[j], .targets = tg[j], .positions = packed ? pos[j] : NULL,
                               .dloss = 1.0f / (float)(B * T * GA), .logits_pos = -1};
        }
        if (s.pipe) {
            if (zt_pipeline_train(s.pipe, mb, GA, losses, &err)) return fail(world, "pipeline", &err);
        } else {
            for (int j = 0; j < GA; j++)
                if (zt_engine_forward_backward(s.e, &mb[j], &losses[j], &err)) return fail(world, "fwd/bwd", &err);
        }
        zt_step_report r;
        if (zt_engine_step(s.e, 1e-2f, &r, &err)) return fail(world, "step", &err);
        for (int j = 0; j < GA && last; j++) printf(" %a", losses[j]);
    }
    if (last) printf("\n");
    fflush(stdout);
    uint64_t h = 0;
    if (s.pipe) {
        if (zt_pipeline_param_hash(s.pipe, &h, &err)) return fail(world, "hash", &err);
    } else {
        h = zt_engine_param_hash(s.e);
    }
    if (rank == 0) printf("hash %016llx\n", (unsigned long long)h);
    zt_train_setup_free(&s, m);
    zt_model_free(m);
    zt_comm_finalize(&err);
    return 0;
}
