/* llama_moe_ep.c - expert parallelism of a mixture-of-experts block (DeepSpeed-MoE's, Megatron-LM's,
 * torchtitan's; docs/parallelism.md): the experts spread over ep parts, part q running experts
 * [q·El, (q+1)·El), El = E/ep, for the tokens of every part. llama_moe.c routes its own tokens and
 * gathers their rows (xp: sorted by expert, each expert's rows padded to whole tiles); here
 *
 *   forward   each part sends every part q the per-expert row counts of q's experts, then those
 *             rows (xp's contiguous range of q's experts: all-to-all, sizes first); part q runs
 *             its experts' SwiGLU over the rows of each source part s apart (its own grouped
 *             products per source), and sends each source its y rows back, into the source's y
 *             at the same places; the source combines as without experts parallel.
 *   backward  dy (combine's backward, at the source) to the experts' parts the same way; there
 *             the products' backward per source part, each source's weight gradient (a partial)
 *             in its own slot, d xp back to the source (reverse all-to-all).
 *
 * Bits: every product sees exactly the rows, the row count (padding included) and the weights it
 * sees when one process runs the ep parts' batches as micro-batches, so y and d xp are the same
 * bits. An expert's weight gradient is a sum over micro-batches that one process and ddp add in
 * the fixed pairwise tree over the global micro-batch index (engine/grads.c, comm/tree_sum.c): the
 * owner computes each source part's partial apart and adds them in that tree (tree_in_place: the
 * same sums as tree_sum.c's, lo..mid + mid..hi), never one product over the rows of all sources.
 * The parts of an ep group are consecutive data-parallel ranks (comm/mesh.h), one micro-batch
 * each, so their partials are a subtree of the ranks' tree; the owner leaves every other expert's
 * gradient zero and the data-parallel reduction over the ranks adds those zeros (x + 0 = x), which
 * puts each expert's subtrees together as one process would. With several micro-batches per rank
 * (zt_unit_args.ep_defer_fold: the engine adds a step's micro-batches on the rank before reducing)
 * the slots stay apart: the engine's tree over the micro-batches adds each source's partials in
 * slot s, as one process adds that source rank's micro-batches, and zt_moe_ep_fold adds the slots
 * at the step, before the reduction: the same tree (ranks, then each rank's micro-batches). Where
 * the engine reduces every micro-batch (zero2/zero3 with reduce_every_micro_batch) the sources'
 * sum comes first: deterministic, but another order (docs/parallelism.md).
 * The weight-gradient slots are the gradient tensor itself: its ep slices of El experts, slice s
 * for source s (the gradient arrives zeroed, as every gradient of a unit that does not assign it),
 * summed into slice 0, then moved to this part's slice q and the others zeroed again. With the
 * experts stored E/ep a part (zt_unit.ep_local, zt_model_store_experts) the weights are this
 * part's El experts and the engine hands a gradient of ep x their floats (the slots after the
 * stored gradient, shard/plan.h's grad_slots): the sum stays in slice 0, the stored one.
 *
 * Under bf16/fp16 compute the tokens go to their experts as the rounded operand (xp's rows: 2 bytes
 * an element under bf16, Megatron's and DeepSpeed's dispatch in the compute dtype), exact since
 * one process's products read those same rounded rows; so does d y (rounded at its source, as
 * one process rounds it for its products: the received rows are their staging); the results y and
 * d xp stay fp32 (the products' fp32 outputs, which the dense Linears keep fp32 too: rounding them
 * for the wire alone would make the bits depend on the ep degree).
 *
 * Saved (llama_moe.h's zt_moe_saved): xr (the rows from source s at row s·Rl, Rl =
 * zt_moe_ep_rows), roff (each source's experts' row offsets), gate/up/h over those rows; y (the
 * source's own rows' results, back from their parts).
 * Scratch: dyr (ep·Rl,C; forward: the y rows before they go back) | dxr (ep·Rl,C) | dgate (Rl,I) |
 * dup (Rl,I) | the row counts sent and received (ep·El each).
 */
#include "model/llama_moe.h"
#include "kernels/kernels.h"
#include "model/layers.h"

#include <stdio.h>
#include <string.h>

enum { MAX_PARTS = 256 };

/* rows one part sends one part at most: its tokens' slots on El experts (each expert gets a token
 * once, at most the capacity), and their padding */
