/* dialect_deepspeed.c - DeepSpeed's JSON config (deepspeed.ai/docs/config-json, and the code where
 * the two disagree: ../shared/reference/anchors.md §2) read into the native configuration.
 *
 * One row per DeepSpeed key in dialect_deepspeed.def (what it accepts, the native key, the
 * transform, the note or the refusal and its reason), applied by the interpreter in
 * dialect_common.c; docs/config.md is generated from the rows. This file holds only what rows
 * cannot say: the keys that interact (the three batch sizes, stage with MiCS/hpZ, bf16 against
 * fp16, the optimizer and its params, the scheduler and its params, gradient clipping), which
 * the walk records (RK_LATER rows) and the resolve_* functions below settle, in that order.
 *
 * Rules (docs/config.md says them to users):
 *   - "auto" keeps the native value (from the including native file, --set, or the default) and
 *     says so in the key's source. Hugging Face fills the same keys from its TrainingArguments;
 *     zerotrain's native config plays that part. (Accelerate derives bucket sizes from the model's
 *     hidden size; zerotrain keeps its own bucket_mb.)
 *   - A key absent from the file takes DeepSpeed's default where that differs from zerotrain's
 *     (stage 0, Adam betas 0.9/0.999, weight decay 0, ...) unless the including native file set
 *     it; values written in both places must agree.
 *   - Recognized keys with no effect here are notes; ones that change what runs are warnings;
 *     ones that cannot run are errors. A key close to a known one is an error with did-you-mean;
 *     any other unknown key is a warning and ignored, as DeepSpeed ignores it. */
#include "config/config_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---------------------------------------------------------------------------------------------
 * The rows: dialect_deepspeed.def, one per DeepSpeed key (config_internal.h says what each
 * column and kind means; dialect_common.c applies them). */

#define NUMA (A_NUM | A_AUTO)
#define INTA (A_INT | A_AUTO)
#define BOOLA (A_BOOL | A_AUTO)
#define BLOCK (A_MAP | A_NULL)
#define DEVICES "none=none,cpu=cpu,nvme=nvme,null=none"

static const dialect_row ROWS[] = {
#include "config/dialect_deepspeed.def"
};

const dialect_row *zt_cfg_deepspeed_rows(int *n) {
    *n = (int)(sizeof ROWS / sizeof ROWS[0]);
    return ROWS;
}

/* ---------------------------------------------------------------------------------------------
 * resolve(): the keys that interact. */

/* Sets a native key to DeepSpeed's default for something the file leaves out, unless the native
 * file set it. loc/what name the place and reason. */
static void ds_default(dctx *d, const char *key, const char *val, const char *what) {
    int ki = zt_cfg_key_index(key);
    if (ki < 0 || d->x->native_set[ki]) return;
    char desc[ZT_CONFIG_SOURCE_MAX];
    snprintf(desc, sizeof desc, "deepspeed default: %s", what);
    zt_cfg_apply_str(d->x, key, val, ZT_ORIGIN_DIALECT, d->file, desc, key);
}

static bool explicit_node(const cfg_node *n) { return n && !zt_cfg_is_auto(n); }

static void resolve_batch(dctx *d) {
    const cfg_node *t = zt_cfg_seen(d, "train_batch_size"), *m = zt_cfg_seen(d, "train_micro_batch_size_per_gpu"),
                   *g = zt_cfg_seen(d, "gradient_accumulation_steps");
    int64_t v;
    if (t && (zt_cfg_is_auto(t) || zt_cfg_get_int(d, t, t->key, 1, INT32_MAX, &v)))
        zt_cfg_map_node(d, t, "train_batch_size", "training.global_batch_size");
    if (m && (zt_cfg_is_auto(m) || zt_cfg_get_int(d, m, m->key, 1, 65536, &v)))
        zt_cfg_map_node(d, m, "train_micro_batch_size_per_gpu", "training.micro_batch_size");
    if (g && (zt_cfg_is_auto(g) || zt_cfg_get_int(d, g, g->key, 1, 1048576, &v)))
        zt_cfg_map_node(d, g, "gradient_accumulation_steps", "training.gradient_accumulation_steps");
    /* DeepSpeed's _set_batch_related_parameters: what train_batch_size leaves open is derived */
    if (explicit_node(t)) {
        if (!m && !g) {
            ds_default(d, "training.gradient_accumulation_steps", "1",
                       "train_batch_size alone: gradient_accumulation_steps 1");
            ds_default(d, "training.micro_batch_size", "0",
                       "train_batch_size alone: micro batch = train_batch_size / world, at launch");
        } else if (explicit_node(m) && !g) {
            ds_default(d, "training.gradient_accumulation_steps", "0",
                       "gradient_accumulation_steps = train_batch_size / (micro x world), at launch");
        } else if (explicit_node(g) && !m) {
            ds_default(d, "training.micro_batch_size", "0",
                       "micro batch = train_batch_size / (gradient_accumulation_steps x world), at "
                       "launch");
        }
    } else if (!m && !t) {
        zt_cfg_note(d->x, ZT_CONFIG_NOTE,
                    "%s: neither train_batch_size nor train_micro_batch_size_per_gpu (DeepSpeed "
                    "refuses that): training.micro_batch_size keeps its native value",
                    d->file);
    }
}

