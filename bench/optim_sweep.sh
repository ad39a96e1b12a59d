#!/usr/bin/env bash
# optim_sweep.sh - tokens to a target validation loss, Muon (+ AdamW for the rest) against AdamW
# alone, each tuned over the same number of learning rates (issue 36's "time to a target, tuned
# fairly"), on bench/time_to_loss.sh's setup: the same initial parameters, samples, schedule
# (warm-up, cosine to the end) and evaluations for every run.
#
# Fairness: each optimizer gets its own grid of learning rates, the same size, spaced by 2x around
# its published default (AdamW 1e-3, Muon 0.02); the Muon runs' AdamW part (embeddings, LM head,
# norms, biases) uses the best AdamW learning rate of the AdamW grid (tuned first), so the
# comparison is between the two ways of updating the blocks' matrices. Every run goes the whole
# schedule (--target 0) and its validation curve gives the tokens to each target; an optimizer's
# tokens to a target are its best learning rate's (the smallest over its grid).
#
#   bash bench/optim_sweep.sh                     # bf16, GPT-2 L4 C256, 300 steps, eval every 10
#   bash bench/optim_sweep.sh --prec fp32 --steps 500 --adamw-lrs "5e-4 1e-3 2e-3" --muon-lrs "0.01 0.02 0.04"
#   --targets "5.8 5.6 5.4"  the validation losses to report (the table's columns)
# Prints the CPU line, each run's curve summary, then a markdown table: per target, each
# optimizer's best tokens (and its learning rate) and the ratio AdamW / Muon (goal >= 1.3x).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PREC=bf16 STEPS=300 EVERY=10 ADAMW_LRS="1e-3 2e-3 4e-3" MUON_LRS="0.01 0.02 0.04" TARGETS="5.8 5.6 5.4 5.2"
while [ $# -gt 0 ]; do
  case "$1" in
    --prec) PREC="$2"; shift 2 ;; --steps) STEPS="$2"; shift 2 ;; --eval-every) EVERY="$2"; shift 2 ;;
    --adamw-lrs) ADAMW_LRS="$2"; shift 2 ;; --muon-lrs) MUON_LRS="$2"; shift 2 ;; --targets) TARGETS="$2"; shift 2 ;;
    -h|--help) sed -n 2,19p "$0"; exit 0 ;;
    *) echo "optim_sweep.sh: unknown argument $1 (--help)" >&2; exit 2 ;;
  esac
done
CURVES="$(mktemp)"; trap 'rm -f "$CURVES"' EXIT
"$ROOT/build/zerotrain" version 2>/dev/null | grep -m1 '^cpu' || true
echo "load $(cut -d' ' -f1-3 /proc/loadavg); $PREC, $STEPS steps, eval every $EVERY; AdamW lrs: $ADAMW_LRS; Muon lrs: $MUON_LRS"
run() { # RUN LR MUON_LR
  bash "$ROOT/bench/time_to_loss.sh" --runs "$1" --target 0 --steps "$STEPS" --eval-every "$EVERY" --lr "$2" \
    --muon-lr "$3" --curve "$CURVES" 2>&1 | grep -E "target not reached|^cpu" | sed "s/^/  [$1 lr $2 muon_lr $3] /" || true
}
for lr in $ADAMW_LRS; do run "zt-$PREC" "$lr" 0.02; done
# the best AdamW learning rate: the lowest final validation loss of the AdamW grid
best_lr="$(/usr/bin/python3 - "$CURVES" "zt-$PREC" <<'PY'
import json, sys
last = {}
for line in open(sys.argv[1]):
    d = json.loads(line)
    if d["run"] == sys.argv[2]: last[d["lr"]] = d["val_loss"]
print(min(last, key=last.get))
PY
)"
echo "best AdamW lr (lowest final validation loss): $best_lr"
for mlr in $MUON_LRS; do run "zt-muon-$PREC" "$best_lr" "$mlr"; done
/usr/bin/python3 - "$CURVES" "$PREC" "$TARGETS" <<'PY'
import json, sys
curves, prec, targets = sys.argv[1], sys.argv[2], [float(t) for t in sys.argv[3].split()]
runs = {}
for line in open(curves):
    d = json.loads(line)
    runs.setdefault((d["run"], d["lr"], d["muon_lr"]), []).append((d["step"], d["tokens"], d["val_loss"]))
def tokens_to(curve, target):
    return next((tok for _, tok, v in sorted(curve) if v <= target), None)
print()
for (run, lr, mlr), c in sorted(runs.items()):
    c.sort()
    print(f"  {run:16s} lr {lr:g} muon_lr {mlr:g}: val {c[0][2]:.4f} (step {c[0][0]}) -> {c[-1][2]:.4f} (step {c[-1][0]}), min {min(v for _, _, v in c):.4f}")
print()
print("| target val loss | AdamW: best tokens (lr) | Muon + AdamW: best tokens (muon lr) | AdamW / Muon tokens |")
print("| ---: | ---: | ---: | ---: |")
for t in targets:
    best = {}
    for (run, lr, mlr), c in runs.items():
        k = "muon" if "muon" in run else "adamw"
        tok = tokens_to(c, t)
        if tok is not None and (k not in best or tok < best[k][0]):
            best[k] = (tok, mlr if k == "muon" else lr)
    a, m = best.get("adamw"), best.get("muon")
    fa = f"{a[0]} ({a[1]:g})" if a else "not reached"
    fm = f"{m[0]} ({m[1]:g})" if m else "not reached"
    ratio = f"{a[0] / m[0]:.2f}x" if a and m else "-"
    print(f"| {t:g} | {fa} | {fm} | {ratio} |")
PY
