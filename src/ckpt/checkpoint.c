/* checkpoint.c - sharded checkpoints, the save side: collective, atomic commit, async save,
 * retention (loading, verifying and resharding: checkpoint_load.c). The format is in checkpoint.h
 * and docs/checkpoints.md.
 *
 * Who writes what: the writers are the ranks of the first replica of the engine's shard plan
 * (rank 0 alone for ddp, every rank for zero1/2/3, the first shard group for hybrid); writer s
 * writes its plan rows of every parameter and optimizer moment. Rank 0 can compute every writer's
 * slices from the plan (it is a pure function of the model and the shard count), so the only
 * messages are each file's size and checksum, gathered to rank 0, and the commit status,
 * broadcast back. */
#define _GNU_SOURCE /* renameat2 (an atomic exchange when a step is saved again) */
#include "ckpt/checkpoint_internal.h"
#include "core/atomic_file.h"
#include "core/fault.h"
#include "offload/nvme_store.h"
#include "comm/comm.h"
#include "core/file.h"
#include "engine/engine_state.h"
#include "engine/pipeline.h"

#include <cjson/cJSON.h>
#include "ckpt/model_meta.h"
#include "ckpt/precision_meta.h"
#include "ckpt/run_state.h"
#include "ckpt/slices.h"
#include "comm/mesh.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>


/* ---- small file helpers ---------------------------------------------------------------------- */

/* Writes n bytes, going on after a short write (at most max_call bytes per call: the shortwrite
 * fault's test of that loop); -1 with errno set on failure. */
