#!/usr/bin/env bash
# moe.sh - a small mixture of experts against the dense model with the same active parameters:
# llama-124M-moe (llama-124M's attention, 8 experts of width 1024, top-2: 2 x 3 x 1024 x 768 active
# MLP parameters per layer, the dense MLP's 3 x 2048 x 768, plus the router's 8 x 768) against
# llama-124M, fp32, B=4, T=256, one rank, 2 threads (`zerotrain bench`). Prints the CPU, the
# instruction-set level and the GEMM path, each model's tokens/s (wall: the median step; and per
# CPU-second of the step's own threads, what a shared machine still measures), and the ratios
# MoE / dense (goal >= 0.8). The MoE's step also gathers, combines and routes, and its experts'
# products are smaller (about N·k/E = 256 rows each) than the dense MLP's. First, the experts'
# grouped products against the GEMM-bound limit for their shapes (build/bench/grouped_gemm: one
# layer's nine products, each expert apart, against one dense product over the summed rows; goal
# >= 85%) on the same threads. --precision bf16 (or fp16, bf16-low) runs both models in that mode
# (the grouped products' fp32 bench is then skipped): with an fp32 run beside it, the MoE's bf16
# speed-up against the dense model's.
#
#   bench/moe.sh [--build DIR] [--steps N (3)] [--warmup W (1)] [-B 4] [-T 256] [--precision fp32]
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
build="$root/build" steps=3 warmup=1 B=4 T=256 precision=fp32
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build="$(realpath -m "$2")"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --warmup) warmup="$2"; shift 2 ;;
    -B) B="$2"; shift 2 ;;
    -T) T="$2"; shift 2 ;;
    --precision) precision="$2"; shift 2 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "moe.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
done
zt="$build/zerotrain"
[ -x "$zt" ] || { echo "moe.sh: build first (cmake --build $build)" >&2; exit 1; }
export OMP_NUM_THREADS=2
"$zt" version | sed -n 's/^ *\(cpu\|kernels\|gemm\) */  \1: /p' | head -3
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
if [ -x "$build/bench/grouped_gemm" ] && [ "$precision" = fp32 ]; then
  "$build/bench/grouped_gemm" --reps 9 --warmup 2 | sed -n '/^| routing | rows/,/^$/p'
fi
echo "llama-124M (dense) vs llama-124M-moe (8 experts x 1024, top-2), $precision, B=$B T=$T, $steps timed steps after $warmup warm-up, 2 threads"
field() { python3 -c 'import json,sys
for l in reversed(sys.stdin.read().splitlines()):
    if l.startswith("{"):
        print(json.loads(l).get(sys.argv[1], "")); break' "$1"; }
declare -A tps cps
for p in llama-124M llama-124M-moe; do
  out="$("$zt" bench --preset "$p" -B "$B" -T "$T" --steps "$steps" --warmup "$warmup" --precision "$precision" 2>&1)" ||
    { echo "$p: bench failed"; echo "$out" | tail -3; exit 1; }
  tps[$p]="$(field tok_per_s_median <<<"$out")"
  cps[$p]="$(field tok_per_cpu_s <<<"$out")"
  printf '  %-16s %8.1f tok/s (wall)  %8.1f tok per CPU-second  GEMMs %s ms of the step\n' "$p" "${tps[$p]}" "${cps[$p]}" \
    "$(field gemm_ms <<<"$out")"
done
python3 - "${tps[llama-124M]}" "${tps[llama-124M-moe]}" "${cps[llama-124M]}" "${cps[llama-124M-moe]}" "$precision" <<'PY'
import json, sys
d, m, dc, mc = map(float, sys.argv[1:5])
print(f"  MoE / dense: {m / d:.2f}x tok/s (wall), {mc / dc:.2f}x tok per CPU-second (goal >= 0.8)")
print(json.dumps({"bench": "moe", "precision": sys.argv[5], "dense_tok_per_s": d, "moe_tok_per_s": m, "ratio_wall": round(m / d, 3),
                  "dense_tok_per_cpu_s": dc, "moe_tok_per_cpu_s": mc, "ratio_cpu": round(mc / dc, 3)}))
PY
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
