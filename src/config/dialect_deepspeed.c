/* dialect_deepspeed.c - DeepSpeed's JSON config (deepspeed.ai/docs/config-json, and the code where
 * the two disagree: ../shared/reference/anchors.md §2) read into the native configuration.
 *
 * One row per DeepSpeed key (ROWS below): what it accepts, the native key it maps to and how, in
 * words that docs/config.md shows. Keys that map one to one use the walker's default mapping; keys
 * that interact (the three batch sizes, stage with MiCS/hpZ, bf16 against fp16, the optimizer and
 * its params, the scheduler and its params) are recorded during the walk and resolved afterwards
 * in resolve(), in that order.
 *
 * Rules (docs/config.md says them to users):
 *   - "auto" keeps the native value (from the including native file, --set, or the default) and
 *     says so in the key's source. Hugging Face fills the same keys from its TrainingArguments;
 *     zerotrain's native config plays that part. (Accelerate derives bucket sizes from the model's
 *     hidden size; zerotrain keeps its own bucket_mb.)
 *   - A key absent from the file takes DeepSpeed's default where that differs from zerotrain's
 *     (stage 0, Adam betas 0.9/0.999, weight decay 0, ...) unless the including native file set
 *     it; values written in both places must agree.
 *   - Recognized keys with no effect here are notes; ones that change what runs are warnings;
 *     ones that cannot run are errors. Unknown keys are errors with did-you-mean. */
#include "config/config_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---------------------------------------------------------------------------------------------
 * What the walk records for resolve(). */


/* ---------------------------------------------------------------------------------------------
 * Handlers. */

static int h_warn_if_true(dctx *d, const dialect_row *r, const cfg_node *n) {
    bool b;
    if (!zt_cfg_get_bool(d, n, r->path, &b)) return -1;
    zt_cfg_dnote(d, b ? ZT_CONFIG_WARNING : ZT_CONFIG_NOTE, n, r->path, "%s", r->doc);
    return 0;
}

static int h_warn_if_false(dctx *d, const dialect_row *r, const cfg_node *n) {
    bool b;
    if (!zt_cfg_get_bool(d, n, r->path, &b)) return -1;
    zt_cfg_dnote(d, b ? ZT_CONFIG_NOTE : ZT_CONFIG_WARNING, n, r->path, "%s", r->doc);
    return 0;
}

/* A block zerotrain does not read: a warning when it is enabled ("enabled": true, or present with
 * no "enabled" and level WARNING), else a note. */
static int h_block(dctx *d, const dialect_row *r, const cfg_node *n) {
    const cfg_node *en = zt_cfg_child(n, "enabled");
    bool on = r->level == ZT_CONFIG_WARNING;
    if (en) {
        if (en->kind == CN_BOOL)
            on = en->b;
        else if (en->kind == CN_STR && en->text)
            on = strcasecmp(en->text, "true") == 0;
    }
    if (n->kind == CN_NULL) on = false;
    zt_cfg_dnote(d, on ? ZT_CONFIG_WARNING : ZT_CONFIG_NOTE, n, r->path, "%s%s", r->doc,
                 on ? "" : " (not enabled)");
    return 0;
}

/* A block that cannot run when enabled. */
static int h_block_error(dctx *d, const dialect_row *r, const cfg_node *n) {
    const cfg_node *en = zt_cfg_child(n, "enabled");
    bool on = en && ((en->kind == CN_BOOL && en->b) ||
                     (en->kind == CN_STR && en->text && strcasecmp(en->text, "true") == 0));
    if (on)
        zt_cfg_derror(d, n, r->path, "%s", r->doc);
    else
        zt_cfg_dnote(d, ZT_CONFIG_NOTE, n, r->path, "%s (not enabled)", r->doc);
    return 0;
}

/* "bfloat16" is DeepSpeed's older name of the "bf16" block. */
static int h_bfloat16(dctx *d, const dialect_row *r, const cfg_node *n) {
    zt_cfg_dnote(d, ZT_CONFIG_NOTE, n, r->path, "read as bf16 (its older name)");
    zt_cfg_walk(d, n, "bf16");
    return 0;
}

/* reduce_bucket_size is in elements; zerotrain's buckets hold fp32 gradients: 4 bytes each. */
static int h_bucket(dctx *d, const dialect_row *r, const cfg_node *n) {
    char w[ZT_PATH_MAX + 32], desc[ZT_CONFIG_SOURCE_MAX];
    if (zt_cfg_is_auto(n)) {
        zt_cfg_auto(d->x, r->native, zt_cfg_where(d, n, false, w, sizeof w),
                    zt_cfg_src(d, n, r->path, desc, sizeof desc));
        return 0;
    }
    double e;
    if (!zt_cfg_get_num(d, n, r->path, 1, 1e15, &e)) return -1;
    char v[64];
    snprintf(v, sizeof v, "%.9g", e * 4.0 / 1048576.0);
    return zt_cfg_map(d, n, r->path, r->native, v);
}

static int h_prefetch(dctx *d, const dialect_row *r, const cfg_node *n) {
    char w[ZT_PATH_MAX + 32], desc[ZT_CONFIG_SOURCE_MAX];
    if (zt_cfg_is_auto(n)) {
        zt_cfg_auto(d->x, r->native, zt_cfg_where(d, n, false, w, sizeof w),
                    zt_cfg_src(d, n, r->path, desc, sizeof desc));
        return 0;
    }
    double e;
    if (!zt_cfg_get_num(d, n, r->path, 0, 1e15, &e)) return -1;
    return zt_cfg_map(d, n, r->path, r->native, e > 0 ? "true" : "false");
}

static int h_device(dctx *d, const dialect_row *r, const cfg_node *n) {
    if (n->kind == CN_NULL) return zt_cfg_map(d, n, r->path, r->native, "none");
    const char *v = n->text;
    if (strcasecmp(v, "none") != 0 && strcasecmp(v, "cpu") != 0 && strcasecmp(v, "nvme") != 0) {
        char s[100];
        zt_cfg_node_show(n, s, sizeof s);
        zt_cfg_derror(d, n, r->path, "expected \"none\", \"cpu\" or \"nvme\", got %s", s);
        return -1;
    }
    return zt_cfg_map(d, n, r->path, r->native, v);
}

static int h_ratio(dctx *d, const dialect_row *r, const cfg_node *n) {
    double v;
    if (!zt_cfg_get_num(d, n, r->path, 0, 1, &v)) return -1;
    zt_cfg_dnote(d, v < 1 ? ZT_CONFIG_WARNING : ZT_CONFIG_NOTE, n, r->path, "%s", r->doc);
    return 0;
}

/* Deprecated booleans cpu_offload / cpu_offload_param: true = device cpu. */
static int h_legacy_cpu(dctx *d, const dialect_row *r, const cfg_node *n) {
    bool b;
    if (!zt_cfg_get_bool(d, n, r->path, &b)) return -1;
    zt_cfg_dnote(d, ZT_CONFIG_NOTE, n, r->path, "deprecated in DeepSpeed; read as %s",
                 r->doc);
    return b ? zt_cfg_map(d, n, r->path, r->native, "cpu") : 0;
}

static int h_dtype(dctx *d, const dialect_row *r, const cfg_node *n) {
    zt_cfg_record_row(d, r, n); /* resolve_precision: absent or null takes DeepSpeed's default */
    if (n->kind == CN_NULL) {
        zt_cfg_dnote(d, ZT_CONFIG_NOTE, n, r->path,
                     "null: DeepSpeed's default, the training dtype (bf16 or fp16 under those blocks, "
                     "else fp32)");
        return 0;
    }
    static const struct {
        const char *ds, *native;
    } T[] = {{"fp32", "fp32"}, {"float32", "fp32"}, {"fp16", "fp16"}, {"float16", "fp16"},
             {"bf16", "bf16"}, {"bfloat16", "bf16"}};
    for (size_t i = 0; i < sizeof T / sizeof T[0]; i++)
        if (strcasecmp(n->text, T[i].ds) == 0) return zt_cfg_map(d, n, r->path, r->native, T[i].native);
    char s[100];
    zt_cfg_node_show(n, s, sizeof s);
    zt_cfg_derror(d, n, r->path, "expected \"fp32\", \"fp16\" or \"bf16\", got %s", s);
    return -1;
}

static int h_accum_dtype(dctx *d, const dialect_row *r, const cfg_node *n) {
    if (n->kind == CN_NULL) return 0;
    bool fp32 = strcasecmp(n->text, "fp32") == 0 || strcasecmp(n->text, "float32") == 0;
    zt_cfg_dnote(d, fp32 ? ZT_CONFIG_NOTE : ZT_CONFIG_WARNING, n, r->path, "%s", r->doc);
    return 0;
}