static void resolve_stage(dctx *d) {
    const cfg_node *st = zt_cfg_seen(d, "zero_optimization.stage");
    const cfg_node *mics = zt_cfg_seen(d, "zero_optimization.mics_shard_size");
    const cfg_node *hpz = zt_cfg_seen(d, "zero_optimization.zero_hpz_partition_size");
    int64_t stage = 0, ms = -1, hs = 1;
    if (st && !zt_cfg_get_int(d, st, "zero_optimization.stage", 0, 3, &stage)) return;
    if (mics && !zt_cfg_get_int(d, mics, "zero_optimization.mics_shard_size", -1, 1048576, &ms)) return;
    if (hpz && !zt_cfg_get_int(d, hpz, "zero_optimization.zero_hpz_partition_size", 0, 1048576, &hs))
        return;
    bool use_mics = ms > 0, use_hpz = hs > 1;
    if (use_mics && use_hpz) {
        zt_cfg_derror(d, hpz, "zero_optimization.zero_hpz_partition_size",
                      "cannot be combined with mics_shard_size (set one)");
        return;
    }
    if ((use_mics || use_hpz) && stage != 3) {
        const cfg_node *n = use_mics ? mics : hpz;
        zt_cfg_dnote(d, ZT_CONFIG_WARNING, n, use_mics ? "zero_optimization.mics_shard_size"
                                                       : "zero_optimization.zero_hpz_partition_size",
                     "applies to stage 3 only: ignored with stage %lld", (long long)stage);
        use_mics = use_hpz = false;
    }
    static const char *const NAMES[] = {"ddp", "zero1", "zero2", "zero3"};
    if (!st) {
        ds_default(d, "parallel.strategy", "ddp", "zero_optimization.stage absent: stage 0");
        return;
    }
    if (!use_mics && !use_hpz) {
        zt_cfg_map(d, st, "zero_optimization.stage", "parallel.strategy", NAMES[stage]);
        return;
    }
    const cfg_node *n = use_mics ? mics : hpz;
    const char *path = use_mics ? "zero_optimization.mics_shard_size"
                                : "zero_optimization.zero_hpz_partition_size";
    char size[32];
    snprintf(size, sizeof size, "%lld", (long long)(use_mics ? ms : hs));
    zt_cfg_map(d, st, "zero_optimization.stage", "parallel.strategy", "hybrid");
    zt_cfg_map(d, n, path, "parallel.hybrid_shard_size", size);
    zt_cfg_map(d, st, "zero_optimization.stage", "parallel.hybrid_inner", "zero3");
    if (use_hpz)
        zt_cfg_dnote(d, ZT_CONFIG_WARNING, n, path,
                     "approximated: hpZ keeps the primary parameter and optimizer shards over all "
                     "ranks and adds a secondary copy per group of %s for backward's all-gathers; "
                     "zerotrain's hybrid shards everything inside groups of %s and replicates across "
                     "them (FSDP's HYBRID_SHARD, which is MiCS; torchtitan maps hpZ to FSDP2's "
                     "reshard_after_forward=<int>). Same results, more memory per rank",
                     size, size);
    else
        zt_cfg_dnote(d, ZT_CONFIG_NOTE, n, path,
                     "MiCS: zero3 inside groups of %s ranks, replicated across groups (hybrid); "
                     "its hierarchical all-gather is a communication detail",
                     size);
}

/* sequence_parallel_size is DeepSpeed's Ulysses (ALST): the mode goes with the size */
static void resolve_ulysses(dctx *d) {
    const cfg_node *sp = zt_cfg_seen(d, "sequence_parallel_size");
    if (sp && sp->kind == CN_NUM && sp->num > 1)
        zt_cfg_map(d, sp, "sequence_parallel_size", "parallel.context_parallel_mode", "ulysses");
}

