#!/usr/bin/env bash
# loss_chunk.sh BUILD SOURCE - the loss in chunks (memory.loss_chunk_tokens, docs/memory.md): the
# LM head's logits and the cross-entropy computed R tokens at a time in forward and again in
# backward, so no (B*T, V) buffer is kept; with `zerotrain train` on GPT-2 and Llama, under mpirun:
#  1. a bad value exits 2 naming the key;
#  2. a chunk of B*T tokens or more is the unchunked run, bit for bit (fp32, bf16): the trainer runs
#     it unchunked (zt_loss_chunk_for);
#  3. chunked (R = 24 of B*T = 64, the last chunk short), the losses stay within 2e-4 of the
#     unchunked run's over 6 steps (the LM head's weight gradient is summed over other blocks of
#     rows: rounding, not a change of the math; a wrong chunk moves the first loss by far more) and
#     the strategies and parallelisms keep their bit-identities with chunks: zero3 on 2 ranks =
#     1 process with 2 micro-batches; Llama pp 2 = 1 process; tp 2 (vocabulary-parallel loss in
#     chunks) = tp 2 within the same 2e-4; sampling (batches of 1 x the context: one chunk, then
#     several) gives the unchunked text, 1 process and tp 2, and evaluation its losses;
#  4. every class of every rank reaches exactly its planned memory, and estimate-memory plans fewer
#     activation bytes with chunks, by the saved logits less the chunk's scratch.
set -uo pipefail
BUILD="$1"
SRC="$2"
Z="$BUILD/zerotrain"
export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ZT_COMM_TIMEOUT=120
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
source "$SRC/tests/dist_check.bash" # bad; sets fail=0

"$Z" tokenize /usr/share/common-licenses/GPL-3 -o "$T/gpl.bin" >/dev/null || { echo "FAIL tokenize"; exit 1; }
cat > "$T/gpt2.yaml" <<YEOF
model: {preset: tiny, n_layer: 2, n_embd: 64, n_head: 4, vocab_size: 50257}
data: {train: $T/gpl.bin}
training: {micro_batch_size: 2, seq_len: 32, steps: 6, lr: 1e-3, warmup_steps: 1}
sample: {tokens: 0}
YEOF
cat > "$T/llama.yaml" <<YEOF
model: {preset: llama-tiny, vocab_size: 50257}
data: {train: $T/gpl.bin}
training: {micro_batch_size: 2, seq_len: 32, steps: 6, lr: 1e-3, warmup_steps: 1}
sample: {tokens: 0}
YEOF

# 1. bad value
bad "negative chunk" "memory.loss_chunk_tokens: expected a non-negative integer" \
  train "$T/gpt2.yaml" --set memory.loss_chunk_tokens=-1

train() { "$Z" train "$@" 2>&1; }
hash_of_run() { grep -o 'params xxh64 [0-9a-f]*' <<<"$1" | cut -d' ' -f3; }
losses_of_run() { grep -oE '^step +[0-9]+.*loss [0-9.]+' <<<"$1" | grep -oE 'loss [0-9.]+' | cut -d' ' -f2 | tr '\n' ' '; }
planned() { grep -q "every class of every rank reached exactly its planned" <<<"$1"; }
same() { # label a b: the same params hash
  local ha hb; ha="$(hash_of_run "$2")" hb="$(hash_of_run "$3")"
  if [ -n "$ha" ] && [ "$ha" = "$hb" ]; then echo "ok   $1: $ha"
  else echo "FAIL $1: '$hb' vs '$ha'"; echo "$3" | tail -3; fail=1; fi
}
close() { # label a b: losses within 2e-4 at every step, a planned = measured run b
  local la lb; la="$(losses_of_run "$2")" lb="$(losses_of_run "$3")"
  if [ -n "$la" ] && python3 - "$la" "$lb" <<'PY' && planned "$3"; then echo "ok   $1: losses $lb vs $la"
import sys
a, b = [list(map(float, s.split())) for s in sys.argv[1:3]]
sys.exit(0 if len(a) == len(b) == 6 and all(abs(x - y) <= 2e-4 for x, y in zip(a, b)) else 1)
PY
  else echo "FAIL $1: losses '$lb' vs '$la' (or planned memory missed)"; echo "$3" | tail -3; fail=1; fi
}

