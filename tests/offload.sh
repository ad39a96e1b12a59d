#!/usr/bin/env bash
# offload.sh BUILD SOURCE - NVMe offload of the optimizer state (docs/offload.md):
#  1. through the CLI, 1 rank ddp, 2 ranks zero2 and 2 ranks zero3 (one of them configured in
#     DeepSpeed's JSON, one in bf16-low with stochastic rounding): the offloaded run's final
#     parameters are bit-identical to the in-memory run's; a checkpoint of an offloaded run
#     resumes bit-identically; no file is left behind;
#  2. under an address-space limit (RLIMIT_AS) on each rank, set halfway between the offloaded
#     and the in-memory run's measured peaks (1 rank ddp and 2 ranks zero3): the in-memory run
#     fails with exit 7 (the limit bites), the offloaded run completes with the same parameters;
#  3. I/O errors: a missing directory, a path under a file, a state file truncated under a running
#     2-rank job: exit 8 with the file named, every rank stopping (no hang), the files removed;
#  4. parameter offload (zero3's pieces in files, memory.offload_param nvme): alone and with the
#     optimizer offloaded (then, without accumulation, the reduced gradient pieces go to files
#     too, except in pipeline stages), fp32, bf16, fp16, accumulation, one rank, hybrid over zero3 on
#     4 ranks, zero3 in 2 pipeline stages of 2 ranks, and with both
#     offloads (zero3 on 2 ranks, 1 rank, zero3 in pipeline stages) at read-ahead depths 0 (none)
#     and 3, and (1 rank, pipeline stages: the largest and the most uneven windows) under the
#     smallest window bound the run accepts
#     (memory.offload_param_max_live one element less is exit 2 naming the key and the unit):
#     bit-identical to the in-memory run with every class at exactly its planned high-water, the
#     windows within the bound, and the last step's NVMe reads and writes exactly the planned bytes; a
#     checkpoint of it resumes bitwise on zero3 and on ddp x1; DeepSpeed's offload_param block;
#     refused under zero2 (exit 2); a piece file corrupted under a running job: exit 8, the
#     parameter and the file named, never trained on; a gradient piece file corrupted under a
#     running job with both offloads: exit 8, the file and the parameter named, the files removed.
set -euo pipefail
BUILD="$1"
Z="$BUILD/zerotrain"
TOOL="$BUILD/tests/tool_offload_mem"
export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ZT_COMM_TIMEOUT=60
T="$(mktemp -d)"; trap 'rm -rf "$T"' EXIT
NV="$T/nvme"; mkdir -p "$NV"
source "$(dirname "${BASH_SOURCE[0]}")/tiny_vocab.bash"
"$Z" tokenize /usr/share/common-licenses/GPL-3 -o "$T/train.bin" >/dev/null
fold_tokens "$T/train.bin"
cat > "$T/c.yaml" <<YAML
model: {preset: tiny, n_layer: 2, n_embd: 32, n_head: 2, max_seq_len: 32, vocab_size: $TINY_VOCAB}
data: {train: $T/train.bin}
training: {micro_batch_size: 2, seq_len: 16, steps: 6, warmup_steps: 1, lr: 3e-3}
logging: {print_every: 100}
YAML
# 64 KiB buffers: 8192-element chunks of m and v, so chunk boundaries cut through parameters
OFF=(--set memory.offload_optimizer=nvme --set memory.offload_optimizer_nvme_path="$NV"
     --set memory.offload_buffer_mb=0.0625 --set memory.offload_buffer_count=3)
fail=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fail=1; }
hash_of() { grep -o 'params xxh64 [0-9a-f]*' <<<"$1" | cut -d' ' -f3; }
empty_nvme() { [ -z "$(ls -A "$NV")" ]; }

