/* trace.c - the per-process Chrome-trace writer and the merge of per-rank files (see trace.h for
 * the format, the clock and the cost).
 *
 * Invariants:
 *   - g.buf holds complete event lines, each ending ",\n"; it goes to g.fp when the next line
 *     would not fit, and at close. Everything in g is touched under g.lock, except the enabled
 *     flag (read without it: a late reader finds g.fp NULL under the lock and drops its event).
 *   - A thread's tid and span stack belong to one trace session (g.session): the first call of a
 *     thread in a new session gives it a fresh tid and names it in the file.
 */
#define _GNU_SOURCE
#include "core/file.h"
#include "obs/trace.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define TRACE_BUF (1u << 20) /* bytes buffered before a write */
#define TRACE_DEPTH 64       /* open spans per thread */
#define LINE_MAX_BYTES 8192  /* one event; strings are cut to fit */

volatile bool zt_trace_enabled_ = false;

static struct {
    pthread_mutex_t lock;
    FILE *fp;
    char path[1024];
    char *buf;
    size_t len;
    struct timespec mono0;
    int rank;
    atomic_int session; /* bumped by every open */
    atomic_int next_tid;
    uint64_t events;
    uint64_t dropped;   /* spans beyond TRACE_DEPTH */
    uint64_t unmatched; /* ends without a begin */
    int io_errno;       /* first write error, 0 if none */
} g = {.lock = PTHREAD_MUTEX_INITIALIZER};

typedef struct frame {
    double t0_us;
    char cat[32];
    char name[96];
} frame;

static _Thread_local struct {
    int session, tid, depth;
    frame stack[TRACE_DEPTH];
} t;

/* ---- strings --------------------------------------------------------------------------------- */

size_t zt_json_escape(char *dst, size_t cap, const char *s) {
    size_t need = 0, w = 0;
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        char tmp[8];
        size_t k;
        switch (*p) {
        case '"': k = 2, memcpy(tmp, "\\\"", 2); break;
        case '\\': k = 2, memcpy(tmp, "\\\\", 2); break;
        case '\n': k = 2, memcpy(tmp, "\\n", 2); break;
        case '\r': k = 2, memcpy(tmp, "\\r", 2); break;
        case '\t': k = 2, memcpy(tmp, "\\t", 2); break;
        case '\b': k = 2, memcpy(tmp, "\\b", 2); break;
        case '\f': k = 2, memcpy(tmp, "\\f", 2); break;
        default:
            if (*p < 0x20 || *p == 0x7f) {
                snprintf(tmp, sizeof tmp, "\\u%04x", *p);
                k = 6;
            } else {
                tmp[0] = (char)*p;
                k = 1;
            }
        }
        if (cap > 0 && w == need && w + k < cap) { /* whole escapes only */
            memcpy(dst + w, tmp, k);
            w += k;
        }
        need += k;
    }
    if (cap > 0) dst[w] = '\0';
    return need;
}

/* An append-only line under construction; overflow truncates (the caller cut strings first). */
typedef struct line {
    char s[LINE_MAX_BYTES];
    size_t n;
} line;

static void put(line *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(line *l, const char *fmt, ...) {
    if (l->n >= sizeof l->s) return;
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(l->s + l->n, sizeof l->s - l->n, fmt, ap);
    va_end(ap);
    if (w > 0) l->n += (size_t)w;
    if (l->n >= sizeof l->s) l->n = sizeof l->s - 1;
}

static void put_str(line *l, const char *s, size_t max) {
    char esc[512];
    if (max > sizeof esc) max = sizeof esc;
    zt_json_escape(esc, max, s);
    put(l, "\"%s\"", esc);
}

static void put_num(line *l, double v) {
    if (!isfinite(v)) put(l, "null");
    else if (v == floor(v) && fabs(v) < 9007199254740992.0) put(l, "%.0f", v);
    else put(l, "%.9g", v);
}

static void put_args(line *l, int nargs, const zt_trace_arg *args) {
    if (nargs <= 0 || !args) return;
    if (nargs > 32) nargs = 32;
    put(l, ",\"args\":{");
    for (int i = 0; i < nargs; i++) {
        if (i) put(l, ",");
        put_str(l, args[i].key ? args[i].key : "", 64);
        put(l, ":");
        if (args[i].str) put_str(l, args[i].str, 256);
        else put_num(l, args[i].num);
    }
    put(l, "}");
}

/* ---- the clock and the buffer ---------------------------------------------------------------- */

static double us_since(const struct timespec *a, const struct timespec *b) {
    return (double)(b->tv_sec - a->tv_sec) * 1e6 + (double)(b->tv_nsec - a->tv_nsec) / 1e3;
}

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return us_since(&g.mono0, &ts);
}

