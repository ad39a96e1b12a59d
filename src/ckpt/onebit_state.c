/* onebit_state.c - 1-bit Adam's error feedback in a checkpoint: each rank's worker and server
 * errors differ by rank (the rest of the state is replicated under ddp and written once by rank 0),
 * so every rank writes its own file, onebit-errors-rank-NNNNN.bin (NNNNN: the data-parallel rank),
 * beside the commit's shards, before the commit:
 *   header: "ZT1BITER" | u32 version 1 | i32 world | i32 rank | u32 shard group (hybrid: its size;
 *           ddp: 0) | u64 worker floats | u64 server floats | u64 xxh64 of the floats that follow
 *   then the worker error, then the server error (fp32, little-endian as the machine's).
 * On load with the same world size (and, under hybrid, the same shard group size: the errors are
 * those of this rank's pieces) each rank reads its file back (the same bits: a resumed run
 * continues as if it had not stopped); with another world size or shard group, or without the files (a checkpoint
 * saved in the warm-up or by another optimizer), the errors start from zero, as DeepSpeed's
 * OnebitAdam resets them on every load, and rank 0 says so. A file that is there but damaged
 * (size, header, checksum) fails the load (ZT_ERR_CKPT). */
#include "ckpt/checkpoint_internal.h"
#include "core/atomic_file.h"
#include "core/file.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#define MAGIC "ZT1BITER"

typedef struct onebit_header {
    char magic[8];
    uint32_t version;
    int32_t world, rank;
    uint32_t shard_group;
    uint64_t worker_floats, server_floats, hash;
} onebit_header;

static void file_name(const zt_engine *e, const char *dir, char *out, size_t cap) {
    snprintf(out, cap, "%s/onebit-errors-rank-%05d.bin", dir, zt_engine_rank(e));
}

int zt_ckpt_onebit_save(zt_engine *e, const char *dir, zt_error *err) {
    size_t wn, sn;
    float *server, *worker = zt_engine_onebit_errors(e, &wn, &server, &sn);
    if (!worker) return ZT_OK;
    size_t data = (wn + sn) * sizeof(float), len = sizeof(onebit_header) + data;
    unsigned char *buf = malloc(len);
    if (!buf) return zt_error_set(err, ZT_ERR_NOMEM, "checkpoint: out of memory for 1-bit Adam's errors (%zu bytes)", len);
    onebit_header h = {.version = 1, .world = zt_engine_dp_size(e), .rank = zt_engine_rank(e),
                       .shard_group = (uint32_t)zt_engine_onebit_shard_group(e), .worker_floats = wn, .server_floats = sn};
    memcpy(h.magic, MAGIC, 8);
    unsigned char *p = buf + sizeof h;
    memcpy(p, worker, wn * sizeof(float));
    memcpy(p + wn * sizeof(float), server, sn * sizeof(float));
    h.hash = XXH64(p, data, 0);
    memcpy(buf, &h, sizeof h);
    char path[4200];
    file_name(e, dir, path, sizeof path);
    int rc = zt_write_file_atomic(path, buf, len, err);
    free(buf);
    return rc;
}

int zt_ckpt_onebit_load(zt_engine *e, const char *commit, zt_error *err) {
    size_t wn, sn;
    float *server, *worker = zt_engine_onebit_errors(e, &wn, &server, &sn);
    if (!worker) return ZT_OK;
    memset(worker, 0, wn * sizeof(float));
    memset(server, 0, sn * sizeof(float));
    char path[4200];
    file_name(e, commit, path, sizeof path);
    if (access(path, F_OK) != 0) {
        if (zt_engine_rank(e) == 0)
            fprintf(stderr, "note: %s holds no 1-bit Adam error feedback for this rank: the errors start from zero "
                            "(as DeepSpeed's OnebitAdam starts them on every load)\n", commit);
        return ZT_OK;
    }
    char *buf = NULL;
    size_t len = 0;
    int rc = zt_read_file(path, "1-bit Adam's errors", &buf, &len, err);
    if (rc) return zt_error_set(err, ZT_ERR_CKPT, "%s", err->msg);
    onebit_header h;
    if (len < sizeof h) {
        free(buf);
        return zt_error_set(err, ZT_ERR_CKPT, "%s: %zu bytes, shorter than its header", path, len);
    }
    memcpy(&h, buf, sizeof h);
    if (memcmp(h.magic, MAGIC, 8) || h.version != 1) {
        free(buf);
        return zt_error_set(err, ZT_ERR_CKPT, "%s: not a 1-bit Adam error file (version 1)", path);
    }
    if (h.world != zt_engine_dp_size(e)) { /* per-worker errors do not reshard: start from zero */
        free(buf);
        if (zt_engine_rank(e) == 0)
            fprintf(stderr, "note: %s: 1-bit Adam's error feedback was saved by %d ranks, this run has %d: the errors "
                            "start from zero (as DeepSpeed's OnebitAdam starts them on every load)\n",
                    commit, h.world, zt_engine_dp_size(e));
        return ZT_OK;
    }
    if (h.shard_group != (uint32_t)zt_engine_onebit_shard_group(e)) { /* other pieces: start from zero */
        free(buf);
        if (zt_engine_rank(e) == 0)
            fprintf(stderr, "note: %s: 1-bit Adam's error feedback was saved with a shard group of %u ranks (0: ddp), "
                            "this run's is %d: the errors start from zero (as DeepSpeed's OnebitAdam starts them on "
                            "every load)\n",
                    commit, h.shard_group, zt_engine_onebit_shard_group(e));
        return ZT_OK;
    }
    size_t data = (wn + sn) * sizeof(float);
    if (h.worker_floats != wn || h.server_floats != sn || h.rank != zt_engine_rank(e) || len != sizeof h + data) {
        free(buf);
        return zt_error_set(err, ZT_ERR_CKPT,
                            "%s: holds %llu + %llu floats of rank %d, this rank %d needs %zu + %zu (a different model?)",
                            path, (unsigned long long)h.worker_floats, (unsigned long long)h.server_floats, h.rank,
                            zt_engine_rank(e), wn, sn);
    }
    const unsigned char *p = (const unsigned char *)buf + sizeof h;
    if (XXH64(p, data, 0) != h.hash) {
        free(buf);
        return zt_error_set(err, ZT_ERR_CKPT, "%s: checksum mismatch (the file is damaged)", path);
    }
    memcpy(worker, p, wn * sizeof(float));
    memcpy(server, p + wn * sizeof(float), sn * sizeof(float));
    free(buf);
    return ZT_OK;
}
