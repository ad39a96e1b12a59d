/* cmd_train.c - `zerotrain train CONFIG [--nproc N] [--set key=value ...] [--save W.ztw]
 * [--init W.ztw] [--init-hf DIR] [--init-peft DIR]`: with N > 1 local ranks (or parallel.nproc in the config) it re-executes itself
 * under mpirun; started by mpirun or srun it joins the world and trains as one rank. */
#include "core/env.h"
#include "cli/commands.h"
#include "cli/launch.h"
#include "ckpt/hf.h"
#include "ckpt/peft.h"
#include "comm/build_id.h"
#include "comm/comm.h"
#include "core/fault.h"
#include "core/stop.h"
#include "train/trainer.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Options that take a value; --set may repeat and is applied in order after the file. */
typedef struct value_opt {
    const char *name, *help;
    const char *value;
    bool is_count; /* a positive integer */
} value_opt;

enum { O_SET, O_SAVE, O_INIT, O_INIT_HF, O_INIT_PEFT, O_NPROC, O_CKPT_DIR, O_CKPT_EVERY, O_KEEP_LAST, O_CKPT_ASYNC, O_RESUME,
       O_STOP_AFTER, O_TRACE, O_COMM_LOG, O_MAX_RESTARTS, O_MIN_NPROC, O_HOSTFILE, O_MPIRUN_ARGS, O_COUNT };

static int count_value(const value_opt *o, int64_t *out, zt_error *err) {
    char *end;
    long long n = strtoll(o->value, &end, 10);
    if (*end || end == o->value || n < 0)
        return zt_error_set(err, ZT_ERR_USAGE, "train: %s wants a non-negative integer, got \"%s\"", o->name, o->value);
    *out = n;
    return ZT_OK;
}

static void print_warning(void *f, zt_config_level level, const char *text) {
    if (level == ZT_CONFIG_WARNING) fprintf(f, "zerotrain: warning: %s\n", text); /* notes: `zerotrain config` */
}

/* After a failure: the other ranks would wait for this one in their next collective (or in
 * MPI_Finalize), so a multi-rank job ends as a whole with this exit code. */
static int end_job(zt_comm *world, const zt_error *err) {
    int code = zt_cli_fail(err);
    /* the launcher's record of why (launch.h): mpirun's own status may say something else */
    if (world) zt_launch_record_exit(zt_comm_rank(world), code, err->msg);
    if (world && zt_comm_size(world) > 1) zt_comm_abort(code);
    zt_error ignore;
    zt_comm_free(world);
    if (world) zt_comm_finalize(&ignore);
    return code;
}

/* Every rank must have resolved the same configuration (the same file and --set everywhere):
 * ZT_ERR_MISMATCH naming the ranks whose hash differs from rank 0's. */
static int same_config_everywhere(const zt_train_config *cfg, zt_comm *world, zt_error *err) {
    int n = zt_comm_size(world);
    uint64_t h = zt_train_config_hash(cfg);
    double mine, *all = calloc((size_t)n, sizeof *all);
    if (!all) return zt_error_set(err, ZT_ERR_NOMEM, "train: out of memory");
    memcpy(&mine, &h, 8); /* the hash travels as 8 raw bytes */
    int rc = zt_all_gather_f64(world, &mine, all, 1, "config hash", err);
    char ranks[256] = "";
    size_t used = 0;
    for (int r = 1; r < n && !rc; r++)
        if (memcmp(&all[r], &all[0], 8) != 0 && used + 12 < sizeof ranks)
            used += (size_t)snprintf(ranks + used, sizeof ranks - used, "%s%d", used ? ", " : "", r);
    free(all);
    if (!rc && used)
        rc = zt_error_set(err, ZT_ERR_MISMATCH, "the ranks resolved different configurations: rank(s) %s differ "
                          "from rank 0 (same file and --set on every rank?)", ranks);
    return rc;
}

/* key=path through the key table (--init-hf, --init-peft) */
static int set_path_key(zt_train_config *cfg, const char *key, const char *path, zt_error *err) {
    char kv[ZT_PATH_MAX + 32];
    if (snprintf(kv, sizeof kv, "%s=%s", key, path) >= (int)sizeof kv)
        return zt_error_set(err, ZT_ERR_USAGE, "train: %s: path too long", key);
    return zt_train_config_set(cfg, kv, err);
}

