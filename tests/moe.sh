#!/usr/bin/env bash
# moe.sh BUILD SOURCE - a Llama mixture of experts (src/model/llama_moe.c, docs/models.md):
#  1. the PyTorch oracle (torch_oracle.py's Mixtral block, written out there): the same weights and
#     batch, the loss (router losses included) and every parameter's gradient within the Llama
#     bounds (loss 1e-6, gradient norms 1e-6, differences 1e-5 relative), dropless and with a
#     capacity factor of 1 (tokens dropped), and with shared experts (Qwen2-MoE's block with its
#     sigmoid gate, DeepSeek-MoE's without); checked by moe_hf.py's process in 4 (one torch import);
#  2. bit-identical parameters and losses after 8 steps (tool_dist_check --arch llama-moe, dropless,
#     both router losses on): one process with 2 micro-batches = ddp, zero1, zero2, zero3 on 2
#     ranks, and zero3 with full and selective activation checkpointing; with a gated shared expert
#     (--arch llama-moe-shared): one process = zero3 on 2 ranks, with selective checkpointing too;
#     Pipeline parallelism (pp 2, zerotrain train): one process's parameters bit for bit, its losses
#     within float rounding with the router losses (every stage's reported) and equal without;
#     Under bf16 mixed, fp16 and bf16-low compute: one process = zero3 on 2 ranks (and zero1, selective
#     checkpointing, a shared expert under bf16); bf16 and fp16 within the tolerance tests/tolerance.py
#     derives from an fp32 run with bf16-rounded initial parameters (2x its divergence), a bf16 run at
#     lr x 1.1 outside;
#  3. bad shapes: exit 2 naming the keys and numbers (tensor parallelism's: tests/moe_tp.sh, expert
#     parallelism's: tests/moe_ep.sh); bf16 and fp16 training (and bf16 zero3 with a shared expert) at the planned
#     high-water of every memory class;
#  4. Hugging Face Mixtral both ways: a checkpoint exported as a sharded Mixtral directory (config.json
#     model_type mixtral, per-expert tensors experts.E.w1/w2/w3) scores in PyTorch (moe_hf.py: the
#     directory read as transformers names it) what zerotrain scores on the checkpoint, to 1e-5;
#     the directory read back and written again (sharded -> one file -> one file) is byte-identical,
#     and model.init_hf trains from it;
#  5. Hugging Face Qwen2-MoE both ways (qwen_moe_hf.py): a directory the test writes trains through
#     model.init_hf loss for loss as PyTorch's SGD (1e-5), the trained export scores in PyTorch as
#     zerotrain does, the export of the directory holds its tensors and round-trips byte for byte;
#     config.json fields not built (q/k/v biases, dense layers, unknown fields) exit 2 by name.
# Each rank runs one OpenMP thread, so the kernels see the same thread count everywhere.
set -euo pipefail
BUILD="$1"; SRC="$2"
TOOL="$BUILD/tests/tool_dist_check"
Z="$BUILD/zerotrain"
export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ZT_COMM_TIMEOUT=120
T=$(mktemp -d)
trap 'declare -F serve_stop >/dev/null && serve_stop; rm -rf "$T"' EXIT
source "$SRC/tests/tool_serve.bash"
for n in 1 2; do serve_start "n$n" mpirun -np "$n" --oversubscribe --bind-to none -x OMP_NUM_THREADS -x ZT_COMM_TIMEOUT "$TOOL"; done
# hash_of, losses_of, fail, check LABEL KEY OUTPUT, bad LABEL TEXT ARGS...
source "$SRC/tests/dist_check.bash"
run() { # N args... (ARCH=llama-moe-shared: with Qwen2-MoE's gated shared expert)
  local n="$1" rc=0; shift
  serve_run "n$n" "$@" --arch "${ARCH:-llama-moe}" || rc=$?
  [ $rc = 99 ] || return $rc
  mpirun -np "$n" --oversubscribe --bind-to none -x OMP_NUM_THREADS -x ZT_COMM_TIMEOUT "$TOOL" "$@" --arch "${ARCH:-llama-moe}" 2>&1
}

