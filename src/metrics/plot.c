/* plot.c - training curves through gnuplot: each run's JSONL becomes two whitespace data files
 * (every step; the steps with a validation loss), a script draws four panels (loss, tokens/s,
 * memory, MFU), and gnuplot runs on it as a subprocess (posix_spawn, no shell), its messages
 * captured to a file and quoted on failure. The temporary directory is removed afterwards.
 *
 * Invariants: a step line is a JSON object with a numeric "step" and no "event" key; other
 * objects (events, the comm log) are skipped; any line that is not JSON is an error naming
 * file:line. Missing or null values become NaN in the data files, which gnuplot skips. */
#define _GNU_SOURCE
#include "metrics/plot.h"
#include "core/env.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

typedef struct run_info {
    int steps, vals, max_step;
    bool has_tok, has_mem, has_rss, has_mfu;
} run_info;

static double num_of(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static void put_num(FILE *fp, double v) {
    if (isfinite(v)) fprintf(fp, " %.9g", v);
    else fputs(" NaN", fp);
}

/* JSONL -> dir/run<i>.dat (step loss tok_per_s mfu% mem_MiB rss_MiB) and dir/run<i>.val
 * (step val_loss). */
static int convert(const char *path, const char *dir, int i, run_info *info, zt_error *err) {
    char dat[4200], val[4200];
    snprintf(dat, sizeof dat, "%s/run%d.dat", dir, i);
    snprintf(val, sizeof val, "%s/run%d.val", dir, i);
    memset(info, 0, sizeof *info);
    FILE *in = fopen(path, "r");
    if (!in) return zt_error_set(err, ZT_ERR_IO, "plot: cannot read %s: %s", path, strerror(errno));
    FILE *d = fopen(dat, "w"), *v = fopen(val, "w");
    int rc = ZT_OK;
    char *line = NULL;
    size_t cap = 0;
    long lineno = 0;
    if (!d || !v) {
        rc = zt_error_set(err, ZT_ERR_IO, "plot: cannot write in %s: %s", dir, strerror(errno));
        goto done;
    }
    ssize_t n;
    while ((n = getline(&line, &cap, in)) > 0) {
        lineno++;
        if (strspn(line, " \t\r\n") == (size_t)n) continue;
        cJSON *o = cJSON_Parse(line);
        if (!o || !cJSON_IsObject(o)) {
            cJSON_Delete(o);
            rc = zt_error_set(err, ZT_ERR_DATA, "plot: %s:%ld: not a JSON object (is this a "
                              "logging.jsonl file of zerotrain train?)", path, lineno);
            goto done;
        }
        double step = num_of(o, "step");
        if (isfinite(step) && !cJSON_GetObjectItemCaseSensitive(o, "event")) {
            double loss = num_of(o, "loss"), vl = num_of(o, "val_loss"), tok = num_of(o, "tok_per_s");
            double mfu = num_of(o, "mfu"), mem = NAN, rss = NAN;
            const cJSON *m = cJSON_GetObjectItemCaseSensitive(o, "memory");
            if (cJSON_IsObject(m)) {
                mem = num_of(m, "peak_total") / 1048576.0;
                double r = num_of(m, "rss_peak");
                rss = r > 0 ? r / 1048576.0 : NAN;
            }
            fprintf(d, "%.0f", step);
            put_num(d, loss);
            put_num(d, tok);
            put_num(d, 100.0 * mfu);
            put_num(d, mem);
            put_num(d, rss);
            fputc('\n', d);
            if (isfinite(vl)) fprintf(v, "%.0f %.9g\n", step, vl), info->vals++;
            info->steps++;
            if (step > info->max_step) info->max_step = (int)step;
            info->has_tok |= isfinite(tok);
            info->has_mfu |= isfinite(mfu);
            info->has_mem |= isfinite(mem);
            info->has_rss |= isfinite(rss);
        }
        cJSON_Delete(o);
    }
    if (ferror(in)) rc = zt_error_set(err, ZT_ERR_IO, "plot: reading %s: %s", path, strerror(errno));
    else if (info->steps == 0)
        rc = zt_error_set(err, ZT_ERR_DATA, "plot: %s has no step lines (objects with a \"step\")", path);
done:
    free(line);
    fclose(in);
    if (d && fclose(d) != 0 && !rc) rc = zt_error_set(err, ZT_ERR_IO, "plot: writing %s", dat);
    if (v && fclose(v) != 0 && !rc) rc = zt_error_set(err, ZT_ERR_IO, "plot: writing %s", val);
    return rc;
}

/* A gnuplot double-quoted string body: \ and " escaped, control characters dropped. */
static void gp_str(FILE *fp, const char *s) {
    fputc('"', fp);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fputc('\\', fp);
        if ((unsigned char)*s >= 0x20) fputc(*s, fp);
    }
    fputc('"', fp);
}

