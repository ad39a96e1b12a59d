# N03: NaN gradients on rank 1 from step 5 on: steps 5 and 6 are skipped, and with
# fault.nonfinite_skips = 2 the run stops at step 6 with exit 6 naming the count; the last commit
# (step 4) validates, and a run resumed from it without the fault equals R.
source "$(dirname "$0")/lib.bash"
fresh_reference
ZT_FAULT=nan:rank=1:from=5 run_job A --ckpt-dir "$T/ck" --ckpt-every 2 --set fault.nonfinite_skips=2
expect_rc 6 "persistent NaN" A
grep -q "step 6: the gradients were not finite in 2 steps in a row (fault.nonfinite_skips = 2" "$T/A.err" &&
  ok "$(grep -o 'error.*' "$T/A.err" | head -1 | cut -c1-160)" || bad "message: $(tail -2 "$T/A.err")"
# the commit at step 6 did not happen (the run stopped first); step 4's holds the last applied update
[ "$(last_commit "$T/ck")" = 4 ] && ok "the last commit is step 4" || bad "last commit $(last_commit "$T/ck")"
nl_check A "$T/ck"
# fault.nonfinite_skips = 0: the first non-finite step stops the run (the old behaviour)
ZT_FAULT=nan:rank=1:step=2 run_job B --set fault.nonfinite_skips=0
expect_rc 6 "fault.nonfinite_skips=0" B
finish