static int write_all_max(int fd, const void *p, size_t n, size_t max_call) {
    const char *c = p;
    while (n) {
        ssize_t w = write(fd, c, n < max_call ? n : max_call);
        if (w < 0 && errno == EINTR) continue;
        if (w == 0) errno = ENOSPC; /* no progress: the device took nothing */
        if (w <= 0) return -1;
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

static int fsync_path(const char *path) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

static int rm_tree(const char *path) {
    DIR *d = opendir(path);
    if (!d) return unlink(path);
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        char sub[4200];
        snprintf(sub, sizeof sub, "%s/%s", path, de->d_name);
        rm_tree(sub);
    }
    closedir(d);
    return rmdir(path);
}

/* ---- save --------------------------------------------------------------------------------------- */

/* Visits this writer's slices in file order: (parameter, kind) in table order. fn may be called
 * several times per slice (offloaded states come through the staging memory piece by piece).
 * Returns 0, fn's nonzero result, or a zt_status with err filled (reading an offloaded state). */
typedef int (*slice_fn)(void *ctx, const float *rows, size_t bytes);

static int for_each_slice(zt_engine *e, slice_fn fn, void *ctx, zt_error *err) {
    static const float zeros[4096];
    for (int i = 0; i < zt_engine_model(e)->n_params; i++)
        for (int k = 0; k < zt_ckpt_n_kinds(e) && zt_ckpt_part_writes(e, i) && !zt_store_quantized(e, i); k++) {
            int64_t row0, rows;
            const float *src = zt_ckpt_local_rows(e, i, k, &row0, &rows);
            size_t n = (size_t)(rows * zt_engine_plan(e)->p[i].row_len);
            if (k > 0 && !zt_engine_model(e)->params[i].trainable) { /* frozen: no state; the file keeps its layout */
                for (size_t done = 0; done < n; done += 4096) {
                    int rc = fn(ctx, zeros, (n - done < 4096 ? n - done : 4096) * sizeof(float));
                    if (rc) return rc;
                }
                continue;
            }
            if (src) {
                int rc = fn(ctx, src, n * sizeof(float));
                if (rc) return rc;
                continue;
            }
            size_t bounce_n;
            float *bounce = zt_ckpt_kind_bounce(e, k, &bounce_n);
            if (n && (!bounce || !bounce_n))
                return zt_error_set(err, ZT_ERR_INTERNAL, "checkpoint: no staging memory for %s of %s", KIND_NAMES[k],
                                    zt_engine_model(e)->params[i].name);
            for (size_t done = 0; done < n;) {
                size_t len = n - done < bounce_n ? n - done : bounce_n;
                int rc = zt_ckpt_kind_read(e, k, i, zt_ckpt_kind_base(e, i, k) + done, len, bounce, err);
                if (rc) return zt_error_prefix(err, "checkpoint: %s of %s", KIND_NAMES[k], zt_engine_model(e)->params[i].name);
                if ((rc = fn(ctx, bounce, len * sizeof(float)))) return rc;
                done += len;
            }
        }
    return 0;
}

static int slice_bytes(void *ctx, const float *rows, size_t bytes) {
    *(size_t *)ctx += bytes;
    return 0;
}

static int slice_copy(void *ctx, const float *rows, size_t bytes) {
    char **w = ctx;
    memcpy(*w, rows, bytes);
    *w += bytes;
    return 0;
}

typedef struct file_sink {
    int fd;
    XXH64_state_t *st;
    uint64_t total;
    int64_t step; /* the step being saved (fault injection) */
} file_sink;

static int slice_write(void *ctx, const float *rows, size_t bytes) {
    file_sink *f = ctx;
    XXH64_update(f->st, rows, bytes);
    f->total += bytes;
    /* ZT_FAULT shortwrite: this call's write(2)s return 4093 bytes at a time */
    bool cut = zt_fault_armed() && zt_fault_point_step(ZT_FAULT_AT_SAVE_WRITE, f->step, NULL) == ZT_FAULT_SHORTWRITE;
    return write_all_max(f->fd, rows, bytes, cut ? 4093 : SIZE_MAX);
}

/* Writes this writer's file, from the engine (snapshot NULL) or from a snapshot of it. */
static int write_rank_file(zt_engine *e, const char *path, const char *snapshot, size_t snap_len, int64_t step,
                           uint64_t *hash, uint64_t *size, zt_error *err) {
    file_sink f = {.fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644), .st = XXH64_createState(), .step = step};
    if (f.fd < 0 || !f.st) {
        int en = errno;
        if (f.fd >= 0) close(f.fd);
        XXH64_freeState(f.st);
        return zt_error_set(err, ZT_ERR_IO, "cannot create %s: %s", path, strerror(en));
    }
    XXH64_reset(f.st, 0);
    zt_error serr = {0};
    int bad = snapshot ? slice_write(&f, (const float *)snapshot, snap_len) : for_each_slice(e, slice_write, &f, &serr);
    if (bad > 0) { /* an offloaded state could not be read: its message */
        close(f.fd);
        XXH64_freeState(f.st);
        *err = serr;
        return bad;
    }
    zt_fault_kind fk = zt_fault_point_step(ZT_FAULT_AT_SAVE_SHARD, step, NULL);
    if (fk == ZT_FAULT_EIO || fk == ZT_FAULT_ENOSPC) { /* ZT_FAULT eio / enospc: the write failed */
        bad = 1;
        errno = fk == ZT_FAULT_EIO ? EIO : ENOSPC;
    }
    bad |= fsync(f.fd);
    int en = errno;
    bad |= close(f.fd);
    if (bad && en) errno = en;
    *hash = XXH64_digest(f.st);
    *size = f.total;
    XXH64_freeState(f.st);
    return bad ? zt_error_set(err, ZT_ERR_IO, "writing %s: %s", path, strerror(errno)) : ZT_OK;
}

static void hex64(char out[17], uint64_t v) { snprintf(out, 17, "%016" PRIx64, v); }

/* Rank 0: the manifest for writers 0..nwriters-1 of each tensor-parallel part with the gathered
 * file sizes and hashes (tp x nwriters files). */
