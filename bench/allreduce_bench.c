/* allreduce_bench.c - zerotrain's deterministic all-reduce (zt_all_reduce_f32: reduce-scatter +
 * all-gather, floats summed by zerotrain in tree order) against Open MPI's MPI_Allreduce
 * (MPI_SUM on MPI_FLOAT, MPI's own order) in the same run, interleaved, median of --reps.
 *
 *   mpirun -np 2 build/bench/allreduce_bench [--min-kb 256] [--max-mb 256] [--reps 7]
 *
 * Bus bandwidth = 2(N-1)/N x bytes / time (the nccl-tests convention: the bytes each rank must
 * move for a bandwidth-optimal all-reduce). Each timed call starts from the same input (copied
 * in before the barrier, untimed) and its time is the slowest rank's. On 2 ranks the two
 * results must be the same bits (one addition, a+b = b+a), which is checked. Prints a markdown
 * table (the algorithm zerotrain picked per size, the ratio of the medians and of the fastest
 * calls, and in how many of zerotrain's timed calls rank 0 found its peer's core far: the 2-vCPU
 * VMs move between two placements that change both libraries' times, see comm.h
 * zt_comm_shm_peer_far and build/bench/vcpu_placement), the ratio at 64 MB, the lowest ratio, and
 * how much CPU other processes took meanwhile.
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

/* CPU seconds used by every process on the machine (/proc/stat) and by this one. */
static void cpu_seconds(double *all, double *self) {
    *all = *self = 0;
    const double hz = 100;
    FILE *f = fopen("/proc/stat", "r");
    if (f) {
        unsigned long long v[8] = {0};
        if (fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
                   &v[4], &v[5], &v[6], &v[7]) == 8)
            *all = (double)(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / hz;
        fclose(f);
    }
    f = fopen("/proc/self/stat", "r");
    if (f) {
        char buf[2048];
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        buf[n] = 0;
        char *p = strrchr(buf, ')');
        unsigned long long ut = 0, st = 0;
        if (p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) == 2)
            *self = (double)(ut + st) / hz;
        fclose(f);
    }
}

static int far_calls; /* zerotrain's timed calls after which rank 0 found its peer's core far */

