/* atomic_file.h - the one way a file is replaced so that a reader (or a crash) sees the old bytes or
 * the new ones, never a part: the bytes go to a temporary beside it (PATH.tmp.PID: two processes
 * writing one path never share a temporary), which is flushed, fsynced and renamed over PATH, and
 * then PATH's directory is fsynced so that the rename itself survives a power cut. Every writer of
 * a whole file goes through here (checkpoint manifests and `latest`, weights, safetensors, Hugging
 * Face JSON, token files, the peak cache, the launcher's records).
 *
 * Errors are ZT_ERR_IO naming the path (the temporary's when it cannot be created) and the
 * system's reason; on every failure the temporary is removed and PATH is left as it was. */
#ifndef ZT_ATOMIC_FILE_H
#define ZT_ATOMIC_FILE_H

#include "zerotrain/zerotrain.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

typedef struct zt_atomic_file {
    FILE *fp;       /* the temporary, open for writing between zt_atomic_open and commit/abandon */
    char path[4096];
    char tmp[4200];
} zt_atomic_file;

/* Creates PATH.tmp.PID for writing (binary). ZT_ERR_USAGE when the path is too long, ZT_ERR_IO
 * "cannot create TMP: reason". */
int zt_atomic_open(zt_atomic_file *f, const char *path, zt_error *err);
/* Publishes what was written: ok false (the caller's own writes failed: errno says why) or any
 * failure of the writes, flush, fsync, close, rename or the directory's fsync is ZT_ERR_IO
 * "cannot write WHAT PATH: reason" (what "": "cannot write PATH: ..."), the temporary removed.
 * The file is closed either way. */
int zt_atomic_commit(zt_atomic_file *f, bool ok, const char *what, zt_error *err);
/* Closes and removes the temporary (a writer that stops on an error of its own). */
void zt_atomic_abandon(zt_atomic_file *f);

/* The whole of data[0, len) as PATH, atomically as above. */
int zt_write_file_atomic(const char *path, const void *data, size_t len, zt_error *err);

#endif
