/* tp.c - tensor parallelism applied to a model (tp.h): the cut of each parameter from its
 * family's plan, the units' part counts, and the element map between a part and the logical
 * tensor.
 *
 * Invariants: a part's elements are the logical tensor's elements in the same row-major order,
 * restricted to the part's ranges (zt_tp_runs enumerates them), so every per-element rule that
 * holds for the logical tensor (the counter-based init, checkpoints' logical rows) holds for the
 * parts; a model is split once (a second zt_tp_apply is refused); an expert tensor also stored E/ep
 * a rank is its ep part's range of experts cut as that range's own tensor (zt_tp_ep_view). */
#include "shard/tp.h"

#include <stdio.h>
#include <string.h>

void zt_tp_range(int64_t extent, int parts, int part, int64_t *begin, int64_t *count) {
    int64_t q = extent / parts, r = extent % parts;
    *count = q + (part < r);
    *begin = (int64_t)part * q + (part < r ? part : r);
}

zt_param_desc zt_tp_ep_view(const zt_param_desc *p, int q, int64_t *row0) {
    zt_param_desc v = *p;
    *row0 = 0;
    if (p->ep_parts <= 1) return v;
    v.logical_shape[0] = p->logical_shape[0] / p->ep_parts;
    v.logical_numel = p->logical_numel / p->ep_parts;
    if (p->tp_parts > 1 && p->tp_dim == 0) /* w1, w3 cut by tp: an expert a block */
        v.tp_blocks = p->tp_blocks / p->ep_parts;
    v.ep_parts = 0, v.ep_part = 0;
    *row0 = (int64_t)q * v.logical_shape[0];
    return v;
}

/* The extent of dimension dim of part `part` (the split dimension cut, the others whole). */
static int64_t part_extent(const zt_param_desc *p, int part, int dim) {
    int64_t row0;
    if (p->ep_parts > 1) {
        zt_param_desc v = zt_tp_ep_view(p, p->ep_part, &row0);
        return part_extent(&v, part, dim);
    }
    int64_t E = p->logical_shape[dim];
    if (p->tp_parts == 1 || dim != p->tp_dim) return E;
    int64_t b, c;
    zt_tp_range(E / p->tp_blocks, p->tp_parts, part, &b, &c);
    return c * p->tp_blocks;
}

int64_t zt_tp_part_numel(const zt_param_desc *p, int part) {
    int64_t n = 1;
    for (int d = 0; d < p->ndim; d++) n *= part_extent(p, part, d);
    return n;
}

/* fn over the intersection of [lo, lo + len) (a run: local lo.. = logical at..) with [begin, end). */
static int clip_run(int64_t lo, int64_t at, int64_t len, int64_t begin, int64_t end, zt_tp_run_fn fn, void *ctx) {
    int64_t a = lo > begin ? lo : begin, b = lo + len < end ? lo + len : end;
    return a < b ? fn(ctx, a, at + (a - lo), b - a) : 0;
}

/* a run of an ep part's view, moved to the ep part's rows of the logical tensor */
typedef struct shift_ctx {
    zt_tp_run_fn fn;
    void *ctx;
    int64_t shift;
} shift_ctx;
static int shifted_run(void *ctx, int64_t local, int64_t logical, int64_t len) {
    shift_ctx *c = ctx;
    return c->fn(c->ctx, local, logical + c->shift, len);
}

int zt_tp_runs(const zt_param_desc *p, int part, int64_t begin, int64_t n, zt_tp_run_fn fn, void *ctx) {
    int64_t end = begin + n;
    if (n <= 0) return 0;
    if (p->ep_parts > 1) {
        int64_t row0;
        zt_param_desc v = zt_tp_ep_view(p, p->ep_part, &row0);
        shift_ctx c = {fn, ctx, row0 * (p->logical_numel / p->logical_shape[0])};
        return zt_tp_runs(&v, part, begin, n, shifted_run, &c);
    }
    if (p->tp_parts == 1) return fn(ctx, begin, begin, n);
    int64_t rows = p->logical_shape[0], row_len = p->logical_numel / rows;
    int rc = 0;
    if (p->tp_dim == 0) { /* each block: the part's rows, contiguous in both */
        int64_t Eb = rows / p->tp_blocks, rb, cnt;
        zt_tp_range(Eb, p->tp_parts, part, &rb, &cnt);
        for (int b = 0; b < p->tp_blocks && !rc; b++) {
            int64_t lo = (int64_t)b * cnt * row_len;
            if (lo >= end) break;
            rc = clip_run(lo, ((int64_t)b * Eb + rb) * row_len, cnt * row_len, begin, end, fn, ctx);
        }
        return rc;
    }
    /* dim 1 of a matrix: each row's column range */
    int64_t cb, cc;
    zt_tp_range(row_len, p->tp_parts, part, &cb, &cc);
    for (int64_t r = begin / cc; r < rows && r * cc < end && !rc; r++)
        rc = clip_run(r * cc, r * row_len + cb, cc, begin, end, fn, ctx);
    return rc;
}

