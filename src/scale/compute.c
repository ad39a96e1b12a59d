/* compute.c - per-unit forward and backward seconds of one micro-batch (compute.h has the model).
 *
 * Memory-bound bytes per token, forward, with a = bytes per activation element (4 in fp32 and on
 * cpu, whose elementwise ops run in fp32 in every mode; 2 for bf16 on GPUs), C channels:
 *   GPT-2 block   2 layernorms 4C + 2 residual adds 6C + gelu 8C                       = 18C·a
 *                 + on cpu the unfused softmax over the computed scores: 2·NH·T·f·4
 *   Llama block   2 RMSNorms 4C + 2 residual adds 6C + RoPE on q, k 2(C + KV) + SwiGLU 3I
 *   head          the final norm 2C·a + the fp32 logits written and read by the loss 2V·4
 *   embedding     the lookup written (and GPT-2's position rows read) 2C·a
 * backward: twice the forward's bytes. The GEMM operands' own traffic is in the GEMM rate.
 * A mixture's stacked experts (zt_param_desc.norm_blocks E > 1) run n·k rows (top-k) through one
 * expert's shape, not n rows through all E: the active parameters, as the model's FLOPs count them.
 * Tensor parallelism (a model cut by zt_tp_apply, tp parts): the Linears are the part's shapes as
 * they stand; the heads (attention, RoPE, the softmax on cpu), the MLP width (gelu, SwiGLU) and
 * the vocabulary (the logits, the loss) are 1/tp; the norms, residual adds and the embedding's
 * lookup stay whole (every part runs them on the whole (B, T, C): no sequence parallelism).
 * On cpu the activation (gelu, SwiGLU) and the softmax + cross-entropy are the engine's kernels
 * timed at the model's sizes instead (cpu_device.c), counted in the memory-bound part.
 * Context parallelism (zt_model_set_context_parallel, cp parts; T the whole sequence): everything
 * but attention runs on a part's n/cp tokens; attention is the part's T/cp queries against the
 * whole T keys at the same causal fraction (the load-balanced chunks, docs/parallelism.md). */
#include "scale/compute.h"
#include "memory/plan.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define ENGINE_ATT_TB 64 /* kernels/attention.c's causal row blocks */

/* Fraction of the full T x T square the attention kernel computes. */
static double causal_fraction(const zt_scale_device *d, int T) {
    if (d->causal_skip) return 0.5;
    double nb = ceil((double)T / ENGINE_ATT_TB);
    return (nb + 1.0) / (2.0 * nb);
}

/* Seconds of C(M,N) = op(A) op(B) on d, at `eff` of the peak (table devices). */
static double gemm_s(const zt_scale_device *d, double peak, double eff, int M, int N, int K, bool ta, bool tb,
                     bool bf16) {
    if (d->measured) return zt_scale_cpu_gemm_seconds(d, M, N, K, ta, tb, bf16);
    return 2.0 * M * N * K / (peak * eff);
}

void zt_scale_compute_free(zt_scale_compute *c) {
    free(c->fwd);
    free(c->bwd);
    c->fwd = c->bwd = NULL;
}

