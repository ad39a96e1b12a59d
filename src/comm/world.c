/* world.c - MPI start and stop, and the zt_comm objects: the world, sub-groups (split, the 2-D
 * hybrid mesh), duplicates for a second thread.
 *
 * Invariants:
 *   - MPI is initialized once per process (MPI_Init_thread asking for MPI_THREAD_MULTIPLE) and
 *     finalized only if this file initialized it; the provided thread level is recorded.
 *   - Every zt_comm wraps its own MPI communicator (never MPI_COMM_WORLD itself), so zerotrain's
 *     messages cannot meet anyone else's, with MPI_ERRORS_RETURN set on it.
 *   - Creating a comm (init, split, dup) first runs the setup fence of small.c under the parent's
 *     deadline, so a missing rank is named; the MPI call that follows then finds every rank.
 *   - The world's spin (deadline.c) is 1 ms, or 0 when this node runs more ranks than it has
 *     cores (--oversubscribe): then a spinning rank would hold the core its peer needs.
 */
#include "comm/comm_internal.h"
#include "core/env.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct {
    pthread_mutex_t lock;
    bool initialized_by_us;
    int provided; /* -1: not initialized */
} g_mpi = {PTHREAD_MUTEX_INITIALIZER, false, -1};

int zt_comm_thread_level(void) { return g_mpi.provided; }

void zt_comm_rank_label_(const zt_comm *c, int r, char *buf, size_t cap) {
    if (c->is_world || r < 0 || r >= c->size) snprintf(buf, cap, "rank %d", r);
    else snprintf(buf, cap, "rank %d (world %d)", r, c->world_ranks[r]);
}

/* A byte count with an optional k/M/G suffix, between lo and hi; false when malformed. */
static bool parse_bytes(const char *s, unsigned long long lo, unsigned long long hi, size_t *out) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    unsigned long long mul = 1;
    if (*end == 'k' || *end == 'K') mul = 1ull << 10, end++;
    else if (*end == 'm' || *end == 'M') mul = 1ull << 20, end++;
    else if (*end == 'g' || *end == 'G') mul = 1ull << 30, end++;
    if (errno || end == s || *end || *s == '-' || v > hi / mul || v * mul < lo) return false;
    *out = (size_t)(v * mul);
    return true;
}

int zt_comm_env_(zt_comm_settings *out, zt_error *err) {
    out->timeout = ZT_COMM_DEFAULT_TIMEOUT;
    out->chunk = ZT_COMM_DEFAULT_CHUNK;
    out->spin = ZT_COMM_DEFAULT_SPIN;
    out->ar_exchange_max = ZT_COMM_DEFAULT_AR_EXCHANGE;
    out->ar_shm_max = ZT_COMM_DEFAULT_AR_SHM;
    const char *s = zt_env(ZT_ENV_COMM_TIMEOUT);
    if (s && *s) {
        char *end;
        errno = 0;
        double v = strtod(s, &end);
        while (*end == ' ') end++;
        if (errno || end == s || *end || !(v > 0) || !isfinite(v))
            return zt_error_set(err, ZT_ERR_USAGE,
                                "ZT_COMM_TIMEOUT='%s': expected seconds, a number > 0", s);
        out->timeout = v;
    }
    s = zt_env(ZT_ENV_COMM_CHUNK_BYTES);
    if (s && *s) {
        if (!parse_bytes(s, ZT_COMM_MIN_CHUNK, 1ull << 30, &out->chunk))
            return zt_error_set(err, ZT_ERR_USAGE,
                                "ZT_COMM_CHUNK_BYTES='%s': expected bytes between 4096 and 1G "
                                "(suffix k, M or G allowed)",
                                s);
        out->chunk &= ~(size_t)3;
    }
    s = zt_env(ZT_ENV_COMM_SPIN_US);
    if (s && *s) {
        char *end;
        errno = 0;
        double v = strtod(s, &end);
        if (errno || end == s || *end || !(v >= 0) || !isfinite(v))
            return zt_error_set(err, ZT_ERR_USAGE,
                                "ZT_COMM_SPIN_US='%s': expected microseconds, a number >= 0", s);
        out->spin = v * 1e-6;
    }
    /* the all-reduce's thresholds (all_reduce.c, zt_ar_algo_) */
    const struct { zt_env_var var; const char *zero; size_t *out; } thr[] = {
        {ZT_ENV_COMM_AR_EXCHANGE_BYTES, "never", &out->ar_exchange_max},
        {ZT_ENV_COMM_AR_SHM_BYTES, "no shared segment", &out->ar_shm_max}};
    for (size_t i = 0; i < sizeof thr / sizeof thr[0]; i++) {
        s = zt_env(thr[i].var);
        if (s && *s && !parse_bytes(s, 0, 1ull << 40, thr[i].out))
            return zt_error_set(err, ZT_ERR_USAGE,
                                "%s='%s': expected bytes, 0 (%s) to 1T (suffix k, M or G allowed)",
                                zt_env_name(thr[i].var), s, thr[i].zero);
    }
    return ZT_OK;
}

