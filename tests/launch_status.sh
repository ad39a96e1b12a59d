#!/usr/bin/env bash
# launch_status.sh BUILD SOURCE - the launcher's job status (src/cli/launch.c) when mpirun's own
# exit status is not the ranks' (Open MPI exits 205 when it loses a host's daemon): with a stand-in
# mpirun (ZT_MPIRUN) that ends as a lost host makes the real one end,
#  1. the ranks' exit records ($ZT_RUN_DIR/exit-R, written by a failing rank before it aborts) give
#     the job the earliest record's code, and the launcher says what mpirun said;
#  2. without records (ranks on hosts that cannot see the run directory), the first error line a
#     rank printed ("zerotrain: error (peer): ...") gives the code;
#  3. with neither, a foreign status is exit 5 (peer), as before;
#  3b. a rank's exit record and an mpirun that does not end (waiting on a host it cannot reach):
#     the launcher kills mpirun fault.teardown_s later and the job has the record's code;
#  4. --hostfile and --mpirun-args reach mpirun (no --oversubscribe then; threads per rank from the
#     hostfile's slots), and --hostfile without --nproc is refused (exit 2);
#  5. a real 2-rank run with --hostfile (this machine, 2 slots) trains, and a rank that fails with a
#     zerotrain code (a corrupt checkpoint to resume: 4) ends the job with that code and its record.
set -uo pipefail
BUILD="$1"
Z="$BUILD/zerotrain"
T="$(mktemp -d)"
trap 'rm -rf "$T"' EXIT
fail=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fail=1; }
export OMP_NUM_THREADS= OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
unset OMP_NUM_THREADS

source "$(dirname "${BASH_SOURCE[0]}")/tiny_vocab.bash"
"$Z" tokenize /usr/share/common-licenses/GPL-3 -o "$T/train.bin" >/dev/null
fold_tokens "$T/train.bin"
cat > "$T/c.yaml" <<YAML
model: {preset: tiny, n_layer: 2, n_embd: 32, n_head: 2, max_seq_len: 32, vocab_size: $TINY_VOCAB}
data: {train: $T/train.bin}
training: {micro_batch_size: 2, seq_len: 16, steps: 4, warmup_steps: 1, lr: 3e-3}
logging: {print_every: 100}
YAML

# a stand-in mpirun: records its arguments and environment, then plays $FAKE_PLAY
cat > "$T/mpirun" <<'SH'
#!/bin/sh
printf '%s\n' "$@" > "$FAKE_DIR/args"
echo "$OMP_NUM_THREADS" > "$FAKE_DIR/threads"
now=$(date +%s)
case "$FAKE_PLAY" in
  records)   # rank 1 failed first (checkpoint, 4), rank 0 then lost its peer (5); mpirun lost a daemon
    echo "4 $((now - 2)).5 checkpoint: step-00000004/manifest.json: bad checksum" > "$ZT_RUN_DIR/exit-1"
    echo "5 $now.0 no data from rank 1 (world 2) after 5 s" > "$ZT_RUN_DIR/exit-0"
    echo "zerotrain: error (peer): no data from rank 1 (world 2) after 5 s" >&2
    echo "ORTE has lost communication with a remote daemon." >&2; exit 205 ;;
  said)      # no records (another host), only the forwarded error line
    echo "step 3 | loss 9.1" >&2
    echo "zerotrain: error (peer): collective all_gather: no data from rank 3 (world 4) after 5 s" >&2
    echo "ORTE has lost communication with a remote daemon." >&2; exit 205 ;;
  silent) exit 205 ;;
  hung)      # rank 0 failed (peer) and aborted; mpirun waits on a lost daemon's connection
    echo "5 $now.0 no data from rank 1 (world 2) after 5 s" > "$ZT_RUN_DIR/exit-0"
    exec sleep 600 ;;
  ok) exit 0 ;;
esac
SH
chmod +x "$T/mpirun"
run_fake() { # PLAY ARGS... -> $out, $rc
  mkdir -p "$T/fake"; rm -f "$T/fake/"*
  out="$(FAKE_PLAY="$1" FAKE_DIR="$T/fake" ZT_MPIRUN="$T/mpirun" ZT_RUN_DIR= "$Z" train "$T/c.yaml" "${@:2}" 2>&1)"
  rc=$?
}

# 1. exit records: the earliest wins
run_fake records --nproc 2
if [ $rc = 4 ] && grep -q "rank 1's exit 4 (checkpoint" <<<"$out" && grep -q "mpirun's own status was exit code 205" <<<"$out"; then
  ok "records: mpirun 205, rank 1's earlier exit 4 is the job's: $(grep -m1 "job ends" <<<"$out" | cut -c1-100)"
