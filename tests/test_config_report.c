/* test_config_report.c - what the configuration says about itself (src/config/train_config.c,
 * support.c, config_print.c): provenance of every origin, --print YAML that reads back to the same
 * values for every example, the JSON form, the hash across ranks (stable, value-only), the checks at
 * launch (validate_world), the support table (every error row refuses, every warning row warns),
 * and the notes callback. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "config/train_config.h"

static zt_train_config C, D;

static int key(const char *name) {
    for (int i = 0; i < zt_config_key_count(); i++)
        if (!strcmp(zt_config_key_name(i), name)) return i;
    fail_msg("no key %s", name);
    return -1;
}

static const zt_config_source *src(const zt_train_config *c, const char *name) {
    return zt_config_key_source(c, key(name));
}

static void parse(const char *yaml) {
    zt_error err = {0};
    zt_train_config_default(&C);
    if (zt_train_config_parse(&C, yaml, strlen(yaml), "run.yaml", &err))
        fail_msg("%s\n--- yaml ---\n%s", err.msg, yaml);
}

static void test_provenance(void **state) {
    (void)state;
    zt_error err = {0};
    parse("model: {preset: gpt2, n_layer: 3}\ndata: {train: a.bin}\ntraining: {lr: 1e-3, seq_len: 32}\n");
    assert_int_equal(src(&C, "training.steps")->origin, ZT_ORIGIN_DEFAULT);
    assert_string_equal(src(&C, "training.steps")->text, "");
    assert_int_equal(src(&C, "model.preset")->origin, ZT_ORIGIN_FILE);
    assert_string_equal(src(&C, "model.preset")->text, "run.yaml:1:17");
    assert_int_equal(src(&C, "model.preset")->loc_len, (int)strlen("run.yaml:1:17"));
    assert_int_equal(src(&C, "model.n_layer")->origin, ZT_ORIGIN_FILE);
    assert_int_equal(src(&C, "model.n_head")->origin, ZT_ORIGIN_DERIVED);
    assert_string_equal(src(&C, "model.n_head")->text, "model.preset gpt2");
    assert_int_equal(src(&C, "training.min_lr")->origin, ZT_ORIGIN_DERIVED);
    assert_string_equal(src(&C, "training.min_lr")->text, "training.lr / 10");
    assert_int_equal(zt_train_config_set(&C, "training.steps=7", &err), ZT_OK);
    assert_int_equal(src(&C, "training.steps")->origin, ZT_ORIGIN_SET);
    assert_string_equal(src(&C, "training.steps")->text, "--set training.steps=7");
    assert_int_equal(src(&C, "training.steps")->loc_len, 5);
    /* --set lr: min_lr still follows (it was never set) */
    assert_int_equal(zt_train_config_set(&C, "training.lr=2e-3", &err), ZT_OK);
    assert_true(C.lr.min_lr == 2e-3f / 10.0f);
    /* --set model.preset resets the model.* keys and their sources */
    assert_int_equal(zt_train_config_set(&C, "model.preset=tiny", &err), ZT_OK);
    assert_int_equal(C.model.n_layer, 2);
    assert_int_equal(src(&C, "model.n_layer")->origin, ZT_ORIGIN_DERIVED);
    /* launch */
    parse("training: {global_batch_size: 16, gradient_accumulation_steps: 0}\n");
    assert_int_equal(zt_train_config_validate_world(&C, 2, &err), ZT_OK);
    assert_int_equal(C.grad_accum, 2);
    assert_int_equal(src(&C, "training.gradient_accumulation_steps")->origin, ZT_ORIGIN_LAUNCH);
    /* a failed --set or parse changes nothing, provenance included */
    D = C;
    assert_int_equal(zt_train_config_set(&C, "training.steps=x", &err), ZT_ERR_USAGE);
    assert_memory_equal(&C, &D, sizeof C);
}

/* Writes c in format into a string (caller frees). */
static char *written(const zt_train_config *c, zt_config_format f) {
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    assert_non_null(m);
    zt_error err = {0};
    assert_int_equal(zt_train_config_write(c, f, m, &err), ZT_OK);
    fclose(m);
    return buf;
}

