/* dialect_accelerate.c - Hugging Face Accelerate's config YAML (what `accelerate config` writes:
 * commands/config/config_args.py ClusterConfig; the deepspeed_config and fsdp_config blocks as
 * launch.py and utils/dataclasses.py read them) into the native configuration.
 *
 * The headline: a DEEPSPEED file and an FSDP file that differ in two lines (distributed_type, and
 * zero_stage: 3 / fsdp_sharding_strategy: FULL_SHARD) resolve to the same native configuration,
 * so they train bit-identically (examples/accelerate_*.yaml, tests/config_dialects.sh).
 *
 * Rules (docs/config.md says them to users):
 *   - only the block distributed_type selects is read (Accelerate ignores the other one too);
 *   - Accelerate's precision alignment: mixed_precision bf16/fp16 keeps fp32 master weights for
 *     DeepSpeed and FSDP alike (accelerate#2624, fixed in 0.30 by upcasting FSDP's trainable
 *     parameters), which is zerotrain's precision.mode bf16 / fp16 either way; both reduce
 *     gradients in that dtype (precision.reduce_dtype, resolve_precision says why);
 *   - with deepspeed_config_file, the YAML keys Accelerate rejects next to it (gradient
 *     accumulation, clipping, zero_stage, offload devices and paths, zero3_save_16bit_model,
 *     mixed_precision) are errors here too, and the JSON is read as a DeepSpeed config;
 *   - FSDP2's fsdp_reshard_after_forward: false is zero3 with parallel.reshard_after_forward false
 *     (sharded between steps, kept from forward to backward: exactly FSDP2's behaviour); FSDP1's
 *     SHARD_GRAD_OP is zero2. The results are identical either way. */
#include "config/config_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>


/* parallelism_config keys are written with a "parallelism_config_" prefix; the bare name works too. */
static int h_alias(dctx *d, const dialect_row *r, const cfg_node *n) {
    dialect_records *s = d->state;
    if (s->n < ZT_CFG_MAX_RECORDS) {
        s->path[s->n] = r->doc; /* the canonical row's path */
        s->node[s->n] = n;
        s->n++;
    }
    return 0;
}

static int h_warn_if_true(dctx *d, const dialect_row *r, const cfg_node *n) {
    bool b;
    if (!zt_cfg_get_bool(d, n, r->path, &b)) return -1;
    if (b) zt_cfg_dnote(d, ZT_CONFIG_WARNING, n, r->path, "%s", r->doc);
    return 0;
}

/* A block that only warns when it has content. */
static int h_block(dctx *d, const dialect_row *r, const cfg_node *n) {
    bool content = n->kind == CN_MAP && n->child;
    zt_cfg_dnote(d, content && r->level == ZT_CONFIG_WARNING ? ZT_CONFIG_WARNING : ZT_CONFIG_NOTE, n,
                 r->path, "%s", r->doc);
    return 0;
}

static int h_dynamo(dctx *d, const dialect_row *r, const cfg_node *n) {
    const cfg_node *b = zt_cfg_child(n, "dynamo_backend");
    bool on = b && b->kind == CN_STR && strcasecmp(b->text, "no") != 0;
    zt_cfg_dnote(d, on ? ZT_CONFIG_WARNING : ZT_CONFIG_NOTE, n, r->path, "%s", r->doc);
    return 0;
}

/* Keys that only matter at a value other than Accelerate's neutral one: nothing is said about
 * the neutral value (it asks for nothing), a note about any other. */
static const struct {
    const char *path, *neutral;
} NEUTRAL[] = {{"debug", "false"},         {"use_cpu", "false"},        {"downcast_bf16", "no"},
               {"downcast_bf16", "false"}, {"machine_rank", "0"},       {"main_training_function", "main"},
               {"rdzv_backend", "static"}, {"same_network", "true"},    {"same_network", "false"},
               {"tpu_use_cluster", "false"}, {"tpu_use_sudo", "false"}, {"gpu_ids", "all"},
               {"main_process_ip", ""},    {"main_process_port", ""},   {"tpu_name", ""},
               {"tpu_zone", ""},           {"command_file", ""}};

static int h_note_unless_neutral(dctx *d, const dialect_row *r, const cfg_node *n) {
    char v[64];
    if (n->kind == CN_NULL || (n->kind == CN_SEQ && !n->child)) return 0;
    if (n->kind == CN_BOOL)
        snprintf(v, sizeof v, "%s", n->b ? "true" : "false");
    else
        snprintf(v, sizeof v, "%s", n->text ? n->text : "");
    for (size_t i = 0; i < sizeof NEUTRAL / sizeof NEUTRAL[0]; i++)
        if (!strcmp(NEUTRAL[i].path, r->path) && !strcasecmp(NEUTRAL[i].neutral, v)) return 0;
    zt_cfg_dnote(d, r->level, n, r->path, "%s", r->doc);
    return 0;
}

static int h_compute_env(dctx *d, const dialect_row *r, const cfg_node *n) {
    if (strcmp(n->text, "LOCAL_MACHINE") == 0) return 0;
    zt_cfg_derror(d, n, r->path, "\"%s\" is not supported (LOCAL_MACHINE: one or more machines "
                                 "started with mpirun)",
                  n->text);
    return -1;
}

#define NOTE ZT_CONFIG_NOTE
#define WARN ZT_CONFIG_WARNING
#define BLOCK (A_MAP | A_NULL)