/* The block's presence turns checkpointing on: DeepSpeed configures the checkpointing that model
 * code asks for (deepspeed.checkpointing.checkpoint around each layer); zerotrain checkpoints
 * every unit, i.e. full. A native file that chose selective keeps it (a refinement, not a
 * contradiction); a native none contradicts the block (an error, as for any key). */
static int h_activation_checkpointing(dctx *d, const dialect_row *r, const cfg_node *n) {
    if (n->kind == CN_NULL) {
        zt_cfg_dnote(d, ZT_CONFIG_NOTE, n, r->path, "null: no activation checkpointing");
        return 0;
    }
    int ki = zt_cfg_key_index("memory.activation_checkpointing");
    if (ki >= 0 && d->x->native_set[ki] && d->x->c->activation_checkpointing == ZT_CFG_RECOMPUTE_SELECTIVE)
        zt_cfg_dnote(d, ZT_CONFIG_NOTE, n, r->path, "keeps the native memory.activation_checkpointing "
                     "selective (the block alone means full)");
    else if (zt_cfg_map(d, n, r->path, "memory.activation_checkpointing", "full"))
        return -1;
    zt_cfg_walk(d, n, r->path);
    return 0;
}

/* The optimizer and scheduler blocks: their params depend on the type, so the type is read first
 * and params are walked only for the types zerotrain runs. */
static bool ds_type_ok(const char *kind, const char *t) {
    static const char *const OPT[] = {"adam", "adamw", "sgd"};
    static const char *const SCHED[] = {"WarmupLR", "WarmupDecayLR", "WarmupCosineLR"};
    if (!strcmp(kind, "optimizer")) {
        for (size_t i = 0; i < 3; i++)
            if (!strcasecmp(t, OPT[i])) return true;
    } else {
        for (size_t i = 0; i < 3; i++)
            if (!strcmp(t, SCHED[i])) return true;
    }
    return false;
}

static int h_typed_block(dctx *d, const dialect_row *r, const cfg_node *n) {
    const cfg_node *t = zt_cfg_child(n, "type");
    if (!t) {
        zt_cfg_derror(d, n, r->path, "no \"type\"");
        return -1;
    }
    if (t->kind != CN_STR) {
        char s[100];
        zt_cfg_node_show(t, s, sizeof s);
        zt_cfg_derror(d, t, !strcmp(r->path, "optimizer") ? "optimizer.type" : "scheduler.type",
                      "expected a string, got %s", s);
        return -1;
    }
    if (!ds_type_ok(r->path, t->text)) {
        char s[100];
        zt_cfg_node_show(t, s, sizeof s);
        if (!strcmp(r->path, "optimizer"))
            zt_cfg_derror(d, t, "optimizer.type",
                          "%s is not supported (Adam, AdamW or SGD; Adam is read as DeepSpeed reads "
                          "it: AdamW unless params.adam_w_mode is false)",
                          s);
        else
            zt_cfg_derror(d, t, "scheduler.type",
                          "%s is not supported (WarmupLR, WarmupDecayLR or WarmupCosineLR)", s);
        return -1;
    }
    zt_cfg_walk(d, n, r->path);
    return 0;
}

static int h_tensor_parallel(dctx *d, const dialect_row *r, const cfg_node *n) {
    for (const cfg_node *c = n->child; c; c = c->next) {
        if (c->key && !strcmp(c->key, "autotp_size")) {
            int64_t v;
            if (!zt_cfg_get_int(d, c, "tensor_parallel.autotp_size", 0, 1048576, &v)) continue;
            char t[32];
            snprintf(t, sizeof t, "%lld", (long long)(v < 1 ? 1 : v));
            zt_cfg_map(d, c, "tensor_parallel.autotp_size", "parallel.tensor_parallel_size", t);
        } else if (c->key) {
            char p[200];
            snprintf(p, sizeof p, "tensor_parallel.%s", c->key);
            zt_cfg_dnote(d, ZT_CONFIG_NOTE, c, p, "tensor parallelism detail: no effect");
        }
    }
    (void)r;
    return 0;
}

/* ---------------------------------------------------------------------------------------------
 * The rows. */

#define NOTE ZT_CONFIG_NOTE
#define WARN ZT_CONFIG_WARNING
#define NUMA (A_NUM | A_AUTO)
#define INTA (A_INT | A_AUTO)
#define BOOLA (A_BOOL | A_AUTO)
#define BLOCK (A_MAP | A_NULL)

