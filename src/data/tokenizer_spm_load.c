/* tokenizer_spm_load.c - reads a SentencePiece-style tokenizer.json (what tokenizer_spm.c lists as
 * read) into a zt_spm, refusing with ZT_ERR_DATA, naming the field, whatever it would not run as the
 * tokenizers library does: an unknown type or option of the model, normalizer, pre-tokenizer or
 * decoder, a Replace with a Regex pattern, merges whose pieces or result the vocabulary lacks,
 * byte_fallback without <0xNN> pieces, an unk_token the vocabulary lacks, ids above ZT_BPE_MAX_ID. */
#include "data/tokenizer_spm_internal.h"

#include "data/bpe.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *type_of(const cJSON *o) {
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "type");
    return cJSON_IsString(t) ? t->valuestring : "";
}

static const cJSON *item(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k); }

static bool is_true(const cJSON *o, const char *k) { return cJSON_IsTrue(item(o, k)); }

/* Every key of o must be one of the NULL-terminated keys; else ZT_ERR_DATA naming field.key. */
static int only_keys(const cJSON *o, const char *const *keys, const char *path, const char *field, zt_error *err) {
    for (const cJSON *it = o ? o->child : NULL; it; it = it->next) {
        bool known = false;
        for (int i = 0; keys[i] && !known; i++) known = !strcmp(it->string, keys[i]);
        if (!known)
            return zt_error_set(err, ZT_ERR_DATA, "tokenizer.json %s: %s.%s is an option this reader does not know",
                                path, field, it->string);
    }
    return ZT_OK;
}

static char *dup_n(const char *p, size_t n) {
    char *c = malloc(n + 1);
    if (c) memcpy(c, p, n), c[n] = 0;
    return c;
}

/* A string field that must be present: *out points into the JSON. */
static int string_field(const cJSON *o, const char *k, const char *path, const char *field, bool nonempty,
                        const char **out, zt_error *err) {
    const cJSON *v = item(o, k);
    if (!cJSON_IsString(v) || (nonempty && !v->valuestring[0]))
        return zt_error_set(err, ZT_ERR_DATA, "tokenizer.json %s: %s.%s must be a%s string", path, field, k,
                            nonempty ? " non-empty" : "");
    *out = v->valuestring;
    return ZT_OK;
}

/* prepend_scheme ("first", "always", "never"), or the older add_prefix_space (true: always). */
static int prepend_scheme(const cJSON *o, const char *path, const char *field, int *out, zt_error *err) {
    const cJSON *ps = item(o, "prepend_scheme"), *aps = item(o, "add_prefix_space");
    if (!ps) {
        *out = aps && !cJSON_IsTrue(aps) ? PREPEND_NEVER : PREPEND_ALWAYS;
        return aps && !cJSON_IsBool(aps) ? zt_error_set(err, ZT_ERR_DATA, "tokenizer.json %s: %s.add_prefix_space "
                                                        "must be true or false", path, field) : ZT_OK;
    }
    const char *v = cJSON_IsString(ps) ? ps->valuestring : "";
    *out = !strcmp(v, "first") ? PREPEND_FIRST : !strcmp(v, "always") ? PREPEND_ALWAYS : !strcmp(v, "never") ? PREPEND_NEVER : -1;
    if (*out < 0)
        return zt_error_set(err, ZT_ERR_DATA, "tokenizer.json %s: %s.prepend_scheme \"%s\" is not first, always or "
                            "never", path, field, v);
    return ZT_OK;
}

