# P02: rank 0 (the coordinator: it writes `latest`) SIGKILLed before its optimizer step in step 5:
# as P01.
source "$(dirname "$0")/lib.bash"
fresh_reference
lost_peer A sigkill:rank=0:step=5:at=optim "rank 0 died of SIGKILL (signal 9)"
finish
