/* compressed_all_reduce.c - 1-bit Adam's momentum average (DeepSpeed's compressed_allreduce,
 * deepspeed/runtime/comm/nccl.py): each rank's vector goes out as one sign bit an element and one
 * fp32 scale, with error feedback on both sides (comm.h states the math).
 *
 * compressed_all_reduce_pairwise
 *
 * Accepts:     any N >= 1, any n (the blocks are zt_comm_even_counts(n, N): uneven is fine).
 * Returns:     buf = the decompressed server results, the same bits on every rank; worker_error
 *              (n floats) and server_error (counts[rank] floats) updated.
 * Limitations: every chunk (the comm's chunk size) of a phase is posted at once, no window: a
 *              request per chunk, about n/(4 x 256 Ki) of them on 2 ranks (a few hundred at 124M
 *              parameters); N-1 peers per rank and phase, no ring.
 *
 *   N = 3, rank 1's view (S_r^j: rank r's signs of block j, s_r its scale; T_j: server j's)
 *     phase 1:  send [s_1 | S_1^0] -> 0, [s_1 | S_1^2] -> 2;  recv [s_0 | S_0^1] <- 0, [s_2 | S_2^1] <- 2
 *               y = sum_r sign(S_r^1)·s_r/N + server_error;  T_1 = signs of y, t_1 its scale
 *     phase 2:  send [t_1 | T_1] -> 0, 2;  recv [t_0 | T_0] <- 0, [t_2 | T_2] <- 2
 *     buf:      [ t_0·T_0 | t_1·T_1 | t_2·T_2 ]
 *   A segment on the wire is 4 bytes of scale and ceil(count/8) bytes of signs (bit k of byte
 *   k/8, least significant first; 1 = +1). The worker's x is built in buf, which the server's y
 *   then reuses (buf's own block is dead between the phases), so the only staging is the
 *   segments' bytes (zt_compressed_scratch_bytes).
 */
#include "comm/comm_internal.h"

#include <math.h>
#include <string.h>
#ifdef __AVX2__
#include <immintrin.h>
#endif

size_t zt_compressed_server_floats(size_t n, int nranks, int rank) {
    return n / (size_t)nranks + ((size_t)rank < n % (size_t)nranks ? 1 : 0);
}

static size_t seg_bytes(size_t count) { return 4 + (count + 7) / 8; }

/* send1 and recv2 hold every block's segment (S bytes); recv1 N of the own, send2 one */
size_t zt_compressed_scratch_bytes(size_t n, int nranks) {
    if (nranks <= 1) return 0;
    size_t S = 0, own_max = seg_bytes(zt_compressed_server_floats(n, nranks, 0));
    for (int j = 0; j < nranks; j++) S += seg_bytes(zt_compressed_server_floats(n, nranks, j));
    return 2 * S + (size_t)(nranks + 1) * own_max;
}

/* ||x||_2 / sqrt(n): the squares (exact in double) summed in double over 8 lanes in a fixed order,
 * rounded to fp32 once */
static float rms_scale(const float *x, size_t n) {
    if (!n) return 0.0f;
    double lane[8] = {0};
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; l++) lane[l] += (double)x[i + l] * (double)x[i + l];
    double s = ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
    for (; i < n; i++) s += (double)x[i] * (double)x[i];
    return (float)(sqrt(s) / sqrt((double)n));
}

/* The signs of x[0, n) into bits (1: x >= 0, -0 or NaN) and error = x - scale·sign(x), a byte (8
 * elements) at a time (AVX2: one compare, movemask and blend; elsewhere the same in scalar code);
 * bytes split across threads */
static void compress(const float *x, size_t n, float scale, unsigned char *bits, float *error) {
    const float neg = -scale;
    const size_t full = n / 8;
#pragma omp parallel for schedule(static) if (n > (1u << 20))
    for (size_t b = 0; b < full; b++) {
        const float *xb = x + 8 * b;
        float *eb = error + 8 * b;
#ifdef __AVX2__
        const __m256 v = _mm256_loadu_ps(xb);
        const __m256 is_neg = _mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_LT_OQ); /* NaN: false */
        bits[b] = (unsigned char)(~_mm256_movemask_ps(is_neg) & 0xff);
        _mm256_storeu_ps(eb, _mm256_sub_ps(v, _mm256_blendv_ps(_mm256_set1_ps(scale), _mm256_set1_ps(neg), is_neg)));
#else
        unsigned m = 0;
        for (int k = 0; k < 8; k++) {
            const bool pos = !(xb[k] < 0.0f);
            m |= (unsigned)pos << k;
            eb[k] = xb[k] - (pos ? scale : neg);
        }
        bits[b] = (unsigned char)m;
#endif
    }
    if (n % 8) {
        unsigned m = 0;
        for (size_t i = 8 * full; i < n; i++) {
            const bool pos = !(x[i] < 0.0f);
            m |= (unsigned)pos << (i - 8 * full);
            error[i] = x[i] - (pos ? scale : neg);
        }
        bits[full] = (unsigned char)m;
    }
}

