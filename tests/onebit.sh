#!/usr/bin/env bash
# onebit.sh BUILD SOURCE - 1-bit Adam (optimizer.type onebit_adam, DeepSpeed's OnebitAdam;
# docs/optimizer.md), on one host:
#  1. the engine's N-rank run equals its one-process definition bit for bit: tool_onebit_check
#     (ddp, the small GPT-2, freeze after 4 Adam steps, 4 compressed steps) dumps each rank's own
#     gradient of every compressed step; tests/onebit_ref.py replays N workers in numpy float32
#     (momenta, the compressed all-reduce with every worker's and server's error, the frozen-v
#     update) and must find every rank's parameters, momentum and both errors equal to the bit:
#     2 ranks with AdamW's update, 3 (uneven server blocks) with DeepSpeed's kernel;
#  2. its warm-up is AdamW: `zerotrain train` on 2 ranks freezing after step 6 has AdamW ddp's
#     losses for steps 1-7 (bit for bit), then its own (the hash differs: the check can fail);
#  3. a run resumed from a checkpoint taken before the freeze, and one from after it (the per-rank
#     error files read back), end on the uninterrupted run's parameter hash; resumed on 3 ranks the
#     errors start from zero with a note; a damaged error file exits 4 naming it;
#  4. the real DeepSpeed file (DeepSpeedExamples' OnebitAdam bsz96: fp16, clipping 1.0) trains on
#     2 ranks with the freeze moved to step 3: the comm log shows the compressed all-reduce, and
#     every memory class (the error buffers in the optimizer's, the signs' staging in comm's)
#     reaches exactly its planned high-water;
#  5. bad input exits 2 naming the key: onebit_adam with zero3 or zero2, OneBitAdam with ZeRO
#     stage 1 in the DeepSpeed dialect, a negative freeze step (hybrid: tests/onebit_hybrid.sh).
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
ref() { # label N tool-args...
  local label="$1" n="$2"; shift 2
  local d="$T/ref$n"; mkdir -p "$d"
  local out rc=0
  out="$(mpirun -np "$n" --oversubscribe --bind-to none -x OMP_NUM_THREADS -x ZT_COMM_TIMEOUT "$TOOL" ddp 1 8 \
         --freeze-step 4 --lr 1e-3 --dump "$d" "$@" 2>&1)" || rc=$?
  if [ $rc != 0 ]; then echo "FAIL $label: tool exit $rc"; echo "$out" | tail -3; fail=1; return; fi
  if r="$(/usr/bin/python3 "$SRC/tests/onebit_ref.py" "$d")"; then
    echo "ok   $label: $(grep -c '^ok' <<<"$r") arrays bit for bit ($(grep -m1 'rank 0 parameters' <<<"$r" | sed 's/^ok   //'))"
  else echo "FAIL $label"; grep FAIL <<<"$r"; fail=1; fi
}
ref "reference N=2, AdamW's update" 2
ref "reference N=3, DeepSpeed's kernel, uneven blocks" 3 --ds

# 2.-4. zerotrain train on the tiny preset
source "$(dirname "${BASH_SOURCE[0]}")/tiny_vocab.bash"
"$Z" tokenize /usr/share/common-licenses/GPL-3 -o "$T/gpl.bin" >/dev/null
fold_tokens "$T/gpl.bin"
cat > "$T/m.yaml" <<YEOF
model: {preset: tiny, vocab_size: $TINY_VOCAB}
data: {train: $T/gpl.bin}
training: {micro_batch_size: 4, seq_len: 32, steps: 8, lr: 3e-3, warmup_steps: 2}
optimizer: {type: onebit_adam, onebit_freeze_step: 100}
parallel: {strategy: ddp}
YEOF
hash_line() { grep -o 'params xxh64 [0-9a-f]*' <<<"$1" || true; }
loss_lines() { grep -oE '^step +[0-9]+/[0-9]+ \| loss [0-9.]+' <<<"$1" || true; }
train() { "$Z" train "$T/m.yaml" --nproc "$@" 2>&1; }
a="$(train 2 --set optimizer.type=adamw)"
b="$(train 2 --set optimizer.onebit_freeze_step=6 --ckpt-dir "$T/ck6" --ckpt-every 4)"
# steps 1-6 are Adam's (the loss of step 7 is computed from the parameters they leave)
if [ "$(loss_lines "$a" | wc -l)" = 8 ] && [ "$(loss_lines "$b" | head -7)" = "$(loss_lines "$a" | head -7)" ] &&
   [ -n "$(hash_line "$b")" ] && [ "$(hash_line "$b")" != "$(hash_line "$a")" ]; then
  echo "ok   freeze_step 6: the losses of steps 1-7 are AdamW ddp's bits, then its own: $(hash_line "$b")"
