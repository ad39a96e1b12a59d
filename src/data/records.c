/* records.c - a record (JSONL object or plain text) into the text a model reads and the byte spans
 * the loss counts (see records.h for the shapes). */
#include "data/records.h"

#include <stdlib.h>
#include <string.h>

const char *zt_record_shape_name(zt_record_shape s) {
    switch (s) {
    case ZT_RECORD_TEXT: return "text";
    case ZT_RECORD_PROMPT_COMPLETION: return "prompt/completion";
    case ZT_RECORD_MESSAGES: return "messages";
    default: return "auto";
    }
}

void zt_rendered_free(zt_rendered *out) {
    free(out->text);
    free(out->spans);
    memset(out, 0, sizeof *out);
}

/* out->text = a ++ b ++ eos (any may be empty); spans: [|a|, end) when count_b, else none */
static int concat(zt_rendered *out, const char *a, size_t la, const char *b, size_t lb, const char *eos, bool count_b,
                  zt_error *err) {
    size_t le = eos ? strlen(eos) : 0;
    char *t = malloc(la + lb + le + 1);
    zt_text_span *sp = malloc(sizeof *sp);
    if (!t || !sp) {
        free(t);
        free(sp);
        return zt_error_set(err, ZT_ERR_NOMEM, "record: out of memory for %zu bytes", la + lb + le);
    }
    if (la) memcpy(t, a, la);
    if (lb) memcpy(t + la, b, lb);
    if (le) memcpy(t + la + lb, eos, le);
    t[la + lb + le] = 0;
    free(out->text);
    free(out->spans);
    out->text = t;
    out->len = la + lb + le;
    out->spans = sp;
    out->n_spans = count_b && lb + le > 0;
    sp[0] = (zt_text_span){la, la + lb + le};
    return ZT_OK;
}

int zt_record_text(const zt_record_rules *r, const char *text, size_t len, zt_rendered *out, zt_error *err) {
    out->shape = ZT_RECORD_TEXT;
    out->eos = r->add_eos;
    out->searched = 0;
    return concat(out, "", 0, text, len, NULL, true, err);
}

static const cJSON *field(const cJSON *rec, const char *name) { return cJSON_GetObjectItemCaseSensitive(rec, name); }

/* the conversation msgs rendered; the spans of its assistant turns from the first_counted-th on
 * (all of the text under count_all) */
static int conversation(const zt_record_rules *r, const cJSON *msgs, int first_counted, zt_rendered *out,
                        zt_error *err) {
    if (!r->tmpl)
        return zt_error_set(err, ZT_ERR_DATA, "a conversation needs a chat template (data.chat_template, or a "
                            "tokenizer_config.json with chat_template beside data.tokenizer)");
    char *text = NULL;
    size_t len = 0;
    zt_text_span *spans = NULL;
    int n = 0;
    int searched = 0;
    int rc = zt_chat_render_spans_search(r->tmpl, msgs, &text, &len, &spans, &n, &searched, err);
    out->searched = searched;
    if (rc) return rc;
    free(out->text);
    free(out->spans);
    out->text = text;
    out->len = len;
    if (r->count_all) {
        free(spans);
        out->spans = malloc(sizeof *out->spans);
        if (!out->spans) return zt_error_set(err, ZT_ERR_NOMEM, "record: out of memory");
        out->spans[0] = (zt_text_span){0, len};
        out->n_spans = len > 0;
        return ZT_OK;
    }
    if (first_counted > n) first_counted = n;
    memmove(spans, spans + first_counted, (size_t)(n - first_counted) * sizeof *spans);
    out->spans = spans;
    out->n_spans = n - first_counted;
    return ZT_OK;
}

static int assistant_turns(const cJSON *msgs) {
    int n = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, msgs) {
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
        n += cJSON_IsString(role) && strcmp(role->valuestring, "assistant") == 0;
    }
    return n;
}

