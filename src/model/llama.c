/* llama.c - Llama on the unit API: the embedding unit (embed_tokens), L decoder blocks and the
 * head unit (final RMSNorm, lm_head, softmax cross-entropy). Parameter names and shapes are Hugging
 * Face's LlamaForCausalLM's without the "model." prefix; Linear weights are stored (OC, C) like
 * torch.nn.Linear, so they export as they are. No biases, except with qkv_bias (Qwen2's attention)
 * q, k and v's: self_attn.{q,k,v}_proj.bias (Q), (KV), (KV), the block's last three parameters, added
 * by the projections and their gradients summed over the rows in backward (o has none). With
 * tie_embeddings the head reads embed_tokens (GPT-2's tying) and there is no lm_head.weight.
 *
 * Block (pre-RMSNorm), N = B*T rows, hs = C/NH, KV = NKV·hs, I = intermediate_size:
 *   xn1 = RMSNorm(x); q = xn1·Wqᵀ (+ bq), k = xn1·Wkᵀ (+ bk), v = xn1·Wvᵀ (+ bv); q, k = RoPE(q, k)
 *   y = GQA-attention(q, k, v); r = x + y·Woᵀ
 *   xn2 = RMSNorm(r); h = silu(xn2·Wgᵀ) * (xn2·Wuᵀ); out = r + h·Wdᵀ
 * The saved activations of a block, the kept part first, each buffer 64-byte aligned (the table
 * of src/memory/shapes.h's formula, which this model now is):
 *   kept: xn1* (N,C) | rstd1 (N) | q (N,C) | k (N,KV) | v (N,KV) | atty* (N,C) | atto (N,C) |
 *         lse (B,NH,T) | res2 (N,C) | xn2* (N,C) | rstd2 (N) | gate (N,I) | up (N,I)
 *   rest: att (B,NH,T,T) | h* (N,I)
 * As GPT-2's (gpt2.c): flash attention (cfg->attention) saves lse and, under bf16/fp16 compute,
 * its fp32 output in atto (no att); naive saves att (no atto, no lse). K and V heads are read in
 * place by their NH/NKV query heads, never repeated. q and k are saved after the rotation
 * (attention backward reads them; RoPE's backward needs only the positions). The starred buffers
 * are read only by Linears and hold the rounded operand under bf16/fp16 compute (as GPT-2's;
 * docs/precision.md); everything else is fp32. Selective checkpointing keeps the first part and
 * recomputes h = silu(gate)·up, and under naive attention att (the probabilities, from q and k),
 * before backward (block_recompute), as GPT-2 recomputes gelu(fch) and att.
 * A mixture of experts (n_experts > 0, llama_moe.c): the block's MLP is sparse, Mixtral's; its
 * parameters are the router and the experts' w1, w2 (in gate, up, down's places) and w3 (after the
 * norms), gate, up and h are empty and the MoE's own saved buffers follow up in the kept part.
 * The embedding saves nothing; the head saves xn* (N,C) | rstd (N) | logits then probabilities
 * (N,V) and keeps it all under selective (its logits cost a (N,C)x(C,V) product). Sequence
 * parallelism (layers.h) cuts xn1, xn2, rstd1, rstd2, res2 and the head's xn and rstd to the
 * part's N/P rows.
 */
#include "zerotrain/zerotrain.h"
#include "kernels/kernels.h"
#include "obs/trace.h"
#include "model/layers.h"
#include "model/llama_moe.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------
 * presets */
typedef struct preset {
    const char *name;
    zt_llama_config cfg;
} preset;

#define LLAMA3_SCALING {8.0f, 1.0f, 4.0f, 8192}
#define NO_SCALING {0.0f, 0.0f, 0.0f, 0}
#define NO_EXPERTS 0, 0, 0, 0, false, 0.0f, 0.0f, 0.0f, 0, false
#define DENSE NO_EXPERTS, false /* no experts, no q/k/v biases */
#define QKV_BIAS true           /* after the experts' fields: q/k/v biases (Qwen2's) */
static const preset PRESETS[] = {
    /* maxT, V, L, NH, C, NKV, I, theta, eps, scaling, tied, attention kernel */
    {"llama-tiny", {128, 50257, 2, 4, 64, 2, 192, 10000.0f, 1e-5f, NO_SCALING, false, ZT_ATTENTION_FLASH, DENSE}},
    /* GPT-2 124M's size for bench/ (W1's Llama): Llama's SwiGLU rule I = 256 * ceil(8C/3 / 256) */
    {"llama-124M", {1024, 32000, 12, 12, 768, 4, 2048, 10000.0f, 1e-5f, NO_SCALING, false, ZT_ATTENTION_FLASH, DENSE}},
    {"llama-7b", {4096, 32000, 32, 32, 4096, 32, 11008, 10000.0f, 1e-5f, NO_SCALING, false, ZT_ATTENTION_FLASH, DENSE}},
    {"llama-13b", {4096, 32000, 40, 40, 5120, 40, 13824, 10000.0f, 1e-5f, NO_SCALING, false, ZT_ATTENTION_FLASH, DENSE}},
    {"llama-70b", {4096, 32000, 80, 64, 8192, 8, 28672, 10000.0f, 1e-5f, NO_SCALING, false, ZT_ATTENTION_FLASH, DENSE}},
    {"llama3-8b", {131072, 128256, 32, 32, 4096, 8, 14336, 500000.0f, 1e-5f, LLAMA3_SCALING, false, ZT_ATTENTION_FLASH, DENSE}},
    {"llama3-70b", {131072, 128256, 80, 64, 8192, 8, 28672, 500000.0f, 1e-5f, LLAMA3_SCALING, false, ZT_ATTENTION_FLASH, DENSE}},
    {"mistral-7b", {32768, 32000, 32, 32, 4096, 8, 14336, 10000.0f, 1e-5f, NO_SCALING, false, ZT_ATTENTION_FLASH, DENSE}},
    /* Qwen2-0.5B (config.json: tied, rms_norm_eps 1e-6, rope_theta 1e6, q/k/v biases; its 32K context):
     * 494,032,768 parameters, the released count */
    {"qwen2-0.5b", {32768, 151936, 24, 14, 896, 2, 4864, 1000000.0f, 1e-6f, NO_SCALING, true, ZT_ATTENTION_FLASH,
                    NO_EXPERTS, QKV_BIAS}},
    /* mixtures of experts, then: experts, top-k, expert width (0: I), shared, norm_topk_prob, aux and
     * z coefficients, capacity factor (0: dropless). Mixtral 8x7B (v0.1's config.json): 46.7B
     * parameters, 12.9B active (docs/models.md counts them) */
    {"mixtral-8x7b", {32768, 32000, 32, 32, 4096, 8, 14336, 1000000.0f, 1e-5f, NO_SCALING, false, ZT_ATTENTION_FLASH,
                      8, 2, 0, 0, true, 0.02f, 0.0f, 0.0f, 0, false, false}},
    /* bench/moe.sh: llama-124M with 8 experts of half its MLP width, top-2: the dense model's
     * active parameters and FLOPs per token (plus the router's 8·768 per layer) */
    {"llama-124M-moe", {1024, 32000, 12, 12, 768, 4, 2048, 10000.0f, 1e-5f, NO_SCALING, false, ZT_ATTENTION_FLASH,
                        8, 2, 1024, 0, true, 0.01f, 0.001f, 0.0f, 0, false, false}},
    /* tests: llama-tiny's attention, 4 experts of width 96, top-2 */
    {"llama-tiny-moe", {128, 50257, 2, 4, 64, 2, 192, 10000.0f, 1e-5f, NO_SCALING, false, ZT_ATTENTION_FLASH,
                        4, 2, 96, 0, true, 0.01f, 0.001f, 0.0f, 0, false, false}},
    /* ... then the shared expert's width and its gate. Qwen1.5-MoE-A2.7B (config.json): 60 experts of
     * width 1408, top-4 not renormalized, a gated shared expert of width 5632, q/k/v biases;
     * 14,315,784,192 parameters, 2,689,173,504 active: the released counts (docs/models.md) */
    {"qwen1.5-moe-a2.7b", {8192, 151936, 24, 16, 2048, 16, 5632, 1000000.0f, 1e-6f, NO_SCALING, false,
                           ZT_ATTENTION_FLASH, 60, 4, 1408, 0, false, 0.001f, 0.0f, 0.0f, 5632, true, QKV_BIAS}},
};
#define PRESET_NAMES "llama-tiny, llama-124M, llama-7b, llama-13b, llama-70b, llama3-8b, llama3-70b, mistral-7b, " \
                     "qwen2-0.5b, mixtral-8x7b, llama-124M-moe, llama-tiny-moe, qwen1.5-moe-a2.7b"

