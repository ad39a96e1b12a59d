/* jinja.h - an interpreter of the Jinja subset that real chat templates use (tokenizer_config.json's
 * `chat_template`, the templates llama.cpp keeps under models/templates), rendering byte for byte what
 * the npm package @huggingface/jinja renders (tests/chat_templates.sh). See jinja.c for the subset. */
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

void zt_jinja_free(zt_jinja *t);

#endif
