/* context_parallel.c - attention over the whole sequence when a unit holds one context-parallel
 * part of it (zt_unit.cp_parts > 1; docs/parallelism.md): the forward and backward of the three
 * modes side by side, over the group's cp calls (zt_unit_group: an exchange between the parts, a
 * sum of blocks in a fixed tree, a ring shift). The model still never sees a rank: the group says
 * which pair of chunks this part holds (zt_cp_chunks), and everything else of the block runs on
 * those positions unchanged.
 *
 * Layout. A part holds T = T_whole / P positions of every sequence, chunks cp_chunk_of and
 * 2P - 1 - cp_chunk_of of 2P, local rows [0, c) and [c, 2c) (c = T/2). The attention's saved lse
 * (B·NH·T floats, as the whole-sequence kernel's) is laid out by mode: allgather and ring
 * [b][local chunk j][head][c rows]; ulysses the head split's (B, NH/P, T_whole).
 *
 *   allgather  forward: every part's k, v gathered into the whole sequence (B, T_whole, 2·KV);
 *              each local chunk attends to the keys up to its end (flash_attention_block_forward
 *              with k0 = 0: the rows of the one-process kernel, bit for bit, when the chunks are
 *              aligned, FLASH_BLOCK_ALIGN). backward: k, v gathered again; each chunk's dq, and its
 *              dk, dv over the keys it sees, summed over the chunks into the whole (B, T_whole,
 *              2·KV); each part's rows of that sum over the parts (cp_reduce_exchange's tree).
 *   ring       forward: the part's k, v pass around the ring (P - 1 shifts, posted before each
 *              step's blocks compute, so they move while the tiles run); each visible (query
 *              chunk, key chunk) pair's out and lse merged into the result in ring order.
 *              backward: k, v around again with a dk, dv accumulator that travels with them
 *              (the kv shift overlapped with the step's blocks, the accumulator's after them),
 *              and one last shift takes every accumulator home.
 *   ulysses    all-to-all from the sequence split to a head split (each part: NH/P query heads,
 *              NKV/P key/value heads, every position), the one-process flash attention on them,
 *              and back; backward the same on dout, q, k, v, out, and dq, dk, dv back.
 * Every sum is in a fixed order (the chunks in order, the parts in the exchange's tree, the ring's
 * order), so a run is reproducible bit for bit; against one process the sums over key chunks (and
 * the weight gradients over the parts' rows) are grouped differently: tests/cp.sh bounds it. */
#include "zerotrain/zerotrain.h"
#include "kernels/kernels.h"
#include "model/layers.h"

#include <math.h>
#include <string.h>

typedef struct cp_shape {
    int P, me, B, T, Tw, c, NH, NKV, hs, QW, KW;
    int mb[2];                  /* this part's chunks' whole-sequence starts */
    const int32_t *pos;         /* (B, Tw) or NULL */
    bool bf16;
} cp_shape;

static int shape_of(const zt_unit *u, const zt_unit_args *a, int NH, int NKV, int hs, cp_shape *s, zt_error *err) {
    const zt_unit_group *g = a->group;
    if (!g || g->cp_parts != u->cp_parts || !g->cp_exchange)
        return zt_error_set(err, ZT_ERR_INTERNAL, "unit %s: context parallelism over %d parts without its group",
                            u->name, u->cp_parts);
    *s = (cp_shape){.P = u->cp_parts, .me = g->cp_chunk_of, .B = a->batch->B, .T = a->batch->T, .NH = NH, .NKV = NKV,
                    .hs = hs, .QW = NH * hs, .KW = NKV * hs, .pos = a->batch->cp_positions, .bf16 = a->attn_bf16};
    s->Tw = s->T * s->P;
    int c;
    zt_cp_chunks(s->Tw, s->P, s->me, s->mb, &c);
    s->c = c;
    if (2 * c != s->T)
        return zt_error_set(err, ZT_ERR_INTERNAL, "unit %s: context parallelism needs an even number of local "
                            "positions (T=%d)", u->name, s->T);
    return ZT_OK;
}

