/* engine.c - the single-process engine: owns every byte of parameter, gradient, optimizer and
 * activation memory of a model and runs its units forward and backward.
 *
 * Layout: parameters live in one flat fp32 buffer, each tensor at a 64-byte aligned offset, in the
 * model's table order; gradients and optimizer moments mirror that layout. Each unit gets its own
 * output and saved-activation buffers (sized for the configured micro-batch) and shares one
 * scratch buffer. Backward ping-pongs the activation gradient between two buffers.
 *
 * Invariants: gradients accumulate across forward_backward calls until step() zeroes them; a
 * unit's forward/backward only ever see full tensors through pointer tables (the seam where the
 * sharded engine gathers). */
#include "zerotrain/zerotrain.h"
#include "engine/init.h"
#include "optim/optim.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#define ALIGN_FLOATS 16 /* 64 bytes */

typedef struct unit_state {
    float **params, **grads; /* (n_params) pointers into the flat buffers */
    float *out;              /* (B, T, out_width) */
    float *saved;            /* saved_floats(B, T) */
    double fwd_s, bwd_s;     /* cumulative wall time of forward / backward */
} unit_state;

struct zt_engine {
    zt_model *model;
    zt_engine_options opt;
    size_t total;     /* floats in the flat parameter layout (with alignment padding) */
    size_t *offset;   /* (n_params) float offset of each parameter */
    float *params, *grads, *m, *v;
    unit_state *units;
    float *scratch;
    float *dact[2];   /* activation-gradient ping-pong, (B, T, max out_width) each */
    float *dloss;     /* (B, T) */
    uint64_t step;
    zt_memory_report mem;
};

static void *alloc_floats(size_t n, size_t *counter) {
    size_t bytes = (n ? n : 1) * sizeof(float);
    bytes = (bytes + 63) & ~(size_t)63;
    void *p = aligned_alloc(64, bytes);
    if (p && counter) *counter += bytes;
    return p;
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
    zt_engine *e = calloc(1, sizeof *e);
    if (!e) return zt_error_set(err, ZT_ERR_NOMEM, "engine: out of memory");
    e->model = m;
    e->opt = *opt;
    int rc = ZT_OK;

    e->offset = calloc((size_t)m->n_params, sizeof *e->offset);
    e->units = calloc((size_t)m->n_units, sizeof *e->units);
    if (!e->offset || !e->units) goto nomem;
    for (int i = 0; i < m->n_params; i++) {
        e->offset[i] = e->total;
        e->total += ((size_t)m->params[i].numel + ALIGN_FLOATS - 1) / ALIGN_FLOATS * ALIGN_FLOATS;
    }
    if (!(e->params = alloc_floats(e->total, &e->mem.params))) goto nomem;
    if (!(e->grads = alloc_floats(e->total, &e->mem.grads))) goto nomem;
    memset(e->params, 0, e->total * sizeof(float));
    memset(e->grads, 0, e->total * sizeof(float));
    if (opt->optim.kind == ZT_OPT_ADAMW || opt->optim.momentum != 0.0f) {
        if (!(e->m = alloc_floats(e->total, &e->mem.optimizer))) goto nomem;
        memset(e->m, 0, e->total * sizeof(float));
    }
    if (opt->optim.kind == ZT_OPT_ADAMW) {
        if (!(e->v = alloc_floats(e->total, &e->mem.optimizer))) goto nomem;
        memset(e->v, 0, e->total * sizeof(float));
    }

    size_t BT = (size_t)opt->B * opt->T, max_width = 1, max_scratch = 0;
    for (int u = 0; u < m->n_units; u++) {
        const zt_unit *un = &m->units[u];
        unit_state *s = &e->units[u];
        s->params = calloc((size_t)un->n_params, sizeof *s->params);
        s->grads = calloc((size_t)un->n_params, sizeof *s->grads);
        if (!s->params || !s->grads) goto nomem;
        for (int k = 0; k < un->n_params; k++) {
            s->params[k] = e->params + e->offset[un->params[k]];
            s->grads[k] = e->grads + e->offset[un->params[k]];
        }
        if (!(s->out = alloc_floats(BT * (size_t)un->out_width, &e->mem.activations))) goto nomem;
        size_t saved = un->ops->saved_floats(un, opt->B, opt->T);
        if (saved && !(s->saved = alloc_floats(saved, &e->mem.activations))) goto nomem;
        size_t scratch = un->ops->scratch_floats(un, opt->B, opt->T);
        if (scratch > max_scratch) max_scratch = scratch;
        if ((size_t)un->out_width > max_width) max_width = (size_t)un->out_width;
    }
    if (!(e->scratch = alloc_floats(max_scratch, &e->mem.activations))) goto nomem;
    for (int i = 0; i < 2; i++)
        if (!(e->dact[i] = alloc_floats(BT * max_width, &e->mem.activations))) goto nomem;
    if (!(e->dloss = alloc_floats(BT, &e->mem.activations))) goto nomem;
    *out = e;
    return ZT_OK;
nomem:
    rc = zt_error_set(err, ZT_ERR_NOMEM,
                      "engine: out of memory laying out model %s (%lld parameters, B=%d T=%d)",
                      m->name, (long long)zt_model_numel(m), opt->B, opt->T);
    zt_engine_free(e);
    return rc;
}

