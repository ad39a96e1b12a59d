/* pipeline.c - pipeline parallelism (pipeline.h): the cut, the schedules (1F1B, GPipe) over the
 * stage's engine, the point-to-point transfers of activations and their gradients, the parameters
 * two stages hold (GPT-2's tied wte: Megatron-LM's embedding group), the gradient norm over all
 * stages, the whole model's parameters for hashes and weights files, and the bubble.
 *
 * Invariants: micro-batch j of a step uses slot j % slots of the units' outputs and saved buffers
 * and received-input buffer j % (slots + 1) (a receive is posted one micro-batch ahead, while
 * `slots` others may still wait for their backward); output-gradient receives and input-gradient
 * sends alternate between two buffers. Backwards run in micro-batch order. Transfer tags are
 * 4 x micro-batch + kind, so no two transfers in flight between two stages share a tag. */
#include "engine/pipeline.h"
#include "comm/p2p.h"
#include "engine/engine_internal.h"
#include "obs/trace.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#define MAX_TIED 8
enum { TAG_ACT = 0, TAG_GRAD = 1, TAG_EVAL = 2, TAG_PARAM = 3 };

struct zt_pipeline {
    zt_engine *e;
    const zt_model *full;
    zt_pp_cut cut;
    int s, p;                 /* this stage, the stages */
    int *map, *owner;         /* (full->n_params) the stage's index or -1; the owning stage */
    zt_comm *coll;            /* the mesh's pipeline group (collectives) */
    zt_comm *link;            /* its duplicate for the transfers */
    zt_pp_schedule sched;
    int slots;
    size_t in_floats, out_floats; /* (B, T, width) of the received input and the sent output */
    int n_tied;
    int tied[MAX_TIED], tied_peer[MAX_TIED]; /* stage-local parameter, the other stage holding it */
    bool tied_owner[MAX_TIED];
    int steps;
    double busy_s, total_s;   /* over the steps counted (the first dropped once there are more) */
    double first_busy, first_total;
    int eval_seq;
};

const char *zt_pp_schedule_name(zt_pp_schedule s) { return s == ZT_PP_GPIPE ? "gpipe" : "1f1b"; }

int zt_pipeline_slots(zt_pp_schedule sched, int stages, int s, int micro) {
    int in_flight = sched == ZT_PP_GPIPE ? micro : stages - s;
    return in_flight < micro ? in_flight : micro;
}

int zt_pipeline_cut(const zt_model *full, int stages, const char *given, int B, int T, int lp_kind, int micro,
                    zt_pp_schedule sched, zt_pp_cut *cut, zt_error *err) {
    int n = full->n_units;
    if (given && given[0]) return zt_pp_parse_cut(given, n, stages, cut, err);
    double *cost = malloc((size_t)n * sizeof *cost);
    if (!cost) return zt_error_set(err, ZT_ERR_NOMEM, "pipeline: out of memory");
    /* the first stage keeps the most micro-batches in flight: cost the activations at that */
    zt_pp_unit_costs(full, B, T, lp_kind, zt_pipeline_slots(sched, stages, 0, micro), cost);
    int rc = zt_pp_balance(cost, n, stages, cut, err);
    free(cost);
    return rc;
}

void zt_pipeline_engine_options(const zt_model *full, const zt_pp_cut *cut, int s, zt_pp_schedule sched, int micro,
                                zt_engine_options *eo) {
    eo->pp_slots = zt_pipeline_slots(sched, cut->stages, s, micro);
    eo->pp_in_width = s > 0 ? full->units[cut->first[s] - 1].out_width : 0;
    eo->pp_send_out = s < cut->stages - 1;
}

void zt_pipeline_free(zt_pipeline *p) {
    if (!p) return;
    if (p->e) p->e->pp = NULL;
    zt_comm_free(p->link);
    free(p->map);
    free(p->owner);
    free(p);
}

