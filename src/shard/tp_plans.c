/* tp_plans.c - the tensor-parallel plan of each model family: one row per parameter name suffix
 * and how it is cut (tp.h: column, row, vocab; a parameter no row names stays whole). The rows are
 * Megatron-LM's layout: column-parallel into the attention and the MLP, row-parallel out of them,
 * so each block needs one sum after attention and one after the MLP in forward (and two in
 * backward, for the inputs' gradients), and the embedding and LM head cut by vocabulary. */
#include "shard/tp.h"

#include <string.h>

static const zt_tp_rule GPT2[] = {
    {"wte.weight", ZT_TP_VOCAB, 1},            /* the embedding, and the tied LM head */
    {"attn.c_attn.weight", ZT_TP_COLUMN, 3},   /* (3C, C): q | k | v, each cut by heads */
    {"attn.c_attn.bias", ZT_TP_COLUMN, 3},
    {"attn.c_proj.weight", ZT_TP_ROW, 1},      /* (C, C): the heads' outputs in, a partial sum out */
    {"mlp.c_fc.weight", ZT_TP_COLUMN, 1},      /* (4C, C) */
    {"mlp.c_fc.bias", ZT_TP_COLUMN, 1},
    {"mlp.c_proj.weight", ZT_TP_ROW, 1},       /* (C, 4C) */
};

static const zt_tp_rule LLAMA[] = {
    {"embed_tokens.weight", ZT_TP_VOCAB, 1},   /* the embedding (and the LM head when tied) */
    {"lm_head.weight", ZT_TP_VOCAB, 1},
    {"self_attn.q_proj.weight", ZT_TP_COLUMN, 1},
    {"self_attn.k_proj.weight", ZT_TP_COLUMN, 1}, /* GQA: the key/value heads cut like the queries' */
    {"self_attn.v_proj.weight", ZT_TP_COLUMN, 1},
    {"self_attn.q_proj.bias", ZT_TP_COLUMN, 1},   /* Qwen2's q/k/v biases: cut as their weights' rows */
    {"self_attn.k_proj.bias", ZT_TP_COLUMN, 1},
    {"self_attn.v_proj.bias", ZT_TP_COLUMN, 1},
    {"self_attn.o_proj.weight", ZT_TP_ROW, 1},
    {"mlp.gate_proj.weight", ZT_TP_COLUMN, 1},
    {"mlp.up_proj.weight", ZT_TP_COLUMN, 1},
    {"mlp.down_proj.weight", ZT_TP_ROW, 1},
    /* a mixture's stacked experts (llama_moe.c): each expert's columns cut alike (blocks 0: one
     * block per expert, the parameter's norm blocks), w2 row-parallel; the router stays whole */
    {"block_sparse_moe.experts.w1.weight", ZT_TP_COLUMN, 0},
    {"block_sparse_moe.experts.w3.weight", ZT_TP_COLUMN, 0},
    {"block_sparse_moe.experts.w2.weight", ZT_TP_ROW, 1},
    /* its shared expert (llama_moe_shared.c): a dense SwiGLU MLP, cut as the MLP above; its sigmoid
     * gate (1, C) stays whole */
    {"shared_expert.gate_proj.weight", ZT_TP_COLUMN, 1},
    {"shared_expert.up_proj.weight", ZT_TP_COLUMN, 1},
    {"shared_expert.down_proj.weight", ZT_TP_ROW, 1},
};

const zt_tp_rule *zt_tp_plan_of(const char *name, int *n) {
    if (!strcmp(name, "gpt2")) {
        *n = (int)(sizeof GPT2 / sizeof GPT2[0]);
        return GPT2;
    }
    if (!strcmp(name, "llama")) {
        *n = (int)(sizeof LLAMA / sizeof LLAMA[0]);
        return LLAMA;
    }
    *n = 0;
    return NULL;
}
