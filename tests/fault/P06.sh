# P06: a desync: rank 1 skips the step agreement (an all-gather) in step 5 and goes on to the next
# collective. With comm.check_collectives (the fingerprint debug mode) every collective first
# compares (sequence, operation, tag, bytes, step) across the ranks: the job stops within the
# deadline with exit 9 (the ranks disagree), the message showing both ranks' collective; the last
# commit validates; resume -> NL. With the check on and no fault the run equals R.
source "$(dirname "$0")/lib.bash"
fresh_reference
CHECK=(--set comm.check_collectives=true --set parallel.overlap_comm=false)
run_job C "${CHECK[@]}"
[ $RC = 0 ] && [ "$(hash_of "$T/C.out")" = "$(hash_of "$T/R.out")" ] && ok "the check on, no fault: R's parameters" || bad "check on: exit $RC"
t0=$(date +%s.%N)
ZT_FAULT=skipcoll:rank=1:step=5 run_job A "${CHECK[@]}" --set comm.timeout_s=5 --ckpt-dir "$T/ck" --ckpt-every 2
took=$(echo "$(date +%s.%N) - $t0" | bc)
expect_rc 9 "rank 1 skipped a collective" A
msg="$(grep -o 'error (mismatch).*' "$T/A.err" | head -1)"
grep -q "rank 0: #[0-9]* all_gather_f64 'step agreement.*, 64 B, step 5; rank 1: #[0-9]* all_reduce 'gradients', [0-9]* B" <<<"$msg" &&
  ok "${msg:0:330}" || bad "message: $msg"
[ "$(echo "$took < 5 + 10" | bc)" = 1 ] && ok "ended ${took%??????} s after it started" || bad "took $took s"
no_orphans A
nl_check A "$T/ck"
finish
