/* plan.c - the memory plan (plan.h): the engine's allocations per class, replayed over sizes.
 *
 * The replay follows the engine step by step; each section names the engine function it mirrors.
 * If you change when the engine allocates or frees, change the mirror here: tests/memory_plan.sh
 * compares the two per class, rank by rank, for every strategy.
 *
 *   creation   engine.c zt_engine_create: parameters (full or pieces), optimizer state (or its
 *              NVMe staging), reduced pieces, units' outputs, their kept saved buffers and the
 *              shared recomputation buffer (recompute.c), scratch, activation-gradient ping-pong, d loss, compute
 *              copies (compute_copy.c) and operand staging (engine_precision.c), gradient-norm partials and the
 *              bucket staging of both threads (collect.c, overlap.c; sized by this plan: gradient
 *              buckets in the reduce dtype, 2 bytes per element under bf16 reduction)
 *   a step     for each micro-batch: its gradient buffer (grads.c), forward unit by unit with
 *              zero3 gathers, prefetch and releases, backward unit by unit with per-unit full
 *              gradients (reduce_now) in flight two units at a time (overlap.c), the summation
 *              tree; then the fold, the reductions, the update, the all-gather of the pieces
 *
 * Everything allocated at creation stays until zt_engine_free; the step's buffers are all freed by
 * its end, so one step (of grad_accum micro-batches) gives the high-water of every step. */
#include "memory/plan.h"
#include "comm/mesh.h"
#include "kernels/kernels.h"
#include "optim/optim.h"
#include "memory/residency.h"
#include "memory/sum_tree.h"
#include "comm/comm.h"
#include "offload/nvme_store.h"
#include "shard/plan.h"

#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------
 * the precision table */
static const zt_precision_bytes PRECISION_BYTES[] = {
    [ZT_PRECISION_FP32] = {.master = 4, .copy = 0, .grads = 4, .moment = 4},
    [ZT_PRECISION_BF16] = {.master = 4, .copy = 2, .grads = 4, .moment = 4},
    [ZT_PRECISION_BF16_LOW] = {.master = 2, .copy = 0, .grads = 4, .moment = 2}, /* bf16 params: their own compute copy */
    [ZT_PRECISION_FP16] = {.master = 4, .copy = 4, .grads = 4, .moment = 4},     /* fp16 values, fp32 arrays */
};

const zt_precision_bytes *zt_precision_bytes_of(zt_precision_mode mode) {
    return (unsigned)mode <= ZT_PRECISION_FP16 ? &PRECISION_BYTES[mode] : &PRECISION_BYTES[0];
}

int zt_precision_lp_kind(const zt_precision *p) {
    return p->compute == ZT_DTYPE_BF16 ? 1 : p->compute == ZT_DTYPE_FP16 ? 2 : 0;
}

bool zt_unit_reads_lp(const zt_model *m, int lp_kind, int u, int k) {
    const zt_unit *un = &m->units[u];
    return lp_kind != 0 && m->params[un->params[k]].ndim >= 2 && un->ops->reads_lp && un->ops->reads_lp(un, k);
}

bool zt_param_reads_fp32(const zt_model *m, int lp_kind, int i) {
    for (int u = 0; u < m->n_units; u++)
        for (int k = 0; k < m->units[u].n_params; k++)
            if (m->units[u].params[k] == i && !zt_unit_reads_lp(m, lp_kind, u, k)) return true;
    return false;
}

bool zt_master_sharded(const zt_engine_options *o, bool shard_optim, bool shard_params) {
    return shard_optim && !shard_params && zt_precision_lp_kind(&o->precision) != 0 &&
           o->precision.params == ZT_DTYPE_FP32;
}

size_t zt_fp32_copy_floats(const zt_model *m, int lp_kind) {
    size_t n = 0;
    for (int i = 0; i < m->n_params; i++)
        if (zt_param_reads_fp32(m, lp_kind, i)) n += ((size_t)m->params[i].numel + 15) / 16 * 16;
    return n;
}

void zt_memory_quant_split(const zt_param_desc *p, int nshards, int s, zt_quant_split *q) {
    memset(q, 0, sizeof *q);
    if (!p->quant) return;
    size_t blocks, per[2]; /* blocks, and bytes per block of each region */
    if (p->quant == ZT_QUANT_NF4) {
        size_t n = (size_t)p->numel;
        blocks = n / ZT_NF4_BLOCK, per[0] = ZT_NF4_BLOCK / 2, per[1] = 1;
        q->whole = zt_nf4_bytes(p->numel);
        q->off[0] = 0, q->end[0] = n / 2, q->off[1] = n / 2;
        q->end[1] = (n / 2 + blocks + 3) & ~(size_t)3;
        q->tail_off = q->end[1], q->tail = q->whole - q->end[1];
    } else {
        size_t rows = (size_t)p->shape[0], cols = (size_t)p->numel / rows;
        blocks = rows, per[0] = cols, per[1] = sizeof(float);
        q->whole = zt_int8_bytes(p->shape[0], (int64_t)cols);
        q->off[0] = 0, q->end[0] = (rows * cols + 3) & ~(size_t)3, q->off[1] = q->end[0];
        q->end[1] = q->whole, q->tail_off = q->whole, q->tail = 0;
    }
    size_t runs = blocks / 4, N = nshards > 0 ? (size_t)nshards : 1;
    size_t b0 = 4 * (runs * (size_t)s / N), b1 = 4 * (runs * ((size_t)s + 1) / N);
    for (int r = 0; r < 2; r++) {
        q->begin_s[r] = q->off[r] + b0 * per[r];
        q->end_s[r] = (size_t)s + 1 == N ? q->end[r] : q->off[r] + b1 * per[r];
    }
    q->local = q->end_s[0] - q->begin_s[0] + q->end_s[1] - q->begin_s[1] + q->tail;
}

size_t zt_memory_quant_local_bytes(const zt_param_desc *p, int nshards, int s) {
    zt_quant_split q;
    zt_memory_quant_split(p, nshards, s, &q);
    return (q.local + 63) & ~(size_t)63;
}

size_t zt_memory_quant_bytes(const zt_param_desc *p) { return zt_memory_quant_local_bytes(p, 1, 0); }

size_t zt_memory_quant_local_floats(const zt_model *m, int nshards, int s) {
    size_t bytes = 0;
    for (int i = 0; i < m->n_params; i++) bytes += zt_memory_quant_local_bytes(&m->params[i], nshards, s);
    return bytes / sizeof(float);
}

size_t zt_memory_quant_floats(const zt_model *m) { return zt_memory_quant_local_floats(m, 1, 0); }

size_t zt_memory_quant_whole_floats(const zt_param_desc *p) {
    zt_quant_split q;
    zt_memory_quant_split(p, 1, 0, &q);
    return zt_memory_floats_for_bytes(q.whole);
}

size_t zt_memory_dequant_floats(const zt_param_desc *p, int lp_kind) {
    return zt_memory_floats_for_bytes((size_t)p->numel * (lp_kind == ZT_LP_BF16 ? sizeof(uint16_t) : sizeof(float)));
}

const char *zt_mem_class_name(zt_mem_class c) {
    static const char *names[ZT_MEM_CLASSES] = {"params", "compute_copy", "gathered", "grads",
                                                "optimizer", "activations", "comm"};
    return (unsigned)c < ZT_MEM_CLASSES ? names[c] : "unknown";
}

void zt_memory_plan_options_default(zt_memory_plan_options *po) {
    memset(po, 0, sizeof *po);
    po->overlap = -1;
    po->shm = -1;
}

