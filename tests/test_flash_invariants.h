/* test_flash_invariants.h - what test_flash_attention.c (fp32 products) and
 * test_flash_attention_bf16.c (bf16 products) both check of a flash attention result, given the
 * inputs and the kernels' outputs on them: the same bits on a rerun and on 1 thread; causality
 * (changing token u's q, k and v leaves every output row before u bit-identical; changing dO of
 * token u leaves dq of the rows before it and dk, dv of the keys after it bit-identical); and, for
 * multi-head shapes, GPT-2's fused-qkv wrappers giving the bits of the strided GQA call.
 * Header-only, included after cmocka.h and test_kernel_check.h. */
#ifndef ZT_TEST_FLASH_INVARIANTS_H
#define ZT_TEST_FLASH_INVARIANTS_H

typedef struct flash_case {
    int B, T, NH, NKV, hs;
    const float *q, *k, *v, *g;              /* inputs: q, g (B,T,NH*hs), k, v (B,T,NKV*hs) */
    const float *out, *lse, *dq, *dk, *dv;   /* the kernels' results on them */
    float *scratch;
    bool bf16;                               /* the products the results were computed with */
} flash_case;

static void flash_invariants(const flash_case *f)
{
    const int B = f->B, T = f->T, NH = f->NH, NKV = f->NKV, hs = f->hs, C = NH * hs, KV = NKV * hs;
    const size_t nq = (size_t)B * T * C, nk = (size_t)B * T * KV, nl = (size_t)B * NH * T;
    const bool bf = f->bf16;
    float *out2 = falloc(nq), *lse2 = falloc(nl), *dq2 = falloc(nq), *dk2 = falloc(nk), *dv2 = falloc(nk);

    /* a rerun, and 1 thread: the same bits */
    int nt = omp_get_max_threads();
    for (int rep = 0; rep < 2; rep++) {
        omp_set_num_threads(rep == 0 ? nt : 1);
        flash_attention_gqa_forward(out2, lse2, f->scratch, f->q, f->k, f->v, B, T, NH, NKV, hs, C, KV, bf, NULL);
        flash_attention_gqa_backward(dq2, dk2, dv2, f->scratch, f->g, f->q, f->k, f->v, out2, lse2, B, T, NH, NKV, hs,
                                     C, KV, bf, NULL);
        assert_same_bits("flash out rerun / 1 thread", f->out, out2, nq);
        assert_same_bits("flash lse rerun / 1 thread", f->lse, lse2, nl);
        assert_same_bits("flash dq rerun / 1 thread", f->dq, dq2, nq);
        assert_same_bits("flash dk rerun / 1 thread", f->dk, dk2, nk);
        assert_same_bits("flash dv rerun / 1 thread", f->dv, dv2, nk);
    }
    omp_set_num_threads(nt);

    /* causality */
    int u = T / 2 + 1 < T ? T / 2 + 1 : T - 1;
    float *q3 = fdup(f->q, nq), *k3 = fdup(f->k, nk), *v3 = fdup(f->v, nk), *g3 = fdup(f->g, nq);
    for (int b = 0; b < B; b++) {
        for (int i = 0; i < C; i++)
            q3[((size_t)b * T + u) * C + i] += 100.0f, g3[((size_t)b * T + u) * C + i] += 1.0f;
        for (int i = 0; i < KV; i++)
            k3[((size_t)b * T + u) * KV + i] += 100.0f, v3[((size_t)b * T + u) * KV + i] += 100.0f;
    }
    flash_attention_gqa_forward(out2, lse2, f->scratch, q3, k3, v3, B, T, NH, NKV, hs, C, KV, bf, NULL);
    for (int b = 0; b < B; b++) {
        assert_same_bits("flash causal: rows before the change", f->out + (size_t)b * T * C, out2 + (size_t)b * T * C,
                         (size_t)u * C);
        assert_true(memcmp(f->out + ((size_t)b * T + u) * C, out2 + ((size_t)b * T + u) * C, (size_t)C * 4) != 0);
    }
    flash_attention_gqa_backward(dq2, dk2, dv2, f->scratch, g3, f->q, f->k, f->v, f->out, f->lse, B, T, NH, NKV, hs, C,
                                 KV, bf, NULL);
    for (int b = 0; b < B; b++) {
        assert_same_bits("flash causal: dq of rows before dO's change", f->dq + (size_t)b * T * C,
                         dq2 + (size_t)b * T * C, (size_t)u * C);
        size_t after = ((size_t)b * T + u + 1) * KV, nafter = (size_t)(T - u - 1) * KV;
        assert_same_bits("flash causal: dk of keys after it", f->dk + after, dk2 + after, nafter);
        assert_same_bits("flash causal: dv of keys after it", f->dv + after, dv2 + after, nafter);
    }

    /* multi-head: GPT-2's fused-qkv wrappers give the same bits as the strided GQA call */
    if (NKV == NH) {
        float *qkv = falloc(3 * nq), *dqkv = falloc(3 * nq);
        for (size_t bt = 0; bt < (size_t)B * T; bt++) {
            memcpy(qkv + bt * 3 * C, f->q + bt * C, (size_t)C * 4);
            memcpy(qkv + bt * 3 * C + C, f->k + bt * C, (size_t)C * 4);
            memcpy(qkv + bt * 3 * C + 2 * C, f->v + bt * C, (size_t)C * 4);
        }
        flash_attention_forward(out2, lse2, f->scratch, qkv, B, T, C, NH, bf, NULL);
        flash_attention_backward(dqkv, f->scratch, f->g, qkv, out2, lse2, B, T, C, NH, bf, NULL);
        assert_same_bits("flash fused qkv out", f->out, out2, nq);
        assert_same_bits("flash fused qkv lse", f->lse, lse2, nl);
        for (size_t bt = 0; bt < (size_t)B * T; bt++) {
            assert_same_bits("flash fused dq", f->dq + bt * C, dqkv + bt * 3 * C, (size_t)C);
            assert_same_bits("flash fused dk", f->dk + bt * C, dqkv + bt * 3 * C + C, (size_t)C);
            assert_same_bits("flash fused dv", f->dv + bt * C, dqkv + bt * 3 * C + 2 * C, (size_t)C);
        }
        free(qkv), free(dqkv);
    }
    free(out2), free(lse2), free(dq2), free(dk2), free(dv2), free(q3), free(k3), free(v3), free(g3);
}

#endif /* ZT_TEST_FLASH_INVARIANTS_H */
