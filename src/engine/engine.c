/* engine.c - the engine: owns every byte of parameter, gradient, optimizer and activation memory
 * of a model, lays it out per strategy (engine_internal.h has the table), and runs the units
 * forward and backward, gathering a unit's sharded parameters just before it runs (zero3) and
 * releasing them after. Gradient storage and the micro-batch tree are in grads.c; reduction,
 * clipping and the optimizer in step.c; what each unit keeps of its saved activations and their
 * recomputation before backward (activation checkpointing) in recompute.c.
 *
 * Invariants: a unit's forward/backward only ever see full tensors through pointer tables;
 * the model never sees a rank. */
#include "engine/engine_internal.h"
#include "core/env.h"
#include "comm/comm.h"
#include "comm/mesh.h"
#include "core/fault.h"
#include "engine/init.h"
#include "shard/tp.h"
#include "offload/nvme_store.h"
#include "kernels/kernels.h"
#include "memory/plan.h"
#include "obs/trace.h"

#include <math.h>
#include <omp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

const char *zt_strategy_name(zt_strategy s) {
    static const char *names[] = {"ddp", "zero1", "zero2", "zero3", "hybrid"};
    return (unsigned)s < 5 ? names[s] : "unknown";
}

int zt_strategy_parse(const char *name, zt_strategy *out, zt_error *err) {
    for (int s = 0; s < 5; s++)
        if (strcmp(name, zt_strategy_name((zt_strategy)s)) == 0) {
            *out = (zt_strategy)s;
            return ZT_OK;
        }
    return zt_error_set(err, ZT_ERR_USAGE,
                        "unknown strategy \"%s\" (known: ddp, zero1, zero2, zero3, hybrid)", name);
}

void zt_engine_options_default(zt_engine_options *o) {
    memset(o, 0, sizeof *o);
    o->B = 1;
    o->T = 1;
    zt_optimizer_config_default(&o->optim);
    o->strategy = ZT_STRATEGY_DDP;
    o->hybrid_inner = ZT_STRATEGY_ZERO3;
    o->bucket_bytes = 25u << 20;
}

/* counter is one of e->mem's per-class fields: the class's bytes now, its high-water, the total
 * and the total's high-water move together (under mem_lock: the communication thread allocates
 * and frees too). */
void zt_engine_account(zt_engine *e, size_t *counter, size_t bytes, bool add) {
    pthread_mutex_lock(&e->mem_lock);
    ptrdiff_t c = counter - e->mem.now;
    if (add) {
        *counter += bytes;
        e->mem.total += bytes;
        if (c >= 0 && c < ZT_MEM_CLASSES && *counter > e->mem.peak[c]) e->mem.peak[c] = *counter;
        if (e->mem.total > e->mem.peak_total) e->mem.peak_total = e->mem.total;
    } else {
        *counter -= bytes;
        e->mem.total -= bytes;
    }
    pthread_mutex_unlock(&e->mem_lock);
}

int zt_engine_reserve_scratch(zt_engine *e, zt_comm *c, size_t bytes, int slot, zt_error *err) {
    if (!c) return ZT_OK;
    /* the comm's shared segment, made with it: this rank's region (the plan's shm) */
    size_t shm = zt_comm_shm_bytes(c);
    if (shm) zt_engine_account(e, &e->mem.comm, shm, true);
    if (!bytes) return ZT_OK;
    int rc = zt_comm_reserve_scratch(c, bytes, err);
    if (rc) return rc;
    zt_engine_account(e, &e->mem.comm, bytes, true);
    e->scratch_reserved[slot] = bytes;
    return ZT_OK;
}

/* What the memory plan assumes of the comms' shared segments (zt_memory_plan_options.shm): the
 * comms the engine reduces over (the shard group's, hybrid's replica group's, the tensor-parallel
 * group's; the communication thread's duplicates the first) have one each if every one of them
 * of 2 ranks or more has one (all on one node), none otherwise. Placements that mix the two
 * (tensor-parallel ranks on one node, data-parallel ones across) are planned without. */
static int engine_shm(const zt_engine *e) {
    const zt_mesh *M = e->opt.mesh;
    zt_comm *comms[3] = {e->shard_comm, e->replica_comm, M && M->tp > 1 ? M->tp_comm : NULL};
    int with = 0, without = 0;
    for (int k = 0; k < 3; k++)
        if (comms[k] && zt_comm_size(comms[k]) >= 2) *(zt_comm_has_shm(comms[k]) ? &with : &without) += 1;
    return with && !without ? 1 : with + without ? 0 : -1;
}

/* The block cache. The engine's allocations repeat every step with the same sizes (a gathered
 * parameter, its gradient, ddp's gradient buffer), and glibc serves blocks this large with fresh
 * mmap'd pages: every 4 KiB then costs a page fault and the kernel's zeroing again (measured on
 * W1: ddp's 498 MB gradient buffer alone is 121k faults per rank per step). A freed block of at
 * least ZT_BLOCK_CACHE_MIN bytes is kept, in up to ZT_BLOCK_CACHE_SLOTS slots (the oldest goes
 * first), for the next allocation of exactly its size. Cached blocks are free memory, not counted
 * in any class; the accounted total plus the cache is kept within the plan's peak total (a new
 * block evicts cached ones first, and an allocation that fails empties the cache and retries), so
 * the cache never makes the engine's memory exceed its plan. ZT_BLOCK_CACHE=0 turns it off (the
 * process's peak virtual size is then malloc's alone: tests/offload.sh's limit test wants that).
 * Contents are undefined, as aligned_alloc's. */
static void *cache_take(zt_engine *e, size_t bytes) {
    void *p = NULL;
    pthread_mutex_lock(&e->mem_lock);
    for (int k = 0; k < e->n_cached && !p; k++)
        if (e->cache[k].bytes == bytes) {
            p = e->cache[k].p;
            e->cached_bytes -= bytes;
            memmove(&e->cache[k], &e->cache[k + 1], (size_t)(e->n_cached - k - 1) * sizeof e->cache[0]);
            e->n_cached--;
        }
    pthread_mutex_unlock(&e->mem_lock);
    return p;
}

/* Frees cached blocks, oldest first, until at most max_kept are left and the accounted total plus
 * the cache plus `coming` bytes is within the plan's peak total (all of them when that cannot be
 * reached). */
