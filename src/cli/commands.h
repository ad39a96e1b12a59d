/* commands.h - the subcommands of the zerotrain command, one file each (cmd_<name>.c). Each takes
 * (argc, argv) with argv[0] the subcommand name and returns an exit code (a zt_status). */
#ifndef ZT_COMMANDS_H
#define ZT_COMMANDS_H

#include "zerotrain/zerotrain.h"

int zt_cmd_train(int argc, char **argv);
int zt_cmd_tokenize(int argc, char **argv);
int zt_cmd_chat_template(int argc, char **argv);
int zt_cmd_sample(int argc, char **argv);
int zt_cmd_bench(int argc, char **argv);
int zt_cmd_plot(int argc, char **argv);
int zt_cmd_verify(int argc, char **argv);
int zt_cmd_export(int argc, char **argv);
int zt_cmd_config(int argc, char **argv);
int zt_cmd_estimate(int argc, char **argv);
int zt_cmd_plan(int argc, char **argv);

/* Prints "zerotrain: <status>: <message>" to stderr and returns err->code. */
int zt_cli_fail(const zt_error *err);

#endif
