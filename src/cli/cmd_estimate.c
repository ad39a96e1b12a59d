/* cmd_estimate.c - `zerotrain estimate-memory`: the per-rank memory plan before any run, for every
 * strategy side by side, with activation checkpointing and NVMe offload variants (docs/memory.md).
 *   zerotrain estimate-memory CONFIG [--nproc N] [--set key=value ...] [--threads T] [--json]
 *   zerotrain estimate-memory --model NAME [--nproc N] [-B b] [-T t] [--grad-accum k]
 *                             [--precision p] [--reduce-dtype d] [--hybrid-shard S] [--checkpointing c]
 *                             [--offload o]
 *                             [--nvme-buffers n] [--nvme-buffer-mb m] [--freeze REGEX]
 *                             [--lora-rank r [--lora-targets T] [--lora-dropout p] [--quant nf4|int8]]
 *                             [--threads T] [--json]
 *                             [--attention flash|naive]
 * CONFIG is resolved exactly as `zerotrain train` resolves it (any dialect, --set, the world size)
 * and planned with the engine options the trainer builds from it. Every --model is a preset of the
 * engine's own models (GPT-2, Llama), so the numbers are what the engine allocates. Bad input: exit 2 with a message naming the option. */
#include "core/env.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "config/train_config.h"
#include "engine/pipeline.h"
#include "train/engine_options.h"
#include "memory/estimate.h"
#include "memory/fit.h"
#include "memory/shapes.h"
#include "metrics/metrics.h"
#include "shard/tp.h"

#include <cjson/cJSON.h>
#include <limits.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/statvfs.h>
#include <string.h>
#include <unistd.h>

#define CMD "estimate-memory" /* the prefix of its messages */

static void usage(FILE *out) {
    fprintf(out,
            "usage: zerotrain estimate-memory CONFIG [--nproc N] [--set key=value ...] [--threads T] [--json]\n"
            "       zerotrain estimate-memory --model NAME [--nproc N] [-B b] [-T t] [--grad-accum k]\n"
            "                                 [--precision fp32|bf16|bf16-low|fp16] [--reduce-dtype fp32|bf16|fp16]\n"
            "                                 [--hybrid-shard S] [--tp N]\n"
            "                                 [--checkpointing none|full|selective] [--offload none|nvme|nvme+param]\n"
            "                                 [--nvme-buffers n] [--nvme-buffer-mb m] [--freeze REGEX]\n"
            "                                 [--lora-rank r [--lora-targets T] [--lora-dropout p] [--quant nf4|int8]]\n"
            "                                 [--threads T] [--json]\n"
            "                                 [--attention flash|naive] [--loss-chunk N]\n"
            "       zerotrain estimate-memory --model NAME --fit [--nproc N] [-B b] [-T t] [--precision P]\n"
            "                                 [--offload-dir DIR] [--ram-gib X] [--disk-gib Y]\n"
            "  CONFIG          a training configuration (native YAML, DeepSpeed JSON, Accelerate YAML), resolved\n"
            "                  as `zerotrain train` would; the numbers are what the engine allocates\n"
            "  --model         a preset of the engine's models: gpt2-124M, gpt2-350M, gpt2-774M, gpt2-1558M,\n"
            "                  llama-124M, llama-7b, llama-13b, llama-70b, llama3-8b, llama3-70b, mistral-7b,\n"
            "                  mixtral-8x7b, llama-124M-moe, llama-tiny-moe, qwen1.5-moe-a2.7b\n"
            "                  (exact plans)\n"
            "  --nproc         ranks (default: parallel.nproc, or 1)\n"
            "  -B, -T          micro-batch size (1) and sequence length (the model's context)\n"
            "  --grad-accum    micro-batches per rank per step (1)\n"
            "  --reduce-dtype  the gradient reductions' dtype (precision.reduce_dtype; bf16/fp16 halve their\n"
            "                  staging and scratch)\n"
            "  --hybrid-shard  ranks per shard group of the hybrid column (half the ranks when even, >= 4)\n"
            "  --tp N          tensor parallelism over N consecutive ranks (with a CONFIG: parallel.\n"
            "                  tensor_parallel_size): the plan of one part over the --nproc / N data-parallel ranks\n"
            "  --cp N          context parallelism over N ranks (with a CONFIG: parallel.context_parallel_size):\n"
            "                  each holds T/N positions of every sequence and attention's buffers for them\n"
            "  --cp-mode M     allgather (default), ring or ulysses (parallel.context_parallel_mode)\n"
            "  --ep N          expert parallelism over N data-parallel ranks (a mixture of experts; with a CONFIG:\n"
            "                  parallel.expert_parallel_size): the all-to-all's buffers in the activations, the\n"
            "                  experts stored E/ep a rank where the engine stores them (docs/parallelism.md)\n"
            "  --threads       OpenMP threads per rank (as `train --nproc` gives them: OMP_NUM_THREADS or\n"
            "                  cores / N); sizes the attention backward's scratch\n"
            "  --offload       nvme: the optimizer state in files; nvme+param: and zero3's parameter pieces\n"
            "  --attention     the attention kernel (model.attention): flash (default; activations O(T)) or naive\n"
            "                  (saves the (B, n_head, T, T) probabilities)\n"
            "  --loss-chunk N  the loss's logits N tokens at a time, again in backward (with a CONFIG:\n"
            "                  memory.loss_chunk_tokens): no (B*T, V) logits kept; 0 (default): all kept\n"
            "  --freeze REGEX  parameters not trained (whole names, PCRE2; with a CONFIG: training.freeze):\n"
            "                  their pieces are planned, with no gradient and no optimizer state\n"
            "  --lora-rank r   LoRA adapters of rank r (with a CONFIG: lora.*): the base weights planned as\n"
            "                  frozen pieces, the adapters with their gradients and optimizer state\n"
            "  --lora-targets  the adapted Linears, as lora.target_modules (default: q_proj,v_proj for Llama,\n"
            "                  c_attn for GPT-2; all-linear: every block Linear)\n"
            "  --lora-dropout  lora.dropout (> 0 adds its (N, C) scratch)\n"
            "  --quant         QLoRA: the frozen Linears stored as nf4 or int8 (lora.base_quant): their bytes\n"
            "                  and one unit's dequantized matrices instead of the fp32/bf16 base\n"
            "  --json          the same numbers as one JSON object\n"
            "  --fit           the largest model of NAME's shape (its width, heads, vocabulary; layers varied)\n"
            "                  that fits this machine, for every strategy, offload and checkpointing: the\n"
            "                  RAM budget is MemAvailable shared by the N local ranks (--ram-gib X: X GiB\n"
            "                  instead), less 256 MiB per rank for the process; the disk budget is the free\n"
            "                  space of --offload-dir (default .) shared by the ranks (--disk-gib Y instead)\n"
            "Per rank, for the rank that needs the most: each memory class's high-water, the high-water of\n"
            "their sum, the model states at rest, and the high-water with activation checkpointing\n"
            "(full, selective) and with the optimizer state on NVMe. Exit code 0, or 2 on bad input.\n");
}

