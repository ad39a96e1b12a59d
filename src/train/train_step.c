/* train_step.c - one step of the training loop (zt_train_step): the step's micro-batches through
 * forward and backward (or the pipeline's schedule), the one all-gather every cross-rank decision
 * reads (the loss, stop requests, each rank's own work: the straggler report), the step guard's
 * loss-spike and non-finite policies around the optimizer step, the step's metrics, validation,
 * the checkpoint when due, and a stop request honored at the step's end. */
#include "train/train_internal.h"
#include "train/train_recovery.h"
#include "core/fault.h"
#include "core/stop.h"
#include "metrics/mfu.h"
#include "obs/trace.h"

#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

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

static double scaler_now(const zt_engine *e) {
    zt_loss_scaler s;
    zt_engine_get_loss_scaler(e, &s);
    return s.scale;
}

/* The step's clock and sums (seconds from zt_train_now). */
typedef struct step_times {
    double t0, to, t1;    /* the step's start, the optimizer's start, its end */
    double data_s, fb_s;  /* in the sampler; in forward/backward */
    double comm_mid;      /* forward/backward's collectives */
    double loss_sum;      /* the micro-batches' losses: this rank's, then (agreed) the job's; records:
                             each micro-batch's mean x its counted targets (exact), scaled once agreed */
    uint64_t counted_all; /* records: the global batch's counted targets */
} step_times;

/* The step's micro-batches: rank r's micro-batch k is global micro-batch r*A + k of this step. */
static int micro_batches(zt_run *r, int64_t step, step_times *st, zt_error *err) {
    int B = r->B, T = r->T, A = r->A; /* T: the whole sequence's */
    zt_engine *e = r->s.e;
    zt_pipeline *pipe = r->s.pipe;
    int rc;
    uint64_t step_first = r->sample_base + (uint64_t)(step - r->start_step) * r->per_step_samples;
    /* records: the loss is the mean over the global batch's counted targets, which every rank
     * counts the same (the samples are a function of their index); a token file counts every one */
    uint64_t counted_all = r->data.records ? zt_sampler_counted(&r->ts, step_first, r->per_step_samples)
                                           : (uint64_t)r->tokens_per_step;
    st->counted_all = counted_all;
    float dloss = r->data.records ? (counted_all ? 1.0f / (float)counted_all : 0.0f) : 1.0f / (float)r->tokens_per_step;
    for (int micro = 0; micro < A; micro++) {
        zt_trace_begin("data", "batch");
        double td = zt_train_now();
        uint64_t first = step_first + ((uint64_t)r->drank * A + micro) * (uint64_t)B; /* logical: zt_sampler_get skips */
        size_t slot = pipe ? (size_t)micro : 0; /* a pipeline keeps every micro-batch of the step */
        int32_t *inp, *tgt, *pos;
        zt_train_cp_whole(r, slot, &inp, &tgt, &pos);
        uint64_t counted = 0;
        if ((rc = zt_sampler_batch(&r->ts, first, 1, B, inp, tgt, pos, &counted, r->model->vocab_size, err))) {
            zt_error_prefix(err, "data.train %s", r->cfg->train_path);
            return rc;
        }
        zt_batch b = {.B = B, .T = T, .inputs = inp, .targets = tgt, .positions = pos, .dloss = dloss,
                      .logits_pos = -1};
        zt_train_cp_cut(r, slot, &b, &counted); /* context parallelism: this rank's chunks, their targets */
        double tf = zt_train_now();
        st->data_s += tf - td;
        zt_trace_end();
        /* records: the micro-batch's mean x its counted targets, a product exact in double whatever
         * the compiler fuses; the step's sum is scaled to the mean once agreed (agree_step); a token
         * file's mean over this rank's 1/cp of the positions counts 1/cp (exact for cp a power of 2) */
        double weight = r->data.records ? (double)counted : 1.0 / (double)r->cp;
        long farg = 1; /* ZT_FAULT nan/inf: a poisoned gradient; spike: a loss x farg */
        zt_fault_kind fk = zt_fault_point(ZT_FAULT_AT_FWD, &farg);
        if (fk == ZT_FAULT_NAN || fk == ZT_FAULT_INF) b.dloss = fk == ZT_FAULT_NAN ? NAN : INFINITY;
        if (pipe) { /* run below, all micro-batches on the schedule */
            r->mbs[micro] = b;
            r->mb_loss[micro] = fk == ZT_FAULT_SPIKE ? (float)farg : 1.0f;
            if (r->data.records) r->data.mb_weight[micro] = weight;
            continue;
        }
        float loss;
        if ((rc = zt_engine_forward_backward(e, &b, &loss, err))) return rc;
        if (fk == ZT_FAULT_SPIKE) loss *= (float)farg;
        st->fb_s += zt_train_now() - tf;
        st->loss_sum += loss * weight;
    }
    if (pipe) {
        double tf = zt_train_now();
        if ((rc = zt_pipeline_train(pipe, r->mbs, A, r->mb_loss + A, err))) return rc;
        for (int micro = 0; micro < A; micro++) /* x the spike */
            st->loss_sum += r->mb_loss[A + micro] * r->mb_loss[micro] *
                            (r->data.records ? r->data.mb_weight[micro] : 1.0 / (double)r->cp);
        st->fb_s += zt_train_now() - tf;
    }
    return ZT_OK;
}

