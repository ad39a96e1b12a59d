/* gemm.c - the fp32 GEMM dispatch (gemm.h): OpenBLAS sgemm, or a oneDNN matmul primitive kept in
 * a small cache, one backend per process. The bf16 products: oneDNN's bf16 matmul where the level
 * has AVX512_BF16; below it (the avx2 and avx512 levels) gemm_packed_bf16.c's own GEMM, which
 * widens the operands to fp32 while it packs them.
 *
 * Which backend (decided once, on the first call; never by timing, since the two give different
 * bits):
 *   1. ZT_GEMM=openblas | onednn (also: dnnl) forces it; ZT_GEMM=auto or unset: the rule below.
 *   2. oneDNN when oneDNN's own ISA (dnnl_get_effective_cpu_isa) is AVX2 or better. On the
 *      Zen 4 VMs (AMD EPYC family 25, OpenBLAS core Cooperlake) oneDNN ran the training step
 *      faster in place, though the isolated GEMMs nearly tie (a W1 step's Linear GEMMs 3692 ms
 *      oneDNN vs 3792 OpenBLAS): three interleaved rounds of `zerotrain bench` (B=4, T=256,
 *      2 threads, 4 steps) gave per CPU-second gpt2-124M 241.5/263.0/250.9 tok/s with oneDNN vs
 *      244.0/234.8/239.9 with OpenBLAS (median +4.6%), llama-124M 318.2/319.2/311.5 vs
 *      303.2/242.9/290.9 (+9%); the quietest pair of W1 steps 3952-4012 ms vs 4338-4600 ms. On
 *      the Zen 5 VMs (family 26) the two tied: W1 431 vs 434 and 395 vs 395 tok/s (OpenBLAS vs
 *      oneDNN, pairs side by side; Linear GEMMs 1936 vs 1939 ms). Where the CPU has AVX-512 but
 *      OpenBLAS was held to AVX2 kernels (OPENBLAS_CORETYPE=Haswell, as some sandboxes export),
 *      oneDNN runs the W1 GEMMs 2x faster (~400 vs ~200 GFLOP/s) and W1 1.65-1.8x faster (397-424
 *      vs 233-241 tok/s). Where both are held to AVX2 (measured with DNNL_MAX_CPU_ISA=AVX2),
 *      oneDNN's gemm:jit is 0-12% ahead of OpenBLAS's Haswell kernels on every W1 shape.
 *   3. OpenBLAS otherwise (oneDNN without its x86 JIT kernels: an older x86, another
 *      architecture; not measured).
 * If oneDNN cannot create its engine, OpenBLAS (zt_gemm_backend_reason says so). Evidence and
 * commands: bench/RESULTS.md, "GEMM backend choice".
 *
 * oneDNN products. One matmul primitive per key (trans_a, trans_b, M, N, K, lda, ldb, ldc,
 * alpha, beta, bias present, OpenMP thread count), created on the first call with that key and
 * reused. The operands are described in place with strides (a transposed operand is a (rows,
 * cols) descriptor with strides (1, ld)): no copies. beta != 0 is a sum post-op with scale beta
 * (C = alpha AB + beta C in one pass), alpha != 1 an output scale, the bias the matmul's bias
 * operand (1,N). alpha != 1 together with a bias goes to OpenBLAS (oneDNN 2.x would scale the
 * bias too). The cache holds ZT_GEMM_CACHE_MAX entries and evicts the least recently used;
 * GPT-2 training needs ~21 (5 Linear shapes x forward, dinp, dweight, some in parts, below). A
 * key whose creation failed, or for which oneDNN offers only its reference implementation, is
 * cached as "OpenBLAS": the same shape always goes to the same library, so the bits stay fixed.
 *
 * oneDNN shape policy. oneDNN 2.6 picks its brgemm matmul for plain operands, and that slows to
 * 75-85% of its best when the plain B of one call is large (NN: K x N > 3 MiB; TN likewise) or the
 * product has tens of thousands of rows (the LM head's dweight, 50257 rows): lm_head dinp ran at
 * 284-303 GFLOP/s against OpenBLAS-SkylakeX's 386-393. Such products run in parts, fixed by the
 * shape (onednn_product): K-slices accumulated with the sum post-op (NN), row blocks and column
 * blocks (TN). The parts have strided operands, which oneDNN runs with its gemm:jit kernels;
 * together they bring the oneDNN step's Linear GEMMs from 2152 to 1939 ms (OpenBLAS-SkylakeX:
 * 1936). Splitting K changes the summation order, not its accuracy (a blocked sum).
 *
 * Threads: the cache and the oneDNN stream are guarded by one mutex (the engine calls kernels
 * from one thread; the mutex only makes a stray second caller safe). Calls made inside an OpenMP
 * parallel region go to OpenBLAS without touching the cache, except zt_gemm_f32_serial's: each
 * thread's own cache of single-threaded primitives ("products on one thread each", below), whose
 * entries may leave M or K to each call (zt_gemm_f32_serial_rows: oneDNN's runtime dimensions, the
 * experts' products over row counts that change every call).
 */
#include "kernels/gemm.h"
#include "core/env.h"

#include <cblas.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "core/cpu_isa.h"
#include "kernels/kernels.h"
#include "kernels/vecmath.h"

#ifndef ZT_GEMM_CACHE_MAX
#define ZT_GEMM_CACHE_MAX 64
#endif

