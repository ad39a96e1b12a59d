/* param_quant.c - the parameter store's quantized placement: QLoRA's frozen base (param_store.h).
 *
 * A frozen Linear weight marked zt_param_desc.quant (zt_model_add_lora with base_quant: every
 * adaptable Linear of the blocks) has no fp32 or bf16 master at all: the shard plan gives it no
 * room in its layouts, and the store keeps its quantized form instead, NF4 or int8 as the
 * kernels lay them out (src/kernels/quant_nf4.c, quant_int8.c), every such parameter's bytes in
 * one allocation (class params), replicated on every rank under every strategy (a frozen parameter
 * is never reduced or updated, and zero3 does not gather these: memory/residency.c skips them; the
 * bytes are not sharded yet). The values are quantized once, from whole tensors: the
 * counter-based init, a weights file, a Hugging Face directory (zt_store_set), so every rank and
 * every strategy holds the same bytes.
 *
 * A unit gets each of its quantized parameters dequantized into the compute dtype just before it
 * runs (zt_store_acquire: bf16 bits through params_lp under bf16 compute, fp32 holding fp16 values
 * under fp16, fp32 through params under fp32) and drops it after its forward and after its
 * backward (zt_store_after_forward / _after_backward), class gathered: the memory plan counts the
 * 4-bit bytes and one unit's dequantized matrices (memory/plan.c dequant).
 *
 * Element access (checkpoints' readers, the parameter hash, exports) dequantizes to fp32; a write
 * must give the whole tensor, which is quantized again. Checkpoints do not save these tensors: the
 * manifest records how each was quantized and the xxh64 of its bytes (zt_store_quant_hash), which
 * a resume checks against the base it quantized itself. */
#include "engine/param_store_internal.h"
#include "engine/init.h"
#include "kernels/kernels.h"
#include "memory/plan.h"
#include "obs/trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

bool zt_store_quantized(const zt_engine *e, int i) { return e->model->params[i].quant != ZT_QUANT_NONE; }

int zt_quant_alloc(zt_engine *e, zt_error *err) {
    const zt_model *m = e->model;
    zt_param_store *ps = e->ps;
    size_t floats = zt_memory_quant_floats(m), at = 0;
    if (!floats) return ZT_OK;
    if (e->param_dir) /* (config_checks.c refuses it by its keys first) */
        return zt_error_set(err, ZT_ERR_USAGE, "lora.base_quant %s: the quantized base stays in memory; parameter "
                            "offload (memory.offload_param nvme) is not supported with it",
                            zt_quant_name((zt_quant)m->lora->base_quant));
    if (!(ps->quant_off = malloc((size_t)m->n_params * sizeof *ps->quant_off)) ||
        !(ps->deq = calloc((size_t)m->n_params, sizeof *ps->deq)))
        return zt_error_set(err, ZT_ERR_NOMEM, "engine: out of memory");
    for (int i = 0; i < m->n_params; i++) {
        size_t b = zt_memory_quant_bytes(&m->params[i]);
        ps->quant_off[i] = b ? at : SIZE_MAX;
        at += b;
    }
    if (!(ps->quant = (uint8_t *)zt_engine_alloc(e, floats, &e->mem.params, "the quantized base")))
        return zt_engine_oom(e, err, "engine: the %s base of model %s (%zu bytes)",
                             zt_quant_name((zt_quant)m->lora->base_quant), m->name, at);
    memset(ps->quant, 0, at);
    return ZT_OK;
}

void zt_quant_free(zt_engine *e) {
    zt_param_store *ps = e->ps;
    if (ps->deq)
        for (int i = 0; i < e->model->n_params; i++) free(ps->deq[i]);
    free(ps->deq);
    free(ps->quant);
    free(ps->quant_off);
    ps->deq = NULL;
    ps->quant = NULL;
    ps->quant_off = NULL;
}

static int64_t cols_of(const zt_param_desc *p) { return p->numel / p->shape[0]; }

/* parameter i's whole tensor w (numel fp32) quantized into its bytes */
static void quantize(zt_engine *e, int i, const float *w) {
    const zt_param_desc *p = &e->model->params[i];
    uint8_t *q = e->ps->quant + e->ps->quant_off[i];
    if (p->quant == ZT_QUANT_NF4) zt_nf4_quantize(q, w, p->numel);
    else zt_int8_quantize(q, w, p->shape[0], cols_of(p));
}

static void dequantize_f32(const zt_engine *e, int i, float *out) {
    const zt_param_desc *p = &e->model->params[i];
    const uint8_t *q = e->ps->quant + e->ps->quant_off[i];
    if (p->quant == ZT_QUANT_NF4) zt_nf4_dequantize(out, q, p->numel);
    else zt_int8_dequantize(out, q, p->shape[0], cols_of(p));
}