static const dialect_row ROWS[] = {
    /* batch sizes: train_batch_size = micro x GA x world (checked at launch) */
    {"train_batch_size", INTA, "training.global_batch_size", zt_cfg_record_row, NOTE,
     "global batch; \"auto\": micro x GA x world (0)"},
    {"train_micro_batch_size_per_gpu", INTA, "training.micro_batch_size", zt_cfg_record_row, NOTE,
     "per-rank micro-batch; derived at launch when only train_batch_size gives it"},
    {"gradient_accumulation_steps", INTA, "training.gradient_accumulation_steps", zt_cfg_record_row, NOTE,
     "derived at launch from train_batch_size / (micro x world) when absent"},
    {"gradient_clipping", NUMA, "training.grad_clip", zt_cfg_record_row, NOTE,
     "same meaning; absent: 1.0 (DeepSpeed's code default since PR #8068, 2026-06; before it the "
     "code said 0 = off while the docs said 1.0)"},
    {"steps_per_print", A_INT | A_NUM | A_AUTO, "logging.print_every", NULL, NOTE, "same meaning"},
    {"wall_clock_breakdown", A_BOOL, "logging.wall_clock_breakdown", NULL, NOTE, "same meaning"},
    {"memory_breakdown", A_BOOL, NULL, h_warn_if_true, WARN,
     "per-step memory accounting is not implemented yet (issue 7); the run reports its peak"},
    {"comms_logger", BLOCK, NULL, NULL, NOTE, "block"},
    {"comms_logger.enabled", A_BOOL, "logging.comms_log", NULL, NOTE, "same meaning"},
    {"comms_logger.verbose", A_BOOL, NULL, NULL, NOTE, "detail of DeepSpeed's comms logger: no effect"},
    {"comms_logger.prof_all", A_BOOL, NULL, NULL, NOTE, "detail of DeepSpeed's comms logger: no effect"},
    {"comms_logger.debug", A_BOOL, NULL, NULL, NOTE, "detail of DeepSpeed's comms logger: no effect"},
    {"comms_logger.prof_ops", A_SEQ | A_NULL, NULL, NULL, NOTE,
     "detail of DeepSpeed's comms logger: no effect"},
    /* ZeRO */
    {"zero_optimization", BLOCK, NULL, NULL, NOTE, "block"},
    {"zero_optimization.stage", A_INT, "parallel.strategy", zt_cfg_record_row, NOTE,
     "0 ddp, 1 zero1, 2 zero2, 3 zero3 (hybrid with mics_shard_size or zero_hpz_partition_size); "
     "absent: 0"},
    {"zero_optimization.mics_shard_size", A_INT, "parallel.hybrid_shard_size", zt_cfg_record_row, NOTE,
     "> 0 with stage 3: strategy hybrid, zero3 inside groups of this many ranks, replicated across "
     "them (MiCS = FSDP's HYBRID_SHARD)"},
    {"zero_optimization.mics_hierarchical_params_gather", A_BOOL, NULL, NULL, NOTE,
     "communication detail of MiCS: no effect on results"},
    {"zero_optimization.zero_hpz_partition_size", A_INT, "parallel.hybrid_shard_size", zt_cfg_record_row, NOTE,
     "> 1 with stage 3: approximated by strategy hybrid with shard groups of this size (warning: "
     "hpZ keeps the optimizer state sharded over all ranks; same results, more memory here)"},
    {"zero_optimization.reduce_bucket_size", NUMA, "parallel.bucket_mb", h_bucket, NOTE,
     "elements x 4 bytes / 2^20 (zerotrain buckets fp32 gradients)"},
    {"zero_optimization.allgather_bucket_size", NUMA, NULL, NULL, NOTE,
     "no separate all-gather bucket: parameters are all-gathered per unit or per gradient bucket"},
    {"zero_optimization.overlap_comm", BOOLA, "parallel.overlap_comm", NULL, NOTE,
     "same meaning (false: a warning, see the table above); absent: zerotrain's true (DeepSpeed's "
     "code turns it on for stage 3; its docs say false)"},
    {"zero_optimization.contiguous_gradients", A_BOOL, NULL, NULL, NOTE,
     "gradients are always contiguous (one buffer per unit)"},
    {"zero_optimization.reduce_scatter", A_BOOL, NULL, h_warn_if_false, WARN,
     "zero1-3 always reduce-scatter gradients (false asks DeepSpeed for all-reduce)"},
    {"zero_optimization.allgather_partitions", A_BOOL, NULL, NULL, NOTE,
     "updated partitions are always all-gathered"},
    {"zero_optimization.round_robin_gradients", A_BOOL, NULL, NULL, NOTE, "no effect (CPU offload detail)"},
    {"zero_optimization.use_multi_rank_bucket_allreduce", A_BOOL, NULL, NULL, NOTE, "no effect"},
    {"zero_optimization.load_from_fp32_weights", A_BOOL, NULL, NULL, NOTE,
     "checkpoints always keep fp32 master weights (docs/checkpoints.md)"},
    {"zero_optimization.elastic_checkpoint", A_BOOL, NULL, NULL, NOTE,
     "checkpoints load into any world size and strategy (docs/checkpoints.md)"},
    {"zero_optimization.ignore_unused_parameters", A_BOOL, NULL, NULL, NOTE,
     "every parameter is used by the built-in models"},
    {"zero_optimization.legacy_stage1", A_BOOL, NULL, h_warn_if_true, NOTE,
     "DeepSpeed's old stage-1 code path: zero1 is used"},
    {"zero_optimization.sub_group_size", NUMA, NULL, NULL, NOTE,
     "the optimizer steps each rank's whole shard at once"},
    {"zero_optimization.memory_efficient_linear", A_BOOL, NULL, NULL, NOTE, "no effect"},
    {"zero_optimization.pipeline_loading_checkpoint", A_BOOL, NULL, NULL, NOTE, "no effect"},
    {"zero_optimization.override_module_apply", A_BOOL, NULL, NULL, NOTE, "no effect"},
    {"zero_optimization.log_trace_cache_warnings", A_BOOL, NULL, NULL, NOTE, "no effect"},
    {"zero_optimization.enable_sanity_checks", A_BOOL, NULL, NULL, NOTE, "no effect"},
    {"zero_optimization.save_muon_momentum_buffer_in_memory", A_BOOL, NULL, NULL, NOTE, "no effect"},
    {"zero_optimization.leaf_module", BLOCK, NULL, h_block, NOTE,
     "zero3 units are the model's units already"},
    {"zero_optimization.offload_param", BLOCK, NULL, NULL, NOTE, "block"},
    {"zero_optimization.offload_param.device", A_STR | A_NULL, "memory.offload_param", h_device, NOTE,
     "none | cpu (no-op on this CPU-only build: a warning) | nvme (not implemented yet: an error)"},
    {"zero_optimization.offload_param.nvme_path", A_STR | A_NULL, "memory.offload_param_nvme_path", NULL,
     NOTE, "same meaning"},
    {"zero_optimization.offload_param.pin_memory", A_BOOL, NULL, NULL, NOTE,
     "no pinned memory on a CPU-only build"},
    {"zero_optimization.offload_param.buffer_count", INTA, NULL, NULL, NOTE,
     "parameter offload buffers: parameter offload to nvme is not implemented yet"},
    {"zero_optimization.offload_param.buffer_size", NUMA, NULL, NULL, NOTE,
     "parameter offload buffers: parameter offload to nvme is not implemented yet"},
    {"zero_optimization.offload_param.max_in_cpu", NUMA, NULL, NULL, NOTE,
     "parameter offload buffers: parameter offload to nvme is not implemented yet"},
    {"zero_optimization.offload_optimizer", BLOCK, NULL, NULL, NOTE, "block"},
    {"zero_optimization.offload_optimizer.device", A_STR | A_NULL, "memory.offload_optimizer", h_device,
     NOTE, "none | cpu (no-op on this CPU-only build: a warning) | nvme (the moments stream from files)"},
    {"zero_optimization.offload_optimizer.nvme_path", A_STR | A_NULL,
     "memory.offload_optimizer_nvme_path", NULL, NOTE, "same meaning"},
    {"zero_optimization.offload_optimizer.pin_memory", A_BOOL, NULL, NULL, NOTE,
     "no pinned memory on a CPU-only build"},
    {"zero_optimization.offload_optimizer.buffer_count", INTA, "memory.offload_buffer_count", NULL, NOTE,
     "staging buffers; zerotrain's each hold one chunk of every state (m and v), sized by "
     "memory.offload_buffer_mb"},
    {"zero_optimization.offload_optimizer.pipeline_read", A_BOOL, NULL, NULL, NOTE,
     "always on: reads run ahead of the update (with 3 or more buffers)"},
    {"zero_optimization.offload_optimizer.pipeline_write", A_BOOL, NULL, NULL, NOTE,
     "always on: write-back runs behind the update"},
    {"zero_optimization.offload_optimizer.fast_init", A_BOOL, NULL, NULL, NOTE,
     "no effect: the files start as reserved zeros (fallocate)"},
    {"zero_optimization.offload_optimizer.ratio", A_NUM, NULL, h_ratio, NOTE,
     "partial optimizer offload (< 1) is not implemented: all or nothing"},
    {"zero_optimization.offload_optimizer.super_offload", A_BOOL, NULL, h_warn_if_true, NOTE,
     "SuperOffload is not implemented"},
    {"zero_optimization.offload_optimizer.cpuadam_cores_perc", A_NUM, NULL, NULL, NOTE,
     "the optimizer uses OMP_NUM_THREADS threads"},
    {"zero_optimization.cpu_offload", A_BOOL, "memory.offload_optimizer", h_legacy_cpu, NOTE,
     "offload_optimizer.device cpu"},
    {"zero_optimization.cpu_offload_param", A_BOOL, "memory.offload_param", h_legacy_cpu, NOTE,
     "offload_param.device cpu"},
    {"zero_optimization.cpu_offload_use_pin_memory", A_BOOL, NULL, NULL, NOTE,
     "no pinned memory on a CPU-only build"},
    {"zero_optimization.stage3_prefetch_bucket_size", NUMA, "parallel.prefetch", h_prefetch, NOTE,
     "> 0: prefetch true; 0: false (a warning, see the table above); absent: zerotrain's true "
     "(DeepSpeed's code default 5e7, its docs 5e8)"},
    {"zero_optimization.prefetch_bucket_size", NUMA, "parallel.prefetch", h_prefetch, NOTE,
     "stage3_prefetch_bucket_size's field name"},
    {"zero_optimization.stage3_param_persistence_threshold", NUMA, NULL, NULL, NOTE,
     "zero3 shards every parameter however small (DeepSpeed keeps those below the threshold, "
     "default 1e5 elements, replicated): same results"},
    {"zero_optimization.param_persistence_threshold", NUMA, NULL, NULL, NOTE,
     "stage3_param_persistence_threshold's field name"},
    {"zero_optimization.stage3_model_persistence_threshold", NUMA, NULL, NULL, NOTE,
     "zero3 shards every parameter"},
    {"zero_optimization.stage3_max_live_parameters", NUMA, NULL, NULL, NOTE,
     "zero3 holds one gathered unit at a time (all of them between forward and backward with "
     "reshard_after_forward false)"},
    {"zero_optimization.max_live_parameters", NUMA, NULL, NULL, NOTE,
     "stage3_max_live_parameters's field name"},
    {"zero_optimization.stage3_max_reuse_distance", NUMA, NULL, NULL, NOTE,
     "gathered parameters are freed after each unit (parallel.reshard_after_forward)"},
    {"zero_optimization.max_reuse_distance", NUMA, NULL, NULL, NOTE,
     "stage3_max_reuse_distance's field name"},
    {"zero_optimization.stage3_gather_16bit_weights_on_model_save", BOOLA,
     "checkpoint.save_consolidated", NULL, NOTE, "same meaning (a warning when true, see the table above)"},
    {"zero_optimization.stage3_gather_fp16_weights_on_model_save", BOOLA,
     "checkpoint.save_consolidated", NULL, NOTE, "the deprecated name of the key above"},
    {"zero_optimization.gather_16bit_weights_on_model_save", BOOLA, "checkpoint.save_consolidated",
     NULL, NOTE, "the field name of the key above"},
    {"zero_optimization.stage3_module_granularity_threshold", NUMA, NULL, NULL, NOTE,
     "zero3 units are the model's units"},
    {"zero_optimization.stage3_use_all_reduce_for_fetch_params", A_BOOL, NULL, h_warn_if_true, NOTE,
     "parameters are all-gathered"},
    {"zero_optimization.stage3_allgather_sequential", A_BOOL, NULL, NULL, NOTE, "no effect"},
    {"zero_optimization.zero_quantized_weights", A_BOOL, NULL, h_warn_if_true, NOTE,
     "ZeRO++ qwZ (int8 weight all-gather) is not implemented: weights travel in full precision, "
     "so results differ from DeepSpeed's quantized run"},
    {"zero_optimization.zero_quantized_nontrainable_weights", A_BOOL, NULL, h_warn_if_true, NOTE,
     "ZeRO++ weight quantization is not implemented"},
    {"zero_optimization.zero_quantized_gradients", A_BOOL, NULL, h_warn_if_true, NOTE,
     "ZeRO++ qgZ (quantized gradient reduce) is not implemented: gradients are reduced exactly"},
    {"zero_optimization.zeropp_loco_param", BLOCK, NULL, h_block, NOTE, "ZeRO++ LoCo is not implemented"},
    {"zero_optimization.zenflow", BLOCK, NULL, h_block, WARN, "ZenFlow is not implemented"},
    /* precision */
    {"bf16", BLOCK, NULL, NULL, NOTE, "block"},
    {"bf16.enabled", BOOLA, "precision.mode", zt_cfg_record_row, NOTE,
     "true: bf16 (mixed: fp32 master weights, as DeepSpeed keeps them)"},
    {"bf16.immediate_grad_update", A_BOOL, NULL, NULL, NOTE, "gradients are accumulated in fp32"},
    {"bf16.check_overflow", A_BOOL, NULL, NULL, NOTE, "every step checks the gradients are finite"},
    {"bf16.bf16_master_weights_and_grads", A_BOOL, NULL, h_warn_if_true, NOTE,
     "bf16 master weights: zerotrain's bf16 keeps fp32 master weights (bf16-low has none)"},
    {"bf16.bf16_optimizer_states", A_BOOL, NULL, h_warn_if_true, NOTE,
     "bf16 optimizer states: zerotrain's bf16 keeps fp32 moments (bf16-low has bf16 ones)"},
    {"bfloat16", BLOCK, NULL, h_bfloat16, NOTE, "the older name of bf16"},
    {"fp16", BLOCK, NULL, NULL, NOTE, "block"},
    {"fp16.enabled", BOOLA, "precision.mode", zt_cfg_record_row, NOTE, "true: fp16 with dynamic loss scaling"},
    {"fp16.loss_scale", A_NUM, "precision.loss_scale", NULL, NOTE, "same meaning (0: dynamic)"},
    {"fp16.initial_scale_power", A_INT, "precision.initial_scale_power", NULL, NOTE, "same meaning"},
    {"fp16.loss_scale_window", A_INT, "precision.loss_scale_window", NULL, NOTE, "same meaning"},
    {"fp16.hysteresis", A_INT, "precision.hysteresis", NULL, NOTE, "same meaning"},
    {"fp16.consecutive_hysteresis", A_BOOL, "precision.consecutive_hysteresis", NULL, NOTE, "same meaning"},
    {"fp16.min_loss_scale", A_NUM, "precision.min_loss_scale", NULL, NOTE, "same meaning"},
    {"fp16.auto_cast", A_BOOL, NULL, NULL, NOTE, "inputs are cast by the model's units"},
    {"fp16.fp16_master_weights_and_grads", A_BOOL, NULL, h_warn_if_true, NOTE,
     "fp16 master weights: zerotrain keeps fp32 master weights"},
    {"amp", BLOCK, NULL, h_block_error, NOTE,
     "NVIDIA Apex AMP is not supported: use the bf16 or fp16 block (precision.mode)"},
    {"torch_autocast", BLOCK, NULL, zt_cfg_record_row, NOTE,
     "enabled with the bf16 or fp16 block: approximated by that block's precision.mode (a warning); "
     "alone: not supported (use the bf16 or fp16 block)"},
    {"torch_autocast.enabled", A_BOOL, NULL, NULL, NOTE, "see torch_autocast"},
    {"torch_autocast.dtype", A_STR | A_NULL, NULL, NULL, NOTE, "see torch_autocast"},
    {"torch_autocast.lower_precision_safe_modules", A_SEQ | A_NULL, NULL, NULL, NOTE, "see torch_autocast"},
    {"communication_data_type", A_STR | A_NULL, "precision.reduce_dtype", h_dtype, NOTE,
     "fp32 | bf16 | fp16; absent or null: DeepSpeed's default, the training dtype: bf16 under the "
     "bf16 block, fp16 under the fp16 block, fp32 otherwise"},
    {"seq_parallel_communication_data_type", A_STR | A_NULL, NULL, NULL, NOTE,
     "no sequence parallelism"},
    {"data_types", BLOCK, NULL, NULL, NOTE, "block"},
    {"data_types.grad_accum_dtype", A_STR | A_NULL, NULL, h_accum_dtype, NOTE,
     "gradients are accumulated in fp32 whatever this says"},
    /* optimizer and schedule */
    {"optimizer", A_MAP, NULL, h_typed_block, NOTE, "block"},
    {"optimizer.type", A_STR, "optimizer.type", zt_cfg_record_row, NOTE,
     "AdamW -> adamw; Adam -> adamw (DeepSpeed's adam_w_mode defaults to true); SGD -> sgd"},
    {"optimizer.legacy_fusion", A_BOOL, NULL, NULL, NOTE, "no effect"},
    {"optimizer.params", A_MAP, NULL, NULL, NOTE, "block"},
    {"optimizer.params.lr", NUMA, "training.lr", zt_cfg_record_row, NOTE,
     "same meaning; absent: 1e-3 (torch's default)"},
    {"optimizer.params.betas", A_SEQ | A_AUTO, "optimizer.beta1", zt_cfg_record_row, NOTE,
     "[beta1, beta2]; absent: [0.9, 0.999] (torch's defaults, not zerotrain's 0.95)"},
    {"optimizer.params.eps", NUMA, "optimizer.eps", zt_cfg_record_row, NOTE, "same meaning; absent: 1e-8"},
    {"optimizer.params.weight_decay", NUMA, "optimizer.weight_decay", zt_cfg_record_row, NOTE,
     "same meaning; absent: 0 (DeepSpeed's FusedAdam default, not zerotrain's 0.1)"},
    {"optimizer.params.adam_w_mode", A_BOOL, NULL, zt_cfg_record_row, NOTE,
     "false (Adam with L2 decay) runs only with weight_decay 0"},
    {"optimizer.params.torch_adam", A_BOOL, NULL, NULL, NOTE, "no effect (zerotrain's own AdamW)"},
    {"optimizer.params.bias_correction", A_BOOL, NULL, zt_cfg_record_row, NOTE,
     "false is not supported (AdamW always corrects the bias)"},
    {"optimizer.params.amsgrad", A_BOOL, NULL, zt_cfg_record_row, NOTE, "true is not supported"},
    {"optimizer.params.momentum", NUMA, "optimizer.momentum", zt_cfg_record_row, NOTE, "SGD: same meaning"},
    {"optimizer.params.nesterov", A_BOOL, "optimizer.nesterov", zt_cfg_record_row, NOTE, "SGD: same meaning"},
    {"optimizer.params.dampening", A_NUM, NULL, zt_cfg_record_row, NOTE, "SGD: only 0 is supported"},
    {"optimizer.params.maximize", A_BOOL, NULL, zt_cfg_record_row, NOTE, "true is not supported"},
    {"optimizer.params.fused", A_BOOL | A_NULL, NULL, NULL, NOTE, "no effect"},
    {"optimizer.params.foreach", A_BOOL | A_NULL, NULL, NULL, NOTE, "no effect"},
    {"optimizer.params.capturable", A_BOOL, NULL, NULL, NOTE, "no effect"},
    {"optimizer.params.differentiable", A_BOOL, NULL, NULL, NOTE, "no effect"},
    {"scheduler", A_MAP, NULL, h_typed_block, NOTE, "block"},
    {"scheduler.type", A_STR, "training.decay", zt_cfg_record_row, NOTE,
     "WarmupLR -> constant; WarmupDecayLR -> linear; WarmupCosineLR -> cosine; absent: zerotrain's "
     "schedule (as Hugging Face's Trainer supplies its own)"},
    {"scheduler.params", A_MAP, NULL, NULL, NOTE, "block"},
    {"scheduler.params.warmup_min_lr", NUMA, "training.min_lr", zt_cfg_record_row, NOTE,
     "WarmupDecayLR: the final lr (min_lr); warmup starts at lr / warmup_steps here, not at it"},
    {"scheduler.params.warmup_max_lr", NUMA, "training.lr", zt_cfg_record_row, NOTE,
     "the peak lr (DeepSpeed uses it over optimizer.params.lr)"},
    {"scheduler.params.warmup_num_steps", INTA, "training.warmup_steps", zt_cfg_record_row, NOTE,
     "same meaning (DeepSpeed uses at least 2)"},
    {"scheduler.params.warmup_type", A_STR, NULL, zt_cfg_record_row, NOTE,
     "log (DeepSpeed's default) and linear are both read as zerotrain's linear warmup (a warning for "
     "log)"},
    {"scheduler.params.total_num_steps", INTA, "training.steps", zt_cfg_record_row, NOTE,
     "WarmupDecayLR, WarmupCosineLR: the schedule's end, which is training.steps here"},
    {"scheduler.params.warmup_min_ratio", NUMA, NULL, zt_cfg_record_row, NOTE,
     "WarmupCosineLR: warmup starts at lr / warmup_steps here (a warning when not 0)"},
    {"scheduler.params.cos_min_ratio", NUMA, "training.min_lr", zt_cfg_record_row, NOTE,
     "WarmupCosineLR: min_lr = lr x cos_min_ratio (absent: 1e-4)"},
    {"scheduler.params.last_batch_iteration", A_INT, NULL, NULL, NOTE, "resuming: --resume CKPT"},
    /* activation checkpointing: configures deepspeed.checkpointing for model code */
    {"activation_checkpointing", BLOCK, "memory.activation_checkpointing", h_activation_checkpointing, NOTE,
     "present (a mapping, even empty): full, every unit recomputed in backward (DeepSpeed's block "
     "configures the checkpointing that model code calls per layer); a native selective stays"},
    {"activation_checkpointing.partition_activations", A_BOOL, NULL, h_warn_if_true, NOTE,
     "no tensor parallelism to partition activations over"},
    {"activation_checkpointing.cpu_checkpointing", A_BOOL, NULL, h_warn_if_true, NOTE,
     "activations already live in host memory on this CPU-only build"},
    {"activation_checkpointing.contiguous_memory_optimization", A_BOOL, NULL, NULL, NOTE, "no effect"},
    {"activation_checkpointing.number_checkpoints", A_INT | A_NULL, NULL, NULL, NOTE, "no effect"},
    {"activation_checkpointing.synchronize_checkpoint_boundary", A_BOOL, NULL, NULL, NOTE, "no effect"},
    {"activation_checkpointing.profile", A_BOOL, NULL, NULL, NOTE, "no effect"},
    /* parallelism beyond data parallel */
    {"tensor_parallel", BLOCK, "parallel.tensor_parallel_size", h_tensor_parallel, NOTE,
     "autotp_size -> parallel.tensor_parallel_size (> 1: not implemented, an error)"},
    {"sequence_parallel_size", A_INT, "parallel.context_parallel_size", NULL, NOTE,
     "Ulysses sequence parallelism (> 1: not implemented, an error)"},
    {"pipeline", BLOCK, NULL, h_block, NOTE, "pipeline-engine detail: no pipeline parallelism"},
    /* recognized blocks and keys with no effect here */
    {"flops_profiler", BLOCK, NULL, h_block, NOTE,
     "the flops profiler is not implemented: the progress line and logging.jsonl report MFU"},
    {"tensorboard", BLOCK, NULL, h_block, NOTE, "not implemented: zerotrain writes logging.jsonl"},
    {"wandb", BLOCK, NULL, h_block, NOTE, "not implemented: zerotrain writes logging.jsonl"},
    {"csv_monitor", BLOCK, NULL, h_block, NOTE, "not implemented: zerotrain writes logging.jsonl"},
    {"comet", BLOCK, NULL, h_block, NOTE, "not implemented: zerotrain writes logging.jsonl"},
    {"autotuning", BLOCK, NULL, h_block, NOTE, "autotuning is not implemented"},
    {"elasticity", BLOCK, NULL, h_block, NOTE, "elastic training is not implemented"},
    {"compression_training", BLOCK, NULL, h_block, WARN, "compression training is not implemented"},
    {"data_efficiency", BLOCK, NULL, h_block, NOTE, "data efficiency is not implemented"},
    {"curriculum_learning", BLOCK, NULL, h_block, NOTE, "curriculum learning is not implemented"},
    {"quantize_training", BLOCK, NULL, h_block, NOTE, "quantized training is not implemented"},
    {"sparse_attention", BLOCK, NULL, h_block, WARN, "sparse attention is not implemented"},
    {"weight_quantization", BLOCK, NULL, h_block, WARN, "weight quantization is not implemented"},
    {"checkpoint", BLOCK, NULL, h_block, NOTE, "DeepSpeed's checkpoint options: zerotrain's are --ckpt-dir, --resume (docs/checkpoints.md)"},
    {"aio", BLOCK, NULL, NULL, NOTE, "block"},
    {"aio.thread_count", A_INT, "memory.offload_io_threads", NULL, NOTE,
     "I/O threads of the NVMe offload (each keeps one block in flight)"},
    {"aio.block_size", NUMA, NULL, NULL, NOTE, "no effect: requests are whole chunks cut into 8 MiB blocks"},
    {"aio.queue_depth", A_INT, NULL, NULL, NOTE,
     "no effect: the queue depth is memory.offload_io_threads (blocking pread/pwrite threads)"},
    {"aio.single_submit", A_BOOL, NULL, NULL, NOTE, "no effect (libaio detail)"},
    {"aio.overlap_events", A_BOOL, NULL, NULL, NOTE, "no effect (libaio detail)"},
    {"aio.intra_op_parallelism", A_INT, NULL, NULL, NOTE, "no effect: see aio.thread_count"},
    {"aio.use_gds", A_BOOL, NULL, h_warn_if_true, NOTE, "GPUDirect Storage: no GPU on this build"},
    {"nebula", BLOCK, NULL, h_block, NOTE, "Nebula checkpointing is not implemented"},
    {"eigenvalue", BLOCK, NULL, h_block, NOTE, "not implemented"},
    {"progressive_layer_drop", BLOCK, NULL, h_block, NOTE, "not implemented"},
    {"hybrid_engine", BLOCK, NULL, h_block, NOTE, "not implemented"},
    {"compile", BLOCK, NULL, h_block, NOTE, "torch.compile: not applicable (zerotrain is C)"},
    {"timers", BLOCK, NULL, h_block, NOTE, "timer detail: no effect"},
    {"zero_allow_untested_optimizer", A_BOOL, NULL, NULL, NOTE, "no effect"},
    {"zero_force_ds_cpu_optimizer", A_BOOL, NULL, NULL, NOTE, "no effect"},
    {"prescale_gradients", A_BOOL, NULL, NULL, NOTE,
     "no effect: gradients are summed in a fixed order and averaged once"},
    {"gradient_predivide_factor", A_NUM, NULL, NULL, NOTE,
     "no effect: gradients are summed in a fixed order and averaged once"},
    {"gradient_allreduce_op", A_STR, NULL, NULL, NOTE, "gradients are averaged (mean)"},
    {"sparse_gradients", A_BOOL, NULL, h_warn_if_true, NOTE, "sparse gradients are not implemented"},
    {"disable_allgather", A_BOOL, NULL, h_warn_if_true, NOTE, "the all-gather cannot be disabled"},
    {"dump_state", A_BOOL, NULL, NULL, NOTE, "no effect"},
    {"dataloader_drop_last", A_BOOL, NULL, NULL, NOTE,
     "the sampler always draws whole micro-batches"},
    {"graph_harvesting", A_BOOL, NULL, NULL, NOTE, "no effect"},
    {"use_data_before_expert_parallel_", A_BOOL, NULL, NULL, NOTE, "no expert parallelism"},
    {"vocabulary_size", A_INT | A_NULL, NULL, NULL, NOTE, "model.vocab_size decides"},
    {"log_level", A_STR | A_INT, NULL, NULL, NOTE, "no effect"},
};
#undef NOTE
#undef WARN