static void copy_rows(float *dst, size_t ds, const float *src, size_t ss, int rows, int width) {
    for (int r = 0; r < rows; r++) memcpy(dst + (size_t)r * ds, src + (size_t)r * ss, (size_t)width * sizeof *dst);
}

static void zero_rows(float *dst, size_t ds, int rows, int width) {
    for (int r = 0; r < rows; r++) memset(dst + (size_t)r * ds, 0, (size_t)width * sizeof *dst);
}

/* part p's local rows of the whole-sequence tensor `whole` (B, Tw, w) <-> the block `blk` (B, T, w):
 * its two chunks, each c contiguous rows */
static void part_rows(const cp_shape *s, int p, float *whole, float *blk, int w, bool to_whole) {
    int beg[2], c;
    zt_cp_chunks(s->Tw, s->P, p, beg, &c);
    size_t n = (size_t)c * w * sizeof *whole;
    for (int b = 0; b < s->B; b++)
        for (int j = 0; j < 2; j++) {
            float *x = whole + ((size_t)b * s->Tw + beg[j]) * w, *y = blk + ((size_t)b * s->T + (size_t)j * c) * w;
            if (to_whole) memcpy(x, y, n);
            else memcpy(y, x, n);
        }
}

/* Lays n buffers of sizes[i] floats out from base (each rounded up to 16 floats: 64-byte aligned
 * when base is), or just counts (base NULL); returns the total floats. */
static size_t lay_out(float *base, const size_t *sizes, float **const *ptrs, int n) {
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        if (base) *ptrs[i] = base + off;
        off += (sizes[i] + 15) / 16 * 16;
    }
    return off;
}

static size_t kv_block(const cp_shape *s) { return (size_t)s->B * s->T * 2 * s->KW; }

/* k, v (stride skv) -> mine (B, T, [k | v]) and back */
static void pack_kv(const cp_shape *s, float *mine, const float *k, const float *v, int skv) {
    size_t n = (size_t)s->B * s->T;
    copy_rows(mine, 2 * (size_t)s->KW, k, (size_t)skv, (int)n, s->KW);
    copy_rows(mine + s->KW, 2 * (size_t)s->KW, v, (size_t)skv, (int)n, s->KW);
}

static void unpack_kv(const cp_shape *s, const float *mine, float *k, float *v, int skv) {
    size_t n = (size_t)s->B * s->T;
    copy_rows(k, (size_t)skv, mine, 2 * (size_t)s->KW, (int)n, s->KW);
    copy_rows(v, (size_t)skv, mine + s->KW, 2 * (size_t)s->KW, (int)n, s->KW);
}

/* ---- allgather ------------------------------------------------------------------------------ */

typedef struct ag_bufs {
    float *kv_all, *dkv_all, *mine, *stage, *stage2, *tmp, *kscr;
} ag_bufs;

static size_t ag_layout(const cp_shape *s, float *base, ag_bufs *o) {
    size_t whole = (size_t)s->B * s->Tw * 2 * s->KW, blk = kv_block(s);
    size_t sizes[] = {whole, whole, blk, (size_t)s->P * blk, (size_t)s->P * blk, (size_t)s->Tw * 2 * s->KW,
                      flash_attention_block_scratch_floats(1, s->c, s->Tw, s->NH, s->NKV, s->hs)};
    float **ptrs[] = {&o->kv_all, &o->dkv_all, &o->mine, &o->stage, &o->stage2, &o->tmp, &o->kscr};
    return lay_out(base, sizes, ptrs, 7);
}

