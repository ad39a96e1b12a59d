#!/usr/bin/env bash
# onebit_hybrid.sh BUILD SOURCE - 1-bit Adam under parallel.strategy hybrid (docs/optimizer.md): the
# gradient reduce-scattered in full precision inside the shard group, the momentum of each rank's
# pieces averaged by the compressed all-reduce across its replica group. 4 oversubscribed ranks,
# 2 shard groups ("hosts") of 2:
#  1. the engine equals its definition bit for bit: tool_onebit_check (the small GPT-2, freeze after
#     4 Adam steps, 4 compressed steps) dumps every rank's pieces: its shard group's reduced gradient
#     piece of each compressed step, the state it starts from, the final parameters, momentum and
#     both errors; tests/onebit_ref.py replays each replica group (2 workers with their pieces) in
#     numpy float32 and must find all of them equal to the bit: hybrid over zero3 with AdamW's
#     update, over zero2 with DeepSpeed's kernel. The pieces it replays from are checked too: at
#     the first compressed step each equals its shard group's ranks' own gradients (a ddp run of
#     the same ranks and data, whose warm-up is the same AdamW) summed, to the bit, and the
#     replicas' pieces differ (no reduction across them). One gradient dump perturbed by an ulp:
#     the replay must then fail (the comparison can fail);
#  2. its warm-up is hybrid AdamW: `zerotrain train` freezing after step 3 has AdamW hybrid's losses
#     for steps 1-4 bit for bit, then its own (the loss of step 5 and the hash differ); every memory
#     class (the error buffers in the optimizer's, the signs' staging in the replica group's scratch)
#     reaches exactly its planned high-water; the comm log shows the compressed all-reduce;
#  3. runs resumed from its checkpoints of step 2 (before the freeze: the resumed run crosses it)
#     and step 6 (after it: the per-rank error files read back) end on the uninterrupted run's
#     parameter hash; resumed under ddp (same world, other pieces) the errors start from zero with
#     a note;
#  4. bad input exits 2 naming the keys: onebit_adam with zero1 (zero2/zero3 refused alike in
#     onebit.sh), with hybrid and expert or context parallelism.
set -euo pipefail
BUILD="$1"
SRC="$2"
TOOL="$BUILD/tests/tool_onebit_check"
Z="$BUILD/zerotrain"
export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ZT_COMM_TIMEOUT=120
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
source "$SRC/tests/dist_check.bash" # bad, fail

# 1. against the reference
ref() { # label dir tool-args...
  local label="$1" d="$T/$2"; shift 2
  mkdir -p "$d"
  local out rc=0
  out="$(mpirun -np 4 --oversubscribe --bind-to none -x OMP_NUM_THREADS -x ZT_COMM_TIMEOUT "$TOOL" hybrid 1 8 \
         --hybrid 2 --freeze-step 4 --lr 1e-3 --dump "$d" "$@" 2>&1)" || rc=$?
  if [ $rc != 0 ]; then echo "FAIL $label: tool exit $rc"; echo "$out" | tail -3; fail=1; return; fi
  if r="$(/usr/bin/python3 "$SRC/tests/onebit_ref.py" "$d")"; then
    echo "ok   $label: $(grep -c '^ok   rank' <<<"$r") arrays bit for bit ($(grep -m1 'replica group' <<<"$r" | sed 's/^ok   //'))"
  else echo "FAIL $label"; grep FAIL <<<"$r" | head -5; fail=1; fi
}
ref "hybrid over zero3, 2 x 2, AdamW's update" z3
ref "hybrid over zero2, 2 x 2, DeepSpeed's kernel" z2 --inner-zero2 --ds
# the pieces the replay starts from are the shard groups' sums: ddp on the same 4 ranks and data,
# to its first compressed step (both warm-ups are AdamW's bits), dumps each rank's own gradient
mkdir -p "$T/dd"
if mpirun -np 4 --oversubscribe --bind-to none -x OMP_NUM_THREADS -x ZT_COMM_TIMEOUT "$TOOL" ddp 1 5 \
     --freeze-step 4 --lr 1e-3 --dump "$T/dd" >/dev/null 2>&1 &&
   r="$(/usr/bin/python3 "$SRC/tests/onebit_ref.py" --pieces "$T/z3" "$T/dd" 4)"; then
  echo "ok   the gradient pieces of the first compressed step = the shard groups' sums of ddp's own gradients, bit for bit, the replicas' differ"
else echo "FAIL the gradient pieces against ddp's own gradients"; grep FAIL <<<"${r:-}" | head -3; fail=1; fi
if [ -e "$T/z3/grad-5-1.bin" ]; then # one element of rank 1's piece of step 6, its sign flipped
  # (one ulp was too little: under ZT_ISA=avx2 the compressed step absorbed it and still matched)
  /usr/bin/python3 -c "
