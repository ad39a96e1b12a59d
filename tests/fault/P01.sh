# P01: rank 1 SIGKILLed mid-run (as step 5 begins; the last commit is step 4): the launcher ends the
# job with exit 5 naming rank 1 and SIGKILL, promptly, nothing left running; resume -> NL.
source "$(dirname "$0")/lib.bash"
fresh_reference
lost_peer A sigkill:rank=1:step=5 "rank 1 died of SIGKILL (signal 9)"
finish
