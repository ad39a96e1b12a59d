/* test_tokenizer_spm.c - SentencePiece-style tokenizer.json (src/data/tokenizer_spm.c,
 * tokenizer_spm_load.c) on a small hand-made vocabulary whose tokens can be worked out by hand:
 * merge order, byte fallback, fuse_unk, added tokens (lstrip, rstrip, single_word), Metaspace
 * (prepend_scheme, split), decoding and its continuation, the byte offsets of zt_bpe_encode_offsets
 * for SentencePiece and byte-level (GPT-2) tokenizers, zt_tokenizer_token_id, eot, the template, and
 * every refused or malformed field (the message must name it). The real tokenizers (Llama 2, Mistral,
 * Gemma) are held to @huggingface/tokenizers by tests/tokenizer_spm.sh. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data/tokenizer_json.h"

static char g_path[256];

/* The vocabulary: ▁ (U+2581) is \u2581 in JSON. Merges by rank: "a ▁", "▁ a", "a b", "▁a b". */
#define VOCAB                                                                                                  \
    "\"<unk>\": 0, \"<s>\": 1, \"</s>\": 2, \"<0xE4>\": 3, \"<0xB8>\": 4, \"<0xAD>\": 5, \"\\u2581\": 6, "     \
    "\"a\": 7, \"b\": 8, \"c\": 9, \"\\u2581a\": 10, \"ab\": 11, \"\\u2581ab\": 12, \"\\u00e9\": 13, "         \
    "\"a\\u2581\": 14, \"<0x20>\": 15"
#define MERGES "[\"a \\u2581\", \"\\u2581 a\", \"a b\", \"\\u2581a b\"]"
#define LEGACY_NORM                                                                                            \
    "{\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"Prepend\", \"prepend\": \"\\u2581\"}, "          \
    "{\"type\": \"Replace\", \"pattern\": {\"String\": \" \"}, \"content\": \"\\u2581\"}]}"
#define LLAMA_DEC                                                                                              \
    "{\"type\": \"Sequence\", \"decoders\": [{\"type\": \"Replace\", \"pattern\": {\"String\": \"\\u2581\"}, " \
    "\"content\": \" \"}, {\"type\": \"ByteFallback\"}, {\"type\": \"Fuse\"}, {\"type\": \"Strip\", "         \
    "\"content\": \" \", \"start\": 1, \"stop\": 0}]}"
#define ADDED(extra)                                                                                           \
    "[{\"id\": 0, \"content\": \"<unk>\", \"special\": true, \"normalized\": false}, "                        \
    "{\"id\": 1, \"content\": \"<s>\", \"special\": true, \"normalized\": false" extra "}, "                    \
    "{\"id\": 2, \"content\": \"</s>\", \"special\": true, \"normalized\": false}]"
#define TEMPLATE                                                                                               \
    "{\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\": {\"id\": \"<s>\", \"type_id\": 0}}, " \
    "{\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}], \"special_tokens\": {\"<s>\": {\"id\": \"<s>\", "      \
    "\"ids\": [1], \"tokens\": [\"<s>\"]}}}"

/* Writes a tokenizer.json from its parts (JSON text each) and loads it. */
static int load(zt_bpe **b, zt_error *err, const char *model_extra, const char *merges, const char *norm,
                const char *pre, const char *dec, const char *added) {
    FILE *f = fopen(g_path, "w");
    assert_non_null(f);
    fprintf(f, "{\"version\": \"1.0\", \"added_tokens\": %s, \"normalizer\": %s, \"pre_tokenizer\": %s, "
               "\"post_processor\": %s, \"decoder\": %s, \"model\": {\"type\": \"BPE\", \"dropout\": null, "
               "\"unk_token\": \"<unk>\", \"fuse_unk\": true, \"byte_fallback\": true%s, \"vocab\": {" VOCAB "}, "
               "\"merges\": %s}}",
            added, norm, pre, TEMPLATE, dec, model_extra, merges);
    assert_int_equal(fclose(f), 0);
    *b = NULL;
    return zt_tokenizer_json_load(b, g_path, err);
}

