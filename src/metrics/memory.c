/* memory.c - how a run reports its memory: the plan at the start (one line, and a JSONL
 * "memory_plan" event), planned against measured high-water per class and rank at the end (a
 * table, and a JSONL "memory" event), with each process's peak resident set beside it. The
 * numbers come from the engine (zt_engine_memory_plan, zt_engine_memory); this file only formats. */
#include "metrics/metrics.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void zt_format_bytes(char *buf, size_t cap, double b) {
    if (b >= 1024.0 * 1073741824.0) snprintf(buf, cap, "%.2f TiB", b / (1024.0 * 1073741824.0));
    else if (b >= 1073741824.0) snprintf(buf, cap, "%.2f GiB", b / 1073741824.0);
    else if (b >= 1048576.0) snprintf(buf, cap, "%.1f MiB", b / 1048576.0);
    else if (b >= 1024.0) snprintf(buf, cap, "%.1f KiB", b / 1024.0);
    else snprintf(buf, cap, "%.0f B", b);
}

void zt_memory_plan_line(const zt_memory_plan *p, char *buf, size_t cap) {
    size_t used = 0;
    buf[0] = '\0';
    for (int c = 0; c < ZT_MEM_CLASSES && used < cap; c++) {
        if (!p->peak[c]) continue;
        char b[32];
        zt_format_bytes(b, sizeof b, (double)p->peak[c]);
        used += (size_t)snprintf(buf + used, cap - used, "%s %s | ", zt_mem_class_name((zt_mem_class)c), b);
    }
    if (used < cap) {
        char b[32];
        zt_format_bytes(b, sizeof b, (double)p->peak_total);
        snprintf(buf + used, cap - used, "high-water %s", b);
    }
}

/* deviation of measured from planned, percent of the plan (100 when nothing was planned) */
static double deviation(size_t planned, size_t measured) {
    if (planned == measured) return 0;
    if (!planned) return 100.0;
    double d = ((double)measured - (double)planned) / (double)planned;
    return 100.0 * (d < 0 ? -d : d);
}

void zt_memory_print_ranks(FILE *out, const zt_memory_rank *r, int n) {
    bool used[ZT_MEM_CLASSES] = {false};
    for (int k = 0; k < n; k++)
        for (int c = 0; c < ZT_MEM_CLASSES; c++) used[c] |= r[k].planned[c] || r[k].measured[c];
    fprintf(out, "memory per rank, high-water planned / measured (MiB), and the process's peak resident set:\n");
    fprintf(out, "  rank");
    for (int c = 0; c < ZT_MEM_CLASSES; c++)
        if (used[c]) fprintf(out, " %17s", zt_mem_class_name((zt_mem_class)c));
    fprintf(out, " | %17s | %9s\n", "total", "RSS");
    double worst = 0;
    int worst_rank = 0, worst_class = -1, exact = 0, cells = 0;
    int biggest = 0;
    for (int k = 0; k < n; k++) {
        if (r[k].measured_total > r[biggest].measured_total) biggest = k;
        for (int c = 0; c <= ZT_MEM_CLASSES; c++) {
            size_t p = c < ZT_MEM_CLASSES ? r[k].planned[c] : r[k].planned_total;
            size_t m = c < ZT_MEM_CLASSES ? r[k].measured[c] : r[k].measured_total;
            double d = deviation(p, m);
            cells++;
            exact += p == m;
            if (d > worst) worst = d, worst_rank = k, worst_class = c;
        }
    }
    for (int k = 0; k < n; k++) {
        if (n > 16 && k != 0 && k != n - 1 && k != biggest && k != worst_rank) continue;
        char cell[64];
        fprintf(out, "  %4d", k);
        for (int c = 0; c < ZT_MEM_CLASSES; c++)
            if (used[c]) {
                snprintf(cell, sizeof cell, "%.1f/%.1f", r[k].planned[c] / 1048576.0, r[k].measured[c] / 1048576.0);
                fprintf(out, " %17s", cell);
            }
        snprintf(cell, sizeof cell, "%.1f/%.1f", r[k].planned_total / 1048576.0, r[k].measured_total / 1048576.0);
        fprintf(out, " | %17s | %9.1f\n", cell, r[k].rss_peak / 1048576.0);
    }
    if (n > 16) fprintf(out, "  (%d ranks: rank 0, the last, the largest and the least exact shown)\n", n);
    if (exact == cells)
        fprintf(out, "  every class of every rank reached exactly its planned high-water\n");
    else
        fprintf(out, "  %d of %d high-waters exactly as planned; the largest deviation: rank %d %s, %.2f%%\n", exact,
                cells, worst_rank, worst_class < ZT_MEM_CLASSES ? zt_mem_class_name((zt_mem_class)worst_class) : "total",
                worst);
}

static void classes_json(FILE *f, const char *key, const size_t *v) {
    fprintf(f, "\"%s\":{", key);
    for (int c = 0; c < ZT_MEM_CLASSES; c++)
        fprintf(f, "%s\"%s\":%zu", c ? "," : "", zt_mem_class_name((zt_mem_class)c), v[c]);
    fputc('}', f);
}

/* The fields were written to a memory stream (no size limit): close it, write the event. */
static int write_event(zt_jsonl *j, const char *name, char **text, FILE *f, zt_error *err) {
    int closed = fclose(f); /* sets *text */
    int rc = closed != 0 || !*text
                 ? zt_error_set(err, ZT_ERR_NOMEM, "log %s: out of memory for the %s event", j->path, name)
                 : zt_jsonl_write_event(j, name, *text, err);
    free(*text);
    return rc;
}

int zt_jsonl_write_memory_plan(zt_jsonl *j, const zt_memory_plan *p, zt_error *err) {
    if (!j->fp) return ZT_OK;
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return zt_error_set(err, ZT_ERR_NOMEM, "log %s: out of memory", j->path);
    fprintf(f, "\"rank\":%d,\"world\":%d,\"shards\":%d,\"overlap\":%s,", p->rank, p->world, p->nshards,
            p->overlap ? "true" : "false");
    classes_json(f, "peak", p->peak);
    fputc(',', f);
    classes_json(f, "rest", p->rest);
    fprintf(f, ",\"peak_total\":%zu,\"offload_file_bytes\":%zu", p->peak_total, p->offload_file_bytes);
    return write_event(j, "memory_plan", &text, f, err);
}

int zt_jsonl_write_memory_ranks(zt_jsonl *j, const zt_memory_rank *r, int n, zt_error *err) {
    if (!j->fp) return ZT_OK;
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return zt_error_set(err, ZT_ERR_NOMEM, "log %s: out of memory", j->path);
    fputs("\"ranks\":[", f);
    for (int k = 0; k < n; k++) {
        fprintf(f, "%s{\"rank\":%d,", k ? "," : "", k);
        classes_json(f, "planned", r[k].planned);
        fputc(',', f);
        classes_json(f, "measured", r[k].measured);
        fprintf(f, ",\"planned_total\":%zu,\"measured_total\":%zu,\"rss_peak\":%llu}", r[k].planned_total,
                r[k].measured_total, (unsigned long long)r[k].rss_peak);
    }
    fputc(']', f);
    return write_event(j, "memory", &text, f, err);
}