/* A String pattern of a Replace (normalizer or decoder); Regex patterns are refused. */
static int replace_step(const cJSON *o, const char *path, const char *field, spm_step *st, zt_error *err) {
    static const char *const keys[] = {"type", "pattern", "content", NULL};
    const cJSON *pat = item(o, "pattern"), *str = item(pat, "String");
    const char *content = NULL;
    int rc = only_keys(o, keys, path, field, err);
    if (rc) return rc;
    if (!cJSON_IsString(str) || !str->valuestring[0])
        return zt_error_set(err, ZT_ERR_DATA, "tokenizer.json %s: %s (Replace) needs pattern.String, a non-empty "
                            "string (a Regex pattern is not supported)", path, field);
    if ((rc = string_field(o, "content", path, field, false, &content, err))) return rc;
    st->kind = STEP_REPLACE;
    st->al = strlen(str->valuestring), st->bl = strlen(content);
    st->a = dup_n(str->valuestring, st->al), st->b = dup_n(content, st->bl);
    return st->a && st->b ? ZT_OK : zt_error_set(err, ZT_ERR_NOMEM, "out of memory");
}

/* One normalizer: Prepend or Replace. */
static int norm_step(zt_spm *s, const cJSON *o, const char *path, const char *field, zt_error *err) {
    if (s->n_norm == SPM_MAX_STEPS)
        return zt_error_set(err, ZT_ERR_DATA, "tokenizer.json %s: normalizer has more than %d steps", path, SPM_MAX_STEPS);
    spm_step *st = &s->norm[s->n_norm++];
    const char *t = type_of(o);
    if (!strcmp(t, "Replace")) return replace_step(o, path, field, st, err);
    if (strcmp(t, "Prepend"))
        return zt_error_set(err, ZT_ERR_DATA, "tokenizer.json %s: %s of type \"%s\" is not supported (this reader "
                            "runs Prepend and Replace, alone or in a Sequence)", path, field, t);
    static const char *const keys[] = {"type", "prepend", NULL};
    const char *p = NULL;
    int rc = only_keys(o, keys, path, field, err);
    if (rc || (rc = string_field(o, "prepend", path, field, true, &p, err))) return rc;
    st->kind = STEP_PREPEND;
    st->al = strlen(p);
    st->a = dup_n(p, st->al);
    return st->a ? ZT_OK : zt_error_set(err, ZT_ERR_NOMEM, "out of memory");
}

static int normalizer(zt_spm *s, const cJSON *n, const char *path, zt_error *err) {
    if (!n || cJSON_IsNull(n)) return ZT_OK;
    if (strcmp(type_of(n), "Sequence")) return norm_step(s, n, path, "normalizer", err);
    const cJSON *list = item(n, "normalizers");
    if (!cJSON_IsArray(list))
        return zt_error_set(err, ZT_ERR_DATA, "tokenizer.json %s: normalizer (Sequence) needs a normalizers array", path);
    int i = 0, rc;
    for (const cJSON *it = list->child; it; it = it->next, i++) {
        char field[64];
        snprintf(field, sizeof field, "normalizer.normalizers[%d]", i);
        if ((rc = norm_step(s, it, path, field, err))) return rc;
    }
    return ZT_OK;
}

static int pre_tokenizer(zt_spm *s, const cJSON *p, const char *path, zt_error *err) {
    if (!p || cJSON_IsNull(p)) return ZT_OK;
    if (strcmp(type_of(p), "Metaspace"))
        return zt_error_set(err, ZT_ERR_DATA, "tokenizer.json %s: pre_tokenizer of type \"%s\" is not supported "
                            "with SentencePiece-style BPE (this reader runs Metaspace, or none)", path, type_of(p));
    static const char *const keys[] = {"type", "replacement", "prepend_scheme", "split", "add_prefix_space",
                                       "str_rep", NULL};
    const char *r = NULL;
    const cJSON *split = item(p, "split");
    int rc = only_keys(p, keys, path, "pre_tokenizer", err);
    if (rc || (rc = string_field(p, "replacement", path, "pre_tokenizer", true, &r, err)) ||
        (rc = prepend_scheme(p, path, "pre_tokenizer", &s->ms_prepend, err)))
        return rc;
    if (split && !cJSON_IsBool(split))
        return zt_error_set(err, ZT_ERR_DATA, "tokenizer.json %s: pre_tokenizer.split must be true or false", path);
    s->metaspace = true;
    s->ms_split = !split || cJSON_IsTrue(split);
    s->rep_len = strlen(r);
    s->rep = dup_n(r, s->rep_len);
    return s->rep ? ZT_OK : zt_error_set(err, ZT_ERR_NOMEM, "out of memory");
}

