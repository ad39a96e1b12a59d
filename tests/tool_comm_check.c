/* tool_comm_check.c - the multi-rank check of src/comm/, driven by tests/comm_collectives.sh.
 * Run under mpirun with any rank count (or alone: a 1-rank singleton).
 *
 *   tool_comm_check              every collective against a local reference computed in the same
 *                                tree order (memcmp), uneven and empty blocks, in-place forms,
 *                                multi-chunk pipelines, non-blocking ops, byte counters against
 *                                the formulas, error paths; the reductions in fp32, bf16 and
 *                                fp16 (reference: the same tree, each partial sum rounded by a
 *                                scalar rounding written here; 2 bytes per element on the
 *                                wire; fp16 overflow to infinity); prints "digest <rank> <hex>" (XXH64 of every result) so
 *                                two runs can be compared bit for bit
 *   tool_comm_check --timeout    one rank skips collectives; the others must fail with
 *                                ZT_ERR_PEER within the 2 s deadline, naming that rank
 *
 * Inputs are pure functions of (rank, block, index), so every rank can compute every other
 * rank's contribution and the expected result locally. Exit status: 0 all passed, 1 otherwise.
 */
#include "comm/comm.h"

#include <math.h>
#include <mpi.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

static int g_rank, g_size, g_fail, g_checks;
static XXH64_state_t *g_digest;

#define CHECK(cond, ...)                                                                 \
    do {                                                                                 \
        g_checks++;                                                                      \
        if (!(cond)) {                                                                   \
            g_fail++;                                                                    \
            fprintf(stderr, "rank %d: FAIL %s:%d: ", g_rank, __FILE__, __LINE__);        \
            fprintf(stderr, __VA_ARGS__);                                                \
            fputc('\n', stderr);                                                         \
        }                                                                                \
    } while (0)

