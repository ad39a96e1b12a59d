#!/usr/bin/env bash
# optim_offload.sh - what Muon's and LAMB's two-pass offloaded step (src/engine/step_streamed.c)
# costs against AdamW's one pass: GPT-2 `tiny` (or --preset), zero3 on 2 ranks, the optimizer state
# and the parameter pieces (and so the reduced gradient pieces) on NVMe in --dir, each optimizer in
# memory and offloaded, `zerotrain train` for --steps steps. Prints the CPU, the instruction-set
# level and the GEMM path, the load average, and per run rank 0's median over steps 2.. of the
# JSONL's optim_s (the update, the whole-tensor work and the collectives between the passes) and
# io_s (the time the step waited for the disk), and the last step's NVMe bytes against the plan.
# Timings on a shared machine are noisy: compare runs of one invocation only.
#
#   bench/optim_offload.sh [--build DIR] [--dir DIR (a temporary directory)] [--steps N (6)]
#                          [--preset tiny] [-B 2] [-T 32]
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
build="$root/build" dir="" steps=6 preset=tiny B=2 T=32
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build="$(realpath -m "$2")"; shift 2 ;;
    --dir) dir="$(realpath -m "$2")"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --preset) preset="$2"; shift 2 ;;
    -B) B="$2"; shift 2 ;;
    -T) T="$2"; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "optim_offload.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
done
zt="$build/zerotrain"
[ -x "$zt" ] || { echo "optim_offload.sh: build first (cmake --build $build)" >&2; exit 1; }
export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
[ -n "$dir" ] || dir="$tmp/nvme"
mkdir -p "$dir"
"$zt" version | sed -n 's/^ *\(cpu\|kernels\|gemm\) */  \1: /p' | head -3
echo "  load average: $(cut -d' ' -f1-3 /proc/loadavg)"
"$zt" tokenize /usr/share/common-licenses/GPL-3 -o "$tmp/gpl.bin" >/dev/null
cat > "$tmp/c.yaml" <<YEOF
model: {preset: $preset}
data: {train: $tmp/gpl.bin}
training: {micro_batch_size: $B, seq_len: $T, steps: $steps, warmup_steps: 1, lr: 1e-3}
parallel: {strategy: zero3}
logging: {print_every: 1000}
YEOF
OFF=(--set memory.offload_optimizer=nvme --set memory.offload_optimizer_nvme_path="$dir"
     --set memory.offload_param=nvme --set memory.offload_param_nvme_path="$dir")
median() { python3 -c 'import json,sys,statistics
v=[json.loads(l)[sys.argv[1]] for l in open(sys.argv[2]) if l.startswith("{\"step\"")][1:]
print("%.3f" % statistics.median(v) if v else "?")' "$1" "$2"; }
echo "$preset, zero3 x2, B=$B T=$T, $steps steps (medians of steps 2..$steps, rank 0), both offloads in $dir"
printf '%-8s %-9s %9s %9s   %s\n' optimizer where optim_s io_s "NVMe bytes of the last step (rank 0)"
for o in adamw muon lamb; do
  for where in memory nvme; do
    args=(); [ $where = nvme ] && args=("${OFF[@]}")
    out="$("$zt" train "$tmp/c.yaml" --nproc 2 --set optimizer.type=$o --set logging.jsonl="$tmp/$o.$where.jsonl" \
           "${args[@]}" 2>&1)" || { echo "$o $where: failed"; echo "$out" | tail -3; continue; }
    io="$(grep -o 'read [0-9.]* MiB (the.*' <<<"$out" || true)"
    printf '%-8s %-9s %9s %9s   %s\n' $o $where "$(median optim_s "$tmp/$o.$where.jsonl")" \
      "$(median io_s "$tmp/$o.$where.jsonl")" "${io:--}"
  done
done
echo "  load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
