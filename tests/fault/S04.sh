# S04: two SIGINTs to the launcher within a second (Ctrl-C twice): the second ends the ranks at
# once (exit != 0, naming the rank and SIGINT), no partial checkpoint is visible, and resuming from
# the last commit -> nothing lost (NL). Also: a rank that does not stop within fault.grace_s of a
# SIGTERM is killed by the launcher (exit 5, said).
source "$(dirname "$0")/lib.bash"
fresh_reference
# the sleep sits between the step's agreement and its save: a stop takes >= 400 ms, so the second
# SIGINT (0.1 s after the first) always finds the ranks still running
ZT_FAULT=sleep:ms=400:at=optim start_job A --ckpt-dir "$T/ck" --ckpt-every 2
wait_step A 3
l="$(launcher_of)"; kill -INT "$l"; sleep 0.1; kill -INT "$l"
wait_job A
[ "$RC" = 130 ] && grep -q "stopped at once by a second SIGINT" "$T/A.err" && ok "double SIGINT: exit $RC at once: $(grep -o 'stopped at once.*' "$T/A.err")" || bad "double SIGINT: exit $RC: $(tail -2 "$T/A.err")"
for d in "$T/ck"/step-*; do
  case "$d" in *.tmp) ok "an interrupted save left $(basename "$d") (never resumed from)";;
               *) [ -f "$d/manifest.json" ] || bad "a partial checkpoint is visible: $d";; esac
done
nl_check A "$T/ck"
# grace: rank 1 hangs in step 2 (alive, ignoring the request); SIGTERM the launcher; 2 s later it kills
ZT_FAULT=hang:rank=1:step=2 start_job B --set fault.grace_s=2
wait_step B 1; sleep 0.5
t0=$(date +%s.%N); kill -TERM "$(launcher_of)"; wait_job B; t1=$(date +%s.%N)
took=$(echo "$t1 - $t0" | bc)
grep -q "did not stop within fault.grace_s = 2 s" "$T/B.err" && [ "$RC" = 5 ] && [ "$(echo "$took < 8" | bc)" = 1 ] &&
  ok "a rank that ignores the stop request is killed after fault.grace_s = 2 s (job ended in ${took%????} s, exit 5)" ||
  bad "grace: exit $RC after $took s: $(tail -2 "$T/B.err")"
finish