size_t zt_memory_window_floats(const zt_plan *pl, const int *params, int n) {
    size_t floats = 1024; /* aligning the window's start to 4 KiB */
    for (int k = 0; k < n; k++) {
        int i = params[k];
        floats += zt_nvme_span_bytes(pl->p[i].shard_off, (size_t)zt_plan_shard_numel(pl, i, pl->p[i].shard)) / sizeof(float);
    }
    return floats;
}

size_t zt_memory_plan_model_states(const zt_memory_plan *p) {
    return p->rest[ZT_MEM_PARAMS] + p->rest[ZT_MEM_COMPUTE_COPY] + p->rest[ZT_MEM_GRADS] +
           p->rest[ZT_MEM_OPTIMIZER];
}

size_t zt_memory_tp_work_floats(const zt_model *m, int B, int T) {
    size_t parts = (size_t)m->units[0].tp_parts, N = (size_t)B * T;
    if (parts <= 1) return 0;
    size_t gathers = parts * 2 * N * 2;          /* every part's 2N doubles (the loss's sums) */
    size_t logits = (size_t)B * (size_t)m->vocab_size; /* the generated position's logits */
    size_t seq = N * zt_memory_seq_width(m);           /* sequence parallelism's (B, T, C) staged */
    size_t most = gathers > logits ? gathers : logits;
    return seq > most ? seq : most;
}

size_t zt_memory_lamb_cut_floats(const zt_model *m) {
    size_t most = 0;
    for (int i = 0; i < m->n_params; i++)
        if (m->params[i].trainable && zt_param_cut(&m->params[i]) && (size_t)m->params[i].logical_numel > most)
            most = (size_t)m->params[i].logical_numel;
    return (most + 15) / 16 * 16;
}

int64_t zt_memory_logical_chunks(const zt_param_desc *p, int64_t *blocks, int64_t *block_numel) {
    int64_t nb = zt_param_experts_stored(p) ? (int64_t)p->norm_blocks * p->ep_parts : 1;
    int64_t bn = p->logical_numel / (nb > 0 ? nb : 1);
    if (blocks) *blocks = nb;
    if (block_numel) *block_numel = bn;
    return nb * ((bn + ZT_NORM_CHUNK - 1) / ZT_NORM_CHUNK);
}

size_t zt_memory_lamb_cut_chunks(const zt_model *m) {
    size_t most = (zt_memory_lamb_cut_floats(m) + ZT_NORM_CHUNK - 1) / ZT_NORM_CHUNK;
    for (int i = 0; i < m->n_params; i++)
        if (m->params[i].trainable && zt_param_cut(&m->params[i])) {
            size_t c = (size_t)zt_memory_logical_chunks(&m->params[i], NULL, NULL);
            if (c > most) most = c;
        }
    return most;
}

size_t zt_memory_max_slice_floats(const zt_model *m, const zt_plan *pl, bool shard_optim) {
    size_t most = 0;
    for (int i = 0; i < m->n_params; i++) {
        if (!m->params[i].trainable) continue;
        size_t n = shard_optim ? (size_t)zt_plan_shard_numel(pl, i, pl->p[i].shard) : (size_t)m->params[i].numel;
        if (n > most) most = n;
    }
    return (most + 15) / 16 * 16;
}

size_t zt_memory_seq_width(const zt_model *m) {
    size_t w = 0;
    for (int u = 0; u < m->n_units; u++)
        if (m->units[u].seq_parts > 1 && u + 1 < m->n_units) {
            size_t full = (size_t)m->units[u].out_width * (size_t)m->units[u].seq_parts;
            if (full > w) w = full;
        }
    return w;
}

/* ---------------------------------------------------------------------------------------------
 * the replay */
typedef struct sim {
    const zt_model *m;
    const zt_engine_options *o;
    const zt_plan *pl;
    const zt_precision_bytes *pb;
    size_t now[ZT_MEM_CLASSES], peak[ZT_MEM_CLASSES], total, peak_total;
    bool shard_params, shard_grads, shard_optim, overlap, replicas, has_comm, reduce_now;
    bool direct;    /* grads.c micro_direct: one micro-batch, reduced straight into the pieces */
    bool early; /* ddp/zero1, one micro-batch: each unit reduced by the thread (grads.c reduce_early) */
    bool transient; /* bf16-low: the reduced pieces are held during a step only (grads.c) */
    bool master;    /* zero1/zero2 under lp compute: fp32 master pieces, replicated copies
                       (master_shard.c) */
    int ag_bytes;   /* bytes per element of the all-gathers being staged; 0: the parameters' */
    int world, ga;
    zt_residency res;             /* what is gathered, copied, in windows: the engine's rules */
    bool *pgrad;
    int *all, n_all;              /* the trainable parameters in table order: the whole-gradient
                                     collectives' list (a frozen parameter is never reduced) */
    int *list;                    /* (n_params) room for another parameter list */
    bool offload_param;           /* param_offload.c: pieces in files, read into per-unit windows */
    size_t io_read;               /* bytes the gathers read from the pieces' file during the step */
    bool grad_offload;            /* grad_offload.c: the reduced pieces go to the files unit by unit */
    size_t *gwindow;              /* (n_units) floats of a unit's gradient window */
    int gwriting;                 /* the unit whose gradient window is being written, or -1 */
    size_t io_write;              /* bytes backward writes (the gradient pieces) during the step */
    int inflight[ZT_UNIT_MAX_PARAMS], n_inflight; /* the reduction the thread may still be running */
    zt_sum_tree tree;             /* the micro-batches' summation tree (grads.c), its buffers counted */
    size_t tree_floats;           /* ... of this many elements each */
    size_t pack_main, pack_thread; /* floats: the largest bucket each thread stages */
    int rank;                      /* in the world (ddp's all-reduce, hybrid's replica group) */
    size_t reduce_elem;            /* bytes per gradient element in the reductions (precision.reduce) */
    size_t block_main, block_thread, block_replica; /* the largest own block of a reduce-scatter
                                      (all-reduces reduce-scatter first) on each comm, bytes */
    size_t block_edp, block_edp_thread, block_edp_replica; /* ... on the expert-data-parallel comm
                                      (experts stored E/ep a rank), the communication thread's duplicate
                                      of it and (hybrid) the experts' replica group */
    int *glist;                    /* (n_params) one shard group's parameters of a staged list */
} sim;

/* what a staged bucket is for: its reduce-scatter scratch depends on it */
typedef enum stage_kind { ST_RS, ST_AG, ST_AR_FULL, ST_AR_PIECES } stage_kind;

static void take(sim *s, zt_mem_class c, size_t bytes) {
    s->now[c] += bytes;
    s->total += bytes;
    if (s->now[c] > s->peak[c]) s->peak[c] = s->now[c];
    if (s->total > s->peak_total) s->peak_total = s->total;
}

static void give(sim *s, zt_mem_class c, size_t bytes) {
    s->now[c] -= bytes;
    s->total -= bytes;
}

static void alloc(sim *s, zt_mem_class c, size_t floats) { take(s, c, zt_memory_alloc_bytes(floats)); }
static void release(sim *s, zt_mem_class c, size_t floats) { give(s, c, zt_memory_alloc_bytes(floats)); }

static size_t numel(const sim *s, int i) { return (size_t)s->m->params[i].numel; }
/* its gradient tensor as units write it (shard/plan.h: the experts stored E/ep a rank have slots) */
static size_t gnumel(const sim *s, int i) { return (size_t)s->pl->p[i].gnumel; }
/* grads.c zt_grads_slots_for: a unit's own transient source slots (one micro-batch, no zero2/zero3) */
static bool transient_slots(const sim *s, int i) {
    return !s->reduce_now && s->pl->gbuf_floats == s->pl->gfull_floats && s->m->params[i].trainable &&
           gnumel(s, i) > numel(s, i);
}
/* compute_copy.c: a compute copy for every matrix when compute is low precision */
static bool has_copy(const sim *s, int i) { return s->pb->copy && s->m->params[i].ndim >= 2; }
static size_t copy_floats(const sim *s, size_t n) { return zt_memory_floats_for_bytes(n * (size_t)s->pb->copy); }
/* a parameter as stored (and gathered, and all-gathered): fp32, or bf16-low's bf16 */
static size_t param_floats(const sim *s, size_t n) { return zt_memory_floats_for_bytes(n * (size_t)s->pb->master); }