int zt_quant_write(zt_engine *e, int i, size_t begin, size_t n, const float *src, zt_error *err) {
    const zt_param_desc *p = &e->model->params[i];
    if (begin != 0 || n != (size_t)p->numel)
        return zt_error_set(err, ZT_ERR_INTERNAL, "%s: the %s base is quantized from whole tensors, not elements "
                            "[%zu, %zu) of %lld", p->name, zt_quant_name((zt_quant)p->quant), begin, begin + n,
                            (long long)p->numel);
    quantize(e, i, src);
    return ZT_OK;
}

int zt_quant_read(zt_engine *e, int i, size_t begin, size_t n, float *dst, zt_error *err) {
    const zt_param_desc *p = &e->model->params[i];
    if (begin == 0 && n == (size_t)p->numel) {
        dequantize_f32(e, i, dst);
        return ZT_OK;
    }
    float *all = malloc((size_t)p->numel * sizeof *all); /* a part: the whole tensor, then the range */
    if (!all) return zt_error_set(err, ZT_ERR_NOMEM, "reading %s: out of memory", p->name);
    dequantize_f32(e, i, all);
    memcpy(dst, all + begin, n * sizeof *dst);
    free(all);
    return ZT_OK;
}

int zt_quant_init(zt_engine *e, int i, uint64_t key, zt_error *err) {
    const zt_param_desc *p = &e->model->params[i];
    float *w = malloc((size_t)p->numel * sizeof *w); /* the whole tensor once, at start */
    if (!w) return zt_error_set(err, ZT_ERR_NOMEM, "initializing %s: out of memory", p->name);
    zt_init_fill(w, p, 0, p->numel, key);
    quantize(e, i, w);
    free(w);
    return ZT_OK;
}

uint64_t zt_store_quant_hash(const zt_engine *e, int i) {
    const zt_param_desc *p = &e->model->params[i];
    if (!p->quant || !e->ps->quant) return 0;
    size_t bytes = p->quant == ZT_QUANT_NF4 ? zt_nf4_bytes(p->numel) : zt_int8_bytes(p->shape[0], cols_of(p));
    return XXH64(e->ps->quant + e->ps->quant_off[i], bytes, 0);
}

int zt_quant_acquire(zt_engine *e, int u, zt_error *err) {
    zt_param_store *ps = e->ps;
    if (!ps->quant) return ZT_OK;
    const zt_unit *un = &e->model->units[u];
    unit_state *s = &e->units[u];
    for (int k = 0; k < un->n_params; k++) {
        int i = un->params[k];
        const zt_param_desc *p = &e->model->params[i];
        if (!p->quant) continue;
        if (!ps->deq[i]) { /* (a unit that failed keeps its operands: they hold the same values) */
            char what[160];
            snprintf(what, sizeof what, "the dequantized %s", p->name);
            if (!(ps->deq[i] = zt_engine_alloc(e, zt_memory_dequant_floats(p, e->lp_kind), &e->mem.gathered, what)))
                return zt_engine_oom(e, err, "unit %s", un->name);
            const uint8_t *q = ps->quant + ps->quant_off[i];
            zt_trace_begin("dequantize", p->name); /* (bench/qlora.sh: the dequantization's share of a step) */
            if (e->lp_kind == ZT_LP_BF16) {
                if (p->quant == ZT_QUANT_NF4) zt_nf4_dequantize_bf16(ps->deq[i], q, p->numel);
                else zt_int8_dequantize_bf16(ps->deq[i], q, p->shape[0], cols_of(p));
            } else {
                dequantize_f32(e, i, ps->deq[i]);
                if (e->lp_kind == ZT_LP_FP16) zt_round_fp16(ps->deq[i], ps->deq[i], (size_t)p->numel);
            }
            zt_trace_end();
        }
        if (e->lp_kind) s->params_lp[k] = ps->deq[i];
        else s->params[k] = ps->deq[i];
    }
    return ZT_OK;
}

void zt_quant_release(zt_engine *e, int u) {
    zt_param_store *ps = e->ps;
    if (!ps->quant) return;
    const zt_unit *un = &e->model->units[u];
    for (int k = 0; k < un->n_params; k++) {
        int i = un->params[k];
        if (!e->model->params[i].quant || !ps->deq[i]) continue;
        zt_engine_release(e, (float **)&ps->deq[i], zt_memory_dequant_floats(&e->model->params[i], e->lp_kind),
                          &e->mem.gathered);
        if (e->lp_kind) e->units[u].params_lp[k] = NULL;
        else e->units[u].params[k] = NULL;
    }
}
