/* link_bw.c - the links between ranks as MPI sees them, for the scale model's calibration
 * (bench/scale_calibrate.sh, docs/scale.md): run across hosts with L ranks per host (the
 * launcher's local size), it measures
 *   intra_bw       rank 0 <-> rank 1 (same host): bytes per second each way, MPI_Sendrecv of --mb
 *   inter_bw_pair  rank 0 <-> rank L (next host): one pair alone
 *   inter_bw_node  every rank r < L <-> r + L at once: what one host sends per second in total
 *   intra_lat, inter_lat  half the round trip of an 8-byte ping-pong (median of 200)
 * then times zerotrain's own pairwise collectives over all ranks (all-gather and reduce-scatter of
 * --mb MB in total, all-reduce of --mb MB) beside what src/scale/collective.c predicts for them
 * from the numbers above (the scale model's collective formula checked alone). Best of --reps.
 *
 *   mpirun -np 4 build/bench/link_bw [--mb 64] [--reps 3]      (2 hosts x 2 ranks)
 *   mpirun -np 2 build/bench/link_bw --mb 2                     (one host: the intra-host pair and
 *                                                               the collectives only; bench/scale_tp.sh)
 *
 * Prints a table and, last, one JSON line. */
#include "comm/comm.h"
#include "scale/collective.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Seconds (slowest rank, best of reps) for the active ranks to exchange `bytes` with their peer
 * both ways at once; ranks with peer < 0 only take part in the barriers. */
static double exchange(int peer, char *sbuf, char *rbuf, size_t bytes, int reps) {
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        if (peer >= 0)
            for (size_t off = 0; off < bytes; off += (size_t)1 << 30) {
                int n = (int)(bytes - off < ((size_t)1 << 30) ? bytes - off : (size_t)1 << 30);
                MPI_Sendrecv(sbuf + off, n, MPI_BYTE, peer, 7, rbuf + off, n, MPI_BYTE, peer, 7, MPI_COMM_WORLD,
                             MPI_STATUS_IGNORE);
            }
        double t = MPI_Wtime() - t0, tmax;
        MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (tmax < best) best = tmax;
    }
    return best;
}

