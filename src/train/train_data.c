/* train_data.c - the run's data: a token file read in windows, or records (JSONL, plain text)
 * tokenized into dataset caches beside them (rank 0 first, then every other rank finds the cache or,
 * on a file system of its own, builds the same one), packed or padded into sequences, blended by
 * weight; the samplers read both through the same global sample indices (data/sampler.h). What it
 * did is said: records, tokens, counted targets, skips, truncations, the packing's fill. */
#include "train/train_internal.h"

#include "core/file.h"
#include "data/dataset_build.h"
#include "data/tokenizer_json.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <xxhash.h>

static bool has_ext(const char *p, const char *ext) {
    size_t n = strlen(p), e = strlen(ext);
    return n > e && strcmp(p + n - e, ext) == 0;
}

/* data.format auto: what data.train names */
static zt_data_format format_of(const zt_train_config *cfg) {
    if (cfg->data_format != ZT_DATA_AUTO) return (zt_data_format)cfg->data_format;
    const char *p = cfg->train_path;
    if (has_ext(p, ".jsonl") || has_ext(p, ".json")) return ZT_DATA_JSONL;
    if (has_ext(p, ".txt") || has_ext(p, ".text") || has_ext(p, ".md")) return ZT_DATA_TEXT;
    if (strpbrk(p, "*?[,")) return ZT_DATA_AUTO; /* records, each file by its extension */
    return ZT_DATA_TOKENS;
}

static int open_tokens(zt_run *r, zt_error *err) {
    const zt_train_config *cfg = r->cfg;
    int rc = zt_token_file_open(&r->train, cfg->train_path, err);
    if (rc) return rc;
    if ((rc = zt_sampler_init(&r->ts, &r->train, r->T, cfg->seed, true, err))) {
        zt_error_prefix(err, "data.train %s", cfg->train_path);
        return rc;
    }
    if (r->have_val) {
        if ((rc = zt_token_file_open(&r->valf, cfg->val_path, err))) return rc;
        if ((rc = zt_sampler_init(&r->vs, &r->valf, r->T, cfg->seed, false, err))) {
            zt_error_prefix(err, "data.val %s", cfg->val_path);
            return rc;
        }
    }
    return ZT_OK;
}

static void hash_file(XXH64_state_t *h, const char *path) {
    char *buf = NULL;
    size_t len = 0;
    zt_error ignored = {0};
    if (path && *path && zt_read_file(path, "file", &buf, &len, &ignored) == ZT_OK) XXH64_update(h, buf, len);
    XXH64_update(h, path ? path : "", path ? strlen(path) : 0);
    free(buf);
}

/* the chat template: data.chat_template, else a tokenizer_config.json with one beside data.tokenizer */
static int load_template(zt_run *r, const char **used, zt_error *err) {
    const zt_train_config *cfg = r->cfg;
    zt_run_data *d = &r->data;
    static char beside[ZT_PATH_MAX + 32];
    *used = NULL;
    if (cfg->chat_template[0]) {
        int rc = zt_chat_template_load(&d->tmpl, cfg->chat_template, err);
        if (rc) return zt_error_prefix(err, "data.chat_template");
        *used = cfg->chat_template;
    } else if (cfg->tokenizer_path[0]) {
        const char *slash = strrchr(cfg->tokenizer_path, '/');
        int dl = slash ? (int)(slash - cfg->tokenizer_path) : 1;
        snprintf(beside, sizeof beside, "%.*s/tokenizer_config.json", dl, slash ? cfg->tokenizer_path : ".");
        struct stat st;
        zt_error ignored = {0};
        if (stat(beside, &st) == 0 && zt_chat_template_load(&d->tmpl, beside, &ignored) == ZT_OK) *used = beside;
    }
    if (!d->tmpl) return ZT_OK;
    uint32_t eos;
    char *text = NULL;
    size_t len = 0;
    zt_error ignored = {0};
    if (!zt_chat_template_eos(d->tmpl)[0] && zt_tokenizer_eot(d->tok, &eos, &ignored) == ZT_OK &&
        zt_bpe_decode(d->tok, &eos, 1, &text, &len, &ignored) == ZT_OK) { /* a .jinja file: the tokenizer's */
        int rc = zt_chat_template_set_tokens(d->tmpl, NULL, text, err);
        free(text);
        if (rc) return rc;
    }
    return ZT_OK;
}

