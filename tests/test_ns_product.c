/* test_ns_product.c - Muon's Newton-Schulz products (src/kernels/ns_product.c) on every
 * instruction-set level this CPU has, in one process: each element is the chain of FMAs over k in
 * order that the file promises (bit for bit against that chain written out in scalar code), within
 * the chain's rounding bound of a double-precision reference, the same bits on 1 and 2 threads and
 * on every level, and X X^T's mirrored half equal to the product computed whole. Shapes are odd
 * (edges not multiples of any level's tile), with k past one block (256) and outputs past one
 * block of tiles, and large enough for the threaded path (r·r·n > 262144). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <math.h>
#include <omp.h>

#include "core/cpu_isa.h"
#include "kernels/kernels.h"

#define TEST_RNG_SEED 0x36D5EEDull
#include "test_rng.h"

static const int SHAPES[][2] = {{1, 1}, {5, 9}, {37, 53}, {13, 300}, {97, 300}, {130, 517}, {64, 64}};
enum { NSHAPES = sizeof SHAPES / sizeof SHAPES[0] };

static float *random_matrix(size_t n)
{
    float *x = malloc(n * sizeof *x);
    assert_non_null(x);
    for (size_t i = 0; i < n; i++) x[i] = (float)rng_uniform();
    return x;
}

/* element (i, j) of a·b as the kernel defines it: c = fma(a_k, b_k, c) for k = 0..K-1 from 0 */
static float fma_chain(const float *a, int64_t sa, const float *b, int64_t sb, int64_t K)
{
    float c = 0.0f;
    for (int64_t k = 0; k < K; k++) c = fmaf(a[k * sa], b[k * sb], c);
    return c;
}

/* |c - sum| <= gamma_K · sum |a_k b_k| (a chain of K FMAs rounds K times: Higham's gamma_K with
 * u = 2^-24), plus the double reference's own error, far below */
static void check_bound(float c, const float *a, int64_t sa, const float *b, int64_t sb, int64_t K,
                        const char *what, int r, int n)
{
    double s = 0, abs_s = 0;
    for (int64_t k = 0; k < K; k++) {
        double p = (double)a[k * sa] * (double)b[k * sb];
        s += p, abs_s += fabs(p);
    }
    const double u = 0x1.0p-24, gamma = (double)K * u / (1.0 - (double)K * u);
    if (fabs((double)c - s) > gamma * abs_s + 1e-300)
        fail_msg("%s %dx%d: %.9g vs double %.12g, bound %.3g", what, r, n, c, s, gamma * abs_s);
}

typedef struct {
    float *gram, *mul, *gram_sym; /* X X^T, S X, S S^T (S symmetric r x r) */
} results;

static void run_products(results *o, const float *X, const float *S, int r, int n, float *pack)
{
    zt_ns_gram(o->gram, X, r, n, pack);
    zt_ns_mul(o->mul, S, X, r, n, pack);
    zt_ns_gram(o->gram_sym, S, r, r, pack);
}

static void alloc_results(results *o, int r, int n)
{
    o->gram = malloc(sizeof(float) * r * r), o->mul = malloc(sizeof(float) * r * n);
    o->gram_sym = malloc(sizeof(float) * r * r);
    assert_true(o->gram && o->mul && o->gram_sym);
}

static void free_results(results *o) { free(o->gram), free(o->mul), free(o->gram_sym); }

static void assert_same_results(const results *a, const results *b, int r, int n, const char *why)
{
    if (memcmp(a->gram, b->gram, sizeof(float) * r * r) || memcmp(a->mul, b->mul, sizeof(float) * r * n) ||
        memcmp(a->gram_sym, b->gram_sym, sizeof(float) * r * r))
        fail_msg("%dx%d: the products' bits differ %s", r, n, why);
}

static void products_on_every_level(void **state)
{
    (void)state;
    const zt_isa best = zt_isa_best(zt_cpu_features_get()), start = (zt_isa)zt_kernels_isa();
    for (int t = 0; t < NSHAPES; t++) {
        const int r = SHAPES[t][0], n = SHAPES[t][1];
        float *X = random_matrix((size_t)r * n), *S = random_matrix((size_t)r * r);
        for (int i = 0; i < r; i++)
            for (int j = 0; j < i; j++) S[i * r + j] = S[j * r + i];
        float *pack = malloc(sizeof(float) * zt_ns_pack_floats(r, n));
        results first, one, two;
        alloc_results(&first, r, n), alloc_results(&one, r, n), alloc_results(&two, r, n);
        for (int isa = ZT_ISA_AVX2; isa <= best && isa < ZT_ISA_LEVELS; isa++) {
            zt_error err = {0};
            assert_int_equal(zt_kernels_select(isa, &err), ZT_OK);
            omp_set_num_threads(1);
            run_products(&one, X, S, r, n, pack);
            omp_set_num_threads(2);
            run_products(&two, X, S, r, n, pack);
            char why[96];
            snprintf(why, sizeof why, "between 1 and 2 threads on %s", zt_isa_name((zt_isa)isa));
            assert_same_results(&one, &two, r, n, why);
            if (isa == ZT_ISA_AVX2) {
                run_products(&first, X, S, r, n, pack);
                continue;
            }
            snprintf(why, sizeof why, "between avx2 and %s", zt_isa_name((zt_isa)isa));
            assert_same_results(&first, &one, r, n, why);
        }
        /* the definition, element by element; the rounding bound against double */
        for (int i = 0; i < r; i++)
            for (int j = 0; j < r; j++) {
                float want = fma_chain(X + i * n, 1, X + j * n, 1, n);
                if (memcmp(&want, &first.gram[i * r + j], sizeof want))
                    fail_msg("X X^T %dx%d (%d,%d): %.9g, the FMA chain %.9g", r, n, i, j, first.gram[i * r + j], want);
                check_bound(first.gram[i * r + j], X + i * n, 1, X + j * n, 1, n, "X X^T", r, n);
                want = fma_chain(S + i * r, 1, S + j * r, 1, r);
                if (memcmp(&want, &first.gram_sym[i * r + j], sizeof want))
                    fail_msg("S S^T %dx%d (%d,%d): %.9g, the FMA chain %.9g", r, n, i, j, first.gram_sym[i * r + j],
                             want);
            }
        for (int i = 0; i < r; i++)
            for (int j = 0; j < n; j++) {
                float want = fma_chain(S + i * r, 1, X + j, n, r);
                if (memcmp(&want, &first.mul[i * n + j], sizeof want))
                    fail_msg("S X %dx%d (%d,%d): %.9g, the FMA chain %.9g", r, n, i, j, first.mul[i * n + j], want);
                check_bound(first.mul[i * n + j], S + i * r, 1, X + j, n, r, "S X", r, n);
            }
        /* the mirrored half is exact: S S^T (half, mirrored) = S·S (every element computed) */
        float *whole = malloc(sizeof(float) * r * r);
        zt_ns_mul(whole, S, S, r, r, pack);
        if (memcmp(whole, first.gram_sym, sizeof(float) * r * r))
            fail_msg("%dx%d: S S^T mirrored differs from S S computed whole", r, r);
        print_message("ns products %dx%d: the FMA chain's bits on every level, 1 and 2 threads\n", r, n);
        free(whole), free(pack), free(X), free(S);
        free_results(&first), free_results(&one), free_results(&two);
    }
    zt_error err = {0};
    assert_int_equal(zt_kernels_select(start, &err), ZT_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(products_on_every_level),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
