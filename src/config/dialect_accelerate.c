/* dialect_accelerate.c - Hugging Face Accelerate's config YAML (what `accelerate config` writes:
 * commands/config/config_args.py ClusterConfig; the deepspeed_config and fsdp_config blocks as
 * launch.py and utils/dataclasses.py read them) into the native configuration.
 *
 * The headline: a DEEPSPEED file and an FSDP file that differ in two lines (distributed_type, and
 * zero_stage: 3 / fsdp_sharding_strategy: FULL_SHARD) resolve to the same native configuration,
 * so they train bit-identically (examples/accelerate_*.yaml, tests/config_dialects.sh).
 *
 * One row per key in dialect_accelerate.def, applied by the interpreter in dialect_common.c;
 * this file holds what rows cannot say: distributed_type choosing the block to read, the rank
 * counts, the sharding strategy from FSDP1/FSDP2 keys and the parallelism mesh, prefetch from
 * three keys, mixed_precision, and a deepspeed_config_file read as a DeepSpeed config.
 *
 * Rules (docs/config.md says them to users):
 *   - only the block distributed_type selects is read (Accelerate ignores the other one too);
 *   - an unknown top-level key is an error, as Accelerate's ClusterConfig raises on it; inside
 *     the blocks one close to no known key is a warning and ignored;
 *   - Accelerate's precision alignment: mixed_precision bf16/fp16 keeps fp32 master weights for
 *     DeepSpeed and FSDP alike (accelerate#2624, fixed in 0.30 by upcasting FSDP's trainable
 *     parameters), which is zerotrain's precision.mode bf16 / fp16 either way; both reduce
 *     gradients in that dtype (precision.reduce_dtype, resolve_precision says why);
 *   - with deepspeed_config_file, the YAML keys Accelerate rejects next to it (gradient
 *     accumulation, clipping, zero_stage, offload devices and paths, zero3_save_16bit_model,
 *     mixed_precision) are errors here too, and the JSON is read as a DeepSpeed config;
 *   - FSDP2's fsdp_reshard_after_forward: false is zero3 with parallel.reshard_after_forward false
 *     (sharded between steps, kept from forward to backward: exactly FSDP2's behaviour); FSDP1's
 *     SHARD_GRAD_OP is zero2. The results are identical either way. */
#include "config/config_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---------------------------------------------------------------------------------------------
 * The rows: dialect_accelerate.def, one per Accelerate key (config_internal.h says what each
 * column and kind means; dialect_common.c applies them). */

#define BLOCK (A_MAP | A_NULL)
#define DEVICES "none=none,cpu=cpu,nvme=nvme,null=none"

static const dialect_row ROWS[] = {
#include "config/dialect_accelerate.def"
};

const dialect_row *zt_cfg_accelerate_rows(int *n) {
    *n = (int)(sizeof ROWS / sizeof ROWS[0]);
    return ROWS;
}

/* ---------------------------------------------------------------------------------------------
 * Resolution. */

/* mixed_precision: the mode, and for FSDP and DeepSpeed the reduction dtype their runs get.
 * Accelerate's FSDP plugin builds MixedPrecision(param_dtype=dtype, reduce_dtype=dtype, ...) from
 * mixed_precision (src/accelerate/utils/dataclasses.py, FullyShardedDataParallelPlugin.
 * set_mixed_precision: dtype_args = {"param_dtype": dtype, "reduce_dtype": dtype}), and the
 * DeepSpeed config it writes leaves communication_data_type unset, which DeepSpeed's engine reads
 * as the training dtype (runtime/engine.py, communication_data_type): bf16 reduces gradients in
 * bf16 and fp16 in fp16 under both, so the DEEPSPEED and FSDP files still resolve alike. */