/* Tensor parallelism over tp of nproc ranks: the model cut as part 0 holds it (src/shard/tp.h;
 * part 0 has the larger share of an uneven vocabulary, so its plan is the largest). */
static int cut_for_tp(zt_model *m, int tp, int nproc, zt_error *err) {
    if (tp <= 1) return ZT_OK;
    if (nproc % tp)
        return zt_error_set(err, ZT_ERR_USAGE, "estimate-memory: tensor parallelism over %d ranks does not divide the "
                            "%d ranks", tp, nproc);
    int rc = zt_tp_apply(m, tp, 0, err);
    return rc ? zt_error_prefix(err, "estimate-memory: tensor parallel %d", tp) : ZT_OK;
}

/* Context parallelism over cp of the nproc / tp ranks left by tensor parallelism: every unit runs on
 * one part of each sequence (the engine options' T is then the part's, zt_train_engine_options). */
static int cut_for_cp(zt_model *m, int cp, zt_cp_mode mode, int tp, int nproc, zt_error *err) {
    if (cp <= 1) return ZT_OK;
    if ((nproc / tp) % cp)
        return zt_error_set(err, ZT_ERR_USAGE, "estimate-memory: context parallelism over %d ranks does not divide the "
                            "%d ranks left by tensor parallelism %d", cp, nproc / tp, tp);
    return zt_model_set_context_parallel(m, cp, mode, err);
}

/* Expert parallelism over ep of the nproc / tp data-parallel ranks (the dp x cp group: comm/mesh.h):
 * the mixture's blocks hold the all-to-all's buffers for the most rows every part can send. */
static int cut_for_ep(zt_model *m, int ep, int tp, int nproc, zt_error *err) {
    if (ep <= 1) return ZT_OK;
    if ((nproc / tp) % ep)
        return zt_error_set(err, ZT_ERR_USAGE, "estimate-memory: expert parallelism over %d ranks does not divide the "
                            "%d data-parallel ranks", ep, nproc / tp);
    int rc = zt_model_set_expert_parallel(m, ep, err);
    return rc ? zt_error_prefix(err, "estimate-memory") : ZT_OK;
}

/* ---- argument parsing ------------------------------------------------------------------------ */
static int parse_precision(const char *text, zt_precision_mode *out, zt_error *err) {
    for (int k = 0; k <= ZT_PRECISION_FP16; k++)
        if (!strcmp(text, zt_precision_mode_name((zt_precision_mode)k))) {
            *out = (zt_precision_mode)k;
            return ZT_OK;
        }
    return zt_error_set(err, ZT_ERR_USAGE, "estimate-memory: --precision \"%s\" (known: fp32, bf16, bf16-low, fp16)",
                        text);
}

/* threads per rank as the launcher gives them (launch.c): OMP_NUM_THREADS, else cores / N */
static int default_threads(int nproc) {
    const char *env = zt_env(ZT_ENV_OMP_NUM_THREADS);
    int t = env ? atoi(env) : 0;
    if (t > 0) return t;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    t = (int)(cores / (nproc > 0 ? nproc : 1));
    return t > 0 ? t : 1;
}

static int default_hybrid_shard(int world) { return world >= 4 && world % 2 == 0 ? world / 2 : world; }

/* A CONFIG with parallel.pipeline_parallel_size > 1: each stage's memory plan (the trainer's cut,
 * src/engine/pipeline.h), for rank 0 of its data-parallel ranks, with its in-flight micro-batches'
 * activations and transfer buffers (the plan zerotrain train prints for that rank). */
static int print_stages(const zt_train_config *cfg, const zt_model_spec *spec, int nproc, zt_error *err) {
    int pp = cfg->pipeline_parallel_size, dp = nproc / pp, A = cfg->grad_accum > 0 ? cfg->grad_accum : 1;
    zt_pp_schedule sched = zt_train_pp_schedule(cfg);
    zt_model *model = NULL, *sm = NULL;
    int *map = NULL;
    zt_engine_options eo;
    zt_train_engine_options(cfg, dp, NULL, &eo);
    if (cfg->strategy == ZT_STRATEGY_HYBRID && !cfg->hybrid_shard_size) eo.hybrid_shard_size = default_hybrid_shard(dp);
    zt_pp_cut cut;
    omp_set_num_threads(default_threads(nproc)); /* the attention scratch follows the ranks' thread count */
    int rc = zt_model_spec_create(spec, &model, err);
    if (!rc && (rc = zt_model_freeze(model, cfg->freeze, NULL, err))) zt_error_prefix(err, "training.freeze");
    if (!rc) rc = zt_pipeline_cut(model, pp, cfg->pipeline_stages, eo.B, eo.T, zt_precision_lp_kind(&eo.precision), A,
                                  sched, &cut, err);
    if (!rc && !(map = malloc((size_t)model->n_params * sizeof *map)))
        rc = zt_error_set(err, ZT_ERR_NOMEM, "estimate-memory: out of memory");
    if (!rc)
        printf("%s (model %s): pipeline %s, %d stages x %d data-parallel rank%s (%s), %d micro-batches per step; "
               "each stage's rank 0:\n", cfg->model_preset, cfg->model_preset, zt_pp_schedule_name(sched), pp, dp,
               dp == 1 ? "" : "s", zt_strategy_name(cfg->strategy), A);
    for (int s = 0; s < pp && !rc; s++) {
        if ((rc = zt_pp_stage_model(model, &cut, s, &sm, map, err))) break;
        zt_engine_options so = eo;
        zt_pipeline_engine_options(model, &cut, s, sched, A, &so);
        zt_memory_plan_options po;
        zt_memory_plan_options_default(&po);
        po.offload_optimizer = cfg->offload_optimizer == ZT_CFG_OFFLOAD_NVME;
        zt_memory_plan plan;
        if (!(rc = zt_memory_plan_compute(sm, &so, &po, dp, 0, &plan, err))) {
            char line[512];
            zt_memory_plan_line(&plan, line, sizeof line);
            printf("  stage %d: units %d-%d (%s .. %s), %.2fM parameters, %d micro-batch%s in flight: %s\n", s,
                   cut.first[s], cut.first[s + 1] - 1, model->units[cut.first[s]].name,
                   model->units[cut.first[s + 1] - 1].name, (double)zt_model_numel(sm) / 1e6, so.pp_slots,
                   so.pp_slots == 1 ? "" : "es", line);
        }
        zt_model_free(sm);
        sm = NULL;
    }
    free(map);
    zt_model_free(model);
    return rc;
}