static void roundtrip(const zt_train_config *c, const char *what) {
    char *yaml = written(c, ZT_CONFIG_YAML);
    zt_error err = {0};
    zt_train_config_default(&D);
    if (zt_train_config_parse(&D, yaml, strlen(yaml), "printed.yaml", &err))
        fail_msg("%s: --print does not read back: %s\n--- yaml ---\n%s", what, err.msg, yaml);
    if (!zt_train_config_equal(c, &D) || zt_train_config_hash(c) != zt_train_config_hash(&D)) {
        char a[1100], b[1100];
        for (int k = 0; k < zt_config_key_count(); k++)
            if (strcmp(zt_config_key_value(c, k, a, sizeof a), zt_config_key_value(&D, k, b, sizeof b)))
                fail_msg("%s: %s is %s, read back as %s", what, zt_config_key_name(k), a, b);
    }
    free(yaml);
}

static void test_print_roundtrip(void **state) {
    (void)state;
    zt_error err = {0};
    /* every example, and awkward values */
    const char *root = getenv("ZT_SOURCE_DIR");
    if (root) {
        const char *files[] = {"tiny.yaml", "gpt2-124M.yaml", "native_zero3.yaml", "ds_zero3.json",
                               "accelerate_deepspeed.yaml", "accelerate_fsdp.yaml", "native_ds_include.yaml"};
        for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
            char path[1024];
            snprintf(path, sizeof path, "%s/examples/%s", root, files[i]);
            zt_train_config_default(&C);
            if (zt_train_config_load(&C, path, &err)) fail_msg("%s: %s", files[i], err.msg);
            roundtrip(&C, files[i]);
        }
    }
    parse("data: {train: \"a \\\"quoted\\\" path\\\\with: colons # and hash\", val: 'x\\ty'}\n"
          "training: {lr: 1.2345678e-4, min_lr: 0, seed: 18446744073709551615, steps: 5000000000}\n"
          "precision: {mode: fp16, loss_scale: 0.5}\nmemory: {offload_optimizer: nvme, "
          "offload_optimizer_nvme_path: /mnt/n v}\n");
    roundtrip(&C, "awkward values");
    zt_train_config_default(&C); /* no data.train: printed as a comment, still reads back */
    roundtrip(&C, "defaults");
    char *yaml = written(&C, ZT_CONFIG_YAML);
    assert_non_null(strstr(yaml, "  # train: not set (required to train: --set data.train=PATH)\n"));
    free(yaml);
}

static void test_json(void **state) {
    (void)state;
    parse("data: {train: a.bin}\ntraining: {steps: 12}\nparallel: {strategy: zero3, overlap_comm: false}\n"
          "memory: {offload_optimizer: cpu}\n");
    char *text = written(&C, ZT_CONFIG_JSON);
    cJSON *j = cJSON_Parse(text);
    assert_non_null(j);
    cJSON *values = cJSON_GetObjectItemCaseSensitive(j, "values");
    cJSON *sources = cJSON_GetObjectItemCaseSensitive(j, "sources");
    assert_int_equal(cJSON_GetArraySize(values), zt_config_key_count());
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(values, "training.steps")->valueint, 12);
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(values, "parallel.strategy")->valuestring, "zero3");
    assert_true(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(values, "parallel.overlap_comm")));
    cJSON *s = cJSON_GetObjectItemCaseSensitive(sources, "training.steps");
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(s, "origin")->valuestring, "file");
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(s, "text")->valuestring, "run.yaml:2:19");
    char h[32];
    snprintf(h, sizeof h, "%016llx", (unsigned long long)zt_train_config_hash(&C));
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(j, "hash")->valuestring, h);
    cJSON *notes = cJSON_GetObjectItemCaseSensitive(j, "notes");
    bool found = false;
    cJSON *n;
    cJSON_ArrayForEach(n, notes) {
        const char *t = cJSON_GetObjectItemCaseSensitive(n, "text")->valuestring;
        if (strstr(t, "memory.offload_optimizer cpu changes nothing on this CPU-only build")) found = true;
    }
    assert_true(found);
    cJSON_Delete(j);
    free(text);
    text = written(&C, ZT_CONFIG_TABLE);
    assert_non_null(strstr(text, "training.steps"));
    assert_non_null(strstr(text, "run.yaml:2:19"));
    assert_non_null(strstr(text, "warning: memory.offload_optimizer cpu changes nothing on this CPU-only build"));
    free(text);
}