/* Wraps MPI comm m (taking ownership when owned) into a new zt_comm. */
static int comm_wrap(MPI_Comm m, bool owned, const char *name, const zt_comm_settings *set,
                     bool shm, zt_comm **out, zt_error *err) {
    *out = NULL;
    zt_comm *c = calloc(1, sizeof *c);
    if (!c) {
        if (owned) MPI_Comm_free(&m);
        return zt_error_set(err, ZT_ERR_NOMEM, "comm '%s': out of memory", name);
    }
    c->mpi = m;
    c->owned = owned;
    c->timeout = set->timeout;
    c->chunk_bytes = set->chunk;
    c->spin = set->spin;
    c->ar_exchange_max = set->ar_exchange_max;
    c->ar_shm_max = set->ar_shm_max;
    snprintf(c->name, sizeof c->name, "%s", name);
    atomic_init(&c->busy, 0);
    pthread_mutex_init(&c->counters_lock, NULL);
    MPI_Comm_set_errhandler(m, MPI_ERRORS_RETURN);
    MPI_Comm_rank(m, &c->rank);
    MPI_Comm_size(m, &c->size);
    int wsize = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    c->world_ranks = malloc((size_t)c->size * sizeof(int));
    int *ranks = malloc((size_t)c->size * sizeof(int));
    c->off = malloc(((size_t)c->size + 1) * sizeof *c->off);
    c->ucounts = malloc((size_t)c->size * sizeof *c->ucounts);
    c->parts = malloc((size_t)c->size * sizeof *c->parts);
    c->next_send = malloc((size_t)c->size * sizeof(int));
    c->next_recv = malloc((size_t)c->size * sizeof(int));
    c->iwork = malloc((size_t)c->size * (2 + ZT_RS_MAX_DEPTH) * sizeof(int));
    if (!c->world_ranks || !ranks || !c->off || !c->ucounts || !c->parts || !c->next_send ||
        !c->next_recv || !c->iwork) {
        free(ranks);
        zt_comm_free(c);
        return zt_error_set(err, ZT_ERR_NOMEM, "comm '%s': out of memory", name);
    }
    MPI_Group g, wg;
    MPI_Comm_group(m, &g);
    MPI_Comm_group(MPI_COMM_WORLD, &wg);
    for (int r = 0; r < c->size; r++) ranks[r] = r;
    MPI_Group_translate_ranks(g, c->size, ranks, wg, c->world_ranks);
    MPI_Group_free(&g);
    MPI_Group_free(&wg);
    free(ranks);
    c->is_world = c->size == wsize;
    for (int r = 0; r < c->size && c->is_world; r++) c->is_world = c->world_ranks[r] == r;
    int *ub = NULL, flag = 0;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag);
    int tag_ub = flag && ub ? *ub : 32767; /* 32767: the least MPI guarantees */
    c->tag_seq_mod = (int)(((unsigned)tag_ub + 1u) >> 3);
    if (shm) zt_shm_open_(c); /* collective over c: every rank wraps it at the same point */
    *out = c;
    return ZT_OK;
}