static char *build_manifest(zt_engine *e, const zt_ckpt_meta *meta, int nwriters, const uint64_t *sizes,
                            const uint64_t *hashes) {
    const zt_model *m = zt_ckpt_whole_model(e);
    int pp = zt_ckpt_mesh_of(e)->pp;
    cJSON *root = cJSON_CreateObject();
    char hex[17];
    cJSON_AddStringToObject(root, "format", FORMAT);
    int tp = zt_ckpt_mesh_of(e)->tp; /* column slices (tensor parallelism) need version 2 */
    cJSON_AddNumberToObject(root, "version", tp > 1 ? VERSION : 1);
    cJSON_AddNumberToObject(root, "step", (double)meta->step);
    cJSON_AddNumberToObject(root, "samples_consumed", (double)meta->samples_consumed);
    hex64(hex, meta->config_hash);
    cJSON_AddStringToObject(root, "config_hash", hex);
    cJSON_AddStringToObject(root, "strategy", zt_strategy_name(zt_engine_options_of(e)->strategy));
    cJSON_AddNumberToObject(root, "world", zt_ckpt_mesh_of(e)->world);
    cJSON_AddNumberToObject(root, "shards", nwriters);
    if (tp > 1) cJSON_AddNumberToObject(root, "tensor_parallel", tp);
    if (pp > 1) cJSON_AddNumberToObject(root, "pipeline_parallel", pp);
    /* the policy the state was trained under (the shards hold fp32 arrays in every mode: master
     * weights, or bf16-low's bf16 values, and moments) */
    const zt_precision *pol = &zt_engine_options_of(e)->precision;
    cJSON *prec = cJSON_AddObjectToObject(root, "precision");
    cJSON_AddStringToObject(prec, "mode", zt_precision_mode_name(pol->mode));
    const char *fields[] = {"params", "compute", "reduce", "accumulate", "grads", "moments"};
    const zt_dtype dts[] = {pol->params, pol->compute, pol->reduce, pol->accumulate, pol->grads, pol->moments};
    for (int k = 0; k < 6; k++) cJSON_AddStringToObject(prec, fields[k], zt_dtype_name(dts[k]));
    cJSON_AddStringToObject(prec, "stored_as", "fp32");
    /* Adam's step count (fp16 skips updates, so it can trail "step") and fp16's loss scaler */
    cJSON_AddNumberToObject(root, "optimizer_step", (double)meta->optimizer_step);
    if (pol->mode == ZT_PRECISION_FP16) {
        cJSON *ls = cJSON_AddObjectToObject(prec, "loss_scaler");
        cJSON_AddNumberToObject(ls, "scale", meta->scaler.scale);
        cJSON_AddNumberToObject(ls, "cur_hysteresis", meta->scaler.cur_hysteresis);
        cJSON_AddNumberToObject(ls, "cur_iter", (double)meta->scaler.cur_iter);
        cJSON_AddNumberToObject(ls, "last_overflow_iter", (double)meta->scaler.last_overflow_iter);
    }
    cJSON_AddStringToObject(root, "optimizer", zt_optimizer_name(zt_engine_options_of(e)->optim.kind));
    cJSON_AddItemToObject(root, "model", zt_model_meta_json(m));
    zt_run_state_write(root, &meta->run);
    cJSON *files = cJSON_AddArrayToObject(root, "files");
    int nfiles = pp * tp * nwriters;
    for (int s = 0; s < nfiles; s++) {
        cJSON *f = cJSON_CreateObject();
        char name[32];
        snprintf(name, sizeof name, "rank-%05d.bin", s);
        cJSON_AddStringToObject(f, "name", name);
        cJSON_AddNumberToObject(f, "bytes", (double)sizes[s]);
        hex64(hex, hashes[s]);
        cJSON_AddStringToObject(f, "xxh64", hex);
        cJSON_AddItemToArray(files, f);
    }
    /* offsets: file f = (part t, writer s) holds (i, kind) in table order, each its plan rows of
     * part t's local tensor (for_each_slice), so they are running sums; rank 0 computes every
     * part's rows from the shapes (zt_plan_rows) */
    uint64_t *off = calloc((size_t)nfiles, sizeof *off);
    cJSON *tensors = cJSON_AddArrayToObject(root, "tensors");
    for (int i = 0; i < m->n_params; i++) {
        const zt_param_desc *p = &m->params[i];
        int64_t row_len = p->logical_numel / p->logical_shape[0];
        cJSON *t = cJSON_CreateObject();
        cJSON_AddStringToObject(t, "name", p->name);
        cJSON *shape = cJSON_AddArrayToObject(t, "shape");
        for (int d = 0; d < p->ndim; d++) cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)p->logical_shape[d]));
        if (p->quant) { /* the quantized base: not saved, recorded (param_quant.c; checked on load) */
            cJSON_AddStringToObject(t, "quant", zt_quant_name((zt_quant)p->quant));
            hex64(hex, zt_store_quant_hash(e, i));
            cJSON_AddStringToObject(t, "quant_xxh64", hex);
            cJSON_AddItemToArray(tensors, t);
            continue;
        }
        cJSON_AddStringToObject(t, "dtype", "f32");
        cJSON *slices = cJSON_AddArrayToObject(t, "slices");
        /* a whole parameter: part 0's files only; the experts stored E/ep a rank: the data-parallel
         * ranks' files (of every tp part where tensor parallelism cuts them too), each its part's rows */
        int parts = p->tp_parts > 1 ? tp : 1;
        int base = zt_ckpt_stage_of(e, i) * tp * nwriters; /* its stage's files */
        for (int k = 0; k < zt_ckpt_n_kinds(e); k++)
            for (int f = base; f < base + parts * nwriters; f++) {
                int part = (f - base) / nwriters, s = (f - base) % nwriters;
                int64_t rows, len, lo, hi;
                zt_ckpt_writer_rows(e, p, nwriters, s, &part, &lo, &hi);
                zt_ckpt_part_shape(p, part, &rows, &len);
                zt_rect rects[8];
                int nr = zt_ckpt_part_rects(p, part, lo, hi, rects);
                /* writer f wrote this parameter's kinds one after another; its rows as rectangles */
                uint64_t at = off[f] + (uint64_t)k * (uint64_t)((hi - lo) * len) * 4;
                for (int q = 0; q < (nr ? nr : 1); q++) {
                    zt_rect r = nr ? rects[q] : (zt_rect){lo, 0, 0, row_len}; /* no rows: an empty slice */
                    cJSON *sl = cJSON_CreateObject();
                    cJSON_AddStringToObject(sl, "kind", KIND_NAMES[k]);
                    cJSON_AddNumberToObject(sl, "file", f);
                    cJSON_AddNumberToObject(sl, "offset", (double)at);
                    cJSON_AddNumberToObject(sl, "row0", (double)r.r0);
                    cJSON_AddNumberToObject(sl, "rows", (double)r.nr);
                    if (r.nc != row_len) { /* a column range: tensor parallelism's row-parallel cut */
                        cJSON_AddNumberToObject(sl, "col0", (double)r.c0);
                        cJSON_AddNumberToObject(sl, "cols", (double)r.nc);
                    }
                    cJSON_AddItemToArray(slices, sl);
                    at += (uint64_t)(r.nr * r.nc) * 4;
                }
            }
        /* advance offsets in the writers' order: (i, kind) */
        for (int f = base; f < base + parts * nwriters; f++) {
            int64_t rows, len, lo, hi;
            int part = (f - base) / nwriters;
            zt_ckpt_writer_rows(e, p, nwriters, (f - base) % nwriters, &part, &lo, &hi);
            zt_ckpt_part_shape(p, part, &rows, &len);
            off[f] += (uint64_t)zt_ckpt_n_kinds(e) * (uint64_t)((hi - lo) * len) * 4;
        }
        cJSON_AddItemToArray(tensors, t);
    }
    free(off);
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    return text;
}

