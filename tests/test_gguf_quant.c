/* test_gguf_quant.c - GGUF's tensor types (src/ckpt/gguf_quant.c) against ggml's definitions:
 *   - known blocks, worked by hand from quantize_row_q8_0_ref / quantize_row_q4_0_ref: the fp16
 *     scale's bits and every byte (q4_0: element j in the low nibble of byte j, j + 16 in the high;
 *     the clamp at 15 of the element opposite the largest one);
 *   - dequantize(quantize(x)) on random rows within the format's bound: q8_0 |x - x'| <= |d|/2 plus
 *     the fp16 scale's rounding (|q| <= 127 times |d| 2^-11); q4_0 <= |d| (|d|/2 from rounding, the
 *     clamp of +8 to 7 costs a whole |d|) plus 8 |d| 2^-11; f16 / bf16: half an ulp (2^-11 / 2^-8
 *     relative);
 *   - the sizes: 34 bytes per q8_0 block, 18 per q4_0, 144 / 176 / 210 per q4_k / q5_k / q6_k
 *     super-block, and the names and llama_ftype values (the k-quants' bytes are checked against
 *     llama.cpp's own quantizer by tests/gguf_kquant.py, in tests/gguf.sh). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "ckpt/gguf_quant.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint16_t scale_bits(const uint8_t *b) { return (uint16_t)(b[0] | b[1] << 8); }

static void test_known_q8_0(void **state) {
    (void)state;
    float x[32];
    for (int j = 0; j < 32; j++) x[j] = (float)(j - 16) * 0.25f; /* -4 .. 3.75: amax 4 */
    uint8_t b[34];
    zt_gguf_encode(ZT_GGUF_Q8_0, b, x, 32);
    float d = 4.0f / 127.0f, id = 1.0f / d;
    uint16_t h;
    zt_gguf_encode(ZT_GGUF_F16, &h, &d, 1);
    assert_int_equal(scale_bits(b), h);
    for (int j = 0; j < 32; j++) assert_int_equal((int8_t)b[2 + j], (int)roundf(x[j] * id));
    assert_int_equal((int8_t)b[2], -127);
}

static void test_known_q4_0(void **state) {
    (void)state;
    float x[32];
    for (int j = 0; j < 32; j++) x[j] = (float)(j - 16); /* -16 .. 15: the largest is -16 */
    uint8_t b[18];
    zt_gguf_encode(ZT_GGUF_Q4_0, b, x, 32);
    assert_int_equal(scale_bits(b), 0x4000); /* d = -16 / -8 = 2.0 */
    for (int j = 0; j < 16; j++) {
        int lo = (int)(x[j] * 0.5f + 8.5f), hi = (int)(x[16 + j] * 0.5f + 8.5f);
        assert_int_equal(b[2 + j], (lo < 15 ? lo : 15) | (hi < 15 ? hi : 15) << 4);
    }
    assert_int_equal(b[2], 0x80);      /* x0 = -16 -> 0, x16 = 0 -> 8 */
    assert_int_equal(b[17] >> 4, 15);  /* x31 = 15 -> 7.5 + 8.5 = 16, clamped to 15 */
    float y[32];
    zt_gguf_decode(ZT_GGUF_Q4_0, y, b, 32);
    assert_true(y[0] == -16.0f && y[16] == 0.0f && y[31] == 14.0f);
}

static void test_round_trip(void **state) {
    (void)state;
    enum { N = 32 * 64 };
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
    uint8_t *b = malloc(N * 4);
    assert_non_null(x);
    assert_non_null(y);
    assert_non_null(b);
    uint64_t s = 12345;
    for (int i = 0; i < N; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        x[i] = ((float)(s >> 40) / (float)(1 << 24) - 0.5f) * (i % 7 == 0 ? 40.0f : 1.0f);
    }
    x[5] = 0; /* an all-zero block too */
    memset(x + 32, 0, 32 * sizeof *x);
    const zt_gguf_type types[] = {ZT_GGUF_Q8_0, ZT_GGUF_Q4_0, ZT_GGUF_F16, ZT_GGUF_BF16, ZT_GGUF_F32};
    for (size_t t = 0; t < sizeof types / sizeof *types; t++) {
        zt_gguf_encode(types[t], b, x, N);
        zt_gguf_decode(types[t], y, b, N);
        for (int blk = 0; blk < N / 32; blk++) {
            float amax = 0;
            for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[blk * 32 + j]));
            for (int j = 0; j < 32; j++) {
                int i = blk * 32 + j;
                double err = fabs((double)x[i] - y[i]), bound;
                switch (types[t]) {
                case ZT_GGUF_Q8_0: bound = amax / 127.0 * (0.5 + 127.0 / 2048.0) * 1.001; break;
                case ZT_GGUF_Q4_0: bound = amax / 8.0 * (1.0 + 8.0 / 2048.0) * 1.001; break;
                case ZT_GGUF_F16: bound = fabs(x[i]) / 2048.0 + 6e-8; break;
                case ZT_GGUF_BF16: bound = fabs(x[i]) / 256.0; break;
                default: bound = 0;
                }
                if (err > bound) fail_msg("%s: element %d: %g -> %g (error %g, bound %g)",
                                          zt_gguf_type_name(types[t]), i, x[i], y[i], err, bound);
            }
        }
    }
    free(x);
    free(y);
    free(b);
}

static void test_sizes_and_names(void **state) {
    (void)state;
    assert_int_equal(zt_gguf_row_bytes(ZT_GGUF_Q8_0, 64), 68);
    assert_int_equal(zt_gguf_row_bytes(ZT_GGUF_Q4_0, 64), 36);
    assert_int_equal(zt_gguf_row_bytes(ZT_GGUF_F16, 64), 128);
    assert_int_equal(zt_gguf_row_bytes(ZT_GGUF_BF16, 3), 6);
    assert_int_equal(zt_gguf_row_bytes(ZT_GGUF_Q4_K, 512), 288); /* ggml's block_q4_K, q5_K, q6_K */
    assert_int_equal(zt_gguf_row_bytes(ZT_GGUF_Q5_K, 256), 176);
    assert_int_equal(zt_gguf_row_bytes(ZT_GGUF_Q6_K, 256), 210);
    const char *names[] = {"f32", "f16", "bf16", "q8_0", "q4_0", "q4_k", "q5_k", "q6_k"};
    const int ftype[] = {0, 1, 32, 7, 2, 14, 16, 18}, ggml[] = {0, 1, 30, 8, 2, 12, 13, 14};
    for (int i = 0; i < 8; i++) {
        zt_gguf_type t;
        assert_true(zt_gguf_type_parse(names[i], &t));
        assert_int_equal((int)t, ggml[i]);
        assert_string_equal(zt_gguf_type_name(t), names[i]);
        assert_int_equal(zt_gguf_file_type(t), ftype[i]);
    }
    zt_gguf_type t;
    assert_false(zt_gguf_type_parse("q3_k", &t));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_known_q8_0),
        cmocka_unit_test(test_known_q4_0),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_sizes_and_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
