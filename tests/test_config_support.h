/* test_config_support.h - what the dialect tests (test_config_deepspeed.c, test_config_accelerate.c)
 * share: the configuration under test C, parsing a text in the file's dialect (ok: must parse;
 * bad: must fail naming `want`, changing nothing), a key's source, the notes joined for substring
 * checks, and files in a temporary directory for includes. A test file defines TEST_DIALECT_PARSE
 * (a zt_train_config_parse_* function) and TEST_DIALECT_FILE (the name messages cite) first.
 * Header-only: each test is one file. */
#ifndef ZT_TEST_CONFIG_SUPPORT_H
#define ZT_TEST_CONFIG_SUPPORT_H

#include <stdio.h>
#include <string.h>

#include "config/train_config.h"

static zt_train_config C; /* large: off the stack */

static int parse(const char *text, zt_error *err) {
    zt_train_config_default(&C);
    return TEST_DIALECT_PARSE(&C, text, strlen(text), TEST_DIALECT_FILE, err);
}

static void ok(const char *text) {
    zt_error err = {0};
    if (parse(text, &err) != ZT_OK) fail_msg("unexpected error: %s\n--- text ---\n%s", err.msg, text);
}

static void bad(const char *text, const char *want) {
    zt_error err = {0};
    zt_train_config_default(&C);
    C.steps = 4242;
    zt_train_config before = C;
    int rc = TEST_DIALECT_PARSE(&C, text, strlen(text), TEST_DIALECT_FILE, &err);
    if (rc != ZT_ERR_USAGE || !strstr(err.msg, want))
        fail_msg("rc %d, message\n  %s\nexpected to contain\n  %s\n--- text ---\n%s", rc, err.msg, want, text);
    assert_memory_equal(&C, &before, sizeof C); /* a failure changes nothing */
}

static int key(const char *name) {
    for (int i = 0; i < zt_config_key_count(); i++)
        if (!strcmp(zt_config_key_name(i), name)) return i;
    fail_msg("no key %s", name);
    return -1;
}

static const zt_config_source *src(const char *name) { return zt_config_key_source(&C, key(name)); }

/* Notes and warnings, joined, for substring checks. */
static char NOTES[1 << 16];
static void collect(void *ctx, zt_config_level level, const char *text) {
    (void)ctx;
    size_t n = strlen(NOTES);
    snprintf(NOTES + n, sizeof NOTES - n, "%s: %s\n", level == ZT_CONFIG_WARNING ? "warning" : "note", text);
}
static const char *notes(void) {
    NOTES[0] = '\0';
    zt_train_config_notes(&C, collect, NULL);
    return NOTES;
}
static void has_note(const char *want) {
    if (!strstr(notes(), want)) fail_msg("no note containing\n  %s\nnotes:\n%s", want, NOTES);
}

/* Files for include tests, in DIR (the test makes it with mkdtemp). */
static char DIR[64];
static void put(const char *name, const char *text) {
    char path[256];
    snprintf(path, sizeof path, "%s/%s", DIR, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static int load(const char *name, zt_error *err) {
    char path[256];
    snprintf(path, sizeof path, "%s/%s", DIR, name);
    zt_train_config_default(&C);
    return zt_train_config_load(&C, path, err);
}

#endif