static void resolve_precision(dctx *d) {
    const cfg_node *b = zt_cfg_seen(d, "bf16.enabled"), *f = zt_cfg_seen(d, "fp16.enabled");
    bool bon = false, fon = false;
    if (explicit_node(b) && !zt_cfg_get_bool(d, b, "bf16.enabled", &bon)) return;
    if (explicit_node(f) && !zt_cfg_get_bool(d, f, "fp16.enabled", &fon)) return;
    if (bon && fon) {
        zt_cfg_derror(d, f, "fp16.enabled", "bf16 and fp16 cannot both be enabled");
        return;
    }
    const cfg_node *ta = zt_cfg_seen(d, "torch_autocast"), *ten = ta ? zt_cfg_child(ta, "enabled") : NULL;
    if (ten && ten->kind == CN_BOOL && ten->b && (bon || fon))
        zt_cfg_dnote(d, ZT_CONFIG_WARNING, ta, "torch_autocast",
                     "approximated by the %s block's precision.mode (casts per unit, not per op)",
                     bon ? "bf16" : "fp16");
    else if (ten && ten->kind == CN_BOOL && ten->b)
        zt_cfg_derror(d, ta, "torch_autocast",
                      "torch autocast alone is not supported: use the bf16 or fp16 block (precision.mode)");
    else if (ta)
        zt_cfg_dnote(d, ZT_CONFIG_NOTE, ta, "torch_autocast", "not enabled");
    if (bon) {
        zt_cfg_map(d, b, "bf16.enabled", "precision.mode", "bf16");
        /* DeepSpeed's engine (runtime/engine.py, DeepSpeedEngine.communication_data_type) reduces
         * gradients in bf16 when the bf16 block is on and communication_data_type is not set */
        const cfg_node *cd = zt_cfg_seen(d, "communication_data_type");
        if (!cd || cd->kind == CN_NULL)
            ds_default(d, "precision.reduce_dtype", "bf16",
                       "communication_data_type absent under bf16: gradients reduced in bf16");
    } else if (fon) {
        zt_cfg_map(d, f, "fp16.enabled", "precision.mode", "fp16");
        const cfg_node *cd = zt_cfg_seen(d, "communication_data_type");
        if (!cd || cd->kind == CN_NULL)
            ds_default(d, "precision.reduce_dtype", "fp16",
                       "communication_data_type absent under fp16: gradients reduced in fp16");
    } else if (zt_cfg_is_auto(b))
        zt_cfg_map_node(d, b, "bf16.enabled", "precision.mode");
    else if (zt_cfg_is_auto(f))
        zt_cfg_map_node(d, f, "fp16.enabled", "precision.mode");
    else if (b || f)
        zt_cfg_map(d, b ? b : f, b ? "bf16.enabled" : "fp16.enabled", "precision.mode", "fp32");
}

/* The scheduler's peak lr, when it sets one (DeepSpeed uses it over the optimizer's lr). */
static const cfg_node *sched_max_lr(dctx *d, const char **type) {
    const cfg_node *t = zt_cfg_seen(d, "scheduler.type");
    *type = t ? t->text : NULL;
    if (!t) return NULL;
    return zt_cfg_seen(d, "scheduler.params.warmup_max_lr");
}

