/* config_checks.c - the training configuration's checks: the invariants between keys that hold
 * whatever the world (zt_cfg_check_invariants, run after every reader), the launch-time checks
 * against a world size (zt_train_config_validate_world: the mesh, the batch's split, hybrid
 * groups), and the public zt_train_config_validate. Every error names the keys and where their
 * values came from; all of a configuration's errors are collected, nothing here prints or exits. */
#include "config/config_internal.h"
#include "comm/launcher.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The place a key's value came from, for messages: its source's location, else fallback. */
static const char *loc_of(const zt_train_config *c, int ki, const char *fallback, char *out,
                          size_t cap) {
    if (ki >= 0 && c->source[ki].loc_len > 0) {
        snprintf(out, cap, "%.*s", c->source[ki].loc_len, c->source[ki].text);
        return out;
    }
    return fallback;
}

/* The first of two keys that has a location. */
static const char *loc2(const zt_train_config *c, const char *a, const char *b,
                        const char *fallback, char *out, size_t cap) {
    int ka = zt_cfg_key_index(a), kb = zt_cfg_key_index(b);
    if (ka >= 0 && c->source[ka].loc_len > 0) return loc_of(c, ka, fallback, out, cap);
    return loc_of(c, kb, fallback, out, cap);
}

static bool bad(const cfg_ctx *x, const char *key) {
    int ki = zt_cfg_key_index(key);
    return ki >= 0 && x->bad[ki];
}

#define LOC(a, b) loc2(c, a, b, x->main_name, where, sizeof where)
#define PFX(w) (w) ? (w) : "", (w) ? ": " : ""

/* A mixture of experts (model.n_experts > 0): its shape, and what it does not run under yet. */
static void check_experts(cfg_ctx *x) {
    const zt_train_config *c = x->c;
    char where[ZT_CONFIG_SOURCE_MAX];
    const char *w;
    const zt_llama_config *m = &c->model;
    if (c->model_arch != ZT_ARCH_LLAMA || m->n_experts == 0 || bad(x, "model.n_experts") ||
        bad(x, "model.n_experts_per_token"))
        return;
    if (m->n_experts < 2) {
        w = LOC("model.n_experts", "model.n_experts");
        zt_cfg_error(x, "%s%smodel.n_experts: %d: a mixture needs at least 2 experts (0: dense)", PFX(w), m->n_experts);
    }
    if (m->n_experts_per_token < 1 || m->n_experts_per_token > m->n_experts) {
        w = LOC("model.n_experts_per_token", "model.n_experts");
        zt_cfg_error(x, "%s%smodel.n_experts_per_token: %d: the top-k must be 1 .. model.n_experts (%d)", PFX(w),
                     m->n_experts_per_token, m->n_experts);
    }
    /* shared experts (llama_moe_shared.c): a gate needs a shared expert; both widths agree */
    int IE = m->moe_intermediate_size > 0 ? m->moe_intermediate_size : m->intermediate_size;
    if (m->shared_expert_gate && m->n_shared_experts < 1 && m->shared_expert_intermediate_size < 1 &&
        !bad(x, "model.shared_expert_gate")) {
        w = LOC("model.shared_expert_gate", "model.n_experts");
        zt_cfg_error(x, "%s%smodel.shared_expert_gate: true with no shared expert (model.n_shared_experts %d, "
                     "model.shared_expert_intermediate_size %d): the gate scales the shared expert's output",
                     PFX(w), m->n_shared_experts, m->shared_expert_intermediate_size);
    }
    if (m->n_shared_experts > 0 && m->shared_expert_intermediate_size > 0 &&
        m->shared_expert_intermediate_size != m->n_shared_experts * IE &&
        !bad(x, "model.shared_expert_intermediate_size")) {
        w = LOC("model.shared_expert_intermediate_size", "model.n_shared_experts");
        zt_cfg_error(x, "%s%smodel.shared_expert_intermediate_size: %d with model.n_shared_experts %d of width %d: "
                     "both given, the width must be %d (or give one of them)", PFX(w),
                     m->shared_expert_intermediate_size, m->n_shared_experts, IE, m->n_shared_experts * IE);
    }
    /* tensor parallelism cuts the shared expert's columns as the dense MLP's (llama_moe_shared.c) */
    int tp = c->tensor_parallel_size;
    if (m->shared_expert_intermediate_size > 0 && tp > 1 && m->shared_expert_intermediate_size % tp != 0 &&
        !bad(x, "parallel.tensor_parallel_size") && !bad(x, "model.shared_expert_intermediate_size")) {
        w = LOC("parallel.tensor_parallel_size", "model.shared_expert_intermediate_size");
        zt_cfg_error(x, "%s%sparallel.tensor_parallel_size: %d does not divide model.shared_expert_intermediate_size "
                     "(%d): tensor parallelism gives each rank an equal share of the shared expert's columns", PFX(w),
                     tp, m->shared_expert_intermediate_size);
    }
    /* context parallelism: the router losses are the whole sequences' (llama_moe.c); a capacity is not */
    if (c->context_parallel_size > 1 && m->capacity_factor > 0 && !bad(x, "parallel.context_parallel_size") &&
        !bad(x, "model.capacity_factor")) {
        w = LOC("parallel.context_parallel_size", "model.capacity_factor");
        zt_cfg_error(x, "%s%sparallel.context_parallel_size: %d with model.capacity_factor %g: an expert's capacity is "
                     "a share of the whole sequences' tokens, which no context-parallel rank holds (dropless routing, "
                     "model.capacity_factor 0, runs with context parallelism)", PFX(w), c->context_parallel_size,
                     (double)m->capacity_factor);
    }
}

