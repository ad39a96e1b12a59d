#!/usr/bin/env bash
# moe_tp.sh BUILD SOURCE - tensor parallelism of a Llama mixture of experts (Megatron's expert tensor
# parallelism: each part holds I/tp columns of every expert, src/model/llama_moe.c; the cut in
# src/shard/tp_plans.c), alone, with expert parallelism, with a shared expert and with sequence parallelism:
#  1. bit-identical where the order is fixed (tool_dist_check --arch llama-moe, dropless, both
#     router losses, every step clipped): tp 2 with 2 micro-batches on 2 ranks = tp 2 x dp 2 under
#     zero1 and zero3 = ep 2 x tp 2 (ddp, zero3) on 4 ranks, the experts stored E/ep a rank (each rank
#     its tp slice of its ep part's experts: zt_param_desc.ep_parts) and whole (--experts-whole): at
#     rest ddp stored holds the other part's slices' parameter and moment bytes fewer, exactly, zero3
#     plans a smaller gathered high-water; every step's tp bytes equal to the
#     formula (the tool: the dense formula + each block's top-k weights' gradient sum);
#     under bf16 compute: tp 2 = tp 2 x dp 2 zero1 = ep 2 x tp 2 zero3;
#     with a gated shared expert (Qwen2-MoE's, --arch llama-moe-shared, cut as the dense MLP,
#     src/model/llama_moe_shared.c: its gate's dout·ys summed with the top-k weights' gradient) tp 2
#     = tp 2 x dp 2 zero3 = ep 2 x tp 2 zero3, and under bf16 tp 2 x dp 2 zero3 = ep 2 x tp 2 zero3;
#     with an ungated one (DeepSeek-MoE's, --arch llama-moe-deepseek) tp 2 = ep 2 x tp 2 zero3;
#     with sequence parallelism (--sp: the block's rows gathered before the router, its sum
#     reduce-scattered) sp tp 2 = sp ep 2 x tp 2 zero3, and with the gated shared expert the gated
#     set above; each 2-rank run's tp bytes equal to the formula (+ B·T per block with the gate, the
#     sp formula's with sp); with the norms frozen sp = tp without sp (shared expert), bit for bit,
#     in fp32 and under bf16 compute;
#  2. against one process (the parts add their columns' shares in another order): losses and
#     parameters within the tolerance tests/tolerance.py derives in the run (8 x a one-ulp
#     perturbation's), for tp 2 and for ep 2 x tp 2, with the gated shared expert for tp 2 and sp
#     tp 2, with the ungated one for tp 2; the runs with lr x 1.01 fall outside;
#  3. zerotrain train: tp 2 on 2 ranks reaches every class's planned high-water exactly, and so does
#     tp 2 with sequence parallelism and a gated shared expert under bf16;
#     checkpoints hold logical tensors: the tp 2 run resumed from its step-2 commit ends on its own
#     hash, a ddp run resumes from it as from its one-process re-save, and the Hugging Face
#     directory exported from the tp 2 commit is the re-save's, byte for byte (Mixtral's; and
#     Qwen2-MoE's from the sp tp 2 run with the shared expert); ep 2 x tp 2 with the experts stored:
#     every class at its plan (estimate-memory's too), its commit resumed under tp 2 on its own
#     hash, loaded on one process, whose re-save exports the same Mixtral directory; and inside 2
#     pipeline stages (pp 2 x tp 2 x ep 2 zero3, 8 ranks) the same, its commit resumed under tp 2;
#  4. bad input: an expert width, a shared expert's width tp does not divide (exit 2).
# Each rank runs one OpenMP thread, so the kernels see the same thread count everywhere.
set -euo pipefail
BUILD="$1"; SRC="$2"
TOOL="$BUILD/tests/tool_dist_check"
Z="$BUILD/zerotrain"
export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ZT_COMM_TIMEOUT=120
T=$(mktemp -d)
trap 'declare -F serve_stop >/dev/null && serve_stop; rm -rf "$T"' EXIT
source "$SRC/tests/tool_serve.bash"
for n in 1 2 4; do serve_start "n$n" mpirun -np "$n" --oversubscribe --bind-to none -x OMP_NUM_THREADS -x ZT_COMM_TIMEOUT "$TOOL"; done
source "$SRC/tests/dist_check.bash" # hash_of, check, bad; sets fail=0
run() { # N args... (ARCH: llama-moe-shared, llama-moe-deepseek: with a shared expert)
  local n="$1" rc=0; shift
  serve_run "n$n" "$@" --arch "${ARCH:-llama-moe}" --clip 0.05 || rc=$?
  [ $rc = 99 ] || return $rc
  mpirun -np "$n" --oversubscribe --bind-to none -x OMP_NUM_THREADS -x ZT_COMM_TIMEOUT "$TOOL" "$@" \
    --arch "${ARCH:-llama-moe}" --clip 0.05 2>&1
}
tp_bytes() { # label output: the tool printed the tp bytes equal to the formula
  if grep -qE '^tp bytes ([0-9]+) \(formula \1\)$' <<<"$2"; then echo "     $1: $(grep '^tp bytes' <<<"$2")"
  else echo "FAIL $1: tp bytes against the formula: $(grep '^tp bytes' <<<"$2" || echo none)"; fail=1; fi
}

