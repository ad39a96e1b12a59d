/* slices.h - where a rank's rows of a parameter are in a checkpoint's logical tensors (slices.c):
 * the rectangles a tensor-parallel part's rows cover, and reading any rectangle back from the
 * slices of a manifest, whoever wrote them. Internal to src/ckpt/.
 *
 * A checkpoint stores logical tensors (docs/checkpoints.md), each viewed as rows x row_len
 * (logical_shape[0] x the rest): a slice is rows [row0, row0 + rows) x columns [col0, col0 + cols)
 * of it, row-major in its file (col0/cols absent: whole rows, the only form before tensor
 * parallelism). A rank holds rows [lo, hi) of its local tensor (its part: zt_param_desc's tp_* cut,
 * inside the ep_* cut of the experts stored E/ep a rank),
 * which are the elements of at most tp_blocks rectangles, in order; loading intersects those with
 * every slice of the manifest, so a checkpoint written under any tp x dp layout loads under any
 * other. */
#ifndef ZT_CKPT_SLICES_H
#define ZT_CKPT_SLICES_H

#include "zerotrain/zerotrain.h"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define ZT_CKPT_WHOLE_MAX 9007199254740992.0 /* 2^53: every integer up to it is exact in a double */

/* The number at key (a cJSON number), else 0 with *ok cleared. */
double zt_ckpt_num(const cJSON *o, const char *key, bool *ok);
/* A whole number in [lo, hi] (|lo|, |hi| <= 2^53) at key; anything else (missing, fractional,
 * out of range, huge) clears *ok and gives lo: never a float-to-integer cast out of range. */
int64_t zt_ckpt_num_int(const cJSON *o, const char *key, double lo, double hi, bool *ok);
/* pread of exactly n bytes at off (EINTR retried); -1 on an error or a short file. */
int zt_ckpt_read_at(int fd, void *p, size_t n, off_t off);

typedef struct zt_rect {
    int64_t r0, nr; /* logical rows [r0, r0 + nr) */
    int64_t c0, nc; /* columns [c0, c0 + nc) of each */
} zt_rect;

/* The part index the functions below take for tp part tp_part (and ep part ep_part) of p: the tp
 * part, or for an expert tensor stored E/ep a rank (zt_param_desc.ep_parts > 1; each ep part's
 * experts cut by tp where tp cuts them: zt_tp_ep_view) tp_part x ep_parts + ep_part. */
int zt_ckpt_part_index(const zt_param_desc *p, int tp_part, int ep_part);

/* The rectangles of parameter p's logical tensor that rows [lo, hi) of part `part`'s local tensor
 * hold, in local order (their elements, row-major, one rectangle after the other, are the local
 * rows' elements); at most p->tp_blocks. Returns the count. A whole parameter: rows [lo, hi). */
int zt_ckpt_part_rects(const zt_param_desc *p, int part, int64_t lo, int64_t hi, zt_rect *out);

/* Part `part`'s local tensor of p as rows x row_len (the plan's view: shape[0] x the rest). */
void zt_ckpt_part_shape(const zt_param_desc *p, int part, int64_t *rows, int64_t *row_len);

/* The files of a commit being read. */
typedef struct zt_ckpt_files {
    const char *commit;
    const int *fds;
    const uint64_t *size;
    int n;
} zt_ckpt_files;

/* dst (rect r, row-major, r.nc floats per row) = kind `kind` of manifest tensor tj (row_len floats
 * per logical row) from every slice that overlaps r. ZT_ERR_CKPT when a slice is malformed or lies
 * past its file, or when the slices do not cover r exactly once (naming pname and the rows);
 * ZT_ERR_IO for a failed read. */
int zt_ckpt_fill_rect(const zt_ckpt_files *fs, const cJSON *tj, const char *kind, zt_rect r, int64_t row_len,
                      float *dst, const char *pname, zt_error *err);
/* dst (rows [lo, hi) of parameter p's local tensor, as this process holds it) from the checkpoint:
 * its rectangles (zt_ckpt_part_rects of p's own part), each filled in turn. */
int zt_ckpt_fill_local_rows(const zt_ckpt_files *fs, const cJSON *tj, const char *kind, const zt_param_desc *p,
                            int64_t lo, int64_t hi, float *dst, zt_error *err);

#endif
