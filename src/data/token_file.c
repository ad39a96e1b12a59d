/* token_file.c - reading (mmap) and atomically writing llm.c-format token files, uint16 (magic
 * 20240520, version 1) and uint32 (magic 20240801, version 7). */
#include "data/token_file.h"
#include "core/atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int zt_token_file_open(zt_token_file *f, const char *path, zt_error *err) {
    memset(f, 0, sizeof *f);
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return zt_error_set(err, ZT_ERR_IO, "cannot open token file %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        close(fd);
        return zt_error_set(err, ZT_ERR_IO, "cannot stat token file %s: %s", path, strerror(errno));
    }
    size_t header_bytes = ZT_TOKEN_FILE_HEADER_INTS * sizeof(int32_t);
    if ((size_t)st.st_size < header_bytes) {
        close(fd);
        return zt_error_set(err, ZT_ERR_DATA,
                            "token file %s: %lld bytes, shorter than the %zu-byte header", path,
                            (long long)st.st_size, header_bytes);
    }
    void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED)
        return zt_error_set(err, ZT_ERR_IO, "cannot map token file %s: %s", path, strerror(errno));
    const int32_t *h = map;
    int rc = ZT_OK, width = 0;
    if (h[0] == ZT_TOKEN_FILE_MAGIC && h[1] == ZT_TOKEN_FILE_VERSION)
        width = 2;
    else if (h[0] == ZT_TOKEN_FILE_MAGIC_U32 && h[1] == ZT_TOKEN_FILE_VERSION_U32)
        width = 4;
    else if (h[0] != ZT_TOKEN_FILE_MAGIC && h[0] != ZT_TOKEN_FILE_MAGIC_U32)
        rc = zt_error_set(err, ZT_ERR_DATA, "token file %s: bad magic %d (expected %d for uint16 tokens "
                          "or %d for uint32)", path, h[0], ZT_TOKEN_FILE_MAGIC, ZT_TOKEN_FILE_MAGIC_U32);
    else
        rc = zt_error_set(err, ZT_ERR_DATA, "token file %s: magic %d with version %d; this build reads "
                          "magic %d version %d (uint16 tokens) and magic %d version %d (uint32)", path, h[0],
                          h[1], ZT_TOKEN_FILE_MAGIC, ZT_TOKEN_FILE_VERSION, ZT_TOKEN_FILE_MAGIC_U32,
                          ZT_TOKEN_FILE_VERSION_U32);
    if (!rc && (h[2] < 0 || (size_t)st.st_size != header_bytes + (size_t)width * (size_t)h[2]))
        rc = zt_error_set(err, ZT_ERR_DATA,
                          "token file %s: header says %d tokens of %d bytes (%zu bytes) but the file has %lld",
                          path, h[2], width, header_bytes + (size_t)width * (size_t)(h[2] < 0 ? 0 : h[2]),
                          (long long)st.st_size);
    if (rc) {
        munmap(map, (size_t)st.st_size);
        return rc;
    }
    f->map = map;
    f->map_len = (size_t)st.st_size;
    f->n = (size_t)h[2];
    f->width = width;
    f->tokens = (const char *)map + header_bytes;
    return ZT_OK;
}

void zt_token_file_close(zt_token_file *f) {
    if (f->map) munmap(f->map, f->map_len);
    memset(f, 0, sizeof *f);
}

int zt_token_file_width_for(size_t vocab_size) { return vocab_size <= 65536 ? 2 : 4; }

/* Writes the tokens as width-byte integers (4: as they are; 2: narrowed through a buffer). */
static int write_tokens(FILE *fp, const uint32_t *tokens, size_t n, int width) {
    if (width == 4) return n == 0 || fwrite(tokens, sizeof *tokens, n, fp) == n;
    uint16_t buf[4096];
    for (size_t i = 0; i < n;) {
        size_t k = n - i < 4096 ? n - i : 4096;
        for (size_t j = 0; j < k; j++) buf[j] = (uint16_t)tokens[i + j];
        if (fwrite(buf, sizeof *buf, k, fp) != k) return 0;
        i += k;
    }
    return 1;
}

int zt_token_file_write(const char *path, const uint32_t *tokens, size_t n, int width, zt_error *err) {
    if (width != 2 && width != 4)
        return zt_error_set(err, ZT_ERR_USAGE, "token file %s: token width %d (2 or 4 bytes)", path, width);
    if (n > INT32_MAX)
        return zt_error_set(err, ZT_ERR_DATA, "token file %s: %zu tokens exceed the format's int32 count",
                            path, n);
    if (width == 2)
        for (size_t i = 0; i < n; i++)
            if (tokens[i] > 65535)
                return zt_error_set(err, ZT_ERR_DATA, "token file %s: token %u at position %zu does not fit "
                                    "uint16 tokens (write uint32 tokens instead)", path, tokens[i], i);
    zt_atomic_file af;
    int rc = zt_atomic_open(&af, path, err);
    if (rc) return rc;
    FILE *fp = af.fp;
    int32_t header[ZT_TOKEN_FILE_HEADER_INTS] = {0};
    header[0] = width == 2 ? ZT_TOKEN_FILE_MAGIC : ZT_TOKEN_FILE_MAGIC_U32;
    header[1] = width == 2 ? ZT_TOKEN_FILE_VERSION : ZT_TOKEN_FILE_VERSION_U32;
    header[2] = (int32_t)n;
    int ok = fwrite(header, sizeof header, 1, fp) == 1 && write_tokens(fp, tokens, n, width);
    return zt_atomic_commit(&af, ok, "token file", err);
}
