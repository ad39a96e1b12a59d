/* test_offload.c - the NVMe tier (src/offload) against plain in-memory models of it:
 *   - the I/O threads move bytes faithfully and name the file and offset of a short read or a
 *     full device (/dev/full);
 *   - a store streams every element of every kind through the update exactly once, in order, for
 *     2, 3 and 4 buffers, O_DIRECT and buffered, and random access agrees with the stream;
 *   - the engine with the optimizer state offloaded (tiny chunks, so chunks cut parameters) ends
 *     bit-identical to the in-memory engine, for AdamW and SGD with momentum, and its checkpoints
 *     load both ways (offloaded -> memory, memory -> offloaded) and continue bit-identically;
 *   - errors: a missing directory, a path that is a file, no room for the files (RLIMIT_FSIZE),
 *     a file truncated under a running store; files and the run directory are gone after free. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "ckpt/checkpoint.h"
#include "offload/io.h"
#include "offload/nvme_store.h"
#include "zerotrain/zerotrain.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

static char tmpdir[256];

static int setup(void **state) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/zt_offload_test.XXXXXX");
    if (!mkdtemp(tmpdir)) return -1;
    return 0;
}

static int teardown(void **state) {
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

static int count_entries(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)))
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) n++;
    closedir(d);
    return n;
}

/* ---- io ----------------------------------------------------------------------------------------- */

static void test_io_roundtrip_and_errors(void **state) {
    zt_io *io;
    zt_error err = {0};
    assert_int_equal(zt_io_create(3, 8192, &io, &err), ZT_OK);
    char path[300];
    snprintf(path, sizeof path, "%s/io.bin", tmpdir);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    size_t n = 100000;
    char *a = malloc(n), *b = calloc(1, n);
    for (size_t i = 0; i < n; i++) a[i] = (char)(i * 7 + 3);
    zt_io_ticket t = {0};
    uint64_t sums[13] = {0};
    assert_int_equal(zt_io_block_bytes(io), 8192);
    assert_int_equal(zt_io_submit(io, &t, fd, path, a, n, 0, true, sums, &err), ZT_OK); /* 13 blocks */
    assert_int_equal(zt_io_wait(io, &t, NULL, &err), ZT_OK);
    for (int k = 0; k < 13; k++) assert_true(sums[k] != 0);
    assert_int_equal(zt_io_submit(io, &t, fd, path, b, n, 0, false, sums, &err), ZT_OK);
    assert_int_equal(zt_io_wait(io, &t, NULL, &err), ZT_OK);
    assert_memory_equal(a, b, n);
    /* a byte changed behind the I/O layer's back: block 2 (offset 16384) fails its checksum */
    assert_int_equal(pwrite(fd, "x", 1, 20000), 1);
    assert_int_equal(zt_io_submit(io, &t, fd, path, b, n, 0, false, sums, &err), ZT_OK);
    assert_int_equal(zt_io_wait(io, &t, NULL, &err), ZT_ERR_IO);
    assert_non_null(strstr(err.msg, "offset 16384"));
    assert_non_null(strstr(err.msg, "checksum mismatch"));
    /* past the end: a short read naming the file and the offset where it ended */
    assert_int_equal(zt_io_submit(io, &t, fd, path, b, 4096, (off_t)n - 100, false, NULL, &err), ZT_OK);
    assert_int_equal(zt_io_wait(io, &t, NULL, &err), ZT_ERR_IO);
    assert_non_null(strstr(err.msg, path));
    assert_non_null(strstr(err.msg, "short read"));
    assert_non_null(strstr(err.msg, "offset 100000"));
    /* the ticket is reusable after an error */
    assert_int_equal(zt_io_submit(io, &t, fd, path, b, 10, 0, false, NULL, &err), ZT_OK);
    assert_int_equal(zt_io_wait(io, &t, NULL, &err), ZT_OK);
    close(fd);
    /* a full device */
    int full = open("/dev/full", O_WRONLY);
    if (full >= 0) {
        assert_int_equal(zt_io_submit(io, &t, full, "/dev/full", a, 4096, 0, true, NULL, &err), ZT_OK);
        assert_int_equal(zt_io_wait(io, &t, NULL, &err), ZT_ERR_IO);
        assert_non_null(strstr(err.msg, "/dev/full"));
        assert_non_null(strstr(err.msg, strerror(ENOSPC)));
        close(full);
    }
    uint64_t r, w;
    zt_io_bytes(io, &r, &w);
    assert_int_equal(w, n);
    zt_io_free(io);
    free(a);
    free(b);
    unlink(path);
}