static void cache_trim(zt_engine *e, size_t coming, int max_kept) {
    void *evicted[ZT_BLOCK_CACHE_SLOTS];
    int n_evicted = 0;
    pthread_mutex_lock(&e->mem_lock);
    while (e->n_cached > 0 &&
           (e->n_cached > max_kept || e->mem.total + e->cached_bytes + coming > e->mem_plan.peak_total)) {
        evicted[n_evicted++] = e->cache[0].p;
        e->cached_bytes -= e->cache[0].bytes;
        memmove(&e->cache[0], &e->cache[1], (size_t)(e->n_cached - 1) * sizeof e->cache[0]);
        e->n_cached--;
    }
    pthread_mutex_unlock(&e->mem_lock);
    for (int k = 0; k < n_evicted; k++) free(evicted[k]);
}

/* Keeps p (bytes, already uncounted): older blocks make room (the slots, the plan's bound), and p
 * is freed when even an empty cache would break the bound. */
static void cache_put(zt_engine *e, void *p, size_t bytes) {
    cache_trim(e, bytes, ZT_BLOCK_CACHE_SLOTS - 1);
    pthread_mutex_lock(&e->mem_lock);
    bool keep = e->n_cached < ZT_BLOCK_CACHE_SLOTS && e->mem.total + e->cached_bytes + bytes <= e->mem_plan.peak_total;
    if (keep) {
        e->cache[e->n_cached].p = p;
        e->cache[e->n_cached++].bytes = bytes;
        e->cached_bytes += bytes;
    }
    pthread_mutex_unlock(&e->mem_lock);
    if (!keep) free(p);
}

/* Records the allocation that failed, for zt_engine_oom (the communication thread allocates too). */
static void note_oom(zt_engine *e, const size_t *counter, size_t bytes, const char *what) {
    ptrdiff_t c = counter ? counter - e->mem.now : -1;
    pthread_mutex_lock(&e->mem_lock);
    snprintf(e->oom, sizeof e->oom, "%s (memory-plan class %s, %zu bytes)", what ? what : "a buffer",
             c >= 0 && c < ZT_MEM_CLASSES ? zt_mem_class_name((zt_mem_class)c) : "none", bytes);
    pthread_mutex_unlock(&e->mem_lock);
}

/* n floats counted in `counter`: from the block cache or the heap, or (shared) one buffer the ep peers
 * can map (zt_shared_alloc; never cached: zt_shared_free lets it go) */
static void *engine_alloc(zt_engine *e, size_t n, size_t *counter, const char *what, bool shared) {
    size_t bytes = zt_memory_alloc_bytes(n);
    if (zt_fault_armed() && zt_fault_point(ZT_FAULT_AT_ALLOC, NULL) == ZT_FAULT_OOM) { /* ZT_FAULT oom */
        note_oom(e, counter, bytes, what);
        return NULL;
    }
    void *p = shared ? zt_shared_alloc(bytes) : bytes >= ZT_BLOCK_CACHE_MIN && e->use_cache ? cache_take(e, bytes) : NULL;
    if (!p && !shared) {
        cache_trim(e, bytes, ZT_BLOCK_CACHE_SLOTS); /* a new block: the cache makes room first */
        p = aligned_alloc(64, bytes);
        if (!p && e->n_cached) { /* out of memory: give everything cached back and try again */
            cache_trim(e, SIZE_MAX / 2, 0);
            p = aligned_alloc(64, bytes);
        }
    }
    if (p && counter) zt_engine_account(e, counter, bytes, true);
    if (!p) note_oom(e, counter, bytes, what);
    return p;
}

void *zt_engine_alloc(zt_engine *e, size_t n, size_t *counter, const char *what) {
    return engine_alloc(e, n, counter, what, false);
}

void *zt_engine_alloc_exchange(zt_engine *e, size_t n, size_t *counter, const char *what) {
    return engine_alloc(e, n, counter, what, e->ep_comm && zt_comm_a2a_map(e->ep_comm));
}

void *zt_engine_alloc_saved(zt_engine *e, const zt_unit *u, size_t n, const char *what) {
    return (u->ep_parts > 1 ? zt_engine_alloc_exchange : zt_engine_alloc)(e, n, &e->mem.activations, what);
}

int zt_engine_oom(zt_engine *e, zt_error *err, const char *fmt, ...) {
    char ctx[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx, sizeof ctx, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&e->mem_lock);
    char what[sizeof e->oom];
    snprintf(what, sizeof what, "%s", e->oom[0] ? e->oom : "a host allocation (outside the memory plan)");
    pthread_mutex_unlock(&e->mem_lock);
    return zt_error_set(err, ZT_ERR_NOMEM, "%s: out of memory for %s on rank %d", ctx, what, e->rank);
}

void zt_engine_release(zt_engine *e, float **p, size_t n, size_t *counter) {
    if (!*p) return;
    size_t bytes = zt_memory_alloc_bytes(n);
    if (counter) zt_engine_account(e, counter, bytes, false);
    if (counter && bytes >= ZT_BLOCK_CACHE_MIN && e->use_cache)
        cache_put(e, *p, bytes);
    else
        free(*p);
    *p = NULL;
}

const char *zt_optimizer_name(zt_optimizer_kind k) {
    static const char *const names[] = {"adamw", "sgd", "muon", "lamb", "onebit_adam"};
    return (unsigned)k < 5 ? names[k] : "?";
}

void zt_optimizer_config_default(zt_optimizer_config *c) {
    memset(c, 0, sizeof *c);
    c->kind = ZT_OPT_ADAMW;
    c->beta1 = 0.9f;
    c->beta2 = 0.95f;
    c->eps = 1e-8f;
    c->weight_decay = 0.1f;
    c->momentum = 0.9f;
    c->grad_clip = 1.0f;
    c->muon_lr = 0.02f;
    c->muon_momentum = 0.95f;
    c->muon_nesterov = true;
    c->muon_ns_steps = 5;
    snprintf(c->muon_params, sizeof c->muon_params, "%s", "[a-z]+\\.[0-9]+\\.[a-z_]+\\.[a-z_]+\\.weight");
    c->lamb_min_coeff = 0.01f;
    c->lamb_max_coeff = 10.0f;
    c->lamb_bias_correction = true;
    c->onebit_freeze_step = 100000; /* DeepSpeed's default */
    c->onebit_bias_correction = true;
}

/* Which comm shards and which replicates: read from the mesh (src/comm/mesh.h), the caller's, or
 * one built here from opt.comm and the hybrid shard size (data parallelism alone). */
