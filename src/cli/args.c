/* args.c - option values shared by the subcommands' parsers (args.h). */
#include "cli/args.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int zt_cli_parse_int(const char *cmd, const char *opt, const char *text, long lo, long hi, int *out, zt_error *err) {
    char *end;
    long v = strtol(text, &end, 10);
    if (!*text || *end || v < lo || v > hi)
        return zt_error_set(err, ZT_ERR_USAGE, "%s: %s wants an integer in [%ld, %ld], got \"%s\"", cmd, opt, lo, hi,
                            text);
    *out = (int)v;
    return ZT_OK;
}

int zt_cli_parse_choice(const char *cmd, const char *opt, const char *text, const char *const *names, int n, int *out,
                        zt_error *err) {
    for (int k = 0; k < n; k++)
        if (!strcmp(text, names[k])) {
            *out = k;
            return ZT_OK;
        }
    char known[256] = "";
    for (int k = 0; k < n; k++) snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", k ? ", " : "", names[k]);
    return zt_error_set(err, ZT_ERR_USAGE, "%s: %s \"%s\" (known: %s)", cmd, opt, text, known);
}