/* every part's k, v into the whole sequence (kv_all) */
static int ag_gather(const cp_shape *s, const zt_unit_group *g, const ag_bufs *w, const float *k, const float *v,
                     int skv, zt_error *err) {
    size_t blk = kv_block(s), bytes = blk * sizeof(float);
    pack_kv(s, w->mine, k, v, skv);
    const void *send[ZT_CP_MAX_PARTS];
    void *recv[ZT_CP_MAX_PARTS];
    size_t sb[ZT_CP_MAX_PARTS], rb[ZT_CP_MAX_PARTS];
    for (int p = 0; p < s->P; p++) {
        send[p] = w->mine, recv[p] = w->stage + (size_t)p * blk;
        sb[p] = rb[p] = bytes;
    }
    int rc = g->cp_exchange(g, send, sb, recv, rb, "context-parallel k, v all-gather", err);
    if (rc) return rc;
    memcpy(w->stage + (size_t)s->me * blk, w->mine, bytes);
    for (int p = 0; p < s->P; p++) part_rows(s, p, w->kv_all, w->stage + (size_t)p * blk, 2 * s->KW, true);
    return ZT_OK;
}

static int ag_forward(const cp_shape *s, const zt_unit_group *g, float *out, float *lse, float *scratch,
                      const float *q, const float *k, const float *v, int sq, int skv, zt_error *err) {
    ag_bufs w;
    ag_layout(s, scratch, &w);
    int rc = ag_gather(s, g, &w, k, v, skv, err);
    if (rc) return rc;
    size_t KW2 = 2 * (size_t)s->KW;
    for (int b = 0; b < s->B; b++)
        for (int j = 0; j < 2; j++) {
            size_t row = (size_t)b * s->T + (size_t)j * s->c;
            const float *kb = w.kv_all + (size_t)b * s->Tw * KW2;
            flash_attention_block_forward(out + row * s->QW, lse + ((size_t)b * 2 + j) * s->NH * s->c, w.kscr,
                                          q + row * sq, kb, kb + s->KW, 1, s->mb[j], s->c, 0, s->mb[j] + s->c, s->NH,
                                          s->NKV, s->hs, sq, (int)KW2, s->bf16, s->pos ? s->pos + (size_t)b * s->Tw : NULL,
                                          s->Tw);
        }
    return ZT_OK;
}

static int ag_backward(const cp_shape *s, const zt_unit_group *g, float *dq, float *dk, float *dv, float *scratch,
                       const float *dout, const float *q, const float *k, const float *v, const float *out,
                       const float *lse, int sq, int skv, zt_error *err) {
    ag_bufs w;
    ag_layout(s, scratch, &w);
    int rc = ag_gather(s, g, &w, k, v, skv, err);
    if (rc) return rc;
    size_t KW2 = 2 * (size_t)s->KW, blk = kv_block(s);
    memset(w.dkv_all, 0, (size_t)s->B * s->Tw * KW2 * sizeof(float));
    for (int b = 0; b < s->B; b++)
        for (int j = 0; j < 2; j++) {
            size_t row = (size_t)b * s->T + (size_t)j * s->c;
            int n = s->mb[j] + s->c; /* the keys this chunk sees */
            const float *kb = w.kv_all + (size_t)b * s->Tw * KW2;
            zero_rows(dq + row * sq, (size_t)sq, s->c, s->QW);
            flash_attention_block_backward(dq + row * sq, w.tmp, w.tmp + s->KW, w.kscr, dout + row * s->QW, q + row * sq,
                                           kb, kb + s->KW, out + row * s->QW, lse + ((size_t)b * 2 + j) * s->NH * s->c, 1,
                                           s->mb[j], s->c, 0, n, s->NH, s->NKV, s->hs, sq, (int)KW2, s->bf16,
                                           s->pos ? s->pos + (size_t)b * s->Tw : NULL, s->Tw);
            float *acc = w.dkv_all + (size_t)b * s->Tw * KW2;
            for (size_t i = 0; i < (size_t)n * KW2; i++) acc[i] += w.tmp[i];
        }
    /* each part's rows of the sum over the parts' contributions */
    const float *send[ZT_CP_MAX_PARTS];
    for (int p = 0; p < s->P; p++) {
        part_rows(s, p, w.dkv_all, w.stage + (size_t)p * blk, (int)KW2, false);
        send[p] = w.stage + (size_t)p * blk;
    }
    if ((rc = g->cp_reduce_exchange(g, send, w.mine, blk, w.stage2, "context-parallel dk, dv reduce-scatter", err)))
        return rc;
    unpack_kv(s, w.mine, dk, dv, skv);
    return ZT_OK;
}