static void default_label(const char *path, char *out, size_t cap) {
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    size_t n = strlen(b);
    if (n > 6 && !strcmp(b + n - 6, ".jsonl")) n -= 6;
    snprintf(out, cap, "%.*s", (int)n, b);
}

/* One panel: either the series of every run that has it, or a "no data" note. */
typedef struct panel {
    const char *title, *ylabel;
    int col;        /* data column */
    bool any;       /* some run has it */
    double headroom; /* fraction of the y range added above the data for the legend */
} panel;

static void plot_panel(FILE *fp, const panel *p, const char *dir, int n, const char *const *labels,
                       const run_info *info, const char *extra_note) {
    fprintf(fp, "set title ");
    gp_str(fp, p->title);
    fprintf(fp, "\nset ylabel ");
    gp_str(fp, p->ylabel);
    /* headroom above the curves for the legend (top right in every panel) */
    fprintf(fp, "\nset key top right\nset offsets 0, 0, graph %.2f, 0\n", p->headroom);
    if (!p->any) {
        fprintf(fp, "set label 1 ");
        gp_str(fp, extra_note);
        fprintf(fp, " at graph 0.5,0.5 center\nset offsets 0, 0, 0, 0\nset xrange [0:1]\nset yrange [0:1]\n"
                    "plot NaN notitle\nunset label 1\nset autoscale\n");
        return;
    }
    fprintf(fp, "plot ");
    bool first = true;
    for (int i = 0; i < n; i++) {
        bool has = p->col == 3 ? info[i].has_tok : p->col == 4 ? info[i].has_mfu : p->col == 5 ? info[i].has_mem : true;
        if (!has) continue;
        fprintf(fp, "%s'%s/run%d.dat' using 1:%d with lines lw 1.5 lc %d title ", first ? "" : ", \\\n     ",
                dir, i, p->col, i + 1);
        char t[300];
        snprintf(t, sizeof t, "%s%s", labels[i], p->col == 2 ? " train" : p->col == 5 ? " planned" : "");
        gp_str(fp, t);
        first = false;
        if (p->col == 2 && info[i].vals > 0) {
            fprintf(fp, ", \\\n     '%s/run%d.val' using 1:2 with linespoints lw 2 dt 2 pt 7 ps 0.8 lc %d title ",
                    dir, i, i + 1);
            snprintf(t, sizeof t, "%s val", labels[i]);
            gp_str(fp, t);
        }
        if (p->col == 5 && info[i].has_rss) {
            fprintf(fp, ", \\\n     '%s/run%d.dat' using 1:6 with lines lw 1.5 dt 2 lc %d title ", dir, i, i + 1);
            snprintf(t, sizeof t, "%s RSS peak", labels[i]);
            gp_str(fp, t);
        }
    }
    fputc('\n', fp);
}

/* The terminal for output's extension (checked by the caller) and `set output`. */
static void gp_terminal(FILE *fp, const char *output, int w, int h) {
    const char *ext = strrchr(output, '.');
    if (!strcmp(ext, ".svg"))
        fprintf(fp, "set terminal svg size %d,%d noenhanced font 'sans,11' background 'white'\n", w, h);
    else if (!strcmp(ext, ".pdf"))
        fprintf(fp, "set terminal pdfcairo size %gin,%gin noenhanced font 'sans,9'\n", w / 100.0, h / 100.0);
    else /* .png: cairo when this gnuplot has it (gnuplot-nox does), else libgd */
        fprintf(fp, "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {\n"
                    "  set terminal pngcairo size %d,%d noenhanced font 'sans,10'\n"
                    "} else {\n  set terminal png size %d,%d noenhanced\n}\n", w, h, w, h);
    fprintf(fp, "set output '");
    for (const char *s = output; *s; s++) { /* single-quoted: '' is a quote */
        if (*s == '\'') fputc('\'', fp);
        fputc(*s, fp);
    }
    fprintf(fp, "'\n");
}

