/* loss_scaler.c - fp16's loss scaler with DeepSpeed's semantics (deepspeed/runtime/fp16/
 * loss_scaler.py, DynamicLossScaler.update_scale), state in zt_loss_scaler:
 *   overflow:  if hysteresis is 1 (or used up): scale = max(scale / 2, min_scale)
 *              else hysteresis -= 1;                        the step is skipped either way
 *              last_overflow_iter = cur_iter
 *   no overflow: consecutive_hysteresis: hysteresis refilled;
 *              every loss_scale_window iterations since the last overflow: scale *= 2 (and,
 *              without consecutive_hysteresis, the hysteresis refilled)
 *   cur_iter += 1
 * A static scale (loss_scale > 0) never changes; overflowing steps are still skipped. Unlike
 * recent DeepSpeed, an overflow at min_loss_scale does not raise: the step is skipped and the
 * scale stays (the run's JSONL shows every skip). Every rank runs this on the same agreed
 * overflow flag, so the scale is the same everywhere.
 */
#include "zerotrain/zerotrain.h"

#include <math.h>

void zt_loss_scaler_init(zt_loss_scaler *s, const zt_precision *p)
{
    s->scale = p->loss_scale > 0 ? (double)p->loss_scale : ldexp(1.0, p->initial_scale_power);
    s->cur_hysteresis = p->hysteresis;
    s->cur_iter = 0;
    s->last_overflow_iter = -1;
}

void zt_loss_scaler_update(zt_loss_scaler *s, const zt_precision *p, bool overflow)
{
    if (p->loss_scale > 0) { /* static */
        s->cur_iter++;
        return;
    }
    if (overflow) {
        if (p->hysteresis == 1 || s->cur_hysteresis == 1) {
            double half = s->scale / 2;
            s->scale = half > p->min_loss_scale ? half : (double)p->min_loss_scale;
        } else {
            s->cur_hysteresis--;
        }
        s->last_overflow_iter = s->cur_iter;
    } else {
        if (p->consecutive_hysteresis) s->cur_hysteresis = p->hysteresis;
        if ((s->cur_iter - s->last_overflow_iter) % p->loss_scale_window == 0) {
            if (!p->consecutive_hysteresis) s->cur_hysteresis = p->hysteresis;
            s->scale *= 2;
        }
    }
    s->cur_iter++;
}
