/* init.h - sharding-independent parameter initialization (see init.c). */
#ifndef ZT_INIT_H
#define ZT_INIT_H

#include "zerotrain/zerotrain.h"

/* The stream key of parameter name under seed. */
uint64_t zt_init_key(uint64_t seed, const char *name);
/* Fills dst[0..count) with elements begin..begin+count of the parameter's initial value. */
void zt_init_fill(float *dst, int64_t begin, int64_t count, zt_init_kind kind, float std,
                  uint64_t key);

#endif
