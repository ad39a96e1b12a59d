/* kernels_timing.c - times every kernel of src/kernels/ forward + backward at the W1 shapes
 * (GPT-2 124M, B=4, T=256, C=768, NH=12, V=50257; N = B*T = 1024 rows), and the GEMM rate of the
 * GEMM-bound ones against the 333 GFLOP/s fp32 peak of this machine (2 cores x 2.6 GHz x 64).
 * With --llama, the kernels of one llama-124M step instead (src/model/llama.c's: RMSNorm, RoPE,
 * grouped-query attention 12 over 4 heads, SwiGLU 2048, the seven Linears, the 32000-wide head),
 * each also multiplied by its calls per step, so the list adds up to a step's kernel time; and the
 * bf16 path's fused forms (norms and SwiGLU writing bf16, AdamW writing the bf16 compute copy)
 * against the separate passes they replaced, side by side. Without it, after the W1 kernels, GPT-2's
 * backward fused forms likewise (GELU's backward writing c_fc's rounded output gradient and its bias
 * gradient; the rounding of an output gradient and its bias gradient in one pass), and the bias
 * walks again on cold buffers (12 sets, as a step meets them).
 *
 *   OMP_WAIT_POLICY=passive kernels_timing [--llama] [reps]   (default 10; OMP_NUM_THREADS: threads)
 *
 * Each kernel: wall time, the median over reps after one warm-up call and in brackets the best;
 * and cpu time, the process's CPU seconds divided by the thread count: on a machine shared with
 * other work this is the kernel's own time where the wall time is not (see report()).
 * Buffers are first touched before timing; data is random. OpenBLAS picks its kernels at load time
 * from the CPU unless OPENBLAS_CORETYPE forces them: on this AVX-512 machine, Haswell (AVX2)
 * kernels run the GEMMs at about half the rate of the SkylakeX/Cooperlake ones.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <omp.h>

#include "kernels/kernels.h"
#include "optim/optim.h"
#include "bench_util.h"

#define PEAK_GFLOPS 333.0

char *openblas_get_corename(void); /* OpenBLAS exports it; cblas.h of 0.3.21 declares it too */

enum { MAXREP = 100 };
static int reps = 10;
static double tf[MAXREP], tb[MAXREP], cf[MAXREP], cb[MAXREP];

/* wall: median and best; cpu: median CPU seconds of the process / threads, which on a shared
 * machine (other processes taking turns on the cores) is the kernel's own time; run with
 * OMP_WAIT_POLICY=passive so that threads waiting at a barrier sleep instead of spinning into it.
 * GFLOP/s from the best wall time and from the cpu time. */
static void report(const char *name, double gflop_f, double gflop_b)
{
    double nt = omp_get_max_threads();
    double f = median(tf, reps), b = median(tb, reps);
    double xf = median(cf, reps) / nt, xb = median(cb, reps) / nt;
    printf(
        "%-25s wall fwd %7.2f (%7.2f) bwd %7.2f (%7.2f) ms | cpu fwd %7.2f bwd %7.2f sum %7.2f ms",
        name, 1e3 * f, 1e3 * tf[0], 1e3 * b, 1e3 * tb[0], 1e3 * xf, 1e3 * xb, 1e3 * (xf + xb));
    if (gflop_f > 0)
        printf("\n%-25s GFLOP/s fwd %6.1f bwd %6.1f (best wall); fwd %6.1f bwd %6.1f (cpu) = "
               "%3.0f%% / %3.0f%% of %g",
               "", gflop_f / tf[0], gflop_b / tb[0], gflop_f / xf, gflop_b / xb,
               100 * gflop_f / xf / PEAK_GFLOPS / (nt / 2),
               100 * gflop_b / xb / PEAK_GFLOPS / (nt / 2), PEAK_GFLOPS * nt / 2);
    printf("\n");
}

/* the timing loop: warm-up, then reps of (prep; forward) and (prep; backward) */
#define TIME_FB(prep_f, fwd, prep_b, bwd)                                                          \
    do {                                                                                           \
        prep_f;                                                                                    \
        fwd;                                                                                       \
        prep_b;                                                                                    \
        bwd;                                                                                       \
        for (int r_ = 0; r_ < reps; r_++) {                                                        \
            prep_f;                                                                                \
            double c0_ = cpu_s(), t0_ = now_s();                                                   \
            fwd;                                                                                   \
            double t1_ = now_s(), c1_ = cpu_s();                                                   \
            prep_b;                                                                                \
            double c2_ = cpu_s(), t2_ = now_s();                                                   \
            bwd;                                                                                   \
            double t3_ = now_s(), c3_ = cpu_s();                                                   \
            tf[r_] = t1_ - t0_;                                                                    \
            tb[r_] = t3_ - t2_;                                                                    \
            cf[r_] = c1_ - c0_;                                                                    \
            cb[r_] = c3_ - c2_;                                                                    \
        }                                                                                          \
    } while (0)

