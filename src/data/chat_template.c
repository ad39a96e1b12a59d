/* chat_template.c - a model's chat template (data/chat_template.h): loaded from a
 * tokenizer_config.json (its chat_template, bos_token, eos_token) or a raw .jinja file, rendered
 * with the variables transformers' apply_chat_template gives (messages, bos_token, eos_token,
 * add_generation_prompt; raise_exception is a global of the interpreter), and the byte spans of the
 * assistant turns by the prefix-difference method: the span of assistant message i is what the
 * rendering of messages[0..i] adds to the rendering of messages[0..i) with the generation prompt.
 * A template whose prefix renderings are not prefixes of the whole is refused (ZT_ERR_DATA naming
 * the message) rather than given wrong spans, unless the caller allows the search
 * (zt_chat_render_spans_search): then such a turn's span is where its content string occurs in the
 * whole text after the previous turn's span, extended over the eos_token when it follows (after
 * blanks), and the turns found so are counted for the caller to say. */
#define _GNU_SOURCE /* memmem */
#include "data/chat_template.h"
#include "core/file.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct zt_chat_template {
    zt_jinja *tpl;
    char *bos, *eos;
    cJSON *extra; /* more variables (tools, ...), or NULL */
};

static char *dup_or_empty(const char *s) { return strdup(s ? s : ""); }

/* bos_token / eos_token: a string, {"content": "..."} (an AddedToken), absent or null. */
static int token_field(const cJSON *cfg, const char *key, const char *path, char **out, zt_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, key);
    const char *s = "";
    if (cJSON_IsString(v)) s = v->valuestring;
    else if (cJSON_IsObject(v)) {
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(v, "content");
        if (!cJSON_IsString(c)) return zt_error_set(err, ZT_ERR_DATA, "%s: %s is an object without a string \"content\"", path, key);
        s = c->valuestring;
    } else if (v && !cJSON_IsNull(v)) return zt_error_set(err, ZT_ERR_DATA, "%s: %s must be a string or {\"content\": ...}", path, key);
    *out = strdup(s);
    return *out ? ZT_OK : zt_error_set(err, ZT_ERR_NOMEM, "no memory for %s", key);
}

int zt_chat_template_load(zt_chat_template **out, const char *path, zt_error *err) {
    *out = NULL;
    char *buf;
    size_t len;
    int rc = zt_read_file(path, "chat template", &buf, &len, err);
    if (rc) return rc;
    zt_chat_template *t = calloc(1, sizeof *t);
    if (!t) {
        free(buf);
        return zt_error_set(err, ZT_ERR_NOMEM, "no memory for a chat template");
    }
    cJSON *cfg = cJSON_ParseWithLength(buf, len);
    if (cJSON_IsObject(cfg)) {
        const cJSON *ct = cJSON_GetObjectItemCaseSensitive(cfg, "chat_template");
        const char *src = NULL;
        if (cJSON_IsString(ct)) src = ct->valuestring;
        else if (cJSON_IsArray(ct)) {
            const cJSON *e;
            cJSON_ArrayForEach(e, ct) {
                const cJSON *nm = cJSON_GetObjectItemCaseSensitive(e, "name"), *tp = cJSON_GetObjectItemCaseSensitive(e, "template");
                if (cJSON_IsString(nm) && !strcmp(nm->valuestring, "default") && cJSON_IsString(tp)) src = tp->valuestring;
            }
            if (!src) rc = zt_error_set(err, ZT_ERR_DATA, "%s: chat_template is a list without a {\"name\": \"default\", \"template\": ...} entry", path);
        } else if (!ct) rc = zt_error_set(err, ZT_ERR_DATA, "%s: a JSON object without a \"chat_template\" field (a tokenizer_config.json of a model with a chat template, or a .jinja file)", path);
        else rc = zt_error_set(err, ZT_ERR_DATA, "%s: chat_template must be a string or a list of {name, template}", path);
        if (!rc) rc = token_field(cfg, "bos_token", path, &t->bos, err);
        if (!rc) rc = token_field(cfg, "eos_token", path, &t->eos, err);
        if (!rc) {
            char name[4200];
            snprintf(name, sizeof name, "chat_template of %s", path);
            rc = zt_jinja_parse(&t->tpl, src, strlen(src), name, err);
        }
    } else {
        t->bos = dup_or_empty("");
        t->eos = dup_or_empty("");
        rc = (!t->bos || !t->eos) ? zt_error_set(err, ZT_ERR_NOMEM, "no memory for a chat template")
                                  : zt_jinja_parse(&t->tpl, buf, len, path, err);
    }
    cJSON_Delete(cfg);
    free(buf);
    if (rc) {
        zt_chat_template_free(t);
        return rc;
    }
    *out = t;
    return ZT_OK;
}

