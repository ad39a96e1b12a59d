/* tp_group.c - the engine's side of tensor parallelism (docs/parallelism.md): the collectives a
 * cut unit calls (zt_unit_group: sums, maxima, the generated logits side by side, and sequence
 * parallelism's all-gathers and reduce-scatters along T) over the mesh's tp group, the gradient norm's sum over the parts, and parameters as logical tensors (gathered
 * from every part, the experts stored E/ep a rank then from every ep part, or taken from a whole
 * one; Muon's and LAMB's step gathers its cut matrices and tensors the same way, step_whole.c).
 *
 * Invariants: every sum over the parts is a fixed tree (zt_all_reduce: the same bits on every part)
 * or an in-order sum of gathered values, so the parts stay bit-identical where they replicate
 * (norms, biases of row-parallel layers, the position table) and a run is reproducible; the
 * staging (tp_work) and the tp comm's scratch are allocated at creation by the memory plan
 * (zt_memory_tp_work_floats, zt_memory_plan.scratch_tp), so a step allocates nothing here. */
#include "engine/engine_internal.h"
#include "comm/comm.h"
#include "comm/mesh.h"
#include "obs/trace.h"
#include "shard/tp.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

zt_comm *zt_engine_job_comm(const zt_engine *e) { return e->opt.mesh->world > 1 ? e->opt.mesh->world_comm : NULL; }
int zt_engine_job_rank(const zt_engine *e) { return e->opt.mesh->rank; }
int zt_engine_job_size(const zt_engine *e) { return e->opt.mesh->world; }

static zt_engine *engine_of(const zt_unit_group *g) { return g->ctx; }

/* Each collective is a "tp" span of the trace (obs/trace.h) named by its caller, with its
 * collective and floats: the timeline shows Megatron's f and g (all_reduce; with sequence
 * parallelism all_gather and reduce_scatter) inside the units' forward and backward. */
static void span_end(const char *op, size_t floats) {
    zt_trace_end_args(2, (zt_trace_arg[]){ZT_TARG_STR("op", op), ZT_TARG_NUM("floats", (double)floats)});
}

static int group_sum(const zt_unit_group *g, float *buf, size_t n, const char *what, zt_error *err) {
    zt_engine *e = engine_of(g);
    zt_trace_begin("tp", what);
    int rc = zt_all_reduce(e->tp_comm, ZT_DTYPE_FP32, buf, n, what, err);
    span_end("all_reduce", n);
    return rc;
}

/* ---- sequence parallelism: (B, T, C) <-> every part's (B, count, C), staged part-major in tp_work
 * (part p's block: its rows of every sequence b, b-major), so each collective moves contiguous
 * blocks */

static void group_seq_range(const zt_unit_group *g, int T, int *begin, int *count) {
    int64_t b, c;
    zt_tp_range(T, g->parts, zt_comm_rank(engine_of(g)->tp_comm), &b, &c);
    *begin = (int)b;
    *count = (int)c;
}

/* counts[p] = part p's floats of a (B, T, C) tensor; *total = B·T·C, checked against the staging */
static int seq_counts(zt_engine *e, int B, int T, int C, size_t *counts, const char *what, zt_error *err) {
    int P = e->group.parts;
    for (int p = 0; p < P; p++) {
        int64_t b, c;
        zt_tp_range(T, P, p, &b, &c);
        counts[p] = (size_t)B * (size_t)c * (size_t)C;
    }
    if ((size_t)B * T * C > e->tp_work_floats)
        return zt_error_set(err, ZT_ERR_INTERNAL, "tensor-parallel %s: (%d, %d, %d) exceeds the planned staging (%zu "
                            "floats)", what, B, T, C, e->tp_work_floats);
    return ZT_OK;
}

/* full (B, T, C) elements of `elem` bytes <-> the staging's part-major blocks (to_stage: full ->
 * staging) */