typedef struct {
    /* key */
    int ta, tb, M, N, K, lda, ldb, ldc, nthr, has_bias, bf16; /* bf16: A and B bf16, C fp32 */
    int serial; /* one thread's own (zt_gemm_f32_serial): nthr 1, its scratchpad its own */
    int rt;     /* ZT_GEMM_RUNTIME_M / _K: that dimension given at each call (key -1; zt_gemm_f32_serial_rows) */
    uint32_t alpha_bits, beta_bits;
    /* value */
    bool use_blas; /* creation failed or only a reference implementation: OpenBLAS */
    bool failed;   /* use_blas because oneDNN refused (else by design) */
    dnnl_primitive_t prim;
    dnnl_memory_t a, b, c, bias, scratch; /* scratch: serial entries' scratchpad */
    unsigned long long last_use;
} gemm_entry;

/* a cache of entries: the process's (G, under G.lock) or one thread's (serial products) */
typedef struct {
    gemm_entry *e;
    int *n, cap;
    unsigned long long *tick;
} gemm_cache;

static struct {
    pthread_mutex_t lock;
    pthread_once_t once;
    zt_gemm_backend backend;
    char reason[320];
    bool have_engine;
    dnnl_engine_t eng;
    dnnl_stream_t stream;
    gemm_entry cache[ZT_GEMM_CACHE_MAX];
    int n;
    unsigned long long tick;
    int inject; /* fault injection: creations left to fail */
    zt_gemm_stats st;
} G = {.lock = PTHREAD_MUTEX_INITIALIZER, .once = PTHREAD_ONCE_INIT};

#define STAT_ADD(field) __atomic_add_fetch(&G.st.field, 1, __ATOMIC_RELAXED)

// ---- the choice ------------------------------------------------------------------------------

static const char *isa_name(dnnl_cpu_isa_t isa)
{
    switch (isa) {
    case dnnl_cpu_isa_sse41: return "sse41";
    case dnnl_cpu_isa_avx: return "avx";
    case dnnl_cpu_isa_avx2: return "avx2";
    case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
    case dnnl_cpu_isa_avx512_mic: return "avx512_mic";
    case dnnl_cpu_isa_avx512_mic_4ops: return "avx512_mic_4ops";
    case dnnl_cpu_isa_avx512_core: return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
    default: return "other";
    }
}

static bool create_engine(dnnl_status_t *st)
{
    *st = dnnl_engine_create(&G.eng, dnnl_cpu, 0);
    if (*st != dnnl_success)
        return false;
    *st = dnnl_stream_create(&G.stream, G.eng, dnnl_stream_default_flags);
    if (*st != dnnl_success) {
        dnnl_engine_destroy(G.eng);
        return false;
    }
    G.have_engine = true;
    return true;
}

zt_gemm_backend zt_gemm_choose(const char *env, const char *core, const char *onednn_isa,
                               bool onednn_jit, char *why, size_t why_size)
{
    core = core != NULL ? core : "?";
    if (env != NULL && strcasecmp(env, "openblas") == 0) {
        snprintf(why, why_size, "ZT_GEMM=openblas (OpenBLAS core %s)", core);
        return ZT_GEMM_OPENBLAS;
    }
    if (env != NULL && (strcasecmp(env, "onednn") == 0 || strcasecmp(env, "dnnl") == 0)) {
        snprintf(why, why_size, "ZT_GEMM=onednn (oneDNN ISA %s)", onednn_isa);
        return ZT_GEMM_ONEDNN;
    }
    char prefix[80] = "auto";
    if (env != NULL && *env != '\0' && strcasecmp(env, "auto") != 0)
        snprintf(prefix, sizeof prefix, "ZT_GEMM='%.24s' is not openblas|onednn|auto; auto", env);
    if (onednn_jit) {
        snprintf(why, why_size, "%s: oneDNN ISA %s (OpenBLAS core %s)", prefix, onednn_isa, core);
        return ZT_GEMM_ONEDNN;
    }
    snprintf(why, why_size, "%s: OpenBLAS core %s, oneDNN has no AVX2 JIT (ISA %s)", prefix,
             core, onednn_isa);
    return ZT_GEMM_OPENBLAS;
}

/* oneDNN held to the kernels' level (core/cpu_isa.h), so that ZT_ISA=avx2 on a larger CPU runs
 * the products an AVX2-only CPU would run; amx: no cap. Must precede oneDNN's first use; fails
 * harmlessly (oneDNN keeps its own choice) when something else used oneDNN first. */
static void cap_onednn(void)
{
    switch (zt_kernels_isa()) {
    case ZT_ISA_AVX2: dnnl_set_max_cpu_isa(dnnl_cpu_isa_avx2); break;
    case ZT_ISA_AVX512: dnnl_set_max_cpu_isa(dnnl_cpu_isa_avx512_core); break;
    case ZT_ISA_AVX512_BF16: dnnl_set_max_cpu_isa(dnnl_cpu_isa_avx512_core_bf16); break;
    default: break;
    }
}

