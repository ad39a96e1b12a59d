#!/usr/bin/env bash
# multihost.sh BUILD SOURCE - zerotrain across two "hosts" (network namespaces on a bridge, made by
# scripts/netns_cluster.sh; 2 ranks each, shared memory inside a host, TCP between hosts):
#  1. zero3 and hybrid (one shard group per host, parallel.hybrid_shard_size 0 = the launcher's
#     ranks per node) train a small GPT-2 for 20 steps with final parameters bit-identical to the
#     same runs on 4 local ranks;
#  2. bytes really crossed the link (eth0 counters), and hybrid moved fewer of them than zero3;
#  3. `zerotrain train` with strategy hybrid and hybrid_shard_size left at 0 shards per host and
#     ends on zero3's parameters on 4 local ranks;
#  4. the same under Slurm's srun (when slurmctld/slurmd/munged are installed; else said and skipped),
#     one slurmd per namespace host, S from SLURM_STEP_TASKS_PER_NODE;
#  5. a host lost mid-run (its link down after a checkpoint): a peer error naming its ranks within
#     ZT_COMM_TIMEOUT, `zerotrain train --nproc 4` across the hosts exits 5 (not mpirun's 205),
#     and the run resumes from the last commit bit for bit;
#  6. ranks placed round-robin (--map-by node) with the per-node default are refused (exit != 0,
#     message naming the rank) instead of training with shard groups that span hosts.
# Skips (77) when this machine cannot create namespaces (not root, no CAP_SYS_ADMIN).
set -euo pipefail
BUILD="$(cd "$1" && pwd)"; SRC="$(cd "$2" && pwd)"
if [ -z "${ZT_NETNS_MPIRUN:-}" ]; then
  slurm=()   # Slurm on the hosts too when its daemons are installed (scripts/setup.sh installs them)
  if command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v munged >/dev/null; then slurm=(--slurm); fi
  exec bash "$SRC/scripts/netns_cluster.sh" --hosts 2 --slots 2 --subnet 10.77.$(( $$ % 200 + 20 )) "${slurm[@]}" \
    exec bash "$SRC/tests/multihost.sh" "$BUILD" "$SRC"
fi
TOOL="$BUILD/tests/tool_dist_check"
export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ZT_COMM_TIMEOUT=120
STEPS=20
source "$SRC/tests/dist_check.bash"
local4() { mpirun -np 4 --oversubscribe --bind-to none -x OMP_NUM_THREADS -x ZT_COMM_TIMEOUT "$TOOL" "$@" 2>&1; }
hosts() { "$ZT_NETNS_MPIRUN" -np 4 --bind-to none -x OMP_NUM_THREADS -x ZT_COMM_TIMEOUT "$@" 2>&1; }
tx_total() { "$ZT_NETNS_BYTES" | awk '{ s += $2 } END { printf "%.0f", s }'; }
# hybrid_default LABEL LAUNCHER...: hybrid with --hybrid 0 (the launcher's ranks per node) under
# LAUNCHER gives zero3's bits in shard groups of 2
hybrid_default() {
  local label="$1"; shift
  local out; out="$("$@" "$TOOL" hybrid 1 $STEPS --hybrid 0)"
  check "$label, hybrid with the per-node default" n4 "$out"
  grep -q "^shard groups of 2$" <<<"$out" || { echo "FAIL $label: hybrid's per-node default: $(grep shard <<<"$out")"; fail=1; }
}
# refused LABEL LAUNCHER...: ranks placed round-robin with per-node shard groups must fail, naming the rank
refused() {
  local label="$1"; shift
  local bad rc
  set +e; bad="$("$@" "$TOOL" hybrid 1 2 --hybrid 0)"; rc=$?; set -e
  if [ $rc -ne 0 ] && grep -q "is not local rank" <<<"$bad"; then
    echo "ok   $label refused: $(grep -m1 -o 'hybrid: rank .*' <<<"$bad" | cut -c1-100)"
  else
    echo "FAIL $label with per-node shard groups: rc $rc"; echo "$bad" | tail -5; fail=1
  fi
}

