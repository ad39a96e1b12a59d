/* gpt2.c - GPT-2 on the unit API: the embedding unit, L transformer blocks and the head unit
 * (final layernorm, LM head tied to wte, softmax cross-entropy). Parameter names and shapes are
 * Hugging Face's (transformers' GPT2LMHeadModel, without the "transformer." prefix), except that
 * Linear weights are stored (OC, C) like torch.nn.Linear where HF's Conv1D stores (C, OC); export
 * transposes.
 *
 * Block (pre-LN), N = B*T rows:
 *   ln1 = LN(x); qkv = ln1·Wqkvᵀ + b; y = attention(qkv); r = x + y·Woᵀ + b
 *   ln2 = LN(r); h = gelu(ln2·Wfcᵀ + b); out = r + h·Wpᵀ + b
 * The saved activations of a block, the kept part first, each buffer 64-byte aligned:
 *   kept: ln1* (N,C) | ln1_mean (N) | ln1_rstd (N) | qkv (N,3C) | atty* (N,C) | atto (N,C) |
 *         lse (B,NH,T) | res2 (N,C) | ln2* (N,C) | ln2_mean (N) | ln2_rstd (N) | fch (N,4C)
 *   rest: att (B,NH,T,T) | fch_gelu* (N,4C)
 * The attention kernel (cfg->attention) decides three of them: flash (flash_attention.c) saves
 * lse, one logsumexp per row, and reads its output O in backward, so under bf16/fp16 compute it
 * also keeps the fp32 O in atto (atty holds the rounded operand; under fp32 atty is O and atto is
 * empty); no att. naive (attention.c) saves the probabilities att (B,NH,T,T); no atto, no lse.
 * The starred buffers are read only by a Linear (its input, in forward and for dW in backward:
 * layernorm backward reads the block input and mean/rstd, gelu backward reads fch, attention
 * backward reads qkv and att, or qkv, O and lse). Under bf16/fp16 compute they hold the rounded
 * operand itself (matmul_forward_lp rounds into them; bf16: 2 bytes per element), since the
 * product only ever reads that; everything else stays fp32 (layernorm statistics, softmax, GELU,
 * the residual stream, the attention's O: docs/precision.md). In floats, N a multiple of 16 (else
 * each buffer rounds up to 16), whole (tensor parallelism cuts the attention's and the MLP's
 * buffers by the parts, widths_of; sequence parallelism also cuts ln1, ln2, their statistics and
 * res2 to the part's N/P rows, and the head's lnf, mean and rstd: layers.h):
 *   flash fp32: kept N·(11C + 4) + B·NH·T, rest 4·N·C
 *   flash bf16: kept N·(10.5C + 4) + B·NH·T, rest 2·N·C (fp16 values are kept in fp32)
 *   naive fp32: kept N·(11C + 4), rest B·NH·T² + 4·N·C
 *   naive bf16: kept N·(9.5C + 4), rest B·NH·T² + 2·N·C
 * Selective activation checkpointing keeps the first part and recomputes the rest before
 * backward (block_recompute): gelu(fch), and under naive attention the probabilities from qkv
 * (Megatron's selective recomputation of the core attention, without the P·V product, whose
 * output atty is kept): the largest buffers per token that are cheap to rebuild. (flash has no
 * probabilities to rebuild: its backward recomputes them tile by tile anyway.) The embedding keeps
 * nothing, and the head does not declare a kept part: its logits cost an (N,C)x(C,V) product,
 * so under selective it keeps everything. The head saves lnf* (N,C) | mean (N) | rstd (N) |
 * logits, then probabilities (N,V).
 */
#include "zerotrain/zerotrain.h"
#include "kernels/kernels.h"
#include "obs/trace.h"
#include "model/layers.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------
 * presets */
typedef struct preset {
    const char *name;
    zt_gpt2_config cfg;
} preset;

static const preset PRESETS[] = {
    {"tiny", {128, 50257, 2, 4, 64, ZT_ATTENTION_FLASH}},
    {"gpt2-124M", {1024, 50257, 12, 12, 768, ZT_ATTENTION_FLASH}},
    {"gpt2", {1024, 50257, 12, 12, 768, ZT_ATTENTION_FLASH}},
    {"gpt2-350M", {1024, 50257, 24, 16, 1024, ZT_ATTENTION_FLASH}},
    {"gpt2-774M", {1024, 50257, 36, 20, 1280, ZT_ATTENTION_FLASH}},
    {"gpt2-1558M", {1024, 50257, 48, 25, 1600, ZT_ATTENTION_FLASH}},
};

int zt_gpt2_preset(const char *name, zt_gpt2_config *cfg, zt_error *err) {
    for (size_t i = 0; i < sizeof PRESETS / sizeof *PRESETS; i++)
        if (strcmp(PRESETS[i].name, name) == 0) {
            *cfg = PRESETS[i].cfg;
            return ZT_OK;
        }
    return zt_error_set(err, ZT_ERR_USAGE,
                        "unknown GPT-2 preset \"%s\" (known: tiny, gpt2-124M, gpt2-350M, gpt2-774M, "
                        "gpt2-1558M)", name);
}