int zt_pipeline_create(zt_engine *e, const zt_model *full, const zt_pp_cut *cut, const int *map,
                       const zt_mesh *mesh, zt_pp_schedule sched, zt_pipeline **out, zt_error *err) {
    *out = NULL;
    if (mesh->pp != cut->stages || !mesh->pp_comm)
        return zt_error_set(err, ZT_ERR_INTERNAL, "pipeline: %d stages cut for a mesh of pp %d", cut->stages, mesh->pp);
    zt_pipeline *p = calloc(1, sizeof *p);
    if (!p) return zt_error_set(err, ZT_ERR_NOMEM, "pipeline: out of memory");
    p->e = e;
    p->full = full;
    p->cut = *cut;
    p->s = mesh->pp_rank;
    p->p = mesh->pp;
    p->coll = mesh->pp_comm;
    p->sched = sched;
    p->slots = e->pp_slots;
    size_t BT = (size_t)e->opt.B * e->opt.T;
    p->in_floats = BT * (size_t)(e->opt.pp_in_width > 0 ? e->opt.pp_in_width : 0);
    p->out_floats = e->opt.pp_send_out ? BT * (size_t)e->model->units[e->model->n_units - 1].out_width : 0;
    p->map = malloc((size_t)full->n_params * sizeof *p->map);
    p->owner = malloc((size_t)full->n_params * sizeof *p->owner);
    int rc = ZT_OK;
    if (!p->map || !p->owner) {
        rc = zt_error_set(err, ZT_ERR_NOMEM, "pipeline: out of memory");
        goto fail;
    }
    memcpy(p->map, map, (size_t)full->n_params * sizeof *map);
    for (int k = 0; k < full->n_params; k++) {
        p->owner[k] = zt_pp_param_owner(full, cut, k);
        if (p->map[k] < 0) continue;
        int other = -1, holders = 0; /* the stages whose units list k */
        for (int t = 0; t < cut->stages; t++) {
            bool lists = false;
            for (int u = cut->first[t]; u < cut->first[t + 1] && !lists; u++)
                for (int j = 0; j < full->units[u].n_params; j++) lists |= full->units[u].params[j] == k;
            if (lists) holders++;
            if (lists && t != p->s) other = t;
        }
        if (holders < 2) continue;
        if (holders > 2 || p->n_tied == MAX_TIED) {
            rc = zt_error_set(err, ZT_ERR_USAGE, "pipeline: parameter %s is listed by units of %d stages (at most two "
                              "stages may share a parameter, and at most %d parameters)", full->params[k].name, holders,
                              MAX_TIED);
            goto fail;
        }
        p->tied[p->n_tied] = p->map[k];
        p->tied_peer[p->n_tied] = other;
        p->tied_owner[p->n_tied++] = p->owner[k] == p->s;
    }
    if ((rc = zt_comm_dup(p->coll, &p->link, err))) goto fail;
    zt_comm_set_name(p->link, "pp");
    e->pp = p;
    *out = p;
    return ZT_OK;
fail:
    zt_pipeline_free(p);
    return rc;
}

const zt_model *zt_pipeline_full_model(const zt_pipeline *p) { return p->full; }
int zt_pipeline_owner(const zt_pipeline *p, int k) { return p->owner[k]; }

int zt_pipeline_full_index(const zt_pipeline *p, int i) {
    for (int k = 0; k < p->full->n_params; k++)
        if (p->map[k] == i) return k;
    return -1;
}

bool zt_pipeline_writes(const zt_pipeline *p, int i) {
    int k = zt_pipeline_full_index(p, i);
    return k >= 0 && p->owner[k] == p->s;
}

/* Waits for t (if posted), the wait shown in the trace as `what`. */
static int wait_traced(zt_pipeline *p, zt_p2p *t, zt_error *err) {
    if (!t->active) return ZT_OK;
    zt_trace_begin("pp wait", t->what);
    int rc = zt_p2p_wait(p->link, t, err);
    zt_trace_end();
    return rc;
}

static int post_recv(zt_pipeline *p, int kind, int j, float *buf, size_t floats, zt_p2p *t, zt_error *err) {
    char what[48];
    snprintf(what, sizeof what, "%s %d", kind == TAG_GRAD ? "recv gradient" : "recv activation", j);
    return zt_p2p_irecv(p->link, buf, floats * sizeof(float), kind == TAG_GRAD ? p->s + 1 : p->s - 1, 4 * j + kind,
                        what, t, err);
}

static int post_send(zt_pipeline *p, int kind, int j, const float *buf, size_t floats, zt_p2p *t, zt_error *err) {
    char what[48];
    snprintf(what, sizeof what, "%s %d", kind == TAG_GRAD ? "send gradient" : "send activation", j);
    return zt_p2p_isend(p->link, buf, floats * sizeof(float), kind == TAG_GRAD ? p->s - 1 : p->s + 1, 4 * j + kind,
                        what, t, err);
}

