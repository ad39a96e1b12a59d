# P05: rank 1 alive but silent (ZT_FAULT hang, as under SIGSTOP) as step 5 begins: rank 0's
# collective deadline (comm.timeout_s = 3) expires; it exits 5 within T + 5 s, naming rank 1 and
# what each rank was doing (rank 1 in step 5, in no collective; rank 0 in its collective), and
# dumps its last collectives; the job is torn down; resume -> NL.
source "$(dirname "$0")/lib.bash"
fresh_reference
unset ZT_COMM_TIMEOUT
t0=$(date +%s.%N)
ZT_FAULT=hang:rank=1:step=5 run_job A --ckpt-dir "$T/ck" --ckpt-every 2 --set comm.timeout_s=3
took=$(echo "$(date +%s.%N) - $t0" | bc)
expect_rc 5 "rank 1 hung" A
grep -q "collective deadline 3 s (comm.timeout_s)" "$T/A.out" && ok "the deadline is the config key's" || bad "deadline line: $(grep deadline "$T/A.out")"
msg="$(grep -o 'error (peer).*' "$T/A.err" | head -1)"
grep -q "no data from rank 1 after 3 s" <<<"$msg" && grep -q "rank 1: step 5, in no collective for" <<<"$msg" &&
  grep -q "rank 0 (this rank): step 5, in all_reduce .head. #[0-9]* on gradients" <<<"$msg" && ok "the message: ${msg:0:400}" || bad "message: $msg"
grep -q "rank 0's last collectives" "$T/A.err" && ok "rank 0 dumped its last collectives ($(grep -c '#[0-9]* on ' "$T/A.err") lines)" || bad "no dump"
[ "$(echo "$took < 3 + 5 + 4" | bc)" = 1 ] && ok "the job ended ${took%??????} s after it started (3 s deadline)" || bad "took $took s"
no_orphans A
nl_check A "$T/ck"
finish