/* Every cross-rank decision comes from this one all-gather (docs/reliability.md): the loss and how
 * many ranks were asked to stop by SIGTERM, by SIGINT (each summed in rank order), and each rank's
 * own work this step (its time less its time in collectives). agree: the loss, the two counts. */
static int agree_step(zt_run *r, step_times *st, double agree[3], zt_error *err) {
    int world = r->world;
    int sig_here = zt_stop_requested();
    double mine[4] = {st->loss_sum, sig_here == SIGTERM, sig_here == SIGINT, zt_train_now() - st->t0 - st->comm_mid};
    agree[0] = agree[1] = agree[2] = 0;
    if (zt_fault_point(ZT_FAULT_AT_AGREE, NULL) == ZT_FAULT_SKIPCOLL) { /* ZT_FAULT skipcoll: a desync */
        for (int q = 0; q < world; q++) memcpy(r->per_rank + 4 * q, mine, sizeof mine);
    } else {
        int rc = zt_train_gather_world(r->world_comm, mine, 4, r->per_rank,
                                       "step agreement (loss, stop requests, work)", err);
        if (rc) return rc;
    }
    /* the loss of each data-parallel rank once (its tp ranks hold the same), in dp order */
    for (int q = 0; q < world; q++)
        for (int i = 0; i < 3; i++)
            if (i > 0 || zt_mesh_holds_loss(r->s.mesh, q)) agree[i] += r->per_rank[4 * q + i];
    for (int q = 0; q < world; q++) r->work[q] = r->per_rank[4 * q + 3];
    st->loss_sum = agree[0];
    if (r->data.records) /* the mean over the counted targets, x the micro-batches (the report divides) */
        st->loss_sum = st->counted_all ? st->loss_sum / (double)st->counted_all * (double)r->micro_per_step : 0.0;
    return ZT_OK;
}

/* The straggler report (guard.c). The first step of a run is left out: its one-time costs (first
 * touches, the products' primitives) can hide a straggler's slowness or fake one, and decided when
 * the report came. */
static int report_straggler(zt_run *r, int64_t step, zt_error *err) {
    double slow_mean, slow_median;
    int slow = step > r->start_step ? zt_guard_straggler(&r->guard, r->work, &slow_mean, &slow_median) : -1;
    if (slow < 0) return ZT_OK;
    zt_progress_message(&r->prog, "step %lld: straggler: rank %d's own work took %.3f s per step (%d steps in a "
                        "row) against a median of %.3f s; the others wait for it", (long long)(step + 1), slow,
                        slow_mean, r->guard.slow_run[slow], slow_median);
    if (r->rank != 0 || !r->log.fp) return ZT_OK;
    char ev[160];
    snprintf(ev, sizeof ev, "\"step\":%lld,\"rank\":%d,\"work_s\":%.4f,\"median_s\":%.4f,\"steps\":%d",
             (long long)(step + 1), slow, slow_mean, slow_median, r->guard.slow_run[slow]);
    return zt_jsonl_write_event(&r->log, "straggler", ev, err);
}

