/* cpu_isa.h - what this CPU can run, read with cpuid and xgetbv, and the instruction-set levels
 * zerotrain's kernels are compiled for (one build runs everywhere: src/kernels/dispatch.c picks the
 * level at run time, as oneDNN and OpenBLAS do).
 *
 * The levels, lowest first; each includes the one before it:
 *   avx2        AVX2 + FMA + F16C (+ BMI1/2, LZCNT, MOVBE: x86-64-v3), the floor: the library
 *               outside the kernels is compiled for it (Intel Haswell 2013-, AMD Zen 1-3)
 *   avx512      + AVX-512 F/BW/DQ/VL/CD (x86-64-v4: Intel Skylake-X, Cascade/Ice Lake, Zen 4-)
 *   avx512_bf16 + AVX512_BF16 (vdpbf16ps: Cooper Lake, Sapphire Rapids-, Zen 4-)
 *   amx         + AMX-TILE/AMX-BF16 (Sapphire Rapids-): the kernels run avx512_bf16's code, the
 *               bf16 matrix products oneDNN's AMX kernels
 * A feature counts only where the OS saves its registers (XCR0: YMM for AVX2, ZMM/opmask for
 * AVX-512, the tile state for AMX).
 *
 * ZT_ISA (environment) = auto | avx2 | avx512 | avx512_bf16 | amx asks for a level: at most the
 * best this CPU has (masking features down, to run a lower path on a larger CPU); asking for more
 * is an error naming the missing features, never an illegal instruction. */
#ifndef ZT_CORE_CPU_ISA_H
#define ZT_CORE_CPU_ISA_H

#include <stdbool.h>

#include "zerotrain/zerotrain.h"

typedef enum zt_isa {
    ZT_ISA_NONE = -1, /* below the floor: not even AVX2 + FMA */
    ZT_ISA_AVX2 = 0,
    ZT_ISA_AVX512 = 1,
    ZT_ISA_AVX512_BF16 = 2,
    ZT_ISA_AMX = 3,
    ZT_ISA_LEVELS = 4
} zt_isa;

typedef struct zt_cpu_features {
    char vendor[13];  /* "GenuineIntel", "AuthenticAMD", ... ("" off x86) */
    char brand[49];   /* the processor brand string (printable ASCII, no quote or backslash) */
    int family, model; /* display family and model (the extended fields added as Intel/AMD say) */
    bool sse42, avx, avx2, fma, f16c, bmi1, bmi2, lzcnt, movbe;
    bool avx512f, avx512bw, avx512dq, avx512vl, avx512cd, avx512_bf16, avx512_fp16;
    bool amx_tile, amx_bf16;
    bool os_ymm, os_zmm, os_tiles; /* XCR0: the OS saves these registers */
} zt_cpu_features;

/* This CPU, read once and cached (thread-safe). ZT_CPU_FAKE=avx2|avx512|avx512_bf16|amx|none
 * (tests only) pretends the CPU has exactly that level's features. */
const zt_cpu_features *zt_cpu_features_get(void);

/* The best level f supports; ZT_ISA_NONE below the floor. */
zt_isa zt_isa_best(const zt_cpu_features *f);
/* "avx2", "avx512", "avx512_bf16", "amx"; "none" for ZT_ISA_NONE */
const char *zt_isa_name(zt_isa isa);
/* The x86-64 micro-architecture level a path's code is compiled for ("x86-64-v3", "x86-64-v4") */
const char *zt_isa_arch(zt_isa isa);

/* name: a level's name or "auto" (= the best; *out = ZT_ISA_NONE when the CPU is below the floor).
 * `what` names where the text came from ("ZT_ISA"). ZT_ERR_USAGE lists the names on a miss. */
int zt_isa_parse(const char *name, const char *what, zt_isa *out, zt_error *err);

/* ZT_OK when f has every feature `isa` needs; else ZT_ERR_USAGE naming the level, the missing
 * features and the CPU. */
int zt_isa_check(zt_isa isa, const zt_cpu_features *f, zt_error *err);

/* The features f has, space-separated, among those the levels use ("avx2 fma f16c avx512f ...") */
void zt_cpu_features_describe(const zt_cpu_features *f, char *buf, int size);
/* One line: "AMD EPYC 9B14 (AuthenticAMD family 25 model 17; avx2 fma ... avx512_bf16)" */
void zt_cpu_describe(const zt_cpu_features *f, char *buf, int size);

#endif
