/* io.c - the offload tier's I/O threads (see io.h): a FIFO of blocks, each done with one
 * pread/pwrite loop by whichever thread takes it; tickets count their blocks down.
 *
 * Invariants: a block is [off, off + len) of one request, len <= block size; blocks of a request
 * are queued in order, so a sequential request is read/written front to back by the pool; the
 * queue and every ticket are guarded by one mutex; `done` is signalled whenever a ticket's count
 * reaches zero. */
#define _GNU_SOURCE
#include "offload/io.h"
#include "core/fault.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#define ZT_IO_MAX_THREADS 64

typedef struct io_block {
    zt_io_ticket *t;
    int fd;
    const char *path;
    char *buf;
    size_t len;
    off_t off;
    bool write;
    uint64_t *sum;           /* this block's checksum slot, or NULL */
} io_block;

struct zt_io {
    pthread_mutex_t mu;
    pthread_cond_t work, done;
    io_block *q;             /* ring of cap blocks: [head, head + count) */
    size_t cap, head, count;
    size_t block;            /* bytes per block */
    bool stop;
    int nthreads;
    pthread_t threads[ZT_IO_MAX_THREADS];
    uint64_t read_bytes, write_bytes;
};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* One block, start to end; 0 or an errno-like failure described in msg. */
static int do_block(const io_block *b, char *msg, size_t cap) {
    size_t done = 0;
    if (b->write && b->sum) *b->sum = XXH3_64bits(b->buf, b->len);
    /* ZT_FAULT eio (reads and writes) / enospc (writes) at=offload: this block fails as the device would */
    zt_fault_kind fk = zt_fault_armed() ? zt_fault_point(ZT_FAULT_AT_OFFLOAD, NULL) : ZT_FAULT_NONE;
    while (done < b->len) {
        ssize_t r = b->write ? pwrite(b->fd, b->buf + done, b->len - done, b->off + (off_t)done)
                             : pread(b->fd, b->buf + done, b->len - done, b->off + (off_t)done);
        if (fk == ZT_FAULT_EIO || (fk == ZT_FAULT_ENOSPC && b->write)) {
            r = -1;
            errno = fk == ZT_FAULT_EIO ? EIO : ENOSPC;
            fk = ZT_FAULT_NONE;
        }
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            char eb[128];
            int en = errno;
            const char *es = strerror_r(en, eb, sizeof eb);
            snprintf(msg, cap, "%s %s at offset %lld (%zu bytes): %s%s", b->write ? "writing" : "reading",
                     b->path, (long long)(b->off + (off_t)done), b->len - done, es,
                     en == EINVAL ? " (O_DIRECT needs 4096-byte aligned buffers, offsets and lengths)" : "");
            return en ? en : EIO;
        }
        if (r == 0) {
            if (b->write)
                snprintf(msg, cap, "writing %s at offset %lld: the device accepted 0 of %zu bytes (full?)",
                         b->path, (long long)(b->off + (off_t)done), b->len - done);
            else
                snprintf(msg, cap, "reading %s at offset %lld: short read, the file ends there and %zu more "
                         "bytes were expected (was it truncated or replaced while in use?)",
                         b->path, (long long)(b->off + (off_t)done), b->len - done);
            return EIO;
        }
        done += (size_t)r;
    }
    if (!b->write && b->sum && *b->sum && XXH3_64bits(b->buf, b->len) != *b->sum) {
        snprintf(msg, cap, "reading %s at offset %lld (%zu bytes): checksum mismatch, the file changed under the "
                 "run (truncated, overwritten or corrupted)", b->path, (long long)b->off, b->len);
        return EIO;
    }
    return 0;
}

static void *io_thread(void *arg) {
    zt_io *io = arg;
    char msg[sizeof ((zt_io_ticket *)0)->msg];
    pthread_mutex_lock(&io->mu);
    for (;;) {
        while (!io->count && !io->stop) pthread_cond_wait(&io->work, &io->mu);
        if (!io->count) break; /* stopping and drained */
        io_block b = io->q[io->head];
        io->head = (io->head + 1) % io->cap;
        io->count--;
        bool skip = b.t->code != ZT_OK; /* the ticket failed already: do not touch more of the file */
        pthread_mutex_unlock(&io->mu);
        int en = skip ? 0 : do_block(&b, msg, sizeof msg);
        pthread_mutex_lock(&io->mu);
        if (en && b.t->code == ZT_OK) {
            b.t->code = en == ENOMEM ? ZT_ERR_NOMEM : ZT_ERR_IO;
            memcpy(b.t->msg, msg, sizeof msg);
        }
        if (!en && !skip) {
            if (b.write) io->write_bytes += b.len;
            else io->read_bytes += b.len;
        }
        if (--b.t->pending == 0) pthread_cond_broadcast(&io->done);
    }
    pthread_mutex_unlock(&io->mu);
    return NULL;
}

