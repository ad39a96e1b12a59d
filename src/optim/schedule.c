/* schedule.c - learning-rate schedule: linear warmup from 0 to max_lr over warmup_steps, then
 * cosine (or linear) decay to min_lr at total_steps, constant after (llm.c/nanoGPT's shape). */
#include "zerotrain/zerotrain.h"

#include <math.h>

float zt_lr_at(const zt_lr_schedule *s, int64_t step) {
    if (s->warmup_steps > 0 && step < s->warmup_steps)
        return s->max_lr * (float)(step + 1) / (float)s->warmup_steps;
    if (s->decay == ZT_LR_CONSTANT || s->total_steps <= s->warmup_steps) return s->max_lr;
    if (step >= s->total_steps) return s->min_lr;
    double frac = (double)(step - s->warmup_steps) / (double)(s->total_steps - s->warmup_steps);
    double coef = s->decay == ZT_LR_COSINE ? 0.5 * (1.0 + cos(M_PI * frac)) : 1.0 - frac;
    return s->min_lr + (float)(coef * (s->max_lr - s->min_lr));
}
