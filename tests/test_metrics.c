/* test_metrics.c - observability: the Chrome trace writer (valid JSON whatever the names hold,
 * nesting, threads, disabled = no output) and the merge of per-rank files (epoch alignment,
 * files cut short); the comm log's bins and bandwidth math (NCCL-tests factors); the MFU formula
 * on GPT-2 124M and the peak table; the JSONL step line read back with cJSON; the plot command's
 * errors and a real gnuplot run when gnuplot is installed. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "comm/comm.h"
#include "metrics/commlog.h"
#include "metrics/metrics.h"
#include "metrics/mfu.h"
#include "scale/peak.h"
#include "metrics/plot.h"
#include "obs/trace.h"
#include "zerotrain/zerotrain.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- helpers --------------------------------------------------------------------------------- */

static char tmpdir[256];

static int setup_dir(void **state) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/zt-test-metrics-XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown_dir(void **state) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

static char *slurp(const char *path, size_t *len) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return NULL;
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, fp) != (size_t)n) n = 0;
    if (s) s[n] = '\0';
    fclose(fp);
    if (len) *len = (size_t)n;
    return s;
}

static void spit(const char *path, const char *text) {
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fputs(text, fp);
    fclose(fp);
}

static cJSON *parse_file(const char *path) {
    char *s = slurp(path, NULL);
    if (!s) fail_msg("cannot read %s", path);
    cJSON *j = cJSON_Parse(s);
    if (!j) fail_msg("%s is not valid JSON near: %.80s", path, cJSON_GetErrorPtr() ? cJSON_GetErrorPtr() : "?");
    free(s);
    return j;
}

/* The first event with this ph and name (NULL if none). */
static const cJSON *find_event(const cJSON *trace, const char *ph, const char *name) {
    const cJSON *ev = cJSON_GetObjectItemCaseSensitive(trace, "traceEvents"), *e;
    cJSON_ArrayForEach(e, ev) {
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(e, "ph"), *n = cJSON_GetObjectItemCaseSensitive(e, "name");
        if (cJSON_IsString(p) && !strcmp(p->valuestring, ph) && cJSON_IsString(n) && !strcmp(n->valuestring, name))
            return e;
    }
    return NULL;
}

static double num(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(v)) fail_msg("\"%s\" is not a number", key);
    return v->valuedouble;
}

/* ---- trace ----------------------------------------------------------------------------------- */

static void test_trace_rank_path(void **state) {
    char out[256];
    zt_trace_rank_path("trace.json", 3, out, sizeof out);
    assert_string_equal(out, "trace.rank3.json");
    zt_trace_rank_path("runs/a.b/trace", 0, out, sizeof out);
    assert_string_equal(out, "runs/a.b/trace.rank0.json");
    zt_trace_rank_path("dir/.hidden", 1, out, sizeof out);
    assert_string_equal(out, "dir/.hidden.rank1.json");
    zt_trace_rank_path("t.json", -1, out, sizeof out);
    assert_string_equal(out, "t.json");
}

static void test_json_escape(void **state) {
    char out[64];
    size_t n = zt_json_escape(out, sizeof out, "a\"b\\c\nd\t\x01\xc3\xa9");
    assert_string_equal(out, "a\\\"b\\\\c\\nd\\t\\u0001\xc3\xa9");
    assert_int_equal(n, strlen(out));
    /* truncation never splits an escape, and the return value is the full length */
    n = zt_json_escape(out, 4, "ab\"c");
    assert_string_equal(out, "ab");
    assert_int_equal(n, 5);
}

static void *thread_body(void *arg) {
    zt_trace_thread_name("comm");
    zt_trace_begin("comm", "background");
    zt_trace_end();
    return NULL;
}

/* Names with every character JSON must escape, args of both kinds, nesting, an instant, a counter,
 * a second thread, an end without a begin: the file is valid JSON and says what was traced. */
