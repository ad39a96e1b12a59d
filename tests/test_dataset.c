/* test_dataset.c - records into training sequences (docs/data.md): each record shape and every bad
 * record (the field named; FILE:LINE for the file's records); the cache (round trip, reuse, a rebuild
 * when a record changes, a damaged or truncated cache refused, nothing written when a record is
 * bad); packing (every record exactly once, whole, no sequence over T, counted targets and
 * positions as the records say, truncate and drop counted, padding); mixtures (deterministic,
 * shares near the weights, cursors that add up, validation sources one after another). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "data/dataset_build.h"
#include "data/dataset_cache.h"
#include "data/mixture.h"
#include "data/packing.h"
#include "data/records.h"
#include "data/tokenizer_json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[256];
static zt_bpe *tok;

static int setup(void **state) {
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/zt_test_dataset.%d", (int)getpid());
    char cmd[300];
    snprintf(cmd, sizeof cmd, "mkdir -p %s", dir);
    zt_error err = {0};
    if (zt_tokenizer_open(&tok, NULL, &err)) return -1;
    return system(cmd);
}

static int teardown(void **state) {
    (void)state;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    zt_bpe_free(tok);
    return system(cmd);
}

static void write_file(const char *name, const char *text, char *path) {
    snprintf(path, 512, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static zt_record_rules rules(void) {
    return (zt_record_rules){.text_field = "text", .prompt_field = "prompt", .completion_field = "completion",
                             .messages_field = "messages", .add_eos = true};
}

static int render(const char *json, zt_rendered *out, zt_error *err) {
    cJSON *rec = cJSON_Parse(json);
    assert_non_null(rec);
    zt_record_rules r = rules();
    int rc = zt_record_render(&r, rec, out, err);
    cJSON_Delete(rec);
    return rc;
}

static void test_record_shapes(void **state) {
    (void)state;
    zt_rendered out = {0};
    zt_error err = {0};
    assert_int_equal(render("{\"text\": \"hello\"}", &out, &err), ZT_OK);
    assert_int_equal(out.shape, ZT_RECORD_TEXT);
    assert_string_equal(out.text, "hello");
    assert_int_equal(out.n_spans, 1);
    assert_true(out.spans[0].begin == 0 && out.spans[0].end == 5 && out.eos);
    assert_int_equal(render("{\"prompt\": \"Q?\", \"completion\": \" A.\"}", &out, &err), ZT_OK);
    assert_int_equal(out.shape, ZT_RECORD_PROMPT_COMPLETION);
    assert_string_equal(out.text, "Q? A.");
    assert_true(out.n_spans == 1 && out.spans[0].begin == 2 && out.spans[0].end == 5 && out.eos);
    zt_rendered_free(&out);
}

static void expect_error(const char *json, const char *want) {
    zt_rendered out = {0};
    zt_error err = {0};
    assert_int_equal(render(json, &out, &err), ZT_ERR_DATA);
    if (!strstr(err.msg, want)) fail_msg("%s: got '%s', want '%s'", json, err.msg, want);
    zt_rendered_free(&out);
}

static void test_record_errors(void **state) {
    (void)state;
    expect_error("[1, 2]", "a record must be a JSON object");
    expect_error("{\"title\": \"x\"}", "none of the fields \"messages\", \"prompt\"/\"completion\", \"text\"");
    expect_error("{\"text\": 5}", "field \"text\" is not a string");
    expect_error("{\"prompt\": \"a\"}", "field \"completion\" is missing");
    expect_error("{\"completion\": \"a\"}", "field \"prompt\" is missing");
    expect_error("{\"prompt\": \"a\", \"completion\": [1]}", "must both be strings or both lists of messages");
    expect_error("{\"messages\": \"hi\"}", "field \"messages\" is not a list of messages");
    expect_error("{\"messages\": [{\"content\": \"hi\"}]}", "messages[0] is not a message");
    expect_error("{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}", "needs a chat template");
}

static zt_dataset_spec spec(const char *source) {
    return (zt_dataset_spec){.source = source, .format = ZT_DATA_AUTO, .text_unit = ZT_TEXT_LINE, .rules = rules(),
                             .tokenizer = tok, .eos_id = 50256, .seed = 1, .cache_dir = dir};
}

static int count_caches(void) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "ls %s | grep -c ztds", dir);
    FILE *p = popen(cmd, "r");
    int n = 0;
    if (fscanf(p, "%d", &n) != 1) n = -1;
    pclose(p);
    return n;
}

static void test_build_and_reuse(void **state) {
    (void)state;
    char p[512], cache[4096];
    write_file("a.jsonl", "{\"prompt\": \"Hello\", \"completion\": \" world\"}\n\n{\"text\": \"x y z\"}\n", p);
    zt_dataset_spec s = spec(p);
    zt_dataset_report rep;
    zt_error err = {0};
    assert_int_equal(zt_dataset_build(&s, cache, sizeof cache, &rep, &err), ZT_OK);
    assert_false(rep.reused);
    assert_int_equal(rep.records, 2);
    zt_dataset d;
    assert_int_equal(zt_dataset_open(&d, cache, &err), ZT_OK);
    assert_int_equal(d.n_docs, 2);
    const uint32_t *ids;
    const uint8_t *c;
    uint32_t n, fl;
    zt_dataset_doc(&d, 0, &ids, &c, &n, &fl);
    /* "Hello" " world" <|endoftext|>: the prompt not counted, the completion and eos counted */
    assert_int_equal(n, 3);
    assert_int_equal(ids[0], 15496);
    assert_int_equal(ids[1], 995);
    assert_int_equal(ids[2], 50256);
    assert_true(!c[0] && c[1] && c[2]);
    zt_dataset_doc(&d, 1, &ids, &c, &n, &fl);
    assert_int_equal(n, 4);
    for (uint32_t i = 0; i < n; i++) assert_true(c[i]);
    zt_dataset_close(&d);
    assert_int_equal(zt_dataset_build(&s, cache, sizeof cache, &rep, &err), ZT_OK);
    assert_true(rep.reused);
    write_file("a.jsonl", "{\"prompt\": \"Hello\", \"completion\": \" there\"}\n{\"text\": \"x y z\"}\n", p);
    char cache2[4096];
    assert_int_equal(zt_dataset_build(&s, cache2, sizeof cache2, &rep, &err), ZT_OK);
    assert_false(rep.reused);
    assert_string_not_equal(cache, cache2);
}