static void test_hash(void **state) {
    (void)state;
    zt_error err = {0};
    parse("data: {train: a.bin}\n");
    uint64_t h = zt_train_config_hash(&C);
    assert_true(h != 0);
    /* the same values from other places hash the same */
    zt_train_config_default(&D);
    assert_int_equal(zt_train_config_set(&D, "data.train=a.bin", &err), ZT_OK);
    assert_true(zt_train_config_hash(&D) == h);
    assert_true(zt_train_config_equal(&C, &D));
    /* a value change changes it */
    assert_int_equal(zt_train_config_set(&D, "training.seed=1338", &err), ZT_OK);
    assert_true(zt_train_config_hash(&D) != h);
    assert_false(zt_train_config_equal(&C, &D));
    D = C;
    assert_int_equal(zt_train_config_set(&D, "parallel.bucket_mb=25.5", &err), ZT_OK);
    assert_true(zt_train_config_hash(&D) != h);
    /* notes and sources do not count */
    D = C;
    D.n_notes = 1;
    snprintf(D.notes[0].text, sizeof D.notes[0].text, "x");
    snprintf(D.source[0].text, sizeof D.source[0].text, "elsewhere");
    assert_true(zt_train_config_hash(&D) == h);
    /* stable across builds and platforms: the canonical text, not the struct bytes. If this
     * changes, ranks of different builds would refuse to train together: update it only with a
     * change to the key table. */
    zt_train_config_default(&D);
    char v[64];
    assert_string_equal(zt_config_key_value(&D, key("training.lr"), v, sizeof v), "0.0003");
    assert_string_equal(zt_config_key_value(&D, key("optimizer.eps"), v, sizeof v), "1e-08");
}

static void test_validate_world(void **state) {
    (void)state;
    zt_error err = {0};
    parse("data: {train: a.bin}\ntraining: {global_batch_size: 24, micro_batch_size: 4, "
          "gradient_accumulation_steps: 3}\n");
    assert_int_equal(zt_train_config_validate_world(&C, 2, &err), ZT_OK);
    assert_int_equal(zt_train_config_validate_world(&C, 1, &err), ZT_ERR_USAGE);
    assert_string_equal(err.msg,
                        "run.yaml:2:31: training.global_batch_size: micro x accumulation x world != "
                        "global batch: 4 x 3 x 1 = 12, expected 24; training.global_batch_size 24 "
                        "(run.yaml:2:31); training.micro_batch_size 4 (run.yaml:2:53); "
                        "training.gradient_accumulation_steps 3 (run.yaml:2:85)");
    /* micro derived from global / (GA x world) */
    parse("training: {global_batch_size: 24, micro_batch_size: 0, gradient_accumulation_steps: 3}\n");
    assert_int_equal(zt_train_config_validate_world(&C, 5, &err), ZT_ERR_USAGE);
    assert_non_null(strstr(err.msg, "training.micro_batch_size: cannot be derived"));
    assert_int_equal(zt_train_config_validate_world(&C, 2, &err), ZT_OK);
    assert_int_equal(C.micro_batch, 4);
    /* invariants at load */
    zt_train_config_default(&C);
    assert_int_equal(zt_train_config_parse(&C, "training: {micro_batch_size: 0}\n", 32, "r.yaml", &err),
                     ZT_ERR_USAGE);
    assert_string_equal(err.msg, "r.yaml:1:30: training.micro_batch_size: 0 means derived from "
                                 "training.global_batch_size, which is not set");
    /* hybrid */
    parse("parallel: {strategy: hybrid, hybrid_shard_size: 3}\n");
    assert_int_equal(zt_train_config_validate_world(&C, 4, &err), ZT_ERR_USAGE);
    assert_string_equal(err.msg, "run.yaml:1:49: parallel.hybrid_shard_size: 3 does not divide the world size 4");
    assert_int_equal(zt_train_config_validate_world(&C, 6, &err), ZT_OK);
    assert_int_equal(zt_train_config_validate_world(&C, 0, &err), ZT_ERR_USAGE);
}

/* Every support row does what the table says: errors refuse, warnings warn and run. */
static char NOTES[1 << 16];
static void collect(void *ctx, zt_config_level level, const char *text) {
    (void)ctx;
    size_t n = strlen(NOTES);
    snprintf(NOTES + n, sizeof NOTES - n, "%d %s\n", (int)level, text);
}