static void resolve_optimizer(dctx *d) {
    const cfg_node *t = zt_cfg_seen(d, "optimizer.type");
    if (!t) {
        zt_cfg_note(d->x, ZT_CONFIG_NOTE, "%s: no optimizer block: the native optimizer settings apply",
                    d->file);
        return;
    }
    bool sgd = strcasecmp(t->text, "sgd") == 0, adam = strcasecmp(t->text, "adam") == 0,
         lamb = strcasecmp(t->text, "lamb") == 0, onebit = strcasecmp(t->text, "onebitadam") == 0;
    const cfg_node *lr = zt_cfg_seen(d, "optimizer.params.lr"), *betas = zt_cfg_seen(d, "optimizer.params.betas"),
                   *eps = zt_cfg_seen(d, "optimizer.params.eps"),
                   *wd = zt_cfg_seen(d, "optimizer.params.weight_decay"),
                   *awm = zt_cfg_seen(d, "optimizer.params.adam_w_mode"),
                   *bc = zt_cfg_seen(d, "optimizer.params.bias_correction"),
                   *ams = zt_cfg_seen(d, "optimizer.params.amsgrad"),
                   *mom = zt_cfg_seen(d, "optimizer.params.momentum"),
                   *nes = zt_cfg_seen(d, "optimizer.params.nesterov"),
                   *damp = zt_cfg_seen(d, "optimizer.params.dampening"),
                   *max = zt_cfg_seen(d, "optimizer.params.maximize"),
                   *maxc = zt_cfg_seen(d, "optimizer.params.max_coeff"),
                   *minc = zt_cfg_seen(d, "optimizer.params.min_coeff"),
                   *eis = zt_cfg_seen(d, "optimizer.params.eps_inside_sqrt"),
                   *fs = zt_cfg_seen(d, "optimizer.params.freeze_step"),
                   *cuda = zt_cfg_seen(d, "optimizer.params.cuda_aware"),
                   *backend = zt_cfg_seen(d, "optimizer.params.comm_backend_name");
    bool b;
    double x;
    if (lamb) { /* DeepSpeed's FusedLamb (docs/optimizer.md) */
        if (bc) zt_cfg_map_node(d, bc, "optimizer.params.bias_correction", "optimizer.lamb_bias_correction");
        if (maxc) zt_cfg_map_node(d, maxc, "optimizer.params.max_coeff", "optimizer.lamb_max_coeff");
        else ds_default(d, "optimizer.lamb_max_coeff", "10", "optimizer.params.max_coeff absent: 10");
        if (minc) zt_cfg_map_node(d, minc, "optimizer.params.min_coeff", "optimizer.lamb_min_coeff");
        else ds_default(d, "optimizer.lamb_min_coeff", "0.01", "optimizer.params.min_coeff absent: 0.01");
        if (eis && zt_cfg_get_bool(d, eis, "optimizer.params.eps_inside_sqrt", &b) && b)
            zt_cfg_derror(d, eis, "optimizer.params.eps_inside_sqrt",
                          "true is not supported: zerotrain's LAMB adds eps outside the square root (FusedLamb's default)");
        if (awm) zt_cfg_dnote(d, ZT_CONFIG_WARNING, awm, "optimizer.params.adam_w_mode", "an Adam parameter: no effect with Lamb");
    } else {
        const cfg_node *lamb_only[] = {maxc, minc, eis};
        for (size_t i = 0; i < 3; i++)
            if (lamb_only[i])
                zt_cfg_dnote(d, ZT_CONFIG_WARNING, lamb_only[i], lamb_only[i]->key, "a Lamb parameter: no effect with %s",
                             t->text);
    }
    if (onebit) { /* DeepSpeed's OnebitAdam (docs/optimizer.md): its kernel has no bias correction */
        ds_default(d, "optimizer.onebit_bias_correction", "false",
                   "OneBitAdam: DeepSpeed's kernel, no bias correction, weight decay in the update");
        if (bc) zt_cfg_dnote(d, ZT_CONFIG_NOTE, bc, "optimizer.params.bias_correction",
                             "no effect: DeepSpeed's OnebitAdam never corrects the bias (onebit_bias_correction false)");
        if (fs) zt_cfg_map_node(d, fs, "optimizer.params.freeze_step", "optimizer.onebit_freeze_step");
        else ds_default(d, "optimizer.onebit_freeze_step", "100000", "optimizer.params.freeze_step absent: 100000");
        if (cuda) zt_cfg_dnote(d, ZT_CONFIG_NOTE, cuda, "optimizer.params.cuda_aware",
                               "no effect: CUDA-aware MPI moves GPU buffers; zerotrain's are host memory");
        if (backend) zt_cfg_dnote(d, ZT_CONFIG_NOTE, backend, "optimizer.params.comm_backend_name",
                                  "no effect: zerotrain's own compressed all-reduce over MPI messages");
        if (awm) zt_cfg_dnote(d, ZT_CONFIG_WARNING, awm, "optimizer.params.adam_w_mode", "no effect with OneBitAdam");
    } else {
        const cfg_node *onebit_only[] = {fs, cuda, backend};
        for (size_t i = 0; i < 3; i++)
            if (onebit_only[i])
                zt_cfg_dnote(d, ZT_CONFIG_NOTE, onebit_only[i], onebit_only[i]->key,
                             "a 1-bit Adam/LAMB parameter: no effect with %s", t->text);
    }
    if (!lamb && !onebit && bc && zt_cfg_get_bool(d, bc, "optimizer.params.bias_correction", &b) && !b)
        zt_cfg_derror(d, bc, "optimizer.params.bias_correction",
                      "false is not supported: zerotrain's AdamW always corrects the bias");
    if (ams && zt_cfg_get_bool(d, ams, "optimizer.params.amsgrad", &b) && b)
        zt_cfg_derror(d, ams, "optimizer.params.amsgrad", "true is not supported (AMSGrad)");
    if (max && zt_cfg_get_bool(d, max, "optimizer.params.maximize", &b) && b)
        zt_cfg_derror(d, max, "optimizer.params.maximize", "true is not supported");
    if (damp && zt_cfg_get_num(d, damp, "optimizer.params.dampening", 0, 1, &x) && x != 0)
        zt_cfg_derror(d, damp, "optimizer.params.dampening", "only 0 is supported");
    if (sgd) {
        zt_cfg_map(d, t, "optimizer.type", "optimizer.type", "sgd");
        const cfg_node *adam_only[] = {betas, eps, awm};
        for (size_t i = 0; i < 3; i++)
            if (adam_only[i])
                zt_cfg_dnote(d, ZT_CONFIG_WARNING, adam_only[i], adam_only[i]->key,
                             "an Adam parameter: no effect with SGD");
    } else if (onebit) {
        zt_cfg_map(d, t, "optimizer.type", "optimizer.type", "onebit_adam");
        if (mom) zt_cfg_dnote(d, ZT_CONFIG_WARNING, mom, "optimizer.params.momentum", "an SGD parameter: no effect with OneBitAdam");
        if (nes) zt_cfg_dnote(d, ZT_CONFIG_WARNING, nes, "optimizer.params.nesterov", "an SGD parameter: no effect with OneBitAdam");
    } else if (lamb) {
        zt_cfg_map(d, t, "optimizer.type", "optimizer.type", "lamb");
        if (mom) zt_cfg_dnote(d, ZT_CONFIG_WARNING, mom, "optimizer.params.momentum", "an SGD parameter: no effect with Lamb");
        if (nes) zt_cfg_dnote(d, ZT_CONFIG_WARNING, nes, "optimizer.params.nesterov", "an SGD parameter: no effect with Lamb");
    } else {
        bool wmode = true;
        if (awm && !zt_cfg_get_bool(d, awm, "optimizer.params.adam_w_mode", &wmode)) return;
        if (adam && !wmode) {
            double w = 0;
            bool wd_zero = wd && !zt_cfg_is_auto(wd) && wd->kind == CN_NUM && (w = wd->num) == 0;
            if (!wd_zero) {
                zt_cfg_derror(d, awm, "optimizer.params.adam_w_mode",
                              "false applies L2 weight decay through the gradient (torch.optim.Adam); "
                              "zerotrain's AdamW decays decoupled: set adam_w_mode true or "
                              "weight_decay 0");
            }
        }
        zt_cfg_map(d, t, "optimizer.type", "optimizer.type", "adamw");
        if (mom) zt_cfg_dnote(d, ZT_CONFIG_WARNING, mom, "optimizer.params.momentum", "an SGD parameter: no effect with Adam");
        if (nes) zt_cfg_dnote(d, ZT_CONFIG_WARNING, nes, "optimizer.params.nesterov", "an SGD parameter: no effect with Adam");
    }
    /* lr: the scheduler's warmup_max_lr wins in DeepSpeed */
    const char *stype;
    const cfg_node *smax = sched_max_lr(d, &stype);
    bool sched_sets_lr = (smax && !zt_cfg_is_auto(smax)) ||
                         (stype && !strcasecmp(stype, "WarmupDecayLR") && !smax);
    if (lr && sched_sets_lr) {
        zt_cfg_dnote(d, ZT_CONFIG_WARNING, lr, "optimizer.params.lr",
                     "no effect: DeepSpeed's %s sets the lr from scheduler.params.warmup_max_lr%s",
                     stype, smax ? "" : " (default 0.001)");
    } else if (lr) {
        if (zt_cfg_is_auto(lr) || zt_cfg_get_num(d, lr, "optimizer.params.lr", 0, INFINITY, &x))
            zt_cfg_map_node(d, lr, "optimizer.params.lr", "training.lr");
    } else if (!sched_sets_lr) {
        ds_default(d, "training.lr", "1e-3", "optimizer.params.lr absent: 1e-3");
    }
    if (sgd) {
        if (mom) zt_cfg_map_node(d, mom, "optimizer.params.momentum", "optimizer.momentum");
        else ds_default(d, "optimizer.momentum", "0", "optimizer.params.momentum absent: 0");
        if (nes) zt_cfg_map_node(d, nes, "optimizer.params.nesterov", "optimizer.nesterov");
        if (wd) zt_cfg_map_node(d, wd, "optimizer.params.weight_decay", "optimizer.weight_decay");
        else ds_default(d, "optimizer.weight_decay", "0", "optimizer.params.weight_decay absent: 0");
        return;
    }
    if (betas && zt_cfg_is_auto(betas)) {
        zt_cfg_map_node(d, betas, "optimizer.params.betas", "optimizer.beta1");
        zt_cfg_map_node(d, betas, "optimizer.params.betas", "optimizer.beta2");
    } else if (betas) {
        const cfg_node *b1 = betas->child, *b2 = b1 ? b1->next : NULL;
        if (!b1 || !b2 || b2->next || b1->kind != CN_NUM || b2->kind != CN_NUM) {
            zt_cfg_derror(d, betas, "optimizer.params.betas", "expected [beta1, beta2], two numbers");
        } else {
            zt_cfg_map(d, b1, "optimizer.params.betas[0]", "optimizer.beta1", b1->text);
            zt_cfg_map(d, b2, "optimizer.params.betas[1]", "optimizer.beta2", b2->text);
        }
    } else {
        ds_default(d, "optimizer.beta1", "0.9", "optimizer.params.betas absent: [0.9, 0.999]");
        ds_default(d, "optimizer.beta2", "0.999", "optimizer.params.betas absent: [0.9, 0.999]");
    }
    if (eps) zt_cfg_map_node(d, eps, "optimizer.params.eps", "optimizer.eps");
    else ds_default(d, "optimizer.eps", "1e-8", "optimizer.params.eps absent: 1e-8");
    if (wd) zt_cfg_map_node(d, wd, "optimizer.params.weight_decay", "optimizer.weight_decay");
    else ds_default(d, "optimizer.weight_decay", "0", "optimizer.params.weight_decay absent: 0");
}

