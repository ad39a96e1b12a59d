#!/usr/bin/env bash
# activation_checkpointing.sh BUILD SOURCE - activation checkpointing under mpirun (the single-
# process block and engine checks, and the exact activation bytes, are in test_checkpointing.c):
#  1. tool_dist_check, 5 steps of a small GPT-2: ddp and zero3 on 1 and 2 ranks give the same
#     losses and final parameter hash with memory.activation_checkpointing none, full and
#     selective (the tool also checks every step's collective bytes: recomputation adds no
#     traffic); zero3 with keep_params_after_forward, without prefetch, and with 2 micro-batches
#     too; the activation bytes order none > selective > full;
#  2. through the CLI on 2 ranks (zero3): the key from the native config (--set), from DeepSpeed's
#     activation_checkpointing block in an included JSON, and no "not implemented" warning; the
#     same losses and parameters, and the JSONL's activation bytes drop; the same under
#     precision.mode bf16 (the recomputation reads the same bf16 compute copies).
# Each rank runs one OpenMP thread, so the kernels see the same thread count everywhere.
set -euo pipefail
BUILD="$1"
TOOL="$BUILD/tests/tool_dist_check"
Z="$BUILD/zerotrain"
export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ZT_COMM_TIMEOUT=120
STEPS=5
fail=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fail=1; }
# the runs on N ranks go to one MPI job per N (tests/tool_serve.bash); one that job cannot take
# runs alone
source "$(dirname "${BASH_SOURCE[0]}")/tool_serve.bash"
for n in 1 2; do serve_start "n$n" mpirun -np "$n" --oversubscribe --bind-to none -x OMP_NUM_THREADS -x ZT_COMM_TIMEOUT "$TOOL"; done
run() { # N args...
  local n="$1" rc=0; shift
  serve_run "n$n" "$@" || rc=$?
  [ $rc = 99 ] || return $rc
  mpirun -np "$n" --oversubscribe --bind-to none -x OMP_NUM_THREADS -x ZT_COMM_TIMEOUT "$TOOL" "$@" 2>&1
}
field() { grep "^$1 " <<<"$2" | cut -d' ' -f2- || true; }
declare -A ref act
check() { # label key output
  local label="$1" key="$2" out="$3"
  local h; h="$(field hash "$out")"
  if [ -z "$h" ]; then bad "$label: no result"; echo "$out" | tail -5; return; fi
  if [ -z "${ref[$key]:-}" ]; then ref[$key]="$h $(field losses "$out")"; fi
  if [ "$h $(field losses "$out")" != "${ref[$key]}" ]; then
    bad "$label: hash $h, expected ${ref[$key]%% *} (or the losses differ)"
  else
    ok "$label: $h"
  fi
}

# 1. every mode against none, per world size and strategy
for n in 1 2; do
  for s in ddp zero3; do
    for mode in none full selective; do
      out="$(run $n $s 1 $STEPS --recompute $mode)"
      check "N=$n $s $mode" "n$n" "$out"
      act[$mode]="$(field activations "$out")"
    done
  done
done
check "N=2 zero3 full, keep_params_after_forward" n2 "$(run 2 zero3 1 $STEPS --recompute full --keep)"
check "N=2 zero3 selective, keep_params_after_forward" n2 "$(run 2 zero3 1 $STEPS --recompute selective --keep)"
check "N=2 zero3 full, no prefetch" n2 "$(run 2 zero3 1 $STEPS --recompute full --no-prefetch)"
for mode in none full selective; do
  check "N=2 zero3 GA=2 $mode" ga2 "$(run 2 zero3 2 $STEPS --recompute $mode)"
done
if [ -n "${act[none]}" ] && [ "${act[none]}" -gt "${act[selective]}" ] && [ "${act[selective]}" -gt "${act[full]}" ]; then
  ok "activation bytes per rank: none ${act[none]} > selective ${act[selective]} > full ${act[full]}"
else
  bad "activation bytes: none '${act[none]}' selective '${act[selective]}' full '${act[full]}'"
fi

# 2. the CLI: native key, DeepSpeed block
T="$(mktemp -d)"; trap 'declare -F serve_stop >/dev/null && serve_stop; rm -rf "$T"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/tiny_vocab.bash"
"$Z" tokenize /usr/share/common-licenses/GPL-3 -o "$T/train.bin" >/dev/null
fold_tokens "$T/train.bin"
base="data: {train: $T/train.bin}
training: {micro_batch_size: 2, seq_len: 16, steps: 4, warmup_steps: 1, lr: 3e-3}
logging: {print_every: 100}"
printf '%s\nmodel: {preset: tiny, n_layer: 2, n_embd: 32, n_head: 2, max_seq_len: 32, vocab_size: '"$TINY_VOCAB"'}\n' "$base" > "$T/native.yaml"
echo '{"zero_optimization": {"stage": 3}}' > "$T/ds_none.json"
echo '{"zero_optimization": {"stage": 3}, "activation_checkpointing": {"partition_activations": false}}' > "$T/ds_ac.json"
for v in none ac; do
  printf '%s\nmodel: {preset: tiny, n_layer: 2, n_embd: 32, n_head: 2, max_seq_len: 32, vocab_size: '"$TINY_VOCAB"'}\ndeepspeed_config: ds_%s.json\n' \
    "$base" "$v" > "$T/ds_$v.yaml"