for arch in gpt2 llama; do
  for prec in fp32 bf16; do
    P=(--set precision.mode=$prec)
    # 2. a chunk of the whole micro-batch (64 tokens) or more: the old path
    whole="$(train "$T/$arch.yaml" "${P[@]}")"
    same "$arch $prec chunk 64 = unchunked" "$whole" "$(train "$T/$arch.yaml" "${P[@]}" --set memory.loss_chunk_tokens=64)"
    same "$arch $prec chunk 1000 = unchunked" "$whole" "$(train "$T/$arch.yaml" "${P[@]}" --set memory.loss_chunk_tokens=1000)"
    # 3. in chunks of 24
    chunked="$(train "$T/$arch.yaml" "${P[@]}" --set memory.loss_chunk_tokens=24)"
    close "$arch $prec chunk 24 vs unchunked" "$whole" "$chunked"
    DP=(--set memory.loss_chunk_tokens=24 "${P[@]}")
    one="$(train "$T/$arch.yaml" "${DP[@]}" --set training.gradient_accumulation_steps=2)"
    two="$(train "$T/$arch.yaml" "${DP[@]}" --nproc 2 --set parallel.strategy=zero3)"
    same "$arch $prec chunk 24: zero3 on 2 ranks = 1 process, 2 micro-batches" "$one" "$two"
    planned "$two" || { echo "FAIL $arch $prec zero3 chunked: planned memory missed"; fail=1; }
  done
done
base="$(train "$T/llama.yaml" --set memory.loss_chunk_tokens=24)"
same "llama chunk 24: pp 2 = 1 process" "$base" \
  "$(train "$T/llama.yaml" --set memory.loss_chunk_tokens=24 --nproc 2 --set parallel.pipeline_parallel_size=2)"
TP=(--nproc 2 --set parallel.tensor_parallel_size=2)
close "gpt2 tp 2, vocabulary-parallel loss in chunks of 24 vs tp 2" "$(train "$T/gpt2.yaml" "${TP[@]}")" \
  "$(train "$T/gpt2.yaml" "${TP[@]}" --set memory.loss_chunk_tokens=24)"

# generation (a batch of 1 x the growing context: one chunk while it is at most 7 tokens, then
# several) and evaluation run through the chunks too: the same text as unchunked, 1 process and tp 2
sample() { sed -n '/^--- sample/{n;p}' <<<"$1"; }
G=(--set sample.tokens=16 --set data.val="$T/gpl.bin" --set eval.every=3 --set eval.batches=2)
ref="$(train "$T/gpt2.yaml" "${G[@]}")"
for extra in "" "--nproc 2 --set parallel.tensor_parallel_size=2"; do
  out="$(train "$T/gpt2.yaml" "${G[@]}" --set memory.loss_chunk_tokens=7 $extra)"
  val() { grep -oE 'val [0-9.]+' <<<"$1" | tr '\n' ' '; }
  if [ -n "$(sample "$ref")" ] && [ "$(sample "$out")" = "$(sample "$ref")" ] && [ -n "$(val "$out")" ] &&
     python3 -c "import sys; a, b = sys.argv[1].split()[1::2], sys.argv[2].split()[1::2]; sys.exit(0 if a and len(a) == len(b) and all(abs(float(x) - float(y)) <= 2e-4 for x, y in zip(a, b)) else 1)" "$(val "$ref")" "$(val "$out")"; then
    echo "ok   chunks of 7${extra:+ (tp 2)}: the same sample, validation $(val "$out")"
  else echo "FAIL chunks of 7${extra:+ (tp 2)}: sample '$(sample "$out")' vs '$(sample "$ref")', validation '$(val "$out")' vs '$(val "$ref")'"; fail=1; fi
done

# 4. estimate-memory: the activations shrink by the (64, 50257) fp32 logits less the chunk's scratch
act() { "$Z" estimate-memory "$T/gpt2.yaml" "$@" 2>&1 | grep -m1 'activations (outputs' | awk '{print $(NF)}'; }
a="$(act)" b="$(act --set memory.loss_chunk_tokens=24)"
if [ -n "$a" ] && [ -n "$b" ] && python3 -c "import sys; sys.exit(0 if float('$b') < float('$a') else 1)"; then
  echo "ok   estimate-memory activations: $b MiB with chunks of 24 < $a MiB"
else echo "FAIL estimate-memory activations: '$b' vs '$a'"; fail=1; fi
exit $fail
