/* layers.c - the pieces gpt2.c and llama.c share: the Linear layer under fp32 and low-precision
 * compute (the weight's compute copy, the input saved as the rounded operand) with its LoRA
 * adapter when it has one, the embedding lookup, the head's loss, and the saved-buffer layout,
 * whole or cut for tensor parallelism (the sums through the engine's group, zt_unit_args.group),
 * and sequence parallelism's row ranges, gathers and reduce-scatters along T.
 * See layers.h for the contracts. */
#include "model/layers.h"

#include <stdint.h>
#include <string.h>

size_t zt_fp32_floats(size_t n) { return matmul_saved_input_floats(0, n); }

int zt_check_lp_weights(const zt_unit *u, const zt_unit_args *a, const int *weights, int n, zt_error *err) {
    if (!a->lp_kind) return ZT_OK;
    for (int i = 0; i < 3 * n; i++) { /* each weight, then its adapters */
        int k = i < n ? weights[i] : i < 2 * n ? u->lora_a[weights[i - n]] : u->lora_b[weights[i - 2 * n]];
        if (i >= n && !k) continue;
        if (!a->params_lp || !a->params_lp[k])
            return zt_error_set(err, ZT_ERR_INTERNAL, "%s: compute (lp_kind %d) without a compute copy of "
                                "parameter %d (zt_unit_args.params_lp)", u->name, a->lp_kind, k);
    }
    return ZT_OK;
}

/* ---- LoRA: the adapter of the unit's k-th parameter, beside its Linear (src/kernels/lora.c) ---- */

/* its scratch: the last zt_lora_scratch_floats of the unit's */
static float *lora_scratch(const zt_unit *u, const zt_unit_args *a) {
    int B = a->batch->B, T = a->batch->T;
    return a->scratch + u->ops->scratch_floats(u, B, T) - zt_lora_scratch_floats(u, B, T);
}

/* the dropout key of adapter ka in this micro-batch: the engine's key and the adapter's parameter
 * index; 0 (no dropout) in evaluation or without dropout */
static uint64_t lora_key(const zt_unit *u, const zt_unit_args *a, int ka) {
    if (!a->batch->dropout_key || !(u->lora->dropout > 0.0f)) return 0;
    uint64_t key = a->batch->dropout_key ^ (0x9e3779b97f4a7c15ULL * (uint64_t)(u->params[ka] + 1));
    return key ? key : 1;
}

static float lora_scale(const zt_unit *u) { return (float)((double)u->lora->alpha / u->lora->rank); }

/* operand k as the products read it: the compute copy under lp compute, else the fp32 tensor */
static const void *operand(const zt_unit_args *a, int k) {
    return a->lp_kind ? a->params_lp[k] : (const void *)a->params[k];
}

float *zt_linear_input(const zt_unit_args *a, void *slot, float *tmp) {
    return a->lp_kind ? tmp : slot;
}

void zt_linear_forward(const zt_unit *u, const zt_unit_args *a, int k, float *out, void *slot, const float *inp,
                       const float *bias, int N, int C, int OC) {
    if (a->lp_kind)
        matmul_forward_lp(out, slot, inp, a->params_lp[k], bias, N, C, OC, (zt_lp_kind)a->lp_kind);
    else
        matmul_forward(out, inp, a->params[k], bias, N, C, OC);
    int ka = u->lora_a[k], kb = u->lora_b[k];
    if (ka)
        lora_forward(out, lora_scratch(u, a), a->lp_kind ? slot : inp, operand(a, ka), operand(a, kb), lora_scale(u),
                     u->lora->dropout, lora_key(u, a, ka), N, C, OC, u->lora->rank, a->lp_kind);
}

unsigned zt_grad_assign_flag(const zt_unit_args *a, int k, const float *dweight) {
    if (!dweight || !a->grads_unset || !(*a->grads_unset >> k & 1u)) return 0u;
    *a->grads_unset &= ~(1u << k);
    return ZT_MM_DWEIGHT_SET;
}

/* the products' flags: dinp added or assigned, and dW_k assigned when its gradient holds nothing
 * yet (grads_unset bit k, taken here: a later product of the same weight adds) */