int zt_comm_init(int *argc, char ***argv, zt_comm **world, zt_error *err) {
    zt_error local;
    if (!err) err = &local;
    *world = NULL;
    zt_comm_settings set;
    int rc = zt_comm_env_(&set, err);
    if (rc) return rc;
    pthread_mutex_lock(&g_mpi.lock);
    int inited = 0, finalized = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&finalized);
    if (finalized) {
        pthread_mutex_unlock(&g_mpi.lock);
        return zt_error_set(err, ZT_ERR_INTERNAL, "zt_comm_init: MPI was already finalized");
    }
    if (!inited) {
        int provided = 0;
        rc = MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
        if (rc != MPI_SUCCESS) {
            pthread_mutex_unlock(&g_mpi.lock);
            return zt_error_set(err, ZT_ERR_PEER, "MPI_Init_thread failed (error %d)", rc);
        }
        g_mpi.initialized_by_us = true;
        g_mpi.provided = provided;
    } else {
        MPI_Query_thread(&g_mpi.provided);
    }
    pthread_mutex_unlock(&g_mpi.lock);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

    /* fence on MPI_COMM_WORLD itself (not owned), then dup */
    zt_comm *w;
    rc = comm_wrap(MPI_COMM_WORLD, false, "world", &set, false, &w, err);
    if (rc) return rc;
    zt_board_open_(w->rank); /* the status board, when $ZT_RUN_DIR is set (board.c) */
    rc = zt_comm_enter_(w, "zt_comm_init", err);
    if (!rc) {
        rc = zt_setup_exchange_(w, "init", 0, 0, NULL, err);
        zt_comm_leave_(w);
    }
    zt_comm_free(w);
    if (rc) return rc;
    MPI_Comm m;
    rc = MPI_Comm_dup(MPI_COMM_WORLD, &m);
    if (rc != MPI_SUCCESS) {
        char s[MPI_MAX_ERROR_STRING];
        int len;
        MPI_Error_string(rc, s, &len);
        return zt_error_set(err, ZT_ERR_PEER, "zt_comm_init: MPI_Comm_dup failed: %s", s);
    }
    /* more ranks on this node than cores: a spinning wait takes the core from the rank it waits
     * for, so yield at once (unless ZT_COMM_SPIN_US says otherwise) */
    const char *spin_env = zt_env(ZT_ENV_COMM_SPIN_US);
    if (!spin_env || !*spin_env) {
        MPI_Comm node;
        int on_node = 1;
        if (MPI_Comm_split_type(m, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
            MPI_Comm_size(node, &on_node);
            MPI_Comm_free(&node);
        }
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        if (cpus > 0 && on_node > cpus) set.spin = 0;
    }
    return comm_wrap(m, true, "world", &set, true, world, err);
}

int zt_comm_finalize(zt_error *err) {
    zt_board_close_();
    pthread_mutex_lock(&g_mpi.lock);
    int inited = 0, finalized = 0, rc = MPI_SUCCESS;
    MPI_Initialized(&inited);
    MPI_Finalized(&finalized);
    if (inited && !finalized && g_mpi.initialized_by_us) rc = MPI_Finalize();
    pthread_mutex_unlock(&g_mpi.lock);
    if (rc != MPI_SUCCESS) return zt_error_set(err, ZT_ERR_PEER, "MPI_Finalize failed (error %d)", rc);
    return ZT_OK;
}

void zt_comm_abort(int code) {
    int inited = 0, finalized = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&finalized);
    if (inited && !finalized) MPI_Abort(MPI_COMM_WORLD, code);
}

int zt_comm_rank(const zt_comm *c) { return c->rank; }
int zt_comm_size(const zt_comm *c) { return c->size; }
int zt_comm_world_rank(const zt_comm *c, int r) {
    return r >= 0 && r < c->size ? c->world_ranks[r] : -1;
}
const char *zt_comm_name(const zt_comm *c) { return c->name; }
void zt_comm_set_name(zt_comm *c, const char *name) {
    snprintf(c->name, sizeof c->name, "%s", name ? name : "");
}

int zt_comm_set_chunk_bytes(zt_comm *c, size_t bytes) {
    if (!c || bytes < ZT_COMM_MIN_CHUNK || bytes > (1u << 30)) return ZT_ERR_USAGE;
    c->chunk_bytes = bytes & ~(size_t)3;
    return ZT_OK;
}
size_t zt_comm_chunk_bytes(const zt_comm *c) { return c->chunk_bytes; }

