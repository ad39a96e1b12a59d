#!/usr/bin/env bash
# checkpoints.sh BUILD SOURCE - sharded checkpoints through the real CLI:
#  1. bitwise resume for every strategy (2 ranks): 6 steps straight = 3 steps, save, a new process
#     resumes, 3 steps (same losses as hex, same final parameter hash);
#  2. reshard: saved by 2 ranks zero1, loaded by 1 rank ddp and by 4 ranks zero3 (and back from
#     zero3 x4 to zero1 x2): every tensor of every kind element-for-element equal, same step and
#     data cursor; a resumed 1-rank run with the same global batch continues bit-identically; the
#     same for bf16-low (2-byte parameters and moments) across strategies, world sizes and into fp32,
#     and for zero1 bf16 (fp32 master as pieces) through zero3, ddp and zero2 and back;
#  3. a truncated, bit-flipped or missing shard or manifest is refused with exit code 4 and a
#     message naming the file; leftovers of a killed save are ignored; keep_last; verify;
#  4. the reduce dtype is not state: a checkpoint saved with gradients reduced in bf16 resumes
#     bitwise under bf16 reduction and loads into an fp32-reduce run, and vice versa (the first
#     resumed loss, computed before any reduction, is the same either way).
set -euo pipefail
BUILD="$1"; SRC="$2"
Z="$BUILD/zerotrain"
export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ZT_COMM_TIMEOUT=120
T="$(mktemp -d)"; trap 'rm -rf "$T"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/tiny_vocab.bash"
"$Z" tokenize /usr/share/common-licenses/GPL-3 -o "$T/gpl_train.bin" --val-fraction 0.1 --val-out "$T/gpl_val.bin" >/dev/null
fold_tokens "$T/gpl_train.bin" "$T/gpl_val.bin"
cat > "$T/c.yaml" <<YAML
model: {preset: tiny, n_layer: 2, n_embd: 32, n_head: 2, max_seq_len: 32, vocab_size: $TINY_VOCAB}
data: {train: $T/gpl_train.bin, val: $T/gpl_val.bin}
training: {micro_batch_size: 2, seq_len: 16, steps: 6, warmup_steps: 1, lr: 3e-3}
logging: {print_every: 100}
YAML
fail=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fail=1; }
hash_of() { grep -o 'params xxh64 [0-9a-f]*' "$1" | cut -d' ' -f3; }
losses() { /usr/bin/python3 -c "import json,sys; r=[json.loads(l) for f in sys.argv[1:] for l in open(f)]; print(' '.join(x['loss_hex'] for x in r if 'event' not in x))" "$@"; }

# 1. bitwise resume, every strategy
for s in ddp zero1 zero2 zero3 hybrid; do
  d="$T/r-$s"; mkdir -p "$d"
  "$Z" train "$T/c.yaml" --nproc 2 --set parallel.strategy=$s --set logging.jsonl=$d/a.jsonl > "$d/a.out"
  "$Z" train "$T/c.yaml" --nproc 2 --set parallel.strategy=$s --set logging.jsonl=$d/b1.jsonl --stop-after 3 --ckpt-dir "$d/ck" > "$d/b1.out"
  "$Z" train "$T/c.yaml" --nproc 2 --set parallel.strategy=$s --set logging.jsonl=$d/b2.jsonl --resume "$d/ck" > "$d/b2.out"
  if [ -n "$(losses "$d/a.jsonl")" ] && [ "$(hash_of "$d/a.out")" = "$(hash_of "$d/b2.out")" ] && [ "$(losses "$d/a.jsonl")" = "$(losses "$d/b1.jsonl" "$d/b2.jsonl")" ]; then
    ok "$s: 6 steps = 3 + save + resume 3 ($(hash_of "$d/a.out"))"
  else
    bad "$s resume: $(hash_of "$d/a.out") vs $(hash_of "$d/b2.out")"
  fi
done

