/* key_table.c - the rows of the key table (zt_cfg_keys, zt_cfg_sections): one row per configurable
 * field, "section.key", with its type, bounds, default, help text and the rule that ties it to other
 * keys, ordered model.preset first and then by section. keys.c owns what works on a single row
 * (parsing, formatting, describing, did-you-mean); this file holds only data.
 *
 * Invariants: every configurable field has exactly one row; at most ZT_CONFIG_MAX_KEYS rows exist
 * (checked at compile time). */
#include "config/config_internal.h"

#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>

static const enum_value OPTIMIZERS[] = {
    {"adamw", ZT_OPT_ADAMW}, {"sgd", ZT_OPT_SGD}, {"muon", ZT_OPT_MUON}, {"lamb", ZT_OPT_LAMB}, {"onebit_adam", ZT_OPT_ONEBIT_ADAM},
    {NULL, 0}};
static const enum_value QUANTS[] = {{"none", ZT_QUANT_NONE}, {"nf4", ZT_QUANT_NF4}, {"int8", ZT_QUANT_INT8}, {NULL, 0}};
static const enum_value NS_DTYPES[] = {{"fp32", 0}, {"bf16", 1}, {NULL, 0}};
static const enum_value MUON_SCALES[] = {{"reference", 0}, {"rms", 1}, {NULL, 0}}; /* ZT_MUON_SCALE_* */
static const enum_value STRATEGIES[] = {{"ddp", ZT_STRATEGY_DDP},     {"zero1", ZT_STRATEGY_ZERO1},
                                         {"zero2", ZT_STRATEGY_ZERO2}, {"zero3", ZT_STRATEGY_ZERO3},
                                         {"hybrid", ZT_STRATEGY_HYBRID}, {NULL, 0}};
static const enum_value INNER_STRATEGIES[] = {
    {"zero2", ZT_STRATEGY_ZERO2}, {"zero3", ZT_STRATEGY_ZERO3}, {NULL, 0}};
static const enum_value DECAYS[] = {
    {"cosine", ZT_LR_COSINE}, {"linear", ZT_LR_LINEAR}, {"constant", ZT_LR_CONSTANT}, {NULL, 0}};
static const enum_value PRECISIONS[] = {{"fp32", ZT_CFG_PREC_FP32},
                                        {"bf16", ZT_CFG_PREC_BF16},
                                        {"bf16-low", ZT_CFG_PREC_BF16_LOW},
                                        {"fp16", ZT_CFG_PREC_FP16},
                                        {NULL, 0}};
static const enum_value DTYPES[] = {
    {"fp32", ZT_CFG_DTYPE_FP32}, {"bf16", ZT_CFG_DTYPE_BF16}, {"fp16", ZT_CFG_DTYPE_FP16}, {NULL, 0}};
static const enum_value ATTENTION_DTYPES[] = {{"auto", ZT_CFG_ATTN_AUTO}, {"fp32", ZT_CFG_ATTN_FP32}, {NULL, 0}};
static const enum_value OFFLOADS[] = {
    {"none", ZT_CFG_OFFLOAD_NONE}, {"cpu", ZT_CFG_OFFLOAD_CPU}, {"nvme", ZT_CFG_OFFLOAD_NVME}, {NULL, 0}};
static const enum_value RECOMPUTES[] = {{"none", ZT_CFG_RECOMPUTE_NONE},
                                        {"full", ZT_CFG_RECOMPUTE_FULL},
                                        {"selective", ZT_CFG_RECOMPUTE_SELECTIVE},
                                        {NULL, 0}};

static const enum_value SPIKE_POLICIES[] = {
    {"skip", ZT_CFG_SPIKE_SKIP}, {"rollback", ZT_CFG_SPIKE_ROLLBACK}, {NULL, 0}};

static const enum_value PP_SCHEDULES[] = {
    {"1f1b", ZT_CFG_PP_1F1B}, {"gpipe", ZT_CFG_PP_GPIPE}, {NULL, 0}};

static const enum_value CP_MODES[] = {
    {"allgather", ZT_CP_ALLGATHER}, {"ring", ZT_CP_RING}, {"ulysses", ZT_CP_ULYSSES}, {NULL, 0}}; /* zt_cp_mode */

static const enum_value SAVE_ERRORS[] = {
    {"exit", ZT_CFG_SAVE_ERROR_EXIT}, {"continue", ZT_CFG_SAVE_ERROR_CONTINUE}, {NULL, 0}};

static const enum_value DATA_FORMATS[] = {
    {"auto", 0}, {"tokens", 1}, {"jsonl", 2}, {"text", 3}, {NULL, 0}}; /* zt_data_format */
static const enum_value RECORDS[] = {
    {"auto", 0}, {"text", 1}, {"prompt_completion", 2}, {"messages", 3}, {NULL, 0}}; /* zt_record_shape */
static const enum_value TEXT_UNITS[] = {{"line", 0}, {"paragraph", 1}, {"document", 2}, {NULL, 0}};
static const enum_value LOSS_ON[] = {{"auto", 0}, {"all", 1}, {NULL, 0}};
static const enum_value TOO_LONG[] = {{"truncate", 0}, {"drop", 1}, {NULL, 0}};

