/* fuzz_config_accelerate.c - libFuzzer target for the Accelerate YAML reader
 * (src/config/dialect_accelerate.c, dialect_common.c): the input as an `accelerate config` file
 * (a deepspeed_config_file it names is looked up on disk and normally missing: an error). Not
 * built by CMake; tests/fuzz/README.md says how. Contracts: fuzz_config_common.h. */
#include "fuzz_config_common.h"

#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static zt_train_config c, before; /* large: off the stack */
    zt_error err;
    zt_train_config_default(&c);
    before = c;
    memset(&err, 0, sizeof err);
    int rc = zt_train_config_parse_accelerate(&c, (const char *)data, size, "fuzz.yaml", &err);
    if (rc == ZT_OK)
        fuzz_check_success(&c);
    else
        fuzz_check_failure(rc, &err, &c, &before);
    return 0;
}
