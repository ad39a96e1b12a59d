/* shapes.h - the models `zerotrain estimate-memory --model NAME` knows: every preset of the
 * engine's own models (zt_model_preset: GPT-2 and Llama), built for real, so the plan the
 * estimator runs is what the engine allocates. (Llama was a shape-only formula model here before
 * src/model/llama.c existed; the real model has the same parameters and saved buffers, and
 * llama-7b's estimate is unchanged to the byte: docs/memory.md.) */
#ifndef ZT_MEMORY_SHAPES_H
#define ZT_MEMORY_SHAPES_H

#include "zerotrain/zerotrain.h"

/* The model of a preset name (gpt2-124M ... gpt2-1558M, tiny; llama-tiny, llama-124M, llama-7b, llama-13b,
 * llama-70b, llama3-8b, llama3-70b, mistral-7b) with the given attention kernel (its saved
 * buffers and scratch differ). ZT_ERR_USAGE lists every name on a miss. */
int zt_estimator_model(const char *name, zt_attention attention, zt_model **out, zt_error *err);

#endif
