/* layers.h - pieces the models share (src/model/layers.c): the Linear layer under fp32 and
 * low-precision compute, and the loss tail of a head unit (logits -> per-token losses). Internal
 * to src/model/. */
#ifndef ZT_MODEL_LAYERS_H
#define ZT_MODEL_LAYERS_H

#include "zerotrain/zerotrain.h"
#include "kernels/kernels.h"

/* Linear layers. Under bf16/fp16 compute (a->lp_kind) they multiply by the engine's compute copy
 * of the weight (zt_unit_args.params_lp), and their input is saved as the rounded operand: forward
 * computes the fp32 input into scratch (zt_linear_input) and the Linear rounds it into the saved
 * slot; backward multiplies by that slot as it is. Under fp32 the slot is the fp32 input itself. */

/* floats of a buffer of n fp32 elements in a saved buffer, padded to 64 bytes */
size_t zt_fp32_floats(size_t n);
/* ZT_ERR_INTERNAL unless every listed Linear weight (unit parameter positions), and its LoRA
 * adapters, has a compute copy under lp compute */
int zt_check_lp_weights(const zt_unit *u, const zt_unit_args *a, const int *weights, int n, zt_error *err);
/* Where forward writes the fp32 input of a Linear that saves it in slot: the slot itself under
 * fp32 compute, else tmp (scratch), from which zt_linear_forward rounds it into the slot. */
float *zt_linear_input(const zt_unit_args *a, void *slot, float *tmp);
/* out (N,OC) = inp·W_kᵀ + bias (bias may be NULL); inp is zt_linear_input(a, slot, ...), W_k the
 * unit's k-th parameter (OC,C). With a LoRA adapter on W_k (u->lora_a[k]): out += (alpha/r) ·
 * drop(x)·Aᵀ·Bᵀ (lora_forward), x the Linear's operand (slot under lp compute), using the last
 * zt_lora_scratch_floats(u, B, T) floats of the unit's scratch, which the unit's scratch_floats
 * must include at its end. */
void zt_linear_forward(const zt_unit *u, const zt_unit_args *a, int k, float *out, void *slot, const float *inp,
                       const float *bias, int N, int C, int OC);
/* dinp (N,C) = (or += with accumulate) dout·W_k; dW_k += doutᵀ·slot (= when a->grads_unset has
 * bit k, which it then clears: zt_unit_ops.assigns_grad); dbias += Σ dout (any of the three may be
 * NULL). slot: the Linear's saved input, as zt_linear_forward left it. With a LoRA adapter: then
 * dinp += its input gradient, dA and dB += (lora_backward; NULL grads: frozen). */
void zt_linear_backward(const zt_unit *u, const zt_unit_args *a, int k, float *dinp, float *dweight, float *dbias,
                        const float *dout, const void *slot, int N, int C, int OC, bool accumulate);
/* ZT_MM_DWEIGHT_SET when parameter k's gradient (dweight, not NULL) is unset (a->grads_unset bit k,
 * which it then clears: the caller's first product of it assigns it), else 0 */
unsigned zt_grad_assign_flag(const zt_unit_args *a, int k, const float *dweight);
/* Whether Linear k's backward can take its output gradient already rounded (under lp compute, and
 * no LoRA adapter on it, whose backward reads the fp32 gradient): the kernel that makes the
 * gradient then writes it rounded, and zt_linear_backward_rounded runs the products on it. */
bool zt_linear_takes_rounded(const zt_unit *u, const zt_unit_args *a, int k);
/* zt_linear_backward (no bias) on rnd(dout) in `rounded` (N,OC) of the lp kind: the same bits. */
void zt_linear_backward_rounded(const zt_unit *u, const zt_unit_args *a, int k, float *dinp, float *dweight,
                                void *rounded, const void *slot, int N, int C, int OC, bool accumulate);

/* Tensor parallelism (docs/parallelism.md): a unit cut into zt_unit.tp_parts parts computes its
 * share of heads, MLP width and vocabulary and makes partial results whole through these (on one
 * part they do nothing, or exactly what the whole unit did before). */

