/* train_start.c - how a training run starts (zt_train_start): the data (train_data.c), the
 * model (frozen parameters, LoRA adapters), the set-up (setup.c: mesh, tensor parallelism, stages,
 * engine, pipeline) with the configuration's engine options (engine_options.c), the weights it
 * starts from (seeded, --init: .ztw, .safetensors or .gguf, model.init_hf, or --resume's commit), the skipped samples, the
 * checkpoint directory's checks, the batch buffers, the logs, and the run's FLOP rates. */
#include "train/train_internal.h"
#include "train/engine_options.h"
#include "train/train_recovery.h"
#include "ckpt/gguf.h"
#include "ckpt/hf.h"
#include "ckpt/peft.h"
#include "ckpt/safetensors.h"
#include "ckpt/weights.h"
#include "metrics/commlog.h"
#include "memory/plan.h"
#include "metrics/mfu.h"
#include "obs/trace.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

/* The whole model (every rank builds it; tensor parallelism and the stages cut it after), its
 * frozen parameters and LoRA adapters said. */
static int build_model(zt_run *r, zt_error *err) {
    const zt_train_config *cfg = r->cfg;
    zt_train_config_model(cfg, &r->spec);
    int rc = zt_model_spec_create(&r->spec, &r->model, err);
    if (rc) return rc;
    zt_model *model = r->model;
    int n_frozen = 0;
    if ((rc = zt_model_freeze(model, cfg->freeze, &n_frozen, err))) {
        zt_error_prefix(err, "training.freeze");
        return rc;
    }
    if (n_frozen) fprintf(r->out, "training.freeze: %d of %d parameters frozen\n", n_frozen, model->n_params);
    if (model->lora) { /* what trains: the adapters */
        int64_t trainable = 0, adapted = 0;
        for (int i = 0; i < model->n_params; i++) {
            trainable += model->params[i].trainable ? model->params[i].numel : 0;
            adapted += model->params[i].lora == 'A';
        }
        fprintf(r->out, "lora: rank %d, alpha %g, dropout %g on %lld Linears (target_modules %s): %lld trainable "
                "parameters of %lld (%.3f%%), the rest frozen\n", model->lora->rank, (double)model->lora->alpha,
                (double)model->lora->dropout, (long long)adapted, model->lora->target_modules, (long long)trainable,
                (long long)zt_model_numel(model), 100.0 * (double)trainable / (double)zt_model_numel(model));
        if (model->lora->base_quant) { /* QLoRA: what the quantized base holds */
            int n = 0;
            double elems = 0, bytes = 0;
            for (int i = 0; i < model->n_params; i++)
                if (model->params[i].quant) n++, elems += (double)model->params[i].numel,
                                            bytes += (double)zt_memory_quant_bytes(&model->params[i]);
            bool sharded = cfg->strategy == ZT_STRATEGY_ZERO3 ||
                           (cfg->strategy == ZT_STRATEGY_HYBRID && cfg->hybrid_inner == ZT_STRATEGY_ZERO3);
            fprintf(r->out, "lora.base_quant %s: %d frozen Linears (%.0f elements) stored in %.2f MiB (%.3f bits an "
                    "element; fp32 %.2f MiB), dequantized unit by unit%s\n",
                    zt_quant_name((zt_quant)model->lora->base_quant), n, elems, bytes / 1048576.0,
                    8.0 * bytes / (elems > 0 ? elems : 1), 4.0 * elems / 1048576.0,
                    sharded ? "; sharded over the shard group on whole blocks (each rank its part), all-gathered "
                              "per unit" : "");
        }
    }
    return ZT_OK;
}

/* The configuration's engine on this rank (setup.c), and a pipeline step's micro-batch slots. */
static int set_up(zt_run *r, zt_error *err) {
    const zt_train_config *cfg = r->cfg;
    zt_train_engine_options(cfg, r->world, r->world_comm, &r->eo);
    r->sched = zt_train_pp_schedule(cfg);
    zt_train_setup_options so = {.world = r->world_comm, .sizes = zt_train_mesh_sizes(cfg, &r->eo),
                                 .tp_key = "parallel.tensor_parallel_size", .stages = cfg->pipeline_stages,
                                 .cp_mode = (zt_cp_mode)cfg->context_parallel_mode,
                                 .schedule = r->sched, .init_weights = r->opts ? r->opts->init_weights : NULL};
    int rc = zt_train_setup_create(r->model, &so, &r->eo, &r->s, err);
    if (rc) return rc;
    r->drank = r->s.mesh->dp_rank; /* the samples' rank: a dp rank's cp ranks read the same samples */
    r->dworld = r->s.mesh->dp;
    if (r->s.pipe) {
        r->mbs = calloc((size_t)r->A, sizeof *r->mbs);
        r->mb_loss = calloc(2 * (size_t)r->A, sizeof *r->mb_loss); /* each micro-batch's fault factor, then its loss */
        if (!r->mbs || !r->mb_loss) return zt_error_set(err, ZT_ERR_NOMEM, "trainer: out of memory");
    }
    return ZT_OK;
}

/* What the run starts from: the seeded parameters, then --init's weights file, model.init_hf's
 * directory, lora.init_peft's adapters, --resume's commit; the skipped sample ranges; the checkpoint directory's checks. */
