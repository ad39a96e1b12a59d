# C01: rank 1 killed while writing its shard of step 6: no step-6 commit is visible (its
# step-00000006.tmp is ignored, said), resume from step 4 -> NL.
STRATEGY=zero3
source "$(dirname "$0")/lib.bash"
fresh_reference
killed_save sigkill:rank=1:step=6:at=save_shard 4
grep -q "ignoring .*step-00000006.tmp" "$T/A-resume.out" && ok "said: $(grep -o 'ignoring.*' "$T/A-resume.out")" || bad "no note on step-00000006.tmp"
finish
