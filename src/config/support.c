/* support.c - what this build recognizes but does not honor: one table of (key, value, warning or
 * error, why). zt_train_config_validate refuses a configuration with an error row (exit code 2);
 * zt_train_config_notes passes the warning rows to the CLI, which prints them before training.
 * A later issue that implements a feature deletes its rows here (and the tests that expect them):
 * nothing else in the config code needs to change.
 *
 * A row's value is the canonical text of the key's value (zt_cfg_format) that triggers it, or NULL
 * for "any value other than the default". The message is "<key> <value> <why>", followed by where
 * the value came from. */
#include "config/config_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOT_YET(issue) "is not implemented in this build yet (issue " issue ")"

const support_row zt_cfg_support[] = {
    /* issue 7: memory */
    {"memory.offload_optimizer", "cpu", ZT_CONFIG_WARNING,
     "changes nothing on this CPU-only build: the optimizer state already lives in host memory "
     "(no offload)"},
    {"memory.offload_param", "cpu", ZT_CONFIG_WARNING,
     "changes nothing on this CPU-only build: the parameters already live in host memory (no "
     "offload)"},
    /* checkpoints (docs/checkpoints.md) */
    {"checkpoint.save_consolidated", "true", ZT_CONFIG_WARNING,
     "is not read from the configuration yet: `zerotrain export CKPT -o model.safetensors` "
     "consolidates a checkpoint (--save W.ztw writes the final weights)"},
    /* observability (docs/observability.md) */
    {"logging.wall_clock_breakdown", "true", ZT_CONFIG_NOTE,
     "is what logging.jsonl records every step (the time breakdown); --trace OUT draws a timeline"},
};
const int zt_cfg_n_support = (int)(sizeof zt_cfg_support / sizeof zt_cfg_support[0]);

/* "<key> <value> <why>; from <source>" */
static void emit(const zt_train_config *c, int ki, zt_config_level level, const char *why,
                 zt_config_note_fn fn, void *ctx) {
    char val[ZT_PATH_MAX + 8], text[ZT_CONFIG_NOTE_MAX + ZT_PATH_MAX];
    zt_cfg_format(c, &zt_cfg_keys[ki], val, sizeof val);
    const zt_config_source *s = &c->source[ki];
    if (s->origin == ZT_ORIGIN_DEFAULT || !s->text[0])
        snprintf(text, sizeof text, "%s %s %s", zt_cfg_keys[ki].key, val, why);
    else
        snprintf(text, sizeof text, "%s %s %s (from %s)", zt_cfg_keys[ki].key, val, why, s->text);
    fn(ctx, level, text);
}

/* d: the defaults (NULL when out of memory: then nothing counts as default) */
static bool is_default(const zt_train_config *c, const zt_train_config *d, int ki) {
    if (!d) return false;
    char a[ZT_PATH_MAX + 8], b[ZT_PATH_MAX + 8];
    zt_cfg_format(c, &zt_cfg_keys[ki], a, sizeof a);
    zt_cfg_format(d, &zt_cfg_keys[ki], b, sizeof b);
    return strcmp(a, b) == 0;
}

static void note_unused(const zt_train_config *c, const zt_train_config *d, const char *key,
                        const char *because, zt_config_note_fn fn, void *ctx) {
    int ki = zt_cfg_key_index(key);
    if (ki < 0 || !d || is_default(c, d, ki)) return;
    emit(c, ki, ZT_CONFIG_NOTE, because, fn, ctx);
}

