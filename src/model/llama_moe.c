/* llama_moe.c - the sparse feed-forward of a Llama mixture-of-experts block (Mixtral's), forward
 * and backward side by side; llama.c's block runs it after its post-attention RMSNorm in place of
 * the dense MLP (docs/models.md, "Mixture of experts").
 *
 *   logits = x·Wrᵀ (E per token); p = softmax; the top-k experts and their weights w (renormalized
 *   to sum 1 with norm_topk_prob); the chosen (token, expert) slots sorted by expert, then token
 *   (dropless; or each expert's first `capacity` tokens, the rest dropped and counted); each
 *   expert's rows xp through its SwiGLU MLP: y = (silu(xp·W1ᵀ) * (xp·W3ᵀ))·W2ᵀ, one grouped product
 *   per weight over the experts' variable row counts; out_t = sum_j w_tj y(t, j) in top-k order.
 *   Router losses, added to the micro-batch's loss through zt_unit_args.aux_loss:
 *   router_aux_loss_coef · E·sum_e f_e·P_e + router_z_loss_coef · mean_t logsumexp_t²
 *   (kernels/moe_router.c). Each MoE block's losses count on their own (summed over the layers).
 * Saved (kept whole under selective checkpointing), N tokens, R rows at most: N·k (or E x the
 * capacity) and each expert's padding to whole tiles of ROW_TILE rows:
 *   probs (N,E) | lse (N) | w (N,k) | idx (N,k) | counts (E) | offsets (E+1) | order (R) |
 *   row_of (N·k) | xp (R,C) | gate (R,I) | up (R,I) | h (R,I) | y (R,C)
 * Scratch: logits, then d logits (N,E) | dw (N,k) | with a gated shared expert: its dot dout·ys (N) |
 *   dy (R,C)
 * Scratch with experts on every part: ... | dxp (R,C) | dgate (R,I) | dup (R,I).
 * Under bf16/fp16 compute (docs/precision.md) the router stays fp32 (its Linear on the fp32 master,
 * or bf16-low's fp32 view, over the rounded operand widened; softmax, top-k, losses fp32: Megatron's
 * moe_router_dtype fp32, HF Mixtral's softmax in fp32); the experts' products run as the dense
 * Linears' (matmul_lp.c: compute copies, rounded operands, fp32 accumulation) and xp and h are saved
 * as the rounded operand, gate, up and y in fp32 (the dense block's rule: an activation only
 * products read is stored rounded; SwiGLU's backward and the combine read fp32). Context
 * parallelism: every part routes its own positions; the router losses are the whole sequences'
 * (cp_counts below). Tensor parallelism (Megatron's expert tensor parallelism):
 * each part holds I/P columns of every expert (w1, w3 column-parallel in blocks of one expert, w2
 * row-parallel: src/shard/tp_plans.c) and runs the router and the routing whole, the same on every
 * part; its y rows are its columns' share, so the output (after the combine and the shared
 * expert's share), the top-k weights' gradient dout·y (with the shared expert gate's dout·ys) and
 * the input gradient of the experts and the shared expert are summed over the parts (three sums of
 * the group, in its fixed order), and the router's input gradient (and the shared expert gate's)
 * is added after the last, once. Sequence parallelism (Megatron's, with tp): the block gathers the
 * norm's rows before and hands over whole tokens (x, xop, dout: llama.c), so every part routes the
 * same N tokens as under tp alone (the router losses and counters count each token once, as
 * there); the output's and the input gradient's sums are reduce-scatters to the part's rows, and
 * the router's input gradient is added on those rows only (zt_moe_whole_backward).
 * Expert parallelism (zt_unit.ep_parts > 1): the experts' products run on the parts that hold
 * them (llama_moe_ep.c), the rest here as above; both at once compose (each tensor-parallel part
 * dispatches among the ranks of its own part, comm/mesh.c).
 * Shared experts (llama_moe_shared.c: a dense SwiGLU MLP on every token, its share added to out
 * before the parts' sum): their saved floats after all of the above, their scratch after the
 * routed part's; cut under tensor parallelism as the dense MLP.
 */
#include "model/llama_moe.h"
#include "kernels/kernels.h"
#include "model/layers.h"
#include "core/fault.h"

#include <math.h>
#include <string.h>

const void *zt_moe_weight(const zt_unit_args *a, int k) {
    return a->lp_kind ? a->params_lp[k] : (const void *)a->params[k];
}

