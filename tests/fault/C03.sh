# C03: rank 0 killed between the commit's rename and the update of `latest`: step-6 is committed
# and `latest` still names step-4; both are valid; resume takes `latest`'s (step 4) -> NL, and
# step 6 verifies.
STRATEGY=zero3
source "$(dirname "$0")/lib.bash"
fresh_reference
killed_save sigkill:rank=0:step=6:at=save_commit 4
"$Z" verify "$T/ck/step-00000006" > /dev/null && ok "step-00000006 (committed, not yet in latest) verifies" || bad "step 6 does not verify"
finish