/* y[0, n) = (add: y +) scale·sign for the n signs in bits: each byte's 8 values from a table of
 * the 256 patterns (8 KiB, built per call) */
static void expand(const unsigned char *bits, size_t n, float scale, float *y, bool add) {
    _Alignas(32) float tab[256][8];
    for (int m = 0; m < 256; m++)
        for (int k = 0; k < 8; k++) tab[m][k] = (m >> k) & 1 ? scale : -scale;
    const size_t full = n / 8;
    if (add) {
#pragma omp parallel for schedule(static) if (n > (1u << 20))
        for (size_t b = 0; b < full; b++) {
            const float *t = tab[bits[b]];
            float *yb = y + 8 * b;
            for (int k = 0; k < 8; k++) yb[k] += t[k];
        }
    } else {
#pragma omp parallel for schedule(static) if (n > (1u << 20))
        for (size_t b = 0; b < full; b++) memcpy(y + 8 * b, tab[bits[b]], 8 * sizeof(float));
    }
    for (size_t i = 8 * full; i < n; i++) {
        const float v = tab[bits[full]][i - 8 * full];
        y[i] = add ? y[i] + v : v;
    }
}

/* Posts a segment of `bytes` to or from peer as chunks of the comm's chunk size from request *idx
 * on (each finished chunk is progress to the wait loop, and MPI moves a large message only while
 * it is being polled); each peer's chunks are posted in order, so they match in order. */
static int post_chunks(zt_comm_op *op, int *idx, bool recv, unsigned char *buf, size_t bytes, int peer,
                       zt_error *err) {
    size_t chunk = op->c->chunk_bytes;
    for (size_t lo = 0; lo < bytes; lo += chunk) {
        int rc = zt_op_post_(op, (*idx)++, recv, buf + lo, bytes - lo < chunk ? bytes - lo : chunk, peer, err);
        if (rc) return rc;
    }
    return ZT_OK;
}

static size_t seg_off(const zt_comm *c, int j) { /* byte offset of block j's segment among all N */
    size_t o = 0;
    for (int r = 0; r < j; r++) o += seg_bytes(c->off[r + 1] - c->off[r]);
    return o;
}

/* Phase 1 done: the server's sum of the N workers' blocks, its compression, phase 2 posted */
static int serve(zt_comm_op *op, zt_error *err) {
    zt_comm *c = op->c;
    int N = c->size, me = c->rank;
    size_t cnt = c->off[me + 1] - c->off[me], seg = seg_bytes(cnt);
    float *y = op->car.buf + c->off[me];
    const float inv_n = 1.0f / (float)N;
    for (int r = 0; r < N; r++) {
        const unsigned char *in = op->car.recv1 + (size_t)r * seg;
        float s;
        memcpy(&s, in, 4);
        const float w = s * inv_n;
        expand(in + 4, cnt, w, y, r > 0);
    }
    const float *se = op->car.server_error;
#pragma omp parallel for simd schedule(static) if (cnt > (1u << 20))
    for (size_t i = 0; i < cnt; i++) y[i] += se[i];
    float t = rms_scale(y, cnt);
    memcpy(op->car.send2, &t, 4);
    compress(y, cnt, t, op->car.send2 + 4, op->car.server_error);
    /* phase 2: receives first, then the own segment to every peer */
    int k = op->car.phase2_base;
    for (int s = 1; s < N; s++) {
        int r = (me - s + N) % N;
        size_t o = seg_off(c, r), b = seg_bytes(c->off[r + 1] - c->off[r]);
        int rc = post_chunks(op, &k, true, op->car.recv2 + o, b, r, err);
        if (rc) return rc;
    }
    for (int s = 1; s < N; s++) {
        int rc = post_chunks(op, &k, false, op->car.send2, seg, (me + s) % N, err);
        if (rc) return rc;
    }
    memcpy(op->car.recv2 + seg_off(c, me), op->car.send2, seg);
    op->car.phase = 2;
    return ZT_OK;
}

