/* main.c - the zerotrain command: one table of subcommands (name, one-line summary, synopsis, the
 * function in its cmd_<name>.c), the dispatch over it, and the exit codes of docs/design.md.
 * `zerotrain --help` lists every row; `zerotrain NAME --help` prints the row's summary before the
 * subcommand's own usage. */
#include "cli/commands.h"
#include "comm/build_id.h"
#include "core/cpu_isa.h"
#include "kernels/gemm.h"
#include "kernels/kernels.h"

#include <stdio.h>
#include <string.h>

int zt_cli_fail(const zt_error *err) {
    fprintf(stderr, "zerotrain: error (%s): %s\n", zt_status_name(err->code), err->msg);
    return err->code ? err->code : ZT_ERR_INTERNAL;
}

/* The version, then the build fingerprint the ranks of a job compare at start (comm/build_id.h). */
static int cmd_version(int argc, char **argv) {
    printf("zerotrain %s\n", ZT_VERSION);
    zt_build_id b;
    zt_build_id_get(&b);
    for (int k = 1; k < ZT_BUILD_FIELDS; k++) printf("  %-9s %s\n", zt_build_field_name(k), b.v[k]);
    char line[512];
    zt_cpu_describe(zt_cpu_features_get(), line, sizeof line);
    printf("  %-9s %s\n", "cpu", line);
    printf("  %-9s %s\n", "kernels", zt_kernels_path());
    printf("  %-9s fp32 %s; bf16 %s\n", "gemm", zt_gemm_path(false), zt_gemm_path(true));
    return 0;
}

typedef struct subcommand {
    const char *name;
    int (*run)(int argc, char **argv); /* argv[0] is the name */
    const char *summary;               /* what it does, one line */
    const char *synopsis;              /* its main forms; `zerotrain NAME --help` has every option */
} subcommand;

static const subcommand COMMANDS[] = {
    {"train", zt_cmd_train, "train a model from a config, on this process or on --nproc local ranks",
     "train CONFIG [--nproc N [--hostfile FILE]] [--set key=value ...] [--save W.ztw] [--init W.ztw]\n"
     "      [--ckpt-dir DIR] [--ckpt-every N] [--resume DIR]"},
    {"config", zt_cmd_config, "resolve a native, DeepSpeed or Accelerate config and print the run it means",
     "config CONFIG [--set key=value ...] [--nproc N] [--print | --json]   |   config --docs"},
    {"estimate-memory", zt_cmd_estimate, "bytes per rank for every strategy, before any run",
     "estimate-memory CONFIG [--nproc N] [--set key=value ...] [--json]\n"
     "      estimate-memory --model gpt2-124M|...|llama-70b --nproc N [-B b] [-T t] [--json]"},
    {"plan", zt_cmd_plan, "predict step time, MFU, memory and exposed communication at scale, per strategy, tp and pp",
     "plan --model llama-70b --nodes 64 --gpus-per-node 8 --gpu h100 --intra 450GB/s --inter 400Gb/s\n"
     "      [--seq 4096] [--micro-batch 1] [--global-batch G] [--precision bf16] [--ac none|selective|full]\n"
     "      [--tp T] [--pp P] [--pp-schedule 1f1b|gpipe] [--json]"},
    {"tokenize", zt_cmd_tokenize, "GPT-2 BPE of text files into llm.c-format token files",
     "tokenize TEXT... -o data.bin [--val-fraction f]"},
    {"chat-template", zt_cmd_chat_template, "render a conversation with a model's chat template (Jinja)",
     "chat-template TOKENIZER_CONFIG.json|T.jinja --messages M.json [--add-generation-prompt] [--spans]\n"
     "      chat-template --batch LIST.tsv (many renderings in one process)"},
    {"sample", zt_cmd_sample, "generate text from trained weights",
     "sample W.ztw [--prompt TEXT] [--tokens N] [--top-k K] [--temperature X]"},
    {"bench", zt_cmd_bench, "time training steps of a preset (tokens/s, MFU, time breakdown)",
     "bench [--preset gpt2-124M] [-B 4] [-T 256] [--steps N] [--warmup W] [--nproc N]"},
    {"verify", zt_cmd_verify, "check a checkpoint commit's manifest and every file's checksum",
     "verify CKPT"},
    {"export", zt_cmd_export, "write a checkpoint or a .ztw weights file as safetensors or GGUF",
     "export CKPT|W.ztw -o model.safetensors [--dtype fp32|bf16] | --gguf F [--type q8_0]"},
    {"plot", zt_cmd_plot, "plot JSONL metrics or a trace timeline to PNG; merge per-rank traces",
     "plot RUN.jsonl... -o out.png   |   plot --timeline trace.json -o t.png   |   plot --merge-traces ..."},
    {"version", cmd_version, "print the version", "version"},
};
#define N_COMMANDS (sizeof COMMANDS / sizeof *COMMANDS)

static void usage(FILE *out) {
    fprintf(out, "zerotrain %s - distributed training engine in C\n\nusage: zerotrain COMMAND [options]"
                 "   (zerotrain COMMAND --help: its options)\n\ncommands:\n", ZT_VERSION);
    for (size_t i = 0; i < N_COMMANDS; i++)
        fprintf(out, "  %-16s %s\n      %s\n", COMMANDS[i].name, COMMANDS[i].summary, COMMANDS[i].synopsis);
    fprintf(out, "\nexit codes: 0 ok, 2 config/usage, 3 data, 4 checkpoint, 5 peer lost, 6 numerics,\n"
                 "            7 out of memory, 8 I/O, 9 mismatch across ranks, 70 internal error,\n"
                 "            75 stopped by SIGTERM/SIGINT after committing a checkpoint (docs/reliability.md)\n");
}

static bool is_help(const char *s) { return !strcmp(s, "--help") || !strcmp(s, "-h") || !strcmp(s, "help"); }

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return ZT_ERR_USAGE;
    }
    zt_error err = {0};
    if (zt_kernels_init(&err) != ZT_OK) return zt_cli_fail(&err); /* ZT_ISA the CPU cannot run */
    const char *cmd = argv[1];
    if (is_help(cmd)) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(cmd, "--version")) cmd = "version";
    for (size_t i = 0; i < N_COMMANDS; i++) {
        if (strcmp(cmd, COMMANDS[i].name)) continue;
        if (argc >= 3 && (!strcmp(argv[2], "--help") || !strcmp(argv[2], "-h")))
            printf("zerotrain %s: %s\n", COMMANDS[i].name, COMMANDS[i].summary);
        return COMMANDS[i].run(argc - 1, argv + 1);
    }
    fprintf(stderr, "zerotrain: unknown command \"%s\"\n\n", cmd);
    usage(stderr);
    return ZT_ERR_USAGE;
}
