/* file.c - whole-file reading with errors that name the file (see file.h). */
#include "core/file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int zt_read_file(const char *path, const char *what, char **buf, size_t *len, zt_error *err) {
    *buf = NULL;
    *len = 0;
    FILE *fp = fopen(path, "rb");
    if (!fp) return zt_error_set(err, ZT_ERR_IO, "cannot open %s %s: %s", what, path, strerror(errno));
    struct stat st;
    if (fstat(fileno(fp), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(fp);
        return zt_error_set(err, ZT_ERR_IO, "%s %s is not a regular file", what, path);
    }
    char *b = malloc((size_t)st.st_size + 1);
    if (!b) {
        fclose(fp);
        return zt_error_set(err, ZT_ERR_NOMEM, "no memory for %s %s (%lld bytes)", what, path,
                            (long long)st.st_size);
    }
    size_t got = fread(b, 1, (size_t)st.st_size, fp);
    int bad = ferror(fp);
    fclose(fp);
    if (bad || got != (size_t)st.st_size) {
        free(b);
        return zt_error_set(err, ZT_ERR_IO, "cannot read %s %s: %s", what, path,
                            bad ? strerror(errno) : "file changed size while reading");
    }
    b[got] = 0;
    *buf = b;
    *len = got;
    return ZT_OK;
}

void zt_make_parent_dirs(const char *path) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    for (char *p = dir + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            mkdir(dir, 0777);
            *p = '/';
        }
}