static void time_matmul(const char *name, int N, int C, int OC, bool bias)
{
    float *inp = buf((size_t)N * C), *w = buf((size_t)OC * C), *b = bias ? buf(OC) : NULL;
    float *out = buf((size_t)N * OC), *dout = buf((size_t)N * OC), *dinp = buf((size_t)N * C);
    float *dw = buf((size_t)OC * C), *db = buf(OC);
    TIME_FB((void)0, matmul_forward(out, inp, w, b, N, C, OC), (void)0,
            matmul_backward(dinp, dw, bias ? db : NULL, dout, inp, w, N, C, OC, 0));
    double g = 2.0 * N * C * OC * 1e-9;
    report(name, g, 2 * g);
    free(inp), free(w), free(b), free(out), free(dout), free(dinp), free(dw), free(db);
}

/* softmax cross-entropy over (N, V) logits (restored before each forward: backward overwrites) */
static void time_xent(const char *name, int N, int V)
{
    size_t n = (size_t)N * V;
    float *logits = buf(n), *logits0 = buf(n), *losses = buf(N), *dl = buf(N);
    int32_t *tg = malloc(sizeof(int32_t) * N);
    for (int i = 0; i < N; i++) {
        tg[i] = (int32_t)((i * 104729u) % (unsigned)V);
        dl[i] = 1.0f / N;
    }
    memcpy(logits0, logits, n * sizeof(float));
    TIME_FB(memcpy(logits, logits0, n * sizeof(float)), softmax_xent_forward(losses, logits, tg, N, V), (void)0,
            softmax_xent_backward(logits, tg, dl, N, V));
    report(name, 0, 0);
    free(logits), free(logits0), free(losses), free(dl), free(tg);
}

/* per step: median cpu time (fwd + bwd) x calls, summed over the Llama list */
static double step_ms;

static void per_step(const char *name, int calls)
{
    double nt = omp_get_max_threads();
    double ms = 1e3 * (median(cf, reps) + median(cb, reps)) / nt * calls;
    step_ms += ms;
    printf("%-25s x %2d per step = %8.1f ms (cpu)\n", "", calls, ms);
    (void)name;
}

static void time_linear(const char *name, int N, int C, int OC, int calls)
{
    time_matmul(name, N, C, OC, false);
    per_step(name, calls);
}

/* A (the "fwd" timings) against B (the "bwd" ones): cpu ms each, and B's per step; A is not added
 * to the step (it is the path B replaced) */
static void report_ab(const char *name, const char *a, const char *b, int calls)
{
    double nt = omp_get_max_threads();
    double xa = 1e3 * median(cf, reps) / nt, xb = 1e3 * median(cb, reps) / nt;
    printf("%-25s cpu %s %7.2f | %s %7.2f ms (%.2fx)\n", name, a, xa, b, xb, xa / xb);
    step_ms += xb * calls;
    printf("%-25s x %2d per step = %8.1f ms (cpu; the two-pass form %.1f)\n", "", calls, xb * calls, xa * calls);
}

/* The bf16 path's fused forms against the passes they replace (llama.c's block under bf16
 * compute): each pair gives the same bits (tests/test_kernels_llama.c, tests/test_optim.c). */