static unsigned backward_flags(const zt_unit_args *a, int k, const float *dweight, bool accumulate) {
    return (accumulate ? ZT_MM_DINP_ADD : 0u) | zt_grad_assign_flag(a, k, dweight);
}

void zt_linear_backward(const zt_unit *u, const zt_unit_args *a, int k, float *dinp, float *dweight, float *dbias,
                        const float *dout, const void *slot, int N, int C, int OC, bool accumulate) {
    unsigned f = backward_flags(a, k, dweight, accumulate);
    if (a->lp_kind)
        matmul_backward_lp(dinp, dweight, dbias, dout, slot, a->params_lp[k], N, C, OC, f, (zt_lp_kind)a->lp_kind,
                           a->staging);
    else
        matmul_backward(dinp, dweight, dbias, dout, slot, a->params[k], N, C, OC, f);
    int ka = u->lora_a[k], kb = u->lora_b[k];
    if (ka)
        lora_backward(dinp, a->grads[ka], a->grads[kb], lora_scratch(u, a), a->staging, dout, slot, operand(a, ka),
                      operand(a, kb), lora_scale(u), u->lora->dropout, lora_key(u, a, ka), N, C, OC, u->lora->rank,
                      a->lp_kind);
}

bool zt_linear_takes_rounded(const zt_unit *u, const zt_unit_args *a, int k) {
    return a->lp_kind && !u->lora_a[k];
}

void zt_linear_backward_rounded(const zt_unit *u, const zt_unit_args *a, int k, float *dinp, float *dweight,
                                void *rounded, const void *slot, int N, int C, int OC, bool accumulate) {
    (void)u;
    matmul_backward_lp(dinp, dweight, NULL, NULL, slot, a->params_lp[k], N, C, OC,
                       backward_flags(a, k, dweight, accumulate), (zt_lp_kind)a->lp_kind, rounded);
}

int zt_unit_vocab(const zt_unit *u, int V) { return u->tp_parts > 1 ? (int)u->vocab_rows : V; }

int zt_unit_sum(const zt_unit *u, const zt_unit_args *a, float *buf, size_t n, const char *what, zt_error *err) {
    if (u->tp_parts <= 1) return ZT_OK;
    if (!a->group || a->group->parts != u->tp_parts)
        return zt_error_set(err, ZT_ERR_INTERNAL, "%s: cut into %d parts but run without a group of them (%s)",
                            u->name, u->tp_parts, what);
    return a->group->sum(a->group, buf, n, what, err);
}

int zt_linear_forward_rows(const zt_unit *u, const zt_unit_args *a, int k, float *out, void *slot, const float *inp,
                           const float *bias, int N, int C, int OC, const char *what, zt_error *err) {
    if (u->tp_parts <= 1) {
        zt_linear_forward(u, a, k, out, slot, inp, bias, N, C, OC);
        return ZT_OK;
    }
    zt_linear_forward(u, a, k, out, slot, inp, NULL, N, C, OC);
    int rc;
    if (zt_unit_seq(u)) { /* Megatron's reduce-scatter along T: this part's rows of the sum */
        rc = a->group->seq_reduce_scatter(a->group, out, out, a->batch->B, a->batch->T, OC, what, err);
        N = zt_unit_rows(u, a, NULL);
    } else {
        rc = zt_unit_sum(u, a, out, (size_t)N * OC, what, err);
    }
    if (rc || !bias) return rc;
    for (int n = 0; n < N; n++) residual_forward(out + (size_t)n * OC, out + (size_t)n * OC, bias, (size_t)OC);
    return ZT_OK;
}

int zt_unit_rows(const zt_unit *u, const zt_unit_args *a, int *t0) {
    int B = a->batch->B, T = a->batch->T, begin = 0, count = T;
    if (zt_unit_seq(u) && a->group) a->group->seq_range(a->group, T, &begin, &count);
    if (t0) *t0 = begin;
    return B * count;
}

/* ZT_ERR_INTERNAL unless a unit cut along T runs with a group of its parts */
static int seq_group_check(const zt_unit *u, const zt_unit_args *a, const char *what, zt_error *err) {
    if (a->group && a->group->parts == u->seq_parts && a->group->seq_gather) return ZT_OK;
    return zt_error_set(err, ZT_ERR_INTERNAL, "%s: cut along T into %d parts but run without a group of them (%s)",
                        u->name, u->seq_parts, what);
}

