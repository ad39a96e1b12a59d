/* guard.h - the step guard of the training loop: the non-finite and loss-spike policies
 * (docs/reliability.md). Every input is the same on every rank (the all-reduced loss, the global
 * gradient norm), so every rank decides alike without a collective of its own. */
#ifndef ZT_GUARD_H
#define ZT_GUARD_H

#include "config/train_config.h"

typedef struct zt_guard {
    int max_nonfinite;   /* fault.nonfinite_skips: non-finite steps skipped in a row before stopping */
    double spike_z;      /* fault.loss_spike_z: 0 = no spike detection */
    int window;          /* fault.loss_spike_window: losses the z-score is taken over */
    double *hist;        /* (window) the last accepted losses, a ring */
    int n, head;         /* losses in hist; next slot */
    int nonfinite_run;   /* non-finite steps skipped in a row so far */
    int64_t skipped;     /* updates skipped by this guard's policies (not fp16 overflows) */
} zt_guard;

int zt_guard_init(zt_guard *g, const zt_train_config *cfg, zt_error *err);
void zt_guard_free(zt_guard *g);

/* Before the update: true when `loss` (this step's all-reduced mean loss) lies more than spike_z
 * standard deviations above the mean of the last `window` accepted losses (the window full);
 * *z, *mean, *sd describe it. Never fires while detection is off or the window fills. */
bool zt_guard_spike(const zt_guard *g, double loss, double *z, double *mean, double *sd);

/* After the update: records `loss` when the step was applied; counts a skipped non-finite step and
 * returns ZT_ERR_NUMERICS (naming `step` and the count) once max_nonfinite have come in a row. */
int zt_guard_after(zt_guard *g, const zt_step_report *rep, double loss, int64_t step, zt_error *err);

#endif
