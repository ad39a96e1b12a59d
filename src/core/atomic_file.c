/* atomic_file.c - whole-file replacement through a temporary, fsync, rename and the directory's
 * fsync (see atomic_file.h). */
#include "core/atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

int zt_atomic_open(zt_atomic_file *f, const char *path, zt_error *err) {
    f->fp = NULL;
    int n = snprintf(f->path, sizeof f->path, "%s", path);
    int m = snprintf(f->tmp, sizeof f->tmp, "%s.tmp.%d", path, (int)getpid());
    if (n < 0 || (size_t)n >= sizeof f->path || m < 0 || (size_t)m >= sizeof f->tmp)
        return zt_error_set(err, ZT_ERR_USAGE, "path too long to write: %.200s...", path);
    f->fp = fopen(f->tmp, "wb");
    if (!f->fp) return zt_error_set(err, ZT_ERR_IO, "cannot create %s: %s", f->tmp, strerror(errno));
    return ZT_OK;
}

void zt_atomic_abandon(zt_atomic_file *f) {
    if (!f->fp) return;
    fclose(f->fp);
    f->fp = NULL;
    unlink(f->tmp);
}

/* fsync of path's directory ("." when path has no slash); filesystems that cannot sync a
 * directory (EINVAL) count as synced. */
static int fsync_parent(const char *path) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == dir) dir[1] = '\0';
    else *slash = '\0';
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0) return -1;
    int rc = fsync(fd);
    int e = errno;
    close(fd);
    if (rc != 0 && e == EINVAL) rc = 0;
    errno = e;
    return rc;
}

int zt_atomic_commit(zt_atomic_file *f, bool ok, const char *what, zt_error *err) {
    const char *sep = what && *what ? " " : "";
    if (!what) what = "";
    if (!f->fp) return zt_error_set(err, ZT_ERR_IO, "cannot write %s%s%s: not open", what, sep, f->path);
    int e = ok ? 0 : errno;
    if (ok && (fflush(f->fp) != 0 || ferror(f->fp) || fsync(fileno(f->fp)) != 0)) ok = false, e = errno;
    if (fclose(f->fp) != 0 && ok) ok = false, e = errno;
    f->fp = NULL;
    if (ok && rename(f->tmp, f->path) != 0) ok = false, e = errno;
    if (!ok) {
        unlink(f->tmp);
        return zt_error_set(err, ZT_ERR_IO, "cannot write %s%s%s: %s", what, sep, f->path,
                            e ? strerror(e) : "write failed");
    }
    if (fsync_parent(f->path) != 0)
        return zt_error_set(err, ZT_ERR_IO, "cannot write %s%s%s: syncing its directory: %s", what, sep, f->path,
                            strerror(errno));
    return ZT_OK;
}

int zt_write_file_atomic(const char *path, const void *data, size_t len, zt_error *err) {
    zt_atomic_file f;
    int rc = zt_atomic_open(&f, path, err);
    if (rc) return rc;
    bool ok = len == 0 || fwrite(data, 1, len, f.fp) == len;
    return zt_atomic_commit(&f, ok, "", err);
}
