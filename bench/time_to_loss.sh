#!/usr/bin/env bash
# time_to_loss.sh - wall time to a target validation loss on the King James Bible, zerotrain against
# the PyTorch 1.13 peer, side by side in one run (issue 21; MLPerf's "time to train").
#
# Every run starts from the same initial parameters (bench/torch_gpt2.py --save-init, `train
# --init`), trains on the same samples in the same order (zerotrain's sampler; the peer replays it)
# under the same schedule and AdamW, evaluates the same validation batches every --eval-every steps,
# and stops at the first evaluation at or below --target (zerotrain: eval.target_loss). The clock
# runs from the first step to the end of that evaluation (evaluations included) for both.
# tests/time_to_loss.sh checks that the peer's losses equal zerotrain's from the same start.
#
#   bash bench/time_to_loss.sh                      # all six runs, ~15 min on a quiet 2-core machine
#   bash bench/time_to_loss.sh --runs "zt-bf16 pt-bf16" --target 5.0
#   --runs LIST   of zt-fp32 zt-bf16 zt-fp32-x2 zt-bf16-x2 pt-fp32 pt-bf16 (x2: 2 ranks x 1 thread,
#                 --strategy; pt-bf16: torch.autocast bf16 around the forward), and zt-muon-fp32,
#                 zt-muon-bf16 (-x2 too): Muon for the blocks' matrices at --muon-lr, AdamW (--lr)
#                 for the rest (optimizer.type muon, docs/optimizer.md)
#   --target X --shape L,NH,C --B N --T N --steps N (the schedule's length) --lr X --muon-lr X
#   --warmup N --eval-every N --eval-batches N --strategy S --out FILE.jsonl
#   --curve FILE  every zerotrain run's validation losses (step, tokens so far, val) appended as JSON lines:
#                 with --target 0 (never reached) the runs go the whole schedule and the curves give
#                 the tokens to any target (bench/optim_sweep.sh)
# Prints the CPU family and OpenBLAS core, each run's time, steps, tokens and what other processes
# took meanwhile, then a markdown table with each time as a ratio to the PyTorch runs and each
# run's tokens/s (evaluations included) against the shape's GEMM-bound limit, measured after the
# runs by build/bench/gemm_compare --gpt2 L,C,B*T (bf16 runs against the bf16 limit).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
Z="$ROOT/build/zerotrain"
RUNS="zt-fp32 zt-bf16 zt-fp32-x2 zt-bf16-x2 pt-fp32 pt-bf16"
TARGET=5.6 SHAPE=4,4,256 B=8 T=128 STEPS=500 LR=1e-3 MUON_LR=0.02 WARMUP=20 EVERY=25 EVAL_BATCHES=8 STRATEGY=zero3 OUT=""
CURVE=""
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) RUNS="$2"; shift 2 ;; --target) TARGET="$2"; shift 2 ;; --shape) SHAPE="$2"; shift 2 ;;
    --B) B="$2"; shift 2 ;; --T) T="$2"; shift 2 ;; --steps) STEPS="$2"; shift 2 ;; --lr) LR="$2"; shift 2 ;;
    --muon-lr) MUON_LR="$2"; shift 2 ;; --curve) CURVE="$2"; shift 2 ;;
    --warmup) WARMUP="$2"; shift 2 ;; --eval-every) EVERY="$2"; shift 2 ;;
    --eval-batches) EVAL_BATCHES="$2"; shift 2 ;; --strategy) STRATEGY="$2"; shift 2 ;; --out) OUT="$2"; shift 2 ;;
    -h|--help) sed -n 2,26p "$0"; exit 0 ;;
    *) echo "time_to_loss.sh: unknown argument $1 (--help)" >&2; exit 2 ;;
  esac
done
[ -x "$Z" ] || { echo "time_to_loss.sh: build first (scripts/build.sh): no $Z" >&2; exit 2; }
[ -s "$ROOT/data/kjv_train.bin" ] || bash "$ROOT/scripts/prepare_corpus.sh" "$Z" >/dev/null
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_WAIT_POLICY=passive
IFS=, read -r L NH C <<<"$SHAPE"
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
echo "cpu family $(grep -m1 'cpu family' /proc/cpuinfo | awk '{print $NF}'), $(nproc) cores," \
     "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-(unset)}, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "GPT-2 L=$L NH=$NH C=$C V=50257, B=$B T=$T ($((B * T)) tokens/step), lr $LR warmup $WARMUP cosine over $STEPS" \
     "steps, eval every $EVERY steps on $EVAL_BATCHES batches, target val loss $TARGET"
