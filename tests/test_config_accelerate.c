/* test_config_accelerate.c - Accelerate's config YAML read into the native configuration
 * (src/config/dialect_accelerate.c): the two example files that differ in two lines resolve to the
 * same configuration as each other and as examples/native_zero3.yaml; distributed_type, ranks and
 * machines, mixed precision (fp32 master weights for both backends), deepspeed_config (with and
 * without deepspeed_config_file), fsdp_config (FSDP1 names and numbers, FSDP2 booleans),
 * parallelism_config; errors with positions and did-you-mean. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#define TEST_DIALECT_PARSE zt_train_config_parse_accelerate
#define TEST_DIALECT_FILE "acc.yaml"
#include "test_config_support.h"

static zt_train_config D;

#define HEAD "compute_environment: LOCAL_MACHINE\nnum_machines: 1\nnum_processes: 2\n"

static void source_has(const char *name, const char *text) {
    if (!strstr(src(name)->text, text))
        fail_msg("%s: source \"%s\" lacks \"%s\"", name, src(name)->text, text);
}

static int validate(zt_error *err) {
    strcpy(C.train_path, "x.bin");
    return zt_train_config_validate(&C, err);
}

/* ------------------------------------------------------------------------------------------- */

/* The headline: switching the two lines switches nothing that matters. */
static void test_examples_agree(void **state) {
    (void)state;
    const char *root = getenv("ZT_SOURCE_DIR");
    if (!root) skip();
    const char *files[] = {"accelerate_deepspeed.yaml", "accelerate_fsdp.yaml", "ds_zero3.json",
                           "native_ds_include.yaml", "native_zero3.yaml"};
    zt_error err = {0};
    uint64_t h0 = 0;
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/examples/%s", root, files[i]);
        zt_train_config_default(&C);
        if (zt_train_config_load(&C, path, &err)) fail_msg("%s: %s", files[i], err.msg);
        /* what the dialect files cannot say comes from --set, as the docs show */
        static const char *const sets[] = {"data.train=x.bin", "data.val=", "parallel.nproc=2"};
        for (size_t k = 0; k < 3; k++)
            if (zt_train_config_set(&C, sets[k], &err)) fail_msg("%s", err.msg);
        if (zt_train_config_validate_world(&C, 2, &err) || zt_train_config_validate(&C, &err))
            fail_msg("%s: %s", files[i], err.msg);
        if (i == 0) {
            D = C;
            h0 = zt_train_config_hash(&C);
            assert_int_equal(C.strategy, ZT_STRATEGY_ZERO3);
            assert_string_equal(C.dialect, "accelerate");
            continue;
        }
        if (!zt_train_config_equal(&C, &D)) {
            char a[1100], b[1100];
            for (int k = 0; k < zt_config_key_count(); k++)
                if (strcmp(zt_config_key_value(&C, k, a, sizeof a), zt_config_key_value(&D, k, b, sizeof b)))
                    fail_msg("%s: %s is %s, accelerate_deepspeed.yaml gives %s", files[i],
                             zt_config_key_name(k), a, b);
        }
        assert_true(zt_train_config_hash(&C) == h0);
    }
    /* the two Accelerate files differ in exactly two lines */
    char pa[1024], pb[1024], la[1024], lb[1024];
    snprintf(pa, sizeof pa, "%s/examples/accelerate_deepspeed.yaml", root);
    snprintf(pb, sizeof pb, "%s/examples/accelerate_fsdp.yaml", root);
    FILE *fa = fopen(pa, "r"), *fb = fopen(pb, "r");
    assert_non_null(fa);
    assert_non_null(fb);
    int differ = 0, lines = 0;
    while (fgets(la, sizeof la, fa)) {
        assert_non_null(fgets(lb, sizeof lb, fb));
        differ += strcmp(la, lb) != 0;
        lines++;
    }
    assert_null(fgets(lb, sizeof lb, fb));
    fclose(fa);
    fclose(fb);
    assert_int_equal(differ, 2);
    assert_true(lines > 10);
}

