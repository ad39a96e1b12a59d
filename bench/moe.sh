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
# >= 85%) on the same threads. --pairs P runs the two models P times, alternating (the machine's
# load moves between runs), and reports each one's medians and the median of the pairs' ratios;
# --base ZT also runs the MoE on another zerotrain binary in each pair (a before/after in one run).
# --precision bf16 (or fp16, bf16-low) runs both models in that mode (the grouped products' fp32
# bench is then skipped): with an fp32 run beside it, the MoE's bf16 speed-up against the dense model's.
#
#   bench/moe.sh [--build DIR] [--steps N (3)] [--warmup W (1)] [-B 4] [-T 256] [--pairs P (1)]
#                [--base ZEROTRAIN] [--no-grouped] [--precision fp32]
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
build="$root/build" steps=3 warmup=1 B=4 T=256 pairs=1 base="" grouped=1 precision=fp32
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build="$(realpath -m "$2")"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --warmup) warmup="$2"; shift 2 ;;
    -B) B="$2"; shift 2 ;;
    -T) T="$2"; shift 2 ;;
    --pairs) pairs="$2"; shift 2 ;;
    --base) base="$(realpath -m "$2")"; shift 2 ;;
    --no-grouped) grouped=0; shift ;;
    --precision) precision="$2"; shift 2 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "moe.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
done
zt="$build/zerotrain"
[ -x "$zt" ] || { echo "moe.sh: build first (cmake --build $build)" >&2; exit 1; }
export OMP_NUM_THREADS=2
"$zt" version | sed -n 's/^ *\(cpu\|kernels\|gemm\) */  \1: /p' | head -3
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
if [ $grouped = 1 ] && [ "$precision" = fp32 ] && [ -x "$build/bench/grouped_gemm" ]; then
  "$build/bench/grouped_gemm" --reps 9 --warmup 2 | sed -n '/^| routing | rows/,/^$/p'
fi
echo "llama-124M (dense) vs llama-124M-moe (8 experts x 1024, top-2), $precision, B=$B T=$T, $steps timed steps after $warmup warm-up, 2 threads, $pairs pair(s)"
field() { python3 -c 'import json,sys
for l in reversed(sys.stdin.read().splitlines()):
    if l.startswith("{"):
        print(json.loads(l).get(sys.argv[1], "")); break' "$1"; }
runs=()
for ((i = 1; i <= pairs; i++)); do
  for p in llama-124M llama-124M-moe ${base:+base}; do
    bin="$zt" preset="$p"
    [ "$p" = base ] && bin="$base" preset=llama-124M-moe
    out="$("$bin" bench --preset "$preset" -B "$B" -T "$T" --steps "$steps" --warmup "$warmup" --precision "$precision" 2>&1)" ||
      { echo "$p: bench failed"; echo "$out" | tail -3; exit 1; }
    tps="$(field tok_per_s_median <<<"$out")" cps="$(field tok_per_cpu_s <<<"$out")"
    load="$(cut -d' ' -f1 /proc/loadavg)"
    printf '  pair %d %-16s %8.1f tok/s (wall)  %8.1f tok per CPU-second  GEMMs %s ms  load %s\n' "$i" "$p" "$tps" "$cps" \
      "$(field gemm_ms <<<"$out")" "$load"
    runs+=("$i $p $tps $cps $load")
  done
done
printf '%s\n' "${runs[@]}" | python3 -c '
import json, statistics as st, sys
r = {}
for l in sys.stdin:
    i, p, t, c, ld = l.split()
    r.setdefault(p, []).append((float(t), float(c), float(ld)))
med = lambda xs: st.median(xs)
d, m = r["llama-124M"], r["llama-124M-moe"]
rw, rc = [b[0] / a[0] for a, b in zip(d, m)], [b[1] / a[1] for a, b in zip(d, m)]
res = {"bench": "moe", "precision": sys.argv[1], "pairs": len(d), "dense_tok_per_s": med([x[0] for x in d]), "moe_tok_per_s": med([x[0] for x in m]),
       "ratio_wall": round(med(rw), 3), "dense_tok_per_cpu_s": med([x[1] for x in d]),
       "moe_tok_per_cpu_s": med([x[1] for x in m]), "ratio_cpu": round(med(rc), 3), "load_median": med([x[2] for x in d + m])}
print("  MoE / dense, median of %d pairs: %.2fx tok/s (wall), %.2fx tok per CPU-second (goal >= 0.8)" % (len(d), res["ratio_wall"], res["ratio_cpu"]))
if "base" in r:
    b = r["base"]
    res["base_ratio_wall"] = round(med([y[0] / a[0] for a, y in zip(d, b)]), 3)
    res["base_ratio_cpu"] = round(med([y[1] / a[1] for a, y in zip(d, b)]), 3)
    print("  --base MoE / dense: %.2fx (wall), %.2fx per CPU-second" % (res["base_ratio_wall"], res["base_ratio_cpu"]))
print(json.dumps(res))' "$precision"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