/* The parallel sizes against the model (the world is checked at launch, zt_mesh_layout): tensor
 * parallelism splits whole heads (query and key/value) and the MLP's hidden width, pipeline
 * parallelism whole units (the embedding, each block, the head). */
static void check_mesh_model(cfg_ctx *x) {
    const zt_train_config *c = x->c;
    char where[ZT_CONFIG_SOURCE_MAX];
    const char *w;
    int tp = c->tensor_parallel_size, pp = c->pipeline_parallel_size;
    if (!bad(x, "parallel.tensor_parallel_size") && tp > 1) {
        /* a mixture's experts are cut by their columns (moe_intermediate_size, or intermediate_size) */
        bool expert_width = c->model.n_experts > 0 && c->model.moe_intermediate_size > 0;
        const char *llama_keys[] = {"model.n_kv_head", expert_width ? "model.moe_intermediate_size" : "model.intermediate_size"};
        int llama_vals[] = {c->model.n_kv_head, expert_width ? c->model.moe_intermediate_size : c->model.intermediate_size};
        if (c->model.n_head % tp != 0) {
            w = LOC("parallel.tensor_parallel_size", "model.n_head");
            zt_cfg_error(x, "%s%sparallel.tensor_parallel_size: %d does not divide model.n_head (%d): tensor "
                         "parallelism gives each rank whole attention heads", PFX(w), tp, c->model.n_head);
        }
        for (int k = 0; k < 2 && c->model_arch == ZT_ARCH_LLAMA; k++)
            if (llama_vals[k] % tp != 0) {
                w = LOC("parallel.tensor_parallel_size", llama_keys[k]);
                zt_cfg_error(x, "%s%sparallel.tensor_parallel_size: %d does not divide %s (%d)%s", PFX(w), tp,
                             llama_keys[k], llama_vals[k],
                             k == 0 ? ": tensor parallelism gives each rank whole key/value heads" : "");
            }
    }
    if (c->sequence_parallel && !bad(x, "parallel.tensor_parallel_size") && !bad(x, "training.seq_len") &&
        (tp < 2 || c->seq_len % tp != 0)) {
        w = LOC("parallel.sequence_parallel", tp < 2 ? "parallel.tensor_parallel_size" : "training.seq_len");
        if (tp < 2)
            zt_cfg_error(x, "%s%sparallel.sequence_parallel: true needs parallel.tensor_parallel_size > 1 (it cuts "
                         "the tensor-parallel ranks' norms and residuals along the sequence), not %d", PFX(w), tp);
        else
            zt_cfg_error(x, "%s%sparallel.sequence_parallel: parallel.tensor_parallel_size %d does not divide "
                         "training.seq_len (%d): each rank holds seq_len / tp positions", PFX(w), tp, c->seq_len);
    }
    if (!bad(x, "parallel.tensor_parallel_size") && tp > 1 && c->lora.rank > 0) {
        w = LOC("parallel.tensor_parallel_size", "lora.rank");
        zt_cfg_error(x, "%s%sparallel.tensor_parallel_size: %d with lora.rank %d: LoRA adapters are not cut for tensor "
                     "parallelism yet (train them with data parallelism, tensor_parallel_size 1)", PFX(w), tp,
                     c->lora.rank);
    }
    if (!bad(x, "parallel.pipeline_parallel_size") && pp > 1) {
        static const struct { const char *key, *why; } no[] = {
            {"sample.tokens", "generation runs the whole model on one rank"},
            {"fault.replica_check_every", "the stages hold different parameters"},
            {"model.init_hf", "loading runs on the whole model"},
            {"parallel.sequence_parallel", "the stages send whole (B, T, C) activations"},
        };
        bool on[] = {c->sample_tokens > 0, c->fault_replica_check_every > 0, c->init_hf[0] != '\0',
                     c->sequence_parallel};
        for (int k = 0; k < 4; k++)
            if (on[k] && !bad(x, no[k].key)) {
                w = LOC("parallel.pipeline_parallel_size", no[k].key);
                zt_cfg_error(x, "%s%sparallel.pipeline_parallel_size: %d with %s: not under pipeline parallelism yet "
                             "(%s)", PFX(w), pp, no[k].key, no[k].why);
            }
    }
    int ep = c->expert_parallel_size;
    if (!bad(x, "parallel.expert_parallel_size") && ep > 1) { /* expert parallelism: a mixture's experts */
        bool dense = c->model_arch != ZT_ARCH_LLAMA || c->model.n_experts == 0;
        if (dense) {
            w = LOC("parallel.expert_parallel_size", "model.n_experts");
            zt_cfg_error(x, "%s%sparallel.expert_parallel_size: %d with a dense model (model.n_experts %d): expert "
                         "parallelism spreads a mixture of experts' experts over ranks", PFX(w), ep,
                         c->model_arch == ZT_ARCH_LLAMA ? c->model.n_experts : 0);
        } else if (!bad(x, "model.n_experts") && c->model.n_experts % ep != 0) {
            w = LOC("parallel.expert_parallel_size", "model.n_experts");
            zt_cfg_error(x, "%s%sparallel.expert_parallel_size: %d does not divide model.n_experts (%d): each rank "
                         "runs n_experts / expert_parallel_size whole experts", PFX(w), ep, c->model.n_experts);
        }
    }
    check_experts(x);
    int cp = c->context_parallel_size;
    if (!bad(x, "parallel.context_parallel_size") && cp > 1) {
        if (!bad(x, "training.seq_len") && c->seq_len % (2 * cp) != 0) {
            w = LOC("parallel.context_parallel_size", "training.seq_len");
            zt_cfg_error(x, "%s%sparallel.context_parallel_size: %d: 2 x %d = %d does not divide training.seq_len (%d): "
                         "each rank holds 2 of %d equal chunks of every sequence", PFX(w), cp, cp, 2 * cp, c->seq_len,
                         2 * cp);
        }
        if (c->model.attention != ZT_ATTENTION_FLASH && !bad(x, "model.attention")) {
            w = LOC("parallel.context_parallel_size", "model.attention");
            zt_cfg_error(x, "%s%sparallel.context_parallel_size: %d with model.attention naive: context parallelism "
                         "runs the flash kernels' blocks (model.attention: flash)", PFX(w), cp);
        }
        if (c->context_parallel_mode == ZT_CP_ULYSSES && !bad(x, "parallel.context_parallel_mode")) {
            int heads = c->model.n_head / (tp > 0 ? tp : 1);
            int kv = c->model_arch == ZT_ARCH_LLAMA ? c->model.n_kv_head / (tp > 0 ? tp : 1) : heads;
            if (heads % cp != 0 || kv % cp != 0) {
                w = LOC("parallel.context_parallel_mode", "model.n_head");
                zt_cfg_error(x, "%s%sparallel.context_parallel_mode: ulysses over parallel.context_parallel_size %d "
                             "needs the heads (%d) and key/value heads (%d) of each tensor-parallel rank divisible by "
                             "it: each rank attends with 1/%d of them (allgather or ring do not)", PFX(w), cp, heads,
                             kv, cp);
            }
        }
        static const struct { const char *key, *why; } no[] = {
            {"sample.tokens", "generation runs the whole sequence on one rank: `zerotrain sample` on the saved weights"},
            {"parallel.sequence_parallel", "both cut the positions; use one"},
        };
        bool on[] = {c->sample_tokens > 0, c->sequence_parallel};
        for (int k = 0; k < 2; k++)
            if (on[k] && !bad(x, no[k].key)) {
                w = LOC("parallel.context_parallel_size", no[k].key);
                zt_cfg_error(x, "%s%sparallel.context_parallel_size: %d with %s: not under context parallelism (%s)",
                             PFX(w), cp, no[k].key, no[k].why);
            }
    }
    int units = c->model.n_layer + 2;
    if (!bad(x, "parallel.pipeline_parallel_size") && !bad(x, "model.n_layer") && pp > units) {
        w = LOC("parallel.pipeline_parallel_size", "model.n_layer");
        zt_cfg_error(x, "%s%sparallel.pipeline_parallel_size: %d stages for the model's %d units (model.n_layer %d "
                     "blocks, the embedding and the head): at most %d", PFX(w), pp, units, c->model.n_layer,
                     units);
    }
}

