/* overlap.c - the background communication thread: gradient reduce-scatters overlapped with the
 * rest of backward (DeepSpeed's overlap_comm, FSDP's separate reduce-scatter stream, Horovod's
 * background thread). The main thread queues a unit's gradients as soon as the unit's backward is
 * done and goes on with the next unit; the thread reduce-scatters them, in queue order, on its own
 * duplicate of the shard comm (a comm is used by one thread at a time; the main thread keeps
 * gathering zero3 parameters on the original) and writes this rank's pieces into e->micro_pieces.
 * The main thread frees the full gradients once it has waited for the job, one unit later
 * (grads.c), so the gradient memory in flight does not depend on the thread's timing (the plan
 * counts two units' worth, DeepSpeed's double-buffered reduction). The queue order is the backward
 * order, the same on every rank, so the collectives match up, and the sums are the same bits as
 * inline reductions. */
#include "comm/comm.h"
#include "core/env.h"
#include "engine/engine_internal.h"
#include "obs/trace.h"

#include <omp.h>
#include <stdio.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

typedef enum job_kind {
    JOB_REDUCE, /* zero2/zero3: e->pgrad -> e->micro_pieces */
    JOB_GATHER, /* zero3: pieces -> the store's gathered tensors */
    JOB_FULL    /* ddp: e->micro_grads all-reduced in place; zero1: -> e->grad_pieces */
} job_kind;

typedef struct job {
    job_kind kind;
    int params[ZT_UNIT_MAX_PARAMS];
    int n;
    uint64_t seq;
    char tag[ZT_NAME_MAX];
} job;

struct zt_overlap {
    zt_engine *e;
    zt_comm *comm;
    zt_comm *edp_comm;      /* the experts stored E/ep a rank: a duplicate of the edp comm, or NULL */
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t wake, idle;
    job *q;
    int cap, head, count;
    bool busy, stop;
    uint64_t next_seq, done_seq; /* jobs are numbered from 1 and finish in order */
    int status;
    zt_error err;
    float *pack;
    size_t pack_cap;
    double busy_s; /* time in collectives, overlapped with the main thread's compute */
};

static void *run(void *arg) {
    zt_overlap *o = arg;
    zt_engine *e = o->e;
    pthread_mutex_lock(&o->mu);
    for (;;) {
        while (o->count == 0 && !o->stop) pthread_cond_wait(&o->wake, &o->mu);
        if (o->count == 0 && o->stop) break;
        job j = o->q[o->head];
        o->head = (o->head + 1) % o->cap;
        o->count--;
        o->busy = true;
        bool failed = o->status != ZT_OK;
        pthread_mutex_unlock(&o->mu);

        zt_error err = {0};
        int rc = ZT_OK;
        if (j.kind == JOB_GATHER) {
            if (!failed)
                rc = zt_engine_gather_params_on(e, o->comm, &o->pack, &o->pack_cap, &o->busy_s, j.params, j.n, j.tag,
                                                &err);
        } else if (j.kind == JOB_FULL) {
            float *src[ZT_UNIT_MAX_PARAMS];
            for (int k = 0; k < j.n; k++) src[k] = e->micro_grads + e->plan.p[j.params[k]].gfull_off;
            if (!failed && !e->shard_optim)
                rc = zt_engine_all_reduce_full_on(e, o->comm, &o->pack, &o->pack_cap, &o->busy_s, j.params, j.n,
                                                  e->micro_grads, j.tag, &err);
            else if (!failed)
                rc = zt_engine_reduce_scatter_on(e, o->comm, &o->pack, &o->pack_cap, &o->busy_s, j.params, j.n,
                                                 src, e->grad_pieces, j.tag, &err);
        } else {
            float *src[ZT_UNIT_MAX_PARAMS];
            for (int k = 0; k < j.n; k++) src[k] = e->pgrad[j.params[k]];
            /* after a failure the comm is broken: drop the work (the main thread frees the
             * gradients once it has waited for this job) */
            if (!failed)
                rc = zt_engine_reduce_scatter_on(e, o->comm, &o->pack, &o->pack_cap, &o->busy_s, j.params, j.n,
                                                 src, e->micro_pieces, j.tag, &err);
        }

        pthread_mutex_lock(&o->mu);
        if (rc && o->status == ZT_OK) {
            o->status = rc;
            o->err = err;
        }
        o->busy = false;
        o->done_seq = j.seq;
        pthread_cond_broadcast(&o->idle);
    }
    pthread_mutex_unlock(&o->mu);
    return NULL;
}

