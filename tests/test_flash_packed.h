/* test_flash_packed.h - packed documents in the flash kernels (kernels.h's pos, zt_batch.positions),
 * checked alike for fp32 products (test_flash_attention.c) and bf16 products
 * (test_flash_attention_bf16.c): a (B,T) batch whose rows hold several documents of varied lengths
 * (a 1-token document, documents crossing the query tiles, key blocks and query chunks, one filling
 * its row) gives, for each document, what the kernels give on that document alone (B = 1, T = its
 * length, no positions): out, lse, dq, dk and dv, rows and heads of the document.
 *   - Bit for bit where the document starts at a multiple of 128 (the backward's key block, and a
 *     multiple of the forward's query tile, 64): the packed tiles then cut the document where its
 *     own run cuts it, every kept element sees the same sequence of roundings, and what the packed
 *     row adds is masked zeros (x + 0 = x).
 *   - Elsewhere within rtol (check_close's measure, the document's own run as the reference): the
 *     key blocks cut the document elsewhere, so the online softmax's rescaling and the sums' order
 *     differ; both runs are within test_flash_attention.c's bounds of the exact result.
 *   - Isolation: scaling one document's q, k, v and dO by 100 (scores that overflow exp where not
 *     masked) leaves every other document's results bit-identical and all finite.
 *   - The same bits on 1 thread and on a rerun; outputs are assigned (garbage before).
 * Header-only, included after test_kernel_check.h. */
#ifndef ZT_TEST_FLASH_PACKED_H
#define ZT_TEST_FLASH_PACKED_H

#define PACKED_MAX_DOCS 16

/* a row's documents: lengths, 0-terminated; they sum to T */
typedef struct packed_row {
    int len[PACKED_MAX_DOCS];
} packed_row;

/* pos (B,T) from the rows' document lengths */
static void packed_positions(int32_t *pos, int B, int T, const packed_row *rows)
{
    for (int b = 0; b < B; b++) {
        int t = 0;
        for (int d = 0; rows[b].len[d]; d++)
            for (int i = 0; i < rows[b].len[d]; i++)
                pos[(size_t)b * T + t++] = i;
        assert_int_equal(t, T);
    }
}

/* rows s .. s+n of row b of x (B,T,w), contiguous, into y (n, w) */
static void rows_of(float *y, const float *x, int b, int T, int s, int n, int w)
{
    memcpy(y, x + ((size_t)b * T + s) * w, (size_t)n * w * sizeof *y);
}

/* the lse of rows s .. s+n of row b, every head: (NH, n) from (B,NH,T) */
static void lse_rows(float *y, const float *lse, int b, int NH, int T, int s, int n)
{
    for (int h = 0; h < NH; h++)
        memcpy(y + (size_t)h * n, lse + ((size_t)b * NH + h) * T + s, (size_t)n * sizeof *y);
}

typedef struct packed_tol {
    double out, lse, grad; /* rtol of an unaligned document against its own run */
} packed_tol;

/* packed vs alone: bitwise when aligned, else within tol; returns how many documents were bitwise */
static int packed_compare(const char *tag, const float *x, const float *alone, size_t n, bool aligned, double tol)
{
    if (aligned) {
        assert_same_bits(tag, x, alone, n);
        return 1;
    }
    double *r = to_double(alone, n);
    check_close(tag, x, r, n, tol);
    free(r);
    return 0;
}