static const enum_value ARCHS[] = {{"gpt2", ZT_ARCH_GPT2}, {"llama", ZT_ARCH_LLAMA}, {NULL, 0}};
static const enum_value ATTENTIONS[] = {{"flash", ZT_ATTENTION_FLASH}, {"naive", ZT_ATTENTION_NAIVE}, {NULL, 0}};

#define FIELD(f) offsetof(zt_train_config, f), sizeof(((zt_train_config *)0)->f)
#define K_INT(k, f, lo, hi, d, h, r) {k, KT_INT, FIELD(f), lo, hi, 0, 0, 0, NULL, d, h, r}
#define K_I64(k, f, lo, hi, d, h, r) {k, KT_INT64, FIELD(f), lo, hi, 0, 0, 0, NULL, d, h, r}
#define K_U64(k, f, d, h) {k, KT_U64, FIELD(f), 0, 0, 0, 0, 0, NULL, d, h, NULL}
#define K_FLT(k, f, lo, hi, fl, d, h, r) {k, KT_FLOAT, FIELD(f), 0, 0, lo, hi, fl, NULL, d, h, r}
#define K_BOOL(k, f, d, h) {k, KT_BOOL, FIELD(f), 0, 0, 0, 0, 0, NULL, d, h, NULL}
#define K_STR(k, f, fl, d, h) {k, KT_STR, FIELD(f), 0, 0, 0, 0, fl, NULL, d, h, NULL}
#define K_ENUM(k, f, e, d, h) {k, KT_ENUM, FIELD(f), 0, 0, 0, 0, 0, e, d, h, NULL}

