/* grouped_gemm.c - the experts' grouped products (src/kernels/grouped_gemm.c: moe_grouped_forward /
 * moe_grouped_backward, the experts side by side on the threads, each product on one) against the GEMM-bound limit for
 * their shapes: the same products as ONE dense product over the summed rows, through the same entry
 * points (matmul_forward / matmul_backward, so the same backend, oneDNN primitive cache and shape
 * policy of src/kernels/gemm.c). Issue 34's goal: the grouped products at >= 85% of that limit.
 *
 * Shapes: one MoE layer of bench/moe.sh's step (llama-124M-moe: B=4 T=256 -> 1024 tokens x top-2 =
 * 2048 rows, E=8 experts, C=768, expert width I=1024; each expert's rows as routed, unpadded, as
 * src/model/llama_moe.c runs them in fp32: llama_moe.h's zt_moe_row_tile), the six products of llama_moe.c's order:
 *   forward   gate = xp W1^T, up = xp W3^T (n x 768 -> 1024), y = h W2^T (n x 1024 -> 768)
 *   backward  W2: dh = dy W2, dW2 += dy^T h;  W1: dxp = dgate W1, dW1 += dgate^T xp;
 *             W3: dxp += dup W3, dW3 += dup^T xp
 * for row counts evenly routed (256 an expert) and unevenly (a skewed split). The dense
 * limit runs each product once over all the rows (2048) with one expert's weight.
 * GFLOP/s = 2 M N K / s over the rows the products run ("useful" counts only the routed rows: the
 * same without padding). Median of --reps timed rounds after --warmup, the grouped and the dense interleaved.
 *
 *   OMP_NUM_THREADS=2 build/bench/grouped_gemm [--reps 15] [--warmup 3] [--tokens 1024]
 */
#include "bench_util.h"
#include "kernels/gemm.h"
#include "kernels/kernels.h"
#include "model/llama_moe.h"

#include <omp.h>
#include <string.h>

enum { E = 8, TOPK = 2, C = 768, I = 1024, MAXR = 64 };
#define TILE zt_moe_row_tile(0) /* fp32's: 1 (no padding rows) */

typedef struct bufs {
    float *xp, *gate, *up, *h, *y, *dy, *dh, *dgate, *dup, *dxp, *W1, *W2, *W3, *dW1, *dW2, *dW3;
} bufs;

static const char *kind_name[9] = {"fwd xp W1^T", "fwd xp W3^T", "fwd h W2^T", "W2 dinp", "W2 dW", "W1 dinp",
                                   "W1 dW", "W3 dinp (+=)", "W3 dW"};

/* product kind k of expert e over rows [r0, r0 + n) as a threaded matmul (matmul_forward,
 * matmul_backward's two products apart): the dense limit's */
static void product(const bufs *b, int k, int e, int r0, int n) {
    size_t wI = (size_t)e * I * C, xo = (size_t)r0 * C, io = (size_t)r0 * I;
    switch (k) {
    case 0: matmul_forward(b->gate + io, b->xp + xo, b->W1 + wI, NULL, n, C, I); break;
    case 1: matmul_forward(b->up + io, b->xp + xo, b->W3 + wI, NULL, n, C, I); break;
    case 2: matmul_forward(b->y + xo, b->h + io, b->W2 + wI, NULL, n, I, C); break;
    case 3: matmul_backward(b->dh + io, NULL, NULL, b->dy + xo, b->h + io, b->W2 + wI, n, I, C, 0); break;
    case 4: matmul_backward(NULL, b->dW2 + wI, NULL, b->dy + xo, b->h + io, b->W2 + wI, n, I, C, 0); break;
    case 5: matmul_backward(b->dxp + xo, NULL, NULL, b->dgate + io, b->xp + xo, b->W1 + wI, n, C, I, 0); break;
    case 6: matmul_backward(NULL, b->dW1 + wI, NULL, b->dgate + io, b->xp + xo, b->W1 + wI, n, C, I, 0); break;
    case 7: matmul_backward(b->dxp + xo, NULL, NULL, b->dup + io, b->xp + xo, b->W3 + wI, n, C, I, ZT_MM_DINP_ADD); break;
    default: matmul_backward(NULL, b->dW3 + wI, NULL, b->dup + io, b->xp + xo, b->W3 + wI, n, C, I, 0); break;
    }
}

