/* train_config.h - the training configuration of `zerotrain train CONFIG` and `zerotrain config`:
 * one key table (src/config/key_table.c) read from three dialects that resolve to the same native
 * record: native YAML (docs/config-train.md), DeepSpeed JSON (dialect_deepspeed.c) and Accelerate
 * YAML (dialect_accelerate.c). docs/config.md is generated from the tables.
 *
 * Every resolved value remembers where it came from (zt_config_source: default, derived, a native
 * file's line:column, a DeepSpeed/Accelerate key mapped to it, a dialect's "auto", --set, or the
 * world size at launch). Keys zerotrain understands but does not honor on this build live in one
 * table (src/config/support.c): they give a warning or, from zt_train_config_validate, an error.
 *
 * Order of use (src/cli/cmd_train.c):
 *   zt_train_config_load(&c, path, &err)          defaults, the file (any dialect), its include
 *   zt_train_config_set(&c, "key=value", &err)     each --set, in order
 *   zt_train_config_validate_world(&c, world, &err) once the world size is known: derives the
 *                                                  batch sizes DeepSpeed leaves open, checks
 *                                                  micro x GA x world = global batch
 *   zt_train_config_validate(&c, &err)             everything, incl. what this build cannot honor
 *   zt_train_config_notes(&c, fn, ctx)             warnings (and notes) for the CLI to print
 *   zt_train_config_hash(&c)                       compared across ranks (exit 9 on mismatch)
 * Failures are ZT_ERR_USAGE (exit code 2) whose message lists every problem found, one per line
 * when there are several, each naming file:line:column and key. Nothing here prints, exits or
 * aborts. */
#ifndef ZT_TRAIN_CONFIG_H
#define ZT_TRAIN_CONFIG_H

#include <stdio.h>

#include "zerotrain/zerotrain.h"

#define ZT_PATH_MAX 1024
#define ZT_CONFIG_MAX_KEYS 160    /* rows in the key table (key_table.c checks) */
#define ZT_CONFIG_SOURCE_MAX 240  /* bytes of one provenance text */
#define ZT_CONFIG_NOTE_MAX 360    /* bytes of one note */
#define ZT_CONFIG_MAX_NOTES 40    /* notes kept per configuration; more are counted */

/* Where a value came from. */
typedef enum zt_config_origin {
    ZT_ORIGIN_DEFAULT = 0, /* the built-in default */
    ZT_ORIGIN_DERIVED = 1, /* computed from another key: "model.preset tiny", "training.lr / 10" */
    ZT_ORIGIN_FILE = 2,    /* a native YAML file: "run.yaml:12:3" */
    ZT_ORIGIN_DIALECT = 3, /* a DeepSpeed/Accelerate key: "ds.json:9:5 deepspeed zero_optimization.stage=3" */
    ZT_ORIGIN_AUTO = 4,    /* a dialect's "auto": the value zerotrain had (text says which) */
    ZT_ORIGIN_SET = 5,     /* --set key=value */
    ZT_ORIGIN_LAUNCH = 6   /* derived from the world size by zt_train_config_validate_world */
} zt_config_origin;

typedef struct zt_config_source {
    zt_config_origin origin;
    zt_config_origin base;              /* ZT_ORIGIN_AUTO: the origin of the value "auto" kept */
    int loc_len;                        /* text[0, loc_len) is the place ("run.yaml:12:3",
                                           "--set"); 0: none (defaults, derived values) */
    char text[ZT_CONFIG_SOURCE_MAX];    /* for people: the place, then what set it */
} zt_config_source;

typedef enum zt_config_level {
    ZT_CONFIG_NOTE = 0,    /* recognized, no effect on results (zerotrain config shows these) */
    ZT_CONFIG_WARNING = 1, /* recognized, not honored or approximated: print before training */
    ZT_CONFIG_ERROR = 2    /* only from validation: the run is refused */
} zt_config_level;

