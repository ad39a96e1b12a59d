/* bpe_build.h - building a zt_bpe piece by piece (bpe.c), for readers of other tokenizer formats
 * than encoder.json + vocab.bpe (tokenizer_json.c). Private to src/data/. what/path name the
 * source in error messages ("tokenizer.json model.vocab in", path). */
#ifndef ZT_BPE_BUILD_H
#define ZT_BPE_BUILD_H

#include "data/bpe.h"

#include <cjson/cJSON.h>

/* An empty tokenizer; free with zt_bpe_free. */
int zt_bpe_new(zt_bpe **out, zt_error *err);
/* vocab: a JSON object piece (GPT-2 byte characters) -> id in 0..ZT_BPE_MAX_ID; its keys are rewritten
 * in place. Needs all 256 single-byte pieces. ZT_ERR_DATA names the piece. */
int zt_bpe_set_vocab(zt_bpe *b, const cJSON *vocab, const char *what, const char *path, zt_error *err);
/* The merge of symbols x and y (GPT-2 byte characters) at rank (lower merges first); the merged
 * piece must be in the vocabulary. Messages say "<unit> <n>" ("line 2", "merge 0"). */
int zt_bpe_add_merge(zt_bpe *b, const char *x, size_t xl, const char *y, size_t yl, uint32_t rank,
                     const char *what, const char *path, const char *unit, size_t n, zt_error *err);
/* The pre-tokenizer: NULL for GPT-2's (as gpt-3-encoder runs it), else a PCRE2 pattern (UTF,
 * UCP); text between matches is a piece too (Split's "Isolated"). ZT_ERR_DATA when PCRE2
 * rejects the pattern. */
int zt_bpe_set_pattern(zt_bpe *b, const char *pattern, zt_error *err);
/* An added token: content (len bytes) is matched in the text before pre-tokenization (leftmost,
 * longest at a position) and becomes id; decoding id gives content. */
int zt_bpe_add_special(zt_bpe *b, const char *content, size_t len, uint32_t id, zt_error *err);
/* tokenizer.json's model.ignore_merges: a word found whole in the vocabulary is one token. */
void zt_bpe_set_ignore_merges(zt_bpe *b, bool on);

/* SentencePiece-style BPE (tokenizer_spm.h): b takes spm over (zt_bpe_free frees it) and hands
 * encoding, decoding, vocab_size and piece_id to it; zt_bpe_spm gives it back (NULL: byte-level). */
struct zt_spm;
void zt_bpe_set_spm(zt_bpe *b, struct zt_spm *spm);
struct zt_spm *zt_bpe_spm(const zt_bpe *b);

/* The post_processor's TemplateProcessing for a single sequence: the ids before and after it (at
 * most ZT_BPE_TEMPLATE_MAX each; more are cut). The pointers stay valid while b lives. */
#define ZT_BPE_TEMPLATE_MAX 8
void zt_bpe_set_template(zt_bpe *b, const uint32_t *before, size_t nb, const uint32_t *after, size_t na);
void zt_bpe_template(const zt_bpe *b, const uint32_t **before, size_t *nb, const uint32_t **after, size_t *na);

#endif
