# S03: SIGTERM to rank 1 while it writes its shard of step 4: that save completes and commits,
# the request is agreed at step 5's boundary, step 5 is saved too, exit 75; never a half-visible
# checkpoint; resume -> NL.
STRATEGY=zero3
source "$(dirname "$0")/lib.bash"
fresh_reference
ZT_FAULT=sigterm:rank=1:step=4:at=save_shard run_job A --ckpt-dir "$T/ck" --ckpt-every 4
expect_rc 75 "SIGTERM during a save" A
"$Z" verify "$T/ck/step-00000004" > /dev/null && [ "$(last_commit "$T/ck")" = 5 ] && ok "step 4's save completed; step 5 committed on the stop" || bad "commits: $(ls "$T/ck")"
nl_check A "$T/ck"
finish
