/* collect.c - the engine's collectives over its shard plan: parameters and gradients are packed
 * rank-major (block s = shard s's rows of each parameter in the bucket, back to back, no padding)
 * so one reduce-scatter or all-gather moves a whole bucket (Horovod's tensor fusion), and the
 * traffic is exactly the formulas: a reduce-scatter sends sum_{s != me} |block s|, an all-gather
 * sends (N-1)·|own block|. Buckets hold whole parameters up to opt.bucket_bytes (a parameter
 * larger than that is a bucket of its own).
 *
 * Gradient reductions run in the policy's reduce dtype (precision.reduce): in bf16 (fp16 alike)
 * each rank's fp32 gradient is rounded to bf16 as it is packed (its contribution, a leaf of the
 * summation tree), the collective moves and sums bf16 (src/comm: every partial sum rounded to
 * bf16), and the result is widened back into the fp32 buffers, which then hold bf16 values. This
 * happens even where no message moves (one shard, one rank): the reduce dtype is what a rank
 * contributes, so one rank's result is its own gradient rounded, as DeepSpeed's
 * communication_data_type does. Parameter all-gathers move fp32 whatever the reduce dtype. */
#include "comm/comm.h"
#include "engine/engine_internal.h"
#include "comm/p2p.h"
#include "engine/pipeline.h"
#include "kernels/kernels.h"
#include "memory/plan.h"
#include "obs/trace.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

/* The staging buffers are allocated at creation with the memory plan's size (the largest bucket
 * each thread stages), so this only grows one when the plan missed a bucket: the measured comm
 * class then exceeds the plan, which tests/memory_plan.sh would report. */
static int grow_pack(zt_engine *e, float **pack, size_t *cap, size_t floats, zt_error *err) {
    if (floats <= *cap) return ZT_OK;
    zt_engine_release(e, pack, *cap, &e->mem.comm);
    *pack = zt_engine_alloc(e, floats, &e->mem.comm, "a bucket's staging (pack)");
    *cap = *pack ? floats : 0;
    return *pack ? ZT_OK : zt_engine_oom(e, err, "engine: a %zu-float bucket", floats);
}


/* A gradient into the bucket in the reduce dtype (bf16, fp16: rounded nearest-even; fp16 past
 * 65504 becomes infinity), and the reduced elements back into fp32. Serial: they run on the
 * communication thread too. */
static void pack_grad(zt_dtype dt, unsigned char *dst, const float *src, size_t n) {
    if (dt == ZT_DTYPE_BF16)
        zt_f32_to_bf16_serial((uint16_t *)dst, src, n);
    else if (dt == ZT_DTYPE_FP16)
        zt_f32_to_fp16_serial((uint16_t *)dst, src, n);
    else
        memcpy(dst, src, n * sizeof(float));
}

static void unpack_grad(zt_dtype dt, float *dst, const unsigned char *src, size_t n) {
    if (dt == ZT_DTYPE_BF16)
        zt_bf16_to_f32_serial(dst, (const uint16_t *)src, n);
    else if (dt == ZT_DTYPE_FP16)
        zt_fp16_to_f32_serial(dst, (const uint16_t *)src, n);
    else
        memcpy(dst, src, n * sizeof(float));
}

/* Splits params[0..n) into buckets; calls fn(e, first, count, ...) for each. */
typedef int (*bucket_fn)(zt_engine *e, const int *params, int n, void *ctx, const char *tag, zt_error *err);

/* One bucket: traced, its wall time added to *timer. */
static int run_bucket(zt_engine *e, const int *params, int n, size_t floats, bucket_fn fn, void *ctx,
                      const char *tag, double *timer, zt_error *err) {
    zt_trace_begin("bucket", tag);
    double t0 = omp_get_wtime();
    int rc = fn(e, params, n, ctx, tag, err);
    *timer += omp_get_wtime() - t0;
    zt_trace_end_args(2, (zt_trace_arg[]){ZT_TARG_NUM("params", n), ZT_TARG_NUM("floats", floats)});
    return rc;
}

