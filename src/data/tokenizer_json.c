/* tokenizer_json.c - a Hugging Face tokenizer.json reader: byte-level BPE here, SentencePiece-style
 * BPE handed to tokenizer_spm_load.c; the post_processor's template, token lookup, offsets.
 *
 * Which: a file is SentencePiece-style (Llama 2, TinyLlama, Mistral v0.1-v0.3, Gemma) when
 * model.byte_fallback is true, or it has a normalizer other than NFC/NFKC, or a Metaspace
 * pre-tokenizer, or neither pre-tokenizer nor decoder is ByteLevel; what tokenizer_spm.c reads and
 * refuses is listed there. Otherwise byte-level (GPT-2, Llama 3, Qwen), read here:
 *   model        {"type": "BPE", "vocab": {piece: id}, "merges": ["a b", ...] or [["a", "b"], ...],
 *                 "ignore_merges": bool}; pieces in GPT-2's byte characters (the ByteLevel
 *                 alphabet); dropout null, no continuing_subword_prefix / end_of_word_suffix, no
 *                 byte_fallback.
 *   pre_tokenizer {"type": "ByteLevel", "use_regex": true}: GPT-2's regex (the one bpe.c runs,
 *                 with node's Unicode classes, so GPT-2's tokenizer.json gives the tokens of the
 *                 gpt-3-encoder package); or {"type": "Sequence", "pretokenizers": [{"type":
 *                 "Split", "pattern": {"Regex": R}, "behavior": "Isolated", "invert": false},
 *                 {"type": "ByteLevel", "use_regex": false}]} (Llama 3, Qwen): R run by PCRE2
 *                 (Unicode properties from PCRE2's tables).
 *   added_tokens  [{"id", "content", ...}]: matched in the text before pre-tokenization.
 *   decoder       ByteLevel (or absent): tokens decode to their bytes.
 * Refused, naming the field: another model type, a normalizer, add_prefix_space, a pre-tokenizer
 * other than the two above, an added token with lstrip/rstrip/single_word, ids above 16777215
 * (model.vocab_size's limit; ids above 65535, as Llama 3's 128256, go to uint32 token files).
 * Both kinds: the post_processor's TemplateProcessing (alone or in a Sequence) is read as the ids
 * before and after a sequence (zt_tokenizer_template); encoding never adds them, `tokenize` frames
 * documents with zt_tokenizer_doc_frame. Still not read: Unigram and WordPiece models, other
 * normalizers and pre-tokenizers (see docs/tokenizers.md). */
#include "data/tokenizer_json.h"

#include "core/file.h"
#include "data/bpe_build.h"
#include "data/tokenizer_spm.h"

#include <cjson/cJSON.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *type_of(const cJSON *o) {
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "type");
    return cJSON_IsString(t) ? t->valuestring : "";
}

static bool is_true(const cJSON *o, const char *key) { return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, key)); }

/* A ByteLevel pre-tokenizer: add_prefix_space must be false; *use_regex gets use_regex (default true). */
static int byte_level(const cJSON *o, const char *path, const char *field, bool *use_regex, zt_error *err) {
    if (is_true(o, "add_prefix_space"))
        return zt_error_set(err, ZT_ERR_DATA, "tokenizer.json %s: %s.add_prefix_space true is not supported", path,
                            field);
    const cJSON *u = cJSON_GetObjectItemCaseSensitive(o, "use_regex");
    *use_regex = !cJSON_IsFalse(u);
    return ZT_OK;
}

