/* checkpoint_load.c - sharded checkpoints, the load side: the manifest read and checked, every
 * file verified against its checksum, a commit loaded onto any world size and strategy (each rank
 * reads the rows its plan holds out of whichever writers' files hold them: resharding), and the
 * model and precision records compared. The save side is checkpoint.c. */
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


/* xxh64 and size of a whole file, streamed. */
static int hash_file(const char *path, uint64_t *hash, uint64_t *size, zt_error *err) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) return zt_error_set(err, ZT_ERR_CKPT, "checkpoint file %s is missing: %s", path, strerror(errno));
    XXH64_state_t *st = XXH64_createState();
    char *buf = malloc(1 << 22);
    if (!st || !buf) {
        close(fd);
        free(buf);
        XXH64_freeState(st);
        return zt_error_set(err, ZT_ERR_NOMEM, "hashing %s: out of memory", path);
    }
    XXH64_reset(st, 0);
    uint64_t total = 0;
    ssize_t r;
    while ((r = read(fd, buf, 1 << 22)) > 0) {
        XXH64_update(st, buf, (size_t)r);
        total += (uint64_t)r;
    }
    int rc = r < 0 ? zt_error_set(err, ZT_ERR_IO, "reading %s: %s", path, strerror(errno)) : ZT_OK;
    *hash = XXH64_digest(st);
    *size = total;
    XXH64_freeState(st);
    free(buf);
    close(fd);
    return rc;
}


/* ---- reading the manifest ----------------------------------------------------------------------- */

/* A checkpoint file whole; a file that cannot be read is a checkpoint error (exit 4). */
static char *read_text(const char *path, size_t *len, zt_error *err) {
    char *t = NULL;
    if (zt_read_file(path, "checkpoint file", &t, len, err) == ZT_ERR_IO) err->code = ZT_ERR_CKPT;
    return t;
}

/* A tensor of the quantized base (engine/param_quant.c) is not in the files: the manifest records
 * how it was quantized and the xxh64 of its bytes, which must be what this run quantized from its
 * own base (model.init_hf, --init or the seeded init, and lora.base_quant). */
static int check_quantized(zt_engine *e, const char *commit, const cJSON *tj, int i, zt_error *err) {
    const zt_param_desc *p = &zt_engine_model(e)->params[i];
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(tj, "quant"), *h = cJSON_GetObjectItemCaseSensitive(tj, "quant_xxh64");
    const char *was = cJSON_IsString(q) ? q->valuestring : "none", *now = zt_quant_name((zt_quant)p->quant);
    if (strcmp(was, now))
        return zt_error_set(err, ZT_ERR_CKPT, "%s: tensor %s was saved with lora.base_quant %s, this run has %s: resume "
                            "with the same lora.base_quant", commit, p->name, was, now);
    if (!p->quant) return ZT_OK;
    uint64_t want = cJSON_IsString(h) ? strtoull(h->valuestring, NULL, 16) : 0, have = zt_store_quant_hash(e, i);
    if (want != have)
        return zt_error_set(err, ZT_ERR_CKPT, "%s: the %s base of tensor %s is not the one the run was saved on (xxh64 "
                            "%016" PRIx64 " recorded, %016" PRIx64 " here): resume from the same base (model.init_hf, "
                            "--init or the seed)", commit, now, p->name, want, have);
    return ZT_OK;
}