static int commit_dir_names(const char *dir, int64_t step, char *tmp, char *fin, size_t cap) {
    int a = snprintf(tmp, cap, "%s/step-%08lld.tmp", dir, (long long)step);
    int b = snprintf(fin, cap, "%s/step-%08lld", dir, (long long)step);
    return (a < 0 || (size_t)a >= cap || b < 0 || (size_t)b >= cap) ? -1 : 0;
}

static bool is_purge_leftover(const char *name) {
    size_t n = strlen(name);
    return !strncmp(name, "step-", 5) && n > 6 && !strcmp(name + n - 6, ".purge");
}

/* Deletes committed step directories beyond the newest keep_last (never `keep`, the commit just
 * made): each is first renamed to step-N.purge (one atomic step: it stops being a commit before any
 * file of it goes, so a crash mid-purge never leaves a half-deleted step-N), then removed. The
 * .purge leftovers of an interrupted purge are removed first. */
static void retain(const char *dir, int keep_last, int64_t keep) {
    char path[4200], gone[4300];
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *de;
        while ((de = readdir(d))) {
            if (!is_purge_leftover(de->d_name)) continue;
            snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
            rm_tree(path);
        }
        closedir(d);
    }
    int64_t steps[4096];
    int n = zt_ckpt_list_steps(dir, steps, 4096);
    for (int k = 0; k < n - keep_last; k++) {
        if (steps[k] == keep) continue;
        snprintf(path, sizeof path, "%s/step-%08lld", dir, (long long)steps[k]);
        snprintf(gone, sizeof gone, "%s.purge", path);
        if (rename(path, gone) != 0) continue; /* left as it is: still a whole commit */
        zt_fault_point_step(ZT_FAULT_AT_SAVE_PURGE, keep, NULL); /* ZT_FAULT: a crash mid-purge */
        rm_tree(gone);
    }
}