# ---- 1. the bits ---------------------------------------------------------------------------------
STEPS=4
out="$(run 2 ddp 2 $STEPS --tp 2)"; check "tp 2, 2 micro-batches, 2 ranks" moe "$out"; tp_bytes "tp 2" "$out"
for s in zero1 zero3; do
  out="$(run 4 $s 1 $STEPS --tp 2)"; check "tp 2 x dp 2 $s, 4 ranks" moe "$out"
done
for s in ddp zero3; do # the experts stored E/ep a rank (each tp part of an ep part its tp slice of them)
  out="$(run 4 $s 1 $STEPS --tp 2 --ep 2)"; check "ep 2 x tp 2 $s, 4 ranks, experts stored" moe "$out"
  tp_bytes "ep 2 x tp 2 $s" "$out"; echo "$out" > "$T/eptp-$s.out"
done
# ... against the experts whole on every rank (--experts-whole): the same bits; ddp at rest holds the
# parameter and moment bytes of the other ep part's experts' tp slices fewer, exactly; zero3 (the
# experts' pieces: the edp group is 1 rank, so at rest the same) gathers only its part's experts
rest() { grep -o 'memory at rest: params [0-9]* grads [0-9]* optimizer [0-9]*' <<<"$1" | awk '{print $5, $9}'; }
planned() { grep -o 'planned at rest [0-9]*, high-water [0-9]* (gathered [0-9]*)' <<<"$1" | tr -dc '0-9 ' | awk '{print $1, $2, $3}'; }
whole="$(run 4 ddp 1 $STEPS --tp 2 --ep 2 --experts-whole)"; check "ep 2 x tp 2 ddp, experts whole" moe "$whole"
read -r sp so <<<"$(rest "$(cat "$T/eptp-ddp.out")")"; read -r wp wo <<<"$(rest "$whole")"
want=$(( 2 * 3 * 2 * 12 * 32 * 4 )) # 2 layers x 3 stacked tensors x 2 experts x (24 / tp) x 32 floats
if [ -n "$sp" ] && [ $(( wp - sp )) = $want ] && [ $(( wo - so )) = $(( 2 * want )) ]
then echo "ok   ep 2 x tp 2 ddp: the experts stored hold $(( wp - sp )) fewer parameter bytes and $(( wo - so )) fewer moment bytes at rest than whole"
else echo "FAIL ep 2 x tp 2 ddp stored vs whole at rest: params $sp vs $wp, optimizer $so vs $wo (want -$want, -$(( 2 * want )))"; fail=1; fi
whole="$(run 4 zero3 1 $STEPS --tp 2 --ep 2 --experts-whole)"; check "ep 2 x tp 2 zero3, experts whole" moe "$whole"
read -r sr sh sg <<<"$(planned "$(cat "$T/eptp-zero3.out")")"; read -r wr wh wg <<<"$(planned "$whole")"
if [ -n "$sg" ] && [ -n "$wg" ] && [ "$sg" -lt "$wg" ] && [ "$sh" -lt "$wh" ] && [ "$sr" -le "$wr" ]
then echo "ok   ep 2 x tp 2 zero3: planned high-water $sh bytes stored against $wh whole (gathered $sg against $wg); at rest $sr against $wr"
else echo "FAIL ep 2 x tp 2 zero3 planned: stored '$sr $sh $sg', whole '$wr $wh $wg'"; fail=1; fi
# Muon (on every expert tensor too: the stacked (E·I, C) matrix gathered over the tp parts, then the ep
# parts, orthogonalized whole by its owner, the update sent to its tp parts and then each part's group)
# and LAMB (the logical tensor's norms): ep 2 x tp 2 with the experts stored = tp 2 with 2 micro-batches
MU=(--optimizer muon --muon-params '[a-z]+\.[0-9]+\.[a-z_]+\.[a-z_]+\.weight|layers\.[0-9]+\.block_sparse_moe\.experts\.w[123]\.weight')
for opt in lamb muon; do
  args=(--optimizer lamb); [ $opt = muon ] && args=("${MU[@]}")
  check "$opt: tp 2, 2 micro-batches, 2 ranks" "moe-$opt" "$(run 2 ddp 2 $STEPS --tp 2 "${args[@]}")"
  for s in ddp zero3; do
    check "$opt: ep 2 x tp 2 $s, 4 ranks, experts stored" "moe-$opt" "$(run 4 $s 1 $STEPS --tp 2 --ep 2 "${args[@]}")"
  done