/* The parts the unit's heads and MLP width are cut into (1: whole). */
static inline int zt_unit_parts(const zt_unit *u) { return u->tp_parts > 1 ? u->tp_parts : 1; }
/* The vocabulary rows the unit's embedding / LM head hold: its part of V, or V. */
int zt_unit_vocab(const zt_unit *u, int V);
/* buf (n floats) = the sum over the parts (the group's: Megatron's g after a row-parallel product
 * in forward, f for the input gradient of column-parallel ones in backward); nothing when whole.
 * ZT_ERR_INTERNAL when a cut unit runs without a group. */
int zt_unit_sum(const zt_unit *u, const zt_unit_args *a, float *buf, size_t n, const char *what, zt_error *err);
/* A row-parallel Linear (its input features cut): out (N,OC) = the sum over the parts of
 * inp·W_kᵀ, then + bias, added once; whole: zt_linear_forward with its bias fused, as ever. Cut
 * along T: out's first zt_unit_rows(u, a) rows get this part's rows of the sum, then the bias. */
int zt_linear_forward_rows(const zt_unit *u, const zt_unit_args *a, int k, float *out, void *slot, const float *inp,
                           const float *bias, int N, int C, int OC, const char *what, zt_error *err);
/* Context parallelism (zt_unit.cp_parts > 1, src/model/context_parallel.c, docs/parallelism.md): the
 * unit holds one part's positions of every sequence and its attention reaches the rest through the
 * group, by zt_unit.cp_mode. q (B,T,NH·hs) row stride sq, k, v (B,T,NKV·hs) row stride skv: the
 * part's T positions; out (B,T,NH·hs) and lse (B·NH·T floats, laid out by mode) assigned, saved
 * for backward; dq, dk, dv (same strides) assigned from dout (B,T,NH·hs). scratch: the floats
 * zt_cp_attention_scratch_floats says (in place of the flash kernel's). Collective over the part's
 * group, in the same order on every part. */
static inline bool zt_unit_cp(const zt_unit *u) { return u->cp_parts > 1; }
size_t zt_cp_attention_scratch_floats(const zt_unit *u, int B, int T, int NH, int NKV, int hs);
int zt_cp_attention_forward(const zt_unit *u, const zt_unit_args *a, float *out, float *lse, float *scratch,
                            const float *q, const float *k, const float *v, int NH, int NKV, int hs, int sq, int skv,
                            zt_error *err);
int zt_cp_attention_backward(const zt_unit *u, const zt_unit_args *a, float *dq, float *dk, float *dv, float *scratch,
                             const float *dout, const float *q, const float *k, const float *v, const float *out,
                             const float *lse, int NH, int NKV, int hs, int sq, int skv, zt_error *err);
/* Sequence parallelism (Megatron-LM's; zt_unit.seq_parts > 1, docs/parallelism.md): the unit's
 * input and output (and their gradients) hold this part's range of the T positions of every
 * sequence, (B, count, C); the norms, bias adds and residuals run on those rows only. Before a
 * column-parallel product the normalized rows are all-gathered into the whole (B, T, C); after a
 * row-parallel one its partial (B, T, C) is reduce-scattered into the part's rows; backward is the
 * mirror. Whole (seq_parts 1) these are the plain forms. */
static inline bool zt_unit_seq(const zt_unit *u) { return u->seq_parts > 1; }
/* The most rows a unit's input and output hold for a (B, T) batch, to size buffers: B·T, or
 * B·ceil(T / seq_parts) when cut along T (a part's range; T/seq_parts when they divide it). */
static inline size_t zt_unit_rows_max(const zt_unit *u, int B, int T) {
    int P = zt_unit_seq(u) ? u->seq_parts : 1;
    return (size_t)B * (size_t)((T + P - 1) / P);
}
/* Rows of the unit's input and output: B·T, or B·count when cut along T; *t0 (optional) the first
 * position this part holds (0 when whole). */