int zt_unit_seq_gather(const zt_unit *u, const zt_unit_args *a, const float *mine, float *all, int C,
                       const char *what, zt_error *err) {
    if (!zt_unit_seq(u)) {
        if (all != mine) memcpy(all, mine, (size_t)a->batch->B * a->batch->T * C * sizeof *all);
        return ZT_OK;
    }
    int rc = seq_group_check(u, a, what, err);
    return rc ? rc : a->group->seq_gather(a->group, mine, all, a->batch->B, a->batch->T, C, sizeof(float), what, err);
}

/* bytes of an element of a Linear's saved operand: bf16 bits, else fp32 (fp16 values kept in fp32) */
static int operand_bytes(const zt_unit_args *a) { return (int)zt_lp_elem_bytes(a->lp_kind); }

float *zt_norm_output(const zt_unit *u, const zt_unit_args *a, void *slot, float *rows, float *tmp) {
    if (!zt_unit_seq(u)) return zt_linear_input(a, slot, tmp);
    return a->lp_kind ? rows : slot;
}

int zt_norm_into_linear(const zt_unit *u, const zt_unit_args *a, float *xl, void *slot, float *all, void *slot_all,
                        int C, float **x, void **operand, const char *what, zt_error *err) {
    *x = xl;
    *operand = slot;
    if (!zt_unit_seq(u)) return ZT_OK;
    int rc = seq_group_check(u, a, what, err);
    if (rc) return rc;
    *x = all;
    if ((rc = a->group->seq_gather(a->group, xl, all, a->batch->B, a->batch->T, C, sizeof(float), what, err)))
        return rc;
    if (a->lp_kind) /* the part's rows of the operand, rounded as matmul_forward_lp rounds all into slot_all */
        zt_round_to_lp((zt_lp_kind)a->lp_kind, slot, xl, (size_t)zt_unit_rows(u, a, NULL) * C);
    else if (slot != xl)
        memcpy(slot, xl, (size_t)zt_unit_rows(u, a, NULL) * C * sizeof *xl);
    *operand = a->lp_kind ? slot_all : all;
    return ZT_OK;
}

int zt_seq_linear_operand(const zt_unit *u, const zt_unit_args *a, const void *slot, void *slot_all, int C,
                          const char *what, zt_error *err) {
    int rc = seq_group_check(u, a, what, err);
    return rc ? rc : a->group->seq_gather(a->group, slot, slot_all, a->batch->B, a->batch->T, C, operand_bytes(a),
                                          what, err);
}

int zt_unit_input_grad_sum(const zt_unit *u, const zt_unit_args *a, float *buf, int C, const char *what,
                           zt_error *err) {
    if (!zt_unit_seq(u)) return zt_unit_sum(u, a, buf, (size_t)a->batch->B * a->batch->T * C, what, err);
    int rc = seq_group_check(u, a, what, err);
    return rc ? rc : a->group->seq_reduce_scatter(a->group, buf, buf, a->batch->B, a->batch->T, C, what, err);
}

int zt_block_backward_begin(const zt_unit *u, const zt_unit_args *a, float *ng, size_t n, float *buf, int C,
                            const float **dout_all, const char *what, zt_error *err) {
    memcpy(a->din, a->dout, (size_t)zt_unit_rows(u, a, NULL) * C * sizeof *a->din);
    *dout_all = a->dout;
    if (!zt_unit_seq(u)) return ZT_OK;
    memset(ng, 0, n * sizeof *ng);
    *dout_all = buf;
    return zt_unit_seq_gather(u, a, a->dout, buf, C, what, err);
}

int zt_unit_norm_grads(const zt_unit *u, const zt_unit_args *a, float *buf, float *const *grads, int n, int C,
                       const char *what, zt_error *err) {
    if (!zt_unit_seq(u)) return ZT_OK;
    int rc = zt_unit_sum(u, a, buf, (size_t)n * C, what, err);
    for (int i = 0; i < n && !rc; i++)
        if (grads[i]) residual_forward(grads[i], grads[i], buf + (size_t)i * C, (size_t)C);
    return rc;
}

