#!/usr/bin/env bash
# sp.sh BUILD SOURCE - sequence parallelism over the tensor-parallel ranks (parallel.sequence_parallel,
# docs/parallelism.md), under mpirun on up to 4 oversubscribed ranks:
#  1. bad settings exit 2 naming the keys: sequence_parallel without tensor parallelism, a seq_len
#     the tp ranks do not divide;
#  2. where the summation order is the same the runs are bit-identical to tp without sp: with the
#     norms frozen (their weight gradients are the one sum sp splits differently: each part adds its
#     own rows, then the parts are added) sp = no sp in hash and losses, GPT-2 and Llama, fp32 and
#     bf16, and on tp 4 (the reduce-scatter adds the 4 parts in the all-reduce's tree); with every
#     parameter trained the first step's loss is the same bits (forward is);
#  3. with the norms trained, sp stays within the tolerance derived in the run as tests/tp.sh does
#     (8 x what a one-ulp perturbation of every initial parameter of the tp run produces), and a
#     run that really differs (lr x 1.01) is outside it (GPT-2, Llama, and the Llama with q/k/v
#     biases, Qwen2's);
#  4. sp composes with data parallelism: sp tp 2 x dp 2 under zero3 (4 ranks) = sp tp 2 with 2
#     micro-batches on 2 ranks, bit for bit, and zero2 with full recomputation too; tool_dist_check
#     holds the dp bytes to the strategies' formulas and the tp bytes to docs/parallelism.md's:
#     each all-reduce's bytes moved as a reduce-scatter plus an all-gather, plus backward's
#     re-gathers and the norms' gradient all-reduces;
#  5. memory: planned = measured per class and rank with sp (tool_memory_check --sp), and the
#     activation high-water is smaller than without sp;
#  6. `zerotrain train` with parallel.sequence_parallel: the losses tp without sp prints, the same
#     sampled text (generation runs position counts that tp does not divide), a run resumed from
#     its checkpoint ends on the uninterrupted run's hash, and the comm log has rows of the tp group.
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
cp "$T/gpl.bin" "$T/gpl50k.bin" # section 6 samples text: GPT-2's own ids and vocabulary there
fold_tokens "$T/gpl.bin"
cat > "$T/g.yaml" <<YEOF
model: {preset: tiny, n_layer: 2, n_embd: 64, n_head: 4, vocab_size: $TINY_VOCAB}
data: {train: $T/gpl.bin}
training: {micro_batch_size: 2, seq_len: 32, steps: 4, lr: 1e-3}
YEOF

# 1. bad settings
bad "sp without tp" "parallel.sequence_parallel: true needs parallel.tensor_parallel_size > 1" \
  train "$T/g.yaml" --set parallel.sequence_parallel=true
bad "sp, seq_len 31 over tp 2" "parallel.sequence_parallel: parallel.tensor_parallel_size 2 does not divide training.seq_len (31)" \
  train "$T/g.yaml" --nproc 2 --set parallel.tensor_parallel_size=2 --set parallel.sequence_parallel=true \
  --set training.seq_len=31

# the runs on N ranks go to one MPI job per N (tests/tool_serve.bash); one that job cannot take
# runs alone
source "$(dirname "${BASH_SOURCE[0]}")/tool_serve.bash"
for n in 2 4; do serve_start "n$n" mpirun -np "$n" --oversubscribe --bind-to none -x OMP_NUM_THREADS -x ZT_COMM_TIMEOUT "$TOOL"; done
run() { # N args...
  local n="$1" rc=0; shift
  serve_run "n$n" "$@" || rc=$?
  [ $rc = 99 ] || return $rc
  mpirun -np "$n" --oversubscribe --bind-to none -x OMP_NUM_THREADS -x ZT_COMM_TIMEOUT "$TOOL" "$@" 2>&1
}
tp_bytes_ok() { # label output: tool_dist_check printed the tp bytes and they equal its formula
  local line; line="$(grep -o 'tp bytes.*' <<<"$2" || true)"
  if [ -n "$line" ] && ! grep -q "bytes sent over the dp group" <<<"$2"; then echo "     $1: $line"
  else echo "FAIL $1: tp bytes or dp bytes off the formulas: ${line:-none}"; grep -m1 'bytes sent' <<<"$2"; fail=1; fi
}

