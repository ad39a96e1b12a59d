/* dispatch.c - which copy of the kernels runs: each kernel function (dispatch.def) is compiled
 * once per instruction-set level (CMakeLists.txt: name_avx2, name_avx512, name_avx512_bf16), and
 * `name` itself is a two-instruction stub that jumps through a slot holding the chosen copy's
 * address (what a PLT entry or glibc's ifunc does for memcpy, but chosen by us, so that ZT_ISA can
 * ask for a lower level and a test can switch levels in one process).
 *
 * The slots start at the avx2 copies (the floor, which every supported CPU runs) and are set
 * before main by a constructor: ZT_ISA's level when the CPU has it, else the CPU's best (the
 * error is kept for zt_kernels_init, which the CLI calls first). The amx level runs the
 * avx512_bf16 copies; only the bf16 products differ (oneDNN's AMX kernels, gemm.c).
 *
 * Off x86-64 the kernels are compiled once under their own names and this file only answers
 * which level is in use (none). */
#include "core/cpu_isa.h"
#include "core/env.h"
#include "kernels/kernels.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static zt_isa g_isa = ZT_ISA_NONE;
static zt_error g_init_err; /* code 0: ZT_ISA was honoured (or unset) */

#ifdef ZT_KERNEL_VARIANTS
typedef void zt_kfn(void);

/* the copies and the slots; the stubs read the slots from assembly, hence `used` */
#define ZT_KERNEL(name)                                                                                         \
    extern zt_kfn name##_avx2, name##_avx512, name##_avx512_bf16;                                               \
    __attribute__((used)) static zt_kfn *zt_slot_##name = name##_avx2;                                          \
    __asm__(".text\n\t.globl " #name "\n\t.type " #name ", @function\n\t.p2align 4\n" #name                    \
            ":\n\tjmp *zt_slot_" #name "(%rip)\n\t.size " #name ", .-" #name "\n\t.previous");
#include "kernels/dispatch.def"
#undef ZT_KERNEL

typedef struct {
    zt_kfn **slot;
    zt_kfn *copy[3]; /* avx2, avx512, avx512_bf16 */
} kernel_row;

static const kernel_row ROWS[] = {
#define ZT_KERNEL(name) {&zt_slot_##name, {name##_avx2, name##_avx512, name##_avx512_bf16}},
#include "kernels/dispatch.def"
#undef ZT_KERNEL
};

static void set_slots(zt_isa isa)
{
    int c = isa >= ZT_ISA_AVX512_BF16 ? 2 : isa == ZT_ISA_AVX512 ? 1 : 0;
    for (size_t i = 0; i < sizeof ROWS / sizeof ROWS[0]; i++)
        __atomic_store_n(ROWS[i].slot, ROWS[i].copy[c], __ATOMIC_RELEASE);
}
#else
static void set_slots(zt_isa isa) { (void)isa; }
#endif

int zt_kernels_select(int isa, zt_error *err)
{
#ifdef ZT_KERNEL_VARIANTS
    if (isa < ZT_ISA_AVX2 || isa >= ZT_ISA_LEVELS)
        return zt_error_set(err, ZT_ERR_USAGE, "zt_kernels_select: no instruction-set level %d", isa);
    int rc = zt_isa_check((zt_isa)isa, zt_cpu_features_get(), err);
    if (rc != ZT_OK) return rc;
    set_slots((zt_isa)isa);
    g_isa = (zt_isa)isa;
    return ZT_OK;
#else
    if (isa == ZT_ISA_NONE) return ZT_OK;
    return zt_error_set(err, ZT_ERR_USAGE, "instruction-set level %s: this build has one portable copy of the "
                        "kernels (not x86-64)", zt_isa_name((zt_isa)isa));
#endif
}

__attribute__((constructor)) static void kernels_choose(void)
{
#ifdef ZT_KERNEL_VARIANTS
    const zt_cpu_features *f = zt_cpu_features_get();
    zt_isa best = zt_isa_best(f), want = best;
    const char *env = zt_env(ZT_ENV_ISA);
    zt_error err = {0};
    if (zt_isa_parse(env, "ZT_ISA", &want, &err) == ZT_OK && want != ZT_ISA_NONE &&
        zt_isa_check(want, f, &err) == ZT_OK) {
        set_slots(want);
        g_isa = want;
        return;
    }
    if (err.code == ZT_OK) zt_isa_check(ZT_ISA_AVX2, f, &err); /* below the floor */
    g_init_err = err;
    if (best != ZT_ISA_NONE) {
        set_slots(best);
        g_isa = best;
    }
#endif
}

int zt_kernels_isa(void) { return g_isa; }

int zt_kernels_init(zt_error *err)
{
    if (g_init_err.code == ZT_OK) return ZT_OK;
    if (err) *err = g_init_err;
    return g_init_err.code;
}

const char *zt_kernels_path(void)
{
    static char buf[4][160];
    int i = g_isa >= 0 && g_isa < ZT_ISA_LEVELS ? (int)g_isa : 0;
#ifdef ZT_KERNEL_VARIANTS
    zt_isa best = zt_isa_best(zt_cpu_features_get());
    const char *env = zt_env(ZT_ENV_ISA);
    snprintf(buf[i], sizeof buf[i], "%s (kernels %s%s; %s%s%s)", zt_isa_name(g_isa), zt_isa_arch(g_isa),
             g_isa >= ZT_ISA_AVX512_BF16 ? " +avx512bf16" : "",
             g_isa == best ? "the CPU's best" : "below the CPU's best, ", g_isa == best ? "" : zt_isa_name(best),
             env && *env ? (g_init_err.code ? "; ZT_ISA refused" : "; ZT_ISA") : "");
#else
    snprintf(buf[i], sizeof buf[i], "portable (kernels compiled once, not x86-64)");
#endif
    return buf[i];
}
