# C04: the disk refuses a checkpoint write: a real OS error, not an injected one, from a file-size
# limit (ulimit -f: EFBIG; SIGXFSZ is ignored, so it is an error, not a death; a size-limited tmpfs
# needs privileges this machine's tests do not assume). Every rank fails the save of step 2, the
# job exits 8 naming the file and "File too large", nothing is committed; the same run without the
# limit then completes equal to R.
STRATEGY=zero3
source "$(dirname "$0")/lib.bash"
fresh_reference
( ulimit -f 8192; run_job A --ckpt-dir "$T/ck" --ckpt-every 2; echo "$RC" > "$T/A.rc" ) # 8 MiB: MPI's shared-memory segment fits, a ~9.8 MB shard does not
RC=$(cat "$T/A.rc")
expect_rc 8 "a file-size limit while saving" A
grep -q "writing .*step-00000002.tmp/rank-0000[01].bin: File too large" "$T/A.err" && ok "$(grep -o 'error (io).*' "$T/A.err" | head -1)" || bad "message: $(grep error "$T/A.err" | head -2)"
[ -z "$(last_commit "$T/ck")" ] && [ ! -e "$T/ck/step-00000002" ] && ok "nothing committed: $(ls "$T/ck" | tr '\n' ' ')" || bad "committed: $(ls "$T/ck")"
run_job B --ckpt-dir "$T/ck" --ckpt-every 2
[ $RC = 0 ] && [ "$(hash_of "$T/B.out")" = "$(hash_of "$T/R.out")" ] && ok "without the limit the same directory takes the run, equal to R" || bad "B: exit $RC"
finish
