#!/usr/bin/env bash
# ab_phase.sh - two zerotrain builds A/B on one phase of the step, interleaved: per round,
# `zerotrain bench` of the old binary and of the new one back to back (the order alternates between
# rounds) under `perf record -e cpu-clock -F 999`, and the samples of the functions whose names
# match a regular expression (one sample = about 1 ms of one thread's CPU time, whatever else
# runs on the machine), with the bench's CPU-time and "optimizer + rest" lines. Passive OpenMP
# waits, so that threads at a barrier sleep instead of being sampled.
#
#   bench/ab_phase.sh OLD_ZEROTRAIN NEW_ZEROTRAIN ROUNDS REGEX [bench arguments...]
#   e.g. bench/ab_phase.sh /tmp/zt-main build/zerotrain 2 'adamw|sum_squares|memset|f32_to_bf16_range'
#
# Default bench arguments: --preset gpt2-124M -B 4 -T 256 --steps 6 --warmup 1 --precision bf16
# (7 steps sampled: divide by 7 for a step). Needs perf (linux-perf) and perf_event_paranoid <= 2.
set -euo pipefail
[ $# -ge 4 ] || { sed -n '2,14p' "$0"; exit 1; }
old="$1" new="$2" rounds="$3" regex="$4"; shift 4
[ $# -gt 0 ] || set -- --preset gpt2-124M -B 4 -T 256 --steps 6 --warmup 1 --precision bf16
command -v perf >/dev/null || { echo "ab_phase.sh: perf not found (Debian: linux-perf)" >&2; exit 1; }
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-2}" OMP_WAIT_POLICY=passive
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
echo "# $(grep -m1 'cpu family' /proc/cpuinfo | tr -s '\t ' ' '), OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE-unset}, OMP_NUM_THREADS=$OMP_NUM_THREADS, $(date -u +%FT%H:%MZ), bench $*"
for r in $(seq 1 "$rounds"); do
  if [ $((r % 2)) = 1 ]; then order="old new"; else order="new old"; fi
  for which in $order; do
    bin="$old"; [ "$which" = new ] && bin="$new"
    load="$(cut -d' ' -f1 /proc/loadavg)"
    perf record -q -e cpu-clock -F 999 -o "$tmp/perf.data" "$bin" bench "$@" > "$tmp/out.txt" 2>&1
    syms="$(perf report -i "$tmp/perf.data" -n --sort symbol --stdio 2>/dev/null |
            awk -v re="$regex" '$1 ~ /%$/ && $4 ~ re { printf "%s=%s ", $4, $2; s += $2 } END { printf "| sum %d", s }')"
    cpu="$(grep -m1 'cpu:' "$tmp/out.txt" | sed 's/ per step.*wall / (wall /; s/ ms):.*/ ms)/; s/^ *//')"
    rest="$(grep -m1 'optimizer + rest' "$tmp/out.txt" | sed 's/.*optimizer + rest \([0-9.]*\) ms.*/\1/')"
    echo "round $r $which: $cpu; optimizer + rest $rest ms (wall); samples: $syms (load average $load)"
  done
done
