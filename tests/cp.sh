#!/usr/bin/env bash
# cp.sh BUILD SOURCE - context parallelism (docs/parallelism.md): every sequence split over cp ranks,
# each holding two of 2·cp chunks, attention over the whole sequence by allgather, ring or ulysses;
# under mpirun on up to 8 oversubscribed ranks:
#  1. bad input exits 2 naming the keys and the numbers: a seq_len 2·cp does not divide, a world the
#     axes do not divide, ulysses with heads cp does not divide, naive attention, generation or
#     Megatron's sequence parallelism beside it;
#  2. where the summation order is kept fixed the runs are bit-identical (losses and the final
#     parameters' hash): cp 2 with 2 micro-batches on 2 ranks = cp 2 x dp 2 on 4 ranks under zero1
#     and zero3 in every mode, GPT-2 and Llama, every step's dp x cp collective bytes
#     equal to the formulas (tool_dist_check checks them); Llama cp 2 x pp 2 = cp 2 (zerotrain train);
#  3. against one process (the keys' gradients and the weights' gradients are summed over the parts
#     in another order), losses and parameters within the tolerance tests/tolerance.py derives in the
#     run (8 x the divergence one ulp on every initial parameter makes), and a run with lr x 1.01 is
#     outside it: cp 2 and cp 4 in each mode, GPT-2 and Llama, packed documents, cp 2 x tp 2 (against
#     tp 2), and
#     hybrid (its shard groups are a replica's cp x shard ranks, summed before the replicas: another
#     grouping of the same parts, reproducible but not accumulation's);
#  4. zerotrain train: the three modes print the one-process losses, the JSONL's bytes_sent.context
#     equal to the scale model's formulas (bytes_sent.pipeline 0), planned = measured memory on
#     every rank, packed chat-style records too (losses and validation); allgather's and ulysses'
#     exchanges pipelined over head groups give one group's parameters bit for bit, and the traces
#     hold the attention spans and cp waits bench/cp_trace.py reads; checkpoints stay logical: a cp 2
#     commit resumes to the uninterrupted hash, and cp 2 -> one-process re-save -> cp 2 re-save gives
#     byte-identical shard files;
#  5. Accelerate's own cp.yaml (cp 8 on 8 ranks, FSDP2 bf16) and a DeepSpeed sequence_parallel_size
#     (Ulysses) resolve and train;
#  6. a mixture of experts (the router losses over the whole sequences, src/model/llama_moe.c): cp 2
#     with 2 micro-batches = cp 2 x dp 2 zero3 = ep 2 x cp 2 = ep 4 x cp 2 zero3 bit for bit; cp 2
#     (allgather, ring) and cp 4 within the run's tolerance of one process; zerotrain train prints one
#     process's losses with planned = measured; a capacity factor with cp exits 2.
set -euo pipefail
BUILD="$1"
SRC="$2"
Z="$BUILD/zerotrain"
TOOL="$BUILD/tests/tool_dist_check"
export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ZT_COMM_TIMEOUT=120
T=$(mktemp -d)
trap 'declare -F serve_stop >/dev/null && serve_stop; rm -rf "$T"' EXIT
source "$SRC/tests/dist_check.bash" # hash_of, losses_of, check, bad; sets fail=0

source "$(dirname "${BASH_SOURCE[0]}")/tiny_vocab.bash"
"$Z" tokenize /usr/share/common-licenses/GPL-3 -o "$T/gpl.bin" >/dev/null
fold_tokens "$T/gpl.bin"
cat > "$T/g.yaml" <<YEOF
model: {preset: tiny, n_layer: 2, n_embd: 64, n_head: 4, vocab_size: $TINY_VOCAB}
data: {train: $T/gpl.bin}
training: {micro_batch_size: 2, seq_len: 64, steps: 4, lr: 1e-3}
YEOF
CP=(--set parallel.context_parallel_size=2)

