/* gemm_compare.c - fp32 and bf16 matrix-product rates on this machine, on the shapes GPT-2 124M
 * training calls with B*T = 1024 tokens (or, with --model llama-124M, the Llama of that size).
 *
 *   columns: oneDNN matmul fp32 | OpenBLAS cblas_sgemm fp32 | oneDNN matmul bf16 x bf16 -> fp32 |
 *            zerotrain's own zt_gemm_f32 | zt_gemm_bf16 (the trainer's rows only: the backend and
 *            shape policy of src/kernels/gemm.c, which splits some products into parts)
 *
 * The GEMM-bound limit of a training step ("limit fp32" / "limit bf16") sums, per product, the
 * faster of oneDNN's plain call and the trainer's own entry point: a limit the step's own GEMMs
 * could beat would be no limit (the lm_head products run faster in the trainer's parts). The lines
 * per library (each product one plain call) are printed too, and the limit's products at their
 * median call instead of their best: a step calls each product once, and on a noisy host one
 * product's calls spread 5-7% from best to median.
 *
 * C (M x N) = op(A) . op(B), all row-major. The "trainer" rows use exactly the layouts of
 * src/kernels/matmul.c (weight stored (OC, C) as in llm.c):
 *   fwd   out  (N,OC) = inp (N,C)  . W^T        -> A plain, B transposed   ("NT")
 *   dinp  dinp (N,C)  = dout (N,OC) . W         -> A plain, B plain        ("NN")
 *   dW    dW   (OC,C) = dout^T (OC,N) . inp     -> A transposed, B plain   ("TN")
 * The "reference" rows are the plain NN shapes of shared/reference/gemm-here.md, for comparison.
 *
 * Each oneDNN primitive is created once per shape (creation is not timed). The shape list is swept
 * PASSES times; per shape and pass each library gets WARMUP untimed calls, then REPS timed calls
 * interleaved with the other libraries' (this VM's speed drifts, see below); each cell is the best
 * timed call over all passes. bf16 operands are converted
 * once, before timing (the conversion a trainer would pay is not in the number).
 * GFLOP/s = 2*M*N*K / seconds. Peak = cores x GHz x 2 FMA units x 16 fp32 lanes x 2 flops, with
 * the core clock measured by a chain of dependent integer adds (1 per cycle), see measure_ghz().
 *
 * Build alone:  gcc -O3 -march=native bench/gemm_compare.c -o /tmp/gc -DZT_HAVE_DNNL=1 -ldnnl \
 *                   $(pkg-config --cflags --libs openblas) -fopenmp
 * Run:          OMP_NUM_THREADS=2 /tmp/gc [--passes 3] [--reps 3] [--warmup 1] [--quick] [--only NAME]
 *                   [--model gpt2-124M|llama-124M]
 *               OpenBLAS picks its kernels at load time from OPENBLAS_CORETYPE (this sandbox sets
 *               Haswell = AVX2); compare with OPENBLAS_CORETYPE=SkylakeX ... --skip-dnnl.
 */
#define _GNU_SOURCE
#include <cblas.h>
#include "kernels/gemm.h"
#include "kernels/kernels.h"
#include "bench_util.h"
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif
#if defined(ZT_HAVE_DNNL) && ZT_HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>
#define HAVE_DNNL 1
#else
#define HAVE_DNNL 0
#endif


/* ---- other processes' load ---------------------------------------------------------------- */

/* CPU seconds used by every process on the machine (from /proc/stat) and by this one (from
 * /proc/self/stat); the difference over an interval is what other programs took from us. */
static void cpu_seconds(double *all, double *self) {
  *all = *self = 0;
  long hz = 100;
  FILE *f = fopen("/proc/stat", "r");
  if (f) {
    unsigned long long v[8] = {0};
    if (fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
               &v[4], &v[5], &v[6], &v[7]) == 8) /* user nice system idle iowait irq softirq steal */
      *all = (double)(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / hz;
    fclose(f);
  }
  f = fopen("/proc/self/stat", "r");
  if (f) {
    char buf[2048];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    char *p = strrchr(buf, ')'); /* fields after the command name; utime, stime are 14, 15 */
    unsigned long long ut = 0, st = 0;
    if (p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) == 2)
      *self = (double)(ut + st) / hz;
    fclose(f);
  }
}

/* ---- machine: clock and FMA peak ------------------------------------------------------------- */

/* Core clock in GHz: ITER x 100 dependent 64-bit register adds, one per cycle on every x86 core of the
 * last decade, timed by the wall clock. Best of 5. */