static int check_messages(const cJSON *msgs, const char *name, zt_error *err) {
    if (!cJSON_IsArray(msgs))
        return zt_error_set(err, ZT_ERR_DATA, "field \"%s\" is not a list of messages", name);
    int i = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, msgs) {
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
        if (!cJSON_IsObject(m) || !cJSON_IsString(role))
            return zt_error_set(err, ZT_ERR_DATA, "%s[%d] is not a message: want {\"role\": \"...\", \"content\": ...}",
                                name, i);
        i++;
    }
    return ZT_OK;
}

static int prompt_completion(const zt_record_rules *r, const cJSON *p, const cJSON *c, zt_rendered *out,
                             zt_error *err) {
    if (cJSON_IsString(p) && cJSON_IsString(c)) {
        int rc = concat(out, p->valuestring, strlen(p->valuestring), c->valuestring, strlen(c->valuestring),
                        NULL, true, err);
        if (!rc && r->count_all) out->spans[0].begin = 0, out->n_spans = out->len > 0;
        return rc;
    }
    if (cJSON_IsArray(p) && cJSON_IsArray(c)) { /* conversational: the completion's turns count */
        int rc = check_messages(p, r->prompt_field, err);
        if (!rc) rc = check_messages(c, r->completion_field, err);
        if (rc) return rc;
        cJSON *all = cJSON_CreateArray();
        if (!all) return zt_error_set(err, ZT_ERR_NOMEM, "record: out of memory");
        const cJSON *m;
        cJSON_ArrayForEach(m, p) cJSON_AddItemToArray(all, cJSON_CreateObjectReference(m->child));
        cJSON_ArrayForEach(m, c) cJSON_AddItemToArray(all, cJSON_CreateObjectReference(m->child));
        rc = conversation(r, all, assistant_turns(p), out, err);
        cJSON_Delete(all);
        if (!rc && r->count_all) return rc;
        if (!rc && out->n_spans == 0)
            return zt_error_set(err, ZT_ERR_DATA, "field \"%s\" holds no assistant message: nothing to learn",
                                r->completion_field);
        return rc;
    }
    return zt_error_set(err, ZT_ERR_DATA, "fields \"%s\" and \"%s\" must both be strings or both lists of messages",
                        r->prompt_field, r->completion_field);
}

int zt_record_render(const zt_record_rules *r, const cJSON *rec, zt_rendered *out, zt_error *err) {
    if (!cJSON_IsObject(rec)) return zt_error_set(err, ZT_ERR_DATA, "a record must be a JSON object");
    const cJSON *msgs = field(rec, r->messages_field), *p = field(rec, r->prompt_field),
                *c = field(rec, r->completion_field), *t = field(rec, r->text_field);
    zt_record_shape s = r->shape;
    if (s == ZT_RECORD_AUTO) {
        s = msgs ? ZT_RECORD_MESSAGES : p || c ? ZT_RECORD_PROMPT_COMPLETION : t ? ZT_RECORD_TEXT : ZT_RECORD_AUTO;
        if (s == ZT_RECORD_AUTO)
            return zt_error_set(err, ZT_ERR_DATA, "the record has none of the fields \"%s\", \"%s\"/\"%s\", \"%s\" "
                                "(data.record auto)", r->messages_field, r->prompt_field, r->completion_field,
                                r->text_field);
    }
    out->shape = s;
    out->searched = 0;
    out->eos = r->add_eos && s != ZT_RECORD_MESSAGES && !(p && cJSON_IsArray(p));
    switch (s) {
    case ZT_RECORD_TEXT:
        if (!cJSON_IsString(t))
            return zt_error_set(err, ZT_ERR_DATA, "field \"%s\" %s", r->text_field, t ? "is not a string" : "is missing");
        return concat(out, "", 0, t->valuestring, strlen(t->valuestring), NULL, true, err);
    case ZT_RECORD_PROMPT_COMPLETION:
        if (!p || !c)
            return zt_error_set(err, ZT_ERR_DATA, "field \"%s\" is missing", p ? r->completion_field : r->prompt_field);
        return prompt_completion(r, p, c, out, err);
    default: {
        if (!msgs) return zt_error_set(err, ZT_ERR_DATA, "field \"%s\" is missing", r->messages_field);
        int rc = check_messages(msgs, r->messages_field, err);
        return rc ? rc : conversation(r, msgs, 0, out, err);
    }
    }
}