static void flush_locked(void) {
    if (!g.fp || g.len == 0) return;
    if (fwrite(g.buf, 1, g.len, g.fp) != g.len && !g.io_errno) g.io_errno = errno ? errno : EIO;
    g.len = 0;
}

/* Appends one finished line (without the separator) to the buffer. */
static void emit_locked(const line *l) {
    if (!g.fp) return;
    if (g.len + l->n + 2 > TRACE_BUF) flush_locked();
    memcpy(g.buf + g.len, l->s, l->n);
    g.len += l->n;
    g.buf[g.len++] = ',';
    g.buf[g.len++] = '\n';
    g.events++;
}

static void thread_meta_locked(int tid, const char *name) {
    line l = {.n = 0};
    put(&l, "{\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"name\":\"thread_name\",\"args\":{\"name\":", g.rank, tid);
    put_str(&l, name, 64);
    put(&l, "}}");
    emit_locked(&l);
    l.n = 0;
    put(&l, "{\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"name\":\"thread_sort_index\",\"args\":{\"sort_index\":%d}}",
        g.rank, tid, tid);
    emit_locked(&l);
}

/* Makes sure this thread has a tid in the current session; returns false when not tracing. */
static bool thread_ready(void) {
    if (t.session == atomic_load_explicit(&g.session, memory_order_relaxed) && t.tid > 0) return true;
    pthread_mutex_lock(&g.lock);
    bool ok = g.fp != NULL;
    if (ok) {
        t.session = atomic_load(&g.session);
        t.tid = atomic_fetch_add(&g.next_tid, 1);
        t.depth = 0;
        char name[32];
        snprintf(name, sizeof name, t.tid == 1 ? "main" : "thread %d", t.tid);
        thread_meta_locked(t.tid, name);
    }
    pthread_mutex_unlock(&g.lock);
    return ok;
}

static void emit(const line *l) {
    pthread_mutex_lock(&g.lock);
    emit_locked(l);
    pthread_mutex_unlock(&g.lock);
}

/* ---- open / close ----------------------------------------------------------------------------- */


void zt_trace_rank_path(const char *path, int rank, char *out, size_t cap) {
    if (rank < 0) {
        snprintf(out, cap, "%s", path);
        return;
    }
    const char *slash = strrchr(path, '/');
    const char *dot = strrchr(path, '.');
    if (!dot || (slash && dot < slash) || dot == (slash ? slash + 1 : path)) /* no extension */
        snprintf(out, cap, "%s.rank%d.json", path, rank);
    else
        snprintf(out, cap, "%.*s.rank%d%s", (int)(dot - path), path, rank, dot);
}

