/* cmd_export.c - `zerotrain export CKPT|W.ztw|HF_DIR (-o model.safetensors | --hf DIR | --peft DIR |
 * --gguf FILE | --gguf-lora FILE) [--dtype fp32|bf16] [--type f32|f16|bf16|q8_0|q4_0|q4_k|q5_k|q6_k] [--shard-size 5GB]
 * [--tokenizer FILE]... [--base-model NAME] [--init-peft DIR]`: consolidates a sharded checkpoint
 * (any world size and strategy), a weights file (`train --save`) or a Hugging Face directory (to
 * reshard it) into one safetensors file or a Hugging Face model directory (src/ckpt/hf.c), with
 * transformers' names and layouts, or one GGUF file for llama.cpp (src/ckpt/gguf.c, with the
 * tokenizer and chat template given by --tokenizer); a model with LoRA adapters is written with the
 * adapters merged into their weights, or (--peft) as the adapters alone in PEFT's layout
 * (src/ckpt/peft.c), or (--gguf-lora) alone as llama.cpp's LoRA adapter file (src/ckpt/gguf.c); --init-peft puts a PEFT adapter directory on the source first
 * (src/ckpt/peft_load.c), to merge it into a Hugging Face base. A QLoRA checkpoint (lora.base_quant)
 * does not hold its quantized base: --init-hf names the directory it was trained from, quantized
 * again and checked against the checkpoint's record; its adapters go out with --peft (merging them
 * into a quantized base is refused). */
#include "ckpt/checkpoint.h"
#include "ckpt/gguf.h"
#include "ckpt/hf.h"
#include "ckpt/peft.h"
#include "ckpt/safetensors.h"
#include "ckpt/weights.h"
#include "cli/commands.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#define EXPORT_USAGE                                                                                  \
    "usage: zerotrain export CKPT|W.ztw|HF_DIR (-o model.safetensors | --hf DIR | --peft DIR | --gguf FILE\n" \
    "                        | --gguf-lora FILE)\n"                                                      \
    "                        [--dtype fp32|bf16] [--type f32|f16|bf16|q8_0|q4_0|q4_k|q5_k|q6_k]\n"              \
    "                        [--shard-size SIZE]\n"  \
    "                        [--tokenizer FILE]... [--base-model NAME] [--init-peft DIR]\n"              \
    "                        [--init-hf BASE_DIR]\n"              \
    "  CKPT            a checkpoint directory (its newest valid commit) or DIR/step-N\n"              \
    "  W.ztw           a weights file (train --save)\n"                                               \
    "  HF_DIR          a Hugging Face model directory (to reshard it or change its dtype)\n"          \
    "  -o FILE         one safetensors file with Hugging Face's tensor names\n"                      \
    "  --hf DIR        a Hugging Face model directory: config.json, model.safetensors or shards\n"    \
    "                  with model.safetensors.index.json, generation_config.json\n"                   \
    "  --shard-size S  --hf: at most S tensor bytes per shard (5GB, 500MB, 64MiB; default 5GB)\n"     \
    "  --tokenizer F   --hf: copy F (tokenizer.json, tokenizer_config.json, ...) into DIR (repeat)\n"   \
    "  --peft DIR      a model with LoRA adapters: the adapters alone as PEFT writes them\n"             \
    "                  (adapter_model.safetensors, adapter_config.json); -o and --hf merge them into\n" \
    "                  their weights instead\n"                                                          \
    "  --base-model N  --peft: adapter_config.json's base_model_name_or_path (default null)\n"          \
    "  --gguf FILE     one GGUF file for llama.cpp (GPT-2, Llama): llama.cpp's tensor names and\n"      \
    "                  metadata; --tokenizer tokenizer.json (and tokenizer_config.json or a .jinja\n"  \
    "                  chat template) embeds the tokenizer and chat template (docs/gguf.md)\n"         \
    "  --gguf-lora F   a model with LoRA adapters: the adapters alone as llama.cpp's LoRA adapter file\n" \
    "                  (general.type adapter; its --lora with the base's --gguf file; --type f32,\n"   \
    "                  f16 or bf16)\n"                                                                \
    "  --type T        --gguf: the matrices' type: f32 (default), f16, bf16, q8_0, q4_0 (blocks of\n"\
    "                  32: every row length must be a multiple of 32), q4_k, q5_k (the LM head in\n"   \
    "                  q6_k), q6_k (llama.cpp's k-quants: row lengths a multiple of 256); norms and\n" \
    "                  biases stay f32\n"                                                             \
    "  --init-peft D   put PEFT's adapters from D (adapter_config.json, adapter_model.safetensors) on\n" \
    "                  the source model first: -o/--hf/--gguf then write the base with them merged\n" \
    "  --init-hf DIR   a QLoRA checkpoint (lora.base_quant): the base it was trained from (the\n"        \
    "                  checkpoint records the quantized base's hash, not its values); with --peft\n"

