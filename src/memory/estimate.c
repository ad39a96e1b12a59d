/* estimate.c - the estimator's grid (estimate.h): one memory plan per (strategy, variant, rank),
 * reduced to the rank that needs the most. */
#include "memory/estimate.h"
#include "shard/plan.h"

#include <stdlib.h>
#include <string.h>

const char *zt_est_variant_name(zt_est_variant v) {
    static const char *names[ZT_EST_VARIANTS] = {"as_given", "ckpt_full", "ckpt_selective", "nvme", "ckpt_full_nvme"};
    return (unsigned)v < ZT_EST_VARIANTS ? names[v] : "unknown";
}

/* The variant's engine options and plan options: one change from the request's. */
static void variant(const zt_estimate_request *rq, zt_est_variant v, zt_engine_options *o, zt_memory_plan_options *po) {
    *po = rq->plan;
    if (v == ZT_EST_CKPT_FULL || v == ZT_EST_FULL_NVME) o->activation_checkpointing = ZT_RECOMPUTE_FULL;
    if (v == ZT_EST_CKPT_SELECTIVE) o->activation_checkpointing = ZT_RECOMPUTE_SELECTIVE;
    if (v == ZT_EST_NVME || v == ZT_EST_FULL_NVME) po->offload_optimizer = true;
}

typedef struct owned {
    int rank;
    int64_t elements;
} owned;

static int by_elements(const void *a, const void *b) {
    const owned *x = a, *y = b;
    if (x->elements != y->elements) return x->elements > y->elements ? -1 : 1;
    return x->rank - y->rank;
}

int zt_estimate_ranks(const zt_model *m, int world, int group, int *out, int cap) {
    int n = 0;
    if (world <= 64) {
        for (int r = 0; r < world && n < cap; r++) out[n++] = r;
        return n;
    }
    if (group < 1) group = world;
    zt_plan pl;
    zt_error ignore;
    owned *o = calloc((size_t)group, sizeof *o);
    if (!o || zt_plan_create(m, group, 0, &pl, &ignore)) { /* fall back to the ends */
        free(o);
        out[n++] = 0;
        if (n < cap && world > 1) out[n++] = world - 1;
        return n;
    }
    for (int s = 0; s < group; s++) {
        o[s].rank = s;
        for (int i = 0; i < m->n_params; i++) o[s].elements += zt_plan_shard_numel(&pl, i, s);
    }
    zt_plan_free(&pl);
    qsort(o, (size_t)group, sizeof *o, by_elements);
    int want[10] = {0, world - 1}, k = 2;
    for (int s = 0; s < group && k < 10; s++) want[k++] = o[s].rank; /* shard index = rank in group 0 */
    free(o);
    for (int i = 0; i < k && n < cap; i++) {
        bool dup = false;
        for (int j = 0; j < n; j++) dup |= out[j] == want[i];
        if (!dup) out[n++] = want[i];
    }
    return n;
}

/* The shard group whose pieces decide which ranks hold the most: hybrid's S, ddp's 1, the world. */
static int strategy_group(const zt_engine_options *o, int world) {
    return o->strategy == ZT_STRATEGY_HYBRID ? o->hybrid_shard_size : o->strategy == ZT_STRATEGY_DDP ? 1 : world;
}

int zt_estimate_peak(const zt_model *m, const zt_engine_options *o, const zt_memory_plan_options *po, int world,
                     zt_memory_plan *out, zt_error *err) {
    int ranks[64], n = zt_estimate_ranks(m, world, strategy_group(o, world), ranks, 64);
    memset(out, 0, sizeof *out);
    for (int k = 0; k < n; k++) {
        zt_memory_plan p;
        int rc = zt_memory_plan_compute(m, o, po, world, ranks[k], &p, err);
        if (rc) return zt_error_prefix(err, "%s", zt_strategy_name(o->strategy));
        if (k == 0 || p.peak_total > out->peak_total) *out = p;
    }
    return ZT_OK;
}

/* The model's experts as they came in (each strategy's plan stores or keeps them whole as the
 * engine would: zt_memory_experts_for), so that a run leaves the model as it found it */
static void experts_back(zt_model *m, bool were_local) {
    zt_error ignore;
    if (were_local && !zt_model_experts_local(m)) zt_model_store_experts(m, zt_model_ep_parts(m), 0, &ignore);
    else if (!were_local) zt_model_whole_experts(m);
}

static int estimate_columns(const zt_estimate_request *rq, zt_estimate *out, zt_error *err) {
    memset(out, 0, sizeof *out);
    int ranks[64];
    for (int s = 0; s < ZT_EST_STRATEGIES; s++) {
        zt_estimate_column *col = &out->col[s];
        zt_engine_options o = rq->opt;
        o.strategy = (zt_strategy)s;
        col->strategy = o.strategy;
        int n = zt_estimate_ranks(rq->model, rq->world, strategy_group(&o, rq->world), ranks, 64);
        if (n > out->ranks_evaluated) out->ranks_evaluated = n;
        col->min_peak = (size_t)-1;
        for (int v = 0; v < ZT_EST_VARIANTS; v++) {
            zt_engine_options ov = o;
            zt_memory_plan_options po;
            variant(rq, (zt_est_variant)v, &ov, &po);
            zt_memory_experts_for(rq->model, &ov);
            for (int k = 0; k < n; k++) {
                zt_memory_plan p;
                int rc = zt_memory_plan_compute(rq->model, &ov, &po, rq->world, ranks[k], &p, err);
                if (rc) return zt_error_prefix(err, "%s", zt_strategy_name(o.strategy));
                if (p.peak_total > col->peak[v]) { /* every plan holds something: k = 0 always lands */
                    col->peak[v] = p.peak_total;
                    if (v == ZT_EST_AS_GIVEN) col->plan = p;
                    if (v == ZT_EST_NVME) col->offload_file_bytes = p.offload_file_bytes;
                }
                if (v == ZT_EST_AS_GIVEN && p.peak_total < col->min_peak) {
                    col->min_peak = p.peak_total;
                    col->min_rank = ranks[k];
                }
            }
        }
    }
    return ZT_OK;
}

int zt_estimate_run(const zt_estimate_request *rq, zt_estimate *out, zt_error *err) {
    bool were_local = zt_model_experts_local(rq->model);
    int rc = estimate_columns(rq, out, err);
    experts_back(rq->model, were_local);
    return rc;
}