static void decide(void)
{
    cap_onednn();
    dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
    /* AVX2 or better: every x86 ISA from avx2 up has the avx2 bits */
    bool jit = ((unsigned)isa & (unsigned)dnnl_cpu_isa_avx2) == (unsigned)dnnl_cpu_isa_avx2;
    char why[200];
    zt_gemm_backend b = zt_gemm_choose(zt_env(ZT_ENV_GEMM), openblas_get_corename(), isa_name(isa),
                                       jit, why, sizeof why);
    dnnl_status_t st = dnnl_success;
    if (b == ZT_GEMM_ONEDNN && !create_engine(&st)) {
        b = ZT_GEMM_OPENBLAS;
        STAT_ADD(fallbacks);
        snprintf(G.reason, sizeof G.reason, "%s, but oneDNN engine creation failed (status %d)",
                 why, (int)st);
    } else {
        snprintf(G.reason, sizeof G.reason, "%s", why);
    }
    G.backend = b;
}

static void ensure_decided(void)
{
    pthread_once(&G.once, decide);
}

zt_gemm_backend zt_gemm_backend_get(void)
{
    ensure_decided();
    return G.backend;
}

const char *zt_gemm_backend_name(void)
{
    return zt_gemm_backend_get() == ZT_GEMM_ONEDNN ? "onednn" : "openblas";
}

const char *zt_gemm_backend_reason(void)
{
    ensure_decided();
    return G.reason;
}

zt_gemm_backend zt_gemm_backend_set(zt_gemm_backend b)
{
    ensure_decided();
    pthread_mutex_lock(&G.lock);
    zt_gemm_backend prev = G.backend;
    dnnl_status_t st;
    if (b == ZT_GEMM_ONEDNN && !G.have_engine && !create_engine(&st))
        STAT_ADD(fallbacks); /* stays on OpenBLAS */
    else
        G.backend = b;
    pthread_mutex_unlock(&G.lock);
    return prev;
}

void zt_gemm_stats_get(zt_gemm_stats *out)
{
    __atomic_load(&G.st.calls_onednn, &out->calls_onednn, __ATOMIC_RELAXED);
    __atomic_load(&G.st.calls_openblas, &out->calls_openblas, __ATOMIC_RELAXED);
    __atomic_load(&G.st.created, &out->created, __ATOMIC_RELAXED);
    __atomic_load(&G.st.cache_hits, &out->cache_hits, __ATOMIC_RELAXED);
    __atomic_load(&G.st.evictions, &out->evictions, __ATOMIC_RELAXED);
    __atomic_load(&G.st.fallbacks, &out->fallbacks, __ATOMIC_RELAXED);
    __atomic_load(&G.st.rerouted, &out->rerouted, __ATOMIC_RELAXED);
    __atomic_load(&G.st.products, &out->products, __ATOMIC_RELAXED);
    __atomic_load(&G.st.ns, &out->ns, __ATOMIC_RELAXED);
    __atomic_load(&G.st.flops, &out->flops, __ATOMIC_RELAXED);
}

/* the clock of the products' time (zt_gemm_stats.ns) */
static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void product_done(long long t0, int M, int N, int K)
{
    __atomic_add_fetch(&G.st.products, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&G.st.ns, now_ns() - t0, __ATOMIC_RELAXED);
    __atomic_add_fetch(&G.st.flops, 2LL * M * N * (K > 0 ? K : 0), __ATOMIC_RELAXED);
}

void zt_gemm_stats_reset(void)
{
    pthread_mutex_lock(&G.lock);
    memset(&G.st, 0, sizeof G.st);
    pthread_mutex_unlock(&G.lock);
}

void zt_gemm_inject_create_failures(int n)
{
    pthread_mutex_lock(&G.lock);
    G.inject = n > 0 ? n : 0;
    pthread_mutex_unlock(&G.lock);
}

// ---- OpenBLAS --------------------------------------------------------------------------------

/* C = beta C + bias rows (C = bias rows when beta == 0, without reading C) */
static void add_bias_rows(float *C, int ldc, const float *bias, float beta, int M, int N)
{
    bool par = !omp_in_parallel() && (size_t)M * (size_t)N >= 16384;
#pragma omp parallel for schedule(static) if (par)
    for (int r = 0; r < M; r++) {
        float *c = C + (size_t)r * ldc;
        if (beta == 0.0f) {
            int i = 0;
            for (; i + ZT_VL <= N; i += ZT_VL)
                zt_vstore(c + i, zt_vload(bias + i));
            if (i < N)
                zt_vstoren(c + i, zt_vloadn(bias + i, N - i, 0.0f), N - i);
        } else {
            for (int i = 0; i < N; i++)
                c[i] = beta * c[i] + bias[i];
        }
    }
}

/* The bias goes in first (OpenBLAS applies beta in a separate sweep over C before the product,
 * so filling C with the bias and running with beta = 1 costs no extra pass). */