static void time_bf16_forms(int B, int T, int C, int I, int L)
{
    const int N = B * T;
    const size_t nc = (size_t)N * C, ni = (size_t)N * I;
    printf("\nbf16 compute: fused forms vs the passes they replace (forward kernels; cpu time)\n");
    float *a = buf(nc), *b = buf(nc), *w = buf(C), *res = buf(nc), *x = buf(nc), *rstd = buf(N);
    uint16_t *lp = malloc(nc * 2);
    /* block start: RMSNorm, then q, k and v each rounded its input (before) */
    TIME_FB((void)0,
            (rmsnorm_forward(x, rstd, a, w, 1e-5f, N, C), zt_f32_to_bf16(lp, x, nc), zt_f32_to_bf16(lp, x, nc),
             zt_f32_to_bf16(lp, x, nc)),
            (void)0, rmsnorm_forward_to(lp, ZT_LP_BF16, rstd, a, w, 1e-5f, N, C));
    report_ab("rmsnorm1 -> bf16", "norm+3 roundings", "rmsnorm_forward_to", L + 1);
    TIME_FB((void)0,
            (residual_forward(res, a, b, nc), rmsnorm_forward(x, rstd, res, w, 1e-5f, N, C),
             zt_f32_to_bf16(lp, x, nc), zt_f32_to_bf16(lp, x, nc)),
            (void)0, residual_rmsnorm_forward(res, lp, ZT_LP_BF16, rstd, a, b, w, 1e-5f, N, C));
    report_ab("residual+rmsnorm2 -> bf16", "add+norm+2 roundings", "fused", L);
    free(a), free(b), free(w), free(res), free(x), free(rstd), free(lp);
    float *g = buf(ni), *u = buf(ni), *h = buf(ni);
    uint16_t *hl = malloc(ni * 2);
    TIME_FB((void)0, (swiglu_forward(h, g, u, ni), zt_f32_to_bf16(hl, h, ni)), (void)0,
            swiglu_forward_to(hl, ZT_LP_BF16, g, u, ni));
    report_ab("swiglu -> bf16", "swiglu+rounding", "swiglu_forward_to", L);
    /* backward: d gate and d up rounded for the gate and up Linears */
    float *dg = buf(ni), *du = buf(ni);
    uint16_t *dgl = malloc(ni * 2);
    TIME_FB((void)0, (swiglu_backward(dg, du, h, g, u, ni), zt_f32_to_bf16(dgl, dg, ni), zt_f32_to_bf16(hl, du, ni)),
            (void)0, swiglu_backward_to(dgl, hl, ZT_LP_BF16, h, g, u, ni));
    report_ab("swiglu bwd -> bf16", "swiglu bwd+2 roundings", "swiglu_backward_to", L);
    free(g), free(u), free(h), free(hl), free(dg), free(du), free(dgl);
    /* the LM head's d logits: in place then rounded into the staging, or rounded as made */
    {
        const int V = 32000;
        size_t nv = (size_t)N * V;
        float *probs = buf(nv), *work = buf(nv), *dl = buf(N);
        uint16_t *st = malloc(nv * 2);
        int32_t *tg = malloc(sizeof(int32_t) * N);
        for (int i = 0; i < N; i++) tg[i] = (int32_t)((i * 104729u) % (unsigned)V), dl[i] = 1.0f / N;
        TIME_FB(memcpy(work, probs, nv * 4), (softmax_xent_backward(work, tg, dl, N, V), zt_f32_to_bf16(st, work, nv)),
                (void)0, softmax_xent_backward_to(st, ZT_LP_BF16, probs, tg, dl, N, V, 0));
        report_ab("xent bwd -> bf16 (32000)", "in place+rounding", "softmax_xent_backward_to", 1);
        free(probs), free(work), free(dl), free(st), free(tg);
    }
    /* AdamW over a quarter of llama-124M's parameters, then the compute copy (x 4 per step) */
    size_t np = 124668672 / 4;
    float *p = buf(np), *gr = buf(np), *m = buf(np), *v = buf(np);
    for (size_t i = 0; i < np; i++) v[i] = v[i] < 0 ? -v[i] : v[i];
    uint16_t *pl = malloc(np * 2);
    TIME_FB((void)0,
            (zt_adamw_update(p, gr, m, v, np, 1e-9f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f, 1000), zt_f32_to_bf16(pl, p, np)),
            (void)0, zt_adamw_update_round(p, gr, m, v, np, 1e-9f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f, 1000, ZT_LP_BF16, pl));
    report_ab("AdamW + bf16 copy (1/4)", "update+rounding", "zt_adamw_update_round", 4);
    free(p), free(gr), free(m), free(v), free(pl);
    printf("\n");
}

/* GPT-2's backward under bf16 (and fp32) compute: the fused forms against the separate passes
 * (the same bits: tests/test_kernels.c test_fused_backward_forms). Per block: c_fc's d fch from
 * GELU's backward, rounded, and its bias gradient; the other three Linears with a bias round
 * their output gradient and sum their bias gradient. */