int zt_moe_width(const zt_llama_config *c) {
    return c->moe_intermediate_size > 0 ? c->moe_intermediate_size : c->intermediate_size;
}

int zt_moe_part_width(const zt_unit *u) { return zt_moe_width(u->model_cfg) / zt_unit_parts(u); }

int zt_moe_capacity(const zt_llama_config *c, int N) {
    if (!(c->capacity_factor > 0.0f)) return N;
    double cap = ceil((double)N * c->n_experts_per_token / c->n_experts * c->capacity_factor);
    return cap < N ? (int)cap : N;
}

int zt_moe_row_tile(int lp_kind) { return lp_kind ? ZT_MOE_ROW_TILE_LP : 1; }

/* rows of the permuted experts' input at most: N·k, or E x the capacity when fewer, and the padding */
size_t zt_moe_max_rows(const zt_llama_config *c, size_t N, int tile) {
    size_t R = N * (size_t)c->n_experts_per_token, capped = (size_t)c->n_experts * zt_moe_capacity(c, (int)N);
    return (capped < R ? capped : R) + (size_t)c->n_experts * (size_t)(tile - 1);
}

size_t zt_moe_layout(const zt_unit *u, size_t N, int lp_kind, float *base, zt_moe_saved *s) {
    const zt_llama_config *c = u->model_cfg;
    int ep = u->ep_parts;
    int tile = zt_moe_row_tile(lp_kind);
    size_t E = (size_t)c->n_experts, k = (size_t)c->n_experts_per_token, R = zt_moe_max_rows(c, N, tile);
    size_t C = (size_t)c->n_embd, I = (size_t)zt_moe_part_width(u);
    /* the experts' rows here: the part's own (R), or what every part may send this one */
    size_t G = ep > 1 ? (size_t)ep * zt_moe_ep_rows(c, N, ep, tile) : R, El = E / (size_t)(ep > 1 ? ep : 1);
    /* floats of each buffer: int32 and float arrays alike 4 bytes an element; the products' operands
     * xp, h, xr in the compute dtype (the rounded operand); the shared expert's block last */
    size_t floats[] = {zt_fp32_floats(N * E), zt_fp32_floats(N), zt_fp32_floats(N * k), zt_fp32_floats(N * k),
                       zt_fp32_floats(E), zt_fp32_floats(E + 1), zt_fp32_floats(R), zt_fp32_floats(N * k),
                       matmul_saved_input_floats(lp_kind, R * C), zt_fp32_floats(G * I), zt_fp32_floats(G * I),
                       matmul_saved_input_floats(lp_kind, G * I), zt_fp32_floats(R * C),
                       ep > 1 ? matmul_saved_input_floats(lp_kind, G * C) : 0,
                       ep > 1 ? zt_fp32_floats((size_t)ep * (El + 1)) : 0, zt_moe_shared_saved_floats(u, N, lp_kind),
                       u->cp_parts > 1 ? zt_fp32_floats(E) : 0};
    void *ptrs[17];
    size_t off = 0;
    for (int i = 0; i < 17; i++) {
        ptrs[i] = base && floats[i] ? base + off : NULL;
        off += floats[i];
    }
    *s = (zt_moe_saved){.probs = ptrs[0], .lse = ptrs[1], .w = ptrs[2], .idx = ptrs[3], .counts = ptrs[4],
                        .offsets = ptrs[5], .order = ptrs[6], .row_of = ptrs[7], .xp = ptrs[8], .gate = ptrs[9],
                        .up = ptrs[10], .h = ptrs[11], .y = ptrs[12], .xr = ptrs[13], .roff = ptrs[14],
                        .shared = ptrs[15], .counts_all = ptrs[16]};
    return off;
}

size_t zt_moe_saved_floats(const zt_unit *u, size_t N, int lp_kind) {
    zt_moe_saved s;
    return zt_moe_layout(u, N, lp_kind, NULL, &s);
}

/* rnd(dout) of the experts' widest product: their rows (R at most; a source's under expert
 * parallelism, fewer) times the widest output (I or C), or the shared expert's N rows */