int zt_trace_open(const char *path, int rank, zt_error *err) {
    char file[1024];
    zt_trace_rank_path(path, rank, file, sizeof file);
    pthread_mutex_lock(&g.lock);
    if (g.fp) {
        pthread_mutex_unlock(&g.lock);
        return zt_error_set(err, ZT_ERR_USAGE, "trace: %s is already open (one trace per process)", g.path);
    }
    if (!g.buf && !(g.buf = malloc(TRACE_BUF))) {
        pthread_mutex_unlock(&g.lock);
        return zt_error_set(err, ZT_ERR_NOMEM, "trace %s: out of memory for the 1 MiB buffer", file);
    }
    zt_make_parent_dirs(file);
    FILE *fp = fopen(file, "w");
    if (!fp) {
        int e = errno;
        free(g.buf);
        g.buf = NULL;
        pthread_mutex_unlock(&g.lock);
        return zt_error_set(err, ZT_ERR_IO, "trace: cannot create %s: %s", file, strerror(e));
    }
    struct timespec real;
    clock_gettime(CLOCK_MONOTONIC, &g.mono0);
    clock_gettime(CLOCK_REALTIME, &real);
    snprintf(g.path, sizeof g.path, "%s", file);
    g.fp = fp;
    g.len = 0;
    g.rank = rank < 0 ? 0 : rank;
    atomic_fetch_add(&g.session, 1);
    atomic_store(&g.next_tid, 1);
    g.events = g.dropped = g.unmatched = 0;
    g.io_errno = 0;
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    char hesc[300];
    zt_json_escape(hesc, sizeof hesc, host);
    long long epoch = (long long)real.tv_sec * 1000000LL + real.tv_nsec / 1000;
    fprintf(fp, "{\"otherData\":{\"zerotrain\":\"%s\",\"rank\":%d,\"host\":\"%s\",\"os_pid\":%d,"
            "\"epoch_unix_us\":%lld,\"clock\":\"CLOCK_MONOTONIC microseconds since epoch_unix_us\"},"
            "\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n",
            ZT_VERSION, g.rank, hesc, (int)getpid(), epoch);
    line l = {.n = 0};
    put(&l, "{\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"name\":\"process_name\",\"args\":{\"name\":\"rank %d\"}}",
        g.rank, g.rank);
    emit_locked(&l);
    l.n = 0;
    put(&l, "{\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"name\":\"process_sort_index\",\"args\":{\"sort_index\":%d}}",
        g.rank, g.rank);
    emit_locked(&l);
    /* the opening thread is tid 1, "main" */
    t.session = atomic_load(&g.session);
    t.tid = atomic_fetch_add(&g.next_tid, 1);
    t.depth = 0;
    thread_meta_locked(t.tid, "main");
    zt_trace_enabled_ = true;
    pthread_mutex_unlock(&g.lock);
    return ZT_OK;
}

int zt_trace_close(zt_error *err) {
    pthread_mutex_lock(&g.lock);
    if (!g.fp) {
        pthread_mutex_unlock(&g.lock);
        return ZT_OK;
    }
    zt_trace_enabled_ = false;
    /* the last line has no separator: a process-wide instant that also carries the counts */
    flush_locked();
    fprintf(g.fp, "{\"ts\":%.3f,\"ph\":\"i\",\"s\":\"p\",\"pid\":%d,\"tid\":0,\"name\":\"trace end\","
            "\"args\":{\"events\":%" PRIu64 ",\"dropped_spans\":%" PRIu64 ",\"unmatched_ends\":%" PRIu64 "}}]}\n",
            now_us(), g.rank, g.events, g.dropped, g.unmatched);
    if ((fflush(g.fp) != 0 || ferror(g.fp)) && !g.io_errno) g.io_errno = errno ? errno : EIO;
    if (fclose(g.fp) != 0 && !g.io_errno) g.io_errno = errno ? errno : EIO;
    g.fp = NULL;
    int e = g.io_errno;
    char path[1024];
    snprintf(path, sizeof path, "%s", g.path);
    free(g.buf);
    g.buf = NULL;
    pthread_mutex_unlock(&g.lock);
    if (e) return zt_error_set(err, ZT_ERR_IO, "trace: writing %s: %s", path, strerror(e));
    return ZT_OK;
}

const char *zt_trace_path(void) { return g.fp ? g.path : ""; }

/* ---- events ----------------------------------------------------------------------------------- */

void zt_trace_thread_name_(const char *name) {
    if (!thread_ready()) return;
    pthread_mutex_lock(&g.lock);
    thread_meta_locked(t.tid, name);
    pthread_mutex_unlock(&g.lock);
}

