/* llama_moe.h - the sparse feed-forward of a Llama mixture-of-experts block (llama_moe.c), which
 * llama.c's block unit runs in place of its dense MLP. Internal to src/model/. */
#ifndef ZT_MODEL_LLAMA_MOE_H
#define ZT_MODEL_LLAMA_MOE_H

#include "zerotrain/zerotrain.h"

/* The unit positions of the MoE weights: the router (E,C), the experts' gate w1 (E·I,C), down w2
 * (E·C,I) and up w3 (E·I,C), each stacked by expert (rows [e·I, (e+1)·I) are expert e's); the
 * shared expert's gate and up (Is,C) and down (C,Is) and its sigmoid gate (1,C) (llama_moe_shared.c;
 * -1: none). */
typedef struct zt_moe_params {
    int router, w1, w2, w3;
    int shared_gate, shared_up, shared_down, shared_route;
} zt_moe_params;

/* the weight of unit parameter k as the products read it: the compute copy under lp compute, else fp32 */
const void *zt_moe_weight(const zt_unit_args *a, int k);
/* each expert's width; and its columns on unit u's tensor-parallel part (width / parts: the experts'
 * w1, w3 column-parallel in blocks of one expert, w2 row-parallel, src/shard/tp_plans.c) */
int zt_moe_width(const zt_llama_config *c);
int zt_moe_part_width(const zt_unit *u);
/* an expert's most rows of a micro-batch of N tokens: N (a token chooses an expert once), or the
 * capacity */
int zt_moe_capacity(const zt_llama_config *c, int N);
/* floats of the MoE part of unit u's saved buffer (kept whole under selective checkpointing) and
 * of its scratch, for N tokens: its experts spread over u->ep_parts parts (1: all here;
 * llama_moe_ep.c), each of zt_moe_part_width columns; the saved products' operands (xp, h, xr and
 * the shared expert's h) in the compute dtype lp_kind (matmul_saved_input_floats) */
size_t zt_moe_saved_floats(const zt_unit *u, size_t N, int lp_kind);
size_t zt_moe_scratch_floats(const zt_unit *u, size_t N);
/* bytes of the staging the experts' products need under lp compute: rnd(dout) of the widest */
size_t zt_moe_staging_bytes(const zt_unit *u, size_t N, int lp_kind);
/* Each expert's rows are padded to whole tiles (moe_route_plan) of zt_moe_row_tile(lp_kind) rows:
 * under bf16/fp16 compute ZT_MOE_ROW_TILE_LP, a few shapes for the low-precision products, which
 * oneDNN's primitive cache keeps; in fp32 1 (none: the grouped products take their row counts at
 * run time, grouped_gemm.c). Scratch is sized for the wider tile (it is the same for every kind). */
enum { ZT_MOE_ROW_TILE_LP = 64 };
int zt_moe_row_tile(int lp_kind);
/* rows of the permuted experts' input of N tokens at most, the padding to tiles of `tile` included */
size_t zt_moe_max_rows(const zt_llama_config *c, size_t N, int tile);

/* What a block's forward saves for its backward (the layout of llama_moe.c's top; with experts
 * spread over parts, llama_moe_ep.c's: gate, up, h then hold the rows this part's experts got from
 * every part, and xr, roff are set) */
typedef struct zt_moe_saved {
    float *probs, *lse, *w;
    int32_t *idx, *counts, *offsets, *order, *row_of;
    void *xp;       /* the products' operand: rounded under lp compute (as h and xr) */
    float *gate, *up;
    void *h;
    float *y;
    void *xr;       /* expert parallelism: the rows received from part s at row s·Rl */
    int32_t *roff;  /* ... and their experts' offsets: roff[s·(El+1) + j], j = 0..El */
    float *shared;  /* the shared expert's (llama_moe_shared.c; NULL: none) */
    int32_t *counts_all; /* context parallelism: counts summed over the parts, the whole sequences'
                            (the router losses' load; NULL without cp) */
} zt_moe_saved;
/* the layout of unit u's saved buffer at base (NULL: sizes only) under compute lp_kind; returns its floats */
size_t zt_moe_layout(const zt_unit *u, size_t N, int lp_kind, float *base, zt_moe_saved *s);
/* expert parallelism (llama_moe_ep.c): the rows one part sends one part at most (Rl), the scratch */
size_t zt_moe_ep_rows(const zt_llama_config *c, size_t N, int ep, int tile);
size_t zt_moe_ep_scratch_floats(const zt_unit *u, size_t N);
int zt_moe_ep_forward(const zt_unit *u, const zt_unit_args *a, const zt_moe_params *pk, const zt_moe_saved *s,
                      const float *x, float *scratch, zt_error *err);
