/* gguf_vocab.c - the tokenizer and chat template as GGUF metadata (tokenizer.ggml.*,
 * tokenizer.chat_template), from Hugging Face files, as llama.cpp's convert_hf_to_gguf.py writes
 * them:
 *   - a byte-level BPE tokenizer.json (GPT-2, Llama 3): tokenizer.ggml.model "gpt2", pre "gpt-2"
 *     (a plain ByteLevel pre-tokenizer) or "llama-bpe" (Llama 3's Split regex), tokens by id, their
 *     types (1 normal, 3 control for special added tokens, 4 user-defined for other added ones,
 *     5 unused for padding up to the model's vocabulary), merges as "a b";
 *   - a SentencePiece-style BPE tokenizer.json (Llama 2, Mistral: Metaspace "▁", byte fallback):
 *     model "llama", tokens, types (2 unknown, 3 control, 6 byte for <0xXX>), scores: the piece a
 *     merge of rank r makes scores -r (llama.cpp's SentencePiece tokenizer merges the best score
 *     first, which is the merge order), 0 for pieces no merge makes; add_space_prefix from the
 *     normalizer's Prepend("▁") or Metaspace's prepend_scheme;
 *   - bos/eos/unknown ids: tokenizer_config.json's bos_token/eos_token when given, else the usual
 *     contents (<|endoftext|>, <s>, </s>, <|begin_of_text|>, <|end_of_text|>); add_bos_token from
 *     tokenizer_config.json, else true for SentencePiece-style, false for byte-level;
 *   - tokenizer.chat_template: tokenizer_config.json's chat_template or a .jinja file's text. */
#include "ckpt/gguf.h"

#include "core/file.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { TT_NORMAL = 1, TT_UNKNOWN = 2, TT_CONTROL = 3, TT_USER = 4, TT_UNUSED = 5, TT_BYTE = 6 };

typedef struct vocab_files {
    const char *tok_path, *cfg_path, *jinja_path;
    cJSON *tok, *cfg;
    char *jinja;
} vocab_files;

/* a token field of tokenizer_config.json: "content" or {"content": ...} */
static const char *cfg_token(const cJSON *cfg, const char *field) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, field);
    if (cJSON_IsObject(v)) v = cJSON_GetObjectItemCaseSensitive(v, "content");
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* whether a pre-tokenizer / normalizer / decoder tree has a node of that type (Sequence nested) */
static const cJSON *has_type(const cJSON *node, const char *type) {
    if (!cJSON_IsObject(node)) return NULL;
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(node, "type");
    if (cJSON_IsString(t) && !strcmp(t->valuestring, type)) return node;
    static const char *const kids[] = {"pretokenizers", "normalizers", "decoders"};
    for (int k = 0; k < 3; k++) {
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(node, kids[k]), *c;
        cJSON_ArrayForEach(c, a) {
            const cJSON *r = has_type(c, type);
            if (r) return r;
        }
    }
    return NULL;
}

static int read_json(const char *path, cJSON **out, zt_error *err) {
    char *buf;
    size_t len;
    int rc = zt_read_file(path, "tokenizer file", &buf, &len, err);
    if (rc) return rc;
    *out = cJSON_ParseWithLength(buf, len);
    free(buf);
    if (!cJSON_IsObject(*out)) return zt_error_set(err, ZT_ERR_DATA, "%s: not a JSON object", path);
    return ZT_OK;
}

/* sorts the files given by what they are */
static int open_files(vocab_files *v, const char *const *files, int n, zt_error *err) {
    for (int i = 0; i < n; i++) {
        size_t l = strlen(files[i]);
        if (l > 6 && !strcmp(files[i] + l - 6, ".jinja")) {
            size_t len;
            free(v->jinja);
            v->jinja_path = files[i];
            int rc = zt_read_file(files[i], "chat template", &v->jinja, &len, err);
            if (rc) return rc;
            continue;
        }
        cJSON *j = NULL;
        int rc = read_json(files[i], &j, err);
        if (rc) {
            cJSON_Delete(j);
            return rc;
        }
        if (cJSON_GetObjectItemCaseSensitive(j, "model")) {
            cJSON_Delete(v->tok);
            v->tok = j;
            v->tok_path = files[i];
        } else {
            cJSON_Delete(v->cfg);
            v->cfg = j;
            v->cfg_path = files[i];
        }
    }
    return ZT_OK;
}

