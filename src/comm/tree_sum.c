/* tree_sum.c - zt_tree_sum_f32 / _bf16 / _fp16: the one order in which zerotrain adds floats that
 * come from different ranks (and, in the engine, from different micro-batches), in fp32 or with
 * every partial sum rounded to bf16 or fp16 (precision.reduce_dtype).
 *
 *   sum(lo,hi) = hi-lo == 1 ? p[lo] : sum(lo,mid) + sum(mid,hi),   mid = lo + (hi-lo)/2
 *
 *   nparts = 4:          +            nparts = 3:        +
 *                      /   \                            / \
 *                     +     +                         p0   +
 *                    / \   / \                            / \
 *                   p0 p1 p2 p3                          p1  p2
 *
 * Invariants:
 *   - Element i of the result depends only on parts[0..nparts-1][i] and nparts: the tree is the
 *     same for every element, blocks only bound the working set. Vectorizing changes nothing
 *     (IEEE addition of two floats is exactly rounded, and each + is one instruction per lane;
 *     no FMA can form, since nothing is multiplied).
 *   - The work goes in blocks of ZT_TS_BLOCK floats; an inner node's partial sum lives in a
 *     block-sized temporary on the stack (two per tree level), so the inputs stream from memory
 *     once and the temporaries stay in L1. Leaves are read in place, never copied.
 *   - out may be the same pointer as a part: each output block is written last, by one
 *     element-wise loop whose operands are read at the same index before the store.
 *   - bf16: the parts are bf16 bit patterns; every + of the tree is an fp32 add of two bf16 values
 *     rounded to the nearest bf16 (nearest-even, src/kernels/convert.c's rule: what NCCL's bf16
 *     sum does at each step), so a subtree's sum is a bf16 value and a two-level reduction whose
 *     first level is a subtree (hybrid: the group, then the replicas) gives the flat tree's bits.
 *   - fp16: the same with fp16 (F16C's nearest-even; a sum past 65504 becomes infinity, which the
 *     loss-scaled step's finite check then sees; fp16 subnormals are kept).
 * Single-threaded on purpose: the engine calls it from its communication thread while OpenMP
 * kernels own the other cores.
 */
#include "comm/comm.h"
#include "kernels/kernels.h"

#include <string.h>

#define ZT_TS_BLOCK 512 /* floats: 2 KiB per temporary */

/* d[i] = a[i] + b[i]; d may be a or b (same index only), hence no restrict and ivdep. */
static void add2(float *d, const float *a, const float *b, size_t n) {
#pragma GCC ivdep
    for (size_t i = 0; i < n; i++) d[i] = a[i] + b[i];
}

/* sum(lo,hi) over elements [i0, i0+m) into dst, returning where the result is (a leaf is
 * returned in place). tmp holds two blocks per level below `level`. */
static const float *tree_block(const float *const *parts, int lo, int hi, size_t i0, size_t m,
                               float (*tmp)[ZT_TS_BLOCK], int level, float *dst) {
    if (hi - lo == 1) return parts[lo] + i0;
    int mid = lo + (hi - lo) / 2;
    const float *a = tree_block(parts, lo, mid, i0, m, tmp, level + 1, tmp[2 * level]);
    const float *b = tree_block(parts, mid, hi, i0, m, tmp, level + 1, tmp[2 * level + 1]);
    add2(dst, a, b, m);
    return dst;
}

void zt_tree_sum_f32(float *out, const float *const *parts, int nparts, size_t n) {
    if (nparts < 1 || n == 0) return;
    if (nparts == 1) {
        if (out != parts[0]) memmove(out, parts[0], n * sizeof *out);
        return;
    }
    if (nparts == 2) { /* the common case: one streaming loop, no temporaries */
        add2(out, parts[0], parts[1], n);
        return;
    }
    int depth = 0; /* levels of inner nodes below the root: ceil(log2(nparts)) - 1 */
    while ((1 << (depth + 1)) < nparts) depth++;
    float tmp[2 * depth + 2][ZT_TS_BLOCK] __attribute__((aligned(64)));
    for (size_t i0 = 0; i0 < n; i0 += ZT_TS_BLOCK) {
        size_t m = n - i0 < ZT_TS_BLOCK ? n - i0 : ZT_TS_BLOCK;
        tree_block(parts, 0, nparts, i0, m, tmp, 0, out + i0);
    }
}

