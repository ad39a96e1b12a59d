# C05: an I/O error (EIO) while rank 1 writes its shard of step 6: every rank reports it, the job
# exits 8 naming the file and the error, nothing of step 6 is committed, the previous commit
# (step 4) validates; resume -> NL.
STRATEGY=zero3
source "$(dirname "$0")/lib.bash"
fresh_reference
ZT_FAULT=eio:rank=1:step=6 run_job A --ckpt-dir "$T/ck" --ckpt-every 2
expect_rc 8 "EIO writing a shard" A
grep -q "writing .*step-00000006.tmp/rank-00001.bin: Input/output error" "$T/A.err" && ok "$(grep -o 'error (io).*' "$T/A.err" | head -1)" || bad "message: $(grep error "$T/A.err" | head -3)"
[ ! -e "$T/ck/step-00000006" ] && [ "$(last_commit "$T/ck")" = 4 ] && ok "no step-6 commit; latest is still step 4" || bad "step 6: $(ls "$T/ck")"
nl_check A "$T/ck"
finish