/* Splits params[0..n) into buckets of whole parameters up to opt.bucket_bytes and runs fn on each.
 * timer: the calling thread's communication-time accumulator (the main thread's is e->comm_s; the
 * communication thread keeps its own, since its time overlaps the compute). */
static int for_each_bucket(zt_engine *e, const int *params, int n, bucket_fn fn, void *ctx,
                           const char *tag, double *timer, zt_error *err) {
    size_t limit = e->opt.bucket_bytes / sizeof(float);
    int *mine = n > 0 && e->edp_groups ? malloc((size_t)n * sizeof *mine) : NULL;
    if (n > 0 && e->edp_groups && !mine) return zt_error_set(err, ZT_ERR_NOMEM, "engine: out of memory (%s)", tag);
    int rc = ZT_OK;
    /* a bucket holds one shard group's parameters (the dense ones, then the experts stored E/ep) */
    for (int g = 0; g < (e->edp_groups ? ZT_SHARD_GROUP_COUNT : 1) && !rc; g++) {
        const int *list = params;
        int count = n;
        if (mine) list = mine, count = zt_plan_group_params(&e->plan, params, n, g, mine);
        for (int first = 0; first < count && !rc;) {
            int end = zt_plan_bucket_end(e->model, list, count, first, limit);
            size_t acc = 0;
            for (int k = first; k < end; k++) acc += (size_t)e->model->params[list[k]].numel;
            rc = run_bucket(e, list + first, end - first, acc, fn, ctx, tag, timer, err);
            first = end;
        }
    }
    free(mine);
    return rc;
}

/* A bucket's shard group (its parameters share one, for_each_bucket) and the comm its collective
 * runs on: the caller's (the shard group's, ddp's data-parallel ranks, hybrid's replica group, or
 * the communication thread's duplicate), or for the experts stored E/ep a rank the
 * expert-data-parallel ranks' (hybrid: the edp ranks of the shard group, or across the replicas) */
static const zt_plan_group *bucket_group(const zt_engine *e, const int *params) {
    return &e->plan.groups[e->plan.p[params[0]].group];
}
static zt_comm *bucket_comm(const zt_engine *e, const int *params, zt_comm *comm) {
    if (e->plan.p[params[0]].group != ZT_SHARD_GROUP_EDP) return comm;
    if (comm && comm == zt_overlap_comm(e)) return zt_overlap_edp_comm(e);
    return comm && comm == e->replica_comm ? e->edp_replica_comm : e->edp_comm;
}

static void block_counts(const zt_engine *e, const int *params, int n, size_t *counts, size_t *total) {
    const zt_plan *pl = &e->plan;
    *total = 0;
    for (int s = 0; s < bucket_group(e, params)->nshards; s++) {
        counts[s] = 0;
        for (int k = 0; k < n; k++) counts[s] += (size_t)zt_plan_shard_numel(pl, params[k], s);
        *total += counts[s];
    }
}

/* ---- reduce-scatter of full gradients into pieces (dst: the gradient shard layout, gshard_off) - */
typedef struct rs_ctx {
    float *const *src; /* indexed like the full params list */
    const int *all;    /* the full params list, to find src of a bucket's parameter */
    float **by_param;  /* with the shard groups apart (buckets of a filtered list): src by parameter */
    float *dst;
    zt_comm *comm;     /* the shard group, or the communication thread's duplicate of it */
    float **pack;      /* staging owned by the calling thread */
    size_t *pack_cap;
} rs_ctx;

