/* test_data.c - token files (round trip of uint16 and uint32 files byte for byte, every malformed
 * header, tokens that do not fit), the deterministic sampler
 * (same index → same window, each epoch a permutation, rank-count independence of global batches)
 * and the weights file (round trip, corruption, truncation, mismatched model). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "ckpt/weights.h"
#include "data/sampler.h"
#include "data/token_file.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[256];

static int setup(void **state) {
    snprintf(dir, sizeof dir, "/tmp/zt_test_data.%d", (int)getpid());
    char cmd[300];
    snprintf(cmd, sizeof cmd, "mkdir -p %s", dir);
    return system(cmd);
}

static int teardown(void **state) {
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd);
}

static void path(char *buf, const char *name) { snprintf(buf, 512, "%s/%s", dir, name); }

static void write_raw(const char *p, const int32_t *header, const void *body, size_t body_len) {
    FILE *f = fopen(p, "wb");
    assert_non_null(f);
    fwrite(header, 4, 256, f);
    if (body_len) fwrite(body, 1, body_len, f);
    fclose(f);
}

/* The whole file's bytes into buf (cap bytes); returns its length. */
static size_t read_all(const char *p, unsigned char *buf, size_t cap) {
    FILE *fp = fopen(p, "rb");
    assert_non_null(fp);
    size_t n = fread(buf, 1, cap, fp);
    fclose(fp);
    return n;
}

/* uint16 files: byte for byte llm.c's GPT-2 file (header magic 20240520, version 1, count, zeros;
 * little-endian uint16 tokens); uint32 files: llm.c's Llama 3 header (20240801, version 7). Both
 * read back to the same tokens. */
static void test_token_file_round_trip(void **state) {
    char p[512];
    path(p, "ok.bin");
    uint32_t tok[100];
    uint16_t tok16[100];
    for (int i = 0; i < 100; i++) tok16[i] = (uint16_t)(tok[i] = (uint32_t)(i * 655));
    zt_error err = {0};
    assert_int_equal(zt_token_file_write(p, tok, 100, 2, &err), ZT_OK);
    static unsigned char want[1024 + 400], got[sizeof want + 1];
    memset(want, 0, sizeof want);
    int32_t h16[3] = {20240520, 1, 100};
    memcpy(want, h16, sizeof h16);
    for (int i = 0; i < 100; i++) { /* little-endian */
        want[1024 + 2 * i] = (unsigned char)(tok16[i] & 0xff);
        want[1024 + 2 * i + 1] = (unsigned char)(tok16[i] >> 8);
    }
    assert_int_equal(read_all(p, got, sizeof got), 1024 + 200);
    assert_memory_equal(got, want, 1024 + 200);
    zt_token_file f;
    assert_int_equal(zt_token_file_open(&f, p, &err), ZT_OK);
    assert_int_equal(f.n, 100);
    assert_int_equal(f.width, 2);
    assert_memory_equal(f.tokens, tok16, sizeof tok16);
    for (int i = 0; i < 100; i++) assert_int_equal(zt_token_file_at(&f, (size_t)i), tok[i]);
    zt_token_file_close(&f);

    /* uint32: ids past 65535, up to the largest uint32 */
    for (int i = 0; i < 100; i++) tok[i] = (uint32_t)i * 128255u / 99u;
    tok[7] = 4294967295u;
    path(p, "ok32.bin");
    assert_int_equal(zt_token_file_write(p, tok, 100, 4, &err), ZT_OK);
    memset(want, 0, sizeof want);
    int32_t h32[3] = {20240801, 7, 100};
    memcpy(want, h32, sizeof h32);
    for (int i = 0; i < 100; i++)
        for (int k = 0; k < 4; k++) want[1024 + 4 * i + k] = (unsigned char)(tok[i] >> (8 * k));
    assert_int_equal(read_all(p, got, sizeof got), 1024 + 400);
    assert_memory_equal(got, want, 1024 + 400);
    assert_int_equal(zt_token_file_open(&f, p, &err), ZT_OK);
    assert_int_equal(f.n, 100);
    assert_int_equal(f.width, 4);
    for (int i = 0; i < 100; i++) assert_int_equal(zt_token_file_at(&f, (size_t)i), tok[i]);
    zt_token_file_close(&f);

    /* the empty file of either width */
    assert_int_equal(zt_token_file_write(p, tok, 0, 4, &err), ZT_OK);
    assert_int_equal(zt_token_file_open(&f, p, &err), ZT_OK);
    assert_int_equal(f.n, 0);
    zt_token_file_close(&f);

    /* the width tokenize picks: uint16 while every id fits */
    assert_int_equal(zt_token_file_width_for(50257), 2);
    assert_int_equal(zt_token_file_width_for(65536), 2);
    assert_int_equal(zt_token_file_width_for(65537), 4);
    assert_int_equal(zt_token_file_width_for(128256), 4);
}