static void test_distributed_type(void **state) {
    (void)state;
    ok(HEAD "distributed_type: MULTI_CPU\nmixed_precision: 'no'\n");
    assert_int_equal(C.strategy, ZT_STRATEGY_DDP);
    assert_int_equal(C.nproc, 2);
    source_has("parallel.nproc", "acc.yaml:3:16 accelerate num_processes=2");
    ok(HEAD "distributed_type: MULTI_GPU\n");
    has_note("MULTI_GPU: data parallel (ddp) on CPU ranks");
    ok("distributed_type: NO\nnum_processes: 4\n");
    assert_int_equal(C.nproc, 1);
    has_note("warning: acc.yaml:2:1: num_processes: distributed_type NO runs one process");
    ok("distributed_type: MULTI_CPU\nnum_machines: 2\nnum_processes: 8\nmachine_rank: 1\n"
       "main_process_ip: 10.0.0.1\nmain_process_port: 29500\n");
    assert_int_equal(C.nproc, 1);
    has_note("warning: acc.yaml:2:1: num_machines: 2 machines: zerotrain does not start remote ranks "
             "itself; run `mpirun -np 8 -hostfile HOSTS zerotrain train CONFIG`");
    has_note("note: acc.yaml:4:1: machine_rank: mpirun assigns ranks");
    bad(HEAD "distributed_type: XLA\n",
        "acc.yaml:4:19: distributed_type: \"XLA\" is not supported (NO, MULTI_CPU, DEEPSPEED or FSDP)");
    bad(HEAD, "acc.yaml: distributed_type: missing");
    bad("compute_environment: AMAZON_SAGEMAKER\ndistributed_type: NO\n",
        "acc.yaml:1:22: compute_environment: \"AMAZON_SAGEMAKER\" is not supported");
}

static void test_mixed_precision(void **state) {
    (void)state;
    zt_error err = {0};
    ok(HEAD "distributed_type: FSDP\nmixed_precision: bf16\n");
    assert_int_equal(C.precision, ZT_CFG_PREC_BF16);
    has_note("bf16 with fp32 master weights for DeepSpeed and FSDP alike");
    /* Accelerate's FSDP plugin sets reduce_dtype = the mixed precision dtype, and DeepSpeed
     * reduces in the training dtype: bf16 under both */
    assert_int_equal(C.reduce_dtype, ZT_CFG_DTYPE_BF16);
    has_note("gradients reduced in bf16, as Accelerate's FSDP (reduce_dtype) and DeepSpeed");
    assert_int_equal(validate(&err), ZT_OK); /* honored (src/precision) */
    ok(HEAD "distributed_type: DEEPSPEED\nmixed_precision: bf16\n");
    assert_int_equal(C.reduce_dtype, ZT_CFG_DTYPE_BF16);
    ok(HEAD "distributed_type: MULTI_CPU\nmixed_precision: bf16\n"); /* DDP: fp32 gradients, fp32 all-reduce */
    assert_int_equal(C.precision, ZT_CFG_PREC_BF16);
    assert_int_equal(C.reduce_dtype, ZT_CFG_DTYPE_FP32);
    ok(HEAD "distributed_type: FSDP\nmixed_precision: fp16\n");
    assert_int_equal(C.reduce_dtype, ZT_CFG_DTYPE_FP16);
    has_note("gradients reduced in fp16, as Accelerate's FSDP (reduce_dtype) and DeepSpeed");
    assert_int_equal(validate(&err), ZT_OK);
    ok(HEAD "distributed_type: DEEPSPEED\nmixed_precision: fp16\n");
    assert_int_equal(C.precision, ZT_CFG_PREC_FP16);
    assert_int_equal(C.reduce_dtype, ZT_CFG_DTYPE_FP16);
    ok(HEAD "distributed_type: DEEPSPEED\nmixed_precision: no\n"); /* PyYAML reads it as false */
    assert_int_equal(C.precision, ZT_CFG_PREC_FP32);
    bad(HEAD "distributed_type: FSDP\nmixed_precision: fp8\n",
        "acc.yaml:5:18: mixed_precision: fp8 is not supported");
    bad(HEAD "distributed_type: FSDP\nmixed_precision: fp64\n",
        "acc.yaml:5:18: mixed_precision: expected no, bf16 or fp16 (or fp8), got \"fp64\"");
}