/* ---- ring ----------------------------------------------------------------------------------- */

typedef struct ring_bufs {
    float *held, *other, *ob, *lb, *tmp, *kscr; /* held/other: [kv (B,T,2KV) | dkv (B,T,2KV)] */
} ring_bufs;

static size_t ring_layout(const cp_shape *s, float *base, ring_bufs *o) {
    size_t blk = kv_block(s);
    size_t sizes[] = {2 * blk, 2 * blk, (size_t)s->c * s->QW, (size_t)s->NH * s->c, (size_t)s->c * 2 * s->KW,
                      flash_attention_block_scratch_floats(1, s->c, s->c, s->NH, s->NKV, s->hs)};
    float **ptrs[] = {&o->held, &o->other, &o->ob, &o->lb, &o->tmp, &o->kscr};
    return lay_out(base, sizes, ptrs, 6);
}

/* Whether key chunk kb (c positions) has keys visible to query chunk q0: chunks are c-aligned, so
 * causality leaves exactly the chunks that start at or before the query chunk. */
static bool visible(int kb, int q0) { return kb <= q0; }

static int ring_forward(const cp_shape *s, const zt_unit_group *g, float *out, float *lse, float *scratch,
                        const float *q, const float *k, const float *v, int sq, int skv, zt_error *err) {
    ring_bufs w;
    ring_layout(s, scratch, &w);
    size_t KW2 = 2 * (size_t)s->KW, bytes = kv_block(s) * sizeof(float);
    pack_kv(s, w.held, k, v, skv);
    memset(out, 0, (size_t)s->B * s->T * s->QW * sizeof *out);
    for (size_t i = 0; i < (size_t)s->B * s->NH * s->T; i++) lse[i] = -INFINITY;
    int rc;
    for (int step = 0; step < s->P; step++) {
        int src = (s->me - step + s->P) % s->P, sb[2], c;
        zt_cp_chunks(s->Tw, s->P, src, sb, &c);
        bool more = step < s->P - 1;
        if (more && (rc = g->cp_shift_post(g, w.held, w.other, bytes, "context-parallel ring k, v", err))) return rc;
        for (int b = 0; b < s->B; b++)
            for (int j = 0; j < 2; j++)
                for (int i = 0; i < 2; i++) {
                    if (!visible(sb[i], s->mb[j])) continue;
                    size_t row = (size_t)b * s->T + (size_t)j * s->c;
                    const float *kb = w.held + ((size_t)b * s->T + (size_t)i * s->c) * KW2;
                    flash_attention_block_forward(w.ob, w.lb, w.kscr, q + row * sq, kb, kb + s->KW, 1, s->mb[j], s->c,
                                                  sb[i], s->c, s->NH, s->NKV, s->hs, sq, (int)KW2, s->bf16,
                                                  s->pos ? s->pos + (size_t)b * s->Tw : NULL, s->Tw);
                    flash_attention_merge(out + row * s->QW, lse + ((size_t)b * 2 + j) * s->NH * s->c, w.ob, w.lb, 1,
                                          s->c, s->NH, s->hs);
                }
        if (more) {
            if ((rc = g->cp_shift_wait(g, err))) return rc;
            float *t = w.held;
            w.held = w.other, w.other = t;
        }
    }
    return ZT_OK;
}

