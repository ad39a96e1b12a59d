"""torch_llama.py - the Llama of src/model/llama.c as a PyTorch nn.Module, for bench/torch_gpt2.py's
training-throughput peer (--preset llama-124M, llama-tiny). Not run by itself.

The math is the PyTorch oracle's (tests/torch_oracle.py, which torch_oracle.sh holds to zerotrain's
fp32 loss and gradients at 1e-6/1e-5), imported from it, not copied: rms_norm, rope_inv_freq and
rotate (transformers' rotate_half layout). Around it, the modules and names of transformers'
LlamaForCausalLM without "model.": embed_tokens, layers.N.{input_layernorm, self_attn.{q,k,v,o}_proj,
post_attention_layernorm, mlp.{gate,up,down}_proj}, norm, lm_head (untied); no biases. Grouped-query
attention repeats k and v per query group (transformers' repeat_kv) and runs the attention function
the caller gives (torch_gpt2.py's: 1.13's private scaled_dot_product_attention, or the explicit
masked softmax). As transformers does, cos/sin are cast to the dtype of q and k (bf16 under
autocast) and the RMSNorm statistics run in fp32. Init: N(0, 0.02) for every Linear and the
embedding (transformers' initializer_range), norms 1."""
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from torch_oracle import rms_norm, rope_inv_freq, rotate  # noqa: E402

# name: (max_seq_len, vocab_size, n_layer, n_head, n_embd, n_kv_head, intermediate_size, rope_theta,
# rms_norm_eps), as src/model/llama.c's presets (no rope scaling in these)
PRESETS = {
    "llama-tiny": (128, 50257, 2, 4, 64, 2, 192, 10000.0, 1e-5),
    "llama-124M": (1024, 32000, 12, 12, 768, 4, 2048, 10000.0, 1e-5),
}


class RMSNorm(nn.Module):
    def __init__(self, C, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(C))
        self.eps = eps

    def forward(self, x):
        return rms_norm(x.float(), self.weight, self.eps)


class Attention(nn.Module):
    def __init__(self, C, NH, NKV, attend):
        super().__init__()
        self.NH, self.NKV, self.hs, self.attend = NH, NKV, C // NH, attend
        self.q_proj = nn.Linear(C, C, bias=False)
        self.k_proj = nn.Linear(C, NKV * self.hs, bias=False)
        self.v_proj = nn.Linear(C, NKV * self.hs, bias=False)
        self.o_proj = nn.Linear(C, C, bias=False)

    def forward(self, x, cos, sin):
        B, T, C = x.shape
        q = self.q_proj(x).view(B, T, self.NH, self.hs).transpose(1, 2)  # (B, NH, T, hs)
        k = self.k_proj(x).view(B, T, self.NKV, self.hs).transpose(1, 2)
        v = self.v_proj(x).view(B, T, self.NKV, self.hs).transpose(1, 2)
        q, k = rotate(q, cos.to(q.dtype), sin.to(q.dtype)), rotate(k, cos.to(k.dtype), sin.to(k.dtype))
        if self.NKV != self.NH:
            k = k.repeat_interleave(self.NH // self.NKV, dim=1)
            v = v.repeat_interleave(self.NH // self.NKV, dim=1)
        y = self.attend(q, k, v).transpose(1, 2).contiguous().view(B, T, C)
        return self.o_proj(y)


class MLP(nn.Module):
    def __init__(self, C, I):
        super().__init__()
        self.gate_proj = nn.Linear(C, I, bias=False)
        self.up_proj = nn.Linear(C, I, bias=False)
        self.down_proj = nn.Linear(I, C, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Block(nn.Module):
    def __init__(self, C, NH, NKV, I, eps, attend):
        super().__init__()
        self.input_layernorm = RMSNorm(C, eps)
        self.self_attn = Attention(C, NH, NKV, attend)
        self.post_attention_layernorm = RMSNorm(C, eps)
        self.mlp = MLP(C, I)

    def forward(self, x, cos, sin):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        return x + self.mlp(self.post_attention_layernorm(x))


class Llama(nn.Module):
    def __init__(self, preset, attend):
        super().__init__()
        max_T, V, L, NH, C, NKV, I, theta, eps = PRESETS[preset]
        self.max_T, self.V, self.L, self.NH, self.C, self.NKV, self.I = max_T, V, L, NH, C, NKV, I
        self.embed_tokens = nn.Embedding(V, C)
        self.layers = nn.ModuleList(Block(C, NH, NKV, I, eps, attend) for _ in range(L))
        self.norm = RMSNorm(C, eps)
        self.lm_head = nn.Linear(C, V, bias=False)
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, 0.0, 0.02)
        inv = rope_inv_freq(C // NH, dict(theta=theta, factor=0))
        ang = torch.arange(max_T, dtype=torch.float32)[:, None] * inv[None, :]  # fp32 angles, as transformers
        emb = torch.cat((ang, ang), dim=-1).double()
        self.register_buffer("cos", emb.cos().float(), persistent=False)
        self.register_buffer("sin", emb.sin().float(), persistent=False)

    def flops_per_token(self, T):
        """src/model/llama.c's count: 6 x the matmul parameters (the blocks' Linears and lm_head;
        not the embedding lookup or the norms) + 12 L C T for attention's scores and sums"""
        C, KV = self.C, self.NKV * (self.C // self.NH)
        block = 2 * C * C + 2 * KV * C + 3 * self.I * C
        return 6 * (self.L * block + self.V * C) + 12 * self.L * C * T

    def forward(self, idx, targets):
        T = idx.shape[1]
        cos, sin = self.cos[:T], self.sin[:T]
        x = self.embed_tokens(idx)
        for block in self.layers:
            x = block(x, cos, sin)
        logits = self.lm_head(self.norm(x))
        return F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.reshape(-1))
