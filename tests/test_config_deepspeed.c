/* test_config_deepspeed.c - DeepSpeed JSON read into the native configuration
 * (src/config/dialect_deepspeed.c): each mapped key, the batch-size invariant and its derivation at
 * launch, "auto", MiCS/hpZ, precision, optimizer and scheduler mappings, keys recognized but not
 * honored (warnings, errors), and every error class with its message and position: syntax,
 * unknown keys with did-you-mean, duplicates, types, ranges, contradictions. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#define TEST_DIALECT_PARSE zt_train_config_parse_deepspeed
#define TEST_DIALECT_FILE "ds.json"
#include "test_config_support.h"

static void source_is(const char *name, zt_config_origin o, const char *text) {
    const zt_config_source *s = src(name);
    if (s->origin != o || !strstr(s->text, text))
        fail_msg("%s: source %d \"%s\", expected %d containing \"%s\"", name, s->origin, s->text, o,
                 text);
}

/* ------------------------------------------------------------------------------------------- */

static void test_stage_to_strategy(void **state) {
    (void)state;
    const char *names[] = {"ddp", "zero1", "zero2", "zero3"};
    for (int s = 0; s < 4; s++) {
        char j[128];
        snprintf(j, sizeof j, "{\"zero_optimization\": {\"stage\": %d}}", s);
        ok(j);
        assert_int_equal(C.strategy, s);
        char want[96];
        snprintf(want, sizeof want, "ds.json:1:33 deepspeed zero_optimization.stage=%d", s);
        source_is("parallel.strategy", ZT_ORIGIN_DIALECT, want);
        (void)names;
    }
    ok("{}"); /* absent: DeepSpeed's stage 0 */
    assert_int_equal(C.strategy, ZT_STRATEGY_DDP);
    source_is("parallel.strategy", ZT_ORIGIN_DIALECT, "deepspeed default: zero_optimization.stage absent");
    bad("{\"zero_optimization\": {\"stage\": 4}}",
        "ds.json:1:33: zero_optimization.stage: expected an integer in [0, 3], got 4");
    bad("{\"zero_optimization\": {\"stage\": \"3\"}}",
        "ds.json:1:33: zero_optimization.stage: expected an integer, got a string \"3\"");
}

static void test_batch_sizes(void **state) {
    (void)state;
    zt_error err = {0};
    /* all three: checked at launch */
    ok("{\"train_batch_size\": 16, \"train_micro_batch_size_per_gpu\": 4,\n"
       " \"gradient_accumulation_steps\": 2}");
    assert_int_equal(C.global_batch, 16);
    assert_int_equal(C.micro_batch, 4);
    assert_int_equal(C.grad_accum, 2);
    source_is("training.global_batch_size", ZT_ORIGIN_DIALECT, "ds.json:1:22 deepspeed train_batch_size=16");
    assert_int_equal(zt_train_config_validate_world(&C, 2, &err), ZT_OK);
    assert_int_equal(zt_train_config_validate_world(&C, 4, &err), ZT_ERR_USAGE);
    assert_non_null(strstr(err.msg, "ds.json:1:22: training.global_batch_size: micro x accumulation x "
                                    "world != global batch: 4 x 2 x 4 = 32, expected 16"));
    assert_non_null(strstr(err.msg, "training.micro_batch_size 4 (ds.json:1:60 deepspeed "
                                    "train_micro_batch_size_per_gpu=4)"));
    /* a contradiction no world size can satisfy: found at load */
    bad("{\"train_batch_size\": 30, \"train_micro_batch_size_per_gpu\": 4, "
        "\"gradient_accumulation_steps\": 2}",
        "ds.json:1:22: training.global_batch_size: 30 is not a multiple of training.micro_batch_size 4 "
        "x training.gradient_accumulation_steps 2 = 8, so no world size gives it");
    /* train_batch_size and micro: accumulation derived at launch, DeepSpeed's rule */
    ok("{\"train_batch_size\": 32, \"train_micro_batch_size_per_gpu\": 4}");
    assert_int_equal(C.grad_accum, 0);
    assert_int_equal(zt_train_config_validate(&C, &err), ZT_ERR_USAGE);
    assert_non_null(strstr(err.msg, "training.gradient_accumulation_steps: derived from "
                                    "training.global_batch_size at launch, and not resolved yet"));
    zt_train_config keep = C;
    assert_int_equal(zt_train_config_validate_world(&C, 2, &err), ZT_OK);
    assert_int_equal(C.grad_accum, 4);
    source_is("training.gradient_accumulation_steps", ZT_ORIGIN_LAUNCH,
              "global_batch_size 32 / (micro_batch_size 4 x world size 2)");
    C = keep;
    assert_int_equal(zt_train_config_validate_world(&C, 3, &err), ZT_ERR_USAGE);
    assert_non_null(strstr(err.msg, "training.gradient_accumulation_steps: cannot be derived: "
                                    "training.global_batch_size 32"));
    assert_non_null(strstr(err.msg, "is not a multiple of training.micro_batch_size 4"));
    assert_int_equal(C.grad_accum, 0); /* unchanged on failure */
    /* train_batch_size alone: GA 1, micro = global / world */
    ok("{\"train_batch_size\": 8}");
    assert_int_equal(C.grad_accum, 1);
    assert_int_equal(C.micro_batch, 0);
    assert_int_equal(zt_train_config_validate_world(&C, 2, &err), ZT_OK);
    assert_int_equal(C.micro_batch, 4);
    /* train_batch_size and GA: micro derived */
    ok("{\"train_batch_size\": 8, \"gradient_accumulation_steps\": 2}");
    assert_int_equal(zt_train_config_validate_world(&C, 2, &err), ZT_OK);
    assert_int_equal(C.micro_batch, 2);
    /* "auto": zerotrain's own values, said so */
    ok("{\"train_batch_size\": \"auto\", \"train_micro_batch_size_per_gpu\": \"auto\", "
       "\"gradient_accumulation_steps\": \"auto\"}");
    assert_int_equal(C.global_batch, 0);
    assert_int_equal(C.micro_batch, 4);
    assert_int_equal(C.grad_accum, 1);
    source_is("training.micro_batch_size", ZT_ORIGIN_AUTO,
              "deepspeed train_micro_batch_size_per_gpu=\"auto\": auto, keeps default");
    assert_int_equal(src("training.micro_batch_size")->base, ZT_ORIGIN_DEFAULT);
    /* ranges and types */
    bad("{\"train_micro_batch_size_per_gpu\": 0}",
        "ds.json:1:36: train_micro_batch_size_per_gpu: expected an integer in [1, 65536], got 0");
    bad("{\"gradient_accumulation_steps\": 1.5}",
        "ds.json:1:33: gradient_accumulation_steps: expected an integer or \"auto\", got a number 1.5");
    bad("{\"train_batch_size\": \"lots\"}",
        "ds.json:1:22: train_batch_size: expected an integer or \"auto\", got a string \"lots\"");
}

