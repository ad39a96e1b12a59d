# P10: SIGKILL to the launcher itself: mpirun gets SIGTERM (parent-death signal) and takes the
# ranks down within 10 s; the next launch resumes -> NL.
source "$(dirname "$0")/lib.bash"
fresh_reference
ZT_FAULT=sleep:ms=300 start_job A --ckpt-dir "$T/ck" --ckpt-every 2
wait_step A 3
kill -KILL "$(launcher_of)"
wait "$JOB" 2>/dev/null # 137: the launcher's SIGKILL, passed on by timeout
t0=$(date +%s.%N)
for _ in $(seq 100); do pgrep -f "$T/c.yaml" > /dev/null || break; sleep 0.1; done
took=$(echo "$(date +%s.%N) - $t0" | bc)
if pgrep -f "$T/c.yaml" > /dev/null; then bad "ranks still running 10 s after the launcher died"; pkill -KILL -f "$T/c.yaml"
else ok "launcher SIGKILLed: every rank gone ${took%??????} s later"; fi
nl_check A "$T/ck"
finish
