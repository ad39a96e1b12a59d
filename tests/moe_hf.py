#!/usr/bin/python3
"""moe_hf.py HF_DIR TOKENS.bin B T ZT_LOSS [DUMP...] [--qwen QWEN_CHECK_ARGS...] - a Mixtral directory zerotrain exported, read as
transformers would read it: config.json (model_type mixtral, num_local_experts, num_experts_per_tok,
router_aux_loss_coef) and the per-expert tensors model.layers.L.block_sparse_moe.experts.E.w1/w2/w3
(read by safetensors_torch.py's reader, through the index when sharded). The experts are stacked
back into zerotrain's layout and the loss computed by torch_oracle.py's Llama with its Mixtral block
(cross-entropy + router_aux_loss_coef x each layer's load-balancing loss) on the first B windows of
T+1 tokens; it must match zerotrain's (tool_score on the checkpoint) to 1e-5 relative. Then the
oracle dumps given (torch_oracle.py's check, in this process: torch is imported once), and with
--qwen (one or more groups), qwen_moe_hf.py's check of Qwen2-MoE or Qwen2 directories (the arguments it
takes after "check")."""
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from safetensors_torch import read_hf_dir  # noqa: E402
from torch_oracle import check, llama_loss  # noqa: E402


def main():
    torch.set_num_threads(2)
    d, tokens, B, T, zt_loss = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
    cfg = json.load(open(os.path.join(d, "config.json")))
    assert cfg["model_type"] == "mixtral" and cfg["architectures"] == ["MixtralForCausalLM"], cfg
    E, K, L, I = cfg["num_local_experts"], cfg["num_experts_per_tok"], cfg["num_hidden_layers"], cfg["intermediate_size"]
    H = read_hf_dir(d)
    P = {}
    for l in range(L):
        pre = f"model.layers.{l}.block_sparse_moe.experts"
        for w in ("w1", "w2", "w3"):
            parts = [H.pop(f"{pre}.{e}.{w}.weight") for e in range(E)]
            want = (cfg["hidden_size"], I) if w == "w2" else (I, cfg["hidden_size"])
            assert all(tuple(p.shape) == want for p in parts), (w, [p.shape for p in parts])
            P[f"layers.{l}.block_sparse_moe.experts.{w}.weight"] = torch.cat(parts, dim=0)
    for name, t in H.items():
        P[name[len("model."):] if name.startswith("model.") else name] = t
    lc = dict(NKV=cfg["num_key_value_heads"], I=I, theta=cfg["rope_theta"], eps=cfg["rms_norm_eps"], factor=0,
              low=0, high=0, orig=0, tie=cfg["tie_word_embeddings"],
              moe=dict(E=E, K=K, IE=I, norm=True, aux=cfg["router_aux_loss_coef"], z=0.0, cap=0))
    mcfg = dict(C=cfg["hidden_size"], NH=cfg["num_attention_heads"], L=L, llama=lc, pos=None)
    raw = open(tokens, "rb").read()
    toks = np.frombuffer(raw, np.uint16, offset=256 * 4).astype(np.int64)
    idx = torch.tensor(np.stack([toks[b * T: b * T + T] for b in range(B)]))
    tgt = torch.tensor(np.stack([toks[b * T + 1: b * T + T + 1] for b in range(B)]))
    with torch.no_grad():
        loss = llama_loss(mcfg, P, idx, tgt).item()
    rel = abs(loss - zt_loss) / abs(loss)
    print(f"Mixtral directory: {len(P)} tensors ({E} experts of {L} layers stacked), torch loss {loss:.9g}, "
          f"zerotrain {zt_loss:.9g}, relative difference {rel:.2e}")
    failures = rel > 1e-5
    groups = (" " + " ".join(sys.argv[6:])).split(" --qwen ")  # the dumps, then each --qwen group
    for dump in groups[0].split():
        print(f"{dump.rsplit('/', 1)[-1]}:")
        failures += check(dump)
    for group in groups[1:]:  # qwen_moe_hf.py's check, in this process (one torch import)
        from qwen_moe_hf import check as qwen_check
        qwen = group.split()
        failures += qwen_check(qwen[0], qwen[1], int(qwen[2]), int(qwen[3]), float(qwen[4]), qwen[5], qwen[6],
                               float(qwen[7]), qwen[8] if len(qwen) > 8 else None)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