static void test_zero_keys(void **state) {
    (void)state;
    ok("{\"zero_optimization\": {\"stage\": 2, \"reduce_bucket_size\": 5e8, \"overlap_comm\": false,\n"
       "  \"contiguous_gradients\": true, \"allgather_bucket_size\": 2e8}}");
    assert_true(C.bucket_mb > 1907.3f && C.bucket_mb < 1907.4f); /* 5e8 x 4 B */
    assert_false(C.overlap_comm);
    has_note("note: ds.json:2:3: zero_optimization.contiguous_gradients: gradients are always contiguous");
    /* prefetch: > 0 asks for it */
    ok("{\"zero_optimization\": {\"stage\": 3, \"stage3_prefetch_bucket_size\": 5e7}}");
    assert_true(C.prefetch);
    ok("{\"zero_optimization\": {\"stage\": 3, \"stage3_prefetch_bucket_size\": 0}}");
    assert_false(C.prefetch);
    /* MiCS: hybrid, zero3 in groups */
    ok("{\"zero_optimization\": {\"stage\": 3, \"mics_shard_size\": 2}}");
    assert_int_equal(C.strategy, ZT_STRATEGY_HYBRID);
    assert_int_equal(C.hybrid_shard_size, 2);
    assert_int_equal(C.hybrid_inner, ZT_STRATEGY_ZERO3);
    has_note("MiCS: zero3 inside groups of 2 ranks");
    /* hpZ: approximated, with a warning */
    ok("{\"zero_optimization\": {\"stage\": 3, \"zero_hpz_partition_size\": 4}}");
    assert_int_equal(C.strategy, ZT_STRATEGY_HYBRID);
    assert_int_equal(C.hybrid_shard_size, 4);
    has_note("warning: ds.json:1:36: zero_optimization.zero_hpz_partition_size: approximated: hpZ keeps");
    zt_error err = {0};
    assert_int_equal(zt_train_config_validate_world(&C, 6, &err), ZT_ERR_USAGE);
    assert_non_null(strstr(err.msg, "parallel.hybrid_shard_size: 4 does not divide the world size 6"));
    bad("{\"zero_optimization\": {\"stage\": 3, \"zero_hpz_partition_size\": 2, \"mics_shard_size\": 2}}",
        "zero_optimization.zero_hpz_partition_size: cannot be combined with mics_shard_size");
    ok("{\"zero_optimization\": {\"stage\": 2, \"mics_shard_size\": 2}}");
    assert_int_equal(C.strategy, ZT_STRATEGY_ZERO2);
    has_note("warning: ds.json:1:36: zero_optimization.mics_shard_size: applies to stage 3 only");
    /* ZeRO++ quantization: a warning, results differ */
    ok("{\"zero_optimization\": {\"stage\": 3, \"zero_quantized_weights\": true}}");
    has_note("warning: ds.json:1:36: zero_optimization.zero_quantized_weights: ZeRO++ qwZ");
    /* consolidated save */
    ok("{\"zero_optimization\": {\"stage\": 3, \"stage3_gather_16bit_weights_on_model_save\": true}}");
    assert_true(C.ckpt_consolidated);
    has_note("warning: checkpoint.save_consolidated true is not read from the configuration yet: "
             "`zerotrain export CKPT -o model.safetensors`");
}

