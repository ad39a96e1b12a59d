/* policy.c - the precision contract (zerotrain.h, "Precision"): each mode's dtypes for parameters,
 * compute, reduction, accumulation, the stepped gradient and the moments; names; the one line
 * printed at start and written into the JSONL log and checkpoints; which policies this build runs.
 *
 * Why these dtypes (docs/precision.md): bf16 is the mixed mode DeepSpeed's bf16 block and
 * Accelerate's aligned FSDP mode run (fp32 master weights and moments, so updates far below a
 * bf16 ulp of the weight still land); bf16-low is Accelerate's memory-constrained pure-bf16 mode
 * (FSDP with param_dtype bf16 and no fp32 copy), where they do not; fp16 is DeepSpeed's fp16 with
 * dynamic loss scaling. Gradients are accumulated over micro-batches in fp32 in every mode and
 * reduced across ranks in fp32 by default; precision.reduce_dtype bf16 (FSDP's reduce_dtype,
 * DeepSpeed's communication_data_type) reduces them in bf16 instead: each rank's contribution and
 * every partial sum of the summation tree rounded to bf16 (src/comm/tree_sum.c), half the bytes
 * on the wire. It is allowed with fp32, bf16 and bf16-low, as FSDP allows reduce_dtype whatever
 * param_dtype is; not with fp16, whose loss-scaled gradients keep 10 mantissa bits that a bf16
 * reduction (7 bits) would throw away. reduce_dtype fp16 (DeepSpeed's default under fp16) goes
 * with fp16 only: its sums overflow past 65504, and only fp16's loss scaling turns that into a
 * skipped step (elsewhere it would end the run with a non-finite norm) and keeps small gradients
 * out of fp16's subnormals. Attention's products (flash attention: Q Kᵀ, P V and backward's four)
 * take bf16 operands under bf16 compute, as PyTorch's autocast runs them, with fp32 accumulation
 * and an fp32 softmax; precision.attention_dtype fp32 keeps them fp32. fp16 compute keeps fp32
 * attention (no fp16 dot-product instruction here).
 */
#include "zerotrain/zerotrain.h"

#include <stdio.h>
#include <string.h>

void zt_precision_default(zt_precision *p, zt_precision_mode mode)
{
    memset(p, 0, sizeof *p);
    p->mode = mode;
    switch (mode) {
    case ZT_PRECISION_BF16:
        p->compute = p->attention = ZT_DTYPE_BF16;
        break;
    case ZT_PRECISION_BF16_LOW:
        p->params = p->compute = p->grads = p->moments = p->attention = ZT_DTYPE_BF16;
        break;
    case ZT_PRECISION_FP16:
        p->compute = p->grads = ZT_DTYPE_FP16;
        break;
    default:
        p->mode = ZT_PRECISION_FP32;
        break;
    }
    p->initial_scale_power = 16;
    p->loss_scale_window = 1000;
    p->hysteresis = 2;
    p->min_loss_scale = 1.0f;
}

const char *zt_precision_mode_name(zt_precision_mode m)
{
    static const char *names[] = {"fp32", "bf16", "bf16-low", "fp16"};
    return (unsigned)m < 4 ? names[m] : "unknown";
}

const char *zt_dtype_name(zt_dtype d)
{
    static const char *names[] = {"fp32", "bf16", "fp16"};
    return (unsigned)d < 3 ? names[d] : "unknown";
}

int zt_precision_mode_parse(const char *name, zt_precision_mode *out, zt_error *err)
{
    for (int k = 0; k <= ZT_PRECISION_FP16; k++)
        if (strcmp(name, zt_precision_mode_name((zt_precision_mode)k)) == 0) {
            *out = (zt_precision_mode)k;
            return ZT_OK;
        }
    return zt_error_set(err, ZT_ERR_USAGE,
                        "unknown precision mode \"%s\" (known: fp32, bf16, bf16-low, fp16)", name);
}