# 1. bit-identical to the in-memory run, through the CLI
for case in "1 ddp" "2 zero2" "2 zero3"; do
  set -- $case
  a="$("$Z" train "$T/c.yaml" --nproc $1 --set parallel.strategy=$2 2>&1)"
  b="$("$Z" train "$T/c.yaml" --nproc $1 --set parallel.strategy=$2 "${OFF[@]}" 2>&1)"
  if [ -n "$(hash_of "$a")" ] && [ "$(hash_of "$a")" = "$(hash_of "$b")" ] && grep -q "offload: optimizer state in files" <<<"$b" \
     && empty_nvme; then
    ok "$2 on $1 rank(s): offloaded = in memory ($(hash_of "$a")); $(grep -o '[0-9] staging buffers[^,]*' <<<"$b" | head -1)"
  else
    bad "$2 on $1 rank(s): in memory $(hash_of "$a"), offloaded $(hash_of "$b")"; echo "$b" | tail -3
  fi
  [ "$2" = zero3 ] && ref3="$(hash_of "$a")" && mem3="$a" # (mem3: also section 4's in-memory 2 x zero3 run)
done
# a precision mode that rounds the stepped state (bf16-low, stochastic rounding keyed by element)
a="$("$Z" train "$T/c.yaml" --nproc 2 --set parallel.strategy=zero3 --set precision.mode=bf16-low \
     --set precision.stochastic_rounding=true 2>&1)"
b="$("$Z" train "$T/c.yaml" --nproc 2 --set parallel.strategy=zero3 --set precision.mode=bf16-low \
     --set precision.stochastic_rounding=true "${OFF[@]}" 2>&1)"
if [ -n "$(hash_of "$a")" ] && [ "$(hash_of "$a")" = "$(hash_of "$b")" ]; then
  ok "zero3 x2 bf16-low with stochastic rounding: offloaded = in memory ($(hash_of "$a"))"
else
  bad "bf16-low: in memory $(hash_of "$a"), offloaded $(hash_of "$b")"; echo "$b" | tail -3
fi
# zero1 under bf16: the fp32 master pieces are updated from the streamed state, then the bf16
# copies all-gathered (src/engine/master_shard.c)
a="$("$Z" train "$T/c.yaml" --nproc 2 --set parallel.strategy=zero1 --set precision.mode=bf16 2>&1)"
b="$("$Z" train "$T/c.yaml" --nproc 2 --set parallel.strategy=zero1 --set precision.mode=bf16 "${OFF[@]}" 2>&1)"
if [ -n "$(hash_of "$a")" ] && [ "$(hash_of "$a")" = "$(hash_of "$b")" ]; then
  ok "zero1 x2 bf16 (fp32 master sharded): offloaded = in memory ($(hash_of "$a"))"
else
  bad "zero1 bf16: in memory $(hash_of "$a"), offloaded $(hash_of "$b")"; echo "$b" | tail -3
fi
# the same through DeepSpeed's keys (a native file including a DeepSpeed JSON)
cat > "$T/ds.json" <<JSON
{"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1,
 "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "nvme", "nvme_path": "$NV",
   "buffer_count": 3, "pin_memory": true}},
 "aio": {"thread_count": 3, "block_size": 1048576}}
JSON
sed "s|^logging:|deepspeed_config: $T/ds.json\nlogging:|" "$T/c.yaml" > "$T/ds.yaml"
b="$("$Z" train "$T/ds.yaml" --nproc 2 --set memory.offload_buffer_mb=0.0625 2>&1)"
if [ "$(hash_of "$b")" = "$ref3" ] && grep -q "3 staging buffers.*3 I/O threads" <<<"$b"; then
  ok "DeepSpeed offload_optimizer {device: nvme, buffer_count: 3} + aio.thread_count 3: same parameters"
else
  bad "DeepSpeed config: $(hash_of "$b") vs $ref3"; echo "$b" | tail -3
fi
# checkpoint of an offloaded run: 3 steps, save, resume 3 (the moments stream into the files)
"$Z" train "$T/c.yaml" --nproc 2 --set parallel.strategy=zero3 "${OFF[@]}" --stop-after 3 --ckpt-dir "$T/ck" >/dev/null 2>&1
b="$("$Z" train "$T/c.yaml" --nproc 2 --set parallel.strategy=zero3 "${OFF[@]}" --resume "$T/ck" 2>&1)"
if [ "$(hash_of "$b")" = "$ref3" ] && "$Z" verify "$T/ck" >/dev/null 2>&1 && empty_nvme; then
  ok "zero3 offloaded: 3 steps + checkpoint + resume 3 = 6 steps in memory"
