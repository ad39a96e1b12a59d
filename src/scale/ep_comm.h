/* ep_comm.h - the scale model's expert-parallel communication: the all-to-alls a mixture of
 * experts' block runs per micro-batch when its experts are spread over ep devices
 * (src/model/llama_moe_ep.c, docs/parallelism.md "Expert parallelism"). With n = B·T tokens of a
 * device (a cp part's), k experts a token, C the width and a bytes per activation element, every
 * slot's row goes to its expert's device: X = n·k·C·a bytes a device holds, (ep-1)/ep of them
 * leaving it. Forward: the dispatch and the combine (2 all-to-alls of X); backward: the output
 * gradients out and the input gradients back (2 more). Each costs what an all-gather ending with
 * X does, sent pairwise (as cp_comm.h's all-to-alls), over ep devices tp x cp apart (the mesh's ep
 * groups are consecutive ranks of the dp x cp group). On the critical path (the engine does not
 * overlap them). The experts' padding rows and the per-expert counts (and the sizes the
 * collective sends first) are not counted; the experts' gradient reduction stays the strategy's,
 * as the engine keeps every expert on every device. */
#ifndef ZT_SCALE_EP_COMM_H
#define ZT_SCALE_EP_COMM_H

#include "scale/collective.h"
#include "zerotrain/zerotrain.h"

/* Exposed seconds of ep all-to-alls per unit of m (m->n_units entries each, caller's arrays,
 * blocks only) in one micro-batch's forward and backward, for the model's ep parts
 * (zt_model_ep_parts; 1: zeros), tp and cp parts, B sequences of T positions a device, over net.
 * *sent_per_step: the bytes one device sends per step of `micro_batches`. */
void zt_scale_ep_comm(const zt_model *m, const zt_scale_net *net, int tp, int cp, int B, int T, double act_bytes,
                      int micro_batches, double *fwd, double *bwd, double *sent_per_step);

#endif