/* the per-source weight-gradient slots of w1, w2, w3 added into this part's experts (llama_moe_ep.c) */
void zt_moe_ep_fold(const zt_unit *u, const zt_unit_group *g, const zt_moe_params *pk, float *const *grads,
                    float *const *slots);
int zt_moe_ep_backward(const zt_unit *u, const zt_unit_args *a, const zt_moe_params *pk, const zt_moe_saved *s,
                       float *dy, float *dxp, float *scratch, zt_error *err);
/* out (N,C) = MoE(x), x (N,C) the post-attention norm's output in fp32 (the router's input: under
 * bf16 compute the rounded operand widened, exactly) and xop the same as the experts' products read
 * it (the rounded operand under lp compute, x itself under fp32); saved: zt_moe_saved_floats floats;
 * adds the router losses into *a->aux_loss and the expert counts into a->moe_counts when given.
 * Cut along T (sequence parallelism), x and xop are every part's rows (gathered: every part routes
 * the same N tokens) and out gets this part's rows of the sum at its start (reduce-scattered) */
int zt_moe_forward(const zt_unit *u, const zt_unit_args *a, const zt_moe_params *pk, float *saved, const void *xop,
                   const float *x, float *out, float *scratch, zt_error *err);
/* dx (N,C) = (assigned) d x from dout (N,C); the router's and experts' gradients += (the router
 * losses' gradients times a->aux_dloss included); xop, x as forward's; a->staging: zt_moe_staging_bytes.
 * dx may be dout (read first). Cut along T: dout every part's rows (gathered), x and xop re-gathered,
 * and dx gets this part's rows of the input gradient at its start */
int zt_moe_backward(const zt_unit *u, const zt_unit_args *a, const zt_moe_params *pk, float *saved, const void *xop,
                    const float *x, const float *dout, float *dx, float *scratch, zt_error *err);

/* A Linear whole on every tensor-parallel part (the router, the shared expert's sigmoid gate), W
 * (OC,C), read on the block's whole input x (N,C): dW += dyᵀ·x over every token (the same bits on
 * every part), dx += dy·W on the rows dx holds after the block's sum of the input gradient: every
 * token's, or cut along T (sequence parallelism) this part's (B, count) rows at dx's start */
void zt_moe_whole_backward(const zt_unit *u, const zt_unit_args *a, float *dx, float *dW, const float *dy,
                           const float *x, const float *W, int OC);

/* Shared experts (llama_moe_shared.c): the shared MLP's width (0: none), its columns on unit u's
 * tensor-parallel part (width / parts), whether it has Qwen2-MoE's sigmoid gate; the floats of its
 * part of the saved buffer and of the scratch for N tokens. Forward adds gate(x)·shared(x) (this
 * part's share) into out (N,C). Backward, around the block's sums: zt_moe_shared_backward reads
 * dout (N,C) (before dx, which may alias it, is written): the dot dout·ys per token into dot (N,
 * gated only; this part's share, to be summed over the parts) and the down product's and SwiGLU's
 * gradients into the scratch; _input then adds the gate and up products' input gradient into dx
 * (N,C) (before the block's sum of it); _gate, after that sum, the sigmoid gate's (dot summed) */
int zt_moe_shared_width(const zt_llama_config *c);
int zt_moe_shared_part_width(const zt_unit *u);
bool zt_moe_shared_gated(const zt_llama_config *c);
size_t zt_moe_shared_saved_floats(const zt_unit *u, size_t N, int lp_kind);
size_t zt_moe_shared_scratch_floats(const zt_unit *u, size_t N);
void zt_moe_shared_forward(const zt_unit *u, const zt_unit_args *a, const zt_moe_params *pk, float *saved,
                           const void *xop, const float *x, float *out, float *scratch);
void zt_moe_shared_backward(const zt_unit *u, const zt_unit_args *a, const zt_moe_params *pk, float *saved,
                            const float *dout, float *dot, float *scratch);
void zt_moe_shared_backward_input(const zt_unit *u, const zt_unit_args *a, const zt_moe_params *pk, const void *xop,
                                  float *dx, float *scratch);
void zt_moe_shared_gate_backward(const zt_unit *u, const zt_unit_args *a, const zt_moe_params *pk, float *saved,
                                 const float *x, float *dot, float *dx);

#endif
