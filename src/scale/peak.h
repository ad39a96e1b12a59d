/* peak.h - the peak FLOP/s of this CPU that MFU divides by: one core's FMA (and bf16 dot-product)
 * rate measured by fma_peak.c and cached per CPU model, times the cores in use, in the precision
 * the products run in. The nominal table (the CPU's flags x the clock /proc/cpuinfo reports) is
 * kept beside it for `bench --peak` and as the fallback where nothing can be measured. */
#ifndef ZT_PEAK_H
#define ZT_PEAK_H

#include <stdbool.h>

typedef struct zt_cpu_peak {
    char vendor[16];        /* "GenuineIntel", "AuthenticAMD", "" when unknown */
    char model_name[96];    /* /proc/cpuinfo "model name" */
    int family, model;      /* cpuinfo "cpu family", "model" */
    double clock_ghz;       /* the clock the peak uses: max(cpuinfo_max_freq, "cpu MHz"); 0 unknown */
    int online_cores;       /* logical CPUs online */
    int threads_per_core;   /* SMT siblings per core (1 when unknown) */
    double fp32_per_cycle;  /* fp32 FLOPs per cycle per core (FMA = 2 FLOPs) */
    double bf16_per_cycle;  /* bf16-input FLOPs per cycle per core with the best bf16 instruction;
                               0 when the CPU has none (bf16 then runs at the fp32 rate) */
    char fp32_isa[64];      /* how fp32_per_cycle was derived, e.g. "avx512f 2x16 lanes x FMA" */
    char bf16_isa[64];      /* "amx_bf16 tile 1024/cycle", "avx512_bf16 2x vdpbf16ps", "none" */
    double override_gflops; /* ZT_PEAK_GFLOPS (per rank) when set, else 0 */
    /* zt_cpu_peak_measure: one core's measured rates in FLOP/s (0: not measured; bf16 0 also
     * when the CPU has no bf16 instruction) and where they came from */
    double measured_fp32, measured_bf16;
    char measured_from[560]; /* "measured now", "cache FILE", "" */
} zt_cpu_peak;

/* Fills p from /proc/cpuinfo, sysfs and ZT_PEAK_GFLOPS. Cannot fail: unknown fields are 0 / "". */
void zt_cpu_peak_detect(zt_cpu_peak *p);
/* Adds the measured per-core rates to p: read from the cache file when it holds this CPU's line
 * (model name, family, model, ISA), else measured (fma_peak.c, ~0.25 s) and written there
 * atomically. The cache is $ZT_CACHE_DIR, else $XDG_CACHE_HOME/zerotrain, else ~/.cache/zerotrain,
 * file peak-v2 (v1's avx2 rates came from a loop that spilled its accumulators and are not
 * read); ZT_PEAK_CACHE=0 measures every time. A cache that cannot be written is not an
 * error (the rate is simply measured again next time). */
void zt_cpu_peak_measure(zt_cpu_peak *p);
/* One core's rates, measured on the calling thread: zt_measure_core_fp32_flops and
 * zt_measure_core_bf16_flops (kernels/kernels.h, src/kernels/fma_peak.c), on the kernels' path. */
/* FLOP/s of `cores` cores (may be fractional: a share of the machine) in fp32 or bf16: cores x
 * the measured per-core rate when zt_cpu_peak_measure ran, else cores x clock x per-cycle rate;
 * bf16 without a bf16 instruction gives the fp32 rate. With ZT_PEAK_GFLOPS set, that value per
 * rank times `ranks` instead (the caller's world size). 0 when nothing is known. */
double zt_cpu_peak_flops(const zt_cpu_peak *p, double cores, int ranks, bool bf16);
/* Cores one rank really has: min(threads, physical cores on this node / ranks on this node),
 * where ranks on this node come from the launcher (comm/launcher.h: OMPI_COMM_WORLD_LOCAL_SIZE,
 * MPI_LOCALNRANKS, SLURM_STEP_TASKS_PER_NODE, ...; 1 when none is set). Oversubscribed ranks get a fraction. */
double zt_cores_per_rank(int threads);

/* "measured fp32 FMA peak", "measured bf16 dot-product peak", "nominal fp32 peak (clock x table)",
 * "ZT_PEAK_GFLOPS": what zt_cpu_peak_flops(p, .., bf16) used, for reports. */
const char *zt_cpu_peak_source(const zt_cpu_peak *p, bool bf16);

/* "cpu BRAND (VENDOR family F model M; FEATURES) | isa LEVEL (...) | gemm fp32 PATH, bf16 PATH": the
 * CPU, the kernels' instruction-set level and the GEMM paths in use (the banner, `zerotrain
 * bench`); JSON-safe (no quote or backslash) */
void zt_platform_describe(char *buf, int size);
/* The same as JSON fields (no braces): "cpu":"...","isa":"LEVEL","isa_path":"...","gemm_fp32":"...",
 * "gemm_bf16":"..." (the JSONL's cpu event, `zerotrain bench`'s JSON line) */
void zt_platform_json(char *buf, int size);

double zt_cpu_clock_ghz(void);              /* 0 when unknown */
int zt_cpu_fp32_lanes(void);                /* 16 with AVX-512, 8 with AVX2+FMA, else 4 */

#endif
