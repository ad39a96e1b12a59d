/* alltoall_bench.c - zerotrain's all-to-all of variable blocks (zt_all_to_allv: the sizes and rooms
 * exchanged first, then the blocks; between ranks of one machine both through the shared segment,
 * each block copied out of its sender's buffer mapped here (the send buffer is a zt_shared_alloc one, as the
 * engine's are), and, as the last columns, through the segment's slots and read with process_vm_readv;
 * ZT_COMM_AR_SHM_BYTES=0 takes the messages instead; expert parallelism's dispatch and combine) against
 * Open MPI's MPI_Alltoallv in the same run, interleaved, median of --reps. Open MPI is timed two
 * ways: MPI_Alltoallv alone (the counts known beforehand, which a dispatch never has) and an
 * MPI_Alltoall of the counts followed by MPI_Alltoallv (what torch's all_to_all_single with split
 * sizes and Megatron's dispatcher do: the fair comparison).
 *
 *   mpirun -np 2 build/bench/alltoall_bench [--rows R] [--C 768] [--reps 21] [--skew S]
 *
 * The default sizes are one all-to-all of bench/moe.sh's model under ep 2 (llama-124M-moe: B=4,
 * T=256 -> 1024 tokens x top-2 = 2048 rows a rank, C=768 fp32, 8 experts, each expert's rows
 * padded to 64; evenly routed: 1024 rows = 3 MiB to each rank), then smaller and larger blocks
 * (x1/16 .. x4) and uneven ones (rank r sends rank p rows x (1 + S·((r + p) % N)) / (1 + S)).
 * Each timed call's time is the slowest rank's; the best calls' ratio is printed beside the medians'
 * (on a shared machine a call that loses its core for a time slice moves the median, not the best). The received bytes of both libraries are compared
 * (they must be the same bits). Prints a markdown table and the ratio at the model's size.
 */
#include "comm/comm.h"

#include <mpi.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

typedef struct layout {
    int N, me;
    size_t *sb, *rb, *soff, *roff; /* bytes to / from each rank, and their offsets in one buffer */
    int *sc, *rc, *sd, *rd;        /* the same as MPI's ints */
    size_t stotal, rtotal;
} layout;

static size_t block_bytes(int r, int p, int N, size_t rows, size_t C, double skew) {
    double f = (1.0 + skew * (double)((r + p) % N)) / (1.0 + skew);
    return (size_t)((double)rows * f) * C * sizeof(float);
}

static void layout_for(layout *L, size_t rows, size_t C, double skew) {
    size_t so = 0, ro = 0;
    for (int p = 0; p < L->N; p++) {
        L->sb[p] = block_bytes(L->me, p, L->N, rows, C, skew);
        L->rb[p] = block_bytes(p, L->me, L->N, rows, C, skew);
        L->soff[p] = so, L->roff[p] = ro;
        L->sc[p] = (int)L->sb[p], L->rc[p] = (int)L->rb[p], L->sd[p] = (int)so, L->rd[p] = (int)ro;
        so += L->sb[p], ro += L->rb[p];
    }
    L->stotal = so, L->rtotal = ro;
}

/* 0: zerotrain, 1: MPI_Alltoallv alone, 2: MPI_Alltoall of the counts + MPI_Alltoallv, 3: zerotrain through the
 * shared segment's slots (the single copy turned off), 4: zerotrain reading each block with process_vm_readv
 * (the sender's shared buffer not mapped) */