size_t zt_moe_staging_bytes(const zt_unit *u, size_t N, int lp_kind) {
    const zt_llama_config *c = u->model_cfg;
    size_t C = (size_t)c->n_embd, I = (size_t)zt_moe_part_width(u), Is = (size_t)zt_moe_shared_part_width(u);
    size_t routed = zt_moe_max_rows(c, N, zt_moe_row_tile(lp_kind)) * (I > C ? I : C), shared = N * (Is > C ? Is : C);
    return lp_kind ? matmul_lp_staging_bytes((zt_lp_kind)lp_kind, 1, (int)(routed > shared ? routed : shared)) : 0;
}

int zt_llama_moe_tp_sum_floats(const zt_llama_config *c) {
    return c->n_experts > 0 ? c->n_experts_per_token + (zt_moe_shared_gated(c) ? 1 : 0) : 0;
}

/* dw (N,k), and after it the gated shared expert's dot dout·ys (N): summed over the parts at once */
static size_t dw_floats(const zt_llama_config *c, size_t N) { return N * (size_t)zt_llama_moe_tp_sum_floats(c); }

/* dlogits (N,E) | dw (dw_floats) | dy (R,C) | dxp (R,C), then dgate, dup (R,I) or expert parallelism's;
 * R for the wider row tile (the scratch is the same for every compute kind) */
static size_t scratch_rows(const zt_llama_config *c, size_t N) { return zt_moe_max_rows(c, N, ZT_MOE_ROW_TILE_LP); }
static size_t routed_scratch_floats(const zt_unit *u, size_t N) {
    const zt_llama_config *c = u->model_cfg;
    size_t E = (size_t)c->n_experts, R = scratch_rows(c, N);
    size_t C = (size_t)c->n_embd, I = (size_t)zt_moe_part_width(u);
    return N * E + dw_floats(c, N) + 2 * R * C + (u->ep_parts > 1 ? zt_moe_ep_scratch_floats(u, N) : 2 * R * I);
}

/* ... then the shared expert's (llama_moe_shared.c) */
size_t zt_moe_scratch_floats(const zt_unit *u, size_t N) {
    return routed_scratch_floats(u, N) + zt_moe_shared_scratch_floats(u, N);
}

void zt_moe_whole_backward(const zt_unit *u, const zt_unit_args *a, float *dx, float *dW, const float *dy,
                           const float *x, const float *W, int OC) {
    const zt_llama_config *c = u->model_cfg;
    int B = a->batch->B, T = a->batch->T, C = c->n_embd, t0;
    matmul_backward(NULL, dW, NULL, dy, x, W, B * T, C, OC, 0);
    /* a row-wise kernel, not a GEMM: a part's rows get the bits the whole's would (moe_router_dinp) */
    int count = zt_unit_rows(u, a, &t0) / B; /* dx: (B, count) rows, dy: (B, T); without sp count = T */
    for (int b = 0; b < B; b++)
        moe_router_dinp(dx + (size_t)b * count * C, dy + ((size_t)b * T + t0) * OC, OC, W, count, C, OC);
}

/* Context parallelism: the router losses are the whole sequences' (one process's; Megatron-LM sums the
 * load over its tp x cp group too): each part's tokens take the whole's load (the experts' counts
 * summed over the parts, in the group's fixed tree: exact, as floats below 2^24) and its token count
 * (N x parts), so each part's losses are its share of the whole's and its gradient the whole's rows. */
static int cp_of(const zt_unit *u) { return u->cp_parts > 1 ? u->cp_parts : 1; }
static const int32_t *load_of(const zt_unit *u, const zt_moe_saved *s) {
    return u->cp_parts > 1 ? s->counts_all : s->counts;
}
/* stage: (cp_parts + 2) x E floats of scratch */
static int cp_counts(const zt_unit *u, const zt_unit_args *a, const zt_moe_saved *s, int E, float *stage,
                     zt_error *err) {
    float *mine = stage + (size_t)u->cp_parts * E, *all = mine + E;
    const float *send[ZT_CP_MAX_PARTS];
    for (int e = 0; e < E; e++) mine[e] = (float)s->counts[e];
    for (int p = 0; p < u->cp_parts; p++) send[p] = mine;
    int rc = a->group->cp_reduce_exchange(a->group, send, all, (size_t)E, stage, "the experts' load over the "
                                          "context-parallel parts", err);
    for (int e = 0; e < E && !rc; e++) s->counts_all[e] = (int32_t)all[e];
    return rc;
}