int zt_chat_template_set_tokens(zt_chat_template *t, const char *bos, const char *eos, zt_error *err) {
    char *b = bos ? strdup(bos) : NULL, *e = eos ? strdup(eos) : NULL;
    if ((bos && !b) || (eos && !e)) {
        free(b);
        free(e);
        return zt_error_set(err, ZT_ERR_NOMEM, "no memory for the special tokens");
    }
    if (b) free(t->bos), t->bos = b;
    if (e) free(t->eos), t->eos = e;
    return ZT_OK;
}

int zt_chat_template_set_vars(zt_chat_template *t, const cJSON *extra, zt_error *err) {
    if (extra && !cJSON_IsObject(extra)) return zt_error_set(err, ZT_ERR_DATA, "the extra template variables must be a JSON object");
    cJSON *copy = extra ? cJSON_Duplicate(extra, true) : NULL;
    if (extra && !copy) return zt_error_set(err, ZT_ERR_NOMEM, "no memory for the template variables");
    cJSON_Delete(t->extra);
    t->extra = copy;
    return ZT_OK;
}

void zt_chat_template_set_now(zt_chat_template *t, long long unix_seconds) { zt_jinja_set_now(t->tpl, unix_seconds); }
const char *zt_chat_template_bos(const zt_chat_template *t) { return t->bos; }
const char *zt_chat_template_eos(const zt_chat_template *t) { return t->eos; }

void zt_chat_template_free(zt_chat_template *t) {
    if (!t) return;
    zt_jinja_free(t->tpl);
    cJSON_Delete(t->extra);
    free(t->bos);
    free(t->eos);
    free(t);
}

/* Renders messages[0..n) (n < 0: all). */
static int render_n(const zt_chat_template *t, const cJSON *messages, int n, bool agp, char **text, size_t *len,
                    zt_error *err) {
    *text = NULL;
    if (!cJSON_IsArray(messages)) return zt_error_set(err, ZT_ERR_DATA, "the messages must be a JSON array of {\"role\", \"content\"} objects");
    cJSON *vars = cJSON_CreateObject(), *msgs = cJSON_CreateArray();
    if (!vars || !msgs) {
        cJSON_Delete(vars);
        cJSON_Delete(msgs);
        return zt_error_set(err, ZT_ERR_NOMEM, "no memory for the template's variables");
    }
    cJSON_AddItemToObject(vars, "messages", msgs);
    int k = 0;
    for (const cJSON *m = messages->child; m && (n < 0 || k < n); m = m->next, k++)
        cJSON_AddItemReferenceToArray(msgs, (cJSON *)m);
    cJSON_AddStringToObject(vars, "bos_token", t->bos);
    cJSON_AddStringToObject(vars, "eos_token", t->eos);
    cJSON_AddBoolToObject(vars, "add_generation_prompt", agp);
    for (const cJSON *e = t->extra ? t->extra->child : NULL; e; e = e->next)
        if (e->string && !cJSON_GetObjectItemCaseSensitive(vars, e->string))
            cJSON_AddItemReferenceToObject(vars, e->string, (cJSON *)e);
    int rc = zt_jinja_render(t->tpl, vars, text, len, err);
    cJSON_Delete(vars);
    return rc;
}

int zt_chat_render(const zt_chat_template *t, const cJSON *messages, bool add_generation_prompt, char **text,
                   size_t *len, zt_error *err) {
    return render_n(t, messages, -1, add_generation_prompt, text, len, err);
}

