/* records.h - one training record as users have it (a JSONL object or a line of text) turned into the
 * text the model reads and the byte spans of it the loss counts. The shapes are the ones transformers
 * and TRL read:
 *   text                {"text": "..."}                       everything counts
 *   prompt/completion   {"prompt": "...", "completion": "..."}  the completion counts (TRL's
 *                       completion_only_loss); both lists of messages: the conversation rendered with
 *                       the chat template, the completion's assistant turns count
 *   messages            {"messages": [{"role", "content"}, ...]}: rendered with the chat template,
 *                       the assistant turns count (TRL's assistant_only_loss; data/chat_template.h)
 * The field names are settings (data.text_field, ...). */
#ifndef ZT_RECORDS_H
#define ZT_RECORDS_H

#include "data/chat_template.h"

#include <cjson/cJSON.h>
#include <stdbool.h>

typedef enum zt_record_shape {
    ZT_RECORD_AUTO,              /* by the fields present: messages, then prompt + completion, then text */
    ZT_RECORD_TEXT,
    ZT_RECORD_PROMPT_COMPLETION,
    ZT_RECORD_MESSAGES,
} zt_record_shape;

typedef struct zt_record_rules {
    zt_record_shape shape;
    const char *text_field, *prompt_field, *completion_field, *messages_field;
    bool count_all;                /* every token counts (data.loss_on all) */
    const zt_chat_template *tmpl;  /* for conversations; NULL: a conversation is an error */
    bool add_eos;                  /* text and string prompt/completion records end with the tokenizer's
                                      end-of-text token (counted), as TRL appends eos_token */
} zt_record_rules;

/* A rendered record: text[0..len) and the counted spans, ascending and disjoint. Reused across
 * records (zt_rendered_free at the end). */
typedef struct zt_rendered {
    char *text;
    size_t len;
    zt_text_span *spans;
    int n_spans;
    zt_record_shape shape; /* what the record was */
    bool eos;              /* the end-of-text token follows the text's tokens (counted) */
    int searched;          /* assistant turns found by their content (zt_chat_render_spans_search) */
} zt_rendered;

/* Renders the JSON object rec. ZT_ERR_DATA naming the field that is missing or of the wrong type,
 * or the template's own error (a role it does not know, raise_exception's text). */
int zt_record_render(const zt_record_rules *r, const cJSON *rec, zt_rendered *out, zt_error *err);
/* A plain-text record (a line, a paragraph, a file): all of it counted, eos after. */
int zt_record_text(const zt_record_rules *r, const char *text, size_t len, zt_rendered *out, zt_error *err);
void zt_rendered_free(zt_rendered *out);
/* "text", "prompt/completion", "messages" */
const char *zt_record_shape_name(zt_record_shape s);

#endif
