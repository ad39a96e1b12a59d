/* test_precision.c - the precision contract's pieces: fp32 -> bf16 conversion (nearest-even, ties,
 * NaN, infinities, the vector path against the scalar rule), fp16 rounding (overflow to infinity
 * past 65504, subnormals, ties), stochastic rounding (unbiased, deterministic per index, never to
 * infinity), the low-precision Linear (forward and backward against double references on the
 * rounded operands, and against fp32 within bf16's accuracy), DeepSpeed's loss scaler step by
 * step, and the policy table (supported combinations, the description line); bf16-low's 2-byte
 * storage; zero1's sharded fp32 master under bf16 against ddp on one process.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <math.h>

#include "kernels/kernels.h"
#include "zerotrain/zerotrain.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static float frand(void) { /* uniform in [-1, 1) */
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}
static uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static float bf(uint16_t h) { return u2f((uint32_t)h << 16); }

/* the reference: the nearest bf16 by distance in double, ties to the even mantissa */
static float bf16_nearest(float x) {
    if (fpclassify(x) == FP_SUBNORMAL) return signbit(x) ? -0.0f : 0.0f; /* flushed, as the hardware does */
    uint32_t u = f2u(x), lo = u & 0xffff0000u, hi = lo + 0x10000u;
    double dl = fabs((double)x - (double)u2f(lo)), dh = fabs((double)u2f(hi) - (double)x);
    if (dl < dh) return u2f(lo);
    if (dh < dl) return u2f(hi);
    return ((lo >> 16) & 1) ? u2f(hi) : u2f(lo);
}

static void test_bf16_conversion(void **state) {
    (void)state;
    enum { N = 100003 }; /* odd: the vector body and the scalar tail */
    float *x = malloc(N * sizeof *x);
    uint16_t *h = malloc(N * sizeof *h);
    for (int i = 0; i < N; i++) x[i] = frand() * powf(2.0f, (float)(i % 300 - 150)); /* subnormals too */
    x[0] = 1.0f + 1.0f / 256;         /* a tie: rounds to even (1.0) */
    x[1] = 1.0f + 3.0f / 256;         /* a tie: rounds to even (1 + 4/256) */
    x[2] = INFINITY, x[3] = -INFINITY, x[4] = NAN, x[5] = 0.0f, x[6] = -0.0f;
    x[7] = u2f(0x7f7fffffu);          /* FLT_MAX rounds up to infinity */
    x[8] = -1e-40f;                   /* subnormal: flushed to -0 */
    zt_f32_to_bf16(h, x, N);
    assert_true(bf(h[0]) == 1.0f);
    assert_true(bf(h[1]) == 1.0f + 4.0f / 256);
    assert_true(isinf(bf(h[2])) && bf(h[2]) > 0 && isinf(bf(h[3])) && bf(h[3]) < 0);
    assert_true(isnan(bf(h[4])));
    assert_true(f2u(bf(h[5])) == 0 && f2u(bf(h[6])) == 0x80000000u);
    assert_true(isinf(bf(h[7])));
    assert_true(f2u(bf(h[8])) == 0x80000000u);
    for (int i = 8; i < N; i++)
        if (bf(h[i]) != bf16_nearest(x[i])) fail_msg("element %d: %a -> %a, want %a", i, x[i], bf(h[i]), bf16_nearest(x[i]));
    float *back = malloc(N * sizeof *back), *r = malloc(N * sizeof *r);
    zt_bf16_to_f32(back, h, N);
    memcpy(r, x, N * sizeof *r);
    zt_round_bf16(r, N);
    for (int i = 8; i < N; i++) assert_true(back[i] == bf(h[i]) && r[i] == back[i]);
    free(x), free(h), free(back), free(r);
}

