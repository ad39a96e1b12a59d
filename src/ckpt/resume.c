/* resume.c - which commit a run resumes from (docs/checkpoints.md, docs/reliability.md): a step-N
 * commit as given, or a checkpoint directory's newest commit (`latest`, else the newest good
 * manifest); with checkpoint.fallback, past damaged commits to the newest intact older one, each
 * skipped commit named with the reason. zt_ckpt_load checks every file's size and checksum before
 * it reads a tensor, so a refused commit has left the engine untouched. Also what a directory's
 * commits are (zt_ckpt_resolve, zt_ckpt_list_steps). */
#include "ckpt/checkpoint.h"
#include "ckpt/precision_meta.h"
#include "core/file.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- the commits of a directory (checkpoint.h) ---------------------------------------------------- */

static int step_of(const char *name, int64_t *step) {
    long long s;
    int n = 0;
    if (sscanf(name, "step-%lld%n", &s, &n) == 1 && name[n] == '\0') {
        *step = s;
        return 1;
    }
    return 0;
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

int zt_ckpt_list_steps(const char *dir, int64_t *steps, int cap) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) && n < cap) {
        int64_t s;
        if (step_of(de->d_name, &s)) steps[n++] = s;
    }
    closedir(d);
    qsort(steps, (size_t)n, sizeof *steps, cmp_i64);
    return n;
}

static bool has_manifest(const char *dir) {
    char path[4200];
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    return access(path, R_OK) == 0;
}

int zt_ckpt_resolve(const char *path, char *commit, size_t cap, zt_error *err) {
    zt_error ignore;
    if (has_manifest(path)) {
        snprintf(commit, cap, "%s", path);
        return ZT_OK;
    }
    char latest[4200], cand[4200];
    size_t len;
    snprintf(latest, sizeof latest, "%s/latest", path);
    char *name = NULL;
    if (access(latest, R_OK) == 0 && zt_read_file(latest, "checkpoint file", &name, &len, &ignore)) name = NULL;
    if (name) {
        name[strcspn(name, "\r\n")] = '\0';
        int64_t named;
        if (!step_of(name, &named)) name[0] = '\0'; /* `latest` names a step-N here, nothing else (no path) */
        snprintf(cand, sizeof cand, "%s/%s", path, name);
        free(name);
        cJSON *m = zt_ckpt_manifest_read(cand, &ignore);
        if (m) {
            cJSON_Delete(m);
            snprintf(commit, cap, "%s", cand);
            return ZT_OK;
        }
    }
    /* newest step-N whose manifest checks out; step-N.tmp leftovers never match step_of */
    DIR *d = opendir(path);
    if (!d) return zt_error_set(err, ZT_ERR_CKPT, "checkpoint %s: no such directory", path);
    int64_t best = -1;
    struct dirent *de;
    while ((de = readdir(d))) {
        int64_t s;
        if (!step_of(de->d_name, &s) || s <= best) continue;
        snprintf(cand, sizeof cand, "%s/%s", path, de->d_name);
        cJSON *m = zt_ckpt_manifest_read(cand, &ignore);
        if (m) {
            cJSON_Delete(m);
            best = s;
        }
    }
    closedir(d);
    if (best < 0) return zt_error_set(err, ZT_ERR_CKPT, "checkpoint %s: no valid commit (no step-N with a good manifest)", path);
    snprintf(commit, cap, "%s/step-%08lld", path, (long long)best);
    return ZT_OK;
}

/* ---- resuming ------------------------------------------------------------------------------------- */

static bool is_commit(const char *path) {
    char m[4200];
    snprintf(m, sizeof m, "%s/manifest.json", path);
    return access(m, F_OK) == 0;
}

static const char *base(const char *p) { return strrchr(p, '/') ? strrchr(p, '/') + 1 : p; }

/* Notes on what a directory holds besides commits: a `latest` that names no commit, and
 * step-N.tmp leftovers of interrupted saves and step-N.purge ones of interrupted purges (never
 * resumed from). */
