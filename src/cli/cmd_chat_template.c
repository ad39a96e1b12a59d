/* cmd_chat_template.c - `zerotrain chat-template TEMPLATE --messages FILE.json`: renders a
 * conversation with a model's chat template (data/chat_render_file.h) and prints the text to stdout
 * byte for byte (no newline added), so scripts can see what a model is trained on. With --spans
 * the text is the whole conversation without the generation prompt, and stderr gets one line per
 * assistant turn: "span<TAB>MESSAGE_INDEX<TAB>BEGIN<TAB>END" (byte offsets into stdout's text,
 * END exclusive). Exit status is the zt_status: 2 usage, 3 data (a template that does not parse,
 * raises or is not prefix-stable; messages that are not a JSON array), 8 I/O, 7 out of memory.
 * `--batch LIST.tsv` makes many renderings in one process: per line, the text and the stderr the
 * one-file command would have given go to files, and its exit status to stdout. */
#include "cli/commands.h"
#include "core/file.h"
#include "data/chat_render_file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void chat_usage(FILE *f) {
    fprintf(f,
            "usage: zerotrain chat-template TEMPLATE --messages FILE.json [--add-generation-prompt]\n"
            "                               [--bos S] [--eos S] [--spans] [--now UNIX_SECONDS]\n"
            "       zerotrain chat-template --batch LIST.tsv [--bos S] [--eos S] [--now UNIX_SECONDS]\n"
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
            "  --batch LIST.tsv        many renderings in one process: each line of LIST.tsv is\n"
            "                          TEMPLATE<TAB>MESSAGES<TAB>FLAGS<TAB>OUT, FLAGS a comma list of\n"
            "                          agp (--add-generation-prompt) and spans, or -; OUT.out gets\n"
            "                          what the one-file command prints on stdout, OUT.err what it\n"
            "                          prints on stderr, and stdout a line OUT<TAB>STATUS (its exit\n"
            "                          status). --bos/--eos/--now apply to every line. Exit 2 naming\n"
            "                          the line for a bad line (nothing rendered), 8 when an OUT file\n"
            "                          cannot be written, else 0\n"
            "  -h, --help              this text\n");
}

/* The one-file command's output of one rendering: the text to out, the span lines or the error
 * message to errf (as zt_cli_fail prints it). rc: the rendering's status. Returns ZT_ERR_IO when out
 * or errf cannot be written, else ZT_OK. */
static int write_rendering(int rc, const zt_chat_file_rendering *r, const zt_error *err, FILE *out, FILE *errf) {
    if (rc) {
        fprintf(errf, "zerotrain: error (%s): %s\n", zt_status_name(err->code), err->msg);
        return fflush(errf) ? ZT_ERR_IO : ZT_OK;
    }
    if (fwrite(r->text, 1, r->len, out) != r->len || fflush(out)) return ZT_ERR_IO;
    for (int k = 0; k < r->n_spans; k++)
        fprintf(errf, "span\t%d\t%zu\t%zu\n", r->span_messages[k], r->spans[k].begin, r->spans[k].end);
    return fflush(errf) ? ZT_ERR_IO : ZT_OK;
}

/* A template with the command's global bos/eos/now set. */
static int load_template(zt_chat_template **t, const char *path, const char *bos, const char *eos, long long now,
                         zt_error *err) {
    int rc = zt_chat_template_load(t, path, err);
    if (!rc) rc = zt_chat_template_set_tokens(*t, bos, eos, err);
    if (!rc) zt_chat_template_set_now(*t, now);
    if (rc) {
        zt_chat_template_free(*t);
        *t = NULL;
    }
    return rc;
}

static int render_one(const char *tpl_path, const char *msg_path, bool agp, bool spans, const char *bos,
                      const char *eos, long long now) {
    zt_error err = {0};
    zt_chat_template *t = NULL;
    zt_chat_file_rendering r = {0};
    int rc = load_template(&t, tpl_path, bos, eos, now, &err);
    if (!rc) rc = zt_chat_render_file(t, msg_path, agp, spans, &r, &err);
    if (rc) zt_cli_fail(&err);
    else if (write_rendering(rc, &r, &err, stdout, stderr))
        rc = zt_cli_fail(&(zt_error){.code = ZT_ERR_IO, .msg = "chat-template: cannot write the rendered text to stdout"});
    zt_chat_file_rendering_free(&r);
    zt_chat_template_free(t);
    return rc;
}