static void test_trace_file_is_valid_json(void **state) {
    char base[300], file[320];
    snprintf(base, sizeof base, "%s/sub/trace.json", tmpdir);
    snprintf(file, sizeof file, "%s/sub/trace.rank2.json", tmpdir);
    zt_error err = {0};
    /* disabled: nothing happens, nothing is written */
    assert_false(zt_trace_on());
    zt_trace_begin("x", "y");
    zt_trace_end();
    zt_trace_instant("x", "y", 0, NULL);
    assert_int_equal(zt_trace_close(&err), ZT_OK);
    /* a path that cannot be created: an I/O error naming it, tracing stays off */
    assert_int_equal(zt_trace_open("/etc/passwd/t.json", 0, &err), ZT_ERR_IO);
    assert_non_null(strstr(err.msg, "/etc/passwd/t.rank0.json"));
    assert_false(zt_trace_on());

    assert_int_equal(zt_trace_open(base, 2, &err), ZT_OK);
    assert_true(zt_trace_on());
    assert_string_equal(zt_trace_path(), file);
    assert_int_equal(zt_trace_open(base, 2, &err), ZT_ERR_USAGE); /* one per process */
    const char *weird = "h.0 \"quoted\" back\\slash\nnewline\ttab \x01 caf\xc3\xa9";
    zt_trace_begin("step", "outer");
    zt_trace_begin("forward", weird);
    usleep(2000);
    zt_trace_end_args(4, (zt_trace_arg[]){ZT_TARG_STR("tag", weird), ZT_TARG_NUM("bytes", 6651136),
                                          ZT_TARG_NUM("big", 9007199254740991.0), ZT_TARG_NUM("nan", NAN)});
    zt_trace_complete("comm", "all_gather", 0.001, 1, (zt_trace_arg[]){ZT_TARG_NUM("bytes", 4096)});
    zt_trace_instant("ckpt", "commit", 0, NULL);
    zt_trace_counter("memory MiB", 2, (zt_trace_arg[]){ZT_TARG_NUM("params", 1.5), ZT_TARG_NUM("grads", 2)});
    zt_trace_end(); /* outer */
    zt_trace_end(); /* unmatched: counted, ignored */
    pthread_t th;
    pthread_create(&th, NULL, thread_body, NULL);
    pthread_join(th, NULL);
    assert_int_equal(zt_trace_close(&err), ZT_OK);
    assert_false(zt_trace_on());
    zt_trace_begin("after", "close"); /* no effect */
    zt_trace_end();

    cJSON *t = parse_file(file);
    const cJSON *od = cJSON_GetObjectItemCaseSensitive(t, "otherData");
    assert_int_equal((int)num(od, "rank"), 2);
    assert_true(num(od, "epoch_unix_us") > 1.5e15);
    const cJSON *inner = find_event(t, "X", weird), *outer = find_event(t, "X", "outer");
    assert_non_null(inner); /* the name came back byte for byte */
    assert_non_null(outer);
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(inner, "cat")->valuestring, "forward");
    assert_int_equal((int)num(inner, "pid"), 2);
    assert_int_equal((int)num(inner, "tid"), 1);
    assert_true(num(inner, "dur") >= 2000.0); /* microseconds */
    assert_true(num(inner, "ts") >= num(outer, "ts"));
    assert_true(num(inner, "ts") + num(inner, "dur") <= num(outer, "ts") + num(outer, "dur"));
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(inner, "args");
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(args, "tag")->valuestring, weird);
    assert_true(num(args, "bytes") == 6651136.0);
    assert_true(num(args, "big") == 9007199254740991.0);
    assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(args, "nan")));
    const cJSON *comm = find_event(t, "X", "all_gather");
    assert_non_null(comm);
    assert_true(fabs(num(comm, "dur") - 1000.0) < 1e-6);
    assert_non_null(find_event(t, "i", "commit"));
    const cJSON *ctr = find_event(t, "C", "memory MiB");
    assert_non_null(ctr);
    assert_true(num(cJSON_GetObjectItemCaseSensitive(ctr, "args"), "params") == 1.5);
    const cJSON *bg = find_event(t, "X", "background");
    assert_non_null(bg);
    assert_int_equal((int)num(bg, "tid"), 2); /* the second thread's own track ... */
    const cJSON *tn = find_event(t, "M", "thread_name"), *e;
    assert_non_null(tn);
    bool named = false; /* ... named "comm" */
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(t, "traceEvents")) {
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(e, "name");
        if (!strcmp(n->valuestring, "thread_name") && (int)num(e, "tid") == 2 &&
            !strcmp(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(e, "args"), "name")->valuestring, "comm"))
            named = true;
    }
    assert_true(named);
    const cJSON *end = find_event(t, "i", "trace end");
    assert_non_null(end);
    assert_int_equal((int)num(cJSON_GetObjectItemCaseSensitive(end, "args"), "unmatched_ends"), 1);
    assert_null(find_event(t, "X", "close"));
    cJSON_Delete(t);
}

/* Two hand-written rank files 1000 us apart in epoch, one of them cut short mid-line without the
 * closing bracket: the merge is valid JSON, keeps every complete event, shifts the later file. */