/* pre_tokenizer -> the pattern (NULL: GPT-2's), through *pattern (points into the JSON). */
static int pre_tokenizer(const cJSON *pt, const char *path, const char **pattern, zt_error *err) {
    bool use_regex = true;
    int rc;
    *pattern = NULL;
    if (!strcmp(type_of(pt), "ByteLevel")) {
        if ((rc = byte_level(pt, path, "pre_tokenizer", &use_regex, err))) return rc;
        if (!use_regex)
            return zt_error_set(err, ZT_ERR_DATA, "tokenizer.json %s: pre_tokenizer ByteLevel with use_regex false "
                                "and no Split is not supported", path);
        return ZT_OK;
    }
    const cJSON *seq = cJSON_GetObjectItemCaseSensitive(pt, "pretokenizers");
    const cJSON *split = cJSON_GetArrayItem(seq, 0), *bl = cJSON_GetArrayItem(seq, 1);
    if (strcmp(type_of(pt), "Sequence") || cJSON_GetArraySize(seq) != 2 || strcmp(type_of(split), "Split") ||
        strcmp(type_of(bl), "ByteLevel"))
        return zt_error_set(err, ZT_ERR_DATA, "tokenizer.json %s: pre_tokenizer of type \"%s\": this reader runs "
                            "ByteLevel, or a Sequence of Split (regex) then ByteLevel", path, type_of(pt));
    const cJSON *pat = cJSON_GetObjectItemCaseSensitive(split, "pattern");
    const cJSON *re = cJSON_GetObjectItemCaseSensitive(pat, "Regex");
    const cJSON *beh = cJSON_GetObjectItemCaseSensitive(split, "behavior");
    if (!cJSON_IsString(re) || !cJSON_IsString(beh) || strcmp(beh->valuestring, "Isolated") || is_true(split, "invert"))
        return zt_error_set(err, ZT_ERR_DATA, "tokenizer.json %s: pre_tokenizer.pretokenizers[0] (Split) needs "
                            "pattern.Regex, behavior \"Isolated\" and invert false", path);
    if ((rc = byte_level(bl, path, "pre_tokenizer.pretokenizers[1]", &use_regex, err))) return rc;
    if (use_regex)
        return zt_error_set(err, ZT_ERR_DATA, "tokenizer.json %s: pre_tokenizer.pretokenizers[1] (ByteLevel) after "
                            "a Split must have use_regex false", path);
    *pattern = re->valuestring;
    return ZT_OK;
}

static int merges(zt_bpe *b, const cJSON *m, const char *path, zt_error *err) {
    if (!cJSON_IsArray(m) || !m->child)
        return zt_error_set(err, ZT_ERR_DATA, "tokenizer.json %s: model.merges is not a non-empty array", path);
    uint32_t rank = 0;
    for (const cJSON *it = m->child; it; it = it->next, rank++) {
        const char *x = NULL, *y = NULL;
        size_t xl = 0, yl = 0;
        if (cJSON_IsString(it)) { /* "a b": exactly one space (pieces never hold one) */
            const char *sp = strchr(it->valuestring, ' ');
            if (sp && !strchr(sp + 1, ' ') && sp > it->valuestring && sp[1])
                x = it->valuestring, xl = (size_t)(sp - x), y = sp + 1, yl = strlen(y);
        } else if (cJSON_GetArraySize(it) == 2 && cJSON_IsString(it->child) && cJSON_IsString(it->child->next)) {
            x = it->child->valuestring, xl = strlen(x), y = it->child->next->valuestring, yl = strlen(y);
        }
        if (!x || !xl || !yl)
            return zt_error_set(err, ZT_ERR_DATA, "tokenizer.json %s: model.merges[%u] is not \"a b\" or [\"a\", \"b\"]",
                                path, rank);
        int rc = zt_bpe_add_merge(b, x, xl, y, yl, rank, "tokenizer.json", path, "model.merges", rank, err);
        if (rc) return rc;
    }
    return ZT_OK;
}

static int added_tokens(zt_bpe *b, const cJSON *at, const char *path, zt_error *err) {
    int i = 0;
    for (const cJSON *t = cJSON_IsArray(at) ? at->child : NULL; t; t = t->next, i++) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(t, "id");
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(t, "content");
        if (!cJSON_IsNumber(id) || !cJSON_IsString(c))
            return zt_error_set(err, ZT_ERR_DATA, "tokenizer.json %s: added_tokens[%d] needs id and content", path, i);
        if (is_true(t, "lstrip") || is_true(t, "rstrip") || is_true(t, "single_word"))
            return zt_error_set(err, ZT_ERR_DATA, "tokenizer.json %s: added_tokens[%d] (\"%s\"): lstrip, rstrip and "
                                "single_word are not supported", path, i, c->valuestring);
        double v = id->valuedouble;
        if (!(v >= 0 && v <= ZT_BPE_MAX_ID) || v != (double)(uint32_t)v)
            return zt_error_set(err, ZT_ERR_DATA, "tokenizer.json %s: added_tokens[%d] (\"%s\"): id %.17g is not an "
                                "integer in 0..%d", path, i, c->valuestring, v, ZT_BPE_MAX_ID);
        int rc = zt_bpe_add_special(b, c->valuestring, strlen(c->valuestring), (uint32_t)v, err);
        if (rc) return zt_error_prefix(err, "tokenizer.json %s: added_tokens[%d]", path, i), rc;
    }
    return ZT_OK;
}

