/* nvme_store.c - one rank's file-backed state and its streaming (see nvme_store.h for the layout
 * and the contract).
 *
 * The stream, with B buffers and chunks c = 0..C-1 (chunk c lives in buffer c mod B):
 *
 *   read 0 .. B-2                                 (one buffer stays free for write-back)
 *   for c: wait read c | update c | queue write c | wait write c-1, queue read c+B-1
 *
 *   time ->   [read c+1][read c+2]...        (I/O threads)
 *             [ update c ][ update c+1 ]     (caller)
 *             [write c-1][write c]...        (I/O threads)
 *
 * so with B >= 3 the reads run ahead, the update of one chunk overlaps the write-back of the one
 * before it and the reads of the ones after it, and the caller only waits when the disk is slower
 * than the update (stats: wait_s). Two files opened per kind: an O_DIRECT descriptor for the
 * streams (aligned buffers, offsets and lengths: chunks are multiples of 4 KiB and the files are
 * padded) and a buffered one for random access; Linux keeps the two coherent (a direct read
 * flushes dirty cached pages of its range first, a direct write invalidates them). */
#define _GNU_SOURCE
#include "offload/nvme_store.h"
#include "offload/io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <stdint.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#define ALIGN 4096u
#define PATH_CAP 4200

struct zt_nvme_store {
    char run_dir[ZT_NVME_MAX_KINDS][PATH_CAP]; /* each kind's DIR/RUN (kinds may live on other disks) */
    char path[ZT_NVME_MAX_KINDS][PATH_CAP + 80];
    int fd[ZT_NVME_MAX_KINDS];      /* streams: O_DIRECT where allowed */
    int fd_rand[ZT_NVME_MAX_KINDS]; /* random access: buffered */
    bool created[ZT_NVME_MAX_KINDS];
    int nkinds;
    bool read_only[ZT_NVME_MAX_KINDS]; /* not written back by streams */
    size_t floats, file_bytes;
    size_t chunk;                   /* elements per chunk (a multiple of 1024) */
    size_t slot_bytes;              /* one buffer: nkinds x chunk x 4 */
    int nbuf;
    char *staging;                  /* nbuf x slot_bytes, 4 KiB aligned */
    zt_io_ticket *rd, *wr;          /* (nbuf) */
    size_t nchunks, bpc;            /* chunks per kind, I/O blocks per chunk */
    uint64_t *sums;                 /* (nkinds, nchunks, bpc) XXH3 of each block as last written; 0: unknown */
    zt_io *io;
    int io_threads;
    bool direct;
    char why_buffered[200];
    char desc[1024];
    zt_nvme_stats st;
    uint64_t span_read_bytes;       /* zt_nvme_store_read_span's, from any thread (atomic) */
    uint64_t span_async_bytes;      /* of them queued on the I/O threads (which count them too), ever */
    uint64_t span_wait_ns[2];       /* zt_nvme_store_span_wait's blocked time, reads and writes (atomic) */
};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

/* Space for file_bytes: fallocate (a full disk fails now, with the free space named), else a
 * sparse ftruncate where the file system cannot reserve. Zeros either way. */
static int reserve(zt_nvme_store *s, int k, zt_error *err) {
    if (!s->file_bytes) return ZT_OK;
    if (fallocate(s->fd[k], 0, 0, (off_t)s->file_bytes) == 0) return ZT_OK;
    int en = errno;
    if (en == ENOSPC || en == EDQUOT || en == EFBIG) {
        struct statvfs vfs;
        double free_mib = statvfs(s->run_dir[k], &vfs) == 0 ? (double)vfs.f_bavail * (double)vfs.f_frsize / 1048576.0 : -1;
        return zt_error_set(err, ZT_ERR_IO, "cannot reserve %.1f MiB for %s: %s (%.1f MiB free on that file system)",
                            (double)s->file_bytes / 1048576.0, s->path[k], strerror(en), free_mib);
    }
    if (ftruncate(s->fd[k], (off_t)s->file_bytes) == 0) return ZT_OK;
    en = errno;
    return zt_error_set(err, ZT_ERR_IO, "cannot size %s to %zu bytes: %s", s->path[k], s->file_bytes, strerror(en));
}

