/* token_file.c - reading (mmap) and atomically writing llm.c-format token files. */
#include "data/token_file.h"

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
    int rc = ZT_OK;
    if (h[0] != ZT_TOKEN_FILE_MAGIC)
        rc = zt_error_set(err, ZT_ERR_DATA, "token file %s: bad magic %d (expected %d)", path, h[0],
                          ZT_TOKEN_FILE_MAGIC);
    else if (h[1] != ZT_TOKEN_FILE_VERSION)
        rc = zt_error_set(err, ZT_ERR_DATA, "token file %s: version %d, this build reads %d", path,
                          h[1], ZT_TOKEN_FILE_VERSION);
    else if (h[2] < 0 || (size_t)st.st_size != header_bytes + 2 * (size_t)h[2])
        rc = zt_error_set(err, ZT_ERR_DATA,
                          "token file %s: header says %d tokens (%zu bytes) but the file has %lld",
                          path, h[2], header_bytes + 2 * (size_t)(h[2] < 0 ? 0 : h[2]),
                          (long long)st.st_size);
    if (rc) {
        munmap(map, (size_t)st.st_size);
        return rc;
    }
    f->map = map;
    f->map_len = (size_t)st.st_size;
    f->n = (size_t)h[2];
    f->tokens = (const uint16_t *)((const char *)map + header_bytes);
    return ZT_OK;
}

void zt_token_file_close(zt_token_file *f) {
    if (f->map) munmap(f->map, f->map_len);
    memset(f, 0, sizeof *f);
}

int zt_token_file_write(const char *path, const uint16_t *tokens, size_t n, zt_error *err) {
    if (n > INT32_MAX)
        return zt_error_set(err, ZT_ERR_DATA, "token file %s: %zu tokens exceed the format's int32 count",
                            path, n);
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid()) >= (int)sizeof tmp)
        return zt_error_set(err, ZT_ERR_USAGE, "token file path too long: %s", path);
    FILE *fp = fopen(tmp, "wb");
    if (!fp) return zt_error_set(err, ZT_ERR_IO, "cannot create %s: %s", tmp, strerror(errno));
    int32_t header[ZT_TOKEN_FILE_HEADER_INTS] = {0};
    header[0] = ZT_TOKEN_FILE_MAGIC;
    header[1] = ZT_TOKEN_FILE_VERSION;
    header[2] = (int32_t)n;
    int ok = fwrite(header, sizeof header, 1, fp) == 1 &&
             (n == 0 || fwrite(tokens, sizeof *tokens, n, fp) == n);
    ok = (fflush(fp) == 0) && ok && (fsync(fileno(fp)) == 0);
    ok = (fclose(fp) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return zt_error_set(err, ZT_ERR_IO, "cannot write token file %s: %s", path, strerror(e));
    }
    return ZT_OK;
}