static void blas_gemm(bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda,
                      const float *B, int ldb, float beta, float *C, int ldc, const float *bias)
{
    STAT_ADD(calls_openblas);
    if (bias != NULL) {
        add_bias_rows(C, ldc, bias, beta, M, N);
        beta = 1.0f;
    }
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M,
                N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

// ---- oneDNN ----------------------------------------------------------------------------------

static uint32_t fbits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static void entry_destroy(gemm_entry *e)
{
    if (e->a != NULL)
        dnnl_memory_destroy(e->a);
    if (e->b != NULL)
        dnnl_memory_destroy(e->b);
    if (e->c != NULL)
        dnnl_memory_destroy(e->c);
    if (e->bias != NULL)
        dnnl_memory_destroy(e->bias);
    if (e->scratch != NULL)
        dnnl_memory_destroy(e->scratch);
    if (e->prim != NULL)
        dnnl_primitive_destroy(e->prim);
    e->a = e->b = e->c = e->bias = e->scratch = NULL;
    e->prim = NULL;
}

static void serial_clear(void);

void zt_gemm_cache_clear(void)
{
    pthread_mutex_lock(&G.lock);
    for (int i = 0; i < G.n; i++)
        entry_destroy(&G.cache[i]);
    G.n = 0;
    serial_clear();
    pthread_mutex_unlock(&G.lock);
}

/* (rows, cols) descriptor of a row-major matrix with leading dimension ld, or of the transpose
 * of a stored (cols, rows) one */
static dnnl_status_t md_2d(dnnl_memory_desc_t *md, dnnl_dim_t rows, dnnl_dim_t cols, int ld, bool trans,
                           dnnl_data_type_t dt)
{
    dnnl_dims_t dims = {rows, cols};
    dnnl_dims_t strides = {trans ? 1 : ld, trans ? ld : 1};
    return dnnl_memory_desc_init_by_strides(md, 2, dims, dt, strides);
}

/* The operands' descriptors of entry e's product with M rows and K the inner dimension (either
 * DNNL_RUNTIME_DIM_VAL: given at each call) */
static dnnl_status_t operand_mds(const gemm_entry *e, dnnl_dim_t M, dnnl_dim_t K, dnnl_data_type_t in_dt,
                                 dnnl_memory_desc_t *a_md, dnnl_memory_desc_t *b_md, dnnl_memory_desc_t *c_md)
{
    dnnl_status_t st = md_2d(a_md, M, K, e->lda, e->ta, in_dt);
    if (st == dnnl_success)
        st = md_2d(b_md, K, e->N, e->ldb, e->tb, in_dt);
    return st == dnnl_success ? md_2d(c_md, M, e->N, e->ldc, false, dnnl_f32) : st;
}

#define TRY(x)                                                                                     \
    do {                                                                                           \
        if ((st = (x)) != dnnl_success)                                                            \
            goto fail;                                                                             \
    } while (0)

/* Fill e (key set) with a primitive and its memory objects. Returns false when oneDNN refused:
 * e is then an OpenBLAS entry, counted in fallbacks. */
static bool entry_create(gemm_entry *e, float alpha, float beta)
{
    dnnl_status_t st = dnnl_success;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_memory_desc_t a_md, b_md, c_md, bias_md;
    if (!e->serial && G.inject > 0) { /* (the serial caches run without G.lock) */
        G.inject--;
        st = dnnl_runtime_error;
        goto fail;
    }
    dnnl_data_type_t in_dt = e->bf16 ? dnnl_bf16 : dnnl_f32;
    /* a dimension given at each call: DNNL_RUNTIME_DIM_VAL (oneDNN's gemm-based matmul; the memory
     * objects of the operands it shapes are made per call, entry_run_rt) */
    dnnl_dim_t M = e->rt & ZT_GEMM_RUNTIME_M ? DNNL_RUNTIME_DIM_VAL : e->M;
    dnnl_dim_t K = e->rt & ZT_GEMM_RUNTIME_K ? DNNL_RUNTIME_DIM_VAL : e->K;
    TRY(operand_mds(e, M, K, in_dt, &a_md, &b_md, &c_md));
    TRY(md_2d(&bias_md, 1, e->N, e->N, false, dnnl_f32));
    TRY(dnnl_primitive_attr_create(&attr));
    if (e->serial) /* its own scratchpad: threads run their primitives at once (no shared one) */
        TRY(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user));
    if (alpha != 1.0f)
        TRY(dnnl_primitive_attr_set_output_scales(attr, 1, 0, &alpha));
    if (beta != 0.0f) {
        TRY(dnnl_post_ops_create(&po));
        TRY(dnnl_post_ops_append_sum(po, beta));
        TRY(dnnl_primitive_attr_set_post_ops(attr, po));
    }
    dnnl_matmul_desc_t desc;
    TRY(dnnl_matmul_desc_init(&desc, &a_md, &b_md, e->has_bias ? &bias_md : NULL, &c_md));
    TRY(dnnl_primitive_desc_create(&pd, &desc, attr, G.eng, NULL));
    const char *impl = NULL;
    if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success &&
        impl != NULL && strncmp(impl, "ref", 3) == 0 && !e->bf16) {
        /* the reference loops: OpenBLAS is faster, by design not a failure (bf16 has no OpenBLAS
         * path, so its reference implementation is still the best there is) */
        e->use_blas = true;
        goto done;
    }
    TRY(dnnl_primitive_create(&e->prim, pd));
    if (!e->rt) {
        TRY(dnnl_memory_create(&e->a, &a_md, G.eng, DNNL_MEMORY_NONE));
        TRY(dnnl_memory_create(&e->b, &b_md, G.eng, DNNL_MEMORY_NONE));
        TRY(dnnl_memory_create(&e->c, &c_md, G.eng, DNNL_MEMORY_NONE));
    }
    if (e->has_bias)
        TRY(dnnl_memory_create(&e->bias, &bias_md, G.eng, DNNL_MEMORY_NONE));
    const dnnl_memory_desc_t *sp_md = e->serial ? dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0) : NULL;
    if (sp_md != NULL && dnnl_memory_desc_get_size(sp_md) > 0)
        TRY(dnnl_memory_create(&e->scratch, sp_md, G.eng, DNNL_MEMORY_ALLOCATE));
    STAT_ADD(created);
    goto done;