static const dialect_row ROWS[] = {
    {"compute_environment", A_STR, NULL, h_compute_env, NOTE, "LOCAL_MACHINE (SageMaker: an error)"},
    {"distributed_type", A_STR | A_BOOL, "parallel.strategy", zt_cfg_record_row, NOTE,
     "NO, MULTI_CPU (and MULTI_GPU etc., on CPUs here): ddp; DEEPSPEED: from deepspeed_config; "
     "FSDP: from fsdp_config; XLA, MEGATRON_LM: an error"},
    {"num_processes", A_INT, "parallel.nproc", zt_cfg_record_row, NOTE,
     "ranks in all; with num_machines 1 the local ranks `zerotrain train` starts"},
    {"num_machines", A_INT, NULL, zt_cfg_record_row, NOTE,
     "> 1: start the ranks with mpirun -np N -hostfile HOSTS (a warning)"},
    {"machine_rank", A_INT, NULL, h_note_unless_neutral, NOTE, "mpirun assigns ranks"},
    {"main_process_ip", A_STR | A_NULL, NULL, h_note_unless_neutral, NOTE, "mpirun connects the ranks"},
    {"main_process_port", A_INT | A_NULL, NULL, h_note_unless_neutral, NOTE, "mpirun connects the ranks"},
    {"rdzv_backend", A_STR | A_NULL, NULL, h_note_unless_neutral, NOTE, "mpirun connects the ranks"},
    {"same_network", A_BOOL | A_NULL, NULL, h_note_unless_neutral, NOTE, "mpirun connects the ranks"},
    {"gpu_ids", A_STR | A_INT | A_NULL, NULL, h_note_unless_neutral, NOTE, "no GPUs on this build"},
    {"mixed_precision", A_STR | A_BOOL | A_NULL, "precision.mode", zt_cfg_record_row, NOTE,
     "no: fp32; bf16: bf16; fp16: fp16 (fp32 master weights for both backends, Accelerate's "
     "alignment); with FSDP or DEEPSPEED, precision.reduce_dtype follows (FSDP's reduce_dtype, "
     "DeepSpeed's communication_data_type default); fp8: an error"},
    {"use_cpu", A_BOOL, NULL, h_note_unless_neutral, NOTE, "this build runs on CPUs"},
    {"debug", A_BOOL, NULL, h_note_unless_neutral, NOTE,
     "zerotrain's collectives always check their peers (ZT_COMM_TIMEOUT)"},
    {"downcast_bf16", A_BOOL | A_STR, NULL, h_note_unless_neutral, NOTE, "TPU only"},
    {"enable_cpu_affinity", A_BOOL, NULL, h_warn_if_true, NOTE,
     "ranks start with --bind-to none; pin threads with OMP_PROC_BIND and OMP_PLACES"},
    {"main_training_function", A_STR, NULL, h_note_unless_neutral, NOTE, "zerotrain has its own training loop"},
    {"tpu_name", A_STR | A_NULL, NULL, h_note_unless_neutral, NOTE, "TPU only"},
    {"tpu_zone", A_STR | A_NULL, NULL, h_note_unless_neutral, NOTE, "TPU only"},
    {"tpu_use_cluster", A_BOOL, NULL, h_note_unless_neutral, NOTE, "TPU only"},
    {"tpu_use_sudo", A_BOOL, NULL, h_note_unless_neutral, NOTE, "TPU only"},
    {"tpu_env", A_SEQ | A_NULL, NULL, h_note_unless_neutral, NOTE, "TPU only"},
    {"tpu_vm", A_SEQ | A_NULL, NULL, h_note_unless_neutral, NOTE, "TPU only"},
    {"command_file", A_STR | A_NULL, NULL, h_note_unless_neutral, NOTE, "TPU only"},
    {"commands", A_SEQ | A_NULL, NULL, h_note_unless_neutral, NOTE, "TPU only"},
    {"dynamo_config", BLOCK, NULL, h_dynamo, NOTE, "torch.compile: not applicable (zerotrain is C)"},
    {"dynamo_backend", A_STR, NULL, NULL, NOTE, "torch.compile: not applicable (zerotrain is C)"},
    {"fp8_config", BLOCK, NULL, h_block, NOTE, "fp8 recipes: fp8 is not supported"},
    {"megatron_lm_config", BLOCK, NULL, h_block, WARN,
     "the Megatron-LM plugin (tensor and pipeline parallelism) is not implemented"},
    {"mpirun_config", BLOCK, NULL, h_block, NOTE,
     "run mpirun -hostfile yourself: `mpirun -np N -hostfile HOSTS zerotrain train CONFIG`"},
    {"ipex_config", BLOCK, NULL, h_block, NOTE, "Intel extension for PyTorch: not applicable"},
    /* SageMakerConfig's own keys: compute_environment AMAZON_SAGEMAKER is refused already */
    {"ec2_instance_type", A_STR | A_NULL, NULL, NULL, NOTE, "SageMaker only"},
    {"iam_role_name", A_STR | A_NULL, NULL, NULL, NOTE, "SageMaker only"},
    {"image_uri", A_STR | A_NULL, NULL, NULL, NOTE, "SageMaker only"},
    {"profile", A_STR | A_NULL, NULL, NULL, NOTE, "SageMaker only"},
    {"region", A_STR | A_NULL, NULL, NULL, NOTE, "SageMaker only"},
    {"base_job_name", A_STR | A_NULL, NULL, NULL, NOTE, "SageMaker only"},
    {"pytorch_version", A_STR | A_NUM | A_NULL, NULL, NULL, NOTE, "SageMaker only"},
    {"transformers_version", A_STR | A_NUM | A_NULL, NULL, NULL, NOTE, "SageMaker only"},
    {"py_version", A_STR | A_NULL, NULL, NULL, NOTE, "SageMaker only"},
    {"sagemaker_inputs_file", A_STR | A_NULL, NULL, NULL, NOTE, "SageMaker only"},
    {"sagemaker_metrics_file", A_STR | A_NULL, NULL, NULL, NOTE, "SageMaker only"},
    {"additional_args", A_MAP | A_NULL, NULL, NULL, NOTE, "SageMaker only"},
    {"deepspeed_config", BLOCK, NULL, zt_cfg_record_row, NOTE, "read when distributed_type is DEEPSPEED"},
    {"fsdp_config", BLOCK, NULL, zt_cfg_record_row, NOTE, "read when distributed_type is FSDP"},
    {"parallelism_config", BLOCK, NULL, zt_cfg_record_row, NOTE, "FSDP2's 2-D mesh and beyond"},
    /* deepspeed_config (what `accelerate config` asks; DeepSpeedPlugin's defaults) */
    {"deepspeed_config.zero_stage", A_INT, "parallel.strategy", zt_cfg_record_row, NOTE,
     "0 ddp, 1 zero1, 2 zero2, 3 zero3; absent: 2 (DeepSpeedPlugin's default)"},
    {"deepspeed_config.gradient_accumulation_steps", A_INT | A_AUTO,
     "training.gradient_accumulation_steps", zt_cfg_record_row, NOTE, "same meaning; absent: \"auto\""},
    {"deepspeed_config.gradient_clipping", A_NUM | A_AUTO, "training.grad_clip", zt_cfg_record_row, NOTE,
     "same meaning; absent: DeepSpeed's default (1.0)"},
    {"deepspeed_config.offload_optimizer_device", A_STR | A_NULL, "memory.offload_optimizer", zt_cfg_record_row,
     NOTE, "none | cpu (no-op here: a warning) | nvme (the moments stream from files)"},
    {"deepspeed_config.offload_param_device", A_STR | A_NULL, "memory.offload_param", zt_cfg_record_row, NOTE,
     "none | cpu (no-op here: a warning) | nvme (not implemented yet: an error)"},
    {"deepspeed_config.offload_optimizer_nvme_path", A_STR | A_NULL,
     "memory.offload_optimizer_nvme_path", zt_cfg_record_row, NOTE, "same meaning (\"none\": unset)"},
    {"deepspeed_config.offload_param_nvme_path", A_STR | A_NULL, "memory.offload_param_nvme_path",
     zt_cfg_record_row, NOTE, "same meaning (\"none\": unset)"},
    {"deepspeed_config.zero3_init_flag", A_BOOL, NULL, zt_cfg_record_row, NOTE,
     "zerotrain always initializes each shard in place from the seed (no full copy on a rank)"},
    {"deepspeed_config.zero3_save_16bit_model", A_BOOL, "checkpoint.save_consolidated", zt_cfg_record_row, NOTE,
     "same meaning (a warning when true, see the table above)"},
    {"deepspeed_config.deepspeed_config_file", A_STR, NULL, zt_cfg_record_row, NOTE,
     "a DeepSpeed JSON read as such (relative to this file, else to the working directory); the "
     "keys above are then errors, as in Accelerate"},
    {"deepspeed_config.deepspeed_multinode_launcher", A_STR | A_NULL, NULL, zt_cfg_record_row, NOTE,
     "multi-node: mpirun -hostfile"},
    {"deepspeed_config.deepspeed_hostfile", A_STR | A_NULL, NULL, zt_cfg_record_row, NOTE,
     "multi-node: mpirun -hostfile"},
    {"deepspeed_config.deepspeed_exclusion_filter", A_STR | A_NULL, NULL, zt_cfg_record_row, NOTE,
     "multi-node: mpirun -hostfile"},
    {"deepspeed_config.deepspeed_inclusion_filter", A_STR | A_NULL, NULL, zt_cfg_record_row, NOTE,
     "multi-node: mpirun -hostfile"},
    {"deepspeed_config.deepspeed_moe_layer_cls_names", A_STR | A_NULL, NULL, zt_cfg_record_row, NOTE,
     "mixture of experts is not implemented (a warning)"},
    {"deepspeed_config.seq_parallel_communication_data_type", A_STR | A_NULL, NULL, NULL, NOTE,
     "sequence-parallel detail: no sequence parallelism"},
    /* fsdp_config */
    {"fsdp_config.fsdp_ignored_modules", A_STR | A_SEQ | A_NULL, NULL, NULL, NOTE,
     "every parameter of the built-in models is sharded (null or empty: none ignored)"},
    {"fsdp_config.fsdp_version", A_INT, NULL, zt_cfg_record_row, NOTE, "1 or 2; absent: 1"},
    {"fsdp_config.fsdp_sharding_strategy", A_STR | A_INT, "parallel.strategy", zt_cfg_record_row, NOTE,
     "FULL_SHARD (1) zero3; SHARD_GRAD_OP (2) zero2; NO_SHARD (3) ddp; HYBRID_SHARD (4) hybrid "
     "with zero3 per machine; HYBRID_SHARD_ZERO2 (5) hybrid with zero2 per machine"},
    {"fsdp_config.fsdp_reshard_after_forward", A_BOOL | A_STR | A_INT, "parallel.reshard_after_forward",
     zt_cfg_record_row, NOTE,
     "FSDP2: true zero3; false zero3 with parallel.reshard_after_forward false. FSDP1: a sharding "
     "strategy name or number, as fsdp_sharding_strategy"},
    {"fsdp_config.fsdp_offload_params", A_BOOL | A_STR, "memory.offload_param", zt_cfg_record_row, NOTE,
     "true: memory.offload_param and memory.offload_optimizer cpu (no-op here: a warning)"},
    {"fsdp_config.fsdp_auto_wrap_policy", A_STR | A_NULL, NULL, zt_cfg_record_row, NOTE,
     "TRANSFORMER_BASED_WRAP: zerotrain's units are the transformer blocks already; SIZE_BASED_WRAP, "
     "NO_WRAP: a warning (units stay per block)"},
    {"fsdp_config.fsdp_transformer_layer_cls_to_wrap", A_STR | A_SEQ | A_NULL, NULL, zt_cfg_record_row, NOTE,
     "GPT-2's units are its blocks, whatever the class name"},
    {"fsdp_config.fsdp_min_num_params", A_INT, NULL, zt_cfg_record_row, NOTE, "units are per block"},
    {"fsdp_config.fsdp_state_dict_type", A_STR | A_INT, "checkpoint.save_consolidated", zt_cfg_record_row, NOTE,
     "FULL_STATE_DICT: true; SHARDED_STATE_DICT: false; LOCAL_STATE_DICT: false (obsolete)"},
    {"fsdp_config.fsdp_activation_checkpointing", A_BOOL | A_STR, "memory.activation_checkpointing",
     zt_cfg_record_row, NOTE, "true: full (every unit recomputed in backward; a native selective stays); false: none"},
    {"fsdp_config.fsdp_cpu_ram_efficient_loading", A_BOOL | A_STR, NULL, zt_cfg_record_row, NOTE,
     "zerotrain always initializes each shard in place from the seed (no full copy on a rank)"},
    {"fsdp_config.fsdp_sync_module_states", A_BOOL | A_STR, NULL, zt_cfg_record_row, NOTE,
     "every rank initializes the same values from the seed: nothing to broadcast"},
    {"fsdp_config.fsdp_backward_prefetch", A_STR | A_INT | A_NULL, "parallel.prefetch", zt_cfg_record_row, NOTE,
     "FSDP1 BACKWARD_PRE, BACKWARD_POST: prefetch true; NO_PREFETCH: false unless "
     "fsdp_forward_prefetch is true; FSDP2 ignores it"},
    {"fsdp_config.fsdp_backward_prefetch_policy", A_STR | A_INT | A_NULL, "parallel.prefetch", zt_cfg_record_row,
     NOTE, "the older name of fsdp_backward_prefetch"},
    {"fsdp_config.fsdp_forward_prefetch", A_BOOL | A_STR, "parallel.prefetch", zt_cfg_record_row, NOTE,
     "FSDP1 true: prefetch true"},
    {"fsdp_config.fsdp_use_orig_params", A_BOOL | A_STR, NULL, zt_cfg_record_row, NOTE,
     "parameters are always kept per tensor (FSDP2's way)"},
    /* parallelism_config (FSDP2) */
    {"parallelism_config.parallelism_config_dp_replicate_size", A_INT, "parallel.hybrid_replicas",
     zt_cfg_record_row, NOTE, "> 1: hybrid, replicated across this many groups"},
    {"parallelism_config.parallelism_config_dp_shard_size", A_INT, "parallel.hybrid_shard_size",
     zt_cfg_record_row, NOTE, "ranks per shard group"},
    {"parallelism_config.parallelism_config_tp_size", A_INT, "parallel.tensor_parallel_size", zt_cfg_record_row,
     NOTE, "> 1: not implemented (an error)"},
    {"parallelism_config.parallelism_config_cp_size", A_INT, "parallel.context_parallel_size", zt_cfg_record_row,
     NOTE, "> 1: not implemented (an error)"},
    {"parallelism_config.parallelism_config_sp_size", A_INT, "parallel.context_parallel_size", zt_cfg_record_row,
     NOTE, "> 1: not implemented (an error)"},
    {"parallelism_config.parallelism_config_cp_comm_strategy", A_STR, NULL, NULL, NOTE,
     "context-parallel detail"},
    {"parallelism_config.parallelism_config_cp_backend", A_STR, NULL, NULL, NOTE, "context-parallel detail"},
    {"parallelism_config.parallelism_config_sp_backend", A_STR, NULL, NULL, NOTE, "sequence-parallel detail"},
    {"parallelism_config.parallelism_config_sp_seq_length", A_INT | A_NULL, NULL, NULL, NOTE,
     "sequence-parallel detail"},
    {"parallelism_config.parallelism_config_sp_seq_length_is_variable", A_BOOL, NULL, NULL, NOTE,
     "sequence-parallel detail"},
    {"parallelism_config.parallelism_config_sp_attn_implementation", A_STR | A_NULL, NULL, NULL, NOTE,
     "sequence-parallel detail"},
    {"parallelism_config.dp_replicate_size", A_INT, NULL, h_alias, NOTE,
     "parallelism_config.parallelism_config_dp_replicate_size"},
    {"parallelism_config.dp_shard_size", A_INT, NULL, h_alias, NOTE,
     "parallelism_config.parallelism_config_dp_shard_size"},
    {"parallelism_config.tp_size", A_INT, NULL, h_alias, NOTE,
     "parallelism_config.parallelism_config_tp_size"},
    {"parallelism_config.cp_size", A_INT, NULL, h_alias, NOTE,
     "parallelism_config.parallelism_config_cp_size"},
    {"parallelism_config.sp_size", A_INT, NULL, h_alias, NOTE,
     "parallelism_config.parallelism_config_sp_size"},
};
#undef NOTE
#undef WARN

