# P08 elastic (issue 16): a 4-rank zero3 run loses rank 3 for good (killed in step 5 of every
# attempt on 4 ranks); with --max-restarts 3 --min-nproc 2 the launcher retries once on 4 ranks,
# then continues on 2 ranks with gradient accumulation 2 (the same global batch) from the newest
# commit, and the run ends with the parameters of the uninterrupted 4-rank run, by one command.
STRATEGY=zero3
source "$(dirname "$0")/lib.bash"
fresh_reference --nproc 4
ZT_FAULT=sigkill:rank=3:step=5 run_job A --nproc 4 --ckpt-dir "$T/ck" --ckpt-every 2 --max-restarts 3 --min-nproc 2
expect_rc 0 "rank 3 lost for good" A
grep -q "rank 3 failed in two attempts in a row: continuing on 2 ranks with gradient accumulation 2" "$T/A.err" &&
  ok "$(grep -o 'rank 3 failed in two.*' "$T/A.err")" || bad "no shrink message: $(grep zerotrain: "$T/A.err" | tail -4)"
[ "$(grep -c 'injecting sigkill' "$T/A.err")" = 2 ] && ok "two attempts on 4 ranks failed, the third (2 ranks) finished" || bad "attempts: $(grep -c 'injecting sigkill' "$T/A.err")"
grep -q "batch 2 x 16 x accumulation 2 x 2 ranks" "$T/A.out" && grep -q "next global sample 32 " "$T/A.out" && ok "the last attempt: 2 ranks x accumulation 2, resumed at global sample 32 (step 4 x 8)" || bad "last attempt: $(grep -o 'batch.*ranks' "$T/A.out" | tail -1)"
[ -n "$(hash_of "$T/R.out")" ] && [ "$(hash_of "$T/A.out")" = "$(hash_of "$T/R.out")" ] && ok "final parameters equal the uninterrupted 4-rank run's ($(hash_of "$T/R.out"))" || bad "params $(hash_of "$T/A.out") vs R $(hash_of "$T/R.out")"
no_orphans A
finish