static double measure_ghz(void) {
#if defined(__x86_64__)
  const long iters = 20 * 1000 * 1000;
  double best = 1e30;
  for (int r = 0; r < 5; r++) {
    uint64_t x = 0, one = 1;
    double t0 = now_s();
    for (long i = 0; i < iters; i++) {
      /* register operand, not an immediate: some cores fold chains of add-immediate */
      __asm__ volatile(".rept 100\n\taddq %1, %0\n\t.endr" : "+r"(x) : "r"(one));
    }
    double t = now_s() - t0;
    if (t < best) best = t;
  }
  return (double)iters * 100.0 / best * 1e-9;
#else
  return 0.0;
#endif
}

static void print_machine(double *ghz_out, int *threads_out) {
  char model[256] = "?", mhz[64] = "?";
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (f) {
    char line[4096];
    while (fgets(line, sizeof line, f)) {
      char *colon = strchr(line, ':');
      if (!colon) continue;
      char *v = colon + 2;
      v[strcspn(v, "\n")] = 0;
      if (!strncmp(line, "model name", 10) && model[0] == '?') snprintf(model, sizeof model, "%s", v);
      if (!strncmp(line, "cpu MHz", 7) && mhz[0] == '?') snprintf(mhz, sizeof mhz, "%s", v);
    }
    fclose(f);
  }
  int threads = omp_get_max_threads();
  double ghz = measure_ghz();
  /* the FMA rate of the kernels' instruction-set level (kernels/fma_peak.c, dispatched like every
   * kernel: 256-bit FMAs on avx2, 512-bit on avx512 and up) */
  double fma1 = zt_measure_core_fp32_flops() / 1e9, fmaN = 0;
#pragma omp parallel num_threads(threads) reduction(+ : fmaN)
  fmaN += zt_measure_core_fp32_flops() / 1e9;
  print_platform(); /* the CPU and its features, the kernels' level, the GEMM paths */
  printf("cpu: %s, /proc/cpuinfo 'cpu MHz' %s, threads (OMP_NUM_THREADS) %d\n", model, mhz, threads);
  printf("clock measured (dependent integer adds, 1/cycle): %.3f GHz\n", ghz);
  int lanes = zt_cpu_fp32_lanes(); /* the kernels' level's */
  printf("fp32 peak = %d threads x %.3f GHz x 2 FMA x %d lanes x 2 = %.1f GFLOP/s\n", threads, ghz, lanes,
         threads * ghz * 4.0 * lanes);
  printf("fp32 FMA microbenchmark (the kernels' path, 16 chains): 1 thread %.1f GFLOP/s, %d threads %.1f "
         "GFLOP/s\n", fma1, threads, fmaN);
  printf("OpenBLAS: %s, core %s, threads %d\n", openblas_get_config(), openblas_get_corename(),
         openblas_get_num_threads());
  *ghz_out = ghz;
  *threads_out = threads;
}

/* ---- shapes ---------------------------------------------------------------------------------- */

typedef struct {
  const char *name; /* what the trainer uses it for */
  int M, N, K;
  int ta, tb; /* A stored transposed (K x M), B stored transposed (N x K) */
  int per_step; /* calls per training step of the model (12 layers, 1 head); 0 for reference rows */
} shape_t;

static const shape_t SHAPES[] = {
    /* reference rows: plain NN, as in shared/reference/gemm-here.md */
    {"ref qkv", 1024, 2304, 768, 0, 0, 0},
    {"ref attproj", 1024, 768, 768, 0, 0, 0},
    {"ref fc", 1024, 3072, 768, 0, 0, 0},
    {"ref fcproj", 1024, 768, 3072, 0, 0, 0},
    {"ref lm_head", 1024, 50257, 768, 0, 0, 0},
    {"ref dW-like", 768, 3072, 1024, 0, 0, 0},
    {"ref 2048^3", 2048, 2048, 2048, 0, 0, 0},
    /* trainer rows: matmul_forward / matmul_backward layouts, N = B*T = 1024 */
    {"qkv fwd", 1024, 2304, 768, 0, 1, 12},
    {"qkv dinp", 1024, 768, 2304, 0, 0, 12},
    {"qkv dW", 2304, 768, 1024, 1, 0, 12},
    {"attproj fwd", 1024, 768, 768, 0, 1, 12},
    {"attproj dinp", 1024, 768, 768, 0, 0, 12},
    {"attproj dW", 768, 768, 1024, 1, 0, 12},
    {"fc fwd", 1024, 3072, 768, 0, 1, 12},
    {"fc dinp", 1024, 768, 3072, 0, 0, 12},
    {"fc dW", 3072, 768, 1024, 1, 0, 12},
    {"fcproj fwd", 1024, 768, 3072, 0, 1, 12},
    {"fcproj dinp", 1024, 3072, 768, 0, 0, 12},
    {"fcproj dW", 768, 3072, 1024, 1, 0, 12},
    {"lm_head fwd", 1024, 50257, 768, 0, 1, 1},
    {"lm_head dinp", 1024, 768, 50257, 0, 0, 1},
    {"lm_head dW", 50257, 768, 1024, 1, 0, 1},
};