/* one source (comma-separated files and globs) into its cache, opened into ds */
static int build_source(zt_run *r, const zt_dataset_spec *base, const char *source, double val_fraction,
                        const char *key, zt_dataset *ds, zt_error *err) {
    zt_dataset_spec s = *base;
    s.source = source;
    s.val_fraction = val_fraction;
    char path[4096];
    zt_dataset_report rep;
    int rc = ZT_OK;
    /* rank 0 first; then every other rank finds its cache (or builds it where it cannot see it) */
    for (int turn = 0; turn < 2 && !rc; turn++) {
        if ((turn == 0) == (r->rank == 0)) {
            s.progress = r->rank == 0 ? r->out : NULL;
            rc = zt_dataset_build(&s, path, sizeof path, &rep, err);
            if (rc) zt_error_prefix(err, "%s", key);
        }
        if (r->world_comm && r->world > 1) {
            int all = rc == ZT_OK;
            zt_error cerr = {0};
            int brc = zt_all_reduce_and_int(r->world_comm, &all, "dataset caches built", &cerr);
            if (!rc && brc) rc = brc, *err = cerr;
            if (!rc && !all) rc = zt_error_set(err, ZT_ERR_DATA, "%s: another rank could not build its dataset cache", key);
        }
    }
    if (rc) return rc;
    if (r->rank == 0)
        fprintf(r->out, "%s %s: %s %llu records of %llu files (%.1f MB): %llu tokens, %llu counted, %llu for "
                "validation%s -> %s\n", key, source, rep.reused ? "cached," : "tokenized", (unsigned long long)rep.records,
                (unsigned long long)rep.files, (double)rep.bytes / 1e6, (unsigned long long)rep.tokens,
                (unsigned long long)rep.counted, (unsigned long long)rep.val_records,
                rep.empty ? " (empty records skipped)" : "", path);
    if (r->rank == 0 && rep.searched)
        fprintf(r->out, "  %llu assistant turns found by their content: the chat template is not prefix-stable on those "
                "conversations (docs/data.md)\n", (unsigned long long)rep.searched);
    return zt_dataset_open(ds, path, err);
}

static int pack_say(zt_run *r, zt_packed *p, const zt_dataset *ds, bool val, zt_error *err) {
    const zt_train_config *cfg = r->cfg;
    uint32_t eos = 0;
    zt_error ignored = {0};
    if (zt_tokenizer_eot(r->data.tok, &eos, &ignored) != ZT_OK) eos = 0;
    int rc = zt_packed_build(p, ds, val, r->T, cfg->pack, (zt_too_long)cfg->too_long, (int32_t)eos, err);
    if (rc) return rc;
    if (r->rank == 0)
        fprintf(r->out, "  %s: %llu records into %llu sequences of T=%d (%s): %.2f%% of the slots hold tokens, "
                "%llu targets counted; %llu truncated, %llu dropped (longer than T+1, data.too_long), %llu of one "
                "token skipped\n", val ? "validation" : "training", (unsigned long long)p->docs,
                (unsigned long long)p->n_seq, r->T, cfg->pack ? "packed" : "padded", 100.0 * zt_packed_fill_ratio(p),
                (unsigned long long)p->counted, (unsigned long long)p->truncated, (unsigned long long)p->dropped,
                (unsigned long long)p->too_short);
    return ZT_OK;
}

/* data.train's entries: the sources of a mixture (data.weights), else one */
static int split_sources(const zt_train_config *cfg, char ***out, double **w, int *n, zt_error *err) {
    *out = NULL;
    *w = NULL;
    *n = 0;
    if (!cfg->weights[0]) {
        *out = malloc(sizeof **out);
        if (!*out || !((*out)[0] = strdup(cfg->train_path))) return zt_error_set(err, ZT_ERR_NOMEM, "out of memory");
        *n = 1;
        return ZT_OK;
    }
    int ns = 1, nw = 1;
    for (const char *p = cfg->train_path; *p; p++) ns += *p == ',';
    for (const char *p = cfg->weights; *p; p++) nw += *p == ',';
    if (ns != nw)
        return zt_error_set(err, ZT_ERR_USAGE, "data.weights has %d weights for %d data.train entries ('%s')", nw, ns,
                            cfg->train_path);
    *out = calloc((size_t)ns, sizeof **out);
    *w = malloc((size_t)ns * sizeof **w);
    if (!*out || !*w) return zt_error_set(err, ZT_ERR_NOMEM, "out of memory");
    const char *p = cfg->train_path, *q = cfg->weights;
    for (int i = 0; i < ns; i++) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (!((*out)[i] = strndup(p, len))) return zt_error_set(err, ZT_ERR_NOMEM, "out of memory");
        *n = i + 1;
        char *end;
        (*w)[i] = strtod(q, &end);
        if (end == q || (*end && *end != ',') || !((*w)[i] >= 0))
            return zt_error_set(err, ZT_ERR_USAGE, "data.weights '%s': weight %d is not a number >= 0", cfg->weights,
                                i + 1);
        q = *end ? end + 1 : end;
        p = e ? e + 1 : p + len;
    }
    return ZT_OK;
}

