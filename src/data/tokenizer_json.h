/* tokenizer_json.h - Hugging Face tokenizer.json files, read into a zt_bpe: byte-level BPE (GPT-2,
 * Llama 3, Qwen) and SentencePiece-style BPE with byte fallback (Llama 2, TinyLlama, Mistral v0.1-v0.3,
 * Gemma); the post_processor's template, token lookup, and per-token byte offsets. What is read and
 * what is refused: tokenizer_json.c (byte-level) and tokenizer_spm.c (SentencePiece-style). */
#ifndef ZT_TOKENIZER_JSON_H
#define ZT_TOKENIZER_JSON_H

#include "data/bpe.h"

/* Loads path. On error *out is NULL: ZT_ERR_IO when unreadable, ZT_ERR_DATA naming the field
 * (model.type, pre_tokenizer, normalizer, an added token, a merge, a piece) that is malformed or
 * describes a tokenizer this reader does not run, ZT_ERR_NOMEM. */
int zt_tokenizer_json_load(zt_bpe **out, const char *path, zt_error *err);

/* The tokenizer for a command: a path -> zt_tokenizer_json_load; NULL -> GPT-2's encoder.json +
 * vocab.bpe (zt_bpe_default_paths). */
int zt_tokenizer_open(zt_bpe **out, const char *path, zt_error *err);
/* The id that separates documents: the piece <|endoftext|> (GPT-2, Qwen), else <|end_of_text|>
 * (Llama 3), else </s> (Llama 2, Mistral), else <eos> (Gemma), looked up among a SentencePiece
 * tokenizer's added tokens first (Gemma's vocabulary has "</s>" as text); ZT_ERR_DATA when the
 * vocabulary has none of them. */
int zt_tokenizer_eot(const zt_bpe *b, uint32_t *id, zt_error *err);

/* The post_processor's TemplateProcessing for one sequence: the ids it puts before and after it
 * (Llama 2: <s> before; Gemma: <bos> before; nb = na = 0 without a template). Encoding never adds
 * them. The pointers stay valid while b lives. */
void zt_tokenizer_template(const zt_bpe *b, const uint32_t **before, size_t *nb, const uint32_t **after, size_t *na);
/* How `zerotrain tokenize` frames each document, and so how `sample` starts one: byte-level
 * tokenizers (GPT-2's files, byte-level tokenizer.json) put eot before the document, as llm.c's files
 * do; SentencePiece-style ones the template's ids before it and the template's ids after it then
 * eot (unless the template already ends with it): Llama 2 "<s> doc </s>", Gemma "<bos> doc <eos>".
 * pre and post must hold ZT_TOKENIZER_FRAME_MAX ids each. */
#define ZT_TOKENIZER_FRAME_MAX 10
void zt_tokenizer_doc_frame(const zt_bpe *b, uint32_t eot, uint32_t *pre, size_t *npre, uint32_t *post, size_t *npost);
/* zt_bpe_decode for ids that continue an earlier decoded sequence (printing tokens one by one): a
 * SentencePiece decoder's removal of the sequence's leading space (Strip, Metaspace) is not done. */
int zt_tokenizer_decode_next(const zt_bpe *b, const uint32_t *tokens, size_t n, char **utf8, size_t *len,
                             zt_error *err);

/* Encodes as zt_bpe_encode does and gives, for every token, the byte offset in utf8 where the text
 * it stands for begins (*offsets malloc'd, *n entries; a prepended or normalized-in character belongs
 * to the token that holds it, the first byte-fallback token of a character has the character's
 * offset). What a chat dataset maps the assistant spans of a rendered text through. */
int zt_bpe_encode_offsets(zt_bpe *bpe, const char *utf8, size_t len, uint32_t **tokens, uint32_t **offsets,
                          size_t *n, zt_error *err);
/* The id of the added token, else the vocabulary piece, whose text is content ("<s>", "<|im_end|>",
 * "<|endoftext|>"); -1 when there is none. */
int64_t zt_tokenizer_token_id(const zt_bpe *b, const char *content);

#endif