/* Phase 1 (collective): rank 0 makes DIR/step-N.tmp; everyone learns whether it could. */
static int save_begin(zt_engine *e, const char *dir, const zt_ckpt_meta *meta, char *tmp, char *fin,
                      size_t cap, zt_error *err) {
    if (commit_dir_names(dir, meta->step, tmp, fin, cap))
        return zt_error_set(err, ZT_ERR_USAGE, "checkpoint directory name too long: %s", dir);
    int status = ZT_OK;
    if (zt_ckpt_mesh_of(e)->rank == 0) {
        mkdir(dir, 0755);
        rm_tree(tmp); /* a leftover of a killed save */
        if (mkdir(tmp, 0755) != 0)
            status = zt_error_set(err, ZT_ERR_IO, "cannot create %s: %s", tmp, strerror(errno));
    }
    if (!zt_ckpt_job_comm(e)) return status;
    int ok = status == ZT_OK;
    int rc = zt_all_reduce_and_int(zt_ckpt_job_comm(e), &ok, "checkpoint start", err);
    if (rc) return rc;
    if (!ok) return status ? status : zt_error_set(err, ZT_ERR_IO, "checkpoint %s: rank 0 could not create it", tmp);
    return ZT_OK;
}

/* Phase 3 (collective): gather every file's status, size and checksum; rank 0 writes the manifest
 * and commits; every rank returns the same outcome. status is this rank's write result. */
