/* test_quant.c - the quantized base's formats (src/kernels/quant_nf4.c, quant_int8.c):
 *   - the 16 NF4 values computed here from the QLoRA paper's definition (quantiles of N(0,1) at
 *     linspace(offset, 0.5, 9) for the 8 positive and linspace(offset, 0.5, 8) for the 7 negative
 *     values, offset = (1 - 1/(2*15) + 1 - 1/(2*16)) / 2, and 0, normalized by the largest to
 *     [-1, 1]) against the kernel's table;
 *   - bitsandbytes' 8-bit dynamic map (double quantization's code) at every 17th entry against
 *     values its create_dynamic_map gives under PyTorch 1.13, to one float32 ulp (torch's vectorized
 *     linspace adds its steps in another order than the formula start + k * step);
 *   - the layout: two codes a byte, element 2j in the high nibble; the sizes; the absmaxes as
 *     mean + dynamic code x the fp32 scale of their block of 256, read from the bytes;
 *   - dequantize(quantize(W)) within the format's bound: half the largest gap between neighbouring
 *     NF4 values times the block's absmax, plus the double quantization's error of that absmax
 *     (itself within half the dynamic map's largest gap times its block's scale); int8 within half
 *     a row's step;
 *   - the bf16 forms are the fp32 ones rounded to nearest-even, bit for bit;
 *   - the model's side (zt_model_add_lora with base_quant): which parameters are marked, and a
 *     Linear whose rows are not whole NF4 blocks refused by name with its numbers. */
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

/* the standard normal's quantile: bisection on its CDF (to double precision) */
static double norm_ppf(double p) {
    double lo = -40.0, hi = 40.0;
    for (int i = 0; i < 200; i++) {
        double mid = (lo + hi) / 2, cdf = 0.5 * erfc(-mid / sqrt(2.0));
        if (cdf < p) lo = mid;
        else hi = mid;
    }
    return (lo + hi) / 2;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void nf4_from_definition(void **state) {
    (void)state;
    double offset = (1.0 - 1.0 / (2 * 15.0) + 1.0 - 1.0 / (2 * 16.0)) / 2; /* 0.9677083 */
    double v[16];
    int n = 0;
    for (int i = 0; i < 8; i++) v[n++] = norm_ppf(offset + (0.5 - offset) * i / 8.0);  /* 8 positive */
    for (int i = 0; i < 7; i++) v[n++] = -norm_ppf(offset + (0.5 - offset) * i / 7.0); /* 7 negative */
    v[n++] = 0.0;
    qsort(v, 16, sizeof *v, cmp_double);
    float code[16];
    zt_nf4_code(code);
    for (int i = 0; i < 16; i++) {
        double want = v[i] / v[15];
        if (fabs(code[i] - want) > 2e-6) fail_msg("NF4 value %d: table %.9f, definition %.9f", i, code[i], want);
    }
    assert_true(code[0] == -1.0f && code[7] == 0.0f && code[15] == 1.0f);
}

static void dynamic_map_as_published(void **state) {
    (void)state;
    static const float every17[16] = {-0.992968738079071f, -0.75390625f, -0.514843761920929f, -0.2757812738418579f,
                                      -0.08734375238418579f, -0.039531249552965164f, -0.006343749817460775f,
                                      -0.00015625001105945557f, 0.0002687500382307917f, 0.006906250026077032f,
                                      0.04234374687075615f, 0.09015624970197678f, 0.28984373807907104f,
                                      0.5289062261581421f, 0.7679687738418579f, 1.0f};
    float dyn[256];
    zt_dynamic_code(dyn);
    for (int i = 0; i < 16; i++)
        if (fabsf(dyn[17 * i] - every17[i]) > 0x1p-23f * fabsf(every17[i])) fail_msg("dynamic map entry %d: %.9g, bitsandbytes %.9g", 17 * i, dyn[17 * i], every17[i]);
    for (int i = 1; i < 256; i++) assert_true(dyn[i] > dyn[i - 1]);
    assert_true(dyn[127] == 0.0f && dyn[255] == 1.0f);
}

static uint64_t rng = 0x51A7ull;
static double uniform(void) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return ((double)(rng >> 11) + 0.5) / 9007199254740992.0;
}
static float gauss(void) { return (float)(sqrt(-2 * log(uniform())) * cos(2 * M_PI * uniform())); }