static double timed(int which, zt_comm *zc, float *buf, const float *src, size_t n, int *bad) {
    memcpy(buf, src, n * sizeof *buf);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    if (which == 0) {
        zt_error err = {0};
        if (zt_all_reduce_f32(zc, buf, n, "bench", &err)) {
            fprintf(stderr, "%s\n", err.msg);
            *bad = 1;
        }
        far_calls += zt_comm_shm_peer_far(zc);
    } else {
        MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    }
    double t = MPI_Wtime() - t0, tmax;
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
    long min_kb = 256, max_kb = 256 << 10;
    int reps = 7, algo = ZT_AR_ALGO_AUTO;
    bool usage = false;
    for (int i = 1; i < argc && !usage; i++) {
        if (!strcmp(argv[i], "--min-mb") && i + 1 < argc) min_kb = atol(argv[++i]) << 10;
        else if (!strcmp(argv[i], "--max-mb") && i + 1 < argc) max_kb = atol(argv[++i]) << 10;
        else if (!strcmp(argv[i], "--min-kb") && i + 1 < argc) min_kb = atol(argv[++i]);
        else if (!strcmp(argv[i], "--max-kb") && i + 1 < argc) max_kb = atol(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--algo") && i + 1 < argc) {
            const char *a = argv[++i];
            algo = !strcmp(a, "rs_ag") ? ZT_AR_ALGO_RS_AG : !strcmp(a, "exchange") ? ZT_AR_ALGO_EXCHANGE
                 : !strcmp(a, "shm") ? ZT_AR_ALGO_SHM : !strcmp(a, "auto") ? ZT_AR_ALGO_AUTO : -1;
            usage = algo < 0;
        } else {
            usage = true;
        }
    }
    if (usage) {
        if (me == 0)
            fprintf(stderr, "usage: mpirun -np N allreduce_bench [--min-kb 256 | --min-mb M] [--max-kb K | "
                            "--max-mb 256] [--reps 7] [--algo auto|rs_ag|exchange|shm]\n  (ZT_COMM_CHUNK_BYTES sets "
                            "zerotrain's chunk, ZT_COMM_AR_EXCHANGE_BYTES the size up to which 2 ranks exchange "
                            "whole vectors; --algo forces one algorithm)\n");
        zt_comm_free(world);
        zt_comm_finalize(NULL);
        return 2;
    }
    if (zt_comm_set_all_reduce_algo(world, (zt_ar_algo)algo) != ZT_OK) {
        if (me == 0) fprintf(stderr, "--algo %s: not available on this comm (shm: every rank on one node)\n",
                             zt_ar_algo_name(algo));
        zt_comm_free(world);
        zt_comm_finalize(NULL);
        return 2;
    }
    if (reps < 1) reps = 1;
    if (min_kb < 1) min_kb = 1;
    if (max_kb < min_kb) max_kb = min_kb;
    double all0, self0;
    cpu_seconds(&all0, &self0);
    double wall0 = MPI_Wtime();
    if (me == 0) {
        printf("all-reduce, %d ranks, float32, median of %d, interleaved; zerotrain chunk %zu "
               "bytes; bus bandwidth = 2(N-1)/N x bytes / time\n\n",
               N, reps, zt_comm_chunk_bytes(world));
        printf("| size | zerotrain algorithm | zerotrain ms | zerotrain GB/s | Open MPI ms | Open MPI GB/s | "
               "zerotrain / Open MPI | the same, fastest calls | peer far (calls) |\n|---:|---|---:|---:|---:|---:|---:|---:|---:|\n");
    }
    size_t maxn = (size_t)max_kb << 8;
    float *buf = malloc(maxn * sizeof *buf), *src = malloc(maxn * sizeof *src),
          *keep = malloc(maxn * sizeof *keep);
    if (!buf || !src || !keep) {
        fprintf(stderr, "rank %d: out of memory\n", me);
        MPI_Abort(MPI_COMM_WORLD, 7);
    }
    for (size_t i = 0; i < maxn; i++) src[i] = (float)((i * 2654435761u + (size_t)me * 97) % 1000) * 1e-3f - 0.5f;
    double *tz = malloc((size_t)reps * sizeof *tz), *tm = malloc((size_t)reps * sizeof *tm);
    double ratio64 = 0, worst = 0;
    int bad = 0;
    for (long kb = min_kb; kb <= max_kb; kb *= 2) {
        size_t n = (size_t)kb << 8, bytes = n * sizeof(float);
        char label[32];
        if (kb % 1024) snprintf(label, sizeof label, "%ld KB", kb);
        else snprintf(label, sizeof label, "%ld MB", kb >> 10);
        zt_error e2 = {0};
        zt_comm_reserve_scratch(world, zt_comm_scratch_bytes_for(world, n / (size_t)N + 1), &e2);
        /* warm-up of both, and the bit check on 2 ranks */
        timed(0, world, buf, src, n, &bad);
        memcpy(keep, buf, bytes);
        timed(1, world, buf, src, n, &bad);
        if (N == 2 && memcmp(keep, buf, bytes)) {
            if (me == 0) fprintf(stderr, "%s: zerotrain and Open MPI results differ\n", label);
            bad = 1;
        }
        far_calls = 0;
        for (int r = 0; r < reps; r++) {
            if (r % 2) {
                tz[r] = timed(0, world, buf, src, n, &bad);
                tm[r] = timed(1, world, buf, src, n, &bad);
            } else {
                tm[r] = timed(1, world, buf, src, n, &bad);
                tz[r] = timed(0, world, buf, src, n, &bad);
            }
        }
        double z = median(tz, reps), m = median(tm, reps); /* sorts: [0] is the fastest */
        double f = 2.0 * (N - 1) / N * (double)bytes / 1e9;
        if (kb == 64 << 10) ratio64 = m / z;
        if (worst == 0 || m / z < worst) worst = m / z;
        if (me == 0)
            printf("| %s | %s | %.3f | %.2f | %.3f | %.2f | %.0f%% | %.0f%% | %d of %d |\n", label,
                   zt_ar_algo_name(zt_comm_all_reduce_algo(world, ZT_DTYPE_FP32, n)), 1e3 * z, f / z, 1e3 * m,
                   f / m, 100 * m / z, 100 * tm[0] / tz[0], far_calls, reps);
    }
    double all1, self1, selfsum = 0;
    cpu_seconds(&all1, &self1);
    double mine = self1 - self0;
    MPI_Reduce(&mine, &selfsum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    if (me == 0) {
        double wall = MPI_Wtime() - wall0;
        if (ratio64 > 0) printf("\nzerotrain / Open MPI at 64 MB: %.0f%%\n", 100 * ratio64);
        printf("zerotrain / Open MPI, lowest over the sizes: %.0f%%\n", 100 * worst);
        printf("other processes: %.2f CPUs\n", (all1 - all0 - selfsum) / wall);
    }
    free(buf), free(src), free(keep), free(tz), free(tm);
    zt_comm_free(world);
    zt_comm_finalize(NULL);
    return bad;
}
