"""gpu_efficiency.py - what fraction of a GPU's peaks a transformer step's parts reach, measured
with PyTorch (cuBLAS, SDPA flash attention, eager elementwise ops, AdamW), for the scale model's
device table (src/scale/device.c: efficiency, attn_efficiency, mem_efficiency; docs/scale.md).
zerotrain itself runs on CPUs: this checks the numbers the model assumes for GPUs.

    python3 bench/gpu_efficiency.py [--peak-tflops 989] [--hbm-tbs 3.35]

Prints one JSON object:
  gemm       [shape, TFLOP/s, fraction of the bf16 peak]: a (M,K) x (N,K)^T bf16 product, the
             Linears of Llama 2 7B and 70B (and Llama 3 8B's up projection) at the tokens given
  att        [T, heads, forward TFLOP/s, forward+backward TFLOP/s, fraction]: causal SDPA, head size
             128, FLOPs counted on the causal half (4·T²·hs·H/2 forward, 2.5x that backward)
  mem        GB/s per byte the scale model counts (compute.c: SwiGLU reads 2 writes 1 element,
             RMSNorm reads 1 writes 1, add reads 2 writes 1) and that over the HBM peak
  adamw      ns per parameter of one optimizer step (fused and foreach), 5e8 fp32 parameters
Each timing: the best of 20 (10 for mem, 5 for adamw) after warm-ups, CUDA events.
"""
import argparse
import json

import torch
import torch.nn.functional as F


def best_ms(f, reps=20, warm=5):
    for _ in range(warm):
        f()
    torch.cuda.synchronize()
    best = 1e9
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        f()
        e.record()
        torch.cuda.synchronize()
        best = min(best, s.elapsed_time(e))
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--peak-tflops", type=float, default=989.0, help="dense bf16 peak (H100/H200 SXM: 989)")
    ap.add_argument("--hbm-tbs", type=float, default=3.35, help="HBM peak in TB/s (H100 SXM: 3.35)")
    a = ap.parse_args()
    d, P = torch.device("cuda"), a.peak_tflops
    R = {"dev": torch.cuda.get_device_name(0), "torch": torch.__version__, "gemm": [], "att": [], "mem": {}}
    for l, M, N, K in [("sq8192", 8192, 8192, 8192), ("7b-qkvo", 4096, 4096, 4096), ("7b-up", 4096, 11008, 4096),
                       ("7b-down", 4096, 4096, 11008), ("70b-qo", 4096, 8192, 8192), ("70b-up", 4096, 28672, 8192),
                       ("70b-down", 4096, 8192, 28672), ("8b-up-16k", 16384, 14336, 4096)]:
        x = torch.randn(M, K, device=d, dtype=torch.bfloat16)
        w = torch.randn(N, K, device=d, dtype=torch.bfloat16)
        ms = best_ms(lambda: x @ w.t())
        R["gemm"].append([l, round(2 * M * N * K / ms / 1e9, 1), round(2 * M * N * K / ms / 1e9 / P, 3)])
    for T, H in [(4096, 32), (8192, 32), (4096, 64)]:
        q, k, v = (torch.randn(1, H, T, 128, device=d, dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
        ff = 4.0 * T * T * 128 * H / 2
        mf = best_ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))
        g = torch.randn(1, H, T, 128, device=d, dtype=torch.bfloat16)

        def fb():
            F.scaled_dot_product_attention(q, k, v, is_causal=True).backward(g)
        mb = best_ms(fb)
        R["att"].append([T, H, round(ff / mf / 1e9, 1), round(3.5 * ff / mb / 1e9, 1), round(3.5 * ff / mb / 1e9 / P, 3)])
    gate = torch.randn(4096, 28672, device=d, dtype=torch.bfloat16)
    up = torch.randn_like(gate)
    ms = best_ms(lambda: F.silu(gate) * up, reps=10, warm=3)
    R["mem"]["swiglu_fwd_GBps"] = round(3 * 2 * gate.numel() / ms / 1e6, 1)
    x = torch.randn(4096, 8192, device=d, dtype=torch.bfloat16)
    w = torch.randn(8192, device=d, dtype=torch.bfloat16)
    ms = best_ms(lambda: F.rms_norm(x, (8192,), w), reps=10, warm=3)
    R["mem"]["rmsnorm_fwd_GBps"] = round(2 * 2 * x.numel() / ms / 1e6, 1)
    y = torch.randn(4096, 8192, device=d, dtype=torch.bfloat16)
    ms = best_ms(lambda: y + x, reps=10, warm=3)
    R["mem"]["add_GBps"] = round(3 * 2 * y.numel() / ms / 1e6, 1)
    R["mem"]["fractions"] = {k: round(v / (a.hbm_tbs * 1e3), 3) for k, v in list(R["mem"].items())}
    n = int(5e8)
    p = torch.nn.Parameter(torch.randn(n, device=d))
    p.grad = torch.randn(n, device=d)
    for fused in (True, False):
        o = torch.optim.AdamW([p], lr=1e-4, fused=True) if fused else torch.optim.AdamW([p], lr=1e-4, foreach=True)
        ms = best_ms(lambda: o.step(), reps=5, warm=3)
        R["adamw_" + ("fused" if fused else "foreach") + "_ns_per_param"] = round(ms * 1e6 / n, 4)
    print(json.dumps(R))


if __name__ == "__main__":
    main()
