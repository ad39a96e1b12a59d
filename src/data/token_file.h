/* token_file.h - token files in llm.c's format: a header of 256 int32 (magic 20240520, version 1,
 * token count), then the tokens as uint16. Readers map the file; writers commit atomically. */
#ifndef ZT_TOKEN_FILE_H
#define ZT_TOKEN_FILE_H

#include "zerotrain/zerotrain.h"

#define ZT_TOKEN_FILE_MAGIC 20240520
#define ZT_TOKEN_FILE_VERSION 1
#define ZT_TOKEN_FILE_HEADER_INTS 256

typedef struct zt_token_file {
    const uint16_t *tokens; /* (n) points into the mapping */
    size_t n;
    void *map;
    size_t map_len;
} zt_token_file;

/* Maps and validates path (magic, version, size = header + 2 * count). ZT_ERR_DATA names the
 * file and what is wrong; ZT_ERR_IO when it cannot be opened. */
int zt_token_file_open(zt_token_file *f, const char *path, zt_error *err);
void zt_token_file_close(zt_token_file *f);
/* Writes n tokens to path through a temporary file and rename(2). */
int zt_token_file_write(const char *path, const uint16_t *tokens, size_t n, zt_error *err);

#endif