/* Reopens kind k's stream descriptor without O_DIRECT. */
static int go_buffered(zt_nvme_store *s, int k, zt_error *err) {
    if (s->fd[k] >= 0) close(s->fd[k]);
    s->fd[k] = open(s->path[k], O_RDWR | O_CLOEXEC);
    if (s->fd[k] < 0) return zt_error_set(err, ZT_ERR_IO, "cannot reopen %s: %s", s->path[k], strerror(errno));
    return ZT_OK;
}

/* Kind k's directory: its own where given, else the store's. */
static const char *kind_dir(const zt_nvme_store_options *o, int k) {
    return o->kind_dirs[k] && o->kind_dirs[k][0] ? o->kind_dirs[k] : o->dir;
}

static int make_files(zt_nvme_store *s, const zt_nvme_store_options *o, zt_error *err) {
    s->direct = !o->buffered;
    if (o->buffered) snprintf(s->why_buffered, sizeof s->why_buffered, "buffered I/O was asked for");
    for (int k = 0; k < s->nkinds; k++) {
        const char *dir = kind_dir(o, k);
        struct stat sb;
        if (stat(dir, &sb) != 0)
            return zt_error_set(err, ZT_ERR_IO, "offload directory %s: %s (create it first: zerotrain makes only "
                                "the run directory inside it)", dir, strerror(errno));
        if (!S_ISDIR(sb.st_mode)) return zt_error_set(err, ZT_ERR_IO, "offload directory %s is not a directory", dir);
        if (snprintf(s->run_dir[k], sizeof s->run_dir[k], "%s/%s", dir, o->run) >= (int)sizeof s->run_dir[k])
            return zt_error_set(err, ZT_ERR_USAGE, "offload directory name too long: %s", dir);
        if (mkdir(s->run_dir[k], 0700) != 0 && errno != EEXIST)
            return zt_error_set(err, ZT_ERR_IO, "cannot create the offload run directory %s: %s", s->run_dir[k],
                                strerror(errno));
        if (snprintf(s->path[k], sizeof s->path[k], "%s/rank-%05d.%.32s", s->run_dir[k], o->rank, o->kinds[k]) >=
            (int)sizeof s->path[k])
            return zt_error_set(err, ZT_ERR_USAGE, "offload file name too long under %s", s->run_dir[k]);
        int flags = O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC;
        s->fd[k] = s->direct ? open(s->path[k], flags | O_DIRECT, 0600) : -1;
        if (s->fd[k] < 0 && s->direct && errno == EINVAL) {
            s->direct = false;
            snprintf(s->why_buffered, sizeof s->why_buffered, "the file system refuses O_DIRECT (open: EINVAL)");
            for (int j = 0; j < k; j++) /* earlier kinds switch too: one mode for the store */
                if (go_buffered(s, j, err)) return err->code;
        }
        if (s->fd[k] < 0) s->fd[k] = open(s->path[k], flags, 0600);
        if (s->fd[k] < 0) return zt_error_set(err, ZT_ERR_IO, "cannot create %s: %s", s->path[k], strerror(errno));
        s->created[k] = true;
        int rc = reserve(s, k, err);
        if (rc) return rc;
        s->fd_rand[k] = open(s->path[k], O_RDWR | O_CLOEXEC);
        if (s->fd_rand[k] < 0) return zt_error_set(err, ZT_ERR_IO, "cannot open %s: %s", s->path[k], strerror(errno));
    }
    /* some file systems accept O_DIRECT at open and refuse the I/O: probe one aligned block */
    if (s->direct && s->file_bytes >= ALIGN) {
        for (int k = 0; k < s->nkinds; k++) {
            ssize_t r = pread(s->fd[k], s->staging, ALIGN, 0);
            if (r == (ssize_t)ALIGN) continue;
            int en = r < 0 ? errno : EIO;
            if (en != EINVAL)
                return zt_error_set(err, ZT_ERR_IO, "reading %s at offset 0 (%u bytes): %s", s->path[k], ALIGN,
                                    r < 0 ? strerror(en) : "short read");
            s->direct = false;
            snprintf(s->why_buffered, sizeof s->why_buffered, "the file system refuses O_DIRECT reads (EINVAL)");
            for (int j = 0; j < s->nkinds; j++)
                if (go_buffered(s, j, err)) return err->code;
            break;
        }
    }
    return ZT_OK;
}

