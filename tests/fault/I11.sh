# I11: a checkpoint directory that cannot be written: exit 8 at start-up, before the first step,
# naming the directory and the error (not at the first save).
source "$(dirname "$0")/lib.bash"
touch "$T/file"
run_job A --ckpt-dir "$T/file/ck" --ckpt-every 2
expect_rc 8 "an unwritable checkpoint directory" A
grep -q "checkpoint directory $T/file/ck is not writable by rank [01]: Not a directory (checked before the first step)" "$T/A.err" &&
  ok "$(grep -o 'error (io).*' "$T/A.err" | head -1)" || bad "message: $(grep error "$T/A.err" | head -2)"
grep -q '"step":1,' "$T/A.jsonl" 2>/dev/null && bad "a step ran before the check" || ok "no step ran"
finish
