#!/usr/bin/env bash
# moe_balance.sh - the routers' load balance over training steps, with and without the balancing
# loss: llama-tiny-moe (4 experts, top-2; docs/models.md "Mixture of experts") trained on the KJV
# corpus (scripts/prepare_corpus.sh) from the same start twice, model.router_aux_loss_coef 0.01
# (Mixtral's config.json value, the preset's) and 0, one rank. Reads each step's JSONL `moe_tokens`
# (the tokens each expert took, over the layers) and `moe_balance` (the busiest expert of the most
# unbalanced layer over its mean load: 1 when even) and prints them every --every steps; with
# --plot, a PNG (gnuplot) of both runs' balance and each expert's share of the tokens against the
# step. Prints the CPU, the instruction-set level and the GEMM path first.
#
#   bench/moe_balance.sh [--build DIR] [--steps N (300)] [--every K (25)] [--plot FILE.png]
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
build="$root/build" steps=300 every=25 plot=""
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build="$(realpath -m "$2")"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --every) every="$2"; shift 2 ;;
    --plot) plot="$(realpath -m "$2")"; shift 2 ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) echo "moe_balance.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
done
zt="$build/zerotrain"
[ -x "$zt" ] || { echo "moe_balance.sh: build first (cmake --build $build)" >&2; exit 1; }
[ -z "$plot" ] || command -v gnuplot >/dev/null || { echo "moe_balance.sh: --plot needs gnuplot" >&2; exit 2; }
[ -s "$root/data/kjv_train.bin" ] || bash "$root/scripts/prepare_corpus.sh" "$zt" >/dev/null
export OMP_NUM_THREADS=2
"$zt" version | sed -n 's/^ *\(cpu\|kernels\|gemm\) */  \1: /p' | head -3
echo "llama-tiny-moe (4 experts x 96, top-2), fp32, B=8 T=64, $steps steps, lr 3e-3, one rank; load $(cut -d' ' -f1-3 /proc/loadavg)"
T="$(mktemp -d)"; trap 'rm -rf "$T"' EXIT
for coef in 0.01 0; do
  cat > "$T/c.yaml" <<YAML
model: {preset: llama-tiny-moe, router_aux_loss_coef: $coef}
data: {train: $root/data/kjv_train.bin}
training: {micro_batch_size: 8, seq_len: 64, steps: $steps, warmup_steps: 20, lr: 3e-3, seed: 1}
logging: {print_every: 1000, jsonl: $T/aux$coef.jsonl}
YAML
  "$zt" train "$T/c.yaml" >/dev/null 2>"$T/err" || { echo "moe_balance.sh: the run with router_aux_loss_coef $coef failed:"; tail -3 "$T/err"; exit 1; }
done
python3 - "$T/aux0.01.jsonl" "$T/aux0.jsonl" "$every" "$T/points.dat" <<'PY'
import json, sys
def steps(f):
    out = []
    for l in open(f):
        r = json.loads(l)
        if "event" not in r and "moe_tokens" in r: out.append(r)
    return out
a, b, every = steps(sys.argv[1]), steps(sys.argv[2]), int(sys.argv[3])
def shares(r):
    t = r["moe_tokens"]; s = sum(t)
    return [x / s for x in t]
print("step | aux 0.01: loss, balance, expert shares | aux 0: loss, balance, expert shares")
with open(sys.argv[4], "w") as dat:
    for ra, rb in zip(a, b):
        sa, sb = shares(ra), shares(rb)
        dat.write("%d %g %g %s %s\n" % (ra["step"], ra["moe_balance"], rb["moe_balance"],
                  " ".join("%g" % x for x in sa), " ".join("%g" % x for x in sb)))
        if ra["step"] % every == 0 or ra["step"] == 1:
            print("%4d | %.3f  %.2f  %s | %.3f  %.2f  %s" % (ra["step"], ra["loss"], ra["moe_balance"],
                  " ".join("%.2f" % x for x in sa), rb["loss"], rb["moe_balance"], " ".join("%.2f" % x for x in sb)))
def mean(rs, k): return sum(r[k] for r in rs) / len(rs)
h = len(a) // 2
print("mean balance over the second half: aux 0.01 %.3f, aux 0 %.3f (1 = even; the preset's 4 experts, top-2: at most 2)"
      % (mean(a[h:], "moe_balance"), mean(b[h:], "moe_balance")))
PY
if [ -n "$plot" ]; then
  cat > "$T/p.gp" <<GP
set terminal pngcairo size 1000,700 noenhanced
set output "$plot"
set multiplot layout 2,1 title "llama-tiny-moe: the routers' load over training (bench/moe_balance.sh)"
set ylabel "busiest expert / mean (worst layer)"
set yrange [0.9:2.1]
set key top right
plot "$T/points.dat" using 1:2 with lines title "router_aux_loss_coef 0.01", "" using 1:3 with lines title "router_aux_loss_coef 0"
set xlabel "step"
set yrange [0:0.55]
set ylabel "share of the tokens (all layers)"
plot for [e=0:3] "$T/points.dat" using 1:(column(4+e)) with lines title sprintf("aux 0.01: expert %d", e), \
     for [e=0:3] "" using 1:(column(8+e)) with lines dashtype 2 title sprintf("aux 0: expert %d", e)
unset multiplot
GP
  cp "$T/points.dat" "${plot%.png}.dat" # step, both balances, both runs' four shares
  gnuplot "$T/p.gp" && echo "plot: $plot (its points: ${plot%.png}.dat)"
fi