static int ring_backward(const cp_shape *s, const zt_unit_group *g, float *dq, float *dk, float *dv, float *scratch,
                         const float *dout, const float *q, const float *k, const float *v, const float *out,
                         const float *lse, int sq, int skv, zt_error *err) {
    ring_bufs w;
    ring_layout(s, scratch, &w);
    size_t KW2 = 2 * (size_t)s->KW, blk = kv_block(s), bytes = blk * sizeof(float);
    pack_kv(s, w.held, k, v, skv);
    memset(w.held + blk, 0, bytes);
    zero_rows(dq, (size_t)sq, s->B * s->T, s->QW);
    int rc;
    for (int step = 0; step < s->P; step++) {
        int src = (s->me - step + s->P) % s->P, sb[2], c;
        zt_cp_chunks(s->Tw, s->P, src, sb, &c);
        bool more = step < s->P - 1;
        if (more && (rc = g->cp_shift_post(g, w.held, w.other, bytes, "context-parallel ring k, v (backward)", err)))
            return rc;
        for (int b = 0; b < s->B; b++)
            for (int j = 0; j < 2; j++)
                for (int i = 0; i < 2; i++) {
                    if (!visible(sb[i], s->mb[j])) continue;
                    size_t row = (size_t)b * s->T + (size_t)j * s->c, krow = (size_t)b * s->T + (size_t)i * s->c;
                    const float *kb = w.held + krow * KW2;
                    flash_attention_block_backward(dq + row * sq, w.tmp, w.tmp + s->KW, w.kscr, dout + row * s->QW,
                                                   q + row * sq, kb, kb + s->KW, out + row * s->QW,
                                                   lse + ((size_t)b * 2 + j) * s->NH * s->c, 1, s->mb[j], s->c, sb[i],
                                                   s->c, s->NH, s->NKV, s->hs, sq, (int)KW2, s->bf16,
                                                   s->pos ? s->pos + (size_t)b * s->Tw : NULL, s->Tw);
                    float *acc = w.held + blk + krow * KW2;
                    for (size_t x = 0; x < (size_t)s->c * KW2; x++) acc[x] += w.tmp[x];
                }
        if (more && (rc = g->cp_shift_wait(g, err))) return rc;
        /* the accumulator follows its keys (after them: the blocks just wrote it); after the last
         * step the held accumulator belongs to the next part: the same shift takes it home */
        if ((rc = g->cp_shift_post(g, w.held + blk, w.other + blk, bytes, "context-parallel ring dk, dv", err)) ||
            (rc = g->cp_shift_wait(g, err)))
            return rc;
        float *t = w.held;
        w.held = w.other, w.other = t;
    }
    unpack_kv(s, w.held + blk, dk, dv, skv);
    return ZT_OK;
}

/* ---- ulysses -------------------------------------------------------------------------------- */

typedef struct uly_bufs {
    float *send, *recv, *hq, *ho, *hdo, *hdq, *kscr;
} uly_bufs;

static int head_width(const cp_shape *s) { return (s->NH + 2 * s->NKV) / s->P * s->hs; }

static size_t uly_layout(const cp_shape *s, float *base, uly_bufs *o) {
    size_t qkv = (size_t)s->B * s->T * (s->NH + 2 * s->NKV) * s->hs, oo = (size_t)s->B * s->T * s->QW;
    size_t sizes[] = {qkv, qkv, qkv, oo, oo, qkv,
                      flash_attention_scratch_floats(s->B, s->Tw, s->NH / s->P, s->NKV / s->P, s->hs)};
    float **ptrs[] = {&o->send, &o->recv, &o->hq, &o->ho, &o->hdo, &o->hdq, &o->kscr};
    return lay_out(base, sizes, ptrs, 7);
}

/* An all-to-all of blocks of (B, T, w) floats: send block p (at send + p·B·T·w) to part p, part p's
 * block into recv + p·B·T·w (this part's own copied). */
static int uly_exchange(const cp_shape *s, const zt_unit_group *g, float *send, float *recv, int w, const char *what,
                        zt_error *err) {
    size_t n = (size_t)s->B * s->T * w;
    const void *sp[ZT_CP_MAX_PARTS];
    void *rp[ZT_CP_MAX_PARTS];
    size_t bytes[ZT_CP_MAX_PARTS];
    for (int p = 0; p < s->P; p++) sp[p] = send + p * n, rp[p] = recv + p * n, bytes[p] = n * sizeof(float);
    memcpy(recv + s->me * n, send + s->me * n, n * sizeof(float));
    return g->cp_exchange(g, sp, bytes, rp, bytes, what, err);
}