size_t zt_moe_ep_rows(const zt_llama_config *c, size_t N, int ep, int tile) {
    size_t El = (size_t)c->n_experts / (size_t)ep, slots = N * (size_t)c->n_experts_per_token;
    size_t capped = El * (size_t)zt_moe_capacity(c, (int)N);
    return (capped < slots ? capped : slots) + El * (size_t)(tile - 1);
}

size_t zt_moe_ep_scratch_floats(const zt_unit *u, size_t N) {
    const zt_llama_config *c = u->model_cfg;
    int ep = u->ep_parts;
    size_t Rl = zt_moe_ep_rows(c, N, ep, ZT_MOE_ROW_TILE_LP), C = (size_t)c->n_embd, I = (size_t)zt_moe_part_width(u);
    size_t El = (size_t)c->n_experts / (size_t)ep;
    return 2 * (size_t)ep * Rl * C + 2 * Rl * I + 2 * zt_fp32_floats((size_t)ep * El);
}

typedef struct ep_scratch {
    float *dyr, *dxr, *dgate, *dup;
    int32_t *sent, *got;
} ep_scratch;

static ep_scratch scratch_of(const zt_unit *u, size_t N, int ep, float *base) {
    const zt_llama_config *c = u->model_cfg;
    size_t Rl = zt_moe_ep_rows(c, N, ep, ZT_MOE_ROW_TILE_LP), C = (size_t)c->n_embd, I = (size_t)zt_moe_part_width(u);
    size_t El = (size_t)c->n_experts / (size_t)ep;
    ep_scratch s;
    s.dyr = base;
    s.dxr = s.dyr + (size_t)ep * Rl * C;
    s.dgate = s.dxr + (size_t)ep * Rl * C;
    s.dup = s.dgate + Rl * I;
    s.sent = (int32_t *)(s.dup + Rl * I);
    s.got = (int32_t *)((float *)s.sent + zt_fp32_floats((size_t)ep * El));
    return s;
}

/* The rows of part q's experts in this part's xp (or y, dy, dxp): [offsets[q·El], offsets[(q+1)·El]) */
static size_t range_begin(const zt_moe_saved *s, int q, int El) { return (size_t)s->offsets[q * El]; }
static size_t range_rows(const zt_moe_saved *s, int q, int El) {
    return (size_t)(s->offsets[(q + 1) * El] - s->offsets[q * El]);
}

/* One all-to-all over the parts: send[p] (rows_p rows of `row` bytes) to part p, recv[p] as the
 * caller lays out; checks that exactly want[p] rows arrived. */
static int exchange_rows(const zt_unit_group *g, const void *const *send, const size_t *send_rows,
                         void *const *recv, const size_t *cap_rows, const size_t *want_rows, size_t row,
                         const char *what, zt_error *err) {
    int P = g->ep_parts > MAX_PARTS ? MAX_PARTS : g->ep_parts;
    size_t sb[MAX_PARTS] = {0}, cb[MAX_PARTS] = {0}, got[MAX_PARTS];
    for (int p = 0; p < P; p++) sb[p] = send_rows[p] * row, cb[p] = cap_rows[p] * row;
    int rc = g->ep_all_to_all(g, send, sb, recv, cb, got, what, err);
    if (rc) return rc;
    for (int p = 0; p < P; p++)
        if (got[p] != want_rows[p] * row)
            return zt_error_set(err, ZT_ERR_MISMATCH, "%s: part %d sent %zu bytes, its counts said %zu rows of %zu "
                                "bytes", what, p, got[p], want_rows[p], row);
    return ZT_OK;
}

/* the unit runs its experts over u->ep_parts parts: the engine must hand it that expert-parallel group */
static int check_group(const zt_unit *u, const zt_unit_group *g, zt_error *err) {
    int P = u->ep_parts;
    if (!g || g->ep_parts != P || !g->ep_all_to_all || g->ep_part < 0 || g->ep_part >= P || P > MAX_PARTS)
        return zt_error_set(err, ZT_ERR_INTERNAL, "unit %s: experts over %d parts without the engine's expert-parallel "
                            "group", u->name, P);
    return ZT_OK;
}

/* this part's experts' w1, w2, w3 as the products read them (the compute copies under lp compute):
 * the stored El experts, or part q's slice of the whole tensors */
