/* llama_moe_shared.c - a mixture-of-experts block's shared expert (DeepSeek-MoE's, Qwen2-MoE's),
 * forward and backward side by side: a dense SwiGLU MLP of width Is that every token goes through,
 * added to the routed experts' output (llama_moe.c calls it last in its forward, first after the
 * combine in its backward; docs/models.md, "Shared experts").
 *
 *   ys = (silu(x·Wgᵀ) * (x·Wuᵀ))·Wdᵀ            Wg, Wu (Is,C), Wd (C,Is)
 *   out += ys                                    (DeepSeek-MoE: no gate)
 *   out += sigmoid(x·gᵀ) * ys, per token         (Qwen2-MoE's shared_expert_gate, g (1,C))
 *
 * A dense parameter: under expert parallelism every part runs it on its own tokens, and its
 * weights are sharded over the data-parallel ranks like the attention's (not stacked by expert).
 * Saved (after the routed part's, kept whole under selective checkpointing), N tokens:
 *   gate (N,Is) | up (N,Is) | h (N,Is) | with the gate: ys (N,C) | s = sigmoid(x·gᵀ) (N)
 * Scratch: dys (N,C) (forward: ys without the gate) | dh, then dgate (N,Is) | dup (N,Is) | ds (N).
 * Under bf16/fp16 compute its three Linears run as the dense MLP's (layers.h's zt_linear_*: the
 * compute copies, the block's rounded operand, h saved rounded) and its sigmoid gate in fp32, as the
 * router. Whole (as the routed experts: llama.c refuses the rest). */
#include "model/llama_moe.h"
#include "kernels/kernels.h"
#include "model/layers.h"

#include <math.h>

int zt_moe_shared_width(const zt_llama_config *c) {
    if (c->n_experts < 1) return 0;
    if (c->shared_expert_intermediate_size > 0) return c->shared_expert_intermediate_size;
    return c->n_shared_experts > 0 ? c->n_shared_experts * zt_moe_width(c) : 0;
}

typedef struct shared_saved {
    float *gate, *up;
    void *h; /* the down product's operand: rounded under lp compute */
    float *ys, *s;
} shared_saved;

static size_t shared_layout(const zt_llama_config *c, size_t N, int lp_kind, float *base, shared_saved *s) {
    size_t Is = (size_t)zt_moe_shared_width(c), C = (size_t)c->n_embd;
    bool gated = c->shared_expert_gate;
    size_t floats[] = {zt_fp32_floats(N * Is), zt_fp32_floats(N * Is), matmul_saved_input_floats(lp_kind, N * Is),
                       gated ? zt_fp32_floats(N * C) : 0, gated ? zt_fp32_floats(N) : 0};
    float *ptrs[5];
    size_t off = 0;
    for (int i = 0; i < 5; i++) {
        ptrs[i] = base && floats[i] ? base + off : NULL;
        off += floats[i];
    }
    *s = (shared_saved){ptrs[0], ptrs[1], ptrs[2], ptrs[3], ptrs[4]};
    return off;
}

size_t zt_moe_shared_saved_floats(const zt_llama_config *c, size_t N, int lp_kind) {
    shared_saved s;
    return zt_moe_shared_width(c) > 0 ? shared_layout(c, N, lp_kind, NULL, &s) : 0;
}

size_t zt_moe_shared_scratch_floats(const zt_llama_config *c, size_t N) {
    size_t Is = (size_t)zt_moe_shared_width(c), C = (size_t)c->n_embd;
    return Is ? N * C + 2 * N * Is + N : 0;
}

void zt_moe_shared_forward(const zt_unit *u, const zt_unit_args *a, const zt_moe_params *pk, float *saved,
                           const void *xop, const float *x, float *out, float *scratch) {
    const zt_llama_config *c = u->model_cfg;
    int N = a->batch->B * a->batch->T, C = c->n_embd, Is = zt_moe_shared_width(c);
    if (Is < 1) return;
    float *const *p = a->params;
    shared_saved s;
    shared_layout(c, (size_t)N, a->lp_kind, saved, &s);
    float *ys = s.ys ? s.ys : scratch;
    /* the operands already in the compute dtype: nothing left to round (inp NULL under lp compute) */
    const float *xin = a->lp_kind ? NULL : x, *hin = a->lp_kind ? NULL : s.h;
    zt_linear_forward(u, a, pk->shared_gate, s.gate, (void *)xop, xin, NULL, N, C, Is);
    zt_linear_forward(u, a, pk->shared_up, s.up, (void *)xop, xin, NULL, N, C, Is);
    swiglu_forward_to(s.h, a->lp_kind, s.gate, s.up, (size_t)N * Is);
    zt_linear_forward(u, a, pk->shared_down, ys, s.h, hin, NULL, N, Is, C);
    if (!c->shared_expert_gate) {
        residual_forward(out, out, ys, (size_t)N * C);
        return;
    }
    matmul_forward(s.s, x, p[pk->shared_route], NULL, N, C, 1);
    for (int n = 0; n < N; n++) {
        float sg = 1.0f / (1.0f + expf(-s.s[n]));
        s.s[n] = sg;
        float *o = out + (size_t)n * C;
        const float *y = ys + (size_t)n * C;
        for (int i = 0; i < C; i++) o[i] += sg * y[i];
    }
}

void zt_moe_shared_backward(const zt_unit *u, const zt_unit_args *a, const zt_moe_params *pk, float *saved,
                            const void *xop, const float *x, const float *dout, float *dx, float *scratch) {
    const zt_llama_config *c = u->model_cfg;
    int N = a->batch->B * a->batch->T, C = c->n_embd, Is = zt_moe_shared_width(c);
    if (Is < 1) return;
    float *const *p = a->params, *const *g = a->grads;
    shared_saved s;
    shared_layout(c, (size_t)N, a->lp_kind, saved, &s);
    float *dys = scratch, *dgate = dys + (size_t)N * C, *dup = dgate + (size_t)N * Is, *ds = dup + (size_t)N * Is;
    const float *dy = dout;
    if (c->shared_expert_gate) { /* out += s·ys: d ys = s·dout, d logit = s(1-s)·(dout·ys) */
        for (int n = 0; n < N; n++) {
            const float *d = dout + (size_t)n * C, *y = s.ys + (size_t)n * C;
            float sg = s.s[n], dot = 0.0f;
            float *o = dys + (size_t)n * C;
            for (int i = 0; i < C; i++) {
                dot += d[i] * y[i];
                o[i] = sg * d[i];
            }
            ds[n] = dot * sg * (1.0f - sg);
        }
        matmul_backward(dx, g[pk->shared_route], NULL, ds, x, p[pk->shared_route], N, C, 1, ZT_MM_DINP_ADD);
        dy = dys;
    }
    /* ys = h·Wdᵀ; h = silu(gate)·up; gate = x·Wgᵀ, up = x·Wuᵀ */
    zt_linear_backward(u, a, pk->shared_down, dgate, g[pk->shared_down], NULL, dy, s.h, N, Is, C, false);
    swiglu_backward(dgate, dup, dgate, s.gate, s.up, (size_t)N * Is);
    zt_linear_backward(u, a, pk->shared_gate, dx, g[pk->shared_gate], NULL, dgate, xop, N, C, Is, true);
    zt_linear_backward(u, a, pk->shared_up, dx, g[pk->shared_up], NULL, dup, xop, N, C, Is, true);
}