void zt_trace_begin_(const char *cat, const char *name) {
    if (!thread_ready()) return;
    if (t.depth >= TRACE_DEPTH) {
        t.depth++; /* keep pairing: the matching end pops this phantom level */
        pthread_mutex_lock(&g.lock);
        g.dropped++;
        pthread_mutex_unlock(&g.lock);
        return;
    }
    frame *f = &t.stack[t.depth++];
    snprintf(f->cat, sizeof f->cat, "%s", cat ? cat : "");
    snprintf(f->name, sizeof f->name, "%s", name ? name : "");
    f->t0_us = now_us();
}

static void put_head(line *l, double ts, const char *ph, const char *cat, const char *name) {
    put(l, "{\"ts\":%.3f,\"ph\":\"%s\",\"pid\":%d,\"tid\":%d,\"cat\":", ts, ph, g.rank, t.tid);
    put_str(l, cat ? cat : "", 64);
    put(l, ",\"name\":");
    put_str(l, name ? name : "", 256);
}

void zt_trace_end_(int nargs, const zt_trace_arg *args) {
    double t1 = now_us();
    if (!thread_ready()) return;
    if (t.depth == 0) {
        pthread_mutex_lock(&g.lock);
        g.unmatched++;
        pthread_mutex_unlock(&g.lock);
        return;
    }
    if (--t.depth >= TRACE_DEPTH) return; /* a dropped level */
    const frame *f = &t.stack[t.depth];
    line l = {.n = 0};
    put_head(&l, f->t0_us, "X", f->cat, f->name);
    put(&l, ",\"dur\":%.3f", t1 - f->t0_us);
    put_args(&l, nargs, args);
    put(&l, "}");
    emit(&l);
}

void zt_trace_complete_(const char *cat, const char *name, double dur_s, int nargs,
                        const zt_trace_arg *args) {
    double t1 = now_us();
    if (!thread_ready()) return;
    double dur = isfinite(dur_s) && dur_s > 0 ? dur_s * 1e6 : 0.0;
    line l = {.n = 0};
    put_head(&l, t1 - dur, "X", cat, name);
    put(&l, ",\"dur\":%.3f", dur);
    put_args(&l, nargs, args);
    put(&l, "}");
    emit(&l);
}

void zt_trace_instant_(const char *cat, const char *name, int nargs, const zt_trace_arg *args) {
    double t1 = now_us();
    if (!thread_ready()) return;
    line l = {.n = 0};
    put_head(&l, t1, "i", cat, name);
    put(&l, ",\"s\":\"t\"");
    put_args(&l, nargs, args);
    put(&l, "}");
    emit(&l);
}

void zt_trace_counter_(const char *name, int nargs, const zt_trace_arg *args) {
    double t1 = now_us();
    if (!thread_ready()) return;
    line l = {.n = 0};
    put_head(&l, t1, "C", "counter", name);
    put_args(&l, nargs, args);
    put(&l, "}");
    emit(&l);
}

/* ---- merge ------------------------------------------------------------------------------------ */

/* Reads the header line of a trace file and its epoch. */
static int read_header(FILE *fp, const char *path, long long *epoch, zt_error *err) {
    char *hdr = NULL;
    size_t cap = 0;
    ssize_t n = getline(&hdr, &cap, fp);
    const char *k = n > 0 ? strstr(hdr, "\"epoch_unix_us\":") : NULL;
    int rc = ZT_OK;
    if (n <= 0 || strncmp(hdr, "{\"otherData\":", 13) != 0 || !k || !strstr(hdr, "\"traceEvents\":["))
        rc = zt_error_set(err, ZT_ERR_DATA, "merge traces: %s is not a zerotrain trace (its first line "
                          "lacks the otherData header with epoch_unix_us)", path);
    else
        *epoch = strtoll(k + 16, NULL, 10);
    free(hdr);
    return rc;
}