static void test_support_table(void **state) {
    (void)state;
    static const struct {
        const char *set, *msg;
        zt_config_level level;
    } R[] = {
        {"memory.offload_optimizer=cpu", "memory.offload_optimizer cpu changes nothing on this CPU-only build", ZT_CONFIG_WARNING},
        {"memory.offload_param=cpu", "memory.offload_param cpu changes nothing on this CPU-only build", ZT_CONFIG_WARNING},
        {"checkpoint.save_consolidated=true", "checkpoint.save_consolidated true is not read from the configuration yet", ZT_CONFIG_WARNING},
    };
    zt_error err = {0};
    for (size_t i = 0; i < sizeof R / sizeof R[0]; i++) {
        parse("data: {train: a.bin}\nparallel: {strategy: zero3}\n");
        if (zt_train_config_set(&C, R[i].set, &err)) fail_msg("%s: %s", R[i].set, err.msg);
        int rc = zt_train_config_validate(&C, &err);
        NOTES[0] = '\0';
        zt_train_config_notes(&C, collect, NULL);
        if (R[i].level == ZT_CONFIG_ERROR) {
            if (rc != ZT_ERR_USAGE || !strstr(err.msg, R[i].msg))
                fail_msg("%s: rc %d: %s", R[i].set, rc, err.msg);
            assert_null(strstr(NOTES, R[i].msg)); /* errors are validate's, not notes */
        } else {
            if (rc != ZT_OK) fail_msg("%s: %s", R[i].set, err.msg);
            char want[512];
            snprintf(want, sizeof want, "1 %s", R[i].msg);
            if (!strstr(NOTES, want)) fail_msg("%s: no warning; notes:\n%s", R[i].set, NOTES);
        }
    }
    /* periodic checkpoints: read by the trainer, and they need a directory */
    parse("data: {train: a.bin}\ncheckpoint: {every: 100, dir: ck}\n");
    assert_int_equal(zt_train_config_validate(&C, &err), ZT_OK);
    assert_int_equal(C.ckpt_every, 100);
    static const char no_dir[] = "data: {train: a.bin}\ncheckpoint: {every: 100}\n";
    zt_train_config_default(&C);
    assert_int_equal(zt_train_config_parse(&C, no_dir, strlen(no_dir), "run.yaml", &err), ZT_ERR_USAGE);
    assert_non_null(strstr(err.msg, "run.yaml:2:21: checkpoint.every: 100 needs checkpoint.dir"));
    /* a value that has no effect with the others: a note */
    parse("data: {train: a.bin}\nparallel: {hybrid_shard_size: 2}\n");
    NOTES[0] = '\0';
    zt_train_config_notes(&C, collect, NULL);
    assert_non_null(strstr(NOTES, "0 parallel.hybrid_shard_size 2 has no effect: parallel.strategy is not hybrid"));
    /* all refusals together */
    parse("parallel: {strategy: zero3}\n"); /* data.train missing, and (below) 2 x 3 does not divide seq_len */
    if (zt_train_config_set(&C, "parallel.context_parallel_size=3", &err)) fail_msg("%s", err.msg);
    assert_int_equal(zt_train_config_validate(&C, &err), ZT_ERR_USAGE);
    assert_non_null(strstr(err.msg, "2 problems in the configuration:"));
    /* reduce bf16 is honored with fp32, bf16 and bf16-low, refused with fp16; reduce fp16 the
     * other way round */
    static const char *const modes[] = {"fp32", "bf16", "bf16-low", "fp16"};
    for (int k = 0; k < 4; k++)
        for (int d = 0; d < 2; d++) {
            char y[160];
            snprintf(y, sizeof y, "data: {train: a.bin}\nprecision: {mode: %s, reduce_dtype: %s}\n", modes[k],
                     d ? "fp16" : "bf16");
            zt_train_config_default(&C);
            int rc = zt_train_config_parse(&C, y, strlen(y), "run.yaml", &err);
            if (!rc) rc = zt_train_config_validate(&C, &err);
            bool want_ok = d ? k == 3 : k < 3;
            if (want_ok && rc != ZT_OK) fail_msg("reduce %s with mode %s: %s", d ? "fp16" : "bf16", modes[k], err.msg);
            if (!want_ok && (rc != ZT_ERR_USAGE || !strstr(err.msg, "run.yaml:2:")))
                fail_msg("reduce %s with mode %s: rc %d: %s", d ? "fp16" : "bf16", modes[k], rc, err.msg);
        }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_provenance),  cmocka_unit_test(test_print_roundtrip),
        cmocka_unit_test(test_json),        cmocka_unit_test(test_hash),
        cmocka_unit_test(test_validate_world), cmocka_unit_test(test_support_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
