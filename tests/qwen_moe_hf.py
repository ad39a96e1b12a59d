#!/usr/bin/python3
"""qwen_moe_hf.py - Hugging Face Qwen2-MoE and Qwen2 directories for moe.sh (src/ckpt/hf_arch.c's
qwen2_moe and qwen2 rows),
without the transformers package: the directory is written by this file's own safetensors writer
and read back by safetensors_torch.py's reader, the network is torch_oracle.py's Llama with its
mixture-of-experts block and Qwen2MoeSparseMoeBlock's gated shared expert (written out there).

  qwen_moe_hf.py make DIR TOKENS.bin T [--dense]
      a tiny Qwen2-MoE (2 layers, C 64, 4 heads over 2 KV heads, 4 experts of width 32, top-2 not
      renormalized, a gated shared expert of width 96, V 512, untied) with seeded random weights, as
      transformers' save_pretrained lays it out (config.json model_type qwen2_moe, qkv_bias true;
      model.safetensors with model.layers.L.self_attn.{q,k,v}_proj.bias,
      model.layers.L.mlp.experts.E.{gate,up,down}_proj.weight, mlp.shared_expert.*,
      mlp.shared_expert_gate.weight); --dense: a tiny Qwen2 instead (model_type qwen2: the same
      attention with its q/k/v biases, a dense SwiGLU MLP of width 192, tied embeddings, no
      lm_head.weight); and a token file whose every window of T tokens is the same (a period of T
      ids), so that any sampler order gives the same batches.
  qwen_moe_hf.py check DIR TOKENS.bin B T LR JSONL EXPORT ZT_LOSS [ROUNDTRIP]
      1. PyTorch trains DIR's model with plain SGD (lr LR, no momentum, decay, clipping) on B copies
         of that window: its loss at every step must match the step losses zerotrain logged in JSONL
         (trained from DIR through model.init_hf with the same optimizer) to 1e-5 relative;
      2. EXPORT (zerotrain's export of the trained checkpoint) read as transformers names it scores
         the window as zerotrain scored the checkpoint (ZT_LOSS), to 1e-5;
      3. ROUNDTRIP (zerotrain's export of DIR itself, read and written): the same tensors as DIR.
Prints one line per check; exit 1 on any failure."""
import json
import os
import struct
import sys

import numpy as np

CFG = dict(vocab_size=512, hidden_size=64, intermediate_size=192, num_hidden_layers=2, num_attention_heads=4,
           num_key_value_heads=2, max_position_embeddings=64, rms_norm_eps=1e-6, rope_theta=10000.0,
           hidden_act="silu", tie_word_embeddings=False, qkv_bias=True, num_experts=4, num_experts_per_tok=2,
           moe_intermediate_size=32, shared_expert_intermediate_size=96, norm_topk_prob=False,
           router_aux_loss_coef=0.01, decoder_sparse_step=1, mlp_only_layers=[], use_sliding_window=False,
           sliding_window=4096, max_window_layers=28, output_router_logits=True, torch_dtype="float32",
           bos_token_id=0, eos_token_id=1)
# Qwen2 (dense): Qwen2Config's fields (no qkv_bias: its q/k/v biases are always there)
DENSE = dict(vocab_size=512, hidden_size=64, intermediate_size=192, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, max_position_embeddings=64, rms_norm_eps=1e-6, rope_theta=1000000.0,
             hidden_act="silu", tie_word_embeddings=True, use_sliding_window=False, sliding_window=4096,
             max_window_layers=28, layer_types=["full_attention"] * 2, attention_dropout=0.0, torch_dtype="float32",
             bos_token_id=0, eos_token_id=1)