const dialect_row *zt_cfg_deepspeed_rows(int *n) {
    *n = (int)(sizeof ROWS / sizeof ROWS[0]);
    return ROWS;
}

/* ---------------------------------------------------------------------------------------------
 * resolve(): the keys that interact. */

/* Sets a native key to DeepSpeed's default for something the file leaves out, unless the native
 * file set it. loc/what name the place and reason. */
static void ds_default(dctx *d, const char *key, const char *val, const char *what) {
    int ki = zt_cfg_key_index(key);
    if (ki < 0 || d->x->native_set[ki]) return;
    char desc[ZT_CONFIG_SOURCE_MAX];
    snprintf(desc, sizeof desc, "deepspeed default: %s", what);
    zt_cfg_apply_str(d->x, key, val, ZT_ORIGIN_DIALECT, d->file, desc, key);
}

/* A number node's text for a native key (an "auto" keeps the native value). */
static void map_or_auto(dctx *d, const cfg_node *n, const char *path, const char *key) {
    char w[ZT_PATH_MAX + 32], desc[ZT_CONFIG_SOURCE_MAX];
    if (zt_cfg_is_auto(n)) {
        zt_cfg_auto(d->x, key, zt_cfg_where(d, n, false, w, sizeof w),
                    zt_cfg_src(d, n, path, desc, sizeof desc));
        return;
    }
    if (n->kind == CN_BOOL) {
        zt_cfg_map(d, n, path, key, n->b ? "true" : "false");
        return;
    }
    zt_cfg_map(d, n, path, key, n->text ? n->text : "");
}

