/* cp_comm.h - the scale model's context-parallel communication: what the engine's attention sends
 * between the cp parts of a sequence (src/model/context_parallel.c), per block and micro-batch, by
 * mode (docs/parallelism.md). With n = B·T tokens of the whole sequences, KV the key/value width
 * and C the query width of a tp part, a bytes per activation element and the group of cp devices
 * tp apart (the mesh's cp axis inside tp), S = n·2·KV·a (the whole sequences' k and v):
 *   allgather  forward: all-gather S; backward: all-gather S again and the dk, dv sums' exchange
 *              (a reduce-scatter of S). Pipelined over head groups (zt_cp_head_groups of a part's
 *              key/value heads, one thread): every group's exchange posted at once and group g's
 *              attention run when its blocks are in, so the attention hides all but the first
 *              group's share, or (S-1)/S of itself when the exchange is the slower.
 *   ring       forward: cp - 1 shifts of S/cp; backward: cp - 1 shifts of k, v and cp shifts of the
 *              dk, dv accumulator. The shifts are posted before the blocks that do not need them
 *              compute, so up to the block's attention compute hides them; the rest is exposed.
 *   ulysses    all-to-alls of each part's (n/cp) rows: forward q, k, v (C + 2KV) to the head split
 *              and the output (C) back; backward dout, q, k, v, out (3C + 2KV) and dq, dk, dv
 *              (C + 2KV) back. Pipelined over head groups as allgather (of the part's nkv / cp
 *              key/value heads after the split; 1 group when cp does not divide them).
 * An all-to-all of X bytes per device costs what an all-gather ending with X does (each device
 * sends (p-1)/p of X), sent pairwise. */
#ifndef ZT_SCALE_CP_COMM_H
#define ZT_SCALE_CP_COMM_H

#include "scale/collective.h"
#include "zerotrain/zerotrain.h"

/* Exposed seconds of cp communication per unit of m (m->n_units entries each, caller's arrays,
 * blocks only) in one micro-batch's forward and backward, for the model's cp parts and mode
 * (zt_model_cp_parts; 1 part: zeros), tp parts of the cut model, B sequences of T (whole) positions,
 * over net; `attention_fwd_s`, `attention_bwd_s` the seconds of one block's attention in forward
 * and backward (the part's), which the exchanges hide behind. *sent_per_step: the bytes one
 * device sends per step of `micro_batches`. */
void zt_scale_cp_comm(const zt_model *m, const zt_scale_net *net, int tp, int B, int T,
                      double act_bytes, double attention_fwd_s, double attention_bwd_s, int micro_batches,
                      double *fwd, double *bwd, double *sent_per_step);

#endif
