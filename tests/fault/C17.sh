# C17: a save onto an existing step directory (resume from step 2, stop after step 4 again, over the
# committed step-4): the old commit is swapped out atomically (renameat2 RENAME_EXCHANGE) and
# removed, never half-overwritten; the new step-4 validates and holds the same files (same
# checksums: the computation is deterministic); nothing is left behind; resume -> NL.
STRATEGY=zero3
source "$(dirname "$0")/lib.bash"
fresh_reference
run_job A --stop-after 4 --ckpt-dir "$T/ck" --ckpt-every 2
sums() { grep -o '"xxh64":[^,}]*' "$T/ck/step-00000004/manifest.json" | tr '\n' ' '; }
before="$(sums)"; ino_before=$(stat -c %i "$T/ck/step-00000004")
run_job B --resume "$T/ck/step-00000002" --stop-after 4 --ckpt-dir "$T/ck" --ckpt-every 2
expect_rc 0 "saving step 4 again" B
[ -n "$before" ] && [ "$(sums)" = "$before" ] && [ "$(stat -c %i "$T/ck/step-00000004")" != "$ino_before" ] &&
  ok "step-00000004 replaced by a new directory with the same checksums" || bad "step 4: $(sums) vs $before"
[ "$(ls "$T/ck" | tr '\n' ' ')" = "latest step-00000002 step-00000004 " ] && ok "nothing left behind: $(ls "$T/ck" | tr '\n' ' ')" || bad "left: $(ls -a "$T/ck")"
nl_check A "$T/ck"
finish