static bool explicit_node(const cfg_node *n) { return n && !zt_cfg_is_auto(n); }

static void resolve_batch(dctx *d) {
    const cfg_node *t = zt_cfg_record_get(d, "train_batch_size"), *m = zt_cfg_record_get(d, "train_micro_batch_size_per_gpu"),
                   *g = zt_cfg_record_get(d, "gradient_accumulation_steps");
    int64_t v;
    if (t && (zt_cfg_is_auto(t) || zt_cfg_get_int(d, t, t->key, 1, INT32_MAX, &v)))
        map_or_auto(d, t, "train_batch_size", "training.global_batch_size");
    if (m && (zt_cfg_is_auto(m) || zt_cfg_get_int(d, m, m->key, 1, 65536, &v)))
        map_or_auto(d, m, "train_micro_batch_size_per_gpu", "training.micro_batch_size");
    if (g && (zt_cfg_is_auto(g) || zt_cfg_get_int(d, g, g->key, 1, 1048576, &v)))
        map_or_auto(d, g, "gradient_accumulation_steps", "training.gradient_accumulation_steps");
    /* DeepSpeed's _set_batch_related_parameters: what train_batch_size leaves open is derived */
    if (explicit_node(t)) {
        if (!m && !g) {
            ds_default(d, "training.gradient_accumulation_steps", "1",
                       "train_batch_size alone: gradient_accumulation_steps 1");
            ds_default(d, "training.micro_batch_size", "0",
                       "train_batch_size alone: micro batch = train_batch_size / world, at launch");
        } else if (explicit_node(m) && !g) {
            ds_default(d, "training.gradient_accumulation_steps", "0",
                       "gradient_accumulation_steps = train_batch_size / (micro x world), at launch");
        } else if (explicit_node(g) && !m) {
            ds_default(d, "training.micro_batch_size", "0",
                       "micro batch = train_batch_size / (gradient_accumulation_steps x world), at "
                       "launch");
        }
    } else if (!m && !t) {
        zt_cfg_note(d->x, ZT_CONFIG_NOTE,
                    "%s: neither train_batch_size nor train_micro_batch_size_per_gpu (DeepSpeed "
                    "refuses that): training.micro_batch_size keeps its native value",
                    d->file);
    }
}

