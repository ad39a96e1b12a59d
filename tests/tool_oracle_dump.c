/* tool_oracle_dump.c - for the PyTorch oracle test (torch_oracle.sh): builds a GPT-2 or a Llama,
 * writes its initial parameters, one batch, zerotrain's loss and every parameter's gradient to a
 * file that torch_oracle.py reads.
 *   tool_oracle_dump OUT [L C NH V maxT B T] [--packed]
 *   tool_oracle_dump OUT llama L C NH NKV I V maxT B T THETA FACTOR LOW HIGH ORIG TIE [--packed]
 *   tool_oracle_dump OUT moe L C NH NKV I V maxT B T THETA FACTOR LOW HIGH ORIG TIE E K IE NORM AUX Z CAP [IS GATE]
 *     (a Llama mixture of experts: E experts, top-K, width IE, norm_topk_prob NORM, the router
 *     losses' coefficients AUX and Z, capacity factor CAP; its router weights x 8; with IS GATE a
 *     shared expert of width IS, with Qwen2-MoE's sigmoid gate when GATE is 1, its weights x 8)
 * --qkv-bias: a Llama with q/k/v biases (Qwen2's attention), set to values in [-0.1, 0.1].
 * --packed: every row packs documents (zt_batch.positions), of lengths cycling over 1 9 4 13 2 7 ..
 * from the row's index.
 * Format (little-endian): "ZTORACLE" | u32 version (1 GPT-2, 2 Llama; | 0x100 packed) | i32 maxT V
 * L NH C B T | version 2, 3: i32 NKV I | f32 theta rms_eps factor low high | i32 orig tie | version 3
 * (mixture of experts): i32 E K IE NORM | f32 AUX Z CAP | version 4 (shared expert): i32 IS GATE | i32
 * inputs[B*T] | i32 targets[B*T] | packed: i32 positions[B*T] | f32 loss | u32 n_params | per
 * parameter: u16 name_len, name, u32 ndim, i64 shape[ndim], f32 param[numel], f32 grad[numel]. */
