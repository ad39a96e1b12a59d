/* llama_moe.h - the sparse feed-forward of a Llama mixture-of-experts block (llama_moe.c), which
 * llama.c's block unit runs in place of its dense MLP. Internal to src/model/. */
#ifndef ZT_MODEL_LLAMA_MOE_H
#define ZT_MODEL_LLAMA_MOE_H

#include "zerotrain/zerotrain.h"

/* The unit positions of the MoE weights: the router (E,C), the experts' gate w1 (E·I,C), down w2
 * (E·C,I) and up w3 (E·I,C), each stacked by expert (rows [e·I, (e+1)·I) are expert e's). */
typedef struct zt_moe_params {
    int router, w1, w2, w3;
} zt_moe_params;

/* each expert's width */
int zt_moe_width(const zt_llama_config *c);
/* an expert's most rows of a micro-batch of N tokens: N (a token chooses an expert once), or the
 * capacity */
int zt_moe_capacity(const zt_llama_config *c, int N);
/* floats of the MoE part of a block's saved buffer (kept whole under selective checkpointing) and
 * of its scratch, for N tokens */
size_t zt_moe_saved_floats(const zt_llama_config *c, size_t N);
size_t zt_moe_scratch_floats(const zt_llama_config *c, size_t N);
/* out (N,C) = MoE(x), x (N,C) the post-attention norm's output; saved: zt_moe_saved_floats floats;
 * adds the router losses into *a->aux_loss and the expert counts into a->moe_counts when given */
int zt_moe_forward(const zt_unit *u, const zt_unit_args *a, const zt_moe_params *pk, float *saved, const float *x,
                   float *out, float *scratch, zt_error *err);
/* dx (N,C) = (assigned) d x from dout (N,C); the router's and experts' gradients += (the router
 * losses' gradients times a->aux_dloss included) */
int zt_moe_backward(const zt_unit *u, const zt_unit_args *a, const zt_moe_params *pk, float *saved, const float *x,
                    const float *dout, float *dx, float *scratch, zt_error *err);

#endif