typedef struct zt_config_note {
    zt_config_level level;
    char text[ZT_CONFIG_NOTE_MAX]; /* "ds.json:14:7: zero_optimization.stage3_max_live_parameters: ..." */
} zt_config_note;

/* Precision modes and dtypes (issue 6 implements all but fp32; see support.c). */
typedef enum zt_cfg_precision {
    ZT_CFG_PREC_FP32 = 0,     /* fp32 everywhere */
    ZT_CFG_PREC_BF16 = 1,     /* bf16 compute, fp32 master weights and moments (mixed) */
    ZT_CFG_PREC_BF16_LOW = 2, /* bf16 parameters, gradients and optimizer state */
    ZT_CFG_PREC_FP16 = 3      /* fp16 compute, fp32 master, dynamic loss scaling */
} zt_cfg_precision;
typedef enum zt_cfg_dtype { ZT_CFG_DTYPE_FP32 = 0, ZT_CFG_DTYPE_BF16 = 1, ZT_CFG_DTYPE_FP16 = 2 } zt_cfg_dtype;
typedef enum zt_cfg_attention_dtype { ZT_CFG_ATTN_AUTO = 0, ZT_CFG_ATTN_FP32 = 1 } zt_cfg_attention_dtype;
typedef enum zt_cfg_offload {
    ZT_CFG_OFFLOAD_NONE = 0,
    ZT_CFG_OFFLOAD_CPU = 1,   /* host memory: on this CPU-only build, where everything already is */
    ZT_CFG_OFFLOAD_NVME = 2   /* files on a local disk (docs/offload.md) */
} zt_cfg_offload;
typedef enum zt_cfg_recompute {
    ZT_CFG_RECOMPUTE_NONE = 0,
    ZT_CFG_RECOMPUTE_FULL = 1,      /* keep unit inputs, recompute inside (issue 7) */
    ZT_CFG_RECOMPUTE_SELECTIVE = 2  /* keep the cheap-to-store, recompute the rest (issue 7) */
} zt_cfg_recompute;
typedef enum zt_cfg_spike_policy {
    ZT_CFG_SPIKE_SKIP = 0,    /* skip the spike's update on every rank */
    ZT_CFG_SPIKE_ROLLBACK = 1 /* reload the last commit, skip the spike's batch (train/train_recovery.c) */
} zt_cfg_spike_policy;

typedef enum zt_cfg_pp_schedule {
    ZT_CFG_PP_1F1B = 0, /* PipeDream-flush: warm-up forwards, one forward one backward, cool-down */
    ZT_CFG_PP_GPIPE = 1 /* every forward, then every backward */
} zt_cfg_pp_schedule;

typedef enum zt_cfg_save_error {
    ZT_CFG_SAVE_ERROR_EXIT = 0,    /* a checkpoint that cannot be written ends the run (exit 8) */
    ZT_CFG_SAVE_ERROR_CONTINUE = 1 /* training goes on, the next save retries (train/train_recovery.c) */
} zt_cfg_save_error;