static void test_offload(void **state) {
    (void)state;
    zt_error err = {0};
    ok("{\"zero_optimization\": {\"stage\": 3, \"offload_optimizer\": {\"device\": \"cpu\", "
       "\"pin_memory\": true}, \"offload_param\": {\"device\": \"cpu\"}}}");
    assert_int_equal(C.offload_optimizer, ZT_CFG_OFFLOAD_CPU);
    assert_int_equal(C.offload_param, ZT_CFG_OFFLOAD_CPU);
    has_note("warning: memory.offload_optimizer cpu changes nothing on this CPU-only build");
    has_note("warning: memory.offload_param cpu changes nothing on this CPU-only build");
    strcpy(C.train_path, "x.bin");
    assert_int_equal(zt_train_config_validate(&C, &err), ZT_OK); /* runs, with the warnings */
    /* nvme: honored, with DeepSpeed's buffer_count and aio.thread_count mapped */
    ok("{\"zero_optimization\": {\"stage\": 3, \"offload_optimizer\": {\"device\": \"nvme\", "
       "\"nvme_path\": \"/local_nvme\", \"buffer_count\": 6, \"pin_memory\": true, \"pipeline_read\": true}}, "
       "\"aio\": {\"thread_count\": 3, \"block_size\": 1048576, \"queue_depth\": 8}}");
    assert_int_equal(C.offload_optimizer, ZT_CFG_OFFLOAD_NVME);
    assert_string_equal(C.offload_optimizer_nvme_path, "/local_nvme");
    assert_int_equal(C.offload_buffer_count, 6);
    assert_int_equal(C.offload_io_threads, 3);
    assert_true(C.offload_buffer_mb == 64.0f);
    strcpy(C.train_path, "x.bin");
    assert_int_equal(zt_train_config_validate(&C, &err), ZT_OK);
    bad("{\"zero_optimization\": {\"offload_optimizer\": {\"device\": \"nvme\", \"nvme_path\": \"/n\", "
        "\"buffer_count\": 1}}}",
        "zero_optimization.offload_optimizer.buffer_count");
    ok("{\"zero_optimization\": {\"stage\": 1, \"offload_optimizer\": {\"device\": \"nvme\", "
       "\"nvme_path\": \"/n\"}}}");
    C.offload_buffer_mb = 0.001f; /* 1 KiB: less than a block per state */
    strcpy(C.train_path, "x.bin");
    assert_int_equal(zt_train_config_validate(&C, &err), ZT_ERR_USAGE);
    assert_non_null(strstr(err.msg, "memory.offload_buffer_mb: 0.001 MiB cannot hold"));
    bad("{\"zero_optimization\": {\"offload_param\": {\"device\": \"nvme\"}}}",
        "memory.offload_param: nvme needs memory.offload_param_nvme_path");
    bad("{\"zero_optimization\": {\"offload_param\": {\"device\": \"gpu\"}}}",
        "ds.json:1:52: zero_optimization.offload_param.device: expected none, cpu or nvme, got \"gpu\"");
    ok("{\"zero_optimization\": {\"offload_optimizer\": {\"device\": \"cpu\", \"ratio\": 0.3}}}");
    has_note("warning: ds.json:1:63: zero_optimization.offload_optimizer.ratio: partial optimizer offload");
    /* parameter offload's window: buffer_count n -> n - 1 units read ahead; with device nvme the
     * bound is the smaller of stage3_max_live_parameters and buffer_count x buffer_size */
    ok("{\"zero_optimization\": {\"stage\": 3, \"stage3_max_live_parameters\": 1e9, \"offload_param\": "
       "{\"device\": \"nvme\", \"nvme_path\": \"/n\", \"buffer_count\": 3, \"buffer_size\": 1e6}}}");
    assert_int_equal(C.offload_param_prefetch, 2);
    assert_int_equal(C.offload_param_max_live, 3000000);
    source_is("memory.offload_param_max_live", ZT_ORIGIN_DIALECT, "offload_param.buffer_size=1000000");
    ok("{\"zero_optimization\": {\"stage\": 3, \"max_live_parameters\": 2e6, \"offload_param\": "
       "{\"device\": \"nvme\", \"nvme_path\": \"/n\", \"buffer_size\": 1e6}}}");
    assert_int_equal(C.offload_param_prefetch, 1); /* native default: buffer_count absent */
    assert_int_equal(C.offload_param_max_live, 2000000); /* < DeepSpeed's 5 buffers x 1e6 */
    ok("{\"zero_optimization\": {\"stage\": 3, \"offload_param\": {\"device\": \"nvme\", \"nvme_path\": \"/n\", "
       "\"buffer_count\": 1}}}");
    assert_int_equal(C.offload_param_prefetch, 0); /* one buffer: the unit in use, none ahead */
    ok("{\"zero_optimization\": {\"stage\": 3, \"stage3_max_live_parameters\": 1e9}}");
    assert_int_equal(C.offload_param_max_live, 0);
    has_note("note: ds.json:1:36: zero_optimization.stage3_max_live_parameters: zero3 holds one gathered unit");
    bad("{\"zero_optimization\": {\"stage\": 3, \"stage3_max_live_parameters\": 0, \"offload_param\": "
        "{\"device\": \"nvme\", \"nvme_path\": \"/n\"}}}", "zero_optimization.stage3_max_live_parameters");
}