static void test_deepspeed_block(void **state) {
    (void)state;
    zt_error err = {0};
    ok(HEAD "distributed_type: DEEPSPEED\n"
            "deepspeed_config:\n"
            "  zero_stage: 1\n"
            "  gradient_accumulation_steps: 4\n"
            "  gradient_clipping: 0.5\n"
            "  offload_optimizer_device: cpu\n"
            "  offload_param_device: none\n"
            "  zero3_save_16bit_model: true\n");
    assert_int_equal(C.strategy, ZT_STRATEGY_ZERO1);
    assert_int_equal(C.grad_accum, 4);
    assert_true(C.optim.grad_clip == 0.5f);
    assert_int_equal(C.offload_optimizer, ZT_CFG_OFFLOAD_CPU);
    assert_true(C.ckpt_consolidated);
    source_has("parallel.strategy", "acc.yaml:6:15 accelerate deepspeed_config.zero_stage=1");
    has_note("warning: memory.offload_optimizer cpu changes nothing on this CPU-only build");
    /* DeepSpeedPlugin's defaults: stage 2, "auto" elsewhere */
    ok(HEAD "distributed_type: DEEPSPEED\n");
    assert_int_equal(C.strategy, ZT_STRATEGY_ZERO2);
    source_has("parallel.strategy", "accelerate default: deepspeed_config.zero_stage absent: 2");
    ok(HEAD "distributed_type: DEEPSPEED\ndeepspeed_config:\n  gradient_accumulation_steps: auto\n");
    assert_int_equal(C.grad_accum, 1);
    assert_int_equal(src("training.gradient_accumulation_steps")->origin, ZT_ORIGIN_AUTO);
    /* nvme: the optimizer state and zero3's parameter pieces are offloaded; parameter offload
     * under zero2 is refused, naming the strategy */
    ok(HEAD "distributed_type: DEEPSPEED\ndeepspeed_config:\n  zero_stage: 3\n"
            "  offload_optimizer_device: nvme\n  offload_optimizer_nvme_path: /nvme\n");
    assert_int_equal(C.offload_optimizer, ZT_CFG_OFFLOAD_NVME);
    assert_string_equal(C.offload_optimizer_nvme_path, "/nvme");
    assert_int_equal(validate(&err), ZT_OK);
    ok(HEAD "distributed_type: DEEPSPEED\ndeepspeed_config:\n  zero_stage: 3\n"
            "  offload_param_device: nvme\n  offload_param_nvme_path: /nvme\n");
    assert_int_equal(C.offload_param, ZT_CFG_OFFLOAD_NVME);
    assert_int_equal(validate(&err), ZT_OK);
    bad(HEAD "distributed_type: DEEPSPEED\ndeepspeed_config:\n  zero_stage: 2\n"
             "  offload_param_device: nvme\n  offload_param_nvme_path: /nvme\n",
        "memory.offload_param: nvme offloads zero3's parameter pieces: it needs parallel.strategy zero3");
    bad(HEAD "distributed_type: DEEPSPEED\ndeepspeed_config:\n  zero_stage: 5\n",
        "acc.yaml:6:15: deepspeed_config.zero_stage: expected an integer in [0, 3], got 5");
    bad(HEAD "distributed_type: DEEPSPEED\ndeepspeed_config:\n  zero_stag: 3\n",
        "acc.yaml:6:3: deepspeed_config.zero_stag: unknown accelerate key; did you mean "
        "deepspeed_config.zero_stage?");
    /* only the selected block is read */
    ok(HEAD "distributed_type: DEEPSPEED\ndeepspeed_config: {zero_stage: 3}\n"
            "fsdp_config: {fsdp_sharding_strategy: NO_SHARD}\n");
    assert_int_equal(C.strategy, ZT_STRATEGY_ZERO3);
    has_note("note: acc.yaml:6:1: fsdp_config: ignored: distributed_type is DEEPSPEED");
}