static void resolve_scheduler(dctx *d) {
    const cfg_node *t = zt_cfg_seen(d, "scheduler.type");
    if (!t) {
        if (zt_cfg_seen(d, "optimizer.type"))
            zt_cfg_note(d->x, ZT_CONFIG_NOTE,
                        "%s: no scheduler block: zerotrain's schedule applies (training.warmup_steps, "
                        "training.decay), as Hugging Face's Trainer supplies its own; DeepSpeed alone "
                        "would keep the lr constant",
                        d->file);
        return;
    }
    const char *type = t->text;
    const cfg_node *minlr = zt_cfg_seen(d, "scheduler.params.warmup_min_lr"),
                   *maxlr = zt_cfg_seen(d, "scheduler.params.warmup_max_lr"),
                   *wn = zt_cfg_seen(d, "scheduler.params.warmup_num_steps"),
                   *wt = zt_cfg_seen(d, "scheduler.params.warmup_type"),
                   *tot = zt_cfg_seen(d, "scheduler.params.total_num_steps"),
                   *wmr = zt_cfg_seen(d, "scheduler.params.warmup_min_ratio"),
                   *cmr = zt_cfg_seen(d, "scheduler.params.cos_min_ratio");
    bool lr_sched = !strcasecmp(type, "WarmupLR"), decay = !strcasecmp(type, "WarmupDecayLR"),
         cosine = !strcasecmp(type, "WarmupCosineLR");
    double x;
    zt_cfg_map(d, t, "scheduler.type", "training.decay",
               lr_sched ? "constant" : decay ? "linear" : "cosine");
    /* the peak */
    if (cosine) {
        if (maxlr) zt_cfg_dnote(d, ZT_CONFIG_WARNING, maxlr, "scheduler.params.warmup_max_lr",
                                "not a WarmupCosineLR parameter: no effect");
        if (minlr) zt_cfg_dnote(d, ZT_CONFIG_WARNING, minlr, "scheduler.params.warmup_min_lr",
                                "not a WarmupCosineLR parameter: no effect");
    } else if (maxlr) {
        if (zt_cfg_is_auto(maxlr) ||
            zt_cfg_get_num(d, maxlr, "scheduler.params.warmup_max_lr", 0, INFINITY, &x))
            zt_cfg_map_node(d, maxlr, "scheduler.params.warmup_max_lr", "training.lr");
    } else if (decay) {
        ds_default(d, "training.lr", "0.001",
                   "WarmupDecayLR without warmup_max_lr: 0.001 (its default, whatever the "
                   "optimizer's lr)");
        zt_cfg_note(d->x, ZT_CONFIG_WARNING,
                    "%s: scheduler: WarmupDecayLR without warmup_max_lr uses 0.001 (DeepSpeed's "
                    "default), not the optimizer's lr",
                    d->file);
    }
    /* warmup */
    if (wn) {
        if (zt_cfg_is_auto(wn) ||
            zt_cfg_get_int(d, wn, "scheduler.params.warmup_num_steps", 0, INT64_MAX, (int64_t[]){0}))
            zt_cfg_map_node(d, wn, "scheduler.params.warmup_num_steps", "training.warmup_steps");
        if (!zt_cfg_is_auto(wn) && wn->kind == CN_NUM && !tot)
            zt_cfg_fit_default(d, "training.steps", (int64_t)wn->num, wn,
                               "scheduler.params.warmup_num_steps");
    } else {
        ds_default(d, "training.warmup_steps", "1000", "scheduler.params.warmup_num_steps absent: 1000");
        if (!tot && !d->x->native_set[zt_cfg_key_index("training.warmup_steps")])
            zt_cfg_fit_default(d, "training.steps", 1000, t, "scheduler.params.warmup_num_steps (absent: 1000)");
    }
    if (!wt || !strcmp(wt->text, "log"))
        zt_cfg_note(d->x, ZT_CONFIG_WARNING,
                    "%s: scheduler: warmup_type %s: approximated by zerotrain's linear warmup from "
                    "lr / warmup_steps (DeepSpeed: min + (max - min) x log(step + 1) / "
                    "log(warmup_num_steps))",
                    d->file, wt ? "log" : "absent (log)");
    else if (strcmp(wt->text, "linear") != 0)
        zt_cfg_derror(d, wt, "scheduler.params.warmup_type", "expected \"log\" or \"linear\"");
    else
        zt_cfg_dnote(d, ZT_CONFIG_NOTE, wt, "scheduler.params.warmup_type",
                     "linear: zerotrain's warmup is linear too, from lr / warmup_steps at step 0 "
                     "(DeepSpeed's from warmup_min_lr)");
    /* the end */
    if (decay || cosine) {
        if (tot) {
            if (zt_cfg_is_auto(tot) ||
                zt_cfg_get_int(d, tot, "scheduler.params.total_num_steps", 1, INT64_MAX, (int64_t[]){0}))
                zt_cfg_map_node(d, tot, "scheduler.params.total_num_steps", "training.steps");
        } else {
            zt_cfg_derror(d, t, "scheduler.params.total_num_steps", "%s needs it", type);
        }
    }
    if (decay) {
        if (minlr) {
            if (zt_cfg_is_auto(minlr) ||
                zt_cfg_get_num(d, minlr, "scheduler.params.warmup_min_lr", 0, INFINITY, &x))
                zt_cfg_map_node(d, minlr, "scheduler.params.warmup_min_lr", "training.min_lr");
        } else {
            ds_default(d, "training.min_lr", "0", "WarmupDecayLR decays to warmup_min_lr (0)");
        }
    } else if (minlr && !cosine && !zt_cfg_is_auto(minlr) && minlr->kind == CN_NUM && minlr->num != 0) {
        zt_cfg_dnote(d, ZT_CONFIG_WARNING, minlr, "scheduler.params.warmup_min_lr",
                     "approximated: zerotrain's warmup starts at lr / warmup_steps");
    }
    if (cosine) {
        double ratio = 1e-4;
        if (cmr && !zt_cfg_is_auto(cmr) &&
            !zt_cfg_get_num(d, cmr, "scheduler.params.cos_min_ratio", 0, 1, &ratio))
            return;
        if (cmr && zt_cfg_is_auto(cmr)) {
            zt_cfg_map_node(d, cmr, "scheduler.params.cos_min_ratio", "training.min_lr");
        } else if (cmr || !d->x->native_set[zt_cfg_key_index("training.min_lr")]) {
            char v[64], desc[ZT_CONFIG_SOURCE_MAX], w[ZT_PATH_MAX + 32];
            snprintf(v, sizeof v, "%.9g", (double)d->x->c->lr.max_lr * ratio);
            snprintf(desc, sizeof desc, "deepspeed scheduler.params.cos_min_ratio=%g x training.lr %g%s",
                     ratio, (double)d->x->c->lr.max_lr, cmr ? "" : " (default ratio)");
            zt_cfg_apply_str(d->x, "training.min_lr", v, ZT_ORIGIN_DIALECT,
                             cmr ? zt_cfg_where(d, cmr, false, w, sizeof w) : d->file, desc,
                             "scheduler.params.cos_min_ratio");
        }
        if (wmr && !zt_cfg_is_auto(wmr) &&
            zt_cfg_get_num(d, wmr, "scheduler.params.warmup_min_ratio", 0, 1, &x) && x != 0)
            zt_cfg_dnote(d, ZT_CONFIG_WARNING, wmr, "scheduler.params.warmup_min_ratio",
                         "approximated: zerotrain's warmup starts at lr / warmup_steps");
    }
}

