#!/usr/bin/python3
"""torch_gpt2.py - PyTorch GPT-2 (and Llama) training-throughput peer for zerotrain (CPU).

Same model as zerotrain's src/model/gpt2.c (llm.c / Hugging Face GPT-2): learned wte (V,C) and
wpe (maxT,C); pre-LayerNorm blocks (eps 1e-5) with fused QKV Linear(C,3C)+bias, causal softmax
attention scaled by 1/sqrt(hs), output projection Linear(C,C), MLP Linear(C,4C) -> GELU(tanh) ->
Linear(4C,C); final LayerNorm; LM head tied to wte (no bias); mean cross-entropy.
Init as GPT-2: N(0, 0.02), residual projections N(0, 0.02/sqrt(2L)), biases 0, LN weight 1.
With --preset llama-124M or llama-tiny, the Llama of src/model/llama.c instead (bench/torch_llama.py:
RMSNorm, rotary embedding, grouped-query attention, SwiGLU, untied lm_head, the PyTorch oracle's
math), with the same loop, attention function, optimizer and clipping.
AdamW(lr 3e-4, betas (0.9, 0.95), eps 1e-8, weight decay 0.1 on 2-D parameters only).

One timed step = zero_grad + forward + loss + backward + (grad clip) + optimizer.step.
Prints one line per step and a final JSON line (impl "pytorch").

Run with a Python that has torch: Debian's python3-torch lives in /usr/bin/python3.
  /usr/bin/python3 bench/torch_gpt2.py --preset gpt2-124M -B 4 -T 256 --steps 10 --warmup 3
  /usr/bin/python3 bench/torch_gpt2.py --preset llama-124M -B 4 -T 256 --steps 10 --warmup 3
  ... --dtype bf16            (torch.autocast('cpu', dtype=torch.bfloat16) around the forward)
  ... --openblas-coretype SkylakeX   (see bench/RESULTS.md: OpenBLAS 0.3.21 picks Haswell here)
"""
import argparse
import json
import math
import os
import resource
import statistics
import struct
import sys
import time

PRESETS = {  # name: (max_seq_len, vocab_size, n_layer, n_head, n_embd), as src/model/gpt2.c
    "tiny": (128, 50257, 2, 4, 64),
    "gpt2-124M": (1024, 50257, 12, 12, 768),
    "gpt2": (1024, 50257, 12, 12, 768),
    "gpt2-350M": (1024, 50257, 24, 16, 1024),
    "gpt2-774M": (1024, 50257, 36, 20, 1280),
    "gpt2-1558M": (1024, 50257, 48, 25, 1600),
}


LLAMA_PRESETS = ("llama-tiny", "llama-124M")  # bench/torch_llama.py's PRESETS (imported with torch)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--preset", default="gpt2-124M", choices=sorted(PRESETS) + list(LLAMA_PRESETS))
    p.add_argument("-B", "--batch", type=int, default=4)
    p.add_argument("-T", "--seq", type=int, default=256)
    p.add_argument("--steps", type=int, default=10, help="timed steps (after warm-up)")
    p.add_argument("--warmup", type=int, default=3, help="untimed warm-up steps")
    p.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32",
                   help="bf16 = torch.autocast('cpu', bfloat16) around the forward; "
                        "parameters, gradients and AdamW stay fp32")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--max-seq-len", type=int, default=0,
                   help="the preset's context lengthened (wpe rows), as zerotrain bench --max-seq-len")
    p.add_argument("--attn", choices=["auto", "sdpa", "explicit"], default="auto",
                   help="auto: F.scaled_dot_product_attention (or 1.13's private "
                        "_scaled_dot_product_attention) when present, else explicit masked softmax")
    p.add_argument("--grad-clip", type=float, default=1.0,
                   help="global-norm clip as llm.c / zerotrain do; 0 disables")
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--data", default=None,
                   help="token file in llm.c format (256 int32 header, then uint16 tokens, or "
                        "uint32 under magic 20240801); "
                        "default: random tokens from --seed")
    p.add_argument("--openblas-coretype", default=None,
                   help="set OPENBLAS_CORETYPE before torch loads OpenBLAS (e.g. SkylakeX)")
    p.add_argument("--quiet-steps", type=int, default=0,
                   help="keep stepping past --steps (at most 4x this many extra steps) until this "
                        "many timed steps ran while other processes used < --quiet-cpus CPUs; "
                        "the JSON then also has tok_per_s_median_quiet over those steps")
    p.add_argument("--quiet-cpus", type=float, default=0.15)
    p.add_argument("--json-only", action="store_true", help="print only the final JSON line")
    g = p.add_argument_group("time to a target loss (bench/time_to_loss.sh): train on --data in "
                             "zerotrain's order and schedule until the validation loss reaches --target-loss")
    g.add_argument("--shape", default=None, help="L,NH,C: the preset's layers, heads and width replaced")
    g.add_argument("--init", default=None, help="start from this safetensors file (Hugging Face GPT-2 names)")
    g.add_argument("--save-init", default=None,
                   help="write the initial parameters as safetensors with Hugging Face GPT-2 names "
                        "(zerotrain train --init reads them) and exit")
    g.add_argument("--val", default=None, help="validation token file")
    g.add_argument("--target-loss", type=float, default=0.0,
                   help="stop at a validation loss <= this (zerotrain's eval.target_loss)")
    g.add_argument("--total-steps", type=int, default=0, help="the schedule's steps (training.steps)")
    g.add_argument("--warmup-steps", type=int, default=0, help="training.warmup_steps")
    g.add_argument("--min-lr", type=float, default=None, help="training.min_lr (default lr / 10)")
    g.add_argument("--eval-every", type=int, default=0, help="eval.every")
    g.add_argument("--eval-batches", type=int, default=8, help="eval.batches")
    return p.parse_args()


