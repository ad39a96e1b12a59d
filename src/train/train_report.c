/* train_report.c - what a training run says: the banner before the first step (the model, data,
 * parallel layout, precision, platform, memory plan, offload) and the JSONL's first events; after
 * the last step the planned against measured memory of every rank, the offload I/O, the pipeline's
 * bubble, the summary line, the comm log, the trace, the sample and the weights file. */
#include "train/train_internal.h"
#include "train/train_recovery.h"
#include "ckpt/weights.h"
#include "comm/launcher.h"
#include "engine/generate.h"
#include "metrics/commlog.h"
#include "scale/peak.h"
#include "obs/trace.h"

#include <stdlib.h>
#include <string.h>

/* The model, data, parallel layout lines. */
static void banner_layout(zt_run *r) {
    const zt_train_config *cfg = r->cfg;
    const zt_model *model = r->model;
    const zt_mesh *mesh = r->s.mesh;
    FILE *out = r->out;
    int world = r->world;
    fprintf(out, "zerotrain %s | model %s (%s) L=%d C=%d NH=%d", ZT_VERSION, zt_arch_name(r->spec.arch),
            cfg->model_preset, cfg->model.n_layer, cfg->model.n_embd, cfg->model.n_head);
    if (r->spec.arch == ZT_ARCH_LLAMA)
        fprintf(out, " NKV=%d I=%d%s%s", cfg->model.n_kv_head, cfg->model.intermediate_size,
                cfg->model.tie_embeddings ? " tied" : "", cfg->model.qkv_bias ? " q/k/v biases" : "");
    if (r->spec.arch == ZT_ARCH_LLAMA && cfg->model.n_experts > 0) /* a mixture of experts */
        fprintf(out, " experts %d top-%d width %d", cfg->model.n_experts, cfg->model.n_experts_per_token,
                cfg->model.moe_intermediate_size > 0 ? cfg->model.moe_intermediate_size : cfg->model.intermediate_size);
    if (r->spec.arch == ZT_ARCH_LLAMA && cfg->model.n_experts > 0) { /* its shared expert (llama_moe_shared.c) */
        const zt_llama_config *l = &cfg->model;
        int ie = l->moe_intermediate_size > 0 ? l->moe_intermediate_size : l->intermediate_size;
        int is = l->shared_expert_intermediate_size > 0 ? l->shared_expert_intermediate_size : l->n_shared_experts * ie;
        if (is > 0) fprintf(out, " + shared %d%s", is, l->shared_expert_gate ? " gated" : "");
    }
    fprintf(out, " V=%d | %.2fM parameters (%lld)\n", cfg->model.vocab_size, (double)zt_model_numel(model) / 1e6,
            (long long)zt_model_numel(model));
    if (r->data.records) /* the records' own lines came before (train_data.c) */
        fprintf(out, "data %s: records, %llu sequences of %d (%s) | val %s", cfg->train_path,
                (unsigned long long)r->ts.n_windows, r->T, cfg->pack ? "packed" : "padded",
                !r->have_val ? "none" : cfg->val_path[0] ? cfg->val_path : "data.val_fraction");
    else
        fprintf(out, "data %s: %zu tokens (%llu windows of %d) | val %s", cfg->train_path, r->train.n,
                (unsigned long long)r->ts.n_windows, r->T, r->have_val ? cfg->val_path : "none");
    fprintf(out, " | batch %d x %d x accumulation %d x %d ranks = %lld tokens/step | %d threads per rank\n", r->B,
            r->T, r->A, r->dworld, (long long)r->tokens_per_step, r->threads);
    fprintf(out, "parallel: strategy %s on %d rank%s", zt_strategy_name(cfg->strategy), world,
            world > 1 ? "s" : "");
    if (cfg->strategy == ZT_STRATEGY_HYBRID) { /* with 0: where the default came from */
        const char *src = "";
        if (cfg->hybrid_shard_size == 0) zt_launcher_default_shard_size(world, &src);
        char cps[48] = ""; /* context parallelism: a replica's shard group is its cp x shard ranks */
        if (mesh->cp > 1) snprintf(cps, sizeof cps, " (dp %d x cp %d)", r->eo.hybrid_shard_size, mesh->cp);
        fprintf(out, " (%s in shard groups of %d%s%s%s)", zt_strategy_name(cfg->hybrid_inner),
                r->eo.hybrid_shard_size * mesh->cp, cps,
                *src ? ", ranks per node from " : cfg->hybrid_shard_size == 0 ? ", the world: one node" : "", src);
    }
    if (mesh->cp > 1)
        fprintf(out, " | mesh tp %d x cp %d x dp %d x pp %d (tp innermost, then cp: docs/parallelism.md), %s "
                "attention over %d chunks of %d positions", mesh->tp, mesh->cp, mesh->dp, mesh->pp,
                zt_cp_mode_name((zt_cp_mode)cfg->context_parallel_mode), 2 * mesh->cp, cfg->seq_len / (2 * mesh->cp));
    else if (mesh->tp * mesh->pp > 1)
        fprintf(out, " | mesh tp %d x dp %d x pp %d (tp innermost: docs/parallelism.md)", mesh->tp, mesh->dp,
                mesh->pp);
    if (mesh->ep > 1) { /* expert parallelism: within the data-parallel ranks (comm/mesh.h) */
        char how[320] = "every expert stored on every rank";
        const char *whole = zt_memory_experts_whole_reason(model, &r->eo);
        if (!zt_model_experts_local(model) && whole) /* the reason, as the engine would refuse storing them */
            snprintf(how, sizeof how, "every expert stored on every rank: kept whole under %s", whole);
        else if (zt_model_experts_local(model) && cfg->strategy == ZT_STRATEGY_HYBRID)
            snprintf(how, sizeof how, "stored E/ep a rank, sharded over the %d expert data parallel rank%s of a shard "
                     "group, replicated over %d", mesh->edp_shard, mesh->edp_shard == 1 ? "" : "s", mesh->edp_replicate);
        else if (zt_model_experts_local(model))
            snprintf(how, sizeof how, "stored E/ep a rank, reduced over the expert data parallel ranks");
        fprintf(out, " | experts over ep %d (%d experts a rank; expert data parallel %d, all-to-all dispatch; %s)",
                mesh->ep, cfg->model.n_experts / mesh->ep, mesh->edp, how);
    }
    if (r->s.pipe) {
        char cut_text[512];
        zt_pp_describe(model, &r->s.cut, cut_text, sizeof cut_text);
        fprintf(out, " | pipeline %s, %d micro-batches, %s", zt_pp_schedule_name(r->sched), r->A, cut_text);
    }
    if (r->eo.activation_checkpointing != ZT_RECOMPUTE_NONE)
        fprintf(out, " | activation checkpointing %s", zt_recompute_name(r->eo.activation_checkpointing));
    fprintf(out, " | buckets %.0f MiB%s\n", cfg->bucket_mb,
            cfg->reduce_every_micro_batch ? " | reduce every micro-batch" : "");
}

