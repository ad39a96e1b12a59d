/* chat_render_file.h - one rendering as `zerotrain chat-template` makes it, in its one-file form
 * and in its --batch: a messages file read, its variables handed to a loaded chat template, and the
 * conversation rendered plain, with the generation prompt, or with its assistant turns' spans. */
#ifndef ZT_CHAT_RENDER_FILE_H
#define ZT_CHAT_RENDER_FILE_H

#include "data/chat_template.h"

#include <stdbool.h>
#include <stddef.h>

typedef struct zt_chat_file_rendering {
    char *text; /* malloc'd, NUL-terminated, len bytes */
    size_t len;
    zt_text_span *spans; /* with spans: one per assistant turn, in order (NULL when none) */
    int *span_messages;  /* spans[k] is the turn of message span_messages[k] */
    int n_spans;
} zt_chat_file_rendering;

/* Renders the messages file messages_path (a JSON array of {"role", "content"} objects, or an object
 * with such a "messages" array whose other keys become the template's variables) with t. The
 * template's variables are replaced by this file's (cleared for an array), so a rendering starts from
 * the same state whatever t rendered before; bos/eos and strftime_now's instant are the caller's.
 * spans: the whole conversation (add_generation_prompt must then be false) and its assistant turns'
 * spans (zt_chat_render_spans). ZT_ERR_IO naming the file; ZT_ERR_DATA for a file that is not such
 * JSON (naming it) or a template that raises or is not prefix-stable; ZT_ERR_USAGE for spans with
 * add_generation_prompt. *out zeroed on error. */
int zt_chat_render_file(zt_chat_template *t, const char *messages_path, bool add_generation_prompt, bool spans,
                        zt_chat_file_rendering *out, zt_error *err);
void zt_chat_file_rendering_free(zt_chat_file_rendering *r);

#endif
