/* cpu_isa.c - this CPU's features (cpuid, xgetbv) and the kernels' instruction-set levels
 * (cpu_isa.h). Nothing here may use an instruction above the floor before checking for it: this
 * file is what tells the rest of the library which code it may run. */
#include "core/cpu_isa.h"
#include "core/env.h"

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define ZT_X86 1
#endif

static const char *const NAMES[ZT_ISA_LEVELS] = {"avx2", "avx512", "avx512_bf16", "amx"};

const char *zt_isa_name(zt_isa isa)
{
    return isa >= 0 && isa < ZT_ISA_LEVELS ? NAMES[isa] : "none";
}

const char *zt_isa_arch(zt_isa isa)
{
    return isa == ZT_ISA_AVX2 ? "x86-64-v3" : isa > ZT_ISA_AVX2 ? "x86-64-v4" : "x86-64";
}

#ifdef ZT_X86
static void cpuid(unsigned leaf, unsigned sub, unsigned r[4])
{
    r[0] = r[1] = r[2] = r[3] = 0;
    __cpuid_count(leaf, sub, r[0], r[1], r[2], r[3]);
}

static uint64_t xgetbv0(void)
{
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (uint64_t)hi << 32 | lo;
}

static void detect(zt_cpu_features *f)
{
    unsigned r[4], max_leaf, max_ext;
    cpuid(0, 0, r);
    max_leaf = r[0];
    memcpy(f->vendor, &r[1], 4), memcpy(f->vendor + 4, &r[3], 4), memcpy(f->vendor + 8, &r[2], 4);
    f->vendor[12] = 0;
    if (max_leaf < 1) return;
    cpuid(1, 0, r);
    unsigned fam = (r[0] >> 8) & 0xf, mod = (r[0] >> 4) & 0xf;
    f->family = (int)(fam == 0xf ? fam + ((r[0] >> 20) & 0xff) : fam);
    f->model = (int)(fam == 0x6 || fam == 0xf ? mod | ((r[0] >> 16) & 0xf) << 4 : mod);
    bool osxsave = r[2] >> 27 & 1;
    f->sse42 = r[2] >> 20 & 1, f->fma = r[2] >> 12 & 1, f->movbe = r[2] >> 22 & 1;
    f->avx = r[2] >> 28 & 1, f->f16c = r[2] >> 29 & 1;
    uint64_t xcr0 = osxsave ? xgetbv0() : 0;
    f->os_ymm = (xcr0 & 0x6) == 0x6;                  /* SSE + AVX state */
    f->os_zmm = f->os_ymm && (xcr0 & 0xe0) == 0xe0;   /* opmask, ZMM_Hi256, Hi16_ZMM */
    f->os_tiles = (xcr0 & 0x60000) == 0x60000;        /* XTILECFG, XTILEDATA */
    if (max_leaf >= 7) {
        cpuid(7, 0, r);
        unsigned sub_leaves = r[0];
        f->bmi1 = r[1] >> 3 & 1, f->avx2 = r[1] >> 5 & 1, f->bmi2 = r[1] >> 8 & 1;
        f->avx512f = r[1] >> 16 & 1, f->avx512dq = r[1] >> 17 & 1, f->avx512cd = r[1] >> 28 & 1;
        f->avx512bw = r[1] >> 30 & 1, f->avx512vl = r[1] >> 31 & 1;
        f->avx512_fp16 = r[3] >> 23 & 1, f->amx_bf16 = r[3] >> 22 & 1, f->amx_tile = r[3] >> 24 & 1;
        if (sub_leaves >= 1) {
            cpuid(7, 1, r);
            f->avx512_bf16 = r[0] >> 5 & 1;
        }
    }
    cpuid(0x80000000u, 0, r);
    max_ext = r[0];
    if (max_ext >= 0x80000001u) {
        cpuid(0x80000001u, 0, r);
        f->lzcnt = r[2] >> 5 & 1;
    }
    if (max_ext >= 0x80000004u) {
        for (unsigned i = 0; i < 3; i++) {
            cpuid(0x80000002u + i, 0, r);
            memcpy(f->brand + 16 * i, r, 16);
        }
        f->brand[48] = 0;
        char *s = f->brand; /* some CPUs pad the brand string with leading spaces */
        while (*s == ' ') s++;
        memmove(f->brand, s, strlen(s) + 1);
        for (size_t n = strlen(f->brand); n > 0 && f->brand[n - 1] == ' '; n--) f->brand[n - 1] = 0;
        for (char *c = f->brand; *c; c++) /* printed in JSON strings too: nothing to escape */
            if (*c == '"' || *c == '\\' || (unsigned char)*c < 0x20 || (unsigned char)*c > 0x7e) *c = '?';
    }
    /* features whose registers the OS does not save are not usable */
    if (!f->os_ymm) f->avx = f->avx2 = f->fma = f->f16c = false;
    if (!f->os_zmm)
        f->avx512f = f->avx512bw = f->avx512dq = f->avx512vl = f->avx512cd = f->avx512_bf16 = f->avx512_fp16 = false;
    if (!f->os_tiles) f->amx_tile = f->amx_bf16 = false;
}
#else
static void detect(zt_cpu_features *f) { (void)f; }
#endif

/* what a level needs, as (name, flag) pairs */
typedef struct {
    const char *name;
    size_t off;
    zt_isa level; /* the lowest level that needs it */
} feature_row;