static void time_gpt2_bwd_forms(int N, int C, int L)
{
    const int H = 4 * C;
    const size_t nh = (size_t)N * H, nq = (size_t)N * 3 * C, nc = (size_t)N * C;
    printf("\nGPT-2 backward: fused forms vs the passes they replace (cpu time)\n");
    float *x = buf(nh), *d = buf(nh), *dx = buf(nh), *db = buf(H);
    uint16_t *st = malloc(nh * 2);
    TIME_FB((void)0, (gelu_backward(dx, x, d, nh), zt_f32_to_bf16(st, dx, nh), matmul_dbias(db, dx, N, H)), (void)0,
            gelu_backward_to(st, ZT_LP_BF16, db, x, d, N, H));
    report_ab("gelu bwd -> bf16 + dbias", "gelu bwd+rounding+dbias", "gelu_backward_to", L);
    TIME_FB((void)0, (gelu_backward(dx, x, d, nh), matmul_dbias(db, dx, N, H)), (void)0,
            gelu_backward_to(dx, 0, db, x, d, N, H));
    report_ab("gelu bwd fp32 + dbias", "gelu bwd+dbias", "gelu_backward_to", L);
    TIME_FB((void)0, (zt_f32_to_bf16(st, d, nq), matmul_dbias(db, d, N, 3 * C)), (void)0,
            matmul_dbias_rows(db, st, ZT_LP_BF16, NULL, d, NULL, NULL, N, 3 * C));
    report_ab("qkv: rounding + dbias", "rounding+dbias", "matmul_dbias_rows", L);
    TIME_FB((void)0, (zt_f32_to_bf16(st, d, nc), matmul_dbias(db, d, N, C)), (void)0,
            matmul_dbias_rows(db, st, ZT_LP_BF16, NULL, d, NULL, NULL, N, C));
    report_ab("proj: rounding + dbias", "rounding+dbias", "matmul_dbias_rows", 2 * L);
    free(x), free(d), free(dx), free(db), free(st);
}

/* The bias walks on cold buffers, as a step meets them: L buffer sets (a step's L blocks, ~40 MB
 * each, beyond the caches) walked in turn, the wall time of all L, best of reps. The warm numbers
 * above call one set again and again, which the step never does: cold, the row stride of the column
 * blocks defeats the hardware prefetchers, and matmul.c prefetches the rows ahead (bench/RESULTS.md,
 * "Gradients assigned, not zeroed; bias rows fetched ahead"). */
static void time_cold_bias_walks(int N, int C, int L)
{
    const int H = 4 * C;
    const size_t nh = (size_t)N * H, nq = (size_t)N * 3 * C, nc = (size_t)N * C;
    float **fch = malloc(L * sizeof *fch), **dh = malloc(L * sizeof *dh), **dq = malloc(L * sizeof *dq);
    float **dc = malloc(L * sizeof *dc), *db = buf(H);
    uint16_t *st = malloc(nh * 2);
    for (int l = 0; l < L; l++) fch[l] = buf(nh), dh[l] = buf(nh), dq[l] = buf(nq), dc[l] = buf(2 * nc);
    double best[3] = {1e30, 1e30, 1e30};
    for (int r = 0; r < reps; r++) {
        double t0 = omp_get_wtime();
        for (int l = 0; l < L; l++) gelu_backward_to(st, ZT_LP_BF16, db, fch[l], dh[l], N, H);
        double t1 = omp_get_wtime();
        for (int l = 0; l < L; l++) {
            matmul_dbias_rows(db, st, ZT_LP_BF16, NULL, dq[l], NULL, NULL, N, 3 * C);
            matmul_dbias_rows(db, st, ZT_LP_BF16, NULL, dc[l], NULL, NULL, N, C);
            matmul_dbias_rows(db, st, ZT_LP_BF16, NULL, dc[l] + nc, NULL, NULL, N, C);
        }
        double t2 = omp_get_wtime();
        for (int l = 0; l < L; l++) {
            matmul_dbias(db, dh[l], N, H);
            matmul_dbias(db, dq[l], N, 3 * C);
            matmul_dbias(db, dc[l], N, C);
            matmul_dbias(db, dc[l] + nc, N, C);
        }
        double t3 = omp_get_wtime(), t[3] = {t1 - t0, t2 - t1, t3 - t2};
        for (int k = 0; k < 3; k++) best[k] = t[k] < best[k] ? t[k] : best[k];
    }
    printf("\nBias walks on cold buffers (%d buffer sets walked in turn, wall, best of %d)\n", L, reps);
    printf("%-48s %7.2f ms a step\n", "gelu bwd -> bf16 + dbias (gelu_backward_to)", 1e3 * best[0]);
    printf("%-48s %7.2f ms a step\n", "qkv + 2 proj: rounding + dbias (dbias_rows)", 1e3 * best[1]);
    printf("%-48s %7.2f ms a step\n", "fp32 dbias: fc, qkv, 2 proj (matmul_dbias)", 1e3 * best[2]);
    for (int l = 0; l < L; l++) free(fch[l]), free(dh[l]), free(dq[l]), free(dc[l]);
    free(fch), free(dh), free(dq), free(dc), free(db), free(st);
}