args = parse_args()
# Both must be in the environment before torch (and with it OpenBLAS and oneDNN) is loaded.
os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
if args.openblas_coretype:
    os.environ["OPENBLAS_CORETYPE"] = args.openblas_coretype

try:
    import numpy as np
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError as e:  # pragma: no cover
    sys.exit(f"torch_gpt2.py: cannot import torch/numpy with {sys.executable} ({e}); "
             "Debian's python3-torch is in /usr/bin/python3")

torch.set_num_threads(args.threads)

_SDPA = getattr(F, "scaled_dot_product_attention", None)
_SDPA_NAME = "F.scaled_dot_product_attention"
if _SDPA is None:
    _SDPA = getattr(F, "_scaled_dot_product_attention", None)
    _SDPA_NAME = "F._scaled_dot_product_attention (torch 1.13 private)"
if args.attn == "explicit" or (args.attn == "auto" and _SDPA is None):
    ATTN = "explicit masked softmax"
elif _SDPA is None:
    sys.exit("torch_gpt2.py: --attn sdpa asked for but this torch has no scaled_dot_product_attention")
else:
    ATTN = _SDPA_NAME


def cpu_seconds():
    """(CPU seconds used by all processes, by this one): their difference over a step is what
    other programs took from the machine meanwhile (this VM is shared; see bench/RESULTS.md)."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:9]]
        hz = os.sysconf("SC_CLK_TCK")
        allv = (v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / hz
    except (OSError, ValueError, IndexError):
        allv = float("nan")
    return allv, time.process_time()


def log(*a):
    if not args.json_only:
        print(*a, flush=True)


def attend(q, k, v, mask=None):
    """causal attention of (B, NH, T, hs) q, k, v scaled by 1/sqrt(hs); mask: a (1, 1, maxT, maxT)
    bool lower triangle for the explicit path"""
    if ATTN.startswith("explicit"):
        T = q.shape[-2]
        if mask is None:
            mask = torch.tril(torch.ones(T, T, dtype=torch.bool)).view(1, 1, T, T)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))
        att = att.masked_fill(~mask[:, :, :T, :T], float("-inf"))
        return F.softmax(att, dim=-1) @ v
    if ATTN.startswith("F.scaled"):
        return _SDPA(q, k, v, is_causal=True)  # default scale is 1/sqrt(hs)
    return _SDPA(q, k, v, None, 0.0, False, True)[0]  # 1.13 private: (q, k, v, mask, p, need_w, causal)


class CausalSelfAttention(nn.Module):
    def __init__(self, C, NH, max_T):
        super().__init__()
        self.NH = NH
        self.c_attn = nn.Linear(C, 3 * C)
        self.c_proj = nn.Linear(C, C)
        self.c_proj.RESIDUAL = True
        if ATTN.startswith("explicit"):
            mask = torch.tril(torch.ones(max_T, max_T, dtype=torch.bool))
            self.register_buffer("mask", mask.view(1, 1, max_T, max_T), persistent=False)

    def forward(self, x):
        B, T, C = x.shape
        hs = C // self.NH
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(B, T, self.NH, hs).transpose(1, 2)  # (B, NH, T, hs)
        k = k.view(B, T, self.NH, hs).transpose(1, 2)
        v = v.view(B, T, self.NH, hs).transpose(1, 2)
        y = attend(q, k, v, getattr(self, "mask", None))
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, C):
        super().__init__()
        self.c_fc = nn.Linear(C, 4 * C)
        self.c_proj = nn.Linear(4 * C, C)
        self.c_proj.RESIDUAL = True

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, C, NH, max_T):
        super().__init__()
        self.ln_1 = nn.LayerNorm(C, eps=1e-5)
        self.attn = CausalSelfAttention(C, NH, max_T)
        self.ln_2 = nn.LayerNorm(C, eps=1e-5)
        self.mlp = MLP(C)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT2(nn.Module):
    def __init__(self, max_T, V, L, NH, C):
        super().__init__()
        self.wte = nn.Embedding(V, C)
        self.wpe = nn.Embedding(max_T, C)
        self.h = nn.ModuleList(Block(C, NH, max_T) for _ in range(L))
        self.ln_f = nn.LayerNorm(C, eps=1e-5)
        resid_std = 0.02 / math.sqrt(2 * L)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, 0.0, resid_std if getattr(m, "RESIDUAL", False) else 0.02)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Embedding):
                nn.init.normal_(m.weight, 0.0, 0.02)
            elif isinstance(m, nn.LayerNorm):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

    def forward(self, idx, targets):
        B, T = idx.shape
        pos = torch.arange(T, dtype=torch.long)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        x = self.ln_f(x)
        logits = F.linear(x, self.wte.weight)  # LM head tied to wte, no bias
        return F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.reshape(-1))


def batches(B, T, V):
    """Yields (inputs, targets) forever: random tokens from --seed, or --data in order."""
    if args.data is None:
        g = torch.Generator().manual_seed(args.seed)
        while True:
            tok = torch.randint(0, V, (B, T + 1), generator=g, dtype=torch.long)
            yield tok[:, :-1], tok[:, 1:]
    header = np.fromfile(args.data, dtype=np.int32, count=256)
    if header.size < 3 or (header[0], header[1]) not in ((20240520, 1), (20240801, 7)):
        sys.exit(f"torch_gpt2.py: {args.data}: not an llm.c token file (magic, version {header[:2]})")
    dt = np.uint16 if header[0] == 20240520 else np.uint32
    toks = np.memmap(args.data, dtype=dt, mode="r", offset=256 * 4)[: int(header[2])]
    n = B * T + 1
    if toks.size < n:
        sys.exit(f"torch_gpt2.py: {args.data}: {toks.size} tokens < B*T+1 = {n}")
    pos = 0
    while True:
        if pos + n > toks.size:
            pos = 0
        chunk = torch.from_numpy(toks[pos:pos + n].astype(np.int64))
        pos += B * T
        yield chunk[:-1].view(B, T), chunk[1:].view(B, T)


def forward_loss(model, x, y):
    """The model's mean loss, under torch.autocast('cpu', bfloat16) with --dtype bf16."""
    if args.dtype == "bf16":
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return model(x, y)
    return model(x, y)