static int rs_bucket(zt_engine *e, const int *params, int n, void *vctx, const char *tag, zt_error *err) {
    rs_ctx *c = vctx;
    const zt_plan *pl = &e->plan;
    const zt_plan_group *G = bucket_group(e, params);
    zt_dtype dt = e->opt.precision.reduce;
    size_t elem = zt_dtype_bytes(dt);
    size_t counts[G->nshards], total;
    block_counts(e, params, n, counts, &total);
    int rc = grow_pack(e, c->pack, c->pack_cap, zt_memory_floats_for_bytes(total * elem), err);
    if (rc) return rc;
    const int base = c->by_param ? 0 : (int)(params - c->all);
    unsigned char *pack = (unsigned char *)*c->pack, *w = pack;
    for (int s = 0; s < G->nshards; s++)
        for (int k = 0; k < n; k++) {
            size_t cnt = (size_t)zt_plan_shard_numel(pl, params[k], s);
            const float *src = c->by_param ? c->by_param[params[k]] : c->src[base + k];
            pack_grad(dt, w, src + zt_plan_shard_begin(pl, params[k], s), cnt);
            w += cnt * elem;
        }
    unsigned char *own = pack;
    for (int s = 0; s < G->shard; s++) own += counts[s] * elem;
    if (G->nshards > 1 && (rc = zt_reduce_scatter(bucket_comm(e, params, c->comm), dt, pack, own, counts, tag, err)))
        return rc;
    for (int k = 0; k < n; k++) {
        size_t cnt = (size_t)zt_plan_shard_numel(pl, params[k], G->shard);
        /* gradient layout, or (gradient offload, dst NULL) the piece's place in its window */
        unpack_grad(dt, c->dst ? c->dst + pl->p[params[k]].gshard_off : e->grad_at[params[k]], own, cnt);
        own += cnt * elem;
    }
    return ZT_OK;
}

int zt_engine_reduce_scatter_on(zt_engine *e, zt_comm *comm, float **pack, size_t *pack_cap, double *timer,
                                const int *params, int n, float *const *src, float *dst, const char *tag,
                                zt_error *err) {
    rs_ctx c = {src, params, NULL, dst, comm, pack, pack_cap};
    if (e->edp_groups) { /* for_each_bucket hands buckets of a filtered list */
        if (!(c.by_param = calloc((size_t)e->model->n_params, sizeof *c.by_param)))
            return zt_error_set(err, ZT_ERR_NOMEM, "engine: out of memory (%s)", tag);
        for (int k = 0; k < n; k++) c.by_param[params[k]] = src[k];
    }
    int rc = for_each_bucket(e, params, n, rs_bucket, &c, tag, timer, err);
    free(c.by_param);
    return rc;
}

int zt_engine_reduce_scatter(zt_engine *e, const int *params, int n, float *const *src, float *dst,
                             const char *tag, zt_error *err) {
    return zt_engine_reduce_scatter_on(e, e->shard_comm, &e->pack, &e->pack_floats, &e->comm_s, params, n, src,
                                       dst, tag, err);
}

/* ---- all-gather of pieces into full tensors --------------------------------------------------- */
/* Elements are fp32, or bf16-low's 2-byte parameters (elem 2: half the bytes on the wire and in
 * the staging; the buckets are the same parameters either way). */
typedef struct ag_ctx {
    const void *pieces;  /* shard layout source, or NULL: the piece regions of the destinations */
    void *const *dst;    /* per parameter index: full tensor destination */
    size_t elem;         /* bytes per element: 4, or 2 (bf16) */
    int round_kind;      /* nonzero: pieces are fp32, packed rounded to this zt_lp_kind (elem bytes) */
    zt_comm *comm;       /* the shard group, or the communication thread's duplicate of it */
    float **pack;        /* staging owned by the calling thread */
    size_t *pack_cap;
    float *const *piece_at; /* parameter offload: per parameter index, its piece read into a window
                               (param_offload.c); NULL otherwise */
} ag_ctx;

