#!/usr/bin/env bash
# cp_overlap.sh - context parallelism at long T from the trace (docs/parallelism.md, issue 32):
# llama-124M (context lengthened to T; rope), B=1 x T, full activation checkpointing and the loss
# in chunks of 2048 tokens, trained for a few steps by `zerotrain train --trace` as
#   one process of one thread                      (the per-rank yardstick: OMP_NUM_THREADS=1)
#   cp 2 on 2 ranks of one thread, in each mode     (allgather, ring, ulysses; their exchanges
#                                                   pipelined over head groups, ring's shifts)
#   cp 2 with ZT_CP_HEAD_GROUPS=1 (allgather, ulysses: one exchange posted and waited before the
#                                                   attention, nothing to hide it behind)
# one run after the other, never at the same time. Per run: tokens/s of the job and per rank (the
# last step's, from the JSONL; the trace's figures from the last step too), against one process, the memory plan's peak against the measured
# peak of rank 0, the tokens per CPU-second of the whole run (every rank's user + system time: what
# the load does not change much), and from the trace (bench/cp_trace.py) the exposed communication's share of the
# step, the hidden share against the run without pipelining (1 - exposed / exposed at 1 group),
# and the spread of the two halves' attention time. The load average is printed with each run:
# the machine may be shared, so compare within a row group (the same T) only.
#
#   bench/cp_overlap.sh [--T "4096 8192"] [--modes "allgather ring ulysses"] [--steps 2]
#                       [--no-single] [--single-above-skip T] [--no-unpipelined] [--build DIR] [--keep DIR]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
Ts="4096 8192" modes="allgather ring ulysses" steps=2 build="$root/build" single=1 skip1=0 unpiped=1 keep=""
while [ $# -gt 0 ]; do
  case "$1" in
    --T) Ts="$2"; shift 2 ;;
    --modes) modes="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --no-single) single=0; shift ;;
    --single-above-skip) skip1="$2"; shift 2 ;;
    --no-unpipelined) unpiped=0; shift ;;
    --build) build="$(realpath -m "$2")"; shift 2 ;;
    --keep) keep="$(realpath -m "$2")"; shift 2 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "cp_overlap.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