static int dec_step(zt_spm *s, const cJSON *o, const char *path, const char *field, zt_error *err) {
    if (s->n_dec == SPM_MAX_STEPS)
        return zt_error_set(err, ZT_ERR_DATA, "tokenizer.json %s: decoder has more than %d steps", path, SPM_MAX_STEPS);
    spm_step *st = &s->dec[s->n_dec++];
    const char *t = type_of(o), *c = NULL;
    int rc;
    if (!strcmp(t, "Replace")) return replace_step(o, path, field, st, err);
    if (!strcmp(t, "ByteFallback") || !strcmp(t, "Fuse")) {
        static const char *const keys[] = {"type", NULL};
        st->kind = !strcmp(t, "Fuse") ? STEP_FUSE : STEP_BYTE_FALLBACK;
        return only_keys(o, keys, path, field, err);
    }
    if (!strcmp(t, "Strip")) {
        static const char *const keys[] = {"type", "content", "start", "stop", NULL};
        const cJSON *a = item(o, "start"), *b = item(o, "stop");
        if ((rc = only_keys(o, keys, path, field, err)) || (rc = string_field(o, "content", path, field, true, &c, err)))
            return rc;
        if (!cJSON_IsNumber(a) || !cJSON_IsNumber(b) || a->valuedouble < 0 || b->valuedouble < 0 ||
            a->valuedouble > 64 || b->valuedouble > 64)
            return zt_error_set(err, ZT_ERR_DATA, "tokenizer.json %s: %s (Strip) needs start and stop in 0..64", path,
                                field);
        st->kind = STEP_STRIP;
        st->start = a->valueint, st->stop = b->valueint;
    } else if (!strcmp(t, "Metaspace")) {
        static const char *const keys[] = {"type", "replacement", "prepend_scheme", "split", "add_prefix_space",
                                           "str_rep", NULL};
        if ((rc = only_keys(o, keys, path, field, err)) ||
            (rc = string_field(o, "replacement", path, field, true, &c, err)) ||
            (rc = prepend_scheme(o, path, field, &st->prepend, err)))
            return rc;
        st->kind = STEP_METASPACE;
    } else {
        return zt_error_set(err, ZT_ERR_DATA, "tokenizer.json %s: %s of type \"%s\" is not supported (this reader runs "
                            "Replace, ByteFallback, Fuse, Strip and Metaspace, alone or in a Sequence)", path, field, t);
    }
    st->al = strlen(c);
    st->a = dup_n(c, st->al);
    return st->a ? ZT_OK : zt_error_set(err, ZT_ERR_NOMEM, "out of memory");
}

static int decoder(zt_spm *s, const cJSON *d, const char *path, zt_error *err) {
    if (!d || cJSON_IsNull(d)) return ZT_OK;
    if (strcmp(type_of(d), "Sequence")) return dec_step(s, d, path, "decoder", err);
    const cJSON *list = item(d, "decoders");
    if (!cJSON_IsArray(list))
        return zt_error_set(err, ZT_ERR_DATA, "tokenizer.json %s: decoder (Sequence) needs a decoders array", path);
    int i = 0, rc;
    for (const cJSON *it = list->child; it; it = it->next, i++) {
        char field[64];
        snprintf(field, sizeof field, "decoder.decoders[%d]", i);
        if ((rc = dec_step(s, it, path, field, err))) return rc;
    }
    return ZT_OK;
}

/* An id in 0..ZT_BPE_MAX_ID. */
static bool good_id(const cJSON *v) {
    return cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble <= ZT_BPE_MAX_ID &&
           v->valuedouble == floor(v->valuedouble);
}

