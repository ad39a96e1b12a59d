/* fuzz_jinja.c - libFuzzer target for the Jinja interpreter (src/data/jinja_*.c): the input is a
 * template's source, parsed and rendered twice with one fixed set of variables (a conversation
 * with a system message, tool calls and unicode, bos/eos tokens, tools, add_generation_prompt;
 * strftime_now pinned). Not built by CMake; tests/fuzz/README.md says how.
 *
 * Beyond "no crash, no sanitizer report", it traps when a contract breaks: a refused template is
 * ZT_ERR_DATA (or ZT_ERR_NOMEM) with a message that names the template ("fuzz.jinja:") and leaves
 * the handle NULL; a failed render is the same with no output; a successful one is
 * NUL-terminated at *len, and the second render gives the same status and the same bytes. */
#include "data/jinja.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *VARS =
    "{\"messages\": [{\"role\": \"system\", \"content\": \"  Be brief. \"}, {\"role\": \"user\", \"content\": \"Hi \\u00e9\\ud83d\\ude00\"},"
    " {\"role\": \"assistant\", \"content\": null, \"tool_calls\": [{\"id\": \"call12345\", \"type\": \"function\", \"function\":"
    " {\"name\": \"f\", \"arguments\": {\"x\": 1.5, \"y\": [true, null]}}}]}, {\"role\": \"tool\", \"content\": \"{}\"},"
    " {\"role\": \"assistant\", \"content\": \"<think>a</think>done\"}], \"bos_token\": \"<s>\", \"eos_token\": \"</s>\","
    " \"add_generation_prompt\": true, \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {}}}]}";

static void check_error(int rc, const zt_error *err) {
    if ((rc != ZT_ERR_DATA && rc != ZT_ERR_NOMEM) || err->code != rc || !memchr(err->msg, '\0', sizeof err->msg) ||
        !strstr(err->msg, "fuzz.jinja"))
        __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static cJSON *vars;
    if (!vars && !(vars = cJSON_Parse(VARS))) __builtin_trap();
    zt_jinja *t = (zt_jinja *)1;
    zt_error err = {0};
    int rc = zt_jinja_parse(&t, (const char *)data, size, "fuzz.jinja", &err);
    if (rc != ZT_OK) {
        check_error(rc, &err);
        if (t) __builtin_trap();
        return 0;
    }
    zt_jinja_set_now(t, 1721995200);
    char *out[2] = {(char *)1, (char *)1};
    size_t len[2] = {0, 0};
    int rcs[2];
    for (int k = 0; k < 2; k++) {
        zt_error e = {0};
        rcs[k] = zt_jinja_render(t, vars, &out[k], &len[k], &e);
        if (rcs[k] != ZT_OK) {
            check_error(rcs[k], &e);
            if (out[k]) __builtin_trap();
        } else if (!out[k] || out[k][len[k]] != '\0') __builtin_trap();
    }
    if (rcs[0] != rcs[1] || (rcs[0] == ZT_OK && (len[0] != len[1] || memcmp(out[0], out[1], len[0])))) __builtin_trap();
    free(out[0]);
    free(out[1]);
    zt_jinja_free(t);
    return 0;
}