# bitwise resume in the precision modes: fp16's loss scaler (mid-hysteresis at the save: the
# first 4 steps overflow at 2^20) and Adam's step count, which skipped steps leave behind, travel
# in the manifest; bf16-low's stochastic rounding draws from (seed, step, element) only
for spec in "zero3 fp16 --set precision.initial_scale_power=20" "zero2 bf16-low --set precision.stochastic_rounding=true" "ddp bf16" "zero1 bf16" \
            "zero2 bf16 --set precision.reduce_dtype=bf16"; do
  set -- $spec; s="$1" p="$2"; shift 2
  d="$T/r-$s-$p"; mkdir -p "$d"
  "$Z" train "$T/c.yaml" --nproc 2 --set parallel.strategy=$s --set precision.mode=$p "$@" --set logging.jsonl=$d/a.jsonl > "$d/a.out"
  "$Z" train "$T/c.yaml" --nproc 2 --set parallel.strategy=$s --set precision.mode=$p "$@" --set logging.jsonl=$d/b1.jsonl --stop-after 3 --ckpt-dir "$d/ck" > "$d/b1.out"
  "$Z" train "$T/c.yaml" --nproc 2 --set parallel.strategy=$s --set precision.mode=$p "$@" --set logging.jsonl=$d/b2.jsonl --resume "$d/ck" > "$d/b2.out"
  if [ -n "$(losses "$d/a.jsonl")" ] && [ "$(hash_of "$d/a.out")" = "$(hash_of "$d/b2.out")" ] && [ "$(losses "$d/a.jsonl")" = "$(losses "$d/b1.jsonl" "$d/b2.jsonl")" ]; then
    ok "$s $p: 6 steps = 3 + save + resume 3 ($(hash_of "$d/a.out"))"
  else
    bad "$s $p resume: $(hash_of "$d/a.out") vs $(hash_of "$d/b2.out")"
  fi
done
grep -q '"skipped_steps":4' "$T/r-zero3-fp16/a.jsonl" && ok "fp16: the resumed run crossed 4 skipped steps" || bad "fp16: expected 4 skipped steps"
# 4. across reduce dtypes: r-zero2-bf16 saved under reduce bf16, r-ddp-bf16 under reduce fp32
first_loss() { losses "$1" | cut -d' ' -f1; }
for pair in "r-zero2-bf16 fp32" "r-ddp-bf16 bf16"; do
  set -- $pair; d="$T/$1"
  if "$Z" train "$T/c.yaml" --nproc 2 --set parallel.strategy=zero2 --set precision.mode=bf16 --set precision.reduce_dtype=$2 \
       --set logging.jsonl=$d/x.jsonl --resume "$d/ck" > "$d/x.out" 2>&1 &&
     grep -q "reduce $2" "$d/x.out" && [ -n "$(first_loss "$d/x.jsonl")" ] && [ "$(first_loss "$d/x.jsonl")" = "$(first_loss "$d/b2.jsonl")" ]; then
    ok "$1's checkpoint resumes with precision.reduce_dtype $2: the same first loss $(first_loss "$d/x.jsonl")"
  else
    bad "$1's checkpoint under reduce $2"; tail -3 "$d/x.out"
  fi
done

# async save: the same commits as the synchronous save, bit for bit
d="$T/async"; mkdir -p "$d"
"$Z" train "$T/c.yaml" --nproc 2 --set parallel.strategy=zero3 --ckpt-dir "$d/sync" --ckpt-every 2 > "$d/s.out"
"$Z" train "$T/c.yaml" --nproc 2 --set parallel.strategy=zero3 --ckpt-dir "$d/async" --ckpt-every 2 --ckpt-async 1 > "$d/a.out"
same=1
for st in 2 4 6; do
  /usr/bin/python3 "$SRC/tests/ckpt_compare.py" "$d/sync/step-0000000$st" "$d/async/step-0000000$st" >/dev/null || same=0
done
[ $same = 1 ] && grep -q "in the background" "$d/a.out" && ok "async save: steps 2, 4, 6 committed, equal to the synchronous ones" || bad "async save"