# 2. bit-identical where the order is the same
STEPS=6
NORMS='.*(ln_|norm).*'
declare -A act # the activation high-waters (bytes) the fp32 runs print, for part 5
for arch in gpt2 llama; do
  for prec in fp32 bf16; do
    key="$arch-$prec-frozen"
    out="$(run 2 ddp 1 $STEPS --tp 2 --arch $arch --precision $prec --freeze "$NORMS")"
    check "$arch $prec tp 2, norms frozen" "$key" "$out"
    act[$arch-$prec-tp]="$(sed -n 's/^activations //p' <<<"$out")"
    out="$(run 2 ddp 1 $STEPS --tp 2 --arch $arch --precision $prec --freeze "$NORMS" --sp)"
    check "$arch $prec sp tp 2 = tp 2, norms frozen" "$key" "$out"
    act[$arch-$prec-sp]="$(sed -n 's/^activations //p' <<<"$out")"
    tp_bytes_ok "$arch $prec sp" "$out"
  done
done
check "gpt2 tp 4 (4 heads), norms frozen" tp4 "$(run 4 ddp 1 $STEPS --tp 4 --n-head 4 --freeze "$NORMS")"
check "gpt2 sp tp 4 = tp 4: the reduce-scatter adds 4 parts in the all-reduce's tree" tp4 \
  "$(run 4 ddp 1 $STEPS --tp 4 --n-head 4 --freeze "$NORMS" --sp)"

# 3. norms trained: within the tolerance derived here (tests/tp.sh's method, the tp run as reference);
# the first step's loss (forward only) is the same bits
dump() { local n="$1" f="$2"; shift 2; run "$n" ddp 1 10 --dump "$T/$f.bin" "$@" | grep '^losses' > "$T/$f.losses"; }
for arch in gpt2 llama qwen2; do # qwen2: the Llama with q/k/v biases
  dump 2 ref --arch $arch --tp 2; dump 2 ulp --arch $arch --tp 2 --ulp; dump 2 sp --arch $arch --tp 2 --sp
  dump 2 lr --arch $arch --tp 2 --lr 0.0101
  a="$(cut -d' ' -f2 "$T/ref.losses")" b="$(cut -d' ' -f2 "$T/sp.losses")"
  if [ -n "$a" ] && [ "$a" = "$b" ]; then echo "ok   $arch sp first loss = tp's, bit for bit: $a"
  else echo "FAIL $arch first loss: sp '$b' vs tp '$a'"; fail=1; fi
  python3 "$SRC/tests/tolerance.py" "$T" $arch ref ulp "sp=inside=sp tp 2 vs tp 2" "lr=outside=lr x 1.01 (must fail)" || fail=1
done

# 4. with data parallelism
out="$(run 2 ddp 2 $STEPS --tp 2 --sp)"; check "gpt2 sp tp 2, 2 micro-batches, 2 ranks" sp-dp "$out"
out="$(run 4 zero3 1 $STEPS --tp 2 --sp)"; check "gpt2 sp tp 2 x dp 2 zero3, 4 ranks" sp-dp "$out"; tp_bytes_ok "zero3" "$out"
out="$(run 4 zero2 1 $STEPS --tp 2 --sp --recompute full)"; check "gpt2 sp tp 2 x dp 2 zero2, full recomputation" sp-dp "$out"
tp_bytes_ok "zero2 full recomputation" "$out"
out="$(run 2 ddp 2 $STEPS --tp 2 --sp --arch llama)"; check "llama sp tp 2, 2 micro-batches, 2 ranks" sp-dp-llama "$out"
out="$(run 4 zero3 1 $STEPS --tp 2 --sp --arch llama)"; check "llama sp tp 2 x dp 2 zero3, 4 ranks" sp-dp-llama "$out"

