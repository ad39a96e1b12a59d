# N04: a loss spike x100 on rank 0 in step 9 (its reported loss; the gradient is untouched):
# with fault.loss_spike_z = 6 over a window of 5 steps every rank skips step 9's update and says
# so; the result equals the run whose step 9 was skipped for a NaN; R itself (same detector) has
# no spike.
STEPS=12
source "$(dirname "$0")/lib.bash"
SPIKE=(--set fault.loss_spike_z=6 --set fault.loss_spike_window=5)
fresh_reference "${SPIKE[@]}"
grep -q "is a spike" "$T/R.out" && bad "the reference itself has a spike: $(grep spike "$T/R.out")"
ZT_FAULT=spike:x=100:rank=0:step=9 run_job A "${SPIKE[@]}"
expect_rc 0 "a spike" A
grep -q "step 9: loss [0-9.]* is a spike (z [0-9.]* over the last 5 steps" "$T/A.out" && ok "$(grep -o 'step 9: loss.*' "$T/A.out")" || bad "no spike message: $(grep step "$T/A.out" | head)"
ZT_FAULT=nan:rank=1:step=9 run_job B "${SPIKE[@]}"
[ -n "$(hash_of "$T/A.out")" ] && [ "$(hash_of "$T/A.out")" = "$(hash_of "$T/B.out")" ] &&
  ok "the same parameters as with step 9 skipped for a NaN ($(hash_of "$T/A.out"))" || bad "A $(hash_of "$T/A.out") vs B $(hash_of "$T/B.out")"
finish
