/* cmd_chat_template.c - `zerotrain chat-template TEMPLATE --messages FILE.json`: renders a
 * conversation with a model's chat template (data/chat_template.h) and prints the text to stdout
 * byte for byte (no newline added), so scripts can see what a model is trained on. With --spans
 * the text is the whole conversation without the generation prompt, and stderr gets one line per
 * assistant turn: "span<TAB>MESSAGE_INDEX<TAB>BEGIN<TAB>END" (byte offsets into stdout's text,
 * END exclusive). Exit status is the zt_status: 2 usage, 3 data (a template that does not parse,
 * raises or is not prefix-stable; messages that are not a JSON array), 8 I/O, 7 out of memory. */
#include "cli/commands.h"
#include "core/file.h"
#include "data/chat_template.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void chat_usage(FILE *f) {
    fprintf(f,
            "usage: zerotrain chat-template TEMPLATE --messages FILE.json [--add-generation-prompt]\n"
            "                               [--bos S] [--eos S] [--spans] [--now UNIX_SECONDS]\n"
            "\n"
            "Renders a conversation with a chat template as transformers' apply_chat_template\n"
            "(tokenize=False) does, byte for byte what the npm package @huggingface/jinja renders.\n"
            "\n"
            "  TEMPLATE                a tokenizer_config.json (its chat_template, bos_token,\n"
            "                          eos_token) or a .jinja file (bos/eos empty unless given)\n"
            "  --messages FILE.json    a JSON array of {\"role\", \"content\"} objects, or an object\n"
            "                          with such a \"messages\" array whose other keys (tools,\n"
            "                          documents, enable_thinking, ...) become template variables\n"
            "  --add-generation-prompt end with the prompt of the assistant's next turn\n"
            "  --bos S, --eos S        override bos_token / eos_token\n"
            "  --spans                 print the whole conversation and, on stderr, one line per\n"
            "                          assistant turn: span<TAB>INDEX<TAB>BEGIN<TAB>END (bytes)\n"
            "  --now UNIX_SECONDS      the instant strftime_now renders (UTC); default: the clock\n"
            "  -h, --help              this text\n");
}

int zt_cmd_chat_template(int argc, char **argv) {
    const char *tpl_path = NULL, *msg_path = NULL, *bos = NULL, *eos = NULL;
    bool agp = false, spans = false;
    long long now = 0;
    zt_error err = {0};
    int rc = ZT_OK;
    for (int i = 1; i < argc && !rc; i++) {
        const char *a = argv[i];
        bool has_value = i + 1 < argc;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            chat_usage(stdout);
            return ZT_OK;
        } else if (!strcmp(a, "--messages") || !strcmp(a, "--bos") || !strcmp(a, "--eos") || !strcmp(a, "--now")) {
            if (!has_value) {
                rc = zt_error_set(&err, ZT_ERR_USAGE, "chat-template: %s needs a value", a);
                break;
            }
            const char *v = argv[++i];
            if (a[2] == 'm') msg_path = v;
            else if (a[2] == 'b') bos = v;
            else if (a[2] == 'e') eos = v;
            else {
                char *end;
                errno = 0;
                now = strtoll(v, &end, 10);
                if (errno || *end || end == v || now <= 0)
                    rc = zt_error_set(&err, ZT_ERR_USAGE, "chat-template: --now wants positive unix seconds, got \"%s\"", v);
            }
        } else if (!strcmp(a, "--add-generation-prompt")) {
            agp = true;
        } else if (!strcmp(a, "--spans")) {
            spans = true;
        } else if (a[0] == '-' && a[1]) {
            rc = zt_error_set(&err, ZT_ERR_USAGE, "chat-template: unknown option '%s' (see --help)", a);
        } else if (tpl_path) {
            rc = zt_error_set(&err, ZT_ERR_USAGE, "chat-template: one template, got \"%s\" and \"%s\"", tpl_path, a);
        } else tpl_path = a;
    }
    if (!rc && !tpl_path) rc = zt_error_set(&err, ZT_ERR_USAGE, "chat-template: no template (see --help)");
    if (!rc && !msg_path) rc = zt_error_set(&err, ZT_ERR_USAGE, "chat-template: no --messages FILE.json");
    if (!rc && spans && agp)
        rc = zt_error_set(&err, ZT_ERR_USAGE, "chat-template: --spans renders the whole conversation; drop --add-generation-prompt");
    if (rc) return zt_cli_fail(&err);

    zt_chat_template *t = NULL;
    char *buf = NULL, *text = NULL;
    size_t len = 0, text_len = 0;
    cJSON *doc = NULL;
    zt_text_span *sp = NULL;
    int n_sp = 0;
    rc = zt_chat_template_load(&t, tpl_path, &err);
    if (!rc) rc = zt_chat_template_set_tokens(t, bos, eos, &err);
    if (!rc) {
        zt_chat_template_set_now(t, now);
        rc = zt_read_file(msg_path, "messages file", &buf, &len, &err);
    }
    if (!rc) {
        doc = cJSON_ParseWithLength(buf, len);
        const cJSON *msgs = cJSON_IsObject(doc) ? cJSON_GetObjectItemCaseSensitive(doc, "messages") : doc;
        if (!cJSON_IsArray(msgs))
            rc = zt_error_set(&err, ZT_ERR_DATA, "%s: %s", msg_path,
                              doc ? "not a JSON array of messages (nor an object with a \"messages\" array)" : "not valid JSON");
        else if (cJSON_IsObject(doc)) {
            cJSON *extra = cJSON_Duplicate(doc, true);
            if (!extra) rc = zt_error_set(&err, ZT_ERR_NOMEM, "out of memory");
            else {
                cJSON_DeleteItemFromObjectCaseSensitive(extra, "messages");
                rc = zt_chat_template_set_vars(t, extra, &err);
                cJSON_Delete(extra);
            }
        }
        if (!rc && spans) rc = zt_chat_render_spans(t, msgs, &text, &text_len, &sp, &n_sp, &err);
        else if (!rc) rc = zt_chat_render(t, msgs, agp, &text, &text_len, &err);
    }
    if (!rc) {
        if (fwrite(text, 1, text_len, stdout) != text_len || fflush(stdout))
            rc = zt_error_set(&err, ZT_ERR_IO, "chat-template: cannot write the rendered text to stdout");
        if (!rc && spans) {
            int k = 0;
            const cJSON *msgs = cJSON_IsObject(doc) ? cJSON_GetObjectItemCaseSensitive(doc, "messages") : doc;
            int i = 0;
            for (const cJSON *m = msgs->child; m && k < n_sp; m = m->next, i++) {
                const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
                if (cJSON_IsString(role) && !strcmp(role->valuestring, "assistant")) {
                    fprintf(stderr, "span\t%d\t%zu\t%zu\n", i, sp[k].begin, sp[k].end);
                    k++;
                }
            }
        }
    }
    if (rc) zt_cli_fail(&err);
    free(sp);
    free(text);
    cJSON_Delete(doc);
    free(buf);
    zt_chat_template_free(t);
    return rc;
}