def write_safetensors(path, tensors):
    header, off, blobs = {}, 0, []
    for name, a in tensors.items():
        b = np.ascontiguousarray(a, dtype="<f4").tobytes()
        header[name] = dict(dtype="F32", shape=list(a.shape), data_offsets=[off, off + len(b)])
        off += len(b)
        blobs.append(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def make(d, tokens, T, dense=False):
    os.makedirs(d, exist_ok=True)
    c = (dict(DENSE, architectures=["Qwen2ForCausalLM"], model_type="qwen2") if dense else
         dict(CFG, architectures=["Qwen2MoeForCausalLM"], model_type="qwen2_moe"))
    json.dump(c, open(os.path.join(d, "config.json"), "w"), indent=2)
    rng = np.random.default_rng(34)
    V, C, L, E = c["vocab_size"], c["hidden_size"], c["num_hidden_layers"], c.get("num_experts", 0)
    KV = c["num_key_value_heads"] * C // c["num_attention_heads"]
    lin = lambda o, i, s=0.02: (rng.standard_normal((o, i)) * s).astype(np.float32)
    norm = lambda: (1.0 + 0.1 * rng.standard_normal(C)).astype(np.float32)
    t = {"model.embed_tokens.weight": lin(V, C)}
    for l in range(L):
        p = f"model.layers.{l}."
        t[p + "input_layernorm.weight"] = norm()
        for n, o in (("q", C), ("k", KV), ("v", KV), ("o", C)):
            t[p + f"self_attn.{n}_proj.weight"] = lin(o, C)
            if n != "o":  # q/k/v biases (Qwen2's attention), large enough to move the scores
                t[p + f"self_attn.{n}_proj.bias"] = (rng.standard_normal(o) * 0.1).astype(np.float32)
        t[p + "post_attention_layernorm.weight"] = norm()
        if dense:
            I = c["intermediate_size"]
            t[p + "mlp.gate_proj.weight"], t[p + "mlp.up_proj.weight"] = lin(I, C, 0.1), lin(I, C, 0.1)
            t[p + "mlp.down_proj.weight"] = lin(C, I, 0.1)
            continue
        IE, IS = c["moe_intermediate_size"], c["shared_expert_intermediate_size"]
        t[p + "mlp.gate.weight"] = lin(E, C, 0.3)  # a router far from uniform: the top-k varies by token
        for e in range(E):
            t[p + f"mlp.experts.{e}.gate_proj.weight"] = lin(IE, C, 0.1)
            t[p + f"mlp.experts.{e}.up_proj.weight"] = lin(IE, C, 0.1)
            t[p + f"mlp.experts.{e}.down_proj.weight"] = lin(C, IE, 0.1)
        t[p + "mlp.shared_expert.gate_proj.weight"] = lin(IS, C, 0.1)
        t[p + "mlp.shared_expert.up_proj.weight"] = lin(IS, C, 0.1)
        t[p + "mlp.shared_expert.down_proj.weight"] = lin(C, IS, 0.1)
        t[p + "mlp.shared_expert_gate.weight"] = lin(1, C, 0.3)
    t["model.norm.weight"] = norm()
    if not c["tie_word_embeddings"]:
        t["lm_head.weight"] = lin(V, C)
    write_safetensors(os.path.join(d, "model.safetensors"), t)
    period = rng.integers(0, V, T).astype(np.uint16)  # every window of T tokens is this one
    ids = np.tile(period, 40)
    hdr = np.zeros(256, np.int32)
    hdr[0], hdr[1], hdr[2] = 20240520, 1, len(ids)
    with open(tokens, "wb") as f:
        f.write(hdr.tobytes() + ids.tobytes())
    print(f"{d}: {'Qwen2' if dense else 'Qwen2-MoE'}, {len(t)} tensors; {tokens}: {len(ids)} tokens, period {T}")


def to_zerotrain(H, cfg):
    """Qwen2-MoE's names to zerotrain's (torch_oracle.py reads those): mlp. -> block_sparse_moe., each
    expert weight stacked by expert (gate_proj w1, down_proj w2, up_proj w3); Qwen2's: "model." off."""
    import torch
    P = {}
    if "num_experts" not in cfg:  # Qwen2: dense, Llama's names
        return {n[len("model."):] if n.startswith("model.") else n: t for n, t in H.items()}
    for l in range(cfg["num_hidden_layers"]):
        pre = f"model.layers.{l}.mlp.experts"
        for w, hf in (("w1", "gate_proj"), ("w2", "down_proj"), ("w3", "up_proj")):
            parts = [H.pop(f"{pre}.{e}.{hf}.weight") for e in range(cfg["num_experts"])]
            P[f"layers.{l}.block_sparse_moe.experts.{w}.weight"] = torch.cat(parts, dim=0)
    for name, t in H.items():
        name = name[len("model."):] if name.startswith("model.") else name
        P[name.replace(".mlp.", ".block_sparse_moe.")] = t
    return P


def model_cfg(cfg):
    lc = dict(NKV=cfg["num_key_value_heads"], I=cfg["intermediate_size"], theta=cfg["rope_theta"],
              eps=cfg["rms_norm_eps"], factor=0, low=0, high=0, orig=0, tie=cfg["tie_word_embeddings"],
              moe=None if "num_experts" not in cfg else dict(E=cfg["num_experts"], K=cfg["num_experts_per_tok"], IE=cfg["moe_intermediate_size"],
                       norm=cfg["norm_topk_prob"], aux=cfg["router_aux_loss_coef"], z=0.0, cap=0,
                       IS=cfg["shared_expert_intermediate_size"], gate=True))
    return dict(C=cfg["hidden_size"], NH=cfg["num_attention_heads"], L=cfg["num_hidden_layers"], llama=lc, pos=None)


def check(d, tokens, B, T, lr, jsonl, export, zt_loss, roundtrip):
    import torch
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from safetensors_torch import read_hf_dir
    from torch_oracle import llama_loss
    torch.set_num_threads(2)
    failures = 0
    toks = np.frombuffer(open(tokens, "rb").read(), np.uint16, offset=256 * 4).astype(np.int64)
    idx = torch.tensor(np.stack([toks[:T]] * B))
    tgt = torch.tensor(np.stack([toks[1:T + 1]] * B))
    cfg = json.load(open(os.path.join(d, "config.json")))
    family = "Qwen2-MoE" if cfg["model_type"] == "qwen2_moe" else "Qwen2"
    P = {k: v.clone().requires_grad_(True) for k, v in to_zerotrain(read_hf_dir(d), cfg).items()}
    zt = [json.loads(l)["loss"] for l in open(jsonl) if '"event"' not in l and '"loss"' in l]
    losses = []
    for _ in zt:  # plain SGD, as zerotrain's optimizer.type sgd with momentum, decay and clipping off
        loss = llama_loss(model_cfg(cfg), P, idx, tgt)
        losses.append(loss.item())
        for p in P.values():
            p.grad = None
        loss.backward()
        with torch.no_grad():
            for p in P.values():
                p -= lr * p.grad
    worst = max(abs(a - b) / abs(a) for a, b in zip(losses, zt)) if zt else 1.0
    ok = bool(zt) and worst <= 1e-5
    failures += not ok
    print(f"{'ok  ' if ok else 'FAIL'} trained from the PyTorch-made {family} directory: {len(zt)} steps, loss "
          f"{zt[0] if zt else 'none'} -> {zt[-1] if zt else 'none'}, worst relative difference to PyTorch's "
          f"SGD {worst:.2e}")
    if not ok:
        print("  torch", losses, "\n  zerotrain", zt)
    ecfg = json.load(open(os.path.join(export, "config.json")))
    arch = "Qwen2MoeForCausalLM" if family == "Qwen2-MoE" else "Qwen2ForCausalLM"
    assert ecfg["model_type"] == cfg["model_type"] and ecfg["architectures"] == [arch], ecfg
    with torch.no_grad():
        got = llama_loss(model_cfg(ecfg), to_zerotrain(read_hf_dir(export), ecfg), idx, tgt).item()
    rel = abs(got - zt_loss) / abs(got)
    failures += rel > 1e-5
    print(f"{'ok  ' if rel <= 1e-5 else 'FAIL'} zerotrain's {family} export read as transformers names it: torch "
          f"loss {got:.9g}, zerotrain {zt_loss:.9g}, relative difference {rel:.2e}")
    if roundtrip:
        a, b = read_hf_dir(d), read_hf_dir(roundtrip)
        same = a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
        failures += not same
        print(f"{'ok  ' if same else 'FAIL'} the PyTorch-made {family} directory exported again by zerotrain: "
              f"{len(b)} tensors, {'the same names and bits' if same else 'different'}")
    return failures


def main():
    if sys.argv[1] == "make":
        make(sys.argv[2], sys.argv[3], int(sys.argv[4]), "--dense" in sys.argv)
        return
    a = sys.argv[2:]
    sys.exit(1 if check(a[0], a[1], int(a[2]), int(a[3]), float(a[4]), a[5], a[6], float(a[7]),
                        a[8] if len(a) > 8 else None) else 0)


if __name__ == "__main__":
    main()
