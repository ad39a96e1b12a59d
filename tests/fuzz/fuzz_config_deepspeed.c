/* fuzz_config_deepspeed.c - libFuzzer target for the DeepSpeed JSON reader
 * (src/config/dialect_deepspeed.c and .def, dialect_common.c): the input as a ds_config.json.
 * Not built by CMake; tests/fuzz/README.md says how. Contracts: fuzz_config_common.h. */
#include "fuzz_config_common.h"

#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static zt_train_config c, before; /* large: off the stack */
    fuzz_read(zt_train_config_parse_deepspeed, data, size, "fuzz.json", &c, &before);
    return 0;
}
