/* moe_router.c - a mixture of experts' router after its Linear (see kernels.h): the softmax over
 * the experts, the top-k choice and its weights, the routing plan (which permuted row each chosen
 * (token, expert) slot takes), the load-balancing and z losses, and the backward of all of it.
 *
 *   p_t = softmax(logits_t) over E experts, lse_t = logsumexp(logits_t)
 *   top-k: the k largest p_te in descending order (ties: the lower expert first)
 *   w_tj = p_t,e(j) / S_t, S_t = sum_j p_t,e(j) (norm_topk_prob, Mixtral's) or w_tj = p_t,e(j)
 *   aux = E * sum_e f_e P_e, f_e = count_e / N (the fraction of the N tokens that chose e: sums
 *         to k, Hugging Face Mixtral's normalization), P_e = mean_t p_te (Switch Transformer)
 *   z   = mean_t lse_t^2 (ST-MoE)
 * Backward: d logits_t = p_t ⊙ (g_t - <p_t, g_t>) with g_te = the top-k weights' gradient (through
 * the normalization) + aux_scale * E f_e / N, plus z_scale * 2 lse_t p_te / N for the z loss.
 * Every token's work is its own (threads split the tokens); the losses' sums run serially in
 * double, in token then expert order: the bits never depend on the thread count. The plan pads each
 * expert's rows to a multiple of `align` (zero rows, order -1): the experts' products then come in
 * few shapes, which oneDNN's primitive cache (gemm.c) keeps, where every row count would make its
 * own primitive each step.
 */
#include "kernels/kernels.h"
#include "kernels/vecmath.h"

#include <math.h>

void moe_router_forward(float *probs, float *lse, int32_t *idx, float *w, const float *logits, int N, int E, int k,
                        bool norm_topk)
{
#pragma omp parallel
    {
        size_t t0, t1;
        zt_split_range((size_t)N, 1, zt_thread_num(), zt_num_threads(), &t0, &t1);
        for (size_t t = t0; t < t1; t++) {
            const float *l = logits + t * (size_t)E;
            float *p = probs + t * (size_t)E;
            float m = l[0];
            for (int e = 1; e < E; e++) m = l[e] > m ? l[e] : m;
            double s = 0;
            for (int e = 0; e < E; e++) {
                p[e] = expf(l[e] - m);
                s += p[e];
            }
            float inv = (float)(1.0 / s);
            for (int e = 0; e < E; e++) p[e] *= inv;
            lse[t] = m + (float)log(s);
            int32_t *it = idx + t * (size_t)k;
            float *wt = w + t * (size_t)k;
            double sel = 0;
            for (int j = 0; j < k; j++) { /* the j-th largest: strictly above every later one */
                int best = -1;
                for (int e = 0; e < E; e++) {
                    bool taken = false;
                    for (int i = 0; i < j; i++) taken |= it[i] == e;
                    if (!taken && (best < 0 || p[e] > p[best])) best = e;
                }
                it[j] = best;
                wt[j] = p[best];
                sel += p[best];
            }
            if (norm_topk)
                for (int j = 0; j < k; j++) wt[j] = (float)(wt[j] / sel);
        }
    }
}

int moe_route_plan(int32_t *counts, int32_t *offsets, int32_t *order, int32_t *row_of, const int32_t *idx, int N,
                   int E, int k, int capacity, int align)
{
    for (int e = 0; e < E; e++) counts[e] = 0;
    for (size_t s = 0; s < (size_t)N * k; s++) counts[idx[s]]++;
    int dropped = 0;
    offsets[0] = 0;
    for (int e = 0; e < E; e++) {
        int kept = capacity > 0 && counts[e] > capacity ? capacity : counts[e];
        dropped += counts[e] - kept;
        offsets[e + 1] = offsets[e] + (kept + align - 1) / align * align; /* padded to whole tiles */
    }
    for (int r = 0; r < offsets[E]; r++) order[r] = -1; /* padding rows until filled */
    /* each expert's rows in token order (a token chooses an expert at most once): the slots walked
     * in order fill each expert's rows from its offset, the earliest tokens first (Megatron's
     * "position" drop policy beyond the capacity) */
    int32_t fill[E], end[E];
    for (int e = 0; e < E; e++) {
        fill[e] = offsets[e];
        end[e] = offsets[e] + (capacity > 0 && counts[e] > capacity ? capacity : counts[e]);
    }
    for (size_t s = 0; s < (size_t)N * k; s++) {
        int e = idx[s];
        if (fill[e] < end[e]) {
            order[fill[e]] = (int32_t)s;
            row_of[s] = fill[e]++;
        } else {
            row_of[s] = -1;
        }
    }
    return dropped;
}

void moe_router_losses(double *aux, double *z, const float *probs, const float *lse, const int32_t *counts, int N,
                       int Nall, int E)
{
    double a = 0, zz = 0;
    for (int e = 0; e < E; e++) {
        double P = 0;
        for (size_t t = 0; t < (size_t)N; t++) P += probs[t * (size_t)E + e];
        a += (double)counts[e] / Nall * (P / Nall);
    }
    for (size_t t = 0; t < (size_t)N; t++) zz += (double)lse[t] * lse[t];
    *aux = E * a;
    *z = zz / Nall;
}

void moe_router_backward(float *dlogits, const float *dw, const float *probs, const float *lse, const float *w,
                         const int32_t *idx, const int32_t *counts, int N, int Nall, int E, int k, bool norm_topk,
                         float aux_scale, float z_scale)
{
#pragma omp parallel
    {
        size_t t0, t1;
        zt_split_range((size_t)N, 1, zt_thread_num(), zt_num_threads(), &t0, &t1);
        for (size_t t = t0; t < t1; t++) {
            const float *p = probs + t * (size_t)E;
            float *g = dlogits + t * (size_t)E;
            for (int e = 0; e < E; e++) g[e] = aux_scale * E * ((float)counts[e] / Nall) / Nall;
            if (dw) {
                const float *dwt = dw + t * (size_t)k, *wt = w + t * (size_t)k;
                const int32_t *it = idx + t * (size_t)k;
                if (norm_topk) { /* w_j = p_j / S: dp_i = (dw_i - sum_j dw_j w_j) / S */
                    float dot = 0, S = 0;
                    for (int j = 0; j < k; j++) {
                        dot += dwt[j] * wt[j];
                        S += p[it[j]];
                    }
                    for (int j = 0; j < k; j++) g[it[j]] += (dwt[j] - dot) / S;
                } else {
                    for (int j = 0; j < k; j++) g[it[j]] += dwt[j];
                }
            }
            float dot = 0;
            for (int e = 0; e < E; e++) dot += p[e] * g[e];
            float zt = z_scale * 2.0f * lse[t] / Nall;
            for (int e = 0; e < E; e++) g[e] = p[e] * (g[e] - dot) + zt * p[e];
        }
    }
}

void moe_router_dinp(float *dx, const float *dy, int ldy, const float *W, int rows, int C, int E)
{
#pragma omp parallel for schedule(static) if ((size_t)rows * (size_t)C * (size_t)E >= 65536)
    for (int r = 0; r < rows; r++) {
        float *restrict d = dx + (size_t)r * C;
        const float *g = dy + (size_t)r * ldy;
        for (int e = 0; e < E; e++) {
            const float ge = g[e], *restrict w = W + (size_t)e * C;
#pragma omp simd
            for (int c = 0; c < C; c++) d[c] = fmaf(ge, w[c], d[c]);
        }
    }
}
