/* tool_tokenize_ids.c - prints the ids a tokenizer.json gives each text file, one line per file,
 * for tests/tokenizer_spm.sh (which compares them with the references) and bench/tokenizer_spm.sh:
 *   tool_tokenize_ids TOKENIZER.json [--offsets] [--decode] [--repeat N] FILE...
 * --offsets prints id@offset (zt_bpe_encode_offsets); --decode prints, after the ids, a line "ok" when
 * decoding them gives the file's text back, else the decoded text as JSON-less raw bytes;
 * --repeat N encodes each file N times and prints "seconds S" (the best) to stderr. */
#include "data/tokenizer_json.h"

#include "core/file.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
    zt_error err = {0};
    zt_bpe *b = NULL;
    bool offsets = false, decode = false;
    int repeat = 0, rc;
    if (argc < 3) {
        fprintf(stderr, "usage: tool_tokenize_ids TOKENIZER.json [--offsets] [--decode] [--repeat N] FILE...\n");
        return 2;
    }
    if ((rc = zt_tokenizer_json_load(&b, argv[1], &err))) {
        fprintf(stderr, "tool_tokenize_ids: %s\n", err.msg);
        return rc;
    }
    for (int i = 2; i < argc && !rc; i++) {
        if (!strcmp(argv[i], "--offsets")) { offsets = true; continue; }
        if (!strcmp(argv[i], "--decode")) { decode = true; continue; }
        if (!strcmp(argv[i], "--repeat") && i + 1 < argc) { repeat = atoi(argv[++i]); continue; }
        char *text;
        size_t len, n;
        uint32_t *tok = NULL, *off = NULL;
        if ((rc = zt_read_file(argv[i], "text file", &text, &len, &err))) break;
        double best = 1e30;
        for (int r = 0; r < (repeat > 0 ? repeat : 1) && !rc; r++) {
            free(tok), free(off), tok = off = NULL;
            double t0 = now();
            rc = offsets ? zt_bpe_encode_offsets(b, text, len, &tok, &off, &n, &err) : zt_bpe_encode(b, text, len, &tok, &n, &err);
            if (now() - t0 < best) best = now() - t0;
        }
        if (!rc && repeat > 0) fprintf(stderr, "seconds %.6f tokens %zu\n", best, n);
        for (size_t k = 0; !rc && k < n; k++) offsets ? printf(k ? " %u@%u" : "%u@%u", tok[k], off[k]) : printf(k ? " %u" : "%u", tok[k]);
        if (!rc) putchar('\n');
        if (!rc && decode) {
            char *d;
            size_t dl;
            if (!(rc = zt_bpe_decode(b, tok, n, &d, &dl, &err))) {
                if (dl == len && !memcmp(d, text, len)) puts("ok");
                else printf("decoded: %s\n", d);
                free(d);
            }
        }
        free(tok), free(off), free(text);
    }
    if (rc) fprintf(stderr, "tool_tokenize_ids: %s\n", err.msg);
    zt_bpe_free(b);
    return rc;
}
