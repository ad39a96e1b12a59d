/* train_recovery.c - the training loop's side of its checkpoints (train_recovery.h): the run state
 * a commit carries (skipped samples, the loss-spike window), the skips a resumed run applies, a save
 * that failed under checkpoint.on_save_error continue, the loss-spike rollback; and the world-wide
 * gather and sum the loop's cross-rank decisions read. */
#include "engine/train_recovery.h"

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
void zt_train_run_state(zt_ckpt_run_state *r, const zt_sampler *ts, const zt_guard *g) {
    r->n_skips = ts->n_skips; /* ZT_SAMPLER_MAX_SKIPS == ZT_CKPT_MAX_SKIPS */
    for (int k = 0; k < ts->n_skips; k++) {
        r->skip_start[k] = ts->skips[k].start;
        r->skip_count[k] = ts->skips[k].count;
    }
    const double *hist;
    r->window = zt_guard_window(g, &hist, &r->n_losses, &r->head); /* <= ZT_CKPT_MAX_WINDOW (the key's range) */
    if (r->n_losses) memcpy(r->losses, hist, (size_t)r->n_losses * sizeof *hist);
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