import numpy as np, sys
g = np.fromfile(sys.argv[1], np.float32); g.view(np.uint32)[7] ^= 0x80000000; g.tofile(sys.argv[1])" "$T/z3/grad-5-1.bin"
  if r="$(/usr/bin/python3 "$SRC/tests/onebit_ref.py" "$T/z3")"; then
    echo "FAIL a perturbed gradient still matched"; fail=1
  else echo "ok   a gradient element with its sign flipped: the replay differs ($(grep -m1 FAIL <<<"$r"))"; fi
fi

# 2.-3. zerotrain train on the tiny preset
source "$(dirname "${BASH_SOURCE[0]}")/tiny_vocab.bash"
"$Z" tokenize /usr/share/common-licenses/GPL-3 -o "$T/gpl.bin" >/dev/null
fold_tokens "$T/gpl.bin"
cat > "$T/m.yaml" <<YEOF
model: {preset: tiny, vocab_size: $TINY_VOCAB}
data: {train: $T/gpl.bin}
training: {micro_batch_size: 2, seq_len: 32, steps: 8, lr: 3e-3, warmup_steps: 2}
optimizer: {type: onebit_adam, onebit_freeze_step: 100}
parallel: {strategy: hybrid, hybrid_shard_size: 2}
YEOF
hash_line() { grep -o 'params xxh64 [0-9a-f]*' <<<"$1" || true; }
loss_lines() { grep -oE '^step +[0-9]+/[0-9]+ \| loss [0-9.]+' <<<"$1" || true; }
train() { "$Z" train "$T/m.yaml" --nproc 4 "$@" 2>&1; }
a="$(train --set optimizer.type=adamw)"
b="$(train --set optimizer.onebit_freeze_step=3 --comm-log 1 --ckpt-dir "$T/ck" --ckpt-every 2)"
# steps 1-3 are Adam's (the loss of step 4 is computed from the parameters they leave)
if [ "$(loss_lines "$a" | wc -l)" = 8 ] && [ "$(loss_lines "$b" | head -4)" = "$(loss_lines "$a" | head -4)" ] &&
   [ "$(loss_lines "$b" | sed -n 5p)" != "$(loss_lines "$a" | sed -n 5p)" ] &&
   [ -n "$(hash_line "$b")" ] && [ "$(hash_line "$b")" != "$(hash_line "$a")" ]; then
  echo "ok   freeze_step 3: the losses of steps 1-4 are AdamW hybrid's bits, then its own: $(hash_line "$b")"
else echo "FAIL warm-up vs AdamW hybrid: '$(hash_line "$b")' vs '$(hash_line "$a")'"; echo "$b" | tail -3; fail=1; fi
if grep -q "every class of every rank reached exactly its planned high-water" <<<"$b" &&
   grep -q "compressed_all_reduce" <<<"$b"; then
  echo "ok   planned = measured on every rank and class, the compressed all-reduce in the comm log: $(grep -m1 -o 'compressed_all_reduce.*' <<<"$b" | tr -s ' ' | cut -c1-60)"
else echo "FAIL planned vs measured / comm log"; grep -A6 "memory per rank" <<<"$b"; fail=1; fi
for at in 2 6; do # before the freeze (the resumed run crosses it), after it (the error files read back)
  res="$(train --set optimizer.onebit_freeze_step=3 --resume "$T/ck/step-0000000$at")"
  if [ -n "$(hash_line "$b")" ] && [ "$(hash_line "$res")" = "$(hash_line "$b")" ] &&
     [ -e "$T/ck/step-0000000$at/onebit-errors-rank-00003.bin" ]; then
    echo "ok   resumed from step $at ($([ $at = 2 ] && echo "before the freeze" || echo "after the freeze")): $(hash_line "$res")"
  else echo "FAIL resumed from step $at: '$(hash_line "$res")' vs '$(hash_line "$b")'"; echo "$res" | tail -3; fail=1; fi
done
dd="$(train --set optimizer.onebit_freeze_step=3 --set parallel.strategy=ddp --resume "$T/ck/step-00000006")" && rc=0 || rc=$?
if [ $rc = 0 ] && grep -q "saved with a shard group of 2 ranks (0: ddp), this run's is 0: the errors start from zero" <<<"$dd"; then
  echo "ok   resumed under ddp on 4 ranks: the errors start from zero, with a note"
else echo "FAIL resumed under ddp on 4 ranks: exit $rc"; echo "$dd" | tail -3; fail=1; fi

# 4. refusals
bad "onebit_adam with zero1" "optimizer.type: onebit_adam with parallel.strategy zero1 is not implemented" \
  config "$T/m.yaml" --nproc 4 --set parallel.strategy=zero1
bad "onebit_adam, hybrid and context parallelism" \
  "optimizer.type: onebit_adam with parallel.strategy hybrid and parallel.context_parallel_size 2 is not implemented" \
  config "$T/m.yaml" --nproc 4 --set parallel.context_parallel_size=2
bad "onebit_adam, hybrid and expert parallelism" \
  "optimizer.type: onebit_adam with parallel.strategy hybrid and parallel.expert_parallel_size 2 is not implemented" \
  config "$T/m.yaml" --nproc 4 --set parallel.expert_parallel_size=2 --set model.n_experts=4
exit $fail
