#!/usr/bin/env bash
# context_parallel.sh - long sequences with and without context parallelism (docs/parallelism.md):
# llama-124M (its context lengthened to the largest T; rope, so no position table grows) at B=1 x T
# for T in a list, full activation checkpointing and the loss in chunks (what long sequences need
# on this machine), as one process on every core (cp 1) and as cp 2 over 2 ranks of 1 thread each
# in each mode (allgather, ring, ulysses), one run after the other, never at the same time.
#
#   bench/context_parallel.sh [--T "4096 8192 16384"] [--modes "allgather ring ulysses"] [--steps 2]
#                             [--warmup 1] [--cores 2] [--loss-chunk 2048] [--build DIR]
#                             [--out FILE.jsonl] [--skip-cp1-above T]
#
# Per run `zerotrain bench` prints the CPU, its ISA level and the GEMM path, and a JSON line; the
# table gives the job's tokens/s (the whole sequence's tokens over the step's wall time), tokens/s
# per rank, the step's CPU time per thread, the memory plan's peak against the measured peak of
# rank 0 (planned = measured is the claim), and the process's peak RSS. --skip-cp1-above T leaves
# one process out above T (its step time grows as T^2; estimate-memory still plans its memory).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
Ts="4096 8192 16384" modes="allgather ring ulysses" steps=2 warmup=1 cores=2 losschunk=2048
build="$root/build" out="" skip=0
while [ $# -gt 0 ]; do
  case "$1" in
    --T) Ts="$2"; shift 2 ;;
    --modes) modes="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --warmup) warmup="$2"; shift 2 ;;
    --cores) cores="$2"; shift 2 ;;
    --loss-chunk) losschunk="$2"; shift 2 ;;
    --build) build="$(realpath -m "$2")"; shift 2 ;;
    --out) out="$(realpath -m "$2")"; shift 2 ;;
    --skip-cp1-above) skip="$2"; shift 2 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "context_parallel.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
done
[ -x "$build/zerotrain" ] || { echo "context_parallel.sh: no zerotrain at $build" >&2; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
maxT=0; for t in $Ts; do [ "$t" -gt "$maxT" ] && maxT=$t; done
[ -n "$out" ] && : > "$out"
rows=()
run() { # label T nproc threads extra-args...
  local label="$1" T="$2" n="$3" th="$4"; shift 4
  local cmd=("$build/zerotrain" bench --preset llama-124M -B 1 -T "$T" --max-seq-len "$maxT" --steps "$steps"
             --warmup "$warmup" --recompute full --loss-chunk "$losschunk" --nproc "$n" "$@")
  echo "=== $label T=$T: OMP_NUM_THREADS=$th ${cmd[*]}"
  local o; o="$(OMP_NUM_THREADS=$th "${cmd[@]}" 2>&1)" || { echo "$o" | tail -3; rows+=("| $T | $label | failed | | | | |"); return; }
  grep -E '^cpu |^zerotrain:|memory: planned' <<<"$o" | sed 's/^/  /'
  local j; j="$(grep '^{' <<<"$o" | tail -1)"
  [ -n "$out" ] && echo "$j" | python3 -c "import json,sys; d=json.loads(sys.stdin.read()); d['label']='$label'; print(json.dumps(d))" >> "$out"
  rows+=("$(python3 -c "
import json,sys
d=json.loads(sys.argv[1]); n=d['ranks']
print(f\"| {d['T']} | $label | {d['tok_per_s_median']:.1f} | {d['tok_per_s_median']/n:.1f} | {d['step_ms_median']/1e3:.1f} / {d['cpu_step_ms_median']/1e3:.1f} | \"
      f\"{d['planned_peak_bytes']/2**20:.0f} / {d['measured_peak_bytes']/2**20:.0f} | {d['max_rss_bytes']/2**20:.0f} |\")" "$j")")
}
for T in $Ts; do
  if [ "$skip" -eq 0 ] || [ "$T" -le "$skip" ]; then run "cp 1 ($cores threads)" "$T" 1 "$cores"; fi
  for m in $modes; do run "cp 2 $m" "$T" 2 $((cores / 2 > 0 ? cores / 2 : 1)) --cp 2 --cp-mode "$m"; done
done
echo
echo "| T | run | tokens/s (job) | tokens/s per rank | step s wall / CPU per thread | planned / measured peak MiB (rank 0) | peak RSS MiB |"
echo "| --- | --- | --- | --- | --- | --- | --- |"
printf '%s\n' "${rows[@]}"
