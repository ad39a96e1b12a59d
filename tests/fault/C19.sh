# C19: rank 0 SIGKILLed during the retention purge (checkpoint.keep_last 2, commits every 2 steps:
# step 6's commit purges step 2). The purge renames an old commit to step-N.purge before deleting
# any of its files, so the crash leaves only whole commits: step-4 and step-6 validate, `latest`
# names step 6, the .purge leftover is ignored (and said); resume -> NL from step 6, and the resumed
# run's own purge removes the leftover (2 commits left).
source "$(dirname "$0")/lib.bash"
fresh_reference
ZT_FAULT=sigkill:rank=0:step=6:at=save_purge run_job A --ckpt-dir "$T/ck" --ckpt-every 2 --keep-last 2
expect_rc 5 "sigkill in the purge" A
grep -q "injecting sigkill at save_purge of step 6" "$T/A.err" && ok "killed in step 6's purge" || bad "not killed in the purge: $(tail -2 "$T/A.err")"
ls "$T/ck" | tr '\n' ' ' | sed "s/^/ok   $ROW: left in the checkpoint directory: /"; echo
[ -d "$T/ck/step-00000002.purge" ] && [ ! -e "$T/ck/step-00000002" ] && ok "step-2 renamed out of the commits before deletion" || bad "purge leftovers: $(ls "$T/ck")"
for c in 4 6; do
  "$Z" verify "$T/ck/step-0000000$c" > "$T/v$c.out" 2>&1 && ok "step-$c validates" || bad "step-$c: $(cat "$T/v$c.out")"
done
NL_FROM=6 NL_UNLOGGED=6 nl_check A "$T/ck" --ckpt-dir "$T/ck" --ckpt-every 2 --keep-last 2
grep -q "ignoring $T/ck/step-00000002.purge" "$T/A-resume.out" && ok "said: $(grep -o 'checkpoint: ignoring.*purge.*' "$T/A-resume.out" | cut -c1-200)" || bad "the leftover not said: $(grep checkpoint: "$T/A-resume.out")"
[ "$(ls "$T/ck" | tr '\n' ' ')" = "latest step-00000006 step-00000008 " ] && ok "after the resumed run's purge: $(ls "$T/ck" | tr '\n' ' ')" || bad "after the resume: $(ls "$T/ck" | tr '\n' ' ')"
finish