/* product kind k of every expert over its rows: the grouped kernel itself (src/kernels/grouped_gemm.c,
 * the experts side by side on the threads), a backward kind with the other product skipped */
static void grouped(const bufs *b, int k, const int32_t *off) {
    switch (k) {
    case 0: moe_grouped_forward(b->gate, b->xp, b->W1, off, E, C, I, 0); break;
    case 1: moe_grouped_forward(b->up, b->xp, b->W3, off, E, C, I, 0); break;
    case 2: moe_grouped_forward(b->y, b->h, b->W2, off, E, I, C, 0); break;
    case 3: moe_grouped_backward(b->dh, NULL, b->dy, b->h, b->W2, off, E, I, C, 0, 0, NULL); break;
    case 4: moe_grouped_backward(NULL, b->dW2, b->dy, b->h, b->W2, off, E, I, C, 0, 0, NULL); break;
    case 5: moe_grouped_backward(b->dxp, NULL, b->dgate, b->xp, b->W1, off, E, C, I, 0, 0, NULL); break;
    case 6: moe_grouped_backward(NULL, b->dW1, b->dgate, b->xp, b->W1, off, E, C, I, 0, 0, NULL); break;
    case 7: moe_grouped_backward(b->dxp, NULL, b->dup, b->xp, b->W3, off, E, C, I, ZT_MM_DINP_ADD, 0, NULL); break;
    default: moe_grouped_backward(NULL, b->dW3, b->dup, b->xp, b->W3, off, E, C, I, 0, 0, NULL); break;
    }
}

/* kind k over the groups of off (E experts: the grouped kernel; -E: the former kernel, each expert's
 * product threaded, one after the other; the dense run: one group, expert 0's weight, one threaded
 * product); wall and CPU s */
static void run(const bufs *b, int k, const int32_t *off, int groups, double *wall, double *cpu) {
    double t0 = now_s(), c0 = cpu_s();
    if (groups > 1)
        grouped(b, k, off);
    for (int e = 0; groups <= 1 && e < (groups < 0 ? -groups : 1); e++)
        if (off[e + 1] > off[e]) product(b, k, e, off[e], off[e + 1] - off[e]);
    *wall = now_s() - t0;
    *cpu = cpu_s() - c0;
}

