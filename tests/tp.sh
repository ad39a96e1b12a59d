#!/usr/bin/env bash
# tp.sh BUILD SOURCE - the parallel mesh and tensor parallelism (docs/parallelism.md), under mpirun
# on up to 8 oversubscribed ranks:
#  1. bad parallel sizes exit 2 naming the keys and the numbers: tensor_parallel_size that does not
#     divide the heads (GPT-2), the key/value heads (Llama), pipeline_parallel_size larger than the
#     model's units, a world size not divisible by tp x pp, LoRA adapters with tp (not cut yet);
#  2. where the summation order is kept fixed the runs are bit-identical (losses and the final
#     parameters' hash): tp 2 with 2 micro-batches on 2 ranks = tp 2 x dp 2 on 4 ranks under ddp,
#     zero1, zero2 with full recomputation, zero3 and hybrid (GPT-2; Llama, and Qwen2's with q/k/v
#     biases, under zero3), every step's
#     dp collective bytes equal to the formulas over each part's own parameters and the tp group's
#     bytes to docs/parallelism.md's formula (tool_dist_check checks both);
#  3. where it cannot be (tp 2 against one process: the row-parallel products and the input
#     gradients of the column-parallel ones add their halves in another order, and the smaller
#     products may block differently), losses and parameters agree within a tolerance derived in
#     the run itself (tests/tolerance.py), and a run that really differs (lr + 1%) is outside it
#     (GPT-2, Llama, and the Llama with q/k/v biases, Qwen2's);
#  4. the memory plan covers tp: planned = measured per class and rank (tool_memory_check --tp);
#  5. checkpoints hold logical tensors: a tp 2 commit re-saved on one process (ddp) and re-saved
#     back under tp 2 gives byte-identical shard files, the tp 2 run resumed from its commit ends
#     on the uninterrupted run's hash, a ddp run resumes from the tp 2 commit exactly as from its
#     ddp copy, and the weights file tp 2 saves is the one-process run's from the same commit;
#  6. Accelerate's own tp_hsdp config (tp 2 x dp replicate 2 x dp shard 2 on 8 ranks, bf16)
#     resolves and trains a tiny GPT-2, planned = measured on every rank.
set -euo pipefail
BUILD="$1"
SRC="$2"
Z="$BUILD/zerotrain"
TOOL="$BUILD/tests/tool_dist_check"
MEMT="$BUILD/tests/tool_memory_check"
export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ZT_COMM_TIMEOUT=120
T=$(mktemp -d)
trap 'declare -F serve_stop >/dev/null && serve_stop; rm -rf "$T"' EXIT
source "$SRC/tests/dist_check.bash" # hash_of, losses_of, check, bad, mem; sets fail=0

source "$(dirname "${BASH_SOURCE[0]}")/tiny_vocab.bash"
"$Z" tokenize /usr/share/common-licenses/GPL-3 -o "$T/gpl.bin" >/dev/null
fold_tokens "$T/gpl.bin"
cat > "$T/g.yaml" <<YEOF
model: {preset: tiny, n_layer: 2, n_embd: 64, n_head: 4, vocab_size: $TINY_VOCAB}
data: {train: $T/gpl.bin}
training: {micro_batch_size: 2, seq_len: 32, steps: 4, lr: 1e-3}
YEOF

# 1. bad sizes: exit 2, the message names the key and the numbers
bad "tp 3 vs 4 heads" "parallel.tensor_parallel_size: 3 does not divide model.n_head (4)" \
  train "$T/g.yaml" --nproc 3 --set parallel.tensor_parallel_size=3
bad "tp 4 vs 2 KV heads" "parallel.tensor_parallel_size: 4 does not divide model.n_kv_head (2)" \
  train "$T/g.yaml" --nproc 4 --set model.preset=llama-tiny --set parallel.tensor_parallel_size=4
bad "pp 5 vs 4 units" "parallel.pipeline_parallel_size: 5 stages for the model's 4 units" \
  train "$T/g.yaml" --nproc 5 --set parallel.pipeline_parallel_size=5
bad "tp 2 with LoRA" "parallel.tensor_parallel_size: 2 with lora.rank 4: LoRA adapters are not cut for tensor parallelism yet" \
  train "$T/g.yaml" --nproc 2 --set parallel.tensor_parallel_size=2 --set lora.rank=4