static int setup_groups(zt_engine *e, zt_error *err) {
    zt_engine_options *o = &e->opt;
    zt_strategy s = o->strategy;
    if (s == ZT_STRATEGY_HYBRID && o->hybrid_inner != ZT_STRATEGY_ZERO2 && o->hybrid_inner != ZT_STRATEGY_ZERO3)
        return zt_error_set(err, ZT_ERR_USAGE, "hybrid: the strategy inside a shard group must be "
                            "zero2 or zero3, not %s", zt_strategy_name(o->hybrid_inner));
    if (!o->mesh) {
        zt_mesh_sizes ms = {.tp = 1, .pp = 1, .hybrid = s == ZT_STRATEGY_HYBRID, .shard = o->hybrid_shard_size};
        int rc = zt_mesh_create(o->comm, &ms, &e->own_mesh, err);
        if (rc) return zt_error_prefix(err, "engine");
        o->mesh = e->own_mesh;
    }
    const zt_mesh *M = o->mesh;
    if (M->tp > 1 && !M->tp_comm)
        return zt_error_set(err, ZT_ERR_USAGE, "engine: mesh tp %d x pp %d: no tp group", M->tp, M->pp);
    /* the data-parallel axis: dp x cp (context parallelism's ranks hold other positions of the
     * same samples: their gradients are summed and their state sharded like dp ranks'; comm/mesh.h
     * orders them); a group of one is the single-process layout */
    o->comm = M->dp_cp > 1 ? M->dp_cp_comm : NULL;
    e->rank = M->dp_cp_rank;
    e->world = M->dp_cp;
    if (s == ZT_STRATEGY_HYBRID) {
        o->hybrid_shard_size = M->shard * M->cp;
        e->shard_comm = o->comm ? M->shard_comm : NULL;
        e->replica_comm = o->comm ? M->replicate_comm : NULL;
        s = o->hybrid_inner;
    } else {
        e->shard_comm = o->comm;
    }
    e->shard_optim = s != ZT_STRATEGY_DDP;
    e->shard_grads = s == ZT_STRATEGY_ZERO2 || s == ZT_STRATEGY_ZERO3;
    e->shard_params = s == ZT_STRATEGY_ZERO3;
    return ZT_OK;
}

int zt_engine_store_experts(zt_model *m, const zt_engine_options *opt, bool *stored, zt_error *err) {
    if (stored) *stored = false;
    int ep = zt_model_ep_parts(m);
    if (!opt->mesh || opt->mesh->ep != ep || zt_model_experts_local(m) || !zt_memory_experts_storable(m, opt))
        return ZT_OK;
    int rc = zt_model_store_experts(m, ep, opt->mesh->ep_rank, err);
    if (!rc && stored) *stored = true;
    return rc;
}

int zt_engine_experts_local_check(const zt_model *m, const zt_engine_options *o, zt_error *err) {
    const char *what = zt_memory_experts_whole_reason(m, o);
    if (!what) return ZT_OK;
    return zt_error_set(err, ZT_ERR_USAGE, "engine: model %s's experts stored E/ep a rank (zt_model_store_experts) with "
                        "%s: not built (keep them whole: expert parallelism runs with every expert on every rank)",
                        m->name, what);
}

/* Pipeline parallelism: slots 1.. of every unit's output and kept saved buffer (slot 0 is the
 * one zt_engine_create and zt_recompute_layout allocated), one received input per slot and one more,
 * and two gradient buffers each way (class activations; src/memory/plan.c mirrors it). */
static int pp_layout(zt_engine *e, zt_error *err) {
    const zt_model *m = e->model;
    size_t BT = (size_t)e->opt.B * e->opt.T;
    e->pp_slots = e->opt.pp_slots > 1 ? e->opt.pp_slots : 1;
    e->pp_micro = -1;
    for (int u = 0; u < m->n_units; u++) {
        unit_state *s = &e->units[u];
        if (!(s->outs = calloc((size_t)e->pp_slots, sizeof *s->outs)) ||
            !(s->saveds = calloc((size_t)e->pp_slots, sizeof *s->saveds)))
            return zt_error_set(err, ZT_ERR_NOMEM, "engine: out of memory");
        s->outs[0] = s->out;
        s->saveds[0] = s->saved;
        for (int k = 1; k < e->pp_slots; k++) {
            char what[160];
            snprintf(what, sizeof what, "the output of unit %s for micro-batch slot %d", m->units[u].name, k);
            if (!(s->outs[k] = zt_engine_alloc(e, BT * (size_t)m->units[u].out_width, &e->mem.activations, what)))
                return zt_engine_oom(e, err, "engine: pipeline slots");
            snprintf(what, sizeof what, "the saved activations of unit %s for micro-batch slot %d", m->units[u].name, k);
            if (s->kept && !(s->saveds[k] = zt_engine_alloc_saved(e, &m->units[u], s->kept, what)))
                return zt_engine_oom(e, err, "engine: pipeline slots");
        }
    }
    size_t in = BT * (size_t)(e->opt.pp_in_width > 0 ? e->opt.pp_in_width : 0);
    size_t out = e->opt.pp_send_out ? BT * (size_t)m->units[m->n_units - 1].out_width : 0;
    if (in) {
        if (!(e->pp_in = calloc((size_t)e->pp_slots + 1, sizeof *e->pp_in)))
            return zt_error_set(err, ZT_ERR_NOMEM, "engine: out of memory");
        for (int k = 0; k <= e->pp_slots; k++) /* one more: the next receive is posted ahead */
            if (!(e->pp_in[k] = zt_engine_alloc(e, in, &e->mem.activations, "a received activation (pipeline)")))
                return zt_engine_oom(e, err, "engine: pipeline buffers");
    }
    for (int k = 0; k < 2; k++) {
        if (in && !(e->pp_din[k] = zt_engine_alloc(e, in, &e->mem.activations, "an input gradient sent back (pipeline)")))
            return zt_engine_oom(e, err, "engine: pipeline buffers");
        if (out && !(e->pp_dout[k] = zt_engine_alloc(e, out, &e->mem.activations, "an output gradient received (pipeline)")))
            return zt_engine_oom(e, err, "engine: pipeline buffers");
    }
    return ZT_OK;
}

void zt_engine_use_slot(zt_engine *e, int k) {
    for (int u = 0; u < e->model->n_units; u++) {
        unit_state *s = &e->units[u];
        s->out = s->outs[k];
        s->saved = s->saveds[k];
    }
    e->recompute_owner = -1; /* the shared buffer holds another micro-batch's rest */
}

