/* train_eval.c - validation during training: the mean loss over the first eval.batches
 * micro-batches of the validation file, and eval.target_loss reached. */
#include "train/train_internal.h"

/* Mean loss over the first cfg->eval_batches micro-batches of the validation file (always the same
 * windows, in file order, so successive evaluations are comparable). Rank r takes batches r, r+W,
 * ...; every rank runs the same number of forwards (zero3 gathers are collectives), the batches
 * past the end count zero. */
int zt_train_evaluate(zt_run *r, double *out, zt_error *err) {
    zt_engine *e = r->s.e;
    zt_pipeline *pipe = r->s.pipe;
    zt_sampler *val = &r->vs;
    int rank = r->drank, world = r->dworld;
    int B = r->cfg->micro_batch, T = r->cfg->seq_len, V = zt_engine_model(e)->vocab_size;
    /* records: every sequence once, the last micro-batch filled up with padding (mixture.h) */
    int64_t avail = (int64_t)((val->n_windows + (r->data.records ? (uint64_t)B - 1 : 0)) / (uint64_t)B),
            n = r->cfg->eval_batches;
    if (n > avail) n = avail;
    if (n < 1) n = 1;
    int64_t per_rank = (n + world - 1) / world;
    double sum = 0, counted_sum = 0;
    bool records = r->data.records;
    int32_t *inp, *tgt, *pos;
    zt_train_cp_whole(r, 0, &inp, &tgt, &pos);
    for (int64_t j = 0; j < per_rank; j++) {
        int64_t i = j * world + rank;
        uint64_t counted = 0;
        int rc = zt_sampler_batch(val, (uint64_t)(i < n ? i : 0) * (uint64_t)B, 1, B, inp, tgt, pos, &counted, V, err);
        if (rc) return rc;
        zt_batch b = {.B = B, .T = T, .inputs = inp, .targets = tgt, .positions = pos, .dloss = 0, .logits_pos = -1};
        zt_train_cp_cut(r, 0, &b, &counted); /* context parallelism: this rank's chunks */
        float loss;
        if ((rc = pipe ? zt_pipeline_forward(pipe, &b, &loss, err) : zt_engine_forward(e, &b, &loss, NULL, err)))
            return rc;
        /* records: over counted targets; a token file: the cp ranks' means of 1/cp of the positions */
        if (i < n) sum += records ? (double)loss * (double)counted : loss / (double)r->cp;
        if (i < n) counted_sum += (double)counted;
    }
    int rc = zt_engine_sum_ranks(e, &sum, err);
    if (!rc && records) rc = zt_engine_sum_ranks(e, &counted_sum, err);
    *out = records ? (counted_sum > 0 ? sum / counted_sum : 0.0) : sum / (double)n;
    return rc;
}

/* eval.target_loss reached: say so, with the wall time since the first step (evaluations included,
 * as MLPerf's time to train) and the training tokens consumed, and log a target_reached event. */
int zt_train_target_reached(zt_run *r, const zt_step_metrics *m, double seconds, uint64_t tokens, zt_error *err) {
    float target = r->cfg->eval_target_loss;
    zt_progress_message(&r->prog, "step %lld: val loss %.4f <= eval.target_loss %g: target reached after %.1f s and "
                        "%llu tokens; stopping", (long long)m->step, m->val_loss, (double)target, seconds,
                        (unsigned long long)tokens);
    if (r->rank != 0 || !r->log.fp) return ZT_OK;
    char ev[192];
    snprintf(ev, sizeof ev, "\"step\":%lld,\"val_loss\":%.6f,\"target\":%g,\"seconds\":%.3f,\"tokens\":%llu",
             (long long)m->step, m->val_loss, (double)target, seconds, (unsigned long long)tokens);
    return zt_jsonl_write_event(&r->log, "target_reached", ev, err);
}
