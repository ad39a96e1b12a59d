/* step_streamed.c - Muon's and LAMB's step when the optimizer state or zero3's parameter pieces
 * live in files (offload.c): the one-pass stream of AdamW cannot do them, since an element's update
 * needs its whole tensor (Muon's orthogonalized momentum, LAMB's two norms) before it is final. So
 * the state streams twice through the staging buffers (zt_nvme_store_stream), the whole-tensor
 * work between the passes:
 *
 *   pass 1   Muon: AdamW on the other parameters (final); on the matrices the momentum, and U
 *            (Nesterov's or M) written into the second state kind, which Muon's matrices leave
 *            unused. LAMB: the moments, and the fixed 1,024-element chunk partials of p and u
 *            (a chunk cut by a stream chunk's end is carried over to the next: the same sums).
 *   between  Muon: its rounds (step_whole.c) read each piece's U from the second kind, gather
 *            the matrix to its owner, orthogonalize it once, broadcast it, and write this rank's
 *            rows of the update back there; LAMB: the partials summed over the shard group and
 *            the trust ratios, as in memory.
 *   pass 2   Muon: the update applied to the matrices, their second kind zeroed again (as in
 *            memory); LAMB: the update applied.
 *
 * Each element sees the arithmetic of the in-memory step (step_whole.c) on the same values, so the
 * bits are the same. What it costs: every streamed kind is read and written twice a step, and Muon
 * reads its matrices' U and writes their update once more (random access, 4 bytes per element
 * each way); resident beyond the staging buffers only what the in-memory step already plans
 * (Muon's round of gathered matrices and its Newton-Schulz work; LAMB's partials). A failed read
 * or write stops every rank in the same step (zt_engine_offload_agree). docs/offload.md. */
#include "engine/engine_internal.h"
#include "kernels/kernels.h"
#include "offload/nvme_store.h"
#include "optim/optim.h"

#include <stdlib.h>
#include <string.h>

typedef struct streamed {
    zt_engine *e;
    float lr, gscale, lr_m, step; /* step: LAMB's step size */
    unsigned hashes;
    zt_step_elems_fn fn;
    const float *coeff;          /* LAMB's trust ratio per parameter (pass 2) */
    /* LAMB pass 1: a norm chunk a stream chunk's end cut, carried to the next stream chunk */
    float carry_w[ZT_LAMB_CHUNK], carry_m[ZT_LAMB_CHUNK], carry_v[ZT_LAMB_CHUNK];
} streamed;

static int stream_chunk(void *ctx, size_t begin, size_t n, float *const *state, zt_error *err) {
    (void)err;
    streamed *c = ctx;
    float *m, *v, *w;
    const float *g;
    zt_step_chunk_kinds(c->e, begin, state, &m, &v, &w, &g);
    zt_step_range(c->e, begin, n, m, v, w, g, c->hashes, c->fn, c);
    return ZT_OK;
}

static bool moments_bf16(const zt_engine *e) { return e->opt.precision.moments == ZT_DTYPE_BF16; }

/* ---- Muon ------------------------------------------------------------------------------------- */

static void muon_pass1(void *ctx, int i, float *w, const float *g, float *m, float *v, size_t n, int64_t first,
                       size_t at) {
    (void)at;
    streamed *c = ctx;
    zt_engine *e = c->e;
    const zt_optimizer_config *o = &e->opt.optim;
    if (!e->muon[i]) { /* AdamW, as muon_step's */
        zt_adamw_update(w, g, m, v, n, c->lr, o->beta1, o->beta2, o->eps,
                        e->model->params[i].decay ? o->weight_decay : 0.0f, c->gscale, (int64_t)e->step);
        zt_engine_round_updated(e, i, w, m, v, n, first);
        return;
    }
    zt_muon_momentum(g, m, v, n, o->muon_momentum, o->muon_nesterov, c->gscale); /* U into the unused kind */
    if (moments_bf16(e)) zt_round_bf16(m, n); /* bf16-low: the momentum as stored (U from its fp32 value) */
}