PEER=(/usr/bin/python3 "$ROOT/bench/torch_gpt2.py" --preset tiny --shape "$SHAPE" --max-seq-len "$T" -B "$B" -T "$T"
      --seed 1337 --lr "$LR")
"${PEER[@]}" --save-init "$W/init.safetensors" >/dev/null
cat >"$W/c.yaml" <<EOF
model: {preset: tiny, n_layer: $L, n_head: $NH, n_embd: $C, max_seq_len: $T}
data: {train: $ROOT/data/kjv_train.bin, val: $ROOT/data/kjv_val.bin}
training: {micro_batch_size: $B, seq_len: $T, steps: $STEPS, seed: 1337, lr: $LR, warmup_steps: $WARMUP,
           decay: cosine, grad_clip: 1.0}
eval: {every: $EVERY, batches: $EVAL_BATCHES, target_loss: $TARGET}
logging: {print_every: $EVERY, jsonl: $W/log.jsonl}
EOF

busy() { awk '/^cpu /{print $2+$3+$4+$7+$8+$9}' /proc/stat; }   # jiffies busy on every core
results=()
for run in $RUNS; do
  j0=$(busy); t0=$(date +%s.%N)
  case "$run" in
    zt-*)
      prec=${run#zt-}; prec=${prec%-x2}; mode=$([ "${prec%bf16}" != "$prec" ] && echo bf16 || echo fp32)
      opt=(); [ "${prec#muon-}" != "$prec" ] && opt=(--set optimizer.type=muon --set optimizer.muon_lr="$MUON_LR")
      rm -f "$W/log.jsonl"
      if [ "${run%-x2}" != "$run" ]; then
        OMP_NUM_THREADS=1 /usr/bin/time -f "%e %U %S" -o "$W/time" "$Z" train "$W/c.yaml" --init "$W/init.safetensors" \
          --nproc 2 --set parallel.strategy="$STRATEGY" --set training.micro_batch_size=$((B / 2)) \
          --set eval.batches=$((EVAL_BATCHES * 2)) \
          --set precision.mode="$mode" "${opt[@]}" >"$W/$run.log" 2>&1 || true
      else
        OMP_NUM_THREADS=2 /usr/bin/time -f "%e %U %S" -o "$W/time" "$Z" train "$W/c.yaml" --init "$W/init.safetensors" \
          --set precision.mode="$mode" "${opt[@]}" >"$W/$run.log" 2>&1 || true
      fi
      [ -n "$CURVE" ] && /usr/bin/python3 - "$W/log.jsonl" "$run" "$LR" "$MUON_LR" >>"$CURVE" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    d = json.loads(line)
    if d.get("val_loss") is not None and "step" in d:
        print(json.dumps({"run": sys.argv[2], "lr": float(sys.argv[3]), "muon_lr": float(sys.argv[4]),
                          "step": d["step"], "tokens": d["step"] * d["tokens"], "val_loss": d["val_loss"]}))
PY
      ev="$(grep '"target_reached"' "$W/log.jsonl" 2>/dev/null || true)"
      if [ -z "$ev" ]; then echo "$run: target not reached: $(tail -2 "$W/$run.log" | tr '\n' ' ')"; continue; fi
      secs=$(grep -oE '"seconds":[0-9.]+' <<<"$ev" | cut -d: -f2); step=$(grep -oE '"step":[0-9]+' <<<"$ev" | cut -d: -f2)
      val=$(grep -oE '"val_loss":[0-9.]+' <<<"$ev" | cut -d: -f2); toks=$(grep -oE '"tokens":[0-9]+' <<<"$ev" | cut -d: -f2)
      ;;
    pt-*)
      dt=${run#pt-}
      /usr/bin/time -f "%e %U %S" -o "$W/time" "${PEER[@]}" --threads 2 --dtype "$dt" --init "$W/init.safetensors" \
        --data "$ROOT/data/kjv_train.bin" --val "$ROOT/data/kjv_val.bin" --target-loss "$TARGET" --total-steps "$STEPS" \
        --warmup-steps "$WARMUP" --eval-every "$EVERY" --eval-batches "$EVAL_BATCHES" >"$W/$run.log" 2>&1 || true
      js="$(tail -1 "$W/$run.log")"
      step=$(grep -oE '"reached_step": [0-9]+' <<<"$js" | awk '{print $2}' || true)
      if [ -z "$step" ]; then echo "$run: target not reached: $(tail -2 "$W/$run.log" | tr '\n' ' ')"; continue; fi
      secs=$(grep -oE '"seconds": [0-9.]+' <<<"$js" | awk '{print $2}'); val=$(grep -oE '"val_loss": [0-9.]+' <<<"$js" | awk '{print $2}')
      toks=$(grep -oE '"tokens": [0-9]+' <<<"$js" | awk '{print $2}')
      ;;
    *) echo "time_to_loss.sh: unknown run $run" >&2; exit 2 ;;
  esac
  t1=$(date +%s.%N); j1=$(busy)
  read -r _ usr sys <"$W/time"
  other=$(awk -v a="$j0" -v b="$j1" -v hz="$(getconf CLK_TCK)" -v u="$usr" -v s="$sys" -v w0="$t0" -v w1="$t1" \
          'BEGIN { o = ((b - a) / hz - u - s) / (w1 - w0); printf "%.2f", o < 0 ? 0 : o }')
  cpu=$(awk -v u="$usr" -v s="$sys" 'BEGIN { printf "%.1f", u + s }')
  printf '%-11s target reached at step %4d (val %.4f) after %7.1f s, %8d tokens, %6.0f tok/s; %s CPU s (whole process); other processes %s CPUs\n' \
         "$run" "$step" "$val" "$secs" "$toks" "$(awk -v t="$toks" -v s="$secs" 'BEGIN{print t/s}')" "$cpu" "$other"
  results+=("$run $secs $step $val $toks $other $cpu")
  [ -n "$OUT" ] && printf '{"run":"%s","seconds":%s,"cpu_seconds":%s,"step":%s,"val_loss":%s,"tokens":%s,"other_cpus":%s,"target":%s}\n' \
                    "$run" "$secs" "$cpu" "$step" "$val" "$toks" "$other" "$TARGET" >>"$OUT"
