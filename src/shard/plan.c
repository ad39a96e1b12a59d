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

/* Granules: the fewest rows of a block whose elements are whole chunks; a block of rb rows has
 * ceil(rb / granule) of them (its last may be short), the parameter blocks x that. */
static int64_t granule_of(int64_t row_len) { return ZT_NORM_CHUNK / gcd64(row_len, ZT_NORM_CHUNK); }

void zt_plan_rows(int64_t rows, int64_t row_len, int blocks, int nshards, int s, int64_t *begin, int64_t *end) {
    int64_t nb = blocks > 1 ? blocks : 1, rb = rows / nb, granule = granule_of(row_len);
    int64_t per_block = (rb + granule - 1) / granule, units = nb * per_block;
    /* unit u begins at row (u / per_block)·rb + (u % per_block)·granule (one block: u·granule) */
#define ROW_OF(u) ((u) >= units ? rows : ((u) / per_block) * rb + ((u) % per_block) * granule)
    int64_t b = ROW_OF(units * s / nshards), e = ROW_OF(units * (s + 1) / nshards);
#undef ROW_OF
    *begin = b < rows ? b : rows;
    if (end) *end = e < rows ? e : rows;
}

/* chunks of one block of parameter p (all of them when it has one block) */
static int64_t block_chunks(const zt_param_plan *p) { return chunks_of(p->rows / p->blocks * p->row_len); }

int64_t zt_plan_param_chunks(const zt_plan *pl, int i) { return pl->p[i].blocks * block_chunks(&pl->p[i]); }

int64_t zt_plan_desc_chunks(const zt_param_desc *d) {
    int64_t nb = d->norm_blocks > 1 && d->shape[0] % d->norm_blocks == 0 ? d->norm_blocks : 1;
    return nb * chunks_of(d->numel / nb);
}

int zt_plan_create(const zt_model *m, int nshards, int shard, zt_plan *pl, zt_error *err) {
    zt_plan_group groups[ZT_SHARD_GROUP_COUNT];
    for (int g = 0; g < ZT_SHARD_GROUP_COUNT; g++) groups[g] = (zt_plan_group){nshards, shard};
    return zt_plan_create_groups(m, groups, pl, err);
}

int zt_plan_create_groups(const zt_model *m, const zt_plan_group *groups, zt_plan *pl, zt_error *err) {
    static const char *const GROUP_NAMES[ZT_SHARD_GROUP_COUNT] = {"data-parallel", "expert-data-parallel"};
    memset(pl, 0, sizeof *pl);
    for (int g = 0; g < ZT_SHARD_GROUP_COUNT; g++)
        if (groups[g].nshards < 1 || groups[g].shard < 0 || groups[g].shard >= groups[g].nshards)
            return zt_error_set(err, ZT_ERR_USAGE, "plan: shard %d of %d in the %s group", groups[g].shard,
                                groups[g].nshards, GROUP_NAMES[g]);
    memcpy(pl->groups, groups, sizeof pl->groups);
    pl->nshards = groups[ZT_SHARD_GROUP_DP].nshards;
    pl->shard = groups[ZT_SHARD_GROUP_DP].shard;
    pl->n_params = m->n_params;
    pl->p = calloc((size_t)m->n_params, sizeof *pl->p);
    if (!pl->p) return zt_error_set(err, ZT_ERR_NOMEM, "plan: out of memory");
    for (int i = 0; i < m->n_params; i++) {
        zt_param_plan *p = &pl->p[i];
        const zt_param_desc *d = &m->params[i];
        p->owner_unit = p->last_fwd_unit = -1;
        p->blocks = d->norm_blocks > 1 ? d->norm_blocks : 1;
        p->group = d->shard_group;
        if (p->group >= ZT_SHARD_GROUP_COUNT || d->shape[0] % p->blocks) {
            int group = p->group;
            zt_plan_free(pl);
            return group >= ZT_SHARD_GROUP_COUNT
                       ? zt_error_set(err, ZT_ERR_USAGE, "plan: parameter %s names shard group %d (0..%d)", d->name,
                                      group, ZT_SHARD_GROUP_COUNT - 1)
                       : zt_error_set(err, ZT_ERR_USAGE, "plan: parameter %s: %d norm blocks do not divide its %lld "
                                      "rows", d->name, d->norm_blocks, (long long)d->shape[0]);
        }
        p->nshards = groups[p->group].nshards;
        p->shard = groups[p->group].shard;
        p->row_begin = calloc((size_t)p->nshards + 1, sizeof *p->row_begin);
        if (!p->row_begin) {
            zt_plan_free(pl);
            return zt_error_set(err, ZT_ERR_NOMEM, "plan: out of memory");
        }
        p->rows = d->shape[0];
        p->row_len = d->numel / d->shape[0];
        for (int s = 0; s < p->nshards; s++)
            zt_plan_rows(p->rows, p->row_len, p->blocks, p->nshards, s, &p->row_begin[s], NULL);
        p->row_begin[p->nshards] = p->rows;
        p->full_off = pl->full_floats; /* a quantized parameter takes no room in the fp32 layouts */
        p->shard_off = pl->shard_floats;
        p->no_room = d->quant != 0;
        if (!d->quant) {
            pl->full_floats += align_up((size_t)d->numel);
            pl->shard_floats += align_up((size_t)zt_plan_shard_numel(pl, i, p->shard));
        }
        p->gfull_off = pl->gfull_floats; /* a frozen parameter takes no room in the gradient layouts */
        p->gshard_off = pl->gshard_floats;
        p->gnumel = d->numel * zt_param_expert_parts(d);
        p->gslot = pl->gslot_floats;
        if (d->trainable && p->gnumel > d->numel) pl->gslot_floats += align_up((size_t)(p->gnumel - d->numel));
        if (d->trainable) {
            pl->gfull_floats += align_up((size_t)d->numel);
            pl->gshard_floats += align_up((size_t)zt_plan_shard_numel(pl, i, p->shard));
        }
        pl->norm_chunks += zt_plan_param_chunks(pl, i);
    }
    pl->gbuf_floats = pl->gfull_floats + pl->gslot_floats;
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
    pl->gbuf_floats = pl->gfull_floats + pl->gslot_floats;
}