# 5. memory: planned = measured, and less than without sp
mem "sp tp 2 ddp" 2 ddp 1 2 --tp 2 --sp
mem "sp tp 2 x dp 2 zero3" 4 zero3 1 2 --tp 2 --sp
mem "sp tp 2 x dp 2 zero1 bf16, 2 micro-batches" 4 zero1 2 2 --tp 2 --precision bf16 --sp
mem "sp tp 2 x dp 2 zero2 selective recompute" 4 zero2 1 2 --tp 2 --recompute selective --sp
for k in gpt2-fp32 gpt2-bf16 llama-fp32 llama-bf16; do
  a="${act[$k-tp]:-}" b="${act[$k-sp]:-}"
  if [ -n "$a" ] && [ -n "$b" ] && [ "$b" -lt "$a" ]; then echo "ok   ${k/-/ } activations: sp $b < tp $a bytes"
  else echo "FAIL ${k/-/ } activations: sp '$b' vs tp '$a'"; fail=1; fi
done

# 6. zerotrain train
TP=(--nproc 2 --set parallel.tensor_parallel_size=2 --set sample.tokens=12 --set data.train="$T/gpl50k.bin" --set model.vocab_size=50257)
a="$("$Z" train "$T/g.yaml" "${TP[@]}" 2>&1)" || { echo "FAIL tp train: $(tail -2 <<<"$a")"; fail=1; }
b="$("$Z" train "$T/g.yaml" "${TP[@]}" --set parallel.sequence_parallel=true --comm-log 1 2>&1)" ||
  { echo "FAIL sp train: $(tail -2 <<<"$b")"; fail=1; }
losses() { grep -o 'loss [0-9.]* -> [0-9.]*' <<<"$1" || true; }
sample() { sed -n '/^--- sample/{n;p}' <<<"$1"; }
if [ -n "$(losses "$a")" ] && [ "$(losses "$a")" = "$(losses "$b")" ] && [ -n "$(sample "$a")" ] &&
   [ "$(sample "$a")" = "$(sample "$b")" ] && grep -q "every class of every rank reached exactly its planned" <<<"$b"; then
  echo "ok   zerotrain train sp: $(losses "$b") as tp, the same sample, planned = measured"
else echo "FAIL zerotrain train sp: '$(losses "$b")' vs '$(losses "$a")', samples '$(sample "$b")' vs '$(sample "$a")'"; fail=1; fi
hash_line() { grep -o 'params xxh64 [0-9a-f]*' <<<"$1" || true; }
SP=(--nproc 2 --set parallel.tensor_parallel_size=2 --set parallel.sequence_parallel=true --set training.steps=6)
c="$("$Z" train "$T/g.yaml" "${SP[@]}" --ckpt-dir "$T/ck" --ckpt-every 3 2>&1)" || true
d="$("$Z" train "$T/g.yaml" "${SP[@]}" --resume "$T/ck/step-00000003" 2>&1)" || true
if [ -n "$(hash_line "$c")" ] && [ "$(hash_line "$c")" = "$(hash_line "$d")" ]; then
  echo "ok   sp resumed from its step 3 = uninterrupted: $(hash_line "$d")"
else echo "FAIL sp resume: '$(hash_line "$d")' vs '$(hash_line "$c")'"; fail=1; fi
for op in reduce_scatter all_gather all_reduce; do
  if grep -qE "^$op +tp +2 " <<<"$b"; then echo "ok   comm log: $op rows of the tp group"
  else echo "FAIL comm log: no $op row of the tp group"; fail=1; fi
done

exit $fail
