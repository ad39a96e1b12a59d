# P04: abort() in rank 1's optimizer step (SIGABRT): exit 5 naming rank 1 and SIGABRT; resume -> NL.
source "$(dirname "$0")/lib.bash"
fresh_reference
lost_peer A abort:rank=1:step=5:at=optim "rank 1 died of SIGABRT (signal 6)"
finish