static float bf16_of(float x) { /* nearest-even */
    uint32_t b;
    memcpy(&b, &x, 4);
    b = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000u;
    float y;
    memcpy(&y, &b, 4);
    return y;
}

static void packing_order(void **state) {
    (void)state;
    float code[16], w[128];
    zt_nf4_code(code);
    for (int i = 0; i < 128; i++) w[i] = code[(i * 7 + i / 16) % 16] * 0.5f; /* every code, absmax 0.5 */
    size_t bytes = zt_nf4_bytes(128);
    assert_int_equal(bytes, 64 + 2 + 2 /* align */ + 4 /* one scale */ + 4 /* the mean */);
    uint8_t *q = malloc(bytes);
    zt_nf4_quantize(q, w, 128);
    for (int j = 0; j < 64; j++) {
        int hi = ((2 * j) * 7 + (2 * j) / 16) % 16, lo = ((2 * j + 1) * 7 + (2 * j + 1) / 16) % 16;
        if (q[j] != (uint8_t)(hi << 4 | lo)) fail_msg("byte %d: 0x%02x, want codes %d (high) and %d (low)", j, q[j], hi, lo);
    }
    /* the absmaxes: both 0.5, their mean 0.5, centered 0: code 127 (0.0) each, scale 0 */
    float mean, scale;
    memcpy(&scale, q + 68, 4);
    memcpy(&mean, q + 72, 4);
    assert_true(mean == 0.5f && scale == 0.0f && q[64] == 127 && q[65] == 127);
    float out[128];
    zt_nf4_dequantize(out, q, 128);
    for (int i = 0; i < 128; i++) assert_true(out[i] == w[i]);
    free(q);
}

static void nf4_round_trip_bound(void **state) {
    (void)state;
    int64_t rows = 96, cols = 256, n = rows * cols; /* 384 blocks: two blocks of 256 absmaxes */
    float *w = malloc((size_t)n * 4), *out = malloc((size_t)n * 4), *absmax = malloc((size_t)n / 64 * 4);
    uint16_t *o16 = malloc((size_t)n * 2);
    for (int64_t i = 0; i < n; i++) w[i] = 0.02f * gauss();
    w[1000] = 0.9f;                                    /* an outlier in block 15 */
    for (int i = 64 * 30; i < 64 * 31; i++) w[i] = 0; /* a zero block */
    uint8_t *q = malloc(zt_nf4_bytes(n));
    zt_nf4_quantize(q, w, n);
    zt_nf4_dequantize(out, q, n);
    zt_nf4_absmax(absmax, q, n);
    float code[16], dyn[256];
    zt_nf4_code(code);
    zt_dynamic_code(dyn);
    double half_gap = 0, dyn_half_gap = 0;
    for (int k = 1; k < 16; k++) half_gap = fmax(half_gap, (code[k] - code[k - 1]) / 2.0);
    for (int k = 1; k < 256; k++) dyn_half_gap = fmax(dyn_half_gap, (dyn[k] - dyn[k - 1]) / 2.0);
    const float *scale = (const float *)(q + ((n / 2 + n / 64 + 3) & ~3));
    double worst = 0;
    for (int64_t b = 0; b < n / 64; b++) {
        double a = 0;
        for (int i = 0; i < 64; i++) a = fmax(a, fabs(w[b * 64 + i]));
        double da = fabs(a - absmax[b]), da_bound = dyn_half_gap * scale[b / 256] * 1.0001 + 1e-7;
        if (da > da_bound) fail_msg("block %lld: absmax %.8g dequantized %.8g, bound %.3g", (long long)b, a, absmax[b], da_bound);
        double bound = half_gap * a + da + 1e-6 * a + 1e-9;
        for (int i = 0; i < 64; i++) {
            double e = fabs(w[b * 64 + i] - out[b * 64 + i]);
            if (e > bound) fail_msg("element %lld: |%.8g - %.8g| = %.3g > bound %.3g", (long long)(b * 64 + i), w[b * 64 + i],
                                    out[b * 64 + i], e, bound);
            worst = fmax(worst, e / (a > 0 ? a : 1));
        }
    }
    print_message("nf4: worst error / block absmax %.4f (bound %.4f + the absmax's own error)\n", worst, half_gap);
    for (int i = 64 * 30; i < 64 * 31; i++) assert_true(out[i] == 0.0f);
    zt_nf4_dequantize_bf16(o16, q, n);
    for (int64_t i = 0; i < n; i++) {
        uint32_t bits = (uint32_t)o16[i] << 16;
        float f;
        memcpy(&f, &bits, 4);
        if (f != bf16_of(out[i])) fail_msg("bf16 element %lld: %.8g, rounded fp32 %.8g", (long long)i, f, bf16_of(out[i]));
    }
    free(w), free(out), free(absmax), free(o16), free(q);
}