int zt_precision_check(const zt_precision *p, zt_error *err)
{
    if ((unsigned)p->mode > ZT_PRECISION_FP16)
        return zt_error_set(err, ZT_ERR_USAGE, "precision: unknown mode %d", (int)p->mode);
    zt_precision want;
    zt_precision_default(&want, p->mode);
    const char *what = NULL;
    zt_dtype got = ZT_DTYPE_FP32, need = ZT_DTYPE_FP32;
    if (p->params != want.params) what = "params", got = p->params, need = want.params;
    else if (p->compute != want.compute) what = "compute", got = p->compute, need = want.compute;
    else if (p->reduce != want.reduce && !(p->reduce == ZT_DTYPE_BF16 && p->mode != ZT_PRECISION_FP16) &&
             !(p->reduce == ZT_DTYPE_FP16 && p->mode == ZT_PRECISION_FP16))
        what = "reduce", got = p->reduce, need = want.reduce;
    else if (p->accumulate != want.accumulate) what = "accumulate", got = p->accumulate, need = want.accumulate;
    else if (p->grads != want.grads) what = "grads", got = p->grads, need = want.grads;
    else if (p->moments != want.moments) what = "moments", got = p->moments, need = want.moments;
    if (what && !strcmp(what, "reduce"))
        return zt_error_set(err, ZT_ERR_USAGE,
                            "precision %s: reduce dtype %s is not supported (gradients are reduced in "
                            "fp32 in every mode, in bf16 under fp32, bf16 and bf16-low, in fp16 under fp16 "
                            "with its loss scaling)",
                            zt_precision_mode_name(p->mode), zt_dtype_name(got));
    if (what)
        return zt_error_set(err, ZT_ERR_USAGE,
                            "precision %s: %s dtype %s is not supported (this build runs %s there; "
                            "gradients are accumulated in fp32 in every mode)",
                            zt_precision_mode_name(p->mode), what, zt_dtype_name(got),
                            zt_dtype_name(need));
    if (p->mode == ZT_PRECISION_FP16) {
        if (p->loss_scale < 0 || p->min_loss_scale <= 0 || p->loss_scale_window < 1 ||
            p->hysteresis < 1 || p->initial_scale_power < 0 || p->initial_scale_power > 64)
            return zt_error_set(err, ZT_ERR_USAGE,
                                "precision fp16: loss scaling needs loss_scale >= 0, min_loss_scale > 0, "
                                "loss_scale_window >= 1, hysteresis >= 1, 0 <= initial_scale_power <= 64");
    }
    if (p->attention != ZT_DTYPE_FP32 && !(p->attention == ZT_DTYPE_BF16 && p->compute == ZT_DTYPE_BF16))
        return zt_error_set(err, ZT_ERR_USAGE, "precision %s: attention dtype %s is not supported (attention's "
                            "products run in fp32, or in bf16 under bf16 compute)", zt_precision_mode_name(p->mode),
                            zt_dtype_name(p->attention));
    if (p->stochastic_rounding && p->mode != ZT_PRECISION_BF16_LOW)
        return zt_error_set(err, ZT_ERR_USAGE, "precision %s: stochastic rounding applies to bf16-low "
                            "only (the other modes keep fp32 parameters)", zt_precision_mode_name(p->mode));
    return ZT_OK;
}

void zt_precision_describe(const zt_precision *p, char *buf, size_t size)
{
    const char *label = p->mode == ZT_PRECISION_BF16 ? "bf16 mixed" : zt_precision_mode_name(p->mode);
    int n = snprintf(buf, size, "%s: params %s | compute %s | reduce %s | accumulate %s | grads %s | "
                     "moments %s", label, zt_dtype_name(p->params), zt_dtype_name(p->compute),
                     zt_dtype_name(p->reduce), zt_dtype_name(p->accumulate),
                     zt_dtype_name(p->grads), zt_dtype_name(p->moments));
    if (n < 0 || (size_t)n >= size) return;
    if (p->mode == ZT_PRECISION_BF16_LOW)
        snprintf(buf + n, size - (size_t)n, " | rounding %s",
                 p->stochastic_rounding ? "stochastic" : "nearest");
    else if (p->mode == ZT_PRECISION_FP16) {
        if (p->loss_scale > 0)
            snprintf(buf + n, size - (size_t)n, " | static loss scale %g", (double)p->loss_scale);
        else
            snprintf(buf + n, size - (size_t)n,
                     " | dynamic loss scale 2^%d, window %d, hysteresis %d, min %g",
                     p->initial_scale_power, p->loss_scale_window, p->hysteresis,
                     (double)p->min_loss_scale);
    }
}