else
  bad "checkpoint/resume with offload: $(hash_of "$b") vs $ref3"; echo "$b" | tail -3
fi

# 2. a memory limit below the in-memory need, above the offloaded one. Deterministic virtual
# sizes: one malloc arena, a fixed mmap threshold, no communication thread, no engine block cache
# (it keeps freed blocks while memory allows and gives them back when an allocation fails, so an
# unlimited run's peak would overstate what the run needs).
export MALLOC_ARENA_MAX=1 MALLOC_MMAP_THRESHOLD_=131072 ZT_OVERLAP_COMM=0 ZT_BLOCK_CACHE=0
MX=(-x OMP_NUM_THREADS -x MALLOC_ARENA_MAX -x MALLOC_MMAP_THRESHOLD_ -x ZT_OVERLAP_COMM -x ZT_BLOCK_CACHE -x ZT_COMM_TIMEOUT)
peak_of() { grep '^vmpeak' <<<"$1" | awk 'BEGIN{m=0} {if ($3>m) m=$3} END{print m}'; }
thash() { grep '^hash' <<<"$1" | cut -d' ' -f2; }
for case in "1 ddp" "2 zero3"; do
  set -- $case
  run() { mpirun -np $1 --bind-to none "${MX[@]}" "$TOOL" $2 2 --embd 128 --warm-up "$NV" "${@:3}" 2>&1; }
  mem="$(run $1 $2)"; off="$(run $1 $2 --offload "$NV" --buffer-kb 256)"
  pm="$(peak_of "$mem")"; po="$(peak_of "$off")"
  if [ -z "$(thash "$mem")" ] || [ "$(thash "$mem")" != "$(thash "$off")" ] || [ "$pm" -le "$po" ]; then
    bad "$2 x$1 unlimited: hashes $(thash "$mem") / $(thash "$off"), peaks $pm / $po"; continue
  fi
  limit=$(( (pm + po) / 2 ))
  set +e
  lmem="$(run $1 $2 --limit-as $limit)"; rm_=$?
  loff="$(run $1 $2 --limit-as $limit --offload "$NV" --buffer-kb 256)"; ro=$?
  set -e
  if [ $rm_ -ne 0 ] && grep -q "out of memory" <<<"$lmem" && [ $ro -eq 0 ] && [ "$(thash "$loff")" = "$(thash "$mem")" ]; then
    ok "$2 x$1 under RLIMIT_AS $((limit >> 20)) MiB (peaks: in memory $((pm >> 20)), offloaded $((po >> 20)) MiB):" \
       "in memory fails ($(grep -m1 -o 'out of memory[^;]*' <<<"$lmem")), offloaded completes, same parameters"
  else
    bad "$2 x$1 under $limit bytes: in memory rc $rm_, offloaded rc $ro"; echo "$lmem" | grep -v '^-' | head -3; echo "$loff" | tail -3
  fi
done
unset MALLOC_ARENA_MAX MALLOC_MMAP_THRESHOLD_ ZT_OVERLAP_COMM

# 3. I/O errors: exit 8, the path named
expect8() { # label pattern cmd...
  local label="$1" pat="$2"; shift 2
  set +e; out="$("$@" 2>&1)"; rc=$?; set -e
  if [ $rc -eq 8 ] && grep -q -- "$pat" <<<"$out"; then ok "$label: exit 8, $(grep -m1 -o 'error.*' <<<"$out" | cut -c1-170)"
  else bad "$label: rc $rc"; echo "$out" | tail -4; fi
}
expect8 "missing directory" "$T/absent: No such file" \
  "$Z" train "$T/c.yaml" --set memory.offload_optimizer=nvme --set memory.offload_optimizer_nvme_path="$T/absent"