static int vocab(zt_spm *s, const cJSON *v, const char *path, zt_error *err) {
    if (!cJSON_IsObject(v) || !v->child)
        return zt_error_set(err, ZT_ERR_DATA, "tokenizer.json %s: model.vocab is not a non-empty object of piece -> id",
                            path);
    for (const cJSON *it = v->child; it; it = it->next) {
        if (!good_id(it))
            return zt_error_set(err, ZT_ERR_DATA, "tokenizer.json %s: model.vocab: piece \"%.64s\" has no id in 0..%d",
                                path, it->string, ZT_BPE_MAX_ID);
        size_t n = strlen(it->string);
        if (!n) return zt_error_set(err, ZT_ERR_DATA, "tokenizer.json %s: model.vocab has an empty piece", path);
        if (zt_spm_vput(s, it->string, n, (uint32_t)it->valuedouble))
            return zt_error_set(err, ZT_ERR_NOMEM, "tokenizer.json %s: out of memory", path);
        int b = n == 6 && !strncmp(it->string, "<0x", 3) && it->string[5] == '>' ? 0 : -1;
        for (int k = 3; b >= 0 && k < 5; k++) { /* "<0x%02X>": the library looks up upper-case hex */
            char c = it->string[k];
            b = c >= '0' && c <= '9' ? b * 16 + c - '0' : c >= 'A' && c <= 'F' ? b * 16 + c - 'A' + 10 : -1;
        }
        if (b >= 0) s->byte_id[b] = (int32_t)it->valuedouble;
    }
    return ZT_OK;
}

static int merges(zt_spm *s, const cJSON *m, const char *path, zt_error *err) {
    if (!cJSON_IsArray(m))
        return zt_error_set(err, ZT_ERR_DATA, "tokenizer.json %s: model.merges is not an array", path);
    uint32_t rank = 0;
    char *buf = NULL;
    size_t cap = 0;
    int rc = ZT_OK;
    for (const cJSON *it = m->child; it && !rc; it = it->next, rank++) {
        const char *x = NULL, *y = NULL;
        size_t xl = 0, yl = 0;
        if (cJSON_IsString(it)) { /* "a b": exactly one space (pieces hold "▁", never a space) */
            const char *sp = strchr(it->valuestring, ' ');
            if (sp && !strchr(sp + 1, ' ')) x = it->valuestring, xl = (size_t)(sp - x), y = sp + 1, yl = strlen(y);
        } else if (cJSON_GetArraySize(it) == 2 && cJSON_IsString(it->child) && cJSON_IsString(it->child->next)) {
            x = it->child->valuestring, xl = strlen(x), y = it->child->next->valuestring, yl = strlen(y);
        }
        if (!x || !xl || !yl) {
            rc = zt_error_set(err, ZT_ERR_DATA, "tokenizer.json %s: model.merges[%u] is not \"a b\" or [\"a\", \"b\"] "
                              "(two non-empty pieces)", path, rank);
            break;
        }
        if (xl + yl > cap) {
            char *nb = realloc(buf, cap = 2 * (xl + yl));
            if (!nb) {
                rc = zt_error_set(err, ZT_ERR_NOMEM, "out of memory");
                break;
            }
            buf = nb;
        }
        memcpy(buf, x, xl);
        memcpy(buf + xl, y, yl);
        const spm_slot *a = zt_spm_vfind(s, x, xl), *b = zt_spm_vfind(s, y, yl), *ab = zt_spm_vfind(s, buf, xl + yl);
        if (!a || !b || !ab)
            rc = zt_error_set(err, ZT_ERR_DATA, "tokenizer.json %s: model.merges[%u] (\"%.*s\" \"%.*s\"): %s is not in "
                              "model.vocab", path, rank, (int)xl, x, (int)yl, y,
                              !a ? "the first piece" : !b ? "the second piece" : "the merged piece");
        else if (zt_spm_mput(s, a->id, b->id, rank, ab->id))
            rc = zt_error_set(err, ZT_ERR_NOMEM, "out of memory");
    }
    free(buf);
    return rc;
}

