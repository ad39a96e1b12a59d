/* dataset_build.c - records from files into a dataset cache: the files of a source, the cache's key,
 * reading JSONL and plain text as streams, tokenizing with the byte offsets that map the counted
 * spans onto tokens, the validation split, progress (see dataset_build.h). */
#include "data/dataset_build.h"

#include "data/dataset_cache.h"
#include "data/sampler.h"
#include "data/tokenizer_json.h"

#include <errno.h>
#include <glob.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <xxhash.h>

#define CACHE_VERSION "zerotrain dataset 1"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int add_file(char ***files, int *n, int *cap, const char *path, zt_error *err) {
    if (*n == *cap) {
        int c = *cap ? 2 * *cap : 8;
        char **p = realloc(*files, (size_t)c * sizeof *p);
        if (!p) return zt_error_set(err, ZT_ERR_NOMEM, "dataset: out of memory");
        *files = p;
        *cap = c;
    }
    if (!((*files)[*n] = strdup(path))) return zt_error_set(err, ZT_ERR_NOMEM, "dataset: out of memory");
    (*n)++;
    return ZT_OK;
}

int zt_dataset_files(const char *source, char ***files, int *n, zt_error *err) {
    *files = NULL;
    *n = 0;
    int cap = 0, rc = ZT_OK;
    const char *p = source;
    while (!rc && *p) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        while (len && (*p == ' ')) p++, len--;
        while (len && p[len - 1] == ' ') len--;
        char item[4096];
        if (len == 0 || len >= sizeof item) {
            rc = zt_error_set(err, ZT_ERR_DATA, "data source '%s': %s entry", source, len ? "an overlong" : "an empty");
            break;
        }
        memcpy(item, p, len);
        item[len] = 0;
        if (strpbrk(item, "*?[")) {
            glob_t g;
            int grc = glob(item, GLOB_ERR, NULL, &g);
            if (grc == GLOB_NOMATCH || (grc == 0 && g.gl_pathc == 0))
                rc = zt_error_set(err, ZT_ERR_DATA, "data source '%s': no file matches '%s'", source, item);
            else if (grc)
                rc = zt_error_set(err, ZT_ERR_IO, "data source '%s': cannot expand '%s'", source, item);
            for (size_t i = 0; !rc && i < g.gl_pathc; i++) {
                struct stat st;
                if (stat(g.gl_pathv[i], &st) == 0 && S_ISREG(st.st_mode))
                    rc = add_file(files, n, &cap, g.gl_pathv[i], err);
            }
            if (grc == 0) globfree(&g);
        } else {
            struct stat st;
            if (stat(item, &st) != 0)
                rc = zt_error_set(err, ZT_ERR_IO, "data source: cannot read %s: %s", item, strerror(errno));
            else if (!S_ISREG(st.st_mode))
                rc = zt_error_set(err, ZT_ERR_DATA, "data source: %s is not a file", item);
            else
                rc = add_file(files, n, &cap, item, err);
        }
        p = e ? e + 1 : p + len;
    }
    if (!rc && *n == 0) rc = zt_error_set(err, ZT_ERR_DATA, "data source '%s' names no file", source);
    if (rc) {
        for (int i = 0; i < *n; i++) free((*files)[i]);
        free(*files);
        *files = NULL;
        *n = 0;
    }
    return rc;
}

static zt_data_format format_of(const zt_dataset_spec *s, const char *path) {
    if (s->format != ZT_DATA_AUTO) return s->format;
    const char *dot = strrchr(path, '.');
    return dot && (strcmp(dot, ".jsonl") == 0 || strcmp(dot, ".json") == 0) ? ZT_DATA_JSONL : ZT_DATA_TEXT;
}

static void hash_str(XXH64_state_t *h, const char *s) {
    s = s ? s : "";
    XXH64_update(h, s, strlen(s) + 1);
}

