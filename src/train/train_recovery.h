/* train_recovery.h - what the training loop (trainer.c) keeps in its checkpoints and takes back from
 * them, and the two world-wide reductions its cross-rank decisions read (train_recovery.c). Internal
 * to src/train/. */
#ifndef ZT_TRAIN_RECOVERY_H
#define ZT_TRAIN_RECOVERY_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "ckpt/checkpoint.h"
#include "comm/comm.h"
#include "config/train_config.h"
#include "data/sampler.h"
#include "train/guard.h"
#include "metrics/metrics.h"

/* all[r * n + i] = world rank r's x[i] (a copy on one process; w NULL: this process alone) */
int zt_train_gather_world(zt_comm *w, const double *x, int n, double *all, const char *what, zt_error *err);
/* *x = the sum over the world's ranks, in rank order */
int zt_train_sum_world(zt_comm *w, double *x, const char *what, zt_error *err);
/* the loop's state a checkpoint carries: the skipped sample ranges and the loss-spike window */
void zt_train_run_state(zt_ckpt_run_state *r, const zt_sampler *ts, const zt_guard *g, uint64_t next);
/* a resumed run's skipped ranges (the commit's, then data.skip_samples; ZT_ERR_USAGE for a
 * configured range before the next sample the run reads) */
int zt_train_apply_skips(zt_sampler *ts, const zt_ckpt_run_state *r, const zt_train_config *cfg, uint64_t cursor,
                         zt_error *err);
/* "A..B" for each range of physical samples that logical [first, first + n) reads */
void zt_train_sample_ranges(const zt_sampler *ts, uint64_t first, uint64_t n, char *buf, size_t cap);
/* checkpoint.on_save_error continue: ZT_OK when the run goes on after a failed save, else rc */
int zt_train_on_save_error(const zt_train_config *cfg, int rc, bool final, long long step, zt_progress *prog,
                           zt_jsonl *log, int rank, int *failed, zt_error *err);
/* fault.loss_spike_policy rollback: every rank reloads the newest commit, the spike's batch skipped */
int zt_train_roll_back(zt_engine *e, const char *dir, const zt_train_config *cfg, zt_sampler *ts, zt_guard *g,
                       uint64_t first, uint64_t n, zt_comm *world_comm, int world, FILE *out, zt_ckpt_meta *meta,
                       char *commit, size_t cap, zt_error *err);

#endif