# 1. bad input
bad "seq_len vs 2 x cp" "parallel.context_parallel_size: 4: 2 x 4 = 8 does not divide training.seq_len (60)" \
  train "$T/g.yaml" --nproc 4 --set parallel.context_parallel_size=4 --set training.seq_len=60
bad "world 3 vs cp 2" "parallel.tensor_parallel_size: 1 x parallel.context_parallel_size 2 x parallel.pipeline_parallel_size 1 = 2 does not divide the world size 3" \
  train "$T/g.yaml" --nproc 3 "${CP[@]}"
bad "ulysses vs heads" "parallel.context_parallel_mode: ulysses over parallel.context_parallel_size 4 needs the heads (4) and key/value heads (2)" \
  train "$T/g.yaml" --nproc 4 --set model.preset=llama-tiny --set parallel.context_parallel_size=4 \
  --set parallel.context_parallel_mode=ulysses
bad "naive attention" "parallel.context_parallel_size: 2 with model.attention naive" \
  train "$T/g.yaml" --nproc 2 "${CP[@]}" --set model.attention=naive
bad "generation" "parallel.context_parallel_size: 2 with sample.tokens: not under context parallelism" \
  train "$T/g.yaml" --nproc 2 "${CP[@]}" --set sample.tokens=8
bad "bad mode" "parallel.context_parallel_mode" train "$T/g.yaml" --nproc 2 "${CP[@]}" --set parallel.context_parallel_mode=rings

# 2. bit-identical where the order is fixed. The tool's runs on N ranks go to one MPI job per N
# (tests/tool_serve.bash); one that job cannot take runs alone
source "$(dirname "${BASH_SOURCE[0]}")/tool_serve.bash"
for n in 1 2 4; do serve_start "n$n" mpirun -np "$n" --oversubscribe --bind-to none -x OMP_NUM_THREADS -x ZT_COMM_TIMEOUT "$TOOL"; done
run() { # N args...
  local n="$1" rc=0; shift
  serve_run "n$n" "$@" || rc=$?
  [ $rc = 99 ] || return $rc
  mpirun -np "$n" --oversubscribe --bind-to none -x OMP_NUM_THREADS -x ZT_COMM_TIMEOUT "$TOOL" "$@" 2>&1
}
STEPS=6
for mode in allgather ring ulysses; do
  out="$(run 2 ddp 2 $STEPS --cp 2 --cp-mode $mode --n-head 4)"; check "gpt2 $mode cp 2, 2 micro-batches, 2 ranks" "g$mode" "$out"
  for s in zero1 zero3; do
    out="$(run 4 $s 1 $STEPS --cp 2 --cp-mode $mode --n-head 4)"; check "gpt2 $mode cp 2 x dp 2 $s, 4 ranks" "g$mode" "$out"
  done
done
for mode in allgather ring; do
  out="$(run 2 ddp 2 $STEPS --cp 2 --cp-mode $mode --arch llama)"; check "llama $mode cp 2, 2 micro-batches" "l$mode" "$out"
  out="$(run 4 zero3 1 $STEPS --cp 2 --cp-mode $mode --arch llama)"; check "llama $mode cp 2 x dp 2 zero3" "l$mode" "$out"
done

