/* train_recovery.c - the training loop's side of its checkpoints (train_recovery.h, train_internal.h):
 * the run state a commit carries (skipped samples, the loss-spike window), resuming from a commit
 * every rank agrees on and the skips a resumed run applies, the checkpoint directory's checks, the
 * saves when due (synchronous or in the background) and one that failed under
 * checkpoint.on_save_error continue, the loss-spike rollback; and the world-wide gather and sum the
 * loop's cross-rank decisions read. */
#include "train/train_recovery.h"
#include "train/train_internal.h"

#include <stdlib.h>
#include <string.h>

/* all[r * n + i] = world rank r's x[i] (a copy on one process). The loop's cross-rank decisions
 * read what every rank of the job saw: the data-parallel ranks and the tensor-parallel ones. */
int zt_train_gather_world(zt_comm *w, const double *x, int n, double *all, const char *what, zt_error *err) {
    if (!w || zt_comm_size(w) == 1) {
        memcpy(all, x, (size_t)n * sizeof *x);
        return ZT_OK;
    }
    return zt_all_gather_f64(w, x, all, (size_t)n, what, err);
}

/* *x = the sum over the world's ranks, in rank order. */
int zt_train_sum_world(zt_comm *w, double *x, const char *what, zt_error *err) {
    int n = w ? zt_comm_size(w) : 1;
    double *all = malloc((size_t)n * sizeof *all);
    if (!all) return zt_error_set(err, ZT_ERR_NOMEM, "%s: out of memory", what);
    int rc = zt_train_gather_world(w, x, 1, all, what, err);
    if (!rc) {
        *x = 0;
        for (int r = 0; r < n; r++) *x += all[r];
    }
    free(all);
    return rc;
}

/* What a checkpoint carries for the loop (checkpoint.h's zt_ckpt_run_state): the skipped sample
 * ranges and the loss-spike window as held now. */
void zt_train_run_state(zt_ckpt_run_state *r, const zt_sampler *ts, const zt_guard *g, uint64_t next) {
    r->n_skips = ts->n_skips; /* ZT_SAMPLER_MAX_SKIPS == ZT_CKPT_MAX_SKIPS */
    for (int k = 0; k < ts->n_skips; k++) {
        r->skip_start[k] = ts->skips[k].start;
        r->skip_count[k] = ts->skips[k].count;
    }
    const double *hist;
    r->window = zt_guard_window(g, &hist, &r->n_losses, &r->head); /* <= ZT_CKPT_MAX_WINDOW (the key's range) */
    if (r->n_losses) memcpy(r->losses, hist, (size_t)r->n_losses * sizeof *hist);
    zt_mixture *m = ts->mix;
    r->n_sources = m && m->n <= ZT_CKPT_MAX_SOURCES ? m->n : 0;
    if (r->n_sources) zt_mixture_cursors(m, zt_sampler_physical(ts, next), r->source_cursor);
    for (int k = 0; k < r->n_sources; k++) r->source_key[k] = m->src[k]->d->key;
}
_Static_assert(ZT_SAMPLER_MAX_SKIPS == ZT_CKPT_MAX_SKIPS, "a checkpoint holds every skipped range");

/* The skipped ranges a checkpoint recorded, then data.skip_samples: a configured range the commit
 * does not record must lie at or past the physical sample the resumed cursor reads next (earlier
 * samples were trained on already). */
int zt_train_apply_skips(zt_sampler *ts, const zt_ckpt_run_state *r, const zt_train_config *cfg, uint64_t cursor,
                       zt_error *err) {
    int rc = ZT_OK;
    for (int k = 0; k < r->n_skips && !rc; k++) rc = zt_sampler_skip(ts, r->skip_start[k], r->skip_count[k], err);
    zt_sample_range want[ZT_SAMPLER_MAX_SKIPS];
    int n = 0;
    if (!rc) rc = zt_sampler_parse_skips(cfg->skip_samples, want, ZT_SAMPLER_MAX_SKIPS, &n, err);
    uint64_t next = zt_sampler_physical(ts, cursor);
    for (int k = 0; k < n && !rc; k++) {
        bool recorded = false;
        for (int j = 0; j < ts->n_skips; j++)
            recorded |= ts->skips[j].start <= want[k].start &&
                        want[k].start + want[k].count <= ts->skips[j].start + ts->skips[j].count;
        if (!recorded && want[k].start < next)
            return zt_error_set(err, ZT_ERR_USAGE, "data.skip_samples range %llu:%llu starts before global sample %llu, "
                                "the next one the resumed run reads: those samples were trained on already",
                                (unsigned long long)want[k].start, (unsigned long long)want[k].count,
                                (unsigned long long)next);
        rc = zt_sampler_skip(ts, want[k].start, want[k].count, err);
    }
    return rc;
}