bad "world 3 vs tp 2" "parallel.tensor_parallel_size: 2 x parallel.pipeline_parallel_size 1 = 2 does not divide the world size 3" \
  train "$T/g.yaml" --nproc 3 --set parallel.tensor_parallel_size=2


# 2. bit-identical where the order is fixed
# the runs on N ranks go to one MPI job per N (tests/tool_serve.bash); one that job cannot take
# runs alone
source "$(dirname "${BASH_SOURCE[0]}")/tool_serve.bash"
for n in 1 2 4; do serve_start "n$n" mpirun -np "$n" --oversubscribe --bind-to none -x OMP_NUM_THREADS -x ZT_COMM_TIMEOUT "$TOOL"; done
run() { # N args...
  local n="$1" rc=0; shift
  serve_run "n$n" "$@" || rc=$?
  [ $rc = 99 ] || return $rc
  mpirun -np "$n" --oversubscribe --bind-to none -x OMP_NUM_THREADS -x ZT_COMM_TIMEOUT "$TOOL" "$@" 2>&1
}
bytes_ok() { # label output: the tool found every step's dp bytes equal to the formulas
  if grep -q "bytes sent over the dp group" <<<"$2"; then echo "FAIL $1: $(grep -m1 'bytes sent' <<<"$2")"; fail=1; fi
}
STEPS=6
for arch in gpt2 llama qwen2; do
  out="$(run 2 ddp 2 $STEPS --tp 2 --arch $arch)"; check "$arch tp 2, 2 micro-batches, 2 ranks" "$arch" "$out"
  strategies="ddp zero1 zero3"; [ $arch != gpt2 ] && strategies=zero3
  for s in $strategies; do
    out="$(run 4 $s 1 $STEPS --tp 2 --arch $arch)"; check "$arch tp 2 x dp 2 $s, 4 ranks" "$arch" "$out"; bytes_ok "$arch $s" "$out"
  done
done
out="$(run 4 zero2 1 $STEPS --tp 2 --recompute full)"; check "gpt2 tp 2 x dp 2 zero2, full recomputation" gpt2 "$out"
echo "     tp collective bytes per step (rank 0): $(grep -o 'tp bytes.*' <<<"$out")"
out="$(run 4 hybrid 1 $STEPS --tp 2 --hybrid 1)"; check "gpt2 tp 2 x dp (replicate 2 x shard 1) hybrid" gpt2 "$out"
echo "     tp collective bytes per step (rank 0): $(grep -o 'tp bytes.*' <<<"$out")"

# 3. tp 2 against one process, within a tolerance derived here. Both runs compute the same
# function in fp32; they differ only in the order of some additions (each is correctly rounded,
# u = 2^-24 relative), so the tp run is the one-process run plus rounding-level perturbations,
# which training then amplifies (Adam divides by sqrt(v): an element whose gradient is near zero
# can move by a whole step either way). The yardstick for "rounding-level" is measured: the same
# one-process run with every initial parameter moved one ulp (--ulp). The tolerance is 8 x what
# that perturbation produces after the same steps (8: the tp run perturbs many sums per step, the
# ulp run only the start; measured ratio 0.9-1.4 at 5-20 steps), with a floor of one fp32 ulp of
# the loss. A real difference must exceed it: the one-process run with lr x 1.01 (its divergence,
# measured 60-100 x the yardstick) is checked to fail the same test, so the test can fail.
STEPS=10
dump() { local n="$1" f="$2"; shift 2; run "$n" ddp 1 $STEPS --dump "$T/$f.bin" "$@" | grep '^losses' > "$T/$f.losses"; }
for arch in gpt2 llama qwen2; do # qwen2: the Llama with q/k/v biases, cut as their weights
  dump 1 ref --arch $arch; dump 1 ulp --arch $arch --ulp; dump 2 tp --arch $arch --tp 2; dump 1 lr --arch $arch --lr 0.0101
  python3 "$SRC/tests/tolerance.py" "$T" $arch ref ulp "tp=inside=tp 2 vs one process" "lr=outside=lr x 1.01 (must fail)" || fail=1
done

# 4. planned = measured with tp
mem "tp 2 ddp" 2 ddp 1 2 --tp 2
mem "tp 2 x dp 2 zero3" 4 zero3 1 2 --tp 2
mem "tp 2 x dp 2 zero1 bf16, 2 micro-batches" 4 zero1 2 2 --tp 2 --precision bf16
mem "tp 2 x dp 2 zero2 selective recompute" 4 zero2 1 2 --tp 2 --recompute selective