static void test_token_file_errors(void **state) {
    char p[512];
    zt_error err = {0};
    zt_token_file f;
    int32_t h[256] = {20240520, 1, 10};
    uint16_t body[10] = {0};

    path(p, "missing.bin");
    assert_int_equal(zt_token_file_open(&f, p, &err), ZT_ERR_IO);
    assert_non_null(strstr(err.msg, "missing.bin"));

    path(p, "short.bin");
    FILE *fp = fopen(p, "wb");
    fwrite("abc", 1, 3, fp);
    fclose(fp);
    assert_int_equal(zt_token_file_open(&f, p, &err), ZT_ERR_DATA);
    assert_non_null(strstr(err.msg, "shorter than"));

    path(p, "magic.bin");
    h[0] = 12345;
    write_raw(p, h, body, sizeof body);
    assert_int_equal(zt_token_file_open(&f, p, &err), ZT_ERR_DATA);
    assert_non_null(strstr(err.msg, "bad magic 12345"));
    assert_non_null(strstr(err.msg, "magic.bin"));

    /* each magic with the other's version, or another version */
    path(p, "version.bin");
    static const int32_t mv[][2] = {{20240520, 7}, {20240520, 2}, {20240801, 1}, {20240801, 8}};
    for (int i = 0; i < 4; i++) {
        h[0] = mv[i][0];
        h[1] = mv[i][1];
        write_raw(p, h, body, sizeof body);
        memset(&err, 0, sizeof err);
        assert_int_equal(zt_token_file_open(&f, p, &err), ZT_ERR_DATA);
        char want[64];
        snprintf(want, sizeof want, "magic %d with version %d", mv[i][0], mv[i][1]);
        assert_non_null(strstr(err.msg, want));
        assert_null(f.map);
    }

    path(p, "count.bin");
    h[0] = 20240520;
    h[1] = 1;
    h[2] = 11; /* one more than the body holds */
    write_raw(p, h, body, sizeof body);
    assert_int_equal(zt_token_file_open(&f, p, &err), ZT_ERR_DATA);
    assert_non_null(strstr(err.msg, "11 tokens"));

    /* a uint16 body under the uint32 header: 20 bytes are 5 uint32 tokens, not 10 */
    path(p, "width.bin");
    h[0] = 20240801;
    h[1] = 7;
    h[2] = 10;
    write_raw(p, h, body, sizeof body);
    assert_int_equal(zt_token_file_open(&f, p, &err), ZT_ERR_DATA);
    assert_non_null(strstr(err.msg, "10 tokens of 4 bytes (1064 bytes) but the file has 1044"));
    h[2] = 5;
    write_raw(p, h, body, sizeof body);
    assert_int_equal(zt_token_file_open(&f, p, &err), ZT_OK);
    assert_int_equal(f.n, 5);
    zt_token_file_close(&f);
    h[2] = -3;
    write_raw(p, h, body, sizeof body);
    assert_int_equal(zt_token_file_open(&f, p, &err), ZT_ERR_DATA);
    assert_non_null(strstr(err.msg, "header says -3 tokens"));

    /* writing: a token past 65535 in a uint16 file, a width that is neither */
    uint32_t big[3] = {1, 65535, 65536};
    path(p, "narrow.bin");
    assert_int_equal(zt_token_file_write(p, big, 3, 2, &err), ZT_ERR_DATA);
    assert_non_null(strstr(err.msg, "token 65536 at position 2"));
    assert_int_equal(access(p, F_OK), -1); /* nothing written, no temporary left */
    assert_int_equal(zt_token_file_write(p, big, 2, 2, &err), ZT_OK);
    assert_int_equal(zt_token_file_write(p, big, 3, 3, &err), ZT_ERR_USAGE);
    assert_non_null(strstr(err.msg, "width 3"));
}

/* uint32 files through the sampler: windows hold the ids as written; a model whose vocabulary is
 * smaller than an id in the window is refused naming the token and its position. */