/* ---- the store ---------------------------------------------------------------------------------- */

typedef struct model_ctx {
    float *ref[3];   /* the in-memory model of every kind */
    size_t next;     /* the element the next chunk must start at */
    int calls, bad;
} model_ctx;

/* x <- 2x + (element index) + k: depends on the element, so a misplaced chunk shows */
static int apply(void *ctx, size_t begin, size_t n, float *const *st, zt_error *err) {
    model_ctx *c = ctx;
    if (begin != c->next) c->bad++;
    c->next = begin + n;
    c->calls++;
    for (int k = 0; k < 3; k++)
        for (size_t j = 0; j < n; j++) {
            st[k][j] = 2 * st[k][j] + (float)(begin + j) + (float)k;
            c->ref[k][begin + j] = 2 * c->ref[k][begin + j] + (float)(begin + j) + (float)k;
        }
    return ZT_OK;
}

static void test_store_stream_matches_memory(void **state) {
    const size_t F = 10000; /* not a multiple of the 1024-element chunk granule */
    for (int buffered = 0; buffered <= 1; buffered++)
        for (int nb = 2; nb <= 4; nb++) {
            zt_nvme_store_options o = {.dir = tmpdir, .run = "stream", .rank = 3, .nkinds = 3,
                                       .kinds = {"a", "b", "c"}, .floats = F, .buffer_count = nb,
                                       .buffer_bytes = 3 * 8192, .io_threads = 2, .buffered = buffered};
            zt_nvme_store *s;
            zt_error err = {0};
            assert_int_equal(zt_nvme_store_create(&o, &s, &err), ZT_OK);
            assert_int_equal(zt_nvme_store_chunk_floats(s), 2048);
            assert_int_equal(zt_nvme_store_memory(s), (size_t)nb * 3 * 8192);
            assert_non_null(strstr(zt_nvme_store_path(s, 1), "/stream/rank-00003.b"));
            assert_non_null(strstr(zt_nvme_store_describe(s), buffered ? "buffered I/O was asked for" : "O_DIRECT"));
            model_ctx c = {0};
            for (int k = 0; k < 3; k++) c.ref[k] = calloc(F, sizeof(float));
            /* random access in, streams over it, random access out */
            float *x = malloc(F * sizeof *x);
            for (size_t i = 0; i < F; i++) x[i] = c.ref[1][i] = (float)i * 0.5f;
            assert_int_equal(zt_nvme_store_write(s, 1, 0, F, x, &err), ZT_OK);
            for (int pass = 0; pass < 3; pass++) {
                c.next = 0;
                assert_int_equal(zt_nvme_store_stream(s, apply, &c, &err), ZT_OK);
                assert_int_equal(c.next, F);
            }
            assert_int_equal(c.bad, 0);
            assert_int_equal(c.calls, 3 * 5);
            for (int k = 0; k < 3; k++) {
                memset(x, 0xff, F * sizeof *x);
                assert_int_equal(zt_nvme_store_read(s, k, 0, F, x, &err), ZT_OK);
                assert_memory_equal(x, c.ref[k], F * sizeof *x);
            }
            /* a sub-range, and out of range */
            assert_int_equal(zt_nvme_store_read(s, 2, 4097, 3, x, &err), ZT_OK);
            assert_memory_equal(x, c.ref[2] + 4097, 3 * sizeof *x);
            assert_int_equal(zt_nvme_store_read(s, 2, F - 1, 2, x, &err), ZT_ERR_INTERNAL);
            zt_nvme_stats st;
            zt_nvme_store_stats(s, &st, true);
            assert_int_equal(st.streams, 3);
            /* per stream: every kind's padded file read once and written once */
            uint64_t per = 3 * 10240 * 4;
            assert_true(st.read_bytes >= 3 * per && st.write_bytes >= 3 * per);
            assert_true(st.wait_s <= st.stream_s && st.update_s <= st.stream_s);
            assert_int_equal(zt_nvme_store_zero(s, &err), ZT_OK);
            assert_int_equal(zt_nvme_store_read(s, 0, 0, F, x, &err), ZT_OK);
            for (size_t i = 0; i < F; i++) assert_true(x[i] == 0.0f);
            char run[300];
            snprintf(run, sizeof run, "%s/stream", tmpdir);
            assert_int_equal(count_entries(run), 3);
            zt_nvme_store_free(s);
            assert_int_equal(count_entries(run), -1); /* the files and the run directory are gone */
            for (int k = 0; k < 3; k++) free(c.ref[k]);
            free(x);
        }
}

