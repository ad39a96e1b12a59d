/* commlog.h - the communication log's recording side (DeepSpeed's comms_logger): every finished
 * collective of this process, binned by operation, communicator group (its name and size: "tp" 2,
 * "dp" 4, "world" 8, "shard", "replicate") and message-size class. It sits below the comm layer,
 * which calls zt_commlog_record once per finished collective, from whichever thread finished it;
 * nothing is exchanged between ranks (no extra synchronization): each rank logs its own view. The
 * report (the table, the JSONL events, algbw and busbw) is metrics/commlog.h's.
 *
 * The kinds of collective are defined here, below comm/comm.h (which counts by them too), so that
 * the log can bin them without including the comm layer. */
#ifndef ZT_OBS_COMMLOG_H
#define ZT_OBS_COMMLOG_H

#include <stdbool.h>
#include <stdint.h>

typedef enum zt_coll_kind {
    ZT_COLL_REDUCE_SCATTER = 0,
    ZT_COLL_ALL_GATHER = 1,
    ZT_COLL_ALL_REDUCE = 2, /* counted as itself only: its two phases are not counted again */
    ZT_COLL_BROADCAST = 3,
    ZT_COLL_SMALL = 4,      /* max, and, all_gather_f64 */
    ZT_COLL_SETUP = 5,      /* split, dup, barrier, init */
    ZT_COLL_P2P = 6,        /* a pipeline stage's send or receive (p2p.c): comm log only */
    ZT_COLL_COMPRESSED_ALL_REDUCE = 7, /* 1-bit Adam's momentum: signs + scales (compressed_all_reduce.c) */
    ZT_COLL_ALL_TO_ALL = 8, /* expert parallelism's dispatch and combine (all_to_all.c): its payload;
                               the counts it exchanges first are ZT_COLL_SMALL */
    ZT_COLL_NKINDS = 9
} zt_coll_kind;

/* Recording is off until enabled; records while off are ignored (one relaxed load). */
void zt_commlog_enable(bool on);
/* Forgets every record. */
void zt_commlog_reset(void);

/* One finished collective: kind is a zt_coll_kind, bytes its size (metrics/commlog.h defines it
 * per kind), seconds start to finish, wait_seconds blocked in waits, nranks the communicator's
 * size, group its name (zt_comm_name): its first word, up to 15 characters, names the row
 * ("gradients (communication thread)" is "gradients"; NULL: "").
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

/* Copies up to cap rows, ordered by kind, group, nranks, size class; returns how many rows exist.
 * ZT_COMMLOG_MAX_ROWS bounds how many there can be. */
int zt_commlog_rows(zt_commlog_row *rows, int cap);

#define ZT_COMMLOG_MAX_GROUPS 12
#define ZT_COMMLOG_NCLASSES 65 /* empty messages + 2^0 .. 2^63 */
#define ZT_COMMLOG_MAX_ROWS (ZT_COMMLOG_MAX_GROUPS * ZT_COLL_NKINDS * ZT_COMMLOG_NCLASSES)

#endif