check "4 local ranks, zero3" n4 "$(local4 zero3 1 $STEPS)"
check "4 local ranks, hybrid in groups of 2" n4 "$(local4 hybrid 1 $STEPS --hybrid 2)"

where="$(hosts sh -c 'echo "$(hostname) rank $OMPI_COMM_WORLD_RANK local $OMPI_COMM_WORLD_LOCAL_RANK/$OMPI_COMM_WORLD_LOCAL_SIZE"' | sort)"
if [ "$(grep -c '^h1 rank [01] local [01]/2$' <<<"$where")" = 2 ] && [ "$(grep -c '^h2 rank [23] local [01]/2$' <<<"$where")" = 2 ]; then
  echo "ok   ranks 0,1 on host h1 and 2,3 on host h2, 2 per node"
else
  echo "FAIL placement across the hosts:"; echo "$where"; fail=1
fi

t0=$(tx_total)
check "2 hosts x 2 ranks, zero3" n4 "$(hosts "$TOOL" zero3 1 $STEPS)"
t1=$(tx_total)
hybrid_default "2 hosts x 2 ranks" hosts
t2=$(tx_total)
z=$(( t1 - t0 )); h=$(( t2 - t1 ))
if [ "$z" -gt 0 ] && [ "$h" -gt 0 ] && [ "$h" -lt "$z" ]; then
  echo "ok   bytes sent between the hosts: zero3 $z, hybrid $h"
else
  echo "FAIL bytes sent between the hosts: zero3 $z, hybrid $h (expected both > 0, hybrid < zero3)"; fail=1
fi

# the command-line trainer: hybrid with parallel.hybrid_shard_size left at 0 takes one shard group
# per host from the launcher, and ends on the parameters of zero3 on 4 local ranks
Z="$BUILD/zerotrain"
T="$(mktemp -d)"; trap 'rm -rf "$T"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/tiny_vocab.bash"
"$Z" tokenize /usr/share/common-licenses/GPL-3 -o "$T/train.bin" >/dev/null
fold_tokens "$T/train.bin"
cat > "$T/c.yaml" <<YAML
model: {preset: tiny, n_layer: 2, n_embd: 32, n_head: 2, max_seq_len: 32, vocab_size: $TINY_VOCAB}
data: {train: $T/train.bin}
training: {micro_batch_size: 2, seq_len: 16, steps: 6, warmup_steps: 1, lr: 3e-3}
logging: {print_every: 100}
YAML
params_of() { grep -o 'params xxh64 [0-9a-f]*' <<<"$1" | cut -d' ' -f3; }
ref="$("$Z" train "$T/c.yaml" --nproc 4 --set parallel.strategy=zero3 2>&1)"
got="$(hosts "$Z" train "$T/c.yaml" --set parallel.strategy=hybrid)"
if grep -q "shard groups of 2, ranks per node from OMPI_COMM_WORLD_LOCAL_SIZE" <<<"$got" && [ -n "$(params_of "$ref")" ] &&
   [ "$(params_of "$got")" = "$(params_of "$ref")" ]; then
  echo "ok   zerotrain train, hybrid across the hosts (shard group per host from the launcher) = zero3 on 4 local ranks: $(params_of "$got")"
else
  echo "FAIL zerotrain train across the hosts: params $(params_of "$got") vs $(params_of "$ref")"
  grep -m1 "^parallel" <<<"$got" || echo "$got" | tail -5; fail=1
fi