/* param_bf16.c zt_store_views_make / _free around unit u's forward or backward: bf16-low gives a
 * running unit an fp32 view of each parameter it does not read through params_lp */
static void views(sim *s, int u, bool make) {
    const zt_unit *un = &s->m->units[u];
    int lp_kind = zt_precision_lp_kind(&s->o->precision);
    for (int k = 0; k < un->n_params; k++)
        if (zt_residency_needs_view(s->m, s->pb->master == 2, lp_kind, u, k)) {
            if (make) alloc(s, ZT_MEM_GATHERED, numel(s, un->params[k]));
            else release(s, ZT_MEM_GATHERED, numel(s, un->params[k]));
        }
}

/* param_quant.c zt_quant_acquire / zt_quant_release around unit u's forward or backward: each of
 * its quantized parameters dequantized into the compute dtype */
static void dequant(sim *s, int u, bool make) {
    const zt_unit *un = &s->m->units[u];
    int lp_kind = zt_precision_lp_kind(&s->o->precision);
    for (int k = 0; k < un->n_params; k++) {
        const zt_param_desc *p = &s->m->params[un->params[k]];
        if (!p->quant) continue;
        bool whole = make && s->shard_params && s->pl->nshards > 1; /* sharded: all-gathered first */
        if (whole) alloc(s, ZT_MEM_GATHERED, zt_memory_quant_whole_floats(p));
        if (make) alloc(s, ZT_MEM_GATHERED, zt_memory_dequant_floats(p, lp_kind));
        else release(s, ZT_MEM_GATHERED, zt_memory_dequant_floats(p, lp_kind));
        if (whole) release(s, ZT_MEM_GATHERED, zt_memory_quant_whole_floats(p));
    }
}

/* collect.c grow_pack: a thread's staging grows to its largest bucket. Buckets of rs/ag hold every
 * shard's rows of their parameters (their full size); all-reduces of pieces hold this rank's.
 * Gradient buckets (rs, ar) hold elements of the reduce dtype, parameter buckets (ag) fp32.
 * src/comm: a reduce-scatter's scratch follows the largest own block on its comm, in bytes; an
 * all-reduce reduce-scatters even blocks of its buffer (zt_comm_even_counts). */
static void stage_group(sim *s, bool thread, const int *params, int n, stage_kind kind, int g);

/* collect.c for_each_bucket: the buckets of each shard group apart (the experts stored E/ep a rank
 * after the dense parameters) */
static void stage(sim *s, bool thread, const int *params, int n, stage_kind kind) {
    if (!zt_model_experts_local(s->m)) {
        stage_group(s, thread, params, n, kind, ZT_SHARD_GROUP_DP);
        return;
    }
    for (int g = 0; g < ZT_SHARD_GROUP_COUNT; g++) {
        int k = zt_plan_group_params(s->pl, params, n, g, s->glist);
        stage_group(s, thread, s->glist, k, kind, g);
    }
}

static void stage_group(sim *s, bool thread, const int *params, int n, stage_kind kind, int g) {
    size_t limit = s->o->bucket_bytes / sizeof(float);
    const zt_plan_group *G = &s->pl->groups[g];
    int world = g == ZT_SHARD_GROUP_EDP ? s->world / zt_model_ep_parts(s->m) : s->world; /* ddp's all-reduce */
    int rank = g == ZT_SHARD_GROUP_EDP ? s->rank / zt_model_ep_parts(s->m) : s->rank;
    for (int first = 0; first < n;) {
        int end = zt_plan_bucket_end(s->m, params, n, first, limit);
        size_t floats = 0, own = 0; /* elements of the bucket, of them this rank's */
        for (int k = first; k < end; k++) {
            size_t mine = (size_t)zt_plan_shard_numel(s->pl, params[k], G->shard);
            floats += kind == ST_AR_PIECES ? mine : numel(s, params[k]);
            own += mine;
        }
        size_t *cap = thread ? &s->pack_thread : &s->pack_main;
        size_t need = kind == ST_AG ? (s->ag_bytes ? zt_memory_floats_for_bytes(floats * (size_t)s->ag_bytes)
                                                   : param_floats(s, floats)) /* all-gathers move parameters */
                                    : zt_memory_floats_for_bytes(floats * s->reduce_elem);
        if (need > *cap) *cap = need;
        bool shared = zt_memory_edp_replica_shared(s->m, s->pl, s->replicas); /* the replica group's comm */
        size_t *block = g == ZT_SHARD_GROUP_EDP ? (thread                 ? &s->block_edp_thread
                                                   : kind == ST_AR_PIECES ? (shared ? &s->block_replica : &s->block_edp_replica)
                                                                          : &s->block_edp)
                        : thread                ? &s->block_thread
                        : kind == ST_AR_PIECES  ? &s->block_replica
                                                : &s->block_main;
        size_t b = 0;
        if (kind == ST_RS && G->nshards > 1) b = own;
        if (kind == ST_AR_FULL && world > 1) b = floats / (size_t)world + ((size_t)rank < floats % (size_t)world);
        if (kind == ST_AR_PIECES) { /* across the replicas of the group's pieces (hybrid) */
            int R = world / G->nshards, rr = rank / G->nshards;
            b = floats / (size_t)R + ((size_t)rr < floats % (size_t)R);
        }
        size_t elem = s->reduce_elem; /* the reduce-scatter scratch holds gradient elements */
        if (b * elem > *block) *block = b * elem;
        first = end;
    }
}

static void stage_all(sim *s, stage_kind kind) {
    if (s->n_all) stage(s, false, s->all, s->n_all, kind);
}

/* The residency's actions over sizes (src/memory/residency.c decides what and when, as it does
 * for the engine's parameter store). */
static int res_alloc_gathered(void *ctx, int u, int i, zt_error *err) {
    (void)u, (void)err;
    sim *s = ctx;
    alloc(s, ZT_MEM_GATHERED, param_floats(s, numel(s, i)));
    return ZT_OK;
}

static int res_gather(void *ctx, int u, const int *params, int n, bool async, zt_error *err) {
    (void)u, (void)err;
    stage(ctx, async, params, n, ST_AG);
    return ZT_OK;
}

static int res_wait(void *ctx, int u, zt_error *err) {
    (void)ctx, (void)u, (void)err;
    return ZT_OK;
}

static int res_make_copy(void *ctx, int u, int i, zt_error *err) {
    (void)u, (void)err;
    sim *s = ctx;
    alloc(s, ZT_MEM_GATHERED, copy_floats(s, numel(s, i)));
    return ZT_OK;
}

static void res_release(void *ctx, int i, bool copy, bool gathered) {
    sim *s = ctx;
    if (copy) release(s, ZT_MEM_GATHERED, copy_floats(s, numel(s, i)));
    if (gathered) release(s, ZT_MEM_GATHERED, param_floats(s, numel(s, i)));
}

/* param_offload.c zt_param_offload_window: one read per piece */
static int res_window_make(void *ctx, int u, const int *params, int n, size_t floats, zt_error *err) {
    (void)u, (void)err;
    sim *s = ctx;
    alloc(s, ZT_MEM_PARAMS, floats);
    for (int j = 0; j < n; j++)
        s->io_read += zt_nvme_span_bytes(s->pl->p[params[j]].shard_off,
                                         (size_t)zt_plan_shard_numel(s->pl, params[j], s->pl->p[params[j]].shard));
    return ZT_OK;
}

