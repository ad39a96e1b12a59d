/* main.c - the zerotrain command: dispatches to one subcommand per file (cmd_*.c) and maps
 * errors to the exit codes of DESIGN.md. */
#include "cli/commands.h"

#include <stdio.h>
#include <string.h>

int zt_cli_fail(const zt_error *err) {
    fprintf(stderr, "zerotrain: error (%s): %s\n", zt_status_name(err->code), err->msg);
    return err->code ? err->code : ZT_ERR_INTERNAL;
}

static void usage(FILE *out) {
    fprintf(out,
            "zerotrain %s - distributed training engine in C\n\n"
            "usage:\n"
            "  zerotrain train CONFIG [--nproc N] [--set key=value ...] [--save W.ztw] [--init W.ztw]\n"
            "  zerotrain estimate-memory CONFIG [--nproc N] [--set key=value ...] [--json]\n"
            "  zerotrain estimate-memory --model gpt2-124M|...|llama-70b --nproc N [-B b] [-T t] [--json]\n"
            "  zerotrain tokenize TEXT... -o data.bin [--val-fraction f]\n"
            "  zerotrain sample W.ztw [--prompt TEXT] [--tokens N] [--top-k K] [--temperature X]\n"
            "  zerotrain bench [--preset gpt2-124M] [-B 4] [-T 256] [--steps N] [--warmup W]\n"
            "  zerotrain verify CKPT\n"
            "  zerotrain export CKPT -o model.safetensors [--dtype fp32|bf16]\n"
            "  zerotrain version\n\n"
            "exit codes: 0 ok, 2 config/usage, 3 data, 4 checkpoint, 5 peer lost, 6 numerics,\n"
            "            7 out of memory, 8 I/O, 9 mismatch across ranks, 75 stopped by SIGTERM/SIGINT\n"
            "            after committing a checkpoint (docs/reliability.md)\n",
            ZT_VERSION);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return ZT_ERR_USAGE;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "train")) return zt_cmd_train(argc - 1, argv + 1);
    if (!strcmp(cmd, "tokenize")) return zt_cmd_tokenize(argc - 1, argv + 1);
    if (!strcmp(cmd, "sample")) return zt_cmd_sample(argc - 1, argv + 1);
    if (!strcmp(cmd, "bench")) return zt_cmd_bench(argc - 1, argv + 1);
    if (!strcmp(cmd, "plot")) return zt_cmd_plot(argc - 1, argv + 1);
    if (!strcmp(cmd, "verify")) return zt_cmd_verify(argc - 1, argv + 1);
    if (!strcmp(cmd, "export")) return zt_cmd_export(argc - 1, argv + 1);
    if (!strcmp(cmd, "config")) return zt_cmd_config(argc - 1, argv + 1);
    if (!strcmp(cmd, "estimate-memory")) return zt_cmd_estimate(argc - 1, argv + 1);
    if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) {
        printf("zerotrain %s\n", ZT_VERSION);
        return 0;
    }
    if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
        usage(stdout);
        return 0;
    }
    fprintf(stderr, "zerotrain: unknown command \"%s\"\n\n", cmd);
    usage(stderr);
    return ZT_ERR_USAGE;
}