static void test_trace_merge(void **state) {
    char a[300], b[300], out[300];
    snprintf(a, sizeof a, "%s/m.rank0.json", tmpdir);
    snprintf(b, sizeof b, "%s/m.rank1.json", tmpdir);
    snprintf(out, sizeof out, "%s/m.json", tmpdir);
    spit(a, "{\"otherData\":{\"rank\":0,\"epoch_unix_us\":1700000000000000},\"traceEvents\":[\n"
            "{\"ph\":\"M\",\"pid\":0,\"tid\":0,\"name\":\"process_name\",\"args\":{\"name\":\"rank 0\"}},\n"
            "{\"ts\":10.000,\"ph\":\"X\",\"pid\":0,\"tid\":1,\"cat\":\"forward\",\"name\":\"a\",\"dur\":5.000},\n"
            "{\"ts\":20.000,\"ph\":\"i\",\"s\":\"p\",\"pid\":0,\"tid\":0,\"name\":\"trace end\"}]}\n");
    spit(b, "{\"otherData\":{\"rank\":1,\"epoch_unix_us\":1700000000001000},\"traceEvents\":[\n"
            "{\"ts\":10.000,\"ph\":\"X\",\"pid\":1,\"tid\":1,\"cat\":\"forward\",\"name\":\"b\",\"dur\":5.000},\n"
            "{\"ts\":30.000,\"ph\":\"X\",\"pid\":1,\"tid\":1,\"cat\":\"forward\",\"name\":\"c\",\"du");
    zt_error err = {0};
    const char *in[2] = {a, b};
    assert_int_equal(zt_trace_merge(in, 2, out, &err), ZT_OK);
    cJSON *t = parse_file(out);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(t, "traceEvents")), 4); /* M, a, end, b */
    assert_true(fabs(num(find_event(t, "X", "a"), "ts") - 10.0) < 1e-9);
    assert_true(fabs(num(find_event(t, "X", "b"), "ts") - 1010.0) < 1e-9);
    assert_null(find_event(t, "X", "c"));
    assert_true(num(cJSON_GetObjectItemCaseSensitive(t, "otherData"), "epoch_unix_us") == 1700000000000000.0);
    cJSON_Delete(t);
    /* errors name the file */
    char bad[300];
    snprintf(bad, sizeof bad, "%s/bad.json", tmpdir);
    spit(bad, "[{\"ph\":\"X\"}]\n");
    const char *in2[2] = {a, bad};
    assert_int_equal(zt_trace_merge(in2, 2, out, &err), ZT_ERR_DATA);
    assert_non_null(strstr(err.msg, "bad.json"));
    const char *in3[1] = {"/nonexistent/x.json"};
    assert_int_equal(zt_trace_merge(in3, 1, out, &err), ZT_ERR_IO);
    const char *in4[1] = {out};
    assert_int_equal(zt_trace_merge(in4, 1, out, &err), ZT_ERR_USAGE);
}

/* A real trace written by two "ranks" (one process, opened twice) merged with merge_ranks. */
static void test_trace_merge_ranks(void **state) {
    char base[300], r1[320];
    snprintf(base, sizeof base, "%s/run/t.json", tmpdir);
    zt_error err = {0};
    for (int r = 0; r < 2; r++) {
        assert_int_equal(zt_trace_open(base, r, &err), ZT_OK);
        zt_trace_begin("step", "step 1");
        zt_trace_complete("comm", "reduce_scatter", 1e-4, 1, (zt_trace_arg[]){ZT_TARG_NUM("sent", 100 + r)});
        zt_trace_end();
        assert_int_equal(zt_trace_close(&err), ZT_OK);
    }
    assert_int_equal(zt_trace_merge_ranks(base, 2, &err), ZT_OK);
    cJSON *t = parse_file(base);
    int per_pid[2] = {0, 0};
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(t, "traceEvents")) {
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(e, "name");
        if (!strcmp(n->valuestring, "reduce_scatter")) per_pid[(int)num(e, "pid")]++;
    }
    assert_int_equal(per_pid[0], 1);
    assert_int_equal(per_pid[1], 1);
    cJSON_Delete(t);
    snprintf(r1, sizeof r1, "%s/run/t.rank1.json", tmpdir);
    unlink(r1);
    assert_int_equal(zt_trace_merge_ranks(base, 2, &err), ZT_ERR_IO);
    assert_non_null(strstr(err.msg, "t.rank1.json"));
}

/* ---- comm log -------------------------------------------------------------------------------- */