/* The state of one step's schedule on this stage. */
typedef struct run {
    zt_pipeline *p;
    zt_batch *mb;
    int m;
    float *losses;
    zt_p2p act_recv, grad_recv, grad_send[2];
    zt_p2p *act_send;         /* (slots) */
    double busy;
} run;

static int forward_one(run *r, int j, zt_error *err) {
    zt_pipeline *p = r->p;
    zt_engine *e = p->e;
    int k = j % p->slots, rc;
    const float *in = NULL;
    if (p->s > 0) { /* the activation posted for j; then the next one's receive, before computing */
        if ((rc = wait_traced(p, &r->act_recv, err))) return rc;
        in = e->pp_in[j % (p->slots + 1)];
        if (j + 1 < r->m &&
            (rc = post_recv(p, TAG_ACT, j + 1, e->pp_in[(j + 1) % (p->slots + 1)], p->in_floats, &r->act_recv, err)))
            return rc;
    }
    if (p->out_floats && (rc = wait_traced(p, &r->act_send[k], err))) return rc; /* the slot's last send */
    zt_engine_use_slot(e, k);
    e->pp_micro = j;
    char name[32];
    snprintf(name, sizeof name, "F%d", j);
    zt_trace_begin("pipeline", name);
    double t0 = omp_get_wtime();
    rc = zt_engine_run_forward(e, &r->mb[j], true, in, &r->losses[j], err);
    r->busy += omp_get_wtime() - t0;
    zt_trace_end();
    e->pp_micro = -1;
    if (rc) return zt_error_prefix(err, "pipeline stage %d, forward of micro-batch %d", p->s, j);
    if (p->out_floats)
        rc = post_send(p, TAG_ACT, j, e->units[e->model->n_units - 1].out, p->out_floats, &r->act_send[k], err);
    return rc;
}

static int backward_one(run *r, int j, zt_error *err) {
    zt_pipeline *p = r->p;
    zt_engine *e = p->e;
    int rc;
    const float *dout = NULL;
    if (p->out_floats) { /* the gradient posted for j; then the next one's receive */
        if ((rc = wait_traced(p, &r->grad_recv, err))) return rc;
        dout = e->pp_dout[j % 2];
        if (j + 1 < r->m &&
            (rc = post_recv(p, TAG_GRAD, j + 1, e->pp_dout[(j + 1) % 2], p->out_floats, &r->grad_recv, err)))
            return rc;
    }
    float *din = NULL;
    if (p->in_floats) { /* the buffer's previous send must be done before backward writes it */
        if ((rc = wait_traced(p, &r->grad_send[j % 2], err))) return rc;
        din = e->pp_din[j % 2];
    }
    zt_engine_use_slot(e, j % p->slots);
    e->pp_micro = j;
    char name[32];
    snprintf(name, sizeof name, "B%d", j);
    zt_trace_begin("pipeline", name);
    double t0 = omp_get_wtime();
    rc = zt_grads_begin_micro(e, err);
    if (!rc) rc = zt_engine_run_backward(e, &r->mb[j], dout, p->s > 0 ? e->pp_in[j % (p->slots + 1)] : NULL, din, err);
    if (!rc) rc = zt_grads_end_micro(e, err);
    r->busy += omp_get_wtime() - t0;
    zt_trace_end();
    e->pp_micro = -1;
    if (rc) return zt_error_prefix(err, "pipeline stage %d, backward of micro-batch %d", p->s, j);
    if (p->in_floats) rc = post_send(p, TAG_GRAD, j, din, p->in_floats, &r->grad_send[j % 2], err);
    return rc;
}