/* --- --batch ----------------------------------------------------------------------------------- */

typedef struct batch_line {
    char *tpl, *msgs, *out; /* into the list's buffer */
    bool agp, spans;
} batch_line;

/* Splits the list (modified in place) into lines; empty lines are skipped. ZT_ERR_USAGE naming the
 * line for a wrong field count, an unknown flag or agp with spans. */
static int parse_batch(char *buf, const char *path, batch_line **lines, int *n_lines, zt_error *err) {
    *lines = NULL;
    *n_lines = 0;
    int cap = 0, lineno = 0;
    for (char *p = buf, *next; p && *p; p = next) {
        lineno++;
        next = strchr(p, '\n');
        if (next) *next++ = '\0';
        if (!*p) continue;
        char *f[5] = {0};
        int n = 0;
        for (char *q = p; q && n < 5; n++) {
            f[n] = q;
            q = strchr(q, '\t');
            if (q) *q++ = '\0';
        }
        if (n != 4 || !*f[0] || !*f[1] || !*f[2] || !*f[3])
            return zt_error_set(err, ZT_ERR_USAGE, "chat-template: %s:%d: want TEMPLATE<TAB>MESSAGES<TAB>FLAGS<TAB>OUT, "
                                "got %d%s field%s", path, lineno, n, n == 5 ? " or more" : "", n == 1 ? "" : "s");
        batch_line l = {.tpl = f[0], .msgs = f[1], .out = f[3]};
        if (strcmp(f[2], "-"))
            for (char *flag = strtok(f[2], ","); flag; flag = strtok(NULL, ",")) {
                if (!strcmp(flag, "agp")) l.agp = true;
                else if (!strcmp(flag, "spans")) l.spans = true;
                else return zt_error_set(err, ZT_ERR_USAGE, "chat-template: %s:%d: unknown flag \"%s\" (agp, spans or -)", path, lineno, flag);
            }
        if (l.agp && l.spans)
            return zt_error_set(err, ZT_ERR_USAGE, "chat-template: %s:%d: spans renders the whole conversation; drop agp", path, lineno);
        if (*n_lines == cap) {
            cap = cap ? 2 * cap : 64;
            batch_line *grown = realloc(*lines, (size_t)cap * sizeof *grown);
            if (!grown) return zt_error_set(err, ZT_ERR_NOMEM, "no memory for %d lines of %s", cap, path);
            *lines = grown;
        }
        (*lines)[(*n_lines)++] = l;
    }
    return ZT_OK;
}

/* The templates loaded so far, one per distinct path. */
typedef struct template_cache {
    const char **paths;
    zt_chat_template **templates;
    int n;
} template_cache;

/* The cached template of path, or a new load (a failed load is not kept: each line reports it). */
static int cached_template(template_cache *c, const char *path, const char *bos, const char *eos, long long now,
                           zt_chat_template **t, zt_error *err) {
    for (int i = 0; i < c->n; i++)
        if (!strcmp(c->paths[i], path)) return *t = c->templates[i], ZT_OK;
    int rc = load_template(t, path, bos, eos, now, err);
    if (rc) return rc;
    const char **p = realloc(c->paths, (size_t)(c->n + 1) * sizeof *p);
    if (p) c->paths = p;
    zt_chat_template **ts = p ? realloc(c->templates, (size_t)(c->n + 1) * sizeof *ts) : NULL;
    if (ts) c->templates = ts;
    if (!p || !ts) {
        zt_chat_template_free(*t);
        *t = NULL;
        return zt_error_set(err, ZT_ERR_NOMEM, "no memory to keep chat template %s", path);
    }
    c->paths[c->n] = path;
    c->templates[c->n++] = *t;
    return ZT_OK;
}