static void test_deepspeed_config_file(void **state) {
    (void)state;
    zt_error err = {0};
    snprintf(DIR, sizeof DIR, "/tmp/zt_test_cfg_acc_XXXXXX");
    assert_non_null(mkdtemp(DIR));
    put("ds.json", "{\"train_micro_batch_size_per_gpu\": \"auto\", \"zero_optimization\": {\"stage\": 3},\n"
                   " \"bf16\": {\"enabled\": \"auto\"}}\n");
    put("a.yaml", HEAD "distributed_type: DEEPSPEED\ndeepspeed_config:\n  deepspeed_config_file: ds.json\n"
                       "  zero3_init_flag: true\n");
    if (load("a.yaml", &err)) fail_msg("%s", err.msg);
    assert_int_equal(C.strategy, ZT_STRATEGY_ZERO3);
    assert_string_equal(C.dialect, "accelerate");
    assert_non_null(strstr(src("parallel.strategy")->text, "ds.json:1:75 deepspeed zero_optimization.stage=3"));
    /* Accelerate's rule: these keys next to a deepspeed_config_file are errors */
    put("b.yaml", HEAD "distributed_type: DEEPSPEED\nmixed_precision: bf16\ndeepspeed_config:\n"
                       "  deepspeed_config_file: ds.json\n  zero_stage: 2\n  gradient_accumulation_steps: 2\n");
    assert_int_equal(load("b.yaml", &err), ZT_ERR_USAGE);
    assert_non_null(strstr(err.msg, "3 problems in the configuration:"));
    assert_non_null(strstr(err.msg, "b.yaml:8:15: deepspeed_config.zero_stage: cannot be combined with "
                                    "deepspeed_config_file (Accelerate raises a ValueError too)"));
    assert_non_null(strstr(err.msg, "b.yaml:9:32: deepspeed_config.gradient_accumulation_steps: cannot"));
    assert_non_null(strstr(err.msg, "b.yaml:5:18: mixed_precision: cannot be combined with "
                                    "deepspeed_config_file"));
    put("c.yaml", HEAD "distributed_type: DEEPSPEED\ndeepspeed_config: {deepspeed_config_file: nope.json}\n");
    assert_int_equal(load("c.yaml", &err), ZT_ERR_USAGE);
    assert_non_null(strstr(err.msg, "c.yaml:5:43: deepspeed_config.deepspeed_config_file: nope.json: "
                                    "cannot open"));
    /* detection: an Accelerate file in JSON form */
    put("d.json", "{\"compute_environment\": \"LOCAL_MACHINE\", \"distributed_type\": \"FSDP\", "
                  "\"num_processes\": 2, \"fsdp_config\": {\"fsdp_sharding_strategy\": 2}}");
    if (load("d.json", &err)) fail_msg("%s", err.msg);
    assert_string_equal(C.dialect, "accelerate");
    assert_int_equal(C.strategy, ZT_STRATEGY_ZERO2);
    /* an Accelerate file included from a native one */
    put("run.yaml", "accelerate_config: a.yaml\ndata: {train: t.bin}\ntraining: {micro_batch_size: 2}\n");
    if (load("run.yaml", &err)) fail_msg("%s", err.msg);
    assert_int_equal(C.strategy, ZT_STRATEGY_ZERO3);
    assert_int_equal(C.micro_batch, 2);
    assert_int_equal(C.nproc, 2);
    /* fsdp_activation_checkpointing true under a native selective keeps selective; false contradicts it */
    put("e.yaml", HEAD "distributed_type: FSDP\nfsdp_config: {fsdp_activation_checkpointing: true}\n");
    put("run2.yaml", "accelerate_config: e.yaml\ndata: {train: t.bin}\nmemory: {activation_checkpointing: selective}\n");
    if (load("run2.yaml", &err)) fail_msg("%s", err.msg);
    assert_int_equal(C.activation_checkpointing, ZT_CFG_RECOMPUTE_SELECTIVE);
    put("f.yaml", HEAD "distributed_type: FSDP\nfsdp_config: {fsdp_activation_checkpointing: false}\n");
    put("run3.yaml", "accelerate_config: f.yaml\ndata: {train: t.bin}\nmemory: {activation_checkpointing: selective}\n");
    assert_int_equal(load("run3.yaml", &err), ZT_ERR_USAGE);
    if (!strstr(err.msg, "memory.activation_checkpointing none contradicts selective")) fail_msg("%s", err.msg);
    const char *names[] = {"ds.json", "a.yaml", "b.yaml", "c.yaml", "d.json", "run.yaml",
                           "e.yaml", "f.yaml", "run2.yaml", "run3.yaml"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char path[256];
        snprintf(path, sizeof path, "%s/%s", DIR, names[i]);
        unlink(path);
    }
    rmdir(DIR);
}