/* ---- what is shown ---------------------------------------------------------------------------- */
typedef struct shown {
    const char *title;          /* model or config */
    const char *model_name;
    zt_model *model;            /* a mixture's experts stored or whole as each strategy runs them */
    const zt_engine_options *opt;
    const zt_memory_plan_options *po;
    int world, threads;
    int configured;             /* the configuration's strategy column, or -1 */
    const char *config_path;
} shown;

static const char *unit_name(double max, double *div, int *decimals) {
    if (max >= 8.0 * 1073741824.0) return *div = 1073741824.0, *decimals = 2, "GiB";
    if (max >= 8.0 * 1048576.0) return *div = 1048576.0, *decimals = 1, "MiB";
    return *div = 1024.0, *decimals = 1, "KiB";
}

static void cell(FILE *out, size_t bytes, double div, int decimals) {
    if (!bytes) fprintf(out, " %10s", "-");
    else fprintf(out, " %10.*f", decimals, (double)bytes / div);
}

static void print_text(FILE *out, const shown *w, const zt_estimate *est) {
    const zt_engine_options *o = w->opt;
    const zt_precision_bytes *pb = zt_precision_bytes_of(o->precision.mode);
    int64_t P = zt_model_numel(w->model);
    bool adam = zt_optim_two_moments(o->optim.kind);
    int moments = adam ? 2 : o->optim.momentum != 0.0f ? 1 : 0;
    fprintf(out, "zerotrain estimate-memory: %s | %.2fM parameters (%lld) | %d rank%s x %d thread%s\n", w->title,
            (double)P / 1e6, (long long)P, w->world, w->world > 1 ? "s" : "", w->threads, w->threads > 1 ? "s" : "");
    fprintf(out, "micro-batch %d x %d tokens, accumulation %d | precision %s: %d B master + %d B compute copy + %d B "
            "grads + %d x %d B moments per parameter, reduced in %s | %s | buckets %.0f MiB\n",
            o->B, o->T, o->grad_accum > 0 ? o->grad_accum : 1, zt_precision_mode_name(o->precision.mode), pb->master,
            pb->copy, pb->grads, moments, pb->moment, zt_dtype_name(o->precision.reduce), zt_optimizer_name(o->optim.kind),
            (double)o->bucket_bytes / 1048576.0);
    if (w->config_path)
        fprintf(out, "the engine's plan for %s (* = its strategy): `zerotrain train` allocates these bytes and prints\n"
                "planned against measured high-water per rank at the end\n", w->config_path);
    else
        fprintf(out, "the engine's plan: `zerotrain train` allocates these bytes per class (tests/memory_plan.sh)\n");
    double max = 0, div;
    int decimals;
    for (int s = 0; s < ZT_EST_STRATEGIES; s++)
        for (int v = 0; v < ZT_EST_VARIANTS; v++)
            if ((double)est->col[s].peak[v] > max) max = (double)est->col[s].peak[v];
    const char *unit = unit_name(max, &div, &decimals);
    char head[64];
    snprintf(head, sizeof head, "per rank (%s), the rank needing the most", unit);
    fprintf(out, "\n%-44s", head);
    for (int s = 0; s < ZT_EST_STRATEGIES; s++) {
        char name[32];
        if (s == ZT_STRATEGY_HYBRID)
            snprintf(name, sizeof name, "hybrid/%d%s", o->hybrid_shard_size, s == w->configured ? "*" : "");
        else
            snprintf(name, sizeof name, "%s%s", zt_strategy_name((zt_strategy)s), s == w->configured ? "*" : "");
        fprintf(out, " %10s", name);
    }
    fputc('\n', out);
    static const char *labels[ZT_MEM_CLASSES] = {
        "  params (master; pieces where sharded)", "  compute copies (bf16/fp16, fp32 vectors)",
        "  gathered (zero3 units; bf16-low views)", "  grads (buffers, tree, in flight)",
        "  optimizer state (or its NVMe staging)", "  activations (outputs, saved, scratch)",
        "  communication staging, norm partials"};
    for (int c = 0; c < ZT_MEM_CLASSES; c++) {
        bool any = false;
        for (int s = 0; s < ZT_EST_STRATEGIES; s++) any |= est->col[s].plan.peak[c] != 0;
        if (!any) continue;
        fprintf(out, "%-44s", labels[c]);
        for (int s = 0; s < ZT_EST_STRATEGIES; s++) cell(out, est->col[s].plan.peak[c], div, decimals);
        fputc('\n', out);
    }
    fprintf(out, "%-44s", "high-water (all classes at once)");
    for (int s = 0; s < ZT_EST_STRATEGIES; s++) cell(out, est->col[s].peak[ZT_EST_AS_GIVEN], div, decimals);
    /* at rest = between two steps (docs/memory.md): ddp frees its gradient buffer after the update */
    fprintf(out, "\n%-44s", "  model states at rest (between steps)");
    for (int s = 0; s < ZT_EST_STRATEGIES; s++) cell(out, zt_memory_plan_model_states(&est->col[s].plan), div, decimals);
    static const struct { zt_mem_class c; const char *label; } parts[] = {
        {ZT_MEM_PARAMS, "    = params"}, {ZT_MEM_COMPUTE_COPY, "    + compute copies"},
        {ZT_MEM_GRADS, "    + grads kept (ddp: freed after the step)"}, {ZT_MEM_OPTIMIZER, "    + optimizer state"}};
    for (size_t k = 0; k < sizeof parts / sizeof *parts; k++) {
        bool any = false;
        for (int s = 0; s < ZT_EST_STRATEGIES; s++) any |= est->col[s].plan.rest[parts[k].c] != 0;
        if (!any && parts[k].c != ZT_MEM_GRADS) continue;
        fprintf(out, "\n%-44s", parts[k].label);
        for (int s = 0; s < ZT_EST_STRATEGIES; s++) cell(out, est->col[s].plan.rest[parts[k].c], div, decimals);
    }
    fprintf(out, "\n%-44s", "  ... in bytes per parameter");
    for (int s = 0; s < ZT_EST_STRATEGIES; s++)
        fprintf(out, " %10.2f", (double)zt_memory_plan_model_states(&est->col[s].plan) / (double)P);
    fprintf(out, "\nhigh-water with\n");
    static const char *vlabels[ZT_EST_VARIANTS] = {NULL, "  activation checkpointing full",
                                                   "  activation checkpointing selective", NULL,
                                                   "  checkpointing full + optimizer on NVMe"};
    char nvme_label[80];
    size_t nbuf = w->po->offload_buffer_count > 0 ? (size_t)w->po->offload_buffer_count : 4;
    size_t nbytes = w->po->offload_buffer_bytes ? w->po->offload_buffer_bytes : (size_t)64 << 20;
    snprintf(nvme_label, sizeof nvme_label, "  optimizer state on NVMe (%zu x %.*f MiB)", nbuf,
             nbytes % 1048576 ? 2 : 0, nbytes / 1048576.0);
    for (int v = 1; v < ZT_EST_VARIANTS; v++) {
        fprintf(out, "%-44s", v == ZT_EST_NVME ? nvme_label : vlabels[v]);
        for (int s = 0; s < ZT_EST_STRATEGIES; s++) cell(out, est->col[s].peak[v], div, decimals);
        fputc('\n', out);
    }
    fprintf(out, "%-44s", "  (NVMe files per rank)");
    for (int s = 0; s < ZT_EST_STRATEGIES; s++) cell(out, est->col[s].offload_file_bytes, div, decimals);
    fputc('\n', out);
    bool io = false;
    for (int s = 0; s < ZT_EST_STRATEGIES; s++) io |= est->col[s].plan.offload_read_bytes != 0;
    if (io) { /* the request's own offload: what each step moves */
        fprintf(out, "%-44s", "NVMe I/O per step as given: read");
        for (int s = 0; s < ZT_EST_STRATEGIES; s++) cell(out, est->col[s].plan.offload_read_bytes, div, decimals);
        fprintf(out, "\n%-44s", "                            write");
        for (int s = 0; s < ZT_EST_STRATEGIES; s++) cell(out, est->col[s].plan.offload_write_bytes, div, decimals);
        fputc('\n', out);
        if (o->optim.kind == ZT_OPT_MUON || o->optim.kind == ZT_OPT_LAMB) /* engine/step_streamed.c */
            fprintf(out, "  (%s: every file streamed twice a step, the whole-tensor work between the passes%s)\n",
                    zt_optimizer_name(o->optim.kind),
                    o->optim.kind == ZT_OPT_MUON ? "; with the optimizer state in files, each matrix's U read and "
                                                   "its update written once more"
                                                 : "");
    }
    fprintf(out, "%-44s", "  (high-water of the rank needing the least)");
    for (int s = 0; s < ZT_EST_STRATEGIES; s++) cell(out, est->col[s].min_peak, div, decimals);
    fprintf(out, "\n\nClass rows are each class's own high-water; classes peak at different moments, so the\n"
            "high-water of their sum is below the sum of the rows. Shards are uneven, so ranks differ.\n");
    if (est->ranks_evaluated < w->world)
        fprintf(out, "%d of %d ranks planned: rank 0, the last, and those whose shards hold the most.\n",
                est->ranks_evaluated, w->world);
    fprintf(out, "Checkpointing and NVMe rows follow docs/memory.md (\"Activation checkpointing\", \"NVMe offload\").\n");
}