static void test_precision(void **state) {
    (void)state;
    zt_error err = {0};
    ok("{\"bf16\": {\"enabled\": true}}");
    assert_int_equal(C.precision, ZT_CFG_PREC_BF16);
    /* communication_data_type absent: DeepSpeed's engine reduces in the training dtype */
    assert_int_equal(C.reduce_dtype, ZT_CFG_DTYPE_BF16);
    source_is("precision.reduce_dtype", ZT_ORIGIN_DIALECT,
              "deepspeed default: communication_data_type absent under bf16: gradients reduced in bf16");
    strcpy(C.train_path, "x.bin");
    assert_int_equal(zt_train_config_validate(&C, &err), ZT_OK); /* honored (src/precision) */
    ok("{\"bf16\": {\"enabled\": true}, \"communication_data_type\": \"bf16\"}");
    assert_int_equal(C.reduce_dtype, ZT_CFG_DTYPE_BF16);
    strcpy(C.train_path, "x.bin");
    assert_int_equal(zt_train_config_validate(&C, &err), ZT_OK); /* bf16 reduction is implemented */
    ok("{\"bf16\": {\"enabled\": true}, \"communication_data_type\": \"fp32\"}");
    assert_int_equal(C.reduce_dtype, ZT_CFG_DTYPE_FP32); /* an explicit fp32 wins */
    ok("{\"bf16\": {\"enabled\": true}, \"communication_data_type\": null}");
    assert_int_equal(C.reduce_dtype, ZT_CFG_DTYPE_BF16); /* null: DeepSpeed's default */
    bad("{\"fp16\": {\"enabled\": true}, \"communication_data_type\": \"bf16\"}",
        "ds.json:1:56: precision.reduce_dtype: bf16 with precision.mode fp16");
    ok("{\"fp16\": {\"enabled\": true}}"); /* DeepSpeed's default under fp16: fp16 */
    assert_int_equal(C.reduce_dtype, ZT_CFG_DTYPE_FP16);
    source_is("precision.reduce_dtype", ZT_ORIGIN_DIALECT,
              "deepspeed default: communication_data_type absent under fp16: gradients reduced in fp16");
    ok("{\"fp16\": {\"enabled\": true}, \"communication_data_type\": \"fp32\"}");
    assert_int_equal(C.reduce_dtype, ZT_CFG_DTYPE_FP32);
    strcpy(C.train_path, "x.bin");
    assert_int_equal(zt_train_config_validate(&C, &err), ZT_OK);
    bad("{\"bf16\": {\"enabled\": true}, \"communication_data_type\": \"fp16\"}",
        "ds.json:1:56: precision.reduce_dtype: fp16 needs precision.mode fp16");
    ok("{\"bfloat16\": {\"enabled\": true}}"); /* the older name */
    assert_int_equal(C.precision, ZT_CFG_PREC_BF16);
    ok("{\"fp16\": {\"enabled\": true, \"loss_scale\": 0, \"initial_scale_power\": 12, "
       "\"loss_scale_window\": 500, \"hysteresis\": 3, \"min_loss_scale\": 0.5, "
       "\"consecutive_hysteresis\": true}}");
    assert_int_equal(C.precision, ZT_CFG_PREC_FP16);
    assert_int_equal(C.initial_scale_power, 12);
    assert_int_equal(C.loss_scale_window, 500);
    assert_int_equal(C.hysteresis, 3);
    assert_true(C.min_loss_scale == 0.5f);
    assert_true(C.consecutive_hysteresis);
    strcpy(C.train_path, "x.bin");
    assert_int_equal(zt_train_config_validate(&C, &err), ZT_OK); /* honored (src/precision) */
    bad("{\"bf16\": {\"enabled\": true}, \"fp16\": {\"enabled\": true}}",
        "fp16.enabled: bf16 and fp16 cannot both be enabled");
    ok("{\"bf16\": {\"enabled\": \"auto\"}}");
    assert_int_equal(C.precision, ZT_CFG_PREC_FP32);
    source_is("precision.mode", ZT_ORIGIN_AUTO, "bf16.enabled=\"auto\": auto, keeps default");
    ok("{\"communication_data_type\": \"bf16\"}");
    assert_int_equal(C.reduce_dtype, ZT_CFG_DTYPE_BF16);
    ok("{\"fp16\": {\"loss_scale\": 128}}");
    has_note("note: precision.loss_scale 128 has no effect: it applies to precision.mode fp16");
    bad("{\"amp\": {\"enabled\": true, \"opt_level\": \"O1\"}}",
        "ds.json:1:9: amp: NVIDIA Apex AMP is not supported");
}

