#!/usr/bin/env bash
# lora.sh BUILD SOURCE - LoRA (lora.*, zt_model_add_lora; docs/models.md), under mpirun:
#  1. tool_dist_check --arch llama --lora 4 --lora-dropout 0.1 (all-linear, alpha 8): on 2 ranks
#     ddp, zero1, zero2, zero3 and on 4 (oversubscribed) ddp, zero3, hybrid (zero3 in groups of 2)
#     give bit-identical losses and parameters per world size (the dropout masks included), the
#     base weights' hash after 10 steps equals their hash at initialization, every step's bytes
#     match the formulas (gradients of the adapters only), and each zero3 rank's model states at
#     rest, from the engine's counters, equal its memory plan and hold 4 bytes per base-weight and
#     adapter element of its pieces plus gradients for its adapter elements only (printed per
#     rank); bf16 (ddp = zero3 on 2) and GPT-2 with PEFT's default target (c_attn) likewise;
#  2. tool_memory_check --lora 4 --lora-dropout 0.1 (GPT-2): planned = measured per class, to the
#     byte, zero3 fp32 (and the closed form 4 x owned + 12 x owned adapter elements), zero1, zero3
#     bf16;
#  3. `zerotrain train` of llama-tiny on the GPL, exported to a Hugging Face directory, then LoRA
#     from it (model.init_hf) on 2 ranks zero3 with dropout: it says what trains, the frozen
#     weights' hash is unchanged, a run resumed from its step-10 checkpoint ends on the same
#     parameter hash; `export --peft` and `export --hf` (merged) checked in PyTorch against
#     zerotrain's loss (tests/lora_peft.py), for GPT-2 too (a regex target_modules); read back
#     (--init-peft): `export BASE --init-peft AD --peft` rewrites AD's adapters bit for bit and
#     `--hf` the same merged directory as the checkpoint's; a run from step 10's adapters on the
#     base, skipping step 1-10's samples, has the losses of the run going on from step 11
#     (dropout 0, one process: the first step's loss equal to the digit, the rest then follow
#     their own fresh optimizer); bad adapter directories exit 4 naming the file and field or
#     tensor, adapters other than the configuration asks for exit 2;
#  4. estimate-memory --lora-rank: llama-7b x8 zero3 model states shrink to the base pieces + the
#     adapters' states; PEFT's count of trainable parameters;
#  5. bad input exits 2 naming the key: a target matching nothing, rank 0 with targets, a negative
#     alpha, dropout 1, a non-Linear target.
set -euo pipefail
BUILD="$1"; SRC="$2"
TOOL="$BUILD/tests/tool_dist_check"; MEM="$BUILD/tests/tool_memory_check"; Z="$BUILD/zerotrain"
export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ZT_COMM_TIMEOUT=120
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
# hash_of, losses_of, fail, check LABEL KEY OUTPUT
source "$SRC/tests/dist_check.bash"
mpi() { local n="$1"; shift; mpirun -np "$n" --oversubscribe --bind-to none -x OMP_NUM_THREADS -x ZT_COMM_TIMEOUT "$@" 2>&1; }
# the tools' runs on N ranks go to one MPI job per tool and N (tests/tool_serve.bash); one that job
# cannot take runs alone (mpi)
source "$SRC/tests/tool_serve.bash"
trap 'serve_stop; rm -rf "$T"' EXIT
serve_start d2 mpirun -np 2 --oversubscribe --bind-to none -x OMP_NUM_THREADS -x ZT_COMM_TIMEOUT "$TOOL"
serve_start d4 mpirun -np 4 --oversubscribe --bind-to none -x OMP_NUM_THREADS -x ZT_COMM_TIMEOUT "$TOOL"
serve_start m2 mpirun -np 2 --oversubscribe --bind-to none -x OMP_NUM_THREADS -x ZT_COMM_TIMEOUT "$MEM"
served() { # SERVER N TOOL args...: the run on the server, or alone
  local name="$1" n="$2" tool="$3" rc=0; shift 3
  serve_run "$name" "$@" || rc=$?
  [ $rc = 99 ] || return $rc
  mpi "$n" "$tool" "$@"
}
kept() { # label output: "frozen H0 -> H1" with H0 = H1
  local line; line="$(grep '^frozen' <<<"$2" || true)"
  if [ -n "$line" ] && [ "$(cut -d' ' -f2 <<<"$line")" = "$(cut -d' ' -f4 <<<"$line")" ]; then :
  else echo "FAIL $1: base weights changed or not checked: '$line'"; fail=1; fi
}
dist() { # label key n args...
  local label="$1" key="$2" n="$3" rc=0 out; shift 3
  out="$(served "d$n" "$n" "$TOOL" "$@")" || rc=$?
  check "$label" "$key" "$out"
  kept "$label" "$out"
  if [ $rc -ne 0 ]; then echo "FAIL $label: rc $rc: $(grep -E '^rank [0-9]+:|bytes sent' <<<"$out" | head -3)"; fail=1; fi
  grep '^zero3 rank [0-9]* at rest: base' <<<"$out" | sed 's/^/     /' || true
}