void zt_cfg_check_invariants(cfg_ctx *x) {
    const zt_train_config *c = x->c;
    char where[ZT_CONFIG_SOURCE_MAX];
    const char *w;
    if (!bad(x, "model.n_head") && !bad(x, "model.n_embd") && c->model.n_head > 0 &&
        c->model.n_embd % c->model.n_head != 0) {
        w = LOC("model.n_head", "model.n_embd");
        zt_cfg_error(x, "%s%smodel.n_head: %d does not divide model.n_embd (%d)", PFX(w),
                     c->model.n_head, c->model.n_embd);
    }
    if (c->model_arch == ZT_ARCH_LLAMA) {
        if (!bad(x, "model.n_kv_head") && !bad(x, "model.n_head") && c->model.n_kv_head > 0 &&
            c->model.n_head % c->model.n_kv_head != 0) {
            w = LOC("model.n_kv_head", "model.n_head");
            zt_cfg_error(x, "%s%smodel.n_kv_head: %d does not divide model.n_head (%d)", PFX(w),
                         c->model.n_kv_head, c->model.n_head);
        }
        if (c->model.n_head > 0 && c->model.n_embd % c->model.n_head == 0 &&
            (c->model.n_embd / c->model.n_head) % 2 != 0) {
            w = LOC("model.n_embd", "model.n_head");
            zt_cfg_error(x, "%s%smodel.n_embd: the head size %d (n_embd / n_head) must be even for the rotary "
                         "embedding", PFX(w), c->model.n_embd / c->model.n_head);
        }
        const zt_rope_scaling *r = &c->model.rope_scaling;
        if (r->factor > 0.0f && (!(r->low_freq_factor > 0.0f) || !(r->high_freq_factor > r->low_freq_factor) ||
                                 r->original_max_position_embeddings < 1)) {
            w = LOC("model.rope_scaling.factor", "model.preset");
            zt_cfg_error(x, "%s%smodel.rope_scaling.factor: %g needs 0 < low_freq_factor (%g) < high_freq_factor "
                         "(%g) and original_max_position_embeddings >= 1 (%d)", PFX(w), (double)r->factor,
                         (double)r->low_freq_factor, (double)r->high_freq_factor,
                         r->original_max_position_embeddings);
        }
    } else {
        /* keys GPT-2 has no use for: set by hand to another value than the preset's (a printed
         * configuration repeats those), they would be silently ignored */
        static const char *const llama_only[] = {
            "model.n_kv_head", "model.intermediate_size", "model.rope_theta", "model.rms_norm_eps",
            "model.rope_scaling.factor", "model.rope_scaling.low_freq_factor",
            "model.rope_scaling.high_freq_factor", "model.rope_scaling.original_max_position_embeddings",
            "model.n_experts", "model.n_experts_per_token", "model.moe_intermediate_size",
            "model.router_aux_loss_coef", "model.router_z_loss_coef", "model.capacity_factor",
            "model.n_shared_experts", "model.shared_expert_intermediate_size", "model.shared_expert_gate",
            "model.attention_qkv_bias"};
        zt_model_spec ps;
        zt_error ignore;
        zt_train_config preset = *c;
        if (zt_model_preset(c->model_preset, &ps, &ignore) == ZT_OK) zt_cfg_preset_model(&ps, &preset.model);
        for (size_t i = 0; i < sizeof llama_only / sizeof *llama_only; i++) {
            int ki = zt_cfg_key_index(llama_only[i]);
            char now[64], was[64];
            if (ki < 0 || x->bad[ki] || c->source[ki].origin < ZT_ORIGIN_FILE) continue;
            zt_cfg_format(c, &zt_cfg_keys[ki], now, sizeof now);
            zt_cfg_format(&preset, &zt_cfg_keys[ki], was, sizeof was);
            if (strcmp(now, was) != 0) {
                w = LOC(llama_only[i], "model.arch");
                zt_cfg_error(x, "%s%s%s: applies to model.arch llama; this model is gpt2 (model.preset %s)",
                             PFX(w), llama_only[i], c->model_preset);
            }
        }
        if (!c->model.tie_embeddings) {
            w = LOC("model.tie_embeddings", "model.arch");
            zt_cfg_error(x, "%s%smodel.tie_embeddings: GPT-2's LM head is always tied to wte", PFX(w));
        }
    }
    check_mesh_model(x);
    if (!bad(x, "training.seq_len") && !bad(x, "model.max_seq_len") &&
        c->seq_len > c->model.max_seq_len) {
        w = LOC("training.seq_len", "model.max_seq_len");
        zt_cfg_error(x, "%s%straining.seq_len: %d exceeds model.max_seq_len (%d)", PFX(w),
                     c->seq_len, c->model.max_seq_len);
    }
    if ((int64_t)c->micro_batch * c->seq_len > INT_MAX) {
        w = LOC("training.micro_batch_size", "training.seq_len");
        zt_cfg_error(x, "%s%straining.micro_batch_size: %d sequences of %d tokens is more than %d "
                        "tokens per micro-batch",
                     PFX(w), c->micro_batch, c->seq_len, INT_MAX);
    }
    if (!bad(x, "training.warmup_steps") && !bad(x, "training.steps") &&
        c->lr.warmup_steps > c->steps) {
        w = LOC("training.warmup_steps", "training.steps");
        zt_cfg_error(x, "%s%straining.warmup_steps: %lld exceeds training.steps (%lld)", PFX(w),
                     (long long)c->lr.warmup_steps, (long long)c->steps);
    }
    if (!bad(x, "training.min_lr") && !bad(x, "training.lr") && c->lr.min_lr > c->lr.max_lr) {
        w = LOC("training.min_lr", "training.lr");
        zt_cfg_error(x, "%s%straining.min_lr: %g exceeds training.lr (%g)", PFX(w),
                     (double)c->lr.min_lr, (double)c->lr.max_lr);
    }
    if (c->lr.total_steps != c->steps)
        zt_cfg_error(x, "training.steps: lr.total_steps (%lld) differs from steps (%lld)",
                     (long long)c->lr.total_steps, (long long)c->steps);
    if (c->optim.nesterov && c->optim.momentum <= 0.0f) {
        w = LOC("optimizer.nesterov", "optimizer.momentum");
        zt_cfg_error(x, "%s%soptimizer.nesterov: needs optimizer.momentum > 0 (it is %g)", PFX(w),
                     (double)c->optim.momentum);
    }
    /* Muon, LAMB and 1-bit Adam: what they do not implement yet is refused by name (docs/optimizer.md).
     * Muon and LAMB run under tensor and pipeline parallelism, bf16-low (engine/step_whole.c) and
     * offload (engine/step_streamed.c); 1-bit Adam none of these. */
    if (c->optim.kind == ZT_OPT_MUON || c->optim.kind == ZT_OPT_LAMB || c->optim.kind == ZT_OPT_ONEBIT_ADAM) {
        const char *on = zt_optimizer_name(c->optim.kind);
        bool onebit = c->optim.kind == ZT_OPT_ONEBIT_ADAM;
        if (onebit && c->tensor_parallel_size > 1) {
            w = LOC("optimizer.type", "parallel.tensor_parallel_size");
            zt_cfg_error(x, "%s%soptimizer.type: %s with parallel.tensor_parallel_size %d is not implemented (its "
                            "compressed momentum is one flat vector per rank, which tensor parallelism cuts); use "
                            "tensor_parallel_size 1",
                         PFX(w), on, c->tensor_parallel_size);
        }
        if (onebit && c->pipeline_parallel_size > 1) {
            w = LOC("optimizer.type", "parallel.pipeline_parallel_size");
            zt_cfg_error(x, "%s%soptimizer.type: %s with parallel.pipeline_parallel_size %d is not implemented; "
                            "use pipeline_parallel_size 1",
                         PFX(w), on, c->pipeline_parallel_size);
        }
        if (onebit && c->offload_optimizer != ZT_CFG_OFFLOAD_NONE) {
            w = LOC("optimizer.type", "memory.offload_optimizer");
            zt_cfg_error(x, "%s%soptimizer.type: %s with memory.offload_optimizer is not implemented (its state "
                            "stays in memory); set memory.offload_optimizer: none",
                         PFX(w), on);
        }
        if (onebit && c->offload_param != ZT_CFG_OFFLOAD_NONE) {
            w = LOC("optimizer.type", "memory.offload_param");
            zt_cfg_error(x, "%s%soptimizer.type: %s with memory.offload_param is not implemented; set "
                            "memory.offload_param: none",
                         PFX(w), on);
        }
        if (onebit && c->precision == ZT_CFG_PREC_BF16_LOW) {
            w = LOC("optimizer.type", "precision.mode");
            zt_cfg_error(x, "%s%soptimizer.type: %s with bf16-low (bf16 parameters and moments) is not "
                            "implemented; use bf16 (fp32 master and moments)",
                         PFX(w), on);
        }
    }
    /* 1-bit Adam: DeepSpeed runs it without ZeRO only (docs/optimizer.md); zerotrain under ddp and
     * hybrid (the shard group's pieces' momenta averaged compressed across the replicas) */
    if (c->optim.kind == ZT_OPT_ONEBIT_ADAM && c->strategy != ZT_STRATEGY_DDP && c->strategy != ZT_STRATEGY_HYBRID) {
        w = LOC("optimizer.type", "parallel.strategy");
        zt_cfg_error(x, "%s%soptimizer.type: onebit_adam with parallel.strategy %s is not implemented (DeepSpeed's "
                        "1-bit Adam refuses ZeRO too: each rank's momentum moves with its own gradient, which a "
                        "sharded optimizer state does not hold); use parallel.strategy ddp, or hybrid (sharded "
                        "inside a host, compressed across hosts)",
                     PFX(w), zt_strategy_name(c->strategy));
    }
    if (c->optim.kind == ZT_OPT_ONEBIT_ADAM && c->strategy == ZT_STRATEGY_HYBRID && c->expert_parallel_size > 1) {
        w = LOC("optimizer.type", "parallel.expert_parallel_size");
        zt_cfg_error(x, "%s%soptimizer.type: onebit_adam with parallel.strategy hybrid and "
                        "parallel.expert_parallel_size %d is not implemented (the experts' pieces are sharded over "
                        "other groups than the replicas the momentum is averaged across); use expert_parallel_size 1",
                     PFX(w), c->expert_parallel_size);
    }
    if (c->optim.kind == ZT_OPT_ONEBIT_ADAM && c->strategy == ZT_STRATEGY_HYBRID && c->context_parallel_size > 1) {
        w = LOC("optimizer.type", "parallel.context_parallel_size");
        zt_cfg_error(x, "%s%soptimizer.type: onebit_adam with parallel.strategy hybrid and "
                        "parallel.context_parallel_size %d is not implemented (not tested: the shard group would mix "
                        "context-parallel parts and data-parallel ranks); use context_parallel_size 1",
                     PFX(w), c->context_parallel_size);
    }
    if (c->optim.kind == ZT_OPT_LAMB && c->optim.lamb_min_coeff > c->optim.lamb_max_coeff) {
        w = LOC("optimizer.lamb_min_coeff", "optimizer.lamb_max_coeff");
        zt_cfg_error(x, "%s%soptimizer.lamb_min_coeff: %g exceeds optimizer.lamb_max_coeff (%g)", PFX(w),
                     (double)c->optim.lamb_min_coeff, (double)c->optim.lamb_max_coeff);
    }
    bool have_val = c->val_path[0] != '\0' || c->val_fraction > 0.0f;
    if (c->eval_every > 0 && !have_val) {
        w = LOC("eval.every", "data.val");
        zt_cfg_error(x, "%s%seval.every: %d needs validation data: set data.val or data.val_fraction (or eval.every: 0)",
                     PFX(w), c->eval_every);
    }
    if (c->eval_target_loss > 0.0f && !have_val) {
        w = LOC("eval.target_loss", "data.val");
        zt_cfg_error(x, "%s%seval.target_loss: %g needs validation data: set data.val or data.val_fraction (or eval.target_loss: 0)",
                     PFX(w), (double)c->eval_target_loss);
    }
    if (!bad(x, "sample.tokens") && c->sample_tokens > c->model.max_seq_len) {
        w = LOC("sample.tokens", "model.max_seq_len");
        zt_cfg_error(x, "%s%ssample.tokens: %d exceeds model.max_seq_len (%d)", PFX(w),
                     c->sample_tokens, c->model.max_seq_len);
    }
    /* batch sizes: global = micro x GA x world; 0 marks the one derived at launch */
    if (!bad(x, "training.micro_batch_size") && !bad(x, "training.gradient_accumulation_steps") &&
        !bad(x, "training.global_batch_size")) {
        if (c->micro_batch == 0 && c->grad_accum == 0) {
            w = LOC("training.micro_batch_size", "training.gradient_accumulation_steps");
            zt_cfg_error(x, "%s%straining.micro_batch_size: 0 (derived) and "
                            "training.gradient_accumulation_steps 0 (derived): at most one can be "
                            "derived from training.global_batch_size",
                         PFX(w));
        } else if ((c->micro_batch == 0 || c->grad_accum == 0) && c->global_batch == 0) {
            const char *key = c->micro_batch == 0 ? "training.micro_batch_size"
                                                  : "training.gradient_accumulation_steps";
            w = LOC(key, "training.global_batch_size");
            zt_cfg_error(x, "%s%s%s: 0 means derived from training.global_batch_size, which is not "
                            "set",
                         PFX(w), key);
        } else if (c->global_batch > 0 && c->micro_batch > 0 && c->grad_accum > 0 &&
                   c->global_batch % (c->micro_batch * c->grad_accum) != 0) {
            w = LOC("training.global_batch_size", "training.micro_batch_size");
            zt_cfg_error(x, "%s%straining.global_batch_size: %d is not a multiple of "
                            "training.micro_batch_size %d x training.gradient_accumulation_steps %d "
                            "= %d, so no world size gives it",
                         PFX(w), c->global_batch, c->micro_batch, c->grad_accum,
                         c->micro_batch * c->grad_accum);
        }
    }
    if (!bad(x, "precision.reduce_dtype") && !bad(x, "precision.mode") && c->reduce_dtype == ZT_CFG_DTYPE_BF16 &&
        c->precision == ZT_CFG_PREC_FP16) {
        w = LOC("precision.reduce_dtype", "precision.mode");
        zt_cfg_error(x, "%s%sprecision.reduce_dtype: bf16 with precision.mode fp16 would drop 3 of the 10 "
                        "mantissa bits of fp16's loss-scaled gradients; reduce them in fp16 or fp32, or use "
                        "precision.mode bf16 (src/precision/policy.c)",
                     PFX(w));
    }
    if (!bad(x, "precision.reduce_dtype") && !bad(x, "precision.mode") && c->reduce_dtype == ZT_CFG_DTYPE_FP16 &&
        c->precision != ZT_CFG_PREC_FP16) {
        w = LOC("precision.reduce_dtype", "precision.mode");
        zt_cfg_error(x, "%s%sprecision.reduce_dtype: fp16 needs precision.mode fp16, whose loss scaling keeps the "
                        "sums within fp16's range (an overflow skips the step) and small gradients out of its "
                        "subnormals; reduce in bf16 or fp32 (src/precision/policy.c)",
                     PFX(w));
    }
    if (c->hybrid_replicas > 0 && c->hybrid_shard_size == 0 && c->strategy == ZT_STRATEGY_HYBRID) {
        w = LOC("parallel.hybrid_replicas", "parallel.hybrid_shard_size");
        zt_cfg_error(x, "%s%sparallel.hybrid_replicas: %d needs parallel.hybrid_shard_size", PFX(w),
                     c->hybrid_replicas);
    }
    if (c->offload_optimizer == ZT_CFG_OFFLOAD_NVME && !c->offload_optimizer_nvme_path[0]) {
        w = LOC("memory.offload_optimizer", "memory.offload_optimizer_nvme_path");
        zt_cfg_error(x, "%s%smemory.offload_optimizer: nvme needs memory.offload_optimizer_nvme_path",
                     PFX(w));
    }
    if (c->offload_optimizer == ZT_CFG_OFFLOAD_NVME && c->offload_buffer_mb * 1048576.0 < 2 * 4096.0) {
        w = LOC("memory.offload_buffer_mb", "memory.offload_optimizer");
        zt_cfg_error(x, "%s%smemory.offload_buffer_mb: %g MiB cannot hold a 4 KiB block of each "
                        "optimizer state (at least 0.0078125, i.e. 8 KiB)",
                     PFX(w), (double)c->offload_buffer_mb);
    }
    if (c->offload_param == ZT_CFG_OFFLOAD_NVME && !c->offload_param_nvme_path[0]) {
        w = LOC("memory.offload_param", "memory.offload_param_nvme_path");
        zt_cfg_error(x, "%s%smemory.offload_param: nvme needs memory.offload_param_nvme_path", PFX(w));
    }
    bool zero3 = c->strategy == ZT_STRATEGY_ZERO3 ||
                 (c->strategy == ZT_STRATEGY_HYBRID && c->hybrid_inner == ZT_STRATEGY_ZERO3);
    if (c->offload_param == ZT_CFG_OFFLOAD_NVME && !zero3) {
        w = LOC("memory.offload_param", "parallel.strategy");
        zt_cfg_error(x, "%s%smemory.offload_param: nvme offloads zero3's parameter pieces: it needs "
                        "parallel.strategy zero3 (or hybrid with hybrid_inner zero3), not %s "
                        "(other strategies keep whole parameters on every rank)",
                     PFX(w), zt_strategy_name(c->strategy));
    }
    if (c->offload_param == ZT_CFG_OFFLOAD_NVME && c->precision == ZT_CFG_PREC_BF16_LOW) {
        w = LOC("memory.offload_param", "precision.mode");
        zt_cfg_error(x, "%s%smemory.offload_param: nvme keeps fp32 parameter pieces in files; precision.mode "
                        "bf16-low stores bf16 parameters and is not supported with it (use bf16)", PFX(w));
    }
    if (c->lora.rank == 0 && (c->lora.target_modules[0] || c->lora.dropout != 0.0f || c->lora.alpha != 8.0f)) {
        const char *set = c->lora.target_modules[0] ? "lora.target_modules" : c->lora.dropout != 0.0f ? "lora.dropout"
                                                                                                    : "lora.alpha";
        w = LOC("lora.rank", set);
        zt_cfg_error(x, "%s%slora.rank: 0 turns LoRA off, but %s is set: give lora.rank >= 1 (e.g. 8) to train "
                        "adapters, or remove the lora section", PFX(w), set);
    }
    if (c->lora.base_quant != ZT_QUANT_NONE) { /* QLoRA: the frozen base quantized (engine/param_quant.c) */
        const char *q = zt_quant_name((zt_quant)c->lora.base_quant);
        if (c->lora.rank == 0) {
            w = LOC("lora.base_quant", "lora.rank");
            zt_cfg_error(x, "%s%slora.base_quant: %s quantizes the frozen base under LoRA adapters, but lora.rank "
                            "is 0 (no LoRA): give lora.rank >= 1, or lora.base_quant none", PFX(w), q);
        } else if (c->pipeline_parallel_size > 1) {
            w = LOC("lora.base_quant", "parallel.pipeline_parallel_size");
            zt_cfg_error(x, "%s%slora.base_quant: %s is not cut into pipeline stages yet: "
                            "parallel.pipeline_parallel_size %d; use 1, or lora.base_quant none", PFX(w), q,
                         c->pipeline_parallel_size);
        }
    }
    if (c->ckpt_every > 0 && !c->ckpt_dir[0]) {
        w = LOC("checkpoint.every", "checkpoint.dir");
        zt_cfg_error(x, "%s%scheckpoint.every: %d needs checkpoint.dir", PFX(w), c->ckpt_every);
    }
}