fail:
    entry_destroy(e);
    e->use_blas = true;
    e->failed = true;
    STAT_ADD(fallbacks);
done:
    if (pd != NULL)
        dnnl_primitive_desc_destroy(pd);
    if (po != NULL)
        dnnl_post_ops_destroy(po);
    if (attr != NULL)
        dnnl_primitive_attr_destroy(attr);
    return st == dnnl_success;
}

/* The entry of cache c for this key, created (evicting the least recently used) when missing.
 * Called with G.lock held (the process's cache) or on the serial cache's own thread. */
static gemm_entry *entry_get(gemm_cache c, const gemm_entry *key, float alpha, float beta)
{
    for (int i = 0; i < *c.n; i++) {
        gemm_entry *e = &c.e[i];
        if (e->ta == key->ta && e->tb == key->tb && e->M == key->M && e->N == key->N &&
            e->K == key->K && e->lda == key->lda && e->ldb == key->ldb && e->ldc == key->ldc &&
            e->nthr == key->nthr && e->has_bias == key->has_bias && e->bf16 == key->bf16 && e->serial == key->serial &&
            e->rt == key->rt &&
            e->alpha_bits == key->alpha_bits && e->beta_bits == key->beta_bits) {
            if (!e->use_blas)
                STAT_ADD(cache_hits);
            e->last_use = ++*c.tick;
            return e;
        }
    }
    gemm_entry *e;
    if (*c.n < c.cap) {
        e = &c.e[(*c.n)++];
    } else {
        e = &c.e[0];
        for (int i = 1; i < *c.n; i++)
            if (c.e[i].last_use < e->last_use)
                e = &c.e[i];
        entry_destroy(e);
        STAT_ADD(evictions);
    }
    *e = *key;
    e->use_blas = false;
    e->failed = false;
    e->prim = NULL;
    e->a = e->b = e->c = e->bias = e->scratch = NULL;
    e->last_use = ++*c.tick;
    entry_create(e, alpha, beta);
    return e;
}

/* entry e's primitive on the memory objects a, b, c (and bias, or NULL; its scratchpad where it
 * owns one), run to the end */
static dnnl_status_t entry_execute(gemm_entry *e, dnnl_stream_t stream, dnnl_memory_t a, dnnl_memory_t b,
                                   dnnl_memory_t c, dnnl_memory_t bias)
{
    dnnl_exec_arg_t args[5] = {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}};
    int n = 3;
    if (bias != NULL)
        args[n++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, bias};
    if (e->scratch != NULL)
        args[n++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, e->scratch};
    dnnl_status_t st = dnnl_primitive_execute(e->prim, stream, n, args);
    return st == dnnl_success ? dnnl_stream_wait(stream) : st;
}

/* entry e's primitive on A, B, C (and the bias), its memory objects pointed at them */
static dnnl_status_t entry_run(gemm_entry *e, dnnl_stream_t stream, const void *A, const void *B, float *C,
                               const float *bias)
{
    dnnl_status_t st = dnnl_memory_set_data_handle(e->a, (void *)A);
    if (st == dnnl_success)
        st = dnnl_memory_set_data_handle(e->b, (void *)B);
    if (st == dnnl_success)
        st = dnnl_memory_set_data_handle(e->c, C);
    if (st == dnnl_success && bias != NULL)
        st = dnnl_memory_set_data_handle(e->bias, (void *)bias);
    return st == dnnl_success ? entry_execute(e, stream, e->a, e->b, e->c, bias != NULL ? e->bias : NULL) : st;
}

/* Run the product on oneDNN. Returns false when it did not (the caller runs OpenBLAS): an
 * OpenBLAS entry, or an execution failure (oneDNN checks and allocates its scratchpad before it
 * writes dst, so C is still intact). A and B are float, or bf16 (uint16_t) when bf16. */
static bool onednn_gemm(bool bf16, bool ta, bool tb, int M, int N, int K, float alpha,
                        const void *A, int lda, const void *B, int ldb, float beta, float *C,
                        int ldc, const float *bias)
{
    gemm_entry key = {.ta = ta, .tb = tb, .M = M, .N = N, .K = K, .lda = lda, .ldb = ldb,
                      .ldc = ldc, .nthr = omp_get_max_threads(), .has_bias = bias != NULL,
                      .bf16 = bf16, .alpha_bits = fbits(alpha), .beta_bits = fbits(beta)};
    bool ok = false;
    pthread_mutex_lock(&G.lock);
    gemm_entry *e = entry_get((gemm_cache){G.cache, &G.n, ZT_GEMM_CACHE_MAX, &G.tick}, &key, alpha, beta);
    if (e->use_blas) {
        if (!e->failed)
            STAT_ADD(rerouted);
        goto out;
    }
    if (entry_run(e, G.stream, A, B, C, bias) == dnnl_success) {
        STAT_ADD(calls_onednn);
        ok = true;
    } else {
        STAT_ADD(fallbacks);
    }
out:
    pthread_mutex_unlock(&G.lock);
    return ok;
}