static int ag_bucket(zt_engine *e, const int *params, int n, void *vctx, const char *tag, zt_error *err) {
    ag_ctx *c = vctx;
    const zt_plan *pl = &e->plan;
    const zt_plan_group *G = bucket_group(e, params);
    size_t counts[G->nshards], total, E = c->elem;
    block_counts(e, params, n, counts, &total);
    int rc = grow_pack(e, c->pack, c->pack_cap, zt_memory_floats_for_bytes(total * E), err);
    if (rc) return rc;
    char *pack = (char *)*c->pack, *own = pack;
    for (int s = 0; s < G->shard; s++) own += counts[s] * E;
    char *w = own;
    for (int k = 0; k < n; k++) {
        int i = params[k];
        size_t cnt = (size_t)zt_plan_shard_numel(pl, i, G->shard);
        if (c->round_kind) /* master_shard.c: the compute copy of the fp32 master's rows */
            zt_round_to_lp((zt_lp_kind)c->round_kind, w, (const float *)c->pieces + pl->p[i].shard_off, cnt);
        else if (c->piece_at)
            memcpy(w, c->piece_at[i], cnt * E);
        else
            memcpy(w, c->pieces ? (const char *)c->pieces + pl->p[i].shard_off * E
                                : (const char *)c->dst[i] + (size_t)zt_plan_shard_begin(pl, i, G->shard) * E,
                   cnt * E);
        w += cnt * E;
    }
    zt_comm *comm = bucket_comm(e, params, c->comm);
    if (G->nshards > 1 &&
        (rc = E == sizeof(float) ? zt_all_gather_f32(comm, (float *)own, (float *)pack, counts, tag, err)
                                 : zt_all_gather_bf16(comm, (uint16_t *)own, (uint16_t *)pack, counts, tag, err)))
        return rc;
    const char *r = pack;
    for (int s = 0; s < G->nshards; s++)
        for (int k = 0; k < n; k++) {
            int i = params[k];
            size_t cnt = (size_t)zt_plan_shard_numel(pl, i, s);
            memcpy((char *)c->dst[i] + (size_t)zt_plan_shard_begin(pl, i, s) * E, r, cnt * E);
            r += cnt * E;
        }
    return ZT_OK;
}

int zt_engine_gather_params_on(zt_engine *e, zt_comm *comm, float **pack, size_t *pack_cap, double *timer,
                               const int *params, int n, const char *tag, zt_error *err) {
    size_t elem;
    const void *pieces = zt_store_pieces(e, &elem);
    ag_ctx c = {pieces, zt_store_gathered_slots(e), elem, 0, comm, pack, pack_cap, NULL};
    if (zt_store_file_kind(e) >= 0) { /* parameter offload: the pieces' reads (queued ahead) must be done */
        zt_trace_begin("offload", "wait for pieces");
        int rc = zt_param_offload_load(e, params, n, err);
        zt_trace_end();
        if (rc) return rc;
        c.piece_at = e->piece_at;
    }
    return for_each_bucket(e, params, n, ag_bucket, &c, tag, timer, err);
}

int zt_engine_gather_params(zt_engine *e, const int *params, int n, const char *tag, zt_error *err) {
    return zt_engine_gather_params_on(e, e->shard_comm, &e->pack, &e->pack_floats, &e->comm_s, params, n, tag,
                                      err);
}

/* One parameter needs no staging: shard s's rows are block s of the full tensor, so the
 * all-gather runs in place in dst (outside the steps: hashes, exports, consolidated weights). */