/* model.init_hf: the model shape is the directory's config.json (either family), set through the
 * key table so ranges and invariants still apply. */
static int hf_shape(zt_train_config *cfg, zt_error *err) {
    zt_hf_model_config hc;
    int rc = zt_hf_read_config(cfg->init_hf, &hc, err);
    if (rc) return rc;
    bool llama = strcmp(hc.arch->model_type, "gpt2") != 0;
    const zt_hf_llama_config *l = &hc.llama;
    char kv[32][96];
    int n = 0;
#define KV(...) snprintf(kv[n++], sizeof kv[0], __VA_ARGS__)
    if (llama) {
        KV("model.preset=llama-tiny"); /* the family; every shape key follows */
        KV("model.n_layer=%d", l->num_hidden_layers);
        KV("model.n_head=%d", l->num_attention_heads);
        KV("model.n_embd=%d", l->hidden_size);
        KV("model.vocab_size=%d", l->vocab_size);
        KV("model.max_seq_len=%d", l->max_position_embeddings);
        KV("model.n_kv_head=%d", l->num_key_value_heads);
        KV("model.intermediate_size=%d", l->intermediate_size);
        KV("model.rope_theta=%.9g", l->rope_theta);
        KV("model.rms_norm_eps=%.9g", l->rms_norm_eps);
        KV("model.tie_embeddings=%s", l->tie_word_embeddings ? "true" : "false");
        KV("model.attention_qkv_bias=%s", l->qkv_bias ? "true" : "false"); /* Qwen2's, Qwen2-MoE's */
        KV("model.rope_scaling.factor=%.9g", l->rope_scaling_type[0] ? l->rope_factor : 0.0);
        if (l->rope_scaling_type[0]) {
            KV("model.rope_scaling.low_freq_factor=%.9g", l->rope_low_freq_factor);
            KV("model.rope_scaling.high_freq_factor=%.9g", l->rope_high_freq_factor);
            KV("model.rope_scaling.original_max_position_embeddings=%d", l->rope_original_max_position_embeddings);
        }
        if (l->num_local_experts > 0) { /* Mixtral, Qwen2-MoE */
            KV("model.n_experts=%d", l->num_local_experts);
            KV("model.n_experts_per_token=%d", l->num_experts_per_tok);
            KV("model.norm_topk_prob=%s", l->norm_topk_prob ? "true" : "false");
            KV("model.router_aux_loss_coef=%.9g", l->router_aux_loss_coef);
            KV("model.moe_intermediate_size=%d", l->moe_intermediate_size);
        }
        if (l->shared_expert_intermediate_size > 0) { /* Qwen2-MoE's gated shared expert */
            KV("model.shared_expert_intermediate_size=%d", l->shared_expert_intermediate_size);
            KV("model.shared_expert_gate=true");
        }
    } else {
        KV("model.n_layer=%d", hc.gpt2.n_layer);
        KV("model.n_head=%d", hc.gpt2.n_head);
        KV("model.n_embd=%d", hc.gpt2.n_embd);
        KV("model.vocab_size=%d", hc.gpt2.vocab_size);
        KV("model.max_seq_len=%d", hc.gpt2.max_seq_len);
    }
#undef KV
    for (int i = 0; i < n && !rc; i++) rc = zt_train_config_set(cfg, kv[i], err);
    if (rc) zt_error_prefix(err, "%s/config.json", cfg->init_hf);
    return rc;
}

/* lora.init_peft: the LoRA settings are the adapters' (adapter_config.json), set through the key
 * table; a configuration that asks for other adapters is refused rather than overridden, and a
 * lora.dropout the user set is kept (a training setting, not the adapters') */