typedef struct copy_ctx {
    const float *src;
    float *dst;
    bool to_logical;
} copy_ctx;

static int copy_run(void *ctx, int64_t local, int64_t logical, int64_t len) {
    copy_ctx *c = ctx;
    if (c->to_logical)
        memcpy(c->dst + logical, c->src + local, (size_t)len * sizeof(float));
    else
        memcpy(c->dst + local, c->src + logical, (size_t)len * sizeof(float));
    return 0;
}

void zt_tp_place(const zt_param_desc *p, int part, const float *local, float *logical) {
    copy_ctx c = {.src = local, .dst = logical, .to_logical = true};
    zt_tp_runs(p, part, 0, zt_tp_part_numel(p, part), copy_run, &c);
}

void zt_tp_take(const zt_param_desc *p, int part, const float *logical, float *local) {
    copy_ctx c = {.src = logical, .dst = local, .to_logical = false};
    zt_tp_runs(p, part, 0, zt_tp_part_numel(p, part), copy_run, &c);
}

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* Sets parameter p's cut for style/blocks on part `part` of `parts`, or says why it cannot be. */
static int cut(const zt_model *m, zt_param_desc *p, const zt_tp_rule *r, int parts, int part, zt_error *err) {
    int dim = r->style == ZT_TP_ROW ? 1 : 0;
    int blocks = r->style != ZT_TP_COLUMN ? 1 : r->blocks > 0 ? r->blocks : p->norm_blocks > 1 ? p->norm_blocks : 1;
    if (dim >= p->ndim)
        return zt_error_set(err, ZT_ERR_USAGE, "tensor parallelism: %s (%d-D) has no dimension %d to cut (%s)", p->name,
                            p->ndim, dim, m->name);
    int64_t E = p->logical_shape[dim];
    if (blocks < 1 || E % blocks != 0 || E / blocks < parts ||
        (r->style != ZT_TP_VOCAB && (E / blocks) % parts != 0))
        return zt_error_set(err, ZT_ERR_USAGE, "tensor parallelism: %s: dimension %d of %lld%s does not split into "
                            "%d equal parts", p->name, dim, (long long)E,
                            blocks > 1 ? " in equal blocks" : "", parts);
    p->tp_parts = parts;
    p->tp_part = part;
    p->tp_dim = dim;
    p->tp_blocks = blocks;
    p->shape[dim] = part_extent(p, part, dim);
    p->numel = zt_tp_part_numel(p, part);
    return ZT_OK;
}

int zt_tp_apply(zt_model *m, int parts, int part, zt_error *err) {
    if (parts < 1 || part < 0 || part >= parts)
        return zt_error_set(err, ZT_ERR_USAGE, "tensor parallelism: part %d of %d", part, parts);
    if (parts == 1) return ZT_OK;
    for (int i = 0; i < m->n_params; i++)
        if (zt_param_cut(&m->params[i]))
            return zt_error_set(err, ZT_ERR_USAGE, "tensor parallelism: model %s is split already (%s)", m->name,
                                m->params[i].name);
    if (m->lora)
        return zt_error_set(err, ZT_ERR_USAGE, "tensor parallelism over %d ranks: model %s has LoRA adapters, which "
                            "are not cut for tensor parallelism yet (use data parallelism: lora with "
                            "parallel.tensor_parallel_size 1)", parts, m->name);
    int n_rules = 0;
    const zt_tp_rule *rules = zt_tp_plan_of(m->name, &n_rules);
    if (!rules || !m->tp_check)
        return zt_error_set(err, ZT_ERR_USAGE, "tensor parallelism: model %s has no plan (GPT-2 and Llama have)",
                            m->name);
    int rc = m->tp_check(m, parts, err);
    if (rc) return rc;
    for (int i = 0; i < m->n_params; i++) {
        zt_param_desc *p = &m->params[i];
        for (int k = 0; k < n_rules; k++)
            if (rules[k].style != ZT_TP_WHOLE && ends_with(p->name, rules[k].suffix)) {
                if ((rc = cut(m, p, &rules[k], parts, part, err))) return rc;
                break;
            }
    }
    int64_t vb, vc;
    zt_tp_range(m->vocab_size, parts, part, &vb, &vc);
    /* sequence parallelism: every unit's output but the loss unit's (B, T) losses holds 1/parts
     * of the positions, i.e. out_width / parts floats per token of the whole sequence */
    for (int u = 0; m->sequence_parallel && u + 1 < m->n_units; u++)
        if (m->units[u].out_width % parts != 0)
            return zt_error_set(err, ZT_ERR_USAGE, "sequence parallelism: unit %s's output width %d does not split "
                                "into %d parts", m->units[u].name, m->units[u].out_width, parts);
    for (int u = 0; u < m->n_units; u++) {
        zt_unit *un = &m->units[u];
        un->tp_parts = parts;
        un->vocab_begin = vb;
        un->vocab_rows = vc;
        if (!m->sequence_parallel) continue;
        un->seq_parts = parts;
        if (u + 1 < m->n_units) un->out_width /= parts;
    }
    return ZT_OK;
}
