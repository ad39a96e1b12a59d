/* trace.h - the timeline: a per-process tracer writing Chrome trace events (the format of Horovod's
 * Timeline, chrome://tracing, https://ui.perfetto.dev), one file per rank, merged into one file
 * that shows every rank (pid = rank, tid = a small per-thread number).
 *
 * Use:
 *   zt_trace_open("trace.json", rank, &err);      // writes trace.rank<rank>.json
 *   zt_trace_begin("forward", unit->name);        // a span on this thread ...
 *   zt_trace_end();                               // ... becomes one complete event ("X")
 *   zt_trace_complete("comm", "all_gather", seconds, 2,   // a span that ended now and lasted
 *       (zt_trace_arg[]){ZT_TARG_STR("tag", tag), ZT_TARG_NUM("bytes", n)});  // seconds
 *   zt_trace_close(&err);                         // writes the rest, closes the file
 *   zt_trace_merge_ranks("trace.json", nranks, &err);   // rank 0, after every rank closed
 *
 * Cost: disabled, one load of a global flag and a predicted-not-taken branch per call (the
 * calls below are static inline; measured 0.3 ns per begin/end pair). Enabled, two clock reads
 * per span and the formatting of one line into a 1 MiB process buffer under a mutex (measured
 * ~1 us per span on a busy 2-core VM, file writes included); the buffer goes to the file when
 * full, so a long run writes in 1 MiB chunks and holds no more than that in memory.
 *
 * Clock and alignment: ts/dur are microseconds of CLOCK_MONOTONIC since zt_trace_open. The file
 * records the CLOCK_REALTIME of that instant (otherData.epoch_unix_us); the merge shifts each
 * rank's events by its epoch minus the earliest, so ranks on one machine line up to the clock's
 * resolution (across machines: as well as their clocks agree, NTP typically within a millisecond).
 *
 * File layout (one event per line, ts first, so the merge streams and never parses JSON):
 *   {"otherData":{...},"displayTimeUnit":"ms","traceEvents":[
 *   {"ph":"M",...},
 *   {"ts":12.345,"ph":"X","dur":3.210,"pid":0,"tid":1,"cat":"forward","name":"h.0"},
 *   ...
 *   {"ph":"M","pid":0,"tid":0,"name":"trace_end",...}]}
 * A file cut short (the process died) is not valid JSON; zt_trace_merge / `zerotrain plot
 * --merge-traces` accepts it and keeps its complete lines.
 *
 * Threads: every function is thread-safe; begin/end pair up per thread (a stack of 64 levels per
 * thread; deeper spans are counted and dropped, an end without a begin is ignored and counted:
 * both counts are written at close). Spans on one thread must nest (Chrome's rule for "X").
 * Strings (cat, name, args) are copied and JSON-escaped; they need not outlive the call. */
#ifndef ZT_TRACE_H
#define ZT_TRACE_H

#include "zerotrain/zerotrain.h"

#include <stdbool.h>
#include <stddef.h>

/* One argument of an event: a string (str != NULL) or a number (str == NULL). */
typedef struct zt_trace_arg {
    const char *key;
    const char *str;
    double num;
} zt_trace_arg;
#define ZT_TARG_STR(k, v) ((zt_trace_arg){.key = (k), .str = (v) ? (v) : "", .num = 0})
#define ZT_TARG_NUM(k, v) ((zt_trace_arg){.key = (k), .str = NULL, .num = (double)(v)})

/* Read inline by the calls below; written only by zt_trace_open / zt_trace_close. */
extern volatile bool zt_trace_enabled_;

/* "trace.json" + rank 3 -> "trace.rank3.json"; no extension: "trace" -> "trace.rank3.json".
 * rank < 0: the path unchanged. Truncates to cap. */
void zt_trace_rank_path(const char *path, int rank, char *out, size_t cap);

/* Starts tracing this process into zt_trace_rank_path(path, rank) (parent directories are
 * created). The calling thread becomes tid 1, "main". ZT_ERR_IO when the file cannot be
 * created; ZT_ERR_USAGE when a trace is already open. */
