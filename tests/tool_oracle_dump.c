/* tool_oracle_dump.c - for the PyTorch oracle test (torch_oracle.sh): builds a GPT-2, writes its
 * initial parameters, one batch, zerotrain's loss and every parameter's gradient to a file that
 * torch_oracle.py reads.
 *   tool_oracle_dump OUT [L C NH V maxT B T]
 * Format (little-endian): "ZTORACLE" | u32 1 | i32 maxT V L NH C B T | i32 inputs[B*T] |
 * i32 targets[B*T] | f32 loss | u32 n_params | per parameter: u16 name_len, name, u32 ndim,
 * i64 shape[ndim], f32 param[numel], f32 grad[numel]. */
#include "zerotrain/zerotrain.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    if (argc != 2 && argc != 9) {
        fprintf(stderr, "usage: %s OUT [L C NH V maxT B T]\n", argv[0]);
        return 2;
    }
    zt_gpt2_config c = {.n_layer = 2, .n_embd = 64, .n_head = 4, .vocab_size = 50257, .max_seq_len = 64};
    int B = 2, T = 32;
    if (argc == 9) {
        c.n_layer = atoi(argv[2]), c.n_embd = atoi(argv[3]), c.n_head = atoi(argv[4]);
        c.vocab_size = atoi(argv[5]), c.max_seq_len = atoi(argv[6]), B = atoi(argv[7]), T = atoi(argv[8]);
    }
    zt_error err = {0};
    zt_model *m;
    zt_engine *e;
    zt_engine_options o = {.B = B, .T = T, .seed = 2024};
    zt_optimizer_config_default(&o.optim);
    if (zt_gpt2_create(&c, &m, &err) || zt_engine_create(m, &o, &e, &err) || zt_engine_init_params(e, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return err.code;
    }
    int n = B * T;
    int32_t *tok = malloc((size_t)(n + 1) * sizeof *tok);
    uint64_t s = 777;
    for (int i = 0; i <= n; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        tok[i] = (int32_t)((s >> 33) % (uint64_t)c.vocab_size);
    }
    zt_batch b = {.B = B, .T = T, .inputs = tok, .targets = tok + 1, .dloss = 1.0f / (float)n,
                  .logits_pos = -1};
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
    uint32_t version = 1, np = (uint32_t)m->n_params;
    int32_t hdr[7] = {c.max_seq_len, c.vocab_size, c.n_layer, c.n_head, c.n_embd, B, T};
    fwrite("ZTORACLE", 1, 8, f);
    fwrite(&version, 4, 1, f);
    fwrite(hdr, 4, 7, f);
    fwrite(tok, 4, (size_t)n, f);
    fwrite(tok + 1, 4, (size_t)n, f);
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
    zt_engine_free(e);
    zt_model_free(m);
    return 0;
}