int zt_pipeline_train(zt_pipeline *p, const zt_batch *mb, int m, float *losses, zt_error *err) {
    zt_engine *e = p->e;
    if (m < 1 || zt_pipeline_slots(p->sched, p->p, p->s, m) > p->slots)
        return zt_error_set(err, ZT_ERR_USAGE, "pipeline: %d micro-batches for an engine planned with %d slots", m,
                            p->slots);
    run r = {.p = p, .m = m, .losses = losses};
    r.mb = malloc((size_t)m * sizeof *r.mb);
    r.act_send = calloc((size_t)p->slots, sizeof *r.act_send);
    if (!r.mb || !r.act_send) {
        free(r.mb), free(r.act_send);
        return zt_error_set(err, ZT_ERR_NOMEM, "pipeline: out of memory");
    }
    int rc = ZT_OK;
    for (int j = 0; j < m && !rc; j++) {
        losses[j] = 0;
        r.mb[j] = mb[j];
        e->pp_micro = j; /* every stage draws micro-batch j's dropout masks */
        r.mb[j].dropout_key = zt_engine_dropout_key(e);
        e->pp_micro = -1;
        rc = zt_engine_check_batch(e, &mb[j], err);
        if (!rc && !mb[j].targets) rc = zt_error_set(err, ZT_ERR_USAGE, "pipeline: a training micro-batch needs targets");
    }
    double t0 = omp_get_wtime();
    zt_trace_begin("pipeline", zt_pp_schedule_name(p->sched));
    if (!rc && p->in_floats) rc = post_recv(p, TAG_ACT, 0, e->pp_in[0], p->in_floats, &r.act_recv, err);
    if (!rc && p->out_floats) rc = post_recv(p, TAG_GRAD, 0, e->pp_dout[0], p->out_floats, &r.grad_recv, err);
    if (p->sched == ZT_PP_GPIPE) {
        for (int j = 0; j < m && !rc; j++) rc = forward_one(&r, j, err);
        for (int j = 0; j < m && !rc; j++) rc = backward_one(&r, j, err);
    } else {
        int warm = p->p - p->s - 1 < m ? p->p - p->s - 1 : m, f = 0, b = 0;
        for (; f < warm && !rc; f++) rc = forward_one(&r, f, err);
        for (; f < m && !rc; f++, b++) {
            rc = forward_one(&r, f, err);
            if (!rc) rc = backward_one(&r, b, err);
        }
        for (; b < m && !rc; b++) rc = backward_one(&r, b, err);
    }
    for (int k = 0; k < p->slots && !rc; k++) rc = wait_traced(p, &r.act_send[k], err);
    for (int k = 0; k < 2 && !rc; k++) rc = wait_traced(p, &r.grad_send[k], err);
    zt_trace_end();
    double total = omp_get_wtime() - t0;
    if (!rc) { /* the bubble: the first step (warm caches, first gathers) is dropped once there are more */
        if (p->steps == 0) {
            p->first_busy = r.busy;
            p->first_total = total;
        } else {
            p->busy_s += r.busy;
            p->total_s += total;
        }
        p->steps++;
    }
    free(r.mb);
    free(r.act_send);
    return rc;
}

zt_comm *zt_pipeline_link(const zt_pipeline *p) { return p->link; }

void zt_pipeline_bubble(const zt_pipeline *p, double *measured, double *theory) {
    double busy = p->steps > 1 ? p->busy_s : p->first_busy, total = p->steps > 1 ? p->total_s : p->first_total;
    *measured = total > 0 ? 1.0 - busy / total : 0;
    int m = p->e->opt.grad_accum > 0 ? p->e->opt.grad_accum : 1;
    *theory = (double)(p->p - 1) / (double)(m + p->p - 1);
}

int zt_pipeline_forward(zt_pipeline *p, const zt_batch *b, float *loss, zt_error *err) {
    zt_engine *e = p->e;
    int j = p->eval_seq++ % 4096, rc = zt_engine_check_batch(e, b, err);
    zt_batch bb = *b;
    bb.dropout_key = 0; /* evaluation: no dropout */
    zt_p2p t;
    float mine = 0;
    if (!rc && p->in_floats) {
        rc = post_recv(p, TAG_EVAL, j, e->pp_in[0], p->in_floats, &t, err);
        if (!rc) rc = wait_traced(p, &t, err);
    }
    zt_engine_use_slot(e, 0);
    if (!rc) rc = zt_engine_run_forward(e, &bb, false, p->in_floats ? e->pp_in[0] : NULL, &mine, err);
    if (!rc && p->out_floats) {
        rc = post_send(p, TAG_EVAL, j, e->units[e->model->n_units - 1].out, p->out_floats, &t, err);
        if (!rc) rc = wait_traced(p, &t, err);
    }
    double x = mine, all[ZT_PP_MAX_STAGES];
    if (!rc) rc = zt_all_gather_f64(p->coll, &x, all, 1, "pipeline: the evaluation loss", err);
    double sum = 0; /* the last stage's loss and the others' auxiliary losses (0 without experts) */
    for (int q = 0; q < p->p && !rc; q++) sum += all[q];
    if (!rc) *loss = (float)sum;
    return rc;
}