done
# under bf16 compute (docs/precision.md, "A mixture of experts"): tp 2 = tp 2 x dp 2 zero1 = ep 2 x tp 2 zero3
check "bf16: tp 2, 2 micro-batches, 2 ranks" moe-bf16 "$(run 2 ddp 2 $STEPS --tp 2 --precision bf16)"
check "bf16: tp 2 x dp 2 zero1, 4 ranks" moe-bf16 "$(run 4 zero1 1 $STEPS --tp 2 --precision bf16)"
check "bf16: ep 2 x tp 2 zero3, 4 ranks" moe-bf16 "$(run 4 zero3 1 $STEPS --tp 2 --ep 2 --precision bf16)"
# with a shared expert, gated (Qwen2-MoE's: its gate's dout·ys in the top-k sum) and not (DeepSeek-MoE's:
# no collective added); sequence parallelism without and with the gated shared expert. Each key's
# 2-rank run checks the tp bytes; the rest run on 4 ranks (one micro-batch each)
bits() { # KEY ARCH all|two TP_ARGS...: tp 2 with 2 micro-batches on 2 ranks = ep 2 x tp 2 zero3; all:
  local k="$1" how="$3" out; ARCH="$2"; shift 3 # and = tp 2 x dp 2 zero3, and under bf16 too
  out="$(run 2 ddp 2 $STEPS "$@")"; check "$k: $*, 2 micro-batches, 2 ranks" "$k" "$out"; tp_bytes "$k $*" "$out"
  check "$k: ep 2 x $* zero3, 4 ranks" "$k" "$(run 4 zero3 1 $STEPS --ep 2 "$@")"
  [ "$how" = all ] || return 0
  check "$k: $* x dp 2 zero3, 4 ranks" "$k" "$(run 4 zero3 1 $STEPS "$@")"
  check "$k, bf16: $* x dp 2 zero3, 4 ranks" "$k-bf16" "$(run 4 zero3 1 $STEPS --precision bf16 "$@")"
  check "$k, bf16: ep 2 x $* zero3, 4 ranks" "$k-bf16" "$(run 4 zero3 1 $STEPS --ep 2 --precision bf16 "$@")"
}
bits shared llama-moe-shared all --tp 2
bits deepseek llama-moe-deepseek two --tp 2
bits sp llama-moe two --tp 2 --sp
bits sp-shared llama-moe-shared all --tp 2 --sp
# the norms frozen (their weight gradients are the one sum sp splits): sp = tp without sp
check "shared expert, norms frozen: tp 2 x dp 2" frozen "$(run 4 zero3 1 $STEPS --tp 2 --freeze '.*norm.*')"
check "shared expert, norms frozen: sp tp 2 x dp 2" frozen "$(run 4 zero3 1 $STEPS --tp 2 --sp --freeze '.*norm.*')"
# ... and under bf16 compute: sp rounds its part's normalized rows and gathers the bf16 operand, tp
# rounds the whole; the same rows, the same bits (the router and the gate read the operand widened)
check "shared expert, norms frozen, bf16: tp 2 x dp 2" frozen-bf16 \
  "$(run 4 zero3 1 $STEPS --tp 2 --freeze '.*norm.*' --precision bf16)"