static int model(zt_spm *s, const cJSON *m, const char *path, zt_error *err) {
    static const char *const keys[] = {"type", "dropout", "unk_token", "continuing_subword_prefix", "end_of_word_suffix",
                                       "fuse_unk", "byte_fallback", "ignore_merges", "vocab", "merges", NULL};
    if (!cJSON_IsObject(m) || strcmp(type_of(m), "BPE"))
        return zt_error_set(err, ZT_ERR_DATA, "tokenizer.json %s: model.type is \"%s\"; this reader runs BPE", path,
                            type_of(m));
    const cJSON *pfx = item(m, "continuing_subword_prefix"), *sfx = item(m, "end_of_word_suffix");
    const cJSON *drop = item(m, "dropout"), *unk = item(m, "unk_token");
    int rc = only_keys(m, keys, path, "model", err);
    if (rc) return rc;
    if ((cJSON_IsString(pfx) && pfx->valuestring[0]) || (cJSON_IsString(sfx) && sfx->valuestring[0]) ||
        (drop && !cJSON_IsNull(drop)))
        return zt_error_set(err, ZT_ERR_DATA, "tokenizer.json %s: model.continuing_subword_prefix, end_of_word_suffix "
                            "and dropout are not supported", path);
    for (int i = 0; i < 256; i++) s->byte_id[i] = -1;
    if ((rc = vocab(s, item(m, "vocab"), path, err)) || (rc = merges(s, item(m, "merges"), path, err))) return rc;
    s->byte_fallback = is_true(m, "byte_fallback");
    s->fuse_unk = is_true(m, "fuse_unk");
    s->ignore_merges = is_true(m, "ignore_merges");
    int nbytes = 0;
    for (int i = 0; i < 256; i++) nbytes += s->byte_id[i] >= 0;
    if (s->byte_fallback && !nbytes)
        return zt_error_set(err, ZT_ERR_DATA, "tokenizer.json %s: model.byte_fallback is true but model.vocab has "
                            "no byte pieces <0x00> .. <0xFF>", path);
    s->unk_id = -1;
    if (unk && !cJSON_IsNull(unk)) {
        const spm_slot *u = cJSON_IsString(unk) ? zt_spm_vfind(s, unk->valuestring, strlen(unk->valuestring)) : NULL;
        if (!u)
            return zt_error_set(err, ZT_ERR_DATA, "tokenizer.json %s: model.unk_token %s is not a piece of model.vocab",
                                path, cJSON_IsString(unk) ? unk->valuestring : "(not a string)");
        s->unk_id = u->id;
    }
    return ZT_OK;
}

static int added_tokens(zt_spm *s, const cJSON *at, const char *path, zt_error *err) {
    static const char *const keys[] = {"id", "content", "single_word", "lstrip", "rstrip", "normalized", "special",
                                       NULL};
    int n = cJSON_IsArray(at) ? cJSON_GetArraySize(at) : 0, i = 0, rc;
    if (at && !cJSON_IsNull(at) && !cJSON_IsArray(at))
        return zt_error_set(err, ZT_ERR_DATA, "tokenizer.json %s: added_tokens is not an array", path);
    s->added = calloc((size_t)n + 1, sizeof *s->added);
    s->next = calloc((size_t)n + 1, sizeof *s->next);
    if (!s->added || !s->next) return zt_error_set(err, ZT_ERR_NOMEM, "out of memory");
    for (const cJSON *t = n ? at->child : NULL; t; t = t->next, i++) {
        char field[48];
        snprintf(field, sizeof field, "added_tokens[%d]", i);
        const cJSON *id = item(t, "id"), *c = item(t, "content"), *nz = item(t, "normalized");
        if ((rc = only_keys(t, keys, path, field, err))) return rc;
        if (!cJSON_IsString(c) || !c->valuestring[0] || !good_id(id))
            return zt_error_set(err, ZT_ERR_DATA, "tokenizer.json %s: %s needs a non-empty content and an id in 0..%d",
                                path, field, ZT_BPE_MAX_ID);
        spm_added *a = &s->added[s->n_added++];
        a->len = strlen(c->valuestring);
        a->content = dup_n(c->valuestring, a->len);
        a->id = (uint32_t)id->valuedouble;
        a->lstrip = is_true(t, "lstrip"), a->rstrip = is_true(t, "rstrip"), a->single_word = is_true(t, "single_word");
        a->normalized = nz ? cJSON_IsTrue(nz) : !is_true(t, "special"); /* tokenizers' default */
        if (!a->normalized || !s->n_norm) a->normalized = false; /* nothing to normalize: matched in the raw text */
        if (!a->content || (a->normalized && zt_spm_normalize_string(s, a->content, a->len, &a->norm, &a->norm_len)))
            return zt_error_set(err, ZT_ERR_NOMEM, "out of memory");
        s->n_norm_added += a->normalized;
    }
    return ZT_OK;
}