/* This rank's layout of stage-local parameter i's reduced gradient: its pieces or the whole. */
static float *grad_of(zt_engine *e, int i, size_t *n) {
    const zt_plan *pl = &e->plan;
    if (e->shard_optim) {
        *n = (size_t)zt_plan_shard_numel(pl, i, pl->p[i].shard);
        return e->grad_pieces + pl->p[i].gshard_off;
    }
    *n = (size_t)e->model->params[i].numel;
    return e->micro_grads + pl->p[i].gfull_off;
}

/* The tied gradients go through a fixed chunk of host memory (outside the memory plan, like the
 * other small host buffers): the exchange never holds a second copy of the tensor. */
#define TIED_CHUNK ((size_t)1 << 18)

int zt_pipeline_tied_grads(zt_engine *e, zt_error *err) {
    zt_pipeline *p = e->pp;
    float *other = NULL;
    int rc = ZT_OK;
    for (int t = 0; t < p->n_tied && !rc; t++) {
        int i = p->tied[t];
        if (!e->model->params[i].trainable) continue;
        size_t n;
        float *g = grad_of(e, i, &n);
        if (!other && !(other = malloc(TIED_CHUNK * sizeof *other)))
            return zt_error_set(err, ZT_ERR_NOMEM, "pipeline: out of memory summing %s", e->model->params[i].name);
        char what[48];
        snprintf(what, sizeof what, "tied gradient %d", t);
        /* the step's transfers are all done: no tag is in flight; chunks are matched in order */
        int tag = 4 * t + TAG_PARAM;
        for (size_t at = 0; at < n && !rc; at += TIED_CHUNK) {
            size_t len = n - at < TIED_CHUNK ? n - at : TIED_CHUNK;
            zt_p2p snd, rcv;
            rc = zt_p2p_irecv(p->link, other, len * sizeof(float), p->tied_peer[t], tag, what, &rcv, err);
            if (!rc) rc = zt_p2p_isend(p->link, g + at, len * sizeof(float), p->tied_peer[t], tag, what, &snd, err);
            if (!rc) rc = wait_traced(p, &rcv, err);
            zt_error junk;
            int rc2 = wait_traced(p, &snd, rc ? &junk : err);
            if (!rc) rc = rc2;
            if (!rc) /* first stage's + last stage's, the same sum on both (addition commutes exactly) */
                for (size_t x = 0; x < len; x++) g[at + x] = p->tied_owner[t] ? g[at + x] + other[x] : other[x] + g[at + x];
        }
        if (rc) zt_error_prefix(err, "pipeline: summing %s over the stages that hold it", e->model->params[i].name);
    }
    free(other);
    return rc;
}

void zt_pipeline_norm_untie(zt_engine *e, double *partials) {
    zt_pipeline *p = e->pp;
    const zt_plan *pl = &e->plan;
    for (int t = 0; t < p->n_tied; t++) /* a copy's chunks are counted by its owner */
        if (!p->tied_owner[t])
            for (int sh = 0; sh < pl->nshards; sh++) {
                int64_t first, count;
                zt_plan_norm_chunks(pl, p->tied[t], sh, &first, &count);
                memset(partials + first, 0, (size_t)count * sizeof *partials);
            }
}