void zt_cfg_support_check(const zt_train_config *c, zt_config_note_fn fn, void *ctx) {
    if (!c || !fn) return;
    char val[ZT_PATH_MAX + 8];
    zt_train_config *d = malloc(sizeof *d);
    if (d) zt_train_config_default(d);
    for (int r = 0; r < zt_cfg_n_support; r++) {
        int ki = zt_cfg_key_index(zt_cfg_support[r].key);
        if (ki < 0) continue;
        zt_cfg_format(c, &zt_cfg_keys[ki], val, sizeof val);
        bool hit = zt_cfg_support[r].value ? strcmp(val, zt_cfg_support[r].value) == 0
                                           : !is_default(c, d, ki);
        if (hit) emit(c, ki, zt_cfg_support[r].level, zt_cfg_support[r].why, fn, ctx);
    }
    /* keys that only matter together with another value: a note, so nothing is silent */
    if (c->precision != ZT_CFG_PREC_FP16) {
        static const char *const fp16_keys[] = {"precision.loss_scale", "precision.initial_scale_power",
                                                "precision.loss_scale_window", "precision.hysteresis",
                                                "precision.consecutive_hysteresis",
                                                "precision.min_loss_scale"};
        for (size_t i = 0; i < sizeof fp16_keys / sizeof fp16_keys[0]; i++)
            note_unused(c, d, fp16_keys[i], "has no effect: it applies to precision.mode fp16", fn, ctx);
    }
    if (c->strategy != ZT_STRATEGY_HYBRID) {
        note_unused(c, d, "parallel.hybrid_shard_size", "has no effect: parallel.strategy is not hybrid", fn, ctx);
        note_unused(c, d, "parallel.hybrid_replicas", "has no effect: parallel.strategy is not hybrid", fn, ctx);
        note_unused(c, d, "parallel.hybrid_inner", "has no effect: parallel.strategy is not hybrid", fn, ctx);
    }
    bool zero3 = c->strategy == ZT_STRATEGY_ZERO3 ||
                 (c->strategy == ZT_STRATEGY_HYBRID && c->hybrid_inner == ZT_STRATEGY_ZERO3);
    if (!zero3) {
        note_unused(c, d, "parallel.reshard_after_forward",
                    "has no effect: parameters are only gathered under zero3", fn, ctx);
        note_unused(c, d, "parallel.prefetch", "has no effect: parameters are only gathered under zero3", fn, ctx);
    }
    if (c->offload_optimizer != ZT_CFG_OFFLOAD_NVME)
        note_unused(c, d, "memory.offload_optimizer_nvme_path",
                    "has no effect: memory.offload_optimizer is not nvme", fn, ctx);
    if (c->offload_optimizer != ZT_CFG_OFFLOAD_NVME && c->offload_param != ZT_CFG_OFFLOAD_NVME) {
        static const char *const nvme_keys[] = {"memory.offload_buffer_count", "memory.offload_buffer_mb",
                                                "memory.offload_io_threads"};
        for (size_t i = 0; i < sizeof nvme_keys / sizeof nvme_keys[0]; i++)
            note_unused(c, d, nvme_keys[i], "has no effect: nothing is offloaded to nvme", fn, ctx);
    }
    if (c->offload_optimizer == ZT_CFG_OFFLOAD_NVME && c->optim.kind == ZT_OPT_SGD && c->optim.momentum == 0.0f) {
        int ki = zt_cfg_key_index("memory.offload_optimizer");
        if (ki >= 0)
            emit(c, ki, ZT_CONFIG_WARNING, "has no effect: SGD without momentum keeps no optimizer state", fn, ctx);
    }
    if (c->offload_param != ZT_CFG_OFFLOAD_NVME) {
        static const char *const param_keys[] = {"memory.offload_param_nvme_path", "memory.offload_param_prefetch",
                                                 "memory.offload_param_max_live"};
        for (size_t i = 0; i < sizeof param_keys / sizeof param_keys[0]; i++)
            note_unused(c, d, param_keys[i], "has no effect: memory.offload_param is not nvme", fn, ctx);
    }
    if (c->optim.kind == ZT_OPT_SGD) {
        note_unused(c, d, "optimizer.beta1", "has no effect: it applies to adamw", fn, ctx);
        note_unused(c, d, "optimizer.beta2", "has no effect: it applies to adamw", fn, ctx);
        note_unused(c, d, "optimizer.eps", "has no effect: it applies to adamw", fn, ctx);
    }
    free(d);
}
