# S02: SIGTERM to the launcher mid-run: forwarded to both ranks, which agree at the step boundary
# (an all-reduced flag), save, commit and exit 75; resume -> nothing lost (NL).
source "$(dirname "$0")/lib.bash"
fresh_reference
# a 300 ms sleep per step (ZT_FAULT) makes "mid-run" a matter of wall time, not of luck
ZT_FAULT=sleep:ms=300 start_job A --ckpt-dir "$T/ck" --ckpt-every 100
wait_step A 2
kill -TERM "$(launcher_of)"
wait_job A
expect_rc 75 "SIGTERM to the launcher" A
grep -q "stop requested (SIGTERM on 2 of 2 ranks): step [0-9]* committed" "$T/A.out" && ok "$(grep -o 'stop requested.*committed[^;]*' "$T/A.out")" || bad "no stop message: $(tail -3 "$T/A.out")"
c="$(last_commit "$T/ck")"
[ -n "$c" ] && [ "$c" -lt "$STEPS" ] && ok "stopped mid-run at step $c of $STEPS" || bad "commit step '$c' is not mid-run"
nl_check A "$T/ck"
finish
