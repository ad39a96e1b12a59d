/* gguf_quant.h - GGUF's tensor types as ggml lays them out: f32, f16, bf16, the 32-element
 * blocks q8_0 and q4_0 (gguf_quant.c) and the 256-element k-quants q4_k, q5_k, q6_k
 * (gguf_kquant.c), row by row, both ways. */
#ifndef ZT_GGUF_QUANT_H
#define ZT_GGUF_QUANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ggml_type values (ggml.h) of the types written */
typedef enum zt_gguf_type {
    ZT_GGUF_F32 = 0,
    ZT_GGUF_F16 = 1,
    ZT_GGUF_Q4_0 = 2,
    ZT_GGUF_Q8_0 = 8,
    ZT_GGUF_Q4_K = 12,
    ZT_GGUF_Q5_K = 13,
    ZT_GGUF_Q6_K = 14,
    ZT_GGUF_BF16 = 30,
} zt_gguf_type;

#define ZT_GGUF_QK 32 /* elements per q8_0 / q4_0 block */

/* "f32" | "f16" | "bf16" | "q8_0" | "q4_0" | "q4_k" | "q5_k" | "q6_k" -> *t; false for another name. */
bool zt_gguf_type_parse(const char *name, zt_gguf_type *t);
const char *zt_gguf_type_name(zt_gguf_type t);
/* elements per block (1 for the float types) and bytes per block */
int zt_gguf_block_elems(zt_gguf_type t);
size_t zt_gguf_block_bytes(zt_gguf_type t);
/* bytes of a row of n elements (n a multiple of the block) */
size_t zt_gguf_row_bytes(zt_gguf_type t, int64_t n);
/* llama_ftype of a file whose matrices are of type t (general.file_type) */
int zt_gguf_file_type(zt_gguf_type t);

/* whether t is one of the k-quants (blocks of 256) */
bool zt_gguf_type_is_k(zt_gguf_type t);

/* Encodes n floats (n a multiple of the block) into dst as ggml's reference quantizers do
 * (quantize_row_q8_0_ref, quantize_row_q4_0_ref, quantize_row_q{4,5,6}_K_ref; fp16/bf16
 * nearest-even). */
void zt_gguf_encode(zt_gguf_type t, void *dst, const float *src, int64_t n);
/* The inverse (dequantize_row_*): n floats from dst's blocks. */
void zt_gguf_decode(zt_gguf_type t, float *dst, const void *src, int64_t n);

/* gguf_kquant.c: the k-quants' blocks (t: q4_k, q5_k or q6_k; n a multiple of 256) */
void zt_gguf_kquant_encode(zt_gguf_type t, uint8_t *dst, const float *src, int64_t n);
void zt_gguf_kquant_decode(zt_gguf_type t, float *dst, const uint8_t *src, int64_t n);

#endif