static void test_commlog_bins_and_bandwidth(void **state) {
    zt_commlog_reset();
    zt_commlog_record(ZT_COLL_ALL_REDUCE, 1 << 20, 1e-3, 0, 4, "world"); /* ignored: disabled */
    assert_int_equal(zt_commlog_rows(NULL, 0), 0);
    zt_commlog_enable(true);
    /* all-reduce, 4 ranks, 1 MiB in 1 ms twice: class 20 */
    zt_commlog_record(ZT_COLL_ALL_REDUCE, 1 << 20, 1e-3, 0.5e-3, 4, "world");
    zt_commlog_record(ZT_COLL_ALL_REDUCE, 1 << 20, 1e-3, 0.5e-3, 4, "world");
    /* reduce-scatter, 2 ranks: 1000 B (class 9) x 3, 1024 B (class 10) x 1 */
    for (int i = 0; i < 3; i++) zt_commlog_record(ZT_COLL_REDUCE_SCATTER, 1000, 1e-6, 0, 2, "dp");
    zt_commlog_record(ZT_COLL_REDUCE_SCATTER, 1024, 2e-6, 0, 2, "dp");
    /* the same size on the tensor-parallel group of the same size: a row of its own */
    zt_commlog_record(ZT_COLL_REDUCE_SCATTER, 1000, 4e-6, 0, 2, "tp");
    zt_commlog_record(ZT_COLL_ALL_GATHER, 0, 1e-6, 0, 8, "world"); /* empty message: its own class */
    zt_commlog_record(ZT_COLL_ALL_GATHER, 3 << 20, 2e-3, 1e-3, 8, "world");
    zt_commlog_enable(false);
    zt_commlog_row rows[16];
    int n = zt_commlog_rows(rows, 16);
    assert_int_equal(n, 6);
    /* ordered by kind: reduce_scatter (0), all_gather (1), all_reduce (2); then by group */
    assert_int_equal(rows[0].kind, ZT_COLL_REDUCE_SCATTER);
    assert_string_equal(rows[0].group, "dp");
    assert_int_equal(rows[0].size_class, 9);
    assert_int_equal((int)rows[0].count, 3);
    assert_int_equal((int)rows[0].bytes, 3000);
    assert_int_equal(rows[1].size_class, 10);
    assert_int_equal(rows[2].kind, ZT_COLL_REDUCE_SCATTER);
    assert_string_equal(rows[2].group, "tp");
    assert_int_equal(rows[2].nranks, 2);
    assert_int_equal((int)rows[2].count, 1);
    assert_int_equal(rows[3].kind, ZT_COLL_ALL_GATHER);
    assert_int_equal(rows[3].size_class, -1);
    assert_int_equal(rows[4].size_class, 21);
    assert_int_equal(rows[5].kind, ZT_COLL_ALL_REDUCE);
    assert_int_equal(rows[5].nranks, 4);
    double lat, alg, bus;
    zt_commlog_row_stats(&rows[5], &lat, &alg, &bus);
    assert_true(fabs(lat - 1e-3) < 1e-15);
    assert_true(fabs(alg - 1048576.0 / 1e-3) < 1e-3);         /* bytes / second */
    assert_true(fabs(bus - alg * 2.0 * 3.0 / 4.0) < 1e-3);     /* 2(N-1)/N */
    zt_commlog_row_stats(&rows[0], &lat, &alg, &bus);
    assert_true(fabs(alg - 3000.0 / 3e-6) < 1e-3);
    assert_true(fabs(bus - alg * 0.5) < 1e-3);                 /* (N-1)/N, N = 2 */
    zt_commlog_row_stats(&rows[4], &lat, &alg, &bus);
    assert_true(fabs(bus - alg * 7.0 / 8.0) < 1e-3);
    assert_true(fabs(zt_commlog_busbw_factor(ZT_COLL_BROADCAST, 16) - 1.0) < 1e-15);
    assert_true(zt_commlog_busbw_factor(ZT_COLL_ALL_REDUCE, 1) == 0.0);
    /* the table */
    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);
    zt_commlog_print(mem, 0);
    fclose(mem);
    assert_non_null(strstr(buf, "busbw GB/s"));
    assert_non_null(strstr(buf, "[512 B, 1 KiB)"));
    assert_non_null(strstr(buf, "[1 MiB, 2 MiB)"));
    assert_non_null(strstr(buf, "all sizes")); /* reduce_scatter has two classes */
    assert_non_null(strstr(buf, "reduce_scatter  tp            2  [512 B, 1 KiB)"));
    free(buf);
    /* as JSONL events */
    char path[300];
    snprintf(path, sizeof path, "%s/commlog.jsonl", tmpdir);
    zt_jsonl j;
    zt_error err = {0};
    assert_int_equal(zt_jsonl_open(&j, path, &err), ZT_OK);
    assert_int_equal(zt_commlog_write_jsonl(&j, &err), ZT_OK);
    zt_jsonl_close(&j);
    FILE *fp = fopen(path, "r");
    char line[1024];
    int lines = 0;
    while (fgets(line, sizeof line, fp)) {
        cJSON *o = cJSON_Parse(line);
        assert_non_null(o);
        assert_string_equal(cJSON_GetObjectItemCaseSensitive(o, "event")->valuestring, "commlog");
        if (lines == 2) assert_string_equal(cJSON_GetObjectItemCaseSensitive(o, "group")->valuestring, "tp");
        if (lines == 5) {
            assert_string_equal(cJSON_GetObjectItemCaseSensitive(o, "op")->valuestring, "all_reduce");
            assert_string_equal(cJSON_GetObjectItemCaseSensitive(o, "group")->valuestring, "world");
            assert_true(fabs(num(o, "busbw_GBps") - 1.048576 * 1.5) < 1e-6);
            assert_true(num(o, "size_min") == 1048576.0);
        }
        cJSON_Delete(o);
        lines++;
    }
    fclose(fp);
    assert_int_equal(lines, 6);
    zt_commlog_reset();
    assert_int_equal(zt_commlog_rows(rows, 16), 0);
}