L=(--arch llama --lora 4 --lora-dropout 0.1)
for s in ddp zero1 zero2 zero3; do dist "llama LoRA fp32 N=2 $s" fp32-2 2 $s 1 10 "${L[@]}"; done
for s in ddp zero3; do dist "llama LoRA fp32 N=4 $s" fp32-4 4 $s 1 10 "${L[@]}"; done
dist "llama LoRA fp32 N=4 hybrid (zero3 in groups of 2)" fp32-4 4 hybrid 1 10 --hybrid 2 "${L[@]}"
for s in ddp zero3; do dist "llama LoRA bf16 N=2 $s" bf16-2 2 $s 1 10 --precision bf16 "${L[@]}"; done
for s in ddp zero3; do dist "gpt2 LoRA (c_attn) N=2 $s" gpt2-2 2 $s 1 10 --lora 2 --lora-targets ''; done
if [ "${ref_hash[fp32-2]:-}" = "${ref_hash[bf16-2]:-x}" ]; then echo "FAIL bf16 gave fp32's hash"; fail=1; fi

mem() { # label N args...
  local label="$1" n="$2" out rc=0; shift 2
  out="$(served "m$n" "$n" "$MEM" "$@" --lora 4 --lora-dropout 0.1)" || rc=$?
  local exact; exact="$(grep -o '^\([0-9]*\) of \1 (class, rank) high-waters exact' <<<"$out" || true)"
  if [ $rc -ne 0 ] || [ -z "$exact" ]; then echo "FAIL memory $label (rc $rc)"; echo "$out" | tail -6; fail=1
  else echo "ok   memory $label LoRA: $exact$(grep -m1 -o 'zero3 LoRA model states.*' <<<"$out" | sed 's/^/; /' || true)"; fi
}
mem "N=2 zero3" 2 zero3 1 2
mem "N=2 zero1" 2 zero1 1 2
mem "N=2 zero3 bf16" 2 zero3 1 2 --precision bf16