static void collect_error(void *ctx, zt_config_level level, const char *text) {
    if (level == ZT_CONFIG_ERROR) zt_cfg_error((cfg_ctx *)ctx, "%s", text);
}

int zt_train_config_validate(const zt_train_config *c, zt_error *err) {
    if (!c) return zt_error_set(err, ZT_ERR_USAGE, "train config: NULL configuration");
    cfg_ctx x;
    zt_cfg_ctx_init(&x, (zt_train_config *)c); /* read only below */
    char why[512], where[ZT_CONFIG_SOURCE_MAX];
    for (int i = 0; i < zt_cfg_n_keys; i++) {
        if (zt_cfg_check_field(c, &zt_cfg_keys[i], why, sizeof why) != 0) {
            const char *w = loc_of(c, i, NULL, where, sizeof where);
            zt_cfg_error(&x, "%s%s%s: %s", PFX(w), zt_cfg_keys[i].key, why);
            x.bad[i] = true;
        }
    }
    if (!x.bad[zt_cfg_key_index("data.train")] && c->train_path[0] == '\0')
        zt_cfg_error(&x, "data.train: missing: set the training token file (data: train: PATH, or "
                         "--set data.train=PATH)");
    zt_cfg_check_invariants(&x);
    if (c->micro_batch == 0 || c->grad_accum == 0) {
        const char *key = c->micro_batch == 0 ? "training.micro_batch_size"
                                              : "training.gradient_accumulation_steps";
        if (c->global_batch > 0 && c->micro_batch + c->grad_accum > 0)
            zt_cfg_error(&x, "%s: derived from training.global_batch_size at launch, and not "
                             "resolved yet: call zt_train_config_validate_world first",
                         key);
    }
    zt_cfg_support_check(c, collect_error, &x);
    int rc = zt_cfg_finish(&x, err);
    zt_cfg_ctx_free(&x);
    return rc;
}