/* ---------------------------------------------------------------------------------------------
 * embedding unit: params wte (V,C), wpe (maxT,C) */
static size_t emb_saved(const zt_unit *u, int B, int T, int lp_kind) { return 0; }
static size_t emb_scratch(const zt_unit *u, int B, int T) {
    return zt_embedding_scratch_floats(u, B, T, ((const zt_gpt2_config *)u->model_cfg)->n_embd);
}

/* under low-precision compute the tables are read as their compute copy (emb_reads_lp) */
static int emb_forward(const zt_unit *u, const zt_unit_args *a, zt_error *err) {
    const zt_gpt2_config *c = u->model_cfg;
    return zt_embedding_forward(u, a, 0, 1, c->n_embd, err);
}

/* wte and wpe: read through their compute copy under low-precision compute (zt_unit_ops.reads_lp) */
static bool emb_reads_lp(const zt_unit *u, int k) { return k == 0 || k == 1; }

static int emb_backward(const zt_unit *u, const zt_unit_args *a, zt_error *err) {
    const zt_gpt2_config *c = u->model_cfg;
    return zt_embedding_backward(u, a, 0, 1, c->n_embd, err);
}

static const zt_unit_ops EMBEDDING_OPS = {.saved_floats = emb_saved, .scratch_floats = emb_scratch,
                                          .forward = emb_forward, .backward = emb_backward,
                                          .reads_lp = emb_reads_lp};

/* ---------------------------------------------------------------------------------------------
 * transformer block unit: 12 params in this order */
enum {
    P_LN1W, P_LN1B, P_QKVW, P_QKVB, P_ATTPROJW, P_ATTPROJB,
    P_LN2W, P_LN2B, P_FCW, P_FCB, P_FCPROJW, P_FCPROJB, P_BLOCK_COUNT
};

/* the saved buffers; the Linear inputs (void *) are rounded operands under lp compute */
typedef struct block_saved {
    void *ln1;  float *ln1_mean, *ln1_rstd, *qkv; void *atty; float *atto, *lse, *res2; /* kept ... */
    void *ln2;  float *ln2_mean, *ln2_rstd, *fch;                                       /* ... kept */
    float *att; void *fch_gelu;                                                         /* rest */
} block_saved;

enum { BLOCK_KEPT_BUFFERS = 12 };

static bool flash(const zt_gpt2_config *c) { return c->attention == ZT_ATTENTION_FLASH; }

/* A block's widths on its part (tensor parallelism, docs/parallelism.md: P = zt_unit_parts; 1 when
 * whole): the residual stream C, the attention's Ca = C/P channels over NH = n_head/P heads (the
 * head size stays C/n_head), the MLP's H = 4C/P, and W = max(H, C), the wide scratch buffers' row. */
typedef struct widths {
    int C, Ca, NH, H, W;
} widths;

static widths widths_of(const zt_unit *u) {
    const zt_gpt2_config *c = u->model_cfg;
    int P = zt_unit_parts(u), H = 4 * c->n_embd / P;
    return (widths){.C = c->n_embd, .Ca = c->n_embd / P, .NH = c->n_head / P, .H = H,
                    .W = H > c->n_embd ? H : c->n_embd};
}

/* Lays the saved buffers out from a->saved (kept part) and zt_unit_saved_rest (the rest), or
 * just counts (a NULL), for lp_kind (a->lp_kind when a is given). Returns the total floats;
 * *kept (optional) gets the kept part's. */
static size_t block_layout(const zt_unit *u, int B, int T, int lp_kind, const zt_unit_args *a,
                           block_saved *s, size_t *kept) {
    widths w = widths_of(u);
    size_t N = (size_t)B * T, C = (size_t)w.C, Ca = (size_t)w.Ca, H = (size_t)w.H;
    size_t Nl = zt_unit_rows_max(u, B, T); /* the norms' and the residual's rows: N/P cut along T */
    size_t in_C = matmul_saved_input_floats(lp_kind, Nl * C); /* ln1, ln2: the part's rows (layers.h) */
    bool fl = flash(u->model_cfg);
    size_t sizes[] = {in_C, zt_fp32_floats(Nl), zt_fp32_floats(Nl), zt_fp32_floats(N * 3 * Ca),
                      matmul_saved_input_floats(lp_kind, N * Ca), fl && lp_kind ? zt_fp32_floats(N * Ca) : 0,
                      fl ? zt_fp32_floats((size_t)B * w.NH * T) : 0, zt_fp32_floats(Nl * C), in_C, zt_fp32_floats(Nl),
                      zt_fp32_floats(Nl), zt_fp32_floats(N * H), fl ? 0 : zt_fp32_floats((size_t)B * w.NH * T * T),
                      matmul_saved_input_floats(lp_kind, N * H)};
    void *ptrs[sizeof sizes / sizeof *sizes];
    size_t off = zt_saved_layout(sizes, (int)(sizeof sizes / sizeof *sizes), BLOCK_KEPT_BUFFERS, a, ptrs, kept);
    *s = (block_saved){.ln1 = ptrs[0], .ln1_mean = ptrs[1], .ln1_rstd = ptrs[2], .qkv = ptrs[3],
                       .atty = ptrs[4], .atto = ptrs[5], .lse = ptrs[6], .res2 = ptrs[7], .ln2 = ptrs[8],
                       .ln2_mean = ptrs[9], .ln2_rstd = ptrs[10], .fch = ptrs[11], .att = ptrs[12],
                       .fch_gelu = ptrs[13]};
    return off;
}