/* the cache key: the version, every setting that changes the tokens, each file's path and bytes */
static int cache_key(const zt_dataset_spec *s, char **files, int n, uint64_t *key, uint64_t *bytes, zt_error *err) {
    XXH64_state_t *h = XXH64_createState();
    char *buf = malloc(1 << 20);
    if (!h || !buf) {
        XXH64_freeState(h);
        free(buf);
        return zt_error_set(err, ZT_ERR_NOMEM, "dataset: out of memory");
    }
    XXH64_reset(h, 0);
    const zt_record_rules *r = &s->rules;
    int ints[4] = {(int)s->text_unit, (int)r->shape, (int)r->count_all, 0};
    hash_str(h, CACHE_VERSION);
    XXH64_update(h, ints, sizeof ints);
    XXH64_update(h, &s->settings_key, sizeof s->settings_key);
    XXH64_update(h, &s->val_fraction, sizeof s->val_fraction);
    XXH64_update(h, &s->seed, sizeof s->seed);
    hash_str(h, r->text_field);
    hash_str(h, r->prompt_field);
    hash_str(h, r->completion_field);
    hash_str(h, r->messages_field);
    int eos[2] = {r->add_eos, (int)s->eos_id};
    XXH64_update(h, eos, sizeof eos);
    int rc = ZT_OK;
    *bytes = 0;
    for (int i = 0; i < n && !rc; i++) {
        int fmt = format_of(s, files[i]);
        hash_str(h, files[i]);
        XXH64_update(h, &fmt, sizeof fmt);
        FILE *fp = fopen(files[i], "rb");
        if (!fp) {
            rc = zt_error_set(err, ZT_ERR_IO, "cannot read %s: %s", files[i], strerror(errno));
            break;
        }
        size_t got;
        while ((got = fread(buf, 1, 1 << 20, fp)) > 0) {
            XXH64_update(h, buf, got);
            *bytes += got;
        }
        if (ferror(fp)) rc = zt_error_set(err, ZT_ERR_IO, "cannot read %s: %s", files[i], strerror(errno));
        fclose(fp);
    }
    *key = XXH64_digest(h);
    XXH64_freeState(h);
    free(buf);
    return rc;
}

/* The builder's state across records. */
typedef struct builder {
    const zt_dataset_spec *s;
    zt_dataset_writer *w;
    zt_dataset_report *rep;
    zt_rendered rec;
    uint8_t *counted;
    size_t counted_cap;
    uint64_t ordinal;
    double t0, last;
    uint64_t bytes_done;
} builder;

/* n without the line ends (\n, \r) at the end of s[0..n) */
static size_t chomp(const char *s, size_t n) {
    while (n && (s[n - 1] == '\n' || s[n - 1] == '\r')) n--;
    return n;
}

static void progress(builder *b, bool final) {
    FILE *fp = b->s->progress;
    double t = now();
    if (!fp || (!final && t - b->last < 2.0)) return;
    b->last = t;
    double dt = t - b->t0 > 1e-9 ? t - b->t0 : 1e-9;
    fprintf(fp, "dataset: %s%llu records, %llu tokens (%llu counted) in %.1f s: %.2f MB/s, %.0f tokens/s\n",
            final ? "tokenized " : "", (unsigned long long)b->rep->records, (unsigned long long)b->rep->tokens,
            (unsigned long long)b->rep->counted, dt, (double)b->bytes_done / dt / 1e6, (double)b->rep->tokens / dt);
    fflush(fp);
}