static void resolve_precision(dctx *d, bool ds_file, bool sharded) {
    const cfg_node *mp = zt_cfg_seen(d, "mixed_precision");
    if (!mp || mp->kind == CN_NULL) return;
    if (ds_file) return; /* an error already */
    const char *v = mp->kind == CN_BOOL ? (mp->b ? "?" : "no") : mp->text;
    if (!strcasecmp(v, "no"))
        zt_cfg_map(d, mp, "mixed_precision", "precision.mode", "fp32");
    else if (!strcasecmp(v, "bf16") || !strcasecmp(v, "fp16")) {
        zt_cfg_map(d, mp, "mixed_precision", "precision.mode", v);
        const char *dt = !strcasecmp(v, "bf16") ? "bf16" : "fp16";
        if (sharded) zt_cfg_map(d, mp, "mixed_precision", "precision.reduce_dtype", dt);
        zt_cfg_dnote(d, ZT_CONFIG_NOTE, mp, "mixed_precision",
                     "%s with fp32 master weights for DeepSpeed and FSDP alike (Accelerate's "
                     "alignment, accelerate#2624)%s%s%s",
                     v, sharded ? "; gradients reduced in " : "", sharded ? dt : "",
                     sharded ? ", as Accelerate's FSDP (reduce_dtype) and DeepSpeed (communication_data_type) do"
                             : "");
    } else if (!strcasecmp(v, "fp8"))
        zt_cfg_derror(d, mp, "mixed_precision", "fp8 is not supported (no, bf16 or fp16)");
    else {
        char s[100];
        zt_cfg_node_show(mp, s, sizeof s);
        zt_cfg_derror(d, mp, "mixed_precision", "expected no, bf16 or fp16 (or fp8), got %s", s);
    }
}

static void resolve_deepspeed(dctx *d) {
    static const char *const REJECTED[] = {
        "deepspeed_config.gradient_accumulation_steps", "deepspeed_config.gradient_clipping",
        "deepspeed_config.zero_stage", "deepspeed_config.offload_optimizer_device",
        "deepspeed_config.offload_param_device", "deepspeed_config.offload_param_nvme_path",
        "deepspeed_config.offload_optimizer_nvme_path", "deepspeed_config.zero3_save_16bit_model"};
    const cfg_node *file = zt_cfg_seen(d, "deepspeed_config.deepspeed_config_file");
    for (size_t i = 0; i < sizeof REJECTED / sizeof REJECTED[0]; i++) {
        const cfg_node *n = zt_cfg_seen(d, REJECTED[i]);
        if (!n) continue;
        if (file)
            zt_cfg_derror(d, n, REJECTED[i],
                          "cannot be combined with deepspeed_config_file (Accelerate raises a "
                          "ValueError too): set it in the DeepSpeed file");
    }
    const cfg_node *mp = zt_cfg_seen(d, "mixed_precision");
    if (file && mp && mp->kind != CN_NULL)
        zt_cfg_derror(d, mp, "mixed_precision",
                      "cannot be combined with deepspeed_config_file (Accelerate raises a "
                      "ValueError too): enable bf16 or fp16 in the DeepSpeed file");
    if (file) {
        if (d->x->n_errors) return;
        char path[ZT_PATH_MAX + 64], w[ZT_PATH_MAX + 32];
        zt_cfg_relative_to(d->file, file->text, path, sizeof path);
        FILE *probe = fopen(path, "rb");
        if (probe)
            fclose(probe);
        else
            snprintf(path, sizeof path, "%s", file->text); /* Accelerate's rule: the working directory */
        size_t len = 0;
        cfg_ctx sub;
        zt_cfg_ctx_init(&sub, NULL);
        char *text = zt_cfg_read_file(&sub, path, &len);
        zt_cfg_where(d, file, false, w, sizeof w);
        if (!text) {
            for (int i = 0; i < sub.n_errors; i++)
                zt_cfg_error(d->x, "%s: deepspeed_config.deepspeed_config_file: %s", w, sub.errors[i]);
            if (sub.nomem) d->x->nomem = true;
            zt_cfg_ctx_free(&sub);
            return;
        }
        zt_cfg_ctx_free(&sub);
        zt_cfg_note(d->x, ZT_CONFIG_NOTE, "%s: deepspeed_config.deepspeed_config_file: %s read as a "
                                          "DeepSpeed config",
                    w, path);
        d->x->depth++;
        zt_cfg_read_deepspeed(d->x, text, len, path);
        d->x->depth--;
        free(text);
        return;
    }
    /* DeepSpeedPlugin without a file: its defaults are stage 2 and "auto" elsewhere */
    const cfg_node *st = zt_cfg_seen(d, "deepspeed_config.zero_stage");
    static const char *const NAMES[] = {"ddp", "zero1", "zero2", "zero3"};
    int64_t stage = 2;
    if (st) {
        if (zt_cfg_get_int(d, st, "deepspeed_config.zero_stage", 0, 3, &stage))
            zt_cfg_map(d, st, "deepspeed_config.zero_stage", "parallel.strategy", NAMES[stage]);
    } else {
        int ki = zt_cfg_key_index("parallel.strategy");
        if (!d->x->native_set[ki])
            zt_cfg_apply_str(d->x, "parallel.strategy", "zero2", ZT_ORIGIN_DIALECT, d->file,
                             "accelerate default: deepspeed_config.zero_stage absent: 2",
                             "deepspeed_config.zero_stage");
    }
}

