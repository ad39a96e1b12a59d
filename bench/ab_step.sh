#!/usr/bin/env bash
# ab_step.sh - two zerotrain builds A/B on one machine, interleaved: per round and per workload,
# `zerotrain bench` of the old binary and of the new one back to back (the order alternates between
# rounds), each step's process CPU time per thread (cpu_step_ms_median, tok_per_cpu_s): on a
# machine shared with other work, the comparison the wall time cannot give. Passive OpenMP waits,
# so that threads at a barrier sleep instead of spinning into the CPU time.
#
#   bench/ab_step.sh OLD_ZEROTRAIN NEW_ZEROTRAIN ROUNDS PRESET:PRECISION...
#   e.g. bench/ab_step.sh /tmp/zt-main/zerotrain build/zerotrain 2 llama-124M:bf16 llama-124M:fp32
#
# W1's batch (B=4, T=256, 2 threads, 1 warm-up + 3 timed steps). One line per run; the first line
# names the CPU family and OPENBLAS_CORETYPE.
set -euo pipefail
[ $# -ge 4 ] || { sed -n '2,12p' "$0"; exit 1; }
old="$1" new="$2" rounds="$3"; shift 3
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-2}" OMP_WAIT_POLICY=passive
echo "# $(grep -m1 'cpu family' /proc/cpuinfo | tr -s '\t ' ' '), OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE-unset}, OMP_NUM_THREADS=$OMP_NUM_THREADS, $(date -u +%FT%H:%MZ)"
for r in $(seq 1 "$rounds"); do
  for cfg in "$@"; do
    preset="${cfg%:*}" prec="${cfg#*:}"
    if [ $((r % 2)) = 1 ]; then order="old new"; else order="new old"; fi
    for which in $order; do
      bin="$old"; [ "$which" = new ] && bin="$new"
      load="$(cut -d' ' -f1 /proc/loadavg)"
      json="$("$bin" bench --preset "$preset" -B 4 -T 256 --steps 3 --warmup 1 --precision "$prec" 2>/dev/null | tail -1)"
      /usr/bin/python3 -c 'import json, sys
d = json.loads(sys.argv[1])
c, t, w = d["cpu_step_ms_median"], d["tok_per_cpu_s"], d["tok_per_s_median"]
r, p, q, x, l = sys.argv[2:7]
print(f"round {r} {p} {q} {x}: cpu_step_ms {c:.1f} tok_per_cpu_s {t:.1f} wall tok/s {w:.1f} (load average {l})")' \
        "$json" "$r" "$preset" "$prec" "$which" "$load"
    done
  done
done