void zt_train_banner(zt_run *r) {
    FILE *out = r->out;
    zt_engine *e = r->s.e;
    const zt_engine_options *eo = &r->eo;
    banner_layout(r);
    char policy[256];
    zt_precision_describe(&eo->precision, policy, sizeof policy);
    fprintf(out, "precision %s\n", policy);
    char platform[800];
    zt_platform_describe(platform, sizeof platform);
    fprintf(out, "%s\n", platform);
    zt_engine_memory_plan(e, &r->plan);
    char plan_text[512];
    zt_memory_plan_line(&r->plan, plan_text, sizeof plan_text);
    fprintf(out, "optimizer %s | memory plan of rank 0 (zerotrain estimate-memory): %s\n",
            zt_optimizer_name(r->cfg->optim.kind), plan_text);
    if (zt_engine_offload_describe(e)[0])
        fprintf(out, "offload: %s in files (memory holds the staging buffers%s): %s\n",
                eo->offload.optimizer_dir && eo->offload.param_dir ? "optimizer state and parameter pieces"
                : eo->offload.param_dir                            ? "parameter pieces"
                                                                   : "optimizer state",
                eo->offload.param_dir ? " and the units' windows of pieces (docs/offload.md)" : "",
                zt_engine_offload_describe(e));
    r->ckpt_async = r->opts && r->opts->ckpt_async;
    if (r->ckpt_async && zt_engine_offload_describe(e)[0]) {
        fprintf(out, "checkpoint: --ckpt-async writes in the foreground when state is offloaded "
                "(a snapshot would bring it back into memory)\n");
        r->ckpt_async = false;
    }
}

int zt_train_log_start(zt_run *r, zt_error *err) {
    if (r->rank != 0 || !r->log.fp) return ZT_OK;
    const zt_precision *p = &r->eo.precision;
    char ev[400];
    snprintf(ev, sizeof ev, "\"mode\":\"%s\",\"params\":\"%s\",\"compute\":\"%s\",\"reduce\":\"%s\","
             "\"accumulate\":\"%s\",\"grads\":\"%s\",\"moments\":\"%s\",\"stochastic_rounding\":%s,"
             "\"attention\":\"%s\"",
             zt_precision_mode_name(p->mode), zt_dtype_name(p->params), zt_dtype_name(p->compute),
             zt_dtype_name(p->reduce), zt_dtype_name(p->accumulate), zt_dtype_name(p->grads),
             zt_dtype_name(p->moments), p->stochastic_rounding ? "true" : "false", zt_dtype_name(p->attention));
    char cev[900];
    zt_platform_json(cev, sizeof cev);
    int rc;
    if ((rc = zt_jsonl_write_event(&r->log, "cpu", cev, err)) ||
        (rc = zt_jsonl_write_event(&r->log, "precision", ev, err)) ||
        (rc = zt_jsonl_write_memory_plan(&r->log, &r->plan, err)))
        return rc;
    return ZT_OK;
}