static void seq_stage(zt_engine *e, void *full, int B, int T, int C, size_t elem, bool to_stage) {
    int P = e->group.parts;
    char *blk = (char *)e->tp_work;
    for (int p = 0; p < P; p++) {
        int64_t t0, n;
        zt_tp_range(T, P, p, &t0, &n);
        size_t len = (size_t)n * C * elem;
        for (int b = 0; b < B; b++, blk += len) {
            char *row = (char *)full + ((size_t)b * T + (size_t)t0) * C * elem;
            if (to_stage) memcpy(blk, row, len);
            else memcpy(row, blk, len);
        }
    }
}

static int group_seq_gather(const zt_unit_group *g, const void *mine, void *all, int B, int T, int C,
                            int elem_bytes, const char *what, zt_error *err) {
    zt_engine *e = engine_of(g);
    size_t counts[g->parts];
    int rc = seq_counts(e, B, T, C, counts, what, err);
    if (rc) return rc;
    if (elem_bytes != 2 && elem_bytes != 4)
        return zt_error_set(err, ZT_ERR_INTERNAL, "tensor-parallel %s: elements of %d bytes", what, elem_bytes);
    zt_trace_begin("tp", what);
    if (elem_bytes == 2) /* bf16 operands: 2 bytes an element on the wire */
        rc = zt_all_gather_bf16(e->tp_comm, mine, (uint16_t *)(void *)e->tp_work, counts, what, err);
    else
        rc = zt_all_gather_f32(e->tp_comm, mine, e->tp_work, counts, what, err);
    span_end("all_gather", (size_t)B * T * C * elem_bytes / sizeof(float));
    if (!rc) seq_stage(e, all, B, T, C, (size_t)elem_bytes, false);
    return rc;
}

static int group_seq_reduce_scatter(const zt_unit_group *g, const float *full, float *mine, int B, int T, int C,
                                    const char *what, zt_error *err) {
    zt_engine *e = engine_of(g);
    size_t counts[g->parts];
    int rc = seq_counts(e, B, T, C, counts, what, err);
    if (rc) return rc;
    seq_stage(e, (void *)full, B, T, C, sizeof(float), true); /* reads full only */
    zt_trace_begin("tp", what);
    rc = zt_reduce_scatter(e->tp_comm, ZT_DTYPE_FP32, e->tp_work, mine, counts, what, err);
    span_end("reduce_scatter", (size_t)B * T * C);
    return rc;
}

/* work (parts x n elements of `bytes`) <- every part's buf, in part order */
static int gather_equal(zt_engine *e, const void *buf, size_t n, size_t bytes, const char *what, zt_error *err) {
    int P = zt_comm_size(e->tp_comm);
    if ((size_t)P * n * bytes > e->tp_work_floats * sizeof(float))
        return zt_error_set(err, ZT_ERR_INTERNAL, "tensor-parallel %s: %zu elements x %d parts exceed the planned "
                            "staging (%zu floats)", what, n, P, e->tp_work_floats);
    zt_trace_begin("tp", what);
    int rc;
    if (bytes == sizeof(double)) {
        rc = zt_all_gather_f64(e->tp_comm, buf, (double *)(void *)e->tp_work, n, what, err);
    } else {
        size_t counts[P];
        for (int p = 0; p < P; p++) counts[p] = n;
        rc = zt_all_gather_f32(e->tp_comm, buf, e->tp_work, counts, what, err);
    }
    span_end("all_gather", n * bytes / sizeof(float));
    return rc;
}

static int group_sum_f64(const zt_unit_group *g, double *buf, size_t n, const char *what, zt_error *err) {
    zt_engine *e = engine_of(g);
    int rc = gather_equal(e, buf, n, sizeof(double), what, err);
    if (rc) return rc;
    const double *all = (const double *)(const void *)e->tp_work;
    for (size_t i = 0; i < n; i++) {
        double s = all[i];
        for (int p = 1; p < g->parts; p++) s += all[(size_t)p * n + i];
        buf[i] = s;
    }
    return ZT_OK;
}

