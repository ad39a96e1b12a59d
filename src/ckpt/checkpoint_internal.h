/* checkpoint_internal.h - what checkpoint.c (save) and checkpoint_load.c (load) share: the
 * format's name and version, the kinds of a slice, and what a writer holds (checkpoint_layout.c):
 * which rows of which kind this rank reads and writes, where they are, and the file numbering. */
#ifndef ZT_CKPT_CHECKPOINT_INTERNAL_H
#define ZT_CKPT_CHECKPOINT_INTERNAL_H

#include "ckpt/checkpoint.h"
#include "comm/comm.h"
#include "comm/mesh.h"
#include "engine/engine_state.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FORMAT "zerotrain-checkpoint"
#define VERSION 2 /* 2: slices may be column ranges (col0, cols: tensor parallelism); 1: whole rows */
#define NKINDS 3
extern const char *const KIND_NAMES[NKINDS]; /* "param", "exp_avg", "exp_avg_sq" */

/* Kinds a trainable parameter's slice has: the parameter, then each optimizer moment. */
int zt_ckpt_n_kinds(const zt_engine *e);
/* Where parameter i's rows of an optimizer state start in this rank's state layout; where this
 * writer's rows of kind k start in what kind_read reads. */
size_t zt_ckpt_state_base(const zt_engine *e, int i);
size_t zt_ckpt_kind_base(const zt_engine *e, int i, int k);
/* n elements of kind k of parameter i from element `at` (the parameter's local layout, or its rows
 * in the state layout), through fp32 whatever the placement; and back. */
int zt_ckpt_kind_read(zt_engine *e, int k, int i, size_t at, size_t n, float *dst, zt_error *err);
int zt_ckpt_kind_write(zt_engine *e, int k, int i, size_t at, size_t n, const float *src, zt_error *err);
/* Idle fp32 memory to bounce kind k through (*floats of it), or NULL. */
float *zt_ckpt_kind_bounce(zt_engine *e, int k, size_t *floats);
/* This shard's rows of kind k of parameter i, and where they are as fp32 (NULL: through kind_read). */
float *zt_ckpt_local_rows(zt_engine *e, int i, int k, int64_t *row0, int64_t *rows);
/* The job and this rank's place in it; the files are numbered stage-major, then part-major. */
const zt_mesh *zt_ckpt_mesh_of(const zt_engine *e);
zt_comm *zt_ckpt_job_comm(const zt_engine *e);
int zt_ckpt_file_index(const zt_engine *e);
/* The writers of each (stage, tensor-parallel part)'s files: the shard group's ranks, or with the
 * experts stored E/ep a rank every data-parallel rank */
int zt_ckpt_writers(const zt_engine *e);
/* Writer s of w's rows of parameter p: rows [*lo, *hi) of part *part's tensor (*part: in, a dense
 * parameter's tensor-parallel part; out, a stored expert tensor's ep part; checkpoint_layout.c) */
void zt_ckpt_writer_rows(const zt_engine *e, const zt_param_desc *p, int w, int s, int *part, int64_t *lo,
                         int64_t *hi);
/* Whether this rank's part writes parameter i; the whole model a manifest describes; the stage
 * writing parameter i; whether this rank writes a file at all. */
bool zt_ckpt_part_writes(const zt_engine *e, int i);
const zt_model *zt_ckpt_whole_model(const zt_engine *e);
int zt_ckpt_stage_of(const zt_engine *e, int i);
bool zt_ckpt_is_writer(const zt_engine *e);
/* onebit_state.c: 1-bit Adam's per-rank error feedback, a file per rank in the commit (every rank
 * calls both; no-ops without the errors). */
int zt_ckpt_onebit_save(zt_engine *e, const char *dir, zt_error *err);
int zt_ckpt_onebit_load(zt_engine *e, const char *commit, zt_error *err);

#endif
