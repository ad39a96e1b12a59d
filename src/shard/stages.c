/* stages.c - pipeline stages (stages.h): the per-unit costs, the balanced cut, a given cut, and
 * the stage model a rank runs.
 *
 * Invariants: a cut is `stages` non-empty runs of consecutive units covering all of them; a
 * stage model lists the parameters of its units in the whole model's table order with the same
 * descriptors (names, shapes, init, tp fields), so anything keyed by name or logical index sees
 * the same tensor. */
#include "shard/stages.h"

#include <float.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void zt_pp_unit_costs(const zt_model *m, int B, int T, int lp_kind, int in_flight, double *cost) {
    for (int u = 0; u < m->n_units; u++) {
        const zt_unit *un = &m->units[u];
        double params = 0;
        for (int k = 0; k < un->n_params; k++) {
            int i = un->params[k];
            bool first = true; /* counted by the first unit that lists it */
            for (int v = 0; v < u && first; v++)
                for (int j = 0; j < m->units[v].n_params; j++) first &= m->units[v].params[j] != i;
            if (first) params += (double)m->params[i].numel;
        }
        double act = (double)un->ops->saved_floats(un, B, T, lp_kind) + (double)B * T * un->out_width;
        cost[u] = 16.0 * params + 4.0 * act * (in_flight > 0 ? in_flight : 1);
    }
}

int zt_pp_balance(const double *cost, int n, int stages, zt_pp_cut *cut, zt_error *err) {
    if (stages < 1 || stages > ZT_PP_MAX_STAGES)
        return zt_error_set(err, ZT_ERR_USAGE, "parallel.pipeline_parallel_size: %d stages (1..%d)", stages,
                            ZT_PP_MAX_STAGES);
    if (stages > n)
        return zt_error_set(err, ZT_ERR_USAGE, "parallel.pipeline_parallel_size: %d stages for the model's %d units",
                            stages, n);
    /* best[s][j]: the smallest largest-stage cost of units [0, j) in s stages; from[s][j] the
     * first unit of the last of them */
    double *pre = calloc((size_t)n + 1, sizeof *pre);
    double *best = malloc((size_t)(stages + 1) * (size_t)(n + 1) * sizeof *best);
    int *from = malloc((size_t)(stages + 1) * (size_t)(n + 1) * sizeof *from);
    if (!pre || !best || !from) {
        free(pre), free(best), free(from);
        return zt_error_set(err, ZT_ERR_NOMEM, "pipeline stages: out of memory");
    }
#define AT(a, s, j) a[(size_t)(s) * (size_t)(n + 1) + (size_t)(j)]
    for (int j = 0; j < n; j++) pre[j + 1] = pre[j] + cost[j];
    for (int j = 0; j <= n; j++) AT(best, 1, j) = pre[j], AT(from, 1, j) = 0;
    for (int s = 2; s <= stages; s++)
        for (int j = s; j <= n; j++) {
            AT(best, s, j) = DBL_MAX;
            for (int i = s - 1; i < j; i++) { /* the last stage: units [i, j) */
                double last = pre[j] - pre[i], worst = AT(best, s - 1, i) > last ? AT(best, s - 1, i) : last;
                if (worst < AT(best, s, j)) AT(best, s, j) = worst, AT(from, s, j) = i;
            }
        }
    cut->stages = stages;
    cut->first[stages] = n;
    for (int s = stages, j = n; s >= 1; s--) j = cut->first[s - 1] = AT(from, s, j);
#undef AT
    free(pre), free(best), free(from);
    return ZT_OK;
}

int zt_pp_parse_cut(const char *list, int n, int stages, zt_pp_cut *cut, zt_error *err) {
    const char *p = list;
    int count = 0, sum = 0;
    cut->stages = stages;
    cut->first[0] = 0;
    while (*p) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 1 || v > n)
            return zt_error_set(err, ZT_ERR_USAGE, "parallel.pipeline_stages \"%s\": expected positive unit counts "
                                "separated by commas (the model has %d units)", list, n);
        if (count < ZT_PP_MAX_STAGES) cut->first[count + 1] = sum + (int)v;
        sum += (int)v;
        count++;
        p = end;
        while (*p == ' ') p++;
        if (*p == ',') p++;
        else if (*p)
            return zt_error_set(err, ZT_ERR_USAGE, "parallel.pipeline_stages \"%s\": unexpected '%c'", list, *p);
    }
    if (count != stages || sum != n)
        return zt_error_set(err, ZT_ERR_USAGE, "parallel.pipeline_stages \"%s\": %d stages of %d units in all, but "
                            "parallel.pipeline_parallel_size is %d and the model has %d units (model.n_layer + 2)",
                            list, count, sum, stages, n);
    return ZT_OK;
}

