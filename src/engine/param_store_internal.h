/* param_store_internal.h - the parameter store's own state, shared by the store's files only:
 * param_store.c (placement, element access, the units' acquire/release), param_bf16.c (bf16-low's
 * 2-byte master), master_shard.c (zero1/zero2's fp32 master pieces and replicated copies),
 * param_offload.c (zero3's pieces in NVMe files), compute_copy.c (the matrices' low-precision
 * copies), param_quant.c (the quantized frozen base). Nothing else includes it (tests/param_store_fields.sh checks that the fields are not
 * named outside these files). */
#ifndef ZT_PARAM_STORE_INTERNAL_H
#define ZT_PARAM_STORE_INTERNAL_H

#include "engine/engine_internal.h"
#include "engine/param_store.h"
#include "memory/residency.h"

struct zt_param_store {
    /* the master: exactly one of full, pieces, full_bf16, pieces_bf16 is set, or none (file) */
    float *full;              /* full placement: every parameter's full fp32 tensor, full layout */
    float *pieces;            /* pieces placement: this rank's fp32 rows, shard layout (zero3, and
                                 zero1/zero2 under master_pieces) */
    bool master_pieces;       /* zero1/zero2 under bf16/fp16 compute with fp32 master weights: the
                                 master is pieces, the units read full_lp and fp32_copy */
    bool bf16;                /* bf16-low: the master is bf16 bits in full_bf16 or pieces_bf16 */
    uint16_t *full_bf16, *pieces_bf16;
    float *chunk_buf;         /* bf16-low: `chunk` fp32 elements to update, load and save through */
    size_t chunk;
    int file_kind;            /* the pieces' kind in the NVMe store (param_offload.c), or -1 */
    /* what the units read */
    float *fp32_copy;         /* master_pieces: fp32 copies of the parameters units read as fp32
                                 (zt_param_reads_fp32), at fp32_copy_off[i]; NULL when none */
    size_t *fp32_copy_off;    /* (n_params) SIZE_MAX for the parameters without one */
    void *full_lp;            /* ddp/zero1/zero2: compute copies of the matrices, full layout */
    bool lp_stale;            /* full_lp no longer matches the master */
    float **gathered;         /* (n_params) zero3: the full fp32 tensor while acquired, else NULL */
    void **gathered_lp;       /* (n_params) zero3: the compute copy while acquired (bf16-low: the
                                 gathered bf16 parameter itself, matrices or not) */
    uint64_t *gather_seq;     /* (n_params) the communication thread's job that fills gathered[i] */
    zt_residency res;         /* zero3: what is gathered, copied, read into windows, and when
                                 (src/memory/residency.c, the rules the memory plan follows) */
    /* the quantized base (param_quant.c): the parameters marked zt_param_desc.quant */
    uint8_t *quant;           /* every quantized parameter's bytes, at quant_off[i] (class params) */
    size_t *quant_off;        /* (n_params) byte offsets; SIZE_MAX for the other parameters */
    uint64_t *quant_hash;     /* (n_params) xxh64 of each one's whole form, taken as it was quantized */
    void **deq;               /* (n_params) a quantized parameter dequantized into the compute dtype
                                 while its unit runs (class gathered), else NULL */
};

/* param_bf16.c: bf16-low's 2-byte master */
int zt_param_bf16_alloc(zt_engine *e, zt_error *err);
void zt_param_bf16_free(zt_engine *e);
uint16_t *zt_param_bf16_local(zt_engine *e, int i);   /* parameter i's local layout as bf16 */
void zt_param_bf16_init(zt_engine *e, int i, uint64_t key);

/* master_shard.c: zero1/zero2's fp32 master pieces and replicated compute copies */
int zt_master_alloc(zt_engine *e, zt_error *err);   /* at create: pieces, fp32_copy (full_lp: compute_copy.c) */
void zt_master_free(zt_engine *e);
/* The full fp32 tensor parameter i is handed to units as, or NULL (read through params_lp only). */
float *zt_master_fp32_view(zt_engine *e, int i);
/* After the optimizer updated the pieces: the ranks all-gather the new compute copies (2-byte
 * elements under bf16) and fp32 copies over the shard group; one shard: rounded locally. */
int zt_master_refresh(zt_engine *e, zt_error *err);
/* Initial values: the pieces and every rank's copies from the counter-based init (engine/init.h). */
void zt_master_init(zt_engine *e, int i, uint64_t key);

/* compute_copy.c: the matrices' low-precision copies */
int zt_copies_setup(zt_engine *e, zt_error *err);   /* full_lp, gathered_lp, units' params_lp */
void zt_copies_free(zt_engine *e);
/* Before unit u runs: the full-layout copies made current, the unit's params_lp pointed at its
 * copies (zero3: the gathered ones). */
void zt_copies_refresh_unit(zt_engine *e, int u);
/* zero3: parameter i's copy from its gathered tensor, for unit u (class gathered). */
int zt_copies_make(zt_engine *e, int u, int i, zt_error *err);
void zt_copies_release(zt_engine *e, int i);        /* zero3: with the gathered tensor */

/* param_quant.c: the quantized frozen base */
int zt_quant_alloc(zt_engine *e, zt_error *err);    /* at create: every quantized parameter's bytes */
void zt_quant_free(zt_engine *e);
int zt_quant_init(zt_engine *e, int i, uint64_t key, zt_error *err); /* quantized from the init */
/* Elements [begin, begin + n) dequantized to fp32 / written: the whole tensor only, quantized */
int zt_quant_read(zt_engine *e, int i, size_t begin, size_t n, float *dst, zt_error *err);
int zt_quant_write(zt_engine *e, int i, size_t begin, size_t n, const float *src, zt_error *err);
/* The whole tensor dequantized to fp32; sharded (zero3/hybrid), a collective over the shard group. */
int zt_quant_gather(zt_engine *e, int i, float *dst, zt_error *err);
/* Before unit u runs: its quantized parameters dequantized, its params / params_lp pointed at them;
 * after its forward or backward: dropped. */
int zt_quant_acquire(zt_engine *e, int u, zt_error *err);
void zt_quant_release(zt_engine *e, int u);

#endif