const dialect_row *zt_cfg_accelerate_rows(int *n) {
    *n = (int)(sizeof ROWS / sizeof ROWS[0]);
    return ROWS;
}

/* ---------------------------------------------------------------------------------------------
 * Resolution. */

static bool get_flag(dctx *d, const cfg_node *n, const char *path, bool *out) {
    return zt_cfg_get_bool(d, n, path, out);
}

/* mixed_precision: the mode, and for FSDP and DeepSpeed the reduction dtype their runs get.
 * Accelerate's FSDP plugin builds MixedPrecision(param_dtype=dtype, reduce_dtype=dtype, ...) from
 * mixed_precision (src/accelerate/utils/dataclasses.py, FullyShardedDataParallelPlugin.
 * set_mixed_precision: dtype_args = {"param_dtype": dtype, "reduce_dtype": dtype}), and the
 * DeepSpeed config it writes leaves communication_data_type unset, which DeepSpeed's engine reads
 * as the training dtype (runtime/engine.py, communication_data_type): bf16 reduces gradients in
 * bf16 and fp16 in fp16 under both, so the DEEPSPEED and FSDP files still resolve alike. */
static void resolve_precision(dctx *d, bool ds_file, bool sharded) {
    const cfg_node *mp = zt_cfg_record_get(d, "mixed_precision");
    if (!mp || mp->kind == CN_NULL) return;
    if (ds_file) return; /* an error already */
    const char *v = mp->kind == CN_BOOL ? (mp->b ? "?" : "no") : mp->text;
    if (!strcasecmp(v, "no"))
        zt_cfg_map(d, mp, "mixed_precision", "precision.mode", "fp32");
    else if (!strcasecmp(v, "bf16") || !strcasecmp(v, "fp16")) {
        zt_cfg_map(d, mp, "mixed_precision", "precision.mode", v);
        const char *dt = !strcasecmp(v, "bf16") ? "bf16" : "fp16";
        if (sharded) zt_cfg_map(d, mp, "mixed_precision", "precision.reduce_dtype", dt);
        zt_cfg_dnote(d, ZT_CONFIG_NOTE, mp, "mixed_precision",
                     "%s with fp32 master weights for DeepSpeed and FSDP alike (Accelerate's "
                     "alignment, accelerate#2624)%s%s%s",
                     v, sharded ? "; gradients reduced in " : "", sharded ? dt : "",
                     sharded ? ", as Accelerate's FSDP (reduce_dtype) and DeepSpeed (communication_data_type) do"
                             : "");
    } else if (!strcasecmp(v, "fp8"))
        zt_cfg_derror(d, mp, "mixed_precision", "fp8 is not supported (no, bf16 or fp16)");
    else {
        char s[100];
        zt_cfg_node_show(mp, s, sizeof s);
        zt_cfg_derror(d, mp, "mixed_precision", "expected no, bf16 or fp16 (or fp8), got %s", s);
    }
}