static int peft_settings(zt_train_config *cfg, zt_error *err) {
    zt_lora_config l;
    int rc = zt_peft_read_config(cfg->lora_init_peft, &l, err);
    if (rc) return rc;
    const zt_lora_config *c = &cfg->lora;
    const char *key = zt_train_config_is_set(cfg, "lora.rank") && c->rank != l.rank     ? "lora.rank"
                      : zt_train_config_is_set(cfg, "lora.alpha") && c->alpha != l.alpha ? "lora.alpha"
                      : zt_train_config_is_set(cfg, "lora.target_modules") && strcmp(c->target_modules, l.target_modules)
                          ? "lora.target_modules"
                          : NULL;
    if (key)
        return zt_error_set(err, ZT_ERR_USAGE, "%s asks for other adapters than %s/adapter_config.json's (r %d, "
                            "lora_alpha %g, target_modules '%s'): leave it out, or start new adapters without "
                            "lora.init_peft", key, cfg->lora_init_peft, l.rank, (double)l.alpha, l.target_modules);
    char kv[4][600];
    int n = 0;
    snprintf(kv[n++], sizeof kv[0], "lora.rank=%d", l.rank);
    snprintf(kv[n++], sizeof kv[0], "lora.alpha=%.9g", (double)l.alpha);
    if (!zt_train_config_is_set(cfg, "lora.dropout")) snprintf(kv[n++], sizeof kv[0], "lora.dropout=%.9g", (double)l.dropout);
    if (l.target_modules[0]) snprintf(kv[n++], sizeof kv[0], "lora.target_modules=%s", l.target_modules);
    for (int i = 0; i < n && !rc; i++) rc = zt_train_config_set(cfg, kv[i], err);
    if (rc) zt_error_prefix(err, "%s/adapter_config.json", cfg->lora_init_peft);
    return rc;
}

