/* pipeline.c - stages, bubble and a stage's memory for the scale model (pipeline.h). */
#include "scale/pipeline.h"
#include "memory/estimate.h"

#include <stdlib.h>

const char *zt_scale_pp_schedule_name(zt_scale_pp_schedule s) { return s == ZT_SCALE_GPIPE ? "gpipe" : "1f1b"; }

int zt_scale_blocks(const zt_model *m) {
    int L = 0;
    for (int u = 0; u < m->n_units; u++) L += m->units[u].layer >= 0;
    return L;
}

int zt_scale_stage_units(const zt_model *m, int pp, int s, int *first, int *end, zt_error *err) {
    int L = zt_scale_blocks(m);
    if (pp == 1 && s == 0) {
        *first = 0, *end = m->n_units;
        return ZT_OK;
    }
    if (pp < 1 || L < 1 || L % pp || s < 0 || s >= pp)
        return zt_error_set(err, ZT_ERR_USAGE, "--pp %d: the pipeline stages must divide the model's %d blocks", pp, L);
    /* units: the embedding, the L blocks, the head (and anything after them) */
    int b0 = 0;
    while (b0 < m->n_units && m->units[b0].layer < 0) b0++;
    *first = s == 0 ? 0 : b0 + s * (L / pp);
    *end = s == pp - 1 ? m->n_units : b0 + (s + 1) * (L / pp);
    return ZT_OK;
}

double zt_scale_bubble_fraction(int pp, int micro_batches) {
    if (pp <= 1 || micro_batches < 1) return 0;
    return (double)(pp - 1) / (micro_batches + pp - 1);
}

int zt_scale_in_flight(zt_scale_pp_schedule sch, int pp, int s, int micro_batches) {
    if (micro_batches < 1) micro_batches = 1;
    if (sch == ZT_SCALE_GPIPE) return micro_batches;
    int k = pp - s;
    return k < micro_batches ? (k > 0 ? k : 1) : micro_batches;
}

double zt_scale_pipeline_seconds(const double *per_stage, int pp, int micro_batches, int *slowest) {
    double sum = 0, max = 0;
    int arg = 0;
    for (int s = 0; s < pp; s++) {
        sum += per_stage[s];
        if (per_stage[s] > max) max = per_stage[s], arg = s;
    }
    if (slowest) *slowest = arg;
    return sum + (micro_batches > 1 ? micro_batches - 1 : 0) * max;
}

/* Bytes unit u keeps per micro-batch: its output and the saved floats checkpointing keeps. */
static size_t unit_acts(const zt_model *m, const zt_engine_options *o, int lp_kind, int u) {
    const zt_unit *un = &m->units[u];
    size_t BT = (size_t)o->B * o->T, bytes = zt_memory_alloc_bytes(BT * (size_t)un->out_width);
    size_t saved = un->ops->saved_floats(un, o->B, o->T, lp_kind), kept = saved;
    if (o->activation_checkpointing == ZT_RECOMPUTE_FULL) kept = 0;
    else if (o->activation_checkpointing == ZT_RECOMPUTE_SELECTIVE && un->ops->kept_floats && un->ops->recompute)
        kept = un->ops->kept_floats(un, o->B, o->T, lp_kind);
    return bytes + (kept ? zt_memory_alloc_bytes(kept) : 0);
}

int zt_scale_stage_view(const zt_model *m, int first, int end, const zt_engine_options *o, zt_model *view,
                        zt_error *err) {
    *view = *m;
    int *map = malloc((size_t)(m->n_params > 0 ? m->n_params : 1) * sizeof *map);
    view->params = malloc((size_t)(m->n_params > 0 ? m->n_params : 1) * sizeof *view->params);
    view->units = malloc((size_t)(end - first > 0 ? end - first : 1) * sizeof *view->units);
    if (!map || !view->params || !view->units) {
        free(map), free(view->params), free(view->units);
        return zt_error_set(err, ZT_ERR_NOMEM, "scale model: a pipeline stage of %d units", end - first);
    }
    for (int i = 0; i < m->n_params; i++) map[i] = -1;
    for (int u = first; u < end; u++)
        for (int k = 0; k < m->units[u].n_params; k++) map[m->units[u].params[k]] = 1;
    view->n_params = 0;
    for (int i = 0; i < m->n_params; i++) /* the table's order, as the whole model's */
        if (map[i] > 0) {
            map[i] = view->n_params;
            view->params[view->n_params++] = m->params[i];
        }
    view->cap_params = view->n_params;
    view->n_units = view->cap_units = end - first;
    for (int u = first; u < end; u++) {
        zt_unit *un = &view->units[u - first];
        *un = m->units[u];
        for (int k = 0; k < un->n_params; k++) un->params[k] = map[un->params[k]];
    }
    free(map);
    if (zt_model_ep_parts(m) > 1) zt_memory_experts_for(view, o);
    return ZT_OK;
}

void zt_scale_view_free(zt_model *view) { free(view->params), free(view->units); }

int zt_scale_stage_memory(const zt_model *m, const zt_engine_options *o, const zt_memory_plan_options *po, int dp,
                          int pp, int stage, int first, int end, int in_flight, size_t *bytes, zt_error *err) {
    zt_memory_plan plan;
    zt_model view;
    const zt_model *sm = m;
    /* a stage's view (one stage with expert parallelism: the whole model's), its experts stored
     * E/ep a device where the engine stores them under o (each stage's over its own ep group) */
    if (pp > 1 || zt_model_ep_parts(m) > 1) {
        int rc = zt_scale_stage_view(m, first, end, o, &view, err);
        if (rc) return rc;
        sm = &view;
    }
    int rc = zt_estimate_peak(sm, o, po, dp, &plan, err);
    if (sm != m) zt_scale_view_free(&view);
    if (rc) return rc;
    *bytes = plan.peak_total;
    if (pp <= 1) return ZT_OK;
    int lp_kind = zt_precision_lp_kind(&o->precision), C = 0;
    double acts = 0;
    for (int u = first; u < end; u++) acts += (double)unit_acts(m, o, lp_kind, u);
    for (int u = 0; u < m->n_units && !C; u++)
        if (m->units[u].layer >= 0) C = m->units[u].out_width;
    double buf = (double)zt_memory_alloc_bytes((size_t)o->B * o->T * (size_t)C);
    double p2p = (stage > 0 ? (in_flight + 2) * buf : 0) + (stage < pp - 1 ? 2 * buf : 0);
    *bytes += (size_t)((in_flight - 1) * acts + p2p);
    return ZT_OK;
}
