#!/usr/bin/env bash
# onebit.sh [BUILD] - 1-bit Adam (optimizer.type onebit_adam) against AdamW's fp32 gradient
# all-reduce between 2 "hosts" (network namespaces, scripts/netns_cluster.sh; needs root), the link
# shaped by tc tbf to SHAPE (1gbit). STRATEGY ddp (default): 1 rank per host, ddp, the whole
# gradient (AdamW) or momentum (1-bit Adam) across the link. STRATEGY hybrid: 2 ranks per host, a
# shard group per host (hybrid over zero3, hybrid_shard_size 2): AdamW all-reduces the reduced
# gradient pieces across the hosts in fp32, 1-bit Adam the pieces' momenta compressed; inside a host
# both reduce-scatter and gather in full precision. `zerotrain train` (fp32) on the GPT-2 preset
# MODEL (tiny: 3.3M parameters) over the GPL v3's tokens, B x T per rank, STEPS steps, the same data
# and seed for both; 1-bit Adam freezes after FREEZE steps (its warm-up is AdamW's bits). Prints
# the CPU, its instruction-set level and GEMM path, the load average, then per optimizer: the bytes
# that left the two hosts' eth0 over the whole run, the engine's payload bytes per step after the
# freeze (rank 0, JSONL bytes_sent: under hybrid also the in-host collectives), the median step
# time after the freeze, and both loss curves side by side (every LOSS_EVERY-th step). Results go
# in bench/RESULTS.md by hand.
# Env: STRATEGY (ddp), SHAPE (1gbit), MODEL (tiny), STEPS (60), FREEZE (20), B (4), T (64), LR (3e-3),
# LOSS_EVERY (5).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$(cd "${1:-$ROOT/build}" && pwd)"
SHAPE="${SHAPE:-1gbit}" MODEL="${MODEL:-tiny}" STEPS="${STEPS:-60}" FREEZE="${FREEZE:-20}" B="${B:-4}" T="${T:-64}"
LR="${LR:-3e-3}" LOSS_EVERY="${LOSS_EVERY:-5}" STRATEGY="${STRATEGY:-ddp}"
case "$STRATEGY" in
  ddp) SLOTS=1 NP=2 PARALLEL="{strategy: ddp}" ;;
  hybrid) SLOTS=2 NP=4 PARALLEL="{strategy: hybrid, hybrid_shard_size: 2}" ;;
  *) echo "onebit.sh: STRATEGY $STRATEGY: expected ddp or hybrid" >&2; exit 2 ;;
esac
export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ZT_COMM_TIMEOUT=1200
W="$(mktemp -d)"
trap 'rm -rf "$W"' EXIT
"$BUILD/zerotrain" version | sed -n 's/^ *\(cpu\|isa\) */  \1: /p'
echo "  load average: $(cut -d' ' -f1-3 /proc/loadavg); $MODEL, B=$B T=$T, $STEPS steps, 1-bit Adam's freeze after $FREEZE, link $SHAPE, $STRATEGY, 2 hosts x $SLOTS"
"$BUILD/zerotrain" tokenize /usr/share/common-licenses/GPL-3 -o "$W/gpl.bin" >/dev/null
cat > "$W/m.yaml" <<YEOF
model: {preset: $MODEL}
data: {train: $W/gpl.bin}
training: {micro_batch_size: $B, seq_len: $T, steps: $STEPS, lr: $LR, warmup_steps: 5, grad_clip: 1.0}
optimizer: {onebit_freeze_step: $FREEZE}
parallel: $PARALLEL
YEOF
opts=()
if [ "$SHAPE" != none ]; then opts=(--rate "$SHAPE"); fi
bash "$ROOT/scripts/netns_cluster.sh" --slots "$SLOTS" "${opts[@]}" exec bash -c '
  for o in adamw onebit_adam; do
    before=$("$ZT_NETNS_BYTES" | awk "{ s += \$2 } END { printf \"%.0f\", s }")
    "$ZT_NETNS_MPIRUN" -np "$2" --bind-to none -x OMP_NUM_THREADS -x ZT_COMM_TIMEOUT \
      "$0/zerotrain" train "$1/m.yaml" --set optimizer.type=$o --set logging.jsonl="$1/$o.jsonl" > "$1/$o.out" 2>&1 ||
      { echo "$o failed:"; tail -5 "$1/$o.out"; exit 1; }
    after=$("$ZT_NETNS_BYTES" | awk "{ s += \$2 } END { printf \"%.0f\", s }")
    echo "$o $(( after - before ))" >> "$1/eth0"
  done' "$BUILD" "$W" "$NP"
python3 - "$W" "$FREEZE" "$LOSS_EVERY" <<'PYEOF'
import json, statistics, sys
w, freeze, every = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
eth = dict(l.split() for l in open(w + "/eth0"))
runs = {}
for o in ("adamw", "onebit_adam"):
    steps = [x for x in map(json.loads, open(f"{w}/{o}.jsonl")) if "step" in x]
    after = [x for x in steps if x["step"] > freeze]
    sent = {k: sum(x["bytes_sent"].get(k, 0) for x in after) / len(after) for k in after[0]["bytes_sent"]}
    med = statistics.median(x["step_s"] for x in after)
    runs[o] = (steps, med, sent)
    print(f"{o:12s} eth0 bytes (both hosts, whole run) {int(eth[o]):>12,d} | after the freeze: median step {med*1e3:7.1f} ms, "
          f"rank 0 sent per step: " + ", ".join(f"{k} {v/1e6:.3f} MB" for k, v in sent.items() if v))
a, b = runs["adamw"], runs["onebit_adam"]
sa = sum(a[2].values()); sb = sum(b[2].values())
steps_n = len(a[0])
ea = int(eth["adamw"]) / steps_n  # AdamW's eth0 bytes per step; 1-bit Adam's warm-up steps move as many
eb = (int(eth["onebit_adam"]) - freeze * ea) / (steps_n - freeze)
print(f"eth0 per step (both hosts): adamw {ea/1e6:.2f} MB, 1-bit Adam after the freeze {eb/1e6:.3f} MB "
      f"(its total less {freeze} AdamW steps): {ea/eb:.1f}x fewer")
print(f"after the freeze: {sa/sb:.1f}x fewer bytes per step (rank 0's payload), step {a[1]/b[1]:.2f}x faster (median)")
xa = a[2].get("all_reduce", 0); xb = b[2].get("compressed_all_reduce", 0)
if xa and xb:  # under hybrid the rest (reduce-scatter, all-gather) stays inside a host
    print(f"rank 0's all_reduce (AdamW) against its compressed_all_reduce (1-bit Adam): {xa/1e6:.3f} MB vs {xb/1e6:.3f} MB, "
          f"{xa/xb:.1f}x fewer")
print("step   adamw loss   1-bit Adam loss")
for x, y in zip(a[0], b[0]):
    if x["step"] % every == 0 or x["step"] in (1, freeze, freeze + 1):
        print(f"{x['step']:4d}   {x['loss']:10.4f}   {y['loss']:10.4f}")
PYEOF