/* tokenizes the rendered record and appends it */
static int emit_record(builder *b, zt_error *err) {
    uint32_t *ids = NULL, *offs = NULL;
    size_t n = 0;
    int rc = zt_bpe_encode_offsets(b->s->tokenizer, b->rec.text, b->rec.len, &ids, &offs, &n, err);
    if (rc) return rc;
    b->ordinal++;
    if (n == 0) {
        b->rep->empty++;
        free(ids);
        free(offs);
        return ZT_OK;
    }
    bool eos = b->rec.eos && b->s->eos_id >= 0;
    if (n + eos > UINT32_MAX) rc = zt_error_set(err, ZT_ERR_DATA, "a record of %zu tokens", n);
    if (!rc && eos) {
        uint32_t *p = realloc(ids, (n + 1) * sizeof *p);
        if (!p) rc = zt_error_set(err, ZT_ERR_NOMEM, "dataset: out of memory");
        else ids = p, ids[n] = (uint32_t)b->s->eos_id;
    }
    if (!rc && n + eos > b->counted_cap) {
        uint8_t *p = realloc(b->counted, n + eos);
        if (!p) rc = zt_error_set(err, ZT_ERR_NOMEM, "dataset: out of memory");
        else b->counted = p, b->counted_cap = n + eos;
    }
    if (!rc) {
        int k = 0;
        for (size_t i = 0; i < n; i++) {
            while (k < b->rec.n_spans && b->rec.spans[k].end <= offs[i]) k++;
            b->counted[i] = k < b->rec.n_spans && b->rec.spans[k].begin <= offs[i];
            b->rep->counted += b->counted[i];
        }
        if (eos) b->counted[n++] = 1, b->rep->counted++;
        bool val = b->s->val_fraction > 0 &&
                   (double)(zt_mix64(b->s->seed ^ zt_mix64(b->ordinal)) >> 11) * 0x1.0p-53 < b->s->val_fraction;
        rc = zt_dataset_writer_add(b->w, ids, b->counted, (uint32_t)n, val ? ZT_DOC_VAL : 0, err);
        b->rep->records++;
        b->rep->searched += (uint64_t)b->rec.searched;
        b->rep->tokens += n;
        b->rep->val_records += val;
    }
    free(ids);
    free(offs);
    return rc;
}

static int jsonl_file(builder *b, const char *path, FILE *fp, zt_error *err) {
    char *line = NULL;
    size_t cap = 0;
    ssize_t got;
    long lineno = 0;
    int rc = ZT_OK;
    while (!rc && (got = getline(&line, &cap, fp)) >= 0) {
        lineno++;
        b->bytes_done += (uint64_t)got;
        size_t len = (size_t)got;
        len = chomp(line, len);
        size_t sp = 0;
        while (sp < len && (line[sp] == ' ' || line[sp] == '\t')) sp++;
        if (sp == len) continue; /* a blank line is no record */
        const char *end = NULL;
        cJSON *rec = cJSON_ParseWithLengthOpts(line, len, &end, false);
        if (!rec || (size_t)(end - line) < len) {
            const char *at = rec ? end : cJSON_GetErrorPtr();
            long col = at && at >= line && at <= line + len ? (long)(at - line) + 1 : 0;
            rc = zt_error_set(err, ZT_ERR_DATA, "%s:%ld: malformed JSON at column %ld%s", path, lineno, col,
                              rec ? " (text after the record)" : "");
            cJSON_Delete(rec);
            break;
        }
        rc = zt_record_render(&b->s->rules, rec, &b->rec, err);
        cJSON_Delete(rec);
        if (!rc) rc = emit_record(b, err);
        if (rc) zt_error_prefix(err, "%s:%ld", path, lineno);
        progress(b, false);
    }
    if (!rc && ferror(fp)) rc = zt_error_set(err, ZT_ERR_IO, "cannot read %s: %s", path, strerror(errno));
    free(line);
    return rc;
}

static int text_record(builder *b, const char *path, long lineno, const char *t, size_t len, zt_error *err) {
    if (!len) return ZT_OK;
    int rc = zt_record_text(&b->s->rules, t, len, &b->rec, err);
    if (!rc) rc = emit_record(b, err);
    if (rc) zt_error_prefix(err, "%s:%ld", path, lineno);
    return rc;
}

static int text_file(builder *b, const char *path, FILE *fp, zt_error *err) {
    char *line = NULL, *acc = NULL;
    size_t cap = 0, alen = 0, acap = 0;
    ssize_t got;
    long lineno = 0, first = 1;
    int rc = ZT_OK;
    zt_text_unit unit = b->s->text_unit;
    while (!rc && (got = getline(&line, &cap, fp)) >= 0) {
        lineno++;
        b->bytes_done += (uint64_t)got;
        size_t len = (size_t)got;
        if (unit == ZT_TEXT_LINE) {
            len = chomp(line, len);
            rc = text_record(b, path, lineno, line, len, err);
            progress(b, false);
            continue;
        }
        bool blank = true;
        for (size_t i = 0; i < len && blank; i++) blank = line[i] == '\n' || line[i] == '\r' || line[i] == ' ' || line[i] == '\t';
        if (unit == ZT_TEXT_PARAGRAPH && blank) { /* a paragraph ends */
            alen = chomp(acc, alen);
            rc = text_record(b, path, first, acc, alen, err);
            alen = 0;
            first = lineno + 1;
            progress(b, false);
            continue;
        }
        if (alen + len + 1 > acap) {
            size_t c = (alen + len + 1) * 2;
            char *p = realloc(acc, c);
            if (!p) {
                rc = zt_error_set(err, ZT_ERR_NOMEM, "dataset: out of memory reading %s", path);
                break;
            }
            acc = p;
            acap = c;
        }
        memcpy(acc + alen, line, len);
        alen += len;
    }
    if (!rc && ferror(fp)) rc = zt_error_set(err, ZT_ERR_IO, "cannot read %s: %s", path, strerror(errno));
    if (!rc && unit == ZT_TEXT_PARAGRAPH)
        alen = chomp(acc, alen);
    if (!rc && unit != ZT_TEXT_LINE) rc = text_record(b, path, first, acc, alen, err);
    free(line);
    free(acc);
    return rc;
}