touch "$T/afile"
expect8 "a path under a file" "$T/afile" \
  "$Z" train "$T/c.yaml" --set memory.offload_optimizer=nvme --set memory.offload_optimizer_nvme_path="$T/afile/sub"
# a state file truncated while a 2-rank job runs: both ranks stop with exit 8, rank 1's file named
set +e
timeout 120 "$Z" train "$T/c.yaml" --nproc 2 --set parallel.strategy=zero2 "${OFF[@]}" --set training.steps=100000 > "$T/trunc.out" 2>&1 &
job=$!
for _ in $(seq 1 300); do f="$(ls "$NV"/*/rank-00001.exp_avg_sq 2>/dev/null | head -1)"; [ -n "$f" ] && break; sleep 0.1; done
sleep 0.5
[ -n "$f" ] && truncate -s 4096 "$f"
wait $job; rc=$?
set -e
out="$(cat "$T/trunc.out")"
if [ -n "$f" ] && [ $rc -eq 8 ] && grep -q "rank-00001.exp_avg_sq" <<<"$out" && grep -q "offset" <<<"$out" && empty_nvme; then
  ok "truncated under a running job: exit 8, $(grep -m1 -o 'rank-00001.exp_avg_sq[^(]*' <<<"$out"); files removed"
else
  bad "truncation: file '$f', rc $rc"; tail -5 "$T/trunc.out"; ls -R "$NV"
fi