/* FSDP1 sharding strategies by name or number (FSDP_SHARDING_STRATEGY order, 1-based). */
static int sharding_of(const cfg_node *n) {
    static const char *const NAMES[] = {"FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "HYBRID_SHARD",
                                        "HYBRID_SHARD_ZERO2"};
    if (n->kind == CN_NUM && n->num >= 1 && n->num <= 5 && n->num == floor(n->num)) return (int)n->num;
    if (n->kind == CN_STR) {
        for (int i = 0; i < 5; i++)
            if (!strcasecmp(n->text, NAMES[i])) return i + 1;
        if (strlen(n->text) == 1 && n->text[0] >= '1' && n->text[0] <= '5') return n->text[0] - '0';
    }
    return 0;
}

static void map_sharding(dctx *d, const cfg_node *n, const char *path, int s, int machines,
                         int64_t procs) {
    static const char *const STRAT[] = {"", "zero3", "zero2", "ddp", "hybrid", "hybrid"};
    zt_cfg_map(d, n, path, "parallel.strategy", STRAT[s]);
    if (s == 1) zt_cfg_map(d, n, path, "parallel.reshard_after_forward", "true");
    if (s >= 4) {
        zt_cfg_map(d, n, path, "parallel.hybrid_inner", s == 4 ? "zero3" : "zero2");
        if (machines > 1 && procs > 0 && procs % machines == 0) {
            char v[32];
            snprintf(v, sizeof v, "%lld", (long long)(procs / machines));
            zt_cfg_map(d, n, path, "parallel.hybrid_shard_size", v);
        } else {
            zt_cfg_dnote(d, ZT_CONFIG_NOTE, n, path,
                         "shards within a machine, replicates across machines: parallel.hybrid_shard_size "
                         "0, the launcher's ranks per node (the whole world on one machine)");
        }
    }
}

static int fsdp_version(dctx *d) {
    const cfg_node *ver = zt_cfg_seen(d, "fsdp_config.fsdp_version");
    int64_t version = 1;
    if (ver && !zt_cfg_get_int(d, ver, "fsdp_config.fsdp_version", 1, 2, &version)) version = 1;
    return (int)version;
}

/* mesh_hybrid: parallelism_config made the strategy hybrid (FSDP2 on a 2-D mesh); then
 * fsdp_reshard_after_forward says what happens inside a shard group. */
