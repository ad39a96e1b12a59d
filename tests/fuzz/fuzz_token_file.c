/* fuzz_token_file.c - libFuzzer target for src/data/token_file.c and the sampler over it: the input
 * is a whole token file (header of 256 int32 then uint16 tokens). Not built by CMake;
 * tests/fuzz/README.md says how.
 *
 * Beyond "no crash, no sanitizer report", it traps when a contract breaks: a refused file is
 * ZT_ERR_DATA with a non-empty message and leaves the handle empty; an accepted one has the
 * llm.c magic and version and exactly header + 2 x count bytes; the sampler over it (T from the
 * last input byte) refuses too-short files and bad tokens (>= vocab) with ZT_ERR_DATA, and every
 * sample it returns holds tokens in [0, vocab) with targets = inputs shifted by one. */
#define _GNU_SOURCE
#include "data/sampler.h"
#include "data/token_file.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_error(int rc, const zt_error *err, int want) {
    if (rc != want || err->code != rc || !memchr(err->msg, '\0', sizeof err->msg) || !err->msg[0]) __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    int fd = memfd_create("fuzz-tokens", 0);
    if (fd < 0) return 0;
    if (size && write(fd, data, size) != (ssize_t)size) {
        close(fd);
        return 0;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    zt_token_file f;
    zt_error err = {0};
    int rc = zt_token_file_open(&f, path, &err);
    close(fd); /* the mapping outlives the descriptor */
    const size_t header = ZT_TOKEN_FILE_HEADER_INTS * 4;
    if (rc != ZT_OK) {
        check_error(rc, &err, ZT_ERR_DATA);
        if (f.map || f.tokens || f.n) __builtin_trap();
        return 0;
    }
    int32_t h[3];
    memcpy(h, data, sizeof h);
    if (size < header || h[0] != ZT_TOKEN_FILE_MAGIC || h[1] != ZT_TOKEN_FILE_VERSION || h[2] < 0 ||
        f.n != (size_t)h[2] || size != header + 2 * f.n)
        __builtin_trap();
    int T = 1 + data[size - 1] % 64, vocab = 1 + (int)(data[header % size] * 256 % 50257);
    zt_sampler s;
    memset(&err, 0, sizeof err);
    rc = zt_sampler_init(&s, &f, T, data[0], data[1] & 1, &err);
    if (rc != ZT_OK) {
        check_error(rc, &err, ZT_ERR_DATA);
        if (f.n >= (size_t)T + 1) __builtin_trap(); /* long enough files are never refused */
    } else {
        int32_t in[64], tg[64];
        for (uint64_t i = 0; i < 8; i++) {
            memset(&err, 0, sizeof err);
            rc = zt_sampler_get(&s, i * 7919, in, tg, vocab, &err);
            if (rc != ZT_OK) {
                check_error(rc, &err, ZT_ERR_DATA);
                continue;
            }
            for (int t = 0; t < T; t++) {
                if (in[t] < 0 || in[t] >= vocab || tg[t] < 0 || tg[t] >= vocab) __builtin_trap();
                if (t + 1 < T && tg[t] != in[t + 1]) __builtin_trap();
            }
        }
        zt_sampler_free(&s);
    }
    zt_token_file_close(&f);
    return 0;
}