static cJSON *classes_json(const size_t *v) {
    cJSON *o = cJSON_CreateObject();
    for (int c = 0; c < ZT_MEM_CLASSES; c++) cJSON_AddNumberToObject(o, zt_mem_class_name((zt_mem_class)c), (double)v[c]);
    return o;
}

static int print_json(FILE *out, const shown *w, const zt_estimate *est, zt_error *err) {
    const zt_engine_options *o = w->opt;
    const zt_precision_bytes *pb = zt_precision_bytes_of(o->precision.mode);
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "model", w->model_name);
    if (w->config_path) cJSON_AddStringToObject(root, "config", w->config_path);
    cJSON_AddStringToObject(root, "source", "engine plan");
    cJSON_AddNumberToObject(root, "parameters", (double)zt_model_numel(w->model));
    double trainable = 0; /* elements: all of them unless --freeze / training.freeze */
    for (int i = 0; i < w->model->n_params; i++)
        if (w->model->params[i].trainable) trainable += (double)w->model->params[i].numel;
    cJSON_AddNumberToObject(root, "trainable_parameters", trainable);
    if (w->model->lora) {
        cJSON *l = cJSON_AddObjectToObject(root, "lora");
        cJSON_AddNumberToObject(l, "rank", w->model->lora->rank);
        cJSON_AddNumberToObject(l, "dropout", w->model->lora->dropout);
        cJSON_AddStringToObject(l, "target_modules", w->model->lora->target_modules);
        cJSON_AddStringToObject(l, "base_quant", zt_quant_name((zt_quant)w->model->lora->base_quant));
    }
    cJSON_AddNumberToObject(root, "world", w->world);
    cJSON_AddNumberToObject(root, "threads_per_rank", w->threads);
    cJSON_AddNumberToObject(root, "micro_batch", o->B);
    cJSON_AddNumberToObject(root, "seq_len", o->T);
    cJSON_AddNumberToObject(root, "grad_accum", o->grad_accum > 0 ? o->grad_accum : 1);
    cJSON_AddStringToObject(root, "precision", zt_precision_mode_name(o->precision.mode));
    cJSON_AddStringToObject(root, "reduce_dtype", zt_dtype_name(o->precision.reduce));
    cJSON *bpp = cJSON_AddObjectToObject(root, "bytes_per_element");
    cJSON_AddNumberToObject(bpp, "master", pb->master);
    cJSON_AddNumberToObject(bpp, "compute_copy", pb->copy);
    cJSON_AddNumberToObject(bpp, "grads", pb->grads);
    cJSON_AddNumberToObject(bpp, "moment", pb->moment);
    cJSON_AddStringToObject(root, "optimizer", zt_optimizer_name(o->optim.kind));
    cJSON_AddNumberToObject(root, "hybrid_shard_size", o->hybrid_shard_size);
    cJSON_AddNumberToObject(root, "ranks_evaluated", est->ranks_evaluated);
    if (w->configured >= 0) cJSON_AddStringToObject(root, "strategy", zt_strategy_name((zt_strategy)w->configured));
    cJSON *st = cJSON_AddObjectToObject(root, "strategies");
    for (int s = 0; s < ZT_EST_STRATEGIES; s++) {
        const zt_estimate_column *col = &est->col[s];
        cJSON *c = cJSON_AddObjectToObject(st, zt_strategy_name((zt_strategy)s));
        cJSON_AddNumberToObject(c, "rank", col->plan.rank);
        cJSON_AddItemToObject(c, "peak", classes_json(col->plan.peak));
        cJSON_AddItemToObject(c, "rest", classes_json(col->plan.rest));
        cJSON_AddNumberToObject(c, "peak_total", (double)col->peak[ZT_EST_AS_GIVEN]);
        cJSON_AddNumberToObject(c, "model_states", (double)zt_memory_plan_model_states(&col->plan));
        cJSON_AddNumberToObject(c, "min_peak_total", (double)col->min_peak);
        cJSON_AddNumberToObject(c, "min_rank", col->min_rank);
        cJSON *v = cJSON_AddObjectToObject(c, "variants");
        for (int k = 0; k < ZT_EST_VARIANTS; k++)
            cJSON_AddNumberToObject(v, zt_est_variant_name((zt_est_variant)k), (double)col->peak[k]);
        cJSON_AddNumberToObject(c, "nvme_file_bytes", (double)col->offload_file_bytes);
        cJSON_AddNumberToObject(c, "nvme_read_bytes_per_step", (double)col->plan.offload_read_bytes);
        cJSON_AddNumberToObject(c, "nvme_write_bytes_per_step", (double)col->plan.offload_write_bytes);
    }
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    if (!text) return zt_error_set(err, ZT_ERR_NOMEM, "estimate-memory: out of memory for the JSON");
    fprintf(out, "%s\n", text);
    free(text);
    return ZT_OK;
}