static void test_fsdp_block(void **state) {
    (void)state;
    zt_error err = {0};
    static const struct {
        const char *value;
        zt_strategy strategy;
        zt_strategy inner;
    } S[] = {{"FULL_SHARD", ZT_STRATEGY_ZERO3, ZT_STRATEGY_ZERO3},
             {"1", ZT_STRATEGY_ZERO3, ZT_STRATEGY_ZERO3},
             {"SHARD_GRAD_OP", ZT_STRATEGY_ZERO2, ZT_STRATEGY_ZERO3},
             {"2", ZT_STRATEGY_ZERO2, ZT_STRATEGY_ZERO3},
             {"NO_SHARD", ZT_STRATEGY_DDP, ZT_STRATEGY_ZERO3},
             {"3", ZT_STRATEGY_DDP, ZT_STRATEGY_ZERO3},
             {"HYBRID_SHARD", ZT_STRATEGY_HYBRID, ZT_STRATEGY_ZERO3},
             {"4", ZT_STRATEGY_HYBRID, ZT_STRATEGY_ZERO3},
             {"hybrid_shard_zero2", ZT_STRATEGY_HYBRID, ZT_STRATEGY_ZERO2},
             {"'5'", ZT_STRATEGY_HYBRID, ZT_STRATEGY_ZERO2}};
    for (size_t i = 0; i < sizeof S / sizeof S[0]; i++) {
        char y[256];
        snprintf(y, sizeof y, HEAD "distributed_type: FSDP\nfsdp_config:\n  fsdp_sharding_strategy: %s\n",
                 S[i].value);
        ok(y);
        assert_int_equal(C.strategy, S[i].strategy);
        if (S[i].strategy == ZT_STRATEGY_HYBRID) assert_int_equal(C.hybrid_inner, S[i].inner);
    }
    /* HYBRID_SHARD across machines: shard groups of one machine's ranks */
    ok("distributed_type: FSDP\nnum_machines: 2\nnum_processes: 8\nfsdp_config: {fsdp_sharding_strategy: HYBRID_SHARD}\n");
    assert_int_equal(C.hybrid_shard_size, 4);
    /* FSDP1 names in fsdp_reshard_after_forward (what `accelerate config` writes today) */
    ok(HEAD "distributed_type: FSDP\nfsdp_config: {fsdp_version: 1, fsdp_reshard_after_forward: SHARD_GRAD_OP}\n");
    assert_int_equal(C.strategy, ZT_STRATEGY_ZERO2);
    /* FSDP2: booleans */
    ok(HEAD "distributed_type: FSDP\nfsdp_config: {fsdp_version: 2, fsdp_reshard_after_forward: true}\n");
    assert_int_equal(C.strategy, ZT_STRATEGY_ZERO3);
    assert_true(C.reshard_after_forward);
    ok(HEAD "distributed_type: FSDP\nfsdp_config: {fsdp_version: 2, fsdp_reshard_after_forward: false}\n");
    assert_int_equal(C.strategy, ZT_STRATEGY_ZERO3);
    assert_false(C.reshard_after_forward);
    has_note("false: zero3 keeping each gathered unit from forward to backward");
    bad(HEAD "distributed_type: FSDP\nfsdp_config: {fsdp_version: 2, fsdp_reshard_after_forward: FULL_SHARD}\n",
        "fsdp_config.fsdp_reshard_after_forward: FSDP2 takes true or false here");
    /* defaults: FULL_SHARD */
    ok(HEAD "distributed_type: FSDP\n");
    assert_int_equal(C.strategy, ZT_STRATEGY_ZERO3);
    /* the two spellings must agree */
    bad(HEAD "distributed_type: FSDP\nfsdp_config:\n  fsdp_sharding_strategy: FULL_SHARD\n"
             "  fsdp_reshard_after_forward: SHARD_GRAD_OP\n",
        "acc.yaml:7:31: fsdp_config.fsdp_reshard_after_forward: parallel.strategy zero2 contradicts "
        "zero3 from acc.yaml:6:27 accelerate fsdp_config.fsdp_sharding_strategy=\"FULL_SHARD\"");
    bad(HEAD "distributed_type: FSDP\nfsdp_config: {fsdp_sharding_strategy: FULLSHARD}\n",
        "fsdp_config.fsdp_sharding_strategy: expected FULL_SHARD, SHARD_GRAD_OP, NO_SHARD, HYBRID_SHARD, "
        "HYBRID_SHARD_ZERO2 or 1-5, got \"FULLSHARD\"");
    /* the rest of fsdp_config */
    ok(HEAD "distributed_type: FSDP\nfsdp_config:\n"
            "  fsdp_offload_params: true\n"
            "  fsdp_activation_checkpointing: true\n"
            "  fsdp_state_dict_type: FULL_STATE_DICT\n"
            "  fsdp_backward_prefetch: BACKWARD_PRE\n"
            "  fsdp_forward_prefetch: false\n"
            "  fsdp_auto_wrap_policy: SIZE_BASED_WRAP\n"
            "  fsdp_min_num_params: 100000000\n");
    assert_int_equal(C.offload_param, ZT_CFG_OFFLOAD_CPU);
    assert_int_equal(C.offload_optimizer, ZT_CFG_OFFLOAD_CPU);
    assert_int_equal(C.activation_checkpointing, ZT_CFG_RECOMPUTE_FULL);
    assert_true(C.ckpt_consolidated);
    assert_true(C.prefetch);
    has_note("warning: memory.offload_param cpu changes nothing");
    assert_null(strstr(NOTES, "warning: memory.activation_checkpointing")); /* honored (issue 7) */
    has_note("warning: acc.yaml:11:3: fsdp_config.fsdp_auto_wrap_policy: SIZE_BASED_WRAP: not honored");
    assert_int_equal(validate(&err), ZT_OK); /* warnings only */
    /* prefetch: one key for both directions */
    ok(HEAD "distributed_type: FSDP\nfsdp_config: {fsdp_backward_prefetch: NO_PREFETCH}\n");
    assert_false(C.prefetch);
    ok(HEAD "distributed_type: FSDP\nfsdp_config: {fsdp_backward_prefetch: NO_PREFETCH, fsdp_forward_prefetch: true}\n");
    assert_true(C.prefetch);
    bad(HEAD "distributed_type: FSDP\nfsdp_config:\n  fsdp_offload_param: true\n",
        "acc.yaml:6:3: fsdp_config.fsdp_offload_param: unknown accelerate key; did you mean "
        "fsdp_config.fsdp_offload_params?");
}

