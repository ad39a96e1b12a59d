#!/usr/bin/env bash
# optim_strategies.sh BUILD SOURCE - Muon (+AdamW for the rest) and LAMB made exact under every
# data-parallel strategy (docs/optimizer.md), under mpirun:
#  1. tool_dist_check --optimizer muon / lamb, 6 steps of the small GPT-2: 1 rank x 2 micro-batches
#     and 2 ranks x 1 under ddp, zero1, zero2 and zero3 give bit-identical losses and parameters;
#     for Muon on 4 ranks (oversubscribed) hybrid (zero3 in groups of 2) equals zero3; Muon's bf16
#     Newton-Schulz, bf16 compute and bf16-low (bf16 parameters and moments) agree across
#     strategies too (their own hashes);
#  2. tool_memory_check: planned = measured per class, to the byte, with Muon's gathered matrices
#     and Newton-Schulz work and LAMB's norm partials (2 ranks, zero3), and bf16-low's widened slice;
#  3. `zerotrain train` with optimizer.type muon, 2 ranks zero3: the loss falls, and a run resumed
#     from its step-10 checkpoint ends on the same parameter hash (the momentum and AdamW's m, v are
#     saved and loaded); resumed under another optimizer.type it exits 4 naming both;
#     The real DeepSpeed file with Lamb trains on 2 ranks (planned = measured); under context
#     parallelism (cp 2) ddp and zero3 give the same bits for both optimizers;
#  4. bad input exits 2 naming the key: Muon on a 1-D parameter, a 2-D weight left to no optimizer
#     or matched by both patterns, a pattern that is not a regular expression, an unknown
#     muon_ns_dtype;
#  5. tensor parallelism (Muon's logical matrices, LAMB's logical norms): given the same synthetic
#     gradients (tool_dist_check --synthetic-grad: a function of each element's logical index) tp 2
#     ends on one process's hash, GPT-2 and Llama; with real gradients tp 2 with 2 micro-batches on
#     2 ranks equals tp 2 x dp 2 on 4 ranks under ddp, zero1 and zero3; planned = measured; a Muon
#     tp 2 commit resumed on tp 2 x dp 2 zero3 ends on the uninterrupted hash;
#  6. pipeline parallelism: Llama pp 2 (`zerotrain train`; its last stage holds the LM head alone,
#     no Muon matrix) ends on one process's hash and losses for both optimizers, planned = measured
#     on every rank; Muon tp 2 x pp 2 on 4 ranks ends on tp 2's hash;
#  7. offload (two streams: engine/step_streamed.c), both optimizers: zero3 x2 with both offloads
#     and (Muon) with the parameter pieces alone, 1 rank x 2 micro-batches with the optimizer state alone,
#     each = the in-memory zero3 x2 run (hash and losses), planned = measured (memory and the last
#     step's NVMe bytes), no file left; a commit of the offloaded run resumes in memory on 1 rank
#     bit for bit; Muon under tp 2 and LAMB in 2 pipeline stages with the optimizer state offloaded,
#     LAMB under tp 2 x dp 2 zero3 with both offloads = in memory.
set -euo pipefail
BUILD="$1"
SRC="$2"
TOOL="$BUILD/tests/tool_dist_check"
MEMT="$BUILD/tests/tool_memory_check"
Z="$BUILD/zerotrain"
export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ZT_COMM_TIMEOUT=120
STEPS=6
T=$(mktemp -d)
trap 'declare -F serve_stop >/dev/null && serve_stop; rm -rf "$T"' EXIT
# hash_of, losses_of, fail, check LABEL KEY OUTPUT, bad LABEL TEXT ARGS, mem LABEL N ARGS
source "$SRC/tests/dist_check.bash"
# the tool's runs go to one MPI job per world size (tests/tool_serve.bash); one it cannot take runs alone
source "$SRC/tests/tool_serve.bash"
for n in 1 2 4; do serve_start "n$n" mpirun -np "$n" --oversubscribe --bind-to none -x OMP_NUM_THREADS -x ZT_COMM_TIMEOUT "$TOOL"; done
run() { # N args...
  local n="$1" rc=0; shift
  serve_run "n$n" "$@" || rc=$?
  [ $rc = 99 ] || return $rc
  mpirun -np "$n" --oversubscribe --bind-to none -x OMP_NUM_THREADS -x ZT_COMM_TIMEOUT "$TOOL" "$@" 2>&1
}