/* Order: model.preset first (defaults apply it before anything else), then by section. */
const key_def zt_cfg_keys[] = {
    {"model.preset", KT_PRESET, FIELD(model_preset), 0, 0, 0, 0, F_REQUIRED, NULL, "tiny",
     "model to start from (sets model.arch and every model.* key): GPT-2 tiny, gpt2-124M (alias "
     "gpt2), gpt2-350M, gpt2-774M, gpt2-1558M; Llama llama-tiny, llama-124M, llama-7b, llama-13b, llama-70b, "
     "llama3-8b, llama3-70b, mistral-7b, qwen2-0.5b (q/k/v biases); mixtures of experts mixtral-8x7b, llama-124M-moe, llama-tiny-moe, qwen1.5-moe-a2.7b (docs/models.md)", NULL},
    K_ENUM("model.arch", model_arch, ARCHS, NULL,
           "architecture: gpt2 or llama (docs/models.md); from model.preset unless set"),
    K_INT("model.n_layer", model.n_layer, 1, 1024, NULL, "transformer blocks (L)", NULL),
    K_INT("model.n_head", model.n_head, 1, 1024, NULL, "attention heads (NH)",
          "divides model.n_embd"),
    K_INT("model.n_embd", model.n_embd, 1, 65536, NULL, "channels (C)", NULL),
    K_INT("model.vocab_size", model.vocab_size, 1, 16777216, NULL,
          "vocabulary (V); every token id in the data must be below it", NULL),
    K_INT("model.max_seq_len", model.max_seq_len, 1, 1048576, NULL,
          "longest sequence (GPT-2: rows of wpe); bounds training.seq_len", NULL),
    K_INT("model.n_kv_head", model.n_kv_head, 1, 1024, NULL,
          "llama: key/value heads of grouped-query attention (NKV); n_head: none", "divides model.n_head"),
    K_INT("model.intermediate_size", model.intermediate_size, 1, 1048576, NULL,
          "llama: width of the SwiGLU MLP (gate/up/down)", NULL),
    K_FLT("model.rope_theta", model.rope_theta, 1.0, 1e9, F_OPEN_LO, NULL,
          "llama: rotary embedding base (10000 Llama 2, 500000 Llama 3)", NULL),
    K_FLT("model.rms_norm_eps", model.rms_norm_eps, 0.0, 1.0, F_OPEN_LO, NULL,
          "llama: epsilon of the RMSNorms", NULL),
    K_FLT("model.rope_scaling.factor", model.rope_scaling.factor, 0.0, 1024.0, 0, NULL,
          "llama: Llama 3's rope scaling (transformers' rope_type llama3) factor; 0: none", NULL),
    K_FLT("model.rope_scaling.low_freq_factor", model.rope_scaling.low_freq_factor, 0.0, 1024.0, 0, NULL,
          "llama: rope scaling low_freq_factor (1 for Llama 3.1)", NULL),
    K_FLT("model.rope_scaling.high_freq_factor", model.rope_scaling.high_freq_factor, 0.0, 1024.0, 0,
          NULL, "llama: rope scaling high_freq_factor (4 for Llama 3.1)", "> low_freq_factor"),
    K_INT("model.rope_scaling.original_max_position_embeddings",
          model.rope_scaling.original_max_position_embeddings, 0, 16777216, NULL,
          "llama: rope scaling's original context (8192 for Llama 3.1)", NULL),
    K_BOOL("model.tie_embeddings", model.tie_embeddings, NULL,
           "the LM head reads the token embedding (GPT-2 always; llama: no lm_head.weight)"),
    K_BOOL("model.attention_qkv_bias", model.qkv_bias, NULL,
           "llama: q, k and v Linears with biases, o without (Qwen2's attention; HF qwen2 always, qwen2_moe's "
           "qkv_bias): layers.L.self_attn.{q,k,v}_proj.bias"),
    K_INT("model.n_experts", model.n_experts, 0, 4096, NULL, "llama: experts of every block's sparse MLP (Mixtral's "
          "mixture of experts; HF num_local_experts); 0: dense (docs/models.md)", ">= 2 when set"),
    K_INT("model.n_experts_per_token", model.n_experts_per_token, 0, 4096, NULL,
          "llama: experts each token goes through (top-k; HF num_experts_per_tok)", "1 .. model.n_experts"),
    K_INT("model.moe_intermediate_size", model.moe_intermediate_size, 0, 1048576, NULL,
          "llama: each expert's SwiGLU width; 0: model.intermediate_size (Mixtral's)", NULL),
    K_INT("model.n_shared_experts", model.n_shared_experts, 0, 64, NULL, "llama: DeepSeek-MoE's shared experts: one "
          "SwiGLU MLP every token goes through, this x the expert width, added to the routed output; 0: none", NULL),
    K_INT("model.shared_expert_intermediate_size", model.shared_expert_intermediate_size, 0, 1048576, NULL, "llama: "
          "the shared expert's width (Qwen2-MoE's); 0: model.n_shared_experts x the expert width", "that, both set"),
    K_BOOL("model.shared_expert_gate", model.shared_expert_gate, NULL, "llama: the shared expert's output x "
           "sigmoid(x . g) per token, g a Linear (1, C) (Qwen2-MoE's; DeepSeek-MoE has none); needs a shared expert"),
    K_BOOL("model.norm_topk_prob", model.norm_topk_prob, NULL,
           "llama: the top-k routing weights renormalized to sum 1 (Mixtral: true; Qwen2-MoE: false)"),
    K_FLT("model.router_aux_loss_coef", model.router_aux_loss_coef, 0.0, 1e6, 0, NULL, "llama: each MoE block's "
          "load-balancing loss coefficient: n_experts x sum_e f_e P_e (f_e: share of tokens choosing e, P_e: mean router probability)", NULL),
    K_FLT("model.router_z_loss_coef", model.router_z_loss_coef, 0.0, 1e6, 0, NULL,
          "llama: coefficient of every MoE block's router z-loss, mean logsumexp(logits)^2 (ST-MoE)", NULL),
    K_FLT("model.capacity_factor", model.capacity_factor, 0.0, 1e6, 0, NULL, "llama: an expert takes at most ceil("
          "tokens x top-k / n_experts x this) of a micro-batch's tokens, the rest dropped, counted (moe_dropped); 0: dropless", NULL),
    K_ENUM("model.attention", model.attention, ATTENTIONS, "flash",
           "attention kernel: flash (fused, tiled, online softmax: activation memory O(T), the "
           "probabilities recomputed in backward) or naive (saves the (B, n_head, T, T) probabilities: "
           "O(T^2)); same gradients to fp32 rounding (docs/models.md)"),
    K_STR("model.init_hf", init_hf, 0, "",
          "Hugging Face model directory to start from (config.json + safetensors; `train "
          "--init-hf`); its config.json sets the model.* shape; empty: seeded initialization"),
    K_STR("data.train", train_path, F_REQUIRED, NULL,
          "training data: a token file (llm.c .bin format, `zerotrain tokenize`), or records: JSONL or "
          "text files and globs, comma-separated (data.weights: one source each; docs/data.md); required to train"),
    K_STR("data.val", val_path, 0, "", "validation data (as data.train, one source); empty: no validation "
          "unless data.val_fraction"),
    K_ENUM("data.format", data_format, DATA_FORMATS, "auto",
           "what data.train holds: tokens (llm.c token file), jsonl or text records; auto: jsonl for .jsonl/.json, "
           "text for .txt/.text/.md, records for a glob or a list, tokens otherwise"),
    K_ENUM("data.record", data_record, RECORDS, "auto",
           "a JSONL record's shape: text, prompt_completion, messages (transformers/TRL's); auto: by the fields "
           "present"),
    K_STR("data.text_field", text_field, 0, "text", "the field of a text record"),
    K_STR("data.prompt_field", prompt_field, 0, "prompt", "the prompt field of a prompt/completion record"),
    K_STR("data.completion_field", completion_field, 0, "completion",
          "the completion field of a prompt/completion record"),
    K_STR("data.messages_field", messages_field, 0, "messages",
          "the field of a conversation: a list of {role, content}"),
    K_ENUM("data.text_unit", text_unit, TEXT_UNITS, "line",
           "a plain-text file's records: each line (as the datasets library's text loader), paragraph "
           "(blank-line separated) or document (the whole file)"),
    K_STR("data.tokenizer", tokenizer_path, 0, "",
          "tokenizer.json of the records (byte-level or SentencePiece-style BPE); empty: GPT-2's BPE"),
    K_STR("data.chat_template", chat_template, 0, "",
          "chat template of conversations: a tokenizer_config.json (its chat_template) or a .jinja file; empty: "
          "the tokenizer_config.json beside data.tokenizer"),
    K_ENUM("data.loss_on", loss_on, LOSS_ON, "auto",
           "tokens the loss counts: auto (the assistant turns of a conversation, the completion of a "
           "prompt/completion, all of a text) or all"),
    K_BOOL("data.pack", pack, "true",
           "records packed whole into full sequences (no attention across records, positions restart), else "
           "one record per sequence, padded"),
    K_ENUM("data.too_long", too_long, TOO_LONG, "truncate",
           "a record longer than training.seq_len + 1 tokens: truncated to its start or dropped (counted, said)"),
    K_FLT("data.val_fraction", val_fraction, 0.0, 0.5, 0, "0",
          "records held out for validation (by a hash of the seed and the record's place); needs records, "
          "not with data.val", NULL),
    K_STR("data.weights", weights, 0, "",
          "a mixture: one weight per comma-separated data.train entry (each entry a source, Megatron's "
          "blended datasets); empty: the entries are one source"),
    K_STR("data.cache_dir", cache_dir, 0, "",
          "where tokenized records are cached; empty: .zerotrain-cache beside each source's first file"),
    K_STR("data.skip_samples", skip_samples, 0, "",
          "global samples never trained on, START:COUNT[,START:COUNT...] (e.g. the batches around a loss "
          "spike, as PaLM skipped them); a resumed run also skips what its checkpoint records; empty: none"),
    K_INT("training.micro_batch_size", micro_batch, 0, 65536, "4",
          "sequences per micro-batch per rank (B); 0: derived at launch from global_batch_size", NULL),
    K_INT("training.seq_len", seq_len, 1, 1048576, "64", "tokens per sequence (T)",
          "<= model.max_seq_len"),
    K_INT("training.gradient_accumulation_steps", grad_accum, 0, 1048576, "1",
          "micro-batches per rank per optimizer step; 0: derived at launch from global_batch_size", NULL),
    K_INT("training.global_batch_size", global_batch, 0, INT_MAX, "0",
          "sequences per optimizer step over all ranks; 0: micro_batch_size x "
          "gradient_accumulation_steps x world size; else checked against it at launch",
          NULL),
    K_I64("training.steps", steps, 1, INT64_MAX, "100", "optimizer steps; the schedule's total", NULL),
    K_U64("training.seed", seed, "1337", "initialization and data-order seed"),
    K_STR("training.freeze", freeze, 0, "",
          "parameters not trained: a PCRE2 regular expression matched against each whole "
          "parameter name, e.g. 'embed_tokens\\..*|layers\\.0\\..*' (docs/models.md); empty: none"),
    K_FLT("training.lr", lr.max_lr, 0.0, HUGE_VAL, F_OPEN_LO, "3e-4",
          "peak learning rate, reached after warmup", NULL),
    K_FLT("training.min_lr", lr.min_lr, 0.0, HUGE_VAL, 0, NULL,
          "learning rate at the last step; default (derived): training.lr / 10", "<= training.lr"),
    K_I64("training.warmup_steps", lr.warmup_steps, 0, INT64_MAX, "0",
          "linear warmup from lr / warmup_steps to lr", "<= training.steps"),
    K_ENUM("training.decay", lr.decay, DECAYS, "cosine", "decay from lr to min_lr after warmup"),
    K_FLT("training.grad_clip", optim.grad_clip, 0.0, HUGE_VAL, 0, "1.0",
          "global-norm clipping threshold; 0: no clipping", NULL),
    K_ENUM("optimizer.type", optim.kind, OPTIMIZERS, "adamw", "optimizer (docs/optimizer.md)"),
    K_FLT("optimizer.beta1", optim.beta1, 0.0, 1.0, F_OPEN_HI, "0.9", "AdamW first-moment decay",
          NULL),
    K_FLT("optimizer.beta2", optim.beta2, 0.0, 1.0, F_OPEN_HI, "0.95",
          "AdamW second-moment decay", NULL),
    K_FLT("optimizer.eps", optim.eps, 0.0, HUGE_VAL, F_OPEN_LO, "1e-8", "AdamW epsilon", NULL),
    K_FLT("optimizer.weight_decay", optim.weight_decay, 0.0, HUGE_VAL, 0, "0.1",
          "weight decay (decoupled in AdamW, L2 in SGD), on 2-D weights only", NULL),
    K_FLT("optimizer.momentum", optim.momentum, 0.0, 1.0, F_OPEN_HI, "0", "SGD momentum", NULL),
    K_BOOL("optimizer.nesterov", optim.nesterov, "false",
           "SGD Nesterov momentum; needs momentum > 0"),
    /* Muon and LAMB (docs/optimizer.md) */
    K_FLT("optimizer.muon_lr", optim.muon_lr, 0.0, HUGE_VAL, F_OPEN_LO, "0.02",
          "muon: the Muon matrices' peak learning rate (training.lr is AdamW's); the schedule scales both alike",
          NULL),
    K_FLT("optimizer.muon_momentum", optim.muon_momentum, 0.0, 1.0, F_OPEN_HI, "0.95", "muon: momentum", NULL),
    K_BOOL("optimizer.muon_nesterov", optim.muon_nesterov, "true", "muon: Nesterov momentum (the reference's)"),
    K_FLT("optimizer.muon_weight_decay", optim.muon_weight_decay, 0.0, HUGE_VAL, 0, "0",
          "muon: decoupled weight decay of the Muon matrices (W *= 1 - muon lr x this)", NULL),
    K_INT("optimizer.muon_ns_steps", optim.muon_ns_steps, 1, 100, "5", "muon: Newton-Schulz iterations", NULL),
    K_ENUM("optimizer.muon_ns_dtype", optim.muon_ns_bf16, NS_DTYPES, "fp32",
           "muon: Newton-Schulz arithmetic: fp32, or bf16 (every operand and result rounded to bf16, as the "
           "reference's bf16 tensors)"),
    K_ENUM("optimizer.muon_scale", optim.muon_scale, MUON_SCALES, "reference",
           "muon: update scale: reference sqrt(max(1, rows/cols)); rms 0.2 sqrt(max(rows, cols)) "
           "(Moonshot's, AdamW's update RMS)"),
    K_STR("optimizer.muon_params", optim.muon_params, 0, "[a-z]+\\.[0-9]+\\.[a-z_]+\\.[a-z_]+\\.weight",
          "muon: the 2-D weights Muon updates, a PCRE2 regular expression over each whole parameter name (as "
          "training.freeze); the default takes the block matrices of GPT-2 (h.N.attn.c_attn.weight, ...) and Llama (layers.N.mlp.up_proj.weight, ...), not embeddings, heads, norms or biases"),
    K_STR("optimizer.adamw_params", optim.adamw_params, 0, "",
          "muon: the parameters AdamW updates (training.lr, beta1, beta2, eps, weight_decay), a PCRE2 "
          "expression; empty: every trainable parameter muon_params leaves; set: every trainable parameter "
          "must match exactly one of the two"),
    K_FLT("optimizer.lamb_max_coeff", optim.lamb_max_coeff, 0.0, HUGE_VAL, F_OPEN_LO, "10",
          "lamb: upper clamp of the trust ratio (DeepSpeed's max_coeff)", NULL),
    K_FLT("optimizer.lamb_min_coeff", optim.lamb_min_coeff, 0.0, HUGE_VAL, 0, "0.01",
          "lamb: lower clamp of the trust ratio (DeepSpeed's min_coeff)", "<= optimizer.lamb_max_coeff"),
    K_BOOL("optimizer.lamb_bias_correction", optim.lamb_bias_correction, "true",
           "lamb: step size lr sqrt(1-beta2^t)/(1-beta1^t) (DeepSpeed's bias_correction); false: lr"),
    K_I64("optimizer.onebit_freeze_step", optim.onebit_freeze_step, 0, 1e15, "100000",
          "onebit_adam: Adam steps (the gradient all-reduced) before the variance freezes and the momentum is "
          "all-reduced 1-bit compressed (hybrid: the momentum pieces, across the replica groups; DeepSpeed's "
          "freeze_step)", NULL),
    K_BOOL("optimizer.onebit_bias_correction", optim.onebit_bias_correction, "true", "onebit_adam: true: AdamW's "
           "update (the warm-up is AdamW's); false: DeepSpeed's kernel, p -= lr (m/(sqrt(v)+eps) + weight_decay p)"),
    K_INT("lora.rank", lora.rank, 0, 65536, "0",
          "rank r of the LoRA adapters (docs/models.md): every other parameter is frozen and only the "
          "adapters train; 0: no LoRA", NULL),
    K_FLT("lora.alpha", lora.alpha, 0.0, HUGE_VAL, F_OPEN_LO, "8",
          "LoRA's lora_alpha: the adapters' update is scaled by alpha / rank", NULL),
    K_FLT("lora.dropout", lora.dropout, 0.0, 1.0, F_OPEN_HI, "0",
          "dropout on the adapters' input in training (PEFT's lora_dropout)", NULL),
    K_STR("lora.target_modules", lora.target_modules, F_LIST, "",
          "the Linears that get adapters, as PEFT's target_modules: names ([q_proj, v_proj] or "
          "'q_proj,v_proj': a module whose name is or ends with one), a regular expression matched against "
          "whole module names, or all-linear; empty: PEFT's default (q_proj,v_proj for llama, c_attn for gpt2)"),
    K_STR("lora.init_peft", lora_init_peft, 0, "",
          "a PEFT adapter directory (adapter_config.json + adapter_model.safetensors; `train --init-peft`) "
          "whose adapters the run starts from; its r, lora_alpha, lora_dropout and target_modules set the "
          "lora.* keys (lora.rank, lora.alpha or lora.target_modules set to other values are refused; a "
          "lora.dropout set is kept); empty: new adapters"),
    K_ENUM("lora.base_quant", lora.base_quant, QUANTS, "none",
           "QLoRA: the frozen Linears of the blocks (adapted or not) stored quantized and dequantized unit by "
           "unit into the compute dtype: nf4 (QLoRA's 4-bit NormalFloat, blocks of 64, double-quantized "
           "absmaxes; rows must be a multiple of 64), int8 (an absmax per row), none; needs lora.rank > 0; "
           "replicated under ddp/zero1/zero2, sharded on whole blocks under zero3/hybrid (in memory also with "
           "memory.offload_param nvme); not with pipeline stages (docs/models.md)"),
    K_INT("eval.every", eval_every, 0, INT_MAX, "0",
          "validation loss every N steps (and after the last); 0: only after the last; > 0 "
          "needs data.val",
          NULL),
    K_BOOL("eval.at_start", eval_at_start, "false",
           "also evaluate once before the first step (transformers' eval_on_start): the starting model's "
           "validation loss, e.g. a pretrained model's on the data it is about to be fine-tuned on"),
    K_INT("eval.batches", eval_batches, 1, 1048576, "8", "validation micro-batches per evaluation",
          NULL),
    K_FLT("eval.target_loss", eval_target_loss, 0.0, HUGE_VAL, 0, "0",
          "stop once a validation loss is at or below this (MLPerf's time to train): the run ends after "
          "that evaluation as after its last step (checkpoint, weights, exit 0) and logs a target_reached "
          "event with the seconds and tokens it took; 0: never; > 0 needs data.val",
          NULL),
    K_STR("logging.jsonl", log_path, 0, "", "one JSON line of metrics per step; empty: none"),
    K_INT("logging.print_every", print_every, 1, INT_MAX, "1",
          "a progress line every N steps (and the first and last)", NULL),
    K_BOOL("logging.wall_clock_breakdown", wall_clock_breakdown, "false",
           "time per phase (forward, backward, communication, optimizer) in the log"),
    K_BOOL("logging.comms_log", comms_log, "false",
           "per-collective counts, sizes and bandwidth at the end (DeepSpeed's comms_logger)"),
    K_INT("sample.tokens", sample_tokens, 0, 1048576, "0",
          "tokens to sample after training; 0: none", "<= model.max_seq_len"),
    K_INT("parallel.nproc", nproc, 1, 4096, "1",
          "local ranks `zerotrain train` starts through mpirun; --nproc N overrides", NULL),
    K_ENUM("parallel.strategy", strategy, STRATEGIES, "ddp",
           "sharding strategy (docs/strategies.md)"),
    K_INT("parallel.hybrid_shard_size", hybrid_shard_size, 0, 1048576, "0",
          "hybrid: ranks per shard group; 0: ranks per node from the launcher (docs/multihost.md), else the world", "divides the world size"),
    K_INT("parallel.hybrid_replicas", hybrid_replicas, 0, 1048576, "0",
          "hybrid: shard groups (replicas); 0: world / hybrid_shard_size; else checked at launch",
          NULL),
    K_ENUM("parallel.hybrid_inner", hybrid_inner, INNER_STRATEGIES, "zero3",
           "hybrid: the strategy inside a shard group"),
    K_BOOL("parallel.reshard_after_forward", reshard_after_forward, "true",
           "zero3: free gathered parameters after forward (FSDP2's reshard_after_forward)"),
    K_BOOL("parallel.reduce_every_micro_batch", reduce_every_micro_batch, "false",
           "zero2/zero3 with accumulation: reduce-scatter every micro-batch (memory-lean) instead "
           "of deferring to the last one (no_sync)"),
    K_FLT("parallel.bucket_mb", bucket_mb, 0.0, HUGE_VAL, F_OPEN_LO, "25",
          "gradient fusion bucket size in MiB", NULL),
    K_BOOL("parallel.prefetch", prefetch, "true",
           "zero3: all-gather the next unit on the communication thread while the current one "
           "computes (FSDP's forward/backward prefetch)"),
    K_BOOL("parallel.overlap_comm", overlap_comm, "true",
           "zero2/zero3/hybrid: reduce-scatter each unit's gradients on a communication thread "
           "while backward goes on (DeepSpeed's overlap_comm)"),
    K_INT("parallel.tensor_parallel_size", tensor_parallel_size, 1, 1048576, "1",
          "tensor-parallel degree: the heads, the MLP width and the vocabulary split over this many "
          "consecutive ranks (docs/parallelism.md)", "divides model.n_head (and n_kv_head, "
          "intermediate_size) and, with pipeline_parallel_size, the world size"),
    K_BOOL("parallel.sequence_parallel", sequence_parallel, "false",
           "Megatron-LM's sequence parallelism over the tensor-parallel ranks: the norms, bias adds "
           "and residuals run on 1/tp of the positions, their activations 1/tp the size; all-gather "
           "before and reduce-scatter after the parallel Linears in place of the all-reduces "
           "(docs/parallelism.md; needs tensor_parallel_size > 1 dividing training.seq_len)"),
    K_INT("parallel.pipeline_parallel_size", pipeline_parallel_size, 1, 1048576, "1",
          "pipeline-parallel degree: stages of consecutive units (docs/parallelism.md)",
          "<= the model's units (n_layer + 2)"),
    K_ENUM("parallel.pipeline_schedule", pipeline_schedule, PP_SCHEDULES, "1f1b",
           "pipeline parallelism: 1f1b (PipeDream-flush: each stage keeps at most the stages from it to "
           "the last in flight) or gpipe (all forwards, then all backwards; every micro-batch in flight); "
           "training.gradient_accumulation_steps is the pipeline's micro-batches"),
    K_STR("parallel.pipeline_stages", pipeline_stages, 0, "",
          "pipeline parallelism: units per stage, e.g. \"2,3\" (the embedding and the head count as units; "
          "they sum to n_layer + 2); empty: balanced by the memory plan's per-unit bytes"),
    K_INT("parallel.expert_parallel_size", expert_parallel_size, 1, 1048576, "1",
          "expert-parallel degree: a mixture's experts spread over groups of this many consecutive data-parallel "
          "ranks (n_experts / size each), tokens sent to them and back by all-to-all; divides model.n_experts "
          "and the data-parallel ranks (docs/parallelism.md)",
          NULL),
    K_INT("parallel.context_parallel_size", context_parallel_size, 1, ZT_CP_MAX_PARTS, "1",
          "context-parallel degree: every sequence split over this many ranks, each holding 2 of "
          "2 x this many equal chunks (load-balanced for causal attention); attention reaches the "
          "other chunks by parallel.context_parallel_mode; weights sharded and gradients summed over "
          "data x context ranks (docs/parallelism.md)",
          "divides the world size with the other axes; 2 x it divides training.seq_len; needs "
          "model.attention flash"),
    K_ENUM("parallel.context_parallel_mode", context_parallel_mode, CP_MODES, "allgather",
           "context parallelism's attention: allgather (every rank gathers all keys and values of a "
           "layer once: Llama 3's), ring (keys and values passed around the ranks while each block "
           "computes: ring attention), ulysses (all-to-all from the sequence split to a head split and "
           "back: DeepSpeed-Ulysses; the heads and key/value heads divisible by the size)"),
    K_ENUM("precision.mode", precision, PRECISIONS, "fp32",
           "fp32; bf16: bf16 compute with fp32 master weights and moments; bf16-low: bf16 "
           "everywhere; fp16: fp16 compute, fp32 master, dynamic loss scaling"),
    K_ENUM("precision.reduce_dtype", reduce_dtype, DTYPES, "fp32",
           "dtype gradients are reduced in across ranks: fp32, bf16 (modes fp32, bf16, bf16-low) or "
           "fp16 (mode fp16); bf16/fp16 halve the bytes and round each rank's gradient and every "
           "partial sum of the rank tree; micro-batches are accumulated in fp32 either way"),
    K_ENUM("precision.attention_dtype", attention_dtype, ATTENTION_DTYPES, "auto",
           "operands of flash attention's products (fp32 accumulation and softmax either way): auto: "
           "bf16 under bf16 compute (modes bf16, bf16-low; as PyTorch's autocast), fp32 otherwise; fp32: "
           "fp32 in every mode"),
    K_BOOL("precision.stochastic_rounding", stochastic_rounding, "false",
           "bf16-low: round updated parameters to bf16 stochastically (llm.c's rounding) instead of "
           "to nearest"),
    K_FLT("precision.loss_scale", loss_scale, 0.0, HUGE_VAL, 0, "0",
          "fp16: static loss scale; 0: dynamic", NULL),
    K_INT("precision.initial_scale_power", initial_scale_power, 0, 64, "16",
          "fp16: the dynamic scale starts at 2^N", NULL),
    K_INT("precision.loss_scale_window", loss_scale_window, 1, INT_MAX, "1000",
          "fp16: steps without overflow before the scale doubles", NULL),
    K_INT("precision.hysteresis", hysteresis, 1, INT_MAX, "2",
          "fp16: overflows tolerated before the scale halves", NULL),
    K_BOOL("precision.consecutive_hysteresis", consecutive_hysteresis, "false",
           "fp16: refill the hysteresis after a step without overflow"),
    K_FLT("precision.min_loss_scale", min_loss_scale, 0.0, HUGE_VAL, F_OPEN_LO, "1",
          "fp16: the dynamic scale never goes below this", NULL),
    K_ENUM("memory.activation_checkpointing", activation_checkpointing, RECOMPUTES, "none",
           "activations kept between forward and backward: none (all), full (each unit's input; "
           "its forward re-runs before its backward) or selective (GPT-2 blocks recompute the "
           "attention matrix and gelu); same gradients, bit for bit "
           "(docs/activation-checkpointing.md)"),
    K_INT("memory.loss_chunk_tokens", loss_chunk_tokens, 0, INT_MAX, "0",
          "the loss's logits computed for at most this many tokens at a time, and again in "
          "backward, instead of all (B*T, V) of them kept from forward to backward: their memory "
          "for one more LM head product per step (docs/memory.md); 0: all at once", NULL),
    K_ENUM("memory.offload_optimizer", offload_optimizer, OFFLOADS, "none",
           "where the optimizer state (AdamW moments, SGD momentum) lives: nvme streams it "
           "from files under offload_optimizer_nvme_path (docs/offload.md)"),
    K_ENUM("memory.offload_param", offload_param, OFFLOADS, "none",
           "where zero3's parameter shards live between uses"),
    K_STR("memory.offload_optimizer_nvme_path", offload_optimizer_nvme_path, 0, "",
          "directory for offload_optimizer: nvme"),
    K_STR("memory.offload_param_nvme_path", offload_param_nvme_path, 0, "",
          "directory for offload_param: nvme"),
    K_INT("memory.offload_buffer_count", offload_buffer_count, 2, 1024, "4",
          "NVMe offload: staging buffers in memory, each holding one chunk of every offloaded "
          "state; 3 or more overlap reading ahead, updating and writing back",
          NULL),
    K_FLT("memory.offload_buffer_mb", offload_buffer_mb, 0.0, HUGE_VAL, F_OPEN_LO, "64",
          "NVMe offload: MiB per staging buffer (at least 4 KiB per offloaded state)", NULL),
    K_INT("memory.offload_io_threads", offload_io_threads, 1, 64, "2",
          "NVMe offload: threads doing the file reads and writes (the I/O queue depth)", NULL),
    K_INT("memory.offload_param_prefetch", offload_param_prefetch, 0, 1024, "1",
          "parameter offload: units whose pieces are read from the files ahead of the unit being "
          "gathered, in forward and in backward (within offload_param_max_live); 0: none, each "
          "gather reads its own", NULL),
    K_I64("memory.offload_param_max_live", offload_param_max_live, 0, INT64_MAX, "0",
          "parameter offload: at most this many elements of parameter pieces read from the files and "
          "not yet gathered, on each rank (4 KiB alignment included); 0: no bound but the prefetch "
          "depth; less than the largest unit's pieces: an error", NULL),
    K_STR("checkpoint.dir", ckpt_dir, 0, "", "directory for checkpoints; empty: none"),
    K_INT("checkpoint.every", ckpt_every, 0, INT_MAX, "0", "checkpoint every N steps; 0: never",
          NULL),
    K_INT("checkpoint.keep_last", ckpt_keep_last, 0, INT_MAX, "0",
          "checkpoints to keep; 0: all", NULL),
    K_BOOL("checkpoint.save_consolidated", ckpt_consolidated, "false",
           "also write the full (consolidated) weights with each checkpoint"),
    K_BOOL("checkpoint.fallback", ckpt_fallback, "true",
           "resuming from a directory whose newest commit is damaged (checksum, size, missing file): "
           "resume from the newest intact older commit, naming what was skipped and why; false: exit 4 "
           "(docs/reliability.md)"),
    K_ENUM("checkpoint.on_save_error", ckpt_on_save_error, SAVE_ERRORS, "exit",
           "a checkpoint that cannot be written (disk full, I/O error: every rank learns it, nothing is "
           "committed, the partial step-N.tmp is removed, the last commit is untouched): exit ends the run "
           "with exit 8; continue warns and trains on, the next save retries (a final save still exits 8)"),
    K_BOOL("checkpoint.allow_cast", ckpt_allow_cast, "false",
           "resuming a checkpoint whose values are wider than this run keeps them (fp32 master weights "
           "or moments into precision bf16-low): round them to the nearest (said); false: exit 4 naming "
           "the dtypes and tensors (`train --allow-cast` sets it). Widening is always exact and said"),
    K_BOOL("comm.check_collectives", comm_check_collectives, "false",
           "debug: before every collective the ranks compare its fingerprint (sequence, operation, "
           "tag, bytes, step) and stop with exit 9 naming what each was about to do when they differ "
           "(ZT_COMM_CHECK=1 does the same); costs one small all-gather per collective"),
    K_FLT("comm.timeout_s", comm_timeout_s, 0.0, HUGE_VAL, 0, "0",
          "collective deadline: a collective in which no message arrives for this long fails with "
          "exit 5, naming what every rank was doing; 0: auto (ZT_COMM_TIMEOUT if set, else 300 s "
          "until the first step is done, then max(60 s, 10 x the slowest step), and max(300 s, "
          "10 x the slowest save) around checkpoints, evaluation and after the last step)", NULL),
    K_INT("fault.nonfinite_skips", fault_nonfinite_skips, 0, 1000000, "3",
          "a step whose gradients hold NaN/Inf is skipped on every rank and logged; this many in a "
          "row stop the run (exit 6); 0: stop at the first (fp16 overflows follow the loss scaler)", NULL),
    K_FLT("fault.loss_spike_z", fault_loss_spike_z, 0.0, HUGE_VAL, 0, "0",
          "a step whose loss lies more than this many standard deviations above the mean of the last "
          "loss_spike_window applied steps is a spike, handled by fault.loss_spike_policy (logged); 0: off",
          NULL),
    K_INT("fault.loss_spike_window", fault_loss_spike_window, 2, 4096, "50",
          "steps the loss-spike z-score is taken over (it fires once the window is full; checkpointed)", NULL),
    K_ENUM("fault.loss_spike_policy", fault_loss_spike_policy, SPIKE_POLICIES, "skip",
           "on a loss spike: skip (its update, on every rank) or rollback (every rank reloads the last "
           "commit and goes on without the spike's batch, the skip recorded in later checkpoints; needs a "
           "checkpoint directory)"),
    K_INT("fault.replica_check_every", fault_replica_check_every, 0, INT_MAX, "0",
          "every N steps the ranks compare a hash of the parameters they hold; replicas that differ "
          "(silent corruption) stop the run with exit 6 before the step's checkpoint; 0: never. "
          "Meaningful where parameters are replicated (ddp, zero1/zero2 in fp32)", NULL),
    K_FLT("fault.grace_s", fault_grace_s, 0.0, HUGE_VAL, 0, "120",
          "the launcher (--nproc): seconds between forwarding SIGTERM/SIGINT to the ranks (which "
          "save at the next step boundary and exit 75) and killing them (docs/reliability.md)", NULL),
    K_FLT("fault.teardown_s", fault_teardown_s, 1.0, HUGE_VAL, 0, "30",
          "the launcher (--nproc): seconds mpirun gets to end the job after a rank wrote its exit record "
          "(it failed and called MPI_Abort) before the launcher kills mpirun itself: Open MPI can wait "
          "minutes on a host it no longer reaches (docs/reliability.md)", NULL),
};
const int zt_cfg_n_keys = (int)(sizeof zt_cfg_keys / sizeof zt_cfg_keys[0]);
_Static_assert(sizeof zt_cfg_keys / sizeof zt_cfg_keys[0] <= ZT_CONFIG_MAX_KEYS,
               "raise ZT_CONFIG_MAX_KEYS");

const char *const zt_cfg_sections[] = {"model",    "data",      "training", "optimizer", "lora",
                                       "eval",     "logging",   "sample",   "parallel",
                                       "precision", "memory",   "checkpoint", "comm", "fault"};
const int zt_cfg_n_sections = (int)(sizeof zt_cfg_sections / sizeof zt_cfg_sections[0]);