/* ---- the head's loss: logits of the LM head, softmax cross-entropy, and its backward ----
 * Whole, the (N, Vl) logits are a saved buffer of the unit: forward turns them into
 * probabilities in place, backward into d logits. Chunked (zt_unit.loss_chunk > 0, whatever the
 * batch: a smaller batch, e.g. generation's, runs as one chunk in the same scratch), forward
 * computes the logits of R = zt_head_logits_rows rows at a time in the scratch and keeps only the
 * losses; backward computes each chunk's logits and probabilities again (the same products and
 * kernels on the same rows: the same bits as its forward) before its d logits and products. */

int zt_head_logits_rows(const zt_unit *u, int B, int T) {
    int N = B * T;
    return u->loss_chunk > 0 && u->loss_chunk < N ? u->loss_chunk : N;
}

bool zt_head_chunked(const zt_unit *u) { return u->loss_chunk > 0; }

size_t zt_head_saved_logits_floats(const zt_unit *u, int B, int T, int V) {
    return zt_head_chunked(u) ? 0 : zt_fp32_floats((size_t)B * T * zt_unit_vocab(u, V));
}

size_t zt_head_staging_bytes(const zt_unit *u, int B, int T, int lp_kind, int V) {
    return matmul_lp_staging_bytes((zt_lp_kind)lp_kind, zt_head_logits_rows(u, B, T), zt_unit_vocab(u, V));
}

/* scratch from scratch_at: the cut loss's rows: mx (R floats, rounded up to 2) | S (R doubles) |
 * XT (R doubles); then, chunked: the chunk's logits (R, Vl) | its losses again (R, backward) */
static size_t cut_floats(const zt_unit *u, int R) {
    return u->tp_parts > 1 ? ((size_t)R + 1) / 2 * 2 + 4 * (size_t)R : 0;
}

size_t zt_head_loss_scratch_floats(const zt_unit *u, int B, int T, int V) {
    int R = zt_head_logits_rows(u, B, T);
    size_t chunk = zt_head_chunked(u) ? zt_fp32_floats((size_t)R * zt_unit_vocab(u, V)) + zt_fp32_floats((size_t)R) : 0;
    return cut_floats(u, R) + chunk;
}

/* The vocabulary-parallel loss (Megatron's vocab_parallel_cross_entropy) of rows [r0, r0 + n): the
 * parts' row maxima, then their sums of exp and target terms, each combined over the group between
 * the sweeps. */
static int loss_cut(const zt_unit *u, const zt_unit_args *a, float *logits, int Vl, float *scratch, int r0, int n,
                    float *losses, zt_error *err) {
    const zt_unit_group *g = a->group;
    const int32_t *targets = a->batch->targets + r0;
    float *mx = scratch;
    double *S = (double *)(void *)(scratch + ((size_t)n + 1) / 2 * 2), *XT = S + n;
    softmax_xent_rowmax(mx, logits, n, Vl);
    int rc = g->max(g, mx, (size_t)n, "cross-entropy row maxima", err);
    if (rc) return rc;
    softmax_xent_exp(S, XT, logits, mx, targets, n, Vl, u->vocab_begin);
    if ((rc = g->sum_f64(g, S, 2 * (size_t)n, "cross-entropy sums and target logits", err))) return rc;
    softmax_xent_finish(losses, logits, S, XT, n, Vl);
    for (int i = 0; i < n; i++)
        if (targets[i] < 0) losses[i] = 0; /* not counted */
    return ZT_OK;
}

/* rows [r0, r0 + n) of logits (n, Vl) into probabilities and their losses */
static int loss_rows(const zt_unit *u, const zt_unit_args *a, float *logits, int Vl, float *cut_scratch, int r0,
                     int n, float *losses, zt_error *err) {
    if (u->tp_parts > 1) return loss_cut(u, a, logits, Vl, cut_scratch, r0, n, losses, err);
    softmax_xent_forward(losses, logits, a->batch->targets + r0, n, Vl);
    return ZT_OK;
}

/* the logits of the generated position among rows [r0, r0 + n) into batch->logits_out (B, V); cut,
 * every part's columns side by side (each part holds the same rows, so the gathers match) */