static void test_sampler_uint32(void **state) {
    char p[512];
    path(p, "s32.bin");
    enum { N = 4 * 16 + 1, V = 128256 };
    uint32_t tok[N];
    for (int i = 0; i < N; i++) tok[i] = (uint32_t)((i * 40009) % V);
    zt_error err = {0};
    assert_int_equal(zt_token_file_write(p, tok, N, 4, &err), ZT_OK);
    zt_token_file f;
    assert_int_equal(zt_token_file_open(&f, p, &err), ZT_OK);
    zt_sampler s;
    assert_int_equal(zt_sampler_init(&s, &f, 16, 3, false, &err), ZT_OK);
    int32_t in[16], tg[16];
    for (uint64_t w = 0; w < 4; w++) {
        assert_int_equal(zt_sampler_get(&s, w, in, tg, NULL, NULL, V, &err), ZT_OK);
        for (int t = 0; t < 16; t++) {
            assert_int_equal(in[t], (int32_t)tok[w * 16 + (uint64_t)t]);
            assert_int_equal(tg[t], (int32_t)tok[w * 16 + (uint64_t)t + 1]);
        }
    }
    /* window 0 holds 40009 * 2 = 80018: fine for V = 128256, not for GPT-2's 50257 */
    assert_int_equal(zt_sampler_get(&s, 0, in, tg, NULL, NULL, 50257, &err), ZT_ERR_DATA);
    assert_non_null(strstr(err.msg, "token 80018 at position 2 is outside the vocabulary (V=50257)"));
    zt_sampler_free(&s);
    zt_token_file_close(&f);
    /* an id past INT32_MAX is refused, never turned negative */
    tok[5] = 4000000000u;
    assert_int_equal(zt_token_file_write(p, tok, N, 4, &err), ZT_OK);
    assert_int_equal(zt_token_file_open(&f, p, &err), ZT_OK);
    assert_int_equal(zt_sampler_init(&s, &f, 16, 3, false, &err), ZT_OK);
    assert_int_equal(zt_sampler_get(&s, 0, in, tg, NULL, NULL, 16777216, &err), ZT_ERR_DATA);
    assert_non_null(strstr(err.msg, "token 4000000000 at position 5"));
    zt_sampler_free(&s);
    zt_token_file_close(&f);
}

static void open_tokens(zt_token_file *f, const char *name, int n, int V) {
    char p[512];
    path(p, name);
    uint32_t *tok = malloc((size_t)n * sizeof *tok);
    for (int i = 0; i < n; i++) tok[i] = (uint32_t)(i % V);
    zt_error err = {0};
    assert_int_equal(zt_token_file_write(p, tok, (size_t)n, 2, &err), ZT_OK);
    free(tok);
    assert_int_equal(zt_token_file_open(f, p, &err), ZT_OK);
}

static void test_sampler_is_deterministic_and_permutes(void **state) {
    zt_token_file f;
    int T = 8, n = 8 * 50 + 1; /* 50 windows */
    open_tokens(&f, "s.bin", n, 60000);
    zt_error err = {0};
    zt_sampler s1, s2;
    assert_int_equal(zt_sampler_init(&s1, &f, T, 7, true, &err), ZT_OK);
    assert_int_equal(zt_sampler_init(&s2, &f, T, 7, true, &err), ZT_OK);
    assert_int_equal(s1.n_windows, 50);
    int seen[50] = {0};
    int32_t in[8], tg[8], in2[8], tg2[8];
    for (uint64_t i = 0; i < 50; i++) {
        assert_int_equal(zt_sampler_get(&s1, i, in, tg, NULL, NULL, 65536, &err), ZT_OK);
        assert_int_equal(in[0] % 8, 0);                  /* windows start at multiples of T */
        for (int t = 0; t < T; t++) assert_int_equal(tg[t], in[t] + 1);
        seen[in[0] / 8]++;
    }
    for (int w = 0; w < 50; w++) assert_int_equal(seen[w], 1); /* an epoch is a permutation */
    /* random access in any order gives the same samples (here: epoch 2 first, then epoch 0) */
    assert_int_equal(zt_sampler_get(&s2, 123, in2, tg2, NULL, NULL, 65536, &err), ZT_OK);
    assert_int_equal(zt_sampler_get(&s1, 123, in, tg, NULL, NULL, 65536, &err), ZT_OK);
    assert_memory_equal(in, in2, sizeof in);
    assert_int_equal(zt_sampler_get(&s2, 5, in2, tg2, NULL, NULL, 65536, &err), ZT_OK);
    assert_int_equal(zt_sampler_get(&s1, 5, in, tg, NULL, NULL, 65536, &err), ZT_OK);
    assert_memory_equal(in, in2, sizeof in);
    /* a global batch of 4 read by one rank (stride 1) equals two ranks reading 2 each */
    int32_t one[32], onet[32], r0[16], r0t[16], r1[16], r1t[16];
    assert_int_equal(zt_sampler_batch(&s1, 20, 1, 4, one, onet, NULL, NULL, 65536, &err), ZT_OK);
    assert_int_equal(zt_sampler_batch(&s2, 20, 1, 2, r0, r0t, NULL, NULL, 65536, &err), ZT_OK);
    assert_int_equal(zt_sampler_batch(&s2, 22, 1, 2, r1, r1t, NULL, NULL, 65536, &err), ZT_OK);
    assert_memory_equal(one, r0, sizeof r0);
    assert_memory_equal(one + 16, r1, sizeof r1);
    /* another seed, another order */
    zt_sampler s3;
    assert_int_equal(zt_sampler_init(&s3, &f, T, 8, true, &err), ZT_OK);
    int differ = 0;
    for (uint64_t i = 0; i < 10; i++) {
        zt_sampler_get(&s1, i, in, tg, NULL, NULL, 65536, &err);
        zt_sampler_get(&s3, i, in2, tg2, NULL, NULL, 65536, &err);
        differ |= in[0] != in2[0];
    }
    assert_true(differ);
    zt_sampler_free(&s1);
    zt_sampler_free(&s2);
    zt_sampler_free(&s3);
    zt_token_file_close(&f);
}

