/* model.c - the module/unit API: a model is a table of named parameters and a sequence of units.
 * Invariants: parameter names are unique; every unit lists only declared parameters; a parameter
 * may be listed by several units (tying) and belongs to the first. No tensor memory lives here. */
#include "zerotrain/zerotrain.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int zt_model_create(const char *name, zt_model **out, zt_error *err) {
    *out = NULL;
    zt_model *m = calloc(1, sizeof *m);
    if (!m) return zt_error_set(err, ZT_ERR_NOMEM, "model %s: out of memory", name);
    snprintf(m->name, sizeof m->name, "%s", name);
    *out = m;
    return ZT_OK;
}

void zt_model_free(zt_model *m) {
    if (!m) return;
    free(m->params);
    free(m->units);
    free(m->cfg);
    free(m->lora);
    free(m);
}

static int grow(void **p, int *cap, int need, size_t elem) {
    if (need <= *cap) return 0;
    int ncap = *cap ? *cap * 2 : 16;
    while (ncap < need) ncap *= 2;
    void *np = realloc(*p, (size_t)ncap * elem);
    if (!np) return -1;
    *p = np;
    *cap = ncap;
    return 0;
}

int zt_model_find_param(const zt_model *m, const char *name) {
    for (int i = 0; i < m->n_params; i++)
        if (strcmp(m->params[i].name, name) == 0) return i;
    return -1;
}

int zt_model_add_param(zt_model *m, const char *name, int ndim, const int64_t *shape,
                       zt_init_kind init, float init_std, bool decay, int *idx, zt_error *err) {
    if (strlen(name) >= ZT_NAME_MAX)
        return zt_error_set(err, ZT_ERR_USAGE, "model %s: parameter name too long: %s", m->name, name);
    if (ndim < 1 || ndim > ZT_MAX_DIMS)
        return zt_error_set(err, ZT_ERR_USAGE, "model %s: parameter %s has %d dims (1..%d allowed)",
                            m->name, name, ndim, ZT_MAX_DIMS);
    if (zt_model_find_param(m, name) >= 0)
        return zt_error_set(err, ZT_ERR_USAGE, "model %s: parameter %s declared twice", m->name, name);
    int64_t numel = 1;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] <= 0)
            return zt_error_set(err, ZT_ERR_USAGE, "model %s: parameter %s: dim %d is %lld", m->name,
                                name, d, (long long)shape[d]);
        numel *= shape[d];
    }
    if (grow((void **)&m->params, &m->cap_params, m->n_params + 1, sizeof *m->params))
        return zt_error_set(err, ZT_ERR_NOMEM, "model %s: out of memory", m->name);
    zt_param_desc *p = &m->params[m->n_params];
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", name);
    p->ndim = ndim;
    memcpy(p->shape, shape, (size_t)ndim * sizeof *shape);
    p->numel = numel;
    memcpy(p->logical_shape, shape, (size_t)ndim * sizeof *shape);
    p->logical_numel = numel;
    p->tp_parts = 1;
    p->tp_blocks = 1;
    p->init = init;
    p->init_std = init_std;
    p->decay = decay;
    p->trainable = true;
    p->lora_base = -1;
    if (idx) *idx = m->n_params;
    m->n_params++;
    return ZT_OK;
}

int zt_loss_chunk_for(int tokens, int B, int T) {
    return B > 0 && T > 0 && (int64_t)tokens >= (int64_t)B * T ? 0 : tokens;
}

int zt_model_set_loss_chunk(zt_model *m, int tokens, zt_error *err) {
    if (tokens < 0)
        return zt_error_set(err, ZT_ERR_USAGE, "model %s: loss chunk of %d tokens (0: none)", m->name, tokens);
    if (m->n_units < 1)
        return zt_error_set(err, ZT_ERR_USAGE, "model %s: no units, so no loss unit to chunk", m->name);
    m->loss_chunk_tokens = tokens;
    m->units[m->n_units - 1].loss_chunk = tokens; /* the last unit makes the losses */
    return ZT_OK;
}

static const char *const CP_MODES[] = {"allgather", "ring", "ulysses"};

const char *zt_cp_mode_name(zt_cp_mode mode) {
    return mode >= 0 && mode < 3 ? CP_MODES[mode] : "?";
}

int zt_cp_mode_parse(const char *name, zt_cp_mode *out, zt_error *err) {
    for (int i = 0; i < 3; i++)
        if (name && !strcmp(name, CP_MODES[i])) {
            *out = (zt_cp_mode)i;
            return ZT_OK;
        }
    return zt_error_set(err, ZT_ERR_USAGE, "context-parallel mode \"%s\": expected allgather, ring or ulysses",
                        name ? name : "");
}

