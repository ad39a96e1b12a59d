/* nvme_store.h - one rank's file-backed state on a local disk (ZeRO-Infinity's NVMe tier): K
 * arrays ("kinds": exp_avg, exp_avg_sq, a master copy, parameter pieces, ...) of the same number
 * of fp32 elements, one file per kind,
 *
 *   DIR/RUN/rank-NNNNN.<kind>     the kind's elements [0, floats) back to back, padded to 4 KiB
 *
 * streamed chunk by chunk through a bounded ring of staging buffers (buffer_count x buffer_bytes
 * of memory, nothing else grows with the state): while chunk k is handed to the caller to update
 * in place, chunk k+1 (and k+2, ... as buffers allow) is being read and chunk k-1 written back.
 * One buffer holds one chunk of every kind, so chunk = buffer_bytes / K rounded down to 4 KiB.
 *
 * I/O is O_DIRECT where the file system accepts it (checked when the files are made), so the
 * states do not move into the page cache; otherwise buffered, and describe() says why. The files
 * are created (space reserved with fallocate where supported, so a full disk fails here and not
 * mid-step) by create and removed by free; a run killed before free leaves DIR/RUN behind.
 *
 * Errors are ZT_ERR_IO (exit 8) naming the file, the offset and the system's reason; nothing here
 * aborts. */
#ifndef ZT_NVME_STORE_H
#define ZT_NVME_STORE_H

#include "zerotrain/zerotrain.h"

#define ZT_NVME_MAX_KINDS 4

struct zt_io_ticket; /* offload/io.h */

typedef struct zt_nvme_store zt_nvme_store;

typedef struct zt_nvme_store_options {
    const char *dir;            /* an existing directory (the nvme_path); RUN is made inside it */
    const char *kind_dirs[ZT_NVME_MAX_KINDS]; /* optional: kind k's own directory (NULL: dir), so
                                   parameters and optimizer states may live on different disks */
    const char *run;            /* the run's directory name, same on every rank of a job */
    int rank;                   /* the file names' NNNNN */
    int nkinds;                 /* 1..ZT_NVME_MAX_KINDS */
    const char *kinds[ZT_NVME_MAX_KINDS]; /* file suffixes: "exp_avg", "exp_avg_sq", ... */
    size_t floats;              /* elements per kind (0 is allowed: nothing to stream) */
    int buffer_count;           /* staging buffers, >= 2 (0: 4) */
    size_t buffer_bytes;        /* bytes per staging buffer (0: 64 MiB); >= nkinds x 4 KiB */
    int io_threads;             /* 0: 2 */
    bool buffered;              /* never O_DIRECT */
    bool read_only[ZT_NVME_MAX_KINDS]; /* kinds the stream reads but does not write back (the caller
                                   writes them between streams, zt_nvme_store_write_span_async) */
} zt_nvme_store_options;

typedef struct zt_nvme_stats {
    uint64_t read_bytes, write_bytes; /* moved by the I/O threads (streams and random access) */
    double stream_s;            /* wall time inside zt_nvme_store_stream */
    double wait_s;              /* of which the caller was blocked on I/O (not hidden by updates) */
    double update_s;            /* of which in the caller's chunk function */
    int64_t streams;            /* calls of zt_nvme_store_stream */
    uint64_t span_read_bytes;   /* of read_bytes: by zt_nvme_store_read_span and its asynchronous
                                   form (not in read_bytes) */
    double span_wait_s;         /* time blocked in zt_nvme_store_span_wait for reads, any thread */
    double span_write_wait_s;   /* ... for writes */
} zt_nvme_stats;

/* Makes DIR/RUN (if needed) and the K files, filled with zeros; allocates the staging buffers
 * and starts the I/O threads. ZT_ERR_IO names the path when DIR is missing or not writable or the
 * disk lacks room; ZT_ERR_USAGE for bad sizes; ZT_ERR_NOMEM for the buffers. */
int zt_nvme_store_create(const zt_nvme_store_options *o, zt_nvme_store **out, zt_error *err);
/* Stops the threads, frees the buffers, deletes the files and DIR/RUN when it is empty. */
void zt_nvme_store_free(zt_nvme_store *s);