# 4. parameter offload
PO=(--set memory.offload_param=nvme --set memory.offload_param_nvme_path="$NV")
# $b (an offloaded run) against $a (the same in memory): the bits, the plan, the I/O, no files left
same_as_memory() {
  if [ -n "$(hash_of "$a")" ] && [ "$(hash_of "$a")" = "$(hash_of "$b")" ] && grep -q "parameter pieces" <<<"$b" \
     && grep -q "every class of every rank reached exactly its planned high-water" <<<"$b" && empty_nvme \
     && grep -Eq "read ([0-9.]+) MiB .*wrote ([0-9.]+) MiB; planned read \1, write \2 MiB" <<<"$b"; then
    ok "$1: = in memory ($(hash_of "$a")), every class exactly as planned, I/O per step" \
       "as planned ($(grep -o 'read [0-9.]* MiB (the' <<<"$b" | cut -d' ' -f2) MiB read)"
  else
    bad "$1: in memory $(hash_of "$a"), offloaded $(hash_of "$b")"; echo "$b" | tail -6
  fi
}
for case in "2 zero3" "2 zero3 precision.mode=bf16" "2 zero3 precision.mode=fp16" \
            "2 zero3 training.gradient_accumulation_steps=2 training.global_batch_size=8" "1 zero3" \
            "4 hybrid parallel.hybrid_shard_size=2 training.global_batch_size=8" \
            "4 zero3 parallel.pipeline_parallel_size=2 training.global_batch_size=4"; do
  set -- $case
  extra=(); for kv in "${@:3}"; do extra+=(--set "$kv"); done
  if [ "$case" = "2 zero3" ]; then a="$mem3" # the same run as section 1's, not made twice
  else a="$(timeout 300 "$Z" train "$T/c.yaml" --nproc $1 --set parallel.strategy=$2 "${extra[@]}" 2>&1)"; fi
  for with in param param+optimizer; do
    more=("${PO[@]}" --set memory.offload_buffer_mb=0.0625 --set memory.offload_buffer_count=3)
    [ $with = param+optimizer ] && more+=(--set memory.offload_optimizer=nvme --set memory.offload_optimizer_nvme_path="$NV")
    b="$(timeout 300 "$Z" train "$T/c.yaml" --nproc $1 --set parallel.strategy=$2 "${extra[@]}" "${more[@]}" 2>&1)"
    same_as_memory "$2 x$1 ${*:3} offload $with"
  done
  # both offloads, the read-ahead off and deeper, and bounded: the bound one element below the
  # largest window a rank needs is refused, that window itself runs (and holds the windows within
  # it). The read-ahead's rule is the same in every case: checked on zero3 x2, on one rank (the
  # largest windows: it holds whole units) and in pipeline stages (the most uneven windows)
  case "$case" in "2 zero3"|"1 zero3"|*pipeline*) ;; *) continue ;; esac
  more=("${PO[@]}" "${OFF[@]}")
  for depth in 0 3; do
    b="$(timeout 300 "$Z" train "$T/c.yaml" --nproc $1 --set parallel.strategy=$2 "${extra[@]}" "${more[@]}" \
         --set memory.offload_param_prefetch=$depth 2>&1)" || true
    same_as_memory "$2 x$1 ${*:3} both offloads, read-ahead $depth units"
  done
  [ "$case" = "2 zero3" ] && continue # the bound: where the windows are largest and most uneven
  set +e; out="$("$Z" train "$T/c.yaml" --nproc $1 --set parallel.strategy=$2 "${extra[@]}" "${more[@]}" \
                 --set memory.offload_param_max_live=1 2>&1)"; rc=$?; set -e
  need="$(grep -o 'give at least [0-9]*' <<<"$out" | awk '{print $4}' | sort -n | tail -1)" || true
  if [ $rc -eq 2 ] && [ -n "$need" ] && grep -q "memory.offload_param_max_live.*cannot hold unit [a-z0-9._]*'s window" <<<"$out"; then
    set +e; out="$("$Z" train "$T/c.yaml" --nproc $1 --set parallel.strategy=$2 "${extra[@]}" "${more[@]}" \
                   --set memory.offload_param_max_live=$((need - 1)) 2>&1)"; rc=$?; set -e
    b="$(timeout 300 "$Z" train "$T/c.yaml" --nproc $1 --set parallel.strategy=$2 "${extra[@]}" "${more[@]}" \
         --set memory.offload_param_prefetch=3 --set memory.offload_param_max_live=$need 2>&1)" || true
    # the params class holds the windows only: at most the bound (MiB, as printed)
    within="$(awk -v lim="$need" '/^ +[0-9]+ +[0-9.]+\/[0-9.]+ / {split($2, a, "/"); if (a[2] * 1048576 > lim * 4 + 52429) bad = 1}
              END {print bad ? "no" : "yes"}' <<<"$b")"
    if [ $rc -eq 2 ] && [ "$within" = yes ]; then
      same_as_memory "$2 x$1 ${*:3} both offloads, read-ahead 3 within $need elements ($((need - 1)): exit 2)"
    else
      bad "$2 x$1 ${*:3} window bound $need: $((need - 1)) gave rc $rc, windows within it: $within"; echo "$b" | tail -6
    fi
  else
    bad "$2 x$1 ${*:3} offload_param_max_live 1: rc $rc, '$need'"; echo "$out" | tail -3
  fi
done
# a checkpoint with the pieces (and moments) in files resumes bitwise, on zero3 and on ddp x1
rm -rf "$T/ckp"
"$Z" train "$T/c.yaml" --nproc 2 --set parallel.strategy=zero3 "${PO[@]}" "${OFF[@]}" --stop-after 3 --ckpt-dir "$T/ckp" >/dev/null 2>&1
b="$("$Z" train "$T/c.yaml" --nproc 2 --set parallel.strategy=zero3 "${PO[@]}" --resume "$T/ckp" 2>&1)"
c="$("$Z" train "$T/c.yaml" --set parallel.strategy=ddp --set training.gradient_accumulation_steps=2 --resume "$T/ckp" 2>&1)"
if [ "$(hash_of "$b")" = "$ref3" ] && [ "$(hash_of "$c")" = "$ref3" ] && "$Z" verify "$T/ckp" >/dev/null 2>&1 && empty_nvme; then
  ok "pieces in files: 3 steps + checkpoint, resumed 3 on zero3 (offloaded) and on ddp x1 = 6 steps in memory"
else
  bad "parameter offload checkpoint: $(hash_of "$b") / $(hash_of "$c") vs $ref3"; echo "$b" | tail -3; echo "$c" | tail -3
