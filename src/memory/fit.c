/* fit.c - the largest model of a family shape that fits a machine (see fit.h). Each probe builds
 * the model (a table of shapes: nothing is allocated for its parameters) and plans ranks 0 and
 * world-1 (the uneven shards put the most on one of them, estimate.c's rule for small worlds
 * checked on the presets), taking the larger. */
#include "memory/fit.h"

#include <string.h>

static void set_layers(zt_model_spec *s, int L) {
    if (s->arch == ZT_ARCH_LLAMA) s->llama.n_layer = L;
    else s->gpt2.n_layer = L;
}

/* *fits for L layers; r filled with the plan's numbers. */
static int probe(const zt_model_spec *base, int L, const zt_engine_options *o, const zt_memory_plan_options *po,
                 int world, size_t ram, size_t overhead, size_t disk, bool *fits, zt_fit_result *r, zt_error *err) {
    zt_model_spec s = *base;
    set_layers(&s, L);
    zt_model *m = NULL;
    int rc = zt_model_spec_create(&s, &m, err);
    if (rc) return rc;
    size_t peak = 0, files = 0;
    int ranks[2] = {0, world - 1};
    for (int k = 0; k < (world > 1 ? 2 : 1) && !rc; k++) {
        zt_memory_plan p;
        rc = zt_memory_plan_compute(m, o, po, world, ranks[k], &p, err);
        if (!rc && p.peak_total > peak) peak = p.peak_total;
        if (!rc && p.offload_file_bytes > files) files = p.offload_file_bytes;
    }
    if (!rc) {
        *fits = peak + overhead <= ram && files <= disk;
        *r = (zt_fit_result){.n_layer = L, .params = zt_model_numel(m), .peak = peak, .file_bytes = files};
    }
    zt_model_free(m);
    return rc;
}

int zt_fit_layers(const zt_model_spec *base, const zt_engine_options *o, const zt_memory_plan_options *po, int world,
                  size_t ram, size_t overhead, size_t disk, int max_layers, zt_fit_result *out, zt_error *err) {
    memset(out, 0, sizeof *out);
    /* gallop up (1, 2, 4, ...) to the first size that does not fit, then bisect: probes cost
     * O(layers), so small answers stay cheap. Invariant: lo fits (or is 0), hi + 1 does not. */
    int lo = 0, hi = max_layers;
    for (int L = 1; L <= max_layers; L *= 2) {
        bool fits = false;
        zt_fit_result r;
        int rc = probe(base, L, o, po, world, ram, overhead, disk, &fits, &r, err);
        if (rc) return rc;
        if (!fits) {
            hi = L - 1;
            break;
        }
        lo = L, *out = r;
        if (L > max_layers / 2 && L < max_layers) L = max_layers / 2; /* next: max_layers itself */
    }
    while (lo < hi) {
        int mid = lo + (hi - lo + 1) / 2;
        bool fits = false;
        zt_fit_result r;
        int rc = probe(base, mid, o, po, world, ram, overhead, disk, &fits, &r, err);
        if (rc) return rc;
        if (fits) lo = mid, *out = r;
        else hi = mid - 1;
    }
    out->capped = lo == max_layers && lo > 0;
    return ZT_OK;
}
