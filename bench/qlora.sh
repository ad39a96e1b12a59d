#!/usr/bin/env bash
# qlora.sh - QLoRA's step against the bf16-base LoRA step (issue 35's goal: nf4 <= 1.3x), and the
# dequantization's share of the nf4 step: `zerotrain train` of a preset with LoRA r=16 all-linear
# under bf16 compute, the base as bf16 (lora.base_quant none: fp32 master + bf16 compute copy)
# and as nf4 (and int8), alternating per round, each with --trace; the step times are the trace's
# "step" spans after the warm-up, the dequantization its "dequantize" spans (src/engine/param_quant.c).
# Prints the CPU, the kernels' level and the GEMM path (the trainer's cpu line), medians and bests
# over the rounds' steps, and the CPUs busy while it ran (bench/README.md).
#
#   bench/qlora.sh [--preset llama-124M] [-B 4] [-T 256] [--steps 4] [--warmup 1] [--rounds 2]
#                  [--threads 2] [--quants "nf4 int8"] [--build DIR]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
preset=llama-124M B=4 T=256 steps=4 warmup=1 rounds=2 threads=2 quants="nf4 int8" build="$here/../build"
while [ $# -gt 0 ]; do
  case "$1" in
    --preset) preset="$2" ;; -B) B="$2" ;; -T) T="$2" ;; --steps) steps="$2" ;; --warmup) warmup="$2" ;;
    --rounds) rounds="$2" ;; --threads) threads="$2" ;; --quants) quants="$2" ;; --build) build="$2" ;;
    *) echo "usage: bench/qlora.sh [--preset P] [-B b] [-T t] [--steps N] [--warmup W] [--rounds R] [--threads P] [--quants \"nf4 int8\"] [--build DIR]" >&2; exit 2 ;;
  esac
  shift 2
done
Z="$build/zerotrain"
[ -s "$here/../data/kjv_train.bin" ] || bash "$here/../scripts/prepare_corpus.sh" "$Z" >/dev/null # a fresh checkout
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
cat > "$W/c.yaml" <<YEOF
model: {preset: $preset, vocab_size: 50257}   # the KJV file holds GPT-2 token ids
data: {train: $here/../data/kjv_train.bin}
training: {micro_batch_size: $B, seq_len: $T, steps: $((steps + warmup)), lr: 1e-3}
precision: {mode: bf16}
lora: {rank: 16, alpha: 32, target_modules: all-linear}
YEOF
busy0=$(awk '/^cpu /{print $2+$3+$4+$6+$7+$8, $5}' /proc/stat)
for ((r = 1; r <= rounds; r++)); do
  for q in none $quants; do
    OMP_NUM_THREADS=$threads "$Z" train "$W/c.yaml" --set lora.base_quant=$q --trace "$W/$q.$r.json" > "$W/$q.$r.out" 2>&1 ||
      { echo "run $q failed:"; grep -m3 -E "error|FAIL" "$W/$q.$r.out"; exit 1; }
  done
done
busy1=$(awk '/^cpu /{print $2+$3+$4+$6+$7+$8, $5}' /proc/stat)
grep -m1 '^cpu ' "$W/none.1.out"
grep -m1 '^lora: ' "$W/none.1.out"
for q in $quants; do grep -m1 "^lora.base_quant" "$W/$q.1.out"; done
/usr/bin/python3 - "$W" "$rounds" "$warmup" "$quants" "$busy0" "$busy1" "$threads" <<'PYEOF'
import json, statistics, sys
w, rounds, warmup, quants = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4].split()
b0, i0 = map(float, sys.argv[5].split()); b1, i1 = map(float, sys.argv[6].split())
def spans(path):
    ev = [e for e in json.load(open(path))["traceEvents"] if e.get("ph") == "X"]
    steps = [e["dur"] / 1e3 for e in ev if e.get("cat") == "step"]
    deq = sum(e["dur"] for e in ev if e.get("cat") == "dequantize") / 1e3
    return steps, deq
res = {}
for q in ["none"] + quants:
    st, dq, tot = [], 0.0, 0.0
    for r in range(1, rounds + 1):
        s, d = spans(f"{w}/{q}.{r}.json")
        st += s[warmup:]; dq += d; tot += sum(s)
    res[q] = (statistics.median(st), min(st), dq / tot if tot else 0.0, len(st))
base, best = res["none"][0], res["none"][1]
print(f"| base | step ms, median of {res['none'][3]} (best) | / bf16-base LoRA step, median (best) | dequantize share of the step |")
print("| --- | --- | --- | --- |")
for q in ["none"] + quants:
    m, b, share, n = res[q]
    print(f"| {q if q != 'none' else 'bf16 (none)'} | {m:.0f} ({b:.0f}) | {m / base:.3f}x ({b / best:.3f}x) | {100 * share:.1f}% |")
ncpu = __import__("os").cpu_count()
busy = (b1 - b0) / max(1e-9, (b1 - b0) + (i1 - i0)) * ncpu
print(f"CPUs busy while it ran: {busy:.2f} of {ncpu} (this benchmark's own: up to {sys.argv[7]})")
PYEOF