static int copy_generated(const zt_unit *u, const zt_unit_args *a, const float *logits, int Vl, int V, int r0, int n,
                          zt_error *err) {
    const zt_batch *bt = a->batch;
    if (!bt->logits_out || bt->logits_pos < 0 || bt->logits_pos >= bt->T) return ZT_OK;
    int T = bt->T, b0 = 0, b1 = 0; /* the batch rows b whose row b*T + logits_pos is in [r0, r0 + n) */
    for (int b = 0; b < bt->B; b++) {
        int row = b * T + bt->logits_pos;
        if (row < r0) b0 = b + 1;
        if (row < r0 + n) b1 = b + 1;
    }
    if (b1 <= b0) return ZT_OK;
    const float *first = logits + ((size_t)b0 * T + bt->logits_pos - r0) * Vl;
    if (u->tp_parts > 1)
        return a->group->concat_cols(a->group, first, b1 - b0, (size_t)T * Vl, V, bt->logits_out + (size_t)b0 * V,
                                     "logits of the generated position", err);
    for (int b = b0; b < b1; b++)
        memcpy(bt->logits_out + (size_t)b * V, first + (size_t)(b - b0) * T * Vl, (size_t)V * sizeof(float));
    return ZT_OK;
}

/* the LM head's operand from row r0: the rounded slot under lp compute (bf16: 2 bytes, fp16
 * values: 4), else the fp32 input */
static const void *operand_rows(const zt_unit_args *a, const void *op, int r0, int C) {
    size_t esize = zt_lp_elem_bytes(a->lp_kind);
    return (const char *)op + (size_t)r0 * C * esize;
}

/* the logits of rows [r0, r0 + n) into out (n, Vl): the LM head k on its operand op (rounded
 * under lp compute, else the fp32 input) */
static void logits_rows(const zt_unit *u, const zt_unit_args *a, int k, const void *op, float *out, int r0, int n,
                        int C, int Vl) {
    void *rows = (void *)operand_rows(a, op, r0, C);
    zt_linear_forward(u, a, k, out, rows, a->lp_kind ? NULL : rows, NULL, n, C, Vl);
}

int zt_head_loss_forward(const zt_unit *u, const zt_unit_args *a, int k, void *op, const float *x, float *logits,
                         int C, int V, size_t scratch_at, zt_error *err) {
    const zt_batch *bt = a->batch;
    int B = bt->B, T = bt->T, N = B * T, Vl = zt_unit_vocab(u, V), R = zt_head_logits_rows(u, B, T);
    bool cut = u->tp_parts > 1;
    if (cut && (!a->group || a->group->parts != u->tp_parts))
        return zt_error_set(err, ZT_ERR_INTERNAL, "%s: cut into %d parts but run without a group of them",
                            u->name, u->tp_parts);
    if (bt->targets)
        for (int i = 0; i < N; i++)
            if (bt->targets[i] >= V) /* negative: not counted */
                return zt_error_set(err, ZT_ERR_DATA, "%s: target token %d at position %d is outside "
                                    "the vocabulary (V=%d)", u->name, bt->targets[i], i, V);
    float *cut_scratch = a->scratch + scratch_at;
    int rc = ZT_OK;
    if (!zt_head_chunked(u)) { /* whole: the saved logits */
        zt_linear_forward(u, a, k, logits, op, x, NULL, N, C, Vl);
        if ((rc = copy_generated(u, a, logits, Vl, V, 0, N, err))) return rc;
        if (!bt->targets) {
            memset(a->out, 0, (size_t)N * sizeof *a->out);
            return ZT_OK;
        }
        return loss_rows(u, a, logits, Vl, cut_scratch, 0, N, a->out, err);
    }
    if (a->lp_kind && x) /* the operand rounded once, as zt_linear_forward would */
        zt_round_to_lp((zt_lp_kind)a->lp_kind, op, x, (size_t)N * C);
    float *chunk = cut_scratch + cut_floats(u, R);
    for (int r0 = 0; r0 < N && !rc; r0 += R) {
        int n = N - r0 < R ? N - r0 : R;
        logits_rows(u, a, k, a->lp_kind ? op : (const void *)x, chunk, r0, n, C, Vl);
        rc = copy_generated(u, a, chunk, Vl, V, r0, n, err);
        if (!rc && bt->targets) rc = loss_rows(u, a, chunk, Vl, cut_scratch, r0, n, a->out + r0, err);
    }
    if (!rc && !bt->targets) memset(a->out, 0, (size_t)N * sizeof *a->out);
    return rc;
}