else echo "FAIL warm-up vs AdamW: '$(hash_line "$b")' vs '$(hash_line "$a")'"; echo "$b" | tail -3; fail=1; fi
c="$(train 2 --set optimizer.onebit_freeze_step=2 --ckpt-dir "$T/ck2" --ckpt-every 4)"
for fz in 2 6; do # the checkpoint at step 4: after the freeze, before it
  full="$([ $fz = 2 ] && echo "$c" || echo "$b")"
  res="$(train 2 --set optimizer.onebit_freeze_step=$fz --resume "$T/ck$fz/step-00000004")"
  if [ -n "$(hash_line "$full")" ] && [ "$(hash_line "$res")" = "$(hash_line "$full")" ] &&
     [ -e "$T/ck$fz/step-00000004/onebit-errors-rank-00001.bin" ]; then
    echo "ok   freeze_step $fz, resumed from step 4: $(hash_line "$res")"
  else echo "FAIL freeze_step $fz resumed from step 4: '$(hash_line "$res")' vs '$(hash_line "$full")'"; echo "$res" | tail -3; fail=1; fi
done
three="$(train 3 --set optimizer.onebit_freeze_step=2 --resume "$T/ck2/step-00000004")" && rc=0 || rc=$?
if [ $rc = 0 ] && grep -q "saved by 2 ranks, this run has 3: the errors start from zero" <<<"$three"; then
  echo "ok   resumed on 3 ranks: the errors start from zero, with a note"
else echo "FAIL resumed on 3 ranks: exit $rc"; echo "$three" | tail -3; fail=1; fi

printf '\x55' | dd of="$T/ck2/step-00000004/onebit-errors-rank-00001.bin" bs=1 seek=100 conv=notrunc 2>/dev/null
dmg="$(train 2 --set optimizer.onebit_freeze_step=2 --resume "$T/ck2/step-00000004")" && rc=0 || rc=$?
if [ $rc = 4 ] && grep -q "onebit-errors-rank-00001.bin: checksum mismatch" <<<"$dmg"; then
  echo "ok   a damaged error file: exit 4 naming it"
else echo "FAIL a damaged error file: exit $rc"; echo "$dmg" | tail -3; fail=1; fi

REAL="$SRC/tests/configs/real/dsexamples.nccl.deepspeed_onebitadam_bsz96_config.json"
out="$("$Z" train "$REAL" --nproc 2 --comm-log 1 --set data.train="$T/gpl.bin" --set model.preset=tiny --set model.vocab_size=$TINY_VOCAB \
       --set training.steps=6 --set training.seq_len=32 --set training.global_batch_size=12 \
       --set optimizer.onebit_freeze_step=3 2>&1)" && rc=0 || rc=$?
if [ $rc = 0 ] && grep -q "compressed_all_reduce" <<<"$out" && grep -q "optimizer onebit_adam" <<<"$out" &&
   grep -q "every class of every rank reached exactly its planned high-water" <<<"$out"; then
  echo "ok   the real OnebitAdam file on 2 ranks (fp16, clipping 1; the error buffers planned = measured): $(grep -o 'loss [0-9.]* -> [0-9.]*' <<<"$out"), $(grep -m1 -o 'compressed_all_reduce.*' <<<"$out" | tr -s ' ' | cut -c1-60)"
else echo "FAIL the real OnebitAdam file: exit $rc"; echo "$out" | tail -5; fail=1; fi

# 5. refusals
bad "onebit_adam with zero3" "optimizer.type: onebit_adam with parallel.strategy zero3 is not implemented" \
  train "$T/m.yaml" --set parallel.strategy=zero3
bad "onebit_adam with zero2" "optimizer.type: onebit_adam with parallel.strategy zero2 is not implemented" \
  train "$T/m.yaml" --set parallel.strategy=zero2
bad "a negative freeze step" "optimizer.onebit_freeze_step" train "$T/m.yaml" --set optimizer.onebit_freeze_step=-1
printf '{"train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 1},\n "optimizer": {"type": "OneBitAdam", "params": {"lr": 1e-3, "freeze_step": 10}}}\n' > "$T/ds.json"
bad "OneBitAdam with ZeRO stage 1" "onebit_adam with parallel.strategy zero1 is not implemented" config "$T/ds.json"
exit $fail