static int save_finish(zt_engine *e, const char *dir, const zt_ckpt_meta *meta, const char *tmp,
                       const char *fin, int keep_last, int status, uint64_t size, uint64_t hash, zt_error *err) {
    zt_comm *world = zt_ckpt_job_comm(e);
    int N = zt_ckpt_mesh_of(e)->world, nwriters = zt_ckpt_writers(e) * zt_ckpt_mesh_of(e)->tp * zt_ckpt_mesh_of(e)->pp; /* the files */
    double mine[5], *all = calloc((size_t)N * 5, sizeof *all);
    if (!all) return zt_error_set(err, ZT_ERR_NOMEM, "checkpoint: out of memory");
    mine[0] = status == ZT_OK;
    mine[1] = zt_ckpt_is_writer(e);
    mine[2] = zt_ckpt_file_index(e);
    memcpy(&mine[3], &size, 8);
    memcpy(&mine[4], &hash, 8);
    if (world) {
        zt_error gerr;
        int rc = zt_all_gather_f64(world, mine, all, 5, "checkpoint files", &gerr);
        if (rc) {
            free(all);
            if (!status) *err = gerr;
            return status ? status : rc;
        }
    } else {
        memcpy(all, mine, sizeof mine);
    }
    int bad_rank = -1;
    for (int r = 0; r < N; r++)
        if (all[5 * r] == 0 && bad_rank < 0) bad_rank = r;
    if (bad_rank >= 0) {
        free(all);
        if (zt_engine_rank(e) == 0) rm_tree(tmp); /* every writer is done with it; a partial commit only takes the disk */
        /* every rank says the first failing rank's own reason (the file and the errno) */
        char why[sizeof err->msg];
        snprintf(why, sizeof why, "%s", status ? err->msg : "");
        if (world && zt_broadcast_bytes(world, why, sizeof why, bad_rank, "checkpoint failure", NULL) != ZT_OK)
            why[0] = '\0';
        if (status) return status;
        return zt_error_set(err, ZT_ERR_IO, "checkpoint %s: rank %d failed to write its shard (%s); nothing was "
                            "committed", tmp, bad_rank, why[0] ? why : "no reason received");
    }
    int commit = ZT_OK;
    char path[4200];
    if (zt_ckpt_mesh_of(e)->rank == 0) {
        zt_fault_point(ZT_FAULT_AT_SAVE_MANIFEST, NULL); /* every shard written, no manifest yet */
        uint64_t *sizes = calloc((size_t)nwriters, 8), *hashes = calloc((size_t)nwriters, 8);
        for (int r = 0; r < N && sizes && hashes; r++)
            if (all[5 * r + 1] != 0) {
                int s = (int)all[5 * r + 2];
                memcpy(&sizes[s], &all[5 * r + 3], 8);
                memcpy(&hashes[s], &all[5 * r + 4], 8);
            }
        char *text = sizes && hashes ? build_manifest(e, meta, zt_ckpt_writers(e), sizes, hashes) : NULL;
        free(sizes);
        free(hashes);
        if (!text) {
            commit = zt_error_set(err, ZT_ERR_NOMEM, "checkpoint: out of memory for the manifest");
        } else {
            char sum[32];
            snprintf(sum, sizeof sum, "%016" PRIx64 "\n", XXH64(text, strlen(text), 0));
            snprintf(path, sizeof path, "%s/manifest.json", tmp);
            commit = zt_write_file_atomic(path, text, strlen(text), err);
            snprintf(path, sizeof path, "%s/manifest.json.xxh64", tmp);
            if (!commit) commit = zt_write_file_atomic(path, sum, strlen(sum), err);
            free(text);
        }
        if (!commit) {
            /* an older commit of the same step is swapped out in one atomic exchange (never a moment
             * with neither, never a half-overwritten one), then removed */
            bool replace = access(fin, F_OK) == 0;
            if (fsync_path(tmp) != 0 ||
                (replace ? renameat2(AT_FDCWD, tmp, AT_FDCWD, fin, RENAME_EXCHANGE) : rename(tmp, fin)) != 0 ||
                fsync_path(dir) != 0) {
                commit = zt_error_set(err, ZT_ERR_IO, "cannot commit %s -> %s: %s", tmp, fin, strerror(errno));
            } else {
                if (replace) rm_tree(tmp); /* the old commit, now under the tmp name */
                zt_fault_point(ZT_FAULT_AT_SAVE_COMMIT, NULL); /* committed, `latest` not yet moved */
            }
        }
        if (!commit) {
            char latest[4200], line[64];
            snprintf(latest, sizeof latest, "%s/latest", dir);
            snprintf(line, sizeof line, "step-%08lld\n", (long long)meta->step);
            commit = zt_write_file_atomic(latest, line, strlen(line), err);
            if (!commit && keep_last > 0) retain(dir, keep_last, meta->step);
        }
    }
    free(all);
    if (commit && zt_engine_rank(e) == 0) rm_tree(tmp); /* what is left of a save that was not committed */
    if (world) {
        int ok = commit == ZT_OK;
        int rc = zt_all_reduce_and_int(world, &ok, "checkpoint commit", err);
        if (rc) return rc;
        if (!ok && !commit) return zt_error_set(err, ZT_ERR_IO, "checkpoint %s: rank 0 could not commit it", fin);
    }
    return commit;
}

/* the caller's meta plus the engine state it carries, as of now */
static zt_ckpt_meta meta_now(const zt_engine *e, const zt_ckpt_meta *meta) {
    zt_ckpt_meta m = *meta;
    m.optimizer_step = zt_engine_step_count(e);
    zt_engine_get_loss_scaler(e, &m.scaler);
    return m;
}

int zt_ckpt_save(zt_engine *e, const char *dir, const zt_ckpt_meta *meta_in, int keep_last, zt_error *err) {
    zt_ckpt_meta now_meta = meta_now(e, meta_in);
    const zt_ckpt_meta *meta = &now_meta;
    char tmp[4096], fin[4096], path[4200];
    int rc = save_begin(e, dir, meta, tmp, fin, sizeof tmp, err);
    if (rc) return rc;
    uint64_t hash = 0, size = 0;
    int status = ZT_OK;
    if (zt_ckpt_is_writer(e)) {
        snprintf(path, sizeof path, "%s/rank-%05d.bin", tmp, zt_ckpt_file_index(e));
        status = write_rank_file(e, path, NULL, 0, meta->step, &hash, &size, err);
    }
    if (!status) status = zt_ckpt_onebit_save(e, tmp, err); /* every rank's own errors (onebit_state.c) */
    return save_finish(e, dir, meta, tmp, fin, keep_last, status, size, hash, err);
}

