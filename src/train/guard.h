/* guard.h - the step guard of the training loop: the non-finite and loss-spike policies and the
 * straggler report (docs/reliability.md). Every input is the same on every rank (the all-reduced loss, the global
 * gradient norm), so every rank decides alike without a collective of its own. */
#ifndef ZT_TRAIN_GUARD_H
#define ZT_TRAIN_GUARD_H

#include "config/train_config.h"

typedef struct zt_guard {
    int max_nonfinite;   /* fault.nonfinite_skips: non-finite steps skipped in a row before stopping */
    double spike_z;      /* fault.loss_spike_z: 0 = no spike detection */
    int window;          /* fault.loss_spike_window: losses the z-score is taken over */
    double *hist;        /* (window) the last accepted losses, a ring */
    int n, head;         /* losses in hist; next slot */
    int nonfinite_run;   /* non-finite steps skipped in a row so far */
    int64_t skipped;     /* updates skipped by this guard's policies (not fp16 overflows) */
    int world;
    int *slow_run;       /* (world) steps in a row each rank's own work was slow */
    double *slow_sum;    /* (world) its work over those steps, seconds */
} zt_guard;

/* A rank is slow in a step when its own work (the step's time before the agreement, less its time
 * in collectives) exceeds max(1.5 x the median rank's, the median + 50 ms); this many slow steps in
 * a row are reported (then every 100 more). */
#define ZT_STRAGGLER_STEPS 5

int zt_guard_init(zt_guard *g, const zt_train_config *cfg, int world, zt_error *err);
void zt_guard_free(zt_guard *g);

/* Before the update: true when `loss` (this step's all-reduced mean loss) lies more than spike_z
 * standard deviations above the mean of the last `window` accepted losses (the window full);
 * *z, *mean, *sd describe it. Never fires while detection is off or the window fills. */
bool zt_guard_spike(const zt_guard *g, double loss, double *z, double *mean, double *sd);

/* After the update: records `loss` when the step was applied; counts a skipped non-finite step and
 * returns ZT_ERR_NUMERICS (naming `step` and the count) once max_nonfinite have come in a row. */
int zt_guard_after(zt_guard *g, const zt_step_report *rep, double loss, int64_t step, zt_error *err);

/* The loss window as it is held (a checkpoint carries it, so a resumed run detects spikes as the
 * uninterrupted one): window size, *n losses hist[0..n) in ring order, *head the next slot; NULL
 * hist (detection off): *n = 0 and 0 returned. Returns the window size. */
int zt_guard_window(const zt_guard *g, const double **hist, int *n, int *head);
/* Puts back a window saved by zt_guard_window. False (nothing changed) when its size is not this
 * guard's window or detection is off: the window then refills from empty. */
bool zt_guard_window_restore(zt_guard *g, int window, const double *losses, int n, int head);

/* Straggler report: work[r] is rank r's own work this step (the same array on every rank).
 * Returns the rank to report now (ZT_STRAGGLER_STEPS slow steps in a row, then every 100), else
 * -1; *mean_s its mean work over those steps, *median_s this step's median. */
int zt_guard_straggler(zt_guard *g, const double *work, double *mean_s, double *median_s);

#endif
