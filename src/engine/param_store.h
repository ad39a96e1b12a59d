/* param_store.h - one owner for where the parameters live (FSDP2's per-parameter model): the
 * store's interface for the rest of the engine, the step, the collectives and checkpoints.
 *
 * A parameter's values live in exactly one master placement, chosen at create from the strategy
 * and the precision policy:
 *   full         the whole tensor in fp32 (ddp, zero1, zero2 under fp32 compute)
 *   pieces       this rank's dim-0 rows in fp32 (zero3; zero1/zero2 under bf16/fp16 compute with
 *                fp32 master weights: "master pieces", master_shard.c)
 *   bf16         the full tensor or the piece stored as bf16 bits (bf16-low: param_bf16.c)
 *   file         zero3's fp32 pieces in the NVMe store (param_offload.c)
 *   quantized    a frozen Linear of QLoRA's base (zt_param_desc.quant): NF4 or int8 bytes,
 *                replicated, beside any of the above for the other parameters (param_quant.c)
 * and, beside it, what the units read while they run:
 *   gathered     zero3: the full fp32 (or bf16) tensor between a unit's acquire and its release
 *   lp copy      the matrices' low-precision compute copy (compute_copy.c): full layout (ddp,
 *                zero1, zero2) or per gathered tensor (zero3)
 *   fp32 copy    master pieces: the full fp32 copy of the parameters units read as fp32
 *   views        bf16-low: fp32 views of the parameters a unit reads as fp32, while it runs
 *   dequantized  a quantized parameter in the compute dtype, while its unit runs
 * The store's fields are private to its files (param_store.c, param_bf16.c, master_shard.c,
 * param_offload.c, compute_copy.c, param_quant.c: param_store_internal.h); everything else asks through here.
 *
 * "Local layout" of parameter i: the full tensor where the master is full, the piece where it is
 * pieces (zero3, master pieces); elements of a local layout are what zt_store_read/write index. */
#ifndef ZT_PARAM_STORE_H
#define ZT_PARAM_STORE_H

#include "zerotrain/zerotrain.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct zt_param_store zt_param_store;

/* ---- life ---------------------------------------------------------------------------------- */
/* An empty store (no placement yet), or NULL when memory is out. */
zt_param_store *zt_store_new(void);
/* At create, after the plan: chooses the placement and allocates the master (class params; bf16
 * update chunk in class optimizer; master pieces' fp32 copies in class compute_copy). The file
 * placement allocates nothing here: its pieces get their kind when the offload store opens. */
int zt_store_create(zt_engine *e, zt_error *err);
/* At create, after the units' state: the compute copies (class compute_copy) and the units'
 * params_lp / fp32 params pointers that stay fixed for the engine's life. */
int zt_store_units_setup(zt_engine *e, zt_error *err);
/* At the end of create (the communication thread and the offload files there or not): the
 * residency rules (src/memory/residency.c) with the engine's actions. */
int zt_store_start(zt_engine *e, zt_error *err);
void zt_store_free(zt_engine *e);
/* Parameter i's initial values from the counter-based init (engine/init.h), in its placement. */
int zt_store_init(zt_engine *e, int i, uint64_t key, zt_error *err);

/* ---- where the master lives ------------------------------------------------------------------ */
bool zt_store_bf16(const zt_engine *e);           /* stored as bf16 (bf16-low) */
bool zt_store_local_is_piece(const zt_engine *e); /* the local layout is this rank's piece */
bool zt_store_master_pieces(const zt_engine *e);  /* zero1/zero2's fp32 master as pieces + copies */
bool zt_store_quantized(const zt_engine *e, int i); /* parameter i is kept quantized (param_quant.c) */
/* xxHash64 of quantized parameter i's bytes (what checkpoints record instead of the tensor), or 0 */
uint64_t zt_store_quant_hash(const zt_engine *e, int i);
int zt_store_file_kind(const zt_engine *e);       /* the pieces' kind in the NVMe store, or -1 */
void zt_store_set_file_kind(zt_engine *e, int kind); /* offload.c, when the store opens */
/* Parameter i's local layout as fp32 in memory, or NULL (bf16, in a file, quantized). Writing through it
 * needs zt_store_changed afterwards. */