/* "A..B" for each range of physical samples that logical [first, first + n) reads, into buf. */
void zt_train_sample_ranges(const zt_sampler *ts, uint64_t first, uint64_t n, char *buf, size_t cap) {
    size_t used = 0;
    buf[0] = '\0';
    for (uint64_t i = 0, j; i < n && used + 48 < cap; i = j) {
        uint64_t a = zt_sampler_physical(ts, first + i);
        for (j = i + 1; j < n && zt_sampler_physical(ts, first + j) == a + (j - i); j++) {}
        used += (size_t)snprintf(buf + used, cap - used, "%s%llu..%llu", used ? ", " : "", (unsigned long long)a,
                                 (unsigned long long)(a + (j - i) - 1));
    }
}

/* checkpoint.on_save_error continue (docs/reliability.md): a save that failed with an I/O error
 * fails on every rank alike (the save's own collectives agree on it; nothing was committed and the
 * partial step-N.tmp is removed), so every rank takes the same turn here: said on the progress line
 * and as a `save_failed` JSONL event, and training goes on; the next save retries. Any other
 * failure, the final save (nothing would retry it) or the policy exit: rc, the run ends (exit 8). */
int zt_train_on_save_error(const zt_train_config *cfg, int rc, bool final, long long step, zt_progress *prog,
                         zt_jsonl *log, int rank, int *failed, zt_error *err) {
    if (rc != ZT_ERR_IO || final || cfg->ckpt_on_save_error != ZT_CFG_SAVE_ERROR_CONTINUE) return rc;
    (*failed)++;
    zt_progress_message(prog, "step %lld: checkpoint not saved: %s; the last commit is untouched, training goes on "
                        "(checkpoint.on_save_error: continue; %d failed save%s so far) and the next save retries",
                        step, err->msg, *failed, *failed == 1 ? "" : "s");
    if (rank == 0 && log->fp) {
        char ev[96];
        snprintf(ev, sizeof ev, "\"step\":%lld,\"failed_saves\":%d", step, *failed);
        zt_error jerr;
        if (zt_jsonl_write_event(log, "save_failed", ev, &jerr)) {
            *err = jerr;
            return jerr.code;
        }
    }
    return ZT_OK;
}

/* fault.loss_spike_policy rollback (docs/reliability.md): every rank took the same spike decision
 * (from the all-gathered loss) and skipped the step's update. Every rank reloads the checkpoint
 * directory's newest commit (they must agree on it), the spike's global batch (logical samples
 * [first, first + n)) is skipped in the sampler from now on, and the loss window the commit kept is
 * put back. meta receives the commit's step and cursor. */
int zt_train_roll_back(zt_engine *e, const char *dir, const zt_train_config *cfg, zt_sampler *ts, zt_guard *g,
                     uint64_t first, uint64_t n, zt_comm *world_comm, int world, FILE *out, zt_ckpt_meta *meta,
                     char *commit, size_t cap, zt_error *err) {
    int rc = zt_sampler_skip_logical(ts, first, n, err);
    if (rc || (rc = zt_ckpt_resume(e, dir, cfg->ckpt_fallback, false, out, commit, cap, meta, err))) return rc;
    double agree = (double)meta->step; /* every rank of the job, tensor-parallel ones included */
    if ((rc = zt_train_sum_world(world_comm, &agree, "loss-spike rollback agreement", err))) return rc;
    if (agree != (double)meta->step * world)
        return zt_error_set(err, ZT_ERR_CKPT, "loss-spike rollback: the ranks did not all reload the same commit (this "
                            "one %s, step %lld): do they see the same files?", commit, (long long)meta->step);
    for (int k = 0; k < meta->run.n_skips && !rc; k++) /* recorded ones (this sampler holds them already) */
        rc = zt_sampler_skip(ts, meta->run.skip_start[k], meta->run.skip_count[k], err);
    if (!zt_guard_window_restore(g, meta->run.window, meta->run.losses, meta->run.n_losses, meta->run.head))
        zt_guard_window_restore(g, g->window, NULL, 0, 0); /* the commit kept none: refill from empty */
    return rc;
}


/* --resume: the commit (or the checkpoint directory's newest, with checkpoint.fallback's choice)
 * loaded into the engine; every rank must have chosen the same one. */