/* zero2/zero3 with shards, and ddp/zero1 with one micro-batch per step and more than one rank
 * (their only micro-batch's gradient is final as each unit finishes; with accumulation it is
 * final only after the micro-batch tree folds at the step, so they reduce there) */
bool zt_overlap_wanted(const zt_engine *e) {
    const char *env = zt_env(ZT_ENV_OVERLAP_COMM);
    int ga = e->opt.grad_accum > 0 ? e->opt.grad_accum : 1;
    bool early = !e->shard_grads && ga == 1 && (e->shard_optim ? e->plan.nshards >= 2 : e->world > 1);
    return ((e->shard_grads && e->plan.nshards >= 2) || early) && e->shard_comm && !(env && !strcmp(env, "0")) &&
           !e->opt.no_overlap_comm && zt_comm_thread_level() == ZT_COMM_THREAD_MULTIPLE;
}

int zt_overlap_start(zt_engine *e, zt_error *err) {
    if (!zt_overlap_wanted(e)) return ZT_OK;
    zt_overlap *o = calloc(1, sizeof *o);
    if (!o) return zt_error_set(err, ZT_ERR_NOMEM, "engine: out of memory for the communication thread");
    o->e = e;
    o->cap = 4 * e->model->n_units + 4; /* per micro-batch: a reduce and two gathers per unit at most */
    o->q = calloc((size_t)o->cap, sizeof *o->q);
    /* the thread's bucket staging, sized by the memory plan (its largest bucket) */
    if (o->q && e->mem_plan.pack_thread) {
        o->pack_cap = e->mem_plan.pack_thread / sizeof(float);
        if (!(o->pack = zt_engine_alloc(e, o->pack_cap, &e->mem.comm, "the communication thread's bucket staging (pack)")))
            o->pack_cap = 0;
    }
    int rc = !o->q                                     ? zt_error_set(err, ZT_ERR_NOMEM, "engine: out of memory for the "
                                                                      "communication thread's queue")
             : !o->pack && e->mem_plan.pack_thread ? zt_engine_oom(e, err, "engine: the communication thread")
                                                   : zt_comm_dup(e->shard_comm, &o->comm, err);
    if (rc) {
        zt_engine_release(e, &o->pack, o->pack_cap, &e->mem.comm);
        free(o->q);
        free(o);
        return rc;
    }
    zt_comm_set_name(o->comm, "gradients (communication thread)");
    /* the experts stored E/ep a rank: their buckets over the thread's own edp comm */
    if (e->edp_comm && !(rc = zt_comm_dup(e->edp_comm, &o->edp_comm, err))) {
        zt_comm_set_name(o->edp_comm, "expert gradients (communication thread)");
        zt_comm_set_spin(o->edp_comm, 0);
        rc = zt_engine_reserve_scratch(e, o->edp_comm, e->mem_plan.scratch_edp_thread, 5, err);
    }
    if (rc || (rc = zt_engine_reserve_scratch(e, o->comm, e->mem_plan.scratch_thread, 1, err))) {
        zt_comm_free(o->edp_comm);
        zt_comm_free(o->comm);
        zt_engine_release(e, &o->pack, o->pack_cap, &e->mem.comm);
        free(o->q);
        free(o);
        return rc;
    }
    /* the thread shares the cores with the compute: block in waits instead of spinning */
    zt_comm_set_spin(o->comm, 0);
    pthread_mutex_init(&o->mu, NULL);
    pthread_cond_init(&o->wake, NULL);
    pthread_cond_init(&o->idle, NULL);
    int prc = pthread_create(&o->thread, NULL, run, o);
    if (prc != 0) {
        zt_comm_free(o->edp_comm);
        zt_comm_free(o->comm);
        zt_engine_release(e, &o->pack, o->pack_cap, &e->mem.comm);
        free(o->q);
        free(o);
        /* EAGAIN: no memory for its stack, or a thread limit */
        return zt_error_set(err, prc == EAGAIN ? ZT_ERR_NOMEM : ZT_ERR_INTERNAL, "engine: cannot start the "
                            "communication thread on rank %d: %s", e->rank, strerror(prc));
    }
    e->overlap = o;
    return ZT_OK;
}