for o in muon lamb; do
  check "$o N=1 GA=2 zero3" "$o" "$(run 1 zero3 2 $STEPS --optimizer $o)"
  for s in ddp zero1 zero2 zero3; do check "$o N=2 GA=1 $s" "$o" "$(run 2 $s 1 $STEPS --optimizer $o)"; done
done
# 4 ranks (oversubscribed): hybrid's groups gather and broadcast inside the group
check "muon N=4 zero3" muon4 "$(run 4 zero3 1 $STEPS --optimizer muon)"
check "muon N=4 hybrid (zero3 in groups of 2)" muon4 "$(run 4 hybrid 1 $STEPS --optimizer muon --hybrid 2)"
check "muon bf16 Newton-Schulz N=1 GA=2 zero3" nsbf16 "$(run 1 zero3 2 $STEPS --optimizer muon --ns-bf16)"
check "muon bf16 Newton-Schulz N=2 zero2" nsbf16 "$(run 2 zero2 1 $STEPS --optimizer muon --ns-bf16)"
check "muon precision bf16 N=2 ddp" mbf16 "$(run 2 ddp 1 $STEPS --optimizer muon --precision bf16)"
check "muon precision bf16 N=2 zero1 (master pieces)" mbf16 "$(run 2 zero1 1 $STEPS --optimizer muon --precision bf16)"
# bf16-low (bf16 parameters and moments): each slice widened for its update, narrowed back
for o in muon lamb; do
  check "$o bf16-low N=1 GA=2 zero3" "low$o" "$(run 1 zero3 2 $STEPS --optimizer $o --precision bf16-low)"
  check "$o bf16-low N=2 ddp" "low$o" "$(run 2 ddp 1 $STEPS --optimizer $o --precision bf16-low)"
  check "$o bf16-low N=2 zero3" "low$o" "$(run 2 zero3 1 $STEPS --optimizer $o --precision bf16-low)"
done
if [ "${ref_hash[lowmuon]:-}" = "${ref_hash[mbf16]:-x}" ]; then echo "FAIL bf16-low = bf16: the mode had no effect"; fail=1; fi
if [ "${ref_hash[muon]:-}" = "${ref_hash[nsbf16]:-x}" ] || [ "${ref_hash[muon]:-}" = "${ref_hash[lamb]:-x}" ]; then
  echo "FAIL the optimizers' hashes coincide: an option had no effect"; fail=1
fi

mem "muon zero3" 2 zero3 1 3 --optimizer muon
mem "lamb zero3" 2 zero3 1 3 --optimizer lamb
mem "muon bf16-low zero3" 2 zero3 1 2 --optimizer muon --precision bf16-low

"$Z" tokenize /usr/share/common-licenses/GPL-3 -o "$T/gpl.bin" >/dev/null
cat > "$T/m.yaml" <<YEOF
model: {preset: tiny}
data: {train: $T/gpl.bin}
training: {micro_batch_size: 4, seq_len: 32, steps: 20, lr: 3e-3, warmup_steps: 5}
optimizer: {type: muon}
parallel: {strategy: zero3}
YEOF
hash_line() { grep -o 'params xxh64 [0-9a-f]*' <<<"$1" || true; }
if out="$("$Z" train "$T/m.yaml" --nproc 2 --ckpt-dir "$T/ck" --ckpt-every 10 2>&1)"; then
  line="$(grep '^done:' <<<"$out")"
  if python3 -c 'import re,sys; m=re.search(r"loss ([0-9.]+) -> ([0-9.]+)", sys.argv[1]); sys.exit(0 if m and float(m.group(2)) < 0.8*float(m.group(1)) else 1)' "$line"; then
    echo "ok   train muon tiny x2 zero3: $line"
  else echo "FAIL train muon: the loss did not fall: $line"; fail=1; fi
  o2="$("$Z" train "$T/m.yaml" --nproc 2 --resume "$T/ck/step-00000010" 2>&1)" || true
  if [ -n "$(hash_line "$out")" ] && [ "$(hash_line "$o2")" = "$(hash_line "$out")" ]; then
    echo "ok   muon resumed from step 10: $(hash_line "$o2")"
  else echo "FAIL muon resumed from step 10: '$(hash_line "$o2")' vs '$(hash_line "$out")'"; echo "$o2" | tail -3; fail=1; fi
