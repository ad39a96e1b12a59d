#!/usr/bin/env bash
# strategies.sh BUILD SOURCE - the distributed engine's determinism and traffic, under mpirun:
#  1. for N = 1, 2, 4 ranks (4 oversubscribed on 2 cores): ddp, zero1, zero2, zero3 and hybrid
#     give bit-identical losses and final parameters after 20 steps of a small GPT-2;
#  2. 1 rank x 4 micro-batches, 2 x 2 and 4 x 1 give bit-identical parameters too (every strategy,
#     zero2/zero3 deferring the reduction: the no_sync order);
#  3. every step's bytes sent per collective kind equal the formulas (checked inside the tool);
#  4. zero3 with reshard_after_forward false and small buckets change nothing but traffic.
# Each rank runs one OpenMP thread, so the kernels see the same thread count everywhere.
set -euo pipefail
BUILD="$1"
TOOL="$BUILD/tests/tool_dist_check"
export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ZT_COMM_TIMEOUT=120
STEPS=20
# the runs on N ranks go to one MPI job per N (tests/tool_serve.bash); one that job cannot take
# runs alone
source "$(dirname "${BASH_SOURCE[0]}")/tool_serve.bash"
for n in 1 2 4; do serve_start "n$n" mpirun -np "$n" --oversubscribe --bind-to none -x OMP_NUM_THREADS -x ZT_COMM_TIMEOUT "$TOOL"; done
run() { # N args...
  local n="$1" rc=0; shift
  serve_run "n$n" "$@" || rc=$?
  [ $rc = 99 ] || return $rc
  mpirun -np "$n" --oversubscribe --bind-to none -x OMP_NUM_THREADS -x ZT_COMM_TIMEOUT "$TOOL" "$@" 2>&1
}
trap serve_stop EXIT
SRC="$2"
# hash_of, losses_of, fail, check LABEL KEY OUTPUT
source "$SRC/tests/dist_check.bash"

declare -A made # "N strategy" -> the output of that run (the GA=1 rows below reuse N=4's: not made twice)
for n in 1 2 4; do
  for s in ddp zero1 zero2 zero3; do
    made["$n $s"]="$(run $n $s 1 $STEPS)" || true # (check reports a failed run)
    check "N=$n $s" "n$n" "${made[$n $s]}"
  done
  if [ $n -ge 2 ]; then
    made["$n hybrid"]="$(run $n hybrid 1 $STEPS --hybrid 2)" || true
    check "N=$n hybrid (zero3 in groups of 2)" "n$n" "${made[$n hybrid]}"
  fi
  check "N=$n zero3 keep_params_after_forward, 1 MB buckets" "n$n" "$(run $n zero3 1 $STEPS --keep --bucket-mb 1)"
done

# accumulation: 1 x GA4 = 2 x GA2 = 4 x GA1, for every strategy
for s in ddp zero1 zero2 zero3; do
  check "N=1 GA=4 $s" ga "$(run 1 $s 4 $STEPS)"
  check "N=2 GA=2 $s" ga "$(run 2 $s 2 $STEPS)"
  check "N=4 GA=1 $s" ga "${made[4 $s]}" # run 4 $s 1 $STEPS, made above
done
check "N=4 GA=1 hybrid" ga "${made[4 hybrid]}" # run 4 hybrid 1 $STEPS --hybrid 2, made above
check "N=4 GA=2 hybrid / N=2 GA=4 zero3" ga2 "$(run 4 hybrid 2 $STEPS --hybrid 2)"
check "N=2 GA=4 zero3" ga2 "$(run 2 zero3 4 $STEPS)"

# the communication thread changes timing, never bits: the inline reductions give the same hash
check "N=4 zero3, reductions inline (ZT_OVERLAP_COMM=0)" n4 "$(ZT_OVERLAP_COMM=0 mpirun -np 4 --oversubscribe --bind-to none -x OMP_NUM_THREADS -x ZT_OVERLAP_COMM "$TOOL" zero3 1 $STEPS 2>&1)"

# reduce_every_micro_batch: a different (still deterministic) order when GA > 1
a="$(run 2 zero3 2 $STEPS --reduce-every)"; b="$(run 2 zero3 2 $STEPS --reduce-every)"
if [ -n "$(hash_of "$a")" ] && [ "$(hash_of "$a")" = "$(hash_of "$b")" ]; then
  echo "ok   zero3 reduce_every_micro_batch is deterministic: $(hash_of "$a")"
else
  echo "FAIL zero3 reduce_every_micro_batch differs between two runs"; fail=1
fi
# a rank that stops answering: the others fail with a peer error naming it, within the deadline
start=$(date +%s)
set +e
out="$(ZT_COMM_TIMEOUT=3 timeout 60 mpirun -np 2 --oversubscribe --bind-to none -x OMP_NUM_THREADS \
       -x ZT_COMM_TIMEOUT "$TOOL" zero3 1 5 --stall-rank 1 2>&1)"
rc=$?
set -e
took=$(( $(date +%s) - start ))
if [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $took -lt 45 ] && grep -q "rank 1" <<<"$out"; then
  echo "ok   a stalled rank is reported within the deadline ($took s): $(grep -m1 -o 'rank 0:.*' <<<"$out" | cut -c1-160)"
else
  echo "FAIL stalled rank: rc $rc after $took s"; echo "$out" | tail -5; fail=1
fi
exit $fail
