#!/usr/bin/env bash
# precision.sh - W1 (GPT-2 124M, B=4, T=256, 2 threads) in fp32 and in bf16 mixed precision, zerotrain
# beside PyTorch 1.13 (fp32, and bf16 under torch.autocast('cpu')), in one command: the four runs
# alternate per round (never two at once), then a table with the issue's two ratios:
#   zerotrain bf16 / PyTorch bf16 autocast (goal >= 2x) and zerotrain bf16 / zerotrain fp32 (goal
#   >= 4x on AMX), and zerotrain bf16's achieved GFLOP/s against the bf16 peak of this CPU.
#
#   bench/precision.sh [--steps N] [--warmup W] [--rounds R] [--threads P] [--skip-build] [--build DIR]
#
# It runs bench/w1.sh twice per round (--zt-args "--precision bf16" --torch-dtype bf16, and the
# fp32 pair) and reads their final JSON lines. Environment as w1.sh (OPENBLAS_CORETYPE left as is).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
args=() rounds=1
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --skip-build) args+=("$1"); shift ;;
    --steps|--warmup|--threads|--build) args+=("$1" "$2"); shift 2 ;;
    *) echo "precision.sh: unknown option $1" >&2; exit 1 ;;
  esac
done
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
for r in $(seq 1 "$rounds"); do
  echo "=== round $r/$rounds: bf16" >&2
  bash "$here/w1.sh" "${args[@]}" --zt-args "--precision bf16" --torch-dtype bf16 | tee -a "$tmp/log" | tail -1 >> "$tmp/bf16.json"
  echo "=== round $r/$rounds: fp32" >&2
  bash "$here/w1.sh" "${args[@]}" --torch-dtype fp32 | tee -a "$tmp/log" | tail -1 >> "$tmp/fp32.json"
done
/usr/bin/python3 - "$tmp" <<'PY'
import json, statistics, sys
d = sys.argv[1]
def load(n): return [json.loads(l) for l in open(f"{d}/{n}.json") if l.startswith("{")]
b, f = load("bf16"), load("fp32")
def med(rs, k): 
    v = [r[k] for r in rs if isinstance(r.get(k), (int, float))]
    return statistics.median(v) if v else float("nan")
zb, pb = med(b, "zerotrain_tok_per_s"), med(b, "pytorch_tok_per_s")
zf, pf = med(f, "zerotrain_tok_per_s"), med(f, "pytorch_tok_per_s")
zrun = [x for r in b for x in r["zerotrain"]]
gf, peak = med(zrun, "gflops"), med(zrun, "bf16_peak_gflops")
print("\n| run | tok/s (median) |\n| --- | --- |")
for name, v in (("zerotrain fp32", zf), ("zerotrain bf16 mixed", zb), ("PyTorch fp32", pf), ("PyTorch bf16 autocast", pb)):
    print(f"| {name} | {v:.1f} |")
print(f"\nzerotrain bf16 / PyTorch bf16 autocast: {zb / pb:.2f}x (goal >= 2x)")
print(f"zerotrain bf16 / zerotrain fp32:        {zb / zf:.2f}x (goal >= 4x, set for AMX)")
print(f"zerotrain fp32 / PyTorch fp32:          {zf / pf:.2f}x")
print(f"zerotrain bf16: {gf:.0f} GFLOP/s = {100 * gf / peak:.1f}% of the measured bf16 peak {peak:.0f} GFLOP/s")
print(json.dumps({"workload": "W1-precision", "zt_fp32": zf, "zt_bf16": zb, "torch_fp32": pf, "torch_bf16": pb,
                  "bf16_vs_torch_bf16": round(zb / pb, 3), "bf16_vs_fp32": round(zb / zf, 3),
                  "zt_bf16_gflops": gf, "bf16_peak_gflops": peak, "rounds": len(b)}))
PY