# 3. against one process, within a tolerance derived here (tests/tolerance.py, as tests/tp.sh)
STEPS=10
dump() { local n="$1" f="$2"; shift 2; run "$n" ddp 1 $STEPS --dump "$T/$f.bin" "$@" | grep '^losses' > "$T/$f.losses"; }
for arch in gpt2 llama; do
  A=(--arch $arch); [ $arch = gpt2 ] && A+=(--n-head 4)
  dump 1 ref "${A[@]}"; dump 1 ulp "${A[@]}" --ulp; dump 1 lr "${A[@]}" --lr 0.0101
  specs=()
  for mode in allgather ring ulysses; do
    dump 2 "c2$mode" "${A[@]}" --cp 2 --cp-mode $mode; specs+=("c2$mode=inside=cp 2 $mode vs one process")
    [ $arch = llama ] && [ $mode = ulysses ] && continue # 2 key/value heads: cp 4 cannot split them
    dump 4 "c4$mode" "${A[@]}" --cp 4 --cp-mode $mode; specs+=("c4$mode=inside=cp 4 $mode vs one process")
  done
  if [ $arch = gpt2 ]; then
    # cp x tp against tp alone (tp's own difference from one process is tests/tp.sh's), the
    # yardstick the tp run's own one-ulp perturbation
    dump 2 tp2 "${A[@]}" --tp 2; dump 2 tp2ulp "${A[@]}" --tp 2 --ulp; dump 4 c2tp2 "${A[@]}" --cp 2 --tp 2
    python3 "$SRC/tests/tolerance.py" "$T" $arch tp2 tp2ulp "c2tp2=inside=cp 2 x tp 2 vs tp 2" || fail=1
    # hybrid shards over each replica's cp ranks and then sums the replicas: its tree groups the
    # parts replica-first, so it is checked here (against one process with 2 micro-batches, the
    # same global batch) rather than bit for bit against accumulation
    ga2() { local n="$1" f="$2" s="$3" g="$4"; shift 4; run "$n" $s $g $STEPS --dump "$T/$f.bin" "$@" | grep '^losses' > "$T/$f.losses"; }
    ga2 1 ref2 ddp 2 "${A[@]}"; ga2 1 ulp2 ddp 2 "${A[@]}" --ulp; ga2 4 c2hy hybrid 1 "${A[@]}" --cp 2 --hybrid 1
    python3 "$SRC/tests/tolerance.py" "$T" $arch ref2 ulp2 "c2hy=inside=cp 2 x dp (replicate 2 x shard 1) hybrid vs 2 micro-batches" || fail=1
  fi
  python3 "$SRC/tests/tolerance.py" "$T" $arch ref ulp "${specs[@]}" "lr=outside=lr x 1.01 (must fail)" || fail=1
done
# packed documents: the masks follow each document across the chunks
dump 1 pref --n-head 4 --packed; dump 1 pulp --n-head 4 --packed --ulp; dump 1 plr --n-head 4 --packed --lr 0.0101
specs=()
for mode in allgather ring ulysses; do dump 2 "p$mode" --n-head 4 --packed --cp 2 --cp-mode $mode; specs+=("p$mode=inside=packed cp 2 $mode"); done
python3 "$SRC/tests/tolerance.py" "$T" "gpt2 packed" pref pulp "${specs[@]}" "plr=outside=lr x 1.01 (must fail)" || fail=1

# 4. zerotrain train: losses, memory, checkpoints
loss_line() { grep -o 'loss [0-9.]* -> [0-9.]*' <<<"$1" || true; }
hash_line() { grep -o 'params xxh64 [0-9a-f]*' <<<"$1" || true; }
one="$("$Z" train "$T/g.yaml" 2>&1)"
# the JSONL's bytes_sent.context per step: the scale model's formulas (docs/scale.md) with
# B 2, T 64 over 2 parts, C = KV = 64, fp32, 2 blocks: allgather 3 (cp-1)/cp S, ring
# S (3 (cp-1)/cp + 1/cp), ulysses (cp-1)/cp of a part's rows x (4C + 2KV + 3C + 2KV + ...)
ctx() { python3 -c 'import json,sys; print(sorted({(o["bytes_sent"]["context"], o["bytes_sent"]["pipeline"]) for o in map(json.loads, open(sys.argv[1])) if "step" in o}))' "$1"; }
declare -A WANT=([allgather]="[(196608, 0)]" [ring]="[(262144, 0)]" [ulysses]="[(196608, 0)]")
declare -A HASH
for mode in allgather ring ulysses; do
  out="$("$Z" train "$T/g.yaml" --nproc 2 "${CP[@]}" --set parallel.context_parallel_mode=$mode \
         --set logging.jsonl="$T/$mode.jsonl" --trace "$T/$mode.trace.json" 2>&1)" && rc=0 || rc=$?
  HASH[$mode]="$(hash_line "$out")"
  if [ $rc -eq 0 ] && [ "$(loss_line "$out")" = "$(loss_line "$one")" ] &&
     grep -q "every class of every rank reached exactly its planned high-water" <<<"$out" &&
     [ "$(ctx "$T/$mode.jsonl")" = "${WANT[$mode]}" ]; then
    echo "ok   train cp 2 $mode: $(loss_line "$out") as one process; planned = measured on every rank; (context, pipeline) bytes per step $(ctx "$T/$mode.jsonl")"
  else echo "FAIL train cp 2 $mode (exit $rc): '$(loss_line "$out")' vs '$(loss_line "$one")', bytes $(ctx "$T/$mode.jsonl" 2>&1) vs ${WANT[$mode]}"; echo "$out" | tail -4; fail=1; fi
