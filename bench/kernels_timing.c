/* kernels_timing.c - times every kernel of src/kernels/ forward + backward at the W1 shapes
 * (GPT-2 124M, B=4, T=256, C=768, NH=12, V=50257; N = B*T = 1024 rows), and the GEMM rate of the
 * GEMM-bound ones against the 333 GFLOP/s fp32 peak of this machine (2 cores x 2.6 GHz x 64).
 *
 *   OMP_WAIT_POLICY=passive kernels_timing [reps]   (default 10; OMP_NUM_THREADS sets the threads)
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
            matmul_backward(dinp, dw, bias ? db : NULL, dout, inp, w, N, C, OC, false));
    double g = 2.0 * N * C * OC * 1e-9;
    report(name, g, 2 * g);
    free(inp), free(w), free(b), free(out), free(dout), free(dinp), free(dw), free(db);
}

int main(int argc, char **argv)
{
    if (argc > 1)
        reps = atoi(argv[1]);
    if (reps < 1 || reps > MAXREP)
        reps = 10;
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
        TIME_FB((void)0, encoder_forward(out, tok, wte, wpe, B, T, C), (void)0,
                encoder_backward(dwte, dwpe, out, tok, B, T, C));
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
        TIME_FB((void)0, attention_forward(out, att, qkv, B, T, C, NH), (void)0,
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
    { /* LM head (tied wte, no bias) + softmax cross-entropy */
        size_t n = (size_t)N * V;
        float *logits = buf(n), *logits0 = buf(n), *losses = buf(N), *dl = buf(N);
        int32_t *tg = malloc(sizeof(int32_t) * N);
        for (int i = 0; i < N; i++) {
            tg[i] = (int32_t)((i * 104729u) % (unsigned)V);
            dl[i] = 1.0f / N;
        }
        memcpy(logits0, logits, n * sizeof(float));
        time_matmul("matmul lmhead 768->50257", N, C, V, false);
        TIME_FB(memcpy(logits, logits0, n * sizeof(float)),
                softmax_xent_forward(losses, logits, tg, N, V), (void)0,
                softmax_xent_backward(logits, tg, dl, N, V));
        report("softmax_xent (N x 50257)", 0, 0);
        free(logits), free(logits0), free(losses), free(dl), free(tg);
    }
    return 0;
}
