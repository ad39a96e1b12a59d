#!/usr/bin/env bash
# bench/pp.sh [STEPS] - pipeline parallelism's bubble on a cut balanced in time: GPT-2 with 8 blocks
# of C 512 on the first stage and the head (its 50257-wide logits, about as much compute) alone on
# the second, B 1 x T 64, 8 micro-batches per step, 1f1b and gpipe on 2 ranks x 1 thread. Prints
# each schedule's last step line, the measured bubble per stage beside (p-1)/(m+p-1), and the
# memory plan per rank (gpipe keeps all 8 micro-batches' activations in flight, 1f1b at most 2).
# Not a test: timings depend on the machine and its load.
set -euo pipefail
cd "$(dirname "$0")/.."
Z=build/zerotrain
STEPS="${1:-4}"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
"$Z" tokenize /usr/share/common-licenses/GPL-3 -o "$T/gpl.bin" >/dev/null
cat > "$T/big.yaml" <<YEOF
model: {preset: tiny, n_layer: 8, n_embd: 512, n_head: 8, vocab_size: 50257}
data: {train: $T/gpl.bin}
training: {micro_batch_size: 1, seq_len: 64, steps: $STEPS, lr: 1e-3, gradient_accumulation_steps: 8}
YEOF
echo "cpu family $(grep -m1 'cpu family' /proc/cpuinfo | cut -d: -f2) | OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset} | load $(cut -d' ' -f1-3 /proc/loadavg)"
for s in 1f1b gpipe; do
  "$Z" train "$T/big.yaml" --nproc 2 --set parallel.pipeline_parallel_size=2 --set parallel.pipeline_stages=9,1 \
    --set parallel.pipeline_schedule=$s 2>&1 | grep -E "^parallel|step +$STEPS/|bubble|^ +[01] " | cut -c1-240
done
