/* train_config.h - the training configuration of `zerotrain train CONFIG`: a small native YAML
 * file (this subset; the config issue replaces it with the full schema table and the
 * DeepSpeed/Accelerate dialects). Every key has a default; unknown keys are errors. */
#ifndef ZT_TRAIN_CONFIG_H
#define ZT_TRAIN_CONFIG_H

#include "zerotrain/zerotrain.h"

#define ZT_PATH_MAX 1024

typedef struct zt_train_config {
    /* model: */
    char model_preset[64];      /* model.preset: tiny | gpt2-124M | ... (default "tiny") */
    zt_gpt2_config model;       /* resolved from the preset, then model.{n_layer,n_head,n_embd,
                                   vocab_size,max_seq_len} override single fields */
    /* data: */
    char train_path[ZT_PATH_MAX]; /* data.train (required) */
    char val_path[ZT_PATH_MAX];   /* data.val (optional: "" = no validation) */
    /* training: */
    int micro_batch;            /* training.micro_batch_size (B), default 4 */
    int seq_len;                /* training.seq_len (T), default 64; <= model.max_seq_len */
    int grad_accum;             /* training.gradient_accumulation_steps, default 1 */
    int64_t steps;              /* training.steps, default 100 */
    uint64_t seed;              /* training.seed, default 1337 */
    zt_lr_schedule lr;          /* training.lr (max), min_lr (default lr/10), warmup_steps (0),
                                   decay: cosine | linear | constant (cosine); total = steps */
    zt_optimizer_config optim;  /* optimizer.type adamw|sgd, beta1, beta2, eps, weight_decay,
                                   momentum, nesterov; training.grad_clip */
    /* evaluation: */
    int eval_every;             /* eval.every (steps; 0 = never), default 0 */
    int eval_batches;           /* eval.batches, default 8 */
    /* logging: */
    char log_path[ZT_PATH_MAX]; /* logging.jsonl ("" = none) */
    int print_every;            /* logging.print_every, default 1 */
    /* sampling at the end: */
    int sample_tokens;          /* sample.tokens, default 0 (none) */
    /* parallelism (docs/strategies.md): */
    int nproc;                  /* parallel.nproc: local ranks to start, default 1 */
    zt_strategy strategy;       /* parallel.strategy, default ddp */
    int hybrid_shard_size;      /* parallel.hybrid_shard_size, 0 = the world */
    zt_strategy hybrid_inner;   /* parallel.hybrid_inner: zero2 | zero3 (default) */
    bool reshard_after_forward; /* parallel.reshard_after_forward, default true */
    bool reduce_every_micro_batch; /* parallel.reduce_every_micro_batch, default false */
    float bucket_mb;            /* parallel.bucket_mb, default 25 */
} zt_train_config;

/* Fills every field with its default. */
void zt_train_config_default(zt_train_config *c);
/* Parses a YAML file on top of the defaults. Errors (ZT_ERR_USAGE) name the file, the line and
 * column, and the key: unknown keys, wrong types, out-of-range values, missing data.train. */
int zt_train_config_load(zt_train_config *c, const char *path, zt_error *err);
/* Same, from a string (name is used in messages). */
int zt_train_config_parse(zt_train_config *c, const char *yaml, size_t len, const char *name,
                          zt_error *err);
/* Applies one "key=value" override with the same dotted key names (e.g. training.steps=10). */
int zt_train_config_set(zt_train_config *c, const char *assignment, zt_error *err);
/* Checks cross-field invariants (seq_len <= max_seq_len, warmup <= steps, ...). */
int zt_train_config_validate(const zt_train_config *c, zt_error *err);

#endif