static void resolve_clip(dctx *d) {
    const cfg_node *c = zt_cfg_seen(d, "gradient_clipping");
    double x;
    if (c) {
        if (zt_cfg_is_auto(c) || zt_cfg_get_num(d, c, "gradient_clipping", 0, INFINITY, &x))
            zt_cfg_map_node(d, c, "gradient_clipping", "training.grad_clip");
        return;
    }
    zt_cfg_note(d->x, ZT_CONFIG_NOTE,
                "%s: no gradient_clipping: training.grad_clip keeps its value (default 1.0, "
                "DeepSpeed's default since PR #8068; older DeepSpeed code did not clip, although "
                "its docs said 1.0: write \"gradient_clipping\": 0 for that)",
                d->file);
}

/* stage3_max_live_parameters and offload_param.buffer_size: with offload_param.device nvme they
 * bound the read windows of parameter pieces (memory.offload_param_max_live), the smaller of
 * max_live_parameters and buffer_count x buffer_size; without it they do nothing here. */
static void resolve_param_window(dctx *d) {
    static const char *const LIVE = "zero_optimization.stage3_max_live_parameters";
    static const char *const SIZE = "zero_optimization.offload_param.buffer_size";
    static const char *const COUNT = "zero_optimization.offload_param.buffer_count";
    const cfg_node *dev = zt_cfg_seen(d, "zero_optimization.offload_param.device");
    const cfg_node *live = zt_cfg_seen(d, LIVE), *size = zt_cfg_seen(d, SIZE), *count = zt_cfg_seen(d, COUNT);
    if (!(dev && dev->text && !strcasecmp(dev->text, "nvme"))) {
        if (live)
            zt_cfg_dnote(d, ZT_CONFIG_NOTE, live, LIVE, "zero3 holds one gathered unit at a time (all of them "
                         "between forward and backward with reshard_after_forward false); it bounds parameter "
                         "offload's read windows only with offload_param.device nvme");
        if (size) zt_cfg_dnote(d, ZT_CONFIG_NOTE, size, SIZE, "no effect without offload_param.device nvme");
        return;
    }
    double bound = 0, x, c = 5; /* DeepSpeed's buffer_count default */
    const cfg_node *from = NULL;
    const char *path = NULL;
    if (live && !zt_cfg_is_auto(live)) {
        if (!zt_cfg_get_num(d, live, LIVE, 1, 1e18, &x)) return;
        bound = floor(x), from = live, path = LIVE;
    }
    if (size && !zt_cfg_is_auto(size)) {
        if (count && !zt_cfg_is_auto(count) && !zt_cfg_get_num(d, count, COUNT, 1, 1e6, &c)) return;
        if (!zt_cfg_get_num(d, size, SIZE, 1, 1e18, &x)) return;
        if (!from || floor(c) * floor(x) < bound) bound = floor(c) * floor(x), from = size, path = SIZE;
    }
    if (!from) return;
    char v[40];
    snprintf(v, sizeof v, "%.0f", bound);
    zt_cfg_map(d, from, path, "memory.offload_param_max_live", v);
}

