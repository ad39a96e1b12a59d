/* file.h - small file helpers shared by the readers (tokenizer data, text corpora, checkpoints). */
#ifndef ZT_FILE_H
#define ZT_FILE_H

#include "zerotrain/zerotrain.h"

/* Reads the regular file path whole into a malloc'd buffer with a NUL after its *len bytes.
 * what names the file's role in messages ("text file", "checkpoint manifest"). ZT_ERR_IO when it
 * cannot be opened or read, ZT_ERR_NOMEM when it does not fit. */
int zt_read_file(const char *path, const char *what, char **buf, size_t *len, zt_error *err);

/* mkdir -p of path's parent directory; failures surface when the file itself is created. */
void zt_make_parent_dirs(const char *path);

#endif