static void res_window_release(void *ctx, int u) {
    sim *s = ctx;
    release(s, ZT_MEM_PARAMS, s->res.window[u]);
}

static const zt_residency_ops RESIDENCY_OPS = {
    .alloc_gathered = res_alloc_gathered, .gather = res_gather, .wait = res_wait, .make_copy = res_make_copy,
    .release = res_release, .window_make = res_window_make, .window_release = res_window_release,
};

static void release_pgrad(sim *s, int i) {
    if (!s->pgrad[i]) return;
    release(s, ZT_MEM_GRADS, gnumel(s, i));
    s->pgrad[i] = false;
}

/* grad_offload.c zt_grad_offload_flush: the write in flight done, its window freed */
static void grad_flush(sim *s) {
    if (s->gwriting < 0) return;
    release(s, ZT_MEM_GRADS, s->gwindow[s->gwriting]);
    s->gwindow[s->gwriting] = 0;
    s->gwriting = -1;
}

/* grad_offload.c zt_grad_offload_window: unit u's own pieces' window, after the write in flight */
static void grad_window(sim *s, int u, const int *own, int n) {
    grad_flush(s);
    s->gwindow[u] = zt_memory_window_floats(s->pl, own, n);
    alloc(s, ZT_MEM_GRADS, s->gwindow[u]);
}

/* grad_offload.c zt_grad_offload_finish: across the replicas (hybrid), then written */
static void grad_finish(sim *s, int u) {
    const zt_unit *un = &s->m->units[u];
    int own[ZT_UNIT_MAX_PARAMS] = {0}, n = 0;
    for (int k = 0; k < un->n_params; k++)
        if (s->pl->p[un->params[k]].owner_unit == u && s->m->params[un->params[k]].trainable) own[n++] = un->params[k];
    grad_flush(s);
    if (s->replicas) stage(s, false, own, n, ST_AR_PIECES);
    for (int k = 0; k < n; k++)
        s->io_write += zt_nvme_span_bytes(s->pl->p[own[k]].gshard_off, (size_t)zt_plan_shard_numel(s->pl, own[k], s->pl->p[own[k]].shard));
    s->gwriting = u;
}

/* grads.c zt_grads_unit_done (+ overlap.c: the reduction of the previous unit is retired, and its
 * full gradients freed, once this one is queued) */
static void unit_done(sim *s, int u) {
    const zt_unit *su = &s->m->units[u]; /* grads.c slots_done: the unit's transient source slots */
    for (int k = 0; k < su->n_params; k++)
        if (transient_slots(s, su->params[k])) release(s, ZT_MEM_GRADS, gnumel(s, su->params[k]) - numel(s, su->params[k]));
    if (s->early) { /* grads.c reduce_early: the thread reduces the unit's own parameters */
        const zt_unit *un = &s->m->units[u];
        int own[ZT_UNIT_MAX_PARAMS], n = 0;
        for (int k = 0; k < un->n_params; k++)
            if (s->pl->p[un->params[k]].owner_unit == u && s->m->params[un->params[k]].trainable)
                own[n++] = un->params[k];
        if (n) stage(s, true, own, n, s->shard_optim ? ST_RS : ST_AR_FULL);
        return;
    }
    if (!s->reduce_now) return;
    const zt_unit *un = &s->m->units[u];
    int own[ZT_UNIT_MAX_PARAMS], n = 0;
    for (int k = 0; k < un->n_params; k++)
        if (s->pl->p[un->params[k]].owner_unit == u && s->m->params[un->params[k]].trainable)
            own[n++] = un->params[k];
    if (n && s->grad_offload) grad_window(s, u, own, n);
    if (n && s->overlap) {
        stage(s, true, own, n, ST_RS);
        for (int k = 0; k < s->n_inflight; k++) release_pgrad(s, s->inflight[k]);
        if (s->n_inflight && s->grad_offload) grad_finish(s, s->pl->p[s->inflight[0]].owner_unit);
        memcpy(s->inflight, own, (size_t)n * sizeof *own);
        s->n_inflight = n;
        return;
    }
    if (n) stage(s, false, own, n, ST_RS);
    for (int k = 0; k < n; k++) release_pgrad(s, own[k]);
    if (n && s->grad_offload) grad_finish(s, u);
}

/* grads.c's merge over sizes: the right buffer is released */
static void tree_merge(void *ctx, void *left, void *right) {
    (void)left, (void)right;
    sim *s = ctx;
    release(s, ZT_MEM_GRADS, s->tree_floats);
}

/* engine.c zt_engine_forward_backward for one micro-batch */
static void micro_batch(sim *s, int micro) {
    const zt_model *m = s->m;
    const zt_plan *pl = s->pl;
    /* grads.c zt_grads_begin_micro */
    if (micro == 0) s->reduce_now = s->shard_grads && (s->ga == 1 || s->o->reduce_every_micro_batch);
    s->direct = s->reduce_now && s->ga == 1 && !s->transient; /* micro_direct: into the reduced pieces */
    size_t tree_floats = s->reduce_now ? pl->gshard_floats : pl->gbuf_floats; /* gradient buffers */
    if (!s->direct) alloc(s, ZT_MEM_GRADS, tree_floats);
    if (micro == 0 && s->transient && s->early) alloc(s, ZT_MEM_GRADS, pl->gshard_floats); /* reduced_pieces */
    /* run_forward (training) */
    for (int u = 0; u < m->n_units; u++) {
        zt_residency_acquire(&s->res, u, u + 1 < m->n_units ? u + 1 : -1, NULL);
        dequant(s, u, true);
        views(s, u, true);
        views(s, u, false);
        dequant(s, u, false);
        zt_residency_after_forward(&s->res, u, true);
    }
    /* backward */
    for (int u = m->n_units - 1; u >= 0; u--) {
        const zt_unit *un = &m->units[u];
        zt_residency_acquire(&s->res, u, u - 1, NULL);
        dequant(s, u, true); /* (zt_store_acquire, then the gradients) */
        for (int k = 0; k < un->n_params; k++) { /* zt_grads_for */
            int i = un->params[k];
            if (s->reduce_now && !s->pgrad[i] && m->params[i].trainable) {
                alloc(s, ZT_MEM_GRADS, gnumel(s, i));
                s->pgrad[i] = true;
            }
            if (transient_slots(s, i)) alloc(s, ZT_MEM_GRADS, gnumel(s, i) - numel(s, i)); /* zt_grads_slots_for */
        }
        views(s, u, true);
        views(s, u, false);
        dequant(s, u, false);
        zt_residency_after_backward(&s->res, u);
        unit_done(s, u);
    }
    /* zt_grads_end_micro: drain, retire the last reduction, push the micro-batch into the tree */
    for (int k = 0; k < s->n_inflight; k++) release_pgrad(s, s->inflight[k]);
    if (s->n_inflight && s->grad_offload) grad_finish(s, s->pl->p[s->inflight[0]].owner_unit);
    s->n_inflight = 0;
    if (s->grad_offload) grad_flush(s); /* the last unit's write */
    if (!s->direct) {
        s->tree_floats = tree_floats;
        zt_sum_tree_push(&s->tree, NULL, tree_merge, s);
    }
}

