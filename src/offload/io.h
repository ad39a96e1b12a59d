/* io.h - the offload tier's asynchronous file I/O: a small pool of threads doing pread/pwrite of
 * large blocks taken from one FIFO queue. A caller submits any number of requests against a
 * ticket and later waits for the ticket: it completes when every block of every request
 * submitted against it has, and carries the first error met (the file and offset named).
 *
 * Why threads and not io_uring: large sequential transfers (megabytes per request) reach the
 * device's bandwidth with a queue depth of a few blocking threads, and threads work wherever
 * pread works, including containers whose seccomp profile refuses io_uring_setup. Blocks of
 * one request run on different threads at once, so the queue depth is the thread count.
 *
 * Ownership: buffers and tickets belong to the caller and must stay valid until the ticket's
 * wait returns. The threads never allocate (no malloc arena per thread, small stacks). */
#ifndef ZT_OFFLOAD_IO_H
#define ZT_OFFLOAD_IO_H

#include "zerotrain/zerotrain.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct zt_io zt_io;

typedef struct zt_io_ticket {
    int pending;        /* blocks submitted and not finished */
    int code;           /* first error: a zt_status (ZT_ERR_IO, ...), ZT_OK while none */
    char msg[600];      /* its message: what, which file, which offset, strerror */
} zt_io_ticket;

/* Starts `threads` I/O threads (1..64); requests are cut into blocks of at most block_bytes (a
 * multiple of 4096; 0: 8 MiB). */
int zt_io_create(int threads, size_t block_bytes, zt_io **out, zt_error *err);
/* Waits for the queue to drain, stops and joins the threads. NULL is fine. */
void zt_io_free(zt_io *io);

/* Queues a read (write = false) or write of len bytes at file offset off of fd into/from buf,
 * counted against t (which the caller zeroed before its first use, or reuses after a wait).
 * path names the file in error messages (kept by pointer: it must outlive the request). A
 * short read (end of file before len bytes) is an error, as is a write that makes no progress.
 * sums (optional, one per block of the request: ceil(len / block bytes)): a write stores each
 * block's XXH3-64 there before writing it; a read checks each block against its entry (0:
 * unknown, not checked) and fails naming the file and offset when they differ, so a file changed
 * under the run (truncated and re-extended, overwritten, corrupted) is caught, not consumed.
 * Returns ZT_ERR_NOMEM only if the queue cannot grow. */
int zt_io_submit(zt_io *io, zt_io_ticket *t, int fd, const char *path, void *buf, size_t len, off_t off,
                 bool write, uint64_t *sums, zt_error *err);
/* Bytes per block (requests are cut into blocks of this size). */
size_t zt_io_block_bytes(const zt_io *io);
/* Blocks until every block submitted against t is done; returns t->code (copied into err). The
 * ticket is then empty and reusable. *waited_s (optional) += the seconds spent blocked. */
int zt_io_wait(zt_io *io, zt_io_ticket *t, double *waited_s, zt_error *err);

/* Bytes moved since creation (reads, writes). */
void zt_io_bytes(zt_io *io, uint64_t *read, uint64_t *written);

#endif