static int group_max(const zt_unit_group *g, float *buf, size_t n, const char *what, zt_error *err) {
    zt_engine *e = engine_of(g);
    int rc = gather_equal(e, buf, n, sizeof(float), what, err);
    if (rc) return rc;
    for (size_t i = 0; i < n; i++) {
        float m = e->tp_work[i];
        for (int p = 1; p < g->parts; p++) m = e->tp_work[(size_t)p * n + i] > m ? e->tp_work[(size_t)p * n + i] : m;
        buf[i] = m;
    }
    return ZT_OK;
}

static int group_concat_cols(const zt_unit_group *g, const float *mine, int rows, size_t stride, int64_t total,
                             float *all, const char *what, zt_error *err) {
    zt_engine *e = engine_of(g);
    int P = g->parts, me = zt_comm_rank(e->tp_comm);
    size_t counts[P], off = 0;
    int64_t b, c;
    for (int p = 0; p < P; p++) {
        zt_tp_range(total, P, p, &b, &c);
        counts[p] = (size_t)rows * (size_t)c;
    }
    if ((size_t)rows * (size_t)total > e->tp_work_floats)
        return zt_error_set(err, ZT_ERR_INTERNAL, "tensor-parallel %s: %d x %lld floats exceed the planned staging",
                            what, rows, (long long)total);
    for (int p = 0; p < me; p++) off += counts[p];
    zt_tp_range(total, P, me, &b, &c);
    for (int r = 0; r < rows; r++) /* this part's rows, packed, into its block */
        memcpy(e->tp_work + off + (size_t)r * c, mine + (size_t)r * stride, (size_t)c * sizeof(float));
    int rc = zt_all_gather_f32(e->tp_comm, e->tp_work + off, e->tp_work, counts, what, err);
    if (rc) return rc;
    off = 0;
    for (int p = 0; p < P; p++) {
        zt_tp_range(total, P, p, &b, &c);
        for (int r = 0; r < rows; r++)
            memcpy(all + (size_t)r * total + b, e->tp_work + off + (size_t)r * c, (size_t)c * sizeof(float));
        off += counts[p];
    }
    return ZT_OK;
}

int zt_engine_tp_setup(zt_engine *e, zt_error *err) {
    const zt_mesh *M = e->opt.mesh;
    const zt_model *m = e->model;
    int parts = m->units[0].tp_parts;
    if (M->tp != parts)
        return zt_error_set(err, ZT_ERR_USAGE, "engine: the mesh has %d tensor-parallel ranks but model %s is cut into "
                            "%d part%s (zt_tp_apply with the mesh's tp size and rank)", M->tp, m->name, parts,
                            parts == 1 ? "" : "s");
    if (parts == 1) return ZT_OK;
    e->tp_comm = M->tp_comm;
    if (m->units[0].seq_parts > 1 && e->opt.T % parts != 0)
        return zt_error_set(err, ZT_ERR_USAGE, "engine: sequence parallelism over %d tensor-parallel ranks needs a "
                            "sequence length that they divide: T=%d (training.seq_len)", parts, e->opt.T);
    e->group = (zt_unit_group){.parts = parts, .sum = group_sum, .sum_f64 = group_sum_f64, .max = group_max,
                               .concat_cols = group_concat_cols, .seq_range = group_seq_range,
                               .seq_gather = group_seq_gather, .seq_reduce_scatter = group_seq_reduce_scatter,
                               .ctx = e};
    e->tp_work_floats = zt_memory_tp_work_floats(m, e->opt.B, e->opt.T);
    if (!(e->tp_work = zt_engine_alloc(e, e->tp_work_floats, &e->mem.comm, "the tensor-parallel staging")))
        return zt_engine_oom(e, err, "engine");
    return zt_engine_reserve_scratch(e, e->tp_comm, e->mem_plan.scratch_tp, 3, err);
}

const zt_unit_group *zt_engine_group(const zt_engine *e) {
    return e->tp_comm || e->cp_comm || e->ep_comm ? &e->group : NULL;
}

