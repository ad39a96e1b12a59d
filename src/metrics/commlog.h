/* commlog.h - the communication log's report: the rows obs/commlog.h recorded, printed at the end
 * of training as a table of count, bytes, mean latency, algorithmic and bus bandwidth, and written
 * as JSONL events. Recording is below the comm layer (src/obs/commlog.c); this side names the
 * kinds (zt_coll_kind_name, comm/comm.h) and writes the JSONL (metrics/metrics.h).
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
#ifndef ZT_METRICS_COMMLOG_H
#define ZT_METRICS_COMMLOG_H

#include <stdio.h>

#include "metrics/metrics.h"
#include "obs/commlog.h"

/* The bus-bandwidth factor of a kind on nranks ranks (1 for nranks <= 1 is not special-cased:
 * all-reduce on 1 rank gives 0, as NCCL-tests prints). */
double zt_commlog_busbw_factor(int kind, int nranks);
/* Mean latency (s), algbw and busbw (bytes/s) of a row; NaN when the row took no time. */
void zt_commlog_row_stats(const zt_commlog_row *r, double *mean_latency_s, double *algbw,
                          double *busbw);

/* Prints the table (a title line naming rank, then one row per bin and a total per operation);
 * "comm log: no collectives recorded" when empty. rank is only printed. */
void zt_commlog_print(FILE *out, int rank);
/* The same rows as JSONL events: {"event":"commlog","op":"all_gather","group":"tp","ranks":2,"size_min":...,
 * "count":...,"bytes":...,"mean_latency_s":...,"algbw_GBps":...,"busbw_GBps":...,"exposed_s":...}. */
int zt_commlog_write_jsonl(zt_jsonl *j, zt_error *err);

#endif
