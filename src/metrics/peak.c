/* peak.c - the machine's nominal fp32 peak, for MFU: threads x clock x FMA units x SIMD lanes x 2.
 * The clock is the highest of cpuinfo_max_freq (sysfs) and "cpu MHz" (/proc/cpuinfo); two FMA
 * units per core is assumed for AVX-512 and AVX2 server cores (Skylake-SP and later, Zen 4/5).
 * ZT_PEAK_GFLOPS overrides it. `zerotrain bench` also measures the achievable GEMM rate. */
#include "metrics/peak.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

double zt_cpu_clock_ghz(void) {
    double ghz = 0;
    FILE *fp = fopen("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq", "r");
    if (fp) {
        long khz = 0;
        if (fscanf(fp, "%ld", &khz) == 1) ghz = (double)khz / 1e6;
        fclose(fp);
    }
    fp = fopen("/proc/cpuinfo", "r");
    if (fp) {
        char line[512];
        while (fgets(line, sizeof line, fp)) {
            double mhz;
            if (strncmp(line, "cpu MHz", 7) == 0 && sscanf(strchr(line, ':') + 1, "%lf", &mhz) == 1 &&
                mhz / 1e3 > ghz)
                ghz = mhz / 1e3;
        }
        fclose(fp);
    }
    return ghz;
}

int zt_cpu_fp32_lanes(void) {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return 16;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return 8;
    return 4;
}

double zt_cpu_fp32_peak_flops(int threads) {
    const char *env = getenv("ZT_PEAK_GFLOPS");
    if (env && atof(env) > 0) return atof(env) * 1e9;
    double ghz = zt_cpu_clock_ghz();
    if (ghz <= 0) return 0;
    return (double)threads * ghz * 1e9 * 2.0 /* FMA units */ * zt_cpu_fp32_lanes() * 2.0 /* mul+add */;
}
