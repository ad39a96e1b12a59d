#!/usr/bin/env bash
# freeze.sh BUILD SOURCE - freezing parameters by name (training.freeze, zt_model_freeze), under
# mpirun:
#  1. tool_dist_check --arch llama --freeze 'embed_tokens\..*|layers\.0\..*': for N = 1, 2 ranks,
#     fp32 and bf16, ddp, zero1, zero2, zero3 (and hybrid on 2) give bit-identical losses and
#     parameters, and the frozen tensors' hash after 20 steps equals their hash at initialization;
#     the run differs from the one without the freeze (the freeze acts);
#  2. `zerotrain train` with training.freeze on llama-tiny, 2 ranks zero3: it says how many
#     parameters are frozen and the loss falls; a pattern that matches nothing, or is not a regular
#     expression, exits 2 naming training.freeze.
# test_freeze.c checks the single-process semantics (one step = the unfrozen step on the trainable
# parameters, the norm over trainable parameters only).
set -euo pipefail
BUILD="$1"
TOOL="$BUILD/tests/tool_dist_check"
Z="$BUILD/zerotrain"
export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ZT_COMM_TIMEOUT=120
STEPS=20
FREEZE='embed_tokens\..*|layers\.0\..*'
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
run() { # N args...
  local n="$1"; shift
  mpirun -np "$n" --oversubscribe --bind-to none -x OMP_NUM_THREADS -x ZT_COMM_TIMEOUT "$TOOL" "$@" --arch llama 2>&1
}
SRC="$2"
# hash_of, losses_of, fail, check LABEL KEY OUTPUT
source "$SRC/tests/dist_check.bash"
kept() { # label output: "frozen H0 -> H1" with H0 = H1
  local line; line="$(grep '^frozen' <<<"$2" || true)"
  if [ -n "$line" ] && [ "$(cut -d' ' -f2 <<<"$line")" = "$(cut -d' ' -f4 <<<"$line")" ]; then
    echo "ok   $1: frozen tensors unchanged ($line)"
  else
    echo "FAIL $1: frozen tensors changed or not checked: '$line'"; fail=1
  fi
}

for p in fp32 bf16; do
  for n in 1 2; do
    for s in ddp zero1 zero2 zero3; do
      out="$(run $n $s 1 $STEPS --precision $p --freeze "$FREEZE")" || true # the checks decide
      check "$p N=$n $s freeze" "$p-n$n" "$out"
      kept "$p N=$n $s" "$out"
    done
  done
  out="$(run 2 hybrid 1 $STEPS --hybrid 2 --precision $p --freeze "$FREEZE")" || true
  check "$p N=2 hybrid freeze" "$p-n2" "$out"
  kept "$p N=2 hybrid" "$out"
  h="$(hash_of "$(run 1 ddp 1 $STEPS --precision $p)" || true)"
  if [ -n "$h" ] && [ "$h" != "${ref_hash[$p-n1]}" ]; then echo "ok   $p: the unfrozen run differs ($h)"
  else echo "FAIL $p: the unfrozen run gives the frozen run's hash '$h'"; fail=1; fi
done

"$Z" tokenize /usr/share/common-licenses/GPL-3 -o "$T/gpl.bin" >/dev/null
cat > "$T/f.yaml" <<YEOF
model: {preset: llama-tiny}
data: {train: $T/gpl.bin}
training: {micro_batch_size: 4, seq_len: 32, steps: 30, lr: 3e-3, warmup_steps: 5, freeze: '$FREEZE'}
parallel: {strategy: zero3}
YEOF
if out="$("$Z" train "$T/f.yaml" --nproc 2 2>&1)"; then
  if grep -q "training.freeze: 10 of 21 parameters frozen" <<<"$out"; then echo "ok   train reports the freeze"
  else echo "FAIL train does not report the freeze"; grep -i freeze <<<"$out" || true; fail=1; fi
  python3 - "$(grep '^done:' <<<"$out")" <<'PYEOF' || fail=1
import re, sys
line = sys.argv[1]
m = re.search(r"loss ([0-9.]+) -> ([0-9.]+)", line)
ok = m is not None and float(m.group(2)) < 0.9 * float(m.group(1))
print(("ok   " if ok else "FAIL ") + "llama-tiny x2 zero3 with layers.0 and the embedding frozen: " + line.strip())
sys.exit(0 if ok else 1)
PYEOF
else
  echo "FAIL train with training.freeze"; echo "$out" | tail -5; fail=1
fi
for bad in 'q_proj' 'layers\.('; do
  set +e
  out="$("$Z" train "$T/f.yaml" --set "training.freeze=$bad" 2>&1)"; rc=$?
  set -e
  if [ $rc -eq 2 ] && grep -q "training.freeze" <<<"$out"; then echo "ok   freeze '$bad' exits 2: $(grep -m1 freeze <<<"$out")"
  else echo "FAIL freeze '$bad': exit $rc: $out" | head -3; fail=1; fi
done
exit $fail