check "shared expert, norms frozen, bf16: sp tp 2 x dp 2" frozen-bf16 \
  "$(run 4 zero3 1 $STEPS --tp 2 --sp --freeze '.*norm.*' --precision bf16)"
unset ARCH

# ---- 2. against one process, within the run's own tolerance ---------------------------------------
STEPS=16
dump() { # N NAME GA args...: the final logical parameters and the losses of a ddp run
  local n="$1" f="$2" ga="$3"; shift 3
  run "$n" ddp "$ga" $STEPS --dump "$T/$f.bin" "$@" | grep '^losses' > "$T/$f.losses"
}
# the global batch is 2 micro-batches each time: one process's 2, tp 2's 2 on its one dp rank,
# (ep 2 x) tp 2 x dp 2's one on each of its 2 dp ranks
dump 1 ref 2; dump 1 ulp 2 --ulp; dump 2 tp 2 --tp 2; dump 4 eptp 1 --tp 2 --ep 2; dump 1 lr 2 --lr 0.0101
python3 "$SRC/tests/tolerance.py" "$T" llama-moe ref ulp "tp=inside=tp 2 vs one process" \
  "eptp=inside=ep 2 x tp 2 vs one process" "lr=outside=lr x 1.01 (must fail)" || fail=1
# with the gated shared expert (tp 2, sp tp 2), and the ungated one (tp 2)
export ARCH=llama-moe-shared
dump 1 sref 2; dump 1 sulp 2 --ulp; dump 4 stp 1 --tp 2; dump 4 ssp 1 --tp 2 --sp; dump 1 slr 2 --lr 0.0101
python3 "$SRC/tests/tolerance.py" "$T" llama-moe-shared sref sulp "stp=inside=tp 2 vs one process" \
  "ssp=inside=sp tp 2 vs one process" "slr=outside=lr x 1.01 (must fail)" || fail=1
export ARCH=llama-moe-deepseek
dump 1 dref 2; dump 1 dulp 2 --ulp; dump 4 dtp 1 --tp 2
python3 "$SRC/tests/tolerance.py" "$T" llama-moe-deepseek dref dulp "dtp=inside=tp 2 vs one process" || fail=1
unset ARCH

# ---- 3. zerotrain train: the memory plan, checkpoints -----------------------------------------------
source "$SRC/tests/tiny_vocab.bash"
"$Z" tokenize /usr/share/common-licenses/GPL-3 -o "$T/d.bin" >/dev/null
fold_tokens "$T/d.bin"
printf 'model: {preset: llama-tiny-moe, vocab_size: %s}\ndata: {train: %s}\ntraining: {steps: 4, seq_len: 16, micro_batch_size: 2}\n' \
  "$TINY_VOCAB" "$T/d.bin" > "$T/m.yaml"
hash_line() { grep -o 'params xxh64 [0-9a-f]*' <<<"$1" || true; }
TP=(--nproc 2 --set parallel.tensor_parallel_size=2)
tp="$("$Z" train "$T/m.yaml" "${TP[@]}" --set checkpoint.every=2 --set checkpoint.dir="$T/ck" 2>&1)" || true
if [ -n "$(hash_line "$tp")" ] && grep -q "every class of every rank reached exactly its planned high-water" <<<"$tp"
then echo "ok   train: tp 2, every memory class at its planned high-water ($(hash_line "$tp"))"
else echo "FAIL train tp 2: no hash or planned != measured"; echo "$tp" | grep -E "planned|class|rror" | head -5; fail=1; fi
C="$T/ck/step-00000002"
r="$("$Z" train "$T/m.yaml" "${TP[@]}" --resume "$C" 2>&1)" || true
if [ -n "$(hash_line "$r")" ] && [ "$(hash_line "$r")" = "$(hash_line "$tp")" ]; then
  echo "ok   tp 2 resumed from its step 2 = uninterrupted: $(hash_line "$r")"