static void experts_here(const zt_unit *u, const zt_unit_args *a, const zt_moe_params *pk, int q, const char **W1,
                         const char **W2, const char **W3) {
    const zt_llama_config *c = u->model_cfg;
    size_t El = (size_t)c->n_experts / (size_t)u->ep_parts;
    size_t at = u->ep_local ? 0 : (size_t)q * El * zt_moe_part_width(u) * c->n_embd; /* elements */
    at *= zt_lp_elem_bytes(a->lp_kind);
    *W1 = (const char *)zt_moe_weight(a, pk->w1) + at;
    *W2 = (const char *)zt_moe_weight(a, pk->w2) + at;
    *W3 = (const char *)zt_moe_weight(a, pk->w3) + at;
}

int zt_moe_ep_forward(const zt_unit *u, const zt_unit_args *a, const zt_moe_params *pk, const zt_moe_saved *s,
                      const float *x, float *scratch, zt_error *err) {
    (void)x;
    const zt_llama_config *c = u->model_cfg;
    const zt_unit_group *g = a->group;
    int P = u->ep_parts, E = c->n_experts, El = E / P, C = c->n_embd, I = zt_moe_part_width(u);
    size_t N = (size_t)a->batch->B * a->batch->T, Rl = zt_moe_ep_rows(c, N, P, zt_moe_row_tile(a->lp_kind));
    int rc = check_group(u, g, err);
    if (rc) return rc;
    int q = g->ep_part;
    ep_scratch w = scratch_of(u, N, P, scratch);
    char what[128];
    /* 1. each part's row counts of every part's experts (padding included) */
    const void *sp[MAX_PARTS];
    void *rp[MAX_PARTS];
    size_t sb[MAX_PARTS], cb[MAX_PARTS], got[MAX_PARTS];
    for (int p = 0; p < P; p++) {
        for (int j = 0; j < El; j++) w.sent[p * El + j] = s->offsets[p * El + j + 1] - s->offsets[p * El + j];
        sp[p] = w.sent + (size_t)p * El, rp[p] = w.got + (size_t)p * El;
        sb[p] = cb[p] = (size_t)El * sizeof(int32_t);
    }
    snprintf(what, sizeof what, "%s: experts' row counts", u->name);
    rc = g->ep_all_to_all(g, sp, sb, rp, cb, got, what, err);
    if (rc) return rc;
    size_t want[MAX_PARTS], mine[MAX_PARTS], cap[MAX_PARTS];
    for (int p = 0; p < P; p++) {
        int32_t *ro = s->roff + (size_t)p * (El + 1);
        ro[0] = 0;
        for (int j = 0; j < El; j++) ro[j + 1] = ro[j] + w.got[p * El + j];
        if ((size_t)ro[El] > Rl || got[p] != (size_t)El * sizeof(int32_t))
            return zt_error_set(err, ZT_ERR_MISMATCH, "%s: part %d sends %d rows, at most %zu fit", what, p, ro[El], Rl);
        want[p] = (size_t)ro[El];
        mine[p] = range_rows(s, p, El);
        cap[p] = Rl;
    }
    /* 2. the rows to their experts' parts (the rounded operand's bytes under lp compute) */
    int kind = a->lp_kind;
    size_t xrow = (size_t)C * zt_lp_elem_bytes(kind), hrow = (size_t)I * zt_lp_elem_bytes(kind);
    size_t frow = (size_t)C * sizeof(float);
    const void *src[MAX_PARTS];
    void *dst[MAX_PARTS];
    for (int p = 0; p < P; p++) {
        src[p] = (const char *)s->xp + range_begin(s, p, El) * xrow;
        dst[p] = (char *)s->xr + (size_t)p * Rl * xrow;
    }
    snprintf(what, sizeof what, "%s: tokens to experts", u->name);
    if ((rc = exchange_rows(g, src, mine, dst, cap, want, xrow, what, err))) return rc;
    /* 3. this part's experts over each source's rows, apart: the products one process runs */
    const char *W1, *W2, *W3;
    experts_here(u, a, pk, q, &W1, &W2, &W3);
    float *yr = w.dyr; /* forward: the y rows until they go back */
    for (int p = 0; p < P; p++) {
        const int32_t *ro = s->roff + (size_t)p * (El + 1);
        size_t base = (size_t)p * Rl;
        if (!want[p]) continue;
        void *h = (char *)s->h + base * hrow;
        moe_grouped_forward(s->gate + base * I, (char *)s->xr + base * xrow, W1, ro, El, C, I, kind);
        moe_grouped_forward(s->up + base * I, (char *)s->xr + base * xrow, W3, ro, El, C, I, kind);
        swiglu_forward_to(h, kind, s->gate + base * I, s->up + base * I, want[p] * I);
        moe_grouped_forward(yr + base * C, h, W2, ro, El, I, C, kind);
    }
    /* 4. the results back to their tokens' parts, into y where the rows came from (fp32) */
    for (int p = 0; p < P; p++) {
        src[p] = yr + (size_t)p * Rl * C;
        dst[p] = s->y + range_begin(s, p, El) * C;
    }
    snprintf(what, sizeof what, "%s: experts' results back", u->name);
    return exchange_rows(g, src, want, dst, mine, mine, frow, what, err);
}