int zt_engine_create(zt_model *m, const zt_engine_options *opt, zt_engine **out, zt_error *err) {
    *out = NULL;
    if (opt->B < 1 || opt->T < 1)
        return zt_error_set(err, ZT_ERR_USAGE, "engine: micro-batch shape B=%d T=%d", opt->B, opt->T);
    if (opt->T > m->max_seq_len)
        return zt_error_set(err, ZT_ERR_USAGE, "engine: seq_len %d exceeds the model's maximum %d",
                            opt->T, m->max_seq_len);
    if (m->n_units < 1)
        return zt_error_set(err, ZT_ERR_USAGE, "engine: model %s has no units", m->name);
    if ((unsigned)opt->strategy > ZT_STRATEGY_HYBRID)
        return zt_error_set(err, ZT_ERR_USAGE, "engine: unknown strategy %d", (int)opt->strategy);
    zt_engine *e = calloc(1, sizeof *e);
    if (!e) return zt_error_set(err, ZT_ERR_NOMEM, "engine: out of memory");
    if (!(e->ps = zt_store_new())) {
        free(e);
        return zt_error_set(err, ZT_ERR_NOMEM, "engine: out of memory");
    }
    e->model = m;
    e->opt = *opt;
    e->lp_kind = zt_precision_lp_kind(&opt->precision); /* sizes the units' saved buffers and staging */
    if (opt->offload.optimizer_dir && opt->offload.optimizer_dir[0]) { /* the caller's string may go */
        if (!(e->offload_dir = strdup(opt->offload.optimizer_dir))) {
            free(e->ps);
            free(e);
            return zt_error_set(err, ZT_ERR_NOMEM, "engine: out of memory");
        }
        e->opt.offload.optimizer_dir = e->offload_dir;
    }
    e->grad_kind = -1;
    if (opt->offload.param_dir && opt->offload.param_dir[0]) {
        if (!(e->param_dir = strdup(opt->offload.param_dir))) {
            free(e->offload_dir);
            free(e->ps);
            free(e);
            return zt_error_set(err, ZT_ERR_NOMEM, "engine: out of memory");
        }
        e->opt.offload.param_dir = e->param_dir;
    }
    const char *cache_env = zt_env(ZT_ENV_BLOCK_CACHE);
    e->use_cache = !(cache_env && !strcmp(cache_env, "0"));
    pthread_mutex_init(&e->mem_lock, NULL);
    if (!e->opt.bucket_bytes) e->opt.bucket_bytes = 25u << 20;
    int rc = setup_groups(e, err);
    if (rc) goto fail;
    int nshards = e->shard_optim && e->shard_comm ? zt_comm_size(e->shard_comm) : 1;
    int shard = nshards > 1 ? zt_comm_rank(e->shard_comm) : 0;
    e->edp_groups = zt_model_experts_local(m);
    if (e->edp_groups && (rc = zt_engine_experts_local_check(m, &e->opt, err))) goto fail;
    zt_plan_group groups[ZT_SHARD_GROUP_COUNT];
    zt_memory_plan_groups(m, &e->opt, e->world, e->rank, nshards, shard, groups);
    if ((rc = zt_plan_create_groups(m, groups, &e->plan, err))) goto fail;
    /* one micro-batch a step: the experts' source slots are a unit's transient ones (grads.c) */
    if (opt->grad_accum <= 1) e->plan.gbuf_floats = e->plan.gfull_floats;
    /* parameter offload streams the pieces with the optimizer state, element for element: one
     * layout for both (a frozen parameter keeps its never-written gradient and state slots) */
    if (e->param_dir && e->shard_params && opt->precision.params != ZT_DTYPE_BF16) {
        zt_plan_keep_frozen_slots(&e->plan);
        zt_plan_align_pieces(&e->plan, 1024); /* whole 4 KiB blocks per piece: O_DIRECT reads and writes */
        /* with the optimizer's state in files too, and one micro-batch per step, the reduced
         * gradient goes to the files as each unit's is done (grad_offload.c; memory/plan.c too) */
        e->grad_offload = e->offload_dir && opt->grad_accum <= 1 && zt_memory_grad_offload_stage_ok(opt);
    }
    /* the memory plan: what follows allocates exactly this (src/memory/plan.c mirrors it) */
    zt_memory_plan_options po;
    zt_memory_plan_options_default(&po);
    po.overlap = zt_overlap_wanted(e);
    po.shm = engine_shm(e);
    po.no_window_check = true; /* over the whole job, below: every rank refuses alike */
    if ((rc = zt_memory_plan_compute(m, &e->opt, &po, e->world, e->rank, &e->mem_plan, err)) ||
        (rc = zt_param_offload_check_bound(e, err)))
        goto fail;

    const zt_plan *pl = &e->plan;
    size_t gpiece = pl->gshard_floats;
    bool adam = zt_optim_two_moments(opt->optim.kind), mom = adam || opt->optim.momentum != 0.0f;
    size_t state = e->shard_optim ? gpiece : pl->gfull_floats; /* trainable parameters only */
    e->pgrad = calloc((size_t)m->n_params, sizeof *e->pgrad);
    e->pslots = calloc((size_t)m->n_params, sizeof *e->pslots);
    e->grad_assigned = calloc((size_t)m->n_params, sizeof *e->grad_assigned);
    e->grad_unset = calloc((size_t)m->n_params, sizeof *e->grad_unset);
    e->units = calloc((size_t)m->n_units, sizeof *e->units);
    if (!e->pgrad || !e->pslots || !e->grad_assigned || !e->grad_unset || !e->units) goto nomem;
    zt_grads_assign_setup(e);
    /* gradient-norm partials (doubles) and their all-gather over the shard group; the main
     * thread's bucket staging, sized by the plan (the communication thread's: overlap.c) */
    if (!(e->norm_partials = zt_engine_alloc(e, 2 * ((size_t)pl->norm_chunks + 1), &e->mem.comm, "the gradient-norm partials"))) goto nomem;
    memset(e->norm_partials, 0, ((size_t)pl->norm_chunks + 1) * sizeof *e->norm_partials);
    if (e->shard_optim && pl->nshards > 1 &&
        !(e->norm_gather = zt_engine_alloc(e, 2 * (size_t)pl->norm_chunks, &e->mem.comm, "the gathered gradient-norm partials")))
        goto nomem;
    if (e->mem_plan.pack_main) {
        e->pack_floats = e->mem_plan.pack_main / sizeof(float);
        if (!(e->pack = zt_engine_alloc(e, e->pack_floats, &e->mem.comm, "the bucket staging (pack)"))) goto nomem;
    }
    if ((rc = zt_engine_reserve_scratch(e, e->shard_comm, e->mem_plan.scratch_main, 0, err)) ||
        (rc = zt_engine_reserve_scratch(e, e->replica_comm, e->mem_plan.scratch_replica, 2, err)) ||
        (rc = zt_engine_tp_setup(e, err)) || (rc = zt_engine_cp_setup(e, err)) ||
        (rc = zt_engine_ep_setup(e, err)))
        goto fail;
    if ((rc = zt_store_create(e, err))) goto fail; /* the parameters' master (param_store.c) */
    e->state_kinds = adam ? 2 : mom ? 1 : 0;
    e->state_floats = state;
    bool offload = e->offload_dir != NULL;
    if (!offload && opt->precision.moments == ZT_DTYPE_BF16 && e->state_kinds) {
        /* bf16-low: 2-byte moments, updated through fp32 chunks (step.c) */
        size_t chunk = state < ZT_STATE_CHUNK ? (state ? state : 1) : ZT_STATE_CHUNK;
        for (int k = 0; k < e->state_kinds; k++) {
            if (!(e->state_bf16[k] = zt_engine_alloc(e, zt_memory_floats_for_bytes(state * sizeof(uint16_t)), &e->mem.optimizer, k ? "the bf16 exp_avg_sq" : "the bf16 exp_avg")))
                goto nomem;
            memset(e->state_bf16[k], 0, state * sizeof(uint16_t));
        }
        if (!(e->state_tmp = zt_engine_alloc(e, (size_t)e->state_kinds * chunk, &e->mem.optimizer, "the fp32 state update chunks"))) goto nomem;
    } else if (!offload) {
        if (mom && !(e->m = zt_engine_alloc(e, state, &e->mem.optimizer, adam ? "exp_avg" : "the momentum"))) goto nomem;
        if (adam && !(e->v = zt_engine_alloc(e, state, &e->mem.optimizer, "exp_avg_sq"))) goto nomem;
        if (e->m) memset(e->m, 0, state * sizeof(float));
        if (e->v) memset(e->v, 0, state * sizeof(float));
    }
    if (opt->optim.kind == ZT_OPT_MUON || opt->optim.kind == ZT_OPT_LAMB) { /* step_whole.c */
        if ((rc = opt->optim.kind == ZT_OPT_MUON ? zt_step_muon_setup(e, err) : zt_step_lamb_setup(e, err)))
            goto fail;
    }
    if (opt->optim.kind == ZT_OPT_ONEBIT_ADAM && (rc = zt_onebit_setup(e, err))) goto fail; /* onebit.c */
    e->grad_pieces_transient = zt_store_bf16(e) && e->shard_optim;
    if (e->shard_optim && !e->grad_pieces_transient && !e->grad_offload) {
        if (!(e->grad_pieces = zt_engine_alloc(e, gpiece, &e->mem.grads, "the reduced gradient pieces"))) goto nomem;
        memset(e->grad_pieces, 0, gpiece * sizeof(float));
    }

    size_t BT = (size_t)opt->B * opt->T, max_width = 1, max_scratch = 0;
    for (int u = 0; u < m->n_units; u++) {
        const zt_unit *un = &m->units[u];
        unit_state *s = &e->units[u];
        s->params = calloc((size_t)un->n_params, sizeof *s->params);
        s->grads = calloc((size_t)un->n_params, sizeof *s->grads);
        if (!s->params || !s->grads) goto nomem;
        char what[160];
        snprintf(what, sizeof what, "the output of unit %s", un->name);
        if (!(s->out = zt_engine_alloc(e, BT * (size_t)un->out_width, &e->mem.activations, what))) goto nomem;
        size_t scratch = un->ops->scratch_floats(un, opt->B, opt->T);
        if (scratch > max_scratch) max_scratch = scratch;
        if ((size_t)un->out_width > max_width) max_width = (size_t)un->out_width;
    }
    if ((rc = zt_recompute_layout(e, err))) goto fail; /* the saved buffers, per checkpointing mode */
    if ((rc = pp_layout(e, err))) goto fail;      /* pipeline: the other slots, the transfer buffers */
    if (!(e->scratch = zt_engine_alloc_exchange(e, max_scratch, &e->mem.activations, "the units' scratch"))) goto nomem;
    for (int i = 0; i < 2; i++)
        if (!(e->dact[i] = zt_engine_alloc(e, BT * max_width, &e->mem.activations, "an activation gradient (dact)"))) goto nomem;
    if (!(e->dloss = zt_engine_alloc(e, BT, &e->mem.activations, "d loss"))) goto nomem;
    if (m->moe_experts > 0 && !(e->moe_counts = calloc((size_t)m->n_units * ZT_MOE_COUNTERS(m->moe_experts), sizeof(int64_t))))
        goto nomem;
    if ((rc = zt_engine_precision_setup(e, err)) || (rc = zt_store_units_setup(e, err))) goto fail;
    if ((offload || e->param_dir) && (rc = zt_engine_offload_open(e, err))) goto fail;
    if ((rc = zt_overlap_start(e, err)) || (rc = zt_store_start(e, err))) goto fail;
    *out = e;
    return ZT_OK;
nomem:
    rc = zt_engine_oom(e, err, "engine: laying out model %s (%lld parameters, B=%d T=%d, %s)", m->name,
                       (long long)zt_model_numel(m), opt->B, opt->T, zt_strategy_name(opt->strategy));
fail:
    zt_engine_free(e);
    return rc;
}

