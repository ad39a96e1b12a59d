/* cmd_verify.c - `zerotrain verify CKPT`: checks a checkpoint commit's manifest checksum and every
 * shard file's size and xxh64 (exit 4 naming the file on a mismatch). */
#include "ckpt/checkpoint.h"
#include "cli/commands.h"

#include <stdio.h>
#include <string.h>

int zt_cmd_verify(int argc, char **argv) {
    zt_error err = {0};
    if (argc != 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        printf("usage: zerotrain verify CKPT   (a step-N commit, or a checkpoint directory: its newest commit)\n");
        return argc == 2 ? 0 : ZT_ERR_USAGE;
    }
    char commit[4096];
    if (zt_ckpt_resolve(argv[1], commit, sizeof commit, &err) || zt_ckpt_verify(commit, &err))
        return zt_cli_fail(&err);
    printf("%s: ok (manifest and every shard checksum match)\n", commit);
    return 0;
}
