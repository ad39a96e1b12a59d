/* guard.c - the step guard (guard.h): consecutive non-finite skips, the loss-spike z-score, the
 * straggler report.
 * Invariant: hist holds only losses of applied updates, so a spike or a skipped step never
 * enters the statistics it is judged by. */
#include "train/guard.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int zt_guard_init(zt_guard *g, const zt_train_config *cfg, int world, zt_error *err) {
    *g = (zt_guard){.max_nonfinite = cfg->fault_nonfinite_skips, .spike_z = cfg->fault_loss_spike_z,
                    .window = cfg->fault_loss_spike_window, .world = world};
    if (g->spike_z > 0 && !(g->hist = calloc((size_t)g->window, sizeof *g->hist)))
        return zt_error_set(err, ZT_ERR_NOMEM, "trainer: out of memory for a loss window of %d", g->window);
    g->slow_run = calloc((size_t)world, sizeof *g->slow_run);
    g->slow_sum = calloc((size_t)world, sizeof *g->slow_sum);
    if (!g->slow_run || !g->slow_sum) return zt_error_set(err, ZT_ERR_NOMEM, "trainer: out of memory");
    return ZT_OK;
}

void zt_guard_free(zt_guard *g) {
    free(g->hist);
    free(g->slow_run);
    free(g->slow_sum);
    g->hist = NULL;
    g->slow_run = NULL;
    g->slow_sum = NULL;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int zt_guard_straggler(zt_guard *g, const double *work, double *mean_s, double *median_s) {
    if (g->world < 2) return -1;
    double sorted[g->world];
    memcpy(sorted, work, sizeof sorted);
    qsort(sorted, (size_t)g->world, sizeof *sorted, cmp_double);
    double med = g->world % 2 ? sorted[g->world / 2] : 0.5 * (sorted[g->world / 2 - 1] + sorted[g->world / 2]);
    *median_s = med;
    int report = -1;
    for (int r = 0; r < g->world; r++) {
        if (work[r] > fmax(1.5 * med, med + 0.05)) {
            g->slow_run[r]++;
            g->slow_sum[r] += work[r];
        } else {
            g->slow_run[r] = 0;
            g->slow_sum[r] = 0;
        }
        int n = g->slow_run[r];
        if (report < 0 && (n == ZT_STRAGGLER_STEPS || (n > ZT_STRAGGLER_STEPS && (n - ZT_STRAGGLER_STEPS) % 100 == 0))) {
            report = r;
            *mean_s = g->slow_sum[r] / n;
        }
    }
    return report;
}

int zt_guard_window(const zt_guard *g, const double **hist, int *n, int *head) {
    *hist = g->hist;
    *n = g->hist ? g->n : 0;
    *head = g->hist ? g->head : 0;
    return g->hist ? g->window : 0;
}

bool zt_guard_window_restore(zt_guard *g, int window, const double *losses, int n, int head) {
    if (!g->hist || window != g->window || n < 0 || n > window || head < 0 || head >= window || (n < window && head != n))
        return false;
    memcpy(g->hist, losses, (size_t)n * sizeof *losses);
    g->n = n;
    g->head = head;
    return true;
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