static void resolve_stage(dctx *d) {
    const cfg_node *st = zt_cfg_record_get(d, "zero_optimization.stage");
    const cfg_node *mics = zt_cfg_record_get(d, "zero_optimization.mics_shard_size");
    const cfg_node *hpz = zt_cfg_record_get(d, "zero_optimization.zero_hpz_partition_size");
    int64_t stage = 0, ms = -1, hs = 1;
    if (st && !zt_cfg_get_int(d, st, "zero_optimization.stage", 0, 3, &stage)) return;
    if (mics && !zt_cfg_get_int(d, mics, "zero_optimization.mics_shard_size", -1, 1048576, &ms)) return;
    if (hpz && !zt_cfg_get_int(d, hpz, "zero_optimization.zero_hpz_partition_size", 0, 1048576, &hs))
        return;
    bool use_mics = ms > 0, use_hpz = hs > 1;
    if (use_mics && use_hpz) {
        zt_cfg_derror(d, hpz, "zero_optimization.zero_hpz_partition_size",
                      "cannot be combined with mics_shard_size (set one)");
        return;
    }
    if ((use_mics || use_hpz) && stage != 3) {
        const cfg_node *n = use_mics ? mics : hpz;
        zt_cfg_dnote(d, ZT_CONFIG_WARNING, n, use_mics ? "zero_optimization.mics_shard_size"
                                                       : "zero_optimization.zero_hpz_partition_size",
                     "applies to stage 3 only: ignored with stage %lld", (long long)stage);
        use_mics = use_hpz = false;
    }
    static const char *const NAMES[] = {"ddp", "zero1", "zero2", "zero3"};
    if (!st) {
        ds_default(d, "parallel.strategy", "ddp", "zero_optimization.stage absent: stage 0");
        return;
    }
    if (!use_mics && !use_hpz) {
        zt_cfg_map(d, st, "zero_optimization.stage", "parallel.strategy", NAMES[stage]);
        return;
    }
    const cfg_node *n = use_mics ? mics : hpz;
    const char *path = use_mics ? "zero_optimization.mics_shard_size"
                                : "zero_optimization.zero_hpz_partition_size";
    char size[32];
    snprintf(size, sizeof size, "%lld", (long long)(use_mics ? ms : hs));
    zt_cfg_map(d, st, "zero_optimization.stage", "parallel.strategy", "hybrid");
    zt_cfg_map(d, n, path, "parallel.hybrid_shard_size", size);
    zt_cfg_map(d, st, "zero_optimization.stage", "parallel.hybrid_inner", "zero3");
    if (use_hpz)
        zt_cfg_dnote(d, ZT_CONFIG_WARNING, n, path,
                     "approximated: hpZ keeps the primary parameter and optimizer shards over all "
                     "ranks and adds a secondary copy per group of %s for backward's all-gathers; "
                     "zerotrain's hybrid shards everything inside groups of %s and replicates across "
                     "them (FSDP's HYBRID_SHARD, which is MiCS; torchtitan maps hpZ to FSDP2's "
                     "reshard_after_forward=<int>). Same results, more memory per rank",
                     size, size);
    else
        zt_cfg_dnote(d, ZT_CONFIG_NOTE, n, path,
                     "MiCS: zero3 inside groups of %s ranks, replicated across groups (hybrid); "
                     "its hierarchical all-gather is a communication detail",
                     size);
}

static void resolve_precision(dctx *d) {
    const cfg_node *b = zt_cfg_record_get(d, "bf16.enabled"), *f = zt_cfg_record_get(d, "fp16.enabled");
    bool bon = false, fon = false;
    if (explicit_node(b) && !zt_cfg_get_bool(d, b, "bf16.enabled", &bon)) return;
    if (explicit_node(f) && !zt_cfg_get_bool(d, f, "fp16.enabled", &fon)) return;
    if (bon && fon) {
        zt_cfg_derror(d, f, "fp16.enabled", "bf16 and fp16 cannot both be enabled");
        return;
    }
    const cfg_node *ta = zt_cfg_record_get(d, "torch_autocast"), *ten = ta ? zt_cfg_child(ta, "enabled") : NULL;
    if (ten && ten->kind == CN_BOOL && ten->b && (bon || fon))
        zt_cfg_dnote(d, ZT_CONFIG_WARNING, ta, "torch_autocast",
                     "approximated by the %s block's precision.mode (casts per unit, not per op)",
                     bon ? "bf16" : "fp16");
    else if (ten && ten->kind == CN_BOOL && ten->b)
        zt_cfg_derror(d, ta, "torch_autocast",
                      "torch autocast alone is not supported: use the bf16 or fp16 block (precision.mode)");
    else if (ta)
        zt_cfg_dnote(d, ZT_CONFIG_NOTE, ta, "torch_autocast", "not enabled");
    if (bon) {
        zt_cfg_map(d, b, "bf16.enabled", "precision.mode", "bf16");
        /* DeepSpeed's engine (runtime/engine.py, DeepSpeedEngine.communication_data_type) reduces
         * gradients in bf16 when the bf16 block is on and communication_data_type is not set */
        const cfg_node *cd = zt_cfg_record_get(d, "communication_data_type");
        if (!cd || cd->kind == CN_NULL)
            ds_default(d, "precision.reduce_dtype", "bf16",
                       "communication_data_type absent under bf16: gradients reduced in bf16");
    } else if (fon) {
        zt_cfg_map(d, f, "fp16.enabled", "precision.mode", "fp16");
        const cfg_node *cd = zt_cfg_record_get(d, "communication_data_type");
        if (!cd || cd->kind == CN_NULL)
            ds_default(d, "precision.reduce_dtype", "fp16",
                       "communication_data_type absent under fp16: gradients reduced in fp16");
    } else if (zt_cfg_is_auto(b))
        map_or_auto(d, b, "bf16.enabled", "precision.mode");
    else if (zt_cfg_is_auto(f))
        map_or_auto(d, f, "fp16.enabled", "precision.mode");
    else if (b || f)
        zt_cfg_map(d, b ? b : f, b ? "bf16.enabled" : "fp16.enabled", "precision.mode", "fp32");
}