static void test_sampler_errors(void **state) {
    zt_token_file f;
    open_tokens(&f, "small.bin", 5, 100);
    zt_error err = {0};
    zt_sampler s;
    assert_int_equal(zt_sampler_init(&s, &f, 8, 1, true, &err), ZT_ERR_DATA);
    assert_non_null(strstr(err.msg, "fewer than one window"));
    assert_int_equal(zt_sampler_init(&s, &f, 2, 1, false, &err), ZT_OK);
    int32_t in[2], tg[2];
    assert_int_equal(zt_sampler_get(&s, 1, in, tg, NULL, NULL, 3, &err), ZT_ERR_DATA); /* tokens 2,3,4 >= V=3 */
    assert_non_null(strstr(err.msg, "outside the vocabulary"));
    zt_sampler_free(&s);
    zt_token_file_close(&f);
}

/* Skipped samples: logical index i reads the i-th physical sample outside the skipped ranges;
 * ranges merge; a step's batch is skipped where it maps; the spec parser refuses bad text. */
static void test_sampler_skips(void **state) {
    zt_token_file f;
    open_tokens(&f, "skip.bin", 8 * 50 + 1, 60000);
    zt_error err = {0};
    zt_sampler s, plain;
    assert_int_equal(zt_sampler_init(&s, &f, 8, 7, true, &err), ZT_OK);
    assert_int_equal(zt_sampler_init(&plain, &f, 8, 7, true, &err), ZT_OK);
    assert_int_equal(zt_sampler_skip(&s, 10, 4, &err), ZT_OK);   /* 10..13 */
    assert_int_equal(zt_sampler_skip(&s, 20, 2, &err), ZT_OK);   /* 20..21 */
    assert_int_equal(zt_sampler_physical(&s, 9), 9);
    assert_int_equal(zt_sampler_physical(&s, 10), 14);
    assert_int_equal(zt_sampler_physical(&s, 15), 19);
    assert_int_equal(zt_sampler_physical(&s, 16), 22);
    int32_t in[8], tg[8], in2[8], tg2[8];
    assert_int_equal(zt_sampler_get(&s, 16, in, tg, NULL, NULL, 65536, &err), ZT_OK);
    assert_int_equal(zt_sampler_get(&plain, 22, in2, tg2, NULL, NULL, 65536, &err), ZT_OK);
    assert_memory_equal(in, in2, sizeof in);
    assert_int_equal(zt_sampler_skip(&s, 14, 6, &err), ZT_OK);   /* bridges both: 10..21 */
    assert_int_equal(s.n_skips, 1);
    assert_int_equal(s.skips[0].start, 10);
    assert_int_equal(s.skips[0].count, 12);
    assert_int_equal(zt_sampler_skip(&s, 11, 3, &err), ZT_OK);   /* inside: nothing changes */
    assert_int_equal(s.n_skips, 1);
    assert_int_equal(s.skips[0].count, 12);
    /* logical 8..11 read physical 8, 9, 22, 23: skipping them leaves 8..23 one range */
    assert_int_equal(zt_sampler_skip_logical(&s, 8, 4, &err), ZT_OK);
    assert_int_equal(s.n_skips, 1);
    assert_int_equal(s.skips[0].start, 8);
    assert_int_equal(s.skips[0].count, 16);
    assert_int_equal(zt_sampler_physical(&s, 8), 24);
    assert_int_equal(zt_sampler_skip(&s, 5, 0, &err), ZT_ERR_USAGE);
    for (int k = 0; k < ZT_SAMPLER_MAX_SKIPS - 1; k++) assert_int_equal(zt_sampler_skip(&s, 100 + 2 * (uint64_t)k, 1, &err), ZT_OK);
    assert_int_equal(zt_sampler_skip(&s, 1000, 1, &err), ZT_ERR_USAGE);
    assert_non_null(strstr(err.msg, "separate ranges"));
    zt_sample_range r[4];
    int n;
    assert_int_equal(zt_sampler_parse_skips("28:4,100:1", r, 4, &n, &err), ZT_OK);
    assert_int_equal(n, 2);
    assert_int_equal(r[1].start, 100);
    assert_int_equal(zt_sampler_parse_skips("", r, 4, &n, &err), ZT_OK);
    assert_int_equal(n, 0);
    const char *bad[] = {"28", "28:0", "-1:4", "28:-4", "a:4", "28:4;3:1", "28:4:", "1:1,2:1,3:1,4:1,5:1"};
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        assert_int_equal(zt_sampler_parse_skips(bad[k], r, 4, &n, &err), ZT_ERR_USAGE);
        assert_non_null(strstr(err.msg, "data.skip_samples"));
    }
    zt_sampler_free(&s);
    zt_sampler_free(&plain);
    zt_token_file_close(&f);
}