/* --model llama-124M (src/model/llama.c's preset, bench/torch_llama.py's): C 768, 12 query heads over
 * 4 KV heads (k, v: 256 wide), SwiGLU I = 2048, V = 32000, untied head; separate q, k, v, o, gate,
 * up, down Linears as src/model/llama.c calls them, N = B*T = 1024. Rows that share a shape count
 * every Linear of it (q and o; k and v; gate and up). */
static const shape_t LLAMA_SHAPES[] = {
    {"q,o fwd", 1024, 768, 768, 0, 1, 24},
    {"q,o dinp", 1024, 768, 768, 0, 0, 24},
    {"q,o dW", 768, 768, 1024, 1, 0, 24},
    {"k,v fwd", 1024, 256, 768, 0, 1, 24},
    {"k,v dinp", 1024, 768, 256, 0, 0, 24},
    {"k,v dW", 256, 768, 1024, 1, 0, 24},
    {"gate,up fwd", 1024, 2048, 768, 0, 1, 24},
    {"gate,up dinp", 1024, 768, 2048, 0, 0, 24},
    {"gate,up dW", 2048, 768, 1024, 1, 0, 24},
    {"down fwd", 1024, 768, 2048, 0, 1, 12},
    {"down dinp", 1024, 2048, 768, 0, 0, 12},
    {"down dW", 768, 2048, 1024, 1, 0, 12},
    {"lm_head fwd", 1024, 32000, 768, 0, 1, 1},
    {"lm_head dinp", 1024, 768, 32000, 0, 0, 1},
    {"lm_head dW", 32000, 768, 1024, 1, 0, 1},
};
#define MAX_SHAPES 32

/* --gpt2 L,C,N: the trainer rows of any GPT-2 (L blocks, width C, V 50257) at N = B*T tokens, e.g.
 * bench/time_to_loss.sh's small model; the limit line then counts N tokens per step. */
static shape_t GPT2_SHAPES[15];
static char GPT2_NAMES[15][24];
static int gpt2_shapes(const char *spec, int *tokens) {
  int L, C, N;
  if (sscanf(spec, "%d,%d,%d", &L, &C, &N) != 3 || L < 1 || C < 1 || N < 1) return 0;
  const struct { const char *n; int out, in, calls; } lin[5] = {
      {"qkv", 3 * C, C, L}, {"attproj", C, C, L}, {"fc", 4 * C, C, L}, {"fcproj", C, 4 * C, L}, {"lm_head", 50257, C, 1}};
  for (int i = 0; i < 5; i++) {
    shape_t *f = &GPT2_SHAPES[3 * i], *d = f + 1, *w = f + 2;
    snprintf(GPT2_NAMES[3 * i], sizeof GPT2_NAMES[0], "%s fwd", lin[i].n);
    snprintf(GPT2_NAMES[3 * i + 1], sizeof GPT2_NAMES[0], "%s dinp", lin[i].n);
    snprintf(GPT2_NAMES[3 * i + 2], sizeof GPT2_NAMES[0], "%s dW", lin[i].n);
    *f = (shape_t){GPT2_NAMES[3 * i], N, lin[i].out, lin[i].in, 0, 1, lin[i].calls};
    *d = (shape_t){GPT2_NAMES[3 * i + 1], N, lin[i].in, lin[i].out, 0, 0, lin[i].calls};
    *w = (shape_t){GPT2_NAMES[3 * i + 2], lin[i].out, lin[i].in, N, 1, 0, lin[i].calls};
  }
  *tokens = N;
  return 15;
}

static float *alloc_f(size_t n) {
  size_t bytes = (n * sizeof(float) + 63) / 64 * 64;
  float *p = aligned_alloc(64, bytes);
  if (!p) {
    fprintf(stderr, "gemm_compare: out of memory (%zu bytes)\n", bytes);
    exit(1);
  }
  return p;
}

static void fill(float *p, size_t n, uint64_t seed) {
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < n; i++) {
    s ^= s << 13; s ^= s >> 7; s ^= s << 17;
    p[i] = (float)((double)(s >> 40) / (double)(1ull << 24) - 0.5);
  }
}

/* ---- OpenBLAS -------------------------------------------------------------------------------- */

static void blas_run(const shape_t *s, const float *A, const float *B, float *C) {
  int lda = s->ta ? s->M : s->K, ldb = s->tb ? s->K : s->N;
  cblas_sgemm(CblasRowMajor, s->ta ? CblasTrans : CblasNoTrans, s->tb ? CblasTrans : CblasNoTrans,
              s->M, s->N, s->K, 1.0f, A, lda, B, ldb, 0.0f, C, s->N);
}