done
hash_of() { grep -o 'params xxh64 [0-9a-f]*' "$1" | cut -d' ' -f3; }
# the step lines of a JSONL log (others, such as the precision event, have no "step")
losses() { /usr/bin/python3 -c "import json,sys; r=[json.loads(l) for l in open(sys.argv[1])]; print(' '.join(x['loss_hex'] for x in r if 'step' in x))" "$1"; }
acts() { /usr/bin/python3 -c "import json,sys; r=[json.loads(l) for l in open(sys.argv[1])]; print([x for x in r if 'step' in x][0]['memory']['activations'])" "$1"; }
train() { # name config args...
  local name="$1" cfg="$2"; shift 2
  "$Z" train "$cfg" --nproc 2 --set logging.jsonl="$T/$name.jsonl" "$@" > "$T/$name.out" 2>&1 || { bad "train $name"; tail -5 "$T/$name.out"; }
}
train none "$T/native.yaml" --set parallel.strategy=zero3
train full "$T/native.yaml" --set parallel.strategy=zero3 --set memory.activation_checkpointing=full
train selective "$T/native.yaml" --set parallel.strategy=zero3 --set memory.activation_checkpointing=selective
train ds_none "$T/ds_none.yaml"
train ds_ac "$T/ds_ac.yaml"
train bf16_none "$T/native.yaml" --set parallel.strategy=zero3 --set precision.mode=bf16
train bf16_selective "$T/native.yaml" --set parallel.strategy=zero3 --set precision.mode=bf16 --set memory.activation_checkpointing=selective
train bf16_full "$T/native.yaml" --set parallel.strategy=zero3 --set precision.mode=bf16 --set memory.activation_checkpointing=full
for r in full selective; do
  if [ -n "$(hash_of "$T/none.out")" ] && [ "$(hash_of "$T/$r.out")" = "$(hash_of "$T/none.out")" ] &&
     [ "$(losses "$T/$r.jsonl")" = "$(losses "$T/none.jsonl")" ] && [ "$(acts "$T/$r.jsonl")" -lt "$(acts "$T/none.jsonl")" ]; then
    ok "zerotrain train --set memory.activation_checkpointing=$r: same losses and parameters, activations $(acts "$T/$r.jsonl") < $(acts "$T/none.jsonl") bytes"
  else
    bad "zerotrain train $r: hash $(hash_of "$T/$r.out") vs $(hash_of "$T/none.out")"
  fi
done
if [ -n "$(hash_of "$T/ds_none.out")" ] && [ "$(hash_of "$T/ds_ac.out")" = "$(hash_of "$T/ds_none.out")" ] &&
   [ "$(acts "$T/ds_ac.jsonl")" = "$(acts "$T/full.jsonl")" ] && [ "$(acts "$T/ds_none.jsonl")" = "$(acts "$T/none.jsonl")" ]; then
  ok "DeepSpeed activation_checkpointing block: full (activations $(acts "$T/ds_ac.jsonl") bytes), same parameters"
else
  bad "DeepSpeed block: hash $(hash_of "$T/ds_ac.out") vs $(hash_of "$T/ds_none.out"), activations $(acts "$T/ds_ac.jsonl") vs full $(acts "$T/full.jsonl")"
fi
h="$(hash_of "$T/bf16_none.out")"
if [ -n "$h" ] && [ "$(hash_of "$T/bf16_full.out")" = "$h" ] && [ "$(hash_of "$T/bf16_selective.out")" = "$h" ] &&
   [ "$(losses "$T/bf16_full.jsonl")" = "$(losses "$T/bf16_none.jsonl")" ] && [ "$h" != "$(hash_of "$T/none.out")" ]; then
  ok "precision.mode bf16 (bf16 compute copies): none, full and selective give the same parameters ($h)"
else
  bad "bf16: none $h, full $(hash_of "$T/bf16_full.out"), selective $(hash_of "$T/bf16_selective.out")"
fi
if grep -q "activation_checkpointing.*not implemented" "$T"/*.out; then bad "a 'not implemented' warning is printed"; else ok "no 'not implemented' warning"; fi
exit $fail