static void map_device(dctx *d, const char *path, const char *key) {
    const cfg_node *n = zt_cfg_record_get(d, path);
    if (!n) return;
    const char *v = n->kind == CN_NULL ? "none" : n->text;
    if (strcasecmp(v, "none") && strcasecmp(v, "cpu") && strcasecmp(v, "nvme")) {
        char s[100];
        zt_cfg_node_show(n, s, sizeof s);
        zt_cfg_derror(d, n, path, "expected none, cpu or nvme, got %s", s);
        return;
    }
    zt_cfg_map(d, n, path, key, v);
}

static void map_path(dctx *d, const char *path, const char *key) {
    const cfg_node *n = zt_cfg_record_get(d, path);
    if (!n || n->kind == CN_NULL || !strcasecmp(n->text, "none")) return;
    zt_cfg_map(d, n, path, key, n->text);
}

static void map_plain(dctx *d, const char *path, const char *key) {
    const cfg_node *n = zt_cfg_record_get(d, path);
    if (!n) return;
    char w[ZT_PATH_MAX + 32], desc[ZT_CONFIG_SOURCE_MAX];
    if (zt_cfg_is_auto(n)) {
        zt_cfg_auto(d->x, key, zt_cfg_where(d, n, false, w, sizeof w),
                    zt_cfg_src(d, n, path, desc, sizeof desc));
        return;
    }
    if (n->kind == CN_BOOL)
        zt_cfg_map(d, n, path, key, n->b ? "true" : "false");
    else
        zt_cfg_map(d, n, path, key, n->text ? n->text : "");
}