void zt_engine_free(zt_engine *e) {
    if (!e) return;
    if (e->units)
        for (int u = 0; u < e->model->n_units; u++) {
            free(e->units[u].params);
            free(e->units[u].grads);
            free(e->units[u].out);
            free(e->units[u].saved);
        }
    free(e->units);
    free(e->offset);
    free(e->params);
    free(e->grads);
    free(e->m);
    free(e->v);
    free(e->scratch);
    free(e->dact[0]);
    free(e->dact[1]);
    free(e->dloss);
    free(e);
}

int zt_engine_init_params(zt_engine *e, zt_error *err) {
    const zt_model *m = e->model;
    for (int i = 0; i < m->n_params; i++) {
        const zt_param_desc *p = &m->params[i];
        zt_init_fill(e->params + e->offset[i], 0, p->numel, p->init, p->init_std,
                     zt_init_key(e->opt.seed, p->name));
    }
    memset(e->grads, 0, e->total * sizeof(float));
    if (e->m) memset(e->m, 0, e->total * sizeof(float));
    if (e->v) memset(e->v, 0, e->total * sizeof(float));
    e->step = 0;
    return ZT_OK;
}

static int check_batch(const zt_engine *e, const zt_batch *b, zt_error *err) {
    if (b->B < 1 || b->T < 1 || b->B > e->opt.B || b->T > e->opt.T)
        return zt_error_set(err, ZT_ERR_USAGE,
                            "engine: micro-batch B=%d T=%d does not fit the planned B=%d T=%d", b->B,
                            b->T, e->opt.B, e->opt.T);
    size_t n = (size_t)b->B * b->T;
    for (size_t i = 0; i < n; i++)
        if (b->inputs[i] < 0 || b->inputs[i] >= e->model->vocab_size)
            return zt_error_set(err, ZT_ERR_DATA, "engine: input token %d at position %zu is outside "
                                "the vocabulary (V=%d)", b->inputs[i], i, e->model->vocab_size);
    return ZT_OK;
}

/* Runs every unit forward; *loss = mean of the last unit's per-token output. */
static int run_forward(zt_engine *e, const zt_batch *b, float *loss, zt_error *err) {
    const zt_model *m = e->model;
    const float *in = NULL;
    for (int u = 0; u < m->n_units; u++) {
        const zt_unit *un = &m->units[u];
        unit_state *s = &e->units[u];
        zt_unit_args a = {.batch = b, .params = s->params, .grads = s->grads, .in = in,
                          .out = s->out, .saved = s->saved, .scratch = e->scratch};
        double t0 = omp_get_wtime();
        int rc = un->ops->forward(un, &a, err);
        s->fwd_s += omp_get_wtime() - t0;
        if (rc) return zt_error_prefix(err, "forward of unit %s", un->name);
        in = s->out;
    }
    const float *losses = e->units[m->n_units - 1].out;
    size_t n = (size_t)b->B * b->T;
    double sum = 0;
    for (size_t i = 0; i < n; i++) sum += losses[i];
    if (loss) *loss = (float)(sum / (double)n);
    return ZT_OK;
}

int zt_engine_forward(zt_engine *e, const zt_batch *b, float *loss, float *logits_out,
                      zt_error *err) {
    int rc = check_batch(e, b, err);
    if (rc) return rc;
    zt_batch bb = *b;
    if (logits_out) {
        bb.logits_out = logits_out;
        bb.logits_pos = b->T - 1;
    }
    return run_forward(e, &bb, loss, err);
}