else bad "records: rc $rc (want 4): $out"; fi

# 2. the forwarded error line
run_fake said --nproc 4
if [ $rc = 5 ] && grep -q "the code of the first rank error (peer): collective all_gather" <<<"$out"; then
  ok "no records: the ranks' error line gives 5, not mpirun's 205"
else bad "said: rc $rc (want 5): $out"; fi

# 3. nothing from the ranks: a foreign status is a lost peer
run_fake silent --nproc 2
if [ $rc = 5 ] && grep -q "mpirun ended with exit code 205" <<<"$out"; then ok "nothing said: 205 -> 5, said"
else bad "silent: rc $rc (want 5): $out"; fi

# 3b. an mpirun that does not end after a rank's exit record
t0=$(date +%s%N)
run_fake hung --nproc 2 --set fault.teardown_s=1
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
if [ $rc = 5 ] && [ $ms -lt 8000 ] && grep -q "mpirun had not ended 1 s after rank 0's exit record (exit 5)" <<<"$out" &&
   grep -q "mpirun's own status was signal 9" <<<"$out"; then
  ok "mpirun hung after a rank's exit record: killed after fault.teardown_s, exit 5 ($ms ms)"
else bad "hung mpirun: rc $rc (want 5) after $ms ms: $out"; fi

# 4. --hostfile and --mpirun-args reach mpirun
printf 'node1 slots=2\nnode2 slots=2 # two ranks each\n' > "$T/hosts"
run_fake ok --nproc 4 --hostfile "$T/hosts" --mpirun-args "--mca oob_tcp_keepalive_time 3  -x FOO"
args="$(tr '\n' ' ' < "$T/fake/args")"
cores=$(nproc); want=$(( cores / 2 > 0 ? cores / 2 : 1 ))
if [ $rc = 0 ] && grep -q -- "-np 4 --hostfile $T/hosts " <<<"$args" && grep -q -- "--mca oob_tcp_keepalive_time 3 -x FOO " <<<"$args" &&
   ! grep -q -- "--oversubscribe" <<<"$args" && [ "$(cat "$T/fake/threads")" = "$want" ]; then
  ok "--hostfile, --mpirun-args passed to mpirun, no --oversubscribe, $want threads per rank (2 slots)"
else bad "hostfile: rc $rc, args: $args, threads $(cat "$T/fake/threads") (want $want)"; fi
out="$("$Z" train "$T/c.yaml" --hostfile "$T/hosts" 2>&1)"; rc=$?
if [ $rc = 2 ] && grep -q -- "--hostfile goes with --nproc" <<<"$out"; then ok "--hostfile without --nproc: exit 2"
else bad "--hostfile alone: rc $rc: $out"; fi
out="$("$Z" train "$T/c.yaml" --nproc 2 --hostfile "$T/none" 2>&1)"; rc=$?
if [ $rc = 2 ] && grep -q -- "--hostfile $T/none" <<<"$out"; then ok "a missing hostfile: exit 2 naming it"
else bad "missing hostfile: rc $rc: $out"; fi

# 5. the real mpirun with a hostfile of this machine
echo "localhost slots=2" > "$T/local"
out="$("$Z" train "$T/c.yaml" --nproc 2 --hostfile "$T/local" --ckpt-dir "$T/ck" --ckpt-every 2 2>&1)"; rc=$?
if [ $rc = 0 ] && [ -e "$T/ck/step-00000004" ]; then ok "--nproc 2 --hostfile (localhost slots=2) trains 4 steps"
else bad "real hostfile run: rc $rc: $(tail -5 <<<"$out")"; fi
m="$(ls "$T/ck/step-00000004/"*.bin 2>/dev/null | head -1)"
if [ -n "$m" ]; then
  printf 'XXXX' | dd of="$m" bs=1 seek=100 conv=notrunc 2>/dev/null
  out="$("$Z" train "$T/c.yaml" --nproc 2 --hostfile "$T/local" --resume "$T/ck/step-00000004" --set training.steps=6 2>&1)"; rc=$?
  if [ $rc = 4 ]; then ok "a rank's checkpoint error ends the job with 4: $(grep -m1 'error (checkpoint)' <<<"$out" | cut -c1-100)"
  else bad "corrupt resume: rc $rc (want 4): $(tail -5 <<<"$out")"; fi
else bad "no shard file in $T/ck/step-00000004"; fi
exit $fail