static void resolve_deepspeed(dctx *d) {
    static const char *const REJECTED[] = {
        "deepspeed_config.gradient_accumulation_steps", "deepspeed_config.gradient_clipping",
        "deepspeed_config.zero_stage", "deepspeed_config.offload_optimizer_device",
        "deepspeed_config.offload_param_device", "deepspeed_config.offload_param_nvme_path",
        "deepspeed_config.offload_optimizer_nvme_path", "deepspeed_config.zero3_save_16bit_model"};
    const cfg_node *file = zt_cfg_record_get(d, "deepspeed_config.deepspeed_config_file");
    for (size_t i = 0; i < sizeof REJECTED / sizeof REJECTED[0]; i++) {
        const cfg_node *n = zt_cfg_record_get(d, REJECTED[i]);
        if (!n) continue;
        if (file)
            zt_cfg_derror(d, n, REJECTED[i],
                          "cannot be combined with deepspeed_config_file (Accelerate raises a "
                          "ValueError too): set it in the DeepSpeed file");
    }
    const cfg_node *mp = zt_cfg_record_get(d, "mixed_precision");
    if (file && mp && mp->kind != CN_NULL)
        zt_cfg_derror(d, mp, "mixed_precision",
                      "cannot be combined with deepspeed_config_file (Accelerate raises a "
                      "ValueError too): enable bf16 or fp16 in the DeepSpeed file");
    const cfg_node *moe = zt_cfg_record_get(d, "deepspeed_config.deepspeed_moe_layer_cls_names");
    if (moe && moe->kind != CN_NULL)
        zt_cfg_dnote(d, ZT_CONFIG_WARNING, moe, "deepspeed_config.deepspeed_moe_layer_cls_names",
                     "mixture of experts is not implemented: no effect");
    static const char *const MULTI[] = {"deepspeed_config.deepspeed_multinode_launcher",
                                        "deepspeed_config.deepspeed_hostfile",
                                        "deepspeed_config.deepspeed_exclusion_filter",
                                        "deepspeed_config.deepspeed_inclusion_filter"};
    for (size_t i = 0; i < 4; i++) {
        const cfg_node *n = zt_cfg_record_get(d, MULTI[i]);
        if (n)
            zt_cfg_dnote(d, ZT_CONFIG_NOTE, n, MULTI[i],
                         "multi-node starts with `mpirun -np N -hostfile HOSTS zerotrain train CONFIG`");
    }
    const cfg_node *init = zt_cfg_record_get(d, "deepspeed_config.zero3_init_flag");
    if (init)
        zt_cfg_dnote(d, ZT_CONFIG_NOTE, init, "deepspeed_config.zero3_init_flag",
                     "zerotrain always initializes each shard in place from the seed");
    if (file) {
        if (d->x->n_errors) return;
        char path[ZT_PATH_MAX + 64], w[ZT_PATH_MAX + 32];
        zt_cfg_relative_to(d->file, file->text, path, sizeof path);
        FILE *probe = fopen(path, "rb");
        if (probe)
            fclose(probe);
        else
            snprintf(path, sizeof path, "%s", file->text); /* Accelerate's rule: the working directory */
        size_t len = 0;
        cfg_ctx sub;
        zt_cfg_ctx_init(&sub, NULL);
        char *text = zt_cfg_read_file(&sub, path, &len);
        zt_cfg_where(d, file, false, w, sizeof w);
        if (!text) {
            for (int i = 0; i < sub.n_errors; i++)
                zt_cfg_error(d->x, "%s: deepspeed_config.deepspeed_config_file: %s", w, sub.errors[i]);
            if (sub.nomem) d->x->nomem = true;
            zt_cfg_ctx_free(&sub);
            return;
        }
        zt_cfg_ctx_free(&sub);
        zt_cfg_note(d->x, ZT_CONFIG_NOTE, "%s: deepspeed_config.deepspeed_config_file: %s read as a "
                                          "DeepSpeed config",
                    w, path);
        d->x->depth++;
        zt_cfg_read_deepspeed(d->x, text, len, path);
        d->x->depth--;
        free(text);
        return;
    }
    /* DeepSpeedPlugin without a file: its defaults are stage 2 and "auto" elsewhere */
    const cfg_node *st = zt_cfg_record_get(d, "deepspeed_config.zero_stage");
    static const char *const NAMES[] = {"ddp", "zero1", "zero2", "zero3"};
    int64_t stage = 2;
    if (st) {
        if (zt_cfg_get_int(d, st, "deepspeed_config.zero_stage", 0, 3, &stage))
            zt_cfg_map(d, st, "deepspeed_config.zero_stage", "parallel.strategy", NAMES[stage]);
    } else {
        int ki = zt_cfg_key_index("parallel.strategy");
        if (!d->x->native_set[ki])
            zt_cfg_apply_str(d->x, "parallel.strategy", "zero2", ZT_ORIGIN_DIALECT, d->file,
                             "accelerate default: deepspeed_config.zero_stage absent: 2",
                             "deepspeed_config.zero_stage");
    }
    map_plain(d, "deepspeed_config.gradient_accumulation_steps", "training.gradient_accumulation_steps");
    map_plain(d, "deepspeed_config.gradient_clipping", "training.grad_clip");
    map_device(d, "deepspeed_config.offload_optimizer_device", "memory.offload_optimizer");
    map_device(d, "deepspeed_config.offload_param_device", "memory.offload_param");
    map_path(d, "deepspeed_config.offload_optimizer_nvme_path", "memory.offload_optimizer_nvme_path");
    map_path(d, "deepspeed_config.offload_param_nvme_path", "memory.offload_param_nvme_path");
    map_plain(d, "deepspeed_config.zero3_save_16bit_model", "checkpoint.save_consolidated");
}

/* FSDP1 sharding strategies by name or number (FSDP_SHARDING_STRATEGY order, 1-based). */
static int sharding_of(const cfg_node *n) {
    static const char *const NAMES[] = {"FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "HYBRID_SHARD",
                                        "HYBRID_SHARD_ZERO2"};
    if (n->kind == CN_NUM && n->num >= 1 && n->num <= 5 && n->num == floor(n->num)) return (int)n->num;
    if (n->kind == CN_STR) {
        for (int i = 0; i < 5; i++)
            if (!strcasecmp(n->text, NAMES[i])) return i + 1;
        if (strlen(n->text) == 1 && n->text[0] >= '1' && n->text[0] <= '5') return n->text[0] - '0';
    }
    return 0;
}

static void map_sharding(dctx *d, const cfg_node *n, const char *path, int s, int machines,
                         int64_t procs) {
    static const char *const STRAT[] = {"", "zero3", "zero2", "ddp", "hybrid", "hybrid"};
    zt_cfg_map(d, n, path, "parallel.strategy", STRAT[s]);
    if (s == 1) zt_cfg_map(d, n, path, "parallel.reshard_after_forward", "true");
    if (s >= 4) {
        zt_cfg_map(d, n, path, "parallel.hybrid_inner", s == 4 ? "zero3" : "zero2");
        if (machines > 1 && procs > 0 && procs % machines == 0) {
            char v[32];
            snprintf(v, sizeof v, "%lld", (long long)(procs / machines));
            zt_cfg_map(d, n, path, "parallel.hybrid_shard_size", v);
        } else {
            zt_cfg_dnote(d, ZT_CONFIG_NOTE, n, path,
                         "shards within a machine, replicates across machines: with one machine "
                         "the shard group is the whole world (parallel.hybrid_shard_size 0)");
        }
    }
}