int zt_llama_preset(const char *name, zt_llama_config *cfg, zt_error *err) {
    for (size_t i = 0; i < sizeof PRESETS / sizeof *PRESETS; i++)
        if (strcmp(PRESETS[i].name, name) == 0) {
            *cfg = PRESETS[i].cfg;
            return ZT_OK;
        }
    return zt_error_set(err, ZT_ERR_USAGE, "unknown Llama preset \"%s\" (known: " PRESET_NAMES ")", name);
}

static int head_size(const zt_llama_config *c) { return c->n_embd / c->n_head; }
static size_t kv_width(const zt_llama_config *c) { return (size_t)c->n_kv_head * head_size(c); }

/* the rotary frequencies of the config, hs/2 floats */
static void inv_freq_of(const zt_llama_config *c, float *inv_freq) {
    const zt_rope_scaling *r = &c->rope_scaling;
    rope_inv_freq(inv_freq, head_size(c), c->rope_theta, r->factor, r->low_freq_factor, r->high_freq_factor,
                  r->original_max_position_embeddings);
}

/* ---------------------------------------------------------------------------------------------
 * embedding unit: embed_tokens (V,C); read through its compute copy under low-precision compute */
static size_t emb_saved(const zt_unit *u, int B, int T, int lp_kind) { return 0; }
static size_t emb_scratch(const zt_unit *u, int B, int T) {
    return zt_embedding_scratch_floats(u, B, T, ((const zt_llama_config *)u->model_cfg)->n_embd);
}

static int emb_forward(const zt_unit *u, const zt_unit_args *a, zt_error *err) {
    const zt_llama_config *c = u->model_cfg;
    return zt_embedding_forward(u, a, 0, -1, c->n_embd, err);
}

static int emb_backward(const zt_unit *u, const zt_unit_args *a, zt_error *err) {
    const zt_llama_config *c = u->model_cfg;
    return zt_embedding_backward(u, a, 0, -1, c->n_embd, err);
}

static bool emb_reads_lp(const zt_unit *u, int k) { return k == 0; }

static const zt_unit_ops EMBEDDING_OPS = {.saved_floats = emb_saved, .scratch_floats = emb_scratch,
                                          .forward = emb_forward, .backward = emb_backward,
                                          .reads_lp = emb_reads_lp};

/* ---------------------------------------------------------------------------------------------
 * decoder block unit: 9 params in Hugging Face's state-dict order (10 with experts) */
enum { P_Q, P_K, P_V, P_O, P_GATE, P_UP, P_DOWN, P_NORM1, P_NORM2, P_BLOCK_COUNT };
/* a mixture-of-experts block (llama_moe.c): the router and the stacked experts' w1, w2 in the dense
 * MLP's places, w3 after the norms */
enum { P_ROUTER = P_GATE, P_W1 = P_UP, P_W2 = P_DOWN, P_W3 = P_BLOCK_COUNT, P_MOE_BLOCK_COUNT };
/* ... and with a shared expert (llama_moe_shared.c) its gate, up and down, then its sigmoid gate */
enum { P_SH_GATE = P_MOE_BLOCK_COUNT, P_SH_UP, P_SH_DOWN, P_SH_ROUTE, P_MOE_SHARED_COUNT };
static const zt_moe_params MOE_PARAMS = {.router = P_ROUTER, .w1 = P_W1, .w2 = P_W2, .w3 = P_W3,
                                         .shared_gate = P_SH_GATE, .shared_up = P_SH_UP,
                                         .shared_down = P_SH_DOWN, .shared_route = P_SH_ROUTE};
static const int BLOCK_LINEARS[] = {P_Q, P_K, P_V, P_O, P_GATE, P_UP, P_DOWN};
/* ... with experts: the attention's four, the experts' stacked w1, w2, w3 and the shared expert's
 * three Linears (the router and the shared expert's sigmoid gate run in fp32) */
static const int MOE_LINEARS[] = {P_Q, P_K, P_V, P_O, P_W1, P_W2, P_W3, P_SH_GATE, P_SH_UP, P_SH_DOWN};

/* A block's parameters before the q/k/v biases: the dense ones, or the experts' (with the shared
 * expert's three weights when it has a width, its gate when asked) */
static int block_base_params(const zt_llama_config *c) {
    if (c->n_experts < 1) return P_BLOCK_COUNT;
    if (zt_moe_shared_width(c) < 1) return P_MOE_BLOCK_COUNT;
    return c->shared_expert_gate ? P_MOE_SHARED_COUNT : P_SH_ROUTE;
}

/* q, k and v's biases of a block (qkv_bias: the three after its others), or NULLs without them */
static void qkv_biases(const zt_llama_config *c, float *const *v, float *out[3]) {
    int at = block_base_params(c);
    for (int i = 0; i < 3; i++) out[i] = c->qkv_bias && v ? v[at + i] : NULL;
}

typedef struct block_saved {
    void *xn1; float *rstd1, *q, *k, *v; void *atty; float *atto, *lse, *res2; /* kept ... */
    void *xn2; float *rstd2, *gate, *up, *moe;                                 /* ... kept */
    float *att; void *h;                                                       /* rest */
} block_saved;

enum { BLOCK_KEPT_BUFFERS = 14 };

static bool flash(const zt_llama_config *c) { return c->attention == ZT_ATTENTION_FLASH; }
static bool moe(const zt_llama_config *c) { return c->n_experts > 0; }

/* A block's widths on its part (tensor parallelism, docs/parallelism.md: P = zt_unit_parts; 1 when
 * whole): the residual stream C; NH query and NKV key/value heads (n_head/P, n_kv_head/P) of
 * size hs, i.e. Q = NH·hs query and KV = NKV·hs key/value channels; the MLP's I = I/P. */
typedef struct widths {
    int C, NH, NKV, hs, Q, KV, I;
} widths;

