/* train_internal.h - one training run's state (zt_run), shared by the files of the training loop:
 * trainer.c (the sequence and the step loop), train_start.c (data, model, set-up, where the run
 * starts from), train_step.c (one step), train_recovery.c (checkpoints, resume, rollback),
 * train_eval.c (validation), train_report.c (what the run prints and logs), step_deadline.c (the
 * collective deadline).
 * Internal to src/train/. */
#ifndef ZT_TRAIN_INTERNAL_H
#define ZT_TRAIN_INTERNAL_H

#include "ckpt/checkpoint.h"
#include "memory/plan.h"
#include "data/bpe.h"
#include "data/chat_template.h"
#include "data/mixture.h"
#include "data/sampler.h"
#include "metrics/metrics.h"
#include "train/guard.h"
#include "train/setup.h"
#include "train/trainer.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* The collective deadline (comm.timeout_s, docs/reliability.md): fixed when the key is > 0 (or
 * ZT_COMM_TIMEOUT is set); else automatic: the comms' 300 s until the first step is done, then
 * max(60 s, 10 x the slowest step so far) during steps and max(300 s, 10 x the slowest save or
 * evaluation so far) around them and after the last step. A deadline only fires when no message moves for that long. */
typedef struct zt_step_deadline {
    bool automatic;
    double slowest_step, slowest_save;
} zt_step_deadline;

void zt_step_deadline_init(zt_step_deadline *d, const zt_train_config *cfg, FILE *out);
void zt_step_deadline_for_steps(const zt_step_deadline *d);
void zt_step_deadline_for_save(const zt_step_deadline *d);

/* The run's data when it is records (train_data.c): the tokenizer and template, the dataset caches,
 * their packing, the mixtures the samplers read. */
typedef struct zt_run_data {
    bool records;                 /* records, not a token file */
    bool positions;               /* packed: each batch carries its records' positions */
    zt_bpe *tok;
    zt_chat_template *tmpl;
    zt_dataset *ds;               /* (n_ds) the sources' caches, then data.val's */
    zt_packed *tp, *vp;           /* (n_tp) training sequences per source; (n_vp) validation ones */
    const zt_packed **tpp, **vpp;
    int n_ds, n_tp, n_vp;
    zt_mixture tmix, vmix;
    int32_t *pos;                 /* (held * B * T) the batch's positions */
    double *mb_weight;            /* (A) a pipeline step's micro-batches' loss weights */
} zt_run_data;

typedef struct zt_run {
    /* the call */
    const zt_train_config *cfg;
    const zt_train_options *opts; /* may be NULL */
    zt_train_result *result;      /* may be NULL */
    FILE *out;                    /* rank 0: opts->out or stdout; other ranks: devnull */
    FILE *devnull;
    zt_comm *world_comm;          /* NULL: one process */
    int rank, world;              /* the job: rank 0 speaks, every rank writes its trace */
    int B, T, A;                  /* micro-batch, sequence length, micro-batches per step */
    bool have_val;
    /* the data, split over the dp ranks */
    zt_token_file train, valf;
    zt_sampler ts, vs;
    zt_run_data data;
    int32_t *inp, *tgt;           /* (held * B * T): a pipeline holds the step's micro-batches at once */
    /* context parallelism (context_split.c): the sampler's whole sequences, cut into this rank's chunks */
    int cp, cp_part;              /* parts of every sequence (1: whole) and this rank's */
    int32_t *cpw_inp, *cpw_tgt, *cpw_pos; /* (held * B * T) whole sequences (cpw_pos: records packed only) */
    int32_t *cp_pos;              /* (held * B * T/cp) the local tokens' whole-sequence positions */
    /* the model and its engine (setup.h) */
    zt_model_spec spec;
    zt_model *model;
    zt_engine_options eo;
    zt_train_setup s;             /* mesh, stage model, engine, pipeline */
    zt_pp_schedule sched;
    int drank, dworld;            /* this rank's place in the data-parallel axis */
    zt_batch *mbs;                /* (A) a pipeline step's micro-batches */
    float *mb_loss;               /* (2A) each micro-batch's fault factor, then its loss */
    /* where the run starts from and what it keeps */
    zt_ckpt_meta *cmeta;          /* the commit resumed from or rolled back to (large: the run state) */
    bool resumed, rollback_policy, ckpt_async;
    zt_ckpt_async *pending;       /* an async checkpoint being written */
    int64_t pending_step;         /* its step - 1 */
    int failed_saves;             /* checkpoint.on_save_error continue: saves that failed so far */
    uint64_t frozen0;             /* xxh64 of the frozen weights at the start */
    /* the loop */
    zt_guard guard;               /* the non-finite and loss-spike policies, the straggler report */
    double *per_rank, *work;      /* (world * 4), (world): the step agreement's values */
    int64_t start_step, end_step, steps_done, skipped_steps;
    uint64_t sample_base;         /* logical global sample index where start_step begins */
    uint64_t per_step_samples;
    int64_t micro_per_step, tokens_per_step;
    int threads;
    double flops_per_token, hw_flops_per_token, peak; /* MFU and HFU */
    double t_start, t_loop;       /* the run's clock; eval.target_loss's (from the first step) */
    double first_loss, last_loss, last_val;
    zt_offload_stats last_io;     /* the last step's NVMe traffic (rank 0's files) */
    zt_step_deadline dl;
    zt_memory_plan plan;          /* the engine's, as the banner prints it */
    /* what is said */
    zt_jsonl log;
    zt_progress prog;
} zt_run;