# ---- 1. PyTorch: the dumps (checked in 4) ---------------------------------------------------------
# moe: L C NH NKV I V maxT B T THETA FACTOR LOW HIGH ORIG TIE E K IE NORM AUX Z CAP
for cap in 0 1; do
  "$BUILD/tests/tool_oracle_dump" "$T/moe$cap.bin" moe 2 64 4 2 192 512 64 2 32 500000 8 1 4 64 0 8 2 96 1 0.02 0.001 $cap \
    >/dev/null
done
# ... with shared experts (llama_moe_shared.c): Qwen2-MoE's block (gated, width 160, the top-k not
# renormalized, dropless) and DeepSeek-MoE's (no gate, width 2 x 96, capacity factor 1)
"$BUILD/tests/tool_oracle_dump" "$T/qwen.bin" moe 2 64 4 2 192 512 64 2 32 500000 8 1 4 64 0 8 2 96 0 0.02 0.001 0 160 1 \
  --qkv-bias >/dev/null
"$BUILD/tests/tool_oracle_dump" "$T/deepseek.bin" moe 2 64 4 2 192 512 64 2 32 500000 8 1 4 64 0 8 2 96 1 0.02 0.001 1 192 0 >/dev/null

# ---- 2. the strategies -----------------------------------------------------------------------------
STEPS=8
check "N=1 GA=2 ddp" moe "$(run 1 ddp 2 $STEPS)"
for s in ddp zero1 zero2 zero3; do check "N=2 $s" moe "$(run 2 $s 1 $STEPS)"; done
for r in full selective; do check "N=2 zero3 checkpointing $r" moe "$(run 2 zero3 1 $STEPS --recompute $r)"; done
# with a gated shared expert (a dense parameter, sharded as the attention's)
export ARCH=llama-moe-shared
check "shared expert: N=1 GA=2 ddp" shared "$(run 1 ddp 2 $STEPS)"
check "shared expert: N=2 zero3" shared "$(run 2 zero3 1 $STEPS)"
check "shared expert: N=2 zero3 checkpointing selective" shared "$(run 2 zero3 1 $STEPS --recompute selective)"
unset ARCH
# bf16 mixed, fp16 and bf16-low compute (docs/precision.md, "A mixture of experts": the router fp32,
# the experts' products on their compute copies, xp and h saved rounded): one process = zero1, zero3
for pr in bf16 fp16 bf16-low; do
  check "$pr: N=1 GA=2 ddp" "moe-$pr" "$(run 1 ddp 2 $STEPS --precision $pr)"
  check "$pr: N=2 zero3" "moe-$pr" "$(run 2 zero3 1 $STEPS --precision $pr)"
done
check "bf16: N=2 zero1" moe-bf16 "$(run 2 zero1 1 $STEPS --precision bf16)"
check "bf16: N=2 zero3 checkpointing selective" moe-bf16 "$(run 2 zero3 1 $STEPS --precision bf16 --recompute selective)"
export ARCH=llama-moe-shared
check "shared expert, bf16: N=1 GA=2 ddp" shared-bf16 "$(run 1 ddp 2 $STEPS --precision bf16)"
check "shared expert, bf16: N=2 zero3" shared-bf16 "$(run 2 zero3 1 $STEPS --precision bf16)"
unset ARCH
# bf16 against fp32 within a tolerance the run derives (tests/tolerance.py): 2 x how far an fp32 run
# whose initial parameters are rounded to bf16 (--bf16-init: bf16's rounding of the weights alone)
# ends from fp32 (bf16 compute rounds the activations too: measured 1.1x in the losses, 1.03x in the
# parameters); bf16 and fp16 compute inside, bf16 with the learning rate x 1.1 outside (the check
# can fail: 4x the yardstick in the losses)
dump() { # NAME args...: one process, 2 micro-batches: the final logical parameters and the losses
  local f="$1"; shift
  run 1 ddp 2 $STEPS --dump "$T/$f.bin" "$@" | grep '^losses' > "$T/$f.losses"
}
dump ref; dump yard --bf16-init; dump bf16 --precision bf16; dump fp16 --precision fp16
dump lr --precision bf16 --lr 0.011
/usr/bin/python3 "$SRC/tests/tolerance.py" "$T" llama-moe ref yard:2 "bf16=inside=bf16 vs fp32" \
  "fp16=inside=fp16 vs fp32" "lr=outside=bf16 with lr x 1.1 vs fp32 (must fail)" || fail=1