# a host lost mid-run: host 2's link goes down after a checkpoint; the ranks on host 1 fail with a
# peer error naming host 2's ranks within ZT_COMM_TIMEOUT (5 s here), mpirun ends (its daemon
# keepalive set short: by default Open MPI waits minutes for an unreachable host; 6 + 3 x 1 s, so
# that the ranks' 5 s deadline comes first even under load: with 3 + 3 x 1 s mpirun's 205 once came
# before the ranks had said anything) with its own 205, or, when it sent the abort to host 2 before
# its keepalive declared the host lost (TCP then retransmits for minutes and keepalive waits), the
# launcher stops mpirun fault.teardown_s (10 s here) after the ranks' exit records,
# and the command the user ran, `zerotrain train --nproc 4` across the hosts (ZT_MPIRUN: the
# namespace hosts' mpirun), exits 5 (the ranks' exit records); the run resumes from the last
# commit on both hosts, bit for bit with a run never interrupted
sed 's/steps: 6,/steps: 3000,/' "$T/c.yaml" > "$T/long.yaml"
set -- $ZT_NETNS_NAMES; ns2="$2"
ZT_COMM_TIMEOUT=5 ZT_MPIRUN="$ZT_NETNS_MPIRUN" timeout 120 "$Z" train "$T/long.yaml" --nproc 4 \
  --mpirun-args "--mca oob_tcp_keepalive_time 6 --mca oob_tcp_keepalive_intvl 1 --mca oob_tcp_keepalive_probes 3" \
  --set parallel.strategy=hybrid --set fault.teardown_s=10 --ckpt-dir "$T/ck" --ckpt-every 50 > "$T/lost.out" 2>&1 &
pid=$!
for _ in $(seq 1 1200); do [ -e "$T/ck/step-00000050" ] && break; sleep 0.1; done
ip -n "$ns2" link set eth0 down
t0=$(date +%s)
set +e; wait $pid; rc=$?; set -e
took=$(( $(date +%s) - t0 ))
ip -n "$ns2" link set eth0 up
if [ $rc -eq 5 ] && [ $took -lt 60 ] && grep -qE "error \(peer\).*(world [23]\)|ranks? [23])" "$T/lost.out"; then
  echo "ok   host 2 lost after step 50: exit 5 after $took s: $(grep -m1 -oE 'error \(peer\).*' "$T/lost.out" | cut -c1-90); $(grep -m1 -oE "mpirun's own status was .*" "$T/lost.out")"
else
  echo "FAIL host 2 lost: rc $rc (want 5) after $took s"; grep -v '^\[h' "$T/lost.out" | tail -5; fail=1
fi
ref="$("$Z" train "$T/long.yaml" --nproc 4 --set parallel.strategy=hybrid --stop-after 105 2>&1)"
got="$(hosts "$Z" train "$T/long.yaml" --set parallel.strategy=hybrid --resume "$T/ck" --stop-after 105)"
if [ -n "$(params_of "$ref")" ] && [ "$(params_of "$got")" = "$(params_of "$ref")" ]; then
  echo "ok   resumed across the hosts from $(cat "$T/ck/latest"), step 105 = never interrupted: $(params_of "$got")"
else
  echo "FAIL resume after the lost host: params $(params_of "$got") vs $(params_of "$ref")"; echo "$got" | tail -3; fail=1
fi

refused "mpirun --map-by node" hosts --map-by node

# Slurm: srun starts the ranks itself (mpi/pmix); S comes from SLURM_STEP_TASKS_PER_NODE (no OMPI_ variables)
if [ -n "${ZT_NETNS_SRUN:-}" ]; then
  srun_() { "$ZT_NETNS_SRUN" -N 2 -n 4 --distribution=block "$@" 2>&1; }
  check "srun, 2 hosts x 2 ranks, zero3" n4 "$(srun_ "$TOOL" zero3 1 $STEPS)"
  hybrid_default "srun, 2 hosts x 2 ranks" srun_
  # srun -E keeps the caller's SLURM_TASKS_PER_NODE (a job's 8 per node here) while the step runs 2
  # per node: the step's SLURM_STEP_TASKS_PER_NODE must win, or S = 8 would not divide 4 ranks
  srun_job8() { SLURM_TASKS_PER_NODE="8(x2)" "$ZT_NETNS_SRUN" -E -N 2 -n 4 --distribution=block "$@" 2>&1; }
  hybrid_default "srun -E under a job of 8 per node" srun_job8
  refused "srun --distribution=cyclic" srun_ --distribution=cyclic
else
  echo "skip srun: Slurm's daemons (slurmctld, slurmd, munged) are not installed"
fi
exit $fail
