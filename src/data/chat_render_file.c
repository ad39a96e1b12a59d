/* chat_render_file.c - one rendering of a messages file with a chat template
 * (data/chat_render_file.h), what `zerotrain chat-template` does per conversation in its one-file form
 * and per line of its --batch: the file's JSON read, its extra keys set as the template's variables
 * (or none), the text rendered, and with spans each assistant turn's span tied to its message index. */
#include "data/chat_render_file.h"
#include "core/file.h"

#include <stdlib.h>
#include <string.h>

/* messages of a parsed file: the document itself, or its "messages" */
static const cJSON *messages_of(const cJSON *doc) {
    return cJSON_IsObject(doc) ? cJSON_GetObjectItemCaseSensitive(doc, "messages") : doc;
}

/* the template's variables: the object's keys but "messages", or none for an array */
static int set_file_vars(zt_chat_template *t, const cJSON *doc, zt_error *err) {
    if (!cJSON_IsObject(doc)) return zt_chat_template_set_vars(t, NULL, err);
    cJSON *extra = cJSON_Duplicate(doc, true);
    if (!extra) return zt_error_set(err, ZT_ERR_NOMEM, "out of memory");
    cJSON_DeleteItemFromObjectCaseSensitive(extra, "messages");
    int rc = zt_chat_template_set_vars(t, extra, err);
    cJSON_Delete(extra);
    return rc;
}

/* span_messages[k]: the index of the k-th assistant message (the k-th span's) */
static int index_spans(const cJSON *msgs, zt_chat_file_rendering *out, zt_error *err) {
    if (!out->n_spans) return ZT_OK;
    out->span_messages = malloc((size_t)out->n_spans * sizeof *out->span_messages);
    if (!out->span_messages) return zt_error_set(err, ZT_ERR_NOMEM, "no memory for %d spans", out->n_spans);
    int k = 0, i = 0;
    for (const cJSON *m = msgs->child; m && k < out->n_spans; m = m->next, i++) {
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
        if (cJSON_IsString(role) && !strcmp(role->valuestring, "assistant")) out->span_messages[k++] = i;
    }
    return ZT_OK;
}

int zt_chat_render_file(zt_chat_template *t, const char *messages_path, bool add_generation_prompt, bool spans,
                        zt_chat_file_rendering *out, zt_error *err) {
    memset(out, 0, sizeof *out);
    if (spans && add_generation_prompt)
        return zt_error_set(err, ZT_ERR_USAGE, "chat-template: --spans renders the whole conversation; drop --add-generation-prompt");
    char *buf = NULL;
    size_t len = 0;
    int rc = zt_read_file(messages_path, "messages file", &buf, &len, err);
    if (rc) return rc;
    cJSON *doc = cJSON_ParseWithLength(buf, len);
    free(buf);
    const cJSON *msgs = messages_of(doc);
    if (!cJSON_IsArray(msgs))
        rc = zt_error_set(err, ZT_ERR_DATA, "%s: %s", messages_path,
                          doc ? "not a JSON array of messages (nor an object with a \"messages\" array)" : "not valid JSON");
    if (!rc) rc = set_file_vars(t, doc, err);
    if (!rc && spans) rc = zt_chat_render_spans(t, msgs, &out->text, &out->len, &out->spans, &out->n_spans, err);
    else if (!rc) rc = zt_chat_render(t, msgs, add_generation_prompt, &out->text, &out->len, err);
    if (!rc && spans) rc = index_spans(msgs, out, err);
    cJSON_Delete(doc);
    if (rc) zt_chat_file_rendering_free(out);
    return rc;
}

void zt_chat_file_rendering_free(zt_chat_file_rendering *r) {
    free(r->text);
    free(r->spans);
    free(r->span_messages);
    memset(r, 0, sizeof *r);
}