static size_t block_saved_floats(const zt_unit *u, int B, int T, int lp_kind) {
    block_saved s;
    return block_layout(u, B, T, lp_kind, NULL, &s, NULL);
}

static size_t block_kept_floats(const zt_unit *u, int B, int T, int lp_kind) {
    block_saved s;
    size_t kept;
    block_layout(u, B, T, lp_kind, NULL, &s, &kept);
    return kept;
}

static const int BLOCK_LINEARS[] = {P_QKVW, P_ATTPROJW, P_FCW, P_FCPROJW};

/* backward scratch: bufC (N,C) | big1 (N,W) | big2 (N,W) | attention scratch | LoRA's; forward uses
 * bufC for the projections' output, big1 for the Linears' fp32 inputs under lp compute and the
 * attention scratch (flash) */
static size_t block_att_floats(const zt_unit *u, int B, int T) {
    widths w = widths_of(u);
    if (zt_unit_cp(u)) return zt_cp_attention_scratch_floats(u, B, T, w.NH, w.NH, w.Ca / w.NH);
    return flash(u->model_cfg) ? flash_attention_scratch_floats(B, T, w.NH, w.NH, w.Ca / w.NH)
                               : attention_scratch_floats(B, T, w.Ca, w.NH);
}

/* ... then, cut along T, the two layernorms' weight and bias gradients of this part's rows (4C) */
static size_t block_scratch_floats(const zt_unit *u, int B, int T) {
    widths w = widths_of(u);
    size_t N = (size_t)B * T, norms = zt_unit_seq(u) ? 4 * (size_t)w.C : 0;
    return N * (size_t)w.C + 2 * N * (size_t)w.W + block_att_floats(u, B, T) + norms +
           zt_lora_scratch_floats(u, B, T); /* LoRA's, last (layers.h) */
}

/* Cut for tensor parallelism (widths_of), c_attn and c_fc are column-parallel (this part's heads
 * and MLP columns), the two c_proj row-parallel: their products are summed over the parts
 * (zt_linear_forward_rows, Megatron's g) before the residual; in backward the input gradients of
 * c_attn and c_fc are (zt_unit_input_grad_sum, f's backward) before their layernorm. Cut along T
 * too (sequence parallelism, layers.h), the layernorms, bias adds and residuals run on this
 * part's Nl rows: ln_1's and ln_2's rows are all-gathered into the Linears' whole input, the
 * c_proj products reduce-scattered into the part's rows; backward gathers dout and d res2 before
 * the c_proj backward and reduce-scatters the input gradients, and the layernorms' weight
 * gradients are summed over the parts at the end (zt_unit_norm_grads). */