static int fsdp_version(dctx *d) {
    const cfg_node *ver = zt_cfg_record_get(d, "fsdp_config.fsdp_version");
    int64_t version = 1;
    if (ver && !zt_cfg_get_int(d, ver, "fsdp_config.fsdp_version", 1, 2, &version)) version = 1;
    return (int)version;
}

/* mesh_hybrid: parallelism_config made the strategy hybrid (FSDP2 on a 2-D mesh); then
 * fsdp_reshard_after_forward says what happens inside a shard group. */
static void resolve_fsdp(dctx *d, int machines, int64_t procs, int version, bool mesh_hybrid) {
    const cfg_node *ss = zt_cfg_record_get(d, "fsdp_config.fsdp_sharding_strategy");
    const cfg_node *raf = zt_cfg_record_get(d, "fsdp_config.fsdp_reshard_after_forward");
    char s[100];
    if (ss) {
        int k = sharding_of(ss);
        if (!k) {
            zt_cfg_node_show(ss, s, sizeof s);
            zt_cfg_derror(d, ss, "fsdp_config.fsdp_sharding_strategy",
                          "expected FULL_SHARD, SHARD_GRAD_OP, NO_SHARD, HYBRID_SHARD, "
                          "HYBRID_SHARD_ZERO2 or 1-5, got %s",
                          s);
        } else {
            if (version == 2)
                zt_cfg_dnote(d, ZT_CONFIG_NOTE, ss, "fsdp_config.fsdp_sharding_strategy",
                             "deprecated with FSDP2 in favor of fsdp_reshard_after_forward; read "
                             "anyway");
            map_sharding(d, ss, "fsdp_config.fsdp_sharding_strategy", k, machines, procs);
        }
    }
    if (raf) {
        bool b;
        int k = sharding_of(raf);
        if (raf->kind == CN_BOOL || (raf->kind == CN_STR && !k)) {
            if (get_flag(d, raf, "fsdp_config.fsdp_reshard_after_forward", &b)) {
                if (version == 1)
                    zt_cfg_dnote(d, ZT_CONFIG_NOTE, raf, "fsdp_config.fsdp_reshard_after_forward",
                                 "a boolean with FSDP1 (Accelerate expects a strategy name): read "
                                 "as %s", b ? "FULL_SHARD" : "SHARD_GRAD_OP");
                if (version == 1 && !b) {
                    map_sharding(d, raf, "fsdp_config.fsdp_reshard_after_forward", 2, machines, procs);
                } else if (mesh_hybrid) {
                    zt_cfg_map(d, raf, "fsdp_config.fsdp_reshard_after_forward",
                               "parallel.reshard_after_forward", b ? "true" : "false");
                } else {
                    zt_cfg_map(d, raf, "fsdp_config.fsdp_reshard_after_forward", "parallel.strategy",
                               "zero3");
                    zt_cfg_map(d, raf, "fsdp_config.fsdp_reshard_after_forward",
                               "parallel.reshard_after_forward", b ? "true" : "false");
                    if (!b)
                        zt_cfg_dnote(d, ZT_CONFIG_NOTE, raf, "fsdp_config.fsdp_reshard_after_forward",
                                     "false: zero3 keeping each gathered unit from forward to "
                                     "backward (FSDP2's exact behaviour: still sharded between "
                                     "steps). Accelerate's docs equate it with SHARD_GRAD_OP "
                                     "(zero2); the results are the same");
                }
            }
        } else if (k) {
            if (version == 2)
                zt_cfg_derror(d, raf, "fsdp_config.fsdp_reshard_after_forward",
                              "FSDP2 takes true or false here (Accelerate raises a ValueError too)");
            else
                map_sharding(d, raf, "fsdp_config.fsdp_reshard_after_forward", k, machines, procs);
        } else {
            zt_cfg_node_show(raf, s, sizeof s);
            zt_cfg_derror(d, raf, "fsdp_config.fsdp_reshard_after_forward",
                          "expected true/false (FSDP2) or a sharding strategy (FSDP1), got %s", s);
        }
    }
    if (!ss && !raf && !mesh_hybrid) {
        int ki = zt_cfg_key_index("parallel.strategy");
        if (!d->x->native_set[ki])
            zt_cfg_apply_str(d->x, "parallel.strategy", "zero3", ZT_ORIGIN_DIALECT, d->file,
                             version == 1 ? "accelerate default: FSDP1 sharding FULL_SHARD"
                                          : "accelerate default: FSDP2 reshard_after_forward true",
                             "fsdp_config");
    }
    bool b;
    const cfg_node *n = zt_cfg_record_get(d, "fsdp_config.fsdp_offload_params");
    if (n && get_flag(d, n, "fsdp_config.fsdp_offload_params", &b) && b) {
        zt_cfg_map(d, n, "fsdp_config.fsdp_offload_params", "memory.offload_param", "cpu");
        zt_cfg_map(d, n, "fsdp_config.fsdp_offload_params", "memory.offload_optimizer", "cpu");
    }
    n = zt_cfg_record_get(d, "fsdp_config.fsdp_auto_wrap_policy");
    if (n && n->kind == CN_STR) {
        if (!strcasecmp(n->text, "TRANSFORMER_BASED_WRAP"))
            zt_cfg_dnote(d, ZT_CONFIG_NOTE, n, "fsdp_config.fsdp_auto_wrap_policy",
                         "zerotrain's units are the model's blocks already");
        else if (!strcasecmp(n->text, "SIZE_BASED_WRAP") || !strcasecmp(n->text, "NO_WRAP"))
            zt_cfg_dnote(d, ZT_CONFIG_WARNING, n, "fsdp_config.fsdp_auto_wrap_policy",
                         "%s: not honored: units stay one per transformer block (the results are "
                         "the same; what is gathered at once differs)",
                         n->text);
        else
            zt_cfg_derror(d, n, "fsdp_config.fsdp_auto_wrap_policy",
                          "expected TRANSFORMER_BASED_WRAP, SIZE_BASED_WRAP or NO_WRAP");
    }
    static const char *const NOTES[] = {"fsdp_config.fsdp_transformer_layer_cls_to_wrap",
                                        "fsdp_config.fsdp_min_num_params",
                                        "fsdp_config.fsdp_cpu_ram_efficient_loading",
                                        "fsdp_config.fsdp_sync_module_states",
                                        "fsdp_config.fsdp_use_orig_params"};
    static const char *const WHY[] = {
        "GPT-2's units are its blocks, whatever the class name",
        "units are per block",
        "zerotrain always initializes each shard in place from the seed",
        "every rank initializes the same values from the seed: nothing to broadcast",
        "parameters are always kept per tensor (FSDP2's way)"};
    for (size_t i = 0; i < sizeof NOTES / sizeof NOTES[0]; i++)
        if ((n = zt_cfg_record_get(d, NOTES[i]))) zt_cfg_dnote(d, ZT_CONFIG_NOTE, n, NOTES[i], "%s", WHY[i]);
    n = zt_cfg_record_get(d, "fsdp_config.fsdp_state_dict_type");
    if (n) {
        static const char *const T[] = {"FULL_STATE_DICT", "LOCAL_STATE_DICT", "SHARDED_STATE_DICT"};
        int k = 0;
        for (int i = 0; i < 3; i++)
            if (n->kind == CN_STR && !strcasecmp(n->text, T[i])) k = i + 1;
        if (n->kind == CN_NUM && n->num >= 1 && n->num <= 3 && n->num == floor(n->num)) k = (int)n->num;
        if (!k)
            zt_cfg_derror(d, n, "fsdp_config.fsdp_state_dict_type",
                          "expected FULL_STATE_DICT, SHARDED_STATE_DICT or LOCAL_STATE_DICT");
        else
            zt_cfg_map(d, n, "fsdp_config.fsdp_state_dict_type", "checkpoint.save_consolidated",
                       k == 1 ? "true" : "false");
    }
    /* true is full, unless the including native file chose selective (a refinement of true) */
    n = zt_cfg_record_get(d, "fsdp_config.fsdp_activation_checkpointing");
    if (n && get_flag(d, n, "fsdp_config.fsdp_activation_checkpointing", &b)) {
        int ki = zt_cfg_key_index("memory.activation_checkpointing");
        if (b && ki >= 0 && d->x->native_set[ki] && d->x->c->activation_checkpointing == ZT_CFG_RECOMPUTE_SELECTIVE)
            zt_cfg_dnote(d, ZT_CONFIG_NOTE, n, "fsdp_config.fsdp_activation_checkpointing",
                         "keeps the native memory.activation_checkpointing selective (true alone means full)");
        else
            zt_cfg_map(d, n, "fsdp_config.fsdp_activation_checkpointing", "memory.activation_checkpointing",
                       b ? "full" : "none");
    }
    /* one native key for both directions: true when either asks, false when backward says
     * NO_PREFETCH and forward does not ask */
    static const char *const BP[] = {"fsdp_config.fsdp_backward_prefetch",
                                     "fsdp_config.fsdp_backward_prefetch_policy"};
    const cfg_node *on = NULL, *off = NULL;
    const char *on_path = NULL, *off_path = NULL;
    for (int i = 0; i < 2; i++) {
        n = zt_cfg_record_get(d, BP[i]);
        if (!n || n->kind == CN_NULL) continue;
        bool pre = (n->kind == CN_STR && (!strcasecmp(n->text, "BACKWARD_PRE") ||
                                          !strcasecmp(n->text, "BACKWARD_POST") ||
                                          !strcmp(n->text, "1") || !strcmp(n->text, "2"))) ||
                   (n->kind == CN_NUM && (n->num == 1 || n->num == 2));
        bool none = (n->kind == CN_STR && (!strcasecmp(n->text, "NO_PREFETCH") || !strcmp(n->text, "3"))) ||
                    (n->kind == CN_NUM && n->num == 3);
        if (!pre && !none) {
            zt_cfg_derror(d, n, BP[i], "expected BACKWARD_PRE, BACKWARD_POST or NO_PREFETCH");
        } else if (version == 2) {
            zt_cfg_dnote(d, ZT_CONFIG_NOTE, n, BP[i], "ignored with FSDP2 (as Accelerate does)");
        } else if (pre) {
            on = n;
            on_path = BP[i];
        } else {
            off = n;
            off_path = BP[i];
        }
    }
    n = zt_cfg_record_get(d, "fsdp_config.fsdp_forward_prefetch");
    if (n && get_flag(d, n, "fsdp_config.fsdp_forward_prefetch", &b) && b) {
        if (version == 2) {
            zt_cfg_dnote(d, ZT_CONFIG_NOTE, n, "fsdp_config.fsdp_forward_prefetch",
                         "ignored with FSDP2 (Accelerate's FSDP2 does not implement it)");
        } else if (!on) {
            on = n;
            on_path = "fsdp_config.fsdp_forward_prefetch";
        }
    }
    if (on)
        zt_cfg_map(d, on, on_path, "parallel.prefetch", "true");
    else if (off)
        zt_cfg_map(d, off, off_path, "parallel.prefetch", "false");
}