def zt_mix(x):
    """src/data/sampler.c's mix(): the splitmix64 finalizer, in 64-bit arithmetic."""
    M = (1 << 64) - 1
    x = (x + 0x9E3779B97F4A7C15) & M
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M
    return x ^ (x >> 31)


def zt_epoch_order(n, seed, epoch):
    """The windows' order in an epoch, as src/data/sampler.c's build_epoch (Fisher-Yates keyed by
    (seed, epoch)), so this peer trains on zerotrain's samples in zerotrain's order."""
    perm, state = list(range(n)), zt_mix(seed ^ zt_mix(epoch + 1))
    for i in range(n - 1, 0, -1):
        state = zt_mix(state)
        j = state % (i + 1)
        perm[i], perm[j] = perm[j], perm[i]
    return perm


def read_tokens(path):
    header = np.fromfile(path, dtype=np.int32, count=256)
    if header.size < 3 or (header[0], header[1]) not in ((20240520, 1), (20240801, 7)):
        sys.exit(f"torch_gpt2.py: {path}: not an llm.c token file (magic, version {header[:2]})")
    dt = np.uint16 if header[0] == 20240520 else np.uint32
    return np.memmap(path, dtype=dt, mode="r", offset=256 * 4)[: int(header[2])]


def windows(toks, T, idx):
    """(inputs, targets) of the windows idx: window w is tokens [w T, w T + T] (sampler.h)."""
    a = np.stack([toks[w * T: w * T + T + 1] for w in idx]).astype(np.int64)
    t = torch.from_numpy(a)
    return t[:, :-1], t[:, 1:]