int zt_cmd_export(int argc, char **argv) {
    zt_error err = {0};
    const char *src = NULL, *out = NULL, *hf = NULL, *peft = NULL, *base = NULL, *dtype = "fp32", *shard = "5GB",
               *init_peft = NULL, *init_hf = NULL;
    const char *gguf = NULL, *gguf_lora = NULL, *type = NULL;
    const char *copy[16];
    int n_copy = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            printf(EXPORT_USAGE);
            return 0;
        }
        const char **slot = !strcmp(a, "-o") ? &out : !strcmp(a, "--hf") ? &hf : !strcmp(a, "--dtype") ? &dtype
                          : !strcmp(a, "--peft") ? &peft : !strcmp(a, "--base-model") ? &base
                          : !strcmp(a, "--gguf") ? &gguf : !strcmp(a, "--type") ? &type
                          : !strcmp(a, "--gguf-lora") ? &gguf_lora
                          : !strcmp(a, "--init-peft") ? &init_peft : !strcmp(a, "--init-hf") ? &init_hf
                          : !strcmp(a, "--shard-size") ? &shard : !strcmp(a, "--tokenizer") && n_copy < 16 ? &copy[n_copy]
                          : NULL;
        if (slot && v) {
            *slot = v;
            n_copy += slot == &copy[n_copy];
            i++;
        } else if (a[0] == '-' || src) {
            zt_error_set(&err, ZT_ERR_USAGE, "export: unexpected argument %s%s", a, slot ? " (needs a value)" : "");
            return zt_cli_fail(&err);
        } else {
            src = a;
        }
    }
    uint64_t shard_bytes = 0;
    if (!src || (out != NULL) + (hf != NULL) + (peft != NULL) + (gguf != NULL) + (gguf_lora != NULL) != 1 ||
        (strcmp(dtype, "fp32") && strcmp(dtype, "bf16")) || (n_copy && !hf && !gguf) || (base && !peft) ||
        (type && !gguf && !gguf_lora)) {
        zt_error_set(&err, ZT_ERR_USAGE, "export: " EXPORT_USAGE);
        return zt_cli_fail(&err);
    }
    zt_gguf_export_options go = {.type = ZT_GGUF_F32, .tokenizer = copy, .n_tokenizer = n_copy,
                                 .adapter = gguf_lora != NULL};
    if (type && !zt_gguf_type_parse(type, &go.type)) {
        zt_error_set(&err, ZT_ERR_USAGE, "export --gguf %s: --type %s is not a GGUF type zerotrain writes (f32, f16, "
                     "bf16, q8_0, q4_0, q4_k, q5_k, q6_k)", gguf ? gguf : gguf_lora, type);
        return zt_cli_fail(&err);
    }
    if (gguf_lora && go.type != ZT_GGUF_F32 && go.type != ZT_GGUF_F16 && go.type != ZT_GGUF_BF16) {
        zt_error_set(&err, ZT_ERR_USAGE, "export --gguf-lora %s: --type %s: the adapters are written in f32, f16 or bf16",
                     gguf_lora, type);
        return zt_cli_fail(&err);
    }
    const char *adapters_out = peft ? peft : gguf_lora; /* the adapters alone: a QLoRA checkpoint can */
    if (zt_hf_parse_size(shard, &shard_bytes, &err)) return zt_cli_fail(&err);
    struct stat st;
    bool ztw = stat(src, &st) == 0 && S_ISREG(st.st_mode);
    char probe[4200];
    snprintf(probe, sizeof probe, "%s/config.json", src);
    bool from_hf = !ztw && stat(probe, &st) == 0;
    char commit[4096];
    zt_model_spec spec;
    zt_model *m = NULL;
    zt_engine *e = NULL;
    zt_ckpt_meta meta = {0};
    zt_engine_options o;
    zt_engine_options_default(&o);
    o.optim.kind = ZT_OPT_SGD; /* parameters only: no optimizer state to load */
    o.optim.momentum = 0;
    int rc, shards = 1;
    if (from_hf) rc = zt_hf_create_model(src, &m, &err);
    else if (ztw) rc = zt_weights_read_config(src, &spec, &err);
    else if (!(rc = zt_ckpt_resolve(src, commit, sizeof commit, &err))) rc = zt_ckpt_read_model(commit, &spec, &err);
    zt_lora_config lora;
    if (!rc && !m && spec.lora.base_quant && (!init_hf || !adapters_out))
        rc = zt_error_set(&err, ZT_ERR_USAGE, "export: %s was trained on a %s base (lora.base_quant), which checkpoints do "
                          "not hold: %s", src, zt_quant_name((zt_quant)spec.lora.base_quant),
                          !init_hf ? "give --init-hf DIR, the base it was trained from, with --peft or --gguf-lora"
                                   : "its adapters go out with --peft or --gguf-lora (merging them into a quantized base is "
                                     "not supported)");
    if (!rc && init_hf && (from_hf || ztw || !spec.lora.base_quant))
        rc = zt_error_set(&err, ZT_ERR_USAGE, "export: --init-hf is for a checkpoint of a quantized base (lora.base_quant)");
    if (rc || (!m && (rc = zt_model_spec_create(&spec, &m, &err))) ||
        (init_peft && ((rc = zt_peft_read_config(init_peft, &lora, &err)) ||
                       ((rc = zt_model_add_lora(m, &lora, NULL, &err)) &&
                        zt_error_prefix(&err, "%s/adapter_config.json on %s", init_peft, src)))) ||
        (rc = zt_engine_create(m, &o, &e, &err)) || (init_hf && (rc = zt_hf_load_dir(e, init_hf, &err))) ||
        (rc = from_hf ? zt_hf_load_dir(e, src, &err)
              : ztw   ? zt_weights_load(e, src, &err)
                      : zt_ckpt_load(e, commit, &meta, &err)) ||
        (init_peft && (rc = zt_peft_load_dir(e, init_peft, &err))))
        goto done;
    bool bf16 = !strcmp(dtype, "bf16");
    zt_hf_export_options ho = {.bf16 = bf16, .shard_bytes = shard_bytes, .copy = copy, .n_copy = n_copy};
    int merged = 0, adapters = 0, n_tensors = 0;
    if (peft) {
        if ((rc = zt_peft_export_dir(e, peft, base, bf16, &adapters, &err))) goto done;
    } else if (gguf_lora) {
        if ((rc = zt_gguf_export(e, gguf_lora, &go, &n_tensors, &err))) goto done;
    } else if ((rc = zt_lora_merge(e, &merged, &err)) || /* a LoRA model: its adapters merged */
               (rc = hf     ? zt_hf_export_dir(e, hf, &ho, &shards, &err)
                     : gguf ? zt_gguf_export(e, gguf, &go, &n_tensors, &err)
                            : zt_safetensors_export(e, out, bf16, &err))) {
        goto done;
    }
    const char *dst = peft ? peft : hf ? hf : gguf ? gguf : gguf_lora ? gguf_lora : out;
    if (gguf || gguf_lora) dtype = zt_gguf_type_name(go.type);
    if (ztw || from_hf) printf("exported %s (%lld parameters, %s) to %s", src, (long long)zt_model_numel(m), dtype, dst);
    else printf("exported %s (step %lld, %lld parameters, %s) to %s", commit, (long long)meta.step,
                (long long)zt_model_numel(m), dtype, dst);
    if (hf) printf(" (%d shard%s)", shards, shards == 1 ? "" : "s");
    if (gguf) printf(" (GGUF, %d tensors)", n_tensors);
    if (gguf_lora)
        printf(": %d LoRA adapters (rank %d, alpha %g) as a GGUF LoRA adapter file (%d tensors)", n_tensors / 2,
               m->lora->rank, (double)m->lora->alpha, n_tensors);
    if (merged) printf(" with %d LoRA adapters merged into their weights", merged);
    if (peft)
        printf(": %d LoRA adapters (rank %d, alpha %g) as PEFT's adapter_model.safetensors + adapter_config.json",
               adapters, m->lora->rank, (double)m->lora->alpha);
    printf("\n");
done:
    zt_engine_free(e);
    zt_model_free(m);
    return rc ? zt_cli_fail(&err) : 0;
}