static double timed(int which, zt_comm *zc, const layout *L, const unsigned char *send, unsigned char *recv, int *bad) {
    int N = L->N;
    const void *sp[64];
    void *rp[64];
    size_t got[64];
    int cnt_in[64], cnt_out[64];
    for (int p = 0; p < N; p++) sp[p] = send + L->soff[p], rp[p] = recv + L->roff[p];
    bool single = zt_comm_a2a_single_copy(zc), map = zt_comm_a2a_map(zc);
    if (which == 3) zt_comm_set_a2a_single_copy(zc, false);
    if (which == 4) zt_comm_set_a2a_map(zc, false);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    if (which == 0 || which >= 3) {
        zt_error err = {0};
        if (zt_all_to_allv(zc, sp, L->sb, rp, L->rb, got, "bench", &err)) {
            fprintf(stderr, "%s\n", err.msg);
            *bad = 1;
        }
    } else {
        if (which == 2) {
            for (int p = 0; p < N; p++) cnt_out[p] = L->sc[p];
            MPI_Alltoall(cnt_out, 1, MPI_INT, cnt_in, 1, MPI_INT, MPI_COMM_WORLD);
        }
        MPI_Alltoallv(send, L->sc, L->sd, MPI_BYTE, recv, L->rc, L->rd, MPI_BYTE, MPI_COMM_WORLD);
    }
    double t = MPI_Wtime() - t0, tmax;
    if (which == 3) zt_comm_set_a2a_single_copy(zc, single);
    if (which == 4) zt_comm_set_a2a_map(zc, map);
    MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return tmax;
}

