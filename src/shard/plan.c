/* plan.c - building the per-parameter dim-0 shard plan (see plan.h for the invariants). */
#include "shard/plan.h"

#include <stdlib.h>
#include <string.h>

#define ALIGN_FLOATS 16 /* 64 bytes */

static int64_t gcd64(int64_t a, int64_t b) {
    while (b) {
        int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

static size_t align_up(size_t n) { return (n + ALIGN_FLOATS - 1) / ALIGN_FLOATS * ALIGN_FLOATS; }

static int64_t chunks_of(int64_t numel) { return (numel + ZT_NORM_CHUNK - 1) / ZT_NORM_CHUNK; }

void zt_plan_rows(int64_t rows, int64_t row_len, int nshards, int s, int64_t *begin, int64_t *end) {
    /* granule: the fewest rows whose element count is a multiple of the norm chunk */
    int64_t granule = ZT_NORM_CHUNK / gcd64(row_len, ZT_NORM_CHUNK);
    int64_t granules = (rows + granule - 1) / granule;
    int64_t b = granules * s / nshards * granule, e = granules * (s + 1) / nshards * granule;
    *begin = b < rows ? b : rows;
    if (end) *end = e < rows ? e : rows;
}

int zt_plan_create(const zt_model *m, int nshards, int shard, zt_plan *pl, zt_error *err) {
    memset(pl, 0, sizeof *pl);
    if (nshards < 1 || shard < 0 || shard >= nshards)
        return zt_error_set(err, ZT_ERR_USAGE, "plan: shard %d of %d", shard, nshards);
    pl->nshards = nshards;
    pl->shard = shard;
    pl->n_params = m->n_params;
    pl->p = calloc((size_t)m->n_params, sizeof *pl->p);
    if (!pl->p) return zt_error_set(err, ZT_ERR_NOMEM, "plan: out of memory");
    for (int i = 0; i < m->n_params; i++) {
        zt_param_plan *p = &pl->p[i];
        p->owner_unit = p->last_fwd_unit = -1;
        p->row_begin = calloc((size_t)nshards + 1, sizeof *p->row_begin);
        if (!p->row_begin) {
            zt_plan_free(pl);
            return zt_error_set(err, ZT_ERR_NOMEM, "plan: out of memory");
        }
        const zt_param_desc *d = &m->params[i];
        p->rows = d->shape[0];
        p->row_len = d->numel / d->shape[0];
        for (int s = 0; s < nshards; s++) zt_plan_rows(p->rows, p->row_len, nshards, s, &p->row_begin[s], NULL);
        p->row_begin[nshards] = p->rows;
        p->full_off = pl->full_floats; /* a quantized parameter takes no room in the fp32 layouts */
        p->shard_off = pl->shard_floats;
        p->no_room = d->quant != 0;
        if (!d->quant) {
            pl->full_floats += align_up((size_t)d->numel);
            pl->shard_floats += align_up((size_t)zt_plan_shard_numel(pl, i, shard));
        }
        p->gfull_off = pl->gfull_floats; /* a frozen parameter takes no room in the gradient layouts */
        p->gshard_off = pl->gshard_floats;
        if (d->trainable) {
            pl->gfull_floats += align_up((size_t)d->numel);
            pl->gshard_floats += align_up((size_t)zt_plan_shard_numel(pl, i, shard));
        }
        pl->norm_chunks += chunks_of(d->numel);
    }
    for (int u = 0; u < m->n_units; u++)
        for (int k = 0; k < m->units[u].n_params; k++) {
            zt_param_plan *p = &pl->p[m->units[u].params[k]];
            if (p->owner_unit < 0) p->owner_unit = u;
            p->last_fwd_unit = u;
        }
    return ZT_OK;
}

void zt_plan_keep_frozen_slots(zt_plan *pl) {
    for (int i = 0; i < pl->n_params; i++) {
        pl->p[i].gfull_off = pl->p[i].full_off;
        pl->p[i].gshard_off = pl->p[i].shard_off;
    }
    pl->gfull_floats = pl->full_floats;
    pl->gshard_floats = pl->shard_floats;
}

void zt_plan_align_pieces(zt_plan *pl, size_t align) {
    pl->shard_floats = 0;
    for (int i = 0; i < pl->n_params; i++) {
        pl->p[i].shard_off = pl->p[i].gshard_off = pl->shard_floats;
        if (!pl->p[i].no_room)
            pl->shard_floats += ((size_t)zt_plan_shard_numel(pl, i, pl->shard) + align - 1) / align * align;
    }
    pl->gshard_floats = pl->shard_floats;
}

void zt_plan_free(zt_plan *pl) {
    if (pl->p)
        for (int i = 0; i < pl->n_params; i++) free(pl->p[i].row_begin);
    free(pl->p);
    memset(pl, 0, sizeof *pl);
}

int zt_plan_bucket_end(const zt_model *m, const int *params, int n, int first, size_t limit_floats) {
    size_t acc = 0;
    int k = first;
    for (; k < n; k++) {
        size_t numel = (size_t)m->params[params[k]].numel;
        if (k > first && acc + numel > limit_floats) break;
        acc += numel;
    }
    return k;
}

void zt_plan_norm_chunks(const zt_plan *pl, int i, int s, int64_t *first, int64_t *count) {
    int64_t base = 0;
    for (int j = 0; j < i; j++) base += chunks_of(pl->p[j].rows * pl->p[j].row_len);
    int64_t begin = zt_plan_shard_begin(pl, i, s), n = zt_plan_shard_numel(pl, i, s);
    *first = base + begin / ZT_NORM_CHUNK;
    *count = n ? (begin + n + ZT_NORM_CHUNK - 1) / ZT_NORM_CHUNK - begin / ZT_NORM_CHUNK : 0;
}
