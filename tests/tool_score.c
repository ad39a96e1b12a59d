/* tool_score.c - the mean loss of a GPT-2 on the first B windows of T tokens of a token file, for
 * the safetensors export test (export_safetensors.sh):
 *   tool_score CKPT TOKENS.bin B T [WEIGHTS.safetensors]
 * The model shape and parameters come from the checkpoint; with a safetensors file the parameters
 * are then replaced by the file's (the import path). Prints the loss as %.9g. */
#include "ckpt/checkpoint.h"
#include "ckpt/safetensors.h"
#include "data/sampler.h"

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    if (argc != 5 && argc != 6) {
        fprintf(stderr, "usage: %s CKPT TOKENS.bin B T [WEIGHTS.safetensors]\n", argv[0]);
        return 2;
    }
    int B = atoi(argv[3]), T = atoi(argv[4]);
    zt_error err = {0};
    zt_model_spec spec;
    zt_model *m;
    zt_engine *e;
    zt_engine_options o;
    zt_engine_options_default(&o);
    o.B = B;
    o.T = T;
    o.optim.kind = ZT_OPT_SGD;
    o.optim.momentum = 0;
    zt_ckpt_meta meta;
    zt_token_file tf;
    zt_sampler s;
    if (zt_ckpt_read_model(argv[1], &spec, &err) || zt_model_spec_create(&spec, &m, &err) ||
        zt_engine_create(m, &o, &e, &err) || zt_ckpt_load(e, argv[1], &meta, &err) ||
        (argc == 6 && zt_safetensors_load(e, argv[5], &err)) || zt_token_file_open(&tf, argv[2], &err) ||
        zt_sampler_init(&s, &tf, T, 0, false, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return err.code;
    }
    int32_t *in = malloc((size_t)B * T * sizeof *in), *tg = malloc((size_t)B * T * sizeof *tg);
    if (zt_sampler_batch(&s, 0, 1, B, in, tg, NULL, NULL, m->vocab_size, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return err.code;
    }
    zt_batch b = {.B = B, .T = T, .inputs = in, .targets = tg, .logits_pos = -1};
    float loss;
    if (zt_engine_forward(e, &b, &loss, NULL, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return err.code;
    }
    printf("%.9g\n", loss);
    return 0;
}