int zt_engine_gather_param(zt_engine *e, int i, float *dst, zt_error *err) {
    const zt_plan *pl = &e->plan;
    const zt_plan_group *G = bucket_group(e, &i);
    zt_comm *comm = bucket_comm(e, &i, e->shard_comm);
    size_t counts[G->nshards];
    for (int s = 0; s < G->nshards; s++) counts[s] = (size_t)zt_plan_shard_numel(pl, i, s);
    size_t elem;
    const char *pieces = zt_store_pieces(e, &elem);
    if (zt_store_bf16(e)) { /* bf16 in the first half of dst, then widened in place from the back */
        uint16_t *half = (uint16_t *)(void *)dst, *own = half + zt_plan_shard_begin(pl, i, G->shard);
        memcpy(own, pieces + pl->p[i].shard_off * elem, counts[G->shard] * sizeof(uint16_t));
        int rc = ZT_OK;
        if (G->nshards > 1) {
            double t0 = omp_get_wtime();
            rc = zt_all_gather_bf16(comm, own, half, counts, e->model->params[i].name, err);
            e->comm_s += omp_get_wtime() - t0;
        }
        /* element j's 4 bytes overlap only bf16 elements >= j, already widened */
        for (size_t j = (size_t)e->model->params[i].numel; !rc && j-- > 0;) {
            uint16_t h;
            memcpy(&h, (char *)dst + j * sizeof h, sizeof h);
            uint32_t u = (uint32_t)h << 16;
            memcpy((char *)dst + j * sizeof(float), &u, sizeof u);
        }
        return rc;
    }
    float *own = dst + zt_plan_shard_begin(pl, i, G->shard);
    int rc = zt_store_read(e, i, 0, counts[G->shard], own, err); /* from memory or the file */
    if (rc) return rc;
    if (G->nshards < 2) return ZT_OK;
    double t0 = omp_get_wtime();
    rc = zt_all_gather_f32(comm, own, dst, counts, e->model->params[i].name, err);
    e->comm_s += omp_get_wtime() - t0;
    return rc;
}

int zt_engine_all_gather_full(zt_engine *e, zt_error *err) {
    int n = e->model->n_params;
    int *all = malloc((size_t)n * sizeof *all);
    void **dsts = malloc((size_t)n * sizeof *dsts);
    int rc = ZT_OK;
    if (!all || !dsts) rc = zt_error_set(err, ZT_ERR_NOMEM, "engine: out of memory");
    int nt = 0; /* the updated parameters: a frozen one did not change */
    for (int i = 0; i < n && !rc; i++) {
        if (!e->model->params[i].trainable) continue;
        all[nt++] = i;
        dsts[i] = zt_store_full_at(e, i);
    }
    ag_ctx c = {NULL, dsts, zt_store_bf16(e) ? sizeof(uint16_t) : sizeof(float), 0, e->shard_comm, &e->pack, &e->pack_floats,
                NULL};
    if (!rc && nt) rc = for_each_bucket(e, all, nt, ag_bucket, &c, "parameters", &e->comm_s, err);
    free(all);
    free(dsts);
    return rc;
}

int zt_engine_all_gather_rounded(zt_engine *e, const int *params, int n, void *const *dst, size_t elem,
                                 int round_kind, const char *tag, zt_error *err) {
    size_t have;
    ag_ctx c = {zt_store_pieces(e, &have), dst, elem, round_kind, e->shard_comm, &e->pack, &e->pack_floats, NULL};
    return for_each_bucket(e, params, n, ag_bucket, &c, tag, &e->comm_s, err);
}

/* ---- all-reduce of packed regions (ddp gradients, hybrid pieces), in the gradient layouts ------ */
typedef struct ar_ctx {
    zt_comm *comm;
    float *base;  /* the layout's base, or NULL (pieces): each piece at e->grad_at[i] */
    bool pieces; /* regions are this rank's pieces (shard layout) instead of full tensors */
    float **pack; /* the calling thread's bucket staging */
    size_t *pack_cap;
} ar_ctx;

