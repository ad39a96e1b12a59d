# C14: the model configuration differs from the checkpoint's (one more layer; a wider n_embd; one
# layer fewer): resuming exits 4 with ONE error that counts and lists the missing and unexpected
# tensors and the shape pairs (checkpoint vs model), before any tensor is read or a step trained;
# the unchanged config then resumes the same commit -> NL.
source "$(dirname "$0")/lib.bash"
fresh_reference
run_job A --stop-after 4 --ckpt-dir "$T/ck" --ckpt-every 2
[ $RC = 0 ] || bad "the run to resume: exit $RC"
mismatch() { # LABEL WANT... : resume with the model changed by --set LABEL's override; every WANT in the one error
  local name="$1" set="$2"; shift 2
  run_job "$name" --resume "$T/ck" --set "$set" --set checkpoint.fallback=false
  expect_rc 4 "$set" "$name"
  local msg; msg="$(grep 'error' "$T/$name.err" | sort -u)"
  [ "$(echo "$msg" | grep -c 'does not match the checkpoint')" = 1 ] && ok "$name: one error: $(echo "$msg" | grep -o 'error.*' | cut -c1-300)" ||
    bad "$name: not one error: $msg"
  for w in "$@"; do echo "$msg" | grep -qF -- "$w" && ok "$name: names '$w'" || bad "$name: no '$w' in: $msg"; done
  grep -q '"step":' "$T/$name.jsonl" 2>/dev/null && bad "$name: it trained a step"
}
mismatch layers3 model.n_layer=3 "12 missing [h.2.ln_1.weight" "0 unexpected []" "0 shapes differ"
mismatch layers1 model.n_layer=1 "0 missing []" "unexpected [h.1." 
mismatch embd48 model.n_embd=48 "0 missing []" "0 unexpected []" "28 shapes differ" "wte.weight [4096,32] vs [4096,48]" "more not listed"
NL_FROM=4 nl_check A "$T/ck"
finish
