/* run_state.h - the manifest's "run_state" object (checkpoint.h's zt_ckpt_run_state): what the
 * training loop carries across a resume besides the engine. Internal to src/ckpt/. */
#ifndef ZT_CKPT_RUN_STATE_H
#define ZT_CKPT_RUN_STATE_H

#include "ckpt/checkpoint.h"

#include <cjson/cJSON.h>

/* Adds "run_state": {"skipped_samples": [[start, count], ...], "loss_window": {"size", "head",
 * "losses": [...]}} to root (the window only when r->window > 0). */
void zt_run_state_write(cJSON *root, const zt_ckpt_run_state *r);
/* Reads it back; a manifest without "run_state" (older ones) is an empty state. ZT_ERR_CKPT naming
 * commit's manifest when it is malformed: counts past the caps, numbers that are not whole or not
 * in range, a head outside the window, a loss that is not a finite number. */
int zt_run_state_read(const cJSON *root, const char *commit, zt_ckpt_run_state *r, zt_error *err);

#endif