int zt_moe_forward(const zt_unit *u, const zt_unit_args *a, const zt_moe_params *pk, float *saved, const void *xop,
                   const float *x, float *out, float *scratch, zt_error *err) {
    const zt_llama_config *c = u->model_cfg;
    int N = a->batch->B * a->batch->T, E = c->n_experts, k = c->n_experts_per_token, C = c->n_embd;
    int I = zt_moe_part_width(u);
    float *const *p = a->params;
    zt_moe_saved s;
    int ep = u->ep_parts > 1 ? u->ep_parts : 1, kind = a->lp_kind;
    zt_moe_layout(u, (size_t)N, kind, saved, &s);
    float *logits = scratch; /* the router in fp32 under every compute precision (docs/precision.md) */
    matmul_forward(logits, x, p[pk->router], NULL, N, C, E);
    if (zt_fault_armed()) { /* ZT_FAULT nan:at=router / inf:at=router: this layer's first logit */
        zt_fault_kind fk = zt_fault_point(ZT_FAULT_AT_ROUTER, NULL);
        if (fk == ZT_FAULT_NAN || fk == ZT_FAULT_INF) logits[0] = fk == ZT_FAULT_NAN ? NAN : INFINITY;
    }
    /* a non-finite router logit routes somewhere (the top-k always picks k experts) and reaches the
     * loss as NaN: the step guard skips the step as the non-finite policy says, and the tokens
     * counted here name this layer's router in its message (zt_moe_stats.router_nonfinite) */
    int64_t nonfinite = 0;
    for (int n = 0; n < N; n++) {
        const float *row = logits + (size_t)n * E;
        bool ok = true;
        for (int e = 0; e < E; e++) ok &= isfinite(row[e]) != 0;
        nonfinite += !ok;
    }
    moe_router_forward(s.probs, s.lse, s.idx, s.w, logits, N, E, k, c->norm_topk_prob);
    int dropped = moe_route_plan(s.counts, s.offsets, s.order, s.row_of, s.idx, N, E, k, zt_moe_capacity(c, N),
                                 zt_moe_row_tile(kind));
    int R = s.offsets[E];
    moe_gather_rows(s.xp, xop, s.order, R, k, C, kind); /* the rounded operand's rows under lp compute */
    if (ep > 1) { /* the rows to their experts' parts and the results back (llama_moe_ep.c) */
        size_t Rmax = scratch_rows(c, (size_t)N);
        int erc = zt_moe_ep_forward(u, a, pk, &s, x, scratch + (size_t)N * E + dw_floats(c, (size_t)N) + 2 * Rmax * C,
                                    err);
        if (erc) return erc;
    } else {
        moe_grouped_forward(s.gate, s.xp, zt_moe_weight(a, pk->w1), s.offsets, E, C, I, kind);
        moe_grouped_forward(s.up, s.xp, zt_moe_weight(a, pk->w3), s.offsets, E, C, I, kind);
        swiglu_forward_to(s.h, kind, s.gate, s.up, (size_t)R * I);
        moe_grouped_forward(s.y, s.h, zt_moe_weight(a, pk->w2), s.offsets, E, I, C, kind);
    }
    moe_combine_forward(out, s.y, s.w, s.row_of, N, k, C);
    /* the shared expert, every token's, added last (llama_moe_shared.c) */
    zt_moe_shared_forward(u, a, pk, s.shared, xop, x, out, scratch + routed_scratch_floats(u, (size_t)N));
    /* tensor parallelism: each part's y and ys are its columns' share of the experts' output (w2, the
     * shared down row-parallel), out their sum (the router and the routing are the same on every
     * part): the block's one sum in forward, as the dense MLP's (cut along T: this part's rows) */
    int rc = zt_unit_input_grad_sum(u, a, out, C, "block_sparse_moe output", err);
    if (rc) return rc;
    /* context parallelism: the load over the whole sequences, this part's share of their losses */
    if (u->cp_parts > 1 && (rc = cp_counts(u, a, &s, E, scratch + (size_t)N * E, err))) return rc;
    if (a->aux_loss) {
        double aux, z;
        moe_router_losses(&aux, &z, s.probs, s.lse, load_of(u, &s), N, N * cp_of(u), E);
        *a->aux_loss += (double)c->router_aux_loss_coef * aux + (double)c->router_z_loss_coef * z;
    }
    if (a->moe_counts) {
        for (int e = 0; e < E; e++) a->moe_counts[e] += s.counts[e];
        a->moe_counts[E] += dropped;
        a->moe_counts[E + 1] += nonfinite;
    }
    return ZT_OK;
}

