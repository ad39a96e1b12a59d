/* cpu_floor.c - the CLI's first check, before any code compiled for x86-64-v3 runs: a CPU without
 * AVX2 + FMA (the floor the library is compiled for, core/cpu_isa.h) gets a message naming what it
 * lacks and exit 2, not an illegal instruction. Compiled for plain x86-64 (CMakeLists.txt). */
#include "core/cpu_isa.h"

#include <stdio.h>
#include <unistd.h>

__attribute__((constructor(101))) static void cpu_floor_check(void)
{
    const zt_cpu_features *f = zt_cpu_features_get();
    zt_error err = {0};
    if (zt_isa_best(f) != ZT_ISA_NONE || zt_isa_check(ZT_ISA_AVX2, f, &err) == ZT_OK) return;
    fprintf(stderr, "zerotrain: %s\n", err.msg);
    _exit(ZT_ERR_USAGE);
}