/* The vocabulary-parallel lookup: this part's rows (zeros for the other tokens), summed over the
 * parts, then the positions: the fused lookup's adds, so the same bits. */
static int embedding_cut(const zt_unit *u, const zt_unit_args *a, int k_wte, int k_wpe, int C, zt_error *err) {
    int B = a->batch->B, T = a->batch->T;
    const void *const *lp = a->params_lp;
    bool from_lp = a->lp_kind && lp && lp[k_wte] && (k_wpe < 0 || lp[k_wpe]);
    bool bf16 = from_lp && a->lp_kind == ZT_LP_BF16;
    const void *wte = from_lp ? lp[k_wte] : a->params[k_wte];
    const void *wpe = k_wpe < 0 ? NULL : from_lp ? lp[k_wpe] : a->params[k_wpe];
    if (!wte || (k_wpe >= 0 && !wpe))
        return zt_error_set(err, ZT_ERR_INTERNAL, "%s: neither fp32 nor compute-copy embedding tables were given "
                            "(lp_kind %d)", u->name, a->lp_kind);
    bool seq = zt_unit_seq(u); /* cut along T: the whole lookup in scratch, this part's rows of the sum */
    float *full = seq ? a->scratch : a->out;
    encoder_lookup_rows(full, a->batch->inputs, bf16 ? NULL : wte, bf16 ? wte : NULL, B, T, C, u->vocab_begin,
                        u->vocab_rows);
    int rc, t0 = 0;
    if (seq) {
        if ((rc = seq_group_check(u, a, "embedding lookup", err))) return rc;
        rc = a->group->seq_reduce_scatter(a->group, full, a->out, B, T, C, "embedding lookup", err);
        T = zt_unit_rows(u, a, &t0) / B; /* positions t0 .. t0 + T */
    } else {
        rc = zt_unit_sum(u, a, a->out, (size_t)B * T * C, "embedding lookup", err);
    }
    /* the position rows: t0 + t, or with packed documents the batch's positions of those tokens */
    const int32_t *pos = a->batch->positions;
    size_t off = pos ? 0 : (size_t)t0 * C;
    if (!rc && wpe)
        encoder_add_positions(a->out, bf16 ? NULL : (const float *)wpe + off, bf16 ? (const uint16_t *)wpe + off : NULL,
                              B, T, C, pos ? pos + t0 : NULL, a->batch->T);
    return rc;
}

size_t zt_embedding_scratch_floats(const zt_unit *u, int B, int T, int C) {
    return zt_unit_seq(u) ? (size_t)B * T * C : 0;
}

int zt_embedding_backward(const zt_unit *u, const zt_unit_args *a, int k_wte, int k_wpe, int C, zt_error *err) {
    bool cut = u->tp_parts > 1;
    const float *dout = a->dout;
    if (zt_unit_seq(u)) { /* every position's gradient: the backward of the forward's reduce-scatter */
        int rc = zt_unit_seq_gather(u, a, a->dout, a->scratch, C, "embedding output gradient", err);
        if (rc) return rc;
        dout = a->scratch;
    }
    encoder_backward_rows(a->grads[k_wte], k_wpe >= 0 ? a->grads[k_wpe] : NULL, dout, a->batch->inputs,
                          a->batch->B, a->batch->T, C, cut ? u->vocab_begin : 0, cut ? u->vocab_rows : INT64_MAX,
                          a->batch->positions);
    return ZT_OK;
}

int zt_embedding_forward(const zt_unit *u, const zt_unit_args *a, int k_wte, int k_wpe, int C, zt_error *err) {
    int B = a->batch->B, T = a->batch->T;
    const void *const *lp = a->params_lp;
    if (u->tp_parts > 1) return embedding_cut(u, a, k_wte, k_wpe, C, err);
    if (a->lp_kind && lp && lp[k_wte] && (k_wpe < 0 || lp[k_wpe])) {
        const void *wpe = k_wpe >= 0 ? lp[k_wpe] : NULL;
        if (a->lp_kind == ZT_LP_BF16)
            encoder_forward_bf16(a->out, a->batch->inputs, lp[k_wte], wpe, B, T, C, a->batch->positions);
        else
            encoder_forward(a->out, a->batch->inputs, lp[k_wte], wpe, B, T, C, a->batch->positions);
        return ZT_OK;
    }
    if (!a->params[k_wte] || (k_wpe >= 0 && !a->params[k_wpe]))
        return zt_error_set(err, ZT_ERR_INTERNAL, "%s: neither fp32 nor compute-copy embedding tables were given "
                            "(lp_kind %d)", u->name, a->lp_kind);
    encoder_forward(a->out, a->batch->inputs, a->params[k_wte], k_wpe >= 0 ? a->params[k_wpe] : NULL, B, T, C,
                    a->batch->positions);
    return ZT_OK;
}

