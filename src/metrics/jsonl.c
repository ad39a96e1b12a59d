/* jsonl.c - the per-step metrics log: one JSON object per line, flushed each step so a crashed
 * run keeps what it logged. */
#include "core/file.h"
#include "metrics/metrics.h"

#include <errno.h>
#include <math.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>


uint64_t zt_rss_peak_bytes(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
    return (uint64_t)ru.ru_maxrss * 1024u; /* Linux: KiB */
}

uint64_t zt_memory_peak_total(const zt_memory_report *m) { return (uint64_t)m->peak_total; }

int zt_jsonl_open(zt_jsonl *j, const char *path, zt_error *err) {
    memset(j, 0, sizeof *j);
    snprintf(j->path, sizeof j->path, "%s", path);
    zt_make_parent_dirs(path);
    j->fp = fopen(path, "w");
    if (!j->fp) return zt_error_set(err, ZT_ERR_IO, "cannot create log %s: %s", path, strerror(errno));
    return ZT_OK;
}

static void num(FILE *fp, const char *key, double v, int first) {
    if (!first) fputc(',', fp);
    if (isfinite(v)) fprintf(fp, "\"%s\":%.9g", key, v);
    else fprintf(fp, "\"%s\":null", key);
}

static int finish_line(zt_jsonl *j, zt_error *err) {
    fputs("}\n", j->fp);
    if (fflush(j->fp) != 0 || ferror(j->fp))
        return zt_error_set(err, ZT_ERR_IO, "writing log %s: %s", j->path, strerror(errno));
    return ZT_OK;
}

int zt_jsonl_write_step(zt_jsonl *j, const zt_step_metrics *m, zt_error *err) {
    if (!j->fp) return ZT_OK;
    FILE *fp = j->fp;
    fprintf(fp, "{\"step\":%lld", (long long)m->step);
    num(fp, "loss", m->loss, 0);
    fprintf(fp, ",\"loss_hex\":\"%a\"", m->loss); /* exact, for bitwise comparisons */
    num(fp, "val_loss", m->val_loss, 0);
    num(fp, "lr", m->lr, 0);
    num(fp, "grad_norm", m->grad_norm, 0);
    num(fp, "clip_coef", m->clip_coef, 0);
    fprintf(fp, ",\"tokens\":%lld", (long long)m->tokens);
    num(fp, "step_s", m->step_s, 0);
    num(fp, "data_s", m->data_s, 0);
    num(fp, "fwdbwd_s", m->fwdbwd_s, 0);
    num(fp, "optim_s", m->optim_s, 0);
    num(fp, "tok_per_s", m->tok_per_s, 0);
    num(fp, "mfu", m->mfu, 0);
    num(fp, "hfu", m->hfu > 0 ? m->hfu : NAN, 0);
    num(fp, "elapsed_s", m->elapsed_s, 0);
    double no = NAN;
    bool t = m->has_times;
    num(fp, "forward_s", t ? m->forward_s : no, 0);
    num(fp, "backward_s", t ? m->backward_s : no, 0);
    num(fp, "comm_s", t ? m->comm_s : no, 0);
    num(fp, "comm_wait_s", t ? m->comm_wait_s : no, 0);
    num(fp, "io_s", t ? m->io_s : no, 0);
    num(fp, "other_s", t ? m->other_s : no, 0);
    num(fp, "eval_s", t ? m->eval_s : no, 0);
    num(fp, "ckpt_s", t ? m->ckpt_s : no, 0);
    num(fp, "loss_scale", m->has_loss_scale ? m->loss_scale : no, 0);
    if (m->has_loss_scale) fprintf(fp, ",\"skipped_steps\":%lld", (long long)m->skipped_steps);
    else fputs(",\"skipped_steps\":null", fp);
    if (m->has_moe) { /* tokens per expert (summed over the MoE layers and the data-parallel ranks) */
        fputs(",\"moe_tokens\":[", fp);
        for (int x = 0; x < m->moe.n_experts; x++) fprintf(fp, "%s%lld", x ? "," : "", (long long)m->moe.tokens[x]);
        fprintf(fp, "],\"moe_dropped\":%lld", (long long)m->moe.dropped);
        if (m->moe.router_nonfinite) /* the tokens whose router logits were not finite, the first layer's unit */
            fprintf(fp, ",\"moe_router_nonfinite\":%lld,\"moe_router_nonfinite_unit\":\"%s\"",
                    (long long)m->moe.router_nonfinite, m->moe.router_nonfinite_unit);
        num(fp, "moe_balance", m->moe.max_over_mean, 0);
    }
    if (m->has_memory) { /* per class: bytes now, then high-water; the total's; the process's RSS peak */
        const zt_memory_report *r = &m->mem;
        fputs(",\"memory\":{", fp);
        for (int c = 0; c < ZT_MEM_CLASSES; c++)
            fprintf(fp, "\"%s\":%zu,", zt_mem_class_name((zt_mem_class)c), r->now[c]);
        for (int c = 0; c < ZT_MEM_CLASSES; c++)
            fprintf(fp, "\"peak_%s\":%zu,", zt_mem_class_name((zt_mem_class)c), r->peak[c]);
        fprintf(fp, "\"total\":%zu,\"peak_total\":%zu,\"rss_peak\":%llu}", r->total, r->peak_total,
                (unsigned long long)m->rss_peak);
    } else {
        fputs(",\"memory\":null", fp);
    }
    const zt_comm_bytes *b = &m->bytes;
    fprintf(fp, ",\"bytes_sent\":{\"reduce_scatter\":%llu,\"all_gather\":%llu,\"all_reduce\":%llu,"
            "\"compressed_all_reduce\":%llu,\"small\":%llu,\"pipeline\":%llu,\"context\":%llu,\"experts\":%llu}",
            (unsigned long long)b->sent_rs, (unsigned long long)b->sent_ag, (unsigned long long)b->sent_ar,
            (unsigned long long)b->sent_car, (unsigned long long)b->sent_small, (unsigned long long)b->sent_pp,
            (unsigned long long)b->sent_cp, (unsigned long long)b->sent_ep);
    fprintf(fp, ",\"bytes_recv\":{\"reduce_scatter\":%llu,\"all_gather\":%llu,\"all_reduce\":%llu,"
            "\"compressed_all_reduce\":%llu,\"small\":%llu,\"pipeline\":%llu,\"context\":%llu,\"experts\":%llu}",
            (unsigned long long)b->recv_rs, (unsigned long long)b->recv_ag, (unsigned long long)b->recv_ar,
            (unsigned long long)b->recv_car, (unsigned long long)b->recv_small, (unsigned long long)b->recv_pp,
            (unsigned long long)b->recv_cp, (unsigned long long)b->recv_ep);
    return finish_line(j, err);
}

int zt_jsonl_write_event(zt_jsonl *j, const char *name, const char *fields_json, zt_error *err) {
    if (!j->fp) return ZT_OK;
    fprintf(j->fp, "{\"event\":\"%s\"%s%s", name, fields_json && *fields_json ? "," : "",
            fields_json ? fields_json : "");
    return finish_line(j, err);
}

void zt_jsonl_close(zt_jsonl *j) {
    if (j->fp) fclose(j->fp);
    j->fp = NULL;
}
