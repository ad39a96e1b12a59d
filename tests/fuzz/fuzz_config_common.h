/* fuzz_config_common.h - the contracts every configuration fuzz target checks (included by the
 * fuzz_config_*.c harnesses; not built by CMake): a failure is ZT_ERR_USAGE or ZT_ERR_NOMEM with a
 * non-empty message and leaves the configuration as it was; a success prints as native YAML that
 * reads back to the same values (and hash), survives the world-size checks for 1-8 ranks, the
 * notes callback, every output format, and validation without crashing. Any breach traps. */
#ifndef ZT_FUZZ_CONFIG_COMMON_H
#define ZT_FUZZ_CONFIG_COMMON_H

#include "config/train_config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void fuzz_check_failure(int rc, const zt_error *err, const zt_train_config *c,
                               const zt_train_config *before) {
    if (rc != ZT_ERR_USAGE && rc != ZT_ERR_NOMEM) __builtin_trap();
    if (err->code != rc || !memchr(err->msg, '\0', sizeof err->msg) || !err->msg[0]) __builtin_trap();
    if (memcmp(c, before, sizeof *c) != 0) __builtin_trap();
}

static size_t fuzz_note_bytes;
static void fuzz_note(void *ctx, zt_config_level level, const char *text) {
    (void)ctx;
    if (level > ZT_CONFIG_ERROR || !text) __builtin_trap();
    fuzz_note_bytes += strlen(text);
}

/* The checks on a configuration that loaded. */
static void fuzz_check_success(zt_train_config *c) {
    static zt_train_config back, w;
    zt_error err;
    /* --print reads back to the same values */
    char *yaml = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&yaml, &len);
    if (!m) return;
    if (zt_train_config_write(c, ZT_CONFIG_YAML, m, &err) != ZT_OK) __builtin_trap();
    fclose(m);
    zt_train_config_default(&back);
    memset(&err, 0, sizeof err);
    int rc = zt_train_config_parse(&back, yaml, len, "printed.yaml", &err);
    if (rc == ZT_ERR_NOMEM) {
        free(yaml);
        return;
    }
    if (rc != ZT_OK || !zt_train_config_equal(c, &back) ||
        zt_train_config_hash(c) != zt_train_config_hash(&back))
        __builtin_trap();
    free(yaml);
    /* the other formats and the notes */
    FILE *null = fopen("/dev/null", "w");
    if (null) {
        if (zt_train_config_write(c, ZT_CONFIG_JSON, null, &err) == ZT_ERR_USAGE) __builtin_trap();
        if (zt_train_config_write(c, ZT_CONFIG_TABLE, null, &err) == ZT_ERR_USAGE) __builtin_trap();
        fclose(null);
    }
    zt_train_config_notes(c, fuzz_note, NULL);
    /* the world-size checks change only derived keys, and fail cleanly */
    for (int world = 1; world <= 8; world++) {
        w = *c;
        rc = zt_train_config_validate_world(&w, world, &err);
        if (rc != ZT_OK) {
            fuzz_check_failure(rc, &err, &w, c);
        } else {
            if (w.global_batch > 0 && (int64_t)w.micro_batch * w.grad_accum * world != w.global_batch)
                __builtin_trap();
            rc = zt_train_config_validate(&w, &err);
            if (rc != ZT_OK && rc != ZT_ERR_USAGE && rc != ZT_ERR_NOMEM) __builtin_trap();
        }
    }
}

/* One input through a reader (zt_train_config_parse, _deepspeed or _accelerate) with the contracts
 * above. c and before are the caller's (static: large); c holds the result. */
typedef int (*fuzz_reader)(zt_train_config *c, const char *text, size_t size, const char *name, zt_error *err);
static void fuzz_read(fuzz_reader read, const uint8_t *data, size_t size, const char *name, zt_train_config *c,
                      zt_train_config *before) {
    zt_error err;
    zt_train_config_default(c);
    *before = *c;
    memset(&err, 0, sizeof err);
    int rc = read(c, (const char *)data, size, name, &err);
    if (rc == ZT_OK)
        fuzz_check_success(c);
    else
        fuzz_check_failure(rc, &err, c, before);
}

#endif