else echo "FAIL tp 2 resume: '$(hash_line "$r")' vs '$(hash_line "$tp")'"; echo "$r" | tail -3; fail=1; fi
"$Z" train "$T/m.yaml" --resume "$C" --stop-after 2 --ckpt-dir "$T/one" >/dev/null 2>&1 || true
a="$("$Z" train "$T/m.yaml" --nproc 2 --resume "$C" 2>&1)" || true
b="$("$Z" train "$T/m.yaml" --nproc 2 --resume "$T/one/step-00000002" 2>&1)" || true
if [ -n "$(hash_line "$a")" ] && [ "$(hash_line "$a")" = "$(hash_line "$b")" ]; then
  echo "ok   ddp resumed from the tp 2 commit = from its one-process re-save: $(hash_line "$a")"
else echo "FAIL ddp from the tp 2 commit: '$(hash_line "$a")' vs '$(hash_line "$b")'"; fail=1; fi
"$Z" export "$C" --hf "$T/hf_tp" >/dev/null 2>&1 || true
"$Z" export "$T/one/step-00000002" --hf "$T/hf_one" >/dev/null 2>&1 || true
if [ -s "$T/hf_tp/model.safetensors" ] && cmp -s "$T/hf_tp/model.safetensors" "$T/hf_one/model.safetensors"; then
  echo "ok   the Mixtral directory exported from the tp 2 commit = from the one-process re-save"
else echo "FAIL export --hf from the tp 2 commit differs (or is missing)"; fail=1; fi

# ep 2 x tp 2 on 4 ranks, the experts stored E/ep a rank (each rank its tp slice of its ep part's
# experts): every class at its plan; its step-2 commit (the experts' slices of every (tp part, ep
# part)) resumes under tp 2 alone (2 micro-batches) on the straight run's parameters, and loads on one
# process, whose re-save exports the same Mixtral directory
ET=(--nproc 4 --set parallel.tensor_parallel_size=2 --set parallel.expert_parallel_size=2)
TP2=("${TP[@]}" --set training.gradient_accumulation_steps=2)
et="$("$Z" train "$T/m.yaml" "${ET[@]}" --set checkpoint.every=2 --set checkpoint.dir="$T/cket" 2>&1)" || true
C="$T/cket/step-00000002"
r="$("$Z" train "$T/m.yaml" "${TP2[@]}" --resume "$C" 2>&1)" || true
if [ -n "$(hash_line "$et")" ] && [ "$(hash_line "$r")" = "$(hash_line "$et")" ] &&
   grep -q "experts over ep 2.*stored E/ep a rank" <<<"$et" &&
   grep -q "every class of every rank reached exactly its planned high-water" <<<"$et"
then echo "ok   train: ep 2 x tp 2, experts stored, every class at its plan; its step-2 commit resumed under tp 2: $(hash_line "$r")"
else echo "FAIL train ep 2 x tp 2 stored: '$(hash_line "$et")', resumed under tp 2 '$(hash_line "$r")'"
  echo "$et" | grep -E "experts over|planned|rror" | head -3; fail=1; fi
# estimate-memory plans the same (its experts stored under tp as the engine stores them)
plan="$(grep -o 'high-water [0-9.]* MiB' <<<"$et" | head -1 | cut -d' ' -f2)"
"$Z" estimate-memory "$T/m.yaml" --nproc 4 --set parallel.tensor_parallel_size=2 --set parallel.expert_parallel_size=2 \
  --json > "$T/est.json" 2>&1 || true
if /usr/bin/python3 - "$T/est.json" "$plan" <<'PY'
import json, sys
hw = json.load(open(sys.argv[1])).get("strategies", {}).get("ddp", {}).get("peak_total")
sys.exit(0 if hw is not None and sys.argv[2] and abs(hw / 1048576 - float(sys.argv[2])) < 0.051 else 1)
PY
then echo "ok   estimate-memory ep 2 x tp 2: the run's planned high-water ($plan MiB)"
else echo "FAIL estimate-memory ep 2 x tp 2 differs from the run's plan ($plan MiB)"; head -c 300 "$T/est.json"; fail=1; fi
"$Z" train "$T/m.yaml" --set training.gradient_accumulation_steps=2 --resume "$C" --stop-after 2 --ckpt-dir "$T/one-et" >/dev/null 2>&1 || true
"$Z" export "$C" --hf "$T/hf_et" >/dev/null 2>&1 || true
"$Z" export "$T/one-et/step-00000002" --hf "$T/hf_et_one" >/dev/null 2>&1 || true
if [ -s "$T/hf_et/model.safetensors" ] && cmp -s "$T/hf_et/model.safetensors" "$T/hf_et_one/model.safetensors"
then echo "ok   the Mixtral directory exported from the ep 2 x tp 2 commit = from its one-process re-save"
else echo "FAIL export --hf from the ep 2 x tp 2 commit differs from its one-process re-save's (or is missing)"; fail=1; fi
# ... and inside 2 pipeline stages (pp 2 x tp 2 x ep 2 on 8 ranks, zero3: each stage's norm chunks in
# tp's order, src/engine/pipeline.c) = the same, every class at its plan, its commit resumed under tp 2
pp="$("$Z" train "$T/m.yaml" --nproc 8 --set parallel.tensor_parallel_size=2 --set parallel.pipeline_parallel_size=2 \
      --set parallel.expert_parallel_size=2 --set parallel.strategy=zero3 --set checkpoint.every=2 \
      --set checkpoint.dir="$T/ckpp" 2>&1)" || true