static void test_optimizer(void **state) {
    (void)state;
    ok("{\"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 6e-4, \"betas\": [0.8, 0.99], "
       "\"eps\": 1e-6, \"weight_decay\": 0.05}}}");
    assert_int_equal(C.optim.kind, ZT_OPT_ADAMW);
    assert_true(C.lr.max_lr == 6e-4f);
    assert_true(C.lr.min_lr == 6e-4f / 10.0f); /* follows lr: not set */
    assert_true(C.optim.beta1 == 0.8f && C.optim.beta2 == 0.99f);
    assert_true(C.optim.eps == 1e-6f && C.optim.weight_decay == 0.05f);
    source_is("optimizer.beta2", ZT_ORIGIN_DIALECT, "deepspeed optimizer.params.betas[1]=0.99");
    source_is("training.lr", ZT_ORIGIN_DIALECT, "deepspeed optimizer.params.lr=0.0006");
    /* absent params: DeepSpeed's (torch's) defaults, not zerotrain's */
    ok("{\"optimizer\": {\"type\": \"Adam\", \"params\": {\"lr\": 1e-4}}}");
    assert_int_equal(C.optim.kind, ZT_OPT_ADAMW); /* adam_w_mode defaults to true */
    assert_true(C.optim.beta2 == 0.999f);
    assert_true(C.optim.weight_decay == 0.0f);
    source_is("optimizer.beta2", ZT_ORIGIN_DIALECT, "deepspeed default: optimizer.params.betas absent");
    ok("{\"optimizer\": {\"type\": \"adam\", \"params\": {\"adam_w_mode\": false, \"weight_decay\": 0}}}");
    assert_true(C.lr.max_lr == 1e-3f);
    bad("{\"optimizer\": {\"type\": \"Adam\", \"params\": {\"adam_w_mode\": false, \"weight_decay\": 0.1}}}",
        "optimizer.params.adam_w_mode: false applies L2 weight decay through the gradient");
    ok("{\"optimizer\": {\"type\": \"SGD\", \"params\": {\"lr\": 0.1, \"momentum\": 0.9, \"nesterov\": true}}}");
    assert_int_equal(C.optim.kind, ZT_OPT_SGD);
    assert_true(C.optim.momentum == 0.9f && C.optim.nesterov);
    ok("{\"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": \"auto\", \"betas\": \"auto\", "
       "\"eps\": \"auto\", \"weight_decay\": \"auto\"}}}");
    assert_true(C.lr.max_lr == 3e-4f && C.optim.beta2 == 0.95f && C.optim.weight_decay == 0.1f);
    source_is("optimizer.beta1", ZT_ORIGIN_AUTO, "optimizer.params.betas=\"auto\"");
    /* Lamb: DeepSpeed's FusedLamb (docs/optimizer.md); the 1-bit optimizers stay refused by name */
    ok("{\"optimizer\": {\"type\": \"Lamb\", \"params\": {\"lr\": 1e-3, \"weight_decay\": 0.01, "
       "\"bias_correction\": false, \"max_coeff\": 0.3, \"min_coeff\": 0.01}}}");
    assert_int_equal(C.optim.kind, ZT_OPT_LAMB);
    assert_true(C.optim.lamb_max_coeff == 0.3f && C.optim.lamb_min_coeff == 0.01f && !C.optim.lamb_bias_correction);
    assert_true(C.lr.max_lr == 1e-3f && C.optim.weight_decay == 0.01f && C.optim.beta2 == 0.999f);
    ok("{\"optimizer\": {\"type\": \"lamb\", \"params\": {\"lr\": 1e-3}}}");
    assert_true(C.optim.lamb_max_coeff == 10.0f && C.optim.lamb_min_coeff == 0.01f && C.optim.lamb_bias_correction);
    bad("{\"optimizer\": {\"type\": \"Lamb\", \"params\": {\"eps_inside_sqrt\": true}}}",
        "optimizer.params.eps_inside_sqrt: true is not supported");
    /* OneBitAdam: DeepSpeed's OnebitAdam kernel (no bias correction), freeze_step mapped, the
     * communication options notes; ZeroOneAdam and OneBitLamb stay refused by name */
    ok("{\"optimizer\": {\"type\": \"OnebitAdam\", \"params\": {\"lr\": 1e-3, \"freeze_step\": 10, "
       "\"bias_correction\": true, \"cuda_aware\": false, \"comm_backend_name\": \"nccl\"}}}");
    assert_int_equal(C.optim.kind, ZT_OPT_ONEBIT_ADAM);
    assert_true(C.optim.onebit_freeze_step == 10 && !C.optim.onebit_bias_correction && C.optim.beta2 == 0.999f);
    ok("{\"optimizer\": {\"type\": \"OneBitAdam\", \"params\": {\"lr\": 1e-3}}}");
    assert_true(C.optim.onebit_freeze_step == 100000);
    bad("{\"optimizer\": {\"type\": \"ZeroOneAdam\", \"params\": {\"lr\": 1e-3, \"var_freeze_step\": 10}}}",
        "ds.json:1:24: optimizer.type: \"ZeroOneAdam\" is not supported (Adam, AdamW, SGD, Lamb or OneBitAdam");
    bad("{\"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 1e-3, \"betas\": [0.9]}}}",
        "optimizer.params.betas: expected [beta1, beta2], two numbers");
    bad("{\"optimizer\": {\"type\": \"AdamW\", \"params\": {\"bias_correction\": false}}}",
        "optimizer.params.bias_correction: false is not supported");
    bad("{\"optimizer\": {\"type\": \"AdamW\", \"params\": {\"betas\": [0.9, 1.5]}}}",
        "optimizer.params.betas[1] (-> optimizer.beta2): expected a number in [0, 1), got \"1.5\"");
    bad("{\"optimizer\": {\"params\": {\"lr\": 1}}}", "ds.json:1:15: optimizer: no \"type\"");
}