int zt_engine_tp_norm(zt_engine *e, const double *partials, double *sumsq, zt_error *err) {
    const zt_model *m = e->model;
    double whole = 0, cut[2] = {0, 0}; /* cut[0]: this part's split parameters */
    int64_t chunk = 0;
    for (int i = 0; i < m->n_params; i++) {
        int64_t n = zt_plan_desc_chunks(&m->params[i]) * zt_param_expert_parts(&m->params[i]);
        double *to = m->params[i].tp_parts > 1 ? &cut[0] : &whole;
        for (int64_t k = 0; k < n; k++) *to += partials[chunk + k];
        chunk += n;
    }
    int rc = zt_all_gather_f64(e->tp_comm, cut, (double *)(void *)e->tp_work, 1, "gradient norm over the parts", err);
    if (rc) return rc;
    const double *all = (const double *)(const void *)e->tp_work;
    double s = 0;
    for (int p = 0; p < e->group.parts; p++) s += all[p];
    *sumsq = s + whole;
    return ZT_OK;
}

size_t zt_engine_tp_part_offset(const zt_engine *e, int i) {
    const zt_param_desc *p = &e->model->params[i];
    size_t off = 0;
    for (int q = 0; q < p->tp_part && p->tp_parts > 1; q++) off += (size_t)zt_tp_part_numel(p, q);
    return off;
}

/* The experts stored E/ep a rank (zt_param_desc.ep_parts): logical holds this rank's ep part's rows
 * (its tp parts placed); the ep parts' rows from every ep rank, in place */
static int gather_ep_rows(zt_engine *e, const zt_param_desc *p, float *logical, const char *what, zt_error *err) {
    int P = p->ep_parts;
    size_t counts[P], n = (size_t)(p->logical_numel / P);
    for (int q = 0; q < P; q++) counts[q] = n;
    zt_trace_begin("tp", what);
    int rc = zt_all_gather_f32(e->ep_comm, logical + (size_t)p->ep_part * n, logical, counts, what, err);
    span_end("all_gather", (size_t)p->logical_numel);
    return rc;
}

int zt_engine_tp_gather_logical(zt_engine *e, int i, float *stage, float *logical, const char *what, zt_error *err) {
    const zt_param_desc *p = &e->model->params[i];
    int P = p->tp_parts, rc = 0;
    size_t counts[P > 0 ? P : 1], off = zt_engine_tp_part_offset(e, i);
    for (int q = 0; q < P; q++) counts[q] = (size_t)zt_tp_part_numel(p, q);
    if (P > 1) { /* the tp parts (of this rank's ep part: zt_tp_ep_view) */
        zt_trace_begin("tp", what);
        rc = zt_all_gather_f32(e->tp_comm, stage + off, stage, counts, what, err);
        span_end("all_gather", (size_t)p->logical_numel);
    }
    off = 0;
    for (int q = 0; q < P && !rc; q++) {
        zt_tp_place(p, q, stage + off, logical);
        off += counts[q];
    }
    return rc || p->ep_parts <= 1 ? rc : gather_ep_rows(e, p, logical, what, err);
}

int zt_engine_tp_to_logical(zt_engine *e, int i, const float *local, float *logical, zt_error *err) {
    const zt_param_desc *p = &e->model->params[i];
    if (!zt_param_cut(p)) {
        if (logical != local) memcpy(logical, local, (size_t)p->numel * sizeof(float));
        return ZT_OK;
    }
    /* the logical tensor's size: a load or save, not a step */
    float *all = malloc((size_t)p->logical_numel * sizeof *all);
    if (!all)
        return zt_error_set(err, ZT_ERR_NOMEM, "gathering %s over the tensor-parallel parts: out of memory", p->name);
    memcpy(all + zt_engine_tp_part_offset(e, i), local, (size_t)p->numel * sizeof(float));
    int rc = zt_engine_tp_gather_logical(e, i, all, logical, p->name, err);
    free(all);
    return rc;
}