/* The Llama 2 layout; extra: more fields of the added token <s>. */
static zt_bpe *legacy(const char *extra) {
    zt_bpe *b;
    zt_error err = {0};
    char added[1024];
    snprintf(added, sizeof added, ADDED("%s"), extra);
    int rc = load(&b, &err, "", MERGES, LEGACY_NORM, "null", LLAMA_DEC, added);
    if (rc) fprintf(stderr, "load: %s\n", err.msg);
    assert_int_equal(rc, ZT_OK);
    return b;
}

/* Encodes text and compares with "id@offset id@offset ...". */
static void expect(zt_bpe *b, const char *text, size_t len, const char *want) {
    uint32_t *t, *o;
    size_t n;
    zt_error err = {0};
    assert_int_equal(zt_bpe_encode_offsets(b, text, len, &t, &o, &n, &err), ZT_OK);
    char got[1024] = "";
    size_t k = 0;
    for (size_t i = 0; i < n; i++) k += (size_t)snprintf(got + k, sizeof got - k, i ? " %u@%u" : "%u@%u", t[i], o[i]);
    if (strcmp(got, want)) fprintf(stderr, "text \"%.*s\": got %s, want %s\n", (int)len, text, got, want);
    assert_string_equal(got, want);
    uint32_t *t2;
    size_t n2;
    assert_int_equal(zt_bpe_encode(b, text, len, &t2, &n2, &err), ZT_OK); /* the same ids without offsets */
    assert_int_equal(n2, n);
    assert_memory_equal(t2, t, n * sizeof *t);
    free(t), free(o), free(t2);
}

static void expect_decode(zt_bpe *b, const uint32_t *ids, size_t n, bool next, const char *want) {
    char *s;
    size_t len;
    zt_error err = {0};
    assert_int_equal(next ? zt_tokenizer_decode_next(b, ids, n, &s, &len, &err) : zt_bpe_decode(b, ids, n, &s, &len, &err),
                     ZT_OK);
    assert_int_equal(len, strlen(want));
    assert_string_equal(s, want);
    free(s);
}

static void test_merges_fallback_offsets(void **state) {
    (void)state;
    zt_bpe *b = legacy("");
    /* "▁ab▁中c": ▁ a -> ▁a (rank 1), then ▁a b (rank 3); 中 has no piece: its three bytes */
    expect(b, "ab \xe4\xb8\xad" "c", 7, "12@0 6@2 3@3 4@4 5@5 9@6");
    /* "▁ba▁ab": a ▁ (rank 0) first, then a b: no pre-tokenizer, one word */
    expect(b, "ba ab", 5, "6@0 8@0 14@1 11@3");
    expect(b, "azz", 3, "10@0 0@1");              /* z has no piece and no byte piece: one fused <unk> */
    expect(b, "a</s>b", 6, "10@0 2@1 6@5 8@5");   /* the span after </s> gets its own ▁ */
    expect(b, "a\xff" "b", 3, "10@0 0@1 8@2");    /* invalid UTF-8: U+FFFD (no piece: <unk>) at byte 1 */
    expect(b, "", 0, "");
    expect(b, "\xc3\xa9", 2, "6@0 13@0");
    zt_bpe_free(b);
}

static void test_added_token_options(void **state) {
    (void)state;
    zt_bpe *b = legacy(", \"lstrip\": true, \"rstrip\": true");
    expect(b, "a  <s>  b", 9, "10@0 1@1 6@8 8@8"); /* <s> takes the spaces on both sides */
    zt_bpe_free(b);
    b = legacy(", \"single_word\": true");
    expect(b, "a <s> b", 7, "6@0 14@0 1@2 6@5 6@5 8@6"); /* "▁a▁": a ▁ first */
    expect(b, "a<s>", 4, "10@0 0@1"); /* touching a word: text; "<s>" has no piece: one fused <unk> */
    zt_bpe_free(b);
}