else
  echo "FAIL train muon"; echo "$out" | tail -5; fail=1
fi

# context parallelism: cp 2 under ddp and zero3 give the same bits for each optimizer (the matrices
# whole on their owner, LAMB's norms from the same chunks), and the loss of one process within
# cp's own summation difference (its bound is tests/cp.sh's; here 1e-5 relative on the last loss)
printf 'model: {preset: llama-tiny}\ndata: {train: %s}\ntraining: {micro_batch_size: 2, seq_len: 32, steps: 6, warmup_steps: 1, lr: 3e-3}\n' \
  "$T/gpl.bin" > "$T/cp.yaml"
last_loss() { grep -o 'loss [0-9.]* -> [0-9.]*' <<<"$1" | awk '{print $4}'; }
for o in muon lamb; do
  one="$("$Z" train "$T/cp.yaml" --set optimizer.type=$o 2>&1)" || true
  cpd="$("$Z" train "$T/cp.yaml" --set optimizer.type=$o --nproc 2 --set parallel.context_parallel_size=2 2>&1)" || true
  cpz="$("$Z" train "$T/cp.yaml" --set optimizer.type=$o --nproc 2 --set parallel.context_parallel_size=2 \
         --set parallel.strategy=zero3 2>&1)" || true
  if [ -n "$(hash_line "$cpd")" ] && [ "$(hash_line "$cpd")" = "$(hash_line "$cpz")" ] && [ -n "$(last_loss "$one")" ] &&
     python3 -c 'import sys; a, b = map(float, sys.argv[1:]); sys.exit(0 if abs(a - b) <= 1e-5 * abs(a) else 1)' \
       "$(last_loss "$one")" "$(last_loss "$cpd")"; then
    echo "ok   $o under cp 2: ddp = zero3 ($(hash_line "$cpd")), last loss $(last_loss "$cpd") (one process $(last_loss "$one"))"
  else echo "FAIL $o under cp 2: ddp '$(hash_line "$cpd")' zero3 '$(hash_line "$cpz")', loss $(last_loss "$cpd") vs $(last_loss "$one")"
    echo "$cpd" | tail -3; fail=1; fi
done

# the real DeepSpeed file with Lamb (DeepSpeedExamples' BERT pre-training at 64K: fp16, clipping 1,
# FusedLamb's bias_correction false, max/min_coeff; its sparse_attention block a warning) on 2 ranks
REAL="$SRC/tests/configs/real/dsexamples.bing_bert.deepspeed_bsz64k_lamb_config_seq128.json"
out="$("$Z" train "$REAL" --nproc 2 --set data.train="$T/gpl.bin" --set model.preset=tiny --set training.steps=4 \
       --set training.seq_len=32 --set training.micro_batch_size=2 --set training.global_batch_size=8 2>&1)" && rc=0 || rc=$?
if [ $rc = 0 ] && grep -q "optimizer lamb" <<<"$out" && grep -q "precision fp16" <<<"$out" &&
   grep -q "every class of every rank reached exactly its planned high-water" <<<"$out"; then
  echo "ok   the real Lamb file on 2 ranks (fp16, planned = measured): $(grep -o 'loss [0-9.]* -> [0-9.]*' <<<"$out")"
else echo "FAIL the real Lamb file: exit $rc"; echo "$out" | tail -5; fail=1; fi

bad "muon on a 1-D parameter" "optimizer.muon_params 'h.0.ln_1.weight' matches parameter 'h.0.ln_1.weight' of 1 dimension" \
  train "$T/m.yaml" --set 'optimizer.muon_params=h.0.ln_1.weight'
bad "a 2-D weight left to no optimizer" "leave parameter 'wpe.weight' (a 2-D weight) to no optimizer" \
  train "$T/m.yaml" --set 'optimizer.adamw_params=wte.weight'
bad "a parameter matched by both" "both match parameter 'h.0.attn.c_attn.weight'" \
  train "$T/m.yaml" --set 'optimizer.adamw_params=.*'