static void test_fp16_rounding(void **state) {
    (void)state;
    float x[] = {65504.0f, 65519.0f, 65520.0f, -70000.0f, 1.0f + 1.0f / 2048, 1.0f + 3.0f / 2048,
                 5.9604645e-08f /* 2^-24, the smallest subnormal */, 2.0e-8f, 1e-5f, NAN, 0.1f};
    float y[sizeof x / sizeof *x];
    zt_round_fp16(y, x, sizeof x / sizeof *x);
    assert_true(y[0] == 65504.0f);                 /* the largest fp16 */
    assert_true(y[1] == 65504.0f);                 /* below the rounding boundary */
    assert_true(isinf(y[2]) && y[2] > 0);          /* 65520 rounds to infinity, as fp16 storage does */
    assert_true(isinf(y[3]) && y[3] < 0);
    assert_true(y[4] == 1.0f);                     /* tie to even */
    assert_true(y[5] == 1.0f + 4.0f / 2048);
    assert_true(y[6] == 5.9604645e-08f);
    assert_true(y[7] == 0.0f);                     /* below half the smallest subnormal */
    assert_true(fabsf(y[8] - 1e-5f) <= 5.9604645e-08f / 2); /* subnormal grid 2^-24 */
    assert_true(isnan(y[9]));
    assert_true(fabsf(y[10] - 0.1f) <= 0.1f / 2048);
    /* the vector path equals the scalar one (odd length, random magnitudes incl. overflow) */
    enum { N = 4099 };
    float *a = malloc(N * sizeof *a), *b = malloc(N * sizeof *b), *c = malloc(N * sizeof *c);
    for (int i = 0; i < N; i++) a[i] = frand() * powf(2.0f, (float)(i % 44 - 26));
    zt_round_fp16(b, a, N);
    for (int i = 0; i < N; i++) zt_round_fp16(c + i, a + i, 1);
    for (int i = 0; i < N; i++)
        if (f2u(b[i]) != f2u(c[i])) fail_msg("element %d: vector %a, scalar %a", i, b[i], c[i]);
    free(a), free(b), free(c);
}

static void test_stochastic_rounding(void **state) {
    (void)state;
    enum { N = 200000 };
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
    const float v = 1.0f + 1.0f / 1024; /* between 1 and 1 + 2^-7: up with probability 1/8 */
    for (int i = 0; i < N; i++) x[i] = v;
    zt_round_bf16_stochastic(x, N, 42, 1000);
    int up = 0;
    for (int i = 0; i < N; i++) {
        assert_true(x[i] == 1.0f || x[i] == 1.0f + 1.0f / 128);
        up += x[i] != 1.0f;
    }
    double p = (double)up / N, sd = sqrt(0.125 * 0.875 / N);
    if (fabs(p - 0.125) > 5 * sd) fail_msg("rounded up %.4f of the time, want 0.125 +- %.4f", p, 5 * sd);
    /* deterministic by (seed, index): the second half alone draws what it drew inside the whole */
    for (int i = 0; i < N; i++) y[i] = v;
    zt_round_bf16_stochastic(y + N / 2, N / 2, 42, 1000 + N / 2);
    assert_memory_equal(x + N / 2, y + N / 2, (N / 2) * sizeof *x);
    /* negative values are symmetric; the largest finite never rounds up to infinity */
    float z[2] = {-v, u2f(0x7f7fffffu)};
    zt_round_bf16_stochastic(z, 2, 7, 0);
    assert_true(z[0] == -1.0f || z[0] == -(1.0f + 1.0f / 128));
    assert_true(isfinite(z[1]));
    free(x), free(y);
}

/* out (N,OC) = rnd(x) rnd(W)^T + b in double; rnd: the mode's rounding */
static float rnd(int kind, float x) {
    if (kind == ZT_LP_BF16) return bf16_nearest(x);
    float y;
    zt_round_fp16(&y, &x, 1);
    return y;
}