static int ar_bucket(zt_engine *e, const int *params, int n, void *vctx, const char *tag, zt_error *err) {
    ar_ctx *c = vctx;
    const zt_plan *pl = &e->plan;
    zt_dtype dt = e->opt.precision.reduce;
    size_t elem = zt_dtype_bytes(dt);
    size_t total = 0;
    for (int k = 0; k < n; k++)
        total += c->pieces ? (size_t)zt_plan_shard_numel(pl, params[k], pl->p[params[k]].shard)
                           : (size_t)e->model->params[params[k]].numel;
    int rc = grow_pack(e, c->pack, c->pack_cap, zt_memory_floats_for_bytes(total * elem), err);
    if (rc) return rc;
    unsigned char *w = (unsigned char *)*c->pack;
    for (int k = 0; k < n; k++) {
        int i = params[k];
        size_t cnt = c->pieces ? (size_t)zt_plan_shard_numel(pl, i, pl->p[i].shard) : (size_t)e->model->params[i].numel;
        pack_grad(dt, w, c->base ? c->base + (c->pieces ? pl->p[i].gshard_off : pl->p[i].gfull_off) : e->grad_at[i],
                  cnt);
        w += cnt * elem;
    }
    zt_comm *comm = bucket_comm(e, params, c->comm); /* NULL: a group of one rank (its own sum, rounded) */
    if (comm && (rc = zt_all_reduce(comm, dt, *c->pack, total, tag, err))) return rc;
    const unsigned char *r = (const unsigned char *)*c->pack;
    for (int k = 0; k < n; k++) {
        int i = params[k];
        size_t cnt = c->pieces ? (size_t)zt_plan_shard_numel(pl, i, pl->p[i].shard) : (size_t)e->model->params[i].numel;
        unpack_grad(dt, c->base ? c->base + (c->pieces ? pl->p[i].gshard_off : pl->p[i].gfull_off) : e->grad_at[i],
                    r, cnt);
        r += cnt * elem;
    }
    return ZT_OK;
}

static int all_reduce_all(zt_engine *e, zt_comm *comm, float *base, bool pieces, const char *tag, zt_error *err) {
    int n = e->model->n_params;
    int *all = malloc((size_t)n * sizeof *all);
    if (!all) return zt_error_set(err, ZT_ERR_NOMEM, "engine: out of memory");
    int nt = 0; /* the trainable parameters (a frozen one has no gradient) */
    for (int i = 0; i < n; i++)
        if (e->model->params[i].trainable) all[nt++] = i;
    ar_ctx c = {comm, base, pieces, &e->pack, &e->pack_floats};
    int rc = nt ? for_each_bucket(e, all, nt, ar_bucket, &c, tag, &e->comm_s, err) : ZT_OK;
    free(all);
    return rc;
}

int zt_engine_all_reduce_full_on(zt_engine *e, zt_comm *comm, float **pack, size_t *pack_cap, double *timer,
                                 const int *params, int n, float *G, const char *tag, zt_error *err) {
    ar_ctx c = {comm, G, false, pack, pack_cap};
    return for_each_bucket(e, params, n, ar_bucket, &c, tag, timer, err);
}

int zt_engine_all_reduce_full(zt_engine *e, float *G, zt_error *err) {
    return all_reduce_all(e, e->opt.comm, G, false, "gradients", err);
}

int zt_engine_all_reduce_pieces(zt_engine *e, float *pieces, zt_error *err) {
    return all_reduce_all(e, e->replica_comm, pieces, true, "gradient pieces across replicas", err);
}

int zt_engine_all_reduce_pieces_at(zt_engine *e, const int *params, int n, const char *tag, zt_error *err) {
    ar_ctx c = {e->replica_comm, NULL, true, &e->pack, &e->pack_floats};
    return for_each_bucket(e, params, n, ar_bucket, &c, tag, &e->comm_s, err);
}

/* ---- small exact sums ---------------------------------------------------------------------------- */
/* Chunks [*first, *first + result) of the norm partials (global indices) are parameter i's rows
 * held by shard s; base is parameter i's first chunk. As zt_plan_norm_chunks, without its scan. */
static size_t shard_chunks(const zt_plan *pl, int i, int s, int64_t base, int64_t *first) {
    int64_t count;
    zt_plan_norm_chunks_at(pl, i, s, base, first, &count);
    return (size_t)count;
}

