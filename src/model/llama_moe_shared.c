/* llama_moe_shared.c - a mixture-of-experts block's shared expert (DeepSeek-MoE's, Qwen2-MoE's),
 * forward and backward side by side: a dense SwiGLU MLP of width Is that every token goes through,
 * added to the routed experts' output (llama_moe.c calls its forward before the block's sum of the
 * parts, and its backward in three steps around the sums; docs/models.md, "Shared experts").
 *
 *   ys = (silu(x·Wgᵀ) * (x·Wuᵀ))·Wdᵀ            Wg, Wu (Is,C), Wd (C,Is)
 *   out += ys                                    (DeepSeek-MoE: no gate)
 *   out += sigmoid(x·gᵀ) * ys, per token         (Qwen2-MoE's shared_expert_gate, g (1,C))
 *
 * A dense parameter: under expert parallelism every part runs it on its own tokens, and its
 * weights are sharded over the data-parallel ranks like the attention's (not stacked by expert).
 * Tensor parallelism cuts it as the dense MLP (src/shard/tp_plans.c): Wg, Wu column-parallel, Wd
 * row-parallel, so a part holds Is/P columns (zt_moe_shared_part_width) and its ys is its columns'
 * share; out gets the share (times the gate, which is whole: the same on every part) before the
 * block's one sum of the parts, and its input gradient (Wg's and Wu's) before the block's sum of
 * the input gradient; the gate's input gradient is added after that sum, once, from the dot
 * dout·ys summed over the parts with the top-k weights' gradient (one collective, llama_moe.c).
 * Saved (after the routed part's, kept whole under selective checkpointing), N tokens, Ip = Is/P:
 *   gate (N,Ip) | up (N,Ip) | h (N,Ip) | with the gate: ys (N,C) (this part's share) | s = sigmoid(x·gᵀ) (N)
 * Scratch: dys (N,C) (forward: ys without the gate) | dh, then dgate (N,Ip) | dup (N,Ip).
 * Under bf16/fp16 compute its three Linears run as the dense MLP's (layers.h's zt_linear_*: the
 * compute copies, the block's rounded operand, h saved rounded) and its sigmoid gate in fp32, as the
 * router. */
#include "model/llama_moe.h"
#include "kernels/kernels.h"
#include "model/layers.h"

#include <math.h>

int zt_moe_shared_width(const zt_llama_config *c) {
    if (c->n_experts < 1) return 0;
    if (c->shared_expert_intermediate_size > 0) return c->shared_expert_intermediate_size;
    return c->n_shared_experts > 0 ? c->n_shared_experts * zt_moe_width(c) : 0;
}

int zt_moe_shared_part_width(const zt_unit *u) { return zt_moe_shared_width(u->model_cfg) / zt_unit_parts(u); }

bool zt_moe_shared_gated(const zt_llama_config *c) { return c->shared_expert_gate && zt_moe_shared_width(c) > 0; }

typedef struct shared_saved {
    float *gate, *up;
    void *h; /* the down product's operand: rounded under lp compute */
    float *ys, *s;
} shared_saved;

