/* ep_comm.c - expert-parallel all-to-alls per block (ep_comm.h). */
#include "scale/ep_comm.h"
#include "kernels/kernels.h"
#include "scale/pipeline.h"

#include <string.h>

void zt_scale_ep_elem_bytes(const zt_precision *p, bool engine, double *out, double *back) {
    bool lp = p->mode != ZT_PRECISION_FP32;
    *out = engine ? (double)zt_lp_elem_bytes(zt_precision_lp_kind(p)) : lp ? 2.0 : 4.0;
    *back = engine || !lp ? 4.0 : 2.0;
}

void zt_scale_ep_comm(const zt_model *m, const zt_scale_net *net, int tp, int cp, int B, int T, double out_bytes,
                      double back_bytes, int micro_batches, double *fwd, double *bwd, double *sent_per_step) {
    int U = m->n_units, ep = zt_model_ep_parts(m);
    memset(fwd, 0, (size_t)U * sizeof *fwd);
    memset(bwd, 0, (size_t)U * sizeof *bwd);
    *sent_per_step = 0;
    zt_model_spec spec;
    if (ep <= 1 || zt_model_spec_of(m, &spec, NULL) || spec.arch != ZT_ARCH_LLAMA || spec.llama.n_experts < 1) return;
    double X = (double)B * T * spec.llama.n_experts_per_token * spec.llama.n_embd; /* elements */
    zt_scale_group g = zt_scale_group_of(net, ep, (tp > 1 ? tp : 1) * (cp > 1 ? cp : 1));
    zt_scale_net pairwise = *net;
    pairwise.algo = ZT_SCALE_PAIRWISE; /* all-to-alls go peer to peer */
    double out = zt_scale_collective(&pairwise, g, ZT_SCALE_ALL_GATHER, X * out_bytes).seconds;
    double back = zt_scale_collective(&pairwise, g, ZT_SCALE_ALL_GATHER, X * back_bytes).seconds;
    for (int u = 0; u < U; u++)
        if (m->units[u].layer >= 0) fwd[u] = out + back, bwd[u] = out + back;
    *sent_per_step = (double)micro_batches * zt_scale_blocks(m) * 2.0 * (out_bytes + back_bytes) * X * (ep - 1) / ep;
}
