#!/usr/bin/env bash
# tp.sh BUILD SOURCE - the parallel mesh and tensor parallelism (docs/parallelism.md), under mpirun:
#  1. bad parallel sizes exit 2 naming the keys and the numbers: tensor_parallel_size that does not
#     divide the heads (GPT-2), the key/value heads (Llama), pipeline_parallel_size larger than the
#     model's units, a world size not divisible by tp x pp.
set -euo pipefail
BUILD="$1"
SRC="$2"
Z="$BUILD/zerotrain"
export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ZT_COMM_TIMEOUT=120
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0

"$Z" tokenize /usr/share/common-licenses/GPL-3 -o "$T/gpl.bin" >/dev/null
cat > "$T/g.yaml" <<YEOF
model: {preset: tiny, n_layer: 2, n_embd: 64, n_head: 4, vocab_size: 50257}
data: {train: $T/gpl.bin}
training: {micro_batch_size: 2, seq_len: 32, steps: 4, lr: 1e-3}
YEOF

# 1. bad sizes: exit 2, the message names the key and the numbers
bad() { # label "expected text" zerotrain-args...
  local label="$1" want="$2"; shift 2
  local out rc=0
  out="$("$Z" "$@" 2>&1)" || rc=$?
  if [ $rc -eq 2 ] && grep -qF -- "$want" <<<"$out"; then echo "ok   $label: exit 2: $want"
  else echo "FAIL $label: exit $rc, expected 2 and '$want':"; echo "$out" | tail -3; fail=1; fi
}
bad "tp 3 vs 4 heads" "parallel.tensor_parallel_size: 3 does not divide model.n_head (4)" \
  train "$T/g.yaml" --nproc 3 --set parallel.tensor_parallel_size=3
bad "tp 4 vs 2 KV heads" "parallel.tensor_parallel_size: 4 does not divide model.n_kv_head (2)" \
  train "$T/g.yaml" --nproc 4 --set model.preset=llama-tiny --set parallel.tensor_parallel_size=4
bad "pp 5 vs 4 units" "parallel.pipeline_parallel_size: 5 stages for the model's 4 units" \
  train "$T/g.yaml" --nproc 5 --set parallel.pipeline_parallel_size=5
bad "world 3 vs tp 2" "the world size 3 is not divisible by parallel.tensor_parallel_size 2 x parallel.pipeline_parallel_size 1 = 2" \
  train "$T/g.yaml" --nproc 3 --set parallel.tensor_parallel_size=2

exit $fail