/* ---- MFU ------------------------------------------------------------------------------------- */

/* GPT-2 124M at T = 1024: N = 124,439,808 parameters, 786,432 of them position embeddings, so
 * 6 x 123,653,376 + 12 x 12 x 768 x 1024 = 741,920,256 + 113,246,208 = 855,166,464 FLOPs/token,
 * the number llm.c prints for this model; the model's own callback uses the same formula. */
static void test_mfu_gpt2_124m(void **state) {
    zt_gpt2_config c;
    zt_model *m;
    zt_error err = {0};
    assert_int_equal(zt_gpt2_preset("gpt2-124M", &c, &err), ZT_OK);
    assert_int_equal(zt_gpt2_create(&c, &m, &err), ZT_OK);
    assert_int_equal(zt_model_numel(m), 124439808);
    double f = zt_flops_per_token((double)zt_model_numel(m) - 1024.0 * 768.0, 12, 768, 1024);
    assert_true(f == 855166464.0);
    assert_true(m->train_flops_per_token(m, 1024) == f);
    assert_true(zt_hfu_flops_per_token(f, 0.0) == f);
    assert_true(fabs(zt_hfu_flops_per_token(f, 1.0) - f * 4.0 / 3.0) < 1e-3); /* + one forward */
    /* 1000 tokens/s on a 1 TFLOP/s machine */
    assert_true(fabs(zt_utilization(f, 1000, 1.0, 1e12) - 0.855166464) < 1e-12);
    assert_true(isnan(zt_utilization(f, 1000, 1.0, 0)));
    assert_true(isnan(zt_utilization(f, 1000, 0, 1e12)));
    zt_model_free(m);
}

static void test_peak_table(void **state) {
    zt_cpu_peak p = {.clock_ghz = 2.0, .fp32_per_cycle = 64, .bf16_per_cycle = 128};
    assert_true(zt_cpu_peak_flops(&p, 2, 1, false) == 256e9);
    assert_true(zt_cpu_peak_flops(&p, 2, 1, true) == 512e9);
    assert_true(zt_cpu_peak_flops(&p, 0.5, 1, false) == 64e9); /* a share of an oversubscribed core */
    p.bf16_per_cycle = 0;                                     /* no bf16 instruction: the fp32 rate */
    assert_true(zt_cpu_peak_flops(&p, 2, 1, true) == 256e9);
    p.override_gflops = 100;                                  /* ZT_PEAK_GFLOPS: per rank */
    assert_true(zt_cpu_peak_flops(&p, 2, 4, false) == 400e9);
    p = (zt_cpu_peak){.clock_ghz = 2.0, .fp32_per_cycle = 64, .bf16_per_cycle = 128};
    p.measured_fp32 = 100e9;                                  /* measured: wins over clock x table */
    assert_true(zt_cpu_peak_flops(&p, 2, 1, false) == 200e9);
    assert_true(zt_cpu_peak_flops(&p, 2, 1, true) == 200e9); /* bf16 not measured: the fp32 rate */
    p.measured_bf16 = 300e9;
    assert_true(zt_cpu_peak_flops(&p, 0.5, 1, true) == 150e9);
    assert_string_equal(zt_cpu_peak_source(&p, true), "measured bf16 dot-product peak");
    p = (zt_cpu_peak){0};
    assert_true(zt_cpu_peak_flops(&p, 2, 1, false) == 0); /* unknown clock */
    /* this machine: some fp32 rate, cores and a sane per-rank share */
    unsetenv("ZT_PEAK_GFLOPS");
    zt_cpu_peak_detect(&p);
    assert_true(p.fp32_per_cycle >= 8);
    assert_true(p.online_cores >= 1);
    double share = zt_cores_per_rank(1000);
    assert_true(share > 0 && share <= p.online_cores);
    assert_true(zt_cores_per_rank(1) <= 1.0);
    setenv("ZT_PEAK_GFLOPS", "50", 1);
    assert_true(zt_job_peak_flops(1, 3, false) == 150e9);
    unsetenv("ZT_PEAK_GFLOPS");
}