int zt_nvme_store_create(const zt_nvme_store_options *o, zt_nvme_store **out, zt_error *err) {
    *out = NULL;
    int nbuf = o->buffer_count ? o->buffer_count : 4;
    size_t bytes = o->buffer_bytes ? o->buffer_bytes : (size_t)64 << 20;
    int threads = o->io_threads ? o->io_threads : 2;
    if (o->nkinds < 1 || o->nkinds > ZT_NVME_MAX_KINDS)
        return zt_error_set(err, ZT_ERR_USAGE, "offload: %d state kinds (1..%d)", o->nkinds, ZT_NVME_MAX_KINDS);
    if (!o->run || !o->run[0]) return zt_error_set(err, ZT_ERR_USAGE, "offload: no run name given");
    for (int k = 0; k < o->nkinds; k++)
        if (!kind_dir(o, k) || !kind_dir(o, k)[0])
            return zt_error_set(err, ZT_ERR_USAGE, "offload: no directory given for %s", o->kinds[k]);
    if (nbuf < 2 || nbuf > 1024)
        return zt_error_set(err, ZT_ERR_USAGE, "offload: %d staging buffers; at least 2 are needed (one updating, "
                            "one reading or writing), 3 or more to overlap reads and writes", nbuf);
    size_t chunk = bytes / (size_t)o->nkinds / ALIGN * (ALIGN / 4);
    if (chunk == 0)
        return zt_error_set(err, ZT_ERR_USAGE, "offload: a staging buffer of %zu bytes cannot hold a 4 KiB block of "
                            "each of the %d state kinds (at least %d KiB)", bytes, o->nkinds, 4 * o->nkinds);
    size_t need = round_up(o->floats ? o->floats : 1, ALIGN / 4);
    if (chunk > need) chunk = need; /* a small state needs no more than its own size */
    zt_nvme_store *s = calloc(1, sizeof *s);
    if (!s) return zt_error_set(err, ZT_ERR_NOMEM, "offload: out of memory");
    for (int k = 0; k < ZT_NVME_MAX_KINDS; k++) s->fd[k] = s->fd_rand[k] = -1;
    s->nkinds = o->nkinds;
    memcpy(s->read_only, o->read_only, sizeof s->read_only);
    s->floats = o->floats;
    s->file_bytes = round_up(o->floats * sizeof(float), ALIGN);
    s->chunk = chunk;
    s->slot_bytes = chunk * sizeof(float) * (size_t)o->nkinds;
    s->nbuf = nbuf;
    s->io_threads = threads;
    int rc;
    s->staging = aligned_alloc(ALIGN, (size_t)nbuf * s->slot_bytes);
    s->rd = calloc((size_t)nbuf, sizeof *s->rd);
    s->wr = calloc((size_t)nbuf, sizeof *s->wr);
    if (!s->staging || !s->rd || !s->wr) {
        rc = zt_error_set(err, ZT_ERR_NOMEM, "offload: out of memory for %d staging buffers of %.1f MiB", nbuf,
                          (double)s->slot_bytes / 1048576.0);
        goto fail;
    }
    memset(s->staging, 0, (size_t)nbuf * s->slot_bytes); /* resident now: the plan counts it */
    if ((rc = make_files(s, o, err)) || (rc = zt_io_create(threads, 0, &s->io, err))) goto fail;
    s->nchunks = (s->floats + chunk - 1) / chunk;
    s->bpc = (chunk * sizeof(float) + zt_io_block_bytes(s->io) - 1) / zt_io_block_bytes(s->io);
    if (!(s->sums = calloc((size_t)s->nkinds * s->nchunks * s->bpc + 1, sizeof *s->sums))) {
        rc = zt_error_set(err, ZT_ERR_NOMEM, "offload: out of memory");
        goto fail;
    }
    int n = snprintf(s->desc, sizeof s->desc, "%s/rank-%05d.{", s->run_dir[0], o->rank);
    for (int k = 0; k < s->nkinds && n < (int)sizeof s->desc; k++)
        n += snprintf(s->desc + n, sizeof s->desc - (size_t)n, "%s%s", k ? "," : "", o->kinds[k]);
    for (int k = 1; k < s->nkinds && n < (int)sizeof s->desc; k++) /* kinds kept elsewhere */
        if (strcmp(s->run_dir[k], s->run_dir[0]))
            n += snprintf(s->desc + n, sizeof s->desc - (size_t)n, "%s %s in %s", k == 1 ? "" : ",", o->kinds[k],
                          s->run_dir[k]);
    if (n < (int)sizeof s->desc)
        snprintf(s->desc + n, sizeof s->desc - (size_t)n,
                 "}: %d file%s of %.1f MiB, %s%s%s, %d staging buffers x %.1f MiB (chunks of %zu elements), "
                 "%d I/O thread%s",
                 s->nkinds, s->nkinds > 1 ? "s" : "", (double)s->file_bytes / 1048576.0,
                 s->direct ? "O_DIRECT" : "buffered I/O", s->direct ? "" : ": ", s->direct ? "" : s->why_buffered,
                 nbuf, (double)s->slot_bytes / 1048576.0, chunk, threads, threads > 1 ? "s" : "");
    *out = s;
    return ZT_OK;
fail:
    zt_nvme_store_free(s);
    return rc;
}