fi
# DeepSpeed's offload_param block maps
cat > "$T/dsp.json" <<JSON
{"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1,
 "zero_optimization": {"stage": 3, "offload_param": {"device": "nvme", "nvme_path": "$NV", "buffer_count": 3}}}
JSON
sed "s|^logging:|deepspeed_config: $T/dsp.json\nlogging:|" "$T/c.yaml" > "$T/dsp.yaml"
b="$("$Z" train "$T/dsp.yaml" --nproc 2 2>&1)"
if [ "$(hash_of "$b")" = "$ref3" ] && grep -q "offload: parameter pieces in files" <<<"$b"; then
  ok "DeepSpeed offload_param {device: nvme}: pieces in files, same parameters"
else
  bad "DeepSpeed offload_param: $(hash_of "$b") vs $ref3"; echo "$b" | tail -3
fi
set +e; out="$("$Z" train "$T/c.yaml" --set parallel.strategy=zero2 "${PO[@]}" 2>&1)"; rc=$?; set -e
if [ $rc -eq 2 ] && grep -q "needs parallel.strategy zero3" <<<"$out"; then ok "offload_param under zero2: exit 2, $(grep -m1 -o 'memory.offload_param: [^(]*' <<<"$out")"
else bad "offload_param under zero2: rc $rc"; echo "$out" | tail -2; fi
# runs a 2-rank job with the options given until it fails, writing garbage into its rank 1 file of
# kind $1 again and again; sets f (the file), rc and out
corrupt_running() {
  local kind="$1"; shift
  set +e
  timeout 120 "$Z" train "$T/c.yaml" --nproc 2 --set parallel.strategy=zero3 "$@" --set training.steps=100000 \
    > "$T/corrupt.out" 2>&1 &
  local job=$!
  f=""; for _ in $(seq 1 300); do f="$(ls "$NV"/*/rank-00001.$kind 2>/dev/null | head -1)"; [ -n "$f" ] && break; sleep 0.1; done
  sleep 0.5
  while kill -0 $job 2>/dev/null && [ -n "$f" ]; do
    # nocreat: once the run has removed the file, dd must not make it again (a file made between
    # the run's unlink and its rmdir left the directory behind: a flake, not the engine's doing)
    printf '\xff\xff\xff\x7f' | dd of="$f" bs=1 seek=4096 conv=notrunc,nocreat status=none 2>/dev/null; sleep 0.01
  done
  wait $job; rc=$?
  set -e
  out="$(cat "$T/corrupt.out")"
}
# a piece file overwritten under a running job (a step may rewrite it): detected when the pieces
# are read for a gather, or by the stream's block checksums
corrupt_running param "${PO[@]}"
# (caught by a gather, the other rank is inside that all-gather and the job aborts: the aborted
# ranks leave their files, as a killed run does; caught by the step's stream, all ranks agree and
# remove them)
if [ -n "$f" ] && [ $rc -eq 8 ] && grep -q "rank-00001.param.*\(checksum\|does not match\)" <<<"$out"; then
  ok "piece file overwritten under a running job: exit 8, $(grep -m1 -o 'error.*rank-00001.param.*' <<<"$out" | cut -c1-220)"
  rm -rf "${NV:?}"/*
else
  bad "piece corruption: file '$f', rc $rc"; tail -5 "$T/corrupt.out"; ls -R "$NV"
fi
# a gradient piece file overwritten under a running job (both offloads): backward rewrites it every
# step, so garbage that lands between backward's write and the step's read is what must be caught
corrupt_running grad "${PO[@]}" "${OFF[@]}"
if [ -n "$f" ] && [ $rc -eq 8 ] && grep -q "rank-00001.grad: parameter .* does not match what backward wrote" <<<"$out" && empty_nvme; then
  ok "gradient piece file overwritten under a running job: exit 8, $(grep -m1 -o 'rank-00001.grad: parameter [^ ]*' <<<"$out"), files removed"
else
  bad "gradient piece corruption: file '$f', rc $rc"; tail -5 "$T/corrupt.out"; ls -R "$NV"; rm -rf "${NV:?}"/*
fi
exit $fail