done
# the GEMM-bound limit of this shape, measured now: tok/s if the step did nothing but its Linears
limit="$(OMP_NUM_THREADS=2 "$ROOT/build/bench/gemm_compare" --gpt2 "$L,$C,$((B * T))" --passes 2 --reps 2 2>/dev/null |
         grep -E '^  (limit fp32|limit bf16) ' || true)"  # each product the faster of the two ways
lf=$(grep 'limit fp32' <<<"$limit" | grep -oE 'at most [0-9]+' | awk '{print $3}')
lb=$(grep 'limit bf16' <<<"$limit" | grep -oE 'at most [0-9]+' | awk '{print $3}')
echo
echo "GEMM-bound limit of this shape (build/bench/gemm_compare --gpt2 $L,$C,$((B * T)), measured after the runs):" \
     "fp32 ${lf:-?} tok/s, bf16 ${lb:-?} tok/s"
echo
echo "| run | steps to target | val loss | seconds | tokens/s | / pt-fp32 | / pt-bf16 | CPU s (process) | CPU / pt-fp32 | CPU / pt-bf16 | tok/s / GEMM limit | other CPUs |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
ref() { local r; for r in "${results[@]}"; do set -- $r; if [ "$1" = "$REFN" ]; then eval echo "\${${COL:-2}}"; fi; done; }
pf=$(REFN=pt-fp32 ref || true); pb=$(REFN=pt-bf16 ref || true)
cf=$(REFN=pt-fp32 COL=7 ref || true); cb=$(REFN=pt-bf16 COL=7 ref || true)
for r in "${results[@]}"; do
  set -- $r
  ratio() { [ -n "$2" ] && awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2fx", a / b }' || echo "-"; }
  lim=$([ "${1/bf16/}" != "$1" ] && echo "${lb:-}" || echo "${lf:-}")
  eff=$([ -n "$lim" ] && awk -v t="$5" -v s="$2" -v l="$lim" 'BEGIN { printf "%.0f%%", 100 * t / s / l }' || echo "-")
  printf '| %s | %d | %.4f | %.1f | %.0f | %s | %s | %s | %s | %s | %s | %s |\n' "$1" "$3" "$4" "$2" \
         "$(awk -v t="$5" -v s="$2" 'BEGIN{print t/s}')" "$(ratio "$2" "$pf")" "$(ratio "$2" "$pb")" "$7" \
         "$(ratio "$7" "$cf")" "$(ratio "$7" "$cb")" "$eff" "$6"
done