def lr_at(step):
    """src/optim/schedule.c's zt_lr_at: linear warmup, then cosine to min_lr at total_steps."""
    lr, wu, total = args.lr, args.warmup_steps, args.total_steps
    mn = args.min_lr if args.min_lr is not None else lr / 10
    if wu > 0 and step < wu:
        return lr * (step + 1) / wu
    if total <= wu:
        return lr
    if step >= total:
        return mn
    frac = (step - wu) / (total - wu)
    return mn + 0.5 * (1.0 + math.cos(math.pi * frac)) * (lr - mn)


HF_TRANSPOSED = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")


def save_safetensors(model, path):
    """The parameters with Hugging Face GPT-2 names; nn.Linear weights transposed to Conv1D's (in, out)."""
    header, blobs, off = {}, [], 0
    for name, p in model.state_dict().items():
        t = p.detach().float()
        if name.endswith(HF_TRANSPOSED):
            t = t.t()
        b = t.contiguous().numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for b in blobs:
            f.write(b)


def load_safetensors(model, path):
    data = open(path, "rb").read()
    (hl,) = struct.unpack_from("<Q", data, 0)
    header = json.loads(data[8:8 + hl])
    state = model.state_dict()
    for name, p in state.items():
        if name not in header or header[name]["dtype"] != "F32":
            sys.exit(f"torch_gpt2.py: {path}: no F32 tensor {name}")
        a, b = header[name]["data_offsets"]
        t = torch.from_numpy(np.frombuffer(data[8 + hl + a: 8 + hl + b], np.float32).copy())
        t = t.view(*header[name]["shape"])
        p.copy_(t.t() if name.endswith(HF_TRANSPOSED) else t)


def train_to_target(model, opt, B, T):
    """Trains on --data's windows in zerotrain's order (seed --seed, one global batch of B windows
    per step), evaluates every --eval-every steps on the first --eval-batches batches of --val's
    windows in file order (the trainer's evaluate()), and stops at the first validation loss <=
    --target-loss. The clock starts at the first step and includes the evaluations, as zerotrain's
    eval.target_loss does. Prints one JSON line."""
    train, val = read_tokens(args.data), read_tokens(args.val)
    n_win, n_val = (train.size - 1) // T, (val.size - 1) // T
    n_eval = max(1, min(args.eval_batches, n_val // B))
    orders = {}

    def batch(step):
        idx = []
        for s in range(step * B, step * B + B):
            e = s // n_win
            if e not in orders:
                orders[e] = zt_epoch_order(n_win, args.seed, e)
            idx.append(orders[e][s % n_win])
        return windows(train, T, idx)

    def evaluate():
        model.eval()
        tot = 0.0
        with torch.no_grad():
            for i in range(n_eval):
                x, y = windows(val, T, range(i * B, i * B + B))
                tot += forward_loss(model, x, y).item()
        model.train()
        return tot / n_eval

    t0, cpu0 = time.perf_counter(), time.process_time()
    reached, v, loss = None, float("nan"), float("nan")
    for step in range(args.total_steps):
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        x, y = batch(step)
        opt.zero_grad(set_to_none=True)
        out = forward_loss(model, x, y)
        out.backward()
        if args.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip)
        opt.step()
        loss = out.item()
        last = step + 1 == args.total_steps
        if (args.eval_every > 0 and (step + 1) % args.eval_every == 0) or last:
            v = evaluate()
            log(f"step {step + 1}: loss {loss:.4f} val loss {v:.4f} ({time.perf_counter() - t0:.1f} s)")
            if v <= args.target_loss:
                reached = step + 1
                break
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    print(json.dumps({"impl": "pytorch", "version": torch.__version__, "dtype": args.dtype,
                      "threads": torch.get_num_threads(), "B": B, "T": T, "target": args.target_loss,
                      "reached_step": reached, "val_loss": round(v, 6), "train_loss": round(loss, 6),
                      "seconds": round(wall, 3), "cpu_seconds": round(cpu, 3),
                      "tokens": (reached or args.total_steps) * B * T,
                      "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE", "")}), flush=True)
    return 0 if reached else 3


