#!/usr/bin/env bash
# time_to_loss.sh BUILD SOURCE - eval.target_loss (stop at a validation loss) and the fairness of
# bench/time_to_loss.sh's PyTorch peer:
#  1. a tiny GPT-2 on the GPL (train GPL-3, validation GPL-2) with eval.every 5 and a target between
#     the loss at the first evaluation and the last: the run stops at the first evaluation at or below
#     the target (exit 0), says so, and logs target_reached with step x B x T tokens; the evaluation
#     before it was above the target;
#  2. the same run on 2 ranks under zero3 (1 micro-batch each instead of 2 accumulated) stops at the same step
#     with the same parameter hash; without a target the run goes on past that step;
#  3. the PyTorch peer (bench/torch_gpt2.py --target-loss) started from the same initial parameters
#     (--save-init, `train --init`) trains on the same samples in the same order under the same
#     schedule: its training and validation losses equal zerotrain's to 2e-4 at every evaluation
#     of 10 fp32 steps (measured: equal to the 4 printed decimals);
#  4. eval.target_loss without data.val exits 2 naming both keys.
set -euo pipefail
BUILD="$1"; SRC="$2"; Z="$BUILD/zerotrain"
export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
"$Z" tokenize /usr/share/common-licenses/GPL-3 -o "$T/train.bin" >/dev/null
"$Z" tokenize /usr/share/common-licenses/GPL-2 -o "$T/val.bin" >/dev/null
cat >"$T/c.yaml" <<EOF
model: {preset: tiny, n_layer: 2, n_head: 2, n_embd: 32, max_seq_len: 32}
data: {train: $T/train.bin, val: $T/val.bin}
training: {micro_batch_size: 2, gradient_accumulation_steps: 2, seq_len: 32, steps: 60, lr: 1e-2, warmup_steps: 5, seed: 7}
eval: {every: 5, batches: 4}
logging: {print_every: 1000}
EOF
vals() { grep -oE '^step [0-9]+: val loss [0-9.]+$' <<<"$1" | awk '{print $2, $5}' | tr -d :; }

# 1. where the loss goes without a target, then a target between its first and last evaluation
full="$("$Z" train "$T/c.yaml" 2>&1)"
first=$(vals "$full" | head -1 | cut -d' ' -f2); last=$(vals "$full" | tail -1 | cut -d' ' -f2)
target=$(awk -v a="$first" -v b="$last" 'BEGIN { printf "%.4f", b + (a - b) * 0.3 }')
want=$(vals "$full" | awk -v t="$target" '$2 <= t { print $1; exit }')
prev=$(vals "$full" | awk -v w="$want" '$1 == w - 5 { print $2 }')
out="$("$Z" train "$T/c.yaml" --set eval.target_loss="$target" --set logging.jsonl="$T/log.jsonl" 2>&1)" || {
  echo "FAIL the run with eval.target_loss $target exited $?"; echo "$out" | tail -5; fail=1; }
steps=$(grep -oE '^done: [0-9]+ steps' <<<"$out" | awk '{print $2}')
ev="$(grep '"target_reached"' "$T/log.jsonl" || true)"
if [ "$steps" = "$want" ] && grep -q "target reached after" <<<"$out" &&
   grep -q "\"step\":$want," <<<"$ev" && grep -q "\"tokens\":$((want * 4 * 32))}" <<<"$ev" &&
   awk -v p="$prev" -v t="$target" 'BEGIN { exit !(p > t) }'; then
  echo "ok   1 rank: losses $first -> $last without a target; target $target reached at step $want (step $((want - 5)): $prev), $ev"
else
  echo "FAIL 1 rank: target $target, expected to stop at step $want, stopped after ${steps:-?}: $ev"; fail=1
fi
hash1=$(grep -oE 'xxh64 [0-9a-f]+' <<<"$out" | awk '{print $2}')

