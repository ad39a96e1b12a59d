/* commlog.h - the communication log (DeepSpeed's comms_logger): every finished collective of this
 * process, binned by operation, communicator group (its name and size: "tp" 2, "dp" 4, "world" 8,
 * "shard", "replicate") and message-size class, summarized at the end of
 * training as a table of count, bytes, mean latency, algorithmic and bus bandwidth.
 *
 * The comm layer calls zt_commlog_record once per finished collective, from whichever thread
 * finished it; nothing is exchanged between ranks (no extra synchronization): each rank logs its
 * own view, and the trainer prints rank 0's.
 *
 * Definitions (NCCL-tests, https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md):
 *   size    the collective's buffer in bytes: all-reduce n*4; reduce-scatter the whole input
 *           (sum of the blocks); all-gather the whole output; broadcast the buffer
 *   latency start to finish of the call (for a non-blocking collective this includes the time it
 *           ran in the background; "exposed" is the part spent blocked in a wait)
 *   algbw   size / latency (summed bytes over summed seconds within a row)
 *   busbw   algbw x factor, the rate each link carries for an optimal ring:
 *             all-reduce 2(N-1)/N; reduce-scatter and all-gather (N-1)/N; broadcast 1;
 *             small and setup messages are all-gathers of a few bytes: (N-1)/N
 *   class   k such that 2^k <= size < 2^(k+1) (size 0: its own class) */
#ifndef ZT_COMMLOG_H
#define ZT_COMMLOG_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "metrics/metrics.h"

/* Recording is off until enabled; records while off are ignored (one relaxed load). */
void zt_commlog_enable(bool on);
/* Forgets every record. */
void zt_commlog_reset(void);

/* One finished collective: kind is a zt_coll_kind (src/comm/comm.h), bytes its size as defined
 * above, seconds start to finish, wait_seconds blocked in waits, nranks the communicator's size,
 * group its name (zt_comm_name): its first word, up to 15 characters, names the row ("gradients
 * (communication thread)" is "gradients"; NULL: "").
 * Thread-safe, allocation-free, cannot fail (kinds outside [0, ZT_COLL_NKINDS) are counted under
 * the last kind). */
void zt_commlog_record(int kind, uint64_t bytes, double seconds, double wait_seconds, int nranks, const char *group);

typedef struct zt_commlog_row {
    int kind;            /* zt_coll_kind */
    char group[16];      /* the communicator's name ("tp", "dp", "world", ...) */
    int nranks;
    int size_class;      /* -1: empty messages; else k with 2^k <= size < 2^(k+1) */
    uint64_t count;
    uint64_t bytes;      /* summed sizes */
    double seconds;      /* summed latencies */
    double wait_seconds; /* summed exposed time */
} zt_commlog_row;

/* The bus-bandwidth factor of a kind on nranks ranks (1 for nranks <= 1 is not special-cased:
 * all-reduce on 1 rank gives 0, as NCCL-tests prints). */
double zt_commlog_busbw_factor(int kind, int nranks);
/* Mean latency (s), algbw and busbw (bytes/s) of a row; NaN when the row took no time. */
void zt_commlog_row_stats(const zt_commlog_row *r, double *mean_latency_s, double *algbw,
                          double *busbw);
/* Copies up to cap rows, ordered by kind, group, nranks, size class; returns how many rows exist. */
int zt_commlog_rows(zt_commlog_row *rows, int cap);

/* Prints the table (a title line naming rank, then one row per bin and a total per operation);
 * "comm log: no collectives recorded" when empty. rank is only printed. */
void zt_commlog_print(FILE *out, int rank);
/* The same rows as JSONL events: {"event":"commlog","op":"all_gather","group":"tp","ranks":2,"size_min":...,
 * "count":...,"bytes":...,"mean_latency_s":...,"algbw_GBps":...,"busbw_GBps":...,"exposed_s":...}. */
int zt_commlog_write_jsonl(zt_jsonl *j, zt_error *err);

#endif