/* The same product through the trainer's own entry points (src/kernels/gemm.c: the backend and the
 * shape policy that split some products into parts), fp32 or bf16 operands: what the step calls. */
static void zt_run(const shape_t *s, int bf16, const void *A, const void *B, float *C) {
  int lda = s->ta ? s->M : s->K, ldb = s->tb ? s->K : s->N;
  if (bf16)
    zt_gemm_bf16(s->ta, s->tb, s->M, s->N, s->K, 1.0f, A, lda, B, ldb, 0.0f, C, s->N, NULL);
  else
    zt_gemm_f32(s->ta, s->tb, s->M, s->N, s->K, 1.0f, A, lda, B, ldb, 0.0f, C, s->N);
}

/* ---- oneDNN ---------------------------------------------------------------------------------- */
#if HAVE_DNNL
#define DNNL_CHECK(x)                                                                \
  do {                                                                               \
    dnnl_status_t st_ = (x);                                                         \
    if (st_ != dnnl_success) {                                                       \
      fprintf(stderr, "gemm_compare: %s failed: status %d (line %d)\n", #x, (int)st_, \
              __LINE__);                                                             \
      return -1;                                                                     \
    }                                                                                \
  } while (0)

typedef struct {
  dnnl_primitive_t prim;
  dnnl_memory_t a, b, c;
  char impl[128];
} dnnl_mm_t;

static dnnl_engine_t g_eng;
static dnnl_stream_t g_stream;

/* Creates the matmul primitive for shape s with operand type dt (f32 or bf16), dst f32, over the
 * caller's buffers (no copies). */
static int dnnl_mm_create(dnnl_mm_t *mm, const shape_t *s, dnnl_data_type_t dt, void *A, void *B,
                          float *C) {
  dnnl_memory_desc_t a_md, b_md, c_md;
  dnnl_dims_t a_dims = {s->M, s->K}, b_dims = {s->K, s->N}, c_dims = {s->M, s->N};
  DNNL_CHECK(dnnl_memory_desc_init_by_tag(&a_md, 2, a_dims, dt, s->ta ? dnnl_ba : dnnl_ab));
  DNNL_CHECK(dnnl_memory_desc_init_by_tag(&b_md, 2, b_dims, dt, s->tb ? dnnl_ba : dnnl_ab));
  DNNL_CHECK(dnnl_memory_desc_init_by_tag(&c_md, 2, c_dims, dnnl_f32, dnnl_ab));
  dnnl_matmul_desc_t md;
  DNNL_CHECK(dnnl_matmul_desc_init(&md, &a_md, &b_md, NULL, &c_md));
  dnnl_primitive_desc_t pd;
  DNNL_CHECK(dnnl_primitive_desc_create(&pd, &md, NULL, g_eng, NULL));
  const char *impl = "?";
  dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
  snprintf(mm->impl, sizeof mm->impl, "%s", impl);
  DNNL_CHECK(dnnl_primitive_create(&mm->prim, pd));
  dnnl_primitive_desc_destroy(pd);
  DNNL_CHECK(dnnl_memory_create(&mm->a, &a_md, g_eng, A));
  DNNL_CHECK(dnnl_memory_create(&mm->b, &b_md, g_eng, B));
  DNNL_CHECK(dnnl_memory_create(&mm->c, &c_md, g_eng, C));
  return 0;
}

static int dnnl_mm_run(dnnl_mm_t *mm) {
  dnnl_exec_arg_t args[3] = {
      {DNNL_ARG_SRC, mm->a}, {DNNL_ARG_WEIGHTS, mm->b}, {DNNL_ARG_DST, mm->c}};
  DNNL_CHECK(dnnl_primitive_execute(mm->prim, g_stream, 3, args));
  DNNL_CHECK(dnnl_stream_wait(g_stream));
  return 0;
}

static void dnnl_mm_destroy(dnnl_mm_t *mm) {
  dnnl_memory_destroy(mm->a);
  dnnl_memory_destroy(mm->b);
  dnnl_memory_destroy(mm->c);
  dnnl_primitive_destroy(mm->prim);
}

static const char *isa_name(dnnl_cpu_isa_t isa) {
  switch ((int)isa) {
    case dnnl_cpu_isa_all: return "all (no limit)";
    case dnnl_cpu_isa_sse41: return "sse41";
    case dnnl_cpu_isa_avx: return "avx";
    case dnnl_cpu_isa_avx2: return "avx2";
    case dnnl_cpu_isa_avx512_core: return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
    case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
    default: return "other";
  }
}