static void test_metaspace(void **state) {
    (void)state;
    zt_bpe *b;
    zt_error err = {0};
    const char *ms_split = "{\"type\": \"Metaspace\", \"replacement\": \"\\u2581\", \"prepend_scheme\": \"first\", "
                           "\"split\": true}";
    const char *ms_nosplit = "{\"type\": \"Metaspace\", \"replacement\": \"\\u2581\", \"prepend_scheme\": \"first\", "
                             "\"split\": false}";
    const char *ms_dec = "{\"type\": \"Metaspace\", \"replacement\": \"\\u2581\", \"prepend_scheme\": \"first\"}";
    assert_int_equal(load(&b, &err, "", MERGES, "null", ms_split, ms_dec, ADDED("")), ZT_OK);
    expect(b, "ba ab", 5, "6@0 8@0 7@1 12@2");         /* words ▁ba, ▁ab */
    expect(b, "a</s>ab", 7, "10@0 2@1 11@5");           /* first: no ▁ after </s> */
    expect_decode(b, (const uint32_t[]){6, 8, 7, 12}, 4, false, "ba ab");
    expect_decode(b, (const uint32_t[]){12}, 1, true, " ab");
    zt_bpe_free(b);
    assert_int_equal(load(&b, &err, "", MERGES, "null", ms_nosplit, ms_dec, ADDED("")), ZT_OK);
    expect(b, "ba ab", 5, "6@0 8@0 14@1 11@3");         /* one word: a ▁ merges first */
    zt_bpe_free(b);
    const char *always = "{\"type\": \"Metaspace\", \"replacement\": \"\\u2581\", \"prepend_scheme\": \"always\"}";
    assert_int_equal(load(&b, &err, "", MERGES, "null", always, ms_dec, ADDED("")), ZT_OK);
    expect(b, "a</s>ab", 7, "10@0 2@1 12@5");
    zt_bpe_free(b);
}

static void test_decode(void **state) {
    (void)state;
    zt_bpe *b = legacy("");
    expect_decode(b, (const uint32_t[]){12, 6, 3, 4, 5, 9}, 6, false, "ab \xe4\xb8\xad" "c");
    expect_decode(b, (const uint32_t[]){6, 10}, 2, true, "  a"); /* continuing: no strip */
    expect_decode(b, (const uint32_t[]){6, 10}, 2, false, " a");
    expect_decode(b, (const uint32_t[]){1, 10, 2}, 3, false, "<s> a</s>");
    char *s;
    size_t len;
    zt_error err = {0};
    assert_int_equal(zt_bpe_decode(b, (const uint32_t[]){10, 99}, 2, &s, &len, &err), ZT_ERR_DATA);
    assert_non_null(strstr(err.msg, "token 99 at position 1"));
    zt_bpe_free(b);
}

static void test_lookup_eot_template(void **state) {
    (void)state;
    zt_bpe *b = legacy("");
    assert_int_equal(zt_tokenizer_token_id(b, "<s>"), 1);
    assert_int_equal(zt_tokenizer_token_id(b, "\xe2\x96\x81" "ab"), 12);
    assert_int_equal(zt_tokenizer_token_id(b, "nope"), -1);
    assert_int_equal(zt_tokenizer_token_id(b, ""), -1);
    uint32_t eot;
    zt_error err = {0};
    assert_int_equal(zt_tokenizer_eot(b, &eot, &err), ZT_OK);
    assert_int_equal(eot, 2);
    assert_int_equal(zt_bpe_vocab_size(b), 16);
    const uint32_t *before, *after;
    size_t nb, na;
    zt_tokenizer_template(b, &before, &nb, &after, &na);
    assert_int_equal(nb, 1);
    assert_int_equal(before[0], 1);
    assert_int_equal(na, 0);
    uint32_t pre[ZT_TOKENIZER_FRAME_MAX], post[ZT_TOKENIZER_FRAME_MAX];
    zt_tokenizer_doc_frame(b, eot, pre, &nb, post, &na);
    assert_int_equal(nb, 1);
    assert_int_equal(pre[0], 1);
    assert_int_equal(na, 1);
    assert_int_equal(post[0], 2);
    zt_bpe_free(b);
}