/* b[lo] = the pairwise tree sum of b[lo .. hi) (comm/tree_sum.c's tree: (lo..mid) + (mid..hi)),
 * n floats each; the others are overwritten */
static void tree_in_place(float *const *b, int lo, int hi, size_t n) {
    if (hi - lo < 2) return;
    int mid = lo + (hi - lo) / 2;
    tree_in_place(b, lo, mid, n);
    tree_in_place(b, mid, hi, n);
    float *l = b[lo];
    const float *r = b[mid];
#pragma omp parallel for simd schedule(static) if (n > 65536)
    for (size_t i = 0; i < n; i++) l[i] += r[i];
}

/* Source part p's weight-gradient slot of unit parameter idx (n floats: El experts): slice p of the
 * whole tensor's gradient, or with the experts stored E/ep a part (zt_unit.ep_local) the stored
 * gradient for p = 0 and the engine's slots after it (zt_unit_args.grad_slots) for the others;
 * NULL when the parameter is frozen */
static float *slot_of(const zt_unit *u, float *const *grads, float *const *slots, int idx, int p, size_t n) {
    if (!grads[idx]) return NULL;
    if (!u->ep_local) return grads[idx] + (size_t)p * n;
    return p == 0 ? grads[idx] : slots && slots[idx] ? slots[idx] + (size_t)(p - 1) * n : NULL;
}

/* The slots' sum (slot s: source s's partial) into slot q (this part's experts in the tensor;
 * stored E/ep a part: slot 0, the stored gradient); the other slots zeroed */
static void fold_slots(float *const *b, int P, int q, size_t slice) {
    tree_in_place(b, 0, P, slice);
    if (q != 0) memcpy(b[q], b[0], slice * sizeof(float));
    for (int p = 0; p < P; p++)
        if (p != q) memset(b[p], 0, slice * sizeof(float));
}

void zt_moe_ep_fold(const zt_unit *u, const zt_unit_group *g, const zt_moe_params *pk, float *const *grads,
                    float *const *slots) {
    const zt_llama_config *c = u->model_cfg;
    int P = u->ep_parts, El = c->n_experts / P;
    size_t in_slice = (size_t)El * zt_moe_part_width(u) * c->n_embd;
    if (!g || P < 2 || P > MAX_PARTS) return;
    for (int k = 0; k < 3; k++) {
        int idx = k == 0 ? pk->w1 : k == 1 ? pk->w2 : pk->w3;
        float *b[MAX_PARTS] = {0};
        bool all = true;
        for (int p = 0; p < P; p++) all &= (b[p] = slot_of(u, grads, slots, idx, p, in_slice)) != NULL;
        if (all) fold_slots(b, P, u->ep_local ? 0 : g->ep_part, in_slice);
    }
}

