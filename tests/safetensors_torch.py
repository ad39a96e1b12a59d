#!/usr/bin/python3
"""safetensors_torch.py MODEL.safetensors|HF_DIR TOKENS.bin B T N_HEAD ZT_LOSS - reads a safetensors
file with a small reader (8-byte header length, JSON header, raw tensors), or a Hugging Face model
directory (config.json's n_head; model.safetensors, or the shards model.safetensors.index.json's
weight_map names, each tensor from the shard the index gives), builds GPT-2 in PyTorch the
way Hugging Face's GPT2LMHeadModel computes it (Conv1D weights (in, out): y = x @ W + b; LM head
tied to wte), takes the first B windows of T+1 tokens of the llm.c token file, and checks that the
mean cross-entropy matches zerotrain's to 1e-5 relative."""
import json
import math
import os
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as F


def read_safetensors(path):
    data = open(path, "rb").read()
    (hl,) = struct.unpack_from("<Q", data, 0)
    header = json.loads(data[8:8 + hl])
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        a, b = t["data_offsets"]
        raw = data[8 + hl + a: 8 + hl + b]
        if t["dtype"] == "F32":
            arr = np.frombuffer(raw, np.float32)
        elif t["dtype"] == "BF16":
            arr = (np.frombuffer(raw, np.uint16).astype(np.uint32) << 16).view(np.float32)
        else:
            raise SystemExit(f"unexpected dtype {t['dtype']}")
        out[name] = torch.from_numpy(arr.copy()).view(*t["shape"])
    return out


def read_hf_dir(d):
    """Every tensor of a Hugging Face model directory, read through the index when there is one:
    each weight_map entry must be in the shard it names, and every shard's tensors in the map."""
    index = os.path.join(d, "model.safetensors.index.json")
    if not os.path.exists(index):
        return read_safetensors(os.path.join(d, "model.safetensors"))
    wmap = json.load(open(index))["weight_map"]
    out = {}
    for shard in sorted(set(wmap.values())):
        part = read_safetensors(os.path.join(d, shard))
        for name in part:
            if wmap.get(name) != shard:
                raise SystemExit(f"{shard}: tensor {name} is not in the index's weight_map for this shard")
        out.update(part)
    missing = set(wmap) - set(out)
    if missing:
        raise SystemExit(f"index names tensors no shard holds: {sorted(missing)}")
    print(f"{d}: {len(out)} tensors from {len(set(wmap.values()))} shards via the index")
    return out


def main():
    path, tokens, B, T, NH, zt_loss = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6])
    if os.path.isdir(path):
        cfg = json.load(open(os.path.join(path, "config.json")))
        if cfg["model_type"] != "gpt2" or cfg["n_head"] != NH:
            raise SystemExit(f"config.json: model_type {cfg['model_type']}, n_head {cfg['n_head']}")
        P = read_hf_dir(path)
    else:
        P = read_safetensors(path)
    raw = open(tokens, "rb").read()
    toks = np.frombuffer(raw, np.uint16, offset=256 * 4).astype(np.int64)
    idx = torch.tensor(np.stack([toks[b * T: b * T + T] for b in range(B)]))
    tgt = torch.tensor(np.stack([toks[b * T + 1: b * T + T + 1] for b in range(B)]))
    C = P["wte.weight"].shape[1]
    L = len({k.split(".")[1] for k in P if k.startswith("h.")})
    hs = C // NH
    x = P["wte.weight"][idx] + P["wpe.weight"][:T]
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    for l in range(L):
        h = lambda s: P[f"h.{l}.{s}"]
        a = F.layer_norm(x, (C,), h("ln_1.weight"), h("ln_1.bias"), 1e-5)
        qkv = a @ h("attn.c_attn.weight") + h("attn.c_attn.bias")
        q, k, v = (t.view(B, T, NH, hs).transpose(1, 2) for t in qkv.split(C, dim=2))
        att = ((q @ k.transpose(-2, -1)) / math.sqrt(hs)).masked_fill(~mask, float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        x = x + y @ h("attn.c_proj.weight") + h("attn.c_proj.bias")
        a = F.layer_norm(x, (C,), h("ln_2.weight"), h("ln_2.bias"), 1e-5)
        a = F.gelu(a @ h("mlp.c_fc.weight") + h("mlp.c_fc.bias"), approximate="tanh")
        x = x + a @ h("mlp.c_proj.weight") + h("mlp.c_proj.bias")
    x = F.layer_norm(x, (C,), P["ln_f.weight"], P["ln_f.bias"], 1e-5)
    loss = F.cross_entropy((x @ P["wte.weight"].T).view(-1, P["wte.weight"].shape[0]), tgt.view(-1)).item()
    rel = abs(loss - zt_loss) / abs(loss)
    print(f"torch loss {loss:.9g}, zerotrain {zt_loss:.9g}, relative difference {rel:.2e}")
    sys.exit(0 if rel <= 1e-5 else 1)


if __name__ == "__main__":
    main()