static void test_bad_files(void **state) {
    (void)state;
    char p[512], cache[4096];
    zt_dataset_report rep;
    zt_error err = {0};
    int before = count_caches();
    write_file("b.jsonl", "{\"text\": \"ok\"}\n{\"text\": \"ok\",}\n", p);
    zt_dataset_spec s = spec(p);
    assert_int_equal(zt_dataset_build(&s, cache, sizeof cache, &rep, &err), ZT_ERR_DATA);
    assert_non_null(strstr(err.msg, "b.jsonl:2: malformed JSON at column"));
    write_file("b.jsonl", "{\"text\": \"ok\"}\n{\"text\": \"ok\"} x\n", p);
    assert_int_equal(zt_dataset_build(&s, cache, sizeof cache, &rep, &err), ZT_ERR_DATA);
    assert_non_null(strstr(err.msg, "b.jsonl:2: malformed JSON at column 15 (text after the record)"));
    write_file("b.jsonl", "{\"text\": \"ok\"}\n\n{\"prompt\": \"ok\"}\n", p);
    assert_int_equal(zt_dataset_build(&s, cache, sizeof cache, &rep, &err), ZT_ERR_DATA);
    assert_non_null(strstr(err.msg, "b.jsonl:3: field \"completion\" is missing"));
    write_file("b.jsonl", "\n\n", p);
    assert_int_equal(zt_dataset_build(&s, cache, sizeof cache, &rep, &err), ZT_ERR_DATA);
    assert_non_null(strstr(err.msg, "holds no record with a token"));
    assert_int_equal(count_caches(), before); /* nothing of a cache written */
    char glob[600];
    snprintf(glob, sizeof glob, "%s/none*.jsonl", dir);
    s.source = glob;
    assert_int_equal(zt_dataset_build(&s, cache, sizeof cache, &rep, &err), ZT_ERR_DATA);
    assert_non_null(strstr(err.msg, "no file matches"));
    s.source = "/nonexistent/file.jsonl";
    assert_int_equal(zt_dataset_build(&s, cache, sizeof cache, &rep, &err), ZT_ERR_IO);
    assert_non_null(strstr(err.msg, "/nonexistent/file.jsonl"));
}

