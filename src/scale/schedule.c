/* schedule.c - a training step played out on a compute stream and a communication stream with
 * the overlap rules of schedule.h. Time advances in the order the main thread issues work, so
 * the communication stream's FIFO order is the issue order. */
#include "scale/schedule.h"

#include <stdlib.h>

typedef struct streams {
    double compute;   /* when the compute stream is free */
    double comm;      /* when the communication stream is free */
    double comm_s;    /* durations issued so far */
} streams;

/* Issues a collective of `dur` seconds at time `at`; returns when it ends. */
static double issue(streams *s, double at, double dur) {
    double start = at > s->comm ? at : s->comm;
    s->comm = start + dur;
    s->comm_s += dur;
    return s->comm;
}

zt_scale_step zt_scale_schedule(const zt_scale_timeline *t) {
    streams s = {0, 0, 0};
    int U = t->n_units, M = t->micro_batches > 0 ? t->micro_batches : 1;
    double *ready = calloc((size_t)(U > 0 ? U : 1), sizeof *ready); /* when unit u's gather ends */
    const double *gb = t->gather_bwd ? t->gather_bwd : t->gather;
    double busy = 0;
    for (int mb = 0; mb < M && ready; mb++) {
        bool reduce_now = t->reduce_every_micro_batch || mb == M - 1;
        /* forward: gather u+1 while u runs */
        if (t->gather && U > 0) ready[0] = issue(&s, s.compute, t->gather[0]);
        for (int u = 0; u < U; u++) {
            double start = s.compute;
            if (t->gather && ready[u] > start) start = ready[u];
            if (t->gather && u + 1 < U) ready[u + 1] = issue(&s, start, t->gather[u + 1]);
            s.compute = start + t->fwd[u];
            busy += t->fwd[u];
        }
        /* backward: gather u-1 while u runs, reduce u once it is done */
        if (t->gather && t->regather_backward && U > 0) ready[U - 1] = issue(&s, s.compute, gb[U - 1]);
        for (int u = U - 1; u >= 0; u--) {
            double start = s.compute;
            if (t->gather && t->regather_backward && ready[u] > start) start = ready[u];
            if (t->gather && t->regather_backward && u > 0) ready[u - 1] = issue(&s, start, gb[u - 1]);
            s.compute = start + t->bwd[u];
            busy += t->bwd[u];
            if (reduce_now && t->reduce && t->reduce[u] > 0) issue(&s, s.compute, t->reduce[u]);
        }
    }
    free(ready);
    double end = s.compute > s.comm ? s.compute : s.comm; /* the optimizer needs every reduction */
    end += t->pre_optimizer_s;
    s.comm_s += t->pre_optimizer_s;
    end += t->optimizer_s;
    busy += t->optimizer_s;
    end += t->post_gather_s; /* nothing to overlap it with */
    s.comm_s += t->post_gather_s;
    zt_scale_step r = {.step_s = end, .compute_s = busy, .comm_s = s.comm_s};
    r.exposed_s = end - busy > 0 ? end - busy : 0;
    r.hidden_s = s.comm_s - r.exposed_s > 0 ? s.comm_s - r.exposed_s : 0;
    return r;
}