static void muon_pass2(void *ctx, int i, float *w, const float *g, float *m, float *v, size_t n, int64_t first,
                       size_t at) {
    (void)g, (void)at;
    streamed *c = ctx;
    zt_engine *e = c->e;
    if (!e->muon[i]) return; /* AdamW's were final after pass 1 */
    zt_muon_apply(w, v, n, c->lr_m, e->opt.optim.muon_weight_decay); /* v: this rank's rows of the update */
    zt_engine_round_updated(e, i, w, m, NULL, n, first);
    memset(v, 0, n * sizeof(float)); /* Muon's matrices keep their second kind zero, as in memory */
}

/* ---- LAMB ------------------------------------------------------------------------------------- */

/* The partials of parameter i's norm chunks that elements [at, at + n) of its slice hold (w, m, v
 * at element at): whole chunks in one call, a chunk the range cuts through gathered in the carry
 * and summed when its last element arrives (chunks come in order: the stream's and the slice's). */
static void lamb_partials_range(streamed *c, int i, const float *w, const float *m, const float *v, size_t n,
                                size_t at, float wd) {
    zt_engine *e = c->e;
    const zt_plan *pl = &e->plan;
    const zt_optimizer_config *o = &e->opt.optim;
    double *wp = e->lamb_partials, *up = wp + pl->norm_chunks;
    int64_t lo = (int64_t)at, hi = (int64_t)(at + n), rat, rn, rchunk;
    for (int k = 0; zt_plan_piece_run(pl, i, e->shard_optim ? pl->p[i].shard : 0, k, &rat, &rn, &rchunk); k++) {
        int64_t a = lo > rat ? lo : rat, b = hi < rat + rn ? hi : rat + rn;
        if (a >= b) continue;
        int64_t c0 = (a - rat) / ZT_LAMB_CHUNK, c1 = (b - 1 - rat) / ZT_LAMB_CHUNK;
        int64_t full0 = -1, full_end = 0; /* a run of whole chunks: its first chunk, its end element */
        for (int64_t ch = c0; ch <= c1 + 1; ch++) {
            int64_t cs = rat + ch * ZT_LAMB_CHUNK, ce = cs + ZT_LAMB_CHUNK < rat + rn ? cs + ZT_LAMB_CHUNK : rat + rn;
            bool whole = ch <= c1 && cs >= a && ce <= b;
            if (whole) {
                if (full0 < 0) full0 = ch;
                full_end = ce;
                continue;
            }
            if (full0 >= 0) { /* the whole chunks before this one */
                int64_t s0 = rat + full0 * ZT_LAMB_CHUNK;
                zt_lamb_partials(w + (s0 - lo), m + (s0 - lo), v + (s0 - lo), full_end - s0, o->eps, wd,
                                 wp + rchunk + full0, up + rchunk + full0);
                full0 = -1;
            }
            if (ch > c1) break;
            int64_t x = a > cs ? a : cs, y = b < ce ? b : ce; /* the part of a cut chunk this range holds */
            memcpy(c->carry_w + (x - cs), w + (x - lo), (size_t)(y - x) * sizeof(float));
            memcpy(c->carry_m + (x - cs), m + (x - lo), (size_t)(y - x) * sizeof(float));
            memcpy(c->carry_v + (x - cs), v + (x - lo), (size_t)(y - x) * sizeof(float));
            if (y == ce) /* its last element: the chunk is complete */
                zt_lamb_partials(c->carry_w, c->carry_m, c->carry_v, ce - cs, o->eps, wd, wp + rchunk + ch,
                                 up + rchunk + ch);
        }
    }
}

static void lamb_pass1(void *ctx, int i, float *w, const float *g, float *m, float *v, size_t n, int64_t first,
                       size_t at) {
    (void)first;
    streamed *c = ctx;
    zt_engine *e = c->e;
    const zt_optimizer_config *o = &e->opt.optim;
    zt_lamb_moments(g, m, v, n, o->beta1, o->beta2, c->gscale);
    if (moments_bf16(e)) { /* bf16-low: the moments as stored, before u is taken of them */
        zt_round_bf16(m, n);
        zt_round_bf16(v, n);
    }
    if (zt_param_cut(&e->model->params[i])) return; /* cut by tp or ep: its norms between the passes */
    lamb_partials_range(c, i, w, m, v, n, at, e->model->params[i].decay ? o->weight_decay : 0.0f);
}

