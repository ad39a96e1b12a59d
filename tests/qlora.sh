#!/usr/bin/env bash
# qlora.sh BUILD SOURCE - QLoRA: LoRA on a frozen base stored quantized (lora.base_quant nf4|int8;
# src/engine/param_quant.c, docs/models.md), through `zerotrain train` on GPT-2 tiny and the GPL (v3 to train, v2 to validate):
#  1. a base pretrained briefly and exported to a Hugging Face directory; LoRA (all-linear, bf16)
#     from it with the base as bf16, nf4 and int8: the nf4 and int8 runs reach the bf16 base's
#     validation loss within 2%, their output says what the quantized base holds;
#  2. on 2 ranks (tool_dist_check, tool_memory_check): nf4 ddp, zero1, zero2 and zero3 (the
#     quantized base sharded on whole blocks, all-gathered per unit) give the same parameters, fp32
#     and bf16, int8 on a Llama too, and on 4 ranks (oversubscribed) ddp = hybrid (zero3 in groups
#     of 2); the base's hash unchanged and every collective's bytes the formulas' (zero3/hybrid: the
#     base's sharded bytes twice a micro-batch); zero3's params at rest this rank's quantized blocks;
#     every class of every rank at exactly its planned high-water (zero1, zero3 bf16; zero2, zero3 int8);
#  3. checkpoints: the quantized tensors are not in the files (the manifest records their kind and
#     xxh64); a resume from step 2 ends on the uninterrupted run's hash; `export --peft` with
#     --init-hf (the base) writes the adapters, without it exits 2; a resume on another base (no
#     model.init_hf) or another lora.base_quant exits 4 naming the tensor and the mismatch;
#  4. estimate-memory --quant nf4: llama-7b QLoRA r=16 all-linear model states below bf16 LoRA's,
#     on 1 rank and on 8 ranks zero3 (the 4-bit bytes sharded: below a quarter of bf16 LoRA's);
#  5. bad input exits 2 naming the keys and numbers: base_quant without lora.rank, an unknown
#     name, rows of 96 elements (not whole NF4 blocks of 64);
#  6. parameter offload (zero3, memory.offload_param nvme) with the nf4 base in memory: on 2 ranks
#     the same parameters as ddp, every class at its planned high-water.
set -euo pipefail
BUILD="$1"; SRC="$2"
Z="$BUILD/zerotrain"
export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ZT_COMM_TIMEOUT=120
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
source "$SRC/tests/dist_check.bash" # fail, bad
D="$T" # the GPL v3 to train on, the GPL v2 to validate (a clean clone has no data/)
"$Z" tokenize /usr/share/common-licenses/GPL-3 -o "$D/train.bin" >/dev/null
"$Z" tokenize /usr/share/common-licenses/GPL-2 -o "$D/val.bin" >/dev/null
source "$(dirname "${BASH_SOURCE[0]}")/tiny_vocab.bash"
fold_tokens "$D/train.bin" "$D/val.bin"
hash_line() { grep -o 'params xxh64 [0-9a-f]*' <<<"$1" || true; }
val_of() { grep '^done' <<<"$1" | grep -o '| val [0-9.]*' | cut -d' ' -f3; }

# 1. the base, then LoRA over it as bf16, nf4, int8
cat > "$T/base.yaml" <<YEOF
model: {preset: tiny, vocab_size: $TINY_VOCAB}
data: {train: $D/train.bin}
training: {micro_batch_size: 2, seq_len: 32, steps: 16, lr: 6e-3}
YEOF
"$Z" train "$T/base.yaml" --save "$T/base.ztw" >/dev/null
"$Z" export "$T/base.ztw" --hf "$T/base" >/dev/null
cat > "$T/q.yaml" <<YEOF
model: {preset: tiny, init_hf: $T/base}
data: {train: $D/train.bin, val: $D/val.bin}
training: {micro_batch_size: 2, seq_len: 32, steps: 8, lr: 1e-2}
eval: {batches: 4}
precision: {mode: bf16}
lora: {rank: 8, alpha: 16, target_modules: all-linear}
YEOF
ref="$("$Z" train "$T/q.yaml" 2>&1)"
vref="$(val_of "$ref")"
for q in nf4 int8; do
  out="$("$Z" train "$T/q.yaml" --set lora.base_quant=$q 2>&1)" || { echo "FAIL train $q"; echo "$out" | tail -3; fail=1; continue; }
  v="$(val_of "$out")"
  if /usr/bin/python3 -c "import sys; a, b = float('$v'), float('$vref'); sys.exit(0 if abs(a - b) <= 0.02 * b else 1)" &&
     grep -q "^lora.base_quant $q: 8 frozen Linears" <<<"$out"; then
    echo "ok   $q base: val $v vs the bf16 base's $vref ($(/usr/bin/python3 -c "print(f'{float(\"$v\") / float(\"$vref\"):.4f}')")x)"
    echo "     $(grep "^lora.base_quant" <<<"$out")"
  else echo "FAIL $q base: val '$v' vs bf16 base '$vref' (2% allowed)"; grep -E '^lora' <<<"$out"; fail=1; fi