def main():
    llama = args.preset in LLAMA_PRESETS
    B, T = args.batch, args.seq
    torch.manual_seed(args.seed)
    if llama:
        from torch_llama import Llama
        model = Llama(args.preset, attend)
        max_T, V, L, NH, C = model.max_T, model.V, model.L, model.NH, model.C
        shape = f"NKV={model.NKV} I={model.I} "
    else:
        max_T, V, L, NH, C = PRESETS[args.preset]
        if args.shape:
            L, NH, C = (int(v) for v in args.shape.split(","))
        if args.max_seq_len:
            max_T = args.max_seq_len
        model = GPT2(max_T, V, L, NH, C)
        shape = ""
    if T > max_T:
        sys.exit(f"torch_gpt2.py: -T {T} > max sequence length {max_T} of {args.preset}")
    model.train()
    n_params = sum(p.numel() for p in model.parameters())
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8)
    # PaLM-style model FLOPs per token: 6 x (params that take part in matmuls, wte counted once
    # for the tied head; wpe excluded) + 12 L T C for attention scores and values.
    n_matmul = n_params - max_T * C
    flops_per_token = model.flops_per_token(T) if llama else 6 * n_matmul + 12 * L * T * C

    if args.save_init:
        save_safetensors(model, args.save_init)
        log(f"initial parameters written to {args.save_init}")
        return 0
    if args.init:
        with torch.no_grad():
            load_safetensors(model, args.init)
    if args.target_loss > 0:
        if llama or not (args.data and args.val and args.total_steps > 0):
            sys.exit("torch_gpt2.py: --target-loss needs a GPT-2 preset, --data, --val and --total-steps")
        return train_to_target(model, opt, B, T)
    log(f"torch {torch.__version__}, threads {torch.get_num_threads()}, "
        f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')}, "
        f"mkldnn {torch.backends.mkldnn.is_available()}")
    log(f"model {args.preset}: L={L} C={C} NH={NH} {shape}V={V} maxT={max_T}, {n_params:,} parameters; "
        f"B={B} T={T}, dtype {args.dtype}, attention: {ATTN}, grad clip {args.grad_clip or 'off'}, "
        f"data: {args.data or f'random tokens (seed {args.seed})'}")

    data = batches(B, T, V)
    times, others, cpu_steps = [], [], []
    step, max_steps = 0, args.warmup + args.steps + 4 * max(0, args.quiet_steps)
    while True:
        n_quiet = sum(1 for o in others if o < args.quiet_cpus)
        if step >= args.warmup + args.steps and (n_quiet >= args.quiet_steps or step >= max_steps):
            break
        x, y = next(data)
        all0, self0 = cpu_seconds()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = forward_loss(model, x, y)
        loss.backward()
        norm = float("nan")
        if args.grad_clip > 0:
            norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip))
        opt.step()
        lossv = loss.item()
        dt = time.perf_counter() - t0
        all1, self1 = cpu_seconds()
        other = max(0.0, ((all1 - all0) - (self1 - self0)) / dt)
        timed = step >= args.warmup
        if timed:
            times.append(dt)
            others.append(other)
            cpu_steps.append((self1 - self0) / torch.get_num_threads())
        log(f"step {step + 1:3d} {'timed ' if timed else 'warmup'} "
            f"loss {lossv:.4f} norm {norm:.3f} {dt * 1e3:9.1f} ms {B * T / dt:8.1f} tok/s  "
            f"(other processes: {other:.2f} CPUs)")
        step += 1

    med = statistics.median(times)
    quiet = [t for t, o in zip(times, others) if o < args.quiet_cpus]
    out = {
        "impl": "pytorch",
        "version": torch.__version__,
        "dtype": args.dtype,
        "threads": torch.get_num_threads(),
        "preset": args.preset,
        "B": B,
        "T": T,
        "attention": ATTN,
        "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE", ""),
        "tok_per_s_median": round(B * T / med, 2),
        "step_ms_median": round(med * 1e3, 2),
        "step_ms_min": round(min(times) * 1e3, 2),
        "gflops": round(flops_per_token * B * T / med * 1e-9, 1),
        "flops_per_token": flops_per_token,
        "steps": len(times),
        "warmup": args.warmup,
        "final_loss": round(lossv, 4),
        "other_cpus_median": round(statistics.median(others), 2),
        "other_cpus_max": round(max(others), 2),
        "quiet_steps": len(quiet),
        # this process's CPU time per step / threads: its own work, which other programs on a
        # shared machine do not inflate the way they inflate the wall time
        "tok_per_cpu_s": round(B * T / statistics.median(cpu_steps), 2),
        "tok_per_s_median_quiet": round(B * T / statistics.median(quiet), 2) if quiet else None,
        "max_seq_len": max_T,
        "max_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "cpu_step_ms_median": round(statistics.median(cpu_steps) * 1e3, 1),
    }
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    sys.exit(main())
