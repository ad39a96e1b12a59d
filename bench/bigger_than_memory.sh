#!/usr/bin/env bash
# bigger_than_memory.sh - the ZeRO-Infinity headline: a model whose training states do not fit in
# this machine's memory, trained anyway. GPT-2 1558M, fp32 master weights + AdamW: 16 bytes per
# parameter = 24.9 GB of parameters, gradients and moments (the machine has 23 GiB of RAM), on 2
# local ranks with zero3, the parameter pieces and the optimizer state in files
# (memory.offload_param nvme + memory.offload_optimizer nvme): each rank holds its gradient
# pieces, one or two units' gathered parameters and the staging buffers.
#
#   bench/bigger_than_memory.sh [--dir DIR] [--steps 20] [-T 64] [--build DIR]
#
# DIR (default ./runs/nvme) must be on a local disk with room for the files: 12 bytes per
# parameter over the ranks, 18.7 GB for 1558M. Prints the machine (CPU family, RAM, the disk's
# free space), the run's progress (the loss falls), and the memory table: every class planned
# against measured, and each rank's peak resident set beside the plan. The KJV corpus comes from
# scripts/prepare_corpus.sh.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
dir="$root/runs/nvme" steps=20 T=64 build="$root/build"
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) dir="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    -T) T="$2"; shift 2 ;;
    --build) build="$(realpath -m "$2")"; shift 2 ;;
    *) echo "bigger_than_memory.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
Z="$build/zerotrain"
[ -x "$Z" ] || { echo "bigger_than_memory.sh: no $Z: run scripts/build.sh first" >&2; exit 2; }
cd "$root"
[ -s data/kjv_train.bin ] || bash scripts/prepare_corpus.sh "$Z" >/dev/null
mkdir -p "$dir"
need=$((18700 * 1024 * 1024)) free=$(($(df -Pk "$dir" | awk 'NR==2 {print $4}') * 1024))
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs), family $(grep -m1 'cpu family' /proc/cpuinfo | awk '{print $NF}'), $(nproc) cores, RAM $(free -g | awk '/Mem:/ {print $2}') GiB, OpenBLAS core ${OPENBLAS_CORETYPE:-auto}"
echo "disk: $dir on $(df -P "$dir" | awk 'NR==2 {print $1}'), $((free >> 30)) GiB free (the files need $((need >> 30)) GiB)"
[ "$free" -gt "$need" ] || { echo "bigger_than_memory.sh: not enough free space under $dir" >&2; exit 8; }
export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
"$Z" estimate-memory examples/gpt2-124M.yaml --nproc 2 --set model.preset=gpt2-1558M --set parallel.strategy=zero3 \
  --set training.micro_batch_size=1 --set training.seq_len="$T" --set training.global_batch_size=2 \
  --set memory.offload_param=nvme --set memory.offload_param_nvme_path="$dir" \
  --set memory.offload_optimizer=nvme --set memory.offload_optimizer_nvme_path="$dir" | sed -n '1,20p'
time "$Z" train examples/gpt2-124M.yaml --nproc 2 --set model.preset=gpt2-1558M --set parallel.strategy=zero3 \
  --set training.steps="$steps" --set training.warmup_steps=2 --set training.lr=3e-4 \
  --set training.micro_batch_size=1 --set training.seq_len="$T" --set training.global_batch_size=2 \
  --set eval.every=0 --set logging.jsonl= --set logging.print_every=1 \
  --set memory.offload_param=nvme --set memory.offload_param_nvme_path="$dir" \
  --set memory.offload_optimizer=nvme --set memory.offload_optimizer_nvme_path="$dir"
