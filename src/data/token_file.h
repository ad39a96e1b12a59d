/* token_file.h - token files in llm.c's formats, read (mapped) and written (atomically): a header
 * of 256 int32 (magic, version, token count, then zeros), then the tokens, little-endian:
 *   magic 20240520, version 1: uint16 tokens (llm.c's GPT-2 files; ids below 65536)
 *   magic 20240801, version 7: uint32 tokens (llm.c's Llama 3 files, dev/data/data_common.py's
 *                              "llama-3" header; any id, e.g. Llama 3's 128256-id vocabulary)
 * Readers accept both; `zerotrain tokenize` writes the first unless the tokenizer has ids above
 * 65535 (or --uint32 asks for the second). docs/tokenizers.md describes the layout. */
#ifndef ZT_TOKEN_FILE_H
#define ZT_TOKEN_FILE_H

#include "zerotrain/zerotrain.h"

#define ZT_TOKEN_FILE_MAGIC 20240520 /* uint16 tokens */
#define ZT_TOKEN_FILE_VERSION 1
#define ZT_TOKEN_FILE_MAGIC_U32 20240801 /* uint32 tokens */
#define ZT_TOKEN_FILE_VERSION_U32 7
#define ZT_TOKEN_FILE_HEADER_INTS 256

typedef struct zt_token_file {
    const void *tokens; /* (n) uint16_t or uint32_t (width), points into the mapping */
    size_t n;
    int width; /* bytes per token: 2 or 4 */
    void *map;
    size_t map_len;
} zt_token_file;

/* Token i (i < n). */
static inline uint32_t zt_token_file_at(const zt_token_file *f, size_t i) {
    return f->width == 4 ? ((const uint32_t *)f->tokens)[i] : ((const uint16_t *)f->tokens)[i];
}

/* Maps and validates path (one of the two magic/version pairs; size = header + width * count).
 * ZT_ERR_DATA names the file and what is wrong; ZT_ERR_IO when it cannot be opened. */
int zt_token_file_open(zt_token_file *f, const char *path, zt_error *err);
void zt_token_file_close(zt_token_file *f);
/* The width tokenize writes for a vocabulary of vocab_size ids (0 .. vocab_size - 1): 2 when every
 * id fits uint16, else 4. */
int zt_token_file_width_for(size_t vocab_size);
/* Writes n tokens to path through a temporary file and rename(2), width 2 (magic 20240520, version
 * 1: byte for byte llm.c's GPT-2 file) or 4 (magic 20240801, version 7). ZT_ERR_DATA names the
 * position of a token above 65535 when width is 2; ZT_ERR_USAGE for another width. */
int zt_token_file_write(const char *path, const uint32_t *tokens, size_t n, int width, zt_error *err);

#endif