/* float -> bf16, round to nearest even */
static void to_bf16(uint16_t *dst, const float *src, size_t n) {
  for (size_t i = 0; i < n; i++) {
    uint32_t u;
    memcpy(&u, &src[i], 4);
    u += 0x7FFFu + ((u >> 16) & 1u);
    dst[i] = (uint16_t)(u >> 16);
  }
}
#endif

/* ---- timing ---------------------------------------------------------------------------------- */

/* This VM's throughput drifts: stretches of seconds to minutes run at about half speed (another
 * tenant on the same physical cores, presumably). So the libraries are interleaved call by call
 * (oneDNN fp32, OpenBLAS, oneDNN bf16, again ...) and the whole shape list is swept PASSES times;
 * each cell is the best single call over all passes. */

enum { LIB_DNNL = 0, LIB_BLAS = 1, LIB_BF16 = 2, LIB_ZT32 = 3, LIB_ZT16 = 4, NLIB = 5 };

typedef struct {
  const shape_t *s;
  float *A, *B, *C[NLIB];
  int have[NLIB];
  double best[NLIB];
  double t[NLIB][64]; /* every timed call (the first 64), for the median */
  int nt[NLIB];
#if HAVE_DNNL
  uint16_t *Ah, *Bh;
  dnnl_mm_t mm[NLIB]; /* [LIB_DNNL] fp32, [LIB_BF16] bf16 */
#endif
} job_t;

/* the median of library l's timed calls of job j (bench_util.h's: the mean of the middle two for an
 * even count) */
static double median_call(const job_t *j, int l) {
  double t[64];
  int n = j->nt[l];
  if (n == 0) return j->best[l];
  memcpy(t, j->t[l], (size_t)n * sizeof *t);
  return median(t, n);
}

static int run_one(job_t *j, int lib) {
  if (lib == LIB_BLAS) {
    blas_run(j->s, j->A, j->B, j->C[LIB_BLAS]);
    return 0;
  }
  if (lib == LIB_ZT32) {
    zt_run(j->s, 0, j->A, j->B, j->C[LIB_ZT32]);
    return 0;
  }
#if HAVE_DNNL
  if (lib == LIB_ZT16) {
    zt_run(j->s, 1, j->Ah, j->Bh, j->C[LIB_ZT16]);
    return 0;
  }
  return dnnl_mm_run(&j->mm[lib]);
#else
  return -1;
#endif
}

/* max |x - y| / (max |y| + tiny), to check the libraries agree */
static double rel_diff(const float *x, const float *y, size_t n) {
  double md = 0, my = 0;
  for (size_t i = 0; i < n; i++) {
    double d = fabs((double)x[i] - (double)y[i]);
    if (d > md) md = d;
    if (fabs((double)y[i]) > my) my = fabs((double)y[i]);
  }
  return md / (my + 1e-30);
}

/* of two libraries' times for one product, the one that ran and was faster; -1 when neither ran */
static int faster(const job_t *j, int a, int b) {
  if (!j->have[a]) return j->have[b] ? b : -1;
  if (!j->have[b]) return a;
  return j->best[a] < j->best[b] ? a : b;
}

int main(int argc, char **argv) {
  int reps = 3, passes = 3, warmup = 1, quick = 0, skip_dnnl = 0;
  const char *only = NULL, *model = "gpt2-124M", *gpt2 = NULL;
  int tokens = 1024;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--passes") && i + 1 < argc) passes = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--warmup") && i + 1 < argc) warmup = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--quick")) quick = 1;
    else if (!strcmp(argv[i], "--skip-dnnl")) skip_dnnl = 1;
    else if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
    else if (!strcmp(argv[i], "--model") && i + 1 < argc) model = argv[++i];
    else if (!strcmp(argv[i], "--gpt2") && i + 1 < argc) gpt2 = argv[++i];
    else {
      fprintf(stderr,
              "usage: %s [--passes N (3)] [--reps N per pass (3)] [--warmup N per pass (1)]\n"
              "          [--quick: skip the vocabulary shapes] [--only SUBSTRING of a shape name]\n"
              "          [--skip-dnnl: OpenBLAS column only] [--model gpt2-124M|llama-124M]\n"
              "          [--gpt2 L,C,N: a GPT-2 of L blocks and width C at N = B*T tokens]\n",
              argv[0]);
      return 2;
    }
  }
  zt_gemm_backend_get(); /* before any oneDNN call here: holds oneDNN to the kernels' level (gemm.c) */
  const shape_t *shapes = SHAPES;
  int nshapes = (int)(sizeof SHAPES / sizeof SHAPES[0]);
  if (gpt2) {
    if (!(nshapes = gpt2_shapes(gpt2, &tokens))) {
      fprintf(stderr, "gemm_compare: --gpt2 %s: expected L,C,N (positive integers)\n", gpt2);
      return 2;
    }
    shapes = GPT2_SHAPES;
    model = gpt2;
  } else if (!strcmp(model, "llama-124M")) {
    shapes = LLAMA_SHAPES;
    nshapes = (int)(sizeof LLAMA_SHAPES / sizeof LLAMA_SHAPES[0]);
  } else if (strcmp(model, "gpt2-124M") && strcmp(model, "gpt2")) {
    fprintf(stderr, "gemm_compare: --model %s: the shapes of gpt2-124M and llama-124M are known\n", model);
    return 2;
  }
  if (reps < 1) reps = 1;
  if (passes < 1) passes = 1;
  if (warmup < 0) warmup = 0;