/* The scheduler's peak lr, when it sets one (DeepSpeed uses it over the optimizer's lr). */
static const cfg_node *sched_max_lr(dctx *d, const char **type) {
    const cfg_node *t = zt_cfg_record_get(d, "scheduler.type");
    *type = t ? t->text : NULL;
    if (!t) return NULL;
    return zt_cfg_record_get(d, "scheduler.params.warmup_max_lr");
}

static void resolve_optimizer(dctx *d) {
    const cfg_node *t = zt_cfg_record_get(d, "optimizer.type");
    if (!t) {
        zt_cfg_note(d->x, ZT_CONFIG_NOTE, "%s: no optimizer block: the native optimizer settings apply",
                    d->file);
        return;
    }
    bool sgd = strcasecmp(t->text, "sgd") == 0, adam = strcasecmp(t->text, "adam") == 0;
    const cfg_node *lr = zt_cfg_record_get(d, "optimizer.params.lr"), *betas = zt_cfg_record_get(d, "optimizer.params.betas"),
                   *eps = zt_cfg_record_get(d, "optimizer.params.eps"),
                   *wd = zt_cfg_record_get(d, "optimizer.params.weight_decay"),
                   *awm = zt_cfg_record_get(d, "optimizer.params.adam_w_mode"),
                   *bc = zt_cfg_record_get(d, "optimizer.params.bias_correction"),
                   *ams = zt_cfg_record_get(d, "optimizer.params.amsgrad"),
                   *mom = zt_cfg_record_get(d, "optimizer.params.momentum"),
                   *nes = zt_cfg_record_get(d, "optimizer.params.nesterov"),
                   *damp = zt_cfg_record_get(d, "optimizer.params.dampening"),
                   *max = zt_cfg_record_get(d, "optimizer.params.maximize");
    bool b;
    double x;
    if (bc && zt_cfg_get_bool(d, bc, "optimizer.params.bias_correction", &b) && !b)
        zt_cfg_derror(d, bc, "optimizer.params.bias_correction",
                      "false is not supported: zerotrain's AdamW always corrects the bias");
    if (ams && zt_cfg_get_bool(d, ams, "optimizer.params.amsgrad", &b) && b)
        zt_cfg_derror(d, ams, "optimizer.params.amsgrad", "true is not supported (AMSGrad)");
    if (max && zt_cfg_get_bool(d, max, "optimizer.params.maximize", &b) && b)
        zt_cfg_derror(d, max, "optimizer.params.maximize", "true is not supported");
    if (damp && zt_cfg_get_num(d, damp, "optimizer.params.dampening", 0, 1, &x) && x != 0)
        zt_cfg_derror(d, damp, "optimizer.params.dampening", "only 0 is supported");
    if (sgd) {
        zt_cfg_map(d, t, "optimizer.type", "optimizer.type", "sgd");
        const cfg_node *adam_only[] = {betas, eps, awm};
        for (size_t i = 0; i < 3; i++)
            if (adam_only[i])
                zt_cfg_dnote(d, ZT_CONFIG_WARNING, adam_only[i], adam_only[i]->key,
                             "an Adam parameter: no effect with SGD");
    } else {
        bool wmode = true;
        if (awm && !zt_cfg_get_bool(d, awm, "optimizer.params.adam_w_mode", &wmode)) return;
        if (adam && !wmode) {
            double w = 0;
            bool wd_zero = wd && !zt_cfg_is_auto(wd) && wd->kind == CN_NUM && (w = wd->num) == 0;
            if (!wd_zero) {
                zt_cfg_derror(d, awm, "optimizer.params.adam_w_mode",
                              "false applies L2 weight decay through the gradient (torch.optim.Adam); "
                              "zerotrain's AdamW decays decoupled: set adam_w_mode true or "
                              "weight_decay 0");
            }
        }
        zt_cfg_map(d, t, "optimizer.type", "optimizer.type", "adamw");
        if (mom) zt_cfg_dnote(d, ZT_CONFIG_WARNING, mom, "optimizer.params.momentum", "an SGD parameter: no effect with Adam");
        if (nes) zt_cfg_dnote(d, ZT_CONFIG_WARNING, nes, "optimizer.params.nesterov", "an SGD parameter: no effect with Adam");
    }
    /* lr: the scheduler's warmup_max_lr wins in DeepSpeed */
    const char *stype;
    const cfg_node *smax = sched_max_lr(d, &stype);
    bool sched_sets_lr = (smax && !zt_cfg_is_auto(smax)) ||
                         (stype && !strcmp(stype, "WarmupDecayLR") && !smax);
    if (lr && sched_sets_lr) {
        zt_cfg_dnote(d, ZT_CONFIG_WARNING, lr, "optimizer.params.lr",
                     "no effect: DeepSpeed's %s sets the lr from scheduler.params.warmup_max_lr%s",
                     stype, smax ? "" : " (default 0.001)");
    } else if (lr) {
        if (zt_cfg_is_auto(lr) || zt_cfg_get_num(d, lr, "optimizer.params.lr", 0, INFINITY, &x))
            map_or_auto(d, lr, "optimizer.params.lr", "training.lr");
    } else if (!sched_sets_lr) {
        ds_default(d, "training.lr", "1e-3", "optimizer.params.lr absent: 1e-3");
    }
    if (sgd) {
        if (mom) map_or_auto(d, mom, "optimizer.params.momentum", "optimizer.momentum");
        else ds_default(d, "optimizer.momentum", "0", "optimizer.params.momentum absent: 0");
        if (nes) map_or_auto(d, nes, "optimizer.params.nesterov", "optimizer.nesterov");
        if (wd) map_or_auto(d, wd, "optimizer.params.weight_decay", "optimizer.weight_decay");
        else ds_default(d, "optimizer.weight_decay", "0", "optimizer.params.weight_decay absent: 0");
        return;
    }
    if (betas && zt_cfg_is_auto(betas)) {
        map_or_auto(d, betas, "optimizer.params.betas", "optimizer.beta1");
        map_or_auto(d, betas, "optimizer.params.betas", "optimizer.beta2");
    } else if (betas) {
        const cfg_node *b1 = betas->child, *b2 = b1 ? b1->next : NULL;
        if (!b1 || !b2 || b2->next || b1->kind != CN_NUM || b2->kind != CN_NUM) {
            zt_cfg_derror(d, betas, "optimizer.params.betas", "expected [beta1, beta2], two numbers");
        } else {
            zt_cfg_map(d, b1, "optimizer.params.betas[0]", "optimizer.beta1", b1->text);
            zt_cfg_map(d, b2, "optimizer.params.betas[1]", "optimizer.beta2", b2->text);
        }
    } else {
        ds_default(d, "optimizer.beta1", "0.9", "optimizer.params.betas absent: [0.9, 0.999]");
        ds_default(d, "optimizer.beta2", "0.999", "optimizer.params.betas absent: [0.9, 0.999]");
    }
    if (eps) map_or_auto(d, eps, "optimizer.params.eps", "optimizer.eps");
    else ds_default(d, "optimizer.eps", "1e-8", "optimizer.params.eps absent: 1e-8");
    if (wd) map_or_auto(d, wd, "optimizer.params.weight_decay", "optimizer.weight_decay");
    else ds_default(d, "optimizer.weight_decay", "0", "optimizer.params.weight_decay absent: 0");
}

