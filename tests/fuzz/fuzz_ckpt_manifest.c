/* fuzz_ckpt_manifest.c - libFuzzer target for the checkpoint manifest reader (src/ckpt/checkpoint.c,
 * model_meta.c): the input is a commit's manifest.json (sealed with its xxh64, so the parser, not the
 * checksum, sees it), read by zt_ckpt_verify, zt_ckpt_read_model and zt_ckpt_load into a tiny GPT-2
 * engine beside the real shard file of a checkpoint saved at start-up. Not built by CMake;
 * tests/fuzz/README.md says how.
 *
 * Beyond "no crash, no sanitizer report" (huge counts, negative or overflowing offsets and sizes),
 * it traps when a contract breaks: a refusal is ZT_ERR_CKPT (exit 4) with a non-empty message, and
 * no file outside the commit directory is ever opened (open/openat/fopen are interposed: a `../`
 * or absolute name, or the directory itself, traps). At start-up the real manifest is written into
 * the corpus directory (the first argument) as a seed. */
#define _GNU_SOURCE
#include "ckpt/checkpoint.h"
#include "zerotrain/zerotrain.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char g_root[256], g_commit[300];
static zt_engine *g_e;
static int g_watch; /* while the reader runs: every path opened must lie inside g_commit */

static void check_path(const char *path) {
    if (!g_watch || !path) return;
    size_t n = strlen(g_commit);
    if (strncmp(path, g_commit, n) != 0 || path[n] != '/' || strstr(path + n, "/..") || !path[n + 1]) {
        fprintf(stderr, "fuzz_ckpt_manifest: opened %s, outside %s\n", path, g_commit);
        __builtin_trap();
    }
}

int open(const char *path, int flags, ...) {
    static int (*real)(const char *, int, ...);
    if (!real) real = (int (*)(const char *, int, ...))dlsym(RTLD_NEXT, "open");
    va_list ap;
    va_start(ap, flags);
    mode_t mode = (flags & O_CREAT) ? va_arg(ap, mode_t) : 0;
    va_end(ap);
    check_path(path);
    return real(path, flags, mode);
}

FILE *fopen(const char *path, const char *how) {
    static FILE *(*real)(const char *, const char *);
    if (!real) real = (FILE * (*)(const char *, const char *)) dlsym(RTLD_NEXT, "fopen");
    check_path(path);
    return real(path, how);
}

static void die(const char *what, const zt_error *err) {
    fprintf(stderr, "fuzz_ckpt_manifest: %s: %s\n", what, err->msg);
    exit(1);
}

static void write_file(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(p, 1, n, f) != n) || fclose(f)) {
        fprintf(stderr, "fuzz_ckpt_manifest: cannot write %s\n", path);
        exit(1);
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    static const zt_gpt2_config cfg = {.max_seq_len = 8, .vocab_size = 64, .n_layer = 1, .n_head = 2, .n_embd = 8};
    zt_error err = {0};
    zt_model *m;
    zt_engine_options o;
    zt_engine_options_default(&o);
    o.B = 1;
    o.T = 8;
    if (zt_gpt2_create(&cfg, &m, &err)) die("model", &err);
    if (zt_engine_create(m, &o, &g_e, &err) || zt_engine_init_params(g_e, &err)) die("engine", &err);
    snprintf(g_root, sizeof g_root, "%s/zt-fuzz-ckpt-%d", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid());
    static zt_ckpt_meta meta = {.step = 1}; /* with a run_state to mutate: two skipped ranges, a loss window */
    meta.run = (zt_ckpt_run_state){.n_skips = 2, .skip_start = {28, 100}, .skip_count = {4, 8}, .window = 4,
                                   .n_losses = 3, .head = 3, .losses = {10.5, 10.25, 10.125}};
    if (zt_ckpt_save(g_e, g_root, &meta, 0, &err)) die("save", &err);
    snprintf(g_commit, sizeof g_commit, "%s/step-00000001", g_root);
    for (int i = 1; i < *argc; i++) { /* the seed: the real manifest, into the corpus directory */
        struct stat st;
        if ((*argv)[i][0] == '-' || stat((*argv)[i], &st) || !S_ISDIR(st.st_mode)) continue;
        char src[400], dst[400], cmd[900];
        snprintf(src, sizeof src, "%s/manifest.json", g_commit);
        snprintf(dst, sizeof dst, "%s/seed-manifest.json", (*argv)[i]);
        snprintf(cmd, sizeof cmd, "cp '%s' '%s'", src, dst);
        if (system(cmd)) fprintf(stderr, "fuzz_ckpt_manifest: no seed written to %s\n", dst);
        break;
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[400], sum[32];
    snprintf(path, sizeof path, "%s/manifest.json", g_commit);
    write_file(path, data, size);
    snprintf(sum, sizeof sum, "%016llx\n", (unsigned long long)XXH64(data, size, 0));
    snprintf(path, sizeof path, "%s/manifest.json.xxh64", g_commit);
    write_file(path, sum, strlen(sum));
    zt_error err;
    zt_ckpt_meta meta;
    zt_model_spec spec;
    g_watch = 1;
    int rc[3];
    memset(&err, 0, sizeof err);
    rc[0] = zt_ckpt_verify(g_commit, &err);
    if (rc[0] && (rc[0] != ZT_ERR_CKPT || !err.msg[0])) __builtin_trap();
    memset(&err, 0, sizeof err);
    rc[1] = zt_ckpt_read_model(g_commit, &spec, &err);
    if (rc[1] && (rc[1] != ZT_ERR_CKPT || !err.msg[0])) __builtin_trap();
    memset(&err, 0, sizeof err);
    rc[2] = zt_ckpt_load(g_e, g_commit, &meta, &err);
    if (rc[2] && (rc[2] != ZT_ERR_CKPT || !err.msg[0])) __builtin_trap();
    g_watch = 0;
    return 0;
}
