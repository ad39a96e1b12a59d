# N08: replica divergence (a stand-in for silent data corruption): one bit of rank 1's copy of a
# parameter flips as step 5 begins (ddp: every rank holds a replica); with
# fault.replica_check_every = 2 the check after step 6 names rank 1 and stops with exit 6 before
# step 6's checkpoint; the last commit (step 4, taken before the flip) validates; resume -> NL.
source "$(dirname "$0")/lib.bash"
fresh_reference --set fault.replica_check_every=2
ZT_FAULT=bitflip:rank=1:step=5 run_job A --ckpt-dir "$T/ck" --ckpt-every 2 --set fault.replica_check_every=2
expect_rc 6 "a flipped bit in rank 1's replica" A
grep -q "step 6: the replicas diverge: rank(s) 1 hold parameters hashing" "$T/A.err" && ok "$(grep -o 'error (numerics).*' "$T/A.err" | head -1 | cut -c1-170)" || bad "message: $(grep error "$T/A.err" | head -2)"
[ "$(last_commit "$T/ck")" = 4 ] && ok "no commit after the flip" || bad "last commit $(last_commit "$T/ck")"
nl_check A "$T/ck" --set fault.replica_check_every=2
finish
