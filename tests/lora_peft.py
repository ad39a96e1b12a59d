#!/usr/bin/python3
"""lora_peft.py BASE_DIR ADAPTER_DIR MERGED_DIR TOKENS.bin B T ZT_LOSS - LoRA export against PyTorch
(python3-torch; the peft package is not used: its LoRA is applied here by hand).

BASE_DIR is the Hugging Face directory the LoRA run started from (its weights are the frozen base),
ADAPTER_DIR what `zerotrain export CKPT --peft` wrote, MERGED_DIR what `export CKPT --hf` wrote
(the adapters merged), ZT_LOSS zerotrain's evaluation loss of the LoRA checkpoint on the first B
windows of T+1 tokens (tests/tool_score). Checks:
  - adapter_config.json is PEFT's LoraConfig (peft_type LORA, task_type CAUSAL_LM, r, lora_alpha,
    lora_dropout, target_modules, base_model_name_or_path, fan_in_fan_out for GPT-2's Conv1D);
  - adapter_model.safetensors holds, for every adapted module M, base_model.model.M.lora_A.weight
    (r, in) and ...lora_B.weight (out, r), M a module of the base model's state dict;
  - the base with W + (alpha/r)·B·A applied by hand gives zerotrain's loss (rel 1e-5), and so does
    MERGED_DIR; the merged weights equal the by-hand merge (rel 1e-6); the other tensors of
    MERGED_DIR are the base's, bit for bit."""
import json
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from safetensors_torch import read_hf_dir, read_safetensors  # noqa: E402
from torch_oracle import gpt2_loss, llama_loss  # noqa: E402


def model_cfg(d):
    c = json.load(open(os.path.join(d, "config.json")))
    if c["model_type"] == "gpt2":
        return c, dict(C=c["n_embd"], NH=c["n_head"], L=c["n_layer"], llama=None)
    rs = c.get("rope_scaling") or {}
    lc = dict(NKV=c["num_key_value_heads"], theta=c["rope_theta"], eps=c["rms_norm_eps"],
              factor=rs.get("factor", 0), low=rs.get("low_freq_factor", 0), high=rs.get("high_freq_factor", 0),
              orig=rs.get("original_max_position_embeddings", 0), tie=c.get("tie_word_embeddings", False))
    return c, dict(C=c["hidden_size"], NH=c["num_attention_heads"], L=c["num_hidden_layers"], llama=lc)


def to_zerotrain(P, gpt2):
    """transformers' names and layouts -> zerotrain's (torch_oracle's): Llama drops "model.",
    GPT-2's Conv1D weights (in, out) are transposed to (out, in)"""
    out = {}
    for k, v in P.items():
        if gpt2:
            k = k[len("transformer."):] if k.startswith("transformer.") else k
            if k.startswith("h.") and v.dim() == 2:
                v = v.t().contiguous()
        elif k.startswith("model."):
            k = k[len("model."):]
        out[k] = v
    return out


def main():
    base_dir, ad_dir, merged_dir, tokens = sys.argv[1:5]
    B, T, zt_loss = int(sys.argv[5]), int(sys.argv[6]), float(sys.argv[7])
    torch.set_num_threads(2)
    hf, cfg = model_cfg(base_dir)
    gpt2 = hf["model_type"] == "gpt2"
    ac = json.load(open(os.path.join(ad_dir, "adapter_config.json")))
    fails = []
    for k, want in (("peft_type", "LORA"), ("task_type", "CAUSAL_LM"), ("bias", "none"), ("fan_in_fan_out", gpt2)):
        if ac.get(k) != want:
            fails.append(f"adapter_config.json {k} = {ac.get(k)!r}, want {want!r}")
    for k in ("r", "lora_alpha", "lora_dropout", "target_modules", "base_model_name_or_path"):
        if k not in ac:
            fails.append(f"adapter_config.json has no {k}")
    r, scale = ac["r"], ac["lora_alpha"] / ac["r"]
    base = read_hf_dir(base_dir)
    ad = read_safetensors(os.path.join(ad_dir, "adapter_model.safetensors"))
    mods = sorted({k[len("base_model.model."):].rsplit(".lora_", 1)[0] for k in ad})
    byhand = dict(base)
    for m in mods:
        A, Bm = ad.get(f"base_model.model.{m}.lora_A.weight"), ad.get(f"base_model.model.{m}.lora_B.weight")
        key = m[len("transformer."):] if gpt2 else m  # GPT2Model's names in zerotrain's directories
        W = base.get(key + ".weight")
        if A is None or Bm is None or W is None:
            fails.append(f"{m}: lora_A {A is not None}, lora_B {Bm is not None}, base weight {W is not None}")
            continue
        out_f, in_f = (W.shape[1], W.shape[0]) if gpt2 else W.shape
        if tuple(A.shape) != (r, in_f) or tuple(Bm.shape) != (out_f, r):
            fails.append(f"{m}: lora_A {tuple(A.shape)} lora_B {tuple(Bm.shape)}, want ({r}, {in_f}) ({out_f}, {r})")
            continue
        delta = scale * (Bm.double() @ A.double())  # (out, in), PEFT's get_delta_weight
        byhand[key + ".weight"] = (W.double() + (delta.t() if gpt2 else delta)).float()  # Conv1D: (in, out)
    tm = ac["target_modules"]
    print(f"{ad_dir}: {len(mods)} adapted modules, r={r}, lora_alpha={ac['lora_alpha']}, "
          f"lora_dropout={ac['lora_dropout']}, target_modules={tm if isinstance(tm, list) else tm[:60]}")
    merged = read_hf_dir(merged_dir)
    worst = 0.0
    for k, v in merged.items():
        if k not in byhand:
            fails.append(f"merged: unexpected tensor {k}")
            continue
        if k in base and torch.equal(byhand[k], base[k]):
            if not torch.equal(v, base[k]):
                fails.append(f"merged: {k} is not adapted but differs from the base")
            continue
        rel = ((v.double() - byhand[k].double()).norm() / byhand[k].double().norm()).item()
        worst = max(worst, rel)
    if worst > 1e-6:
        fails.append(f"merged weights differ from W + s·B·A by {worst:.2e}")
    raw = open(tokens, "rb").read()
    toks = np.frombuffer(raw, np.uint16, offset=256 * 4).astype(np.int64)
    idx = torch.tensor(np.stack([toks[b * T: b * T + T] for b in range(B)]))
    tgt = torch.tensor(np.stack([toks[b * T + 1: b * T + T + 1] for b in range(B)]))
    loss_fn = gpt2_loss if gpt2 else llama_loss
    with torch.no_grad():
        l_hand = loss_fn(cfg, to_zerotrain(byhand, gpt2), idx, tgt).item()
        l_merged = loss_fn(cfg, to_zerotrain(merged, gpt2), idx, tgt).item()
        l_base = loss_fn(cfg, to_zerotrain(base, gpt2), idx, tgt).item()
    for what, l in (("base + s·B·A by hand", l_hand), ("merged directory", l_merged)):
        rel = abs(l - zt_loss) / abs(zt_loss)
        print(f"{what}: torch loss {l:.7f}, zerotrain {zt_loss:.7f}, rel {rel:.1e} (the base alone: {l_base:.7f})")
        if not rel <= 1e-5:
            fails.append(f"{what}: loss {l} vs zerotrain {zt_loss}")
    if abs(l_base - zt_loss) < 1e-4:
        fails.append("the adapters change nothing: the base alone gives zerotrain's loss")
    print(f"merged weights vs by hand: worst rel {worst:.1e}")
    for f in fails:
        print("FAIL", f)
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