int main(int argc, char **argv) {
    int reps = 15, warmup = 3, tokens = 1024;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--warmup") && i + 1 < argc) warmup = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--tokens") && i + 1 < argc) tokens = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: grouped_gemm [--reps 15] [--warmup 3] [--tokens 1024]\n");
            return 2;
        }
    }
    if (reps < 1) reps = 1;
    print_platform();
    printf("gemm path: %s\n", zt_gemm_path(false));
    int rows = tokens * TOPK, maxrows = rows + E * (TILE - 1);
    bufs b = {buf((size_t)maxrows * C), buf((size_t)maxrows * I), buf((size_t)maxrows * I), buf((size_t)maxrows * I),
              buf((size_t)maxrows * C), buf((size_t)maxrows * C), buf((size_t)maxrows * I), buf((size_t)maxrows * I),
              buf((size_t)maxrows * I), buf((size_t)maxrows * C), buf((size_t)E * I * C), buf((size_t)E * C * I),
              buf((size_t)E * I * C), buf((size_t)E * I * C), buf((size_t)E * C * I), buf((size_t)E * I * C)};
    /* routed rows per expert: even, and a skewed split (shares 2:3:4:5:5:6:7:8 of 40) */
    static const int skew[E] = {2, 3, 4, 5, 5, 6, 7, 8};
    const char *names[2] = {"even (256 rows an expert)", "skewed 2:3:4:5:5:6:7:8"};
    printf("one MoE layer of bench/moe.sh (llama-124M-moe, %d tokens x top-%d = %d rows, E=%d, C=%d, I=%d, rows "
           "padded to %d), fp32, %d threads, median of %d after %d\n\n", tokens, TOPK, rows, E, C, I, TILE,
           omp_get_max_threads(), reps, warmup);
    printf("| routing | rows run (routed) | grouped ms (9 products) | dense ms | grouped GFLOP/s | dense GFLOP/s | "
           "grouped / dense (the share of the limit) | the same per CPU-second | useful rows' share | the former kernel "
           "(each product threaded, in turn) / dense |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    static char detail[2][9][200];
    for (int s = 0; s < 2; s++) {
        int32_t off[E + 1], dense[2] = {0, 0};
        int routed[E], left = rows;
        for (int e = 0; e < E; e++) {
            routed[e] = s == 0 ? rows / E : (e == E - 1 ? left : rows * skew[e] / 40);
            left -= routed[e];
        }
        off[0] = 0;
        for (int e = 0; e < E; e++) off[e + 1] = off[e] + (routed[e] + TILE - 1) / TILE * TILE;
        dense[1] = off[E];
        /* [kind][rep]: grouped wall, dense wall, grouped CPU, dense CPU, the former kernel's wall */
        double *t = malloc(9 * 5 * (size_t)reps * sizeof(double));
        for (int i = -warmup; i < reps; i++)
            for (int k = 0; k < 9; k++) {
                double gw, gc, dw, dc, fw, fc;
                run(&b, k, off, E, &gw, &gc);
                run(&b, k, dense, 1, &dw, &dc);
                run(&b, k, off, -E, &fw, &fc);
                if (i >= 0) {
                    double *r = t + (size_t)k * 5 * reps;
                    r[i] = gw, r[reps + i] = dw, r[2 * reps + i] = gc, r[3 * reps + i] = dc, r[4 * reps + i] = fw;
                }
            }
        double sum[5] = {0, 0, 0, 0, 0}, m[9][5];
        for (int k = 0; k < 9; k++)
            for (int q = 0; q < 5; q++) sum[q] += m[k][q] = median(t + ((size_t)k * 5 + q) * reps, reps);
        double flops = 2.0 * (double)off[E] * C * I; /* every product: M x C x I */
        printf("| %s | %d (%d) | %.2f | %.2f | %.1f | %.1f | **%.1f%%** | %.1f%% | %.1f%% | %.1f%% |\n", names[s], off[E],
               rows, 1e3 * sum[0], 1e3 * sum[1], 9 * flops / sum[0] / 1e9, 9 * flops / sum[1] / 1e9,
               100.0 * sum[1] / sum[0], 100.0 * sum[3] / sum[2], 100.0 * sum[1] / sum[0] * rows / off[E],
               100.0 * sum[1] / sum[4]);
        for (int k = 0; k < 9; k++)
            snprintf(detail[s][k], sizeof detail[s][k], "| %s | %s | %.3f | %.3f | %.1f | %.1f | %.1f%% |", names[s],
                     kind_name[k], 1e3 * m[k][0], 1e3 * m[k][1], flops / m[k][0] / 1e9, flops / m[k][1] / 1e9,
                     100.0 * m[k][1] / m[k][0]);
        free(t);
    }
    printf("\nper product (the same rows run):\n\n| routing | product | grouped ms | dense ms | grouped GFLOP/s | dense "
           "GFLOP/s | grouped / dense |\n|---|---|---:|---:|---:|---:|---:|\n");
    for (int s = 0; s < 2; s++)
        for (int k = 0; k < 9; k++) printf("%s\n", detail[s][k]);
    printf("\ngoal: the grouped products at >= 85%% of the dense product's GFLOP/s over the same rows\n");
    return 0;
}
