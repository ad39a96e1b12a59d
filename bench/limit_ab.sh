#!/usr/bin/env bash
# limit_ab.sh - two zerotrain builds' W1 against the GEMM-bound limit measured in the same round:
# per round, build/bench/gemm_compare's "limit bf16" / "limit fp32" lines (each product the faster
# of oneDNN's plain call and the trainer's own zt_gemm_*), then `zerotrain bench` W1 (GPT-2 124M,
# B=4, T=256) of the old build and of the new one, bf16 then fp32, each as a percentage of that
# round's limit, the new build's own matrix-product time beside the limit's, and the vCPUs'
# placement (build/bench/vcpu_placement: one die or across the dies) before, between and after.
# The limit and the step both move with the placement and with the host's load: compare within a
# round.
#
#   bench/limit_ab.sh OLD_ZEROTRAIN NEW_ZEROTRAIN [ROUNDS (4)] [STEPS (5)]
#   e.g. bench/limit_ab.sh /tmp/zt-main/build/zerotrain build/zerotrain 4
set -euo pipefail
[ $# -ge 2 ] || { sed -n '2,12p' "$0"; exit 1; }
old="$1" new="$2" rounds="${3:-4}" steps="${4:-5}"
cd "$(dirname "$0")/.."
[ -x build/bench/gemm_compare ] && [ -x build/bench/vcpu_placement ] || { echo "limit_ab.sh: build first (cmake --build build)" >&2; exit 1; }
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-2}"
echo "# $(grep -m1 'cpu family' /proc/cpuinfo | tr -s '\t ' ' '), OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE-unset}, $(date -u +%FT%H:%MZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
place() { build/bench/vcpu_placement | grep -o '[0-9]* ns' || echo "? ns"; }
run() { "$1" bench --preset gpt2-124M -B 4 -T 256 --steps "$steps" --warmup 1 --precision "$2" 2>&1 | tail -1; }
for r in $(seq 1 "$rounds"); do
  p0=$(place)
  g=$(build/bench/gemm_compare --passes 2 --reps 2 2>&1)
  l16=$(echo "$g" | grep "limit bf16" | grep -o "at most [0-9]*" | grep -o "[0-9]*")
  l32=$(echo "$g" | grep "limit fp32" | grep -o "at most [0-9]*" | grep -o "[0-9]*")
  med=$(echo "$g" | grep -A1 "at their median call" | tail -1)  # "fp32 X ms (+a%), bf16 Y ms (+b%)"
  p1=$(place); a16=$(run "$old" bf16); b16=$(run "$new" bf16)
  p2=$(place); a32=$(run "$old" fp32); b32=$(run "$new" fp32)
  p3=$(place)
  /usr/bin/python3 - "$l16" "$l32" "$a16" "$b16" "$a32" "$b32" "$p0 $p1 $p2 $p3" "$med" <<'PY'
import json, sys, time
l16, l32 = float(sys.argv[1]), float(sys.argv[2])
a16, b16, a32, b32 = (json.loads(x) for x in sys.argv[3:7])
def pct(d, l): return f"{d['tok_per_s_median']:.1f} tok/s = {100 * d['tok_per_s_median'] / l:.1f}%"
def gemm(d, l): return f"products {d['gemm_ms']:.0f} ms vs the limit's {1024e3 / l:.0f}" if 'gemm_ms' in d else "products: not printed by this build"
print(f"{time.strftime('%H:%M:%S')} [{sys.argv[7]}] limits bf16 {l16:.0f} fp32 {l32:.0f} tok/s | bf16 old {pct(a16, l16)}, new {pct(b16, l16)} ({gemm(b16, l16)})"
      f" | fp32 old {pct(a32, l32)}, new {pct(b32, l32)} ({gemm(b32, l32)}) | the limit's products at their median call: {sys.argv[8].strip()}")
PY
done
