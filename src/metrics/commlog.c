/* commlog.c - the communication log's report: the rows src/obs/commlog.c recorded, as a table
 * (zt_commlog_print) and as JSONL events, with the bus-bandwidth factors (see commlog.h for the
 * definitions of latency, algbw and busbw). */
#include "metrics/commlog.h"
#include "comm/comm.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

double zt_commlog_busbw_factor(int kind, int nranks) {
    double n = nranks > 0 ? nranks : 1;
    switch (kind) {
    case ZT_COLL_ALL_REDUCE:
    case ZT_COLL_COMPRESSED_ALL_REDUCE: return 2.0 * (n - 1) / n;
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
    enum { CAP = ZT_COMMLOG_MAX_ROWS };
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
