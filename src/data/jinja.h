/* jinja.h - an interpreter of the Jinja subset that real chat templates use (tokenizer_config.json's
 * `chat_template`, the templates llama.cpp keeps under models/templates), rendering byte for byte what
 * the npm package @huggingface/jinja renders (tests/chat_templates.sh). The subset and where it
 * differs from Python Jinja: docs/tokenizers.md ("Chat templates"); the files: jinja_lexer.c,
 * jinja_parser.c, jinja_eval.c, jinja_value.c, jinja_filters.c (their shared jinja_internal.h). */
#ifndef ZT_JINJA_H
#define ZT_JINJA_H

#include "zerotrain/zerotrain.h"

#include <cjson/cJSON.h>
#include <stddef.h>

typedef struct zt_jinja zt_jinja;

/* Parses len bytes of template source. name (a path, or "chat_template of X") prefixes every error.
 * ZT_ERR_DATA names the line, the column and what is wrong; ZT_ERR_NOMEM. *out NULL on error. */
int zt_jinja_parse(zt_jinja **out, const char *src, size_t len, const char *name, zt_error *err);

/* Renders with the variables of the JSON object vars (messages, add_generation_prompt, bos_token,
 * ...) into *out (malloc'd, NUL-terminated, *len bytes). A template's raise_exception(msg) is
 * ZT_ERR_DATA with msg in the text; so are type errors and undefined callables, naming the line. */
int zt_jinja_render(const zt_jinja *t, const cJSON *vars, char **out, size_t *len, zt_error *err);

/* strftime_now's clock: unix_seconds > 0 renders that instant in UTC (reproducible renderings,
 * tests); 0 (the default) the current local time, as the reference does. */
void zt_jinja_set_now(zt_jinja *t, long long unix_seconds);

void zt_jinja_free(zt_jinja *t);

#endif
