/* commlog.c - the communication log: bins of (operation, communicator group, power-of-two size
 * class) filled by zt_commlog_record, printed as a table at the end (see commlog.h for the
 * definitions of latency, algbw and busbw). A group is the first word of a communicator's name and
 * its size ("tp" 2, "dp" 4, "world" 8, "shard" 2, "gradients": the communication thread's copy of
 * the data-parallel comm), so the tensor-parallel collectives have rows of their own beside the
 * data-parallel ones of the same size.
 *
 * Invariants: the bins are a static table (no allocation on the record path); up to
 * MAX_GROUPS distinct (name, size) groups get their own rows, later ones share the last group's
 * rows (its name and nranks then show the first that claimed it). All access is under one mutex. */
#include "metrics/commlog.h"
#include "comm/comm.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define MAX_GROUPS 12
#define GROUP_NAME 16 /* characters kept of a group's name, with the terminator: zt_commlog_row.group's */
#define NCLASSES 65 /* empty messages + 2^0 .. 2^63 */

typedef struct bin {
    uint64_t count, bytes;
    double seconds, wait;
} bin;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_bool enabled;
static int group_ranks[MAX_GROUPS];
static char group_names[MAX_GROUPS][GROUP_NAME];
static int ngroups;
static bin bins[MAX_GROUPS][ZT_COLL_NKINDS][NCLASSES];

void zt_commlog_enable(bool on) { atomic_store(&enabled, on); }

void zt_commlog_reset(void) {
    pthread_mutex_lock(&lock);
    memset(bins, 0, sizeof bins);
    memset(group_ranks, 0, sizeof group_ranks);
    memset(group_names, 0, sizeof group_names);
    ngroups = 0;
    pthread_mutex_unlock(&lock);
}

/* -1 for 0, else floor(log2(bytes)) */
static int size_class(uint64_t bytes) { return bytes ? 63 - __builtin_clzll(bytes) : -1; }

void zt_commlog_record(int kind, uint64_t bytes, double seconds, double wait_seconds, int nranks, const char *group) {
    if (!atomic_load_explicit(&enabled, memory_order_relaxed)) return;
    if (kind < 0 || kind >= ZT_COLL_NKINDS) kind = ZT_COLL_NKINDS - 1;
    if (!(seconds >= 0) || !isfinite(seconds)) seconds = 0;
    if (!(wait_seconds >= 0) || !isfinite(wait_seconds)) wait_seconds = 0;
    pthread_mutex_lock(&lock);
    char name[GROUP_NAME] = ""; /* the name's first word: "gradients (communication thread)" -> "gradients" */
    for (size_t k = 0; group && group[k] && group[k] != ' ' && k + 1 < sizeof name; k++) name[k] = group[k];
    int gidx = -1;
    for (int i = 0; i < ngroups; i++)
        if (group_ranks[i] == nranks && !strcmp(group_names[i], name)) gidx = i;
    if (gidx < 0) {
        if (ngroups < MAX_GROUPS) {
            group_ranks[ngroups] = nranks;
            memcpy(group_names[ngroups++], name, sizeof name);
        }
        gidx = ngroups - 1;
    }
    bin *b = &bins[gidx][kind][size_class(bytes) + 1];
    b->count++;
    b->bytes += bytes;
    b->seconds += seconds;
    b->wait += wait_seconds;
    pthread_mutex_unlock(&lock);
}

double zt_commlog_busbw_factor(int kind, int nranks) {
    double n = nranks > 0 ? nranks : 1;
    switch (kind) {
    case ZT_COLL_ALL_REDUCE: return 2.0 * (n - 1) / n;
    case ZT_COLL_BROADCAST:
    case ZT_COLL_P2P: return 1.0;
    default: return (n - 1) / n; /* reduce-scatter, all-gather, small, setup */
    }
}

void zt_commlog_row_stats(const zt_commlog_row *r, double *lat, double *algbw, double *busbw) {
    double l = r->count ? r->seconds / (double)r->count : NAN;
    double a = r->seconds > 0 ? (double)r->bytes / r->seconds : NAN;
    if (lat) *lat = l;
    if (algbw) *algbw = a;
    if (busbw) *busbw = a * zt_commlog_busbw_factor(r->kind, r->nranks);
}

static int cmp_row(const void *pa, const void *pb) {
    const zt_commlog_row *a = pa, *b = pb;
    if (a->kind != b->kind) return a->kind - b->kind;
    int g = strcmp(a->group, b->group);
    if (g) return g;
    if (a->nranks != b->nranks) return a->nranks - b->nranks;
    return a->size_class - b->size_class;
}

int zt_commlog_rows(zt_commlog_row *rows, int cap) {
    int n = 0;
    static zt_commlog_row all[MAX_GROUPS * ZT_COLL_NKINDS * NCLASSES]; /* under lock */
    pthread_mutex_lock(&lock);
    for (int gi = 0; gi < ngroups; gi++)
        for (int k = 0; k < ZT_COLL_NKINDS; k++)
            for (int c = 0; c < NCLASSES; c++) {
                const bin *b = &bins[gi][k][c];
                if (!b->count) continue;
                all[n] = (zt_commlog_row){.kind = k, .nranks = group_ranks[gi], .size_class = c - 1,
                                          .count = b->count, .bytes = b->bytes,
                                          .seconds = b->seconds, .wait_seconds = b->wait};
                memcpy(all[n++].group, group_names[gi], sizeof all[0].group); /* both GROUP_NAME */
            }
    qsort(all, (size_t)n, sizeof *all, cmp_row);
    for (int i = 0; i < n && i < cap; i++) rows[i] = all[i];
    pthread_mutex_unlock(&lock);
    return n;
}

