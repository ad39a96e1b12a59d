/* tokenizer_json.c - a Hugging Face tokenizer.json reader for byte-level BPE.
 *
 * Read:
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
 * (model.vocab_size's limit; ids above 65535, as Llama 3's 128256, go to uint32 token files). The
 * post_processor (BOS insertion) is not applied: `tokenize` frames documents itself. */
#include "data/tokenizer_json.h"

#include "core/file.h"
#include "data/bpe_build.h"

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
    if (!rc) rc = build(b, j, path, err);
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
    static const char *const EOT[] = {"<|endoftext|>", "<|end_of_text|>", "</s>"};
    for (size_t i = 0; i < sizeof EOT / sizeof *EOT; i++) {
        int v = zt_bpe_piece_id(b, EOT[i], strlen(EOT[i]));
        if (v >= 0) {
            *id = (uint32_t)v;
            return ZT_OK;
        }
    }
    return zt_error_set(err, ZT_ERR_DATA, "the tokenizer has no end-of-text token (<|endoftext|>, <|end_of_text|> "
                        "or </s>) to separate documents");
}