static void test_damaged_cache(void **state) {
    (void)state;
    char p[512], cache[4096];
    write_file("c.txt", "one line\nanother line here\n", p);
    zt_dataset_spec s = spec(p);
    zt_dataset_report rep;
    zt_error err = {0};
    assert_int_equal(zt_dataset_build(&s, cache, sizeof cache, &rep, &err), ZT_OK);
    assert_int_equal(rep.records, 2);
    FILE *f = fopen(cache, "r+b");
    assert_non_null(f);
    fseek(f, 70, SEEK_SET);
    int ch = fgetc(f);
    fseek(f, 70, SEEK_SET);
    fputc(ch ^ 1, f);
    fclose(f);
    zt_dataset d;
    assert_int_equal(zt_dataset_open(&d, cache, &err), ZT_ERR_DATA);
    assert_non_null(strstr(err.msg, "content checksum mismatch"));
    assert_int_equal(truncate(cache, 100), 0);
    assert_int_equal(zt_dataset_open(&d, cache, &err), ZT_ERR_DATA);
    assert_non_null(strstr(err.msg, "truncated"));
    /* the next build rebuilds it (the header still names the key, but it does not open) */
    assert_int_equal(zt_dataset_build(&s, cache, sizeof cache, &rep, &err), ZT_OK);
    assert_false(rep.reused);
    assert_int_equal(zt_dataset_open(&d, cache, &err), ZT_OK);
    zt_dataset_close(&d);
}

/* a cache of n records of lengths len[i] (tokens), token k of record i = 1000 * i + k, token k
 * counted when (i + k) % 3 != 0 */
static void make_cache(const char *name, const uint32_t *len, int n, zt_dataset *d) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    zt_dataset_writer *w;
    zt_error err = {0};
    assert_int_equal(zt_dataset_writer_open(&w, p, 42, &err), ZT_OK);
    for (int i = 0; i < n; i++) {
        uint32_t ids[512];
        uint8_t c[512];
        for (uint32_t k = 0; k < len[i]; k++) ids[k] = 1000u * (uint32_t)i + k, c[k] = (i + k) % 3 != 0;
        assert_int_equal(zt_dataset_writer_add(w, ids, c, len[i], i % 5 == 4 ? ZT_DOC_VAL : 0, &err), ZT_OK);
    }
    assert_int_equal(zt_dataset_writer_close(w, true, &err), ZT_OK);
    assert_int_equal(zt_dataset_open(d, p, &err), ZT_OK);
}