float *zt_store_local_fp32(zt_engine *e, int i);
/* The first element of parameter i's local layout in the full tensor (0 for a full layout). */
int64_t zt_store_local_begin(const zt_engine *e, int i);
size_t zt_store_local_numel(const zt_engine *e, int i);

/* ---- element access (any placement) ---------------------------------------------------------- */
/* dst/src (n fp32) <- / -> elements [begin, begin + n) of parameter i's local layout: bf16 widens
 * exactly, writing to bf16 rounds to nearest; files are read and written through the store's
 * random access. A write marks the compute copies stale. */
int zt_store_read(zt_engine *e, int i, size_t begin, size_t n, float *dst, zt_error *err);
int zt_store_write(zt_engine *e, int i, size_t begin, size_t n, const float *src, zt_error *err);
/* Idle fp32 memory to stream parameters through (*floats of it; the update chunk, the NVMe
 * staging), or NULL when the master is fp32 in memory. */
float *zt_store_bounce(zt_engine *e, size_t *floats);
/* The local layout of parameter i from `local` (the tensor of this rank's tp part: the piece's
 * rows are taken from it) with its compute copies; any placement. */
int zt_store_set(zt_engine *e, int i, const float *local, zt_error *err);
/* The whole local tensor of parameter i into dst (a collective over the shard group where pieces). */
int zt_store_gather(zt_engine *e, int i, float *dst, zt_error *err);
/* Master pieces: elements [begin, begin + n) of parameter i's full tensor are src (a checkpoint's
 * rows): the replicated copies take them. */
void zt_store_copies_write(zt_engine *e, int i, size_t begin, size_t n, const float *src);

/* ---- the units ---------------------------------------------------------------------------- */
/* Before unit u runs: its parameters as full tensors (zero3: gathered, and the gather of unit
 * `next` (-1: none) started as a prefetch) and their compute copies current. */
int zt_store_acquire(zt_engine *e, int u, int next, zt_error *err);
/* bf16-low: unit u's fp32 views (class gathered) just before it runs, freed right after. No-ops
 * elsewhere. */
int zt_store_views_make(zt_engine *e, int u, zt_error *err);
void zt_store_views_free(zt_engine *e, int u);
/* After unit u's forward (training: backward follows) / backward: zero3 releases the gathered
 * tensors (and copies) no later unit of the pass reads. */
void zt_store_after_forward(zt_engine *e, int u, bool training);
void zt_store_after_backward(zt_engine *e, int u);

/* ---- compute copies --------------------------------------------------------------------------- */
bool zt_store_has_lp(const zt_engine *e, int i);         /* keeps a compute copy of parameter i */
size_t zt_store_lp_bytes(const zt_engine *e, int64_t numel); /* bytes of numel copy elements */
/* Parameter i's compute copy in the full layout, from element begin (NULL: none kept there). */
void *zt_store_full_lp_at(const zt_engine *e, int i, size_t begin);
/* The parameters changed outside an update (an init, a caller's write): copies stale. */
void zt_store_changed(zt_engine *e);
/* After a checkpoint load wrote every parameter: copies stale, and the file placement's checksums
 * taken from what the files now hold (the first gathers check them). */
int zt_store_loaded(zt_engine *e, zt_error *err);
/* Whether the update may write the full-layout copies in its own pass (AdamW's fused rounding):
 * ddp's copies of fp32 full parameters, current before the step. */
bool zt_store_copies_fusable(const zt_engine *e);
/* After the optimizer updated the master (copies_written: it wrote the copies in its pass): the
 * copies made current or marked stale, and what is replicated all-gathered (master pieces' copies,
 * zero1/zero2's full parameters). */
int zt_store_after_update(zt_engine *e, bool copies_written, zt_error *err);

/* ---- what the collectives move (collect.c) --------------------------------------------------- */
/* The pieces in memory (fp32, or bf16 under bf16-low; *elem their element size), or NULL. */
const void *zt_store_pieces(const zt_engine *e, size_t *elem);
/* Where zero3's gathers land: one slot per parameter (bf16-low: the gathered bf16 tensors). */
void **zt_store_gathered_slots(zt_engine *e);
/* Parameter i's full layout (fp32, or bf16 under bf16-low), where the master is full. */
void *zt_store_full_at(zt_engine *e, int i);

#endif
