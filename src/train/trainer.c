/* trainer.c - the training loop behind `zerotrain train` (zt_train): set up (train_start.c), say
 * what runs (train_report.c), then for each step: data -> forward/backward per micro-batch -> clip +
 * optimizer -> metrics (train_step.c), with periodic validation (train_eval.c) and checkpoints
 * (train_recovery.c); at the end the report, the sample and the weights file (train_report.c).
 *
 * The loop reads like pseudocode (llm.c): for each step, for each micro-batch, take the next
 * global samples, forward_backward (gradients accumulate); then step(lr). The loss is normalized
 * by the tokens of the whole global batch (dloss = 1 / (B·T·accumulation)), so splitting a batch
 * into micro-batches does not change the gradient. */
#include "train/train_internal.h"
#include "train/trainer.h"
#include "metrics/commlog.h"
#include "obs/trace.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>

double zt_train_now(void) { return omp_get_wtime(); }

/* After the banner, before the first step: the clock, the JSONL's first events, the deadline, the
 * guard (with a resumed run's loss window), the agreement's buffers, the last step, the loss before
 * training (eval.at_start). */
static int before_steps(zt_run *r, zt_error *err) {
    const zt_train_config *cfg = r->cfg;
    zt_progress_init(&r->prog, r->out);
    r->per_step_samples = (uint64_t)r->B * (uint64_t)r->micro_per_step;
    r->t_start = zt_train_now();
    r->first_loss = r->last_loss = r->last_val = NAN;
    r->skipped_steps = 0;
    int rc = zt_train_log_start(r, err);
    if (rc) return rc;
    r->last_io = (zt_offload_stats){0};
    zt_step_deadline_init(&r->dl, cfg, r->out);
    if (cfg->comm_check_collectives) zt_comm_set_check(true); /* every rank has the same config */
    if ((rc = zt_guard_init(&r->guard, cfg, r->world, err))) return rc;
    const zt_ckpt_run_state *run = &r->cmeta->run;
    if (r->resumed && run->window && r->guard.window &&
        !zt_guard_window_restore(&r->guard, run->window, run->losses, run->n_losses, run->head))
        fprintf(r->out, "fault.loss_spike_window %d: the checkpoint's window of %d losses is not this one; it refills "
                "from empty\n", r->guard.window, run->window);
    r->per_rank = malloc((size_t)r->world * 4 * sizeof *r->per_rank);
    r->work = malloc((size_t)r->world * sizeof *r->work);
    if (!r->per_rank || !r->work) return zt_error_set(err, ZT_ERR_NOMEM, "trainer: out of memory");
    r->end_step = cfg->steps;
    if (r->opts && r->opts->stop_after > 0 && r->opts->stop_after < r->end_step) r->end_step = r->opts->stop_after;
    if (r->have_val && cfg->eval_at_start && r->start_step < r->end_step) { /* the loss before training (eval_on_start) */
        double v;
        if ((rc = zt_train_evaluate(r, &v, err))) return rc;
        zt_progress_message(&r->prog, "step %lld: val loss %.4f (before training)", (long long)r->start_step, v);
    }
    r->t_loop = zt_train_now(); /* eval.target_loss's clock: from the first step, evaluations included */
    return ZT_OK;
}

/* Everything the run holds, also after an error. */
static void free_run(zt_run *r) {
    zt_comm_set_job_timeout(0); /* this run's deadline ends with it */
    zt_trace_close(NULL); /* an error path: the file is closed, the per-rank files stay unmerged */
    zt_commlog_enable(false);
    zt_ckpt_async_abandon(r->pending); /* an error path: the writer thread is joined, nothing commits */
    zt_jsonl_close(&r->log);
    zt_guard_free(&r->guard);
    free(r->cmeta);
    free(r->per_rank);
    free(r->work);
    free(r->inp);
    free(r->tgt);
    zt_train_cp_close(r);
    zt_train_setup_free(&r->s, r->model);
    zt_model_free(r->model);
    free(r->mbs);
    free(r->mb_loss);
    zt_sampler_free(&r->ts);
    zt_sampler_free(&r->vs);
    free(r->data.mb_weight);
    zt_train_close_data(r);
    zt_token_file_close(&r->train);
    zt_token_file_close(&r->valf);
    if (r->devnull) fclose(r->devnull);
}

int zt_train(const zt_train_config *cfg, const zt_train_options *opts, zt_train_result *result,
             zt_error *err) {
    int rc = zt_train_config_validate(cfg, err);
    if (rc) return rc;
    zt_run run = {.cfg = cfg, .opts = opts, .result = result, .pending_step = -1,
                  .out = opts && opts->out ? opts->out : stdout, .world_comm = opts ? opts->world : NULL,
                  .B = cfg->micro_batch, .T = cfg->seq_len, .A = cfg->grad_accum,
                  .have_val = cfg->val_path[0] != '\0'};
    zt_run *r = &run;
    r->rank = r->world_comm ? zt_comm_rank(r->world_comm) : 0;
    r->world = r->world_comm ? zt_comm_size(r->world_comm) : 1;
    if (r->rank != 0) { /* every rank runs the same code; only rank 0 speaks */
        r->devnull = fopen("/dev/null", "w");
        if (!r->devnull) return zt_error_set(err, ZT_ERR_IO, "rank %d: cannot open /dev/null", r->rank);
        r->out = r->devnull;
    }
    if ((rc = zt_train_start(r, err))) goto done;
    zt_train_banner(r);
    if ((rc = before_steps(r, err))) goto done;
    for (int64_t step = r->start_step; step < r->end_step; step++) {
        zt_step_next next;
        if ((rc = zt_train_step(r, step, &next, err)) || next == ZT_STEP_STOPPED) goto done;
        if (next == ZT_STEP_ROLLED_BACK) step = r->start_step - 1; /* the loop goes on at the commit's next step */
    }
    zt_step_deadline_for_save(&r->dl); /* what follows the loop saves, gathers and writes */
    if (r->pending) {
        zt_ckpt_async *a = r->pending;
        r->pending = NULL;
        if ((rc = zt_ckpt_async_finish(a, err))) goto done;
    }
    zt_progress_finish(&r->prog);
    rc = zt_train_report_end(r, err);
done:
    free_run(r);
    return rc;
}