/* Half the median round trip of an 8-byte message between a and b. */
static double latency(int me, int a, int b) {
    enum { ITERS = 200 };
    static double rt[ITERS];
    char x[8] = {0};
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < ITERS; i++) {
        double t0 = MPI_Wtime();
        if (me == a) {
            MPI_Send(x, 8, MPI_BYTE, b, 9, MPI_COMM_WORLD);
            MPI_Recv(x, 8, MPI_BYTE, b, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (me == b) {
            MPI_Recv(x, 8, MPI_BYTE, a, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(x, 8, MPI_BYTE, a, 9, MPI_COMM_WORLD);
        }
        rt[i] = MPI_Wtime() - t0;
    }
    qsort(rt, ITERS, sizeof *rt, cmp_d);
    double half = rt[ITERS / 2] / 2;
    MPI_Bcast(&half, 1, MPI_DOUBLE, a, MPI_COMM_WORLD);
    return half;
}

/* Seconds (slowest rank, best of reps) of one zerotrain collective over the world. */
static double collective(zt_comm *w, zt_scale_op op, float *a, float *b, size_t n, int reps) {
    int N = zt_comm_size(w), me = zt_comm_rank(w);
    size_t *counts = malloc((size_t)N * sizeof *counts);
    zt_comm_even_counts(n, N, counts);
    size_t off = 0;
    for (int j = 0; j < me; j++) off += counts[j];
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        zt_error err = {0};
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        int rc = op == ZT_SCALE_ALL_GATHER    ? zt_all_gather_f32(w, a + off, b, counts, "link_bw", &err)
                 : op == ZT_SCALE_REDUCE_SCATTER ? zt_reduce_scatter_f32(w, a, b, counts, "link_bw", &err)
                                                : zt_all_reduce_f32(w, a, n, "link_bw", &err);
        if (rc) {
            fprintf(stderr, "link_bw: %s\n", err.msg);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        double t = MPI_Wtime() - t0, tmax;
        MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (tmax < best) best = tmax;
    }
    free(counts);
    return best;
}

int main(int argc, char **argv) {
    zt_error err = {0};
    zt_comm *world;
    if (zt_comm_init(&argc, &argv, &world, &err)) {
        fprintf(stderr, "link_bw: %s\n", err.msg);
        return 1;
    }
    int me = zt_comm_rank(world), N = zt_comm_size(world);
    double mb = 64;
    int reps = 3;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--mb")) mb = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
    }
    const char *ls = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    int L = ls ? atoi(ls) : N;
    bool one_host = N == L;
    if (mb <= 0 || reps < 1 || L < 1 || N % L || (N / L < 2 && !(one_host && L >= 2))) {
        if (me == 0)
            fprintf(stderr, "link_bw: needs >= 2 hosts with equal ranks, or 2+ ranks on one host (N=%d, local %d), "
                    "--mb > 0, --reps >= 1\n", N, L);
        zt_comm_free(world);
        zt_comm_finalize(NULL);
        return 2;
    }
    size_t bytes = (size_t)(mb * 1e6);
    char *sbuf = calloc(bytes, 1), *rbuf = calloc(bytes, 1);
    float *fa = calloc(bytes / 4 + 1, 4), *fb = calloc(bytes / 4 + 1, 4);
    if (!sbuf || !rbuf || !fa || !fb) MPI_Abort(MPI_COMM_WORLD, 1);
    double intra_bw = 0, intra_lat = 0;
    if (L >= 2) {
        double t = exchange(me == 0 ? 1 : me == 1 ? 0 : -1, sbuf, rbuf, bytes, reps);
        intra_bw = bytes / t;
        intra_lat = latency(me, 0, 1);
    }
    double inter_lat = 0, inter_pair = 0, inter_node = 0;
    if (!one_host) {
        double t_pair = exchange(me == 0 ? L : me == L ? 0 : -1, sbuf, rbuf, bytes, reps);
        double t_node = exchange(me < L ? me + L : me < 2 * L ? me - L : -1, sbuf, rbuf, bytes, reps);
        inter_lat = latency(me, 0, L);
        inter_pair = bytes / t_pair, inter_node = L * (double)bytes / t_node;
    }

    zt_scale_net net = {.per_node = L, .intra_bw = intra_bw > 0 ? intra_bw : 1e30, .intra_lat = intra_lat,
                        .nic_bw = inter_node > 0 ? inter_node : 1e30, .inter_lat = inter_lat, .nics = 1, .algo = ZT_SCALE_PAIRWISE};
    zt_scale_group g = zt_scale_group_of(&net, N, 1);
    size_t n = bytes / 4;
    static const char *names[] = {"all-gather", "reduce-scatter", "all-reduce"};
    double measured[3], model[3];
    for (int k = 0; k < 3; k++) {
        measured[k] = collective(world, (zt_scale_op)k, fa, fb, n, reps);
        model[k] = zt_scale_collective(&net, g, (zt_scale_op)k, (double)n * 4).seconds;
    }
    if (me == 0) {
        printf("link_bw: %d ranks, %d per host, %.0f MB messages, best of %d\n", N, L, mb, reps);
        printf("| link | bandwidth each way | latency |\n| --- | --- | --- |\n");
        if (L >= 2) printf("| intra-host pair (shared memory) | %.3f GB/s | %.1f us |\n", intra_bw / 1e9, intra_lat * 1e6);
        if (!one_host) {
            printf("| inter-host, one pair | %.3f GB/s | %.1f us |\n", inter_pair / 1e9, inter_lat * 1e6);
            printf("| inter-host, %d pairs at once (per host) | %.3f GB/s | |\n", L, inter_node / 1e9);
        }
        printf("\n| zerotrain collective over %d ranks, %.0f MB | measured | model (collective.c) | model/measured |\n"
               "| --- | --- | --- | --- |\n", N, mb);
        for (int k = 0; k < 3; k++)
            printf("| %s | %.3f s | %.3f s | %.2f |\n", names[k], measured[k], model[k], model[k] / measured[k]);
        printf("{\"ranks\":%d,\"per_host\":%d,\"mb\":%.0f,\"intra_bw\":%.6g,\"intra_lat\":%.6g,\"inter_bw_pair\":%.6g,"
               "\"inter_bw_node\":%.6g,\"inter_lat\":%.6g,\"all_gather_s\":%.6g,\"all_gather_model_s\":%.6g,"
               "\"reduce_scatter_s\":%.6g,\"reduce_scatter_model_s\":%.6g,\"all_reduce_s\":%.6g,"
               "\"all_reduce_model_s\":%.6g}\n",
               N, L, mb, intra_bw, intra_lat, inter_pair, inter_node, inter_lat, measured[0], model[0], measured[1],
               model[1], measured[2], model[2]);
    }
    free(sbuf), free(rbuf), free(fa), free(fb);
    zt_comm_free(world);
    zt_comm_finalize(NULL);
    return 0;
}