int zt_engine_forward_backward(zt_engine *e, const zt_batch *b, float *loss, zt_error *err) {
    int rc = check_batch(e, b, err);
    if (rc) return rc;
    if (!b->targets) return zt_error_set(err, ZT_ERR_USAGE, "engine: forward_backward needs targets");
    if ((rc = run_forward(e, b, loss, err))) return rc;
    const zt_model *m = e->model;
    size_t n = (size_t)b->B * b->T;
    for (size_t i = 0; i < n; i++) e->dloss[i] = b->dloss;
    const float *dout = e->dloss;
    int flip = 0;
    for (int u = m->n_units - 1; u >= 0; u--) {
        const zt_unit *un = &m->units[u];
        unit_state *s = &e->units[u];
        float *din = u > 0 ? e->dact[flip] : NULL;
        zt_unit_args a = {.batch = b, .params = s->params, .grads = s->grads,
                          .in = u > 0 ? e->units[u - 1].out : NULL, .out = s->out,
                          .saved = s->saved, .scratch = e->scratch, .dout = dout, .din = din};
        double t0 = omp_get_wtime();
        rc = un->ops->backward(un, &a, err);
        s->bwd_s += omp_get_wtime() - t0;
        if (rc) return zt_error_prefix(err, "backward of unit %s", un->name);
        dout = din;
        flip ^= 1;
    }
    return ZT_OK;
}

void zt_engine_zero_grad(zt_engine *e) { memset(e->grads, 0, e->total * sizeof(float)); }

int zt_engine_step(zt_engine *e, float lr, zt_step_report *report, zt_error *err) {
    const zt_model *m = e->model;
    const zt_optimizer_config *o = &e->opt.optim;
    double ss = 0;
    for (int i = 0; i < m->n_params; i++)
        ss += zt_sum_squares(e->grads + e->offset[i], (size_t)m->params[i].numel);
    double norm = sqrt(ss);
    zt_step_report r = {.grad_norm = norm, .clip_coef = zt_clip_coef(norm, o->grad_clip),
                        .finite = isfinite(norm)};
    if (report) *report = r;
    if (!r.finite) {
        zt_engine_zero_grad(e);
        return zt_error_set(err, ZT_ERR_NUMERICS,
                            "step %llu: gradient norm is not finite; the update was not applied",
                            (unsigned long long)e->step + 1);
    }
    e->step++;
    for (int i = 0; i < m->n_params; i++) {
        const zt_param_desc *p = &m->params[i];
        if (!p->trainable) continue;
        size_t off = e->offset[i], n = (size_t)p->numel;
        float wd = p->decay ? o->weight_decay : 0.0f;
        if (o->kind == ZT_OPT_ADAMW)
            zt_adamw_update(e->params + off, e->grads + off, e->m + off, e->v + off, n, lr, o->beta1,
                            o->beta2, o->eps, wd, (float)r.clip_coef, (int64_t)e->step);
        else
            zt_sgd_update(e->params + off, e->grads + off, e->m ? e->m + off : NULL, n, lr,
                          o->momentum, o->nesterov, wd, (float)r.clip_coef, (int64_t)e->step);
    }
    zt_engine_zero_grad(e);
    return ZT_OK;
}

const zt_model *zt_engine_model(const zt_engine *e) { return e->model; }
const zt_engine_options *zt_engine_options_of(const zt_engine *e) { return &e->opt; }
float *zt_engine_param(zt_engine *e, int idx) { return e->params + e->offset[idx]; }
float *zt_engine_grad(zt_engine *e, int idx) { return e->grads + e->offset[idx]; }
uint64_t zt_engine_step_count(const zt_engine *e) { return e->step; }

uint64_t zt_engine_param_hash(const zt_engine *e) {
    XXH64_state_t *st = XXH64_createState();
    if (!st) return 0;
    XXH64_reset(st, 0);
    for (int i = 0; i < e->model->n_params; i++)
        XXH64_update(st, e->params + e->offset[i], (size_t)e->model->params[i].numel * sizeof(float));
    uint64_t h = XXH64_digest(st);
    XXH64_freeState(st);
    return h;
}

void zt_engine_memory(const zt_engine *e, zt_memory_report *r) { *r = e->mem; }

void zt_engine_unit_times(const zt_engine *e, int unit, double *fwd_s, double *bwd_s) {
    *fwd_s = e->units[unit].fwd_s;
    *bwd_s = e->units[unit].bwd_s;
}

void zt_engine_reset_times(zt_engine *e) {
    for (int u = 0; u < e->model->n_units; u++) e->units[u].fwd_s = e->units[u].bwd_s = 0;
}