/* Phase 2 done: every block decompressed into buf */
static void unpack(zt_comm_op *op) {
    zt_comm *c = op->c;
    for (int j = 0; j < c->size; j++) {
        const unsigned char *in = op->car.recv2 + seg_off(c, j);
        float t;
        memcpy(&t, in, 4);
        float *dst = op->car.buf + c->off[j];
        size_t cnt = c->off[j + 1] - c->off[j];
        expand(in + 4, cnt, t, dst, false);
    }
}

static int car_advance(zt_comm_op *op, zt_error *err) {
    if (op->pending) return ZT_OK;
    if (op->car.phase == 1) return serve(op, err);
    unpack(op);
    op->done = true;
    return ZT_OK;
}

int zt_compressed_all_reduce(zt_comm *c, float *buf, size_t n, float *worker_error, float *server_error,
                             const char *tag, zt_error *err) {
    zt_error local;
    if (!err) err = &local;
    if (n && (!buf || !worker_error || !server_error))
        return zt_error_set(err, ZT_ERR_USAGE, "compressed_all_reduce on comm '%s': NULL buffer", c->name);
    int N = c->size, me = c->rank;
    if (N == 1) return ZT_OK;
    int rc = zt_comm_enter_(c, "compressed_all_reduce", err);
    if (rc) return rc;
    size_t total;
    zt_comm_even_counts(n, N, c->ucounts);
    if ((rc = zt_counts_check_(c, "compressed_all_reduce", c->ucounts, &total, err))) goto out;
    size_t S = seg_off(c, N), own = c->off[me + 1] - c->off[me], seg = seg_bytes(own);
    if ((rc = zt_comm_scratch_grow_(c, zt_compressed_scratch_bytes(n, N), err))) goto out;
    unsigned char *send1 = (unsigned char *)c->scratch, *recv1 = send1 + S, *send2 = recv1 + (size_t)N * seg,
                  *recv2 = send2 + seg;
    /* the worker: x = buf + worker_error, its scale, its signs per block, the new error */
#pragma omp parallel for simd schedule(static) if (n > (1u << 20))
    for (size_t i = 0; i < n; i++) buf[i] += worker_error[i];
    float s = rms_scale(buf, n);
    for (int j = 0; j < N; j++) {
        unsigned char *o = send1 + seg_off(c, j);
        memcpy(o, &s, 4);
        compress(buf + c->off[j], c->off[j + 1] - c->off[j], s, o + 4, worker_error + c->off[j]);
    }
    /* what this rank sends: its segments to the N-1 servers, then its server block to N-1 ranks */
    size_t sent = S - seg + (size_t)(N - 1) * seg;
    /* requests: every chunk of both phases, both directions (phase 1 first) */
    size_t own_chunks = zt_nchunks_(seg, c->chunk_bytes), others = 0;
    for (int j = 0; j < N; j++)
        if (j != me) others += zt_nchunks_(seg_bytes(c->off[j + 1] - c->off[j]), c->chunk_bytes);
    size_t phase1 = (size_t)(N - 1) * own_chunks + others;
    if (2 * phase1 > (size_t)INT32_MAX / 2) {
        rc = zt_error_set(err, ZT_ERR_USAGE, "compressed_all_reduce on comm '%s': %zu elements need too many messages",
                          c->name, n);
        goto out;
    }
    zt_comm_op *op = NULL;
    rc = zt_op_begin_(c, ZT_COLL_COMPRESSED_ALL_REDUCE, ZT_SUB_CAR, "compressed_all_reduce", tag, sent,
                      (int)(2 * phase1), true, false, &op, err);
    if (rc) goto out;
    op->car.buf = buf;
    op->car.worker_error = worker_error;
    op->car.server_error = server_error;
    op->car.n = n;
    op->car.send1 = send1;
    op->car.recv1 = recv1;
    op->car.send2 = send2;
    op->car.recv2 = recv2;
    op->car.phase = 1;
    op->car.phase2_base = (int)phase1;
    op->on_complete = NULL;
    op->advance = car_advance;
    memcpy(recv1 + (size_t)me * seg, send1 + seg_off(c, me), seg); /* the own block, to itself */
    int k = 0;
    for (int d = 1; d < N && !rc; d++) { /* receives first */
        int r = (me - d + N) % N;
        rc = post_chunks(op, &k, true, recv1 + (size_t)r * seg, seg, r, err);
    }
    for (int d = 1; d < N && !rc; d++) {
        int r = (me + d) % N;
        rc = post_chunks(op, &k, false, send1 + seg_off(c, r), seg_bytes(c->off[r + 1] - c->off[r]), r, err);
    }
    if (!rc) rc = zt_op_kick_(op, err);
    if (!rc) rc = zt_op_wait_(op, err);
out:
    zt_comm_leave_(c);
    return rc;
}
