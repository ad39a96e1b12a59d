/* residency.c - which parameters are resident while the units run (residency.h): zero3's gathers,
 * prefetch and releases, their compute copies, parameter offload's windows and read-ahead. One
 * copy of these rules for the engine's parameter store and the memory plan. The quantized base
 * (zt_param_desc.quant) is replicated under every strategy: never gathered nor copied here (its
 * dequantization is the store's, engine/param_quant.c). */
#include "memory/residency.h"
#include "memory/plan.h"

#include <stdlib.h>
#include <string.h>

int zt_residency_init(zt_residency *r, const zt_model *m, const zt_plan *pl, const zt_residency_options *o,
                      const zt_residency_ops *ops, void *ctx, zt_error *err) {
    memset(r, 0, sizeof *r);
    r->m = m, r->pl = pl, r->ops = ops, r->ctx = ctx;
    r->gathers = o->gathers;
    r->async = o->async;
    r->prefetch = o->prefetch;
    r->copies = o->copies;
    r->keep_after_forward = o->keep_after_forward;
    r->windows = o->windows;
    r->depth = o->param_prefetch > 0 ? o->param_prefetch : o->param_prefetch == 0 ? 1 : 0;
    r->max_live = o->max_live;
    r->ra_dir = 0, r->ra_last = -2, r->ra_next = -1;
    size_t np = (size_t)m->n_params, nu = (size_t)m->n_units;
    r->gathered = calloc(np, sizeof *r->gathered);
    r->copy = calloc(np, sizeof *r->copy);
    r->pending = calloc(np, sizeof *r->pending);
    r->window = calloc(nu, sizeof *r->window);
    r->window_n = calloc(nu, sizeof *r->window_n);
    r->window_params = calloc(nu * ZT_UNIT_MAX_PARAMS, sizeof *r->window_params);
    if (!r->gathered || !r->copy || !r->pending || !r->window || !r->window_n || !r->window_params) {
        zt_residency_free(r);
        return zt_error_set(err, ZT_ERR_NOMEM, "parameter residency: out of memory");
    }
    return ZT_OK;
}

void zt_residency_free(zt_residency *r) {
    free(r->gathered);
    free(r->copy);
    free(r->pending);
    free(r->window);
    free(r->window_n);
    free(r->window_params);
    r->gathered = r->copy = r->pending = NULL;
    r->window = NULL;
    r->window_n = r->window_params = NULL;
}

/* Unit u's parameters, each once, that are neither gathered nor (also_pending) in a window. */
static int unit_missing(const zt_residency *r, int u, bool also_pending, int *missing) {
    const zt_unit *un = &r->m->units[u];
    int nm = 0;
    for (int k = 0; k < un->n_params; k++) {
        int i = un->params[k];
        bool dup = r->m->params[i].quant != 0; /* the quantized base is replicated: never gathered */
        for (int j = 0; j < nm; j++) dup |= missing[j] == i;
        if (!r->gathered[i] && !(also_pending && r->pending[i]) && !dup) missing[nm++] = i;
    }
    return nm;
}

static void window_release(zt_residency *r, int u) {
    if (!r->windows || !r->window[u]) return;
    r->ops->window_release(r->ctx, u);
    r->window_floats -= r->window[u];
    for (int k = 0; k < r->window_n[u]; k++) r->pending[r->window_params[u * ZT_UNIT_MAX_PARAMS + k]] = false;
    r->window[u] = 0;
    r->window_n[u] = 0;
}

void zt_residency_drop_windows(zt_residency *r) {
    for (int v = 0; r->windows && v < r->m->n_units; v++) window_release(r, v);
}

/* Unit u's window for params[0..n), one read per piece queued. */
static int window_make(zt_residency *r, int u, const int *params, int n, zt_error *err) {
    size_t floats = zt_memory_window_floats(r->pl, params, n);
    int rc = r->ops->window_make(r->ctx, u, params, n, floats, err);
    if (rc) return rc;
    r->window[u] = floats;
    r->window_floats += floats;
    r->window_n[u] = n;
    for (int j = 0; j < n; j++) {
        r->window_params[u * ZT_UNIT_MAX_PARAMS + j] = params[j];
        r->pending[params[j]] = true;
    }
    return ZT_OK;
}

/* The gather's window: the one the read-ahead made when it holds exactly these, else a new one. */
static int gather_window(zt_residency *r, int u, const int *params, int n, zt_error *err) {
    if (r->window[u] && r->window_n[u] == n &&
        !memcmp(&r->window_params[u * ZT_UNIT_MAX_PARAMS], params, (size_t)n * sizeof *params))
        return ZT_OK;
    window_release(r, u);
    return window_make(r, u, params, n, err);
}

/* Where the pass is: a unit that does not continue it (another direction, a skipped unit, a pass
 * of one unit) starts a new one, dropping the windows the last one left. */
