/* sum_tree.h - the fixed summation tree over micro-batches, kept as a binary counter of partial
 * sums: entry i holds the sum of 2^level[i] consecutive items. Pushing item k merges it with the
 * equal-sized sums before it (left += right, right released), and folding adds the entries right to
 * left, so n items are summed in the pairwise tree over their indices whatever n is. The engine's
 * gradients (src/engine/grads.c) add floats through it; the memory plan (plan.c) counts the buffers
 * through it: one copy of the order. */
#ifndef ZT_MEMORY_SUM_TREE_H
#define ZT_MEMORY_SUM_TREE_H

#define ZT_SUM_TREE_MAX 64

typedef struct zt_sum_tree {
    int depth;
    int level[ZT_SUM_TREE_MAX];
    void *buf[ZT_SUM_TREE_MAX];
} zt_sum_tree;

/* left += right, and right's buffer released */
typedef void (*zt_sum_merge_fn)(void *ctx, void *left, void *right);

void zt_sum_tree_push(zt_sum_tree *t, void *buf, zt_sum_merge_fn merge, void *ctx);
/* The whole sum in one buffer (the leftmost entry's), the tree empty; NULL when it was empty. */
void *zt_sum_tree_fold(zt_sum_tree *t, zt_sum_merge_fn merge, void *ctx);

#endif
