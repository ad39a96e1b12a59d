#!/usr/bin/env bash
# precision_strategies.sh BUILD SOURCE - the precision contract holds whatever the strategy: in
# bf16 (mixed), bf16-low (with stochastic rounding) and fp16 (dynamic loss scaling), 12 steps of a
# small GPT-2 give bit-identical losses and final parameters for ddp, zero1, zero2, zero3 and
# hybrid (over zero3 and zero2) on 2 and 4 ranks, zero1 with buckets smaller than a parameter, and 1 x GA4 = 2 x GA2 = 4 x GA1 (deferred reduction). fp16 starts from
# a loss scale of 2^20, so its first steps overflow, are skipped on every rank and halve the
# scale: the skips must happen, and identically everywhere. One OpenMP thread per rank.
# Gradients reduced in bf16 (precision.reduce_dtype bf16; bf16, bf16-low and fp32 modes): ddp,
# zero1, zero2, zero3 and hybrid stay bit-identical on 2 and 4 ranks (hybrid's group sum is a
# subtree of the flat rank tree, and every partial sum is rounded to bf16 at either level), the
# inline reductions equal the communication thread's, and with accumulation (2 ranks x GA 2) the
# strategies agree too; the result differs from fp32 reduction. What cannot hold, and is checked
# to differ: 1 x GA4 vs 4 x GA1 (the micro-batch sum is fp32, the rank sum rounds to bf16).
# fp16 with gradients reduced in fp16 (DeepSpeed's default): the same five-way identity on 2 and 4
# ranks, overflowing steps skipped alike, and other parameters than fp16 reduced in fp32.
set -euo pipefail
BUILD="$1"
TOOL="$BUILD/tests/tool_dist_check"
export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ZT_COMM_TIMEOUT=120
STEPS=12
MPIRUN=(mpirun --oversubscribe --bind-to none -x OMP_NUM_THREADS -x ZT_COMM_TIMEOUT)
# the runs on N ranks go to one MPI job per N (tests/tool_serve.bash); one that job cannot take
# runs alone
source "$(dirname "${BASH_SOURCE[0]}")/tool_serve.bash"
trap serve_stop EXIT
for n in 1 2 4; do serve_start "n$n" "${MPIRUN[@]}" -np "$n" "$TOOL"; done
run() { # N args...
  local n="$1" rc=0; shift
  serve_run "n$n" "$@" || rc=$?
  [ $rc = 99 ] || return $rc
  "${MPIRUN[@]}" -np "$n" "$TOOL" "$@" 2>&1
}
fail=0
declare -A ref
check() { # label key output
  local label="$1" key="$2" out="$3"
  local h; h="$(grep '^hash' <<<"$out" | cut -d' ' -f2)"
  local l; l="$(grep '^losses' <<<"$out")"
  if [ -z "$h" ]; then echo "FAIL $label: no result"; echo "$out" | tail -5; fail=1; return; fi
  if [ -z "${ref[$key]:-}" ]; then ref[$key]="$h $l"; fi
  if [ "$h $l" != "${ref[$key]}" ]; then echo "FAIL $label: hash $h differs from the first run of $key"; fail=1
  else echo "ok   $label: $h"; fi
}
for mode in bf16 bf16-low fp16; do
  extra=(--precision "$mode")
  [ "$mode" = bf16-low ] && extra+=(--stochastic-rounding)
  [ "$mode" = fp16 ] && extra+=(--scale-power 20)
  for n in 2 4; do
    for s in ddp zero1 zero2 zero3; do
      out="$(run $n $s 1 $STEPS "${extra[@]}")" || true # (a failed run is reported by check)
      [ $n = 4 ] && [ $s = ddp ] && ddp4="$out" # also the 4 x GA1 run below (the same run)
      check "$mode N=$n $s" "$mode-n$n" "$out"
    done
    check "$mode N=$n hybrid (zero3 in groups of 2)" "$mode-n$n" "$(run $n hybrid 1 $STEPS --hybrid 2 "${extra[@]}")"
  done
  # zero2 inside the groups: under bf16/fp16 its fp32 master is sharded too (master_shard.c)
  check "$mode N=4 hybrid (zero2 in groups of 2)" "$mode-n4" "$(run 4 hybrid 1 $STEPS --hybrid 2 --inner-zero2 "${extra[@]}")"
  check "$mode N=2 zero1, 10 KB buckets" "$mode-n2" "$(run 2 zero1 1 $STEPS --bucket-mb 0.01 "${extra[@]}")"
  check "$mode N=1 GA=4 zero3" "$mode-ga" "$(run 1 zero3 4 $STEPS "${extra[@]}")"
  check "$mode N=2 GA=2 zero1" "$mode-ga" "$(run 2 zero1 2 $STEPS "${extra[@]}")"
  check "$mode N=4 GA=1 ddp" "$mode-ga" "$ddp4" # run 4 ddp 1 $STEPS "${extra[@]}", made above