static void check_linear(int kind) {
    enum { N = 37, C = 70, OC = 45 };
    float *x = malloc(N * C * 4), *w = malloc(OC * C * 4), *b = malloc(OC * 4), *out = malloc(N * OC * 4);
    float *dout = malloc(N * OC * 4), *dx = malloc(N * C * 4), *dw = calloc(OC * C, 4), *db = calloc(OC, 4);
    float *wq = malloc(OC * C * 4);
    uint16_t *wh = malloc(OC * C * 2);
    for (int i = 0; i < N * C; i++) x[i] = frand();
    for (int i = 0; i < OC * C; i++) w[i] = frand() * 0.2f;
    for (int i = 0; i < OC; i++) b[i] = frand();
    for (int i = 0; i < N * OC; i++) dout[i] = frand();
    const void *wl;
    if (kind == ZT_LP_BF16) {
        zt_f32_to_bf16(wh, w, OC * C);
        wl = wh;
    } else {
        zt_round_fp16(wq, w, OC * C);
        wl = wq;
    }
    void *staging = aligned_alloc(64, (matmul_lp_staging_bytes(kind, N, OC) + 63) / 64 * 64);
    /* the saved input: rnd(x) as the kernel leaves it, what backward multiplies by */
    size_t xl_floats = matmul_saved_input_floats(kind, N * C);
    assert_int_equal(xl_floats, kind == ZT_LP_BF16 ? (N * C * 2 + 63) / 64 * 16 : (N * C * 4 + 63) / 64 * 16);
    float *xl = aligned_alloc(64, xl_floats * 4), *xr = aligned_alloc(64, xl_floats * 4);
    matmul_forward_lp(out, xl, x, wl, b, N, C, OC, kind);
    zt_round_to_lp(kind, xr, x, N * C);
    assert_memory_equal(xl, xr, (size_t)N * C * (kind == ZT_LP_BF16 ? 2 : 4));
    matmul_backward_lp(dx, dw, db, dout, xl, wl, N, C, OC, 0, kind, staging);
    { /* the bias gradient summed in the rounding pass: the bits of the two passes apart */
        float *dx2 = malloc(N * C * 4), *dw2 = calloc(OC * C, 4), *db2 = calloc(OC, 4);
        void *staging2 = aligned_alloc(64, (matmul_lp_staging_bytes(kind, N, OC) + 63) / 64 * 64);
        matmul_backward_lp(dx2, dw2, NULL, dout, xl, wl, N, C, OC, 0, kind, staging2);
        matmul_dbias(db2, dout, N, OC);
        assert_memory_equal(staging, staging2, matmul_lp_staging_bytes(kind, N, OC));
        assert_memory_equal(dx, dx2, N * C * 4);
        assert_memory_equal(dw, dw2, OC * C * 4);
        assert_memory_equal(db, db2, OC * 4);
        /* dweight assigned (ZT_MM_DWEIGHT_SET) over whatever it held: the bits of adding into zeros */
        for (int i = 0; i < OC * C; i++) dw2[i] = -7.0f;
        matmul_backward_lp(NULL, dw2, NULL, dout, xl, wl, N, C, OC, ZT_MM_DWEIGHT_SET, kind, staging2);
        assert_memory_equal(dw, dw2, OC * C * 4);
        free(dx2), free(dw2), free(db2), free(staging2);
    }
    /* against double sums of the rounded operands: only fp32 accumulation error remains */
    double tol = 4 * 5.96e-8 * (2 + sqrt((double)C + OC + N));
    for (int n = 0; n < N; n++)
        for (int o = 0; o < OC; o++) {
            double acc = b[o], mag = fabs(b[o]);
            for (int c = 0; c < C; c++) {
                double t = (double)rnd(kind, x[n * C + c]) * rnd(kind, w[o * C + c]);
                acc += t, mag += fabs(t);
            }
            if (fabs(out[n * OC + o] - acc) > tol * mag) fail_msg("out[%d,%d] %g vs %g", n, o, out[n * OC + o], acc);
        }
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++) {
            double acc = 0, mag = 0;
            for (int o = 0; o < OC; o++) {
                double t = (double)rnd(kind, dout[n * OC + o]) * rnd(kind, w[o * C + c]);
                acc += t, mag += fabs(t);
            }
            if (fabs(dx[n * C + c] - acc) > tol * mag) fail_msg("dx[%d,%d] %g vs %g", n, c, dx[n * C + c], acc);
        }
    double worst = 0;
    for (int o = 0; o < OC; o++) {
        double sb = 0;
        for (int c = 0; c < C; c++) {
            double acc = 0, mag = 0, exact = 0;
            for (int n = 0; n < N; n++) {
                double t = (double)rnd(kind, dout[n * OC + o]) * rnd(kind, x[n * C + c]);
                acc += t, mag += fabs(t), exact += (double)dout[n * OC + o] * x[n * C + c];
            }
            if (fabs(dw[o * C + c] - acc) > tol * mag) fail_msg("dw[%d,%d] %g vs %g", o, c, dw[o * C + c], acc);
            /* and against the fp32 gradient: within the operands' rounding (2^-8 / 2^-11 each) */
            double rel = fabs(dw[o * C + c] - exact) / mag;
            if (rel > worst) worst = rel;
        }
        for (int n = 0; n < N; n++) sb += dout[n * OC + o];
        assert_true(fabs(db[o] - sb) <= 1e-5 * (1 + fabs(sb))); /* dbias sums the fp32 dout */
    }
    double unit = kind == ZT_LP_BF16 ? 1.0 / 256 : 1.0 / 2048;
    if (worst > 2 * unit) fail_msg("dW vs fp32: worst relative error %g above 2 ulp of the format (%g)", worst, 2 * unit);
    free(x), free(w), free(b), free(out), free(dout), free(dx), free(dw), free(db), free(wq), free(wh), free(staging);
    free(xl), free(xr);
}