static inline float bf16_value(const uint16_t *p, size_t i)
{
    uint32_t u = (uint32_t)p[i] << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* The bf16 product where oneDNN will not run it (Debian's OpenBLAS has no bf16 GEMM): exact
 * products of the bf16 values summed in double, one output per iteration. Slow; counted in
 * fallbacks by the caller's path, never chosen by design. */
static void bf16_reference(bool ta, bool tb, int M, int N, int K, float alpha, const uint16_t *A,
                           int lda, const uint16_t *B, int ldb, float beta, float *C, int ldc,
                           const float *bias)
{
#pragma omp parallel for schedule(static) if (!omp_in_parallel())
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double acc = 0;
            for (int k = 0; k < K; k++)
                acc += (double)bf16_value(A, ta ? (size_t)k * lda + i : (size_t)i * lda + k) *
                       bf16_value(B, tb ? (size_t)j * ldb + k : (size_t)k * ldb + j);
            float *c = C + (size_t)i * ldc + j;
            float v = alpha * (float)acc + (bias != NULL ? bias[j] : 0.0f);
            *c = beta == 0.0f ? v : beta * *c + v;
        }
}

/* One part of a product on oneDNN, or on OpenBLAS (bf16: the reference loops) where oneDNN will
 * not run it. */
static void onednn_part(bool bf16, bool ta, bool tb, int M, int N, int K, float alpha,
                        const void *A, int lda, const void *B, int ldb, float beta, float *C,
                        int ldc, const float *bias)
{
    if (onednn_gemm(bf16, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, bias))
        return;
    if (bf16)
        bf16_reference(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, bias);
    else
        blas_gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, bias);
}

/* n items in equal parts of at most max_part, rounded up to a multiple of 16: the part size */
static int part_size(int n, int max_part)
{
    int parts = (n + max_part - 1) / max_part;
    int p = (n + parts - 1) / parts;
    return (p + 15) / 16 * 16;
}

/* oneDNN's shape policy (top comment): products with a large plain B or many rows run in parts
 *   NN, B (K,N) > ONEDNN_B_BYTES: a chain of K-slices, the first with beta and the bias, the
 *       others accumulating (sum post-op);
 *   TN, more than ONEDNN_TN_M_MAX rows: row blocks of at most ONEDNN_TN_M_BLOCK;
 *   TN, B (K,N) > ONEDNN_B_BYTES: column blocks (strided B and C, no copies).
 * Fixed by the shape, so the bits are fixed too. A part that oneDNN refuses runs on OpenBLAS:
 * every part is a complete GEMM of its own, so that stays exact. bf16 products follow the same
 * policy with B measured in bf16 bytes. */
#define ONEDNN_B_BYTES ((size_t)3 << 20)
#define ONEDNN_PART_MIN 256
#define ONEDNN_TN_M_MAX 8192
#define ONEDNN_TN_M_BLOCK 4096

/* the part size for splitting n so that each part's B (other x part elements) fits */
static int b_part(int n, int other, size_t esize)
{
    int max_part = (int)(ONEDNN_B_BYTES / (esize * (size_t)other));
    return part_size(n, max_part < ONEDNN_PART_MIN ? ONEDNN_PART_MIN : max_part);
}

static void onednn_product(bool bf16, bool ta, bool tb, int M, int N, int K, float alpha,
                           const void *A, int lda, const void *B, int ldb, float beta, float *C,
                           int ldc, const float *bias)
{
    size_t es = bf16 ? 2 : 4;
    const char *a = A, *b = B;
    size_t b_bytes = (size_t)K * (size_t)N * es;
    if (!ta && !tb && b_bytes > ONEDNN_B_BYTES && K > ONEDNN_PART_MIN) {
        int kc = b_part(K, N, es);
        for (int k0 = 0; k0 < K; k0 += kc) {
            int kk = K - k0 < kc ? K - k0 : kc;
            onednn_part(bf16, false, false, M, N, kk, alpha, a + k0 * es, lda,
                        b + (size_t)k0 * ldb * es, ldb, k0 == 0 ? beta : 1.0f, C, ldc,
                        k0 == 0 ? bias : NULL);
        }
    } else if (ta && !tb && M > ONEDNN_TN_M_MAX) {
        int mc = part_size(M, ONEDNN_TN_M_BLOCK);
        for (int m0 = 0; m0 < M; m0 += mc) {
            int mm = M - m0 < mc ? M - m0 : mc;
            onednn_product(bf16, true, false, mm, N, K, alpha, a + m0 * es, lda, B, ldb, beta,
                           C + (size_t)m0 * ldc, ldc, bias);
        }
    } else if (ta && !tb && b_bytes > ONEDNN_B_BYTES && N > ONEDNN_PART_MIN) {
        int nc = b_part(N, K, es);
        for (int n0 = 0; n0 < N; n0 += nc) {
            int nn = N - n0 < nc ? N - n0 : nc;
            onednn_part(bf16, true, false, M, nn, K, alpha, A, lda, b + n0 * es, ldb, beta,
                        C + n0, ldc, bias != NULL ? bias + n0 : NULL);
        }
    } else {
        onednn_part(bf16, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, bias);
    }
}

// ---- entry points ----------------------------------------------------------------------------

/* the fp32 product on the process's backend, not counted in the stats (the callers count) */
static void f32_product(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float *A,
                        int lda, const float *B, int ldb, float beta, float *C, int ldc, const float *bias)
{
    if (G.backend == ZT_GEMM_ONEDNN) {
        if (K > 0 && !omp_in_parallel() && !(bias != NULL && alpha != 1.0f)) {
            onednn_product(false, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc,
                           bias);
            return;
        }
        STAT_ADD(rerouted);
    }
    blas_gemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, bias);
}