static void resolve_scheduler(dctx *d) {
    const cfg_node *t = zt_cfg_record_get(d, "scheduler.type");
    if (!t) {
        if (zt_cfg_record_get(d, "optimizer.type"))
            zt_cfg_note(d->x, ZT_CONFIG_NOTE,
                        "%s: no scheduler block: zerotrain's schedule applies (training.warmup_steps, "
                        "training.decay), as Hugging Face's Trainer supplies its own; DeepSpeed alone "
                        "would keep the lr constant",
                        d->file);
        return;
    }
    const char *type = t->text;
    const cfg_node *minlr = zt_cfg_record_get(d, "scheduler.params.warmup_min_lr"),
                   *maxlr = zt_cfg_record_get(d, "scheduler.params.warmup_max_lr"),
                   *wn = zt_cfg_record_get(d, "scheduler.params.warmup_num_steps"),
                   *wt = zt_cfg_record_get(d, "scheduler.params.warmup_type"),
                   *tot = zt_cfg_record_get(d, "scheduler.params.total_num_steps"),
                   *wmr = zt_cfg_record_get(d, "scheduler.params.warmup_min_ratio"),
                   *cmr = zt_cfg_record_get(d, "scheduler.params.cos_min_ratio");
    bool lr_sched = !strcmp(type, "WarmupLR"), decay = !strcmp(type, "WarmupDecayLR"),
         cosine = !strcmp(type, "WarmupCosineLR");
    double x;
    zt_cfg_map(d, t, "scheduler.type", "training.decay",
               lr_sched ? "constant" : decay ? "linear" : "cosine");
    /* the peak */
    if (cosine) {
        if (maxlr) zt_cfg_dnote(d, ZT_CONFIG_WARNING, maxlr, "scheduler.params.warmup_max_lr",
                                "not a WarmupCosineLR parameter: no effect");
        if (minlr) zt_cfg_dnote(d, ZT_CONFIG_WARNING, minlr, "scheduler.params.warmup_min_lr",
                                "not a WarmupCosineLR parameter: no effect");
    } else if (maxlr) {
        if (zt_cfg_is_auto(maxlr) ||
            zt_cfg_get_num(d, maxlr, "scheduler.params.warmup_max_lr", 0, INFINITY, &x))
            map_or_auto(d, maxlr, "scheduler.params.warmup_max_lr", "training.lr");
    } else if (decay) {
        ds_default(d, "training.lr", "0.001",
                   "WarmupDecayLR without warmup_max_lr: 0.001 (its default, whatever the "
                   "optimizer's lr)");
        zt_cfg_note(d->x, ZT_CONFIG_WARNING,
                    "%s: scheduler: WarmupDecayLR without warmup_max_lr uses 0.001 (DeepSpeed's "
                    "default), not the optimizer's lr",
                    d->file);
    }
    /* warmup */
    if (wn) {
        if (zt_cfg_is_auto(wn) ||
            zt_cfg_get_int(d, wn, "scheduler.params.warmup_num_steps", 0, INT64_MAX, (int64_t[]){0}))
            map_or_auto(d, wn, "scheduler.params.warmup_num_steps", "training.warmup_steps");
        if (!zt_cfg_is_auto(wn) && wn->kind == CN_NUM && !tot)
            zt_cfg_fit_default(d, "training.steps", (int64_t)wn->num, wn,
                               "scheduler.params.warmup_num_steps");
    } else {
        ds_default(d, "training.warmup_steps", "1000", "scheduler.params.warmup_num_steps absent: 1000");
        if (!tot && !d->x->native_set[zt_cfg_key_index("training.warmup_steps")])
            zt_cfg_fit_default(d, "training.steps", 1000, t, "scheduler.params.warmup_num_steps (absent: 1000)");
    }
    if (!wt || !strcmp(wt->text, "log"))
        zt_cfg_note(d->x, ZT_CONFIG_WARNING,
                    "%s: scheduler: warmup_type %s: approximated by zerotrain's linear warmup from "
                    "lr / warmup_steps (DeepSpeed: min + (max - min) x log(step + 1) / "
                    "log(warmup_num_steps))",
                    d->file, wt ? "log" : "absent (log)");
    else if (strcmp(wt->text, "linear") != 0)
        zt_cfg_derror(d, wt, "scheduler.params.warmup_type", "expected \"log\" or \"linear\"");
    else
        zt_cfg_dnote(d, ZT_CONFIG_NOTE, wt, "scheduler.params.warmup_type",
                     "linear: zerotrain's warmup is linear too, from lr / warmup_steps at step 0 "
                     "(DeepSpeed's from warmup_min_lr)");
    /* the end */
    if (decay || cosine) {
        if (tot) {
            if (zt_cfg_is_auto(tot) ||
                zt_cfg_get_int(d, tot, "scheduler.params.total_num_steps", 1, INT64_MAX, (int64_t[]){0}))
                map_or_auto(d, tot, "scheduler.params.total_num_steps", "training.steps");
        } else {
            zt_cfg_derror(d, t, "scheduler.params.total_num_steps", "%s needs it", type);
        }
    }
    if (decay) {
        if (minlr) {
            if (zt_cfg_is_auto(minlr) ||
                zt_cfg_get_num(d, minlr, "scheduler.params.warmup_min_lr", 0, INFINITY, &x))
                map_or_auto(d, minlr, "scheduler.params.warmup_min_lr", "training.min_lr");
        } else {
            ds_default(d, "training.min_lr", "0", "WarmupDecayLR decays to warmup_min_lr (0)");
        }
    } else if (minlr && !cosine && !zt_cfg_is_auto(minlr) && minlr->kind == CN_NUM && minlr->num != 0) {
        zt_cfg_dnote(d, ZT_CONFIG_WARNING, minlr, "scheduler.params.warmup_min_lr",
                     "approximated: zerotrain's warmup starts at lr / warmup_steps");
    }
    if (cosine) {
        double ratio = 1e-4;
        if (cmr && !zt_cfg_is_auto(cmr) &&
            !zt_cfg_get_num(d, cmr, "scheduler.params.cos_min_ratio", 0, 1, &ratio))
            return;
        if (cmr && zt_cfg_is_auto(cmr)) {
            map_or_auto(d, cmr, "scheduler.params.cos_min_ratio", "training.min_lr");
        } else if (cmr || !d->x->native_set[zt_cfg_key_index("training.min_lr")]) {
            char v[64], desc[ZT_CONFIG_SOURCE_MAX], w[ZT_PATH_MAX + 32];
            snprintf(v, sizeof v, "%.9g", (double)d->x->c->lr.max_lr * ratio);
            snprintf(desc, sizeof desc, "deepspeed scheduler.params.cos_min_ratio=%g x training.lr %g%s",
                     ratio, (double)d->x->c->lr.max_lr, cmr ? "" : " (default ratio)");
            zt_cfg_apply_str(d->x, "training.min_lr", v, ZT_ORIGIN_DIALECT,
                             cmr ? zt_cfg_where(d, cmr, false, w, sizeof w) : d->file, desc,
                             "scheduler.params.cos_min_ratio");
        }
        if (wmr && !zt_cfg_is_auto(wmr) &&
            zt_cfg_get_num(d, wmr, "scheduler.params.warmup_min_ratio", 0, 1, &x) && x != 0)
            zt_cfg_dnote(d, ZT_CONFIG_WARNING, wmr, "scheduler.params.warmup_min_ratio",
                         "approximated: zerotrain's warmup starts at lr / warmup_steps");
    }
}

static void resolve_clip(dctx *d) {
    const cfg_node *c = zt_cfg_record_get(d, "gradient_clipping");
    double x;
    if (c) {
        if (zt_cfg_is_auto(c) || zt_cfg_get_num(d, c, "gradient_clipping", 0, INFINITY, &x))
            map_or_auto(d, c, "gradient_clipping", "training.grad_clip");
        return;
    }
    zt_cfg_note(d->x, ZT_CONFIG_NOTE,
                "%s: no gradient_clipping: training.grad_clip keeps its value (default 1.0, "
                "DeepSpeed's default since PR #8068; older DeepSpeed code did not clip, although "
                "its docs said 1.0: write \"gradient_clipping\": 0 for that)",
                d->file);
}

void zt_cfg_read_deepspeed(cfg_ctx *x, const char *text, size_t len, const char *name) {
    cfg_node *root = zt_cfg_json_tree(x, text, len, name);
    if (!root) return;
    if (zt_cfg_child(root, "distributed_type") || zt_cfg_child(root, "compute_environment")) {
        zt_cfg_node_free(root);
        zt_cfg_error(x, "%s: an Accelerate config (distributed_type), not a DeepSpeed one: name it "
                        "as accelerate_config, or give it to zerotrain directly",
                     name);
        return;
    }
    dialect_records st = {0};
    dctx d = {x, name, "deepspeed", ROWS, (int)(sizeof ROWS / sizeof ROWS[0]), &st, NULL};
    zt_cfg_walk(&d, root, "");
    resolve_batch(&d);
    resolve_stage(&d);
    resolve_precision(&d);
    resolve_optimizer(&d);
    resolve_scheduler(&d);
    resolve_clip(&d);
    zt_cfg_node_free(root);
}
