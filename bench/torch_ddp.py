#!/usr/bin/python3
"""torch_ddp.py - PyTorch distributed W1 peer for zerotrain: DDP and ZeroRedundancyOptimizer on CPU.

The GPT-2 of bench/torch_gpt2.py (imported from it, not copied), trained on N local processes
(torch.multiprocessing spawn) that talk through torch.distributed's gloo backend on 127.0.0.1,
each with one intra-op thread (torch.set_num_threads(1), OMP_NUM_THREADS=1), B x T random tokens
per rank (a different stream per rank), the same init and AdamW as torch_gpt2.py (lr 3e-4, betas
(0.9, 0.95), eps 1e-8, weight decay 0.1 on 2-D parameters only) and the same grad-norm clip 1.0
as zerotrain's engine default.

Variants (--variant, one or more; run one after the other, never together):
  ddp   DistributedDataParallel (default 25 MB buckets, all-reduce overlapped with backward by
        gloo's threads) + torch.optim.AdamW on every rank.          = zerotrain `ddp`
  zero  DistributedDataParallel + ZeroRedundancyOptimizer(AdamW): gradients are still all-reduced
        by DDP, each rank updates the parameters it owns, then broadcasts them.  ~ zerotrain `zero1`

One timed step = zero_grad + forward + loss + backward + clip + optimizer.step (+ loss.item()).
The step time is the maximum over ranks (an all-reduce MAX after each step, outside the timing),
tok/s counts every rank's tokens (N x B x T per step). Rank 0 prints a line per step and, per
variant, a final JSON line like zerotrain's (impl "pytorch", strategy, ranks, tok_per_s_median,
step_ms_median, ...). Bytes: "bytes_sent_per_rank_formula" is what the algorithm must send per rank
per step (ring all-reduce 2P(N-1)/N fp32, plus P(N-1)/N for the ZeRO parameter broadcast);
"lo_bytes_per_rank_median" is measured: the loopback interface's transmitted bytes over the step
(gloo's TCP traffic, headers included, plus anything else on lo meanwhile) divided by N.

Run with Debian's python3-torch (/usr/bin/python3):
  /usr/bin/python3 bench/torch_ddp.py --variant ddp zero --nproc 2 -B 4 -T 256 --steps 10 --warmup 3
  ... --preset tiny --steps 3 --warmup 1      (seconds; for trying things out)
  ... --openblas-coretype SkylakeX            (see bench/RESULTS.md: the sandbox exports Haswell)
"""
import argparse
import json
import os
import socket
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--variant", nargs="+", choices=["ddp", "zero"], default=["ddp", "zero"])
    p.add_argument("--nproc", type=int, default=2)
    p.add_argument("--preset", default="gpt2-124M")
    p.add_argument("-B", "--batch", type=int, default=4, help="sequences per rank")
    p.add_argument("-T", "--seq", type=int, default=256)
    p.add_argument("--steps", type=int, default=10, help="timed steps (after warm-up)")
    p.add_argument("--warmup", type=int, default=3, help="untimed warm-up steps")
    p.add_argument("--threads", type=int, default=1, help="intra-op threads per rank")
    p.add_argument("--grad-clip", type=float, default=1.0, help="0 disables")
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--bucket-cap-mb", type=float, default=25.0, help="DDP bucket size (default 25)")
    p.add_argument("--port", type=int, default=0, help="gloo rendezvous port on 127.0.0.1 (0: any free)")
    p.add_argument("--openblas-coretype", default=None,
                   help="set OPENBLAS_CORETYPE before torch loads OpenBLAS (e.g. SkylakeX)")
    p.add_argument("--json-only", action="store_true", help="print only the final JSON line(s)")
    return p.parse_args(argv)


