#!/usr/bin/env bash
# moe_ep.sh - expert parallelism (docs/parallelism.md, "Expert parallelism") on bench/moe.sh's model
# (llama-124M-moe: 8 experts of width 1024, top-2, fp32, B=4, T=256 per rank) on 2 ranks:
#  1. the all-to-all (zt_all_to_allv: sizes first, then the blocks; on one machine through the shared
#     segment, each block copied out of its sender's buffer mapped (zt_shared_alloc, as the step's
#     are), read with process_vm_readv, or through its slots) against Open MPI's
#     MPI_Alltoallv (alone, and after an MPI_Alltoall of the counts, which a dispatch needs) at the
#     sizes one of the step's all-to-alls moves (1024 rows of 768 floats to each rank when evenly
#     routed; build/bench/alltoall_bench; goal >= 100% of Open MPI's counts + alltoallv);
#  2. the training step with ep 2 against the ep 1 ddp step on the same 2 ranks (`zerotrain bench`,
#     tokens/s of the median step over both ranks' tokens, and per CPU-second);
#  3. (--memory: this part alone) a rank's memory and the gradient reduction's bytes a step, ep 1
#     vs 2 vs 4 on 4 ranks (llama-tiny-moe, ddp, B=2 T=64): the planned and measured peak of rank
#     0, what its reduction sent (dp_sent_mb), and of it the experts' (what is left after the
#     dense parameters' bytes, which are ep 1's less the experts' share of its elements, from the
#     preset's shape). The experts are stored E/ep a rank (docs/parallelism.md) and reduced over the
#     4/ep expert-data-parallel ranks: ep 1's experts' bytes x (4/ep - 1)/(4/ep) / ep x 4/3.
# Prints the CPU, its instruction-set level and GEMM path, and the load average before and after
# (the machine may be shared: the numbers are only as quiet as it was).
#
#   bench/moe_ep.sh [--build DIR] [--steps N (3)] [--warmup W (1)] [--reps R (21)] [--memory]
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
build="$root/build" steps=3 warmup=1 reps=21 memory_only=0
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build="$(realpath -m "$2")"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --warmup) warmup="$2"; shift 2 ;;
    --reps) reps="$2"; shift 2 ;;
    --memory) memory_only=1; shift ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "moe_ep.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
done
zt="$build/zerotrain"
[ -x "$zt" ] && [ -x "$build/bench/alltoall_bench" ] || { echo "moe_ep.sh: build first (cmake --build $build)" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
"$zt" version | sed -n 's/^ *\(cpu\|kernels\|gemm\) */  \1: /p' | head -3
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
field() { python3 -c 'import json,sys
for l in reversed(sys.stdin.read().splitlines()):
    if l.startswith("{"):
        print(json.loads(l).get(sys.argv[1], "")); break' "$1"; }
memory_part() {
  echo "--- 3. llama-tiny-moe, ddp on 4 ranks x 1 thread, B=2 T=64: rank 0's memory and gradient bytes a step ---"
  # the experts' share of the gradient elements: 2 layers x 3 stacked tensors x 4 experts x 96 x 64,
  # over every element of the preset (zerotrain estimate-memory's parameter count)
  local total; total="$("$zt" estimate-memory --model llama-tiny-moe --json 2>/dev/null | python3 -c 'import json,sys
print(json.load(sys.stdin).get("parameters", ""))')"
  for ep in 1 2 4; do
    out="$(OMP_NUM_THREADS=1 "$zt" bench --preset llama-tiny-moe -B 2 -T 64 --steps 2 --warmup 1 --nproc 4 --ep "$ep" 2>&1)" ||
      { echo "ep $ep: bench failed"; echo "$out" | tail -3; return 1; }
    python3 - "$ep" "$(field dp_sent_mb <<<"$out")" "$(field planned_peak_bytes <<<"$out")" \
      "$(field measured_peak_bytes <<<"$out")" "$(field ep_sent_mb <<<"$out")" "$total" <<'PY'
import os, sys
ep, dp, planned, measured, a2a, total = sys.argv[1:]
experts = 2 * 3 * 4 * 96 * 64
share = experts / float(total) if total else float("nan")
base = os.environ.get("EP1_DP") or dp  # ep 1's bytes: the dense parameters' are its (1 - share)
mine = max(float(dp) - float(base) * (1 - share), 0.0)  # (rounding: never below 0)
print(f"  ep {ep}: gradient reduction {float(dp):.3f} MB sent a step, of it the experts' {mine:.3f} MB; "
      f"peak planned {int(planned) / 2**20:.2f} MiB = measured {int(measured) / 2**20:.2f} MiB; "
      f"all-to-all {float(a2a):.3f} MB")
PY
    [ "$ep" = 1 ] && export EP1_DP="$(field dp_sent_mb <<<"$out")"
  done
}
if [ "$memory_only" = 1 ]; then memory_part; echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"; exit; fi
echo "--- 1. all-to-all, 2 ranks ---"
OMP_NUM_THREADS=1 mpirun -np 2 --bind-to none "$build/bench/alltoall_bench" --reps "$reps"
echo "--- 2. llama-124M-moe, B=4 T=256 per rank, 2 ranks x 1 thread, $steps timed steps after $warmup ---"
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
memory_part
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