/* After the last step: each rank's planned and measured high-water per class and its RSS peak,
 * gathered to rank 0, which prints the table and logs the "memory" event. */
static int report_memory(zt_run *r, zt_error *err) {
    enum { NV = 2 * ZT_MEM_CLASSES + 3 };
    int world = r->world;
    zt_memory_plan plan;
    zt_memory_report mem;
    zt_engine_memory_plan(r->s.e, &plan);
    zt_engine_memory(r->s.e, &mem);
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
    if (!rc && world > 1) rc = zt_all_gather_f64(r->world_comm, mine, all, NV, "memory report", err);
    else if (!rc) memcpy(all, mine, sizeof mine);
    if (!rc && r->rank == 0) {
        for (int q = 0; q < world; q++) {
            const double *v = all + (size_t)q * NV;
            for (int c = 0; c < ZT_MEM_CLASSES; c++) {
                ranks[q].planned[c] = (size_t)v[c];
                ranks[q].measured[c] = (size_t)v[ZT_MEM_CLASSES + c];
            }
            ranks[q].planned_total = (size_t)v[2 * ZT_MEM_CLASSES];
            ranks[q].measured_total = (size_t)v[2 * ZT_MEM_CLASSES + 1];
            ranks[q].rss_peak = (uint64_t)v[2 * ZT_MEM_CLASSES + 2];
        }
        zt_memory_print_ranks(r->out, ranks, world);
        rc = zt_jsonl_write_memory_ranks(&r->log, ranks, world, err);
    }
    free(all);
    free(ranks);
    return rc;
}

/* The offload I/O of the last step against the plan (rank 0's files). */
static void report_offload(zt_run *r) {
    if (!(r->rank == 0 && zt_engine_offload_describe(r->s.e)[0] && r->end_step > r->start_step)) return;
    const zt_offload_stats *io = &r->last_io;
    zt_memory_plan io_plan;
    zt_engine_memory_plan(r->s.e, &io_plan);
    fprintf(r->out, "offload I/O of the last step, rank 0: read %.2f MiB (the optimizer pass %.2f, the gathers' pieces "
            "%.2f), wrote %.2f MiB; planned read %.2f, write %.2f MiB\n",
            (io->read_bytes + io->gather_read_bytes) / 1048576.0, io->read_bytes / 1048576.0,
            io->gather_read_bytes / 1048576.0, io->write_bytes / 1048576.0,
            io_plan.offload_read_bytes / 1048576.0, io_plan.offload_write_bytes / 1048576.0);
}

/* The bubble each pipeline stage measured (collective over the world). */
static int report_bubble(zt_run *r, zt_error *err) {
    const zt_mesh *mesh = r->s.mesh;
    double mine[2], *all = malloc((size_t)r->world * 2 * sizeof *all);
    zt_pipeline_bubble(r->s.pipe, &mine[0], &mine[1]);
    if (!all) return zt_error_set(err, ZT_ERR_NOMEM, "trainer: out of memory");
    int rc = zt_train_gather_world(r->world_comm, mine, 2, all, "pipeline bubble", err);
    if (rc) {
        free(all);
        return rc;
    }
    char text[512];
    size_t used = 0;
    for (int s = 0; s < mesh->pp && used + 40 < sizeof text; s++)
        used += (size_t)snprintf(text + used, sizeof text - used, "%s stage %d %.3f", s ? "," : "",
                                 s, all[2 * zt_mesh_world_rank(mesh, 0, 0, 0, s)]);
    fprintf(r->out, "pipeline bubble (%s, p %d, m %d; time not in forward/backward over the schedule's time, steps "
            "after the first):%s | (p-1)/(m+p-1) = %.3f\n", zt_pp_schedule_name(r->sched), mesh->pp, r->A, text,
            mine[1]);
    free(all);
    return ZT_OK;
}

