/* precision_meta.h - the dtypes a checkpoint's values carry (its manifest's "precision": the
 * parameters and the optimizer moments) against the run that loads it: a narrowing cast is
 * refused unless allowed, a widening one is said (docs/checkpoints.md, row C15 of
 * docs/reliability.md). Internal to src/ckpt/. */
#ifndef ZT_CKPT_PRECISION_META_H
#define ZT_CKPT_PRECISION_META_H

#include "zerotrain/zerotrain.h"

#include <cjson/cJSON.h>
#include <stdio.h>

/* checkpoint.c: commit/manifest.json parsed after its checksum, format and version are checked
 * (NULL with err filled otherwise). The caller frees it with cJSON_Delete. */
cJSON *zt_ckpt_manifest_read(const char *commit, zt_error *err);

/* The commit's parameter and moment dtypes against e's policy. Narrowing (fp32 master weights or
 * fp32 moments into bf16-low's bf16, or between the 16-bit types): without allow_cast ZT_ERR_CKPT
 * (exit 4) naming the commit, both precisions, the dtypes and the tensors, and *refused = true;
 * with it, a note says what is rounded. Widening (bf16-low's values into fp32 ones, exact): a note.
 * A manifest that cannot be read is left to zt_ckpt_load to report (ZT_OK here). notes may be
 * NULL. */
int zt_ckpt_check_cast(const char *commit, const zt_engine *e, bool allow_cast, FILE *notes, bool *refused,
                       zt_error *err);

#endif