/* Called once per chunk, in order: state[k] points at kind k's elements [begin, begin + n) in a
 * staging buffer; the function updates them in place (they are written back after it returns).
 * Returns ZT_OK or an error (then the stream stops after in-flight I/O has finished). */
typedef int (*zt_nvme_chunk_fn)(void *ctx, size_t begin, size_t n, float *const *state, zt_error *err);

/* Streams every element of every kind through fn (see the top of this file). On return no I/O is
 * in flight. Errors: fn's, or the first I/O error. */
int zt_nvme_store_stream(zt_nvme_store *s, zt_nvme_chunk_fn fn, void *ctx, zt_error *err);

/* Random access (checkpoints, initialization): elements [begin, begin + n) of kind k, through
 * the page cache (not a stream; never while one runs). */
int zt_nvme_store_read(zt_nvme_store *s, int kind, size_t begin, size_t n, float *dst, zt_error *err);
int zt_nvme_store_write(zt_nvme_store *s, int kind, size_t begin, size_t n, const float *src, zt_error *err);
/* Elements [begin, begin + n) of kind k read straight from the file into buf (4 KiB aligned, cap
 * bytes: at least zt_nvme_span_bytes(begin, n)) through the stream's descriptor (O_DIRECT where
 * the store has it), the enclosing 4 KiB blocks read whole; *data points at element begin inside
 * buf. Safe from any thread while no stream runs (a plain pread). ZT_ERR_IO names the file. */
int zt_nvme_store_read_span(zt_nvme_store *s, int kind, size_t begin, size_t n, void *buf, size_t cap, float **data,
                            zt_error *err);
/* The same read queued on the I/O threads against ticket t (zeroed by the caller before its first
 * use, or reused after a wait): *data is where element begin will be once zt_nvme_store_span_wait
 * returns. buf must stay valid until then. Not while a stream runs (it shares the threads). */
int zt_nvme_store_read_span_async(zt_nvme_store *s, int kind, size_t begin, size_t n, void *buf, size_t cap,
                                  struct zt_io_ticket *t, float **data, zt_error *err);
/* Elements [begin, begin + n) of kind k written from buf (4 KiB aligned) through the stream's
 * descriptor, queued on the I/O threads against ticket t: begin must start a 4 KiB block, and the
 * write covers the enclosing blocks (what follows the elements in the last one is written too:
 * padding the caller owns). */
int zt_nvme_store_write_span_async(zt_nvme_store *s, int kind, size_t begin, size_t n, const void *buf,
                                   struct zt_io_ticket *t, zt_error *err);
/* Waits for every span read (write: every span write) queued against t (any thread); the time
 * blocked counts in the stats' span_wait_s (span_write_wait_s). ZT_ERR_IO names the file and the
 * offset. */
int zt_nvme_store_span_wait(zt_nvme_store *s, struct zt_io_ticket *t, bool write, zt_error *err);
/* Bytes zt_nvme_store_read_span reads for elements [begin, begin + n). */
static inline size_t zt_nvme_span_bytes(size_t begin, size_t n) {
    size_t lo = begin * 4 / 4096 * 4096, hi = ((begin + n) * 4 + 4095) / 4096 * 4096;
    return hi - lo;
}
/* Sets every element of every kind (of kind k) to zero. */
int zt_nvme_store_zero(zt_nvme_store *s, zt_error *err);
int zt_nvme_store_zero_kind(zt_nvme_store *s, int k, zt_error *err);

/* A staging buffer the caller may use between streams as bounce memory for random access
 * (checkpoint save/load stay within the planned staging memory); *floats is its size. */
float *zt_nvme_store_scratch(zt_nvme_store *s, size_t *floats);

/* Memory the store holds (the staging buffers), bytes. */
size_t zt_nvme_store_memory(const zt_nvme_store *s);
/* Elements per chunk. */
size_t zt_nvme_store_chunk_floats(const zt_nvme_store *s);
/* The path of kind k's file. */
const char *zt_nvme_store_path(const zt_nvme_store *s, int kind);
/* One line for people: directory, files and their size, O_DIRECT or why not, buffers, threads. */
const char *zt_nvme_store_describe(const zt_nvme_store *s);
void zt_nvme_store_stats(zt_nvme_store *s, zt_nvme_stats *out, bool reset);

#endif
