/* tool_offload_mem.c - one rank of the offload memory-limit test (tests/offload.sh drives it under
 * mpirun). Trains a GPT-2 whose optimizer state dominates its memory (a 50257 x 256 embedding, two
 * small blocks) for a few steps on synthetic tokens, optionally with the optimizer state offloaded
 * to NVMe files, optionally under an address-space limit set before anything else runs; prints
 * (rank 0) the xxh64 of the final parameters and (every rank) its peak virtual size, the quantity
 * RLIMIT_AS bounds:
 *   tool_offload_mem STRATEGY STEPS [--offload DIR] [--buffer-kb K] [--limit-as BYTES] [--warm-up DIR]
 *                    [--embd C]
 *   -> "hash H" (rank 0), "vmpeak R BYTES" (every rank), "create R BYTES" (the virtual size right
 *      after the engine laid out its memory)
 * Exit: 0, or the zt_status of the first failure (7 = out of memory) with its message on stderr. */
#include "comm/comm.h"
#include "zerotrain/zerotrain.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

static zt_gpt2_config CFG = {.max_seq_len = 16, .vocab_size = 50257, .n_layer = 2, .n_head = 4, .n_embd = 256};
enum { B = 2, T = 16 };

static unsigned long long vm_field(const char *name) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    unsigned long long kb = 0;
    size_t n = strlen(name);
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, name, n) && line[n] == ':') kb = strtoull(line + n + 1, NULL, 10);
    if (f) fclose(f);
    return kb * 1024;
}

static int fail(int rank, const char *what, const zt_error *err) {
    fprintf(stderr, "rank %d: %s: %s\n", rank, what, err->msg);
    return err->code ? err->code : 1;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s STRATEGY STEPS [--offload DIR] [--buffer-kb K] [--limit-as BYTES]\n", argv[0]);
        return 2;
    }
    for (int i = 3; i + 1 < argc; i++) /* the limit first: MPI's own mappings count too */
        if (!strcmp(argv[i], "--limit-as")) {
            rlim_t lim = strtoull(argv[i + 1], NULL, 10);
            struct rlimit r = {.rlim_cur = lim, .rlim_max = lim};
            if (setrlimit(RLIMIT_AS, &r) != 0) {
                perror("setrlimit(RLIMIT_AS)");
                return 2;
            }
        }
    zt_error err = {0};
    zt_comm *world = NULL;
    if (zt_comm_init(&argc, &argv, &world, &err)) return fail(0, "init", &err);
    int rank = zt_comm_rank(world), N = zt_comm_size(world);
    zt_engine_options o;
    zt_engine_options_default(&o);
    if (zt_strategy_parse(argv[1], &o.strategy, &err)) return fail(rank, "strategy", &err);
    int steps = atoi(argv[2]);
    o.B = B;
    o.T = T;
    o.seed = 11;
    o.comm = N > 1 ? world : NULL;
    o.bucket_bytes = 1 << 20;
    const char *warm_dir = NULL;
    for (int i = 3; i + 1 < argc; i++) {
        if (!strcmp(argv[i], "--offload")) o.offload.optimizer_dir = argv[++i];
        else if (!strcmp(argv[i], "--warm-up")) warm_dir = argv[++i];
        else if (!strcmp(argv[i], "--embd")) CFG.n_embd = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--buffer-kb")) o.offload.buffer_bytes = (size_t)atoi(argv[++i]) << 10;
    }
    o.offload.buffer_count = 4;
    zt_model *m = NULL;
    zt_engine *e = NULL;
    if (zt_gpt2_create(&CFG, &m, &err)) return fail(rank, "model", &err);
    int32_t in[B * T], tg[B * T];
    uint64_t s = 1234 + (uint64_t)rank;
    /* Warm-up: one step of an offloaded engine of the same shapes, freed again. The libraries
     * below the engine allocate lazily on first use (oneDNN's JIT kernels, OpenBLAS's buffers,
     * MPI's, the threads' malloc arenas) and do not all survive a failed allocation (oneDNN
     * crashes); after this, the allocations that meet the limit are the engine's own, which fail
     * with ZT_ERR_NOMEM and a message. Both runs of a comparison do the same warm-up. */
    if (warm_dir) {
        zt_engine_options w = o;
        w.offload.optimizer_dir = warm_dir;
        w.offload.buffer_bytes = 64 << 10;
        if (zt_engine_create(m, &w, &e, &err) || zt_engine_init_params(e, &err)) return fail(rank, "warm-up", &err);
        for (int i = 0; i < B * T; i++) in[i] = tg[i] = i % CFG.vocab_size;
        zt_batch b = {.B = B, .T = T, .inputs = in, .targets = tg, .dloss = 1.0f, .logits_pos = -1};
        float loss;
        if (zt_engine_forward_backward(e, &b, &loss, &err) || zt_engine_step(e, 1e-3f, NULL, &err))
            return fail(rank, "warm-up step", &err);
        zt_engine_free(e);
        e = NULL;
    }
    if (zt_engine_create(m, &o, &e, &err) || zt_engine_init_params(e, &err)) {
        int code = fail(rank, "engine", &err);
        zt_comm_abort(code); /* the other ranks may be waiting in a collective */
        return code;
    }
    unsigned long long created = vm_field("VmSize");
    for (int step = 0; step < steps; step++) {
        for (int i = 0; i <= B * T; i++) {
            s = s * 6364136223846793005ULL + 1442695040888963407ULL;
            int32_t tok = (int32_t)((s >> 33) % CFG.vocab_size);
            if (i < B * T) in[i] = tok;
            if (i > 0) tg[i - 1] = tok;
        }
        zt_batch b = {.B = B, .T = T, .inputs = in, .targets = tg, .dloss = 1.0f / (float)(B * T * N),
                      .logits_pos = -1};
        float loss;
        if (zt_engine_forward_backward(e, &b, &loss, &err) || zt_engine_step(e, 1e-3f, NULL, &err)) {
            int code = fail(rank, "step", &err);
            zt_comm_abort(code);
            return code;
        }
    }
    uint64_t h = zt_engine_param_hash(e);
    if (rank == 0) printf("hash %016llx\n", (unsigned long long)h);
    printf("create %d %llu\nvmpeak %d %llu\n", rank, created, rank, vm_field("VmPeak"));
    fflush(stdout);
    zt_engine_free(e);
    zt_model_free(m);
    zt_comm_free(world);
    zt_comm_finalize(&err);
    return 0;
}