static void resolve_fsdp(dctx *d, int machines, int64_t procs, int version, bool mesh_hybrid) {
    const cfg_node *ss = zt_cfg_seen(d, "fsdp_config.fsdp_sharding_strategy");
    const cfg_node *raf = zt_cfg_seen(d, "fsdp_config.fsdp_reshard_after_forward");
    char s[100];
    if (ss) {
        int k = sharding_of(ss);
        if (!k) {
            zt_cfg_node_show(ss, s, sizeof s);
            zt_cfg_derror(d, ss, "fsdp_config.fsdp_sharding_strategy",
                          "expected FULL_SHARD, SHARD_GRAD_OP, NO_SHARD, HYBRID_SHARD, "
                          "HYBRID_SHARD_ZERO2 or 1-5, got %s",
                          s);
        } else {
            if (version == 2)
                zt_cfg_dnote(d, ZT_CONFIG_NOTE, ss, "fsdp_config.fsdp_sharding_strategy",
                             "deprecated with FSDP2 in favor of fsdp_reshard_after_forward; read "
                             "anyway");
            map_sharding(d, ss, "fsdp_config.fsdp_sharding_strategy", k, machines, procs);
        }
    }
    if (raf) {
        bool b;
        int k = sharding_of(raf);
        if (raf->kind == CN_BOOL || (raf->kind == CN_STR && !k)) {
            if (zt_cfg_get_bool(d, raf, "fsdp_config.fsdp_reshard_after_forward", &b)) {
                if (version == 1)
                    zt_cfg_dnote(d, ZT_CONFIG_NOTE, raf, "fsdp_config.fsdp_reshard_after_forward",
                                 "a boolean with FSDP1 (Accelerate expects a strategy name): read "
                                 "as %s", b ? "FULL_SHARD" : "SHARD_GRAD_OP");
                if (version == 1 && !b) {
                    map_sharding(d, raf, "fsdp_config.fsdp_reshard_after_forward", 2, machines, procs);
                } else if (mesh_hybrid) {
                    zt_cfg_map(d, raf, "fsdp_config.fsdp_reshard_after_forward",
                               "parallel.reshard_after_forward", b ? "true" : "false");
                } else {
                    zt_cfg_map(d, raf, "fsdp_config.fsdp_reshard_after_forward", "parallel.strategy",
                               "zero3");
                    zt_cfg_map(d, raf, "fsdp_config.fsdp_reshard_after_forward",
                               "parallel.reshard_after_forward", b ? "true" : "false");
                    if (!b)
                        zt_cfg_dnote(d, ZT_CONFIG_NOTE, raf, "fsdp_config.fsdp_reshard_after_forward",
                                     "false: zero3 keeping each gathered unit from forward to "
                                     "backward (FSDP2's exact behaviour: still sharded between "
                                     "steps). Accelerate's docs equate it with SHARD_GRAD_OP "
                                     "(zero2); the results are the same");
                }
            }
        } else if (k) {
            if (version == 2)
                zt_cfg_derror(d, raf, "fsdp_config.fsdp_reshard_after_forward",
                              "FSDP2 takes true or false here (Accelerate raises a ValueError too)");
            else
                map_sharding(d, raf, "fsdp_config.fsdp_reshard_after_forward", k, machines, procs);
        } else {
            zt_cfg_node_show(raf, s, sizeof s);
            zt_cfg_derror(d, raf, "fsdp_config.fsdp_reshard_after_forward",
                          "expected true/false (FSDP2) or a sharding strategy (FSDP1), got %s", s);
        }
    }
    if (!ss && !raf && !mesh_hybrid) {
        int ki = zt_cfg_key_index("parallel.strategy");
        if (!d->x->native_set[ki])
            zt_cfg_apply_str(d->x, "parallel.strategy", "zero3", ZT_ORIGIN_DIALECT, d->file,
                             version == 1 ? "accelerate default: FSDP1 sharding FULL_SHARD"
                                          : "accelerate default: FSDP2 reshard_after_forward true",
                             "fsdp_config");
    }
    bool b;
    const cfg_node *n = zt_cfg_seen(d, "fsdp_config.fsdp_offload_params");
    if (n && zt_cfg_get_bool(d, n, "fsdp_config.fsdp_offload_params", &b) && b) {
        zt_cfg_map(d, n, "fsdp_config.fsdp_offload_params", "memory.offload_param", "cpu");
        zt_cfg_map(d, n, "fsdp_config.fsdp_offload_params", "memory.offload_optimizer", "cpu");
    }
    n = zt_cfg_seen(d, "fsdp_config.fsdp_auto_wrap_policy");
    if (n && n->kind == CN_STR) {
        if (!strcasecmp(n->text, "TRANSFORMER_BASED_WRAP"))
            zt_cfg_dnote(d, ZT_CONFIG_NOTE, n, "fsdp_config.fsdp_auto_wrap_policy",
                         "zerotrain's units are the model's blocks already");
        else if (!strcasecmp(n->text, "SIZE_BASED_WRAP") || !strcasecmp(n->text, "NO_WRAP"))
            zt_cfg_dnote(d, ZT_CONFIG_WARNING, n, "fsdp_config.fsdp_auto_wrap_policy",
                         "%s: not honored: units stay one per transformer block (the results are "
                         "the same; what is gathered at once differs)",
                         n->text);
        else
            zt_cfg_derror(d, n, "fsdp_config.fsdp_auto_wrap_policy",
                          "expected TRANSFORMER_BASED_WRAP, SIZE_BASED_WRAP or NO_WRAP");
    }
    /* true is full, unless the including native file chose selective (a refinement of true) */
    n = zt_cfg_seen(d, "fsdp_config.fsdp_activation_checkpointing");
    if (n && zt_cfg_get_bool(d, n, "fsdp_config.fsdp_activation_checkpointing", &b))
        zt_cfg_map_checkpointing(d, n, "fsdp_config.fsdp_activation_checkpointing", b, "true");
    /* one native key for both directions: true when either asks, false when backward says
     * NO_PREFETCH and forward does not ask */
    static const char *const BP[] = {"fsdp_config.fsdp_backward_prefetch",
                                     "fsdp_config.fsdp_backward_prefetch_policy"};
    const cfg_node *on = NULL, *off = NULL;
    const char *on_path = NULL, *off_path = NULL;
    for (int i = 0; i < 2; i++) {
        n = zt_cfg_seen(d, BP[i]);
        if (!n || n->kind == CN_NULL) continue;
        bool pre = (n->kind == CN_STR && (!strcasecmp(n->text, "BACKWARD_PRE") ||
                                          !strcasecmp(n->text, "BACKWARD_POST") ||
                                          !strcmp(n->text, "1") || !strcmp(n->text, "2"))) ||
                   (n->kind == CN_NUM && (n->num == 1 || n->num == 2));
        bool none = (n->kind == CN_STR && (!strcasecmp(n->text, "NO_PREFETCH") || !strcmp(n->text, "3"))) ||
                    (n->kind == CN_NUM && n->num == 3);
        if (!pre && !none) {
            zt_cfg_derror(d, n, BP[i], "expected BACKWARD_PRE, BACKWARD_POST or NO_PREFETCH");
        } else if (version == 2) {
            zt_cfg_dnote(d, ZT_CONFIG_NOTE, n, BP[i], "ignored with FSDP2 (as Accelerate does)");
        } else if (pre) {
            on = n;
            on_path = BP[i];
        } else {
            off = n;
            off_path = BP[i];
        }
    }
    n = zt_cfg_seen(d, "fsdp_config.fsdp_forward_prefetch");
    if (n && zt_cfg_get_bool(d, n, "fsdp_config.fsdp_forward_prefetch", &b) && b) {
        if (version == 2) {
            zt_cfg_dnote(d, ZT_CONFIG_NOTE, n, "fsdp_config.fsdp_forward_prefetch",
                         "ignored with FSDP2 (Accelerate's FSDP2 does not implement it)");
        } else if (!on) {
            on = n;
            on_path = "fsdp_config.fsdp_forward_prefetch";
        }
    }
    if (on)
        zt_cfg_map(d, on, on_path, "parallel.prefetch", "true");
    else if (off)
        zt_cfg_map(d, off, off_path, "parallel.prefetch", "false");
}

