/* peak.h - the nominal peak FLOP/s of this CPU for MFU: a table from the CPU's flags (fp32 FMA
 * width and units, bf16 through AVX512_BF16 or AMX-BF16) times the clock and the cores in use
 * (see peak.c for the per-cycle rates and where they come from). */
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
} zt_cpu_peak;

/* Fills p from /proc/cpuinfo, sysfs and ZT_PEAK_GFLOPS. Cannot fail: unknown fields are 0 / "". */
void zt_cpu_peak_detect(zt_cpu_peak *p);
/* FLOP/s of `cores` cores (may be fractional: a share of the machine) in fp32 or bf16:
 * cores x clock x per-cycle rate; bf16 without a bf16 instruction gives the fp32 rate. With
 * ZT_PEAK_GFLOPS set, that value per rank times `ranks` instead (the caller's world size).
 * 0 when the clock is unknown and there is no override. */
double zt_cpu_peak_flops(const zt_cpu_peak *p, double cores, int ranks, bool bf16);
/* Cores one rank really has: min(threads, physical cores on this node / ranks on this node),
 * where ranks on this node come from OMPI_COMM_WORLD_LOCAL_SIZE / MPI_LOCALNRANKS /
 * SLURM_NTASKS_PER_NODE (1 when none is set). Oversubscribed ranks get a fraction. */
double zt_cores_per_rank(int threads);

/* Older interface, kept for callers: */
double zt_cpu_clock_ghz(void);              /* 0 when unknown */
int zt_cpu_fp32_lanes(void);                /* 16 with AVX-512, 8 with AVX2+FMA, else 4 */
/* threads x fp32 peak per core (ZT_PEAK_GFLOPS overrides it as is); 0 when unknown. */
double zt_cpu_fp32_peak_flops(int threads);

#endif
