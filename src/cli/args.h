/* args.h - option values shared by the subcommands' parsers (args.c): integers in a range and
 * one of a list of names, each refused with a message naming the command, the option and what it
 * accepts (exit 2, ZT_ERR_USAGE). */
#ifndef ZT_CLI_ARGS_H
#define ZT_CLI_ARGS_H

#include "zerotrain/zerotrain.h"

/* *out = text as a decimal integer in [lo, hi]; else ZT_ERR_USAGE "CMD: OPT wants an integer in
 * [lo, hi], got "text"". */
int zt_cli_parse_int(const char *cmd, const char *opt, const char *text, long lo, long hi, int *out, zt_error *err);
/* *out = the index of text in names[0..n); else ZT_ERR_USAGE "CMD: OPT "text" (known: a, b, ...)". */
int zt_cli_parse_choice(const char *cmd, const char *opt, const char *text, const char *const *names, int n, int *out,
                        zt_error *err);

#endif