void zt_nvme_store_free(zt_nvme_store *s) {
    if (!s) return;
    zt_io_free(s->io);
    for (int k = 0; k < s->nkinds; k++) {
        if (s->fd[k] >= 0) close(s->fd[k]);
        if (s->fd_rand[k] >= 0) close(s->fd_rand[k]);
        if (s->created[k]) unlink(s->path[k]);
    }
    for (int k = 0; k < s->nkinds; k++) /* fails while other ranks' files are there: the last one removes it */
        if (s->run_dir[k][0]) rmdir(s->run_dir[k]);
    free(s->staging);
    free(s->sums);
    free(s->rd);
    free(s->wr);
    free(s);
}

/* ---- streaming ---------------------------------------------------------------------------------- */

static float *slot_kind(const zt_nvme_store *s, int slot, int k) {
    return (float *)(s->staging + (size_t)slot * s->slot_bytes) + (size_t)k * s->chunk;
}

static size_t chunk_len(const zt_nvme_store *s, size_t c) {
    size_t begin = c * s->chunk;
    return s->floats - begin < s->chunk ? s->floats - begin : s->chunk;
}

static int queue_chunk(zt_nvme_store *s, size_t c, bool write, zt_error *err) {
    int slot = (int)(c % (size_t)s->nbuf);
    size_t bytes = round_up(chunk_len(s, c) * sizeof(float), ALIGN);
    off_t off = (off_t)(c * s->chunk * sizeof(float));
    for (int k = 0; k < s->nkinds; k++) {
        if (write && s->read_only[k]) continue;
        int rc = zt_io_submit(s->io, write ? &s->wr[slot] : &s->rd[slot], s->fd[k], s->path[k], slot_kind(s, slot, k),
                              bytes, off, write, s->sums + ((size_t)k * s->nchunks + c) * s->bpc, err);
        if (rc) return rc;
    }
    return ZT_OK;
}

