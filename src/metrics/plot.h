/* plot.h - `zerotrain plot`: training curves from JSONL logs (loss train/val, tokens/s, memory,
 * MFU), several runs overlaid and labeled, and a picture of a timeline, drawn by gnuplot (Debian
 * gnuplot-nox) run as a subprocess on a generated script and data files in a temporary
 * directory. */
#ifndef ZT_PLOT_H
#define ZT_PLOT_H

#include "zerotrain/zerotrain.h"

#include <stdbool.h>

typedef struct zt_plot_options {
    const char *const *runs; /* JSONL files written by `zerotrain train` (logging.jsonl) */
    int n_runs;
    const char *const *labels; /* one per run, or NULL: each file's name without .jsonl */
    const char *output;      /* .png (pngcairo, else gd png), .svg or .pdf (pdfcairo) */
    const char *title;       /* figure title, or NULL */
    int width, height;       /* pixels (points for pdf); 0: 1400 x 1000 */
    bool keep_temp;          /* leave the temp directory (its path goes to stderr) */
} zt_plot_options;

/* Reads every run, writes the data and script, runs gnuplot, checks the output exists.
 * Errors: ZT_ERR_USAGE (no runs, label count differs, unknown output extension, gnuplot not
 * installed: the message says `apt-get install gnuplot-nox` or set ZT_GNUPLOT=/path),
 * ZT_ERR_DATA (a line is not JSON, or a file has no step lines: names file and line),
 * ZT_ERR_IO (a file cannot be read or written; gnuplot failed: its message is quoted).
 * ZT_GNUPLOT overrides the gnuplot executable. */
int zt_plot_runs(const zt_plot_options *o, zt_error *err);

/* A static picture of a Chrome trace (a merged `--trace` file): one lane per rank and thread,
 * time in ms on x, every complete event a box colored by category (step, forward, backward,
 * comm, bucket, optimizer, data, eval, checkpoint, wait; others gray), nested events drawn
 * thinner on top of their parents, names written in the boxes wide enough to hold them. */
typedef struct zt_timeline_options {
    const char *trace;     /* a Chrome trace in the JSON object format (zerotrain's, merged or not) */
    const char *output;    /* .png, .svg or .pdf */
    const char *step;      /* "step 2": the window of the step spans of that name on every rank
                              (rank 0's start to the last rank's end); NULL: the whole trace */
    const char *title;     /* or NULL */
    int width, height;     /* 0: 1600 x 300 + 90 per lane */
    bool keep_temp;
} zt_timeline_options;

/* Errors as zt_plot_runs; ZT_ERR_DATA when the file is not a trace or the step is not in it. */
int zt_plot_timeline(const zt_timeline_options *o, zt_error *err);

#endif