/* The step's metrics (metrics.h): the loss, rates, the breakdown into disjoint parts of [t0, t1],
 * the memory. bytes: the step's collective traffic. */
/* A mixture of experts' counters summed over the data-parallel ranks, dp x cp (the same stage's units;
 * as floats: exact below 2^24 tokens per expert and layer in a step), then read into m. */
static int moe_metrics(zt_run *r, zt_step_metrics *m, zt_error *err) {
    size_t n;
    int64_t *c = zt_engine_moe_counters(r->s.e, &n);
    if (!c) return ZT_OK;
    zt_comm *dp = r->s.mesh ? r->s.mesh->dp_cp_comm : NULL;
    if (dp && zt_comm_size(dp) > 1) {
        float *f = malloc(n * sizeof *f);
        if (!f) return zt_error_set(err, ZT_ERR_NOMEM, "out of memory for %zu expert counters", n);
        for (size_t i = 0; i < n; i++) f[i] = (float)c[i];
        int rc = zt_all_reduce(dp, ZT_DTYPE_FP32, f, n, "the experts' token counts", err);
        for (size_t i = 0; i < n && !rc; i++) c[i] = (int64_t)f[i];
        free(f);
        if (rc) return rc;
    }
    m->has_moe = zt_engine_moe_stats(r->s.e, &m->moe) > 0;
    return ZT_OK;
}

static void step_metrics(zt_run *r, int64_t step, float lr, const step_times *st, const zt_step_report *rep,
                         const zt_comm_bytes *bytes, zt_step_metrics *mp) {
    zt_engine *e = r->s.e;
    zt_step_metrics m = {.step = step + 1, .total_steps = r->cfg->steps, .loss = st->loss_sum / (double)r->micro_per_step,
                         .val_loss = NAN, .lr = lr, .grad_norm = rep->grad_norm,
                         .clip_coef = rep->clip_coef, .tokens = r->tokens_per_step,
                         .step_s = st->t1 - st->t0, .data_s = st->data_s, .fwdbwd_s = st->fb_s,
                         .optim_s = st->t1 - st->to, .elapsed_s = st->t1 - r->t_start};
    m.tok_per_s = (double)r->tokens_per_step / m.step_s;
    if (r->eo.precision.mode == ZT_PRECISION_FP16) {
        r->skipped_steps += rep->skipped;
        m.has_loss_scale = true;
        m.loss_scale = rep->loss_scale;
        m.skipped_steps = r->skipped_steps;
        if (rep->skip_reason == ZT_SKIP_OVERFLOW)
            zt_progress_message(&r->prog, "step %lld: fp16 gradients overflowed at loss scale %g: "
                                "update skipped on every rank, scale now %g", (long long)(step + 1),
                                rep->loss_scale, scaler_now(e));
    }
    m.mfu = zt_utilization(r->flops_per_token, (double)r->tokens_per_step, m.step_s, r->peak);
    m.hfu = zt_utilization(r->hw_flops_per_token, (double)r->tokens_per_step, m.step_s, r->peak);
    /* the breakdown: disjoint parts of [t0, t1] (metrics.h) */
    m.has_times = true;
    for (int u = 0; u < r->s.smodel->n_units; u++) {
        double f, bw;
        zt_engine_unit_times(e, u, &f, &bw);
        m.forward_s += f;
        m.backward_s += bw;
    }
    m.comm_s = zt_engine_comm_seconds(e);
    m.comm_wait_s = bytes->wait_s; /* the part of comm_s spent blocked in waits */
    zt_offload_stats io;
    zt_engine_offload_stats(e, &io, false);
    m.io_s = io.wait_s; /* the offloaded update's waits for the disk (0 without offload) */
    r->last_io = io;
    m.optim_s = (st->t1 - st->to) - (m.comm_s - st->comm_mid) - m.io_s;
    m.other_s = m.step_s - (m.data_s + m.forward_s + m.backward_s + m.comm_s + m.optim_s + m.io_s);
    m.has_memory = true;
    zt_engine_memory(e, &m.mem);
    m.rss_peak = zt_rss_peak_bytes();
    zt_trace_counter("memory MiB", 4, (zt_trace_arg[]){ZT_TARG_NUM("params", m.mem.params / 1048576.0),
                     ZT_TARG_NUM("grads peak", m.mem.peak_grads / 1048576.0),
                     ZT_TARG_NUM("optimizer", m.mem.optimizer / 1048576.0),
                     ZT_TARG_NUM("activations", m.mem.activations / 1048576.0)});
    *mp = m;
}