void zt_engine_free(zt_engine *e) {
    if (!e) return;
    zt_overlap_stop(e);
    zt_grads_reset(e);
    zt_engine_precision_free(e);
    zt_store_free(e);
    zt_engine_offload_close(e);
    const zt_model *m = e->model;
    if (e->units)
        for (int u = 0; u < m->n_units; u++) {
            free(e->units[u].params);
            free(e->units[u].grads);
            for (int k = 1; k < e->pp_slots && e->units[u].outs; k++) {
                free(e->units[u].outs[k]);
                zt_shared_free(e->units[u].saveds[k]); /* (either kind: zt_engine_alloc_exchange) */
            }
            free(e->units[u].outs ? e->units[u].outs[0] : e->units[u].out);
            zt_shared_free(e->units[u].saveds ? e->units[u].saveds[0] : e->units[u].saved);
            free(e->units[u].outs);
            free(e->units[u].saveds);
        }
    for (int k = 0; k <= e->pp_slots && e->pp_in; k++) free(e->pp_in[k]);
    free(e->pp_in);
    for (int k = 0; k < 2; k++) {
        free(e->pp_din[k]);
        free(e->pp_dout[k]);
    }
    free(e->units);
    free(e->pgrad);
    free(e->pslots);
    free(e->grad_assigned);
    free(e->grad_unset);
    free(e->norm_partials);
    free(e->norm_gather);
    free(e->tp_work);
    free(e->cp_posted);
    free(e->m);
    free(e->v);
    free(e->state_bf16[0]);
    free(e->state_bf16[1]);
    free(e->state_tmp);
    free(e->muon);
    free(e->muon_slots);
    free(e->muon_work);
    free(e->lamb_partials);
    free(e->lamb_stage);
    free(e->low_f32);
    free(e->onebit_worker_error);
    free(e->onebit_server_error);
    free(e->grad_pieces);
    free(e->micro_grads);
    free(e->micro_pieces);
    free(e->pack);
    zt_shared_free(e->scratch);
    zt_shared_free(e->recompute_shared);
    free(e->dact[0]);
    free(e->dact[1]);
    free(e->dloss);
    free(e->moe_counts);
    zt_plan_free(&e->plan);
    zt_mesh_free(e->own_mesh);
    for (int k = 0; k < e->n_cached; k++) free(e->cache[k].p);
    pthread_mutex_destroy(&e->mem_lock);
    free(e->offload_dir);
    free(e->param_dir);
    free(e);
}