void zt_cfg_read_deepspeed(cfg_ctx *x, const char *text, size_t len, const char *name) {
    cfg_node *root = zt_cfg_json_tree(x, text, len, name);
    if (!root) return;
    if (zt_cfg_child(root, "distributed_type") || zt_cfg_child(root, "compute_environment")) {
        zt_cfg_node_free(root);
        zt_cfg_error(x, "%s: an Accelerate config (distributed_type), not a DeepSpeed one: name it "
                        "as accelerate_config, or give it to zerotrain directly",
                     name);
        return;
    }
    dctx d = {.x = x, .file = name, .dialect = "deepspeed", .rows = ROWS,
              .n_rows = (int)(sizeof ROWS / sizeof ROWS[0])};
    zt_cfg_walk(&d, root, "");
    resolve_batch(&d);
    resolve_stage(&d);
    resolve_precision(&d);
    resolve_ulysses(&d);
    resolve_optimizer(&d);
    resolve_scheduler(&d);
    resolve_clip(&d);
    resolve_param_window(&d);
    const cfg_node *ac = zt_cfg_seen(&d, "activation_checkpointing");
    if (ac && ac->kind == CN_NULL)
        zt_cfg_dnote(&d, ZT_CONFIG_NOTE, ac, "activation_checkpointing", "null: no activation checkpointing");
    else if (ac)
        zt_cfg_map_checkpointing(&d, ac, "activation_checkpointing", true, "the block");
    zt_cfg_node_free(root);
}
