/* fuzz_train_config.c - libFuzzer target for src/config/train_config.c: the input as a YAML config,
 * then each of its lines as a --set assignment. Not built by CMake; tests/fuzz/README.md says how.
 *
 * Beyond "no crash, no sanitizer report", it traps when a contract breaks
 * (fuzz_config_common.h): a config that parses prints as YAML that reads back to the same values
 * and survives the launch checks; a failure is ZT_ERR_USAGE (or ZT_ERR_NOMEM), has a
 * NUL-terminated, non-empty message, and leaves the configuration exactly as it was. (An include
 * names a file on disk, normally missing in the fuzzer: an error.) */
#include "fuzz_config_common.h"

#include <stdint.h>

#define check_failure fuzz_check_failure

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static zt_train_config c, before; /* large: off the stack */
    fuzz_read(zt_train_config_parse, data, size, "fuzz.yaml", &c, &before);
    zt_error err;
    int rc;

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