static int block_forward(const zt_unit *u, const zt_unit_args *a, zt_error *err) {
    widths w = widths_of(u);
    int B = a->batch->B, T = a->batch->T, C = w.C, Ca = w.Ca, H = w.H, N = B * T;
    float *const *p = a->params;
    int rc = zt_check_lp_weights(u, a, BLOCK_LINEARS, 4, err);
    if (rc) return rc;
    if (zt_unit_cp(u) && !flash(u->model_cfg))
        return zt_error_set(err, ZT_ERR_USAGE, "unit %s: context parallelism needs flash attention (model.attention)", u->name);
    block_saved s;
    block_layout(u, B, T, a->lp_kind, a, &s, NULL);
    float *proj = a->scratch, *tmp = proj + (size_t)N * C; /* (N,C), (N,W) */
    float *attn_scratch = tmp + 2 * (size_t)N * w.W;
    float *x;
    void *op;
    int Nl = zt_unit_rows(u, a, NULL); /* the layernorms' and residuals' rows */

    float *slot_all = tmp + (size_t)N * C;
    if (!zt_unit_seq(u)) { /* whole: the layernorm writes the Linear's operand in its dtype (rounded under lp
                             * compute, and the Linear then takes x = NULL: nothing left to round) */
        layernorm_forward_to(s.ln1, a->lp_kind, s.ln1_mean, s.ln1_rstd, a->in, p[P_LN1W], p[P_LN1B], N, C);
        x = a->lp_kind ? NULL : s.ln1;
        op = s.ln1;
    } else { /* cut along T, the layernorms' rows go to proj under lp compute, the whole operand to tmp + N·C */
        float *xl = zt_norm_output(u, a, s.ln1, proj, tmp);
        layernorm_forward(xl, s.ln1_mean, s.ln1_rstd, a->in, p[P_LN1W], p[P_LN1B], Nl, C);
        if ((rc = zt_norm_into_linear(u, a, xl, s.ln1, tmp, slot_all, C, &x, &op, "attn.c_attn input (ln_1)", err)))
            return rc;
    }
    zt_linear_forward(u, a, P_QKVW, s.qkv, op, x, p[P_QKVB], N, C, 3 * Ca);
    if (flash(u->model_cfg)) { /* O in fp32: atty itself, or atto (rounded into atty by c_proj's forward) */
        x = a->lp_kind ? s.atto : zt_linear_input(a, s.atty, tmp);
        if (zt_unit_cp(u)) { /* the other parts' positions through the group (context_parallel.c) */
            if ((rc = zt_cp_attention_forward(u, a, x, s.lse, attn_scratch, s.qkv, s.qkv + Ca, s.qkv + 2 * Ca, w.NH,
                                              w.NH, Ca / w.NH, 3 * Ca, 3 * Ca, err)))
                return rc;
        } else {
            zt_trace_begin("attention", "whole forward");
            flash_attention_forward(x, s.lse, attn_scratch, s.qkv, B, T, Ca, w.NH, a->attn_bf16, a->batch->positions);
            zt_trace_end();
        }
    } else {
        x = zt_linear_input(a, s.atty, tmp);
        attention_forward(x, s.att, s.qkv, B, T, Ca, w.NH, a->batch->positions);
    }
    if ((rc = zt_linear_forward_rows(u, a, P_ATTPROJW, proj, s.atty, x, p[P_ATTPROJB], N, Ca, C, "attn.c_proj", err)))
        return rc;
    if (!zt_unit_seq(u)) { /* whole: the residual add and the layernorm in one pass, written as the operand */
        residual_layernorm_forward(s.res2, s.ln2, a->lp_kind, s.ln2_mean, s.ln2_rstd, a->in, proj, p[P_LN2W],
                                   p[P_LN2B], N, C);
        x = a->lp_kind ? NULL : s.ln2;
        op = s.ln2;
    } else {
        residual_forward(s.res2, a->in, proj, (size_t)Nl * C);
        float *xl = zt_norm_output(u, a, s.ln2, proj, tmp);
        layernorm_forward(xl, s.ln2_mean, s.ln2_rstd, s.res2, p[P_LN2W], p[P_LN2B], Nl, C);
        if ((rc = zt_norm_into_linear(u, a, xl, s.ln2, tmp, slot_all, C, &x, &op, "mlp.c_fc input (ln_2)", err)))
            return rc;
    }
    zt_linear_forward(u, a, P_FCW, s.fch, op, x, p[P_FCB], N, C, H);
    gelu_forward_to(s.fch_gelu, a->lp_kind, s.fch, (size_t)N * H);
    x = a->lp_kind ? NULL : s.fch_gelu;
    if ((rc = zt_linear_forward_rows(u, a, P_FCPROJW, proj, s.fch_gelu, x, p[P_FCPROJB], N, H, C, "mlp.c_proj", err)))
        return rc;
    residual_forward(a->out, s.res2, proj, (size_t)Nl * C);
    return ZT_OK;
}