/* Returns true when it made the strategy hybrid. */
static bool resolve_parallelism(dctx *d, bool fsdp, bool ds, int version, int64_t procs) {
    const cfg_node *blk = zt_cfg_record_get(d, "parallelism_config");
    if (!blk || blk->kind != CN_MAP || !blk->child) return false;
    if (!ds && (!fsdp || version != 2)) {
        zt_cfg_derror(d, blk, "parallelism_config",
                      "needs distributed_type FSDP with fsdp_config.fsdp_version 2, or DEEPSPEED "
                      "(Accelerate raises a ValueError too)");
        return false;
    }
    int64_t v[5] = {1, 1, 1, 1, 1};
    static const char *const K[] = {"parallelism_config.parallelism_config_dp_replicate_size",
                                    "parallelism_config.parallelism_config_dp_shard_size",
                                    "parallelism_config.parallelism_config_tp_size",
                                    "parallelism_config.parallelism_config_cp_size",
                                    "parallelism_config.parallelism_config_sp_size"};
    const cfg_node *n[5];
    for (int i = 0; i < 5; i++) {
        n[i] = zt_cfg_record_get(d, K[i]);
        if (n[i] && !zt_cfg_get_int(d, n[i], K[i], 1, 1048576, &v[i])) return false;
    }
    int64_t r = v[0], s = v[1];
    char t[32];
    if (ds) { /* DeepSpeed shards over all data-parallel ranks; the mesh adds sequence parallelism */
        if (n[0] || n[1])
            zt_cfg_dnote(d, ZT_CONFIG_NOTE, n[0] ? n[0] : n[1], n[0] ? K[0] : K[1],
                         "with DEEPSPEED the ZeRO stage shards over all data-parallel ranks");
        r = s = 1;
    } else if (r > 1 && s > 1) {
        zt_cfg_map(d, n[0], K[0], "parallel.strategy", "hybrid");
        snprintf(t, sizeof t, "%lld", (long long)s);
        zt_cfg_map(d, n[1], K[1], "parallel.hybrid_shard_size", t);
        snprintf(t, sizeof t, "%lld", (long long)r);
        zt_cfg_map(d, n[0], K[0], "parallel.hybrid_replicas", t);
        zt_cfg_map(d, n[0], K[0], "parallel.hybrid_inner", "zero3");
    } else if (r > 1) {
        zt_cfg_map(d, n[0], K[0], "parallel.strategy", "ddp");
        zt_cfg_dnote(d, ZT_CONFIG_NOTE, n[0], K[0], "replicate only: ddp");
    } else if (n[1] && s > 1 && procs > 0 && s * v[2] * v[3] * v[4] != procs) {
        zt_cfg_derror(d, n[1], K[1], "%lld ranks per shard group, but num_processes is %lld",
                      (long long)s, (long long)procs);
    }
    for (int i = 2; i < 5; i++)
        if (n[i]) {
            snprintf(t, sizeof t, "%lld", (long long)v[i]);
            zt_cfg_map(d, n[i], K[i], i == 2 ? "parallel.tensor_parallel_size" : "parallel.context_parallel_size", t);
        }
    int64_t total = r * s * v[2] * v[3] * v[4];
    if (procs > 0 && (r > 1 || s > 1) && total != procs)
        zt_cfg_derror(d, blk, "parallelism_config",
                      "dp_replicate %lld x dp_shard %lld x tp %lld x cp %lld x sp %lld = %lld ranks, "
                      "but num_processes is %lld",
                      (long long)r, (long long)s, (long long)v[2], (long long)v[3], (long long)v[4],
                      (long long)total, (long long)procs);
    return r > 1 && s > 1;
}