static void test_linear_bf16(void **state) { (void)state; check_linear(ZT_LP_BF16); }
static void test_linear_fp16(void **state) { (void)state; check_linear(ZT_LP_FP16); }

/* DeepSpeed's DynamicLossScaler.update_scale, transcribed from its semantics, step by step */
static void test_loss_scaler(void **state) {
    (void)state;
    zt_precision p;
    zt_precision_default(&p, ZT_PRECISION_FP16);
    p.initial_scale_power = 4;
    p.loss_scale_window = 3;
    p.hysteresis = 2;
    p.min_loss_scale = 2.0f;
    zt_loss_scaler s;
    zt_loss_scaler_init(&s, &p);
    assert_true(s.scale == 16.0 && s.cur_hysteresis == 2 && s.last_overflow_iter == -1);
    struct { bool overflow; double scale; int hyst; } seq[] = {
        {true, 16, 1},   /* first overflow: hysteresis 2 -> 1, scale kept */
        {true, 8, 1},    /* second: halves */
        {false, 8, 1},   /* iter 2: 2 - 1 = 1 since the overflow, not a window */
        {false, 8, 1},
        {false, 16, 2},  /* iter 4: 4 - 1 = 3 = window: doubles, hysteresis refilled */
        {true, 16, 1},   /* hysteresis again first */
        {true, 8, 1}, {true, 4, 1}, {true, 2, 1},
        {true, 2, 1},    /* at min_loss_scale: stays (DeepSpeed would raise) */
    };
    for (size_t i = 0; i < sizeof seq / sizeof *seq; i++) {
        zt_loss_scaler_update(&s, &p, seq[i].overflow);
        if (s.scale != seq[i].scale || s.cur_hysteresis != seq[i].hyst)
            fail_msg("after update %zu: scale %g hysteresis %d, want %g %d", i, s.scale, s.cur_hysteresis,
                     seq[i].scale, seq[i].hyst);
    }
    assert_int_equal(s.cur_iter, 10);
    /* consecutive_hysteresis refills after every good step */
    p.consecutive_hysteresis = true;
    zt_loss_scaler_init(&s, &p);
    zt_loss_scaler_update(&s, &p, true);
    assert_int_equal(s.cur_hysteresis, 1);
    zt_loss_scaler_update(&s, &p, false);
    assert_int_equal(s.cur_hysteresis, 2);
    /* a static scale never moves */
    p.loss_scale = 128;
    zt_loss_scaler_init(&s, &p);
    zt_loss_scaler_update(&s, &p, true);
    zt_loss_scaler_update(&s, &p, false);
    assert_true(s.scale == 128);
}