static int build(zt_bpe *b, cJSON *j, const char *path, zt_error *err) {
    cJSON *model = cJSON_GetObjectItemCaseSensitive(j, "model");
    const cJSON *norm = cJSON_GetObjectItemCaseSensitive(j, "normalizer");
    const cJSON *dec = cJSON_GetObjectItemCaseSensitive(j, "decoder");
    const cJSON *pfx = cJSON_GetObjectItemCaseSensitive(model, "continuing_subword_prefix");
    const cJSON *sfx = cJSON_GetObjectItemCaseSensitive(model, "end_of_word_suffix");
    const cJSON *drop = cJSON_GetObjectItemCaseSensitive(model, "dropout");
    if (!cJSON_IsObject(model) || strcmp(type_of(model), "BPE"))
        return zt_error_set(err, ZT_ERR_DATA, "tokenizer.json %s: model.type is \"%s\"; this reader runs BPE", path,
                            type_of(model));
    if ((cJSON_IsString(pfx) && pfx->valuestring[0]) || (cJSON_IsString(sfx) && sfx->valuestring[0]) ||
        (drop && !cJSON_IsNull(drop)) || is_true(model, "byte_fallback"))
        return zt_error_set(err, ZT_ERR_DATA, "tokenizer.json %s: model.continuing_subword_prefix, "
                            "end_of_word_suffix, dropout and byte_fallback are not supported (byte-level BPE only)",
                            path);
    if (norm && !cJSON_IsNull(norm))
        return zt_error_set(err, ZT_ERR_DATA, "tokenizer.json %s: normalizer of type \"%s\" is not supported", path,
                            type_of(norm));
    if (dec && !cJSON_IsNull(dec) && strcmp(type_of(dec), "ByteLevel"))
        return zt_error_set(err, ZT_ERR_DATA, "tokenizer.json %s: decoder of type \"%s\": byte-level BPE decodes with "
                            "ByteLevel", path, type_of(dec));
    const char *pattern = NULL;
    int rc;
    if ((rc = pre_tokenizer(cJSON_GetObjectItemCaseSensitive(j, "pre_tokenizer"), path, &pattern, err)) ||
        (rc = zt_bpe_set_vocab(b, cJSON_GetObjectItemCaseSensitive(model, "vocab"), "tokenizer.json model.vocab in",
                               path, err)) ||
        (rc = merges(b, cJSON_GetObjectItemCaseSensitive(model, "merges"), path, err)) ||
        (rc = added_tokens(b, cJSON_GetObjectItemCaseSensitive(j, "added_tokens"), path, err)))
        return rc;
    zt_bpe_set_ignore_merges(b, is_true(model, "ignore_merges"));
    if ((rc = zt_bpe_set_pattern(b, pattern, err))) zt_error_prefix(err, "tokenizer.json %s: pre_tokenizer", path);
    return rc;
}

/* A file for tokenizer_spm.c: a byte_fallback model, a normalizer, a Metaspace pre-tokenizer, or
 * neither pre-tokenizer nor decoder saying ByteLevel. */
static bool sentencepiece_style(const cJSON *j) {
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(j, "model");
    const cJSON *norm = cJSON_GetObjectItemCaseSensitive(j, "normalizer");
    const cJSON *pt = cJSON_GetObjectItemCaseSensitive(j, "pre_tokenizer");
    const cJSON *dec = cJSON_GetObjectItemCaseSensitive(j, "decoder");
    if (is_true(model, "byte_fallback") || !strcmp(type_of(pt), "Metaspace")) return true;
    if (norm && !cJSON_IsNull(norm) && strcmp(type_of(norm), "NFC") && strcmp(type_of(norm), "NFKC")) return true;
    return (!pt || cJSON_IsNull(pt)) && strcmp(type_of(dec), "ByteLevel");
}

/* post_processor: a TemplateProcessing (alone or in a Sequence, as Llama 3's) gives the ids its
 * "single" template puts before and after the sequence; other post-processors add nothing here. */
