/* dataset_cache.c - the tokenized dataset file: its streaming writer and its mapped, verified reader
 * (the layout: dataset_cache.h). */
#include "data/dataset_cache.h"

#include "core/atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#define MAGIC "ZTDSET01"
#define HEADER 64
#define ENTRY 16

struct zt_dataset_writer {
    zt_atomic_file f;
    XXH64_state_t *h;
    uint64_t key, n_docs, n_tokens, n_val, n_counted, at;
    uint8_t *index;
    size_t index_cap;
    bool failed;
};

static void put64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }
static void put32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static uint64_t get64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }
static uint32_t get32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }

int zt_dataset_writer_open(zt_dataset_writer **out, const char *path, uint64_t key, zt_error *err) {
    *out = NULL;
    zt_dataset_writer *w = calloc(1, sizeof *w);
    if (!w || !(w->h = XXH64_createState())) {
        free(w);
        return zt_error_set(err, ZT_ERR_NOMEM, "dataset cache: out of memory");
    }
    XXH64_reset(w->h, 0);
    int rc = zt_atomic_open(&w->f, path, err);
    if (rc) {
        XXH64_freeState(w->h);
        free(w);
        return rc;
    }
    uint8_t zero[HEADER] = {0};
    w->failed = fwrite(zero, 1, HEADER, w->f.fp) != HEADER;
    w->key = key;
    w->at = HEADER;
    *out = w;
    return ZT_OK;
}

static void emit(zt_dataset_writer *w, const void *p, size_t n) {
    if (!n || w->failed) return;
    w->failed = fwrite(p, 1, n, w->f.fp) != n;
    XXH64_update(w->h, p, n);
    w->at += n;
}

int zt_dataset_writer_add(zt_dataset_writer *w, const uint32_t *ids, const uint8_t *counted, uint32_t n,
                          uint32_t flags, zt_error *err) {
    if ((w->n_docs + 1) * ENTRY > w->index_cap) {
        size_t cap = w->index_cap ? 2 * w->index_cap : 1 << 16;
        uint8_t *p = realloc(w->index, cap);
        if (!p) return zt_error_set(err, ZT_ERR_NOMEM, "dataset cache: out of memory for the index of %llu records",
                                    (unsigned long long)w->n_docs + 1);
        w->index = p;
        w->index_cap = cap;
    }
    uint8_t *e = w->index + w->n_docs * ENTRY;
    put64(e, w->at);
    put32(e + 8, n);
    put32(e + 12, flags);
    emit(w, ids, (size_t)n * 4);
    emit(w, counted, n);
    static const uint8_t pad[4] = {0};
    emit(w, pad, (4 - n % 4) % 4);
    w->n_docs++;
    w->n_tokens += n;
    w->n_val += (flags & ZT_DOC_VAL) != 0;
    for (uint32_t i = 0; i < n; i++) w->n_counted += counted[i] != 0;
    return ZT_OK;
}

int zt_dataset_writer_close(zt_dataset_writer *w, bool ok, zt_error *err) {
    int rc = ZT_OK;
    if (!ok) {
        zt_atomic_abandon(&w->f);
    } else {
        uint64_t index_at = w->at;
        emit(w, w->index, (size_t)w->n_docs * ENTRY);
        uint8_t tail[8], head[HEADER];
        put64(tail, XXH64_digest(w->h));
        memcpy(head, MAGIC, 8);
        put64(head + 8, w->key);
        put64(head + 16, w->n_docs);
        put64(head + 24, w->n_tokens);
        put64(head + 32, index_at);
        put64(head + 40, w->n_val);
        put64(head + 48, w->n_counted);
        put64(head + 56, XXH64(head, 56, 0));
        if (!w->failed) w->failed = fwrite(tail, 1, 8, w->f.fp) != 8;
        if (!w->failed) w->failed = fseek(w->f.fp, 0, SEEK_SET) != 0 || fwrite(head, 1, HEADER, w->f.fp) != HEADER;
        rc = zt_atomic_commit(&w->f, !w->failed, "dataset cache", err);
    }
    XXH64_freeState(w->h);
    free(w->index);
    free(w);
    return rc;
}