void zt_plan_align_pieces(zt_plan *pl, size_t align) {
    pl->shard_floats = 0;
    for (int i = 0; i < pl->n_params; i++) {
        pl->p[i].shard_off = pl->p[i].gshard_off = pl->shard_floats;
        if (!pl->p[i].no_room)
            pl->shard_floats += ((size_t)zt_plan_shard_numel(pl, i, pl->p[i].shard) + align - 1) / align * align;
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

int zt_plan_group_params(const zt_plan *pl, const int *params, int n, int g, int *out) {
    int k = 0;
    for (int j = 0; j < n; j++)
        if (pl->p[params[j]].group == g) out[k++] = params[j];
    return k;
}

/* The chunk of element `at` of parameter p (in its blocks' numbering), and one past the chunk of
 * element at - 1 (the end of a range ending at `at`) */
static int64_t chunk_at(const zt_param_plan *p, int64_t at) {
    int64_t bn = p->rows / p->blocks * p->row_len;
    return at / bn * block_chunks(p) + at % bn / ZT_NORM_CHUNK;
}
static int64_t chunk_end(const zt_param_plan *p, int64_t at) {
    int64_t bn = p->rows / p->blocks * p->row_len;
    return (at - 1) / bn * block_chunks(p) + ((at - 1) % bn) / ZT_NORM_CHUNK + 1;
}

void zt_plan_norm_chunks(const zt_plan *pl, int i, int s, int64_t *first, int64_t *count) {
    int64_t base = 0;
    for (int j = 0; j < i; j++) base += zt_plan_param_chunks(pl, j);
    zt_plan_norm_chunks_at(pl, i, s, base, first, count);
}

void zt_plan_norm_chunks_at(const zt_plan *pl, int i, int s, int64_t base, int64_t *first, int64_t *count) {
    const zt_param_plan *p = &pl->p[i];
    int64_t begin = zt_plan_shard_begin(pl, i, s), n = zt_plan_shard_numel(pl, i, s);
    *first = base + chunk_at(p, begin);
    *count = n ? chunk_end(p, begin + n) - chunk_at(p, begin) : 0;
}

bool zt_plan_piece_run(const zt_plan *pl, int i, int s, int k, int64_t *at, int64_t *n, int64_t *chunk) {
    const zt_param_plan *p = &pl->p[i];
    int64_t begin = zt_plan_shard_begin(pl, i, s), end = begin + zt_plan_shard_numel(pl, i, s);
    int64_t bn = p->rows / p->blocks * p->row_len;
    int64_t lo = begin / bn * bn + (int64_t)k * bn; /* block k of the piece starts at element lo (or before) */
    if (k < 0 || end == begin || lo >= end) return false;
    int64_t first, count;
    zt_plan_norm_chunks(pl, i, s, &first, &count);
    int64_t from = lo > begin ? lo : begin, to = lo + bn < end ? lo + bn : end;
    *at = from - begin;
    *n = to - from;
    *chunk = first + chunk_at(p, from) - chunk_at(p, begin);
    return true;
}