/* step.c zt_engine_step: grads.c zt_grads_finish, the update, zt_grads_reset, the all-gather */
static void optimizer_step(sim *s) {
    const zt_plan *pl = s->pl;
    size_t n = s->reduce_now ? pl->gshard_floats : pl->gbuf_floats;
    s->tree_floats = n;
    zt_sum_tree_fold(&s->tree, tree_merge, s); /* one buffer is left */
    if (s->reduce_now) {
        if (!s->transient && !s->direct) release(s, ZT_MEM_GRADS, n); /* copied into the reduced pieces (transient: is them) */
    } else if (!s->shard_optim) {
        if (s->has_comm && s->world > 1 && !s->early) stage_all(s, ST_AR_FULL); /* all-reduce, in place */
        release(s, ZT_MEM_GRADS, n); /* (by zt_grads_reset after the update) */
    } else {
        if (s->transient && !s->early) alloc(s, ZT_MEM_GRADS, pl->gshard_floats); /* reduced_pieces */
        if (!s->early) stage_all(s, ST_RS); /* reduce-scatter of the whole gradient */
        release(s, ZT_MEM_GRADS, n);
    }
    if (s->replicas && !s->grad_offload) stage_all(s, ST_AR_PIECES); /* hybrid: the pieces all-reduced across the replicas */
    if (s->transient) release(s, ZT_MEM_GRADS, pl->gshard_floats); /* zt_grads_reset after the update */
    if (s->master) { /* master_shard.c zt_master_refresh: the compute copies from the pieces */
        if (pl->nshards > 1) {
            /* the parameters read as fp32 (fp32 elements), then the other matrices (copies) */
            int lp_kind = zt_precision_lp_kind(&s->o->precision), n32 = 0, nlp = 0, *list = s->list;
            for (int i = 0; i < s->m->n_params; i++) /* the trainable ones: a frozen one is not updated */
                if (s->m->params[i].trainable && zt_param_reads_fp32(s->m, lp_kind, i)) list[n32++] = i;
            s->ag_bytes = 4;
            stage(s, false, list, n32, ST_AG);
            for (int i = 0; i < s->m->n_params; i++)
                if (s->m->params[i].trainable && !zt_param_reads_fp32(s->m, lp_kind, i) && has_copy(s, i))
                    list[nlp++] = i;
            s->ag_bytes = s->pb->copy;
            stage(s, false, list, nlp, ST_AG);
            s->ag_bytes = 0;
        }
    } else if (s->shard_optim && !s->shard_params && pl->nshards > 1) {
        stage_all(s, ST_AG); /* all-gather of the updated (trainable) parameters */
    }
}

/* NVMe offload staging (src/offload/nvme_store.c's rule): buffer_count buffers, each
 * one chunk of every state kind, chunk = buffer_bytes / kinds rounded down to 4 KiB (in floats),
 * at most the state's own size rounded up to 4 KiB. */
static size_t offload_staging_bytes(const zt_memory_plan_options *po, int kinds, size_t floats) {
    size_t nbuf = po->offload_buffer_count > 0 ? (size_t)po->offload_buffer_count : 4;
    size_t bytes = po->offload_buffer_bytes ? po->offload_buffer_bytes : (size_t)64 << 20;
    size_t chunk = bytes / (size_t)kinds / 4096 * 1024;
    size_t need = ((floats ? floats : 1) + 1023) / 1024 * 1024;
    if (chunk > need) chunk = need;
    return nbuf * chunk * sizeof(float) * (size_t)kinds;
}

/* param_offload.c's bound: every unit's window (all its parameters' pieces) must fit in
 * param_max_live on its own, or its gather could never run. Over every shard of the group (the
 * pieces start 4 KiB blocks: a window is 1024 floats of alignment plus each piece rounded up to
 * 1024), so every rank of the group refuses alike. */
size_t zt_memory_largest_window(const zt_model *m, const zt_plan *pl, int *unit, int *shard) {
    size_t most = 0;
    *unit = *shard = 0;
    for (int u = 0; u < m->n_units; u++) {
        const zt_unit *un = &m->units[u];
        for (int sh = 0; sh < pl->nshards; sh++) {
            size_t need = 1024;
            for (int k = 0; k < un->n_params; k++) {
                bool dup = false;
                for (int j = 0; j < k; j++) dup |= un->params[j] == un->params[k];
                if (!dup && !pl->p[un->params[k]].no_room) need += ((size_t)zt_plan_shard_numel(pl, un->params[k], sh) + 1023) / 1024 * 1024;
            }
            if (need > most) most = need, *unit = u, *shard = sh;
        }
    }
    return most;
}

int zt_memory_window_bound_error(const zt_model *m, size_t max_live, size_t need, int unit, int shard, zt_error *err) {
    if (!max_live || need <= max_live) return ZT_OK;
    return zt_error_set(err, ZT_ERR_USAGE, "memory.offload_param_max_live (DeepSpeed's stage3_max_live_parameters): "
                        "%zu elements cannot hold unit %s's window of parameter pieces, %zu elements on shard %d (its "
                        "pieces, each read as whole 4 KiB blocks, the largest unit's); give at least %zu, or 0 for no "
                        "bound", max_live, m->units[unit].name, need, shard, need);
}

/* engine/step_whole.c's buffers, allocated at creation: Muon's gathered matrices (one slot per
 * rank of a round: the group of N times the tp parts, at most one per matrix, each the largest
 * logical matrix) and the Newton-Schulz work of the largest; LAMB's partial sums of squares of p
 * and of the update, and under tp the cut tensors' staging (zt_memory_lamb_cut_floats).
 * *muon_local: the elements of Muon's matrices this rank's optimizer holds (offloaded, the
 * streamed step reads their U and writes their update once each: engine/step_streamed.c);
 * *lamb_cut_local: those of LAMB's tensors tp cuts (the streamed step reads their p, m, v back) */
static int whole_step_buffers(sim *s, const zt_model *m, const zt_engine_options *o, int N, int64_t norm_chunks,
                              size_t *muon_local, size_t *lamb_cut_local, zt_error *err) {
    if (o->optim.kind == ZT_OPT_LAMB) {
        size_t cut = zt_memory_lamb_cut_floats(m);
        for (int i = 0; i < m->n_params; i++)
            if (m->params[i].trainable && zt_param_cut(&m->params[i]))
                *lamb_cut_local += s->shard_optim ? (size_t)zt_plan_shard_numel(s->pl, i, s->pl->p[i].shard)
                                                  : (size_t)m->params[i].numel;
        alloc(s, ZT_MEM_OPTIMIZER, 4 * (size_t)norm_chunks + 2 + 4 * zt_memory_lamb_cut_chunks(m));
        if (cut) alloc(s, ZT_MEM_OPTIMIZER, 2 * cut);
    }
    if (o->optim.kind != ZT_OPT_MUON) return ZT_OK;
    bool *muon = calloc((size_t)m->n_params + 1, sizeof *muon);
    if (!muon) return zt_error_set(err, ZT_ERR_NOMEM, "memory plan: out of memory");
    bool stage = o->pp_in_width > 0 || o->pp_send_out; /* step_whole.c: a stage may hold no matrix */
    int rc = (stage ? zt_model_muon_split_stage : zt_model_muon_split)(m, o->optim.muon_params,
                                                                      o->optim.adamw_params, muon, err);
    size_t slot = 0, work = 0;
    int n = 0, R = N * (m->units[0].tp_parts > 1 ? m->units[0].tp_parts : 1);
    for (int i = 0; i < m->n_params && !rc; i++) {
        if (!muon[i]) continue;
        const zt_param_desc *p = &m->params[i];
        size_t w = zt_muon_workspace_floats(p->logical_shape[0], p->logical_shape[1]);
        if ((size_t)p->logical_numel > slot) slot = (size_t)p->logical_numel;
        if (w > work) work = w;
        if (p->trainable)
            *muon_local += s->shard_optim ? (size_t)zt_plan_shard_numel(s->pl, i, s->pl->p[i].shard) : (size_t)p->numel;
        n++;
    }
    free(muon);
    if (rc || !n) return rc;
    alloc(s, ZT_MEM_OPTIMIZER, (slot + 15) / 16 * 16 * (size_t)(n < R ? n : R));
    alloc(s, ZT_MEM_OPTIMIZER, work);
    return ZT_OK;
}