static int write_script(const char *script, const char *dir, const zt_plot_options *o,
                        const char *const *labels, const run_info *info, zt_error *err) {
    FILE *fp = fopen(script, "w");
    if (!fp) return zt_error_set(err, ZT_ERR_IO, "plot: cannot write %s: %s", script, strerror(errno));
    gp_terminal(fp, o->output, o->width > 0 ? o->width : 1400, o->height > 0 ? o->height : 1000);
    fprintf(fp, "set datafile missing 'NaN'\nset grid\nset key opaque box\nset xlabel 'step'\n");
    fprintf(fp, "set multiplot layout 2,2 title ");
    gp_str(fp, o->title ? o->title : "zerotrain");
    fputc('\n', fp);
    bool tok = false, mem = false, mfu = false;
    for (int i = 0; i < o->n_runs; i++) tok |= info[i].has_tok, mem |= info[i].has_mem, mfu |= info[i].has_mfu;
    double rows = 0.08 * o->n_runs; /* legend lines per panel ~ runs (x2 for loss and memory) */
    panel p[4] = {{"loss (solid: train, dashed: validation)", "cross-entropy (nats)", 2, true, 0.05},
                  {"throughput", "tokens / s (all ranks)", 3, tok, rows + 0.05},
                  {"memory high-water per rank (solid: planned buffers, dashed: RSS)", "MiB", 5, mem, 2 * rows + 0.1},
                  {"model FLOPs utilization", "MFU (%)", 4, mfu, rows + 0.05}};
    int max_step = 0;
    for (int i = 0; i < o->n_runs; i++)
        if (info[i].max_step > max_step) max_step = info[i].max_step;
    if (max_step <= 12) fprintf(fp, "set xtics 1\n"); /* whole steps on short runs */
    const char *note[4] = {"", "no tok_per_s in these logs", "no memory fields in these logs",
                           "no MFU in these logs (peak unknown)"};
    for (int k = 0; k < 4; k++) plot_panel(fp, &p[k], dir, o->n_runs, labels, info, note[k]);
    fprintf(fp, "unset multiplot\nset output\n");
    if (fclose(fp) != 0) return zt_error_set(err, ZT_ERR_IO, "plot: writing %s: %s", script, strerror(errno));
    return ZT_OK;
}

/* Runs gnuplot on script with stdout and stderr into log. */
static int run_gnuplot(const char *script, const char *log, zt_error *err) {
    const char *gp = zt_env_or(ZT_ENV_GNUPLOT, "gnuplot");
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    char *argv[] = {(char *)gp, (char *)script, NULL};
    pid_t pid;
    int e = posix_spawnp(&pid, gp, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (e == ENOENT)
        return zt_error_set(err, ZT_ERR_USAGE, "plot: %s not found: install gnuplot (Debian: apt-get install "
                            "gnuplot-nox) or set ZT_GNUPLOT to its path", gp);
    if (e) return zt_error_set(err, ZT_ERR_IO, "plot: cannot run %s: %s", gp, strerror(e));
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) return zt_error_set(err, ZT_ERR_IO, "plot: waiting for %s: %s", gp, strerror(errno));
    char msg[600] = "";
    FILE *fp = fopen(log, "r");
    if (fp) {
        size_t n = fread(msg, 1, sizeof msg - 1, fp);
        msg[n] = '\0';
        fclose(fp);
        for (char *c = msg; *c; c++)
            if (*c == '\n') *c = ' ';
    }
    if (WIFEXITED(st) && WEXITSTATUS(st) == 127)
        return zt_error_set(err, ZT_ERR_USAGE, "plot: %s not found: install gnuplot (Debian: apt-get install "
                            "gnuplot-nox) or set ZT_GNUPLOT to its path", gp);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return zt_error_set(err, ZT_ERR_IO, "plot: %s failed (%s %d): %s", gp,
                            WIFEXITED(st) ? "exit status" : "signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st),
                            msg[0] ? msg : "no message");
    return ZT_OK;
}