/* Visits every (shard, parameter) chunk range of shard group g in that order; off = its place in
 * the gathered array. pass 0 packs this rank's ranges, pass 1 unpacks the others'. */
static size_t walk_chunks(const zt_engine *e, int g, double *x, double *all, size_t *counts, int pass) {
    const zt_plan *pl = &e->plan;
    const zt_plan_group *G = &pl->groups[g];
    size_t off = 0;
    for (int s = 0; s < G->nshards; s++) {
        int64_t base = 0, first;
        if (counts) counts[s] = 0;
        for (int i = 0; i < e->model->n_params; i++) {
            size_t k = pl->p[i].group == g ? shard_chunks(pl, i, s, base, &first) : 0;
            if (k && pass == 0 && s == G->shard) memcpy(all + off, x + first, k * sizeof *x);
            if (k && pass == 1 && s != G->shard) memcpy(x + first, all + off, k * sizeof *x);
            off += k;
            if (counts) counts[s] += k;
            base += zt_plan_param_chunks(pl, i);
        }
    }
    return off;
}

/* A chunk of the norm partials belongs to the one shard whose rows hold it (shards start on
 * chunk boundaries, plan.h), so each rank sends only its own chunks and receives every other
 * rank's: plan.norm_chunks doubles in all, whatever the number of ranks (the all-gather of the
 * whole array from every rank held N times that). Each x[c] becomes its owner's value, which is
 * what the sum of the owner's value and everyone else's zeros was: the same bits. Each shard
 * group's chunks over its own ranks (the experts stored E/ep a rank: the expert-data-parallel
 * ones; their other parts' chunks come after, zt_engine_ep_norm). */
int zt_engine_sum_exclusive(zt_engine *e, double *x, int64_t n, zt_error *err) {
    const zt_plan *pl = &e->plan;
    double *all = e->norm_gather; /* (plan.norm_chunks), allocated at creation */
    if (!all || zt_comm_size(e->shard_comm) != pl->nshards || n != pl->norm_chunks)
        return zt_error_set(err, ZT_ERR_INTERNAL, "engine: norm partials of %lld chunks over %d ranks: no buffer",
                            (long long)n, zt_comm_size(e->shard_comm));
    int rc = ZT_OK;
    for (int g = 0; g < (e->edp_groups ? ZT_SHARD_GROUP_COUNT : 1) && !rc; g++) {
        const zt_plan_group *G = &pl->groups[g];
        if (G->nshards < 2) continue;
        zt_comm *comm = g == ZT_SHARD_GROUP_EDP ? e->edp_comm : e->shard_comm;
        size_t counts[G->nshards], own = 0;
        walk_chunks(e, g, x, all, counts, 0);
        for (int s = 0; s < G->shard; s++) own += counts[s];
        double t0 = omp_get_wtime();
        rc = zt_all_gather_f64v(comm, all + own, all, counts, "gradient norm partials", err);
        e->comm_s += omp_get_wtime() - t0;
        if (!rc) walk_chunks(e, g, x, all, NULL, 1);
    }
    return rc;
}

int zt_engine_gather_ranks(zt_engine *e, const double *x, int n, double *all, const char *what, zt_error *err) {
    if (!e->opt.comm || e->world == 1) {
        memcpy(all, x, (size_t)n * sizeof *x);
        return ZT_OK;
    }
    double t0 = omp_get_wtime();
    int rc = zt_all_gather_f64(e->opt.comm, x, all, (size_t)n, what, err);
    e->comm_s += omp_get_wtime() - t0;
    return rc;
}