/* id of the added token or vocabulary piece with this content; -1 when none */
static int token_id(const cJSON *tok, const char *content) {
    if (!content) return -1;
    const cJSON *a, *added = cJSON_GetObjectItemCaseSensitive(tok, "added_tokens");
    cJSON_ArrayForEach(a, added) {
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(a, "content"), *id = cJSON_GetObjectItemCaseSensitive(a, "id");
        if (cJSON_IsString(c) && cJSON_IsNumber(id) && !strcmp(c->valuestring, content)) return id->valueint;
    }
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(tok, "model"), "vocab");
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(vocab, content);
    return cJSON_IsNumber(id) ? id->valueint : -1;
}

/* the first of the candidates' ids that exists (the config's own token first) */
static int special_id(const vocab_files *v, const char *field, const char *const *cand) {
    int id = token_id(v->tok, cfg_token(v->cfg, field));
    for (int i = 0; id < 0 && cand[i]; i++) id = token_id(v->tok, cand[i]);
    return id;
}

/* merge i as its two parts ("a b" or ["a", "b"]) */
static bool merge_parts(const cJSON *mg, const char **a, size_t *al, const char **b) {
    if (cJSON_IsString(mg)) {
        const char *sp = strchr(mg->valuestring, ' ');
        if (!sp) return false;
        *a = mg->valuestring;
        *al = (size_t)(sp - mg->valuestring);
        *b = sp + 1;
        return true;
    }
    if (cJSON_GetArraySize(mg) != 2 || !cJSON_IsString(cJSON_GetArrayItem(mg, 0)) ||
        !cJSON_IsString(cJSON_GetArrayItem(mg, 1)))
        return false;
    *a = cJSON_GetArrayItem(mg, 0)->valuestring;
    *al = strlen(*a);
    *b = cJSON_GetArrayItem(mg, 1)->valuestring;
    return true;
}

/* the vocabulary's pieces sorted by text, for the merges' lookups (cJSON's are linear) */
typedef struct piece {
    const char *text;
    int id;
} piece;

static int piece_cmp(const void *a, const void *b) { return strcmp(((const piece *)a)->text, ((const piece *)b)->text); }

static int piece_find(const piece *v, size_t n, const char *text) {
    piece key = {text, 0};
    const piece *hit = bsearch(&key, v, n, sizeof *v, piece_cmp);
    return hit ? hit->id : -1;
}