static void read_ahead_pass(zt_residency *r, int u, int next) {
    if (!r->windows) return;
    int dir = next >= 0 ? (next > u ? 1 : -1) : r->ra_dir;
    if (r->ra_dir == 0 || dir != r->ra_dir || u != r->ra_last + r->ra_dir) {
        zt_residency_drop_windows(r);
        r->ra_dir = next >= 0 ? dir : 0; /* a pass of one unit reads nothing ahead */
        r->ra_next = u + r->ra_dir;
    }
    r->ra_last = u;
}

/* The reads of the next units' pieces, up to depth units ahead and max_live elements of windows. */
static int read_ahead(zt_residency *r, int u, zt_error *err) {
    if (!r->windows || r->ra_dir == 0) return ZT_OK;
    int dir = r->ra_dir;
    if ((r->ra_next - u) * dir <= 0) r->ra_next = u + dir;
    for (; r->ra_next >= 0 && r->ra_next < r->m->n_units && (r->ra_next - u) * dir <= r->depth; r->ra_next += dir) {
        int missing[ZT_UNIT_MAX_PARAMS];
        int nm = unit_missing(r, r->ra_next, true, missing);
        if (!nm) continue;
        if (r->max_live && r->window_floats + zt_memory_window_floats(r->pl, missing, nm) > r->max_live) break;
        int rc = window_make(r, r->ra_next, missing, nm, err);
        if (rc) return rc;
    }
    return ZT_OK;
}

/* Starts gathering unit u's parameters that are not gathered yet: queued when async (the gather
 * then overlaps the compute until acquire waits for it), else now. */
static int issue_gather(zt_residency *r, int u, zt_error *err) {
    int missing[ZT_UNIT_MAX_PARAMS];
    int nm = unit_missing(r, u, false, missing);
    if (nm == 0) return ZT_OK;
    for (int j = 0; j < nm; j++) {
        int rc = r->ops->alloc_gathered(r->ctx, u, missing[j], err);
        if (rc) return rc;
        r->gathered[missing[j]] = true;
    }
    int rc = r->windows ? gather_window(r, u, missing, nm, err) : ZT_OK;
    if (rc) return rc;
    rc = r->ops->gather(r->ctx, u, missing, nm, r->async, err);
    if (!r->async) window_release(r, u); /* gathered at once */
    return rc;
}

int zt_residency_acquire(zt_residency *r, int u, int next, zt_error *err) {
    if (!r->gathers) return ZT_OK;
    read_ahead_pass(r, u, next);
    int rc = issue_gather(r, u, err);
    if (!rc) rc = read_ahead(r, u, err);
    if (rc) return rc;
    if (r->async) {
        if ((rc = r->ops->wait(r->ctx, u, err))) return rc;
        window_release(r, u); /* its pieces are gathered */
        if (next >= 0 && r->prefetch && (rc = issue_gather(r, next, err))) return rc;
    }
    if (!r->copies) return ZT_OK;
    const zt_unit *un = &r->m->units[u];
    for (int k = 0; k < un->n_params; k++) { /* the matrices' compute copies, from the gathered tensors */
        int i = un->params[k];
        if (r->m->params[i].ndim < 2 || r->m->params[i].quant || r->copy[i]) continue;
        if ((rc = r->ops->make_copy(r->ctx, u, i, err))) return rc;
        r->copy[i] = true;
    }
    return ZT_OK;
}

void zt_residency_release(zt_residency *r, int i) {
    if (!r->gathered[i] && !r->copy[i]) return;
    r->ops->release(r->ctx, i, r->copy[i], r->gathered[i]);
    r->copy[i] = r->gathered[i] = false;
}

void zt_residency_after_forward(zt_residency *r, int u, bool training) {
    if (!r->gathers || (training && r->keep_after_forward)) return;
    const zt_unit *un = &r->m->units[u];
    for (int k = 0; k < un->n_params; k++)
        if (r->pl->p[un->params[k]].last_fwd_unit == u) zt_residency_release(r, un->params[k]);
}

void zt_residency_after_backward(zt_residency *r, int u) {
    if (!r->gathers) return;
    const zt_unit *un = &r->m->units[u]; /* a parameter is done when the unit that owns it (its first user) is */
    for (int k = 0; k < un->n_params; k++)
        if (r->pl->p[un->params[k]].owner_unit == u) zt_residency_release(r, un->params[k]);
}

bool zt_residency_needs_view(const zt_model *m, bool bf16, int lp_kind, int u, int k) {
    const zt_unit *un = &m->units[u];
    if (!bf16 || m->params[un->params[k]].quant) return false; /* quantized: dequantized instead */
    bool lp = lp_kind != 0 && m->params[un->params[k]].ndim >= 2;
    return !(lp && un->ops->reads_lp && un->ops->reads_lp(un, k));
}