r="$("$Z" train "$T/m.yaml" "${TP2[@]}" --resume "$T/ckpp/step-00000002" 2>&1)" || true
if [ -n "$(hash_line "$et")" ] && [ "$(hash_line "$pp")" = "$(hash_line "$et")" ] && [ "$(hash_line "$r")" = "$(hash_line "$et")" ] &&
   grep -q "experts over ep 2.*stored E/ep a rank" <<<"$pp" && grep -q "every class of every rank reached exactly its planned high-water" <<<"$pp"
then echo "ok   train: pp 2 x tp 2 x ep 2 zero3 (experts stored) = ep 2 x tp 2, planned = measured, its commit resumed under tp 2: $(hash_line "$pp")"
else echo "FAIL pp 2 x tp 2 x ep 2: '$(hash_line "$pp")', resumed '$(hash_line "$r")' vs '$(hash_line "$et")'"
  echo "$pp" | grep -E "experts over|planned|rror" | head -3; fail=1; fi

# tp 2 with sequence parallelism and a gated shared expert under bf16: the memory plan; its commit holds
# logical tensors: the Qwen2-MoE directory exported from it is its one-process re-save's
SHM=(--set model.shared_expert_intermediate_size=48 --set model.shared_expert_gate=true --set precision.mode=bf16)
out="$("$Z" train "$T/m.yaml" "${TP[@]}" "${SHM[@]}" --set parallel.sequence_parallel=true --set checkpoint.every=2 \
       --set checkpoint.dir="$T/ck-sh" 2>&1)" || true
if [ -n "$(hash_line "$out")" ] && grep -q "every class of every rank reached exactly its planned high-water" <<<"$out"
then echo "ok   train bf16: sp tp 2 with a gated shared expert, every memory class at its planned high-water"
else echo "FAIL train bf16 sp tp 2 shared expert: no hash or planned != measured"
     echo "$out" | grep -E "planned|class|rror" | head -5; fail=1; fi
C="$T/ck-sh/step-00000002"
"$Z" train "$T/m.yaml" "${SHM[@]}" --resume "$C" --stop-after 2 --ckpt-dir "$T/one-sh" >/dev/null 2>&1 || true
"$Z" export "$C" --hf "$T/hf_sh_tp" >/dev/null 2>&1 || true
"$Z" export "$T/one-sh/step-00000002" --hf "$T/hf_sh_one" >/dev/null 2>&1 || true
if [ -s "$T/hf_sh_tp/model.safetensors" ] && cmp -s "$T/hf_sh_tp/model.safetensors" "$T/hf_sh_one/model.safetensors"
then echo "ok   the Qwen2-MoE directory exported from the sp tp 2 commit = from the one-process re-save"
else echo "FAIL export --hf from the sp tp 2 shared-expert commit differs (or is missing)"; fail=1; fi

# ---- 4. bad input ------------------------------------------------------------------------------------
bad "shared expert width tp does not divide" \
  "parallel.tensor_parallel_size: 2 does not divide model.shared_expert_intermediate_size (25)" \
  train "$T/m.yaml" "${TP[@]}" --set model.shared_expert_intermediate_size=25
bad "expert width tp does not divide" "parallel.tensor_parallel_size: 2 does not divide model.moe_intermediate_size (25)" \
  train "$T/m.yaml" "${TP[@]}" --set model.moe_intermediate_size=25
exit $fail
