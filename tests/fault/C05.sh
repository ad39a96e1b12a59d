# C05: an I/O error while rank 1 writes its shard of step 6 (EIO, then ENOSPC): every rank reports
# it, the job exits 8 naming the file and the error, nothing of step 6 is committed and no
# step-6.tmp is left, the previous commit (step 4) validates; resume -> NL. A short write (every
# write(2) of rank 1's shard returns 4093 bytes) is carried on from where it stopped: the commit
# validates and the run equals R. checkpoint.on_save_error continue: the failed save is said, the
# run trains on and the next save (step 8) commits, equal to R.
STRATEGY=zero3
source "$(dirname "$0")/lib.bash"
fresh_reference
ZT_FAULT=eio:rank=1:step=6 run_job A --ckpt-dir "$T/ck" --ckpt-every 2
expect_rc 8 "EIO writing a shard" A
grep -q "writing .*step-00000006.tmp/rank-00001.bin: Input/output error" "$T/A.err" && ok "$(grep -o 'error (io).*' "$T/A.err" | head -1)" || bad "message: $(grep error "$T/A.err" | head -3)"
[ ! -e "$T/ck/step-00000006" ] && [ ! -e "$T/ck/step-00000006.tmp" ] && [ "$(last_commit "$T/ck")" = 4 ] &&
  ok "no step-6 commit and no step-6.tmp left; latest is still step 4" || bad "step 6: $(ls "$T/ck")"
nl_check A "$T/ck"

ZT_FAULT=enospc:rank=1:step=6 run_job B --ckpt-dir "$T/ckB" --ckpt-every 2
expect_rc 8 "ENOSPC writing a shard" B
grep -q "writing .*step-00000006.tmp/rank-00001.bin: No space left on device" "$T/B.err" && ok "$(grep -o 'error (io).*' "$T/B.err" | head -1)" || bad "message: $(grep error "$T/B.err" | head -3)"
[ "$(last_commit "$T/ckB")" = 4 ] && [ ! -e "$T/ckB/step-00000006.tmp" ] && ok "B: latest is still step 4, nothing of step 6 left" || bad "B: $(ls "$T/ckB")"

ZT_FAULT=shortwrite:rank=1:step=4 run_job C --ckpt-dir "$T/ckC" --ckpt-every 2
[ $RC = 0 ] && "$Z" verify "$T/ckC/step-00000004" > /dev/null 2>&1 && [ "$(hash_of "$T/C.out")" = "$(hash_of "$T/R.out")" ] &&
  ok "short writes of rank 1's shard: step 4 committed and validates, parameters equal R's" || bad "C: exit $RC, $(tail -2 "$T/C.err")"

ZT_FAULT=enospc:rank=1:step=6 run_job D --ckpt-dir "$T/ckD" --ckpt-every 2 --set checkpoint.on_save_error=continue
[ $RC = 0 ] && ok "checkpoint.on_save_error continue: the run finished (exit 0)" || bad "D: exit $RC: $(tail -2 "$T/D.err")"
grep -q "step 6: checkpoint not saved: .*No space left on device.*the last commit is untouched, training goes on" "$T/D.out" &&
  ok "$(grep -o 'step 6: checkpoint not saved.*' "$T/D.out" | cut -c1-200)" || bad "D: no warning: $(grep -i 'step 6' "$T/D.out" | head -2)"
grep -q '"event":"save_failed"' "$T/D.jsonl" && ok "D: a save_failed event in the JSONL" || bad "D: no save_failed event"
[ "$(last_commit "$T/ckD")" = 8 ] && [ ! -e "$T/ckD/step-00000006" ] && [ ! -e "$T/ckD/step-00000006.tmp" ] &&
  "$Z" verify "$T/ckD/step-00000008" > /dev/null 2>&1 && ok "D: step 6 never committed nor left, step 8 committed and validates" || bad "D: $(ls "$T/ckD")"
[ "$(hash_of "$T/D.out")" = "$(hash_of "$T/R.out")" ] && ok "D: parameters equal R's" || bad "D: params differ"
ZT_FAULT=enospc:rank=1:step=8 run_job E --ckpt-dir "$T/ckE" --ckpt-every 2 --set checkpoint.on_save_error=continue
expect_rc 8 "continue, but the final save (step 8) fails: nothing would retry it" E
finish
