/* fuzz_config_accelerate.c - libFuzzer target for the Accelerate YAML reader
 * (src/config/dialect_accelerate.c and .def, dialect_common.c): the input as an `accelerate config` file
 * (a deepspeed_config_file it names is looked up on disk and normally missing: an error). Not
 * built by CMake; tests/fuzz/README.md says how. Contracts: fuzz_config_common.h. */
#include "fuzz_config_common.h"

#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static zt_train_config c, before; /* large: off the stack */
    fuzz_read(zt_train_config_parse_accelerate, data, size, "fuzz.yaml", &c, &before);
    return 0;
}