#include "zerotrain/zerotrain.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    bool packed = false, qkv_bias = false; /* trailing flags, in any order */
    for (; argc > 2 && !strncmp(argv[argc - 1], "--", 2); argc--) {
        if (!strcmp(argv[argc - 1], "--packed")) packed = true;
        else if (!strcmp(argv[argc - 1], "--qkv-bias")) qkv_bias = true;
        else break;
    }
    bool shared = argc == 27 && !strcmp(argv[2], "moe");
    bool moe = (argc == 25 || shared) && !strcmp(argv[2], "moe");
    bool llama = (argc == 18 && !strcmp(argv[2], "llama")) || moe;
    if (argc != 2 && argc != 9 && !llama) {
        fprintf(stderr, "usage: %s OUT [L C NH V maxT B T]\n"
                "       %s OUT llama L C NH NKV I V maxT B T THETA FACTOR LOW HIGH ORIG TIE\n", argv[0], argv[0]);
        return 2;
    }
    zt_gpt2_config c = {.n_layer = 2, .n_embd = 64, .n_head = 4, .vocab_size = 50257, .max_seq_len = 64};
    zt_llama_config lc = {0};
    int B = 2, T = 32;
    if (argc == 9) {
        c.n_layer = atoi(argv[2]), c.n_embd = atoi(argv[3]), c.n_head = atoi(argv[4]);
        c.vocab_size = atoi(argv[5]), c.max_seq_len = atoi(argv[6]), B = atoi(argv[7]), T = atoi(argv[8]);
    }
    if (llama) {
        char **a = argv + 3;
        lc = (zt_llama_config){.n_layer = atoi(a[0]), .n_embd = atoi(a[1]), .n_head = atoi(a[2]),
                               .n_kv_head = atoi(a[3]), .intermediate_size = atoi(a[4]),
                               .vocab_size = atoi(a[5]), .max_seq_len = atoi(a[6]), .rope_theta = strtof(a[9], NULL),
                               .rms_norm_eps = 1e-5f,
                               .rope_scaling = {strtof(a[10], NULL), strtof(a[11], NULL), strtof(a[12], NULL),
                                                atoi(a[13])},
                               .tie_embeddings = atoi(a[14]) != 0};
        B = atoi(a[7]), T = atoi(a[8]);
        if (moe) {
            lc.n_experts = atoi(a[15]), lc.n_experts_per_token = atoi(a[16]), lc.moe_intermediate_size = atoi(a[17]);
            lc.norm_topk_prob = atoi(a[18]) != 0, lc.router_aux_loss_coef = strtof(a[19], NULL);
            lc.router_z_loss_coef = strtof(a[20], NULL), lc.capacity_factor = strtof(a[21], NULL);
        }
        if (shared) lc.shared_expert_intermediate_size = atoi(a[22]), lc.shared_expert_gate = atoi(a[23]) != 0;
        lc.qkv_bias = qkv_bias;
        c = (zt_gpt2_config){.n_layer = lc.n_layer, .n_embd = lc.n_embd, .n_head = lc.n_head,
                             .vocab_size = lc.vocab_size, .max_seq_len = lc.max_seq_len};
    }
    zt_error err = {0};
    zt_model *m;
    zt_engine *e;
    zt_engine_options o = {.B = B, .T = T, .seed = 2024};
    zt_optimizer_config_default(&o.optim);
    if ((llama ? zt_llama_create(&lc, &m, &err) : zt_gpt2_create(&c, &m, &err)) ||
        zt_engine_create(m, &o, &e, &err) || zt_engine_init_params(e, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return err.code;
    }
    /* a router with larger logits than the initialization's (std 0.02 x 8): probabilities far
     * from uniform, so that the routing weights, the losses and their gradients vary by token */
    for (int i = 0; moe && i < m->n_params; i++)
        if (strstr(m->params[i].name, "block_sparse_moe.gate") || strstr(m->params[i].name, "shared_expert"))
            for (int64_t j = 0; j < m->params[i].numel; j++) zt_engine_param(e, i)[j] *= 8.0f;
    /* q/k/v biases (zeros at init) set to N(0, 0.1²)-sized values, so that they move the scores */
    uint64_t bs = 4242;
    for (int i = 0; i < m->n_params; i++)
        if (strstr(m->params[i].name, "_proj.bias"))
            for (int64_t j = 0; j < m->params[i].numel; j++) {
                bs = bs * 6364136223846793005ULL + 1442695040888963407ULL;
                zt_engine_param(e, i)[j] = 0.2f * ((float)((bs >> 40) & 0xffff) / 65535.0f - 0.5f);
            }
    int n = B * T;
    int32_t *tok = malloc((size_t)(n + 1) * sizeof *tok);
    uint64_t s = 777;
    for (int i = 0; i <= n; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        tok[i] = (int32_t)((s >> 33) % (uint64_t)c.vocab_size);
    }
    int32_t *pos = malloc((size_t)n * sizeof *pos);
    static const int lens[6] = {1, 9, 4, 13, 2, 7};
    for (int r = 0; r < B; r++)
        for (int t = 0, k = r % 6; t < T; k++)
            for (int i = 0; i < lens[k % 6] && t < T; i++) pos[r * T + t++] = i;
    zt_batch b = {.B = B, .T = T, .inputs = tok, .targets = tok + 1, .positions = packed ? pos : NULL,
                  .dloss = 1.0f / (float)n, .logits_pos = -1};
    float loss;
    if (zt_engine_forward_backward(e, &b, &loss, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return err.code;
    }
    FILE *f = fopen(argv[1], "wb");
    if (!f) {
        perror(argv[1]);
        return 8;
    }
    uint32_t version = (shared ? 4 : moe ? 3 : llama ? 2 : 1) | (packed ? 0x100 : 0), np = (uint32_t)m->n_params;
    int32_t hdr[7] = {c.max_seq_len, c.vocab_size, c.n_layer, c.n_head, c.n_embd, B, T};
    fwrite("ZTORACLE", 1, 8, f);
    fwrite(&version, 4, 1, f);
    fwrite(hdr, 4, 7, f);
    if (llama) {
        int32_t ints[2] = {lc.n_kv_head, lc.intermediate_size}, tail[2] = {
            lc.rope_scaling.original_max_position_embeddings, lc.tie_embeddings};
        float fl[5] = {lc.rope_theta, lc.rms_norm_eps, lc.rope_scaling.factor, lc.rope_scaling.low_freq_factor,
                       lc.rope_scaling.high_freq_factor};
        fwrite(ints, 4, 2, f);
        fwrite(fl, 4, 5, f);
        fwrite(tail, 4, 2, f);
        if (moe) {
            int32_t mi[4] = {lc.n_experts, lc.n_experts_per_token, lc.moe_intermediate_size, lc.norm_topk_prob};
            float mf[3] = {lc.router_aux_loss_coef, lc.router_z_loss_coef, lc.capacity_factor};
            fwrite(mi, 4, 4, f);
            fwrite(mf, 4, 3, f);
        }
        if (shared) {
            int32_t si[2] = {lc.shared_expert_intermediate_size, lc.shared_expert_gate};
            fwrite(si, 4, 2, f);
        }
    }
    fwrite(tok, 4, (size_t)n, f);
    fwrite(tok + 1, 4, (size_t)n, f);
    if (packed) fwrite(pos, 4, (size_t)n, f);
    fwrite(&loss, 4, 1, f);
    fwrite(&np, 4, 1, f);
    for (int i = 0; i < m->n_params; i++) {
        const zt_param_desc *p = &m->params[i];
        uint16_t nl = (uint16_t)strlen(p->name);
        uint32_t nd = (uint32_t)p->ndim;
        fwrite(&nl, 2, 1, f);
        fwrite(p->name, 1, nl, f);
        fwrite(&nd, 4, 1, f);
        fwrite(p->shape, 8, nd, f);
        fwrite(zt_engine_param(e, i), 4, (size_t)p->numel, f);
        fwrite(zt_engine_grad(e, i), 4, (size_t)p->numel, f);
    }
    if (fclose(f) != 0) {
        perror(argv[1]);
        return 8;
    }
    printf("zerotrain loss %.7f, %d tensors written to %s\n", loss, m->n_params, argv[1]);
    free(tok);
    free(pos);
    zt_engine_free(e);
    zt_model_free(m);
    return 0;
}