void zt_cfg_read_accelerate(cfg_ctx *x, const char *text, size_t len, const char *name) {
    cfg_node *root = zt_cfg_yaml_tree(x, text, len, name);
    if (!root) return;
    dialect_records st = {0};
    dctx d = {x, name, "accelerate", ROWS, (int)(sizeof ROWS / sizeof ROWS[0]), &st,
              "Accelerate refuses unknown top-level keys too: ClusterConfig.from_yaml_file"};
    zt_cfg_walk(&d, root, "");
    const cfg_node *dt = zt_cfg_record_get(&d, "distributed_type");
    if (!dt && zt_cfg_child(root, "distributed_type")) { /* refused by the walk already */
        zt_cfg_node_free(root);
        return;
    }
    if (!dt) {
        zt_cfg_error(x, "%s: distributed_type: missing (Accelerate requires it: NO, MULTI_CPU, "
                        "DEEPSPEED or FSDP)",
                     name);
        zt_cfg_node_free(root);
        return;
    }
    /* PyYAML reads a bare NO as false; Accelerate writes it quoted */
    cfg_node *dtw = (cfg_node *)dt;
    if (dtw->kind == CN_BOOL) {
        if (dtw->b) {
            zt_cfg_derror(&d, dt, "distributed_type", "expected NO, MULTI_CPU, DEEPSPEED or FSDP, got true");
            zt_cfg_node_free(root);
            return;
        }
        free(dtw->text);
        dtw->text = strdup("NO");
        dtw->kind = CN_STR;
        if (!dtw->text) {
            x->nomem = true;
            zt_cfg_node_free(root);
            return;
        }
    }
    /* the blocks, once the type is known: only the selected one is read */
    const cfg_node *dsb = zt_cfg_record_get(&d, "deepspeed_config"), *fb = zt_cfg_record_get(&d, "fsdp_config"),
                   *pb = zt_cfg_record_get(&d, "parallelism_config");
    bool is_ds = !strcmp(dt->text, "DEEPSPEED"), is_fsdp = !strcmp(dt->text, "FSDP");
    if (dsb && dsb->kind == CN_MAP) {
        if (is_ds)
            zt_cfg_walk(&d, dsb, "deepspeed_config");
        else if (dsb->child)
            zt_cfg_dnote(&d, ZT_CONFIG_NOTE, dsb, "deepspeed_config",
                         "ignored: distributed_type is %s", dt->text);
    }
    if (fb && fb->kind == CN_MAP) {
        if (is_fsdp)
            zt_cfg_walk(&d, fb, "fsdp_config");
        else if (fb->child)
            zt_cfg_dnote(&d, ZT_CONFIG_NOTE, fb, "fsdp_config", "ignored: distributed_type is %s",
                         dt->text);
    }
    if (pb && pb->kind == CN_MAP) zt_cfg_walk(&d, pb, "parallelism_config");

    /* ranks */
    const cfg_node *np = zt_cfg_record_get(&d, "num_processes"), *nm = zt_cfg_record_get(&d, "num_machines");
    int64_t procs = -1, machines = 1;
    if (nm && !zt_cfg_get_int(&d, nm, "num_machines", 1, 1048576, &machines)) machines = 1;
    if (np && !zt_cfg_get_int(&d, np, "num_processes", -1, 1048576, &procs)) procs = -1;
    if (np && procs == 0) {
        zt_cfg_derror(&d, np, "num_processes", "expected a rank count (>= 1, or -1: unset)");
        procs = -1;
    }
    if (machines > 1) {
        zt_cfg_dnote(&d, ZT_CONFIG_WARNING, nm, "num_machines",
                     "%lld machines: zerotrain does not start remote ranks itself; run `mpirun -np "
                     "%lld -hostfile HOSTS zerotrain train CONFIG` (parallel.nproc stays at its "
                     "value and is not used then)",
                     (long long)machines, (long long)(procs > 0 ? procs : machines));
    } else if (procs > 0 && strcmp(dt->text, "NO") != 0) {
        char v[32];
        snprintf(v, sizeof v, "%lld", (long long)procs);
        zt_cfg_map(&d, np, "num_processes", "parallel.nproc", v);
    }
    /* the strategy: a 2-D mesh first (FSDP2), then what happens inside a shard group */
    int version = is_fsdp ? fsdp_version(&d) : 1;
    bool mesh_hybrid = resolve_parallelism(&d, is_fsdp, is_ds, version, procs);
    if (!strcmp(dt->text, "NO")) {
        zt_cfg_map(&d, dt, "distributed_type", "parallel.strategy", "ddp");
        if (procs > 1)
            zt_cfg_dnote(&d, ZT_CONFIG_WARNING, np, "num_processes",
                         "distributed_type NO runs one process: num_processes ignored");
    } else if (!strcmp(dt->text, "MULTI_CPU")) {
        zt_cfg_map(&d, dt, "distributed_type", "parallel.strategy", "ddp");
    } else if (!strncmp(dt->text, "MULTI_", 6)) {
        zt_cfg_map(&d, dt, "distributed_type", "parallel.strategy", "ddp");
        zt_cfg_dnote(&d, ZT_CONFIG_NOTE, dt, "distributed_type",
                     "%s: data parallel (ddp) on CPU ranks: this build has no accelerators", dt->text);
    } else if (is_ds) {
        resolve_deepspeed(&d);
    } else if (is_fsdp) {
        resolve_fsdp(&d, (int)machines, procs, version, mesh_hybrid);
    } else {
        char s[100];
        zt_cfg_node_show(dt, s, sizeof s);
        zt_cfg_derror(&d, dt, "distributed_type",
                      "%s is not supported (NO, MULTI_CPU, DEEPSPEED or FSDP)", s);
    }
    resolve_precision(&d, is_ds && zt_cfg_record_get(&d, "deepspeed_config.deepspeed_config_file"), is_ds || is_fsdp);
    zt_cfg_node_free(root);
}