/* The measured peak: a core's FMA rate is within what the table allows at a plausible clock, the
 * cache returns the same numbers without measuring, and a cache of another CPU is not used. */
static void test_peak_measured(void **state) {
    char dir[] = "/tmp/zt_peak_XXXXXX";
    assert_non_null(mkdtemp(dir));
    setenv("ZT_CACHE_DIR", dir, 1);
    unsetenv("ZT_PEAK_CACHE");
    zt_cpu_peak p;
    zt_cpu_peak_detect(&p);
    zt_cpu_peak_measure(&p);
    assert_string_equal(p.measured_from, "measured now");
    double ghz = p.measured_fp32 / p.fp32_per_cycle / 1e9; /* the clock the rate implies */
    assert_true(ghz > 0.3 && ghz < 7.0);
    if (p.measured_bf16 > 0) assert_true(p.measured_bf16 > p.measured_fp32 * 0.9);
    zt_cpu_peak q;
    zt_cpu_peak_detect(&q);
    zt_cpu_peak_measure(&q);
    assert_true(!strncmp(q.measured_from, "cache ", 6));
    assert_true(fabs(q.measured_fp32 / p.measured_fp32 - 1) < 1e-5); /* written with 6 digits */
    char path[600];
    snprintf(path, sizeof path, "%s/peak-v2", dir);
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fprintf(fp, "another cpu|1|2|x|y\t1e15\t1e15\n");
    fclose(fp);
    zt_cpu_peak_detect(&q);
    zt_cpu_peak_measure(&q);
    assert_string_equal(q.measured_from, "measured now");
    assert_true(q.measured_fp32 < 1e13);
    unlink(path);
    rmdir(dir);
    unsetenv("ZT_CACHE_DIR");
}

static void test_measure_sgemm(void **state) {
    double g = zt_measure_sgemm_gflops(64, 48, 32);
    assert_true(isfinite(g) && g > 0);
    assert_true(isnan(zt_measure_sgemm_gflops(0, 4, 4)));
}

/* ---- JSONL ----------------------------------------------------------------------------------- */

static void write_steps(const char *path, int n, bool full) {
    zt_jsonl j;
    zt_error err = {0};
    assert_int_equal(zt_jsonl_open(&j, path, &err), ZT_OK);
    for (int s = 1; s <= n; s++) {
        zt_step_metrics m = {.step = s, .total_steps = n, .loss = 10.0 - 0.1 * s, .val_loss = NAN,
                             .lr = 3e-4, .grad_norm = 1.5, .clip_coef = 1, .tokens = 1024,
                             .step_s = 0.5, .data_s = 0.01, .fwdbwd_s = 0.4, .optim_s = 0.05,
                             .tok_per_s = 2048, .mfu = full ? 0.25 : NAN, .elapsed_s = 0.5 * s};
        if (s % 2 == 0) m.val_loss = 10.5 - 0.1 * s;
        m.bytes.sent_ag = 13295616;
        m.bytes.recv_rs = 6647808;
        if (full) {
            m.hfu = 0.25;
            m.has_times = true;
            m.forward_s = 0.1, m.backward_s = 0.2, m.comm_s = 0.1, m.comm_wait_s = 0.08, m.io_s = 0;
            m.other_s = 0.04;
            m.eval_s = 0.0, m.ckpt_s = 0.125;
            m.has_memory = true;
            m.mem = (zt_memory_report){.params = 1 << 20, .grads = 2 << 20, .optimizer = 3 << 20,
                                       .activations = 4 << 20, .comm = 1 << 10, .peak_params = 5 << 20,
                                       .peak_grads = 6 << 20, .peak_gathered = 7 << 20, .total = 10 << 20,
                                       .peak_total = 17 << 20};
            m.rss_peak = 100u << 20;
            m.has_loss_scale = true;
            m.loss_scale = 65536;
            m.skipped_steps = 2;
        }
        assert_int_equal(zt_jsonl_write_step(&j, &m, &err), ZT_OK);
    }
    assert_int_equal(zt_jsonl_write_event(&j, "note", "\"k\":1", &err), ZT_OK);
    zt_jsonl_close(&j);
}