typedef struct zt_train_config {
    /* model: */
    char model_preset[64];      /* model.preset: tiny | gpt2-124M | llama-tiny | ... (default "tiny") */
    zt_arch model_arch;         /* model.arch: gpt2 | llama, from the preset unless set */
    zt_llama_config model;      /* resolved from the preset, then single fields overridden:
                                   model.{n_layer,n_head,n_embd,vocab_size,max_seq_len} (both
                                   architectures; the first five fields are zt_gpt2_config's),
                                   model.{n_kv_head,intermediate_size,rope_theta,rms_norm_eps,
                                   rope_scaling.*,tie_embeddings} and the mixture of experts'
                                   model.{n_experts,n_experts_per_token,moe_intermediate_size,
                                   n_shared_experts,norm_topk_prob,router_*_coef,capacity_factor}
                                   (llama only; a GPT-2 preset
                                   fills them with what GPT-2 is: NKV = NH, 4C, tied) */
    char init_hf[ZT_PATH_MAX];  /* model.init_hf: a Hugging Face model directory to start from
                                   ("" = none); `train` takes the shape from its config.json */
    /* data: */
    char train_path[ZT_PATH_MAX]; /* data.train (required by zt_train_config_validate) */
    char val_path[ZT_PATH_MAX];   /* data.val (optional: "" = no validation) */
    char skip_samples[256];       /* data.skip_samples: "START:COUNT,..." global samples never trained
                                     on (zt_sampler_parse_skips); "" = none */
    /* data from records (data/dataset_build.h, docs/data.md): */
    int data_format;              /* data.format: zt_data_format (auto | tokens | jsonl | text) */
    int data_record;              /* data.record: zt_record_shape (auto | text | prompt_completion | messages) */
    int text_unit;                /* data.text_unit: zt_text_unit (line | paragraph | document) */
    char text_field[64], prompt_field[64], completion_field[64], messages_field[64]; /* data.*_field */
    char tokenizer_path[ZT_PATH_MAX]; /* data.tokenizer: tokenizer.json ("" = GPT-2's BPE) */
    char chat_template[ZT_PATH_MAX];  /* data.chat_template: tokenizer_config.json or .jinja ("" = beside
                                         data.tokenizer) */
    int loss_on;                  /* data.loss_on: 0 auto (assistant turns, completions), 1 all */
    bool pack;                    /* data.pack: records packed into full sequences, else padded */
    int too_long;                 /* data.too_long: zt_too_long (truncate | drop) */
    float val_fraction;           /* data.val_fraction: records held out for validation */
    char weights[256];            /* data.weights: one weight per data.train source ("" = one source) */
    char cache_dir[ZT_PATH_MAX];  /* data.cache_dir ("" = .zerotrain-cache beside the data) */
    /* training: */
    int micro_batch;            /* training.micro_batch_size (B), default 4; 0 = derived at launch
                                   from global_batch (zt_train_config_validate_world) */
    int seq_len;                /* training.seq_len (T), default 64; <= model.max_seq_len */
    int grad_accum;             /* training.gradient_accumulation_steps, default 1; 0 = derived */
    int global_batch;           /* training.global_batch_size: sequences per optimizer step over
                                   all ranks; 0 = micro_batch x grad_accum x world */
    int64_t steps;              /* training.steps, default 100 */
    uint64_t seed;              /* training.seed, default 1337 */
    char freeze[256];           /* training.freeze: regex of the frozen parameters' names
                                   (zt_model_freeze); "" = none */
    zt_lora_config lora;        /* lora.rank (0: no LoRA), alpha (8), dropout (0), target_modules
                                   ("": the family's default), base_quant (none); zt_model_add_lora */
    char lora_init_peft[ZT_PATH_MAX]; /* lora.init_peft: a PEFT adapter directory to start from ("": none) */
    zt_lr_schedule lr;          /* training.lr (max), min_lr (default lr/10), warmup_steps (0),
                                   decay: cosine | linear | constant (cosine); total = steps */
    zt_optimizer_config optim;  /* optimizer.type adamw|sgd, beta1, beta2, eps, weight_decay,
                                   momentum, nesterov; training.grad_clip */
    /* evaluation: */
    int eval_every;             /* eval.every (steps; 0 = never), default 0 */
    int eval_batches;           /* eval.batches, default 8 */
    bool eval_at_start;         /* eval.at_start: evaluate before the first step too, default false */
    float eval_target_loss;     /* eval.target_loss: stop at a validation loss <= it; 0 = never */
    /* logging: */
    char log_path[ZT_PATH_MAX]; /* logging.jsonl ("" = none) */
    int print_every;            /* logging.print_every, default 1 */
    bool wall_clock_breakdown;  /* logging.wall_clock_breakdown (issue 9) */
    bool comms_log;             /* logging.comms_log (issue 9) */
    /* sampling at the end: */
    int sample_tokens;          /* sample.tokens, default 0 (none) */
    /* parallelism (docs/strategies.md): */
    int nproc;                  /* parallel.nproc: local ranks to start, default 1 */
    zt_strategy strategy;       /* parallel.strategy, default ddp */
    int hybrid_shard_size;      /* parallel.hybrid_shard_size, 0 = the world */
    int hybrid_replicas;        /* parallel.hybrid_replicas, 0 = world / shard size (checked) */
    zt_strategy hybrid_inner;   /* parallel.hybrid_inner: zero2 | zero3 (default) */
    bool reshard_after_forward; /* parallel.reshard_after_forward, default true */
    bool reduce_every_micro_batch; /* parallel.reduce_every_micro_batch, default false */
    float bucket_mb;            /* parallel.bucket_mb, default 25 */
    bool prefetch;              /* parallel.prefetch: zero3 gathers the next unit early */
    bool overlap_comm;          /* parallel.overlap_comm: reduce in the communication thread */
    int tensor_parallel_size;   /* parallel.tensor_parallel_size, default 1 (docs/parallelism.md) */
    bool sequence_parallel;     /* parallel.sequence_parallel: Megatron-LM's, over the tp ranks */
    int pipeline_parallel_size; /* parallel.pipeline_parallel_size, default 1 (docs/parallelism.md) */
    int pipeline_schedule;      /* parallel.pipeline_schedule: ZT_CFG_PP_1F1B (default) or ZT_CFG_PP_GPIPE */
    char pipeline_stages[256];  /* parallel.pipeline_stages: "2,3" units per stage; "": balanced */
    int expert_parallel_size;   /* parallel.expert_parallel_size: 1, or the ep groups' size (docs/parallelism.md) */
    int context_parallel_size;  /* parallel.context_parallel_size, default 1 (docs/parallelism.md) */
    int context_parallel_mode;  /* parallel.context_parallel_mode: a zt_cp_mode, default allgather */
    /* precision (src/precision, docs/precision.md): */
    int precision;              /* precision.mode: a zt_cfg_precision */
    int reduce_dtype;           /* precision.reduce_dtype: a zt_cfg_dtype */
    bool stochastic_rounding;   /* precision.stochastic_rounding (bf16-low) */
    int attention_dtype;        /* precision.attention_dtype: a zt_cfg_attention_dtype */
    float loss_scale;           /* precision.loss_scale: 0 = dynamic (fp16) */
    int initial_scale_power;    /* precision.initial_scale_power, 16 (scale 2^16) */
    int loss_scale_window;      /* precision.loss_scale_window, 1000 */
    int hysteresis;             /* precision.hysteresis, 2 */
    bool consecutive_hysteresis; /* precision.consecutive_hysteresis, false */
    float min_loss_scale;       /* precision.min_loss_scale, 1 */
    /* memory (issue 7): */
    int activation_checkpointing; /* memory.activation_checkpointing: a zt_cfg_recompute */
    int loss_chunk_tokens;      /* memory.loss_chunk_tokens, default 0: the whole (B*T, V) logits */
    int offload_optimizer;      /* memory.offload_optimizer: a zt_cfg_offload */
    int offload_param;          /* memory.offload_param: a zt_cfg_offload */
    char offload_optimizer_nvme_path[ZT_PATH_MAX]; /* memory.offload_optimizer_nvme_path */
    char offload_param_nvme_path[ZT_PATH_MAX];     /* memory.offload_param_nvme_path */
    int offload_buffer_count;   /* memory.offload_buffer_count, default 4 */
    float offload_buffer_mb;    /* memory.offload_buffer_mb, default 64 */
    int offload_io_threads;     /* memory.offload_io_threads, default 2 */
    int offload_param_prefetch; /* memory.offload_param_prefetch, default 1 */
    int64_t offload_param_max_live; /* memory.offload_param_max_live (elements), default 0: none */
    /* checkpoints (issue 8): */
    char ckpt_dir[ZT_PATH_MAX]; /* checkpoint.dir */
    int ckpt_every;             /* checkpoint.every (steps; 0 = never) */
    int ckpt_keep_last;         /* checkpoint.keep_last (0 = all) */
    bool ckpt_consolidated;     /* checkpoint.save_consolidated: also one full weights file */
    bool ckpt_fallback;         /* checkpoint.fallback: past a damaged newest commit (resume.c) */
    int ckpt_on_save_error;     /* checkpoint.on_save_error: a zt_cfg_save_error */
    bool ckpt_allow_cast;       /* checkpoint.allow_cast: load fp32 values into bf16-low, rounded */
    /* faults (docs/reliability.md): */
    float comm_timeout_s;       /* comm.timeout_s: the collective deadline; 0 = auto (keys.c) */
    bool comm_check_collectives; /* comm.check_collectives: the fingerprint debug check */
    float fault_grace_s;        /* fault.grace_s: the launcher's wait after forwarding a stop signal */
    float fault_teardown_s;     /* fault.teardown_s: the launcher's wait for mpirun after a rank's exit record */
    int fault_nonfinite_skips;  /* fault.nonfinite_skips: non-finite steps skipped in a row before exit 6 */
    float fault_loss_spike_z;   /* fault.loss_spike_z: 0 = no spike detection (train/guard.c) */
    int fault_loss_spike_window; /* fault.loss_spike_window (<= ZT_CKPT_MAX_WINDOW: it is checkpointed) */
    int fault_loss_spike_policy; /* fault.loss_spike_policy: a zt_cfg_spike_policy */
    int fault_replica_check_every; /* fault.replica_check_every: steps between replica hash checks */

    /* Provenance and notes: not part of the configuration's value (zt_train_config_hash and
     * zt_train_config_equal ignore them). source[i] belongs to the key table's row i. */
    zt_config_source source[ZT_CONFIG_MAX_KEYS];
    int n_notes;                /* recorded while reading files; beyond ZT_CONFIG_MAX_NOTES ... */
    int n_notes_dropped;        /* ... only counted */
    zt_config_note notes[ZT_CONFIG_MAX_NOTES];
    char dialect[16];           /* "native", "deepspeed" or "accelerate": the main file's */
} zt_train_config;