static int stop_at_2(void *ctx, size_t begin, size_t n, float *const *st, zt_error *err) {
    int *calls = ctx;
    if (++*calls == 2) return zt_error_set(err, ZT_ERR_NUMERICS, "stop here");
    return ZT_OK;
}

static void test_store_errors(void **state) {
    zt_error err = {0};
    zt_nvme_store *s = NULL;
    char missing[300], file[300];
    snprintf(missing, sizeof missing, "%s/no/such/dir", tmpdir);
    zt_nvme_store_options o = {.dir = missing, .run = "r", .nkinds = 2, .kinds = {"exp_avg", "exp_avg_sq"},
                               .floats = 5000, .buffer_count = 3, .buffer_bytes = 16384};
    assert_int_equal(zt_nvme_store_create(&o, &s, &err), ZT_ERR_IO);
    assert_null(s);
    assert_non_null(strstr(err.msg, missing));
    assert_non_null(strstr(err.msg, "No such file or directory"));
    snprintf(file, sizeof file, "%s/plainfile", tmpdir);
    FILE *f = fopen(file, "w");
    fclose(f);
    o.dir = file;
    assert_int_equal(zt_nvme_store_create(&o, &s, &err), ZT_ERR_IO);
    assert_non_null(strstr(err.msg, "is not a directory"));
    unlink(file);
    /* sizes the store cannot work with */
    o.dir = tmpdir;
    o.buffer_count = 1;
    assert_int_equal(zt_nvme_store_create(&o, &s, &err), ZT_ERR_USAGE);
    assert_non_null(strstr(err.msg, "at least 2"));
    o.buffer_count = 3;
    o.buffer_bytes = 4096;
    assert_int_equal(zt_nvme_store_create(&o, &s, &err), ZT_ERR_USAGE);
    /* no room: a file-size limit below the files (fallocate fails with EFBIG, like a full disk) */
    o.buffer_bytes = 16384;
    o.floats = 1 << 20;
    struct rlimit old, lim;
    getrlimit(RLIMIT_FSIZE, &old);
    lim = old;
    lim.rlim_cur = 1 << 20;
    signal(SIGXFSZ, SIG_IGN);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
    int rc = zt_nvme_store_create(&o, &s, &err);
    setrlimit(RLIMIT_FSIZE, &old);
    assert_int_equal(rc, ZT_ERR_IO);
    assert_non_null(strstr(err.msg, "cannot reserve 4.0 MiB for"));
    assert_non_null(strstr(err.msg, "rank-00000.exp_avg"));
    char run[300];
    snprintf(run, sizeof run, "%s/r", tmpdir);
    assert_int_equal(count_entries(run), -1); /* a failed create leaves nothing behind */
    /* a file truncated under a running store: the next stream names it and the offset */
    o.floats = 5000;
    assert_int_equal(zt_nvme_store_create(&o, &s, &err), ZT_OK);
    int calls = 0;
    assert_int_equal(zt_nvme_store_stream(s, stop_at_2, &calls, &err), ZT_ERR_NUMERICS);
    assert_string_equal(err.msg, "stop here");
    float ones[5000];
    for (int i = 0; i < 5000; i++) ones[i] = 1.0f;
    assert_int_equal(zt_nvme_store_write(s, 1, 0, 5000, ones, &err), ZT_OK);
    calls = -100;
    assert_int_equal(zt_nvme_store_stream(s, stop_at_2, &calls, &err), ZT_OK); /* every chunk written */
    assert_int_equal(truncate(zt_nvme_store_path(s, 1), 4096), 0);
    calls = 0;
    assert_int_equal(zt_nvme_store_stream(s, stop_at_2, &calls, &err), ZT_ERR_IO);
    assert_non_null(strstr(err.msg, zt_nvme_store_path(s, 1)));
    assert_non_null(strstr(err.msg, "is 4096 bytes, the run wrote 20480"));
    assert_non_null(strstr(err.msg, "offset 4096"));
    /* cut and grown back to its size (zeros where the data was): the checksums catch it */
    assert_int_equal(truncate(zt_nvme_store_path(s, 1), 20480), 0);
    assert_int_equal(zt_nvme_store_stream(s, stop_at_2, &calls, &err), ZT_ERR_IO);
    assert_non_null(strstr(err.msg, zt_nvme_store_path(s, 1)));
    assert_non_null(strstr(err.msg, "offset 0 (8192 bytes): checksum mismatch"));
    assert_int_equal(truncate(zt_nvme_store_path(s, 1), 4096), 0);
    float x[8];
    assert_int_equal(zt_nvme_store_read(s, 1, 4000, 8, x, &err), ZT_ERR_IO);
    assert_non_null(strstr(err.msg, "offset 16000"));
    zt_nvme_store_free(s);
    assert_int_equal(count_entries(run), -1);
}