static void remove_dir(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            unlinkat(dirfd(d), e->d_name, 0);
    closedir(d);
    rmdir(dir);
}

static int check_output(const char *output, zt_error *err) {
    if (!output || !output[0]) return zt_error_set(err, ZT_ERR_USAGE, "plot: no output file (-o out.png)");
    const char *ext = strrchr(output, '.');
    if (!ext || (strcmp(ext, ".png") && strcmp(ext, ".svg") && strcmp(ext, ".pdf")))
        return zt_error_set(err, ZT_ERR_USAGE, "plot: output %s: the name must end in .png, .svg or .pdf", output);
    return ZT_OK;
}

/* A fresh directory under TMPDIR (or /tmp) into dir. */
static int make_temp_dir(char *dir, size_t cap, zt_error *err) {
    const char *tmp = zt_env_or(ZT_ENV_TMPDIR, "/tmp");
    snprintf(dir, cap, "%s/zerotrain-plot-XXXXXX", tmp);
    if (!mkdtemp(dir)) return zt_error_set(err, ZT_ERR_IO, "plot: cannot create a directory in %s: %s", tmp, strerror(errno));
    if (strchr(dir, '\'')) { /* the data paths go into single-quoted gnuplot strings */
        rmdir(dir);
        return zt_error_set(err, ZT_ERR_USAGE, "plot: TMPDIR %s contains a quote", tmp);
    }
    return ZT_OK;
}

/* Runs the script and checks that gnuplot wrote a non-empty output. */
static int draw(const char *dir, const char *script, const char *output, zt_error *err) {
    char log[4200];
    snprintf(log, sizeof log, "%s/gnuplot.log", dir);
    unlink(output); /* so a stale file cannot pass for a result */
    int rc = run_gnuplot(script, log, err);
    struct stat st;
    if (!rc && (stat(output, &st) != 0 || st.st_size == 0))
        rc = zt_error_set(err, ZT_ERR_IO, "plot: gnuplot wrote no %s (see %s)", output, script);
    return rc;
}

int zt_plot_runs(const zt_plot_options *o, zt_error *err) {
    if (!o->runs || o->n_runs < 1) return zt_error_set(err, ZT_ERR_USAGE, "plot: no JSONL files given");
    char dir[4096];
    int rc0 = check_output(o->output, err);
    if (rc0 || (rc0 = make_temp_dir(dir, sizeof dir, err))) return rc0;
    run_info *info = calloc((size_t)o->n_runs, sizeof *info);
    char (*lab)[256] = calloc((size_t)o->n_runs, sizeof *lab);
    const char **labels = calloc((size_t)o->n_runs, sizeof *labels);
    int rc = ZT_OK;
    if (!info || !lab || !labels) {
        rc = zt_error_set(err, ZT_ERR_NOMEM, "plot: out of memory");
        goto done;
    }
    for (int i = 0; i < o->n_runs && !rc; i++) {
        if (o->labels) snprintf(lab[i], sizeof lab[i], "%s", o->labels[i]);
        else default_label(o->runs[i], lab[i], sizeof lab[i]);
        labels[i] = lab[i];
        rc = convert(o->runs[i], dir, i, &info[i], err);
    }
    char script[4200];
    snprintf(script, sizeof script, "%s/plot.gp", dir);
    if (!rc) rc = write_script(script, dir, o, labels, info, err);
    if (!rc) rc = draw(dir, script, o->output, err);
done:
    if (o->keep_temp) fprintf(stderr, "plot: data and script kept in %s\n", dir);
    else remove_dir(dir);
    free(info);
    free(lab);
    free(labels);
    return rc;
}

/* ---- the timeline picture ------------------------------------------------------------------- */