int zt_engine_init_params(zt_engine *e, zt_error *err) {
    for (int i = 0; i < e->model->n_params; i++) {
        int rc = zt_store_init(e, i, zt_init_key(e->opt.seed, e->model->params[i].name), err);
        if (rc) return rc;
    }
    zt_grads_reset(e);
    zt_loss_scaler_init(&e->scaler, &e->opt.precision);
    e->step = 0;
    return zt_engine_state_zero(e, err);
}

int zt_engine_check_batch(const zt_engine *e, const zt_batch *b, zt_error *err) {
    if (b->B < 1 || b->T < 1 || b->B > e->opt.B || b->T > e->opt.T)
        return zt_error_set(err, ZT_ERR_USAGE,
                            "engine: micro-batch B=%d T=%d does not fit the planned B=%d T=%d", b->B,
                            b->T, e->opt.B, e->opt.T);
    size_t n = (size_t)b->B * b->T;
    for (size_t i = 0; i < n; i++)
        if (b->inputs[i] < 0 || b->inputs[i] >= e->model->vocab_size)
            return zt_error_set(err, ZT_ERR_DATA, "engine: input token %d at position %zu is outside "
                                "the vocabulary (V=%d)", b->inputs[i], i, e->model->vocab_size);
    /* packed documents: each sequence's positions start at 0 and count up by one, restarting at 0
     * where a document starts (so every position is < T <= max_seq_len, and token t's document
     * starts at t - positions[t]: the kernels' contract). Context parallelism: the rule holds for
     * the whole sequences (cp_positions), and the part's own positions are any below max_seq_len
     * (they are its chunks' positions in the whole sequence) */
    int cp = e->model->n_units ? e->model->units[0].cp_parts : 1;
    const int32_t *pos = cp > 1 ? b->cp_positions : b->positions;
    int T = cp > 1 ? b->T * cp : b->T;
    for (size_t i = 0; pos && i < (size_t)b->B * T; i++) {
        int32_t p = pos[i];
        if (p != 0 && (i % (size_t)T == 0 || p != pos[i - 1] + 1))
            return zt_error_set(err, ZT_ERR_DATA, "engine: position %d of token %zu of sequence %zu: a packed "
                                "sequence's positions start at 0 and count up by one, restarting at 0 where a "
                                "document starts (previous: %d)", p, i % (size_t)T, i / (size_t)T,
                                i % (size_t)T ? pos[i - 1] : -1);
    }
    for (size_t i = 0; cp > 1 && i < n; i++)
        if (!b->positions || b->positions[i] < 0 || b->positions[i] >= e->model->max_seq_len)
            return zt_error_set(err, ZT_ERR_DATA, "engine: context parallelism: token %zu of the part has %s "
                                "(its position in the whole sequence, below %d: zt_batch.positions)", i,
                                b->positions ? "a position out of range" : "no position", e->model->max_seq_len);
    return ZT_OK;
}

int64_t *zt_engine_moe_counts(zt_engine *e, int u) {
    return e->moe_counts ? e->moe_counts + (size_t)u * ZT_MOE_COUNTERS(e->model->moe_experts) : NULL;
}

int64_t *zt_engine_moe_counters(zt_engine *e, size_t *n) {
    *n = e->moe_counts ? (size_t)e->model->n_units * ZT_MOE_COUNTERS(e->model->moe_experts) : 0;
    return e->moe_counts;
}

int zt_engine_moe_stats(zt_engine *e, zt_moe_stats *out) {
    const zt_model *m = e->model;
    memset(out, 0, sizeof *out);
    if (!e->moe_counts) return 0;
    int E = m->moe_experts;
    out->n_experts = E < ZT_MOE_STATS_MAX ? E : ZT_MOE_STATS_MAX;
    double max_share = 0;
    int layers = 0;
    for (int u = 0; u < m->n_units; u++) {
        int64_t *c = zt_engine_moe_counts(e, u), sum = 0, mx = 0;
        for (int x = 0; x < E; x++) {
            sum += c[x];
            mx = c[x] > mx ? c[x] : mx;
            if (x < ZT_MOE_STATS_MAX) out->tokens[x] += c[x];
        }
        out->dropped += c[E];
        if (c[E + 1] > 0 && out->router_nonfinite == 0) { /* the first layer it happened in */
            snprintf(out->router_nonfinite_unit, sizeof out->router_nonfinite_unit, "%s", m->units[u].name);
            out->router_nonfinite = c[E + 1];
        }
        if (sum > 0) { /* this layer's busiest expert over its mean load */
            double r = (double)mx * E / (double)sum;
            max_share = r > max_share ? r : max_share;
            layers++;
        }
        memset(c, 0, ZT_MOE_COUNTERS(E) * sizeof *c);
    }
    out->max_over_mean = layers ? max_share : 0;
    return layers;
}

/* The targets of b that count (not negative). */
size_t zt_batch_counted(const zt_batch *b) {
    size_t n = (size_t)b->B * b->T, c = 0;
    for (size_t i = 0; i < n; i++) c += b->targets[i] >= 0;
    return c;
}

/* Runs every unit forward; *loss = mean of the last unit's per-token output over the targets that
 * count (0 when none does). With `training`,
 * zero3 keeps a parameter gathered until its last use in forward (or, keep_params_after_forward,
 * until backward is done with it). */