bad "a pattern that is not a regular expression" "optimizer.muon_params '(': missing closing parenthesis" \
  train "$T/m.yaml" --set 'optimizer.muon_params=('
bad "an unknown Newton-Schulz dtype" "optimizer.muon_ns_dtype: unknown value \"fp8\"" \
  train "$T/m.yaml" --set optimizer.muon_ns_dtype=fp8
out="$("$Z" train "$T/m.yaml" --nproc 2 --resume "$T/ck/step-00000010" --set optimizer.type=adamw 2>&1)" && rc=0 || rc=$?
if [ $rc = 4 ] && grep -q "the checkpoint's optimizer state is muon's, this run's optimizer.type is adamw" <<<"$out"; then
  echo "ok   muon's checkpoint resumed under adamw exits 4: $(grep -m1 -o "the checkpoint's optimizer.*is adamw" <<<"$out")"
else echo "FAIL muon's checkpoint under adamw: exit $rc: $(grep -m1 error <<<"$out")"; fail=1; fi

# 7. offload (engine/step_streamed.c: two streams, the whole tensors between them), 64 KiB staging
# buffers (8,192-element chunks that cut through matrices and LAMB's norm chunks): zero3 x2 with
# both offloads (the optimizer state, the pieces and the reduced gradient pieces in files) and (Muon)
# with the pieces alone, 1 rank x 2 micro-batches ddp with the optimizer state alone: each the in-memory
# zero3 x2 run's hash and losses, every class at its planned high-water, the last step's NVMe bytes
# as planned; a commit of the offloaded zero3 x2 run resumed in memory on 1 rank ends on that hash
NV="$T/nvme"; mkdir -p "$NV"
# the GPL's ids folded into a 4,096-id vocabulary (tests/tiny_vocab.bash): no 50,257-row embedding
source "$SRC/tests/tiny_vocab.bash"
cp "$T/gpl.bin" "$T/folded.bin"; fold_tokens "$T/folded.bin"
cat > "$T/o.yaml" <<YEOF
model: {preset: tiny, vocab_size: $TINY_VOCAB, n_layer: 2, n_embd: 32, n_head: 2, max_seq_len: 32}
data: {train: $T/folded.bin}
training: {micro_batch_size: 2, seq_len: 16, steps: 6, warmup_steps: 1, lr: 3e-3}
logging: {print_every: 100}
YEOF
SMALL=(--set memory.offload_buffer_mb=0.0625 --set memory.offload_buffer_count=3)
OPTO=(--set memory.offload_optimizer=nvme --set memory.offload_optimizer_nvme_path="$NV")
PARO=(--set memory.offload_param=nvme --set memory.offload_param_nvme_path="$NV")
ONE=(--set parallel.strategy=ddp --set training.gradient_accumulation_steps=2)
jl() { grep -o '"loss":[^,]*' "$T/$1.jsonl" 2>/dev/null | tr '\n' ' ' || true; } # a run's losses, from its JSONL
for o in muon lamb; do
  a="$("$Z" train "$T/o.yaml" --nproc 2 --set parallel.strategy=zero3 --set optimizer.type=$o \
       --set logging.jsonl="$T/$o.mem.jsonl" 2>&1)" || true
  ref="$(hash_line "$a")"; refl="$(jl $o.mem)"
  [ -n "$ref" ] && [ -n "$refl" ] || { echo "FAIL $o offload: the in-memory reference did not run"; echo "$a" | tail -3; fail=1; }
  for c in "both:2:zero3" "param:2:zero3" "optimizer:1:ddp"; do
    IFS=: read -r with n s <<<"$c"
    [ $o:$with = lamb:param ] && continue # (the pieces' kind alone: Muon's case; LAMB's with both)
    args=("${SMALL[@]}"); [ $with != param ] && args+=("${OPTO[@]}"); [ $with != optimizer ] && args+=("${PARO[@]}")
    [ $n = 1 ] && args+=("${ONE[@]}")
    [ $with = both ] && rm -rf "$T/cko" && args+=(--ckpt-dir "$T/cko" --ckpt-every 3) # resumed below
    b="$("$Z" train "$T/o.yaml" --nproc $n --set parallel.strategy=$s --set optimizer.type=$o "${args[@]}" \
         --set logging.jsonl="$T/$o.$with.jsonl" 2>&1)" || true
    if [ -n "$ref" ] && [ "$(hash_line "$b")" = "$ref" ] && [ "$(jl $o.$with)" = "$refl" ] &&
       grep -q "every class of every rank reached exactly its planned high-water" <<<"$b" &&
       grep -Eq "read ([0-9.]+) MiB .*wrote ([0-9.]+) MiB; planned read \1, write \2 MiB" <<<"$b" && [ -z "$(ls -A "$NV")" ]; then
      echo "ok   $o offload $with, $s x$n = in memory zero3 x2 ($ref), planned = measured, $(grep -o 'read [0-9.]* MiB (the.*' <<<"$b")"
    else echo "FAIL $o offload $with, $s x$n: '$(hash_line "$b")' vs '$ref'"; echo "$b" | tail -4; fail=1; fi
  done
  b="$("$Z" train "$T/o.yaml" --set optimizer.type=$o "${ONE[@]}" --resume "$T/cko/step-00000003" 2>&1)" || true
  if [ -n "$ref" ] && [ "$(hash_line "$b")" = "$ref" ]; then
    echo "ok   $o: the offloaded zero3 x2 run's step-3 commit resumed in memory on 1 rank = 6 steps in memory"
  else echo "FAIL $o offloaded checkpoint resumed in memory on 1 rank: '$(hash_line "$b")' vs '$ref'"; echo "$b" | tail -3; fail=1; fi
