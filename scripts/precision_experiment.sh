#!/usr/bin/env bash
# precision_experiment.sh - regenerates docs/precision-experiment.png, the seed's experiment (Accelerate's
# "tale of two backends": the same fine-tuning converges with fp32 master weights and stalls without
# them at one learning rate, and the two agree at another) on a small GPT-2 and real text:
#   1. pretrain GPT-2 tiny on the King James Bible (data/kjv_train.bin), 300 steps, fp32, lr 3e-3;
#   2. fine-tune it on another text (the GPL-3, /usr/share/common-licenses/GPL-3), 150 steps at a
#      constant learning rate, from the same weights, in
#        bf16 (mixed: fp32 master weights and moments, DeepSpeed's and Accelerate's aligned mode),
#        bf16-low (bf16 parameters and moments, FSDP's pure-bf16 mode),
#        bf16-low with stochastic rounding,
#      at lr 1e-4 (small updates: below half a bf16 ulp of most weights) and at lr 3e-3;
#   3. plot the loss curves (gnuplot) and print the final losses.
# Usage: scripts/precision_experiment.sh [BUILD_DIR] [OUT_DIR]  (defaults build/, runs/precision)
# Takes ~5 min on 2 cores. The numbers are deterministic for a given machine and thread count.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${1:-$ROOT/build}
OUT=${2:-$ROOT/runs/precision}
Z="$BUILD/zerotrain"
export ZT_SOURCE_DIR=${ZT_SOURCE_DIR:-$ROOT} OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
mkdir -p "$OUT"
[ -f "$ROOT/data/kjv_train.bin" ] || bash "$ROOT/scripts/prepare_corpus.sh" "$Z"
"$Z" tokenize /usr/share/common-licenses/GPL-3 -o "$OUT/gpl.bin" >/dev/null
TINY=("$ROOT/examples/tiny.yaml" --set sample.tokens=0 --set eval.every=0)
if [ ! -f "$OUT/pretrained.ztw" ]; then
  echo "pretraining on the KJV (300 steps, fp32)"
  "$Z" train "${TINY[@]}" --set "data.train=$ROOT/data/kjv_train.bin" --set data.val= --set training.steps=300 \
    --save "$OUT/pretrained.ztw" > "$OUT/pretrain.out"
fi
runs=("1e-4 bf16" "1e-4 bf16-low" "1e-4 bf16-low-sr" "3e-3 bf16" "3e-3 bf16-low")
for spec in "${runs[@]}"; do
  set -- $spec; lr=$1 name=$2 mode=$2 extra=()
  [ "$name" = bf16-low-sr ] && { mode=bf16-low; extra=(--set precision.stochastic_rounding=true); }
  echo "fine-tuning on the GPL-3: $name, lr $lr"
  "$Z" train "${TINY[@]}" --init "$OUT/pretrained.ztw" --set "data.train=$OUT/gpl.bin" --set data.val= \
    --set training.steps=150 --set training.warmup_steps=0 --set training.decay=constant \
    --set "training.lr=$lr" --set "precision.mode=$mode" "${extra[@]}" \
    --set "logging.jsonl=$OUT/$name-$lr.jsonl" > "$OUT/$name-$lr.out"
done
/usr/bin/python3 - "$OUT" <<'PY'
import json, sys
d = sys.argv[1]
for spec in ["1e-4 bf16", "1e-4 bf16-low", "1e-4 bf16-low-sr", "3e-3 bf16", "3e-3 bf16-low"]:
    lr, name = spec.split()
    rows = [json.loads(l) for l in open(f"{d}/{name}-{lr}.jsonl")]
    loss = [r["loss"] for r in rows if "event" not in r]
    with open(f"{d}/{name}-{lr}.dat", "w") as f:
        f.writelines(f"{i + 1} {v}\n" for i, v in enumerate(loss))
    tail = sum(loss[-10:]) / 10
    print(f"lr {lr:>5} {name:<12} loss {loss[0]:.3f} -> mean of the last 10 steps {tail:.3f}")
PY
gnuplot <<GP
set terminal pngcairo size 1100,460 font "sans,11"
set output "$ROOT/docs/precision-experiment.png"
set multiplot layout 1,2 title "GPT-2 tiny pretrained on the KJV, fine-tuned on the GPL-3: train loss"
set xlabel "step"; set ylabel "loss"; set grid; set key top right
set title "lr 1e-4 (updates below half a bf16 ulp)"
plot "$OUT/bf16-1e-4.dat" w l lw 2 t "bf16 mixed (fp32 master)", \
     "$OUT/bf16-low-1e-4.dat" w l lw 2 t "bf16-low", \
     "$OUT/bf16-low-sr-1e-4.dat" w l lw 2 dt 2 t "bf16-low + stochastic rounding"
set title "lr 3e-3"
plot "$OUT/bf16-3e-3.dat" w l lw 2 t "bf16 mixed (fp32 master)", \
     "$OUT/bf16-low-3e-3.dat" w l lw 2 t "bf16-low"
unset multiplot
GP
echo "wrote $ROOT/docs/precision-experiment.png"