/* A file shorter than the store made it was cut under the run: say so before reading it. */
static int check_sizes(const zt_nvme_store *s, zt_error *err) {
    for (int k = 0; k < s->nkinds; k++) {
        struct stat sb;
        if (fstat(s->fd[k], &sb) != 0)
            return zt_error_set(err, ZT_ERR_IO, "cannot stat %s: %s", s->path[k], strerror(errno));
        if ((size_t)sb.st_size != s->file_bytes)
            return zt_error_set(err, ZT_ERR_IO, "%s is %lld bytes, the run wrote %zu: it was truncated or changed "
                                "under the run (offset %lld onwards is missing)", s->path[k], (long long)sb.st_size,
                                s->file_bytes, (long long)sb.st_size);
    }
    return ZT_OK;
}

int zt_nvme_store_stream(zt_nvme_store *s, zt_nvme_chunk_fn fn, void *ctx, zt_error *err) {
    double t0 = now_s();
    int src = check_sizes(s, err);
    if (src) return src;
    size_t C = (s->floats + s->chunk - 1) / s->chunk;
    size_t ahead = (size_t)s->nbuf - 1;
    int rc = ZT_OK;
    for (size_t c = 0; c < C && c < ahead && !rc; c++) rc = queue_chunk(s, c, false, err);
    for (size_t c = 0; c < C && !rc; c++) {
        int slot = (int)(c % (size_t)s->nbuf);
        if ((rc = zt_io_wait(s->io, &s->rd[slot], &s->st.wait_s, err))) break;
        float *state[ZT_NVME_MAX_KINDS];
        for (int k = 0; k < s->nkinds; k++) state[k] = slot_kind(s, slot, k);
        double tu = now_s();
        rc = fn(ctx, c * s->chunk, chunk_len(s, c), state, err);
        s->st.update_s += now_s() - tu;
        if (rc || (rc = queue_chunk(s, c, true, err))) break;
        size_t next = c + ahead;
        if (next < C) {
            int ns = (int)(next % (size_t)s->nbuf); /* chunk c-1's buffer: its write must be done */
            if ((rc = zt_io_wait(s->io, &s->wr[ns], &s->st.wait_s, err)) || (rc = queue_chunk(s, next, false, err)))
                break;
        }
    }
    /* nothing may be in flight on return: the buffers are reused by the next stream */
    for (int b = 0; b < s->nbuf; b++) {
        zt_error e2;
        int r1 = zt_io_wait(s->io, &s->rd[b], &s->st.wait_s, &e2);
        if (r1 && !rc) rc = r1, *err = e2;
        int r2 = zt_io_wait(s->io, &s->wr[b], &s->st.wait_s, &e2);
        if (r2 && !rc) rc = r2, *err = e2;
    }
    s->st.stream_s += now_s() - t0;
    s->st.streams++;
    return rc;
}

/* ---- random access ------------------------------------------------------------------------------ */

static int check_range(const zt_nvme_store *s, int kind, size_t begin, size_t n, zt_error *err) {
    if (kind < 0 || kind >= s->nkinds || begin > s->floats || n > s->floats - begin)
        return zt_error_set(err, ZT_ERR_INTERNAL, "offload: elements [%zu, %zu) of kind %d are outside %s (%zu "
                            "elements, %d kinds)", begin, begin + n, kind, s->run_dir[0], s->floats, s->nkinds);
    return ZT_OK;
}

static int rand_io(zt_nvme_store *s, int kind, size_t begin, size_t n, void *buf, bool write, zt_error *err) {
    int rc = check_range(s, kind, begin, n, err);
    if (rc) return rc;
    char *p = buf;
    size_t len = n * sizeof(float), done = 0;
    off_t off = (off_t)(begin * sizeof(float));
    while (done < len) {
        ssize_t r = write ? pwrite(s->fd_rand[kind], p + done, len - done, off + (off_t)done)
                          : pread(s->fd_rand[kind], p + done, len - done, off + (off_t)done);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0)
            return zt_error_set(err, ZT_ERR_IO, "%s %s at offset %lld (%zu bytes): %s", write ? "writing" : "reading",
                                s->path[kind], (long long)(off + (off_t)done), len - done,
                                r < 0 ? strerror(errno)
                                      : write ? "no progress (device full?)"
                                              : "short read: the file is shorter than its state (truncated while in use?)");
        done += (size_t)r;
    }
    if (write) { /* the stream's checksums of these chunks no longer hold */
        s->st.write_bytes += len;
        if (n) {
            size_t c0 = begin / s->chunk, c1 = (begin + n - 1) / s->chunk;
            memset(s->sums + ((size_t)kind * s->nchunks + c0) * s->bpc, 0, (c1 - c0 + 1) * s->bpc * sizeof *s->sums);
        }
    } else {
        s->st.read_bytes += len;
    }
    return ZT_OK;
}