static zt_engine *small_engine(zt_model **m, int layers, uint64_t seed) {
    zt_gpt2_config c = {.max_seq_len = 8, .vocab_size = 50, .n_layer = layers, .n_head = 2, .n_embd = 8};
    zt_error err = {0};
    assert_int_equal(zt_gpt2_create(&c, m, &err), ZT_OK);
    zt_engine_options o = {.B = 1, .T = 4, .seed = seed};
    zt_optimizer_config_default(&o.optim);
    zt_engine *e;
    assert_int_equal(zt_engine_create(*m, &o, &e, &err), ZT_OK);
    assert_int_equal(zt_engine_init_params(e, &err), ZT_OK);
    return e;
}

static void test_weights_round_trip_and_corruption(void **state) {
    char p[512];
    path(p, "w.ztw");
    zt_error err = {0};
    zt_model *m1, *m2, *m3;
    zt_engine *a = small_engine(&m1, 2, 1), *b = small_engine(&m2, 2, 2), *c = small_engine(&m3, 1, 1);
    assert_int_equal(zt_weights_save(a, p, true, &err), ZT_OK);
    zt_model_spec cfg;
    assert_int_equal(zt_weights_read_config(p, &cfg, &err), ZT_OK);
    assert_int_equal(cfg.arch, ZT_ARCH_GPT2);
    assert_int_equal(cfg.gpt2.n_layer, 2);
    assert_true(zt_engine_param_hash(a) != zt_engine_param_hash(b));
    assert_int_equal(zt_weights_load(b, p, &err), ZT_OK);
    assert_true(zt_engine_param_hash(a) == zt_engine_param_hash(b));
    /* another model shape */
    assert_int_equal(zt_weights_load(c, p, &err), ZT_ERR_CKPT);
    assert_non_null(strstr(err.msg, "tensors"));
    /* a flipped bit */
    FILE *f = fopen(p, "r+b");
    fseek(f, 200, SEEK_SET);
    int ch = fgetc(f);
    fseek(f, 200, SEEK_SET);
    fputc(ch ^ 4, f);
    fclose(f);
    assert_int_equal(zt_weights_load(b, p, &err), ZT_ERR_CKPT);
    assert_non_null(strstr(err.msg, "checksum mismatch"));
    assert_non_null(strstr(err.msg, "w.ztw"));
    /* truncated */
    assert_int_equal(zt_weights_save(a, p, true, &err), ZT_OK);
    assert_int_equal(truncate(p, 30), 0);
    assert_int_equal(zt_weights_load(b, p, &err), ZT_ERR_CKPT);
    assert_non_null(strstr(err.msg, "too short"));
    path(p, "nonexistent.ztw");
    assert_int_equal(zt_weights_read_config(p, &cfg, &err), ZT_ERR_CKPT);
    zt_engine_free(a);
    zt_engine_free(b);
    zt_engine_free(c);
    zt_model_free(m1);
    zt_model_free(m2);
    zt_model_free(m3);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_token_file_round_trip),
        cmocka_unit_test(test_token_file_errors),
        cmocka_unit_test(test_sampler_uint32),
        cmocka_unit_test(test_sampler_is_deterministic_and_permutes),
        cmocka_unit_test(test_sampler_errors),
        cmocka_unit_test(test_sampler_skips),
        cmocka_unit_test(test_weights_round_trip_and_corruption),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
