/* tp_comm.c - tensor-parallel all-reduces and the loss's all-gathers per unit (tp_comm.h). */
#include "scale/tp_comm.h"

#include <string.h>

void zt_scale_tp_comm(const zt_model *m, const zt_scale_net *net, int tp, int B, int T, double act_bytes,
                      zt_recompute ac, int micro_batches, double *fwd, double *bwd, double *sent_per_step) {
    int U = m->n_units;
    memset(fwd, 0, (size_t)U * sizeof *fwd);
    memset(bwd, 0, (size_t)U * sizeof *bwd);
    *sent_per_step = 0;
    if (tp <= 1 || U < 2) return;
    int C = 0;
    for (int u = 0; u < U; u++) /* the embedding's output is the model's width */
        if (m->units[u].layer >= 0) { C = m->units[u].out_width; break; }
    if (!C) C = m->units[0].out_width;
    double n = (double)B * T, S = n * C * act_bytes, frac = (double)(tp - 1) / tp;
    zt_scale_group g = zt_scale_group_of(net, tp, 1);
    double ar = zt_scale_collective(net, g, ZT_SCALE_ALL_REDUCE, S).seconds;
    /* a mixture's blocks: the top-k weights' gradient (and a gated shared expert's dout·ys), fp32 */
    zt_model_spec spec;
    int kf = zt_model_spec_of(m, &spec, NULL) || spec.arch != ZT_ARCH_LLAMA ? 0 : zt_llama_moe_tp_sum_floats(&spec.llama);
    double K = 4.0 * n * kf, topk = kf ? zt_scale_collective(net, g, ZT_SCALE_ALL_REDUCE, K).seconds : 0.0;
    double gathers = zt_scale_collective(net, g, ZT_SCALE_ALL_GATHER, 4.0 * n * tp).seconds +
                     zt_scale_collective(net, g, ZT_SCALE_ALL_GATHER, 16.0 * n * tp).seconds;
    int reduces = 0, blocks = 0;
    for (int u = 0; u < U; u++) {
        bool block = m->units[u].layer >= 0;
        if (u == 0) fwd[u] = ar, reduces += 1;
        else if (block) {
            fwd[u] = 2 * ar;
            bwd[u] = (ac == ZT_RECOMPUTE_FULL ? 4 : 2) * ar + topk;
            reduces += ac == ZT_RECOMPUTE_FULL ? 6 : 4;
            blocks += 1;
        } else if (u == U - 1) fwd[u] = gathers, bwd[u] = ar, reduces += 1;
    }
    /* an all-reduce is a reduce-scatter and an all-gather: each sends (p-1)/p of S */
    *sent_per_step =
        micro_batches * ((reduces * S + blocks * K) * 2.0 * frac + 20.0 * n * (tp - 1)) + 8.0 * (tp - 1);
}