static void test_scheduler(void **state) {
    (void)state;
    ok("{\"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 1e-3}},\n"
       " \"scheduler\": {\"type\": \"WarmupDecayLR\", \"params\": {\"warmup_min_lr\": 0, "
       "\"warmup_max_lr\": 1e-3, \"warmup_num_steps\": 10, \"total_num_steps\": 500, "
       "\"warmup_type\": \"linear\"}}}");
    assert_int_equal(C.lr.decay, ZT_LR_LINEAR);
    assert_true(C.lr.max_lr == 1e-3f);
    assert_true(C.lr.min_lr == 0.0f);
    assert_int_equal(C.lr.warmup_steps, 10);
    assert_int_equal(C.steps, 500);
    assert_int_equal(C.lr.total_steps, 500);
    source_is("training.steps", ZT_ORIGIN_DIALECT, "deepspeed scheduler.params.total_num_steps=500");
    has_note("scheduler.params.warmup_type: linear: zerotrain's warmup is linear too");
    ok("{\"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 2e-3}},\n"
       " \"scheduler\": {\"type\": \"WarmupCosineLR\", \"params\": {\"warmup_num_steps\": 20, "
       "\"total_num_steps\": 200, \"cos_min_ratio\": 0.1}}}");
    assert_int_equal(C.lr.decay, ZT_LR_COSINE);
    assert_true(C.lr.min_lr > 1.99e-4f && C.lr.min_lr < 2.01e-4f);
    has_note("warning: ds.json: scheduler: warmup_type absent (log): approximated by zerotrain's "
             "linear warmup");
    ok("{\"scheduler\": {\"type\": \"WarmupLR\", \"params\": {\"warmup_max_lr\": 5e-4, "
       "\"warmup_num_steps\": 5, \"warmup_type\": \"log\"}}}");
    assert_int_equal(C.lr.decay, ZT_LR_CONSTANT);
    assert_true(C.lr.max_lr == 5e-4f);
    /* DeepSpeed uses the scheduler's peak over the optimizer's lr */
    ok("{\"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 1e-3}},\n"
       " \"scheduler\": {\"type\": \"WarmupLR\", \"params\": {\"warmup_max_lr\": 5e-4, "
       "\"warmup_num_steps\": 5}}}");
    assert_true(C.lr.max_lr == 5e-4f);
    has_note("warning: ds.json:1:44: optimizer.params.lr: no effect: DeepSpeed's WarmupLR sets the lr");
    /* the default warmup of 1000 steps against the default 100 training steps that no file set
     * (issue 15): training.steps is raised to fit, with a warning naming the key to set */
    ok("{\"scheduler\": {\"type\": \"WarmupLR\", \"params\": {\"warmup_max_lr\": 5e-4}}}");
    assert_int_equal(C.steps, 1000);
    assert_int_equal(src("training.steps")->origin, ZT_ORIGIN_DERIVED);
    has_note("warning: ds.json:1:16: scheduler.params.warmup_num_steps (absent: 1000): 1000 exceeds "
             "training.steps's default 100, which no file set: training.steps raised to 1000 (set "
             "training.steps to choose)");
    ok("{\"scheduler\": {\"type\": \"WarmupLR\", \"params\": {\"warmup_num_steps\": 300}}}");
    assert_int_equal(C.steps, 300);
    bad("{\"scheduler\": {\"type\": \"OneCycle\", \"params\": {\"cycle_min_lr\": 0}}}",
        "ds.json:1:24: scheduler.type: \"OneCycle\" is not supported (WarmupLR, WarmupDecayLR or "
        "WarmupCosineLR)");
    bad("{\"scheduler\": {\"type\": \"WarmupDecayLR\", \"params\": {\"warmup_num_steps\": 5}}}",
        "scheduler.params.total_num_steps: WarmupDecayLR needs it");
    /* no scheduler block: zerotrain's schedule, said so */
    ok("{\"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 1e-3}}}");
    assert_int_equal(C.lr.decay, ZT_LR_COSINE);
    has_note("no scheduler block: zerotrain's schedule applies");
}

static void test_other_keys(void **state) {
    (void)state;
    ok("{\"gradient_clipping\": 0.5, \"steps_per_print\": 10, \"wall_clock_breakdown\": true,\n"
       " \"comms_logger\": {\"enabled\": true, \"verbose\": false, \"prof_all\": true},\n"
       " \"activation_checkpointing\": {\"partition_activations\": false, \"cpu_checkpointing\": true},\n"
       " \"flops_profiler\": {\"enabled\": false}, \"tensorboard\": {\"enabled\": true, \"output_path\": \"x\"}}");
    assert_true(C.optim.grad_clip == 0.5f);
    assert_int_equal(C.print_every, 10);
    assert_true(C.wall_clock_breakdown && C.comms_log);
    has_note("note: logging.wall_clock_breakdown true is what logging.jsonl records every step");
    has_note("warning: ds.json:3:63: activation_checkpointing.cpu_checkpointing: activations already");
    assert_int_equal(C.activation_checkpointing, ZT_CFG_RECOMPUTE_FULL); /* the block turns it on */
    source_is("memory.activation_checkpointing", ZT_ORIGIN_DIALECT, "ds.json:3:30 deepspeed activation_checkpointing");
    assert_null(strstr(notes(), "memory.activation_checkpointing full")); /* honored: no warning */
    has_note("note: ds.json:4:2: flops_profiler: the flops profiler is not implemented: the progress "
             "line and logging.jsonl report MFU (not enabled)");
    has_note("warning: ds.json:4:40: tensorboard: not implemented: zerotrain writes logging.jsonl");
    ok("{}");
    has_note("no gradient_clipping: training.grad_clip keeps its value (default 1.0");
    ok("{\"tensor_parallel\": {\"autotp_size\": 2}}");
    assert_int_equal(C.tensor_parallel_size, 2);
    zt_error err = {0};
    strcpy(C.train_path, "x");
    assert_int_equal(zt_train_config_validate(&C, &err), ZT_OK); /* tensor parallelism runs (issue 18) */
}

