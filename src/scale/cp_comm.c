/* cp_comm.c - context-parallel exchanges of the attention per block (cp_comm.h). */
#include "scale/cp_comm.h"
#include "scale/pipeline.h"

#include <string.h>

/* Exposed seconds of `comm` seconds of exchanges cut into S head groups, all posted at once and moving
 * one after the other, group g's attention (attn / S) after its blocks: what arrives faster than the
 * attention runs hides all but the first group's (comm / S), else the attention hides (S-1)/S of itself
 * (the schedule's end is the later of the first group's and the last group's arrival plus the
 * attention left) */
static double pipelined(double comm, double attn, int S) {
    if (S <= 1) return comm;
    double first = comm / S, last = comm - attn * (S - 1) / S;
    return first > last ? first : last;
}

void zt_scale_cp_comm(const zt_model *m, const zt_scale_net *net, int tp, int B, int T, double act_bytes,
                      double attention_fwd_s, double attention_bwd_s, int micro_batches, double *fwd, double *bwd,
                      double *sent_per_step) {
    int U = m->n_units;
    zt_cp_mode mode;
    int cp = zt_model_cp_parts(m, &mode);
    memset(fwd, 0, (size_t)U * sizeof *fwd);
    memset(bwd, 0, (size_t)U * sizeof *bwd);
    *sent_per_step = 0;
    zt_model_spec spec;
    if (cp <= 1 || zt_model_spec_of(m, &spec, NULL)) return;
    int L, NH, C, V, maxT;
    zt_model_spec_shape(&spec, &L, &NH, &C, &V, &maxT);
    if (tp < 1) tp = 1;
    double hs = (double)C / NH, Cq = (double)C / tp;
    int nkv = (spec.arch == ZT_ARCH_LLAMA ? spec.llama.n_kv_head : NH) / tp; /* a tp part's key/value heads */
    double KV = nkv * hs;
    double n = (double)B * T, frac = (double)(cp - 1) / cp;
    zt_scale_group g = zt_scale_group_of(net, cp, tp);
    zt_scale_net pairwise = *net;
    pairwise.algo = ZT_SCALE_PAIRWISE; /* all-to-alls and shifts go peer to peer */
    double f = 0, b = 0, sent = 0;
    if (mode == ZT_CP_ULYSSES) {
        double part = n / cp * act_bytes; /* one part's rows, per channel */
        double qkv = part * (Cq + 2 * KV), o = part * Cq, back = part * (3 * Cq + 2 * KV);
        int S = nkv % cp ? 1 : zt_cp_head_groups(nkv / cp, 1);
        f = pipelined(zt_scale_collective(&pairwise, g, ZT_SCALE_ALL_GATHER, qkv).seconds +
                          zt_scale_collective(&pairwise, g, ZT_SCALE_ALL_GATHER, o).seconds,
                      attention_fwd_s, S);
        b = pipelined(zt_scale_collective(&pairwise, g, ZT_SCALE_ALL_GATHER, back).seconds +
                          zt_scale_collective(&pairwise, g, ZT_SCALE_ALL_GATHER, qkv).seconds,
                      attention_bwd_s, S);
        sent = frac * (qkv + o + back + qkv);
    } else {
        double S = n * 2 * KV * act_bytes;
        double ag = zt_scale_collective(net, g, ZT_SCALE_ALL_GATHER, S).seconds;
        if (mode == ZT_CP_RING) {
            double shifts = zt_scale_collective(&pairwise, g, ZT_SCALE_ALL_GATHER, S).seconds; /* cp - 1 of S/cp */
            double step = shifts / (cp - 1), total = shifts + shifts + shifts + step;
            double attention_s = attention_fwd_s + attention_bwd_s;
            double exposed = total > attention_s ? total - attention_s : 0;
            f = exposed * shifts / total, b = exposed - f;
            sent = S * (3 * frac + 1.0 / cp);
        } else {
            int groups = zt_cp_head_groups(nkv, 1);
            f = pipelined(ag, attention_fwd_s, groups);
            b = pipelined(ag + zt_scale_collective(net, g, ZT_SCALE_REDUCE_SCATTER, S).seconds, attention_bwd_s, groups);
            sent = 3 * frac * S;
        }
    }
    for (int u = 0; u < U; u++)
        if (m->units[u].layer >= 0) fwd[u] = f, bwd[u] = b;
    *sent_per_step = (double)micro_batches * zt_scale_blocks(m) * sent;
}