/* GPT-2 (byte-level) offsets: each token's piece, in order; invalid bytes map to where they were. */
static void test_byte_level_offsets(void **state) {
    (void)state;
    zt_bpe *b;
    zt_error err = {0};
    if (zt_tokenizer_open(&b, NULL, &err)) {
        fprintf(stderr, "test_tokenizer_spm: GPT-2's files are missing (%s): run scripts/setup.sh\n", err.msg);
        fail();
    }
    expect(b, "Hello world", 11, "15496@0 995@5");
    expect(b, "a\xff" "b c", 5, "64@0 4210@1 65@2 269@3"); /* U+FFFD: one token for the byte at 1 */
    expect(b, "\xf0\x9f\x99\x82", 4, "8582@0 25081@2");    /* 🙂: two tokens, the second starts inside it */
    assert_int_equal(zt_tokenizer_token_id(b, "<|endoftext|>"), 50256);
    zt_bpe_free(b);
}

/* A refused or malformed field: load fails with ZT_ERR_DATA and the message names it. */
static void refused(const char *want, const char *model_extra, const char *merges, const char *norm, const char *pre,
                    const char *dec) {
    zt_bpe *b;
    zt_error err = {0};
    int rc = load(&b, &err, model_extra, merges, norm, pre, dec, ADDED(""));
    if (rc != ZT_ERR_DATA || !strstr(err.msg, want)) fprintf(stderr, "want \"%s\", got %d: %s\n", want, rc, err.msg);
    assert_int_equal(rc, ZT_ERR_DATA);
    assert_null(b);
    assert_non_null(strstr(err.msg, want));
}