# 2. reshard across strategies and world sizes
# (z1: the zero1 x2 commit of step 3 that section 1 made, r-zero1's `--stop-after 3 --ckpt-dir`:
# the same run, not made twice; its JSONL log is not in the checkpoint)
cp -r "$T/r-zero1/ck" "$T/z1"
"$Z" train "$T/c.yaml" --set parallel.strategy=ddp --resume "$T/z1" --stop-after 3 --ckpt-dir "$T/ddp1" >/dev/null
"$Z" train "$T/c.yaml" --nproc 4 --set parallel.strategy=zero3 --resume "$T/z1" --stop-after 3 --ckpt-dir "$T/z3x4" >/dev/null
"$Z" train "$T/c.yaml" --nproc 2 --set parallel.strategy=zero1 --resume "$T/z3x4" --stop-after 3 --ckpt-dir "$T/back" >/dev/null
for pair in "z1 ddp1" "z1 z3x4" "z3x4 back"; do
  set -- $pair
  if /usr/bin/python3 "$SRC/tests/ckpt_compare.py" "$T/$1/step-00000003" "$T/$2/step-00000003"; then ok "reshard $1 -> $2"; else bad "reshard $1 -> $2"; fi
done
# same global batch (2 ranks x 1 micro-batch = 1 rank x 2): the resumed run continues bit-identically
cp "$T/r-zero1/a.out" "$T/straight.out" # zero1 x2, 6 steps straight: section 1 made that run
"$Z" train "$T/c.yaml" --set training.gradient_accumulation_steps=2 --resume "$T/z1" > "$T/cont.out"
grep -q "next global sample 12 " "$T/cont.out" && ok "data cursor: next global sample 12 after 3 steps of 4 samples" || bad "data cursor"
[ "$(hash_of "$T/straight.out")" = "$(hash_of "$T/cont.out")" ] && ok "zero1 x2 -> ddp x1 (GA 2) continues bit-identically" || bad "zero1 x2 -> ddp x1 continuation"
# bf16-low (2-byte parameters and moments in memory, f32 tensors on disk): saved by zero2 x2 (the
# resume test above), loaded by zero3 x4 and by ddp x1 in bf16-low and by zero1 x2 in fp32: every
# tensor equal (the f32 values of bf16 numbers go through bf16 storage and back exactly)
L="$T/r-zero2-bf16-low/ck/step-00000003"
LOW=(--set precision.mode=bf16-low --set precision.stochastic_rounding=true)
"$Z" train "$T/c.yaml" --nproc 4 --set parallel.strategy=zero3 "${LOW[@]}" --resume "$L" --stop-after 3 --ckpt-dir "$T/low-z3x4" >/dev/null
"$Z" train "$T/c.yaml" --set parallel.strategy=ddp "${LOW[@]}" --resume "$T/low-z3x4" --stop-after 3 --ckpt-dir "$T/low-ddp1" >/dev/null
"$Z" train "$T/c.yaml" --nproc 2 --set parallel.strategy=zero1 --resume "$T/low-z3x4" --stop-after 3 --ckpt-dir "$T/low-fp32" >/dev/null
for pair in "$L $T/low-z3x4/step-00000003" "$T/low-z3x4/step-00000003 $T/low-ddp1/step-00000003" \
            "$T/low-z3x4/step-00000003 $T/low-fp32/step-00000003"; do
  set -- $pair
  if /usr/bin/python3 "$SRC/tests/ckpt_compare.py" "$1" "$2" >/dev/null; then ok "bf16-low reshard ${1#$T/} -> ${2#$T/}"; else bad "bf16-low reshard $1 -> $2"; fi
done

# zero1 under bf16 keeps its fp32 master as pieces and replicates the compute copies
# (src/engine/master_shard.c): its checkpoint (the resume test above) holds the fp32 master from the
# pieces; loaded by zero3 x4, then ddp x1, then zero2 x2 (pieces again), every tensor equal; and
# zero3 x2 and ddp x1 (GA 2) resumed from it continue bit-identically to zero1's 6 straight steps
# (the loaded compute copies are right)
B="$T/r-zero1-bf16/ck/step-00000003"
BF=(--set precision.mode=bf16)
"$Z" train "$T/c.yaml" --nproc 4 --set parallel.strategy=zero3 "${BF[@]}" --resume "$B" --stop-after 3 --ckpt-dir "$T/bf-z3x4" >/dev/null
"$Z" train "$T/c.yaml" --set parallel.strategy=ddp "${BF[@]}" --resume "$T/bf-z3x4" --stop-after 3 --ckpt-dir "$T/bf-ddp1" >/dev/null
"$Z" train "$T/c.yaml" --nproc 2 --set parallel.strategy=zero2 "${BF[@]}" --resume "$T/bf-ddp1" --stop-after 3 --ckpt-dir "$T/bf-z2" >/dev/null
for pair in "$B $T/bf-z3x4/step-00000003" "$T/bf-z3x4/step-00000003 $T/bf-ddp1/step-00000003" \
            "$T/bf-ddp1/step-00000003 $T/bf-z2/step-00000003"; do
  set -- $pair
  if /usr/bin/python3 "$SRC/tests/ckpt_compare.py" "$1" "$2" >/dev/null; then ok "bf16 reshard ${1#$T/} -> ${2#$T/}"; else bad "bf16 reshard $1 -> $2"; fi