done
# allgather's and ulysses' exchanges are pipelined over head groups (4 and 2 here: 4 heads, one
# thread a rank); one group (ZT_CP_HEAD_GROUPS=1: every exchange waited before the attention)
# gives the same parameters bit for bit. The traces hold the attention kernel's spans (per step, per
# block, forward and backward: a span per group, ring a span per ring step) and the cp waits, and
# bench/cp_trace.py reads them: the counts say how many groups ran
spans() { python3 "$SRC/bench/cp_trace.py" "$1" --json | python3 -c 'import json,sys; d=json.load(sys.stdin); print(" ".join("%d/%d" % (r["attention_calls"], r["comm_waits"]) for r in d["ranks"]))'; }
declare -A SPANS=([allgather]="64/96 64/96" [ring]="32/32 32/32" [ulysses]="32/64 32/64" [allgather1]="16/24 16/24" [ulysses1]="16/32 16/32")
for mode in allgather ulysses; do
  out="$(ZT_CP_HEAD_GROUPS=1 "$Z" train "$T/g.yaml" --nproc 2 "${CP[@]}" --set parallel.context_parallel_mode=$mode \
         --trace "$T/${mode}1.trace.json" 2>&1)" || true
  if [ -n "${HASH[$mode]}" ] && [ "$(hash_line "$out")" = "${HASH[$mode]}" ]; then
    echo "ok   cp 2 $mode in one head group = pipelined over head groups: ${HASH[$mode]}"
  else echo "FAIL cp 2 $mode, ZT_CP_HEAD_GROUPS=1: '$(hash_line "$out")' vs pipelined '${HASH[$mode]}'"; echo "$out" | tail -3; fail=1; fi
done
for k in allgather ring ulysses allgather1 ulysses1; do
  got="$(spans "$T/$k.trace.json" 2>&1 || true)"
  if [ "$got" = "${SPANS[$k]}" ]; then echo "ok   trace of cp 2 $k: attention spans / cp waits per rank $got"
  else echo "FAIL trace of cp 2 $k: attention spans / cp waits per rank '$got', want '${SPANS[$k]}'"; fail=1; fi
done
# packed records (documents' masks from the whole sequences' positions, losses weighed by counted
# targets, validation on a held-out fraction): cp 2 prints one process's losses and val loss
/usr/bin/python3 - "$T" <<'PY'
import json, random, sys
random.seed(7)
words = open('/usr/share/common-licenses/GPL-3').read().split()
def phrase(a, b): return ' '.join(random.choice(words) for _ in range(random.randint(a, b)))
with open(sys.argv[1] + '/qa.jsonl', 'w') as f:
    for i in range(300):
        f.write(json.dumps({"prompt": "Q: " + phrase(3, 25) + "\nA:", "completion": " " + phrase(1, 40)}) + "\n")
PY
R=(--set data.train="$T/qa.jsonl" --set data.cache_dir="$T/cache" --set data.val_fraction=0.1 --set eval.every=3
   --set eval.batches=4 --set model.preset=llama-tiny --set training.gradient_accumulation_steps=4 --set training.steps=6
   --set training.lr=3e-3)
