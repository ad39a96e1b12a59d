# I12: out of memory on one rank. (1) ZT_FAULT=oom makes rank 1's first engine allocation of step 5
# fail (zero3: the all-gather of wte.weight): exit 7, the error names the buffer, its memory-plan
# class and its bytes on rank 1; rank 0 is torn down promptly, nothing is left running, the last
# commit (step 4) validates and the resume -> NL. (2) A real limit: MPMD with rank 1 under
# `ulimit -v` (RLIMIT_AS) too small for a wider model: exit 7 naming the buffer likewise, nothing
# left running.
STRATEGY=zero3
source "$(dirname "$0")/lib.bash"
fresh_reference
t0=$(date +%s.%N)
ZT_FAULT=oom:rank=1:step=5 run_job A --ckpt-dir "$T/ck" --ckpt-every 2
took=$(echo "$(date +%s.%N) - $t0" | bc)
expect_rc 7 "an allocation fails on rank 1 in step 5" A
grep -q "error (out of memory): zero3: gathering unit embedding: out of memory for gathered wte.weight (memory-plan class gathered, 524288 bytes) on rank 1" "$T/A.err" &&
  ok "$(grep -o 'error (out of memory).*' "$T/A.err" | head -1)" || bad "message: $(grep error "$T/A.err" | head -2)"
[ "$(echo "$took < 15" | bc)" = 1 ] && ok "the job ended ${took%??????} s after it started" || bad "took $took s"
no_orphans A
nl_check A "$T/ck"
# (2) the real thing: 512 channels (34 MB per fp32 copy of the parameters) on rank 1 under a
# limit of address space. What a process needs before its first allocation (libraries, MPI,
# OpenMP's stacks) differs between machines, so the limit is searched upward: a limit too small
# fails in start-up (another exit, tried next), one too large trains (exit 0, the search failed);
# the first limit that reaches the engine must fail an engine allocation with exit 7, named.
WIDE=(--set model.n_embd=512 --set parallel.strategy=ddp --set training.steps=3)
RC=none
for lim in 300000 400000 500000 600000 700000 800000; do
  timeout -k 5 "$HARD_TIMEOUT" mpirun -np 1 "$Z" train "$T/c.yaml" "${WIDE[@]}" : \
    -np 1 sh -c "ulimit -v $lim; exec \"$Z\" train \"$T/c.yaml\" ${WIDE[*]}" > "$T/B.out" 2> "$T/B.err"
  RC=$?
  [ "$RC" = 7 ] || [ "$RC" = 0 ] && break
  grep -q "memory-plan class" "$T/B.err" && break
done
expect_rc 7 "rank 1 under ulimit -v $lim" B
no_orphans B
finish