static void check_layout(const zt_packed *pk, const zt_dataset *d, bool val) {
    int T = pk->T;
    int32_t in[512], tg[512], pos[512];
    uint64_t seen = 0, counted = 0;
    int *hits = calloc(d->n_docs, sizeof *hits);
    for (uint64_t s = 0; s < pk->n_seq; s++) {
        zt_packed_fill(pk, s, in, tg, pos);
        uint32_t c = 0;
        for (int t = 0; t < T; t++) {
            if (tg[t] >= 0) c++;
            if (pos[t] == 0 && in[t] != pk->pad_id) { /* a record starts: its tokens in order */
                int i = in[t] / 1000;
                hits[i]++;
                uint32_t n;
                const uint32_t *ids;
                const uint8_t *cc;
                uint32_t fl;
                zt_dataset_doc(d, (uint64_t)i, &ids, &cc, &n, &fl);
                assert_int_equal((fl & ZT_DOC_VAL) != 0, val);
                uint32_t m = n - 1 < (uint32_t)T ? n - 1 : (uint32_t)T;
                assert_true(t + (int)m <= T);
                for (uint32_t k = 0; k < m; k++) {
                    assert_int_equal(in[t + (int)k], (int)ids[k]);
                    assert_int_equal(pos[t + (int)k], (int)k);
                    assert_int_equal(tg[t + (int)k], cc[k + 1] ? (int)ids[k + 1] : -1);
                }
                seen += m;
            }
        }
        assert_int_equal(c, pk->seq_counted[s]);
        counted += c;
    }
    assert_int_equal(seen, pk->inputs);
    assert_int_equal(counted, pk->counted);
    for (uint64_t i = 0; i < d->n_docs; i++) {
        const uint32_t *ids;
        const uint8_t *cc;
        uint32_t n, fl;
        zt_dataset_doc(d, i, &ids, &cc, &n, &fl);
        bool used = ((fl & ZT_DOC_VAL) != 0) == val && n >= 2;
        if (!(used && n - 1 > (uint32_t)T && pk->dropped)) assert_int_equal(hits[i], used ? 1 : 0);
    }
    free(hits);
}

static void test_packing(void **state) {
    (void)state;
    uint32_t len[40];
    for (int i = 0; i < 40; i++) len[i] = (uint32_t)(1 + (i * 37) % 90); /* 1..90 tokens */
    zt_dataset d;
    make_cache("p.ztds", len, 40, &d);
    zt_packed pk;
    zt_error err = {0};
    assert_int_equal(zt_packed_build(&pk, &d, false, 64, true, ZT_TOO_LONG_TRUNCATE, 7, &err), ZT_OK);
    assert_true(pk.truncated > 0 && pk.too_short > 0 && pk.dropped == 0);
    check_layout(&pk, &d, false);
    assert_true(zt_packed_fill_ratio(&pk) > 0.9);
    uint64_t packed_seq = pk.n_seq;
    zt_packed_free(&pk);
    assert_int_equal(zt_packed_build(&pk, &d, false, 64, true, ZT_TOO_LONG_DROP, 7, &err), ZT_OK);
    assert_true(pk.dropped > 0 && pk.truncated == 0);
    check_layout(&pk, &d, false);
    zt_packed_free(&pk);
    assert_int_equal(zt_packed_build(&pk, &d, false, 64, false, ZT_TOO_LONG_TRUNCATE, 7, &err), ZT_OK);
    assert_true(pk.n_seq == pk.docs && pk.n_seq > packed_seq);
    check_layout(&pk, &d, false);
    zt_packed_free(&pk);
    assert_int_equal(zt_packed_build(&pk, &d, true, 64, true, ZT_TOO_LONG_TRUNCATE, 7, &err), ZT_OK);
    check_layout(&pk, &d, true);
    zt_packed_free(&pk);
    uint32_t tiny[2] = {1, 1};
    zt_dataset d2;
    make_cache("t.ztds", tiny, 2, &d2);
    assert_int_equal(zt_packed_build(&pk, &d2, false, 64, true, ZT_TOO_LONG_TRUNCATE, 7, &err), ZT_ERR_DATA);
    assert_non_null(strstr(err.msg, "no training record of two or more tokens"));
    zt_dataset_close(&d2);
    zt_dataset_close(&d);
}