/* "4 MiB" for 2^22; "0 B" for class -1 */
static void class_bound(char *buf, size_t cap, int k) {
    static const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (k < 0) {
        snprintf(buf, cap, "0");
        return;
    }
    snprintf(buf, cap, "%llu %s", 1ULL << (k % 10), unit[k / 10]);
}

static void human_bytes(char *buf, size_t cap, double b) {
    static const char *unit[] = {"B", "KB", "MB", "GB", "TB", "PB"};
    int u = 0;
    while (b >= 1000 && u < 5) b /= 1000, u++;
    snprintf(buf, cap, u ? "%.2f %s" : "%.0f %s", b, unit[u]);
}

static void print_row(FILE *out, const zt_commlog_row *r, const char *cls) {
    double lat, alg, bus;
    zt_commlog_row_stats(r, &lat, &alg, &bus);
    char total[32], mean[32];
    human_bytes(total, sizeof total, (double)r->bytes);
    human_bytes(mean, sizeof mean, r->count ? (double)r->bytes / (double)r->count : 0);
    fprintf(out, "%-15s %-9s %5d  %-20s %8llu %11s %11s %11.3f %8.1f%% %10.3f %10.3f\n",
            zt_coll_kind_name(r->kind), r->group[0] ? r->group : "-", r->nranks, cls, (unsigned long long)r->count, total, mean,
            1e3 * lat, r->seconds > 0 ? 100.0 * r->wait_seconds / r->seconds : 0.0, alg / 1e9,
            bus / 1e9);
}

/* A snapshot of the rows in a fresh array (NULL with *n = 0 when empty or out of memory). */
static zt_commlog_row *snapshot(int *n) {
    enum { CAP = MAX_GROUPS * ZT_COLL_NKINDS * NCLASSES };
    zt_commlog_row *rows = malloc(CAP * sizeof *rows);
    *n = rows ? zt_commlog_rows(rows, CAP) : 0;
    return rows;
}

static bool same_group(const zt_commlog_row *a, const zt_commlog_row *b) {
    return a->kind == b->kind && a->nranks == b->nranks && !strcmp(a->group, b->group);
}

void zt_commlog_print(FILE *out, int rank) {
    int n;
    zt_commlog_row *rows = snapshot(&n);
    if (n == 0) {
        free(rows);
        fprintf(out, "comm log (rank %d): no collectives recorded\n", rank);
        return;
    }
    fprintf(out, "comm log (rank %d): latency = mean start-to-finish time per call; exposed = share of it "
            "spent blocked in waits;\n  algbw = bytes / time; busbw = algbw x 2(N-1)/N (all_reduce), "
            "x (N-1)/N (reduce_scatter, all_gather, small), x 1 (broadcast, p2p); GB = 1e9 bytes\n", rank);
    fprintf(out, "%-15s %-9s %5s  %-20s %8s %11s %11s %11s %9s %10s %10s\n", "op", "group", "ranks", "message size",
            "count", "total", "mean size", "latency ms", "exposed", "algbw GB/s", "busbw GB/s");
    for (int i = 0; i < n; i++) {
        const zt_commlog_row *r = &rows[i];
        char lo[24], hi[24], cls[64];
        class_bound(lo, sizeof lo, r->size_class);
        class_bound(hi, sizeof hi, r->size_class + 1);
        if (r->size_class < 0) snprintf(cls, sizeof cls, "0 (empty)");
        else snprintf(cls, sizeof cls, "[%s, %s)", lo, hi);
        print_row(out, r, cls);
        /* after the last size class of an (op, group) pair with several classes: its total */
        bool last = i + 1 == n || !same_group(&rows[i + 1], r);
        int first = i;
        while (first > 0 && same_group(&rows[first - 1], r)) first--;
        if (last && i > first) {
            zt_commlog_row t = {.kind = r->kind, .nranks = r->nranks};
            memcpy(t.group, r->group, sizeof t.group);
            for (int j = first; j <= i; j++) {
                t.count += rows[j].count;
                t.bytes += rows[j].bytes;
                t.seconds += rows[j].seconds;
                t.wait_seconds += rows[j].wait_seconds;
            }
            print_row(out, &t, "all sizes");
        }
    }
    free(rows);
}

static void jnum(char *buf, size_t cap, double v) {
    if (isfinite(v)) snprintf(buf, cap, "%.9g", v);
    else snprintf(buf, cap, "null");
}

int zt_commlog_write_jsonl(zt_jsonl *j, zt_error *err) {
    int n, rc = ZT_OK;
    zt_commlog_row *rows = snapshot(&n);
    for (int i = 0; i < n && !rc; i++) {
        const zt_commlog_row *r = &rows[i];
        double lat, alg, bus;
        zt_commlog_row_stats(r, &lat, &alg, &bus);
        char f[512], a[32], b[32], c[32];
        jnum(a, sizeof a, lat);
        jnum(b, sizeof b, alg / 1e9);
        jnum(c, sizeof c, bus / 1e9);
        unsigned long long lo = r->size_class < 0 ? 0 : 1ULL << r->size_class;
        snprintf(f, sizeof f, "\"op\":\"%s\",\"group\":\"%s\",\"ranks\":%d,\"size_min\":%llu,\"count\":%llu,"
                 "\"bytes\":%llu,\"mean_latency_s\":%s,\"algbw_GBps\":%s,\"busbw_GBps\":%s,\"exposed_s\":%.9g",
                 zt_coll_kind_name(r->kind), r->group, r->nranks, lo, (unsigned long long)r->count,
                 (unsigned long long)r->bytes, a, b, c, r->wait_seconds);
        rc = zt_jsonl_write_event(j, "commlog", f, err);
    }
    free(rows);
    return rc;
}