int zt_train_resume(zt_run *r, zt_error *err) {
    const zt_train_config *cfg = r->cfg;
    char commit[4096];
    int rc = zt_ckpt_resume(r->s.e, r->opts->resume, cfg->ckpt_fallback, cfg->ckpt_allow_cast, r->out, commit,
                            sizeof commit, r->cmeta, err);
    if (rc) return rc;
    zt_ckpt_meta meta = *r->cmeta;
    /* each rank chose its commit alone (checkpoint.fallback): they must have chosen the same */
    double agree = (double)meta.step;
    if ((rc = zt_train_sum_world(r->world_comm, &agree, "resume agreement", err))) return rc;
    if (agree != (double)meta.step * r->world)
        return zt_error_set(err, ZT_ERR_CKPT, "rank %d resumed from %s (step %lld) but the ranks did not all "
                            "choose the same commit (their steps sum to %.0f): do they see the same files?",
                            r->rank, commit, (long long)meta.step, agree);
    r->start_step = meta.step;
    r->sample_base = meta.samples_consumed;
    fprintf(r->out, "resumed from %s: step %lld, next global sample %llu (saved by %s on %d rank%s)\n",
            commit, (long long)meta.step, (unsigned long long)meta.samples_consumed, meta.strategy,
            meta.world, meta.world == 1 ? "" : "s");
    return ZT_OK;
}

/* fault.loss_spike_policy rollback needs a directory; every rank can write the directory, or exit 8
 * now (the start-up probe, ckpt/probe.c). */
int zt_train_check_ckpt_dir(zt_run *r, zt_error *err) {
    const zt_train_config *cfg = r->cfg;
    const zt_train_options *opts = r->opts;
    bool have_dir = opts && opts->ckpt_dir && opts->ckpt_dir[0];
    r->rollback_policy = cfg->fault_loss_spike_policy == ZT_CFG_SPIKE_ROLLBACK && cfg->fault_loss_spike_z > 0;
    if (r->rollback_policy && !have_dir)
        return zt_error_set(err, ZT_ERR_USAGE, "fault.loss_spike_policy rollback needs a checkpoint directory to roll "
                            "back to (checkpoint.dir or --ckpt-dir)");
    if (!have_dir) return ZT_OK;
    zt_error perr = {0};
    double bad = zt_ckpt_probe(opts->ckpt_dir, r->rank, &perr) ? 1 : 0, any = bad;
    int rc = zt_train_sum_world(r->world_comm, &any, "checkpoint directory probe", err);
    if (rc) return rc;
    if (any > 0)
        return bad ? (*err = perr, perr.code)
                   : zt_error_set(err, ZT_ERR_IO, "checkpoint directory %s is not writable by %.0f of the ranks "
                                  "(their messages say why)", opts->ckpt_dir, any);
    return ZT_OK;
}

/* A loss spike at `step` under fault.loss_spike_policy rollback (the engine skipped the update):
 * an async save in flight is committed first; then, only if every rank sees a commit, every rank
 * rolls back to it and the loop goes on at its next step (*rolled); else the update stays skipped. */
int zt_train_spike_rollback(zt_run *r, int64_t step, double loss_sum, double spike_z, double spike_mean,
                            double spike_sd, bool *rolled, zt_error *err) {
    const zt_train_options *opts = r->opts;
    zt_guard *guard = &r->guard;
    *rolled = false;
    zt_ckpt_async *prev = r->pending;
    r->pending = NULL;
    int rc = zt_ckpt_async_finish(prev, err);
    if (rc) return rc;
    char commit[4096];
    double have = zt_ckpt_resolve(opts->ckpt_dir, commit, sizeof commit, NULL) == ZT_OK;
    if ((rc = zt_train_sum_world(r->world_comm, &have, "loss-spike rollback: a commit to roll back to", err))) return rc;
    uint64_t first = r->sample_base + (uint64_t)(step - r->start_step) * r->per_step_samples;
    char ranges[200];
    zt_train_sample_ranges(&r->ts, first, r->per_step_samples, ranges, sizeof ranges);
    double loss_now = loss_sum / (double)r->micro_per_step;
    if (have != r->world) {
        zt_progress_message(&r->prog, "step %lld: loss spike, but no commit to roll back to yet (fault.loss_spike_policy "
                            "rollback): the update is skipped instead", (long long)(step + 1));
        return ZT_OK;
    }
    zt_step_deadline_for_save(&r->dl);
    if ((rc = zt_train_roll_back(r->s.e, opts->ckpt_dir, r->cfg, &r->ts, guard, first, r->per_step_samples,
                                 r->world_comm, r->world, r->out, r->cmeta, commit, sizeof commit, err)))
        return rc;
    zt_step_deadline_for_steps(&r->dl);
    zt_progress_message(&r->prog, "step %lld: loss %.4f is a spike (z %.1f over the last %d steps: mean %.4f, "
                        "sd %.4f; fault.loss_spike_z = %g): every rank rolled back to %s (step %lld) and "
                        "skips global samples %s (step %lld's batch; recorded in the next checkpoints)",
                        (long long)(step + 1), loss_now, spike_z, guard->window, spike_mean, spike_sd,
                        guard->spike_z, commit, (long long)r->cmeta->step, ranges, (long long)(step + 1));
    if (r->rank == 0 && r->log.fp) {
        char ev[400];
        snprintf(ev, sizeof ev, "\"step\":%lld,\"loss\":%.17g,\"to_step\":%lld,\"skipped_samples\":\"%s\"",
                 (long long)(step + 1), loss_now, (long long)r->cmeta->step, ranges);
        if ((rc = zt_jsonl_write_event(&r->log, "rollback", ev, err))) return rc;
    }
    r->start_step = r->cmeta->step;
    r->sample_base = r->cmeta->samples_consumed;
    *rolled = true;
    return ZT_OK;
}