int zt_io_create(int threads, size_t block_bytes, zt_io **out, zt_error *err) {
    *out = NULL;
    if (threads < 1 || threads > ZT_IO_MAX_THREADS)
        return zt_error_set(err, ZT_ERR_USAGE, "offload: %d I/O threads (1..%d)", threads, ZT_IO_MAX_THREADS);
    if (!block_bytes) block_bytes = 8u << 20;
    if (block_bytes % 4096)
        return zt_error_set(err, ZT_ERR_USAGE, "offload: I/O block of %zu bytes is not a multiple of 4096", block_bytes);
    zt_io *io = calloc(1, sizeof *io);
    if (!io) return zt_error_set(err, ZT_ERR_NOMEM, "offload: out of memory for the I/O queue");
    io->block = block_bytes;
    io->cap = 64;
    io->q = malloc(io->cap * sizeof *io->q);
    if (!io->q) {
        free(io);
        return zt_error_set(err, ZT_ERR_NOMEM, "offload: out of memory for the I/O queue");
    }
    pthread_mutex_init(&io->mu, NULL);
    pthread_cond_init(&io->work, NULL);
    pthread_cond_init(&io->done, NULL);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256u << 10); /* blocking syscalls and snprintf only */
    for (int i = 0; i < threads; i++) {
        int rc = pthread_create(&io->threads[i], &attr, io_thread, io);
        if (rc) {
            pthread_attr_destroy(&attr);
            zt_io_free(io);
            return zt_error_set(err, ZT_ERR_NOMEM, "offload: cannot start I/O thread %d of %d: %s", i + 1, threads,
                                strerror(rc));
        }
        io->nthreads++;
    }
    pthread_attr_destroy(&attr);
    *out = io;
    return ZT_OK;
}

void zt_io_free(zt_io *io) {
    if (!io) return;
    pthread_mutex_lock(&io->mu);
    io->stop = true;
    pthread_cond_broadcast(&io->work);
    pthread_mutex_unlock(&io->mu);
    for (int i = 0; i < io->nthreads; i++) pthread_join(io->threads[i], NULL);
    pthread_mutex_destroy(&io->mu);
    pthread_cond_destroy(&io->work);
    pthread_cond_destroy(&io->done);
    free(io->q);
    free(io);
}

/* Makes room for n more blocks (the mutex is held). */
static int reserve(zt_io *io, size_t n) {
    if (io->count + n <= io->cap) return 0;
    size_t cap = io->cap;
    while (cap < io->count + n) cap *= 2;
    io_block *q = malloc(cap * sizeof *q);
    if (!q) return -1;
    for (size_t i = 0; i < io->count; i++) q[i] = io->q[(io->head + i) % io->cap];
    free(io->q);
    io->q = q;
    io->cap = cap;
    io->head = 0;
    return 0;
}

size_t zt_io_block_bytes(const zt_io *io) { return io->block; }

int zt_io_submit(zt_io *io, zt_io_ticket *t, int fd, const char *path, void *buf, size_t len, off_t off,
                 bool write, uint64_t *sums, zt_error *err) {
    size_t n = (len + io->block - 1) / io->block;
    if (!n) return ZT_OK;
    pthread_mutex_lock(&io->mu);
    if (reserve(io, n)) {
        pthread_mutex_unlock(&io->mu);
        return zt_error_set(err, ZT_ERR_NOMEM, "offload: out of memory queueing %zu I/O blocks for %s", n, path);
    }
    for (size_t k = 0; k < n; k++) {
        size_t at = k * io->block, l = len - at < io->block ? len - at : io->block;
        io->q[(io->head + io->count) % io->cap] =
            (io_block){.t = t, .fd = fd, .path = path, .buf = (char *)buf + at, .len = l, .off = off + (off_t)at,
                       .write = write, .sum = sums ? sums + k : NULL};
        io->count++;
        t->pending++;
    }
    pthread_cond_broadcast(&io->work);
    pthread_mutex_unlock(&io->mu);
    return ZT_OK;
}

int zt_io_wait(zt_io *io, zt_io_ticket *t, double *waited_s, zt_error *err) {
    double t0 = waited_s ? now_s() : 0;
    pthread_mutex_lock(&io->mu);
    while (t->pending > 0) pthread_cond_wait(&io->done, &io->mu);
    int code = t->code;
    if (code) zt_error_set(err, code, "%s", t->msg);
    t->code = ZT_OK;
    t->msg[0] = '\0';
    pthread_mutex_unlock(&io->mu);
    if (waited_s) *waited_s += now_s() - t0;
    return code;
}

void zt_io_bytes(zt_io *io, uint64_t *read, uint64_t *written) {
    pthread_mutex_lock(&io->mu);
    if (read) *read = io->read_bytes;
    if (written) *written = io->write_bytes;
    pthread_mutex_unlock(&io->mu);
}