int zt_cmd_train(int argc, char **argv) {
    zt_error err = {0};
    value_opt opt[O_COUNT] = {
        [O_SET] = {"--set", "override one config key, e.g. --set training.steps=10 (repeatable)"},
        [O_SAVE] = {"--save", "write the final parameters to a weights file (for `zerotrain sample`)"},
        [O_INIT] = {"--init", "start from weights (.ztw, Hugging Face GPT-2 .safetensors, or a .gguf of "
                              "f32/f16/bf16/q8_0/q4_0: docs/gguf.md)"},
        [O_INIT_HF] = {"--init-hf", "start from a Hugging Face model directory (model.init_hf; its "
                                    "config.json sets the model shape)"},
        [O_INIT_PEFT] = {"--init-peft", "start LoRA from a PEFT adapter directory (lora.init_peft; its "
                                        "adapter_config.json sets lora.*), on --init-hf's base"},
        [O_NPROC] = {"--nproc", "start N local ranks through mpirun (parallel.nproc)", NULL, true},
        [O_CKPT_DIR] = {"--ckpt-dir", "write sharded checkpoints to DIR/step-N (docs/checkpoints.md)"},
        [O_CKPT_EVERY] = {"--ckpt-every", "checkpoint every N steps (and always at the end)", NULL, true},
        [O_KEEP_LAST] = {"--keep-last", "keep only the newest K checkpoints", NULL, true},
        [O_CKPT_ASYNC] = {"--ckpt-async", "1: snapshot, write in the background, commit at the next step",
                          NULL, true},
        [O_RESUME] = {"--resume", "resume from a checkpoint (DIR: its newest valid commit)"},
        [O_STOP_AFTER] = {"--stop-after", "stop after step N (as if preempted; the schedule still "
                                          "spans training.steps)", NULL, true},
        [O_TRACE] = {"--trace", "write a Chrome/Perfetto timeline: OUT.rankN.json per rank, merged into OUT"},
        [O_MAX_RESTARTS] = {"--max-restarts", "--nproc: start the job again up to N times after a lost rank or "
                                              "a deadline (exit 5), resuming from the checkpoint directory",
                            NULL, true},
        [O_MIN_NPROC] = {"--min-nproc", "--max-restarts: a rank lost in two attempts in a row lets the job go on "
                                        "with as few as M ranks, the global batch unchanged (elastic)", NULL, true},
        [O_HOSTFILE] = {"--hostfile", "--nproc: start the ranks on the hosts a hostfile lists (mpirun --hostfile; "
                                      "host slots=K per line), supervised as local ranks are"},
        [O_MPIRUN_ARGS] = {"--mpirun-args", "--nproc: more mpirun options, one string split at spaces (e.g. \"--mca "
                                            "btl_tcp_if_include eth0\")"},
        [O_COMM_LOG] = {"--comm-log", "1: print the collectives by size class at the end (comms_logger)",
                        NULL, true},
    };
    const char *config = NULL;
    bool allow_cast = false; /* --allow-cast: checkpoint.allow_cast=true after the file and --set */
    static zt_train_config cfg; /* large (paths): keep it off the stack */
    zt_train_config_default(&cfg);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            printf("usage: zerotrain train CONFIG [options]\n  CONFIG          native YAML (docs/config-train.md)\n");
            for (int k = 0; k < O_COUNT; k++) printf("  %-14s  %s\n", opt[k].name, opt[k].help);
            printf("  %-14s  %s\n", "--allow-cast", "resume a checkpoint whose fp32 values this precision rounds "
                   "(bf16-low), rounding them (checkpoint.allow_cast)");
            return 0;
        }
        if (!strcmp(a, "--allow-cast")) {
            allow_cast = true;
            continue;
        }
        int k = 0;
        while (k < O_COUNT && strcmp(a, opt[k].name) != 0) k++;
        if (k < O_COUNT) {
            if (i + 1 >= argc) {
                zt_error_set(&err, ZT_ERR_USAGE, "train: %s needs a value", a);
                return zt_cli_fail(&err);
            }
            opt[k].value = argv[++i]; /* --set: validated in order below */
        } else if (a[0] == '-') {
            zt_error_set(&err, ZT_ERR_USAGE, "train: unknown option %s (see zerotrain train --help)", a);
            return zt_cli_fail(&err);
        } else if (config) {
            zt_error_set(&err, ZT_ERR_USAGE, "train: more than one CONFIG (%s, %s)", config, a);
            return zt_cli_fail(&err);
        } else {
            config = a;
        }
    }
    if (!config) {
        zt_error_set(&err, ZT_ERR_USAGE, "train: missing CONFIG (usage: zerotrain train CONFIG)");
        return zt_cli_fail(&err);
    }
    if (zt_train_config_load(&cfg, config, &err)) return zt_cli_fail(&err);
    for (int i = 1; i < argc; i++) /* the file first, then every --set in order */
        if (!strcmp(argv[i], "--set") && i + 1 < argc && zt_train_config_set(&cfg, argv[++i], &err))
            return zt_cli_fail(&err);
    if (allow_cast && zt_train_config_set(&cfg, "checkpoint.allow_cast=true", &err)) return zt_cli_fail(&err);
    if (opt[O_INIT_HF].value && set_path_key(&cfg, "model.init_hf", opt[O_INIT_HF].value, &err))
        return zt_cli_fail(&err);
    if (cfg.init_hf[0] && hf_shape(&cfg, &err)) return zt_cli_fail(&err);
    if (opt[O_INIT_PEFT].value && set_path_key(&cfg, "lora.init_peft", opt[O_INIT_PEFT].value, &err))
        return zt_cli_fail(&err);
    if (cfg.lora_init_peft[0] && peft_settings(&cfg, &err)) return zt_cli_fail(&err);
    int64_t counts[O_COUNT] = {0};
    for (int k = 0; k < O_COUNT; k++)
        if (opt[k].is_count && opt[k].value && count_value(&opt[k], &counts[k], &err)) return zt_cli_fail(&err);
    if (opt[O_NPROC].value) {
        if (counts[O_NPROC] < 1 || counts[O_NPROC] > 4096) {
            zt_error_set(&err, ZT_ERR_USAGE, "train: --nproc wants a rank count in [1, 4096], got %s", opt[O_NPROC].value);
            return zt_cli_fail(&err);
        }
        cfg.nproc = (int)counts[O_NPROC];
    }
    /* check everything that can be checked before any rank starts: with the launcher's world
     * size here, and again in every rank with the real one */
    bool under_mpi = zt_launched_by_mpi();
    if (!under_mpi && cfg.nproc <= 1 && (opt[O_HOSTFILE].value || opt[O_MPIRUN_ARGS].value)) {
        zt_error_set(&err, ZT_ERR_USAGE, "train: %s goes with --nproc N (N > 1: the launcher starts the ranks)",
                     opt[O_HOSTFILE].value ? "--hostfile" : "--mpirun-args");
        return zt_cli_fail(&err);
    }
    if (!under_mpi && (zt_train_config_validate_world(&cfg, cfg.nproc, &err) || zt_train_config_validate(&cfg, &err)))
        return zt_cli_fail(&err);
    signal(SIGXFSZ, SIG_IGN); /* a file-size limit is a write error (EFBIG, exit 8), not a death */
    zt_comm *world = NULL;
    if (under_mpi) {
        if (zt_comm_init(NULL, NULL, &world, &err)) return zt_cli_fail(&err);
    } else if (cfg.nproc > 1) {
        zt_train_config_notes(&cfg, print_warning, stderr); /* once, before the ranks start */
        /* argv here starts at "train"; mpirun runs `<self> train ...` with the same arguments */
        zt_launch_policy pol = {.grace_s = cfg.fault_grace_s, .teardown_s = cfg.fault_teardown_s, .max_restarts = (int)counts[O_MAX_RESTARTS],
                                .ckpt_dir = opt[O_CKPT_DIR].value ? opt[O_CKPT_DIR].value : cfg.ckpt_dir,
                                .min_nproc = (int)counts[O_MIN_NPROC], .grad_accum = cfg.grad_accum,
                                .hostfile = opt[O_HOSTFILE].value, .mpirun_args = opt[O_MPIRUN_ARGS].value};
        int code = zt_launch_local(cfg.nproc, &pol, argc, argv, &err);
        return code < 0 ? zt_cli_fail(&err) : code;
    }
    int rank = world ? zt_comm_rank(world) : 0;
    int rc = zt_train_config_validate_world(&cfg, world ? zt_comm_size(world) : 1, &err);
    if (!rc) rc = zt_train_config_validate(&cfg, &err);
    if (!rc && world) rc = zt_build_id_check(world, &err); /* the same build first: it explains the rest */
    if (!rc && world) rc = same_config_everywhere(&cfg, world, &err);
    if (!rc) rc = zt_fault_init(rank, &err); /* ZT_FAULT: inert unless set (core/fault.h) */
    if (rc) return end_job(world, &err);
    zt_stop_install(); /* SIGTERM/SIGINT: stop at the next step boundary, saved (docs/reliability.md) */
    zt_launch_register_rank(rank); /* the launcher forwards signals to this pid */
    /* a job started by the launcher printed the warnings already */
    if (rank == 0 && !zt_env(ZT_ENV_LAUNCHED)) zt_train_config_notes(&cfg, print_warning, stderr);
    /* the command line wins over the configuration's checkpoint and logging keys */
    zt_train_options opts = {.out = stdout, .world = world, .save_path = opt[O_SAVE].value,
                             .init_weights = opt[O_INIT].value,
                             .ckpt_dir = opt[O_CKPT_DIR].value ? opt[O_CKPT_DIR].value
                                                               : (cfg.ckpt_dir[0] ? cfg.ckpt_dir : NULL),
                             .ckpt_every = opt[O_CKPT_EVERY].value ? counts[O_CKPT_EVERY] : cfg.ckpt_every,
                             .keep_last = opt[O_KEEP_LAST].value ? (int)counts[O_KEEP_LAST] : cfg.ckpt_keep_last,
                             .ckpt_async = counts[O_CKPT_ASYNC] != 0,
                             .resume = opt[O_RESUME].value, .stop_after = counts[O_STOP_AFTER],
                             .trace_path = opt[O_TRACE].value,
                             .comm_log = opt[O_COMM_LOG].value ? counts[O_COMM_LOG] != 0 : cfg.comms_log};
    zt_train_result res = {0};
    rc = zt_train(&cfg, &opts, &res, &err);
    if (rc) return end_job(world, &err);
    zt_comm_free(world);
    if (world && zt_comm_finalize(&err)) return zt_cli_fail(&err);
    return res.stop_signal ? ZT_EXIT_STOPPED : 0;
}