# 5. checkpoints: logical tensors, resharded across tp degrees
TP=(--nproc 2 --set parallel.tensor_parallel_size=2)
hash_line() { grep -o 'params xxh64 [0-9a-f]*' <<<"$1" || true; }
out="$("$Z" train "$T/g.yaml" --set training.steps=6 "${TP[@]}" --ckpt-dir "$T/ck" --ckpt-every 3 --save "$T/tp.ztw" 2>&1)" ||
  { echo "FAIL tp train: $(tail -2 <<<"$out")"; fail=1; }
want="$(hash_line "$out")"
o2="$("$Z" train "$T/g.yaml" --set training.steps=6 "${TP[@]}" --resume "$T/ck/step-00000003" 2>&1)" || true
if [ -n "$want" ] && [ "$(hash_line "$o2")" = "$want" ]; then echo "ok   tp 2 resumed from its step 3 = uninterrupted: $want"
else echo "FAIL tp 2 resume: '$(hash_line "$o2")' vs '$want'"; echo "$o2" | tail -2; fail=1; fi
"$Z" train "$T/g.yaml" --set training.steps=6 --resume "$T/ck/step-00000003" --stop-after 3 --ckpt-dir "$T/ddp" >/dev/null 2>&1 || true
"$Z" train "$T/g.yaml" --set training.steps=6 "${TP[@]}" --resume "$T/ddp/step-00000003" --stop-after 3 --ckpt-dir "$T/back" >/dev/null 2>&1 || true
if cmp -s "$T/ck/step-00000003/rank-00000.bin" "$T/back/step-00000003/rank-00000.bin" &&
   cmp -s "$T/ck/step-00000003/rank-00001.bin" "$T/back/step-00000003/rank-00001.bin"; then
  echo "ok   tp 2 commit -> ddp re-save -> tp 2 re-save: the shard files are byte-identical"
else echo "FAIL tp 2 -> ddp -> tp 2: the shard files differ (or are missing)"; fail=1; fi
"$Z" train "$T/g.yaml" --set training.steps=6 --resume "$T/ck" --stop-after 6 --save "$T/ddp.ztw" >/dev/null 2>&1 || true
if cmp -s "$T/tp.ztw" "$T/ddp.ztw"; then echo "ok   the weights file tp 2 saves (logical tensors) = one process's from its last commit"
else echo "FAIL tp 2 --save differs from the one-process weights file"; fail=1; fi
a="$("$Z" train "$T/g.yaml" --set training.steps=6 --resume "$T/ck/step-00000003" 2>&1 || true)"
b="$("$Z" train "$T/g.yaml" --set training.steps=6 --resume "$T/ddp/step-00000003" 2>&1 || true)"
if [ -n "$(hash_line "$a")" ] && [ "$(hash_line "$a")" = "$(hash_line "$b")" ]; then
  echo "ok   ddp resumed from the tp 2 commit = from its ddp copy: $(hash_line "$a")"
else echo "FAIL ddp from tp 2: '$(hash_line "$a")' vs '$(hash_line "$b")'"; fail=1; fi

# 6. the real Accelerate file: tp 2 x dp replicate 2 x dp shard 2 on 8 ranks
ACC="$SRC/tests/configs/real/accelerate.configs.tp_hsdp.yaml"
out="$("$Z" train "$ACC" --set data.train="$T/gpl.bin" --set training.steps=3 --set training.seq_len=32 \
       --set training.micro_batch_size=2 2>&1)" && rc=0 || rc=$?
if [ $rc -eq 0 ] && grep -q "mesh tp 2 x dp 4 x pp 1" <<<"$out" && grep -q "shard groups of 2" <<<"$out" &&
   grep -q "every class of every rank reached exactly its planned high-water" <<<"$out"; then
  echo "ok   accelerate tp_hsdp.yaml on 8 ranks: $(grep '^parallel:' <<<"$out" | cut -c1-110); $(grep -o 'loss [0-9.]* -> [0-9.]*' <<<"$out")"
else echo "FAIL accelerate tp_hsdp.yaml: exit $rc"; echo "$out" | tail -4; fail=1; fi

exit $fail
