# C10: a stale step-N.tmp newer than the last commit (a save killed before its commit): resume uses
# the last commit and says it ignores the .tmp -> NL.
STRATEGY=zero3
source "$(dirname "$0")/lib.bash"
fresh_reference
run_job A --stop-after 4 --ckpt-dir "$T/ck" --ckpt-every 2
mkdir -p "$T/ck/step-00000006.tmp"; head -c 1000 /dev/urandom > "$T/ck/step-00000006.tmp/rank-00000.bin"
nl_check A "$T/ck"
grep -q "ignoring $T/ck/step-00000006.tmp (a save that never committed)" "$T/A-resume.out" && ok "said: $(grep -o 'ignoring.*' "$T/A-resume.out")" || bad "no note on the .tmp"
finish
