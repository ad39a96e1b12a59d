/* trainer.c - the training loop behind `zerotrain train`: data → forward/backward per micro-batch
 * → clip + optimizer → metrics, with periodic validation and a final weights file.
 *
 * The loop reads like pseudocode (llm.c): for each step, for each micro-batch, take the next
 * global samples, forward_backward (gradients accumulate); then step(lr). The loss is normalized
 * by the tokens of the whole global batch (dloss = 1 / (B·T·accumulation)), so splitting a batch
 * into micro-batches does not change the gradient. */
#include "engine/trainer.h"
#include "ckpt/checkpoint.h"
#include "ckpt/hf.h"
#include "ckpt/safetensors.h"
#include "ckpt/weights.h"
#include "comm/comm.h"
#include "comm/launcher.h"
#include "comm/mesh.h"
#include "shard/tp.h"
#include "core/fault.h"
#include "core/stop.h"
#include "data/sampler.h"
#include "engine/generate.h"
#include "engine/guard.h"
#include "engine/pipeline.h"
#include "engine/train_recovery.h"
#include "memory/plan.h"
#include "metrics/commlog.h"
#include "metrics/metrics.h"
#include "metrics/mfu.h"
#include "scale/peak.h"
#include "obs/trace.h"

#include <math.h>
#include <signal.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

static double now(void) { return omp_get_wtime(); }

/* Mean loss over the first cfg->eval_batches micro-batches of the validation file (always the same
 * windows, in file order, so successive evaluations are comparable). Rank r takes batches r, r+W,
 * ...; every rank runs the same number of forwards (zero3 gathers are collectives), the batches
 * past the end count zero. */
static int evaluate(zt_engine *e, zt_pipeline *pipe, zt_sampler *val, const zt_train_config *cfg, int rank, int world,
                    int32_t *inp, int32_t *tgt, double *out, zt_error *err) {
    int B = cfg->micro_batch, T = cfg->seq_len, V = zt_engine_model(e)->vocab_size;
    int64_t avail = (int64_t)(val->n_windows / (uint64_t)B), n = cfg->eval_batches;
    if (n > avail) n = avail;
    if (n < 1) n = 1;
    int64_t per_rank = (n + world - 1) / world;
    double sum = 0;
    for (int64_t j = 0; j < per_rank; j++) {
        int64_t i = j * world + rank;
        int rc = zt_sampler_batch(val, (uint64_t)(i < n ? i : 0) * (uint64_t)B, 1, B, inp, tgt, V, err);
        if (rc) return rc;
        zt_batch b = {.B = B, .T = T, .inputs = inp, .targets = tgt, .dloss = 0, .logits_pos = -1};
        float loss;
        if ((rc = pipe ? zt_pipeline_forward(pipe, &b, &loss, err) : zt_engine_forward(e, &b, &loss, NULL, err)))
            return rc;
        if (i < n) sum += loss;
    }
    int rc = zt_engine_sum_ranks(e, &sum, err);
    *out = sum / (double)n;
    return rc;
}

/* eval.target_loss reached: say so, with the wall time since the first step (evaluations included,
 * as MLPerf's time to train) and the training tokens consumed, and log a target_reached event. */
static int target_reached(zt_progress *prog, zt_jsonl *log, int rank, const zt_step_metrics *m, float target,
                          double seconds, uint64_t tokens, zt_error *err) {
    zt_progress_message(prog, "step %lld: val loss %.4f <= eval.target_loss %g: target reached after %.1f s and "
                        "%llu tokens; stopping", (long long)m->step, m->val_loss, (double)target, seconds,
                        (unsigned long long)tokens);
    if (rank != 0 || !log->fp) return ZT_OK;
    char ev[192];
    snprintf(ev, sizeof ev, "\"step\":%lld,\"val_loss\":%.6f,\"target\":%g,\"seconds\":%.3f,\"tokens\":%llu",
             (long long)m->step, m->val_loss, (double)target, seconds, (unsigned long long)tokens);
    return zt_jsonl_write_event(log, "target_reached", ev, err);
}

/* After the last step: each rank's planned and measured high-water per class and its RSS peak,
 * gathered to rank 0, which prints the table and logs the "memory" event. */
static int report_memory(zt_engine *e, zt_comm *world_comm, int world, int rank, FILE *out, zt_jsonl *log,
                         zt_error *err) {
    enum { NV = 2 * ZT_MEM_CLASSES + 3 };
    zt_memory_plan plan;
    zt_memory_report mem;
    zt_engine_memory_plan(e, &plan);
    zt_engine_memory(e, &mem);
    double mine[NV], *all = calloc((size_t)world * NV, sizeof *all);
    zt_memory_rank *ranks = calloc((size_t)world, sizeof *ranks);
    int rc = ZT_OK;
    if (!all || !ranks) rc = zt_error_set(err, ZT_ERR_NOMEM, "trainer: out of memory");
    for (int c = 0; c < ZT_MEM_CLASSES; c++) {
        mine[c] = (double)plan.peak[c];
        mine[ZT_MEM_CLASSES + c] = (double)mem.peak[c];
    }
    mine[2 * ZT_MEM_CLASSES] = (double)plan.peak_total;
    mine[2 * ZT_MEM_CLASSES + 1] = (double)mem.peak_total;
    mine[2 * ZT_MEM_CLASSES + 2] = (double)zt_rss_peak_bytes();
    if (!rc && world > 1) rc = zt_all_gather_f64(world_comm, mine, all, NV, "memory report", err);
    else if (!rc) memcpy(all, mine, sizeof mine);
    if (!rc && rank == 0) {
        for (int r = 0; r < world; r++) {
            const double *v = all + (size_t)r * NV;
            for (int c = 0; c < ZT_MEM_CLASSES; c++) {
                ranks[r].planned[c] = (size_t)v[c];
                ranks[r].measured[c] = (size_t)v[ZT_MEM_CLASSES + c];
            }
            ranks[r].planned_total = (size_t)v[2 * ZT_MEM_CLASSES];
            ranks[r].measured_total = (size_t)v[2 * ZT_MEM_CLASSES + 1];
            ranks[r].rss_peak = (uint64_t)v[2 * ZT_MEM_CLASSES + 2];
        }
        zt_memory_print_ranks(out, ranks, world);
        rc = zt_jsonl_write_memory_ranks(log, ranks, world, err);
    }
    free(all);
    free(ranks);
    return rc;
}

/* The collective deadline (comm.timeout_s, docs/reliability.md): fixed when the key is > 0 (or
 * ZT_COMM_TIMEOUT is set); else automatic: the comms' 300 s until the first step is done, then
 * max(60 s, 10 x the slowest step so far) during steps and max(300 s, 10 x the slowest save or
 * evaluation so far) around them and after the last step. A deadline only fires when no message moves for that long. */
typedef struct deadline {
    bool automatic;
    double slowest_step, slowest_save;
} deadline;

static void deadline_init(deadline *d, const zt_train_config *cfg, FILE *out) {
    const char *env = getenv("ZT_COMM_TIMEOUT");
    *d = (deadline){.automatic = !(cfg->comm_timeout_s > 0) && !(env && *env)};
    if (cfg->comm_timeout_s > 0) zt_comm_set_job_timeout(cfg->comm_timeout_s);
    if (cfg->comm_timeout_s > 0)
        fprintf(out, "collective deadline %g s (comm.timeout_s)\n", cfg->comm_timeout_s);
    else if (!d->automatic)
        fprintf(out, "collective deadline %s s (ZT_COMM_TIMEOUT)\n", env);
}