static size_t shared_layout(const zt_unit *u, size_t N, int lp_kind, float *base, shared_saved *s) {
    const zt_llama_config *c = u->model_cfg;
    size_t Ip = (size_t)zt_moe_shared_part_width(u), C = (size_t)c->n_embd;
    bool gated = c->shared_expert_gate;
    size_t floats[] = {zt_fp32_floats(N * Ip), zt_fp32_floats(N * Ip), matmul_saved_input_floats(lp_kind, N * Ip),
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

size_t zt_moe_shared_saved_floats(const zt_unit *u, size_t N, int lp_kind) {
    shared_saved s;
    return zt_moe_shared_width(u->model_cfg) > 0 ? shared_layout(u, N, lp_kind, NULL, &s) : 0;
}

size_t zt_moe_shared_scratch_floats(const zt_unit *u, size_t N) {
    size_t Ip = (size_t)zt_moe_shared_part_width(u), C = (size_t)((const zt_llama_config *)u->model_cfg)->n_embd;
    return Ip ? N * C + 2 * N * Ip : 0;
}

void zt_moe_shared_forward(const zt_unit *u, const zt_unit_args *a, const zt_moe_params *pk, float *saved,
                           const void *xop, const float *x, float *out, float *scratch) {
    const zt_llama_config *c = u->model_cfg;
    int N = a->batch->B * a->batch->T, C = c->n_embd, Ip = zt_moe_shared_part_width(u);
    if (Ip < 1) return;
    float *const *p = a->params;
    shared_saved s;
    shared_layout(u, (size_t)N, a->lp_kind, saved, &s);
    float *ys = s.ys ? s.ys : scratch;
    /* the operands already in the compute dtype: nothing left to round (inp NULL under lp compute) */
    const float *xin = a->lp_kind ? NULL : x, *hin = a->lp_kind ? NULL : s.h;
    zt_linear_forward(u, a, pk->shared_gate, s.gate, (void *)xop, xin, NULL, N, C, Ip);
    zt_linear_forward(u, a, pk->shared_up, s.up, (void *)xop, xin, NULL, N, C, Ip);
    swiglu_forward_to(s.h, a->lp_kind, s.gate, s.up, (size_t)N * Ip);
    zt_linear_forward(u, a, pk->shared_down, ys, s.h, hin, NULL, N, Ip, C); /* cut: this part's share */
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

/* out += s·ys: d ys = s·dout, and the gate's logit gradient s(1-s)·(dout·ys), from the dot dout·ys
 * (dot (N): this part's share, summed over the parts by the caller) */
void zt_moe_shared_backward(const zt_unit *u, const zt_unit_args *a, const zt_moe_params *pk, float *saved,
                            const float *dout, float *dot, float *scratch) {
    const zt_llama_config *c = u->model_cfg;
    int N = a->batch->B * a->batch->T, C = c->n_embd, Ip = zt_moe_shared_part_width(u);
    if (Ip < 1) return;
    shared_saved s;
    shared_layout(u, (size_t)N, a->lp_kind, saved, &s);
    float *dys = scratch, *dgate = dys + (size_t)N * C, *dup = dgate + (size_t)N * Ip;
    const float *dy = dout;
    if (c->shared_expert_gate) {
        for (int n = 0; n < N; n++) {
            const float *d = dout + (size_t)n * C, *y = s.ys + (size_t)n * C;
            float sg = s.s[n], acc = 0.0f;
            float *o = dys + (size_t)n * C;
            for (int i = 0; i < C; i++) {
                acc += d[i] * y[i];
                o[i] = sg * d[i];
            }
            dot[n] = acc;
        }
        dy = dys;
    }
    /* ys = h·Wdᵀ; h = silu(gate)·up */
    zt_linear_backward(u, a, pk->shared_down, dgate, a->grads[pk->shared_down], NULL, dy, s.h, N, Ip, C, false);
    swiglu_backward(dgate, dup, dgate, s.gate, s.up, (size_t)N * Ip);
}

/* gate = x·Wgᵀ, up = x·Wuᵀ: their input gradients added into dx (N,C), this part's columns' share */
void zt_moe_shared_backward_input(const zt_unit *u, const zt_unit_args *a, const zt_moe_params *pk, const void *xop,
                                  float *dx, float *scratch) {
    const zt_llama_config *c = u->model_cfg;
    int N = a->batch->B * a->batch->T, C = c->n_embd, Ip = zt_moe_shared_part_width(u);
    if (Ip < 1) return;
    float *const *g = a->grads, *dgate = scratch + (size_t)N * C, *dup = dgate + (size_t)N * Ip;
    zt_linear_backward(u, a, pk->shared_gate, dx, g[pk->shared_gate], NULL, dgate, xop, N, C, Ip, true);
    zt_linear_backward(u, a, pk->shared_up, dx, g[pk->shared_up], NULL, dup, xop, N, C, Ip, true);
}

/* the sigmoid gate's Linear g (1,C), whole on every part: d logit = s(1-s)·dot, in place in dot (N,
 * summed over the parts), then its gradients (llama_moe.c's zt_moe_whole_backward: dx's rows) */
void zt_moe_shared_gate_backward(const zt_unit *u, const zt_unit_args *a, const zt_moe_params *pk, float *saved,
                                 const float *x, float *dot, float *dx) {
    const zt_llama_config *c = u->model_cfg;
    int N = a->batch->B * a->batch->T;
    if (!zt_moe_shared_gated(c)) return;
    shared_saved s;
    shared_layout(u, (size_t)N, a->lp_kind, saved, &s);
    for (int n = 0; n < N; n++) dot[n] = dot[n] * s.s[n] * (1.0f - s.s[n]);
    zt_moe_whole_backward(u, a, dx, a->grads[pk->shared_route], dot, x, a->params[pk->shared_route], 1);
}
