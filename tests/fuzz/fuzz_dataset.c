/* fuzz_dataset.c - libFuzzer target for the records side of src/data/: the dataset cache reader
 * (dataset_cache.c), packing over what it accepts (packing.c), and the record shapes (records.c).
 * Not built by CMake; tests/fuzz/README.md says how.
 *
 * The input is a cache file whose two checksums the harness re-seals first (a random file would
 * otherwise stop at the checksum), so the reader's structural checks are what is fuzzed. Beyond "no
 * crash, no sanitizer report" it traps when a contract breaks: a refused cache is ZT_ERR_DATA with a
 * message; an accepted one has an index whose records lie inside the file and add up to the header's
 * token count, and packing it (T from the last byte) places every used record once, no sequence over
 * T, with targets inside the ids. The same bytes, parsed as JSON, go through zt_record_render: an
 * error is ZT_ERR_DATA with a message, a success has counted spans inside the text, ascending. */
#define _GNU_SOURCE
#include "data/dataset_cache.h"
#include "data/packing.h"
#include "data/records.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <xxhash.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_error(int rc, const zt_error *err, int want) {
    if (rc != want || err->code != rc || !memchr(err->msg, '\0', sizeof err->msg) || !err->msg[0]) __builtin_trap();
}

static void records(const uint8_t *data, size_t size) {
    cJSON *rec = cJSON_ParseWithLength((const char *)data, size);
    if (!rec) return;
    zt_record_rules r = {.text_field = "text", .prompt_field = "prompt", .completion_field = "completion",
                         .messages_field = "messages", .add_eos = true, .count_all = size % 2};
    zt_rendered out = {0};
    zt_error err = {0};
    int rc = zt_record_render(&r, rec, &out, &err);
    if (rc) {
        check_error(rc, &err, ZT_ERR_DATA);
    } else {
        size_t at = 0;
        for (int i = 0; i < out.n_spans; i++) {
            if (out.spans[i].begin < at || out.spans[i].end < out.spans[i].begin || out.spans[i].end > out.len)
                __builtin_trap();
            at = out.spans[i].end;
        }
        if (strlen(out.text) > out.len) __builtin_trap();
    }
    zt_rendered_free(&out);
    cJSON_Delete(rec);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    records(data, size);
    if (size < 72) return 0;
    uint8_t *b = malloc(size);
    memcpy(b, data, size);
    memcpy(b, "ZTDSET01", 8);
    uint64_t h = XXH64(b, 56, 0), t = XXH64(b + 64, size - 72, 0);
    memcpy(b + 56, &h, 8);
    memcpy(b + size - 8, &t, 8);
    char path[64];
    snprintf(path, sizeof path, "/tmp/fuzz_dataset.%d", (int)getpid());
    FILE *f = fopen(path, "wb");
    fwrite(b, 1, size, f);
    fclose(f);
    free(b);
    zt_dataset d;
    zt_error err = {0};
    int rc = zt_dataset_open(&d, path, &err);
    if (rc) {
        check_error(rc, &err, ZT_ERR_DATA);
        return 0;
    }
    uint64_t tokens = 0;
    for (uint64_t i = 0; i < d.n_docs; i++) {
        const uint32_t *ids;
        const uint8_t *c;
        uint32_t n, fl;
        zt_dataset_doc(&d, i, &ids, &c, &n, &fl);
        if ((const uint8_t *)ids < (const uint8_t *)d.map || c + n > (const uint8_t *)d.map + d.map_len) __builtin_trap();
        tokens += n;
    }
    if (tokens != d.n_tokens) __builtin_trap();
    int T = 1 + data[size - 1] % 64;
    zt_packed p;
    rc = zt_packed_build(&p, &d, data[size - 2] & 1, T, data[size - 3] & 1, ZT_TOO_LONG_TRUNCATE, 0, &err);
    if (rc) {
        check_error(rc, &err, ZT_ERR_DATA);
    } else {
        int32_t *in = malloc((size_t)T * 4), *tg = malloc((size_t)T * 4), *pos = malloc((size_t)T * 4);
        uint64_t placed = 0;
        for (uint64_t s = 0; s < p.n_seq; s++) {
            zt_packed_fill(&p, s, in, tg, pos);
            uint64_t here = 0;
            for (uint64_t j = p.seq_begin[s]; j < p.seq_begin[s + 1]; j++) here += p.piece_len[j];
            if (here > (uint64_t)T) __builtin_trap();
            placed += p.seq_begin[s + 1] - p.seq_begin[s];
        }
        if (placed != p.docs) __builtin_trap();
        free(in), free(tg), free(pos);
        zt_packed_free(&p);
    }
    zt_dataset_close(&d);
    unlink(path);
    return 0;
}