static void flash_packed_case(int B, int T, int NH, int NKV, int hs, const packed_row *rows, bool bf, packed_tol tol)
{
    const int C = NH * hs, KV = NKV * hs;
    const size_t nq = (size_t)B * T * C, nk = (size_t)B * T * KV, nl = (size_t)B * NH * T;
    float *q = falloc(nq), *k = falloc(nk), *v = falloc(nk), *g = falloc(nq);
    fill(q, nq, 1.5f), fill(k, nk, 1.5f), fill(v, nk, 1.0f), fill(g, nq, 1.0f);
    int32_t *pos = malloc((size_t)B * T * sizeof *pos);
    assert_non_null(pos);
    packed_positions(pos, B, T, rows);
    float *scratch = falloc(flash_attention_scratch_floats(B, T, NH, NKV, hs));
    float *out = falloc(nq), *lse = falloc(nl), *dq = falloc(nq), *dk = falloc(nk), *dv = falloc(nk);
    fill(out, nq, 100.0f), fill(dq, nq, 100.0f), fill(dk, nk, 100.0f), fill(dv, nk, 100.0f); /* assigned */
    flash_attention_gqa_forward(out, lse, scratch, q, k, v, B, T, NH, NKV, hs, C, KV, bf, pos);
    flash_attention_gqa_backward(dq, dk, dv, scratch, g, q, k, v, out, lse, B, T, NH, NKV, hs, C, KV, bf, pos);

    /* each document alone */
    int docs = 0, bitwise = 0;
    char tag[160];
    for (int b = 0; b < B; b++)
        for (int d = 0, s = 0; rows[b].len[d]; s += rows[b].len[d++]) {
            int n = rows[b].len[d];
            bool aligned = s % 128 == 0;
            size_t mq = (size_t)n * C, mk = (size_t)n * KV, ml = (size_t)n * NH;
            float *dq_ = falloc(mq), *dk_ = falloc(mk), *dv_ = falloc(mk), *g_ = falloc(mq), *q_ = falloc(mq);
            float *k_ = falloc(mk), *v_ = falloc(mk), *o_ = falloc(mq), *l_ = falloc(ml);
            float *po = falloc(mq), *pl = falloc(ml), *pq = falloc(mq), *pk = falloc(mk), *pv = falloc(mk);
            float *sc = falloc(flash_attention_scratch_floats(1, n, NH, NKV, hs));
            rows_of(q_, q, b, T, s, n, C), rows_of(k_, k, b, T, s, n, KV), rows_of(v_, v, b, T, s, n, KV);
            rows_of(g_, g, b, T, s, n, C);
            flash_attention_gqa_forward(o_, l_, sc, q_, k_, v_, 1, n, NH, NKV, hs, C, KV, bf, NULL);
            flash_attention_gqa_backward(dq_, dk_, dv_, sc, g_, q_, k_, v_, o_, l_, 1, n, NH, NKV, hs, C, KV, bf, NULL);
            rows_of(po, out, b, T, s, n, C), lse_rows(pl, lse, b, NH, T, s, n), rows_of(pq, dq, b, T, s, n, C);
            rows_of(pk, dk, b, T, s, n, KV), rows_of(pv, dv, b, T, s, n, KV);
            snprintf(tag, sizeof tag, "%s packed row %d doc at %d len %d: out", bf ? "bf16" : "fp32", b, s, n);
            bitwise += packed_compare(tag, po, o_, mq, aligned, tol.out);
            snprintf(tag, sizeof tag, "  ... lse");
            packed_compare(tag, pl, l_, ml, aligned, tol.lse);
            snprintf(tag, sizeof tag, "  ... dq");
            packed_compare(tag, pq, dq_, mq, aligned, tol.grad);
            snprintf(tag, sizeof tag, "  ... dk");
            packed_compare(tag, pk, dk_, mk, aligned, tol.grad);
            snprintf(tag, sizeof tag, "  ... dv");
            packed_compare(tag, pv, dv_, mk, aligned, tol.grad);
            docs++;
            free(dq_), free(dk_), free(dv_), free(g_), free(q_), free(k_), free(v_), free(o_), free(l_);
            free(po), free(pl), free(pq), free(pk), free(pv), free(sc);
        }
    print_message("  %s packed B%d T%d NH%d NKV%d hs%d: %d documents, %d bit-identical to their own run\n",
                  bf ? "bf16" : "fp32", B, T, NH, NKV, hs, docs, bitwise);

    /* 1 thread and a rerun: the same bits */
    float *out2 = falloc(nq), *lse2 = falloc(nl), *dq2 = falloc(nq), *dk2 = falloc(nk), *dv2 = falloc(nk);
    int nt = omp_get_max_threads();
    for (int rep = 0; rep < 2; rep++) {
        omp_set_num_threads(rep == 0 ? nt : 1);
        flash_attention_gqa_forward(out2, lse2, scratch, q, k, v, B, T, NH, NKV, hs, C, KV, bf, pos);
        flash_attention_gqa_backward(dq2, dk2, dv2, scratch, g, q, k, v, out2, lse2, B, T, NH, NKV, hs, C, KV, bf,
                                     pos);
        assert_same_bits("packed rerun out", out, out2, nq);
        assert_same_bits("packed rerun lse", lse, lse2, nl);
        assert_same_bits("packed rerun dq", dq, dq2, nq);
        assert_same_bits("packed rerun dk", dk, dk2, nk);
        assert_same_bits("packed rerun dv", dv, dv2, nk);
    }
    omp_set_num_threads(nt);

    /* isolation: row 0's first document scaled by 100; the others keep their bits */
    int n0 = rows[0].len[0];
    if (rows[0].len[1]) {
        for (int t = 0; t < n0; t++) {
            for (int i = 0; i < C; i++)
                q[(size_t)t * C + i] *= 100.0f, g[(size_t)t * C + i] *= 100.0f;
            for (int i = 0; i < KV; i++)
                k[(size_t)t * KV + i] *= 100.0f, v[(size_t)t * KV + i] *= 100.0f;
        }
        flash_attention_gqa_forward(out2, lse2, scratch, q, k, v, B, T, NH, NKV, hs, C, KV, bf, pos);
        flash_attention_gqa_backward(dq2, dk2, dv2, scratch, g, q, k, v, out2, lse2, B, T, NH, NKV, hs, C, KV, bf,
                                     pos);
        size_t skip_q = (size_t)n0 * C, skip_k = (size_t)n0 * KV;
        assert_same_bits("isolation out", out + skip_q, out2 + skip_q, nq - skip_q);
        assert_same_bits("isolation dq", dq + skip_q, dq2 + skip_q, nq - skip_q);
        assert_same_bits("isolation dk", dk + skip_k, dk2 + skip_k, nk - skip_k);
        assert_same_bits("isolation dv", dv + skip_k, dv2 + skip_k, nk - skip_k);
        for (int h = 0; h < NH; h++)
            assert_same_bits("isolation lse", lse + (size_t)h * T + n0, lse2 + (size_t)h * T + n0, (size_t)(T - n0));
        for (size_t i = 0; i < nq; i++)
            assert_true(isfinite(out2[i]) && isfinite(dq2[i]));
        for (size_t i = 0; i < nk; i++)
            assert_true(isfinite(dk2[i]) && isfinite(dv2[i]));
    }
    free(out2), free(lse2), free(dq2), free(dk2), free(dv2);
    free(q), free(k), free(v), free(g), free(pos), free(scratch), free(out), free(lse), free(dq), free(dk), free(dv);
}

#endif