static widths widths_of(const zt_unit *u) {
    const zt_llama_config *c = u->model_cfg;
    int P = zt_unit_parts(u), hs = head_size(c);
    return (widths){.C = c->n_embd, .NH = c->n_head / P, .NKV = c->n_kv_head / P, .hs = hs,
                    .Q = c->n_head / P * hs, .KV = c->n_kv_head / P * hs,
                    .I = moe(c) ? 0 : c->intermediate_size / P}; /* experts: no dense MLP */
}

/* Lays the saved buffers out from a->saved (kept part) and zt_unit_saved_rest (the rest), or just
 * counts (a NULL). Returns the total floats; *kept (optional) gets the kept part's. */
static size_t block_layout(const zt_unit *u, int B, int T, int lp_kind, const zt_unit_args *a,
                           block_saved *s, size_t *kept) {
    widths w = widths_of(u);
    size_t N = (size_t)B * T, C = (size_t)w.C, Q = (size_t)w.Q, KV = (size_t)w.KV, I = (size_t)w.I;
    size_t Nl = zt_unit_rows_max(u, B, T); /* the norms' and the residual's rows: N/P cut along T */
    size_t in_C = matmul_saved_input_floats(lp_kind, Nl * C); /* xn1, xn2: the part's rows (layers.h) */
    bool fl = flash(u->model_cfg);
    size_t sizes[] = {in_C, zt_fp32_floats(Nl), zt_fp32_floats(N * Q), zt_fp32_floats(N * KV),
                      zt_fp32_floats(N * KV), matmul_saved_input_floats(lp_kind, N * Q),
                      fl && lp_kind ? zt_fp32_floats(N * Q) : 0, fl ? zt_fp32_floats((size_t)B * w.NH * T) : 0,
                      zt_fp32_floats(Nl * C), in_C, zt_fp32_floats(Nl), zt_fp32_floats(N * I), zt_fp32_floats(N * I),
                      moe(u->model_cfg) ? zt_moe_saved_floats(u, N, lp_kind) : 0,
                      fl ? 0 : zt_fp32_floats((size_t)B * w.NH * T * T), matmul_saved_input_floats(lp_kind, N * I)};
    void *ptrs[sizeof sizes / sizeof *sizes];
    size_t off = zt_saved_layout(sizes, (int)(sizeof sizes / sizeof *sizes), BLOCK_KEPT_BUFFERS, a, ptrs, kept);
    *s = (block_saved){.xn1 = ptrs[0], .rstd1 = ptrs[1], .q = ptrs[2], .k = ptrs[3], .v = ptrs[4],
                       .atty = ptrs[5], .atto = ptrs[6], .lse = ptrs[7], .res2 = ptrs[8], .xn2 = ptrs[9],
                       .rstd2 = ptrs[10], .gate = ptrs[11], .up = ptrs[12], .moe = ptrs[13], .att = ptrs[14],
                       .h = ptrs[15]};
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

/* floats per row of each of the two wide scratch buffers: I, or more when dq|dk|dv (Q + 2KV) or
 * a Linear's fp32 input (C) would not fit in the two (never for the presets whole) */
static size_t wide_floats(const zt_unit *u) {
    widths w = widths_of(u);
    size_t qkv = (size_t)w.Q + 2 * (size_t)w.KV, C = (size_t)w.C, need = ((qkv > C ? qkv : C) + 1) / 2;
    return (size_t)w.I > need ? (size_t)w.I : need;
}

/* scratch: bufC (N,C) | wide1 (N,W) | wide2 (N,W) | attention scratch | LoRA's. Forward: bufC holds the
 * projections' output, wide1.. the Linears' fp32 inputs under lp compute, the attention scratch
 * flash's. Backward: bufC the
 * Linears' input gradients, wide1 dh then dgate, wide2 dup; then dq | dk | dv from wide1 on. */
static size_t block_att_floats(const zt_unit *u, int B, int T) {
    widths w = widths_of(u);
    if (zt_unit_cp(u)) return zt_cp_attention_scratch_floats(u, B, T, w.NH, w.NKV, w.hs);
    return flash(u->model_cfg) ? flash_attention_scratch_floats(B, T, w.NH, w.NKV, w.hs)
                               : attention_gqa_scratch_floats(B, T, w.NKV);
}

static size_t moe_scratch_floats(const zt_unit *u, size_t N);

/* ... then, cut along T, the two RMSNorms' weight gradients of this part's rows (2C) and the
 * Linears' whole operand (N,C: the rounded one in forward, the re-gathered one in backward) */
static size_t block_scratch_floats(const zt_unit *u, int B, int T) {
    widths w = widths_of(u);
    size_t N = (size_t)B * T, norms = zt_unit_seq(u) ? (2 + N) * (size_t)w.C : 0;
    return N * (size_t)w.C + 2 * N * wide_floats(u) + block_att_floats(u, B, T) + norms + moe_scratch_floats(u, N) +
           zt_lora_scratch_floats(u, B, T); /* LoRA's, last */
}

/* ... and before LoRA's, the experts' (llama_moe.c): after the norms' (whole: none) */
static size_t moe_scratch_floats(const zt_unit *u, size_t N) {
    return moe(u->model_cfg) ? zt_moe_scratch_floats(u, N) : 0;
}

static float *moe_scratch(const zt_unit *u, const zt_unit_args *a) {
    int B = a->batch->B, T = a->batch->T;
    size_t N = (size_t)B * T, C = (size_t)widths_of(u).C, norms = zt_unit_seq(u) ? (2 + N) * C : 0;
    return a->scratch + N * (C + 2 * wide_floats(u)) + block_att_floats(u, B, T) + norms;
}

/* Cut for tensor parallelism (widths_of): q, k, v, gate and up are column-parallel (this part's
 * heads, key/value heads and MLP columns), o and down row-parallel, summed over the parts before
 * the residual (zt_linear_forward_rows); in backward the input gradients of q|k|v and gate|up are
 * summed (zt_unit_input_grad_sum) before their RMSNorm. Cut along T too (sequence parallelism,
 * layers.h), as GPT-2's block (gpt2.c): the RMSNorms and residuals on this part's rows, gathered
 * before q|k|v and gate|up, reduce-scattered after o and down, their weight gradients summed; a
 * mixture's sparse MLP the same way (gathered before it, every part routing every token, its sum
 * reduce-scattered: llama_moe.c). */
/* every Linear weight the block multiplies by has its compute copy under lp compute */
static int check_lp_weights(const zt_unit *u, const zt_unit_args *a, zt_error *err) {
    if (!moe(u->model_cfg)) return zt_check_lp_weights(u, a, BLOCK_LINEARS, 7, err);
    return zt_check_lp_weights(u, a, MOE_LINEARS, zt_moe_shared_width(u->model_cfg) ? 10 : 7, err);
}

/* xn2 as the router reads it, fp32: under bf16 compute the rounded operand widened (exact) into
 * wide (N,C floats: wide1|wide2 of the block's scratch), else the slot itself (fp16: fp16 values
 * in fp32) */
static const float *router_input(const zt_unit_args *a, const void *xn2, float *wide, size_t NC) {
    if (a->lp_kind != ZT_LP_BF16) return xn2;
    zt_bf16_to_f32(wide, xn2, NC);
    return wide;
}

static int block_forward(const zt_unit *u, const zt_unit_args *a, zt_error *err) {
    const zt_llama_config *c = u->model_cfg;
    widths w = widths_of(u);
    int B = a->batch->B, T = a->batch->T, C = w.C, N = B * T, hs = w.hs, Q = w.Q, KV = w.KV, I = w.I;
    float *const *p = a->params;
    int rc = check_lp_weights(u, a, err);
    if (rc) return rc;
    if (moe(c) && zt_unit_cp(u) && c->capacity_factor > 0.0f)
        return zt_error_set(err, ZT_ERR_USAGE, "unit %s: a capacity factor (%g) with context parallelism (%d parts): "
                            "an expert's capacity is a share of the whole sequences' tokens, which no part holds; "
                            "dropless routing (capacity_factor 0) runs", u->name, (double)c->capacity_factor,
                            u->cp_parts);
    if (zt_unit_cp(u) && !flash(u->model_cfg))
        return zt_error_set(err, ZT_ERR_USAGE, "unit %s: context parallelism needs flash attention (model.attention)", u->name);
    block_saved s;
    block_layout(u, B, T, a->lp_kind, a, &s, NULL);
    float *proj = a->scratch, *tmp = proj + (size_t)N * C;
    float inv_freq[hs / 2];
    inv_freq_of(c, inv_freq);
    float *x;
    void *op;
    int Nl = zt_unit_rows(u, a, NULL); /* the RMSNorms' and residuals' rows */
    float *slot_all = tmp + 2 * (size_t)N * wide_floats(u) + block_att_floats(u, B, T) + 2 * (size_t)C;

    if (!zt_unit_seq(u)) { /* whole: the norm writes the Linears' operand in its dtype (rounded under lp
                             * compute, and the Linears then take x = NULL: nothing left to round) */
        rmsnorm_forward_to(s.xn1, a->lp_kind, s.rstd1, a->in, p[P_NORM1], c->rms_norm_eps, N, C);
        x = a->lp_kind ? NULL : s.xn1;
        op = s.xn1;
    } else { /* cut along T, the RMSNorms' rows go to proj under lp compute, the whole operand to slot_all */
        float *xl = zt_norm_output(u, a, s.xn1, proj, tmp);
        rmsnorm_forward(xl, s.rstd1, a->in, p[P_NORM1], c->rms_norm_eps, Nl, C);
        if ((rc = zt_norm_into_linear(u, a, xl, s.xn1, tmp, slot_all, C, &x, &op, "q/k/v input (input_layernorm)",
                                      err)))
            return rc;
    }
    float *bias[3]; /* q, k, v's (qkv_bias), or NULL */
    qkv_biases(c, p, bias);
    zt_linear_forward(u, a, P_Q, s.q, op, x, bias[0], N, C, Q);
    zt_linear_forward(u, a, P_K, s.k, op, x, bias[1], N, C, KV);
    zt_linear_forward(u, a, P_V, s.v, op, x, bias[2], N, C, KV);
    rope_forward_qk(s.q, s.k, inv_freq, B, T, w.NH, w.NKV, hs, a->batch->positions);
    if (flash(c)) { /* O in fp32: atty itself, or atto (rounded into atty by o_proj's forward) */
        x = a->lp_kind ? s.atto : zt_linear_input(a, s.atty, tmp);
        float *attn_scratch = tmp + 2 * (size_t)N * wide_floats(u);
        if (zt_unit_cp(u)) { /* the other parts' positions through the group (context_parallel.c) */
            if ((rc = zt_cp_attention_forward(u, a, x, s.lse, attn_scratch, s.q, s.k, s.v, w.NH, w.NKV, hs, Q, KV, err)))
                return rc;
        } else {
            zt_trace_begin("attention", "whole forward");
            flash_attention_gqa_forward(x, s.lse, attn_scratch, s.q, s.k, s.v, B, T, w.NH, w.NKV, hs, Q, KV,
                                        a->attn_bf16, a->batch->positions);
            zt_trace_end();
        }
    } else {
        x = zt_linear_input(a, s.atty, tmp);
        attention_gqa_forward(x, s.att, s.q, s.k, s.v, B, T, w.NH, w.NKV, hs, Q, KV, a->batch->positions);
    }
    if ((rc = zt_linear_forward_rows(u, a, P_O, proj, s.atty, x, NULL, N, Q, C, "self_attn.o_proj", err))) return rc;
    if (!zt_unit_seq(u)) { /* whole: the residual add and the norm in one pass, written as the operand */
        residual_rmsnorm_forward(s.res2, s.xn2, a->lp_kind, s.rstd2, a->in, proj, p[P_NORM2], c->rms_norm_eps, N, C);
        x = a->lp_kind ? NULL : s.xn2;
        op = s.xn2;
    } else {
        residual_forward(s.res2, a->in, proj, (size_t)Nl * C);
        float *xl = zt_norm_output(u, a, s.xn2, proj, tmp);
        rmsnorm_forward(xl, s.rstd2, s.res2, p[P_NORM2], c->rms_norm_eps, Nl, C);
        if ((rc = zt_norm_into_linear(u, a, xl, s.xn2, tmp, slot_all, C, &x, &op,
                                      "gate/up input (post_attention_layernorm)", err)))
            return rc;
    }
    if (moe(c)) { /* the sparse MLP (llama_moe.c) on every token (cut along T: gathered), the experts'
                   * products on the operand; proj gets its sum (cut along T: this part's rows) */
        if (zt_unit_seq(u) && a->lp_kind) /* the whole operand, as the first Linear would round it */
            zt_round_to_lp((zt_lp_kind)a->lp_kind, op, x, (size_t)N * C);
        const float *x32 = router_input(a, op, tmp, (size_t)N * C);
        if ((rc = zt_moe_forward(u, a, &MOE_PARAMS, s.moe, op, x32, proj, moe_scratch(u, a), err))) return rc;
        residual_forward(a->out, s.res2, proj, (size_t)Nl * C);
        return ZT_OK;
    }
    zt_linear_forward(u, a, P_GATE, s.gate, op, x, NULL, N, C, I);
    zt_linear_forward(u, a, P_UP, s.up, op, x, NULL, N, C, I);
    swiglu_forward_to(s.h, a->lp_kind, s.gate, s.up, (size_t)N * I);
    x = a->lp_kind ? NULL : s.h;
    if ((rc = zt_linear_forward_rows(u, a, P_DOWN, proj, s.h, x, NULL, N, I, C, "mlp.down_proj", err))) return rc;
    residual_forward(a->out, s.res2, proj, (size_t)Nl * C);
    return ZT_OK;
}

static int block_backward(const zt_unit *u, const zt_unit_args *a, zt_error *err) {
    const zt_llama_config *c = u->model_cfg;
    widths w = widths_of(u);
    int B = a->batch->B, T = a->batch->T, C = w.C, N = B * T, hs = w.hs, Q = w.Q, KV = w.KV, I = w.I;
    size_t NC = (size_t)N * C;
    float *const *p = a->params, *const *g = a->grads;
    int rc = check_lp_weights(u, a, err);
    if (rc) return rc;
    block_saved s;
    block_layout(u, B, T, a->lp_kind, a, &s, NULL);
    float *bufC = a->scratch, *wide1 = bufC + NC, *wide2 = wide1 + (size_t)N * wide_floats(u);
    float *attn_scratch = wide2 + (size_t)N * wide_floats(u);
    float inv_freq[hs / 2];
    inv_freq_of(c, inv_freq);
    /* din doubles as d res2: the residual passes dout through, both RMSNorms add into it */
    float *dres = a->din;
    /* cut along T: din, dout and the RMSNorms are this part's Nl rows, their weight gradients go to
     * ng (input_layernorm, post_attention_layernorm) and are summed over the parts at the end */
    bool seq = zt_unit_seq(u);
    int Nl = zt_unit_rows(u, a, NULL);
    float *ng = attn_scratch + block_att_floats(u, B, T);
    const float *dout, *dres_all = dres; /* dout: every position's (in bufC when cut along T) */
    if ((rc = zt_block_backward_begin(u, a, ng, 2 * (size_t)C, bufC, C, &dout, "mlp.down_proj output gradient",
                                      err)))
        return rc;
    const void *xn2 = s.xn2, *xn1 = s.xn1; /* cut along T: every part's rows of the operands, re-gathered */
    float *slot_all = ng + 2 * (size_t)C;
    if (moe(c)) { /* the sparse MLP (llama_moe.c) on every token; the router's fp32 input in wide1|wide2;
                   * cut along T the operand re-gathered, and dout (bufC) read before d xn2 goes there */
        if (seq && (rc = zt_seq_linear_operand(u, a, s.xn2, slot_all, C, "block_sparse_moe input "
                                               "(post_attention_layernorm), again", err)))
            return rc;
        if (seq) xn2 = slot_all;
        const float *x32 = router_input(a, xn2, wide1, NC);
        if ((rc = zt_moe_backward(u, a, &MOE_PARAMS, s.moe, xn2, x32, dout, bufC, moe_scratch(u, a), err)))
            return rc;
        goto mlp_done;
    }
    /* MLP: out = res2 + h·Wdᵀ, h = silu(gate)·up */
    zt_linear_backward(u, a, P_DOWN, wide1, g[P_DOWN], NULL, dout, s.h, N, I, C, false);
    if (seq && (rc = zt_seq_linear_operand(u, a, s.xn2, slot_all, C, "gate/up input (post_attention_layernorm), "
                                           "again", err)))
        return rc;
    if (seq) xn2 = slot_all;
    if (zt_linear_takes_rounded(u, a, P_GATE) && zt_linear_takes_rounded(u, a, P_UP)) {
        /* dgate and dup rounded as SwiGLU makes them: dgate into the staging, dup into wide2 */
        swiglu_backward_to(a->staging, wide2, a->lp_kind, wide1, s.gate, s.up, (size_t)N * I);
        zt_linear_backward_rounded(u, a, P_GATE, bufC, g[P_GATE], a->staging, xn2, N, C, I, false);
        zt_linear_backward_rounded(u, a, P_UP, bufC, g[P_UP], wide2, xn2, N, C, I, true);
    } else {
        swiglu_backward(wide1, wide2, wide1, s.gate, s.up, (size_t)N * I);
        zt_linear_backward(u, a, P_GATE, bufC, g[P_GATE], NULL, wide1, xn2, N, C, I, false);
        zt_linear_backward(u, a, P_UP, bufC, g[P_UP], NULL, wide2, xn2, N, C, I, true);
    }
    if ((rc = zt_unit_input_grad_sum(u, a, bufC, C, "mlp gate/up input gradient", err))) return rc;
mlp_done:
    rmsnorm_backward(dres, seq ? ng + C : g[P_NORM2], bufC, s.res2, p[P_NORM2], s.rstd2, Nl, C);
    /* attention: res2 = x + atty·Woᵀ; cut along T, every position's d res2 spans wide1|wide2 */
    if (seq && (rc = zt_unit_seq_gather(u, a, dres, wide1, C, "self_attn.o_proj output gradient", err))) return rc;
    if (seq) dres_all = wide1;
    zt_linear_backward(u, a, P_O, bufC, g[P_O], NULL, dres_all, s.atty, N, Q, C, false);
    float *dq = wide1, *dk = dq + (size_t)N * Q, *dv = dk + (size_t)N * KV; /* fit in wide1|wide2 */
    const float *O = a->lp_kind ? s.atto : (float *)s.atty;
    if (flash(c) && zt_unit_cp(u)) {
        if ((rc = zt_cp_attention_backward(u, a, dq, dk, dv, attn_scratch, bufC, s.q, s.k, s.v, O, s.lse, w.NH, w.NKV,
                                           hs, Q, KV, err)))
            return rc;
    } else if (flash(c)) {
        zt_trace_begin("attention", "whole backward");
        flash_attention_gqa_backward(dq, dk, dv, attn_scratch, bufC, s.q, s.k, s.v, O, s.lse, B, T, w.NH, w.NKV, hs, Q,
                                     KV, a->attn_bf16, a->batch->positions);
        zt_trace_end();
    }
    else
        attention_gqa_backward(dq, dk, dv, attn_scratch, bufC, s.q, s.k, s.v, s.att, B, T, w.NH, w.NKV, hs, Q, KV);
    rope_backward_qk(dq, dk, inv_freq, B, T, w.NH, w.NKV, hs, a->batch->positions);
    if (seq && (rc = zt_seq_linear_operand(u, a, s.xn1, slot_all, C, "q/k/v input (input_layernorm), again", err)))
        return rc;
    if (seq) xn1 = slot_all;
    float *dbias[3]; /* q, k, v's bias gradients (qkv_bias), or NULL */
    qkv_biases(c, g, dbias);
    zt_linear_backward(u, a, P_Q, bufC, g[P_Q], dbias[0], dq, xn1, N, C, Q, false);
    zt_linear_backward(u, a, P_K, bufC, g[P_K], dbias[1], dk, xn1, N, C, KV, true);
    zt_linear_backward(u, a, P_V, bufC, g[P_V], dbias[2], dv, xn1, N, C, KV, true);
    if ((rc = zt_unit_input_grad_sum(u, a, bufC, C, "self_attn q/k/v input gradient", err))) return rc;
    rmsnorm_backward(dres, seq ? ng : g[P_NORM1], bufC, a->in, p[P_NORM1], s.rstd1, Nl, C);
    float *const norms[] = {g[P_NORM1], g[P_NORM2]};
    return zt_unit_norm_grads(u, a, ng, norms, 2, C, "the RMSNorms' weight gradients", err);
}

/* rnd(dout) of the widest Linear output: gate/up's (N,I), or o/down's (N,C); with experts their
 * products' (zt_moe_staging_bytes) when wider */
static size_t block_staging_bytes(const zt_unit *u, int B, int T, int lp_kind) {
    widths w = widths_of(u);
    size_t dense = matmul_lp_staging_bytes((zt_lp_kind)lp_kind, B * T, w.I > w.C ? w.I : w.C);
    size_t experts = moe(u->model_cfg) ? zt_moe_staging_bytes(u, (size_t)B * T, lp_kind) : 0;
    return experts > dense ? experts : dense;
}

/* the seven Linear weights go through zt_linear_forward/_backward, which take params_lp, and so
 * do their LoRA adapters; with experts the four attention ones, the experts' w1, w2, w3 (grouped
 * products, llama_moe.c) and the shared expert's three: not the router nor the shared expert's
 * sigmoid gate, which stay fp32 */
static bool block_reads_lp(const zt_unit *u, int k) {
    if (zt_unit_is_adapter(u, k)) return true;
    if (!moe(u->model_cfg)) return k <= P_DOWN;
    bool shared = zt_moe_shared_width(u->model_cfg) > 0; /* else q/k/v's biases may follow the experts */
    return k <= P_O || k == P_W1 || k == P_W2 || k == P_W3 || (shared && (k == P_SH_GATE || k == P_SH_UP ||
                                                                         k == P_SH_DOWN));
}

/* the seven Linears may carry LoRA adapters (with experts: the four attention ones) */
static bool block_adaptable(const zt_unit *u, int k) { return k <= (moe(u->model_cfg) ? P_O : P_DOWN); }
/* the gradients its products assign: the Linear weights', and one process's experts' (their grouped
 * products; under expert parallelism they go through the source slots, llama_moe_ep.c, and add) */
static bool block_assigns(const zt_unit *u, int k) {
    return block_adaptable(u, k) || (moe(u->model_cfg) && u->ep_parts <= 1 && (k == P_W1 || k == P_W2 || k == P_W3));
}

/* Selective checkpointing: rebuilds h, and under naive attention att, exactly as block_forward
 * wrote them (the same kernels on the same kept q, k, gate, up; attention without its output
 * skips P·V; under lp compute h is written rounded into its slot, as block_forward wrote it). */
static int block_recompute(const zt_unit *u, const zt_unit_args *a, zt_error *err) {
    widths w = widths_of(u);
    int B = a->batch->B, T = a->batch->T, N = B * T, I = w.I;
    block_saved s;
    block_layout(u, B, T, a->lp_kind, a, &s, NULL);
    if (!flash(u->model_cfg))
        attention_gqa_forward(NULL, s.att, s.q, s.k, s.v, B, T, w.NH, w.NKV, w.hs, w.Q, w.KV, a->batch->positions);
    swiglu_forward_to(s.h, a->lp_kind, s.gate, s.up, (size_t)N * I);
    return ZT_OK;
}

/* expert parallelism with gradient accumulation: the experts' per-source slots added at the step */
static void block_fold_grads(const zt_unit *u, const zt_unit_group *g, float *const *grads, float *const *slots) {
    if (moe(u->model_cfg) && u->ep_parts > 1) zt_moe_ep_fold(u, g, &MOE_PARAMS, grads, slots);
}

static const zt_unit_ops BLOCK_OPS = {.saved_floats = block_saved_floats,
                                      .scratch_floats = block_scratch_floats,
                                      .forward = block_forward,
                                      .backward = block_backward,
                                      .reads_lp = block_reads_lp,
                                      .adaptable = block_adaptable,
                                      .assigns_grad = block_assigns, /* their weight products */
                                      .staging_bytes = block_staging_bytes,
                                      .kept_floats = block_kept_floats,
                                      .recompute = block_recompute,
                                      .fold_grads = block_fold_grads};

/* ---------------------------------------------------------------------------------------------
 * head unit: params norm.weight, lm_head.weight (or embed_tokens, tied). out = per-token losses.
 * saved: xn (N,C) (lm_head's input: rounded under lp compute) | rstd (N) | probs (N,V) (none when
 * the loss is chunked: layers.h) */
typedef struct head_saved {
    void *xn;
    float *rstd, *probs;
} head_saved;

static size_t head_layout(const zt_unit *u, int B, int T, int lp_kind, float *saved, head_saved *s) {
    const zt_llama_config *c = u->model_cfg;
    size_t Nl = zt_unit_rows_max(u, B, T); /* cut along T: the norm's rows of this part (layers.h) */
    size_t xn = matmul_saved_input_floats(lp_kind, Nl * c->n_embd), stat = zt_fp32_floats(Nl);
    *s = !saved ? (head_saved){0} : (head_saved){.xn = saved, .rstd = saved + xn,
                                                      .probs = zt_head_chunked(u) ? NULL : saved + xn + stat};
    return xn + stat + zt_head_saved_logits_floats(u, B, T, c->vocab_size);
}

static size_t head_saved_floats(const zt_unit *u, int B, int T, int lp_kind) {
    head_saved s;
    return head_layout(u, B, T, lp_kind, NULL, &s);
}

static const int HEAD_LINEARS[] = {1};

/* backward: dxn (N,C); forward: xn in fp32 under lp compute (N,C), then the cut loss's rows;
 * then, cut along T: lm_head's whole operand (N,C) | the norm's output rows of this part (forward)
 * | its weight gradient (backward, C) */
static size_t head_seq_at(const zt_unit *u, int B, int T) {
    const zt_llama_config *c = u->model_cfg;
    return (size_t)B * T * c->n_embd + zt_head_loss_scratch_floats(u, B, T, c->vocab_size);
}

static size_t head_scratch_floats(const zt_unit *u, int B, int T) {
    const zt_llama_config *c = u->model_cfg;
    size_t seq = zt_unit_seq(u) ? ((size_t)B * T + zt_unit_rows_max(u, B, T) + 1) * (size_t)c->n_embd : 0;
    return head_seq_at(u, B, T) + seq;
}

static int head_forward(const zt_unit *u, const zt_unit_args *a, zt_error *err) {
    const zt_llama_config *c = u->model_cfg;
    int B = a->batch->B, T = a->batch->T, C = c->n_embd, V = c->vocab_size, N = B * T;
    int rc = zt_check_lp_weights(u, a, HEAD_LINEARS, 1, err);
    if (rc) return rc;
    head_saved s;
    head_layout(u, B, T, a->lp_kind, a->saved, &s);
    float *logits = s.probs, *x;
    void *op = s.xn;
    if (!zt_unit_seq(u)) { /* whole: the norm writes lm_head's operand (rounded under lp compute) */
        rmsnorm_forward_to(s.xn, a->lp_kind, s.rstd, a->in, a->params[0], c->rms_norm_eps, N, C);
        x = a->lp_kind ? NULL : s.xn;
    } else { /* cut along T: the norm's rows and lm_head's whole operand after the loss's rows (head_seq_at) */
        float *slot_all = a->scratch + head_seq_at(u, B, T);
        float *xl = zt_norm_output(u, a, s.xn, slot_all + (size_t)N * C, a->scratch);
        rmsnorm_forward(xl, s.rstd, a->in, a->params[0], c->rms_norm_eps, zt_unit_rows(u, a, NULL), C);
        if ((rc = zt_norm_into_linear(u, a, xl, s.xn, a->scratch, slot_all, C, &x, &op, "lm_head input (norm)", err)))
            return rc;
    }
    /* this part's vocabulary; logits: NULL when the loss is chunked (head_layout) */
    return zt_head_loss_forward(u, a, 1, op, x, logits, C, V, (size_t)N * C, err);
}

static int head_backward(const zt_unit *u, const zt_unit_args *a, zt_error *err) {
    const zt_llama_config *c = u->model_cfg;
    int B = a->batch->B, T = a->batch->T, C = c->n_embd, V = c->vocab_size;
    head_saved s;
    head_layout(u, B, T, a->lp_kind, a->saved, &s);
    float *dxn = a->scratch;
    bool seq = zt_unit_seq(u); /* cut along T: lm_head's operand re-gathered; the norm's gradient of this
                                  part's rows, then summed */
    float *slot_all = a->scratch + head_seq_at(u, B, T), *ng = slot_all + (size_t)B * T * C;
    int rc = seq ? zt_seq_linear_operand(u, a, s.xn, slot_all, C, "lm_head input (norm), again", err) : ZT_OK;
    if (!rc)
        rc = zt_head_loss_backward(u, a, 1, s.probs, seq ? slot_all : s.xn, dxn, C, V, (size_t)B * T * C, err);
    if (rc) return rc;
    if (seq) memset(ng, 0, (size_t)C * sizeof *ng);
    rmsnorm_backward(a->din, seq ? ng : a->grads[0], dxn, a->in, a->params[0], s.rstd, zt_unit_rows(u, a, NULL), C);
    float *const norms[] = {a->grads[0]};
    return zt_unit_norm_grads(u, a, ng, norms, 1, C, "norm weight gradient", err);
}

static bool head_reads_lp(const zt_unit *u, int k) { return k == 1; }

/* rnd(dlogits) (N,V) (this part's vocabulary when cut; a chunk's rows when chunked) */
static size_t head_staging_bytes(const zt_unit *u, int B, int T, int lp_kind) {
    const zt_llama_config *c = u->model_cfg;
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

/* matmul parameters of one block a token goes through: q, o (C,C), k, v (KV,C), gate, up, down
 * (I,C); with experts the router (E,C) and its k experts' (3·I·C each: the active parameters), and
 * the shared expert's (3·Is·C, its gate C) */
static double block_matmul_params(const zt_llama_config *c) {
    double C = c->n_embd, KV = (double)kv_width(c), I = c->intermediate_size;
    double shared = 3.0 * zt_moe_shared_width(c) * C + (zt_moe_shared_width(c) && c->shared_expert_gate ? C : 0);
    if (moe(c))
        return 2.0 * C * C + 2.0 * KV * C + c->n_experts * C + c->n_experts_per_token * 3.0 * zt_moe_width(c) * C +
               shared;
    return 2.0 * C * C + 2.0 * KV * C + 3.0 * I * C;
}

/* 6 FLOPs per matmul parameter per token (the blocks' Linears and lm_head, or the tied
 * embed_tokens it reads; the embedding lookup and the norms do not count) plus the attention
 * scores and weighted sums, 12·L·C·T as GPT-2's (NH·hs = C query channels). */
static double llama_flops_per_token(const zt_model *m, int T) {
    const zt_llama_config *c = m->cfg;
    double head = (double)c->vocab_size * c->n_embd;
    return 6.0 * (c->n_layer * block_matmul_params(c) + head) + 12.0 * c->n_layer * c->n_embd * (double)T;
}

/* full re-runs every block's forward (2 FLOPs per matmul parameter, attention 4·T·C); selective
 * under naive attention re-runs the scores Q·Kᵀ (2·T·C); flash attention's backward recomputes
 * them (2·T·C) in every mode, as gpt2.c counts */
static double llama_recompute_flops_per_token(const zt_model *m, int T, zt_recompute mode) {
    const zt_llama_config *c = m->cfg;
    double C = c->n_embd, L = c->n_layer, scores = L * 2.0 * C * T;
    double fl = flash(c) ? scores : 0, head = m->loss_chunk_tokens > 0 ? 2.0 * C * c->vocab_size : 0;
    if (mode == ZT_RECOMPUTE_FULL) return L * (2.0 * block_matmul_params(c) + 4.0 * C * T) + fl + head;
    if (mode == ZT_RECOMPUTE_SELECTIVE) return (flash(c) ? fl : scores) + head;
    return fl + head;
}

static int check_config(const zt_llama_config *c, zt_error *err) {
    if (c->n_layer < 1 || c->n_head < 1 || c->n_embd < 1 || c->vocab_size < 2 || c->max_seq_len < 1 ||
        c->n_kv_head < 1 || c->intermediate_size < 1)
        return zt_error_set(err, ZT_ERR_USAGE, "llama: invalid shape L=%d NH=%d NKV=%d C=%d I=%d V=%d maxT=%d",
                            c->n_layer, c->n_head, c->n_kv_head, c->n_embd, c->intermediate_size,
                            c->vocab_size, c->max_seq_len);
    if (c->n_embd % c->n_head != 0 || (c->n_embd / c->n_head) % 2 != 0)
        return zt_error_set(err, ZT_ERR_USAGE, "llama: n_embd %d must be n_head %d times an even head size "
                            "(rotary embedding rotates pairs)", c->n_embd, c->n_head);
    if (c->n_head % c->n_kv_head != 0)
        return zt_error_set(err, ZT_ERR_USAGE, "llama: n_kv_head %d does not divide n_head %d", c->n_kv_head,
                            c->n_head);
    if (c->attention != ZT_ATTENTION_FLASH && c->attention != ZT_ATTENTION_NAIVE)
        return zt_error_set(err, ZT_ERR_USAGE, "llama: attention kernel %d is neither flash (0) nor naive (1)",
                            (int)c->attention);
    if (!(c->rope_theta > 1.0f) || !(c->rms_norm_eps > 0.0f))
        return zt_error_set(err, ZT_ERR_USAGE, "llama: rope_theta %g must be > 1 and rms_norm_eps %g > 0",
                            (double)c->rope_theta, (double)c->rms_norm_eps);
    if (c->n_experts != 0 && (c->n_experts < 2 || c->n_experts_per_token < 1 ||
                              c->n_experts_per_token > c->n_experts))
        return zt_error_set(err, ZT_ERR_USAGE, "llama: mixture of experts with n_experts %d and n_experts_per_token %d:"
                            " need 2 <= n_experts and 1 <= n_experts_per_token <= n_experts", c->n_experts,
                            c->n_experts_per_token);
    if (c->n_experts && (c->moe_intermediate_size < 0 || zt_moe_width(c) < 1 ||
                         !(c->router_aux_loss_coef >= 0.0f) || !(c->router_z_loss_coef >= 0.0f) ||
                         !(c->capacity_factor >= 0.0f)))
        return zt_error_set(err, ZT_ERR_USAGE, "llama: mixture of experts with moe_intermediate_size %d (expert width "
                            "%d), router_aux_loss_coef %g, router_z_loss_coef %g, capacity_factor "
                            "%g: need an expert width >= 1, coefficients >= 0 and a "
                            "capacity factor > 0 (0: dropless)", c->moe_intermediate_size, zt_moe_width(c),
                            (double)c->router_aux_loss_coef, (double)c->router_z_loss_coef,
                            (double)c->capacity_factor);
    if (c->n_experts && (c->n_shared_experts < 0 || c->shared_expert_intermediate_size < 0 ||
                         (c->shared_expert_gate && zt_moe_shared_width(c) < 1) ||
                         (c->n_shared_experts > 0 && c->shared_expert_intermediate_size > 0 &&
                          c->shared_expert_intermediate_size != c->n_shared_experts * zt_moe_width(c))))
        return zt_error_set(err, ZT_ERR_USAGE, "llama: shared experts with n_shared_experts %d, "
                            "shared_expert_intermediate_size %d, shared_expert_gate %s (expert width %d): need "
                            "counts >= 0, a gate only with a shared expert, and, both given, a width of "
                            "n_shared_experts x the expert width", c->n_shared_experts,
                            c->shared_expert_intermediate_size, c->shared_expert_gate ? "true" : "false",
                            zt_moe_width(c));
    const zt_rope_scaling *r = &c->rope_scaling;
    if (r->factor != 0.0f && (!(r->factor > 0.0f) || !(r->low_freq_factor > 0.0f) ||
                              !(r->high_freq_factor > r->low_freq_factor) ||
                              r->original_max_position_embeddings < 1))
        return zt_error_set(err, ZT_ERR_USAGE, "llama: rope_scaling factor %g low_freq_factor %g high_freq_factor "
                            "%g original_max_position_embeddings %d: need factor > 0, 0 < low < high, orig >= 1",
                            (double)r->factor, (double)r->low_freq_factor, (double)r->high_freq_factor,
                            r->original_max_position_embeddings);
    return ZT_OK;
}

/* Tensor parallelism cuts whole query heads, whole key/value heads and the MLP's columns evenly. */
static int llama_tp_check(const zt_model *m, int parts, zt_error *err) {
    const zt_llama_config *c = m->cfg;
    /* a mixture's experts are cut by columns of each expert (llama_moe.c), its dense MLP is none; its
     * shared expert by columns as the dense MLP (llama_moe_shared.c) */
    int width = moe(c) ? zt_moe_width(c) : c->intermediate_size, shared = zt_moe_shared_width(c);
    const char *width_key = moe(c) ? "the experts' width (moe_intermediate_size)" : "intermediate_size";
    const char *what = c->n_head % parts ? "n_head" : c->n_kv_head % parts ? "n_kv_head"
                     : width % parts ? width_key : shared % parts ? "the shared expert's width "
                     "(shared_expert_intermediate_size)" : NULL;
    int v = c->n_head % parts ? c->n_head : c->n_kv_head % parts ? c->n_kv_head : width % parts ? width : shared;
    if (what)
        return zt_error_set(err, ZT_ERR_USAGE, "llama: tensor parallelism over %d ranks: %d does not divide %s %d",
                            parts, parts, what, v);
    return ZT_OK;
}

static int add(zt_model *m, const char *name, int64_t d0, int64_t d1, int *idx, zt_error *err) {
    int64_t shape[2] = {d0, d1};
    /* transformers' _init_weights: N(0, 0.02²) for Linears and the embedding, ones for the norms,
     * zeros for the biases (1-D, named .bias; not decayed, as the norms) */
    size_t n = strlen(name);
    zt_init_kind init = d1 ? ZT_INIT_NORMAL : n > 5 && !strcmp(name + n - 5, ".bias") ? ZT_INIT_ZEROS : ZT_INIT_ONES;
    return zt_model_add_param(m, name, d1 ? 2 : 1, shape, init, d1 ? 0.02f : 0.0f, d1 != 0, idx, err);
}

int zt_llama_create(const zt_llama_config *cfg, zt_model **out, zt_error *err) {
    *out = NULL;
    int rc = check_config(cfg, err);
    if (rc) return rc;
    zt_model *m;
    if ((rc = zt_model_create("llama", &m, err))) return rc;
    zt_llama_config *own = malloc(sizeof *own);
    if (!own) {
        zt_model_free(m);
        return zt_error_set(err, ZT_ERR_NOMEM, "llama: out of memory");
    }
    *own = *cfg;
    m->cfg = own;
    m->vocab_size = cfg->vocab_size;
    m->max_seq_len = cfg->max_seq_len;
    m->train_flops_per_token = llama_flops_per_token;
    m->recompute_flops_per_token = llama_recompute_flops_per_token;
    m->tp_check = llama_tp_check;
    m->moe_experts = moe(cfg) ? cfg->n_experts : 0;

    int64_t C = cfg->n_embd, V = cfg->vocab_size, KV = (int64_t)kv_width(cfg), I = cfg->intermediate_size;
    int emb, norm, lm_head;
    if ((rc = add(m, "embed_tokens.weight", V, C, &emb, err)) ||
        (rc = zt_model_add_unit(m, "embedding", &EMBEDDING_OPS, -1, &emb, 1, (int)C, err)))
        goto fail;
    for (int l = 0; l < cfg->n_layer; l++) {
        static const char *suffix[P_BLOCK_COUNT] = {
            "self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
            "self_attn.o_proj.weight", "mlp.gate_proj.weight",    "mlp.up_proj.weight",
            "mlp.down_proj.weight",    "input_layernorm.weight",  "post_attention_layernorm.weight"};
        /* experts (llama_moe.h): the router and each weight of the experts stacked by expert */
        static const char *moe_suffix[P_MOE_SHARED_COUNT] = {
            "self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
            "self_attn.o_proj.weight", "block_sparse_moe.gate.weight", "block_sparse_moe.experts.w1.weight",
            "block_sparse_moe.experts.w2.weight", "input_layernorm.weight", "post_attention_layernorm.weight",
            "block_sparse_moe.experts.w3.weight", "block_sparse_moe.shared_expert.gate_proj.weight",
            "block_sparse_moe.shared_expert.up_proj.weight", "block_sparse_moe.shared_expert.down_proj.weight",
            "block_sparse_moe.shared_expert_gate.weight"};
        int64_t E = cfg->n_experts, IE = moe(cfg) ? zt_moe_width(cfg) : 0, IS = zt_moe_shared_width(cfg);
        const int64_t shape[P_MOE_SHARED_COUNT][2] = {{C, C}, {KV, C}, {KV, C}, {C, C}, {I, C},
                                                      {I, C}, {C, I},  {C, 0},  {C, 0}, {0, 0}};
        const int64_t moe_shape[P_MOE_SHARED_COUNT][2] = {
            {C, C}, {KV, C}, {KV, C}, {C, C}, {E, C}, {E * IE, C}, {E * C, IE}, {C, 0}, {C, 0}, {E * IE, C},
            {IS, C}, {IS, C}, {C, IS}, {1, C}};
        int idx[P_MOE_SHARED_COUNT + 3], n = block_base_params(cfg);
        for (int i = 0; i < n; i++) {
            char name[ZT_NAME_MAX];
            snprintf(name, sizeof name, "layers.%d.%s", l, moe(cfg) ? moe_suffix[i] : suffix[i]);
            const int64_t *sh = moe(cfg) ? moe_shape[i] : shape[i];
            if ((rc = add(m, name, sh[0], sh[1], &idx[i], err))) goto fail;
            /* the stacked experts: E blocks along dim 0, each its own run of norm chunks, so an
             * expert's partial sums are the same on whichever rank holds it (shard/plan.h) */
            if (moe(cfg) && (i == P_W1 || i == P_W2 || i == P_W3)) m->params[idx[i]].norm_blocks = (int)E;
        }
        static const char *bias_suffix[3] = {"self_attn.q_proj.bias", "self_attn.k_proj.bias", "self_attn.v_proj.bias"};
        for (int i = 0; i < 3 && cfg->qkv_bias; i++, n++) { /* q/k/v biases (Qwen2's): after the rest */
            char name[ZT_NAME_MAX];
            snprintf(name, sizeof name, "layers.%d.%s", l, bias_suffix[i]);
            if ((rc = add(m, name, i ? KV : C, 0, &idx[n], err))) goto fail;
        }
        char uname[32];
        snprintf(uname, sizeof uname, "layers.%d", l);
        if ((rc = zt_model_add_unit(m, uname, &BLOCK_OPS, l, idx, n, (int)C, err))) goto fail;
    }
    if ((rc = add(m, "norm.weight", C, 0, &norm, err))) goto fail;
    lm_head = emb;
    if (!cfg->tie_embeddings && (rc = add(m, "lm_head.weight", V, C, &lm_head, err))) goto fail;
    int head[2] = {norm, lm_head};
    if ((rc = zt_model_add_unit(m, "head", &HEAD_OPS, -1, head, 2, 1, err))) goto fail;
    *out = m;
    return ZT_OK;
fail:
    zt_model_free(m);
    return rc;
}