/* MPI_Comm_split / MPI_Comm_dup after the fence. */
static int derive(zt_comm *p, bool dup, int color, int key, const char *name, zt_comm **out,
                  zt_error *err) {
    *out = NULL;
    int rc = zt_comm_enter_(p, dup ? "zt_comm_dup" : "zt_comm_split", err);
    if (rc) return rc;
    rc = zt_setup_exchange_(p, dup ? "dup" : "split", color, key, NULL, err);
    if (rc) goto done;
    MPI_Comm m = MPI_COMM_NULL;
    rc = dup ? MPI_Comm_dup(p->mpi, &m)
             : MPI_Comm_split(p->mpi, color < 0 ? MPI_UNDEFINED : color, key, &m);
    if (rc != MPI_SUCCESS) {
        char s[MPI_MAX_ERROR_STRING];
        int len;
        MPI_Error_string(rc, s, &len);
        rc = zt_error_set(err, ZT_ERR_PEER, "%s of comm '%s' on rank %d: %s", dup ? "MPI_Comm_dup" : "MPI_Comm_split",
                          p->name, p->rank, s);
        goto done;
    }
    rc = ZT_OK;
    zt_comm_settings set = {p->timeout, p->chunk_bytes, p->spin, p->ar_exchange_max, p->ar_shm_max};
    if (m != MPI_COMM_NULL) rc = comm_wrap(m, true, name, &set, true, out, err);
done:
    zt_comm_leave_(p);
    return rc;
}

int zt_comm_split(zt_comm *parent, int color, int key, zt_comm **out, zt_error *err) {
    zt_error local;
    if (!err) err = &local;
    if (!parent) return zt_error_set(err, ZT_ERR_USAGE, "zt_comm_split: parent is NULL");
    char name[32];
    snprintf(name, sizeof name, "%.20s.%d", parent->name, color);
    return derive(parent, false, color, key, name, out, err);
}

int zt_comm_dup(zt_comm *c, zt_comm **out, zt_error *err) {
    zt_error local;
    if (!err) err = &local;
    if (!c) return zt_error_set(err, ZT_ERR_USAGE, "zt_comm_dup: comm is NULL");
    return derive(c, true, 0, 0, c->name, out, err);
}

int zt_comm_mesh_2d(zt_comm *world, int shard_size, zt_comm **shard, zt_comm **replicate,
                    zt_error *err) {
    zt_error local;
    if (!err) err = &local;
    *shard = *replicate = NULL;
    if (!world) return zt_error_set(err, ZT_ERR_USAGE, "zt_comm_mesh_2d: comm is NULL");
    if (shard_size < 1 || world->size % shard_size)
        return zt_error_set(err, ZT_ERR_USAGE,
                            "hybrid mesh: shard size %d does not divide the %d ranks of '%s'",
                            shard_size, world->size, world->name);
    int r = world->rank;
    int rc = derive(world, false, r / shard_size, r, "shard", shard, err);
    if (!rc) rc = derive(world, false, r % shard_size, r, "replicate", replicate, err);
    if (rc) {
        zt_comm_free(*shard);
        *shard = NULL;
    }
    return rc;
}

void zt_comm_free(zt_comm *c) {
    if (!c) return;
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) {
        if (c->op_active) /* freed mid-op: release the requests */
            for (int i = 0; i < c->op.nreq; i++)
                if (c->reqs[i] != MPI_REQUEST_NULL) {
                    if (c->info[i].recv) MPI_Cancel(&c->reqs[i]);
                    MPI_Request_free(&c->reqs[i]);
                }
        if (c->owned && c->mpi != MPI_COMM_NULL) MPI_Comm_free(&c->mpi);
    }
    zt_shm_close_(c);
    pthread_mutex_destroy(&c->counters_lock);
    free(c->world_ranks);
    free(c->reqs);
    free(c->info);
    free(c->st);
    free(c->idx);
    free(c->off);
    free(c->ucounts);
    free(c->parts);
    free(c->next_send);
    free(c->next_recv);
    free(c->iwork);
    free(c->scratch);
    free(c->small);
    free(c);
}
