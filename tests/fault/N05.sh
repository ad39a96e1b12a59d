# N05: run-to-run determinism: the reference run twice gives byte-identical losses and parameters.
source "$(dirname "$0")/lib.bash"
fresh_reference
run_job R2
[ "$(losses 1 99 "$T/R.jsonl")" = "$(losses 1 99 "$T/R2.jsonl")" ] && [ -n "$(hash_of "$T/R.out")" ] &&
  [ "$(hash_of "$T/R.out")" = "$(hash_of "$T/R2.out")" ] && ok "two runs: the same $STEPS losses and parameters ($(hash_of "$T/R.out"))" || bad "runs differ"
finish
