# C16: the background write of an async save fails (EIO on rank 1 at step 6): the error surfaces
# at the next step boundary on every rank, nothing of step 6 is committed, the job exits 8, the
# previous commit validates; resume -> NL.
STRATEGY=zero3
source "$(dirname "$0")/lib.bash"
fresh_reference
ZT_FAULT=eio:rank=1:step=6 run_job A --ckpt-dir "$T/ck" --ckpt-every 2 --ckpt-async 1
expect_rc 8 "EIO in the background writer" A
grep -q "rank-00001.bin: Input/output error" "$T/A.err" && ok "$(grep -o 'error (io).*' "$T/A.err" | head -1)" || bad "message: $(grep error "$T/A.err" | head -3)"
[ ! -e "$T/ck/step-00000006" ] && [ "$(last_commit "$T/ck")" = 4 ] && ok "no step-6 commit; latest is still step 4" || bad "step 6: $(ls "$T/ck")"
nl_check A "$T/ck"
finish
