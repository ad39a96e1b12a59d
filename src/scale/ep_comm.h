/* ep_comm.h - the scale model's expert-parallel communication: the all-to-alls a mixture of
 * experts' block runs per micro-batch when its experts are spread over ep devices
 * (src/model/llama_moe_ep.c, docs/parallelism.md "Expert parallelism"). With n = B·T tokens of a
 * device (a cp part's), k experts a token and C the width, every slot's row goes to its expert's
 * device: n·k·C elements a device holds, (ep-1)/ep of them leaving it. Forward: the dispatch (the
 * rows to the experts, a_out bytes an element) and the combine (the results back, a_back bytes);
 * backward: the output gradients out (a_out) and the input gradients back (a_back). Each costs what
 * an all-gather ending with its bytes does, sent pairwise (as cp_comm.h's all-to-alls), over ep
 * devices tp x cp apart (the mesh's ep groups are consecutive ranks of the dp x cp group). On the
 * critical path (the engine does not overlap them). The experts' padding rows and the per-expert
 * counts (and the sizes the collective sends first) are not counted. The experts' gradient
 * reduction is predict.c's: over the expert-data-parallel ranks where the experts are stored E/ep
 * a device (zt_memory_experts_storable), else the strategy's over every data-parallel rank. */
#ifndef ZT_SCALE_EP_COMM_H
#define ZT_SCALE_EP_COMM_H

#include "memory/plan.h"
#include "scale/collective.h"

/* Bytes an element of the rows sent to the experts (*out: the dispatch, the output gradients) and
 * of those sent back (*back: the results, the input gradients) under precision p. The engine's
 * (engine true): the rounded operand out (bf16 compute: 2 bytes; fp16's values are held in fp32 on
 * a CPU: 4; fp32: 4), the products' fp32 results back (4): 2+4+2+4 under bf16, 4+4+4+4 else. The
 * GPU frameworks' (Megatron-LM, DeepSpeed-MoE): every exchange in the compute dtype (2 under
 * bf16/fp16, 4 under fp32). */
void zt_scale_ep_elem_bytes(const zt_precision *p, bool engine, double *out, double *back);

/* Exposed seconds of ep all-to-alls per unit of m (m->n_units entries each, caller's arrays,
 * blocks only) in one micro-batch's forward and backward, for the model's ep parts
 * (zt_model_ep_parts; 1: zeros), tp and cp parts, B sequences of T positions a device, out_bytes
 * and back_bytes an element as above, over net. *sent_per_step: the bytes one device sends per
 * step of `micro_batches`. */
void zt_scale_ep_comm(const zt_model *m, const zt_scale_net *net, int tp, int cp, int B, int T, double out_bytes,
                      double back_bytes, int micro_batches, double *fwd, double *bwd, double *sent_per_step);

#endif