/* the configured strategy's high-water on every rank (they differ: shards are uneven) */
static int print_ranks(FILE *out, const shown *w, zt_error *err) {
    if (w->configured < 0 || w->world < 2 || w->world > 16) return ZT_OK;
    fprintf(out, "per rank (%s):", zt_strategy_name((zt_strategy)w->configured));
    zt_engine_options o = *w->opt;
    o.strategy = (zt_strategy)w->configured;
    zt_memory_experts_for(w->model, &o);
    for (int r = 0; r < w->world; r++) {
        zt_memory_plan p;
        int rc = zt_memory_plan_compute(w->model, &o, w->po, w->world, r, &p, err);
        if (rc) return rc;
        char b[32];
        zt_format_bytes(b, sizeof b, (double)p.peak_total);
        fprintf(out, " %d: %s%s", r, b, r + 1 < w->world ? "," : "\n");
    }
    return ZT_OK;
}

/* ---- --fit: the largest model of a shape that fits this machine -------------------------------- */
static double mem_available_bytes(void) {
    FILE *fp = fopen("/proc/meminfo", "r");
    char line[256];
    double kb = 0;
    while (fp && fgets(line, sizeof line, fp))
        if (sscanf(line, "MemAvailable: %lf kB", &kb) == 1) break;
    if (fp) fclose(fp);
    return kb * 1024.0;
}

static int print_fit(FILE *out, const char *name, zt_attention attention, int loss_chunk, const zt_engine_options *base_opt, int nproc,
                     const char *dir, double ram_gib, double disk_gib, bool json, zt_error *err) {
    zt_model_spec spec;
    int rc = zt_model_preset(name, &spec, err);
    if (rc) return rc;
    spec.gpt2.attention = spec.llama.attention = attention;
    spec.loss_chunk_tokens = zt_loss_chunk_for(loss_chunk, base_opt->B, base_opt->T);
    struct statvfs vfs;
    double avail = mem_available_bytes(), free_disk = statvfs(dir, &vfs) == 0 ? (double)vfs.f_bavail * vfs.f_frsize : 0;
    if (!ram_gib && !(avail > 0))
        return zt_error_set(err, ZT_ERR_USAGE, "estimate-memory --fit: cannot read MemAvailable from /proc/meminfo; "
                            "give --ram-gib");
    size_t ram = ram_gib ? (size_t)(ram_gib * 1073741824.0) : (size_t)(avail / nproc);
    size_t disk = disk_gib ? (size_t)(disk_gib * 1073741824.0) : (size_t)(free_disk / nproc);
    size_t overhead = (size_t)256 << 20; /* the process: code, libraries, MPI (docs/memory.md) */
    int L, NH, C, V, S;
    zt_model_spec_shape(&spec, &L, &NH, &C, &V, &S);
    if (!json)
        fprintf(out, "the largest %s-shaped model (%s, C=%d, NH=%d, V=%d; layers varied) that fits %d rank%s x "
                     "%.1f GiB of RAM (%s; 256 MiB of each kept for the process) and %.1f GiB of disk each (%s)\n"
                     "micro-batch %d x %d tokens, accumulation %d, precision %s, AdamW\n\n"
                     "%-8s %-20s %-14s %8s %12s %16s %12s\n",
                name, zt_arch_name(spec.arch), C, NH, V, nproc, nproc == 1 ? "" : "s", ram / 1073741824.0,
                ram_gib ? "--ram-gib" : "MemAvailable shared by the ranks", disk / 1073741824.0,
                disk_gib ? "--disk-gib" : dir, base_opt->B, base_opt->T, base_opt->grad_accum > 0 ? base_opt->grad_accum : 1,
                zt_precision_mode_name(base_opt->precision.mode), "strategy", "offload (nvme)", "checkpointing",
                "layers", "parameters", "high-water/rank", "files/rank");
    else
        fprintf(out, "{\"model\":\"%s\",\"ranks\":%d,\"ram_per_rank\":%zu,\"disk_per_rank\":%zu,\"fits\":[", name,
                nproc, ram, disk);
    static const char *OFF[] = {"none", "optimizer", "optimizer+params"};
    bool first = true;
    for (int s = 0; s < ZT_EST_STRATEGIES; s++)
        for (int off = 0; off < 3; off++)
            for (int ck = 0; ck < 2; ck++) {
                bool zero3 = s == ZT_STRATEGY_ZERO3 || s == ZT_STRATEGY_HYBRID;
                if (off == 2 && !zero3) continue; /* parameter offload is zero3's */
                zt_engine_options o = *base_opt;
                o.strategy = (zt_strategy)s;
                o.activation_checkpointing = ck ? ZT_RECOMPUTE_FULL : ZT_RECOMPUTE_NONE;
                zt_memory_plan_options po;
                zt_memory_plan_options_default(&po);
                po.offload_optimizer = off >= 1;
                po.offload_param = off == 2;
                zt_fit_result r;
                if ((rc = zt_fit_layers(&spec, &o, &po, nproc, ram, overhead, disk, 4096, &r, err))) return rc;
                char params[32] = "-", peak[32] = "-", files[32] = "-";
                if (r.n_layer) {
                    snprintf(params, sizeof params, "%.2fB%s", (double)r.params / 1e9, r.capped ? "+" : "");
                    snprintf(peak, sizeof peak, "%.2f GiB", r.peak / 1073741824.0);
                    snprintf(files, sizeof files, "%.2f GiB", r.file_bytes / 1073741824.0);
                }
                if (!json)
                    fprintf(out, "%-8s %-20s %-14s %8d %12s %16s %12s\n", s == ZT_STRATEGY_HYBRID ? "hybrid" :
                            zt_strategy_name((zt_strategy)s), OFF[off], ck ? "full" : "none", r.n_layer, params, peak, files);
                else
                    fprintf(out, "%s{\"strategy\":\"%s\",\"offload\":\"%s\",\"checkpointing\":\"%s\",\"n_layer\":%d,"
                            "\"parameters\":%lld,\"peak\":%zu,\"file_bytes\":%zu}", first ? "" : ",",
                            zt_strategy_name((zt_strategy)s), OFF[off], ck ? "full" : "none", r.n_layer,
                            (long long)r.params, r.peak, r.file_bytes);
                first = false;
            }
    if (json) fprintf(out, "]}\n");
    else fprintf(out, "\nlayers: the most the plan fits (+: the search's cap of 4096 layers); hybrid shards over %d "
                      "ranks. The plans count what the engine allocates (docs/memory.md), not the process itself.\n",
                 base_opt->hybrid_shard_size);
    return ZT_OK;
}

