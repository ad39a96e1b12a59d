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
 * [b][local chunk j][head][c rows]; ulysses the head split's by head group [g](B, NH/P/S, T_whole).
 * Each attention kernel call is a trace span (category "attention"; bench/cp_trace.py reads them
 * beside the "cp" spans, the time a part waits for its blocks).
 *
 *   allgather  forward: every part's k, v gathered into the whole sequence (B, T_whole, 2·KV);
 *              each local chunk attends to the keys up to its end (flash_attention_block_forward
 *              with k0 = 0: the rows of the one-process kernel, bit for bit, when the chunks are
 *              aligned, FLASH_BLOCK_ALIGN). backward: k, v gathered again; each chunk's dq, and its
 *              dk, dv over the keys it sees, summed over the chunks into the whole (B, T_whole,
 *              2·KV); each part's rows of that sum over the parts (the reduce's tree). Both
 *              pipelined over head groups (head_groups): every group's gather posted at once,
 *              group g's attention computing while the later groups' blocks move, and backward's
 *              reduce-scatter of group g posted as soon as its dk, dv are summed (moving while the
 *              next groups compute). Attention is per head: the same bits as one exchange.
 *   ring       forward: the part's k, v pass around the ring (P - 1 shifts, posted before each
 *              step's blocks compute, so they move while the tiles run); each visible (query
 *              chunk, key chunk) pair's out and lse merged into the result in ring order.
 *              backward: k, v around again with a dk, dv accumulator that travels with them
 *              (the kv shift overlapped with the step's blocks, the accumulator's after them),
 *              and one last shift takes every accumulator home.
 *   ulysses    all-to-all from the sequence split to a head split (each part: NH/P query heads,
 *              NKV/P key/value heads, every position), the one-process flash attention on them,
 *              and back; backward the same on dout, q, k, v, out, and dq, dk, dv back. Pipelined
 *              over groups of the part's heads as DeepSpeed-Ulysses/ALST do: every group's
 *              all-to-all posted at once, group g's attention computing while the later groups'
 *              blocks arrive, its output (dq, dk, dv) sent back while the next groups compute.
 * Every sum is in a fixed order (the chunks in order, the parts in the exchange's tree, the ring's
 * order), so a run is reproducible bit for bit; against one process the sums over key chunks (and
 * the weight gradients over the parts' rows) are grouped differently: tests/cp.sh bounds it. */
#include "zerotrain/zerotrain.h"
#include "core/env.h"
#include "kernels/kernels.h"
#include "model/layers.h"
#include "obs/trace.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

typedef struct cp_shape {
    int P, me, B, T, Tw, c, NH, NKV, hs, QW, KW;
    int S;                      /* head groups the exchanges are pipelined over (head_groups) */
    int mb[2];                  /* this part's chunks' whole-sequence starts */
    const int32_t *pos;         /* (B, Tw) or NULL */
    bool bf16;
} cp_shape;

static int head_groups(int nkv);

static int groups_of(const cp_shape *s, int mode) {
    if (mode == ZT_CP_ALLGATHER) return head_groups(s->NKV);
    if (mode == ZT_CP_ULYSSES) return s->NKV % s->P ? 1 : head_groups(s->NKV / s->P);
    return 1;
}

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
    s->S = groups_of(s, u->cp_mode);
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

/* ---- head groups: the pipeline of allgather's and ulysses' exchanges -------------------------- */

/* The exchanges are cut by head: group g holds nkv / S key/value heads (and their query heads),
 * and group g's attention computes while the later groups' blocks move. Attention is per head, so
 * the bits do not depend on S (ZT_CP_HEAD_GROUPS=1 is the unpipelined order: tests/cp.sh compares).
 * S: the largest of 4, 3, 2 dividing nkv that leaves the backward kernel as many key/value heads
 * per call as threads (its parallelism), else 1 (a property of the shapes and the process, not of
 * a batch: the memory plan sizes the buffers with it). The messages depend on S, so every part
 * must agree: they do when they run with the same thread count (or ZT_CP_HEAD_GROUPS); a
 * disagreement fails (a message of the wrong length, or one never matched: the deadline), it
 * never gives wrong numbers. */
int zt_cp_head_groups(int nkv, int threads) {
    const char *env = zt_env(ZT_ENV_CP_HEAD_GROUPS);
    if (env && *env) {
        int want = atoi(env);
        if (want >= 1 && want <= 4 && nkv % want == 0) return want;
        return 1;
    }
    for (int S = 4; S >= 2; S--)
        if (nkv % S == 0 && nkv / S >= threads) return S;
    return 1;
}

static int head_groups(int nkv) {
#ifdef _OPENMP
    return zt_cp_head_groups(nkv, omp_get_max_threads());
#else
    return zt_cp_head_groups(nkv, 1);
#endif
}

static void attn_span(const char *name) { zt_trace_begin("attention", name); }
static void attn_span_end(int group) {
    zt_trace_end_args(1, (zt_trace_arg[]){ZT_TARG_NUM("head_group", group)});
}

/* ---- allgather ------------------------------------------------------------------------------ */

/* Per head group g (S of them, KWg = KW / S, QWg = QW / S floats a row): mine [g](B,T,2KWg), stage
 * and stage2 [g][part](B,T,2KWg), kv_all and dkv_all [g](B,Tw,2KWg); ob: one group's out or dout
 * and out rows (c, QWg) each when S > 1. */
typedef struct ag_bufs {
    float *kv_all, *dkv_all, *mine, *stage, *stage2, *tmp, *ob, *kscr;
} ag_bufs;

static size_t ag_layout(const cp_shape *s, float *base, ag_bufs *o) {
    size_t whole = (size_t)s->B * s->Tw * 2 * s->KW, blk = kv_block(s);
    size_t sizes[] = {whole, whole, blk, (size_t)s->P * blk, (size_t)s->P * blk, (size_t)s->Tw * 2 * s->KW,
                      s->S > 1 ? 2 * (size_t)s->c * (s->QW / s->S) : 0,
                      flash_attention_block_scratch_floats(1, s->c, s->Tw, s->NH, s->NKV, s->hs)};
    float **ptrs[] = {&o->kv_all, &o->dkv_all, &o->mine, &o->stage, &o->stage2, &o->tmp, &o->ob, &o->kscr};
    return lay_out(base, sizes, ptrs, 8);
}

typedef struct ag_group {
    int NH, NKV, KW, QW, h0;        /* the group's heads, widths, first query head */
    size_t blk, whole;              /* floats of (B,T,2KW) and (B,Tw,2KW) */
    float *mine, *stage, *stage2, *kv_all, *dkv_all;
} ag_group;

static ag_group ag_group_of(const cp_shape *s, const ag_bufs *w, int g) {
    ag_group x = {.NH = s->NH / s->S, .NKV = s->NKV / s->S, .KW = s->KW / s->S, .QW = s->QW / s->S};
    x.h0 = g * x.NH;
    x.blk = kv_block(s) / s->S, x.whole = (size_t)s->B * s->Tw * 2 * x.KW;
    x.mine = w->mine + g * x.blk, x.stage = w->stage + (size_t)g * s->P * x.blk;
    x.stage2 = w->stage2 + (size_t)g * s->P * x.blk;
    x.kv_all = w->kv_all + g * x.whole, x.dkv_all = w->dkv_all + g * x.whole;
    return x;
}

/* posts the exchange of group g's k, v (this part's rows, packed into its mine) with every part */
static int ag_gather_post(const cp_shape *s, const zt_unit_group *gr, const ag_bufs *w, int g, const float *k,
                          const float *v, int skv, zt_error *err) {
    ag_group x = ag_group_of(s, w, g);
    size_t n = (size_t)s->B * s->T, off = (size_t)g * x.KW;
    copy_rows(x.mine, 2 * (size_t)x.KW, k + off, (size_t)skv, (int)n, x.KW);
    copy_rows(x.mine + x.KW, 2 * (size_t)x.KW, v + off, (size_t)skv, (int)n, x.KW);
    const void *send[ZT_CP_MAX_PARTS];
    void *recv[ZT_CP_MAX_PARTS];
    size_t bytes[ZT_CP_MAX_PARTS];
    for (int p = 0; p < s->P; p++) send[p] = x.mine, recv[p] = x.stage + p * x.blk, bytes[p] = x.blk * sizeof(float);
    return gr->cp_exchange_post(gr, g, send, bytes, recv, bytes, "context-parallel k, v all-gather", err);
}

/* waits for group g's blocks and lays every part's rows into the group's whole sequence */
static int ag_gather_wait(const cp_shape *s, const zt_unit_group *gr, const ag_bufs *w, int g, zt_error *err) {
    ag_group x = ag_group_of(s, w, g);
    int rc = gr->cp_exchange_wait(gr, g, err);
    if (rc) return rc;
    for (int p = 0; p < s->P; p++)
        part_rows(s, p, x.kv_all, p == s->me ? x.mine : x.stage + p * x.blk, 2 * x.KW, true);
    return ZT_OK;
}

/* after a failure with the slots [from, to) still posted: drain them (a reduce's slot too: its sum
 * is not wanted then), keep the first error */
static int drain(const zt_unit_group *gr, int from, int to, int rc) {
    for (int g = from; g < to; g++) {
        zt_error e2 = {0};
        gr->cp_exchange_wait(gr, g, &e2);
    }
    return rc;
}

static int ag_gather_all_post(const cp_shape *s, const zt_unit_group *gr, const ag_bufs *w, const float *k,
                              const float *v, int skv, zt_error *err) {
    for (int g = 0; g < s->S; g++) {
        int rc = ag_gather_post(s, gr, w, g, k, v, skv, err);
        if (rc) {
            return drain(gr, 0, g, rc);
        }
    }
    return ZT_OK;
}

static int ag_forward(const cp_shape *s, const zt_unit_group *gr, float *out, float *lse, float *scratch,
                      const float *q, const float *k, const float *v, int sq, int skv, zt_error *err) {
    ag_bufs w;
    ag_layout(s, scratch, &w);
    int rc = ag_gather_all_post(s, gr, &w, k, v, skv, err);
    if (rc) return rc;
    for (int g = 0; g < s->S; g++) {
        if ((rc = ag_gather_wait(s, gr, &w, g, err))) return drain(gr, g + 1, s->S, rc);
        ag_group x = ag_group_of(s, &w, g);
        size_t KW2 = 2 * (size_t)x.KW;
        attn_span("allgather forward");
        for (int b = 0; b < s->B; b++)
            for (int j = 0; j < 2; j++) {
                size_t row = (size_t)b * s->T + (size_t)j * s->c;
                const float *kb = x.kv_all + (size_t)b * s->Tw * KW2;
                float *o = s->S > 1 ? w.ob : out + row * s->QW;
                flash_attention_block_forward(o, lse + ((size_t)b * 2 + j) * s->NH * s->c + (size_t)x.h0 * s->c, w.kscr,
                                              q + row * sq + (size_t)x.h0 * s->hs, kb, kb + x.KW, 1, s->mb[j], s->c, 0,
                                              s->mb[j] + s->c, x.NH, x.NKV, s->hs, sq, (int)KW2, s->bf16,
                                              s->pos ? s->pos + (size_t)b * s->Tw : NULL, s->Tw);
                if (s->S > 1) copy_rows(out + row * s->QW + (size_t)x.h0 * s->hs, s->QW, w.ob, x.QW, s->c, x.QW);
            }
        attn_span_end(g);
    }
    return ZT_OK;
}

static int ag_backward(const cp_shape *s, const zt_unit_group *gr, float *dq, float *dk, float *dv, float *scratch,
                       const float *dout, const float *q, const float *k, const float *v, const float *out,
                       const float *lse, int sq, int skv, zt_error *err) {
    ag_bufs w;
    ag_layout(s, scratch, &w);
    int rc = ag_gather_all_post(s, gr, &w, k, v, skv, err);
    if (rc) return rc;
    memset(w.dkv_all, 0, (size_t)s->B * s->Tw * 2 * s->KW * sizeof(float));
    zero_rows(dq, (size_t)sq, s->B * s->T, s->QW);
    /* slots: the gathers 0 .. S-1, the reduce-scatters S .. 2S-1 */
    for (int g = 0; g < s->S; g++) {
        if ((rc = ag_gather_wait(s, gr, &w, g, err)))
            return drain(gr, s->S, s->S + g, drain(gr, g + 1, s->S, rc));
        ag_group x = ag_group_of(s, &w, g);
        size_t KW2 = 2 * (size_t)x.KW;
        attn_span("allgather backward");
        for (int b = 0; b < s->B; b++)
            for (int j = 0; j < 2; j++) {
                size_t row = (size_t)b * s->T + (size_t)j * s->c;
                int n = s->mb[j] + s->c; /* the keys this chunk sees */
                const float *kb = x.kv_all + (size_t)b * s->Tw * KW2;
                const float *dob = dout + row * s->QW, *ob = out + row * s->QW;
                if (s->S > 1) { /* the group's columns of dout and out, rows of QWg */
                    copy_rows(w.ob, x.QW, dob + (size_t)x.h0 * s->hs, s->QW, s->c, x.QW);
                    copy_rows(w.ob + (size_t)s->c * x.QW, x.QW, ob + (size_t)x.h0 * s->hs, s->QW, s->c, x.QW);
                    dob = w.ob, ob = w.ob + (size_t)s->c * x.QW;
                }
                flash_attention_block_backward(dq + row * sq + (size_t)x.h0 * s->hs, w.tmp, w.tmp + x.KW, w.kscr, dob,
                                               q + row * sq + (size_t)x.h0 * s->hs, kb, kb + x.KW, ob,
                                               lse + ((size_t)b * 2 + j) * s->NH * s->c + (size_t)x.h0 * s->c, 1,
                                               s->mb[j], s->c, 0, n, x.NH, x.NKV, s->hs, sq, (int)KW2, s->bf16,
                                               s->pos ? s->pos + (size_t)b * s->Tw : NULL, s->Tw);
                float *acc = x.dkv_all + (size_t)b * s->Tw * KW2;
                for (size_t i = 0; i < (size_t)n * KW2; i++) acc[i] += w.tmp[i];
            }
        attn_span_end(g);
        /* each part's rows of the group's sum over the parts, moving while the next group computes
         * (the gather's stage of this group is free now: it becomes the sends) */
        const float *send[ZT_CP_MAX_PARTS];
        for (int p = 0; p < s->P; p++) {
            part_rows(s, p, x.dkv_all, x.stage + p * x.blk, (int)KW2, false);
            send[p] = x.stage + p * x.blk;
        }
        if ((rc = gr->cp_reduce_post(gr, s->S + g, send, x.blk, x.stage2, "context-parallel dk, dv reduce-scatter",
                                     err)))
            return drain(gr, s->S, s->S + g, drain(gr, g + 1, s->S, rc));
    }
    for (int g = 0; g < s->S; g++) {
        ag_group x = ag_group_of(s, &w, g);
        if ((rc = gr->cp_reduce_wait(gr, s->S + g, x.mine, err)))
            return drain(gr, s->S + g + 1, 2 * s->S, rc);
        size_t n = (size_t)s->B * s->T, off = (size_t)g * x.KW;
        copy_rows(dk + off, (size_t)skv, x.mine, 2 * (size_t)x.KW, (int)n, x.KW);
        copy_rows(dv + off, (size_t)skv, x.mine + x.KW, 2 * (size_t)x.KW, (int)n, x.KW);
    }
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
        attn_span("ring forward");
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
        attn_span_end(step);
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
        attn_span("ring backward");
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
        attn_span_end(step);
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

/* A part's heads (NH/P query, NKV/P key/value heads) in S groups; group g's blocks to and from part
 * p are (n = B·T rows) x the group's widths, laid out [g][p]. send and recv hold q, k, v (forward)
 * or dout, out, q, k, v (backward: three sub-blocks a group and part) in flight for every group at
 * once; hq, ho, hdo, hdq the head split's whole sequences [g](B, Tw, width); the output's (and
 * dq, dk, dv's) way back reuses a group's regions once its own blocks have landed. */
typedef struct uly_bufs {
    float *send, *recv, *hq, *ho, *hdo, *hdq, *kscr;
} uly_bufs;

typedef struct uly_group {
    int NH, NKV, qh, kh, W3;       /* the group's heads and widths (W3 = qh + 2kh) */
    int q0, k0;                    /* part p's first query / key-value head of the group: p·NH/P + q0 */
    size_t n;                      /* B·T rows of a part */
} uly_group;

static uly_group uly_group_of(const cp_shape *s, int g) {
    uly_group x = {.NH = s->NH / s->P / s->S, .NKV = s->NKV / s->P / s->S, .n = (size_t)s->B * s->T};
    x.qh = x.NH * s->hs, x.kh = x.NKV * s->hs, x.W3 = x.qh + 2 * x.kh;
    x.q0 = g * x.NH, x.k0 = g * x.NKV;
    return x;
}

static size_t uly_layout(const cp_shape *s, float *base, uly_bufs *o) {
    size_t qkv = (size_t)s->B * s->T * (s->NH + 2 * s->NKV) * s->hs, oo = (size_t)s->B * s->T * s->QW;
    size_t sizes[] = {qkv + 2 * oo, qkv + 2 * oo, qkv, oo, oo, qkv,
                      flash_attention_scratch_floats(s->B, s->Tw, s->NH / s->P / s->S, s->NKV / s->P / s->S, s->hs)};
    float **ptrs[] = {&o->send, &o->recv, &o->hq, &o->ho, &o->hdo, &o->hdq, &o->kscr};
    return lay_out(base, sizes, ptrs, 7);
}

/* Posts slot `slot`: block p of width w (at base + p·n·w) to part p, part p's into rbase + p·n·w
 * (this part's own block stays where it is: the readers take it from the send side). */
static int uly_post(const cp_shape *s, const zt_unit_group *gr, int slot, float *base, float *rbase, size_t blk,
                    const char *what, zt_error *err) {
    const void *sp[ZT_CP_MAX_PARTS];
    void *rp[ZT_CP_MAX_PARTS];
    size_t bytes[ZT_CP_MAX_PARTS];
    for (int p = 0; p < s->P; p++) sp[p] = base + p * blk, rp[p] = rbase + p * blk, bytes[p] = blk * sizeof(float);
    return gr->cp_exchange_post(gr, slot, sp, bytes, rp, bytes, what, err);
}

/* part p's q, k, v columns of group g (rows of x.W3) into d */
static void uly_pack_qkv(const cp_shape *s, const uly_group *x, int p, float *d, const float *q, const float *k,
                         const float *v, int sq, int skv) {
    int qa = (p * s->NH / s->P + x->q0) * s->hs, ka = (p * s->NKV / s->P + x->k0) * s->hs;
    copy_rows(d, x->W3, q + qa, sq, (int)x->n, x->qh);
    copy_rows(d + x->qh, x->W3, k + ka, skv, (int)x->n, x->kh);
    copy_rows(d + x->qh + x->kh, x->W3, v + ka, skv, (int)x->n, x->kh);
}

/* every part's rows of a group's blocks (at blocks + p·blk, this part's at mine) into the whole h */
static void uly_assemble(const cp_shape *s, float *h, const float *blocks, const float *mine, size_t blk, int w) {
    for (int p = 0; p < s->P; p++) part_rows(s, p, h, (float *)(p == s->me ? mine : blocks + p * blk), w, true);
}

static int uly_forward(const cp_shape *s, const zt_unit_group *gr, float *out, float *lse, float *scratch,
                       const float *q, const float *k, const float *v, int sq, int skv, zt_error *err) {
    uly_bufs w;
    uly_layout(s, scratch, &w);
    uly_group x = uly_group_of(s, 0);
    size_t gin = (size_t)s->P * x.n * x.W3, gout = (size_t)s->P * x.n * x.qh; /* a group's floats each way */
    size_t hin = (size_t)s->B * s->Tw * x.W3, hout = (size_t)s->B * s->Tw * x.qh;
    int rc;
    /* slots: q, k, v in 0 .. S-1, the output back S .. 2S-1 */
    for (int g = 0; g < s->S; g++) {
        x = uly_group_of(s, g);
        for (int p = 0; p < s->P; p++) uly_pack_qkv(s, &x, p, w.send + g * gin + p * x.n * x.W3, q, k, v, sq, skv);
        if ((rc = uly_post(s, gr, g, w.send + g * gin, w.recv + g * gin, x.n * x.W3,
                           "context-parallel (ulysses) q, k, v all-to-all", err)))
            return drain(gr, 0, g, rc);
    }
    for (int g = 0; g < s->S; g++) {
        x = uly_group_of(s, g);
        float *hq = w.hq + g * hin, *ho = w.ho + g * hout, *osend = w.hdo + g * gout, *orecv = w.hdq + g * gout;
        if ((rc = gr->cp_exchange_wait(gr, g, err))) return drain(gr, s->S, s->S + g, drain(gr, g + 1, s->S, rc));
        uly_assemble(s, hq, w.recv + g * gin, w.send + g * gin + s->me * x.n * x.W3, x.n * x.W3, x.W3);
        attn_span("ulysses forward");
        flash_attention_gqa_forward(ho, lse + (size_t)g * s->B * x.NH * s->Tw, w.kscr, hq, hq + x.qh, hq + x.qh + x.kh,
                                    s->B, s->Tw, x.NH, x.NKV, s->hs, x.W3, x.W3, s->bf16, s->pos);
        attn_span_end(g);
        for (int p = 0; p < s->P; p++) part_rows(s, p, ho, osend + p * x.n * x.qh, x.qh, false);
        if ((rc = uly_post(s, gr, s->S + g, osend, orecv, x.n * x.qh, "context-parallel (ulysses) output all-to-all",
                           err)))
            return drain(gr, s->S, s->S + g, drain(gr, g + 1, s->S, rc));
    }
    for (int g = 0; g < s->S; g++) {
        x = uly_group_of(s, g);
        if ((rc = gr->cp_exchange_wait(gr, s->S + g, err))) return drain(gr, s->S + g + 1, 2 * s->S, rc);
        const float *osend = w.hdo + g * gout, *orecv = w.hdq + g * gout;
        for (int p = 0; p < s->P; p++)
            copy_rows(out + (size_t)(p * s->NH / s->P + x.q0) * s->hs, s->QW,
                      (p == s->me ? osend : orecv) + p * x.n * x.qh, x.qh, (int)x.n, x.qh);
    }
    return ZT_OK;
}

static int uly_backward(const cp_shape *s, const zt_unit_group *gr, float *dq, float *dk, float *dv, float *scratch,
                        const float *dout, const float *q, const float *k, const float *v, const float *out,
                        const float *lse, int sq, int skv, zt_error *err) {
    uly_bufs w;
    uly_layout(s, scratch, &w);
    uly_group x = uly_group_of(s, 0);
    size_t bw = (size_t)2 * x.qh + x.W3;                 /* a block's row: dout | out | q, k, v */
    size_t gin = (size_t)s->P * x.n * bw, blk = x.n * bw; /* a group's floats, a part's block */
    size_t hin = (size_t)s->B * s->Tw * x.W3, hout = (size_t)s->B * s->Tw * x.qh;
    int rc;
    /* slots: dout, out, q, k, v in 0 .. S-1, dq, dk, dv back S .. 2S-1 */
    for (int g = 0; g < s->S; g++) {
        x = uly_group_of(s, g);
        for (int p = 0; p < s->P; p++) {
            float *d = w.send + g * gin + p * blk;
            int qa = (p * s->NH / s->P + x.q0) * s->hs;
            copy_rows(d, x.qh, dout + qa, s->QW, (int)x.n, x.qh);
            copy_rows(d + x.n * x.qh, x.qh, out + qa, s->QW, (int)x.n, x.qh);
            uly_pack_qkv(s, &x, p, d + 2 * x.n * x.qh, q, k, v, sq, skv);
        }
        if ((rc = uly_post(s, gr, g, w.send + g * gin, w.recv + g * gin, blk,
                           "context-parallel (ulysses) dout, out, q, k, v all-to-all", err)))
            return drain(gr, 0, g, rc);
    }
    for (int g = 0; g < s->S; g++) {
        x = uly_group_of(s, g);
        float *hq = w.hq + g * hin, *ho = w.ho + g * hout, *hdo = w.hdo + g * hout, *hdq = w.hdq + g * hin;
        float *sendg = w.send + g * gin, *recvg = w.recv + g * gin;
        if ((rc = gr->cp_exchange_wait(gr, g, err))) return drain(gr, s->S, s->S + g, drain(gr, g + 1, s->S, rc));
        for (int p = 0; p < s->P; p++) {
            const float *b = (p == s->me ? sendg : recvg) + p * blk;
            part_rows(s, p, hdo, (float *)b, x.qh, true);
            part_rows(s, p, ho, (float *)b + x.n * x.qh, x.qh, true);
            part_rows(s, p, hq, (float *)b + 2 * x.n * x.qh, x.W3, true);
        }
        attn_span("ulysses backward");
        flash_attention_gqa_backward(hdq, hdq + x.qh, hdq + x.qh + x.kh, w.kscr, hdo, hq, hq + x.qh, hq + x.qh + x.kh,
                                     ho, lse + (size_t)g * s->B * x.NH * s->Tw, s->B, s->Tw, x.NH, x.NKV, s->hs, x.W3,
                                     x.W3, s->bf16, s->pos);
        attn_span_end(g);
        /* the group's regions are free now: dq, dk, dv go back through them */
        for (int p = 0; p < s->P; p++) part_rows(s, p, hdq, sendg + p * x.n * x.W3, x.W3, false);
        if ((rc = uly_post(s, gr, s->S + g, sendg, recvg, x.n * x.W3,
                           "context-parallel (ulysses) dq, dk, dv all-to-all", err)))
            return drain(gr, s->S, s->S + g, drain(gr, g + 1, s->S, rc));
    }
    for (int g = 0; g < s->S; g++) {
        x = uly_group_of(s, g);
        if ((rc = gr->cp_exchange_wait(gr, s->S + g, err))) return drain(gr, s->S + g + 1, 2 * s->S, rc);
        for (int p = 0; p < s->P; p++) {
            const float *r = (p == s->me ? w.send : w.recv) + g * gin + p * x.n * x.W3;
            int qa = (p * s->NH / s->P + x.q0) * s->hs, ka = (p * s->NKV / s->P + x.k0) * s->hs;
            copy_rows(dq + qa, sq, r, x.W3, (int)x.n, x.qh);
            copy_rows(dk + ka, skv, r + x.qh, x.W3, (int)x.n, x.kh);
            copy_rows(dv + ka, skv, r + x.qh + x.kh, x.W3, (int)x.n, x.kh);
        }
    }
    return ZT_OK;
}

/* ---- the units' entry points ------------------------------------------------------------------ */

size_t zt_cp_attention_scratch_floats(const zt_unit *u, int B, int T, int NH, int NKV, int hs) {
    cp_shape s = {.P = u->cp_parts, .B = B, .T = T, .Tw = T * u->cp_parts, .c = T / 2, .NH = NH, .NKV = NKV, .hs = hs,
                  .QW = NH * hs, .KW = NKV * hs};
    s.S = groups_of(&s, u->cp_mode);
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
