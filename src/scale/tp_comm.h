/* tp_comm.h - the scale model's tensor-parallel communication: Megatron-LM's all-reduces of the
 * activations inside a tp group, as zerotrain's engine runs them (docs/parallelism.md), per unit
 * and micro-batch. They sit on the critical path (a block's next product needs the sum), so the
 * model adds them to the units' compute time and counts them as exposed, as Megatron does without
 * its (sequence-parallel) overlap.
 *
 * Per micro-batch of n = B·T tokens, width C, L blocks, the group of tp consecutive devices (inside
 * a node when tp divides the devices per node), S = n·C·a bytes (a: 2 for bf16 activations under
 * the nccl profile, 4 for zerotrain's fp32 sums):
 *   embedding   forward: all-reduce S (each part looked up its vocabulary rows)
 *   block       forward: 2 all-reduces S (attention output, MLP output: the row-parallel sums);
 *               backward: 2 (the column-parallel input gradients of QKV and of the MLP's up
 *               projection); full recomputation re-runs the forward's 2 in backward
 *   MoE block   (a mixture of experts, src/model/llama_moe.c) backward also: all-reduce K = 4·n·f
 *               bytes, f = k (the top-k weights' gradient dout·y) + 1 with a gated shared expert
 *               (its dout·ys), fp32 whatever the activations (the router's dtype;
 *               zt_llama_moe_tp_sum_floats); full recomputation does not repeat it
 *   head        forward: the vocabulary-parallel loss's all-gathers of the row maxima (n floats
 *               per part) and of the sums (2n doubles per part); backward: all-reduce S (the
 *               input gradient of the vocabulary-parallel product)
 * and once per step the gradient norm's double. Bytes a device sends per step under pairwise
 * collectives: m·(((2 + 4L [+ 2L full])·S [+ L·K]) · 2·(tp-1)/tp + 20·n·(tp-1)) + 8·(tp-1), the
 * engine's formula (tests/tool_dist_check.c checks the engine against it). */
#ifndef ZT_SCALE_TP_COMM_H
#define ZT_SCALE_TP_COMM_H

#include "scale/collective.h"
#include "zerotrain/zerotrain.h"

/* Seconds of tp communication per unit of m (m->n_units entries each, caller's arrays) in one
 * micro-batch's forward and backward, for tp parts over net (tp 1: zeros), and the bytes one
 * device sends per step of `micro_batches` (pairwise: every byte to each peer; ring: (p-1)/p of
 * each all-reduce twice, as collective.h counts). */
void zt_scale_tp_comm(const zt_model *m, const zt_scale_net *net, int tp, int B, int T, double act_bytes,
                      zt_recompute ac, int micro_batches, double *fwd, double *bwd, double *sent_per_step);

#endif