# ---- 3. bad input --------------------------------------------------------------------------------
"$Z" tokenize /usr/share/common-licenses/GPL-3 -o "$T/d.bin" --val-fraction 0.1 --val-out "$T/v.bin" >/dev/null
printf 'model: {preset: llama-tiny-moe}\ndata: {train: %s}\ntraining: {steps: 1, seq_len: 16}\n' "$T/d.bin" > "$T/m.yaml"
cfg=(train "$T/m.yaml")
bad "top-k > experts" "model.n_experts_per_token: 5: the top-k must be 1 .. model.n_experts (4)" "${cfg[@]}" \
  --set model.n_experts_per_token=5
bad "one expert" "model.n_experts: 1: a mixture needs at least 2 experts" "${cfg[@]}" --set model.n_experts=1 \
  --set model.n_experts_per_token=1
bad "negative aux coefficient" "model.router_aux_loss_coef" "${cfg[@]}" --set model.router_aux_loss_coef=-0.1
bad "negative z coefficient" "model.router_z_loss_coef" "${cfg[@]}" --set model.router_z_loss_coef=-1
bad "negative capacity factor" "model.capacity_factor" "${cfg[@]}" --set model.capacity_factor=-1
# bf16 and fp16 compute run: every memory class at its planned high-water (xp, h saved rounded)
for pr in bf16 fp16; do
  out="$("$Z" train "${cfg[1]}" --set precision.mode=$pr --set training.steps=2 2>&1)" || true
  if grep -q "every class of every rank reached exactly its planned high-water" <<<"$out"
  then echo "ok   train $pr: every memory class at its planned high-water"
  else echo "FAIL train $pr: planned != measured"; echo "$out" | grep -E "planned|class|rror" | head -5; fail=1; fi
done
out="$("$Z" train "${cfg[1]}" --nproc 2 --set precision.mode=bf16 --set parallel.strategy=zero3 --set training.steps=2 \
       --set model.shared_expert_intermediate_size=48 --set model.shared_expert_gate=true 2>&1)" || true
if grep -q "every class of every rank reached exactly its planned high-water" <<<"$out"
then echo "ok   train bf16 zero3 on 2 ranks with a shared expert: every memory class at its planned high-water"
else echo "FAIL train bf16 zero3 shared expert: planned != measured"; echo "$out" | grep -E "planned|class|rror" | head -5; fail=1; fi
bad "shared expert gate without a shared expert" "model.shared_expert_gate: true with no shared expert" "${cfg[@]}" \
  --set model.shared_expert_gate=true
bad "negative shared-expert width" "model.shared_expert_intermediate_size" "${cfg[@]}" \
  --set model.shared_expert_intermediate_size=-8
bad "shared-expert widths that disagree" "model.shared_expert_intermediate_size: 100 with model.n_shared_experts 2 of width 96" \
  "${cfg[@]}" --set model.n_shared_experts=2 --set model.shared_expert_intermediate_size=100
# a router that produces a non-finite logit (ZT_FAULT nan:at=router, layers.0's first token): the
# step is skipped as fault.nonfinite_skips says, the message and the JSONL name the router's layer
out="$(ZT_FAULT=nan:at=router:step=2:n=1 "$Z" train "$T/m.yaml" --set training.steps=3 \
       --set logging.jsonl="$T/nf.jsonl" 2>&1)" && rc=0 || rc=$?
if [ $rc = 0 ] && grep -q "step 2: gradient norm nan is not finite (the router of layers.0 gave non-finite logits for [1-9][0-9]* tokens\?): update skipped" <<<"$out" \
   && grep -q '"step":2,.*"moe_router_nonfinite":[1-9][0-9]*,"moe_router_nonfinite_unit":"layers.0"' "$T/nf.jsonl" \
   && ! grep -q '"step":3,.*moe_router_nonfinite' "$T/nf.jsonl"