/* Returns true when it made the strategy hybrid. */
static bool resolve_parallelism(dctx *d, bool fsdp, bool ds, int version, int64_t procs) {
    const cfg_node *blk = zt_cfg_seen(d, "parallelism_config");
    if (!blk || blk->kind != CN_MAP || !blk->child) return false;
    if (!ds && (!fsdp || version != 2)) {
        zt_cfg_derror(d, blk, "parallelism_config",
                      "needs distributed_type FSDP with fsdp_config.fsdp_version 2, or DEEPSPEED "
                      "(Accelerate raises a ValueError too)");
        return false;
    }
    int64_t v[5] = {1, 1, 1, 1, 1};
    static const char *const K[] = {"parallelism_config.parallelism_config_dp_replicate_size",
                                    "parallelism_config.parallelism_config_dp_shard_size",
                                    "parallelism_config.parallelism_config_tp_size",
                                    "parallelism_config.parallelism_config_cp_size",
                                    "parallelism_config.parallelism_config_sp_size"};
    const cfg_node *n[5];
    for (int i = 0; i < 5; i++) {
        n[i] = zt_cfg_seen(d, K[i]);
        if (n[i] && !zt_cfg_get_int(d, n[i], K[i], 1, 1048576, &v[i])) return false;
    }
    int64_t r = v[0], s = v[1];
    char t[32];
    if (ds) { /* DeepSpeed shards over all data-parallel ranks; the mesh adds sequence parallelism */
        if (n[0] || n[1])
            zt_cfg_dnote(d, ZT_CONFIG_NOTE, n[0] ? n[0] : n[1], n[0] ? K[0] : K[1],
                         "with DEEPSPEED the ZeRO stage shards over all data-parallel ranks");
        r = s = 1;
    } else if (r > 1 && s > 1) {
        zt_cfg_map(d, n[0], K[0], "parallel.strategy", "hybrid");
        snprintf(t, sizeof t, "%lld", (long long)s);
        zt_cfg_map(d, n[1], K[1], "parallel.hybrid_shard_size", t);
        snprintf(t, sizeof t, "%lld", (long long)r);
        zt_cfg_map(d, n[0], K[0], "parallel.hybrid_replicas", t);
        zt_cfg_map(d, n[0], K[0], "parallel.hybrid_inner", "zero3");
    } else if (r > 1) {
        zt_cfg_map(d, n[0], K[0], "parallel.strategy", "ddp");
        zt_cfg_dnote(d, ZT_CONFIG_NOTE, n[0], K[0], "replicate only: ddp");
    } else if (n[1] && s > 1 && procs > 0 && s * v[2] * v[3] * v[4] != procs) {
        zt_cfg_derror(d, n[1], K[1], "%lld ranks per shard group, but num_processes is %lld",
                      (long long)s, (long long)procs);
    }
    if (v[3] > 1 && v[4] > 1)
        zt_cfg_derror(d, n[4], K[4], "%lld with parallelism_config_cp_size %lld: both split the sequence (cp: "
                      "ring/allgather attention, sp: Ulysses); zerotrain runs one of them", (long long)v[4],
                      (long long)v[3]);
    for (int i = 2; i < 5; i++)
        if (n[i] && (i == 2 || v[i] > 1 || (!n[3] || !n[4]))) {
            snprintf(t, sizeof t, "%lld", (long long)v[i]);
            zt_cfg_map(d, n[i], K[i], i == 2 ? "parallel.tensor_parallel_size" : "parallel.context_parallel_size", t);
        }
    /* the attention across the parts: sp is DeepSpeed's Ulysses (ALST); cp follows
     * cp_comm_strategy: allgather (Accelerate's default) or alltoall (the ring's rotation) */
    const char *KS = "parallelism_config.parallelism_config_cp_comm_strategy";
    const cfg_node *cs = zt_cfg_seen(d, KS);
    if (v[4] > 1) {
        zt_cfg_map(d, n[4], K[4], "parallel.context_parallel_mode", "ulysses");
    } else if (cs && cs->text) {
        if (!strcmp(cs->text, "allgather") || !strcmp(cs->text, "alltoall"))
            zt_cfg_map(d, cs, KS, "parallel.context_parallel_mode",
                       !strcmp(cs->text, "allgather") ? "allgather" : "ring");
        else
            zt_cfg_derror(d, cs, KS, "\"%s\": expected allgather or alltoall", cs->text);
    }
    int64_t total = r * s * v[2] * v[3] * v[4];
    if (procs > 0 && (r > 1 || s > 1) && total != procs)
        zt_cfg_derror(d, blk, "parallelism_config",
                      "dp_replicate %lld x dp_shard %lld x tp %lld x cp %lld x sp %lld = %lld ranks, "
                      "but num_processes is %lld",
                      (long long)r, (long long)s, (long long)v[2], (long long)v[3], (long long)v[4],
                      (long long)total, (long long)procs);
    return r > 1 && s > 1;
}

