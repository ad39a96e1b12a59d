#!/usr/bin/env bash
# memory_plan.sh BUILD SOURCE - the memory plan is what the engine allocates, rank by rank:
#  1. for N = 1, 2, 4 ranks (4 oversubscribed) and ddp, zero1, zero2, zero3, hybrid, a few steps of
#     a small GPT-2: every rank's measured high-water per class (and of the total) is within 3% of
#     the plan the engine made at creation, which equals the plan computed from the options alone
#     (as `zerotrain estimate-memory` does); the tool also checks the bytes held at rest, and that
#     the plan's shared segments are the regions the comms hold (src/comm/shm.c);
#  2. the same under accumulation (deferred and reduce-every-micro-batch), keep_params_after_forward,
#     no prefetch, small buckets, hybrid over zero2, bf16/fp16 compute copies, bf16-low's 2-byte
#     parameters (bf16 all-gathers, fp32 views) in every strategy, activation checkpointing full
#     and selective;
#  3. zero1/zero2 under bf16/fp16 hold their fp32 master as pieces: at rest 16 bytes per owned
#     element (master, reduced gradient, m, v) plus the replicated compute copy (2 bytes bf16, 4
#     fp16) of every parameter and 4 of each parameter read as fp32, i.e. 2 + 16/N bytes per
#     parameter plus the layernorm weights and biases for bf16 (DeepSpeed: 2 + 2 + 12/N);
#     zero3 with fp32 AdamW holds 16 bytes per owned element at rest, 16·Ψ/N within 1% on the tiny
#     preset (its shards are even to 0.1%), and the ranks' pieces add up to Ψ; bf16-low holds 6
#     (bf16 parameter, m, v; no gradient between steps) plus three fp32 update chunks.
#  3b. the attention kernels: flash (the default, every run above) and naive (its (B,NH,T,T)
#     probabilities) under none, selective and full checkpointing, fp32 and bf16; flash at T=128
#     on the tiny preset (its O(T) scratch and lse);
#  4. gradients reduced in bf16 or fp16 (precision.reduce_dtype): the gradient buckets' staging and the
#     reduce-scatter scratch hold 2-byte elements; every strategy, the communication thread and
#     inline, hybrid's replica all-reduce, accumulation: planned == measured to the byte.
# tests/tool_memory_check.c does the checks; this script runs the matrix.
set -euo pipefail
BUILD="$1"
TOOL="$BUILD/tests/tool_memory_check"
export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ZT_COMM_TIMEOUT=120
fail=0
# the runs on N ranks go to one MPI job per N (tests/tool_serve.bash); one that job cannot take
# (ZT_OVERLAP_COMM=0 run ...: another environment) runs alone
source "$(dirname "${BASH_SOURCE[0]}")/tool_serve.bash"
trap serve_stop EXIT
for n in 1 2 4; do serve_start "n$n" mpirun -np "$n" --oversubscribe --bind-to none -x OMP_NUM_THREADS -x ZT_COMM_TIMEOUT "$TOOL"; done
run() { # label N args...
  local label="$1" n="$2"; shift 2
  local out rc=0
  out="$(serve_run "n$n" "$@")" || rc=$?
  if [ $rc = 99 ]; then
    rc=0
    out="$(mpirun -np "$n" --oversubscribe --bind-to none -x OMP_NUM_THREADS -x ZT_COMM_TIMEOUT \
           ${ZT_OVERLAP_COMM:+-x ZT_OVERLAP_COMM} "$TOOL" "$@" 2>&1)" || rc=$?
  fi
  local exact; exact="$(grep -o '^[0-9]* of [0-9]* (class, rank) high-waters exact' <<<"$out" || true)"
  local whole=1 # RUN_EXACT=1: every high-water to the byte
  if [ "${RUN_EXACT:-0}" = 1 ] && ! grep -q '^\([0-9]*\) of \1 (class' <<<"$exact"; then whole=0; fi
  if [ $rc -ne 0 ] || [ -z "$exact" ] || [ $whole = 0 ]; then
    echo "FAIL $label (rc $rc)"; echo "$out"; fail=1 # all of it: a rank's reason can come before the tables
  else
    echo "ok   $label: $exact$(grep -m1 -o 'zero[123] [a-z0-9 -]*model states at rest.*' <<<"$out" | sed 's/^/; /' || true)"
  fi
}

for n in 1 2 4; do
  for s in ddp zero1 zero2 zero3; do run "N=$n $s" $n $s 1 2; done
  S=$(( n >= 4 ? 2 : 1 ))
  run "N=$n hybrid (zero3 in groups of $S)" $n hybrid 1 2 --hybrid $S