done
# Muon under tensor parallelism (the logical matrices' rounds read U from the parts' files), LAMB in
# pipeline stages (each stage's norms) with the optimizer state offloaded, and LAMB under tp 2 x dp 2
# zero3 with both offloads (its cut tensors' p, m, v read back between the passes for their logical
# norms) = in memory
for c in "2 muon parallel.tensor_parallel_size=2" "2 lamb parallel.pipeline_parallel_size=2" \
         "4 lamb parallel.tensor_parallel_size=2 parallel.strategy=zero3 training.global_batch_size=4"; do
  read -r n o kvs <<<"$c"
  kv=(); for x in $kvs; do kv+=(--set "$x"); done
  more=("${SMALL[@]}" "${OPTO[@]}"); [ $n = 4 ] && more+=("${PARO[@]}")
  a="$("$Z" train "$T/o.yaml" --nproc $n "${kv[@]}" --set optimizer.type=$o 2>&1)" || true
  b="$("$Z" train "$T/o.yaml" --nproc $n "${kv[@]}" --set optimizer.type=$o "${more[@]}" 2>&1)" || true
  if [ -n "$(hash_line "$a")" ] && [ "$(hash_line "$b")" = "$(hash_line "$a")" ] &&
     grep -q "every class of every rank reached exactly its planned high-water" <<<"$b" &&
     grep -Eq "read ([0-9.]+) MiB .*wrote ([0-9.]+) MiB; planned read \1, write \2 MiB" <<<"$b" && [ -z "$(ls -A "$NV")" ]; then
    echo "ok   $o x$n $kvs, offloaded = in memory ($(hash_line "$a")), planned = measured"
  else echo "FAIL $o x$n $kvs offloaded: '$(hash_line "$b")' vs '$(hash_line "$a")'"; echo "$b" | tail -4; fail=1; fi
done

# 5. tensor parallelism
for o in muon lamb; do
  for arch in gpt2 llama; do
    check "$o $arch synthetic gradients, one process" "syn$o$arch" "$(run 1 ddp 1 3 --optimizer $o --arch $arch --synthetic-grad)"
    check "$o $arch synthetic gradients, tp 2 = one process" "syn$o$arch" "$(run 2 ddp 1 3 --optimizer $o --arch $arch --synthetic-grad --tp 2)"
  done
  check "$o tp 2, 2 micro-batches, 2 ranks" "tp$o" "$(run 2 ddp 2 4 --optimizer $o --tp 2)"
  for s in ddp zero1 zero3; do check "$o tp 2 x dp 2 $s, 4 ranks" "tp$o" "$(run 4 $s 1 4 --optimizer $o --tp 2)"; done