int zt_engine_run_forward(zt_engine *e, const zt_batch *b, bool training, const float *in0, float *loss,
                          zt_error *err) {
    const zt_model *m = e->model;
    const float *in = in0;
    double aux = 0; /* the units' auxiliary losses (a mixture of experts' router losses) */
    e->recompute_owner = -1;
    for (int u = 0; u < m->n_units; u++) {
        const zt_unit *un = &m->units[u];
        unit_state *s = &e->units[u];
        int rc = zt_store_acquire(e, u, u + 1 < m->n_units ? u + 1 : -1, err);
        if (!rc) rc = zt_store_views_make(e, u, err);
        if (rc) return rc;
        zt_unit_args a = {.batch = b, .params = s->params, .grads = s->grads, .in = in,
                          .out = s->out, .scratch = e->scratch, .lp_kind = e->lp_kind,
                          .attn_bf16 = e->lp_kind == ZT_LP_BF16 && e->opt.precision.attention == ZT_DTYPE_BF16,
                          .params_lp = s->params_lp, .staging = e->staging, .group = zt_engine_group(e),
                          .aux_loss = &aux, .moe_counts = training ? zt_engine_moe_counts(e, u) : NULL};
        zt_recompute_args(e, u, &a);
        zt_trace_begin("forward", un->name);
        double t0 = omp_get_wtime();
        rc = un->ops->forward(un, &a, err);
        s->fwd_s += omp_get_wtime() - t0;
        zt_trace_end();
        zt_store_views_free(e, u);
        if (rc) return zt_error_prefix(err, "forward of unit %s", un->name);
        zt_recompute_forward_done(e, u);
        zt_store_after_forward(e, u, training);
        in = s->out;
    }
    size_t n = (size_t)b->B * b->T, counted = b->targets ? zt_batch_counted(b) : n;
    /* context parallelism: aux is this part's share of the whole sequences' losses, and the callers
     * weigh this micro-batch's loss as its counted targets' share of the whole's (1/cp of a token
     * file's, the counted share of records'): scaled back so the shares add up to the whole's losses
     * (a part with no counted target has weight 0: its share is lost from the report, not from the
     * gradient, which zt_engine_run_backward weighs by the whole's counted targets) */
    if (b->cp_counted) aux = counted ? aux * (double)b->cp_counted / (double)counted : 0.0;
    if (e->opt.pp_send_out) { /* a stage before the last: its output is an activation, its loss its
                                * units' auxiliary losses (0 without experts), which the step's
                                * agreement and the evaluation add to the last stage's */
        if (loss) *loss = (float)aux;
        return ZT_OK;
    }
    const float *losses = e->units[m->n_units - 1].out;
    double sum = 0;
    for (size_t i = 0; i < n; i++) sum += losses[i]; /* a target not counted has loss 0 */
    if (loss) *loss = counted ? (float)(sum / (double)counted + aux) : 0.0f;
    return ZT_OK;
}

int zt_engine_forward(zt_engine *e, const zt_batch *b, float *loss, float *logits_out,
                      zt_error *err) {
    int rc = zt_engine_check_batch(e, b, err);
    if (rc) return rc;
    zt_batch bb = *b;
    bb.dropout_key = 0; /* evaluation: no dropout */
    if (logits_out) {
        bb.logits_out = logits_out;
        bb.logits_pos = b->T - 1;
    }
    return zt_engine_run_forward(e, &bb, false, NULL, loss, err);
}

/* The dropout key of the next training micro-batch (zt_batch.dropout_key): a function of the seed,
 * the step and the global micro-batch index (ranks hold contiguous runs of it, as the gradient
 * tree does), so every strategy, world split and recomputation draws the same masks. Never 0. */
uint64_t zt_engine_dropout_key(const zt_engine *e) {
    uint64_t ga = e->opt.grad_accum > 0 ? (uint64_t)e->opt.grad_accum : 1;
    uint64_t micro = (uint64_t)e->rank * ga + (uint64_t)(e->pp_micro >= 0 ? e->pp_micro : e->micro_in_step);
    uint64_t k = zt_init_key(e->opt.seed ^ (e->step * 0xD1B54A32D192ED03ULL) ^ (micro * 0x9E3779B97F4A7C15ULL),
                             "dropout");
    return k ? k : 1;
}

int zt_engine_forward_backward(zt_engine *e, const zt_batch *bin, float *loss, zt_error *err) {
    int rc = zt_engine_check_batch(e, bin, err);
    if (rc) return rc;
    if (!bin->targets) return zt_error_set(err, ZT_ERR_USAGE, "engine: forward_backward needs targets");
    zt_batch bb = *bin, *b = &bb; /* every unit and recomputation sees this micro-batch's key */
    bb.dropout_key = zt_engine_dropout_key(e);
    if ((rc = zt_grads_begin_micro(e, err)) || (rc = zt_engine_run_forward(e, b, true, NULL, loss, err)) ||
        (rc = zt_engine_run_backward(e, b, NULL, NULL, NULL, err)))
        return rc;
    return zt_grads_end_micro(e, err);
}

int zt_engine_run_backward(zt_engine *e, const zt_batch *b, const float *dout_last, const float *in0, float *din0,
                           zt_error *err) {
    const zt_model *m = e->model;
    int rc;
    const float *dout = dout_last;
    /* d(step loss)/d(the micro-batch's auxiliary losses): its counted targets' share of the step (the
     * whole sequences' under context parallelism: the units' losses are shares of the whole's) */
    double counted_all = b->cp_counted ? (double)b->cp_counted : b->targets ? (double)zt_batch_counted(b) : 0.0;
    float aux_dloss = b->targets ? (float)((double)b->dloss * zt_engine_loss_scale(e) * counted_all) : 0.0f;
    if (!dout) {
        size_t n = (size_t)b->B * b->T;
        float dloss = b->dloss * zt_engine_loss_scale(e); /* fp16: the loss scale rides on dloss */
        for (size_t i = 0; i < n; i++) e->dloss[i] = b->targets[i] >= 0 ? dloss : 0.0f; /* not counted: 0 */
        dout = e->dloss;
    }
    int flip = 0;
    for (int u = m->n_units - 1; u >= 0; u--) {
        const zt_unit *un = &m->units[u];
        unit_state *s = &e->units[u];
        if ((rc = zt_store_acquire(e, u, u - 1, err))) return rc;
        float *slots[ZT_UNIT_MAX_PARAMS];
        for (int k = 0; k < un->n_params; k++) { /* a frozen parameter: NULL, the kernels skip it */
            if (m->params[un->params[k]].trainable && !(s->grads[k] = zt_grads_for(e, un->params[k], err)))
                return err->code;
            if ((rc = zt_grads_slots_for(e, un->params[k], &slots[k], err))) return rc;
        }
        if ((rc = zt_store_views_make(e, u, err))) return rc;
        float *din = u > 0 ? e->dact[flip] : din0;
        uint32_t unset = zt_grads_unset_of(e, u);
        zt_unit_args a = {.batch = b, .params = s->params, .grads = s->grads, .grads_unset = &unset,
                          .in = u > 0 ? e->units[u - 1].out : in0, .out = s->out,
                          .scratch = e->scratch, .dout = dout, .din = din, .lp_kind = e->lp_kind,
                          .attn_bf16 = e->lp_kind == ZT_LP_BF16 && e->opt.precision.attention == ZT_DTYPE_BF16,
                          .params_lp = s->params_lp, .staging = e->staging, .group = zt_engine_group(e),
                          .aux_dloss = aux_dloss,
                          /* the step's micro-batches added here before the reduction (grads.c) */
                          .ep_defer_fold = !e->reduce_early && !e->reduce_now && e->opt.grad_accum > 1,
                          .grad_slots = slots};
        zt_recompute_args(e, u, &a);
        /* checkpointing: rebuild the saved activations; din's buffer is free until the backward
         * assigns it, so a full recomputation's output goes there */
        if ((rc = zt_recompute_before_backward(e, u, &a, e->dact[flip], err))) {
            zt_grads_unit_written(e, u, unset);
            zt_store_views_free(e, u);
            return rc;
        }
        zt_trace_begin("backward", un->name);
        double t0 = omp_get_wtime();
        rc = un->ops->backward(un, &a, err);
        zt_grads_unit_written(e, u, unset);
        s->bwd_s += omp_get_wtime() - t0;
        zt_trace_end();
        zt_recompute_backward_done(e, u);
        zt_store_views_free(e, u);
        if (rc) return zt_error_prefix(err, "backward of unit %s", un->name);
        zt_store_after_backward(e, u);
        if ((rc = zt_grads_unit_done(e, u, err))) return rc;
        dout = din;
        flip ^= 1;
    }
    return ZT_OK;
}