static int block_backward(const zt_unit *u, const zt_unit_args *a, zt_error *err) {
    widths w = widths_of(u);
    int B = a->batch->B, T = a->batch->T, C = w.C, Ca = w.Ca, H = w.H, N = B * T;
    size_t NC = (size_t)N * C, NW = (size_t)N * w.W;
    float *const *p = a->params, *const *g = a->grads;
    int rc = zt_check_lp_weights(u, a, BLOCK_LINEARS, 4, err);
    if (rc) return rc;
    block_saved s;
    block_layout(u, B, T, a->lp_kind, a, &s, NULL);
    float *bufC = a->scratch, *big1 = bufC + NC, *big2 = big1 + NW, *attn_scratch = big2 + NW;
    /* din doubles as d res2: the residual passes dout through, both layernorms add into it */
    float *dres = a->din;
    /* cut along T: din, dout and the layernorms are this part's Nl rows, their weight gradients
     * go to ng (ln_1 w, b, ln_2 w, b) and are summed over the parts at the end */
    bool seq = zt_unit_seq(u);
    int Nl = zt_unit_rows(u, a, NULL);
    float *ng = attn_scratch + block_att_floats(u, B, T);
    const float *dout, *dres_all = dres; /* dout: every position's (in bufC when cut along T) */
    if ((rc = zt_block_backward_begin(u, a, ng, 4 * (size_t)C, bufC, C, &dout, "mlp.c_proj output gradient", err)))
        return rc;
    /* MLP: out = res2 + fch_gelu·Wpᵀ + b */
    zt_linear_backward(u, a, P_FCPROJW, big1, g[P_FCPROJW], g[P_FCPROJB], dout, s.fch_gelu, N, H, C, false);
    /* d fch: under lp compute (and no LoRA adapter on c_fc, which needs it fp32) gelu's backward
     * writes it rounded into the staging, as c_fc's products read it, and sums c_fc's bias gradient in
     * the same pass; under fp32 the two passes apart are faster (bench/RESULTS.md) */
    bool rounded = zt_linear_takes_rounded(u, a, P_FCW);
    if (rounded)
        gelu_backward_to(a->staging, a->lp_kind, g[P_FCB], s.fch, big1, N, H);
    else
        gelu_backward(big2, s.fch, big1, (size_t)N * H);
    const void *ln2 = s.ln2, *ln1 = s.ln1; /* cut along T: every part's rows of the operands, re-gathered */
    if (seq && (rc = zt_seq_linear_operand(u, a, s.ln2, big1, C, "mlp.c_fc input (ln_2), again", err))) return rc;
    if (seq) ln2 = big1;
    if (rounded)
        zt_linear_backward_rounded(u, a, P_FCW, bufC, g[P_FCW], a->staging, ln2, N, C, H, false);
    else
        zt_linear_backward(u, a, P_FCW, bufC, g[P_FCW], g[P_FCB], big2, ln2, N, C, H, false);
    if ((rc = zt_unit_input_grad_sum(u, a, bufC, C, "mlp.c_fc input gradient", err))) return rc;
    layernorm_backward(dres, seq ? ng + 2 * C : g[P_LN2W], seq ? ng + 3 * C : g[P_LN2B], bufC, s.res2, p[P_LN2W],
                       s.ln2_mean, s.ln2_rstd, Nl, C);
    /* attention: res2 = x + atty·Woᵀ + b */
    if (seq && (rc = zt_unit_seq_gather(u, a, dres, big2, C, "attn.c_proj output gradient", err))) return rc;
    if (seq) dres_all = big2;
    zt_linear_backward(u, a, P_ATTPROJW, bufC, g[P_ATTPROJW], g[P_ATTPROJB], dres_all, s.atty, N, Ca, C, false);
    float *dqkv = big1; /* (N,3Ca) fits in (N,W) */
    const float *O = a->lp_kind ? s.atto : (float *)s.atty;
    if (flash(u->model_cfg) && zt_unit_cp(u)) {
        if ((rc = zt_cp_attention_backward(u, a, dqkv, dqkv + Ca, dqkv + 2 * Ca, attn_scratch, bufC, s.qkv, s.qkv + Ca,
                                           s.qkv + 2 * Ca, O, s.lse, w.NH, w.NH, Ca / w.NH, 3 * Ca, 3 * Ca, err)))
            return rc;
    } else if (flash(u->model_cfg)) {
        zt_trace_begin("attention", "whole backward");
        flash_attention_backward(dqkv, attn_scratch, bufC, s.qkv, O, s.lse, B, T, Ca, w.NH, a->attn_bf16,
                                 a->batch->positions);
        zt_trace_end();
    }
    else
        attention_backward(dqkv, attn_scratch, bufC, s.qkv, s.att, B, T, Ca, w.NH);
    if (seq && (rc = zt_seq_linear_operand(u, a, s.ln1, big2, C, "attn.c_attn input (ln_1), again", err))) return rc;
    if (seq) ln1 = big2;
    zt_linear_backward(u, a, P_QKVW, bufC, g[P_QKVW], g[P_QKVB], dqkv, ln1, N, C, 3 * Ca, false);
    if ((rc = zt_unit_input_grad_sum(u, a, bufC, C, "attn.c_attn input gradient", err))) return rc;
    layernorm_backward(dres, seq ? ng : g[P_LN1W], seq ? ng + C : g[P_LN1B], bufC, a->in, p[P_LN1W], s.ln1_mean,
                       s.ln1_rstd, Nl, C);
    float *const norms[] = {g[P_LN1W], g[P_LN1B], g[P_LN2W], g[P_LN2B]};
    return zt_unit_norm_grads(u, a, ng, norms, 4, C, "ln_1 and ln_2 weight gradients", err);
}

/* rnd(dout) of the widest Linear output: c_fc's (N,H), or the projections' (N,C) when cut finer */
static size_t block_staging_bytes(const zt_unit *u, int B, int T, int lp_kind) {
    return matmul_lp_staging_bytes((zt_lp_kind)lp_kind, B * T, widths_of(u).W);
}

/* the four Linear weights go through zt_linear_forward/_backward, which take params_lp when given;
 * they may carry LoRA adapters */
static bool block_adaptable(const zt_unit *u, int k) {
    return k == P_QKVW || k == P_ATTPROJW || k == P_FCW || k == P_FCPROJW;
}

/* ... and so do their LoRA adapters */
static bool block_reads_lp(const zt_unit *u, int k) { return block_adaptable(u, k) || zt_unit_is_adapter(u, k); }

/* Selective checkpointing: rebuilds fch_gelu, and under naive attention att, exactly as
 * block_forward wrote them (the same kernels on the same kept inputs; attention_forward without
 * its output skips P·V; under lp compute gelu(fch) is written rounded into its slot, as
 * block_forward wrote it). */
static int block_recompute(const zt_unit *u, const zt_unit_args *a, zt_error *err) {
    widths w = widths_of(u);
    int B = a->batch->B, T = a->batch->T, N = B * T;
    block_saved s;
    block_layout(u, B, T, a->lp_kind, a, &s, NULL);
    if (!flash(u->model_cfg)) attention_forward(NULL, s.att, s.qkv, B, T, w.Ca, w.NH, a->batch->positions);
    gelu_forward_to(s.fch_gelu, a->lp_kind, s.fch, (size_t)N * w.H);
    return ZT_OK;
}

