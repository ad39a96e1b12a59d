/* peak.c - the machine's peak, for MFU: cores in use x one core's measured FMA rate (fma_peak.c),
 * cached per CPU model; and the nominal table below, cores x clock x FLOPs per cycle per core,
 * printed beside it and used only where nothing could be measured.
 *
 * FLOPs per cycle per core (an FMA counts 2), by the kernels' instruction-set level (core/cpu_isa.h:
 * the CPU's best, or lower under ZT_ISA):
 *   fp32  avx512, Intel and AMD family >= 0x1A (Zen 5): 2 FMA units x 16 lanes x 2 = 64
 *         avx512, AMD family 0x19 (Zen 4: 512-bit ops issue as two 256-bit halves)  = 32
 *         avx2: 2 FMA units x 8 lanes x 2                                   = 32
 *         otherwise (a portable build off x86-64: 4 lanes assumed)                 = 16
 *   bf16  amx (Sapphire Rapids and later): TDPBF16PS, 16x16x32 MACs every 16 cycles = 1024
 *         avx512_bf16: VDPBF16PS, 32 bf16 products into 16 fp32 per instruction, as many per
 *         cycle as fp32 FMAs: 2 x the fp32 rate
 *         neither: 0 (bf16 math converts to fp32 and runs at the fp32 rate)
 * Vendors' published per-core rates (Intel optimization manual, AMD software optimization guides
 * for families 19h and 1Ah); parts with one AVX-512 FMA unit (some Xeon Bronze/Silver) or a
 * 256-bit Zen 5 datapath (mobile) are overestimated 2x: set ZT_PEAK_GFLOPS there.
 * The clock is the highest of cpuinfo_max_freq (sysfs) and "cpu MHz" (/proc/cpuinfo). On a VM that
 * is often the base clock (2.6 GHz on a Zen 4 that runs at ~3.5), which is why the nominal peak is
 * not what MFU divides by: it put fp32 MFU above 100%.
 * ZT_PEAK_GFLOPS (GFLOP/s of one rank) overrides the whole table. `zerotrain bench --peak`
 * measures the achievable GEMM rate beside it (zt_measure_sgemm_gflops in mfu.c). */
#include "scale/peak.h"
#include "core/atomic_file.h"
#include "core/cpu_isa.h"
#include "core/env.h"
#include "kernels/gemm.h"
#include "kernels/kernels.h"
#include "comm/launcher.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
    int lvl = zt_kernels_isa(); /* the kernels' level, not every flag the CPU has */
    return lvl >= ZT_ISA_AVX512 ? 16 : lvl == ZT_ISA_AVX2 ? 8 : 4;
}

static void value_of(const char *line, char *out, size_t cap) {
    const char *v = strchr(line, ':');
    v = v ? v + 1 : line;
    while (*v == ' ' || *v == '\t') v++;
    snprintf(out, cap, "%s", v);
    out[strcspn(out, "\n")] = '\0';
}