int zt_cmd_estimate(int argc, char **argv) {
    zt_error err = {0};
    const char *config = NULL, *model_name = NULL;
    int nproc = 0, B = 1, T = 0, ga = 1, hybrid = 0, threads = 0, ckpt = 0, offload = 0, nbuf = 0, nbuf_mb = 0, pick = 0;
    int tp = 1; /* --tp N (with a CONFIG: parallel.tensor_parallel_size): the model cut, planned per part */
    int cp = 1; /* --cp N (with a CONFIG: parallel.context_parallel_size): T/N positions per rank */
    zt_cp_mode cp_mode = ZT_CP_ALLGATHER;
    int ep = 1; /* --ep N (with a CONFIG: parallel.expert_parallel_size): the all-to-all's buffers */
    bool json = false, model_only_opt = false, fit = false;
    const char *offload_dir = ".";
    double ram_gib = 0, disk_gib = 0;
    zt_precision_mode prec = ZT_PRECISION_FP32;
    static const char *CKPT[] = {"none", "full", "selective"}, *OFFLOAD[] = {"none", "nvme", "nvme+param"},
                      *REDUCE[] = {"fp32", "bf16", "fp16"}; /* index = zt_dtype */
    int reduce = 0;
    const char *freeze = NULL; /* --freeze REGEX (with a CONFIG: training.freeze) */
    zt_attention attention = ZT_ATTENTION_FLASH; /* --attention (with a CONFIG: model.attention) */
    int loss_chunk = 0; /* --loss-chunk (with a CONFIG: memory.loss_chunk_tokens) */
    zt_lora_config lora = {.alpha = 8.0f}; /* --lora-rank, --lora-targets, --lora-dropout */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--json")) {
            json = true;
            continue;
        }
        if (!strcmp(a, "--fit")) {
            fit = true;
            continue;
        }
        static const char *with_value[] = {"--model", "--nproc", "-B", "-T", "--grad-accum", "--precision", "--reduce-dtype",
                                           "--hybrid-shard", "--threads", "--set", "--checkpointing", "--offload",
                                           "--nvme-buffers", "--nvme-buffer-mb", "--offload-dir", "--ram-gib",
                                           "--disk-gib", "--freeze", "--tp", "--cp", "--cp-mode", "--ep", "--lora-rank", "--lora-targets",
                                           "--lora-dropout", "--quant", "--attention", "--loss-chunk"};
        bool takes = false;
        for (size_t k = 0; k < sizeof with_value / sizeof *with_value; k++) takes |= !strcmp(a, with_value[k]);
        if (takes) {
            if (i + 1 >= argc) {
                zt_error_set(&err, ZT_ERR_USAGE, "estimate-memory: %s needs a value", a);
                return zt_cli_fail(&err);
            }
            const char *v = argv[++i];
            int rc = ZT_OK;
            if (!strcmp(a, "--model")) model_name = v;
            else if (!strcmp(a, "--nproc")) rc = zt_cli_parse_int(CMD, a, v, 1, 65536, &nproc, &err);
            else if (!strcmp(a, "--threads")) rc = zt_cli_parse_int(CMD, a, v, 1, 4096, &threads, &err);
            else if (!strcmp(a, "--set")) continue; /* applied after the file, below */
            else if (!strcmp(a, "--offload-dir")) offload_dir = v;
            else if (!strcmp(a, "--ram-gib") || !strcmp(a, "--disk-gib")) {
                char *end;
                double x = strtod(v, &end);
                if (*end || !(x > 0)) rc = zt_error_set(&err, ZT_ERR_USAGE, "estimate-memory: %s %s: expected a "
                                                        "positive number of GiB", a, v);
                *(!strcmp(a, "--ram-gib") ? &ram_gib : &disk_gib) = x;
            }
            else {
                model_only_opt = true;
                if (!strcmp(a, "-B")) rc = zt_cli_parse_int(CMD, a, v, 1, 1 << 20, &B, &err);
                else if (!strcmp(a, "--freeze")) freeze = v;
                else if (!strcmp(a, "--attention")) {
                    if ((rc = zt_attention_parse(v, &attention, &err))) zt_error_prefix(&err, "estimate-memory: --attention");
                }
                else if (!strcmp(a, "--loss-chunk")) rc = zt_cli_parse_int(CMD, a, v, 0, INT_MAX, &loss_chunk, &err);
                else if (!strcmp(a, "--lora-rank")) rc = zt_cli_parse_int(CMD, a, v, 1, 65536, &lora.rank, &err);
                else if (!strcmp(a, "--quant")) {
                    if (!strcmp(v, "nf4")) lora.base_quant = ZT_QUANT_NF4;
                    else if (!strcmp(v, "int8")) lora.base_quant = ZT_QUANT_INT8;
                    else if (strcmp(v, "none"))
                        rc = zt_error_set(&err, ZT_ERR_USAGE, "estimate-memory: --quant %s: expected nf4, int8 or none "
                                          "(lora.base_quant)", v);
                }
                else if (!strcmp(a, "--lora-targets"))
                    snprintf(lora.target_modules, sizeof lora.target_modules, "%s", v);
                else if (!strcmp(a, "--lora-dropout")) {
                    char *end;
                    double p = strtod(v, &end);
                    if (*end || !(p >= 0 && p < 1))
                        rc = zt_error_set(&err, ZT_ERR_USAGE, "estimate-memory: --lora-dropout %s: expected a number "
                                          "in [0, 1)", v);
                    lora.dropout = (float)p;
                }
                else if (!strcmp(a, "-T")) rc = zt_cli_parse_int(CMD, a, v, 1, 1 << 24, &T, &err);
                else if (!strcmp(a, "--grad-accum")) rc = zt_cli_parse_int(CMD, a, v, 1, 1 << 20, &ga, &err);
                else if (!strcmp(a, "--hybrid-shard")) rc = zt_cli_parse_int(CMD, a, v, 1, 65536, &hybrid, &err);
                else if (!strcmp(a, "--tp")) rc = zt_cli_parse_int(CMD, a, v, 1, 4096, &tp, &err);
                else if (!strcmp(a, "--cp")) rc = zt_cli_parse_int(CMD, a, v, 1, ZT_CP_MAX_PARTS, &cp, &err);
                else if (!strcmp(a, "--ep")) rc = zt_cli_parse_int(CMD, a, v, 1, 4096, &ep, &err);
                else if (!strcmp(a, "--cp-mode")) rc = zt_cp_mode_parse(v, &cp_mode, &err);
                else if (!strcmp(a, "--nvme-buffers")) rc = zt_cli_parse_int(CMD, a, v, 2, 1024, &nbuf, &err);
                else if (!strcmp(a, "--nvme-buffer-mb")) rc = zt_cli_parse_int(CMD, a, v, 1, 1 << 20, &nbuf_mb, &err);
                else if (!strcmp(a, "--precision")) rc = parse_precision(v, &prec, &err);
                else if (!strcmp(a, "--reduce-dtype")) rc = zt_cli_parse_choice(CMD, a, v, REDUCE, 3, &reduce, &err);
                else if (!strcmp(a, "--checkpointing")) rc = zt_cli_parse_choice(CMD, a, v, CKPT, 3, &ckpt, &err);
                else if (!strcmp(a, "--offload")) {
                    rc = zt_cli_parse_choice(CMD, a, v, OFFLOAD, 3, &pick, &err);
                    offload = pick;
                }
            }
            if (rc) return zt_cli_fail(&err);
        } else if (a[0] == '-') {
            zt_error_set(&err, ZT_ERR_USAGE, "estimate-memory: unknown option %s (see zerotrain estimate-memory --help)", a);
            return zt_cli_fail(&err);
        } else if (config) {
            zt_error_set(&err, ZT_ERR_USAGE, "estimate-memory: more than one CONFIG (%s, %s)", config, a);
            return zt_cli_fail(&err);
        } else {
            config = a;
        }
    }
    if (!config == !model_name) {
        zt_error_set(&err, ZT_ERR_USAGE, config ? "estimate-memory: give a CONFIG or --model NAME, not both"
                                                : "estimate-memory: give a CONFIG or --model NAME (see --help)");
        return zt_cli_fail(&err);
    }
    if (config && model_only_opt) {
        zt_error_set(&err, ZT_ERR_USAGE, "estimate-memory: -B, -T, --grad-accum, --precision, --reduce-dtype, --hybrid-shard, "
                     "--checkpointing, --offload, --nvme-*, --freeze, --attention, --loss-chunk and --lora-* go with --model; with a CONFIG use --set "
                     "(e.g. --set training.micro_batch_size=8, --set lora.rank=8)");
        return zt_cli_fail(&err);
    }
    zt_model *model = NULL;
    zt_engine_options eo;
    zt_memory_plan_options po;
    zt_memory_plan_options_default(&po);
    shown w = {.configured = -1, .config_path = config};
    static zt_train_config cfg; /* large (paths): off the stack */
    char title[600];
    if (config) {
        zt_train_config_default(&cfg);
        if (zt_train_config_load(&cfg, config, &err)) return zt_cli_fail(&err);
        for (int i = 1; i < argc; i++)
            if (!strcmp(argv[i], "--set") && i + 1 < argc && zt_train_config_set(&cfg, argv[++i], &err))
                return zt_cli_fail(&err);
        if (nproc) cfg.nproc = nproc;
        nproc = cfg.nproc;
        if (zt_train_config_validate_world(&cfg, nproc, &err)) {
            zt_error_prefix(&err, "with %d rank%s", nproc, nproc == 1 ? "" : "s");
            return zt_cli_fail(&err);
        }
        zt_model_spec spec;
        zt_train_config_model(&cfg, &spec);
        if (cfg.pipeline_parallel_size > 1) /* per stage */
            return print_stages(&cfg, &spec, nproc, &err) ? zt_cli_fail(&err) : 0;
        tp = cfg.tensor_parallel_size;
        cp = cfg.context_parallel_size > 1 ? cfg.context_parallel_size : 1;
        cp_mode = (zt_cp_mode)cfg.context_parallel_mode;
        ep = cfg.expert_parallel_size > 1 ? cfg.expert_parallel_size : 1;
        if (zt_model_spec_create(&spec, &model, &err)) return zt_cli_fail(&err);
        if (cut_for_tp(model, tp, nproc, &err) || cut_for_cp(model, cp, cp_mode, tp, nproc, &err) ||
            cut_for_ep(model, ep, tp, nproc, &err)) {
            zt_model_free(model);
            return zt_cli_fail(&err);
        }
        zt_train_engine_options(&cfg, nproc, NULL, &eo);
        if (cfg.strategy != ZT_STRATEGY_HYBRID && !cfg.hybrid_shard_size)
            eo.hybrid_shard_size = default_hybrid_shard(nproc / tp);
        po.offload_optimizer = cfg.offload_optimizer == ZT_CFG_OFFLOAD_NVME;
        w.configured = cfg.strategy;
        if (zt_model_freeze(model, cfg.freeze, NULL, &err)) {
            zt_error_prefix(&err, "training.freeze");
            zt_model_free(model);
            return zt_cli_fail(&err);
        }
        freeze = cfg.freeze[0] ? cfg.freeze : NULL;
        snprintf(title, sizeof title, "%s (model %s)", config, cfg.model_preset);
        model_name = cfg.model_preset;
    } else {
        if (zt_estimator_model(model_name, attention, &model, &err)) return zt_cli_fail(&err);
        if (!T) T = model->max_seq_len;
        if (zt_model_set_loss_chunk(model, zt_loss_chunk_for(loss_chunk, B, T), &err)) {
            zt_model_free(model);
            return zt_cli_fail(&err);
        }
        if (!nproc) nproc = 1;
        if ((lora.target_modules[0] || lora.dropout > 0 || lora.base_quant) && !lora.rank) {
            zt_error_set(&err, ZT_ERR_USAGE, "estimate-memory: --lora-targets, --lora-dropout and --quant go with --lora-rank r");
            zt_model_free(model);
            return zt_cli_fail(&err);
        }
        if (lora.rank && zt_model_add_lora(model, &lora, NULL, &err)) {
            zt_error_prefix(&err, "estimate-memory: --lora-rank %d", lora.rank);
            zt_model_free(model);
            return zt_cli_fail(&err);
        }
        if (zt_model_freeze(model, freeze, NULL, &err)) {
            zt_error_prefix(&err, "estimate-memory: --freeze");
            zt_model_free(model);
            return zt_cli_fail(&err);
        }
        if (T > model->max_seq_len) {
            zt_error_set(&err, ZT_ERR_USAGE, "estimate-memory: -T %d exceeds %s's context of %d tokens", T, model_name,
                         model->max_seq_len);
            zt_model_free(model);
            return zt_cli_fail(&err);
        }
        if (cut_for_tp(model, tp, nproc, &err) || cut_for_cp(model, cp, cp_mode, tp, nproc, &err) ||
            cut_for_ep(model, ep, tp, nproc, &err)) {
            zt_model_free(model);
            return zt_cli_fail(&err);
        }
        if (cp > 1 && T % (2 * cp)) {
            zt_error_set(&err, ZT_ERR_USAGE, "estimate-memory: --cp %d: 2 x %d does not divide -T %d", cp, cp, T);
            zt_model_free(model);
            return zt_cli_fail(&err);
        }
        if (!hybrid) hybrid = default_hybrid_shard(nproc / tp);
        if ((nproc / tp) % hybrid) {
            if (tp == 1)
                zt_error_set(&err, ZT_ERR_USAGE, "estimate-memory: --hybrid-shard %d does not divide --nproc %d", hybrid,
                             nproc);
            else
                zt_error_set(&err, ZT_ERR_USAGE, "estimate-memory: --hybrid-shard %d does not divide the %d "
                             "data-parallel ranks (--nproc %d / --tp %d)", hybrid, nproc / tp, nproc, tp);
            zt_model_free(model);
            return zt_cli_fail(&err);
        }
        zt_engine_options_default(&eo);
        eo.B = B;
        eo.T = T / cp; /* context parallelism: each rank's part of the sequence */
        eo.grad_accum = ga;
        eo.hybrid_shard_size = hybrid;
        zt_precision_default(&eo.precision, prec);
        eo.precision.reduce = (zt_dtype)reduce;
        if (zt_precision_check(&eo.precision, &err)) {
            zt_model_free(model);
            return zt_cli_fail(&err);
        }
        eo.activation_checkpointing = (zt_recompute)ckpt;
        po.offload_optimizer = offload >= 1;
        po.offload_param = offload == 2;
        snprintf(title, sizeof title, "%s", model_name);
    }
    if (cp > 1) {
        size_t len = strlen(title);
        snprintf(title + len, sizeof title - len, ", context parallel %d (%s): %d of every sequence's positions per rank",
                 cp, zt_cp_mode_name(cp_mode), eo.T);
    }
    if (tp > 1) { /* the plan is one part's, over the data-parallel ranks */
        size_t len = strlen(title);
        snprintf(title + len, sizeof title - len, ", tensor parallel %d: part 0 (the larger vocabulary share) over the "
                 "%d data-parallel ranks", tp, nproc / tp);
        nproc /= tp;
    }
    if (model->lora) { /* LoRA: the base frozen, the adapters trained */
        int64_t trainable = 0, adapted = 0;
        for (int i = 0; i < model->n_params; i++) {
            trainable += model->params[i].trainable ? model->params[i].numel : 0;
            adapted += model->params[i].lora == 'A';
        }
        size_t len = strlen(title);
        snprintf(title + len, sizeof title - len, ", LoRA rank %d on %lld Linears (%s): %lld of %lld parameters trained",
                 model->lora->rank, (long long)adapted, model->lora->target_modules, (long long)trainable,
                 (long long)zt_model_numel(model));
        len = strlen(title);
        if (model->lora->base_quant) /* QLoRA */
            snprintf(title + len, sizeof title - len, ", the base's Linears as %s",
                     zt_quant_name((zt_quant)model->lora->base_quant));
    }
    if (freeze) { /* the frozen parameters: pieces without gradients or optimizer state */
        int64_t frozen = 0;
        for (int i = 0; i < model->n_params; i++)
            if (!model->params[i].trainable) frozen += model->params[i].numel;
        size_t len = strlen(title);
        snprintf(title + len, sizeof title - len, ", %lld of %lld parameters frozen ('%s')", (long long)frozen,
                 (long long)zt_model_numel(model), freeze);
    }
    /* the buffers: --nvme-* when given, else a CONFIG's memory.offload_buffer_* (eo.offload) */
    po.offload_buffer_count = nbuf ? nbuf : eo.offload.buffer_count;
    po.offload_buffer_bytes = nbuf_mb ? (size_t)nbuf_mb << 20 : eo.offload.buffer_bytes;
    if (!threads) threads = default_threads(nproc);
    omp_set_num_threads(threads); /* the attention scratch follows the ranks' thread count */
    if (fit) {
        int rc = config ? zt_error_set(&err, ZT_ERR_USAGE, "estimate-memory: --fit goes with --model NAME")
                 : freeze || model->lora ? zt_error_set(&err, ZT_ERR_USAGE, "estimate-memory: --fit plans whole models; "
                                                        "it does not take --freeze or --lora-rank")
                        : print_fit(stdout, model_name, attention, loss_chunk, &eo, nproc, offload_dir, ram_gib, disk_gib, json, &err);
        zt_model_free(model);
        return rc ? zt_cli_fail(&err) : 0;
    }
    w.title = title;
    w.model_name = model_name;
    w.model = model;
    w.opt = &eo;
    w.po = &po;
    w.world = nproc;
    w.threads = threads;
    zt_estimate_request rq = {.model = model, .opt = eo, .plan = po, .world = nproc};
    zt_estimate *est = calloc(1, sizeof *est);
    int rc = est ? zt_estimate_run(&rq, est, &err) : zt_error_set(&err, ZT_ERR_NOMEM, "estimate-memory: out of memory");
    if (!rc && json) rc = print_json(stdout, &w, est, &err);
    if (!rc && !json) {
        print_text(stdout, &w, est);
        if (config) {
            zt_engine_options mine = eo;
            mine.strategy = cfg.strategy;
            if (cfg.strategy != ZT_STRATEGY_HYBRID) mine.hybrid_shard_size = eo.hybrid_shard_size;
            w.opt = &mine;
            rc = print_ranks(stdout, &w, &err);
        }
    }
    free(est);
    zt_model_free(model);
    return rc ? zt_cli_fail(&err) : 0;
}