/* Fills every field with its default (source: default). */
void zt_train_config_default(zt_train_config *c);

/* Reads a configuration file on top of the defaults. The dialect is detected: a .json file (or
 * one starting with '{') is DeepSpeed JSON, unless its top level has distributed_type or
 * compute_environment (Accelerate's JSON form); YAML with distributed_type or
 * compute_environment is an Accelerate config; other YAML is native. A native file may include
 * one DeepSpeed or Accelerate file (deepspeed_config: / accelerate_config:, relative to the native
 * file) for the parallel/precision/batch keys, and names the model and data itself.
 * All errors are collected: unknown keys (with did-you-mean), duplicates, types, ranges, values
 * that contradict each other (a native key and a dialect key, or two dialect keys). data.train is
 * not required here (a DeepSpeed file cannot name it: --set data.train=... does). On failure *c is
 * unchanged. */
int zt_train_config_load(zt_train_config *c, const char *path, zt_error *err);
/* Native YAML from a string (name is used in messages; includes resolve against name's directory). */
int zt_train_config_parse(zt_train_config *c, const char *yaml, size_t len, const char *name,
                          zt_error *err);
/* DeepSpeed JSON / Accelerate YAML from a string, on top of the defaults (for tests and fuzzing;
 * a deepspeed_config_file inside an Accelerate text is read from disk). */
