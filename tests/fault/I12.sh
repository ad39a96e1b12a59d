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
grep -q "error (out of memory): zero3: gathering unit embedding: out of memory for gathered wte.weight (memory-plan class gathered, 6432896 bytes) on rank 1" "$T/A.err" &&
  ok "$(grep -o 'error (out of memory).*' "$T/A.err" | head -1)" || bad "message: $(grep error "$T/A.err" | head -2)"
[ "$(echo "$took < 15" | bc)" = 1 ] && ok "the job ended ${took%??????} s after it started" || bad "took $took s"
no_orphans A
nl_check A "$T/ck"
# (2) the real thing: 512 channels (128 MB per fp32 copy of the parameters) on rank 1 under 500 MB
# of address space
WIDE=(--set model.n_embd=512 --set parallel.strategy=ddp --set training.steps=3)
timeout -k 5 "$HARD_TIMEOUT" mpirun -np 1 "$Z" train "$T/c.yaml" "${WIDE[@]}" : \
  -np 1 sh -c "ulimit -v 500000; exec \"$Z\" train \"$T/c.yaml\" ${WIDE[*]}" > "$T/B.out" 2> "$T/B.err"
RC=$?
expect_rc 7 "rank 1 under ulimit -v 500000" B
grep -q "error (out of memory): .*out of memory for .* (memory-plan class [a-z_]*, [0-9]* bytes) on rank 1" "$T/B.err" &&
  ok "$(grep -o 'error (out of memory).*' "$T/B.err" | head -1)" || bad "message: $(grep -i error "$T/B.err" | head -3)"
no_orphans B
finish