static void test_policy(void **state) {
    (void)state;
    zt_error err = {0};
    zt_precision p;
    for (int m = 0; m < 4; m++) {
        zt_precision_default(&p, (zt_precision_mode)m);
        assert_int_equal(zt_precision_check(&p, &err), ZT_OK);
    }
    zt_precision_default(&p, ZT_PRECISION_BF16);
    assert_true(p.params == ZT_DTYPE_FP32 && p.compute == ZT_DTYPE_BF16 && p.moments == ZT_DTYPE_FP32);
    /* reduce bf16: with fp32, bf16 and bf16-low (FSDP's reduce_dtype is independent of
     * param_dtype), not with fp16's loss-scaled gradients; reduce fp16 with fp16 only */
    for (int m = 0; m < 4; m++) {
        zt_precision_default(&p, (zt_precision_mode)m);
        p.reduce = ZT_DTYPE_BF16;
        assert_int_equal(zt_precision_check(&p, &err), m == ZT_PRECISION_FP16 ? ZT_ERR_USAGE : ZT_OK);
        p.reduce = ZT_DTYPE_FP16;
        assert_int_equal(zt_precision_check(&p, &err), m == ZT_PRECISION_FP16 ? ZT_OK : ZT_ERR_USAGE);
        if (m != ZT_PRECISION_FP16) assert_non_null(strstr(err.msg, "reduce dtype fp16 is not supported"));
    }
    zt_precision_default(&p, ZT_PRECISION_FP16);
    p.reduce = ZT_DTYPE_BF16;
    assert_int_equal(zt_precision_check(&p, &err), ZT_ERR_USAGE);
    assert_non_null(strstr(err.msg, "precision fp16: reduce dtype bf16 is not supported"));
    zt_precision_default(&p, ZT_PRECISION_BF16);
    p.reduce = ZT_DTYPE_BF16;
    char line0[256];
    zt_precision_describe(&p, line0, sizeof line0);
    assert_string_equal(line0, "bf16 mixed: params fp32 | compute bf16 | reduce bf16 | accumulate fp32 | grads fp32 | "
                               "moments fp32");
    zt_precision_default(&p, ZT_PRECISION_FP32);
    p.stochastic_rounding = true;
    assert_int_equal(zt_precision_check(&p, &err), ZT_ERR_USAGE);
    assert_non_null(strstr(err.msg, "stochastic rounding applies to bf16-low only"));
    /* attention's products: bf16 by default under bf16 compute only; fp32 allowed in every mode,
     * bf16 refused where the compute is not bf16 */
    for (int m = 0; m <= ZT_PRECISION_FP16; m++) {
        zt_precision_default(&p, (zt_precision_mode)m);
        bool bf = m == ZT_PRECISION_BF16 || m == ZT_PRECISION_BF16_LOW;
        assert_int_equal(p.attention, bf ? ZT_DTYPE_BF16 : ZT_DTYPE_FP32);
        p.attention = ZT_DTYPE_FP32;
        assert_int_equal(zt_precision_check(&p, &err), ZT_OK);
        p.attention = ZT_DTYPE_BF16;
        assert_int_equal(zt_precision_check(&p, &err), bf ? ZT_OK : ZT_ERR_USAGE);
        if (!bf) assert_non_null(strstr(err.msg, "attention dtype bf16 is not supported"));
        p.attention = ZT_DTYPE_FP16;
        assert_int_equal(zt_precision_check(&p, &err), ZT_ERR_USAGE);
    }
    zt_precision_default(&p, ZT_PRECISION_FP16);
    p.min_loss_scale = 0;
    assert_int_equal(zt_precision_check(&p, &err), ZT_ERR_USAGE);
    char line[256];
    zt_precision_default(&p, ZT_PRECISION_BF16_LOW);
    p.stochastic_rounding = true;
    zt_precision_describe(&p, line, sizeof line);
    assert_string_equal(line, "bf16-low: params bf16 | compute bf16 | reduce fp32 | accumulate fp32 | grads bf16 | "
                              "moments bf16 | rounding stochastic");
    zt_precision_default(&p, ZT_PRECISION_FP16);
    zt_precision_describe(&p, line, sizeof line);
    assert_non_null(strstr(line, "fp16: params fp32 | compute fp16"));
    assert_non_null(strstr(line, "dynamic loss scale 2^16, window 1000, hysteresis 2, min 1"));
}

/* bf16-low stores its parameters and moments as bf16: the engine's params class is 2 bytes per
 * parameter, there is no compute copy (the parameters are the copy), the optimizer class is the
 * two 2-byte moments plus the fp32 update chunks (two for the moments, one for the parameters),
 * the parameters read back as bf16 values, a set rounds to the nearest bf16, and training goes
 * on. (The bits equal those of fp32 arrays of bf16 values: when the storage narrowed,
 * tests/precision_strategies.sh's 2-rank bf16-low hash stayed fdc1edddffab8310, and its
 * strategies and offloaded runs, which keep fp32 files, still agree.) */