/* Parses and checksums commit/manifest.json. */
static cJSON *load_manifest(const char *commit, zt_error *err) {
    char path[4200];
    size_t len, slen;
    snprintf(path, sizeof path, "%s/manifest.json", commit);
    char *text = read_text(path, &len, err);
    if (!text) return NULL;
    snprintf(path, sizeof path, "%s/manifest.json.xxh64", commit);
    char *sum = read_text(path, &slen, err);
    if (!sum) {
        free(text);
        return NULL;
    }
    uint64_t want = strtoull(sum, NULL, 16), have = XXH64(text, len, 0);
    free(sum);
    if (want != have) {
        free(text);
        zt_error_set(err, ZT_ERR_CKPT, "checkpoint manifest %s/manifest.json: checksum mismatch (expected "
                     "%016" PRIx64 ", found %016" PRIx64 ")", commit, want, have);
        return NULL;
    }
    cJSON *root = cJSON_ParseWithLength(text, len);
    free(text);
    const cJSON *fmt = root ? cJSON_GetObjectItemCaseSensitive(root, "format") : NULL;
    const cJSON *ver = root ? cJSON_GetObjectItemCaseSensitive(root, "version") : NULL;
    if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, FORMAT) != 0 || !cJSON_IsNumber(ver)) {
        /* the format string is the manifest's magic: name what was found */
        char found[80];
        if (!root) snprintf(found, sizeof found, "not JSON");
        else if (!cJSON_IsString(fmt)) snprintf(found, sizeof found, "no \"format\" string");
        else if (strcmp(fmt->valuestring, FORMAT) != 0) snprintf(found, sizeof found, "bad magic: format \"%.40s\"", fmt->valuestring);
        else snprintf(found, sizeof found, "no \"version\" number");
        cJSON_Delete(root);
        zt_error_set(err, ZT_ERR_CKPT, "%s/manifest.json is not a zerotrain checkpoint manifest (%s; want format \""
                     FORMAT "\")", commit, found);
        return NULL;
    }
    if (ver->valuedouble != 1 && ver->valuedouble != VERSION) { /* never guess at a layout this build does not know */
        double v = ver->valuedouble;
        cJSON_Delete(root);
        zt_error_set(err, ZT_ERR_CKPT, "%s/manifest.json: checkpoint format v%g not supported (max v%d)", commit,
                     v, VERSION);
        return NULL;
    }
    return root;
}

cJSON *zt_ckpt_manifest_read(const char *commit, zt_error *err) { return load_manifest(commit, err); }

/* a file name of the manifest: a plain name inside the commit directory, never a path out of it */
static bool plain_name(const char *n) {
    return n[0] && strcmp(n, ".") && strcmp(n, "..") && !strchr(n, '/') && strlen(n) < 256;
}

/* Checks every file listed in the manifest (size and xxh64); want[f] selects which (NULL: all). */
static int verify_files(const char *commit, const cJSON *root, const bool *want, zt_error *err) {
    const cJSON *files = cJSON_GetObjectItemCaseSensitive(root, "files"), *f;
    int idx = 0;
    cJSON_ArrayForEach(f, files) {
        int i = idx++;
        if (want && !want[i]) continue;
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(f, "name");
        const cJSON *hx = cJSON_GetObjectItemCaseSensitive(f, "xxh64");
        bool ok = cJSON_IsString(name) && cJSON_IsString(hx) && plain_name(name->valuestring);
        uint64_t bytes = (uint64_t)zt_ckpt_num_int(f, "bytes", 0, ZT_CKPT_WHOLE_MAX, &ok);
        if (!ok) return zt_error_set(err, ZT_ERR_CKPT, "%s/manifest.json: file entry %d is malformed", commit, i);
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", commit, name->valuestring);
        uint64_t h = 0, size = 0;
        int rc = hash_file(path, &h, &size, err);
        if (rc) return rc;
        if (size != bytes)
            return zt_error_set(err, ZT_ERR_CKPT, "checkpoint file %s: %" PRIu64 " bytes, the manifest expects %" PRIu64,
                                path, size, bytes);
        uint64_t expect = strtoull(hx->valuestring, NULL, 16);
        if (h != expect)
            return zt_error_set(err, ZT_ERR_CKPT, "checkpoint file %s: checksum mismatch (expected %016" PRIx64
                                ", found %016" PRIx64 ")", path, expect, h);
    }
    return ZT_OK;
}

int zt_ckpt_verify(const char *path, zt_error *err) {
    char commit[4096];
    int rc = zt_ckpt_resolve(path, commit, sizeof commit, err);
    if (rc) return rc;
    cJSON *root = load_manifest(commit, err);
    if (!root) return err->code;
    rc = verify_files(commit, root, NULL, err);
    cJSON_Delete(root);
    return rc;
}

