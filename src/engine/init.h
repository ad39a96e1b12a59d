/* init.h - sharding-independent parameter initialization (see init.c). */
#ifndef ZT_INIT_H
#define ZT_INIT_H

#include "zerotrain/zerotrain.h"

/* The stream key of parameter name under seed. */
uint64_t zt_init_key(uint64_t seed, const char *name);
/* Fills dst[0..count) with elements begin..begin+count of parameter p's initial value, as this
 * process holds p (its tensor-parallel part: each element gets its logical index's value). key:
 * zt_init_key(seed, p->name). */
void zt_init_fill(float *dst, const zt_param_desc *p, int64_t begin, int64_t count, uint64_t key);

#endif
