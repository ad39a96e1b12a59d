# S01: SIGTERM to one rank (rank 1, as step 4 begins): every rank learns it from the all-reduced
# flag at that step's boundary, saves, commits step 4 and exits 75; resume -> nothing lost (NL).
source "$(dirname "$0")/lib.bash"
fresh_reference
ZT_FAULT=sigterm:rank=1:step=4 run_job A --ckpt-dir "$T/ck" --ckpt-every 100
expect_rc 75 "SIGTERM to rank 1" A
grep -q "stop requested (SIGTERM on 1 of 2 ranks): step 4 committed" "$T/A.out" && ok "rank 0 stopped with it: $(grep -o 'stop requested.*committed[^;]*' "$T/A.out")" || bad "stop message: $(tail -2 "$T/A.out")"
nl_check A "$T/ck"
# without a checkpoint directory: the same stop, and it says that nothing could be saved
ZT_FAULT=sigterm:rank=0:step=2 run_job B
expect_rc 75 "SIGTERM without checkpoint.dir" B
grep -q "nothing could be saved" "$T/B.out" && ok "$(grep -o 'no checkpoint directory.*saved' "$T/B.out")" || bad "no-dir message: $(tail -2 "$T/B.out")"
finish