/* OUT.out and OUT.err of one line, written; ZT_ERR_IO (said on stderr) when they cannot be. */
static int batch_render(const batch_line *l, template_cache *cache, const char *bos, const char *eos, long long now,
                        int *status) {
    zt_error err = {0};
    zt_chat_template *t = NULL;
    zt_chat_file_rendering r = {0};
    *status = cached_template(cache, l->tpl, bos, eos, now, &t, &err);
    if (!*status) *status = zt_chat_render_file(t, l->msgs, l->agp, l->spans, &r, &err);
    size_t n = strlen(l->out) + 5;
    char *out_path = malloc(n), *err_path = malloc(n);
    FILE *out = NULL, *errf = NULL;
    int rc = out_path && err_path ? ZT_OK : ZT_ERR_NOMEM, why = rc ? ENOMEM : 0; /* why: the first errno */
    if (!rc) {
        snprintf(out_path, n, "%s.out", l->out);
        snprintf(err_path, n, "%s.err", l->out);
        out = fopen(out_path, "wb");
        if (!out) why = errno;
        errf = fopen(err_path, "wb");
        if (!errf && !why) why = errno;
        rc = out && errf ? write_rendering(*status, &r, &err, out, errf) : ZT_ERR_IO;
        if (rc && !why) why = errno;
    }
    if (out && fclose(out) && !rc) rc = ZT_ERR_IO, why = errno;
    if (errf && fclose(errf) && !rc) rc = ZT_ERR_IO, why = errno;
    if (rc) fprintf(stderr, "zerotrain: error (%s): chat-template --batch: cannot write %s.out / %s.err: %s\n",
                    zt_status_name(rc), l->out, l->out, strerror(why));
    free(out_path);
    free(err_path);
    zt_chat_file_rendering_free(&r);
    return rc;
}

static int render_batch(const char *list_path, const char *bos, const char *eos, long long now) {
    zt_error err = {0};
    char *buf = NULL;
    size_t len = 0;
    batch_line *lines = NULL;
    int n_lines = 0;
    int rc = zt_read_file(list_path, "batch list", &buf, &len, &err);
    if (!rc) rc = parse_batch(buf, list_path, &lines, &n_lines, &err);
    if (rc) {
        free(lines);
        free(buf);
        return zt_cli_fail(&err);
    }
    template_cache cache = {0};
    int worst = ZT_OK;
    for (int i = 0; i < n_lines; i++) {
        int status = ZT_OK, wrote = batch_render(&lines[i], &cache, bos, eos, now, &status);
        if (wrote) worst = wrote, status = wrote;
        printf("%s\t%d\n", lines[i].out, status);
    }
    if (fflush(stdout)) worst = zt_cli_fail(&(zt_error){.code = ZT_ERR_IO, .msg = "chat-template --batch: cannot write to stdout"});
    for (int i = 0; i < cache.n; i++) zt_chat_template_free(cache.templates[i]);
    free(cache.templates);
    free(cache.paths);
    free(lines);
    free(buf);
    return worst;
}

int zt_cmd_chat_template(int argc, char **argv) {
    const char *tpl_path = NULL, *msg_path = NULL, *bos = NULL, *eos = NULL, *batch = NULL;
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
        } else if (!strcmp(a, "--messages") || !strcmp(a, "--bos") || !strcmp(a, "--eos") || !strcmp(a, "--now") ||
                   !strcmp(a, "--batch")) {
            if (!has_value) {
                rc = zt_error_set(&err, ZT_ERR_USAGE, "chat-template: %s needs a value", a);
                break;
            }
            const char *v = argv[++i];
            if (a[2] == 'm') msg_path = v;
            else if (!strcmp(a, "--batch")) batch = v;
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
    if (!rc && batch && (tpl_path || msg_path || agp || spans))
        rc = zt_error_set(&err, ZT_ERR_USAGE, "chat-template: --batch takes its templates, messages and flags from "
                          "its lines; drop the TEMPLATE, --messages, --add-generation-prompt and --spans");
    if (!rc && batch) return render_batch(batch, bos, eos, now);
    if (!rc && !tpl_path) rc = zt_error_set(&err, ZT_ERR_USAGE, "chat-template: no template (see --help)");
    if (!rc && !msg_path) rc = zt_error_set(&err, ZT_ERR_USAGE, "chat-template: no --messages FILE.json");
    if (!rc && spans && agp)
        rc = zt_error_set(&err, ZT_ERR_USAGE, "chat-template: --spans renders the whole conversation; drop --add-generation-prompt");
    if (rc) return zt_cli_fail(&err);
    return render_one(tpl_path, msg_path, agp, spans, bos, eos, now);
}
