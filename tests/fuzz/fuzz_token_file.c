/* fuzz_token_file.c - libFuzzer target for src/data/token_file.c and the sampler over it: the input
 * is a whole token file (header of 256 int32 then uint16 or uint32 tokens; the seeds hold one of
 * each). Not built by CMake; tests/fuzz/README.md says how.
 *
 * Beyond "no crash, no sanitizer report", it traps when a contract breaks: a refused file is
 * ZT_ERR_DATA with a non-empty message and leaves the handle empty; an accepted one has one of
 * llm.c's magic/version pairs (20240520/1: uint16, 20240801/7: uint32), exactly header + width x
 * count bytes, and reads back the input's tokens; the sampler over it (T from the last input byte;
 * the vocabulary from the first token byte, up to 2^24 for uint32 files) refuses too-short files and
 * bad tokens (>= vocab) with ZT_ERR_DATA, and every sample it returns holds tokens in [0, vocab)
 * with targets = inputs shifted by one. */
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
    int width = h[0] == ZT_TOKEN_FILE_MAGIC && h[1] == ZT_TOKEN_FILE_VERSION           ? 2
                : h[0] == ZT_TOKEN_FILE_MAGIC_U32 && h[1] == ZT_TOKEN_FILE_VERSION_U32 ? 4
                                                                                        : 0;
    if (size < header || !width || f.width != width || h[2] < 0 || f.n != (size_t)h[2] ||
        size != header + (size_t)width * f.n)
        __builtin_trap();
    for (size_t i = 0; i < f.n; i++) {
        uint32_t want = 0;
        memcpy(&want, data + header + (size_t)width * i, (size_t)width); /* little-endian */
        if (zt_token_file_at(&f, i) != want) __builtin_trap();
    }
    int T = 1 + data[size - 1] % 64;
    int vocab = width == 2 ? 1 + (int)(data[header % size] * 256 % 50257)
                           : 1 + (int)((uint32_t)data[header % size] * 65793u % 16777216u);
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
            rc = zt_sampler_get(&s, i * 7919, in, tg, NULL, NULL, vocab, &err);
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