int zt_unit_rows(const zt_unit *u, const zt_unit_args *a, int *t0);
/* all (B, T, C) = every part's rows `mine` in position order (whole: a copy when they differ).
 * ZT_ERR_INTERNAL when a cut unit runs without a group. */
int zt_unit_seq_gather(const zt_unit *u, const zt_unit_args *a, const float *mine, float *all, int C,
                       const char *what, zt_error *err);
/* A norm feeding column-parallel Linears, in two steps. First where it writes its fp32 output:
 * whole, the Linears' input (zt_linear_input(a, slot, tmp): the slot under fp32, else tmp); cut
 * along T, this part's rows (zt_unit_rows x C): the slot under fp32, else rows (scratch). */
float *zt_norm_output(const zt_unit *u, const zt_unit_args *a, void *slot, float *rows, float *tmp);
/* Then the Linears' fp32 input *x and operand slot *op, for zt_linear_forward(u, a, k, out, *op, *x,
 * ..): whole, xl and slot. Cut along T (Megatron's sequence-parallel Linear): xl is all-gathered
 * into all (B, T, C), the Linears' whole fp32 input; slot, their saved operand, keeps only this
 * part's rows (xl itself under fp32; rounded under lp compute), 1/parts of the whole; *op is where
 * zt_linear_forward leaves the whole rounded operand: slot_all (scratch of
 * matmul_saved_input_floats(lp_kind, B·T·C) floats) under lp compute, else all. */
int zt_norm_into_linear(const zt_unit *u, const zt_unit_args *a, float *xl, void *slot, float *all, void *slot_all,
                        int C, float **x, void **op, const char *what, zt_error *err);
/* ... and in backward, for the weight gradient: slot_all = every part's rows of the saved operand
 * (an all-gather in the operand's dtype, the one sequence parallelism adds to the step's traffic). */
int zt_seq_linear_operand(const zt_unit *u, const zt_unit_args *a, const void *slot, void *slot_all, int C,
                          const char *what, zt_error *err);
/* buf (B, T, C): the input gradient of column-parallel Linears, a partial sum over the parts
 * (Megatron's f in backward; or in forward a sum the unit makes itself after row-parallel products,
 * a mixture of experts' output: llama_moe.c). Whole along T: summed over the parts in place
 * (all-reduce); cut: this part's rows of the sum at buf's start (reduce-scatter), zt_unit_rows(u, a)
 * rows. */
int zt_unit_input_grad_sum(const zt_unit *u, const zt_unit_args *a, float *buf, int C, const char *what,
                           zt_error *err);
/* The start of a block's backward: a->din (the residual's gradient, zt_unit_rows x C) = a->dout;
 * *dout_all = a->dout, or cut along T every position's dout, all-gathered into buf (B, T, C), and
 * ng (n floats, the norms' weight gradients of this part's rows: zt_unit_norm_grads) zeroed. */
int zt_block_backward_begin(const zt_unit *u, const zt_unit_args *a, float *ng, size_t n, float *buf, int C,
                            const float **dout_all, const char *what, zt_error *err);
/* Cut along T, a norm's weight gradient is this part's rows' share: buf holds n vectors of C
 * floats computed on them; they are summed over the parts in the group's fixed order (so the parts
 * stay bit-identical) and added to grads[i] (NULL: frozen, skipped). */
int zt_unit_norm_grads(const zt_unit *u, const zt_unit_args *a, float *buf, float *const *grads, int n, int C,
                       const char *what, zt_error *err);

/* Whether the loss is chunked (zt_unit.loss_chunk > 0): the logits of zt_head_logits_rows rows
 * at a time, in the scratch, computed again in backward; nothing (N, V) is saved. */