/* The async save in flight, if any, committed (its failure under on_save_error continue: said). */
static int finish_pending(zt_run *r, zt_error *err) {
    zt_ckpt_async *prev = r->pending; /* finish frees it, also on failure */
    r->pending = NULL;
    int rc = zt_ckpt_async_finish(prev, err);
    if (rc)
        rc = zt_train_on_save_error(r->cfg, rc, false, r->pending_step + 1, &r->prog, &r->log, r->rank,
                                    &r->failed_saves, err);
    return rc;
}

/* After `step`: a checkpoint when due (every ckpt_every steps, the last step, a stop), in the
 * background under --ckpt-async but for the last one and a stop's; else the step after an async
 * snapshot commits it (errors surface there, on every rank). */
int zt_train_save_due(zt_run *r, int64_t step, bool last, bool stop, zt_error *err) {
    const zt_train_options *opts = r->opts;
    int rc;
    if (opts && opts->ckpt_dir && opts->ckpt_dir[0] &&
        (last || stop || (opts->ckpt_every > 0 && (step + 1) % opts->ckpt_every == 0))) {
        zt_ckpt_meta meta = {.step = step + 1,
                             .samples_consumed = r->sample_base + (uint64_t)(step + 1 - r->start_step) * r->per_step_samples,
                             .config_hash = zt_train_config_hash(r->cfg)};
        zt_train_run_state(&meta.run, &r->ts, &r->guard, meta.samples_consumed);
        double tc = zt_train_now();
        if ((rc = finish_pending(r, err))) return rc;
        if (r->ckpt_async && !last && !stop) {
            if ((rc = zt_ckpt_save_async(r->s.e, opts->ckpt_dir, &meta, opts->keep_last, &r->pending, err)))
                return zt_train_on_save_error(r->cfg, rc, false, step + 1, &r->prog, &r->log, r->rank,
                                              &r->failed_saves, err);
            r->pending_step = step;
            zt_progress_message(&r->prog, "step %lld: checkpoint snapshot taken (%.2f s), writing in the "
                                "background", (long long)(step + 1), zt_train_now() - tc);
        } else {
            if ((rc = zt_ckpt_save(r->s.e, opts->ckpt_dir, &meta, opts->keep_last, err)))
                return zt_train_on_save_error(r->cfg, rc, last || stop, step + 1, &r->prog, &r->log, r->rank,
                                              &r->failed_saves, err);
            zt_progress_message(&r->prog, "step %lld: checkpoint saved to %s/step-%08lld (%.2f s)",
                                (long long)(step + 1), opts->ckpt_dir, (long long)(step + 1), zt_train_now() - tc);
        }
    } else if (r->pending && step > r->pending_step) {
        return finish_pending(r, err);
    }
    return ZT_OK;
}

/* Nothing to train (resumed at or past --stop-after): the loaded state saved in this run's layout,
 * i.e. the checkpoint resharded to this world size and strategy. */
int zt_train_resave(zt_run *r, zt_error *err) {
    const zt_train_options *opts = r->opts;
    if (!(opts && opts->ckpt_dir && opts->ckpt_dir[0] && r->end_step <= r->start_step)) return ZT_OK;
    zt_ckpt_meta meta = {.step = r->start_step, .samples_consumed = r->sample_base,
                         .config_hash = zt_train_config_hash(r->cfg)};
    zt_train_run_state(&meta.run, &r->ts, &r->guard, meta.samples_consumed);
    int rc = zt_ckpt_save(r->s.e, opts->ckpt_dir, &meta, opts->keep_last, err);
    if (rc) return rc;
    fprintf(r->out, "checkpoint re-saved to %s/step-%08lld for %d rank%s (%s)\n", opts->ckpt_dir,
            (long long)r->start_step, r->world, r->world == 1 ? "" : "s", zt_strategy_name(r->cfg->strategy));
    return ZT_OK;
}