static const zt_unit_ops BLOCK_OPS = {.saved_floats = block_saved_floats,
                                      .scratch_floats = block_scratch_floats,
                                      .forward = block_forward,
                                      .backward = block_backward,
                                      .reads_lp = block_reads_lp,
                                      .adaptable = block_adaptable,
                                      .assigns_grad = block_adaptable, /* their weight products */
                                      .staging_bytes = block_staging_bytes,
                                      .kept_floats = block_kept_floats,
                                      .recompute = block_recompute};

/* ---------------------------------------------------------------------------------------------
 * head unit: params ln_f.weight, ln_f.bias, wte (tied). out = per-token losses (B,T).
 * saved: lnf (N,C) (the LM head's input: rounded under lp compute) | lnf_mean (N) | lnf_rstd (N) |
 * probs (N,V) (logits, then probabilities; none when the loss is chunked: layers.h), each 64-byte
 * aligned */
typedef struct head_saved {
    void *lnf;
    float *mean, *rstd, *probs;
} head_saved;

static size_t head_layout(const zt_unit *u, int B, int T, int lp_kind, float *saved, head_saved *s) {
    const zt_gpt2_config *c = u->model_cfg;
    size_t Nl = zt_unit_rows_max(u, B, T); /* cut along T: ln_f's rows of this part (layers.h) */
    size_t lnf = matmul_saved_input_floats(lp_kind, Nl * c->n_embd), stat = zt_fp32_floats(Nl);
    *s = !saved ? (head_saved){0}
                : (head_saved){.lnf = saved, .mean = saved + lnf, .rstd = saved + lnf + stat,
                               .probs = zt_head_chunked(u) ? NULL : saved + lnf + 2 * stat};
    return lnf + 2 * stat + zt_head_saved_logits_floats(u, B, T, c->vocab_size);
}

static size_t head_saved_floats(const zt_unit *u, int B, int T, int lp_kind) {
    head_saved s;
    return head_layout(u, B, T, lp_kind, NULL, &s);
}

static const int HEAD_LINEARS[] = {2};

/* backward: dlnf (N,C); forward: lnf in fp32 under lp compute (N,C), then the cut loss's rows;
 * then, cut along T: the LM head's whole operand (N,C) | ln_f's output rows of this part (forward)
 * | its weight gradients (backward, 2C) */
static size_t head_seq_at(const zt_unit *u, int B, int T) {
    const zt_gpt2_config *c = u->model_cfg;
    return (size_t)B * T * c->n_embd + zt_head_loss_scratch_floats(u, B, T, c->vocab_size);
}

static size_t head_scratch_floats(const zt_unit *u, int B, int T) {
    const zt_gpt2_config *c = u->model_cfg;
    size_t seq = zt_unit_seq(u) ? ((size_t)B * T + zt_unit_rows_max(u, B, T) + 2) * (size_t)c->n_embd : 0;
    return head_seq_at(u, B, T) + seq;
}

static int head_forward(const zt_unit *u, const zt_unit_args *a, zt_error *err) {
    const zt_gpt2_config *c = u->model_cfg;
    const zt_batch *bt = a->batch;
    int B = bt->B, T = bt->T, C = c->n_embd, V = c->vocab_size, N = B * T;
    int rc = zt_check_lp_weights(u, a, HEAD_LINEARS, 1, err);
    if (rc) return rc;
    head_saved s;
    head_layout(u, B, T, a->lp_kind, a->saved, &s);
    float *logits = s.probs, *x;
    void *op = s.lnf;
    if (!zt_unit_seq(u)) { /* whole: ln_f writes the LM head's operand (rounded under lp compute) */
        layernorm_forward_to(s.lnf, a->lp_kind, s.mean, s.rstd, a->in, a->params[0], a->params[1], N, C);
        x = a->lp_kind ? NULL : s.lnf;
    } else { /* cut along T: ln_f's rows and the LM head's whole operand after the loss's rows (head_seq_at) */
        float *slot_all = a->scratch + head_seq_at(u, B, T);
        float *xl = zt_norm_output(u, a, s.lnf, slot_all + (size_t)N * C, a->scratch);
        layernorm_forward(xl, s.mean, s.rstd, a->in, a->params[0], a->params[1], zt_unit_rows(u, a, NULL), C);
        if ((rc = zt_norm_into_linear(u, a, xl, s.lnf, a->scratch, slot_all, C, &x, &op, "LM head input (ln_f)", err)))
            return rc;
    }
    /* this part's vocabulary; logits: NULL when the loss is chunked (head_layout) */
    return zt_head_loss_forward(u, a, 2, op, x, logits, C, V, (size_t)N * C, err);
}