int zt_ckpt_read_model(const char *path, zt_model_spec *spec, zt_error *err) {
    char commit[4096], where[4200];
    int rc = zt_ckpt_resolve(path, commit, sizeof commit, err);
    if (rc) return rc;
    cJSON *root = load_manifest(commit, err);
    if (!root) return err->code;
    snprintf(where, sizeof where, "%s/manifest.json", commit);
    rc = zt_model_meta_parse(cJSON_GetObjectItemCaseSensitive(root, "model"), where, spec, err);
    cJSON_Delete(root);
    return rc;
}

/* ---- load --------------------------------------------------------------------------------------- */

/* zt_ckpt_fill_local_rows for what is not fp32 in memory (an optimizer state in NVMe files or in
 * bf16, bf16-low's parameters): rows [lo, hi) of kind k of parameter i go through the idle staging
 * memory (one row at a time only if a row is larger than it). */
static int fill_offloaded(zt_engine *e, const zt_ckpt_files *fs, const cJSON *tj, int k, int i, int64_t lo,
                          int64_t hi, zt_error *err) {
    int64_t row_len = zt_engine_plan(e)->p[i].row_len;
    size_t cap;
    float *buf = zt_ckpt_kind_bounce(e, k, &cap), *tmp = NULL;
    if (!buf || cap < (size_t)row_len) {
        if (!(tmp = malloc((size_t)row_len * sizeof *tmp)))
            return zt_error_set(err, ZT_ERR_NOMEM, "checkpoint: out of memory for a row of %s", zt_engine_model(e)->params[i].name);
        buf = tmp;
        cap = (size_t)row_len;
    }
    int64_t per = (int64_t)(cap / (size_t)row_len);
    int rc = ZT_OK;
    for (int64_t r = lo; r < hi && !rc; r += per) {
        int64_t r2 = r + per < hi ? r + per : hi;
        rc = zt_ckpt_fill_local_rows(fs, tj, KIND_NAMES[k], &zt_engine_model(e)->params[i], r, r2, buf, err);
        if (!rc)
            rc = zt_ckpt_kind_write(e, k, i, (size_t)((r - lo) * row_len), (size_t)((r2 - r) * row_len), buf, err);
    }
    free(tmp);
    return rc;
}

/* zero1/zero2 with master pieces (engine master_shard.c): every rank's compute copies of parameter
 * i from all its rows in the checkpoint, read in chunks of whole rows of about 64Ki elements (no
 * collective; the chunk is transient load-time memory, outside the memory plan like the loader's
 * other buffers). */
static int fill_copies(zt_engine *e, const zt_ckpt_files *fs, const cJSON *tj, int i, zt_error *err) {
    int64_t row_len = zt_engine_plan(e)->p[i].row_len, rows = zt_engine_plan(e)->p[i].rows;
    int64_t per = row_len >= 65536 ? 1 : 65536 / (row_len ? row_len : 1);
    if (per > rows) per = rows > 0 ? rows : 1;
    float *buf = malloc((size_t)(per * row_len > 0 ? per * row_len : 1) * sizeof *buf);
    if (!buf) return zt_error_set(err, ZT_ERR_NOMEM, "checkpoint: out of memory for rows of %s", zt_engine_model(e)->params[i].name);
    int rc = ZT_OK;
    for (int64_t r = 0; r < rows && !rc; r += per) {
        int64_t r2 = r + per < rows ? r + per : rows;
        rc = zt_ckpt_fill_local_rows(fs, tj, KIND_NAMES[0], &zt_engine_model(e)->params[i], r, r2, buf, err);
        if (!rc) zt_store_copies_write(e, i, (size_t)(r * row_len), (size_t)((r2 - r) * row_len), buf);
    }
    free(buf);
    return rc;
}