bool zt_head_chunked(const zt_unit *u);
/* The rows of logits the head holds at once: B*T, or zt_unit.loss_chunk when that is fewer. */
int zt_head_logits_rows(const zt_unit *u, int B, int T);
/* Floats of the head's saved (N, zt_unit_vocab(u, V)) logits: 0 when chunked. */
size_t zt_head_saved_logits_floats(const zt_unit *u, int B, int T, int V);
/* Bytes of the head's staging under lp compute: the rounded d logits of zt_head_logits_rows rows. */
size_t zt_head_staging_bytes(const zt_unit *u, int B, int T, int lp_kind, int V);
/* Floats of a head unit's scratch its loss needs beyond its own: cut by vocabulary, the rows'
 * maxima, sums and target terms; chunked, a chunk's logits and losses (0 when whole and not cut). */
size_t zt_head_loss_scratch_floats(const zt_unit *u, int B, int T, int V);

/* The head's LM head k and loss, N = B*T rows, V the model's vocabulary: the logits (N,
 * zt_unit_vocab(u, V)) of operand op (rounded under lp compute; x its fp32 form or NULL when op
 * holds it already: zt_linear_forward's slot and inp), into the saved buffer logits when whole
 * (NULL when chunked: zt_head_logits_rows rows at a time in the scratch); copies the logits of
 * batch->logits_pos into batch->logits_out (B,V) when asked, checks the targets (ZT_ERR_DATA naming
 * the position) and turns a->out into per-token losses (zeros without targets), the logits into
 * probabilities. Cut by vocabulary: the parts' maxima, sums and target terms are combined between
 * the sweeps (src/kernels/crossentropy.c), in a->scratch from float `scratch_at` on; the full
 * logits are never gathered (only the generated position's, and not when chunked). */
int zt_head_loss_forward(const zt_unit *u, const zt_unit_args *a, int k, void *op, const float *x, float *logits,
                         int C, int V, size_t scratch_at, zt_error *err);

/* The lookup of an embedding unit: out (B,T,C) = table k_wte's rows (+ table k_wpe's row t when
 * k_wpe >= 0), read through the compute copies under low-precision compute (bf16 rows widened, or
 * fp32 arrays of fp16 values), as FSDP's and DeepSpeed's bf16 modules do; ZT_ERR_INTERNAL when
 * neither form was given. */
int zt_embedding_forward(const zt_unit *u, const zt_unit_args *a, int k_wte, int k_wpe, int C, zt_error *err);
/* Its backward: dwte += the scatter of dout over the rows this unit holds (all, when whole),
 * dwpe += dout summed over b (k_wpe -1: none); frozen tables (NULL gradients) are skipped. Cut
 * along T, dout is all-gathered first into the scratch (zt_embedding_scratch_floats). */
int zt_embedding_backward(const zt_unit *u, const zt_unit_args *a, int k_wte, int k_wpe, int C, zt_error *err);
/* The embedding unit's scratch: the whole (B, T, C) lookup or gradient when cut along T, else 0. */
size_t zt_embedding_scratch_floats(const zt_unit *u, int B, int T, int C);

/* The head's backward after its loss, before its norm: needs targets (ZT_ERR_USAGE), turns probs
 * (N, zt_unit_vocab(u, V)) into d logits in place (chunked: probs NULL, each chunk's logits and
 * probabilities computed again from slot in the scratch from scratch_at, as forward did), dinp
 * (N,C) = d logits · W_k (summed over the parts when cut: zt_unit_input_grad_sum, so cut along T
 * only the part's rows, at dinp's start) and dW_k += d logitsᵀ · slot (the LM head k's saved
 * input), and zeroes a->din (zt_unit_rows x C) for the norm's backward to add into. */
int zt_head_loss_backward(const zt_unit *u, const zt_unit_args *a, int k, float *probs, const void *slot,
                          float *dinp, int C, int V, size_t scratch_at, zt_error *err);

/* A unit's saved buffers laid out in order, each sizes[i] floats: the first n_kept from a->saved,
 * the rest from zt_unit_saved_rest (selective checkpointing), or only counted (a NULL: ptrs get
 * NULL). Returns the total floats; *kept (optional) gets the kept part's. */
size_t zt_saved_layout(const size_t *sizes, int n, int n_kept, const zt_unit_args *a, void **ptrs, size_t *kept);

#endif
