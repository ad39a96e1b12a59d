/* chat_template.h - a model's chat template (Jinja, data/jinja.h) with the tokens it refers to,
 * rendering conversations into the text a model is trained on, and telling which bytes of that text
 * are the assistant's (the bytes the loss counts). */
#ifndef ZT_CHAT_TEMPLATE_H
#define ZT_CHAT_TEMPLATE_H

#include "data/jinja.h"

#include <stdbool.h>

typedef struct zt_chat_template zt_chat_template;

/* path: a tokenizer_config.json (its `chat_template`: a string, or a list of {name, template} of
 * which "default" is taken; its bos_token / eos_token: strings or {"content": ...} objects) or
 * any other file, read as the template source itself (a .jinja file; bos/eos then empty unless
 * zt_chat_template_set_tokens sets them). ZT_ERR_IO / ZT_ERR_DATA naming the file and the field. */
int zt_chat_template_load(zt_chat_template **out, const char *path, zt_error *err);
/* Overrides bos_token / eos_token (NULL leaves one as it is). */
int zt_chat_template_set_tokens(zt_chat_template *t, const char *bos, const char *eos, zt_error *err);
/* Extra variables every rendering gets (tools, documents, enable_thinking, ...: the keyword
 * arguments transformers passes on to the template): a JSON object, copied; NULL clears them. Its
 * messages / bos_token / eos_token / add_generation_prompt are ignored (the render sets those).
 * ZT_ERR_DATA when extra is not an object. */
int zt_chat_template_set_vars(zt_chat_template *t, const cJSON *extra, zt_error *err);
/* strftime_now's instant (data/jinja.h zt_jinja_set_now): 0 the clock. */
void zt_chat_template_set_now(zt_chat_template *t, long long unix_seconds);
const char *zt_chat_template_bos(const zt_chat_template *t);
const char *zt_chat_template_eos(const zt_chat_template *t);
void zt_chat_template_free(zt_chat_template *t);

/* Renders messages (a JSON array of {"role", "content"} objects, as transformers' apply_chat_template
 * takes them) with bos_token, eos_token, add_generation_prompt and raise_exception defined.
 * *text malloc'd, NUL-terminated. */
int zt_chat_render(const zt_chat_template *t, const cJSON *messages, bool add_generation_prompt, char **text,
                   size_t *len, zt_error *err);

/* A byte range [begin, end) of a rendered text. */
typedef struct zt_text_span {
    size_t begin, end;
} zt_text_span;

/* The whole conversation's text (add_generation_prompt false) and, in order, the spans of its
 * assistant turns: for assistant message i, the bytes that rendering messages[0..i] adds after the
 * rendering of messages[0..i) with add_generation_prompt true (its content and its end-of-turn
 * text, as TRL's assistant_only_loss counts them). ZT_ERR_DATA when the template is not
 * prefix-stable on this conversation (a rendering of a prefix is not a prefix of the whole), naming
 * the message. *spans malloc'd (*n_spans entries; NULL when 0). */
int zt_chat_render_spans(const zt_chat_template *t, const cJSON *messages, char **text, size_t *len,
                         zt_text_span **spans, int *n_spans, zt_error *err);
/* The same, but an assistant turn the prefix difference cannot tell (a template that is not
 * prefix-stable: one that drops earlier turns' reasoning, or whose generation prompt ends in text
 * the answer does not follow) is found by its content string in the whole text after the previous
 * turn, extended over the eos_token when only blanks lie between; *searched counts those turns. A
 * turn found neither way is the same ZT_ERR_DATA. */
int zt_chat_render_spans_search(const zt_chat_template *t, const cJSON *messages, char **text, size_t *len,
                                zt_text_span **spans, int *n_spans, int *searched, zt_error *err);

#endif