/* the sequence split's q, k, v (strides sq, skv) -> the head split's whole sequence hq (B, Tw, W3) */
static int uly_qkv_in(const cp_shape *s, const zt_unit_group *g, const uly_bufs *w, const float *q, const float *k,
                      const float *v, int sq, int skv, zt_error *err) {
    int W3 = head_width(s), qh = s->NH / s->P * s->hs, kh = s->NKV / s->P * s->hs;
    size_t n = (size_t)s->B * s->T, blk = n * W3;
    for (int p = 0; p < s->P; p++) {
        float *d = w->send + p * blk;
        copy_rows(d, W3, q + (size_t)p * qh, sq, (int)n, qh);
        copy_rows(d + qh, W3, k + (size_t)p * kh, skv, (int)n, kh);
        copy_rows(d + qh + kh, W3, v + (size_t)p * kh, skv, (int)n, kh);
    }
    int rc = uly_exchange(s, g, w->send, w->recv, W3, "context-parallel (ulysses) q, k, v all-to-all", err);
    if (rc) return rc;
    for (int p = 0; p < s->P; p++) part_rows(s, p, w->hq, w->recv + p * blk, W3, true);
    return ZT_OK;
}

/* a sequence split (B, T, NH·hs) tensor x -> the head split's whole sequence h (B, Tw, NH/P·hs) */
static int uly_heads_in(const cp_shape *s, const zt_unit_group *g, const uly_bufs *w, const float *x, float *h,
                        const char *what, zt_error *err) {
    int qh = s->NH / s->P * s->hs;
    size_t n = (size_t)s->B * s->T, blk = n * qh;
    for (int p = 0; p < s->P; p++) copy_rows(w->send + p * blk, qh, x + (size_t)p * qh, s->QW, (int)n, qh);
    int rc = uly_exchange(s, g, w->send, w->recv, qh, what, err);
    if (rc) return rc;
    for (int p = 0; p < s->P; p++) part_rows(s, p, h, w->recv + p * blk, qh, true);
    return ZT_OK;
}

static int uly_forward(const cp_shape *s, const zt_unit_group *g, float *out, float *lse, float *scratch,
                       const float *q, const float *k, const float *v, int sq, int skv, zt_error *err) {
    uly_bufs w;
    uly_layout(s, scratch, &w);
    int W3 = head_width(s), NHp = s->NH / s->P, NKVp = s->NKV / s->P, qh = NHp * s->hs;
    int rc = uly_qkv_in(s, g, &w, q, k, v, sq, skv, err);
    if (rc) return rc;
    flash_attention_gqa_forward(w.ho, lse, w.kscr, w.hq, w.hq + qh, w.hq + qh + NKVp * s->hs, s->B, s->Tw, NHp, NKVp,
                                s->hs, W3, W3, s->bf16, s->pos);
    size_t n = (size_t)s->B * s->T, blk = n * qh;
    for (int p = 0; p < s->P; p++) part_rows(s, p, w.ho, w.send + p * blk, qh, false);
    if ((rc = uly_exchange(s, g, w.send, w.recv, qh, "context-parallel (ulysses) output all-to-all", err))) return rc;
    for (int p = 0; p < s->P; p++) copy_rows(out + (size_t)p * qh, s->QW, w.recv + p * blk, qh, (int)n, qh);
    return ZT_OK;
}