static void test_syntax_and_keys(void **state) {
    (void)state;
    /* comments, as DeepSpeed's hjson reader allows */
    ok("{\n  // the stage\n  \"zero_optimization\": {\"stage\": 2} /* block */\n}\n");
    assert_int_equal(C.strategy, ZT_STRATEGY_ZERO2);
    source_is("parallel.strategy", ZT_ORIGIN_DIALECT, "ds.json:3:34");
    bad("{\n  \"train_batch_size\": 8,\n  \"zero_optimization\": {\"stage\": }\n}",
        "ds.json:3:34: JSON syntax error near \"}");
    bad("{\"a\": 1", "ds.json:1:7: JSON syntax error near \"1\"");
    bad("{} {}", "ds.json:1:4: JSON syntax error: text after the end of the object");
    bad("[1, 2]", "ds.json:1:1: expected a JSON object ({...}) at the top");
    bad("", "JSON syntax error");
    /* unknown keys: did you mean */
    bad("{\"zero_optimisation\": {\"stage\": 3}}",
        "ds.json:1:2: zero_optimisation: unknown deepspeed key; did you mean zero_optimization?");
    bad("{\"zero_optimization\": {\"stag\": 3}}",
        "ds.json:1:24: zero_optimization.stag: unknown deepspeed key; did you mean zero_optimization.stage?");
    bad("{\"stage\": 3}", "ds.json:1:2: stage: unknown deepspeed key; did you mean zero_optimization.stage?");
    bad("{\"zero_optimization\": {\"offload_param\": {\"devcie\": \"cpu\"}}}",
        "zero_optimization.offload_param.devcie: unknown deepspeed key; did you mean "
        "zero_optimization.offload_param.device?");
    /* no close match: ignored with a warning, as DeepSpeed ignores keys it does not read; keys
     * that are comments by convention are ignored with a note (issue 15) */
    ok("{\"no_such_thing\": 1, \"_comment\": \"zero 2\", \"//\": \"x\"}");
    has_note("warning: ds.json:1:2: no_such_thing: unknown deepspeed key, close to none known: ignored "
             "(DeepSpeed ignores keys it does not read)");
    has_note("note: ds.json:1:22: _comment: a comment by convention: ignored");
    has_note("note: ds.json:1:44: //: a comment by convention: ignored");
    /* duplicates (JSON allows them; DeepSpeed keeps the last silently) */
    bad("{\"train_batch_size\": 8,\n \"train_batch_size\": 16}",
        "ds.json:2:2: train_batch_size: duplicate key (first at line 1)");
    /* kinds */
    bad("{\"zero_optimization\": 3}",
        "ds.json:1:23: zero_optimization: expected a mapping or null, got a number 3");
    bad("{\"wall_clock_breakdown\": \"yes please\"}",
        "wall_clock_breakdown: expected true or false, got a string \"yes please\"");
    /* an Accelerate file given as DeepSpeed */
    bad("{\"distributed_type\": \"FSDP\"}", "ds.json: an Accelerate config (distributed_type), not a DeepSpeed one");
    /* everything reported together */
    zt_error err = {0};
    assert_int_equal(parse("{\"zero_optimisation\": {}, \"train_batch_size\": -1,\n"
                        " \"gradient_clipping\": -2, \"bf16\": {\"enabld\": true}}",
                        &err),
                     ZT_ERR_USAGE);
    assert_non_null(strstr(err.msg, "4 problems in the configuration:\n"));
    assert_non_null(strstr(err.msg, "\n  ds.json:1:2: zero_optimisation: unknown deepspeed key"));
    assert_non_null(strstr(err.msg, "\n  ds.json:1:47: train_batch_size: expected an integer in"));
    assert_non_null(strstr(err.msg, "\n  ds.json:2:23: gradient_clipping: expected a number >= 0, got -2"));
    assert_non_null(strstr(err.msg, "\n  ds.json:2:36: bf16.enabld: unknown deepspeed key; did you mean bf16.enabled?"));
}