static int template_processing(zt_bpe *b, const cJSON *pp, const char *path, zt_error *err) {
    if (!strcmp(type_of(pp), "Sequence")) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(pp, "processors");
        for (const cJSON *it = cJSON_IsArray(list) ? list->child : NULL; it; it = it->next)
            if (!strcmp(type_of(it), "TemplateProcessing")) return template_processing(b, it, path, err);
        return ZT_OK;
    }
    if (strcmp(type_of(pp), "TemplateProcessing")) return ZT_OK;
    const cJSON *single = cJSON_GetObjectItemCaseSensitive(pp, "single");
    const cJSON *specials = cJSON_GetObjectItemCaseSensitive(pp, "special_tokens");
    uint32_t ids[2][ZT_BPE_TEMPLATE_MAX];
    size_t n[2] = {0, 0};
    int side = 0, i = 0;
    if (!cJSON_IsArray(single))
        return zt_error_set(err, ZT_ERR_DATA, "tokenizer.json %s: post_processor (TemplateProcessing) has no single "
                            "template", path);
    for (const cJSON *it = single->child; it; it = it->next, i++) {
        const cJSON *st = cJSON_GetObjectItemCaseSensitive(it, "SpecialToken");
        if (cJSON_GetObjectItemCaseSensitive(it, "Sequence")) {
            side = 1;
            continue;
        }
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(st, "id");
        const cJSON *tok = cJSON_IsString(name) ? cJSON_GetObjectItemCaseSensitive(specials, name->valuestring) : NULL;
        const cJSON *tids = cJSON_GetObjectItemCaseSensitive(tok, "ids");
        if (!cJSON_IsArray(tids))
            return zt_error_set(err, ZT_ERR_DATA, "tokenizer.json %s: post_processor.single[%d] is neither a Sequence "
                                "nor a SpecialToken listed in post_processor.special_tokens with ids", path, i);
        for (const cJSON *v = tids->child; v; v = v->next) {
            if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > ZT_BPE_MAX_ID || n[side] == ZT_BPE_TEMPLATE_MAX)
                return zt_error_set(err, ZT_ERR_DATA, "tokenizer.json %s: post_processor.special_tokens[\"%s\"]: ids "
                                    "must be at most %d ids in 0..%d", path, name->valuestring, ZT_BPE_TEMPLATE_MAX,
                                    ZT_BPE_MAX_ID);
            ids[side][n[side]++] = (uint32_t)v->valuedouble;
        }
    }
    zt_bpe_set_template(b, ids[0], n[0], ids[1], n[1]);
    return ZT_OK;
}

int zt_tokenizer_json_load(zt_bpe **out, const char *path, zt_error *err) {
    *out = NULL;
    char *text;
    size_t len;
    int rc = zt_read_file(path, "tokenizer.json", &text, &len, err);
    if (rc) return rc;
    cJSON *j = cJSON_ParseWithLength(text, len);
    free(text);
    zt_bpe *b = NULL;
    if (!cJSON_IsObject(j)) rc = zt_error_set(err, ZT_ERR_DATA, "tokenizer.json %s: not a JSON object", path);
    if (!rc) rc = zt_bpe_new(&b, err);
    if (!rc && sentencepiece_style(j)) {
        zt_spm *spm = NULL;
        rc = zt_spm_load(&spm, j, path, err);
        if (!rc) zt_bpe_set_spm(b, spm);
    } else if (!rc) {
        rc = build(b, j, path, err);
    }
    if (!rc) rc = template_processing(b, cJSON_GetObjectItemCaseSensitive(j, "post_processor"), path, err);
    cJSON_Delete(j);
    if (rc) {
        zt_bpe_free(b);
        return rc;
    }
    *out = b;
    return ZT_OK;
}

int zt_tokenizer_open(zt_bpe **out, const char *path, zt_error *err) {
    *out = NULL;
    if (path) return zt_tokenizer_json_load(out, path, err);
    char enc[PATH_MAX], voc[PATH_MAX];
    int rc = zt_bpe_default_paths(enc, voc, sizeof enc, err);
    return rc ? rc : zt_bpe_load(out, enc, voc, err);
}

int zt_tokenizer_eot(const zt_bpe *b, uint32_t *id, zt_error *err) {
    static const char *const EOT[] = {"<|endoftext|>", "<|end_of_text|>", "</s>", "<eos>"};
    const zt_spm *spm = zt_bpe_spm(b);
    for (size_t i = 0; spm && i < sizeof EOT / sizeof *EOT; i++) { /* added tokens first: Gemma's "</s>" is text */
        int v = zt_spm_added_id(spm, EOT[i], strlen(EOT[i]));
        if (v >= 0) {
            *id = (uint32_t)v;
            return ZT_OK;
        }
    }
    for (size_t i = 0; i < sizeof EOT / sizeof *EOT; i++) {
        int v = zt_bpe_piece_id(b, EOT[i], strlen(EOT[i]));
        if (v >= 0) {
            *id = (uint32_t)v;
            return ZT_OK;
        }
    }
    return zt_error_set(err, ZT_ERR_DATA, "the tokenizer has no end-of-text token (<|endoftext|>, <|end_of_text|>, "
                        "</s> or <eos>) to separate documents");
}