int zt_nvme_store_read(zt_nvme_store *s, int kind, size_t begin, size_t n, float *dst, zt_error *err) {
    return rand_io(s, kind, begin, n, dst, false, err);
}

int zt_nvme_store_write(zt_nvme_store *s, int kind, size_t begin, size_t n, const float *src, zt_error *err) {
    return rand_io(s, kind, begin, n, (void *)src, true, err);
}

/* The enclosing 4 KiB blocks [*lo, *lo + *len) of elements [begin, begin + n), checked against buf. */
static int span_of(const zt_nvme_store *s, int kind, size_t begin, size_t n, const void *buf, size_t cap, size_t *lo,
                   size_t *len, zt_error *err) {
    int rc = check_range(s, kind, begin, n, err);
    if (rc) return rc;
    size_t l = begin * sizeof(float) / ALIGN * ALIGN, hi = round_up((begin + n) * sizeof(float), ALIGN);
    if (hi > s->file_bytes) hi = s->file_bytes;
    if (((uintptr_t)buf % ALIGN) || cap < hi - l)
        return zt_error_set(err, ZT_ERR_INTERNAL, "offload: a span read of %zu bytes into a %zu-byte buffer at %p "
                            "(4 KiB alignment needed)", hi - l, cap, buf);
    *lo = l;
    *len = hi - l;
    return ZT_OK;
}

int zt_nvme_store_read_span(zt_nvme_store *s, int kind, size_t begin, size_t n, void *buf, size_t cap, float **data,
                            zt_error *err) {
    size_t lo = 0, len = 0;
    int rc = span_of(s, kind, begin, n, buf, cap, &lo, &len, err);
    if (rc) return rc;
    int fd = s->fd[kind]; /* the stream's descriptor: O_DIRECT where the store has it */
    size_t done = 0;
    while (done < len) {
        ssize_t r = pread(fd, (char *)buf + done, len - done, (off_t)(lo + done));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0)
            return zt_error_set(err, ZT_ERR_IO, "reading %s at offset %zu (%zu bytes): %s", s->path[kind], lo + done,
                                len - done, r < 0 ? strerror(errno) : "short read: the file is shorter than its state");
        done += (size_t)r;
    }
    __atomic_add_fetch(&s->span_read_bytes, (uint64_t)len, __ATOMIC_RELAXED);
    *data = (float *)(void *)((char *)buf + (begin * sizeof(float) - lo));
    return ZT_OK;
}

int zt_nvme_store_read_span_async(zt_nvme_store *s, int kind, size_t begin, size_t n, void *buf, size_t cap,
                                  zt_io_ticket *t, float **data, zt_error *err) {
    size_t lo = 0, len = 0;
    int rc = span_of(s, kind, begin, n, buf, cap, &lo, &len, err);
    if (!rc) rc = zt_io_submit(s->io, t, s->fd[kind], s->path[kind], buf, len, (off_t)lo, false, NULL, err);
    if (rc) return rc;
    __atomic_add_fetch(&s->span_read_bytes, (uint64_t)len, __ATOMIC_RELAXED);
    __atomic_add_fetch(&s->span_async_bytes, (uint64_t)len, __ATOMIC_RELAXED);
    *data = (float *)(void *)((char *)buf + (begin * sizeof(float) - lo));
    return ZT_OK;
}