static void deadline_for_steps(const deadline *d) {
    if (d->automatic && d->slowest_step > 0) zt_comm_set_job_timeout(fmax(60.0, 10.0 * d->slowest_step));
}

static void deadline_for_save(const deadline *d) {
    if (d->automatic) zt_comm_set_job_timeout(fmax(300.0, 10.0 * d->slowest_save));
}

/* ZT_FAULT bitflip: one bit of this rank's copy of the first parameter (silent corruption). */
static void flip_a_bit(zt_engine *e) {
    int64_t n = 0;
    float *p = zt_engine_param_local(e, 0, NULL, &n);
    if (!p || n < 1) return;
    uint32_t u;
    memcpy(&u, p, 4);
    u ^= 1u << 22;
    memcpy(p, &u, 4);
}

/* fault.replica_check_every: every rank hashes the parameters as it holds them and the ranks
 * compare; a replica that differs from rank 0's is silent corruption (or a bug): ZT_ERR_NUMERICS
 * naming the ranks. all: (world) scratch doubles. A collective. */
static int check_replicas(zt_engine *e, zt_comm *world_comm, int world, int64_t step, int every, double *all,
                          zt_error *err) {
    uint64_t h = zt_engine_param_hash(e); /* local for replicated fp32 parameters */
    double mine;
    memcpy(&mine, &h, 8);
    int rc = zt_train_gather_world(world_comm, &mine, 1, all, "replica check", err);
    if (rc) return rc;
    char ranks[160] = "";
    size_t used = 0;
    uint64_t h0, hr = 0;
    memcpy(&h0, &all[0], 8);
    for (int r = 1; r < world && used + 12 < sizeof ranks; r++)
        if (memcmp(&all[r], &all[0], 8)) {
            if (!used) memcpy(&hr, &all[r], 8);
            used += (size_t)snprintf(ranks + used, sizeof ranks - used, "%s%d", used ? ", " : "", r);
        }
    if (!used) return ZT_OK;
    return zt_error_set(err, ZT_ERR_NUMERICS, "step %lld: the replicas diverge: rank(s) %s hold parameters hashing "
                        "%016llx where rank 0's hash %016llx (fault.replica_check_every = %d; silent data corruption "
                        "or a bug): stopping before this step's checkpoint", (long long)step, ranks,
                        (unsigned long long)hr, (unsigned long long)h0, every);
}

/* zt_weights_save_with's gather under pipeline parallelism: the whole model's parameter i on stage 0. */
static int pipeline_gather(void *ctx, int i, float *dst, zt_error *err) { return zt_pipeline_param_gather(ctx, i, dst, err); }

static double scaler_now(const zt_engine *e) {
    zt_loss_scaler s;
    zt_engine_get_loss_scaler(e, &s);
    return s.scale;
}

void zt_train_engine_options(const zt_train_config *cfg, int world, zt_comm *comm, zt_engine_options *eo) {
    zt_engine_options_default(eo);
    eo->B = cfg->micro_batch;
    eo->T = cfg->seq_len;
    eo->seed = cfg->seed;
    eo->optim = cfg->optim;
    eo->strategy = cfg->strategy;
    eo->comm = world > 1 ? comm : NULL;
    eo->hybrid_shard_size = cfg->hybrid_shard_size > 0 ? cfg->hybrid_shard_size
                                                       : zt_train_config_default_shard(cfg, world, NULL);
    eo->hybrid_inner = cfg->hybrid_inner;
    eo->keep_params_after_forward = !cfg->reshard_after_forward;
    eo->grad_accum = cfg->grad_accum;
    eo->reduce_every_micro_batch = cfg->reduce_every_micro_batch;
    eo->bucket_bytes = (size_t)((double)cfg->bucket_mb * 1048576.0);
    eo->no_overlap_comm = !cfg->overlap_comm;
    eo->no_prefetch = !cfg->prefetch;
    zt_precision_default(&eo->precision, (zt_precision_mode)cfg->precision);
    eo->precision.reduce = (zt_dtype)cfg->reduce_dtype;
    eo->precision.stochastic_rounding = cfg->stochastic_rounding;
    if (cfg->attention_dtype == ZT_CFG_ATTN_FP32) eo->precision.attention = ZT_DTYPE_FP32;
    eo->precision.loss_scale = cfg->loss_scale;
    eo->precision.initial_scale_power = cfg->initial_scale_power;
    eo->precision.loss_scale_window = cfg->loss_scale_window;
    eo->precision.hysteresis = cfg->hysteresis;
    eo->precision.consecutive_hysteresis = cfg->consecutive_hysteresis;
    eo->precision.min_loss_scale = cfg->min_loss_scale;
    eo->activation_checkpointing = (zt_recompute)cfg->activation_checkpointing; /* same values */
    eo->skip_nonfinite = cfg->fault_nonfinite_skips > 0; /* the step guard counts them (guard.c) */
    if (cfg->offload_param == ZT_CFG_OFFLOAD_NVME) eo->offload.param_dir = cfg->offload_param_nvme_path;
    if (cfg->offload_optimizer == ZT_CFG_OFFLOAD_NVME || cfg->offload_param == ZT_CFG_OFFLOAD_NVME) { /* docs/offload.md */
        if (cfg->offload_optimizer == ZT_CFG_OFFLOAD_NVME) eo->offload.optimizer_dir = cfg->offload_optimizer_nvme_path;
        eo->offload.buffer_count = cfg->offload_buffer_count;
        eo->offload.buffer_bytes = (size_t)((double)cfg->offload_buffer_mb * 1048576.0);
        eo->offload.io_threads = cfg->offload_io_threads;
        eo->offload.param_prefetch = cfg->offload_param_prefetch ? cfg->offload_param_prefetch : -1; /* 0: none */
        eo->offload.param_max_live = (size_t)cfg->offload_param_max_live;
    }
}