done
if [ "${ref_hash[synmuongpt2]:-}" = "${ref_hash[synlambgpt2]:-x}" ]; then echo "FAIL synthetic: muon = lamb"; fail=1; fi
mem "muon tp 2 x dp 2 zero3" 4 zero3 1 2 --optimizer muon --tp 2
# a tp 2 commit (Muon's momentum: logical tensors) resumed on tp 2 x dp 2 zero3 ends on the uninterrupted hash
cat > "$T/t.yaml" <<YEOF
model: {preset: tiny, n_layer: 2, n_embd: 64, n_head: 4}
data: {train: $T/gpl.bin}
training: {micro_batch_size: 1, seq_len: 32, steps: 4, lr: 1e-3, gradient_accumulation_steps: 2}
optimizer: {type: muon}
parallel: {tensor_parallel_size: 2}
YEOF
a="$("$Z" train "$T/t.yaml" --nproc 2 --ckpt-dir "$T/cktp" --ckpt-every 2 2>&1)" || true
b="$("$Z" train "$T/t.yaml" --nproc 4 --set parallel.strategy=zero3 --set training.gradient_accumulation_steps=1 \
     --resume "$T/cktp/step-00000002" 2>&1)" || true
if [ -n "$(hash_line "$a")" ] && [ "$(hash_line "$a")" = "$(hash_line "$b")" ]; then
  echo "ok   muon tp 2 commit resumed on tp 2 x dp 2 zero3 = uninterrupted: $(hash_line "$b")"
else echo "FAIL muon tp 2 resumed on tp 2 x dp 2: '$(hash_line "$b")' vs '$(hash_line "$a")'"; echo "$b" | tail -3; fail=1; fi
mem "lamb tp 2 x dp 2 zero1" 4 zero1 1 2 --optimizer lamb --tp 2

# 6. pipeline parallelism: Llama (untied) pp 2 = one process bit for bit
cat > "$T/l.yaml" <<YEOF
model: {preset: llama-tiny, n_layer: 2, n_embd: 64, n_head: 4}
data: {train: $T/gpl.bin}
training: {micro_batch_size: 2, seq_len: 32, steps: 4, lr: 3e-3, gradient_accumulation_steps: 2}
YEOF
for o in muon lamb; do
  a="$("$Z" train "$T/l.yaml" --set optimizer.type=$o --set logging.jsonl="$T/$o.1.jsonl" 2>&1)" || true
  b="$("$Z" train "$T/l.yaml" --set optimizer.type=$o --set logging.jsonl="$T/$o.pp.jsonl" --nproc 2 \
       --set parallel.pipeline_parallel_size=2 2>&1)" || true
  la="$(grep -o '"loss":[^,]*' "$T/$o.1.jsonl" | tr '\n' ' ' || true)"; lb="$(grep -o '"loss":[^,]*' "$T/$o.pp.jsonl" | tr '\n' ' ' || true)"
  if [ -n "$(hash_line "$a")" ] && [ "$(hash_line "$a")" = "$(hash_line "$b")" ] && [ -n "$la" ] && [ "$la" = "$lb" ] &&
     grep -q "every class of every rank reached exactly its planned high-water" <<<"$b"; then
    echo "ok   $o llama pp 2 = one process: $(hash_line "$b"), the same $(wc -w <<<"$lb") losses, planned = measured"
  else echo "FAIL $o llama pp 2: '$(hash_line "$b")' vs '$(hash_line "$a")'"; echo "$b" | tail -3; fail=1; fi
done
# tp 2 x pp 2 (4 ranks) = tp 2 (2 ranks), Muon: a stage's rounds over its tp group
TP2=(--set optimizer.type=muon --set parallel.tensor_parallel_size=2)
a="$("$Z" train "$T/l.yaml" "${TP2[@]}" --nproc 2 2>&1)" || true
b="$("$Z" train "$T/l.yaml" "${TP2[@]}" --nproc 4 --set parallel.pipeline_parallel_size=2 2>&1)" || true
if [ -n "$(hash_line "$a")" ] && [ "$(hash_line "$a")" = "$(hash_line "$b")" ]; then
  echo "ok   muon llama tp 2 x pp 2 = tp 2: $(hash_line "$b")"
else echo "FAIL muon llama tp 2 x pp 2: '$(hash_line "$b")' vs '$(hash_line "$a")'"; echo "$b" | tail -3; fail=1; fi
exit $fail
