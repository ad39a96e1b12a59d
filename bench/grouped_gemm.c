/* grouped_gemm.c - the experts' grouped products (src/kernels/grouped_gemm.c: moe_grouped_forward /
 * moe_grouped_backward, one fp32 matmul per expert over its rows) against the GEMM-bound limit for
 * their shapes: the same products as ONE dense product over the summed rows, through the same entry
 * points (matmul_forward / matmul_backward, so the same backend, oneDNN primitive cache and shape
 * policy of src/kernels/gemm.c). Issue 34's goal: the grouped products at >= 85% of that limit.
 *
 * Shapes: one MoE layer of bench/moe.sh's step (llama-124M-moe: B=4 T=256 -> 1024 tokens x top-2 =
 * 2048 rows, E=8 experts, C=768, expert width I=1024; each expert's rows padded to 64, as
 * src/model/llama_moe.c does), the six products of llama_moe.c's order:
 *   forward   gate = xp W1^T, up = xp W3^T (n x 768 -> 1024), y = h W2^T (n x 1024 -> 768)
 *   backward  W2: dh = dy W2, dW2 += dy^T h;  W1: dxp = dgate W1, dW1 += dgate^T xp;
 *             W3: dxp += dup W3, dW3 += dup^T xp
 * for row counts evenly routed (256 an expert) and unevenly (a skewed split, padded). The dense
 * limit runs each product once over all the rows (2048 + padding) with one expert's weight.
 * GFLOP/s = 2 M N K / s over the rows the products run (padding included; "useful" counts only the
 * routed rows). Median of --reps timed rounds after --warmup, the grouped and the dense interleaved.
 *
 *   OMP_NUM_THREADS=2 build/bench/grouped_gemm [--reps 15] [--warmup 3] [--tokens 1024]
 */
#include "bench_util.h"
#include "kernels/gemm.h"
#include "kernels/kernels.h"

#include <omp.h>
#include <string.h>

enum { E = 8, TOPK = 2, C = 768, I = 1024, TILE = 64, MAXR = 64 };

typedef struct bufs {
    float *xp, *gate, *up, *h, *y, *dy, *dh, *dgate, *dup, *dxp, *W1, *W2, *W3, *dW1, *dW2, *dW3;
} bufs;

/* one layer's six products over the rows in offsets (E groups; a dense run is one group) */
static void layer(const bufs *b, const int32_t *off, int groups, double *t_fwd, double *t_bwd) {
    double t0 = now_s();
    moe_grouped_forward(b->gate, b->xp, b->W1, off, groups, C, I);
    moe_grouped_forward(b->up, b->xp, b->W3, off, groups, C, I);
    moe_grouped_forward(b->y, b->h, b->W2, off, groups, I, C);
    double t1 = now_s();
    moe_grouped_backward(b->dh, b->dW2, b->dy, b->h, b->W2, off, groups, I, C, 0);
    moe_grouped_backward(b->dxp, b->dW1, b->dgate, b->xp, b->W1, off, groups, C, I, 0);
    moe_grouped_backward(b->dxp, b->dW3, b->dup, b->xp, b->W3, off, groups, C, I, ZT_MM_DINP_ADD);
    *t_fwd = t1 - t0;
    *t_bwd = now_s() - t1;
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
    printf("| routing | rows run (routed) | grouped fwd ms | dense fwd ms | grouped bwd ms | dense bwd ms | grouped "
           "GFLOP/s | dense GFLOP/s | grouped / dense (the share of the limit) | useful rows' share |\n"
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
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
        double *gf = malloc(4 * (size_t)reps * sizeof(double)), *gb = gf + reps, *df = gf + 2 * reps, *db = gf + 3 * reps;
        for (int i = -warmup; i < reps; i++) {
            double a, c, d, e2;
            layer(&b, off, E, &a, &c);
            layer(&b, dense, 1, &d, &e2);
            if (i >= 0) gf[i] = a, gb[i] = c, df[i] = d, db[i] = e2;
        }
        double mgf = median(gf, reps), mgb = median(gb, reps), mdf = median(df, reps), mdb = median(db, reps);
        double flops = 2.0 * 9.0 * (double)off[E] * C * I; /* 3 forward + 6 backward products of M x C x I */
        double g = flops / (mgf + mgb) / 1e9, d = flops / (mdf + mdb) / 1e9;
        printf("| %s | %d (%d) | %.2f | %.2f | %.2f | %.2f | %.1f | %.1f | **%.1f%%** | %.1f%% |\n", names[s], off[E], rows,
               1e3 * mgf, 1e3 * mdf, 1e3 * mgb, 1e3 * mdb, g, d, 100.0 * g / d, 100.0 * g / d * rows / off[E]);
        free(gf);
    }
    printf("\ngoal: the grouped products at >= 85%% of the dense product's GFLOP/s over the same rows\n");
    return 0;
}