static uint64_t mix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* 2^k as a double, built from its bits (k in [-1022, 1023]): x * p2(k) is ldexp(x, k) wherever the
 * result is a normal number, as every use below is (values within fp16's and float's range), and
 * costs a multiplication instead of a libm call (ldexp was most of this tool's CPU time) */
static double p2(int k) {
    uint64_t u = (uint64_t)(k + 1023) << 52;
    double d;
    memcpy(&d, &u, 8);
    return d;
}
/* frexp's exponent of a positive normal double or of zero (zero gives -1022, which rounds to
 * zero below just as frexp's 0 does) */
static int exp_of(double a) {
    uint64_t u;
    memcpy(&u, &a, 8);
    return (int)((u >> 52) & 0x7ff) - 1022;
}

/* Rank r's value at index i of a buffer labelled `what`: mixed signs and exponents so that the
 * order of additions shows in the low bits. */
static float val(uint64_t what, int r, size_t i) {
    uint64_t h = mix(what * 1000003u ^ mix((uint64_t)r * 7919u + 1) ^ (uint64_t)i * 0x100000001b3ULL);
    float m = (float)(h & 0xffffff) / (float)0x1000000 + 0.5f;
    int e = (int)((h >> 24) % 24) - 12;
    return ((h >> 40) & 1 ? -1.0f : 1.0f) * (m * (float)p2(e)); /* ldexpf(m, e), exactly */
}

/* the pairwise tree over x[lo..hi), scalar, as specified */
static float tree_ref(const float *x, int lo, int hi) {
    if (hi - lo == 1) return x[lo];
    int mid = lo + (hi - lo) / 2;
    return tree_ref(x, lo, mid) + tree_ref(x, mid, hi);
}

/* bf16 by hand (not the library's code): nearest-even, subnormals to signed zero, quiet NaN */
static uint16_t bf16_of(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    if ((u & 0x7f800000u) == 0) return (uint16_t)((u >> 16) & 0x8000u);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
static float f_of_bf16(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
/* fp16 by hand: nearest-even on the value (11 significant bits, ulp 2^-24 in the subnormals),
 * infinity from 65520 on; finite inputs only */
static uint16_t fp16_of(float f) {
    uint16_t sign = signbit(f) ? 0x8000 : 0;
    double a = fabs((double)f);
    if (a >= 65520.0) return sign | 0x7c00;
    int e = exp_of(a);                                     /* a = 0.m x 2^e */
    int q = e - 11 < -24 ? -24 : e - 11;
    double r = nearbyint(a * p2(-q)); /* integer count of ulps, ties to even */
    if (r == 0) return sign;
    double v = r * p2(q);
    if (v < 0x1p-14) return sign | (uint16_t)(v * p2(24)); /* subnormal */
    e = exp_of(v);                                         /* v = 0.m x 2^e, e - 1 = the exponent */
    return sign | (uint16_t)((e - 1 + 15) << 10) | (uint16_t)(v * p2(11 - e) - 1024);
}
static float f_of_fp16(uint16_t h) {
    int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double v = e == 31 ? INFINITY : e == 0 ? m * p2(-24) : (1024 + m) * p2(e - 25);
    return (float)(h & 0x8000 ? -v : v);
}
static uint16_t half_of(zt_dtype dt, float f) { return dt == ZT_DTYPE_FP16 ? fp16_of(f) : bf16_of(f); }
static float f_of_half(zt_dtype dt, uint16_t h) { return dt == ZT_DTYPE_FP16 ? f_of_fp16(h) : f_of_bf16(h); }
/* the tree with every partial sum rounded to bf16 or fp16 (x holds values of that format) */
static float tree_ref_half(zt_dtype dt, const float *x, int lo, int hi) {
    if (hi - lo == 1) return x[lo];
    int mid = lo + (hi - lo) / 2;
    return f_of_half(dt, half_of(dt, tree_ref_half(dt, x, lo, mid) + tree_ref_half(dt, x, mid, hi)));
}
static float tree_ref_bf16(const float *x, int lo, int hi) { return tree_ref_half(ZT_DTYPE_BF16, x, lo, hi); }
/* rank r's contribution in bf16 or fp16: val rounded */
static uint16_t val_half(zt_dtype dt, uint64_t what, int r, size_t i) { return half_of(dt, val(what, r, i)); }
static uint16_t val_bf16(uint64_t what, int r, size_t i) { return bf16_of(val(what, r, i)); }

static void digest(const void *p, size_t bytes) { XXH64_update(g_digest, p, bytes); }

static size_t sum_counts(const size_t *c, int n) {
    size_t t = 0;
    for (int j = 0; j < n; j++) t += c[j];
    return t;
}

static zt_coll_counters delta(zt_comm *c, int kind) {
    zt_comm_counters k;
    zt_comm_counters_get(c, &k);
    zt_comm_counters_reset(c);
    return k.kind[kind];
}

/* ---- zt_tree_sum_f32 on its own -------------------------------------------------------------- */
static void check_tree_sum(void) {
    enum { MAXP = 9, MAXN = 1500 };
    static float in[MAXP][MAXN], out[MAXN], ref[MAXN];
    size_t ns[] = {0, 1, 7, 512, 513, 1500};
    for (int np = 1; np <= MAXP; np++)
        for (size_t t = 0; t < sizeof ns / sizeof ns[0]; t++) {
            size_t n = ns[t];
            const float *parts[MAXP];
            for (int k = 0; k < np; k++) {
                for (size_t i = 0; i < n; i++) in[k][i] = val(1, k, i);
                parts[k] = in[k];
            }
            for (size_t i = 0; i < n; i++) {
                float x[MAXP];
                for (int k = 0; k < np; k++) x[k] = in[k][i];
                ref[i] = tree_ref(x, 0, np);
            }
            zt_tree_sum_f32(out, parts, np, n);
            CHECK(!memcmp(out, ref, n * sizeof(float)), "tree_sum nparts=%d n=%zu", np, n);
            for (int a = 0; a < np; a++) { /* out aliasing each part */
                static float save[MAXN];
                memcpy(save, in[a], n * sizeof(float));
                zt_tree_sum_f32(in[a], parts, np, n);
                CHECK(!memcmp(in[a], ref, n * sizeof(float)), "tree_sum alias part %d of %d n=%zu", a,
                      np, n);
                memcpy(in[a], save, n * sizeof(float));
            }
        }
    /* the order is really the tree: for these, a left fold gives other bits */
    float x3[3] = {1.0f, 1e8f, -1e8f}, x4[4] = {1e8f, 1.0f, -1e8f, 1.0f};
    CHECK(tree_ref(x3, 0, 3) == 1.0f && (x3[0] + x3[1]) + x3[2] == 0.0f, "crafted 3");
    CHECK(tree_ref(x4, 0, 4) == 0.0f && ((x4[0] + x4[1]) + x4[2]) + x4[3] == 1.0f, "crafted 4");
    const float *p3[3] = {&x3[0], &x3[1], &x3[2]}, *p4[4] = {&x4[0], &x4[1], &x4[2], &x4[3]};
    float o;
    zt_tree_sum_f32(&o, p3, 3, 1);
    CHECK(o == 1.0f, "tree_sum crafted 3 gave %g", o);
    zt_tree_sum_f32(&o, p4, 4, 1);
    CHECK(o == 0.0f, "tree_sum crafted 4 gave %g", o);
}

/* ---- zt_tree_sum_bf16 on its own ------------------------------------------------------------- */
static void check_tree_sum_bf16(void) {
    enum { MAXP = 9, MAXN = 1500 };
    static uint16_t in[MAXP][MAXN], out[MAXN], ref[MAXN];
    size_t ns[] = {0, 1, 7, 17, 512, 513, 1500};
    for (int np = 1; np <= MAXP; np++)
        for (size_t t = 0; t < sizeof ns / sizeof ns[0]; t++) {
            size_t n = ns[t];
            const uint16_t *parts[MAXP];
            for (int k = 0; k < np; k++) {
                for (size_t i = 0; i < n; i++) in[k][i] = val_bf16(2, k, i);
                parts[k] = in[k];
            }
            for (size_t i = 0; i < n; i++) {
                float x[MAXP];
                for (int k = 0; k < np; k++) x[k] = f_of_bf16(in[k][i]);
                ref[i] = bf16_of(tree_ref_bf16(x, 0, np));
            }
            zt_tree_sum_bf16(out, parts, np, n);
            CHECK(!memcmp(out, ref, n * sizeof *out), "tree_sum_bf16 nparts=%d n=%zu", np, n);
            for (int a = 0; a < np; a++) { /* out aliasing each part */
                static uint16_t save[MAXN];
                memcpy(save, in[a], n * sizeof *save);
                zt_tree_sum_bf16(in[a], parts, np, n);
                CHECK(!memcmp(in[a], ref, n * sizeof *ref), "tree_sum_bf16 alias part %d of %d n=%zu", a, np, n);
                memcpy(in[a], save, n * sizeof *save);
            }
        }
    /* every partial sum is rounded, not just the result: 1 + 2^-8 is a tie that rounds to 1, so
     * ((1 + 2^-8) + (2^-8 + 0)) is 1 in bf16 steps, while the fp32 sum rounded once is 1 + 2^-7 */
    float x4[4] = {1.0f, 0x1p-8f, 0x1p-8f, 0.0f};
    uint16_t h4[4], o;
    const uint16_t *p4[4];
    for (int k = 0; k < 4; k++) h4[k] = bf16_of(x4[k]), p4[k] = &h4[k];
    zt_tree_sum_bf16(&o, p4, 4, 1);
    CHECK(f_of_bf16(o) == 1.0f && tree_ref(x4, 0, 4) == 1.0f + 0x1p-7f, "tree_sum_bf16 crafted gave %g",
          (double)f_of_bf16(o));
    /* overflow rounds to infinity, and a NaN stays a NaN */
    uint16_t big[2] = {bf16_of(3e38f), bf16_of(3e38f)}, nan2[2] = {bf16_of(NAN), bf16_of(1.0f)};
    const uint16_t *pb[2] = {&big[0], &big[1]}, *pn[2] = {&nan2[0], &nan2[1]};
    zt_tree_sum_bf16(&o, pb, 2, 1);
    CHECK(isinf(f_of_bf16(o)), "tree_sum_bf16 overflow gave %g", (double)f_of_bf16(o));
    zt_tree_sum_bf16(&o, pn, 2, 1);
    CHECK(isnan(f_of_bf16(o)), "tree_sum_bf16 NaN gave %g", (double)f_of_bf16(o));
}

/* ---- zt_tree_sum_fp16 on its own: the hand-rounded reference, overflow to infinity ------------- */
static void check_tree_sum_fp16(void) {
    enum { MAXP = 9, MAXN = 600 };
    static uint16_t in[MAXP][MAXN], out[MAXN], ref[MAXN];
    size_t ns[] = {1, 17, 600};
    for (int np = 1; np <= MAXP; np++)
        for (size_t t = 0; t < sizeof ns / sizeof ns[0]; t++) {
            size_t n = ns[t];
            const uint16_t *parts[MAXP];
            for (int k = 0; k < np; k++) {
                /* a tenth of the elements tiny (subnormal sums), the rest val's range */
                for (size_t i = 0; i < n; i++) in[k][i] = fp16_of(val(3, k, i) * (i % 10 ? 1.0f : 0x1p-12f));
                parts[k] = in[k];
            }
            for (size_t i = 0; i < n; i++) {
                float x[MAXP];
                for (int k = 0; k < np; k++) x[k] = f_of_fp16(in[k][i]);
                ref[i] = fp16_of(tree_ref_half(ZT_DTYPE_FP16, x, 0, np));
            }
            zt_tree_sum_fp16(out, parts, np, n);
            CHECK(!memcmp(out, ref, n * sizeof *out), "tree_sum_fp16 nparts=%d n=%zu", np, n);
        }
    /* the values round-trip through the hand code (the encoder is checked against itself) */
    uint32_t bad_h = 0, nbad = 0;
    for (uint32_t h = 0; h < 0x7c00; h++)
        if (fp16_of(f_of_fp16((uint16_t)h)) != h) bad_h = h, nbad++;
    CHECK(nbad == 0, "fp16 by hand: %u patterns do not round-trip (e.g. %x)", nbad, bad_h);
    /* 40000 + 40000 is past 65504: infinity, and infinity stays through the rest of the tree */
    uint16_t big[3] = {fp16_of(40000.0f), fp16_of(40000.0f), fp16_of(-1.0f)}, o;
    const uint16_t *pb[3] = {&big[1], &big[0], &big[2]}, *p2[2] = {&big[0], &big[1]};
    zt_tree_sum_fp16(&o, p2, 2, 1);
    CHECK(o == 0x7c00, "tree_sum_fp16 overflow gave %x", o);
    zt_tree_sum_fp16(&o, pb, 3, 1); /* 40000 + (40000 + -1): overflows at the root */
    CHECK(o == 0x7c00, "tree_sum_fp16 overflow at the root gave %x", o);
}

/* ---- reduce-scatter -------------------------------------------------------------------------- */
static void check_rs(zt_comm *c, const size_t *counts, uint64_t what, bool in_place, bool nb) {
    int N = g_size, me = g_rank;
    size_t total = sum_counts(counts, N), off = sum_counts(counts, me), n = counts[me];
    float *send = malloc((total + 1) * sizeof(float)), *recv = malloc((n + 1) * sizeof(float));
    float *ref = malloc((n + 1) * sizeof(float)), *x = malloc((size_t)N * sizeof(float));
    for (size_t i = 0; i < total; i++) send[i] = val(what, me, i);
    for (size_t i = 0; i < n; i++) {
        for (int r = 0; r < N; r++) x[r] = val(what, r, off + i);
        ref[i] = tree_ref(x, 0, N);
    }
    zt_error err = {0};
    zt_comm_counters_reset(c);
    float *dst = in_place ? send + off : recv;
    int rc;
    if (nb) {
        zt_comm_op *op;
        rc = zt_reduce_scatter_f32_start(c, send, dst, counts, "check rs", &op, &err);
        bool done = false;
        for (int spins = 0; !rc && !done && spins < 3; spins++) rc = zt_comm_op_test(op, &done, &err);
        if (!rc && !done) rc = zt_comm_op_wait(op, &err);
    } else {
        rc = zt_reduce_scatter_f32(c, send, dst, counts, "check rs", &err);
    }
    CHECK(rc == ZT_OK, "reduce_scatter: %s", err.msg);
    CHECK(!memcmp(dst, ref, n * sizeof(float)), "reduce_scatter %llu result (n=%zu in_place=%d)",
          (unsigned long long)what, n, in_place);
    zt_coll_counters k = delta(c, ZT_COLL_REDUCE_SCATTER);
    CHECK(k.calls == 1 && k.bytes_sent == (total - n) * 4 && k.bytes_recv == (size_t)(N - 1) * n * 4,
          "reduce_scatter counters: calls %llu sent %llu (want %zu) recv %llu (want %zu)",
          (unsigned long long)k.calls, (unsigned long long)k.bytes_sent, (total - n) * 4,
          (unsigned long long)k.bytes_recv, (size_t)(N - 1) * n * 4);
    digest(dst, n * sizeof(float));
    free(send), free(recv), free(ref), free(x);
}

/* the same in bf16 or fp16: contributions rounded, the tree rounding every partial sum, 2 bytes
 * per element on the wire */
static void check_rs_half(zt_dtype dt, zt_comm *c, const size_t *counts, uint64_t what, bool in_place, bool nb) {
    int N = g_size, me = g_rank;
    const char *dn = zt_dtype_name(dt);
    size_t total = sum_counts(counts, N), off = sum_counts(counts, me), n = counts[me];
    uint16_t *send = malloc((total + 1) * 2), *recv = malloc((n + 1) * 2), *ref = malloc((n + 1) * 2);
    float *x = malloc((size_t)N * sizeof(float));
    for (size_t i = 0; i < total; i++) send[i] = val_half(dt, what, me, i);
    for (size_t i = 0; i < n; i++) {
        for (int r = 0; r < N; r++) x[r] = f_of_half(dt, val_half(dt, what, r, off + i));
        ref[i] = half_of(dt, tree_ref_half(dt, x, 0, N));
    }
    zt_error err = {0};
    zt_comm_counters_reset(c);
    uint16_t *dst = in_place ? send + off : recv;
    int rc;
    if (nb) {
        zt_comm_op *op;
        rc = zt_reduce_scatter_start(c, dt, send, dst, counts, "check rs half", &op, &err);
        if (!rc) rc = zt_comm_op_wait(op, &err);
    } else {
        rc = zt_reduce_scatter(c, dt, send, dst, counts, "check rs half", &err);
    }
    CHECK(rc == ZT_OK, "reduce_scatter %s: %s", dn, err.msg);
    CHECK(!memcmp(dst, ref, n * 2), "reduce_scatter %s %llu result (n=%zu in_place=%d)", dn, (unsigned long long)what,
          n, in_place);
    zt_coll_counters k = delta(c, ZT_COLL_REDUCE_SCATTER);
    CHECK(k.calls == 1 && k.bytes_sent == (total - n) * 2 && k.bytes_recv == (size_t)(N - 1) * n * 2,
          "reduce_scatter %s counters: sent %llu (want %zu) recv %llu (want %zu)", dn, (unsigned long long)k.bytes_sent,
          (total - n) * 2, (unsigned long long)k.bytes_recv, (size_t)(N - 1) * n * 2);
    digest(dst, n * 2);
    free(send), free(recv), free(ref), free(x);
}
static void check_rs_bf16(zt_comm *c, const size_t *counts, uint64_t what, bool in_place, bool nb) {
    check_rs_half(ZT_DTYPE_BF16, c, counts, what, in_place, nb);
}

/* ---- all-gather ------------------------------------------------------------------------------ */
static void check_ag(zt_comm *c, const size_t *counts, uint64_t what, bool in_place, bool nb) {
    int N = g_size, me = g_rank;
    size_t total = sum_counts(counts, N), off = sum_counts(counts, me), n = counts[me];
    float *send = malloc((n + 1) * sizeof(float)), *recv = malloc((total + 1) * sizeof(float));
    float *ref = malloc((total + 1) * sizeof(float));
    for (int r = 0, o = 0; r < N; o += (int)counts[r], r++)
        for (size_t i = 0; i < counts[r]; i++) ref[(size_t)o + i] = val(what, r, i);
    for (size_t i = 0; i < n; i++) send[i] = val(what, me, i);
    for (size_t i = 0; i < total; i++) recv[i] = NAN;
    if (in_place) memcpy(recv + off, send, n * sizeof(float));
    zt_error err = {0};
    zt_comm_counters_reset(c);
    const float *src = in_place ? recv + off : send;
    int rc;
    if (nb) {
        zt_comm_op *op;
        rc = zt_all_gather_f32_start(c, src, recv, counts, "check ag", &op, &err);
        if (!rc) rc = zt_comm_op_wait(op, &err);
    } else {
        rc = zt_all_gather_f32(c, src, recv, counts, "check ag", &err);
    }
    CHECK(rc == ZT_OK, "all_gather: %s", err.msg);
    CHECK(!memcmp(recv, ref, total * sizeof(float)), "all_gather result (total=%zu)", total);
    zt_coll_counters k = delta(c, ZT_COLL_ALL_GATHER);
    CHECK(k.calls == 1 && k.bytes_sent == (size_t)(N - 1) * n * 4 && k.bytes_recv == (total - n) * 4,
          "all_gather counters: sent %llu recv %llu", (unsigned long long)k.bytes_sent,
          (unsigned long long)k.bytes_recv);
    digest(recv, total * sizeof(float));
    free(send), free(recv), free(ref);
}

/* all-to-all of variable blocks (expert parallelism): rank r's block for rank p is
 * 1 + ((r*7 + p*3 + pat) % 5) * 3333 bytes (pattern 1: empty where r + p is odd), each byte a function
 * of (r, p, i); the sizes arrive first, each block lands whole, the own one copied; the payload counts
 * as ZT_COLL_ALL_TO_ALL (what this rank sent to the others), and a block over its room is
 * ZT_ERR_MISMATCH naming both sizes. Pattern 3: blocks of 1 + ((r*7 + p*3) % 5) * 70001 bytes, up to
 * 280005: through the shared segment's slots several 64 KiB pieces a block, more than a lane holds on
 * 4 ranks (all_to_all_shm.c). Where the comm has a segment, check_a2a_ways runs them once reading
 * the blocks out of the senders' memory (the single copy) and once through the slots; the single
 * copy with the send blocks in plain memory (process_vm_readv), in a shared buffer (zt_shared_alloc:
 * mapped by the receivers, the mappings let go once the buffer is freed) and both (src 0 / 1 / 2:
 * the blocks for odd ranks in plain memory). */
static size_t a2a_bytes(int r, int p, int pat) {
    if (pat == 1 && (r + p) % 2) return 0;
    if (pat == 3) return 1 + (size_t)((r * 7 + p * 3) % 5) * 70001;
    return 1 + (size_t)((r * 7 + p * 3 + pat) % 5) * 3333; /* up to 13333: 4 chunks on the 4 KiB comm */
}
static void check_a2a(zt_comm *c, int pat, int src) {
    int N = g_size, me = g_rank;
    const size_t CAP = pat == 3 ? 280008 : 14000;
    unsigned char *sbuf = src ? zt_shared_alloc((size_t)N * CAP) : malloc((size_t)N * CAP), *rbuf = malloc((size_t)N * CAP);
    unsigned char *plain = malloc((size_t)N * CAP); /* src 2: the blocks for odd ranks from here */
    const void **sp = malloc((size_t)N * sizeof *sp);
    void **rp = malloc((size_t)N * sizeof *rp);
    size_t *sb = malloc(3 * (size_t)N * sizeof *sb), *cap = sb + N, *got = sb + 2 * N;
    size_t sent = 0;
    for (int p = 0; p < N; p++) {
        sb[p] = a2a_bytes(me, p, pat);
        cap[p] = CAP;
        unsigned char *from = (src == 2 && p % 2 ? plain : sbuf) + (size_t)p * CAP;
        sp[p] = from;
        rp[p] = rbuf + (size_t)p * CAP;
        for (size_t i = 0; i < sb[p]; i++) from[i] = (unsigned char)(me * 31 + p * 17 + i);
        if (p != me) sent += sb[p];
    }
    zt_error err = {0};
    int rc = zt_all_to_allv(c, sp, sb, (void *const *)rp, cap, got, "check a2a", &err);
    CHECK(rc == ZT_OK, "all_to_all: %s", err.msg);
    for (int p = 0; p < N && rc == ZT_OK; p++) {
        size_t want = a2a_bytes(p, me, pat);
        CHECK(got[p] == want, "all_to_all: %zu bytes from rank %d, want %zu", got[p], p, want);
        bool same = true;
        for (size_t i = 0; i < want && i < got[p]; i++)
            same &= rbuf[(size_t)p * CAP + i] == (unsigned char)(p * 31 + me * 17 + i);
        CHECK(same, "all_to_all: the block from rank %d differs", p);
    }
    zt_coll_counters k = delta(c, ZT_COLL_ALL_TO_ALL);
    CHECK(N == 1 || (k.calls == 1 && k.bytes_sent == sent), "all_to_all counters: calls %llu sent %llu (want %zu)",
          (unsigned long long)k.calls, (unsigned long long)k.bytes_sent, sent);
    if (src == 1 && pat != 1 && zt_comm_a2a_map(c)) /* every peer's block came out of its buffer mapped here */
        CHECK(zt_comm_a2a_mapped(c) == N - 1, "all_to_all out of shared buffers: %d mapped, want %d",
              zt_comm_a2a_mapped(c), N - 1);
    if (pat == 0 && N > 1) { /* rank 0's block for rank 1 over its room: both fail, naming the sizes */
        for (int p = 0; p < N; p++) cap[p] = me == 1 ? 1 : CAP, sb[p] = me == 0 && p == 1 ? 2 : 0;
        err = (zt_error){0};
        rc = zt_all_to_allv(c, sp, sb, (void *const *)rp, cap, got, "check a2a room", &err);
        if (me == 1)
            CHECK(rc == ZT_ERR_MISMATCH && strstr(err.msg, "rank 0 sends 2 bytes") && strstr(err.msg, "room for 1"),
                  "all_to_all over the room: rc %d, %s", rc, err.msg);
        else if (me == 0)
            CHECK(rc == ZT_ERR_MISMATCH && strstr(err.msg, "sends 2 bytes to rank 1"), "all_to_all over the room "
                  "(sender): rc %d, %s", rc, err.msg);
        else
            CHECK(rc == ZT_OK, "all_to_all beside a pair over its room: %s", err.msg);
        delta(c, ZT_COLL_ALL_TO_ALL);
    }
    if (src) zt_shared_free(sbuf);
    else free(sbuf);
    free(plain), free(rbuf), free(sp), free(rp), free(sb);
}

/* zt_shared_alloc past its 128 live buffers: the later ones plain memory, every one usable and freed by
 * zt_shared_free whichever its kind (out of order); then shared buffers again */
static void check_shared_many(void) {
    enum { MANY = 130 };
    unsigned char *b[MANY];
    bool ok = true;
    for (int i = 0; i < MANY; i++) {
        b[i] = zt_shared_alloc(100 + (size_t)i);
        ok &= b[i] != NULL && ((uintptr_t)b[i] & 63) == 0;
        if (b[i]) memset(b[i], i, 100 + (size_t)i);
    }
    for (int i = 0; i < MANY && ok; i++) ok &= b[i][99 + i] == (unsigned char)i;
    CHECK(ok, "shared buffers: %d allocated, each 64-byte aligned and holding its bytes", MANY);
    for (int i = 1; i < MANY; i += 2) zt_shared_free(b[i]);
    for (int i = 0; i < MANY; i += 2) zt_shared_free(b[i]);
    unsigned char *again = zt_shared_alloc(4096);
    CHECK(again != NULL, "shared buffers: one more after freeing them all");
    zt_shared_free(again);
    zt_shared_free(NULL);
}

static void check_a2a_ways(zt_comm *c) {
    bool single = zt_comm_a2a_single_copy(c);
    for (int way = 0; way < (single ? 2 : 1); way++) {
        if (single) CHECK(zt_comm_set_a2a_single_copy(c, way == 0) == ZT_OK, "all_to_all: single copy %d", way == 0);
        for (int pat = 0; pat < 4; pat++) check_a2a(c, pat, 0);
    }
    if (single) zt_comm_set_a2a_single_copy(c, true);
    for (int src = 1; src <= 2; src++)
        for (int pat = 0; pat < 4; pat++) check_a2a(c, pat, src);
    CHECK(!single || zt_comm_a2a_map(c), "all_to_all: mapping a peer's shared buffer failed (the maps turned off)");
    /* the peers have freed every shared buffer: the next all-to-all lets their mappings go */
    check_a2a(c, 0, 0);
    CHECK(zt_comm_a2a_mapped(c) == 0, "all_to_all: %d freed peer buffers still mapped", zt_comm_a2a_mapped(c));
    if (zt_comm_a2a_map(c)) { /* the same blocks read with process_vm_readv */
        CHECK(zt_comm_set_a2a_map(c, false) == ZT_OK, "all_to_all: maps off");
        check_a2a(c, 0, 1);
        CHECK(zt_comm_a2a_mapped(c) == 0, "all_to_all with the maps off: %d mapped", zt_comm_a2a_mapped(c));
        zt_comm_set_a2a_map(c, true);
    }
    CHECK(zt_comm_set_a2a_map(c, true) == (single ? ZT_OK : ZT_ERR_USAGE), "all_to_all: maps where the probe %s",
          single ? "passed" : "failed or there is no segment");
    CHECK(zt_comm_set_a2a_single_copy(c, true) == (single ? ZT_OK : ZT_ERR_USAGE), "all_to_all: single copy where the "
          "probe %s", single ? "passed" : "failed or there is no segment");
}

/* bf16 elements (bf16-low's parameters): the same exchange in 2-byte elements, bytes counted so */
static void check_ag_bf16(zt_comm *c, const size_t *counts, uint64_t what, bool in_place) {
    int N = g_size, me = g_rank;
    size_t total = sum_counts(counts, N), off = sum_counts(counts, me), n = counts[me];
    uint16_t *send = malloc((n + 1) * sizeof *send), *recv = malloc((total + 1) * sizeof *recv);
    uint16_t *ref = malloc((total + 1) * sizeof *ref);
    for (int r = 0, o = 0; r < N; o += (int)counts[r], r++)
        for (size_t i = 0; i < counts[r]; i++) ref[(size_t)o + i] = (uint16_t)(what * 977 + (uint64_t)r * 131 + i);
    for (size_t i = 0; i < n; i++) send[i] = ref[off + i];
    for (size_t i = 0; i < total; i++) recv[i] = 0xffff;
    if (in_place) memcpy(recv + off, send, n * sizeof *send);
    zt_error err = {0};
    zt_comm_counters_reset(c);
    int rc = zt_all_gather_bf16(c, in_place ? recv + off : send, recv, counts, "check ag bf16", &err);
    CHECK(rc == ZT_OK, "all_gather_bf16: %s", err.msg);
    CHECK(!memcmp(recv, ref, total * sizeof *recv), "all_gather_bf16 result (total=%zu)", total);
    zt_coll_counters k = delta(c, ZT_COLL_ALL_GATHER);
    CHECK(k.calls == 1 && k.bytes_sent == (size_t)(N - 1) * n * 2 && k.bytes_recv == (total - n) * 2,
          "all_gather_bf16 counters: sent %llu recv %llu", (unsigned long long)k.bytes_sent,
          (unsigned long long)k.bytes_recv);
    free(send), free(recv), free(ref);
}

/* ---- all-reduce: reference, RS+AG equality, same bits on every rank ------------------------- */
/* Forces algo on c for one check (false: not available here, e.g. SHM without a segment). */
static bool use_algo(zt_comm *c, int algo) {
    return zt_comm_set_all_reduce_algo(c, (zt_ar_algo)algo) == ZT_OK;
}

/* The bytes each way an all-reduce of n elements of elem bytes moves on c: whole vectors for
 * EXCHANGE, the reduce-scatter + all-gather formula otherwise (SHM counts the same). */
static size_t ar_bytes(zt_comm *c, size_t n, size_t elem, size_t cme) {
    int N = g_size;
    if (zt_comm_all_reduce_algo(c, elem == 4 ? ZT_DTYPE_FP32 : ZT_DTYPE_BF16, n) == ZT_AR_ALGO_EXCHANGE)
        return (size_t)(N - 1) * n * elem;
    return ((n - cme) + (size_t)(N - 1) * cme) * elem;
}

/* The references of (dtype, what, n), each computed once per run: every algorithm checks the same
 * sizes and labels (check_ar_algos), so the tree over every rank's values is the same for each. */
static struct {
    int dt; /* 0: fp32, else the zt_dtype + 1 */
    uint64_t what;
    size_t n;
    void *ref;
} g_refs[128];
static int g_nrefs;
static const void *ref_cached(int dt, uint64_t what, size_t n) {
    for (int k = 0; k < g_nrefs; k++)
        if (g_refs[k].dt == dt && g_refs[k].what == what && g_refs[k].n == n) return g_refs[k].ref;
    return NULL;
}
static void ref_keep(int dt, uint64_t what, size_t n, const void *ref, size_t bytes) {
    void *copy = g_nrefs < (int)(sizeof g_refs / sizeof g_refs[0]) ? malloc(bytes ? bytes : 1) : NULL;
    if (!copy) return;
    memcpy(copy, ref, bytes);
    g_refs[g_nrefs].dt = dt, g_refs[g_nrefs].what = what, g_refs[g_nrefs].n = n, g_refs[g_nrefs].ref = copy;
    g_nrefs++;
}

static void check_ar(zt_comm *c, size_t n, uint64_t what, bool nb, int algo) {
    int N = g_size, me = g_rank;
    if (!use_algo(c, algo)) return;
    const char *an = zt_ar_algo_name(zt_comm_all_reduce_algo(c, ZT_DTYPE_FP32, n));
    float *buf = malloc((n + 1) * sizeof(float)), *ref = malloc((n + 1) * sizeof(float));
    float *x = malloc((size_t)N * sizeof(float)), *mine = malloc((n + 1) * sizeof(float));
    const float *known = ref_cached(0, what, n);
    for (size_t i = 0; i < n; i++) {
        mine[i] = buf[i] = val(what, me, i);
        if (known) continue;
        for (int r = 0; r < N; r++) x[r] = val(what, r, i);
        ref[i] = tree_ref(x, 0, N);
    }
    if (known) memcpy(ref, known, n * sizeof(float));
    else ref_keep(0, what, n, ref, n * sizeof(float));
    zt_error err = {0};
    zt_comm_counters_reset(c);
    int rc;
    if (nb) {
        zt_comm_op *op;
        rc = zt_all_reduce_f32_start(c, buf, n, "check ar", &op, &err);
        if (!rc) rc = zt_comm_op_wait(op, &err);
    } else {
        rc = zt_all_reduce_f32(c, buf, n, "check ar", &err);
    }
    CHECK(rc == ZT_OK, "all_reduce %s: %s", an, err.msg);
    CHECK(!memcmp(buf, ref, n * sizeof(float)), "all_reduce %s result n=%zu", an, n);
    size_t *counts = malloc((size_t)N * sizeof *counts);
    zt_comm_even_counts(n, N, counts);
    size_t cme = counts[me];
    zt_coll_counters k = delta(c, ZT_COLL_ALL_REDUCE);
    size_t want = ar_bytes(c, n, 4, cme);
    CHECK(k.calls == 1 && k.bytes_sent == want && k.bytes_recv == want,
          "all_reduce %s counters: sent %llu recv %llu want %zu", an, (unsigned long long)k.bytes_sent,
          (unsigned long long)k.bytes_recv, want);
    if (n % (size_t)N == 0 && strcmp(an, "exchange"))
        CHECK(k.bytes_sent == 2 * n * (size_t)(N - 1) / (size_t)N * 4, "all_reduce %s 2n(N-1)/N", an);
    /* the same as reduce-scatter + all-gather */
    float *b2 = malloc((n + 1) * sizeof(float));
    memcpy(b2, mine, n * sizeof(float)); /* this rank's values again */
    size_t off = sum_counts(counts, me);
    rc = zt_reduce_scatter_f32(c, b2, b2 + off, counts, "rs of ar", &err);
    if (!rc) rc = zt_all_gather_f32(c, b2 + off, b2, counts, "ag of ar", &err);
    CHECK(rc == ZT_OK && !memcmp(b2, buf, n * sizeof(float)), "all_reduce %s != rs+ag: %s", an, err.msg);
    /* every rank holds the same bits */
    uint64_t h = XXH64(buf, n * sizeof(float), 0);
    uint64_t *all = malloc((size_t)N * sizeof *all);
    MPI_Allgather(&h, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, MPI_COMM_WORLD);
    for (int r = 0; r < N; r++) CHECK(all[r] == h, "all_reduce %s: rank %d holds other bits", an, r);
    if (algo == ZT_AR_ALGO_AUTO) digest(buf, n * sizeof(float)); /* the same whichever AUTO picks */
    zt_comm_counters_reset(c);
    use_algo(c, ZT_AR_ALGO_AUTO);
    free(buf), free(ref), free(x), free(mine), free(counts), free(b2), free(all);
}

/* all-reduce in bf16 or fp16: the reference tree, half of fp32's bytes both ways, the same bits on
 * every rank, and each element's bits those of the reduce-scatter of the even split */
static void check_ar_half(zt_dtype dt, zt_comm *c, size_t n, uint64_t what, bool nb, int algo) {
    int N = g_size, me = g_rank;
    if (!use_algo(c, algo)) return;
    char dn[48];
    snprintf(dn, sizeof dn, "%s %s", zt_dtype_name(dt), zt_ar_algo_name(zt_comm_all_reduce_algo(c, dt, n)));
    uint16_t *buf = malloc((n + 1) * 2), *ref = malloc((n + 1) * 2), *b2 = malloc((n + 1) * 2);
    float *x = malloc((size_t)N * sizeof(float));
    const uint16_t *known = ref_cached((int)dt + 1, what, n);
    for (size_t i = 0; i < n; i++) {
        buf[i] = b2[i] = val_half(dt, what, me, i);
        if (known) continue;
        for (int r = 0; r < N; r++) x[r] = f_of_half(dt, val_half(dt, what, r, i));
        ref[i] = half_of(dt, tree_ref_half(dt, x, 0, N));
    }
    if (known) memcpy(ref, known, n * 2);
    else ref_keep((int)dt + 1, what, n, ref, n * 2);
    zt_error err = {0};
    zt_comm_counters_reset(c);
    int rc;
    if (nb) {
        zt_comm_op *op;
        rc = zt_all_reduce_start(c, dt, buf, n, "check ar half", &op, &err);
        if (!rc) rc = zt_comm_op_wait(op, &err);
    } else {
        rc = zt_all_reduce(c, dt, buf, n, "check ar half", &err);
    }
    CHECK(rc == ZT_OK, "all_reduce %s: %s", dn, err.msg);
    CHECK(!memcmp(buf, ref, n * 2), "all_reduce %s result n=%zu", dn, n);
    size_t *counts = malloc((size_t)N * sizeof *counts);
    zt_comm_even_counts(n, N, counts);
    size_t cme = counts[me], want = ar_bytes(c, n, 2, cme);
    zt_coll_counters k = delta(c, ZT_COLL_ALL_REDUCE);
    CHECK(k.calls == 1 && k.bytes_sent == want && k.bytes_recv == want,
          "all_reduce %s counters: sent %llu recv %llu want %zu (half of fp32's)", dn, (unsigned long long)k.bytes_sent,
          (unsigned long long)k.bytes_recv, want);
    size_t off = sum_counts(counts, me);
    rc = zt_reduce_scatter(c, dt, b2, b2 + off, counts, "rs of ar half", &err);
    CHECK(rc == ZT_OK && !memcmp(b2 + off, buf + off, cme * 2), "all_reduce %s != its reduce-scatter: %s", dn, err.msg);
    uint64_t h = XXH64(buf, n * 2, 0);
    uint64_t *all = malloc((size_t)N * sizeof *all);
    MPI_Allgather(&h, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, MPI_COMM_WORLD);
    for (int r = 0; r < N; r++) CHECK(all[r] == h, "all_reduce %s: rank %d holds other bits", dn, r);
    if (algo == ZT_AR_ALGO_AUTO) digest(buf, n * 2);
    zt_comm_counters_reset(c);
    use_algo(c, ZT_AR_ALGO_AUTO);
    free(buf), free(ref), free(b2), free(x), free(counts), free(all);
}
static void check_ar_bf16(zt_comm *c, size_t n, uint64_t what, bool nb, int algo) {
    check_ar_half(ZT_DTYPE_BF16, c, n, what, nb, algo);
}

/* Every algorithm at the sizes around the thresholds and the shared segment's step boundaries
 * (odd lengths, blocks of whole steps, of one element more, a step and a half), each against the
 * reference tree (check_ar / check_ar_half); then AUTO's choice at either side of each
 * threshold and its result at those sizes. */
static void check_ar_algos(zt_comm *c) {
    int N = g_size;
    const int algos[] = {ZT_AR_ALGO_AUTO, ZT_AR_ALGO_RS_AG, ZT_AR_ALGO_EXCHANGE, ZT_AR_ALGO_SHM};
    /* the shared segment's steps move 64 KiB of each block below 512 KiB blocks (ZT_SHM_MIN_PIECE):
     * blocks of 256 KiB are 4 steps exactly, one element more a fifth step of one element */
    size_t piece = 64u << 10, thr = 64u << 10; /* ZT_SHM_MIN_PIECE, the default exchange bytes */
    size_t nf = 4 * piece / 4 * (size_t)N, nh = 4 * piece / 2 * (size_t)N;
    size_t ns[] = {1, 7, thr / 4 - 1, thr / 4, thr / 4 + 1, nf - 1, nf, nf + 1, nf + nf / 2 + 3};
    size_t hs[] = {5, thr / 2, thr / 2 + 1, nh - 1, nh + nh / 2 + 1};
    for (size_t a = 0; a < sizeof algos / sizeof algos[0]; a++) {
        for (size_t t = 0; t < sizeof ns / sizeof ns[0]; t++) check_ar(c, ns[t], 400 + t, t % 2 == 1, algos[a]);
        for (size_t t = 0; t < sizeof hs / sizeof hs[0]; t++) {
            check_ar_half(ZT_DTYPE_BF16, c, hs[t], 420 + t, t % 2 == 0, algos[a]);
            check_ar_half(ZT_DTYPE_FP16, c, hs[t], 440 + t, t % 2 == 1, algos[a]);
        }
    }
    /* AUTO's choice, with the segment's threshold moved below a 64 KB exchange */
    size_t shm0 = zt_comm_all_reduce_shm_bytes(c), ex0 = zt_comm_all_reduce_exchange_bytes(c);
    bool shm = zt_comm_has_shm(c);
    CHECK(shm == (N > 1 && shm0 > 0), "shared segment on %d ranks (ZT_COMM_AR_SHM_BYTES %zu)", N, shm0);
    zt_comm_set_all_reduce_exchange_bytes(c, thr);
    zt_comm_set_all_reduce_shm_bytes(c, 1000);
    zt_ar_algo below = N == 2 ? ZT_AR_ALGO_EXCHANGE : ZT_AR_ALGO_RS_AG;
    CHECK(zt_comm_all_reduce_algo(c, ZT_DTYPE_FP32, 250) == (shm ? ZT_AR_ALGO_SHM : below), "auto at 1000 bytes");
    CHECK(zt_comm_all_reduce_algo(c, ZT_DTYPE_FP32, 251) == below, "auto at 1004 bytes");
    CHECK(zt_comm_all_reduce_algo(c, ZT_DTYPE_FP32, thr / 4) == below, "auto at the exchange threshold");
    CHECK(zt_comm_all_reduce_algo(c, ZT_DTYPE_BF16, thr / 2) == below, "auto bf16 at the exchange threshold");
    CHECK(zt_comm_all_reduce_algo(c, ZT_DTYPE_FP32, thr / 4 + 1) == ZT_AR_ALGO_RS_AG, "auto above it");
    CHECK(zt_comm_all_reduce_algo(c, ZT_DTYPE_FP16, thr / 2 + 1) == ZT_AR_ALGO_RS_AG, "auto fp16 above it");
    size_t around[] = {249, 250, 251, thr / 4, thr / 4 + 1};
    for (size_t t = 0; t < sizeof around / sizeof around[0]; t++) check_ar(c, around[t], 460 + t, false, ZT_AR_ALGO_AUTO);
    zt_comm_set_all_reduce_exchange_bytes(c, 0);
    CHECK(zt_comm_all_reduce_algo(c, ZT_DTYPE_FP32, 251) == ZT_AR_ALGO_RS_AG, "exchange off");
    zt_comm_set_all_reduce_shm_bytes(c, shm0);
    zt_comm_set_all_reduce_exchange_bytes(c, ex0);
    CHECK(zt_comm_all_reduce_algo(c, ZT_DTYPE_FP32, (size_t)1 << 28) == (shm ? ZT_AR_ALGO_SHM : ZT_AR_ALGO_RS_AG),
          "auto at 1 GB");
    CHECK(zt_comm_set_all_reduce_algo(c, (zt_ar_algo)9) == ZT_ERR_USAGE, "algorithm 9 refused");
    CHECK((zt_comm_set_all_reduce_algo(c, ZT_AR_ALGO_SHM) == ZT_OK) == shm, "SHM forced only with a segment");
    use_algo(c, ZT_AR_ALGO_AUTO);
}

/* 2 ranks: the one-shot at every size (all_reduce_shm.c): 64 KiB pieces up to 1 MiB, 256 KiB
 * above, one a slot in a ring of 16. Around the small pieces (one element short, exact, one more),
 * the 1 MiB bound (exactly and one element past: the pieces change), the ring of large pieces (one
 * short of a wrap, a wrap and 3 elements, many wraps), then back and forth; bf16 and fp16 on either
 * side of the pieces and of the bound. Each size with the stores forced through the caches,
 * streamed, and chosen by the comm (AUTO) in turn, SHM forced and AUTO by turns, against the
 * reference tree (AUTO's digests must equal those without the segment: the stores change no bit). */
static void check_ar_two_rank_modes(zt_comm *c) {
    if (g_size != 2) return;
    CHECK(zt_comm_set_all_reduce_stores(c, (zt_ar_stores)3) == ZT_ERR_USAGE, "stores 3 refused");
    CHECK(zt_comm_set_all_reduce_stores(NULL, ZT_AR_STORES_AUTO) == ZT_ERR_USAGE, "stores on no comm refused");
    size_t sp = 1u << 14, lp = 1u << 16, lo = 1u << 18; /* fp32 elements of a small piece, a large one, 1 MiB */
    size_t ns[] = {sp - 1, sp, sp + 1, lo - 1, lo, lo + 1, 16 * lp - 1, 16 * lp + 3, 40 * lp + 5, 3, lo + 1, sp + 1};
    const int algos[] = {ZT_AR_ALGO_SHM, ZT_AR_ALGO_AUTO};
    const zt_ar_stores stores[] = {ZT_AR_STORES_CACHED, ZT_AR_STORES_STREAMING, ZT_AR_STORES_AUTO};
    for (size_t t = 0; t < sizeof ns / sizeof ns[0]; t++) {
        CHECK(zt_comm_set_all_reduce_stores(c, stores[t % 3]) == ZT_OK, "stores %d", (int)stores[t % 3]);
        check_ar(c, ns[t], 480 + t, t % 2 == 1, algos[t % 2]);
    }
    size_t hs[] = {2 * sp - 1, 2 * sp + 1, 2 * lo + 5, 32 * lp + 3, 2 * lo + 1};
    for (size_t t = 0; t < sizeof hs / sizeof hs[0]; t++) {
        CHECK(zt_comm_set_all_reduce_stores(c, stores[(t + 1) % 3]) == ZT_OK, "stores");
        check_ar_half(ZT_DTYPE_BF16, c, hs[t], 500 + t, t % 2 == 0, algos[t % 2]);
        CHECK(zt_comm_set_all_reduce_stores(c, stores[t % 3]) == ZT_OK, "stores");
        check_ar_half(ZT_DTYPE_FP16, c, hs[t], 510 + t, t % 2 == 1, algos[(t + 1) % 2]);
    }
    zt_comm_set_all_reduce_stores(c, ZT_AR_STORES_AUTO);
    /* far is timed on the fly (either answer where there is a segment), never without one */
    CHECK(zt_comm_has_shm(c) || !zt_comm_shm_peer_far(c), "a comm without a segment has no far peer");
}

/* ---- broadcast ------------------------------------------------------------------------------- */
static int bcast_children(int N, int me, int root) {
    int v = (me - root + N) % N, low = 1, k = 0;
    if (v == 0) while (low < N) low <<= 1;
    else low = v & -v;
    for (int m = low >> 1; m >= 1; m >>= 1) k += v + m < N;
    return k;
}

static void check_bcast(zt_comm *c, size_t bytes, int root) {
    unsigned char *buf = malloc(bytes + 1), *ref = malloc(bytes + 1);
    for (size_t i = 0; i < bytes; i++) {
        ref[i] = (unsigned char)mix(i * 31 + (uint64_t)root);
        buf[i] = g_rank == root ? ref[i] : 0xAA;
    }
    zt_error err = {0};
    zt_comm_counters_reset(c);
    int rc = zt_broadcast_bytes(c, buf, bytes, root, "check bcast", &err);
    CHECK(rc == ZT_OK, "broadcast: %s", err.msg);
    CHECK(!memcmp(buf, ref, bytes), "broadcast result bytes=%zu root=%d", bytes, root);
    zt_coll_counters k = delta(c, ZT_COLL_BROADCAST);
    size_t want_sent = (size_t)bcast_children(g_size, g_rank, root) * bytes;
    size_t want_recv = g_rank == root ? 0 : bytes;
    CHECK(k.bytes_sent == want_sent && k.bytes_recv == want_recv,
          "broadcast counters: sent %llu (want %zu) recv %llu (want %zu)",
          (unsigned long long)k.bytes_sent, want_sent, (unsigned long long)k.bytes_recv, want_recv);
    digest(buf, bytes);
    free(buf), free(ref);
}

/* ---- small ops ------------------------------------------------------------------------------- */
static void check_small(zt_comm *c) {
    int N = g_size, me = g_rank;
    zt_error err = {0};
    double v = (double)((me * 7) % N) - 0.5;
    int rc = zt_all_reduce_max_f64(c, &v, "max", &err);
    CHECK(rc == ZT_OK && v == (double)(N - 1) - 0.5, "max: %g %s", v, err.msg);
    v = me == N - 1 ? NAN : 1.0;
    rc = zt_all_reduce_max_f64(c, &v, "max nan", &err);
    CHECK(rc == ZT_OK && isnan(v), "max with a NaN gave %g", v);
    int f = 1;
    rc = zt_all_reduce_and_int(c, &f, "and", &err);
    CHECK(rc == ZT_OK && f == 1, "and all true");
    f = me != N / 2;
    rc = zt_all_reduce_and_int(c, &f, "and", &err);
    CHECK(rc == ZT_OK && f == 0, "and one false");
    double mine[3] = {me, me * 0.5, -me}, *all = malloc((size_t)N * 3 * sizeof(double));
    rc = zt_all_gather_f64(c, mine, all, 3, "norm partials", &err);
    CHECK(rc == ZT_OK, "all_gather_f64: %s", err.msg);
    for (int r = 0; r < N; r++)
        CHECK(all[3 * r] == r && all[3 * r + 1] == r * 0.5 && all[3 * r + 2] == -r,
              "all_gather_f64 block %d", r);
    zt_comm_counters_reset(c);
    rc = zt_all_gather_f64(c, mine, all, 3, "norm partials", &err);
    zt_coll_counters k = delta(c, ZT_COLL_SMALL);
    CHECK(rc == ZT_OK && k.bytes_sent == (size_t)(N - 1) * 24 && k.bytes_recv == (size_t)(N - 1) * 24,
          "small counters");
    rc = zt_comm_barrier(c, "barrier", &err);
    CHECK(rc == ZT_OK, "barrier: %s", err.msg);
    free(all);
}

/* Crafted inputs where the tree and a left fold disagree: the collective must give the tree. */
static void check_order(zt_comm *c) {
    int N = g_size;
    if (N < 3) return; /* one addition: every order is the same */
    const float pool[5] = {1e8f, -1e8f, 1.0f, -1.0f, 3.0f};
    float x[64];
    uint64_t s = 0;
    for (;; s++) { /* the same deterministic search on every rank */
        for (int r = 0; r < N; r++) x[r] = pool[mix(s * 131 + (uint64_t)r) % 5];
        float fold = x[0];
        for (int r = 1; r < N; r++) fold += x[r];
        if (fold != tree_ref(x, 0, N)) break;
    }
    float fold = x[0];
    for (int r = 1; r < N; r++) fold += x[r];
    float *buf = malloc((size_t)N * sizeof(float));
    for (int j = 0; j < N; j++) buf[j] = x[g_rank];
    zt_error err = {0};
    int rc = zt_all_reduce_f32(c, buf, (size_t)N, "crafted", &err);
    float tree = tree_ref(x, 0, N);
    CHECK(rc == ZT_OK && buf[0] == tree && buf[0] != fold,
          "crafted order: got %g, tree %g, left fold %g", buf[0], tree, fold);
    if (g_rank == 0) printf("order: tree gives %g, a left fold would give %g\n", tree, fold);
    free(buf);
}

/* Errors that need no timeout: usage, op in flight, size mismatch, diverged sequences. */
static void check_errors(zt_comm *world) {
    int N = g_size, me = g_rank;
    zt_error err = {0};
    float f = 1;
    CHECK(zt_reduce_scatter_f32(world, &f, &f, NULL, "x", &err) == ZT_ERR_USAGE, "NULL counts");
    CHECK(zt_broadcast_bytes(world, &f, 4, N, "x", &err) == ZT_ERR_USAGE, "root out of range");
    CHECK(zt_comm_set_timeout(world, 0) == ZT_ERR_USAGE, "timeout 0");
    CHECK(zt_all_reduce(world, (zt_dtype)7, &f, 1, "x", &err) == ZT_ERR_USAGE && strstr(err.msg, "dtype 7"),
          "an unknown dtype is refused: %s", err.msg);
    /* a second collective while a non-blocking one is in flight */
    size_t *counts = malloc((size_t)N * sizeof *counts);
    for (int j = 0; j < N; j++) counts[j] = 100;
    float *a = calloc((size_t)N * 100, sizeof(float)), *b = calloc(100, sizeof(float));
    zt_comm_op *op;
    int rc = zt_reduce_scatter_f32_start(world, a, b, counts, "in flight", &op, &err);
    CHECK(rc == ZT_OK, "start: %s", err.msg);
    rc = zt_all_gather_f32(world, b, a, counts, "second", &err);
    CHECK(rc == ZT_ERR_INTERNAL && strstr(err.msg, "in flight"), "op in flight: %d %s", rc, err.msg);
    rc = zt_comm_op_wait(op, &err);
    CHECK(rc == ZT_OK, "wait after refused call: %s", err.msg);
    if (N >= 2) {
        /* rank 0 expects one float less from rank 1: a length mismatch, named */
        zt_comm *d;
        rc = zt_comm_dup(world, &d, &err);
        CHECK(rc == ZT_OK, "dup: %s", err.msg);
        size_t *bad = malloc((size_t)N * sizeof *bad);
        memcpy(bad, counts, (size_t)N * sizeof *bad);
        if (me == 0) bad[1] = 99;
        rc = zt_all_gather_f32(d, b, a, bad, "mismatch", &err);
        if (me == 0)
            CHECK(rc == ZT_ERR_MISMATCH && strstr(err.msg, "rank 1") && zt_comm_broken(d),
                  "mismatch on rank 0: %d %s", rc, err.msg);
        if (me == 0) {
            rc = zt_comm_barrier(d, "after", &err);
            CHECK(rc == ZT_ERR_PEER && strstr(err.msg, "unusable"), "broken comm refuses: %s", err.msg);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        zt_comm_free(d);
        free(bad);
        /* the same in a bf16 reduce-scatter: rank 0 sends rank 1 one element less */
        rc = zt_comm_dup(world, &d, &err);
        CHECK(rc == ZT_OK, "dup: %s", err.msg);
        bad = malloc((size_t)N * sizeof *bad);
        memcpy(bad, counts, (size_t)N * sizeof *bad);
        if (me == 0) bad[1] = 99;
        uint16_t *h16 = calloc((size_t)N * 100, 2);
        rc = zt_reduce_scatter(d, ZT_DTYPE_BF16, h16, h16 + (size_t)me * 100, bad, "bf16 mismatch", &err);
        if (me == 1)
            CHECK(rc == ZT_ERR_MISMATCH && strstr(err.msg, "rank 0") && zt_comm_broken(d),
                  "bf16 mismatch on rank 1: %d %s", rc, err.msg);
        MPI_Barrier(MPI_COMM_WORLD);
        zt_comm_free(d);
        free(bad);
        free(h16);
        /* a rank that skipped a (message-free) collective: the next fence says so */
        rc = zt_comm_dup(world, &d, &err);
        CHECK(rc == ZT_OK, "dup: %s", err.msg);
        size_t *zero = calloc((size_t)N, sizeof *zero);
        if (me != N - 1) zt_reduce_scatter_f32(d, a, b, zero, "empty", &err);
        rc = zt_comm_barrier(d, "fence", &err);
        CHECK(rc == ZT_ERR_MISMATCH && strstr(err.msg, "diverged"), "diverged: %d %s", rc, err.msg);
        zt_comm_free(d);
        free(zero);
    }
    free(counts), free(a), free(b);
}

/* ---- two threads: a comm thread reduce-scatters on a dup while the main thread all-reduces --- */
typedef struct thread_job {
    zt_comm *c;
    int rounds, rc;
    zt_error err;
    uint64_t hash;
} thread_job;

static void *comm_thread(void *arg) {
    thread_job *j = arg;
    int N = g_size;
    size_t *counts = malloc((size_t)N * sizeof *counts);
    for (int r = 0; r < N; r++) counts[r] = 20000 + (size_t)r;
    size_t total = sum_counts(counts, N), off = sum_counts(counts, g_rank);
    float *send = malloc(total * sizeof(float));
    XXH64_state_t *h = XXH64_createState();
    XXH64_reset(h, 0);
    for (int it = 0; it < j->rounds && !j->rc; it++) {
        for (size_t i = 0; i < total; i++) send[i] = val(400 + (uint64_t)it, g_rank, i);
        j->rc = zt_reduce_scatter_f32(j->c, send, send + off, counts, "comm thread", &j->err);
        XXH64_update(h, send + off, counts[g_rank] * sizeof(float));
    }
    j->hash = XXH64_digest(h);
    XXH64_freeState(h);
    free(send), free(counts);
    return NULL;
}

static void check_threads(zt_comm *world) {
    if (zt_comm_thread_level() < ZT_COMM_THREAD_MULTIPLE) {
        if (g_rank == 0) printf("threads: MPI_THREAD_MULTIPLE not provided, skipped\n");
        return;
    }
    zt_error err = {0};
    thread_job j = {.rounds = 20};
    int rc = zt_comm_dup(world, &j.c, &err);
    CHECK(rc == ZT_OK, "dup for the comm thread: %s", err.msg);
    if (rc) return;
    pthread_t t;
    pthread_create(&t, NULL, comm_thread, &j);
    size_t n = 30011;
    float *buf = malloc(n * sizeof(float));
    XXH64_state_t *h = XXH64_createState();
    XXH64_reset(h, 0);
    for (int it = 0; it < 20 && !rc; it++) {
        for (size_t i = 0; i < n; i++) buf[i] = val(500 + (uint64_t)it, g_rank, i);
        rc = zt_all_reduce_f32(world, buf, n, "main thread", &err);
        XXH64_update(h, buf, n * sizeof(float));
    }
    pthread_join(t, NULL);
    CHECK(rc == ZT_OK, "main thread all-reduce beside the comm thread: %s", err.msg);
    CHECK(j.rc == ZT_OK, "comm thread reduce-scatter: %s", j.err.msg);
    /* against the same collectives run one after the other on one thread */
    uint64_t h_main = XXH64_digest(h);
    XXH64_reset(h, 0);
    for (int it = 0; it < 20; it++) {
        for (size_t i = 0; i < n; i++) buf[i] = val(500 + (uint64_t)it, g_rank, i);
        zt_all_reduce_f32(world, buf, n, "serial", &err);
        XXH64_update(h, buf, n * sizeof(float));
    }
    CHECK(XXH64_digest(h) == h_main, "threaded all-reduce bits differ from serial ones");
    uint64_t h_thread = j.hash;
    j.rc = 0;
    comm_thread(&j);
    CHECK(j.hash == h_thread, "threaded reduce-scatter bits differ from serial ones");
    digest(&h_main, sizeof h_main);
    digest(&h_thread, sizeof h_thread);
    XXH64_freeState(h);
    free(buf);
    zt_comm_free(j.c);
}

/* ---- the deadline ---------------------------------------------------------------------------- */
static int run_timeout(zt_comm *world) {
    int N = g_size, skip = N - 1;
    zt_error err = {0};
    zt_comm *d;
    if (zt_comm_dup(world, &d, &err)) {
        fprintf(stderr, "rank %d: dup: %s\n", g_rank, err.msg);
        return 1;
    }
    zt_comm_set_timeout(d, 2.0);
    size_t *counts = malloc((size_t)N * sizeof *counts);
    for (int j = 0; j < N; j++) counts[j] = 64;
    float *a = calloc((size_t)N * 64, sizeof(float)), *b = calloc(64, sizeof(float));
    char want[64];
    snprintf(want, sizeof want, "no data from rank %d after 2 s", skip);
    if (g_rank != skip) {
        double t0 = MPI_Wtime();
        int rc = zt_reduce_scatter_f32(d, a, b, counts, "bucket 'h.3'", &err);
        double t = MPI_Wtime() - t0;
        printf("rank %d: %.2f s: %s\n", g_rank, t, err.msg);
        CHECK(rc == ZT_ERR_PEER && strstr(err.msg, want) && strstr(err.msg, "reduce_scatter (bucket 'h.3'"),
              "timeout message: %s", err.msg);
        char onme[32];
        snprintf(onme, sizeof onme, "on rank %d:", g_rank);
        CHECK(strstr(err.msg, onme) != NULL, "message names this rank: %s", err.msg);
        CHECK(t >= 1.9 && t < 5.0, "failed after %.2f s, deadline 2 s", t);
        CHECK(zt_comm_broken(d), "comm broken after timeout");
    }
    /* a small op on the world's sub-comm of everyone, the skipping rank absent */
    zt_comm *e;
    if (zt_comm_dup(world, &e, &err)) {
        fprintf(stderr, "rank %d: dup: %s\n", g_rank, err.msg);
        return 1;
    }
    zt_comm_set_timeout(e, 2.0);
    if (g_rank != skip) {
        double v = g_rank, t0 = MPI_Wtime();
        int rc = zt_all_reduce_max_f64(e, &v, "grad norm", &err);
        double t = MPI_Wtime() - t0;
        printf("rank %d: %.2f s: %s\n", g_rank, t, err.msg);
        CHECK(rc == ZT_ERR_PEER && strstr(err.msg, want), "small timeout message: %s", err.msg);
        CHECK(t >= 1.9 && t < 5.0, "small op failed after %.2f s, deadline 2 s", t);
    }
    /* on a sub-comm the message gives comm ranks and world ranks: the odd ranks, the last skips */
    zt_comm *odd = NULL;
    if (N >= 4) {
        if (zt_comm_split(world, g_rank % 2, g_rank, &odd, &err)) {
            fprintf(stderr, "rank %d: split: %s\n", g_rank, err.msg);
            return 1;
        }
        zt_comm_set_name(odd, "replicate");
        zt_comm_set_timeout(odd, 2.0);
        if (g_rank % 2 == 1 && g_rank != skip) {
            float v[8] = {0};
            size_t cnt[8] = {0};
            for (int j = 0; j < zt_comm_size(odd); j++) cnt[j] = 1;
            int rc = zt_all_gather_f32(odd, v, v, cnt, "params 'h.0'", &err);
            printf("rank %d: %s\n", g_rank, err.msg);
            char w2[160];
            snprintf(w2, sizeof w2, "all_gather (params 'h.0', 8 B) on rank %d of 'replicate' (world rank %d): no data from rank %d (world %d) after 2 s",
                     zt_comm_rank(odd), g_rank, zt_comm_size(odd) - 1, skip);
            CHECK(rc == ZT_ERR_PEER && !strncmp(strchr(err.msg, 'a'), w2, strlen(w2)), "sub-comm message: %s\nwant %s", err.msg, w2);
        }
    }
    /* the all-reduce through the shared segment: no messages, the lagging rank named all the same */
    zt_comm *f;
    if (zt_comm_dup(world, &f, &err)) {
        fprintf(stderr, "rank %d: dup: %s\n", g_rank, err.msg);
        return 1;
    }
    zt_comm_set_timeout(f, 2.0);
    if (g_rank != skip && zt_comm_set_all_reduce_algo(f, ZT_AR_ALGO_SHM) == ZT_OK) {
        float v[1000] = {0};
        double t0 = MPI_Wtime();
        int rc = zt_all_reduce_f32(f, v, 1000, "tp 'h.2'", &err);
        double t = MPI_Wtime() - t0;
        printf("rank %d: %.2f s: %s\n", g_rank, t, err.msg);
        CHECK(rc == ZT_ERR_PEER && strstr(err.msg, want) && strstr(err.msg, "all_reduce (tp 'h.2'"),
              "shm all-reduce timeout message: %s", err.msg);
        CHECK(t >= 1.9 && t < 5.0, "shm all-reduce failed after %.2f s, deadline 2 s", t);
        CHECK(zt_comm_broken(f), "comm broken after the shm timeout");
    }
    /* everyone meets again on the healthy world, then drops the broken comms */
    int rc = zt_comm_barrier(world, "after timeout", &err);
    CHECK(rc == ZT_OK, "world barrier after timeouts: %s", err.msg);
    zt_comm_free(d);
    zt_comm_free(e);
    zt_comm_free(f);
    zt_comm_free(odd);
    free(counts), free(a), free(b);
    return 0;
}

int main(int argc, char **argv) {
    zt_error err = {0};
    zt_comm *world;
    if (zt_comm_init(&argc, &argv, &world, &err)) {
        fprintf(stderr, "zt_comm_init: %s\n", err.msg);
        return 1;
    }
    g_rank = zt_comm_rank(world);
    g_size = zt_comm_size(world);
    int N = g_size;
    if (g_rank == 0)
        printf("comm_check: %d ranks, thread level %d, chunk %zu bytes\n", N,
               zt_comm_thread_level(), zt_comm_chunk_bytes(world));
    if (argc > 1 && !strcmp(argv[1], "--timeout")) {
        run_timeout(world);
    } else {
        g_digest = XXH64_createState();
        XXH64_reset(g_digest, 0);
        check_tree_sum();
        check_tree_sum_bf16();
        check_tree_sum_fp16();
        /* a comm with a 4 KiB chunk: the multi-chunk pipelines on small data */
        zt_comm *small;
        if (zt_comm_dup(world, &small, &err)) {
            fprintf(stderr, "dup: %s\n", err.msg);
            return 1;
        }
        zt_comm_set_chunk_bytes(small, 4096);
        size_t *counts = malloc((size_t)N * sizeof *counts);
        zt_comm *comms[2] = {world, small};
        for (int ci = 0; ci < 2; ci++) {
            zt_comm *c = comms[ci];
            for (int pat = 0; pat < 6; pat++) {
                for (int j = 0; j < N; j++) {
                    switch (pat) {
                    case 0: counts[j] = 1000; break;                     /* even */
                    case 1: counts[j] = 1 + (size_t)j * 337; break;      /* uneven */
                    case 2: counts[j] = j % 2 ? 0 : 2500; break;         /* empty blocks */
                    case 3: counts[j] = 0; break;                        /* all empty */
                    case 4: counts[j] = j == N - 1 ? 5000 : 1; break;   /* one big */
                    default: counts[j] = 3000 + (size_t)j; break;        /* 3 chunks+ at 4 KiB */
                    }
                }
                uint64_t what = 100 + (uint64_t)pat;
                check_rs(c, counts, what, false, false);
                check_rs(c, counts, what, true, false);
                check_rs(c, counts, what, false, true);
                check_ag(c, counts, what, false, false);
                check_ag(c, counts, what, true, true);
                check_ag_bf16(c, counts, what, false);
                check_ag_bf16(c, counts, what, true);
                check_rs_bf16(c, counts, what, false, false);
                check_rs_bf16(c, counts, what, true, true);
                check_rs_half(ZT_DTYPE_FP16, c, counts, what + 50, true, false);
            }
            check_a2a_ways(c);
            check_shared_many();
            size_t ns[] = {0, 1, 3, 1000, 4097, 100003};
            for (size_t t = 0; t < sizeof ns / sizeof ns[0]; t++) {
                for (int algo = ZT_AR_ALGO_AUTO; algo <= ZT_AR_ALGO_SHM; algo++) {
                    check_ar(c, ns[t], 200 + t, false, algo);
                    check_ar(c, ns[t], 200 + t, true, algo);
                }
                check_ar_bf16(c, ns[t], 250 + t, t % 2 == 1, ZT_AR_ALGO_AUTO);
                check_ar_half(ZT_DTYPE_FP16, c, ns[t], 270 + t, t % 2 == 0, ZT_AR_ALGO_AUTO);
            }
            size_t bs[] = {0, 1, 5000, 300001};
            for (size_t t = 0; t < sizeof bs / sizeof bs[0]; t++)
                for (int root = 0; root < N; root++) check_bcast(c, bs[t], root);
        }
        /* the default 4 MiB chunk, more than one chunk per block */
        check_ar(world, (size_t)N * (1u << 20) + 5, 300, false, ZT_AR_ALGO_AUTO);
        check_ar(world, (size_t)N * (1u << 20) + 5, 300, false, ZT_AR_ALGO_RS_AG);
        check_ar_algos(world);
        check_ar_two_rank_modes(world);
        for (int j = 0; j < N; j++) counts[j] = (1u << 21) + (size_t)j; /* 8 MB: two chunks */
        check_rs(world, counts, 301, true, false);
        for (int j = 0; j < N; j++) counts[j] = (1u << 18) * 3 + (size_t)j; /* bf16: three chunks */
        check_rs_bf16(world, counts, 302, true, false);
        check_ar_bf16(world, (size_t)N * (1u << 18) * 2 + 7, 303, false, ZT_AR_ALGO_AUTO);
        check_small(world);
        check_order(world);
        check_order(small);
        zt_comm_free(small);
        /* sub-groups: split in two halves and the 2-D mesh, collectives inside them */
        zt_comm *half;
        int rc = zt_comm_split(world, g_rank % 2, g_rank, &half, &err);
        CHECK(rc == ZT_OK && half && zt_comm_size(half) == (N + 1 - g_rank % 2) / 2,
              "split: %s", err.msg);
        if (half) {
            CHECK(zt_comm_world_rank(half, zt_comm_rank(half)) == g_rank, "world rank of split");
            float v = (float)g_rank;
            rc = zt_all_reduce_f32(half, &v, 1, "half", &err);
            float want = 0;
            for (int r = g_rank % 2; r < N; r += 2) want += (float)r; /* small ints: exact */
            CHECK(rc == ZT_OK && v == want, "all_reduce in split: %g want %g %s", v, want, err.msg);
            zt_comm_free(half);
        }
        zt_comm *none;
        rc = zt_comm_split(world, g_rank == 0 ? -1 : 1, 0, &none, &err);
        CHECK(rc == ZT_OK && (g_rank == 0) == (none == NULL), "split with color -1");
        zt_comm_free(none);
        if (N % 2 == 0) {
            zt_comm *sh, *rep;
            rc = zt_comm_mesh_2d(world, 2, &sh, &rep, &err);
            CHECK(rc == ZT_OK && zt_comm_size(sh) == 2 && zt_comm_size(rep) == N / 2 &&
                      zt_comm_rank(sh) == g_rank % 2 && zt_comm_rank(rep) == g_rank / 2,
                  "mesh_2d: %s", err.msg);
            CHECK(!strcmp(zt_comm_name(sh), "shard"), "mesh name");
            zt_comm_free(sh);
            zt_comm_free(rep);
        }
        check_errors(world);
        check_threads(world);
        uint64_t h = XXH64_digest(g_digest);
        XXH64_freeState(g_digest);
        printf("digest %d %016llx\n", g_rank, (unsigned long long)h);
        free(counts);
    }
    int fails = g_fail, all_fails = 0, all_checks = 0;
    MPI_Allreduce(&fails, &all_fails, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&g_checks, &all_checks, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (g_rank == 0)
        printf("comm_check: %d ranks: %d checks, %d failed\n", N, all_checks, all_fails);
    zt_comm_free(world);
    zt_comm_finalize(&err);
    return all_fails ? 1 : 0;
}
