# P09: a crash on every start (torchelastic's bipolar test): rank 1 exits 1 in step 3 of every
# attempt; with --max-restarts 2 there are exactly 3 attempts, then exit 5 with "restart budget
# exhausted (2/2)"; the last commit is intact.
source "$(dirname "$0")/lib.bash"
ZT_FAULT=exit:code=1:rank=1:step=3 run_job A --ckpt-dir "$T/ck" --ckpt-every 1 --max-restarts 2
expect_rc 5 "a crash on every attempt" A
n=$(grep -c "injecting exit at step of step 3" "$T/A.err")
[ "$n" = 3 ] && ok "exactly 3 attempts" || bad "$n attempts"
grep -q "restart budget exhausted (2/2)" "$T/A.err" && ok "$(grep -o 'restart budget.*' "$T/A.err")" || bad "no budget message: $(tail -2 "$T/A.err")"
"$Z" verify "$T/ck" > /dev/null && ok "the last commit (step $(last_commit "$T/ck")) validates" || bad "verify"
finish