static int open_records(zt_run *r, zt_error *err) {
    const zt_train_config *cfg = r->cfg;
    zt_run_data *d = &r->data;
    d->records = true;
    int rc = zt_tokenizer_open(&d->tok, cfg->tokenizer_path[0] ? cfg->tokenizer_path : NULL, err);
    if (rc) return zt_error_prefix(err, "data.tokenizer");
    if (zt_bpe_vocab_size(d->tok) > (size_t)cfg->model.vocab_size)
        return zt_error_set(err, ZT_ERR_USAGE, "data.tokenizer %s has %zu ids, more than model.vocab_size %d",
                            cfg->tokenizer_path[0] ? cfg->tokenizer_path : "(GPT-2)", zt_bpe_vocab_size(d->tok),
                            cfg->model.vocab_size);
    const char *tmpl_path;
    if ((rc = load_template(r, &tmpl_path, err))) return rc;
    uint32_t eos = 0;
    zt_error ignored = {0};
    bool have_eos = zt_tokenizer_eot(d->tok, &eos, &ignored) == ZT_OK;
    XXH64_state_t *h = XXH64_createState();
    if (!h) return zt_error_set(err, ZT_ERR_NOMEM, "out of memory");
    XXH64_reset(h, 0);
    hash_file(h, cfg->tokenizer_path);
    hash_file(h, tmpl_path);
    zt_dataset_spec base = {
        .format = (zt_data_format)cfg->data_format, /* auto: each file by its extension */
        .text_unit = (zt_text_unit)cfg->text_unit,
        .rules = {.shape = (zt_record_shape)cfg->data_record, .text_field = cfg->text_field,
                  .prompt_field = cfg->prompt_field, .completion_field = cfg->completion_field,
                  .messages_field = cfg->messages_field, .count_all = cfg->loss_on == 1, .tmpl = d->tmpl,
                  .add_eos = true},
        .tokenizer = d->tok, .eos_id = have_eos ? (int64_t)eos : -1, .settings_key = XXH64_digest(h),
        .seed = cfg->seed, .cache_dir = cfg->cache_dir};
    XXH64_freeState(h);
    char **src = NULL;
    double *w = NULL;
    int n = 0;
    rc = split_sources(cfg, &src, &w, &n, err);
    bool val_split = !cfg->val_path[0] && cfg->val_fraction > 0;
    int nv = cfg->val_path[0] ? 1 : val_split ? n : 0;
    d->ds = calloc((size_t)(n + 1), sizeof *d->ds);
    d->tp = calloc((size_t)n, sizeof *d->tp);
    d->vp = calloc((size_t)(nv ? nv : 1), sizeof *d->vp);
    d->tpp = calloc((size_t)n, sizeof *d->tpp);
    d->vpp = calloc((size_t)(nv ? nv : 1), sizeof *d->vpp);
    if (!rc && (!d->ds || !d->tp || !d->vp || !d->tpp || !d->vpp)) rc = zt_error_set(err, ZT_ERR_NOMEM, "out of memory");
    for (int i = 0; i < n && !rc; i++) {
        rc = build_source(r, &base, src[i], val_split ? cfg->val_fraction : 0, "data.train", &d->ds[i], err);
        d->n_ds = i + 1;
        if (!rc) rc = pack_say(r, &d->tp[i], &d->ds[i], false, err);
        d->tpp[i] = &d->tp[i];
        d->n_tp = i + 1;
    }
    if (!rc && cfg->val_path[0]) {
        rc = build_source(r, &base, cfg->val_path, 0, "data.val", &d->ds[n], err);
        d->n_ds = n + 1;
        if (!rc) rc = pack_say(r, &d->vp[0], &d->ds[n], false, err);
        d->vpp[0] = &d->vp[0];
        d->n_vp = 1;
    }
    for (int i = 0; i < n && !rc && val_split; i++) {
        if (!d->ds[i].n_val) continue;
        if (!(rc = pack_say(r, &d->vp[d->n_vp], &d->ds[i], true, err))) d->vpp[d->n_vp] = &d->vp[d->n_vp], d->n_vp++;
    }
    if (!rc && val_split && !d->n_vp)
        rc = zt_error_set(err, ZT_ERR_DATA, "data.val_fraction %g left no record for validation", (double)cfg->val_fraction);
    if (!rc) rc = zt_mixture_init(&d->tmix, d->tpp, n, w, cfg->seed, true, err);
    if (!rc && n > 1 && r->rank == 0) {
        fprintf(r->out, "data: a mixture of %d sources, weights", n);
        for (int i = 0; i < n; i++) fprintf(r->out, " %.4g", d->tmix.w[i]);
        fprintf(r->out, " (Megatron's blend)\n");
    }
    if (!rc) rc = zt_sampler_init_mixture(&r->ts, &d->tmix, r->T, err);
    if (!rc && d->n_vp) rc = zt_mixture_init(&d->vmix, d->vpp, d->n_vp, NULL, cfg->seed, false, err);
    d->vmix.end_pads = true; /* every validation sequence evaluated once (train_eval.c) */
    if (!rc && d->n_vp) rc = zt_sampler_init_mixture(&r->vs, &d->vmix, r->T, err);
    for (int i = 0; i < n; i++) free(src[i]);
    free(src);
    free(w);
    d->positions = cfg->pack;
    return rc;
}