static void test_jsonl_step_line(void **state) {
    char path[300];
    snprintf(path, sizeof path, "%s/log/run.jsonl", tmpdir);
    write_steps(path, 2, true);
    FILE *fp = fopen(path, "r");
    assert_non_null(fp);
    char line[4096];
    int n = 0;
    while (fgets(line, sizeof line, fp)) {
        cJSON *o = cJSON_Parse(line);
        if (!o) fail_msg("line %d is not JSON: %s", n + 1, line);
        if (n == 2) {
            assert_string_equal(cJSON_GetObjectItemCaseSensitive(o, "event")->valuestring, "note");
            cJSON_Delete(o);
            n++;
            continue;
        }
        assert_int_equal((int)num(o, "step"), n + 1);
        assert_true(num(o, "loss") == 10.0 - 0.1 * (n + 1));
        if (n == 0) assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(o, "val_loss")));
        else assert_true(fabs(num(o, "val_loss") - 10.3) < 1e-9);
        assert_true(num(o, "hfu") == 0.25);
        /* the breakdown adds up to step_s */
        double sum = num(o, "data_s") + num(o, "forward_s") + num(o, "backward_s") + num(o, "comm_s") +
                     num(o, "optim_s") + num(o, "io_s") + num(o, "other_s");
        assert_true(num(o, "comm_wait_s") == 0.08);
        assert_true(fabs(sum - num(o, "step_s")) < 1e-9);
        assert_true(num(o, "ckpt_s") == 0.125);
        assert_true(num(o, "loss_scale") == 65536);
        assert_int_equal((int)num(o, "skipped_steps"), 2);
        const cJSON *mem = cJSON_GetObjectItemCaseSensitive(o, "memory");
        assert_true(num(mem, "peak_grads") == 6 << 20);
        assert_true(num(mem, "peak_total") == 17 << 20); /* the high-water of the sum, as the engine measured it */
        assert_true(num(mem, "peak_gathered") == 7 << 20 && num(mem, "comm") == 1 << 10);
        assert_true(num(mem, "total") == 10 << 20 && num(mem, "compute_copy") == 0);
        assert_true(num(mem, "rss_peak") == 100u << 20);
        assert_true(num(cJSON_GetObjectItemCaseSensitive(o, "bytes_sent"), "all_gather") == 13295616);
        assert_true(num(cJSON_GetObjectItemCaseSensitive(o, "bytes_recv"), "reduce_scatter") == 6647808);
        cJSON_Delete(o);
        n++;
    }
    fclose(fp);
    assert_int_equal(n, 3);
    /* the optional groups absent: null, not 0 */
    write_steps(path, 1, false);
    char *s = slurp(path, NULL);
    cJSON *o = cJSON_Parse(s);
    assert_non_null(o);
    const char *nulls[] = {"mfu", "hfu", "forward_s", "comm_s", "comm_wait_s", "other_s", "loss_scale", "skipped_steps", "memory"};
    for (size_t i = 0; i < sizeof nulls / sizeof *nulls; i++)
        if (!cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(o, nulls[i]))) fail_msg("%s is not null", nulls[i]);
    cJSON_Delete(o);
    free(s);
    assert_true(zt_rss_peak_bytes() > 0);
}

/* ---- plot ------------------------------------------------------------------------------------ */

static bool have_gnuplot(void) { return system("gnuplot --version > /dev/null 2>&1") == 0; }