static void test_parallelism_config(void **state) {
    (void)state;
    zt_error err = {0};
    ok("distributed_type: FSDP\nnum_processes: 4\nfsdp_config: {fsdp_version: 2}\n"
       "parallelism_config:\n  parallelism_config_dp_replicate_size: 2\n"
       "  parallelism_config_dp_shard_size: 2\n");
    assert_int_equal(C.strategy, ZT_STRATEGY_HYBRID);
    assert_int_equal(C.hybrid_shard_size, 2);
    assert_int_equal(C.hybrid_replicas, 2);
    assert_int_equal(zt_train_config_validate_world(&C, 4, &err), ZT_OK);
    assert_int_equal(zt_train_config_validate_world(&C, 6, &err), ZT_ERR_USAGE);
    assert_non_null(strstr(err.msg, "parallel.hybrid_replicas: 2 replicas x shard size 2 = 4 ranks, "
                                    "but the world size is 6"));
    ok("distributed_type: FSDP\nnum_processes: 4\nfsdp_config: {fsdp_version: 2}\n"
       "parallelism_config: {dp_shard_size: 2, dp_replicate_size: 2}\n");
    assert_int_equal(C.strategy, ZT_STRATEGY_HYBRID);
    ok("distributed_type: FSDP\nnum_processes: 4\nfsdp_config: {fsdp_version: 2}\n"
       "parallelism_config: {parallelism_config_dp_shard_size: 2, parallelism_config_tp_size: 2}\n");
    assert_int_equal(C.tensor_parallel_size, 2); /* tp 2 x FSDP over the other 2 (issue 18) */
    assert_int_equal(validate(&err), ZT_OK);
    assert_int_equal(C.strategy, ZT_STRATEGY_ZERO3);
    assert_int_equal(zt_train_config_validate_world(&C, 4, &err), ZT_OK);
    /* Accelerate's tp_hsdp: dp replicate 2 x dp shard 2 x tp 2 = 8 ranks: hybrid over the dp ranks */
    ok("distributed_type: FSDP\nnum_processes: 8\nfsdp_config: {fsdp_version: 2}\n"
       "parallelism_config: {dp_replicate_size: 2, dp_shard_size: 2, tp_size: 2}\n");
    assert_int_equal(C.strategy, ZT_STRATEGY_HYBRID);
    assert_int_equal(C.hybrid_shard_size, 2);
    assert_int_equal(C.hybrid_replicas, 2);
    assert_int_equal(C.tensor_parallel_size, 2);
    assert_int_equal(validate(&err), ZT_OK);
    assert_int_equal(zt_train_config_validate_world(&C, 8, &err), ZT_OK);
    assert_int_equal(zt_train_config_validate_world(&C, 4, &err), ZT_ERR_USAGE);
    assert_non_null(strstr(err.msg, "parallel.hybrid_replicas: 2 replicas x shard size 2 = 4 ranks, but the "
                                    "data-parallel size is 2"));
    bad("distributed_type: FSDP\nfsdp_config: {fsdp_version: 1}\nparallelism_config: {dp_shard_size: 2}\n",
        "acc.yaml:3:21: parallelism_config: needs distributed_type FSDP with fsdp_config.fsdp_version 2");
    bad("distributed_type: FSDP\nnum_processes: 8\nfsdp_config: {fsdp_version: 2}\n"
        "parallelism_config: {dp_replicate_size: 2, dp_shard_size: 2}\n",
        "parallelism_config: dp_replicate 2 x dp_shard 2 x tp 1 x cp 1 x sp 1 = 4 ranks, but "
        "num_processes is 8");
    /* context parallelism: cp_size with its comm strategy (allgather, alltoall = ring), sp_size =
     * DeepSpeed's Ulysses; both at once refused */
    ok("distributed_type: FSDP\nnum_processes: 2\nfsdp_config: {fsdp_version: 2}\n"
       "parallelism_config: {cp_size: 2}\n");
    assert_int_equal(validate(&err), ZT_OK);
    assert_int_equal(C.context_parallel_size, 2);
    assert_int_equal(C.context_parallel_mode, ZT_CP_ALLGATHER);
    ok("distributed_type: FSDP\nnum_processes: 4\nfsdp_config: {fsdp_version: 2}\n"
       "parallelism_config: {cp_size: 2, dp_shard_size: 2, cp_comm_strategy: alltoall}\n");
    assert_int_equal(validate(&err), ZT_OK);
    assert_int_equal(C.context_parallel_size, 2);
    assert_int_equal(C.context_parallel_mode, ZT_CP_RING);
    assert_int_equal(zt_train_config_validate_world(&C, 4, &err), ZT_OK);
    ok("distributed_type: FSDP\nnum_processes: 2\nfsdp_config: {fsdp_version: 2}\n"
       "parallelism_config: {sp_size: 2}\n");
    assert_int_equal(C.context_parallel_size, 2);
    assert_int_equal(C.context_parallel_mode, ZT_CP_ULYSSES);
    bad("distributed_type: FSDP\nnum_processes: 4\nfsdp_config: {fsdp_version: 2}\n"
        "parallelism_config: {sp_size: 2, cp_size: 2}\n",
        "parallelism_config_sp_size: 2 with parallelism_config_cp_size 2: both split the sequence");
    bad("distributed_type: FSDP\nnum_processes: 2\nfsdp_config: {fsdp_version: 2}\n"
        "parallelism_config: {cp_size: 2, cp_comm_strategy: ring}\n",
        "parallelism_config_cp_comm_strategy: \"ring\": expected allgather or alltoall");
}

