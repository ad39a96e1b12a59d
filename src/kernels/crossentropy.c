/* crossentropy.c - softmax and cross-entropy fused: softmax_xent_forward / softmax_xent_backward
 * (see kernels.h).
 *
 * Forward, per row of V logits (rows split statically over threads), three sweeps over the row
 * (201 KB at V = 50257, so sweeps 2 and 3 hit L2):
 *   1. m = max(x)
 *   2. e = exp(x - m) stored in place; S = sum(e) accumulated in double, 16 lanes
 *   3. p = e * (1/S)
 * and loss = log(S) - (x[target] - m) in double, which stays finite even when p[target]
 * underflows to 0 (x - m <= 0, so e <= 1 and S >= 1: no overflow for any finite logits).
 *
 * Why double for S: in fp32 each of the 16 lanes would add ~3,140 terms, and a running fp32 sum
 * loses up to ~n/2 ulp of the small terms added late (up to ~1e-4 relative in the worst case,
 * ~1e-6 typical). Converting each vector to two 8-lane double vectors costs two conversions and
 * two adds per 16 elements, hidden behind the exp; S is then exact to ~1e-15, and the error of p
 * is the exp's own (<= 2 ulp) plus two roundings.
 *
 * Backward in place: d = (p - onehot(target)) * dloss, with the target entry computed as
 * (p - 1) * dloss. A negative target (PyTorch's ignore_index) has loss 0 and d 0 (its dloss is 0:
 * the engine's, zt_engine_run_backward). Every row is one thread's, so nothing depends on the thread count. Under bf16 /
 * fp16 compute (softmax_xent_backward_to) the row is rounded chunk by chunk from the stack into the
 * LM head's operand (its staging), so the fp32 (N,V) gradient is never written.
 *
 * Vocabulary-parallel (softmax_xent_rowmax / _exp / _finish, _backward_cols): the three sweeps of
 * a row, the same row functions, one at a time over every row, so that the caller can combine the
 * parts' maxima, sums and target terms between them (Megatron's vocab_parallel_cross_entropy); the
 * full logits are never gathered.
 */
#include "kernels/kernels.h"
#include "kernels/vecmath.h"

/* x = exp(x - mx) in place; returns the sum (double, 16 lanes) */
static double row_exp(float *x, int V, float mx)
{
    int i;
    zt_vf m = zt_vset1(mx);
    zt_vacc acc = zt_vacc_zero();
    for (i = 0; i + ZT_VL <= V; i += ZT_VL) {
        zt_vf e = zt_vexp(zt_vsub(zt_vload(x + i), m));
        zt_vacc_add(&acc, e);
        zt_vstore(x + i, e);
    }
    if (i < V) {
        zt_vf e = zt_vexp(zt_vsub(zt_vloadn(x + i, V - i, -INFINITY), m)); /* spare lanes: 0 */
        zt_vacc_add(&acc, e);
        zt_vstoren(x + i, e, V - i);
    }
    return zt_vacc_sum(acc);
}

/* x *= 1/S */
static void row_scale(float *x, int V, double S)
{
    int i;
    zt_vf inv = zt_vset1((float)(1.0 / S));
    for (i = 0; i + ZT_VL <= V; i += ZT_VL)
        zt_vstore(x + i, zt_vmul(zt_vload(x + i), inv));
    if (i < V)
        zt_vstoren(x + i, zt_vmul(zt_vloadn(x + i, V - i, 0.0f), inv), V - i);
}

/* A negative target is not counted (ignore_index): the probabilities all the same, loss 0. */
static void xent_row(float *loss, float *x, int target, int V)
{
    float xt = target >= 0 ? x[target] : 0.0f, mx = zt_row_max(x, V);
    double S = row_exp(x, V, mx);
    row_scale(x, V, S);
    *loss = target >= 0 ? (float)(log(S) - ((double)xt - (double)mx)) : 0.0f;
}

void softmax_xent_forward(float *losses, float *logits_to_probs, const int32_t *targets, int N,
                          int V)
{
#pragma omp parallel for schedule(static)
    for (int r = 0; r < N; r++)
        xent_row(losses + r, logits_to_probs + (size_t)r * V, targets[r], V);
}

void softmax_xent_rowmax(float *mx, const float *logits, int N, int V)
{
#pragma omp parallel for schedule(static)
    for (int r = 0; r < N; r++)
        mx[r] = zt_row_max(logits + (size_t)r * V, V);
}

void softmax_xent_exp(double *sums, double *xt, float *logits_to_e, const float *mx, const int32_t *targets,
                      int N, int V, int64_t v0)
{
#pragma omp parallel for schedule(static)
    for (int r = 0; r < N; r++) {
        float *x = logits_to_e + (size_t)r * V;
        int64_t t = (int64_t)targets[r] - v0;
        xt[r] = t >= 0 && t < V ? (double)x[t] - (double)mx[r] : 0.0;
        sums[r] = row_exp(x, V, mx[r]);
    }
}

void softmax_xent_finish(float *losses, float *e_to_probs, const double *S, const double *XT, int N, int V)
{
#pragma omp parallel for schedule(static)
    for (int r = 0; r < N; r++) {
        row_scale(e_to_probs + (size_t)r * V, V, S[r]);
        losses[r] = (float)(log(S[r]) - XT[r]);
    }
}

void softmax_xent_backward(float *probs_to_dlogits, const int32_t *targets, const float *dlosses,
                           int N, int V)
{
    softmax_xent_backward_cols(probs_to_dlogits, targets, dlosses, N, V, 0);
}

void softmax_xent_backward_cols(float *probs_to_dlogits, const int32_t *targets, const float *dlosses, int N,
                                int V, int64_t v0)
{
    softmax_xent_backward_to(probs_to_dlogits, 0, probs_to_dlogits, targets, dlosses, N, V, v0);
}

/* o[0..n) = p[0..n) * dl, one rounding each */
static inline void scale_into(float *o, const float *p, int n, float dl)
{
    zt_vf d = zt_vset1(dl);
    int i;
    for (i = 0; i + ZT_VL <= n; i += ZT_VL)
        zt_vstore(o + i, zt_vmul(zt_vload(p + i), d));
    if (i < n)
        zt_vstoren(o + i, zt_vmul(zt_vloadn(p + i, n - i, 0.0f), d), n - i);
}

#define LP_CHUNK 1024 /* floats of a row rounded at a time from the stack */

void softmax_xent_backward_to(void *out, int kind, const float *probs, const int32_t *targets, const float *dlosses,
                              int N, int V, int64_t v0)
{
    const size_t esize = zt_lp_elem_bytes(kind);
#pragma omp parallel for schedule(static)
    for (int r = 0; r < N; r++) {
        const float *p = probs + (size_t)r * V;
        float dl = dlosses[r];
        int64_t t = (int64_t)targets[r] - v0;
        float pt = t >= 0 && t < V ? p[t] : 0.0f;
        if (!kind) {
            float *o = (float *)out + (size_t)r * V;
            scale_into(o, p, V, dl);
            if (t >= 0 && t < V) o[t] = (pt - 1.0f) * dl;
            continue;
        }
        float buf[LP_CHUNK];
        for (int c = 0; c < V; c += LP_CHUNK) {
            int n = V - c < LP_CHUNK ? V - c : LP_CHUNK;
            scale_into(buf, p + c, n, dl);
            if (t >= c && t < c + n) buf[t - c] = (pt - 1.0f) * dl;
            zt_round_to_lp_serial((zt_lp_kind)kind, (char *)out + ((size_t)r * V + (size_t)c) * esize, buf, (size_t)n);
        }
    }
}