/* ---- async save: snapshot now, write in a thread, commit at the next step boundary ------------ */
struct zt_ckpt_async {
    zt_engine *e;
    char dir[4096], tmp[4096], fin[4096], path[4200];
    zt_ckpt_meta meta;
    int keep_last;
    char *snapshot;
    size_t len;
    pthread_t thread;
    bool started;
    int status;
    uint64_t hash, size;
    zt_error err;
    int onebit_status; /* 1-bit Adam's errors, written at the snapshot (onebit_state.c) */
    zt_error onebit_err;
};

static void *async_writer(void *arg) {
    zt_ckpt_async *a = arg;
    a->status = write_rank_file(a->e, a->path, a->snapshot, a->len, a->meta.step, &a->hash, &a->size, &a->err);
    return NULL;
}

int zt_ckpt_save_async(zt_engine *e, const char *dir, const zt_ckpt_meta *meta, int keep_last,
                       zt_ckpt_async **out, zt_error *err) {
    *out = NULL;
    zt_ckpt_async *a = calloc(1, sizeof *a);
    if (!a) return zt_error_set(err, ZT_ERR_NOMEM, "checkpoint: out of memory");
    a->e = e;
    a->meta = meta_now(e, meta);
    a->keep_last = keep_last;
    snprintf(a->dir, sizeof a->dir, "%s", dir);
    int rc = save_begin(e, dir, meta, a->tmp, a->fin, sizeof a->tmp, err);
    if (rc) {
        free(a);
        return rc;
    }
    a->onebit_status = zt_ckpt_onebit_save(e, a->tmp, &a->onebit_err);
    if (zt_ckpt_is_writer(e) && zt_engine_in_files(e)) {
        /* the optimizer state (or the pieces) is in NVMe files: a snapshot would bring it all into memory, so
         * this rank's file is written now; only the commit waits for the next step boundary */
        snprintf(a->path, sizeof a->path, "%s/rank-%05d.bin", a->tmp, zt_ckpt_file_index(e));
        a->status = write_rank_file(e, a->path, NULL, 0, a->meta.step, &a->hash, &a->size, &a->err);
    } else if (zt_ckpt_is_writer(e)) {
        for_each_slice(e, slice_bytes, &a->len, NULL);
        a->snapshot = malloc(a->len ? a->len : 1);
        if (!a->snapshot) {
            a->status = zt_error_set(&a->err, ZT_ERR_NOMEM, "checkpoint: out of memory for a %zu-byte snapshot", a->len);
        } else {
            char *w = a->snapshot;
            for_each_slice(e, slice_copy, &w, NULL);
            snprintf(a->path, sizeof a->path, "%s/rank-%05d.bin", a->tmp, zt_ckpt_file_index(e));
            if (pthread_create(&a->thread, NULL, async_writer, a) == 0) a->started = true;
            else a->status = zt_error_set(&a->err, ZT_ERR_IO, "checkpoint: cannot start the writer thread");
        }
    }
    *out = a;
    return ZT_OK;
}

void zt_ckpt_async_abandon(zt_ckpt_async *a) {
    if (!a) return;
    if (a->started) pthread_join(a->thread, NULL);
    free(a->snapshot);
    free(a);
}

int zt_ckpt_async_finish(zt_ckpt_async *a, zt_error *err) {
    if (!a) return ZT_OK;
    if (a->started) pthread_join(a->thread, NULL);
    if (!a->status && a->onebit_status) {
        a->status = a->onebit_status;
        a->err = a->onebit_err;
    }
    if (a->status) *err = a->err;
    int rc = save_finish(a->e, a->dir, &a->meta, a->tmp, a->fin, a->keep_last, a->status, a->size, a->hash, err);
    free(a->snapshot);
    free(a);
    return rc;
}