then echo "ok   a non-finite router logit: step 2 skipped, layers.0's router named ($(grep -o "for [0-9]* tokens\?" <<<"$out"))"
else echo "FAIL a non-finite router logit (exit $rc):"; echo "$out" | grep -v "^ " | tail -4; fail=1; fi

# pipeline parallelism: pp 2 ends on one process's parameters (each stage's router losses reach the
# gradients); the reported loss holds every stage's router losses (each stage adds its own: equal to
# one process's within float rounding), bit for bit when the router losses are off
printf 'model: {preset: llama-tiny-moe}\ndata: {train: %s}\ntraining: {micro_batch_size: 2, seq_len: 16, steps: 3, warmup_steps: 1, lr: 3e-3, gradient_accumulation_steps: 2}\n' \
  "$T/d.bin" > "$T/p.yaml"
pp_case() { # LABEL ARGS...: one process against pp 2 on 2 ranks
  local label="$1"; shift
  local a b; a="$("$Z" train "$T/p.yaml" "$@" --set logging.jsonl="$T/pa.jsonl" 2>&1)" || true
  b="$("$Z" train "$T/p.yaml" --nproc 2 --set parallel.pipeline_parallel_size=2 "$@" --set logging.jsonl="$T/pb.jsonl" 2>&1)" || true
  local ha hb; ha="$(grep -o 'params xxh64 [0-9a-f]*' <<<"$a")"; hb="$(grep -o 'params xxh64 [0-9a-f]*' <<<"$b")"
  local cmp; cmp="$(/usr/bin/python3 - "$T/pa.jsonl" "$T/pb.jsonl" <<'PY'
import json, sys
def losses(f): return [json.loads(l)["loss"] for l in open(f) if '"event"' not in l and '"loss"' in l]  # the step lines
a, b = losses(sys.argv[1]), losses(sys.argv[2])
print("equal" if a == b and a else "close %.2e" % max(abs(x - y) / abs(x) for x, y in zip(a, b)) if len(a) == len(b) and a else "none")
PY
)"
  echo "$ha|$hb|$cmp"
}
r="$(pp_case on)"; IFS='|' read -r ha hb cmp <<<"$r"
r0="$(pp_case off --set model.router_aux_loss_coef=0 --set model.router_z_loss_coef=0)"; IFS='|' read -r ha0 hb0 cmp0 <<<"$r0"
if [ -n "$ha" ] && [ "$ha" = "$hb" ] && [[ "$cmp" =~ ^close\ ([0-9.e+-]+)$ ]] && /usr/bin/python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) < 1e-6 else 1)" "${BASH_REMATCH[1]}" \
   && [ -n "$ha0" ] && [ "$ha0" = "$hb0" ] && [ "$cmp0" = equal ]; then
  echo "ok   pp 2 = one process: parameters bit for bit ($ha); losses with the router losses $cmp, without them equal"
else echo "FAIL pp 2 against one process: '$ha' vs '$hb' ($cmp); router losses off: '$ha0' vs '$hb0' ($cmp0)"; fail=1; fi

# ---- 4. Hugging Face Mixtral ---------------------------------------------------------------------
printf 'model: {preset: llama-tiny-moe, router_z_loss_coef: 0}\ndata: {train: %s}\ntraining: {micro_batch_size: 2, seq_len: 16, steps: 3, warmup_steps: 1, lr: 3e-3}\n' \
  "$T/d.bin" > "$T/h.yaml" # z-loss 0: Mixtral's config.json has no z-loss
"$Z" train "$T/h.yaml" --ckpt-dir "$T/ck" >/dev/null
"$Z" export "$T/ck" --hf "$T/hf" --shard-size 2MB >/dev/null
bad "export --gguf of a mixture" "export --gguf $T/x.gguf: model llama is a mixture of experts (4 experts): not built" \
  export "$T/ck" --gguf "$T/x.gguf"