static void test_bf16_low_storage(void **state) {
    (void)state;
    zt_error err = {0};
    zt_gpt2_config cfg = {64, 512, 2, 2, 64, ZT_ATTENTION_FLASH};
    size_t opt_bytes[2], param_bytes[2], copy_bytes[2];
    float first = 0, last = 0;
    for (int run = 0; run < 2; run++) {
        zt_model *m;
        zt_engine *e;
        zt_engine_options o;
        zt_engine_options_default(&o);
        o.B = 2, o.T = 16, o.seed = 3;
        zt_precision_default(&o.precision, run ? ZT_PRECISION_BF16_LOW : ZT_PRECISION_FP32);
        assert_int_equal(zt_gpt2_create(&cfg, &m, &err), ZT_OK);
        assert_int_equal(zt_engine_create(m, &o, &e, &err), ZT_OK);
        assert_int_equal(zt_engine_init_params(e, &err), ZT_OK);
        int32_t tok[2 * 16 + 1];
        for (int i = 0; i < 33; i++) tok[i] = (i * 7) % 512;
        zt_batch b = {.B = 2, .T = 16, .inputs = tok, .targets = tok + 1, .dloss = 1.0f / 32, .logits_pos = -1};
        for (int step = 0; step < 8; step++) {
            float loss;
            zt_step_report r;
            assert_int_equal(zt_engine_forward_backward(e, &b, &loss, &err), ZT_OK);
            assert_int_equal(zt_engine_step(e, 3e-3f, &r, &err), ZT_OK);
            if (run && step == 0) first = loss;
            if (run) last = loss;
        }
        zt_memory_report mr;
        zt_engine_memory(e, &mr);
        opt_bytes[run] = mr.optimizer;
        param_bytes[run] = mr.params;
        copy_bytes[run] = mr.compute_copy;
        if (run) { /* the accessors: no fp32 pointer, fp32 copies of bf16 values, sets that round */
            int64_t numel = 0;
            assert_null(zt_engine_param_local(e, 2, NULL, &numel));
            assert_null(zt_engine_param(e, 2));
            float *w = malloc((size_t)numel * sizeof *w);
            assert_int_equal(zt_engine_param_gather(e, 2, w, &err), ZT_OK);
            int moved = 0;
            for (int64_t i = 0; i < numel; i++) {
                uint32_t u;
                memcpy(&u, &w[i], 4);
                assert_int_equal(u & 0xffffu, 0);
                moved |= w[i] != 0.0f;
            }
            assert_true(moved);
            w[0] = 1.00390625f + 1e-4f; /* 1 + 2^-8 + a bit: the nearest bf16 is 1 + 2^-7 */
            assert_int_equal(zt_engine_param_set(e, 2, w, &err), ZT_OK);
            assert_int_equal(zt_engine_param_gather(e, 2, w, &err), ZT_OK);
            assert_true(w[0] == 1.0078125f);
            assert_int_equal(zt_engine_param_set(e, m->n_params, w, &err), ZT_ERR_USAGE);
            free(w);
        }
        zt_engine_free(e);
        zt_model_free(m);
    }
    int64_t P = 0;
    { zt_model *m; zt_gpt2_create(&cfg, &m, &err); P = zt_model_numel(m); zt_model_free(m); }
    size_t chunks = 3 * sizeof(float) * (size_t)(P < 65536 ? P : 65536);
    assert_true(opt_bytes[0] >= (size_t)(8 * P));              /* fp32: m and v, 4 bytes each */
    assert_true(opt_bytes[1] <= (size_t)(4 * P) + chunks + 256); /* bf16-low: 2 bytes each + the chunks */
    assert_true(param_bytes[0] >= (size_t)(4 * P));
    assert_true(param_bytes[1] >= (size_t)(2 * P) && param_bytes[1] <= (size_t)(2 * P) + 64);
    assert_int_equal(copy_bytes[0], 0);
    assert_int_equal(copy_bytes[1], 0); /* no compute copy: the bf16 parameters are the operands */
    assert_true(isfinite(last) && last < first);
}

/* zero1 under bf16 keeps its fp32 master as pieces and replicates the compute copies (engine
 * master_shard.c); on one process the pieces are whole tensors and the copies are made locally.
 * Against ddp (full fp32 parameters, copies rounded from them) on the same model and batches: the
 * same losses and parameters step by step, a zt_engine_param_set reaches the copies the next
 * forward reads (the loss after it is ddp's), and zero1's compute-copy class adds only the fp32
 * copy of the vectors (the layernorm weights and biases) to ddp's. */