done
"$Z" train "$T/c.yaml" --nproc 2 --set parallel.strategy=zero3 "${BF[@]}" --resume "$B" > "$T/bf-cont3.out"
"$Z" train "$T/c.yaml" --set training.gradient_accumulation_steps=2 "${BF[@]}" --resume "$T/bf-z2" > "$T/bf-cont1.out"
want="$(hash_of "$T/r-zero1-bf16/a.out")"
[ -n "$want" ] && [ "$(hash_of "$T/bf-cont3.out")" = "$want" ] && [ "$(hash_of "$T/bf-cont1.out")" = "$want" ] &&
  ok "zero1 bf16 x2 -> zero3 x2 and -> (zero3 x4, ddp x1, zero2 x2) -> ddp x1 GA 2 continue bit-identically ($want)" ||
  bad "zero1 bf16 continuation: $want vs $(hash_of "$T/bf-cont3.out") (zero3 x2), $(hash_of "$T/bf-cont1.out") (ddp x1)"

# 3. damage: each case on a fresh copy, exit 4 and the file named
expect4() { # label file-named cmd...
  local label="$1" name="$2"; shift 2
  set +e; out="$("$@" 2>&1)"; rc=$?; set -e
  if [ $rc -eq 4 ] && grep -q "$name" <<<"$out"; then ok "$label: exit 4, $(grep -o 'error.*' <<<"$out" | head -1 | cut -c1-150)"
  else bad "$label: rc $rc: $out"; fi
}
fresh() { rm -rf "$T/dmg"; cp -r "$T/z1" "$T/dmg"; }
C="$T/dmg/step-00000003"
fresh; truncate -s 1000 "$C/rank-00001.bin"; expect4 "truncated shard" rank-00001.bin "$Z" train "$T/c.yaml" --resume "$C"
fresh; printf '\x01' | dd of="$C/rank-00000.bin" bs=1 seek=77 conv=notrunc status=none; expect4 "bit-flipped shard" rank-00000.bin "$Z" verify "$C"
fresh; rm "$C/rank-00001.bin"; expect4 "missing shard" rank-00001.bin "$Z" train "$T/c.yaml" --resume "$C"
fresh; sed -i 's/"step":\s*3/"step": 4/' "$C/manifest.json"; expect4 "edited manifest" manifest.json "$Z" verify "$C"
fresh; rm "$C/manifest.json"; expect4 "missing manifest" "no valid commit" "$Z" train "$T/c.yaml" --resume "$T/dmg"
# a killed save: a newer step-N.tmp and a newer step-N without a manifest are ignored
fresh; mkdir -p "$T/dmg/step-00000009.tmp" "$T/dmg/step-00000008"; echo junk > "$T/dmg/step-00000009.tmp/rank-00000.bin"
echo "step-00000008" > "$T/dmg/latest"
"$Z" train "$T/c.yaml" --set training.gradient_accumulation_steps=2 --resume "$T/dmg" > "$T/killed.out"
grep -q "step-00000003: step 3" "$T/killed.out" && ok "killed save: resumed from the last good commit" || { bad "killed save"; tail -3 "$T/killed.out"; }
# keep_last and verify
"$Z" train "$T/c.yaml" --ckpt-dir "$T/keep" --ckpt-every 1 --keep-last 2 >/dev/null
[ "$(ls "$T/keep" | grep -c '^step-')" = 2 ] && [ -d "$T/keep/step-00000006" ] && ok "keep_last 2 keeps step-5 and step-6" || bad "keep_last: $(ls "$T/keep")"
"$Z" verify "$T/keep" >/dev/null && ok "verify" || bad "verify"
exit $fail
