/* io_compare.c - the offload tier's I/O measured, not assumed: O_DIRECT reads and writes of a
 * file in fixed blocks through (a) a pool of threads doing blocking pread/pwrite, the way
 * src/offload/io.c does, and (b) io_uring (liburing) with the same queue depth, one submitting
 * thread. Same file, same block size, same total bytes, alternated round by round; prints GB/s of
 * each and their ratio, and a JSON line.
 *
 *   build/bench/io_compare [--dir DIR] [--mb 2048] [--block-kb 8192] [--depth 2] [--rounds 3]
 *
 * DIR (default .) must be on the disk to measure; the file DIR/io_compare.bin is removed at exit.
 * Built only where liburing is installed (Debian liburing-dev). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct pool_ctx {
    int fd;
    size_t block, nblocks;
    bool write;
    char *buf; /* depth x block, one per thread */
    atomic_size_t next;
    atomic_int failed;
} pool_ctx;

typedef struct worker {
    pool_ctx *c;
    int id;
} worker;

static void *pool_run(void *arg) {
    worker *w = arg;
    pool_ctx *c = w->c;
    char *b = c->buf + (size_t)w->id * c->block;
    for (size_t i; (i = atomic_fetch_add(&c->next, 1)) < c->nblocks;) {
        off_t off = (off_t)(i * c->block);
        ssize_t r = c->write ? pwrite(c->fd, b, c->block, off) : pread(c->fd, b, c->block, off);
        if (r != (ssize_t)c->block) atomic_store(&c->failed, 1);
    }
    return NULL;
}

static double run_pool(int fd, size_t block, size_t nblocks, int depth, bool write, char *buf) {
    pool_ctx c = {.fd = fd, .block = block, .nblocks = nblocks, .write = write, .buf = buf};
    pthread_t th[64];
    worker w[64];
    double t0 = now();
    for (int i = 0; i < depth; i++) {
        w[i] = (worker){&c, i};
        pthread_create(&th[i], NULL, pool_run, &w[i]);
    }
    for (int i = 0; i < depth; i++) pthread_join(th[i], NULL);
    double t = now() - t0;
    return atomic_load(&c.failed) ? -1 : t;
}

static double run_uring(int fd, size_t block, size_t nblocks, int depth, bool write, char *buf) {
    struct io_uring ring;
    if (io_uring_queue_init((unsigned)depth, &ring, 0) < 0) return -2;
    double t0 = now();
    size_t submitted = 0, done = 0;
    int inflight = 0, failed = 0;
    while (done < nblocks) {
        while (inflight < depth && submitted < nblocks) {
            struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
            char *b = buf + (size_t)(submitted % (size_t)depth) * block;
            if (write) io_uring_prep_write(sqe, fd, b, (unsigned)block, (off_t)(submitted * block));
            else io_uring_prep_read(sqe, fd, b, (unsigned)block, (off_t)(submitted * block));
            submitted++, inflight++;
        }
        io_uring_submit(&ring);
        struct io_uring_cqe *cqe;
        if (io_uring_wait_cqe(&ring, &cqe) < 0) {
            failed = 1;
            break;
        }
        if (cqe->res != (int)block) failed = 1;
        io_uring_cqe_seen(&ring, cqe);
        inflight--, done++;
    }
    double t = now() - t0;
    io_uring_queue_exit(&ring);
    return failed ? -1 : t;
}

int main(int argc, char **argv) {
    const char *dir = ".";
    size_t mb = 2048, block_kb = 8192;
    int depth = 2, rounds = 3;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--dir")) dir = argv[i + 1];
        else if (!strcmp(argv[i], "--mb")) mb = strtoul(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--block-kb")) block_kb = strtoul(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--depth")) depth = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--rounds")) rounds = atoi(argv[i + 1]);
        else {
            fprintf(stderr, "io_compare: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (depth < 1 || depth > 64 || block_kb % 4 || !block_kb || !mb) {
        fprintf(stderr, "io_compare: --depth 1..64, --block-kb a multiple of 4, --mb > 0\n");
        return 2;
    }
    size_t block = block_kb << 10, nblocks = (mb << 20) / block;
    char path[4096];
    snprintf(path, sizeof path, "%s/io_compare.bin", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_DIRECT, 0600);
    if (fd < 0) {
        fprintf(stderr, "io_compare: %s: %s\n", path, strerror(errno));
        return 8;
    }
    char *buf = aligned_alloc(4096, (size_t)depth * block);
    memset(buf, 0x5a, (size_t)depth * block);
    if (ftruncate(fd, (off_t)(nblocks * block)) != 0) return 8;
    double best[2][2] = {{1e30, 1e30}, {1e30, 1e30}}; /* [pool, uring][read, write] */
    run_pool(fd, block, nblocks, depth, true, buf); /* fill the file once */
    for (int r = 0; r < rounds; r++)
        for (int w = 1; w >= 0; w--)
            for (int m = 0; m < 2; m++) {
                double t = m == 0 ? run_pool(fd, block, nblocks, depth, w, buf) : run_uring(fd, block, nblocks, depth, w, buf);
                if (t == -2) {
                    fprintf(stderr, "io_compare: io_uring_queue_init failed (refused here?)\n");
                    unlink(path);
                    return 8;
                }
                if (t < 0) {
                    fprintf(stderr, "io_compare: an I/O failed (%s, %s)\n", m ? "io_uring" : "threads", w ? "write" : "read");
                    unlink(path);
                    return 8;
                }
                if (t < best[m][!w]) best[m][!w] = t;
            }
    unlink(path);
    close(fd);
    double gb = (double)(nblocks * block) / 1e9;
    printf("O_DIRECT, %zu MiB in %zu KiB blocks, queue depth %d, best of %d rounds (%s)\n", mb, block_kb, depth, rounds, dir);
    printf("  read:  threads %.2f GB/s, io_uring %.2f GB/s (io_uring / threads %.2fx)\n", gb / best[0][0], gb / best[1][0],
           best[0][0] / best[1][0]);
    printf("  write: threads %.2f GB/s, io_uring %.2f GB/s (io_uring / threads %.2fx)\n", gb / best[0][1], gb / best[1][1],
           best[0][1] / best[1][1]);
    printf("{\"mb\":%zu,\"block_kb\":%zu,\"depth\":%d,\"read_threads_gbps\":%.3f,\"read_uring_gbps\":%.3f,"
           "\"write_threads_gbps\":%.3f,\"write_uring_gbps\":%.3f}\n",
           mb, block_kb, depth, gb / best[0][0], gb / best[1][0], gb / best[0][1], gb / best[1][1]);
    free(buf);
    return 0;
}