/* id -> text for decoding: the vocabulary's pieces, then the added tokens' contents over them. */
static int id_table(zt_spm *s, const char *path, zt_error *err) {
    s->n_ids = 0;
    for (size_t i = 0; i < s->vcap; i++)
        if (s->vslots[i].h && s->vslots[i].id + 1 > s->n_ids) s->n_ids = s->vslots[i].id + 1;
    for (int i = 0; i < s->n_added; i++)
        if (s->added[i].id + 1 > s->n_ids) s->n_ids = s->added[i].id + 1;
    s->piece_off = malloc(s->n_ids * sizeof *s->piece_off);
    s->piece_len = malloc(s->n_ids * sizeof *s->piece_len);
    if (!s->piece_off || !s->piece_len) return zt_error_set(err, ZT_ERR_NOMEM, "out of memory");
    memset(s->piece_len, 0xff, s->n_ids * sizeof *s->piece_len);
    for (size_t i = 0; i < s->vcap; i++) {
        const spm_slot *x = &s->vslots[i];
        if (!x->h) continue;
        if (s->piece_len[x->id] != UINT32_MAX)
            return zt_error_set(err, ZT_ERR_DATA, "tokenizer.json %s: model.vocab gives id %u to two pieces (\"%.*s\" "
                                "and \"%.*s\")", path, x->id, (int)s->piece_len[x->id], s->keys + s->piece_off[x->id],
                                (int)x->len, s->keys + x->off);
        s->piece_off[x->id] = x->off, s->piece_len[x->id] = x->len;
    }
    for (int i = 0; i < s->n_added; i++) {
        const spm_added *a = &s->added[i];
        const spm_slot *x = zt_spm_vfind(s, a->content, a->len);
        if (x && x->id == a->id) continue;
        /* the content's text: a key in the arena (vput would make it a vocabulary piece) */
        size_t off = s->keys_len;
        if (s->keys_len + a->len > s->keys_cap) {
            size_t cap = 2 * (s->keys_len + a->len);
            char *k = realloc(s->keys, cap);
            if (!k) return zt_error_set(err, ZT_ERR_NOMEM, "out of memory");
            s->keys = k, s->keys_cap = cap;
        }
        memcpy(s->keys + off, a->content, a->len);
        s->keys_len += a->len;
        s->piece_off[a->id] = (uint32_t)off, s->piece_len[a->id] = (uint32_t)a->len;
    }
    return ZT_OK;
}

int zt_spm_load(zt_spm **out, const cJSON *j, const char *path, zt_error *err) {
    *out = NULL;
    zt_spm *s = calloc(1, sizeof *s);
    if (!s) return zt_error_set(err, ZT_ERR_NOMEM, "no memory for the tokenizer");
    int rc;
    if ((rc = model(s, item(j, "model"), path, err)) || (rc = normalizer(s, item(j, "normalizer"), path, err)) ||
        (rc = pre_tokenizer(s, item(j, "pre_tokenizer"), path, err)) || (rc = decoder(s, item(j, "decoder"), path, err)) ||
        (rc = added_tokens(s, item(j, "added_tokens"), path, err)) || (rc = id_table(s, path, err))) {
        zt_spm_free(s);
        return rc;
    }
    *out = s;
    return ZT_OK;
}