# 3. the CLI: pretrain, LoRA from the export, resume, PEFT export checked in PyTorch
source "$(dirname "${BASH_SOURCE[0]}")/tiny_vocab.bash"
"$Z" tokenize /usr/share/common-licenses/GPL-3 -o "$T/gpl.bin" >/dev/null
fold_tokens "$T/gpl.bin"
cat > "$T/base.yaml" <<YEOF
model: {preset: llama-tiny, vocab_size: $TINY_VOCAB}
data: {train: $T/gpl.bin}
training: {micro_batch_size: 4, seq_len: 32, steps: 20, lr: 3e-3}
YEOF
"$Z" train "$T/base.yaml" --save "$T/base.ztw" >/dev/null
"$Z" export "$T/base.ztw" --hf "$T/base" >/dev/null
cat > "$T/lora.yaml" <<YEOF
model: {preset: llama-tiny, init_hf: $T/base}
data: {train: $T/gpl.bin}
training: {micro_batch_size: 4, seq_len: 32, steps: 20, lr: 1e-2}
lora: {rank: 4, alpha: 8, dropout: 0.1, target_modules: [q_proj, v_proj, down_proj]}
parallel: {strategy: zero3}
YEOF
hash_line() { grep -o 'params xxh64 [0-9a-f]*' <<<"$1" || true; }
if out="$("$Z" train "$T/lora.yaml" --nproc 2 --ckpt-dir "$T/ck" --ckpt-every 10 2>&1)"; then
  if grep -q "^lora: rank 4, alpha 8, dropout 0.1 on 6 Linears" <<<"$out" && grep -q "(unchanged)$" <<<"$out"; then
    echo "ok   train: $(grep '^lora:' <<<"$out")"; echo "     $(grep '^frozen parameters' <<<"$out")"
  else echo "FAIL train does not report LoRA or the frozen weights changed"; grep -E '^lora|^frozen' <<<"$out"; fail=1; fi
  want="$(hash_line "$out")"
  o2="$("$Z" train "$T/lora.yaml" --nproc 2 --resume "$T/ck/step-00000010" 2>&1)" || true
  if [ -n "$want" ] && [ "$(hash_line "$o2")" = "$want" ]; then echo "ok   resumed from step 10 with dropout: $want"
  else echo "FAIL resume: '$(hash_line "$o2")' vs '$want'"; echo "$o2" | tail -3; fail=1; fi
else
  echo "FAIL train with lora"; echo "$out" | tail -5; fail=1
fi
peft() { # label CKPT BASE_DIR
  local label="$1" ck="$2" base="$3" zl
  "$Z" export "$ck" --peft "$T/$label-ad" --base-model "$base" >/dev/null && "$Z" export "$ck" --hf "$T/$label-mg" >/dev/null &&
    zl="$("$BUILD/tests/tool_score" "$ck" "$T/gpl.bin" 4 32)" &&
    /usr/bin/python3 "$SRC/tests/lora_peft.py" "$base" "$T/$label-ad" "$T/$label-mg" "$T/gpl.bin" 4 32 "$zl" |
    sed "s/^/     $label: /" && echo "ok   $label: PEFT adapters and the merged directory give zerotrain's loss" ||
    { echo "FAIL $label: PEFT export"; fail=1; }
}
peft llama "$T/ck" "$T/base"
cat > "$T/g.yaml" <<YEOF
model: {preset: tiny, vocab_size: $TINY_VOCAB}
data: {train: $T/gpl.bin}
training: {micro_batch_size: 4, seq_len: 32, steps: 5, lr: 3e-3}
YEOF
"$Z" train "$T/g.yaml" --save "$T/g.ztw" >/dev/null && "$Z" export "$T/g.ztw" --hf "$T/gbase" >/dev/null
"$Z" train "$T/g.yaml" --set model.init_hf="$T/gbase" --set lora.rank=2 --set lora.alpha=4 \
  --set lora.target_modules=c_attn,mlp.c_proj --ckpt-dir "$T/gck" --ckpt-every 5 >/dev/null
peft gpt2 "$T/gck" "$T/gbase"

# PEFT's directories read back: the export round trip, then the losses going on
same() { # label file1 file2
  if cmp -s "$2" "$3"; then echo "ok   $1"; else echo "FAIL $1: $2 and $3 differ"; fail=1; fi
}
for l in llama:base gpt2:gbase; do
  "$Z" export "$T/${l#*:}" --init-peft "$T/${l%%:*}-ad" --peft "$T/${l%%:*}-ad2" >/dev/null &&
    "$Z" export "$T/${l#*:}" --init-peft "$T/${l%%:*}-ad" --hf "$T/${l%%:*}-mg2" >/dev/null || { echo "FAIL ${l%%:*}: export --init-peft"; fail=1; }
  same "${l%%:*}: export --init-peft --peft gives the adapters bit for bit" "$T/${l%%:*}-ad/adapter_model.safetensors" "$T/${l%%:*}-ad2/adapter_model.safetensors"
  same "${l%%:*}: export BASE --init-peft --hf = export CKPT --hf (merged)" "$T/${l%%:*}-mg/model.safetensors" "$T/${l%%:*}-mg2/model.safetensors"