done
# gradients reduced in bf16
for mode in bf16 bf16-low fp32; do
  extra=(--precision "$mode" --reduce bf16)
  [ "$mode" = bf16-low ] && extra+=(--stochastic-rounding)
  ns="2 4"; [ "$mode" = fp32 ] && ns=2
  for n in $ns; do
    for s in ddp zero1 zero2 zero3; do
      check "$mode reduce bf16 N=$n $s" "r-$mode-n$n" "$(run $n $s 1 $STEPS "${extra[@]}")"
    done
    check "$mode reduce bf16 N=$n hybrid (zero3 in groups of 2)" "r-$mode-n$n" "$(run $n hybrid 1 $STEPS --hybrid 2 "${extra[@]}")"
  done
done
for n in 2 4; do
  for s in ddp zero1 zero2 zero3; do
    check "fp16 reduce fp16 N=$n $s" "r-fp16-n$n" "$(run $n $s 1 $STEPS --precision fp16 --scale-power 20 --reduce fp16)"
  done
  check "fp16 reduce fp16 N=$n hybrid (zero3 in groups of 2)" "r-fp16-n$n" \
    "$(run $n hybrid 1 $STEPS --hybrid 2 --precision fp16 --scale-power 20 --reduce fp16)"
done
l16="${ref[r-fp16-n4]#* }"
skips16=$(grep -o 'skipped' <<<"$l16" | wc -l)
if [ "${ref[r-fp16-n4]%% *}" != "${ref[fp16-n4]%% *}" ] && [ "$skips16" -ge 1 ] && [ "$skips16" -lt "$STEPS" ]; then
  echo "ok   fp16 reduced in fp16: $skips16 of $STEPS steps skipped (the overflow reaches the finite check), other parameters than fp32 reduction"
else echo "FAIL fp16 reduced in fp16: $skips16 skips, or the same parameters as fp32 reduction"; fail=1; fi
check "bf16 reduce bf16 N=4 hybrid in groups of 1 (the whole sum across the replicas)" "r-bf16-n4" \
  "$(run 4 hybrid 1 $STEPS --hybrid 1 --precision bf16 --reduce bf16)"
check "bf16 reduce bf16 N=4 ddp, reductions inline" "r-bf16-n4" \
  "$(ZT_OVERLAP_COMM=0 mpirun -np 4 --oversubscribe --bind-to none -x OMP_NUM_THREADS -x ZT_COMM_TIMEOUT -x ZT_OVERLAP_COMM \
     "$TOOL" ddp 1 $STEPS --precision bf16 --reduce bf16 2>&1)"
for s in ddp zero1 zero2 zero3; do
  check "bf16 reduce bf16 N=2 GA=2 $s (deferred)" "r-bf16-ga2" "$(run 2 $s 2 $STEPS --precision bf16 --reduce bf16)"
done
check "bf16 reduce bf16 N=4 GA=2 hybrid (deferred)" "r-bf16-n4ga2" "$(run 4 hybrid 2 $STEPS --hybrid 2 --precision bf16 --reduce bf16)"
check "bf16 reduce bf16 N=4 GA=2 ddp (deferred)" "r-bf16-n4ga2" "$(run 4 ddp 2 $STEPS --precision bf16 --reduce bf16)"
# the option does something, and the rank sum rounds where the micro-batch sum does not
ga4="$(run 1 zero3 4 $STEPS --precision bf16 --reduce bf16 | grep '^hash' | cut -d' ' -f2)"
ga1="${ref[r-bf16-n4]%% *}" # the first run of r-bf16-n4 above: 4 ddp 1 $STEPS --precision bf16 --reduce bf16
if [ "${ref[r-bf16-n2]%% *}" != "${ref[bf16-n2]%% *}" ] && [ "${ref[r-bf16-low-n2]%% *}" != "${ref[bf16-low-n2]%% *}" ] &&
   [ -n "$ga4" ] && [ -n "$ga1" ] && [ "$ga4" != "$ga1" ]; then
  echo "ok   reduce bf16 ends elsewhere than reduce fp32 (bf16, bf16-low), and 1 x GA4 ($ga4) != 4 x GA1 ($ga1) as documented"
else echo "FAIL reduce bf16: the same parameters as fp32 reduction, or 1 x GA4 = 4 x GA1"; fail=1; fi
# fp16's skips happened (2^20 overflows fp16 gradients) and training went on after them
l="${ref[fp16-n2]#* }"
skips=$(grep -o 'skipped' <<<"$l" | wc -l)
if [ "$skips" -ge 1 ] && [ "$skips" -lt "$STEPS" ]; then echo "ok   fp16: $skips of $STEPS steps skipped at the start, then updates"
else echo "FAIL fp16: $skips of $STEPS steps skipped (want some, not all)"; fail=1; fi
# the modes differ from each other and from fp32 (the policy is really applied)
f32="$(run 2 zero3 1 $STEPS | grep '^hash' | cut -d' ' -f2)"
if [ "$f32" != "${ref[bf16-n2]%% *}" ] && [ "${ref[bf16-n2]%% *}" != "${ref[bf16-low-n2]%% *}" ] &&
   [ "${ref[fp16-n2]%% *}" != "$f32" ]; then echo "ok   fp32, bf16, bf16-low and fp16 end at different parameters"
else echo "FAIL a precision mode ended where another did: the policy was not applied"; fail=1; fi
exit $fail