static int head_backward(const zt_unit *u, const zt_unit_args *a, zt_error *err) {
    const zt_gpt2_config *c = u->model_cfg;
    int B = a->batch->B, T = a->batch->T, C = c->n_embd, V = c->vocab_size;
    head_saved s;
    head_layout(u, B, T, a->lp_kind, a->saved, &s);
    float *dlnf = a->scratch;
    bool seq = zt_unit_seq(u); /* cut along T: the LM head's operand re-gathered; ln_f's gradients of this
                                  part's rows, then summed */
    float *slot_all = a->scratch + head_seq_at(u, B, T), *ng = slot_all + (size_t)B * T * C;
    int rc = seq ? zt_seq_linear_operand(u, a, s.lnf, slot_all, C, "LM head input (ln_f), again", err) : ZT_OK;
    if (!rc)
        rc = zt_head_loss_backward(u, a, 2, s.probs, seq ? slot_all : s.lnf, dlnf, C, V, (size_t)B * T * C, err);
    if (rc) return rc;
    if (seq) memset(ng, 0, 2 * (size_t)C * sizeof *ng);
    layernorm_backward(a->din, seq ? ng : a->grads[0], seq ? ng + C : a->grads[1], dlnf, a->in, a->params[0], s.mean,
                       s.rstd, zt_unit_rows(u, a, NULL), C);
    float *const norms[] = {a->grads[0], a->grads[1]};
    return zt_unit_norm_grads(u, a, ng, norms, 2, C, "ln_f weight gradients", err);
}

/* the LM head's weight (wte, tied) goes through linear_forward/_backward */
static bool head_reads_lp(const zt_unit *u, int k) { return k == 2; }

/* rnd(dlogits) (N,V) (this part's vocabulary when cut; a chunk's rows when chunked) */
static size_t head_staging_bytes(const zt_unit *u, int B, int T, int lp_kind) {
    const zt_gpt2_config *c = u->model_cfg;
    return zt_head_staging_bytes(u, B, T, lp_kind, c->vocab_size);
}

static const zt_unit_ops HEAD_OPS = {.saved_floats = head_saved_floats,
                                     .scratch_floats = head_scratch_floats,
                                     .forward = head_forward,
                                     .backward = head_backward,
                                     .reads_lp = head_reads_lp,
                                     .assigns_grad = head_reads_lp, /* the LM head's weight product */
                                     .staging_bytes = head_staging_bytes}; /* keeps its logits: see the top */

/* ---------------------------------------------------------------------------------------------
 * the model */

/* 6 FLOPs per parameter per token for forward + backward of every matmul (wpe is a lookup and
 * does not count; wte counts because the tied LM head multiplies by it), plus the attention
 * scores and weighted sums: 2·2·T·C per token per layer forward, x3 with backward (PaLM's
 * 12·L·C·T, counting the full TxT matrix as llm.c and torchtitan do). */
static double gpt2_flops_per_token(const zt_model *m, int T) {
    const zt_gpt2_config *c = m->cfg;
    double n = (double)zt_model_numel(m) - (double)c->max_seq_len * c->n_embd;
    return 6.0 * n + 12.0 * c->n_layer * c->n_embd * (double)T;
}

/* What a step recomputes, per token, counted as gpt2_flops_per_token counts: full re-runs every
 * block's forward (its matmuls 2·12·C², its attention 2·2·T·C; the head is never re-run,
 * recompute.c says why); selective under naive attention re-runs the blocks' scores Q·Kᵀ (2·T·C;
 * the softmax and gelu are not counted, like every elementwise op); flash attention's backward
 * recomputes its scores Q·Kᵀ (2·T·C) in every mode. */
static double gpt2_recompute_flops_per_token(const zt_model *m, int T, zt_recompute mode) {
    const zt_gpt2_config *c = m->cfg;
    double C = c->n_embd, L = c->n_layer, scores = L * 2.0 * C * T;
    double fl = flash(c) ? scores : 0, head = m->loss_chunk_tokens > 0 ? 2.0 * C * c->vocab_size : 0;
    if (mode == ZT_RECOMPUTE_FULL) return L * (24.0 * C * C + 4.0 * C * T) + fl + head;
    if (mode == ZT_RECOMPUTE_SELECTIVE) return (flash(c) ? fl : scores) + head;
    return fl + head;
}

/* Tensor parallelism cuts whole heads (and the MLP's 4C columns with them). */
static int gpt2_tp_check(const zt_model *m, int parts, zt_error *err) {
    const zt_gpt2_config *c = m->cfg;
    if (c->n_head % parts != 0)
        return zt_error_set(err, ZT_ERR_USAGE, "gpt2: tensor parallelism over %d ranks needs whole heads per rank: "
                            "%d does not divide n_head %d", parts, parts, c->n_head);
    return ZT_OK;
}

static int add(zt_model *m, const char *name, int ndim, int64_t d0, int64_t d1, zt_init_kind init,
               float std, int *idx, zt_error *err) {
    int64_t shape[2] = {d0, d1};
    return zt_model_add_param(m, name, ndim, shape, init, std, ndim >= 2, idx, err);
}