void zt_tokenizer_template(const zt_bpe *b, const uint32_t **before, size_t *nb, const uint32_t **after, size_t *na) {
    zt_bpe_template(b, before, nb, after, na);
}

void zt_tokenizer_doc_frame(const zt_bpe *b, uint32_t eot, uint32_t *pre, size_t *npre, uint32_t *post, size_t *npost) {
    *npre = *npost = 0;
    if (!zt_bpe_spm(b)) {
        pre[(*npre)++] = eot;
        return;
    }
    const uint32_t *before, *after;
    size_t nb, na;
    zt_bpe_template(b, &before, &nb, &after, &na);
    for (size_t i = 0; i < nb; i++) pre[(*npre)++] = before[i];
    for (size_t i = 0; i < na; i++) post[(*npost)++] = after[i];
    if (!na || after[na - 1] != eot) post[(*npost)++] = eot;
}

int zt_tokenizer_decode_next(const zt_bpe *b, const uint32_t *tokens, size_t n, char **utf8, size_t *len,
                             zt_error *err) {
    const zt_spm *spm = zt_bpe_spm(b);
    return spm ? zt_spm_decode(spm, tokens, n, true, utf8, len, err) : zt_bpe_decode(b, tokens, n, utf8, len, err);
}

int64_t zt_tokenizer_token_id(const zt_bpe *b, const char *content) {
    if (!content || !*content) return -1;
    return zt_bpe_piece_id(b, content, strlen(content));
}

/* Byte-level: each token stands for the bytes of its piece in the (repaired) text, in order. */
static int byte_level_offsets(zt_bpe *b, const char *utf8, size_t len, uint32_t *tokens, size_t n, uint32_t *offsets,
                              zt_error *err) {
    char *fixed = NULL;
    uint32_t *map = NULL;
    size_t flen = 0, V = zt_bpe_vocab_size(b);
    int32_t *plen = malloc(V * sizeof *plen);
    int rc = ZT_OK;
    if (!plen || zt_spm_utf8_repair((const unsigned char *)utf8, len, &fixed, &map, &flen)) {
        rc = zt_error_set(err, ZT_ERR_NOMEM, "no memory for the offsets of %zu bytes", len);
        goto done;
    }
    memset(plen, 0xff, V * sizeof *plen);
    size_t pos = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t t = tokens[i];
        if (t < V && plen[t] < 0) {
            char *piece;
            size_t pl;
            if ((rc = zt_bpe_decode(b, &t, 1, &piece, &pl, err))) goto done;
            free(piece);
            plen[t] = (int32_t)pl;
        }
        offsets[i] = pos < flen ? map[pos] : (uint32_t)len;
        pos += t < V ? (size_t)plen[t] : 0;
    }
done:
    free(plen);
    free(fixed);
    free(map);
    return rc;
}

int zt_bpe_encode_offsets(zt_bpe *bpe, const char *utf8, size_t len, uint32_t **tokens, uint32_t **offsets,
                          size_t *n, zt_error *err) {
    *tokens = NULL;
    *offsets = NULL;
    *n = 0;
    if (len > UINT32_MAX / 4)
        return zt_error_set(err, ZT_ERR_USAGE, "zt_bpe_encode_offsets: %zu bytes is too long for byte offsets", len);
    zt_spm *spm = zt_bpe_spm(bpe);
    if (spm) return zt_spm_encode(spm, utf8, len, tokens, offsets, n, err);
    int rc = zt_bpe_encode(bpe, utf8, len, tokens, n, err);
    if (rc) return rc;
    *offsets = malloc((*n ? *n : 1) * sizeof **offsets);
    if (!*offsets) rc = zt_error_set(err, ZT_ERR_NOMEM, "no memory for %zu offsets", *n);
    else rc = byte_level_offsets(bpe, utf8, len, *tokens, *n, *offsets, err);
    if (rc) {
        free(*tokens);
        free(*offsets);
        *tokens = *offsets = NULL;
        *n = 0;
    }
    return rc;
}
