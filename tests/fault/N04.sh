# N04: a loss spike x100 on rank 0 in step 9 (its reported loss; the gradient is untouched):
# with fault.loss_spike_z = 6 over a window of 5 steps every rank skips step 9's update and says
# so; the result equals the run whose step 9 was skipped for a NaN; R itself (same detector) has
# no spike.
# Policy rollback (a spike in step 8, commits every 3): every rank reloads step-6 and goes on
# without step 8's batch (global samples 28..31); the run equals, bit for bit in every loss and the
# parameters, the reference whose data order skips those samples (data.skip_samples=28:4), and
# differs from the skip policy's. The skip is recorded in the later commits: a run stopped after
# step 10 and resumed (no data.skip_samples given) ends on the same parameters, every loss equal.
# A spike before any commit falls back to skipping the update (said); the policy without a
# checkpoint directory is a usage error.
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

ROLL=("${SPIKE[@]}" --set fault.loss_spike_policy=rollback)
SPIKE8=spike:x=100:rank=0:step=8:n=1
last_losses() { losses 1 999999 "$@" | awk -F: '{v[$1] = $2} END {for (s in v) print s ":" v[s]}' | sort -n | tr '\n' ' '; }
run_job RS "${SPIKE[@]}" --set data.skip_samples=28:4
[ $RC = 0 ] && grep -q "data: global samples 28..31 skipped (data.skip_samples)" "$T/RS.out" && ok "reference: samples 28..31 skipped by data.skip_samples" || bad "reference: exit $RC"
ZT_FAULT=$SPIKE8 run_job C "${ROLL[@]}" --ckpt-dir "$T/ck" --ckpt-every 3
expect_rc 0 "rollback" C
grep -q "step 8: loss [0-9.]* is a spike (z [0-9.]* over the last 5 steps: .*): every rank rolled back to $T/ck/step-00000006 (step 6) and skips global samples 28..31 (step 8's batch; recorded in the next checkpoints)" "$T/C.out" &&
  ok "$(grep -o 'step 8: loss.*' "$T/C.out")" || bad "no rollback message: $(grep 'step 8' "$T/C.out")"
grep -q '"event":"rollback".*"step":8,.*"to_step":6,"skipped_samples":"28..31"' "$T/C.jsonl" && ok "a rollback event in the JSONL log" || bad "no rollback event: $(grep event "$T/C.jsonl" | head -3)"
[ -n "$(hash_of "$T/RS.out")" ] && [ "$(hash_of "$T/C.out")" = "$(hash_of "$T/RS.out")" ] &&
  ok "rollback = the reference without samples 28..31: parameters $(hash_of "$T/C.out")" || bad "rollback $(hash_of "$T/C.out") vs reference $(hash_of "$T/RS.out")"
[ "$(last_losses "$T/C.jsonl")" = "$(last_losses "$T/RS.jsonl")" ] && ok "and every loss, steps 1..12 (7 and 8 as recomputed after the rollback)" ||
  bad "losses: $(last_losses "$T/C.jsonl") vs $(last_losses "$T/RS.jsonl")"
[ "$(hash_of "$T/C.out")" != "$(hash_of "$T/A.out")" ] && ok "and not the skip policy's ($(hash_of "$T/A.out"))" || bad "rollback = skip"
python3 -c "import json,sys; r=json.load(open(sys.argv[1]))['run_state']; sys.exit(r['skipped_samples'] != [[28, 4]] or r['loss_window']['size'] != 5)" "$T/ck/step-00000009/manifest.json" &&
  ok "step-9's manifest records the skip and the loss window" || bad "step-9 manifest: $(grep -A3 run_state "$T/ck/step-00000009/manifest.json")"
# stopped after step 10 and resumed with nothing said about the skip: its commit says it
ZT_FAULT=$SPIKE8 run_job D "${ROLL[@]}" --ckpt-dir "$T/ckd" --ckpt-every 3 --stop-after 10
run_job D2 "${ROLL[@]}" --ckpt-dir "$T/ckd" --ckpt-every 3 --resume "$T/ckd"
grep -q "resumed from $T/ckd/step-00000010: step 10, next global sample 40 " "$T/D2.out" && grep -q "data: global samples 28..31 skipped (recorded in the checkpoint)" "$T/D2.out" &&
  ok "resumed from step 10: the skip comes from the checkpoint" || bad "resume: $(grep -E 'resumed|data:' "$T/D2.out")"
[ "$(hash_of "$T/D2.out")" = "$(hash_of "$T/RS.out")" ] && [ "$(last_losses "$T/D.jsonl" "$T/D2.jsonl")" = "$(last_losses "$T/RS.jsonl")" ] &&
  ok "rollback, stop, resume = the reference: every loss and the parameters" || bad "resumed $(hash_of "$T/D2.out") vs $(hash_of "$T/RS.out")"
# no commit yet: the update is skipped instead (the skip policy's result); no directory: refused
ZT_FAULT=spike:x=100:rank=0:step=9:n=1 run_job E "${ROLL[@]}" --ckpt-dir "$T/cke" --ckpt-every 100
grep -q "step 9: loss spike, but no commit to roll back to yet (fault.loss_spike_policy rollback): the update is skipped instead" "$T/E.out" &&
  [ "$(hash_of "$T/E.out")" = "$(hash_of "$T/A.out")" ] && ok "no commit yet: skipped instead, the skip policy's parameters" || bad "no commit: $(grep 'step 9' "$T/E.out") $(hash_of "$T/E.out")"
run_job F "${ROLL[@]}"
expect_rc 2 "rollback without a checkpoint directory" F
grep -q "fault.loss_spike_policy rollback needs a checkpoint directory" "$T/F.err" && ok "$(grep -o 'error.*' "$T/F.err" | head -1)" || bad "F: $(tail -1 "$T/F.err")"
finish
