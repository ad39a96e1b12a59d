/* slices.c - a checkpoint's slices as rectangles of logical tensors (slices.h): the rectangles a
 * tensor- (and expert-) parallel part's rows cover, and reading a rectangle from whatever slices
 * overlap it.
 *
 * Invariants: every manifest number is read as a whole number in range before use (never a cast
 * out of range, never an offset past the file's end); a rectangle is filled only when the slices
 * cover each of its elements exactly once (counted), so a checkpoint with a hole or an overlap is
 * refused, not half-loaded. */
#include "ckpt/slices.h"
#include "shard/tp.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

double zt_ckpt_num(const cJSON *o, const char *key, bool *ok) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(v)) {
        *ok = false;
        return 0;
    }
    return v->valuedouble;
}

int64_t zt_ckpt_num_int(const cJSON *o, const char *key, double lo, double hi, bool *ok) {
    bool here = true;
    double v = zt_ckpt_num(o, key, &here);
    if (!here || !(v >= lo && v <= hi) || v != floor(v)) {
        *ok = false;
        return (int64_t)lo;
    }
    return (int64_t)v;
}

int zt_ckpt_read_at(int fd, void *p, size_t n, off_t off) {
    char *c = p;
    while (n) {
        ssize_t r = pread(fd, c, n, off);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        c += r;
        n -= (size_t)r;
        off += r;
    }
    return 0;
}

int zt_ckpt_part_index(const zt_param_desc *p, int tp_part, int ep_part) {
    return p->ep_parts > 1 ? tp_part * p->ep_parts + ep_part : tp_part;
}

/* p's part `part` as a tp part of a whole tensor: p itself, or (the experts stored E/ep a rank) *v,
 * its ep part's view from logical row *row0, *part its tp part */
static const zt_param_desc *tp_view(const zt_param_desc *p, int *part, zt_param_desc *v, int64_t *row0) {
    *row0 = 0;
    if (p->ep_parts <= 1) return p;
    *v = zt_tp_ep_view(p, *part % p->ep_parts, row0);
    *part /= p->ep_parts;
    return v;
}

void zt_ckpt_part_shape(const zt_param_desc *p, int part, int64_t *rows, int64_t *row_len) {
    zt_param_desc v;
    int64_t row0;
    p = tp_view(p, &part, &v, &row0);
    int64_t R = p->logical_shape[0], L = p->logical_numel / R, b, c;
    *rows = R;
    *row_len = L;
    if (p->tp_parts == 1) return;
    if (p->tp_dim == 1) {
        zt_tp_range(L, p->tp_parts, part, &b, &c);
        *row_len = c;
    } else {
        zt_tp_range(R / p->tp_blocks, p->tp_parts, part, &b, &c);
        *rows = c * p->tp_blocks;
    }
}

static int part_rects(const zt_param_desc *p, int part, int64_t lo, int64_t hi, zt_rect *out) {
    int64_t rows = p->logical_shape[0], row_len = p->logical_numel / rows;
    if (hi <= lo) return 0;
    if (p->tp_parts == 1) {
        out[0] = (zt_rect){lo, hi - lo, 0, row_len};
        return 1;
    }
    if (p->tp_dim == 1) { /* local row r is logical row r, this part's columns */
        int64_t cb, cc;
        zt_tp_range(row_len, p->tp_parts, part, &cb, &cc);
        out[0] = (zt_rect){lo, hi - lo, cb, cc};
        return 1;
    }
    int64_t Eb = rows / p->tp_blocks, rb, cnt; /* dim 0: each block's range of rows */
    zt_tp_range(Eb, p->tp_parts, part, &rb, &cnt);
    int n = 0;
    for (int b = 0; b < p->tp_blocks; b++) {
        int64_t a = lo > b * cnt ? lo : b * cnt, z = hi < (b + 1) * cnt ? hi : (b + 1) * cnt;
        if (a < z) out[n++] = (zt_rect){b * Eb + rb + (a - b * cnt), z - a, 0, row_len};
    }
    return n;
}

int zt_ckpt_part_rects(const zt_param_desc *p, int part, int64_t lo, int64_t hi, zt_rect *out) {
    zt_param_desc v;
    int64_t row0;
    const zt_param_desc *t = tp_view(p, &part, &v, &row0); /* (sets part: before the call below) */
    int n = part_rects(t, part, lo, hi, out);
    for (int k = 0; k < n; k++) out[k].r0 += row0; /* the ep part's rows of the logical tensor */
    return n;
}