done
ONE=(--set parallel.strategy=ddp --set lora.dropout=0 --set training.steps=13)
"$Z" train "$T/lora.yaml" "${ONE[@]}" --ckpt-dir "$T/ck1" --ckpt-every 10 --set logging.jsonl="$T/one.jsonl" >/dev/null &&
  "$Z" export "$T/ck1/step-00000010" --peft "$T/ad10" >/dev/null &&
  out="$("$Z" train "$T/lora.yaml" "${ONE[@]}" --init-peft "$T/ad10" --set data.skip_samples=0:40 --set training.steps=3 \
         --set logging.jsonl="$T/peft.jsonl" 2>&1)" || { echo "FAIL train --init-peft: $(tail -3 <<<"$out")"; fail=1; }
first() { /usr/bin/python3 -c 'import json,sys; r=[json.loads(l) for l in open(sys.argv[1]) if "\"loss\"" in l]; print(repr([x["loss"] for x in r if x.get("step")==int(sys.argv[2])][0]))' "$@"; }
a="$(first "$T/one.jsonl" 11 2>&1)"; b="$(first "$T/peft.jsonl" 1 2>&1)"
if [ "$a" = "$b" ] && grep -q "^lora: rank 4, alpha 8, dropout 0 on 6 Linears" <<<"$out"; then
  echo "ok   --init-peft on the base, step 1-10's samples skipped: step 1's loss $b = the run's step 11 loss"
else echo "FAIL --init-peft: loss '$b' vs step 11's '$a'"; grep -E '^lora|error' <<<"$out"; fail=1; fi

# 4. estimate-memory: llama-7b on 8 ranks, LoRA r=16 on every block Linear
EST=(estimate-memory --model llama-7b --nproc 8 -B 1 -T 2048 --json)
if /usr/bin/python3 - "$("$Z" "${EST[@]}")" "$("$Z" "${EST[@]}" --lora-rank 16 --lora-targets all-linear)" <<'PYEOF'; then :; else fail=1; fi
import json, sys
u, l = json.loads(sys.argv[1]), json.loads(sys.argv[2])
ok = l["trainable_parameters"] == 39976960 and l["parameters"] == 6778392576  # PEFT's print_trainable_parameters
print(("ok   " if ok else "FAIL ") + f"estimate llama-7b LoRA r=16 all-linear: {l['trainable_parameters']} of "
      f"{l['parameters']} parameters trainable ({100 * l['trainable_parameters'] / l['parameters']:.4f}%)")
for s in ("ddp", "zero3"):
    pu, pl = u["strategies"][s]["rest"], l["strategies"][s]["rest"]
    good = pl["optimizer"] < 0.01 * pu["optimizer"] and pl["params"] > pu["params"]
    ok &= good
    print(("ok   " if good else "FAIL ") + f"estimate llama-7b x8 {s}: model states at rest "
          f"{u['strategies'][s]['model_states'] / 2**30:.2f} -> {l['strategies'][s]['model_states'] / 2**30:.2f} GiB "
          f"(optimizer {pu['optimizer'] / 2**30:.2f} -> {pl['optimizer'] / 2**30:.3f} GiB)")
sys.exit(0 if ok else 1)
PYEOF