static int load_start(zt_run *r, zt_error *err) {
    const zt_train_config *cfg = r->cfg;
    const zt_train_options *opts = r->opts;
    zt_engine *e = r->s.e;
    if (!(r->cmeta = calloc(1, sizeof *r->cmeta))) return zt_error_set(err, ZT_ERR_NOMEM, "trainer: out of memory");
    int rc;
    if (opts && opts->init_weights && opts->init_weights[0]) {
        size_t n = strlen(opts->init_weights);
        bool st = n > 12 && !strcmp(opts->init_weights + n - 12, ".safetensors");
        bool gguf = n > 5 && !strcmp(opts->init_weights + n - 5, ".gguf");
        if ((rc = st     ? zt_safetensors_load(e, opts->init_weights, err)
                  : gguf ? zt_gguf_load(e, opts->init_weights, err)
                         : zt_weights_load(e, opts->init_weights, err)))
            return rc;
    }
    if (cfg->init_hf[0] && (rc = zt_hf_load_dir(e, cfg->init_hf, err))) return rc;
    if (cfg->lora_init_peft[0] && (rc = zt_peft_load_dir(e, cfg->lora_init_peft, err))) return rc;
    r->resumed = opts && opts->resume && opts->resume[0];
    if (r->resumed && (rc = zt_train_resume(r, err))) return rc;
    if (r->resumed) zt_train_data_resumed(r);
    zt_sampler *ts = &r->ts;
    if ((rc = zt_train_apply_skips(ts, &r->cmeta->run, cfg, r->sample_base, err))) /* cmeta: zeroed unless resumed */
        return rc;
    if (ts->n_skips) {
        char ranges[256] = "";
        for (int k = 0, used = 0; k < ts->n_skips && used + 48 < (int)sizeof ranges; k++)
            used += snprintf(ranges + used, sizeof ranges - used, "%s%llu..%llu", k ? ", " : "",
                             (unsigned long long)ts->skips[k].start,
                             (unsigned long long)(ts->skips[k].start + ts->skips[k].count - 1));
        fprintf(r->out, "data: global samples %s skipped (%s%s%s)\n", ranges,
                cfg->skip_samples[0] ? "data.skip_samples" : "",
                cfg->skip_samples[0] && r->cmeta->run.n_skips ? " and " : "",
                r->cmeta->run.n_skips ? "recorded in the checkpoint" : "");
    }
    return zt_train_check_ckpt_dir(r, err);
}

/* The batch buffers, the JSONL, the trace, the comm log. */
static int open_outputs(zt_run *r, zt_error *err) {
    const zt_train_options *opts = r->opts;
    size_t held = r->s.pipe ? (size_t)r->A : 1; /* a pipeline takes the step's micro-batches at once */
    r->inp = malloc(held * r->B * r->T * sizeof *r->inp);
    r->tgt = malloc(held * r->B * r->T * sizeof *r->tgt);
    if (!r->inp || !r->tgt) return zt_error_set(err, ZT_ERR_NOMEM, "trainer: out of memory");
    if (r->data.records && (!(r->data.pos = malloc(held * r->B * r->T * sizeof *r->data.pos)) ||
                            !(r->data.mb_weight = calloc(held, sizeof *r->data.mb_weight))))
        return zt_error_set(err, ZT_ERR_NOMEM, "trainer: out of memory");
    int rc;
    if (r->rank == 0 && r->cfg->log_path[0] && (rc = zt_jsonl_open(&r->log, r->cfg->log_path, err))) return rc;
    /* one file per rank (merged into trace_path at the end); a single process writes it directly */
    if (opts && opts->trace_path && opts->trace_path[0] &&
        (rc = zt_trace_open(opts->trace_path, r->world > 1 ? r->rank : -1, err)))
        return rc;
    if (opts && opts->comm_log) {
        zt_commlog_reset();
        zt_commlog_enable(true);
    }
    return ZT_OK;
}

/* The step's tokens and the FLOP rates MFU and HFU divide. */
static void rates(zt_run *r) {
    const zt_model *model = r->model;
    int T = r->T;
    r->micro_per_step = (int64_t)r->A * r->dworld;
    r->tokens_per_step = (int64_t)r->B * T * r->micro_per_step;
    r->threads = omp_get_max_threads();
    r->flops_per_token = model->train_flops_per_token ? model->train_flops_per_token(model, T) : 0;
    /* MFU: the model's 6N + 12LCT (metrics/mfu.h) over the peak of every core the job uses, for
     * the dtype the matrix products run in (bf16: the bf16 instruction's rate; fp16 runs in fp32) */
    r->peak = zt_job_peak_flops(r->threads, r->world, r->eo.precision.compute == ZT_DTYPE_BF16);
    /* HFU adds what activation checkpointing recomputes: r = recomputed / forward FLOPs */
    double recompute_flops = model->recompute_flops_per_token
                                 ? model->recompute_flops_per_token(model, T, r->eo.activation_checkpointing) : 0;
    r->hw_flops_per_token = zt_hfu_flops_per_token(
        r->flops_per_token, r->flops_per_token > 0 ? 3.0 * recompute_flops / r->flops_per_token : 0.0);
}

int zt_train_start(zt_run *r, zt_error *err) {
    int rc;
    if ((rc = zt_train_open_data(r, err)) || (rc = build_model(r, err)) || (rc = set_up(r, err)) || (rc = load_start(r, err)))
        return rc;
    r->frozen0 = zt_engine_frozen_hash(r->s.e); /* the frozen weights keep these bits (collective) */
    if ((rc = open_outputs(r, err)) || (rc = zt_train_cp_open(r, err))) return rc;
    rates(r);
    return ZT_OK;
}
