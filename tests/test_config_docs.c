/* test_config_docs.c - docs/config.md is generated from the key, support and dialect tables
 * (`zerotrain config --docs`, src/config/config_print.c): the checked-in file must equal what
 * this build generates, and it must name every native key and every mapped dialect key. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "config/train_config.h"

static char *generated(void) {
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    assert_non_null(m);
    zt_error err = {0};
    assert_int_equal(zt_config_write_docs(m, &err), ZT_OK);
    fclose(m);
    return buf;
}

static char *checked_in(const char *root) {
    char path[1024];
    snprintf(path, sizeof path, "%s/docs/config.md", root);
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("%s: missing; generate it with `build/zerotrain config --docs > docs/config.md`", path);
    static char doc[1 << 18];
    size_t n = fread(doc, 1, sizeof doc - 1, f);
    fclose(f);
    doc[n] = '\0';
    return doc;
}

static void test_docs_current(void **state) {
    (void)state;
    const char *root = getenv("ZT_SOURCE_DIR");
    if (!root) skip();
    char *want = generated(), *have = checked_in(root);
    if (strcmp(want, have) != 0) {
        /* the first line that differs */
        int line = 1;
        const char *a = want, *b = have;
        while (*a && *a == *b) {
            if (*a == '\n') line++;
            a++;
            b++;
        }
        const char *ea = strchr(a, '\n'), *eb = strchr(b, '\n');
        fail_msg("docs/config.md is out of date at line %d:\n  generated: %.*s\n  checked in: %.*s\n"
                 "regenerate it: build/zerotrain config --docs > docs/config.md",
                 line, (int)(ea ? ea - a : 80), a, (int)(eb ? eb - b : 80), b);
    }
    free(want);
}

static void test_docs_complete(void **state) {
    (void)state;
    char *doc = generated();
    char row[160];
    for (int i = 0; i < zt_config_key_count(); i++) {
        snprintf(row, sizeof row, "| `%s` |", zt_config_key_name(i));
        if (!strstr(doc, row)) fail_msg("no row for %s", zt_config_key_name(i));
    }
    static const char *const mapped[] = {
        "| `train_batch_size` |", "| `zero_optimization.stage` |", "| `zero_optimization.mics_shard_size` |",
        "| `zero_optimization.zero_hpz_partition_size` |", "| `zero_optimization.offload_param.device` |",
        "| `bf16.enabled` |", "| `fp16.initial_scale_power` |", "| `optimizer.params.betas` |",
        "| `scheduler.type` |", "| `activation_checkpointing.cpu_checkpointing` |", "| `comms_logger.enabled` |",
        "| `distributed_type` |", "| `fsdp_config.fsdp_sharding_strategy` |",
        "| `fsdp_config.fsdp_reshard_after_forward` |", "| `deepspeed_config.zero_stage` |",
        "| `deepspeed_config.deepspeed_config_file` |",
        "| `parallelism_config.parallelism_config_dp_replicate_size` |", "| `mixed_precision` |",
        "| `communication_data_type` |"};
    for (size_t i = 0; i < sizeof mapped / sizeof mapped[0]; i++)
        if (!strstr(doc, mapped[i])) fail_msg("docs/config.md lacks %s", mapped[i]);
    free(doc);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_docs_current),
                                       cmocka_unit_test(test_docs_complete)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