static void int8_round_trip_bound(void **state) {
    (void)state;
    int64_t rows = 33, cols = 100, n = rows * cols;
    float *w = malloc((size_t)n * 4), *out = malloc((size_t)n * 4);
    uint16_t *o16 = malloc((size_t)n * 2);
    for (int64_t i = 0; i < n; i++) w[i] = 0.05f * gauss();
    for (int64_t c = 0; c < cols; c++) w[5 * cols + c] = 0; /* a zero row */
    assert_int_equal(zt_int8_bytes(rows, cols), 3300 + 33 * 4);
    uint8_t *q = malloc(zt_int8_bytes(rows, cols));
    zt_int8_quantize(q, w, rows, cols);
    zt_int8_dequantize(out, q, rows, cols);
    for (int64_t r = 0; r < rows; r++) {
        double a = 0;
        for (int64_t c = 0; c < cols; c++) a = fmax(a, fabs(w[r * cols + c]));
        float s;
        memcpy(&s, q + n + 4 * r, 4);
        assert_true(s == (float)(a / 127.0) || fabs(s - a / 127.0) <= 1e-7 * a);
        for (int64_t c = 0; c < cols; c++) {
            double e = fabs(w[r * cols + c] - out[r * cols + c]);
            if (e > a / 127.0 / 2 * 1.0001 + 1e-9) fail_msg("row %lld col %lld: error %.3g > half a step %.3g", (long long)r, (long long)c, e, a / 254.0);
        }
    }
    zt_int8_dequantize_bf16(o16, q, rows, cols);
    for (int64_t i = 0; i < n; i++) {
        uint32_t bits = (uint32_t)o16[i] << 16;
        float f;
        memcpy(&f, &bits, 4);
        assert_true(f == bf16_of(out[i]));
    }
    free(w), free(out), free(o16), free(q);
}

static void marks_and_refusals(void **state) {
    (void)state;
    zt_gpt2_config cfg;
    zt_error err = {0};
    assert_int_equal(zt_gpt2_preset("tiny", &cfg, &err), ZT_OK);
    zt_model *m;
    assert_int_equal(zt_gpt2_create(&cfg, &m, &err), ZT_OK);
    zt_lora_config l = {.rank = 2, .alpha = 4, .target_modules = "c_attn", .base_quant = ZT_QUANT_NF4};
    assert_int_equal(zt_model_add_lora(m, &l, NULL, &err), ZT_OK);
    int marked = 0;
    for (int i = 0; i < m->n_params; i++) { /* every block Linear's weight, adapted or not; nothing else */
        const zt_param_desc *p = &m->params[i];
        bool linear = p->ndim == 2 && !p->lora && strstr(p->name, "h.") == p->name;
        if (p->quant != (linear ? ZT_QUANT_NF4 : ZT_QUANT_NONE)) fail_msg("%s: quant %d", p->name, p->quant);
        marked += p->quant != 0;
    }
    assert_int_equal(marked, 4 * cfg.n_layer);
    zt_model_free(m);
    cfg.n_embd = 96; /* rows of 96: not whole blocks of 64 */
    assert_int_equal(zt_gpt2_create(&cfg, &m, &err), ZT_OK);
    assert_int_equal(zt_model_add_lora(m, &l, NULL, &err), ZT_ERR_USAGE);
    assert_non_null(strstr(err.msg, "lora.base_quant nf4: h.0.attn.c_attn.weight (288 x 96) has rows of 96 elements, not a "
                                    "multiple of NF4's block of 64"));
    assert_null(m->lora); /* refused before the model changed */
    l.base_quant = ZT_QUANT_INT8; /* an absmax per row: any row length */
    assert_int_equal(zt_model_add_lora(m, &l, NULL, &err), ZT_OK);
    zt_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(nf4_from_definition),   cmocka_unit_test(dynamic_map_as_published),
        cmocka_unit_test(packing_order),         cmocka_unit_test(nf4_round_trip_bound),
        cmocka_unit_test(int8_round_trip_bound), cmocka_unit_test(marks_and_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
