/* test_kernel_check.h - what the kernel tests (test_kernels.c, test_kernels_llama.c) check with:
 * random fills, fp32-vs-double closeness scaled by the reference's RMS, central finite differences
 * of a double loss, bit identity. Header-only (static helpers), included after cmocka.h; the
 * tolerances are argued in test_kernels.c's opening comment. */
#ifndef ZT_TEST_KERNEL_CHECK_H
#define ZT_TEST_KERNEL_CHECK_H

/* ---- helpers --------------------------------------------------------------------------------- */

#include "test_rng.h"

static void fill(float *x, size_t n, float scale)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(rng_uniform() * scale);
}

static float *falloc(size_t n)
{
    if (n > ((size_t)1 << 40))
        abort(); /* a test bug; also tells the compiler the size is sane */
    float *p = malloc((n ? n : 1) * sizeof(float));
    assert_non_null(p);
    return p;
}

static double *dalloc(size_t n)
{
    double *p = calloc(n ? n : 1, sizeof(double));
    assert_non_null(p);
    return p;
}

static double *to_double(const float *x, size_t n)
{
    double *d = dalloc(n);
    for (size_t i = 0; i < n; i++)
        d[i] = x[i];
    return d;
}

static float *fdup(const float *x, size_t n)
{
    float *p = falloc(n);
    memcpy(p, x, n * sizeof(float));
    return p;
}

static double rms(const double *x, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += x[i] * x[i];
    return n ? sqrt(s / (double)n) : 0.0;
}

/* fp32 kernel vs double reference: |got - ref| <= rtol (|ref| + rms(ref)) element-wise */
static void check_close(const char *what, const float *got, const double *ref, size_t n,
                        double rtol)
{
    double scale = rms(ref, n), worst = 0.0;
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - ref[i]) / (fabs(ref[i]) + scale);
        if (!(e <= worst)) { /* also catches NaN */
            worst = e;
            at = i;
            if (isnan(e))
                break;
        }
    }
    print_message("  %-40s n=%-8zu worst rel err %.2e (bound %.0e)\n", what, n, worst, rtol);
    if (!(worst <= rtol))
        fail_msg("%s: element %zu got %.9g ref %.9g (rel err %.3e > %.1e)", what, at,
                 (double)got[at], ref[at], worst, rtol);
}

/* finite differences of a double loss with respect to every element of x, vs the analytic grad */
typedef double (*loss_fn)(void *ctx);

/* d f / d x[i] by central differences (eps = 1e-6), for every element of x (double; restored) */
static double *fd_grad(loss_fn f, void *ctx, double *x, size_t n)
{
    const double eps = 1e-6;
    double *g = dalloc(n);
    for (size_t i = 0; i < n; i++) {
        double x0 = x[i];
        x[i] = x0 + eps;
        double lp = f(ctx);
        x[i] = x0 - eps;
        double lm = f(ctx);
        x[i] = x0;
        g[i] = (lp - lm) / (2.0 * eps);
    }
    return g;
}

__attribute__((unused)) static void fd_check(const char *what, loss_fn f, void *ctx, double *x, size_t n,
                                             const double *grad)
{
    const double tol = 1e-6;
    double scale = rms(grad, n), worst = 0.0, *fd = fd_grad(f, ctx, x, n);
    for (size_t i = 0; i < n; i++) {
        double e = fabs(fd[i] - grad[i]) / (fabs(grad[i]) + scale);
        if (!(e <= worst))
            worst = e;
        if (!(e <= tol))
            fail_msg("%s: element %zu finite difference %.12g analytic %.12g (rel err %.3e)", what,
                     i, fd[i], grad[i], e);
    }
    free(fd);
    print_message("  %-40s n=%-8zu worst FD rel err %.2e (bound %.0e)\n", what, n, worst, tol);
}

static double dot_gd(const double *g, const double *y, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += g[i] * y[i];
    return s;
}

static void assert_same_bits(const char *what, const float *a, const float *b, size_t n)
{
    if (memcmp(a, b, n * sizeof(float)) != 0) {
        size_t i = 0;
        while (i < n && memcmp(a + i, b + i, sizeof(float)) == 0)
            i++;
        fail_msg("%s: not bit-identical at element %zu (%.9g vs %.9g)", what, i, (double)a[i],
                 (double)b[i]);
    }
}

#endif