/* After the update: the guard counts a non-finite step (and stops the run after too many in a
 * row), a skipped update is said and logged, fault.replica_check_every compares the replicas. */
static int after_update(zt_run *r, int64_t step, const zt_step_report *rep, const zt_step_metrics *m,
                        const double spike[3], zt_error *err) {
    zt_guard *guard = &r->guard;
    int rc, grc = zt_guard_after(guard, rep, m->loss, step + 1, err); /* counts, maybe stops: below */
    char router[ZT_NAME_MAX + 96] = "";
    if (m->has_moe && m->moe.router_nonfinite > 0) /* a mixture of experts: the router said first */
        snprintf(router, sizeof router, " (the router of %s gave non-finite logits for %lld token%s)",
                 m->moe.router_nonfinite_unit, (long long)m->moe.router_nonfinite, m->moe.router_nonfinite == 1 ? "" : "s");
    if (rep->skip_reason == ZT_SKIP_NONFINITE)
        zt_progress_message(&r->prog, "step %lld: gradient norm %g is not finite%s: update skipped on every rank "
                            "(%d in a row; fault.nonfinite_skips = %d)", (long long)(step + 1), rep->grad_norm,
                            router, guard->nonfinite_run, guard->max_nonfinite);
    else if (rep->skip_reason == ZT_SKIP_REQUESTED)
        zt_progress_message(&r->prog, "step %lld: loss %.4f is a spike (z %.1f over the last %d steps: mean %.4f, "
                            "sd %.4f; fault.loss_spike_z = %g): update skipped on every rank",
                            (long long)(step + 1), m->loss, spike[0], guard->window, spike[1], spike[2],
                            guard->spike_z);
    if (r->rank == 0 && r->log.fp && rep->skipped && rep->skip_reason != ZT_SKIP_OVERFLOW) {
        char ev[96];
        snprintf(ev, sizeof ev, "\"step\":%lld,\"reason\":\"%s\"", (long long)(step + 1),
                 rep->skip_reason == ZT_SKIP_NONFINITE ? "nonfinite" : "loss_spike");
        if ((rc = zt_jsonl_write_event(&r->log, "skipped_step", ev, err))) return rc;
    }
    if ((rc = grc)) return rc;
    int every = r->cfg->fault_replica_check_every;
    if (every > 0 && (step + 1) % every == 0)
        return check_replicas(r->s.e, r->world_comm, r->world, step + 1, every, r->per_rank, err);
    return ZT_OK;
}

/* Validation when due (eval.every, the last step; not on a stop); eval.target_loss reached makes
 * this step the last (*last). */
static int validate_due(zt_run *r, int64_t step, bool stop, bool *last, zt_step_metrics *m, zt_error *err) {
    const zt_train_config *cfg = r->cfg;
    if (!(r->have_val && !stop && ((cfg->eval_every > 0 && (step + 1) % cfg->eval_every == 0) || *last)))
        return ZT_OK;
    double te = zt_train_now();
    zt_trace_begin("eval", "validation");
    int rc = zt_train_evaluate(r, &m->val_loss, err);
    if (rc) return rc;
    zt_trace_end();
    m->eval_s = zt_train_now() - te;
    r->last_val = m->val_loss;
    zt_progress_message(&r->prog, "step %lld: val loss %.4f", (long long)m->step, m->val_loss);
    if (cfg->eval_target_loss > 0.0f && m->val_loss <= cfg->eval_target_loss) {
        /* the target (eval.target_loss): this step ends the run as the last one would */
        *last = true;
        r->end_step = step + 1;
        return zt_train_target_reached(r, m, zt_train_now() - r->t_loop,
                                       (uint64_t)(step + 1 - r->start_step) * (uint64_t)r->tokens_per_step, err);
    }
    return ZT_OK;
}

/* A stop request honored after `step` (its checkpoint committed when there is a directory): said,
 * and the result carries the signal (the job exits ZT_EXIT_STOPPED). */