int zt_trace_open(const char *path, int rank, zt_error *err);
/* Ends tracing: writes the buffered events and the closing line, closes the file. Returns the
 * first write error of the whole trace (ZT_ERR_IO naming the file), ZT_OK otherwise (also when
 * no trace was open). Spans still open are dropped. */
int zt_trace_close(zt_error *err);
/* The file being written ("" when none). */
const char *zt_trace_path(void);

/* Names the calling thread in the viewer ("comm", "io"). */
void zt_trace_thread_name_(const char *name);

void zt_trace_begin_(const char *cat, const char *name);
void zt_trace_end_(int nargs, const zt_trace_arg *args);
void zt_trace_complete_(const char *cat, const char *name, double dur_s, int nargs,
                        const zt_trace_arg *args);
void zt_trace_instant_(const char *cat, const char *name, int nargs, const zt_trace_arg *args);
void zt_trace_counter_(const char *name, int nargs, const zt_trace_arg *args);

static inline bool zt_trace_on(void) { return __builtin_expect(zt_trace_enabled_, 0); }
/* Opens a span on this thread. */
static inline void zt_trace_begin(const char *cat, const char *name) {
    if (zt_trace_on()) zt_trace_begin_(cat, name);
}
/* Closes the innermost open span of this thread. */
static inline void zt_trace_end(void) {
    if (zt_trace_on()) zt_trace_end_(0, NULL);
}
/* Closes it with arguments (shown in the viewer's detail pane). */
static inline void zt_trace_end_args(int nargs, const zt_trace_arg *args) {
    if (zt_trace_on()) zt_trace_end_(nargs, args);
}
/* A span that ends now and lasted dur_s seconds (for code that timed itself: a collective). */
static inline void zt_trace_complete(const char *cat, const char *name, double dur_s, int nargs,
                                     const zt_trace_arg *args) {
    if (zt_trace_on()) zt_trace_complete_(cat, name, dur_s, nargs, args);
}
/* A point in time ("i", thread scope): a skipped step, a checkpoint commit. */
static inline void zt_trace_instant(const char *cat, const char *name, int nargs,
                                    const zt_trace_arg *args) {
    if (zt_trace_on()) zt_trace_instant_(cat, name, nargs, args);
}
/* A counter track ("C"): each numeric arg is one series, e.g. memory by class. */
static inline void zt_trace_counter(const char *name, int nargs, const zt_trace_arg *args) {
    if (zt_trace_on()) zt_trace_counter_(name, nargs, args);
}
static inline void zt_trace_thread_name(const char *name) {
    if (zt_trace_on()) zt_trace_thread_name_(name);
}

/* Merges trace files written by zt_trace_open (complete or cut short) into one valid Chrome
 * trace at output, aligning them by their epochs. Streams line by line: memory is one line.
 * ZT_ERR_IO (a file cannot be read or written), ZT_ERR_DATA (an input is not a zerotrain trace:
 * the message names it). n >= 1. output may not be one of the inputs. */
int zt_trace_merge(const char *const *inputs, int n, const char *output, zt_error *err);
/* zt_trace_merge of zt_trace_rank_path(path, r) for r < nranks into path itself: what the
 * trainer calls on rank 0 once every rank has closed its trace (after a barrier). Files not on
 * this machine (ranks on other nodes without a shared file system) fail with ZT_ERR_IO naming
 * them; the per-rank files stay either way. */
int zt_trace_merge_ranks(const char *path, int nranks, zt_error *err);

/* Writes s as a JSON string body (no quotes) into dst (cap bytes, always terminated): escapes
 * " \ and control characters (\n, \t, \u00XX); bytes >= 0x80 pass through (UTF-8 stays UTF-8).
 * Returns the length the full escape needs (like snprintf), so >= cap means truncated; a
 * truncated result never ends inside an escape. */
size_t zt_json_escape(char *dst, size_t cap, const char *s);

#endif
