#!/usr/bin/env bash
# multihost.sh [BUILD] - zero3 vs hybrid (one shard group per host) across 2 "hosts" x 2 ranks
# (network namespaces, scripts/netns_cluster.sh; needs root), unshaped and with the inter-host
# links shaped by tc (tbf rate + netem delay), `zerotrain bench` on gpt2-124M at a small B*T so
# communication matters. Prints, per case: the median step time and the bytes that left the two
# hosts' eth0 during the run (every byte between hosts crosses them once; intra-host traffic uses
# shared memory and is not counted). Results go in bench/RESULTS.md by hand.
# Env: SHAPES ("none 1gbit" by default; RATE or RATE:DELAY, the delay needs netem), STEPS (3), WARMUP (1), B (1), T (64).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$(cd "${1:-$ROOT/build}" && pwd)"
SHAPES="${SHAPES:-none 1gbit}" STEPS="${STEPS:-3}" WARMUP="${WARMUP:-1}" B="${B:-1}" T="${T:-64}"
export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ZT_COMM_TIMEOUT=1200
for shape in $SHAPES; do
  opts=()
  if [ "$shape" != none ]; then opts=(--rate "${shape%%:*}"); fi
  if [[ "$shape" == *:* ]]; then opts+=(--delay "${shape#*:}"); fi   # needs sch_netem in the kernel
  bash "$ROOT/scripts/netns_cluster.sh" "${opts[@]}" exec bash -c '
    for s in zero3 hybrid; do
      before=$("$ZT_NETNS_BYTES" | awk "{ s += \$2 } END { printf \"%.0f\", s }")
      json=$("$ZT_NETNS_MPIRUN" -np 4 --bind-to none -x OMP_NUM_THREADS -x ZT_COMM_TIMEOUT \
             "$0/zerotrain" bench --preset gpt2-124M -B "$3" -T "$4" --steps "$1" --warmup "$2" --strategy $s \
             2>&1 | grep "^{" | tail -1)
      after=$("$ZT_NETNS_BYTES" | awk "{ s += \$2 } END { printf \"%.0f\", s }")
      med=$(grep -o "\"step_ms_median\":[0-9.]*" <<<"$json" | cut -d: -f2)
      echo "shape '"$shape"' $s: median step ${med:-?} ms over $1 steps; inter-host bytes $(( after - before )) in $(( $1 + $2 )) steps + setup ($(( (after - before) / ($1 + $2) / 1000000 )) MB/step at most)"
    done' "$BUILD" "$STEPS" "$WARMUP" "$B" "$T"
done