static int uly_backward(const cp_shape *s, const zt_unit_group *g, float *dq, float *dk, float *dv, float *scratch,
                        const float *dout, const float *q, const float *k, const float *v, const float *out,
                        const float *lse, int sq, int skv, zt_error *err) {
    uly_bufs w;
    uly_layout(s, scratch, &w);
    int W3 = head_width(s), NHp = s->NH / s->P, NKVp = s->NKV / s->P, qh = NHp * s->hs, kh = NKVp * s->hs;
    int rc;
    if ((rc = uly_heads_in(s, g, &w, dout, w.hdo, "context-parallel (ulysses) output gradient all-to-all", err)) ||
        (rc = uly_heads_in(s, g, &w, out, w.ho, "context-parallel (ulysses) output all-to-all, again", err)) ||
        (rc = uly_qkv_in(s, g, &w, q, k, v, sq, skv, err)))
        return rc;
    flash_attention_gqa_backward(w.hdq, w.hdq + qh, w.hdq + qh + kh, w.kscr, w.hdo, w.hq, w.hq + qh, w.hq + qh + kh,
                                 w.ho, lse, s->B, s->Tw, NHp, NKVp, s->hs, W3, W3, s->bf16, s->pos);
    size_t n = (size_t)s->B * s->T, blk = n * W3;
    for (int p = 0; p < s->P; p++) part_rows(s, p, w.hdq, w.send + p * blk, W3, false);
    if ((rc = uly_exchange(s, g, w.send, w.recv, W3, "context-parallel (ulysses) dq, dk, dv all-to-all", err)))
        return rc;
    for (int p = 0; p < s->P; p++) {
        const float *r = w.recv + p * blk;
        copy_rows(dq + (size_t)p * qh, sq, r, W3, (int)n, qh);
        copy_rows(dk + (size_t)p * kh, skv, r + qh, W3, (int)n, kh);
        copy_rows(dv + (size_t)p * kh, skv, r + qh + kh, W3, (int)n, kh);
    }
    return ZT_OK;
}

/* ---- the units' entry points ------------------------------------------------------------------ */

size_t zt_cp_attention_scratch_floats(const zt_unit *u, int B, int T, int NH, int NKV, int hs) {
    cp_shape s = {.P = u->cp_parts, .B = B, .T = T, .Tw = T * u->cp_parts, .c = T / 2, .NH = NH, .NKV = NKV, .hs = hs,
                  .QW = NH * hs, .KW = NKV * hs};
    if (u->cp_mode == ZT_CP_RING) return ring_layout(&s, NULL, &(ring_bufs){0});
    if (u->cp_mode == ZT_CP_ULYSSES) return uly_layout(&s, NULL, &(uly_bufs){0});
    return ag_layout(&s, NULL, &(ag_bufs){0});
}

int zt_cp_attention_forward(const zt_unit *u, const zt_unit_args *a, float *out, float *lse, float *scratch,
                            const float *q, const float *k, const float *v, int NH, int NKV, int hs, int sq, int skv,
                            zt_error *err) {
    cp_shape s;
    int rc = shape_of(u, a, NH, NKV, hs, &s, err);
    if (rc) return rc;
    if (u->cp_mode == ZT_CP_RING) return ring_forward(&s, a->group, out, lse, scratch, q, k, v, sq, skv, err);
    if (u->cp_mode == ZT_CP_ULYSSES) return uly_forward(&s, a->group, out, lse, scratch, q, k, v, sq, skv, err);
    return ag_forward(&s, a->group, out, lse, scratch, q, k, v, sq, skv, err);
}

int zt_cp_attention_backward(const zt_unit *u, const zt_unit_args *a, float *dq, float *dk, float *dv, float *scratch,
                             const float *dout, const float *q, const float *k, const float *v, const float *out,
                             const float *lse, int NH, int NKV, int hs, int sq, int skv, zt_error *err) {
    cp_shape s;
    int rc = shape_of(u, a, NH, NKV, hs, &s, err);
    if (rc) return rc;
    if (u->cp_mode == ZT_CP_RING)
        return ring_backward(&s, a->group, dq, dk, dv, scratch, dout, q, k, v, out, lse, sq, skv, err);
    if (u->cp_mode == ZT_CP_ULYSSES)
        return uly_backward(&s, a->group, dq, dk, dv, scratch, dout, q, k, v, out, lse, sq, skv, err);
    return ag_backward(&s, a->group, dq, dk, dv, scratch, dout, q, k, v, out, lse, sq, skv, err);
}
