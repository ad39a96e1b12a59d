#!/usr/bin/env bash
# freeze.sh BUILD SOURCE - freezing parameters by name (training.freeze, zt_model_freeze), under
# mpirun:
#  1. tool_dist_check --arch llama --freeze 'embed_tokens\..*|layers\.0\..*': for N = 1, 2 ranks,
#     fp32 and bf16, ddp, zero1, zero2, zero3 (and hybrid on 2) give bit-identical losses and
#     parameters, the frozen tensors' hash after 20 steps equals their hash at initialization,
#     every step's collective bytes match the formulas with the gradients of the trainable
#     elements only (bf16 zero1/zero2: the tool's all-gather formula counts fp32 bytes where the
#     compute copies move as bf16, a known gap of the tool, so only the other checks decide there),
#     and zero3 at rest holds gradients and m, v for the trainable pieces only; the run differs from
#     the one without the freeze (the freeze acts);
#  2. tool_memory_check --freeze (GPT-2, wte and h.0 frozen): planned = measured per class, to the
#     byte, for ddp/zero1/zero2/zero3/hybrid, accumulation, bf16, fp16, bf16-low; zero3 fp32 model
#     states at rest = 4 bytes per owned element + 12 per owned trainable one;
#  3. `zerotrain train` with training.freeze on llama-tiny, 2 ranks zero3: it says how many
#     parameters are frozen and the loss falls; the same run with the optimizer state and the
#     parameters on NVMe ends on the same parameter hash, and so does a run resumed from its
#     step-15 checkpoint; a pattern that matches nothing, or is not a regular expression, exits 2
#     naming training.freeze.
set -euo pipefail
BUILD="$1"
TOOL="$BUILD/tests/tool_dist_check"
Z="$BUILD/zerotrain"
export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ZT_COMM_TIMEOUT=120
STEPS=20
FREEZE='embed_tokens\..*|layers\.0\..*'
T=$(mktemp -d)
trap 'declare -F serve_stop >/dev/null && serve_stop; rm -rf "$T"' EXIT
# the runs on N ranks go to one MPI job per N (tests/tool_serve.bash); one that job cannot take
# runs alone
source "$(dirname "${BASH_SOURCE[0]}")/tool_serve.bash"
for n in 1 2; do serve_start "n$n" mpirun -np "$n" --oversubscribe --bind-to none -x OMP_NUM_THREADS -x ZT_COMM_TIMEOUT "$TOOL"; done
run() { # N args...
  local n="$1" rc=0; shift
  serve_run "n$n" "$@" --arch llama || rc=$?
  [ $rc = 99 ] || return $rc
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
      rc=0; out="$(run $n $s 1 $STEPS --precision $p --freeze "$FREEZE")" || rc=$?
      check "$p N=$n $s freeze" "$p-n$n" "$out"
      kept "$p N=$n $s" "$out"
      errs="$(grep -E '^rank [0-9]+:|bytes sent' <<<"$out" || true)"
      if [ $p = bf16 ] && { [ $s = zero1 ] || [ $s = zero2 ]; }; then errs="$(grep -v 'all-gather bytes' <<<"$errs" || true)"; rc=0; fi
      if [ $rc -ne 0 ] || [ -n "$errs" ]; then echo "FAIL $p N=$n $s: rc $rc: $errs" | head -3; fail=1; fi
      if [ $n = 2 ] && [ $s = zero3 ]; then echo "     $(grep '^zero3 rank 0 at rest' <<<"$out")"; fi
    done
  done
  rc=0; out="$(run 2 hybrid 1 $STEPS --hybrid 2 --precision $p --freeze "$FREEZE")" || rc=$?
  check "$p N=2 hybrid freeze" "$p-n2" "$out"
  kept "$p N=2 hybrid" "$out"
  [ $rc -eq 0 ] || { echo "FAIL $p N=2 hybrid: rc $rc"; fail=1; }
  h="$(hash_of "$(run 1 ddp 1 $STEPS --precision $p)" || true)"
  if [ -n "$h" ] && [ "$h" != "${ref_hash[$p-n1]}" ]; then echo "ok   $p: the unfrozen run differs ($h)"
  else echo "FAIL $p: the unfrozen run gives the frozen run's hash '$h'"; fail=1; fi
done

MEM="$BUILD/tests/tool_memory_check"
for n in 2 4; do serve_start "m$n" mpirun -np "$n" --oversubscribe --bind-to none -x OMP_NUM_THREADS -x ZT_COMM_TIMEOUT "$MEM"; done
mem() { # label N args...
  local label="$1" n="$2"; shift 2
  local out rc=0
  out="$(serve_run "m$n" "$@" --freeze 'wte\.weight|h\.0\..*')" || rc=$?
  if [ $rc = 99 ]; then
    rc=0
    out="$(mpirun -np "$n" --oversubscribe --bind-to none -x OMP_NUM_THREADS -x ZT_COMM_TIMEOUT "$MEM" "$@" \
           --freeze 'wte\.weight|h\.0\..*' 2>&1)" || rc=$?
  fi
  local exact; exact="$(grep -o '^\([0-9]*\) of \1 (class, rank) high-waters exact' <<<"$out" || true)"
  if [ $rc -ne 0 ] || [ -z "$exact" ]; then echo "FAIL memory $label (rc $rc)"; echo "$out" | tail -6; fail=1
  else echo "ok   memory $label frozen: $exact$(grep -m1 -o 'zero3 frozen model states.*' <<<"$out" | sed 's/^/; /' || true)"; fi
}
for s in ddp zero1 zero2 zero3; do mem "N=2 $s" 2 $s 1 2; done
mem "N=4 hybrid (zero3 in groups of 2)" 4 hybrid 1 2 --hybrid 2
mem "N=2 zero3 GA=2 deferred" 2 zero3 2 2
mem "N=2 zero2 GA=2 reduce every micro-batch" 2 zero2 2 2 --reduce-every
mem "N=2 zero1 GA=3" 2 zero1 3 2
mem "N=2 zero1 bf16 (master pieces)" 2 zero1 1 2 --precision bf16
mem "N=2 zero3 bf16" 2 zero3 1 2 --precision bf16
mem "N=2 zero3 fp16" 2 zero3 1 2 --precision fp16
mem "N=2 zero3 bf16-low" 2 zero3 1 2 --precision bf16-low

# estimate-memory knows: llama-7b on 8 ranks with its first 10 layers and the embedding frozen
EST=(estimate-memory --model llama-7b --nproc 8 -B 1 -T 2048 --json)
if python3 - "$("$Z" "${EST[@]}")" "$("$Z" "${EST[@]}" --freeze '.*(embed_tokens|layers\.[0-9]\.).*')" <<'PYEOF'; then :; else fail=1; fi
import json, re, sys
u, f = json.loads(sys.argv[1]), json.loads(sys.argv[2])
frac = f["trainable_parameters"] / f["parameters"]
ok = u["trainable_parameters"] == u["parameters"] and frac < 0.9
for s in ("ddp", "zero1", "zero2", "zero3"):
    pu, pf = u["strategies"][s]["rest"], f["strategies"][s]["rest"]
    r = pf["optimizer"] / pu["optimizer"]
    good = pf["params"] == pu["params"] and abs(r - frac) < 0.02 * frac
    ok &= good
    print(("ok   " if good else "FAIL ") + f"estimate llama-7b x8 {s}: optimizer at rest {pu['optimizer']/2**30:.2f} -> "
          f"{pf['optimizer']/2**30:.2f} GiB (x{r:.3f}, trainable fraction {frac:.3f}); params {pf['params']/2**30:.2f} GiB both")
sys.exit(0 if ok else 1)
PYEOF

source "$(dirname "${BASH_SOURCE[0]}")/tiny_vocab.bash"
"$Z" tokenize /usr/share/common-licenses/GPL-3 -o "$T/gpl.bin" >/dev/null
fold_tokens "$T/gpl.bin"
cat > "$T/f.yaml" <<YEOF
model: {preset: llama-tiny, vocab_size: $TINY_VOCAB}
data: {train: $T/gpl.bin}
training: {micro_batch_size: 4, seq_len: 32, steps: 30, lr: 3e-3, warmup_steps: 5, freeze: '$FREEZE'}
parallel: {strategy: zero3}
YEOF
hash_line() { grep -o 'params xxh64 [0-9a-f]*' <<<"$1" || true; }
if out="$("$Z" train "$T/f.yaml" --nproc 2 --ckpt-dir "$T/ck" --ckpt-every 15 2>&1)"; then
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
  want="$(hash_line "$out")"
  mkdir -p "$T/nvme"
  o2="$("$Z" train "$T/f.yaml" --nproc 2 --set memory.offload_optimizer=nvme --set memory.offload_param=nvme \
        --set memory.offload_optimizer_nvme_path="$T/nvme" --set memory.offload_param_nvme_path="$T/nvme" 2>&1)" || true
  if [ -n "$want" ] && [ "$(hash_line "$o2")" = "$want" ]; then echo "ok   optimizer + parameters on NVMe: $want"
  else echo "FAIL NVMe offload with freeze: '$(hash_line "$o2")' vs '$want'"; echo "$o2" | tail -3; fail=1; fi
  o3="$("$Z" train "$T/f.yaml" --nproc 2 --resume "$T/ck/step-00000015" 2>&1)" || true
  if [ -n "$want" ] && [ "$(hash_line "$o3")" = "$want" ]; then echo "ok   resumed from step 15: $want"
  else echo "FAIL resume with freeze: '$(hash_line "$o3")' vs '$want'"; echo "$o3" | tail -3; fail=1; fi
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
