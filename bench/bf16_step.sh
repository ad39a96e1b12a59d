#!/usr/bin/env bash
# bf16_step.sh - the bf16 mixed step against the fp32 step on one instruction-set level, in
# alternating pairs (issue: "the bf16 step never slower than the fp32 step on any CPU"). W1
# (GPT-2 124M, B=4, T=256, 2 threads): each pair runs `zerotrain bench` in fp32 and in bf16 back
# to back, the order swapped every pair so that a drift of the host's speed falls on both sides
# alike; per pair the bf16 / fp32 ratio of the median step (wall) and of the step's process CPU
# time, and the products' share (gemm_ms); then the median ratio over the pairs. A shared host's
# speed drifts by several percent within minutes: only the pairs' ratios mean anything, and their
# median over several pairs is the figure to quote.
#
#   bench/bf16_step.sh [--build DIR] [--level avx2 (ZT_ISA)] [--pairs N (5)] [--steps N (3)]
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
build="$here/../build" level=avx2 pairs=5 steps=3
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build="$(realpath -m "$2")"; shift 2 ;;
    --level) level="$2"; shift 2 ;;
    --pairs) pairs="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) echo "bf16_step.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
done
zt="$build/zerotrain"
[ -x "$zt" ] || { echo "bf16_step.sh: no $zt (build first)" >&2; exit 2; }
export ZT_ISA="$level" OMP_NUM_THREADS="${OMP_NUM_THREADS:-2}"
"$zt" version >/dev/null 2>&1 || { echo "bf16_step.sh: this CPU cannot run level $level" >&2; exit 2; }
echo "# $(date -u +%FT%H:%MZ), OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE-unset}, OMP_NUM_THREADS=$OMP_NUM_THREADS"
run() { # precision -> the bench's JSON line
  "$zt" bench --preset gpt2-124M -B 4 -T 256 --steps "$steps" --warmup 1 --precision "$1" 2>/dev/null | tail -1
}
ratios=()
for p in $(seq 1 "$pairs"); do
  if [ $((p % 2)) = 1 ]; then order="fp32 bf16"; else order="bf16 fp32"; fi
  declare -A js=()
  for prec in $order; do js[$prec]="$(run "$prec")"; done
  line="$(/usr/bin/python3 - "${js[fp32]}" "${js[bf16]}" "$p" "$order" <<'EOF'
import json, sys
f, b = json.loads(sys.argv[1]), json.loads(sys.argv[2])
if sys.argv[3] == "1":
    print("# cpu: %s | isa %s | gemm fp32 %s, bf16 %s" % (f["cpu"], f["isa_path"], f["gemm_fp32"], b["gemm_bf16"]))
w, c = b["step_ms_median"] / f["step_ms_median"], b["cpu_step_ms_median"] / f["cpu_step_ms_median"]
print("pair %s (%s): step fp32 %.1f / bf16 %.1f ms (bf16/fp32 %.3f), CPU %.1f / %.1f ms (%.3f), "
      "products %.1f / %.1f ms, rest %.1f / %.1f ms" %
      (sys.argv[3], sys.argv[4], f["step_ms_median"], b["step_ms_median"], w, f["cpu_step_ms_median"],
       b["cpu_step_ms_median"], c, f["gemm_ms"], b["gemm_ms"], f["step_ms_median"] - f["gemm_ms"],
       b["step_ms_median"] - b["gemm_ms"]))
print("RATIO %.4f" % w)
EOF
)" || { echo "bf16_step.sh: pair $p failed"; exit 1; }
  grep -v '^RATIO' <<<"$line"
  ratios+=("$(sed -n 's/^RATIO //p' <<<"$line")")
  unset js
done
/usr/bin/python3 -c 'import statistics, sys
r = sorted(float(x) for x in sys.argv[2:])
print("bf16 step / fp32 step on level %s over %d pairs: median %.3f (min %.3f, max %.3f)" %
      (sys.argv[1], len(r), statistics.median(r), r[0], r[-1]))' "$level" "${ratios[@]}"