done

# 2. every strategy, the same bits (tool_dist_check: the parameters' hash, the base's hash kept, the
#    collectives' bytes; one MPI job serves every run, tests/tool_serve.bash); planned = measured
#    per class to the byte (tool_memory_check)
source "$SRC/tests/tool_serve.bash"
trap 'serve_stop; rm -rf "$T"' EXIT
TOOL="$BUILD/tests/tool_dist_check" MEMT="$BUILD/tests/tool_memory_check"
serve_start d2 mpirun -np 2 --oversubscribe --bind-to none -x OMP_NUM_THREADS -x ZT_COMM_TIMEOUT "$TOOL"
serve_start m2 mpirun -np 2 --oversubscribe --bind-to none -x OMP_NUM_THREADS -x ZT_COMM_TIMEOUT "$MEMT"
dist() { # label key [N=4] args...
  local label="$1" key="$2" n=2 out rc=0; shift 2
  case "$1" in N=*) n="${1#N=}"; shift ;; esac
  out="$(serve_or_mpi d$n $n "$TOOL" "$@")" || rc=$?
  check "$label" "$key" "$out"
  local fz; fz="$(grep '^frozen' <<<"$out" || true)"
  if [ $rc -ne 0 ] || [ -z "$fz" ] || [ "$(cut -d' ' -f2 <<<"$fz")" != "$(cut -d' ' -f4 <<<"$fz")" ]; then
    echo "FAIL $label: rc $rc, base '$fz'"; grep -E 'bytes sent|^rank' <<<"$out" | head -3; fail=1; fi
}
Q=(--lora 4 --quant nf4 --n-embd 64)
for s in ddp zero1 zero2 zero3; do dist "nf4 gpt2 fp32 N=2 $s" nf4 $s 1 4 "${Q[@]}"; done
for s in ddp zero3; do dist "nf4 gpt2 bf16 N=2 $s" nf4-bf16 $s 1 4 "${Q[@]}" --precision bf16; done
for s in ddp zero2 zero3; do dist "int8 llama N=2 $s" int8 $s 1 4 --arch llama --lora 4 --quant int8; done
dist "nf4 gpt2 fp32 N=4 ddp" nf4-4 N=4 ddp 1 3 "${Q[@]}"
dist "nf4 gpt2 fp32 N=4 hybrid (zero3 in groups of 2)" nf4-4 N=4 hybrid 1 3 --hybrid 2 "${Q[@]}"
qmem() { # label args...
  local label="$1" out rc=0 exact; shift
  out="$(serve_or_mpi m2 2 "$MEMT" "$@")" || rc=$?
  exact="$(grep -o '^\([0-9]*\) of \1 (class, rank) high-waters exact' <<<"$out" || true)"
  if [ $rc -ne 0 ] || [ -z "$exact" ]; then echo "FAIL memory $label (rc $rc)"; echo "$out" | tail -4; fail=1
  else echo "ok   memory $label: $exact"; fi
}
for s in zero1 zero3; do qmem "nf4 bf16 N=2 $s" $s 1 2 --lora 4 --quant nf4 --precision bf16 --preset tiny --B 2 --T 16; done
for s in zero2 zero3; do qmem "int8 fp32 N=2 $s" $s 1 2 --lora 4 --quant int8; done

# 3. checkpoints: the base recorded, not saved; resume; another base refused
C=(--set lora.base_quant=nf4 --set training.steps=4 --set data.val=)
full="$(hash_line "$("$Z" train "$T/q.yaml" "${C[@]}" 2>&1)")"
"$Z" train "$T/q.yaml" "${C[@]}" --ckpt-dir "$T/ck" --ckpt-every 2 >/dev/null 2>&1
man="$T/ck/step-00000002/manifest.json"
if grep -q '"quant_xxh64"' "$man" && ! grep -q '"h.0.attn.c_attn.weight",[^}]*"slices"' "$man"; then
  echo "ok   checkpoint: the nf4 tensors recorded by kind and xxh64, $(du -b "$T/ck/step-00000002"/rank-*.bin | cut -f1) bytes of files"
else echo "FAIL checkpoint manifest has no quant record"; fail=1; fi
res="$(hash_line "$("$Z" train "$T/q.yaml" "${C[@]}" --resume "$T/ck/step-00000002" 2>&1)")"
if [ -n "$full" ] && [ "$res" = "$full" ]; then echo "ok   resumed from step 2: $res"
else echo "FAIL resume: '$res' vs '$full'"; fail=1; fi
resumed_badly() { # label text args...
  local label="$1" text="$2" out rc=0; shift 2
  out="$("$Z" train "$T/q.yaml" "${C[@]}" --resume "$T/ck/step-00000002" "$@" 2>&1)" || rc=$?
  if [ $rc -eq 4 ] && grep -qF -- "$text" <<<"$out"; then echo "ok   $label: exit 4: $(grep -o "tensor [^ ]*.*" <<<"$out" | head -1 | cut -c1-150)"
  else echo "FAIL $label: exit $rc, expected 4 and '$text'"; echo "$out" | tail -3; fail=1; fi
}
if out="$("$Z" export "$T/ck" --peft "$T/ad" --init-hf "$T/base" 2>&1)" && grep -q ": 8 LoRA adapters (rank 8" <<<"$out" &&
   [ -s "$T/ad/adapter_model.safetensors" ]; then echo "ok   export --peft of the nf4 run (--init-hf its base): $(grep -o '8 LoRA adapters.*' <<<"$out" | cut -c1-40)"