/* The comm log and the trace, merged from every rank's file on rank 0. */
static int report_comm_and_trace(zt_run *r, zt_error *err) {
    const zt_train_options *opts = r->opts;
    FILE *out = r->out;
    int rc, world = r->world;
    if (opts && opts->comm_log) {
        zt_commlog_enable(false);
        if (r->rank == 0) zt_commlog_print(out, r->rank);
        if ((rc = zt_commlog_write_jsonl(&r->log, err))) return rc;
    }
    if (!zt_trace_on()) return ZT_OK;
    if ((rc = zt_trace_close(err))) return rc;
    /* every rank's file is complete once all have passed the barrier; rank 0 merges them */
    if (world > 1 && (rc = zt_comm_barrier(r->world_comm, "trace merge", err))) return rc;
    if (world > 1 && r->rank == 0) {
        zt_error merr;
        if (zt_trace_merge_ranks(opts->trace_path, world, &merr))
            fprintf(out, "trace: per-rank files kept, not merged: %s\n", merr.msg);
        else
            fprintf(out, "trace: %s (%d ranks; chrome://tracing or https://ui.perfetto.dev)\n",
                    opts->trace_path, world);
    } else if (world == 1) {
        fprintf(out, "trace: %s (chrome://tracing or https://ui.perfetto.dev)\n", opts->trace_path);
    }
    return ZT_OK;
}

/* zt_weights_save_with's gather under pipeline parallelism: the whole model's parameter i on stage 0. */
static int pipeline_gather(void *ctx, int i, float *dst, zt_error *err) { return zt_pipeline_param_gather(ctx, i, dst, err); }

/* sample.tokens of text from the trained model, then --save's weights file. */
static int sample_and_save(zt_run *r, zt_error *err) {
    const zt_train_config *cfg = r->cfg;
    const zt_train_options *opts = r->opts;
    FILE *out = r->out;
    int rc;
    if (cfg->sample_tokens > 0) {
        char enc[1024], voc[1024];
        zt_bpe *bpe = NULL;
        zt_generate_options go = {.tokens = cfg->sample_tokens, .top_k = 40, .temperature = 0.8f,
                                  .seed = cfg->seed};
        fprintf(out, "--- sample (%d tokens, top-k 40, temperature 0.8) ---\n", cfg->sample_tokens);
        if ((rc = zt_bpe_default_paths(enc, voc, sizeof enc, err)) ||
            (rc = zt_bpe_load(&bpe, enc, voc, err)) || (rc = zt_generate(r->s.e, bpe, "", &go, out, err))) {
            zt_bpe_free(bpe);
            return rc;
        }
        zt_bpe_free(bpe);
    }
    if (opts && opts->save_path && opts->save_path[0]) {
        zt_pipeline *pipe = r->s.pipe;
        if ((rc = pipe ? zt_weights_save_with(r->model, pipeline_gather, pipe, opts->save_path, r->rank == 0, err)
                       : zt_weights_save(r->s.e, opts->save_path, r->rank == 0, err)))
            return rc;
        fprintf(out, "weights saved to %s\n", opts->save_path);
    }
    return ZT_OK;
}

int zt_train_report_end(zt_run *r, zt_error *err) {
    FILE *out = r->out;
    zt_engine *e = r->s.e;
    zt_pipeline *pipe = r->s.pipe;
    /* planned against measured memory, every rank (a collective: all ranks are here) */
    int rc = report_memory(r, err);
    if (rc) return rc;
    report_offload(r);
    if ((rc = zt_train_resave(r, err))) return rc;
    uint64_t hash = 0; /* a collective under zero3 (and the pipeline): every rank calls it */
    if (!pipe) hash = zt_engine_param_hash(e);
    else if ((rc = zt_pipeline_param_hash(pipe, &hash, err))) return rc;
    if (pipe && (rc = report_bubble(r, err))) return rc;
    if (r->result) {
        r->result->stop_signal = 0;
        r->result->first_loss = r->first_loss;
        r->result->final_loss = r->last_loss;
        r->result->final_val_loss = r->last_val;
        r->result->param_hash = hash;
        r->result->steps = r->end_step; /* the last step trained (eval.target_loss may end it early) */
        r->result->seconds = zt_train_now() - r->t_start;
    }
    uint64_t frozen1 = zt_engine_frozen_hash(e);
    if (r->frozen0 || frozen1)
        fprintf(out, "frozen parameters: xxh64 %016llx at the start, %016llx at the end (%s)\n",
                (unsigned long long)r->frozen0, (unsigned long long)frozen1,
                r->frozen0 == frozen1 ? "unchanged" : "CHANGED");
    fprintf(out, "done: %lld steps in %.1f s | loss %.4f -> %.4f | val %.4f | params xxh64 %016llx\n",
            (long long)r->steps_done, zt_train_now() - r->t_start, r->first_loss, r->last_loss, r->last_val,
            (unsigned long long)hash);
    if ((rc = report_comm_and_trace(r, err))) return rc;
    return sample_and_save(r, err);
}