static void test_errors(void **state) {
    (void)state;
    /* issue 15: Accelerate's ClusterConfig refuses unknown top-level keys, and so does zerotrain;
     * inside fsdp_config an unknown key with no close match is ignored with a warning (Accelerate
     * passes the block on as launch arguments and ignores what it does not read); every key of
     * Accelerate's own classes is known (fsdp_ignored_modules, SageMaker's keys) */
    bad(HEAD "distributed_type: FSDP\nno_such_thing: 1\n",
        "acc.yaml:5:1: no_such_thing: unknown accelerate key (Accelerate refuses unknown top-level keys too");
    ok("distributed_type: FSDP\nfsdp_config: {fsdp_ignored_modules: null, no_such_thing: 1, _note: x}\n");
    has_note("warning: acc.yaml:2:43: fsdp_config.no_such_thing: unknown accelerate key, close to none known: ignored");
    has_note("note: acc.yaml:2:61: fsdp_config._note: a comment by convention: ignored");
    has_note("fsdp_config.fsdp_ignored_modules: every parameter of the built-in models is sharded");
    bad(HEAD "distributed_typ: FSDP\n",
        "acc.yaml:4:1: distributed_typ: unknown accelerate key; did you mean distributed_type?");
    bad(HEAD "distributed_type: FSDP\nnum_processes: 3\n",
        "acc.yaml:5:1: num_processes: duplicate key (first at line 3)");
    bad(HEAD "distributed_type: FSDP\nfsdp_config: [1, 2]\n",
        "acc.yaml:5:14: fsdp_config: expected a mapping or null, got a list");
    bad(HEAD "distributed_type: [FSDP]\n", "acc.yaml:4:19: distributed_type: expected true/false or a string, got a list");
    bad("distributed_type: FSDP\nnum_processes: two\n",
        "acc.yaml:2:16: num_processes: expected an integer, got a string \"two\"");
    bad("distributed_type: FSDP\nnum_processes: 0\n",
        "acc.yaml:2:16: num_processes: expected a rank count");
    bad("distributed_type: FSDP\n  bad indent: 1\n", "acc.yaml:2:13: YAML syntax error");
    bad("- a\n- b\n", "acc.yaml:1:1: expected a mapping of keys at the top");
    bad("distributed_type: FSDP\n---\ndistributed_type: NO\n", "a second YAML document");
    /* all reported together */
    zt_error err = {0};
    assert_int_equal(parse("distributed_type: DEEPSPEED\nnum_proceses: 2\nmixed_precision: fp4\n"
                         "deepspeed_config: {zero_stage: 9}\n",
                         &err),
                     ZT_ERR_USAGE);
    assert_non_null(strstr(err.msg, "3 problems in the configuration:\n"));
    assert_non_null(strstr(err.msg, "acc.yaml:2:1: num_proceses: unknown accelerate key; did you mean num_processes?"));
    assert_non_null(strstr(err.msg, "acc.yaml:4:32: deepspeed_config.zero_stage: expected an integer in [0, 3], got 9"));
    assert_non_null(strstr(err.msg, "acc.yaml:3:18: mixed_precision: expected no, bf16 or fp16 (or fp8), got \"fp4\""));
    /* aliases cannot blow up */
    bad("a: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
        "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
        "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\ndistributed_type: NO\n",
        "acc.yaml: more than 100000 YAML nodes (aliases?): not a config file");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_examples_agree),   cmocka_unit_test(test_distributed_type),
        cmocka_unit_test(test_mixed_precision),  cmocka_unit_test(test_deepspeed_block),
        cmocka_unit_test(test_deepspeed_config_file), cmocka_unit_test(test_fsdp_block),
        cmocka_unit_test(test_parallelism_config), cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