/* ---- the engine --------------------------------------------------------------------------------- */

static const zt_gpt2_config CFG = {.max_seq_len = 16, .vocab_size = 96, .n_layer = 2, .n_head = 2, .n_embd = 32};
enum { B = 2, T = 16 };

static void batch(int step, int32_t *in, int32_t *tg) {
    uint64_t s = 99 + (uint64_t)step * 7919;
    for (int i = 0; i <= B * T; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        int32_t tok = (int32_t)((s >> 33) % CFG.vocab_size);
        if (i < B * T) in[i] = tok;
        if (i > 0) tg[i - 1] = tok;
    }
}

static zt_engine *make(zt_model *m, zt_optimizer_kind kind, const char *dir) {
    zt_engine_options o;
    zt_engine_options_default(&o);
    o.B = B;
    o.T = T;
    o.seed = 5;
    o.optim.kind = kind;
    o.optim.momentum = 0.9f;
    char copy[300];
    if (dir) {
        snprintf(copy, sizeof copy, "%s", dir); /* the engine keeps its own copy */
        o.offload.optimizer_dir = copy;
        o.offload.buffer_count = 3;
        o.offload.buffer_bytes = 2 * 8192; /* chunks of 2048 elements: they cut parameters */
    }
    zt_engine *e;
    zt_error err = {0};
    if (zt_engine_create(m, &o, &e, &err) || zt_engine_init_params(e, &err)) fail_msg("%s", err.msg);
    if (dir) memset(copy, 0, sizeof copy);
    return e;
}

static void train(zt_engine *e, int from, int steps) {
    int32_t in[B * T], tg[B * T];
    zt_error err = {0};
    for (int s = from; s < from + steps; s++) {
        batch(s, in, tg);
        zt_batch b = {.B = B, .T = T, .inputs = in, .targets = tg, .dloss = 1.0f / (B * T), .logits_pos = -1};
        float loss;
        if (zt_engine_forward_backward(e, &b, &loss, &err) || zt_engine_step(e, 1e-2f, NULL, &err))
            fail_msg("step %d: %s", s, err.msg);
    }
}

static void test_engine_bit_identical(void **state) {
    zt_model *m;
    zt_error err = {0};
    assert_int_equal(zt_gpt2_create(&CFG, &m, &err), ZT_OK);
    for (int k = 0; k < 2; k++) {
        zt_optimizer_kind kind = k ? ZT_OPT_SGD : ZT_OPT_ADAMW;
        zt_engine *mem = make(m, kind, NULL), *off = make(m, kind, tmpdir);
        assert_string_equal(zt_engine_offload_describe(mem), "");
        assert_non_null(strstr(zt_engine_offload_describe(off), kind == ZT_OPT_ADAMW ? "exp_avg,exp_avg_sq" : "momentum"));
        zt_memory_report a, b;
        zt_engine_memory(mem, &a);
        zt_engine_memory(off, &b);
        assert_int_equal(b.optimizer, 3 * 2 * 8192); /* only the staging buffers */
        assert_true(a.optimizer > b.optimizer);
        train(mem, 0, 4);
        train(off, 0, 4);
        assert_true(zt_engine_param_hash(mem) == zt_engine_param_hash(off));
        /* the memory plan (src/memory/plan.c) models the staging exactly: planned = measured */
        zt_memory_plan plan;
        zt_engine_memory_plan(off, &plan);
        zt_engine_memory(off, &b);
        for (int c = 0; c < ZT_MEM_CLASSES; c++)
            if (plan.peak[c] != b.peak[c])
                fail_msg("class %s: planned %zu, measured %zu", zt_mem_class_name((zt_mem_class)c), plan.peak[c],
                         b.peak[c]);
        assert_int_equal(plan.peak[ZT_MEM_OPTIMIZER], 3 * 2 * 8192);
        size_t kinds = kind == ZT_OPT_ADAMW ? 2 : 1, least = kinds * (size_t)zt_model_numel(m) * 4;
        assert_true(plan.offload_file_bytes >= least && plan.offload_file_bytes < least + kinds * 8192);
        zt_offload_stats st;
        zt_engine_offload_stats(off, &st, false);
        assert_int_equal(st.streams, 4);
        assert_true(st.read_bytes > 0 && st.write_bytes > 0);
        zt_engine_free(mem);
        zt_engine_free(off);
    }
    zt_model_free(m);
    assert_int_equal(count_entries(tmpdir), 0); /* every run directory removed */
}