static void lamb_pass2(void *ctx, int i, float *w, const float *g, float *m, float *v, size_t n, int64_t first,
                       size_t at) {
    (void)g, (void)at;
    streamed *c = ctx;
    zt_engine *e = c->e;
    const zt_optimizer_config *o = &e->opt.optim;
    zt_lamb_apply(w, m, v, n, o->eps, e->model->params[i].decay ? o->weight_decay : 0.0f, c->step * c->coeff[i]);
    zt_engine_round_updated(e, i, w, m, v, n, first);
}

/* Every trainable parameter's trust ratio, as lamb_step's: the tensors tensor parallelism cuts from
 * their logical tensors (zt_step_lamb_cut_streamed), the others from the partials pass 1 took,
 * summed over the shard group. */
static int lamb_ratios(zt_engine *e, float *coeff, zt_error *err) {
    const zt_model *md = e->model;
    int rc = ZT_OK, io = ZT_OK;
    zt_error io_err;
    for (int i = 0; i < md->n_params && !rc; i++)
        if (md->params[i].trainable && zt_param_cut(&md->params[i]))
            rc = zt_step_lamb_cut_streamed(e, i, &coeff[i], &io, &io_err, err);
    if (rc) return rc;
    if (io) *err = io_err;
    if ((rc = zt_engine_offload_agree(e, io, err)) || (rc = zt_step_lamb_sum_partials(e, err))) return rc;
    for (int i = 0; i < md->n_params; i++)
        if (md->params[i].trainable && !zt_param_cut(&md->params[i])) coeff[i] = zt_step_lamb_ratio(e, i);
    return ZT_OK;
}

/* ---- the step --------------------------------------------------------------------------------- */

int zt_step_streamed(zt_engine *e, float lr, float gscale, zt_error *err) {
    const zt_optimizer_config *o = &e->opt.optim;
    bool muon = o->kind == ZT_OPT_MUON, pieces = zt_store_file_kind(e) >= 0;
    streamed *c = calloc(1, sizeof *c);
    float *coeff = calloc((size_t)e->model->n_params + 1, sizeof *coeff);
    if (!c || !coeff) {
        free(c);
        free(coeff);
        return zt_error_set(err, ZT_ERR_NOMEM, "optimizer step: out of memory");
    }
    c->e = e;
    c->lr = lr;
    c->gscale = gscale;
    c->lr_m = o->lr_peak > 0 ? lr * (o->muon_lr / o->lr_peak) : o->muon_lr;
    c->step = zt_lamb_step_size(lr, o->beta1, o->beta2, o->lamb_bias_correction, (int64_t)e->step);
    c->coeff = coeff;
    if (!muon) memset(e->lamb_partials, 0, 2 * (size_t)e->plan.norm_chunks * sizeof(double));
    /* pass 1: the pieces as read are checked against what the last step wrote, the gradient pieces
     * against what backward wrote */
    if (pieces) zt_param_offload_hash_begin(e);
    if (e->grad_kind >= 0) zt_grad_offload_hash_begin(e);
    c->hashes = ZT_STEP_HASH_GRAD | ZT_STEP_CHECK_PARAM;
    c->fn = muon ? muon_pass1 : lamb_pass1;
    int src = zt_nvme_store_stream(e->nvme, stream_chunk, c, err);
    if (!src && e->grad_kind >= 0) src = zt_grad_offload_hash_check(e, err);
    if (!src && pieces) src = zt_param_offload_check(e, err);
    int rc = zt_engine_offload_agree(e, src, err);
    /* between the passes: the whole tensors */
    if (!rc && muon) {
        int io = ZT_OK;
        zt_error io_err;
        rc = zt_step_muon_rounds(e, lr, gscale, true, &io, &io_err, err);
        if (!rc) { /* every rank learns whether every rank's reads and writes went through */
            if (io) *err = io_err;
            rc = zt_engine_offload_agree(e, io, err);
        }
    } else if (!rc) {
        rc = lamb_ratios(e, coeff, err);
    }
    /* pass 2: the update; the pieces hashed as they are written back */
    if (!rc) {
        c->hashes = ZT_STEP_HASH_PARAM;
        c->fn = muon ? muon_pass2 : lamb_pass2;
        src = zt_nvme_store_stream(e->nvme, stream_chunk, c, err);
        rc = zt_engine_offload_agree(e, src, err);
    }
    if (pieces) zt_param_offload_hash_end(e);
    free(coeff);
    free(c);
    return rc;
}
