/* fuzz_train_config.c - libFuzzer target for src/config/train_config.c: the input as a YAML config,
 * then each of its lines as a --set assignment. Not built by CMake; tests/fuzz/README.md says how.
 *
 * Beyond "no crash, no sanitizer report", it traps when a contract breaks:
 *   - a config that parses also validates (parse runs the same checks);
 *   - a failure is ZT_ERR_USAGE (or ZT_ERR_NOMEM), has a NUL-terminated, non-empty message, and
 *     leaves the configuration exactly as it was. */
#include "config/train_config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void check_failure(int rc, const zt_error *err, const zt_train_config *c,
                          const zt_train_config *before) {
    if (rc != ZT_ERR_USAGE && rc != ZT_ERR_NOMEM) __builtin_trap();
    if (err->code != rc || !memchr(err->msg, '\0', sizeof err->msg) || !err->msg[0])
        __builtin_trap();
    if (memcmp(c, before, sizeof *c) != 0) __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static zt_train_config c, before; /* large: off the stack */
    zt_error err;
    zt_train_config_default(&c);
    before = c;
    memset(&err, 0, sizeof err);
    int rc = zt_train_config_parse(&c, (const char *)data, size, "fuzz.yaml", &err);
    if (rc == ZT_OK) {
        if (zt_train_config_validate(&c, &err) != ZT_OK) __builtin_trap();
    } else {
        check_failure(rc, &err, &c, &before);
    }

    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        before = c;
        memset(&err, 0, sizeof err);
        rc = zt_train_config_set(&c, line, &err);
        if (rc != ZT_OK) check_failure(rc, &err, &c, &before);
    }
    (void)zt_train_config_validate(&c, &err);
    free(text);
    return 0;
}