int zt_train_open_data(zt_run *r, zt_error *err) {
    const zt_train_config *cfg = r->cfg;
    zt_data_format fmt = format_of(cfg);
    bool records = fmt != ZT_DATA_TOKENS;
    r->have_val = cfg->val_path[0] || (records && cfg->val_fraction > 0);
    if (!records) {
        if (cfg->val_fraction > 0)
            return zt_error_set(err, ZT_ERR_USAGE, "data.val_fraction %g needs records (data.format jsonl or text), "
                                "not the token file %s", (double)cfg->val_fraction, cfg->train_path);
        if (cfg->weights[0])
            return zt_error_set(err, ZT_ERR_USAGE, "data.weights needs records (data.format jsonl or text), not the "
                                "token file %s", cfg->train_path);
        return open_tokens(r, err);
    }
    if (cfg->val_path[0] && cfg->val_fraction > 0)
        return zt_error_set(err, ZT_ERR_USAGE, "data.val and data.val_fraction %g: name one way to validate",
                            (double)cfg->val_fraction);
    return open_records(r, err);
}

void zt_train_close_data(zt_run *r) {
    zt_run_data *d = &r->data;
    zt_mixture_free(&d->tmix);
    zt_mixture_free(&d->vmix);
    for (int i = 0; i < d->n_tp; i++) zt_packed_free(&d->tp[i]);
    for (int i = 0; i < d->n_vp; i++) zt_packed_free(&d->vp[i]);
    for (int i = 0; i < d->n_ds; i++) zt_dataset_close(&d->ds[i]);
    free(d->tp);
    free(d->vp);
    free(d->tpp);
    free(d->vpp);
    free(d->ds);
    free(d->pos);
    zt_chat_template_free(d->tmpl);
    zt_bpe_free(d->tok);
    memset(d, 0, sizeof *d);
}

void zt_train_data_resumed(zt_run *r) {
    const zt_ckpt_run_state *s = &r->cmeta->run;
    zt_mixture *m = &r->data.tmix;
    if (!r->data.records || r->rank != 0) return;
    uint64_t cur[ZT_CKPT_MAX_SOURCES];
    int n = m->n <= ZT_CKPT_MAX_SOURCES ? m->n : ZT_CKPT_MAX_SOURCES;
    zt_mixture_cursors(m, zt_sampler_physical(&r->ts, r->sample_base), cur);
    bool same = s->n_sources == n;
    for (int k = 0; same && k < n; k++) same = s->source_key[k] == m->src[k]->d->key && s->source_cursor[k] == cur[k];
    fprintf(r->out, "data: resumed at global sample %llu: source cursors", (unsigned long long)r->sample_base);
    for (int k = 0; k < n; k++) fprintf(r->out, " %llu", (unsigned long long)cur[k]);
    if (same)
        fprintf(r->out, " (as the checkpoint recorded)\n");
    else
        fprintf(r->out, "; the checkpoint recorded %d source%s of other data or cursors: the run goes on with the data "
                "as configured now\n", s->n_sources, s->n_sources == 1 ? "" : "s");
}