int zt_gpt2_create(const zt_gpt2_config *cfg, zt_model **out, zt_error *err) {
    *out = NULL;
    const zt_gpt2_config *c = cfg;
    if (c->n_layer < 1 || c->n_head < 1 || c->n_embd < 1 || c->vocab_size < 2 || c->max_seq_len < 1)
        return zt_error_set(err, ZT_ERR_USAGE, "gpt2: invalid shape L=%d NH=%d C=%d V=%d maxT=%d",
                            c->n_layer, c->n_head, c->n_embd, c->vocab_size, c->max_seq_len);
    if (c->n_embd % c->n_head != 0)
        return zt_error_set(err, ZT_ERR_USAGE, "gpt2: n_embd %d is not a multiple of n_head %d",
                            c->n_embd, c->n_head);
    if (c->vocab_size > (1 << 24))
        return zt_error_set(err, ZT_ERR_USAGE, "gpt2: vocab_size %d exceeds 16777216 (model.vocab_size's limit)",
                            c->vocab_size);
    if (c->attention != ZT_ATTENTION_FLASH && c->attention != ZT_ATTENTION_NAIVE)
        return zt_error_set(err, ZT_ERR_USAGE, "gpt2: attention kernel %d is neither flash (0) nor naive (1)",
                            (int)c->attention);
    zt_model *m;
    int rc = zt_model_create("gpt2", &m, err);
    if (rc) return rc;
    zt_gpt2_config *own = malloc(sizeof *own);
    if (!own) {
        zt_model_free(m);
        return zt_error_set(err, ZT_ERR_NOMEM, "gpt2: out of memory");
    }
    *own = *c;
    m->cfg = own;
    m->vocab_size = c->vocab_size;
    m->max_seq_len = c->max_seq_len;
    m->train_flops_per_token = gpt2_flops_per_token;
    m->recompute_flops_per_token = gpt2_recompute_flops_per_token;
    m->tp_check = gpt2_tp_check;

    int64_t C = c->n_embd, V = c->vocab_size;
    float std = 0.02f, proj_std = 0.02f / sqrtf(2.0f * (float)c->n_layer);
    int wte, wpe, lnfw, lnfb;
    if ((rc = add(m, "wte.weight", 2, V, C, ZT_INIT_NORMAL, std, &wte, err)) ||
        (rc = add(m, "wpe.weight", 2, c->max_seq_len, C, ZT_INIT_NORMAL, std, &wpe, err)))
        goto fail;
    int emb[2] = {wte, wpe};
    if ((rc = zt_model_add_unit(m, "embedding", &EMBEDDING_OPS, -1, emb, 2, (int)C, err))) goto fail;

    for (int l = 0; l < c->n_layer; l++) {
        struct {
            const char *suffix;
            int ndim;
            int64_t d0, d1;
            zt_init_kind init;
            float std;
        } spec[P_BLOCK_COUNT] = {
            {"ln_1.weight", 1, C, 0, ZT_INIT_ONES, 0},
            {"ln_1.bias", 1, C, 0, ZT_INIT_ZEROS, 0},
            {"attn.c_attn.weight", 2, 3 * C, C, ZT_INIT_NORMAL, std},
            {"attn.c_attn.bias", 1, 3 * C, 0, ZT_INIT_ZEROS, 0},
            {"attn.c_proj.weight", 2, C, C, ZT_INIT_NORMAL, proj_std},
            {"attn.c_proj.bias", 1, C, 0, ZT_INIT_ZEROS, 0},
            {"ln_2.weight", 1, C, 0, ZT_INIT_ONES, 0},
            {"ln_2.bias", 1, C, 0, ZT_INIT_ZEROS, 0},
            {"mlp.c_fc.weight", 2, 4 * C, C, ZT_INIT_NORMAL, std},
            {"mlp.c_fc.bias", 1, 4 * C, 0, ZT_INIT_ZEROS, 0},
            {"mlp.c_proj.weight", 2, C, 4 * C, ZT_INIT_NORMAL, proj_std},
            {"mlp.c_proj.bias", 1, C, 0, ZT_INIT_ZEROS, 0},
        };
        int idx[P_BLOCK_COUNT];
        for (int i = 0; i < P_BLOCK_COUNT; i++) {
            char name[ZT_NAME_MAX];
            snprintf(name, sizeof name, "h.%d.%s", l, spec[i].suffix);
            if ((rc = add(m, name, spec[i].ndim, spec[i].d0, spec[i].d1, spec[i].init, spec[i].std,
                          &idx[i], err)))
                goto fail;
        }
        char uname[32];
        snprintf(uname, sizeof uname, "h.%d", l);
        if ((rc = zt_model_add_unit(m, uname, &BLOCK_OPS, l, idx, P_BLOCK_COUNT, (int)C, err)))
            goto fail;
    }
    if ((rc = add(m, "ln_f.weight", 1, C, 0, ZT_INIT_ONES, 0, &lnfw, err)) ||
        (rc = add(m, "ln_f.bias", 1, C, 0, ZT_INIT_ZEROS, 0, &lnfb, err)))
        goto fail;
    int head[3] = {lnfw, lnfb, wte};
    if ((rc = zt_model_add_unit(m, "head", &HEAD_OPS, -1, head, 3, 1, err))) goto fail;
    *out = m;
    return ZT_OK;
fail:
    zt_model_free(m);
    return rc;
}
