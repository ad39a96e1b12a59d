/* attention_compare.c - the two causal attention kernels side by side: attention.c (materializes
 * the (B,NH,T,T) probabilities) and flash_attention.c (online softmax, O(T) memory), forward and
 * backward, interleaved rep by rep so both see the same machine load.
 *
 *   OMP_WAIT_POLICY=passive attention_compare [-B 4] [-T 256] [-C 768] [--nh 12] [--nkv NH]
 *                                             [--reps 10] [--only naive|flash] [--doc L]
 *
 * --doc L: also flash attention on the same rows packed into documents of L tokens (zt_batch
 * positions 0..L-1 repeated; the last one shorter), interleaved with the unpacked flash run: the
 * speed of packing against one document per row.
 *
 * Prints per kernel: forward and backward time, the median over reps after one warm-up of each
 * (wall, and cpu = process CPU seconds / threads, which on a shared machine is the kernel's own
 * time), and the bytes each keeps between forward and backward plus its scratch. Data is random.
 * A final JSON line carries the numbers.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <omp.h>

#include "kernels/kernels.h"
#include "bench_util.h"

enum { MAXREP = 200 };

typedef struct timing {
    double wf[MAXREP], wb[MAXREP], cf[MAXREP], cb[MAXREP];
} timing;

int main(int argc, char **argv)
{
    int B = 4, T = 256, C = 768, NH = 12, NKV = 0, reps = 10, doc = 0;
    const char *only = "";
    print_platform();
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            printf("usage: attention_compare [-B 4] [-T 256] [-C 768] [--nh 12] [--nkv NH] [--reps 10] "
                   "[--only naive|flash] [--doc L]\n");
            return 0;
        }
        if (!v) {
            fprintf(stderr, "attention_compare: %s needs a value\n", a);
            return 2;
        }
        if (!strcmp(a, "-B")) B = atoi(v);
        else if (!strcmp(a, "-T")) T = atoi(v);
        else if (!strcmp(a, "-C")) C = atoi(v);
        else if (!strcmp(a, "--nh")) NH = atoi(v);
        else if (!strcmp(a, "--nkv")) NKV = atoi(v);
        else if (!strcmp(a, "--reps")) reps = atoi(v);
        else if (!strcmp(a, "--only")) only = v;
        else if (!strcmp(a, "--doc")) doc = atoi(v);
        else {
            fprintf(stderr, "attention_compare: unknown argument %s (try --help)\n", a);
            return 2;
        }
        i++;
    }
    if (!NKV) NKV = NH;
    if (B < 1 || T < 1 || NH < 1 || C % NH || NH % NKV || reps < 1 || reps > MAXREP) {
        fprintf(stderr, "attention_compare: need B, T >= 1, NH | C, NKV | NH, 1 <= reps <= %d\n", MAXREP);
        return 2;
    }
    bool run_naive = strcmp(only, "flash") != 0, run_flash = strcmp(only, "naive") != 0;
    int hs = C / NH, KV = NKV * hs, nt = omp_get_max_threads();
    size_t nq = (size_t)B * T * C, nk = (size_t)B * T * KV, na = (size_t)B * NH * T * T, nl = (size_t)B * NH * T;
    float *q = buf(nq), *k = buf(nk), *v = buf(nk), *dout = buf(nq), *out = buf(nq);
    float *dq = buf(nq), *dk = buf(nk), *dv = buf(nk);
    size_t nscr = attention_gqa_scratch_floats(B, T, NKV), fscr = flash_attention_scratch_floats(B, T, NH, NKV, hs);
    float *att = run_naive ? buf(na) : NULL, *scratch = run_naive ? buf(nscr) : NULL;
    float *lse = buf(nl), *fscratch = buf(fscr);
    timing *tn = calloc(1, sizeof *tn), *tf = calloc(1, sizeof *tf), *tp = calloc(1, sizeof *tp);
    int32_t *pos = doc > 0 ? malloc((size_t)B * T * sizeof *pos) : NULL;
    for (int i = 0; pos && i < B * T; i++)
        pos[i] = i % T % doc;

    for (int r = -1; r < reps; r++) { /* r = -1: warm-up */
        for (int which = 0; which < 3; which++) {
            if ((which == 0 && !run_naive) || (which == 1 && !run_flash) || (which == 2 && (!pos || !run_flash)))
                continue;
            timing *t = which == 2 ? tp : which ? tf : tn;
            const int32_t *p = which == 2 ? pos : NULL;
            double c0 = cpu_s(), w0 = now_s();
            if (which)
                flash_attention_gqa_forward(out, lse, fscratch, q, k, v, B, T, NH, NKV, hs, C, KV, false, p);
            else
                attention_gqa_forward(out, att, q, k, v, B, T, NH, NKV, hs, C, KV, NULL);
            double w1 = now_s(), c1 = cpu_s();
            if (which)
                flash_attention_gqa_backward(dq, dk, dv, fscratch, dout, q, k, v, out, lse, B, T, NH, NKV,
                                             hs, C, KV, false, p);
            else
                attention_gqa_backward(dq, dk, dv, scratch, dout, q, k, v, att, B, T, NH, NKV, hs, C, KV);
            double w2 = now_s(), c2 = cpu_s();
            if (r < 0) continue;
            t->wf[r] = w1 - w0, t->wb[r] = w2 - w1, t->cf[r] = (c1 - c0) / nt, t->cb[r] = (c2 - c1) / nt;
        }
    }
    printf("attention B=%d T=%d C=%d NH=%d NKV=%d hs=%d, %d threads, median of %d (ms)\n", B, T, C, NH, NKV, hs,
           nt, reps);
    double res[3][4];
    size_t bytes[3] = {(na + nscr) * 4, (nl + fscr) * 4, (nl + fscr) * 4};
    char packed_name[40];
    snprintf(packed_name, sizeof packed_name, "flash, docs of %d", doc);
    const char *names[3] = {"attention.c (naive)", "flash_attention.c", packed_name};
    for (int which = 0; which < 3; which++) {
        if ((which == 0 && !run_naive) || (which == 1 && !run_flash) || (which == 2 && (!pos || !run_flash)))
            continue;
        timing *t = which == 2 ? tp : which ? tf : tn;
        res[which][0] = 1e3 * median(t->wf, reps), res[which][1] = 1e3 * median(t->wb, reps);
        res[which][2] = 1e3 * median(t->cf, reps), res[which][3] = 1e3 * median(t->cb, reps);
        printf("%-20s wall fwd %8.2f bwd %8.2f | cpu fwd %8.2f bwd %8.2f sum %8.2f | saved+scratch %.1f MiB\n",
               names[which], res[which][0], res[which][1], res[which][2], res[which][3],
               res[which][2] + res[which][3], bytes[which] / 1048576.0);
    }
    printf("{\"B\":%d,\"T\":%d,\"C\":%d,\"NH\":%d,\"NKV\":%d,\"threads\":%d,\"reps\":%d,\"doc\":%d", B, T, C,
           NH, NKV, nt, reps, doc);
    for (int which = 0; which < 3; which++) {
        if ((which == 0 && !run_naive) || (which == 1 && !run_flash) || (which == 2 && (!pos || !run_flash)))
            continue;
        printf(",\"%s\":{\"fwd_ms\":%.3f,\"bwd_ms\":%.3f,\"cpu_fwd_ms\":%.3f,\"cpu_bwd_ms\":%.3f,\"bytes\":%zu}",
               which == 2 ? "flash_packed" : which ? "flash" : "naive", res[which][0], res[which][1], res[which][2],
               res[which][3], bytes[which]);
    }
    printf("}\n");
    free(q), free(k), free(v), free(dout), free(out), free(dq), free(dk), free(dv), free(att), free(scratch);
    free(lse), free(fscratch), free(tn), free(tf), free(tp), free(pos);
    return 0;
}