# 5. bad input: exit 2 naming the key
bad() { # label expect args...
  local label="$1" want="$2" rc=0 out; shift 2
  out="$("$@" 2>&1)" || rc=$?
  if [ $rc -eq 2 ] && grep -q -- "$want" <<<"$out"; then echo "ok   $label exits 2: $(grep -m1 -- "$want" <<<"$out" | cut -c1-150)"
  else echo "FAIL $label: exit $rc: $(head -3 <<<"$out")"; fail=1; fi
}
bad "a target matching nothing" "lora.target_modules 'qproj' matches no module" "$Z" train "$T/lora.yaml" --set lora.target_modules=q_proj,qproj
bad "a regex matching nothing" "lora.target_modules" "$Z" train "$T/lora.yaml" --set 'lora.target_modules=.*attn\.q'
bad "the LM head" "lora.target_modules 'lm_head' selects lm_head" "$Z" train "$T/lora.yaml" --set lora.target_modules=lm_head
bad "rank 0 with targets" "lora.rank: 0" "$Z" train "$T/lora.yaml" --set lora.rank=0
bad "a negative alpha" "lora.alpha" "$Z" train "$T/lora.yaml" --set lora.alpha=-1
bad "dropout 1" "lora.dropout" "$Z" train "$T/lora.yaml" --set lora.dropout=1
bad "estimate-memory, a target matching nothing" "lora.target_modules 'x_proj'" "$Z" estimate-memory --model llama-7b --lora-rank 8 --lora-targets x_proj
bad "export --peft of a model without adapters" "no LoRA adapters" "$Z" export "$T/base.ztw" --peft "$T/none"
bad "--init-peft with another rank" "lora.rank asks for other adapters than" "$Z" train "$T/lora.yaml" --init-peft "$T/ad10" --set lora.rank=8
bad "--init-peft with other targets" "lora.target_modules asks for other adapters" "$Z" train "$T/lora.yaml" --init-peft "$T/ad10" --set lora.target_modules=all-linear
bad4() { # label expect args...
  local label="$1" want="$2" rc=0 out; shift 2
  out="$("$@" 2>&1)" || rc=$?
  if [ $rc -eq 4 ] && grep -q -- "$want" <<<"$out"; then echo "ok   $label exits 4: $(grep -m1 -- "$want" <<<"$out" | cut -c1-150)"
  else echo "FAIL $label: exit $rc: $(head -3 <<<"$out")"; fail=1; fi
}
mkdir -p "$T/dora" "$T/ia3" "$T/cut"
sed 's/"use_dora":.*false/"use_dora": true/' "$T/ad10/adapter_config.json" > "$T/dora/adapter_config.json"
sed 's/"peft_type":.*"LORA"/"peft_type": "IA3"/' "$T/ad10/adapter_config.json" > "$T/ia3/adapter_config.json"
cp "$T/ad10/adapter_config.json" "$T/cut/"; head -c 3000 "$T/ad10/adapter_model.safetensors" > "$T/cut/adapter_model.safetensors"
bad4 "a DoRA adapter" "dora/adapter_config.json: use_dora is set (DoRA" "$Z" train "$T/lora.yaml" --init-peft "$T/dora"
bad4 "an IA3 adapter" 'peft_type "IA3": zerotrain reads LORA adapters only' "$Z" train "$T/lora.yaml" --init-peft "$T/ia3"
bad4 "a cut adapter file" "cut/adapter_model.safetensors" "$Z" train "$T/lora.yaml" --init-peft "$T/cut"
mkdir -p "$T/fewer"; cp "$T/ad10/adapter_model.safetensors" "$T/fewer/"
sed 's/"down_proj"//; s/"v_proj",/"v_proj"/' "$T/ad10/adapter_config.json" > "$T/fewer/adapter_config.json"
bad4 "adapters beyond target_modules" "tensor base_model.model.model.layers.0.mlp.down_proj.lora_A.weight is not one of this model's 8 adapter tensors" \
  "$Z" export "$T/base" --init-peft "$T/fewer" --peft "$T/none"
bad "GPT-2's adapters on the Llama base" "gpt2-ad/adapter_config.json on $T/base: lora.target_modules" \
  "$Z" export "$T/base" --init-peft "$T/gpt2-ad" --peft "$T/none"
exit $fail