int zt_pp_param_owner(const zt_model *m, const zt_pp_cut *cut, int k) {
    for (int s = 0; s < cut->stages; s++)
        for (int u = cut->first[s]; u < cut->first[s + 1]; u++)
            for (int j = 0; j < m->units[u].n_params; j++)
                if (m->units[u].params[j] == k) return s;
    return -1;
}

static bool lists(const zt_model *m, const zt_pp_cut *cut, int s, int k) {
    for (int u = cut->first[s]; u < cut->first[s + 1]; u++)
        for (int j = 0; j < m->units[u].n_params; j++)
            if (m->units[u].params[j] == k) return true;
    return false;
}

bool zt_pp_stage_holds(const zt_model *m, const zt_pp_cut *cut, int s, int k) {
    /* a LoRA adapter comes with the weight it adapts */
    return lists(m, cut, s, k) || (m->params[k].lora && lists(m, cut, s, m->params[k].lora_base));
}

int zt_pp_stage_model(const zt_model *m, const zt_pp_cut *cut, int s, zt_model **out, int *map, zt_error *err) {
    *out = NULL;
    if (s < 0 || s >= cut->stages)
        return zt_error_set(err, ZT_ERR_INTERNAL, "pipeline: stage %d of %d", s, cut->stages);
    for (int k = 0; k < m->n_params; k++) map[k] = zt_pp_stage_holds(m, cut, s, k) ? 0 : -1;
    zt_model *sm = calloc(1, sizeof *sm);
    if (!sm) return zt_error_set(err, ZT_ERR_NOMEM, "pipeline: out of memory");
    *sm = *m;
    sm->cfg = NULL; /* m's: the stage model must not free it */
    sm->lora = NULL;
    sm->params = NULL;
    sm->units = NULL;
    sm->n_params = sm->cap_params = sm->n_units = sm->cap_units = 0;
    snprintf(sm->name, sizeof sm->name, "%s", m->name);
    int np = 0, nu = cut->first[s + 1] - cut->first[s];
    for (int k = 0; k < m->n_params; k++) np += map[k] == 0;
    sm->params = calloc((size_t)(np ? np : 1), sizeof *sm->params);
    sm->units = calloc((size_t)nu, sizeof *sm->units);
    if (!sm->params || !sm->units) {
        free(sm->params), free(sm->units), free(sm);
        return zt_error_set(err, ZT_ERR_NOMEM, "pipeline: out of memory");
    }
    for (int k = 0; k < m->n_params; k++)
        if (map[k] == 0) {
            map[k] = sm->n_params;
            sm->params[sm->n_params++] = m->params[k];
        }
    for (int i = 0; i < sm->n_params; i++)
        if (sm->params[i].lora_base >= 0) sm->params[i].lora_base = map[sm->params[i].lora_base];
    sm->cap_params = np;
    for (int u = cut->first[s]; u < cut->first[s + 1]; u++) {
        zt_unit *d = &sm->units[sm->n_units++];
        *d = m->units[u];
        for (int j = 0; j < d->n_params; j++) d->params[j] = map[d->params[j]];
    }
    sm->cap_units = nu;
    *out = sm;
    return ZT_OK;
}

void zt_pp_describe(const zt_model *m, const zt_pp_cut *cut, char *buf, size_t cap) {
    size_t used = (size_t)snprintf(buf, cap, "%d stages: units", cut->stages);
    for (int s = 0; s < cut->stages && used + 8 < cap; s++) {
        int a = cut->first[s], b = cut->first[s + 1] - 1;
        used += (size_t)snprintf(buf + used, cap - used, "%s %d-%d (%s .. %s)", s ? "," : "", a, b, m->units[a].name,
                                 m->units[b].name);
    }
}