int zt_ckpt_load(zt_engine *e, const char *path, zt_ckpt_meta *meta, zt_error *err) {
    char commit[4096];
    int rc = zt_ckpt_resolve(path, commit, sizeof commit, err);
    if (rc) return rc;
    cJSON *root = load_manifest(commit, err);
    if (!root) return err->code;
    const zt_model *m = zt_engine_model(e);
    const zt_plan *pl = zt_engine_plan(e);
    bool ok = true;
    memset(meta, 0, sizeof *meta);
    meta->step = zt_ckpt_num_int(root, "step", 0, ZT_CKPT_WHOLE_MAX, &ok);
    meta->samples_consumed = (uint64_t)zt_ckpt_num_int(root, "samples_consumed", 0, ZT_CKPT_WHOLE_MAX, &ok);
    meta->world = (int)zt_ckpt_num_int(root, "world", 1, INT_MAX, &ok);
    const cJSON *strat = cJSON_GetObjectItemCaseSensitive(root, "strategy");
    if (cJSON_IsString(strat)) snprintf(meta->strategy, sizeof meta->strategy, "%s", strat->valuestring);
    const cJSON *ch = cJSON_GetObjectItemCaseSensitive(root, "config_hash");
    if (cJSON_IsString(ch)) meta->config_hash = strtoull(ch->valuestring, NULL, 16);
    const cJSON *files = cJSON_GetObjectItemCaseSensitive(root, "files");
    const cJSON *tensors = cJSON_GetObjectItemCaseSensitive(root, "tensors");
    int nfiles = cJSON_GetArraySize(files);
    if (!ok || !cJSON_IsArray(files) || !cJSON_IsArray(tensors) || nfiles < 1 || nfiles > 1 << 20) {
        cJSON_Delete(root);
        return zt_error_set(err, ZT_ERR_CKPT, "%s/manifest.json: step, samples_consumed, world, files or tensors missing or malformed", commit);
    }
    /* the optimizer's state is read kind by kind: another optimizer's moments would be taken for
     * this one's (an engine that loads parameters only, as export's, reads any) */
    const cJSON *opt = cJSON_GetObjectItemCaseSensitive(root, "optimizer");
    const char *mine = zt_optimizer_name(zt_engine_options_of(e)->optim.kind);
    if (zt_ckpt_n_kinds(e) > 1 && cJSON_IsString(opt) && strcmp(opt->valuestring, mine)) {
        rc = zt_error_set(err, ZT_ERR_CKPT, "%s/manifest.json: the checkpoint's optimizer state is %s's, this run's "
                          "optimizer.type is %s: resume with optimizer.type %s, or start %s from the weights alone "
                          "(zerotrain export %s --hf DIR, then train --init-hf DIR)", commit,
                          opt->valuestring, mine, opt->valuestring, mine, commit);
        cJSON_Delete(root);
        return rc;
    }
    if ((rc = zt_model_meta_compare(commit, tensors, zt_ckpt_whole_model(e), err)) ||
        (rc = zt_run_state_read(root, commit, &meta->run, err))) {
        cJSON_Delete(root);
        return rc;
    }
    int *fds = malloc((size_t)nfiles * sizeof *fds);
    uint64_t *fsize = malloc((size_t)nfiles * sizeof *fsize);
    bool *want = calloc((size_t)nfiles, sizeof *want);
    if (!fds || !fsize || !want) {
        rc = zt_error_set(err, ZT_ERR_NOMEM, "checkpoint: out of memory");
        goto out;
    }
    for (int f = 0; f < nfiles; f++) fds[f] = -1;
    int kinds = zt_ckpt_n_kinds(e);
    for (int f = 0; f < nfiles; f++) want[f] = true; /* every file this rank may read is verified */
    if ((rc = verify_files(commit, root, want, err))) goto out;
    int f = 0;
    const cJSON *fe;
    cJSON_ArrayForEach(fe, files) {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(fe, "name");
        char p[4200];
        snprintf(p, sizeof p, "%s/%s", commit, name->valuestring);
        fds[f] = open(p, O_RDONLY);
        fsize[f] = (uint64_t)zt_ckpt_num_int(fe, "bytes", 0, ZT_CKPT_WHOLE_MAX, &ok); /* checked by verify_files */
        if (fds[f] < 0) {
            rc = zt_error_set(err, ZT_ERR_CKPT, "checkpoint file %s is missing: %s", p, strerror(errno));
            goto out;
        }
        f++;
    }
    zt_ckpt_files fs = {.commit = commit, .fds = fds, .size = fsize, .n = nfiles};
    for (int i = 0; i < m->n_params; i++) {
        /* in the whole model's order (compare_tensors) */
        const cJSON *tj = cJSON_GetArrayItem(tensors, zt_engine_pipeline(e) ? zt_pipeline_full_index(zt_engine_pipeline(e), i) : i);
        const zt_param_desc *p = &m->params[i];
        if ((rc = check_quantized(e, commit, tj, i, err))) goto out;
        for (int k = 0; k < kinds && !p->quant; k++) {
            if (k > 0 && !p->trainable) continue; /* a frozen parameter has no optimizer state */
            /* the rows this rank holds of kind k: its plan rows where sharded, all rows where
             * replicated (zero1/zero2 parameters, everything under ddp) */
            bool sharded = k == 0 ? zt_store_local_is_piece(e) : zt_engine_shards_optim(e);
            int64_t lo = sharded ? pl->p[i].row_begin[pl->p[i].shard] : 0;
            int64_t hi = sharded ? pl->p[i].row_begin[pl->p[i].shard + 1] : pl->p[i].rows;
            float *dst;
            if (k == 0) {
                dst = zt_store_local_fp32(e, i); /* NULL: bf16-low, files: through fill_offloaded's staging */
            } else {
                float *state = zt_engine_state_ptr(e, k - 1);
                dst = state ? state + zt_ckpt_state_base(e, i) : NULL;
            }
            if (dst) {
                if ((rc = zt_ckpt_fill_local_rows(&fs, tj, KIND_NAMES[k], p, lo, hi, dst, err))) goto out;
            } else if ((rc = fill_offloaded(e, &fs, tj, k, i, lo, hi, err))) {
                goto out;
            }
            if (k == 0 && zt_store_master_pieces(e) && (rc = fill_copies(e, &fs, tj, i, err))) goto out;
        }
    }
    zt_engine_zero_grad(e);
    zt_engine_set_step(e, (uint64_t)meta->step);
    const cJSON *ostep = cJSON_GetObjectItemCaseSensitive(root, "optimizer_step");
    bool sok = true;
    int64_t os = zt_ckpt_num_int(root, "optimizer_step", 0, ZT_CKPT_WHOLE_MAX, &sok);
    if (cJSON_IsNumber(ostep) && sok) zt_engine_set_step(e, (uint64_t)os);
    const cJSON *pj = cJSON_GetObjectItemCaseSensitive(root, "precision");
    const cJSON *ls = pj ? cJSON_GetObjectItemCaseSensitive(pj, "loss_scaler") : NULL;
    if (ls && zt_engine_options_of(e)->precision.mode == ZT_PRECISION_FP16) {
        bool lok = true;
        zt_loss_scaler sc = {.scale = zt_ckpt_num(ls, "scale", &lok),
                             .cur_hysteresis = (int)zt_ckpt_num_int(ls, "cur_hysteresis", INT_MIN, INT_MAX, &lok),
                             .cur_iter = zt_ckpt_num_int(ls, "cur_iter", -ZT_CKPT_WHOLE_MAX, ZT_CKPT_WHOLE_MAX, &lok),
                             .last_overflow_iter = zt_ckpt_num_int(ls, "last_overflow_iter", -ZT_CKPT_WHOLE_MAX, ZT_CKPT_WHOLE_MAX, &lok)};
        if (!lok || !(sc.scale > 0)) {
            rc = zt_error_set(err, ZT_ERR_CKPT, "%s/manifest.json: precision.loss_scaler is incomplete", commit);
            goto out;
        }
        zt_engine_set_loss_scaler(e, &sc);
    }
    rc = zt_ckpt_onebit_load(e, commit, err); /* 1-bit Adam's per-rank errors (onebit_state.c) */
    if (!rc) rc = zt_store_loaded(e, err);
out:
    if (fds)
        for (int q = 0; q < nfiles; q++)
            if (fds[q] >= 0) close(fds[q]);
    free(fds);
    free(fsize);
    free(want);
    cJSON_Delete(root);
    return rc;
}