void zt_cpu_peak_detect(zt_cpu_peak *p) {
    memset(p, 0, sizeof *p);
    p->threads_per_core = 1;
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    p->online_cores = online > 0 ? (int)online : 1;
    int siblings = 0, cpu_cores = 0;
    FILE *fp = fopen("/proc/cpuinfo", "r");
    if (fp) {
        char *line = NULL;
        size_t cap = 0;
        while (getline(&line, &cap, fp) > 0) {
            char v[128];
            if (!strncmp(line, "vendor_id", 9) && !p->vendor[0]) value_of(line, p->vendor, sizeof p->vendor);
            else if (!strncmp(line, "model name", 10) && !p->model_name[0])
                value_of(line, p->model_name, sizeof p->model_name);
            else if (!strncmp(line, "cpu family", 10) && !p->family) value_of(line, v, sizeof v), p->family = atoi(v);
            else if (!strncmp(line, "model\t", 6) && !p->model) value_of(line, v, sizeof v), p->model = atoi(v);
            else if (!strncmp(line, "siblings", 8) && !siblings) value_of(line, v, sizeof v), siblings = atoi(v);
            else if (!strncmp(line, "cpu cores", 9) && !cpu_cores) value_of(line, v, sizeof v), cpu_cores = atoi(v);
        }
        free(line);
        fclose(fp);
    }
    if (siblings > 0 && cpu_cores > 0 && siblings >= cpu_cores) p->threads_per_core = siblings / cpu_cores;
    p->clock_ghz = zt_cpu_clock_ghz();
    /* the rates of the kernels' level (ZT_ISA may hold it below the CPU's best: kernels/dispatch.c),
     * not of every flag the CPU has */
    int lvl = zt_kernels_isa();
    bool amd = !strcmp(p->vendor, "AuthenticAMD");
    if (lvl >= ZT_ISA_AVX512) {
        if (amd && p->family == 0x19) {
            p->fp32_per_cycle = 32;
            snprintf(p->fp32_isa, sizeof p->fp32_isa, "avx512f on 2x256-bit FMA (Zen 4)");
        } else {
            p->fp32_per_cycle = 64;
            snprintf(p->fp32_isa, sizeof p->fp32_isa, "avx512f 2 FMA units x 16 lanes");
        }
    } else if (lvl == ZT_ISA_AVX2) {
        p->fp32_per_cycle = 32;
        snprintf(p->fp32_isa, sizeof p->fp32_isa, "avx2+fma 2 FMA units x 8 lanes");
    } else {
        p->fp32_per_cycle = 2.0 * 2.0 * zt_cpu_fp32_lanes();
        snprintf(p->fp32_isa, sizeof p->fp32_isa, "%d lanes x 2 FMA units (portable build)", zt_cpu_fp32_lanes());
    }
    if (lvl >= ZT_ISA_AMX) {
        p->bf16_per_cycle = 1024;
        snprintf(p->bf16_isa, sizeof p->bf16_isa, "amx_bf16 tdpbf16ps 1024/cycle");
    } else if (lvl >= ZT_ISA_AVX512_BF16) {
        p->bf16_per_cycle = 2 * p->fp32_per_cycle;
        snprintf(p->bf16_isa, sizeof p->bf16_isa, "avx512_bf16 vdpbf16ps (2x fp32)");
    } else {
        snprintf(p->bf16_isa, sizeof p->bf16_isa, "none (fp32 rate: bf16 products widened to fp32)");
    }
    const char *env = zt_env(ZT_ENV_PEAK_GFLOPS);
    if (env && atof(env) > 0) p->override_gflops = atof(env);
}

/* The cache line's key: what makes two machines' cores the same for this measurement. */
static void cache_key(const zt_cpu_peak *p, char *out, size_t cap) {
    snprintf(out, cap, "%s|%d|%d|%s|%s", p->model_name, p->family, p->model, p->fp32_isa, p->bf16_isa);
    for (char *c = out; *c; c++)
        if (*c == '\t' || *c == '\n') *c = ' ';
}

static bool cache_path(char *out, size_t cap) {
    const char *dir = zt_env(ZT_ENV_CACHE_DIR), *xdg = zt_env(ZT_ENV_XDG_CACHE_HOME), *home = zt_env(ZT_ENV_HOME);
    int n;
    if (dir && *dir) n = snprintf(out, cap, "%s/peak-v2", dir);
    else if (xdg && *xdg) n = snprintf(out, cap, "%s/zerotrain/peak-v2", xdg);
    else if (home && *home) n = snprintf(out, cap, "%s/.cache/zerotrain/peak-v2", home);
    else return false;
    return n > 0 && (size_t)n < cap;
}

/* mkdir -p of path's directory; failures surface when the file is written. */
static void make_parent(const char *path) {
    char d[512];
    snprintf(d, sizeof d, "%s", path);
    for (char *s = d + 1; *s; s++)
        if (*s == '/') {
            *s = '\0';
            mkdir(d, 0755);
            *s = '/';
        }
}