static void stop_now(zt_run *r, int64_t step, const double agree[3]) {
    const zt_train_options *opts = r->opts;
    FILE *out = r->out;
    int world = r->world;
    zt_progress_finish(&r->prog);
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
    if (r->result) {
        r->result->stop_signal = sig;
        r->result->steps = step + 1;
    }
}

int zt_train_step(zt_run *r, int64_t step, zt_step_next *next, zt_error *err) {
    const zt_train_config *cfg = r->cfg;
    zt_engine *e = r->s.e;
    int rc;
    *next = ZT_STEP_NEXT;
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
    step_times st = {.t0 = zt_train_now()};
    /* the schedule follows applied updates: an fp16 step skipped for overflow does not advance
     * it (DeepSpeed steps its scheduler only when the optimizer stepped); in every other mode
     * the two counts are equal */
    float lr = zt_lr_at(&cfg->lr, (int64_t)zt_engine_step_count(e));
    if ((rc = micro_batches(r, step, &st, err))) return rc;
    st.comm_mid = zt_engine_comm_seconds(e); /* forward/backward's collectives */
    st.to = zt_train_now();
    double agree[3];
    if ((rc = agree_step(r, &st, agree, err))) return rc;
    bool stop = agree[1] + agree[2] > 0;
    if ((rc = report_straggler(r, step, err))) return rc;
    double spike[3]; /* the loss-spike policy: skip this update everywhere (z, mean, sd) */
    bool is_spike = zt_guard_spike(&r->guard, st.loss_sum / (double)r->micro_per_step, &spike[0], &spike[1], &spike[2]);
    if (is_spike) zt_engine_skip_next_step(e); /* rollback too: the engine is left as before the step */
    zt_fault_point(ZT_FAULT_AT_OPTIM, NULL);
    zt_step_report rep;
    zt_trace_begin("optimizer", "step");
    if ((rc = zt_engine_step(e, lr, &rep, err))) return rc;
    zt_trace_end();
    st.t1 = zt_train_now();
    zt_trace_end_args(1, (zt_trace_arg[]){ZT_TARG_NUM("lr", lr)}); /* the step span */
    if (is_spike && r->rollback_policy) {
        bool rolled;
        if ((rc = zt_train_spike_rollback(r, step, st.loss_sum, spike[0], spike[1], spike[2], &rolled, err)))
            return rc;
        if (rolled) {
            *next = ZT_STEP_ROLLED_BACK;
            return ZT_OK;
        }
    }
    zt_comm_bytes bytes;
    zt_engine_comm_bytes(e, &bytes, true);
    if (r->result) r->result->last_step_bytes = bytes;
    zt_step_metrics m;
    step_metrics(r, step, lr, &st, &rep, &bytes, &m);
    if ((rc = moe_metrics(r, &m, err))) return rc;
    if ((rc = after_update(r, step, &rep, &m, spike, err))) return rc;
    if (r->steps_done++ == 0) r->first_loss = m.loss;
    r->last_loss = m.loss;
    bool last = step + 1 == r->end_step;
    r->dl.slowest_step = fmax(r->dl.slowest_step, m.step_s);
    zt_step_deadline_for_save(&r->dl); /* evaluation and checkpoints (a no-op when neither comes) */
    if ((rc = validate_due(r, step, stop, &last, &m, err))) return rc;
    if (cfg->print_every > 0 && ((step + 1) % cfg->print_every == 0 || last || step == 0))
        zt_progress_step(&r->prog, &m);
    m.bytes = bytes;
    double tck = zt_train_now();
    zt_trace_begin("checkpoint", "save");
    if ((rc = zt_train_save_due(r, step, last, stop, err))) return rc;
    zt_trace_end();
    m.ckpt_s = zt_train_now() - tck;
    r->dl.slowest_save = fmax(r->dl.slowest_save, fmax(m.ckpt_s, m.eval_s));
    zt_step_deadline_for_steps(&r->dl);
    if ((rc = zt_jsonl_write_step(&r->log, &m, err))) return rc;
    if (stop) {
        stop_now(r, step, agree);
        *next = ZT_STEP_STOPPED;
    }
    return ZT_OK;
}