static int write_tokenizer(zt_gguf_kv *kv, const vocab_files *v, int vocab_size, zt_error *err) {
    const char *path = v->tok_path;
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(v->tok, "model");
    const cJSON *mtype = cJSON_GetObjectItemCaseSensitive(model, "type");
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    const cJSON *merges = cJSON_GetObjectItemCaseSensitive(model, "merges");
    if (!cJSON_IsString(mtype) || strcmp(mtype->valuestring, "BPE"))
        return zt_error_set(err, ZT_ERR_DATA, "%s: field model.type is %s; GGUF export writes BPE tokenizers", path,
                            cJSON_IsString(mtype) ? mtype->valuestring : "missing");
    if (!cJSON_IsObject(vocab) || !cJSON_IsArray(merges))
        return zt_error_set(err, ZT_ERR_DATA, "%s: field model.%s is missing", path,
                            cJSON_IsObject(vocab) ? "merges" : "vocab");
    const cJSON *pre = cJSON_GetObjectItemCaseSensitive(v->tok, "pre_tokenizer");
    const cJSON *norm = cJSON_GetObjectItemCaseSensitive(v->tok, "normalizer");
    bool byte_level = has_type(pre, "ByteLevel") != NULL;
    const cJSON *meta = has_type(pre, "Metaspace");
    if (!byte_level && !meta && !has_type(norm, "Prepend") && !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(model, "byte_fallback")))
        return zt_error_set(err, ZT_ERR_DATA, "%s: field pre_tokenizer: neither ByteLevel (GPT-2, Llama 3) nor "
                            "SentencePiece-style (Metaspace, Prepend, byte_fallback)", path);
    const char *pre_name = "default";
    if (byte_level) {
        const cJSON *split = has_type(pre, "Split");
        const cJSON *pat = split ? cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(split, "pattern"), "Regex")
                                 : NULL;
        if (!split) pre_name = "gpt-2";
        else if (cJSON_IsString(pat) && strstr(pat->valuestring, "(?i:'s|'t|'re|'ve|'m|'ll|'d)")) pre_name = "llama-bpe";
        else
            return zt_error_set(err, ZT_ERR_DATA, "%s: field pre_tokenizer: a Split pattern llama.cpp knows is GPT-2's "
                                "or Llama 3's", path);
    }
    /* the tokens by id: the vocabulary, then the added tokens */
    int n = vocab_size;
    const char **text = calloc((size_t)n, sizeof *text);
    int32_t *type = calloc((size_t)n, sizeof *type);
    float *score = calloc((size_t)n, sizeof *score);
    int rc = ZT_OK;
    if (!text || !type || !score) rc = zt_error_set(err, ZT_ERR_NOMEM, "%s: out of memory", path);
    const cJSON *it;
    cJSON_ArrayForEach(it, vocab) {
        if (rc) break;
        if (!cJSON_IsNumber(it) || it->valueint < 0 || it->valueint >= n)
            rc = zt_error_set(err, ZT_ERR_DATA, "%s: field model.vocab: token \"%s\" has id %g, the model's vocabulary "
                              "is %d", path, it->string, cJSON_IsNumber(it) ? it->valuedouble : -1.0, n);
        else {
            text[it->valueint] = it->string;
            size_t l = strlen(it->string);
            type[it->valueint] = !byte_level && l == 6 && !strncmp(it->string, "<0x", 3) && it->string[5] == '>' ? TT_BYTE
                                                                                                               : TT_NORMAL;
        }
    }
    const cJSON *added = cJSON_GetObjectItemCaseSensitive(v->tok, "added_tokens");
    cJSON_ArrayForEach(it, added) {
        if (rc) break;
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(it, "content"), *id = cJSON_GetObjectItemCaseSensitive(it, "id");
        if (!cJSON_IsString(c) || !cJSON_IsNumber(id) || id->valueint < 0 || id->valueint >= n) {
            rc = zt_error_set(err, ZT_ERR_DATA, "%s: field added_tokens: an entry without content or with an id "
                              "outside the model's vocabulary of %d", path, n);
            break;
        }
        text[id->valueint] = c->valuestring;
        type[id->valueint] = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(it, "special")) ? TT_CONTROL : TT_USER;
    }
    const cJSON *unk = cJSON_GetObjectItemCaseSensitive(model, "unk_token");
    int unk_id = cJSON_IsString(unk) ? token_id(v->tok, unk->valuestring) : -1;
    if (!rc && unk_id >= 0) type[unk_id] = TT_UNKNOWN;
    int rank = 0;
    size_t np = 0;
    piece *sorted = byte_level ? NULL : malloc((size_t)cJSON_GetArraySize(vocab) * sizeof *sorted + 1);
    if (!byte_level && !sorted && !rc) rc = zt_error_set(err, ZT_ERR_NOMEM, "%s: out of memory", path);
    const cJSON *pieces = sorted && !rc ? vocab : NULL;
    cJSON_ArrayForEach(it, pieces) sorted[np++] = (piece){it->string, it->valueint};
    if (sorted) qsort(sorted, np, sizeof *sorted, piece_cmp);
    cJSON_ArrayForEach(it, merges) { /* SentencePiece-style: scores from the merge order */
        if (rc || byte_level) break;
        const char *a, *b;
        size_t al;
        char buf[512];
        if (!merge_parts(it, &a, &al, &b) || al + strlen(b) >= sizeof buf) {
            rc = zt_error_set(err, ZT_ERR_DATA, "%s: field model.merges: entry %d is not two pieces", path, rank);
            break;
        }
        memcpy(buf, a, al);
        strcpy(buf + al, b);
        int id = piece_find(sorted, np, buf);
        if (id >= 0 && id < n && score[id] == 0) score[id] = -(float)(rank + 1);
        rank++;
    }
    free(sorted);
    if (rc) goto out;
    zt_gguf_kv_str(kv, "tokenizer.ggml.model", byte_level ? "gpt2" : "llama");
    zt_gguf_kv_str(kv, "tokenizer.ggml.pre", pre_name);
    zt_gguf_kv_array(kv, "tokenizer.ggml.tokens", ZT_GGUF_KV_STRING, (uint64_t)n);
    for (int i = 0; i < n; i++) {
        char pad[32];
        if (!text[i]) {
            snprintf(pad, sizeof pad, "[PAD%d]", i);
            type[i] = TT_UNUSED;
        }
        zt_gguf_kv_str_item(kv, text[i] ? text[i] : pad, strlen(text[i] ? text[i] : pad));
    }
    zt_gguf_kv_array(kv, "tokenizer.ggml.token_type", ZT_GGUF_KV_I32, (uint64_t)n);
    for (int i = 0; i < n; i++) zt_gguf_kv_i32_item(kv, type[i]);
    if (byte_level) {
        zt_gguf_kv_array(kv, "tokenizer.ggml.merges", ZT_GGUF_KV_STRING, (uint64_t)cJSON_GetArraySize(merges));
        cJSON_ArrayForEach(it, merges) {
            const char *a, *b;
            size_t al;
            char buf[1024];
            if (!merge_parts(it, &a, &al, &b)) a = b = "", al = 0;
            int l = snprintf(buf, sizeof buf, "%.*s %s", (int)al, a, b);
            zt_gguf_kv_str_item(kv, buf, (size_t)l < sizeof buf ? (size_t)l : sizeof buf - 1);
        }
    } else {
        zt_gguf_kv_array(kv, "tokenizer.ggml.scores", ZT_GGUF_KV_F32, (uint64_t)n);
        for (int i = 0; i < n; i++) zt_gguf_kv_f32_item(kv, score[i]);
        const cJSON *ps = meta ? cJSON_GetObjectItemCaseSensitive(meta, "prepend_scheme") : NULL;
        const cJSON *aps = meta ? cJSON_GetObjectItemCaseSensitive(meta, "add_prefix_space") : NULL;
        bool space = has_type(norm, "Prepend") || (meta && (cJSON_IsString(ps) ? strcmp(ps->valuestring, "never") != 0
                                                                               : !cJSON_IsFalse(aps)));
        zt_gguf_kv_bool(kv, "tokenizer.ggml.add_space_prefix", space);
    }
    static const char *const BOS[] = {"<|begin_of_text|>", "<s>", "<|endoftext|>", "<bos>", NULL};
    static const char *const EOS[] = {"<|end_of_text|>", "</s>", "<|endoftext|>", "<eos>", NULL};
    int bos = special_id(v, "bos_token", BOS), eos = special_id(v, "eos_token", EOS);
    if (bos >= 0) zt_gguf_kv_u32(kv, "tokenizer.ggml.bos_token_id", (uint32_t)bos);
    if (eos >= 0) zt_gguf_kv_u32(kv, "tokenizer.ggml.eos_token_id", (uint32_t)eos);
    if (unk_id >= 0) zt_gguf_kv_u32(kv, "tokenizer.ggml.unknown_token_id", (uint32_t)unk_id);
    const cJSON *abos = cJSON_GetObjectItemCaseSensitive(v->cfg, "add_bos_token");
    zt_gguf_kv_bool(kv, "tokenizer.ggml.add_bos_token", cJSON_IsBool(abos) ? cJSON_IsTrue(abos) : !byte_level);
    zt_gguf_kv_bool(kv, "tokenizer.ggml.add_eos_token", false);