void zt_cpu_peak_measure(zt_cpu_peak *p) {
    char key[512], path[512], line[1024];
    cache_key(p, key, sizeof key);
    const char *off = zt_env(ZT_ENV_PEAK_CACHE);
    bool use_cache = !(off && !strcmp(off, "0")) && cache_path(path, sizeof path);
    if (use_cache) { /* file: one line "key\tfp32\tbf16" */
        FILE *fp = fopen(path, "r");
        if (fp) {
            if (fgets(line, sizeof line, fp)) {
                char *t1 = strchr(line, '\t'), *t2 = t1 ? strchr(t1 + 1, '\t') : NULL;
                if (t2) {
                    *t1 = '\0';
                    double f = atof(t1 + 1), b = atof(t2 + 1);
                    if (!strcmp(line, key) && f > 0 && b >= 0) {
                        p->measured_fp32 = f, p->measured_bf16 = b;
                        snprintf(p->measured_from, sizeof p->measured_from, "cache %s", path);
                    }
                }
            }
            fclose(fp);
            if (p->measured_fp32 > 0) return;
        }
    }
    p->measured_fp32 = zt_measure_core_fp32_flops();
    p->measured_bf16 = p->bf16_per_cycle > 0 ? zt_measure_core_bf16_flops() : 0;
    snprintf(p->measured_from, sizeof p->measured_from, "measured now");
    if (!use_cache || !(p->measured_fp32 > 0)) return;
    make_parent(path);
    zt_atomic_file af;
    if (zt_atomic_open(&af, path, NULL)) return; /* not cached: measured again next time */
    bool ok = fprintf(af.fp, "%s\t%.6g\t%.6g\n", key, p->measured_fp32, p->measured_bf16) > 0;
    zt_atomic_commit(&af, ok, "", NULL);
}

const char *zt_cpu_peak_source(const zt_cpu_peak *p, bool bf16) {
    if (p->override_gflops > 0) return "ZT_PEAK_GFLOPS";
    if (bf16 && p->measured_bf16 > 0) return "measured bf16 dot-product peak";
    if (p->measured_fp32 > 0) return bf16 ? "measured fp32 FMA peak (no bf16 instruction)" : "measured fp32 FMA peak";
    return bf16 && p->bf16_per_cycle > 0 ? "nominal bf16 peak (clock x table)" : "nominal fp32 peak (clock x table)";
}

double zt_cpu_peak_flops(const zt_cpu_peak *p, double cores, int ranks, bool bf16) {
    if (p->override_gflops > 0) return p->override_gflops * 1e9 * (ranks > 0 ? ranks : 1);
    if (p->measured_fp32 > 0) return cores * (bf16 && p->measured_bf16 > 0 ? p->measured_bf16 : p->measured_fp32);
    if (p->clock_ghz <= 0) return 0;
    double per = bf16 && p->bf16_per_cycle > 0 ? p->bf16_per_cycle : p->fp32_per_cycle;
    return cores * p->clock_ghz * 1e9 * per;
}

double zt_cores_per_rank(int threads) {
    zt_launcher_node node;
    zt_launcher_node_get(&node);
    int local = node.local_size > 0 ? node.local_size : 1;
    zt_cpu_peak p;
    zt_cpu_peak_detect(&p);
    double cores = (double)p.online_cores / (p.threads_per_core > 0 ? p.threads_per_core : 1);
    double share = cores / local;
    return threads < share ? (double)threads : share;
}

void zt_platform_describe(char *buf, int size) {
    char cpu[400];
    zt_cpu_describe(zt_cpu_features_get(), cpu, sizeof cpu);
    if (size > 0)
        snprintf(buf, (size_t)size, "cpu %s | isa %s | gemm fp32 %s, bf16 %s", cpu, zt_kernels_path(),
                 zt_gemm_path(false), zt_gemm_path(true));
}

void zt_platform_json(char *buf, int size) {
    char cpu[400];
    zt_cpu_describe(zt_cpu_features_get(), cpu, sizeof cpu);
    if (size > 0)
        snprintf(buf, (size_t)size, "\"cpu\":\"%s\",\"isa\":\"%s\",\"isa_path\":\"%s\",\"gemm_fp32\":\"%s\","
                 "\"gemm_bf16\":\"%s\"", cpu, zt_isa_name((zt_isa)zt_kernels_isa()), zt_kernels_path(),
                 zt_gemm_path(false), zt_gemm_path(true));
}