"$Z" train "$T/h.yaml" --set model.norm_topk_prob=false --set training.steps=1 --ckpt-dir "$T/ckn" >/dev/null
bad "export --hf without norm_topk_prob" "model llama with experts and norm_topk_prob false: Mixtral's layout renormalizes" \
  export "$T/ckn" --hf "$T/hfn"
zt="$("$BUILD/tests/tool_score" "$T/ck" "$T/v.bin" 4 16)"
# section 5's Qwen2-MoE directories, made and trained here for the one PyTorch process: a directory
# written by the test's own code (no transformers) trains through model.init_hf with plain SGD loss
# for loss as PyTorch trains it; the trained checkpoint's export (model_type qwen2_moe, sharded)
# scores in PyTorch as zerotrain scores the checkpoint; the directory exported again holds the same
# tensors and, read and written once more, the same bytes; then the same for a dense Qwen2 directory
# (model_type qwen2: q/k/v biases, tied), its export unsharded
/usr/bin/python3 "$SRC/tests/qwen_moe_hf.py" make "$T/qw" "$T/q.bin" 16 >/dev/null
/usr/bin/python3 "$SRC/tests/qwen_moe_hf.py" make "$T/q2" "$T/q2.bin" 16 --dense >/dev/null
printf 'model: {preset: llama-tiny-moe}\ndata: {train: %s}\ntraining: {micro_batch_size: 2, seq_len: 16, steps: 4, lr: 0.05, warmup_steps: 0, decay: constant, grad_clip: 0}\noptimizer: {type: sgd, momentum: 0, weight_decay: 0}\n' \
  "$T/q.bin" > "$T/q.yaml"
"$Z" train "$T/q.yaml" --set model.init_hf="$T/qw" --set logging.jsonl="$T/q.jsonl" --ckpt-dir "$T/qck" >/dev/null
"$Z" export "$T/qck" --hf "$T/qw2" --shard-size 100KB >/dev/null
"$Z" export "$T/qw" --hf "$T/qw3" >/dev/null && "$Z" export "$T/qw3" --hf "$T/qw4" >/dev/null
zq="$("$BUILD/tests/tool_score" "$T/qck" "$T/q.bin" 2 16)"
"$Z" train "$T/q.yaml" --set model.preset=llama-tiny --set data.train="$T/q2.bin" --set model.init_hf="$T/q2" \
  --set logging.jsonl="$T/q2.jsonl" --ckpt-dir "$T/q2ck" >/dev/null
"$Z" export "$T/q2ck" --hf "$T/q2e" >/dev/null
"$Z" export "$T/q2" --hf "$T/q23" >/dev/null && "$Z" export "$T/q23" --hf "$T/q24" >/dev/null
zq2="$("$BUILD/tests/tool_score" "$T/q2ck" "$T/q2.bin" 2 16)"
if out="$(/usr/bin/python3 "$SRC/tests/moe_hf.py" "$T/hf" "$T/v.bin" 4 16 "$zt" "$T/moe0.bin" "$T/moe1.bin" \
             "$T/qwen.bin" "$T/deepseek.bin" --qwen "$T/qw" "$T/q.bin" 2 16 0.05 "$T/q.jsonl" "$T/qw2" "$zq" "$T/qw3" \
             --qwen "$T/q2" "$T/q2.bin" 2 16 0.05 "$T/q2.jsonl" "$T/q2e" "$zq2" "$T/q23" 2>&1)"
then echo "ok   PyTorch: the Mixtral directory, the oracle dropless, with capacity factor 1, and with shared experts (Qwen2-MoE's gated with q/k/v biases, DeepSeek-MoE's), the Qwen2-MoE and Qwen2 directories:"
  grep -E "^Mixtral|^loss|tensors:" <<<"$out"; pyout="$out"
else echo "FAIL PyTorch (Mixtral directory, oracle, Qwen2-MoE directories):"; echo "$out"; fail=1; fi
"$Z" export "$T/hf" --hf "$T/one" >/dev/null && "$Z" export "$T/one" --hf "$T/two" >/dev/null
if cmp -s "$T/one/model.safetensors" "$T/two/model.safetensors" && grep -q '"model_type":.*"mixtral"' "$T/two/config.json"
then echo "ok   Mixtral directory read back and written again: byte-identical"
else echo "FAIL Mixtral directory round trip differs"; fail=1; fi
if out="$("$Z" train "$T/h.yaml" --set model.init_hf="$T/hf" --set training.steps=1 2>&1)" &&
   grep -q "model llama" <<<"$out"; then echo "ok   model.init_hf from the Mixtral directory trains"
