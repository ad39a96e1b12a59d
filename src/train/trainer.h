/* trainer.h - the training loop behind `zerotrain train` (see trainer.c): the library's top layer,
 * src/train/, above the engine, checkpoints, data, configuration and metrics. */
#ifndef ZT_TRAIN_TRAINER_H
#define ZT_TRAIN_TRAINER_H

#include "config/train_config.h"

#include <stdio.h>

typedef struct zt_train_options {
    FILE *out;                /* progress and summary (stdout when NULL); rank 0 only */
    zt_comm *world;           /* the data-parallel world, or NULL for one process */
    const char *save_path;    /* write the final parameters here (weights file), or NULL */
    const char *init_weights; /* start from this weights file instead of the seeded init, or NULL */
    const char *ckpt_dir;     /* sharded checkpoints go here (src/ckpt/checkpoint.h), or NULL */
    int64_t ckpt_every;       /* save every N steps (0: only at the end) */
    int keep_last;            /* keep the newest K commits (0: all) */
    const char *trace_path;   /* Chrome trace: <path>.rank<r>.json per rank, merged into path; or NULL */
    bool comm_log;            /* record every collective; rank 0 prints the comm log at the end */
    bool ckpt_async;          /* write checkpoints in the background, commit at the next step */
    const char *resume;       /* a commit or checkpoint directory to resume from, or NULL */
    int64_t stop_after;       /* stop (after saving) once this step is done; 0: run to the end */
} zt_train_options;

typedef struct zt_train_result {
    double first_loss, final_loss, final_val_loss, seconds;
    int64_t steps;
    uint64_t param_hash; /* xxh64 of the final parameters (full tensors, any strategy) */
    zt_comm_bytes last_step_bytes; /* this rank's collective traffic in the last step */
    int stop_signal; /* != 0: stopped early on a stop request (SIGTERM or SIGINT, on any rank)
                        after saving what could be saved; the job exits ZT_EXIT_STOPPED */
} zt_train_result;

/* The exit code of a run stopped by SIGTERM/SIGINT at a step boundary (EX_TEMPFAIL: "try again";
 * its checkpoint, when a directory is configured, is committed). */
#define ZT_EXIT_STOPPED 75

/* Trains per cfg. Errors name the file/step; ZT_ERR_NUMERICS if the gradients go non-finite.
 * A stop request (core/stop.h) seen by any rank ends the run at the next step boundary on every
 * rank, after a synchronous checkpoint when opts->ckpt_dir is set: ZT_OK with result->stop_signal. */
int zt_train(const zt_train_config *cfg, const zt_train_options *opts, zt_train_result *result,
             zt_error *err);

#endif