def cpu_all_seconds():
    """CPU seconds used by all processes on the machine (from /proc/stat)."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:9]]
        return (v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return float("nan")


def lo_tx_bytes():
    """Bytes transmitted on the loopback interface so far (gloo's TCP on 127.0.0.1 goes there)."""
    try:
        with open("/proc/net/dev") as f:
            for line in f:
                name, _, rest = line.partition(":")
                if name.strip() == "lo":
                    return int(rest.split()[8])
    except (OSError, ValueError, IndexError):
        pass
    return -1


def import_model(threads):
    """Imports bench/torch_gpt2.py for its GPT2 class and PRESETS. That file parses sys.argv and
    sets the thread count when it loads, so it is imported with an argv of our choosing."""
    saved = sys.argv
    sys.argv = [os.path.join(HERE, "torch_gpt2.py"), "--threads", str(threads), "--json-only"]
    try:
        if HERE not in sys.path:
            sys.path.insert(0, HERE)
        import torch_gpt2  # noqa: E402
    finally:
        sys.argv = saved
    return torch_gpt2


def worker(rank, args, variant, port):
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    if args.openblas_coretype:
        os.environ["OPENBLAS_CORETYPE"] = args.openblas_coretype
    tg = import_model(args.threads)
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.distributed.optim import ZeroRedundancyOptimizer

    torch.set_num_threads(args.threads)
    N = args.nproc
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=N)
    out = (lambda *a: print(*a, flush=True)) if rank == 0 and not args.json_only else (lambda *a: None)

    max_T, V, L, NH, C = tg.PRESETS[args.preset]
    B, T = args.batch, args.seq
    torch.manual_seed(args.seed)  # same init on every rank (DDP also broadcasts rank 0's)
    model = tg.GPT2(max_T, V, L, NH, C)
    model.train()
    n_params = sum(p.numel() for p in model.parameters())
    ddp = DDP(model, bucket_cap_mb=args.bucket_cap_mb)
    decay = [p for p in ddp.parameters() if p.dim() >= 2]
    no_decay = [p for p in ddp.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}]
    hyper = dict(lr=args.lr, betas=(0.9, 0.95), eps=1e-8)
    if variant == "ddp":
        opt = torch.optim.AdamW(groups, **hyper)
        strategy, desc = "ddp", "DistributedDataParallel + AdamW"
        # ring all-reduce of the fp32 gradients
        sent = 2 * n_params * (N - 1) / N * 4
    else:
        opt = ZeroRedundancyOptimizer(groups, optimizer_class=torch.optim.AdamW, **hyper)
        strategy, desc = "zero1", "DistributedDataParallel + ZeroRedundancyOptimizer(AdamW)"
        # DDP's all-reduce, then every owner broadcasts its updated parameters to the N-1 others
        sent = (2 * n_params * (N - 1) / N + n_params * (N - 1) / N) * 4
    n_matmul = n_params - max_T * C
    flops_per_token = 6 * n_matmul + 12 * L * T * C

    out(f"torch {torch.__version__}, gloo, {N} ranks x {torch.get_num_threads()} thread(s), "
        f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')}, attention: {tg.ATTN}")
    out(f"variant {variant}: {desc}; model {args.preset} {n_params:,} parameters; B={B} T={T} per rank, "
        f"bucket_cap_mb {args.bucket_cap_mb}, grad clip {args.grad_clip or 'off'}")

    g = torch.Generator().manual_seed(args.seed + 1000003 * (rank + 1))
    times, others, lo_bytes = [], [], []
    lossv = float("nan")
    for step in range(args.warmup + args.steps):
        tok = torch.randint(0, V, (B, T + 1), generator=g, dtype=torch.long)
        x, y = tok[:, :-1], tok[:, 1:]
        a0, s0, lo0 = cpu_all_seconds(), time.process_time(), lo_tx_bytes()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = ddp(x, y)
        loss.backward()
        if args.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(ddp.parameters(), args.grad_clip)
        opt.step()
        lossv = loss.item()
        dt = time.perf_counter() - t0
        a1, s1, lo1 = cpu_all_seconds(), time.process_time(), lo_tx_bytes()
        # max step time over ranks; sum of the ranks' own CPU time (to tell what others took)
        stat = torch.tensor([dt, s1 - s0, float(lossv)], dtype=torch.float64)
        mx = stat.clone()
        dist.all_reduce(mx, op=dist.ReduceOp.MAX)
        dist.all_reduce(stat, op=dist.ReduceOp.SUM)
        dt_max, own_cpu, mean_loss = float(mx[0]), float(stat[1]), float(stat[2]) / N
        other = max(0.0, ((a1 - a0) - own_cpu) / dt)
        lob = (lo1 - lo0) / N if lo0 >= 0 and lo1 >= 0 else float("nan")
        timed = step >= args.warmup
        if timed:
            times.append(dt_max)
            others.append(other)
            lo_bytes.append(lob)
        out(f"{'step  ' if timed else 'warmup'} {step - args.warmup + 1 if timed else step + 1:3d}: "
            f"loss {mean_loss:.4f}  {dt_max * 1e3:7.0f} ms  {N * B * T / dt_max:7.1f} tok/s  "
            f"lo {lob / 1e6:7.1f} MB/rank  (other processes: {other:.2f} CPUs)")

    med = statistics.median(times)
    res = {
        "impl": "pytorch",
        "version": torch.__version__,
        "backend": "gloo",
        "variant": variant,
        "strategy": strategy,
        "optimizer": desc,
        "preset": args.preset,
        "dtype": "fp32",
        "ranks": N,
        "threads": torch.get_num_threads(),
        "B": B,
        "T": T,
        "steps": len(times),
        "warmup": args.warmup,
        "tok_per_s_median": round(N * B * T / med, 2),
        "step_ms_median": round(med * 1e3, 1),
        "step_ms_min": round(min(times) * 1e3, 1),
        "gflops": round(flops_per_token * N * B * T / med * 1e-9, 1),
        "params": n_params,
        "bytes_sent_per_rank_formula": int(sent),
        "lo_bytes_per_rank_median": int(statistics.median(lo_bytes)) if lo_bytes else None,
        "bucket_cap_mb": args.bucket_cap_mb,
        "grad_clip": args.grad_clip,
        "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE", ""),
        "final_loss": round(lossv, 4),
        "other_cpus_median": round(statistics.median(others), 2),
        "other_cpus_max": round(max(others), 2),
    }
    if rank == 0:
        print(json.dumps(res), flush=True)
    dist.barrier()
    dist.destroy_process_group()


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    args = parse_args()
    if args.nproc < 1 or args.batch < 1 or args.seq < 1 or args.steps < 1 or args.warmup < 0:
        sys.exit("torch_ddp.py: --nproc, -B, -T, --steps must be >= 1 and --warmup >= 0")
    # in the environment before torch (and OpenBLAS/OpenMP) load, here and in the spawned ranks
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    if args.openblas_coretype:
        os.environ["OPENBLAS_CORETYPE"] = args.openblas_coretype
    try:
        import torch.multiprocessing as mp
    except ImportError as e:
        sys.exit(f"torch_ddp.py: cannot import torch with {sys.executable} ({e}); "
                 "Debian's python3-torch is in /usr/bin/python3")
    for variant in args.variant:
        port = args.port or free_port()
        mp.spawn(worker, args=(args, variant, port), nprocs=args.nproc, join=True)


if __name__ == "__main__":
    main()
