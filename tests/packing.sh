#!/usr/bin/env bash
# packing.sh BUILD SOURCE - packed documents (zt_batch.positions) under tensor and sequence
# parallelism, tool_dist_check --packed under mpirun on 2 oversubscribed ranks (every row packs
# documents of lengths 1 9 4 13 2 7 .., so they cross the sp parts' boundary at T/2):
#  1. the positions reach the model: a packed run's losses are not the unpacked run's;
#  2. sp tp 2 = tp 2, bit for bit, with the norms frozen (sp.sh's argument: otherwise the norms'
#     weight gradients are the one sum sp splits differently), GPT-2 and Llama, fp32 and bf16, flash
#     and naive attention: under sp the embedding adds the position rows of its own range of T (its
#     part of positions) and attention runs on the gathered sequence with every position;
#  3. tp 2 against one process, packed, within the tolerance tp.sh derives in the run itself
#     (tests/tolerance.py: 8 x what a one-ulp perturbation of every initial parameter produces), and
#     a run that really differs (lr x 1.01) outside it;
#  4. the pipeline keeps each micro-batch's positions (tool_pp_packed: an untied Llama, 2 stages,
#     1f1b, 4 micro-batches of packed rows): the one-process run's losses and parameters bit for
#     bit (pipeline.h's property for untied weights), flash and naive; unpacked they differ.
set -euo pipefail
BUILD="$1"
SRC="$2"
TOOL="$BUILD/tests/tool_dist_check"
PPT="$BUILD/tests/tool_pp_packed"
export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ZT_COMM_TIMEOUT=120
T=$(mktemp -d)
trap 'declare -F serve_stop >/dev/null && serve_stop; rm -rf "$T"' EXIT
source "$SRC/tests/dist_check.bash" # hash_of, losses_of, check; sets fail=0

# the runs on N ranks go to one MPI job per N (tests/tool_serve.bash); one that job cannot take
# runs alone
source "$(dirname "${BASH_SOURCE[0]}")/tool_serve.bash"
for n in 1 2; do serve_start "n$n" mpirun -np "$n" --oversubscribe --bind-to none -x OMP_NUM_THREADS -x ZT_COMM_TIMEOUT "$TOOL"; done
run() { # N args...
  local n="$1" rc=0; shift
  serve_run "n$n" "$@" || rc=$?
  [ $rc = 99 ] || return $rc
  mpirun -np "$n" --oversubscribe --bind-to none -x OMP_NUM_THREADS -x ZT_COMM_TIMEOUT "$TOOL" "$@" 2>&1
}
STEPS=4
NORMS='.*(ln_|norm).*'

# 1. the positions are used
a="$(losses_of "$(run 2 ddp 1 $STEPS --tp 2)")" b="$(losses_of "$(run 2 ddp 1 $STEPS --tp 2 --packed)")"
if [ -n "$a" ] && [ -n "$b" ] && [ "$a" != "$b" ]; then echo "ok   packed losses differ from unpacked: $b"
else echo "FAIL packed losses '$b' vs unpacked '$a': expected both, different"; fail=1; fi

# 2. sp = no sp, bit for bit, packed
for arch in gpt2 llama; do
  for prec in fp32 bf16; do
    for att in flash naive; do
      [ $prec = bf16 ] && [ $att = naive ] && continue
      key="$arch-$prec-$att"
      check "$arch $prec $att tp 2 packed, norms frozen" "$key" \
        "$(run 2 ddp 1 $STEPS --tp 2 --arch $arch --precision $prec --attention $att --freeze "$NORMS" --packed)"
      check "$arch $prec $att sp tp 2 = tp 2, packed, norms frozen" "$key" \
        "$(run 2 ddp 1 $STEPS --tp 2 --arch $arch --precision $prec --attention $att --freeze "$NORMS" --packed --sp)"
    done
  done
done

# 3. tp 2 against one process, packed
dump() { local n="$1" f="$2"; shift 2; run "$n" ddp 1 6 --dump "$T/$f.bin" --packed "$@" | grep '^losses' > "$T/$f.losses"; }
for arch in gpt2 llama; do
  dump 1 ref --arch $arch; dump 1 ulp --arch $arch --ulp; dump 2 tp --arch $arch --tp 2 --sp
  dump 1 lr --arch $arch --lr 0.0101
  python3 "$SRC/tests/tolerance.py" "$T" $arch ref ulp "tp=inside=sp tp 2 vs one process, packed" \
    "lr=outside=lr x 1.01 (must fail)" || fail=1
done

# 4. the pipeline
for att in "" --naive; do
  one="$("$PPT" 4 3 $att 2>&1)"
  check "pipeline${att:+ naive}: one process, packed" "pp$att" "$one"
  check "pipeline${att:+ naive}: 2 stages = one process, packed" "pp$att" \
    "$(mpirun -np 2 --oversubscribe --bind-to none -x OMP_NUM_THREADS -x ZT_COMM_TIMEOUT "$PPT" 4 3 $att 2>&1)"
  un="$(hash_of "$("$PPT" 4 3 $att --unpacked 2>&1)")"
  if [ -n "$un" ] && [ "$un" != "$(hash_of "$one")" ]; then echo "ok   pipeline${att:+ naive}: unpacked differs: $un"
  else echo "FAIL pipeline${att:+ naive}: the unpacked run's hash '$un' equals the packed one's"; fail=1; fi
done
exit $fail
