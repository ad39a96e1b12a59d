/* sum_tree.c - the fixed summation tree over micro-batches (sum_tree.h). */
#include "memory/sum_tree.h"

#include <stddef.h>

void zt_sum_tree_push(zt_sum_tree *t, void *buf, zt_sum_merge_fn merge, void *ctx) {
    int level = 0;
    while (t->depth > 0 && t->level[t->depth - 1] == level) {
        void *left = t->buf[--t->depth];
        merge(ctx, left, buf);
        buf = left;
        level++;
    }
    t->buf[t->depth] = buf;
    t->level[t->depth++] = level;
}

void *zt_sum_tree_fold(zt_sum_tree *t, zt_sum_merge_fn merge, void *ctx) {
    if (t->depth == 0) return NULL;
    void *acc = t->buf[t->depth - 1];
    for (int i = t->depth - 2; i >= 0; i--) {
        merge(ctx, t->buf[i], acc);
        acc = t->buf[i];
    }
    t->depth = 0;
    return acc;
}