val_line() { grep -o 'loss [0-9.]* -> [0-9.]* | val [0-9.]*' <<<"$1" || true; }
# as_one LABEL LINE_FN ARGS... [-- CP_ARGS...]: one process with ARGS and cp 2 with ARGS and CP_ARGS print
# the same LINE_FN line, and cp 2 reaches every class's planned high-water
as_one() {
  local label="$1" line="$2" args=() cpa=(); shift 2
  while [ $# -gt 0 ] && [ "$1" != -- ]; do args+=("$1"); shift; done
  [ $# -gt 0 ] && shift && cpa=("$@")
  local a b; a="$("$Z" train "$T/g.yaml" "${args[@]}" 2>&1 || true)"
  b="$("$Z" train "$T/g.yaml" --nproc 2 "${CP[@]}" "${args[@]}" "${cpa[@]}" 2>&1 || true)"
  if [ -n "$($line "$a")" ] && [ "$($line "$a")" = "$($line "$b")" ] &&
     grep -q "every class of every rank reached exactly its planned high-water" <<<"$b"; then
    echo "ok   $label: $($line "$b") as one process; planned = measured"
  else echo "FAIL $label: '$($line "$b")' vs one process '$($line "$a")'"; echo "$b" | tail -3; fail=1; fi
}
as_one "packed records, cp 2 ring" val_line "${R[@]}" -- --set parallel.context_parallel_mode=ring
L=(--set model.preset=llama-tiny --set training.gradient_accumulation_steps=2)
a="$("$Z" train "$T/g.yaml" --nproc 2 "${CP[@]}" "${L[@]}" 2>&1 || true)"
b="$("$Z" train "$T/g.yaml" --nproc 4 "${CP[@]}" "${L[@]}" --set parallel.pipeline_parallel_size=2 2>&1 || true)"
if [ -n "$(hash_line "$a")" ] && [ "$(hash_line "$a")" = "$(hash_line "$b")" ]; then echo "ok   llama cp 2 x pp 2 = cp 2: $(hash_line "$a")"
else echo "FAIL llama cp 2 x pp 2: '$(hash_line "$b")' vs cp 2 '$(hash_line "$a")'"; echo "$b" | tail -3; fail=1; fi
Z3=(--set parallel.strategy=zero3) # pieces over the dp x cp ranks: one shard file per rank
out="$("$Z" train "$T/g.yaml" --set training.steps=6 --nproc 2 "${CP[@]}" "${Z3[@]}" --ckpt-dir "$T/ck" --ckpt-every 3 2>&1)" ||
  { echo "FAIL cp train with checkpoints: $(tail -2 <<<"$out")"; fail=1; }
want="$(hash_line "$out")"
o2="$("$Z" train "$T/g.yaml" --set training.steps=6 --nproc 2 "${CP[@]}" "${Z3[@]}" --resume "$T/ck/step-00000003" 2>&1)" || true
if [ -n "$want" ] && [ "$(hash_line "$o2")" = "$want" ]; then echo "ok   cp 2 resumed from its step 3 = uninterrupted: $want"
else echo "FAIL cp 2 resume: '$(hash_line "$o2")' vs '$want'"; echo "$o2" | tail -2; fail=1; fi
"$Z" train "$T/g.yaml" --set training.steps=6 --resume "$T/ck/step-00000003" --stop-after 3 --ckpt-dir "$T/one" >/dev/null 2>&1 || true
"$Z" train "$T/g.yaml" --set training.steps=6 --nproc 2 "${CP[@]}" "${Z3[@]}" --resume "$T/one/step-00000003" --stop-after 3 \
  --ckpt-dir "$T/back" >/dev/null 2>&1 || true
if cmp -s "$T/ck/step-00000003/rank-00000.bin" "$T/back/step-00000003/rank-00000.bin" &&
   cmp -s "$T/ck/step-00000003/rank-00001.bin" "$T/back/step-00000003/rank-00001.bin"; then
  echo "ok   cp 2 commit -> one-process re-save -> cp 2 re-save: the shard files are byte-identical"
else echo "FAIL cp 2 -> one process -> cp 2: the shard files differ (or are missing)"; fail=1; fi

# 5. the real files
ACC="$SRC/tests/configs/real/accelerate.configs.cp.yaml"
out="$("$Z" train "$ACC" --set data.train="$T/gpl.bin" --set model.preset=tiny --set model.vocab_size=$TINY_VOCAB --set model.n_layer=2 \
       --set model.n_embd=64 --set model.n_head=4 --set training.steps=2 --set training.seq_len=64 \
       --set training.micro_batch_size=1 2>&1)" && rc=0 || rc=$?
if [ $rc -eq 0 ] && grep -q "mesh tp 1 x cp 8 x dp 1 x pp 1" <<<"$out" && grep -q "every class of every rank reached exactly its planned high-water" <<<"$out"; then
  echo "ok   accelerate cp.yaml on 8 ranks: $(grep -o 'mesh [^|]*' <<<"$out" | head -1); $(loss_line "$out")"
else echo "FAIL accelerate cp.yaml: exit $rc"; echo "$out" | tail -4; fail=1; fi
cat > "$T/ds.json" <<JEOF
{"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1, "sequence_parallel_size": 2,
 "zero_optimization": {"stage": 3}}
JEOF
out="$("$Z" train "$T/ds.json" --nproc 2 --set data.train="$T/gpl.bin" --set model.preset=tiny --set model.vocab_size=$TINY_VOCAB --set model.n_layer=2 \
       --set model.n_embd=64 --set model.n_head=4 --set training.steps=2 --set training.seq_len=64 2>&1)" && rc=0 || rc=$?
if [ $rc -eq 0 ] && grep -q "mesh tp 1 x cp 2 x dp 1 x pp 1 .*ulysses attention" <<<"$out"; then
  echo "ok   deepspeed sequence_parallel_size 2: Ulysses on 2 ranks, $(loss_line "$out")"
else echo "FAIL deepspeed sequence_parallel_size: exit $rc"; echo "$out" | grep -i 'context\|error' | head -4; fail=1; fi

# 6. a mixture of experts: dropless routing, both router losses, every step clipped (the tool's llama-moe)
MOE=(--arch llama-moe --clip 0.05)
out="$(run 2 ddp 2 6 --cp 2 "${MOE[@]}")"; check "llama-moe cp 2, 2 micro-batches" moe "$out"
out="$(run 4 zero3 1 6 --cp 2 "${MOE[@]}")"; check "llama-moe cp 2 x dp 2 zero3" moe "$out"
out="$(run 4 ddp 1 6 --cp 2 --ep 2 "${MOE[@]}")"; check "llama-moe ep 2 x cp 2 (the ep group a dp x cp pair)" moe "$out"
out="$(run 4 zero3 1 6 --cp 2 --ep 4 "${MOE[@]}")"; check "llama-moe ep 4 x cp 2 zero3" moe "$out"
dump 1 mref "${MOE[@]}"; dump 1 mulp "${MOE[@]}" --ulp; dump 1 mlr "${MOE[@]}" --lr 0.0101
dump 2 mag "${MOE[@]}" --cp 2; dump 2 mring "${MOE[@]}" --cp 2 --cp-mode ring; dump 4 mc4 "${MOE[@]}" --cp 4 --cp-mode ring
python3 "$SRC/tests/tolerance.py" "$T" llama-moe mref mulp "mag=inside=llama-moe cp 2 allgather vs one process" \
  "mring=inside=llama-moe cp 2 ring vs one process" "mc4=inside=llama-moe cp 4 ring vs one process" \
  "mlr=outside=lr x 1.01 (must fail)" || fail=1
M=(--set model.preset=llama-tiny-moe)
as_one "train llama-tiny-moe cp 2" loss_line "${M[@]}"
bad "capacity factor with cp" "parallel.context_parallel_size: 2 with model.capacity_factor 1.25" \
  train "$T/g.yaml" --nproc 2 "${CP[@]}" "${M[@]}" --set model.capacity_factor=1.25

exit $fail
