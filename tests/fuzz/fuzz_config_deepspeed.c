/* fuzz_config_deepspeed.c - libFuzzer target for the DeepSpeed JSON reader
 * (src/config/dialect_deepspeed.c, dialect_common.c): the input as a ds_config.json. Not built by
 * CMake; tests/fuzz/README.md says how. Contracts: fuzz_config_common.h. */
#include "fuzz_config_common.h"

#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static zt_train_config c, before; /* large: off the stack */
    zt_error err;
    zt_train_config_default(&c);
    before = c;
    memset(&err, 0, sizeof err);
    int rc = zt_train_config_parse_deepspeed(&c, (const char *)data, size, "fuzz.json", &err);
    if (rc == ZT_OK)
        fuzz_check_success(&c);
    else
        fuzz_check_failure(rc, &err, &c, &before);
    return 0;
}