int zt_engine_sum_ranks_n(zt_engine *e, double *x, int n, const char *what, zt_error *err) {
    if (!e->opt.comm || e->world == 1) return ZT_OK;
    if (n < 1 || n > 16) return zt_error_set(err, ZT_ERR_INTERNAL, "engine: sum of %d values over the ranks (1..16)", n);
    double all[e->world * n];
    int rc = zt_engine_gather_ranks(e, x, n, all, what, err);
    if (rc) return rc;
    for (int i = 0; i < n; i++) {
        double s = 0;
        for (int r = 0; r < e->world; r++) s += all[r * n + i];
        x[i] = s;
    }
    return ZT_OK;
}

int zt_engine_sum_ranks(zt_engine *e, double *x, zt_error *err) { return zt_engine_sum_ranks_n(e, x, 1, "loss", err); }

void zt_engine_comm_bytes(zt_engine *e, zt_comm_bytes *out, bool reset) {
    memset(out, 0, sizeof *out);
    /* the data-parallel collectives: the dp group's, hybrid's replicas', the communication thread's,
     * and the experts stored E/ep a rank's over the expert-data-parallel ranks */
    zt_comm *comms[7] = {e->opt.comm, e->shard_comm != e->opt.comm ? e->shard_comm : NULL, e->replica_comm,
                         zt_overlap_comm(e), e->edp_comm, zt_overlap_edp_comm(e),
                         e->edp_replica_comm != e->replica_comm ? e->edp_replica_comm : NULL};
    for (int k = 0; k < 7; k++) {
        if (!comms[k]) continue;
        zt_comm_counters c;
        zt_comm_counters_get(comms[k], &c);
        out->sent_rs += c.kind[ZT_COLL_REDUCE_SCATTER].bytes_sent;
        out->recv_rs += c.kind[ZT_COLL_REDUCE_SCATTER].bytes_recv;
        out->sent_ag += c.kind[ZT_COLL_ALL_GATHER].bytes_sent;
        out->recv_ag += c.kind[ZT_COLL_ALL_GATHER].bytes_recv;
        out->sent_ar += c.kind[ZT_COLL_ALL_REDUCE].bytes_sent;
        out->recv_ar += c.kind[ZT_COLL_ALL_REDUCE].bytes_recv;
        out->sent_car += c.kind[ZT_COLL_COMPRESSED_ALL_REDUCE].bytes_sent;
        out->recv_car += c.kind[ZT_COLL_COMPRESSED_ALL_REDUCE].bytes_recv;
        out->sent_small += c.kind[ZT_COLL_SMALL].bytes_sent + c.kind[ZT_COLL_BROADCAST].bytes_sent;
        out->recv_small += c.kind[ZT_COLL_SMALL].bytes_recv + c.kind[ZT_COLL_BROADCAST].bytes_recv;
        if (comms[k] != zt_overlap_comm(e) && comms[k] != zt_overlap_edp_comm(e)) /* the thread's waits overlap compute: not exposed */
            out->wait_s += c.total.wait_seconds;
        if (reset) zt_comm_counters_reset(comms[k]);
    }
    if (e->pp) zt_p2p_bytes(zt_pipeline_link(e->pp), &out->sent_pp, &out->recv_pp, reset);
    if (e->cp_comm) zt_p2p_bytes(e->cp_comm, &out->sent_cp, &out->recv_cp, reset);
    if (e->ep_comm) { /* expert parallelism's all-to-alls: their payload and the sizes before it */
        zt_comm_counters c;
        zt_comm_counters_get(e->ep_comm, &c);
        out->sent_ep = c.total.bytes_sent;
        out->recv_ep = c.total.bytes_recv;
        out->wait_s += c.total.wait_seconds;
        if (reset) zt_comm_counters_reset(e->ep_comm);
    }
    if (e->tp_comm) {
        zt_comm_counters c;
        zt_comm_counters_get(e->tp_comm, &c);
        out->sent_tp = c.total.bytes_sent;
        out->recv_tp = c.total.bytes_recv;
        out->wait_s += c.total.wait_seconds;
        if (reset) zt_comm_counters_reset(e->tp_comm);
    }
}