static int bad(zt_dataset *d, zt_error *err, const char *what) {
    int rc = zt_error_set(err, ZT_ERR_DATA, "dataset cache %s: %s", d->path, what);
    zt_dataset_close(d);
    return rc;
}

int zt_dataset_open(zt_dataset *d, const char *path, zt_error *err) {
    memset(d, 0, sizeof *d);
    snprintf(d->path, sizeof d->path, "%s", path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return zt_error_set(err, ZT_ERR_IO, "cannot open dataset cache %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size < HEADER + 8) {
        close(fd);
        return zt_error_set(err, ZT_ERR_DATA, "dataset cache %s: %s", path, "shorter than its header and trailer");
    }
    d->map_len = (size_t)st.st_size;
    d->map = mmap(NULL, d->map_len, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (d->map == MAP_FAILED) {
        d->map = NULL;
        return zt_error_set(err, ZT_ERR_IO, "cannot map dataset cache %s: %s", path, strerror(errno));
    }
    const uint8_t *h = d->map;
    if (memcmp(h, MAGIC, 8) != 0) return bad(d, err, "not a dataset cache (magic)");
    if (get64(h + 56) != XXH64(h, 56, 0)) return bad(d, err, "header checksum mismatch");
    d->key = get64(h + 8);
    d->n_docs = get64(h + 16);
    d->n_tokens = get64(h + 24);
    uint64_t index_at = get64(h + 32);
    d->n_val = get64(h + 40);
    d->n_counted = get64(h + 48);
    if (index_at < HEADER || d->n_docs > (d->map_len - 8) / ENTRY || index_at + d->n_docs * ENTRY + 8 != d->map_len)
        return bad(d, err, "the index does not end where the trailer begins (truncated?)");
    if (get64(h + d->map_len - 8) != XXH64(h + HEADER, d->map_len - 8 - HEADER, 0))
        return bad(d, err, "content checksum mismatch (damaged)");
    d->index = h + index_at;
    uint64_t at = HEADER, tokens = 0;
    for (uint64_t i = 0; i < d->n_docs; i++) {
        const uint8_t *e = d->index + i * ENTRY;
        uint64_t n = get32(e + 8);
        if (get64(e) != at) return bad(d, err, "an index entry points outside its record");
        at += 4 * n + n + (4 - n % 4) % 4;
        tokens += n;
    }
    if (at != index_at || tokens != d->n_tokens) return bad(d, err, "the records do not add up to the header's sizes");
    return ZT_OK;
}

void zt_dataset_close(zt_dataset *d) {
    if (d->map) munmap(d->map, d->map_len);
    memset(d, 0, sizeof *d);
}

void zt_dataset_doc(const zt_dataset *d, uint64_t i, const uint32_t **ids, const uint8_t **counted, uint32_t *n,
                    uint32_t *flags) {
    const uint8_t *e = d->index + i * ENTRY;
    uint64_t at = get64(e);
    *n = get32(e + 8);
    if (flags) *flags = get32(e + 12);
    *ids = (const uint32_t *)(const void *)((const uint8_t *)d->map + at);
    *counted = (const uint8_t *)d->map + at + 4 * (uint64_t)*n;
}

int zt_dataset_peek_key(const char *path, uint64_t *key, zt_error *err) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return zt_error_set(err, ZT_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    uint8_t h[HEADER];
    size_t got = fread(h, 1, HEADER, fp);
    fclose(fp);
    if (got != HEADER || memcmp(h, MAGIC, 8) != 0 || get64(h + 56) != XXH64(h, 56, 0))
        return zt_error_set(err, ZT_ERR_DATA, "%s is not a dataset cache", path);
    *key = get64(h + 8);
    return ZT_OK;
}