/* llama-124M (src/model/llama.c's preset): B=4 T=256 C=768 NH=12 NKV=4 hs=64 I=2048 V=32000 */
static int llama_main(void)
{
    const int B = 4, T = 256, C = 768, NH = 12, NKV = 4, hs = C / NH, KV = NKV * hs, I = 2048, V = 32000;
    const int N = B * T, L = 12;
    printf("llama-124M kernels: B=%d T=%d C=%d NH=%d NKV=%d I=%d V=%d, N=%d rows, %d threads, median of %d\n",
           B, T, C, NH, NKV, I, V, N, omp_get_max_threads(), reps);
    { /* rmsnorm: two per block + the final one */
        float *inp = buf((size_t)N * C), *w = buf(C), *out = buf((size_t)N * C), *rstd = buf(N);
        float *dinp = buf((size_t)N * C), *dw = buf(C);
        TIME_FB((void)0, rmsnorm_forward(out, rstd, inp, w, 1e-5f, N, C), (void)0,
                rmsnorm_backward(dinp, dw, out, inp, w, rstd, N, C));
        report("rmsnorm", 0, 0);
        per_step("rmsnorm", 2 * L + 1);
        free(inp), free(w), free(out), free(rstd), free(dinp), free(dw);
    }
    { /* rope on q (NH heads) and k (NKV heads) */
        float inv[32];
        rope_inv_freq(inv, hs, 10000.0, 0, 0, 0, 0);
        float *q = buf((size_t)N * C), *k = buf((size_t)N * KV);
        TIME_FB((void)0, rope_forward(q, inv, B, T, NH, hs, NULL), (void)0, rope_backward(q, inv, B, T, NH, hs, NULL));
        report("rope q (12 heads)", 0, 0);
        per_step("rope q", L);
        TIME_FB((void)0, rope_forward(k, inv, B, T, NKV, hs, NULL), (void)0, rope_backward(k, inv, B, T, NKV, hs, NULL));
        report("rope k (4 heads)", 0, 0);
        per_step("rope k", L);
        free(q), free(k);
    }
    { /* grouped-query attention */
        float *q = buf((size_t)N * C), *k = buf((size_t)N * KV), *v = buf((size_t)N * KV);
        float *out = buf((size_t)N * C), *att = buf((size_t)B * NH * T * T);
        float *dq = buf((size_t)N * C), *dk = buf((size_t)N * KV), *dv = buf((size_t)N * KV);
        float *scratch = buf(attention_gqa_scratch_floats(B, T, NKV));
        TIME_FB((void)0, attention_gqa_forward(out, att, q, k, v, B, T, NH, NKV, hs, C, KV, NULL), (void)0,
                attention_gqa_backward(dq, dk, dv, scratch, out, q, k, v, att, B, T, NH, NKV, hs, C, KV));
        double g = 4.0 * T * T * C * B * 1e-9 / 2; /* the causal half of the T x T square */
        report("attention gqa 12/4", g, 2 * g);
        per_step("attention", L);
        free(q), free(k), free(v), free(out), free(att), free(dq), free(dk), free(dv), free(scratch);
    }
    { /* flash attention (the models' default kernel), fp32 products and bf16 products (bf16 compute's
       * default); not in the step sum above, which counts the naive row */
        float *q = buf((size_t)N * C), *k = buf((size_t)N * KV), *v = buf((size_t)N * KV), *lse = buf((size_t)B * NH * T);
        float *out = buf((size_t)N * C), *dout = buf((size_t)N * C);
        float *dq = buf((size_t)N * C), *dk = buf((size_t)N * KV), *dv = buf((size_t)N * KV);
        float *scratch = buf(flash_attention_scratch_floats(B, T, NH, NKV, hs));
        double g = 4.0 * T * T * C * B * 1e-9 / 2; /* the causal half; backward runs 5 products to 2 */
        for (int bf = 0; bf < 2; bf++) {
            TIME_FB((void)0, flash_attention_gqa_forward(out, lse, scratch, q, k, v, B, T, NH, NKV, hs, C, KV, bf, NULL),
                    (void)0,
                    flash_attention_gqa_backward(dq, dk, dv, scratch, dout, q, k, v, out, lse, B, T, NH, NKV, hs, C,
                                                 KV, bf, NULL));
            report(bf ? "flash gqa 12/4 bf16" : "flash gqa 12/4 fp32", g, 2.5 * g);
        }
        free(q), free(k), free(v), free(lse), free(out), free(dout), free(dq), free(dk), free(dv), free(scratch);
    }
    { /* swiglu */
        size_t n = (size_t)N * I;
        float *g = buf(n), *u = buf(n), *o = buf(n), *dg = buf(n), *du = buf(n);
        TIME_FB((void)0, swiglu_forward(o, g, u, n), (void)0, swiglu_backward(dg, du, o, g, u, n));
        report("swiglu (N x 2048)", 0, 0);
        per_step("swiglu", L);
        free(g), free(u), free(o), free(dg), free(du);
    }
    { /* residual adds, two per block (forward only: backward is a copy into din) */
        size_t n = (size_t)N * C;
        float *a = buf(n), *b = buf(n), *o = buf(n);
        TIME_FB((void)0, residual_forward(o, a, b, n), (void)0, (void)0);
        report("residual (fwd only)", 0, 0);
        per_step("residual", 2 * L);
        free(a), free(b), free(o);
    }
    time_bf16_forms(B, T, C, I, L);
    time_linear("matmul q, o   768->768", N, C, C, 2 * L);
    time_linear("matmul k, v   768->256", N, C, KV, 2 * L);
    time_linear("matmul gate,up 768->2048", N, C, I, 2 * L);
    time_linear("matmul down  2048->768", N, I, C, L);
    time_linear("matmul lm_head 768->32000", N, C, V, 1);
    time_xent("softmax_xent (N x 32000)", N, V);
    per_step("softmax_xent", 1);
    printf("\nkernels of one llama-124M step (forward + backward, cpu time, medians x calls): %.1f ms\n", step_ms);
    return 0;
}

