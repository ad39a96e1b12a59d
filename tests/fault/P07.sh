# P07: a straggler: rank 1 sleeps 300 ms in every forward (ZT_FAULT sleep at fwd). No abort; the
# straggler report names rank 1 after 5 slow steps (within 20), counted from the run's second step
# (the first is left out: its one-time costs decided whether it counted); the result equals R's.
source "$(dirname "$0")/lib.bash"
R_OWN=1 fresh_reference # its own R: the reference's output is read for a straggler report (timing)
grep -q straggler "$T/R.out" && bad "the reference reports a straggler: $(grep straggler "$T/R.out")"
ZT_FAULT=sleep:ms=300:rank=1:at=fwd run_job A
expect_rc 0 "a slow rank 1" A
grep -q "step 6: straggler: rank 1's own work took 0.3[0-9]* s per step (5 steps in a row)" "$T/A.out" &&
  ok "$(grep -o 'step 6: straggler.*' "$T/A.out")" || bad "no report: $(grep -i strag "$T/A.out")"
grep -q '"event":"straggler","step":6,"rank":1' "$T/A.jsonl" && ok "logged as a straggler event" || bad "no straggler event"
[ -n "$(hash_of "$T/R.out")" ] && [ "$(hash_of "$T/A.out")" = "$(hash_of "$T/R.out")" ] && ok "final parameters equal R's" || bad "params differ"
finish