const zt_model *zt_engine_model(const zt_engine *e) { return e->model; }
const zt_engine_options *zt_engine_options_of(const zt_engine *e) { return &e->opt; }
uint64_t zt_engine_step_count(const zt_engine *e) { return e->step; }
void zt_engine_set_step(zt_engine *e, uint64_t step) { e->step = step; }
const zt_plan *zt_engine_plan(const zt_engine *e) { return &e->plan; }
struct zt_pipeline *zt_engine_pipeline(const zt_engine *e) { return e->pp; }
int zt_engine_rank(const zt_engine *e) { return e->rank; }
bool zt_engine_shards_optim(const zt_engine *e) { return e->shard_optim; }
zt_comm *zt_engine_replica_comm(const zt_engine *e) { return e->replica_comm; }
int zt_engine_state_kinds(const zt_engine *e) { return e->state_kinds; }
bool zt_engine_in_files(const zt_engine *e) { return e->nvme != NULL; }

float *zt_engine_grad(zt_engine *e, int idx) {
    zt_error err;
    /* (1-bit Adam past its warm-up: this rank's own gradient, which the step does not reduce) */
    if ((e->world != 1 && !zt_onebit_frozen(e)) || e->shard_optim) return NULL;
    if (zt_grads_finish(e, &err)) return NULL;
    if (!e->model->params[idx].trainable) return NULL;
    e->norm_early = false; /* the caller may write through the pointer: the step takes the norm again */
    return e->micro_grads ? e->micro_grads + e->plan.p[idx].gfull_off : NULL;
}

/* The reduced gradient pieces in the state layout (sharded optimizer: zero1/2/3, hybrid, where the
 * step reads them: under hybrid with 1-bit Adam past its warm-up, the shard group's own), after
 * finishing the gradient; NULL elsewhere or on failure */
float *zt_engine_grad_pieces(zt_engine *e) {
    zt_error err;
    if (!e->shard_optim || zt_grads_finish(e, &err)) return NULL;
    e->norm_early = false; /* the caller may write through the pointer: the step takes the norm again */
    return e->grad_pieces;
}

/* xxHash64 of the parameters selected by `only`: -1 every one, 0 the frozen, 1 the trainable */
static uint64_t param_hash(zt_engine *e, int only) {
    const zt_model *m = e->model;
    XXH64_state_t *st = XXH64_createState();
    if (!st) return 0;
    XXH64_reset(st, 0);
    float *tmp = NULL;
    for (int i = 0; i < m->n_params; i++) {
        size_t n = (size_t)m->params[i].logical_numel; /* the logical tensor, gathered when cut */
        if (only >= 0 && m->params[i].trainable != (only == 1)) continue;
        const float *local = zt_store_local_is_piece(e) ? NULL : zt_store_local_fp32(e, i);
        if (!local || zt_param_cut(&m->params[i])) {
            /* bf16-low: hashed as fp32, the same bytes */
            zt_error err;
            float *t = realloc(tmp, n * sizeof *t);
            if (!t || zt_engine_param_gather(e, i, t, &err)) {
                free(t ? t : tmp);
                XXH64_freeState(st);
                return 0;
            }
            tmp = t;
            XXH64_update(st, tmp, n * sizeof(float));
        } else {
            XXH64_update(st, local, n * sizeof(float));
        }
    }
    free(tmp);
    uint64_t h = XXH64_digest(st);
    XXH64_freeState(st);
    return h;
}

uint64_t zt_engine_param_hash(zt_engine *e) { return param_hash(e, -1); }

uint64_t zt_engine_frozen_hash(zt_engine *e) {
    for (int i = 0; i < e->model->n_params; i++)
        if (!e->model->params[i].trainable) return param_hash(e, 0);
    return 0;
}

void zt_engine_memory(const zt_engine *e, zt_memory_report *r) {
    pthread_mutex_lock((pthread_mutex_t *)&e->mem_lock);
    *r = e->mem;
    pthread_mutex_unlock((pthread_mutex_t *)&e->mem_lock);
    /* the comms grow their scratch themselves: what they hold beyond the reservation counts too */
    zt_comm *comms[7] = {e->shard_comm, zt_overlap_comm(e), e->replica_comm, e->tp_comm, e->edp_comm,
                         zt_overlap_edp_comm(e), e->edp_replica_comm};
    if (comms[6] == comms[2]) comms[6] = NULL; /* hybrid's experts on the replica group's comm: once */
    for (int k = 0; k < 7; k++) {
        size_t have = comms[k] ? zt_comm_scratch_bytes(comms[k]) : 0;
        if (have <= e->scratch_reserved[k]) continue;
        size_t extra = have - e->scratch_reserved[k];
        r->comm += extra;
        r->total += extra;
        if (r->comm > r->peak_comm) r->peak_comm = r->comm;
        r->peak_total += extra;
    }
}

void zt_engine_memory_plan(const zt_engine *e, zt_memory_plan *out) { *out = e->mem_plan; }

void zt_engine_unit_times(const zt_engine *e, int unit, double *fwd_s, double *bwd_s) {
    *fwd_s = e->units[unit].fwd_s;
    *bwd_s = e->units[unit].bwd_s;
}

void zt_engine_reset_times(zt_engine *e) {
    for (int u = 0; u < e->model->n_units; u++) e->units[u].fwd_s = e->units[u].bwd_s = 0;
    e->comm_s = 0;
}

double zt_engine_comm_seconds(const zt_engine *e) { return e->comm_s; }