int zt_train_config_parse_deepspeed(zt_train_config *c, const char *json, size_t len,
                                    const char *name, zt_error *err);
int zt_train_config_parse_accelerate(zt_train_config *c, const char *yaml, size_t len,
                                     const char *name, zt_error *err);

/* Whether the user gave key (a native dotted name) a value: a file, a dialect key or --set, not
 * the default or a value derived from another key. False for an unknown key. */
bool zt_train_config_is_set(const zt_train_config *c, const char *key);
/* Applies one "key=value" override with the native dotted key names (e.g. training.steps=10).
 * Source: "--set key=value". On failure *c is unchanged. */
int zt_train_config_set(zt_train_config *c, const char *assignment, zt_error *err);

/* Everything that does not need the world size, for a configuration about to train: each key's
 * type and range, the cross-key invariants, data.train present, the batch sizes resolved (call
 * zt_train_config_validate_world first when training.global_batch_size derives them), and the
 * support table: a value this build does not honor ("precision.mode bf16 is not implemented in
 * this build yet (issue 6)") is an error here. All problems are reported together. */
int zt_train_config_validate(const zt_train_config *c, zt_error *err);
/* The model the configuration describes (model.arch and the model.* keys). */
void zt_train_config_model(const zt_train_config *c, zt_model_spec *out);