static int submit(zt_engine *e, job_kind kind, const int *params, int n, const char *tag, uint64_t *seq,
                  zt_error *err) {
    zt_overlap *o = e->overlap;
    pthread_mutex_lock(&o->mu);
    if (o->count == o->cap) { /* cannot happen: at most one job per unit between drains */
        pthread_mutex_unlock(&o->mu);
        return zt_error_set(err, ZT_ERR_INTERNAL, "engine: communication queue full at %s", tag);
    }
    job *j = &o->q[(o->head + o->count) % o->cap];
    j->kind = kind;
    memcpy(j->params, params, (size_t)n * sizeof *params);
    j->n = n;
    j->seq = ++o->next_seq;
    if (seq) *seq = j->seq;
    snprintf(j->tag, sizeof j->tag, "%s", tag);
    o->count++;
    pthread_cond_signal(&o->wake);
    pthread_mutex_unlock(&o->mu);
    return ZT_OK;
}

int zt_overlap_submit(zt_engine *e, const int *params, int n, const char *tag, uint64_t *seq, zt_error *err) {
    return submit(e, JOB_REDUCE, params, n, tag, seq, err);
}

int zt_overlap_submit_full(zt_engine *e, const int *params, int n, const char *tag, zt_error *err) {
    return submit(e, JOB_FULL, params, n, tag, NULL, err);
}

int zt_overlap_submit_gather(zt_engine *e, const int *params, int n, const char *tag, uint64_t *seq,
                             zt_error *err) {
    return submit(e, JOB_GATHER, params, n, tag, seq, err);
}

/* The main thread's waits are its exposed communication time: they count in e->comm_s. */
int zt_overlap_wait(zt_engine *e, uint64_t seq, zt_error *err) {
    zt_overlap *o = e->overlap;
    double t0 = omp_get_wtime();
    zt_trace_begin("wait", "communication thread");
    pthread_mutex_lock(&o->mu);
    while (o->done_seq < seq && o->status == ZT_OK) pthread_cond_wait(&o->idle, &o->mu);
    int rc = o->status;
    if (rc) *err = o->err;
    pthread_mutex_unlock(&o->mu);
    zt_trace_end();
    e->comm_s += omp_get_wtime() - t0;
    return rc;
}

int zt_overlap_drain(zt_engine *e, zt_error *err) {
    zt_overlap *o = e->overlap;
    if (!o) return ZT_OK;
    double t0 = omp_get_wtime();
    zt_trace_begin("wait", "communication thread");
    pthread_mutex_lock(&o->mu);
    while (o->count > 0 || o->busy) pthread_cond_wait(&o->idle, &o->mu);
    int rc = o->status;
    if (rc) *err = o->err;
    pthread_mutex_unlock(&o->mu);
    zt_trace_end();
    e->comm_s += omp_get_wtime() - t0;
    return rc;
}

void zt_overlap_stop(zt_engine *e) {
    zt_overlap *o = e->overlap;
    if (!o) return;
    pthread_mutex_lock(&o->mu);
    o->stop = true;
    pthread_cond_signal(&o->wake);
    pthread_mutex_unlock(&o->mu);
    pthread_join(o->thread, NULL);
    pthread_mutex_destroy(&o->mu);
    pthread_cond_destroy(&o->wake);
    pthread_cond_destroy(&o->idle);
    zt_comm_free(o->edp_comm);
    zt_comm_free(o->comm);
    zt_engine_release(e, &o->pack, o->pack_cap, &e->mem.comm);
    free(o->q);
    free(o);
    e->overlap = NULL;
}

zt_comm *zt_overlap_comm(const zt_engine *e) { return e->overlap ? e->overlap->comm : NULL; }
zt_comm *zt_overlap_edp_comm(const zt_engine *e) { return e->overlap ? e->overlap->edp_comm : NULL; }