void zt_cp_chunks(int T, int parts, int part, int begin[2], int *count) {
    int c = T / (2 * parts);
    *count = c;
    begin[0] = part * c;
    begin[1] = (2 * parts - 1 - part) * c;
}

void zt_cp_cut_batch(const zt_batch *whole, int parts, int part, int32_t *inputs, int32_t *targets,
                     int32_t *positions, zt_batch *out) {
    int T = whole->T, beg[2], c;
    zt_cp_chunks(T, parts, part, beg, &c);
    for (int b = 0; b < whole->B; b++)
        for (int j = 0; j < 2; j++) {
            size_t from = (size_t)b * T + (size_t)beg[j], to = (size_t)b * 2 * c + (size_t)j * c;
            memcpy(inputs + to, whole->inputs + from, (size_t)c * sizeof *inputs);
            memcpy(targets + to, whole->targets + from, (size_t)c * sizeof *targets);
            for (int t = 0; t < c; t++) positions[to + t] = whole->positions ? whole->positions[from + t] : beg[j] + t;
        }
    zt_batch cut = *whole;
    cut.cp_counted = 0;
    for (size_t i = 0; whole->targets && i < (size_t)whole->B * T; i++) cut.cp_counted += whole->targets[i] >= 0;
    cut.T = 2 * c, cut.inputs = inputs, cut.targets = targets, cut.positions = positions;
    cut.cp_positions = whole->positions; /* packed documents' masks; NULL: plain causal */
    *out = cut;
}

int zt_model_set_context_parallel(zt_model *m, int parts, zt_cp_mode mode, zt_error *err) {
    if (parts < 1 || parts > ZT_CP_MAX_PARTS || mode < ZT_CP_ALLGATHER || mode > ZT_CP_ULYSSES)
        return zt_error_set(err, ZT_ERR_USAGE, "model %s: context parallelism over %d parts, mode %d", m->name, parts,
                            (int)mode);
    zt_model_spec spec;
    if (mode == ZT_CP_ULYSSES && parts > 1 && zt_model_spec_of(m, &spec, NULL) == ZT_OK) {
        int tp = m->n_units > 0 && m->units[0].tp_parts > 1 ? m->units[0].tp_parts : 1;
        int L, NH, C, V, maxT;
        zt_model_spec_shape(&spec, &L, &NH, &C, &V, &maxT);
        int heads = NH / tp, kv = spec.arch == ZT_ARCH_LLAMA ? spec.llama.n_kv_head / tp : heads;
        if (heads % parts || kv % parts)
            return zt_error_set(err, ZT_ERR_USAGE, "model %s: ulysses over %d parts needs the heads (%d) and key/value "
                                "heads (%d) of each tensor-parallel part divisible by it (allgather or ring do not)",
                                m->name, parts, heads, kv);
    }
    for (int u = 0; u < m->n_units; u++) {
        m->units[u].cp_parts = parts;
        m->units[u].cp_mode = mode;
    }
    return ZT_OK;
}

int zt_model_cp_parts(const zt_model *m, zt_cp_mode *mode) {
    bool cut = m->n_units > 0 && m->units[0].cp_parts > 1; /* every unit alike (above) */
    if (mode) *mode = cut ? (zt_cp_mode)m->units[0].cp_mode : ZT_CP_ALLGATHER;
    return cut ? m->units[0].cp_parts : 1;
}

int zt_model_set_expert_parallel(zt_model *m, int parts, zt_error *err) {
    if (parts < 1)
        return zt_error_set(err, ZT_ERR_USAGE, "model %s: expert parallelism over %d parts", m->name, parts);
    if (parts > 1 && m->moe_experts < 1)
        return zt_error_set(err, ZT_ERR_USAGE, "parallel.expert_parallel_size %d: model %s has no experts (a dense "
                            "model; model.n_experts 0)", parts, m->name);
    if (parts > 1 && m->moe_experts % parts != 0)
        return zt_error_set(err, ZT_ERR_USAGE, "model.n_experts %d is not divisible by parallel.expert_parallel_size "
                            "%d", m->moe_experts, parts);
    for (int u = 0; u < m->n_units; u++) m->units[u].ep_parts = parts;
    return ZT_OK;
}

int zt_model_ep_parts(const zt_model *m) {
    return m->n_units > 0 && m->units[0].ep_parts > 1 ? m->units[0].ep_parts : 1;
}

