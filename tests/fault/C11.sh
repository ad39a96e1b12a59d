# C11: `latest` names a directory that is missing: resume takes the newest intact commit by
# scanning, with a warning naming the stale pointer (never a silent start from scratch) -> NL.
STRATEGY=zero3
source "$(dirname "$0")/lib.bash"
fresh_reference
run_job A --stop-after 4 --ckpt-dir "$T/ck" --ckpt-every 2
echo step-00000099 > "$T/ck/latest"
NL_FROM=4 nl_check A "$T/ck"
grep -q "latest names step-00000099, which is not an intact commit; using step-00000004" "$T/A-resume.out" && ok "said: $(grep -o 'warning.*' "$T/A-resume.out")" || bad "no warning: $(grep checkpoint "$T/A-resume.out")"
finish