int main(int argc, char **argv) {
    zt_error err = {0};
    zt_comm *world;
    if (zt_comm_init(&argc, &argv, &world, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    int me = zt_comm_rank(world), N = zt_comm_size(world);
    size_t rows = 1024, C = 768;
    int reps = 21;
    double skew = 1.0;
    bool usage = N > 64;
    for (int i = 1; i < argc && !usage; i++) {
        if (!strcmp(argv[i], "--rows") && i + 1 < argc) rows = (size_t)atol(argv[++i]);
        else if (!strcmp(argv[i], "--C") && i + 1 < argc) C = (size_t)atol(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--skew") && i + 1 < argc) skew = atof(argv[++i]);
        else usage = true;
    }
    if (usage) {
        if (me == 0) fprintf(stderr, "usage: mpirun -np N alltoall_bench [--rows 1024] [--C 768] [--reps 21] "
                                     "[--skew 1] (N <= 64)\n");
        zt_comm_free(world);
        zt_comm_finalize(NULL);
        return 2;
    }
    if (reps < 1) reps = 1;
    layout L = {.N = N, .me = me};
    L.sb = calloc(4 * (size_t)N, sizeof(size_t)), L.rb = L.sb + N, L.soff = L.sb + 2 * N, L.roff = L.sb + 3 * N;
    L.sc = calloc(4 * (size_t)N, sizeof(int)), L.rc = L.sc + N, L.sd = L.sc + 2 * N, L.rd = L.sc + 3 * N;
    size_t maxb = (size_t)N * 4 * rows * (1 + 1) * C * sizeof(float) + 64;
    /* the send buffer is one the peers can map (zt_shared_alloc, as the engine's exchange buffers are);
     * Open MPI reads the same buffer */
    unsigned char *send = zt_shared_alloc(maxb), *r0 = malloc(maxb), *r1 = malloc(maxb), *r2 = malloc(maxb);
    if (!L.sb || !L.sc || !send || !r0 || !r1 || !r2) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < maxb; i++) send[i] = (unsigned char)(i * 131 + (size_t)me * 7);
    bool slots = zt_comm_a2a_single_copy(world); /* else the slots (or messages) are zerotrain's only way */
    if (me == 0) {
        printf("zerotrain's path: %s\n", slots && zt_comm_a2a_map(world) ? "the shared segment, each block copied out of "
               "its sender's buffer mapped here (zt_shared_alloc)" : slots ? "the shared segment, each block read from its "
               "sender's memory (process_vm_readv)" : zt_comm_has_shm(world) ? "the shared segment's slots (no single copy "
               "here)" : "messages (no shared segment)");
        printf("all-to-all of variable blocks, %d ranks, blocks of rows x C=%zu fp32, median of %d, interleaved; "
               "the time of a call is the slowest rank's\n\n", N, C, reps);
        printf("| rows to each rank | bytes a rank sends (its own block included) | zerotrain ms | Open MPI alltoallv ms | Open MPI counts + "
               "alltoallv ms | zerotrain / (counts + alltoallv) speed | zerotrain / alltoallv alone speed | best calls: "
               "zerotrain / counts + alltoallv ms: speed | zerotrain through the slots ms (its speed against counts + "
               "alltoallv; best calls) | zerotrain with process_vm_readv ms (its speed against counts + alltoallv; best calls) "
               "|\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    }
    const struct { double f, skew; } cases[] = {{1.0 / 16, 0}, {0.25, 0}, {1, 0}, {1, 1}, {4, 0}};
    double *t[5];
    for (int k = 0; k < 5; k++) t[k] = malloc((size_t)reps * sizeof(double));
    int bad = 0;
    double ratio_model = 0;
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        size_t r = (size_t)((double)rows * cases[c].f);
        double sk = cases[c].skew > 0 ? skew : 0;
        layout_for(&L, r, C, sk);
        /* the results, each path into its own buffer; then every timed call writes the one buffer r0, so each
         * finds it as the call before left it (a path timed into a buffer the call before it had just
         * written would find it in the caches, the others not: at 6 MiB that alone moved a path ~15%) */
        timed(0, world, &L, send, r0, &bad), timed(2, world, &L, send, r1, &bad);
        if (slots) timed(3, world, &L, send, r2, &bad);
        int same = memcmp(r0, r1, L.rtotal) == 0 && (!slots || memcmp(r2, r1, L.rtotal) == 0), all_same;
        if (slots) timed(4, world, &L, send, r2, &bad);
        same = same && (!slots || memcmp(r2, r1, L.rtotal) == 0);
        for (int w = 0; w < 2; w++) /* warm-up: every path once */
            timed(0, world, &L, send, r0, &bad), timed(2, world, &L, send, r0, &bad), timed(3, world, &L, send, r0, &bad),
                timed(4, world, &L, send, r0, &bad);
        for (int i = 0; i < reps; i++) {
            t[0][i] = timed(0, world, &L, send, r0, &bad);
            t[1][i] = timed(1, world, &L, send, r0, &bad);
            t[2][i] = timed(2, world, &L, send, r0, &bad);
            t[3][i] = slots ? timed(3, world, &L, send, r0, &bad) : 0;
            t[4][i] = slots ? timed(4, world, &L, send, r0, &bad) : 0;
        }
        MPI_Allreduce(&same, &all_same, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        if (!all_same) bad = 1;
        double m0 = median(t[0], reps), m1 = median(t[1], reps), m2 = median(t[2], reps), m3 = median(t[3], reps);
        double m4 = median(t[4], reps);
        double b0 = t[0][0], b2 = t[2][0], b3 = t[3][0], b4 = t[4][0]; /* median() sorted them: the best calls */
        if (cases[c].f == 1 && sk == 0) ratio_model = m2 / m0;
        if (me == 0) {
            char label[64];
            snprintf(label, sizeof label, sk > 0 ? "%zu x (1 + %.0f((r+p) mod N))/%.0f" : "%zu", r, sk, 1 + sk);
            char slot_ms[32] = "-", readv_ms[32] = "-";
            if (slots) snprintf(slot_ms, sizeof slot_ms, "%.3f (%.2f; best %.2f)", 1e3 * m3, m2 / m3, b2 / b3);
            if (slots) snprintf(readv_ms, sizeof readv_ms, "%.3f (%.2f; best %.2f)", 1e3 * m4, m2 / m4, b2 / b4);
            printf("| %s | %.2f MiB | %.3f | %.3f | %.3f | %.2f | %.2f | %.3f / %.3f: %.2f | %s | %s |%s\n", label,
                   (double)L.stotal / 1048576.0, 1e3 * m0, 1e3 * m1, 1e3 * m2, m2 / m0, m1 / m0, 1e3 * b0, 1e3 * b2,
                   b2 / b0, slot_ms, readv_ms, all_same ? "" : " (results differ!)");
        }
    }
    if (me == 0)
        printf("\nat the model's size (%zu rows of %zu floats to each rank): zerotrain runs at %.0f%% of Open MPI's "
               "counts + alltoallv speed (goal >= 100%%)%s\n", rows, C, 100.0 * ratio_model,
               bad ? "; SOME RESULTS DIFFER" : "; every result the same bits");
    for (int k = 0; k < 5; k++) free(t[k]);
    zt_shared_free(send), free(r0), free(r1), free(r2), free(L.sb), free(L.sc);
    zt_comm_free(world);
    zt_comm_finalize(NULL);
    return bad;
}