int zt_model_store_experts(zt_model *m, int parts, int part, zt_error *err) {
    if (parts != zt_model_ep_parts(m) || parts < 2 || part < 0 || part >= parts)
        return zt_error_set(err, ZT_ERR_USAGE, "model %s: experts stored as part %d of %d, but its experts are "
                            "spread over %d part%s (zt_model_set_expert_parallel first)", m->name, part, parts,
                            zt_model_ep_parts(m), zt_model_ep_parts(m) == 1 ? "" : "s");
    if (zt_model_experts_local(m))
        return zt_error_set(err, ZT_ERR_USAGE, "model %s: experts stored already (E/ep a rank)", m->name);
    for (int i = 0; i < m->n_params; i++) {
        zt_param_desc *p = &m->params[i];
        if (p->norm_blocks != m->moe_experts || p->norm_blocks < 2) continue; /* not a stacked experts' tensor */
        p->ep_parts = parts; /* under tensor parallelism outside its cut (the experts' width) */
        p->ep_part = part;
        p->shard_group = ZT_SHARD_GROUP_EDP;
        p->shape[0] /= parts; /* whole experts: parts divides E (set_expert_parallel) */
        p->numel /= parts;
        p->norm_blocks = m->moe_experts / parts;
    }
    for (int u = 0; u < m->n_units; u++) m->units[u].ep_local = true;
    return ZT_OK;
}

bool zt_model_experts_local(const zt_model *m) { return m->n_units > 0 && m->units[0].ep_local; }

void zt_model_whole_experts(zt_model *m) {
    if (!zt_model_experts_local(m)) return;
    for (int i = 0; i < m->n_params; i++) {
        zt_param_desc *p = &m->params[i];
        if (!zt_param_experts_stored(p)) continue;
        int parts = zt_param_expert_parts(p);
        p->norm_blocks *= parts;
        p->shape[0] *= parts;
        p->numel *= parts;
        p->ep_parts = 0, p->ep_part = 0; /* tensor parallelism's cut stays */
        p->shard_group = ZT_SHARD_GROUP_DP;
    }
    for (int u = 0; u < m->n_units; u++) m->units[u].ep_local = false;
}

int zt_model_add_unit(zt_model *m, const char *name, const zt_unit_ops *ops, int layer,
                      const int *params, int n_params, int out_width, zt_error *err) {
    if (n_params < 0 || n_params > ZT_UNIT_MAX_PARAMS)
        return zt_error_set(err, ZT_ERR_USAGE, "model %s: unit %s lists %d parameters (max %d)",
                            m->name, name, n_params, ZT_UNIT_MAX_PARAMS);
    for (int i = 0; i < n_params; i++)
        if (params[i] < 0 || params[i] >= m->n_params)
            return zt_error_set(err, ZT_ERR_USAGE, "model %s: unit %s lists undeclared parameter %d",
                                m->name, name, params[i]);
    if (!ops || !ops->forward || !ops->backward || !ops->saved_floats || !ops->scratch_floats)
        return zt_error_set(err, ZT_ERR_USAGE, "model %s: unit %s has incomplete ops", m->name, name);
    if (!ops->kept_floats != !ops->recompute)
        return zt_error_set(err, ZT_ERR_USAGE, "model %s: unit %s declares %s without %s (selective "
                            "activation checkpointing needs both or neither)", m->name, name,
                            ops->kept_floats ? "kept_floats" : "recompute",
                            ops->kept_floats ? "recompute" : "kept_floats");
    if (out_width < 1)
        return zt_error_set(err, ZT_ERR_USAGE, "model %s: unit %s: out_width %d", m->name, name,
                            out_width);
    if (grow((void **)&m->units, &m->cap_units, m->n_units + 1, sizeof *m->units))
        return zt_error_set(err, ZT_ERR_NOMEM, "model %s: out of memory", m->name);
    zt_unit *u = &m->units[m->n_units++];
    memset(u, 0, sizeof *u);
    snprintf(u->name, sizeof u->name, "%s", name);
    u->ops = ops;
    u->model_cfg = m->cfg;
    u->layer = layer;
    u->n_params = n_params;
    memcpy(u->params, params, (size_t)n_params * sizeof *params);
    u->out_width = out_width;
    u->tp_parts = 1;
    u->seq_parts = 1;
    u->cp_parts = 1;
    u->ep_parts = 1;
    return ZT_OK;
}

int64_t zt_model_numel(const zt_model *m) {
    int64_t n = 0;
    for (int i = 0; i < m->n_params; i++) n += m->params[i].logical_numel;
    return n;
}