static void test_engine_checkpoints(void **state) {
    zt_model *m;
    zt_error err = {0};
    assert_int_equal(zt_gpt2_create(&CFG, &m, &err), ZT_OK);
    char ck1[300], ck2[300], off_dir[300];
    snprintf(ck1, sizeof ck1, "%s/ck-mem", tmpdir);
    snprintf(ck2, sizeof ck2, "%s/ck-off", tmpdir);
    snprintf(off_dir, sizeof off_dir, "%s/nvme", tmpdir);
    mkdir(off_dir, 0700);
    /* reference: 6 steps in memory */
    zt_engine *ref = make(m, ZT_OPT_ADAMW, NULL);
    train(ref, 0, 6);
    uint64_t want = zt_engine_param_hash(ref);
    zt_engine_free(ref);
    /* memory -> checkpoint at 2 -> offloaded load, 2 more -> checkpoint at 4 -> memory load, 2 more */
    zt_engine *a = make(m, ZT_OPT_ADAMW, NULL);
    train(a, 0, 2);
    zt_ckpt_meta meta = {.step = 2};
    assert_int_equal(zt_ckpt_save(a, ck1, &meta, 0, &err), ZT_OK);
    zt_engine_free(a);
    zt_engine *b = make(m, ZT_OPT_ADAMW, off_dir);
    zt_ckpt_meta got;
    if (zt_ckpt_load(b, ck1, &got, &err)) fail_msg("%s", err.msg);
    train(b, 2, 2);
    meta.step = 4;
    if (zt_ckpt_save(b, ck2, &meta, 0, &err)) fail_msg("%s", err.msg);
    /* the async save of an offloaded engine writes in the foreground and commits on finish */
    zt_ckpt_async *as = NULL;
    char ck3[300];
    snprintf(ck3, sizeof ck3, "%s/ck-async", tmpdir);
    assert_int_equal(zt_ckpt_save_async(b, ck3, &meta, 0, &as, &err), ZT_OK);
    assert_int_equal(zt_ckpt_async_finish(as, &err), ZT_OK);
    assert_int_equal(zt_ckpt_verify(ck3, &err), ZT_OK);
    zt_engine_free(b);
    zt_engine *c = make(m, ZT_OPT_ADAMW, NULL);
    if (zt_ckpt_load(c, ck2, &got, &err)) fail_msg("%s", err.msg);
    assert_int_equal(got.step, 4);
    train(c, 4, 2);
    assert_true(zt_engine_param_hash(c) == want);
    zt_engine_free(c);
    /* the async commit holds the same bytes */
    zt_engine *d = make(m, ZT_OPT_ADAMW, off_dir);
    if (zt_ckpt_load(d, ck3, &got, &err)) fail_msg("%s", err.msg);
    train(d, 4, 2);
    assert_true(zt_engine_param_hash(d) == want);
    zt_engine_free(d);
    assert_int_equal(count_entries(off_dir), 0);
    zt_model_free(m);
}

static void test_engine_errors(void **state) {
    zt_model *m;
    zt_error err = {0};
    assert_int_equal(zt_gpt2_create(&CFG, &m, &err), ZT_OK);
    zt_engine_options o;
    zt_engine_options_default(&o);
    o.B = B;
    o.T = T;
    char missing[300];
    snprintf(missing, sizeof missing, "%s/absent", tmpdir);
    o.offload.optimizer_dir = missing;
    zt_engine *e = NULL;
    assert_int_equal(zt_engine_create(m, &o, &e, &err), ZT_ERR_IO);
    assert_null(e);
    assert_non_null(strstr(err.msg, "memory.offload_optimizer nvme"));
    assert_non_null(strstr(err.msg, missing));
    zt_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_io_roundtrip_and_errors),
        cmocka_unit_test(test_store_stream_matches_memory),
        cmocka_unit_test(test_store_errors),
        cmocka_unit_test(test_engine_bit_identical),
        cmocka_unit_test(test_engine_checkpoints),
        cmocka_unit_test(test_engine_errors),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