#if !HAVE_DNNL
  skip_dnnl = 1;
#endif

  double ghz;
  int threads;
  print_machine(&ghz, &threads);
  double peak = threads * ghz * 64.0;

#if HAVE_DNNL
  const dnnl_version_t *v = dnnl_version();
  if (dnnl_engine_create(&g_eng, dnnl_cpu, 0) != dnnl_success ||
      dnnl_stream_create(&g_stream, g_eng, dnnl_stream_default_flags) != dnnl_success) {
    fprintf(stderr, "gemm_compare: oneDNN engine/stream creation failed\n");
    return 1;
  }
  printf("oneDNN %d.%d.%d, effective ISA: %s (the highest ISA oneDNN will use on this CPU)\n",
         v->major, v->minor, v->patch, isa_name(dnnl_get_effective_cpu_isa()));
#else
  printf("oneDNN: not compiled in (ZT_HAVE_DNNL unset): oneDNN columns are '-'\n");
#endif

  /* set up every shape once: buffers, bf16 copies, oneDNN primitives */
  job_t jobs[MAX_SHAPES];
  int njobs = 0;
  for (int si = 0; si < nshapes && njobs < MAX_SHAPES; si++) {
    const shape_t *s = &shapes[si];
    if (quick && (s->M >= 32000 || s->N >= 32000 || s->K >= 32000)) continue;
    if (only && !strstr(s->name, only)) continue;
    job_t *j = &jobs[njobs++];
    memset(j, 0, sizeof *j);
    j->s = s;
    size_t na = (size_t)s->M * s->K, nb = (size_t)s->K * s->N, nc = (size_t)s->M * s->N;
    j->A = alloc_f(na);
    j->B = alloc_f(nb);
    fill(j->A, na, 1 + si);
    fill(j->B, nb, 1000 + si);
    for (int l = 0; l < NLIB; l++) j->best[l] = 1e30;
    j->C[LIB_BLAS] = alloc_f(nc);
    memset(j->C[LIB_BLAS], 0, nc * 4);
    j->have[LIB_BLAS] = 1;
    if (s->per_step) { /* the trainer's rows: also through its own entry points */
      j->C[LIB_ZT32] = alloc_f(nc);
      memset(j->C[LIB_ZT32], 0, nc * 4);
      j->have[LIB_ZT32] = 1;
    }
#if HAVE_DNNL
    if (!skip_dnnl) {
      j->C[LIB_DNNL] = alloc_f(nc);
      j->C[LIB_BF16] = alloc_f(nc);
      memset(j->C[LIB_DNNL], 0, nc * 4);
      memset(j->C[LIB_BF16], 0, nc * 4);
      if (dnnl_mm_create(&j->mm[LIB_DNNL], s, dnnl_f32, j->A, j->B, j->C[LIB_DNNL]) == 0) {
        j->have[LIB_DNNL] = 1;
      }
      j->Ah = aligned_alloc(64, (na * 2 + 63) / 64 * 64);
      j->Bh = aligned_alloc(64, (nb * 2 + 63) / 64 * 64);
      if (j->Ah && j->Bh) {
        to_bf16(j->Ah, j->A, na);
        to_bf16(j->Bh, j->B, nb);
        if (dnnl_mm_create(&j->mm[LIB_BF16], s, dnnl_bf16, j->Ah, j->Bh, j->C[LIB_BF16]) == 0) {
          j->have[LIB_BF16] = 1;
        }
        if (s->per_step) {
          j->C[LIB_ZT16] = alloc_f(nc);
          memset(j->C[LIB_ZT16], 0, nc * 4);
          j->have[LIB_ZT16] = 1;
        }
      }
    }
#endif
  }

  printf("%d passes x %d reps per library per shape, libraries interleaved call by call, %d "
         "untimed call(s) per library per shape per pass; each cell is the best call.\n"
         "GFLOP/s = 2MNK / s; (%%) = of the %.0f GFLOP/s fp32 peak above (oneDNN's bf16 "
         "kernels use AVX512_BF16 vdpbf16ps, whose peak is 2x that)\n\n",
         passes, reps, warmup, peak);
  fflush(stdout);

  double other_max = 0;
  for (int p = 0; p < passes; p++) {
    double all0, self0, all1, self1, w0 = now_s();
    cpu_seconds(&all0, &self0);
    for (int ji = 0; ji < njobs; ji++) {
      job_t *j = &jobs[ji];
      for (int l = 0; l < NLIB; l++)
        for (int w = 0; w < warmup && j->have[l]; w++)
          if (run_one(j, l)) j->have[l] = 0;
      for (int r = 0; r < reps; r++)
        for (int l = 0; l < NLIB; l++) {
          if (!j->have[l]) continue;
          double t0 = now_s();
          if (run_one(j, l)) {
            j->have[l] = 0;
            continue;
          }
          double t = now_s() - t0;
          if (t < j->best[l]) j->best[l] = t;
          if (j->nt[l] < 64) j->t[l][j->nt[l]++] = t;
        }
      if (p == 0) {
        size_t nc = (size_t)j->s->M * j->s->N;
        double e32 = j->have[LIB_DNNL] ? rel_diff(j->C[LIB_DNNL], j->C[LIB_BLAS], nc) : 0;
        double e16 = j->have[LIB_BF16] ? rel_diff(j->C[LIB_BF16], j->C[LIB_BLAS], nc) : 0;
        double z32 = j->have[LIB_ZT32] ? rel_diff(j->C[LIB_ZT32], j->C[LIB_BLAS], nc) : 0;
        double z16 = j->have[LIB_ZT16] ? rel_diff(j->C[LIB_ZT16], j->C[LIB_BLAS], nc) : 0;
        if (e32 > 1e-3 || e16 > 5e-2 || z32 > 1e-3 || z16 > 5e-2)
          printf("WARNING %s: results disagree with OpenBLAS: fp32 rel %.2g, bf16 rel %.2g, zerotrain's "
                 "fp32 %.2g, bf16 %.2g\n", j->s->name, e32, e16, z32, z16);
      }
    }
    cpu_seconds(&all1, &self1);
    double other = ((all1 - all0) - (self1 - self0)) / (now_s() - w0);
    if (other > other_max) other_max = other;
    printf("pass %d/%d: %.1f s, other processes used %.2f CPUs on average\n", p + 1, passes,
           now_s() - w0, other < 0 ? 0 : other);
    fflush(stdout);
  }
  if (other_max > 0.2)
    printf("NOTE: other programs were busy during some pass (up to %.2f CPUs): numbers are the "
           "best over all passes, but rerun on a quiet machine if cells look low.\n",
           other_max);
  printf("\n");

  printf("| shape | M x N x K | op | oneDNN fp32 | OpenBLAS fp32 (%s) | oneDNN bf16->fp32 | "
         "zerotrain fp32 (zt_gemm_f32) | zerotrain bf16 (zt_gemm_bf16) | oneDNN/OpenBLAS fp32 speed | "
         "bf16/best fp32 speed |\n",
         openblas_get_corename());
  printf("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
  double tot_t[NLIB] = {0}, tot_f = 0, tot_best32 = 0, tot_best16 = 0, tot_med32 = 0, tot_med16 = 0;
  int tot_ok = !skip_dnnl, lib_ok[NLIB];
  for (int l = 0; l < NLIB; l++) lib_ok[l] = 1;
  for (int ji = 0; ji < njobs; ji++) {
    job_t *j = &jobs[ji];
    const shape_t *s = j->s;
    double flop = 2.0 * s->M * s->N * s->K;
    char cell[NLIB][48];
    for (int l = 0; l < NLIB; l++) {
      if (j->have[l])
        snprintf(cell[l], sizeof cell[l], "%.0f (%.0f%%)", flop / j->best[l] * 1e-9,
                 100.0 * flop / j->best[l] * 1e-9 / peak);
      else
        snprintf(cell[l], sizeof cell[l], "-");
    }
    char ratio[32] = "-", bfr[32] = "-";
    if (j->have[LIB_DNNL])
      snprintf(ratio, sizeof ratio, "%.2fx", j->best[LIB_BLAS] / j->best[LIB_DNNL]);
    double best32 = j->best[LIB_BLAS];
    if (j->have[LIB_DNNL] && j->best[LIB_DNNL] < best32) best32 = j->best[LIB_DNNL];
    if (j->have[LIB_BF16]) snprintf(bfr, sizeof bfr, "%.2fx", best32 / j->best[LIB_BF16]);
    const char *op = s->ta ? "TN" : (s->tb ? "NT" : "NN");
    printf("| %s | %d x %d x %d | %s | %s | %s | %s | %s | %s | %s | %s |\n", s->name, s->M, s->N, s->K,
           op, cell[LIB_DNNL], cell[LIB_BLAS], cell[LIB_BF16], cell[LIB_ZT32], cell[LIB_ZT16], ratio, bfr);
    if (s->per_step) { /* one training step's GEMMs */
      tot_f += flop * s->per_step;
      for (int l = 0; l < NLIB; l++) {
        tot_t[l] += j->best[l] * s->per_step;
        if (!j->have[l]) lib_ok[l] = 0;
      }
      /* the limit: each product the faster way the trainer could run it (oneDNN's plain call or
       * the trainer's own entry point, which may split it into parts); where oneDNN has no such
       * primitive (bf16 below the avx512_bf16 level: its reference loops are not timed), the
       * trainer's own */
      int l32 = faster(j, LIB_ZT32, LIB_DNNL), l16 = faster(j, LIB_ZT16, LIB_BF16);
      if (l32 < 0 || l16 < 0) tot_ok = 0;
      else {
        tot_best32 += j->best[l32] * s->per_step;
        tot_best16 += j->best[l16] * s->per_step;
        tot_med32 += median_call(j, l32) * s->per_step;
        tot_med16 += median_call(j, l16) * s->per_step;
      }
    }
  }
  int rows_all = 0, rows_run = 0;
  for (int si = 0; si < nshapes; si++) rows_all += shapes[si].per_step > 0;
  for (int ji = 0; ji < njobs; ji++) rows_run += jobs[ji].s->per_step > 0;
  if (tot_f > 0 && rows_run == rows_all) { /* only meaningful with every trainer row */
    printf("\nOne %s%s training step's Linear GEMMs at B*T = %d (each row x its calls per step: "
           "one per block, or per Linear of the shape, and one per lm_head row; attention's batched products excluded), "
           "%.0f GFLOP, from the best times above:\n",
           gpt2 ? "GPT-2 L,C,N = " : "", model, tokens, tot_f * 1e-9);
    const char *names[NLIB] = {"oneDNN fp32", "OpenBLAS fp32", "oneDNN bf16", "zerotrain fp32", "zerotrain bf16"};
    for (int l = 0; l < NLIB; l++)
      if (lib_ok[l])
        printf("  %-14s %7.1f ms  = %4.0f GFLOP/s  -> at most %.0f tok/s if nothing else ran\n",
               names[l], tot_t[l] * 1e3, tot_f / tot_t[l] * 1e-9, tokens / tot_t[l]);
    if (tot_ok) {
      printf("The limit, each product the faster of oneDNN's plain call and the trainer's entry point:\n");
      printf("  %-14s %7.1f ms  = %4.0f GFLOP/s  -> at most %.0f tok/s if nothing else ran\n", "limit fp32",
             tot_best32 * 1e3, tot_f / tot_best32 * 1e-9, tokens / tot_best32);
      printf("  %-14s %7.1f ms  = %4.0f GFLOP/s  -> at most %.0f tok/s if nothing else ran\n", "limit bf16",
             tot_best16 * 1e3, tot_f / tot_best16 * 1e-9, tokens / tot_best16);
      /* a step calls each product once: on a noisy host its calls add up to about their median,
       * not their best (bench/RESULTS.md, "Gradients assigned, not zeroed; bias rows fetched ahead") */
      printf("The same products at their median call (the spread of one product's calls here; the limit "
             "stays the best):\n  fp32 %7.1f ms (+%.1f%%), bf16 %7.1f ms (+%.1f%%)\n", tot_med32 * 1e3,
             100 * (tot_med32 / tot_best32 - 1), tot_med16 * 1e3, 100 * (tot_med16 / tot_best16 - 1));
    }
  }

#if HAVE_DNNL
  if (!skip_dnnl) {
    printf("\noneDNN implementations chosen (fp32 | bf16):\n");
    for (int ji = 0; ji < njobs; ji++)
      printf("  %-14s %s | %s\n", jobs[ji].s->name,
             jobs[ji].have[LIB_DNNL] ? jobs[ji].mm[LIB_DNNL].impl : "-",
             jobs[ji].have[LIB_BF16] ? jobs[ji].mm[LIB_BF16].impl : "-");
  }
#endif
  for (int ji = 0; ji < njobs; ji++) {
    job_t *j = &jobs[ji];
#if HAVE_DNNL
    if (j->have[LIB_DNNL]) dnnl_mm_destroy(&j->mm[LIB_DNNL]);
    if (j->have[LIB_BF16]) dnnl_mm_destroy(&j->mm[LIB_BF16]);
    free(j->Ah);
    free(j->Bh);
#endif
    free(j->A);
    free(j->B);
    for (int l = 0; l < NLIB; l++) free(j->C[l]);
  }
#if HAVE_DNNL
  dnnl_stream_destroy(g_stream);
  dnnl_engine_destroy(g_eng);
#endif
  return 0;
}
