/* tokenizer_spm.h - SentencePiece-style BPE read from a Hugging Face tokenizer.json (Llama 2,
 * TinyLlama, Mistral v0.1-v0.3, Gemma): pieces are UTF-8 text with "▁" for spaces, characters
 * without a piece fall back to <0xNN> byte pieces. Private to src/data/: a zt_bpe holds one
 * (bpe_build.h's zt_bpe_set_spm) and zt_bpe_encode / zt_bpe_decode hand their work to it. What is
 * read and what is refused: tokenizer_spm.c. */
#ifndef ZT_TOKENIZER_SPM_H
#define ZT_TOKENIZER_SPM_H

#include "zerotrain/zerotrain.h"

#include <cjson/cJSON.h>

typedef struct zt_spm zt_spm;

/* Reads the tokenizer from the parsed tokenizer.json j (path names the file in messages). On error
 * *out is NULL: ZT_ERR_DATA naming the field (model.*, normalizer, pre_tokenizer, added_tokens[i],
 * decoder, post_processor) that is malformed or asks for something this reader does not run;
 * ZT_ERR_NOMEM. */
int zt_spm_load(zt_spm **out, const cJSON *j, const char *path, zt_error *err);
void zt_spm_free(zt_spm *s);

/* Encodes len bytes of UTF-8 as the tokenizers library does (no special tokens added; invalid
 * UTF-8 replaced by U+FFFD as WHATWG decoders do). *tokens malloc'd, *n entries; offsets, when not
 * NULL, gets a malloc'd array of each token's start byte in utf8 (see zt_bpe_encode_offsets). */
int zt_spm_encode(zt_spm *s, const char *utf8, size_t len, uint32_t **tokens, uint32_t **offsets, size_t *n,
                  zt_error *err);
/* Decodes through the file's decoder into a malloc'd, NUL-terminated *utf8 of *len bytes.
 * continuing: the ids continue an earlier sequence (token-by-token output), so the decoder's
 * strip of the sequence's leading space is not applied. <0xNN> pieces give their byte as is. */
int zt_spm_decode(const zt_spm *s, const uint32_t *tokens, size_t n, bool continuing, char **utf8, size_t *len,
                  zt_error *err);

/* WHATWG replacement of invalid UTF-8 (as bpe.c does: one U+FFFD per maximal invalid subpart) of
 * s[0..len) into a malloc'd *out of *olen bytes, with (*map)[i] the offset in s of output byte i
 * (malloc'd; both are freed by the caller, also on failure). 0, or -1 when out of memory. */
int zt_spm_utf8_repair(const unsigned char *s, size_t len, char **out, uint32_t **map, size_t *olen);

/* One more than the largest id (pieces and added tokens). */
size_t zt_spm_vocab_size(const zt_spm *s);
/* The id of the added token whose content is bytes[0..len), else -1. */
int zt_spm_added_id(const zt_spm *s, const char *bytes, size_t len);
/* The id of the piece (or added token) whose text is bytes[0..len), else -1. */
int zt_spm_piece_id(const zt_spm *s, const char *bytes, size_t len);

#endif
