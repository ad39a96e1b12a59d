#!/usr/bin/env bash
# moe_ep.sh - expert parallelism (docs/parallelism.md, "Expert parallelism") on bench/moe.sh's model
# (llama-124M-moe: 8 experts of width 1024, top-2, fp32, B=4, T=256 per rank) on 2 ranks:
#  1. the all-to-all (zt_all_to_allv: sizes first, then the blocks in chunks) against Open MPI's
#     MPI_Alltoallv (alone, and after an MPI_Alltoall of the counts, which a dispatch needs) at the
#     sizes one of the step's all-to-alls moves (1024 rows of 768 floats to each rank when evenly
#     routed; build/bench/alltoall_bench; goal >= 100% of Open MPI's counts + alltoallv);
#  2. the training step with ep 2 against the ep 1 ddp step on the same 2 ranks (`zerotrain bench`,
#     tokens/s of the median step over both ranks' tokens, and per CPU-second).
# Prints the CPU, its instruction-set level and GEMM path, and the load average before and after
# (the machine may be shared: the numbers are only as quiet as it was).
#
#   bench/moe_ep.sh [--build DIR] [--steps N (3)] [--warmup W (1)] [--reps R (21)]
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
build="$root/build" steps=3 warmup=1 reps=21
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build="$(realpath -m "$2")"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --warmup) warmup="$2"; shift 2 ;;
    --reps) reps="$2"; shift 2 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "moe_ep.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
done
zt="$build/zerotrain"
[ -x "$zt" ] && [ -x "$build/bench/alltoall_bench" ] || { echo "moe_ep.sh: build first (cmake --build $build)" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
"$zt" version | sed -n 's/^ *\(cpu\|kernels\|gemm\) */  \1: /p' | head -3
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "--- 1. all-to-all, 2 ranks ---"
OMP_NUM_THREADS=1 mpirun -np 2 --bind-to none "$build/bench/alltoall_bench" --reps "$reps"
echo "--- 2. llama-124M-moe, B=4 T=256 per rank, 2 ranks x 1 thread, $steps timed steps after $warmup ---"
field() { python3 -c 'import json,sys
for l in reversed(sys.stdin.read().splitlines()):
    if l.startswith("{"):
        print(json.loads(l).get(sys.argv[1], "")); break' "$1"; }
declare -A tps cps
for ep in 1 2; do
  out="$(OMP_NUM_THREADS=1 "$zt" bench --preset llama-124M-moe -B 4 -T 256 --steps "$steps" --warmup "$warmup" \
         --nproc 2 --ep "$ep" 2>&1)" || { echo "ep $ep: bench failed"; echo "$out" | tail -3; exit 1; }
  tps[$ep]="$(field tok_per_s_median <<<"$out")"
  cps[$ep]="$(field tok_per_cpu_s <<<"$out")"
  printf '  ep %d: %8.1f tok/s (wall)  %8.1f tok per CPU-second  all-to-all %s MB sent a step by rank 0\n' "$ep" \
    "${tps[$ep]}" "${cps[$ep]}" "$(field ep_sent_mb <<<"$out")"
done
python3 - "${tps[1]}" "${tps[2]}" "${cps[1]}" "${cps[2]}" <<'PY'
import json, sys
d, e, dc, ec = map(float, sys.argv[1:])
print(f"  ep 2 / ep 1 (ddp): {e / d:.2f}x tok/s (wall), {ec / dc:.2f}x tok per CPU-second")
print(json.dumps({"bench": "moe_ep", "ep1_tok_per_s": d, "ep2_tok_per_s": e, "ratio_wall": round(e / d, 3),
                  "ep1_tok_per_cpu_s": dc, "ep2_tok_per_cpu_s": ec, "ratio_cpu": round(ec / dc, 3)}))
PY
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