static void test_master_shard_one_process(void **state) {
    (void)state;
    zt_error err = {0};
    zt_gpt2_config cfg = {64, 512, 2, 2, 64, ZT_ATTENTION_FLASH};
    zt_model *m[2];
    zt_engine *e[2];
    for (int k = 0; k < 2; k++) {
        zt_engine_options o;
        zt_engine_options_default(&o);
        o.B = 2, o.T = 16, o.seed = 5;
        o.strategy = k ? ZT_STRATEGY_ZERO1 : ZT_STRATEGY_DDP;
        zt_precision_default(&o.precision, ZT_PRECISION_BF16);
        assert_int_equal(zt_gpt2_create(&cfg, &m[k], &err), ZT_OK);
        assert_int_equal(zt_engine_create(m[k], &o, &e[k], &err), ZT_OK);
        assert_int_equal(zt_engine_init_params(e[k], &err), ZT_OK);
    }
    int32_t tok[2 * 16 + 1];
    for (int i = 0; i < 33; i++) tok[i] = (i * 11 + 3) % 512;
    zt_batch b = {.B = 2, .T = 16, .inputs = tok, .targets = tok + 1, .dloss = 1.0f / 32, .logits_pos = -1};
    for (int step = 0; step < 4; step++) {
        float loss[2];
        for (int k = 0; k < 2; k++) {
            zt_step_report r;
            assert_int_equal(zt_engine_forward_backward(e[k], &b, &loss[k], &err), ZT_OK);
            assert_int_equal(zt_engine_step(e[k], 3e-3f, &r, &err), ZT_OK);
        }
        assert_true(f2u(loss[0]) == f2u(loss[1]));
    }
    assert_true(zt_engine_param_hash(e[0]) == zt_engine_param_hash(e[1]));
    /* zero1's parameter is its piece (here the whole tensor); set wte (a matrix, read through its
     * bf16 copy by the embedding and the head) and ln_f.weight (read as fp32) in both */
    int64_t begin = -1, numel = 0;
    assert_non_null(zt_engine_param_local(e[1], 0, &begin, &numel));
    assert_true(begin == 0 && numel == m[1]->params[0].numel);
    int set[2] = {0, m[0]->n_params - 2};
    assert_string_equal(m[0]->params[set[0]].name, "wte.weight");
    assert_string_equal(m[0]->params[set[1]].name, "ln_f.weight");
    for (int t = 0; t < 2; t++) {
        int idx = set[t];
        size_t n = (size_t)m[0]->params[idx].numel;
        float *w = malloc(n * sizeof *w), *back = malloc(n * sizeof *back);
        for (size_t i = 0; i < n; i++) w[i] = 0.05f * frand();
        for (int k = 0; k < 2; k++) {
            assert_int_equal(zt_engine_param_set(e[k], idx, w, &err), ZT_OK);
            assert_int_equal(zt_engine_param_gather(e[k], idx, back, &err), ZT_OK);
            assert_memory_equal(w, back, n * sizeof *w);
        }
        free(w);
        free(back);
    }
    float loss[2];
    for (int k = 0; k < 2; k++) assert_int_equal(zt_engine_forward(e[k], &b, &loss[k], NULL, &err), ZT_OK);
    assert_true(f2u(loss[0]) == f2u(loss[1]));
    zt_memory_report r[2];
    for (int k = 0; k < 2; k++) zt_engine_memory(e[k], &r[k]);
    size_t vectors = 0;
    for (int i = 0; i < m[0]->n_params; i++)
        if (m[0]->params[i].ndim == 1) vectors += ((size_t)m[0]->params[i].numel + 15) / 16 * 16 * sizeof(float);
    assert_int_equal(r[1].compute_copy, r[0].compute_copy + vectors);
    for (int k = 0; k < 2; k++) {
        zt_engine_free(e[k]);
        zt_model_free(m[k]);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bf16_conversion), cmocka_unit_test(test_fp16_rounding),
        cmocka_unit_test(test_stochastic_rounding), cmocka_unit_test(test_linear_bf16),
        cmocka_unit_test(test_linear_fp16), cmocka_unit_test(test_loss_scaler), cmocka_unit_test(test_policy),
        cmocka_unit_test(test_bf16_low_storage), cmocka_unit_test(test_master_shard_one_process),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