/* the span of assistant message m found by its content in text[from..len), or false */
static bool search_span(const zt_chat_template *t, const cJSON *m, const char *text, size_t len, size_t from,
                        zt_text_span *out) {
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(m, "content");
    if (!cJSON_IsString(c) || !c->valuestring[0]) return false;
    size_t cl = strlen(c->valuestring);
    const char *hit = from <= len ? memmem(text + from, len - from, c->valuestring, cl) : NULL;
    if (!hit) return false;
    size_t b = (size_t)(hit - text), e = b + cl, q = e, el = t->eos ? strlen(t->eos) : 0;
    while (q < len && (text[q] == ' ' || text[q] == '\n')) q++;
    if (el && q + el <= len && memcmp(text + q, t->eos, el) == 0) e = q + el;
    *out = (zt_text_span){b, e};
    return true;
}

int zt_chat_render_spans(const zt_chat_template *t, const cJSON *messages, char **text, size_t *len,
                         zt_text_span **spans, int *n_spans, zt_error *err) {
    return zt_chat_render_spans_search(t, messages, text, len, spans, n_spans, NULL, err);
}

int zt_chat_render_spans_search(const zt_chat_template *t, const cJSON *messages, char **text, size_t *len,
                                zt_text_span **spans, int *n_spans, int *searched, zt_error *err) {
    if (searched) *searched = 0;
    *spans = NULL;
    *n_spans = 0;
    size_t full_len;
    int rc = render_n(t, messages, -1, false, text, &full_len, err);
    if (rc) return rc;
    if (len) *len = full_len;
    int n = cJSON_GetArraySize(messages), k = 0;
    zt_text_span *sp = n ? calloc((size_t)n, sizeof *sp) : NULL;
    if (n && !sp) rc = zt_error_set(err, ZT_ERR_NOMEM, "no memory for %d spans", n);
    const cJSON *m = messages->child;
    for (int i = 0; !rc && i < n; i++, m = m->next) {
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
        if (!cJSON_IsString(role) || strcmp(role->valuestring, "assistant")) continue;
        char *before = NULL, *upto = NULL;
        size_t bl = 0, ul = 0;
        rc = render_n(t, messages, i, true, &before, &bl, err);
        if (rc) zt_error_prefix(err, "message %d (assistant): rendering the %d message%s before it with the generation prompt", i, i, i == 1 ? "" : "s");
        if (!rc) {
            rc = render_n(t, messages, i + 1, false, &upto, &ul, err);
            if (rc) zt_error_prefix(err, "message %d (assistant): rendering messages 0..%d", i, i);
        }
        if (!rc && (bl > ul || memcmp(before, upto, bl)))
            rc = zt_error_set(err, ZT_ERR_DATA, "message %d (assistant): the template is not prefix-stable: the rendering "
                              "of the messages before it with the generation prompt (%zu bytes) is not a prefix of the "
                              "rendering up to it (%zu bytes), so its span cannot be told", i, bl, ul);
        if (!rc && (ul > full_len || memcmp(upto, *text, ul)))
            rc = zt_error_set(err, ZT_ERR_DATA, "message %d (assistant): the template is not prefix-stable: the rendering "
                              "of messages 0..%d (%zu bytes) is not a prefix of the whole conversation's (%zu bytes)",
                              i, i, ul, full_len);
        if (rc && searched && rc == ZT_ERR_DATA && strstr(err->msg, "not prefix-stable") &&
            search_span(t, m, *text, full_len, k ? sp[k - 1].end : 0, &sp[k])) { /* found by its content */
            rc = ZT_OK;
            (*searched)++;
            k++;
        } else if (!rc) {
            sp[k++] = (zt_text_span){bl, ul};
        }
        free(before);
        free(upto);
    }
    if (rc) {
        free(sp);
        free(*text);
        *text = NULL;
        return rc;
    }
    if (k == 0) {
        free(sp);
        sp = NULL;
    }
    *spans = sp;
    *n_spans = k;
    return ZT_OK;
}