out:
    free(text);
    free(type);
    free(score);
    return rc;
}

int zt_gguf_vocab(zt_gguf_kv *kv, const char *const *files, int n_files, int vocab_size, zt_error *err) {
    vocab_files v = {0};
    int rc = open_files(&v, files, n_files, err);
    if (!rc && !v.tok)
        rc = zt_error_set(err, ZT_ERR_USAGE, "no tokenizer.json among the --tokenizer files: llama.cpp loads no GGUF "
                          "without tokenizer.ggml.model");
    if (!rc) rc = write_tokenizer(kv, &v, vocab_size, err);
    if (!rc && (v.cfg || v.jinja)) {
        const cJSON *ct = cJSON_GetObjectItemCaseSensitive(v.cfg, "chat_template");
        const char *tmpl = v.jinja;
        if (!tmpl && cJSON_IsString(ct)) tmpl = ct->valuestring;
        const cJSON *named;
        const cJSON *list = cJSON_IsArray(ct) && !tmpl ? ct : NULL;
        cJSON_ArrayForEach(named, list) { /* [{"name", "template"}]: the default */
            const cJSON *nm = cJSON_GetObjectItemCaseSensitive(named, "name");
            const cJSON *tp = cJSON_GetObjectItemCaseSensitive(named, "template");
            if (cJSON_IsString(nm) && !strcmp(nm->valuestring, "default") && cJSON_IsString(tp)) tmpl = tp->valuestring;
        }
        if (ct && !tmpl)
            rc = zt_error_set(err, ZT_ERR_DATA, "%s: field chat_template is neither a string nor a list with a "
                              "\"default\" template", v.cfg_path);
        else if (tmpl)
            zt_gguf_kv_str(kv, "tokenizer.chat_template", tmpl);
    }
    cJSON_Delete(v.tok);
    cJSON_Delete(v.cfg);
    free(v.jinja);
    return rc;
}
