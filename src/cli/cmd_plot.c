/* cmd_plot.c - `zerotrain plot RUN.jsonl [RUN2.jsonl ...] -o out.png [--labels a,b]`: training
 * curves through gnuplot (src/metrics/plot.c); `zerotrain plot --timeline trace.json [--step N]
 * -o timeline.png`: a picture of a timeline; and `zerotrain plot --merge-traces A.json B.json ...
 * -o all.json`: one Chrome trace from per-rank timeline files (src/obs/trace.c). */
#include "cli/commands.h"
#include "metrics/plot.h"
#include "obs/trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *out) {
    fprintf(out,
            "usage: zerotrain plot RUN.jsonl [RUN2.jsonl ...] -o out.png [--labels a,b,...] [--title T]\n"
            "                      [--size 1400x1000] [--keep]\n"
            "       zerotrain plot --timeline trace.json [--step N] -o timeline.png\n"
            "       zerotrain plot --merge-traces trace.rank0.json trace.rank1.json ... -o trace.json\n"
            "  RUN.jsonl       logging.jsonl of `zerotrain train`; several runs are overlaid\n"
            "  -o              output: .png, .svg or .pdf (plot); .json (merge)\n"
            "  --labels        comma-separated legend names, one per run (default: file names)\n"
            "  --title         figure title\n"
            "  --size          width x height in pixels\n"
            "  --keep          keep the generated gnuplot script and data (path on stderr)\n"
            "  --timeline      draw a (merged) trace: one lane per rank, boxes by category\n"
            "  --step N        with --timeline: only the span of step N (all ranks)\n"
            "  --merge-traces  merge per-rank timelines (--trace) into one file for chrome://tracing\n"
            "                  or ui.perfetto.dev; files cut short by a crash are accepted\n"
            "needs gnuplot (Debian: apt-get install gnuplot-nox); ZT_GNUPLOT=/path overrides it\n");
}

int zt_cmd_plot(int argc, char **argv) {
    zt_error err = {0};
    const char *output = NULL, *labels_arg = NULL, *title = NULL, *step = NULL;
    bool merge = false, keep = false, timeline = false;
    char step_name[64];
    int width = 0, height = 0, n = 0;
    const char **files = calloc((size_t)argc + 1, sizeof *files);
    const char **labels = NULL;
    char *labels_copy = NULL;
    int rc = ZT_OK;
    if (!files) {
        zt_error_set(&err, ZT_ERR_NOMEM, "plot: out of memory");
        return zt_cli_fail(&err);
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool takes = !strcmp(a, "-o") || !strcmp(a, "--output") || !strcmp(a, "--labels") ||
                     !strcmp(a, "--title") || !strcmp(a, "--size") || !strcmp(a, "--step");
        if (takes && i + 1 >= argc) {
            rc = zt_error_set(&err, ZT_ERR_USAGE, "plot: %s needs a value", a);
            goto out;
        }
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            goto out;
        } else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            output = argv[++i];
        } else if (!strcmp(a, "--labels")) {
            labels_arg = argv[++i];
        } else if (!strcmp(a, "--title")) {
            title = argv[++i];
        } else if (!strcmp(a, "--size")) {
            const char *v = argv[++i];
            if (sscanf(v, "%dx%d", &width, &height) != 2 || width < 100 || height < 100 || width > 20000 ||
                height > 20000) {
                rc = zt_error_set(&err, ZT_ERR_USAGE, "plot: --size wants WIDTHxHEIGHT in [100, 20000], got \"%s\"", v);
                goto out;
            }
        } else if (!strcmp(a, "--step")) {
            char *end;
            long v = strtol(argv[++i], &end, 10);
            if (*end || v < 1) {
                rc = zt_error_set(&err, ZT_ERR_USAGE, "plot: --step wants a step number >= 1, got \"%s\"", argv[i]);
                goto out;
            }
            snprintf(step_name, sizeof step_name, "step %ld", v);
            step = step_name;
        } else if (!strcmp(a, "--timeline")) {
            timeline = true;
        } else if (!strcmp(a, "--keep")) {
            keep = true;
        } else if (!strcmp(a, "--merge-traces")) {
            merge = true;
        } else if (a[0] == '-' && a[1]) {
            rc = zt_error_set(&err, ZT_ERR_USAGE, "plot: unknown option %s (see zerotrain plot --help)", a);
            goto out;
        } else {
            files[n++] = a;
        }
    }
    if (n == 0) {
        rc = zt_error_set(&err, ZT_ERR_USAGE, "plot: no input files (usage: zerotrain plot RUN.jsonl -o out.png)");
        goto out;
    }
    if (!output) {
        rc = zt_error_set(&err, ZT_ERR_USAGE, "plot: missing -o OUTPUT");
        goto out;
    }
    if (merge) {
        if ((rc = zt_trace_merge(files, n, output, &err))) goto out;
        printf("merged %d trace file%s into %s (open it in chrome://tracing or https://ui.perfetto.dev)\n", n,
               n == 1 ? "" : "s", output);
        goto out;
    }
    if (step && !timeline) {
        rc = zt_error_set(&err, ZT_ERR_USAGE, "plot: --step goes with --timeline");
        goto out;
    }
    if (timeline) {
        if (n != 1) {
            rc = zt_error_set(&err, ZT_ERR_USAGE, "plot: --timeline draws one trace file, got %d", n);
            goto out;
        }
        zt_timeline_options t = {.trace = files[0], .output = output, .step = step, .title = title,
                                 .width = width, .height = height, .keep_temp = keep};
        if ((rc = zt_plot_timeline(&t, &err))) goto out;
        printf("wrote %s\n", output);
        goto out;
    }
    if (labels_arg) {
        labels_copy = strdup(labels_arg);
        labels = calloc((size_t)n, sizeof *labels);
        if (!labels_copy || !labels) {
            rc = zt_error_set(&err, ZT_ERR_NOMEM, "plot: out of memory");
            goto out;
        }
        int k = 0;
        char *save = NULL;
        for (char *tok = strtok_r(labels_copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            if (k == n) {
                k++;
                break;
            }
            labels[k++] = tok;
        }
        if (k != n) {
            rc = zt_error_set(&err, ZT_ERR_USAGE, "plot: --labels has %s names than the %d run%s given (\"%s\")",
                              k > n ? "more" : "fewer", n, n == 1 ? "" : "s", labels_arg);
            goto out;
        }
    }
    zt_plot_options o = {.runs = files, .n_runs = n, .labels = labels, .output = output, .title = title,
                         .width = width, .height = height, .keep_temp = keep};
    if ((rc = zt_plot_runs(&o, &err))) goto out;
    printf("wrote %s (%d run%s)\n", output, n, n == 1 ? "" : "s");
out:
    free(files);
    free(labels);
    free(labels_copy);
    return rc ? zt_cli_fail(&err) : 0;
}