int zt_train(const zt_train_config *cfg, const zt_train_options *opts, zt_train_result *result,
             zt_error *err) {
    int rc = zt_train_config_validate(cfg, err);
    if (rc) return rc;
    FILE *out = opts && opts->out ? opts->out : stdout;
    zt_token_file train = {0}, valf = {0};
    zt_sampler ts = {0}, vs = {0};
    zt_model *model = NULL;
    zt_engine *e = NULL;
    zt_jsonl log = {0};
    int32_t *inp = NULL, *tgt = NULL;
    zt_ckpt_async *pending = NULL; /* an async checkpoint being written */
    zt_guard guard = {0};          /* the non-finite and loss-spike policies, the straggler report */
    zt_ckpt_meta *cmeta = NULL;    /* the commit resumed from or rolled back to (large: the run state) */
    double *per_rank = NULL, *work = NULL; /* (world * 4), (world): the step agreement's values */
    int64_t pending_step = -1;
    int failed_saves = 0; /* checkpoint.on_save_error continue: saves that failed so far */
    int B = cfg->micro_batch, T = cfg->seq_len, A = cfg->grad_accum;
    bool have_val = cfg->val_path[0] != '\0';
    zt_comm *world_comm = opts ? opts->world : NULL;
    zt_mesh *mesh = NULL; /* the parallel mesh (src/comm/mesh.h): every rank's coordinates */
    /* pipeline parallelism (src/engine/pipeline.h): this rank's stage model and schedule; smodel is
     * model without a pipeline */
    zt_model *smodel = NULL;
    zt_pipeline *pipe = NULL;
    zt_pp_cut cut = {0};
    int *pmap = NULL;
    zt_batch *mbs = NULL;
    float *mb_loss = NULL;
    /* the job: rank 0 speaks, every rank writes its trace; the data: split over the dp ranks */
    int rank = world_comm ? zt_comm_rank(world_comm) : 0, world = world_comm ? zt_comm_size(world_comm) : 1;
    FILE *devnull = NULL;
    if (rank != 0) { /* every rank runs the same code; only rank 0 speaks */
        devnull = fopen("/dev/null", "w");
        if (!devnull) return zt_error_set(err, ZT_ERR_IO, "rank %d: cannot open /dev/null", rank);
        out = devnull;
    }

    if ((rc = zt_token_file_open(&train, cfg->train_path, err))) goto done;
    if ((rc = zt_sampler_init(&ts, &train, T, cfg->seed, true, err)))
        goto data_error_train;
    if (have_val) {
        if ((rc = zt_token_file_open(&valf, cfg->val_path, err))) goto done;
        if ((rc = zt_sampler_init(&vs, &valf, T, cfg->seed, false, err))) {
            zt_error_prefix(err, "data.val %s", cfg->val_path);
            goto done;
        }
    }
    zt_model_spec spec;
    zt_train_config_model(cfg, &spec);
    if ((rc = zt_model_spec_create(&spec, &model, err))) goto done;
    int n_frozen = 0;
    if ((rc = zt_model_freeze(model, cfg->freeze, &n_frozen, err))) {
        zt_error_prefix(err, "training.freeze");
        goto done;
    }
    if (n_frozen) fprintf(out, "training.freeze: %d of %d parameters frozen\n", n_frozen, model->n_params);
    if (model->lora) { /* what trains: the adapters */
        int64_t trainable = 0, adapted = 0;
        for (int i = 0; i < model->n_params; i++) {
            trainable += model->params[i].trainable ? model->params[i].numel : 0;
            adapted += model->params[i].lora == 'A';
        }
        fprintf(out, "lora: rank %d, alpha %g, dropout %g on %lld Linears (target_modules %s): %lld trainable "
                "parameters of %lld (%.3f%%), the rest frozen\n", model->lora->rank, (double)model->lora->alpha,
                (double)model->lora->dropout, (long long)adapted, model->lora->target_modules, (long long)trainable,
                (long long)zt_model_numel(model), 100.0 * (double)trainable / (double)zt_model_numel(model));
    }
    zt_engine_options eo;
    zt_train_engine_options(cfg, world, world_comm, &eo);
    zt_mesh_sizes ms = {.tp = cfg->tensor_parallel_size, .pp = cfg->pipeline_parallel_size,
                        .hybrid = cfg->strategy == ZT_STRATEGY_HYBRID, .shard = eo.hybrid_shard_size};
    if ((rc = zt_mesh_create(world_comm, &ms, &mesh, err))) goto done;
    eo.mesh = mesh;
    /* tensor parallelism: this rank's part of the heads, MLP width and vocabulary (src/shard/tp.h) */
    if ((rc = zt_tp_apply(model, mesh->tp, mesh->tp_rank, err))) {
        zt_error_prefix(err, "parallel.tensor_parallel_size %d", mesh->tp);
        goto done;
    }
    int drank = mesh->dp_rank, dworld = mesh->dp; /* this rank's place in the data-parallel axis */
    smodel = model;
    zt_pp_schedule sched = cfg->pipeline_schedule == ZT_CFG_PP_GPIPE ? ZT_PP_GPIPE : ZT_PP_1F1B;
    if (mesh->pp > 1) { /* this rank's stage: its units, their parameters (src/shard/stages.h) */
        if (opts && opts->init_weights && opts->init_weights[0]) {
            rc = zt_error_set(err, ZT_ERR_USAGE, "parallel.pipeline_parallel_size %d with --init %s: loading a weights "
                              "file is not under pipeline parallelism yet (a checkpoint is: --resume)", mesh->pp,
                              opts->init_weights);
            goto done;
        }
        if ((rc = zt_pipeline_cut(model, mesh->pp, cfg->pipeline_stages, B, T, zt_precision_lp_kind(&eo.precision), A,
                                  sched, &cut, err)))
            goto done;
        if (!(pmap = malloc((size_t)model->n_params * sizeof *pmap))) {
            rc = zt_error_set(err, ZT_ERR_NOMEM, "trainer: out of memory");
            goto done;
        }
        if ((rc = zt_pp_stage_model(model, &cut, mesh->pp_rank, &smodel, pmap, err))) goto done;
        zt_pipeline_engine_options(model, &cut, mesh->pp_rank, sched, A, &eo);
        mbs = calloc((size_t)A, sizeof *mbs);
        mb_loss = calloc(2 * (size_t)A, sizeof *mb_loss); /* each micro-batch's fault factor, then its loss */
        if (!mbs || !mb_loss) {
            rc = zt_error_set(err, ZT_ERR_NOMEM, "trainer: out of memory");
            goto done;
        }
    }
    if ((rc = zt_engine_create(smodel, &eo, &e, err))) goto done;
    if (mesh->pp > 1 && (rc = zt_pipeline_create(e, model, &cut, pmap, mesh, sched, &pipe, err))) goto done;
    int64_t start_step = 0, steps_done = 0;
    uint64_t sample_base = 0; /* logical global sample index where start_step begins */
    if (!(cmeta = calloc(1, sizeof *cmeta))) {
        rc = zt_error_set(err, ZT_ERR_NOMEM, "trainer: out of memory");
        goto done;
    }
    if ((rc = zt_engine_init_params(e, err))) goto done;
    if (opts && opts->init_weights && opts->init_weights[0]) {
        size_t n = strlen(opts->init_weights);
        bool st = n > 12 && !strcmp(opts->init_weights + n - 12, ".safetensors");
        if ((rc = st ? zt_safetensors_load(e, opts->init_weights, err) : zt_weights_load(e, opts->init_weights, err)))
            goto done;
    }
    if (cfg->init_hf[0] && (rc = zt_hf_load_dir(e, cfg->init_hf, err))) goto done;
    bool resumed = opts && opts->resume && opts->resume[0];
    if (resumed) {
        zt_ckpt_meta meta;
        char commit[4096];
        if ((rc = zt_ckpt_resume(e, opts->resume, cfg->ckpt_fallback, cfg->ckpt_allow_cast, out, commit, sizeof commit,
                                  cmeta, err)))
            goto done;
        meta = *cmeta;
        /* each rank chose its commit alone (checkpoint.fallback): they must have chosen the same */
        double agree = (double)meta.step;
        if ((rc = zt_train_sum_world(world_comm, &agree, "resume agreement", err))) goto done;
        if (agree != (double)meta.step * world) {
            rc = zt_error_set(err, ZT_ERR_CKPT, "rank %d resumed from %s (step %lld) but the ranks did not all "
                              "choose the same commit (their steps sum to %.0f): do they see the same files?",
                              rank, commit, (long long)meta.step, agree);
            goto done;
        }
        start_step = meta.step;
        sample_base = meta.samples_consumed;
        fprintf(out, "resumed from %s: step %lld, next global sample %llu (saved by %s on %d rank%s)\n",
                commit, (long long)meta.step, (unsigned long long)meta.samples_consumed, meta.strategy,
                meta.world, meta.world == 1 ? "" : "s");
    }
    if ((rc = zt_train_apply_skips(&ts, &cmeta->run, cfg, sample_base, err))) goto done; /* cmeta: zeroed unless resumed */
    if (ts.n_skips) {
        char ranges[256] = "";
        for (int k = 0, used = 0; k < ts.n_skips && used + 48 < (int)sizeof ranges; k++)
            used += snprintf(ranges + used, sizeof ranges - used, "%s%llu..%llu", k ? ", " : "",
                             (unsigned long long)ts.skips[k].start,
                             (unsigned long long)(ts.skips[k].start + ts.skips[k].count - 1));
        fprintf(out, "data: global samples %s skipped (%s%s%s)\n", ranges, cfg->skip_samples[0] ? "data.skip_samples" : "",
                cfg->skip_samples[0] && cmeta->run.n_skips ? " and " : "",
                cmeta->run.n_skips ? "recorded in the checkpoint" : "");
    }
    bool rollback_policy = cfg->fault_loss_spike_policy == ZT_CFG_SPIKE_ROLLBACK && cfg->fault_loss_spike_z > 0;
    if (rollback_policy && !(opts && opts->ckpt_dir && opts->ckpt_dir[0])) {
        rc = zt_error_set(err, ZT_ERR_USAGE, "fault.loss_spike_policy rollback needs a checkpoint directory to roll "
                          "back to (checkpoint.dir or --ckpt-dir)");
        goto done;
    }
    if (opts && opts->ckpt_dir && opts->ckpt_dir[0]) { /* every rank can write there, or exit 8 now */
        zt_error perr = {0};
        double bad = zt_ckpt_probe(opts->ckpt_dir, rank, &perr) ? 1 : 0, any = bad;
        if ((rc = zt_train_sum_world(world_comm, &any, "checkpoint directory probe", err))) goto done;
        if (any > 0) {
            rc = bad ? (*err = perr, perr.code)
                     : zt_error_set(err, ZT_ERR_IO, "checkpoint directory %s is not writable by %.0f of the ranks "
                                    "(their messages say why)", opts->ckpt_dir, any);
            goto done;
        }
    }
    uint64_t frozen0 = zt_engine_frozen_hash(e); /* the frozen weights keep these bits (collective) */
    size_t held = pipe ? (size_t)A : 1; /* a pipeline takes the step's micro-batches at once */
    inp = malloc(held * B * T * sizeof *inp);
    tgt = malloc(held * B * T * sizeof *tgt);
    if (!inp || !tgt) {
        rc = zt_error_set(err, ZT_ERR_NOMEM, "trainer: out of memory");
        goto done;
    }
    if (rank == 0 && cfg->log_path[0] && (rc = zt_jsonl_open(&log, cfg->log_path, err))) goto done;
    /* one file per rank (merged into trace_path at the end); a single process writes it directly */
    if (opts && opts->trace_path && opts->trace_path[0] &&
        (rc = zt_trace_open(opts->trace_path, world > 1 ? rank : -1, err)))
        goto done;
    if (opts && opts->comm_log) {
        zt_commlog_reset();
        zt_commlog_enable(true);
    }

    int64_t micro_per_step = (int64_t)A * dworld, tokens_per_step = (int64_t)B * T * micro_per_step;
    int threads = omp_get_max_threads();
    double flops_per_token = model->train_flops_per_token ? model->train_flops_per_token(model, T) : 0;
    /* MFU: the model's 6N + 12LCT (metrics/mfu.h) over the peak of every core the job uses, for
     * the dtype the matrix products run in (bf16: the bf16 instruction's rate; fp16 runs in fp32) */
    double peak = zt_job_peak_flops(threads, world, eo.precision.compute == ZT_DTYPE_BF16);
    /* HFU adds what activation checkpointing recomputes: r = recomputed / forward FLOPs */
    double recompute_flops = model->recompute_flops_per_token
                                 ? model->recompute_flops_per_token(model, T, eo.activation_checkpointing) : 0;
    double hw_flops_per_token =
        zt_hfu_flops_per_token(flops_per_token, flops_per_token > 0 ? 3.0 * recompute_flops / flops_per_token : 0.0);
    fprintf(out, "zerotrain %s | model %s (%s) L=%d C=%d NH=%d", ZT_VERSION, zt_arch_name(spec.arch),
            cfg->model_preset, cfg->model.n_layer, cfg->model.n_embd, cfg->model.n_head);
    if (spec.arch == ZT_ARCH_LLAMA)
        fprintf(out, " NKV=%d I=%d%s", cfg->model.n_kv_head, cfg->model.intermediate_size,
                cfg->model.tie_embeddings ? " tied" : "");
    fprintf(out, " V=%d | %.2fM parameters (%lld)\n", cfg->model.vocab_size, (double)zt_model_numel(model) / 1e6,
            (long long)zt_model_numel(model));
    fprintf(out, "data %s: %zu tokens (%llu windows of %d) | val %s | batch %d x %d x accumulation %d x "
            "%d ranks = %lld tokens/step | %d threads per rank\n",
            cfg->train_path, train.n, (unsigned long long)ts.n_windows, T,
            have_val ? cfg->val_path : "none", B, T, A, dworld, (long long)tokens_per_step, threads);
    fprintf(out, "parallel: strategy %s on %d rank%s", zt_strategy_name(cfg->strategy), world,
            world > 1 ? "s" : "");
    if (cfg->strategy == ZT_STRATEGY_HYBRID) { /* with 0: where the default came from */
        const char *src = "";
        if (cfg->hybrid_shard_size == 0) zt_launcher_default_shard_size(world, &src);
        fprintf(out, " (%s in shard groups of %d%s%s)", zt_strategy_name(cfg->hybrid_inner), eo.hybrid_shard_size,
                *src ? ", ranks per node from " : cfg->hybrid_shard_size == 0 ? ", the world: one node" : "", src);
    }
    if (mesh->tp * mesh->pp > 1)
        fprintf(out, " | mesh tp %d x dp %d x pp %d (tp innermost: docs/parallelism.md)", mesh->tp, mesh->dp,
                mesh->pp);
    if (pipe) {
        char cut_text[512];
        zt_pp_describe(model, &cut, cut_text, sizeof cut_text);
        fprintf(out, " | pipeline %s, %d micro-batches, %s", zt_pp_schedule_name(sched), A, cut_text);
    }
    if (eo.activation_checkpointing != ZT_RECOMPUTE_NONE)
        fprintf(out, " | activation checkpointing %s", zt_recompute_name(eo.activation_checkpointing));
    fprintf(out, " | buckets %.0f MiB%s\n", cfg->bucket_mb,
            cfg->reduce_every_micro_batch ? " | reduce every micro-batch" : "");
    char policy[256];
    zt_precision_describe(&eo.precision, policy, sizeof policy);
    fprintf(out, "precision %s\n", policy);
    char platform[800];
    zt_platform_describe(platform, sizeof platform);
    fprintf(out, "%s\n", platform);
    zt_memory_plan plan;
    zt_engine_memory_plan(e, &plan);
    char plan_text[512];
    zt_memory_plan_line(&plan, plan_text, sizeof plan_text);
    fprintf(out, "optimizer %s | memory plan of rank 0 (zerotrain estimate-memory): %s\n",
            cfg->optim.kind == ZT_OPT_ADAMW ? "adamw" : "sgd", plan_text);
    if (zt_engine_offload_describe(e)[0])
        fprintf(out, "offload: %s in files (memory holds the staging buffers%s): %s\n",
                eo.offload.optimizer_dir && eo.offload.param_dir ? "optimizer state and parameter pieces"
                : eo.offload.param_dir                           ? "parameter pieces"
                                                                 : "optimizer state",
                eo.offload.param_dir ? " and the units' windows of pieces (docs/offload.md)" : "", zt_engine_offload_describe(e));
    bool ckpt_async = opts && opts->ckpt_async;
    if (ckpt_async && zt_engine_offload_describe(e)[0]) {
        fprintf(out, "checkpoint: --ckpt-async writes in the foreground when state is offloaded "
                "(a snapshot would bring it back into memory)\n");
        ckpt_async = false;
    }

    zt_progress prog;
    zt_progress_init(&prog, out);
    uint64_t per_step_samples = (uint64_t)B * (uint64_t)micro_per_step;
    double t_start = now(), first_loss = NAN, last_loss = NAN, last_val = NAN;
    int64_t skipped_steps = 0;
    if (rank == 0 && log.fp) {
        char ev[400];
        snprintf(ev, sizeof ev, "\"mode\":\"%s\",\"params\":\"%s\",\"compute\":\"%s\",\"reduce\":\"%s\","
                 "\"accumulate\":\"%s\",\"grads\":\"%s\",\"moments\":\"%s\",\"stochastic_rounding\":%s,"
                 "\"attention\":\"%s\"",
                 zt_precision_mode_name(eo.precision.mode), zt_dtype_name(eo.precision.params),
                 zt_dtype_name(eo.precision.compute), zt_dtype_name(eo.precision.reduce),
                 zt_dtype_name(eo.precision.accumulate), zt_dtype_name(eo.precision.grads),
                 zt_dtype_name(eo.precision.moments), eo.precision.stochastic_rounding ? "true" : "false",
                 zt_dtype_name(eo.precision.attention));
        char cev[900];
        zt_platform_json(cev, sizeof cev);
        if ((rc = zt_jsonl_write_event(&log, "cpu", cev, err)) ||
            (rc = zt_jsonl_write_event(&log, "precision", ev, err)) ||
            (rc = zt_jsonl_write_memory_plan(&log, &plan, err)))
            goto done;
    }
    zt_offload_stats last_io = {0}; /* the last step's NVMe traffic (rank 0's files) */
    deadline dl;
    deadline_init(&dl, cfg, out);
    if (cfg->comm_check_collectives) zt_comm_set_check(true); /* every rank has the same config */
    if ((rc = zt_guard_init(&guard, cfg, world, err))) goto done;
    if (resumed && cmeta->run.window && guard.window &&
        !zt_guard_window_restore(&guard, cmeta->run.window, cmeta->run.losses, cmeta->run.n_losses, cmeta->run.head))
        fprintf(out, "fault.loss_spike_window %d: the checkpoint's window of %d losses is not this one; it refills "
                "from empty\n", guard.window, cmeta->run.window);
    per_rank = malloc((size_t)world * 4 * sizeof *per_rank);
    work = malloc((size_t)world * sizeof *work);
    if (!per_rank || !work) {
        rc = zt_error_set(err, ZT_ERR_NOMEM, "trainer: out of memory");
        goto done;
    }
    int64_t end_step = cfg->steps;
    if (opts && opts->stop_after > 0 && opts->stop_after < end_step) end_step = opts->stop_after;
    if (have_val && cfg->eval_at_start && start_step < end_step) { /* the loss before training (eval_on_start) */
        double v;
        if ((rc = evaluate(e, pipe, &vs, cfg, drank, dworld, inp, tgt, &v, err))) goto done;
        zt_progress_message(&prog, "step %lld: val loss %.4f (before training)", (long long)start_step, v);
    }
    double t_loop = now(); /* eval.target_loss's clock: from the first step, evaluations included */
    for (int64_t step = start_step; step < end_step; step++) {
        zt_comm_bytes junk; /* evaluation and checkpoint traffic since the last step is not this step's */
        zt_engine_comm_bytes(e, &junk, true);
        zt_offload_stats io;
        zt_engine_offload_stats(e, &io, true);
        zt_engine_reset_times(e);
        char step_name[32];
        snprintf(step_name, sizeof step_name, "step %lld", (long long)step + 1);
        zt_fault_set_step(step + 1);
        zt_comm_note_step(step + 1);
        if (zt_fault_point(ZT_FAULT_AT_STEP, NULL) == ZT_FAULT_BITFLIP) flip_a_bit(e);
        zt_trace_begin("step", step_name);
        double t0 = now(), data_s = 0, fb_s = 0, loss_sum = 0;
        /* the schedule follows applied updates: an fp16 step skipped for overflow does not advance
         * it (DeepSpeed steps its scheduler only when the optimizer stepped); in every other mode
         * the two counts are equal */
        float lr = zt_lr_at(&cfg->lr, (int64_t)zt_engine_step_count(e));
        for (int micro = 0; micro < A; micro++) {
            zt_trace_begin("data", "batch");
            double td = now();
            /* rank r's micro-batch k is global micro-batch r*A + k of this step */
            uint64_t first = sample_base + (uint64_t)(step - start_step) * per_step_samples +
                             ((uint64_t)drank * A + micro) * (uint64_t)B; /* logical: zt_sampler_get skips */
            size_t at = pipe ? (size_t)micro * B * T : 0; /* a pipeline keeps every micro-batch of the step */
            if ((rc = zt_sampler_batch(&ts, first, 1, B, inp + at, tgt + at, model->vocab_size, err)))
                goto data_error_train;
            double tf = now();
            data_s += tf - td;
            zt_trace_end();
            zt_batch b = {.B = B, .T = T, .inputs = inp + at, .targets = tgt + at,
                          .dloss = 1.0f / (float)tokens_per_step, .logits_pos = -1};
            long farg = 1; /* ZT_FAULT nan/inf: a poisoned gradient; spike: a loss x farg */
            zt_fault_kind fk = zt_fault_point(ZT_FAULT_AT_FWD, &farg);
            if (fk == ZT_FAULT_NAN || fk == ZT_FAULT_INF) b.dloss = fk == ZT_FAULT_NAN ? NAN : INFINITY;
            if (pipe) { /* run below, all micro-batches on the schedule */
                mbs[micro] = b;
                mb_loss[micro] = fk == ZT_FAULT_SPIKE ? (float)farg : 1.0f;
                continue;
            }
            float loss;
            if ((rc = zt_engine_forward_backward(e, &b, &loss, err))) goto done;
            if (fk == ZT_FAULT_SPIKE) loss *= (float)farg;
            fb_s += now() - tf;
            loss_sum += loss;
        }
        if (pipe) {
            double tf = now();
            if ((rc = zt_pipeline_train(pipe, mbs, A, mb_loss + A, err))) goto done;
            for (int micro = 0; micro < A; micro++) loss_sum += mb_loss[A + micro] * mb_loss[micro]; /* x the spike */
            fb_s += now() - tf;
        }
        double comm_mid = zt_engine_comm_seconds(e); /* forward/backward's collectives */
        double to = now();
        /* every cross-rank decision comes from this one all-gather (docs/reliability.md): the loss
         * and how many ranks were asked to stop by SIGTERM, by SIGINT (each summed in rank order),
         * and each rank's own work this step (its time less its time in collectives) */
        int sig_here = zt_stop_requested();
        double mine[4] = {loss_sum, sig_here == SIGTERM, sig_here == SIGINT, now() - t0 - comm_mid}, agree[3] = {0};
        if (zt_fault_point(ZT_FAULT_AT_AGREE, NULL) == ZT_FAULT_SKIPCOLL) /* ZT_FAULT skipcoll: a desync */
            for (int r = 0; r < world; r++) memcpy(per_rank + 4 * r, mine, sizeof mine);
        else if ((rc = zt_train_gather_world(world_comm, mine, 4, per_rank, "step agreement (loss, stop requests, work)", err)))
            goto done;
        /* the loss of each data-parallel rank once (its tp ranks hold the same), in dp order */
        for (int r = 0; r < world; r++)
            for (int i = 0; i < 3; i++)
                if (i > 0 || zt_mesh_holds_loss(mesh, r)) agree[i] += per_rank[4 * r + i];
        for (int r = 0; r < world; r++) work[r] = per_rank[4 * r + 3];
        loss_sum = agree[0];
        bool stop = agree[1] + agree[2] > 0;
        double slow_mean, slow_median;
        /* the first step of a run is left out: its one-time costs (first touches, the products'
         * primitives) can hide a straggler's slowness or fake one, and decided when the report came */
        int slow = step > start_step ? zt_guard_straggler(&guard, work, &slow_mean, &slow_median) : -1;
        if (slow >= 0) {
            zt_progress_message(&prog, "step %lld: straggler: rank %d's own work took %.3f s per step (%d steps in a "
                                "row) against a median of %.3f s; the others wait for it", (long long)(step + 1), slow,
                                slow_mean, guard.slow_run[slow], slow_median);
            if (rank == 0 && log.fp) {
                char ev[160];
                snprintf(ev, sizeof ev, "\"step\":%lld,\"rank\":%d,\"work_s\":%.4f,\"median_s\":%.4f,\"steps\":%d",
                         (long long)(step + 1), slow, slow_mean, slow_median, guard.slow_run[slow]);
                if ((rc = zt_jsonl_write_event(&log, "straggler", ev, err))) goto done;
            }
        }
        double spike_z, spike_mean, spike_sd; /* the loss-spike policy: skip this update everywhere */
        bool spike = zt_guard_spike(&guard, loss_sum / (double)micro_per_step, &spike_z, &spike_mean, &spike_sd);
        if (spike) zt_engine_skip_next_step(e); /* rollback too: the engine is left as before the step */
        zt_fault_point(ZT_FAULT_AT_OPTIM, NULL);
        zt_step_report rep;
        zt_trace_begin("optimizer", "step");
        if ((rc = zt_engine_step(e, lr, &rep, err))) goto done;
        zt_trace_end();
        double t1 = now();
        zt_trace_end_args(1, (zt_trace_arg[]){ZT_TARG_NUM("lr", lr)}); /* the step span */
        if (spike && rollback_policy) {
            /* an async save in flight is committed first; then only if every rank sees a commit */
            zt_ckpt_async *prev = pending;
            pending = NULL;
            if ((rc = zt_ckpt_async_finish(prev, err))) goto done;
            char commit[4096];
            double have = zt_ckpt_resolve(opts->ckpt_dir, commit, sizeof commit, NULL) == ZT_OK;
            if ((rc = zt_train_sum_world(world_comm, &have, "loss-spike rollback: a commit to roll back to", err))) goto done;
            uint64_t first = sample_base + (uint64_t)(step - start_step) * per_step_samples;
            char ranges[200];
            zt_train_sample_ranges(&ts, first, per_step_samples, ranges, sizeof ranges);
            double loss_now = loss_sum / (double)micro_per_step;
            if (have == world) {
                deadline_for_save(&dl);
                if ((rc = zt_train_roll_back(e, opts->ckpt_dir, cfg, &ts, &guard, first, per_step_samples, world_comm, world, out, cmeta,
                                    commit, sizeof commit, err)))
                    goto done;
                deadline_for_steps(&dl);
                zt_progress_message(&prog, "step %lld: loss %.4f is a spike (z %.1f over the last %d steps: mean %.4f, "
                                    "sd %.4f; fault.loss_spike_z = %g): every rank rolled back to %s (step %lld) and "
                                    "skips global samples %s (step %lld's batch; recorded in the next checkpoints)",
                                    (long long)(step + 1), loss_now, spike_z, guard.window, spike_mean, spike_sd,
                                    guard.spike_z, commit, (long long)cmeta->step, ranges, (long long)(step + 1));
                if (rank == 0 && log.fp) {
                    char ev[400];
                    snprintf(ev, sizeof ev, "\"step\":%lld,\"loss\":%.17g,\"to_step\":%lld,\"skipped_samples\":\"%s\"",
                             (long long)(step + 1), loss_now, (long long)cmeta->step, ranges);
                    if ((rc = zt_jsonl_write_event(&log, "rollback", ev, err))) goto done;
                }
                start_step = cmeta->step;
                sample_base = cmeta->samples_consumed;
                step = start_step - 1; /* the loop goes on at the commit's next step */
                continue;
            }
            zt_progress_message(&prog, "step %lld: loss spike, but no commit to roll back to yet (fault.loss_spike_policy "
                                "rollback): the update is skipped instead", (long long)(step + 1));
        }
        zt_comm_bytes bytes;
        zt_engine_comm_bytes(e, &bytes, true);
        if (result) result->last_step_bytes = bytes;
        zt_step_metrics m = {.step = step + 1, .total_steps = cfg->steps, .loss = loss_sum / (double)micro_per_step,
                             .val_loss = NAN, .lr = lr, .grad_norm = rep.grad_norm,
                             .clip_coef = rep.clip_coef, .tokens = tokens_per_step,
                             .step_s = t1 - t0, .data_s = data_s, .fwdbwd_s = fb_s,
                             .optim_s = t1 - to, .elapsed_s = t1 - t_start};
        m.tok_per_s = (double)tokens_per_step / m.step_s;
        if (eo.precision.mode == ZT_PRECISION_FP16) {
            skipped_steps += rep.skipped;
            m.has_loss_scale = true;
            m.loss_scale = rep.loss_scale;
            m.skipped_steps = skipped_steps;
            if (rep.skip_reason == ZT_SKIP_OVERFLOW)
                zt_progress_message(&prog, "step %lld: fp16 gradients overflowed at loss scale %g: "
                                    "update skipped on every rank, scale now %g", (long long)(step + 1),
                                    rep.loss_scale, scaler_now(e));
        }
        m.mfu = zt_utilization(flops_per_token, (double)tokens_per_step, m.step_s, peak);
        m.hfu = zt_utilization(hw_flops_per_token, (double)tokens_per_step, m.step_s, peak);
        /* the breakdown: disjoint parts of [t0, t1] (metrics.h) */
        m.has_times = true;
        for (int u = 0; u < smodel->n_units; u++) {
            double f, bw;
            zt_engine_unit_times(e, u, &f, &bw);
            m.forward_s += f;
            m.backward_s += bw;
        }
        m.comm_s = zt_engine_comm_seconds(e);
        m.comm_wait_s = bytes.wait_s; /* the part of comm_s spent blocked in waits */
        zt_engine_offload_stats(e, &io, false);
        m.io_s = io.wait_s; /* the offloaded update's waits for the disk (0 without offload) */
        last_io = io;
        m.optim_s = (t1 - to) - (m.comm_s - comm_mid) - m.io_s;
        m.other_s = m.step_s - (m.data_s + m.forward_s + m.backward_s + m.comm_s + m.optim_s + m.io_s);
        m.has_memory = true;
        zt_engine_memory(e, &m.mem);
        m.rss_peak = zt_rss_peak_bytes();
        zt_trace_counter("memory MiB", 4, (zt_trace_arg[]){ZT_TARG_NUM("params", m.mem.params / 1048576.0),
                         ZT_TARG_NUM("grads peak", m.mem.peak_grads / 1048576.0),
                         ZT_TARG_NUM("optimizer", m.mem.optimizer / 1048576.0),
                         ZT_TARG_NUM("activations", m.mem.activations / 1048576.0)});
        int grc = zt_guard_after(&guard, &rep, m.loss, step + 1, err); /* counts, maybe stops: below */
        if (rep.skip_reason == ZT_SKIP_NONFINITE)
            zt_progress_message(&prog, "step %lld: gradient norm %g is not finite: update skipped on every rank "
                                "(%d in a row; fault.nonfinite_skips = %d)", (long long)(step + 1), rep.grad_norm,
                                guard.nonfinite_run, guard.max_nonfinite);
        else if (rep.skip_reason == ZT_SKIP_REQUESTED)
            zt_progress_message(&prog, "step %lld: loss %.4f is a spike (z %.1f over the last %d steps: mean %.4f, "
                                "sd %.4f; fault.loss_spike_z = %g): update skipped on every rank",
                                (long long)(step + 1), m.loss, spike_z, guard.window, spike_mean, spike_sd,
                                guard.spike_z);
        if (rank == 0 && log.fp && rep.skipped && rep.skip_reason != ZT_SKIP_OVERFLOW) {
            char ev[96];
            snprintf(ev, sizeof ev, "\"step\":%lld,\"reason\":\"%s\"", (long long)(step + 1),
                     rep.skip_reason == ZT_SKIP_NONFINITE ? "nonfinite" : "loss_spike");
            if ((rc = zt_jsonl_write_event(&log, "skipped_step", ev, err))) goto done;
        }
        if ((rc = grc)) goto done;
        if (cfg->fault_replica_check_every > 0 && (step + 1) % cfg->fault_replica_check_every == 0 &&
            (rc = check_replicas(e, world_comm, world, step + 1, cfg->fault_replica_check_every, per_rank, err)))
            goto done;
        if (steps_done++ == 0) first_loss = m.loss;
        last_loss = m.loss;
        bool last = step + 1 == end_step;
        dl.slowest_step = fmax(dl.slowest_step, m.step_s);
        deadline_for_save(&dl); /* evaluation and checkpoints (a no-op when neither comes) */
        if (have_val && !stop && ((cfg->eval_every > 0 && (step + 1) % cfg->eval_every == 0) || last)) {
            double te = now();
            zt_trace_begin("eval", "validation");
            if ((rc = evaluate(e, pipe, &vs, cfg, drank, dworld, inp, tgt, &m.val_loss, err))) goto done;
            zt_trace_end();
            m.eval_s = now() - te;
            last_val = m.val_loss;
            zt_progress_message(&prog, "step %lld: val loss %.4f", (long long)m.step, m.val_loss);
            if (cfg->eval_target_loss > 0.0f && m.val_loss <= cfg->eval_target_loss) {
                /* the target (eval.target_loss): this step ends the run as the last one would */
                last = true;
                end_step = step + 1;
                if ((rc = target_reached(&prog, &log, rank, &m, cfg->eval_target_loss, now() - t_loop,
                                         (uint64_t)(step + 1 - start_step) * (uint64_t)tokens_per_step, err)))
                    goto done;
            }
        }
        if (cfg->print_every > 0 && ((step + 1) % cfg->print_every == 0 || last || step == 0))
            zt_progress_step(&prog, &m);
        m.bytes = bytes;
        double tck = now();
        zt_trace_begin("checkpoint", "save");
        if (opts && opts->ckpt_dir && opts->ckpt_dir[0] &&
            (last || stop || (opts->ckpt_every > 0 && (step + 1) % opts->ckpt_every == 0))) {
            zt_ckpt_meta meta = {.step = step + 1,
                                 .samples_consumed = sample_base + (uint64_t)(step + 1 - start_step) * per_step_samples,
                                 .config_hash = zt_train_config_hash(cfg)};
            zt_train_run_state(&meta.run, &ts, &guard);
            double tc = now();
            if (ckpt_async && !last && !stop) {
                zt_ckpt_async *prev = pending; /* finish frees it, also on failure */
                pending = NULL;
                if ((rc = zt_ckpt_async_finish(prev, err)) &&
                    (rc = zt_train_on_save_error(cfg, rc, false, pending_step + 1, &prog, &log, rank, &failed_saves, err)))
                    goto done;
                if ((rc = zt_ckpt_save_async(e, opts->ckpt_dir, &meta, opts->keep_last, &pending, err))) {
                    if ((rc = zt_train_on_save_error(cfg, rc, false, step + 1, &prog, &log, rank, &failed_saves, err))) goto done;
                } else {
                    pending_step = step;
                    zt_progress_message(&prog, "step %lld: checkpoint snapshot taken (%.2f s), writing in the "
                                        "background", (long long)(step + 1), now() - tc);
                }
            } else {
                zt_ckpt_async *prev = pending; /* finish frees it, also on failure */
                pending = NULL;
                if ((rc = zt_ckpt_async_finish(prev, err)) &&
                    (rc = zt_train_on_save_error(cfg, rc, false, pending_step + 1, &prog, &log, rank, &failed_saves, err)))
                    goto done;
                if ((rc = zt_ckpt_save(e, opts->ckpt_dir, &meta, opts->keep_last, err))) {
                    if ((rc = zt_train_on_save_error(cfg, rc, last || stop, step + 1, &prog, &log, rank, &failed_saves, err)))
                        goto done;
                } else {
                    zt_progress_message(&prog, "step %lld: checkpoint saved to %s/step-%08lld (%.2f s)",
                                        (long long)(step + 1), opts->ckpt_dir, (long long)(step + 1), now() - tc);
                }
            }
        } else if (pending && step > pending_step) {
            /* the step after an async snapshot: commit it (errors surface here, on every rank) */
            zt_ckpt_async *a = pending;
            pending = NULL;
            if ((rc = zt_ckpt_async_finish(a, err)) &&
                (rc = zt_train_on_save_error(cfg, rc, false, pending_step + 1, &prog, &log, rank, &failed_saves, err)))
                goto done;
        }
        zt_trace_end();
        m.ckpt_s = now() - tck;
        dl.slowest_save = fmax(dl.slowest_save, fmax(m.ckpt_s, m.eval_s));
        deadline_for_steps(&dl);
        if ((rc = zt_jsonl_write_step(&log, &m, err))) goto done;
        if (stop) {
            zt_progress_finish(&prog);
            int sig = agree[1] > 0 ? SIGTERM : SIGINT;
            double asked = agree[1] + agree[2];
            if (opts && opts->ckpt_dir && opts->ckpt_dir[0])
                fprintf(out, "stop requested (%s on %.0f of %d rank%s): step %lld committed to %s/step-%08lld; "
                        "exiting %d (continue with --resume %s)\n", zt_signal_name(sig), asked,
                        world, world == 1 ? "" : "s", (long long)(step + 1), opts->ckpt_dir, (long long)(step + 1),
                        ZT_EXIT_STOPPED, opts->ckpt_dir);
            else
                fprintf(out, "stop requested (%s on %.0f of %d rank%s) after step %lld: no checkpoint directory "
                        "(checkpoint.dir or --ckpt-dir), so nothing could be saved; exiting %d\n",
                        zt_signal_name(sig), asked, world, world == 1 ? "" : "s",
                        (long long)(step + 1), ZT_EXIT_STOPPED);
            fflush(out);
            if (result) {
                result->stop_signal = sig;
                result->steps = step + 1;
            }
            goto done;
        }
    }
    deadline_for_save(&dl); /* what follows the loop saves, gathers and writes */
    if (pending) {
        zt_ckpt_async *a = pending;
        pending = NULL;
        if ((rc = zt_ckpt_async_finish(a, err))) goto done;
    }
    zt_progress_finish(&prog);
    /* planned against measured memory, every rank (a collective: all ranks are here) */
    if ((rc = report_memory(e, world_comm, world, rank, out, &log, err))) goto done;
    if (rank == 0 && zt_engine_offload_describe(e)[0] && end_step > start_step) {
        zt_memory_plan io_plan;
        zt_engine_memory_plan(e, &io_plan);
        fprintf(out, "offload I/O of the last step, rank 0: read %.2f MiB (the optimizer pass %.2f, the gathers' pieces "
                "%.2f), wrote %.2f MiB; planned read %.2f, write %.2f MiB\n",
                (last_io.read_bytes + last_io.gather_read_bytes) / 1048576.0, last_io.read_bytes / 1048576.0,
                last_io.gather_read_bytes / 1048576.0, last_io.write_bytes / 1048576.0,
                io_plan.offload_read_bytes / 1048576.0, io_plan.offload_write_bytes / 1048576.0);
    }
    if (opts && opts->ckpt_dir && opts->ckpt_dir[0] && end_step <= start_step) {
        /* nothing to train (resumed at or past --stop-after): save the loaded state in this run's
         * layout, i.e. reshard the checkpoint to this world size and strategy */
        zt_ckpt_meta meta = {.step = start_step, .samples_consumed = sample_base,
                             .config_hash = zt_train_config_hash(cfg)};
        zt_train_run_state(&meta.run, &ts, &guard);
        if ((rc = zt_ckpt_save(e, opts->ckpt_dir, &meta, opts->keep_last, err))) goto done;
        fprintf(out, "checkpoint re-saved to %s/step-%08lld for %d rank%s (%s)\n", opts->ckpt_dir,
                (long long)start_step, world, world == 1 ? "" : "s", zt_strategy_name(cfg->strategy));
    }
    uint64_t hash = 0; /* a collective under zero3 (and the pipeline): every rank calls it */
    if (!pipe) hash = zt_engine_param_hash(e);
    else if ((rc = zt_pipeline_param_hash(pipe, &hash, err))) goto done;
    if (pipe) { /* the bubble each stage measured (collective over the world) */
        double mine[2], *all = malloc((size_t)world * 2 * sizeof *all);
        zt_pipeline_bubble(pipe, &mine[0], &mine[1]);
        if (!all) {
            rc = zt_error_set(err, ZT_ERR_NOMEM, "trainer: out of memory");
            goto done;
        }
        if ((rc = zt_train_gather_world(world_comm, mine, 2, all, "pipeline bubble", err))) {
            free(all);
            goto done;
        }
        char text[512];
        size_t used = 0;
        for (int s = 0; s < mesh->pp && used + 40 < sizeof text; s++)
            used += (size_t)snprintf(text + used, sizeof text - used, "%s stage %d %.3f", s ? "," : "",
                                     s, all[2 * zt_mesh_world_rank(mesh, 0, 0, s)]);
        fprintf(out, "pipeline bubble (%s, p %d, m %d; time not in forward/backward over the schedule's time, steps "
                "after the first):%s | (p-1)/(m+p-1) = %.3f\n", zt_pp_schedule_name(sched), mesh->pp, A, text, mine[1]);
        free(all);
    }
    if (result) {
        result->stop_signal = 0;
        result->first_loss = first_loss;
        result->final_loss = last_loss;
        result->final_val_loss = last_val;
        result->param_hash = hash;
        result->steps = end_step; /* the last step trained (eval.target_loss may end it early) */
        result->seconds = now() - t_start;
    }
    uint64_t frozen1 = zt_engine_frozen_hash(e);
    if (frozen0 || frozen1)
        fprintf(out, "frozen parameters: xxh64 %016llx at the start, %016llx at the end (%s)\n",
                (unsigned long long)frozen0, (unsigned long long)frozen1, frozen0 == frozen1 ? "unchanged" : "CHANGED");
    fprintf(out, "done: %lld steps in %.1f s | loss %.4f -> %.4f | val %.4f | params xxh64 %016llx\n",
            (long long)steps_done, now() - t_start, first_loss, last_loss, last_val,
            (unsigned long long)hash);
    if (opts && opts->comm_log) {
        zt_commlog_enable(false);
        if (rank == 0) zt_commlog_print(out, rank);
        if ((rc = zt_commlog_write_jsonl(&log, err))) goto done;
    }
    if (zt_trace_on()) {
        if ((rc = zt_trace_close(err))) goto done;
        /* every rank's file is complete once all have passed the barrier; rank 0 merges them */
        if (world > 1 && (rc = zt_comm_barrier(world_comm, "trace merge", err))) goto done;
        if (world > 1 && rank == 0) {
            zt_error merr;
            if (zt_trace_merge_ranks(opts->trace_path, world, &merr))
                fprintf(out, "trace: per-rank files kept, not merged: %s\n", merr.msg);
            else
                fprintf(out, "trace: %s (%d ranks; chrome://tracing or https://ui.perfetto.dev)\n",
                        opts->trace_path, world);
        } else if (world == 1) {
            fprintf(out, "trace: %s (chrome://tracing or https://ui.perfetto.dev)\n", opts->trace_path);
        }
    }
    if (cfg->sample_tokens > 0) {
        char enc[1024], voc[1024];
        zt_bpe *bpe = NULL;
        zt_generate_options go = {.tokens = cfg->sample_tokens, .top_k = 40, .temperature = 0.8f,
                                  .seed = cfg->seed};
        fprintf(out, "--- sample (%d tokens, top-k 40, temperature 0.8) ---\n", cfg->sample_tokens);
        if ((rc = zt_bpe_default_paths(enc, voc, sizeof enc, err)) ||
            (rc = zt_bpe_load(&bpe, enc, voc, err)) || (rc = zt_generate(e, bpe, "", &go, out, err))) {
            zt_bpe_free(bpe);
            goto done;
        }
        zt_bpe_free(bpe);
    }
    if (opts && opts->save_path && opts->save_path[0]) {
        if ((rc = pipe ? zt_weights_save_with(model, pipeline_gather, pipe, opts->save_path, rank == 0, err)
                       : zt_weights_save(e, opts->save_path, rank == 0, err)))
            goto done;
        fprintf(out, "weights saved to %s\n", opts->save_path);
    }
    goto done;
data_error_train:
    zt_error_prefix(err, "data.train %s", cfg->train_path);
done:
    zt_comm_set_job_timeout(0); /* this run's deadline ends with it */
    zt_trace_close(NULL); /* an error path: the file is closed, the per-rank files stay unmerged */
    zt_commlog_enable(false);
    zt_ckpt_async_abandon(pending); /* an error path: the writer thread is joined, nothing commits */
    zt_jsonl_close(&log);
    zt_guard_free(&guard);
    free(cmeta);
    free(per_rank);
    free(work);
    free(inp);
    free(tgt);
    zt_pipeline_free(pipe);
    zt_engine_free(e);
    zt_mesh_free(mesh);
    if (smodel != model) zt_model_free(smodel);
    zt_model_free(model);
    free(pmap);
    free(mbs);
    free(mb_loss);
    zt_sampler_free(&ts);
    zt_sampler_free(&vs);
    zt_token_file_close(&train);
    zt_token_file_close(&valf);
    if (devnull) fclose(devnull);
    return rc;
}