static void test_plot(void **state) {
    char a[300], b[300], out[300], bad[300];
    snprintf(a, sizeof a, "%s/pa.jsonl", tmpdir);
    snprintf(b, sizeof b, "%s/pb.jsonl", tmpdir);
    snprintf(out, sizeof out, "%s/curves.png", tmpdir);
    snprintf(bad, sizeof bad, "%s/bad.jsonl", tmpdir);
    write_steps(a, 6, true);
    write_steps(b, 4, false);
    spit(bad, "{\"step\":1,\"loss\":2}\nnot json\n");
    zt_error err = {0};
    const char *runs[2] = {a, b}, *labels[2] = {"zero3 \"quoted\"", "ddp_1"};
    zt_plot_options o = {.runs = runs, .n_runs = 2, .labels = labels, .output = out, .title = "test"};
    /* errors that do not need gnuplot */
    const char *badruns[1] = {bad};
    zt_plot_options ob = {.runs = badruns, .n_runs = 1, .output = out};
    assert_int_equal(zt_plot_runs(&ob, &err), ZT_ERR_DATA);
    assert_non_null(strstr(err.msg, "bad.jsonl:2"));
    zt_plot_options oe = o;
    oe.output = "x.jpg";
    assert_int_equal(zt_plot_runs(&oe, &err), ZT_ERR_USAGE);
    setenv("ZT_GNUPLOT", "/nonexistent/gnuplot", 1);
    assert_int_equal(zt_plot_runs(&o, &err), ZT_ERR_USAGE);
    assert_non_null(strstr(err.msg, "gnuplot-nox"));
    unsetenv("ZT_GNUPLOT");
    if (!have_gnuplot()) {
        print_message("gnuplot not installed: skipping the drawing\n");
        return;
    }
    if (zt_plot_runs(&o, &err)) fail_msg("%s", err.msg);
    size_t len;
    char *png = slurp(out, &len);
    assert_non_null(png);
    assert_true(len > 1000);
    assert_memory_equal(png, "\x89PNG\r\n\x1a\n", 8);
    free(png);
    o.output = out;
    snprintf(out, sizeof out, "%s/curves.svg", tmpdir);
    if (zt_plot_runs(&o, &err)) fail_msg("%s", err.msg);
    char *svg = slurp(out, NULL);
    assert_non_null(strstr(svg, "<svg"));
    assert_non_null(strstr(svg, "ddp_1")); /* labels as given (no enhanced-text subscripts) */
    free(svg);

    /* the timeline picture of a trace: two steps, nested spans, a second thread */
    char tr[300], tl[300];
    snprintf(tr, sizeof tr, "%s/tl.json", tmpdir);
    snprintf(tl, sizeof tl, "%s/tl.png", tmpdir);
    assert_int_equal(zt_trace_open(tr, -1, &err), ZT_OK);
    for (int s = 1; s <= 2; s++) {
        char name[32];
        snprintf(name, sizeof name, "step %d", s);
        zt_trace_begin("step", name);
        zt_trace_begin("forward", "h.0");
        usleep(1000);
        zt_trace_end();
        zt_trace_complete("comm", "all_gather", 5e-4, 0, NULL);
        zt_trace_end();
    }
    pthread_t th;
    pthread_create(&th, NULL, thread_body, NULL);
    pthread_join(th, NULL);
    assert_int_equal(zt_trace_close(&err), ZT_OK);
    zt_timeline_options t = {.trace = tr, .output = tl, .step = "step 2"};
    if (zt_plot_timeline(&t, &err)) fail_msg("%s", err.msg);
    png = slurp(tl, &len);
    assert_non_null(png);
    assert_memory_equal(png, "\x89PNG\r\n\x1a\n", 8);
    free(png);
    t.step = NULL;
    if (zt_plot_timeline(&t, &err)) fail_msg("%s", err.msg);
    t.step = "step 9";
    assert_int_equal(zt_plot_timeline(&t, &err), ZT_ERR_DATA);
    assert_non_null(strstr(err.msg, "step 9"));
    t.trace = a; /* a JSONL file is not a trace */
    t.step = NULL;
    assert_int_equal(zt_plot_timeline(&t, &err), ZT_ERR_DATA);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_trace_rank_path),
        cmocka_unit_test(test_json_escape),
        cmocka_unit_test(test_trace_file_is_valid_json),
        cmocka_unit_test(test_trace_merge),
        cmocka_unit_test(test_trace_merge_ranks),
        cmocka_unit_test(test_commlog_bins_and_bandwidth),
        cmocka_unit_test(test_mfu_gpt2_124m),
        cmocka_unit_test(test_peak_table),
        cmocka_unit_test(test_peak_measured),
        cmocka_unit_test(test_measure_sgemm),
        cmocka_unit_test(test_jsonl_step_line),
        cmocka_unit_test(test_plot),
    };
    return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}
