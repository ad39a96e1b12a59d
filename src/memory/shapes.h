/* shapes.h - the models `zerotrain estimate-memory --model NAME` knows: GPT-2 presets are the
 * engine's real model (zt_gpt2_create), so their plan is what the engine allocates; Llama-2 models
 * do not exist in the engine, so they are shape-only models built from a documented table (the
 * parameter table and units of a Llama block as zerotrain would write it, activation sizes from
 * the formula below) on which the same plan runs. Their numbers are formula estimates.
 *
 * Llama block (pre-RMSNorm, SwiGLU, rotary, grouped-query attention), N = B*T rows, d = d_model,
 * kv = n_kv_head * d / n_head, f = ffn:
 *   parameters  attention_norm (d) | wq (d,d) | wk (kv,d) | wv (kv,d) | wo (d,d) | ffn_norm (d) |
 *               w1 (f,d) gate | w2 (d,f) down | w3 (f,d) up            = 2·d² + 2·kv·d + 3·d·f + 2·d
 *   saved       rms1* (N,d) | rms1_rstd (N) | q (N,d) | k (N,kv) | v (N,kv) | att (B,NH,T,T) |
 *               atty* (N,d) | res2 (N,d) | rms2* (N,d) | rms2_rstd (N) | gate (N,f) | up (N,f) |
 *               h* = silu(gate)*up (N,f)           = N·(5d + 2kv + 3f + 2) + B·NH·T² floats
 *               (fp32, N a multiple of 16: each buffer is 64-byte aligned as in gpt2.c)
 *   bf16        the starred buffers, read only by Linears, hold the bf16 operand (as GPT-2's):
 *               N·(3.5d + 2kv + 2.5f + 2) + B·NH·T²
 *   selective   recomputes att and h: keeps N·(5d + 2kv + 2f + 2) (bf16: N·(3.5d + 2kv + 2f + 2))
 *   scratch     (N,d) + 2·(N,f) + min(threads, B·NH)·T² (the attention backward, as GPT-2's)
 *   staging     rnd(dout) of the widest Linear output (N,f) under bf16/fp16 compute
 * embedding: tok_embeddings (V,d), saved nothing; head: norm (d) and an untied output (V,d),
 * saved rms* (N,d) | rstd (N) | logits (N,V), scratch (N,d), staging rnd(dlogits) (N,V). */
#ifndef ZT_MEMORY_SHAPES_H
#define ZT_MEMORY_SHAPES_H

#include "zerotrain/zerotrain.h"

typedef struct zt_llama_shape {
    int n_layer, d_model, n_head, n_kv_head, ffn, vocab_size, max_seq_len;
} zt_llama_shape;

/* "llama-7b", "llama-13b", "llama-70b" (Llama 2: 4096 context, 32000 vocabulary, GQA with 8 KV
 * heads for 70B). ZT_ERR_USAGE lists the names on a miss. */
int zt_llama_shape_preset(const char *name, zt_llama_shape *out, zt_error *err);
/* A shape-only model named "llama": parameters and units with saved/scratch sizes; its forward and
 * backward refuse to run (ZT_ERR_USAGE). */
int zt_llama_shape_create(const zt_llama_shape *c, zt_model **out, zt_error *err);

/* Any model the estimator knows by name: the GPT-2 presets (gpt2-124M, gpt2-350M, gpt2-774M,
 * gpt2-1558M, and tiny) through zt_gpt2_create, the Llama shapes above. *formula is true for the
 * shape-only models. ZT_ERR_USAGE lists every name on a miss. */
int zt_estimator_model(const char *name, zt_model **out, bool *formula, zt_error *err);

#endif