int main(int argc, char **argv)
{
    bool llama = false;
    if (argc > 1 && !strcmp(argv[1], "--llama")) {
        llama = true;
        argv++, argc--;
    }
    print_platform();
    if (argc > 1)
        reps = atoi(argv[1]);
    if (reps < 1 || reps > MAXREP)
        reps = 10;
    if (llama) {
        printf("OpenBLAS kernels: %s%s\n", openblas_get_corename(),
               getenv("OPENBLAS_CORETYPE") ? " (forced by OPENBLAS_CORETYPE)" : "");
        return llama_main();
    }
    const int B = 4, T = 256, C = 768, NH = 12, V = 50257, N = B * T;
    const char *wp = getenv("OMP_WAIT_POLICY");
    printf("OpenBLAS kernels: %s%s\n", openblas_get_corename(),
           getenv("OPENBLAS_CORETYPE") ? " (forced by OPENBLAS_CORETYPE)" : "");
    printf("W1 kernels: B=%d T=%d C=%d NH=%d V=%d, N=%d rows, %d threads, median of %d, "
           "OMP_WAIT_POLICY=%s\n", B, T, C, NH, V, N, omp_get_max_threads(), reps, wp ? wp : "(unset)");

    { /* encoder */
        int32_t *tok = malloc(sizeof(int32_t) * N);
        for (int i = 0; i < N; i++)
            tok[i] = (int32_t)((i * 7919u) % (unsigned)V);
        float *wte = buf((size_t)V * C), *wpe = buf((size_t)1024 * C), *out = buf((size_t)N * C);
        float *dwte = buf((size_t)V * C), *dwpe = buf((size_t)1024 * C);
        TIME_FB((void)0, encoder_forward(out, tok, wte, wpe, B, T, C, NULL), (void)0,
                encoder_backward(dwte, dwpe, out, tok, B, T, C, NULL));
        report("encoder", 0, 0);
        free(tok), free(wte), free(wpe), free(out), free(dwte), free(dwpe);
    }
    { /* layernorm */
        float *inp = buf((size_t)N * C), *w = buf(C), *b = buf(C), *out = buf((size_t)N * C);
        float *mean = buf(N), *rstd = buf(N), *dinp = buf((size_t)N * C), *dw = buf(C),
              *db = buf(C);
        TIME_FB((void)0, layernorm_forward(out, mean, rstd, inp, w, b, N, C), (void)0,
                layernorm_backward(dinp, dw, db, out, inp, w, mean, rstd, N, C));
        report("layernorm", 0, 0);
        free(inp), free(w), free(b), free(out), free(mean), free(rstd), free(dinp), free(dw);
        free(db);
    }
    time_matmul("matmul qkv    768->2304", N, C, 3 * C, true);
    time_matmul("matmul attprj 768->768", N, C, C, true);
    time_matmul("matmul fc     768->3072", N, C, 4 * C, true);
    time_matmul("matmul fcproj 3072->768", N, 4 * C, C, true);
    { /* attention */
        float *qkv = buf((size_t)N * 3 * C), *out = buf((size_t)N * C);
        float *att = buf((size_t)B * NH * T * T), *dqkv = buf((size_t)N * 3 * C);
        float *scratch = buf(attention_scratch_floats(B, T, C, NH));
        TIME_FB((void)0, attention_forward(out, att, qkv, B, T, C, NH, NULL), (void)0,
                attention_backward(dqkv, scratch, out, qkv, att, B, T, C, NH));
        /* flops actually run: 64-row causal blocks do sum(ncols) = 640 of 256 * 256 / 64 */
        const int blk = 64;
        double sum_cols = 0;
        for (int i0 = 0; i0 < T; i0 += blk)
            sum_cols += (i0 + blk < T ? i0 + blk : T) * (double)(T - i0 < blk ? T - i0 : blk);
        double g = 2.0 * 2.0 * sum_cols * (C / NH) * B * NH * 1e-9;
        report("attention", g, 2 * g);
        printf("%-25s (%.3f / %.3f GFLOP run; the full T x T square would be %.3f / %.3f)\n", "", g,
               2 * g, 4.0 * T * T * C * B * 1e-9, 8.0 * T * T * C * B * 1e-9);
        free(qkv), free(out), free(att), free(dqkv), free(scratch);
    }
    { /* flash attention (the models' default kernel): fp32 products, and bf16 products (bf16
       * compute's default) */
        float *qkv = buf((size_t)N * 3 * C), *out = buf((size_t)N * C), *lse = buf((size_t)B * NH * T);
        float *dout = buf((size_t)N * C), *dqkv = buf((size_t)N * 3 * C);
        float *scratch = buf(flash_attention_scratch_floats(B, T, NH, NH, C / NH));
        double g = 4.0 * T * T * C * B * 1e-9 / 2; /* the causal half; backward runs 5 products to 2 */
        for (int bf = 0; bf < 2; bf++) {
            TIME_FB((void)0, flash_attention_forward(out, lse, scratch, qkv, B, T, C, NH, bf, NULL), (void)0,
                    flash_attention_backward(dqkv, scratch, dout, qkv, out, lse, B, T, C, NH, bf, NULL));
            report(bf ? "flash attention bf16" : "flash attention fp32", g, 2.5 * g);
        }
        free(qkv), free(out), free(lse), free(dout), free(dqkv), free(scratch);
    }
    { /* gelu */
        size_t n = (size_t)N * 4 * C;
        float *x = buf(n), *y = buf(n), *dx = buf(n);
        TIME_FB((void)0, gelu_forward(y, x, n), (void)0, gelu_backward(dx, x, y, n));
        report("gelu (N x 3072)", 0, 0);
        free(x), free(y), free(dx);
    }
    { /* residual */
        size_t n = (size_t)N * C;
        float *a = buf(n), *b = buf(n), *o = buf(n);
        TIME_FB((void)0, residual_forward(o, a, b, n), (void)0, (void)0);
        report("residual (fwd only)", 0, 0);
        free(a), free(b), free(o);
    }
    /* LM head (tied wte, no bias) + softmax cross-entropy */
    time_matmul("matmul lmhead 768->50257", N, C, V, false);
    time_xent("softmax_xent (N x 50257)", N, V);
    time_gpt2_bwd_forms(N, C, 12);
    time_cold_bias_walks(N, C, 12);
    return 0;
}