void zt_gemm_f32_bias(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                      const float *A, int lda, const float *B, int ldb, float beta, float *C,
                      int ldc, const float *bias)
{
    if (M <= 0 || N <= 0)
        return;
    ensure_decided();
    long long t0 = now_ns();
    f32_product(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, bias);
    product_done(t0, M, N, K);
}

void zt_gemm_f32(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float *A,
                 int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    zt_gemm_f32_bias(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, NULL);
}

// ---- products on one thread each, several at once (zt_gemm_f32_serial) ------------------------

/* Each OpenMP thread (its number, below ZT_GEMM_SERIAL_THREADS) has its own stream and cache of
 * single-threaded primitives, used only by that thread, so no lock: a primitive owns its
 * scratchpad (scratchpad mode user; oneDNN's shared one is per creating thread and not safe to
 * run from two threads at once). The key holds nthr 1 and serial, so a product's primitive, and
 * its bits, depend on the shape only: not on the thread, nor on how many run beside it.
 * zt_gemm_cache_clear empties them (called where no product runs). */
#ifndef ZT_GEMM_SERIAL_THREADS
#define ZT_GEMM_SERIAL_THREADS 64
#endif
#define SERIAL_CACHE_MAX 32

static struct {
    dnnl_stream_t stream;
    gemm_entry cache[SERIAL_CACHE_MAX];
    int n;
    unsigned long long tick;
} S[ZT_GEMM_SERIAL_THREADS];

static void serial_clear(void)
{
    for (int t = 0; t < ZT_GEMM_SERIAL_THREADS; t++) {
        for (int i = 0; i < S[t].n; i++)
            entry_destroy(&S[t].cache[i]);
        S[t].n = 0;
    }
}

/* An entry whose M or K is given at each call: the operands' memory objects made for this call's
 * shape (a few microseconds against a product of ~1 ms), run, and destroyed */
static dnnl_status_t entry_run_rt(gemm_entry *e, dnnl_stream_t stream, int M, int K, const float *A, const float *B,
                                  float *C)
{
    dnnl_memory_desc_t a_md, b_md, c_md;
    dnnl_memory_t a = NULL, b = NULL, c = NULL;
    dnnl_status_t st = operand_mds(e, M, K, dnnl_f32, &a_md, &b_md, &c_md);
    if (st == dnnl_success)
        st = dnnl_memory_create(&a, &a_md, G.eng, (void *)A);
    if (st == dnnl_success)
        st = dnnl_memory_create(&b, &b_md, G.eng, (void *)B);
    if (st == dnnl_success)
        st = dnnl_memory_create(&c, &c_md, G.eng, C);
    if (st == dnnl_success)
        st = entry_execute(e, stream, a, b, c, NULL);
    if (a != NULL)
        dnnl_memory_destroy(a);
    if (b != NULL)
        dnnl_memory_destroy(b);
    if (c != NULL)
        dnnl_memory_destroy(c);
    return st;
}

/* the product on oneDNN on this thread alone; false: not run (OpenBLAS's turn) */
static bool serial_onednn(unsigned rt, bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda,
                          const float *B, int ldb, float beta, float *C, int ldc)
{
    int t = omp_get_thread_num();
    if (G.backend != ZT_GEMM_ONEDNN || K <= 0 || t >= ZT_GEMM_SERIAL_THREADS)
        return false;
    if (S[t].stream == NULL && dnnl_stream_create(&S[t].stream, G.eng, dnnl_stream_default_flags) != dnnl_success)
        return false;
    gemm_entry key = {.ta = ta, .tb = tb, .M = rt & ZT_GEMM_RUNTIME_M ? -1 : M, .N = N,
                      .K = rt & ZT_GEMM_RUNTIME_K ? -1 : K, .lda = lda, .ldb = ldb, .ldc = ldc, .nthr = 1,
                      .serial = 1, .rt = (int)rt, .alpha_bits = fbits(alpha), .beta_bits = fbits(beta)};
    gemm_entry *e = entry_get((gemm_cache){S[t].cache, &S[t].n, SERIAL_CACHE_MAX, &S[t].tick}, &key, alpha, beta);
    if (e->use_blas)
        return false;
    if ((rt ? entry_run_rt(e, S[t].stream, M, K, A, B, C) : entry_run(e, S[t].stream, A, B, C, NULL)) != dnnl_success) {
        STAT_ADD(fallbacks);
        return false;
    }
    STAT_ADD(calls_onednn);
    return true;
}