else echo "FAIL export --peft of the nf4 run"; echo "$out" | tail -2; fail=1; fi
bad "export without its base" "give --init-hf DIR, the base it was trained from" export "$T/ck" --peft "$T/ad2"
resumed_badly "resume on another base" "is not the one the run was saved on" --set model.init_hf= --set model.vocab_size=$TINY_VOCAB
resumed_badly "resume with int8" "was saved with lora.base_quant nf4, this run has int8" --set lora.base_quant=int8

# 4. estimate-memory --quant
EST=(estimate-memory --model llama-7b --nproc 1 -B 1 -T 2048 --json --lora-rank 16 --lora-targets all-linear)
if /usr/bin/python3 - "$("$Z" "${EST[@]}" --precision bf16)" "$("$Z" "${EST[@]}" --precision bf16 --quant nf4)" <<'PYEOF'; then :; else fail=1; fi
import json, sys
b, q = json.loads(sys.argv[1]), json.loads(sys.argv[2])
sb, sq = b["strategies"]["ddp"], q["strategies"]["ddp"]
ok = q["lora"]["base_quant"] == "nf4" and sq["model_states"] < 0.5 * sb["model_states"]
print(("ok   " if ok else "FAIL ") + f"estimate llama-7b QLoRA r=16 all-linear, 1 rank: model states "
      f"{sb['model_states'] / 2**30:.2f} GiB (bf16 LoRA) -> {sq['model_states'] / 2**30:.2f} GiB (nf4), "
      f"high-water {sb['peak_total'] / 2**30:.2f} -> {sq['peak_total'] / 2**30:.2f} GiB")
sys.exit(0 if ok else 1)
PYEOF
EST8=(estimate-memory --model llama-7b --nproc 8 -B 1 -T 2048 --json --precision bf16 --lora-rank 16 --lora-targets all-linear)
if /usr/bin/python3 - "$("$Z" "${EST8[@]}")" "$("$Z" "${EST8[@]}" --quant nf4)" <<'PYEOF'; then :; else fail=1; fi
import json, sys
b, q = json.loads(sys.argv[1])["strategies"]["zero3"], json.loads(sys.argv[2])["strategies"]["zero3"]
ok = q["model_states"] < 0.25 * b["model_states"]
print(("ok   " if ok else "FAIL ") + f"estimate llama-7b QLoRA r=16, 8 ranks zero3: model states {b['model_states'] / 2**30:.2f} "
      f"GiB (bf16 LoRA, fp32 base pieces) -> {q['model_states'] / 2**30:.2f} GiB (nf4, sharded)")
sys.exit(0 if ok else 1)
PYEOF

# 5. bad input
bad "quant without LoRA" "lora.base_quant: nf4 quantizes the frozen base under LoRA adapters, but lora.rank is 0" \
  train "$T/q.yaml" --set lora.rank=0 --set lora.alpha=8 --set lora.target_modules= --set lora.base_quant=nf4
bad "unknown quant" 'lora.base_quant: unknown value "nf3" (allowed: none, nf4, int8)' train "$T/q.yaml" --set lora.base_quant=nf3
bad "rows not whole NF4 blocks" "h.0.attn.c_attn.weight (288 x 96) has rows of 96 elements, not a multiple of NF4's block of 64" \
  train "$T/q.yaml" --set model.init_hf= --set model.n_embd=96 --set lora.base_quant=nf4

# 6. parameter offload: the fp32 pieces in files, the quantized base sharded in memory
mkdir -p "$T/nv"
O=(--nproc 2 --set lora.base_quant=nf4 --set training.steps=3 --set data.val=)
a="$("$Z" train "$T/q.yaml" "${O[@]}" --set parallel.strategy=ddp 2>&1)"
b="$("$Z" train "$T/q.yaml" "${O[@]}" --set parallel.strategy=zero3 --set memory.offload_param=nvme \
  --set memory.offload_param_nvme_path="$T/nv" 2>&1)" || true
if [ -n "$(hash_line "$a")" ] && [ "$(hash_line "$a")" = "$(hash_line "$b")" ] &&
   grep -q "every class of every rank reached exactly its planned high-water" <<<"$b"; then
  echo "ok   nf4 with parameter offload (zero3, 2 ranks) = ddp: $(hash_line "$b"), planned = measured"
else echo "FAIL nf4 with parameter offload: '$(hash_line "$b")' vs ddp '$(hash_line "$a")'"; echo "$b" | tail -4; fail=1; fi
exit $fail