int zt_moe_backward(const zt_unit *u, const zt_unit_args *a, const zt_moe_params *pk, float *saved, const void *xop,
                    const float *x, const float *dout, float *dx, float *scratch, zt_error *err) {
    const zt_llama_config *c = u->model_cfg;
    int N = a->batch->B * a->batch->T, E = c->n_experts, k = c->n_experts_per_token, C = c->n_embd;
    int I = zt_moe_part_width(u);
    float *const *p = a->params, *const *g = a->grads;
    zt_moe_saved s;
    int ep = u->ep_parts > 1 ? u->ep_parts : 1, kind = a->lp_kind;
    zt_moe_layout(u, (size_t)N, kind, saved, &s);
    size_t R = scratch_rows(c, (size_t)N);
    float *dlogits = scratch, *dw = dlogits + (size_t)N * E, *dot = dw + (size_t)N * k;
    float *dy = dw + dw_floats(c, (size_t)N), *dxp = dy + R * C, *dgate = dxp + R * C, *dup = dgate + R * I;
    float *shared = scratch + routed_scratch_floats(u, (size_t)N);
    int rows = s.offsets[E];
    /* everything that reads dout first (dx may be dout): the combine's, the shared expert's output side */
    moe_combine_backward(dy, dw, dout, s.y, s.w, s.row_of, s.order, rows, N, k, C);
    zt_moe_shared_backward(u, a, pk, s.shared, dout, dot, shared);
    /* tensor parallelism: the top-k weights' gradient dout·y from every part's share of y, and the
     * shared expert gate's dout·ys beside it (one sum) */
    int rc = zt_unit_sum(u, a, dw, dw_floats(c, (size_t)N), "block_sparse_moe top-k weights' gradient", err);
    if (rc) return rc;
    if (ep > 1) { /* dy to the experts' parts, their d xp back (llama_moe_ep.c) */
        if ((rc = zt_moe_ep_backward(u, a, pk, &s, dy, dxp, dgate, err))) return rc;
    } else {
        /* y = h·W2ᵀ; h = silu(gate)·up; gate = xp·W1ᵀ, up = xp·W3ᵀ */
        /* (the experts' gradients assigned where the engine left them unset: llama.c's assigns_grad) */
        moe_grouped_backward(dgate, g[pk->w2], dy, s.h, zt_moe_weight(a, pk->w2), s.offsets, E, I, C,
                             zt_grad_assign_flag(a, pk->w2, g[pk->w2]), kind, a->staging);
        swiglu_backward(dgate, dup, dgate, s.gate, s.up, (size_t)rows * I);
        moe_grouped_backward(dxp, g[pk->w1], dgate, s.xp, zt_moe_weight(a, pk->w1), s.offsets, E, C, I,
                             zt_grad_assign_flag(a, pk->w1, g[pk->w1]), kind, a->staging);
        moe_grouped_backward(dxp, g[pk->w3], dup, s.xp, zt_moe_weight(a, pk->w3), s.offsets, E, C, I,
                             ZT_MM_DINP_ADD | zt_grad_assign_flag(a, pk->w3, g[pk->w3]), kind, a->staging);
    }
    moe_scatter_rows(dx, dxp, s.row_of, N, k, C);
    zt_moe_shared_backward_input(u, a, pk, xop, dx, shared);
    /* tensor parallelism: the input gradient of the experts and the shared expert is every part's
     * columns' share (cut along T: this part's rows of the sum); the router's and the shared
     * expert gate's (the same on every part) are added once, after the sum */
    if ((rc = zt_unit_input_grad_sum(u, a, dx, C, "block_sparse_moe input gradient", err))) return rc;
    /* the router: the top-k weights' gradient and its losses', through the softmax, then its Linear */
    moe_router_backward(dlogits, dw, s.probs, s.lse, s.w, s.idx, load_of(u, &s), N, N * cp_of(u), E, k, c->norm_topk_prob,
                        c->router_aux_loss_coef * a->aux_dloss, c->router_z_loss_coef * a->aux_dloss);
    zt_moe_whole_backward(u, a, dx, g[pk->router], dlogits, x, p[pk->router], E);
    zt_moe_shared_gate_backward(u, a, pk, s.shared, x, dot, dx);
    return ZT_OK;
}