else echo "FAIL model.init_hf from the Mixtral directory:"; echo "$out" | tail -3; fail=1; fi

# ---- 5. Hugging Face Qwen2-MoE (a gated shared expert; qwen_moe_hf.py) ------------------------------
# (its PyTorch checks ran with section 4's, in moe_hf.py's process)
grep -E "^ok   (trained from|zerotrain's Qwen2|the PyTorch-made)" <<<"${pyout:-}" || true
for d in "qw3 qw4 qwen2_moe Qwen2-MoE" "q23 q24 qwen2 Qwen2"; do
  set -- $d
  if cmp -s "$T/$1/model.safetensors" "$T/$2/model.safetensors" && cmp -s "$T/$1/config.json" "$T/$2/config.json" \
     && grep -q "\"model_type\":.*\"$3\"" "$T/$2/config.json"
  then echo "ok   $4 directory read back and written again: byte-identical"
  else echo "FAIL $4 directory round trip differs"; fail=1; fi
done
# what the qwen2_moe row does not build, refused by name (config.json alone: read before any tensor)
qbad() { # LABEL "expected text" PYTHON-EDIT-OF-c [DIR: qw, or q2 (Qwen2)]
  local d="$T/qbad"; rm -rf "$d"; mkdir -p "$d"
  /usr/bin/python3 -c "import json,sys; c=json.load(open(sys.argv[1])); $3; json.dump(c, open(sys.argv[2], 'w'))" \
    "$T/${4:-qw}/config.json" "$d/config.json"
  bad "$1" "$2" train "$T/q.yaml" --set model.init_hf="$d"
}
qbad "Qwen2-MoE: an unknown config.json field" "field router_jitter: not a Qwen2-MoE field zerotrain knows" \
  "c['router_jitter'] = 0.1"
qbad "Qwen2-MoE: qkv_bias not a boolean" "field qkv_bias must be a boolean" "c['qkv_bias'] = 1"
qbad "Qwen2: a Qwen2-MoE field" "field num_experts: not a Qwen2 field zerotrain knows" "c['num_experts'] = 4" q2
qbad "Qwen2: a sliding-window layer" "field layer_types lists sliding_attention" \
  "c['layer_types'][1] = 'sliding_attention'" q2
qbad "Qwen2: a shape field missing" "field num_key_value_heads is missing" "del c['num_key_value_heads']" q2
qbad "Llama: attention_bias (o_proj's too)" "field attention_bias must be false" \
  "c['model_type'] = 'llama'; c['attention_bias'] = True" q2
bad "q/k/v biases on GPT-2" "model.attention_qkv_bias: applies to model.arch llama; this model is gpt2" \
  train "$T/q.yaml" --set model.preset=tiny --set model.attention_qkv_bias=true
bad "model.attention_qkv_bias not a bool" "model.attention_qkv_bias: expected true or false" \
  train "$T/q.yaml" --set model.attention_qkv_bias=2
qbad "Qwen2-MoE: dense layers between sparse ones" "field decoder_sparse_step 2" "c['decoder_sparse_step'] = 2"
qbad "Qwen2-MoE: mlp_only_layers" "field mlp_only_layers lists 1 layers" "c['mlp_only_layers'] = [1]"
qbad "Qwen2-MoE: no shared expert" "field shared_expert_intermediate_size must be an integer in [1," \
  "c['shared_expert_intermediate_size'] = 0"
# DeepSeek-MoE's ungated shared expert trains, but no row writes its directory
"$Z" train "$T/m.yaml" --set model.n_shared_experts=1 --ckpt-dir "$T/dsck" >/dev/null
bad "export --hf of an ungated shared expert" "no shared_expert_gate: no Hugging Face architecture row exports it" \
  export "$T/dsck" --hf "$T/dshf"
exit $fail
