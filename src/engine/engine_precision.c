/* engine_precision.c - the engine's side of the precision contract (zerotrain.h, "Precision"):
 * the policy checked at create, the units' low-precision operand staging, loss scaling and the
 * rounding of the stepped state. The compute copies of the parameters are the parameter store's
 * (compute_copy.c).
 *
 * Stepped state. fp16: the reduced gradient is rounded to fp16 (overflow -> inf, what fp16
 * gradient storage would hold) and carries the loss scale; step.c skips the update when it is not
 * finite and the scaler (src/precision/loss_scaler.c) adjusts. bf16-low: the reduced gradient is
 * rounded to bf16, and after the update the parameters (nearest-even or stochastic) and both
 * moments (nearest-even) are rounded to bf16, and stored as bf16 (parameters: param_bf16.c;
 * moments: offload.c, step.c). The reduced gradient stays bf16 values in an fp32 array.
 */
#include "engine/engine_internal.h"
#include "comm/comm.h"
#include "kernels/kernels.h"
#include "memory/plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int zt_engine_precision_setup(zt_engine *e, zt_error *err)
{
    const zt_precision *p = &e->opt.precision;
    int rc = zt_precision_check(p, err);
    if (rc) return rc;
    zt_loss_scaler_init(&e->scaler, p);
    if (!e->lp_kind) return ZT_OK; /* set by zt_engine_create: the saved buffers are sized by it */
    size_t staging = 0;
    for (int u = 0; u < e->model->n_units; u++) {
        const zt_unit *un = &e->model->units[u];
        if (!un->ops->staging_bytes) continue;
        size_t b = un->ops->staging_bytes(un, e->opt.B, e->opt.T, e->lp_kind);
        if (b > staging) staging = b;
    }
    if (staging && !(e->staging = zt_engine_alloc_exchange(e, zt_memory_floats_for_bytes(staging), &e->mem.activations, "the low-precision operand staging")))
        return zt_engine_oom(e, err, "engine: the %s compute copies", zt_dtype_name(p->compute));
    return ZT_OK;
}

void zt_engine_precision_free(zt_engine *e)
{
    zt_shared_free(e->staging);
    e->staging = NULL;
}

float zt_engine_loss_scale(const zt_engine *e)
{
    return e->opt.precision.mode == ZT_PRECISION_FP16 ? (float)e->scaler.scale : 1.0f;
}

void zt_engine_round_grads(zt_engine *e)
{
    const zt_precision *p = &e->opt.precision;
    if (p->grads == ZT_DTYPE_FP32) return;
    float *g = e->shard_optim ? e->grad_pieces : e->micro_grads;
    size_t n = e->shard_optim ? e->plan.gshard_floats : e->plan.gfull_floats; /* gradient layouts */
    if (!g) return;
    if (p->grads == ZT_DTYPE_FP16)
        zt_round_fp16(g, g, n);
    else
        zt_round_bf16(g, n);
}

void zt_engine_round_updated(zt_engine *e, int i, float *w, float *m, float *v, size_t n,
                             int64_t begin)
{
    const zt_precision *p = &e->opt.precision;
    if (p->params == ZT_DTYPE_BF16) {
        if (p->stochastic_rounding) /* the draw depends on (seed, step, parameter, element) only */
            zt_round_bf16_stochastic(w, n, e->opt.seed ^ (e->step * 0xD1B54A32D192ED03ull) ^
                                               ((uint64_t)(i + 1) * 0x8CB92BA72F3D8DD7ull),
                                     (uint64_t)begin);
        else
            zt_round_bf16(w, n);
    }
    if (p->moments == ZT_DTYPE_BF16) {
        if (m) zt_round_bf16(m, n);
        if (v) zt_round_bf16(v, n);
    }
}

void zt_engine_get_loss_scaler(const zt_engine *e, zt_loss_scaler *out) { *out = e->scaler; }
void zt_engine_set_loss_scaler(zt_engine *e, const zt_loss_scaler *in) { e->scaler = *in; }