/* "4 (ds.json:3:3 deepspeed train_micro_batch_size_per_gpu=4)" */
static void value_and_source(const zt_train_config *c, const char *key, char *out, size_t cap) {
    int ki = zt_cfg_key_index(key);
    char v[64];
    zt_cfg_format(c, &zt_cfg_keys[ki], v, sizeof v);
    const zt_config_source *s = &c->source[ki];
    if (s->text[0])
        snprintf(out, cap, "%s %s (%s)", key, v, s->text);
    else
        snprintf(out, cap, "%s %s (default)", key, v);
}

int zt_train_config_default_shard(const zt_train_config *c, int world, const char **from) {
    int node = zt_launcher_default_shard_size(world, from);
    int cp = c->context_parallel_size > 1 ? c->context_parallel_size : 1;
    int per = c->tensor_parallel_size * cp * c->pipeline_parallel_size;
    return per > 1 && node % per == 0 ? node / per : node; /* not a multiple: refused at launch */
}

int zt_train_config_validate_world(zt_train_config *c, int world, zt_error *err) {
    if (!c) return zt_error_set(err, ZT_ERR_USAGE, "train config: NULL configuration");
    if (world < 1)
        return zt_error_set(err, ZT_ERR_USAGE, "world size %d: expected at least 1 rank", world);
    cfg_ctx x;
    zt_train_config *tmp = malloc(sizeof *tmp);
    if (!tmp) return zt_error_set(err, ZT_ERR_NOMEM, "configuration: out of memory");
    *tmp = *c;
    zt_cfg_ctx_init(&x, tmp);
    char a[400], b[400], g[400], where[ZT_CONFIG_SOURCE_MAX], desc[160];
    /* the batch is split over the data-parallel ranks: world / (tp x cp x pp) (src/comm/mesh.h; the
     * context-parallel ranks of a data-parallel rank read the same samples) */
    int cp = tmp->context_parallel_size > 1 ? tmp->context_parallel_size : 1;
    int64_t tpp = (int64_t)tmp->tensor_parallel_size * cp * tmp->pipeline_parallel_size;
    const char *wname = tpp > 1 ? "data-parallel size" : "world size";
    if (tpp > 1 && world % tpp != 0) {
        const char *wt = loc2(tmp, "parallel.tensor_parallel_size", "parallel.pipeline_parallel_size", NULL,
                              where, sizeof where);
        char cps[64] = "";
        if (cp > 1) snprintf(cps, sizeof cps, " x parallel.context_parallel_size %d", cp);
        zt_cfg_error(&x, "%s%sparallel.tensor_parallel_size: %d%s x parallel.pipeline_parallel_size %d = %lld does "
                     "not divide the world size %d", PFX(wt), tmp->tensor_parallel_size, cps,
                     tmp->pipeline_parallel_size, (long long)tpp, world);
        int rc = zt_cfg_finish(&x, err);
        zt_cfg_ctx_free(&x);
        free(tmp);
        return rc;
    }
    world = (int)(world / tpp);
    int ep = tmp->expert_parallel_size > 1 ? tmp->expert_parallel_size : 1;
    if (ep > 1 && ((int64_t)world * cp) % ep != 0) { /* the ep groups divide the data-parallel ranks (mesh.h) */
        const char *we = loc2(tmp, "parallel.expert_parallel_size", "parallel.tensor_parallel_size", NULL, where,
                              sizeof where);
        zt_cfg_error(&x, "%s%sparallel.expert_parallel_size: %d does not divide the data-parallel ranks %lld (world %lld "
                     "/ (parallel.tensor_parallel_size %d x parallel.pipeline_parallel_size %d))", PFX(we), ep,
                     (long long)world * cp, (long long)world * tpp, tmp->tensor_parallel_size,
                     tmp->pipeline_parallel_size);
    }
    int kmb = zt_cfg_key_index("training.micro_batch_size");
    int kga = zt_cfg_key_index("training.gradient_accumulation_steps");
    int kgb = zt_cfg_key_index("training.global_batch_size");
    const char *w = loc_of(tmp, kgb, NULL, where, sizeof where);
    if (tmp->global_batch > 0 && (tmp->micro_batch == 0) != (tmp->grad_accum == 0)) {
        /* DeepSpeed's rule: the missing one is global / (other x world), exactly */
        bool derive_mb = tmp->micro_batch == 0;
        int other = derive_mb ? tmp->grad_accum : tmp->micro_batch;
        int64_t denom = (int64_t)other * world;
        value_and_source(tmp, derive_mb ? "training.gradient_accumulation_steps"
                                        : "training.micro_batch_size", a, sizeof a);
        value_and_source(tmp, "training.global_batch_size", g, sizeof g);
        int64_t q = denom > 0 ? tmp->global_batch / denom : 0;
        int key = derive_mb ? kmb : kga;
        int64_t hi = zt_cfg_keys[key].imax;
        if (denom <= 0 || tmp->global_batch % denom != 0 || q < 1 || q > hi) {
            zt_cfg_error(&x, "%s%s%s: cannot be derived: %s is not a multiple of %s x %s %d",
                         PFX(w), zt_cfg_keys[key].key, g, a, wname, world);
        } else {
            if (derive_mb)
                tmp->micro_batch = (int)q;
            else
                tmp->grad_accum = (int)q;
            snprintf(desc, sizeof desc, "global_batch_size %d / (%s %d x %s %d)",
                     tmp->global_batch, derive_mb ? "gradient_accumulation_steps" : "micro_batch_size",
                     other, wname, world);
            zt_cfg_set_source(tmp, key, ZT_ORIGIN_LAUNCH, NULL, desc);
        }
    }
    if (tmp->global_batch > 0 && tmp->micro_batch > 0 && tmp->grad_accum > 0 &&
        (int64_t)tmp->micro_batch * tmp->grad_accum * world != tmp->global_batch) {
        value_and_source(tmp, "training.global_batch_size", g, sizeof g);
        value_and_source(tmp, "training.micro_batch_size", a, sizeof a);
        value_and_source(tmp, "training.gradient_accumulation_steps", b, sizeof b);
        zt_cfg_error(&x, "%s%straining.global_batch_size: micro x accumulation x %s != global "
                         "batch: %d x %d x %d = %lld, expected %d; %s; %s; %s",
                     PFX(w), tpp > 1 ? "data-parallel size" : "world", tmp->micro_batch, tmp->grad_accum, world,
                     (long long)tmp->micro_batch * tmp->grad_accum * world, tmp->global_batch, g, a,
                     b);
    }
    if (tmp->strategy == ZT_STRATEGY_HYBRID) {
        int ks = zt_cfg_key_index("parallel.hybrid_shard_size");
        int kr = zt_cfg_key_index("parallel.hybrid_replicas");
        const char *from = "";
        int s = tmp->hybrid_shard_size > 0 ? tmp->hybrid_shard_size
                                           : zt_train_config_default_shard(tmp, (int)(world * tpp), &from);
        if (s < 1 || world % s != 0) {
            w = loc_of(tmp, ks, NULL, where, sizeof where);
            zt_cfg_error(&x, "%s%sparallel.hybrid_shard_size: %d%s%s does not divide the %s %d",
                         PFX(w), s, *from ? " (0: ranks per node from " : "", *from ? from : "", wname, world);
        } else if (tmp->hybrid_replicas > 0 && tmp->hybrid_replicas * s != world) {
            w = loc_of(tmp, kr, NULL, where, sizeof where);
            zt_cfg_error(&x, "%s%sparallel.hybrid_replicas: %d replicas x shard size %d = %d ranks, "
                             "but the %s is %d",
                         PFX(w), tmp->hybrid_replicas, s, tmp->hybrid_replicas * s, wname, world);
        }
    }
    int rc = zt_cfg_finish(&x, err);
    zt_cfg_ctx_free(&x);
    if (rc == ZT_OK) *c = *tmp;
    free(tmp);
    return rc;
}