int zt_pipeline_norm(zt_engine *e, const double *partials, size_t n, double *sumsq, zt_error *err) {
    zt_pipeline *p = e->pp;
    double mine = (double)n, counts_d[ZT_PP_MAX_STAGES];
    size_t counts[ZT_PP_MAX_STAGES], total = 0;
    int rc = zt_all_gather_f64(p->coll, &mine, counts_d, 1, "pipeline: gradient-norm chunks", err);
    if (rc) return rc;
    for (int s = 0; s < p->p; s++) total += counts[s] = (size_t)counts_d[s];
    double *all = malloc((total ? total : 1) * sizeof *all);
    if (!all) return zt_error_set(err, ZT_ERR_NOMEM, "pipeline: out of memory for the gradient norm");
    rc = zt_all_gather_f64v(p->coll, partials, all, counts, "pipeline: gradient-norm partials", err);
    if (!rc && !e->tp_comm) { /* the stages' chunks in stage order are the whole model's in table order */
        double s = 0;
        for (size_t c = 0; c < total; c++) s += all[c];
        *sumsq = s;
    } else if (!rc) { /* tp: zt_engine_tp_norm's sums over the stages' chunks in that order */
        const zt_model *f = p->full;
        double cut = 0, whole = 0, parts[64];
        size_t c = 0;
        for (int s = 0; s < p->p; s++)
            for (int k = 0; k < f->n_params; k++) {
                if (!zt_pp_stage_holds(f, &p->cut, s, k)) continue;
                int64_t nk = zt_plan_desc_chunks(&f->params[k]) * zt_param_expert_parts(&f->params[k]);
                double *to = f->params[k].tp_parts > 1 ? &cut : &whole;
                for (int64_t q = 0; q < nk && c < total; q++) *to += all[c++];
            }
        if (c != total || e->group.parts > 64)
            rc = zt_error_set(err, ZT_ERR_INTERNAL, "pipeline: %zu of %zu gradient-norm chunks placed (%d tp parts)", c,
                              total, e->group.parts);
        if (!rc) rc = zt_all_gather_f64(e->tp_comm, &cut, parts, 1, "gradient norm over the parts", err);
        if (!rc) {
            double s = 0;
            for (int q = 0; q < e->group.parts; q++) s += parts[q];
            *sumsq = s + whole;
        }
    }
    free(all);
    return rc;
}

int zt_pipeline_param_gather(zt_pipeline *p, int k, float *dst, zt_error *err) {
    int o = p->owner[k], rc = ZT_OK;
    size_t bytes = (size_t)p->full->params[k].logical_numel * sizeof(float);
    char what[48];
    snprintf(what, sizeof what, "parameter %d", k);
    if (p->s == o) {
        float *buf = p->s == 0 ? dst : malloc(bytes ? bytes : 1);
        if (!buf) return zt_error_set(err, ZT_ERR_NOMEM, "pipeline: out of memory gathering %s", p->full->params[k].name);
        rc = zt_engine_param_gather(p->e, p->map[k], buf, err); /* collective over the stage's dp group */
        if (!rc && p->s != 0) {
            zt_p2p t;
            rc = zt_p2p_isend(p->link, buf, bytes, 0, 4 * (k % 4096) + TAG_PARAM, what, &t, err);
            if (!rc) rc = wait_traced(p, &t, err);
        }
        if (buf != dst) free(buf);
    } else if (p->s == 0) {
        zt_p2p t;
        rc = zt_p2p_irecv(p->link, dst, bytes, o, 4 * (k % 4096) + TAG_PARAM, what, &t, err);
        if (!rc) rc = wait_traced(p, &t, err);
    }
    return rc;
}

int zt_pipeline_param_hash(zt_pipeline *p, uint64_t *hash, zt_error *err) {
    XXH64_state_t *st = p->s == 0 ? XXH64_createState() : NULL;
    if (p->s == 0 && !st) return zt_error_set(err, ZT_ERR_NOMEM, "pipeline: out of memory hashing");
    if (st) XXH64_reset(st, 0);
    int rc = ZT_OK;
    for (int k = 0; k < p->full->n_params && !rc; k++) {
        size_t n = (size_t)p->full->params[k].logical_numel;
        bool need = p->s == 0 || p->s == p->owner[k];
        float *t = need ? malloc((n ? n : 1) * sizeof *t) : NULL;
        if (need && !t) rc = zt_error_set(err, ZT_ERR_NOMEM, "pipeline: out of memory hashing");
        if (!rc) rc = zt_pipeline_param_gather(p, k, t, err);
        if (!rc && st) XXH64_update(st, t, n * sizeof(float));
        free(t);
    }
    double mine = 0, all[ZT_PP_MAX_STAGES];
    if (st) {
        uint64_t h = XXH64_digest(st);
        memcpy(&mine, &h, 8);
        XXH64_freeState(st);
    }
    if (!rc) rc = zt_all_gather_f64(p->coll, &mine, all, 1, "pipeline: the parameter hash", err);
    if (!rc) memcpy(hash, &all[0], 8);
    return rc;
}
