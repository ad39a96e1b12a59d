/* test_attention_ref.h - the double-precision reference of causal grouped-query attention the
 * kernel tests compare with (test_kernels_llama.c, test_flash_attention.c): forward (output,
 * logsumexp, probabilities) and backward, on separate q (B,T,NH*hs), k, v (B,T,NKV*hs), query head
 * h reading KV head h / (NH/NKV). Header-only (static), included after test_kernel_check.h. */
#ifndef ZT_TEST_ATTENTION_REF_H
#define ZT_TEST_ATTENTION_REF_H

typedef struct {
    int B, T, NH, NKV, hs;
    double *q, *k, *v, *g; /* g: the upstream gradient (B,T,C) */
    const int32_t *pos;    /* (B,T) packed documents' positions: query t sees keys t - pos .. t; NULL: 0 .. t */
} gqa_ctx;

/* the first key query t of row b sees */
__attribute__((unused)) static int ref_first_key(const gqa_ctx *c, int b, int t)
{
    return c->pos ? t - c->pos[(size_t)b * c->T + t] : 0;
}

/* out (B,T,C), lse (B,NH,T) (NULL: not wanted), P (B,NH,T,T) (NULL: not wanted) */
__attribute__((unused)) static void ref_gqa_forward(double *out, double *lse, double *P, const gqa_ctx *c)
{
    int C = c->NH * c->hs, KV = c->NKV * c->hs, G = c->NH / c->NKV, T = c->T;
    double *p = dalloc((size_t)T);
    for (int b = 0; b < c->B; b++)
        for (int h = 0; h < c->NH; h++)
            for (int t = 0; t < T; t++) {
                const double *qi = c->q + ((size_t)b * T + t) * C + h * c->hs;
                double mx = -INFINITY, sum = 0;
                int u0 = ref_first_key(c, b, t);
                for (int u = u0; u <= t; u++) {
                    const double *ku = c->k + ((size_t)b * T + u) * KV + (h / G) * c->hs;
                    double s = 0;
                    for (int i = 0; i < c->hs; i++)
                        s += qi[i] * ku[i];
                    p[u] = s / sqrt((double)c->hs);
                    mx = p[u] > mx ? p[u] : mx;
                }
                for (int u = u0; u <= t; u++)
                    sum += (p[u] = exp(p[u] - mx));
                if (lse)
                    lse[((size_t)b * c->NH + h) * T + t] = mx + log(sum);
                for (int u = u0; u <= t; u++)
                    p[u] /= sum;
                if (P)
                    for (int u = 0; u < T; u++)
                        P[(((size_t)b * c->NH + h) * T + t) * T + u] = u >= u0 && u <= t ? p[u] : 0.0;
                double *o = out + ((size_t)b * T + t) * C + h * c->hs;
                for (int i = 0; i < c->hs; i++) {
                    double s = 0;
                    for (int u = u0; u <= t; u++)
                        s += p[u] * c->v[((size_t)b * T + u) * KV + (h / G) * c->hs + i];
                    o[i] = s;
                }
            }
    free(p);
}

/* dq (B,T,C), dk, dv (B,T,KV) assigned: d (Σ g·out) */
__attribute__((unused)) static void ref_gqa_backward(double *dq, double *dk, double *dv, const gqa_ctx *c)
{
    int C = c->NH * c->hs, KV = c->NKV * c->hs, G = c->NH / c->NKV, T = c->T, hs = c->hs;
    size_t nq = (size_t)c->B * T * C, nk = (size_t)c->B * T * KV;
    double *out = dalloc(nq), *P = dalloc((size_t)c->B * c->NH * T * T), *dp = dalloc((size_t)T);
    double scale = 1.0 / sqrt((double)hs);
    ref_gqa_forward(out, NULL, P, c);
    memset(dq, 0, nq * sizeof *dq), memset(dk, 0, nk * sizeof *dk), memset(dv, 0, nk * sizeof *dv);
    for (int b = 0; b < c->B; b++)
        for (int h = 0; h < c->NH; h++)
            for (int t = 0; t < T; t++) {
                const double *p = P + (((size_t)b * c->NH + h) * T + t) * T;
                const double *dO = c->g + ((size_t)b * T + t) * C + h * hs;
                size_t qo = ((size_t)b * T + t) * C + h * hs;
                double dot = 0;
                for (int u = 0; u <= t; u++) {
                    size_t vo = ((size_t)b * T + u) * KV + (h / G) * hs;
                    dp[u] = 0;
                    for (int i = 0; i < hs; i++) {
                        dp[u] += dO[i] * c->v[vo + i];
                        dv[vo + i] += p[u] * dO[i];
                    }
                    dot += dp[u] * p[u];
                }
                for (int u = 0; u <= t; u++) {
                    double ds = p[u] * (dp[u] - dot) * scale;
                    size_t ko = ((size_t)b * T + u) * KV + (h / G) * hs;
                    for (int i = 0; i < hs; i++) {
                        dq[qo + i] += ds * c->k[ko + i];
                        dk[ko + i] += ds * c->q[qo + i];
                    }
                }
            }
    free(out), free(P), free(dp);
}

/* L = Σ g·out, the loss whose finite differences check the gradients (fd_grad's loss_fn) */
__attribute__((unused)) static double ref_gqa_loss(void *p)
{
    gqa_ctx *c = p;
    size_t n = (size_t)c->B * c->T * c->NH * c->hs;
    double *o = dalloc(n);
    ref_gqa_forward(o, NULL, NULL, c);
    double l = dot_gd(c->g, o, n);
    free(o);
    return l;
}

#endif
