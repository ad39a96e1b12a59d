# P08: a transient crash with restarts allowed: rank 1 SIGKILLed in step 5 of the first attempt
# only; --max-restarts 2 starts the job again from the newest commit (step 4); it completes with
# exit 0 and the parameters of the uninterrupted run, with no manual step.
source "$(dirname "$0")/lib.bash"
fresh_reference
ZT_FAULT=sigkill:rank=1:step=5:attempt=0 run_job A --ckpt-dir "$T/ck" --ckpt-every 2 --max-restarts 2
expect_rc 0 "a crash, then a restart" A
grep -q "restart 1/2 (--max-restarts): starting the 2 ranks again from $T/ck/step-00000004" "$T/A.err" && ok "$(grep -o 'restart 1/2.*' "$T/A.err")" || bad "restart message: $(grep restart "$T/A.err")"
grep -q "next global sample 16 " "$T/A.out" && ok "the second attempt resumed at global sample 16 (step 4)" || bad "cursor: $(grep -o 'next global sample [0-9]*' "$T/A.out")"
[ -n "$(hash_of "$T/R.out")" ] && [ "$(hash_of "$T/A.out")" = "$(hash_of "$T/R.out")" ] && ok "final parameters equal R's ($(hash_of "$T/R.out"))" || bad "params $(hash_of "$T/A.out") vs R $(hash_of "$T/R.out")"
no_orphans A
finish