static void note_leftovers(const char *dir, const char *commit, FILE *notes) {
    char path[4200], name[256] = "";
    snprintf(path, sizeof path, "%s/latest", dir);
    FILE *f = fopen(path, "r");
    if (f) {
        if (fgets(name, sizeof name, f)) name[strcspn(name, "\r\n")] = '\0';
        fclose(f);
        if (name[0] && strcmp(name, base(commit)))
            fprintf(notes, "checkpoint: warning: %s names %s, which is not an intact commit; using %s\n", path, name,
                    base(commit));
    }
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t n = strlen(de->d_name);
        if (!strncmp(de->d_name, "step-", 5) && n > 4 && !strcmp(de->d_name + n - 4, ".tmp"))
            fprintf(notes, "checkpoint: ignoring %s/%s (a save that never committed)\n", dir, de->d_name);
        if (!strncmp(de->d_name, "step-", 5) && n > 6 && !strcmp(de->d_name + n - 6, ".purge"))
            fprintf(notes, "checkpoint: ignoring %s/%s (an old commit whose removal by checkpoint.keep_last was "
                    "interrupted; the next purge removes it)\n", dir, de->d_name);
    }
    closedir(d);
}

/* zt_ckpt_load after the dtype check (precision_meta.h); *refused: the commit is intact but its
 * values would be narrowed without checkpoint.allow_cast (never a reason to fall back). */
static int load_checked(zt_engine *e, const char *commit, bool allow_cast, FILE *notes, bool *refused,
                        zt_ckpt_meta *meta, zt_error *err) {
    int rc = zt_ckpt_check_cast(commit, e, allow_cast, notes, refused, err);
    return rc ? rc : zt_ckpt_load(e, commit, meta, err);
}

int zt_ckpt_resume(zt_engine *e, const char *path, bool fallback, bool allow_cast, FILE *notes, char *commit,
                   size_t cap, zt_ckpt_meta *meta, zt_error *err) {
    int rc = zt_ckpt_resolve(path, commit, cap, err);
    if (rc) return rc; /* no commit with a readable manifest at all */
    bool refused = false;
    rc = load_checked(e, commit, allow_cast, notes, &refused, meta, err);
    if (refused) return rc;
    if (is_commit(path)) return rc; /* an explicit commit never falls back */
    if (rc == ZT_OK && notes) note_leftovers(path, commit, notes);
    if (rc != ZT_ERR_CKPT || !fallback) return rc;
    /* the directory's newest commit is damaged: the older ones, newest first */
    enum { MAX = 4096 };
    int64_t *steps = malloc(MAX * sizeof *steps);
    if (!steps) return zt_error_set(err, ZT_ERR_NOMEM, "checkpoint %s: out of memory", path);
    int n = zt_ckpt_list_steps(path, steps, MAX);
    char first[4200], skipped[1024] = "";
    snprintf(first, sizeof first, "%s", commit);
    zt_error why = *err;
    for (int k = n - 1; k >= 0; k--) {
        char cand[4200];
        snprintf(cand, sizeof cand, "%s/step-%08lld", path, (long long)steps[k]);
        if (!strcmp(cand, first)) continue;
        if (why.code) { /* the commit just refused */
            if (notes) fprintf(notes, "checkpoint: warning: skipped %s: %s\n", commit, why.msg);
            size_t len = strlen(skipped);
            snprintf(skipped + len, sizeof skipped - len, "%s%s", len ? ", " : "", base(commit));
        }
        snprintf(commit, cap, "%s", cand);
        rc = load_checked(e, cand, allow_cast, notes, &refused, meta, &why);
        if (refused) { /* an intact older commit this run may not narrow: said as it is */
            *err = why;
            free(steps);
            return rc;
        }
        if (rc == ZT_OK) {
            if (notes) note_leftovers(path, commit, notes);
            if (notes) fprintf(notes, "checkpoint: resuming from %s, the newest intact commit (checkpoint.fallback; "
                               "skipped %s): the steps after it are computed again\n", cand, skipped);
            break;
        }
        if (rc != ZT_ERR_CKPT) {
            *err = why;
            break;
        }
    }
    free(steps);
    if (rc == ZT_ERR_CKPT && notes && strcmp(commit, first)) fprintf(notes, "checkpoint: warning: skipped %s: %s\n", commit, why.msg);
    if (rc == ZT_ERR_CKPT && strcmp(commit, first)) { /* older commits were tried, in vain */
        char reason[sizeof err->msg];
        snprintf(reason, sizeof reason, "%s", err->msg); /* the newest commit's own reason */
        rc = zt_error_set(err, ZT_ERR_CKPT, "checkpoint %s: no intact commit (checkpoint.fallback tried every step-N, "
                          "newest first; %s: %s)", path, base(first), reason);
    }
    return rc; /* with only the one commit, its own message */
}
