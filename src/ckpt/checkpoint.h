/* checkpoint.h - sharded, checksummed, atomically committed training checkpoints that load into
 * any world size and any strategy (docs/checkpoints.md has the format).
 *
 *   DIR/step-00000100/manifest.json        what every slice is and where it lives
 *   DIR/step-00000100/manifest.json.xxh64  the manifest's own checksum (16 hex digits)
 *   DIR/step-00000100/rank-00003.bin       rank 3's slices: raw fp32 rows, back to back
 *   DIR/latest                             "step-00000100\n", replaced by tmp + rename
 *
 * A slice is a row range [row0, row0 + rows) of one kind (param, exp_avg, exp_avg_sq, momentum)
 * of one parameter. Saving writes each rank's own rows (replicas write nothing twice); loading
 * reads, for the rows the new layout gives this rank, whichever slices overlap them, so any
 * strategy and world size loads any other. */
#ifndef ZT_CHECKPOINT_H
#define ZT_CHECKPOINT_H

#include "zerotrain/zerotrain.h"

#include <stdio.h>

/* What the training loop carries across a resume besides the engine (run_state.c; the manifest's
 * "run_state"): the ranges of global samples skipped (data.skip_samples, loss-spike rollbacks) and
 * the loss-spike detector's window, ring order and all, so a resumed run skips and detects exactly
 * as the uninterrupted one. */
#define ZT_CKPT_MAX_SKIPS 64
#define ZT_CKPT_MAX_WINDOW 4096
#define ZT_CKPT_MAX_SOURCES 64
typedef struct zt_ckpt_run_state {
    int n_skips;
    uint64_t skip_start[ZT_CKPT_MAX_SKIPS], skip_count[ZT_CKPT_MAX_SKIPS]; /* physical samples */
    int window;        /* fault.loss_spike_window it was kept for; 0: none kept */
    int n_losses, head; /* losses[0..n_losses) as the detector's ring holds them; its next slot */
    double losses[ZT_CKPT_MAX_WINDOW];
    /* records (data/mixture.h): each source's dataset cache key and how many sequences it gave
     * before samples_consumed (a function of it; kept to say, and to notice changed data) */
    int n_sources;
    uint64_t source_key[ZT_CKPT_MAX_SOURCES], source_cursor[ZT_CKPT_MAX_SOURCES];
} zt_ckpt_run_state;

typedef struct zt_ckpt_meta {
    int64_t step;              /* optimizer steps done */
    uint64_t samples_consumed; /* the global sample index the next step starts at */
    uint64_t config_hash;      /* of the resolved config (informational; mismatch is reported) */
    char strategy[16];         /* as saved */
    int world;                 /* as saved */
    /* engine state the manifest carries, taken when the save starts (an async commit happens a
     * step later): Adam's step count (fp16 skips can make it trail step), fp16's loss scaler */
    uint64_t optimizer_step;
    zt_loss_scaler scaler;
    zt_ckpt_run_state run; /* the trainer's state (above) */
} zt_ckpt_meta;

/* Collective over the engine's world: writes DIR/step-<meta->step> atomically and points
 * DIR/latest at it. Every rank returns the same status (a failure anywhere means no commit).
 * keep_last > 0 deletes older commits beyond the newest keep_last (never the one just written). */
int zt_ckpt_save(zt_engine *e, const char *dir, const zt_ckpt_meta *meta, int keep_last, zt_error *err);

/* Async save: everything zt_ckpt_save does, but this rank's shard is snapshotted into memory now
 * and written by a background thread while training continues; zt_ckpt_async_finish (at the next
 * step boundary, on every rank) waits for the write and commits. A write error on any rank
 * surfaces there, on every rank, and nothing is committed. Costs one copy of this rank's states. */
typedef struct zt_ckpt_async zt_ckpt_async;
int zt_ckpt_save_async(zt_engine *e, const char *dir, const zt_ckpt_meta *meta, int keep_last,
                       zt_ckpt_async **out, zt_error *err);
int zt_ckpt_async_finish(zt_ckpt_async *a, zt_error *err);
/* On an error path (not a collective): waits for the writer thread and drops the save uncommitted. */
void zt_ckpt_async_abandon(zt_ckpt_async *a);

/* Loads a commit (a step-N directory, or DIR holding `latest`/step-N commits: the newest valid one)
 * into e, resharding as needed; fills meta. ZT_ERR_CKPT names the file and what is wrong. Not a
 * collective (each rank reads what it needs). */
int zt_ckpt_load(zt_engine *e, const char *path, zt_ckpt_meta *meta, zt_error *err);

/* Resolves path to a commit directory: itself if it holds a manifest, else DIR/latest, else the
 * newest step-N with a valid manifest. */
int zt_ckpt_resolve(const char *path, char *commit, size_t cap, zt_error *err);

/* The steps N of DIR's step-N directories (committed or not; step-N.tmp never), ascending, at most
 * cap of them; 0 when DIR cannot be read. */
int zt_ckpt_list_steps(const char *dir, int64_t *steps, int cap);

/* resume.c: loads what `path` names into e (a collective only in that every rank calls it):
 * a step-N commit as given; a checkpoint directory's commit per zt_ckpt_resolve, and when that
 * one is damaged (ZT_ERR_CKPT: a checksum, size, missing file or manifest) and fallback is set,
 * the newest older commit that loads, after writing one line per skipped commit, naming it and
 * why, to notes (NULL: none). ZT_ERR_CKPT listing every commit tried when none loads. A commit
 * whose fp32 values this run's precision would round (bf16-low) is refused with ZT_ERR_CKPT unless
 * allow_cast (checkpoint.allow_cast, --allow-cast), and never fallen back from; a widening load
 * is noted (precision_meta.h). */
int zt_ckpt_resume(zt_engine *e, const char *path, bool fallback, bool allow_cast, FILE *notes, char *commit,
                   size_t cap, zt_ckpt_meta *meta, zt_error *err);

/* probe.c: creates DIR (and its parents) and writes and removes a probe file there as rank `rank`:
 * ZT_ERR_IO naming the directory and the error when this rank could not save into it. */
int zt_ckpt_probe(const char *dir, int rank, zt_error *err);

/* Checks the manifest's checksum and every file's size and xxh64. */
int zt_ckpt_verify(const char *path, zt_error *err);

/* Reads the model a commit was saved from (to build it before loading); a manifest without
 * model.arch is GPT-2. */
int zt_ckpt_read_model(const char *path, zt_model_spec *spec, zt_error *err);

#endif
