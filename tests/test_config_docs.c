/* test_config_docs.c - docs/config.md is generated from the key, support and dialect tables
 * (`zerotrain config --docs`, src/config/config_print.c): the checked-in file must equal what
 * this build generates, and it must name every native key and every mapped dialect key. The
 * dialect tables (src/config/dialect_*.def) are checked as data: every row reachable, every
 * native key real, every table output a value its native key accepts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "config/config_internal.h"
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

/* One dialect table: each row's columns agree with its kind (config_internal.h). */
static void check_rows(const dialect_row *rows, int n, const char *name) {
    static zt_train_config c;
    char why[512], e[128];
    for (int i = 0; i < n; i++) {
        const dialect_row *r = &rows[i];
        const char *p = r->path, *dot = strrchr(p, '.');
        for (int j = 0; j < i; j++)
            if (!strcmp(rows[j].path, p)) fail_msg("%s: %s: two rows", name, p);
        if (dot) { /* the parent is a row whose kind walks its keys */
            int parent = -1;
            for (int j = 0; j < n; j++)
                if (strlen(rows[j].path) == (size_t)(dot - p) && !strncmp(rows[j].path, p, (size_t)(dot - p)))
                    parent = j;
            if (parent < 0) fail_msg("%s: %s: no row for its parent", name, p);
            row_kind k = rows[parent].kind;
            if (k != RK_WALK && k != RK_LATER && k != RK_TYPED)
                fail_msg("%s: %s: its parent's kind does not walk its keys", name, p);
        }
        if (!r->doc && r->kind != RK_WALK && r->kind != RK_ALIAS) fail_msg("%s: %s: no doc", name, p);
        if ((r->kind == RK_MAP || r->kind == RK_MAP_NOTE) && (!r->native || zt_cfg_key_index(r->native) < 0))
            fail_msg("%s: %s: maps to no native key", name, p);
        if (r->kind == RK_LATER && r->native && zt_cfg_key_index(r->native) < 0)
            fail_msg("%s: %s: names an unknown native key %s", name, p, r->native);
        if (r->kind == RK_ALIAS) {
            int to = -1;
            for (int j = 0; j < n; j++)
                if (r->native && !strcmp(rows[j].path, r->native)) to = j;
            if (to < 0 || rows[to].kind == RK_ALIAS) fail_msg("%s: %s: an alias of no row", name, p);
        }
        if ((r->kind == RK_TYPED || r->xf == XF_TABLE) && !r->arg) fail_msg("%s: %s: no arg", name, p);
        if (r->xf != XF_SAME && r->kind != RK_MAP && r->kind != RK_MAP_NOTE)
            fail_msg("%s: %s: a transform on a row that maps nothing", name, p);
        if (r->kind >= RK_BLOCK_NOTE && !(r->accept & A_MAP)) fail_msg("%s: %s: a block that takes no mapping", name, p);
        if (r->xf != XF_TABLE) continue;
        /* every output of the table is a value of the native key */
        const key_def *k = &zt_cfg_keys[zt_cfg_key_index(r->native)];
        const char *t = r->arg;
        while (t && *t) {
            const char *end = strchr(t, ',');
            snprintf(e, sizeof e, "%.*s", (int)(end ? end - t : (long)strlen(t)), t);
            t = end ? end + 1 : NULL;
            const char *out = strchr(e, '=');
            if (!out || !out[1]) continue;
            zt_train_config_default(&c);
            if (zt_cfg_parse_value(&c, k, out + 1, strlen(out + 1), false, why, sizeof why) != 0)
                fail_msg("%s: %s: table output %s is not a %s value: %s", name, p, out + 1, r->native, why);
        }
    }
}

static void test_dialect_rows(void **state) {
    (void)state;
    int n;
    const dialect_row *rows = zt_cfg_deepspeed_rows(&n);
    assert_true(n > 150);
    check_rows(rows, n, "deepspeed");
    rows = zt_cfg_accelerate_rows(&n);
    assert_true(n > 80);
    check_rows(rows, n, "accelerate");
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
                                       cmocka_unit_test(test_docs_complete),
                                       cmocka_unit_test(test_dialect_rows)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