done
Z="$build/zerotrain"
[ -x "$Z" ] || { echo "cp_overlap.sh: no zerotrain at $build" >&2; exit 2; }
[ -s "$root/data/kjv_train.bin" ] || bash "$root/scripts/prepare_corpus.sh" "$Z" >/dev/null # a fresh checkout
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
W="${keep:-$(mktemp -d)}"; mkdir -p "$W"
[ -n "$keep" ] || trap 'rm -rf "$W"' EXIT
"$Z" version | sed -n 's/^ *\(cpu\|kernels\|gemm\) */\1: /p' | head -3
rows=()
load() { cut -d' ' -f1 /proc/loadavg; }
run() { # label T nproc role(single|base|piped|ring) key env... -- args...
  local label="$1" T="$2" n="$3" role="$4" key="$5"; shift 5
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  local tag="${role}_${key}_$T" l0; l0="$(load)"
  local cmd=("$Z" train "$W/cfg$T.yaml" --set logging.jsonl="$W/$tag.jsonl" --trace "$W/$tag.json" "$@")
  [ "$n" -gt 1 ] && cmd+=(--nproc "$n")
  echo "=== $label T=$T (load $l0): ${envs[*]} ${cmd[*]}"
  local o rc=0; o="$(env "${envs[@]}" /usr/bin/time -f "%U %S" -o "$W/$tag.cpu" "${cmd[@]}" 2>&1)" || rc=$?
  local l1; l1="$(load)"
  if [ $rc -ne 0 ]; then echo "$o" | tail -4; rows+=("| $T | $label | failed (exit $rc) | | | | | | | $l0 - $l1 | |"); return; fi
  grep -E 'planned|^done' <<<"$o" | head -4 | sed 's/^/  /'
  python3 "$here/cp_trace.py" "$W/$tag.json" --skip-steps $((steps - 1)) | sed 's/^/  /' || true
  local tr; tr="$(python3 "$here/cp_trace.py" "$W/$tag.json" --skip-steps $((steps - 1)) --json || echo '{}')"
  # rank 0's total planned / measured MiB and its peak RSS (the memory report's row), and the check
  local mem; mem="$(python3 -c '
import re, sys
o = sys.stdin.read()
m = re.search(r"^\s+0\s+.*\|\s+([\d.]+)/([\d.]+)\s+\|\s+([\d.]+)", o, re.M)
ok = "every class of every rank reached exactly its planned high-water" in o
note = "" if ok else " (planned != measured)"
print(f"{m.group(1)} / {m.group(2)} (RSS {m.group(3)}){note}" if m else "-")' <<<"$o")"
  rows+=("$(python3 - "$W/$tag.jsonl" "$tr" "$label" "$T" "$n" "$l0 - $l1" "$W/single_$T.txt" "$W/exposed1_${key}_$T.txt" "$role" "$mem" "$W/$tag.cpu" "$steps" <<'PY'
import json, os, sys
jl, tr, label, T, n, loads, single, ex1, role, mem, cpu, steps = sys.argv[1:]
u, s_ = open(cpu).read().split()[-2:]
tok_cpu = int(steps) * int(T) / (float(u) + float(s_))  # the whole run's tokens per CPU-second, every rank's
d = [json.loads(l) for l in open(jl) if l.startswith('{"step"')][-1]
t = json.loads(tr).get('total', {'comm_exposed_s_per_rank': [float('nan')], 'attention_spread': float('nan'),
                                   'comm_exposed_share': float('nan')})
n = int(n)
per_rank = d['tok_per_s'] / n
if role == 'single':
    open(single, 'w').write(f"{per_rank} {tok_cpu}")
ref = [float(x) for x in open(single).read().split()] if os.path.exists(single) else None
vs = "1" if role == 'single' else (f"{per_rank / ref[0]:.2f}x" if ref else "-")
vs_cpu = "1" if role == 'single' else (f"{tok_cpu / ref[1]:.2f}x" if ref else "-")
exposed = max(t['comm_exposed_s_per_rank'])
if role == 'base':
    open(ex1, 'w').write(str(exposed))
hidden = "-"
if role == 'piped' and os.path.exists(ex1):
    e1 = float(open(ex1).read())
    hidden = f"{100 * (1 - exposed / e1):.0f}%" if e1 > 0 else "-"
spread = f"{100 * t['attention_spread']:.1f}%" if n > 1 else "-"
share = f"{100 * t['comm_exposed_share']:.2f}% ({exposed:.2f} s)" if n > 1 else "-"
print(f"| {T} | {label} | {d['tok_per_s']:.1f} | {per_rank:.1f} | {vs} | {tok_cpu:.1f} ({vs_cpu}) | {d['step_s']:.1f} | {share} | "
      f"{hidden} | {spread} | {loads} | {mem} |")
PY
)")
}
for T in $Ts; do
  cat > "$W/cfg$T.yaml" <<YEOF
model: {preset: llama-124M, vocab_size: 50257, max_seq_len: $T}
data: {train: $root/data/kjv_train.bin}
training: {micro_batch_size: 1, seq_len: $T, steps: $steps, lr: 1e-4}
memory: {activation_checkpointing: full, loss_chunk_tokens: 2048}
YEOF
  if [ $single = 1 ] && { [ "$skip1" -eq 0 ] || [ "$T" -le "$skip1" ]; }; then run "cp 1, 1 thread" "$T" 1 single one -- ; fi
  for m in $modes; do
    C=(--set parallel.context_parallel_size=2 --set parallel.context_parallel_mode=$m)
    if [ $unpiped = 1 ] && [ "$m" != ring ]; then run "cp 2 $m, ZT_CP_HEAD_GROUPS=1" "$T" 2 base $m ZT_CP_HEAD_GROUPS=1 -- "${C[@]}"; fi
    run "cp 2 $m" "$T" 2 $([ "$m" = ring ] && echo ring || echo piped) $m -- "${C[@]}"
  done
done
echo
echo "| T | run | tokens/s (job) | tokens/s per rank | per rank vs one process of 1 thread | tokens per CPU-second, whole run (vs one process) | step s (last) | exposed cp communication, share of the step (max over ranks) | hidden vs groups 1 | halves' attention spread | load average before - after | planned / measured MiB (rank 0) |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
printf '%s\n' "${rows[@]}"