/* The 2-byte formats: bit patterns widened to fp32 (exact), summed pairwise in fp32 and rounded
 * back to the format at every node (kernels/convert.c). */
typedef struct half_ops {
    void (*widen)(float *dst, const uint16_t *src, size_t n);
    void (*add_round)(float *d, const float *a, const float *b, size_t n);
    void (*narrow)(uint16_t *dst, const float *src, size_t n);
} half_ops;

static const half_ops BF16_OPS = {zt_bf16_to_f32_serial, zt_add_round_bf16, zt_f32_to_bf16_serial};
static const half_ops FP16_OPS = {zt_fp16_to_f32_serial, zt_add_round_fp16, zt_f32_to_fp16_serial};

/* A leaf is widened into its node's temporary, an inner node is the rounded sum of its children;
 * the result stays in fp32 holding a value of the format until the root narrows it. */
static float *tree_block_half(const half_ops *ops, const uint16_t *const *parts, int lo, int hi, size_t i0,
                              size_t m, float (*tmp)[ZT_TS_BLOCK], int level, float *dst) {
    if (hi - lo == 1) {
        ops->widen(dst, parts[lo] + i0, m);
        return dst;
    }
    int mid = lo + (hi - lo) / 2;
    const float *a = tree_block_half(ops, parts, lo, mid, i0, m, tmp, level + 1, tmp[2 * level]);
    const float *b = tree_block_half(ops, parts, mid, hi, i0, m, tmp, level + 1, tmp[2 * level + 1]);
    ops->add_round(dst, a, b, m);
    return dst;
}

static void tree_sum_half(const half_ops *ops, uint16_t *out, const uint16_t *const *parts, int nparts, size_t n) {
    if (nparts < 1 || n == 0) return;
    if (nparts == 1) {
        if (out != parts[0]) memmove(out, parts[0], n * sizeof *out);
        return;
    }
    int depth = 0;
    while ((1 << (depth + 1)) < nparts) depth++;
    float tmp[2 * depth + 2][ZT_TS_BLOCK] __attribute__((aligned(64)));
    float root[ZT_TS_BLOCK] __attribute__((aligned(64)));
    for (size_t i0 = 0; i0 < n; i0 += ZT_TS_BLOCK) {
        size_t m = n - i0 < ZT_TS_BLOCK ? n - i0 : ZT_TS_BLOCK;
        tree_block_half(ops, parts, 0, nparts, i0, m, tmp, 0, root);
        /* root holds values of the format: narrowing is exact (this block's inputs were all read) */
        ops->narrow(out + i0, root, m);
    }
}

void zt_tree_sum_bf16(uint16_t *out, const uint16_t *const *parts, int nparts, size_t n) {
    tree_sum_half(&BF16_OPS, out, parts, nparts, n);
}

void zt_tree_sum_fp16(uint16_t *out, const uint16_t *const *parts, int nparts, size_t n) {
    tree_sum_half(&FP16_OPS, out, parts, nparts, n);
}

size_t zt_dtype_bytes(zt_dtype dtype) { return dtype == ZT_DTYPE_FP32 ? sizeof(float) : sizeof(uint16_t); }

void zt_tree_sum(zt_dtype dtype, void *out, const void *const *parts, int nparts, size_t n) {
    if (dtype == ZT_DTYPE_BF16)
        zt_tree_sum_bf16(out, (const uint16_t *const *)parts, nparts, n);
    else if (dtype == ZT_DTYPE_FP16)
        zt_tree_sum_fp16(out, (const uint16_t *const *)parts, nparts, n);
    else
        zt_tree_sum_f32(out, (const float *const *)parts, nparts, n);
}
