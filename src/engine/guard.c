/* guard.c - the step guard (guard.h): consecutive non-finite skips and the loss-spike z-score.
 * Invariant: hist holds only losses of applied updates, so a spike or a skipped step never
 * enters the statistics it is judged by. */
#include "engine/guard.h"

#include <math.h>
#include <stdlib.h>

int zt_guard_init(zt_guard *g, const zt_train_config *cfg, zt_error *err) {
    *g = (zt_guard){.max_nonfinite = cfg->fault_nonfinite_skips, .spike_z = cfg->fault_loss_spike_z,
                    .window = cfg->fault_loss_spike_window};
    if (g->spike_z > 0 && !(g->hist = calloc((size_t)g->window, sizeof *g->hist)))
        return zt_error_set(err, ZT_ERR_NOMEM, "trainer: out of memory for a loss window of %d", g->window);
    return ZT_OK;
}

void zt_guard_free(zt_guard *g) {
    free(g->hist);
    g->hist = NULL;
}

bool zt_guard_spike(const zt_guard *g, double loss, double *z, double *mean, double *sd) {
    if (!(g->spike_z > 0) || g->n < g->window) return false;
    double s = 0, ss = 0;
    for (int i = 0; i < g->n; i++) s += g->hist[i];
    *mean = s / g->n;
    for (int i = 0; i < g->n; i++) ss += (g->hist[i] - *mean) * (g->hist[i] - *mean);
    *sd = sqrt(ss / g->n);
    *z = *sd > 0 ? (loss - *mean) / *sd : 0;
    return *sd > 0 && *z > g->spike_z;
}

int zt_guard_after(zt_guard *g, const zt_step_report *rep, double loss, int64_t step, zt_error *err) {
    if (rep->skipped && rep->skip_reason != ZT_SKIP_OVERFLOW) g->skipped++;
    if (rep->skip_reason == ZT_SKIP_NONFINITE) {
        if (++g->nonfinite_run >= g->max_nonfinite)
            return zt_error_set(err, ZT_ERR_NUMERICS,
                                "step %lld: the gradients were not finite in %d steps in a row (fault.nonfinite_skips "
                                "= %d; each was skipped on every rank): stopping; the last commit holds finite values",
                                (long long)step, g->nonfinite_run, g->max_nonfinite);
        return ZT_OK;
    }
    if (rep->skipped) return ZT_OK;
    g->nonfinite_run = 0;
    if (g->hist && isfinite(loss)) {
        g->hist[g->head] = loss;
        g->head = (g->head + 1) % g->window;
        if (g->n < g->window) g->n++;
    }
    return ZT_OK;
}
