/* init.c - parameter initialization that does not depend on how a tensor is sharded: element i of
 * parameter "name" is a pure function of (seed, name, i) (a counter-based generator: splitmix64
 * of the key and index; normal: Box-Muller on the two 32-bit halves; uniform: the upper 53 bits).
 * Any rank can fill any slice; i is the index in the logical tensor, so a tensor-parallel part
 * (src/shard/tp.h) holds the values the whole model has there. */
#include "engine/init.h"
#include "shard/tp.h"

#include <math.h>
#include <string.h>

static uint64_t splitmix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

uint64_t zt_init_key(uint64_t seed, const char *name) {
    uint64_t h = 1469598103934665603ULL; /* FNV-1a of the name */
    for (const unsigned char *s = (const unsigned char *)name; *s; s++) h = (h ^ *s) * 1099511628211ULL;
    return splitmix64(seed ^ splitmix64(h));
}

/* dst[0..count) = elements begin..begin+count of the logical tensor */
static void fill_logical(float *dst, int64_t begin, int64_t count, zt_init_kind kind, float std, uint64_t key) {
    if (kind == ZT_INIT_ZEROS) {
        memset(dst, 0, (size_t)count * sizeof *dst);
        return;
    }
    if (kind == ZT_INIT_ONES) {
        for (int64_t i = 0; i < count; i++) dst[i] = 1.0f;
        return;
    }
    if (kind == ZT_INIT_UNIFORM) { /* U(-std, std): std is the bound */
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < count; i++) {
            uint64_t r = splitmix64(key + (uint64_t)(begin + i) * 0x9e3779b97f4a7c15ULL);
            dst[i] = (float)(std * (2.0 * ((double)(r >> 11) / 9007199254740992.0) - 1.0));
        }
        return;
    }
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < count; i++) {
        uint64_t r = splitmix64(key + (uint64_t)(begin + i) * 0x9e3779b97f4a7c15ULL);
        /* u1 in (0, 1], u2 in [0, 1) from 32 bits each */
        double u1 = ((double)(r >> 32) + 1.0) / 4294967296.0;
        double u2 = (double)(r & 0xffffffffu) / 4294967296.0;
        dst[i] = (float)(std * sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2));
    }
}

typedef struct fill_ctx {
    float *dst;
    int64_t begin;
    const zt_param_desc *p;
    uint64_t key;
} fill_ctx;

static int fill_run(void *ctx, int64_t local, int64_t logical, int64_t len) {
    fill_ctx *c = ctx;
    fill_logical(c->dst + (local - c->begin), logical, len, c->p->init, c->p->init_std, c->key);
    return 0;
}

void zt_init_fill(float *dst, const zt_param_desc *p, int64_t begin, int64_t count, uint64_t key) {
    fill_ctx c = {.dst = dst, .begin = begin, .p = p, .key = key};
    zt_tp_runs(p, p->tp_part, begin, count, fill_run, &c);
}