static int cache_path(const zt_dataset_spec *s, const char *first, uint64_t key, char *path, size_t cap,
                      zt_error *err) {
    char dir[4096];
    if (s->cache_dir && *s->cache_dir) {
        snprintf(dir, sizeof dir, "%s", s->cache_dir);
    } else {
        const char *slash = strrchr(first, '/');
        int dl = slash ? (int)(slash - first) : 1;
        snprintf(dir, sizeof dir, "%.*s/.zerotrain-cache", dl, slash ? first : ".");
    }
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return zt_error_set(err, ZT_ERR_IO, "cannot create the dataset cache folder %s: %s", dir, strerror(errno));
    const char *base = strrchr(first, '/');
    base = base ? base + 1 : first;
    if ((size_t)snprintf(path, cap, "%s/%s-%016llx.ztds", dir, base, (unsigned long long)key) >= cap)
        return zt_error_set(err, ZT_ERR_USAGE, "the dataset cache path under %s is too long", dir);
    return ZT_OK;
}

int zt_dataset_build(const zt_dataset_spec *s, char *path, size_t cap, zt_dataset_report *rep, zt_error *err) {
    memset(rep, 0, sizeof *rep);
    double t0 = now();
    char **files = NULL;
    int n = 0;
    uint64_t key = 0;
    int rc = zt_dataset_files(s->source, &files, &n, err);
    if (!rc) rc = cache_key(s, files, n, &key, &rep->bytes, err);
    if (!rc) rc = cache_path(s, files[0], key, path, cap, err);
    rep->files = (uint64_t)n;
    uint64_t have = 0;
    zt_error ignored = {0};
    if (!rc && zt_dataset_peek_key(path, &have, &ignored) == ZT_OK && have == key) { /* reused */
        zt_dataset d;
        if (zt_dataset_open(&d, path, &ignored) == ZT_OK) {
            rep->reused = true;
            rep->records = d.n_docs;
            rep->tokens = d.n_tokens;
            rep->counted = d.n_counted;
            rep->val_records = d.n_val;
            zt_dataset_close(&d);
        }
    }
    builder b = {.s = s, .rep = rep, .t0 = t0, .last = t0};
    if (!rc && !rep->reused) rc = zt_dataset_writer_open(&b.w, path, key, err);
    for (int i = 0; !rc && !rep->reused && i < n; i++) {
        FILE *fp = fopen(files[i], "rb");
        if (!fp) {
            rc = zt_error_set(err, ZT_ERR_IO, "cannot read %s: %s", files[i], strerror(errno));
            break;
        }
        rc = format_of(s, files[i]) == ZT_DATA_JSONL ? jsonl_file(&b, files[i], fp, err) : text_file(&b, files[i], fp, err);
        fclose(fp);
    }
    if (b.w) {
        if (!rc && rep->records == 0)
            rc = zt_error_set(err, ZT_ERR_DATA, "data source '%s' holds no record with a token", s->source);
        int crc = zt_dataset_writer_close(b.w, rc == ZT_OK, rc ? NULL : err);
        if (!rc) rc = crc;
        if (!rc) progress(&b, true);
    }
    zt_rendered_free(&b.rec);
    free(b.counted);
    for (int i = 0; i < n; i++) free(files[i]);
    free(files);
    rep->seconds = now() - t0;
    return rc;
}