typedef struct tl_event {
    int lane, depth, cat;
    double ts, dur; /* microseconds */
    const char *name;
} tl_event;

typedef struct tl_lane {
    int pid, tid;
} tl_lane;

/* Categories in drawing order (parents first), with their colors; the last one is "other". */
static const struct {
    const char *cat, *rgb;
} TL_CATS[] = {{"step", "#d9d9d9"},      {"bucket", "#f4b6c2"},   {"data", "#9467bd"},
               {"optimizer", "#2ca02c"}, {"eval", "#17becf"},     {"checkpoint", "#8c564b"},
               {"forward", "#1f77b4"},   {"backward", "#ff7f0e"}, {"recompute", "#ffbb78"},
               {"comm", "#d62728"},      {"wait", "#7f0000"},     {"other", "#7f7f7f"}};
enum { TL_NCATS = sizeof TL_CATS / sizeof *TL_CATS };

static int tl_cat(const char *c) {
    for (int k = 0; k < TL_NCATS - 1; k++)
        if (c && !strcmp(c, TL_CATS[k].cat)) return k;
    return TL_NCATS - 1;
}

static int cmp_tl(const void *pa, const void *pb) {
    const tl_event *a = pa, *b = pb;
    if (a->lane != b->lane) return a->lane - b->lane;
    if (a->ts != b->ts) return a->ts < b->ts ? -1 : 1;
    return a->dur > b->dur ? -1 : a->dur < b->dur; /* the parent (longer) first */
}

static int cmp_lane(const void *pa, const void *pb) {
    const tl_lane *a = pa, *b = pb;
    return a->pid != b->pid ? a->pid - b->pid : a->tid - b->tid;
}