static void test_refused(void **state) {
    (void)state;
    refused("normalizer of type \"NFKD\"", "", MERGES, "{\"type\": \"NFKD\"}", "null", LLAMA_DEC);
    refused("normalizer.normalizers[1] of type \"Lowercase\"", "", MERGES,
            "{\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"Prepend\", \"prepend\": \"x\"}, "
            "{\"type\": \"Lowercase\"}]}", "null", LLAMA_DEC);
    refused("normalizer (Replace) needs pattern.String", "", MERGES,
            "{\"type\": \"Replace\", \"pattern\": {\"Regex\": \" +\"}, \"content\": \"x\"}", "null", LLAMA_DEC);
    refused("pre_tokenizer of type \"Whitespace\"", "", MERGES, "null", "{\"type\": \"Whitespace\"}", LLAMA_DEC);
    refused("pre_tokenizer.prepend_scheme \"sometimes\"", "", MERGES, "null",
            "{\"type\": \"Metaspace\", \"replacement\": \"x\", \"prepend_scheme\": \"sometimes\"}", LLAMA_DEC);
    refused("pre_tokenizer.colour is an option", "", MERGES, "null",
            "{\"type\": \"Metaspace\", \"replacement\": \"x\", \"colour\": 1}", LLAMA_DEC);
    refused("pre_tokenizer.split must be", "", MERGES, "null",
            "{\"type\": \"Metaspace\", \"replacement\": \"x\", \"split\": \"yes\"}", LLAMA_DEC);
    refused("pre_tokenizer.replacement must be a non-empty string", "", MERGES, "null", "{\"type\": \"Metaspace\"}",
            LLAMA_DEC);
    refused("decoder.decoders[0] of type \"WordPiece\"", "", MERGES, "null", "null",
            "{\"type\": \"Sequence\", \"decoders\": [{\"type\": \"WordPiece\"}]}");
    refused("decoder (Strip) needs start and stop", "", MERGES, "null", "null",
            "{\"type\": \"Strip\", \"content\": \" \", \"start\": -1, \"stop\": 0}");
    refused("model.merges[1] (\"a\" \"c\"): the merged piece is not in model.vocab", "", "[\"a b\", \"a c\"]",
            "null", "null", LLAMA_DEC);
    refused("model.merges[0] (\"q\" \"a\"): the first piece", "", "[\"q a\"]", "null", "null", LLAMA_DEC);
    refused("model.merges[1] is not \"a b\"", "", "[\"a b\", \"ab\"]", "null", "null", LLAMA_DEC);
    refused("model.merges[0] is not", "", "[[\"a\"]]", "null", "null", LLAMA_DEC);
    refused("model.merges is not an array", "", "{}", "null", "null", LLAMA_DEC);
    refused("model.continuing_subword_prefix, end_of_word_suffix and dropout are not supported",
            ", \"continuing_subword_prefix\": \"##\"", MERGES, "null", "null", LLAMA_DEC);
    refused("model.colour is an option", ", \"colour\": 1", MERGES, "null", "null", LLAMA_DEC);
    /* model.unk_token that the vocabulary lacks; byte_fallback without any <0xNN> piece */
    FILE *f = fopen(g_path, "w");
    fprintf(f, "{\"normalizer\": " LEGACY_NORM ", \"model\": {\"type\": \"BPE\", \"unk_token\": \"<nope>\", "
               "\"vocab\": {\"a\": 0}, \"merges\": []}}");
    fclose(f);
    zt_bpe *b;
    zt_error err = {0};
    assert_int_equal(zt_tokenizer_json_load(&b, g_path, &err), ZT_ERR_DATA);
    assert_non_null(strstr(err.msg, "model.unk_token <nope> is not a piece of model.vocab"));
    f = fopen(g_path, "w");
    fprintf(f, "{\"model\": {\"type\": \"BPE\", \"byte_fallback\": true, \"vocab\": {\"a\": 0, \"<0xZZ>\": 1}, "
               "\"merges\": []}}");
    fclose(f);
    assert_int_equal(zt_tokenizer_json_load(&b, g_path, &err), ZT_ERR_DATA);
    assert_non_null(strstr(err.msg, "model.byte_fallback is true but model.vocab has no byte pieces"));
    f = fopen(g_path, "w");
    fprintf(f, "{\"model\": {\"type\": \"Unigram\", \"byte_fallback\": true, \"vocab\": [[\"a\", 0.0]]}}");
    fclose(f);
    assert_int_equal(zt_tokenizer_json_load(&b, g_path, &err), ZT_ERR_DATA);
    assert_non_null(strstr(err.msg, "model.type is \"Unigram\""));
    f = fopen(g_path, "w");
    fprintf(f, "{\"normalizer\": " LEGACY_NORM ", \"added_tokens\": [{\"id\": -3, \"content\": \"x\"}], "
               "\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}}");
    fclose(f);
    assert_int_equal(zt_tokenizer_json_load(&b, g_path, &err), ZT_ERR_DATA);
    assert_non_null(strstr(err.msg, "added_tokens[0] needs a non-empty content and an id"));
}

int main(void) {
    snprintf(g_path, sizeof g_path, "/tmp/zt_test_tokenizer_spm.%d.json", (int)getpid());
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_merges_fallback_offsets), cmocka_unit_test(test_added_token_options),
        cmocka_unit_test(test_metaspace),               cmocka_unit_test(test_decode),
        cmocka_unit_test(test_lookup_eot_template),     cmocka_unit_test(test_byte_level_offsets),
        cmocka_unit_test(test_refused),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    unlink(g_path);
    return rc;
}