/* d logits of rows [r0, r0 + n) from their probabilities (n, Vl), then their share of the products:
 * dinp rows (n, C) = d logits · W_k, dW_k += d logitsᵀ · the operand's rows */
static void loss_backward_rows(const zt_unit *u, const zt_unit_args *a, int k, float *probs, const void *slot,
                               float *dinp, int r0, int n, int C, int Vl) {
    const int32_t *targets = a->batch->targets + r0;
    const float *dl = a->dout + r0;
    int64_t v0 = u->tp_parts > 1 ? u->vocab_begin : 0;
    void *rows = (void *)operand_rows(a, slot, r0, C);
    float *drows = dinp + (size_t)r0 * C;
    if (zt_linear_takes_rounded(u, a, k)) { /* the rounded d logits straight into the staging */
        softmax_xent_backward_to(a->staging, a->lp_kind, probs, targets, dl, n, Vl, v0);
        zt_linear_backward_rounded(u, a, k, drows, a->grads[k], a->staging, rows, n, C, Vl, false);
    } else {
        softmax_xent_backward_cols(probs, targets, dl, n, Vl, v0);
        zt_linear_backward(u, a, k, drows, a->grads[k], NULL, probs, rows, n, C, Vl, false);
    }
}

int zt_head_loss_backward(const zt_unit *u, const zt_unit_args *a, int k, float *probs, const void *slot,
                          float *dinp, int C, int V, size_t scratch_at, zt_error *err) {
    const zt_batch *bt = a->batch;
    int N = bt->B * bt->T, R = zt_head_logits_rows(u, bt->B, bt->T);
    if (!bt->targets) return zt_error_set(err, ZT_ERR_USAGE, "%s: backward needs targets", u->name);
    int rc = zt_check_lp_weights(u, a, &k, 1, err);
    if (rc) return rc;
    int Vl = zt_unit_vocab(u, V);
    if (!zt_head_chunked(u)) {
        loss_backward_rows(u, a, k, probs, slot, dinp, 0, N, C, Vl);
    } else { /* each chunk's logits and probabilities again, then its backward */
        float *cut_scratch = a->scratch + scratch_at, *chunk = cut_scratch + cut_floats(u, R);
        float *losses = chunk + zt_fp32_floats((size_t)R * Vl);
        for (int r0 = 0; r0 < N && !rc; r0 += R) {
            int n = N - r0 < R ? N - r0 : R;
            logits_rows(u, a, k, slot, chunk, r0, n, C, Vl);
            if (!(rc = loss_rows(u, a, chunk, Vl, cut_scratch, r0, n, losses, err)))
                loss_backward_rows(u, a, k, chunk, slot, dinp, r0, n, C, Vl);
        }
        if (rc) return rc;
    }
    if ((rc = zt_unit_input_grad_sum(u, a, dinp, C, "LM head input gradient", err))) return rc;
    memset(a->din, 0, (size_t)zt_unit_rows(u, a, NULL) * C * sizeof *a->din);
    return ZT_OK;
}

size_t zt_saved_layout(const size_t *sizes, int n, int n_kept, const zt_unit_args *a, void **ptrs, size_t *kept) {
    size_t off = 0, k = 0;
    for (int i = 0; i < n_kept; i++) k += sizes[i];
    float *rest = a ? zt_unit_saved_rest(a, k) : NULL;
    for (int i = 0; i < n; i++) {
        ptrs[i] = !a ? NULL : i < n_kept ? a->saved + off : rest + (off - k);
        off += sizes[i];
    }
    if (kept) *kept = k;
    return off;
}