int zt_moe_ep_backward(const zt_unit *u, const zt_unit_args *a, const zt_moe_params *pk, const zt_moe_saved *s,
                       float *dy, float *dxp, float *scratch, zt_error *err) {
    const zt_llama_config *c = u->model_cfg;
    const zt_unit_group *g = a->group;
    int P = u->ep_parts, E = c->n_experts, El = E / P, C = c->n_embd, I = zt_moe_part_width(u);
    size_t N = (size_t)a->batch->B * a->batch->T, Rl = zt_moe_ep_rows(c, N, P, zt_moe_row_tile(a->lp_kind));
    int rc = check_group(u, g, err);
    if (rc) return rc;
    int q = g->ep_part;
    ep_scratch w = scratch_of(u, N, P, scratch);
    char what[128];
    size_t want[MAX_PARTS], mine[MAX_PARTS], cap[MAX_PARTS];
    const void *src[MAX_PARTS];
    void *dst[MAX_PARTS];
    int kind = a->lp_kind;
    size_t xrow = (size_t)C * zt_lp_elem_bytes(kind), hrow = (size_t)I * zt_lp_elem_bytes(kind);
    size_t frow = (size_t)C * sizeof(float);
    /* under lp compute d y goes rounded (what the products read: one process rounds it for them
     * too), from the staging, which the products below reuse only after the exchange */
    const void *dsend = dy;
    if (kind) {
        zt_round_to_lp((zt_lp_kind)kind, a->staging, dy, (size_t)s->offsets[E] * C);
        dsend = a->staging;
    }
    for (int p = 0; p < P; p++) {
        want[p] = (size_t)s->roff[(size_t)p * (El + 1) + El];
        mine[p] = range_rows(s, p, El);
        cap[p] = Rl;
        src[p] = (const char *)dsend + range_begin(s, p, El) * xrow;
        dst[p] = (char *)w.dyr + (size_t)p * Rl * xrow;
    }
    /* 1. d y to the experts' parts (rnd(d y) under lp compute: 2 bytes an element under bf16) */
    snprintf(what, sizeof what, "%s: d results to experts", u->name);
    rc = exchange_rows(g, src, mine, dst, cap, want, xrow, what, err);
    if (rc) return rc;
    if (u->ep_local && a->grads[pk->w1] && (!a->grad_slots || !a->grad_slots[pk->w1]))
        return zt_error_set(err, ZT_ERR_INTERNAL, "unit %s: experts stored E/ep a part without the engine's gradient "
                            "slots", u->name);
    /* 2. each source's backward apart, its weight gradients in its own slot (slice p) */
    float *const *gr = a->grads;
    size_t in_slice = (size_t)El * I * C; /* w1, w3 (El·I, C); w2 (El·C, I): as many floats */
    const char *W1, *W2, *W3;
    experts_here(u, a, pk, q, &W1, &W2, &W3);
    for (int p = 0; p < P; p++) {
        const int32_t *ro = s->roff + (size_t)p * (El + 1);
        size_t base = (size_t)p * Rl;
        if (!want[p]) continue;
        void *dyr = (char *)w.dyr + base * xrow; /* rnd(d y) under lp compute: the product's staging */
        float *dxr = w.dxr + base * C;
        float *const *sl = a->grad_slots;
        const void *xr = (const char *)s->xr + base * xrow, *h = (const char *)s->h + base * hrow;
        moe_grouped_backward(w.dgate, slot_of(u, gr, sl, pk->w2, p, in_slice), kind ? NULL : dyr, h, W2, ro, El, I, C,
                             0, kind, kind ? dyr : a->staging);
        swiglu_backward(w.dgate, w.dup, w.dgate, s->gate + base * I, s->up + base * I, want[p] * I);
        moe_grouped_backward(dxr, slot_of(u, gr, sl, pk->w1, p, in_slice), w.dgate, xr, W1, ro, El, C, I, 0, kind,
                             a->staging);
        moe_grouped_backward(dxr, slot_of(u, gr, sl, pk->w3, p, in_slice), w.dup, xr, W3, ro, El, C, I,
                             ZT_MM_DINP_ADD, kind, a->staging);
    }
    /* 3. the partials in the tree over the sources, into this part's experts (with gradient
     * accumulation: after the micro-batches, zt_moe_ep_fold) */
    if (!a->ep_defer_fold) zt_moe_ep_fold(u, g, pk, gr, a->grad_slots);
    /* 4. d xp back to the tokens' parts */
    for (int p = 0; p < P; p++) {
        src[p] = w.dxr + (size_t)p * Rl * C;
        dst[p] = dxp + range_begin(s, p, El) * C;
    }
    snprintf(what, sizeof what, "%s: d tokens back", u->name);
    return exchange_rows(g, src, want, dst, mine, mine, frow, what, err);
}