int zt_nvme_store_write_span_async(zt_nvme_store *s, int kind, size_t begin, size_t n, const void *buf,
                                   zt_io_ticket *t, zt_error *err) {
    size_t lo = 0, len = 0;
    int rc = span_of(s, kind, begin, n, buf, SIZE_MAX, &lo, &len, err);
    if (rc) return rc;
    if (lo != begin * sizeof(float))
        return zt_error_set(err, ZT_ERR_INTERNAL, "offload: a span write at element %zu of %s does not start a 4 KiB "
                            "block", begin, s->path[kind]);
    return zt_io_submit(s->io, t, s->fd[kind], s->path[kind], (void *)buf, len, (off_t)lo, true, NULL, err);
}

int zt_nvme_store_span_wait(zt_nvme_store *s, zt_io_ticket *t, bool write, zt_error *err) {
    double w = 0;
    int rc = zt_io_wait(s->io, t, &w, err);
    __atomic_add_fetch(&s->span_wait_ns[write], (uint64_t)(w * 1e9), __ATOMIC_RELAXED);
    return rc;
}

int zt_nvme_store_zero_kind(zt_nvme_store *s, int k, zt_error *err) {
    if (k < 0 || k >= s->nkinds) return zt_error_set(err, ZT_ERR_INTERNAL, "offload: no kind %d", k);
    if (ftruncate(s->fd[k], 0) != 0) return zt_error_set(err, ZT_ERR_IO, "cannot clear %s: %s", s->path[k], strerror(errno));
    int rc = reserve(s, k, err);
    if (rc) return rc;
    memset(s->sums + (size_t)k * s->nchunks * s->bpc, 0, s->nchunks * s->bpc * sizeof *s->sums);
    return ZT_OK;
}

int zt_nvme_store_zero(zt_nvme_store *s, zt_error *err) {
    for (int k = 0; k < s->nkinds; k++) {
        int rc = zt_nvme_store_zero_kind(s, k, err);
        if (rc) return rc;
    }
    return ZT_OK;
}

float *zt_nvme_store_scratch(zt_nvme_store *s, size_t *floats) {
    *floats = s->slot_bytes / sizeof(float);
    return (float *)s->staging;
}

size_t zt_nvme_store_memory(const zt_nvme_store *s) { return (size_t)s->nbuf * s->slot_bytes; }
size_t zt_nvme_store_chunk_floats(const zt_nvme_store *s) { return s->chunk; }
const char *zt_nvme_store_path(const zt_nvme_store *s, int kind) {
    return kind >= 0 && kind < s->nkinds ? s->path[kind] : "";
}
const char *zt_nvme_store_describe(const zt_nvme_store *s) { return s->desc; }

void zt_nvme_store_stats(zt_nvme_store *s, zt_nvme_stats *out, bool reset) {
    uint64_t r = 0, w = 0;
    zt_io_bytes(s->io, &r, &w);
    /* the I/O threads count the asynchronous span reads too: those are span bytes, not the stream's */
    r -= __atomic_load_n(&s->span_async_bytes, __ATOMIC_RELAXED);
    *out = s->st;
    uint64_t span = __atomic_exchange_n(&s->span_read_bytes, reset ? 0 : s->span_read_bytes, __ATOMIC_RELAXED);
    uint64_t wait = __atomic_exchange_n(&s->span_wait_ns[0], reset ? 0 : s->span_wait_ns[0], __ATOMIC_RELAXED);
    uint64_t wwait = __atomic_exchange_n(&s->span_wait_ns[1], reset ? 0 : s->span_wait_ns[1], __ATOMIC_RELAXED);
    out->span_read_bytes = span;
    out->span_wait_s = (double)wait * 1e-9;
    out->span_write_wait_s = (double)wwait * 1e-9;
    out->read_bytes += r;
    out->write_bytes += w;
    if (reset) {
        memset(&s->st, 0, sizeof s->st);
        s->st.read_bytes -= r; /* the I/O threads' counters keep running: subtract what was reported */
        s->st.write_bytes -= w;
    }
}