int zt_ckpt_fill_rect(const zt_ckpt_files *fs, const cJSON *tj, const char *kind, zt_rect r, int64_t row_len,
                      float *dst, const char *pname, zt_error *err) {
    const cJSON *slices = cJSON_GetObjectItemCaseSensitive(tj, "slices"), *s;
    int64_t covered = 0;
    cJSON_ArrayForEach(s, slices) {
        const cJSON *kn = cJSON_GetObjectItemCaseSensitive(s, "kind");
        if (!cJSON_IsString(kn) || strcmp(kn->valuestring, kind) != 0) continue;
        bool ok = true, cols_given = cJSON_GetObjectItemCaseSensitive(s, "col0") != NULL;
        int f = (int)zt_ckpt_num_int(s, "file", 0, fs->n - 1, &ok);
        uint64_t off = (uint64_t)zt_ckpt_num_int(s, "offset", 0, ZT_CKPT_WHOLE_MAX, &ok);
        int64_t row0 = zt_ckpt_num_int(s, "row0", 0, ZT_CKPT_WHOLE_MAX, &ok);
        int64_t rows = zt_ckpt_num_int(s, "rows", 0, ZT_CKPT_WHOLE_MAX, &ok);
        int64_t col0 = cols_given ? zt_ckpt_num_int(s, "col0", 0, (double)row_len, &ok) : 0;
        int64_t cols = cols_given ? zt_ckpt_num_int(s, "cols", 0, (double)row_len, &ok) : row_len;
        if (!ok || col0 + cols > row_len)
            return zt_error_set(err, ZT_ERR_CKPT, "%s/manifest.json: a slice of %s is malformed", fs->commit, pname);
        /* off + rows x cols x 4 <= the file's size, without overflow */
        if (off > fs->size[f] || (cols > 0 && (uint64_t)rows > (fs->size[f] - off) / ((uint64_t)cols * 4)))
            return zt_error_set(err, ZT_ERR_CKPT, "%s/manifest.json: the %s slice of %s (rows %lld..%lld) lies "
                                "past the end of file %d", fs->commit, kind, pname, (long long)row0,
                                (long long)(row0 + rows), f);
        int64_t a = row0 > r.r0 ? row0 : r.r0, b = row0 + rows < r.r0 + r.nr ? row0 + rows : r.r0 + r.nr;
        int64_t ca = col0 > r.c0 ? col0 : r.c0, cb = col0 + cols < r.c0 + r.nc ? col0 + cols : r.c0 + r.nc;
        if (a >= b || ca >= cb) continue;
        bool whole_rows = ca == col0 && cb == col0 + cols && ca == r.c0 && cb == r.c0 + r.nc;
        for (int64_t row = a; row < b; row = whole_rows ? b : row + 1) { /* whole rows: one read */
            int64_t nrows = whole_rows ? b - a : 1;
            size_t bytes = (size_t)(nrows * (cb - ca)) * 4;
            uint64_t at = off + (uint64_t)((row - row0) * cols + (ca - col0)) * 4;
            if (zt_ckpt_read_at(fs->fds[f], dst + (row - r.r0) * r.nc + (ca - r.c0), bytes, (off_t)at))
                return zt_error_set(err, ZT_ERR_IO, "reading %s of %s from file %d of %s: %s", kind, pname, f,
                                    fs->commit, strerror(errno));
        }
        covered += (b - a) * (cb - ca);
    }
    if (covered != r.nr * r.nc) {
        if (r.nc == row_len)
            return zt_error_set(err, ZT_ERR_CKPT, "checkpoint %s lacks %s rows of %s (needs %lld..%lld, found %lld rows)",
                                fs->commit, kind, pname, (long long)r.r0, (long long)(r.r0 + r.nr),
                                (long long)(covered / (r.nc ? r.nc : 1)));
        return zt_error_set(err, ZT_ERR_CKPT, "checkpoint %s lacks %s elements of %s (needs rows %lld..%lld x columns "
                            "%lld..%lld, found %lld of %lld elements)", fs->commit, kind, pname, (long long)r.r0,
                            (long long)(r.r0 + r.nr), (long long)r.c0, (long long)(r.c0 + r.nc), (long long)covered,
                            (long long)(r.nr * r.nc));
    }
    return 0;
}

int zt_ckpt_fill_local_rows(const zt_ckpt_files *fs, const cJSON *tj, const char *kind, const zt_param_desc *p,
                            int64_t lo, int64_t hi, float *dst, zt_error *err) {
    zt_rect rects[8];
    int64_t row0;
    int blocks = zt_tp_ep_view(p, p->ep_part, &row0).tp_blocks; /* an ep part's own cut */
    if (blocks > 8)
        return zt_error_set(err, ZT_ERR_INTERNAL, "checkpoint: %s is cut in %d blocks (at most 8)", p->name, blocks);
    int n = zt_ckpt_part_rects(p, zt_ckpt_part_index(p, p->tp_part, p->ep_part), lo, hi, rects);
    int64_t row_len = p->logical_numel / p->logical_shape[0];
    for (int k = 0; k < n; k++) {
        int rc = zt_ckpt_fill_rect(fs, tj, kind, rects[k], row_len, dst, p->name, err);
        if (rc) return rc;
        dst += rects[k].nr * rects[k].nc;
    }
    return 0;
}
