#!/usr/bin/env bash
# tp.sh - tensor parallelism against the data-parallel strategies on the same ranks: GPT-2 124M
# (W1 shapes by default), `zerotrain bench --nproc N` under ddp, zero3, and --tp N (one tensor-
# parallel group over all N ranks), one run after the other. Prints a table of step time, tok/s
# and the bytes rank 0 sent per step (data-parallel and tensor-parallel) beside the formulas of
# docs/strategies.md and docs/parallelism.md, and a JSON line per run.
#
#   bench/tp.sh [--nproc 2] [--steps 5] [--warmup 2] [-B 4] [-T 256] [--preset gpt2-124M]
#               [--threads 1] [--build DIR]
#
# The formulas, per rank and step (fp32, P parameters, N ranks): ddp all-reduce 2P(N-1)/N x 4
# bytes; zero3 3P(N-1)/N x 4; tp N (N = 2): (2 + 4L) all-reduces of (B,T,C) fp32 = (2 + 4L)·4BTC,
# the loss's gathers 20BT, the norm 8 (docs/parallelism.md). tp reads B x T tokens per step where
# the data-parallel runs read N x B x T: compare tok/s, not step time.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
nproc=2 steps=5 warmup=2 B=4 T=256 preset=gpt2-124M threads=1 build="$root/build"
while [ $# -gt 0 ]; do
  case "$1" in
    --nproc) nproc="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --warmup) warmup="$2"; shift 2 ;;
    -B) B="$2"; shift 2 ;;
    -T) T="$2"; shift 2 ;;
    --preset) preset="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --build) build="$(realpath -m "$2")"; shift 2 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "tp.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
done
Z="$build/zerotrain"
[ -x "$Z" ] || { echo "tp.sh: $Z missing: build first" >&2; exit 1; }
export OMP_NUM_THREADS="$threads" OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
echo "bench/tp.sh: $preset B=$B T=$T, $nproc ranks x $threads thread(s), $steps steps after $warmup warm-up;" \
     "cpu family $(grep -m1 'cpu family' /proc/cpuinfo | cut -d: -f2 | tr -d ' '), OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}"
common=(bench --preset "$preset" -B "$B" -T "$T" --steps "$steps" --warmup "$warmup" --nproc "$nproc")
json=()
for run in ddp zero3 tp; do
  case "$run" in
    tp) args=(--strategy ddp --tp "$nproc") ;;
    *) args=(--strategy "$run") ;;
  esac
  busy0="$(awk '/^cpu /{print $2+$3+$4+$7+$8}' /proc/stat)"; t0="$(date +%s.%N)"
  out="$("$Z" "${common[@]}" "${args[@]}" 2>&1)" || { echo "tp.sh: $run failed:"; echo "$out" | tail -5; exit 1; }
  echo "$out" | grep -E "bytes sent per step|^zerotrain:" | sed "s/^/  [$run] /"
  json+=("$(tail -1 <<<"$out")")
done
python3 - "$preset" "$B" "$T" "$nproc" "${json[@]}" <<'PYEOF'
import json, sys
preset, B, T, N = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
runs = [json.loads(j) for j in sys.argv[5:]]
shapes = {"gpt2-124M": (12, 768, 124439808), "gpt2": (12, 768, 124439808), "tiny": (2, 64, 3324736)}
L, C, P = shapes.get(preset, (None, None, None))
print(f"\n| run | ranks (tp x dp) | step ms (median) | tok/s | dp MB sent/step | formula | tp MB sent/step | formula |")
print("| --- | --- | --- | --- | --- | --- | --- | --- |")
for r, name in zip(runs, ("ddp", "zero3", f"tp {N}")):
    tp = r.get("tp", 1)
    f_dp = f_tp = None
    if P:
        if name == "ddp": f_dp = 2 * P * (N - 1) / N * 4 / 1e6
        if name == "zero3": f_dp = 3 * P * (N - 1) / N * 4 / 1e6
        if tp == 2: f_dp, f_tp = 0.0, ((2 + 4 * L) * 4 * B * T * C + 20 * B * T + 8) / 1e6
    fmt = lambda x: "-" if x is None else f"{x:.3f}"
    print(f"| {name} | {tp} x {N // tp} | {r['step_ms_median']:.0f} | {r['tok_per_s_median']:.1f} | "
          f"{r['dp_sent_mb']:.3f} | {fmt(f_dp)} | {r['tp_sent_mb']:.3f} | {fmt(f_tp)} |")
PYEOF