/* what the step loop does after a step (train_step.c) */
typedef enum zt_step_next { ZT_STEP_NEXT, ZT_STEP_ROLLED_BACK, ZT_STEP_STOPPED } zt_step_next;

double zt_train_now(void); /* trainer.c: the run's clock, seconds */

/* train_data.c: the token files or records and their samplers; freed */
int zt_train_open_data(zt_run *r, zt_error *err);
void zt_train_close_data(zt_run *r);
/* --resume on records: the sources' cursors said, and whether the checkpoint's data was the same */
void zt_train_data_resumed(zt_run *r);

/* train_start.c: the data, the model, the set-up, where the run starts from, the buffers and logs */
int zt_train_start(zt_run *r, zt_error *err);

/* train_report.c */
void zt_train_banner(zt_run *r);                        /* the run's first lines; ckpt_async decided */
int zt_train_log_start(zt_run *r, zt_error *err);       /* the JSONL's cpu, precision, memory plan events */
int zt_train_report_end(zt_run *r, zt_error *err);      /* after the last step: memory, hash, summary, saves */

/* context_split.c: context parallelism's micro-batches. zt_train_cp_open (after the set-up) takes the
 * rank's part from the mesh and allocates the whole sequences' staging when cp > 1. The sampler
 * then writes whole sequences where zt_train_cp_whole points (slot: the micro-batch's place in a
 * pipeline step, else 0); zt_train_cp_cut makes *b, a batch of the whole (B, T) sequences, this
 * rank's part: inputs, targets and positions of its two chunks (in r->inp, r->tgt, r->cp_pos at
 * the slot), cp_positions the whole sequences' (packed records) or NULL; *counted = its counted
 * targets. Without cp both leave everything as it is. */
int zt_train_cp_open(zt_run *r, zt_error *err);
void zt_train_cp_whole(zt_run *r, size_t slot, int32_t **inp, int32_t **tgt, int32_t **pos);
void zt_train_cp_cut(zt_run *r, size_t slot, zt_batch *b, uint64_t *counted);
void zt_train_cp_close(zt_run *r);

/* train_eval.c: the mean validation loss; eval.target_loss reached (said and logged) */
int zt_train_evaluate(zt_run *r, double *out, zt_error *err);
int zt_train_target_reached(zt_run *r, const zt_step_metrics *m, double seconds, uint64_t tokens, zt_error *err);

/* train_step.c: step `step` (0-based); *next says how the loop goes on */
int zt_train_step(zt_run *r, int64_t step, zt_step_next *next, zt_error *err);

/* train_recovery.c, the parts that read the run */
int zt_train_resume(zt_run *r, zt_error *err);           /* --resume: the commit, agreed by every rank */
int zt_train_check_ckpt_dir(zt_run *r, zt_error *err);   /* rollback's directory, every rank can write */
/* the loss-spike rollback at `step`: *rolled when every rank went back to the newest commit */
int zt_train_spike_rollback(zt_run *r, int64_t step, double loss_sum, double spike_z, double spike_mean,
                            double spike_sd, bool *rolled, zt_error *err);
/* the checkpoint after `step` when due (last, stop: the final one), or the async one's commit */
int zt_train_save_due(zt_run *r, int64_t step, bool last, bool stop, zt_error *err);
/* nothing trained (resumed at or past --stop-after): the loaded state saved in this run's layout */
int zt_train_resave(zt_run *r, zt_error *err);

#endif