/* Resolves and checks what depends on the data-parallel world size, before any rank allocates:
 * a derived training.micro_batch_size or gradient_accumulation_steps (0: DeepSpeed's
 * train_batch_size given without it) is computed, then micro x GA x world must equal
 * training.global_batch_size when that is set; parallel.hybrid_shard_size must divide the world
 * and hybrid_replicas x shard size equal it. Messages name the keys and where each came from.
 * Call it on every rank with the same world (it is deterministic); it changes only derived keys. */
int zt_train_config_validate_world(zt_train_config *c, int world, zt_error *err);
/* parallel.hybrid_shard_size 0: the data-parallel ranks of one node, i.e. the launcher's ranks per
 * node (zt_launcher_default_shard_size; the world on one node) over tensor_parallel_size x
 * pipeline_parallel_size. *from (optional) names the launcher's variable, or "". */
int zt_train_config_default_shard(const zt_train_config *c, int world, const char **from);

/* Calls fn for every note and warning: those recorded while reading (dialect mappings that are
 * approximate, keys recognized but without effect) and those the support table gives for the
 * current values (warnings such as "memory.offload_optimizer cpu: ..."). Errors are not passed
 * (zt_train_config_validate reports them). fn's text has no trailing newline. */
typedef void (*zt_config_note_fn)(void *ctx, zt_config_level level, const char *text);
void zt_train_config_notes(const zt_train_config *c, zt_config_note_fn fn, void *ctx);

/* xxh64 over the resolved values (every key of the table, canonical text, in table order);
 * provenance and notes are excluded. Equal configurations hash equal on every platform. */
uint64_t zt_train_config_hash(const zt_train_config *c);
/* true when every key has the same value (provenance ignored). */
bool zt_train_config_equal(const zt_train_config *a, const zt_train_config *b);

/* Output formats of zt_train_config_write. */
typedef enum zt_config_format {
    ZT_CONFIG_TABLE = 0, /* key, value, source: one line each, then the notes */
    ZT_CONFIG_YAML = 1,  /* native YAML with every key (sources as comments): reads back the same */
    ZT_CONFIG_JSON = 2   /* {"dialect", "values": {key: value}, "sources": {key: {origin, text}},
                            "notes": [...], "hash"} */
} zt_config_format;
/* Writes the resolved configuration to out. Returns ZT_ERR_IO when writing fails. */
int zt_train_config_write(const zt_train_config *c, zt_config_format format, FILE *out,
                          zt_error *err);
/* Writes docs/config.md: the native keys and the DeepSpeed and Accelerate mapping tables, from the
 * same tables the parsers use. */
int zt_config_write_docs(FILE *out, zt_error *err);

/* The number of keys, and key i's dotted name, for tools; NULL when i is out of range. */
int zt_config_key_count(void);
const char *zt_config_key_name(int i);
/* Key i's value as canonical text (what --set accepts) into out; returns out. */
const char *zt_config_key_value(const zt_train_config *c, int i, char *out, size_t cap);
/* Key i's source. */
const zt_config_source *zt_config_key_source(const zt_train_config *c, int i);

#endif