void zt_cfg_read_accelerate(cfg_ctx *x, const char *text, size_t len, const char *name) {
    cfg_node *root = zt_cfg_yaml_tree(x, text, len, name);
    if (!root) return;
    dctx d = {.x = x, .file = name, .dialect = "accelerate", .rows = ROWS,
              .n_rows = (int)(sizeof ROWS / sizeof ROWS[0]),
              .strict_root = "Accelerate refuses unknown top-level keys too: ClusterConfig.from_yaml_file"};
    zt_cfg_walk(&d, root, "");
    const cfg_node *dt = zt_cfg_seen(&d, "distributed_type");
    if (!dt && zt_cfg_child(root, "distributed_type")) { /* refused by the walk already */
        zt_cfg_node_free(root);
        return;
    }
    if (!dt) {
        zt_cfg_error(x, "%s: distributed_type: missing (Accelerate requires it: NO, MULTI_CPU, "
                        "DEEPSPEED or FSDP)",
                     name);
        zt_cfg_node_free(root);
        return;
    }
    /* PyYAML reads a bare NO as false; Accelerate writes it quoted */
    cfg_node *dtw = (cfg_node *)dt;
    if (dtw->kind == CN_BOOL) {
        if (dtw->b) {
            zt_cfg_derror(&d, dt, "distributed_type", "expected NO, MULTI_CPU, DEEPSPEED or FSDP, got true");
            zt_cfg_node_free(root);
            return;
        }
        free(dtw->text);
        dtw->text = strdup("NO");
        dtw->kind = CN_STR;
        if (!dtw->text) {
            x->nomem = true;
            zt_cfg_node_free(root);
            return;
        }
    }
    /* the blocks, once the type is known: only the selected one is read */
    const cfg_node *dsb = zt_cfg_seen(&d, "deepspeed_config"), *fb = zt_cfg_seen(&d, "fsdp_config"),
                   *pb = zt_cfg_seen(&d, "parallelism_config");
    bool is_ds = !strcmp(dt->text, "DEEPSPEED"), is_fsdp = !strcmp(dt->text, "FSDP");
    if (dsb && dsb->kind == CN_MAP) {
        if (is_ds)
            zt_cfg_walk(&d, dsb, "deepspeed_config");
        else if (dsb->child)
            zt_cfg_dnote(&d, ZT_CONFIG_NOTE, dsb, "deepspeed_config",
                         "ignored: distributed_type is %s", dt->text);
    }
    if (fb && fb->kind == CN_MAP) {
        if (is_fsdp)
            zt_cfg_walk(&d, fb, "fsdp_config");
        else if (fb->child)
            zt_cfg_dnote(&d, ZT_CONFIG_NOTE, fb, "fsdp_config", "ignored: distributed_type is %s",
                         dt->text);
    }
    if (pb && pb->kind == CN_MAP) zt_cfg_walk(&d, pb, "parallelism_config");

    /* ranks */
    const cfg_node *np = zt_cfg_seen(&d, "num_processes"), *nm = zt_cfg_seen(&d, "num_machines");
    int64_t procs = -1, machines = 1;
    if (nm && !zt_cfg_get_int(&d, nm, "num_machines", 1, 1048576, &machines)) machines = 1;
    if (np && !zt_cfg_get_int(&d, np, "num_processes", -1, 1048576, &procs)) procs = -1;
    if (np && procs == 0) {
        zt_cfg_derror(&d, np, "num_processes", "expected a rank count (>= 1, or -1: unset)");
        procs = -1;
    }
    if (machines > 1) {
        zt_cfg_dnote(&d, ZT_CONFIG_WARNING, nm, "num_machines",
                     "%lld machines: zerotrain does not start remote ranks itself; run `mpirun -np "
                     "%lld -hostfile HOSTS zerotrain train CONFIG` (parallel.nproc stays at its "
                     "value and is not used then)",
                     (long long)machines, (long long)(procs > 0 ? procs : machines));
    } else if (procs > 0 && strcmp(dt->text, "NO") != 0) {
        char v[32];
        snprintf(v, sizeof v, "%lld", (long long)procs);
        zt_cfg_map(&d, np, "num_processes", "parallel.nproc", v);
    }
    /* the strategy: a 2-D mesh first (FSDP2), then what happens inside a shard group */
    int version = is_fsdp ? fsdp_version(&d) : 1;
    bool mesh_hybrid = resolve_parallelism(&d, is_fsdp, is_ds, version, procs);
    if (!strcmp(dt->text, "NO")) {
        zt_cfg_map(&d, dt, "distributed_type", "parallel.strategy", "ddp");
        if (procs > 1)
            zt_cfg_dnote(&d, ZT_CONFIG_WARNING, np, "num_processes",
                         "distributed_type NO runs one process: num_processes ignored");
    } else if (!strcmp(dt->text, "MULTI_CPU")) {
        zt_cfg_map(&d, dt, "distributed_type", "parallel.strategy", "ddp");
    } else if (!strncmp(dt->text, "MULTI_", 6)) {
        zt_cfg_map(&d, dt, "distributed_type", "parallel.strategy", "ddp");
        zt_cfg_dnote(&d, ZT_CONFIG_NOTE, dt, "distributed_type",
                     "%s: data parallel (ddp) on CPU ranks: this build has no accelerators", dt->text);
    } else if (is_ds) {
        resolve_deepspeed(&d);
    } else if (is_fsdp) {
        resolve_fsdp(&d, (int)machines, procs, version, mesh_hybrid);
    } else {
        char s[100];
        zt_cfg_node_show(dt, s, sizeof s);
        zt_cfg_derror(&d, dt, "distributed_type",
                      "%s is not supported (NO, MULTI_CPU, DEEPSPEED or FSDP)", s);
    }
    resolve_precision(&d, is_ds && zt_cfg_seen(&d, "deepspeed_config.deepspeed_config_file"), is_ds || is_fsdp);
    zt_cfg_node_free(root);
}