void zt_gemm_f32_serial(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float *A, int lda,
                        const float *B, int ldb, float beta, float *C, int ldc)
{
    zt_gemm_f32_serial_rows(0, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void zt_gemm_f32_serial_rows(unsigned runtime, bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                             const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    if (M <= 0 || N <= 0)
        return;
    ensure_decided();
    long long t0 = now_ns();
    /* one thread: oneDNN sizes the primitive and runs it by omp_get_max_threads (outside a
     * parallel region too); the caller's count is put back after */
    int nthr = omp_get_max_threads();
    omp_set_num_threads(1);
    if (!serial_onednn(runtime, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc))
        blas_gemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, NULL);
    omp_set_num_threads(nthr);
    product_done(t0, M, N, K);
}

// ---- bf16 on a level without a bf16 dot product: widened to fp32 while packed ------------------

/* Where the kernels' level has no AVX512_BF16 (avx2, avx512: oneDNN 2.x has no fast bf16 matmul
 * there, only its reference loops or a slow emulation), a bf16 product is an fp32 product of its
 * operands widened to fp32, as PyTorch and oneDNN do on such CPUs. Widening is exact (a bf16 value
 * is an fp32 value), every product of two bf16 values is exact in fp32, and the sums are fp32.
 * gemm_packed_bf16.c runs it: BLIS's loops with the widening inside the packing, so the 2-byte
 * operands are read once and never copied whole (the widened copy handed to the fp32 GEMM that
 * came before cost the avx512 level ~2% of a W1 step, bench/RESULTS.md). Its workspace (the packed
 * blocks, a GEMM workspace like oneDNN's own: docs/memory.md, not in the plan) is kept between
 * calls; products made inside a parallel region get their own. */
static struct {
    pthread_mutex_t lock;
    float *buf;
    size_t cap; /* floats */
} W = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* The bf16 paths' workspace of `need` floats, 64-byte aligned: outside a parallel region W's, kept
 * between calls and held (locked) until workspace_done; inside one (own) a buffer of the caller's.
 * NULL when there is no memory for it (nothing held). */
static float *workspace_get(size_t need, bool own)
{
    size_t bytes = (need * sizeof(float) + 63) / 64 * 64;
    if (own)
        return aligned_alloc(64, bytes);
    pthread_mutex_lock(&W.lock);
    if (W.cap < need) {
        free(W.buf);
        W.buf = aligned_alloc(64, bytes);
        W.cap = W.buf ? need : 0;
    }
    if (W.buf == NULL)
        pthread_mutex_unlock(&W.lock);
    return W.buf;
}

static void workspace_done(float *buf, bool own)
{
    if (own)
        free(buf);
    else
        pthread_mutex_unlock(&W.lock);
}

/* gemm_packed_bf16.c's product, which widens the operands as it packs them, on the process's
 * threads, its workspace kept between calls (W's); inside a parallel region on the calling thread
 * with a workspace of its own. */
static void bf16_packed(bool ta, bool tb, int M, int N, int K, float alpha, const uint16_t *A, int lda,
                        const uint16_t *B, int ldb, float beta, float *C, int ldc, const float *bias)
{
    bool own = omp_in_parallel();
    int threads = own ? 1 : omp_get_max_threads();
    float *buf = workspace_get(zt_gemm_bf16_packed_work_floats(M, N, K, threads), own);
    if (buf == NULL) { /* no memory for the workspace: the reference loops, counted */
        STAT_ADD(fallbacks);
        bf16_reference(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, bias);
        return;
    }
    zt_gemm_bf16_packed(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, bias, buf, threads);
    workspace_done(buf, own);
}

bool zt_gemm_bf16_native(void)
{
    return zt_kernels_isa() >= ZT_ISA_AVX512_BF16;
}

const char *zt_gemm_path(bool bf16)
{
    static char buf[2][160];
    ensure_decided();
    const char *isa = isa_name(dnnl_get_effective_cpu_isa());
    const char *fp32 = G.backend == ZT_GEMM_ONEDNN ? "oneDNN" : "OpenBLAS";
    const char *core = G.backend == ZT_GEMM_ONEDNN ? isa : openblas_get_corename();
    if (!bf16)
        snprintf(buf[0], sizeof buf[0], "%s %s", fp32, core);
    else if (zt_gemm_bf16_native())
        snprintf(buf[1], sizeof buf[1], "oneDNN %s (%s)", isa,
                 zt_kernels_isa() >= ZT_ISA_AMX ? "AMX tiles where oneDNN picks them" : "vdpbf16ps");
    else
        snprintf(buf[1], sizeof buf[1], "widened to fp32 while packed, zerotrain %s",
                 zt_kernels_isa() == ZT_ISA_AVX2 ? "avx2 6x16" : "avx512 14x32");
    return buf[bf16 ? 1 : 0];
}

/* bf16 products go to oneDNN's bf16 matmul where the level has AVX512_BF16 (whatever the fp32
 * backend: OpenBLAS has no bf16 here), needing only the engine; without it, or inside a parallel
 * region, or with alpha != 1 and a bias, the reference loops. Below that level: gemm_packed_bf16.c. */
void zt_gemm_bf16(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const uint16_t *A,
                  int lda, const uint16_t *B, int ldb, float beta, float *C, int ldc,
                  const float *bias)
{
    if (M <= 0 || N <= 0)
        return;
    ensure_decided();
    long long t0 = now_ns();
    if (!zt_gemm_bf16_native() && K > 0) {
        bf16_packed(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, bias);
        product_done(t0, M, N, K);
        return;
    }
    pthread_mutex_lock(&G.lock);
    dnnl_status_t st = dnnl_success;
    bool have = G.have_engine || create_engine(&st);
    pthread_mutex_unlock(&G.lock);
    if (have && K > 0 && !omp_in_parallel() && !(bias != NULL && alpha != 1.0f)) {
        onednn_product(true, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, bias);
        product_done(t0, M, N, K);
        return;
    }
    STAT_ADD(rerouted);
    bf16_reference(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, bias);
    product_done(t0, M, N, K);
}