static void test_mixture(void **state) {
    (void)state;
    uint32_t la[30], lb[12];
    for (int i = 0; i < 30; i++) la[i] = 20 + (uint32_t)i;
    for (int i = 0; i < 12; i++) lb[i] = 50;
    zt_dataset da, db;
    make_cache("ma.ztds", la, 30, &da);
    make_cache("mb.ztds", lb, 12, &db);
    zt_packed pa, pb;
    zt_error err = {0};
    assert_int_equal(zt_packed_build(&pa, &da, false, 64, true, ZT_TOO_LONG_TRUNCATE, 0, &err), ZT_OK);
    assert_int_equal(zt_packed_build(&pb, &db, false, 64, true, ZT_TOO_LONG_TRUNCATE, 0, &err), ZT_OK);
    const zt_packed *src[2] = {&pa, &pb};
    double w[2] = {3, 1};
    zt_mixture m, m2;
    assert_int_equal(zt_mixture_init(&m, src, 2, w, 5, true, &err), ZT_OK);
    assert_int_equal(zt_mixture_init(&m2, src, 2, w, 5, true, &err), ZT_OK);
    int from[2] = {0, 0};
    for (uint64_t i = 0; i < 400; i++) {
        int s;
        uint64_t q;
        zt_mixture_locate(&m, i, &s, &q);
        from[s]++;
        assert_true(q < src[s]->n_seq);
    }
    assert_true(from[0] == 300 && from[1] == 100); /* Megatron's rule: exact shares at multiples */
    uint64_t cur[2];
    zt_mixture_cursors(&m, 123, cur);
    assert_int_equal(cur[0] + cur[1], 123);
    /* random access (backwards too) gives what the sequential walk gave */
    for (uint64_t i = 399; i > 0; i -= 7) {
        int s1, s2;
        uint64_t q1, q2;
        zt_mixture_locate(&m, i, &s1, &q1);
        zt_mixture_locate(&m2, i, &s2, &q2);
        assert_true(s1 == s2 && q1 == q2);
        if (i < 7) break;
    }
    /* each epoch of a source visits every sequence once */
    int *hit = calloc(pa.n_seq, sizeof *hit);
    for (uint64_t i = 0, got = 0; got < pa.n_seq; i++) {
        int s;
        uint64_t q;
        zt_mixture_locate(&m, i, &s, &q);
        if (s == 0) hit[q]++, got++;
    }
    for (uint64_t q = 0; q < pa.n_seq; q++) assert_int_equal(hit[q], 1);
    free(hit);
    zt_mixture_free(&m);
    zt_mixture_free(&m2);
    /* concatenated, in order (validation) */
    assert_int_equal(zt_mixture_init(&m, src, 2, NULL, 5, false, &err), ZT_OK);
    for (uint64_t i = 0; i < pa.n_seq + pb.n_seq; i++) {
        int s;
        uint64_t q;
        zt_mixture_locate(&m, i, &s, &q);
        assert_int_equal(s, i < pa.n_seq ? 0 : 1);
        assert_int_equal(q, i < pa.n_seq ? i : i - pa.n_seq);
    }
    int s0;
    uint64_t q0;
    zt_mixture_locate(&m, pa.n_seq + pb.n_seq + 3, &s0, &q0); /* the second lap: each source's epoch 1 */
    assert_true(s0 == 0 && q0 == 3);
    m.end_pads = true; /* validation: past the end, padding that counts nothing */
    int32_t in[64], tg[64], ps[64];
    uint32_t cnt = 99;
    zt_mixture_fill(&m, m.total, in, tg, ps, &cnt);
    assert_int_equal(cnt, 0);
    for (int t = 0; t < 64; t++) assert_true(tg[t] == -1 && ps[t] == t && in[t] == pa.pad_id);
    assert_int_equal(zt_mixture_counted(&m, m.total + 5), 0);
    zt_mixture_free(&m);
    double bad[2] = {0, 0};
    assert_int_equal(zt_mixture_init(&m, src, 2, bad, 5, true, &err), ZT_ERR_USAGE);
    assert_non_null(strstr(err.msg, "add up to 0"));
    double neg[2] = {1, -1};
    assert_int_equal(zt_mixture_init(&m, src, 2, neg, 5, true, &err), ZT_ERR_USAGE);
    assert_non_null(strstr(err.msg, "weight 2"));
    zt_packed_free(&pa);
    zt_packed_free(&pb);
    zt_dataset_close(&da);
    zt_dataset_close(&db);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_record_shapes), cmocka_unit_test(test_record_errors),
        cmocka_unit_test(test_build_and_reuse), cmocka_unit_test(test_bad_files),
        cmocka_unit_test(test_damaged_cache), cmocka_unit_test(test_packing),
        cmocka_unit_test(test_mixture),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