#define ROW(field, lvl) {#field, offsetof(zt_cpu_features, field), lvl}
static const feature_row FEATURES[] = {
    ROW(avx2, ZT_ISA_AVX2),         ROW(fma, ZT_ISA_AVX2),          ROW(f16c, ZT_ISA_AVX2),
    ROW(bmi1, ZT_ISA_AVX2),         ROW(bmi2, ZT_ISA_AVX2),         ROW(lzcnt, ZT_ISA_AVX2),
    ROW(movbe, ZT_ISA_AVX2),        ROW(avx512f, ZT_ISA_AVX512),    ROW(avx512bw, ZT_ISA_AVX512),
    ROW(avx512dq, ZT_ISA_AVX512),   ROW(avx512vl, ZT_ISA_AVX512),   ROW(avx512cd, ZT_ISA_AVX512),
    ROW(avx512_bf16, ZT_ISA_AVX512_BF16), ROW(amx_tile, ZT_ISA_AMX), ROW(amx_bf16, ZT_ISA_AMX),
};
#undef ROW
enum { NFEATURES = sizeof FEATURES / sizeof FEATURES[0] };

static bool has(const zt_cpu_features *f, const feature_row *r)
{
    return *(const bool *)((const char *)f + r->off);
}

/* ZT_CPU_FAKE: keep only the features of `level` and below (never adds one the CPU lacks) */
static void mask_to(zt_cpu_features *f, zt_isa level)
{
    for (int i = 0; i < NFEATURES; i++)
        if (FEATURES[i].level > level) *(bool *)((char *)f + FEATURES[i].off) = false;
    if (level < ZT_ISA_AVX2) f->avx2 = f->fma = false;
    if (level < ZT_ISA_AVX512) f->avx512_fp16 = false;
}

static zt_cpu_features g_cpu;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void detect_once(void)
{
    detect(&g_cpu);
    const char *fake = zt_env(ZT_ENV_CPU_FAKE);
    if (fake && *fake) {
        zt_isa lvl = ZT_ISA_NONE;
        for (int i = 0; i < ZT_ISA_LEVELS; i++)
            if (!strcmp(fake, NAMES[i])) lvl = (zt_isa)i;
        if (lvl != ZT_ISA_NONE || !strcmp(fake, "none")) mask_to(&g_cpu, lvl);
    }
}

const zt_cpu_features *zt_cpu_features_get(void)
{
    pthread_once(&g_once, detect_once);
    return &g_cpu;
}

static bool level_ok(const zt_cpu_features *f, zt_isa isa)
{
    for (int i = 0; i < NFEATURES; i++)
        if (FEATURES[i].level <= isa && !has(f, &FEATURES[i])) return false;
    return true;
}

zt_isa zt_isa_best(const zt_cpu_features *f)
{
    zt_isa best = ZT_ISA_NONE;
    for (int i = 0; i < ZT_ISA_LEVELS; i++)
        if (level_ok(f, (zt_isa)i)) best = (zt_isa)i;
    return best;
}

int zt_isa_parse(const char *name, const char *what, zt_isa *out, zt_error *err)
{
    if (name == NULL || !strcmp(name, "auto") || !*name) {
        *out = zt_isa_best(zt_cpu_features_get());
        return ZT_OK;
    }
    for (int i = 0; i < ZT_ISA_LEVELS; i++)
        if (!strcmp(name, NAMES[i])) {
            *out = (zt_isa)i;
            return ZT_OK;
        }
    return zt_error_set(err, ZT_ERR_USAGE, "%s: unknown instruction-set level '%s' (expected auto, avx2, avx512, "
                        "avx512_bf16 or amx)", what, name);
}

/* the names of the features f has (want true) or lacks (want false) among those up to `isa` */
static void list_features(const zt_cpu_features *f, zt_isa isa, bool want, char *buf, size_t size)
{
    size_t n = 0;
    buf[0] = 0;
    for (int i = 0; i < NFEATURES; i++) {
        if (FEATURES[i].level > isa || has(f, &FEATURES[i]) != want) continue;
        int w = snprintf(buf + n, size - n, "%s%s", n ? " " : "", FEATURES[i].name);
        if (w < 0 || (size_t)w >= size - n) return; /* truncated: still a valid string */
        n += (size_t)w;
    }
}

int zt_isa_check(zt_isa isa, const zt_cpu_features *f, zt_error *err)
{
    if (isa < ZT_ISA_AVX2) isa = ZT_ISA_AVX2; /* the floor */
    char missing[256];
    list_features(f, isa, false, missing, sizeof missing);
    if (!missing[0]) return ZT_OK;
    zt_isa best = zt_isa_best(f);
    return zt_error_set(err, ZT_ERR_USAGE, "instruction-set level %s needs %s, which this CPU (%s, %s family %d "
                        "model %d) lacks%s; %s%s", zt_isa_name(isa), missing, f->brand[0] ? f->brand : "unknown",
                        f->vendor[0] ? f->vendor : "unknown vendor", f->family, f->model,
                        f->avx && !f->os_ymm ? " (or its OS does not enable)" : "",
                        best == ZT_ISA_NONE ? "zerotrain needs at least avx2 (x86-64-v3)" : "its best level is ",
                        best == ZT_ISA_NONE ? "" : zt_isa_name(best));
}

void zt_cpu_features_describe(const zt_cpu_features *f, char *buf, int size)
{
    if (size > 0) list_features(f, ZT_ISA_AMX, true, buf, (size_t)size);
}

void zt_cpu_describe(const zt_cpu_features *f, char *buf, int size)
{
    char feats[256];
    zt_cpu_features_describe(f, feats, sizeof feats);
    if (size > 0)
        snprintf(buf, (size_t)size, "%s (%s family %d model %d; %s)", f->brand[0] ? f->brand : "unknown CPU",
                 f->vendor[0] ? f->vendor : "unknown vendor", f->family, f->model, feats[0] ? feats : "no AVX2");
}