/* A native file that includes a DeepSpeed file: its keys must agree with the native ones. */
static void test_native_include(void **state) {
    (void)state;
    zt_error err = {0};
    snprintf(DIR, sizeof DIR, "/tmp/zt_test_cfg_ds_XXXXXX");
    assert_non_null(mkdtemp(DIR));
    put("ds.json", "{\n  \"train_micro_batch_size_per_gpu\": \"auto\",\n  \"gradient_accumulation_steps\": 2,\n"
                   "  \"zero_optimization\": {\"stage\": 3}\n}\n");
    put("run.yaml", "deepspeed_config: ds.json\nmodel: {preset: tiny}\ndata: {train: a.bin}\n"
                    "training: {micro_batch_size: 8}\n");
    if (load("run.yaml", &err)) fail_msg("%s", err.msg);
    assert_int_equal(C.micro_batch, 8); /* "auto" keeps the native value ... */
    assert_int_equal(C.grad_accum, 2);
    assert_int_equal(C.strategy, ZT_STRATEGY_ZERO3);
    source_is("training.micro_batch_size", ZT_ORIGIN_AUTO, "ds.json:2:37 deepspeed "
              "train_micro_batch_size_per_gpu=\"auto\": auto, keeps ");
    source_is("training.micro_batch_size", ZT_ORIGIN_AUTO, "run.yaml:4:30"); /* ... and says whose */
    assert_string_equal(C.dialect, "native");
    /* the same value in both places is fine; different ones are an error naming both */
    put("run2.yaml", "deepspeed_config: ds.json\ndata: {train: a.bin}\nparallel: {strategy: zero3}\n");
    if (load("run2.yaml", &err)) fail_msg("%s", err.msg);
    source_is("parallel.strategy", ZT_ORIGIN_FILE, "run2.yaml:3:22");
    put("run3.yaml", "deepspeed_config: ds.json\ndata: {train: a.bin}\nparallel: {strategy: zero2}\n"
                     "training: {gradient_accumulation_steps: 4}\n");
    assert_int_equal(load("run3.yaml", &err), ZT_ERR_USAGE);
    assert_non_null(strstr(err.msg, "2 problems in the configuration:"));
    assert_non_null(strstr(err.msg, "ds.json:4:34: zero_optimization.stage: parallel.strategy zero3 "
                                    "contradicts zero2 from "));
    assert_non_null(strstr(err.msg, "run3.yaml:3:22"));
    assert_non_null(strstr(err.msg, "ds.json:3:34: gradient_accumulation_steps: "
                                    "training.gradient_accumulation_steps 2 contradicts 4 from "));
    /* activation_checkpointing: the block means full; a native selective stays, a native none
     * contradicts it; a null block is off */
    put("ds3.json", "{\"activation_checkpointing\": {\"partition_activations\": false}}");
    put("ac1.yaml", "deepspeed_config: ds3.json\ndata: {train: a.bin}\nmemory: {activation_checkpointing: selective}\n");
    if (load("ac1.yaml", &err)) fail_msg("%s", err.msg);
    assert_int_equal(C.activation_checkpointing, ZT_CFG_RECOMPUTE_SELECTIVE);
    source_is("memory.activation_checkpointing", ZT_ORIGIN_FILE, "ac1.yaml:3:36");
    put("ac2.yaml", "deepspeed_config: ds3.json\ndata: {train: a.bin}\nmemory: {activation_checkpointing: none}\n");
    assert_int_equal(load("ac2.yaml", &err), ZT_ERR_USAGE);
    if (!strstr(err.msg, "activation_checkpointing: memory.activation_checkpointing full contradicts none"))
        fail_msg("%s", err.msg);
    put("ds4.json", "{\"activation_checkpointing\": null}");
    put("ac3.yaml", "deepspeed_config: ds4.json\ndata: {train: a.bin}\n");
    if (load("ac3.yaml", &err)) fail_msg("%s", err.msg);
    assert_int_equal(C.activation_checkpointing, ZT_CFG_RECOMPUTE_NONE);
    /* a DeepSpeed default does not override a native value */
    put("ds2.json", "{\"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 1e-3}}}");
    put("run4.yaml", "deepspeed_config: ds2.json\noptimizer: {beta2: 0.98}\n");
    if (load("run4.yaml", &err)) fail_msg("%s", err.msg);
    assert_true(C.optim.beta2 == 0.98f);
    assert_true(C.optim.weight_decay == 0.0f); /* not set natively: DeepSpeed's default */
    /* include errors */
    put("run5.yaml", "deepspeed_config: missing.json\n");
    assert_int_equal(load("run5.yaml", &err), ZT_ERR_USAGE);
    assert_non_null(strstr(err.msg, "run5.yaml:1:19: deepspeed_config: "));
    assert_non_null(strstr(err.msg, "missing.json: cannot open: No such file or directory"));
    put("run6.yaml", "deepspeed_config: ds.json\naccelerate_config: acc.yaml\n");
    assert_int_equal(load("run6.yaml", &err), ZT_ERR_USAGE);
    assert_non_null(strstr(err.msg, "run6.yaml:2:1: accelerate_config: a native file includes one "
                                    "DeepSpeed or Accelerate file (first: deepspeed_config at line 1)"));
    put("run7.yaml", "deepspeed_confg: ds.json\n");
    assert_int_equal(load("run7.yaml", &err), ZT_ERR_USAGE);
    assert_non_null(strstr(err.msg, "deepspeed_confg: unknown section; did you mean deepspeed_config?"));
    /* a .json file is read as DeepSpeed by zt_train_config_load */
    if (load("ds.json", &err)) fail_msg("%s", err.msg);
    assert_string_equal(C.dialect, "deepspeed");
    assert_int_equal(C.strategy, ZT_STRATEGY_ZERO3);
    const char *names[] = {"ds.json", "ds2.json", "run.yaml", "run2.yaml", "run3.yaml", "run4.yaml",
                           "run5.yaml", "run6.yaml", "run7.yaml", "ds3.json", "ds4.json", "ac1.yaml",
                           "ac2.yaml", "ac3.yaml"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char path[256];
        snprintf(path, sizeof path, "%s/%s", DIR, names[i]);
        unlink(path);
    }
    rmdir(DIR);
}

/* The example from examples/: what docs/config.md promises. */
static void test_example(void **state) {
    (void)state;
    const char *root = getenv("ZT_SOURCE_DIR");
    if (!root) skip();
    char path[1024];
    zt_error err = {0};
    snprintf(path, sizeof path, "%s/examples/ds_zero3.json", root);
    zt_train_config_default(&C);
    if (zt_train_config_load(&C, path, &err)) fail_msg("%s", err.msg);
    assert_int_equal(C.strategy, ZT_STRATEGY_ZERO3);
    assert_int_equal(C.micro_batch, 4);
    assert_true(C.bucket_mb == 25.0f);
    assert_int_equal(zt_train_config_validate_world(&C, 2, &err), ZT_OK);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stage_to_strategy), cmocka_unit_test(test_batch_sizes),
        cmocka_unit_test(test_zero_keys),         cmocka_unit_test(test_offload),
        cmocka_unit_test(test_precision),         cmocka_unit_test(test_optimizer),
        cmocka_unit_test(test_scheduler),         cmocka_unit_test(test_other_keys),
        cmocka_unit_test(test_syntax_and_keys),   cmocka_unit_test(test_native_include),
        cmocka_unit_test(test_example),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