int zt_memory_plan_compute(const zt_model *m, const zt_engine_options *o, const zt_memory_plan_options *po_in,
                           int world, int rank, zt_memory_plan *out, zt_error *err) {
    memset(out, 0, sizeof *out);
    zt_memory_plan_options po_default;
    zt_memory_plan_options_default(&po_default);
    const zt_memory_plan_options *po = po_in ? po_in : &po_default;
    if (world < 1 || rank < 0 || rank >= world)
        return zt_error_set(err, ZT_ERR_USAGE, "memory plan: rank %d of a world of %d", rank, world);
    if (o->B < 1 || o->T < 1 || o->T > m->max_seq_len)
        return zt_error_set(err, ZT_ERR_USAGE, "memory plan: micro-batch B=%d T=%d (model %s: T in 1..%d)", o->B,
                            o->T, m->name, m->max_seq_len);
    if (m->n_units < 1) return zt_error_set(err, ZT_ERR_USAGE, "memory plan: model %s has no units", m->name);
    if ((unsigned)o->strategy > ZT_STRATEGY_HYBRID)
        return zt_error_set(err, ZT_ERR_USAGE, "memory plan: unknown strategy %d", (int)o->strategy);
    zt_recompute ckpt = o->activation_checkpointing;
    if ((unsigned)ckpt > ZT_RECOMPUTE_SELECTIVE)
        return zt_error_set(err, ZT_ERR_USAGE, "memory plan: unknown activation checkpointing mode %d", (int)ckpt);
    if ((unsigned)o->precision.mode > ZT_PRECISION_FP16)
        return zt_error_set(err, ZT_ERR_USAGE, "memory plan: unknown precision mode %d", (int)o->precision.mode);
    if (o->grad_accum < 0) return zt_error_set(err, ZT_ERR_USAGE, "memory plan: grad_accum %d", o->grad_accum);
    if (o->bucket_bytes < sizeof(float))
        return zt_error_set(err, ZT_ERR_USAGE, "memory plan: bucket_bytes %zu (at least one element)", o->bucket_bytes);

    /* engine.c setup_groups */
    zt_strategy s_in = o->strategy;
    int nshards = world, shard = rank;
    if (o->strategy == ZT_STRATEGY_HYBRID) {
        int S = o->hybrid_shard_size;
        if (S < 1 || world % S != 0)
            return zt_error_set(err, ZT_ERR_USAGE, "memory plan: hybrid shard group size %d does not divide the "
                                "world size %d", S, world);
        if (o->hybrid_inner != ZT_STRATEGY_ZERO2 && o->hybrid_inner != ZT_STRATEGY_ZERO3)
            return zt_error_set(err, ZT_ERR_USAGE, "memory plan: hybrid inner strategy must be zero2 or zero3, "
                                "not %s", zt_strategy_name(o->hybrid_inner));
        s_in = o->hybrid_inner;
        nshards = S;
        shard = rank % S;
    }
    bool has_comm = world > 1 || o->comm;
    sim s = {.m = m, .o = o, .pb = zt_precision_bytes_of(o->precision.mode), .world = world, .rank = rank,
             .ga = o->grad_accum > 0 ? o->grad_accum : 1, .has_comm = has_comm,
             .reduce_elem = zt_dtype_bytes(o->precision.reduce)};
    s.shard_optim = s_in != ZT_STRATEGY_DDP;
    s.shard_grads = s_in == ZT_STRATEGY_ZERO2 || s_in == ZT_STRATEGY_ZERO3;
    s.shard_params = s_in == ZT_STRATEGY_ZERO3;
    s.replicas = o->strategy == ZT_STRATEGY_HYBRID && has_comm;
    if (!s.shard_optim || !has_comm) nshards = 1, shard = 0;
    zt_plan pl;
    zt_plan_group groups[ZT_SHARD_GROUP_COUNT];
    zt_memory_plan_groups(m, o, world, rank, nshards, shard, groups);
    int rc = zt_plan_create_groups(m, groups, &pl, err);
    if (rc) return rc;
    if (o->grad_accum <= 1) pl.gbuf_floats = pl.gfull_floats; /* engine.c: transient source slots */
    s.pl = &pl;
    /* overlap.c zt_overlap_wanted (the engine passes its own answer, which also knows the MPI
     * thread level and ZT_OVERLAP_COMM) */
    bool early_ok = !s.shard_grads && s.ga == 1 && has_comm && (s.shard_optim ? nshards >= 2 : world > 1);
    s.overlap = po->overlap >= 0 ? po->overlap != 0
                                 : ((s.shard_grads && has_comm && nshards >= 2) || early_ok) && !o->no_overlap_comm;
    s.early = s.overlap && early_ok;
    s.pgrad = calloc((size_t)m->n_params, sizeof *s.pgrad);
    s.all = malloc((size_t)m->n_params * sizeof *s.all);
    s.list = malloc((size_t)m->n_params * sizeof *s.list);
    s.glist = malloc((size_t)m->n_params * sizeof *s.glist);
    if (!s.pgrad || !s.all || !s.list || !s.glist) {
        rc = zt_error_set(err, ZT_ERR_NOMEM, "memory plan: out of memory");
        goto done;
    }
    for (int i = 0; i < m->n_params; i++)
        if (m->params[i].trainable) s.all[s.n_all++] = i;

    /* ---- creation (engine.c zt_engine_create) ---- */
    bool adam = zt_optim_two_moments(o->optim.kind), mom = adam || o->optim.momentum != 0.0f;
    int kinds = adam ? 2 : mom ? 1 : 0;
    s.master = zt_master_sharded(o, s.shard_optim, s.shard_params);
    /* offload from the engine options (zt_engine_options.offload) or from po (estimates) */
    zt_memory_plan_options pe = *po;
    if (o->offload.optimizer_dir && o->offload.optimizer_dir[0]) pe.offload_optimizer = true;
    if (o->offload.param_dir && o->offload.param_dir[0]) pe.offload_param = true;
    if (!pe.offload_buffer_count) pe.offload_buffer_count = o->offload.buffer_count;
    if (!pe.offload_buffer_bytes) pe.offload_buffer_bytes = o->offload.buffer_bytes;
    s.offload_param = pe.offload_param && s.shard_params && s.pb->master == 4;
    if (s.offload_param) { /* engine.c: the store's kinds share one layout, its pieces on 4 KiB blocks */
        zt_plan_keep_frozen_slots(&pl);
        zt_plan_align_pieces(&pl, 1024);
    }
    s.grad_offload = s.offload_param && pe.offload_optimizer && s.ga == 1 && zt_memory_grad_offload_stage_ok(o);
    /* engine.c: grad_offload */
    s.gwriting = -1;
    size_t full = pl.full_floats, piece = pl.shard_floats, gpiece = pl.gshard_floats;
    size_t state = s.shard_optim ? gpiece : pl.gfull_floats; /* trainable parameters only */
    /* the store's residency rules (param_store.c zt_store_start) over sizes */
    zt_residency_options ro = {.gathers = s.shard_params, .async = s.overlap, .prefetch = !o->no_prefetch,
                               .copies = s.shard_params && s.pb->copy, .keep_after_forward = o->keep_params_after_forward,
                               .windows = s.offload_param, .param_prefetch = o->offload.param_prefetch,
                               .max_live = o->offload.param_max_live};
    if ((rc = zt_residency_init(&s.res, m, &pl, &ro, &RESIDENCY_OPS, &s, err))) goto done;
    if (s.offload_param) {
        if (!(s.gwindow = calloc((size_t)m->n_units, sizeof *s.gwindow))) {
            rc = zt_error_set(err, ZT_ERR_NOMEM, "memory plan: out of memory");
            goto done;
        }
        int wu, wsh;
        size_t need = zt_memory_largest_window(m, &pl, &wu, &wsh);
        if (!po->no_window_check && (rc = zt_memory_window_bound_error(m, ro.max_live, need, wu, wsh, err))) goto done;
    }
    if (!s.offload_param) alloc(&s, ZT_MEM_PARAMS, param_floats(&s, s.shard_params || s.master ? piece : full));
    /* param_quant.c: the quantized base, this shard's blocks under zero3/hybrid, else whole */
    size_t quant = zt_memory_quant_local_floats(m, s.shard_params ? pl.nshards : 1, s.shard_params ? pl.shard : 0);
    if (quant) alloc(&s, ZT_MEM_PARAMS, quant);
    if (s.pb->master == 2) { /* param_bf16.c: bf16 parameters are updated, loaded, saved through fp32 chunks */
        size_t local = s.shard_params ? piece : full;
        alloc(&s, ZT_MEM_OPTIMIZER, local < ZT_STATE_CHUNK ? (local ? local : 1) : ZT_STATE_CHUNK);
    }
    /* the store's kinds: the optimizer states (when offloaded), the pieces (when offloaded) */
    int store_kinds = (pe.offload_optimizer ? kinds : 0) + (s.offload_param ? 1 : 0) + (s.grad_offload ? 1 : 0);
    if (store_kinds) {
        size_t file = (state * sizeof(float) + 4095) / 4096 * 4096;
        take(&s, ZT_MEM_OPTIMIZER, offload_staging_bytes(&pe, store_kinds, state));
        out->offload_file_bytes = (size_t)store_kinds * file;
        out->offload_read_bytes = out->offload_file_bytes; /* the stream; it writes the gradients' kind not back */
        out->offload_write_bytes = (size_t)(store_kinds - (s.grad_offload ? 1 : 0)) * file;
    }
    if (!(pe.offload_optimizer && kinds)) {
        for (int k = 0; k < kinds; k++) alloc(&s, ZT_MEM_OPTIMIZER, zt_memory_floats_for_bytes(state * (size_t)s.pb->moment));
        /* 2-byte moments are updated through fp32 chunks (step.c update_bf16_state) */
        if (kinds && s.pb->moment == 2)
            alloc(&s, ZT_MEM_OPTIMIZER, (size_t)kinds * (state < ZT_STATE_CHUNK ? (state ? state : 1) : ZT_STATE_CHUNK));
    }
    /* 1-bit Adam's error feedback (onebit.c): the worker's error (the state's floats: ddp's full
     * layout, hybrid's pieces) and the server's (this rank's block of it in the compressed
     * all-reduce over the world, or hybrid's replica group), on 2 ranks (replicas) or more */
    int onebit_ranks = !has_comm ? 1 : !s.shard_optim ? world : s.replicas ? world / pl.nshards : 1;
    int onebit_rank = !s.shard_optim ? rank : rank / pl.nshards; /* hybrid: the replica's index */
    if (o->optim.kind == ZT_OPT_ONEBIT_ADAM && onebit_ranks > 1) {
        alloc(&s, ZT_MEM_OPTIMIZER, state);
        alloc(&s, ZT_MEM_OPTIMIZER, zt_compressed_server_floats(state, onebit_ranks, onebit_rank));
    }
    size_t muon_local = 0, lamb_cut_local = 0;
    if ((rc = whole_step_buffers(&s, m, o, has_comm ? (o->strategy == ZT_STRATEGY_HYBRID ? nshards : world) : 1,
                                 pl.norm_chunks, &muon_local, &lamb_cut_local, err)))
        goto done;
    /* Muon and LAMB stream twice (engine/step_streamed.c); between the passes Muon reads each
     * matrix's U from the offloaded second state kind and writes its update there once */
    if (store_kinds && (o->optim.kind == ZT_OPT_MUON || o->optim.kind == ZT_OPT_LAMB)) {
        out->offload_read_bytes *= 2;
        out->offload_write_bytes *= 2;
        if (pe.offload_optimizer && kinds) {
            out->offload_read_bytes += muon_local * sizeof(float);
            out->offload_write_bytes += muon_local * sizeof(float);
        }
        /* LAMB under tp: each cut tensor's p (from its file when the pieces are there), m and v
         * (from theirs when the state is) read back between the passes */
        out->offload_read_bytes +=
            lamb_cut_local * sizeof(float) * ((pe.offload_optimizer && kinds ? 2 : 0) + (s.offload_param ? 1 : 0));
    }
    /* step_whole.c under bf16-low: a slice's parameter and moments widened to fp32 (3 x the largest) */
    if ((o->optim.kind == ZT_OPT_MUON || o->optim.kind == ZT_OPT_LAMB) && (s.pb->master == 2 || s.pb->moment == 2))
        alloc(&s, ZT_MEM_OPTIMIZER, 3 * zt_memory_max_slice_floats(m, &pl, s.shard_optim));
    s.transient = s.pb->master == 2 && s.shard_optim; /* engine.c: grad_pieces_transient */
    if (s.shard_optim && !s.transient && !s.grad_offload) alloc(&s, ZT_MEM_GRADS, zt_memory_floats_for_bytes(gpiece * (size_t)s.pb->grads));
    size_t BT = (size_t)o->B * o->T, max_width = 1, max_scratch = 0, shared = 0, staging = 0;
    int lp_kind = zt_precision_lp_kind(&o->precision);
    int slots = o->pp_slots > 1 ? o->pp_slots : 1; /* pipeline: micro-batches in flight (engine.c pp_layout) */
    for (int u = 0; u < m->n_units; u++) {
        const zt_unit *un = &m->units[u];
        for (int k = 0; k < slots; k++) alloc(&s, ZT_MEM_ACTIVATIONS, BT * (size_t)un->out_width);
        /* recompute.c zt_recompute_layout: what the unit keeps; the rest goes to the shared buffer */
        size_t saved = un->ops->saved_floats(un, o->B, o->T, lp_kind), kept = saved;
        if (ckpt == ZT_RECOMPUTE_FULL) kept = 0;
        else if (ckpt == ZT_RECOMPUTE_SELECTIVE && un->ops->kept_floats && un->ops->recompute)
            kept = un->ops->kept_floats(un, o->B, o->T, lp_kind);
        if (kept > saved) {
            rc = zt_error_set(err, ZT_ERR_USAGE, "memory plan: unit %s keeps %zu floats of a saved buffer of %zu",
                              un->name, kept, saved);
            goto done;
        }
        for (int k = 0; k < slots && kept; k++) alloc(&s, ZT_MEM_ACTIVATIONS, kept);
        if (saved - kept > shared) shared = saved - kept;
        size_t scratch = un->ops->scratch_floats(un, o->B, o->T);
        if (scratch > max_scratch) max_scratch = scratch;
        if ((size_t)un->out_width > max_width) max_width = (size_t)un->out_width;
        if (lp_kind && un->ops->staging_bytes) {
            size_t b = un->ops->staging_bytes(un, o->B, o->T, lp_kind);
            if (b > staging) staging = b;
        }
    }
    if (shared) alloc(&s, ZT_MEM_ACTIVATIONS, shared);
    /* pipeline: the received inputs (one per slot and one more) and two gradient buffers each way */
    size_t pp_in = o->pp_in_width > 0 ? BT * (size_t)o->pp_in_width : 0;
    size_t pp_out = o->pp_send_out ? BT * (size_t)m->units[m->n_units - 1].out_width : 0;
    for (int k = 0; k <= slots && pp_in; k++) alloc(&s, ZT_MEM_ACTIVATIONS, pp_in);
    for (int k = 0; k < 2; k++) {
        if (pp_in) alloc(&s, ZT_MEM_ACTIVATIONS, pp_in);
        if (pp_out) alloc(&s, ZT_MEM_ACTIVATIONS, pp_out);
    }
    alloc(&s, ZT_MEM_ACTIVATIONS, max_scratch);
    for (int i = 0; i < 2; i++) alloc(&s, ZT_MEM_ACTIVATIONS, BT * max_width);
    alloc(&s, ZT_MEM_ACTIVATIONS, BT);
    if (s.pb->copy && !s.shard_params) alloc(&s, ZT_MEM_COMPUTE_COPY, copy_floats(&s, full));
    size_t fp32_copy = s.master ? zt_fp32_copy_floats(m, lp_kind) : 0; /* master_shard.c */
    if (fp32_copy) alloc(&s, ZT_MEM_COMPUTE_COPY, fp32_copy);
    if (staging) alloc(&s, ZT_MEM_ACTIVATIONS, zt_memory_floats_for_bytes(staging));
    /* gradient-norm partials, and every shard's own partials gathered (doubles; collect.c) */
    alloc(&s, ZT_MEM_COMM, 2 * ((size_t)pl.norm_chunks + 1));
    if (s.shard_optim && pl.nshards > 1) alloc(&s, ZT_MEM_COMM, 2 * (size_t)pl.norm_chunks);
    int parts = m->units[0].tp_parts; /* tp_group.c zt_engine_tp_setup: the group's staging */
    if (parts > 1) alloc(&s, ZT_MEM_COMM, zt_memory_tp_work_floats(m, o->B, o->T));
    /* ep_group.c zt_engine_ep_setup: the experts stored E/ep a rank, their norm's buffers */
    if (zt_model_experts_local(m)) alloc(&s, ZT_MEM_COMM, zt_memory_ep_norm_floats(m));

    /* ---- one optimizer step ---- */
    for (int micro = 0; micro < s.ga; micro++) micro_batch(&s, micro);
    optimizer_step(&s);

    /* the bucket staging is sized by the step and allocated at creation, so it is there all along */
    out->pack_main = s.pack_main ? zt_memory_alloc_bytes(s.pack_main) : 0;
    out->pack_thread = s.pack_thread ? zt_memory_alloc_bytes(s.pack_thread) : 0;
    for (int c = 0; c < ZT_MEM_CLASSES; c++) {
        out->peak[c] = s.peak[c];
        out->rest[c] = s.now[c];
    }
    /* the comms' reduce-scatter scratch, reserved at creation too: the shard group's (or the
     * world's), the thread's duplicate of it, the replica group's */
    size_t chunk = po->comm_chunk_bytes ? po->comm_chunk_bytes : zt_comm_default_chunk_bytes();
    int main_ranks = s.shard_optim ? pl.nshards : world;
    out->scratch_main = zt_comm_scratch_bytes_for_size(main_ranks, chunk, s.block_main);
    /* 1-bit Adam's compressed all-reduce stages its signs in the same scratch (ddp: the world's;
     * hybrid: the replica group's, below) */
    if (o->optim.kind == ZT_OPT_ONEBIT_ADAM && !s.shard_optim && main_ranks > 1) {
        size_t car = zt_compressed_scratch_bytes(pl.gfull_floats, main_ranks);
        if (car > out->scratch_main) out->scratch_main = car;
    }
    /* the thread's comm duplicates the shard group's (ddp: the world) */
    out->scratch_thread = s.overlap ? zt_comm_scratch_bytes_for_size(s.shard_optim ? pl.nshards : world, chunk,
                                                                     s.block_thread)
                                    : 0;
    out->scratch_replica = s.replicas ? zt_comm_scratch_bytes_for_size(world / pl.nshards, chunk, s.block_replica) : 0;
    if (o->optim.kind == ZT_OPT_ONEBIT_ADAM && s.replicas && onebit_ranks > 1) {
        size_t car = zt_compressed_scratch_bytes(state, onebit_ranks);
        if (car > out->scratch_replica) out->scratch_replica = car;
    }
    /* the tp group's all-reduces (the units' sums): at most a (B, T, widest output) activation,
     * reduce-scattered in even blocks; with sequence parallelism a (B, T, C) one, in T ranges */
    size_t seq_full = BT * zt_memory_seq_width(m), norms = 4 * zt_memory_seq_width(m); /* + the norms' sums */
    size_t tp_sum = BT * max_width > seq_full ? BT * max_width : seq_full;
    if (norms > tp_sum) tp_sum = norms;
    /* a later pipeline stage's first unit sums its input gradient (B, T, in width) too (the LM head
     * alone on a stage: wider than its output) */
    if (o->pp_in_width > 0 && BT * (size_t)o->pp_in_width > tp_sum) tp_sum = BT * (size_t)o->pp_in_width;
    out->scratch_tp = parts > 1 ? zt_comm_scratch_bytes_for_size(parts, chunk, (tp_sum + (size_t)parts - 1) /
                                                                             (size_t)parts * sizeof(float)) : 0;
    /* the expert-data-parallel comm (ep_group.c): its reduce-scatters and all-reduces of the experts;
     * hybrid: the edp ranks of the shard group's, and the experts' replica group's */
    int edp, edp_rep;
    zt_memory_edp_comms(m, &pl, s.replicas, world, &edp, &edp_rep);
    out->scratch_edp = edp > 1 ? zt_comm_scratch_bytes_for_size(edp, chunk, s.block_edp) : 0;
    out->scratch_edp_thread = edp > 1 && s.overlap ? zt_comm_scratch_bytes_for_size(edp, chunk, s.block_edp_thread) : 0;
    out->scratch_edp_replica = edp_rep > 1 ? zt_comm_scratch_bytes_for_size(edp_rep, chunk, s.block_edp_replica) : 0;
    /* the same comms' shared segments, this rank's region of each (shm.c; made with the comm) */
    if (po->shm != 0)
        out->shm = zt_comm_shm_bytes_for_size(main_ranks) + (s.overlap ? zt_comm_shm_bytes_for_size(main_ranks) : 0) +
                   (s.replicas ? zt_comm_shm_bytes_for_size(world / pl.nshards) : 0) +
                   (parts > 1 ? zt_comm_shm_bytes_for_size(parts) : 0) + (edp > 1 ? zt_comm_shm_bytes_for_size(edp) * (s.overlap ? 2 : 1) : 0) +
                   (edp_rep > 1 ? zt_comm_shm_bytes_for_size(edp_rep) : 0);
    size_t held = out->pack_main + out->pack_thread + out->scratch_main + out->scratch_thread + out->scratch_replica +
                  out->scratch_tp + out->scratch_edp + out->scratch_edp_thread + out->scratch_edp_replica + out->shm;
    out->peak[ZT_MEM_COMM] += held;
    out->rest[ZT_MEM_COMM] += held;
    out->peak_total = s.peak_total + held;
    out->offload_read_bytes += s.io_read;
    out->offload_write_bytes += s.io_write;
    out->world = world;
    out->rank = rank;
    out->nshards = pl.nshards;
    out->shard = pl.shard;
    out->overlap = s.overlap;
done:
    zt_residency_free(&s.res);
    free(s.pgrad);
    free(s.gwindow);
    free(s.all);
    free(s.list);
    free(s.glist);
    zt_plan_free(&pl);
    return rc;
}
