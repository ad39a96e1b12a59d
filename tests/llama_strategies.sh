#!/usr/bin/env bash
# llama_strategies.sh BUILD SOURCE - Llama on the distributed engine, under mpirun:
#  1. tool_dist_check --arch llama (2 layers, 4 query heads over 2 KV heads, rope scaling, untied):
#     for N = 1, 2, 4 ranks (4 oversubscribed), in fp32 and in bf16, ddp, zero1, zero2, zero3 and
#     hybrid give bit-identical losses and parameters after 20 steps, and the loss falls (by > 5%
#     from ln 96: the synthetic tokens repeat in pairs, which takes more than 20 steps to learn); the
#     tool checks every step's collective bytes against the formulas;
#  2. 1 rank x 4 micro-batches = 2 x 2 = 4 x 1, bit for bit (fp32 and bf16);
#  3. activation checkpointing full and selective under zero3 on 2 ranks change no bit;
#  4. `zerotrain train` with model.preset llama-tiny on 2 ranks (zero3, bf16) learns a text (the
#     loss falls by a third in 40 steps), saves weights that `sample` rebuilds as a Llama, and a
#     checkpoint whose manifest records the arch, which `export` reads back.
# Each rank runs one OpenMP thread, so the kernels see the same thread count everywhere.
set -euo pipefail
BUILD="$1"
TOOL="$BUILD/tests/tool_dist_check"
Z="$BUILD/zerotrain"
export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ZT_COMM_TIMEOUT=120
PY=python3
STEPS=20
T=$(mktemp -d)
trap 'declare -F serve_stop >/dev/null && serve_stop; rm -rf "$T"' EXIT
# the runs on N ranks go to one MPI job per N (tests/tool_serve.bash); one that job cannot take
# runs alone
source "$(dirname "${BASH_SOURCE[0]}")/tool_serve.bash"
for n in 1 2 4; do serve_start "n$n" mpirun -np "$n" --oversubscribe --bind-to none -x OMP_NUM_THREADS -x ZT_COMM_TIMEOUT "$TOOL"; done
run() { # N args...
  local n="$1" rc=0; shift
  serve_run "n$n" "$@" --arch llama || rc=$?
  [ $rc = 99 ] || return $rc
  mpirun -np "$n" --oversubscribe --bind-to none -x OMP_NUM_THREADS -x ZT_COMM_TIMEOUT "$TOOL" "$@" --arch llama 2>&1
}
SRC="$2"
# hash_of, losses_of, fail, check LABEL KEY OUTPUT
source "$SRC/tests/dist_check.bash"
falls() { # label output: the last loss below 0.95 x the first (ln 96 = 4.56 at the start)
  $PY - "$1" "$(losses_of "$2")" <<'PYEOF' || fail=1
import sys
l = [float.fromhex(x.split("(")[0]) for x in sys.argv[2].split()[1:]]
ok = len(l) > 1 and l[-1] < 0.95 * l[0]
print(("ok   " if ok else "FAIL ") + f"{sys.argv[1]}: loss {l[0]:.4f} -> {l[-1]:.4f}")
sys.exit(0 if ok else 1)
PYEOF
}

declare -A made # "N strategy" -> the output of that run in the current precision (not made twice)
for p in fp32 bf16; do
  for n in 1 2 4; do
    for s in ddp zero1 zero2 zero3; do
      out="$(run $n $s 1 $STEPS --precision $p)" || true # the hash decides (see strategies.sh)
      made["$n $s"]="$out"
      check "$p N=$n $s" "$p-n$n" "$out"
    done
    if [ $n -ge 2 ]; then
      check "$p N=$n hybrid (zero3 in groups of 2)" "$p-n$n" "$(run $n hybrid 1 $STEPS --hybrid 2 --precision $p)"
    fi
    if [ $n -eq 2 ]; then falls "$p N=2 zero3 learns" "$out"; fi
  done
  for s in ddp zero3; do
    check "$p N=1 GA=4 $s" "$p-ga" "$(run 1 $s 4 $STEPS --precision $p)"
    check "$p N=2 GA=2 $s" "$p-ga" "$(run 2 $s 2 $STEPS --precision $p)"
    check "$p N=4 GA=1 $s" "$p-ga" "${made[4 $s]}" # run 4 $s 1 $STEPS --precision $p: made above
  done
  for r in full selective; do
    check "$p N=2 zero3 checkpointing $r" "$p-n2" "$(run 2 zero3 1 $STEPS --precision $p --recompute $r)"
  done
done

# ---- 4. the trainer, sample, checkpoint, export ------------------------------------------------
"$Z" tokenize /usr/share/common-licenses/GPL-3 -o "$T/gpl.bin" --val-fraction 0.1 --val-out "$T/gpl_val.bin" >/dev/null
cat > "$T/l.yaml" <<YEOF
model: {preset: llama-tiny}
data: {train: $T/gpl.bin, val: $T/gpl_val.bin}
training: {micro_batch_size: 4, seq_len: 32, steps: 40, lr: 3e-3, warmup_steps: 5}
parallel: {strategy: zero3}
precision: {mode: bf16}
logging: {print_every: 1}
YEOF
if out="$(OMP_NUM_THREADS=1 "$Z" train "$T/l.yaml" --nproc 2 --save "$T/l.ztw" --ckpt-dir "$T/ck" --ckpt-every 40 2>&1)"; then
  grep -q "model llama (llama-tiny) L=2 C=64 NH=4 NKV=2 I=192" <<<"$out" && echo "ok   train names the model" \
    || { echo "FAIL train banner"; grep zerotrain <<<"$out"; fail=1; }
  $PY - "$(grep '^done:' <<<"$out")" <<'PYEOF' || fail=1
import re, sys
line = sys.argv[1]
m = re.search(r"loss ([0-9.]+) -> ([0-9.]+)", line)
ok = m is not None and float(m.group(2)) < 0.67 * float(m.group(1))
print(("ok   " if ok else "FAIL ") + "llama-tiny x2 zero3 bf16 on GPL-3: " + line.strip())
sys.exit(0 if ok else 1)
PYEOF
else
  echo "FAIL train llama-tiny"; echo "$out" | tail -5; fail=1
fi
if s="$("$Z" sample "$T/l.ztw" --prompt "the licence" --tokens 8 2>&1)"; then echo "ok   sample rebuilds the Llama from its .ztw"
else echo "FAIL sample: $s"; fail=1; fi
if $PY -c 'import json, sys; sys.exit(json.load(open(sys.argv[1]))["model"]["arch"] != "llama")' "$T"/ck/step-00000040/manifest.json; then
  echo "ok   the manifest records arch llama"; else echo "FAIL manifest arch"; fail=1; fi
if e="$("$Z" export "$T/ck" -o "$T/l.safetensors" 2>&1)" && grep -q "6531520 parameters" <<<"$e"; then
  echo "ok   export rebuilds the Llama from the manifest: $e"; else echo "FAIL export: $e"; fail=1; fi
exit $fail