done
run "N=2 zero3 GA=2 deferred (no_sync)" 2 zero3 2 2
run "N=4 zero2 GA=2 reduce every micro-batch" 4 zero2 2 2 --reduce-every
run "N=2 zero1 GA=3 (tree of 2 + 1)" 2 zero1 3 2
run "N=4 zero3 keep_params_after_forward" 4 zero3 1 2 --keep
run "N=4 zero3 no prefetch, 10 KB buckets" 4 zero3 1 2 --no-prefetch --bucket-mb 0.01
run "N=4 hybrid over zero2, GA=2" 4 hybrid 2 2 --hybrid 2 --inner-zero2
run "N=2 zero3 bf16 (compute copies gathered)" 2 zero3 1 2 --precision bf16
# zero1/zero2 under bf16/fp16: fp32 master pieces, replicated compute copies (master_shard.c)
run "N=2 zero1 bf16 (master pieces, copies all-gathered)" 2 zero1 1 2 --precision bf16
run "N=4 zero2 bf16" 4 zero2 1 2 --precision bf16
run "N=2 zero1 bf16 GA=2, 10 KB buckets" 2 zero1 2 2 --precision bf16 --bucket-mb 0.01
run "N=1 zero2 bf16 (one shard: copies made locally)" 1 zero2 1 2 --precision bf16
run "N=4 hybrid over zero2 bf16" 4 hybrid 1 2 --hybrid 2 --inner-zero2 --precision bf16
run "N=2 zero2 fp16, activation checkpointing selective" 2 zero2 1 2 --precision fp16 --recompute selective
run "N=2 zero1 tiny preset bf16: 2 + 16/N bytes per parameter" 2 zero1 1 1 --preset tiny --B 1 --T 16 --precision bf16 --balanced
run "N=2 zero2 bf16-low" 2 zero2 1 2 --precision bf16-low
run "N=2 zero3 bf16-low (bf16 pieces gathered, fp32 views)" 2 zero3 1 2 --precision bf16-low
run "N=4 hybrid bf16-low, activation checkpointing full" 4 hybrid 1 2 --hybrid 2 --precision bf16-low --recompute full
run "N=1 ddp bf16-low selective, GA=2" 1 ddp 2 2 --precision bf16-low --recompute selective
run "N=2 zero1 bf16-low, 10 KB buckets" 2 zero1 1 2 --precision bf16-low --bucket-mb 0.01
run "N=2 zero3 bf16-low GA=2 deferred" 2 zero3 2 2 --precision bf16-low
run "N=4 zero1 bf16-low GA=2" 4 zero1 2 2 --precision bf16-low
run "N=2 zero3 tiny preset bf16-low: 6 bytes per owned element" 2 zero3 1 1 --preset tiny --B 1 --T 16 --precision bf16-low
run "N=2 ddp fp16 GA=2" 2 ddp 2 2 --precision fp16
run "N=2 zero3 activation checkpointing full" 2 zero3 1 2 --recompute full
run "N=4 zero2 activation checkpointing selective, GA=2" 4 zero2 2 2 --recompute selective
run "N=1 ddp selective, bf16" 1 ddp 1 2 --recompute selective --precision bf16
for n in 1 2 4; do
  run "N=$n zero3 tiny preset: 16·Ψ/N" $n zero3 1 1 --preset tiny --B 1 --T 16 --balanced
done
run "N=2 zero3 naive attention" 2 zero3 1 2 --attention naive
run "N=1 ddp naive attention, selective" 1 ddp 1 2 --attention naive --recompute selective
run "N=2 zero2 naive attention bf16, full" 2 zero2 1 2 --attention naive --precision bf16 --recompute full
run "N=2 zero1 naive attention bf16, selective" 2 zero1 1 2 --attention naive --precision bf16 --recompute selective
run "N=1 ddp flash attention tiny preset T=128 bf16" 1 ddp 1 2 --preset tiny --B 1 --T 128 --precision bf16
run "N=2 zero3 flash attention tiny preset T=128, selective" 2 zero3 1 2 --preset tiny --B 1 --T 128 --recompute selective
export RUN_EXACT=1
for s in ddp zero1 zero2 zero3; do run "N=2 $s bf16, reduce bf16" 2 $s 1 2 --precision bf16 --reduce bf16; done
run "N=4 hybrid (zero3 in groups of 2) bf16-low, reduce bf16" 4 hybrid 1 2 --hybrid 2 --precision bf16-low --reduce bf16
run "N=4 hybrid over zero2, GA=2, reduce bf16" 4 hybrid 2 2 --hybrid 2 --inner-zero2 --reduce bf16
run "N=2 zero3 GA=2 deferred, reduce bf16" 2 zero3 2 2 --reduce bf16 --precision bf16
run "N=4 zero2 GA=2 reduce every micro-batch, 10 KB buckets, reduce bf16" 4 zero2 2 2 --reduce-every --bucket-mb 0.01 --reduce bf16
run "N=1 ddp, reduce bf16" 1 ddp 1 2 --reduce bf16 --precision bf16
run "N=4 zero3 fp16, reduce fp16" 4 zero3 1 2 --precision fp16 --reduce fp16
run "N=2 ddp fp16 GA=2, reduce fp16" 2 ddp 2 2 --precision fp16 --reduce fp16
ZT_OVERLAP_COMM=0 run "N=2 ddp, reductions inline, reduce bf16" 2 ddp 1 2 --reduce bf16
ZT_OVERLAP_COMM=0 run "N=4 zero3, reductions inline, reduce bf16" 4 zero3 1 2 --reduce bf16
unset RUN_EXACT
exit $fail