int zt_scale_compute_model(const zt_model *m, const zt_scale_device *d, int B, int T, bool bf16, zt_recompute ac,
                           zt_scale_compute *c, zt_error *err) {
    memset(c, 0, sizeof *c);
    zt_model_spec spec;
    int rc = zt_model_spec_of(m, &spec, err);
    if (rc) return rc;
    int L, NH, C, V, maxT;
    zt_model_spec_shape(&spec, &L, &NH, &C, &V, &maxT);
    c->peak = bf16 ? d->peak_bf16 : d->peak_fp32;
    if (!(c->peak > 0) || !(d->mem_bw > 0) || !(d->efficiency > 0) || !(d->attn_efficiency > 0) ||
        !(d->mem_efficiency > 0))
        return zt_error_set(err, ZT_ERR_USAGE, "device %s: no %s peak or memory bandwidth known", d->name,
                            bf16 ? "bf16" : "fp32");
    if (T < 1 || T > maxT || B < 1)
        return zt_error_set(err, ZT_ERR_USAGE, "--seq %d --micro-batch %d: the sequence must be 1..%d (%s's context)",
                            T, B, maxT, m->name);
    c->n_units = m->n_units;
    c->fwd = calloc((size_t)m->n_units, sizeof *c->fwd);
    c->bwd = calloc((size_t)m->n_units, sizeof *c->bwd);
    if (!c->fwd || !c->bwd) {
        zt_scale_compute_free(c);
        return zt_error_set(err, ZT_ERR_NOMEM, "scale model: %d units", m->n_units);
    }
    bool llama = spec.arch == ZT_ARCH_LLAMA;
    int parts = m->n_units > 0 && m->units[0].tp_parts > 1 ? m->units[0].tp_parts : 1, cp = zt_model_cp_parts(m, NULL);
    if (T % cp)
        return zt_error_set(err, ZT_ERR_USAGE, "--seq %d: context parallelism %d does not divide it", T, cp);
    int Tq = T / cp; /* this part's queries (and tokens) */
    double a = (bf16 && !d->measured) ? 2.0 : 4.0, n = (double)B * Tq, hs = (double)C / NH;
    double KV = llama ? (double)spec.llama.n_kv_head * hs : C, I = llama ? spec.llama.intermediate_size : 4.0 * C;
    /* this part's heads, key/value width, MLP width and vocabulary rows */
    NH /= parts, KV /= parts, I /= parts;
    double Vp = (double)V / parts;
    if (parts > 1 && m->units[m->n_units - 1].vocab_rows > 0) Vp = (double)m->units[m->n_units - 1].vocab_rows;
    double frac = causal_fraction(d, T);
    /* attention products per (b, head): S = Q·Kᵀ (T,T,hs) and O = P·V (T,hs,T), the computed fraction */
    double att_fwd = (double)B * NH * frac *
                     (gemm_s(d, c->peak, d->attn_efficiency, Tq, T, (int)hs, false, true, bf16) +
                      gemm_s(d, c->peak, d->attn_efficiency, Tq, (int)hs, T, false, false, bf16));
    double block_bytes = llama ? (10.0 * C + 2.0 * (hs * NH + KV) + 3.0 * I) * a
                               : (10.0 * C + 2.0 * I) * a + (d->measured ? 2.0 * NH * T * frac * 4.0 : 0);
    /* cpu: the activation and the loss are timed (they compute more than they move); their bytes
     * leave the memory-bound count. Forward + backward together, split 1:2 like the rest. */
    double act_s = 0, xent_s = 0;
    if (d->measured) {
        size_t elems = (size_t)n * (size_t)I;
        act_s = zt_scale_cpu_kernel_seconds(d, llama ? ZT_SCALE_SWIGLU : ZT_SCALE_GELU, elems, 0);
        xent_s = zt_scale_cpu_kernel_seconds(d, ZT_SCALE_XENT, (size_t)n * (size_t)Vp, (int)Vp);
        block_bytes -= (llama ? 3.0 * I : 2.0 * I) * a;
    }
    for (int u = 0; u < m->n_units; u++) {
        const zt_unit *un = &m->units[u];
        double mm_f = 0, mm_b = 0, bytes;
        bool block = un->layer >= 0, embedding = u == 0;
        if (!embedding)
            for (int k = 0; k < un->n_params; k++) {
                const zt_param_desc *p = &m->params[un->params[k]];
                if (p->ndim != 2) continue;
                int OC = (int)p->shape[0], IC = (int)p->shape[1], rows = (int)n;
                if (p->norm_blocks > 1 && llama && spec.llama.n_experts_per_token > 0) {
                    /* a mixture's stacked experts (E blocks of rows): each token's k experts, so
                     * n·k rows through one expert's shape (dropless, balanced; under expert
                     * parallelism a rank's E/ep experts take the n·k rows its ep group sends) */
                    OC /= p->norm_blocks;
                    rows = (int)n * spec.llama.n_experts_per_token;
                }
                double e = d->efficiency;
                mm_f += gemm_s(d, c->peak, e, rows, OC, IC, false, true, bf16);
                mm_b += gemm_s(d, c->peak, e, rows, IC, OC, false, false, bf16) +
                        gemm_s(d, c->peak, e, OC, IC, rows, true, false, bf16);
            }
        if (block) bytes = block_bytes;
        else if (embedding) bytes = 2.0 * C * a;
        else bytes = 2.0 * C * a + (d->measured ? 0 : 2.0 * Vp * 4.0);
        double mem_f = n * bytes / (d->mem_bw * d->mem_efficiency) + (block ? act_s : embedding ? 0 : xent_s) / 3.0;
        double att_f = block ? att_fwd : 0;
        c->fwd[u] = mm_f + att_f + mem_f;
        double re = 0;
        if (block && ac == ZT_RECOMPUTE_FULL) re = c->fwd[u];
        if (block && ac == ZT_RECOMPUTE_SELECTIVE) re = att_f;
        double att_b = (d->causal_skip ? 2.5 : 2.0) * att_f; /* flash attention recomputes the scores */
        c->bwd[u] = mm_b + att_b + 2.0 * mem_f + re;
        c->fwd_total += c->fwd[u];
        c->bwd_total += c->bwd[u];
        c->matmul_s += mm_f + mm_b;
        c->attention_s += att_f + att_b;
        c->attention_fwd_s += att_f;
        c->memory_s += 3.0 * mem_f;
        c->recompute_s += re;
    }
    /* AdamW: read p, g, m, v; write p, m, v (7 x 4 B); the norm pass reads g (4 B); bf16 writes
     * the compute copy (2 B) */
    c->opt_s_per_param = d->opt_s_per_param > 0 ? d->opt_s_per_param : (bf16 ? 34.0 : 32.0) / d->mem_bw;
    c->model_flops_per_token = m->train_flops_per_token ? m->train_flops_per_token(m, T) : 0;
    return ZT_OK;
}
