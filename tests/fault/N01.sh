# N01: a NaN gradient on rank 1 in step 3 (its loss gradient poisoned): every rank skips step 3's
# update alike (the global norm is the same everywhere), says so, and the run ends equal to the
# reference with step 3 skipped, made with the NaN on rank 0 instead; it differs from R; the
# checkpoints after it verify.
source "$(dirname "$0")/lib.bash"
KIND=${KIND:-nan}
fresh_reference
ZT_FAULT=$KIND:rank=1:step=3 run_job A --ckpt-dir "$T/ck" --ckpt-every 4
expect_rc 0 "$KIND in rank 1's step 3" A
grep -q "step 3: gradient norm [-a-z]* is not finite: update skipped on every rank (1 in a row" "$T/A.out" &&
  ok "$(grep -o 'step 3: gradient norm.*' "$T/A.out")" || bad "no skip message: $(grep step "$T/A.out" | head -3)"
grep -q '"event":"skipped_step","step":3,"reason":"nonfinite"' "$T/A.jsonl" && ok "the log records the skip" || bad "no skipped_step event"
ZT_FAULT=$KIND:rank=0:step=3 run_job B
h=$(hash_of "$T/A.out")
[ -n "$h" ] && [ "$h" = "$(hash_of "$T/B.out")" ] && ok "the same final parameters as with the $KIND on rank 0 ($h)" || bad "A $h vs B $(hash_of "$T/B.out")"
[ "$h" != "$(hash_of "$T/R.out")" ] && ok "and not R's (step 3 was skipped)" || bad "equal to R: was anything skipped?"
"$Z" verify "$T/ck" > /dev/null && ok "the last commit (step $(last_commit "$T/ck")) validates" || bad "verify"
finish
