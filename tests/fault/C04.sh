# C04: the disk refuses a checkpoint write: real OS errors, not injected ones. (1) A file-size limit
# (ulimit -f: EFBIG; SIGXFSZ is ignored, so it is an error, not a death): every rank fails the save
# of step 2, the job exits 8 naming the file and "File too large", nothing is committed; the same
# run without the limit then completes equal to R. (2) As root: a real full disk, a tmpfs of 1.5
# checkpoints: step 2 commits, step 4 finds no space (ENOSPC) on every rank alike: exit 8 naming the
# file and the error, no step-4 and no step-4.tmp left (its space given back), step 2 validates and
# the run resumes from it (copied to a roomy disk) -> NL. Without root (2) is said and not run.
STRATEGY=zero3
TINY_VOCAB=50257 # GPT-2's whole vocabulary: a rank's shard (~9.8 MB) must outgrow the 8 MiB limit below
source "$(dirname "$0")/lib.bash"
fresh_reference
( ulimit -f 8192; run_job A --ckpt-dir "$T/ck" --ckpt-every 2; echo "$RC" > "$T/A.rc" ) # 8 MiB: MPI's shared-memory segment fits, a ~9.8 MB shard does not
RC=$(cat "$T/A.rc")
expect_rc 8 "a file-size limit while saving" A
grep -q "writing .*step-00000002.tmp/rank-0000[01].bin: File too large" "$T/A.err" && ok "$(grep -o 'error (io).*' "$T/A.err" | head -1)" || bad "message: $(grep error "$T/A.err" | head -2)"
[ -z "$(last_commit "$T/ck")" ] && [ ! -e "$T/ck/step-00000002" ] && ok "nothing committed: $(ls "$T/ck" | tr '\n' ' ')" || bad "committed: $(ls "$T/ck")"
run_job B --ckpt-dir "$T/ck" --ckpt-every 2
[ $RC = 0 ] && [ "$(hash_of "$T/B.out")" = "$(hash_of "$T/R.out")" ] && ok "without the limit the same directory takes the run, equal to R" || bad "B: exit $RC"

# (2) a real full disk
if [ "$(id -u)" = 0 ] && mkdir -p "$T/small" && mount -t tmpfs -o size=64k tmpfs "$T/small" 2>/dev/null; then
  trap 'umount "$T/small" 2>/dev/null; rm -rf "$T"' EXIT
  one=$(du -sb "$T/ck/step-00000002" | cut -f1) # B's first commit: the size of one checkpoint
  umount "$T/small"; mount -t tmpfs -o size=$((one * 3 / 2)) tmpfs "$T/small"
  run_job F --ckpt-dir "$T/small/ck" --ckpt-every 2
  expect_rc 8 "tmpfs of 1.5 checkpoints ($((one * 3 / 2)) bytes): the second save" F
  grep -q "step-00000004.tmp/rank-0000[01].bin.*No space left on device" "$T/F.err" &&
    ok "$(grep -o 'error (io).*' "$T/F.err" | head -1 | cut -c1-220)" || bad "F: message: $(grep error "$T/F.err" | head -2)"
  [ "$(last_commit "$T/small/ck")" = 2 ] && [ ! -e "$T/small/ck/step-00000004" ] && [ ! -e "$T/small/ck/step-00000004.tmp" ] &&
    ok "F: latest is step 2; nothing of step 4 left ($(df -k --output=avail "$T/small" | tail -1 | tr -d ' ') KiB free again)" || bad "F: $(ls "$T/small/ck")"
  cp -r "$T/small/ck" "$T/ckF"
  NL_FROM=2 nl_check F "$T/ckF"
else
  echo "skip C04: part (2), a real full disk, needs root to mount a tmpfs"
fi
finish