# 2. 2 ranks, zero3, the same global batch: the same stop and parameters
out2="$("$Z" train "$T/c.yaml" --nproc 2 --set parallel.strategy=zero3 --set training.gradient_accumulation_steps=1 \
        --set eval.target_loss="$target" 2>&1)" || true
steps2=$(grep -oE '^done: [0-9]+ steps' <<<"$out2" | awk '{print $2}')
hash2=$(grep -oE 'xxh64 [0-9a-f]+' <<<"$out2" | awk '{print $2}')
if [ "$steps2" = "$want" ] && [ "$hash2" = "$hash1" ]; then echo "ok   2 ranks zero3: step $steps2, params $hash2"
else echo "FAIL 2 ranks zero3: ${steps2:-?} steps, params ${hash2:-?} (1 rank: $want, $hash1)"; echo "$out2" | tail -3; fail=1; fi
if [ "$(grep -oE '^done: [0-9]+ steps' <<<"$full" | awk '{print $2}')" = 60 ]; then echo "ok   without a target: 60 steps"
else echo "FAIL the run without a target did not run its 60 steps"; fail=1; fi

# 3. the PyTorch peer from the same initial parameters: the same losses
if /usr/bin/python3 -c 'import torch, numpy' 2>/dev/null; then
  PEER=(/usr/bin/python3 "$SRC/bench/torch_gpt2.py" --preset tiny --shape 2,2,32 --max-seq-len 32 -B 4 -T 32
        --threads 1 --seed 7 --lr 1e-2)
  "${PEER[@]}" --save-init "$T/init.safetensors" >/dev/null
  zt="$("$Z" train "$T/c.yaml" --init "$T/init.safetensors" --set training.steps=10 --set training.warmup_steps=5 \
        --set training.micro_batch_size=4 --set training.gradient_accumulation_steps=1 --set logging.print_every=5 2>&1)"
  pt="$("${PEER[@]}" --init "$T/init.safetensors" --data "$T/train.bin" --val "$T/val.bin" --target-loss 0.001 \
        --total-steps 10 --warmup-steps 5 --eval-every 5 --eval-batches 4 2>&1)" || true
  ztl=$(grep -oE '^step +(5|10)/10 \| loss [0-9.]+' <<<"$zt" | awk '{print $5}' | tr '\n' ' ')
  ztv=$(vals "$zt" | cut -d' ' -f2 | tr '\n' ' ')
  ptl=$(grep -oE '^step [0-9]+: loss [0-9.]+' <<<"$pt" | awk '{print $4}' | tr '\n' ' ')
  ptv=$(grep -oE 'val loss [0-9.]+' <<<"$pt" | awk '{print $3}' | tr '\n' ' ')
  if [ -n "$ztl" ] && awk -v a="$ztl $ztv" -v b="$ptl $ptv" 'BEGIN { n = split(a, x); m = split(b, y); if (n != m || n < 4) exit 1;
       for (i = 1; i <= n; i++) if (x[i] - y[i] > 2e-4 || y[i] - x[i] > 2e-4) exit 1 }'; then
    echo "ok   the PyTorch peer from the same initial parameters: train losses $ptl, val $ptv (zerotrain: $ztl, $ztv)"
  else echo "FAIL the PyTorch peer: train $ptl val $ptv; zerotrain: train $ztl val $ztv"; echo "$pt" | tail -3; fail=1; fi
else
  echo "skip 3: no python3-torch"
fi

# 4. a target needs a validation file
if e="$("$Z" train "$T/c.yaml" --set data.val= --set eval.every=0 --set eval.target_loss=3 2>&1)"; then
  echo "FAIL eval.target_loss without data.val was accepted"; fail=1
elif grep -q "eval.target_loss: 3 needs validation data: set data.val" <<<"$e"; then echo "ok   without data.val: $e"
else echo "FAIL without data.val: $e"; fail=1; fi
exit $fail