int zt_trace_merge(const char *const *inputs, int n, const char *output, zt_error *err) {
    if (n < 1) return zt_error_set(err, ZT_ERR_USAGE, "merge traces: no input files");
    for (int i = 0; i < n; i++)
        if (!strcmp(inputs[i], output))
            return zt_error_set(err, ZT_ERR_USAGE, "merge traces: the output %s is also an input", output);
    FILE **in = calloc((size_t)n, sizeof *in);
    long long *epoch = calloc((size_t)n, sizeof *epoch);
    char *ln = NULL;
    size_t cap = 0;
    FILE *out = NULL;
    int rc = ZT_OK;
    if (!in || !epoch) {
        rc = zt_error_set(err, ZT_ERR_NOMEM, "merge traces: out of memory");
        goto done;
    }
    long long base = 0;
    for (int i = 0; i < n; i++) {
        if (!(in[i] = fopen(inputs[i], "r"))) {
            rc = zt_error_set(err, ZT_ERR_IO, "merge traces: cannot read %s: %s", inputs[i], strerror(errno));
            goto done;
        }
        if ((rc = read_header(in[i], inputs[i], &epoch[i], err))) goto done;
        if (i == 0 || epoch[i] < base) base = epoch[i];
    }
    zt_make_parent_dirs(output);
    if (!(out = fopen(output, "w"))) {
        rc = zt_error_set(err, ZT_ERR_IO, "merge traces: cannot create %s: %s", output, strerror(errno));
        goto done;
    }
    fprintf(out, "{\"otherData\":{\"zerotrain\":\"%s\",\"merged_files\":%d,\"epoch_unix_us\":%lld,"
            "\"clock\":\"microseconds since epoch_unix_us; each file shifted by its own epoch\"},"
            "\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n", ZT_VERSION, n, base);
    bool first = true;
    for (int i = 0; i < n; i++) {
        double shift = (double)(epoch[i] - base);
        ssize_t len;
        while ((len = getline(&ln, &cap, in[i])) > 0) {
            while (len > 0 && (ln[len - 1] == '\n' || ln[len - 1] == '\r')) ln[--len] = '\0';
            if (len >= 2 && !strcmp(ln + len - 2, "]}")) ln[len -= 2] = '\0';
            if (len > 0 && ln[len - 1] == ',') ln[--len] = '\0';
            if (len < 2 || ln[0] != '{' || ln[len - 1] != '}') continue; /* a line cut short */
            fputs(first ? "" : ",\n", out);
            first = false;
            if (!strncmp(ln, "{\"ts\":", 6)) {
                char *end;
                double ts = strtod(ln + 6, &end);
                fprintf(out, "{\"ts\":%.3f%s", ts + shift, end);
            } else {
                fputs(ln, out);
            }
        }
        if (ferror(in[i])) {
            rc = zt_error_set(err, ZT_ERR_IO, "merge traces: reading %s: %s", inputs[i], strerror(errno));
            goto done;
        }
    }
    fputs("\n]}\n", out);
    if (fflush(out) != 0 || ferror(out))
        rc = zt_error_set(err, ZT_ERR_IO, "merge traces: writing %s: %s", output, strerror(errno));
done:
    if (out && fclose(out) != 0 && !rc)
        rc = zt_error_set(err, ZT_ERR_IO, "merge traces: writing %s: %s", output, strerror(errno));
    if (in)
        for (int i = 0; i < n; i++)
            if (in[i]) fclose(in[i]);
    free(in);
    free(epoch);
    free(ln);
    return rc;
}

int zt_trace_merge_ranks(const char *path, int nranks, zt_error *err) {
    if (nranks < 1) return zt_error_set(err, ZT_ERR_USAGE, "merge traces: %d ranks", nranks);
    char (*names)[1024] = calloc((size_t)nranks, sizeof *names);
    const char **inputs = calloc((size_t)nranks, sizeof *inputs);
    int rc;
    if (!names || !inputs) {
        rc = zt_error_set(err, ZT_ERR_NOMEM, "merge traces: out of memory");
    } else {
        for (int r = 0; r < nranks; r++) {
            zt_trace_rank_path(path, r, names[r], sizeof names[r]);
            inputs[r] = names[r];
        }
        rc = zt_trace_merge(inputs, nranks, path, err);
    }
    free(names);
    free(inputs);
    return rc;
}