static char *read_all(const char *path, zt_error *err) {
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        zt_error_set(err, ZT_ERR_IO, "plot: cannot read %s: %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char *s = malloc(cap);
    while (s) {
        if (n + 1 >= cap) {
            char *t = realloc(s, cap *= 2);
            if (!t) {
                free(s);
                s = NULL;
                break;
            }
            s = t;
        }
        size_t r = fread(s + n, 1, cap - n - 1, fp);
        n += r;
        if (r == 0) break;
    }
    if (s) s[n] = '\0';
    else zt_error_set(err, ZT_ERR_NOMEM, "plot: out of memory reading %s", path);
    fclose(fp);
    return s;
}

int zt_plot_timeline(const zt_timeline_options *o, zt_error *err) {
    if (!o->trace) return zt_error_set(err, ZT_ERR_USAGE, "plot: no trace file given");
    int rc = check_output(o->output, err);
    if (rc) return rc;
    char *text = read_all(o->trace, err);
    if (!text) return err->code;
    cJSON *root = cJSON_Parse(text);
    free(text);
    const cJSON *evs = root ? cJSON_GetObjectItemCaseSensitive(root, "traceEvents") : NULL;
    if (!cJSON_IsArray(evs)) {
        cJSON_Delete(root);
        return zt_error_set(err, ZT_ERR_DATA, "plot: %s is not a Chrome trace with \"traceEvents\" (a per-rank "
                            "file cut short by a crash: run `zerotrain plot --merge-traces` on it first)", o->trace);
    }
    int n = cJSON_GetArraySize(evs), ne = 0, nl = 0;
    tl_event *ev = calloc((size_t)n + 1, sizeof *ev);
    tl_lane *lanes = calloc((size_t)n + 1, sizeof *lanes);
    char dir[4096] = "";
    FILE *fp = NULL;
    if (!ev || !lanes) {
        rc = zt_error_set(err, ZT_ERR_NOMEM, "plot: out of memory for %d events", n);
        goto done;
    }
    /* the window */
    double lo = INFINITY, hi = -INFINITY;
    const cJSON *e;
    cJSON_ArrayForEach(e, evs) {
        const cJSON *ph = cJSON_GetObjectItemCaseSensitive(e, "ph"), *nm = cJSON_GetObjectItemCaseSensitive(e, "name");
        double ts = num_of(e, "ts"), dur = num_of(e, "dur");
        if (!cJSON_IsString(ph) || strcmp(ph->valuestring, "X") || !isfinite(ts) || !isfinite(dur)) continue;
        const cJSON *cat = cJSON_GetObjectItemCaseSensitive(e, "cat");
        bool is_step = cJSON_IsString(cat) && !strcmp(cat->valuestring, "step");
        if (o->step && !(is_step && cJSON_IsString(nm) && !strcmp(nm->valuestring, o->step))) continue;
        if (ts < lo) lo = ts;
        if (ts + dur > hi) hi = ts + dur;
    }
    if (!(hi > lo)) {
        rc = o->step ? zt_error_set(err, ZT_ERR_DATA, "plot: %s has no step span named \"%s\"", o->trace, o->step)
                     : zt_error_set(err, ZT_ERR_DATA, "plot: %s has no complete (\"X\") events", o->trace);
        goto done;
    }
    double pad = 0.002 * (hi - lo);
    lo -= pad;
    hi += pad;
    /* the events that overlap it, and their lanes */
    cJSON_ArrayForEach(e, evs) {
        const cJSON *ph = cJSON_GetObjectItemCaseSensitive(e, "ph"), *nm = cJSON_GetObjectItemCaseSensitive(e, "name");
        const cJSON *cat = cJSON_GetObjectItemCaseSensitive(e, "cat");
        double ts = num_of(e, "ts"), dur = num_of(e, "dur"), pid = num_of(e, "pid"), tid = num_of(e, "tid");
        if (!cJSON_IsString(ph) || strcmp(ph->valuestring, "X") || !isfinite(ts) || !isfinite(dur) ||
            ts > hi || ts + dur < lo)
            continue;
        tl_lane l = {isfinite(pid) ? (int)pid : 0, isfinite(tid) ? (int)tid : 0};
        int k = 0;
        while (k < nl && (lanes[k].pid != l.pid || lanes[k].tid != l.tid)) k++;
        if (k == nl) lanes[nl++] = l;
        ev[ne++] = (tl_event){.lane = k, .cat = tl_cat(cJSON_IsString(cat) ? cat->valuestring : NULL),
                              .ts = ts < lo ? lo : ts, .dur = (ts + dur > hi ? hi : ts + dur) - (ts < lo ? lo : ts),
                              .name = cJSON_IsString(nm) ? nm->valuestring : ""};
    }
    /* lanes in (pid, tid) order, rank 0 on top */
    tl_lane *sorted = malloc((size_t)nl * sizeof *sorted);
    if (!sorted) {
        rc = zt_error_set(err, ZT_ERR_NOMEM, "plot: out of memory");
        goto done;
    }
    memcpy(sorted, lanes, (size_t)nl * sizeof *sorted);
    qsort(sorted, (size_t)nl, sizeof *sorted, cmp_lane);
    for (int i = 0; i < ne; i++)
        for (int k = 0; k < nl; k++)
            if (sorted[k].pid == lanes[ev[i].lane].pid && sorted[k].tid == lanes[ev[i].lane].tid) {
                ev[i].lane = k;
                break;
            }
    memcpy(lanes, sorted, (size_t)nl * sizeof *sorted);
    free(sorted);
    /* nesting depth per lane: the number of enclosing events still open */
    qsort(ev, (size_t)ne, sizeof *ev, cmp_tl);
    double open_end[64];
    int depth = 0, lane = -1;
    for (int i = 0; i < ne; i++) {
        if (ev[i].lane != lane) lane = ev[i].lane, depth = 0;
        while (depth > 0 && open_end[depth - 1] <= ev[i].ts + 1e-3) depth--;
        ev[i].depth = depth < 6 ? depth : 6;
        if (depth < 64) open_end[depth++] = ev[i].ts + ev[i].dur;
    }
    /* data: one file per category; x in ms from the window start; lane k at y = -k */
    if ((rc = make_temp_dir(dir, sizeof dir, err))) {
        dir[0] = '\0';
        goto done;
    }
    bool used[TL_NCATS] = {false};
    for (int c = 0; c < TL_NCATS && !rc; c++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/cat%d.dat", dir, c);
        FILE *d = fopen(path, "w");
        if (!d) {
            rc = zt_error_set(err, ZT_ERR_IO, "plot: cannot write %s: %s", path, strerror(errno));
            break;
        }
        for (int i = 0; i < ne; i++) {
            if (ev[i].cat != c) continue;
            double half = 0.42 * pow(0.78, ev[i].depth);
            fprintf(d, "%.6f %.6f %.6f %.6f\n", (ev[i].ts + ev[i].dur / 2 - lo) / 1e3, -(double)ev[i].lane,
                    ev[i].dur / 2e3 > 1e-6 ? ev[i].dur / 2e3 : 1e-6, half);
            used[c] = true;
        }
        fclose(d);
    }
    char script[4200];
    snprintf(script, sizeof script, "%s/timeline.gp", dir);
    if (rc || !(fp = fopen(script, "w"))) {
        if (!rc) rc = zt_error_set(err, ZT_ERR_IO, "plot: cannot write %s: %s", script, strerror(errno));
        goto done;
    }
    gp_terminal(fp, o->output, o->width > 0 ? o->width : 1600, o->height > 0 ? o->height : 300 + 90 * nl);
    fprintf(fp, "set title ");
    char title[512];
    snprintf(title, sizeof title, "%s%s%s", o->title ? o->title : o->trace, o->step ? ": " : "", o->step ? o->step : "");
    gp_str(fp, title);
    fprintf(fp, "\nset xlabel 'ms'\nset xrange [0:%.6f]\nset yrange [%.2f:0.6]\nset grid xtics\n"
                "set key outside right top\nset style fill solid 0.9 border rgb '#404040'\nset ytics (",
            (hi - lo) / 1e3, -(double)nl + 0.4);
    for (int k = 0; k < nl; k++) {
        char lab[64];
        snprintf(lab, sizeof lab, "rank %d%s", lanes[k].pid, lanes[k].tid == 1 ? "" : " (thread)");
        if (lanes[k].tid != 1) snprintf(lab, sizeof lab, "rank %d tid %d", lanes[k].pid, lanes[k].tid);
        fprintf(fp, "%s", k ? ", " : "");
        gp_str(fp, lab);
        fprintf(fp, " %d", -k);
    }
    fprintf(fp, ")\n");
    /* names in the boxes wide enough for them (~7 px per character at the default width) */
    double px_per_ms = (o->width > 0 ? o->width : 1600) * 0.8 / ((hi - lo) / 1e3);
    int labels = 0;
    for (int i = 0; i < ne && labels < 200; i++) {
        double w_px = ev[i].dur / 1e3 * px_per_ms;
        const char *c = TL_CATS[ev[i].cat].cat; /* containers keep quiet: their children speak */
        if (!strcmp(c, "step") || !strcmp(c, "bucket") || !strcmp(c, "eval") || !strcmp(c, "optimizer") ||
            w_px < 7.0 * (double)strlen(ev[i].name) + 6)
            continue;
        fprintf(fp, "set label %d ", ++labels);
        gp_str(fp, ev[i].name);
        fprintf(fp, " at %.6f,%.6f center front font ',8'\n", (ev[i].ts + ev[i].dur / 2 - lo) / 1e3,
                -(double)ev[i].lane);
    }
    fprintf(fp, "plot ");
    bool first = true;
    for (int c = 0; c < TL_NCATS; c++) {
        if (!used[c]) continue;
        fprintf(fp, "%s'%s/cat%d.dat' using 1:2:3:4 with boxxyerror lc rgb '%s' title '%s'", first ? "" : ", \\\n     ",
                dir, c, TL_CATS[c].rgb, TL_CATS[c].cat);
        first = false;
    }
    fprintf(fp, "\nset output\n");
    if (fclose(fp) != 0) rc = zt_error_set(err, ZT_ERR_IO, "plot: writing %s", script);
    fp = NULL;
    if (!rc) rc = draw(dir, script, o->output, err);
done:
    if (fp) fclose(fp);
    if (dir[0]) {
        if (o->keep_temp) fprintf(stderr, "plot: data and script kept in %s\n", dir);
        else remove_dir(dir);
    }
    free(ev);
    free(lanes);
    cJSON_Delete(root);
    return rc;
}
